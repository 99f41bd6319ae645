/* Unary elementwise ops: arithmetic, exponentials and logarithms, activation
 * functions, rounding, clamp and logical_not. One infer serves the whole
 * family; op->impl points at the op's kind. The kernels are the backends'
 * (src/backend/cpu/unary.c for the CPU). */
#include "op.h"

/* cn_unary_kind only (data): the kinds the rules switch on. */
#include "../backend/cpu/unary.h"

#include <inttypes.h>
#include <math.h>

static const cn_unary_kind un_kinds[CN_UN_COUNT] = {
#define K(k) [k] = k
    K(CN_UN_NEG),     K(CN_UN_ABS),        K(CN_UN_SIGN),      K(CN_UN_EXP),
    K(CN_UN_LOG),     K(CN_UN_LOG1P),      K(CN_UN_EXPM1),     K(CN_UN_SQRT),
    K(CN_UN_RSQRT),   K(CN_UN_SQUARE),     K(CN_UN_RECIPROCAL), K(CN_UN_SIN),
    K(CN_UN_COS),     K(CN_UN_TANH),       K(CN_UN_SIGMOID),   K(CN_UN_RELU),
    K(CN_UN_LEAKY_RELU), K(CN_UN_ELU),     K(CN_UN_GELU),      K(CN_UN_GELU_TANH),
    K(CN_UN_SILU),    K(CN_UN_SOFTPLUS),   K(CN_UN_ERF),       K(CN_UN_FLOOR),
    K(CN_UN_CEIL),    K(CN_UN_ROUND),      K(CN_UN_CLAMP),     K(CN_UN_LOGICAL_NOT),
#undef K
};

static cn_unary_kind kind_of(const cn_op_def *op) { return *(const cn_unary_kind *)op->impl; }

/* The attribute checks; the defaults live in the attrs tables below. */
static int check_attrs(const cn_op_def *op, const cn_attrs *a) {
    switch (kind_of(op)) {
    case CN_UN_GELU:
        if (a->i[0] != 0 && a->i[0] != 1)
            return cn_failc(CN_EINVAL, "%s: approximate is %" PRId64 ", not 0 (erf) or 1 (tanh)",
                            op->name, a->i[0]);
        break;
    case CN_UN_SOFTPLUS:
        if (a->f[0] == 0 || isnan(a->f[0]))
            return cn_failc(CN_EINVAL, "%s: beta is %g; it must be a nonzero number", op->name,
                            a->f[0]);
        if (isnan(a->f[1])) return cn_failc(CN_EINVAL, "%s: threshold is NaN", op->name);
        break;
    case CN_UN_CLAMP:
        if (isnan(a->f[0]) || isnan(a->f[1]))
            return cn_failc(CN_EINVAL,
                            "%s: lo = %g, hi = %g: a bound is NaN (use -inf / inf for none)",
                            op->name, a->f[0], a->f[1]);
        break;
    default: break;
    }
    return CN_OK;
}

/* Same shape out. Float functions give f32 for integer and bool inputs (the
 * dispatcher has cast them already; this holds for a static graph re-running
 * inference too); logical_not gives bool; the rest keep the dtype but have
 * no meaning for bool. */
static int unary_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                       cn_meta *m) {
    (void)nin;
    const cn_tensor *x = in[0];
    cn_dtype dt = (cn_dtype)x->dtype;
    if (kind_of(op) == CN_UN_LOGICAL_NOT) {
        dt = CN_BOOL;
    } else if (op->flags & CN_OPF_FLOAT_MATH) {
        if (!cn_dtype_is_float(dt)) dt = CN_F32;
    } else if (dt == CN_BOOL) {
        char b[160];
        return cn_failc(CN_EINVAL, "%s: x is %s; bool is not supported (cast it to a number type)",
                        op->name, cn_shape_str(x, b, sizeof b));
    }
    if (check_attrs(op, a) < 0) return CN_EINVAL;
    m->dtype = dt;
    m->ndim = x->ndim;
    memcpy(m->shape, x->shape, sizeof m->shape);
    return CN_OK;
}

