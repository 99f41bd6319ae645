/* Binary elementwise ops: arithmetic, comparisons, logic and where, with
 * NumPy broadcasting and PyTorch type promotion (done by the dispatcher), and
 * the forms with a Python-like scalar. */
#include "op.h"

/* cn_binary_kind (data): op->impl of each op; and cn_cpu_addmul, mul's
 * vjp_add on the CPU. The kernels are the backends' (src/backend/cpu/binary.c
 * for the CPU). */
#include "../backend/cpu/binary.h"

#include <math.h>

/* op->impl of each op points at its kind here. */
static const cn_binary_kind bin_kinds[CN_BIN_COUNT] = {
    CN_BIN_ADD, CN_BIN_SUB, CN_BIN_MUL, CN_BIN_DIV, CN_BIN_POW, CN_BIN_MAX,
    CN_BIN_MIN, CN_BIN_EQ,  CN_BIN_NE,  CN_BIN_LT,  CN_BIN_LE,  CN_BIN_GT,
    CN_BIN_GE,  CN_BIN_AND, CN_BIN_OR,  CN_BIN_XOR,
};

static cn_binary_kind kind_of(const cn_op_def *op) { return *(const cn_binary_kind *)op->impl; }

/* The dispatcher has already promoted the inputs; the result type is worked
 * out again here so inference also holds for inputs it has not seen (a
 * static graph re-running inference). */
static int arith_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                       cn_meta *m) {
    (void)nin;
    (void)a;
    cn_dtype dt = cn_result_type(in[0], in[1]);
    if ((op->flags & CN_OPF_FLOAT_MATH) && !cn_dtype_is_float(dt)) dt = CN_F32;
    cn_binary_kind k = kind_of(op);
    if (dt == CN_BOOL && (k == CN_BIN_SUB || k == CN_BIN_POW)) {
        char b1[160], b2[160];
        return cn_failc(CN_EINVAL, "%s: not supported for two bool tensors (%s and %s)%s",
                        op->name, cn_shape_str(in[0], b1, sizeof b1),
                        cn_shape_str(in[1], b2, sizeof b2),
                        k == CN_BIN_SUB ? "; use logical_xor" : "");
    }
    if (cn_broadcast_shapes(op->name, in, 2, m) < 0) return CN_EINVAL;
    m->dtype = dt;
    return CN_OK;
}

/* Comparisons and logic: any dtypes in, bool out. */
static int bool_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                      cn_meta *m) {
    (void)nin;
    (void)a;
    if (cn_broadcast_shapes(op->name, in, 2, m) < 0) return CN_EINVAL;
    m->dtype = CN_BOOL;
    return CN_OK;
}

/* ---- gradient rules ----
 * Built from public ops, so they are differentiable again and work on
 * symbolic tensors. The dispatcher's promotion casts are recorded like any
 * op, so the rules see in[] already promoted (of out's dtype, where's cond
 * aside) and the casts' own rules take each gradient back to its input's
 * dtype. Reverse mode sums broadcast axes away (cn_sum_to); forward mode
 * brings a tangent of a broadcast input up to out's shape. Conventions at
 * ties and special points are PyTorch 1.13's (each op's .grad_doc). */

/* A rank-0 constant of t's (float) dtype: rank 0 leaves the result type to
 * the dimensioned operand, and two rank-0 operands agree. */
static cn_tensor *sc(const cn_tensor *t, double v) {
    cn_dtype dt = (cn_dtype)t->dtype;
    return cn_scalar(cn_dtype_is_float(dt) ? dt : CN_F32, v);
}

static bool same_shape(const cn_tensor *a, const cn_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

/* A tangent of out's shape. */
static cn_tensor *to_out(cn_tensor *t, cn_tensor *out) {
    if (!t || same_shape(t, out)) return t;
    return cn_expand_like(t, out);
}

static cn_tensor *add_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                          cn_tensor *g, int i) {
    return cn_sum_to(g, in[i]);
}
static cn_tensor *add_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin, const cn_attrs *a,
                          cn_tensor *out) {
    if (tin[0] && tin[1]) return to_out(cn_add(tin[0], tin[1]), out);
    return to_out(tin[0] ? tin[0] : tin[1], out);
}

