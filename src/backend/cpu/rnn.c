/* The LSTM sequence kernels (rnn.h). Per step: one GEMM for the recurrent
 * term, then one pass over the batch rows, split across the pool, that
 * applies the gates and writes everything the backward pass needs. The
 * row functions are generated for f32 (vmath.h's vectorised sigmoid and
 * tanh, the ones the sigmoid and tanh ops use) and f64 (libm). */
#include "rnn.h"

#include "kernels.h"

#include "elem_math.h"
#include "gemm.h"

#include <string.h>

/* ---- the rows: one sample of one step ---- */

/* Forward: a = gx + the recurrent term (4H), cp = c of the previous step.
 * Backward: from the step's y and dy (6H each), cp, dhn (the gradient
 * reaching h from the next step) and dcn (the same for c, replaced by
 * the gradient passed on to cp), the pre-activation gradients dg (4H). */
/* Each output part is its own restrict parameter: with one pointer, GCC
 * cannot tell that y[j] and y[H + j] never overlap, checks at run time,
 * and the check (adjacent parts) sends every row down the scalar loop. */
#define LSTM_ROWS(SFX, T, SIG, TANH)                                                               \
    CN_HOT_FN(fwd_row_##SFX,                                                                       \
              (int64_t H, const T *restrict gx, const T *restrict a, const T *restrict cp,         \
               T *restrict yh, T *restrict yc, T *restrict yi, T *restrict yf, T *restrict yg,    \
               T *restrict yo),                                                                    \
              (H, gx, a, cp, yh, yc, yi, yf, yg, yo)) {                                            \
        for (int64_t j = 0; j < H; j++) {                                                          \
            T i = SIG(gx[j] + a[j]);                                                               \
            T f = SIG(gx[H + j] + a[H + j]);                                                       \
            T g = TANH(gx[2 * H + j] + a[2 * H + j]);                                              \
            T o = SIG(gx[3 * H + j] + a[3 * H + j]);                                               \
            T c = f * cp[j] + i * g;                                                               \
            yh[j] = o * TANH(c);                                                                   \
            yc[j] = c;                                                                             \
            yi[j] = i;                                                                             \
            yf[j] = f;                                                                             \
            yg[j] = g;                                                                             \
            yo[j] = o;                                                                             \
        }                                                                                          \
    }                                                                                              \
    CN_HOT_FN(bwd_row_##SFX,                                                                       \
              (int64_t H, const T *restrict y, const T *restrict dyh, const T *restrict dyc,       \
               const T *restrict dyi, const T *restrict dyf, const T *restrict dyg,                \
               const T *restrict dyo, const T *restrict cp, const T *restrict dhn,                 \
               T *restrict dcn, T *restrict di, T *restrict df, T *restrict dg, T *restrict dout), \
              (H, y, dyh, dyc, dyi, dyf, dyg, dyo, cp, dhn, dcn, di, df, dg, dout)) {              \
        for (int64_t j = 0; j < H; j++) {                                                          \
            T c = y[H + j], i = y[2 * H + j], f = y[3 * H + j], g = y[4 * H + j];                  \
            T o = y[5 * H + j];                                                                    \
            T tc = TANH(c);                                                                        \
            T dh = dyh[j] + dhn[j];                                                                \
            T dc = dyc[j] + dcn[j] + dh * o * (1 - tc * tc);                                       \
            di[j] = (dc * g + dyi[j]) * (i * (1 - i));                                             \
            df[j] = (dc * cp[j] + dyf[j]) * (f * (1 - f));                                         \
            dg[j] = (dc * i + dyg[j]) * (1 - g * g);                                               \
            dout[j] = (dh * tc + dyo[j]) * (o * (1 - o));                                          \
            dcn[j] = dc * f;                                                                       \
        }                                                                                          \
    }

LSTM_ROWS(f32, float, cn_vsigmoidf, cn_vtanhf)
LSTM_ROWS(f64, double, un_sigmoid, tanh)

