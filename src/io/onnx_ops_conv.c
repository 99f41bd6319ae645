/* ONNX convolutions and pooling over 1, 2 or 3 spatial axes, on Chutney's
 * NCHW conv2d / conv_transpose2d / pool2d ops: 1-D runs as 2-D over a unit
 * height; 3-D as a sum (conv), maximum (max pool) or sum and count (average
 * pool) of 2-D results over the depth window. Asymmetric or large pads are
 * applied explicitly (zeros, or -inf for max pooling) before a pad-free op;
 * auto_pad is resolved from the known input sizes. */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX
#include <inttypes.h>
#include <math.h>


/* The window of one op: per spatial axis kernel, stride, dilation, pads. */
typedef struct win {
    int s; /* spatial rank */
    int64_t in[3], k[3], st[3], dil[3], pb[3], pe[3];
    bool ceil;
} win;

/* A window attribute (kernel_shape, strides, dilations, pads,
 * output_padding, output_shape) of want entries into v, each in
 * [0, ONNX_MAX_WINDOW]: a corrupt 2^62 would overflow the size arithmetic
 * or drive a loop for hours. Whether 0 is allowed is the caller's check. */
static int read_list(onnx_ctx *c, const Onnx__NodeProto *n, const char *name, int64_t *v, int want,
                     int64_t def) {
    int64_t tmp[8];
    int k = onnx_attr_ints(n, name, tmp, 8);
    if (k < 0) {
        for (int i = 0; i < want; i++) v[i] = def;
        return 0;
    }
    if (k != want) return onnx_bad(c, "%s has %d entries, expected %d", name, k, want);
    for (int i = 0; i < want; i++) {
        if (tmp[i] < 0 || tmp[i] > ONNX_MAX_WINDOW)
            return onnx_bad(c, "%s[%d] is %" PRId64 " (0 to %" PRId64 " are accepted)", name, i, tmp[i],
                            ONNX_MAX_WINDOW);
        v[i] = tmp[i];
    }
    return 0;
}

/* The group attribute: at least 1 (0 would be read as "unset" by
 * cn_conv_opts and silently become 1). */
static int read_group(onnx_ctx *c, const Onnx__NodeProto *n, int64_t *groups) {
    *groups = onnx_attr_int(n, "group", 1);
    if (*groups < 1) return onnx_bad(c, "group is %" PRId64 " (must be at least 1)", *groups);
    return 0;
}

/* Fills w from the attributes, x's sizes and the kernel sizes k. */
static int window(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor *x, const int64_t *k, win *w,
                  bool transposed) {
    int s = cn_ndim(x) - 2;
    if (s < 1 || s > 3) return onnx_unsup(c, "%d spatial axes (1 to 3 are supported)", s);
    w->s = s;
    for (int i = 0; i < s; i++) {
        w->in[i] = cn_dim(x, 2 + i);
        w->k[i] = k[i];
        if (w->in[i] < 0) return onnx_unsup(c, "unknown spatial sizes (give concrete input shapes)");
        if (k[i] > ONNX_MAX_WINDOW)
            return onnx_bad(c, "kernel size %" PRId64 " on spatial axis %d (at most %" PRId64 ")", k[i],
                            i, ONNX_MAX_WINDOW);
    }
    int64_t pads[6];
    if (read_list(c, n, "strides", w->st, s, 1) < 0 || read_list(c, n, "dilations", w->dil, s, 1) < 0 ||
        read_list(c, n, "pads", pads, 2 * s, 0) < 0)
        return CN_EINVAL;
    for (int i = 0; i < s; i++) {
        w->pb[i] = pads[i];
        w->pe[i] = pads[s + i];
        if (w->st[i] < 1 || w->dil[i] < 1 || w->k[i] < 1 || w->pb[i] < 0 || w->pe[i] < 0)
            return onnx_bad(c, "bad kernel, stride, dilation or pads");
    }
    w->ceil = onnx_attr_int(n, "ceil_mode", 0);
    char ab[32];
    const char *ap = onnx_attr_str(n, "auto_pad", "NOTSET", ab, sizeof ab);
    if (!strcmp(ap, "NOTSET")) return 0;
    if (!strcmp(ap, "VALID")) {
        for (int i = 0; i < s; i++) w->pb[i] = w->pe[i] = 0;
        return 0;
    }
    bool upper = !strcmp(ap, "SAME_UPPER");
    if (!upper && strcmp(ap, "SAME_LOWER")) return onnx_unsup(c, "auto_pad '%s'", ap);
    if (transposed) return 0; /* resolved by the caller from the output size */
    for (int i = 0; i < s; i++) {
        int64_t o = (w->in[i] + w->st[i] - 1) / w->st[i];
        int64_t total = (o - 1) * w->st[i] + (w->k[i] - 1) * w->dil[i] + 1 - w->in[i];
        if (total < 0) total = 0;
        w->pb[i] = upper ? total / 2 : total - total / 2;
        w->pe[i] = total - w->pb[i];
    }
    return 0;
}

