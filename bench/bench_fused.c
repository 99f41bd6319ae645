/* Chains of 8 elementwise ops over 1M f32 elements, fused into one kernel
 * (cn_fused_run, src/graph/fused.c) against the same ops run one by one
 * through the public API, at 1 and 2 threads. Two chains:
 *
 *   tanh:  y = sigmoid(relu(tanh(x * 2 + 1) * w) - x) * 0.5
 *   exp:   y = exp(-(relu((x * 2 + 1) * w) - x)^2)          (square, neg)
 *
 * The first has two of the dearest functions (tanh, sigmoid), whose
 * arithmetic bounds what fusion can save; the second one cheaper exp, so
 * it shows mostly the memory traffic fusion saves. Fused and unfused runs
 * are interleaved, each after writing a buffer twice the size of the last
 * level cache, so both start from the same (cold) cache: otherwise each
 * inherits the other's leftovers, and the unfused run's eight fresh outputs
 * evict the inputs the fused run then reads. Each figure is the median of
 * the repeats, with the fastest repeat next to it (on a shared machine the
 * fastest is the better estimate of the unloaded time). Both results are
 * checked to be the same bits first. Issue 5's target: fused >= 3x.
 *
 *   bench_fused [--n ELEMENTS] [--repeats N] [--json]
 */
#include <chutney.h>

#include "bench_util.h"

#include "core/core.h"
#include "backend/fused_expr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Larger than the last-level caches of the machines this runs on. */
#define EVICT_BYTES (64u << 20)
static char *evict_buf;

static void evict_range(void *ctx, int64_t begin, int64_t end) {
    memset(evict_buf + begin, *(const int *)ctx, (size_t)(end - begin));
}

/* On the pool, so its workers are awake (spinning) when the timed run
 * starts, as they are between the ops of a program. */
static void evict_caches(void) {
    int v = evict_buf[1] + 1;
    cn_parallel_for(EVICT_BYTES, 1 << 20, evict_range, &v);
}

typedef struct inputs {
    cn_tensor *x, *w, *two, *one, *half;
} inputs;

static cn_tensor *unfused_tanh(const inputs *in) {
    cn_tensor *t = cn_mul(in->x, in->two);
    t = cn_add(t, in->one);
    t = cn_tanh(t);
    t = cn_mul(t, in->w);
    t = cn_relu(t);
    t = cn_sub(t, in->x);
    t = cn_sigmoid(t);
    return cn_mul(t, in->half);
}

static cn_tensor *unfused_exp(const inputs *in) {
    cn_tensor *t = cn_mul(in->x, in->two);
    t = cn_add(t, in->one);
    t = cn_mul(t, in->w);
    t = cn_relu(t);
    t = cn_sub(t, in->x);
    t = cn_square(t);
    t = cn_neg(t);
    return cn_exp(t);
}

/* Registers: 0 x, 1 w, 2 two, 3 one, 4 half; instruction k writes 5 + k. */
#define I(OP, A, B) {.op = CN_OP_##OP, .a = A, .b = B, .c = -1}
static const cn_fused_instr chain_tanh[8] = {
    I(mul, 0, 2),   I(add, 5, 3), I(tanh, 6, -1),    I(mul, 7, 1),
    I(relu, 8, -1), I(sub, 9, 0), I(sigmoid, 10, -1), I(mul, 11, 4),
};
static const cn_fused_instr chain_exp[8] = {
    I(mul, 0, 2), I(add, 5, 3),    I(mul, 6, 1),    I(relu, 7, -1),
    I(sub, 8, 0), I(square, 9, -1), I(neg, 10, -1), I(exp, 11, -1),
};
#undef I

typedef struct chain {
    const char *name;
    cn_tensor *(*unfused)(const inputs *in);
    const cn_fused_instr *instr;
} chain;

static double time_unfused(const chain *c, const inputs *in) {
    evict_caches();
    cn_scope_begin();
    double t0 = bench_now_s();
    cn_tensor *r = c->unfused(in);
    double t = bench_now_s() - t0;
    cn_scope_end();
    return r ? t : -1;
}

static double time_fused(const chain *c, const inputs *in, cn_tensor *out) {
    cn_tensor *regs[5] = {in->x, in->w, in->two, in->one, in->half};
    cn_fused_expr e = {5, 8, (cn_fused_instr *)c->instr, 12};
    evict_caches();
    double t0 = bench_now_s();
    int rc = cn_fused_run(&e, regs, out);
    double t = bench_now_s() - t0;
    return rc == 0 ? t : -1;
}

