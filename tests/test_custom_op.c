/* Custom ops registered from user code (cn_register_op, cn_apply_op) and
 * the public gradient check (cn_gradcheck): forward against a naive loop,
 * gradients against differences, second order, static programs (and that
 * passes leave ops that are not pure alone), errors, registration from
 * several threads. Uses only the public header, like a user's program. */
#include "harness.h"

#include <pthread.h>

/* ---- swish with a learned beta: y = alpha x sigmoid(beta x) ---- */

static int swish_infer(void *user, const cn_custom_meta *in, int nin, const cn_custom_attrs *a,
                       cn_custom_meta *out, char *err, size_t n) {
    (void)user, (void)nin, (void)a;
    if (in[0].dtype != CN_F32 && in[0].dtype != CN_F64) {
        snprintf(err, n, "x must be f32 or f64, not %s", cn_dtype_name(in[0].dtype));
        return 1;
    }
    if (in[1].ndim != 0 || in[1].dtype != in[0].dtype) {
        snprintf(err, n, "beta must be a rank-0 %s tensor (got rank %d, %s)",
                 cn_dtype_name(in[0].dtype), in[1].ndim, cn_dtype_name(in[1].dtype));
        return 1;
    }
    *out = in[0];
    return 0;
}

static double swish_ref(double x, double b, double alpha) { return alpha * x / (1 + exp(-b * x)); }

static int swish_cpu(void *user, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                     cn_tensor *out, char *err, size_t n) {
    (void)nin, (void)err, (void)n;
    if (user) ++*(int *)user;
    int64_t k = cn_numel(out);
    if (cn_tensor_dtype(out) == CN_F64) {
        const double *x = cn_data(in[0]), b = *(const double *)cn_data(in[1]);
        double *y = cn_data(out);
        for (int64_t e = 0; e < k; e++) y[e] = swish_ref(x[e], b, a->f[0]);
    } else {
        const float *x = cn_data(in[0]), b = *(const float *)cn_data(in[1]);
        float *y = cn_data(out);
        for (int64_t e = 0; e < k; e++) y[e] = (float)swish_ref(x[e], b, a->f[0]);
    }
    return 0;
}

static cn_tensor *sc(cn_tensor *like, double v) { return cn_scalar(cn_tensor_dtype(like), v); }

/* s = sigmoid(beta x), ds = s (1 - s): the pieces both rules share. */
static void swish_parts(cn_tensor *const *in, cn_tensor **s, cn_tensor **ds) {
    *s = cn_sigmoid(cn_mul(in[1], in[0]));
    *ds = cn_mul(*s, cn_sub(sc(in[0], 1), *s));
}

static cn_tensor *swish_vjp(void *user, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                            cn_tensor *out, cn_tensor *gout, int i) {
    (void)user, (void)nin, (void)out;
    cn_tensor *s, *ds;
    swish_parts(in, &s, &ds);
    cn_tensor *alpha = sc(in[0], a->f[0]);
    if (i == 0) /* alpha (s + beta x ds) */
        return cn_mul(gout, cn_mul(alpha, cn_add(s, cn_mul(cn_mul(in[1], in[0]), ds))));
    /* alpha x^2 ds, summed to beta's rank 0 */
    return cn_sum(cn_mul(gout, cn_mul(alpha, cn_mul(cn_square(in[0]), ds))), NULL, 0, false);
}

static cn_tensor *swish_jvp(void *user, cn_tensor *const *in, cn_tensor *const *tin, int nin,
                            const cn_custom_attrs *a, cn_tensor *out) {
    (void)user, (void)nin, (void)out;
    cn_tensor *s, *ds, *t = NULL;
    swish_parts(in, &s, &ds);
    cn_tensor *alpha = sc(in[0], a->f[0]);
    if (tin[0]) t = cn_mul(tin[0], cn_mul(alpha, cn_add(s, cn_mul(cn_mul(in[1], in[0]), ds))));
    if (tin[1]) {
        cn_tensor *tb = cn_mul(tin[1], cn_mul(alpha, cn_mul(cn_square(in[0]), ds)));
        t = t ? cn_add(t, tb) : tb;
    }
    return t;
}

