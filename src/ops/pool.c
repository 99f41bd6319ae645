/* Pooling (NCHW): max_pool2d, avg_pool2d and adaptive_avg_pool2d with
 * PyTorch's semantics (output sizes, ceil_mode, which taps an average
 * counts), and the ops their gradients are made of. The kernels are the
 * backends' (src/backend/cpu/pool.c for the CPU).
 *
 * Attributes:
 *   max_pool2d, max_pool2d_indices: list = [kh, kw, sh, sw, ph, pw, dh, dw],
 *     i[0] = ceil_mode
 *   avg_pool2d: list = [kh, kw, sh, sw, ph, pw], i[0] = ceil_mode,
 *     i[1] = count_include_pad, i[2] = divisor_override (0: none)
 *   avg_pool2d_backward: avg_pool2d's, with [H, W] of the input appended
 *   adaptive_avg_pool2d: list = [OH, OW]
 *   adaptive_avg_pool2d_backward: list = [H, W] of the input
 *
 * Gradients: max pooling sends each output's gradient to the position of
 * its window's maximum (max_pool2d_indices, flat in the plane) with
 * scatter_add, and its tangent is a gather from there; the two averages are
 * linear, each the adjoint of its backward op, so their rules are each
 * other. */
#include "op.h"

#include <inttypes.h>
#include <stdio.h>

static char *shp(char *buf, size_t n, const cn_tensor *t) {
    return cn_fmt_shape(buf, n, t->ndim, t->shape);
}

static int check_x(const cn_op_def *op, const cn_tensor *x, const char *name) {
    char b[160];
    if (x->dtype != CN_F32 && x->dtype != CN_F64)
        return cn_failc(CN_EINVAL, "%s: %s is %s; pooling needs a float tensor (f32, f64, f16, "
                                   "bf16)",
                        op->name, name, cn_dtype_name((cn_dtype)x->dtype));
    if (x->ndim != 4)
        return cn_failc(CN_EINVAL, "%s: %s must be 4-D [N, C, H, W], got %s", op->name, name,
                        shp(b, sizeof b, x));
    for (int d = 1; d < 4; d++)
        if (x->shape[d] == 0)
            return cn_failc(CN_EINVAL, "%s: %s %s has an empty channel or spatial axis", op->name,
                            name, shp(b, sizeof b, x));
    return CN_OK;
}

/* PyTorch's pooling_output_shape: floor, or ceil with the last window
 * starting inside the input or its left padding; -1 when in is unknown.
 * k, s, d >= 1 and 0 <= p <= k / 2 are checked before; false when the
 * arithmetic would overflow int64 (a dilation of 2^62, say). */
static bool pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode,
                     int64_t *out) {
    if (in < 0) {
        *out = -1;
        return true;
    }
    int64_t span, num;
    if (__builtin_mul_overflow(d, k - 1, &span) || __builtin_add_overflow(in, 2 * p, &num) ||
        __builtin_add_overflow(num - span - 1, ceil_mode ? s - 1 : 0, &num))
        return false;
    int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (ceil_mode && (o - 1) * s >= in + p) o--;
    *out = o;
    return true;
}

/* The first output along an axis whose window covers only padding, or -1.
 * A window starting inside the input covers it, and starts only grow, so
 * of those starting past the end (ceil mode) the last decides. A window
 * starting at st < 0 covers the input when its first tap at or past 0
 * (tap i0 = ceil(-st / d)) is one of its k and lands inside: with in >= d
 * it always lands inside and i0 only falls as o grows, so window 0
 * decides; with in < d a window of k >= 3 taps spans more than the padded
 * input and so only a few outputs exist. The loop therefore looks at a
 * few windows, not at every tap of the padding (a kernel of 2^40 once
 * made it run for an hour). */
static int64_t padding_only_window(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p,
                                   int64_t d) {
    int64_t left = in >= d ? 1 : out;
    for (int64_t o = 0; o < out && o < left && o * s < p; o++) {
        int64_t neg = p - o * s, r = neg % d;
        int64_t i0 = neg / d + (r != 0), first = r ? d - r : 0; /* first = st + i0 * d */
        if (i0 >= k || first >= in) return o;
    }
    int64_t past = (in + p) / s + ((in + p) % s != 0); /* the first start at or past the end */
    return past < out ? past : -1;
}

