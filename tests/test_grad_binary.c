/* The binary ops' gradient conventions where the maths has no derivative or
 * a special value: maximum/minimum at ties and NaNs, pow at base 0, at
 * exponent 0 and for negative bases, where's unselected branch and its
 * condition, division by 0; in both modes, against the values PyTorch
 * 1.13.1 gives (torch.autograd.grad / backward and torch.autograd.forward_ad,
 * in f64). Also: each gradient in its input's dtype under promotion, second
 * derivatives, and the rules on static-graph tensors. Smooth behaviour away
 * from these points is checked against finite differences by test_grad. */
#include "harness.h"
#include "ops/op.h"

static const double nan_ = NAN, inf_ = INFINITY, LN2_ = 0.69314718055994530942;

typedef cn_tensor *(*bin_fn)(cn_tensor *a, cn_tensor *b);

static void check_vals(const char *what, cn_tensor *t, const double *want, int n) {
    CHECK_MSG(t != NULL, "%s: missing (%s)", what, cn_last_error());
    if (!t) return;
    CHECK_EQ_INT(cn_numel(t), n);
    for (int i = 0; i < n && i < cn_numel(t); i++)
        CHECK_MSG(th_close(th_at(t, i), want[i], 1e-12, 1e-15), "%s [%d] is %.17g, PyTorch gives %.17g",
                  what, i, th_at(t, i), want[i]);
}

/* f(a, b) on 1-d inputs of n values: the gradients for the seed g, and the
 * output tangents for input tangents (ta, 0), (0, tb) and (ta, tb). */
typedef struct bin_want {
    const double *ga, *gb;             /* reverse mode */
    const double *t_a, *t_b, *t_both; /* forward mode; NULL: not checked */
} bin_want;

static void check_binary(const char *what, bin_fn f, int n, const double *av, const double *bv,
                         const double *g, const double *ta, const double *tb, bin_want w) {
    cn_scope_begin();
    cn_tensor *a = th_make(CN_F64, CN_SHAPE(n), av, TH_CONTIG);
    cn_tensor *b = th_make(CN_F64, CN_SHAPE(n), bv, TH_CONTIG);
    cn_set_requires_grad(a, true);
    cn_set_requires_grad(b, true);
    cn_tensor *y = f(a, b);
    CHECK_MSG(y && cn_backward(y, th_make(CN_F64, CN_SHAPE(n), g, TH_CONTIG)) == 0,
              "%s: backward failed: %s", what, cn_last_error());
    char label[200];
    snprintf(label, sizeof label, "%s: d/da", what);
    check_vals(label, cn_get_grad(a), w.ga, n);
    snprintf(label, sizeof label, "%s: d/db", what);
    check_vals(label, cn_get_grad(b), w.gb, n);

    cn_tensor *tan_a = th_make(CN_F64, CN_SHAPE(n), ta, TH_CONTIG);
    cn_tensor *tan_b = th_make(CN_F64, CN_SHAPE(n), tb, TH_CONTIG);
    const double *wants[3] = {w.t_a, w.t_b, w.t_both};
    const char *names[3] = {"jvp (a' only)", "jvp (b' only)", "jvp (both)"};
    for (int mode = 0; mode < 3; mode++) {
        if (!wants[mode]) continue;
        cn_dual_begin();
        cn_tensor *ad = cn_detach(a), *bd = cn_detach(b);
        if (mode != 1) CHECK(cn_set_tangent(ad, tan_a) == 0);
        if (mode != 0) CHECK(cn_set_tangent(bd, tan_b) == 0);
        cn_tensor *yd = f(ad, bd);
        snprintf(label, sizeof label, "%s: %s", what, names[mode]);
        check_vals(label, yd ? cn_get_tangent(yd) : NULL, wants[mode], n);
        cn_dual_end();
    }
    cn_scope_end();
}

static cn_tensor *f_max(cn_tensor *a, cn_tensor *b) { return cn_maximum(a, b); }
static cn_tensor *f_min(cn_tensor *a, cn_tensor *b) { return cn_minimum(a, b); }
static cn_tensor *f_pow(cn_tensor *a, cn_tensor *b) { return cn_pow(a, b); }
static cn_tensor *f_div(cn_tensor *a, cn_tensor *b) { return cn_div(a, b); }