/* ---- helpers ---- */

/* t itself when its last axis is unit-stride (the rows are read directly),
 * else a contiguous copy. */
static cn_tensor *unit_rows(const cn_tensor *t) {
    if (!t) return NULL;
    int d = t->ndim - 1;
    if (d < 0 || t->strides[d] == 1 || t->shape[d] <= 1) return cn_retain((cn_tensor *)t);
    cn_tensor *c = cn_t_empty((cn_dtype)t->dtype, t->ndim, t->shape);
    if (c && cn_copy_strided(c, t) < 0) {
        cn_release(c);
        return NULL;
    }
    return c;
}

/* The pointwise pass of one step, split over the batch rows n. */
typedef struct step_ctx {
    bool f64;
    int64_t H;
    size_t es;
    /* forward */
    const char *gx; int64_t gx_s; /* row n of step t at gx + n * gx_s */
    const char *a;                /* [N, 4H] */
    const char *cp; int64_t cp_s; /* c of the previous step (row stride) */
    char *y;                      /* [N, 6H] of this step */
    /* backward */
    const char *yt, *dy; int64_t dy_s;
    int dy_parts;                 /* dy holds the first dy_parts of the 6 parts */
    const char *zeros;            /* H zeros: the parts it does not hold */
    const char *dhn;              /* [N, H] */
    char *dcn;                    /* [N, H] */
    char *dg;                     /* [N, 4H] */
} step_ctx;

static void fwd_range(void *ctx, int64_t n0, int64_t n1) {
    const step_ctx *s = ctx;
    int64_t H = s->H, es = (int64_t)s->es;
    for (int64_t n = n0; n < n1; n++) {
        const void *gx = s->gx + n * s->gx_s * es, *a = s->a + n * 4 * H * es;
        const void *cp = s->cp + n * s->cp_s * es;
        char *y = s->y + n * 6 * H * es;
        int64_t p = H * es;
        if (s->f64)
            fwd_row_f64(H, gx, a, cp, (double *)y, (double *)(y + p), (double *)(y + 2 * p),
                        (double *)(y + 3 * p), (double *)(y + 4 * p), (double *)(y + 5 * p));
        else
            fwd_row_f32(H, gx, a, cp, (float *)y, (float *)(y + p), (float *)(y + 2 * p),
                        (float *)(y + 3 * p), (float *)(y + 4 * p), (float *)(y + 5 * p));
    }
}

static void bwd_range(void *ctx, int64_t n0, int64_t n1) {
    const step_ctx *s = ctx;
    int64_t H = s->H, es = (int64_t)s->es;
    for (int64_t n = n0; n < n1; n++) {
        const char *yt = s->yt + n * 6 * H * es, *dy = s->dy + n * s->dy_s * es;
        const void *cp = s->cp + n * s->cp_s * es, *dhn = s->dhn + n * H * es;
        void *dcn = s->dcn + n * H * es;
        char *dg = s->dg + n * 4 * H * es;
        int64_t p = H * es;
        /* The parts dy does not hold are zeros (s->zeros, H of them). */
        const void *d[6];
        for (int k = 0; k < 6; k++) d[k] = k < s->dy_parts ? dy + k * p : s->zeros;
        if (s->f64)
            bwd_row_f64(H, (const double *)yt, d[0], d[1], d[2], d[3], d[4], d[5], cp, dhn, dcn,
                        (double *)dg, (double *)(dg + p), (double *)(dg + 2 * p),
                        (double *)(dg + 3 * p));
        else
            bwd_row_f32(H, (const float *)yt, d[0], d[1], d[2], d[3], d[4], d[5], cp, dhn, dcn,
                        (float *)dg, (float *)(dg + p), (float *)(dg + 2 * p),
                        (float *)(dg + 3 * p));
    }
}

/* Rows of about this many gate elements or more are worth a task. */
#define ROW_GRAIN_ELEMS 4096

