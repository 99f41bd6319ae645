/* How the pool shares a job out: the exact split into chunks, no more
 * threads than the thread count (also after it changes between jobs), the
 * caller running the chunks a stalled worker has not claimed, a sleeping
 * worker woken by the next job, and many tiny jobs in a row from two user
 * threads. Waits that depend on another thread have a 10 s deadline, so a
 * broken pool fails instead of hanging; nothing asserts on timings. */
#define _GNU_SOURCE
#include "harness.h"

#include "core/core.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Poll `flag` until it is at least `want`, for up to 10 s: false on timeout. */
static bool wait_at_least(atomic_int *flag, int want) {
    double deadline = now_s() + 10.0;
    while (atomic_load(flag) < want) {
        if (now_s() > deadline) return false;
        sched_yield();
    }
    return true;
}

/* ---- the split: chunk c of k is exactly [n*c/k, n*(c+1)/k) ---- */

typedef struct split {
    _Atomic int64_t *end_at; /* end_at[begin] = end of the chunk starting there */
    atomic_int calls;
} split;

static void record_split(void *p, int64_t b, int64_t e) {
    split *s = p;
    atomic_store(&s->end_at[b], e);
    atomic_fetch_add(&s->calls, 1);
}

static void test_exact_split(void) {
    static const int threads[] = {1, 2, 3, 8};
    static const int64_t sizes[] = {5, 97, 1000, 65537};
    static const int64_t grains[] = {1, 3, 100};
    int saved = cn_get_num_threads();
    for (size_t ti = 0; ti < sizeof threads / sizeof *threads; ti++) {
        cn_set_num_threads(threads[ti]);
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            for (size_t gi = 0; gi < sizeof grains / sizeof *grains; gi++) {
                int64_t n = sizes[si], grain = grains[gi];
                split s;
                s.end_at = calloc((size_t)n, sizeof *s.end_at);
                atomic_init(&s.calls, 0);
                cn_parallel_for(n, grain, record_split, &s);
                /* the count the documented rule gives */
                int64_t k = n / grain, most = (int64_t)threads[ti] * CN_CHUNKS_PER_THREAD;
                if (k > most) k = most;
                if (k < 1 || threads[ti] == 1) k = 1;
                CHECK_MSG(atomic_load(&s.calls) == k,
                          "split n=%" PRId64 " grain=%" PRId64 " threads=%d: %d chunks, expected "
                          "%" PRId64,
                          n, grain, threads[ti], atomic_load(&s.calls), k);
                bool exact = true;
                for (int64_t c = 0; c < k; c++)
                    exact &= atomic_load(&s.end_at[n * c / k]) == n * (c + 1) / k;
                CHECK_MSG(exact, "split n=%" PRId64 " grain=%" PRId64 " threads=%d: boundaries",
                          n, grain, threads[ti]);
                free(s.end_at);
            }
        }
    }
    cn_set_num_threads(saved);
}

/* ---- the thread count bounds the threads a job runs on ---- */

typedef struct who {
    pthread_mutex_t mu;
    pthread_t ids[64];
    int nids;
    _Atomic int64_t work;
} who;

static void note_thread(who *w) {
    pthread_t me = pthread_self();
    pthread_mutex_lock(&w->mu);
    bool known = false;
    for (int i = 0; i < w->nids; i++) known |= pthread_equal(w->ids[i], me) != 0;
    if (!known && w->nids < 64) w->ids[w->nids++] = me;
    pthread_mutex_unlock(&w->mu);
}

static void busy_chunk(void *p, int64_t b, int64_t e) {
    who *w = p;
    note_thread(w);
    /* long enough that every woken worker, wanted or not, could join */
    usleep(300);
    atomic_fetch_add(&w->work, e - b);
}

static void test_thread_count_changes(void) {
    static const int counts[] = {8, 2, 3, 1, 4, 2, 6, 1, 3};
    int saved = cn_get_num_threads();
    for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
        int nt = counts[ci];
        CHECK(cn_set_num_threads(nt) == CN_OK);
        for (int rep = 0; rep < 4; rep++) {
            who w = {.nids = 0};
            pthread_mutex_init(&w.mu, NULL);
            atomic_init(&w.work, 0);
            if (rep % 2) cn_parallel_tasks(40, busy_chunk, &w);
            else cn_parallel_for(1000, 1, busy_chunk, &w);
            CHECK_EQ_INT(atomic_load(&w.work), rep % 2 ? 40 : 1000);
            CHECK_MSG(w.nids >= 1 && w.nids <= nt, "threads %d: a job ran on %d threads", nt,
                      w.nids);
            pthread_mutex_destroy(&w.mu);
        }
    }
    cn_set_num_threads(saved);
}

/* ---- a stalled worker holds up only the chunk it claimed ---- */

typedef struct stall {
    pthread_t caller;
    int64_t nchunks;
    atomic_int others_done; /* chunks finished besides the stalled one */
    atomic_int stalled;      /* a worker has claimed a chunk and stalls in it */
    atomic_int timed_out;
} stall;

static void stall_chunk(void *p, int64_t b, int64_t e) {
    (void)b;
    (void)e;
    stall *s = p;
    if (!pthread_equal(pthread_self(), s->caller)) {
        int zero = 0;
        if (atomic_compare_exchange_strong(&s->stalled, &zero, 1)) {
            /* As if descheduled: the caller must run every other chunk,
             * this worker's own range included. */
            if (!wait_at_least(&s->others_done, (int)s->nchunks - 1))
                atomic_store(&s->timed_out, 1);
            /* long enough for the caller to go to sleep on the job: it
             * must be woken when this last chunk is done */
            usleep(20000);
            return;
        }
    } else {
        usleep(500); /* give a worker time to claim its first chunk */
    }
    atomic_fetch_add(&s->others_done, 1);
}

