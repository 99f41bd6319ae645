/* Convolutions (NCHW): conv2d, conv_transpose2d, and conv2d_weight_grad (the
 * weight gradient of conv2d, an op of its own so that gradients of
 * gradients stay convolutions), with PyTorch's semantics and shape checks.
 * conv1d is conv2d on a height-1 image. The kernels are the backends'
 * (src/backend/cpu/conv.c for the CPU).
 *
 * Attributes: list = [stride_h, stride_w, pad_h, pad_w, dilation_h,
 * dilation_w] (conv_transpose2d adds [output_padding_h, output_padding_w]),
 * i[0] = groups; conv2d_weight_grad also has i[1], i[2] = the kernel's
 * height and width.
 *
 * Gradients, for y = conv2d(x, w) + b (every rule is made of these ops, so
 * it is differentiable again):
 *   dx = conv_transpose2d(dy, w), output_padding making it x's size
 *   dw = conv2d_weight_grad(x, dy)
 *   db = sum of dy over N, H, W
 * conv_transpose2d is conv2d's adjoint in x, so its rules are the same three
 * read the other way; conv2d_weight_grad is bilinear in (x, dy), with
 * <conv2d_weight_grad(x, dy), G> = <conv2d(x, G), dy>. */
#include "op.h"

#include <inttypes.h>
#include <stdio.h>

enum { CONV_LIST = 6, CONVT_LIST = 8 };

/* The geometry of one application (a canonical list). */
typedef struct conv_params {
    int64_t sh, sw, ph, pw, dh, dw, oph, opw, groups;
} conv_params;

static conv_params params_of(const cn_attrs *a) {
    conv_params p = {a->list[0], a->list[1], a->list[2], a->list[3], a->list[4], a->list[5],
                     a->nlist >= CONVT_LIST ? a->list[6] : 0,
                     a->nlist >= CONVT_LIST ? a->list[7] : 0, a->i[0]};
    return p;
}

static char *shp(char *buf, size_t n, const cn_tensor *t) {
    return cn_fmt_shape(buf, n, t->ndim, t->shape);
}

/* Dtypes: every input float, all the same. f16/bf16 arrive as f32 but on
 * autocast's native path (the dispatcher widens them otherwise), whose
 * products take them as they are and return f32. */
static int check_dtypes(const cn_op_def *op, cn_tensor *const *in, int nin,
                        const char *const *names) {
    for (int k = 0; k < nin; k++) {
        cn_dtype d = (cn_dtype)in[k]->dtype;
        if (d != CN_F32 && d != CN_F64 && !cn_is_half(d))
            return cn_failc(CN_EINVAL, "%s: %s is %s; convolutions need float tensors (f32, f64, "
                                       "f16, bf16)",
                            op->name, names[k], cn_dtype_name(d));
        if (k > 0 && d != in[0]->dtype)
            return cn_failc(CN_EINVAL, "%s: %s is %s but %s is %s; they must have the same dtype",
                            op->name, names[0], cn_dtype_name((cn_dtype)in[0]->dtype), names[k],
                            cn_dtype_name(d));
    }
    return CN_OK;
}

static int check_rank(const cn_op_def *op, const cn_tensor *t, const char *name,
                      const char *layout) {
    if (t->ndim == 4) return CN_OK;
    char b[160];
    return cn_failc(CN_EINVAL, "%s: %s must be 4-D %s, got %s", op->name, name, layout,
                    shp(b, sizeof b, t));
}

static int check_params(const cn_op_def *op, const cn_attrs *a, int nlist) {
    if (a->nlist != nlist)
        return cn_failc(CN_EINVAL, "%s: expects %d window parameters, got %d", op->name, nlist,
                        (int)a->nlist);
    conv_params p = params_of(a);
    if (p.sh < 1 || p.sw < 1)
        return cn_failc(CN_EINVAL, "%s: stride must be positive, got (%" PRId64 ", %" PRId64 ")",
                        op->name, p.sh, p.sw);
    if (p.ph < 0 || p.pw < 0)
        return cn_failc(CN_EINVAL,
                        "%s: padding must be non-negative, got (%" PRId64 ", %" PRId64 ")",
                        op->name, p.ph, p.pw);
    if (p.dh < 1 || p.dw < 1)
        return cn_failc(CN_EINVAL, "%s: dilation must be positive, got (%" PRId64 ", %" PRId64 ")",
                        op->name, p.dh, p.dw);
    if (p.oph < 0 || p.opw < 0)
        return cn_failc(CN_EINVAL,
                        "%s: output_padding must be non-negative, got (%" PRId64 ", %" PRId64 ")",
                        op->name, p.oph, p.opw);
    if (p.groups < 1)
        return cn_failc(CN_EINVAL, "%s: groups must be positive, got %" PRId64, op->name,
                        p.groups);
    return CN_OK;
}

