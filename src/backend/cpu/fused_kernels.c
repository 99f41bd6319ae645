/* The loops of the fused elementwise kernel. Each is one op over a block that
 * sits in L1 (a group of the fused kernel's register machine, or one element
 * of a value computed once), unit stride, so the compiler vectorises it. The
 * formulas are the unfused kernels' (unary.c, binary.c, via elem_math.h and
 * vmath.h), evaluated with the same roundings, so a fused expression gives
 * the same bits as its ops run one by one. */
#include "fused_kernels.h"

#include "elem_math.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* o[i] = EXPR of v = a[i], with the parameters in P. */
#define FK_UN(NAME, T, EXPR)                                                                       \
    CN_HOT_FN(NAME,                                                                                \
              (int64_t n, void *o_, const void *a_, const void *b_, const void *c_,                \
               const cn_fk_params *p_),                                                            \
              (n, o_, a_, b_, c_, p_)) {                                                           \
        const cn_fk_params P = *p_;                                                                \
        (void)P;                                                                                   \
        T *restrict o = (T *)o_;                                                                   \
        const T *restrict a = (const T *)a_;                                                       \
        for (int64_t i = 0; i < n; i++) {                                                          \
            const T v = a[i];                                                                      \
            o[i] = (EXPR);                                                                         \
        }                                                                                          \
    }

