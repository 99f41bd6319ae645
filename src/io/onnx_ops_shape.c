/* ONNX shape and index ops: Reshape, Transpose, Squeeze, Concat, Slice,
 * Gather, Expand, Shape, ConstantOfShape, Range, Tile, Pad, ... Shape-like
 * inputs (a Reshape's shape, a Slice's starts) must be constants at load
 * time: exporters compute them with Shape/Gather/Concat chains, which fold
 * here once the input sizes are known. */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#define MAXV 64

static bool known(cn_tensor *x) {
    for (int i = 0; i < cn_ndim(x); i++)
        if (cn_dim(x, i) < 0) return false;
    return true;
}

/* Axes from an attribute (before opset `input_from`) or from input `idx`. */
static int axes_of(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor **in, int nin, int idx,
                   int input_from, int64_t *axes, bool *given) {
    *given = false;
    if (c->opset_of_node < input_from) {
        int k = onnx_attr_ints(n, "axes", axes, MAXV);
        if (k == -2) return onnx_bad(c, "too many axes");
        *given = k >= 0;
        return k < 0 ? 0 : k;
    }
    if (nin <= idx || !in[idx]) return 0;
    *given = true;
    return onnx_const_ints(c, in[idx], "axes", axes, MAXV);
}

H(h_reshape) {
    UNUSED;
    cn_tensor *x = in[0];
    int64_t shape[MAXV];
    int k;
    if (c->opset_of_node < 5) {
        k = onnx_attr_ints(n, "shape", shape, MAXV);
        if (k < 0) return onnx_bad(c, "no shape attribute");
    } else {
        if (nin < 2 || !in[1]) return onnx_bad(c, "no shape input");
        k = onnx_const_ints(c, in[1], "shape", shape, MAXV);
        if (k < 0) return k;
    }
    if (k > CN_MAX_DIMS) return onnx_unsup(c, "rank %d (at most %d)", k, CN_MAX_DIMS);
    bool allowzero = onnx_attr_int(n, "allowzero", 0);
    int unknown = 0;
    for (int i = 0; i < k; i++) {
        if (shape[i] == 0 && !allowzero) {
            if (i >= cn_ndim(x)) return onnx_bad(c, "shape entry %d is 0 but the input has rank %d", i, cn_ndim(x));
            shape[i] = cn_dim(x, i);
        }
        if (shape[i] == -1) unknown++;
        else if (shape[i] < 0) return onnx_bad(c, "shape entry %" PRId64, shape[i]);
    }
    if (unknown > 1)
        return onnx_unsup(c, "the target shape has more than one unknown size (give concrete input shapes)");
    DONE(cn_reshape(x, k, shape));
}

H(h_flatten) {
    UNUSED;
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    int64_t ax = onnx_attr_int(n, "axis", 1);
    if (ax < -r || ax > r) return onnx_bad(c, "axis %" PRId64 " for rank %d", ax, r);
    int axis = (int)(ax < 0 ? ax + r : ax);
    int64_t a = 1, b = 1;
    bool ua = false, ub = false;
    for (int i = 0; i < r; i++) {
        int64_t d = cn_dim(x, i);
        if (i < axis) {
            if (d < 0) ua = true;
            else a *= d;
        } else {
            if (d < 0) ub = true;
            else b *= d;
        }
    }
    if (ua && ub) return onnx_unsup(c, "unknown sizes on both sides of the axis");
    DONE(cn_reshape(x, 2, (int64_t[]){ua ? -1 : a, ub ? -1 : b}));
}

H(h_transpose) {
    UNUSED;
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    int64_t perm[MAXV];
    int k = onnx_attr_ints(n, "perm", perm, MAXV);
    int p[CN_MAX_DIMS];
    if (k < 0)
        for (int i = 0; i < r; i++) p[i] = r - 1 - i;
    else {
        if (k != r) return onnx_bad(c, "perm has %d entries for rank %d", k, r);
        for (int i = 0; i < r; i++) p[i] = (int)perm[i];
    }
    DONE(cn_permute(x, p, r));
}