/* The same op with a wrong gradient for x: gradcheck must catch it. */
static cn_tensor *wrong_vjp(void *user, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                            cn_tensor *out, cn_tensor *gout, int i) {
    cn_tensor *g = swish_vjp(user, in, nin, a, out, gout, i);
    return i == 0 ? cn_mul(g, sc(g, 1.01)) : g;
}

static int swish_calls;
static int swish_id = -1, wrong_id = -1;

static cn_custom_op_def swish_def(const char *name) {
    cn_custom_op_def d = {
        .name = name,
        .ninputs = 2,
        .flags = CN_CUSTOM_PURE,
        .attrs = {{"alpha", true, 0, 1.0}},
        .infer = swish_infer,
        .cpu_kernel = swish_cpu,
        .vjp = swish_vjp,
        .jvp = swish_jvp,
        .user = &swish_calls,
        .doc = "alpha x sigmoid(beta x)",
    };
    return d;
}

static cn_tensor *swish(cn_tensor *x, cn_tensor *beta, double alpha) {
    cn_custom_attrs a = {.f = {alpha}};
    return cn_apply_op(swish_id, (cn_tensor *[]){x, beta}, 2, &a);
}

static void test_register(void) {
    cn_custom_op_def d = swish_def("swish_beta");
    swish_id = cn_register_op(&d);
    CHECK(swish_id >= 0);
    CHECK_EQ_INT(cn_custom_op_find("swish_beta"), swish_id);
    CHECK(cn_custom_op_find("no_such_op") < 0);
    d = swish_def("swish_wrong");
    d.vjp = wrong_vjp;
    wrong_id = cn_register_op(&d);
    CHECK(wrong_id >= 0 && wrong_id != swish_id);
}

static void test_register_errors(void) {
    cn_custom_op_def d = swish_def("swish_beta");
    CHECK_STATUS_ERROR(cn_register_op(&d), "an op named 'swish_beta' exists already");
    d.name = "add"; /* a built-in op */
    CHECK_STATUS_ERROR(cn_register_op(&d), "an op named 'add' exists already");
    CHECK_STATUS_ERROR(cn_register_op(NULL), "def is NULL");
    d = swish_def("has space");
    CHECK_STATUS_ERROR(cn_register_op(&d), "is not 1 to 64 of");
    d = swish_def(NULL);
    CHECK_STATUS_ERROR(cn_register_op(&d), "is not 1 to 64 of");
    d = swish_def("e1");
    d.ninputs = 0;
    CHECK_STATUS_ERROR(cn_register_op(&d), "ninputs 0 not in [1, 8]");
    d = swish_def("e2");
    d.infer = NULL;
    CHECK_STATUS_ERROR(cn_register_op(&d), "no infer function");
    d = swish_def("e3");
    d.cpu_kernel = NULL;
    CHECK_STATUS_ERROR(cn_register_op(&d), "no CPU kernel");
    d = swish_def("e4");
    d.attrs[1] = (cn_custom_attr_def){"again", true, 0, 0};
    CHECK_STATUS_ERROR(cn_register_op(&d), "a float slot of its own");
    d = swish_def("e5");
    d.attrs[0].slot = 4;
    CHECK_STATUS_ERROR(cn_register_op(&d), "slot of its own in [0, 3]");
    d = swish_def("e6");
    d.flags = 1u << 7;
    CHECK_STATUS_ERROR(cn_register_op(&d), "unknown flags");
    /* None of the failures took a name. */
    CHECK(cn_custom_op_find("e2") < 0);
    d = swish_def("e2");
    CHECK(cn_register_op(&d) >= 0);
}

