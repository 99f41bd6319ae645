/* layer_norm on the CPU (the op: src/ops/layer_norm.c).
 *
 * One row (the last ndim axes) at a time: the mean, then the sum of squared
 * deviations from it (two-pass, so a row far from zero loses nothing), both
 * summed in double, then y = (x - mean) r w + b computed in double and
 * rounded once. The row stays in cache between its three loops, so memory
 * is read once and written once where the composition of ops makes five to
 * seven passes. weight and bias are copied once per call into doubles of
 * the row's length (ones and zeros when absent, which leaves x^ exact).
 *
 * Rows are read through x's strides, so views are not copied first.
 * Rows are independent and each is summed in a fixed order: the same bits
 * for any thread count. */
#include "kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ROW_GRAIN 16384 /* elements of work worth a thread */
#define LANES 8         /* partial sums per row: vector registers of doubles */
#define TILE 16         /* rows gathered together: a cache line of f32 */

typedef struct ln_job {
    const char *x;
    char *y;
    cn_dtype dt;
    int nr, nd;                   /* row axes (the leading ones), normalised axes */
    int64_t shape[CN_MAX_DIMS];   /* x's */
    int64_t strides[CN_MAX_DIMS]; /* x's, in elements */
    int64_t n;                    /* the row's length */
    int64_t rows, ntasks;
    int64_t tile_rows; /* rows per tile: TILE, or fewer when a task has fewer */
    const double *w, *b;
    char *scratch; /* a tile of rows per task, when the normalised axes are strided */
    double eps;
} ln_job;

/* Sums in LANES interleaved partial sums, added in a fixed order, so GCC
 * vectorises them without reassociating anything itself. */
#define DEF_ROW(T, S)                                                                              \
    CN_HOT_FN(row_##S,                                                                             \
              (const T *restrict x, T *restrict y, const double *restrict w,                       \
               const double *restrict b, int64_t n, double eps),                                   \
              (x, y, w, b, n, eps)) {                                                              \
        double acc[LANES] = {0}, s = 0, q = 0;                                                     \
        int64_t i = 0, nv = n - n % LANES;                                                         \
        for (; i < nv; i += LANES)                                                                 \
            for (int k = 0; k < LANES; k++) acc[k] += (double)x[i + k];                            \
        for (int k = 0; k < LANES; k++) s += acc[k];                                               \
        for (; i < n; i++) s += (double)x[i];                                                      \
        const double mean = s / (double)n;                                                         \
        for (int k = 0; k < LANES; k++) acc[k] = 0;                                                \
        for (i = 0; i < nv; i += LANES)                                                            \
            for (int k = 0; k < LANES; k++) {                                                      \
                const double d = (double)x[i + k] - mean;                                          \
                acc[k] += d * d;                                                                   \
            }                                                                                      \
        for (int k = 0; k < LANES; k++) q += acc[k];                                               \
        for (; i < n; i++) {                                                                       \
            const double d = (double)x[i] - mean;                                                  \
            q += d * d;                                                                            \
        }                                                                                          \
        const double r = 1.0 / sqrt(q / (double)n + eps);                                          \
        for (i = 0; i < n; i++) y[i] = (T)(((double)x[i] - mean) * r * w[i] + b[i]);               \
    }

DEF_ROW(float, f32)
DEF_ROW(double, f64)

/* The element offset of row-major index k over nd axes of shape, strides. */
static inline int64_t offset_of(int64_t k, int nd, const int64_t *shape, const int64_t *strides) {
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        off += k % shape[d] * strides[d];
        k /= shape[d];
    }
    return off;
}

static inline double load(const char *p, cn_dtype dt) {
    return dt == CN_F32 ? (double)*(const float *)p : *(const double *)p;
}

/* The m rows at x + off[i] (normalised axes of any strides) into the
 * tile dst, row after row. One normalised axis: element k of all m rows
 * at once, which for channels-first data (rows adjacent in memory) reads
 * whole cache lines. */
static bool consecutive(const int64_t *off, int m) {
    for (int i = 1; i < m; i++)
        if (off[i] != off[0] + i) return false;
    return true;
}

static void gather_rows(const ln_job *j, const int64_t *off, int m, char *dst) {
    size_t es = cn_dsize(j->dt);
    const int64_t *shape = j->shape + j->nr, *strides = j->strides + j->nr, n = j->n;
    if (j->nd == 1) {
        int64_t st = strides[0];
        /* A whole tile of adjacent f32 rows (channels-first data): unit-
         * stride reads, and the next tile's lines asked for ahead, which
         * took ConvNeXt-T's layer_norm steps from 14.3 to 13.2 ms
         * (medians of 3, per 3 passes). */
        if (j->dt == CN_F32 && m == TILE && consecutive(off, m)) {
            const float *x = (const float *)j->x + off[0];
            for (int64_t k = 0; k < n; k++) {
                __builtin_prefetch(x + k * st + TILE);
                for (int i = 0; i < TILE; i++) ((float *)dst)[i * n + k] = x[k * st + i];
            }
            return;
        }
        if (j->dt == CN_F32) {
            const float *x = (const float *)j->x;
            for (int64_t k = 0; k < n; k++)
                for (int i = 0; i < m; i++) ((float *)dst)[i * n + k] = x[off[i] + k * st];
        } else {
            const double *x = (const double *)j->x;
            for (int64_t k = 0; k < n; k++)
                for (int i = 0; i < m; i++) ((double *)dst)[i * n + k] = x[off[i] + k * st];
        }
        return;
    }
    for (int i = 0; i < m; i++)
        for (int64_t k = 0; k < n; k++) {
            int64_t o = off[i] + offset_of(k, j->nd, shape, strides);
            memcpy(dst + (size_t)(i * n + k) * es, j->x + o * (int64_t)es, es);
        }
}