/* Pads the spatial axes [from, s) by w's pads with value (constant mode). */
static cn_tensor *pad_spatial(cn_tensor *x, const win *w, int from, double value) {
    int64_t p[2 * CN_MAX_DIMS];
    int np = 0;
    for (int i = w->s - 1; i >= from; i--) {
        p[np++] = w->pb[i];
        p[np++] = w->pe[i];
    }
    return cn_pad(x, p, np, CN_PAD_CONSTANT, value);
}

static bool symmetric(const win *w, int from) {
    for (int i = from; i < w->s; i++)
        if (w->pb[i] != w->pe[i]) return false;
    return true;
}

/* Output size of a window over a (padded) axis. */
static int64_t out_size(int64_t in, int64_t k, int64_t st, int64_t d, bool ceil_mode) {
    int64_t span = in - (k - 1) * d - 1;
    if (span < 0) return 0;
    return (ceil_mode ? (span + st - 1) / st : span / st) + 1;
}

/* 1-D as 2-D: add a unit height (axis 2) to x, and to the window. */
static void as_2d(win *w) {
    if (w->s != 1) return;
    w->s = 2;
    w->in[1] = w->in[0], w->k[1] = w->k[0], w->st[1] = w->st[0], w->dil[1] = w->dil[0];
    w->pb[1] = w->pb[0], w->pe[1] = w->pe[0];
    w->in[0] = w->k[0] = w->st[0] = w->dil[0] = 1;
    w->pb[0] = w->pe[0] = 0;
}

/* 3-D runs as one 2-D op per (output depth, kernel depth) pair, each a
 * graph node: at most 4096 of them. */
static bool depth_loop_ok(int64_t od_n, int64_t kd) {
    return od_n <= 4096 && kd <= 4096 && od_n * kd <= 4096;
}

/* One depth slice [N, C, H, W] of x [N, C, D, H, W]. */
static cn_tensor *depth(cn_tensor *x, int64_t d) { return cn_squeeze(cn_narrow(x, 2, d, 1), 2); }

/* ---- Conv ---- */

int onnx_conv(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor *x, cn_tensor *wt, cn_tensor *b,
              cn_tensor **out) {
    int r = cn_ndim(x);
    if (cn_ndim(wt) != r) return onnx_bad(c, "W has rank %d, X %d", cn_ndim(wt), r);
    int64_t k[3];
    for (int i = 0; i < r - 2 && i < 3; i++) k[i] = cn_dim(wt, 2 + i);
    win w;
    int rc = window(c, n, x, k, &w, false);
    if (rc < 0) return rc;
    int64_t ks[3];
    if (read_list(c, n, "kernel_shape", ks, w.s, 0) < 0) return CN_EINVAL;
    for (int i = 0; i < w.s; i++)
        if (ks[i] && ks[i] != k[i]) return onnx_bad(c, "kernel_shape disagrees with W");
    int64_t groups;
    if (read_group(c, n, &groups) < 0) return CN_EINVAL;
    bool one = w.s == 1;
    if (one) {
        x = cn_unsqueeze(x, 2);
        wt = cn_unsqueeze(wt, 2);
        as_2d(&w);
    }
    int from = w.s == 3 ? 1 : 0; /* the 2-D part */
    if (!symmetric(&w, 0) || w.s == 3) {
        x = pad_spatial(x, &w, 0, 0);
        for (int i = 0; i < w.s; i++) w.pb[i] = w.pe[i] = 0;
    }
    cn_conv_opts o = {.stride = {w.st[from], w.st[from + 1]},
                      .padding = {w.pb[from], w.pb[from + 1]},
                      .dilation = {w.dil[from], w.dil[from + 1]},
                      .groups = groups};
    cn_tensor *y;
    if (w.s == 2) y = cn_conv2d(x, wt, b, &o);
    else {
        /* 3-D: output depth od sums 2-D convolutions of the input slices its
         * window covers with the matching kernel slices. */
        int64_t D = cn_dim(x, 2), od_n = out_size(D, w.k[0], w.st[0], w.dil[0], false);
        if (od_n < 1) return onnx_bad(c, "the output is empty");
        if (!depth_loop_ok(od_n, w.k[0])) return onnx_unsup(c, "3-D convolution this deep");
        cn_tensor *slices[4096];
        for (int64_t od = 0; od < od_n; od++) {
            cn_tensor *acc = NULL;
            for (int64_t kd = 0; kd < w.k[0]; kd++) {
                cn_tensor *t = cn_conv2d(depth(x, od * w.st[0] + kd * w.dil[0]), depth(wt, kd), NULL, &o);
                acc = acc ? cn_add(acc, t) : t;
            }
            slices[od] = acc;
        }
        y = cn_stack(slices, (int)od_n, 2);
        if (b) y = cn_add(y, cn_reshape(b, 4, (int64_t[]){-1, 1, 1, 1}));
    }
    if (one) y = cn_squeeze(y, 2);
    return (*out = y) ? 0 : CN_EINVAL;
}

