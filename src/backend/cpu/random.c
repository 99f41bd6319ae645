/* Random numbers on the CPU: the draws of rand, randn, uniform, normal,
 * randint and randperm (src/ops/random.c), and the bernoulli kernel.
 *
 * Every draw takes one Philox counter per element from the caller (who
 * reserved them with cn_rng_reserve), and element i is a function of (key,
 * first counter + i) only, so the values are the same whatever the thread
 * count or the split of the work. Each float dtype takes as many random
 * bits as it has significand digits, so a U[0, 1) draw is exact in its
 * dtype and never rounds up to 1. */
#include "kernels.h"
#include "../random_bounds.h"

#include "iter.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#if defined(__GNUC__)
#define RNG_INLINE inline __attribute__((always_inline))
#else
#define RNG_INLINE inline
#endif

/* Counters drawn together before the results are shaped into values, so the
 * value loops (uniform scaling, comparisons) vectorise. */
#define BLOCK 16
/* Elements per thread below which a draw is not worth splitting. */
#define RNG_GRAIN 16384

typedef struct lanes {
    uint32_t x[4][BLOCK];
} lanes;

/* Philox-4x32-10 of counters ctr .. ctr + BLOCK - 1, bit for bit cn_philox.
 * The portable version is scalar: the compiler does not turn the 32x32->64
 * multiplies into vector code worth having, so x86-64 CPUs with AVX2 take a
 * hand-vectorised version (about twice as fast), chosen once per draw. */
static RNG_INLINE void philox_block_scalar(uint64_t key, uint64_t ctr, lanes *o) {
    for (int j = 0; j < BLOCK; j++) {
        uint64_t c = ctr + (uint64_t)j;
        uint32_t c0 = (uint32_t)c, c1 = (uint32_t)(c >> 32), c2 = 0, c3 = 0;
        uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
        for (int r = 0; r < 10; r++) {
            uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
            c0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
            c1 = (uint32_t)p1;
            c2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
            c3 = (uint32_t)p0;
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        o->x[0][j] = c0;
        o->x[1][j] = c1;
        o->x[2][j] = c2;
        o->x[3][j] = c3;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_PHILOX_AVX2 1

/* Eight counters per vector. _mm256_mul_epu32 multiplies the even 32-bit
 * lanes into 64-bit products, so the odd lanes are shifted down for a second
 * multiply and the high and low halves are blended back into place. */
__attribute__((target("avx2"))) static void philox_block_avx2(uint64_t key, uint64_t ctr,
                                                              lanes *o) {
    const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u);
    const __m256i m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
    const __m256i sign = _mm256_set1_epi32(INT32_MIN);
    for (int g = 0; g < BLOCK; g += 8) {
        uint64_t base = ctr + (uint64_t)g;
        __m256i lo = _mm256_set1_epi32((int)(uint32_t)base);
        __m256i c0 = _mm256_add_epi32(lo, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        /* -1 where the low word wrapped (an unsigned c0 < lo): carry it */
        __m256i carry = _mm256_cmpgt_epi32(_mm256_xor_si256(lo, sign), _mm256_xor_si256(c0, sign));
        __m256i c1 = _mm256_sub_epi32(_mm256_set1_epi32((int)(uint32_t)(base >> 32)), carry);
        __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
        uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
        for (int r = 0; r < 10; r++) {
            __m256i e0 = _mm256_mul_epu32(c0, m0);
            __m256i d0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
            __m256i e1 = _mm256_mul_epu32(c2, m1);
            __m256i d1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
            __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), d0, 0xAA);
            __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), d1, 0xAA);
            __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(d0, 32), 0xAA);
            __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(d1, 32), 0xAA);
            c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
            c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
            c1 = lo1;
            c3 = lo0;
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        _mm256_storeu_si256((__m256i *)&o->x[0][g], c0);
        _mm256_storeu_si256((__m256i *)&o->x[1][g], c1);
        _mm256_storeu_si256((__m256i *)&o->x[2][g], c2);
        _mm256_storeu_si256((__m256i *)&o->x[3][g], c3);
    }
}
#endif