/* conv2d's output size along one axis; -1 when the input size is unknown. */
static int out_size(const cn_op_def *op, const cn_tensor *x, int64_t in, int64_t k, int64_t s,
                    int64_t pad, int64_t d, int64_t *out) {
    if (in < 0 || k < 0) {
        *out = -1;
        return CN_OK;
    }
    /* Each parameter is only checked positive: a dilation of 2^62 must
     * fail here, not overflow. */
    int64_t eff, padded;
    if (__builtin_mul_overflow(d, k - 1, &eff) || __builtin_add_overflow(eff, 1, &eff) ||
        __builtin_mul_overflow(pad, 2, &padded) || __builtin_add_overflow(in, padded, &padded)) {
        char b[160];
        return cn_failc(CN_EINVAL,
                        "%s: x %s: kernel %" PRId64 ", dilation %" PRId64 " and padding %" PRId64
                        " overflow the output size",
                        op->name, shp(b, sizeof b, x), k, d, pad);
    }
    if (padded < eff) {
        char b[160];
        return cn_failc(CN_EINVAL,
                        "%s: x %s: padded input size %" PRId64 " is smaller than the kernel, "
                        "%" PRId64 " (dilated: %" PRId64 ")",
                        op->name, shp(b, sizeof b, x), padded, k, eff);
    }
    *out = (padded - eff) / s + 1;
    return CN_OK;
}

/* Channel checks shared by conv2d and conv2d_weight_grad: x has C channels,
 * the weight [O, C / groups, ...]. */
static int check_channels(const cn_op_def *op, const cn_tensor *x, int64_t C, int64_t O,
                          int64_t Cg, int64_t groups, const char *wdesc) {
    char b1[160];
    if (O >= 0 && O % groups)
        return cn_failc(CN_EINVAL,
                        "%s: %s has %" PRId64 " output channels, which groups = %" PRId64
                        " does not divide",
                        op->name, wdesc, O, groups);
    if (C >= 0 && Cg >= 0 && C != Cg * groups)
        return cn_failc(CN_EINVAL,
                        "%s: x %s has %" PRId64 " channels, but %s with groups = %" PRId64
                        " expects %" PRId64,
                        op->name, shp(b1, sizeof b1, x), C, wdesc, groups, Cg * groups);
    return CN_OK;
}

static int check_bias(const cn_op_def *op, const cn_tensor *b, int64_t channels) {
    if (b->ndim == 1 && (b->shape[0] < 0 || channels < 0 || b->shape[0] == channels))
        return CN_OK;
    char bb[160];
    return cn_failc(CN_EINVAL, "%s: bias must be 1-D with %" PRId64 " elements (one per output "
                               "channel), got %s",
                    op->name, channels, shp(bb, sizeof bb, b));
}

static const char *const conv_names[3] = {"x", "weight", "bias"};

static int check_inputs(const cn_op_def *op, cn_tensor *const *in, int nin, int nmin, int nmax,
                        const char *what) {
    if (nin < nmin || nin > nmax)
        return cn_failc(CN_EINVAL, "%s: expects %s (%d or %d inputs), got %d", op->name, what,
                        nmin, nmax, nin);
    return check_dtypes(op, in, nin, conv_names);
}

/* ---- conv2d: x [N, C, H, W], w [O, C / groups, KH, KW], bias [O] ---- */