H(h_squeeze) {
    UNUSED;
    cn_tensor *x = in[0];
    int64_t axes[MAXV];
    bool given;
    int k = axes_of(c, n, in, nin, 1, 13, axes, &given);
    if (k < 0) return k;
    if (!given) {
        /* Every size-1 axis: the sizes must be known. */
        if (!known(x)) return onnx_unsup(c, "squeezing every size-1 axis of a tensor with unknown sizes");
        DONE(cn_squeeze_all(x));
    }
    int r = cn_ndim(x);
    bool drop[CN_MAX_DIMS] = {0};
    for (int i = 0; i < k; i++) {
        int a = onnx_axis(c, axes[i], r, "axis");
        if (a < 0) return CN_EINVAL;
        drop[a] = true;
    }
    cn_tensor *y = x;
    for (int a = r - 1; a >= 0; a--)
        if (drop[a]) y = cn_squeeze(y, a);
    DONE(y);
}

H(h_unsqueeze) {
    UNUSED;
    cn_tensor *x = in[0];
    int64_t axes[MAXV];
    bool given;
    int k = axes_of(c, n, in, nin, 1, 13, axes, &given);
    if (k < 0) return k;
    if (!given) return onnx_bad(c, "no axes");
    int r = cn_ndim(x) + k;
    if (r > CN_MAX_DIMS) return onnx_unsup(c, "rank %d (at most %d)", r, CN_MAX_DIMS);
    bool add[CN_MAX_DIMS] = {0};
    for (int i = 0; i < k; i++) {
        int a = onnx_axis(c, axes[i], r, "axis");
        if (a < 0) return CN_EINVAL;
        if (add[a]) return onnx_bad(c, "axis %d repeated", a);
        add[a] = true;
    }
    cn_tensor *y = x;
    for (int a = 0; a < r; a++)
        if (add[a]) y = cn_unsqueeze(y, a);
    DONE(y);
}

H(h_concat) {
    UNUSED;
    int r = cn_ndim(in[0]);
    const Onnx__AttributeProto *ax = onnx_attr(n, "axis");
    if (!ax && c->opset_of_node >= 4) return onnx_bad(c, "no axis");
    int axis = onnx_axis(c, ax ? ax->i : 1, r, "axis");
    if (axis < 0) return CN_EINVAL;
    DONE(cn_concat(in, nin, axis));
}

H(h_split) {
    UNUSED;
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    int axis = onnx_axis(c, onnx_attr_int(n, "axis", 0), r, "axis");
    if (axis < 0) return CN_EINVAL;
    int64_t sizes[MAXV];
    int k = -1;
    if (c->opset_of_node < 13) {
        k = onnx_attr_ints(n, "split", sizes, MAXV);
        if (k == -2) return onnx_bad(c, "too many parts");
        if (k < 0 && nin > 1 && in[1]) k = onnx_const_ints(c, in[1], "split", sizes, MAXV);
    } else if (nin > 1 && in[1]) {
        k = onnx_const_ints(c, in[1], "split", sizes, MAXV);
        if (k < 0) return k;
    }
    int64_t d = cn_dim(x, axis);
    /* Opset 18's num_outputs: parts of ceil(d / num_outputs), the last one
     * what remains. */
    int64_t parts = onnx_attr_int(n, "num_outputs", -1);
    if (k < 0 && parts >= 0) {
        if (parts != nout) return onnx_bad(c, "num_outputs %" PRId64 " for %d outputs", parts, nout);
        if (d < 0) return onnx_unsup(c, "a split of an axis of unknown size");
        int64_t chunk = parts ? (d + parts - 1) / parts : 0;
        if (parts == 0 || chunk * (parts - 1) > d)
            return onnx_bad(c, "an axis of size %" PRId64 " does not split into %" PRId64
                               " parts of %" PRId64 " and a last one of what is left", d, parts, chunk);
        k = nout;
        for (int i = 0; i < k; i++) sizes[i] = i < k - 1 ? chunk : d - chunk * (k - 1);
    } else if (k < 0) {
        if (d < 0) return onnx_unsup(c, "an equal split of an axis of unknown size");
        if (d % nout) return onnx_bad(c, "axis of size %" PRId64 " does not split into %d equal parts", d, nout);
        k = nout;
        for (int i = 0; i < k; i++) sizes[i] = d / nout;
    }
    if (k != nout) return onnx_bad(c, "%d parts for %d outputs", k, nout);
    return cn_split(x, axis, sizes, k, out) < 0 ? CN_EINVAL : 0;
}

