/* Joining, indexing and padding: concat, gather, index_select, scatter_add,
 * pad, one_hot, tril/triu, and the functions built from them and from views
 * (stack, split, chunk) or from comparisons (causal and sequence masks).
 * The kernels are the backends' (src/backend/cpu/index.c for the CPU). */
#include "op.h"

/* cn_cpu_int_max: the sizes one_hot and sequence_mask read from the data. */
#include "../backend/cpu/index.h"

#include <inttypes.h>
#include <stdlib.h>

static int check_index_dtype(const char *op, const cn_tensor *index) {
    if (index->dtype == CN_I32 || index->dtype == CN_I64) return CN_OK;
    return cn_failc(CN_EINVAL, "%s: index must be i32 or i64, got %s", op,
                    cn_dtype_name((cn_dtype)index->dtype));
}

static void copy_meta(const cn_tensor *t, cn_meta *m) {
    m->dtype = (cn_dtype)t->dtype;
    m->ndim = t->ndim;
    memcpy(m->shape, t->shape, sizeof m->shape);
}

/* ---- concat: i[0] = axis; inputs promoted to one dtype ---- */

static int concat_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                        cn_meta *m) {
    const cn_tensor *x0 = in[0];
    char b1[160], b2[160];
    for (int j = 0; j < nin; j++)
        if (in[j]->ndim == 0)
            return cn_failc(CN_EINVAL,
                            "%s: input %d has rank 0; zero-dimensional tensors cannot be "
                            "concatenated (use stack)",
                            op->name, j);
    int ax = cn_norm_axis(op->name, (int)a->i[0], x0->ndim);
    if (ax < 0) return CN_EINVAL;
    a->i[0] = ax;
    copy_meta(x0, m);
    int64_t total = 0;
    bool unknown = false;
    for (int j = 0; j < nin; j++) {
        const cn_tensor *x = in[j];
        if (x->ndim != x0->ndim)
            return cn_failc(CN_EINVAL, "%s: input %d has shape %s but input 0 has %s; ranks must match",
                            op->name, j, cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape),
                            cn_fmt_shape(b2, sizeof b2, x0->ndim, x0->shape));
        if (x->dtype != x0->dtype)
            return cn_failc(CN_EINVAL, "%s: input %d is %s but input 0 is %s", op->name, j,
                            cn_dtype_name((cn_dtype)x->dtype), cn_dtype_name((cn_dtype)x0->dtype));
        for (int d = 0; d < x->ndim; d++) {
            int64_t s = x->shape[d];
            if (d == ax || s == -1) continue;
            if (m->shape[d] == -1) {
                m->shape[d] = s;
            } else if (m->shape[d] != s) {
                return cn_failc(CN_EINVAL,
                                "%s: input %d has shape %s but input 0 has %s; sizes must match "
                                "except on axis %d (axis %d: %" PRId64 " vs %" PRId64 ")",
                                op->name, j, cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape),
                                cn_fmt_shape(b2, sizeof b2, x0->ndim, x0->shape), ax, d, s,
                                m->shape[d]);
            }
        }
        if (x->shape[ax] < 0) unknown = true;
        else total += x->shape[ax];
    }
    m->shape[ax] = unknown ? -1 : total;
    return CN_OK;
}

/* The gradient of input i is its stretch of the output's gradient. */
static cn_tensor *concat_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                             cn_tensor *g, int i) {
    (void)nin, (void)out;
    int ax = (int)a->i[0];
    int64_t start = 0;
    for (int j = 0; j <= i; j++)
        if (in[j]->shape[ax] < 0)
            return cn_fail("concat: the gradient needs the sizes along axis %d, unknown for input %d",
                           ax, j);
    for (int j = 0; j < i; j++) start += in[j]->shape[ax];
    return cn_slice(g, ax, start, start + in[i]->shape[ax], 1);
}

static cn_tensor *concat_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                             const cn_attrs *a, cn_tensor *out) {
    (void)out;
    cn_tensor *buf[8] = {NULL};
    cn_tensor **t = nin > 8 ? malloc(sizeof *t * (size_t)nin) : buf;
    if (!t) return cn_fail("concat: out of memory");
    for (int j = 0; j < nin; j++) t[j] = tin[j] ? tin[j] : cn_zeros_like_op(in[j]);
    cn_tensor *r = cn_concat(t, nin, (int)a->i[0]);
    if (t != buf) free(t);
    return r;
}

const cn_op_def cn_opdef_concat = {
    .name = "concat",
    .ninputs = -1,
    .promote_from = 0,
    .flags = CN_OPF_PROMOTE | CN_OPF_NO_HALF,
    .attrs = {{"axis", CN_ATTR_INT, 0, 0}},
    .infer = concat_infer,
    .vjp = concat_vjp,
    .jvp = concat_jvp,
    .onnx = "Concat",
    .doc = "y = [x_0, x_1, ...] joined along axis (sizes match elsewhere)",
};