static int conv2d_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                        cn_meta *m) {
    if (check_inputs(op, in, nin, 2, 3, "x, weight and an optional bias") < 0) return CN_EINVAL;
    const cn_tensor *x = in[0], *w = in[1];
    if (check_rank(op, x, "x", "[N, C, H, W]") < 0 ||
        check_rank(op, w, "weight", "[out_channels, in_channels / groups, kH, kW]") < 0 ||
        check_params(op, a, CONV_LIST) < 0)
        return CN_EINVAL;
    conv_params p = params_of(a);
    char wd[200], b[160];
    snprintf(wd, sizeof wd, "weight %s", shp(b, sizeof b, w));
    if (check_channels(op, x, x->shape[1], w->shape[0], w->shape[1], p.groups, wd) < 0)
        return CN_EINVAL;
    if (nin == 3 && check_bias(op, in[2], w->shape[0]) < 0) return CN_EINVAL;
    m->dtype = cn_is_half((cn_dtype)x->dtype) ? CN_F32 : (cn_dtype)x->dtype;
    m->ndim = 4;
    m->shape[0] = x->shape[0];
    m->shape[1] = w->shape[0];
    if (out_size(op, x, x->shape[2], w->shape[2], p.sh, p.ph, p.dh, &m->shape[2]) < 0 ||
        out_size(op, x, x->shape[3], w->shape[3], p.sw, p.pw, p.dw, &m->shape[3]) < 0)
        return CN_EINVAL;
    return CN_OK;
}

/* Apply op to (a, b) with attrs. */
static cn_tensor *apply2(cn_op_id id, cn_tensor *a, cn_tensor *b, const cn_attrs *at) {
    cn_tensor *in[2] = {a, b};
    return cn_op_apply(id, in, 2, at);
}

/* conv2d's attributes from conv_transpose2d's or conv2d_weight_grad's
 * (their first six list entries and the groups). */
static cn_attrs conv_attrs(const cn_attrs *a) {
    cn_attrs c;
    memset(&c, 0, sizeof c);
    c.i[0] = a->i[0];
    c.nlist = CONV_LIST;
    memcpy(c.list, a->list, sizeof(int64_t) * CONV_LIST);
    return c;
}

/* conv_transpose2d attributes whose output (for an input of spatial size
 * hy x wy and a kernel kh x kw) is h x w: the output padding makes up the
 * rest. Unknown sizes (symbolic) get none. */
static cn_attrs convt_attrs_for(const cn_attrs *a, int64_t hy, int64_t wy, int64_t kh,
                                int64_t kw, int64_t h, int64_t w) {
    cn_attrs c = conv_attrs(a);
    conv_params p = params_of(a);
    c.nlist = CONVT_LIST;
    int64_t base_h = (hy - 1) * p.sh - 2 * p.ph + p.dh * (kh - 1) + 1;
    int64_t base_w = (wy - 1) * p.sw - 2 * p.pw + p.dw * (kw - 1) + 1;
    c.list[6] = hy >= 0 && h >= 0 && h > base_h ? h - base_h : 0;
    c.list[7] = wy >= 0 && w >= 0 && w > base_w ? w - base_w : 0;
    return c;
}

/* Bias gradient: dy summed over every axis but the channels (1). */
static cn_tensor *bias_grad(cn_tensor *g) { return cn_sum(g, CN_AXES(0, 2, 3), false); }

/* The bias as [1, C, 1, 1], to broadcast over an NCHW tangent. */
static cn_tensor *bias4(cn_tensor *b) { return cn_reshape(b, CN_SHAPE(1, -1, 1, 1)); }

/* sum of the non-NULL terms; out's shape (a bias tangent alone broadcasts). */
static cn_tensor *sum_terms(cn_tensor *const *t, int n, const cn_tensor *out) {
    cn_tensor *r = NULL;
    for (int k = 0; k < n; k++)
        if (t[k]) r = r ? cn_add(r, t[k]) : t[k];
    if (!r) return cn_fail("jvp: no tangent");
    return cn_expand(r, out->ndim, out->shape);
}

static cn_tensor *conv2d_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                             cn_tensor *g, int i) {
    cn_tensor *x = in[0], *w = in[1];
    if (i == 0) {
        cn_attrs t = convt_attrs_for(a, g->shape[2], g->shape[3], w->shape[2], w->shape[3],
                                     x->shape[2], x->shape[3]);
        return apply2(CN_OP_conv_transpose2d, g, w, &t);
    }
    if (i == 1) {
        cn_attrs t = conv_attrs(a);
        t.i[1] = w->shape[2];
        t.i[2] = w->shape[3];
        return apply2(CN_OP_conv2d_weight_grad, x, g, &t);
    }
    return bias_grad(g);
}