H(h_slice) {
    UNUSED;
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    int64_t starts[MAXV], ends[MAXV], axes[MAXV], steps[MAXV];
    int ns, ne, na = -1, nst = -1;
    if (c->opset_of_node < 10) {
        ns = onnx_attr_ints(n, "starts", starts, MAXV);
        ne = onnx_attr_ints(n, "ends", ends, MAXV);
        na = onnx_attr_ints(n, "axes", axes, MAXV);
        if (ns < 0 || ne < 0) return onnx_bad(c, "starts and ends are required");
    } else {
        if ((ns = onnx_const_ints(c, in[1], "starts", starts, MAXV)) < 0) return ns;
        if ((ne = onnx_const_ints(c, in[2], "ends", ends, MAXV)) < 0) return ne;
        if (nin > 3 && in[3] && (na = onnx_const_ints(c, in[3], "axes", axes, MAXV)) < 0) return na;
        if (nin > 4 && in[4] && (nst = onnx_const_ints(c, in[4], "steps", steps, MAXV)) < 0) return nst;
    }
    if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return onnx_bad(c, "starts, ends, axes and steps differ in length");
    cn_tensor *y = x;
    for (int i = 0; i < ns; i++) {
        int a = onnx_axis(c, na >= 0 ? axes[i] : i, r, "axis");
        if (a < 0) return CN_EINVAL;
        int64_t st = nst >= 0 ? steps[i] : 1;
        if (st == 0) return onnx_bad(c, "step 0");
        int64_t s = starts[i], e = ends[i], dim = cn_dim(x, a);
        if (dim < 0) {
            /* Forward slices from a start counted from the front need no
             * size: to the end (an end past any size), or a fixed window,
             * checked at run time against the axis (ONNX would clamp a
             * window longer than the axis; this fails instead). */
            if (st != 1 || s < 0 || e < s)
                return onnx_unsup(c, "this slice of an axis of unknown size (give concrete input "
                                     "shapes)");
            y = e >= INT32_MAX ? cn_slice(y, a, s, CN_END, 1) : cn_narrow(y, a, s, e - s);
            continue;
        }
        /* ONNX's clamping, done here so that cn_slice sees plain bounds;
         * an end of -1 after clamping a backward slice means "through 0". */
        if (s < 0) s += dim;
        if (e < 0 && e > INT64_MIN + dim) e += dim;
        else if (e < 0) e = -1;
        if (st > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            e = e < 0 ? 0 : e > dim ? dim : e;
            if (e < s) e = s;
        } else {
            s = s < 0 ? -1 : s > dim - 1 ? dim - 1 : s;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            if (e > s) e = s;
        }
        /* An empty result as narrow(0, 0): slice's inference rewrites an
         * empty slice's bounds so that running it again is not empty. */
        if ((st < 0 && (s < 0 || e == s)) || (st > 0 && e == s)) y = cn_narrow(y, a, 0, 0);
        else y = cn_slice(y, a, s, st < 0 && e < 0 ? CN_BEGIN : e, st);
    }
    DONE(y);
}

/* Indices may be negative (counting from the end of the axis). */
static cn_tensor *wrap_index(cn_tensor *idx, int64_t dim) {
    cn_tensor *z = cn_scalar(cn_tensor_dtype(idx), 0);
    return cn_where(cn_lt(idx, z), cn_add_scalar(idx, (double)dim), idx);
}

H(h_gather) {
    UNUSED;
    cn_tensor *x = in[0], *idx = in[1];
    int r = cn_ndim(x);
    int axis = onnx_axis(c, onnx_attr_int(n, "axis", 0), r, "axis");
    if (axis < 0) return CN_EINVAL;
    int64_t dim = cn_dim(x, axis);
    if (dim < 0) return onnx_unsup(c, "gathering along an axis of unknown size");
    int ri = cn_ndim(idx);
    if (r - 1 + ri > CN_MAX_DIMS) return onnx_unsup(c, "result rank above %d", CN_MAX_DIMS);
    int64_t shp[CN_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < axis; i++) shp[k++] = cn_dim(x, i);
    for (int i = 0; i < ri; i++) shp[k++] = cn_dim(idx, i);
    for (int i = axis + 1; i < r; i++) shp[k++] = cn_dim(x, i);
    int unknown = 0;
    for (int i = 0; i < k; i++) unknown += shp[i] < 0;
    if (unknown > 1) return onnx_unsup(c, "more than one unknown size in the result");
    cn_tensor *flat = cn_reshape(wrap_index(idx, dim), 1, (int64_t[]){-1});
    DONE(cn_reshape(cn_index_select(x, axis, flat), k, shp));
}

