/* Convolution kernels: the reference loops and the im2col + GEMM path (see
 * conv.h); oneDNN, where the build has it, lives in conv_dnnl.c.
 *
 * The GEMM path works on contiguous copies of its inputs. For one sample n
 * and one group, with Kg = (C / groups) KH KW and P = OH OW output pixels:
 *   fwd:   y_g [Og, P]   = W_g [Og, Kg] cols [Kg, P]          (im2col of x)
 *   dgrad: cols [Kg, P]  = W_g^T [Kg, Og] dy_g [Og, P], then col2im into dx
 *   wgrad: W'_g [Og, Kg] += dy_g [Og, P] cols^T [P, Kg]
 * P is cut into tiles so the column buffer stays around L2's size whatever
 * the image. A 1x1 kernel with stride 1 and no padding needs no columns: x
 * itself is the matrix.
 *
 * The products run on the built-in GEMM, never BLAS: each output element is
 * then summed in one order whatever the thread count or the split of the
 * work (BLAS is only usable outside the pool's parallel regions, so which of
 * the two ran would depend on the thread count), and bench/bench_conv shows
 * the built-in one is as fast on these shapes. The weight gradient sums over
 * the batch in blocks fixed by N alone, added up in block order, so it too
 * gives the same bits for any thread count. A program's constant weights
 * come packed for the forward product (src/graph/packs.c), which then reads
 * them from their panels: the same bits again. */
#include "conv.h"

#include "kernels.h"

#include "epilogue.h"
#include "gemm.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif

static cn_conv_impl conv_impl = CN_CONV_AUTO;

int cn_conv_impl_from_name(const char *name) {
    static const char *const names[] = {"auto", "ref", "gemm", "dnnl", "depthwise"};
    for (int k = 0; name && k < (int)(sizeof names / sizeof names[0]); k++)
        if (!strcmp(name, names[k])) return k;
    return -1;
}

/* CN_CONV forces an implementation for the whole process, as
 * cn_conv_set_impl does (read once, before the first convolution picks). */
static pthread_once_t conv_env_once = PTHREAD_ONCE_INIT;
static void conv_env_read(void) {
    const char *e = getenv("CN_CONV");
    if (!e || !*e) return;
    int impl = cn_conv_impl_from_name(e);
    if (impl < 0)
        fprintf(stderr, "chutney: CN_CONV=%s is not auto, gemm, dnnl, depthwise or ref; using auto\n",
                e);
    else conv_impl = (cn_conv_impl)impl;
}

cn_conv_impl cn_conv_set_impl(cn_conv_impl impl) {
    pthread_once(&conv_env_once, conv_env_read);
    cn_conv_impl prev = conv_impl;
    conv_impl = impl;
    return prev;
}

/* ------------------------------------------------------------------------ */
/* Reference loops: one output element at a time, summed in double, reading */
/* the inputs through their strides.                                        */
/* ------------------------------------------------------------------------ */

#define AT4(p, t, a, b, c, d)                                                                      \
    (p)[(a) * (t)->strides[0] + (b) * (t)->strides[1] + (c) * (t)->strides[2] +                    \
        (d) * (t)->strides[3]]

#define DEFINE_REF(T, SFX)                                                                         \
    static void fwd_ref_##SFX(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *w,       \
                              const cn_tensor *b, cn_tensor *y) {                                  \
        const T *xp = cn_t_ptr(x), *wp = cn_t_ptr(w), *bp = b ? cn_t_ptr(b) : NULL;                \
        T *yp = cn_t_ptr(y);                                                                       \
        int64_t Cg = g->C / g->groups, Og = g->O / g->groups;                                      \
        for (int64_t n = 0; n < g->N; n++)                                                         \
            for (int64_t o = 0; o < g->O; o++)                                                     \
                for (int64_t oh = 0; oh < g->OH; oh++)                                             \
                    for (int64_t ow = 0; ow < g->OW; ow++) {                                       \
                        double acc = bp ? (double)bp[o * b->strides[0]] : 0.0;                     \
                        int64_t c0 = o / Og * Cg;                                                  \
                        for (int64_t c = 0; c < Cg; c++)                                           \
                            for (int64_t i = 0; i < g->KH; i++) {                                  \
                                int64_t ih = oh * g->sh - g->ph + i * g->dh;                       \
                                if (ih < 0 || ih >= g->H) continue;                                \
                                for (int64_t j = 0; j < g->KW; j++) {                              \
                                    int64_t iw = ow * g->sw - g->pw + j * g->dw;                   \
                                    if (iw < 0 || iw >= g->W) continue;                            \
                                    acc += (double)AT4(xp, x, n, c0 + c, ih, iw) *                 \
                                           (double)AT4(wp, w, o, c, i, j);                         \
                                }                                                                  \
                            }                                                                      \
                        *yp++ = (T)acc;                                                            \
                    }                                                                              \
    }                                                                                              \
                                                                                                   \
    /* dx[n, c, ih, iw] = sum over the (o, i, j) whose window puts tap (i, j) \
     * on (ih, iw): oh = (ih + ph - i dh) / sh when that divides exactly. */                      \
    static void dgrad_ref_##SFX(const cn_conv_geom *g, const cn_tensor *dy, const cn_tensor *w,    \
                                const cn_tensor *b, cn_tensor *dx) {                               \
        const T *gp = cn_t_ptr(dy), *wp = cn_t_ptr(w), *bp = b ? cn_t_ptr(b) : NULL;               \
        T *xp = cn_t_ptr(dx);                                                                      \
        int64_t Cg = g->C / g->groups, Og = g->O / g->groups;                                      \
        for (int64_t n = 0; n < g->N; n++)                                                         \
            for (int64_t c = 0; c < g->C; c++)                                                     \
                for (int64_t ih = 0; ih < g->H; ih++)                                              \
                    for (int64_t iw = 0; iw < g->W; iw++) {                                        \
                        double acc = bp ? (double)bp[c * b->strides[0]] : 0.0;                     \
                        int64_t o0 = c / Cg * Og;                                                  \
                        for (int64_t o = 0; o < Og; o++)                                           \
                            for (int64_t i = 0; i < g->KH; i++) {                                  \
                                int64_t th = ih + g->ph - i * g->dh;                               \
                                if (th < 0 || th % g->sh) continue;                                \
                                int64_t oh = th / g->sh;                                           \
                                if (oh >= g->OH) continue;                                         \
                                for (int64_t j = 0; j < g->KW; j++) {                              \
                                    int64_t tw = iw + g->pw - j * g->dw;                           \
                                    if (tw < 0 || tw % g->sw) continue;                            \
                                    int64_t ow = tw / g->sw;                                       \
                                    if (ow >= g->OW) continue;                                     \
                                    acc += (double)AT4(gp, dy, n, o0 + o, oh, ow) *                \
                                           (double)AT4(wp, w, o0 + o, c % Cg, i, j);               \
                                }                                                                  \
                            }                                                                      \
                        *xp++ = (T)acc;                                                            \
                    }                                                                              \
    }                                                                                              \
                                                                                                   \
    static void wgrad_ref_##SFX(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *dy,    \
                                cn_tensor *dw) {                                                   \
        const T *xp = cn_t_ptr(x), *gp = cn_t_ptr(dy);                                             \
        T *wp = cn_t_ptr(dw);                                                                      \
        int64_t Cg = g->C / g->groups, Og = g->O / g->groups;                                      \
        for (int64_t o = 0; o < g->O; o++)                                                         \
            for (int64_t c = 0; c < Cg; c++)                                                       \
                for (int64_t i = 0; i < g->KH; i++)                                                \
                    for (int64_t j = 0; j < g->KW; j++) {                                          \
                        double acc = 0.0;                                                          \
                        int64_t cx = o / Og * Cg + c;                                              \
                        for (int64_t n = 0; n < g->N; n++)                                         \
                            for (int64_t oh = 0; oh < g->OH; oh++) {                               \
                                int64_t ih = oh * g->sh - g->ph + i * g->dh;                       \
                                if (ih < 0 || ih >= g->H) continue;                                \
                                for (int64_t ow = 0; ow < g->OW; ow++) {                           \
                                    int64_t iw = ow * g->sw - g->pw + j * g->dw;                   \
                                    if (iw < 0 || iw >= g->W) continue;                            \
                                    acc += (double)AT4(gp, dy, n, o, oh, ow) *                     \
                                           (double)AT4(xp, x, n, cx, ih, iw);                      \
                                }                                                                  \
                            }                                                                      \
                        *wp++ = (T)acc;                                                            \
                    }                                                                              \
    }

