/* The unary ops' gradient conventions where the maths has no derivative
 * (kinks, steps, clamp bounds, softplus' threshold, poles), in both modes,
 * against the values PyTorch 1.13.1 gives (torch.autograd.grad and
 * torch.autograd.forward_ad, in f64); also f32/f16 inputs, second
 * derivatives and static-graph gradients. Smooth behaviour away from the
 * kinks is checked against finite differences by test_grad. */
#include "harness.h"
#include "ops/op.h"

typedef cn_tensor *(*un_fn)(cn_tensor *x);

/* Reverse mode (seed 1 everywhere, so no other op's rule takes part) and
 * forward mode (tangent 1) at the points xs, both against want. */
static void check_grad_at(const char *what, un_fn f, const double *xs, const double *want,
                          int n) {
    cn_scope_begin();
    cn_tensor *x = th_make(CN_F64, CN_SHAPE(n), xs, TH_CONTIG);
    cn_set_requires_grad(x, true);
    cn_tensor *y = f(x);
    CHECK_MSG(y != NULL, "%s: forward failed: %s", what, cn_last_error());
    if (!y) goto out;
    CHECK_MSG(cn_backward(y, cn_ones_like(y)) == 0, "%s: backward failed: %s", what,
              cn_last_error());
    cn_tensor *g = cn_get_grad(x);
    CHECK_MSG(g != NULL, "%s: no gradient", what);
    for (int i = 0; g && i < n; i++)
        CHECK_MSG(th_close(th_at(g, i), want[i], 1e-12, 1e-15),
                  "%s: vjp at x = %g is %.17g, PyTorch gives %.17g", what, xs[i], th_at(g, i),
                  want[i]);

    cn_tensor *one = cn_ones_like(x);
    cn_dual_begin();
    cn_tensor *xd = cn_detach(x);
    CHECK(cn_set_tangent(xd, one) == 0);
    cn_tensor *yd = f(xd);
    cn_tensor *t = yd ? cn_get_tangent(yd) : NULL;
    CHECK_MSG(t != NULL, "%s: no tangent: %s", what, cn_last_error());
    for (int i = 0; t && i < n; i++)
        CHECK_MSG(th_close(th_at(t, i), want[i], 1e-12, 1e-15),
                  "%s: jvp at x = %g is %.17g, PyTorch gives %.17g", what, xs[i], th_at(t, i),
                  want[i]);
    cn_dual_end();
out:
    cn_scope_end();
}

#define AT(what, f, ...)                                                                           \
    do {                                                                                           \
        const double xs_[] = {__VA_ARGS__};                                                        \
        check_grad_at(what, f, xs_, want_, (int)(sizeof xs_ / sizeof xs_[0]));                     \
    } while (0)
#define WANT(...) const double want_[] = {__VA_ARGS__}

static const double nan_ = NAN;