/* Tie, a < b, a > b, NaN in a, NaN in b. */
static void test_minmax_ties_and_nan(void) {
    const double a[] = {1, 2, 3, nan_, 1}, b[] = {1, 3, 2, 1, nan_};
    const double g[] = {1, 10, 100, 1000, 10000};
    const double ta[] = {1, 1, 1, 1, 1}, tb[] = {10, 10, 10, 10, 10};
    check_binary("maximum", f_max, 5, a, b, g, ta, tb,
                 (bin_want){.ga = (double[]){0.5, 0, 100, 1000, 10000},
                            .gb = (double[]){0.5, 10, 0, 1000, 10000},
                            .t_a = (double[]){0.5, 0, 1, 0, 0},
                            .t_b = (double[]){5, 10, 0, 10, 10},
                            .t_both = (double[]){5.5, 10, 1, 10, 10}});
    check_binary("minimum", f_min, 5, a, b, g, ta, tb,
                 (bin_want){.ga = (double[]){0.5, 10, 0, 1000, 10000},
                            .gb = (double[]){0.5, 0, 100, 1000, 10000},
                            .t_a = (double[]){0.5, 1, 0, 0, 0},
                            .t_b = (double[]){5, 0, 10, 10, 10},
                            .t_both = (double[]){5.5, 1, 10, 10, 10}});
}

/* Ties inside a broadcast: the halves are summed back per input element. */
static void test_minmax_broadcast_ties(void) {
    cn_tensor *a = cn_from_data(CN_F64, CN_SHAPE(2, 1), (double[]){1, 2});
    cn_tensor *b = cn_from_data(CN_F64, CN_SHAPE(1, 3), (double[]){1, 2, 3});
    cn_set_requires_grad(a, true);
    cn_set_requires_grad(b, true);
    CHECK(cn_backward(cn_sum(cn_maximum(a, b), NULL, 0, false), NULL) == 0);
    check_vals("maximum broadcast d/da", cn_get_grad(a), (double[]){0.5, 1.5}, 2);
    check_vals("maximum broadcast d/db", cn_get_grad(b), (double[]){0.5, 1.5, 2}, 3);
    cn_zero_grad(a);
    cn_zero_grad(b);
    CHECK(cn_backward(cn_sum(cn_minimum(a, b), NULL, 0, false), NULL) == 0);
    check_vals("minimum broadcast d/da", cn_get_grad(a), (double[]){2.5, 1.5}, 2);
    check_vals("minimum broadcast d/db", cn_get_grad(b), (double[]){1.5, 0.5, 0}, 3);
}

/* pow at 0^0, 0^0.5, 0^1, 0^2, 0^-1, (-2)^2, (-2)^0.5, (-2)^0, 2^0, 0^-2,
 * 0^3. */
static void test_pow_special_points(void) {
    const double a[] = {0, 0, 0, 0, 0, -2, -2, -2, 2, 0, 0};
    const double b[] = {0, 0.5, 1, 2, -1, 2, 0.5, 0, 0, -2, 3};
    const double ones[11] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const double dbase[] = {0, inf_, 1, 0, -inf_, -4, nan_, 0, 0, -inf_, 0};
    const double dexp[] = {0, 0, 0, 0, -inf_, nan_, nan_, nan_, LN2_, -inf_, 0};
    const double both[] = {0, inf_, 1, 0, -inf_, nan_, nan_, nan_, LN2_, -inf_, 0};
    check_binary("pow", f_pow, 11, a, b, ones, ones, ones,
                 (bin_want){.ga = dbase, .gb = dexp, .t_a = dbase, .t_b = dexp, .t_both = both});
    /* The seed's sign reaches the infinities: -g * -inf. */
    const double minus[11] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
    check_binary("pow, seed -1", f_pow, 11, a, b, minus, ones, ones,
                 (bin_want){.ga = (double[]){0, -inf_, -1, 0, inf_, 4, nan_, 0, 0, inf_, 0},
                            .gb = (double[]){0, 0, 0, 0, inf_, nan_, nan_, nan_, -LN2_, inf_,
                                             0}});
}

static cn_tensor *f_pow0(cn_tensor *x) { return cn_pow_scalar(x, 0); }
static cn_tensor *f_pow2(cn_tensor *x) { return cn_pow_scalar(x, 2); }
static cn_tensor *f_pow_half(cn_tensor *x) { return cn_pow_scalar(x, 0.5); }
static cn_tensor *f_pow1(cn_tensor *x) { return cn_pow_scalar(x, 1); }
static cn_tensor *f_zero_pow(cn_tensor *x) { return cn_pow(cn_scalar(CN_F64, 0), x); }

