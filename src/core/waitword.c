/* See waitword.h. The futex is used directly because a condition variable
 * needs its mutex taken by every waker, and the pool wakes on most jobs
 * when the machine is busy. */
#define _GNU_SOURCE
#include "waitword.h"

#if defined(__linux__) && !defined(CN_NO_FUTEX)

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

void cn_word_wait(_Atomic uint32_t *w, uint32_t expected) {
    /* The kernel compares *w with expected under its own lock, so a change
     * made before the call is never slept through. EINTR and EAGAIN are
     * spurious returns, which the callers' loops absorb. */
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void cn_word_wake_all(_Atomic uint32_t *w) {
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

#else

#include <pthread.h>

/* One pair for all words: a wake-up of another word is merely spurious. */
static pthread_mutex_t word_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t word_cv = PTHREAD_COND_INITIALIZER;

void cn_word_wait(_Atomic uint32_t *w, uint32_t expected) {
    pthread_mutex_lock(&word_mu);
    /* Checked under the mutex the waker takes after its change: the change
     * is seen here, or the broadcast comes after this thread waits. */
    if (atomic_load(w) == expected) pthread_cond_wait(&word_cv, &word_mu);
    pthread_mutex_unlock(&word_mu);
}

void cn_word_wake_all(_Atomic uint32_t *w) {
    (void)w;
    pthread_mutex_lock(&word_mu);
    pthread_cond_broadcast(&word_cv);
    pthread_mutex_unlock(&word_mu);
}

#endif