H(h_gather_elements) {
    UNUSED;
    cn_tensor *x = in[0], *idx = in[1];
    int axis = onnx_axis(c, onnx_attr_int(n, "axis", 0), cn_ndim(x), "axis");
    if (axis < 0) return CN_EINVAL;
    int64_t dim = cn_dim(x, axis);
    if (dim < 0) return onnx_unsup(c, "gathering along an axis of unknown size");
    DONE(cn_gather(x, axis, cn_cast(wrap_index(idx, dim), CN_I64)));
}

H(h_expand) {
    UNUSED;
    cn_tensor *x = in[0];
    int64_t shape[MAXV];
    int k = onnx_const_ints(c, in[1], "shape", shape, MAXV);
    if (k < 0) return k;
    int r = cn_ndim(x), ro = k > r ? k : r;
    if (ro > CN_MAX_DIMS) return onnx_unsup(c, "rank %d", ro);
    int64_t o[CN_MAX_DIMS];
    /* Both ways: a 1 in the shape keeps the input's size. */
    for (int i = 0; i < ro; i++) {
        int ix = i - (ro - r), is = i - (ro - k);
        int64_t dx = ix >= 0 ? cn_dim(x, ix) : 1, ds = is >= 0 ? shape[is] : 1;
        if (ds == 1) o[i] = dx;
        else if (dx == 1 || dx == ds || dx < 0) o[i] = ds;
        else return onnx_bad(c, "cannot expand size %" PRId64 " to %" PRId64, dx, ds);
    }
    DONE(cn_expand(x, ro, o));
}

H(h_shape) {
    UNUSED;
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    int64_t s = onnx_attr_int(n, "start", 0), e = onnx_attr_int(n, "end", r);
    if (s < 0) s += r;
    if (e < 0) e += r;
    s = s < 0 ? 0 : s > r ? r : s;
    e = e < 0 ? 0 : e > r ? r : e;
    int64_t v[CN_MAX_DIMS];
    int k = 0;
    for (int64_t i = s; i < e; i++) {
        v[k] = cn_dim(x, (int)i);
        if (v[k++] < 0)
            return onnx_unsup(c, "the shape of a tensor with unknown sizes (give concrete input shapes)");
    }
    DONE(onnx_i64_vec(k, v));
}

H(h_size) {
    UNUSED;
    if (!known(in[0])) return onnx_unsup(c, "the size of a tensor with unknown sizes");
    DONE(cn_scalar(CN_I64, (double)cn_numel(in[0])));
}

H(h_constant_of_shape) {
    UNUSED;
    int64_t shape[MAXV];
    int k = onnx_const_ints(c, in[0], "shape", shape, MAXV);
    if (k < 0) return k;
    if (k > CN_MAX_DIMS) return onnx_unsup(c, "rank %d", k);
    if (onnx_check_size(c, k, shape) < 0) return CN_EINVAL;
    const Onnx__AttributeProto *a = onnx_attr(n, "value");
    cn_dtype dt = CN_F32;
    double v = 0;
    if (a && a->t) {
        cn_tensor *t = onnx_tensor_from_proto(a->t, c->base_dir);
        if (!t) return CN_EUNSUPPORTED;
        if (cn_numel(t) != 1) return onnx_bad(c, "value must have one element");
        dt = cn_tensor_dtype(t);
        v = cn_item(t);
    }
    DONE(cn_full(dt, k, shape, v));
}

H(h_constant) {
    UNUSED;
    const Onnx__AttributeProto *a;
    if ((a = onnx_attr(n, "value")) && a->t) DONE(onnx_tensor_from_proto(a->t, c->base_dir));
    if ((a = onnx_attr(n, "value_float"))) DONE(cn_scalar(CN_F32, a->f));
    if ((a = onnx_attr(n, "value_int"))) DONE(cn_scalar(CN_I64, (double)a->i));
    if ((a = onnx_attr(n, "value_floats")))
        DONE(cn_from_data(CN_F32, 1, (int64_t[]){(int64_t)a->n_floats}, a->floats));
    if ((a = onnx_attr(n, "value_ints")))
        DONE(cn_from_data(CN_I64, 1, (int64_t[]){(int64_t)a->n_ints}, a->ints));
    return onnx_bad(c, "no value");
}