/* ---- gather: i[0] = axis; index has x's rank, output has index's shape ---- */

static int gather_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                        cn_meta *m) {
    (void)nin;
    const cn_tensor *x = in[0], *index = in[1];
    if (check_index_dtype(op->name, index) < 0) return CN_EINVAL;
    int ax = cn_norm_axis(op->name, (int)a->i[0], x->ndim);
    if (ax < 0) return CN_EINVAL;
    a->i[0] = ax;
    char b1[160], b2[160];
    if (index->ndim != x->ndim)
        return cn_failc(CN_EINVAL, "%s: index %s has rank %d but x %s has rank %d; they must match",
                        op->name, cn_fmt_shape(b1, sizeof b1, index->ndim, index->shape),
                        index->ndim, cn_fmt_shape(b2, sizeof b2, x->ndim, x->shape), x->ndim);
    for (int d = 0; d < x->ndim; d++) {
        int64_t is = index->shape[d], xs = x->shape[d];
        if (d != ax && is >= 0 && xs >= 0 && is > xs)
            return cn_failc(CN_EINVAL,
                            "%s: index %s is larger than x %s on axis %d (%" PRId64 " > %" PRId64
                            "); only the gather axis %d may be larger",
                            op->name, cn_fmt_shape(b1, sizeof b1, index->ndim, index->shape),
                            cn_fmt_shape(b2, sizeof b2, x->ndim, x->shape), d, is, xs, ax);
    }
    copy_meta(index, m);
    m->dtype = (cn_dtype)x->dtype;
    return CN_OK;
}

/* Each element of x receives the gradients of every output that read it:
 * repeated indices accumulate. */
static cn_tensor *gather_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                             cn_tensor *g, int i) {
    (void)nin, (void)out;
    if (i != 0) return cn_fail("gather: the index has no gradient");
    return cn_scatter_add(cn_zeros_like_op(in[0]), (int)a->i[0], in[1], g);
}

static cn_tensor *gather_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                             const cn_attrs *a, cn_tensor *out) {
    (void)nin;
    if (!tin[0]) return cn_zeros_like_op(out);
    return cn_gather(tin[0], (int)a->i[0], in[1]);
}

const cn_op_def cn_opdef_gather = {
    .name = "gather",
    .ninputs = 2,
    .flags = CN_OPF_NO_HALF,
    .attrs = {{"axis", CN_ATTR_INT, 0, 0}},
    .infer = gather_infer,
    .vjp = gather_vjp,
    .jvp = gather_jvp,
    .onnx = "GatherElements",
    .doc = "y[i][j][k] = x[i][index[i][j][k]][k] (axis 1)",
};

/* ---- index_select: i[0] = axis; index is 1-D (or rank 0) ---- */

static int index_select_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                              cn_meta *m) {
    (void)nin;
    const cn_tensor *x = in[0], *index = in[1];
    char b1[160];
    if (check_index_dtype(op->name, index) < 0) return CN_EINVAL;
    if (index->ndim > 1)
        return cn_failc(CN_EINVAL, "%s: index must be 1-D, got shape %s", op->name,
                        cn_fmt_shape(b1, sizeof b1, index->ndim, index->shape));
    int ax = cn_norm_axis(op->name, (int)a->i[0], x->ndim);
    if (ax < 0) return CN_EINVAL;
    a->i[0] = ax;
    int64_t n = index->ndim ? index->shape[0] : 1;
    copy_meta(x, m);
    if (x->ndim == 0) {
        if (n != 1 && n != -1)
            return cn_failc(CN_EINVAL, "%s: x has rank 0, so index must have one element, got shape %s",
                            op->name, cn_fmt_shape(b1, sizeof b1, index->ndim, index->shape));
        return CN_OK;
    }
    m->shape[ax] = n;
    return CN_OK;
}

/* index_add as a scatter_add: the 1-D index laid along the axis and
 * broadcast over the gradient's other axes. */
