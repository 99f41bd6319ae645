/* One thread in the library at a time, the GIL released around long
 * kernels (the protocol is described in common.h). */
#include "common.h"

#include <pthread.h>

_Atomic int cnpy_busy;
_Thread_local int cnpy_in_nogil;
static _Thread_local PyThreadState *saved_state;
static pthread_mutex_t busy_mutex = PTHREAD_MUTEX_INITIALIZER;

void cnpy_wait_idle_slow(void) {
    while (cnpy_busy) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&busy_mutex);
        pthread_mutex_unlock(&busy_mutex);
        Py_END_ALLOW_THREADS
    }
}

void cnpy_nogil_begin(void) {
    if (cnpy_in_nogil) { /* nested: already without the GIL */
        cnpy_in_nogil++;
        return;
    }
    cnpy_wait_idle();
    /* Nobody can set busy while we hold the GIL; a waiter may hold the mutex
     * for an instant (it needs no GIL to let go). */
    pthread_mutex_lock(&busy_mutex);
    cnpy_busy = 1;
    cnpy_in_nogil = 1;
    saved_state = PyEval_SaveThread();
}

void cnpy_nogil_end(void) {
    if (cnpy_in_nogil > 1) {
        cnpy_in_nogil--;
        return;
    }
    PyEval_RestoreThread(saved_state);
    saved_state = NULL;
    cnpy_in_nogil = 0;
    cnpy_busy = 0;
    pthread_mutex_unlock(&busy_mutex);
    if (cnpy_pending_releases) cnpy_drain_releases();
}
