/* lstm_seq (src/ops/rnn.c) and the LSTM module built on it:
 *   - the forward pass against naive loops in double (f32 and f64, both
 *     directions, with and without h0 / c0, T = 1, odd sizes);
 *   - the fused backward against the recurrence built from ops (what
 *     create_graph uses), and gradients of gradients against central
 *     differences (test_grad checks first order: grad_cases_rnn.h);
 *   - the LSTM module against the unrolled composition of ops it used to
 *     be (outputs, final states, every gradient), eager and static;
 *   - errors: bad shapes, second order through a static graph. */
#include "harness.h"
#include "ops/op.h"

/* ---- naive reference ---- */

static double sig(double v) { return 1 / (1 + exp(-v)); }

static double *values(const cn_tensor *t) {
    int64_t n = cn_numel(t);
    double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    for (int64_t k = 0; k < n; k++) v[k] = th_at(t, k);
    return v;
}

/* y [T, N, 6H] = (h, c, i, f, g, o) per step; h0, c0 NULL for zeros. */
static void ref_forward(int64_t T, int64_t N, int64_t H, const double *gx, const double *w,
                        const double *h0, const double *c0, bool rev, double *y) {
    double *h = calloc((size_t)(N * H), sizeof *h), *c = calloc((size_t)(N * H), sizeof *c);
    double *a = malloc(sizeof *a * (size_t)(4 * H));
    for (int64_t k = 0; k < N * H; k++) {
        h[k] = h0 ? h0[k] : 0;
        c[k] = c0 ? c0[k] : 0;
    }
    for (int64_t s = 0; s < T; s++) {
        int64_t t = rev ? T - 1 - s : s;
        for (int64_t n = 0; n < N; n++) {
            for (int64_t q = 0; q < 4 * H; q++) {
                a[q] = gx[(t * N + n) * 4 * H + q];
                for (int64_t j = 0; j < H; j++) a[q] += h[n * H + j] * w[q * H + j];
            }
            double *yr = y + (t * N + n) * 6 * H;
            for (int64_t j = 0; j < H; j++) {
                double i = sig(a[j]), f = sig(a[H + j]), g = tanh(a[2 * H + j]);
                double o = sig(a[3 * H + j]);
                c[n * H + j] = f * c[n * H + j] + i * g;
                h[n * H + j] = o * tanh(c[n * H + j]);
                double row[6] = {h[n * H + j], c[n * H + j], i, f, g, o};
                for (int p = 0; p < 6; p++) yr[p * H + j] = row[p];
            }
        }
    }
    free(h);
    free(c);
    free(a);
}

typedef struct cfg {
    int64_t T, N, H;
    int nstate; /* 0, 1 (h0) or 2 (h0, c0) */
    bool rev;
} cfg;

static const cfg cfgs[] = {
    {1, 1, 1, 0, false}, {1, 3, 5, 2, false}, {4, 2, 3, 2, false}, {5, 3, 7, 0, true},
    {3, 4, 6, 1, true},  {6, 1, 2, 2, true},  {2, 5, 17, 1, false},
};
#define NCFGS (int)(sizeof cfgs / sizeof cfgs[0])

/* Inputs of a configuration: gx, w, h0, c0 (the states may be unused). */
static void make_inputs(const cfg *c, cn_dtype dt, int layout, cn_tensor **in) {
    in[0] = th_random(dt, CN_SHAPE(c->T, c->N, 4 * c->H), -2, 2, layout, NULL);
    in[1] = th_random(dt, CN_SHAPE(4 * c->H, c->H), -1, 1, layout, NULL);
    in[2] = th_random(dt, CN_SHAPE(c->N, c->H), -1, 1, layout, NULL);
    in[3] = th_random(dt, CN_SHAPE(c->N, c->H), -1, 1, layout, NULL);
}