/* The Python-scalar forms go through the same rule: x^s at x = 0, and
 * 0^e (a scalar base) for e = -1, 0, 2. */
static void test_pow_scalar_forms(void) {
    struct {
        const char *what;
        cn_tensor *(*f)(cn_tensor *);
        double x[3], want[3];
    } cases[] = {
        {"x^0 at 0", f_pow0, {0, 0, 0}, {0, 0, 0}},
        {"x^2 at 0", f_pow2, {0, 0, 0}, {0, 0, 0}},
        {"x^0.5 at 0", f_pow_half, {0, 0, 0}, {inf_, inf_, inf_}},
        {"x^1 at 0", f_pow1, {0, 0, 0}, {1, 1, 1}},
        {"0^e", f_zero_pow, {-1, 0, 2}, {-inf_, 0, 0}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cn_scope_begin();
        cn_tensor *x = th_make(CN_F64, CN_SHAPE(3), cases[k].x, TH_CONTIG);
        cn_set_requires_grad(x, true);
        CHECK(cn_backward(cn_sum(cases[k].f(x), NULL, 0, false), NULL) == 0);
        check_vals(cases[k].what, cn_get_grad(x), cases[k].want, 3);
        cn_dual_begin();
        cn_tensor *xd = cn_detach(x);
        CHECK(cn_set_tangent(xd, cn_ones_like(x)) == 0);
        cn_tensor *y = cases[k].f(xd);
        check_vals(cases[k].what, y ? cn_get_tangent(y) : NULL, cases[k].want, 3);
        cn_dual_end();
        cn_scope_end();
    }
}

static void test_div_by_zero(void) {
    const double n[] = {0, 1}, d[] = {0, 0}, one[] = {1, 1};
    check_binary("div by 0", f_div, 2, n, d, one, one, one,
                 (bin_want){.ga = (double[]){inf_, inf_}, .gb = (double[]){nan_, -inf_},
                            .t_a = (double[]){inf_, inf_}, .t_b = (double[]){nan_, -inf_}});
}

/* Gradient only to the selected branch, summed over broadcasting; an
 * infinite gradient does not leak into the other branch as NaN; cond gets
 * none (zeros when it is a float that asks for one). */
static void test_where(void) {
    cn_tensor *cond = cn_from_data(CN_BOOL, CN_SHAPE(3, 1), (uint8_t[]){1, 0, 1});
    cn_tensor *a = cn_from_data(CN_F64, CN_SHAPE(1, 4), (double[]){1, 2, 3, 4});
    cn_tensor *b = cn_scalar(CN_F64, 0.5);
    cn_set_requires_grad(a, true);
    cn_set_requires_grad(b, true);
    cn_tensor *g = cn_from_data(CN_F64, CN_SHAPE(3, 4),
                                (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, inf_});
    CHECK(cn_backward(cn_where(cond, a, b), g) == 0);
    check_vals("where d/da", cn_get_grad(a), (double[]){10, 12, 14, inf_}, 4);
    check_vals("where d/db", cn_get_grad(b), (double[]){26}, 1);

    cn_tensor *fcond = cn_from_data(CN_F64, CN_SHAPE(3), (double[]){2, 0, -1});
    cn_tensor *x = cn_from_data(CN_F64, CN_SHAPE(3), (double[]){1, 2, 3});
    cn_set_requires_grad(fcond, true);
    cn_set_requires_grad(x, true);
    CHECK(cn_backward(cn_sum(cn_where(fcond, x, cn_neg(x)), NULL, 0, false), NULL) == 0);
    check_vals("where d/dcond", cn_get_grad(fcond), (double[]){0, 0, 0}, 3);
    check_vals("where d/dx (float cond)", cn_get_grad(x), (double[]){1, -1, 1}, 3);

    /* Forward mode: branch tangents are selected and broadcast. */
    cn_dual_begin();
    cn_tensor *cd2 = cn_detach(cond), *ad = cn_detach(a), *bd2 = cn_detach(b);
    CHECK(cn_set_tangent(bd2, cn_scalar(CN_F64, 7)) == 0);
    cn_tensor *yd = cn_where(cd2, ad, bd2);
    cn_tensor *t = yd ? cn_get_tangent(yd) : NULL;
    CHECK_SHAPE(t, 3, 4);
    check_vals("where jvp (b' only)", t, (double[]){0, 0, 0, 0, 7, 7, 7, 7, 0, 0, 0, 0}, 12);
    CHECK(cn_set_tangent(ad, cn_from_data(CN_F64, CN_SHAPE(1, 4), (double[]){1, 2, 3, 4})) == 0);
    yd = cn_where(cd2, ad, bd2);
    check_vals("where jvp (both)", yd ? cn_get_tangent(yd) : NULL,
               (double[]){1, 2, 3, 4, 7, 7, 7, 7, 1, 2, 3, 4}, 12);
    cn_dual_end();
}

/* A tangent on where's condition alone: the rule still runs and gives a
 * zero tangent of the output's shape. */
static void test_where_cond_tangent(void) {
    cn_tensor *c = cn_from_data(CN_F64, CN_SHAPE(3, 1), (double[]){1, 0, -2});
    cn_tensor *x = cn_from_data(CN_F64, CN_SHAPE(2), (double[]){5, 6});
    cn_dual_begin();
    cn_tensor *cd = cn_detach(c);
    CHECK(cn_set_tangent(cd, cn_ones_like(c)) == 0);
    cn_tensor *y = cn_where(cd, x, cn_neg(x));
    cn_tensor *t = y ? cn_get_tangent(y) : NULL;
    CHECK_SHAPE(t, 3, 2);
    check_vals("where jvp (cond' only)", t, (double[]){0, 0, 0, 0, 0, 0}, 6);
    cn_dual_end();
}

/* Promotion: each input's gradient comes back in its own dtype (PyTorch's
 * values and dtypes), forward-mode tangents in the output's. */
static void test_mixed_dtypes(void) {
    cn_tensor *h = cn_from_data(CN_F32, CN_SHAPE(2), (float[]){1, 2});
    cn_tensor *x16 = cn_cast(h, CN_F16);
    cn_tensor *x32 = cn_from_data(CN_F32, CN_SHAPE(2), (float[]){3, 4});
    x16 = cn_detach(x16);
    cn_set_requires_grad(x16, true);
    cn_set_requires_grad(x32, true);
    CHECK(cn_backward(cn_sum(cn_mul(x16, x32), NULL, 0, false), NULL) == 0);
    CHECK(cn_get_grad(x16) && cn_tensor_dtype(cn_get_grad(x16)) == CN_F16);
    CHECK(cn_get_grad(x32) && cn_tensor_dtype(cn_get_grad(x32)) == CN_F32);
    check_vals("f16 * f32: d/d f16", cn_get_grad(x16), (double[]){3, 4}, 2);
    check_vals("f16 * f32: d/d f32", cn_get_grad(x32), (double[]){1, 2}, 2);

    cn_tensor *a = cn_from_data(CN_F32, CN_SHAPE(2, 3), (float[]){1, 2, 3, 4, 5, 6});
    cn_tensor *b = cn_from_data(CN_F64, CN_SHAPE(3), (double[]){0.5, -1, 2});
    cn_set_requires_grad(a, true);
    cn_set_requires_grad(b, true);
    CHECK(cn_backward(cn_sum(cn_div(a, b), NULL, 0, false), NULL) == 0);
    CHECK(cn_get_grad(a) && cn_tensor_dtype(cn_get_grad(a)) == CN_F32);
    CHECK(cn_get_grad(b) && cn_tensor_dtype(cn_get_grad(b)) == CN_F64);
    check_vals("f32 / f64: d/da", cn_get_grad(a), (double[]){2, -1, 0.5, 2, -1, 0.5}, 6);
    check_vals("f32 / f64: d/db", cn_get_grad(b), (double[]){-20, -7, -2.25}, 3);

    /* An integer exponent takes no gradient; the float base does. */
    cn_tensor *f = cn_from_data(CN_F32, CN_SHAPE(1), (float[]){0.5f});
    cn_tensor *i = cn_from_data(CN_I64, CN_SHAPE(3), (int64_t[]){1, 2, 3});
    cn_set_requires_grad(f, true);
    CHECK(cn_backward(cn_sum(cn_pow(f, i), NULL, 0, false), NULL) == 0);
    CHECK(cn_get_grad(f) && cn_tensor_dtype(cn_get_grad(f)) == CN_F32);
    check_vals("f32 ^ i64: d/df", cn_get_grad(f), (double[]){2.75}, 1);

    /* Python scalars keep an f32 input's gradient f32. */
    cn_tensor *s = cn_from_data(CN_F32, CN_SHAPE(2), (float[]){2, 4});
    cn_set_requires_grad(s, true);
    cn_tensor *y = cn_div_scalar(cn_mul_scalar(cn_add_scalar(s, 1), 3), 2);
    CHECK(cn_backward(cn_sum(cn_maximum(y, cn_rsub_scalar(s, 5)), NULL, 0, false), NULL) == 0);
    CHECK(cn_get_grad(s) && cn_tensor_dtype(cn_get_grad(s)) == CN_F32);
    /* y = 1.5 (s + 1) = {4.5, 7.5} against 5 - s = {3, 1}: y wins. */
    check_vals("f32 with scalars", cn_get_grad(s), (double[]){1.5, 1.5}, 2);

    cn_dual_begin();
    cn_tensor *ad = cn_detach(a);
    CHECK(cn_set_tangent(ad, cn_ones_like(a)) == 0);
    cn_tensor *yd = cn_mul(ad, b);
    cn_tensor *t = yd ? cn_get_tangent(yd) : NULL;
    CHECK(t && cn_tensor_dtype(t) == CN_F64);
    check_vals("f32 * f64 jvp", t, (double[]){0.5, -1, 2, 0.5, -1, 2}, 6);
    cn_dual_end();
}

/* Gradients of gradients (create_graph): the rules are differentiable. */
static void test_second_order(void) {
    cn_tensor *x = cn_from_data(CN_F64, CN_SHAPE(2), (double[]){1.5, -2});
    cn_set_requires_grad(x, true);
    cn_tensor *y = cn_sum(cn_pow_scalar(x, 3), NULL, 0, false), *gx, *hx;
    CHECK(cn_grad(&y, NULL, 1, &x, 1, &gx, CN_GRAD_CREATE_GRAPH) == 0);
    cn_tensor *gs = cn_sum(gx, NULL, 0, false);
    CHECK(cn_grad(&gs, NULL, 1, &x, 1, &hx, 0) == 0);
    check_vals("d2/dx2 x^3", hx, (double[]){9, -12}, 2);

    /* The Hessian of a^e at (1.5, 2.5), against PyTorch. */
    cn_tensor *a = cn_from_data(CN_F64, CN_SHAPE(1), (double[]){1.5});
    cn_tensor *e = cn_from_data(CN_F64, CN_SHAPE(1), (double[]){2.5});
    cn_set_requires_grad(a, true);
    cn_set_requires_grad(e, true);
    cn_tensor *in[2] = {a, e}, *g1[2], *row_a[2], *row_e[2];
    y = cn_sum(cn_pow(a, e), NULL, 0, false);
    CHECK(cn_grad(&y, NULL, 1, in, 2, g1, CN_GRAD_CREATE_GRAPH) == 0);
    CHECK(cn_grad(&g1[0], NULL, 1, in, 2, row_a, CN_GRAD_RETAIN_GRAPH) == 0);
    CHECK(cn_grad(&g1[1], NULL, 1, in, 2, row_e, 0) == 0);
    double l = log(1.5), p = pow(1.5, 2.5);
    check_vals("d2/da2", row_a[0], (double[]){2.5 * 1.5 * pow(1.5, 0.5)}, 1);
    check_vals("d2/dade", row_a[1], (double[]){pow(1.5, 1.5) * (1 + 2.5 * l)}, 1);
    check_vals("d2/deda", row_e[0], (double[]){pow(1.5, 1.5) * (1 + 2.5 * l)}, 1);
    check_vals("d2/de2", row_e[1], (double[]){p * l * l}, 1);
    /* PyTorch, rounded: 4.5928, 3.6993, 0.4530. */
    CHECK_CLOSE(th_at(row_a[0], 0), 4.5928, 0, 1e-4);
    CHECK_CLOSE(th_at(row_a[1], 0), 3.6993, 0, 1e-4);
    CHECK_CLOSE(th_at(row_e[1], 0), 0.4530, 0, 1e-4);

    /* maximum's rule is itself differentiable: d/dx of d/dx max(x^2, c). */
    cn_tensor *z = cn_from_data(CN_F64, CN_SHAPE(2), (double[]){3, 0.5});
    cn_set_requires_grad(z, true);
    y = cn_sum(cn_maximum(cn_square(z), cn_scalar(CN_F64, 1)), NULL, 0, false);
    CHECK(cn_grad(&y, NULL, 1, &z, 1, &gx, CN_GRAD_CREATE_GRAPH) == 0);
    check_vals("d/dz max(z^2, 1)", gx, (double[]){6, 0}, 2);
    gs = cn_sum(gx, NULL, 0, false);
    CHECK(cn_grad(&gs, NULL, 1, &z, 1, &hx, 0) == 0);
    check_vals("d2/dz2 max(z^2, 1)", hx, (double[]){2, 0}, 2);
}

static int jvp_fn(void *ctx, cn_tensor *const *in, int nin, cn_tensor **out, int nout) {
    out[0] = ((bin_fn)ctx)(in[0], in[1]);
    return out[0] ? 0 : -1;
}

/* Reverse over forward: a tangent computed while autograd records is
 * differentiable with respect to the primals (the rules that use the
 * output recompute it then, see out_for_jvp in binary.c). */
static void test_reverse_over_forward(void) {
    const double av = 1.5, bv = 2.5, l = log(av);
    struct {
        const char *what;
        bin_fn f;
        double da, db; /* d/da and d/db of the tangent for (a', b') = (0, 1) */
    } cases[] = {
        {"div", f_div, -1 / (bv * bv), 2 * av / (bv * bv * bv)},
        {"pow", f_pow, bv * pow(av, bv - 1) * l + pow(av, bv - 1), pow(av, bv) * l * l},
    };
    for (int k = 0; k < 2; k++) {
        cn_scope_begin();
        cn_tensor *leaf[2] = {cn_from_data(CN_F64, CN_SHAPE(1), (double[]){av}),
                              cn_from_data(CN_F64, CN_SHAPE(1), (double[]){bv})};
        cn_set_requires_grad(leaf[0], true);
        cn_set_requires_grad(leaf[1], true);
        /* cn_jvp differentiates aliases of its primals: give them a history
         * (x * 1) so that the tangent's graph reaches the leaves. */
        cn_tensor *prim[2] = {cn_mul_scalar(leaf[0], 1), cn_mul_scalar(leaf[1], 1)};
        cn_tensor *tans[2] = {NULL, cn_ones_like(leaf[1])}, *y, *t, *g[2] = {NULL, NULL};
        /* Dropped without a backward (which would free the record): under
         * ASan, a tangent that held its output through its history leaks. */
        CHECK(cn_jvp(jvp_fn, (void *)cases[k].f, prim, tans, 2, &y, &t, 1) == 0);
        CHECK(cn_jvp(jvp_fn, (void *)cases[k].f, prim, tans, 2, &y, &t, 1) == 0);
        CHECK(t && cn_grad(&t, NULL, 1, leaf, 2, g, 0) == 0);
        check_vals(cases[k].what, g[0], &cases[k].da, 1);
        check_vals(cases[k].what, g[1], &cases[k].db, 1);
        cn_scope_end();
    }
}

static cn_tensor *model(cn_tensor *x, cn_tensor *w, cn_tensor *c) {
    cn_tensor *u = cn_div(cn_sub(cn_mul(x, w), c), cn_add_scalar(cn_square(w), 1));
    cn_tensor *v = cn_where(cn_gt(u, c), cn_maximum(u, c), cn_minimum(u, cn_neg(c)));
    return cn_sum(cn_pow(cn_add_scalar(cn_square(v), 0.5), w), NULL, 0, false);
}

/* The rules on symbolic tensors: the gradient graph of a static graph with
 * an unknown batch size equals eager backward. */
static void test_static_graph(void) {
    th_seed(5);
    cn_tensor *w = th_random(CN_F64, CN_SHAPE(3), 0.5, 1.5, TH_CONTIG, NULL);
    cn_tensor *c = th_random(CN_F64, CN_SHAPE(1, 3), -0.3, 0.3, TH_CONTIG, NULL);
    cn_tensor *params[2] = {w, c};
    cn_set_requires_grad(w, true);
    cn_set_requires_grad(c, true);
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F64, CN_SHAPE(-1, 3));
    cn_tensor *loss = model(x, w, c), *grads[2];
    CHECK(cn_grad(&loss, NULL, 1, params, 2, grads, 0) == 0);
    cn_tensor *outs[3] = {loss, grads[0], grads[1]};
    cn_program *p = cn_compile(g, outs, 3, NULL);
    CHECK(p != NULL);
    for (int batch = 1; p && batch <= 4; batch += 3) {
        cn_tensor *xv = th_random(CN_F64, CN_SHAPE(batch, 3), -2, 2, TH_CONTIG, NULL), *res[3];
        CHECK(cn_run(p, &x, &xv, 1, res, 3) == 0);
        cn_zero_grad(w);
        cn_zero_grad(c);
        cn_tensor *eloss = model(xv, w, c);
        CHECK(cn_backward(eloss, NULL) == 0);
        CHECK(cn_allclose(res[0], eloss, 1e-12, 0));
        CHECK(cn_allclose(res[1], cn_get_grad(w), 1e-12, 1e-14));
        CHECK(cn_allclose(res[2], cn_get_grad(c), 1e-12, 1e-14));
    }
    cn_program_free(p);
    cn_graph_free(g);
}

