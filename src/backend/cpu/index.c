/* Kernels of the joining, indexing and padding ops. Most walk their output
 * as rows along its last axis with a small odometer (`cursor`) that tracks
 * every operand's offset, so the per-element work is a load and a store and
 * a row whose source is contiguous is one memcpy. Rank-0 tensors are walked
 * as one row of one element. */
#include "index.h"

#include "kernels.h"
#include "../pad_geom.h"

#include "iter.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>

#define MAX_OPS 3

/* Elements per thread below which splitting a loop does not pay. */
#define GRAIN CN_GRAIN_ELEMWISE

typedef struct cursor {
    int nd, nops;
    int64_t shape[CN_MAX_DIMS];
    int64_t str[MAX_OPS][CN_MAX_DIMS]; /* in elements */
    int64_t idx[CN_MAX_DIMS];
    int64_t off[MAX_OPS]; /* in elements */
} cursor;

static void cur_seek(cursor *c, int64_t row) {
    for (int d = c->nd - 1; d >= 0; d--) {
        c->idx[d] = row % c->shape[d];
        row /= c->shape[d];
    }
    for (int k = 0; k < c->nops; k++) {
        int64_t o = 0;
        for (int d = 0; d < c->nd; d++) o += c->idx[d] * c->str[k][d];
        c->off[k] = o;
    }
}

static inline void cur_next(cursor *c) {
    for (int d = c->nd - 1; d >= 0; d--) {
        for (int k = 0; k < c->nops; k++) c->off[k] += c->str[k][d];
        if (++c->idx[d] < c->shape[d]) return;
        for (int k = 0; k < c->nops; k++) c->off[k] -= c->str[k][d] * c->shape[d];
        c->idx[d] = 0;
    }
}

/* Rows per parallel chunk so that a chunk holds about GRAIN elements. */
static int64_t row_grain(int64_t row_len) {
    return row_len >= GRAIN ? 1 : GRAIN / (row_len > 0 ? row_len : 1);
}

/* The first bad value found by any thread; reported by the caller after the
 * parallel loop, since the error message is thread-local. */
typedef struct bad_value {
    atomic_int hit;
    int64_t value;
} bad_value;

static void bad_set(bad_value *b, int64_t v) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&b->hit, &expected, 1)) b->value = v;
}

static bool bad_seen(bad_value *b) { return atomic_load_explicit(&b->hit, memory_order_relaxed); }

/* ---- runs of elements ---- */

#define STRIDED_COPY(T)                                                                            \
    for (int64_t i = 0; i < n; i++)                                                                \
        memcpy(dst + i * (int64_t)sizeof(T), src + i * ss * (int64_t)sizeof(T), sizeof(T))

/* n elements of es bytes from src (stride ss elements) to contiguous dst. */
CN_HOT_FN(copy_run,
          (char *dst, const char *src, int64_t n, int64_t ss, size_t es),
          (dst, src, n, ss, es)) {
    if (n <= 0) return;
    if (ss == 1) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
    switch (es) {
    case 1: STRIDED_COPY(uint8_t); break;
    case 2: STRIDED_COPY(uint16_t); break;
    case 4: STRIDED_COPY(uint32_t); break;
    default: STRIDED_COPY(uint64_t); break;
    }
}

#define FILL(T)                                                                                    \
    do {                                                                                           \
        T v;                                                                                       \
        memcpy(&v, val, sizeof v);                                                                 \
        for (int64_t i = 0; i < n; i++) memcpy(dst + i * (int64_t)sizeof(T), &v, sizeof(T));      \
    } while (0)

/* n copies of the es-byte value val. */
CN_HOT_FN(fill_run,
          (char *dst, int64_t n, const unsigned char *val, size_t es),
          (dst, n, val, es)) {
    if (n <= 0) return;
    switch (es) {
    case 1: memset(dst, val[0], (size_t)n); break;
    case 2: FILL(uint16_t); break;
    case 4: FILL(uint32_t); break;
    default: FILL(uint64_t); break;
    }
}