static cn_tensor *lstm(cn_tensor **in, int nstate, bool rev) {
    return cn_op_apply(CN_OP_lstm_seq, in, 2 + nstate, &(cn_attrs){.i = {rev}});
}

static void test_forward_matches_loops(void) {
    th_seed(11);
    cn_dtype dts[2] = {CN_F64, CN_F32};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < NCFGS; k++) {
            const cfg *c = &cfgs[k];
            cn_tensor *in[4];
            make_inputs(c, dts[d], k % TH_NLAYOUTS, in);
            cn_tensor *y = lstm(in, c->nstate, c->rev);
            CHECK_SHAPE(y, c->T, c->N, 6 * c->H);
            if (!y) continue;
            double *v[4], *ref = malloc(sizeof *ref * (size_t)cn_numel(y));
            for (int i = 0; i < 4; i++) v[i] = values(in[i]);
            ref_forward(c->T, c->N, c->H, v[0], v[1], c->nstate > 0 ? v[2] : NULL,
                        c->nstate > 1 ? v[3] : NULL, c->rev, ref);
            double tol = dts[d] == CN_F64 ? 1e-12 : 2e-6;
            int bad = 0;
            for (int64_t e = 0; e < cn_numel(y) && bad < 3; e++)
                if (!th_close(th_at(y, e), ref[e], tol, tol)) {
                    bad++;
                    CHECK_MSG(0, "%s config %d: y[%" PRId64 "] = %.9g, expected %.9g",
                              cn_dtype_name(dts[d]), k, e, th_at(y, e), ref[e]);
                }
            th_checks++;
            for (int i = 0; i < 4; i++) free(v[i]);
            free(ref);
        }
}

/* ---- the fused backward against the recurrence built from ops ---- */

static bool all_close(const char *what, int k, cn_tensor *a, cn_tensor *b, double tol) {
    bool ok = a && b && cn_allclose(a, b, tol, tol);
    CHECK_MSG(ok, "config %d: %s differs (last error: %s)", k, what, cn_last_error());
    return ok;
}

static void test_backward_matches_ops(void) {
    th_seed(12);
    cn_dtype dts[2] = {CN_F64, CN_F32};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < NCFGS; k++) {
            const cfg *c = &cfgs[k];
            cn_tensor *in[4];
            make_inputs(c, dts[d], TH_CONTIG, in);
            int nin = 2 + c->nstate;
            for (int i = 0; i < nin; i++) cn_set_requires_grad(in[i], true);
            cn_tensor *y = lstm(in, c->nstate, c->rev);
            cn_tensor *w = th_random(dts[d], 3, cn_shape(y), -1, 1, TH_CONTIG, NULL);
            cn_tensor *loss = cn_sum(cn_mul(y, w), NULL, 0, false);
            cn_tensor *fused[4], *ops[4];
            CHECK_EQ_INT(cn_grad(&loss, NULL, 1, in, nin, fused, CN_GRAD_RETAIN_GRAPH), 0);
            CHECK_EQ_INT(cn_grad(&loss, NULL, 1, in, nin, ops, CN_GRAD_CREATE_GRAPH), 0);
            double tol = dts[d] == CN_F64 ? 1e-12 : 1e-5;
            const char *names[4] = {"d gx", "d w_hh", "d h0", "d c0"};
            for (int i = 0; i < nin; i++) all_close(names[i], k, fused[i], ops[i], tol);
        }
}

/* Second order: d/dx of sum(w . dL/dw_hh) (L = sum(r . y)) through the
 * create_graph path, against central differences of the first-order
 * gradient. */