/* A forward rule on symbolic tensors whose sizes are unknown until run: a
 * broadcast input's tangent must still come out with the output's shape. */
static void test_static_jvp_rule(void) {
    cn_graph *g = cn_graph_new();
    cn_tensor *a = cn_placeholder(g, "a", CN_F64, CN_SHAPE(-1, 1));
    cn_tensor *b = cn_placeholder(g, "b", CN_F64, CN_SHAPE(1, -1));
    cn_tensor *ta = cn_placeholder(g, "ta", CN_F64, CN_SHAPE(-1, 1));
    const cn_op_id ids[3] = {CN_OP_add, CN_OP_sub, CN_OP_where};
    for (int k = 0; k < 3; k++) {
        cn_scope_begin();
        cn_tensor *in3[3] = {b, a, b};
        cn_tensor *const *in = ids[k] == CN_OP_where ? in3 : in3 + 1;
        int nin = ids[k] == CN_OP_where ? 3 : 2;
        cn_tensor *out = cn_op_apply(ids[k], in, nin, NULL);
        cn_tensor *tin[3] = {NULL, NULL, NULL};
        tin[ids[k] == CN_OP_where ? 1 : 0] = ta;
        cn_tensor *t = cn_ops[ids[k]]->jvp(in, tin, nin, NULL, out);
        CHECK(t != NULL && cn_ndim(t) == 2);
        cn_program *p = t ? cn_compile(g, &t, 1, NULL) : NULL;
        CHECK(p != NULL);
        cn_tensor *av = cn_from_data(CN_F64, CN_SHAPE(2, 1), (double[]){1, 2});
        cn_tensor *bv = cn_from_data(CN_F64, CN_SHAPE(1, 3), (double[]){1, 0, 1});
        cn_tensor *tv = cn_from_data(CN_F64, CN_SHAPE(2, 1), (double[]){5, 7});
        cn_tensor *ph[3] = {a, b, ta}, *vals[3] = {av, bv, tv}, *res = NULL;
        CHECK(p && cn_run(p, ph, vals, 3, &res, 1) == 0);
        /* where(b, a, b) selects a where b != 0. */
        const double want_ab[] = {5, 5, 5, 7, 7, 7}, want_w[] = {5, 0, 5, 7, 0, 7};
        if (res) {
            CHECK_SHAPE(res, 2, 3);
            check_vals("symbolic jvp", res, ids[k] == CN_OP_where ? want_w : want_ab, 6);
        }
        cn_program_free(p);
        cn_scope_end();
    }
    cn_graph_free(g);
}