static cn_tensor *sub_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                          cn_tensor *g, int i) {
    cn_tensor *r = cn_sum_to(g, in[i]);
    return i == 0 ? r : cn_neg(r);
}
static cn_tensor *sub_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin, const cn_attrs *a,
                          cn_tensor *out) {
    if (tin[0] && tin[1]) return to_out(cn_sub(tin[0], tin[1]), out);
    return to_out(tin[0] ? tin[0] : cn_neg(tin[1]), out);
}

static cn_tensor *mul_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                          cn_tensor *g, int i) {
    return cn_sum_to(cn_mul(g, in[1 - i]), in[i]);
}
/* Into the sum of a factor's gradient (a weight shared by every step of a
 * loop): g * other added in place, without building the product. Not when
 * other broadcasts g (a sum over axes comes first) or off the CPU. */
static int mul_vjp_add(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *g, int i,
                       cn_tensor *acc) {
    const cn_tensor *other = in[1 - i];
    if (!cn_t_on_cpu(acc) || !cn_t_on_cpu(g) || !cn_t_on_cpu(other) || !same_shape(g, acc))
        return CN_EUNSUPPORTED;
    return cn_cpu_addmul(acc, g, other);
}
static cn_tensor *mul_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin, const cn_attrs *a,
                          cn_tensor *out) {
    cn_tensor *r0 = tin[0] ? cn_mul(tin[0], in[1]) : NULL;
    cn_tensor *r1 = tin[1] ? cn_mul(in[0], tin[1]) : NULL;
    return r0 && r1 ? cn_add(r0, r1) : r0 ? r0 : r1;
}

/* d(a/b)/db = -a/b^2 = -out/b. */
static cn_tensor *div_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                          cn_tensor *g, int i) {
    if (i == 0) return cn_sum_to(cn_div(g, in[1]), in[0]);
    return cn_neg(cn_sum_to(cn_mul(g, cn_div(out, in[1])), in[1]));
}
static cn_tensor *div_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin, const cn_attrs *a,
                          cn_tensor *out) {
    cn_tensor *r0 = tin[0] ? cn_div(tin[0], in[1]) : NULL;
    cn_tensor *r1 = NULL;
    if (tin[1]) r1 = cn_mul(tin[1], cn_div(out, in[1]));
    return r0 && r1 ? cn_sub(r0, r1) : r0 ? r0 : cn_neg(r1);
}

/* PyTorch's pow_backward_self: v b a^(b-1), and 0 wherever b == 0 (so
 * 0^0 and (-2)^0 have slope 0, where the formula would give NaN). */
static cn_tensor *pow_dbase(cn_tensor *base, cn_tensor *ex, cn_tensor *v) {
    cn_tensor *d = cn_mul(v, cn_mul(ex, cn_pow(base, cn_sub_scalar(ex, 1))));
    return cn_where(cn_eq(ex, sc(ex, 0)), sc(v, 0), d);
}
/* PyTorch's pow_backward_exponent: v a^b log(a), and 0 where a == 0 and
 * b >= 0 (log(0) would give NaN or -inf there); a < 0 gives NaN. */
static cn_tensor *pow_dexp(cn_tensor *base, cn_tensor *ex, cn_tensor *y, cn_tensor *v) {
    cn_tensor *zero_at = cn_logical_and(cn_eq(base, sc(base, 0)), cn_ge(ex, sc(ex, 0)));
    return cn_mul(v, cn_where(zero_at, sc(y, 0), cn_mul(y, cn_log(base))));
}

static cn_tensor *pow_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                          cn_tensor *g, int i) {
    if (i == 0) return cn_sum_to(pow_dbase(in[0], in[1], g), in[0]);
    return cn_sum_to(pow_dexp(in[0], in[1], out, g), in[1]);
}
static cn_tensor *pow_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin, const cn_attrs *a,
                          cn_tensor *out) {
    cn_tensor *r0 = tin[0] ? pow_dbase(in[0], in[1], tin[0]) : NULL;
    cn_tensor *r1 = NULL;
    if (tin[1]) r1 = pow_dexp(in[0], in[1], out, tin[1]);
    return to_out(r0 && r1 ? cn_add(r0, r1) : r0 ? r0 : r1, out);
}