static cn_tensor *f_relu(cn_tensor *x) { return cn_relu(x); }
static cn_tensor *f_abs(cn_tensor *x) { return cn_abs(x); }
static cn_tensor *f_sign(cn_tensor *x) { return cn_sign(x); }
static cn_tensor *f_floor(cn_tensor *x) { return cn_floor(x); }
static cn_tensor *f_ceil(cn_tensor *x) { return cn_ceil(x); }
static cn_tensor *f_round(cn_tensor *x) { return cn_round(x); }
static cn_tensor *f_leaky(cn_tensor *x) { return cn_leaky_relu(x, 0.1); }
static cn_tensor *f_elu(cn_tensor *x) { return cn_elu(x, 0.5); }
static cn_tensor *f_elu_neg(cn_tensor *x) { return cn_elu(x, -0.5); }
static cn_tensor *f_clamp(cn_tensor *x) { return cn_clamp(x, -1, 2); }
static cn_tensor *f_clamp_lo(cn_tensor *x) { return cn_clamp(x, -1, INFINITY); }
static cn_tensor *f_clamp_hi(cn_tensor *x) { return cn_clamp(x, -INFINITY, 2); }
static cn_tensor *f_clamp_crossed(cn_tensor *x) { return cn_clamp(x, 2, 1); }
static cn_tensor *f_clamp_none(cn_tensor *x) { return cn_clamp(x, -INFINITY, INFINITY); }
static cn_tensor *f_softplus(cn_tensor *x) { return cn_softplus(x, 1, 20); }
static cn_tensor *f_softplus_b2(cn_tensor *x) { return cn_softplus(x, 2, 5); }
static cn_tensor *f_softplus_bneg(cn_tensor *x) { return cn_softplus(x, -1, 20); }
static cn_tensor *f_sqrt(cn_tensor *x) { return cn_sqrt(x); }
static cn_tensor *f_rsqrt(cn_tensor *x) { return cn_rsqrt(x); }
static cn_tensor *f_log(cn_tensor *x) { return cn_log(x); }
static cn_tensor *f_reciprocal(cn_tensor *x) { return cn_reciprocal(x); }
static cn_tensor *f_gelu(cn_tensor *x) { return cn_gelu(x, false); }
static cn_tensor *f_gelu_tanh(cn_tensor *x) { return cn_gelu(x, true); }
static cn_tensor *f_silu(cn_tensor *x) { return cn_silu(x); }
static cn_tensor *f_tanh(cn_tensor *x) { return cn_tanh(x); }
static cn_tensor *f_sigmoid(cn_tensor *x) { return cn_sigmoid(x); }
static cn_tensor *f_erf(cn_tensor *x) { return cn_erf(x); }
static cn_tensor *f_exp(cn_tensor *x) { return cn_exp(x); }
static cn_tensor *f_log1p(cn_tensor *x) { return cn_log1p(x); }
static cn_tensor *f_expm1(cn_tensor *x) { return cn_expm1(x); }

static void test_relu_abs(void) {
    {
        WANT(0, 0, 0, 1, 1); /* relu'(0) = 0; NaN lets the gradient through */
        AT("relu", f_relu, -1, 0, -0.0, 1, nan_);
    }
    {
        /* abs'(0) = 0. NaN: PyTorch's sign(NaN) is 0, so it gives 0; ours
         * is NaN (as cn_sign is) and propagates. */
        WANT(-1, 0, 0, 1, nan_);
        AT("abs", f_abs, -1, 0, -0.0, 1, nan_);
    }
    {
        WANT(0.1, 0.1, 0.1, 1, 0.1); /* the slope at 0 and for NaN */
        AT("leaky_relu 0.1", f_leaky, -1, 0, -0.0, 1, nan_);
    }
    {
        WANT(0.18393972058572117, 0.5, 0.5, 1, 1); /* alpha e^x for x <= 0; NaN: 1 */
        AT("elu 0.5", f_elu, -1, 0, -0.0, 1, nan_);
    }
    {
        WANT(-0.18393972058572117, -0.5, 1);
        AT("elu -0.5", f_elu_neg, -1, 0, 1);
    }
}

static void test_steps(void) {
    WANT(0, 0, 0, 0, 0, 0); /* zero at the jumps too */
    AT("sign", f_sign, -1, 0, -0.0, 1, 2.5, -3);
    AT("floor", f_floor, -1.5, 0, 1, 1.5, -2, 3.25);
    AT("ceil", f_ceil, -1.5, 0, 1, 1.5, -2, 3.25);
    AT("round", f_round, -1.5, 0.5, 1.5, 2.5, -0.5, 3);
}