static void test_forward(void) {
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int k = 0; k < 2; k++) {
        cn_tensor *x = cn_randn(dts[k], CN_SHAPE(3, 5));
        cn_tensor *b = cn_scalar(dts[k], 0.7);
        cn_tensor *y = swish(x, b, 1.5);
        CHECK(y && cn_tensor_dtype(y) == dts[k]);
        CHECK_SHAPE(y, 3, 5);
        for (int64_t i = 0; y && i < 3; i++)
            for (int64_t j = 0; j < 5; j++) {
                int64_t idx[] = {i, j};
                CHECK_CLOSE(cn_get(y, idx), swish_ref(cn_get(x, idx), 0.7, 1.5), 1e-6, 1e-7);
            }
    }
    /* A transposed input reaches the kernel contiguous; NULL attrs take
     * the defaults (alpha 1). */
    cn_tensor *x = cn_randn(CN_F64, CN_SHAPE(4, 3)), *b = cn_scalar(CN_F64, -0.4);
    cn_tensor *xt = cn_transpose(x, 0, 1);
    cn_tensor *y = cn_apply_op(swish_id, (cn_tensor *[]){xt, b}, 2, NULL);
    for (int64_t i = 0; y && i < 3; i++)
        for (int64_t j = 0; j < 4; j++)
            CHECK_CLOSE(cn_get(y, (int64_t[]){i, j}), swish_ref(cn_get(x, (int64_t[]){j, i}), -0.4, 1),
                        1e-12, 1e-14);
    /* An empty input: an empty output, no kernel call. */
    int before = swish_calls;
    cn_tensor *e = swish(cn_zeros(CN_F32, CN_SHAPE(0, 3)), cn_scalar(CN_F32, 1), 1);
    CHECK(e && cn_numel(e) == 0);
    CHECK_EQ_INT(swish_calls, before);
}

static void test_apply_errors(void) {
    cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(2, 3));
    CHECK_ERROR(swish(cn_zeros(CN_I32, CN_SHAPE(2)), cn_scalar(CN_F32, 1), 1),
                "swish_beta: x must be f32 or f64, not i32");
    CHECK_ERROR(swish(x, cn_ones(CN_F32, CN_SHAPE(3)), 1),
                "swish_beta: beta must be a rank-0 f32 tensor (got rank 1, f32)");
    CHECK_ERROR(cn_apply_op(swish_id, &x, 1, NULL), "swish_beta: got 1 inputs, expects 2");
    CHECK_ERROR(cn_apply_op(12345, &x, 1, NULL), "not the id of a registered custom op");
    CHECK_ERROR(cn_apply_op(0, &x, 1, NULL), "not the id of a registered custom op");
    /* A NULL input keeps the first error. */
    cn_clear_error();
    CHECK(!swish(NULL, cn_scalar(CN_F32, 1), 1));
}

/* Eagerly recorded: backward gives the vjp's gradients. */
static void test_backward(void) {
    cn_tensor *x = cn_randn(CN_F64, CN_SHAPE(6));
    cn_tensor *b = cn_scalar(CN_F64, 0.3);
    cn_set_requires_grad(x, true);
    cn_set_requires_grad(b, true);
    CHECK(cn_backward(cn_sum(swish(x, b, 2.0), NULL, 0, false), NULL) == 0);
    cn_tensor *gx = cn_get_grad(x), *gb = cn_get_grad(b);
    CHECK(gx && gb);
    double sb = 0;
    for (int64_t i = 0; gx && gb && i < 6; i++) {
        double xv = cn_get(x, &i), s = 1 / (1 + exp(-0.3 * xv));
        CHECK_CLOSE(cn_get(gx, &i), 2 * (s + 0.3 * xv * s * (1 - s)), 1e-12, 1e-14);
        sb += 2 * xv * xv * s * (1 - s);
    }
    if (gb) CHECK_CLOSE(cn_item(gb), sb, 1e-12, 1e-14);
}

static int swish_fn(void *ctx, cn_tensor *const *in, int nin, cn_tensor **out, int nout) {
    (void)nin, (void)nout;
    *out = cn_apply_op(*(int *)ctx, in, 2, &(cn_custom_attrs){.f = {1.3}});
    return *out ? 0 : -1;
}

