/* Reductions: sum, mean, prod, max, min, var, std, logsumexp and norm over
 * any set of axes; argmax and argmin over one axis or the flattened tensor.
 *
 * Attributes. list[0..nlist) = the axes (nlist 0: all; infer rewrites them
 * as the sorted list of axes actually reduced), i[0] = keepdim, f[0] = the
 * correction (var, std) or p (norm). argmax/argmin: i[0] = keepdim, i[1] =
 * axis, i[2] = 1 to reduce the flattened tensor (a rank-0 result).
 *
 * Dtypes, as in PyTorch: sum and prod of integers and bools give i64; max
 * and min keep the dtype; argmax/argmin give i64. mean, var, std, logsumexp
 * and norm are float functions: integer inputs compute in f32 (PyTorch
 * refuses integers for mean; converting is the friendlier choice).
 *
 * Empty reductions give the identity (sum 0, prod 1, logsumexp -inf, norm 0)
 * or NaN (mean, var, std); max, min, argmax and argmin of nothing have no
 * value and are errors. */
#include "op.h"

#include "../backend/cpu/reduce.h"

#include <math.h>

static const cn_reduce_kind kinds[CN_RED_COUNT] = {
    CN_RED_SUM, CN_RED_MEAN,      CN_RED_PROD, CN_RED_MAX,    CN_RED_MIN,   CN_RED_VAR,
    CN_RED_STD, CN_RED_LOGSUMEXP, CN_RED_NORM, CN_RED_ARGMAX, CN_RED_ARGMIN};

static cn_reduce_kind kind_of(const cn_op_def *op) { return *(const cn_reduce_kind *)op->impl; }

static int reduce_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                        cn_meta *m) {
    (void)nin;
    const cn_tensor *x = in[0];
    cn_reduce_kind kind = kind_of(op);
    if (cn_norm_axes(op->name, a, x->ndim) < 0) return CN_EINVAL;
    a->i[0] = a->i[0] != 0;
    char b[160];
    if (kind == CN_RED_MAX || kind == CN_RED_MIN) {
        for (int i = 0; i < a->nlist; i++)
            if (x->shape[a->list[i]] == 0)
                return cn_failc(CN_EINVAL,
                                "%s: cannot reduce over axis %d of size 0 (shape %s): the %s of "
                                "no elements is undefined",
                                op->name, (int)a->list[i],
                                cn_fmt_shape(b, sizeof b, x->ndim, x->shape), op->name);
    }
    if (kind == CN_RED_NORM && !(a->f[0] > 0))
        return cn_failc(CN_EINVAL, "%s: p = %g is not supported (p must be > 0 or INFINITY)",
                        op->name, a->f[0]);
    if ((kind == CN_RED_VAR || kind == CN_RED_STD) && isnan(a->f[0]))
        return cn_failc(CN_EINVAL, "%s: correction is NaN", op->name);
    m->dtype = (cn_dtype)x->dtype;
    if ((kind == CN_RED_SUM || kind == CN_RED_PROD) && !cn_dtype_is_float(m->dtype))
        m->dtype = CN_I64;
    cn_reduce_shape(x, a, a->i[0] != 0, m);
    return CN_OK;
}

/* Integer inputs of the kernels reach them as i64 (exact for every integer
 * dtype); the result is stored back in the output's dtype. */
static cn_tensor *widen(cn_tensor *x) {
    if (cn_dtype_is_float((cn_dtype)x->dtype) || x->dtype == CN_I64) return cn_retain(x);
    cn_attrs ca = {0};
    ca.i[0] = CN_I64;
    return cn_op_run(CN_OP_cast, &x, 1, &ca);
}

static int reduce_kernel(const cn_op_def *op, cn_tensor *const *in, int nin, const cn_attrs *a,
                         cn_tensor *out) {
    (void)nin;
    cn_tensor *x = widen(in[0]);
    if (!x) return CN_ENOMEM;
    int r = cn_cpu_reduce(op->name, kind_of(op), out, x, a->list, (int)a->nlist, a->f[0]);
    cn_release(x);
    return r;
}

#define REDUCE_ATTRS {"axes", CN_ATTR_INTS, 0, 0}, {"keepdim", CN_ATTR_BOOL, 0, 0}
#define NO_MORE_ATTRS {NULL, CN_ATTR_NONE, 0, 0}

#define REDUCE_OP(NAME, KIND, FLAGS, ONNX, DOC, ...)                                               \
    const cn_op_def cn_opdef_##NAME = {                                                            \
        .name = #NAME,                                                                             \
        .ninputs = 1,                                                                              \
        .flags = FLAGS,                                                                            \
        .attrs = {REDUCE_ATTRS, __VA_ARGS__},                                                      \
        .infer = reduce_infer,                                                                     \
        .cpu = reduce_kernel,                                                                      \
        .onnx = ONNX,                                                                              \
        .impl = &kinds[KIND],                                                                      \
        .doc = DOC,                                                                                \
    };