static void test_clamp(void) {
    {
        WANT(0, 1, 1, 1, 0, 0); /* both bounds pass the gradient; NaN does not */
        AT("clamp(-1, 2)", f_clamp, -2, -1, 0, 2, 3, nan_);
    }
    {
        WANT(0, 1, 1, 0);
        AT("clamp(-1, none)", f_clamp_lo, -2, -1, 0, nan_);
    }
    {
        WANT(1, 1, 0, 0);
        AT("clamp(none, 2)", f_clamp_hi, 1, 2, 3, nan_);
    }
    {
        WANT(0, 0, 0, 0, 0); /* lo > hi: the output is hi everywhere */
        AT("clamp(2, 1)", f_clamp_crossed, 0, 1, 1.5, 2, 3);
    }
    {
        WANT(1, 1, 0); /* torch.clamp(x, -inf, inf) */
        AT("clamp(-inf, inf)", f_clamp_none, 0, 1, nan_);
    }
}

static void test_softplus_threshold(void) {
    {
        /* beta x = threshold is still the curved part */
        WANT(0.9999999977220729, 0.9999999979388464, 1);
        AT("softplus(1, 20)", f_softplus, 19.9, 20, 20.1);
    }
    {
        WANT(0.9918374288468401, 0.9933071490757152, 1);
        AT("softplus(2, 5)", f_softplus_b2, 2.4, 2.5, 2.6);
    }
    {
        WANT(1, 0.9999999979388464, 0.9999999943972036, 0.5, 0.04742587317756679);
        AT("softplus(-1, 20)", f_softplus_bneg, -21, -20, -19, 0, 3);
    }
}

/* Poles: the same infinities as PyTorch. */
static void test_poles(void) {
    {
        WANT(INFINITY, 0.5, 0.25);
        AT("sqrt", f_sqrt, 0, 1, 4);
    }
    {
        WANT(-INFINITY, -0.5, -0.0625);
        AT("rsqrt", f_rsqrt, 0, 1, 4);
    }
    {
        WANT(INFINITY, 1, 0.25);
        AT("log", f_log, 0, 1, 4);
    }
    {
        WANT(-INFINITY, -1, -0.0625);
        AT("reciprocal", f_reciprocal, 0, 1, 4);
    }
}

/* Away from the kinks too, against PyTorch; forward mode here uses the
 * output the op computed (test_grad's inputs require a gradient, so there it
 * recomputes it). */
static void test_smooth_values(void) {
    {
        WANT(0.36787944117144233, 1.6487212707001282, 7.38905609893065);
        AT("exp", f_exp, -1, 0.5, 2);
        AT("expm1", f_expm1, -1, 0.5, 2);
    }
    {
        WANT(0.41997434161402614, 0.7864477329659274, 0.07065082485316443);
        AT("tanh", f_tanh, -1, 0.5, 2);
    }
    {
        WANT(0.19661193324148185, 0.2350037122015945, 0.10499358540350662);
        AT("sigmoid", f_sigmoid, -1, 0.5, 2);
    }
    {
        WANT(INFINITY, 0.6666666666666666, 0.3333333333333333);
        AT("log1p", f_log1p, -1, 0.5, 2);
    }
    {
        WANT(0.4151074974205947, 0.8787825789354448, 0.020666985354092053);
        AT("erf", f_erf, -1, 0.5, 2);
    }
    {
        WANT(-0.08523180107819692, -0.08331547058768635, 0.5, 0.8674951246561629,
             1.0833154705876864, 1.011945647204184);
        AT("gelu", f_gelu, -2, -1, 0, 0.5, 1, 3);
    }
    {
        WANT(-0.0860992566236183, -0.08296408384578252, 0.5, 0.8673699035346424,
             1.0829640838457826, 1.0115841666309695);
        AT("gelu tanh", f_gelu_tanh, -2, -1, 0, 0.5, 1, 3);
    }
    {
        WANT(-0.09078424878489547, 0.07232948812851325, 0.5, 0.7399611873026519,
             0.9276705118714869, 1.0881041060151693);
        AT("silu", f_silu, -2, -1, 0, 0.5, 1, 3);
    }
}

/* f32 and f16 inputs: the rules run on the dispatcher's f32 values and the
 * gradient comes back in the input's dtype. */
