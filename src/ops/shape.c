/* Views (reshape, permute, slice, expand), contiguous and cast, and the
 * public shape functions built on them (flatten, transpose, squeeze, ...). */
#include "op.h"
/* cn_cpu_binary: slice's vjp_add adds into the CPU accumulator in place. */
#include "../backend/cpu/binary.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- gradient rules shared by the views ---- */

/* Linear ops with one input: the tangent goes through the same op. */
static cn_tensor *jvp_same_op(cn_op_id id, cn_tensor *const *tin, const cn_attrs *a) {
    cn_tensor *t = tin[0];
    return cn_op_apply(id, &t, 1, a);
}

static cn_tensor *reshape_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                              cn_tensor *g, int i) {
    return cn_reshape(g, in[0]->ndim, in[0]->shape);
}
static cn_tensor *reshape_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                              const cn_attrs *a, cn_tensor *out) {
    return jvp_same_op(CN_OP_reshape, tin, a);
}

static cn_tensor *permute_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                              cn_tensor *g, int i) {
    int inv[CN_MAX_DIMS];
    for (int k = 0; k < a->nlist; k++) inv[a->list[k]] = k;
    return cn_permute(g, inv, (int)a->nlist);
}
static cn_tensor *permute_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                              const cn_attrs *a, cn_tensor *out) {
    return jvp_same_op(CN_OP_permute, tin, a);
}

static cn_tensor *slice_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                            cn_tensor *g, int i) {
    cn_tensor *pair[2] = {cn_zeros_like_op(in[0]), g};
    return cn_op_apply(CN_OP_slice_scatter, pair, 2, a);
}
static cn_tensor *slice_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                            const cn_attrs *a, cn_tensor *out) {
    return jvp_same_op(CN_OP_slice, tin, a);
}

static cn_tensor *expand_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                             cn_tensor *g, int i) {
    return cn_sum_to(g, in[0]);
}
static cn_tensor *expand_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                             const cn_attrs *a, cn_tensor *out) {
    return jvp_same_op(CN_OP_expand, tin, a);
}

static cn_tensor *identity_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                               cn_tensor *g, int i) {
    return cn_scope_add(cn_retain(g));
}
static cn_tensor *identity_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                               const cn_attrs *a, cn_tensor *out) {
    return cn_scope_add(cn_retain(tin[0]));
}

static cn_tensor *cast_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                           cn_tensor *g, int i) {
    return cn_cast(g, (cn_dtype)in[0]->dtype);
}
static cn_tensor *cast_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                           const cn_attrs *a, cn_tensor *out) {
    return cn_cast(tin[0], (cn_dtype)out->dtype);
}

/* ---- reshape: list = shape (one -1 allowed), i[0] = strict (no copy) ---- */

