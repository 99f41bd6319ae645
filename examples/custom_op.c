/* A custom op from a user's program: swish with a learned beta,
 *
 *     y = x * sigmoid(beta * x)      (x any shape, beta a scalar parameter)
 *
 * registered with cn_register_op (shape check, CPU kernel, gradient rules
 * written with cn_ ops), checked with cn_gradcheck, trained for a few
 * steps to recover beta from data, and run again in a compiled static
 * program. Exits non-zero if any part fails. docs/adding-an-op.md,
 * "From your own program", walks through it. */
#include <chutney.h>

#include <math.h>
#include <stdio.h>

/* The output is shaped like x; beta must be a scalar of x's dtype. */
static int swish_infer(void *user, const cn_custom_meta *in, int nin, const cn_custom_attrs *a,
                       cn_custom_meta *out, char *err, size_t err_size) {
    (void)user, (void)nin, (void)a;
    if (in[0].dtype != CN_F32 && in[0].dtype != CN_F64) {
        snprintf(err, err_size, "x must be f32 or f64, not %s", cn_dtype_name(in[0].dtype));
        return 1;
    }
    if (in[1].ndim != 0 || in[1].dtype != in[0].dtype) {
        snprintf(err, err_size, "beta must be a scalar of x's dtype");
        return 1;
    }
    *out = in[0];
    return 0;
}

/* Inputs arrive contiguous, so a flat loop will do. */
static int swish_cpu(void *user, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                     cn_tensor *out, char *err, size_t err_size) {
    (void)user, (void)nin, (void)a, (void)err, (void)err_size;
    int64_t n = cn_numel(out);
    if (cn_tensor_dtype(out) == CN_F32) {
        const float *x = cn_data(in[0]), b = *(const float *)cn_data(in[1]);
        float *y = cn_data(out);
        for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1 + expf(-b * x[i]));
    } else {
        const double *x = cn_data(in[0]), b = *(const double *)cn_data(in[1]);
        double *y = cn_data(out);
        for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1 + exp(-b * x[i]));
    }
    return 0;
}

/* dy/dx = s + beta x s (1 - s), dy/dbeta = x^2 s (1 - s), s = sigmoid(beta x).
 * Built from cn_ ops, so the rule is itself differentiable. */
static cn_tensor *swish_vjp(void *user, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                            cn_tensor *out, cn_tensor *gout, int i) {
    (void)user, (void)nin, (void)a, (void)out;
    cn_tensor *x = in[0], *b = in[1];
    cn_tensor *s = cn_sigmoid(cn_mul(b, x));
    cn_tensor *ds = cn_mul(s, cn_sub(cn_scalar(cn_tensor_dtype(x), 1), s));
    if (i == 0) return cn_mul(gout, cn_add(s, cn_mul(cn_mul(b, x), ds)));
    return cn_sum(cn_mul(gout, cn_mul(cn_square(x), ds)), NULL, 0, false); /* beta is a scalar */
}

static int swish_op = -1;

static cn_tensor *swish(cn_tensor *x, cn_tensor *beta) {
    return cn_apply_op(swish_op, (cn_tensor *[]){x, beta}, 2, NULL);
}

static int swish_fn(void *ctx, cn_tensor *const *in, int n, cn_tensor **out, int nout) {
    (void)ctx, (void)n, (void)nout;
    *out = swish(in[0], in[1]);
    return *out ? 0 : -1;
}

static int fail(const char *what) {
    fprintf(stderr, "custom_op: %s: %s\n", what, cn_last_error());
    return 1;
}

int main(void) {
    cn_scope_begin();
    cn_manual_seed(0);
    const cn_custom_op_def def = {
        .name = "swish_beta",
        .ninputs = 2,
        .flags = CN_CUSTOM_PURE,
        .infer = swish_infer,
        .cpu_kernel = swish_cpu,
        .vjp = swish_vjp,
        .doc = "x sigmoid(beta x)",
    };
    if ((swish_op = cn_register_op(&def)) < 0) return fail("register");

    /* 1. The gradient rule against finite differences (in f64). */
    cn_gradcheck_result gc;
    cn_tensor *probe[2] = {cn_randn(CN_F32, CN_SHAPE(3, 4)), cn_scalar(CN_F32, 0.8)};
    if (cn_gradcheck(swish_fn, NULL, probe, 2, NULL, &gc) < 0) return fail("gradcheck");
    printf("gradcheck: max error %.2e, %s\n", gc.max_abs_err, gc.passed ? "passed" : "FAILED");
    if (!gc.passed) return 1;

    /* 2. Learn beta from data made with beta = 1.7. */
    cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(256, 4));
    cn_tensor *target = swish(x, cn_scalar(CN_F32, 1.7));
    cn_tensor *beta = cn_scalar(CN_F32, 0.5);
    cn_set_requires_grad(beta, true);
    cn_optimizer *opt = cn_sgd(&beta, 1, &(cn_sgd_opts){.lr = 4.0, .momentum = 0.5});
    if (!target || !opt) return fail("setup");
    for (int step = 0; step < 80; step++) {
        cn_scope_begin();
        cn_tensor *loss = cn_mse_loss(swish(x, beta), target, CN_REDUCTION_MEAN);
        cn_optimizer_zero_grad(opt);
        if (!loss || cn_backward(loss, NULL) < 0 || cn_optimizer_step(opt) < 0) return fail("step");
        if (step % 20 == 0) printf("step %2d: loss %.6f, beta %.4f\n", step, cn_item(loss), cn_item(beta));
        cn_scope_end();
    }
    double learned = cn_item(beta);
    printf("learned beta %.4f (data made with 1.7)\n", learned);
    if (fabs(learned - 1.7) > 0.02) return 1;

    /* 3. The same op in a compiled static program, gradient included. */
    cn_graph *g = cn_graph_new();
    cn_tensor *xp = cn_placeholder(g, "x", CN_F32, CN_SHAPE(256, 4));
    cn_tensor *loss = cn_mse_loss(swish(xp, beta), target, CN_REDUCTION_MEAN);
    cn_tensor *gbeta = NULL;
    if (cn_grad(&loss, NULL, 1, &beta, 1, &gbeta, 0) < 0) return fail("grad");
    cn_program *p = cn_compile(g, (cn_tensor *[]){loss, gbeta}, 2, NULL);
    cn_tensor *outs[2];
    if (!p || cn_run(p, &xp, &x, 1, outs, 2) < 0) return fail("compile/run");
    cn_optimizer_zero_grad(opt);
    cn_tensor *eager = cn_mse_loss(swish(x, beta), target, CN_REDUCTION_MEAN);
    if (cn_backward(eager, NULL) < 0) return fail("backward");
    double dl = fabs(cn_item(outs[0]) - cn_item(eager));
    double dg = fabs(cn_item(outs[1]) - cn_item(cn_get_grad(beta)));
    printf("static program: loss and gradient %s eager\n",
           dl <= 1e-6 && dg <= 1e-5 ? "match" : "DIFFER from");
    cn_program_free(p);
    cn_graph_free(g);
    cn_optimizer_free(opt);
    cn_scope_end();
    return dl <= 1e-6 && dg <= 1e-5 ? 0 : 1;
}