static int64_t row_grain(int64_t H) {
    int64_t g = ROW_GRAIN_ELEMS / (4 * H);
    return g > 1 ? g : 1;
}

/* ---- forward ---- */

int cn_cpu_lstm_seq(const cn_tensor *gx_in, const cn_tensor *w, const cn_tensor *h0_in,
                    const cn_tensor *c0_in, bool reverse, cn_tensor *y) {
    cn_dtype dt = (cn_dtype)y->dtype;
    int64_t T = y->shape[0], N = y->shape[1], H = w->shape[1];
    size_t es = cn_dsize(dt);
    int rc = CN_OK;
    cn_tensor *gx = unit_rows(gx_in), *h0 = unit_rows(h0_in), *c0 = unit_rows(c0_in);
    /* a: the recurrent term; zeros: c of a missing c0. */
    char *a = cn_alloc(es * (size_t)(N * 4 * H)), *zeros = cn_alloc(es * (size_t)H);
    if (!gx || (h0_in && !h0) || (c0_in && !c0) || !a || !zeros) {
        rc = cn_failc(CN_ENOMEM, "lstm_seq: out of memory");
        goto out;
    }
    memset(zeros, 0, es * (size_t)H);
    int64_t ys = N * 6 * H; /* elements per step of y */
    step_ctx s = {.f64 = dt == CN_F64, .H = H, .es = es, .a = a, .gx_s = gx->strides[1]};
    for (int64_t k = 0; k < T; k++) {
        int64_t t = reverse ? T - 1 - k : k, tp = reverse ? t + 1 : t - 1;
        char *yt = (char *)cn_t_ptr(y) + (size_t)(t * ys) * es;
        const char *hp = NULL, *cp = zeros;
        int64_t hp_s = 0, cp_s = 0;
        if (k > 0) {
            const char *yp = (const char *)cn_t_ptr(y) + (size_t)(tp * ys) * es;
            hp = yp;
            cp = yp + (size_t)H * es;
            hp_s = cp_s = 6 * H;
        } else {
            if (h0) hp = cn_t_ptr(h0), hp_s = h0->strides[0];
            if (c0) cp = cn_t_ptr(c0), cp_s = c0->strides[0];
        }
        if (hp) {
            /* a = h_prev @ w^T */
            if (cn_gemm(dt, N, 4 * H, H, hp, hp_s, 1, cn_t_ptr(w), w->strides[1], w->strides[0], a,
                        4 * H) < 0) {
                rc = CN_ENOMEM;
                goto out;
            }
        } else if (k == 0) {
            memset(a, 0, es * (size_t)(N * 4 * H));
        }
        s.gx = (const char *)cn_t_ptr(gx) + t * gx->strides[0] * (int64_t)es;
        s.cp = cp;
        s.cp_s = cp_s;
        s.y = yt;
        cn_parallel_for(N, row_grain(H), fwd_range, &s);
    }
out:
    cn_free(a);
    cn_free(zeros);
    cn_release(gx);
    cn_release(h0);
    cn_release(c0);
    return rc;
}

/* ---- backward ---- */

