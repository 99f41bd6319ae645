/* Gradients of the reductions, softmax, log_softmax and cumsum where the
 * finite-difference cases of test_grad cannot look: ties of max/min, prod
 * with zeros (first and second order), norms and std at 0, -inf and huge
 * inputs, f32 against f64, and static graphs with unknown sizes. The
 * expected values were computed with PyTorch 1.13 (torch.amax/amin,
 * torch.prod, torch.linalg.vector_norm, torch.std, ..., backward with the
 * same seeds, forward-mode AD for the tangents, create_graph for the
 * second order), except where a comment says Chutney differs. */
#include "harness.h"

typedef cn_tensor *(*fx)(cn_tensor *x);
typedef struct fbox {
    fx f;
} fbox;

static const double NaN = NAN;

static int call_fx(void *ctx, cn_tensor *const *in, int nin, cn_tensor **out, int nout) {
    (void)nin;
    (void)nout;
    out[0] = ((const fbox *)ctx)->f(in[0]);
    return out[0] ? 0 : -1;
}

static void check_values(const char *what, int line, cn_tensor *got, int64_t n,
                         const double *want, double rtol, double atol) {
    CHECK_MSG(got != NULL, "line %d %s: no result (%s)", line, what, cn_last_error());
    if (!got) return;
    CHECK_MSG(cn_numel(got) == n, "line %d %s: %lld elements, expected %lld", line, what,
              (long long)cn_numel(got), (long long)n);
    if (cn_numel(got) != n) return;
    for (int64_t k = 0; k < n; k++) {
        double a = th_at(got, k);
        CHECK_MSG(th_close(a, want[k], rtol, atol), "line %d %s [%lld]: %.12g, expected %.12g",
                  line, what, (long long)k, a, want[k]);
    }
}

/* The gradient of f at x for the seed (f's output shape), in three
 * layouts of x. */
static void vjp_is(int line, fx f, int nd, const int64_t *shape, const double *xv,
                   const double *seed, const double *want) {
    const int layouts[] = {TH_CONTIG, TH_TRANSPOSED, TH_REVERSED};
    for (int l = 0; l < 3; l++) {
        cn_scope_begin();
        cn_tensor *x = th_make(CN_F64, nd, shape, xv, layouts[l]);
        cn_set_requires_grad(x, true);
        cn_tensor *y = f(x);
        cn_tensor *s = y ? th_make(CN_F64, cn_ndim(y), cn_shape(y), seed, TH_CONTIG) : NULL;
        CHECK_MSG(y && cn_backward(y, s) == 0, "line %d: backward failed: %s", line,
                  cn_last_error());
        check_values("vjp", line, cn_get_grad(x), th_numel(nd, shape), want, 1e-9, 1e-12);
        cn_scope_end();
    }
}

/* The output tangent of f at x for the input tangent t. */
static void jvp_is(int line, fx f, int nd, const int64_t *shape, const double *xv,
                   const double *tv, const double *want) {
    cn_scope_begin();
    cn_tensor *x = th_make(CN_F64, nd, shape, xv, TH_TRANSPOSED);
    cn_tensor *t = th_make(CN_F64, nd, shape, tv, TH_CONTIG);
    cn_tensor *out = NULL, *out_t = NULL;
    fbox b = {f};
    int rc = cn_jvp(call_fx, &b, &x, &t, 1, &out, &out_t, 1);
    CHECK_MSG(rc == 0, "line %d: jvp failed: %s", line, cn_last_error());
    if (rc == 0) check_values("jvp", line, out_t, cn_numel(out), want, 1e-9, 1e-12);
    cn_scope_end();
}

/* Second order: d/dx sum(v * d/dx sum(w * f(x))), the Hessian of
 * sum(w f) times v. */