static void test_second_order(void) {
    th_seed(13);
    for (int k = 1; k < NCFGS; k += 2) {
        const cfg *c = &cfgs[k];
        cn_tensor *in[4];
        make_inputs(c, CN_F64, TH_CONTIG, in);
        int nin = 2 + c->nstate;
        for (int i = 0; i < nin; i++) cn_set_requires_grad(in[i], true);
        cn_tensor *r = th_random(CN_F64, CN_SHAPE(c->T, c->N, 6 * c->H), -1, 1, TH_CONTIG, NULL);
        cn_tensor *s = th_random(CN_F64, 2, cn_shape(in[1]), -1, 1, TH_CONTIG, NULL);
        cn_tensor *g1;
        cn_tensor *loss = cn_sum(cn_mul(lstm(in, c->nstate, c->rev), r), NULL, 0, false);
        CHECK_EQ_INT(cn_grad(&loss, NULL, 1, &in[1], 1, &g1, CN_GRAD_CREATE_GRAPH), 0);
        cn_tensor *l2 = cn_sum(cn_mul(g1, s), NULL, 0, false);
        cn_tensor *g2[4];
        CHECK_EQ_INT(cn_grad(&l2, NULL, 1, in, nin, g2, 0), 0);
        /* f(x) = sum(s . dL/dw_hh (x)), first order only (the fused path). */
        for (int i = 0; i < nin; i++) {
            int64_t n = cn_numel(in[i]);
            for (int64_t e = 0; e < n; e += n / 3 + 1) {
                int64_t idx[3];
                th_unravel(e, cn_ndim(in[i]), cn_shape(in[i]), idx);
                double x0 = cn_get(in[i], idx), f[2];
                for (int sgn = 0; sgn < 2; sgn++) {
                    cn_tensor *pin[4];
                    for (int j = 0; j < 4; j++) pin[j] = cn_detach(cn_clone(in[j]));
                    cn_set(pin[i], idx, x0 + (sgn ? -1e-6 : 1e-6));
                    cn_set_requires_grad(pin[1], true);
                    cn_tensor *l = cn_sum(cn_mul(lstm(pin, c->nstate, c->rev), r), NULL, 0, false);
                    cn_tensor *g = NULL;
                    CHECK_EQ_INT(cn_grad(&l, NULL, 1, &pin[1], 1, &g, 0), 0);
                    f[sgn] = cn_item(cn_sum(cn_mul(g, s), NULL, 0, false));
                }
                double num = (f[0] - f[1]) / 2e-6;
                CHECK_MSG(g2[i] && th_close(th_at(g2[i], e), num, 1e-5, 1e-6),
                          "config %d: d2 / d input %d [%" PRId64 "] = %.9g, numeric %.9g", k, i,
                          e, g2[i] ? th_at(g2[i], e) : NAN, num);
            }
        }
    }
}

/* ---- the module against the unrolled composition ---- */

/* One direction the way rnn.c unrolled it: x [T, N, in]. */
static cn_tensor *unrolled(cn_tensor *x, cn_tensor *wih, cn_tensor *whh, cn_tensor *bih,
                           cn_tensor *bhh, bool rev, cn_tensor **h, cn_tensor **c) {
    int64_t T = cn_shape(x)[0];
    cn_tensor *xp = cn_add(cn_add(cn_matmul(x, cn_mT(wih)), bih), bhh), *outs[16];
    for (int64_t s = 0; s < T; s++) {
        int64_t t = rev ? T - 1 - s : s;
        cn_tensor *g = cn_squeeze(cn_narrow(xp, 0, t, 1), 0), *q[4];
        if (*h) g = cn_add(g, cn_matmul(*h, cn_mT(whh)));
        cn_chunk(g, 4, -1, q);
        cn_tensor *ig = cn_mul(cn_sigmoid(q[0]), cn_tanh(q[2]));
        *c = *c ? cn_add(cn_mul(cn_sigmoid(q[1]), *c), ig) : ig;
        *h = outs[t] = cn_mul(cn_sigmoid(q[3]), cn_tanh(*c));
    }
    return cn_stack(outs, (int)T, 0);
}

/* A 2-layer module (bidirectional or not) against the composition, for
 * x [N, T, in] (batch_first) and optional h0, c0. */