int cn_cpu_lstm_seq_backward(const cn_tensor *y_in, const cn_tensor *dy_in, int dy_parts,
                             const cn_tensor *w, const cn_tensor *c0_in, bool reverse,
                             bool state_grads, cn_tensor *out) {
    cn_dtype dt = (cn_dtype)out->dtype;
    int64_t T = y_in->shape[0], N = y_in->shape[1], H = w->shape[1];
    size_t es = cn_dsize(dt);
    int rc = CN_OK;
    /* y is read as rows of 6H at a step stride of N * 6H: contiguous. */
    cn_tensor *y = cn_is_contiguous(y_in) ? cn_retain((cn_tensor *)y_in) : NULL;
    if (!y && (y = cn_t_empty(dt, 3, y_in->shape)) && cn_copy_strided(y, y_in) < 0) {
        cn_release(y);
        y = NULL;
    }
    cn_tensor *dy = unit_rows(dy_in), *c0 = unit_rows(c0_in);
    char *dhn = cn_alloc(es * (size_t)(N * H)), *dcn = cn_alloc(es * (size_t)(N * H));
    char *zeros = cn_alloc(es * (size_t)H);
    if (!y || !dy || (c0_in && !c0) || !dhn || !dcn || !zeros) {
        rc = cn_failc(CN_ENOMEM, "lstm_seq_backward: out of memory");
        goto out;
    }
    memset(dhn, 0, es * (size_t)(N * H));
    memset(dcn, 0, es * (size_t)(N * H));
    memset(zeros, 0, es * (size_t)H);
    int64_t ys = N * 6 * H, gs = N * 4 * H;
    char *o = cn_t_ptr(out);
    step_ctx s = {.f64 = dt == CN_F64, .H = H, .es = es, .dhn = dhn, .dcn = dcn,
                  .dy_s = dy->strides[1], .dy_parts = dy_parts, .zeros = zeros};
    for (int64_t k = T - 1; k >= 0; k--) {
        int64_t t = reverse ? T - 1 - k : k, tp = reverse ? t + 1 : t - 1;
        s.yt = (const char *)cn_t_ptr(y) + (size_t)(t * ys) * es;
        s.dy = (const char *)cn_t_ptr(dy) + t * dy->strides[0] * (int64_t)es;
        s.dg = o + (size_t)(t * gs) * es;
        if (k > 0) {
            s.cp = (const char *)cn_t_ptr(y) + (size_t)(tp * ys + H) * es;
            s.cp_s = 6 * H;
        } else {
            s.cp = c0 ? cn_t_ptr(c0) : zeros;
            s.cp_s = c0 ? c0->strides[0] : 0;
        }
        cn_parallel_for(N, row_grain(H), bwd_range, &s);
        /* dhn = dg @ w: what reaches h of the previous step (of h0 at k = 0,
         * wanted only with state_grads). */
        if ((k > 0 || state_grads) &&
            cn_gemm(dt, N, H, 4 * H, s.dg, 4 * H, 1, cn_t_ptr(w), w->strides[0], w->strides[1],
                    dhn, H) < 0) {
            rc = CN_ENOMEM;
            goto out;
        }
    }
    if (state_grads) {
        /* Row T: (dh0, dc0, 0, 0). With T = 0, nothing reached them. */
        char *last = o + (size_t)(T * gs) * es;
        memset(last, 0, es * (size_t)gs);
        for (int64_t n = 0; n < N; n++) {
            memcpy(last + (size_t)(n * 4 * H) * es, dhn + (size_t)(n * H) * es, es * (size_t)H);
            memcpy(last + (size_t)(n * 4 * H + H) * es, dcn + (size_t)(n * H) * es,
                   es * (size_t)H);
        }
    }
out:
    cn_free(dhn);
    cn_free(dcn);
    cn_free(zeros);
    cn_release(y);
    cn_release(dy);
    cn_release(c0);
    return rc;
}

/* ---- the op kernels (kernels.h) ---- */

/* gx, w_hh, h0?, c0?; i[0] = reverse. */
int cn_cpu_k_lstm_seq(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                      cn_tensor *out) {
    (void)id;
    return cn_cpu_lstm_seq(in[0], in[1], nin > 2 ? in[2] : NULL, nin > 3 ? in[3] : NULL,
                           a->i[0] != 0, out);
}

/* y, dy, w_hh, c0?; i[0] = reverse, i[1] = state_grads, i[2] = dy_parts. */
int cn_cpu_k_lstm_seq_backward(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                               cn_tensor *out) {
    (void)id;
    return cn_cpu_lstm_seq_backward(in[0], in[1], (int)a->i[2], in[2], nin > 3 ? in[3] : NULL,
                                    a->i[0] != 0, a->i[1] != 0, out);
}