static cn_tensor *conv2d_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                             const cn_attrs *a, cn_tensor *out) {
    cn_tensor *terms[3] = {NULL, NULL, NULL};
    if (tin[0]) terms[0] = apply2(CN_OP_conv2d, tin[0], in[1], a);
    if (tin[1]) terms[1] = apply2(CN_OP_conv2d, in[0], tin[1], a);
    if (nin == 3 && tin[2]) terms[2] = bias4(tin[2]);
    return sum_terms(terms, 3, out);
}

const cn_op_def cn_opdef_conv2d = {
    .name = "conv2d",
    .ninputs = -1,
    .flags = CN_OPF_AUTOCAST,
    .attrs = {{"stride_padding_dilation", CN_ATTR_INTS, 0, 0}, {"groups", CN_ATTR_INT, 0, 1}},
    .infer = conv2d_infer,
    .vjp = conv2d_vjp,
    .jvp = conv2d_jvp,
    .onnx = "Conv",
    .doc = "y[n, o, h, w] = b[o] + sum_{c in o's group, i, j} x[n, c, h sh - ph + i dh, "
           "w sw - pw + j dw] w[o, c, i, j] (zero outside x); inputs x, weight (, bias); "
           "list = stride, padding, dilation (h, w pairs)",
};

/* ---- conv_transpose2d: x [N, Cin, H, W], w [Cin, Cout / groups, KH, KW],
 * bias [Cout]: the adjoint of conv2d in its input ---- */

static int convt_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                       cn_meta *m) {
    if (check_inputs(op, in, nin, 2, 3, "x, weight and an optional bias") < 0) return CN_EINVAL;
    const cn_tensor *x = in[0], *w = in[1];
    if (check_rank(op, x, "x", "[N, C, H, W]") < 0 ||
        check_rank(op, w, "weight", "[in_channels, out_channels / groups, kH, kW]") < 0 ||
        check_params(op, a, CONVT_LIST) < 0)
        return CN_EINVAL;
    conv_params p = params_of(a);
    char b1[160], b2[160];
    int64_t C = x->shape[1], Cw = w->shape[0];
    if (C >= 0 && Cw >= 0 && C != Cw)
        return cn_failc(CN_EINVAL,
                        "%s: x %s has %" PRId64 " channels, but weight %s expects %" PRId64
                        " (its first axis)",
                        op->name, shp(b1, sizeof b1, x), C, shp(b2, sizeof b2, w), Cw);
    if (Cw >= 0 && Cw % p.groups)
        return cn_failc(CN_EINVAL,
                        "%s: weight %s has %" PRId64 " input channels, which groups = %" PRId64
                        " does not divide",
                        op->name, shp(b2, sizeof b2, w), Cw, p.groups);
    int64_t Cout = w->shape[1] < 0 ? -1 : w->shape[1] * p.groups;
    if (nin == 3 && check_bias(op, in[2], Cout) < 0) return CN_EINVAL;
    m->dtype = cn_is_half((cn_dtype)x->dtype) ? CN_F32 : (cn_dtype)x->dtype;
    m->ndim = 4;
    m->shape[0] = x->shape[0];
    m->shape[1] = Cout;
    int64_t s[2] = {p.sh, p.sw}, pd[2] = {p.ph, p.pw}, d[2] = {p.dh, p.dw}, op2[2] = {p.oph, p.opw};
    for (int k = 0; k < 2; k++) {
        int64_t hin = x->shape[2 + k], kk = w->shape[2 + k];
        if (hin < 0 || kk < 0) {
            m->shape[2 + k] = -1;
            continue;
        }
        int64_t o, t;
        if (__builtin_mul_overflow(hin - 1, s[k], &o) || __builtin_mul_overflow(pd[k], 2, &t) ||
            __builtin_sub_overflow(o, t, &o) || __builtin_mul_overflow(d[k], kk - 1, &t) ||
            __builtin_add_overflow(o, t, &o) || __builtin_add_overflow(o, op2[k], &o) ||
            __builtin_add_overflow(o, 1, &o))
            return cn_failc(CN_EINVAL,
                            "%s: x %s and weight %s: stride %" PRId64 ", padding %" PRId64
                            ", dilation %" PRId64 " and output_padding %" PRId64
                            " overflow the output size",
                            op->name, shp(b1, sizeof b1, x), shp(b2, sizeof b2, w), s[k], pd[k],
                            d[k], op2[k]);
        if (o < 1)
            return cn_failc(CN_EINVAL,
                            "%s: x %s and weight %s give a non-positive output size %" PRId64
                            " (padding too large)",
                            op->name, shp(b1, sizeof b1, x), shp(b2, sizeof b2, w), o);
        m->shape[2 + k] = o;
    }
    return CN_OK;
}