static inline int64_t load_index(const char *p, bool i64, int64_t i) {
    if (i64) return ((const int64_t *)p)[i];
    return ((const int32_t *)p)[i];
}

/* ---- concat ----
 * Contiguous inputs are copied in one pass over the flat output, which is a
 * sequence of rows of R = (size on axis) * inner elements, each made of one
 * run per input; the pass splits at any element, so concatenation along
 * axis 0 is still parallel. Other inputs are copied by the strided copy
 * kernel into the matching view of out. */

typedef struct concat_ctx {
    int nin;
    const int64_t *off, *len; /* each input's run within a row, in elements */
    const char **src;         /* NULL: not contiguous, copied separately */
    char *dst;
    int64_t R;
    size_t es;
} concat_ctx;

static void concat_chunk(void *p, int64_t b, int64_t e) {
    const concat_ctx *c = p;
    int64_t o = b / c->R, r = b % c->R, pos = b;
    int j = 0;
    while (j < c->nin && c->off[j] + c->len[j] <= r) j++;
    while (pos < e) {
        int64_t n = c->off[j] + c->len[j] - r;
        if (n > e - pos) n = e - pos;
        if (c->src[j])
            memcpy(c->dst + (size_t)pos * c->es,
                   c->src[j] + (size_t)(o * c->len[j] + r - c->off[j]) * c->es, (size_t)n * c->es);
        pos += n;
        r += n;
        if (r == c->R) {
            r = 0;
            o++;
            j = 0;
        }
        while (j < c->nin && c->off[j] + c->len[j] <= r) j++;
    }
}

int cn_cpu_concat(cn_tensor *const *in, int nin, int axis, cn_tensor *out) {
    size_t es = cn_dsize((cn_dtype)out->dtype);
    int64_t inner = 1;
    for (int d = axis + 1; d < out->ndim; d++) inner *= out->shape[d];
    int64_t *off = malloc(sizeof(int64_t) * 2 * (size_t)nin);
    const char **src = malloc(sizeof(char *) * (size_t)nin);
    if (!off || !src) {
        free(off);
        free(src);
        return cn_failc(CN_ENOMEM, "concat: out of memory");
    }
    int64_t *len = off + nin, at = 0;
    bool any_contig = false;
    for (int j = 0; j < nin; j++) {
        off[j] = at * inner;
        len[j] = in[j]->shape[axis] * inner;
        src[j] = NULL;
        if (len[j] > 0 && cn_is_contiguous(in[j])) {
            src[j] = cn_t_ptr(in[j]);
            any_contig = true;
        } else if (len[j] > 0 && cn_shape_numel(in[j]->ndim, in[j]->shape) > 0) {
            /* out viewed with this input's shape, starting at its place. */
            cn_tensor v = *out;
            v.shape[axis] = in[j]->shape[axis];
            v.offset = out->offset + at * out->strides[axis];
            cn_copy_strided(&v, in[j]);
        }
        at += in[j]->shape[axis];
    }
    if (any_contig) {
        concat_ctx c = {nin, off, len, src, cn_t_ptr(out), at * inner, es};
        cn_parallel_for(cn_shape_numel(out->ndim, out->shape), 2 * GRAIN, concat_chunk, &c);
    }
    free(off);
    free(src);
    return CN_OK;
}

/* ---- gather and index_select ---- */

typedef struct gather_ctx {
    cursor cur; /* leading axes of out; operands: 0 out, 1 x (0 on the axis), 2 index */
    int64_t n;  /* row length */
    int64_t xl, il; /* x's and index's strides along the row */
    int64_t xa, L;  /* x's stride and size on the gather axis */
    const char *xp, *ip;
    char *op;
    size_t es;
    bool i64;
    bad_value bad;
} gather_ctx;

