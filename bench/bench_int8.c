/* int8 inference against f32 (cn_module_quantize_int8), forward passes
 * only, at 1 and 2 threads:
 *   - Linear 1024 -> 1024 at batch 64 (GEMM-bound: 67M multiply-adds);
 *   - the Fashion-MNIST CNN of `chutney train --model cnn` (tools/models.c,
 *     linked in as bench_static does) at batch 64;
 * and the GEMMs alone, the int8 one (int16 operands: vpmaddwd on AVX2,
 * vpdpwssd where the CPU has AVX512_VNNI; the kernel is named on stderr,
 * and CN_ISA=avx2 picks the AVX2 one) against the f32 matmul (cn_matmul:
 * OpenBLAS's sgemm where the build has it, or the built-in GEMM where
 * OpenBLAS has only an older core's kernels for this CPU; `chutney
 * --version` says which) at the same sizes, in G multiply-adds x 2 per
 * second.
 * Each f32 module and its int8 copy (same weights) run interleaved, so
 * drift on a shared machine hits both alike; figures are medians in ms.
 *
 *   bench_int8 [--repeats N] [--cpu-time]
 *
 * --cpu-time: the process's CPU time instead of wall time, which a busy
 * shared machine disturbs less (meaningful at 1 thread only).
 */
#include <chutney.h>

#include "../src/backend/cpu/qgemm.h"
#include "../tools/tools.h"
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
    return !strcmp(which, "linear") ? cn_nn_linear(1024, 1024, true) : cn_tool_make_model("cnn");
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

/* The int8 GEMM (weights packed once, int32 sums) against the f32 matmul
 * of the same M x K times K x N: M, K, N as in the Linear above (64 x
 * 1024 x 1024), the cnn's second convolution (64 channels x 288 x 196
 * pixels) and a square 256. */
static void gemm_row(int64_t M, int64_t K, int64_t N, int repeats) {
    cn_scope_begin();
    cn_tensor *a = cn_randn(CN_F32, CN_SHAPE(M, K)), *b = cn_randn(CN_F32, CN_SHAPE(K, N));
    int64_t kp = cn_qgemm_kpad(K);
    int16_t *A = calloc((size_t)(M * kp), sizeof(int16_t));
    /* Aligned, as a module's packed weights (tensor storage) are. */
    int16_t *Bp = NULL;
    if (posix_memalign((void **)&Bp, 64, sizeof(int16_t) * (size_t)cn_qgemm_packed_len(N, K)))
        Bp = NULL;
    int8_t *w = malloc((size_t)(N * K));
    int32_t *C = malloc(sizeof(int32_t) * (size_t)(M * N));
    double *tf = malloc(sizeof(double) * (size_t)repeats);
    double *tq = malloc(sizeof(double) * (size_t)repeats);
    if (!A || !Bp || !w || !C || !tf || !tq) die("out of memory");
    for (int64_t i = 0; i < M * K; i++) A[i / K * kp + i % K] = (int16_t)(i * 37 % 255 - 127);
    for (int64_t i = 0; i < N * K; i++) w[i] = (int8_t)(i * 91 % 255 - 127);
    cn_qgemm_pack_b(Bp, &(cn_qgemm_b){w, true, K, 1, NULL, 0}, N, K);
    cn_qgemm_out o = {.c = C, .ld = N};
    for (int r = -3; r < repeats; r++) { /* 3 to warm up */
        cn_scope_begin();
        double t0 = now_s();
        if (!cn_matmul(a, b)) die("matmul");
        double t1 = now_s();
        cn_qgemm_packed(M, N, K, A, Bp, &o);
        double t2 = now_s();
        cn_scope_end();
        if (r >= 0) tf[r] = t1 - t0, tq[r] = t2 - t1;
    }
    double ops = 2.0 * (double)M * (double)N * (double)K;
    double gf = ops / bench_median(tf, repeats) * 1e-9, gq = ops / bench_median(tq, repeats) * 1e-9;
    printf("| %4lld x %4lld x %4lld | %11.1f | %10.1f | %5.2fx |\n", (long long)M, (long long)K,
           (long long)N, gf, gq, gq / gf);
    free(A), free(Bp), free(w), free(C), free(tf), free(tq);
    cn_scope_end();
}

int main(int argc, char **argv) {
    int repeats = 30;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cpu-time")) use_cpu_time = true;
    if (repeats < 1) repeats = 1;
    fprintf(stderr, "bench_int8: int8 GEMM kernel %s\n", cn_qgemm_kernel());
    printf("| case | threads | f32 ms | int8 ms | f32/int8 |\n|---|---|---|---|---|\n");
    for (int t = 1; t <= (use_cpu_time ? 1 : 2); t++) {
        row("linear", t, repeats);
        row("cnn", t, repeats);
    }
    cn_set_num_threads(1);
    printf("\n| GEMM M x K x N (1 thread) | f32 GFLOP/s | int8 GOP/s | int8/f32 |\n"
           "|---|---|---|---|\n");
    gemm_row(64, 1024, 1024, repeats);
    gemm_row(64, 288, 196, repeats);
    gemm_row(256, 256, 256, repeats);
    return 0;
}