/* A factor shared by every step of a chain (x = (x + a) * b, 6 times) gets
 * its gradient added into its sum in place (mul's vjp_add): the same bits
 * as building each product and adding it, the newest step first, as the
 * naive loop below does in the tensor's dtype. Element 0 stays -0 all the
 * way (x0 = a = -0, b > 0): every product is -0, and so is the sum, which
 * starting from zeros would have made +0. A b broadcast over x ([1]) takes
 * the sum over the broadcast axis instead. */
#define SHARED_STEPS 6
#define SHARED_N 5
#define SHARED_REF(T)                                                                              \
    static void shared_ref_##T(const double *x0d, const double *ad, const double *bd, int bn,    \
                               double *gb) {                                                      \
        T xs[SHARED_STEPS + 1][SHARED_N], g[SHARED_N], acc[SHARED_N];                              \
        for (int i = 0; i < SHARED_N; i++) xs[0][i] = (T)x0d[i];                                   \
        for (int k = 0; k < SHARED_STEPS; k++)                                                     \
            for (int i = 0; i < SHARED_N; i++)                                                     \
                xs[k + 1][i] = (T)((T)(xs[k][i] + (T)ad[i]) * (T)bd[bn == 1 ? 0 : i]);             \
        for (int i = 0; i < SHARED_N; i++) g[i] = 1;                                               \
        for (int k = SHARED_STEPS - 1; k >= 0; k--)                                                \
            for (int i = 0; i < SHARED_N; i++) {                                                   \
                T p = (T)(g[i] * (T)(xs[k][i] + (T)ad[i]));                                        \
                acc[i] = k == SHARED_STEPS - 1 ? p : (T)(acc[i] + p);                              \
                g[i] = (T)(g[i] * (T)bd[bn == 1 ? 0 : i]);                                         \
            }                                                                                      \
        if (bn == 1) { /* the sum kernel's order is its own: compared within a tolerance */      \
            double s = 0;                                                                          \
            for (int i = 0; i < SHARED_N; i++) s += acc[i];                                        \
            gb[0] = s;                                                                             \
        } else {                                                                                   \
            for (int i = 0; i < SHARED_N; i++) gb[i] = acc[i];                                     \
        }                                                                                          \
    }
