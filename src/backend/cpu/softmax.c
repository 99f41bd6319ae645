/* Softmax, log_softmax and cumsum on the CPU.
 *
 * The input is viewed as [outer, len, inner] with the axis in the middle
 * (copied to row-major first if it is not). inner == 1 (the last axis): one
 * row per output row. inner > 1: tiles of up to TILE neighbouring columns
 * are walked down the axis together, so every load is a contiguous row.
 * Each output depends only on its own line of input and is computed by one
 * thread, so the results are the same for any thread count. */
#include "reduce.h"

#include "kernels.h"
#include "vmath.h"

#include <math.h>

#define TILE 256
#define SUB 64       /* rows summed in the input type before going to double */
#define GRAIN 32768  /* elements of work worth a thread */
#define LANES 32
#define CHUNK 512

typedef struct line_job {
    const char *x;
    char *y;
    int64_t outer, len, inner, ntiles;
    bool log;
} line_job;

/* Row and column kernels for one float type. Softmax stores e^(x - max)
 * while summing, then scales by 1/sum; log_softmax writes
 * (x - max) - log(sum). A row of -inf (or one holding NaN) gives NaN, like
 * PyTorch. */
#define DEF_SOFTMAX(T, S, EXPF)                                                                    \
    /* The row's max and the sum of its values: 32 lanes, groups of 4,                             \
     * single elements (sums chunk by chunk, chunk sums in double). */                             \
    static inline T row_max_##S(const T *x, int64_t n) {                                           \
        T h[4] = {x[0], x[0], x[0], x[0]};                                                         \
        int64_t i = 0;                                                                             \
        if (n >= LANES) {                                                                          \
            T a[LANES];                                                                            \
            for (int j = 0; j < LANES; j++) a[j] = x[j];                                           \
            for (i = LANES; i + LANES <= n; i += LANES)                                            \
                for (int j = 0; j < LANES; j++) a[j] = CN_NANMAX(a[j], x[i + j]);                  \
            CN_FOLD32_TO4(T, a, h, CN_NANMAX);                                                     \
        }                                                                                          \
        for (; i + 4 <= n; i += 4)                                                                 \
            for (int j = 0; j < 4; j++) h[j] = CN_NANMAX(h[j], x[i + j]);                          \
        for (; i < n; i++) h[0] = CN_NANMAX(h[0], x[i]);                                           \
        return CN_NANMAX(CN_NANMAX(h[0], h[1]), CN_NANMAX(h[2], h[3]));                            \
    }                                                                                              \
    static inline double row_sum_##S(const T *x, int64_t n) {                                      \
        double s = 0;                                                                              \
        for (int64_t c = 0; c < n; c += CHUNK) {                                                   \
            const T *q = x + c;                                                                    \
            const int64_t e = n - c < CHUNK ? n - c : CHUNK;                                       \
            T g[4] = {0, 0, 0, 0};                                                                 \
            int64_t i = 0;                                                                         \
            if (e >= LANES) {                                                                      \
                T a[LANES];                                                                        \
                for (int j = 0; j < LANES; j++) a[j] = q[j];                                       \
                for (i = LANES; i + LANES <= e; i += LANES)                                        \
                    for (int j = 0; j < LANES; j++) a[j] += q[i + j];                              \
                CN_FOLD32_TO4(T, a, g, CN_ADD);                                                    \
            }                                                                                      \
            for (; i + 4 <= e; i += 4)                                                             \
                for (int j = 0; j < 4; j++) g[j] += q[i + j];                                      \
            T t = (g[0] + g[2]) + (g[1] + g[3]);                                                   \
            for (; i < e; i++) t += q[i];                                                          \
            s += (double)t;                                                                        \
        }                                                                                          \
        return s;                                                                                  \
    }                                                                                              \
    /* e^(x - max) goes to y first (a plain loop, vectorised whole), is                            \
     * summed from there, then scaled; log_softmax overwrites it. */                               \
    CN_HOT_FN(sm_row_##S,                                                                          \
              (const T *restrict x, T *restrict y, int64_t n, bool lg),                            \
              (x, y, n, lg)) {                                                                     \
        const T m = row_max_##S(x, n);                                                             \
        for (int64_t i = 0; i < n; i++) y[i] = EXPF(x[i] - m);                                     \
        const double s = row_sum_##S(y, n);                                                        \
        if (lg) {                                                                                  \
            const T ls = (T)log(s);                                                                \
            for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) - ls;                                \
        } else {                                                                                   \
            const T inv = (T)(1.0 / s);                                                            \
            for (int64_t i = 0; i < n; i++) y[i] *= inv;                                           \
        }                                                                                          \
    }                                                                                              \
    /* Columns [0, tw) of a [len, inner] slab (row stride `inner`). */                             \
    CN_HOT_FN(sm_cols_##S,                                                                         \
              (const T *restrict x, T *restrict y, int64_t len, int64_t inner, int64_t tw,         \
               bool lg),                                                                           \
              (x, y, len, inner, tw, lg)) {                                                        \
        T m[TILE], t[TILE];                                                                        \
        double s[TILE];                                                                            \
        for (int64_t j = 0; j < tw; j++) {                                                         \
            m[j] = x[j];                                                                           \
            s[j] = 0;                                                                              \
        }                                                                                          \
        for (int64_t r = 1; r < len; r++) {                                                        \
            const T *row = x + r * inner;                                                          \
            for (int64_t j = 0; j < tw; j++) m[j] = CN_NANMAX(m[j], row[j]);                       \
        }                                                                                          \
        for (int64_t r0 = 0; r0 < len; r0 += SUB) {                                                \
            int64_t r1 = r0 + SUB < len ? r0 + SUB : len;                                          \
            for (int64_t j = 0; j < tw; j++) t[j] = 0;                                             \
            for (int64_t r = r0; r < r1; r++) {                                                    \
                const T *row = x + r * inner;                                                      \
                T *out = y + r * inner;                                                            \
                for (int64_t j = 0; j < tw; j++) {                                                 \
                    const T v = EXPF(row[j] - m[j]);                                               \
                    if (!lg) out[j] = v;                                                           \
                    t[j] += v;                                                                     \
                }                                                                                  \
            }                                                                                      \
            for (int64_t j = 0; j < tw; j++) s[j] += (double)t[j];                                 \
        }                                                                                          \
        for (int64_t j = 0; j < tw; j++) t[j] = lg ? (T)log(s[j]) : (T)(1.0 / s[j]);               \
        for (int64_t r = 0; r < len; r++) {                                                        \
            const T *row = x + r * inner;                                                          \
            T *out = y + r * inner;                                                                \
            if (lg)                                                                                \
                for (int64_t j = 0; j < tw; j++) out[j] = (row[j] - m[j]) - t[j];                  \
            else                                                                                   \
                for (int64_t j = 0; j < tw; j++) out[j] *= t[j];                                   \
        }                                                                                          \
    }                                                                                              \
    static void sm_range_##S(void *ctx, int64_t t0, int64_t t1) {                                  \
        const line_job *jb = ctx;                                                                  \
        const T *x = (const T *)jb->x;                                                             \
        T *y = (T *)jb->y;                                                                         \
        for (int64_t t = t0; t < t1; t++) {                                                        \
            if (jb->inner == 1) {                                                                  \
                sm_row_##S(x + t * jb->len, y + t * jb->len, jb->len, jb->log);                    \
                continue;                                                                          \
            }                                                                                      \
            int64_t o = t / jb->ntiles, j0 = t % jb->ntiles * TILE;                                \
            int64_t off = o * jb->len * jb->inner + j0;                                            \
            int64_t tw = jb->inner - j0 < TILE ? jb->inner - j0 : TILE;                            \
            sm_cols_##S(x + off, y + off, jb->len, jb->inner, tw, jb->log);                        \
        }                                                                                          \
    }

