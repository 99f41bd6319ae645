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

/* cn_reduce_kind only (data): op->impl of each op. The kernels are the
 * backends' (src/backend/cpu/reduce.c for the CPU). */
#include "../backend/cpu/reduce.h"

#include <math.h>
#include <string.h>

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

#define REDUCE_ATTRS {"axes", CN_ATTR_INTS, 0, 0}, {"keepdim", CN_ATTR_BOOL, 0, 0}
#define NO_MORE_ATTRS {NULL, CN_ATTR_NONE, 0, 0}

/* ---- gradient rules ----
 *
 * Each output y of a reduction depends on its own group of x's elements, so
 * both modes come from one x-shaped factor F = dy/dx (built by broadcasting
 * against y and g in keepdim form): reverse mode is g * F, forward mode
 * sum(F * t) over the group. Where F has a cheaper shape (a per-group scale
 * times something x-shaped) the scale is applied to the small tensor. The
 * rules are built from public ops, so they are differentiable again and run
 * on symbolic tensors; attributes arrive canonical (nlist = the axes
 * actually reduced, 0 only for a rank-0 x). */

/* A rank-0 constant of t's dtype (rules only see f32 and f64). */
static cn_tensor *sc(const cn_tensor *t, double v) { return cn_scalar((cn_dtype)t->dtype, v); }

/* t, an output-shaped tensor, with the reduced axes put back as size 1 (it
 * then broadcasts against x). */
static cn_tensor *kd(cn_tensor *t, const cn_tensor *x, const cn_attrs *a) {
    if (!t || a->i[0] || a->nlist == 0) return t;
    int64_t shape[CN_MAX_DIMS];
    bool red[CN_MAX_DIMS] = {false};
    for (int i = 0; i < a->nlist; i++) red[a->list[i]] = true;
    int k = 0;
    for (int i = 0; i < x->ndim; i++) shape[i] = red[i] ? 1 : t->shape[k++];
    return cn_reshape(t, x->ndim, shape);
}

/* gk, output-shaped in keepdim form, broadcast to x's shape. A symbolic x
 * may have unknown sizes, and expand keeps a size 1 where the target is
 * unknown: there the shape comes from adding zeros shaped like x. */
static cn_tensor *unreduce_kd(cn_tensor *gk, cn_tensor *x, const cn_attrs *a) {
    for (int i = 0; i < a->nlist; i++)
        if (x->shape[a->list[i]] < 0) return cn_add(gk, cn_zeros_like_op(x));
    return cn_unreduce(gk, x, a, true);
}

/* The reduction `id` of t over a's axes, keepdim given. */
static cn_tensor *red(cn_op_id id, cn_tensor *t, const cn_attrs *a, bool keepdim) {
    if (!t) return NULL;
    cn_attrs r = *a;
    r.i[0] = keepdim;
    return cn_op_apply(id, &t, 1, &r);
}

/* t * mul / (N - sub), N the number of elements each output reduces; t has
 * the output's shape in keepdim form if keepdim, else the output's shape.
 * N is a constant when the sizes are known, and is counted at run time
 * when a symbolic x has unknown sizes (a constant would be baked in). */
static cn_tensor *scale_count(cn_tensor *t, cn_tensor *x, const cn_attrs *a, bool keepdim,
                              double mul, double sub) {
    if (!t) return NULL;
    int64_t n = 1;
    for (int i = 0; i < a->nlist && n >= 0; i++)
        n = x->shape[a->list[i]] < 0 ? -1 : n * x->shape[a->list[i]];
    if (n >= 0) return cn_mul_scalar(t, mul / ((double)n - sub));
    cn_attrs ones = {0};
    ones.f[0] = 1;
    ones.i[0] = -1;
    cn_tensor *cnt = red(CN_OP_sum, cn_op_apply(CN_OP_full_like, &x, 1, &ones), a, keepdim);
    return cn_div(cn_mul_scalar(t, mul), cn_sub_scalar(cnt, sub));
}

static cn_tensor *sum_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                          cn_tensor *g, int i) {
    return unreduce_kd(kd(g, in[0], a), in[0], a);
}
static cn_tensor *sum_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                          const cn_attrs *a, cn_tensor *out) {
    return red(CN_OP_sum, tin[0], a, a->i[0] != 0);
}

