/* The thread pool: cn_parallel_for and cn_parallel_tasks visit every index
 * exactly once for any size, grain and thread count; nested and concurrent
 * calls run correctly; the thread count is validated and CN_NUM_THREADS is
 * honoured (checked in a child process, since it is read once). */
#define _GNU_SOURCE
#include "harness.h"

#include "core/core.h"

#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct visit {
    _Atomic int *hits;
    int64_t n;
    atomic_int_fast64_t calls, min_chunk, max_chunk, bad;
} visit;

static void visit_init(visit *v, int64_t n) {
    v->hits = calloc((size_t)(n > 0 ? n : 1), sizeof *v->hits);
    v->n = n;
    atomic_init(&v->calls, 0);
    atomic_init(&v->min_chunk, INT64_MAX);
    atomic_init(&v->max_chunk, 0);
    atomic_init(&v->bad, 0);
}

static void visit_range(void *p, int64_t b, int64_t e) {
    visit *v = p;
    if (b < 0 || e > v->n || b >= e) {
        atomic_fetch_add(&v->bad, 1);
        return;
    }
    for (int64_t i = b; i < e; i++) atomic_fetch_add_explicit(&v->hits[i], 1, memory_order_relaxed);
    atomic_fetch_add(&v->calls, 1);
    int64_t len = e - b, cur = atomic_load(&v->min_chunk);
    while (len < cur && !atomic_compare_exchange_weak(&v->min_chunk, &cur, len)) {
    }
    cur = atomic_load(&v->max_chunk);
    while (len > cur && !atomic_compare_exchange_weak(&v->max_chunk, &cur, len)) {
    }
}

/* Every index hit exactly once. */
static bool visit_ok(visit *v) {
    bool ok = atomic_load(&v->bad) == 0;
    for (int64_t i = 0; i < v->n; i++) ok &= atomic_load(&v->hits[i]) == 1;
    free(v->hits);
    return ok;
}

static void test_parallel_for_coverage(void) {
    static const int threads[] = {1, 2, 3, 8};
    static const int64_t sizes[] = {0, 1, 2, 3, 7, 64, 1000, 4097, 100003};
    static const int64_t grains[] = {-5, 0, 1, 2, 5, 64, 1000, 1 << 20};
    int saved = cn_get_num_threads();
    for (size_t ti = 0; ti < sizeof threads / sizeof *threads; ti++) {
        int nt = threads[ti];
        CHECK(cn_set_num_threads(nt) == CN_OK);
        CHECK_EQ_INT(cn_get_num_threads(), nt);
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            for (size_t gi = 0; gi < sizeof grains / sizeof *grains; gi++) {
                int64_t n = sizes[si], grain = grains[gi], g = grain < 1 ? 1 : grain;
                visit v;
                visit_init(&v, n);
                cn_parallel_for(n, grain, visit_range, &v);
                int64_t calls = atomic_load(&v.calls), mn = atomic_load(&v.min_chunk);
                bool ok = visit_ok(&v);
                CHECK_MSG(ok,
                          "parallel_for n=%" PRId64 " grain=%" PRId64 " threads=%d: not every "
                          "index exactly once",
                          n, grain, nt);
                /* the documented count: min(n / grain, threads * CN_CHUNKS_PER_THREAD) */
                int64_t most = n / g < 1 ? 1 : n / g, cap = (int64_t)nt * CN_CHUNKS_PER_THREAD;
                if (most > cap) most = cap;
                if (nt == 1) most = 1;
                CHECK_MSG(calls <= most && (n == 0 ? calls == 0 : calls >= 1),
                          "parallel_for n=%" PRId64 " grain=%" PRId64 " threads=%d: %" PRId64
                          " chunks",
                          n, grain, nt, calls);
                CHECK_MSG(n == 0 || mn >= (n < g ? n : g),
                          "parallel_for n=%" PRId64 " grain=%" PRId64
                          " threads=%d: a chunk of %" PRId64 " is below the grain",
                          n, grain, nt, mn);
                /* equal chunks (n*c/k boundaries): lengths differ by one at most */
                CHECK_MSG(n == 0 || atomic_load(&v.max_chunk) - mn <= 1,
                          "parallel_for n=%" PRId64 " grain=%" PRId64
                          " threads=%d: chunks of %" PRId64 " to %" PRId64,
                          n, grain, nt, mn, (int64_t)atomic_load(&v.max_chunk));
                /* a large job with enough work for every thread is split */
                if (n >= (int64_t)nt * g && nt > 1 && n > 1)
                    CHECK_MSG(calls > 1,
                              "parallel_for n=%" PRId64 " grain=%" PRId64
                              " threads=%d ran as one chunk",
                              n, grain, nt);
            }
        }
    }
    cn_set_num_threads(saved);
}