/* maximum/minimum (PyTorch's rules): a tie gives each input half the
 * gradient; the losing input gets 0. A NaN makes neither win, so in reverse
 * mode both inputs get the whole gradient; forward mode takes b's tangent. */
static cn_tensor *minmax_vjp(bool is_max, cn_tensor *const *in, cn_tensor *g, int i) {
    cn_tensor *a = in[0], *b = in[1];
    cn_tensor *split = cn_where(cn_eq(a, b), cn_mul_scalar(g, 0.5), g);
    cn_tensor *loses = is_max == (i == 0) ? cn_lt(a, b) : cn_gt(a, b);
    return cn_sum_to(cn_where(loses, sc(g, 0), split), in[i]);
}
/* b' + w (a' - b'), w = 1/2 at ties, 1 where a wins, 0 where b wins. */
static cn_tensor *minmax_jvp(bool is_max, cn_tensor *const *in, cn_tensor *const *tin,
                             cn_tensor *out) {
    cn_tensor *a = in[0], *b = in[1];
    cn_tensor *a_wins = cn_cast(is_max ? cn_gt(a, b) : cn_lt(a, b), (cn_dtype)out->dtype);
    cn_tensor *w = cn_where(cn_eq(a, b), sc(out, 0.5), a_wins);
    if (tin[0] && tin[1]) return cn_add(tin[1], cn_mul(w, cn_sub(tin[0], tin[1])));
    if (tin[0]) return cn_mul(w, tin[0]);
    return cn_sub(tin[1], cn_mul(w, tin[1]));
}

static cn_tensor *maximum_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                              cn_tensor *g, int i) {
    return minmax_vjp(true, in, g, i);
}
static cn_tensor *maximum_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                              const cn_attrs *a, cn_tensor *out) {
    return minmax_jvp(true, in, tin, out);
}
static cn_tensor *minimum_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                              cn_tensor *g, int i) {
    return minmax_vjp(false, in, g, i);
}
static cn_tensor *minimum_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                              const cn_attrs *a, cn_tensor *out) {
    return minmax_jvp(false, in, tin, out);
}

#define MINMAX_GRAD_DOC(LOSER)                                                                     \
    "at a == b each input gets half the gradient, else the " LOSER " input gets none; a NaN "    \
    "in either passes the whole gradient to both (forward mode: b's tangent)"

#define ARITH (CN_OPF_PROMOTE | CN_OPF_ELEMENTWISE)
#define COMPARE (CN_OPF_PROMOTE | CN_OPF_ELEMENTWISE | CN_OPF_NONDIFF)
/* Logic reads every dtype's truth value itself, halves included. */
#define LOGIC (CN_OPF_ELEMENTWISE | CN_OPF_NONDIFF | CN_OPF_NO_HALF)

/* The rest of the fields (VA_ARGS) name the gradient rules and grad_doc. */
#define BINARY_OP(NAME, KIND, FLAGS, INFER, ONNX, DOC, ...)                                        \
    const cn_op_def cn_opdef_##NAME = {                                                            \
        .name = #NAME,                                                                             \
        .ninputs = 2,                                                                              \
        .promote_from = 0,                                                                         \
        .flags = (FLAGS),                                                                          \
        .infer = INFER,                                                                            \
        .onnx = ONNX,                                                                              \
        .impl = &bin_kinds[KIND],                                                                  \
        .doc = DOC,                                                                                \
        __VA_ARGS__                                                                                \
    };
#define RULES(NAME) .vjp = NAME##_vjp, .jvp = NAME##_jvp
/* Comparisons and logic: CN_OPF_NONDIFF, their outputs carry no gradient. */
#define NO_RULES .vjp = NULL, .jvp = NULL

BINARY_OP(add, CN_BIN_ADD, ARITH, arith_infer, "Add", "y = a + b (bool: a or b)", RULES(add))
BINARY_OP(sub, CN_BIN_SUB, ARITH, arith_infer, "Sub", "y = a - b", RULES(sub))
BINARY_OP(mul, CN_BIN_MUL, ARITH | CN_OPF_VJP_ADD_INTO, arith_infer, "Mul",
          "y = a * b (bool: a and b)", RULES(mul), .vjp_add = mul_vjp_add)