DEFINE_REF(float, f32)
DEFINE_REF(double, f64)

int cn_cpu_conv2d_fwd_ref(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *w,
                          const cn_tensor *bias, cn_tensor *y) {
    if (y->dtype == CN_F32) fwd_ref_f32(g, x, w, bias, y);
    else fwd_ref_f64(g, x, w, bias, y);
    return CN_OK;
}

int cn_cpu_conv2d_dgrad_ref(const cn_conv_geom *g, const cn_tensor *dy, const cn_tensor *w,
                            const cn_tensor *bias, cn_tensor *dx) {
    if (dx->dtype == CN_F32) dgrad_ref_f32(g, dy, w, bias, dx);
    else dgrad_ref_f64(g, dy, w, bias, dx);
    return CN_OK;
}

int cn_cpu_conv2d_wgrad_ref(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *dy,
                            cn_tensor *dw) {
    if (dw->dtype == CN_F32) wgrad_ref_f32(g, x, dy, dw);
    else wgrad_ref_f64(g, x, dy, dw);
    return CN_OK;
}

/* ------------------------------------------------------------------------ */
/* im2col and col2im over a tile [p0, p1) of output pixels                  */
/* ------------------------------------------------------------------------ */

/* For tap offset `off` (= j dw - pw) the output columns ow whose input
 * column ow sw + off lies in [0, W): [lo, hi), clipped to [a, b). */
static inline void valid_cols(int64_t W, int64_t sw, int64_t off, int64_t a, int64_t b,
                              int64_t *lo, int64_t *hi) {
    int64_t l = ceil_div(-off, sw), h = ceil_div(W - off, sw);
    *lo = imin(imax(l, a), b);
    *hi = imax(imin(h, b), *lo);
}

/* cols[k][t] (rows of len = p1 - p0) for k = (c, i, j) of one group's
 * channels x (Cg planes of H x W, contiguous). */
#define DEFINE_COLS(T, SFX)                                                                        \
    CN_HOT_FN(im2col_##SFX,                                                                        \
              (const cn_conv_geom *g, int64_t Cg, const T *x, int64_t p0, int64_t p1,              \
               T *restrict cols),                                                                  \
              (g, Cg, x, p0, p1, cols)) {                                                          \
        const int64_t len = p1 - p0, OW = g->OW, sw = g->sw, H = g->H, W = g->W;                   \
        const int64_t KH = g->KH, KW = g->KW, sh = g->sh, ph = g->ph, dh = g->dh;                  \
        const int64_t oh0 = p0 / OW, a0 = p0 % OW;                                                 \
        for (int64_t c = 0; c < Cg; c++)                                                           \
            for (int64_t i = 0; i < KH; i++)                                                       \
                for (int64_t j = 0; j < KW; j++) {                                                 \
                    const T *xc = x + c * H * W;                                                   \
                    const int64_t off = j * g->dw - g->pw;                                         \
                    int64_t lo_j, hi_j;                                                            \
                    valid_cols(W, sw, off, 0, OW, &lo_j, &hi_j);                                   \
                    T *row = cols;                                                                 \
                    cols += len;                                                                   \
                    int64_t oh = oh0, a = a0;                                                      \
                    for (int64_t p = p0; p < p1; oh++, a = 0) {                                    \
                        const int64_t b = imin(OW, a + (p1 - p));                                  \
                        const int64_t ih = oh * sh - ph + i * dh;                                  \
                        T *r = row - a; /* r[ow] for ow in [a, b) */                               \
                        if (ih < 0 || ih >= H) {                                                   \
                            for (int64_t ow = a; ow < b; ow++) r[ow] = 0;                          \
                        } else {                                                                   \
                            const int64_t lo = imin(imax(lo_j, a), b);                             \
                            const int64_t hi = imax(imin(hi_j, b), lo);                            \
                            const T *xr = xc + ih * W;                                             \
                            for (int64_t ow = a; ow < lo; ow++) r[ow] = 0;                         \
                            if (sw == 1)                                                           \
                                for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow + off];         \
                            else                                                                   \
                                for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow * sw + off];    \
                            for (int64_t ow = hi; ow < b; ow++) r[ow] = 0;                         \
                        }                                                                          \
                        row += b - a;                                                              \
                        p += b - a;                                                                \
                    }                                                                              \
                }                                                                                  \
    }                                                                                              \
                                                                                                   \
    /* The adjoint: dx += the columns, each added where im2col read it. */                        \
    CN_HOT_FN(col2im_##SFX,                                                                        \
              (const cn_conv_geom *g, int64_t Cg, const T *restrict cols, int64_t p0, int64_t p1,  \
               T *dx),                                                                             \
              (g, Cg, cols, p0, p1, dx)) {                                                         \
        const int64_t len = p1 - p0, OW = g->OW, sw = g->sw, H = g->H, W = g->W;                   \
        const int64_t KH = g->KH, KW = g->KW, sh = g->sh, ph = g->ph, dh = g->dh;                  \
        const int64_t oh0 = p0 / OW, a0 = p0 % OW;                                                 \
        for (int64_t c = 0; c < Cg; c++)                                                           \
            for (int64_t i = 0; i < KH; i++)                                                       \
                for (int64_t j = 0; j < KW; j++) {                                                 \
                    T *xc = dx + c * H * W;                                                        \
                    const int64_t off = j * g->dw - g->pw;                                         \
                    int64_t lo_j, hi_j;                                                            \
                    valid_cols(W, sw, off, 0, OW, &lo_j, &hi_j);                                   \
                    const T *row = cols;                                                           \
                    cols += len;                                                                   \
                    int64_t oh = oh0, a = a0;                                                      \
                    for (int64_t p = p0; p < p1; oh++, a = 0) {                                    \
                        const int64_t b = imin(OW, a + (p1 - p));                                  \
                        const int64_t ih = oh * sh - ph + i * dh;                                  \
                        if (ih >= 0 && ih < H) {                                                   \
                            const int64_t lo = imin(imax(lo_j, a), b);                             \
                            const int64_t hi = imax(imin(hi_j, b), lo);                            \
                            T *xr = xc + ih * W;                                                   \
                            const T *r = row - a;                                                  \
                            if (sw == 1)                                                           \
                                for (int64_t ow = lo; ow < hi; ow++) xr[ow + off] += r[ow];        \
                            else                                                                   \
                                for (int64_t ow = lo; ow < hi; ow++) xr[ow * sw + off] += r[ow];   \
                        }                                                                          \
                        row += b - a;                                                              \
                        p += b - a;                                                                \
                    }                                                                              \
                }                                                                                  \
    }                                                                                              \
                                                                                                   \
    /* rows [0, m) of y (row stride ld), columns [0, len): y[r][t] += b[r]. */                    \
    CN_HOT_FN(add_rows_##SFX,                                                                      \
              (T *y, int64_t m, int64_t len, int64_t ld, const T *b),                              \
              (y, m, len, ld, b)) {                                                                \
        for (int64_t r = 0; r < m; r++) {                                                          \
            T v = b[r];                                                                            \
            T *yr = y + r * ld;                                                                    \
            for (int64_t t = 0; t < len; t++) yr[t] += v;                                          \
        }                                                                                          \
    }                                                                                              \
    /* dst[i] = v[i / per] for i < n: a plane per value (zeros when v is NULL). */                \
    CN_HOT_FN(fill_planes_##SFX,                                                                   \
              (T *dst, int64_t nv, int64_t per, const T *v),                                       \
              (dst, nv, per, v)) {                                                                 \
        for (int64_t k = 0; k < nv; k++) {                                                         \
            T x = v ? v[k] : 0;                                                                    \
            for (int64_t t = 0; t < per; t++) dst[k * per + t] = x;                                \
        }                                                                                          \
    }                                                                                              \
    CN_HOT_FN(acc_##SFX, (T *restrict dst, const T *restrict src, int64_t n), (dst, src, n)) {     \
        for (int64_t t = 0; t < n; t++) dst[t] += src[t];                                          \
    }

