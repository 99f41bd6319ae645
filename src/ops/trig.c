/* The trigonometric and hyperbolic functions beyond sin, cos and tanh,
 * composed of ops (so they have gradients, second order included, and run
 * in programs on any device): ONNX's Tan, Asin, ..., Atanh and PyTorch's
 * functions of the same names.
 *
 * atan reduces |x| as Cephes' atanf does (above tan(3 pi / 8) through
 * -1/|x|, above tan(pi / 8) through (|x| - 1) / (|x| + 1)) to an odd
 * polynomial on |u| <= tan(pi / 8): float accuracy. The branches not taken
 * are given safe arguments, so that no infinity reaches a gradient through
 * a where. */
#include "op.h"

#include <math.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#ifndef M_LN2
#define M_LN2 0.69314718055994530942
#endif

/* A rank-0 constant of x's dtype (NULL after an error upstream). */
static cn_tensor *sc(const cn_tensor *x, double v) {
    return x ? cn_scalar((cn_dtype)x->dtype, v) : NULL;
}

/* Integer and bool inputs are computed in f32, as PyTorch's are. */
static cn_tensor *flt(cn_tensor *x) {
    return x && !cn_dtype_is_float((cn_dtype)x->dtype) ? cn_cast(x, CN_F32) : x;
}

static cn_tensor *tan_of(cn_tensor *x) {
    x = flt(x);
    return cn_div(cn_sin(x), cn_cos(x));
}

/* An odd function from its values on x >= 0: f(x) there, -f(-x) below 0,
 * each branch given a safe argument (0) where it is not taken. Not
 * f(|x|) * sign(x): |x| has no slope at 0, and these functions do. */
static cn_tensor *odd(cn_tensor *x, cn_tensor *(*f)(cn_tensor *)) {
    if (!x) return NULL;
    cn_tensor *zero = sc(x, 0), *neg = cn_lt(x, zero);
    cn_tensor *pos = f(cn_where(neg, zero, x));
    return cn_where(neg, cn_neg(f(cn_where(neg, cn_neg(x), zero))), pos);
}

static cn_tensor *atan_nonneg(cn_tensor *a) {
    cn_tensor *one = sc(a, 1);
    cn_tensor *big = cn_gt(a, sc(a, 2.414213562373095)), *mid = cn_gt(a, sc(a, 0.4142135623730950));
    cn_tensor *u_big = cn_neg(cn_reciprocal(cn_where(big, a, one)));
    cn_tensor *u_mid = cn_div(cn_sub(a, one), cn_add(a, one));
    cn_tensor *u = cn_where(big, u_big, cn_where(mid, u_mid, a));
    cn_tensor *y0 = cn_where(big, sc(a, M_PI / 2), cn_where(mid, sc(a, M_PI / 4), sc(a, 0)));
    cn_tensor *z = cn_mul(u, u);
    cn_tensor *p = cn_add_scalar(cn_mul_scalar(z, 8.05374449538e-2), -1.38776856032e-1);
    p = cn_add_scalar(cn_mul(p, z), 1.99777106478e-1);
    p = cn_add_scalar(cn_mul(p, z), -3.33329491539e-1);
    return cn_add(y0, cn_add(cn_mul(cn_mul(p, z), u), u));
}

static cn_tensor *atan_of(cn_tensor *x) { return odd(flt(x), atan_nonneg); }

/* asin x = atan(x / sqrt(1 - x^2)); acos x = 2 atan(sqrt((1 - x) / (1 + x))),
 * which keeps its precision near 1. */
static cn_tensor *asin_of(cn_tensor *x) {
    x = flt(x);
    return atan_of(cn_div(x, cn_sqrt(cn_add_scalar(cn_neg(cn_mul(x, x)), 1))));
}

static cn_tensor *acos_of(cn_tensor *x) {
    x = flt(x);
    return cn_mul_scalar(atan_of(cn_sqrt(cn_div(cn_add_scalar(cn_neg(x), 1), cn_add_scalar(x, 1)))),
                         2);
}

/* atan2(y, x): atan(y / x) moved to the quadrant of (x, y); x = 0 gives
 * +-pi/2 (and 0 at the origin, as C's atan2). */
static cn_tensor *atan2_of(cn_tensor *y, cn_tensor *x) {
    y = flt(y);
    x = flt(x);
    if (!y || !x) return NULL;
    /* atan(y / x) in x's half-plane where |y| <= |x|, else pi/2 sign(y) -
     * atan(x / y): neither divides by zero away from the origin, and the
     * slopes at x = 0 are those of atan2 (not of a constant). */
    cn_tensor *zero = sc(x, 0), *one = sc(x, 1);
    cn_tensor *swap = cn_gt(cn_abs(y), cn_abs(x));
    cn_tensor *xs = cn_where(swap, one, x), *ys = cn_where(swap, y, one);
    cn_tensor *near_x = atan_of(cn_div(y, cn_where(cn_eq(xs, zero), one, xs)));
    cn_tensor *shift = cn_where(cn_ge(y, zero), sc(x, M_PI), sc(x, -M_PI));
    near_x = cn_where(cn_lt(x, zero), cn_add(near_x, shift), near_x);
    cn_tensor *near_y = cn_sub(cn_mul(cn_sign(ys), sc(x, M_PI / 2)), atan_of(cn_div(x, ys)));
    return cn_where(swap, near_y, near_x);
}