static void test_low_precision(void) {
    const double xs[] = {-2, -1, 0, 0.5, 1, 3};
    /* torch.nn.functional.gelu in f32 */
    const double gelu32[] = {-0.08523187041282654, -0.08331543207168579, 0.5,
                             0.867495059967041,    1.083315372467041,    1.0119456052780151};
    cn_tensor *x = th_make(CN_F32, CN_SHAPE(6), xs, TH_CONTIG);
    cn_set_requires_grad(x, true);
    cn_tensor *y = cn_gelu(x, false);
    CHECK_EQ_INT(cn_backward(y, cn_ones_like(y)), 0);
    cn_tensor *g = cn_get_grad(x);
    CHECK(g && cn_tensor_dtype(g) == CN_F32);
    for (int i = 0; g && i < 6; i++) CHECK_CLOSE(th_at(g, i), gelu32[i], 1e-6, 1e-7);

    /* f32 clamp at bounds that f32 cannot hold exactly: the bounds are
     * rounded to f32, as in the forward (and PyTorch), so x = 0.1f is on
     * hi = 0.1 (above it in f64) and x = 0.7f on lo = 0.7 (below it in f64):
     * both pass the gradient. */
    const double xc[] = {0.1f, 0.7f, 0.5};
    cn_tensor *xf = th_make(CN_F32, CN_SHAPE(3), xc, TH_CONTIG);
    cn_set_requires_grad(xf, true);
    cn_tensor *yc = cn_clamp(xf, -1, 0.1);
    CHECK_EQ_INT(cn_backward(yc, cn_ones_like(yc)), 0);
    g = cn_get_grad(xf);
    CHECK(g && th_at(g, 0) == 1 && th_at(g, 1) == 0 && th_at(g, 2) == 0);
    cn_zero_grad(xf);
    yc = cn_clamp(xf, 0.7, 1);
    CHECK_EQ_INT(cn_backward(yc, cn_ones_like(yc)), 0);
    g = cn_get_grad(xf);
    CHECK(g && th_at(g, 0) == 0 && th_at(g, 1) == 1 && th_at(g, 2) == 0);

    /* f16: relu's kink, then tanh, against f64 values at f16's precision */
    const double xh[] = {-2, 0, 0.5, 3};
    cn_tensor *h = th_make(CN_F16, CN_SHAPE(4), xh, TH_CONTIG);
    cn_set_requires_grad(h, true);
    cn_tensor *r = cn_relu(h);
    CHECK_EQ_INT(cn_backward(r, cn_ones_like(r)), 0);
    cn_tensor *gh = cn_get_grad(h);
    CHECK(gh && cn_tensor_dtype(gh) == CN_F16);
    for (int i = 0; gh && i < 4; i++) CHECK_CLOSE(th_at(gh, i), xh[i] > 0, 0, 0);
    cn_zero_grad(h);
    r = cn_tanh(h);
    CHECK_EQ_INT(cn_backward(r, cn_ones_like(r)), 0);
    gh = cn_get_grad(h);
    CHECK(gh && cn_tensor_dtype(gh) == CN_F16);
    for (int i = 0; gh && i < 4; i++) {
        double t = tanh(xh[i]);
        CHECK_CLOSE(th_at(gh, i), 1 - t * t, 2e-3, 2e-3);
    }
}

/* The rules are made of ops, so they differentiate again. Needs the other
 * families' rules (mul, div, add, sub, where, neg...): skipped until they
 * exist. References: PyTorch's second derivatives at x = -0.7, 0.3, 1.2. */
static cn_tensor *f_elu07(cn_tensor *x) { return cn_elu(x, 0.7); }
static cn_tensor *f_softplus21(cn_tensor *x) { return cn_softplus(x, 2, 1); }
static cn_tensor *f_sin(cn_tensor *x) { return cn_sin(x); }
static cn_tensor *f_cos(cn_tensor *x) { return cn_cos(x); }
static cn_tensor *f_square(cn_tensor *x) { return cn_square(x); }
static cn_tensor *f_leaky02(cn_tensor *x) { return cn_leaky_relu(x, 0.2); }
static cn_tensor *f_clamp2(cn_tensor *x) { return cn_clamp(x, -0.5, 1); }

