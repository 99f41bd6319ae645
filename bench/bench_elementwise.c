/* Elementwise kernels against this machine's memory bandwidth, at 1 and 2
 * threads, for two sizes: 1M f32 (4 MB an array: inputs and output stay in
 * a 32 MB L3) and 16M f32 (64 MB an array: from and to DRAM).
 *
 * The bandwidth is what STREAM-like loops reach in the same process on the
 * same pool, compiled for the same instruction sets as the kernels
 * (CN_HOT_FN) and storing the same way (ordinary stores): scale (y = s x,
 * one read and one write) for the unary ops and the copy of a view, triad
 * (y = a + s b, two reads and one write) for the binary ops. memcpy (glibc,
 * which switches to non-temporal stores for large copies) is shown beside
 * them. An op's GB/s counts the bytes it reads and writes, like STREAM's;
 * "of bw" is its GB/s over its reference loop's. Ops run through the public
 * API (a fresh output each time, as in a model). Every repeat runs each
 * loop and op once, in turn, so load on a shared machine hits them alike;
 * figures are the median and the fastest of the repeats.
 *
 *   bench_elementwise [--n ELEMENTS] [--repeats N] [--json] [--cpu-time]
 *
 * --n measures one size instead of the two. --cpu-time times the one
 * thread's CPU time (CLOCK_THREAD_CPUTIME_ID) instead of the wall clock and
 * runs 1 thread only: on a machine shared with other jobs the time the
 * thread waits for a core then does not count, though their use of the
 * shared cache and memory still does. */
#include <chutney.h>

#include "bench_util.h"

#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the reference loops ---- */

typedef struct stream_job {
    float *y;
    const float *a, *b;
    float s;
} stream_job;

/* STREAM's scale rather than its copy: GCC turns a copy loop into memcpy. */
CN_HOT_FN(scale_loop,
          (float *restrict y, const float *restrict a, float s, int64_t n),
          (y, a, s, n)) {
    for (int64_t i = 0; i < n; i++) y[i] = s * a[i];
}

CN_HOT_FN(triad_loop,
          (float *restrict y, const float *restrict a, const float *restrict b, float s,
           int64_t n),
          (y, a, b, s, n)) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + s * b[i];
}

static void scale_range(void *ctx, int64_t b, int64_t e) {
    stream_job *j = ctx;
    scale_loop(j->y + b, j->a + b, j->s, e - b);
}
static void triad_range(void *ctx, int64_t b, int64_t e) {
    stream_job *j = ctx;
    triad_loop(j->y + b, j->a + b, j->b + b, j->s, e - b);
}
static void memcpy_range(void *ctx, int64_t b, int64_t e) {
    stream_job *j = ctx;
    memcpy(j->y + b, j->a + b, (size_t)(e - b) * sizeof(float));
}

enum { REF_SCALE, REF_TRIAD, REF_MEMCPY, NREFS };
static const char *ref_names[NREFS] = {"scale", "triad", "memcpy"};
static const int ref_words[NREFS] = {2, 3, 2};

static bool cpu_time;
#define WARM_RUNS 3