/* With the hot loops' level (isa.h), so forcing a lower one runs none of
 * the AVX2 code; the bits are the same either way. */
static bool rng_use_avx2(void) {
#if defined(HAVE_PHILOX_AVX2) && defined(__AVX2__)
    return true;
#elif defined(HAVE_PHILOX_AVX2)
    return cn_isa() >= CN_ISA_AVX2;
#else
    return false;
#endif
}

static RNG_INLINE void philox_block(bool avx2, uint64_t key, uint64_t ctr, lanes *o) {
#ifdef HAVE_PHILOX_AVX2
    if (avx2) {
        philox_block_avx2(key, ctr, o);
        return;
    }
#endif
    (void)avx2;
    philox_block_scalar(key, ctr, o);
}

/* 53 random bits from two lanes. */
static RNG_INLINE uint64_t bits53(uint32_t hi, uint32_t lo) {
    return ((uint64_t)hi << 21) | (lo >> 11);
}

/* An unbiased-enough index in [0, range): the high half of x * range has a
 * bias below range / 2^64. Without 128-bit integers the same product is
 * built from 32-bit halves, so every platform draws the same values. */
static RNG_INLINE uint64_t below(uint64_t x, uint64_t range) {
#if defined(__SIZEOF_INT128__)
    return (uint64_t)(((unsigned __int128)x * range) >> 64);
#else
    uint64_t xl = (uint32_t)x, xh = x >> 32, rl = (uint32_t)range, rh = range >> 32;
    uint64_t ll = xl * rl, hl = xh * rl, lh = xl * rh;
    uint64_t mid = (ll >> 32) + (uint32_t)hl + lh; /* < 2^64: no carry is lost */
    return xh * rh + (hl >> 32) + (mid >> 32);
#endif
}

typedef struct draw {
    cn_random_kind kind;
    cn_dtype dt;
    void *out;
    uint64_t key, ctr;
    /* uniform: lo, span (hi - lo), hi, the largest value of dt below hi, and
     * the scale 2^-bits of the random integer; normal: mean, std. */
    double lo, span, hi, top, scale;
    float topf;
    uint16_t toph;
    int shift; /* 32 - bits for the float types below f64 */
    bool avx2;
    int64_t low;
    uint64_t range;
} draw;

static RNG_INLINE uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static RNG_INLINE float bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Box-Muller in f32 from 24-bit integers a (u1 = (a + 1) 2^-24, in (0, 1],
 * which keeps the log finite) and b (u2 = b 2^-24). libm's logf, cosf and
 * sqrtf do not vectorise (errno), so this uses short approximations that
 * suffice on these narrow domains (errors of a few ulp):
 *   ln u1 = e ln 2 + 2 atanh(s), s = (m - 1) / (m + 1), m in [sqrt(1/2), sqrt 2);
 *   cos(2 pi u2) by quarter turns, exact in integers, and Taylor series on
 *   [-pi/4, pi/4];
 *   sqrt(y) = y / sqrt(y), with three Newton steps from the classic 3%
 *   estimate of 1 / sqrt(y) (y = 0 gives 0). */
