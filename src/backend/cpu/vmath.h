/* Vectorisable f32 math for the elementwise kernels.
 *
 * Every function here is branch-free straight-line code (range reduction, a
 * polynomial, exponent bit tricks, and bitwise selects for the special
 * values), with no libm calls where the target has FMA, so GCC vectorises
 * the loops that inline them. The polynomials (the exp core, cn__exp_reduce
 * and cn__exp_poly, under every exp-based function here; expm1's, log's,
 * tanh's, erf's and erfc's) ask for fused multiply-adds by name
 * (__builtin_fmaf): one instruction at the AVX2 and AVX-512 levels and on
 * aarch64, the same bits at every level, since an FMA rounds once wherever
 * it runs. The default level on x86-64 (what CPUs without AVX2 run, and
 * CN_ISA=default, cn_isa_set or a build without the variants) calls libm's
 * fmaf instead: correctly rounded, but scalar where its loops were SSE2
 * vectors before: a trade made for the CPUs that have FMA. Exp and
 * sigmoid ran 1.3x faster fused, gelu 1.2-1.4x and erf 1.3-1.5x
 * (docs/benchmarks.md, "The Xeon, night of 2026-11-28" and "The Xeon,
 * 2026-11-29").
 * Errors against libm in double, in ulps of the exact value: exp 1.02, log
 * 0.92, expm1 1.46, log1p 1.44, tanh 1.50, softplus 1.97, sigmoid 2.33,
 * silu 3.19, erf 1.46, gelu 5.88, the tanh form of gelu 3.20, rsqrt 0.5;
 * in ulps of the reference rounded to f32 (how far apart the floats are):
 * exp, expm1, log, log1p, tanh, erf, rsqrt 1; softplus, sigmoid 2; silu,
 * the tanh form 3; gelu 6 (tests/test_isa.c asserts the exact-value
 * bounds rounded up). Measured over
 * every 7th f32 bit pattern, 3e8 to 6e8 finite results a function, by
 * bench/bench_vmath_ulp, which also checks the special values and that
 * every instruction-set level gives the same bits. NaN propagates,
 * infinities and signed zeros come out as in libm, results overflow to inf
 * and underflow gradually to 0, and functions with a horizontal asymptote
 * (tanh, sigmoid, erf) reach it exactly.
 *
 * erf and gelu are evaluated in f32 (8 lanes to an AVX2 vector where double
 * has 4): erfc on the tails as an f32 rational times an f32 exp whose
 * argument may come in two parts. gelu's 6 ulp are on its negative side
 * beyond x = -0.7, where the value is under 0.17 in magnitude (the tail's
 * roundings add up: erfc's relative error is up to 3.8e-7); elsewhere it is
 * within 1 ulp. It keeps that bound into the far tail because t^2 = x^2 / 2
 * is taken from x exactly: squaring the rounded x / sqrt 2 would lose about
 * x^2 ulp. Until 2026-11-28 erf and gelu evaluated their tails in double,
 * within an ulp, at 1.5 to 2 times the cost (docs/benchmarks.md). The tanh
 * form still computes its argument z in double (split into two floats):
 * with z in f32, x exp(z) would lose about |z| 2^-22 relative, 22 ulp at
 * x = -3, 200 near the underflow.
 *
 * Selects are written as cn_vsel(c, a, b), a bitwise blend, rather than
 * `c ? a : b`: GCC turns a float `?:` into a branch that later passes
 * duplicate code into, and the loop is then no longer vectorised.
 *
 * The polynomial coefficients were fitted for this file (weighted minimax on
 * the reduced ranges, then rounded to f32; erfc's rational was fitted in
 * double and its coefficients rounded to f32). Names starting with cn__
 * are private to this header.
 *
 * The code relies on IEEE f32 arithmetic in round-to-nearest without
 * -ffast-math (the `(x + 2^23) - 2^23` rounding trick must not be folded). */
#ifndef CN_CPU_VMATH_H
#define CN_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Forced inline: a call left in the loop (GCC declines to inline the larger
 * functions into a row function with two loops) stops vectorisation. */
#if defined(__GNUC__)
#define CN_VMATH static inline __attribute__((always_inline))
#else
#define CN_VMATH static inline
#endif