#define GATHER_ROW(T, IT)                                                                          \
    do {                                                                                           \
        const IT *ix = (const IT *)ip;                                                             \
        for (int64_t k = 0; k < n; k++) {                                                          \
            int64_t v = ix[k * il];                                                                \
            if (CN_UNLIKELY((uint64_t)v >= (uint64_t)L)) {                                         \
                bad_set(&c->bad, v);                                                               \
                return;                                                                            \
            }                                                                                      \
            memcpy(o + k * (int64_t)sizeof(T), x + (v * xa + k * xl) * (int64_t)sizeof(T),        \
                   sizeof(T));                                                                     \
        }                                                                                          \
    } while (0)

#define GATHER_ROW_IDX(T)                                                                          \
    do {                                                                                           \
        if (c->i64) GATHER_ROW(T, int64_t);                                                        \
        else GATHER_ROW(T, int32_t);                                                               \
    } while (0)

CN_HOT_FN(gather_row, (gather_ctx *c, char *o, const char *x, const char *ip), (c, o, x, ip)) {
    int64_t n = c->n, xl = c->xl, il = c->il, xa = c->xa, L = c->L;
    if (il == 0) { /* one index for the whole row (index_select before the last axis) */
        int64_t v = load_index(ip, c->i64, 0);
        if (CN_UNLIKELY((uint64_t)v >= (uint64_t)L)) {
            bad_set(&c->bad, v);
            return;
        }
        copy_run(o, x + v * xa * (int64_t)c->es, n, xl, c->es);
        return;
    }
    switch (c->es) {
    case 1: GATHER_ROW_IDX(uint8_t); break;
    case 2: GATHER_ROW_IDX(uint16_t); break;
    case 4: GATHER_ROW_IDX(uint32_t); break;
    default: GATHER_ROW_IDX(uint64_t); break;
    }
}

static void gather_chunk(void *p, int64_t b, int64_t e) {
    gather_ctx *c = p;
    cursor cur = c->cur;
    size_t is = c->i64 ? 8 : 4;
    cur_seek(&cur, b);
    for (int64_t r = b; r < e && !bad_seen(&c->bad); r++) {
        gather_row(c, c->op + cur.off[0] * (int64_t)c->es, c->xp + cur.off[1] * (int64_t)c->es,
                   c->ip + cur.off[2] * (int64_t)is);
        cur_next(&cur);
    }
}

int cn_cpu_gather(const char *op, const cn_tensor *x, const cn_tensor *index, int axis,
                  bool select, cn_tensor *out) {
    gather_ctx c;
    memset(&c, 0, sizeof c);
    int nd = out->ndim;
    int64_t shape[CN_MAX_DIMS] = {1}, xs[CN_MAX_DIMS] = {0}, is[CN_MAX_DIMS] = {0};
    c.L = 1;
    if (nd == 0) {
        nd = 1;
    } else {
        for (int d = 0; d < nd; d++) {
            shape[d] = out->shape[d];
            xs[d] = d == axis ? 0 : x->strides[d];
            if (!select) is[d] = index->strides[d];
            else if (d == axis && index->ndim == 1) is[d] = index->strides[0];
        }
        c.L = x->shape[axis];
        c.xa = x->strides[axis];
    }
    c.cur.nd = nd - 1;
    c.cur.nops = 3;
    for (int d = 0; d < nd - 1; d++) {
        c.cur.shape[d] = shape[d];
        c.cur.str[0][d] = out->strides[d];
        c.cur.str[1][d] = xs[d];
        c.cur.str[2][d] = is[d];
    }
    c.n = shape[nd - 1];
    c.xl = xs[nd - 1];
    c.il = is[nd - 1];
    c.xp = cn_t_ptr(x);
    c.ip = cn_t_ptr(index);
    c.op = cn_t_ptr(out);
    c.es = cn_dsize((cn_dtype)x->dtype);
    c.i64 = index->dtype == CN_I64;
    atomic_init(&c.bad.hit, 0);
    int64_t rows = cn_shape_numel(c.cur.nd, c.cur.shape);
    cn_parallel_for(rows, row_grain(c.n), gather_chunk, &c);
    if (atomic_load(&c.bad.hit))
        return cn_failc(CN_EINVAL, "%s: index %" PRId64 " is out of range for axis %d of size %" PRId64,
                        op, c.bad.value, axis, c.L);
    return CN_OK;
}