static void hvp_is(int line, fx f, int nd, const int64_t *shape, const double *xv,
                   const double *wv, const double *vv, const double *want) {
    cn_scope_begin();
    cn_tensor *x = th_make(CN_F64, nd, shape, xv, TH_CONTIG);
    cn_set_requires_grad(x, true);
    cn_tensor *y = f(x);
    cn_tensor *w = th_make(CN_F64, cn_ndim(y), cn_shape(y), wv, TH_CONTIG);
    cn_tensor *loss = cn_sum(cn_mul(y, w), NULL, 0, false), *g = NULL, *h = NULL;
    int rc = cn_grad(&loss, NULL, 1, &x, 1, &g, CN_GRAD_CREATE_GRAPH);
    CHECK_MSG(rc == 0, "line %d: grad failed: %s", line, cn_last_error());
    if (rc == 0) {
        cn_tensor *v = th_make(CN_F64, nd, shape, vv, TH_CONTIG);
        cn_tensor *gv = cn_sum(cn_mul(g, v), NULL, 0, false);
        rc = cn_grad(&gv, NULL, 1, &x, 1, &h, CN_GRAD_ALLOW_UNUSED);
        CHECK_MSG(rc == 0, "line %d: second grad failed: %s", line, cn_last_error());
        if (rc == 0 && h) check_values("hvp", line, h, th_numel(nd, shape), want, 1e-9, 1e-12);
        /* h == NULL: nothing depends on x at second order, the Hessian is 0 */
        if (rc == 0 && !h)
            for (int64_t k = 0; k < th_numel(nd, shape); k++) CHECK_CLOSE(0.0, want[k], 0, 0);
    }
    cn_scope_end();
}

#define VJP(f, shape, xv, seed, want) vjp_is(__LINE__, f, shape, xv, seed, want)
#define JVP(f, shape, xv, tv, want) jvp_is(__LINE__, f, shape, xv, tv, want)
#define HVP(f, shape, xv, wv, vv, want) hvp_is(__LINE__, f, shape, xv, wv, vv, want)
#define D(...) ((const double[]){__VA_ARGS__})
#define AX(...) (int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))

/* ---- max and min: ties share the gradient evenly ---- */

static cn_tensor *max_1(cn_tensor *x) { return cn_max(x, AX(1), false); }
static cn_tensor *max_0k(cn_tensor *x) { return cn_max(x, AX(0), true); }
static cn_tensor *max_all(cn_tensor *x) { return cn_max(x, NULL, 0, false); }
static cn_tensor *min_01(cn_tensor *x) { return cn_min(x, AX(0, 1), false); }
static cn_tensor *min_neg(cn_tensor *x) { return cn_min(x, AX(-1), true); }

static void test_max_min_ties(void) {
    const double x[] = {1, 3, 3, 2, 2, 2};
    /* torch.amax(x, 1); torch.max(x, 1) would give each row's gradient to
     * one index instead */
    VJP(max_1, CN_SHAPE(2, 3), x, D(2, 3), D(0, 1, 1, 1, 1, 1));
    JVP(max_1, CN_SHAPE(2, 3), x, D(1, 2, 4, 1, 2, 6), D(3, 3));
    VJP(max_0k, CN_SHAPE(2, 3), D(1, 3, 3, 2, 2, 3), D(1, 2, 4), D(0, 2, 2, 1, 0, 2));
    /* torch.amax(x) and torch.max(x) agree */
    VJP(max_all, CN_SHAPE(2, 3), x, D(4), D(0, 2, 2, 0, 0, 0));
    VJP(min_01, CN_SHAPE(2, 2), D(1, 1, 3, 1), D(6), D(2, 2, 0, 2));
    JVP(min_01, CN_SHAPE(2, 2), D(1, 1, 3, 1), D(1, 2, 4, 6), D(3));
    VJP(min_neg, CN_SHAPE(2, 3), D(-1, 5, -1, 0, 0, 7), D(3, 4), D(1.5, 0, 1.5, 2, 2, 0));
    /* A NaN result: the NaNs share the gradient, as in torch.max(x) (full
     * reduction). torch.amax(x, 1) gives NaN to the whole row instead. */
    VJP(max_1, CN_SHAPE(2, 3), D(1, NaN, NaN, 2, 2, 1), D(2, 3), D(0, 1, 1, 1.5, 1.5, 0));
    VJP(max_all, CN_SHAPE(2, 3), D(1, NaN, NaN, 2, 2, 1), D(4), D(0, 2, 2, 0, 0, 0));
    /* A single element wins alone, -0 and +0 tie. */
    VJP(min_01, CN_SHAPE(1, 3), D(0.0, -0.0, 1), D(1), D(0.5, 0.5, 0));
}

