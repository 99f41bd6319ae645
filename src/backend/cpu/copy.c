/* Copies between any strides and any dtypes: contiguous, cast, copy_, and
 * the gather of a view into a fresh buffer. */
#include "iter.h"
#include "kernels.h"
#include "transpose.h"

#include "../../core/isa.h"

typedef struct copy_ctx {
    cn_dtype sd, dd;
    size_t es;
} copy_ctx;

static void copy_same(void *p, int64_t n, char **ptr, const int64_t *st) {
    copy_ctx *c = p;
    size_t es = c->es;
    if (st[0] == 1 && st[1] == 1) {
        memcpy(ptr[0], ptr[1], (size_t)n * es);
        return;
    }
    char *d = ptr[0];
    const char *s = ptr[1];
    int64_t ds = st[0] * (int64_t)es, ss = st[1] * (int64_t)es;
    switch (es) {
    case 1:
        for (int64_t i = 0; i < n; i++) d[i * ds] = s[i * ss];
        break;
    case 2:
        for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, 2);
        break;
    case 4:
        for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, 4);
        break;
    default:
        for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, 8);
        break;
    }
}

/* Typed conversion loops for the common pairs; the rest go through double
 * (or int64 between integer types, so no precision is lost). */
#define CONVERT_LOOP(DT, ST, EXPR)                                                                 \
    do {                                                                                           \
        DT *d = (DT *)ptr[0];                                                                      \
        const ST *s = (const ST *)ptr[1];                                                          \
        int64_t a = st[0], b = st[1];                                                              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            ST x = s[i * b];                                                                       \
            d[i * a] = (EXPR);                                                                     \
        }                                                                                          \
    } while (0)

/* f32 <-> bf16 rows, unit strides: autocast casts every product's inputs
 * to bf16 and back, and through cn_f32_to_bf16 (a call per element) those
 * casts were 20% of an mlp training step. That function's rounding
 * inline (cn_bf16_round, core.h), so that the loop vectorises; strided
 * rows (a transposed weight) use it inline too. */
CN_HOT_FN(f32_to_bf16_row, (int64_t n, uint16_t *restrict d, const float *restrict s),
          (n, d, s)) {
    for (int64_t i = 0; i < n; i++) d[i] = cn_bf16_round(s[i]);
}

CN_HOT_FN(bf16_to_f32_row, (int64_t n, float *restrict d, const uint16_t *restrict s),
          (n, d, s)) {
    for (int64_t i = 0; i < n; i++) d[i] = cn_bf16_widen(s[i]);
}

static void copy_convert(void *p, int64_t n, char **ptr, const int64_t *st) {
    copy_ctx *c = p;
    cn_dtype sd = c->sd, dd = c->dd;
    if (st[0] == 1 && st[1] == 1) {
        if (sd == CN_F32 && dd == CN_BF16) {
            f32_to_bf16_row(n, (uint16_t *)ptr[0], (const float *)ptr[1]);
            return;
        }
        if (sd == CN_BF16 && dd == CN_F32) {
            bf16_to_f32_row(n, (float *)ptr[0], (const uint16_t *)ptr[1]);
            return;
        }
    }
    if (sd == CN_F32 && dd == CN_F64) { CONVERT_LOOP(double, float, (double)x); return; }
    if (sd == CN_F64 && dd == CN_F32) { CONVERT_LOOP(float, double, (float)x); return; }
    if (sd == CN_U8 && dd == CN_F32) { CONVERT_LOOP(float, uint8_t, (float)x); return; }
    if (sd == CN_I8 && dd == CN_F32) { CONVERT_LOOP(float, int8_t, (float)x); return; }
    if (sd == CN_I8 && dd == CN_I32) { CONVERT_LOOP(int32_t, int8_t, (int32_t)x); return; }
    if (sd == CN_U8 && dd == CN_I32) { CONVERT_LOOP(int32_t, uint8_t, (int32_t)x); return; }
    if (sd == CN_BOOL && dd == CN_F32) { CONVERT_LOOP(float, uint8_t, x ? 1.0f : 0.0f); return; }
    if (sd == CN_I64 && dd == CN_F32) { CONVERT_LOOP(float, int64_t, (float)x); return; }
    if (sd == CN_I32 && dd == CN_F32) { CONVERT_LOOP(float, int32_t, (float)x); return; }
    if (sd == CN_I32 && dd == CN_I64) { CONVERT_LOOP(int64_t, int32_t, (int64_t)x); return; }
    if (sd == CN_U8 && dd == CN_I64) { CONVERT_LOOP(int64_t, uint8_t, (int64_t)x); return; }
    if (sd == CN_F16 && dd == CN_F32) { CONVERT_LOOP(float, uint16_t, cn_f16_to_f32(x)); return; }
    if (sd == CN_F32 && dd == CN_F16) { CONVERT_LOOP(uint16_t, float, cn_f32_to_f16(x)); return; }
    if (sd == CN_BF16 && dd == CN_F32) { CONVERT_LOOP(float, uint16_t, cn_bf16_to_f32(x)); return; }
    if (sd == CN_F32 && dd == CN_BF16) { CONVERT_LOOP(uint16_t, float, cn_bf16_round(x)); return; }
    if (dd == CN_BOOL && sd == CN_F32) { CONVERT_LOOP(uint8_t, float, x != 0); return; }
    bool ints = !cn_dtype_is_float(sd) && !cn_dtype_is_float(dd);
    for (int64_t i = 0; i < n; i++) {
        if (ints)
            cn_store_i64(ptr[0], dd, i * st[0], cn_load_i64(ptr[1], sd, i * st[1]));
        else
            cn_store_f64(ptr[0], dd, i * st[0], cn_load_f64(ptr[1], sd, i * st[1]));
    }
}

cn_tensor *cn_cpu_widened(const cn_tensor *t) {
    cn_tensor *w = cn_t_empty(CN_F32, t->ndim, t->shape);
    if (w && cn_transfer(w, t, false) != CN_OK) {
        cn_release(w);
        w = NULL;
    }
    return w;
}

int cn_copy_strided(cn_tensor *dst, const cn_tensor *src) {
    cn_iter it;
    cn_tensor *in = (cn_tensor *)src;
    cn_iter_init(&it, dst, &in, 1);
    copy_ctx c = {(cn_dtype)src->dtype, (cn_dtype)dst->dtype, cn_dsize((cn_dtype)dst->dtype)};
    if (cn_copy_transposed(&it, c.dd, c.sd)) return CN_OK;
    cn_iter_run(&it, c.sd == c.dd ? copy_same : copy_convert, &c);
    return CN_OK;
}