/* ---- scatter_add ----
 * Index positions that differ outside the axis write different elements of
 * out, so the work is split over one such axis: an outer one is moved to the
 * front of the walk, the last one is split into column ranges of every row.
 * Each output element receives its additions in the order of the axis
 * either way, the same for any thread count. */

typedef struct scatter_ctx {
    cursor cur; /* operands: 0 out (0 on the axis), 1 src, 2 index */
    int64_t rows;
    int64_t unit;   /* rows per unit of the split (0: the split is over columns) */
    int64_t n, ol, sl, il; /* row length and strides along it */
    int64_t oa, L;  /* out's stride and size on the axis */
    char *op;
    const char *sp, *ip;
    cn_dtype dt;
    bool i64;
    bad_value bad;
} scatter_ctx;

#define SCATTER_ROW(T, IT)                                                                         \
    do {                                                                                           \
        T *o = (T *)op;                                                                            \
        const T *s = (const T *)sp;                                                                \
        const IT *ix = (const IT *)ip;                                                             \
        for (int64_t k = 0; k < n; k++) {                                                          \
            int64_t v = ix[k * il];                                                                \
            if (CN_UNLIKELY((uint64_t)v >= (uint64_t)L)) {                                         \
                bad_set(&c->bad, v);                                                               \
                return;                                                                            \
            }                                                                                      \
            o[v * oa + k * ol] += s[k * sl];                                                       \
        }                                                                                          \
    } while (0)

#define SCATTER_ROW_IDX(T)                                                                         \
    do {                                                                                           \
        if (c->i64) SCATTER_ROW(T, int64_t);                                                       \
        else SCATTER_ROW(T, int32_t);                                                              \
    } while (0)

CN_HOT_FN(scatter_row,
          (scatter_ctx *c, char *op, const char *sp, const char *ip, int64_t n),
          (c, op, sp, ip, n)) {
    int64_t ol = c->ol, sl = c->sl, il = c->il, oa = c->oa, L = c->L;
    switch (c->dt) {
    case CN_F32: SCATTER_ROW_IDX(float); break;
    case CN_F64: SCATTER_ROW_IDX(double); break;
    case CN_I32: SCATTER_ROW_IDX(int32_t); break;
    default: SCATTER_ROW_IDX(int64_t); break;
    }
}

static void scatter_chunk(void *p, int64_t b, int64_t e) {
    scatter_ctx *c = p;
    cursor cur = c->cur;
    int64_t es = (int64_t)cn_dsize(c->dt), is = c->i64 ? 8 : 4;
    int64_t r0 = 0, r1 = c->rows, k0 = 0, k1 = c->n;
    if (c->unit) {
        r0 = b * c->unit;
        r1 = e * c->unit;
    } else {
        k0 = b;
        k1 = e;
    }
    cur_seek(&cur, r0);
    for (int64_t r = r0; r < r1 && !bad_seen(&c->bad); r++) {
        scatter_row(c, c->op + (cur.off[0] + k0 * c->ol) * es, c->sp + (cur.off[1] + k0 * c->sl) * es,
                    c->ip + (cur.off[2] + k0 * c->il) * is, k1 - k0);
        cur_next(&cur);
    }
}