BINARY_OP(div, CN_BIN_DIV, ARITH | CN_OPF_FLOAT_MATH, arith_infer, "Div",
          "y = a / b, true division (integers compute in f32)", RULES(div))
BINARY_OP(pow, CN_BIN_POW, ARITH, arith_infer, "Pow",
          "y = a ^ b (integers: exact, wrapping; b >= 0)", RULES(pow),
          .grad_doc = "d/da = b a^(b-1), 0 wherever b = 0 (0^0 included); d/db = a^b log(a), "
                      "0 where a = 0 and b >= 0, -inf where a = 0 and b < 0, NaN where a < 0")
BINARY_OP(maximum, CN_BIN_MAX, ARITH, arith_infer, "Max", "y = max(a, b), NaN if either is NaN",
          RULES(maximum), .grad_doc = MINMAX_GRAD_DOC("smaller"))
BINARY_OP(minimum, CN_BIN_MIN, ARITH, arith_infer, "Min", "y = min(a, b), NaN if either is NaN",
          RULES(minimum), .grad_doc = MINMAX_GRAD_DOC("larger"))
BINARY_OP(eq, CN_BIN_EQ, COMPARE, bool_infer, "Equal", "y = a == b", NO_RULES)
BINARY_OP(ne, CN_BIN_NE, COMPARE, bool_infer, NULL, "y = a != b", NO_RULES)
BINARY_OP(lt, CN_BIN_LT, COMPARE, bool_infer, "Less", "y = a < b", NO_RULES)
BINARY_OP(le, CN_BIN_LE, COMPARE, bool_infer, "LessOrEqual", "y = a <= b", NO_RULES)
BINARY_OP(gt, CN_BIN_GT, COMPARE, bool_infer, "Greater", "y = a > b", NO_RULES)
BINARY_OP(ge, CN_BIN_GE, COMPARE, bool_infer, "GreaterOrEqual", "y = a >= b", NO_RULES)
BINARY_OP(logical_and, CN_BIN_AND, LOGIC, bool_infer, "And", "y = (a != 0) and (b != 0)", NO_RULES)
BINARY_OP(logical_or, CN_BIN_OR, LOGIC, bool_infer, "Or", "y = (a != 0) or (b != 0)", NO_RULES)
BINARY_OP(logical_xor, CN_BIN_XOR, LOGIC, bool_infer, "Xor", "y = (a != 0) xor (b != 0)", NO_RULES)

/* ---- where(cond, a, b): cond of any dtype, a and b promoted ---- */

static int where_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                       cn_meta *m) {
    (void)nin;
    (void)a;
    if (cn_broadcast_shapes(op->name, in, 3, m) < 0) return CN_EINVAL;
    m->dtype = cn_result_type(in[1], in[2]);
    return CN_OK;
}

/* cond carries no gradient (a zero one if it is a float that asks for one);
 * each branch gets the gradient where it was selected, 0 elsewhere, by a
 * select so that an infinite gradient does not leak into the other branch. */
static cn_tensor *where_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                            cn_tensor *g, int i) {
    if (i == 0) return cn_zeros_like_op(in[0]);
    cn_tensor *z = sc(g, 0);
    return cn_sum_to(i == 1 ? cn_where(in[0], g, z) : cn_where(in[0], z, g), in[i]);
}
static cn_tensor *where_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                            const cn_attrs *a, cn_tensor *out) {
    if (!tin[1] && !tin[2]) return cn_zeros_like_op(out);
    cn_tensor *t1 = tin[1] ? tin[1] : sc(out, 0), *t2 = tin[2] ? tin[2] : sc(out, 0);
    return to_out(cn_where(in[0], t1, t2), out);
}