DEFINE_COLS(float, f32)
DEFINE_COLS(double, f64)

static void im2col(cn_dtype dt, const cn_conv_geom *g, int64_t Cg, const void *x, int64_t p0,
                   int64_t p1, void *cols) {
    if (dt == CN_F32) im2col_f32(g, Cg, x, p0, p1, cols);
    else im2col_f64(g, Cg, x, p0, p1, cols);
}
static void col2im(cn_dtype dt, const cn_conv_geom *g, int64_t Cg, const void *cols, int64_t p0,
                   int64_t p1, void *dx) {
    if (dt == CN_F32) col2im_f32(g, Cg, cols, p0, p1, dx);
    else col2im_f64(g, Cg, cols, p0, p1, dx);
}
static void add_rows(cn_dtype dt, void *y, int64_t m, int64_t len, int64_t ld, const void *b) {
    if (dt == CN_F32) add_rows_f32(y, m, len, ld, b);
    else add_rows_f64(y, m, len, ld, b);
}
static void fill_planes(cn_dtype dt, void *dst, int64_t nv, int64_t per, const void *v) {
    if (dt == CN_F32) fill_planes_f32(dst, nv, per, v);
    else fill_planes_f64(dst, nv, per, v);
}
static void acc(cn_dtype dt, void *dst, const void *src, int64_t n) {
    if (dt == CN_F32) acc_f32(dst, src, n);
    else acc_f64(dst, src, n);
}

/* ------------------------------------------------------------------------ */
/* The GEMM path                                                            */
/* ------------------------------------------------------------------------ */

/* Column buffers of at most about this many elements (with tiles of at
 * least MIN_TILE pixels, so the products stay wide enough to run well). */
#define COLS_CAP (1 << 16)
#define MIN_TILE 256

typedef struct gemm_conv {
    const cn_conv_geom *g;
    cn_dtype dt;
    size_t es;
    int64_t Cg, Og, Kg, P, HW;
    int64_t tile, ntiles;
    bool direct; /* 1x1, stride 1, no padding: x is the column matrix */
    bool trans;  /* fwd, direct: y^T = x^T w^T into a buffer, then y (fwd_transposed) */
    const char *x, *w, *dy, *b;
    const cn_gemm_pack *wpk; /* fwd: w packed once (a program's constant), or NULL */
    cn_gemm_out eo;          /* fwd: the step's bounds, taken (clamp set), or none */
    cn_epilogue *ep;         /* fwd: the step's epilogue, taken, or NULL */
    char *out;
    char *partial; /* wgrad: one [O, Kg] block per batch block */
    int64_t bs;    /* wgrad: samples per block */
    atomic_int failed;
} gemm_conv;

static void setup(gemm_conv *c, const cn_conv_geom *g, cn_dtype dt) {
    memset(c, 0, sizeof *c);
    c->g = g;
    c->dt = dt;
    c->es = cn_dsize(dt);
    c->Cg = g->C / g->groups;
    c->Og = g->O / g->groups;
    c->Kg = c->Cg * g->KH * g->KW;
    c->P = g->OH * g->OW;
    c->HW = g->H * g->W;
    c->direct = g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 &&
                g->pw == 0 && g->OH == g->H && g->OW == g->W;
    int64_t t = imax(MIN_TILE, COLS_CAP / imax(c->Kg, 1));
    c->tile = imax(1, imin(t, c->P));
    c->ntiles = (c->P + c->tile - 1) / c->tile;
    atomic_init(&c->failed, 0);
}

static int gemm(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa,
                int64_t csa, const void *b, int64_t rsb, int64_t csb, void *c, int64_t ldc) {
    return cn_gemm_builtin(dt, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc);
}

/* Runs items [0, n) through fn: split over the pool when there are enough
 * to keep every thread busy (each product then runs on one thread), else
 * one after another with each product split over the pool. */
static void run_items(int64_t n, cn_range_fn fn, void *ctx) {
    if (n >= cn_get_num_threads()) cn_parallel_for(n, 1, fn, ctx);
    else fn(ctx, 0, n);
}

/* y [O, ldy] = t^T (t [len, ldt], its first O columns) with eo's bias and bounds, each step its
 * own IEEE operation in the order of cn_gemm_out's (so the bits of the
 * product made the usual way): v + bias, then lo > v ? lo : v and
 * hi < v ? hi : v, which keep a NaN. */
#define OUT_ONE(T, v, i)                                                                           \
    do {                                                                                           \
        if (bias) v = v + bias[i];                                                                 \
        if (clamp) {                                                                               \
            v = lo > v ? lo : v;                                                                   \
            v = hi < v ? hi : v;                                                                   \
        }                                                                                          \
    } while (0)

static void transpose_out_f64(const double *restrict t, int64_t len, int64_t O, int64_t ldt,
                              double *restrict y, int64_t ldy, const cn_gemm_out *eo) {
    const double *bias = eo->bias, lo = eo->lo, hi = eo->hi;
    const bool clamp = eo->clamp;
    for (int64_t i0 = 0; i0 < O; i0 += 16)
        for (int64_t j = 0; j < len; j++)
            for (int64_t i = i0; i < imin(O, i0 + 16); i++) {
                double v = t[j * ldt + i];
                OUT_ONE(double, v, i);
                y[i * ldy + j] = v;
            }
}

