/* cn_onnx_run from several threads at once, each with its own model loaded
 * from one serialized file, while they share the kernel pool (a thread
 * that finds the pool busy runs its chunks serially): every run gives the
 * bits of a run on one thread alone. Run under ThreadSanitizer by the tsan
 * stage of `make check`. A model (its compiled program and planned arena)
 * is one thread's at a time. */
#include "harness.h"

#include <pthread.h>

#define NTHREADS 4
#define NRUNS 8
#define N 2048 /* rows: the elementwise ops are large enough to use the pool */

static pthread_barrier_t start;
static void *model_buf;
static size_t model_size;
static float expect[N * 5];

static cn_tensor *input(void) {
    static _Thread_local float v[N * 12];
    for (int i = 0; i < N * 12; i++) v[i] = (float)((i * 13 % 17) - 8) / 8.0f;
    return cn_from_data(CN_F32, CN_SHAPE(N, 12), v);
}

/* Loads its own model and runs it NRUNS times; returns the mismatches,
 * or -1 on an error. */
static int run_model(float *out_vals) {
    int bad = -1;
    cn_scope_begin();
    cn_onnx_model *m = cn_onnx_load_buffer(model_buf, model_size, NULL, NULL);
    if (m) {
        bad = 0;
        for (int r = 0; r < NRUNS && bad >= 0; r++) {
            cn_tensor *in = input(), *out = NULL;
            if (!in || cn_onnx_run(m, &in, &out) < 0 ||
                cn_copy_to_buffer(out, CN_F32, out_vals, sizeof expect) < 0) {
                bad = -1;
                break;
            }
            bad += memcmp(out_vals, expect, sizeof expect) != 0;
        }
    }
    cn_onnx_free(m);
    cn_scope_end();
    return bad;
}

static void *worker(void *arg) {
    static _Thread_local float vals[N * 5];
    pthread_barrier_wait(&start); /* all load and run at once */
    *(int *)arg = run_model(vals);
    return NULL;
}

static void test_concurrent_runs(void) {
    cn_set_num_threads(2);
    cn_manual_seed(7);
    cn_scope_begin();
    cn_module *l[] = {cn_nn_linear(12, 32, true), cn_nn_gelu(false), cn_nn_linear(32, 5, true)};
    cn_module *net = cn_nn_sequential(l, 3);
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 12));
    cn_tensor *y = cn_softmax(cn_module_forward(net, x), 1);
    CHECK_EQ_INT(cn_onnx_export_buffer(g, &y, 1, &model_buf, &model_size, NULL), 0);
    cn_graph_free(g);
    cn_module_free(net);
    cn_scope_end();

    /* The reference: one thread alone (and a check of it against eager). */
    static float first[N * 5];
    memset(expect, 0, sizeof expect);
    CHECK(run_model(first) >= 0);
    memcpy(expect, first, sizeof expect);
    CHECK_EQ_INT(run_model(first), 0);
    double sum = 0;
    for (int i = 0; i < 5; i++) sum += expect[i];
    CHECK_CLOSE(sum, 1.0, 1e-5, 1e-6);

    pthread_t th[NTHREADS];
    int bad[NTHREADS];
    pthread_barrier_init(&start, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++) CHECK_EQ_INT(pthread_create(&th[i], NULL, worker, &bad[i]), 0);
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK_MSG(bad[i] == 0, "thread %d: %d of %d runs differ (or -1: an error)", i, bad[i], NRUNS);
    }
    pthread_barrier_destroy(&start);
    free(model_buf);
}

int main(void) {
    cn_onnx_model *probe = cn_onnx_load_buffer("", 0, NULL, NULL);
    if (!probe && strstr(cn_last_error(), "built without ONNX")) {
        printf("skipped: built without ONNX support\n");
        return 77;
    }
    cn_onnx_free(probe);
    RUN(test_concurrent_runs);
    return th_summary();
}