/* ---- gradient rules ----
 * Every op here is elementwise, so its Jacobian is diagonal: one product
 * dy/dx * v serves reverse mode (v = the output's gradient) and forward mode
 * (v = the input's tangent). The products are built from public ops so that
 * they are differentiable again and work on symbolic tensors. Subgradients
 * at kinks and steps are PyTorch 1.13's (the .grad_doc of each op). */

/* A rank-0 constant that takes part in an op with t without changing its
 * dtype (halves only reach the rules widened to f32). */
static cn_tensor *sc(const cn_tensor *t, double v) {
    cn_dtype dt = (cn_dtype)t->dtype;
    return cn_scalar(cn_dtype_is_float(dt) && !cn_is_half(dt) ? dt : CN_F32, v);
}

/* v where keep holds, else 0; select rather than multiply by a 0/1 mask, so
 * an infinite v does not turn into NaN where it is dropped. */
static cn_tensor *v_where(cn_tensor *keep, cn_tensor *v) { return cn_where(keep, v, sc(v, 0)); }

/* GELU's tanh form, y = x/2 (1 + tanh u) with u = k0 (x + k1 x^3):
 * dy/dx = (1 + t)/2 + x/2 (1 - t^2) k0 (1 + 3 k1 x^2), t = tanh u. */
#define GELU_K0 0.79788456080286535588 /* sqrt(2/pi) */
#define GELU_K1 0.044715

static cn_tensor *gelu_tanh_deriv(cn_tensor *x) {
    cn_tensor *x2 = cn_square(x);
    cn_tensor *u = cn_mul_scalar(cn_mul(x, cn_add_scalar(cn_mul_scalar(x2, GELU_K1), 1)), GELU_K0);
    cn_tensor *t = cn_tanh(u);
    cn_tensor *left = cn_mul_scalar(cn_add_scalar(t, 1), 0.5);
    cn_tensor *du = cn_mul_scalar(cn_add_scalar(cn_mul_scalar(x2, 3 * GELU_K1), 1), GELU_K0);
    cn_tensor *right = cn_mul(cn_mul(cn_mul_scalar(x, 0.5), cn_rsub_scalar(cn_square(t), 1)), du);
    return cn_add(left, right);
}

/* GELU's erf form, y = x Phi(x): dy/dx = Phi(x) + x phi(x). */
static cn_tensor *gelu_erf_deriv(cn_tensor *x) {
    cn_tensor *u = cn_mul_scalar(x, 0.70710678118654752440); /* x / sqrt 2 */
    cn_tensor *cdf = cn_mul_scalar(cn_add_scalar(cn_erf(u), 1), 0.5);
    cn_tensor *pdf = cn_mul_scalar(cn_exp(cn_neg(cn_square(u))),
                                   0.39894228040143267794 /* 1/sqrt(2 pi) */);
    return cn_add(cdf, cn_mul(x, pdf));
}

