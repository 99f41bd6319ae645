/* Frees what a thread kept for itself when it exits (thread_state.h). */
#include "core.h"
#include "thread_state.h"

#include <pthread.h>

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static bool key_ok;
static _Thread_local bool kept;

/* Runs at thread exit, while the thread's own storage is still there. */
static void thread_exit(void *unused) {
    (void)unused;
    /* What is kept after this (a node freed by another key's destructor)
     * registers again, and the destructors run another round. */
    kept = false;
    cn_scope_thread_free();
    cn_t_struct_cache_flush();
    cn_node_struct_cache_flush();
}

static void key_init(void) { key_ok = pthread_key_create(&key, thread_exit) == 0; }

void cn_thread_state_keep(void) {
    if (kept) return;
    pthread_once(&key_once, key_init);
    /* Any non-NULL value: the destructor runs only for those. */
    kept = key_ok && pthread_setspecific(key, (void *)1) == 0;
}