/* asinh x = log1p(x + x^2 / (1 + sqrt(x^2 + 1))) for x >= 0, odd; acosh x =
 * log1p(t + sqrt(t (t + 2))) with t = x - 1; atanh x = (log1p(x) -
 * log1p(-x)) / 2. Past 1 / sqrt(epsilon) of the dtype, x^2 would overflow
 * long before the result does, and log|x| + log 2 is exact to rounding
 * there. */
static cn_tensor *large(cn_tensor *x, cn_tensor **small_arg, cn_tensor **big_val) {
    *small_arg = *big_val = NULL;
    if (!x) return NULL;
    cn_dtype dt = (cn_dtype)x->dtype;
    double t = dt == CN_F64 ? 0x1p26 : dt == CN_F32 ? 0x1p12 : dt == CN_F16 ? 32 : 16;
    cn_tensor *one = sc(x, 1);
    cn_tensor *big = cn_gt(x, sc(x, t));
    *small_arg = cn_where(big, one, x);
    *big_val = cn_add_scalar(cn_log(cn_where(big, x, one)), M_LN2);
    return big;
}

static cn_tensor *asinh_nonneg(cn_tensor *x) {
    cn_tensor *xs, *bv, *big = large(x, &xs, &bv);
    cn_tensor *x2 = cn_mul(xs, xs);
    cn_tensor *r = cn_log1p(cn_add(xs, cn_div(x2, cn_add_scalar(cn_sqrt(cn_add_scalar(x2, 1)), 1))));
    return cn_where(big, bv, r);
}

static cn_tensor *asinh_of(cn_tensor *x) { return odd(flt(x), asinh_nonneg); }

static cn_tensor *acosh_of(cn_tensor *x) {
    x = flt(x);
    if (!x) return NULL;
    cn_tensor *xs, *bv, *big = large(x, &xs, &bv);
    cn_tensor *t = cn_add_scalar(xs, -1); /* exact near 1, where x^2 - 1 cancels */
    cn_tensor *r = cn_where(big, bv, cn_log1p(cn_add(t, cn_sqrt(cn_mul(t, cn_add_scalar(t, 2))))));
    /* below 1 it is not defined (t (t + 2) may overflow to +inf there) */
    return cn_where(cn_lt(x, sc(x, 1)), sc(x, NAN), r);
}

static cn_tensor *atanh_of(cn_tensor *x) {
    x = flt(x);
    return cn_mul_scalar(cn_sub(cn_log1p(x), cn_log1p(cn_neg(x))), 0.5);
}

/* sinh x = (expm1(x) - expm1(-x)) / 2 (no cancellation near 0), cosh x =
 * 1 + 2 sinh(x/2)^2; past |x| = 20, e^-|x| is below rounding and
 * e^(|x| - ln 2) does not overflow before the result does. */
static cn_tensor *big_half_exp(cn_tensor *x, cn_tensor **big) {
    cn_tensor *a = cn_abs(x);
    *big = cn_gt(a, sc(x, 20));
    return cn_exp(cn_add_scalar(cn_where(*big, a, sc(x, 20)), -M_LN2));
}

static cn_tensor *sinh_of(cn_tensor *x) {
    x = flt(x);
    if (!x) return NULL;
    cn_tensor *big, *far = big_half_exp(x, &big);
    cn_tensor *xs = cn_where(big, sc(x, 0), x);
    cn_tensor *near = cn_mul_scalar(cn_sub(cn_expm1(xs), cn_expm1(cn_neg(xs))), 0.5);
    return cn_where(big, cn_mul(cn_sign(x), far), near);
}

static cn_tensor *cosh_of(cn_tensor *x) {
    x = flt(x);
    if (!x) return NULL;
    cn_tensor *big, *far = big_half_exp(x, &big);
    cn_tensor *s = sinh_of(cn_mul_scalar(cn_where(big, sc(x, 0), x), 0.5));
    return cn_where(big, far, cn_add_scalar(cn_mul_scalar(cn_mul(s, s), 2), 1));
}

/* The public functions: each in a scope of its own, so that its
 * intermediates go when it returns (also when called outside every scope). */
#define PUBLIC1(NAME)                                                                              \
    cn_tensor *cn_##NAME(cn_tensor *x) {                                                           \
        cn_scope_begin();                                                                          \
        cn_tensor *r = cn_keep(NAME##_of(x));                                                      \
        cn_scope_end();                                                                            \
        return r;                                                                                  \
    }
PUBLIC1(tan)
PUBLIC1(asin)
PUBLIC1(acos)
PUBLIC1(atan)
PUBLIC1(sinh)
PUBLIC1(cosh)
PUBLIC1(asinh)
PUBLIC1(acosh)
PUBLIC1(atanh)

cn_tensor *cn_atan2(cn_tensor *y, cn_tensor *x) {
    cn_scope_begin();
    cn_tensor *r = cn_keep(atan2_of(y, x));
    cn_scope_end();
    return r;
}