/* x padded with zeros at the end (or cut) to h x w. */
static cn_tensor *fit_hw(cn_tensor *x, int64_t h, int64_t w) {
    int64_t dh = h - x->shape[2], dw = w - x->shape[3];
    if (h < 0 || w < 0 || x->shape[2] < 0 || x->shape[3] < 0 || (dh == 0 && dw == 0))
        return cn_scope_add(cn_retain(x));
    return cn_pad(x, (int64_t[]){0, dw, 0, dh}, 4, CN_PAD_CONSTANT, 0);
}

static cn_tensor *convt_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                            cn_tensor *g, int i) {
    cn_tensor *x = in[0], *w = in[1];
    cn_attrs c = conv_attrs(a);
    if (i == 0) {
        /* conv2d of g gives x's size, or more when output_padding >= stride. */
        cn_tensor *r = apply2(CN_OP_conv2d, g, w, &c);
        return fit_hw(r, x->shape[2], x->shape[3]);
    }
    if (i == 1) {
        c.i[1] = w->shape[2];
        c.i[2] = w->shape[3];
        int64_t oh = -1, ow = -1;
        conv_params p = params_of(a);
        if (g->shape[2] >= 0)
            oh = (g->shape[2] + 2 * p.ph - p.dh * (w->shape[2] - 1) - 1) / p.sh + 1;
        if (g->shape[3] >= 0)
            ow = (g->shape[3] + 2 * p.pw - p.dw * (w->shape[3] - 1) - 1) / p.sw + 1;
        return apply2(CN_OP_conv2d_weight_grad, g, fit_hw(x, oh, ow), &c);
    }
    return bias_grad(g);
}

static cn_tensor *convt_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                            const cn_attrs *a, cn_tensor *out) {
    cn_tensor *terms[3] = {NULL, NULL, NULL};
    if (tin[0]) terms[0] = apply2(CN_OP_conv_transpose2d, tin[0], in[1], a);
    if (tin[1]) terms[1] = apply2(CN_OP_conv_transpose2d, in[0], tin[1], a);
    if (nin == 3 && tin[2]) terms[2] = bias4(tin[2]);
    return sum_terms(terms, 3, out);
}

const cn_op_def cn_opdef_conv_transpose2d = {
    .name = "conv_transpose2d",
    .ninputs = -1,
    .flags = CN_OPF_AUTOCAST,
    .attrs = {{"stride_padding_dilation_output_padding", CN_ATTR_INTS, 0, 0},
              {"groups", CN_ATTR_INT, 0, 1}},
    .infer = convt_infer,
    .vjp = convt_vjp,
    .jvp = convt_jvp,
    .onnx = "ConvTranspose",
    .doc = "the adjoint of conv2d in x: y[n, c, h sh - ph + i dh, w sw - pw + j dw] += "
           "x[n, o, h, w] w[o, c, i, j], + b[c]; output (H - 1) s - 2 p + d (k - 1) + "
           "output_padding + 1",
};

/* ---- conv2d_weight_grad: x [N, C, H, W], dy [N, O, OH, OW] -> [O, C / groups,
 * KH, KW]: the gradient of conv2d(x, w) in w given dy ---- */