static bool have_rules(const cn_op_id *ids, int n) {
    for (int i = 0; i < n; i++)
        if (!cn_ops[ids[i]]->vjp) {
            fprintf(stderr, "  (skipped: %s has no vjp rule yet)\n", cn_ops[ids[i]]->name);
            return false;
        }
    return true;
}

/* f''(x) at 3 points: the gradient of the gradient (create_graph), or the
 * gradient of the forward-mode tangent (the jvp rule's result is itself
 * recorded). A derivative that does not depend on x (piecewise linear
 * functions) has no history: f'' = 0 there. */
static int second_derivative(un_fn f, const double *xs, bool forward_first, double *got) {
    cn_scope_begin();
    cn_tensor *x = th_make(CN_F64, CN_SHAPE(3), xs, TH_CONTIG);
    cn_set_requires_grad(x, true);
    cn_tensor *d1 = NULL, *d2 = NULL;
    int rc;
    if (forward_first) {
        cn_dual_begin();
        rc = cn_set_tangent(x, cn_ones_like(x));
        cn_tensor *y = rc == 0 ? f(x) : NULL;
        d1 = y ? cn_get_tangent(y) : NULL;
        if (d1) cn_scope_add(cn_retain(d1));
        cn_dual_end();
        if (rc == 0 && !d1) rc = -1;
    } else {
        cn_tensor *y = f(x);
        rc = cn_grad(&y, (cn_tensor *[]){cn_ones_like(y)}, 1, &x, 1, &d1,
                     CN_GRAD_CREATE_GRAPH | CN_GRAD_RETAIN_GRAPH);
    }
    if (rc == 0 && cn_requires_grad(d1))
        rc = cn_grad(&d1, (cn_tensor *[]){cn_ones_like(d1)}, 1, &x, 1, &d2, CN_GRAD_ALLOW_UNUSED);
    for (int i = 0; i < 3; i++) got[i] = d2 ? th_at(d2, i) : 0.0;
    cn_scope_end();
    return rc;
}

static void test_second_order(void) {
    static const cn_op_id needed[] = {CN_OP_mul, CN_OP_div, CN_OP_add, CN_OP_sub, CN_OP_where};
    if (!have_rules(needed, 5)) return;
    static const struct {
        const char *name;
        un_fn f;
        double want[3];
    } cases[] = {
        {"tanh", f_tanh, {0.7672323100919166, -0.5331818782014544, -0.5085626501382733}},
        {"sigmoid", f_sigmoid, {0.07457878844034181, -0.03639618395557626, -0.09553813232072468}},
        {"gelu", f_gelu, {0.47150343938380956, 0.728450727529601, 0.10874419079059927}},
        {"gelu tanh", f_gelu_tanh, {0.4708629268446337, 0.7281484484339118, 0.109809658921978}},
        {"silu", f_silu, {0.3912205946779789, 0.4779977681948189, 0.2411431225087419}},
        {"elu 0.7", f_elu07, {0.34760971265398666, 0, 0}},
        {"softplus(2, 1)", f_softplus21, {0.31736979499122925, 0.45756848091331465, 0}},
        {"erf", f_erf, {0.967784804574754, -0.6187565457713778, -0.641626432808494}},
        {"log", f_log, {-2.0408163265306123, -11.111111111111112, -0.6944444444444445}},
        {"rsqrt", f_rsqrt, {NAN, 15.214515486254616, 0.47545360894545674}},
        {"reciprocal", f_reciprocal, {-5.830903790087464, 74.07407407407409, 1.1574074074074077}},
        {"sqrt", f_sqrt, {NAN, -1.5214515486254618, -0.19018144357818273}},
        {"exp", f_exp, {0.4965853037914095, 1.3498588075760032, 3.3201169227365472}},
        {"log1p", f_log1p, {-11.111111111111109, -0.5917159763313609, -0.20661157024793386}},
        {"expm1", f_expm1, {0.4965853037914095, 1.3498588075760032, 3.3201169227365472}},
        {"sin", f_sin, {0.644217687237691, -0.29552020666133955, -0.9320390859672263}},
        {"cos", f_cos, {-0.7648421872844885, -0.955336489125606, -0.3623577544766736}},
        {"square", f_square, {2, 2, 2}},
        {"abs", f_abs, {0, 0, 0}},
        {"relu", f_relu, {0, 0, 0}},
        {"leaky_relu 0.2", f_leaky02, {0, 0, 0}},
        {"clamp(-0.5, 1)", f_clamp2, {0, 0, 0}},
    };
    const double xs[3] = {-0.7, 0.3, 1.2};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int fwd = 0; fwd < 2; fwd++) {
            double got[3];
            int rc = second_derivative(cases[c].f, xs, fwd, got);
            CHECK_MSG(rc == 0, "%s (%s): %s", cases[c].name, fwd ? "jvp, then vjp" : "vjp twice",
                      cn_last_error());
            for (int i = 0; rc == 0 && i < 3; i++)
                CHECK_MSG(th_close(got[i], cases[c].want[i], 1e-10, 1e-12),
                          "%s'' (%s) at %g is %.17g, PyTorch gives %.17g", cases[c].name,
                          fwd ? "jvp, then vjp" : "vjp twice", xs[i], got[i], cases[c].want[i]);
        }
    }
}

