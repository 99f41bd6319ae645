/* Rotary position embeddings on the CPU (the op: src/ops/rope.c).
 *
 * cos and sin of every (position, pair) are computed once per call into a
 * table of doubles [T][cos R/2 | sin R/2] (T R/2 pairs of sin and cos
 * instead of one per element: a batch of heads shares them), then each row
 * of x is turned by its position's line of the table. The row loop works in
 * double and rounds once, so f32 keeps its precision whatever the angle.
 * Rows are read through x's strides (q and k are transposed views of the
 * projection in the attention module, with unit-stride rows), so nothing
 * is copied first; rows of unit stride take the vectorised path. Each
 * output element depends on its own row only: the same bits for any
 * thread count. */
#include "kernels.h"

#include <math.h>
#include <stdlib.h>

#define ROW_GRAIN 16384 /* elements of work worth a thread */

typedef struct rope_job {
    const char *x;
    char *y;
    cn_dtype dt;
    int nr;                       /* row axes: all but the last */
    int64_t shape[CN_MAX_DIMS];   /* of the row axes */
    int64_t strides[CN_MAX_DIMS]; /* x's, in elements */
    int64_t xs;                   /* x's last stride */
    int64_t T, D, R, offset;
    bool inter, inv;
    double base;
    double *tab; /* [T][2 * R/2]: cos then sin */
} rope_job;

static void table_range(void *ctx, int64_t t0, int64_t t1) {
    const rope_job *j = ctx;
    int64_t h = j->R / 2;
    for (int64_t t = t0; t < t1; t++) {
        double p = (double)(j->offset + t), *c = j->tab + t * 2 * h, *s = c + h;
        for (int64_t i = 0; i < h; i++) {
            double a = p * pow(j->base, -(double)(2 * i) / (double)j->R);
            c[i] = cos(a);
            s[i] = j->inv ? -sin(a) : sin(a);
        }
    }
}

/* The contiguous rows, one function per pairing and type (CN_HOT_FN: also
 * compiled for AVX2 and AVX-512). */
#define DEF_ROWS(T, S)                                                                             \
    CN_HOT_FN(half_##S,                                                                            \
              (const T *restrict x, T *restrict y, const double *restrict c,                       \
               const double *restrict s, int64_t h),                                               \
              (x, y, c, s, h)) {                                                                   \
        for (int64_t i = 0; i < h; i++) {                                                          \
            const double u = x[i], v = x[i + h];                                                   \
            y[i] = (T)(u * c[i] - v * s[i]);                                                       \
            y[i + h] = (T)(v * c[i] + u * s[i]);                                                   \
        }                                                                                          \
    }                                                                                              \
    CN_HOT_FN(inter_##S,                                                                           \
              (const T *restrict x, T *restrict y, const double *restrict c,                       \
               const double *restrict s, int64_t h),                                               \
              (x, y, c, s, h)) {                                                                   \
        for (int64_t i = 0; i < h; i++) {                                                          \
            const double u = x[2 * i], v = x[2 * i + 1];                                           \
            y[2 * i] = (T)(u * c[i] - v * s[i]);                                                   \
            y[2 * i + 1] = (T)(v * c[i] + u * s[i]);                                               \
        }                                                                                          \
    }                                                                                              \
    /* Any stride along the row, and the features past R. */                                      \
    static void row_##S(const rope_job *j, const T *x, T *y, const double *c, const double *s) {  \
        int64_t h = j->R / 2, xs = j->xs;                                                          \
        if (xs == 1) {                                                                             \
            if (j->inter)                                                                          \
                inter_##S(x, y, c, s, h);                                                          \
            else                                                                                   \
                half_##S(x, y, c, s, h);                                                           \
        } else {                                                                                   \
            for (int64_t i = 0; i < h; i++) {                                                      \
                int64_t a = j->inter ? 2 * i : i, b = j->inter ? 2 * i + 1 : i + h;                \
                const double u = x[a * xs], v = x[b * xs];                                         \
                y[a] = (T)(u * c[i] - v * s[i]);                                                   \
                y[b] = (T)(v * c[i] + u * s[i]);                                                   \
            }                                                                                      \
        }                                                                                          \
        for (int64_t k = j->R; k < j->D; k++) y[k] = x[k * xs];                                    \
    }

DEF_ROWS(float, f32)
DEF_ROWS(double, f64)

static void rows_range(void *ctx, int64_t r0, int64_t r1) {
    const rope_job *j = ctx;
    size_t es = cn_dsize(j->dt);
    int64_t h = j->R / 2;
    for (int64_t r = r0; r < r1; r++) {
        int64_t off = 0, rem = r;
        for (int d = j->nr - 1; d >= 0; d--) {
            off += rem % j->shape[d] * j->strides[d];
            rem /= j->shape[d];
        }
        int64_t t = r % j->T;
        const double *c = j->tab + t * 2 * h, *s = c + h;
        const char *x = j->x + off * (int64_t)es;
        char *y = j->y + r * j->D * (int64_t)es;
        if (j->dt == CN_F32)
            row_f32(j, (const float *)x, (float *)y, c, s);
        else
            row_f64(j, (const double *)x, (double *)y, c, s);
    }
}

int cn_cpu_k_rope(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                  cn_tensor *out) {
    (void)id, (void)nin;
    const cn_tensor *x = in[0];
    cn_dtype dt = (cn_dtype)out->dtype;
    if (dt != CN_F32 && dt != CN_F64)
        return cn_failc(CN_EUNSUPPORTED, "rope: no CPU kernel for %s", cn_dtype_name(dt));
    rope_job j = {.x = cn_t_ptr(x), .y = cn_t_ptr(out), .dt = dt, .nr = x->ndim - 1,
                  .xs = x->strides[x->ndim - 1], .T = x->shape[x->ndim - 2],
                  .D = x->shape[x->ndim - 1], .R = a->i[1] ? a->i[1] : x->shape[x->ndim - 1],
                  .offset = a->i[0], .inter = a->i[2] != 0, .inv = a->i[3] != 0, .base = a->f[0]};
    int64_t rows = 1;
    for (int d = 0; d < j.nr; d++) {
        j.shape[d] = x->shape[d];
        j.strides[d] = x->strides[d];
        rows *= x->shape[d];
    }
    if (rows == 0 || j.D == 0) return CN_OK;
    int64_t h = j.R / 2;
    j.tab = malloc(sizeof(double) * (size_t)(j.T * 2 * (h > 0 ? h : 1)));
    if (!j.tab) return cn_failc(CN_ENOMEM, "rope: out of memory for the cos/sin table");
    if (h > 0) cn_parallel_for(j.T, ROW_GRAIN / 16 / h + 1, table_range, &j);
    cn_parallel_for(rows, ROW_GRAIN / j.D + 1, rows_range, &j);
    free(j.tab);
    return CN_OK;
}