#define FK_UN_FLOAT(NAME, E32, E64)                                                                \
    FK_UN(NAME##_f32, float, E32)                                                                  \
    FK_UN(NAME##_f64, double, E64)

FK_UN_FLOAT(neg, -v, -v)
FK_UN_FLOAT(abs, fabsf(v), fabs(v))
FK_UN_FLOAT(sign, cn_vsel(v != v, v, (float)((v > 0) - (v < 0))),
            cn_vseld(v != v, v, (double)((v > 0) - (v < 0))))
FK_UN_FLOAT(square, v * v, v * v)
FK_UN_FLOAT(relu, cn_vsel(v < 0.0f, 0.0f, v), cn_vseld(v < 0.0, 0.0, v))
FK_UN_FLOAT(leaky_relu, cn_vsel(v > 0.0f, v, v * P.f0), cn_vseld(v > 0.0, v, v * P.d0))
FK_UN_FLOAT(clamp, un_clampf(v, P.f0, P.f1), un_clamp(v, P.d0, P.d1))
FK_UN_FLOAT(floor, cn_vfloorf(v), cn_vfloor(v))
FK_UN_FLOAT(ceil, cn_vceilf(v), cn_vceil(v))
FK_UN_FLOAT(round, cn_vroundf(v), cn_vround(v))
FK_UN_FLOAT(exp, cn_vexpf(v), exp(v))
FK_UN_FLOAT(log, cn_vlogf(v), log(v))
FK_UN_FLOAT(log1p, cn_vlog1pf(v), log1p(v))
FK_UN_FLOAT(expm1, cn_vexpm1f(v), expm1(v))
FK_UN_FLOAT(sqrt, sqrtf(v), sqrt(v))
FK_UN_FLOAT(rsqrt, cn_vrsqrtf(v), 1.0 / sqrt(v))
FK_UN_FLOAT(reciprocal, 1.0f / v, 1.0 / v)
FK_UN_FLOAT(sin, sinf(v), sin(v))
FK_UN_FLOAT(cos, cosf(v), cos(v))
FK_UN_FLOAT(tanh, cn_vtanhf(v), tanh(v))
FK_UN_FLOAT(sigmoid, cn_vsigmoidf(v), un_sigmoid(v))
FK_UN_FLOAT(elu, cn_veluf(v, P.f0), un_elu(v, P.d0))
FK_UN_FLOAT(gelu, cn_vgeluf(v), un_gelu(v))
FK_UN_FLOAT(gelu_tanh, cn_vgelu_tanhf(v), un_gelu_tanh(v))
FK_UN_FLOAT(silu, cn_vsiluf(v), un_silu(v))
FK_UN_FLOAT(softplus, cn_vsoftplusf(v, P.f0, P.f1), un_softplus(v, P.d0, P.d1))
FK_UN_FLOAT(erf, cn_verff(v), erf(v))
FK_UN_FLOAT(not, (float)(v == 0.0f), (double)(v == 0.0))
FK_UN_FLOAT(copy, v, v)
FK_UN_FLOAT(truth, (float)(v != 0.0f), (double)(v != 0.0))
/* pow's shortcuts for a scalar exponent (binary.c's pow2, powm1, powh, pow1,
 * pow0 rows). */
FK_UN_FLOAT(pow2, v * v, v * v)
FK_UN_FLOAT(powm1, 1.0f / v, 1.0 / v)
FK_UN_FLOAT(powh, v == -INFINITY ? INFINITY : sqrtf(v) + 0.0f,
            v == -INFINITY ? INFINITY : sqrt(v) + 0.0)
FK_UN_FLOAT(pow0, ((void)v, 1.0f), ((void)v, 1.0))

/* o[i] = EXPR of a = x[i], b = y[i]. */
#define FK_BIN(NAME, T, EXPR)                                                                      \
    CN_HOT_FN(NAME,                                                                                \
              (int64_t n, void *o_, const void *a_, const void *b_, const void *c_,                \
               const cn_fk_params *p_),                                                            \
              (n, o_, a_, b_, c_, p_)) {                                                           \
        T *restrict o = (T *)o_;                                                                   \
        const T *restrict x = (const T *)a_, *restrict y = (const T *)b_;                          \
        for (int64_t i = 0; i < n; i++) {                                                          \
            const T a = x[i], b = y[i];                                                            \
            o[i] = (T)(EXPR);                                                                      \
        }                                                                                          \
    }

#define FK_BIN_FLOAT(NAME, EXPR)                                                              \
    FK_BIN(NAME##_f32, float, EXPR(float, powf))                                                   \
    FK_BIN(NAME##_f64, double, EXPR(double, pow))

#define E_ADD(T, P) a + b
#define E_SUB(T, P) a - b
#define E_MUL(T, P) a * b
#define E_DIV(T, P) a / b
#define E_POW(T, P) P(a, b)
#define E_MAX(T, P) FMAX(a, b)
#define E_MIN(T, P) FMIN(a, b)
#define E_EQ(T, P) a == b
#define E_NE(T, P) a != b
#define E_LT(T, P) a < b
#define E_LE(T, P) a <= b
#define E_GT(T, P) a > b
#define E_GE(T, P) a >= b
#define E_AND(T, P) (a != 0) & (b != 0)
#define E_OR(T, P) (a != 0) | (b != 0)
#define E_XOR(T, P) (a != 0) ^ (b != 0)

FK_BIN_FLOAT(add, E_ADD)
FK_BIN_FLOAT(sub, E_SUB)
FK_BIN_FLOAT(mul, E_MUL)
FK_BIN_FLOAT(div, E_DIV)
FK_BIN_FLOAT(pow, E_POW)
FK_BIN_FLOAT(max, E_MAX)
FK_BIN_FLOAT(min, E_MIN)
FK_BIN_FLOAT(eq, E_EQ)
FK_BIN_FLOAT(ne, E_NE)
FK_BIN_FLOAT(lt, E_LT)
FK_BIN_FLOAT(le, E_LE)
FK_BIN_FLOAT(gt, E_GT)
FK_BIN_FLOAT(ge, E_GE)
FK_BIN_FLOAT(and, E_AND)
FK_BIN_FLOAT(or, E_OR)
FK_BIN_FLOAT(xor, E_XOR)

/* where: a the condition, b the true and c the false branch. A bitwise
 * select, like the unfused kernel's typed copy: NaN payloads and signed
 * zeros pass unchanged. */
#define FK_WHERE(NAME, T, SEL)                                                                     \
    CN_HOT_FN(NAME,                                                                                \
              (int64_t n, void *o_, const void *a_, const void *b_, const void *c_,                \
               const cn_fk_params *p_),                                                            \
              (n, o_, a_, b_, c_, p_)) {                                                           \
        T *restrict o = (T *)o_;                                                                   \
        const T *restrict t = (const T *)a_, *restrict x = (const T *)b_,                          \
                          *restrict y = (const T *)c_;                                             \
        for (int64_t i = 0; i < n; i++) o[i] = SEL(t[i] != 0, x[i], y[i]);                         \
    }

FK_WHERE(where_f32, float, cn_vsel)
FK_WHERE(where_f64, double, cn_vseld)

/* ---- pickers ---- */

#define PICK(NAME) return dt == CN_F32 ? NAME##_f32 : NAME##_f64

cn_fk_fn cn_fk_unary(cn_unary_kind kind, cn_dtype dt) {
    if (dt != CN_F32 && dt != CN_F64) return NULL;
    switch (kind) {
    case CN_UN_NEG: PICK(neg);
    case CN_UN_ABS: PICK(abs);
    case CN_UN_SIGN: PICK(sign);
    case CN_UN_EXP: PICK(exp);
    case CN_UN_LOG: PICK(log);
    case CN_UN_LOG1P: PICK(log1p);
    case CN_UN_EXPM1: PICK(expm1);
    case CN_UN_SQRT: PICK(sqrt);
    case CN_UN_RSQRT: PICK(rsqrt);
    case CN_UN_SQUARE: PICK(square);
    case CN_UN_RECIPROCAL: PICK(reciprocal);
    case CN_UN_SIN: PICK(sin);
    case CN_UN_COS: PICK(cos);
    case CN_UN_TANH: PICK(tanh);
    case CN_UN_SIGMOID: PICK(sigmoid);
    case CN_UN_RELU: PICK(relu);
    case CN_UN_LEAKY_RELU: PICK(leaky_relu);
    case CN_UN_ELU: PICK(elu);
    case CN_UN_GELU: PICK(gelu);
    case CN_UN_GELU_TANH: PICK(gelu_tanh);
    case CN_UN_SILU: PICK(silu);
    case CN_UN_SOFTPLUS: PICK(softplus);
    case CN_UN_ERF: PICK(erf);
    case CN_UN_FLOOR: PICK(floor);
    case CN_UN_CEIL: PICK(ceil);
    case CN_UN_ROUND: PICK(round);
    case CN_UN_CLAMP: PICK(clamp);
    case CN_UN_LOGICAL_NOT: PICK(not);
    default: return NULL;
    }
}

cn_fk_fn cn_fk_binary(cn_binary_kind kind, cn_dtype dt) {
    if (dt != CN_F32 && dt != CN_F64) return NULL;
    switch (kind) {
    case CN_BIN_ADD: PICK(add);
    case CN_BIN_SUB: PICK(sub);
    case CN_BIN_MUL: PICK(mul);
    case CN_BIN_DIV: PICK(div);
    case CN_BIN_POW: PICK(pow);
    case CN_BIN_MAX: PICK(max);
    case CN_BIN_MIN: PICK(min);
    case CN_BIN_EQ: PICK(eq);
    case CN_BIN_NE: PICK(ne);
    case CN_BIN_LT: PICK(lt);
    case CN_BIN_LE: PICK(le);
    case CN_BIN_GT: PICK(gt);
    case CN_BIN_GE: PICK(ge);
    case CN_BIN_AND: PICK(and);
    case CN_BIN_OR: PICK(or);
    case CN_BIN_XOR: PICK(xor);
    default: return NULL;
    }
}

cn_fk_fn cn_fk_pow_scalar(cn_dtype dt, double e) {
    if (dt != CN_F32 && dt != CN_F64) return NULL;
    if (e == 2) PICK(pow2);
    if (e == 1) PICK(copy);
    if (e == 0) PICK(pow0);
    if (e == -1) PICK(powm1);
    if (e == 0.5) PICK(powh);
    return NULL;
}

cn_fk_fn cn_fk_where(cn_dtype dt) {
    if (dt != CN_F32 && dt != CN_F64) return NULL;
    PICK(where);
}

cn_fk_fn cn_fk_copy(cn_dtype dt) {
    if (dt != CN_F32 && dt != CN_F64) return NULL;
    PICK(copy);
}

cn_fk_fn cn_fk_truth(cn_dtype dt) {
    if (dt != CN_F32 && dt != CN_F64) return NULL;
    PICK(truth);
}