H(h_conv) {
    UNUSED;
    return onnx_conv(c, n, in[0], in[1], nin > 2 ? in[2] : NULL, out);
}

/* ---- ConvTranspose ---- */

H(h_conv_transpose) {
    UNUSED;
    cn_tensor *x = in[0], *wt = in[1], *b = nin > 2 ? in[2] : NULL;
    int r = cn_ndim(x);
    if (r != 3 && r != 4) return onnx_unsup(c, "%d spatial axes (1 or 2 are supported)", r - 2);
    if (cn_ndim(wt) != r) return onnx_bad(c, "W has rank %d, X %d", cn_ndim(wt), r);
    int64_t k[2];
    for (int i = 0; i < r - 2; i++) k[i] = cn_dim(wt, 2 + i);
    win w;
    int rc = window(c, n, x, k, &w, true);
    if (rc < 0) return rc;
    int64_t groups;
    if (read_group(c, n, &groups) < 0) return CN_EINVAL;
    int s = w.s;
    int64_t op[2], os[2];
    if (read_list(c, n, "output_padding", op, s, 0) < 0) return CN_EINVAL;
    char ab[32];
    const char *ap = onnx_attr_str(n, "auto_pad", "NOTSET", ab, sizeof ab);
    bool same = !strncmp(ap, "SAME", 4);
    bool have_os = onnx_attr(n, "output_shape") != NULL;
    if (have_os && read_list(c, n, "output_shape", os, s, 0) < 0) return CN_EINVAL;
    if (have_os || same) {
        for (int i = 0; i < s; i++) {
            /* The input's size may be declared as anything up to 2^56:
             * every step is checked (the window terms are at most 2^48). */
            int64_t full, total;
            if (__builtin_mul_overflow(w.st[i], w.in[i], &full) ||
                __builtin_add_overflow(full - w.st[i] + 1, op[i] + (w.k[i] - 1) * w.dil[i], &total))
                return onnx_bad(c, "input size %" PRId64 " with stride %" PRId64 " overflows the output size",
                                w.in[i], w.st[i]);
            total -= have_os ? os[i] : full;
            bool upper = !strcmp(ap, "SAME_UPPER");
            w.pb[i] = upper ? total / 2 : total - total / 2;
            if (total < 0) w.pb[i] = 0; /* a larger output grows at the end, as the reference */
            w.pe[i] = total - w.pb[i];
        }
    }
    bool one = s == 1;
    if (one) {
        x = cn_unsqueeze(x, 2);
        wt = cn_unsqueeze(wt, 2);
        as_2d(&w);
        op[1] = op[0];
        op[0] = 0;
    }
    cn_conv_opts o = {.stride = {w.st[0], w.st[1]},
                      .dilation = {w.dil[0], w.dil[1]},
                      .groups = groups};
    cn_tensor *y = cn_conv_transpose2d(x, wt, NULL, &o);
    /* Crop the pads (negative constant pads) and add output_padding at the
     * end; the bias covers the added cells too. */
    int64_t p[4] = {-w.pb[1], op[1] - w.pe[1], -w.pb[0], op[0] - w.pe[0]};
    y = cn_pad(y, p, 4, CN_PAD_CONSTANT, 0);
    if (b) y = cn_add(y, cn_reshape(b, 3, (int64_t[]){-1, 1, 1}));
    if (one) y = cn_squeeze(y, 2);
    DONE(y);
}

/* ---- pooling ---- */

