/* Static programs against eager mode: the training step of each benchmark
 * model (mlp, cnn, lstm; docs/benchmarks.md), eager (forward, backward,
 * optimiser step) and as one program (cn_compile_train_step at -O2 and
 * -O1), interleaved rounds, median time per step; the program's planned
 * memory against the sum of its intermediates; and the fused chain of 8
 * elementwise ops (bench_fused has the kernel alone).
 *
 *   bench_static [--threads T] [--rounds R] [--steps S] [--model NAME]
 *
 * Random data of the real shapes: throughput does not depend on values. */
#include "../tools/tools.h"
#include "bench_util.h"

#include <stdio.h>
#include <string.h>

typedef struct setup {
    const char *name;
    int64_t batch;
    cn_module *m;
    cn_optimizer *opt;
    cn_graph *g;
    cn_program *prog;
    cn_tensor *ph[2];
    cn_tensor *x, *y;
} setup;

static cn_optimizer *make_opt(const char *name, cn_module *m) {
    cn_tensor **params = NULL;
    int n = cn_module_parameters(m, &params, NULL);
    cn_optimizer *o = !strcmp(name, "mlp")
                          ? cn_sgd(params, n, &(cn_sgd_opts){.lr = 0.05, .momentum = 0.9})
                          : cn_adam(params, n, &(cn_adam_opts){.lr = 1e-3});
    free(params);
    return o;
}

static int build(setup *s, const char *name, int level) {
    memset(s, 0, sizeof *s);
    s->name = name;
    s->batch = !strcmp(name, "cnn") ? 64 : 128;
    cn_manual_seed(1);
    s->m = cn_tool_make_model(name);
    s->opt = s->m ? make_opt(name, s->m) : NULL;
    if (!s->opt) return -1;
    s->x = cn_retain(cn_rand(CN_F32, CN_SHAPE(s->batch, 1, 28, 28)));
    s->y = cn_retain(cn_randint(0, 10, CN_I64, CN_SHAPE(s->batch)));
    if (level < 0) return 0; /* eager */
    s->g = cn_graph_new();
    s->ph[0] = cn_placeholder(s->g, "images", CN_F32, CN_SHAPE(-1, 1, 28, 28));
    s->ph[1] = cn_placeholder(s->g, "labels", CN_I64, CN_SHAPE(-1));
    cn_tensor *loss = cn_cross_entropy(cn_module_forward(s->m, s->ph[0]), s->ph[1],
                                       CN_REDUCTION_MEAN, 0);
    s->prog = loss ? cn_compile_train_step(s->g, &loss, 1, s->opt,
                                           &(cn_compile_opts){.opt_level = level})
                   : NULL;
    return s->prog ? 0 : -1;
}

static void teardown(setup *s) {
    cn_program_free(s->prog);
    cn_graph_free(s->g);
    cn_optimizer_free(s->opt);
    cn_module_free(s->m);
    cn_release(s->x);
    cn_release(s->y);
}

static int step(setup *s) {
    cn_scope_begin();
    int rc;
    if (s->prog) {
        cn_tensor *vals[2] = {s->x, s->y}, *loss;
        rc = cn_run(s->prog, s->ph, vals, 2, &loss, 1);
    } else {
        cn_optimizer_zero_grad(s->opt);
        cn_tensor *loss = cn_cross_entropy(cn_module_forward(s->m, s->x), s->y, CN_REDUCTION_MEAN, 0);
        rc = loss ? cn_backward(loss, NULL) : -1;
        if (rc == 0) rc = cn_optimizer_step(s->opt);
    }
    cn_scope_end();
    return rc;
}

/* Mean seconds per step over n steps. */
static double timed(setup *s, int n) {
    double t0 = bench_now_s();
    for (int i = 0; i < n; i++)
        if (step(s) < 0) {
            fprintf(stderr, "bench_static: %s: %s\n", s->name, cn_last_error());
            exit(1);
        }
    return (bench_now_s() - t0) / n;
}

#define NMODES 3
static const int mode_level[NMODES] = {-1, 2, 1};
static const char *mode_name[NMODES] = {"eager", "static -O2", "static -O1"};

static void bench_model(const char *name, int rounds, int steps) {
    setup s[NMODES];
    for (int k = 0; k < NMODES; k++)
        if (build(&s[k], name, mode_level[k]) < 0) {
            fprintf(stderr, "bench_static: %s: %s\n", name, cn_tool_error());
            exit(1);
        }
    for (int k = 0; k < NMODES; k++) timed(&s[k], 20); /* warm-up */
    double *t[NMODES];
    for (int k = 0; k < NMODES; k++) t[k] = malloc(sizeof(double) * (size_t)rounds);
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < NMODES; k++) t[k][r] = timed(&s[k], steps);
    double med[NMODES];
    for (int k = 0; k < NMODES; k++) med[k] = bench_median(t[k], rounds);
    for (int k = 0; k < NMODES; k++)
        printf("%-5s %-11s %8.3f ms/step %9.0f samples/s  x%.2f vs eager\n", name, mode_name[k],
               1e3 * med[k], (double)s[k].batch / med[k], med[0] / med[k]);
    cn_program_stats st;
    cn_program_stats_get(s[1].prog, &st);
    printf("%-5s program: %d steps (%d fused, %d in place), %d levels; intermediates planned "
           "%.2f MB vs %.2f MB unplanned (%.0f%%)\n",
           name, st.nsteps, st.nfused, st.ninplace, st.nlevels, st.planned_bytes / 1e6,
           st.unplanned_bytes / 1e6,
           st.unplanned_bytes ? 100.0 * (double)st.planned_bytes / (double)st.unplanned_bytes : 0);
    for (int k = 0; k < NMODES; k++) {
        free(t[k]);
        teardown(&s[k]);
    }
}