static int reshape_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                         cn_meta *m) {
    (void)nin;
    const cn_tensor *x = in[0];
    if (a->nlist < 0 || a->nlist > CN_MAX_DIMS)
        return cn_failc(CN_EINVAL, "%s: rank %d is out of range (0..%d)", op->name, (int)a->nlist,
                        CN_MAX_DIMS);
    int infer_at = -1;
    bool unknown_in = false;
    int64_t in_numel = 1, known = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (x->shape[i] < 0) unknown_in = true;
        else in_numel *= x->shape[i];
    }
    char b1[160], b2[160];
    for (int i = 0; i < a->nlist; i++) {
        int64_t s = a->list[i];
        if (s == -1) {
            if (infer_at >= 0)
                return cn_failc(CN_EINVAL, "%s: shape %s has more than one -1", op->name,
                                cn_fmt_shape(b1, sizeof b1, (int)a->nlist, a->list));
            infer_at = i;
        } else if (s < 0) {
            return cn_failc(CN_EINVAL, "%s: shape %s has a negative size", op->name,
                            cn_fmt_shape(b1, sizeof b1, (int)a->nlist, a->list));
        } else if (s > 0 && known > (INT64_C(1) << 56) / s) {
            /* The bound of cn_check_shape; a product past it overflows. */
            return cn_failc(CN_EINVAL, "%s: shape %s is too large", op->name,
                            cn_fmt_shape(b1, sizeof b1, (int)a->nlist, a->list));
        } else {
            known *= s;
        }
    }
    m->dtype = (cn_dtype)x->dtype;
    m->ndim = (int)a->nlist;
    memcpy(m->shape, a->list, sizeof(int64_t) * (size_t)a->nlist);
    if (unknown_in) return CN_OK; /* checked again when the sizes are known */
    if (infer_at >= 0) {
        if (known == 0 || in_numel % known != 0)
            return cn_failc(CN_EINVAL, "%s: cannot reshape %s (%" PRId64 " elements) to %s",
                            op->name, cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape), in_numel,
                            cn_fmt_shape(b2, sizeof b2, (int)a->nlist, a->list));
        m->shape[infer_at] = in_numel / known;
        a->list[infer_at] = m->shape[infer_at];
    } else if (known != in_numel) {
        return cn_failc(CN_EINVAL, "%s: cannot reshape %s (%" PRId64 " elements) to %s (%" PRId64
                                   " elements)",
                        op->name, cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape), in_numel,
                        cn_fmt_shape(b2, sizeof b2, (int)a->nlist, a->list), known);
    }
    return CN_OK;
}

/* Strides for viewing (shape, strides) as new_shape without a copy, if any
 * exist (the algorithm of PyTorch's computeStride). */