/* ---- prod with zeros ---- */

static cn_tensor *prod_1(cn_tensor *x) { return cn_prod(x, AX(1), false); }
static cn_tensor *prod_all(cn_tensor *x) { return cn_prod(x, NULL, 0, false); }
static cn_tensor *prod_0k(cn_tensor *x) { return cn_prod(x, AX(-2), true); }

static void test_prod_zeros(void) {
    /* rows with one zero, two zeros, none */
    const double x[] = {2, 0, 3, 0, 0, 5, 1, 4, 5};
    VJP(prod_1, CN_SHAPE(3, 3), x, D(1, 2, 3), D(0, 6, 0, 0, 0, 0, 60, 15, 12));
    JVP(prod_1, CN_SHAPE(3, 3), x, D(1, 2, 3, 4, 5, 6, 7, 8, 9), D(12, 0, 216));
    /* the same down columns, keepdim */
    const double xt[] = {2, 0, 1, 0, 0, 4, 3, 5, 5};
    VJP(prod_0k, CN_SHAPE(3, 3), xt, D(1, 2, 3), D(0, 0, 60, 6, 0, 15, 0, 0, 12));
    VJP(prod_all, CN_SHAPE(2, 3), D(2, 0, 3, 1, 4, 5), D(2), D(0, 240, 0, 0, 0, 0));
    VJP(prod_all, CN_SHAPE(2, 3), D(2, 0, 3, 0, 4, 5), D(2), D(0, 0, 0, 0, 0, 0));
    VJP(prod_all, CN_SHAPE(1), D(0), D(3), D(3));
    /* Second order, rows with 1, 2, 3 and 0 zeros and a row with a
     * negative: torch.prod(x, 1) with create_graph. */
    HVP(prod_1, CN_SHAPE(5, 4),
        D(2, 0, 3, 4, 0, 0, 5, 2, 0, 0, 0, 3, 1, 2, 3, 4, -1, 0, 2, 0.5), D(1, 2, -1, 0.5, 3),
        D(0.5, -1, 2, 1, 1, 2, -1, 0.5, 1, -2, 3, 1, 0.25, 1, -1, 2, 1, 1, 1, 1),
        D(-12, 28, -8, -6, 40, 20, 0, 0, 0, 0, 0, 0, 8, 2.5, 5, 1.25, 3, -4.5, -1.5, -6));
    /* Two zeros in a full reduction: d2y/dx_i dx_j is the product of the
     * other elements for the two zeros (torch's full prod returns a
     * gradient without history there, i.e. a zero Hessian). */
    HVP(prod_all, CN_SHAPE(2, 3), D(2, 0, 3, 0, 4, 5), D(1), D(1, 2, 3, 4, 5, 6),
        D(0, 4 * 120, 0, 2 * 120, 0, 0));
}

/* ---- norms at 0 ---- */

static double norm_p;
static cn_tensor *norm_1(cn_tensor *x) { return cn_norm(x, norm_p, AX(1), false); }
static cn_tensor *norm_all(cn_tensor *x) { return cn_norm(x, norm_p, NULL, 0, true); }

