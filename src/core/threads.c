/* The one thread pool every kernel runs on.
 *
 * A job is cut into chunks, several per thread where the grain allows, and
 * the chunks into one contiguous range per thread (its "home"). Each range
 * has a cursor, generation << 32 | next chunk in one 64-bit atomic; a thread
 * claims the chunks of its home range with compare-and-swap, then those left
 * in the other ranges. So a worker that wakes late, or is descheduled by
 * another process, delays the job by at most the one chunk it has claimed:
 * the caller runs the rest itself. On time, every thread runs its own range,
 * the same part of the data op after op (its cache keeps it). The
 * generation in each cursor means a late worker can never run a newer job's
 * chunk with an older job's function. Chunk boundaries depend on (n,
 * nchunks) only, never on who runs them.
 *
 * Waiting (a worker for the next job, the caller for chunks a worker holds)
 * spins briefly, then yields, then sleeps on a futex (waitword.c); a job
 * makes the wake-up system call only when a worker sleeps. */
#define _GNU_SOURCE
#include "core.h"
#include "waitword.h"
#include "profiler.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#ifdef CN_HAVE_OPENBLAS
void openblas_set_num_threads(int num_threads);
/* OpenBLAS's own, exported for its fork handler; weak, since a build of it
 * need not have it. */
extern int blas_thread_shutdown_(void) __attribute__((weak));
#endif

#define CN_MAX_THREADS 256
/* How long a waiting thread spins, then yields, before it sleeps (in us;
 * CN_SPIN_US and CN_YIELD_US override them). Waking a sleeping thread costs
 * tens of us on a VM, whose idle vCPU halts, so the gaps between the ops of
 * a step are best spun through; but a spinning thread takes a core another
 * process could use, and on a loaded machine that core is the caller's.
 * Yielding keeps this thread's vCPU awake on a quiet machine and hands the
 * core over at once on a busy one. Measured in docs/benchmarks.md. */
#define CN_DEFAULT_SPIN_US 50.0
#define CN_DEFAULT_YIELD_US 2000.0

typedef struct job {
    cn_range_fn fn;
    void *ctx;
    int64_t n;
    /* Read before a chunk is claimed, when the slot may already hold a
     * newer job: atomics, and a stale value only fails the claim. */
    _Atomic int64_t nchunks;
    atomic_int nt;                       /* threads taking part, caller included */
    _Atomic int64_t end[CN_MAX_THREADS]; /* range t ends here; the next starts here */
    _Atomic uint32_t done;               /* chunks finished: the caller sleeps on it */
    atomic_int caller_sleeps;
} job;

typedef struct cursor {
    _Alignas(64) _Atomic uint64_t v; /* one cache line each: no false sharing */
} cursor;

static job jobs[2]; /* indexed by generation & 1 */
static cursor cursors[CN_MAX_THREADS];
static _Alignas(64) _Atomic uint32_t pool_gen; /* latest job; idle workers sleep on it */
static atomic_int sleepers;
static atomic_bool park_requested; /* waiting workers: sleep now */
static _Atomic uint32_t resize_gen; /* workers beyond the thread count sleep on it */
static pthread_mutex_t submit_mu = PTHREAD_MUTEX_INITIALIZER;
static int nworkers;         /* started, under submit_mu */
static atomic_int nthreads;  /* wanted, including the caller; 0 until first use */
static double spin_us = CN_DEFAULT_SPIN_US, yield_us = CN_DEFAULT_YIELD_US;
static _Thread_local bool in_region;
_Thread_local int cn_pool_worker;

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

/* Spin, then yield, then tell the caller to sleep. */
typedef struct backoff {
    double t0;
    unsigned spins;
    int phase; /* 0 spinning, 1 yielding, 2 sleeping */
} backoff;

static void backoff_init(backoff *b) {
    b->t0 = now_us();
    b->spins = 0;
    b->phase = 0;
}

/* One step of waiting: true to poll again, false once it is time to sleep. */
static bool backoff_step(backoff *b) {
    if (b->phase == 0) {
        cpu_relax();
        if ((++b->spins & 63) != 0 || now_us() - b->t0 < spin_us) return true;
        b->phase = 1;
    }
    if (b->phase == 1) {
        if (now_us() - b->t0 < spin_us + yield_us) {
            sched_yield();
            return true;
        }
        b->phase = 2;
    }
    return false;
}