static bool view_strides(int nd, const int64_t *shape, const int64_t *strides, int nn,
                         const int64_t *nshape, int64_t *nstrides) {
    int64_t numel = cn_shape_numel(nd, shape);
    if (numel == 0 || nd == 0) {
        cn_contiguous_strides(nn, nshape, nstrides);
        return true;
    }
    int view_d = nn - 1;
    int64_t chunk_base = strides[nd - 1], tensor_numel = 1, view_numel = 1;
    for (int d = nd - 1; d >= 0; d--) {
        tensor_numel *= shape[d];
        if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || nshape[view_d] == 1)) {
                nstrides[view_d] = view_numel * chunk_base;
                view_numel *= nshape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (d > 0) {
                chunk_base = strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

static int reshape_view(const cn_op_def *op, const cn_tensor *in, const cn_attrs *a,
                        cn_tensor *out) {
    if (cn_is_contiguous(in)) {
        cn_contiguous_strides(out->ndim, out->shape, out->strides);
        return 0;
    }
    if (view_strides(in->ndim, in->shape, in->strides, out->ndim, out->shape, out->strides))
        return 0;
    if (a->i[0]) {
        char b1[160], b2[160];
        return cn_failc(CN_EINVAL,
                        "view: a tensor of shape %s with these strides cannot be viewed as %s "
                        "without a copy (use reshape)",
                        cn_fmt_shape(b1, sizeof b1, in->ndim, in->shape),
                        cn_fmt_shape(b2, sizeof b2, out->ndim, out->shape));
    }
    (void)op;
    return 1;
}

const cn_op_def cn_opdef_reshape = {
    .name = "reshape",
    .ninputs = 1,
    .flags = CN_OPF_VIEW | CN_OPF_NO_HALF,
    .attrs = {{"shape", CN_ATTR_INTS, 0, 0}, {"strict", CN_ATTR_BOOL, 0, 0}},
    .infer = reshape_infer,
    .view = reshape_view,
    .vjp = reshape_vjp,
    .jvp = reshape_jvp,
    .onnx = "Reshape",
    .doc = "y = x with a new shape of the same size (a view when the strides allow)",
};

/* ---- permute: list = permutation ---- */

static int permute_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                         cn_meta *m) {
    (void)nin;
    const cn_tensor *x = in[0];
    if (a->nlist != x->ndim)
        return cn_failc(CN_EINVAL, "%s: %d axes given for a tensor of rank %d", op->name,
                        (int)a->nlist, x->ndim);
    bool seen[CN_MAX_DIMS] = {false};
    for (int i = 0; i < x->ndim; i++) {
        int ax = cn_norm_axis(op->name, (int)a->list[i], x->ndim);
        if (ax < 0) return CN_EINVAL;
        if (seen[ax])
            return cn_failc(CN_EINVAL, "%s: axis %d appears more than once", op->name, ax);
        seen[ax] = true;
        a->list[i] = ax;
        m->shape[i] = x->shape[ax];
    }
    m->dtype = (cn_dtype)x->dtype;
    m->ndim = x->ndim;
    return CN_OK;
}

static int permute_view(const cn_op_def *op, const cn_tensor *in, const cn_attrs *a,
                        cn_tensor *out) {
    (void)op;
    for (int i = 0; i < in->ndim; i++) out->strides[i] = in->strides[a->list[i]];
    return 0;
}

const cn_op_def cn_opdef_permute = {
    .name = "permute",
    .ninputs = 1,
    .flags = CN_OPF_VIEW | CN_OPF_NO_HALF,
    .attrs = {{"axes", CN_ATTR_INTS, 0, 0}},
    .infer = permute_infer,
    .view = permute_view,
    .vjp = permute_vjp,
    .jvp = permute_jvp,
    .onnx = "Transpose",
    .doc = "y[i_p0, ..., i_pn] = x[i_0, ..., i_n] (axes reordered, a view)",
};

/* ---- slice: i[0] axis, i[1] start, i[2] stop, i[3] step (Python rules) ----
 * Canonical form after infer: start and stop resolved to indices in range;
 * a negative-step slice that runs past index 0 has stop = CN_BEGIN. */

static int64_t slice_len(int64_t start, int64_t stop, int64_t step) {
    if (step > 0) return stop > start ? (stop - start + step - 1) / step : 0;
    return start > stop ? (start - stop - 1) / (-step) + 1 : 0;
}

static int slice_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                       cn_meta *m) {
    (void)nin;
    const cn_tensor *x = in[0];
    if (x->ndim == 0) return cn_failc(CN_EINVAL, "%s: cannot slice a rank-0 tensor", op->name);
    int ax = cn_norm_axis(op->name, (int)a->i[0], x->ndim);
    if (ax < 0) return CN_EINVAL;
    int64_t start = a->i[1], stop = a->i[2], step = a->i[3];
    if (step == 0) return cn_failc(CN_EINVAL, "%s: step is 0", op->name);
    m->dtype = (cn_dtype)x->dtype;
    m->ndim = x->ndim;
    memcpy(m->shape, x->shape, sizeof m->shape);
    a->i[0] = ax;
    int64_t L = x->shape[ax];
    if (L < 0) { /* unknown until run */
        m->shape[ax] = -1;
        return CN_OK;
    }
    bool none_start = start == CN_BEGIN || start == CN_END;
    bool none_stop = stop == CN_BEGIN || stop == CN_END;
    if (step > 0) {
        if (none_start) start = 0;
        else if (start < 0) start = start + L < 0 ? 0 : start + L;
        else if (start > L) start = L;
        if (none_stop) stop = L;
        else if (stop < 0) stop = stop + L < 0 ? 0 : stop + L;
        else if (stop > L) stop = L;
    } else {
        if (none_start) start = L - 1;
        else if (start < 0) start = start + L < -1 ? -1 : start + L;
        else if (start > L - 1) start = L - 1;
        if (none_stop) stop = -1;
        else if (stop < 0) stop = stop + L < -1 ? -1 : stop + L;
        else if (stop > L - 1) stop = L - 1;
    }
    int64_t n = slice_len(start, stop, step);
    m->shape[ax] = n;
    /* Empty: [0, 0) in either direction, so inferring again (a program
     * re-runs infer with the real sizes) gives the same empty slice. */
    if (n == 0) start = stop = 0;
    a->i[1] = start;
    a->i[2] = stop < 0 ? CN_BEGIN : stop;
    return CN_OK;
}

