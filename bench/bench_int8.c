/* int8 inference against f32 (cn_module_quantize_int8), forward passes
 * only, at 1 and 2 threads:
 *   - Linear 1024 -> 1024 at batch 64 (GEMM-bound: 67M multiply-adds);
 *   - the Fashion-MNIST CNN of `chutney train --model cnn` at batch 64.
 * Each f32 module and its int8 copy (same weights) run interleaved, so
 * drift on a shared machine hits both alike; figures are medians in ms.
 *
 *   bench_int8 [--repeats N] [--cpu-time]
 *
 * --cpu-time: the process's CPU time instead of wall time, which a busy
 * shared machine disturbs less (meaningful at 1 thread only).
 */
#include <chutney.h>

#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --cpu-time: bench_cpu_s instead of the wall clock. */
static bool use_cpu_time;

static double now_s(void) { return use_cpu_time ? bench_cpu_s() : bench_now_s(); }

static void die(const char *what) {
    fprintf(stderr, "bench_int8: %s: %s\n", what, cn_last_error());
    exit(1);
}

static cn_module *make(const char *which) {
    if (!strcmp(which, "linear")) return cn_nn_linear(1024, 1024, true);
    cn_conv_opts c = {.padding = {1, 1}};
    cn_pool_opts pool = {.kernel = {2, 2}};
    cn_module *layers[] = {cn_nn_conv2d(1, 32, 3, 3, &c, true),  cn_nn_relu(),
                           cn_nn_max_pool2d(&pool),              cn_nn_conv2d(32, 64, 3, 3, &c, true),
                           cn_nn_relu(),                         cn_nn_max_pool2d(&pool),
                           cn_nn_flatten(1, -1),                 cn_nn_linear(3136, 128, true),
                           cn_nn_relu(),                         cn_nn_linear(128, 10, true)};
    return cn_nn_sequential(layers, 10);
}

static double run_once(cn_module *m, cn_tensor *x) {
    cn_scope_begin();
    double t0 = now_s();
    cn_tensor *y = cn_module_forward(m, x);
    double t = now_s() - t0;
    if (!y) die("forward");
    cn_scope_end();
    return t * 1e3;
}

static void row(const char *which, int threads, int repeats) {
    cn_set_num_threads(threads);
    cn_manual_seed(1);
    cn_module *f = make(which), *q = make(which);
    if (!f || !q) die("model");
    /* The same weights in both. */
    cn_tensor **fs, **qs;
    int n = cn_module_state(f, &fs, NULL);
    if (n < 0 || cn_module_state(q, &qs, NULL) != n) die("state");
    cn_no_grad_begin();
    for (int i = 0; i < n; i++)
        if (cn_copy_(qs[i], fs[i]) < 0) die("copy");
    cn_no_grad_end();
    free(fs), free(qs);
    cn_module_train(f, false);
    cn_module_train(q, false);
    if (cn_module_quantize_int8(q) < 0) die("quantize");
    cn_tensor *x = !strcmp(which, "linear") ? cn_randn(CN_F32, CN_SHAPE(64, 1024))
                                            : cn_rand(CN_F32, CN_SHAPE(64, 1, 28, 28));
    double *tf = malloc(sizeof(double) * (size_t)repeats);
    double *tq = malloc(sizeof(double) * (size_t)repeats);
    for (int w = 0; w < 3; w++) run_once(f, x), run_once(q, x); /* warm up */
    for (int r = 0; r < repeats; r++) {
        tf[r] = run_once(f, x);
        tq[r] = run_once(q, x);
    }
    double mf = bench_median(tf, repeats), mq = bench_median(tq, repeats);
    printf("| %-28s | %d | %8.3f | %8.3f | %5.2fx |\n",
           !strcmp(which, "linear") ? "Linear 1024x1024, batch 64" : "cnn forward, batch 64",
           threads, mf, mq, mf / mq);
    free(tf), free(tq);
    cn_release(x);
    cn_module_free(f);
    cn_module_free(q);
}

int main(int argc, char **argv) {
    int repeats = 30;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cpu-time")) use_cpu_time = true;
    if (repeats < 1) repeats = 1;
    printf("| case | threads | f32 ms | int8 ms | f32/int8 |\n|---|---|---|---|---|\n");
    for (int t = 1; t <= (use_cpu_time ? 1 : 2); t++) {
        row("linear", t, repeats);
        row("cnn", t, repeats);
    }
    return 0;
}