static void check_module(bool bidir, bool states, bool static_mode) {
    int D = bidir ? 2 : 1;
    int64_t T = 5, N = 3, IN = 4, H = 6;
    cn_module *m = cn_nn_lstm(IN, H, &(cn_rnn_opts){.num_layers = 2, .bidirectional = bidir,
                                                   .batch_first = true});
    cn_tensor **p = NULL;
    int np = cn_module_parameters(m, &p, NULL);
    cn_tensor *x = th_random(CN_F32, CN_SHAPE(N, T, IN), -1, 1, TH_CONTIG, NULL);
    cn_tensor *h0 = states ? th_random(CN_F32, CN_SHAPE(2 * D, N, H), -1, 1, TH_CONTIG, NULL) : NULL;
    cn_tensor *c0 = states ? th_random(CN_F32, CN_SHAPE(2 * D, N, H), -1, 1, TH_CONTIG, NULL) : NULL;
    cn_set_requires_grad(x, true);
    /* The reference. */
    cn_tensor *layer_in = cn_transpose(x, 0, 1), *hs[4], *cs[4];
    for (int k = 0; k < 2; k++) {
        cn_tensor *ys[2];
        for (int d = 0; d < D; d++) {
            int i = k * D + d;
            cn_tensor *h = states ? cn_squeeze(cn_narrow(h0, 0, i, 1), 0) : NULL;
            cn_tensor *c = states ? cn_squeeze(cn_narrow(c0, 0, i, 1), 0) : NULL;
            ys[d] = unrolled(layer_in, p[4 * i], p[4 * i + 1], p[4 * i + 2], p[4 * i + 3], d, &h, &c);
            hs[i] = h;
            cs[i] = c;
        }
        layer_in = D == 2 ? cn_concat(ys, 2, 2) : ys[0];
    }
    cn_tensor *ref[3] = {cn_transpose(layer_in, 0, 1), cn_stack(hs, 2 * D, 0), cn_stack(cs, 2 * D, 0)};
    /* The module, eager or in a static program with an unknown batch. */
    cn_tensor *got[3];
    cn_graph *g = NULL;
    cn_program *prog = NULL;
    if (static_mode) {
        g = cn_graph_new();
        cn_tensor *ph[3] = {cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, T, IN)), NULL, NULL};
        int nph = 1;
        if (states) {
            ph[1] = cn_placeholder(g, "h0", CN_F32, CN_SHAPE(2 * D, -1, H));
            ph[2] = cn_placeholder(g, "c0", CN_F32, CN_SHAPE(2 * D, -1, H));
            nph = 3;
        }
        cn_set_requires_grad(ph[0], true);
        cn_tensor *outs[3 + 1 + 16];
        CHECK_EQ_INT(cn_rnn_forward(m, ph[0], ph[1], ph[2], &outs[0], &outs[1], &outs[2]), 0);
        cn_tensor *wsum = cn_add(cn_add(cn_sum(cn_square(outs[0]), NULL, 0, false),
                                        cn_sum(outs[1], NULL, 0, false)),
                                 cn_sum(cn_mul(outs[2], outs[2]), NULL, 0, false));
        cn_tensor *wrt[17] = {ph[0]};
        for (int i = 0; i < np; i++) wrt[1 + i] = p[i];
        CHECK_EQ_INT(cn_grad(&wsum, NULL, 1, wrt, 1 + np, outs + 3, 0), 0);
        prog = cn_compile(g, outs, 3 + 1 + np, NULL);
        CHECK_MSG(prog, "compile: %s", cn_last_error());
        cn_tensor *vals[3] = {x, h0, c0}, *res[3 + 1 + 16];
        CHECK_EQ_INT(cn_run(prog, ph, vals, nph, res, 3 + 1 + np), 0);
        for (int i = 0; i < 3; i++) got[i] = res[i];
        cn_tensor *rl = cn_add(cn_add(cn_sum(cn_square(ref[0]), NULL, 0, false),
                                      cn_sum(ref[1], NULL, 0, false)),
                               cn_sum(cn_mul(ref[2], ref[2]), NULL, 0, false));
        cn_tensor *rg[17];
        wrt[0] = x;
        CHECK_EQ_INT(cn_grad(&rl, NULL, 1, wrt, 1 + np, rg, 0), 0);
        for (int i = 0; i < 1 + np; i++)
            CHECK_MSG(cn_allclose(res[3 + i], rg[i], 1e-4, 1e-5), "static gradient %d differs", i);
    } else {
        CHECK_EQ_INT(cn_rnn_forward(m, x, h0, c0, &got[0], &got[1], &got[2]), 0);
        cn_tensor *wy = th_random(CN_F32, 3, cn_shape(got[0]), -1, 1, TH_CONTIG, NULL);
        cn_tensor *wh = th_random(CN_F32, 3, cn_shape(got[1]), -1, 1, TH_CONTIG, NULL);
        cn_tensor *wc = th_random(CN_F32, 3, cn_shape(got[2]), -1, 1, TH_CONTIG, NULL);
        cn_tensor *l[2];
        for (int r = 0; r < 2; r++) {
            cn_tensor **o = r ? ref : got;
            l[r] = cn_add(cn_add(cn_sum(cn_mul(o[0], wy), NULL, 0, false),
                                 cn_sum(cn_mul(o[1], wh), NULL, 0, false)),
                          cn_sum(cn_mul(o[2], wc), NULL, 0, false));
        }
        cn_tensor *wrt[17] = {x}, *ga[17], *gb[17];
        for (int i = 0; i < np; i++) wrt[1 + i] = p[i];
        CHECK_EQ_INT(cn_grad(&l[0], NULL, 1, wrt, 1 + np, ga, 0), 0);
        CHECK_EQ_INT(cn_grad(&l[1], NULL, 1, wrt, 1 + np, gb, 0), 0);
        for (int i = 0; i < 1 + np; i++)
            CHECK_MSG(ga[i] && gb[i] && cn_allclose(ga[i], gb[i], 1e-4, 1e-5),
                      "bidir %d states %d: gradient %d differs", bidir, states, i);
    }
    const char *what[3] = {"output", "h_n", "c_n"};
    for (int i = 0; i < 3; i++)
        CHECK_MSG(got[i] && cn_allclose(got[i], ref[i], 1e-5, 1e-6),
                  "bidir %d states %d static %d: %s differs", bidir, states, static_mode, what[i]);
    cn_program_free(prog);
    cn_graph_free(g);
    free(p);
    cn_module_free(m);
}