static void test_norm_at_zero(void) {
    /* A zero row (norm 0) and a row with a zero element, seeds (1, 2);
     * torch.linalg.vector_norm(x, p, dim=1). */
    const double x[] = {0, 0, 0, 0, 1, -2}, t[] = {1, 2, 3, 4, 5, 6};
    static const struct {
        double p, grad[6], tangent[2];
    } cases[] = {
        {2, {0, 0, 0, 0, 0.89442719099991586, -1.78885438199983171}, {0, -3.13049516849970555}},
        {1, {0, 0, 0, 0, 2, -2}, {0, -1}},
        {3, {0, 0, 0, 0, 0.46224084956708977, -1.84896339826835909}, {0, -4.39128807088735318}},
        {1.5, {0, 0, 0, 0, 1.27846801573046487, -1.80802680690624307}, {0, -2.22791038139256692}},
        {0.5, {0, 0, 0, 0, 4.82842712474618985, -3.41421356237309448}, {0, 1.82842712474619096}},
        {INFINITY, {0, 0, 0, 0, 0, -2}, {0, -6}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        norm_p = cases[k].p;
        vjp_is(__LINE__, norm_1, CN_SHAPE(2, 3), x, D(1, 2), cases[k].grad);
        cn_scope_begin();
        cn_tensor *xx = th_make(CN_F64, CN_SHAPE(2, 3), x, TH_CONTIG);
        cn_tensor *tt = th_make(CN_F64, CN_SHAPE(2, 3), t, TH_CONTIG);
        cn_tensor *out, *out_t;
        fbox b = {norm_1};
        CHECK_EQ_INT(cn_jvp(call_fx, &b, &xx, &tt, 1, &out, &out_t, 1), 0);
        check_values("norm jvp", __LINE__, out_t, 2, cases[k].tangent, 1e-9, 1e-12);
        cn_scope_end();
        /* an all-zero tensor, full reduction: 0 everywhere */
        VJP(norm_all, CN_SHAPE(2, 2), D(0, 0, 0, 0), D(5), D(0, 0, 0, 0));
    }
    /* p = inf: ties of |x| share it, with their signs */
    norm_p = INFINITY;
    VJP(norm_1, CN_SHAPE(2, 3), D(1, -2, 2, 0, 1, -2), D(1, 2), D(0, -0.5, 0.5, 0, 0, -2));
    JVP(norm_1, CN_SHAPE(2, 3), D(1, -2, 2, 0, 1, -2), t, D(0.5, -6));
    /* second order, p = 3 */
    norm_p = 3;
    HVP(norm_1, CN_SHAPE(2, 3), D(0.5, -1, 2, 1, 0, -0.5), D(1, 2), D(0.3, -0.2, 0.1, 1, 2, 3),
        D(0.06023142245863737, -0.05772177985619416, -0.04391874554275642, 2.87616528619522516,
          0, 5.75233057239045031));
    norm_p = 2;
}

/* ---- var and std at their edges ---- */

static cn_tensor *std_1(cn_tensor *x) { return cn_std(x, AX(1), 1, false); }
static cn_tensor *var_1(cn_tensor *x) { return cn_var(x, AX(1), 1, false); }
static cn_tensor *var_1c0(cn_tensor *x) { return cn_var(x, AX(1), 0, false); }
static cn_tensor *std_1c0(cn_tensor *x) { return cn_std(x, AX(-1), 0, true); }

static void test_var_std_edges(void) {
    /* all equal: std = 0, gradient 0 (PyTorch masks the 0/0) */
    VJP(std_1, CN_SHAPE(2, 3), D(1, 1, 1, 1, 2, 4), D(1, 2),
        D(0, 0, 0, -0.87287156094396967, -0.21821789023599250, 1.09108945117996181));
    cn_scope_begin();
    {
        cn_tensor *xx = th_make(CN_F64, CN_SHAPE(2, 3), D(1, 1, 1, 1, 2, 4), TH_CONTIG);
        cn_tensor *tt = th_make(CN_F64, CN_SHAPE(2, 3), D(1, 2, 3, 4, 5, 6), TH_CONTIG);
        cn_tensor *out, *out_t;
        fbox b = {std_1};
        CHECK_EQ_INT(cn_jvp(call_fx, &b, &xx, &tt, 1, &out, &out_t, 1), 0);
        check_values("std jvp", __LINE__, out_t, 2, D(0, 0.98198050606196519), 1e-9, 1e-12);
    }
    cn_scope_end();
    VJP(std_1c0, CN_SHAPE(1, 2), D(3, 3), D(1), D(0, 0));
    /* N - correction = 0: NaN, as the value */
    VJP(var_1, CN_SHAPE(2, 1), D(1, 2), D(1, 1), D(NaN, NaN));
    VJP(std_1, CN_SHAPE(2, 1), D(1, 2), D(1, 1), D(NaN, NaN));
    VJP(var_1c0, CN_SHAPE(2, 1), D(1, 2), D(1, 1), D(0, 0));
    /* Second order of std (torch.std(x, 1) with create_graph) */
    HVP(std_1, CN_SHAPE(2, 3), D(0.5, -1, 2, 1, 0, -0.5), D(1, 2),
        D(0.3, -0.2, 0.1, 1, 2, 3),
        D(0.07777777777777778, -0.03888888888888888, -0.03888888888888889, 0.09352195295828247,
          -0.28056585887484731, 0.18704390591656495));
}

/* ---- logsumexp, softmax, log_softmax: huge and infinite inputs ---- */

static cn_tensor *lse_1(cn_tensor *x) { return cn_logsumexp(x, AX(1), false); }
static cn_tensor *softmax_1(cn_tensor *x) { return cn_softmax(x, 1); }
static cn_tensor *log_softmax_1(cn_tensor *x) { return cn_log_softmax(x, -1); }

static void test_softmax_family(void) {
    VJP(lse_1, CN_SHAPE(2, 3), D(1000, 1000, 999, -1000, -1001, -1002), D(1, 2),
        D(0.42231879825153423, 0.42231879825153423, 0.15536240349696953, 1.33048191154957962,
          0.48945694210957169, 0.18006114634075224));
    /* a row of -inf only: NaN, as PyTorch */
    VJP(lse_1, CN_SHAPE(2, 2), D(-INFINITY, -INFINITY, 0, -INFINITY), D(1, 1), D(NaN, NaN, 1, 0));
    const double x[] = {1000, 1001, 1002, -5, 0, 5}, w[] = {1, -2, 3, 0.5, 0.25, -1};
    VJP(softmax_1, CN_SHAPE(2, 3), x, w,
        D(-5.36849155291149460e-02, -8.80116143509544813e-01, 9.33801059038660064e-01,
          6.72607690384000354e-05, 8.30924593751040073e-03, -8.37650670654872635e-03));
    VJP(log_softmax_1, CN_SHAPE(2, 3), x, w,
        D(0.81993885365923913, -2.48945694210959534, 1.66951808845035643, 0.50001127351030905,
          0.25167313727914731, -0.75168441078945636));
    JVP(log_softmax_1, CN_SHAPE(2, 3), x, w,
        D(-0.59629649838525078, -3.59629649838525101, 1.40370350161474922, 1.49156667254240904,
          1.24156667254240904, -0.00843332745759107));
    HVP(softmax_1, CN_SHAPE(2, 3), D(0.5, -1, 2, 1, 0, -0.5), D(1, 2, -1, 0.5, -0.5, 2),
        D(0.3, -0.2, 0.1, 1, 2, 3),
        D(0.04324073815002999, -0.03295955768042259, -0.01028118046960741, -0.13252915897038475,
          -0.15683574245230078, 0.28936490142268551));
}

/* ---- cumsum: reverse running sums ---- */

static cn_tensor *cumsum_1(cn_tensor *x) { return cn_cumsum(x, 1); }
static cn_tensor *cumsum_0(cn_tensor *x) { return cn_cumsum(x, -2); }

static void test_cumsum(void) {
    const double x[] = {1, 2, 3, 4, 5, 6}, w[] = {1, 2, 3, 4, 5, 6};
    VJP(cumsum_1, CN_SHAPE(2, 3), x, w, D(6, 5, 3, 15, 11, 6));
    VJP(cumsum_0, CN_SHAPE(2, 3), x, w, D(5, 7, 9, 4, 5, 6));
    JVP(cumsum_1, CN_SHAPE(2, 3), x, w, D(1, 3, 6, 4, 9, 15));
}

/* ---- f32 rules agree with f64 ---- */

static cn_tensor *f_sum(cn_tensor *x) { return cn_sum(x, AX(0), false); }
static cn_tensor *f_mean(cn_tensor *x) { return cn_mean(x, AX(1, 2), true); }
static cn_tensor *f_prod(cn_tensor *x) { return cn_prod(x, AX(-1), false); }
static cn_tensor *f_max(cn_tensor *x) { return cn_max(x, AX(0, 2), false); }
static cn_tensor *f_min(cn_tensor *x) { return cn_min(x, NULL, 0, false); }
static cn_tensor *f_var(cn_tensor *x) { return cn_var(x, AX(1), 1, false); }
static cn_tensor *f_std(cn_tensor *x) { return cn_std(x, AX(0, 1), 0, true); }
static cn_tensor *f_lse(cn_tensor *x) { return cn_logsumexp(x, AX(2), false); }
static cn_tensor *f_norm(cn_tensor *x) { return cn_norm(x, 3, AX(1), false); }
static cn_tensor *f_softmax(cn_tensor *x) { return cn_softmax(x, 1); }
static cn_tensor *f_log_softmax(cn_tensor *x) { return cn_log_softmax(x, 2); }
static cn_tensor *f_cumsum(cn_tensor *x) { return cn_cumsum(x, 1); }

static void test_f32_matches_f64(void) {
    const fx fns[] = {f_sum, f_mean, f_prod, f_max, f_min, f_var,
                      f_std, f_lse,  f_norm, f_softmax, f_log_softmax, f_cumsum};
    th_seed(5);
    for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
        cn_scope_begin();
        double v[60];
        cn_tensor *x32 = th_random(CN_F32, CN_SHAPE(3, 4, 5), 0.5, 1.5, TH_TRANSPOSED, v);
        cn_tensor *x64 = th_make(CN_F64, CN_SHAPE(3, 4, 5), v, TH_CONTIG);
        cn_set_requires_grad(x32, true);
        cn_set_requires_grad(x64, true);
        cn_tensor *y32 = fns[k](x32), *y64 = fns[k](x64);
        cn_tensor *w = th_random(CN_F64, cn_ndim(y64), cn_shape(y64), -1, 1, TH_CONTIG, NULL);
        CHECK(cn_tensor_dtype(y32) == CN_F32);
        CHECK_EQ_INT(cn_backward(cn_sum(cn_mul(y32, cn_cast(w, CN_F32)), NULL, 0, false), NULL),
                     0);
        CHECK_EQ_INT(cn_backward(cn_sum(cn_mul(y64, w), NULL, 0, false), NULL), 0);
        cn_tensor *g32 = cn_get_grad(x32), *g64 = cn_get_grad(x64);
        CHECK(g32 && cn_tensor_dtype(g32) == CN_F32);
        for (int64_t i = 0; g32 && g64 && i < 60; i++)
            CHECK_MSG(th_close(th_at(g32, i), th_at(g64, i), 1e-4, 1e-5),
                      "fn %zu [%lld]: f32 %.9g, f64 %.9g", k, (long long)i, th_at(g32, i),
                      th_at(g64, i));
        cn_scope_end();
    }
}