/* d/dx of sum(swish(x, beta)^2): its gradient is the second order. */
static int grad_fn(void *ctx, cn_tensor *const *in, int nin, cn_tensor **out, int nout) {
    (void)ctx, (void)nin, (void)nout;
    cn_tensor *y = swish(in[0], in[1], 0.8);
    cn_tensor *g[1] = {NULL};
    if (cn_grad((cn_tensor *[]){cn_sum(cn_mul(y, y), NULL, 0, false)}, NULL, 1, in, 1,
                g, CN_GRAD_CREATE_GRAPH) < 0)
        return -1;
    *out = g[0];
    return 0;
}

static void test_gradcheck(void) {
    cn_tensor *in[2] = {cn_randn(CN_F32, CN_SHAPE(2, 4)), cn_scalar(CN_F32, 0.6)};
    cn_gradcheck_result r;
    cn_gradcheck_opts o = {.check_jvp = true};
    CHECK(cn_gradcheck(swish_fn, &swish_id, in, 2, &o, &r) == 0);
    CHECK_MSG(r.passed, "gradcheck failed: max error %g, ratio %g at input %d element %lld",
              r.max_abs_err, r.max_ratio, r.worst_input, (long long)r.worst_index);
    CHECK(r.max_abs_err < 1e-6);
    /* A wrong rule fails, and the check says where. */
    CHECK(cn_gradcheck(swish_fn, &wrong_id, in, 2, NULL, &r) == 0);
    CHECK(!r.passed && r.worst_input == 0 && r.max_ratio > 1);
    /* Second order through the vjp, which is built from differentiable ops. */
    CHECK(cn_gradcheck(grad_fn, NULL, in, 2, NULL, &r) == 0);
    CHECK_MSG(r.passed, "second-order gradcheck failed: ratio %g", r.max_ratio);
    /* Errors. */
    CHECK_STATUS_ERROR(cn_gradcheck(swish_fn, &swish_id, in, 0, NULL, &r), "1 to 64 inputs");
    cn_tensor *ints[2] = {cn_zeros(CN_I64, CN_SHAPE(2)), cn_zeros(CN_I64, CN_SHAPE(2))};
    CHECK_STATUS_ERROR(cn_gradcheck(swish_fn, &swish_id, ints, 2, NULL, &r), "no float input");
}

/* Both gradients from one call; beta's left NULL means zeros. */
static int multi_calls;
static int swish_vjp_multi(void *user, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                           cn_tensor *out, cn_tensor *gout, const bool *need, cn_tensor **g,
                           char *err, size_t n) {
    (void)err, (void)n;
    multi_calls++;
    if (need[0]) g[0] = swish_vjp(user, in, nin, a, out, gout, 0);
    if (need[1] && a->i[0] == 0) g[1] = swish_vjp(user, in, nin, a, out, gout, 1);
    if (a->i[0] == 2) {
        snprintf(err, n, "asked to fail");
        return 1;
    }
    return 0;
}