H(h_range) {
    UNUSED;
    double s, l, d;
    if (onnx_const_scalar(c, in[0], "start", &s) < 0 || onnx_const_scalar(c, in[1], "limit", &l) < 0 ||
        onnx_const_scalar(c, in[2], "delta", &d) < 0)
        return CN_EUNSUPPORTED;
    /* A NaN compares false with everything, so it would give an empty
     * range, and a count past 2^63 cannot be converted: both refused. */
    if (!isfinite(s) || !isfinite(l) || !isfinite(d))
        return onnx_bad(c, "start %g, limit %g and delta %g must be finite", s, l, d);
    if (d == 0) return onnx_bad(c, "delta is 0");
    double cnt = ceil((l - s) / d);
    if (!onnx_fits_i64(cnt)) return onnx_budget_exceeded(c);
    int64_t k = cnt > 0 ? (int64_t)cnt : 0;
    if (onnx_check_size(c, 1, &k) < 0) return CN_EINVAL;
    cn_dtype dt = cn_tensor_dtype(in[0]);
    cn_tensor *y = cn_empty(CN_F64, 1, (int64_t[]){k});
    if (!y) return CN_ENOMEM;
    double *p = cn_data(y);
    /* Each element as start + i * delta in the input's dtype, as the
     * reference computes. */
    for (int64_t i = 0; i < k; i++) p[i] = dt == CN_F32 ? (double)((float)s + (float)i * (float)d) : s + (double)i * d;
    DONE(cn_cast(y, dt));
}

H(h_tile) {
    UNUSED;
    cn_tensor *x = in[0];
    int64_t rep[MAXV];
    int k = onnx_const_ints(c, in[1], "repeats", rep, MAXV);
    if (k < 0) return k;
    int r = cn_ndim(x);
    if (k != r) return onnx_bad(c, "%d repeats for rank %d", k, r);
    if (2 * r > CN_MAX_DIMS) return onnx_unsup(c, "rank %d (at most %d)", r, CN_MAX_DIMS / 2);
    if (!known(x)) return onnx_unsup(c, "tiling a tensor with unknown sizes");
    /* [a, b] -> [1, a, 1, b] -> expand [ra, a, rb, b] -> [ra a, rb b]. */
    int64_t s1[CN_MAX_DIMS], s2[CN_MAX_DIMS], s3[CN_MAX_DIMS];
    for (int i = 0; i < r; i++) {
        if (rep[i] < 0) return onnx_bad(c, "negative repeat");
        s1[2 * i] = 1;
        s1[2 * i + 1] = cn_dim(x, i);
        s2[2 * i] = rep[i];
        s2[2 * i + 1] = cn_dim(x, i);
    }
    if (onnx_check_size(c, 2 * r, s2) < 0) return CN_EINVAL;
    for (int i = 0; i < r; i++) /* an empty tensor passes the check with any other repeat */
        if (__builtin_mul_overflow(rep[i], cn_dim(x, i), &s3[i]))
            return onnx_bad(c, "repeat %" PRId64 " of axis %d overflows", rep[i], i);
    DONE(cn_reshape(cn_expand(cn_reshape(x, 2 * r, s1), 2 * r, s2), r, s3));
}