static cn_tensor *index_select_vjp(cn_tensor *const *in, int nin, const cn_attrs *a,
                                   cn_tensor *out, cn_tensor *g, int i) {
    (void)nin, (void)out;
    if (i != 0) return cn_fail("index_select: the index has no gradient");
    cn_tensor *x = in[0];
    if (x->ndim == 0) return cn_scope_add(cn_retain(g)); /* the one index is 0 */
    int ax = (int)a->i[0];
    int64_t line[CN_MAX_DIMS] = {0};
    bool known = true;
    for (int d = 0; d < x->ndim; d++) {
        line[d] = d == ax ? -1 : 1;
        known &= g->shape[d] >= 0;
    }
    cn_tensor *ix = cn_reshape(in[1], x->ndim, line);
    /* Sizes unknown until run: broadcast by an addition rather than an
     * expand, whose target shape would be fixed now. */
    if (known) ix = cn_expand(ix, g->ndim, g->shape);
    else ix = cn_add(ix, cn_op_apply(CN_OP_full_like, &g, 1,
                                     &(cn_attrs){.i = {in[1]->dtype}}));
    return cn_scatter_add(cn_zeros_like_op(x), ax, ix, g);
}

static cn_tensor *index_select_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                                   const cn_attrs *a, cn_tensor *out) {
    (void)nin;
    if (!tin[0]) return cn_zeros_like_op(out);
    return cn_index_select(tin[0], (int)a->i[0], in[1]);
}

const cn_op_def cn_opdef_index_select = {
    .name = "index_select",
    .ninputs = 2,
    .flags = CN_OPF_NO_HALF,
    .attrs = {{"axis", CN_ATTR_INT, 0, 0}},
    .infer = index_select_infer,
    .vjp = index_select_vjp,
    .jvp = index_select_jvp,
    .onnx = "Gather",
    .doc = "y = x with y[..., i, ...] = x[..., index[i], ...] along axis",
};

/* ---- scatter_add: i[0] = axis; inputs x, index, src (out of place) ---- */

static int scatter_add_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                             cn_meta *m) {
    (void)nin;
    const cn_tensor *x = in[0], *index = in[1], *src = in[2];
    char b1[160], b2[160], b3[160];
    if (check_index_dtype(op->name, index) < 0) return CN_EINVAL;
    cn_dtype dt = (cn_dtype)x->dtype;
    if (src->dtype != dt)
        return cn_failc(CN_EINVAL, "%s: x is %s but src is %s; they must have the same dtype",
                        op->name, cn_dtype_name(dt), cn_dtype_name((cn_dtype)src->dtype));
    if (dt != CN_F32 && dt != CN_F64 && dt != CN_I32 && dt != CN_I64)
        return cn_failc(CN_EINVAL, "%s: dtype %s is not supported (f32, f64, f16, bf16, i32, i64)",
                        op->name, cn_dtype_name(dt));
    int ax = cn_norm_axis(op->name, (int)a->i[0], x->ndim);
    if (ax < 0) return CN_EINVAL;
    a->i[0] = ax;
    if (index->ndim != x->ndim || src->ndim != x->ndim)
        return cn_failc(CN_EINVAL, "%s: x %s, index %s and src %s must have the same rank", op->name,
                        cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape),
                        cn_fmt_shape(b2, sizeof b2, index->ndim, index->shape),
                        cn_fmt_shape(b3, sizeof b3, src->ndim, src->shape));
    for (int d = 0; d < x->ndim; d++) {
        int64_t is = index->shape[d], ss = src->shape[d], xs = x->shape[d];
        if (is < 0) continue;
        if (ss >= 0 && is > ss)
            return cn_failc(CN_EINVAL,
                            "%s: index %s is larger than src %s on axis %d (%" PRId64 " > %" PRId64 ")",
                            op->name, cn_fmt_shape(b1, sizeof b1, index->ndim, index->shape),
                            cn_fmt_shape(b2, sizeof b2, src->ndim, src->shape), d, is, ss);
        if (d != ax && xs >= 0 && is > xs)
            return cn_failc(CN_EINVAL,
                            "%s: index %s is larger than x %s on axis %d (%" PRId64 " > %" PRId64
                            "); only the scatter axis %d may be larger",
                            op->name, cn_fmt_shape(b1, sizeof b1, index->ndim, index->shape),
                            cn_fmt_shape(b2, sizeof b2, x->ndim, x->shape), d, is, xs, ax);
    }
    copy_meta(x, m);
    return CN_OK;
}

/* x passes through; src's gradient is the output's gradient read back at the
 * index, and zero where src reaches beyond the index. */
static cn_tensor *scatter_add_vjp(cn_tensor *const *in, int nin, const cn_attrs *a,
                                  cn_tensor *out, cn_tensor *g, int i) {
    (void)nin, (void)out;
    if (i == 0) return cn_scope_add(cn_retain(g));
    if (i != 2) return cn_fail("scatter_add: the index has no gradient");
    const cn_tensor *index = in[1], *src = in[2];
    cn_tensor *r = cn_gather(g, (int)a->i[0], in[1]);
    int64_t pads[2 * CN_MAX_DIMS];
    bool grow = false;
    for (int d = 0; d < src->ndim; d++) {
        int64_t extra = src->shape[d] >= 0 && index->shape[d] >= 0
                            ? src->shape[d] - index->shape[d] : 0;
        pads[2 * (src->ndim - 1 - d)] = 0;
        pads[2 * (src->ndim - 1 - d) + 1] = extra;
        grow |= extra != 0;
    }
    return grow ? cn_pad(r, pads, 2 * src->ndim, CN_PAD_CONSTANT, 0) : r;
}