static int slice_view(const cn_op_def *op, const cn_tensor *in, const cn_attrs *a,
                      cn_tensor *out) {
    (void)op;
    int ax = (int)a->i[0];
    memcpy(out->strides, in->strides, sizeof out->strides);
    out->strides[ax] = in->strides[ax] * a->i[3];
    out->offset = in->offset + a->i[1] * in->strides[ax];
    return 0;
}

/* The slice's gradient added straight into the matching slice of acc: a
 * loop that reads step t of a [T, ...] tensor would otherwise build T
 * full-size gradients of zeros and add them up. On the CPU only (the add
 * runs there in place); elsewhere the walk uses the vjp. */
static int slice_vjp_add(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *g, int i,
                         cn_tensor *acc) {
    if (!cn_t_on_cpu(acc) || !cn_t_on_cpu(g)) return CN_EUNSUPPORTED;
    cn_tensor *view = cn_op_run(CN_OP_slice, &acc, 1, a);
    int rc = view && view->ndim == g->ndim &&
                     !memcmp(view->shape, g->shape, sizeof(int64_t) * (size_t)g->ndim)
                 ? cn_cpu_binary("backward", CN_BIN_ADD, view, view, g)
                 : CN_EINVAL;
    cn_release(view);
    return rc;
}

const cn_op_def cn_opdef_slice = {
    .name = "slice",
    .ninputs = 1,
    .flags = CN_OPF_VIEW | CN_OPF_NO_HALF,
    .attrs = {{"axis", CN_ATTR_INT, 0, 0},
              {"start", CN_ATTR_INT, 1, 0},
              {"stop", CN_ATTR_INT, 2, 0},
              {"step", CN_ATTR_INT, 3, 1}},
    .infer = slice_infer,
    .view = slice_view,
    .vjp = slice_vjp,
    .jvp = slice_jvp,
    .vjp_add = slice_vjp_add,
    .onnx = "Slice",
    .doc = "y = x[start:stop:step] along axis (a view; step may be negative)",
};

/* ---- expand: list = target shape (-1 keeps a size) ---- */

static int expand_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                        cn_meta *m) {
    (void)nin;
    const cn_tensor *x = in[0];
    int nd = (int)a->nlist;
    char b1[160], b2[160];
    if (nd < x->ndim || nd > CN_MAX_DIMS)
        return cn_failc(CN_EINVAL, "%s: cannot expand %s to rank %d", op->name,
                        cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape), nd);
    for (int d = 0; d < nd; d++) {
        int j = d - (nd - x->ndim);
        int64_t want = a->list[d], have = j >= 0 ? x->shape[j] : 1;
        if (want == -1) {
            if (j < 0)
                return cn_failc(CN_EINVAL, "%s: -1 is not allowed for the new leading axis %d",
                                op->name, d);
            want = have;
        } else if (want < 0) {
            return cn_failc(CN_EINVAL, "%s: negative size in %s", op->name,
                            cn_fmt_shape(b2, sizeof b2, nd, a->list));
        } else if (have != 1 && have != -1 && have != want) {
            return cn_failc(CN_EINVAL, "%s: cannot expand %s to %s (axis %d: %" PRId64
                                       " is not 1)",
                            op->name, cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape),
                            cn_fmt_shape(b2, sizeof b2, nd, a->list), d, have);
        }
        m->shape[d] = want;
        if (want >= 0) a->list[d] = want;
    }
    m->ndim = nd;
    m->dtype = (cn_dtype)x->dtype;
    return CN_OK;
}

static int expand_view(const cn_op_def *op, const cn_tensor *in, const cn_attrs *a,
                       cn_tensor *out) {
    (void)op;
    (void)a;
    int nd = out->ndim;
    for (int d = 0; d < nd; d++) {
        int j = d - (nd - in->ndim);
        out->strides[d] = (j < 0 || in->shape[j] != out->shape[d]) ? 0 : in->strides[j];
    }
    return 0;
}

