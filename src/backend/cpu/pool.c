/* Pooling kernels: direct loops over the windows of one plane (n, c), the
 * planes split across the pool. Windows follow PyTorch's CPU kernels
 * exactly (which taps count, what the average divides by), since the tests
 * compare against them. */
#include "pool.h"
#include "reduce.h"

#include "kernels.h"
#include "pool_max2x2.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>

static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

typedef struct pool_ctx {
    const cn_pool_geom *g;
    const char *x;
    int64_t sn, sc, sh, sw; /* input strides, in elements */
    char *y;
    int64_t *idx;
    const char *dy; /* max pooling's gradient: dy (strides gn..gw) into dx */
    int64_t gn, gc, gh, gw;
    char *dx;
    atomic_int failed;
} pool_ctx;

static void init_ctx(pool_ctx *c, const cn_pool_geom *g, const cn_tensor *x, cn_tensor *y) {
    c->g = g;
    c->x = x ? cn_t_ptr(x) : NULL;
    if (x) {
        c->sn = x->strides[0];
        c->sc = x->strides[1];
        c->sh = x->strides[2];
        c->sw = x->strides[3];
    }
    c->y = y ? cn_t_ptr(y) : NULL;
    c->idx = NULL;
    c->dy = NULL;
    c->dx = NULL;
    atomic_init(&c->failed, 0);
}

static int pool_oom(const char *op, const cn_pool_geom *g) {
    return cn_failc(CN_ENOMEM, "%s: out of memory (output width %" PRId64 ")", op, g->OW);
}

/* Planes per chunk: enough work (about CN_GRAIN elements touched) to be
 * worth a thread. */
static void run_planes(const cn_pool_geom *g, int64_t work_per_plane, cn_range_fn fn, void *ctx) {
    int64_t grain = imax(1, 32768 / imax(1, work_per_plane));
    cn_parallel_for(g->N * g->C, grain, fn, ctx);
}

/* Adaptive windows: [floor(o in / out), ceil((o + 1) in / out)). */
static inline int64_t ad_start(int64_t o, int64_t out, int64_t in) { return o * in / out; }
static inline int64_t ad_end(int64_t o, int64_t out, int64_t in) {
    return ((o + 1) * in + out - 1) / out;
}

/* For kernel column offset off (= j dw - pw), the outputs ow whose tap
 * ow sw + off lies in [0, W): [lo, hi). */
static void tap_cols(int64_t W, int64_t sw, int64_t off, int64_t OW, int64_t *lo, int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + sw - 1) / sw;
    int64_t h = W - off <= 0 ? 0 : (W - off + sw - 1) / sw;
    *lo = imin(l, OW);
    *hi = imax(imin(h, OW), *lo);
}

/* Scratch rows of max pooling: the running maximum and its position for
 * one output row, each kernel column's valid outputs, and each window's
 * first valid column (PyTorch's index when no tap beats -inf). */
typedef struct max_rows {
    void *m, *ix, *v;
    int64_t *lo, *hi, *first;
} max_rows;

static bool max_rows_init(max_rows *r, const cn_pool_geom *g, size_t es) {
    /* m, then ix (as wide as m), then v (a row of the input, then its even
     * and its odd columns) */
    r->m = cn_alloc(es * (size_t)(2 * g->OW + 2 * g->W + 2));
    r->first = cn_alloc(sizeof(int64_t) * (size_t)(g->OW + 2 * g->kw));
    if (!r->m || !r->first) {
        cn_free(r->m);
        cn_free(r->first);
        return false;
    }
    r->ix = (char *)r->m + es * (size_t)g->OW;
    r->v = (char *)r->m + 2 * es * (size_t)g->OW;
    r->lo = r->first + g->OW;
    r->hi = r->lo + g->kw;
    for (int64_t j = 0; j < g->kw; j++)
        tap_cols(g->W, g->sw, j * g->dw - g->pw, g->OW, &r->lo[j], &r->hi[j]);
    for (int64_t ow = 0; ow < g->OW; ow++) {
        int64_t w0 = ow * g->sw - g->pw;
        while (w0 < 0) w0 += g->dw;
        r->first[ow] = w0;
    }
    return true;
}