int cn_cpu_scatter_add(const cn_tensor *x, const cn_tensor *index, const cn_tensor *src, int axis,
                       cn_tensor *out) {
    cn_copy_strided(out, x);
    int64_t numel = cn_shape_numel(index->ndim, index->shape);
    if (numel == 0) return CN_OK;
    scatter_ctx c;
    memset(&c, 0, sizeof c);
    int nd = index->ndim;
    int64_t shape[CN_MAX_DIMS] = {1}, os[CN_MAX_DIMS] = {0}, ss[CN_MAX_DIMS] = {0},
            is[CN_MAX_DIMS] = {0};
    c.L = 1;
    if (nd == 0) {
        nd = 1;
    } else {
        for (int d = 0; d < nd; d++) {
            shape[d] = index->shape[d];
            os[d] = d == axis ? 0 : out->strides[d];
            ss[d] = src->strides[d];
            is[d] = index->strides[d];
        }
        c.L = x->shape[axis];
        c.oa = out->strides[axis];
    }
    /* The axis to split over: the outermost with enough work for every
     * thread keeps the walk in memory order; else the largest. */
    int split = -1;
    if (numel >= 2 * GRAIN && nd >= 2) {
        int nt = cn_get_num_threads();
        for (int d = 0; d < nd && split < 0; d++)
            if (d != axis && shape[d] >= 2 * nt) split = d;
        for (int d = 0; d < nd && split < 0; d++)
            if (d != axis && shape[d] > 1 && (split < 0 || shape[d] > shape[split])) split = d;
    }
    bool by_cols = split == nd - 1;
    int perm[CN_MAX_DIMS], k = 0;
    if (split >= 0 && !by_cols) perm[k++] = split;
    for (int d = 0; d < nd; d++)
        if (d != split || by_cols) perm[k++] = d;
    c.cur.nd = nd - 1;
    c.cur.nops = 3;
    for (int i = 0; i < nd - 1; i++) {
        c.cur.shape[i] = shape[perm[i]];
        c.cur.str[0][i] = os[perm[i]];
        c.cur.str[1][i] = ss[perm[i]];
        c.cur.str[2][i] = is[perm[i]];
    }
    int last = perm[nd - 1];
    c.n = shape[last];
    c.ol = os[last];
    c.sl = ss[last];
    c.il = is[last];
    c.op = cn_t_ptr(out);
    c.sp = cn_t_ptr(src);
    c.ip = cn_t_ptr(index);
    c.dt = (cn_dtype)out->dtype;
    c.i64 = index->dtype == CN_I64;
    c.rows = cn_shape_numel(c.cur.nd, c.cur.shape);
    atomic_init(&c.bad.hit, 0);
    if (split >= 0) {
        int64_t per_unit = numel / shape[split];
        c.unit = by_cols ? 0 : c.rows / shape[split];
        cn_parallel_for(shape[split], per_unit >= GRAIN ? 1 : GRAIN / per_unit, scatter_chunk, &c);
    } else {
        c.unit = c.rows;
        scatter_chunk(&c, 0, 1);
    }
    if (atomic_load(&c.bad.hit))
        return cn_failc(CN_EINVAL,
                        "scatter_add: index %" PRId64 " is out of range for axis %d of size %" PRId64,
                        c.bad.value, axis, c.L);
    return CN_OK;
}

/* ---- pad ----
 * Each output coordinate of each axis maps to a source coordinate (or to
 * none: the constant), tabulated once as an offset into x. A row of out is
 * then its border elements looked up in the table and one run copied from x. */

#define PAD_OUTSIDE INT64_MIN

typedef struct pad_ctx {
    cursor cur; /* coordinates only */
    int nd;
    int64_t n;        /* row length */
    int64_t *tab[CN_MAX_DIMS];
    int64_t lo, hi;   /* the part of a row copied from x in one run */
    int64_t xl;
    const char *xp;
    char *op;
    size_t es;
    uint64_t val; /* the constant, as the dtype's bytes */
} pad_ctx;