H(h_pad) {
    UNUSED;
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    int64_t pads[MAXV];
    int k;
    double value = 0;
    char mb[32];
    const char *mode = onnx_attr_str(n, "mode", "constant", mb, sizeof mb);
    if (c->opset_of_node < 11) {
        k = onnx_attr_ints(n, c->opset_of_node < 2 ? "paddings" : "pads", pads, MAXV);
        if (k < 0) return onnx_bad(c, "no pads");
        value = onnx_attr_float(n, "value", 0.0);
    } else {
        k = onnx_const_ints(c, in[1], "pads", pads, MAXV);
        if (k < 0) return k;
        if (nin > 2 && in[2] && onnx_const_scalar(c, in[2], "constant_value", &value) < 0)
            return CN_EUNSUPPORTED;
    }
    if (nin > 3 && in[3]) {
        /* Opset 18: pads for these axes only (begins, then ends). */
        int64_t axes[MAXV], full[MAXV] = {0};
        int na = onnx_const_ints(c, in[3], "axes", axes, MAXV);
        if (na < 0) return na;
        if (k != 2 * na) return onnx_bad(c, "%d pads for %d axes", k, na);
        for (int i = 0; i < na; i++) {
            int a = onnx_axis(c, axes[i], r, "axis");
            if (a < 0) return CN_EINVAL;
            full[a] = pads[i];
            full[r + a] = pads[na + i];
        }
        memcpy(pads, full, sizeof(int64_t) * (size_t)(2 * r));
        k = 2 * r;
    }
    if (k != 2 * r) return onnx_bad(c, "%d pads for rank %d", k, r);
    if (!strcmp(mode, "wrap")) {
        /* Opset 19's wrap (PyTorch's circular padding): each axis extended
         * by its own last and first elements, as concatenated slices. */
        cn_tensor *y = x;
        for (int i = 0; i < r && y; i++) {
            int64_t b = pads[i], e = pads[r + i], d = cn_dim(x, i);
            if (!b && !e) continue;
            if (b < 0 || e < 0 || d < 0 || b > d || e > d)
                return onnx_unsup(c, "wrap pads (%" PRId64 ", %" PRId64 ") on an axis of size %" PRId64
                                     " (0 to the size are supported)", b, e, d);
            cn_tensor *parts[3] = {cn_slice(y, i, d - b, CN_END, 1), y, cn_slice(y, i, 0, e, 1)};
            y = cn_concat(parts + !b, 3 - !b - !e, i);
        }
        DONE(y);
    }
    cn_pad_mode m;
    if (!strcmp(mode, "constant")) m = CN_PAD_CONSTANT;
    else if (!strcmp(mode, "reflect")) m = CN_PAD_REFLECT;
    else if (!strcmp(mode, "edge")) m = CN_PAD_REPLICATE;
    else return onnx_unsup(c, "mode '%s'", mode);
    /* ONNX: all begins then all ends, first axis first; Chutney: (before,
     * after) pairs from the last axis. */
    int64_t p[2 * CN_MAX_DIMS];
    for (int i = 0; i < r; i++) {
        p[2 * i] = pads[r - 1 - i];
        p[2 * i + 1] = pads[2 * r - 1 - i];
    }
    DONE(cn_pad(x, p, 2 * r, m, value));
}

H(h_depth_to_space) {
    UNUSED;
    cn_tensor *x = in[0];
    if (cn_ndim(x) != 4 || !known(x)) return onnx_unsup(c, "input must be 4-D with known sizes");
    int64_t b = onnx_attr_int(n, "blocksize", 0), N = cn_dim(x, 0), C = cn_dim(x, 1),
            Hh = cn_dim(x, 2), W = cn_dim(x, 3);
    if (b <= 0 || b > ONNX_MAX_WINDOW || C % (b * b) || Hh > CN_MAX_NUMEL / b || W > CN_MAX_NUMEL / b)
        return onnx_bad(c, "blocksize %" PRId64 " for %" PRId64 " channels", b, C);
    char mb[8];
    const char *mode = onnx_attr_str(n, "mode", "DCR", mb, sizeof mb);
    cn_tensor *y;
    if (!strcmp(mode, "DCR")) {
        y = cn_reshape(x, 6, (int64_t[]){N, b, b, C / (b * b), Hh, W});
        y = cn_permute(y, (int[]){0, 3, 4, 1, 5, 2}, 6);
    } else if (!strcmp(mode, "CRD")) {
        y = cn_reshape(x, 6, (int64_t[]){N, C / (b * b), b, b, Hh, W});
        y = cn_permute(y, (int[]){0, 1, 4, 2, 5, 3}, 6);
    } else return onnx_unsup(c, "mode '%s'", mode);
    DONE(cn_reshape(y, 4, (int64_t[]){N, C / (b * b), Hh * b, W * b}));
}