const cn_op_def cn_opdef_expand = {
    .name = "expand",
    .ninputs = 1,
    .flags = CN_OPF_VIEW | CN_OPF_NO_HALF,
    .attrs = {{"shape", CN_ATTR_INTS, 0, 0}},
    .infer = expand_infer,
    .view = expand_view,
    .vjp = expand_vjp,
    .jvp = expand_jvp,
    .onnx = "Expand",
    .doc = "y = x broadcast to shape (size-1 axes repeat with stride 0, a view)",
};

/* ---- contiguous and cast: copies ---- */

static int same_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                      cn_meta *m) {
    (void)op;
    (void)nin;
    (void)a;
    m->dtype = (cn_dtype)in[0]->dtype;
    m->ndim = in[0]->ndim;
    memcpy(m->shape, in[0]->shape, sizeof m->shape);
    return CN_OK;
}

const cn_op_def cn_opdef_contiguous = {
    .name = "contiguous",
    .ninputs = 1,
    .flags = CN_OPF_NO_HALF | CN_OPF_ELEMENTWISE,
    .infer = same_infer,
    .vjp = identity_vjp,
    .jvp = identity_jvp,
    .onnx = "Identity",
    .doc = "y = a row-major copy of x",
};

static int cast_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                      cn_meta *m) {
    if ((uint64_t)a->i[0] >= CN_DTYPE_COUNT)
        return cn_failc(CN_EINVAL, "%s: invalid dtype %" PRId64, op->name, a->i[0]);
    same_infer(op, in, nin, a, m);
    m->dtype = (cn_dtype)a->i[0];
    return CN_OK;
}

const cn_op_def cn_opdef_cast = {
    .name = "cast",
    .ninputs = 1,
    .flags = CN_OPF_NO_HALF | CN_OPF_ELEMENTWISE,
    .attrs = {{"dtype", CN_ATTR_DTYPE, 0, CN_F32}},
    .infer = cast_infer,
    .vjp = cast_vjp,
    .jvp = cast_jvp,
    .onnx = "Cast",
    .doc = "y = x converted to dtype (float -> int truncates toward zero)",
};


/* ---- slice_scatter: base with base[slice] = src (the slice's gradient) ----
 * Inputs (base, src); attributes as slice. */

static int slice_scatter_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                               cn_meta *m) {
    cn_meta sm;
    memset(&sm, 0, sizeof sm);
    if (slice_infer(op, in, 1, a, &sm) < 0) return CN_EINVAL;
    const cn_tensor *src = in[1];
    bool ok = src->ndim == sm.ndim;
    for (int i = 0; ok && i < sm.ndim; i++)
        ok = src->shape[i] == sm.shape[i] || src->shape[i] < 0 || sm.shape[i] < 0;
    if (!ok) {
        char b1[160], b2[160];
        return cn_failc(CN_EINVAL, "%s: src %s does not match the slice %s", op->name,
                        cn_fmt_shape(b1, sizeof b1, src->ndim, src->shape),
                        cn_fmt_shape(b2, sizeof b2, sm.ndim, sm.shape));
    }
    return same_infer(op, in, 1, a, m);
}

static cn_tensor *slice_scatter_vjp(cn_tensor *const *in, int nin, const cn_attrs *a,
                                    cn_tensor *out, cn_tensor *g, int i) {
    if (i == 1) {
        cn_tensor *x = g;
        return cn_op_apply(CN_OP_slice, &x, 1, a);
    }
    cn_tensor *pair[2] = {g, cn_zeros_like_op(in[1])};
    return cn_op_apply(CN_OP_slice_scatter, pair, 2, a);
}

static cn_tensor *slice_scatter_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                                    const cn_attrs *a, cn_tensor *out) {
    cn_tensor *pair[2] = {tin[0] ? tin[0] : cn_zeros_like_op(in[0]),
                          tin[1] ? tin[1] : cn_zeros_like_op(in[1])};
    return cn_op_apply(CN_OP_slice_scatter, pair, 2, a);
}

