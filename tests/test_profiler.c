/* The profiler: events of eager ops and program steps with their FLOPs and
 * bytes, nesting in ranges, the event cap, the Chrome trace (read back by
 * Python's json module and by cn_profile_trace_summary). */
#include "harness.h"

#include <unistd.h>

/* The one event named name of kind k (NULL when there are none or several). */
static int count_named(const char *name, cn_profile_kind k, cn_profile_event *out) {
    int found = 0;
    int64_t n = cn_profiler_num_events();
    for (int64_t i = 0; i < n; i++) {
        cn_profile_event e;
        if (cn_profiler_get_event(i, &e) == 0 && e.kind == k && !strcmp(e.name, name)) {
            if (out) *out = e;
            found++;
        }
    }
    return found;
}

static bool inside(const cn_profile_event *outer, const cn_profile_event *e) {
    return outer->thread == e->thread && outer->start_ns <= e->start_ns && e->end_ns <= outer->end_ns;
}

static void test_eager_ops(void) {
    const int64_t M = 8, K = 16, N = 4, n = 1000;
    cn_tensor *a = th_random(CN_F32, 2, (int64_t[]){M, K}, -1, 1, 0, NULL);
    cn_tensor *b = th_random(CN_F32, 2, (int64_t[]){K, N}, -1, 1, 0, NULL);
    cn_tensor *x = th_random(CN_F32, 1, (int64_t[]){n}, -1, 1, 0, NULL);
    cn_tensor *y = th_random(CN_F32, 1, (int64_t[]){n}, -1, 1, 0, NULL);
    CHECK(!cn_profiler_enabled());
    CHECK(cn_profiler_start(NULL) == 0);
    CHECK(cn_profiler_enabled());
    cn_profiler_range_begin("outer");
    CHECK(cn_matmul(a, b) != NULL);
    CHECK(cn_add(x, y) != NULL);
    CHECK(cn_reshape(x, 2, (int64_t[]){10, 100}) != NULL); /* a view: not recorded */
    cn_profiler_range_end();
    CHECK(cn_profiler_stop() == 0);
    CHECK(!cn_profiler_enabled());
    CHECK(cn_add(x, y) != NULL); /* off: nothing more */

    CHECK_EQ_INT(cn_profiler_num_events(), 3);
    CHECK_EQ_INT(cn_profiler_dropped_events(), 0);
    cn_profile_event mm, add, outer, first;
    CHECK_EQ_INT(count_named("matmul", CN_PROFILE_OP, &mm), 1);
    CHECK_EQ_INT(count_named("add", CN_PROFILE_OP, &add), 1);
    CHECK_EQ_INT(count_named("outer", CN_PROFILE_RANGE, &outer), 1);
    CHECK_EQ_INT(count_named("reshape", CN_PROFILE_OP, NULL), 0);
    CHECK_CLOSE(mm.flops, 2.0 * M * N * K, 0, 0);
    CHECK_CLOSE(mm.bytes, 4.0 * (M * K + K * N + M * N), 0, 0);
    CHECK_CLOSE(add.flops, (double)n, 0, 0);
    CHECK_CLOSE(add.bytes, 3.0 * n * 4, 0, 0);
    CHECK(mm.device.kind == CN_DEVICE_CPU);
    /* Nesting: the range first (ordered by start, the enclosing one before
     * what it holds), both ops inside it, in call order, on thread 0. */
    CHECK(cn_profiler_get_event(0, &first) == 0 && first.kind == CN_PROFILE_RANGE);
    CHECK(inside(&outer, &mm) && inside(&outer, &add));
    CHECK(mm.end_ns <= add.start_ns);
    CHECK(mm.thread == 0 && add.thread == 0);
    CHECK(mm.start_ns >= 0 && mm.end_ns >= mm.start_ns);
    CHECK(add.memory_bytes > 0); /* x, y and the sum at least */

    /* A broadcast operand is read once: bytes count its distinct elements. */
    cn_tensor *row = th_random(CN_F32, 1, (int64_t[]){N}, -1, 1, 0, NULL);
    CHECK(cn_profiler_start(NULL) == 0);
    CHECK(cn_add(cn_matmul(a, b), row) != NULL);
    CHECK(cn_profiler_stop() == 0);
    CHECK_EQ_INT(count_named("add", CN_PROFILE_OP, &add), 1);
    CHECK_CLOSE(add.bytes, 4.0 * (M * N + N + M * N), 0, 0);
    CHECK_EQ_INT(count_named("outer", CN_PROFILE_RANGE, NULL), 0); /* the old session's */

    CHECK_STATUS_ERROR(cn_profiler_get_event(99, &first), "out of range");
    CHECK_ERROR(cn_profiler_start(&(cn_profiler_opts){.max_events = -1}) == 0, "negative");
}