H(h_space_to_depth) {
    UNUSED;
    cn_tensor *x = in[0];
    if (cn_ndim(x) != 4 || !known(x)) return onnx_unsup(c, "input must be 4-D with known sizes");
    int64_t b = onnx_attr_int(n, "blocksize", 0), N = cn_dim(x, 0), C = cn_dim(x, 1),
            Hh = cn_dim(x, 2), W = cn_dim(x, 3);
    if (b <= 0 || b > ONNX_MAX_WINDOW || Hh % b || W % b || C > CN_MAX_NUMEL / (b * b))
        return onnx_bad(c, "blocksize %" PRId64, b);
    cn_tensor *y = cn_reshape(x, 6, (int64_t[]){N, C, Hh / b, b, W / b, b});
    y = cn_permute(y, (int[]){0, 3, 5, 1, 2, 4}, 6);
    DONE(cn_reshape(y, 4, (int64_t[]){N, C * b * b, Hh / b, W / b}));
}

H(h_trilu) {
    UNUSED;
    double k = 0;
    if (nin > 1 && in[1] && onnx_const_scalar(c, in[1], "k", &k) < 0) return CN_EUNSUPPORTED;
    if (!onnx_fits_i64(k)) return onnx_bad(c, "k is %g", k);
    if (onnx_attr_int(n, "upper", 1)) DONE(cn_triu(in[0], (int64_t)k));
    DONE(cn_tril(in[0], (int64_t)k));
}

H(h_eye_like) {
    UNUSED;
    cn_tensor *x = in[0];
    if (cn_ndim(x) != 2 || !known(x)) return onnx_unsup(c, "input must be 2-D with known sizes");
    int64_t k = onnx_attr_int(n, "k", 0), R = cn_dim(x, 0), C = cn_dim(x, 1);
    /* Beyond either edge the result is all zeros: clamped, i + k cannot overflow. */
    k = k < -R ? -R : k > C ? C : k;
    cn_dtype dt = cn_tensor_dtype(x);
    const Onnx__AttributeProto *a = onnx_attr(n, "dtype");
    if (a) {
        int d = onnx_dtype((int32_t)a->i);
        if (d < 0) return onnx_unsup(c, "dtype %s", onnx_dtype_name((int32_t)a->i));
        dt = (cn_dtype)d;
    }
    if (onnx_check_size(c, 2, (int64_t[]){R, C}) < 0) return CN_EINVAL;
    cn_tensor *y = cn_zeros(CN_F64, 2, (int64_t[]){R, C});
    if (!y) return CN_ENOMEM;
    double *p = cn_data(y);
    for (int64_t i = 0; i < R; i++)
        if (i + k >= 0 && i + k < C) p[i * C + i + k] = 1;
    DONE(cn_cast(y, dt));
}

H(h_one_hot) {
    UNUSED;
    cn_tensor *idx = in[0], *vals = in[2];
    double depth;
    if (onnx_const_scalar(c, in[1], "depth", &depth) < 0) return CN_EUNSUPPORTED;
    if (!(depth >= 1 && depth < 0x1p62)) return onnx_bad(c, "depth %g (must be a positive count)", depth);
    int64_t d = (int64_t)depth;
    if (onnx_check_size(c, 1, &d) < 0) return CN_EINVAL;
    int r = cn_ndim(idx) + 1;
    if (r > CN_MAX_DIMS) return onnx_unsup(c, "rank %d", r);
    int axis = onnx_axis(c, onnx_attr_int(n, "axis", -1), r, "axis");
    if (axis < 0) return CN_EINVAL;
    if (cn_numel(vals) != 2) return onnx_bad(c, "values must have two elements");
    cn_tensor *i64 = cn_cast(idx, CN_F64);
    i64 = cn_where(cn_lt(i64, cn_scalar(CN_F64, 0)), cn_add_scalar(i64, (double)d), i64);
    int64_t shp[CN_MAX_DIMS];
    for (int i = 0; i < r; i++) shp[i] = i == axis ? d : 1;
    cn_tensor *ar = cn_reshape(cn_arange(0, (double)d, 1, CN_F64), r, shp);
    cn_tensor *hit = cn_eq(cn_unsqueeze(i64, axis), ar);
    cn_tensor *off = cn_narrow(cn_reshape(vals, 1, (int64_t[]){2}), 0, 0, 1);
    cn_tensor *on = cn_narrow(cn_reshape(vals, 1, (int64_t[]){2}), 0, 1, 1);
    DONE(cn_where(hit, cn_squeeze(on, 0), cn_squeeze(off, 0)));
}