static void pad_chunk(void *p, int64_t b, int64_t e) {
    pad_ctx *c = p;
    cursor cur = c->cur;
    int64_t n = c->n, es = (int64_t)c->es;
    const int64_t *tl = c->tab[c->nd - 1];
    cur_seek(&cur, b);
    for (int64_t r = b; r < e; r++) {
        char *o = c->op + r * n * es;
        int64_t base = 0;
        bool outside = false;
        for (int d = 0; d < c->nd - 1; d++) {
            int64_t t = c->tab[d][cur.idx[d]];
            if (t == PAD_OUTSIDE) outside = true;
            else base += t;
        }
        if (outside) {
            fill_run(o, n, (const unsigned char *)&c->val, c->es);
        } else {
            const char *x = c->xp + base * es;
            for (int64_t j = 0; j < c->lo; j++) {
                if (tl[j] == PAD_OUTSIDE) memcpy(o + j * es, &c->val, c->es);
                else memcpy(o + j * es, x + tl[j] * es, c->es);
            }
            if (c->hi > c->lo)
                copy_run(o + c->lo * es, x + tl[c->lo] * es, c->hi - c->lo, c->xl, c->es);
            for (int64_t j = c->hi; j < n; j++) {
                if (tl[j] == PAD_OUTSIDE) memcpy(o + j * es, &c->val, c->es);
                else memcpy(o + j * es, x + tl[j] * es, c->es);
            }
        }
        cur_next(&cur);
    }
}

/* The source coordinate of output coordinate j of an axis of size L padded
 * by `before`, or -1 for the constant. */
static int64_t pad_source(int mode, int64_t j, int64_t before, int64_t L) {
    int64_t s = j - before;
    if (s >= 0 && s < L) return s;
    if (mode == CN_PAD_CONSTANT || L == 0) return -1;
    if (mode == CN_PAD_REFLECT) {
        if (s < 0) s = -s;
        if (s >= L) s = 2 * (L - 1) - s;
    }
    /* Replicate; also keeps a reflection that infer should have refused in range. */
    return s < 0 ? 0 : s >= L ? L - 1 : s;
}

int cn_cpu_pad(const cn_tensor *x, const int64_t *pads, int npads, int mode, double value,
               cn_tensor *out) {
    pad_ctx c;
    memset(&c, 0, sizeof c);
    int64_t oshape[CN_MAX_DIMS], L[CN_MAX_DIMS], xs[CN_MAX_DIMS], before[CN_MAX_DIMS];
    int nd = cn_pad_geometry(x, out, pads, npads, oshape, L, xs, before);
    int64_t total = 0;
    for (int d = 0; d < nd; d++) total += oshape[d];
    int64_t *tabs = malloc(sizeof(int64_t) * (size_t)total);
    if (!tabs) return cn_failc(CN_ENOMEM, "pad: out of memory");
    int64_t *t = tabs;
    for (int d = 0; d < nd; d++) {
        c.tab[d] = t;
        for (int64_t j = 0; j < oshape[d]; j++) {
            int64_t s = pad_source(mode, j, before[d], L[d]);
            t[j] = s < 0 ? PAD_OUTSIDE : s * xs[d];
        }
        t += oshape[d];
    }
    int last = nd - 1;
    c.nd = nd;
    c.n = oshape[last];
    c.lo = before[last] < 0 ? 0 : before[last] > c.n ? c.n : before[last];
    c.hi = before[last] + L[last];
    if (c.hi > c.n) c.hi = c.n;
    if (c.hi < c.lo) c.hi = c.lo;
    c.xl = xs[last];
    c.xp = cn_t_ptr(x);
    c.op = cn_t_ptr(out);
    c.es = cn_dsize((cn_dtype)out->dtype);
    cn_store_f64(&c.val, (cn_dtype)out->dtype, 0, value);
    c.cur.nd = nd - 1;
    for (int d = 0; d < nd - 1; d++) c.cur.shape[d] = oshape[d];
    cn_parallel_for(cn_shape_numel(nd - 1, oshape), row_grain(c.n), pad_chunk, &c);
    free(tabs);
    return CN_OK;
}