REDUCE_OP(sum, CN_RED_SUM, 0, "ReduceSum", "y = sum of x over axes (integers: i64)",
          NO_MORE_ATTRS)
REDUCE_OP(mean, CN_RED_MEAN, CN_OPF_FLOAT_MATH, "ReduceMean", "y = sum(x) / N over axes",
          NO_MORE_ATTRS)
REDUCE_OP(prod, CN_RED_PROD, 0, "ReduceProd", "y = product of x over axes (integers: i64)",
          NO_MORE_ATTRS)
REDUCE_OP(max, CN_RED_MAX, 0, "ReduceMax", "y = max of x over axes (NaN propagates)",
          NO_MORE_ATTRS)
REDUCE_OP(min, CN_RED_MIN, 0, "ReduceMin", "y = min of x over axes (NaN propagates)",
          NO_MORE_ATTRS)
REDUCE_OP(var, CN_RED_VAR, CN_OPF_FLOAT_MATH, NULL,
          "y = sum((x - mean)^2) / (N - correction) over axes",
          {"correction", CN_ATTR_FLOAT, 0, 1})
REDUCE_OP(std, CN_RED_STD, CN_OPF_FLOAT_MATH, NULL, "y = sqrt(var(x, correction)) over axes",
          {"correction", CN_ATTR_FLOAT, 0, 1})
REDUCE_OP(logsumexp, CN_RED_LOGSUMEXP, CN_OPF_FLOAT_MATH, "ReduceLogSumExp",
          "y = log(sum(exp(x))) over axes, computed as max + log(sum(exp(x - max)))", NO_MORE_ATTRS)
/* ONNX has ReduceL1/ReduceL2 only: an exporter picks by p. */
REDUCE_OP(norm, CN_RED_NORM, CN_OPF_FLOAT_MATH, NULL,
          "y = (sum |x|^p)^(1/p) over axes; p = inf: max |x|", {"p", CN_ATTR_FLOAT, 0, 2})

/* ---- argmax / argmin ---- */

static int arg_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                     cn_meta *m) {
    (void)nin;
    const cn_tensor *x = in[0];
    char b[160];
    a->i[0] = a->i[0] != 0;
    a->i[2] = a->i[2] != 0;
    m->dtype = CN_I64;
    if (a->i[2]) {
        bool known = true;
        for (int i = 0; i < x->ndim; i++) known &= x->shape[i] >= 0;
        if (known && cn_shape_numel(x->ndim, x->shape) == 0)
            return cn_failc(CN_EINVAL, "%s: the tensor of shape %s is empty: no element to pick",
                            op->name, cn_fmt_shape(b, sizeof b, x->ndim, x->shape));
        m->ndim = 0;
        return CN_OK;
    }
    int ax = cn_norm_axis(op->name, (int)a->i[1], x->ndim);
    if (ax < 0) return CN_EINVAL;
    a->i[1] = ax;
    if (x->ndim == 0) {
        m->ndim = 0;
        return CN_OK;
    }
    if (x->shape[ax] == 0)
        return cn_failc(CN_EINVAL, "%s: cannot reduce over axis %d of size 0 (shape %s)",
                        op->name, ax, cn_fmt_shape(b, sizeof b, x->ndim, x->shape));
    cn_attrs r = {0};
    r.nlist = 1;
    r.list[0] = ax;
    cn_reduce_shape(x, &r, a->i[0] != 0, m);
    return CN_OK;
}

static int arg_kernel(const cn_op_def *op, cn_tensor *const *in, int nin, const cn_attrs *a,
                      cn_tensor *out) {
    (void)nin;
    cn_tensor *w = widen(in[0]), *x = w;
    if (!w) return CN_ENOMEM;
    int64_t axis = a->i[1];
    if (a->i[2] && w->ndim > 0) {
        /* Positions count in row-major order: a contiguous copy seen as 1-D. */
        cn_tensor *c = cn_t_contiguous(w);
        x = c ? cn_t_alias(c) : NULL;
        cn_release(c);
        if (!x) {
            cn_release(w);
            return CN_ENOMEM;
        }
        x->shape[0] = cn_shape_numel(w->ndim, w->shape);
        x->strides[0] = 1;
        x->ndim = 1;
        axis = 0;
    }
    int r = cn_cpu_reduce(op->name, kind_of(op), out, x, &axis, x->ndim > 0, 0);
    if (x != w) cn_release(x);
    cn_release(w);
    return r;
}

