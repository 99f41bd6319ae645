/* softmax and log_softmax along one axis, and cumsum. Attribute: i[0] =
 * axis (infer makes it non-negative).
 *
 * softmax and log_softmax are float functions (integer inputs compute in
 * f32) and subtract the max of each line first, so large inputs do not
 * overflow; a line of -inf gives NaN, as in PyTorch. cumsum keeps float
 * dtypes (summing in double) and turns integers and bools into i64. The
 * kernels are the backends' (src/backend/cpu/softmax.c for the CPU). */
#include "op.h"

static int axis_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                      cn_meta *m) {
    (void)nin;
    const cn_tensor *x = in[0];
    int ax = cn_norm_axis(op->name, (int)a->i[0], x->ndim);
    if (ax < 0) return CN_EINVAL;
    a->i[0] = ax;
    m->dtype = (cn_dtype)x->dtype;
    if (!cn_dtype_is_float(m->dtype)) m->dtype = CN_I64; /* cumsum; softmax gets floats */
    m->ndim = x->ndim;
    memcpy(m->shape, x->shape, sizeof m->shape);
    return CN_OK;
}

/* ---- gradient rules ----
 * softmax: J = diag(y) - y y^T along the axis, symmetric, so the same
 * product serves both modes: y * (v - sum(v * y)). log_softmax: J = I - 1
 * softmax^T; reverse g - softmax * sum(g), forward t - sum(softmax * t). */

static cn_tensor *sum_axis(cn_tensor *t, const cn_attrs *a) {
    int ax = (int)a->i[0];
    return cn_sum(t, &ax, 1, true);
}

static cn_tensor *softmax_product(cn_tensor *y, cn_tensor *v, const cn_attrs *a) {
    return cn_mul(y, cn_sub(v, sum_axis(cn_mul(v, y), a)));
}

static cn_tensor *softmax_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                              cn_tensor *g, int i) {
    return softmax_product(out, g, a);
}
static cn_tensor *softmax_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                              const cn_attrs *a, cn_tensor *out) {
    return softmax_product(out, tin[0], a);
}

static cn_tensor *log_softmax_vjp(cn_tensor *const *in, int nin, const cn_attrs *a,
                                  cn_tensor *out, cn_tensor *g, int i) {
    return cn_sub(g, cn_mul(cn_exp(out), sum_axis(g, a)));
}
static cn_tensor *log_softmax_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                                  const cn_attrs *a, cn_tensor *out) {
    cn_tensor *y = out;
    return cn_sub(tin[0], sum_axis(cn_mul(cn_exp(y), tin[0]), a));
}

const cn_op_def cn_opdef_softmax = {
    .name = "softmax",
    .ninputs = 1,
    .flags = CN_OPF_FLOAT_MATH,
    .attrs = {{"axis", CN_ATTR_INT, 0, -1}},
    .infer = axis_infer,
    .vjp = softmax_vjp,
    .jvp = softmax_jvp,
    .onnx = "Softmax",
    .doc = "y = exp(x - max) / sum(exp(x - max)) along axis",
};

const cn_op_def cn_opdef_log_softmax = {
    .name = "log_softmax",
    .ninputs = 1,
    .flags = CN_OPF_FLOAT_MATH,
    .attrs = {{"axis", CN_ATTR_INT, 0, -1}},
    .infer = axis_infer,
    .vjp = log_softmax_vjp,
    .jvp = log_softmax_jvp,
    .onnx = "LogSoftmax",
    .doc = "y = x - max - log(sum(exp(x - max))) along axis",
};

/* cumsum: the transpose of a running sum is a running sum from the other
 * end, reverse(cumsum(reverse(g))); reversing is a negative-step view. */
static cn_tensor *flip(cn_tensor *t, int axis) { return cn_slice(t, axis, CN_END, CN_END, -1); }

static cn_tensor *cumsum_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                             cn_tensor *g, int i) {
    int ax = (int)a->i[0];
    if (g->ndim == 0) return cn_scope_add(cn_retain(g));
    return flip(cn_cumsum(flip(g, ax), ax), ax);
}
static cn_tensor *cumsum_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                             const cn_attrs *a, cn_tensor *out) {
    return cn_cumsum(tin[0], (int)a->i[0]);
}

const cn_op_def cn_opdef_cumsum = {
    .name = "cumsum",
    .ninputs = 1,
    .attrs = {{"axis", CN_ATTR_INT, 0, 0}},
    .infer = axis_infer,
    .vjp = cumsum_vjp,
    .jvp = cumsum_jvp,
    .onnx = "CumSum",
    .doc = "y[i] = x[0] + ... + x[i] along axis (integers and bools: i64)",
};

static cn_tensor *axis_apply(cn_op_id id, cn_tensor *x, int axis) {
    if (!x) return NULL;
    cn_attrs a = {0};
    a.i[0] = axis;
    return cn_op_apply(id, &x, 1, &a);
}

cn_tensor *cn_softmax(cn_tensor *x, int axis) { return axis_apply(CN_OP_softmax, x, axis); }

cn_tensor *cn_log_softmax(cn_tensor *x, int axis) {
    return axis_apply(CN_OP_log_softmax, x, axis);
}

cn_tensor *cn_cumsum(cn_tensor *x, int axis) { return axis_apply(CN_OP_cumsum, x, axis); }