/* A chunk of range t of generation g, or -1 if none is left. */
static int64_t claim(uint32_t g, job *j, int t) {
    _Atomic uint64_t *cur = &cursors[t].v;
    uint64_t s = atomic_load_explicit(cur, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(s >> 32) != g) return -1;
        int64_t c = (int64_t)(uint32_t)s;
        if (c >= atomic_load_explicit(&j->end[t], memory_order_relaxed)) return -1;
        if (atomic_compare_exchange_weak_explicit(cur, &s, s + 1, memory_order_acq_rel,
                                                  memory_order_acquire))
            return c;
    }
}

/* Run chunks of generation g, the home range first, until none are left. */
static void run_chunks(uint32_t g, int home) {
    job *j = &jobs[g & 1];
    int nt = atomic_load_explicit(&j->nt, memory_order_relaxed);
    if (home >= nt) return;
    for (int k = 0; k < nt; k++) {
        int t = home + k < nt ? home + k : home + k - nt;
        int64_t c;
        while ((c = claim(g, j, t)) >= 0) {
            /* The job cannot change until this chunk is counted done. */
            int64_t nchunks = atomic_load_explicit(&j->nchunks, memory_order_relaxed);
            j->fn(j->ctx, j->n * c / nchunks, j->n * (c + 1) / nchunks);
            uint32_t d = atomic_fetch_add(&j->done, 1) + 1;
            if (d == (uint32_t)nchunks && atomic_load(&j->caller_sleeps))
                cn_word_wake_all(&j->done);
        }
    }
}

/* Until the next job (after `seen`) or a change of the thread count. */
static uint32_t wait_for_job(uint32_t seen, int home) {
    uint32_t g;
    backoff b;
    backoff_init(&b);
    while ((g = atomic_load_explicit(&pool_gen, memory_order_acquire)) == seen) {
        if (!atomic_load_explicit(&park_requested, memory_order_relaxed) && backoff_step(&b))
            continue;
        /* The submitter stores pool_gen, then reads sleepers; this thread
         * counts itself, then reads pool_gen: one of them sees the other. */
        atomic_fetch_add(&sleepers, 1);
        while ((g = atomic_load(&pool_gen)) == seen && home < atomic_load(&nthreads))
            cn_word_wait(&pool_gen, seen);
        atomic_fetch_sub(&sleepers, 1);
        break;
    }
    return g;
}

static void *worker_main(void *arg) {
    int home = (int)(intptr_t)arg;
    cn_pool_worker = home;
    in_region = true; /* anything a chunk calls runs serially */
    uint32_t seen = atomic_load(&pool_gen);
    for (;;) {
        if (home >= atomic_load(&nthreads)) {
            /* Beyond the thread count: out of the way until it grows. */
            uint32_t r = atomic_load(&resize_gen);
            if (home >= atomic_load(&nthreads)) cn_word_wait(&resize_gen, r);
            continue;
        }
        uint32_t g = wait_for_job(seen, home);
        if (g == seen) continue; /* the thread count changed */
        seen = g;
        run_chunks(g, home);
    }
    return NULL;
}

static double env_us(const char *name, double dflt) {
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    double v = strtod(s, &end);
    return *end == '\0' && v >= 0 && v <= 1e6 ? v : dflt;
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

/* Under submit_mu. */
static void ensure_workers(int want) {
    if (nworkers == 0) {
        spin_us = env_us("CN_SPIN_US", CN_DEFAULT_SPIN_US);
        yield_us = env_us("CN_YIELD_US", CN_DEFAULT_YIELD_US);
    }
    while (nworkers < want) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &attr, worker_main, (void *)(intptr_t)(nworkers + 1));
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
#ifdef CN_HAVE_OPENBLAS
    /* OpenBLAS runs on the calling thread only: large products are split
     * over this pool instead (gemm.c), so BLAS threads and ours never
     * compete for the cores (OpenBLAS's own threads spin in sched_yield).
     * That call leaves the worker threads OpenBLAS started when it was
     * loaded waiting for work in sched_yield, and on an Emerald Rapids
     * Xeon one spun through whole runs (1.1 s of an mlp training run), on
     * the core our second thread needs: MobileNetV3's batch-1 inference at
     * 2 threads took 8.8 ms instead of 5.2 over its first ten passes. So
     * they are stopped too (OpenBLAS starts them again if anything asks it
     * for more threads; with none running the call returns at once). Both
     * before the count is published: a thread that sees it may call BLAS,
     * which must not find workers being stopped. */
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) blas_thread_shutdown_();
#endif
    int old = atomic_exchange(&nthreads, n);
    if (old != n && nworkers > 0) {
        /* Workers now beyond the count leave their sleep on jobs; those
         * back within it leave theirs on the count. */
        atomic_fetch_add(&resize_gen, 1);
        cn_word_wake_all(&resize_gen);
        cn_word_wake_all(&pool_gen);
    }
    pthread_mutex_unlock(&submit_mu);
    return CN_OK;
}