/* Rows [R t / k, R (t + 1) / k) of task t, TILE at a time, each task with
 * its own tile where the normalised axes are strided. */
static void tasks_range(void *ctx, int64_t t0, int64_t t1) {
    const ln_job *j = ctx;
    size_t es = cn_dsize(j->dt);
    int64_t off[TILE];
    for (int64_t t = t0; t < t1; t++) {
        char *tile = j->scratch ? j->scratch + (size_t)(t * j->tile_rows * j->n) * es : NULL;
        int64_t hi = j->rows * (t + 1) / j->ntasks;
        for (int64_t r0 = j->rows * t / j->ntasks; r0 < hi; r0 += j->tile_rows) {
            int m = hi - r0 < j->tile_rows ? (int)(hi - r0) : (int)j->tile_rows;
            for (int i = 0; i < m; i++) off[i] = offset_of(r0 + i, j->nr, j->shape, j->strides);
            if (tile) gather_rows(j, off, m, tile);
            for (int i = 0; i < m; i++) {
                const char *x = tile ? tile + (size_t)(i * j->n) * es : j->x + off[i] * (int64_t)es;
                char *y = j->y + (r0 + i) * j->n * (int64_t)es;
                if (j->dt == CN_F32)
                    row_f32((const float *)x, (float *)y, j->w, j->b, j->n, j->eps);
                else
                    row_f64((const double *)x, (double *)y, j->w, j->b, j->n, j->eps);
            }
        }
    }
}

/* weight or bias (any strides) as n doubles, or fill where absent. */
static void param_row(const cn_tensor *p, int64_t n, double fill, double *dst) {
    if (!p) {
        for (int64_t k = 0; k < n; k++) dst[k] = fill;
        return;
    }
    const char *base = cn_t_ptr(p);
    size_t es = cn_dsize((cn_dtype)p->dtype);
    for (int64_t k = 0; k < n; k++)
        dst[k] = load(base + offset_of(k, p->ndim, p->shape, p->strides) * (int64_t)es,
                      (cn_dtype)p->dtype);
}

/* Are x's last nd axes one block of unit stride (size-1 axes aside)? */
static bool rows_contiguous(const cn_tensor *x, int nd) {
    int64_t want = 1;
    for (int d = x->ndim - 1; d >= x->ndim - nd; d--) {
        if (x->shape[d] != 1 && x->strides[d] != want) return false;
        want *= x->shape[d];
    }
    return true;
}

int cn_cpu_k_layer_norm(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                        cn_tensor *out) {
    (void)id, (void)nin;
    cn_dtype dt = (cn_dtype)out->dtype;
    if (dt != CN_F32 && dt != CN_F64)
        return cn_failc(CN_EUNSUPPORTED, "layer_norm: no CPU kernel for %s", cn_dtype_name(dt));
    const cn_tensor *x = in[0];
    int nd = (int)a->i[0];
    const cn_tensor *w = a->i[1] ? in[1] : NULL, *b = a->i[2] ? in[1 + a->i[1]] : NULL;
    ln_job j = {.x = cn_t_ptr(x), .y = cn_t_ptr(out), .dt = dt, .nr = x->ndim - nd, .nd = nd,
                .n = 1, .eps = a->f[0]};
    int64_t rows = 1;
    for (int d = 0; d < x->ndim; d++) {
        j.shape[d] = x->shape[d];
        j.strides[d] = x->strides[d];
        if (d < j.nr)
            rows *= x->shape[d];
        else
            j.n *= x->shape[d];
    }
    /* Tasks of a fixed number of rows (by shape and thread count; each row
     * is computed whole, so the split does not change the bits), each with
     * a tile of rows where the normalised axes are strided: a transposed
     * view (ConvNeXt's channels-last LayerNorm of an NCHW tensor) is read
     * through it TILE rows at a time. */
    int64_t grain = ROW_GRAIN / j.n + 1;
    j.rows = rows;
    j.ntasks = rows / grain < 1 ? 1 : rows / grain;
    int64_t most = (int64_t)cn_get_num_threads() * CN_CHUNKS_PER_THREAD;
    if (j.ntasks > most) j.ntasks = most;
    /* A task's tile holds at most its own rows (a few long rows over many
     * tasks would otherwise ask for TILE times the input). */
    int64_t per_task = (rows + j.ntasks - 1) / j.ntasks;
    j.tile_rows = per_task < TILE ? (per_task < 1 ? 1 : per_task) : TILE;
    size_t es = cn_dsize(dt),
           nscratch = rows_contiguous(x, nd) ? 0 : (size_t)(j.ntasks * j.tile_rows * j.n) * es;
    double *wb = malloc(sizeof(double) * 2 * (size_t)j.n + nscratch);
    if (!wb) return cn_failc(CN_ENOMEM, "layer_norm: out of memory for weight and bias rows");
    param_row(w, j.n, 1, wb);
    param_row(b, j.n, 0, wb + j.n);
    j.w = wb;
    j.b = wb + j.n;
    j.scratch = nscratch ? (char *)(wb + 2 * j.n) : NULL;
    cn_parallel_tasks(j.ntasks, tasks_range, &j);
    free(wb);
    return CN_OK;
}