DEF_SOFTMAX(float, f32, cn_vexpf)
DEF_SOFTMAX(double, f64, exp)

/* Running sums; floats accumulate in double (as PyTorch does), integers
 * wrap. */
#define DEF_CUMSUM(T, S, ACC)                                                                      \
    CN_HOT_FN(cs_row_##S, (const T *restrict x, T *restrict y, int64_t n), (x, y, n)) {            \
        ACC a = 0;                                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                          \
            a += (ACC)x[i];                                                                        \
            y[i] = (T)a;                                                                           \
        }                                                                                          \
    }                                                                                              \
    CN_HOT_FN(cs_cols_##S,                                                                         \
              (const T *restrict x, T *restrict y, int64_t len, int64_t inner, int64_t tw),        \
              (x, y, len, inner, tw)) {                                                            \
        ACC a[TILE];                                                                               \
        for (int64_t j = 0; j < tw; j++) a[j] = 0;                                                 \
        for (int64_t r = 0; r < len; r++) {                                                        \
            const T *row = x + r * inner;                                                          \
            T *out = y + r * inner;                                                                \
            for (int64_t j = 0; j < tw; j++) {                                                     \
                a[j] += (ACC)row[j];                                                               \
                out[j] = (T)a[j];                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void cs_range_##S(void *ctx, int64_t t0, int64_t t1) {                                  \
        const line_job *jb = ctx;                                                                  \
        const T *x = (const T *)jb->x;                                                             \
        T *y = (T *)jb->y;                                                                         \
        for (int64_t t = t0; t < t1; t++) {                                                        \
            if (jb->inner == 1) {                                                                  \
                cs_row_##S(x + t * jb->len, y + t * jb->len, jb->len);                             \
                continue;                                                                          \
            }                                                                                      \
            int64_t o = t / jb->ntiles, j0 = t % jb->ntiles * TILE;                                \
            int64_t off = o * jb->len * jb->inner + j0;                                            \
            int64_t tw = jb->inner - j0 < TILE ? jb->inner - j0 : TILE;                            \
            cs_cols_##S(x + off, y + off, jb->len, jb->inner, tw);                                 \
        }                                                                                          \
    }

DEF_CUMSUM(float, f32, double)
DEF_CUMSUM(double, f64, double)
DEF_CUMSUM(uint64_t, u64, uint64_t) /* i64 viewed as unsigned: wrapping, no UB */

/* Run fn over the lines of x along axis (x made contiguous first). */
static int run_lines(const char *name, cn_tensor *out, cn_tensor *x, int axis, bool lg,
                     cn_range_fn fn) {
    if (cn_numel(out) == 0) return CN_OK;
    cn_tensor *c = cn_t_contiguous(x);
    if (!c) return cn_failc(CN_ENOMEM, "%s: cannot make the input contiguous", name);
    line_job jb = {cn_t_ptr(c), cn_t_ptr(out), 1, 1, 1, 1, lg};
    for (int d = 0; d < x->ndim; d++) {
        if (d < axis) jb.outer *= x->shape[d];
        else if (d == axis) jb.len = x->shape[d];
        else jb.inner *= x->shape[d];
    }
    if (jb.inner > 1) jb.ntiles = (jb.inner + TILE - 1) / TILE;
    int64_t ntasks = jb.outer * jb.ntiles;
    int64_t work = jb.len * (jb.inner > 1 ? (jb.inner < TILE ? jb.inner : TILE) : 1);
    cn_parallel_for(ntasks, work >= GRAIN ? 1 : GRAIN / work, fn, &jb);
    cn_release(c);
    return CN_OK;
}

int cn_cpu_softmax(const char *name, bool log, cn_tensor *out, cn_tensor *x, int axis) {
    switch (x->dtype) {
    case CN_F32: return run_lines(name, out, x, axis, log, sm_range_f32);
    case CN_F64: return run_lines(name, out, x, axis, log, sm_range_f64);
    default:
        return cn_failc(CN_EUNSUPPORTED, "%s: no kernel for dtype %s", name,
                        cn_dtype_name((cn_dtype)x->dtype));
    }
}

int cn_cpu_cumsum(const char *name, cn_tensor *out, cn_tensor *x, int axis) {
    switch (x->dtype) {
    case CN_F32: return run_lines(name, out, x, axis, false, cs_range_f32);
    case CN_F64: return run_lines(name, out, x, axis, false, cs_range_f64);
    case CN_I64: return run_lines(name, out, x, axis, false, cs_range_u64);
    default:
        return cn_failc(CN_EUNSUPPORTED, "%s: no kernel for dtype %s", name,
                        cn_dtype_name((cn_dtype)x->dtype));
    }
}

/* ---- the op kernels (kernels.h): i[0] = the axis (canonical) ---- */

/* softmax and log_softmax. */
int cn_cpu_k_softmax(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                     cn_tensor *out) {
    (void)nin;
    return cn_cpu_softmax(cn_op_names[id], id == CN_OP_log_softmax, out, in[0], (int)a->i[0]);
}

/* Integers and bools sum as i64. */
int cn_cpu_k_cumsum(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out) {
    (void)nin;
    cn_tensor *x = cn_cpu_widen_i64(in[0]);
    if (!x) return CN_ENOMEM;
    int r = cn_cpu_cumsum(cn_op_names[id], out, x, (int)a->i[0]);
    cn_release(x);
    return r;
}
