/* fp32 GEMM throughput: cn_matmul, the built-in GEMM (what builds without
 * BLAS run), and cblas_sgemm called directly, on square matrices, at 1 and 2
 * threads. Chutney's two are interleaved; OpenBLAS (on its own threads)
 * runs in a block of its own right after, with pauses so neither library's
 * spinning threads slow the other. Each figure is the median of the repeats.
 *
 * --bf16 adds, interleaved with cn_matmul in f32, the same product under
 * bf16 autocast twice: on operands already in bf16 (the product alone:
 * oneDNN's kernel where the CPU has bf16 instructions, else the rounded
 * values multiplied in f32) and on the f32 operands (the two casts to bf16
 * included, as a training step pays them for its activations).
 *
 *   bench_gemm [--peak GFLOPS_PER_CORE] [--repeats N] [--max-size N] [--bf16] [--json]
 */
#define _DEFAULT_SOURCE /* usleep */
#include <chutney.h>

#include "bench_util.h"

#include "backend/cpu/gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef CN_HAVE_CBLAS
#include <cblas.h>
#endif
#ifdef CN_HAVE_OPENBLAS
void openblas_set_num_threads(int num_threads);
#endif

/* cblas_sgemm last: it runs in a block of its own after the others. */
enum { M_MATMUL, M_BUILTIN, M_BF16, M_AUTOCAST, M_BLAS, NMETHODS };
static const char *method_names[NMETHODS] = {"cn_matmul", "builtin", "bf16", "bf16_autocast",
                                             "cblas_sgemm"};
static bool with_bf16 = false;

typedef struct row {
    int64_t n;
    int threads;
    double gflops[NMETHODS]; /* 0: not measured */
} row;

static void matmul_or_die(cn_tensor *a, cn_tensor *b) {
    cn_scope_begin();
    if (!cn_matmul(a, b)) {
        fprintf(stderr, "bench_gemm: %s\n", cn_last_error());
        exit(1);
    }
    cn_scope_end();
}

/* One timed run of method `meth` on n x n operands (ah, bh: the same in
 * bf16); returns seconds. */
static double run_once(int meth, int64_t n, cn_tensor *a, cn_tensor *b, cn_tensor *ah,
                       cn_tensor *bh, float *c) {
    const float *pa = cn_data(a), *pb = cn_data(b);
#ifdef CN_HAVE_OPENBLAS
    if (meth == M_BLAS) {
        openblas_set_num_threads(cn_get_num_threads());
        cn_threads_park();
        usleep(3000); /* our workers asleep, as in a program using only OpenBLAS */
    }
#endif
    double t0 = bench_now_s();
    switch (meth) {
    case M_MATMUL: matmul_or_die(a, b); break;
    case M_BF16:
    case M_AUTOCAST:
        cn_autocast_begin(CN_BF16);
        if (meth == M_BF16) matmul_or_die(ah, bh);
        else matmul_or_die(a, b);
        cn_autocast_end();
        break;
    case M_BUILTIN: cn_gemm_builtin(CN_F32, n, n, n, pa, n, 1, pb, n, 1, c, n); break;
    default:
#ifdef CN_HAVE_CBLAS
        /* OpenBLAS on its own threads, as a program calling it directly
         * would (Chutney keeps it single-threaded and splits over its pool). */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, pa,
                    (int)n, pb, (int)n, 0.0f, c, (int)n);
#ifdef CN_HAVE_OPENBLAS
        openblas_set_num_threads(1);
#endif
#endif
        break;
    }
    return bench_now_s() - t0;
}

int main(int argc, char **argv) {
    double peak = 116.0; /* fp32 GFLOP/s per core (docs/benchmarks.md) */
    int repeats = 7;
    int64_t max_size = 2048;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--peak") && i + 1 < argc) peak = atof(argv[++i]);
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-size") && i + 1 < argc) max_size = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--bf16")) with_bf16 = true;
        else {
            fprintf(stderr,
                    "usage: %s [--peak GFLOPS_PER_CORE] [--repeats N] [--max-size N] [--bf16] "
                    "[--json]\n",
                    argv[0]);
            return 2;
        }
    }
    if (repeats < 1) repeats = 1;
    bool have_blas = false;
#ifdef CN_HAVE_CBLAS
    have_blas = true;