static void test_event_cap(void) {
    cn_tensor *x = th_random(CN_F32, 1, (int64_t[]){16}, -1, 1, 0, NULL);
    CHECK(cn_profiler_start(&(cn_profiler_opts){.max_events = 2}) == 0);
    for (int i = 0; i < 5; i++) CHECK(cn_neg(x) != NULL);
    cn_profiler_stop();
    CHECK_EQ_INT(cn_profiler_num_events(), 2);
    CHECK_EQ_INT(cn_profiler_dropped_events(), 3);
}

static void test_program_steps(void) {
    const int64_t M = 32, K = 8, N = 5;
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, 2, (int64_t[]){-1, K});
    cn_tensor *w = th_random(CN_F32, 2, (int64_t[]){K, N}, -1, 1, 0, NULL);
    cn_tensor *b = th_random(CN_F32, 1, (int64_t[]){N}, -1, 1, 0, NULL);
    cn_tensor *y = cn_relu(cn_add(cn_matmul(x, w), b));
    cn_program *p = cn_compile(g, &y, 1, NULL);
    CHECK(p != NULL);
    cn_tensor *xv = th_random(CN_F32, 2, (int64_t[]){M, K}, -1, 1, 0, NULL), *out = NULL;
    CHECK(cn_run(p, &x, &xv, 1, &out, 1) == 0); /* warm: plans */
    CHECK(cn_profiler_start(NULL) == 0);
    CHECK(cn_run(p, &x, &xv, 1, &out, 1) == 0);
    CHECK(cn_run(p, &x, &xv, 1, &out, 1) == 0);
    cn_profiler_stop();
    /* One fused step (the matmul with its epilogue) per run, inside "run". */
    cn_profile_event step, run;
    CHECK_EQ_INT(count_named("fused[matmul; add relu]", CN_PROFILE_STEP, &step), 2);
    CHECK_EQ_INT(count_named("run", CN_PROFILE_RANGE, &run), 2);
    CHECK(inside(&run, &step));
    CHECK_CLOSE(step.flops, 2.0 * M * N * K + 2.0 * M * N, 0, 0);
    CHECK_CLOSE(step.bytes, 4.0 * (M * K + K * N + N + M * N), 0, 0);
    CHECK_EQ_INT(count_named("matmul", CN_PROFILE_OP, NULL), 0); /* not eager */
    cn_program_free(p);
    cn_graph_free(g);
}

/* Independent small steps run as tasks of the pool, each recorded by the
 * thread that ran it: none is lost, and ranges stay on their thread. */
static void test_parallel_steps(void) {
    int threads = cn_get_num_threads();
    cn_set_num_threads(2);
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, 1, (int64_t[]){-1});
    cn_tensor *outs[8];
    for (int i = 0; i < 8; i++) outs[i] = cn_sum(cn_exp(cn_mul_scalar(x, i + 1)), NULL, 0, false);
    cn_program *p = cn_compile(g, outs, 8, NULL);
    CHECK(p != NULL);
    cn_tensor *xv = th_random(CN_F32, 1, (int64_t[]){32768}, -1, 1, 0, NULL), *res[8];
    CHECK(cn_run(p, &x, &xv, 1, res, 8) == 0);
    const int runs = 20;
    CHECK(cn_profiler_start(NULL) == 0);
    for (int r = 0; r < runs; r++) {
        cn_scope_begin();
        CHECK(cn_run(p, &x, &xv, 1, res, 8) == 0);
        cn_scope_end();
    }
    cn_profiler_stop();
    int64_t n = cn_profiler_num_events(), steps = 0, ranges = 0, elsewhere = 0;
    for (int64_t i = 0; i < n; i++) {
        cn_profile_event e;
        CHECK(cn_profiler_get_event(i, &e) == 0);
        steps += e.kind == CN_PROFILE_STEP;
        ranges += e.kind == CN_PROFILE_RANGE;
        elsewhere += e.thread > 0;
        CHECK(e.thread >= 0 && e.thread < 2 && e.end_ns >= e.start_ns);
        CHECK(e.kind != CN_PROFILE_RANGE || e.thread == 0);
    }
    CHECK_EQ_INT(steps, (int64_t)runs * cn_program_num_steps(p));
    CHECK_EQ_INT(ranges, runs);
    /* How many ran on the worker depends on the machine's load. */
    cn_program_stats ps;
    cn_program_stats_get(p, &ps);
    fprintf(stderr, "  (%lld of %lld steps on the pool's worker; %d steps in %d groups)\n",
            (long long)elsewhere, (long long)steps, ps.nsteps, ps.nlevels);
    cn_program_free(p);
    cn_graph_free(g);
    cn_set_num_threads(threads);
}

