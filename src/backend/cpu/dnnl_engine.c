/* oneDNN's CPU engine and thread setting (dnnl_engine.h). */
/* RTLD_DEFAULT */
#define _GNU_SOURCE
#include "dnnl_engine.h"

#ifdef CN_HAVE_DNNL

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static dnnl_engine_t eng;
static void (*set_threads)(int);

static void init_once(void) {
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) eng = NULL;
    /* oneDNN's OpenMP runtime is loaded with it; its thread count is set
     * through it rather than by linking OpenMP ourselves. */
    set_threads = (void (*)(int))(uintptr_t)dlsym(RTLD_DEFAULT, "omp_set_num_threads");
}

dnnl_engine_t cn_dnnl_engine(void) {
    pthread_once(&once, init_once);
    return eng;
}

void cn_dnnl_one_thread(void) {
    pthread_once(&once, init_once);
    if (set_threads) set_threads(1);
}

dnnl_memory_t cn_dnnl_mem(const dnnl_memory_desc_t *md, void *p) {
    dnnl_memory_t m = NULL;
    if (dnnl_memory_create(&m, md, cn_dnnl_engine(), p) != dnnl_success) return NULL;
    return m;
}

#endif