static cn_tensor *mean_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                           cn_tensor *g, int i) {
    return unreduce_kd(scale_count(kd(g, in[0], a), in[0], a, true, 1, 0), in[0], a);
}
static cn_tensor *mean_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                           const cn_attrs *a, cn_tensor *out) {
    return red(CN_OP_mean, tin[0], a, a->i[0] != 0);
}

/* prod: dy/dx_i is the product of the group's other elements. Dividing y by
 * x_i gives it only when the group has no zero, so the rule counts zeros
 * (cz) and uses ps, the product of the nonzero elements:
 *   cz = 0: ps / x_i;
 *   cz = 1: ps at the zero, 0 elsewhere;
 *   cz >= 2: 0.
 * The zeros' values also enter through zs = the sum of the group's zeros
 * (0, but with derivative 1 in each zero) so that the rule's own derivative
 * is right too (second order, e.g. d2y/dx_i dx_j = ps for the two zeros of a
 * group with cz = 2): cz = 1 elsewhere is zs ps / x_i, and cz = 2 at a zero
 * is ps (zs - x_i). Data-dependent branches as in PyTorch are not possible
 * in a rule that must also build static graphs, hence the selects; the
 * per-group coefficients are combined first (small tensors), which leaves
 * where(zero, A - B x, C / x) to do at x's size. gk (the output's gradient
 * in keepdim form, or NULL) is folded into A, B and C. */
static cn_tensor *prod_factor(cn_tensor *x, const cn_attrs *a, cn_tensor *gk) {
    cn_dtype dt = (cn_dtype)x->dtype;
    cn_tensor *z = cn_eq(x, sc(x, 0));
    cn_tensor *cz = red(CN_OP_sum, z, a, true);
    cn_tensor *xs = cn_where(z, sc(x, 1), x);
    cn_tensor *ps = red(CN_OP_prod, xs, a, true);
    cn_tensor *zs = red(CN_OP_sum, cn_where(z, x, sc(x, 0)), a, true);
    if (gk) ps = cn_mul(ps, gk);
    cn_tensor *c0 = cn_cast(cn_eq(cz, sc(x, 0)), dt);
    cn_tensor *c1 = cn_cast(cn_eq(cz, sc(x, 1)), dt);
    cn_tensor *c2 = cn_cast(cn_eq(cz, sc(x, 2)), dt);
    cn_tensor *pa = cn_mul(ps, cn_add(c1, cn_mul(c2, zs)));
    cn_tensor *pb = cn_mul(ps, c2);
    cn_tensor *pc = cn_mul(ps, cn_add(c0, cn_mul(c1, zs)));
    return cn_where(z, cn_sub(pa, cn_mul(pb, x)), cn_div(pc, xs));
}

static cn_tensor *prod_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                           cn_tensor *g, int i) {
    return prod_factor(in[0], a, kd(g, in[0], a));
}
static cn_tensor *prod_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                           const cn_attrs *a, cn_tensor *out) {
    return red(CN_OP_sum, cn_mul(prod_factor(in[0], a, NULL), tin[0]), a, a->i[0] != 0);
}

/* max/min (and norm with p = inf): the gradient goes to the elements equal
 * to the result, split evenly among ties (torch.amax/amin; torch.max(x,
 * dim) instead gives it all to the one index it returns). A NaN result was
 * made by the NaNs of its group, which then share the gradient (PyTorch's
 * full torch.max(x) does so; its amax over axes gives NaN gradients). v is
 * x or |x|. Returns the 0/1 mask (x's dtype) and sets *cnt to the number of
 * ties per output (output-shaped). */
static cn_tensor *tie_mask(cn_tensor *x, cn_tensor *v, cn_tensor *out, const cn_attrs *a,
                           cn_tensor **cnt) {
    cn_tensor *hit = cn_logical_or(cn_eq(v, kd(out, x, a)), cn_ne(x, x));
    cn_tensor *m = cn_cast(hit, (cn_dtype)x->dtype);
    *cnt = red(CN_OP_sum, m, a, a->i[0] != 0);
    return m;
}

static cn_tensor *extremum_vjp(cn_tensor *const *in, int nin, const cn_attrs *a,
                               cn_tensor *out, cn_tensor *g, int i) {
    cn_tensor *cnt, *m = tie_mask(in[0], in[0], out, a, &cnt);
    return cn_mul(m, kd(cn_div(g, cnt), in[0], a));
}
static cn_tensor *extremum_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                               const cn_attrs *a, cn_tensor *out) {
    cn_tensor *cnt, *m = tie_mask(in[0], in[0], out, a, &cnt);
    return cn_div(red(CN_OP_sum, cn_mul(m, tin[0]), a, a->i[0] != 0), cnt);
}