static void test_module_matches_unrolled(void) {
    th_seed(14);
    for (int b = 0; b < 2; b++)
        for (int s = 0; s < 2; s++) check_module(b, s, false);
}

static void test_module_static(void) {
    th_seed(15);
    check_module(true, false, true);
    check_module(false, true, true);
}

/* A static graph whose loss reads only the leading parts of y (h, or h
 * and c): the backward op then reads only those (dy_parts); gradients
 * equal eager's. */
static void test_static_leading_parts(void) {
    th_seed(16);
    for (int k = 0; k < NCFGS; k++) {
        const cfg *c = &cfgs[k];
        for (int parts = 1; parts <= 2; parts++) {
            cn_tensor *in[4];
            make_inputs(c, CN_F64, TH_CONTIG, in);
            int nin = 2 + c->nstate;
            cn_graph *g = cn_graph_new();
            cn_tensor *ph[4];
            for (int i = 0; i < nin; i++) {
                ph[i] = cn_placeholder(g, "in", CN_F64, cn_ndim(in[i]), cn_shape(in[i]));
                cn_set_requires_grad(ph[i], true);
                cn_set_requires_grad(in[i], true);
            }
            cn_tensor *w = th_random(CN_F64, CN_SHAPE(c->T, c->N, parts * c->H), -1, 1, TH_CONTIG,
                                     NULL);
            cn_tensor *l[2], *grads[2][4];
            for (int s = 0; s < 2; s++) {
                cn_tensor *y = lstm(s ? ph : in, c->nstate, c->rev);
                l[s] = cn_sum(cn_mul(cn_narrow(y, 2, 0, parts * c->H), w), NULL, 0, false);
                CHECK_EQ_INT(cn_grad(&l[s], NULL, 1, s ? ph : in, nin, grads[s], 0), 0);
            }
            cn_program *p = cn_compile(g, grads[1], nin, NULL);
            cn_tensor *res[4];
            CHECK_EQ_INT(cn_run(p, ph, in, nin, res, nin), 0);
            for (int i = 0; i < nin; i++)
                CHECK_MSG(cn_allclose(res[i], grads[0][i], 1e-12, 1e-12),
                          "config %d, %d parts: static gradient %d differs", k, parts, i);
            cn_program_free(p);
            cn_graph_free(g);
        }
    }
}