static int pool_window(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor *x, win *w) {
    int64_t k[3];
    int s = cn_ndim(x) - 2;
    if (s < 1 || s > 3) return onnx_unsup(c, "%d spatial axes (1 to 3 are supported)", s);
    if (read_list(c, n, "kernel_shape", k, s, 0) < 0) return CN_EINVAL;
    if (!onnx_attr(n, "kernel_shape")) return onnx_bad(c, "no kernel_shape");
    int rc = window(c, n, x, k, w, false);
    if (rc < 0) return rc;
    /* ONNX Runtime's rule (PyTorch's is stricter: at most half): a pad as
     * wide as the kernel only adds windows of padding, and a corrupt one
     * would pad the input to any size. */
    for (int i = 0; i < w->s; i++)
        if (w->pb[i] >= w->k[i] || w->pe[i] >= w->k[i])
            return onnx_bad(c, "pads %" PRId64 " and %" PRId64 " of spatial axis %d are not smaller "
                               "than the kernel (%" PRId64 ")",
                            w->pb[i], w->pe[i], i, w->k[i]);
    return 0;
}

static bool fits_builtin(const win *w, int from) {
    for (int i = from; i < w->s; i++)
        if (w->pb[i] != w->pe[i] || w->pb[i] > w->k[i] / 2) return false;
    return true;
}

H(h_max_pool) {
    UNUSED;
    cn_tensor *x = in[0];
    /* uint8 and int8 (opset 12): the maxima of their values, exact in f32 */
    cn_dtype qdt = cn_tensor_dtype(x);
    bool q8 = qdt == CN_U8 || qdt == CN_I8;
    if (q8) x = cn_cast(x, CN_F32);
    if (!cn_dtype_is_float(cn_tensor_dtype(x))) return onnx_unsup(c, "input of type %s", cn_dtype_name(qdt));
    win w;
    int rc = pool_window(c, n, x, &w);
    if (rc < 0) return rc;
    if (onnx_attr_int(n, "storage_order", 0) != 0) return onnx_unsup(c, "storage_order 1");
    bool one = w.s == 1;
    if (one) {
        x = cn_unsqueeze(x, 2);
        as_2d(&w);
    }
    int from = w.s == 3 ? 1 : 0;
    bool builtin = fits_builtin(&w, from) && w.s == 2;
    if (nout > 1 && (!builtin || w.s != 2)) return onnx_unsup(c, "Indices with these pads or rank");
    if (!builtin) {
        x = pad_spatial(x, &w, 0, -INFINITY);
        for (int i = 0; i < w.s; i++) w.pb[i] = w.pe[i] = 0;
    }
    cn_pool_opts o = {.kernel = {w.k[from], w.k[from + 1]},
                      .stride = {w.st[from], w.st[from + 1]},
                      .padding = {w.pb[from], w.pb[from + 1]},
                      .dilation = {w.dil[from], w.dil[from + 1]},
                      .ceil_mode = w.ceil};
    cn_tensor *y;
    if (w.s == 2) y = cn_max_pool2d(x, &o);
    else {
        int64_t D = cn_dim(x, 2), od_n = out_size(D, w.k[0], w.st[0], w.dil[0], w.ceil);
        if (od_n < 1 || !depth_loop_ok(od_n, w.k[0]))
            return onnx_unsup(c, "3-D pooling this deep (output depth %" PRId64 ", kernel depth %" PRId64 ")",
                              od_n, w.k[0]);
        cn_tensor *slices[4096];
        for (int64_t od = 0; od < od_n; od++) {
            cn_tensor *acc = NULL;
            for (int64_t kd = 0; kd < w.k[0]; kd++) {
                int64_t d = od * w.st[0] + kd * w.dil[0];
                if (d >= D) break; /* ceil mode: the window runs past the end */
                cn_tensor *t = cn_max_pool2d(depth(x, d), &o);
                acc = acc ? cn_maximum(acc, t) : t;
            }
            slices[od] = acc;
        }
        y = cn_stack(slices, (int)od_n, 2);
    }
    if (nout > 1) {
        /* ONNX indices count over the whole tensor, row-major. */
        cn_tensor *idx = cn_max_pool2d_indices(x, &o);
        int64_t N = cn_dim(x, 0), C = cn_dim(x, 1), HW = cn_dim(x, 2) * cn_dim(x, 3);
        if (N < 0) return onnx_unsup(c, "Indices with an unknown batch size");
        cn_tensor *base = cn_reshape(cn_arange(0, (double)(N * C * HW), (double)HW, CN_I64), 4,
                                     (int64_t[]){N, C, 1, 1});
        out[1] = cn_add(idx, base);
        if (one) out[1] = cn_squeeze(out[1], 2);
    }
    if (one) y = cn_squeeze(y, 2);
    DONE(q8 ? cn_cast(y, qdt) : y);
}