/* var: dy/dx_i = 2 (x_i - mean) / (N - correction). N - correction <= 0
 * gives inf or NaN, as the value does. */
static cn_tensor *deviation(cn_tensor *x, const cn_attrs *a) {
    return cn_sub(x, red(CN_OP_mean, x, a, true));
}

static cn_tensor *var_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                          cn_tensor *g, int i) {
    cn_tensor *x = in[0];
    return cn_mul(deviation(x, a), scale_count(kd(g, x, a), x, a, true, 2, a->f[0]));
}
static cn_tensor *var_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                          const cn_attrs *a, cn_tensor *out) {
    cn_tensor *x = in[0];
    bool k = a->i[0] != 0;
    return scale_count(red(CN_OP_sum, cn_mul(deviation(x, a), tin[0]), a, k), x, a, k, 2,
                       a->f[0]);
}

/* std = sqrt(var): var's factor over 2 y. Where y = 0 (all elements equal)
 * the gradient is 0, as PyTorch masks it (0/0 otherwise); 1 stands in for
 * y there so that the rule's own derivative has no NaN either. */
static cn_tensor *over_std(cn_tensor *t, cn_tensor *y) {
    cn_tensor *zero = cn_eq(y, sc(y, 0));
    return cn_where(zero, sc(t, 0), cn_div(t, cn_where(zero, sc(y, 1), y)));
}

static cn_tensor *std_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                          cn_tensor *g, int i) {
    cn_tensor *x = in[0];
    cn_tensor *s = scale_count(kd(over_std(g, out), x, a), x, a, true, 1, a->f[0]);
    return cn_mul(deviation(x, a), s);
}
static cn_tensor *std_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                          const cn_attrs *a, cn_tensor *out) {
    cn_tensor *x = in[0];
    bool k = a->i[0] != 0;
    cn_tensor *v = red(CN_OP_sum, cn_mul(deviation(x, a), tin[0]), a, k);
    cn_tensor *y = out;
    return over_std(scale_count(v, x, a, k, 1, a->f[0]), y);
}

/* logsumexp: dy/dx_i = exp(x_i - y), the softmax of the group (stable: the
 * exponent is <= 0). A group of -inf only (y = -inf) gives NaN, as in
 * PyTorch. */
static cn_tensor *logsumexp_vjp(cn_tensor *const *in, int nin, const cn_attrs *a,
                                cn_tensor *out, cn_tensor *g, int i) {
    return cn_mul(kd(g, in[0], a), cn_exp(cn_sub(in[0], kd(out, in[0], a))));
}
static cn_tensor *logsumexp_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                                const cn_attrs *a, cn_tensor *out) {
    cn_tensor *y = out;
    cn_tensor *f = cn_exp(cn_sub(in[0], kd(y, in[0], a)));
    return red(CN_OP_sum, cn_mul(f, tin[0]), a, a->i[0] != 0);
}

/* norm (PyTorch's norm_backward): dy/dx_i = sign(x_i) |x_i|^(p-1) / y^(p-1),
 * which is x_i / y for p = 2 and sign(x_i) for p = 1. Subgradients: 0 where
 * y = 0 (every p), 0 at x_i = 0 (p < 1, where the derivative is infinite;
 * sign(0) = 0 for p = 1); p = inf is max |x|, ties split evenly. Safe
 * stand-ins (1) replace the zeros that are masked, so that no inf * 0 turns
 * into NaN, here or in the rule's own derivative. The result is
 * w * s: w x-shaped, s per output (a zero test is applied to s). */
static cn_tensor *norm_w(cn_tensor *x, double p) {
    if (p == 2) return x;
    if (p == 1) return cn_sign(x);
    cn_tensor *z = cn_eq(x, sc(x, 0));
    cn_tensor *ax = cn_where(z, sc(x, 1), cn_abs(x));
    return cn_mul(cn_sign(x), cn_pow_scalar(ax, p - 1));
}