/* One training-step program run several times gives what eager steps
 * give: nothing it computes may be frozen at build time (a sum of two
 * parameters computed eagerly while the graph is built would be). */
static cn_module *ts_lstm, *ts_fc;
static cn_tensor *ts_forward(cn_tensor *x) {
    cn_tensor *out = NULL;
    if (cn_rnn_forward(ts_lstm, x, NULL, NULL, &out, NULL, NULL) < 0) return NULL;
    return cn_module_forward(ts_fc, cn_squeeze(cn_narrow(out, 1, 4, 1), 1));
}

static void test_train_step_program(void) {
    cn_tensor *x = th_random(CN_F32, CN_SHAPE(6, 5, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *y = cn_randint(0, 4, CN_I64, CN_SHAPE(6));
    cn_tensor *params[2][10];
    cn_module *mods[2][2];
    int np = 0;
    for (int mode = 0; mode < 2; mode++) {
        cn_manual_seed(5);
        ts_lstm = mods[mode][0] =
            cn_nn_lstm(3, 7, &(cn_rnn_opts){.batch_first = true, .bidirectional = true});
        ts_fc = mods[mode][1] = cn_nn_linear(14, 4, true);
        cn_tensor **p;
        int n1 = cn_module_parameters(ts_lstm, &p, NULL);
        memcpy(params[mode], p, sizeof *p * (size_t)n1);
        free(p);
        CHECK_EQ_INT(cn_module_parameters(ts_fc, &p, NULL), 2);
        memcpy(params[mode] + n1, p, sizeof *p * 2);
        free(p);
        cn_optimizer *opt = cn_adam(params[mode], n1 + 2, &(cn_adam_opts){.lr = 1e-2});
        if (mode == 0) {
            for (int s = 0; s < 3; s++) {
                cn_optimizer_zero_grad(opt);
                CHECK_EQ_INT(cn_backward(cn_cross_entropy(ts_forward(x), y, CN_REDUCTION_MEAN, 0),
                                         NULL),
                             0);
                CHECK_EQ_INT(cn_optimizer_step(opt), 0);
            }
        } else {
            cn_graph *g = cn_graph_new();
            cn_tensor *ph[2] = {cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 5, 3)),
                                cn_placeholder(g, "y", CN_I64, CN_SHAPE(-1))};
            cn_tensor *loss = cn_cross_entropy(ts_forward(ph[0]), ph[1], CN_REDUCTION_MEAN, 0);
            cn_program *prog = cn_compile_train_step(g, &loss, 1, opt, NULL);
            CHECK_MSG(prog, "compile_train_step: %s", cn_last_error());
            cn_tensor *vals[2] = {x, y}, *out;
            for (int s = 0; s < 3 && prog; s++) CHECK_EQ_INT(cn_run(prog, ph, vals, 2, &out, 1), 0);
            cn_program_free(prog);
            cn_graph_free(g);
        }
        cn_optimizer_free(opt);
        np = n1 + 2;
    }
    for (int i = 0; i < np; i++)
        CHECK_MSG(cn_allclose(params[0][i], params[1][i], 1e-5, 1e-6),
                  "parameter %d after 3 steps: static differs from eager", i);
    for (int mode = 0; mode < 2; mode++) {
        cn_module_free(mods[mode][0]);
        cn_module_free(mods[mode][1]);
    }
}