/* Window parameters list[0..8) = kernel, stride, padding, dilation pairs
 * (dilation absent for avg_pool2d: nwin 6), checked; the output size into
 * m->shape[2..3] for input spatial size h x w. */
static int window_infer(const cn_op_def *op, const cn_tensor *x, const cn_attrs *a, int nwin,
                        int64_t h, int64_t w, cn_meta *m) {
    if (a->nlist < nwin)
        return cn_failc(CN_EINVAL, "%s: expects %d window parameters, got %d", op->name, nwin,
                        (int)a->nlist);
    const int64_t *l = a->list;
    int64_t dh = nwin == 8 ? l[6] : 1, dw = nwin == 8 ? l[7] : 1;
    if (l[0] < 1 || l[1] < 1)
        return cn_failc(CN_EINVAL,
                        "%s: kernel size must be positive, got (%" PRId64 ", %" PRId64 ")",
                        op->name, l[0], l[1]);
    if (l[2] < 1 || l[3] < 1)
        return cn_failc(CN_EINVAL, "%s: stride must be positive, got (%" PRId64 ", %" PRId64 ")",
                        op->name, l[2], l[3]);
    if (dh < 1 || dw < 1)
        return cn_failc(CN_EINVAL, "%s: dilation must be positive, got (%" PRId64 ", %" PRId64 ")",
                        op->name, dh, dw);
    if (l[4] < 0 || l[5] < 0 || l[4] > l[0] / 2 || l[5] > l[1] / 2)
        return cn_failc(CN_EINVAL,
                        "%s: padding (%" PRId64 ", %" PRId64 ") must be between 0 and half the "
                        "kernel size (%" PRId64 ", %" PRId64 ")",
                        op->name, l[4], l[5], l[0], l[1]);
    bool ceil_mode = a->i[0] != 0;
    int64_t oh, ow;
    if (!pool_out(h, l[0], l[2], l[4], dh, ceil_mode, &oh) ||
        !pool_out(w, l[1], l[3], l[5], dw, ceil_mode, &ow)) {
        char b[160];
        return cn_failc(CN_EINVAL,
                        "%s: input %s with kernel (%" PRId64 ", %" PRId64 "), padding (%" PRId64
                        ", %" PRId64 ") and dilation (%" PRId64 ", %" PRId64
                        "): the output size overflows int64",
                        op->name, shp(b, sizeof b, x), l[0], l[1], l[4], l[5], dh, dw);
    }
    if ((h >= 0 && oh < 1) || (w >= 0 && ow < 1)) {
        char b[160];
        return cn_failc(CN_EINVAL,
                        "%s: input %s with kernel (%" PRId64 ", %" PRId64 "), padding (%" PRId64
                        ", %" PRId64 ") and dilation (%" PRId64 ", %" PRId64
                        ") gives output size %" PRId64 "x%" PRId64 ", which is too small",
                        op->name, shp(b, sizeof b, x), l[0], l[1], l[4], l[5], dh, dw, oh, ow);
    }
    /* A dilated window can fall wholly in the padding (PyTorch then returns
     * -inf and an index outside the plane); refused, as no gradient could
     * go anywhere. */
    int64_t in2[2] = {h, w}, out2[2] = {oh, ow};
    for (int ax = 0; ax < 2 && nwin == 8; ax++) {
        int64_t k = l[ax], s = l[2 + ax], p = l[4 + ax], d = l[6 + ax];
        int64_t o = in2[ax] >= 0 ? padding_only_window(in2[ax], out2[ax], k, s, p, d) : -1;
        if (o >= 0) {
            char b[160];
            return cn_failc(CN_EINVAL,
                            "%s: input %s: the window of output %s %" PRId64
                            " covers only padding (kernel %" PRId64 ", dilation %" PRId64
                            ", padding %" PRId64 ")",
                            op->name, shp(b, sizeof b, x), ax ? "column" : "row", o, k, d, p);
        }
    }
    m->shape[2] = oh;
    m->shape[3] = ow;
    return CN_OK;
}

