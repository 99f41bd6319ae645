/* What each thread keeps for itself: spare tensor structs (tensor.c), the
 * chunks it carves nodes from (node.c) and the scope stack (scope.c).
 * cn_empty_cache (alloc.c) frees the calling thread's spares, so that a caller who
 * wants every allocation to reach malloc again (the fault-injection
 * sweeps) can have it; and all of it is freed when the thread exits
 * (thread_state.c), or a program whose threads come and go would lose it
 * with each. */
#ifndef CN_CORE_THREAD_STATE_H
#define CN_CORE_THREAD_STATE_H

/* Frees the calling thread's spare structs (and node chunks; the one it
 * carves from is given up, its nodes freed when their time comes). */
void cn_t_struct_cache_flush(void);
void cn_node_struct_cache_flush(void);
/* Frees the calling thread's scope stack (no scope may be open). */
void cn_scope_thread_free(void);

/* Once per thread, before it first keeps something: frees it at exit. */
void cn_thread_state_keep(void);

#endif
