/* Dtype names, sizes, promotion and the f16/bf16 conversions. */
#include "core.h"

#include <math.h>

const size_t cn_dtype_sizes[CN_DTYPE_COUNT] = {4, 8, 2, 2, 4, 8, 1, 1, 1};
static const char *const cn_dtype_names[CN_DTYPE_COUNT] = {"f32", "f64", "f16",  "bf16",
                                                           "i32", "i64", "u8", "bool", "i8"};

const char *cn_dtype_name(cn_dtype dt) {
    return (unsigned)dt < CN_DTYPE_COUNT ? cn_dtype_names[dt] : "invalid";
}

size_t cn_dtype_size(cn_dtype dt) { return (unsigned)dt < CN_DTYPE_COUNT ? cn_dtype_sizes[dt] : 0; }

bool cn_dtype_is_float(cn_dtype dt) {
    return dt == CN_F32 || dt == CN_F64 || dt == CN_F16 || dt == CN_BF16;
}

/* bool < integers < floats; within a category the wider type wins. */
static int category(cn_dtype dt) {
    if (dt == CN_BOOL) return 0;
    return cn_dtype_is_float(dt) ? 2 : 1;
}

cn_dtype cn_promote_types(cn_dtype a, cn_dtype b) {
    if (a == b) return a;
    int ca = category(a), cb = category(b);
    if (ca != cb) return ca > cb ? a : b;
    if (ca == 2) {
        if (a == CN_F64 || b == CN_F64) return CN_F64;
        if (a == CN_F32 || b == CN_F32) return CN_F32;
        return CN_F32; /* f16 with bf16 */
    }
    /* integers */
    if (a == CN_I64 || b == CN_I64) return CN_I64;
    /* PyTorch gives int16 for u8 with i8; without an i16, the next wider. */
    if (a == CN_I32 || b == CN_I32 || a != b) return CN_I32;
    return a;
}

cn_dtype cn_result_type(const cn_tensor *a, const cn_tensor *b) {
    cn_dtype da = (cn_dtype)a->dtype, db = (cn_dtype)b->dtype;
    bool za = a->ndim == 0, zb = b->ndim == 0;
    if (za == zb) return cn_promote_types(da, db);
    /* A rank-0 operand only matters when it is of a higher category. */
    const cn_tensor *dim = za ? b : a, *zero = za ? a : b;
    cn_dtype dd = (cn_dtype)dim->dtype, dz = (cn_dtype)zero->dtype;
    return category(dz) > category(dd) ? dz : dd;
}

/* ---- half precision ---- */

static inline uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static inline float bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

uint16_t cn_f32_to_f16(float x) {
    uint32_t u = f32_bits(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu >= 0x7f800000u) /* Inf or NaN (keep a quiet NaN) */
        return (uint16_t)(sign | 0x7c00u | (absu > 0x7f800000u ? 0x200u | ((absu >> 13) & 0x3ffu) : 0));
    if (absu >= 0x477ff000u) /* rounds to >= 65520: overflow */
        return (uint16_t)(sign | 0x7c00u);
    if (absu < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        /* Add to 0.5 so the FPU rounds at the half-subnormal quantum (2^-24). */
        float f = bits_f32(absu) + 0.5f;
        return (uint16_t)(sign | (f32_bits(f) - 0x3f000000u));
    }
    uint32_t mant_odd = (absu >> 13) & 1u;
    absu += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) and round to nearest even */
    return (uint16_t)(sign | (absu >> 13));
}

float cn_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) /* Inf, or NaN made quiet as IEEE conversions do */
        return bits_f32(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));
    if (exp == 0) { /* zero or subnormal: mant * 2^-24 */
        float f = (float)mant * 5.9604644775390625e-08f;
        return sign ? -f : f;
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t cn_f32_to_bf16(float x) { return cn_bf16_round(x); }

float cn_bf16_to_f32(uint16_t h) { return cn_bf16_widen(h); }

/* ---- generic element access ---- */

double cn_load_f64(const void *p, cn_dtype dt, int64_t i) {
    switch (dt) {
    case CN_F32: return ((const float *)p)[i];
    case CN_F64: return ((const double *)p)[i];
    case CN_F16: return cn_f16_to_f32(((const uint16_t *)p)[i]);
    case CN_BF16: return cn_bf16_to_f32(((const uint16_t *)p)[i]);
    case CN_I32: return ((const int32_t *)p)[i];
    case CN_I64: return (double)((const int64_t *)p)[i];
    case CN_U8: return ((const uint8_t *)p)[i];
    case CN_BOOL: return ((const uint8_t *)p)[i] != 0;
    case CN_I8: return ((const int8_t *)p)[i];
    default: return NAN;
    }
}

/* float -> int conversions of out-of-range values are undefined in C; clamp
 * them (NaN -> 0) so hostile data cannot trigger UB. */
static int64_t f64_to_i64(double v) {
    if (!(v == v)) return 0;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)v;
}

void cn_store_f64(void *p, cn_dtype dt, int64_t i, double v) {
    switch (dt) {
    case CN_F32: ((float *)p)[i] = (float)v; break;
    case CN_F64: ((double *)p)[i] = v; break;
    case CN_F16: ((uint16_t *)p)[i] = cn_f32_to_f16((float)v); break;
    case CN_BF16: ((uint16_t *)p)[i] = cn_f32_to_bf16((float)v); break;
    case CN_I32: ((int32_t *)p)[i] = (int32_t)f64_to_i64(v); break;
    case CN_I64: ((int64_t *)p)[i] = f64_to_i64(v); break;
    case CN_U8: ((uint8_t *)p)[i] = (uint8_t)f64_to_i64(v); break;
    case CN_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case CN_I8: ((int8_t *)p)[i] = (int8_t)f64_to_i64(v); break;
    default: break;
    }
}

int64_t cn_load_i64(const void *p, cn_dtype dt, int64_t i) {
    switch (dt) {
    case CN_I32: return ((const int32_t *)p)[i];
    case CN_I64: return ((const int64_t *)p)[i];
    case CN_U8: return ((const uint8_t *)p)[i];
    case CN_BOOL: return ((const uint8_t *)p)[i] != 0;
    case CN_I8: return ((const int8_t *)p)[i];
    default: return f64_to_i64(cn_load_f64(p, dt, i));
    }
}

void cn_store_i64(void *p, cn_dtype dt, int64_t i, int64_t v) {
    switch (dt) {
    case CN_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case CN_I64: ((int64_t *)p)[i] = v; break;
    case CN_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case CN_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case CN_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    default: cn_store_f64(p, dt, i, (double)v); break;
    }
}