/* f32 in blocks of 8 pixels x 8 channels, transposed in registers (three
 * rounds of two-source shuffles); the edges one by one. A scalar loop had
 * taken a tenth of a 14x14 layer's time. */
typedef float v8_f32 __attribute__((vector_size(32)));
typedef float v8u_f32 __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t v8_i32 __attribute__((vector_size(32)));
#if defined(__clang__)
#define SHUF8(a, b, i0, i1, i2, i3, i4, i5, i6, i7)                                                \
    __builtin_shufflevector(a, b, i0, i1, i2, i3, i4, i5, i6, i7)
#else
#define SHUF8(a, b, i0, i1, i2, i3, i4, i5, i6, i7)                                                \
    __builtin_shuffle(a, b, (v8_i32){i0, i1, i2, i3, i4, i5, i6, i7})
#endif
/* lo > v ? lo : v, lane by lane (C has no ?: on vectors). */
#define VMAX_LO(lo, v) ((v8_f32)(((v8_i32)((lo) > (v)) & (v8_i32)(lo)) | (~(v8_i32)((lo) > (v)) & (v8_i32)(v))))
#define VMIN_HI(hi, v) ((v8_f32)(((v8_i32)((hi) < (v)) & (v8_i32)(hi)) | (~(v8_i32)((hi) < (v)) & (v8_i32)(v))))