static cn_tensor *scatter_add_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                                  const cn_attrs *a, cn_tensor *out) {
    (void)nin;
    if (!tin[2]) return tin[0] ? cn_scope_add(cn_retain(tin[0])) : cn_zeros_like_op(out);
    cn_tensor *base = tin[0] ? tin[0] : cn_zeros_like_op(in[0]);
    return cn_scatter_add(base, (int)a->i[0], in[1], tin[2]);
}

const cn_op_def cn_opdef_scatter_add = {
    .name = "scatter_add",
    .ninputs = 3,
    .attrs = {{"axis", CN_ATTR_INT, 0, 0}},
    .infer = scatter_add_infer,
    .vjp = scatter_add_vjp,
    .jvp = scatter_add_jvp,
    .onnx = "ScatterElements",
    .doc = "y = x; y[i][index[i][j][k]][k] += src[i][j][k] (axis 1)",
};

/* ---- pad: list = pads (pairs from the last axis), i[0] = mode, f[0] = value ---- */

/* Pads beyond this cannot give a tensor that fits in memory, and refusing
 * them keeps size + before + after from overflowing. */
#define PAD_LIMIT (INT64_C(1) << 56)

static int pad_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                     cn_meta *m) {
    (void)nin;
    const cn_tensor *x = in[0];
    char b1[160];
    int np = (int)a->nlist;
    if (np < 0 || np % 2 != 0)
        return cn_failc(CN_EINVAL,
                        "%s: %d pad values given; they come in (before, after) pairs, so the count "
                        "must be even",
                        op->name, np);
    if (np > 2 * x->ndim)
        return cn_failc(CN_EINVAL, "%s: %d pad values for shape %s (rank %d); at most %d, two per axis",
                        op->name, np, cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape), x->ndim,
                        2 * x->ndim);
    int64_t mode = a->i[0];
    if (mode != CN_PAD_CONSTANT && mode != CN_PAD_REFLECT && mode != CN_PAD_REPLICATE)
        return cn_failc(CN_EINVAL, "%s: invalid mode %" PRId64 " (0 constant, 1 reflect, 2 replicate)",
                        op->name, mode);
    copy_meta(x, m);
    for (int p = 0; p < np / 2; p++) {
        int d = x->ndim - 1 - p;
        int64_t before = a->list[2 * p], after = a->list[2 * p + 1], L = x->shape[d];
        if (before > PAD_LIMIT || before < -PAD_LIMIT || after > PAD_LIMIT || after < -PAD_LIMIT)
            return cn_failc(CN_EINVAL, "%s: pads (%" PRId64 ", %" PRId64 ") on axis %d are too large",
                            op->name, before, after, d);
        if (L < 0) {
            m->shape[d] = -1;
            continue;
        }
        if (mode == CN_PAD_REFLECT && (before >= L || after >= L) && (before > 0 || after > 0))
            return cn_failc(CN_EINVAL,
                            "%s: reflect pads (%" PRId64 ", %" PRId64 ") on axis %d of shape %s "
                            "must be less than its size %" PRId64,
                            op->name, before, after, d,
                            cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape), L);
        if (mode == CN_PAD_REPLICATE && L == 0 && (before > 0 || after > 0))
            return cn_failc(CN_EINVAL,
                            "%s: replicate pads (%" PRId64 ", %" PRId64 ") on axis %d of shape %s "
                            "need a non-empty axis",
                            op->name, before, after, d,
                            cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape));
        int64_t size = L + before + after;
        if (size < 0)
            return cn_failc(CN_EINVAL,
                            "%s: pads (%" PRId64 ", %" PRId64 ") on axis %d of shape %s leave a "
                            "negative size %" PRId64,
                            op->name, before, after, d,
                            cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape), size);
        m->shape[d] = size;
    }
    return CN_OK;
}

/* g, of length L along axis d, holding piece (along d) from coordinate
 * start on and zeros elsewhere. */
static cn_tensor *pad_place(cn_tensor *piece, int d, int64_t start, int64_t L) {
    int64_t pads[2 * CN_MAX_DIMS] = {0};
    int np = 2 * (piece->ndim - d);
    pads[np - 2] = start;
    pads[np - 1] = L - start - piece->shape[d];
    return cn_pad(piece, pads, np, CN_PAD_CONSTANT, 0);
}