/* dy/dx * v for op kind k at x, with y = the op's output. */
static cn_tensor *chain(cn_unary_kind k, cn_tensor *x, cn_tensor *y, const cn_attrs *a,
                        cn_tensor *v) {
    if (!x || !v) return NULL;
    switch (k) {
    case CN_UN_NEG: return cn_neg(v);
    /* sign(0) = 0. PyTorch's sign(NaN) is 0, ours is NaN: NaN propagates. */
    case CN_UN_ABS: return cn_mul(v, cn_sign(x));
    /* Steps: zero everywhere, the jumps included. Shaped after x, not v:
     * v may be a constant (a seed) while x is a value of a static graph. */
    case CN_UN_SIGN:
    case CN_UN_FLOOR:
    case CN_UN_CEIL:
    case CN_UN_ROUND: return cn_zeros_like_op(x);
    case CN_UN_EXP: return cn_mul(v, y);
    case CN_UN_LOG: return cn_div(v, x);
    case CN_UN_LOG1P: return cn_div(v, cn_add_scalar(x, 1));
    case CN_UN_EXPM1: return cn_mul(v, cn_add_scalar(y, 1));
    case CN_UN_SQRT: return cn_div(v, cn_mul_scalar(y, 2));
    case CN_UN_RSQRT:
        return cn_mul(v, cn_mul_scalar(cn_mul(y, cn_square(y)), -0.5));
    case CN_UN_SQUARE: return cn_mul(v, cn_mul_scalar(x, 2));
    case CN_UN_RECIPROCAL: return cn_mul(v, cn_neg(cn_square(y)));
    case CN_UN_SIN: return cn_mul(v, cn_cos(x));
    case CN_UN_COS: return cn_mul(v, cn_neg(cn_sin(x)));
    case CN_UN_TANH: return cn_mul(v, cn_rsub_scalar(cn_square(y), 1));
    case CN_UN_SIGMOID:
        return cn_mul(v, cn_mul(y, cn_rsub_scalar(y, 1)));
    /* PyTorch's threshold_backward tests y <= 0, the same as x <= 0: it
     * drops the gradient at x = 0 too, and lets it through for NaN. From y,
     * as PyTorch: then x is dead after relu, and a static program fuses
     * the relu into the matmul/conv before it (no buffer for x). */
    case CN_UN_RELU: return cn_where(cn_le(y, sc(y, 0)), sc(v, 0), v);
    case CN_UN_LEAKY_RELU:
        return cn_where(cn_gt(x, sc(x, 0)), v, cn_mul_scalar(v, a->f[0]));
    /* x <= 0: alpha e^x, from x rather than y + alpha, which cancels badly
     * far below 0. PyTorch tests x <= 0, so NaN takes the slope-1 branch. */
    case CN_UN_ELU:
        return cn_where(cn_le(x, sc(x, 0)), cn_mul(v, cn_mul_scalar(cn_exp(x), a->f[0])), v);
    case CN_UN_GELU: return cn_mul(v, a->i[0] ? gelu_tanh_deriv(x) : gelu_erf_deriv(x));
    case CN_UN_GELU_TANH: return cn_mul(v, gelu_tanh_deriv(x));
    case CN_UN_SILU: {
        cn_tensor *s = cn_sigmoid(x);
        return cn_mul(v, cn_mul(s, cn_add_scalar(cn_mul(x, cn_rsub_scalar(s, 1)), 1)));
    }
    /* The linear part (beta x > threshold) has slope 1; elsewhere the
     * slope is sigmoid(beta x), which PyTorch writes e^z / (e^z + 1). */
    case CN_UN_SOFTPLUS: {
        cn_tensor *z = cn_mul_scalar(x, a->f[0]);
        return cn_where(cn_gt(z, sc(z, a->f[1])), v, cn_mul(v, cn_sigmoid(z)));
    }
    case CN_UN_ERF:
        return cn_mul(v, cn_mul_scalar(cn_exp(cn_neg(cn_square(x))),
                                     1.12837916709551257390 /* 2/sqrt(pi) */));
    /* The gradient passes where lo <= x <= hi, bounds included, and not
     * for NaN (PyTorch's clamp_backward). -inf / inf bounds need no
     * comparison, but with neither, NaN still gets 0 (as torch.clamp(x,
     * -inf, inf) gives). Bounds are rounded to x's dtype, as the kernel
     * rounds them, so the mask matches the forward exactly. */
    case CN_UN_CLAMP: {
        double lo = a->f[0], hi = a->f[1];
        cn_tensor *keep;
        if (lo == -INFINITY && hi == INFINITY)
            keep = cn_eq(x, x);
        else if (lo == -INFINITY)
            keep = cn_le(x, sc(x, hi));
        else if (hi == INFINITY)
            keep = cn_ge(x, sc(x, lo));
        else
            keep = cn_logical_and(cn_ge(x, sc(x, lo)), cn_le(x, sc(x, hi)));
        return v_where(keep, v);
    }
    default: break;
    }
    return cn_fail("unary: internal error: no gradient rule for kind %d", (int)k);
}