/* Halves compute in f32 (a cast node before the op, one after): their
 * gradients come back in the half type, close to f64's. */
static void test_half_inputs(void) {
    const fx fns[] = {f_mean, f_prod, f_max, f_std, f_lse, f_norm, f_softmax, f_cumsum};
    const cn_dtype halves[] = {CN_F16, CN_BF16};
    th_seed(6);
    for (int h = 0; h < 2; h++)
        for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
            cn_scope_begin();
            double v[60];
            cn_tensor *xh = th_random(halves[h], CN_SHAPE(3, 4, 5), 0.5, 1.5, TH_CONTIG, v);
            cn_tensor *x64 = th_make(CN_F64, CN_SHAPE(3, 4, 5), v, TH_CONTIG);
            cn_set_requires_grad(xh, true);
            cn_set_requires_grad(x64, true);
            CHECK_EQ_INT(cn_backward(cn_sum(cn_cast(fns[k](xh), CN_F64), NULL, 0, false), NULL),
                         0);
            CHECK_EQ_INT(cn_backward(cn_sum(fns[k](x64), NULL, 0, false), NULL), 0);
            cn_tensor *gh = cn_get_grad(xh), *g64 = cn_get_grad(x64);
            CHECK(gh && cn_tensor_dtype(gh) == halves[h]);
            for (int64_t i = 0; gh && g64 && i < 60; i++)
                CHECK_MSG(th_close(th_at(gh, i), th_at(g64, i), 3e-2, 1e-2),
                          "%s fn %zu [%lld]: %.6g, f64 %.6g", cn_dtype_name(halves[h]), k,
                          (long long)i, th_at(gh, i), th_at(g64, i));
            cn_scope_end();
        }
}

