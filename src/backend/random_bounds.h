/* What every backend's uniform draw needs from the host: the resolution of
 * each float dtype and the largest value of the dtype below hi (a draw that
 * rounds up to hi is replaced by it), so U[lo, hi) is the same bits on every
 * device. */
#ifndef CN_BACKEND_RANDOM_BOUNDS_H
#define CN_BACKEND_RANDOM_BOUNDS_H

#include "../core/core.h"

#include <math.h>

/* Significand digits of each float dtype: the resolution of a uniform draw. */
static inline int cn_uniform_bits(cn_dtype dt) {
    switch (dt) {
    case CN_F64: return 53;
    case CN_F16: return 11;
    case CN_BF16: return 8;
    default: return 24;
    }
}

/* Half types as float and back. */
static inline float cn_half_to_f32(uint16_t h, cn_dtype dt) {
    return dt == CN_F16 ? cn_f16_to_f32(h) : cn_bf16_to_f32(h);
}
static inline uint16_t cn_f32_to_half(float x, cn_dtype dt) {
    return dt == CN_F16 ? cn_f32_to_f16(x) : cn_f32_to_bf16(x);
}

/* The next value of a half type towards -inf (both formats order like
 * sign-magnitude integers). */
static inline uint16_t cn_half_down(uint16_t h) {
    if (h == 0) return 0x8001u;
    return (h & 0x8000u) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
}

/* The largest value below hi (lo when there is none above lo), per dtype. */
static inline double cn_uniform_top_f64(double lo, double hi) {
    return lo < hi ? nextafter(hi, -INFINITY) : lo;
}
static inline float cn_uniform_top_f32(double lo, double hi) {
    float t = (float)hi;
    if ((double)t >= hi) t = nextafterf(t, -INFINITY);
    return (double)t >= lo ? t : (float)lo;
}
static inline uint16_t cn_uniform_top_half(double lo, double hi, cn_dtype dt) {
    uint16_t h = cn_f32_to_half((float)hi, dt);
    if ((double)cn_half_to_f32(h, dt) >= hi) h = cn_half_down(h);
    return (double)cn_half_to_f32(h, dt) >= lo ? h : cn_f32_to_half((float)lo, dt);
}

#endif