static void test_vjp_multi(void) {
    cn_custom_op_def d = swish_def("swish_multi");
    d.vjp = NULL;
    d.vjp_multi = swish_vjp_multi;
    int id = cn_register_op(&d);
    CHECK(id >= 0);
    cn_tensor *in[2] = {cn_randn(CN_F32, CN_SHAPE(5)), cn_scalar(CN_F32, 0.6)};
    cn_gradcheck_result r;
    CHECK(cn_gradcheck(swish_fn, &id, in, 2, NULL, &r) == 0 && r.passed);
    /* One call per application for both inputs. */
    cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(5)), *b = cn_scalar(CN_F32, 0.6);
    cn_set_requires_grad(x, true);
    cn_set_requires_grad(b, true);
    int before = multi_calls;
    cn_tensor *y = cn_apply_op(id, (cn_tensor *[]){x, b}, 2, &(cn_custom_attrs){.f = {1}});
    CHECK(cn_backward(cn_sum(y, NULL, 0, false), NULL) == 0);
    CHECK_EQ_INT(multi_calls - before, 1);
    /* A gradient left NULL is zeros. */
    cn_zero_grad(b);
    y = cn_apply_op(id, (cn_tensor *[]){x, b}, 2, &(cn_custom_attrs){.i = {1}, .f = {1}});
    CHECK(cn_backward(cn_sum(y, NULL, 0, false), NULL) == 0);
    CHECK(cn_get_grad(b) && cn_item(cn_get_grad(b)) == 0);
    /* Its error reaches the caller. */
    y = cn_apply_op(id, (cn_tensor *[]){x, b}, 2, &(cn_custom_attrs){.i = {2}, .f = {1}});
    CHECK_STATUS_ERROR(cn_backward(cn_sum(y, NULL, 0, false), NULL), "swish_multi: asked to fail");
}

static void test_no_vjp(void) {
    cn_custom_op_def d = swish_def("swish_fwd_only");
    d.vjp = NULL;
    d.jvp = NULL;
    int id = cn_register_op(&d);
    CHECK(id >= 0);
    cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(3)), *b = cn_scalar(CN_F32, 1);
    cn_set_requires_grad(x, true);
    cn_tensor *y = cn_apply_op(id, (cn_tensor *[]){x, b}, 2, NULL);
    CHECK(y);
    CHECK_STATUS_ERROR(cn_backward(cn_sum(y, NULL, 0, false), NULL), "swish_fwd_only has no gradient rule");
    /* Forward mode without a jvp rule. */
    cn_tensor *xd = cn_randn(CN_F32, CN_SHAPE(3));
    cn_dual_begin();
    cn_set_tangent(xd, cn_ones(CN_F32, CN_SHAPE(3)));
    CHECK_ERROR(cn_apply_op(id, (cn_tensor *[]){xd, b}, 2, NULL), "swish_fwd_only: no forward-mode");
    cn_dual_end();
}

/* The same values from a static program (with its gradients) as eagerly. */
static void test_static(void) {
    cn_tensor *xv = cn_randn(CN_F32, CN_SHAPE(4, 3));
    cn_tensor *beta = cn_scalar(CN_F32, 0.9);
    cn_set_requires_grad(beta, true);
    for (int level = 0; level <= 2; level += 2) {
        cn_graph *g = cn_graph_new();
        cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 3));
        cn_set_requires_grad(x, true);
        cn_tensor *y = swish(x, beta, 1.1);
        cn_tensor *loss = cn_sum(cn_mul(y, y), NULL, 0, false);
        cn_tensor *gr[2] = {NULL, NULL};
        CHECK(cn_grad(&loss, NULL, 1, (cn_tensor *[]){x, beta}, 2, gr, 0) == 0);
        cn_program *p = cn_compile(g, (cn_tensor *[]){y, gr[0], gr[1]}, 3,
                                   &(cn_compile_opts){.opt_level = level});
        CHECK(p);
        cn_tensor *outs[3] = {NULL};
        CHECK(p && cn_run(p, &x, &xv, 1, outs, 3) == 0);
        /* Eagerly. */
        cn_tensor *xe = cn_clone(xv);
        cn_set_requires_grad(xe, true);
        cn_zero_grad(beta);
        cn_tensor *ye = swish(xe, beta, 1.1);
        CHECK(cn_backward(cn_sum(cn_mul(ye, ye), NULL, 0, false), NULL) == 0);
        cn_tensor *want[3] = {ye, cn_get_grad(xe), cn_get_grad(beta)};
        for (int k = 0; k < 3; k++) {
            CHECK(outs[k] && want[k] && cn_numel(outs[k]) == cn_numel(want[k]));
            if (!outs[k] || !want[k] || cn_numel(outs[k]) != cn_numel(want[k])) continue;
            cn_tensor *a = cn_reshape(outs[k], CN_SHAPE(-1)), *b = cn_reshape(want[k], CN_SHAPE(-1));
            for (int64_t i = 0; i < cn_numel(a); i++)
                CHECK_CLOSE(cn_get(a, &i), cn_get(b, &i), 1e-5, 1e-6);
        }
        cn_zero_grad(beta);
        cn_program_free(p);
        cn_graph_free(g);
    }
}

