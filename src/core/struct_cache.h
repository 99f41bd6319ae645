/* The per-thread lists of spare tensor and node structs (tensor.c, node.c)
 * emptied by cn_empty_cache (alloc.c), so that a caller who wants every
 * allocation to reach malloc again (the fault-injection sweeps) can have
 * it. */
#ifndef CN_CORE_STRUCT_CACHE_H
#define CN_CORE_STRUCT_CACHE_H

/* Frees the calling thread's spare structs. */
void cn_t_struct_cache_flush(void);
void cn_node_struct_cache_flush(void);

#endif