static int window_op_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                           cn_meta *m, int nwin) {
    const cn_tensor *x = in[0];
    if (check_x(op, x, "x") < 0) return CN_EINVAL;
    if (a->nlist != nwin)
        return cn_failc(CN_EINVAL, "%s: expects %d window parameters, got %d", op->name, nwin,
                        (int)a->nlist);
    m->dtype = (cn_dtype)x->dtype;
    m->ndim = 4;
    m->shape[0] = x->shape[0];
    m->shape[1] = x->shape[1];
    return window_infer(op, x, a, nwin, x->shape[2], x->shape[3], m);
}

/* Flatten the two spatial axes: [N, C, H * W]. */
static cn_tensor *flat(cn_tensor *t) { return cn_flatten(t, 2, 3); }

/* ---- max_pool2d ---- */

static int max_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                     cn_meta *m) {
    if (window_op_infer(op, in, nin, a, m, 8) < 0) return CN_EINVAL;
    a->i[0] = a->i[0] != 0;
    return CN_OK;
}

static cn_tensor *max_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                          cn_tensor *g, int i) {
    cn_tensor *pair[2] = {in[0], g};
    return cn_op_apply(CN_OP_max_pool2d_backward, pair, 2, a);
}

static cn_tensor *max_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                          const cn_attrs *a, cn_tensor *out) {
    cn_tensor *x = in[0];
    cn_tensor *idx = cn_op_apply(CN_OP_max_pool2d_indices, &x, 1, a);
    cn_tensor *r = cn_gather(flat(tin[0]), 2, flat(idx));
    return cn_reshape(r, out->ndim, out->shape);
}

#define MAX_ATTRS                                                                                  \
    {{"kernel_stride_padding_dilation", CN_ATTR_INTS, 0, 0}, {"ceil_mode", CN_ATTR_BOOL, 0, 0}}

const cn_op_def cn_opdef_max_pool2d = {
    .name = "max_pool2d",
    .ninputs = 1,
    .attrs = MAX_ATTRS,
    .infer = max_infer,
    .vjp = max_vjp,
    .jvp = max_jvp,
    .onnx = "MaxPool",
    .doc = "y[n, c, h, w] = max over i, j of x[n, c, h sh - ph + i dh, w sw - pw + j dw] "
           "(padding is -inf); list = kernel, stride, padding, dilation (h, w pairs)",
    .grad_doc = "each output's gradient goes to the first maximum of its window in row-major "
                "order (a NaN counts as the maximum), as in PyTorch",
};

/* ---- max_pool2d_backward: x, dy [N, C, OH, OW] -> dx: dy added at each
 * window's maximum of x (one pass; the indices are not kept) ---- */

static int maxb_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                      cn_meta *m) {
    const cn_tensor *x = in[0], *dy = in[1];
    if (max_infer(op, in, 1, a, m) < 0 || check_x(op, dy, "dy") < 0) return CN_EINVAL;
    if (dy->dtype != x->dtype)
        return cn_failc(CN_EINVAL, "%s: x is %s but dy is %s", op->name,
                        cn_dtype_name((cn_dtype)x->dtype), cn_dtype_name((cn_dtype)dy->dtype));
    for (int d = 0; d < 4; d++)
        if (dy->shape[d] >= 0 && m->shape[d] >= 0 && dy->shape[d] != m->shape[d]) {
            char b1[160], b2[160];
            return cn_failc(CN_EINVAL, "%s: dy %s does not match max_pool2d's output %s", op->name,
                            shp(b1, sizeof b1, dy), cn_fmt_shape(b2, sizeof b2, 4, m->shape));
        }
    m->ndim = 4;
    memcpy(m->shape, x->shape, sizeof(int64_t) * 4);
    return CN_OK;
}

/* Linear in dy: its adjoint picks each output's maximum from gg (a gather
 * at the indices); in x it is piecewise constant. */
static cn_tensor *maxb_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                           cn_tensor *g, int i) {
    cn_tensor *x = in[0], *dy = in[1];
    if (i == 0) return cn_zeros_like_op(x);
    cn_tensor *idx = cn_op_apply(CN_OP_max_pool2d_indices, &x, 1, a);
    cn_tensor *r = cn_gather(flat(g), 2, flat(idx));
    return cn_reshape(r, dy->ndim, dy->shape);
}