/* ---- an op that counts its kernel calls, pure or not ---- */

static int count_infer(void *user, const cn_custom_meta *in, int nin, const cn_custom_attrs *a,
                       cn_custom_meta *out, char *err, size_t n) {
    (void)user, (void)nin, (void)a, (void)err, (void)n;
    *out = in[0];
    return 0;
}

static int count_cpu(void *user, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                     cn_tensor *out, char *err, size_t n) {
    (void)nin, (void)a;
    if (cn_tensor_dtype(out) != CN_F32) {
        snprintf(err, n, "only f32");
        return 1;
    }
    ++*(int *)user;
    const float *x = cn_data(in[0]);
    float *y = cn_data(out);
    for (int64_t e = 0; e < cn_numel(out); e++) y[e] = x[e] + 1;
    return 0;
}

static int pure_calls, impure_calls;

/* Kernel calls per run of a program with two equal applications to x. */
static int runs_calls(int id, int *counter) {
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(3));
    cn_tensor *y1 = cn_apply_op(id, &x, 1, NULL), *y2 = cn_apply_op(id, &x, 1, NULL);
    cn_tensor *y = cn_add(y1, y2);
    cn_program *p = cn_compile(g, &y, 1, NULL);
    cn_tensor *xv = cn_zeros(CN_F32, CN_SHAPE(3)), *out = NULL;
    int calls = -1;
    if (p && cn_run(p, &x, &xv, 1, &out, 1) == 0) { /* the first run plans */
        int before = *counter;
        if (cn_run(p, &x, &xv, 1, &out, 1) == 0) calls = *counter - before;
        CHECK(out && cn_get(out, (int64_t[]){1}) == 2.0);
    }
    cn_program_free(p);
    cn_graph_free(g);
    return calls;
}

static void test_purity(void) {
    cn_custom_op_def d = {.name = "count_pure", .ninputs = 1, .flags = CN_CUSTOM_PURE,
                          .infer = count_infer, .cpu_kernel = count_cpu, .user = &pure_calls};
    int pure = cn_register_op(&d);
    d.name = "count_impure";
    d.flags = 0;
    d.user = &impure_calls;
    int impure = cn_register_op(&d);
    CHECK(pure >= 0 && impure >= 0);
    /* Pure: the two are merged (CSE). */
    CHECK_EQ_INT(runs_calls(pure, &pure_calls), 1);
    /* Not pure: every application runs on every run. */
    CHECK_EQ_INT(runs_calls(impure, &impure_calls), 2);
    /* No ONNX file can hold a custom op. */
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(3));
    cn_tensor *y = cn_apply_op(pure, &x, 1, NULL);
    void *buf = NULL;
    size_t size = 0;
    cn_clear_error();
    CHECK(cn_onnx_export_buffer(g, &y, 1, &buf, &size, NULL) < 0);
    CHECK_MSG(strstr(cn_last_error(), "count_pure is not supported (ONNX has no equivalent)") || strstr(cn_last_error(), "without ONNX"),
              "unexpected: %s", cn_last_error());
    free(buf);
    cn_graph_free(g);
    /* A kernel's error reaches the caller with the op's name. */
    CHECK_ERROR(cn_apply_op(pure, (cn_tensor *[]){cn_zeros(CN_F64, CN_SHAPE(2))}, 1, NULL),
                "count_pure: only f32");
}

/* A device kernel: this one stages through the host, which is enough to
 * see that the dispatcher hands it the device's tensors. */