static void visit_task(void *p, int64_t b, int64_t e) {
    visit *v = p;
    if (e != b + 1) atomic_fetch_add(&v->bad, 1); /* one task per call */
    visit_range(p, b, e);
}

static void test_parallel_tasks_coverage(void) {
    static const int threads[] = {1, 2, 3, 8};
    static const int64_t counts[] = {-1, 0, 1, 2, 3, 17, 1000, 20000};
    int saved = cn_get_num_threads();
    for (size_t ti = 0; ti < sizeof threads / sizeof *threads; ti++) {
        cn_set_num_threads(threads[ti]);
        for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
            int64_t n = counts[ci];
            visit v;
            visit_init(&v, n > 0 ? n : 0);
            cn_parallel_tasks(n, visit_task, &v);
            int64_t calls = atomic_load(&v.calls);
            bool ok = visit_ok(&v);
            CHECK_MSG(ok, "parallel_tasks n=%" PRId64 " threads=%d", n, threads[ti]);
            CHECK_EQ_INT(calls, n > 0 ? n : 0);
        }
    }
    cn_set_num_threads(saved);
}

/* ---- nesting: an inner call from inside a chunk runs serially ---- */

#define ROWS 64
#define COLS 300

typedef struct grid {
    _Atomic int hits[ROWS][COLS];
    atomic_int inner_splits, bad;
    bool tasks_inside;
} grid;

typedef struct row_ctx {
    grid *g;
    int64_t row;
    int calls;
} row_ctx;

static void inner_cols(void *p, int64_t b, int64_t e) {
    row_ctx *r = p;
    r->calls++;
    for (int64_t c = b; c < e; c++) atomic_fetch_add(&r->g->hits[r->row][c], 1);
}

static void inner_task(void *p, int64_t b, int64_t e) {
    row_ctx *r = p;
    if (e != b + 1) atomic_fetch_add(&r->g->bad, 1);
    inner_cols(p, b, e);
}

static void outer_rows(void *p, int64_t b, int64_t e) {
    grid *g = p;
    bool in_region = cn_in_parallel_region();
    for (int64_t row = b; row < e; row++) {
        row_ctx r = {g, row, 0};
        if (g->tasks_inside)
            cn_parallel_tasks(COLS, inner_task, &r);
        else
            cn_parallel_for(COLS, 1, inner_cols, &r);
        /* inside the pool a nested call runs serially on this thread: one
         * chunk for parallel_for, every task in order for parallel_tasks */
        if (in_region && r.calls != (g->tasks_inside ? COLS : 1))
            atomic_fetch_add(&g->inner_splits, 1);
    }
}

static void test_nested(void) {
    int saved = cn_get_num_threads();
    static const int threads[] = {1, 2, 3, 8};
    for (size_t ti = 0; ti < sizeof threads / sizeof *threads; ti++) {
        cn_set_num_threads(threads[ti]);
        for (int tasks_inside = 0; tasks_inside < 2; tasks_inside++) {
            for (int outer_tasks = 0; outer_tasks < 2; outer_tasks++) {
                grid *g = calloc(1, sizeof *g);
                g->tasks_inside = tasks_inside;
                if (outer_tasks)
                    cn_parallel_tasks(ROWS, outer_rows, g);
                else
                    cn_parallel_for(ROWS, 1, outer_rows, g);
                bool ok = true;
                for (int r = 0; r < ROWS; r++)
                    for (int c = 0; c < COLS; c++) ok &= atomic_load(&g->hits[r][c]) == 1;
                CHECK_MSG(
                    ok, "nested (threads %d, inner tasks %d, outer tasks %d): not every cell once",
                    threads[ti], tasks_inside, outer_tasks);
                CHECK(atomic_load(&g->bad) == 0);
                CHECK_MSG(atomic_load(&g->inner_splits) == 0,
                          "nested calls were split inside the pool (threads %d)", threads[ti]);
                free(g);
            }
        }
    }
    CHECK(!cn_in_parallel_region()); /* the caller is outside again */
    cn_set_num_threads(saved);
}

static void try_set_threads(void *p, int64_t b, int64_t e) {
    (void)b;
    (void)e;
    atomic_int *rc = p;
    /* only meaningful on the pool, where the submitter holds the pool */
    if (cn_in_parallel_region()) atomic_store(rc, cn_set_num_threads(1));
}