const cn_op_def cn_opdef_slice_scatter = {
    .name = "slice_scatter",
    .ninputs = 2,
    .flags = CN_OPF_PROMOTE | CN_OPF_NO_HALF,
    .attrs = {{"axis", CN_ATTR_INT, 0, 0},
              {"start", CN_ATTR_INT, 1, 0},
              {"stop", CN_ATTR_INT, 2, 0},
              {"step", CN_ATTR_INT, 3, 1}},
    .infer = slice_scatter_infer,
    .vjp = slice_scatter_vjp,
    .jvp = slice_scatter_jvp,
    .doc = "y = base with y[start:stop:step] (along axis) = src",
};

/* ---- full_like: f[0] value, i[0] dtype (-1: x's) ---- */

static int full_like_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                           cn_meta *m) {
    same_infer(op, in, nin, a, m);
    if (a->i[0] >= 0) {
        if (a->i[0] >= CN_DTYPE_COUNT)
            return cn_failc(CN_EINVAL, "%s: invalid dtype %" PRId64, op->name, a->i[0]);
        m->dtype = (cn_dtype)a->i[0];
    }
    return CN_OK;
}

const cn_op_def cn_opdef_full_like = {
    .name = "full_like",
    .ninputs = 1,
    .flags = CN_OPF_NONDIFF | CN_OPF_NO_HALF,
    .attrs = {{"value", CN_ATTR_FLOAT, 0, 0}, {"dtype", CN_ATTR_DTYPE, 0, -1}},
    .infer = full_like_infer,
    .onnx = "ConstantOfShape",
    .doc = "y = value everywhere, with x's shape (and x's dtype unless given)",
};

/* ---- public functions ---- */


static cn_tensor *reshape_impl(cn_tensor *t, int ndim, const int64_t *shape, bool strict) {
    if (!t) return NULL;
    if (ndim < 0 || ndim > CN_MAX_DIMS || (ndim > 0 && !shape))
        return cn_fail("%s: rank %d is out of range (0..%d) or shape is NULL",
                       strict ? "view" : "reshape", ndim, CN_MAX_DIMS);
    cn_attrs a = {0};
    a.nlist = ndim;
    if (ndim) memcpy(a.list, shape, sizeof(int64_t) * (size_t)ndim);
    a.i[0] = strict;
    return cn_op_apply(CN_OP_reshape, &t, 1, &a);
}

cn_tensor *cn_reshape(cn_tensor *t, int ndim, const int64_t *shape) {
    return reshape_impl(t, ndim, shape, false);
}

cn_tensor *cn_view(cn_tensor *t, int ndim, const int64_t *shape) {
    return reshape_impl(t, ndim, shape, true);
}

cn_tensor *cn_flatten(cn_tensor *t, int start_axis, int end_axis) {
    if (!t) return NULL;
    if (t->ndim == 0) return cn_reshape(t, 1, (int64_t[]){1});
    int s = cn_norm_axis("flatten", start_axis, t->ndim);
    int e = s < 0 ? -1 : cn_norm_axis("flatten", end_axis, t->ndim);
    if (s < 0 || e < 0) return NULL;
    if (s > e) return cn_fail("flatten: start axis %d comes after end axis %d", start_axis, end_axis);
    int64_t shape[CN_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < s; i++) shape[k++] = t->shape[i];
    int64_t p = 1;
    for (int i = s; i <= e; i++) p = (p < 0 || t->shape[i] < 0) ? -1 : p * t->shape[i];
    shape[k++] = p;
    for (int i = e + 1; i < t->ndim; i++) shape[k++] = t->shape[i];
    return cn_reshape(t, k, shape);
}

cn_tensor *cn_permute(cn_tensor *t, const int *axes, int naxes) {
    if (!t) return NULL;
    if (naxes < 0 || naxes > CN_MAX_DIMS || (naxes > 0 && !axes))
        return cn_fail("permute: %d axes (or NULL axes) for rank %d", naxes, t->ndim);
    cn_attrs a = {0};
    a.nlist = naxes;
    for (int i = 0; i < naxes; i++) a.list[i] = axes[i];
    return cn_op_apply(CN_OP_permute, &t, 1, &a);
}