static cn_tensor *maxb_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                           const cn_attrs *a, cn_tensor *out) {
    if (!tin[1]) return cn_zeros_like_op(out);
    cn_tensor *pair[2] = {in[0], tin[1]};
    return cn_op_apply(CN_OP_max_pool2d_backward, pair, 2, a);
}

const cn_op_def cn_opdef_max_pool2d_backward = {
    .name = "max_pool2d_backward",
    .ninputs = 2,
    .attrs = MAX_ATTRS,
    .infer = maxb_infer,
    .vjp = maxb_vjp,
    .jvp = maxb_jvp,
    .doc = "dx = dy added at the position of each max_pool2d window's maximum of x (inputs x, "
           "dy): max_pool2d's gradient",
    .grad_doc = "zero in x: the positions of the maxima are piecewise constant",
};

/* ---- max_pool2d_indices: where max_pool2d's maxima are (i64, ih W + iw) ---- */

static int idx_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                     cn_meta *m) {
    if (max_infer(op, in, nin, a, m) < 0) return CN_EINVAL;
    m->dtype = CN_I64;
    return CN_OK;
}

const cn_op_def cn_opdef_max_pool2d_indices = {
    .name = "max_pool2d_indices",
    .ninputs = 1,
    .flags = CN_OPF_NONDIFF,
    .attrs = MAX_ATTRS,
    .infer = idx_infer,
    .doc = "the flat position ih W + iw within its plane of each max_pool2d output's maximum "
           "(the first in row-major order; i64), as return_indices=True",
};

/* ---- avg_pool2d ---- */

static int avg_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                     cn_meta *m) {
    if (window_op_infer(op, in, nin, a, m, 6) < 0) return CN_EINVAL;
    if (a->i[2] < 0)
        return cn_failc(CN_EINVAL, "%s: divisor_override must be positive, got %" PRId64,
                        op->name, a->i[2]);
    a->i[0] = a->i[0] != 0;
    a->i[1] = a->i[1] != 0;
    return CN_OK;
}

static cn_tensor *avg_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                          cn_tensor *g, int i) {
    cn_attrs b = *a;
    b.nlist = 8;
    b.list[6] = in[0]->shape[2];
    b.list[7] = in[0]->shape[3];
    return cn_op_apply(CN_OP_avg_pool2d_backward, &g, 1, &b);
}

static cn_tensor *avg_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                          const cn_attrs *a, cn_tensor *out) {
    cn_tensor *t = tin[0];
    return cn_op_apply(CN_OP_avg_pool2d, &t, 1, a);
}

const cn_op_def cn_opdef_avg_pool2d = {
    .name = "avg_pool2d",
    .ninputs = 1,
    .attrs = {{"kernel_stride_padding", CN_ATTR_INTS, 0, 0},
              {"ceil_mode", CN_ATTR_BOOL, 0, 0},
              {"count_include_pad", CN_ATTR_BOOL, 1, 1},
              {"divisor_override", CN_ATTR_INT, 2, 0}},
    .infer = avg_infer,
    .vjp = avg_vjp,
    .jvp = avg_jvp,
    .onnx = "AveragePool",
    .doc = "y[n, c, h, w] = the sum of x over the window at (h sh - ph, w sw - pw), divided by "
           "divisor_override, or the window's size within the padded input "
           "(count_include_pad), or the number of taps inside x",
};

/* ---- avg_pool2d_backward: dy [N, C, OH, OW] -> dx [N, C, H, W] ---- */

static int avgb_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                      cn_meta *m) {
    const cn_tensor *dy = in[0];
    if (check_x(op, dy, "dy") < 0) return CN_EINVAL;
    if (a->nlist != 8 || a->list[6] < 1 || a->list[7] < 1)
        return cn_failc(CN_EINVAL, "%s: expects the window and a positive input size", op->name);
    m->dtype = (cn_dtype)dy->dtype;
    m->ndim = 4;
    m->shape[0] = dy->shape[0];
    m->shape[1] = dy->shape[1];
    if (window_infer(op, dy, a, 6, a->list[6], a->list[7], m) < 0) return CN_EINVAL;
    if ((dy->shape[2] >= 0 && dy->shape[2] != m->shape[2]) ||
        (dy->shape[3] >= 0 && dy->shape[3] != m->shape[3])) {
        char b[160];
        return cn_failc(CN_EINVAL,
                        "%s: dy %s does not match avg_pool2d's output %" PRId64 "x%" PRId64
                        " for an input of %" PRId64 "x%" PRId64,
                        op->name, shp(b, sizeof b, dy), m->shape[2], m->shape[3], a->list[6],
                        a->list[7]);
    }
    m->shape[2] = a->list[6];
    m->shape[3] = a->list[7];
    return CN_OK;
}