/* ---- one_hot ---- */

typedef struct one_hot_ctx {
    cursor cur; /* operand 0: index */
    int64_t n, il, C;
    const char *ip;
    int64_t *op;
    bool i64;
    bad_value bad;
} one_hot_ctx;

static void one_hot_chunk(void *p, int64_t b, int64_t e) {
    one_hot_ctx *c = p;
    cursor cur = c->cur;
    int64_t n = c->n, C = c->C;
    size_t is = c->i64 ? 8 : 4;
    cur_seek(&cur, b);
    for (int64_t r = b; r < e && !bad_seen(&c->bad); r++) {
        const char *ip = c->ip + cur.off[0] * (int64_t)is;
        int64_t *o = c->op + r * n * C;
        memset(o, 0, sizeof(int64_t) * (size_t)(n * C));
        for (int64_t k = 0; k < n; k++) {
            int64_t v = load_index(ip, c->i64, k * c->il);
            if (CN_UNLIKELY((uint64_t)v >= (uint64_t)C)) {
                bad_set(&c->bad, v);
                return;
            }
            o[k * C + v] = 1;
        }
        cur_next(&cur);
    }
}

int cn_cpu_one_hot(const cn_tensor *index, cn_tensor *out) {
    one_hot_ctx c;
    memset(&c, 0, sizeof c);
    int nd = index->ndim;
    c.C = out->shape[out->ndim - 1];
    c.n = nd ? index->shape[nd - 1] : 1;
    c.il = nd ? index->strides[nd - 1] : 0;
    c.cur.nd = nd ? nd - 1 : 0;
    c.cur.nops = 1;
    for (int d = 0; d < nd - 1; d++) {
        c.cur.shape[d] = index->shape[d];
        c.cur.str[0][d] = index->strides[d];
    }
    c.ip = cn_t_ptr(index);
    c.op = cn_t_ptr(out);
    c.i64 = index->dtype == CN_I64;
    atomic_init(&c.bad.hit, 0);
    cn_parallel_for(cn_shape_numel(c.cur.nd, c.cur.shape), row_grain(c.n * c.C), one_hot_chunk,
                    &c);
    if (atomic_load(&c.bad.hit))
        return cn_failc(CN_EINVAL, "one_hot: class %" PRId64 " is out of range for num_classes %" PRId64,
                        c.bad.value, c.C);
    return CN_OK;
}

/* ---- tril / triu ---- */

typedef struct tri_ctx {
    cursor cur; /* leading axes of x, the matrix row last; operand 0: x */
    int64_t C, k, xl;
    const char *xp;
    char *op;
    size_t es;
    bool upper;
} tri_ctx;

static void tri_chunk(void *p, int64_t b, int64_t e) {
    tri_ctx *c = p;
    cursor cur = c->cur;
    int64_t C = c->C, es = (int64_t)c->es;
    cur_seek(&cur, b);
    for (int64_t r = b; r < e; r++) {
        int64_t row = cur.idx[cur.nd - 1], lo = 0, hi = C;
        if (c->upper) lo = row + c->k;
        else hi = row + c->k + 1;
        lo = lo < 0 ? 0 : lo > C ? C : lo;
        hi = hi < lo ? lo : hi > C ? C : hi;
        char *o = c->op + r * C * es;
        memset(o, 0, (size_t)(lo * es));
        if (hi > lo)
            copy_run(o + lo * es, c->xp + (cur.off[0] + lo * c->xl) * es, hi - lo, c->xl, c->es);
        memset(o + hi * es, 0, (size_t)((C - hi) * es));
        cur_next(&cur);
    }
}