int main(int argc, char **argv) {
    int64_t n = 1 << 20;
    int repeats = 31;
    bool json = false;
    if (bench_size_args(argc, argv, &n, &repeats, &json)) return 2;
    evict_buf = calloc(1, EVICT_BYTES);
    if (!evict_buf) return 1;
    cn_manual_seed(0);
    inputs in = {cn_uniform(CN_F32, CN_SHAPE(n), -2, 2), cn_uniform(CN_F32, CN_SHAPE(n), -2, 2),
                 cn_scalar(CN_F32, 2), cn_scalar(CN_F32, 1), cn_scalar(CN_F32, 0.5)};
    cn_tensor *out = cn_empty(CN_F32, CN_SHAPE(n));
    const chain chains[2] = {{"tanh", unfused_tanh, chain_tanh}, {"exp", unfused_exp, chain_exp}};
    enum { NCHAINS = 2 };

    /* Same bits as the ops one by one. */
    for (int c = 0; c < NCHAINS; c++) {
        cn_scope_begin();
        cn_tensor *want = chains[c].unfused(&in);
        bool same = want && time_fused(&chains[c], &in, out) >= 0 &&
                    memcmp(cn_data(want), cn_data(out), (size_t)n * sizeof(float)) == 0;
        cn_scope_end();
        if (!same) {
            fprintf(stderr, "bench_fused: %s chain: fused and unfused results differ (%s)\n",
                    chains[c].name, cn_last_error());
            return 1;
        }
    }

    double *tu = malloc(sizeof(double) * (size_t)repeats);
    double *tf = malloc(sizeof(double) * (size_t)repeats);
    for (double t0 = bench_now_s(); bench_now_s() - t0 < 0.3;)
        for (int c = 0; c < NCHAINS; c++) {
            time_unfused(&chains[c], &in);
            time_fused(&chains[c], &in, out);
        }
    int thread_counts[2] = {1, 2};
    double med_u[NCHAINS][2], med_f[NCHAINS][2], min_u[NCHAINS][2], min_f[NCHAINS][2];
    for (int ti = 0; ti < 2; ti++) {
        cn_set_num_threads(thread_counts[ti]);
        for (int c = 0; c < NCHAINS; c++) {
            time_unfused(&chains[c], &in);
            time_fused(&chains[c], &in, out);
            for (int r = 0; r < repeats; r++) {
                tu[r] = time_unfused(&chains[c], &in);
                tf[r] = time_fused(&chains[c], &in, out);
            }
            med_u[c][ti] = bench_median(tu, repeats); /* sorts */
            med_f[c][ti] = bench_median(tf, repeats);
            min_u[c][ti] = tu[0];
            min_f[c][ti] = tf[0];
        }
    }

    if (json) {
        printf("{\"benchmark\": \"fused\", \"dtype\": \"f32\", \"n\": %lld, \"ops\": 8, "
               "\"repeats\": %d, \"results\": [",
               (long long)n, repeats);
        for (int c = 0; c < NCHAINS; c++)
            for (int ti = 0; ti < 2; ti++)
                printf("%s{\"chain\": \"%s\", \"threads\": %d, \"unfused_ms\": %.3f, "
                       "\"fused_ms\": %.3f, \"speedup\": %.2f, \"unfused_min_ms\": %.3f, "
                       "\"fused_min_ms\": %.3f, \"speedup_min\": %.2f}",
                       c + ti ? ", " : "", chains[c].name, thread_counts[ti],
                       med_u[c][ti] * 1e3, med_f[c][ti] * 1e3, med_u[c][ti] / med_f[c][ti],
                       min_u[c][ti] * 1e3, min_f[c][ti] * 1e3, min_u[c][ti] / min_f[c][ti]);
        printf("]}\n");
    } else {
        printf("8 elementwise ops, f32, %lld elements, median of %d interleaved repeats\n"
               "  tanh: sigmoid(relu(tanh(x*2+1)*w)-x)*0.5\n"
               "  exp:  exp(-(relu((x*2+1)*w)-x)^2)\n\n",
               (long long)n, repeats);
        printf("%-5s %3s | %10s %8s %7s | %10s %8s %7s\n", "chain", "thr", "unfused ms",
               "fused ms", "speedup", "min unf.", "min fus.", "speedup");
        for (int c = 0; c < NCHAINS; c++)
            for (int ti = 0; ti < 2; ti++)
                printf("%-5s %3d | %10.3f %8.3f %6.2fx | %10.3f %8.3f %6.2fx\n", chains[c].name,
                       thread_counts[ti], med_u[c][ti] * 1e3, med_f[c][ti] * 1e3,
                       med_u[c][ti] / med_f[c][ti], min_u[c][ti] * 1e3, min_f[c][ti] * 1e3,
                       min_u[c][ti] / min_f[c][ti]);
    }
    free(tu);
    free(tf);
    free(evict_buf);
    cn_release(in.x);
    cn_release(in.w);
    cn_release(in.two);
    cn_release(in.one);
    cn_release(in.half);
    cn_release(out);
    return 0;
}