/* ---- static graphs with an unknown batch size ---- */

/* Every rule with a reduction over the unknown axis 0: the counts (mean,
 * var, std) are taken at run time, and broadcasting back must use the
 * real size. */
static cn_tensor *model(cn_tensor *x, cn_tensor *p) {
    cn_tensor *h = cn_mul(x, p);
    cn_tensor *terms[] = {
        cn_sum(h, AX(0), false),
        cn_mean(h, AX(0), false),
        cn_mean(h, NULL, 0, true),
        cn_prod(h, AX(0), true),
        cn_max(h, AX(0), false),
        cn_min(h, AX(0, 1), false),
        cn_var(h, AX(0), 1, false),
        cn_std(h, AX(0), 0, true),
        cn_logsumexp(h, AX(0), false),
        cn_norm(h, 2, AX(0), false),
        cn_norm(h, 3, AX(0), false),
        cn_sum(cn_mul(cn_softmax(h, 0), h), AX(0), false),
        cn_sum(cn_mul(cn_log_softmax(h, 0), h), AX(0), false),
        cn_sum(cn_mul(cn_cumsum(h, 0), h), AX(0), false),
    };
    cn_tensor *loss = cn_scalar(CN_F64, 0);
    for (size_t k = 0; k < sizeof terms / sizeof terms[0]; k++)
        loss = cn_add(loss, cn_sum(cn_mul_scalar(terms[k], (double)(k + 1) / 7), NULL, 0, false));
    return loss;
}