/* The adjoint of reflect or replicate padding along one axis d of size L:
 * output coordinate j reads x at s = j - before when 0 <= s < L, else at the
 * reflection (-s, or 2 (L - 1) - s) or the nearest end. The output splits
 * into the run copied from x and the runs before and after it; each run's
 * gradient lands on its source coordinates (reversed for reflections,
 * summed onto one element for replication), and overlapping runs add. */
static cn_tensor *pad_axis_adjoint(cn_tensor *g, int d, int64_t L, int64_t before, int64_t after,
                                   int mode) {
    int64_t n = L + before + after;
    cn_tensor *r = NULL;
#define PAD_ACC(t) do { cn_tensor *t_ = (t); r = r ? cn_add(r, t_) : t_; } while (0)
    int64_t j0 = before > 0 ? before : 0, j1 = L + before < n ? L + before : n;
    if (j1 > j0) PAD_ACC(pad_place(cn_slice(g, d, j0, j1, 1), d, j0 - before, L));
    int64_t na = before < n ? before : n;
    if (na > 0) {
        if (mode == CN_PAD_REFLECT)
            PAD_ACC(pad_place(cn_slice(g, d, na - 1, CN_BEGIN, -1), d, before - na + 1, L));
        else
            PAD_ACC(pad_place(cn_sum(cn_slice(g, d, 0, na, 1), (int[]){d}, 1, true), d, 0, L));
    }
    int64_t z0 = L + before > 0 ? L + before : 0;
    if (after > 0 && n > z0) {
        if (mode == CN_PAD_REFLECT)
            PAD_ACC(pad_place(cn_slice(g, d, n - 1, z0 > 0 ? z0 - 1 : CN_BEGIN, -1), d,
                              L - 1 - after, L));
        else
            PAD_ACC(pad_place(cn_sum(cn_slice(g, d, z0, n, 1), (int[]){d}, 1, true), d, L - 1, L));
    }
#undef PAD_ACC
    return r;
}

static cn_tensor *pad_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                          cn_tensor *g, int i) {
    (void)nin, (void)out, (void)i;
    cn_tensor *x = in[0];
    int np = (int)a->nlist;
    if (a->i[0] == CN_PAD_CONSTANT) {
        /* Padding by the opposite amounts crops what was added and puts zeros
         * where x was cropped. */
        cn_attrs b = *a;
        for (int k = 0; k < np; k++) b.list[k] = -a->list[k];
        b.f[0] = 0;
        return cn_op_apply(CN_OP_pad, &g, 1, &b);
    }
    int64_t numel = 1;
    for (int d = 0; d < g->ndim; d++) numel *= g->shape[d];
    if (numel == 0) return cn_zeros_like_op(x);
    cn_tensor *r = g;
    /* The padding of each axis is its own linear map; the adjoint undoes
     * them one axis at a time. */
    for (int p = 0; p < np / 2 && r; p++) {
        int d = x->ndim - 1 - p;
        int64_t before = a->list[2 * p], after = a->list[2 * p + 1];
        if (before == 0 && after == 0) continue;
        if (x->shape[d] < 0 || r->shape[d] < 0)
            return cn_fail("pad: the gradient of reflect and replicate padding needs the size of "
                           "axis %d, unknown until run",
                           d);
        r = pad_axis_adjoint(r, d, x->shape[d], before, after, (int)a->i[0]);
    }
    return r == g ? cn_scope_add(cn_retain(g)) : r;
}

/* Padding is linear; the constant does not depend on x. */
static cn_tensor *pad_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin, const cn_attrs *a,
                          cn_tensor *out) {
    (void)in, (void)nin, (void)out;
    cn_attrs b = *a;
    b.f[0] = 0;
    return cn_op_apply(CN_OP_pad, &tin[0], 1, &b);
}

const cn_op_def cn_opdef_pad = {
    .name = "pad",
    .ninputs = 1,
    .flags = CN_OPF_NO_HALF,
    .attrs = {{"pads", CN_ATTR_INTS, 0, 0}, {"mode", CN_ATTR_INT, 0, 0}, {"value", CN_ATTR_FLOAT, 0, 0}},
    .infer = pad_infer,
    .vjp = pad_vjp,
    .jvp = pad_jvp,
    .onnx = "Pad",
    .doc = "y = x padded by (before, after) pairs from the last axis: constant, reflect or replicate",
};

/* ---- one_hot: i[0] = num_classes (>= 1) ---- */

