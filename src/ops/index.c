/* Joining, indexing and padding: concat, gather, index_select, scatter_add,
 * pad, one_hot, tril/triu, and the functions built from them and from views
 * (stack, split, chunk) or from comparisons (causal and sequence masks). */
#include "op.h"

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

static int concat_kernel(const cn_op_def *op, cn_tensor *const *in, int nin, const cn_attrs *a,
                         cn_tensor *out) {
    (void)op;
    return cn_cpu_concat(in, nin, (int)a->i[0], out);
}

const cn_op_def cn_opdef_concat = {
    .name = "concat",
    .ninputs = -1,
    .promote_from = 0,
    .flags = CN_OPF_PROMOTE | CN_OPF_NO_HALF,
    .attrs = {{"axis", CN_ATTR_INT, 0, 0}},
    .infer = concat_infer,
    .cpu = concat_kernel,
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

static int gather_kernel(const cn_op_def *op, cn_tensor *const *in, int nin, const cn_attrs *a,
                         cn_tensor *out) {
    (void)nin;
    return cn_cpu_gather(op->name, in[0], in[1], (int)a->i[0], false, out);
}

const cn_op_def cn_opdef_gather = {
    .name = "gather",
    .ninputs = 2,
    .flags = CN_OPF_NO_HALF,
    .attrs = {{"axis", CN_ATTR_INT, 0, 0}},
    .infer = gather_infer,
    .cpu = gather_kernel,
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

static int index_select_kernel(const cn_op_def *op, cn_tensor *const *in, int nin,
                               const cn_attrs *a, cn_tensor *out) {
    (void)nin;
    return cn_cpu_gather(op->name, in[0], in[1], (int)a->i[0], true, out);
}

const cn_op_def cn_opdef_index_select = {
    .name = "index_select",
    .ninputs = 2,
    .flags = CN_OPF_NO_HALF,
    .attrs = {{"axis", CN_ATTR_INT, 0, 0}},
    .infer = index_select_infer,
    .cpu = index_select_kernel,
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

static int scatter_add_kernel(const cn_op_def *op, cn_tensor *const *in, int nin,
                              const cn_attrs *a, cn_tensor *out) {
    (void)op;
    (void)nin;
    return cn_cpu_scatter_add(in[0], in[1], in[2], (int)a->i[0], out);
}

const cn_op_def cn_opdef_scatter_add = {
    .name = "scatter_add",
    .ninputs = 3,
    .attrs = {{"axis", CN_ATTR_INT, 0, 0}},
    .infer = scatter_add_infer,
    .cpu = scatter_add_kernel,
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

static int pad_kernel(const cn_op_def *op, cn_tensor *const *in, int nin, const cn_attrs *a,
                      cn_tensor *out) {
    (void)op;
    (void)nin;
    return cn_cpu_pad(in[0], a->list, (int)a->nlist, (int)a->i[0], a->f[0], out);
}

const cn_op_def cn_opdef_pad = {
    .name = "pad",
    .ninputs = 1,
    .flags = CN_OPF_NO_HALF,
    .attrs = {{"pads", CN_ATTR_INTS, 0, 0}, {"mode", CN_ATTR_INT, 0, 0}, {"value", CN_ATTR_FLOAT, 0, 0}},
    .infer = pad_infer,
    .cpu = pad_kernel,
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

static int one_hot_kernel(const cn_op_def *op, cn_tensor *const *in, int nin, const cn_attrs *a,
                          cn_tensor *out) {
    (void)op;
    (void)nin;
    (void)a;
    return cn_cpu_one_hot(in[0], out);
}

const cn_op_def cn_opdef_one_hot = {
    .name = "one_hot",
    .ninputs = 1,
    .flags = CN_OPF_NONDIFF | CN_OPF_NO_HALF,
    .attrs = {{"num_classes", CN_ATTR_INT, 0, -1}},
    .infer = one_hot_infer,
    .cpu = one_hot_kernel,
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

static const bool tri_lower = false, tri_upper = true;

static int tri_kernel(const cn_op_def *op, cn_tensor *const *in, int nin, const cn_attrs *a,
                      cn_tensor *out) {
    (void)nin;
    return cn_cpu_tri(in[0], a->i[0], *(const bool *)op->impl, out);
}

const cn_op_def cn_opdef_tril = {
    .name = "tril",
    .ninputs = 1,
    .flags = CN_OPF_NO_HALF,
    .attrs = {{"k", CN_ATTR_INT, 0, 0}},
    .infer = tri_infer,
    .cpu = tri_kernel,
    .onnx = "Trilu",
    .impl = &tri_lower,
    .doc = "y[..., i, j] = j - i <= k ? x[..., i, j] : 0",
};

const cn_op_def cn_opdef_triu = {
    .name = "triu",
    .ninputs = 1,
    .flags = CN_OPF_NO_HALF,
    .attrs = {{"k", CN_ATTR_INT, 0, 0}},
    .infer = tri_infer,
    .cpu = tri_kernel,
    .onnx = "Trilu",
    .impl = &tri_upper,
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
 * needed" (one_hot's num_classes, sequence_mask's maxlen). */
static int data_max(const char *fn, const cn_tensor *t, int64_t *max) {
    if (cn_is_symbolic(t))
        return cn_failc(CN_EINVAL, "%s: the size must be given for a symbolic input (it would "
                                   "depend on the data)",
                        fn);
    return cn_cpu_int_max(t, max);
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