static int wgrad_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                       cn_meta *m) {
    static const char *const names[2] = {"x", "dy"};
    if (check_dtypes(op, in, nin, names) < 0) return CN_EINVAL;
    const cn_tensor *x = in[0], *dy = in[1];
    if (check_rank(op, x, "x", "[N, C, H, W]") < 0 ||
        check_rank(op, dy, "dy", "[N, O, OH, OW]") < 0 || check_params(op, a, CONV_LIST) < 0)
        return CN_EINVAL;
    conv_params p = params_of(a);
    int64_t kh = a->i[1], kw = a->i[2];
    char b1[160], b2[160];
    if (kh < 1 || kw < 1)
        return cn_failc(CN_EINVAL, "%s: kernel size must be positive, got %" PRId64 "x%" PRId64,
                        op->name, kh, kw);
    if (x->shape[0] >= 0 && dy->shape[0] >= 0 && x->shape[0] != dy->shape[0])
        return cn_failc(CN_EINVAL, "%s: x %s and dy %s have different batch sizes", op->name,
                        shp(b1, sizeof b1, x), shp(b2, sizeof b2, dy));
    char wd[200];
    snprintf(wd, sizeof wd, "dy %s", shp(b2, sizeof b2, dy));
    int64_t C = x->shape[1];
    if (C >= 0 && C % p.groups)
        return cn_failc(CN_EINVAL,
                        "%s: x %s has %" PRId64 " channels, which groups = %" PRId64
                        " does not divide",
                        op->name, shp(b1, sizeof b1, x), C, p.groups);
    if (check_channels(op, x, -1, dy->shape[1], -1, p.groups, wd) < 0) return CN_EINVAL;
    int64_t oh = -1, ow = -1;
    if (out_size(op, x, x->shape[2], kh, p.sh, p.ph, p.dh, &oh) < 0 ||
        out_size(op, x, x->shape[3], kw, p.sw, p.pw, p.dw, &ow) < 0)
        return CN_EINVAL;
    if ((oh >= 0 && dy->shape[2] >= 0 && oh != dy->shape[2]) ||
        (ow >= 0 && dy->shape[3] >= 0 && ow != dy->shape[3]))
        return cn_failc(CN_EINVAL,
                        "%s: dy %s does not match conv2d's output size %" PRId64 "x%" PRId64
                        " for x %s",
                        op->name, shp(b2, sizeof b2, dy), oh, ow, shp(b1, sizeof b1, x));
    m->dtype = cn_is_half((cn_dtype)x->dtype) ? CN_F32 : (cn_dtype)x->dtype;
    m->ndim = 4;
    m->shape[0] = dy->shape[1];
    m->shape[1] = C < 0 ? -1 : C / p.groups;
    m->shape[2] = kh;
    m->shape[3] = kw;
    return CN_OK;
}

static cn_tensor *wgrad_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                            cn_tensor *g, int i) {
    cn_tensor *x = in[0], *dy = in[1];
    if (i == 0) {
        cn_attrs t = convt_attrs_for(a, dy->shape[2], dy->shape[3], a->i[1], a->i[2],
                                     x->shape[2], x->shape[3]);
        return apply2(CN_OP_conv_transpose2d, dy, g, &t);
    }
    cn_attrs c = conv_attrs(a);
    return apply2(CN_OP_conv2d, x, g, &c);
}

static cn_tensor *wgrad_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                            const cn_attrs *a, cn_tensor *out) {
    cn_tensor *terms[2] = {NULL, NULL};
    if (tin[0]) terms[0] = apply2(CN_OP_conv2d_weight_grad, tin[0], in[1], a);
    if (tin[1]) terms[1] = apply2(CN_OP_conv2d_weight_grad, in[0], tin[1], a);
    return sum_terms(terms, 2, out);
}

const cn_op_def cn_opdef_conv2d_weight_grad = {
    .name = "conv2d_weight_grad",
    .ninputs = 2,
    .flags = CN_OPF_AUTOCAST,
    .attrs = {{"stride_padding_dilation", CN_ATTR_INTS, 0, 0},
              {"groups", CN_ATTR_INT, 0, 1},
              {"kernel_h", CN_ATTR_INT, 1, 1},
              {"kernel_w", CN_ATTR_INT, 2, 1}},
    .infer = wgrad_infer,
    .vjp = wgrad_vjp,
    .jvp = wgrad_jvp,
    .doc = "dw[o, c, i, j] = sum_{n, h, w} dy[n, o, h, w] x[n, c', h sh - ph + i dh, "
           "w sw - pw + j dw]: conv2d's weight gradient (c' = c + o's group offset)",
};