static void max_rows_free(max_rows *r) {
    cn_free(r->m);
    cn_free(r->first);
}

/* The row positions are kept in an integer as wide as T (IT), so the
 * compare-and-select loop vectorises with one lane width: int32_t for f32
 * planes of fewer than 2^31 elements. */
#define DEFINE_MAX(T, IT, SFX)                                                                        \
    /* One output row: the maxima (and with ix their positions) over the \
     * window rows h0, h0 + dh, ... < h1, taps in PyTorch's order (row by \
     * row, left to right), a NaN always taking over. */                                          \
    CN_HOT_FN(max_row_##SFX,                                                                       \
              (const cn_pool_geom *g, const pool_ctx *c, const T *x, int64_t h0, int64_t h1,       \
               max_rows *r, bool want_ix),                                                         \
              (g, c, x, h0, h1, r, want_ix)) {                                                     \
        /* locals: the stores to ix (int64_t) could otherwise alias g's fields */                 \
        const int64_t OW = g->OW, W = g->W, kw = g->kw, dh = g->dh, dw = g->dw, pw = g->pw;        \
        const int64_t psw = g->sw, xsh = c->sh, xsw = c->sw;                                       \
        const int64_t *lo_ = r->lo, *hi_ = r->hi, *first = r->first;                               \
        T *restrict m = r->m;                                                                      \
        IT *restrict ix = r->ix;                                                              \
        for (int64_t ow = 0; ow < OW; ow++) m[ow] = -INFINITY;                                     \
        if (want_ix)                                                                               \
            for (int64_t ow = 0; ow < OW; ow++) ix[ow] = (IT)(h0 * W + first[ow]);                       \
        for (int64_t ih = h0; ih < h1; ih += dh)                                                   \
            for (int64_t j = 0; j < kw; j++) {                                                     \
                const int64_t off = j * dw - pw, lo = lo_[j], hi = hi_[j];                         \
                const T *xr = x + ih * xsh;                                                        \
                const int64_t st = psw * xsw, o = off * xsw;                                \
                const IT base = (IT)(ih * W + off), step = (IT)psw;                  \
                if (want_ix) {                                                                     \
                    for (int64_t ow = lo; ow < hi; ow++) {                                         \
                        T v = xr[ow * st + o];                                                     \
                        bool take = v > m[ow] || v != v;                                           \
                        m[ow] = take ? v : m[ow];                                                  \
                        ix[ow] = take ? base + (IT)ow * step : ix[ow];                                  \
                    }                                                                              \
                } else if (st == 1) {                                                              \
                    for (int64_t ow = lo; ow < hi; ow++) {                                         \
                        T v = xr[ow + o];                                                          \
                        m[ow] = v > m[ow] || v != v ? v : m[ow];                                   \
                    }                                                                              \
                } else {                                                                           \
                    for (int64_t ow = lo; ow < hi; ow++) {                                         \
                        T v = xr[ow * st + o];                                                     \
                        m[ow] = v > m[ow] || v != v ? v : m[ow];                                   \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
    }                                                                                              \
                                                                                                   \
    /* The values alone (no positions), rows of unit stride: the window's \
     * rows folded first into v, one pass over each input row, then the   \
     * kernel columns over v: kh + kw passes where max_row makes kh x kw,  \
     * each of its taps strided by the pool's stride (ResNet's 3x3/2 pool  \
     * ran at 5 GB/s). A NaN still takes over; which of +0 and -0 a window \
     * holding both returns may differ from PyTorch's order, which         \
     * max_row keeps for the positions. */                                \
    CN_HOT_FN(max_row_sep_##SFX,                                                                   \
              (const cn_pool_geom *g, const pool_ctx *c, const T *x, int64_t h0, int64_t h1,       \
               max_rows *r),                                                                       \
              (g, c, x, h0, h1, r)) {                                                              \
        const int64_t OW = g->OW, W = g->W, kw = g->kw, dh = g->dh, dw = g->dw, pw = g->pw;        \
        const int64_t psw = g->sw, xsh = c->sh;                                                    \
        T *restrict m = r->m, *restrict v = r->v;                                                  \
        for (int64_t ow = 0; ow < OW; ow++) m[ow] = -INFINITY;                                     \
        if (h0 >= h1) return;                                                                      \
        const T *x0 = x + h0 * xsh;                                                                \
        for (int64_t w = 0; w < W; w++) v[w] = x0[w];                                              \
        for (int64_t ih = h0 + dh; ih < h1; ih += dh) {                                            \
            const T *restrict xr = x + ih * xsh;                                                   \
            for (int64_t w = 0; w < W; w++) v[w] = CN_NANMAX(v[w], xr[w]);                         \
        }                                                                                          \
        /* Stride 2: v split into its even and odd columns, so that tap j \
         * (column 2 ow + off) reads a half at ow + floor(off / 2), with  \
         * unit stride as at stride 1. */                                  \
        const bool split = psw == 2 && dw == 1;                                                    \
        T *restrict ve = v + W, *restrict vo = ve + (W + 1) / 2;                                   \
        if (split) {                                                                               \
            for (int64_t w = 0; w < (W + 1) / 2; w++) ve[w] = v[2 * w];                            \
            for (int64_t w = 0; w < W / 2; w++) vo[w] = v[2 * w + 1];                              \
        }                                                                                          \
        for (int64_t j = 0; j < kw; j++) {                                                         \
            const int64_t off = j * dw - pw, lo = r->lo[j], hi = r->hi[j];                         \
            if (psw == 1 || split) {                                                               \
                const T *restrict hv = psw == 1 ? v : off & 1 ? vo : ve;                           \
                const int64_t sh = psw == 1 ? off : (off - (off & 1)) / 2;                         \
                for (int64_t ow = lo; ow < hi; ow++) m[ow] = CN_NANMAX(m[ow], hv[ow + sh]);        \
            } else {                                                                               \
                for (int64_t ow = lo; ow < hi; ow++) m[ow] = CN_NANMAX(m[ow], v[ow * psw + off]);  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* The CNN's pool: 2x2 windows, stride 2, no padding, rows of unit     \
     * stride. All four taps in one pass over an output row (the general   \
     * path makes a pass per tap, which is mostly overhead on short rows). \
     * Taps in PyTorch's order; a NaN takes over. f32 mostly takes the   \
     * vectorised kernel of pool_max2x2.c instead (max2x2_planes). */                             \
    CN_HOT_FN(max_2x2_row_##SFX,                                                                   \
              (const T *restrict r0, const T *restrict r1, int64_t OW, IT first, IT W,             \
               T *restrict m, IT *restrict ix),                                                    \
              (r0, r1, OW, first, W, m, ix)) {                                                     \
        for (int64_t ow = 0; ow < OW; ow++) {                                                      \
            T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];              \
            T v = a;                                                                               \
            IT k = 0;                                                                              \
            bool t = b > v || b != b;                                                              \
            v = t ? b : v;                                                                         \
            k = t ? 1 : k;                                                                         \
            t = c > v || c != c;                                                                   \
            v = t ? c : v;                                                                         \
            k = t ? W : k;                                                                         \
            t = d > v || d != d;                                                                   \
            v = t ? d : v;                                                                         \
            k = t ? W + 1 : k;                                                                     \
            m[ow] = v;                                                                             \
            ix[ow] = first + 2 * (IT)ow + k;                                                       \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* Max pooling over planes [b, e): y (values), idx (positions), or with \
     * dy the gradient dx (dy added at each window's maximum). */                                 \
    static void max_planes_##SFX(void *p, int64_t b, int64_t e) {                                  \
        pool_ctx *c = p;                                                                           \
        const cn_pool_geom *g = c->g;                                                              \
        max_rows r;                                                                                \
        if (!max_rows_init(&r, g, sizeof(T))) {                                                    \
            atomic_store(&c->failed, 1);                                                           \
            return;                                                                                \
        }                                                                                          \
        bool want_ix = c->idx || c->dy;                                                            \
        /* (the values alone are as fast on the general path) */                                  \
        bool two = want_ix && g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 &&              \
                   g->ph == 0 && g->pw == 0 && g->dh == 1 && g->dw == 1 && c->sw == 1 &&           \
                   2 * g->OH <= g->H && 2 * g->OW <= g->W; /* no window cut by ceil_mode */         \
        for (int64_t pl = b; pl < e; pl++) {                                                       \
            const T *x = (const T *)c->x + (pl / g->C) * c->sn + (pl % g->C) * c->sc;              \
            T *y = c->y ? (T *)c->y + pl * g->OH * g->OW : NULL;                                   \
            int64_t *ix = c->idx ? c->idx + pl * g->OH * g->OW : NULL;                             \
            const T *dy = c->dy ? (const T *)c->dy + (pl / g->C) * c->gn + (pl % g->C) * c->gc     \
                                : NULL;                                                            \
            T *dx = c->dx ? (T *)c->dx + pl * g->H * g->W : NULL;                                  \
            if (dx) memset(dx, 0, sizeof(T) * (size_t)(g->H * g->W));                             \
            for (int64_t oh = 0; oh < g->OH; oh++) {                                               \
                if (two) {                                                                         \
                    const T *r0 = x + 2 * oh * c->sh;                                              \
                    max_2x2_row_##SFX(r0, r0 + c->sh, g->OW, (IT)(2 * oh * g->W), (IT)g->W, r.m,  \
                                      r.ix);                                                       \
                } else {                                                                           \
                    int64_t h0 = oh * g->sh - g->ph;                                               \
                    int64_t h1 = imin(h0 + (g->kh - 1) * g->dh + 1, g->H);                         \
                    while (h0 < 0) h0 += g->dh;                                                    \
                    if (!want_ix && c->sw == 1 && g->kh > 1)                                       \
                        max_row_sep_##SFX(g, c, x, h0, h1, &r);                                    \
                    else                                                                           \
                        max_row_##SFX(g, c, x, h0, h1, &r, want_ix);                               \
                }                                                                                  \
                const T *m = r.m;                                                                  \
                if (y) memcpy(y + oh * g->OW, m, sizeof(T) * (size_t)g->OW);                       \
                const IT *rix = r.ix;                                                              \
                if (ix)                                                                            \
                    for (int64_t ow = 0; ow < g->OW; ow++) ix[oh * g->OW + ow] = rix[ow];          \
                if (dx)                                                                            \
                    for (int64_t ow = 0; ow < g->OW; ow++)                                         \
                        dx[rix[ow]] += dy[oh * c->gh + ow * c->gw];                               \
            }                                                                                      \
        }                                                                                          \
        max_rows_free(&r);                                                                         \
    }

DEFINE_MAX(float, int32_t, f32)
DEFINE_MAX(float, int64_t, f32l)
DEFINE_MAX(double, int64_t, f64)

#define DEFINE_POOL(T, SFX)                                                                        \
    /* The window of output (oh, ow) clipped to the input, and its divisor. */                    \
    static inline T avg_window_##SFX(const cn_pool_geom *g, int64_t oh, int64_t ow, int64_t *h0,   \
                                     int64_t *h1, int64_t *w0, int64_t *w1) {                      \
        int64_t a = oh * g->sh - g->ph, bb = ow * g->sw - g->pw;                                   \
        int64_t ae = imin(a + g->kh, g->H + g->ph), be = imin(bb + g->kw, g->W + g->pw);           \
        int64_t pool = (ae - a) * (be - bb);                                                       \
        *h0 = imax(a, 0), *w0 = imax(bb, 0), *h1 = imin(ae, g->H), *w1 = imin(be, g->W);           \
        if (g->divisor > 0) return (T)g->divisor;                                                  \
        if (g->count_include_pad) return (T)pool;                                                  \
        return (T)((*h1 - *h0) * (*w1 - *w0));                                                     \
    }                                                                                              \
                                                                                                   \
    static void avg_planes_##SFX(void *p, int64_t b, int64_t e) {                                  \
        pool_ctx *c = p;                                                                           \
        const cn_pool_geom *g = c->g;                                                              \
        for (int64_t pl = b; pl < e; pl++) {                                                       \
            const T *x = (const T *)c->x + (pl / g->C) * c->sn + (pl % g->C) * c->sc;              \
            T *y = (T *)c->y + pl * g->OH * g->OW;                                                 \
            for (int64_t oh = 0; oh < g->OH; oh++)                                                 \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                           \
                    int64_t h0, h1, w0, w1;                                                        \
                    T div = avg_window_##SFX(g, oh, ow, &h0, &h1, &w0, &w1);                       \
                    if (h0 >= h1 || w0 >= w1) {                                                    \
                        *y++ = 0;                                                                  \
                        continue;                                                                  \
                    }                                                                              \
                    double s = 0;                                                                  \
                    for (int64_t ih = h0; ih < h1; ih++)                                           \
                        for (int64_t iw = w0; iw < w1; iw++) s += x[ih * c->sh + iw * c->sw];      \
                    *y++ = (T)(s / div);                                                           \
                }                                                                                  \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* dx (contiguous planes) from dy (c->x, strided), each output's gradient \
     * spread over its window. */                                                                  \
    static void avg_back_planes_##SFX(void *p, int64_t b, int64_t e) {                             \
        pool_ctx *c = p;                                                                           \
        const cn_pool_geom *g = c->g;                                                              \
        for (int64_t pl = b; pl < e; pl++) {                                                       \
            const T *dy = (const T *)c->x + (pl / g->C) * c->sn + (pl % g->C) * c->sc;             \
            T *dx = (T *)c->y + pl * g->H * g->W;                                                  \
            memset(dx, 0, sizeof(T) * (size_t)(g->H * g->W));                                     \
            for (int64_t oh = 0; oh < g->OH; oh++)                                                 \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                           \
                    int64_t h0, h1, w0, w1;                                                        \
                    T div = avg_window_##SFX(g, oh, ow, &h0, &h1, &w0, &w1);                       \
                    T v = dy[oh * c->sh + ow * c->sw] / div;                                       \
                    for (int64_t ih = h0; ih < h1; ih++)                                           \
                        for (int64_t iw = w0; iw < w1; iw++) dx[ih * g->W + iw] += v;              \
                }                                                                                  \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void adaptive_planes_##SFX(void *p, int64_t b, int64_t e) {                             \
        pool_ctx *c = p;                                                                           \
        const cn_pool_geom *g = c->g;                                                              \
        for (int64_t pl = b; pl < e; pl++) {                                                       \
            const T *x = (const T *)c->x + (pl / g->C) * c->sn + (pl % g->C) * c->sc;              \
            T *y = (T *)c->y + pl * g->OH * g->OW;                                                 \
            for (int64_t oh = 0; oh < g->OH; oh++) {                                               \
                int64_t h0 = ad_start(oh, g->OH, g->H), h1 = ad_end(oh, g->OH, g->H);              \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                           \
                    int64_t w0 = ad_start(ow, g->OW, g->W), w1 = ad_end(ow, g->OW, g->W);          \
                    double s = 0;                                                                  \
                    for (int64_t ih = h0; ih < h1; ih++)                                           \
                        for (int64_t iw = w0; iw < w1; iw++) s += x[ih * c->sh + iw * c->sw];      \
                    *y++ = (T)(s / (double)((h1 - h0) * (w1 - w0)));                               \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void adaptive_back_planes_##SFX(void *p, int64_t b, int64_t e) {                        \
        pool_ctx *c = p;                                                                           \
        const cn_pool_geom *g = c->g;                                                              \
        for (int64_t pl = b; pl < e; pl++) {                                                       \
            const T *dy = (const T *)c->x + (pl / g->C) * c->sn + (pl % g->C) * c->sc;             \
            T *dx = (T *)c->y + pl * g->H * g->W;                                                  \
            memset(dx, 0, sizeof(T) * (size_t)(g->H * g->W));                                     \
            for (int64_t oh = 0; oh < g->OH; oh++) {                                               \
                int64_t h0 = ad_start(oh, g->OH, g->H), h1 = ad_end(oh, g->OH, g->H);              \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                           \
                    int64_t w0 = ad_start(ow, g->OW, g->W), w1 = ad_end(ow, g->OW, g->W);          \
                    T v = dy[oh * c->sh + ow * c->sw] / (T)((h1 - h0) * (w1 - w0));                \
                    for (int64_t ih = h0; ih < h1; ih++)                                           \
                        for (int64_t iw = w0; iw < w1; iw++) dx[ih * g->W + iw] += v;              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

DEFINE_POOL(float, f32)
DEFINE_POOL(double, f64)

#define PICK(name, dt) ((dt) == CN_F32 ? name##_f32 : name##_f64)

/* 2x2 windows with stride 2 in f32: pool_max2x2.c (c->dx: the backward pass). */
static void max2x2_planes(void *p, int64_t b, int64_t e) {
    const pool_ctx *c = p;
    if (c->dx)
        cn_max2x2_bwd_f32(c->g, (const float *)c->x, c->sn, c->sc, c->sh, (const float *)c->dy,
                          c->gn, c->gc, c->gh, b, e, (float *)c->dx);
    else
        cn_max2x2_fwd_f32(c->g, (const float *)c->x, c->sn, c->sc, c->sh, b, e, (float *)c->y,
                          c->idx);
}

static cn_range_fn max_fn(const cn_pool_geom *g, cn_dtype dt) {
    if (dt == CN_F64) return max_planes_f64;
    return g->H * g->W <= INT32_MAX ? max_planes_f32 : max_planes_f32l;
}

int cn_cpu_max_pool2d(const cn_pool_geom *g, const cn_tensor *x, cn_tensor *y, cn_tensor *idx) {
    pool_ctx c;
    init_ctx(&c, g, x, y);
    c.idx = idx ? cn_t_ptr(idx) : NULL;
    cn_range_fn fn = max_fn(g, (cn_dtype)x->dtype);
    if (x->dtype == CN_F32 && cn_max2x2_applies(g, c.sw, 1)) fn = max2x2_planes;
    run_planes(g, g->OH * g->OW * g->kh * g->kw, fn, &c);
    return atomic_load(&c.failed) ? pool_oom("max_pool2d", g) : CN_OK;
}

int cn_cpu_max_pool2d_backward(const cn_pool_geom *g, const cn_tensor *x, const cn_tensor *dy,
                               cn_tensor *dx) {
    pool_ctx c;
    init_ctx(&c, g, x, NULL);
    c.dy = cn_t_ptr(dy);
    c.gn = dy->strides[0];
    c.gc = dy->strides[1];
    c.gh = dy->strides[2];
    c.gw = dy->strides[3];
    c.dx = cn_t_ptr(dx);
    cn_range_fn fn = max_fn(g, (cn_dtype)x->dtype);
    if (x->dtype == CN_F32 && cn_max2x2_applies(g, c.sw, c.gw)) fn = max2x2_planes;
    run_planes(g, g->H * g->W + g->OH * g->OW * g->kh * g->kw, fn, &c);
    return atomic_load(&c.failed) ? pool_oom("max_pool2d_backward", g) : CN_OK;
}

int cn_cpu_avg_pool2d(const cn_pool_geom *g, const cn_tensor *x, cn_tensor *y) {
    pool_ctx c;
    init_ctx(&c, g, x, y);
    run_planes(g, g->OH * g->OW * g->kh * g->kw, PICK(avg_planes, (cn_dtype)x->dtype), &c);
    return CN_OK;
}

int cn_cpu_avg_pool2d_backward(const cn_pool_geom *g, const cn_tensor *dy, cn_tensor *dx) {
    pool_ctx c;
    init_ctx(&c, g, dy, dx);
    run_planes(g, g->H * g->W + g->OH * g->OW * g->kh * g->kw,
               PICK(avg_back_planes, (cn_dtype)dy->dtype), &c);
    return CN_OK;
}

int cn_cpu_adaptive_avg_pool2d(const cn_pool_geom *g, const cn_tensor *x, cn_tensor *y) {
    pool_ctx c;
    init_ctx(&c, g, x, y);
    run_planes(g, g->H * g->W + g->OH * g->OW, PICK(adaptive_planes, (cn_dtype)x->dtype), &c);
    return CN_OK;
}

int cn_cpu_adaptive_avg_pool2d_backward(const cn_pool_geom *g, const cn_tensor *dy,
                                        cn_tensor *dx) {
    pool_ctx c;
    init_ctx(&c, g, dy, dx);
    run_planes(g, g->H * g->W + g->OH * g->OW, PICK(adaptive_back_planes, (cn_dtype)dy->dtype),
               &c);
    return CN_OK;
}

/* ---- the op kernels (kernels.h) ----
 * Attributes (canonical after the ops' infer, src/ops/pool.c): the max
 * pools' list = [kh, kw, sh, sw, ph, pw, dh, dw] (nwin 8); avg_pool2d's
 * the first six (nwin 6; avg_pool2d_backward appends the input's [H, W]),
 * i[1] = count_include_pad, i[2] = divisor_override (0: none). */

/* The geometry of pooling x into y. */
static cn_pool_geom pool_geom_of(const cn_attrs *a, int nwin, const cn_tensor *x,
                                 const cn_tensor *y) {
    const int64_t *l = a->list;
    cn_pool_geom g = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], y->shape[2],
                      y->shape[3], l[0], l[1], l[2], l[3], l[4], l[5],
                      nwin == 8 ? l[6] : 1, nwin == 8 ? l[7] : 1, a->i[1] != 0, a->i[2]};
    return g;
}

/* Adaptive pooling's: the windows follow from the two sizes alone. */
static cn_pool_geom adaptive_geom_of(const cn_tensor *x, const cn_tensor *y) {
    cn_pool_geom g = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], y->shape[2],
                      y->shape[3], 0, 0, 0, 0, 0, 0, 1, 1, false, 0};
    return g;
}

int cn_cpu_k_max_pool2d(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                        cn_tensor *out) {
    (void)id;
    (void)nin;
    cn_pool_geom g = pool_geom_of(a, 8, in[0], out);
    return cn_cpu_max_pool2d(&g, in[0], out, NULL);
}

/* x, dy -> dx. */
int cn_cpu_k_max_pool2d_backward(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                                 cn_tensor *out) {
    (void)id;
    (void)nin;
    cn_pool_geom g = pool_geom_of(a, 8, in[0], in[1]);
    return cn_cpu_max_pool2d_backward(&g, in[0], in[1], out);
}

int cn_cpu_k_max_pool2d_indices(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                                cn_tensor *out) {
    (void)id;
    (void)nin;
    cn_pool_geom g = pool_geom_of(a, 8, in[0], out);
    return cn_cpu_max_pool2d(&g, in[0], NULL, out);
}

int cn_cpu_k_avg_pool2d(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                        cn_tensor *out) {
    (void)id;
    (void)nin;
    cn_pool_geom g = pool_geom_of(a, 6, in[0], out);
    return cn_cpu_avg_pool2d(&g, in[0], out);
}

/* dy -> dx. */
int cn_cpu_k_avg_pool2d_backward(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                                 cn_tensor *out) {
    (void)id;
    (void)nin;
    cn_pool_geom g = pool_geom_of(a, 6, out, in[0]);
    return cn_cpu_avg_pool2d_backward(&g, in[0], out);
}

int cn_cpu_k_adaptive_avg_pool2d(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                                 cn_tensor *out) {
    (void)id;
    (void)nin;
    (void)a;
    cn_pool_geom g = adaptive_geom_of(in[0], out);
    return cn_cpu_adaptive_avg_pool2d(&g, in[0], out);
}

/* dy -> dx. */
int cn_cpu_k_adaptive_avg_pool2d_backward(cn_op_id id, cn_tensor *const *in, int nin,
                                          const cn_attrs *a, cn_tensor *out) {
    (void)id;
    (void)nin;
    (void)a;
    cn_pool_geom g = adaptive_geom_of(out, in[0]);
    return cn_cpu_adaptive_avg_pool2d_backward(&g, in[0], out);
}