static cn_tensor *avgb_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                           cn_tensor *g, int i) {
    cn_attrs b = *a;
    b.nlist = 6;
    return cn_op_apply(CN_OP_avg_pool2d, &g, 1, &b);
}

static cn_tensor *avgb_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                           const cn_attrs *a, cn_tensor *out) {
    cn_tensor *t = tin[0];
    return cn_op_apply(CN_OP_avg_pool2d_backward, &t, 1, a);
}

const cn_op_def cn_opdef_avg_pool2d_backward = {
    .name = "avg_pool2d_backward",
    .ninputs = 1,
    .attrs = {{"kernel_stride_padding_input_size", CN_ATTR_INTS, 0, 0},
              {"ceil_mode", CN_ATTR_BOOL, 0, 0},
              {"count_include_pad", CN_ATTR_BOOL, 1, 1},
              {"divisor_override", CN_ATTR_INT, 2, 0}},
    .infer = avgb_infer,
    .vjp = avgb_vjp,
    .jvp = avgb_jvp,
    .doc = "the adjoint of avg_pool2d: each dy[n, c, h, w] / divisor added over its window",
};

/* ---- adaptive_avg_pool2d: list = [OH, OW] ---- */

static int check_size(const cn_op_def *op, const cn_attrs *a, const char *what) {
    if (a->nlist != 2 || a->list[0] < 1 || a->list[1] < 1)
        return cn_failc(CN_EINVAL, "%s: %s must be two positive sizes, got %s", op->name, what,
                        a->nlist == 2 ? "a non-positive one" : "another count");
    return CN_OK;
}

static int adaptive_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                          cn_meta *m) {
    const cn_tensor *x = in[0];
    if (check_x(op, x, "x") < 0 || check_size(op, a, "output size") < 0) return CN_EINVAL;
    m->dtype = (cn_dtype)x->dtype;
    m->ndim = 4;
    m->shape[0] = x->shape[0];
    m->shape[1] = x->shape[1];
    m->shape[2] = a->list[0];
    m->shape[3] = a->list[1];
    return CN_OK;
}

static cn_tensor *adaptive_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                               cn_tensor *g, int i) {
    cn_attrs b;
    memset(&b, 0, sizeof b);
    b.nlist = 2;
    b.list[0] = in[0]->shape[2];
    b.list[1] = in[0]->shape[3];
    return cn_op_apply(CN_OP_adaptive_avg_pool2d_backward, &g, 1, &b);
}

static cn_tensor *adaptive_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                               const cn_attrs *a, cn_tensor *out) {
    cn_tensor *t = tin[0];
    return cn_op_apply(CN_OP_adaptive_avg_pool2d, &t, 1, a);
}

const cn_op_def cn_opdef_adaptive_avg_pool2d = {
    .name = "adaptive_avg_pool2d",
    .ninputs = 1,
    .attrs = {{"output_size", CN_ATTR_INTS, 0, 0}},
    .infer = adaptive_infer,
    .vjp = adaptive_vjp,
    .jvp = adaptive_jvp,
    /* no ONNX op in general; GlobalAveragePool for an output of 1x1 */
    .doc = "y[n, c, i, j] = the mean of x[n, c] over rows [floor(i H / OH), ceil((i + 1) H / OH)) "
           "and the columns alike",
};

/* ---- adaptive_avg_pool2d_backward: dy [N, C, OH, OW] -> [N, C, H, W] ---- */

