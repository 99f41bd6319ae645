/* Binary elementwise ops: arithmetic, comparisons, logic and where, with
 * NumPy broadcasting and PyTorch type promotion (done by the dispatcher), and
 * the forms with a Python-like scalar. */
#include "op.h"

#include "../backend/cpu/binary.h"

#include <math.h>

/* op->impl of each op points at its kind here, so one kernel serves all. */
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

static int binary_kernel(const cn_op_def *op, cn_tensor *const *in, int nin, const cn_attrs *a,
                         cn_tensor *out) {
    (void)nin;
    (void)a;
    return cn_cpu_binary(op->name, kind_of(op), out, in[0], in[1]);
}

#define ARITH (CN_OPF_PROMOTE | CN_OPF_ELEMENTWISE)
#define COMPARE (CN_OPF_PROMOTE | CN_OPF_ELEMENTWISE | CN_OPF_NONDIFF)
/* Logic reads every dtype's truth value itself, halves included. */
#define LOGIC (CN_OPF_ELEMENTWISE | CN_OPF_NONDIFF | CN_OPF_NO_HALF)

#define BINARY_OP(NAME, KIND, FLAGS, INFER, ONNX, DOC)                                             \
    const cn_op_def cn_opdef_##NAME = {                                                            \
        .name = #NAME,                                                                             \
        .ninputs = 2,                                                                              \
        .promote_from = 0,                                                                         \
        .flags = (FLAGS),                                                                          \
        .infer = INFER,                                                                            \
        .cpu = binary_kernel,                                                                      \
        .onnx = ONNX,                                                                              \
        .impl = &bin_kinds[KIND],                                                                  \
        .doc = DOC,                                                                                \
    };

BINARY_OP(add, CN_BIN_ADD, ARITH, arith_infer, "Add", "y = a + b (bool: a or b)")
BINARY_OP(sub, CN_BIN_SUB, ARITH, arith_infer, "Sub", "y = a - b")
BINARY_OP(mul, CN_BIN_MUL, ARITH, arith_infer, "Mul", "y = a * b (bool: a and b)")
BINARY_OP(div, CN_BIN_DIV, ARITH | CN_OPF_FLOAT_MATH, arith_infer, "Div",
          "y = a / b, true division (integers compute in f32)")
BINARY_OP(pow, CN_BIN_POW, ARITH, arith_infer, "Pow",
          "y = a ^ b (integers: exact, wrapping; b >= 0)")
BINARY_OP(maximum, CN_BIN_MAX, ARITH, arith_infer, "Max", "y = max(a, b), NaN if either is NaN")
BINARY_OP(minimum, CN_BIN_MIN, ARITH, arith_infer, "Min", "y = min(a, b), NaN if either is NaN")
BINARY_OP(eq, CN_BIN_EQ, COMPARE, bool_infer, "Equal", "y = a == b")
BINARY_OP(ne, CN_BIN_NE, COMPARE, bool_infer, NULL, "y = a != b")
BINARY_OP(lt, CN_BIN_LT, COMPARE, bool_infer, "Less", "y = a < b")
BINARY_OP(le, CN_BIN_LE, COMPARE, bool_infer, "LessOrEqual", "y = a <= b")
BINARY_OP(gt, CN_BIN_GT, COMPARE, bool_infer, "Greater", "y = a > b")
BINARY_OP(ge, CN_BIN_GE, COMPARE, bool_infer, "GreaterOrEqual", "y = a >= b")
BINARY_OP(logical_and, CN_BIN_AND, LOGIC, bool_infer, "And", "y = (a != 0) and (b != 0)")
BINARY_OP(logical_or, CN_BIN_OR, LOGIC, bool_infer, "Or", "y = (a != 0) or (b != 0)")
BINARY_OP(logical_xor, CN_BIN_XOR, LOGIC, bool_infer, "Xor", "y = (a != 0) xor (b != 0)")

/* ---- where(cond, a, b): cond of any dtype, a and b promoted ---- */

static int where_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                       cn_meta *m) {
    (void)nin;
    (void)a;
    if (cn_broadcast_shapes(op->name, in, 3, m) < 0) return CN_EINVAL;
    m->dtype = cn_result_type(in[1], in[2]);
    return CN_OK;
}

static int where_kernel(const cn_op_def *op, cn_tensor *const *in, int nin, const cn_attrs *a,
                        cn_tensor *out) {
    (void)op;
    (void)nin;
    (void)a;
    return cn_cpu_where(out, in[0], in[1], in[2]);
}

const cn_op_def cn_opdef_where = {
    .name = "where",
    .ninputs = 3,
    .promote_from = 1,
    /* A select moves bits, so halves need no widening. */
    .flags = CN_OPF_PROMOTE | CN_OPF_ELEMENTWISE | CN_OPF_NO_HALF,
    .infer = where_infer,
    .cpu = where_kernel,
    .onnx = "Where",
    .doc = "y = cond != 0 ? a : b",
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