/* Reads the whole of a small file. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 16);
    if (buf) buf[fread(buf, 1, (1 << 16) - 1, f)] = '\0';
    fclose(f);
    return buf;
}

static void test_chrome_trace(void) {
    cn_tensor *a = th_random(CN_F32, 2, (int64_t[]){6, 7}, -1, 1, 0, NULL);
    cn_tensor *b = th_random(CN_F32, 2, (int64_t[]){7, 3}, -1, 1, 0, NULL);
    CHECK(cn_profiler_start(NULL) == 0);
    cn_profiler_range_begin("a \"quoted\" range\\");
    for (int i = 0; i < 3; i++) CHECK(cn_tanh(cn_matmul(a, b)) != NULL);
    cn_profiler_range_end();
    cn_profiler_stop();
    char path[64], table[64];
    snprintf(path, sizeof path, "/tmp/cn_test_profiler_%d.json", (int)getpid());
    snprintf(table, sizeof table, "/tmp/cn_test_profiler_%d.txt", (int)getpid());
    CHECK(cn_profiler_write_chrome_trace(path) == 0);
    CHECK_ERROR(cn_profiler_write_chrome_trace("/nonexistent-dir/t.json") == 0, "cannot write");

    /* Valid JSON with the events Perfetto needs. */
    if (access("/usr/bin/python3", X_OK) == 0) {
        char cmd[512];
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
                 "x=[e for e in d[\"traceEvents\"] if e[\"ph\"]==\"X\"]; "
                 "assert d[\"displayTimeUnit\"]==\"ms\"; "
                 "assert sum(e[\"name\"]==\"matmul\" for e in x)==3, x; "
                 "assert all(e[\"args\"][\"flops\"]==2*6*7*3 for e in x if e[\"name\"]==\"matmul\"); "
                 "assert any(e[\"ph\"]==\"C\" for e in d[\"traceEvents\"]); "
                 "assert any(e[\"name\"]==\"a \\\"quoted\\\" range\\\\\" for e in x)' %s",
                 path);
        CHECK_MSG(system(cmd) == 0, "the trace did not parse as expected: %s", cmd);
    }

    /* The table from the file: matmul and tanh rows, shares summing to 100. */
    FILE *f = fopen(table, "w");
    CHECK(f && cn_profile_trace_summary(path, f) == 0);
    if (f) fclose(f);
    char *text = slurp(table);
    CHECK(text && strstr(text, "\nmatmul ") && strstr(text, "\ntanh "));
    CHECK(text && strstr(text, "(outside ops)") && strstr(text, "memory: high-water"));
    double share = 0;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        /* Rows: the name in 44 columns (it may hold spaces), then the figures. */
        long long calls;
        double total, mean, s;
        if (strlen(line) > 44 && strncmp(line, "total ", 6) &&
            sscanf(line + 44, "%lld %lf %lf %lf", &calls, &total, &mean, &s) == 4)
            share += s;
        line = nl ? nl + 1 : NULL;
    }
    CHECK_CLOSE(share, 100.0, 0, 0.5);
    free(text);
    /* The live session gives the same table. */
    f = fopen(table, "w");
    CHECK(f && cn_profiler_print_summary(f) == 0);
    if (f) fclose(f);
    text = slurp(table);
    CHECK(text && strstr(text, "\nmatmul ") && strstr(text, "100.0"));
    free(text);
    CHECK_ERROR(cn_profile_trace_summary("/nonexistent-dir/t.json", stderr) == 0, "t.json");
    f = fopen(table, "w");
    if (f) {
        fputs("{\"traceEvents\": 3}", f);
        fclose(f);
    }
    CHECK_ERROR(cn_profile_trace_summary(table, stderr) == 0, "not a Chrome trace");
    remove(path);
    remove(table);
}

int main(void) {
    RUN(test_eager_ops);
    RUN(test_event_cap);
    RUN(test_program_steps);
    RUN(test_parallel_steps);
    RUN(test_chrome_trace);
    return th_summary();
}