/* v / y^(p-1), 0 where y = 0. */
static cn_tensor *norm_s(cn_tensor *v, cn_tensor *y, double p) {
    if (p == 1) return v;
    cn_tensor *zero = cn_eq(y, sc(y, 0));
    cn_tensor *ys = cn_where(zero, sc(y, 1), y);
    cn_tensor *d = p == 2 ? ys : cn_pow_scalar(ys, p - 1);
    return cn_where(zero, sc(v, 0), cn_div(v, d));
}

static cn_tensor *norm_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                           cn_tensor *g, int i) {
    cn_tensor *x = in[0];
    double p = a->f[0];
    if (isinf(p)) {
        cn_tensor *cnt, *m = tie_mask(x, cn_abs(x), out, a, &cnt);
        return cn_mul(cn_mul(cn_sign(x), m), kd(cn_div(g, cnt), x, a));
    }
    return cn_mul(norm_w(x, p), kd(norm_s(g, out, p), x, a));
}
static cn_tensor *norm_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                           const cn_attrs *a, cn_tensor *out) {
    cn_tensor *x = in[0];
    double p = a->f[0];
    bool k = a->i[0] != 0;
    if (isinf(p)) {
        cn_tensor *cnt, *m = tie_mask(x, cn_abs(x), out, a, &cnt);
        cn_tensor *v = cn_mul(cn_mul(cn_sign(x), m), tin[0]);
        return cn_div(red(CN_OP_sum, v, a, k), cnt);
    }
    cn_tensor *y = out;
    return norm_s(red(CN_OP_sum, cn_mul(norm_w(x, p), tin[0]), a, k), y, p);
}

#define REDUCE_OP(NAME, KIND, FLAGS, ONNX, DOC, RULES, GRAD_DOC, ...)                              \
    const cn_op_def cn_opdef_##NAME = {                                                            \
        .name = #NAME,                                                                             \
        .ninputs = 1,                                                                              \
        .flags = FLAGS,                                                                            \
        .attrs = {REDUCE_ATTRS, __VA_ARGS__},                                                      \
        .infer = reduce_infer,                                                                     \
        .vjp = RULES##_vjp,                                                                        \
        .jvp = RULES##_jvp,                                                                        \
        .onnx = ONNX,                                                                              \
        .impl = &kinds[KIND],                                                                      \
        .doc = DOC,                                                                                \
        .grad_doc = GRAD_DOC,                                                                      \
    };

REDUCE_OP(sum, CN_RED_SUM, 0, "ReduceSum", "y = sum of x over axes (integers: i64)", sum, NULL,
          NO_MORE_ATTRS)
REDUCE_OP(mean, CN_RED_MEAN, CN_OPF_FLOAT_MATH, "ReduceMean", "y = sum(x) / N over axes", mean,
          NULL, NO_MORE_ATTRS)
REDUCE_OP(prod, CN_RED_PROD, 0, "ReduceProd", "y = product of x over axes (integers: i64)", prod,
          NULL, NO_MORE_ATTRS)
REDUCE_OP(max, CN_RED_MAX, 0, "ReduceMax", "y = max of x over axes (NaN propagates)", extremum,
          "ties: the gradient is split evenly among the elements equal to the max (like "
          "torch.amax, not torch.max(x, dim)); a NaN max: among the NaNs",
          NO_MORE_ATTRS)
REDUCE_OP(min, CN_RED_MIN, 0, "ReduceMin", "y = min of x over axes (NaN propagates)", extremum,
          "ties: the gradient is split evenly among the elements equal to the min (like "
          "torch.amin, not torch.min(x, dim)); a NaN min: among the NaNs",
          NO_MORE_ATTRS)
REDUCE_OP(var, CN_RED_VAR, CN_OPF_FLOAT_MATH, NULL,
          "y = sum((x - mean)^2) / (N - correction) over axes", var, NULL,
          {"correction", CN_ATTR_FLOAT, 0, 1})
REDUCE_OP(std, CN_RED_STD, CN_OPF_FLOAT_MATH, NULL, "y = sqrt(var(x, correction)) over axes", std,
          "gradient 0 where std = 0 (all elements of the group equal)",
          {"correction", CN_ATTR_FLOAT, 0, 1})
REDUCE_OP(logsumexp, CN_RED_LOGSUMEXP, CN_OPF_FLOAT_MATH, "ReduceLogSumExp",
          "y = log(sum(exp(x))) over axes, computed as max + log(sum(exp(x - max)))", logsumexp,
          NULL, NO_MORE_ATTRS)