/* Sums over windows (an average with divisor 1). */
static cn_tensor *sum_pool(cn_tensor *x, const win *w, int from) {
    cn_pool_opts o = {.kernel = {w->k[from], w->k[from + 1]},
                      .stride = {w->st[from], w->st[from + 1]},
                      .ceil_mode = w->ceil,
                      .divisor_override = 1};
    if (w->s == 2) return cn_avg_pool2d(x, &o);
    int64_t D = cn_dim(x, 2), od_n = out_size(D, w->k[0], w->st[0], 1, w->ceil);
    if (od_n < 1 || !depth_loop_ok(od_n, w->k[0])) {
        cn_failc(CN_EUNSUPPORTED, "unsupported: 3-D average pooling this deep (output depth %" PRId64
                 ", kernel depth %" PRId64 ")", od_n, w->k[0]);
        return NULL;
    }
    cn_tensor *slices[4096];
    for (int64_t od = 0; od < od_n; od++) {
        cn_tensor *acc = NULL;
        for (int64_t kd = 0; kd < w->k[0] && od * w->st[0] + kd < D; kd++) {
            cn_tensor *t = cn_avg_pool2d(depth(x, od * w->st[0] + kd), &o);
            acc = acc ? cn_add(acc, t) : t;
        }
        slices[od] = acc;
    }
    return cn_stack(slices, (int)od_n, 2);
}

H(h_avg_pool) {
    UNUSED;
    cn_tensor *x = in[0];
    if (!cn_dtype_is_float(cn_tensor_dtype(x))) return onnx_unsup(c, "non-float input");
    win w;
    int rc = pool_window(c, n, x, &w);
    if (rc < 0) return rc;
    for (int i = 0; i < w.s; i++)
        if (w.dil[i] != 1) return onnx_unsup(c, "dilations");
    bool include = onnx_attr_int(n, "count_include_pad", 0);
    bool one = w.s == 1;
    if (one) {
        x = cn_unsqueeze(x, 2);
        as_2d(&w);
    }
    cn_tensor *y;
    if (w.s == 2 && fits_builtin(&w, 0)) {
        cn_pool_opts o = {.kernel = {w.k[0], w.k[1]},
                          .stride = {w.st[0], w.st[1]},
                          .padding = {w.pb[0], w.pb[1]},
                          .ceil_mode = w.ceil,
                          .exclude_pad = !include};
        y = cn_avg_pool2d(x, &o);
    } else {
        /* Window sums over explicitly padded x, divided by the count of
         * cells each window covers (padding counted or not). */
        int64_t ms[CN_MAX_DIMS] = {1, 1};
        for (int i = 0; i < w.s; i++) ms[2 + i] = w.in[i];
        cn_tensor *mask = cn_ones(cn_tensor_dtype(x), 2 + w.s, ms);
        cn_tensor *xp = pad_spatial(x, &w, 0, 0);
        mask = pad_spatial(mask, &w, 0, include ? 1 : 0);
        int from = w.s == 3 ? 1 : 0;
        y = cn_div(sum_pool(xp, &w, from), sum_pool(mask, &w, from));
    }
    if (one) y = cn_squeeze(y, 2);
    DONE(y);
}

static int global_pool(onnx_ctx *c, cn_tensor **in, cn_tensor **out, bool is_max) {
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    if (r < 3) return onnx_bad(c, "input of rank %d", r);
    int ax[CN_MAX_DIMS];
    for (int i = 2; i < r; i++) ax[i - 2] = i;
    DONE(is_max ? cn_max(x, ax, r - 2, true) : cn_mean(x, ax, r - 2, true));
}

H(h_global_avg_pool) {
    UNUSED;
    return global_pool(c, in, out, false);
}
H(h_global_max_pool) {
    UNUSED;
    return global_pool(c, in, out, true);
}

const onnx_op_entry cn_onnx_ops_conv[] = {
    {"Conv", h_conv, ONNX_CONV_ATTRS, 2, 3, 1, "1 to 3 spatial axes; float"},
    {"ConvTranspose", h_conv_transpose, ONNX_CONV_ATTRS ",output_padding,output_shape", 2, 3, 1,
     "1 or 2 spatial axes"},
    {"MaxPool", h_max_pool, "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides", 1, 1, 2,
     "1 to 3 spatial axes; Indices for 2-D with symmetric pads of at most half the kernel, storage_order 0"},
    {"AveragePool", h_avg_pool, "auto_pad,ceil_mode,count_include_pad,dilations,kernel_shape,pads,strides",
     1, 1, 1, "1 to 3 spatial axes; dilations 1"},
    {"GlobalAveragePool", h_global_avg_pool, "", 1, 1, 1, ""},
    {"GlobalMaxPool", h_global_max_pool, "", 1, 1, 1, ""},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

#endif /* CN_HAVE_ONNX */
