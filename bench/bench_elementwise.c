/* Elementwise throughput: add, mul and exp on 1M contiguous f32, in GB/s of
 * bytes read plus bytes written, next to what memcpy (split over the same
 * threads) moves in the same time, at 1 and 2 threads. Each figure is the
 * median of the repeats; ops and memcpy are interleaved.
 *
 *   bench_elementwise [--n ELEMENTS] [--repeats N] [--json]
 */
#include <chutney.h>

#include "bench_util.h"

#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct copy_job {
    char *dst;
    const char *src;
} copy_job;

static void copy_range(void *ctx, int64_t begin, int64_t end) {
    copy_job *j = ctx;
    memcpy(j->dst + begin, j->src + begin, (size_t)(end - begin));
}

/* memcpy of len bytes over the pool (one piece per thread). */
static double time_memcpy(char *dst, const char *src, int64_t len) {
    copy_job j = {dst, src};
    double t0 = bench_now_s();
    cn_parallel_for(len, 1 << 20, copy_range, &j);
    return bench_now_s() - t0;
}

enum { OP_ADD, OP_MUL, OP_EXP, NOPS };
static const char *op_names[NOPS] = {"add", "mul", "exp"};
static const int op_inputs[NOPS] = {2, 2, 1};

/* One timed run; -1 if the op failed. */
static double time_op(int op, cn_tensor *a, cn_tensor *b) {
    cn_scope_begin();
    double t0 = bench_now_s();
    cn_tensor *r = op == OP_ADD ? cn_add(a, b) : op == OP_MUL ? cn_mul(a, b) : cn_exp(a);
    double t = bench_now_s() - t0;
    cn_scope_end();
    return r ? t : -1;
}

typedef struct result {
    int threads;
    double op_gbs[NOPS], copy_gbs[NOPS]; /* op_gbs < 0: the op failed */
} result;

int main(int argc, char **argv) {
    int64_t n = 1 << 20;
    int repeats = 21;
    bool json = false;
    if (bench_size_args(argc, argv, &n, &repeats, &json)) return 2;
    cn_manual_seed(0);
    cn_tensor *a = cn_uniform(CN_F32, CN_SHAPE(n), -2, 2);
    cn_tensor *b = cn_uniform(CN_F32, CN_SHAPE(n), -2, 2);
    int64_t bytes_max = 3 * n * 4;
    char *src = malloc((size_t)bytes_max), *dst = malloc((size_t)bytes_max);
    memset(src, 1, (size_t)bytes_max);
    memset(dst, 0, (size_t)bytes_max);
    double *t_op = malloc(sizeof(double) * (size_t)repeats);
    double *t_cp = malloc(sizeof(double) * (size_t)repeats);
    const char *failed[NOPS] = {NULL};

    /* Warm up for a while: page tables, the allocator, the clock speed. */
    for (double t0 = bench_now_s(); bench_now_s() - t0 < 0.3;) {
        for (int op = 0; op < NOPS; op++) time_op(op, a, b);
        time_memcpy(dst, src, bytes_max);
    }

    int thread_counts[] = {1, 2};
    result res[2];
    for (int ti = 0; ti < 2; ti++) {
        cn_set_num_threads(thread_counts[ti]);
        res[ti].threads = thread_counts[ti];
        for (int op = 0; op < NOPS; op++) {
            /* Bytes read and written; memcpy moves the same: half read, half written. */
            int64_t bytes = (op_inputs[op] + 1) * n * 4, half = bytes / 2;
            time_op(op, a, b); /* warm-up: threads, allocator */
            time_memcpy(dst, src, half);
            bool ok = true;
            for (int r = 0; r < repeats; r++) {
                t_op[r] = time_op(op, a, b);
                t_cp[r] = time_memcpy(dst, src, half);
                if (t_op[r] < 0) ok = false;
            }
            if (!ok && !failed[op]) failed[op] = strdup(cn_last_error());
            res[ti].op_gbs[op] = ok ? (double)bytes / bench_median(t_op, repeats) * 1e-9 : -1;
            res[ti].copy_gbs[op] = (double)(2 * half) / bench_median(t_cp, repeats) * 1e-9;
        }
    }

    if (json) {
        printf("{\"benchmark\": \"elementwise\", \"dtype\": \"f32\", \"n\": %lld, \"repeats\": %d, "
               "\"results\": [",
               (long long)n, repeats);
        int first = 1;
        for (int ti = 0; ti < 2; ti++)
            for (int op = 0; op < NOPS; op++) {
                printf("%s{\"op\": \"%s\", \"threads\": %d, ", first ? "" : ", ", op_names[op],
                       res[ti].threads);
                first = 0;
                if (res[ti].op_gbs[op] >= 0)
                    printf("\"gbs\": %.2f, ", res[ti].op_gbs[op]);
                else
                    printf("\"gbs\": null, ");
                printf("\"memcpy_gbs\": %.2f}", res[ti].copy_gbs[op]);
            }
        printf("]}\n");
    } else {
        printf("elementwise f32, %lld elements; GB/s = (bytes read + written) / s, median of %d\n\n",
               (long long)n, repeats);
        printf("%-5s %3s | %9s %11s %8s\n", "op", "thr", "GB/s", "memcpy GB/s", "op/copy");
        for (int ti = 0; ti < 2; ti++)
            for (int op = 0; op < NOPS; op++) {
                result *w = &res[ti];
                if (w->op_gbs[op] >= 0)
                    printf("%-5s %3d | %9.1f %11.1f %8.2f\n", op_names[op], w->threads,
                           w->op_gbs[op], w->copy_gbs[op], w->op_gbs[op] / w->copy_gbs[op]);
                else
                    printf("%-5s %3d | %9s %11.1f %8s\n", op_names[op], w->threads, "failed",
                           w->copy_gbs[op], "-");
            }
        for (int op = 0; op < NOPS; op++)
            if (failed[op]) printf("\n%s: %s", op_names[op], failed[op]);
        if (failed[0] || failed[1] || failed[2]) printf("\n");
    }
    for (int op = 0; op < NOPS; op++) free((void *)failed[op]);
    free(t_op);
    free(t_cp);
    free(src);
    free(dst);
    cn_release(a);
    cn_release(b);
    return 0;
}