static int one_hot_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                         cn_meta *m) {
    (void)nin;
    const cn_tensor *index = in[0];
    if (check_index_dtype(op->name, index) < 0) return CN_EINVAL;
    if (a->i[0] < 1)
        return cn_failc(CN_EINVAL, "%s: num_classes is %" PRId64 ", must be >= 1", op->name, a->i[0]);
    if (index->ndim >= CN_MAX_DIMS)
        return cn_failc(CN_EINVAL, "%s: an index of rank %d leaves no room for the class axis", op->name,
                        index->ndim);
    copy_meta(index, m);
    m->dtype = CN_I64;
    m->shape[m->ndim++] = a->i[0];
    return CN_OK;
}

const cn_op_def cn_opdef_one_hot = {
    .name = "one_hot",
    .ninputs = 1,
    .flags = CN_OPF_NONDIFF | CN_OPF_NO_HALF,
    .attrs = {{"num_classes", CN_ATTR_INT, 0, -1}},
    .infer = one_hot_infer,
    .onnx = "OneHot",
    .doc = "y[..., c] = (index[...] == c) as i64, c in [0, num_classes)",
};

/* ---- tril / triu: i[0] = k ---- */

static int tri_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a, cn_meta *m) {
    (void)nin;
    (void)a;
    const cn_tensor *x = in[0];
    if (x->ndim < 2) {
        char b1[160];
        return cn_failc(CN_EINVAL, "%s: x must have at least 2 axes, got shape %s", op->name,
                        cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape));
    }
    copy_meta(x, m);
    return CN_OK;
}

/* A fixed mask: gradients and tangents go through the same op. */
static cn_tensor *tril_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                           cn_tensor *g, int i) {
    (void)in, (void)nin, (void)out, (void)i;
    return cn_op_apply(CN_OP_tril, &g, 1, a);
}
static cn_tensor *tril_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin, const cn_attrs *a,
                           cn_tensor *out) {
    (void)in, (void)nin, (void)out;
    return cn_op_apply(CN_OP_tril, &tin[0], 1, a);
}
static cn_tensor *triu_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                           cn_tensor *g, int i) {
    (void)in, (void)nin, (void)out, (void)i;
    return cn_op_apply(CN_OP_triu, &g, 1, a);
}
static cn_tensor *triu_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin, const cn_attrs *a,
                           cn_tensor *out) {
    (void)in, (void)nin, (void)out;
    return cn_op_apply(CN_OP_triu, &tin[0], 1, a);
}

const cn_op_def cn_opdef_tril = {
    .name = "tril",
    .ninputs = 1,
    .flags = CN_OPF_NO_HALF,
    .attrs = {{"k", CN_ATTR_INT, 0, 0}},
    .infer = tri_infer,
    .vjp = tril_vjp,
    .jvp = tril_jvp,
    .onnx = "Trilu",
    .doc = "y[..., i, j] = j - i <= k ? x[..., i, j] : 0",
};

const cn_op_def cn_opdef_triu = {
    .name = "triu",
    .ninputs = 1,
    .flags = CN_OPF_NO_HALF,
    .attrs = {{"k", CN_ATTR_INT, 0, 0}},
    .infer = tri_infer,
    .vjp = triu_vjp,
    .jvp = triu_jvp,
    .onnx = "Trilu",
    .doc = "y[..., i, j] = j - i >= k ? x[..., i, j] : 0",
};

/* ---- public functions ---- */

static cn_tensor *axis_op(cn_op_id id, cn_tensor *const *in, int nin, int axis) {
    cn_attrs a = {0};
    a.i[0] = axis;
    return cn_op_apply(id, in, nin, &a);
}

cn_tensor *cn_concat(cn_tensor *const *xs, int n, int axis) {
    if (n < 1 || !xs) return cn_fail("concat: %d tensors given, need at least 1", n);
    return axis_op(CN_OP_concat, xs, n, axis);
}