CN_VMATH uint32_t cn_f2u(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
CN_VMATH float cn_u2f(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
CN_VMATH uint64_t cn_d2u(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
CN_VMATH double cn_u2d(uint64_t u) {
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* c ? a : b, for c = 0 or 1, without a branch. */
CN_VMATH float cn_vsel(int c, float a, float b) {
    uint32_t m = 0u - (uint32_t)c;
    return cn_u2f((cn_f2u(a) & m) | (cn_f2u(b) & ~m));
}
CN_VMATH double cn_vseld(int c, double a, double b) {
    uint64_t m = 0u - (uint64_t)c;
    return cn_u2d((cn_d2u(a) & m) | (cn_d2u(b) & ~m));
}
CN_VMATH float cn__copysignf(float mag, float sgn) {
    return cn_u2f((cn_f2u(mag) & 0x7fffffffu) | (cn_f2u(sgn) & 0x80000000u));
}

/* ---- exp, expm1 ---- */

/* ln 2 split so that k * CN_LN2_HI is exact for |k| < 2^8. */
#define CN_LN2_HI 0x1.62e4p-1f
#define CN_LN2_LO 0x1.7f7d1cp-20f
#define CN_LOG2E 0x1.715476p+0f
#define CN_ROUND_MAGIC 0x1.8p23f /* adding it rounds |x| < 2^22 to an integer */

/* x * 2^k for integer k in [-152, 128], with one rounding even when the
 * result is subnormal: 2^k is applied as two normal halves. Unsigned
 * arithmetic only, so garbage k (from a NaN lane) is harmless. */
CN_VMATH float cn__ldexpf(float x, uint32_t k) {
    uint32_t h = (k + 256u) >> 1;            /* k1 = h - 128 */
    float s1 = cn_u2f((h - 1u) << 23);       /* 2^k1 */
    float s2 = cn_u2f((k - h + 255u) << 23); /* 2^(k - k1) */
    return x * s1 * s2;
}

/* expm1(r) for |r| <= ln2/2 (and a little more), relative error 3e-10.
 * Estrin's scheme rather than Horner's: the loops that inline this are
 * bound by the latency of one element's chain (sigmoid ran 1.17x faster
 * with the three pairs below evaluated side by side). */
CN_VMATH float cn__expm1_poly(float r) {
    float r2 = r * r;
    float qa = __builtin_fmaf(1.666666567e-01f, r, 5.000000000e-01f);
    float qb = __builtin_fmaf(8.333391510e-03f, r, 4.166634753e-02f);
    float qc = __builtin_fmaf(1.984595729e-04f, r, 1.394165331e-03f);
    float q = __builtin_fmaf(r2 * r2, qc, __builtin_fmaf(r2, qb, qa));
    return __builtin_fmaf(r2, q, r);
}

/* exp(r) for |r| <= ln2/2 (and a little more) at degree 6, relative error
 * 3.8e-9 (weighted minimax with 1 + r kept exact, coefficients rounded to
 * f32), far below an f32 ulp, in three operations fewer than 1 +
 * cn__expm1_poly, whose degree 7 only expm1's own small results need.
 * (Adding r + r^2 qa and r^4 qb side by side would shorten the chain by
 * one link: 3% faster sigmoid, but 0.3 ulp more error, as that sum is
 * rounded once more.) In fused multiply-adds, exp's largest error went
 * from 0.99 ulp to 1.02 (the coefficients were fitted for separate
 * roundings); the rounded results are still within 1 ulp. */
CN_VMATH float cn__exp_poly(float r) {
    float r2 = r * r;
    float qa = __builtin_fmaf(1.666652113e-01f, r, 4.999999404e-01f);
    float qb = __builtin_fmaf(8.368715644e-03f, r, 4.166838899e-02f);
    qb = __builtin_fmaf(r2, 1.381460228e-03f, qb);
    return 1.0f + __builtin_fmaf(r2, __builtin_fmaf(r2, qb, qa), r);
}

/* x = k ln2 + r: returns r and sets *k, for |k| < 256 (|x| < 177; the
 * callers clamp to at most 120 below and 89 above). k ln2_hi is exact
 * (ln2_hi has 15 bits), and so is x minus it; the fused lo step rounds
 * once. */
CN_VMATH float cn__exp_reduce(float x, uint32_t *k) {
    float t = __builtin_fmaf(x, CN_LOG2E, CN_ROUND_MAGIC);
    float kf = t - CN_ROUND_MAGIC;
    *k = cn_f2u(t) - cn_f2u(CN_ROUND_MAGIC); /* t's low mantissa bits hold k */
    return __builtin_fmaf(-kf, CN_LN2_LO, __builtin_fmaf(-kf, CN_LN2_HI, x));
}

CN_VMATH float cn_vexpf(float x) {
    /* exp(-104) already rounds to 0, exp(89) to inf. Below -104 the
     * result is 0 by a select, and exp's steps run on 0 instead: computed,
     * it underflowed in the last multiply, and on Intel each vector of
     * such lanes took a microcode assist (exps of -inf, a masked score's,
     * ran 11x slower than of -1). */
    const int zero = x < -104.0f; /* 0 for NaN, which passes through */
    x = cn_vsel(zero, 0.0f, x);
    x = cn_vsel(x > 89.0f, 89.0f, x);
    uint32_t k;
    float r = cn__exp_reduce(x, &k);
    return cn_vsel(zero, 0.0f, cn__ldexpf(cn__exp_poly(r), k));
}

/* For x <= 0: exp(x - d) * 2^64, d the small second part of an argument
 * held as x - d (0 for a plain float: the compiler drops it then). x is
 * clamped at CN_EXP_TINY_LO, where exp(x) * 2^64 is still a normal float,
 * so 2^k is applied as one factor, and yet far below anything that
 * survives the caller's 2^-64 (sigmoid, silu and gelu are 0 in f32 well
 * before x = -120). cn__exp_tiny_clamped takes an x already clamped by
 * cn__exp_tiny_lo, for callers that use the clamped x themselves. */
#define CN_EXP_TINY_LO -120.0f
CN_VMATH float cn__exp_tiny_clamped(float x, float d) {
    uint32_t k;
    float r = cn__exp_reduce(x, &k) - d;
    return cn__exp_poly(r) * cn_u2f((k + 127u + 64u) << 23);
}
CN_VMATH float cn__exp_tiny_lo(float x) {
    return cn_vsel(x < CN_EXP_TINY_LO, CN_EXP_TINY_LO, x);
}
CN_VMATH float cn__exp_tiny(float x, float d) {
    return cn__exp_tiny_clamped(cn__exp_tiny_lo(x), d);
}

CN_VMATH float cn_vexpm1f(float x) {
    float xc = cn_vsel(x < -30.0f, -30.0f, x); /* expm1 rounds to -1 below -17.4 */
    xc = cn_vsel(xc > 89.0f, 89.0f, xc);
    uint32_t k;
    float r = cn__exp_reduce(xc, &k);
    float p = cn__expm1_poly(r);
    /* expm1(x) = 2^k (p + 1 - 2^-k); 1 - 2^-k is exact for the k where it
     * matters and rounds to 1 once k exceeds 24. */
    uint32_t kc = k - ((k - 25u) & (0u - (uint32_t)((int32_t)k > 25))); /* min(k, 25) */
    float c = 1.0f - cn_u2f((127u - kc) << 23);
    float y = cn__ldexpf(p + c, k);
    return cn_vsel(x == 0.0f, x, y); /* keeps the sign of zero */
}

/* ---- log, log1p ---- */

/* log x for x > 0 (other lanes give garbage) as e ln2 + log m, with m in
 * [sqrt(1/2), sqrt(2)): log m = 2 atanh(s), s = f / (2 + f), f = m - 1 exact. */
CN_VMATH float cn__log_pos(float x) {
    int sub = x < 0x1p-126f; /* subnormal: scale into the normal range */
    float xs = cn_vsel(sub, x * 0x1p23f, x);
    uint32_t ix = cn_f2u(xs) - 0x3f3504f3u; /* 0x3f3504f3 = sqrt(1/2) */
    int32_t e = (int32_t)((ix + 0x40000000u) >> 23) - 128 - 23 * sub;
    float m = cn_u2f((ix & 0x007fffffu) + 0x3f3504f3u);
    float f = m - 1.0f;
    float s = f / (2.0f + f);
    float w = s * s;
    float t = 2.334248126e-01f;
    t = __builtin_fmaf(t, w, 2.855037451e-01f);
    t = __builtin_fmaf(t, w, 4.000012577e-01f);
    t = __builtin_fmaf(t, w, 6.666666865e-01f);
    t = t * w; /* 2 atanh(s) = 2s + s t, and 2s = f - s f */
    float lm = f - s * (f - t);
    float ef = (float)e;
    return ef * CN_LN2_HI + (ef * CN_LN2_LO + lm);
}

CN_VMATH float cn_vlogf(float x) {
    float y = cn__log_pos(x);
    y = cn_vsel(x < 0.0f, NAN, y);
    y = cn_vsel(x == 0.0f, -INFINITY, y);
    return cn_vsel((x == INFINITY) | (x != x), x, y);
}

CN_VMATH float cn_vlog1pf(float x) {
    float u = 1.0f + x;
    /* u - 1 is exact, so c is what rounding 1 + x lost, and log(1 + x) =
     * log(u) + c / u to first order. */
    float c = (x - (u - 1.0f)) / u;
    float y = cn__log_pos(u) + c;
    y = cn_vsel(x < -1.0f, NAN, y);
    y = cn_vsel(x == -1.0f, -INFINITY, y);
    return cn_vsel((x == INFINITY) | (x != x) | (x == 0.0f), x, y);
}

/* ---- tanh, sigmoid, silu ---- */

CN_VMATH float cn_vtanhf(float x) {
    float a = fabsf(x);
    /* Small |x|: tanh(a) = a + a w p(w), w = a^2. */
    float w = a * a;
    float p = 2.137164120e-03f;
    p = __builtin_fmaf(p, w, -8.171706460e-03f);
    p = __builtin_fmaf(p, w, 2.169869281e-02f);
    p = __builtin_fmaf(p, w, -5.394645780e-02f);
    p = __builtin_fmaf(p, w, 1.333320439e-01f);
    p = __builtin_fmaf(p, w, -3.333333135e-01f);
    float small = a + a * (w * p);
    /* Otherwise e / (e + 2), e = expm1(2a); tanh(10) already rounds to 1. */
    float e = cn_vexpm1f(2.0f * cn_vsel(a > 10.0f, 10.0f, a));
    float big = e / (e + 2.0f);
    return cn__copysignf(cn_vsel(a < 0.625f, small, big), x);
}

/* m sigmoid(a - d) for CN_EXP_TINY_LO <= a <= 0, d the small second part
 * of an argument held as a - d (0 for a plain float): m es / (2^64 + es),
 * es = exp(a - d) 2^64. Numerator and denominator carry the same 2^64, so
 * the one rounding of the division is also the one rounding of a subnormal
 * result, with no final scaling. The positive side is the callers' affair
 * (m - m sigmoid(-z): a difference of at least half of m, so nothing
 * cancels). */
CN_VMATH float cn__mul_sigmoid_neg(float m, float a, float d) {
    float es = cn__exp_tiny_clamped(a, d);
    return (m * es) / (0x1p64f + es);
}

CN_VMATH float cn_vsigmoidf(float x) {
    /* 1 / (1 + e) for x >= 0 as 2^64 / (2^64 + es): one select before the
     * division instead of a subtraction after it. */
    float es = cn__exp_tiny(-fabsf(x), 0.0f);
    return cn_vsel(x < 0.0f, es, 0x1p64f) / (0x1p64f + es);
}

CN_VMATH float cn_vsiluf(float x) {
    /* silu(x) = x + silu(-x), so both sides take silu(-|x|), whose factor
     * -|x| is the exp's clamped argument: beyond -120 the result is 0
     * anyway, and -inf or -1e30 times a merely tiny es would not be. */
    float a = cn__exp_tiny_lo(-fabsf(x));
    float t = cn__mul_sigmoid_neg(a, a, 0.0f);
    return cn_vsel(x < 0.0f, t, x + t);
}

/* ---- elu, softplus ---- */

CN_VMATH float cn_veluf(float x, float alpha) {
    return cn_vsel(x > 0.0f, x, alpha * cn_vexpm1f(x));
}

/* PyTorch's softplus: x where beta x > threshold, else log(1 + exp(beta x)) /
 * beta, computed as max(z, 0) + log1p(exp(-|z|)) so it never overflows. */
CN_VMATH float cn_vsoftplusf(float x, float beta, float threshold) {
    float z = x * beta;
    float m = cn_vsel(z > 0.0f, z, 0.0f);
    float y = (m + cn_vlog1pf(cn_vexpf(-fabsf(z)))) / beta;
    return cn_vsel(z > threshold, x, y);
}

/* ---- erf, gelu ---- */

/* erfc(t) * 2^64 for t >= 0.5 (t is clamped to 10.6; erfc is 0 in f32
 * well before): exp(-t^2) g(u) / (t + 2.5), u = (t - 2.5) / (t + 2.5). t^2
 * is passed as t2 + t2lo, so that gelu can give it exactly (x^2 / 2 from
 * x, where squaring a rounded x / sqrt 2 would lose about x^2 ulp). */
CN_VMATH float cn__erfc_tail(float t, float t2, float t2lo) {
    t = cn_vsel(t > 10.6f, 10.6f, t);
    float inv = 1.0f / (t + 2.5f);
    float u = (t - 2.5f) * inv;
    float g = 5.895938984e-04f;
    g = __builtin_fmaf(g, u, -3.940706629e-04f);
    g = __builtin_fmaf(g, u, -4.776396155e-03f);
    g = __builtin_fmaf(g, u, 8.379780023e-03f);
    g = __builtin_fmaf(g, u, 2.835503648e-02f);
    g = __builtin_fmaf(g, u, -1.712496535e-01f);
    g = __builtin_fmaf(g, u, 4.539144623e-01f);
    g = __builtin_fmaf(g, u, -8.046518950e-01f);
    g = __builtin_fmaf(g, u, 1.054031817e+00f);
    return cn__exp_tiny(-t2, t2lo) * (g * inv);
}

/* erf(x) / x - 1 as a polynomial in w = x^2, for |x| <= 0.875 (written
 * around 1 so the rounding of the leading 2/sqrt(pi) is not amplified). */
CN_VMATH float cn__erf_q(float w) {
    float q = 8.647157665e-05f;
    q = __builtin_fmaf(q, w, -8.205078193e-04f);
    q = __builtin_fmaf(q, w, 5.206268281e-03f);
    q = __builtin_fmaf(q, w, -2.686141059e-02f);
    q = __builtin_fmaf(q, w, 1.128372997e-01f);
    q = __builtin_fmaf(q, w, -3.761263490e-01f);
    q = __builtin_fmaf(q, w, 1.283791661e-01f);
    return q;
}

CN_VMATH float cn_verff(float x) {
    float a = fabsf(x);
    float small = a + a * cn__erf_q(a * a);
    /* a * a rounded costs erfc a relative a^2 2^-24, under 2^-24 of erf */
    float big = 1.0f - cn__erfc_tail(a, a * a, 0.0f) * 0x1p-64f;
    return cn__copysignf(cn_vsel(a < 0.875f, small, big), x);
}

/* gelu(x) = x Phi(x) = x/2 erfc(t), t = -x / sqrt 2. */
CN_VMATH float cn_vgeluf(float x) {
    float t = x * -0x1.6a09e6p-1f;
    float a = fabsf(t);
    float small = 1.0f - (t + t * cn__erf_q(t * t));
    /* t^2 = x^2 / 2 in two parts: xh, x with its low 12 bits cleared, has a
     * square that f32 holds exactly, and x^2 - xh^2 = (x - xh)(x + xh). */
    float xc = cn_vsel(x < -16.0f, -16.0f, cn_vsel(x > 16.0f, 16.0f, x));
    float xh = cn_u2f(cn_f2u(xc) & 0xfffff000u);
    float t2 = 0.5f * (xh * xh), t2lo = 0.5f * ((xc - xh) * (xc + xh));
    float tail = cn__erfc_tail(a, t2, t2lo); /* erfc(a) 2^64 */
    float y = (0.5f * x) * cn_vsel(a < 0.5f, small, 2.0f - tail * 0x1p-64f);
    /* x < 0 in the tail: the scaled erfc keeps subnormal results rounded
     * once; xc, as the tail is clamped */
    y = cn_vsel((a >= 0.5f) & (t > 0.0f), ((0.5f * xc) * tail) * 0x1p-64f, y);
    return cn_vsel(x == -INFINITY, -0.0f, y); /* not -inf * 0 */
}

/* The tanh form: x/2 (1 + tanh(z/2)) = x sigmoid(z), z = 2 sqrt(2/pi) (x +
 * 0.044715 x^3). z is computed in double and split into two floats: in f32
 * its rounding would cost |z| 2^-24 relative in the negative tail, where
 * the result is x exp(z). Beyond |x| = 20 the result is x or -0 already. */
CN_VMATH float cn_vgelu_tanhf(float x) {
    float xc = cn_vsel(x < -20.0f, -20.0f, cn_vsel(x > 20.0f, 20.0f, x));
    double xd = xc;
    double zd = 0x1.9884533d43651p+0 * (xd + 0.044715 * (xd * xd * xd));
    float z = (float)zd;
    float zlo = (float)(zd - (double)z);
    /* z + zlo held as -|z| - d: d takes z's sign. z = 0 (x = +-0) goes the
     * negative way, xc / 2, so that -0 keeps its sign. */
    int neg = z <= 0.0f;
    float t = cn__mul_sigmoid_neg(xc, cn__exp_tiny_lo(-fabsf(z)), cn_vsel(neg, -zlo, zlo));
    float y = cn_vsel(neg, t, xc - t);
    /* xc is x but beyond 20, where sigmoid(z) rounds to 1 (or the result to 0) */
    return cn_vsel(x > 20.0f, x, cn_vsel(x < -20.0f, -0.0f, y));
}

/* ---- rounding ---- */

/* Half to even: adding 2^23 to |x| < 2^23 leaves no fraction bits. */
CN_VMATH float cn_vroundf(float x) {
    float a = fabsf(x);
    float r = (a + 0x1p23f) - 0x1p23f;
    return cn__copysignf(cn_vsel(a < 0x1p23f, r, a), x);
}
/* floor, ceil: the sign is copied back so that ceil(-0.5) is -0 as in libm. */
CN_VMATH float cn_vfloorf(float x) {
    float r = cn_vroundf(x);
    return cn__copysignf(cn_vsel(r > x, r - 1.0f, r), x);
}
CN_VMATH float cn_vceilf(float x) {
    float r = cn_vroundf(x);
    return cn__copysignf(cn_vsel(r < x, r + 1.0f, r), x);
}
CN_VMATH double cn_vround(double x) {
    double a = fabs(x);
    double r = (a + 0x1p52) - 0x1p52;
    return copysign(cn_vseld(a < 0x1p52, r, a), x);
}
CN_VMATH double cn_vfloor(double x) {
    double r = cn_vround(x);
    return copysign(cn_vseld(r > x, r - 1.0, r), x);
}
CN_VMATH double cn_vceil(double x) {
    double r = cn_vround(x);
    return copysign(cn_vseld(r < x, r + 1.0, r), x);
}

/* ---- rsqrt ----
 * 1/sqrt(x) by Newton's method in double from the exponent-halving guess,
 * rounded once to f32 (sqrtf itself is not vectorised by GCC while errno is
 * on, the default). Lanes the selects replace get 1 rather than garbage that
 * could run through the iteration as slow subnormals. */
CN_VMATH float cn_vrsqrtf(float x) {
    double d = cn_vseld((x > 0.0f) & (x < INFINITY), x, 1.0);
    double r = cn_u2d(0x5fe6eb50c7b537a9ull - (cn_d2u(d) >> 1));
    for (int i = 0; i < 3; i++) r = r * (1.5 - 0.5 * d * r * r);
    float y = (float)r;
    y = cn_vsel(x < 0.0f, NAN, y);
    y = cn_vsel(x == INFINITY, 0.0f, y);
    y = cn_vsel(x == 0.0f, 1.0f / x, y); /* +-inf */
    return cn_vsel(x != x, x, y);
}

#endif