static int dev_calls;
static int swish_dev(void *user, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                     cn_tensor *out, char *err, size_t n) {
    (void)user, (void)nin;
    dev_calls++;
    if (cn_tensor_device(out).kind != CN_DEVICE_OPENCL || cn_tensor_device(in[0]).kind != CN_DEVICE_OPENCL) {
        snprintf(err, n, "not given device tensors");
        return 1;
    }
    int64_t k = cn_numel(out);
    cn_tensor *xh = cn_to(in[0], CN_CPU), *bh = cn_to(in[1], CN_CPU);
    if (k > 64 || !xh || !bh) return 1;
    const float *x = cn_data(xh), b = *(const float *)cn_data(bh);
    float y[64];
    for (int64_t e = 0; e < k; e++) y[e] = (float)swish_ref(x[e], b, a->f[0]);
    return cn_copy_(out, cn_from_data(CN_F32, cn_ndim(out), cn_shape(out), y)) < 0;
}

static void check_swish(cn_tensor *y, cn_tensor *x, double b) {
    cn_tensor *yh = cn_to(y, CN_CPU);
    CHECK(yh && cn_numel(yh) == cn_numel(x));
    for (int64_t i = 0; yh && i < cn_numel(x); i++)
        CHECK_CLOSE(cn_get(yh, &i), swish_ref(cn_get(x, &i), b, 1), 1e-6, 1e-7);
}

/* On a device: the op's own kernel there, else its CPU kernel on copies
 * (eagerly) or a CPU step with transfers (in a static program). */
static void test_devices(void) {
    if (cn_device_count(CN_DEVICE_OPENCL) < 1) {
        fprintf(stderr, "  (no OpenCL device: skipped)\n");
        return;
    }
    cn_device dev = CN_DEVICE(CN_DEVICE_OPENCL, 0);
    cn_custom_op_def d = swish_def("swish_dev");
    d.device_kernels[CN_DEVICE_OPENCL] = swish_dev;
    int with_dev = cn_register_op(&d);
    CHECK(with_dev >= 0);
    cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(5)), *xd = cn_to(x, dev);
    cn_tensor *b = cn_scalar(CN_F32, 0.5);
    const int ids[2] = {swish_id, with_dev};
    for (int k = 0; k < 2; k++) {
        int before = dev_calls;
        cn_tensor *y = cn_apply_op(ids[k], (cn_tensor *[]){xd, b}, 2, NULL);
        CHECK(y && cn_tensor_device(y).kind == CN_DEVICE_OPENCL);
        check_swish(y, x, 0.5);
        CHECK_EQ_INT(dev_calls - before, k);

        cn_graph *g = cn_graph_new();
        cn_tensor *ph = cn_placeholder(g, "x", CN_F32, CN_SHAPE(5));
        cn_tensor *ys = cn_exp(cn_apply_op(ids[k], (cn_tensor *[]){ph, b}, 2, NULL));
        cn_program *p = cn_compile(g, &ys, 1, &(cn_compile_opts){.opt_level = 2, .quiet_fallback = true});
        cn_tensor *out = NULL;
        before = dev_calls;
        CHECK(p && cn_run(p, &ph, &xd, 1, &out, 1) == 0);
        cn_program_stats st = {0};
        CHECK(p && cn_program_stats_get(p, &st) == 0);
        CHECK_EQ_INT(st.nfallbacks, k ? 0 : 1);
        CHECK_EQ_INT(dev_calls - before, k);
        CHECK(out && cn_tensor_device(out).kind == CN_DEVICE_OPENCL);
        check_swish(out ? cn_log(out) : NULL, x, 0.5);
        cn_program_free(p);
        cn_graph_free(g);
    }
}

#define NTHREADS 4
static int shared_ok[NTHREADS], own_ok[NTHREADS];

static void *reg_thread(void *arg) {
    int k = (int)(intptr_t)arg;
    char name[32];
    snprintf(name, sizeof name, "thr_%d", k);
    cn_custom_op_def d = {.name = name, .ninputs = 1, .infer = count_infer, .cpu_kernel = count_cpu,
                          .user = &pure_calls};
    own_ok[k] = cn_register_op(&d) >= 0;
    d.name = "thr_shared";
    shared_ok[k] = cn_register_op(&d) >= 0;
    return NULL;
}