/* ---- public functions ---- */

static const cn_conv_opts default_opts;

static int64_t or1(int64_t v) { return v == 0 ? 1 : v; }

/* Attributes from the options; n_list 6 or 8 (with output_padding). */
static cn_attrs attrs_of(const cn_conv_opts *o, int nlist) {
    if (!o) o = &default_opts;
    cn_attrs a;
    memset(&a, 0, sizeof a);
    a.nlist = nlist;
    int64_t v[8] = {or1(o->stride[0]),   or1(o->stride[1]),   o->padding[0],
                    o->padding[1],       or1(o->dilation[0]), or1(o->dilation[1]),
                    o->output_padding[0], o->output_padding[1]};
    memcpy(a.list, v, sizeof(int64_t) * (size_t)nlist);
    a.i[0] = or1(o->groups);
    return a;
}

/* An unbatched image [C, H, W] runs as a batch of one. */
static cn_tensor *run_conv(cn_op_id id, cn_tensor *x, cn_tensor *w,
                           cn_tensor *bias, const cn_attrs *a) {
    if (!x || !w) return NULL;
    bool unbatched = x->ndim == 3;
    if (unbatched) x = cn_unsqueeze(x, 0);
    cn_tensor *in[3] = {x, w, bias};
    cn_tensor *y = cn_op_apply(id, in, bias ? 3 : 2, a);
    return unbatched && y ? cn_squeeze(y, 0) : y;
}

cn_tensor *cn_conv2d(cn_tensor *x, cn_tensor *w, cn_tensor *bias, const cn_conv_opts *opts) {
    cn_attrs a = attrs_of(opts, CONV_LIST);
    return run_conv(CN_OP_conv2d, x, w, bias, &a);
}

cn_tensor *cn_conv_transpose2d(cn_tensor *x, cn_tensor *w, cn_tensor *bias,
                               const cn_conv_opts *opts) {
    cn_attrs a = attrs_of(opts, CONVT_LIST);
    /* PyTorch's rule; the op itself takes any output padding (the gradient
     * rules need that). */
    for (int k = 0; k < 2; k++) {
        int64_t op = a.list[6 + k], s = a.list[k], d = a.list[4 + k];
        if (op >= s && op >= d)
            return cn_fail("conv_transpose2d: output_padding (%" PRId64 ", %" PRId64
                           ") must be smaller than either stride (%" PRId64 ", %" PRId64
                           ") or dilation (%" PRId64 ", %" PRId64 ")",
                           a.list[6], a.list[7], a.list[0], a.list[1], a.list[4], a.list[5]);
    }
    return run_conv(CN_OP_conv_transpose2d, x, w, bias, &a);
}

/* conv1d: x [N, C, L] (or [C, L]), w [O, C / groups, K]: a conv2d on
 * [N, C, 1, L] with the width entries of the options taken from [0]. */
cn_tensor *cn_conv1d(cn_tensor *x, cn_tensor *w, cn_tensor *bias, const cn_conv_opts *opts) {
    if (!x || !w) return NULL;
    if (x->ndim != 2 && x->ndim != 3) {
        char b[160];
        return cn_fail("conv1d: x must be 3-D [N, C, L] or 2-D [C, L], got %s",
                       shp(b, sizeof b, x));
    }
    if (w->ndim != 3) {
        char b[160];
        return cn_fail("conv1d: weight must be 3-D [out_channels, in_channels / groups, k], got "
                       "%s",
                       shp(b, sizeof b, w));
    }
    if (!opts) opts = &default_opts;
    cn_conv_opts o = {{1, opts->stride[0]},
                      {0, opts->padding[0]},
                      {1, opts->dilation[0]},
                      opts->groups,
                      {0, 0}};
    cn_tensor *y = cn_conv2d(cn_unsqueeze(x, -2), cn_unsqueeze(w, -2), bias, &o);
    return y ? cn_squeeze(y, -2) : NULL;
}