/* ---- errors ---- */

static void test_errors(void) {
    cn_tensor *gx = cn_zeros(CN_F32, CN_SHAPE(2, 3, 8)), *w = cn_zeros(CN_F32, CN_SHAPE(8, 2));
    cn_tensor *h = cn_zeros(CN_F32, CN_SHAPE(3, 2));
    CHECK_ERROR(cn_op_apply(CN_OP_lstm_seq, (cn_tensor *[]){gx}, 1, NULL), "2 to 4 inputs");
    CHECK_ERROR(cn_op_apply(CN_OP_lstm_seq, (cn_tensor *[]){gx, cn_zeros(CN_F32, CN_SHAPE(8, 3))}, 2,
                            NULL),
                "w_hh is [8, 3]; it must be [4H, H]");
    CHECK_ERROR(cn_op_apply(CN_OP_lstm_seq, (cn_tensor *[]){cn_zeros(CN_F32, CN_SHAPE(2, 3, 6)), w},
                            2, NULL),
                "gx is [2, 3, 6]; expected [T, N, 4H] with H = 2");
    CHECK_ERROR(cn_op_apply(CN_OP_lstm_seq, (cn_tensor *[]){gx, w, cn_zeros(CN_F32, CN_SHAPE(4, 2))},
                            3, NULL),
                "h0 is [4, 2]; expected [N, H] = [3, 2]");
    CHECK_ERROR(cn_op_apply(CN_OP_lstm_seq, (cn_tensor *[]){gx, w, h, cn_zeros(CN_F32, CN_SHAPE(2))},
                            4, NULL),
                "c0 is [2]");
    cn_tensor *y = cn_op_apply(CN_OP_lstm_seq, (cn_tensor *[]){gx, w}, 2, NULL);
    CHECK_ERROR(cn_op_apply(CN_OP_lstm_seq_backward,
                            (cn_tensor *[]){y, cn_zeros(CN_F32, CN_SHAPE(2, 3, 11)), w}, 3, NULL),
                "dy is [2, 3, 11] but y is [2, 3, 12]");

    /* Second order through a static graph: refused, saying why. */
    cn_graph *g = cn_graph_new();
    cn_tensor *px = cn_placeholder(g, "gx", CN_F64, CN_SHAPE(2, 3, 8));
    cn_tensor *pw = cn_placeholder(g, "w", CN_F64, CN_SHAPE(8, 2));
    cn_set_requires_grad(px, true);
    cn_set_requires_grad(pw, true);
    cn_tensor *l = cn_sum(cn_square(cn_op_apply(CN_OP_lstm_seq, (cn_tensor *[]){px, pw}, 2, NULL)),
                          NULL, 0, false);
    cn_tensor *g1, *g2;
    CHECK_EQ_INT(cn_grad(&l, NULL, 1, &pw, 1, &g1, 0), 0);
    cn_tensor *l2 = cn_sum(cn_square(g1), NULL, 0, false);
    CHECK_STATUS_ERROR(cn_grad(&l2, NULL, 1, &px, 1, &g2, 0),
                       "gradient of an LSTM's gradient is not supported in static graphs");
    cn_graph_free(g);
}

int main(void) {
    RUN(test_forward_matches_loops);
    RUN(test_backward_matches_ops);
    RUN(test_second_order);
    RUN(test_module_matches_unrolled);
    RUN(test_module_static);
    RUN(test_static_leading_parts);
    RUN(test_train_step_program);
    RUN(test_errors);
    return th_summary();
}