const cn_op_def cn_opdef_where = {
    .name = "where",
    .ninputs = 3,
    .promote_from = 1,
    /* A select moves bits, so halves need no widening. */
    .flags = CN_OPF_PROMOTE | CN_OPF_ELEMENTWISE | CN_OPF_NO_HALF,
    .infer = where_infer,
    .vjp = where_vjp,
    .jvp = where_jvp,
    .onnx = "Where",
    .doc = "y = cond != 0 ? a : b",
    .grad_doc = "none for cond; a gets the gradient where cond != 0, b where cond == 0",
};

/* ---- public functions ---- */

static cn_tensor *apply2(cn_op_id id, cn_tensor *a, cn_tensor *b) {
    cn_tensor *in[2] = {a, b};
    return cn_op_apply(id, in, 2, NULL);
}

cn_tensor *cn_add(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_add, a, b); }
cn_tensor *cn_sub(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_sub, a, b); }
cn_tensor *cn_mul(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_mul, a, b); }
cn_tensor *cn_div(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_div, a, b); }
cn_tensor *cn_pow(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_pow, a, b); }
cn_tensor *cn_maximum(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_maximum, a, b); }
cn_tensor *cn_minimum(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_minimum, a, b); }
cn_tensor *cn_eq(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_eq, a, b); }
cn_tensor *cn_ne(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_ne, a, b); }
cn_tensor *cn_lt(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_lt, a, b); }
cn_tensor *cn_le(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_le, a, b); }
cn_tensor *cn_gt(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_gt, a, b); }
cn_tensor *cn_ge(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_ge, a, b); }
cn_tensor *cn_logical_and(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_logical_and, a, b); }
cn_tensor *cn_logical_or(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_logical_or, a, b); }
cn_tensor *cn_logical_xor(cn_tensor *a, cn_tensor *b) { return apply2(CN_OP_logical_xor, a, b); }

cn_tensor *cn_where(cn_tensor *cond, cn_tensor *a, cn_tensor *b) {
    cn_tensor *in[3] = {cond, a, b};
    return cn_op_apply(CN_OP_where, in, 3, NULL);
}

static bool is_integral(double s) { return isfinite(s) && s == floor(s); }

/* The rank-0 tensor standing for a Python scalar next to x: rank 0 only
 * raises the category, so x's dtype survives unless s is a float and x is
 * not. Halves get an f32 scalar: the op computes them in f32 anyway, and s
 * is not rounded to half first. */
static cn_tensor *scalar_like(const cn_tensor *x, double s) {
    cn_dtype xd = (cn_dtype)x->dtype, dt;
    if (cn_dtype_is_float(xd))
        dt = cn_is_half(xd) ? CN_F32 : xd;
    else if (!is_integral(s))
        dt = CN_F32;
    else
        dt = xd == CN_BOOL ? CN_I64 : xd;
    return cn_t_scalar(dt, s);
}

static cn_tensor *apply_scalar(cn_op_id id, cn_tensor *x, double s, bool scalar_first) {
    if (!x) return NULL;
    cn_tensor *c = scalar_like(x, s);
    if (!c) return NULL;
    cn_tensor *r = scalar_first ? apply2(id, c, x) : apply2(id, x, c);
    cn_release(c);
    return r;
}

cn_tensor *cn_add_scalar(cn_tensor *x, double s) { return apply_scalar(CN_OP_add, x, s, false); }
cn_tensor *cn_sub_scalar(cn_tensor *x, double s) { return apply_scalar(CN_OP_sub, x, s, false); }
cn_tensor *cn_rsub_scalar(cn_tensor *x, double s) { return apply_scalar(CN_OP_sub, x, s, true); }
cn_tensor *cn_mul_scalar(cn_tensor *x, double s) { return apply_scalar(CN_OP_mul, x, s, false); }
cn_tensor *cn_div_scalar(cn_tensor *x, double s) { return apply_scalar(CN_OP_div, x, s, false); }

cn_tensor *cn_pow_scalar(cn_tensor *x, double s) {
    /* Checked here too: stored in u8, -1 would become 255. */
    if (x && cn_is_int_dtype((cn_dtype)x->dtype) && is_integral(s) && s < 0) {
        char b[160];
        return cn_fail("pow: integers to negative integer powers are not allowed (%s ^ %g)",
                       cn_shape_str(x, b, sizeof b), s);
    }
    return apply_scalar(CN_OP_pow, x, s, false);
}