CN_HOT_FN(transpose_out_f32, (const float *restrict t, int64_t len, int64_t O, int64_t ldt,
                              float *restrict y, int64_t ldy, const cn_gemm_out *eo),
          (t, len, O, ldt, y, ldy, eo)) {
    const float *bias = eo->bias, lo = (float)eo->lo, hi = (float)eo->hi;
    const bool clamp = eo->clamp;
    /* -0 + x is x for every x, a bound -0 included (+0 + -0 is +0) */
    const v8_f32 lov = -(v8_f32){0} + lo, hiv = -(v8_f32){0} + hi;
    const int64_t j8 = len / 8 * 8, i8 = O / 8 * 8;
    for (int64_t i = 0; i < i8; i += 8) {
        for (int64_t j = 0; j < j8; j += 8) {
            v8_f32 r[8], u[8], o[8];
            for (int k = 0; k < 8; k++) r[k] = *(const v8u_f32 *)(t + (j + k) * ldt + i);
            for (int k = 0; k < 8; k += 2) {
                u[k] = SHUF8(r[k], r[k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
                u[k + 1] = SHUF8(r[k], r[k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
            }
            for (int k = 0; k < 8; k += 4)
                for (int h = 0; h < 2; h++) {
                    r[k + 2 * h] = SHUF8(u[k + h], u[k + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
                    r[k + 2 * h + 1] = SHUF8(u[k + h], u[k + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
                }
            /* r[0..3]: pixels 0-3 of channels (0, 4), (1, 5), (2, 6), (3, 7);
             * r[4..7] the same for pixels 4-7 */
            for (int k = 0; k < 4; k++) {
                o[k] = SHUF8(r[k], r[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
                o[k + 4] = SHUF8(r[k], r[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
            }
            for (int c = 0; c < 8; c++) {
                v8_f32 v = o[c];
                if (bias) v = v + bias[i + c];
                if (clamp) {
                    v = VMAX_LO(lov, v);
                    v = VMIN_HI(hiv, v);
                }
                *(v8u_f32 *)(y + (i + c) * ldy + j) = v;
            }
        }
        for (int64_t c = i; c < i + 8; c++)
            for (int64_t j = j8; j < len; j++) {
                float v = t[j * ldt + c];
                OUT_ONE(float, v, c);
                y[c * ldy + j] = v;
            }
    }
    for (int64_t c = i8; c < O; c++)
        for (int64_t j = 0; j < len; j++) {
            float v = t[j * ldt + c];
            OUT_ONE(float, v, c);
            y[c * ldy + j] = v;
        }
}

/* Channels [64 i0, 64 i1) of a transposed product's output. */
typedef struct trans_job {
    cn_dtype dt;
    size_t es;
    const char *t;
    int64_t len, O;
    char *y;
    int64_t ldy;
    const cn_gemm_out *eo;
} trans_job;

static void trans_range(void *ctx, int64_t i0, int64_t i1) {
    const trans_job *tj = ctx;
    const int64_t c0 = 64 * i0, c1 = imin(tj->O, 64 * i1);
    /* The channels' columns of t (row stride O), their rows of y, and
     * their part of the bias. */
    cn_gemm_out eo = *tj->eo;
    if (eo.bias) eo.bias = (const char *)eo.bias + (size_t)c0 * tj->es;
    const char *t = tj->t + (size_t)c0 * tj->es;
    char *y = tj->y + (size_t)(c0 * tj->ldy) * tj->es;
    if (tj->dt == CN_F32)
        transpose_out_f32((const float *)t, tj->len, c1 - c0, tj->O, (float *)y, tj->ldy, &eo);
    else transpose_out_f64((const double *)t, tj->len, c1 - c0, tj->O, (double *)y, tj->ldy, &eo);
}

/* fwd: item = (n, group, tile). */
static void fwd_items(void *ctx, int64_t i0, int64_t i1) {
    gemm_conv *c = ctx;
    const cn_conv_geom *g = c->g;
    /* the columns, or the transposed product's output */
    size_t buf = c->trans ? (size_t)(c->tile * c->Og) : c->direct ? 0 : (size_t)(c->Kg * c->tile);
    void *cols = buf ? cn_alloc(c->es * buf) : NULL;
    if (buf && !cols) {
        atomic_store(&c->failed, 1);
        return;
    }
    for (int64_t it = i0; it < i1; it++) {
        int64_t t = it % c->ntiles, ng = it / c->ntiles, grp = ng % g->groups, n = ng / g->groups;
        int64_t p0 = t * c->tile, p1 = imin(c->P, p0 + c->tile), len = p1 - p0;
        const char *xg = c->x + (size_t)((n * g->C + grp * c->Cg) * c->HW) * c->es;
        const char *wg = c->w + (size_t)(grp * c->Og * c->Kg) * c->es;
        char *yg = c->out + (size_t)((n * g->O + grp * c->Og) * c->P + p0) * c->es;
        const void *bm;
        int64_t ldb;
        if (c->direct) {
            bm = xg + (size_t)p0 * c->es;
            ldb = c->HW;
        } else {
            im2col(c->dt, g, c->Cg, xg, p0, p1, cols);
            bm = cols;
            ldb = len;
        }
        /* The bias (and the step's bounds) as the GEMM writes its tiles. */
        cn_gemm_out eo = c->eo;
        if (c->b) eo.bias = c->b + (size_t)(grp * c->Og) * c->es;
        int rc;
        if (c->trans) {
            /* x^T (element (j, p) at bm[p * HW + j]) times w^T ((p, o) at
             * wg[o * Kg + p]); each sum the same multiply-adds in the same
             * order as the product made the usual way. */
            rc = cn_gemm_packed(c->dt, len, c->Og, c->Kg, bm, 1, ldb, wg, 1, c->Kg, cols, c->Og,
                                c->wpk, grp, NULL);
            if (rc >= 0) {
                /* Over the pool by blocks of channels where this item has
                 * it to itself (one sample: the product was split too). */
                trans_job tj = {c->dt, c->es, cols, len, c->Og, yg, c->P, &eo};
                cn_parallel_for(ceil_div(c->Og, 64), 1, trans_range, &tj);
            }
        } else
            rc = cn_gemm_packed(c->dt, c->Og, len, c->Kg, wg, c->Kg, 1, bm, ldb, 1, yg, c->P,
                                c->wpk, grp, eo.bias || eo.clamp ? &eo : NULL);
        if (rc < 0)
            atomic_store(&c->failed, 1);
        else if (c->ep) /* the item's output, while it is in cache */
            cn_epilogue_block(c->ep, (n * g->O + grp * c->Og) * c->P, c->P, 0, c->Og, p0, p1);
    }
    cn_free(cols);
}

/* dgrad: item = (n, group); the tiles of one item all add into the same dx
 * planes, so they stay on one thread. */
static void dgrad_items(void *ctx, int64_t i0, int64_t i1) {
    gemm_conv *c = ctx;
    const cn_conv_geom *g = c->g;
    void *cols = c->direct ? NULL : cn_alloc(c->es * (size_t)(c->Kg * c->tile));
    if (!c->direct && !cols) {
        atomic_store(&c->failed, 1);
        return;
    }
    for (int64_t it = i0; it < i1; it++) {
        int64_t grp = it % g->groups, n = it / g->groups;
        char *xg = c->out + (size_t)((n * g->C + grp * c->Cg) * c->HW) * c->es;
        const char *wg = c->w + (size_t)(grp * c->Og * c->Kg) * c->es;
        const char *bg = c->b ? c->b + (size_t)(grp * c->Cg) * c->es : NULL;
        if (!c->direct) fill_planes(c->dt, xg, c->Cg, c->HW, bg);
        for (int64_t t = 0; t < c->ntiles; t++) {
            int64_t p0 = t * c->tile, p1 = imin(c->P, p0 + c->tile), len = p1 - p0;
            const char *gg = c->dy + (size_t)((n * g->O + grp * c->Og) * c->P + p0) * c->es;
            /* W_g^T: element (k, o) at w[o * Kg + k]. */
            if (c->direct) {
                char *xt = xg + (size_t)p0 * c->es;
                if (gemm(c->dt, c->Kg, len, c->Og, wg, 1, c->Kg, gg, c->P, 1, xt, c->HW) < 0)
                    atomic_store(&c->failed, 1);
                if (bg) add_rows(c->dt, xt, c->Cg, len, c->HW, bg);
            } else {
                if (gemm(c->dt, c->Kg, len, c->Og, wg, 1, c->Kg, gg, c->P, 1, cols, len) < 0)
                    atomic_store(&c->failed, 1);
                col2im(c->dt, g, c->Cg, cols, p0, p1, xg);
            }
        }
    }
    cn_free(cols);
}

/* wgrad: item = a block of bs samples, summed into its own [O, Kg] partial
 * in a fixed order (sample, group, tile). */
static void wgrad_items(void *ctx, int64_t i0, int64_t i1) {
    gemm_conv *c = ctx;
    const cn_conv_geom *g = c->g;
    size_t blk = (size_t)(g->O * c->Kg);
    void *cols = c->direct ? NULL : cn_alloc(c->es * (size_t)(c->Kg * c->tile));
    void *tmp = cn_alloc(c->es * (size_t)(c->Og * c->Kg));
    if ((!c->direct && !cols) || !tmp) {
        atomic_store(&c->failed, 1);
        cn_free(cols);
        cn_free(tmp);
        return;
    }
    for (int64_t blkno = i0; blkno < i1; blkno++) {
        char *part = c->partial + blk * (size_t)blkno * c->es;
        int64_t n0 = blkno * c->bs, n1 = imin(g->N, n0 + c->bs);
        for (int64_t n = n0; n < n1; n++)
            for (int64_t grp = 0; grp < g->groups; grp++) {
                char *pg = part + (size_t)(grp * c->Og * c->Kg) * c->es;
                const char *xg = c->x + (size_t)((n * g->C + grp * c->Cg) * c->HW) * c->es;
                for (int64_t t = 0; t < c->ntiles; t++) {
                    int64_t p0 = t * c->tile, p1 = imin(c->P, p0 + c->tile), len = p1 - p0;
                    const char *gg =
                        c->dy + (size_t)((n * g->O + grp * c->Og) * c->P + p0) * c->es;
                    const void *bt;
                    int64_t csb;
                    if (c->direct) {
                        bt = xg + (size_t)p0 * c->es;
                        csb = c->HW;
                    } else {
                        im2col(c->dt, g, c->Cg, xg, p0, p1, cols);
                        bt = cols;
                        csb = len;
                    }
                    /* cols^T: element (p, k) at cols[k * len + p]. */
                    void *dst = n == n0 && t == 0 ? pg : tmp;
                    if (gemm(c->dt, c->Og, c->Kg, len, gg, c->P, 1, bt, 1, csb, dst, c->Kg) < 0)
                        atomic_store(&c->failed, 1);
                    if (dst == tmp) acc(c->dt, pg, tmp, c->Og * c->Kg);
                }
            }
    }
    cn_free(cols);
    cn_free(tmp);
}

int cn_conv_oom(const char *what, const cn_conv_geom *g) {
    return cn_failc(CN_ENOMEM,
                    "%s: out of memory (x [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                    "], %" PRId64 " output channels, kernel %" PRId64 "x%" PRId64 ")",
                    what, g->N, g->C, g->H, g->W, g->O, g->KH, g->KW);
}

const char *cn_conv_dense(const cn_tensor *t, cn_tensor **own) {
    *own = NULL;
    if (!t) return NULL;
    cn_tensor *c = cn_t_contiguous((cn_tensor *)t);
    if (!c) return NULL;
    if (c != t) *own = c;
    else cn_release(c);
    return cn_t_ptr(t == c ? t : c);
}

/* The forward product's tiles of output pixels, where there are several:
 * equal ones (whole register panels of 32 columns where that adds no
 * tile), and where the items (sample x group x tile) are few, as many as a
 * multiple of the threads. Each output element is one GEMM's sum whatever
 * the tiles (of more than one pixel), so this split may read the thread
 * count; the input and weight gradients keep setup's, since they sum over
 * tiles. MobileNetV2's 1x1 layers at 56x56 with 24 input channels were a
 * tile of 2730 pixels and one of 406, which ran 1.1x faster at 2 threads
 * than at 1. */
static void balance_tiles(gemm_conv *c, const cn_conv_geom *g) {
    if (c->ntiles < 2) return;
    int64_t nt = cn_in_parallel_region() ? 1 : cn_get_num_threads(), per = g->N * g->groups;
    int64_t n = c->ntiles;
    if (nt > 1 && per * n < 8 * nt)
        while ((per * n) % nt) n++;
    int64_t tile = (c->P + n - 1) / n, t32 = (tile + 31) / 32 * 32;
    if ((c->P + t32 - 1) / t32 == n) tile = t32;
    /* No tile of one pixel: the GEMM takes a single column on its
     * matrix-vector path, whose sums run in another order. */
    while (tile < c->P && (c->P - 1) % tile == 0) tile++;
    c->tile = tile;
    c->ntiles = (c->P + tile - 1) / tile;
}

/* Plane sizes up to which a 1x1 forward product may be made transposed:
 * 7x7 planes, not 14x14 ones. On 14x14 planes ResNet-50's layers ran
 * 1.06-1.09x faster at 1 thread but 1.05-1.14x slower at 2, where the
 * GEMM splits the output channels and each thread packs all the pixels
 * (split by pixels between the threads instead, up to 1.5x slower). */
#define TRANS_MAX_PIXELS 64

/* Whether the forward product of a 1x1 kernel (stride 1, no padding) is
 * made transposed, y^T = x^T w^T: where the register tiles then cover at
 * most TRANS_MAX_WORK of the padded area the usual product's do. The
 * usual product puts the plane's pixels along the tile's columns (32 at
 * the AVX-512 level) and a 7x7 plane fills 49 of 64; transposed, they are
 * the tile's rows (8: 49 of 56, which the decision counts; the GEMM then
 * takes its 7-row tile, 49 of 49), and the output channels the columns.
 * The bits are the same either way. Planes of at most TRANS_MAX_PIXELS (the
 * product then is one tile of pixels: setup's tiles are larger). */
#define TRANS_MAX_WORK 0.9
/* Input channels below which the transposition costs more than the work
 * it saves: MobileNetV2's 14x14 layers from 64 channels to 384 ran 1.1x
 * slower transposed at 1 thread, ResNet-50's from 256 to 1024 1.06x
 * faster. */
#define TRANS_MIN_K 128
static bool fwd_transposed(const cn_conv_geom *g, cn_dtype dt) {
    if ((dt != CN_F32 && dt != CN_F64) || g->KH != 1 || g->KW != 1 || g->sh != 1 || g->sw != 1 ||
        g->ph != 0 || g->pw != 0 || g->OH != g->H || g->OW != g->W)
        return false;
    const int64_t P = g->OH * g->OW, Og = g->O / g->groups, Kg = g->C / g->groups;
    if (P < 2 || P > TRANS_MAX_PIXELS || Og < 2 || Kg < TRANS_MIN_K) return false;
    int mr, nr;
    cn_gemm_tile_dims(dt, &mr, &nr);
    const double usual = (double)(ceil_div(Og, mr) * mr) * (double)(ceil_div(P, nr) * nr);
    const double trans = (double)(ceil_div(Og, nr) * nr) * (double)(ceil_div(P, mr) * mr);
    return trans <= TRANS_MAX_WORK * usual;
}

static int fwd_gemm(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *w,
                    const cn_tensor *bias, cn_tensor *y) {
    gemm_conv c;
    setup(&c, g, (cn_dtype)y->dtype);
    balance_tiles(&c, g);
    c.trans = c.direct && c.ntiles == 1 && fwd_transposed(g, c.dt);
    cn_tensor *ox, *ow, *ob;
    c.x = cn_conv_dense(x, &ox);
    c.w = cn_conv_dense(w, &ow);
    c.b = cn_conv_dense(bias, &ob);
    c.out = cn_t_ptr(y);
    if (!ow && cn_gemm_pack_current(cn_gemm_pack_step(), w)) c.wpk = cn_gemm_pack_step();
    cn_gemm_out_take(&c.eo);
    c.eo.bias = NULL;
    c.ep = cn_epilogue_take(y);
    int rc = CN_OK;
    if (!c.x || !c.w || (bias && !c.b)) rc = cn_conv_oom("conv2d", g);
    else {
        run_items(g->N * g->groups * c.ntiles, fwd_items, &c);
        if (atomic_load(&c.failed)) rc = cn_conv_oom("conv2d", g);
    }
    cn_release(ox);
    cn_release(ow);
    cn_release(ob);
    return rc;
}

static int dgrad_gemm(const cn_conv_geom *g, const cn_tensor *dy, const cn_tensor *w,
                      const cn_tensor *bias, cn_tensor *dx) {
    gemm_conv c;
    setup(&c, g, (cn_dtype)dx->dtype);
    c.direct &= c.P > 0; /* with no pixels, dx is the bias alone */
    cn_tensor *og, *ow, *ob;
    c.dy = cn_conv_dense(dy, &og);
    c.w = cn_conv_dense(w, &ow);
    c.b = cn_conv_dense(bias, &ob);
    c.out = cn_t_ptr(dx);
    int rc = CN_OK;
    if (!c.dy || !c.w || (bias && !c.b)) rc = cn_conv_oom("conv_transpose2d", g);
    else {
        run_items(g->N * g->groups, dgrad_items, &c);
        if (atomic_load(&c.failed)) rc = cn_conv_oom("conv_transpose2d", g);
    }
    cn_release(og);
    cn_release(ow);
    cn_release(ob);
    return rc;
}

/* The batch is summed in at most this many blocks: enough for a pool of
 * this size to share, fixed by N alone. */
#define WGRAD_BLOCKS 16

static int wgrad_gemm(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *dy,
                      cn_tensor *dw) {
    gemm_conv c;
    setup(&c, g, (cn_dtype)dw->dtype);
    if (g->N == 0 || c.P == 0) {
        memset(cn_t_ptr(dw), 0, c.es * (size_t)(g->O * c.Kg));
        return CN_OK;
    }
    cn_tensor *ox, *og;
    c.x = cn_conv_dense(x, &ox);
    c.dy = cn_conv_dense(dy, &og);
    c.bs = (g->N + WGRAD_BLOCKS - 1) / WGRAD_BLOCKS;
    int64_t nblk = (g->N + c.bs - 1) / c.bs;
    size_t blk = (size_t)(g->O * c.Kg) * c.es;
    c.partial = nblk == 1 ? cn_t_ptr(dw) : cn_alloc(blk * (size_t)nblk);
    int rc = CN_OK;
    if (!c.x || !c.dy || !c.partial) rc = cn_conv_oom("conv2d_weight_grad", g);
    else {
        if (nblk >= cn_get_num_threads()) cn_parallel_tasks(nblk, wgrad_items, &c);
        else wgrad_items(&c, 0, nblk);
        if (atomic_load(&c.failed)) rc = cn_conv_oom("conv2d_weight_grad", g);
        else if (nblk > 1) {
            memcpy(cn_t_ptr(dw), c.partial, blk);
            for (int64_t b = 1; b < nblk; b++)
                acc(c.dt, cn_t_ptr(dw), c.partial + blk * (size_t)b, g->O * c.Kg);
        }
    }
    if (nblk > 1) cn_free(c.partial);
    cn_release(ox);
    cn_release(og);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                             */
/* ------------------------------------------------------------------------ */

#ifdef CN_HAVE_DNNL
int cn_dnnl_conv2d_fwd(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *w,
                       const cn_tensor *bias, cn_tensor *y);
int cn_dnnl_conv2d_dgrad(const cn_conv_geom *g, const cn_tensor *dy, const cn_tensor *w,
                         const cn_tensor *bias, cn_tensor *dx);
int cn_dnnl_conv2d_wgrad(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *dy,
                         cn_tensor *dw);
/* Whether oneDNN takes this product (f32, a geometry it supports). */
bool cn_dnnl_conv2d_available(const cn_conv_geom *g, cn_dtype dt, int which);
int64_t cn_dnnl_conv2d_tasks(const cn_conv_geom *g, int which); /* calls a product makes */
cn_gemm_pack *cn_dnnl_conv2d_fwd_pack(const cn_conv_geom *g, const cn_tensor *w, bool bias);
bool cn_dnnl_conv2d_fwd_pack_fits(const cn_gemm_pack *pk, const cn_conv_geom *g, bool bias,
                                  cn_dtype dt);

/* Whether oneDNN is the better choice for this product. Measured with
 * bench/bench_conv and a sweep over input channels (batch 64, 3x3, pad 1,
 * f32, one thread, ms, im2col+GEMM / oneDNN):
 *   C  O  HxW     forward      input grad   weight grad
 *   1 32  28x28   1.20 / 1.01  1.81 / 4.45  1.53 / 0.61
 *   3 32  28x28   1.63 / 0.99  1.89 / 4.31  1.87 / 0.94
 *   8 32  28x28   3.38 / 2.39  4.14 / 4.63  4.77 / 3.04
 *  16 32  14x14   2.17 / 1.07  2.73 / 1.05  2.28 / 1.16
 *  32 64  14x14   6.87 / 4.54  8.31 / 4.40  6.72 / 5.72
 * oneDNN wins but for the input gradient onto few channels. It runs one
 * block of the batch per thread, so the products of small batches stay on
 * the GEMM path, which also splits the pixels; but for forward products
 * with a kernel larger than 1x1 or with groups, which conv_dnnl.c also cuts
 * into blocks of output channels. At batch 1 (one thread, CPU time)
 * oneDNN ran ResNet-18's 3x3 layers 1.1 to 1.4 times faster than im2col +
 * GEMM, its 7x7 stem 1.5 times, RegNetY-400MF's grouped 3x3 layers (8
 * channels a group) 1.3 to 2.9 times; 1x1 layers were level and stay on
 * the GEMM, whose weights a program packs once (docs/benchmarks.md). The
 * rule reads shapes only, so the choice (and the bits) never depends on the
 * thread count. */
static bool dnnl_prefer(const cn_conv_geom *g, cn_dtype dt, int which) {
    /* ... but for one call (nothing for the pool to share, where the GEMM
     * would split the pixels). */
    bool small_fwd = which == 0 && !cn_dw_conv_takes(g) &&
                     (g->groups > 1 || g->KH * g->KW > 1) && cn_dnnl_conv2d_tasks(g, 0) > 1;
    if (dt != CN_F32 || (g->N < 4 && !small_fwd) || g->C == 0 || g->O == 0) return false;
    if (which == 1 && g->C / g->groups < 16) return false;
    return cn_dnnl_conv2d_available(g, dt, which);
}
#endif

bool cn_conv_have_dnnl(void) {
#ifdef CN_HAVE_DNNL
    return true;
#else
    return false;
#endif
}

/* 0 reference, 1 GEMM, 2 oneDNN, 3 the direct depthwise kernel. */
static int pick(const cn_conv_geom *g, cn_dtype dt, int which) {
    pthread_once(&conv_env_once, conv_env_read);
    switch (conv_impl) {
    case CN_CONV_REF: return 0;
    case CN_CONV_GEMM: return 1;
    case CN_CONV_DNNL: return cn_conv_have_dnnl() && dt == CN_F32 ? 2 : 1;
    case CN_CONV_DEPTHWISE: return cn_dw_conv_takes(g) ? 3 : 1;
    default: break;
    }
#ifdef CN_HAVE_DNNL
    /* Depthwise: bench/bench_dwconv (docs/benchmarks.md) has the direct
     * kernel 2.6 to 20 times faster than im2col + GEMM at batch 1, where
     * oneDNN would run on one thread (one block of the batch per task). At
     * batch 16 oneDNN's forward product is level or ahead on planes of
     * 56x56 and 112x112 outputs (up to 1.4 times), either way on 28x28
     * and mostly behind on smaller ones; its weight gradient is 1.0 to 3.4
     * times faster for 3x3 kernels and 7 to 27 times slower for 5x5 and
     * 7x7. So from batch 4 oneDNN takes the forward product of planes
     * above 28x28 outputs and the 3x3 weight gradient. */
    if (cn_dw_conv_takes(g)) {
        bool dnnl = which == 0   ? g->OH * g->OW > 28 * 28
                    : which == 2 ? g->KH * g->KW <= 9
                                 : false;
        return dnnl && dnnl_prefer(g, dt, which) ? 2 : 3;
    }
    if (dnnl_prefer(g, dt, which)) return 2;
#else
    (void)dt, (void)which;
    if (cn_dw_conv_takes(g)) return 3;
#endif
    return 1;
}

int cn_cpu_conv2d_fwd(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *w,
                      const cn_tensor *bias, cn_tensor *y) {
    switch (pick(g, (cn_dtype)y->dtype, 0)) {
    case 0: return cn_cpu_conv2d_fwd_ref(g, x, w, bias, y);
    case 3: return cn_dw_conv2d_fwd(g, x, w, bias, y);
#ifdef CN_HAVE_DNNL
    case 2: {
        int rc = cn_dnnl_conv2d_fwd(g, x, w, bias, y);
        if (rc != 1) return rc; /* 1: oneDNN does not take this geometry */
        return fwd_gemm(g, x, w, bias, y);
    }
#endif
    default: return fwd_gemm(g, x, w, bias, y);
    }
}

int cn_cpu_conv2d_dgrad(const cn_conv_geom *g, const cn_tensor *dy, const cn_tensor *w,
                        const cn_tensor *bias, cn_tensor *dx) {
    switch (pick(g, (cn_dtype)dx->dtype, 1)) {
    case 0: return cn_cpu_conv2d_dgrad_ref(g, dy, w, bias, dx);
    case 3: return cn_dw_conv2d_dgrad(g, dy, w, bias, dx);
#ifdef CN_HAVE_DNNL
    case 2: {
        int rc = cn_dnnl_conv2d_dgrad(g, dy, w, bias, dx);
        if (rc != 1) return rc; /* 1: oneDNN does not take this geometry */
        return dgrad_gemm(g, dy, w, bias, dx);
    }
#endif
    default: return dgrad_gemm(g, dy, w, bias, dx);
    }
}

int cn_cpu_conv2d_wgrad(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *dy,
                        cn_tensor *dw) {
    switch (pick(g, (cn_dtype)dw->dtype, 2)) {
    case 0: return cn_cpu_conv2d_wgrad_ref(g, x, dy, dw);
    case 3: return cn_dw_conv2d_wgrad(g, x, dy, dw);
#ifdef CN_HAVE_DNNL
    case 2: {
        int rc = cn_dnnl_conv2d_wgrad(g, x, dy, dw);
        if (rc != 1) return rc; /* 1: oneDNN does not take this geometry */
        return wgrad_gemm(g, x, dy, dw);
    }
#endif
    default: return wgrad_gemm(g, x, dy, dw);
    }
}

/* ---- the op kernels (kernels.h) ----
 * Attributes (canonical after the ops' infer, src/ops/conv.c): list =
 * [stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w] (+
 * [output_padding_h, output_padding_w] for conv_transpose2d, which only
 * the output size depends on), i[0] = groups. */

/* The geometry of conv2d(x, w) = y from the attributes and the shapes. */
static cn_conv_geom geom_of_shapes(const cn_attrs *a, const int64_t *x, const int64_t *w,
                                   const int64_t *y) {
    const int64_t *l = a->list;
    cn_conv_geom g = {x[0], x[1], x[2], x[3], w[0], w[2], w[3], y[2], y[3],
                      l[0], l[1], l[2], l[3], l[4], l[5], a->i[0]};
    return g;
}

static cn_conv_geom conv_geom_of(const cn_attrs *a, const cn_tensor *x, const cn_tensor *w,
                                 const cn_tensor *y) {
    return geom_of_shapes(a, x->shape, w->shape, y->shape);
}

bool cn_cpu_conv2d_fwd_packs(const cn_attrs *a, const int64_t *x, const int64_t *w,
                             const int64_t *y, cn_dtype dt) {
    cn_conv_geom g = geom_of_shapes(a, x, w, y);
    /* Depthwise weights are a few numbers per channel: nothing to gain. */
    return (dt == CN_F32 || dt == CN_F64) && w[1] > 1 && pick(&g, dt, 0) == 1;
}

bool cn_cpu_conv2d_fwd_transposed(const cn_attrs *a, const int64_t *x, const int64_t *w,
                                  const int64_t *y, cn_dtype dt) {
    cn_conv_geom g = geom_of_shapes(a, x, w, y);
    return fwd_transposed(&g, dt);
}

#ifdef CN_HAVE_DNNL
static bool half_on_dnnl(const cn_conv_geom *g, cn_dtype dt, int which);
#endif

cn_gemm_pack *cn_cpu_conv2d_fwd_dnnl_pack(const cn_attrs *a, const int64_t *x, const cn_tensor *w,
                                         const int64_t *y, bool bias,
                                         const cn_gemm_pack *have) {
#ifdef CN_HAVE_DNNL
    cn_conv_geom g = geom_of_shapes(a, x, w->shape, y);
    cn_dtype dt = (cn_dtype)w->dtype;
    if (dt == CN_F32 ? pick(&g, CN_F32, 0) != 2 : !half_on_dnnl(&g, dt, 0)) return NULL;
    if (have && cn_gemm_pack_holds(have, w) && cn_dnnl_conv2d_fwd_pack_fits(have, &g, bias, dt))
        return (cn_gemm_pack *)have;
    cn_gemm_pack *pk = cn_dnnl_conv2d_fwd_pack(&g, w, bias);
    if (!pk) cn_clear_error(); /* the product reorders w itself */
    return pk;
#else
    (void)a, (void)x, (void)w, (void)y, (void)bias, (void)have;
    return NULL;
#endif
}

/* ---- autocast's native products ----
 * Inside a bf16 (f16) autocast region on a CPU that multiplies that type
 * itself, the dispatcher (src/ops/dispatch.c) hands the three products
 * their inputs rounded and kept half, and an f32 output. oneDNN takes them
 * where it has a kernel for the geometry (AVX-512 BF16 dot products, AMX
 * tiles; f32 accumulation); otherwise, and for depthwise layers (whose
 * direct f32 kernel is bound by memory, not by products), the inputs are
 * widened to f32 here: the same numbers up to the order of the sums. */
static cn_tensor *widened(const cn_tensor *t, cn_tensor **own, int *rc) {
    if (!t || !cn_is_half((cn_dtype)t->dtype) || *rc != CN_OK) return (cn_tensor *)t;
    if (!(*own = cn_cpu_widened(t))) *rc = CN_ENOMEM;
    return *own;
}

#ifdef CN_HAVE_DNNL
/* Does oneDNN take product which (0 fwd, 1 dgrad, 2 wgrad) of g in half
 * type dt? */
static bool half_on_dnnl(const cn_conv_geom *g, cn_dtype dt, int which) {
    pthread_once(&conv_env_once, conv_env_read);
    return cn_is_half(dt) && (conv_impl == CN_CONV_AUTO || conv_impl == CN_CONV_DNNL) &&
           !cn_dw_conv_takes(g) && cn_dnnl_conv2d_available(g, dt, which);
}
#endif

bool cn_conv_half_native(const cn_conv_geom *g, cn_dtype dt, int which) {
#ifdef CN_HAVE_DNNL
    return half_on_dnnl(g, dt, which);
#else
    (void)g, (void)dt, (void)which;
    return false;
#endif
}

/* which: 0 fwd (a = x, b = w), 1 dgrad (a = dy, b = w), 2 wgrad (a = x, b = dy). */
static int half_product(int which, const cn_conv_geom *g, const cn_tensor *a, const cn_tensor *b,
                        const cn_tensor *bias, cn_tensor *out) {
    cn_tensor *own[3] = {NULL, NULL, NULL};
    int rc = CN_OK;
    bias = widened(bias, &own[2], &rc); /* oneDNN's bias and dgrad's are f32 */
#ifdef CN_HAVE_DNNL
    if (rc == CN_OK && a->dtype == b->dtype && half_on_dnnl(g, (cn_dtype)a->dtype, which)) {
        rc = which == 0   ? cn_dnnl_conv2d_fwd(g, a, b, bias, out)
             : which == 1 ? cn_dnnl_conv2d_dgrad(g, a, b, bias, out)
                          : cn_dnnl_conv2d_wgrad(g, a, b, out);
        if (rc != 1) goto done; /* 1: oneDNN does not take this geometry */
        rc = CN_OK;
    }
#endif
    a = widened(a, &own[0], &rc);
    b = widened(b, &own[1], &rc);
    if (rc == CN_OK)
        rc = which == 0   ? cn_cpu_conv2d_fwd(g, a, b, bias, out)
             : which == 1 ? cn_cpu_conv2d_dgrad(g, a, b, bias, out)
                          : cn_cpu_conv2d_wgrad(g, a, b, out);
#ifdef CN_HAVE_DNNL
done:
#endif
    for (int i = 0; i < 3; i++) cn_release(own[i]);
    return rc;
}

/* x, weight, bias?. */
int cn_cpu_k_conv2d(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out) {
    (void)id;
    cn_conv_geom g = conv_geom_of(a, in[0], in[1], out);
    if (cn_is_half((cn_dtype)in[0]->dtype))
        return half_product(0, &g, in[0], in[1], nin == 3 ? in[2] : NULL, out);
    return cn_cpu_conv2d_fwd(&g, in[0], in[1], nin == 3 ? in[2] : NULL, out);
}

/* x, weight, bias?: the input gradient of the convolution whose input is
 * out, its output x, its weight w (O = Cin channels). */
int cn_cpu_k_conv_transpose2d(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                              cn_tensor *out) {
    (void)id;
    const cn_tensor *x = in[0], *w = in[1];
    cn_conv_geom g = conv_geom_of(a, out, w, x);
    if (cn_is_half((cn_dtype)x->dtype))
        return half_product(1, &g, x, w, nin == 3 ? in[2] : NULL, out);
    return cn_cpu_conv2d_dgrad(&g, x, w, nin == 3 ? in[2] : NULL, out);
}

/* x, dy: the weight gradient (out) of conv2d(x, w) = y. */
int cn_cpu_k_conv2d_weight_grad(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                                cn_tensor *out) {
    (void)id;
    (void)nin;
    cn_conv_geom g = conv_geom_of(a, in[0], out, in[1]);
    if (cn_is_half((cn_dtype)in[0]->dtype)) return half_product(2, &g, in[0], in[1], NULL, out);
    return cn_cpu_conv2d_wgrad(&g, in[0], in[1], out);
}