static void test_set_threads_inside_region(void) {
    int saved = cn_get_num_threads();
    cn_set_num_threads(2);
    atomic_int rc;
    atomic_init(&rc, 1);
    cn_parallel_for(1000, 1, try_set_threads, &rc);
    CHECK_EQ_INT(atomic_load(&rc), CN_ESTATE);
    CHECK_EQ_INT(cn_get_num_threads(), 2);
    cn_set_num_threads(saved);
}

/* ---- two user threads using the pool at once ---- */

static void *hammer(void *arg) {
    int *failures = arg;
    for (int it = 0; it < 200; it++) {
        visit v;
        int64_t n = it % 2 ? 1000 + it * 37 : 20 + it;
        visit_init(&v, n);
        if (it % 2)
            cn_parallel_for(n, 16, visit_range, &v);
        else
            cn_parallel_tasks(n, visit_task, &v);
        if (!visit_ok(&v)) (*failures)++;
    }
    return NULL;
}

static void test_concurrent_callers(void) {
    int saved = cn_get_num_threads();
    cn_set_num_threads(3);
    pthread_t th[3];
    int failures[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) CHECK(pthread_create(&th[i], NULL, hammer, &failures[i]) == 0);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(failures[i], 0);
    cn_set_num_threads(saved);
}

/* ---- the thread count ---- */

static void test_set_num_threads_errors(void) {
    int before = cn_get_num_threads();
    CHECK(before >= 1);
    CHECK_STATUS_ERROR(cn_set_num_threads(0), "set_num_threads: 0 is out of range (1..256)");
    CHECK_STATUS_ERROR(cn_set_num_threads(-3), "-3 is out of range");
    CHECK_STATUS_ERROR(cn_set_num_threads(10000), "10000 is out of range");
    CHECK_EQ_INT(cn_get_num_threads(), before); /* unchanged */
    CHECK(cn_set_num_threads(256) == CN_OK);
    CHECK_EQ_INT(cn_get_num_threads(), 256);
    CHECK(cn_set_num_threads(before) == CN_OK);
}

static const char *self_path;

/* Run this program as a child with CN_NUM_THREADS = value (NULL: unset) and
 * return the thread count it reports through its exit status. */
static int child_threads(const char *value) {
    int nenv = 0;
    while (environ[nenv]) nenv++;
    char **env = calloc((size_t)nenv + 2, sizeof *env);
    int k = 0;
    for (int i = 0; i < nenv; i++)
        if (strncmp(environ[i], "CN_NUM_THREADS=", 15) != 0) env[k++] = environ[i];
    char var[64];
    if (value) {
        snprintf(var, sizeof var, "CN_NUM_THREADS=%s", value);
        env[k++] = var;
    }
    env[k] = NULL;
    char *argv[] = {(char *)self_path, "--report-threads", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, self_path, NULL, NULL, argv, env);
    free(env);
    if (rc != 0) return -1;
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

static void test_env_num_threads(void) {
    cpu_set_t set;
    int cores = 1;
    if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
    if (cores > 200) cores = 200; /* the child reports through an exit status */
    CHECK_EQ_INT(child_threads("3"), 3);
    CHECK_EQ_INT(child_threads("1"), 1);
    CHECK_EQ_INT(child_threads("7"), 7);
    CHECK_EQ_INT(child_threads(NULL), cores);
    CHECK_EQ_INT(child_threads(""), cores);
    CHECK_EQ_INT(child_threads("0"), cores);
    CHECK_EQ_INT(child_threads("-2"), cores);
    CHECK_EQ_INT(child_threads("lots"), cores);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--report-threads") == 0) {
        int n = cn_get_num_threads();
        /* use the pool once so a bad count would show up as a crash */
        visit v;
        visit_init(&v, 1000);
        cn_parallel_for(1000, 1, visit_range, &v);
        if (!visit_ok(&v)) return 255;
        return n < 250 ? n : 250;
    }
    self_path = "/proc/self/exe";
    char *real = realpath(argv[0], NULL);
    if (real) self_path = real;
    RUN(test_parallel_for_coverage);
    RUN(test_parallel_tasks_coverage);
    RUN(test_nested);
    RUN(test_set_threads_inside_region);
    RUN(test_concurrent_callers);
    RUN(test_set_num_threads_errors);
    RUN(test_env_num_threads);
    free(real);
    return th_summary();
}
