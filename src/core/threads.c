/* The one thread pool every kernel runs on.
 *
 * A job is published as (generation, next chunk) in one 64-bit atomic; the
 * caller and the workers claim chunks with compare-and-swap, so a worker that
 * wakes late can never run a chunk of a newer job with an older job's
 * function. Workers spin for up to CN_SPIN_US after a job (the next op
 * usually follows within microseconds), then sleep on a condition variable. */
#define _GNU_SOURCE
#include "core.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#ifdef CN_HAVE_OPENBLAS
void openblas_set_num_threads(int num_threads);
#endif

#define CN_MAX_THREADS 256
/* How long a worker spins for the next job before it sleeps. Waking a
 * sleeping thread costs far more than the ~100 us it takes on bare metal
 * on virtual machines, where an idle vCPU is halted (a 512 x 512 product
 * split over two threads ran at half speed when its helper had to be
 * woken); 2 ms of spinning covers the gaps between the ops of a training
 * step without burning a core when the program is idle. */
#define CN_SPIN_US 2000.0

typedef struct job {
    cn_range_fn fn;
    void *ctx;
    int64_t n, nchunks;
    atomic_int_fast64_t done;
} job;

static job jobs[2]; /* indexed by generation & 1 */
static _Atomic uint64_t pool_state; /* generation << 32 | next chunk */
static atomic_int sleepers;
static atomic_bool park_requested; /* spinning workers: go to sleep now */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t submit_mu = PTHREAD_MUTEX_INITIALIZER;
static int nworkers;  /* started */
static int nthreads;  /* wanted, including the caller; 0 until first use */
static _Thread_local bool in_region;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Claim and run chunks of generation g until none are left. */
static void run_chunks(uint32_t g) {
    for (;;) {
        uint64_t s = atomic_load_explicit(&pool_state, memory_order_acquire);
        if ((uint32_t)(s >> 32) != g) return;
        job *j = &jobs[g & 1];
        int64_t c = (int64_t)(uint32_t)s;
        int64_t nchunks = j->nchunks;
        if (c >= nchunks) return;
        if (!atomic_compare_exchange_weak_explicit(&pool_state, &s, s + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        int64_t begin = j->n * c / nchunks, end = j->n * (c + 1) / nchunks;
        j->fn(j->ctx, begin, end);
        atomic_fetch_add_explicit(&j->done, 1, memory_order_release);
    }
}

static void *worker_main(void *arg) {
    (void)arg;
    in_region = true; /* anything a chunk calls runs serially */
    uint32_t seen = (uint32_t)(atomic_load(&pool_state) >> 32);
    for (;;) {
        uint32_t g = seen;
        double t0 = now_us();
        for (int spins = 0;; spins++) {
            g = (uint32_t)(atomic_load_explicit(&pool_state, memory_order_acquire) >> 32);
            if (g != seen) break;
            cpu_relax();
            if ((spins & 255) == 255 &&
                (now_us() - t0 > CN_SPIN_US || atomic_load_explicit(&park_requested, memory_order_relaxed)))
                break;
        }
        if (g == seen) {
            pthread_mutex_lock(&pool_mu);
            atomic_fetch_add(&sleepers, 1);
            while ((g = (uint32_t)(atomic_load(&pool_state) >> 32)) == seen)
                pthread_cond_wait(&pool_cv, &pool_mu);
            atomic_fetch_sub(&sleepers, 1);
            pthread_mutex_unlock(&pool_mu);
        }
        seen = g;
        run_chunks(g);
    }
    return NULL;
}

static int default_threads(void) {
    const char *env = getenv("CN_NUM_THREADS");
    if (env && *env) {
        int n = atoi(env);
        if (n >= 1) return n < CN_MAX_THREADS ? n : CN_MAX_THREADS;
    }
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n >= 1) return n < CN_MAX_THREADS ? n : CN_MAX_THREADS;
    }
#endif
    return 1;
}

static void ensure_workers(int want) {
    while (nworkers < want) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &attr, worker_main, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0) break; /* run with the workers we have */
        nworkers++;
    }
}