/* 8 elementwise ops over 1M elements: one fused step against 8 kernels.
 * Two chains: with two transcendental ops (the arithmetic of tanh and exp
 * bounds what fusion can save) and of arithmetic only (memory passes are
 * what it saves). */
static cn_tensor *chain_math(cn_tensor *x, cn_tensor *y) {
    cn_tensor *t = cn_add_scalar(cn_mul_scalar(x, 2), 1);
    t = cn_mul(cn_tanh(t), y);
    t = cn_relu(cn_sub(t, y));
    t = cn_exp(cn_neg(t));
    return cn_mul_scalar(t, 0.5);
}

static cn_tensor *chain_arith(cn_tensor *x, cn_tensor *y) {
    cn_tensor *t = cn_add_scalar(cn_mul_scalar(x, 2), 1);
    t = cn_sub(cn_mul(t, y), x);
    t = cn_maximum(cn_relu(t), y);
    t = cn_add(cn_mul_scalar(t, 0.5), x);
    return t;
}

static void bench_chain(int rounds, const char *label, cn_tensor *(*chain)(cn_tensor *, cn_tensor *)) {
    cn_tensor *x = cn_retain(cn_randn(CN_F32, CN_SHAPE(1 << 20)));
    cn_tensor *y = cn_retain(cn_randn(CN_F32, CN_SHAPE(1 << 20)));
    cn_graph *g = cn_graph_new();
    cn_tensor *px = cn_placeholder(g, "x", CN_F32, CN_SHAPE(1 << 20));
    cn_tensor *py = cn_placeholder(g, "y", CN_F32, CN_SHAPE(1 << 20));
    cn_tensor *out = chain(px, py), *ph[2] = {px, py}, *vals[2] = {x, y};
    cn_program *p[2] = {cn_compile(g, &out, 1, &(cn_compile_opts){.opt_level = 1}),
                        cn_compile(g, &out, 1, &(cn_compile_opts){.opt_level = 2})};
    double *t[3];
    for (int k = 0; k < 3; k++) t[k] = malloc(sizeof(double) * (size_t)rounds);
    for (int r = -2; r < rounds; r++) /* two rounds of warm-up */
        for (int k = 0; k < 3; k++) {
            double t0 = bench_now_s();
            for (int i = 0; i < 20; i++) {
                cn_scope_begin();
                cn_tensor *o;
                if (k == 0) chain(x, y);
                else cn_run(p[k - 1], ph, vals, 2, &o, 1);
                cn_scope_end();
            }
            if (r >= 0) t[k][r] = (bench_now_s() - t0) / 20;
        }
    double e = bench_median(t[0], rounds), u = bench_median(t[1], rounds),
           f = bench_median(t[2], rounds);
    cn_program_stats st;
    cn_program_stats_get(p[1], &st);
    printf("chain of 8 elementwise ops (%s), 1M f32: eager %.3f ms, unfused program %.3f ms, "
           "fused program %.3f ms (%d step): fused x%.2f vs unfused, x%.2f vs eager\n",
           label, 1e3 * e, 1e3 * u, 1e3 * f, st.nsteps, u / f, e / f);
    for (int k = 0; k < 3; k++) free(t[k]);
    cn_program_free(p[0]);
    cn_program_free(p[1]);
    cn_graph_free(g);
    cn_release(x);
    cn_release(y);
}

int main(int argc, char **argv) {
    int threads = 0, rounds = 5, steps = 20;
    const char *only = NULL;
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(argv[i], "--threads")) threads = atoi(v);
        else if (v && !strcmp(argv[i], "--rounds")) rounds = atoi(v);
        else if (v && !strcmp(argv[i], "--steps")) steps = atoi(v);
        else if (v && !strcmp(argv[i], "--model")) only = v;
        else {
            fprintf(stderr, "usage: bench_static [--threads T] [--rounds N] [--steps N] "
                            "[--model mlp|cnn|lstm|chain]\n");
            return 2;
        }
    }
    if (threads > 0) cn_set_num_threads(threads);
    if (rounds < 1) rounds = 1;
    printf("bench_static: %d thread(s), median of %d rounds of %d steps\n", cn_get_num_threads(),
           rounds, steps);
    const char *models[] = {"mlp", "cnn", "lstm"};
    for (int k = 0; k < 3; k++)
        if (!only || !strcmp(only, models[k])) bench_model(models[k], rounds, steps);
    if (!only || !strcmp(only, "chain")) {
        bench_chain(rounds, "tanh, exp", chain_math);
        bench_chain(rounds, "arithmetic", chain_arith);
    }
    return 0;
}