/* ONNX has ReduceL1/ReduceL2 only: an exporter picks by p. */
REDUCE_OP(norm, CN_RED_NORM, CN_OPF_FLOAT_MATH, NULL,
          "y = (sum |x|^p)^(1/p) over axes; p = inf: max |x|", norm,
          "gradient 0 where the norm is 0; p = 1: sign(x), 0 at x = 0; p < 1: 0 at x = 0; "
          "p = inf: split evenly among the elements whose |x| equals the max",
          {"p", CN_ATTR_FLOAT, 0, 2})

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

const cn_op_def cn_opdef_argmax = {
    .name = "argmax",
    .ninputs = 1,
    .flags = CN_OPF_NONDIFF,
    .attrs = {{"keepdim", CN_ATTR_BOOL, 0, 0},
              {"axis", CN_ATTR_INT, 1, 0},
              {"flatten", CN_ATTR_BOOL, 2, 0}},
    .infer = arg_infer,
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
    .onnx = "ArgMin",
    .impl = &kinds[CN_RED_ARGMIN],
    .doc = "y = index of the first min of x along axis (NaN counts as the min)",
};

/* ---- sum_to: the reverse of broadcasting, axes decided at run ----
 *
 * g summed down to the shape of x (whose values are not read): over g's
 * leading axes and wherever x has size 1. A gradient rule reaches for it
 * when x has a size unknown until run where g's is known (cn_sum_to), so
 * infer picks the axes again from the sizes of each run (list, as sum's:
 * what the kernels reduce; nlist 0: none, a copy). */

static int sum_to_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                        cn_meta *m) {
    (void)nin;
    const cn_tensor *g = in[0], *x = in[1];
    char b1[160], b2[160];
    int lead = g->ndim - x->ndim, n = 0;
    if (lead < 0)
        return cn_failc(CN_EINVAL, "%s: cannot sum %s to the higher rank of %s", op->name,
                        cn_fmt_shape(b1, sizeof b1, g->ndim, g->shape),
                        cn_fmt_shape(b2, sizeof b2, x->ndim, x->shape));
    for (int i = 0; i < lead; i++) a->list[n++] = i;
    for (int i = 0; i < x->ndim; i++) {
        int64_t xs = x->shape[i], gs = g->shape[lead + i];
        if (xs == gs || (xs < 0 && gs == 1)) continue;
        if (xs == 1) a->list[n++] = lead + i;
        else if (xs >= 0 && gs >= 0)
            return cn_failc(CN_EINVAL, "%s: cannot sum %s to %s (axis %d: %lld to %lld)",
                            op->name, cn_fmt_shape(b1, sizeof b1, g->ndim, g->shape),
                            cn_fmt_shape(b2, sizeof b2, x->ndim, x->shape), i, (long long)gs,
                            (long long)xs);
    }
    a->nlist = n;
    a->i[0] = 1;
    m->dtype = (cn_dtype)g->dtype;
    if (!cn_dtype_is_float(m->dtype)) m->dtype = CN_I64;
    m->ndim = x->ndim;
    memcpy(m->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    return CN_OK;
}

/* x's values do not matter: its gradient is zero. g's is gout broadcast
 * back to g's shape. */
static cn_tensor *sum_to_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                             cn_tensor *g, int i) {
    return i == 1 ? cn_zeros_like_op(in[1]) : cn_expand_like(g, in[0]);
}
static cn_tensor *sum_to_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                             const cn_attrs *a, cn_tensor *out) {
    if (!tin[0]) return cn_zeros_like_op(out);
    cn_tensor *gx[2] = {tin[0], in[1]};
    cn_attrs r = {0};
    return cn_op_apply(CN_OP_sum_to, gx, 2, &r);
}

const cn_op_def cn_opdef_sum_to = {
    .name = "sum_to",
    .ninputs = 2,
    .attrs = {{"axes", CN_ATTR_INTS, 0, 0}},
    .infer = sum_to_infer,
    .vjp = sum_to_vjp,
    .jvp = sum_to_jvp,
    .impl = &kinds[CN_RED_SUM],
    .doc = "y = g summed to the shape of x: over g's leading axes and where x has size 1 (the "
           "reverse of broadcasting; the axes are picked from the sizes at run time)",
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