static RNG_INLINE float normal_f32(uint32_t a, uint32_t b) {
    float u1 = (float)(int32_t)(a + 1) * 0x1p-24f;
    uint32_t ix = f32_bits(u1) - 0x3f3504f3u; /* 0x3f3504f3: sqrt(1/2) */
    float e = (float)((int32_t)((ix + 0x40000000u) >> 23) - 128);
    float f = bits_f32((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
    float s = f / (2.0f + f), w = s * s;
    float at = w * (1.0f / 3 + w * (1.0f / 5 + w * (1.0f / 7 + w * (1.0f / 9))));
    float ln = e * 0x1.62e4p-1f + (e * 0x1.7f7d1cp-20f + (2 * s + 2 * s * at));
    float y = -2.0f * ln;
    float r = bits_f32(0x5f3759dfu - (f32_bits(y) >> 1));
    for (int it = 0; it < 3; it++) r = r * (1.5f - 0.5f * y * r * r);
    float rad = y * r;
    int32_t k = (int32_t)b, q = (k + (1 << 21)) >> 22; /* nearest quarter turn */
    float x = (float)(k - (q << 22)) * (6.2831853071795864769f * 0x1p-24f);
    float x2 = x * x;
    float c = 1 + x2 * (-0.5f + x2 * (1.0f / 24 + x2 * (-1.0f / 720 + x2 * (1.0f / 40320))));
    float sn = 1.0f / 120 + x2 * (-1.0f / 5040 + x2 * (1.0f / 362880));
    sn = x * (1 + x2 * (-1.0f / 6 + x2 * sn));
    q &= 3;
    float cs = q == 0 ? c : q == 1 ? -sn : q == 2 ? -c : sn;
    return rad * cs;
}
static RNG_INLINE double normal_f64(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    double u1 = (double)(bits53(a, b) + 1) * 0x1p-53;
    double u2 = (double)bits53(c, d) * 0x1p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586477 * u2);
}

/* The parameters are copied to locals so the stores through o cannot alias
 * them, and the loops vectorise. */
static RNG_INLINE void draw_uniform(const draw *d, const lanes *L, int64_t i, int m) {
    const double lo = d->lo, span = d->span, hi = d->hi;
    switch (d->dt) {
    case CN_F32: {
        float *o = (float *)d->out + i;
        const float top = d->topf;
        for (int j = 0; j < m; j++) {
            /* < 2^24: an int32 conversion, which vectorises everywhere. */
            double u = (double)(int32_t)(L->x[0][j] >> 8) * 0x1p-24;
            float v = (float)(lo + span * u);
            o[j] = (double)v < hi ? v : top;
        }
        break;
    }
    case CN_F64: {
        double *o = (double *)d->out + i;
        const double top = d->top;
        for (int j = 0; j < m; j++) {
            double u = (double)(int64_t)bits53(L->x[0][j], L->x[1][j]) * 0x1p-53;
            double v = lo + span * u;
            o[j] = v < hi ? v : top;
        }
        break;
    }
    default: { /* f16, bf16: rare, converted one by one */
        uint16_t *o = (uint16_t *)d->out + i;
        const int shift = d->shift;
        const double scale = d->scale;
        for (int j = 0; j < m; j++) {
            double u = (double)(L->x[0][j] >> shift) * scale;
            uint16_t h = cn_f32_to_half((float)(lo + span * u), d->dt);
            o[j] = (double)cn_half_to_f32(h, d->dt) < hi ? h : d->toph;
        }
        break;
    }
    }
}

static RNG_INLINE void draw_normal(const draw *d, const lanes *L, int64_t i, int m) {
    const double mean = d->lo, std = d->span;
    switch (d->dt) {
    case CN_F32: {
        float *o = (float *)d->out + i;
        for (int j = 0; j < m; j++)
            o[j] = (float)(mean + std * (double)normal_f32(L->x[0][j] >> 8, L->x[1][j] >> 8));
        break;
    }
    case CN_F64: {
        double *o = (double *)d->out + i;
        for (int j = 0; j < m; j++)
            o[j] = mean + std * normal_f64(L->x[0][j], L->x[1][j], L->x[2][j], L->x[3][j]);
        break;
    }
    default: {
        uint16_t *o = (uint16_t *)d->out + i;
        for (int j = 0; j < m; j++) {
            double z = (double)normal_f32(L->x[0][j] >> 8, L->x[1][j] >> 8);
            o[j] = cn_f32_to_half((float)(mean + std * z), d->dt);
        }
        break;
    }
    }
}

#define DRAW_INT_LOOP(T)                                                                           \
    do {                                                                                           \
        T *o = (T *)d->out + i;                                                                    \
        for (int j = 0; j < m; j++) {                                                              \
            uint64_t x = ((uint64_t)L->x[0][j] << 32) | L->x[1][j];                                \
            /* unsigned: low + offset never overflows as a signed sum would */                     \
            o[j] = (T)(int64_t)(low + below(x, range));                                            \
        }                                                                                          \
    } while (0)

static RNG_INLINE void draw_int(const draw *d, const lanes *L, int64_t i, int m) {
    const uint64_t low = (uint64_t)d->low, range = d->range;
    switch (d->dt) {
    case CN_I32: DRAW_INT_LOOP(int32_t); break;
    case CN_I64: DRAW_INT_LOOP(int64_t); break;
    default: DRAW_INT_LOOP(uint8_t); break;
    }
}

CN_HOT_FN(draw_chunk, (void *p, int64_t begin, int64_t end), (p, begin, end)) {
    const draw *d = p;
    lanes L;
    for (int64_t i = begin; i < end; i += BLOCK) {
        int m = end - i < BLOCK ? (int)(end - i) : BLOCK;
        philox_block(d->avx2, d->key, d->ctr + (uint64_t)i, &L);
        switch (d->kind) {
        case CN_RANDOM_UNIFORM: draw_uniform(d, &L, i, m); break;
        case CN_RANDOM_NORMAL: draw_normal(d, &L, i, m); break;
        default: draw_int(d, &L, i, m); break;
        }
    }
}

/* U[lo, hi) in d->dt: the span and, since rounding to dt may land on hi,
 * the value that replaces such a draw: the largest value of dt below hi (or
 * lo itself when dt has nothing in [lo, hi)). */
static void uniform_setup(draw *d, double lo, double hi) {
    cn_dtype dt = d->dt;
    d->lo = lo;
    d->span = hi - lo;
    d->hi = hi;
    int bits = cn_uniform_bits(dt);
    d->shift = 32 - bits;
    d->scale = ldexp(1.0, -bits);
    if (dt == CN_F64) d->top = cn_uniform_top_f64(lo, hi);
    else if (dt == CN_F32) d->topf = cn_uniform_top_f32(lo, hi);
    else d->toph = cn_uniform_top_half(lo, hi, dt);
}

/* Fill out (contiguous) with d's draw from counters counter, counter + 1, ... */
static void draw_run(draw *d, cn_tensor *out, uint64_t key, uint64_t counter) {
    int64_t n = cn_shape_numel(out->ndim, out->shape);
    d->out = cn_t_ptr(out);
    d->key = key;
    d->ctr = counter;
    d->avx2 = rng_use_avx2();
    cn_parallel_for(n, RNG_GRAIN, draw_chunk, d);
}

int cn_cpu_randint_fill(cn_tensor *out, int64_t low, uint64_t range, uint64_t key,
                        uint64_t counter) {
    cn_dtype dt = (cn_dtype)out->dtype;
    if (!cn_is_int_dtype(dt))
        return cn_failc(CN_EINVAL, "randint: internal error: dtype %s is not an integer type",
                        cn_dtype_name(dt));
    draw d = {.kind = CN_RANDOM_INT, .dt = dt, .low = low, .range = range};
    draw_run(&d, out, key, counter);
    return CN_OK;
}

/* [p0, p1) as low and range: integers, p0 < p1, within [-2^63, 2^63]
 * (exact for what doubles hold exactly), the range below 2^64. */
static bool int_bounds(double p0, double p1, int64_t *low, uint64_t *range) {
    const double two63 = 0x1p63;
    if (!(p0 < p1) || p0 < -two63 || p1 > two63 || p0 != floor(p0) || p1 != floor(p1))
        return false;
    uint64_t hi = p1 == two63 ? UINT64_C(1) << 63 : (uint64_t)(int64_t)p1;
    *low = (int64_t)p0;
    *range = hi - (uint64_t)*low;
    return *range != 0;
}

int cn_cpu_random_fill(cn_tensor *out, cn_random_kind kind, double p0, double p1, uint64_t key,
                       uint64_t counter) {
    cn_dtype dt = (cn_dtype)out->dtype;
    switch (kind) {
    case CN_RANDOM_UNIFORM:
    case CN_RANDOM_NORMAL: {
        if (!cn_dtype_is_float(dt))
            return cn_failc(CN_EINVAL, "random_fill: internal error: dtype %s is not a float type",
                            cn_dtype_name(dt));
        draw d = {.kind = kind, .dt = dt};
        if (kind == CN_RANDOM_UNIFORM) {
            uniform_setup(&d, p0, p1);
        } else {
            d.lo = p0; /* mean */
            d.span = p1; /* std */
        }
        draw_run(&d, out, key, counter);
        return CN_OK;
    }
    case CN_RANDOM_INT: {
        int64_t low;
        uint64_t range;
        if (!int_bounds(p0, p1, &low, &range))
            return cn_failc(CN_EINVAL, "random_fill: internal error: integer bounds [%g, %g)",
                            p0, p1);
        return cn_cpu_randint_fill(out, low, range, key, counter);
    }
    }
    return cn_failc(CN_EINVAL, "random_fill: internal error: unknown kind %d", (int)kind);
}

int cn_cpu_randperm_fill(cn_tensor *out, uint64_t key, uint64_t counter) {
    if (out->dtype != CN_I64)
        return cn_failc(CN_EINVAL, "randperm: internal error: dtype %s is not i64",
                        cn_dtype_name((cn_dtype)out->dtype));
    int64_t n = cn_shape_numel(out->ndim, out->shape);
    int64_t *o = cn_t_ptr(out);
    for (int64_t i = 0; i < n; i++) o[i] = i;
    /* Fisher-Yates from the top: step i swaps o[i] with o[j], j uniform in
     * [0, i], drawn from counter counter + i. */
    lanes L;
    bool avx2 = rng_use_avx2();
    for (int64_t hi = n - 1; hi >= 1; hi -= BLOCK) {
        int64_t lo = hi - BLOCK + 1 > 1 ? hi - BLOCK + 1 : 1;
        philox_block(avx2, key, counter + (uint64_t)lo, &L);
        for (int64_t i = hi; i >= lo; i--) {
            int k = (int)(i - lo);
            uint64_t x = ((uint64_t)L.x[0][k] << 32) | L.x[1][k];
            int64_t j = (int64_t)below(x, (uint64_t)i + 1);
            int64_t tmp = o[i];
            o[i] = o[j];
            o[j] = tmp;
        }
    }
    return CN_OK;
}

/* ---- bernoulli ---- */

typedef struct bern_shared {
    uint64_t key, ctr;
    cn_iter it;
    _Atomic int64_t bad; /* smallest index with p outside [0, 1] */
    bool avx2;
} bern_shared;

typedef struct bern_ctx {
    bern_shared *s;
    int64_t pos; /* row-major index of the next element */
} bern_ctx;

static void note_bad(bern_shared *s, int64_t idx) {
    int64_t cur = atomic_load_explicit(&s->bad, memory_order_relaxed);
    while (idx < cur && !atomic_compare_exchange_weak_explicit(&s->bad, &cur, idx,
                                                               memory_order_relaxed,
                                                               memory_order_relaxed)) {
    }
}

/* bad collects "p outside [0, 1] (or NaN)" without a branch, so the loop
 * vectorises; the offending index is looked up only when it is set. */
#define BERN_ROW(T, UNIFORM)                                                                       \
    do {                                                                                           \
        T *o = (T *)ptrs[0];                                                                       \
        const T *p = (const T *)ptrs[1];                                                           \
        const int64_t ps = st[1];                                                                  \
        lanes L;                                                                                   \
        for (int64_t i = 0; i < n; i += BLOCK) {                                                   \
            int m = n - i < BLOCK ? (int)(n - i) : BLOCK;                                          \
            philox_block(c->s->avx2, c->s->key, c->s->ctr + (uint64_t)(c->pos + i), &L);          \
            int bad = 0;                                                                           \
            for (int j = 0; j < m; j++) {                                                          \
                T pj = p[(i + j) * ps];                                                            \
                bad |= (pj < 0) | (pj > 1) | (pj != pj);                                           \
                o[i + j] = (UNIFORM) < pj ? (T)1 : (T)0;                                           \
            }                                                                                      \
            if (bad)                                                                               \
                for (int j = 0; j < m; j++)                                                        \
                    if (!(p[(i + j) * ps] >= 0 && p[(i + j) * ps] <= 1)) {                         \
                        note_bad(c->s, c->pos + i + j);                                            \
                        break;                                                                     \
                    }                                                                              \
        }                                                                                          \
    } while (0)

CN_HOT_FN(bern_row_f32,
          (void *ctx, int64_t n, char **ptrs, const int64_t *st),
          (ctx, n, ptrs, st)) {
    bern_ctx *c = ctx;
    BERN_ROW(float, (float)(int32_t)(L.x[0][j] >> 8) * 0x1p-24f);
    c->pos += n;
}

CN_HOT_FN(bern_row_f64,
          (void *ctx, int64_t n, char **ptrs, const int64_t *st),
          (ctx, n, ptrs, st)) {
    bern_ctx *c = ctx;
    BERN_ROW(double, (double)(int64_t)bits53(L.x[0][j], L.x[1][j]) * 0x1p-53);
    c->pos += n;
}

typedef struct bern_job {
    bern_shared *s;
    cn_row_fn row;
} bern_job;

static void bern_chunk(void *p, int64_t begin, int64_t end) {
    bern_job *j = p;
    bern_ctx c = {j->s, begin};
    cn_iter_run_range(&j->s->it, begin, end, j->row, &c);
}

/* bernoulli: out[i] = 1 with probability p[i] (in[0], f32 or f64, any
 * strides), else 0; an error naming the first p outside [0, 1]. */
int cn_cpu_k_bernoulli(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                       cn_tensor *out) {
    (void)nin;
    (void)a;
    const cn_tensor *p = in[0];
    int64_t n = cn_shape_numel(out->ndim, out->shape);
    bern_shared s;
    /* At run time, not at graph build: a static graph redraws every run. */
    cn_rng_reserve((uint64_t)n, &s.key, &s.ctr);
    if (n == 0) return CN_OK;
    atomic_init(&s.bad, INT64_MAX);
    s.avx2 = rng_use_avx2();
    cn_iter_init(&s.it, out, in, 1);
    bern_job j = {&s, p->dtype == CN_F64 ? bern_row_f64 : bern_row_f32};
    if (n < 2 * RNG_GRAIN)
        bern_chunk(&j, 0, n);
    else
        cn_parallel_for(n, RNG_GRAIN, bern_chunk, &j);
    int64_t bad = atomic_load(&s.bad);
    if (bad == INT64_MAX) return CN_OK;
    int64_t off = p->offset, rem = bad;
    for (int d = p->ndim - 1; d >= 0; d--) {
        off += rem % p->shape[d] * p->strides[d];
        rem /= p->shape[d];
    }
    char b[160];
    return cn_failc(CN_EINVAL,
                    "%s: p must be in [0, 1], got %g at flat index %" PRId64 " (shape %s)",
                    cn_op_names[id], cn_load_f64(p->storage->data, (cn_dtype)p->dtype, off), bad,
                    cn_fmt_shape(b, sizeof b, p->ndim, p->shape));
}