static void test_caller_runs_unclaimed(void) {
    int saved = cn_get_num_threads();
    static const int threads[] = {2, 3};
    for (size_t ti = 0; ti < sizeof threads / sizeof *threads; ti++) {
        cn_set_num_threads(threads[ti]);
        int seen = 0;
        for (int attempt = 0; attempt < 40 && seen < 3; attempt++) {
            stall s = {.caller = pthread_self()};
            atomic_init(&s.others_done, 0);
            atomic_init(&s.stalled, 0);
            atomic_init(&s.timed_out, 0);
            bool tasks = attempt % 2;
            s.nchunks = tasks ? 13 : (int64_t)threads[ti] * CN_CHUNKS_PER_THREAD;
            if (tasks) cn_parallel_tasks(s.nchunks, stall_chunk, &s);
            else cn_parallel_for(s.nchunks * 10, 10, stall_chunk, &s);
            CHECK_MSG(!atomic_load(&s.timed_out),
                      "threads %d: the caller left chunks to a stalled worker", threads[ti]);
            if (atomic_load(&s.stalled)) {
                seen++;
                /* only a worker that has claimed nothing may still be late: the
                 * job is over when the call returns */
                CHECK_EQ_INT(atomic_load(&s.others_done), s.nchunks - 1);
            } else {
                CHECK_EQ_INT(atomic_load(&s.others_done), s.nchunks);
            }
        }
        CHECK_MSG(seen > 0, "threads %d: no worker ever took part", threads[ti]);
    }
    cn_set_num_threads(saved);
}

/* ---- a sleeping worker wakes up for the next job ---- */

typedef struct wake {
    pthread_t caller;
    atomic_int worker_ran, timed_out;
} wake;

static void wake_chunk(void *p, int64_t b, int64_t e) {
    (void)b;
    (void)e;
    wake *w = p;
    if (pthread_equal(pthread_self(), w->caller)) {
        /* The caller's chunks wait for a worker, so a job that no worker
         * joins (a lost wake-up) would time out here. */
        if (!wait_at_least(&w->worker_ran, 1)) atomic_store(&w->timed_out, 1);
    } else {
        atomic_fetch_add(&w->worker_ran, 1);
    }
}

static void test_sleeping_worker_wakes(void) {
    int saved = cn_get_num_threads();
    cn_set_num_threads(2);
    for (int rep = 0; rep < 4; rep++) {
        usleep(30000); /* beyond the spin and yield phases: the worker sleeps */
        wake w = {.caller = pthread_self()};
        atomic_init(&w.worker_ran, 0);
        atomic_init(&w.timed_out, 0);
        if (rep % 2) cn_parallel_tasks(2 * CN_CHUNKS_PER_THREAD, wake_chunk, &w);
        else cn_parallel_for(2 * CN_CHUNKS_PER_THREAD, 1, wake_chunk, &w);
        CHECK_MSG(!atomic_load(&w.timed_out), "rep %d: no worker woke for the job", rep);
        /* and after a change of the thread count */
        cn_set_num_threads(rep % 2 ? 2 : 3);
    }
    cn_set_num_threads(saved);
}

/* ---- many tiny jobs in a row, from two user threads ---- */

typedef struct tiny {
    _Atomic int hits[16];
    atomic_int bad;
} tiny;

static void tiny_chunk(void *p, int64_t b, int64_t e) {
    tiny *t = p;
    if (b < 0 || e > 16 || b >= e) atomic_fetch_add(&t->bad, 1);
    else
        for (int64_t i = b; i < e; i++) atomic_fetch_add(&t->hits[i], 1);
}

static void *tiny_jobs(void *arg) {
    int *failures = arg;
    for (int it = 0; it < 20000; it++) {
        tiny t;
        for (int i = 0; i < 16; i++) atomic_init(&t.hits[i], 0);
        atomic_init(&t.bad, 0);
        int n = 2 + it % 15;
        if (it % 3 == 2) cn_parallel_tasks(n, tiny_chunk, &t);
        else cn_parallel_for(n, 1 + it % 2, tiny_chunk, &t);
        bool ok = atomic_load(&t.bad) == 0;
        for (int i = 0; i < 16; i++) ok &= atomic_load(&t.hits[i]) == (i < n);
        if (!ok) (*failures)++;
    }
    return NULL;
}

static void test_tiny_jobs_two_callers(void) {
    int saved = cn_get_num_threads();
    static const int threads[] = {2, 3};
    for (size_t ti = 0; ti < sizeof threads / sizeof *threads; ti++) {
        cn_set_num_threads(threads[ti]);
        pthread_t th[2];
        int failures[2] = {0, 0};
        for (int i = 0; i < 2; i++)
            CHECK(pthread_create(&th[i], NULL, tiny_jobs, &failures[i]) == 0);
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        CHECK_EQ_INT(failures[0], 0);
        CHECK_EQ_INT(failures[1], 0);
    }
    cn_set_num_threads(saved);
}

int main(void) {
    RUN(test_exact_split);
    RUN(test_thread_count_changes);
    RUN(test_caller_runs_unclaimed);
    RUN(test_sleeping_worker_wakes);
    RUN(test_tiny_jobs_two_callers);
    return th_summary();
}
