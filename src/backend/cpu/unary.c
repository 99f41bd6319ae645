/* The unary elementwise kernels. Every (op, dtype) pair has its own row
 * function, generated from a one-element expression: a unit-stride loop the
 * compiler vectorises (the f32 math is vmath.h's branch-free code; f64 calls
 * libm) and a strided loop for every other layout. The iterator merges axes
 * and splits large tensors over the thread pool; each element's result
 * depends only on that element, so any split gives the same bits. */
#include "unary.h"

#include "kernels.h"

#include "elem_math.h"
#include "iter.h"

#include <math.h>
#include <stdint.h>

typedef struct un_params {
    float f0, f1;   /* p0, p1 for f32 rows */
    double d0, d1;  /* p0, p1 for f64 and integer rows */
    int64_t lo, hi; /* clamp bounds of integer rows */
} un_params;

/* Row function NAME: y = EXPR for each element v (TI in, TO out), with the
 * parameters in P. */
#define UN_ROW(NAME, TI, TO, EXPR)                                                                 \
    CN_HOT_FN(NAME, (void *ctx, int64_t n, char **ptr, const int64_t *st), (ctx, n, ptr, st)) {   \
        const un_params P = *(const un_params *)ctx;                                               \
        (void)P;                                                                                   \
        TO *restrict y = (TO *)ptr[0];                                                             \
        const TI *restrict x = (const TI *)ptr[1];                                                 \
        if (st[0] == 1 && st[1] == 1) {                                                            \
            for (int64_t i = 0; i < n; i++) {                                                      \
                TI v = x[i];                                                                       \
                y[i] = (EXPR);                                                                     \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                      \
                TI v = x[i * st[1]];                                                               \
                y[i * st[0]] = (EXPR);                                                             \
            }                                                                                      \
        }                                                                                          \
    }