cn_tensor *cn_transpose(cn_tensor *t, int axis0, int axis1) {
    if (!t) return NULL;
    int a0 = cn_norm_axis("transpose", axis0, t->ndim);
    int a1 = a0 < 0 ? -1 : cn_norm_axis("transpose", axis1, t->ndim);
    if (a0 < 0 || a1 < 0) return NULL;
    if (t->ndim == 0) return cn_scope_add(cn_retain(t));
    int perm[CN_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) perm[i] = i;
    perm[a0] = a1;
    perm[a1] = a0;
    return cn_permute(t, perm, t->ndim);
}

cn_tensor *cn_mT(cn_tensor *t) {
    if (!t) return NULL;
    if (t->ndim < 2) return cn_scope_add(cn_retain(t));
    return cn_transpose(t, -2, -1);
}

cn_tensor *cn_squeeze(cn_tensor *t, int axis) {
    if (!t) return NULL;
    if (t->ndim == 0) {
        if (cn_norm_axis("squeeze", axis, 0) < 0) return NULL;
        return cn_scope_add(cn_retain(t));
    }
    int ax = cn_norm_axis("squeeze", axis, t->ndim);
    if (ax < 0) return NULL;
    if (t->shape[ax] != 1) {
        char b[160];
        return cn_fail("squeeze: axis %d of shape %s has size %" PRId64 ", not 1", axis,
                       cn_fmt_shape(b, sizeof b, t->ndim, t->shape), t->shape[ax]);
    }
    int64_t shape[CN_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != ax) shape[k++] = t->shape[i];
    return cn_reshape(t, k, shape);
}

cn_tensor *cn_squeeze_all(cn_tensor *t) {
    if (!t) return NULL;
    int64_t shape[CN_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] != 1) shape[k++] = t->shape[i];
    return cn_reshape(t, k, shape);
}

cn_tensor *cn_unsqueeze(cn_tensor *t, int axis) {
    if (!t) return NULL;
    if (t->ndim == CN_MAX_DIMS)
        return cn_fail("unsqueeze: the tensor already has the maximum rank %d", CN_MAX_DIMS);
    int ax = cn_norm_axis("unsqueeze", axis, t->ndim + 1);
    if (ax < 0) return NULL;
    int64_t shape[CN_MAX_DIMS];
    int k = 0;
    for (int i = 0; i <= t->ndim; i++) {
        if (i == ax) shape[k++] = 1;
        if (i < t->ndim) shape[k++] = t->shape[i];
    }
    return cn_reshape(t, k, shape);
}

cn_tensor *cn_slice(cn_tensor *t, int axis, int64_t start, int64_t stop, int64_t step) {
    if (!t) return NULL;
    cn_attrs a = {0};
    a.i[0] = axis;
    a.i[1] = start;
    a.i[2] = stop;
    a.i[3] = step;
    return cn_op_apply(CN_OP_slice, &t, 1, &a);
}

cn_tensor *cn_narrow(cn_tensor *t, int axis, int64_t start, int64_t length) {
    if (!t) return NULL;
    if (t->ndim == 0) return cn_fail("narrow: cannot narrow a rank-0 tensor");
    int ax = cn_norm_axis("narrow", axis, t->ndim);
    if (ax < 0) return NULL;
    int64_t L = t->shape[ax];
    if (L >= 0) {
        if (start < 0) start += L;
        if (start < 0 || length < 0 || start > L || length > L - start) {
            char b[160];
            return cn_fail("narrow: start %" PRId64 " and length %" PRId64
                           " do not fit axis %d of shape %s",
                           start, length, axis, cn_fmt_shape(b, sizeof b, t->ndim, t->shape));
        }
    }
    return cn_slice(t, ax, start, start + length, 1);
}