/* The two rule functions of one op: they differ only in where v comes from. */
#define UNARY_RULES(NAME, KIND)                                                                    \
    static cn_tensor *NAME##_vjp(cn_tensor *const *in, int nin, const cn_attrs *a,                 \
                                 cn_tensor *out, cn_tensor *g, int i) {                            \
        return chain(KIND, in[0], out, a, g);                                                      \
    }                                                                                              \
    static cn_tensor *NAME##_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,             \
                                 const cn_attrs *a, cn_tensor *out) {                              \
        return chain(KIND, in[0], out, a, tin[0]);                            \
    }

#define FLOAT_FN CN_OPF_FLOAT_MATH

/* The trailing arguments are designated initializers: .doc, and .attrs for
 * the ops that have attributes. */
#define UNARY_OP(NAME, KIND, FLAGS, ONNX, ...)                                                     \
    const cn_op_def cn_opdef_##NAME = {                                                            \
        .name = #NAME,                                                                             \
        .ninputs = 1,                                                                              \
        .flags = CN_OPF_ELEMENTWISE | (FLAGS),                                                     \
        .infer = unary_infer,                                                                      \
        .onnx = ONNX,                                                                              \
        .impl = &un_kinds[KIND],                                                                   \
        __VA_ARGS__};

/* A differentiable op: its rules, then its definition. */
#define UNARY_DIFF_OP(NAME, KIND, FLAGS, ONNX, ...)                                                \
    UNARY_RULES(NAME, KIND)                                                                        \
    UNARY_OP(NAME, KIND, FLAGS, ONNX, .vjp = NAME##_vjp, .jvp = NAME##_jvp, __VA_ARGS__)

#define STEP_GRAD "zero gradient everywhere, at the jumps too"

UNARY_DIFF_OP(neg, CN_UN_NEG, 0, "Neg", .doc = "y = -x (integers wrap around)")
UNARY_DIFF_OP(abs, CN_UN_ABS, 0, "Abs", .doc = "y = |x| (integers wrap around at the minimum)",
              .grad_doc = "abs'(0) = 0 (gradient sign(x), so NaN at NaN)")
UNARY_DIFF_OP(sign, CN_UN_SIGN, 0, "Sign",
              .doc = "y = 1 if x > 0, -1 if x < 0, 0 if x = 0, NaN if NaN", .grad_doc = STEP_GRAD)
UNARY_DIFF_OP(exp, CN_UN_EXP, FLOAT_FN, "Exp", .doc = "y = e^x")
UNARY_DIFF_OP(log, CN_UN_LOG, FLOAT_FN, "Log", .doc = "y = ln x")
UNARY_DIFF_OP(log1p, CN_UN_LOG1P, FLOAT_FN, NULL, .doc = "y = ln(1 + x), accurate for small x")
UNARY_DIFF_OP(expm1, CN_UN_EXPM1, FLOAT_FN, NULL, .doc = "y = e^x - 1, accurate for small x")
UNARY_DIFF_OP(sqrt, CN_UN_SQRT, FLOAT_FN, "Sqrt", .doc = "y = sqrt(x)")
UNARY_DIFF_OP(rsqrt, CN_UN_RSQRT, FLOAT_FN, NULL, .doc = "y = 1 / sqrt(x)")
UNARY_DIFF_OP(square, CN_UN_SQUARE, 0, NULL, .doc = "y = x * x (integers wrap around)")
UNARY_DIFF_OP(reciprocal, CN_UN_RECIPROCAL, FLOAT_FN, "Reciprocal", .doc = "y = 1 / x")
UNARY_DIFF_OP(sin, CN_UN_SIN, FLOAT_FN, "Sin", .doc = "y = sin x")
UNARY_DIFF_OP(cos, CN_UN_COS, FLOAT_FN, "Cos", .doc = "y = cos x")
UNARY_DIFF_OP(tanh, CN_UN_TANH, FLOAT_FN, "Tanh", .doc = "y = tanh x")
UNARY_DIFF_OP(sigmoid, CN_UN_SIGMOID, FLOAT_FN, "Sigmoid", .doc = "y = 1 / (1 + e^-x)")
UNARY_DIFF_OP(relu, CN_UN_RELU, 0, "Relu", .doc = "y = max(x, 0) (NaN stays NaN)",
              .grad_doc = "relu'(0) = 0 (gradient 1 where y > 0; NaN passes it)")
UNARY_DIFF_OP(leaky_relu, CN_UN_LEAKY_RELU, 0, "LeakyRelu",
              .doc = "y = x if x > 0 else negative_slope * x (integers: truncated toward 0)",
              .grad_doc = "leaky_relu'(0) = negative_slope",
              .attrs = {{"negative_slope", CN_ATTR_FLOAT, 0, 0.01}})
UNARY_DIFF_OP(elu, CN_UN_ELU, FLOAT_FN, "Elu", .doc = "y = x if x > 0 else alpha * (e^x - 1)",
              .grad_doc = "elu'(0) = alpha (the x <= 0 branch, alpha e^x)",
              .attrs = {{"alpha", CN_ATTR_FLOAT, 0, 1.0}})
UNARY_DIFF_OP(gelu, CN_UN_GELU, FLOAT_FN, "Gelu",
              .doc = "y = x Phi(x) = x/2 (1 + erf(x / sqrt 2)); approximate: x/2 (1 + "
                     "tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
              .attrs = {{"approximate", CN_ATTR_BOOL, 0, 0}})
UNARY_DIFF_OP(silu, CN_UN_SILU, FLOAT_FN, NULL, .doc = "y = x / (1 + e^-x)")
UNARY_DIFF_OP(softplus, CN_UN_SOFTPLUS, FLOAT_FN, "Softplus",
              .doc = "y = ln(1 + e^(beta x)) / beta, or x where beta x > threshold",
              .grad_doc = "1 where beta x > threshold, else sigmoid(beta x) (at beta x = "
                          "threshold too)",
              .attrs = {{"beta", CN_ATTR_FLOAT, 0, 1.0}, {"threshold", CN_ATTR_FLOAT, 1, 20.0}})
UNARY_DIFF_OP(erf, CN_UN_ERF, FLOAT_FN, "Erf",
              .doc = "y = 2/sqrt(pi) * integral of e^-t^2 from 0 to x")
UNARY_DIFF_OP(floor, CN_UN_FLOOR, 0, "Floor", .doc = "y = the largest integer <= x",
              .grad_doc = STEP_GRAD)
UNARY_DIFF_OP(ceil, CN_UN_CEIL, 0, "Ceil", .doc = "y = the smallest integer >= x",
              .grad_doc = STEP_GRAD)
UNARY_DIFF_OP(round, CN_UN_ROUND, 0, "Round",
              .doc = "y = x rounded to the nearest integer, half to even", .grad_doc = STEP_GRAD)
UNARY_DIFF_OP(clamp, CN_UN_CLAMP, 0, "Clip",
              .doc = "y = min(max(x, lo), hi) (lo > hi gives hi; integers: bounds rounded inward)",
              .grad_doc = "gradient 1 where lo <= x <= hi (bounds included), else 0; 0 for NaN; "
                          "lo > hi: 0 everywhere",
              .attrs = {{"lo", CN_ATTR_FLOAT, 0, -INFINITY}, {"hi", CN_ATTR_FLOAT, 1, INFINITY}})
/* Reads the truth value of every dtype itself, halves included. */
UNARY_OP(logical_not, CN_UN_LOGICAL_NOT, CN_OPF_NONDIFF | CN_OPF_NO_HALF, "Not",
         .doc = "y = (x == 0)")

/* ---- public functions ---- */

static cn_tensor *apply1(cn_op_id id, cn_tensor *x, const cn_attrs *a) {
    return cn_op_apply(id, &x, 1, a);
}

cn_tensor *cn_neg(cn_tensor *x) { return apply1(CN_OP_neg, x, NULL); }
cn_tensor *cn_abs(cn_tensor *x) { return apply1(CN_OP_abs, x, NULL); }
cn_tensor *cn_sign(cn_tensor *x) { return apply1(CN_OP_sign, x, NULL); }
cn_tensor *cn_exp(cn_tensor *x) { return apply1(CN_OP_exp, x, NULL); }
cn_tensor *cn_log(cn_tensor *x) { return apply1(CN_OP_log, x, NULL); }
cn_tensor *cn_log1p(cn_tensor *x) { return apply1(CN_OP_log1p, x, NULL); }
cn_tensor *cn_expm1(cn_tensor *x) { return apply1(CN_OP_expm1, x, NULL); }
cn_tensor *cn_sqrt(cn_tensor *x) { return apply1(CN_OP_sqrt, x, NULL); }
cn_tensor *cn_rsqrt(cn_tensor *x) { return apply1(CN_OP_rsqrt, x, NULL); }
cn_tensor *cn_square(cn_tensor *x) { return apply1(CN_OP_square, x, NULL); }
cn_tensor *cn_reciprocal(cn_tensor *x) { return apply1(CN_OP_reciprocal, x, NULL); }
cn_tensor *cn_sin(cn_tensor *x) { return apply1(CN_OP_sin, x, NULL); }
cn_tensor *cn_cos(cn_tensor *x) { return apply1(CN_OP_cos, x, NULL); }
cn_tensor *cn_tanh(cn_tensor *x) { return apply1(CN_OP_tanh, x, NULL); }
cn_tensor *cn_sigmoid(cn_tensor *x) { return apply1(CN_OP_sigmoid, x, NULL); }
cn_tensor *cn_relu(cn_tensor *x) { return apply1(CN_OP_relu, x, NULL); }
cn_tensor *cn_silu(cn_tensor *x) { return apply1(CN_OP_silu, x, NULL); }
cn_tensor *cn_erf(cn_tensor *x) { return apply1(CN_OP_erf, x, NULL); }
cn_tensor *cn_floor(cn_tensor *x) { return apply1(CN_OP_floor, x, NULL); }
cn_tensor *cn_ceil(cn_tensor *x) { return apply1(CN_OP_ceil, x, NULL); }
cn_tensor *cn_round(cn_tensor *x) { return apply1(CN_OP_round, x, NULL); }
cn_tensor *cn_logical_not(cn_tensor *x) { return apply1(CN_OP_logical_not, x, NULL); }

cn_tensor *cn_leaky_relu(cn_tensor *x, double negative_slope) {
    cn_attrs a = {0};
    a.f[0] = negative_slope;
    return apply1(CN_OP_leaky_relu, x, &a);
}

cn_tensor *cn_elu(cn_tensor *x, double alpha) {
    cn_attrs a = {0};
    a.f[0] = alpha;
    return apply1(CN_OP_elu, x, &a);
}

cn_tensor *cn_gelu(cn_tensor *x, bool approximate) {
    cn_attrs a = {0};
    a.i[0] = approximate;
    return apply1(CN_OP_gelu, x, &a);
}

cn_tensor *cn_softplus(cn_tensor *x, double beta, double threshold) {
    cn_attrs a = {0};
    a.f[0] = beta;
    a.f[1] = threshold;
    return apply1(CN_OP_softplus, x, &a);
}

cn_tensor *cn_clamp(cn_tensor *x, double lo, double hi) {
    cn_attrs a = {0};
    a.f[0] = lo;
    a.f[1] = hi;
    return apply1(CN_OP_clamp, x, &a);
}