#define UN_FLOAT(NAME, E32, E64)                                                                   \
    UN_ROW(NAME##_f32, float, float, E32)                                                          \
    UN_ROW(NAME##_f64, double, double, E64)

#define UN_SIGNED(NAME, E32, E64)                                                                  \
    UN_ROW(NAME##_i32, int32_t, int32_t, E32)                                                      \
    UN_ROW(NAME##_i64, int64_t, int64_t, E64)

#define UN_INT(NAME, E32, E64, EU8)                                                                \
    UN_SIGNED(NAME, E32, E64)                                                                      \
    UN_ROW(NAME##_u8, uint8_t, uint8_t, EU8)

/* x * slope truncated toward zero, saturated to [lo, hi] (NaN gives 0). */
static inline int64_t un_trunc_sat(double x, int64_t lo, int64_t hi) {
    if (x != x) return 0;
    if (x <= (double)lo) return lo;
    if (x >= (double)hi) return hi; /* (double)INT64_MAX rounds up: compare first */
    return (int64_t)x;
}

/* ---- float and integer rows ---- */

UN_FLOAT(neg, -v, -v)
UN_INT(neg, (int32_t)(0u - (uint32_t)v), (int64_t)(0u - (uint64_t)v), (uint8_t)(0u - v))

UN_FLOAT(abs, fabsf(v), fabs(v))
UN_SIGNED(abs, v < 0 ? (int32_t)(0u - (uint32_t)v) : v, v < 0 ? (int64_t)(0u - (uint64_t)v) : v)

/* sign(+-0) = +0 and sign(NaN) = NaN */
UN_FLOAT(sign, cn_vsel(v != v, v, (float)((v > 0) - (v < 0))),
         cn_vseld(v != v, v, (double)((v > 0) - (v < 0))))
UN_INT(sign, (int32_t)((v > 0) - (v < 0)), (int64_t)((v > 0) - (v < 0)), (uint8_t)(v > 0))

UN_FLOAT(square, v * v, v * v)
UN_INT(square, (int32_t)((uint32_t)v * (uint32_t)v), (int64_t)((uint64_t)v * (uint64_t)v),
       (uint8_t)(v * v))

UN_FLOAT(relu, cn_vsel(v < 0.0f, 0.0f, v), cn_vseld(v < 0.0, 0.0, v)) /* NaN, -0 pass */
UN_SIGNED(relu, v < 0 ? 0 : v, v < 0 ? 0 : v)

UN_FLOAT(leaky_relu, cn_vsel(v > 0.0f, v, v * P.f0), cn_vseld(v > 0.0, v, v * P.d0))
UN_SIGNED(leaky_relu, v > 0 ? v : (int32_t)un_trunc_sat(v * P.d0, INT32_MIN, INT32_MAX),
          v > 0 ? v : un_trunc_sat((double)v * P.d0, INT64_MIN, INT64_MAX))

static inline int64_t un_clampi(int64_t v, int64_t lo, int64_t hi) {
    int64_t y = v < lo ? lo : v;
    return y > hi ? hi : y;
}
UN_FLOAT(clamp, un_clampf(v, P.f0, P.f1), un_clamp(v, P.d0, P.d1))
UN_INT(clamp, (int32_t)un_clampi(v, P.lo, P.hi), un_clampi(v, P.lo, P.hi),
       (uint8_t)un_clampi(v, P.lo, P.hi))

/* floor, ceil and round are the identity on integers (a copy, see below). */
UN_FLOAT(floor, cn_vfloorf(v), cn_vfloor(v))
UN_FLOAT(ceil, cn_vceilf(v), cn_vceil(v))
UN_FLOAT(round, cn_vroundf(v), cn_vround(v))

/* ---- float-only rows (integer inputs arrive as f32) ---- */

UN_FLOAT(exp, cn_vexpf(v), exp(v))
UN_FLOAT(log, cn_vlogf(v), log(v))
UN_FLOAT(log1p, cn_vlog1pf(v), log1p(v))
UN_FLOAT(expm1, cn_vexpm1f(v), expm1(v))
/* sqrtf: GCC will not vectorise it with errno on, but the instruction is
 * inlined and libm is only called for negative inputs. */
UN_FLOAT(sqrt, sqrtf(v), sqrt(v))
UN_FLOAT(rsqrt, cn_vrsqrtf(v), 1.0 / sqrt(v))
UN_FLOAT(reciprocal, 1.0f / v, 1.0 / v)
UN_FLOAT(sin, sinf(v), sin(v))
UN_FLOAT(cos, cosf(v), cos(v))
UN_FLOAT(tanh, cn_vtanhf(v), tanh(v))
UN_FLOAT(sigmoid, cn_vsigmoidf(v), un_sigmoid(v))
UN_FLOAT(elu, cn_veluf(v, P.f0), un_elu(v, P.d0))
UN_FLOAT(gelu, cn_vgeluf(v), un_gelu(v))
UN_FLOAT(gelu_tanh, cn_vgelu_tanhf(v), un_gelu_tanh(v))
UN_FLOAT(silu, cn_vsiluf(v), un_silu(v))
UN_FLOAT(softplus, cn_vsoftplusf(v, P.f0, P.f1), un_softplus(v, P.d0, P.d1))
UN_FLOAT(erf, cn_verff(v), erf(v))

/* ---- logical_not: any dtype in, bool out ---- */

UN_ROW(not_f32, float, uint8_t, (uint8_t)(v == 0.0f))
UN_ROW(not_f64, double, uint8_t, (uint8_t)(v == 0.0))
UN_ROW(not_half, uint16_t, uint8_t, (uint8_t)((v & 0x7fffu) == 0)) /* f16 and bf16: +-0 */
UN_ROW(not_i32, int32_t, uint8_t, (uint8_t)(v == 0))
UN_ROW(not_i64, int64_t, uint8_t, (uint8_t)(v == 0))
UN_ROW(not_u8, uint8_t, uint8_t, (uint8_t)(v == 0)) /* u8 and bool */

/* ---- dispatch ---- */

static cn_row_fn pick_row(cn_unary_kind k, cn_dtype dt) {
#define UN_PICK(NAME)                                                                              \
    switch (dt) {                                                                                  \
    case CN_F32: return NAME##_f32;                                                                \
    case CN_F64: return NAME##_f64;                                                                \
    default: return NULL;                                                                          \
    }
#define UN_PICK_INT(NAME)                                                                          \
    switch (dt) {                                                                                  \
    case CN_F32: return NAME##_f32;                                                                \
    case CN_F64: return NAME##_f64;                                                                \
    case CN_I32: return NAME##_i32;                                                                \
    case CN_I64: return NAME##_i64;                                                                \
    case CN_U8: return NAME##_u8;                                                                  \
    default: return NULL;                                                                          \
    }
#define UN_PICK_SIGNED(NAME)                                                                       \
    switch (dt) {                                                                                  \
    case CN_F32: return NAME##_f32;                                                                \
    case CN_F64: return NAME##_f64;                                                                \
    case CN_I32: return NAME##_i32;                                                                \
    case CN_I64: return NAME##_i64;                                                                \
    default: return NULL;                                                                          \
    }
    switch (k) {
    case CN_UN_NEG: UN_PICK_INT(neg)
    case CN_UN_ABS: UN_PICK_SIGNED(abs)
    case CN_UN_SIGN: UN_PICK_INT(sign)
    case CN_UN_SQUARE: UN_PICK_INT(square)
    case CN_UN_RELU: UN_PICK_SIGNED(relu)
    case CN_UN_LEAKY_RELU: UN_PICK_SIGNED(leaky_relu)
    case CN_UN_CLAMP: UN_PICK_INT(clamp)
    case CN_UN_FLOOR: UN_PICK(floor)
    case CN_UN_CEIL: UN_PICK(ceil)
    case CN_UN_ROUND: UN_PICK(round)
    case CN_UN_EXP: UN_PICK(exp)
    case CN_UN_LOG: UN_PICK(log)
    case CN_UN_LOG1P: UN_PICK(log1p)
    case CN_UN_EXPM1: UN_PICK(expm1)
    case CN_UN_SQRT: UN_PICK(sqrt)
    case CN_UN_RSQRT: UN_PICK(rsqrt)
    case CN_UN_RECIPROCAL: UN_PICK(reciprocal)
    case CN_UN_SIN: UN_PICK(sin)
    case CN_UN_COS: UN_PICK(cos)
    case CN_UN_TANH: UN_PICK(tanh)
    case CN_UN_SIGMOID: UN_PICK(sigmoid)
    case CN_UN_ELU: UN_PICK(elu)
    case CN_UN_GELU: UN_PICK(gelu)
    case CN_UN_GELU_TANH: UN_PICK(gelu_tanh)
    case CN_UN_SILU: UN_PICK(silu)
    case CN_UN_SOFTPLUS: UN_PICK(softplus)
    case CN_UN_ERF: UN_PICK(erf)
    case CN_UN_LOGICAL_NOT:
        switch (dt) {
        case CN_F32: return not_f32;
        case CN_F64: return not_f64;
        case CN_F16:
        case CN_BF16: return not_half;
        case CN_I32: return not_i32;
        case CN_I64: return not_i64;
        case CN_U8:
        case CN_BOOL: return not_u8;
        default: return NULL;
        }
    default: return NULL;
    }
#undef UN_PICK
#undef UN_PICK_INT
#undef UN_PICK_SIGNED
}

/* Kinds that leave every value of an integer dtype unchanged. */
static bool is_identity(cn_unary_kind k, cn_dtype dt) {
    if (!cn_is_int_dtype(dt)) return false;
    if (k == CN_UN_FLOOR || k == CN_UN_CEIL || k == CN_UN_ROUND) return true;
    return dt == CN_U8 && (k == CN_UN_ABS || k == CN_UN_RELU || k == CN_UN_LEAKY_RELU);
}

/* A clamp bound for an integer dtype of range [tmin, tmax]: the nearest
 * integer inside the interval (ceil for lo, floor for hi), saturated. */
static int64_t int_bound(double v, bool lower, int64_t tmin, int64_t tmax) {
    double r = lower ? ceil(v) : floor(v);
    if (r != r) return lower ? tmin : tmax;
    if (r <= (double)tmin) return tmin;
    if (r >= (double)tmax) return tmax;
    return (int64_t)r;
}

int cn_cpu_unary(const char *name, cn_unary_kind kind, cn_tensor *out, const cn_tensor *x,
                 double p0, double p1) {
    cn_dtype dt = (cn_dtype)x->dtype;
    if (is_identity(kind, dt)) return cn_copy_strided(out, x);
    cn_row_fn fn = pick_row(kind, dt);
    if (!fn)
        return cn_failc(CN_EUNSUPPORTED, "%s: no CPU kernel for dtype %s", name,
                        cn_dtype_name(dt));
    un_params P = {(float)p0, (float)p1, p0, p1, 0, 0};
    if (kind == CN_UN_CLAMP && cn_is_int_dtype(dt)) {
        int64_t tmin = dt == CN_I32 ? INT32_MIN : dt == CN_I64 ? INT64_MIN : 0;
        int64_t tmax = dt == CN_I32 ? INT32_MAX : dt == CN_I64 ? INT64_MAX : UINT8_MAX;
        P.lo = int_bound(p0, true, tmin, tmax);
        P.hi = int_bound(p1, false, tmin, tmax);
    }
    cn_iter it;
    cn_tensor *in = (cn_tensor *)x;
    cn_iter_init(&it, out, &in, 1);
    cn_iter_run(&it, fn, &P);
    return CN_OK;
}

/* ---- the op kernel (kernels.h) ---- */

/* The kind of each unary op (CN_UN_COUNT: not one). gelu's tanh form is
 * its approximate attribute. */
static cn_unary_kind unary_kind_of(cn_op_id id) {
    switch (id) {
    case CN_OP_neg: return CN_UN_NEG;
    case CN_OP_abs: return CN_UN_ABS;
    case CN_OP_sign: return CN_UN_SIGN;
    case CN_OP_exp: return CN_UN_EXP;
    case CN_OP_log: return CN_UN_LOG;
    case CN_OP_log1p: return CN_UN_LOG1P;
    case CN_OP_expm1: return CN_UN_EXPM1;
    case CN_OP_sqrt: return CN_UN_SQRT;
    case CN_OP_rsqrt: return CN_UN_RSQRT;
    case CN_OP_square: return CN_UN_SQUARE;
    case CN_OP_reciprocal: return CN_UN_RECIPROCAL;
    case CN_OP_sin: return CN_UN_SIN;
    case CN_OP_cos: return CN_UN_COS;
    case CN_OP_tanh: return CN_UN_TANH;
    case CN_OP_sigmoid: return CN_UN_SIGMOID;
    case CN_OP_relu: return CN_UN_RELU;
    case CN_OP_leaky_relu: return CN_UN_LEAKY_RELU;
    case CN_OP_elu: return CN_UN_ELU;
    case CN_OP_gelu: return CN_UN_GELU;
    case CN_OP_silu: return CN_UN_SILU;
    case CN_OP_softplus: return CN_UN_SOFTPLUS;
    case CN_OP_erf: return CN_UN_ERF;
    case CN_OP_floor: return CN_UN_FLOOR;
    case CN_OP_ceil: return CN_UN_CEIL;
    case CN_OP_round: return CN_UN_ROUND;
    case CN_OP_clamp: return CN_UN_CLAMP;
    case CN_OP_logical_not: return CN_UN_LOGICAL_NOT;
    default: return CN_UN_COUNT;
    }
}

/* Every unary op: attributes f[0] and f[1] are the kind's p0 and p1 (slope, alpha,
 * beta and threshold, lo and hi); gelu's i[0] picks the tanh form. */
int cn_cpu_k_unary(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                   cn_tensor *out) {
    (void)nin;
    cn_unary_kind k = unary_kind_of(id);
    if (k == CN_UN_COUNT)
        return cn_failc(CN_EINVAL, "%s: internal error: not a unary op", cn_op_names[id]);
    if (k == CN_UN_GELU && a->i[0]) k = CN_UN_GELU_TANH;
    return cn_cpu_unary(cn_op_names[id], k, out, in[0], a->f[0], a->f[1]);
}