const cn_op_def cn_opdef_argmax = {
    .name = "argmax",
    .ninputs = 1,
    .flags = CN_OPF_NONDIFF,
    .attrs = {{"keepdim", CN_ATTR_BOOL, 0, 0},
              {"axis", CN_ATTR_INT, 1, 0},
              {"flatten", CN_ATTR_BOOL, 2, 0}},
    .infer = arg_infer,
    .cpu = arg_kernel,
    .onnx = "ArgMax",
    .impl = &kinds[CN_RED_ARGMAX],
    .doc = "y = index of the first max of x along axis (NaN counts as the max)",
};

const cn_op_def cn_opdef_argmin = {
    .name = "argmin",
    .ninputs = 1,
    .flags = CN_OPF_NONDIFF,
    .attrs = {{"keepdim", CN_ATTR_BOOL, 0, 0},
              {"axis", CN_ATTR_INT, 1, 0},
              {"flatten", CN_ATTR_BOOL, 2, 0}},
    .infer = arg_infer,
    .cpu = arg_kernel,
    .onnx = "ArgMin",
    .impl = &kinds[CN_RED_ARGMIN],
    .doc = "y = index of the first min of x along axis (NaN counts as the min)",
};

/* ---- public functions ---- */

static cn_tensor *reduce_apply(cn_op_id id, const char *name, cn_tensor *x, const int *axes,
                               int naxes, bool keepdim, double f0) {
    if (!x) return NULL;
    if (naxes < 0 || naxes > CN_MAX_DIMS)
        return cn_fail("%s: %d axes given (0..%d allowed)", name, naxes, CN_MAX_DIMS);
    if (naxes > 0 && !axes) return cn_fail("%s: axes is NULL but naxes is %d", name, naxes);
    cn_attrs a = {0};
    a.nlist = naxes;
    for (int i = 0; i < naxes; i++) a.list[i] = axes[i];
    a.i[0] = keepdim;
    a.f[0] = f0;
    return cn_op_apply(id, &x, 1, &a);
}

cn_tensor *cn_sum(cn_tensor *x, const int *axes, int naxes, bool keepdim) {
    return reduce_apply(CN_OP_sum, "sum", x, axes, naxes, keepdim, 0);
}

cn_tensor *cn_mean(cn_tensor *x, const int *axes, int naxes, bool keepdim) {
    return reduce_apply(CN_OP_mean, "mean", x, axes, naxes, keepdim, 0);
}

cn_tensor *cn_prod(cn_tensor *x, const int *axes, int naxes, bool keepdim) {
    return reduce_apply(CN_OP_prod, "prod", x, axes, naxes, keepdim, 0);
}

cn_tensor *cn_max(cn_tensor *x, const int *axes, int naxes, bool keepdim) {
    return reduce_apply(CN_OP_max, "max", x, axes, naxes, keepdim, 0);
}

cn_tensor *cn_min(cn_tensor *x, const int *axes, int naxes, bool keepdim) {
    return reduce_apply(CN_OP_min, "min", x, axes, naxes, keepdim, 0);
}

cn_tensor *cn_var(cn_tensor *x, const int *axes, int naxes, double correction, bool keepdim) {
    return reduce_apply(CN_OP_var, "var", x, axes, naxes, keepdim, correction);
}

cn_tensor *cn_std(cn_tensor *x, const int *axes, int naxes, double correction, bool keepdim) {
    return reduce_apply(CN_OP_std, "std", x, axes, naxes, keepdim, correction);
}

cn_tensor *cn_logsumexp(cn_tensor *x, const int *axes, int naxes, bool keepdim) {
    return reduce_apply(CN_OP_logsumexp, "logsumexp", x, axes, naxes, keepdim, 0);
}

cn_tensor *cn_norm(cn_tensor *x, double p, const int *axes, int naxes, bool keepdim) {
    return reduce_apply(CN_OP_norm, "norm", x, axes, naxes, keepdim, p);
}

static cn_tensor *arg_apply(cn_op_id id, cn_tensor *x, int axis, bool keepdim, bool flatten) {
    if (!x) return NULL;
    cn_attrs a = {0};
    a.i[0] = keepdim;
    a.i[1] = axis;
    a.i[2] = flatten;
    return cn_op_apply(id, &x, 1, &a);
}

cn_tensor *cn_argmax(cn_tensor *x, int axis, bool keepdim) {
    return arg_apply(CN_OP_argmax, x, axis, keepdim, false);
}

cn_tensor *cn_argmin(cn_tensor *x, int axis, bool keepdim) {
    return arg_apply(CN_OP_argmin, x, axis, keepdim, false);
}

cn_tensor *cn_argmax_all(cn_tensor *x) { return arg_apply(CN_OP_argmax, x, 0, false, true); }

cn_tensor *cn_argmin_all(cn_tensor *x) { return arg_apply(CN_OP_argmin, x, 0, false, true); }