static int adaptiveb_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                           cn_meta *m) {
    const cn_tensor *dy = in[0];
    if (check_x(op, dy, "dy") < 0 || check_size(op, a, "input size") < 0) return CN_EINVAL;
    m->dtype = (cn_dtype)dy->dtype;
    m->ndim = 4;
    m->shape[0] = dy->shape[0];
    m->shape[1] = dy->shape[1];
    m->shape[2] = a->list[0];
    m->shape[3] = a->list[1];
    return CN_OK;
}

static cn_tensor *adaptiveb_vjp(cn_tensor *const *in, int nin, const cn_attrs *a,
                                cn_tensor *out, cn_tensor *g, int i) {
    cn_attrs b;
    memset(&b, 0, sizeof b);
    b.nlist = 2;
    b.list[0] = in[0]->shape[2];
    b.list[1] = in[0]->shape[3];
    return cn_op_apply(CN_OP_adaptive_avg_pool2d, &g, 1, &b);
}

static cn_tensor *adaptiveb_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                                const cn_attrs *a, cn_tensor *out) {
    cn_tensor *t = tin[0];
    return cn_op_apply(CN_OP_adaptive_avg_pool2d_backward, &t, 1, a);
}

const cn_op_def cn_opdef_adaptive_avg_pool2d_backward = {
    .name = "adaptive_avg_pool2d_backward",
    .ninputs = 1,
    .attrs = {{"input_size", CN_ATTR_INTS, 0, 0}},
    .infer = adaptiveb_infer,
    .vjp = adaptiveb_vjp,
    .jvp = adaptiveb_jvp,
    .doc = "the adjoint of adaptive_avg_pool2d: each dy[n, c, i, j] / (its window's size) "
           "added over its window",
};

/* ---- public functions ---- */

static cn_attrs pool_attrs(const cn_pool_opts *o, int nwin) {
    cn_attrs a;
    memset(&a, 0, sizeof a);
    a.nlist = nwin;
    for (int k = 0; k < 2; k++) {
        a.list[k] = o->kernel[k];
        a.list[2 + k] = o->stride[k] ? o->stride[k] : o->kernel[k];
        a.list[4 + k] = o->padding[k];
        if (nwin == 8) a.list[6 + k] = o->dilation[k] ? o->dilation[k] : 1;
    }
    a.i[0] = o->ceil_mode;
    a.i[1] = !o->exclude_pad;
    a.i[2] = o->divisor_override;
    return a;
}

/* An unbatched image [C, H, W] runs as a batch of one. */
static cn_tensor *run_pool(cn_op_id id, cn_tensor *x, const cn_attrs *a) {
    if (!x) return NULL;
    bool unbatched = x->ndim == 3;
    if (unbatched) x = cn_unsqueeze(x, 0);
    cn_tensor *y = cn_op_apply(id, &x, 1, a);
    return unbatched && y ? cn_squeeze(y, 0) : y;
}

static bool have_opts(const char *fn, const cn_pool_opts *o) {
    if (!o) cn_fail("%s: options with a kernel size are required", fn);
    return o != NULL;
}

cn_tensor *cn_max_pool2d(cn_tensor *x, const cn_pool_opts *opts) {
    if (!x || !have_opts("max_pool2d", opts)) return NULL;
    cn_attrs a = pool_attrs(opts, 8);
    return run_pool(CN_OP_max_pool2d, x, &a);
}

cn_tensor *cn_max_pool2d_indices(cn_tensor *x, const cn_pool_opts *opts) {
    if (!x || !have_opts("max_pool2d_indices", opts)) return NULL;
    cn_attrs a = pool_attrs(opts, 8);
    return run_pool(CN_OP_max_pool2d_indices, x, &a);
}

cn_tensor *cn_avg_pool2d(cn_tensor *x, const cn_pool_opts *opts) {
    if (!x || !have_opts("avg_pool2d", opts)) return NULL;
    cn_attrs a = pool_attrs(opts, 6);
    return run_pool(CN_OP_avg_pool2d, x, &a);
}

cn_tensor *cn_adaptive_avg_pool2d(cn_tensor *x, int64_t out_h, int64_t out_w) {
    cn_attrs a;
    memset(&a, 0, sizeof a);
    a.nlist = 2;
    a.list[0] = out_h;
    a.list[1] = out_w;
    return run_pool(CN_OP_adaptive_avg_pool2d, x, &a);
}
