/* oneDNN's CPU engine, shared by the convolutions (conv_dnnl.c) and
 * autocast's matmul (matmul_dnnl.c). */
#ifndef CN_CPU_DNNL_ENGINE_H
#define CN_CPU_DNNL_ENGINE_H

#ifdef CN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

/* The engine, made once; NULL when oneDNN cannot make one. */
dnnl_engine_t cn_dnnl_engine(void);
/* oneDNN on one thread: primitives run inside our pool, and split their
 * work, when created and when run, for the OpenMP thread count then in
 * force. */
void cn_dnnl_one_thread(void);
/* A memory object over p (NULL on failure). */
dnnl_memory_t cn_dnnl_mem(const dnnl_memory_desc_t *md, void *p);
#endif

#endif