SHARED_REF(float)
SHARED_REF(double)

static void test_shared_factor_in_place(void) {
    const double x0d[SHARED_N] = {-0.0, 0.7, -1.3, 2.1, 0.3};
    const double ad[SHARED_N] = {-0.0, 0.11, 0.9, -0.45, 1.7};
    const double bd[SHARED_N] = {0.93, 1.07, -0.61, 0.77, 1.19};
    for (int dt = 0; dt < 2; dt++)
        for (int bn = SHARED_N; bn >= 1; bn -= SHARED_N - 1) {
            cn_dtype type = dt ? CN_F64 : CN_F32;
            cn_scope_begin();
            cn_tensor *x0 = cn_cast(cn_from_data(CN_F64, CN_SHAPE(SHARED_N), x0d), type);
            cn_tensor *a = cn_cast(cn_from_data(CN_F64, CN_SHAPE(SHARED_N), ad), type);
            cn_tensor *b = cn_cast(cn_from_data(CN_F64, CN_SHAPE(bn), bd), type);
            cn_set_requires_grad(b, true);
            cn_tensor *x = x0;
            for (int k = 0; k < SHARED_STEPS; k++) x = cn_mul(cn_add(x, a), b);
            CHECK_EQ_INT(cn_backward(cn_sum(x, NULL, 0, false), NULL), 0);
            double want[SHARED_N];
            if (dt) shared_ref_double(x0d, ad, bd, bn, want);
            else shared_ref_float(x0d, ad, bd, bn, want);
            cn_tensor *g = cn_get_grad(b);
            CHECK(g != NULL && cn_numel(g) == bn);
            for (int i = 0; g && i < bn; i++) {
                double got = cn_get(g, (int64_t[]){i});
                if (bn == 1)
                    CHECK_CLOSE(got, want[i], dt ? 1e-12 : 1e-5, dt ? 1e-12 : 1e-5);
                else
                    CHECK_MSG(got == want[i] && signbit(got) == signbit(want[i]),
                              "%s b[%d]: %.17g, want %.17g", dt ? "f64" : "f32", i, got, want[i]);
            }
            cn_scope_end();
        }
}

int main(void) {
    RUN(test_minmax_ties_and_nan);
    RUN(test_minmax_broadcast_ties);
    RUN(test_pow_special_points);
    RUN(test_pow_scalar_forms);
    RUN(test_div_by_zero);
    RUN(test_where);
    RUN(test_where_cond_tangent);
    RUN(test_mixed_dtypes);
    RUN(test_second_order);
    RUN(test_reverse_over_forward);
    RUN(test_static_graph);
    RUN(test_static_jvp_rule);
    RUN(test_shared_factor_in_place);
    return th_summary();
}