H(h_cumsum) {
    UNUSED;
    cn_tensor *x = in[0];
    double ax;
    if (onnx_const_scalar(c, in[1], "axis", &ax) < 0) return CN_EUNSUPPORTED;
    if (!onnx_fits_i64(ax)) return onnx_bad(c, "axis is %g", ax);
    int axis = onnx_axis(c, (int64_t)ax, cn_ndim(x), "axis");
    if (axis < 0) return CN_EINVAL;
    bool rev = onnx_attr_int(n, "reverse", 0), excl = onnx_attr_int(n, "exclusive", 0);
    cn_dtype dt = cn_tensor_dtype(x);
    cn_tensor *y = rev ? cn_slice(x, axis, CN_END, CN_BEGIN, -1) : x;
    int64_t dim = cn_dim(x, axis);
    if (excl) {
        if (dim < 0) return onnx_unsup(c, "exclusive sums over an axis of unknown size");
        /* Shift by one: a zero first, the last element dropped. */
        int np = 2 * (cn_ndim(x) - axis);
        int64_t p[2 * CN_MAX_DIMS] = {0};
        p[np - 2] = 1;
        p[np - 1] = -1;
        y = cn_pad(y, p, np, CN_PAD_CONSTANT, 0);
    }
    y = cn_cumsum(y, axis);
    if (rev) y = cn_slice(y, axis, CN_END, CN_BEGIN, -1);
    DONE(cn_cast(y, dt));
}

#define LIM_CONST "shape-like inputs must be constants at load time"

const onnx_op_entry cn_onnx_ops_shape[] = {
    {"Reshape", h_reshape, "shape,allowzero,consumed_inputs", 1, 2, 1, LIM_CONST},
    {"Flatten", h_flatten, "axis", 1, 1, 1, ""},
    {"Transpose", h_transpose, "perm", 1, 1, 1, ""},
    {"Squeeze", h_squeeze, "axes", 1, 2, 1, LIM_CONST},
    {"Unsqueeze", h_unsqueeze, "axes", 1, 2, 1, LIM_CONST},
    {"Concat", h_concat, "axis", 1, ONNX_MAX_INPUTS, 1, ""},
    {"Split", h_split, "axis,split,num_outputs", 1, 2, 16, LIM_CONST "; at most 16 outputs"},
    {"Slice", h_slice, "starts,ends,axes", 1, 5, 1, LIM_CONST},
    {"Gather", h_gather, "axis", 2, 2, 1, ""},
    {"GatherElements", h_gather_elements, "axis", 2, 2, 1, ""},
    {"Expand", h_expand, "", 2, 2, 1, LIM_CONST},
    {"Shape", h_shape, "start,end", 1, 1, 1, "the sizes must be known at load time"},
    {"Size", h_size, "", 1, 1, 1, "the sizes must be known at load time"},
    {"ConstantOfShape", h_constant_of_shape, "value", 1, 1, 1, LIM_CONST},
    {"Constant", h_constant, "value,value_float,value_floats,value_int,value_ints", 0, 0, 1,
     "no string or sparse values"},
    {"Range", h_range, "", 3, 3, 1, "start, limit and delta must be constants"},
    {"Tile", h_tile, "", 2, 2, 1, LIM_CONST "; rank at most 4; known sizes"},
    {"Pad", h_pad, "mode,pads,paddings,value", 1, 4, 1, LIM_CONST "; modes constant, reflect, edge, wrap (pads of 0 to the size)"},
    {"DepthToSpace", h_depth_to_space, "blocksize,mode", 1, 1, 1, "4-D, known sizes"},
    {"SpaceToDepth", h_space_to_depth, "blocksize", 1, 1, 1, "4-D, known sizes"},
    {"Trilu", h_trilu, "upper", 1, 2, 1, "k must be a constant"},
    {"EyeLike", h_eye_like, "dtype,k", 1, 1, 1, "known sizes"},
    {"OneHot", h_one_hot, "axis", 3, 3, 1, "depth must be a constant"},
    {"CumSum", h_cumsum, "exclusive,reverse", 2, 2, 1, "axis must be a constant"},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

#endif /* CN_HAVE_ONNX */