int cn_cpu_tri(const cn_tensor *x, int64_t k, bool upper, cn_tensor *out) {
    tri_ctx c;
    memset(&c, 0, sizeof c);
    int nd = x->ndim;
    int64_t R = x->shape[nd - 2];
    c.C = x->shape[nd - 1];
    /* Beyond these bounds every k gives the same result; clamping keeps
     * row + k from overflowing. */
    c.k = k < -R - 1 ? -R - 1 : k > c.C + 1 ? c.C + 1 : k;
    c.xl = x->strides[nd - 1];
    c.cur.nd = nd - 1;
    c.cur.nops = 1;
    for (int d = 0; d < nd - 1; d++) {
        c.cur.shape[d] = x->shape[d];
        c.cur.str[0][d] = x->strides[d];
    }
    c.xp = cn_t_ptr(x);
    c.op = cn_t_ptr(out);
    c.es = cn_dsize((cn_dtype)x->dtype);
    c.upper = upper;
    cn_parallel_for(cn_shape_numel(nd - 1, x->shape), row_grain(c.C), tri_chunk, &c);
    return CN_OK;
}

/* ---- the largest value of an integer tensor ---- */

int cn_cpu_int_max(const cn_tensor *t, int64_t *max) {
    int64_t m = INT64_MIN;
    int nd = t->ndim;
    if (cn_shape_numel(nd, t->shape) > 0) {
        cursor cur;
        memset(&cur, 0, sizeof cur);
        cur.nd = nd ? nd - 1 : 0;
        cur.nops = 1;
        for (int d = 0; d < nd - 1; d++) {
            cur.shape[d] = t->shape[d];
            cur.str[0][d] = t->strides[d];
        }
        int64_t n = nd ? t->shape[nd - 1] : 1, st = nd ? t->strides[nd - 1] : 0;
        int64_t rows = cn_shape_numel(cur.nd, cur.shape);
        const void *p = t->storage->data;
        cn_dtype dt = (cn_dtype)t->dtype;
        cur_seek(&cur, 0);
        for (int64_t r = 0; r < rows; r++) {
            int64_t base = t->offset + cur.off[0];
            for (int64_t k = 0; k < n; k++) {
                int64_t v = cn_load_i64(p, dt, base + k * st);
                if (v > m) m = v;
            }
            cur_next(&cur);
        }
    }
    *max = m;
    return CN_OK;
}

/* ---- the op kernels (kernels.h) ----
 * Attributes are canonical (the ops' infer, src/ops/index.c): i[0] = the
 * axis (non-negative) of concat, gather, index_select and scatter_add. */

int cn_cpu_k_concat(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out) {
    (void)id;
    return cn_cpu_concat(in, nin, (int)a->i[0], out);
}

/* x, index. */
int cn_cpu_k_gather(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out) {
    (void)nin;
    return cn_cpu_gather(cn_op_names[id], in[0], in[1], (int)a->i[0], false, out);
}

/* x, index (1-D or rank 0). */
int cn_cpu_k_index_select(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                          cn_tensor *out) {
    (void)nin;
    return cn_cpu_gather(cn_op_names[id], in[0], in[1], (int)a->i[0], true, out);
}

/* x, index, src. */
int cn_cpu_k_scatter_add(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                         cn_tensor *out) {
    (void)id;
    (void)nin;
    return cn_cpu_scatter_add(in[0], in[1], in[2], (int)a->i[0], out);
}

/* list = pads, i[0] = mode (cn_pad_mode), f[0] = value. */
int cn_cpu_k_pad(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                 cn_tensor *out) {
    (void)id;
    (void)nin;
    return cn_cpu_pad(in[0], a->list, (int)a->nlist, (int)a->i[0], a->f[0], out);
}

int cn_cpu_k_one_hot(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                     cn_tensor *out) {
    (void)id;
    (void)nin;
    (void)a;
    return cn_cpu_one_hot(in[0], out);
}

/* tril and triu: i[0] = k. */
int cn_cpu_k_tri(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                 cn_tensor *out) {
    (void)nin;
    return cn_cpu_tri(in[0], a->i[0], id == CN_OP_triu, out);
}