/* Seconds on the wall clock, or of this thread's CPU time (--cpu-time). */
static double now_s(void) {
    if (!cpu_time) return bench_now_s();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double time_ref(int r, stream_job *j, int64_t n) {
    void (*fn)(void *, int64_t, int64_t) =
        r == REF_SCALE ? scale_range : r == REF_TRIAD ? triad_range : memcpy_range;
    for (int w = 0; w < WARM_RUNS; w++) cn_parallel_for(n, 1 << 15, fn, j); /* see time_op */
    double t0 = now_s();
    cn_parallel_for(n, 1 << 15, fn, j);
    return now_s() - t0;
}

/* ---- the ops ---- */

enum {
    OP_ADD, OP_MUL, OP_RELU, OP_EXP, OP_TANH, OP_SIGMOID, OP_SILU, OP_ERF, OP_GELU, OP_COPY_T,
    NOPS
};
static const char *op_names[NOPS] = {"add",  "mul", "relu", "exp",  "tanh",
                                     "sigmoid", "silu", "erf", "gelu", "copy_t"};
static const int op_ref[NOPS] = {REF_TRIAD, REF_TRIAD, REF_SCALE, REF_SCALE, REF_SCALE,
                                 REF_SCALE, REF_SCALE, REF_SCALE, REF_SCALE, REF_SCALE};
static const int op_words[NOPS] = {3, 3, 2, 2, 2, 2, 2, 2, 2, 2};

typedef struct inputs {
    cn_tensor *a, *b, *at; /* at: a as [R, n / R], transposed (a strided view) */
} inputs;

static cn_tensor *run_op(int op, const inputs *in) {
    switch (op) {
    case OP_ADD: return cn_add(in->a, in->b);
    case OP_MUL: return cn_mul(in->a, in->b);
    case OP_RELU: return cn_relu(in->a);
    case OP_EXP: return cn_exp(in->a);
    case OP_TANH: return cn_tanh(in->a);
    case OP_SIGMOID: return cn_sigmoid(in->a);
    case OP_SILU: return cn_silu(in->a);
    case OP_ERF: return cn_erf(in->a);
    case OP_GELU: return cn_gelu(in->a, false);
    default: return cn_contiguous(in->at);
    }
}

/* The run after WARM_RUNS untimed ones, so every op and loop starts with
 * what fits of its operands in the caches (the output gets the block the
 * previous run's output gave back), whatever ran before it (one was not
 * enough: the loops then ran at 60-70% of their speed in the L3-sized
 * case); -1 if the op failed. */
static double time_op(int op, const inputs *in) {
    cn_tensor *r = NULL;
    for (int w = 0; w < WARM_RUNS; w++) {
        cn_scope_begin();
        r = run_op(op, in);
        cn_scope_end();
    }
    cn_scope_begin();
    double t0 = now_s();
    r = r ? run_op(op, in) : NULL;
    double t = now_s() - t0;
    cn_scope_end();
    return r ? t : -1;
}

/* ---- one size ---- */

/* GB/s from the median and from the fastest repeat (on a loaded machine
 * the fastest is the better estimate of the unloaded speed). */
typedef struct row {
    int64_t n;
    int threads;
    double ref_gbs[NREFS], ref_best[NREFS];
    double op_gbs[NOPS], op_best[NOPS]; /* < 0: the op failed */
} row;

static int measure(int64_t n, int repeats, int threads, row *out, const char **failed) {
    cn_set_num_threads(threads);
    cn_manual_seed(0);
    int64_t R = n % 1024 == 0 ? 1024 : 1;
    inputs in = {cn_uniform(CN_F32, CN_SHAPE(n), -2, 2), cn_uniform(CN_F32, CN_SHAPE(n), -2, 2),
                 NULL};
    cn_tensor *a2 = in.a ? cn_reshape(in.a, CN_SHAPE(R, n / R)) : NULL;
    in.at = a2 ? cn_transpose(a2, 0, 1) : NULL;
    float *y = cn_alloc((size_t)n * sizeof(float));
    double *t = malloc(sizeof(double) * (size_t)repeats * (NREFS + NOPS));
    if (!in.at || !y || !t) {
        fprintf(stderr, "bench_elementwise: out of memory for %lld elements\n", (long long)n);
        return 1;
    }
    memset(y, 0, (size_t)n * sizeof(float));
    stream_job j = {y, cn_data(in.a), cn_data(in.b), 0.5f};

    /* Warm-up: page tables, the allocator's cache, the clock speed. */
    for (double t0 = bench_now_s(); bench_now_s() - t0 < 0.3;) {
        for (int r = 0; r < NREFS; r++) time_ref(r, &j, n);
        for (int op = 0; op < NOPS; op++) time_op(op, &in);
    }
    for (int k = 0; k < repeats; k++) {
        for (int r = 0; r < NREFS; r++) t[r * repeats + k] = time_ref(r, &j, n);
        for (int op = 0; op < NOPS; op++) {
            double s = time_op(op, &in);
            if (s < 0 && !failed[op]) failed[op] = strdup(cn_last_error());
            t[(NREFS + op) * repeats + k] = s;
        }
    }
    out->n = n;
    out->threads = threads;
    for (int r = 0; r < NREFS; r++) {
        double bytes = ref_words[r] * 4.0 * (double)n;
        out->ref_gbs[r] = bytes / bench_median(t + r * repeats, repeats) * 1e-9;
        out->ref_best[r] = bytes / t[r * repeats] * 1e-9; /* sorted by the median */
    }
    for (int op = 0; op < NOPS; op++) {
        double bytes = op_words[op] * 4.0 * (double)n, *v = t + (NREFS + op) * repeats;
        double m = bench_median(v, repeats);
        out->op_gbs[op] = failed[op] ? -1 : bytes / m * 1e-9;
        out->op_best[op] = failed[op] ? -1 : bytes / v[0] * 1e-9;
    }
    free(t);
    cn_free(y);
    cn_release(in.at);
    cn_release(a2);
    cn_release(in.a);
    cn_release(in.b);
    return 0;
}

int main(int argc, char **argv) {
    int64_t n = 0;
    int repeats = 15;
    bool json = false, one_size = false;
    /* --cpu-time is ours; the rest are bench_size_args's. */
    int nargs = 0;
    char **args = malloc(sizeof(char *) * (size_t)(argc + 1));
    for (int i = 0; i < argc; i++) {
        if (i > 0 && !strcmp(argv[i], "--cpu-time")) cpu_time = true;
        else args[nargs++] = argv[i];
        one_size |= !strcmp(argv[i], "--n");
    }
    int bad = bench_size_args(nargs, args, &n, &repeats, &json);
    free(args);
    if (bad) {
        fprintf(stderr, "       (and --cpu-time: one thread, timed by its CPU time)\n");
        return 2;
    }
    int64_t sizes[2] = {1 << 20, 1 << 24};
    int nsizes = 2;
    if (one_size) sizes[0] = n, nsizes = 1;

    row rows[4];
    int nrows = 0;
    const char *failed[NOPS] = {NULL};
    for (int s = 0; s < nsizes; s++)
        for (int threads = 1; threads <= (cpu_time ? 1 : 2); threads++)
            if (measure(sizes[s], repeats, threads, &rows[nrows++], failed)) return 1;

    if (json) {
        printf("{\"benchmark\": \"elementwise\", \"dtype\": \"f32\", \"repeats\": %d, \"isa\": \"%s\", "
               "\"clock\": \"%s\", \"results\": [",
               repeats, cn_isa_name(cn_isa()), cpu_time ? "thread_cpu" : "wall");
        for (int r = 0; r < nrows; r++) {
            const row *w = &rows[r];
            printf("%s{\"n\": %lld, \"threads\": %d", r ? ", " : "", (long long)w->n, w->threads);
            for (int k = 0; k < NREFS; k++)
                printf(", \"%s\": {\"gbs\": %.2f, \"best_gbs\": %.2f}", ref_names[k],
                       w->ref_gbs[k], w->ref_best[k]);
            for (int op = 0; op < NOPS; op++) {
                if (w->op_gbs[op] < 0) {
                    printf(", \"%s\": null", op_names[op]);
                    continue;
                }
                int rf = op_ref[op];
                printf(", \"%s\": {\"gbs\": %.2f, \"of_bw\": %.3f, \"best_gbs\": %.2f, "
                       "\"best_of_bw\": %.3f}",
                       op_names[op], w->op_gbs[op], w->op_gbs[op] / w->ref_gbs[rf], w->op_best[op],
                       w->op_best[op] / w->ref_best[rf]);
            }
            printf("}");
        }
        printf("]}\n");
    } else {
        printf("elementwise f32 against STREAM-like loops (%s code), median of %d, %s; GB/s = "
               "(bytes read + written) / s;\nbinary ops against triad, unary ops and copy_t "
               "(contiguous() of a transposed view) against scale\n",
               cn_isa_name(cn_isa()), repeats, cpu_time ? "thread CPU time" : "wall clock");
        for (int r = 0; r < nrows; r++) {
            const row *w = &rows[r];
            printf("\n%lld elements (%.3g MB an array), %d thread%s\n", (long long)w->n,
                   (double)w->n * 4 / (1 << 20), w->threads, w->threads > 1 ? "s" : "");
            printf("  %-8s %9s %7s | %9s %7s\n", "", "GB/s", "of bw", "best GB/s", "of bw");
            for (int k = 0; k < NREFS; k++)
                printf("  %-8s %9.1f %7s | %9.1f %7s\n", ref_names[k], w->ref_gbs[k], "",
                       w->ref_best[k], "");
            for (int op = 0; op < NOPS; op++) {
                int rf = op_ref[op];
                if (w->op_gbs[op] < 0) printf("  %-8s %9s\n", op_names[op], "failed");
                else
                    printf("  %-8s %9.1f %6.0f%% | %9.1f %6.0f%%\n", op_names[op], w->op_gbs[op],
                           100 * w->op_gbs[op] / w->ref_gbs[rf], w->op_best[op],
                           100 * w->op_best[op] / w->ref_best[rf]);
            }
        }
        for (int op = 0; op < NOPS; op++)
            if (failed[op]) printf("\n%s: %s\n", op_names[op], failed[op]);
    }
    for (int op = 0; op < NOPS; op++) free((void *)failed[op]);
    return 0;
}