#endif
    int64_t sizes[] = {256, 512, 1024, 2048};
    int thread_counts[] = {1, 2};
    row rows[8];
    int nrows = 0;
    double *times = malloc(sizeof(double) * (size_t)repeats * NMETHODS);
    cn_manual_seed(0);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        if (n > max_size) continue;
        cn_tensor *a = cn_randn(CN_F32, CN_SHAPE(n, n));
        cn_tensor *b = cn_randn(CN_F32, CN_SHAPE(n, n));
        cn_tensor *ah = with_bf16 ? cn_cast(a, CN_BF16) : NULL;
        cn_tensor *bh = with_bf16 ? cn_cast(b, CN_BF16) : NULL;
        float *c = malloc(sizeof(float) * (size_t)(n * n));
        for (size_t t = 0; t < 2; t++) {
            cn_set_num_threads(thread_counts[t]);
            /* Chutney's two interleaved; then OpenBLAS on its own threads in a
             * block of its own, with a pause on either side: its threads
             * spin for tens of ms after a call and ours spin or yield for 2 ms, and
             * whichever ran next would be timed against the other's spinning. */
            for (int meth = 0; meth < M_BLAS; meth++) /* warm-up */
                if (with_bf16 || meth < M_BF16) run_once(meth, n, a, b, ah, bh, c);
            for (int r = 0; r < repeats; r++)
                for (int meth = 0; meth < M_BLAS; meth++)
                    times[meth * repeats + r] =
                        with_bf16 || meth < M_BF16 ? run_once(meth, n, a, b, ah, bh, c) : 0;
            if (have_blas) {
                usleep(300000);
                run_once(M_BLAS, n, a, b, ah, bh, c);
                for (int r = 0; r < repeats; r++)
                    times[M_BLAS * repeats + r] = run_once(M_BLAS, n, a, b, ah, bh, c);
                usleep(300000);
            } else {
                for (int r = 0; r < repeats; r++) times[M_BLAS * repeats + r] = 0;
            }
            row *w = &rows[nrows++];
            w->n = n;
            w->threads = thread_counts[t];
            for (int meth = 0; meth < NMETHODS; meth++) {
                double med = bench_median(times + meth * repeats, repeats);
                w->gflops[meth] = med > 0 ? 2.0 * (double)n * (double)n * (double)n / med * 1e-9 : 0;
            }
        }
        free(c);
        cn_release(a);
        cn_release(b);
        if (ah) cn_release(ah);
        if (bh) cn_release(bh);
    }
    free(times);

    if (json) {
        printf("{\"benchmark\": \"gemm\", \"dtype\": \"f32\", \"build\": \"%s\", "
               "\"f32_tile\": \"%s\", \"peak_gflops_per_core\": %.1f, \"repeats\": %d, "
               "\"results\": [",
               cn_build_info(), cn_gemm_select_tile(CN_F32, -1), peak, repeats);
        for (int i = 0; i < nrows; i++) {
            row *w = &rows[i];
            printf("%s{\"n\": %lld, \"threads\": %d", i ? ", " : "", (long long)w->n, w->threads);
            for (int meth = 0; meth < NMETHODS; meth++)
                if (w->gflops[meth] > 0)
                    printf(", \"%s_gflops\": %.2f", method_names[meth], w->gflops[meth]);
            if (w->gflops[M_BLAS] > 0)
                printf(", \"ratio_matmul_blas\": %.3f, \"ratio_builtin_blas\": %.3f",
                       w->gflops[M_MATMUL] / w->gflops[M_BLAS],
                       w->gflops[M_BUILTIN] / w->gflops[M_BLAS]);
            if (w->gflops[M_BF16] > 0)
                printf(", \"ratio_bf16_f32\": %.3f, \"ratio_bf16_autocast_f32\": %.3f",
                       w->gflops[M_BF16] / w->gflops[M_MATMUL],
                       w->gflops[M_AUTOCAST] / w->gflops[M_MATMUL]);
            printf(", \"matmul_peak_fraction\": %.3f}", w->gflops[M_MATMUL] / (peak * w->threads));
        }
        printf("]}\n");
        return 0;
    }
    printf("fp32 GEMM, C = A B, square; GFLOP/s, median of %d; peak %.0f GFLOP/s per core\n",
           repeats, peak);
    printf("%s; built-in tile %s\n\n", cn_build_info(), cn_gemm_select_tile(CN_F32, -1));
    printf("%6s %3s | %10s %10s %12s | %9s %9s | %8s %8s\n", "n", "thr", "cn_matmul", "builtin",
           "cblas_sgemm", "mm/blas", "bi/blas", "mm/peak", "bi/peak");
    for (int i = 0; i < nrows; i++) {
        row *w = &rows[i];
        double pk = peak * w->threads;
        printf("%6lld %3d | %10.1f %10.1f ", (long long)w->n, w->threads, w->gflops[M_MATMUL],
               w->gflops[M_BUILTIN]);
        if (w->gflops[M_BLAS] > 0)
            printf("%12.1f | %9.2f %9.2f | ", w->gflops[M_BLAS],
                   w->gflops[M_MATMUL] / w->gflops[M_BLAS], w->gflops[M_BUILTIN] / w->gflops[M_BLAS]);
        else
            printf("%12s | %9s %9s | ", "-", "-", "-");
        printf("%7.0f%% %7.0f%%\n", 100 * w->gflops[M_MATMUL] / pk, 100 * w->gflops[M_BUILTIN] / pk);
    }
    if (with_bf16) {
        printf("\nbf16 autocast: %s\n", cn_autocast_native(CN_BF16) ? "native (oneDNN's bf16 kernel)"
                                                                     : "rounded inputs multiplied in f32");
        printf("%6s %3s | %10s %10s %12s | %9s %9s\n", "n", "thr", "f32", "bf16", "bf16 autocast",
               "bf16/f32", "ac/f32");
        for (int i = 0; i < nrows; i++) {
            row *w = &rows[i];
            printf("%6lld %3d | %10.1f %10.1f %12.1f | %9.2f %9.2f\n", (long long)w->n, w->threads,
                   w->gflops[M_MATMUL], w->gflops[M_BF16], w->gflops[M_AUTOCAST],
                   w->gflops[M_BF16] / w->gflops[M_MATMUL], w->gflops[M_AUTOCAST] / w->gflops[M_MATMUL]);
        }
    }
    return 0;
}