/* On placeholders the rules build graph nodes; running them gives the eager
 * gradients. */
static void test_static_graph(void) {
    static const un_fn fns[] = {f_relu, f_gelu, f_gelu_tanh, f_clamp, f_softplus_b2,
                                f_floor, f_elu, f_tanh, f_abs, f_leaky};
    const double xs[] = {-2, -1, -0.25, 0, 0.5, 1, 2.5, 3};
    cn_tensor *xv = th_make(CN_F64, CN_SHAPE(8), xs, TH_CONTIG);
    for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
        cn_scope_begin();
        cn_graph *gr = cn_graph_new();
        cn_tensor *x = cn_placeholder(gr, "x", CN_F64, CN_SHAPE(8));
        cn_set_requires_grad(x, true);
        cn_tensor *y = fns[k](x), *gx = NULL;
        cn_tensor *seed = cn_full(CN_F64, CN_SHAPE(8), 1.5);
        CHECK_EQ_INT(cn_grad(&y, &seed, 1, &x, 1, &gx, 0), 0);
        CHECK(gx && cn_is_symbolic_tensor(gx));
        cn_tensor *outs[2] = {y, gx}, *res[2] = {NULL, NULL};
        cn_program *p = gx ? cn_compile(gr, outs, 2, NULL) : NULL;
        CHECK(p != NULL);
        if (p) CHECK_EQ_INT(cn_run(p, &x, &xv, 1, res, 2), 0);

        cn_tensor *ex = cn_clone(xv);
        cn_set_requires_grad(ex, true);
        cn_tensor *ey = fns[k](ex);
        CHECK_EQ_INT(cn_backward(ey, seed), 0);
        CHECK_MSG(res[1] && cn_allclose(res[1], cn_get_grad(ex), 1e-14, 0),
                  "static gradient of function %d differs from eager", (int)k);
        CHECK(res[0] && cn_allclose(res[0], ey, 0, 0));
        cn_program_free(p);
        cn_graph_free(gr);
        cn_scope_end();
    }
}

int main(void) {
    RUN(test_relu_abs);
    RUN(test_steps);
    RUN(test_clamp);
    RUN(test_softplus_threshold);
    RUN(test_poles);
    RUN(test_smooth_values);
    RUN(test_low_precision);
    RUN(test_second_order);
    RUN(test_static_graph);
    return th_summary();
}