cn_tensor *cn_stack(cn_tensor *const *xs, int n, int axis) {
    if (n < 1 || !xs) return cn_fail("stack: %d tensors given, need at least 1", n);
    for (int i = 0; i < n; i++)
        if (!xs[i]) return NULL;
    const cn_tensor *x0 = xs[0];
    int nd = x0->ndim;
    if (nd >= CN_MAX_DIMS)
        return cn_fail("stack: inputs of rank %d leave no room for a new axis (at most %d)", nd,
                       CN_MAX_DIMS);
    int ax = cn_norm_axis("stack", axis, nd + 1);
    if (ax < 0) return NULL;
    for (int i = 1; i < n; i++) {
        bool same = xs[i]->ndim == nd;
        for (int d = 0; same && d < nd; d++)
            same = xs[i]->shape[d] == x0->shape[d] || xs[i]->shape[d] < 0 || x0->shape[d] < 0;
        if (!same) {
            char b1[160], b2[160];
            return cn_fail("stack: input %d has shape %s but input 0 has %s; all must be equal", i,
                           cn_fmt_shape(b1, sizeof b1, xs[i]->ndim, xs[i]->shape),
                           cn_fmt_shape(b2, sizeof b2, nd, x0->shape));
        }
    }
    cn_tensor **u = malloc(sizeof *u * (size_t)n);
    if (!u) return cn_fail("stack: out of memory");
    int made = 0;
    cn_tensor *r = NULL;
    for (; made < n; made++) {
        cn_attrs ra = {0};
        ra.nlist = nd + 1;
        for (int d = 0, k = 0; d <= nd; d++) ra.list[d] = d == ax ? 1 : xs[made]->shape[k++];
        u[made] = cn_op_run(CN_OP_reshape, &xs[made], 1, &ra);
        if (!u[made]) break;
    }
    if (made == n) r = axis_op(CN_OP_concat, u, n, ax);
    for (int i = 0; i < made; i++) cn_release(u[i]);
    free(u);
    return r;
}

int cn_split(cn_tensor *x, int axis, const int64_t *sizes, int nsizes, cn_tensor **out) {
    if (!x) return CN_EINVAL;
    if (nsizes < 1 || !sizes || !out)
        return cn_failc(CN_EINVAL, "split: %d sizes given (need at least 1, and sizes and out not NULL)",
                        nsizes);
    if (x->ndim == 0) return cn_failc(CN_EINVAL, "split: cannot split a rank-0 tensor");
    int ax = cn_norm_axis("split", axis, x->ndim);
    if (ax < 0) return CN_EINVAL;
    int64_t L = x->shape[ax], sum = 0;
    char b1[160];
    for (int i = 0; i < nsizes; i++) {
        if (sizes[i] < 0 || (L >= 0 && sizes[i] > L - sum))
            return cn_failc(CN_EINVAL,
                            "split: sizes do not fit axis %d of shape %s (size %" PRId64
                            " at position %d)",
                            axis, cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape), sizes[i], i);
        sum += sizes[i];
    }
    if (L >= 0 && sum != L)
        return cn_failc(CN_EINVAL, "split: sizes sum to %" PRId64 " but axis %d of shape %s has size %" PRId64,
                        sum, axis, cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape), L);
    int64_t start = 0;
    for (int i = 0; i < nsizes; i++) {
        cn_attrs a = {0};
        a.i[0] = ax;
        a.i[1] = start;
        a.i[2] = start + sizes[i];
        a.i[3] = 1;
        out[i] = cn_op_run(CN_OP_slice, &x, 1, &a);
        if (!out[i]) {
            /* All or nothing: the caller gets no half-made list. */
            for (int j = 0; j < i; j++) {
                cn_release(out[j]);
                out[j] = NULL;
            }
            return CN_EINVAL;
        }
        start += sizes[i];
    }
    for (int i = 0; i < nsizes; i++) cn_scope_add(out[i]);
    return CN_OK;
}

int cn_chunk(cn_tensor *x, int chunks, int axis, cn_tensor **out) {
    if (!x) return CN_EINVAL;
    if (chunks < 1 || !out)
        return cn_failc(CN_EINVAL, "chunk: chunks is %d (must be >= 1) or out is NULL", chunks);
    if (x->ndim == 0) return cn_failc(CN_EINVAL, "chunk: cannot chunk a rank-0 tensor");
    int ax = cn_norm_axis("chunk", axis, x->ndim);
    if (ax < 0) return CN_EINVAL;
    int64_t L = x->shape[ax];
    if (L < 0) return cn_failc(CN_EINVAL, "chunk: axis %d has a size unknown until run", axis);
    /* torch.chunk: pieces of ceil(L / chunks); fewer pieces when that
     * covers L sooner, and `chunks` empty pieces when L is 0. */
    int64_t size = (L + chunks - 1) / chunks;
    int n = L == 0 ? chunks : (int)((L + size - 1) / size);
    int64_t *sizes = malloc(sizeof *sizes * (size_t)n);
    if (!sizes) return cn_failc(CN_ENOMEM, "chunk: out of memory");
    for (int i = 0; i < n; i++) sizes[i] = i < n - 1 ? size : L - size * (n - 1);
    int r = cn_split(x, ax, sizes, n, out);
    free(sizes);
    return r < 0 ? r : n;
}

cn_tensor *cn_gather(cn_tensor *x, int axis, cn_tensor *index) {
    cn_tensor *in[2] = {x, index};
    return axis_op(CN_OP_gather, in, 2, axis);
}

cn_tensor *cn_index_select(cn_tensor *x, int axis, cn_tensor *index) {
    cn_tensor *in[2] = {x, index};
    return axis_op(CN_OP_index_select, in, 2, axis);
}