cn_tensor *cn_expand(cn_tensor *t, int ndim, const int64_t *shape) {
    if (!t) return NULL;
    if (ndim < 0 || ndim > CN_MAX_DIMS || (ndim > 0 && !shape))
        return cn_fail("expand: rank %d is out of range (0..%d) or shape is NULL", ndim,
                       CN_MAX_DIMS);
    cn_attrs a = {0};
    a.nlist = ndim;
    if (ndim) memcpy(a.list, shape, sizeof(int64_t) * (size_t)ndim);
    return cn_op_apply(CN_OP_expand, &t, 1, &a);
}

cn_tensor *cn_broadcast_to(cn_tensor *t, int ndim, const int64_t *shape) {
    return cn_expand(t, ndim, shape);
}

cn_tensor *cn_contiguous(cn_tensor *t) {
    if (!t) return NULL;
    if (cn_is_contiguous(t)) return cn_scope_add(cn_retain(t));
    return cn_op_apply(CN_OP_contiguous, &t, 1, NULL); /* recorded for autograd */
}

cn_tensor *cn_clone(const cn_tensor *t) {
    cn_tensor *x = (cn_tensor *)t;
    return cn_op_apply(CN_OP_contiguous, &x, 1, NULL);
}

cn_tensor *cn_cast(cn_tensor *t, cn_dtype dt) {
    if (!t) return NULL;
    if ((unsigned)dt >= CN_DTYPE_COUNT) return cn_fail("cast: invalid dtype %d", (int)dt);
    if (t->dtype == dt) return cn_scope_add(cn_retain(t));
    cn_attrs a = {0};
    a.i[0] = dt;
    return cn_op_apply(CN_OP_cast, &t, 1, &a);
}

int cn_copy_(cn_tensor *dst, const cn_tensor *src) {
    if (!dst || !src) return CN_EINVAL;
    if (!dst->storage || !src->storage)
        return cn_failc(CN_EINVAL, "copy_: symbolic tensors cannot be copied into in place");
    if (dst->requires_grad && cn_is_grad_enabled())
        return cn_failc(CN_ESTATE, "copy_: the destination requires a gradient and in-place "
                                   "changes are not recorded; do it inside cn_no_grad_begin/end");
    cn_tensor *in[2] = {dst, (cn_tensor *)src};
    cn_meta m;
    if (cn_broadcast_shapes("copy_", in, 2, &m) < 0) return CN_EINVAL;
    bool same = m.ndim == dst->ndim;
    for (int i = 0; same && i < m.ndim; i++) same = m.shape[i] == dst->shape[i];
    if (!same) {
        char b1[160], b2[160];
        return cn_failc(CN_EINVAL, "copy_: source %s does not broadcast to destination %s",
                        cn_fmt_shape(b1, sizeof b1, src->ndim, src->shape),
                        cn_fmt_shape(b2, sizeof b2, dst->ndim, dst->shape));
    }
    /* Overlapping source and destination: copy through a temporary. */
    cn_tensor *s = (cn_tensor *)src, *tmp = NULL;
    if (src->storage == dst->storage) {
        tmp = cn_op_run(CN_OP_contiguous, &s, 1, NULL);
        if (!tmp) return CN_ENOMEM;
        s = tmp;
    }
    /* Across devices too, as torch's copy_. */
    int r = cn_transfer(dst, s, false);
    cn_release(tmp);
    cn_storage_bump(dst->storage);
    return r;
}

int cn_fill_(cn_tensor *t, double value) {
    if (!t) return CN_EINVAL;
    if (!t->storage) return cn_failc(CN_EINVAL, "fill_: symbolic tensors cannot be filled");
    if (t->requires_grad && cn_is_grad_enabled())
        return cn_failc(CN_ESTATE, "fill_: the tensor requires a gradient and in-place changes "
                                   "are not recorded; do it inside cn_no_grad_begin/end");
    int r = cn_backend_of(t)->fill(t, value);
    cn_storage_bump(t->storage);
    return r;
}