int cn_set_num_threads(int n) {
    if (n < 1 || n > CN_MAX_THREADS)
        return cn_failc(CN_EINVAL, "set_num_threads: %d is out of range (1..%d)", n,
                        CN_MAX_THREADS);
    if (in_region) /* the job's submitter holds submit_mu: waiting for it would deadlock */
        return cn_failc(CN_ESTATE, "set_num_threads: not allowed inside a parallel region");
    pthread_mutex_lock(&submit_mu);
    nthreads = n;
    pthread_mutex_unlock(&submit_mu);
#ifdef CN_HAVE_OPENBLAS
    /* OpenBLAS runs on the calling thread only: large products are split
     * over this pool instead (gemm.c), so BLAS threads and ours never
     * compete for the cores (OpenBLAS's own threads spin in sched_yield). */
    openblas_set_num_threads(1);
#endif
    return CN_OK;
}

int cn_get_num_threads(void) {
    if (nthreads == 0) cn_set_num_threads(default_threads());
    return nthreads;
}

bool cn_in_parallel_region(void) { return in_region; }

void cn_threads_park(void) { atomic_store(&park_requested, true); }

static void run_job(int64_t n, int64_t nchunks, cn_range_fn fn, void *ctx) {
    atomic_store_explicit(&park_requested, false, memory_order_relaxed);
    uint64_t s = atomic_load(&pool_state);
    uint32_t g = (uint32_t)(s >> 32) + 1;
    job *j = &jobs[g & 1];
    j->fn = fn;
    j->ctx = ctx;
    j->n = n;
    j->nchunks = nchunks;
    atomic_store_explicit(&j->done, 0, memory_order_relaxed);
    atomic_store(&pool_state, (uint64_t)g << 32);
    if (atomic_load(&sleepers) > 0) {
        pthread_mutex_lock(&pool_mu);
        pthread_cond_broadcast(&pool_cv);
        pthread_mutex_unlock(&pool_mu);
    }
    in_region = true;
    run_chunks(g);
    in_region = false;
    while (atomic_load_explicit(&j->done, memory_order_acquire) < nchunks) cpu_relax();
}

void cn_parallel_for(int64_t n, int64_t grain, cn_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int nt = cn_get_num_threads();
    int64_t nchunks = n / grain; /* rounded down: every chunk gets at least grain */
    if (nchunks > nt) nchunks = nt;
    if (nchunks <= 1 || in_region || pthread_mutex_trylock(&submit_mu) != 0) {
        fn(ctx, 0, n);
        return;
    }
    ensure_workers(nt - 1);
    if (nworkers == 0) {
        pthread_mutex_unlock(&submit_mu);
        fn(ctx, 0, n);
        return;
    }
    run_job(n, nchunks, fn, ctx);
    pthread_mutex_unlock(&submit_mu);
}

/* Serially, still one task per call as promised. */
static void run_tasks_here(int64_t ntasks, cn_range_fn fn, void *ctx) {
    for (int64_t t = 0; t < ntasks; t++) fn(ctx, t, t + 1);
}

void cn_parallel_tasks(int64_t ntasks, cn_range_fn fn, void *ctx) {
    if (ntasks <= 0) return;
    int nt = cn_get_num_threads();
    /* Bounded so the chunk counter (32 bits of the pool state) and the
     * chunk arithmetic (n * c) cannot overflow. */
    if (ntasks == 1 || nt == 1 || ntasks > INT32_MAX || in_region ||
        pthread_mutex_trylock(&submit_mu) != 0) {
        run_tasks_here(ntasks, fn, ctx);
        return;
    }
    ensure_workers(nt - 1);
    if (nworkers == 0) {
        pthread_mutex_unlock(&submit_mu);
        run_tasks_here(ntasks, fn, ctx);
        return;
    }
    /* One chunk per task: threads claim tasks dynamically. */
    run_job(ntasks, ntasks, fn, ctx);
    pthread_mutex_unlock(&submit_mu);
}