static void test_threads(void) {
    pthread_t t[NTHREADS];
    for (int k = 0; k < NTHREADS; k++) pthread_create(&t[k], NULL, reg_thread, (void *)(intptr_t)k);
    for (int k = 0; k < NTHREADS; k++) pthread_join(t[k], NULL);
    int shared = 0;
    for (int k = 0; k < NTHREADS; k++) {
        CHECK(own_ok[k]);
        shared += shared_ok[k];
    }
    CHECK_EQ_INT(shared, 1);
    /* The names were copied: the threads' buffers are gone. */
    CHECK(cn_custom_op_find("thr_3") >= 0);
}

/* ---- a program run from two threads at once ---- */

/* The kernel holds the first run until the second thread has tried its
 * own: that try must be refused, not share the first run's arenas. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_state; /* 1: the first run is in its kernel; 2: the second has tried */
static bool gate_armed = true;

static int gate_cpu(void *user, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                    cn_tensor *out, char *err, size_t n) {
    pthread_mutex_lock(&gate_mu);
    if (gate_armed) {
        gate_state = 1;
        pthread_cond_broadcast(&gate_cv);
        while (gate_state != 2) pthread_cond_wait(&gate_cv, &gate_mu);
    }
    pthread_mutex_unlock(&gate_mu);
    return count_cpu(user, in, nin, a, out, err, n);
}

typedef struct gate_run {
    cn_program *p;
    cn_tensor *x, *xv;
    int rc;
} gate_run;

static void *gate_first(void *arg) {
    gate_run *r = arg;
    cn_tensor *out = NULL;
    cn_scope_begin(); /* this thread's results, freed before it ends */
    r->rc = cn_run(r->p, &r->x, &r->xv, 1, &out, 1);
    if (r->rc == 0) CHECK(cn_get(out, (int64_t[]){0}) == 1.0);
    cn_scope_end();
    return NULL;
}

static void test_concurrent_run(void) {
    static int calls;
    cn_custom_op_def d = {.name = "gate", .ninputs = 1, .infer = count_infer, .cpu_kernel = gate_cpu,
                          .user = &calls};
    int id = cn_register_op(&d);
    CHECK(id >= 0);
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(3));
    cn_tensor *y = cn_apply_op(id, &x, 1, NULL);
    cn_program *p = cn_compile(g, &y, 1, NULL);
    CHECK(p);
    if (!p) return;
    gate_run r = {p, x, cn_zeros(CN_F32, CN_SHAPE(3)), -1};
    pthread_t t;
    pthread_create(&t, NULL, gate_first, &r);
    pthread_mutex_lock(&gate_mu);
    while (gate_state != 1) pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
    cn_tensor *out = (cn_tensor *)1;
    CHECK_STATUS_ERROR(cn_run(p, &x, &r.xv, 1, &out, 1), "the program is running already");
    CHECK(out == NULL);
    pthread_mutex_lock(&gate_mu);
    gate_state = 2;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
    pthread_join(t, NULL);
    CHECK_EQ_INT(r.rc, 0);
    /* Free again once the first run is over. */
    gate_armed = false;
    CHECK(cn_run(p, &x, &r.xv, 1, &out, 1) == 0);
    cn_program_free(p);
    cn_graph_free(g);
}

int main(void) {
    cn_manual_seed(7);
    RUN(test_register);
    RUN(test_register_errors);
    RUN(test_forward);
    RUN(test_apply_errors);
    RUN(test_backward);
    RUN(test_gradcheck);
    RUN(test_vjp_multi);
    RUN(test_no_vjp);
    RUN(test_static);
    RUN(test_purity);
    RUN(test_devices);
    RUN(test_threads);
    RUN(test_concurrent_run);
    return th_summary();
}