cn_tensor *cn_scatter_add(cn_tensor *x, int axis, cn_tensor *index, cn_tensor *src) {
    cn_tensor *in[3] = {x, index, src};
    return axis_op(CN_OP_scatter_add, in, 3, axis);
}

cn_tensor *cn_pad(cn_tensor *x, const int64_t *pads, int npads, cn_pad_mode mode, double value) {
    if (!x) return NULL;
    if (npads < 0 || npads > CN_ATTR_LIST_MAX || (npads > 0 && !pads))
        return cn_fail("pad: %d pad values (or NULL pads); at most %d, two per axis", npads,
                       CN_ATTR_LIST_MAX);
    cn_attrs a = {0};
    a.nlist = npads;
    if (npads) memcpy(a.list, pads, sizeof(int64_t) * (size_t)npads);
    a.i[0] = mode;
    a.f[0] = value;
    return cn_op_apply(CN_OP_pad, &x, 1, &a);
}

/* The largest value of an integer tensor, for sizes given as "as many as
 * needed" (one_hot's num_classes, sequence_mask's maxlen): read on the host
 * (a tensor on another device is copied there first). */
static int data_max(const char *fn, const cn_tensor *t, int64_t *max) {
    if (cn_is_symbolic(t))
        return cn_failc(CN_EINVAL, "%s: the size must be given for a symbolic input (it would "
                                   "depend on the data)",
                        fn);
    cn_tensor *h = cn_t_to_host((cn_tensor *)t);
    if (!h) return CN_EINVAL;
    int r = cn_cpu_int_max(h, max);
    cn_release(h);
    return r;
}

cn_tensor *cn_one_hot(cn_tensor *index, int64_t num_classes) {
    if (!index) return NULL;
    if (num_classes < 0) {
        if (check_index_dtype("one_hot", index) < 0) return NULL;
        if (cn_shape_numel(index->ndim, index->shape) == 0)
            return cn_fail("one_hot: cannot infer num_classes from an empty index; pass it");
        int64_t mx;
        if (data_max("one_hot", index, &mx) < 0) return NULL;
        if (mx < 0 || mx == INT64_MAX)
            return cn_fail("one_hot: class %" PRId64 " is out of range", mx);
        num_classes = mx + 1;
    }
    cn_attrs a = {0};
    a.i[0] = num_classes;
    return cn_op_apply(CN_OP_one_hot, &index, 1, &a);
}

cn_tensor *cn_tril(cn_tensor *x, int64_t k) {
    cn_attrs a = {0};
    a.i[0] = k;
    return cn_op_apply(CN_OP_tril, &x, 1, &a);
}

cn_tensor *cn_triu(cn_tensor *x, int64_t k) {
    cn_attrs a = {0};
    a.i[0] = k;
    return cn_op_apply(CN_OP_triu, &x, 1, &a);
}

cn_tensor *cn_causal_mask(int64_t n) {
    if (n < 0) return cn_fail("causal_mask: n is %" PRId64 ", must be >= 0", n);
    /* A scope of its own, so only the mask outlives the temporaries. */
    cn_scope_begin();
    cn_tensor *r = cn_arange(0, (double)n, 1, CN_I64);
    cn_tensor *m = cn_keep(cn_le(cn_reshape(r, CN_SHAPE(1, n)), cn_reshape(r, CN_SHAPE(n, 1))));
    cn_scope_end();
    return m;
}

cn_tensor *cn_sequence_mask(cn_tensor *lengths, int64_t maxlen) {
    if (!lengths) return NULL;
    char b1[160];
    if (lengths->dtype != CN_I32 && lengths->dtype != CN_I64)
        return cn_fail("sequence_mask: lengths must be i32 or i64, got %s",
                       cn_dtype_name((cn_dtype)lengths->dtype));
    if (lengths->ndim != 1)
        return cn_fail("sequence_mask: lengths must be 1-D, got shape %s",
                       cn_fmt_shape(b1, sizeof b1, lengths->ndim, lengths->shape));
    if (maxlen < 0) { /* as long as the longest sequence */
        int64_t mx;
        if (data_max("sequence_mask", lengths, &mx) < 0) return NULL;
        maxlen = mx > 0 ? mx : 0;
    }
    int64_t B = lengths->shape[0];
    cn_scope_begin();
    cn_tensor *j = cn_reshape(cn_arange(0, (double)maxlen, 1, CN_I64), CN_SHAPE(1, maxlen));
    cn_tensor *m = cn_keep(cn_lt(j, cn_reshape(lengths, CN_SHAPE(B, 1))));
    cn_scope_end();
    return m;
}