static void test_static_unknown_batch(void) {
    th_seed(9);
    cn_tensor *p = th_random(CN_F64, CN_SHAPE(4), 0.5, 1.5, TH_CONTIG, NULL);
    cn_set_requires_grad(p, true);
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F64, CN_SHAPE(-1, 4));
    cn_tensor *loss = model(x, p), *gp = NULL;
    CHECK_EQ_INT(cn_grad(&loss, NULL, 1, &p, 1, &gp, 0), 0);
    cn_tensor *outs[2] = {loss, gp};
    cn_program *prog = cn_compile(g, outs, 2, NULL);
    CHECK(prog != NULL);
    for (int batch = 1; prog && batch <= 5; batch += 2) {
        cn_scope_begin();
        cn_tensor *xv = th_random(CN_F64, CN_SHAPE(batch, 4), 0.2, 1, TH_CONTIG, NULL);
        cn_tensor *res[2];
        CHECK_EQ_INT(cn_run(prog, &x, &xv, 1, res, 2), 0);
        cn_tensor *el = model(xv, p), *eg = NULL;
        CHECK_EQ_INT(cn_grad(&el, NULL, 1, &p, 1, &eg, 0), 0);
        CHECK_CLOSE(cn_item(res[0]), cn_item(el), 1e-12, 0);
        CHECK_SHAPE(res[1], 4);
        for (int i = 0; i < 4; i++) CHECK_CLOSE(th_at(res[1], i), th_at(eg, i), 1e-10, 1e-12);
        cn_scope_end();
    }
    cn_program_free(prog);
    cn_graph_free(g);
}

int main(void) {
    RUN(test_max_min_ties);
    RUN(test_prod_zeros);
    RUN(test_norm_at_zero);
    RUN(test_var_std_edges);
    RUN(test_softmax_family);
    RUN(test_cumsum);
    RUN(test_f32_matches_f64);
    RUN(test_half_inputs);
    RUN(test_static_unknown_batch);
    return th_summary();
}