int cn_get_num_threads(void) {
    int n = atomic_load_explicit(&nthreads, memory_order_relaxed);
    if (n == 0) {
        cn_set_num_threads(default_threads());
        n = atomic_load(&nthreads);
    }
    return n;
}

bool cn_in_parallel_region(void) { return in_region; }

void cn_threads_park(void) { atomic_store(&park_requested, true); }

/* Until every chunk is done; the caller has claimed all it could. */
static void wait_done(job *j, uint32_t nchunks) {
    backoff b;
    bool started = false;
    for (;;) {
        uint32_t d = atomic_load_explicit(&j->done, memory_order_acquire);
        if (d == nchunks) return;
        if (!started) {
            backoff_init(&b);
            started = true;
        }
        if (backoff_step(&b)) continue;
        /* Dekker as in wait_for_job, with the worker's count of done. */
        atomic_store(&j->caller_sleeps, 1);
        d = atomic_load(&j->done);
        if (d == nchunks) return;
        cn_word_wait(&j->done, d);
    }
}

/* Under submit_mu, with nt - 1 workers started. */
static void run_job(int64_t n, int64_t nchunks, int nt, cn_range_fn fn, void *ctx) {
    atomic_store_explicit(&park_requested, false, memory_order_relaxed);
    uint32_t g = atomic_load_explicit(&pool_gen, memory_order_relaxed) + 1;
    job *j = &jobs[g & 1];
    j->fn = fn;
    j->ctx = ctx;
    j->n = n;
    atomic_store_explicit(&j->nchunks, nchunks, memory_order_relaxed);
    atomic_store_explicit(&j->nt, nt, memory_order_relaxed);
    atomic_store_explicit(&j->done, 0, memory_order_relaxed);
    atomic_store_explicit(&j->caller_sleeps, 0, memory_order_relaxed);
    for (int t = 0; t < nt; t++) {
        atomic_store_explicit(&j->end[t], nchunks * (t + 1) / nt, memory_order_relaxed);
        atomic_store_explicit(&cursors[t].v, (uint64_t)g << 32 | (uint64_t)(nchunks * t / nt),
                              memory_order_release);
    }
    atomic_store(&pool_gen, g);
    if (atomic_load(&sleepers) > 0) cn_word_wake_all(&pool_gen);
    in_region = true;
    run_chunks(g, 0);
    in_region = false;
    wait_done(j, (uint32_t)nchunks);
}

/* The pool for a job of nchunks, or 0 to run it here: the thread count it
 * gets (workers started; submit_mu held on return). */
static int acquire_pool(int64_t nchunks) {
    int nt = cn_get_num_threads();
    if (nchunks <= 1 || nt <= 1 || in_region || pthread_mutex_trylock(&submit_mu) != 0) return 0;
    ensure_workers(nt - 1);
    if (nt > nworkers + 1) nt = nworkers + 1;
    if (nt > nchunks) nt = (int)nchunks;
    if (nt <= 1) {
        pthread_mutex_unlock(&submit_mu);
        return 0;
    }
    return nt;
}

void cn_parallel_for(int64_t n, int64_t grain, cn_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t nchunks = n / grain; /* rounded down: every chunk gets at least grain */
    int64_t most = (int64_t)cn_get_num_threads() * CN_CHUNKS_PER_THREAD;
    if (nchunks > most) nchunks = most;
    int nt = acquire_pool(nchunks);
    if (!nt) {
        fn(ctx, 0, n);
        return;
    }
    run_job(n, nchunks, nt, fn, ctx);
    pthread_mutex_unlock(&submit_mu);
}

void cn_parallel_tasks(int64_t ntasks, cn_range_fn fn, void *ctx) {
    if (ntasks <= 0) return;
    /* Bounded so the chunk counter (32 bits of a cursor) cannot overflow. */
    int nt = ntasks > INT32_MAX ? 0 : acquire_pool(ntasks);
    if (!nt) { /* serially, still one task per call as promised */
        for (int64_t t = 0; t < ntasks; t++) fn(ctx, t, t + 1);
        return;
    }
    run_job(ntasks, ntasks, nt, fn, ctx); /* one chunk per task */
    pthread_mutex_unlock(&submit_mu);
}
