/* ONNX normalisations (BatchNormalization for inference, Instance, Layer,
 * LRN, MeanVarianceNormalization), Resize/Upsample, and the two loss ops,
 * composed from Chutney ops. Resize is separable: each resized axis (last
 * first, as the reference nests them) is a weighted sum of index_selects
 * whose indices and weights are computed at load time from the sizes. */
#include "onnx_internal.h"
#include "../graph/effects.h"

#ifdef CN_HAVE_ONNX
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>


/* v [C] -> [C, 1, ...] to broadcast against [N, C, spatial...] of rank r. */
static cn_tensor *per_channel(cn_tensor *v, int r) {
    int64_t s[CN_MAX_DIMS];
    s[0] = -1;
    for (int i = 1; i < r - 1; i++) s[i] = 1;
    return cn_reshape(v, r - 1 > 0 ? r - 1 : 1, s);
}

/* The running statistics' update as PyTorch makes it: stat + (batch - stat)
 * f with f = 1 - momentum, the variance unbiased (n values per channel; -1:
 * unknown until run time, computed from x). Every term has a batch value as
 * an operand, so a static trace reads the statistics at run time; there the
 * update is a graph effect of every program that computes var, eagerly it
 * is written at once. */
static int bn_update(cn_tensor *x, const int *axes, int nax, int64_t n, cn_tensor *mean,
                     cn_tensor *var, cn_tensor *rm, cn_tensor *rv, double f, cn_tensor **out,
                     int nout) {
    int64_t C = cn_numel(rm);
    cn_no_grad_begin();
    cn_tensor *bv = n >= 0 ? cn_mul_scalar(var, (double)n / (double)(n - 1))
                           : cn_var(x, axes, nax, 1, true);
    cn_tensor *nm = cn_add(rm, cn_mul_scalar(cn_sub(cn_reshape(mean, 1, &C), rm), f));
    cn_tensor *nv = cn_add(rv, cn_mul_scalar(cn_sub(cn_reshape(bv, 1, &C), rv), f));
    cn_no_grad_end();
    if (!nm || !nv) return CN_EINVAL;
    int rc;
    if (cn_is_symbolic_tensor(x)) {
        rc = cn_graph_add_effect(rm, nm, var);
        if (rc == 0) rc = cn_graph_add_effect(rv, nv, var);
    } else {
        rc = cn_copy_(rm, nm);
        if (rc == 0) rc = cn_copy_(rv, nv);
    }
    if (rc < 0) return rc;
    if (nout > 1) out[1] = nm;
    if (nout > 2) out[2] = nv;
    return 0;
}

/* BatchNormalization of a module (onnx_ctx.trainable): training normalises
 * with the batch's statistics and updates the running ones, whatever the
 * file's training_mode says; evaluation uses the running ones. */
static int batch_norm_trainable(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor **in,
                                cn_tensor **out, int nout, double eps) {
    cn_tensor *x = in[0];
    int r = cn_ndim(x), axes[CN_MAX_DIMS], nax = 0;
    int64_t per = 1; /* values per channel; -1: unknown */
    for (int i = 0; i < r; i++)
        if (i != 1) {
            axes[nax++] = i;
            per = per < 0 || cn_dim(x, i) < 0 ? -1 : per * cn_dim(x, i);
        }
    cn_tensor *mean, *var;
    if (c->training) {
        if (per >= 0 && per <= 1)
            return onnx_bad(c, "training needs more than one value per channel (input %s)",
                            cn_shape_str(x, (char[128]){0}, 128));
        mean = cn_mean(x, axes, nax, true);
        var = cn_var(x, axes, nax, 0, true);
        double momentum = onnx_attr_float(n, "momentum", 0.9);
        if (!var ||
            bn_update(x, axes, nax, per, mean, var, in[3], in[4], 1 - momentum, out, nout) < 0)
            return CN_EINVAL;
    } else {
        mean = per_channel(in[3], r);
        var = per_channel(in[4], r);
        if (nout > 1) out[1] = in[3];
        if (nout > 2) out[2] = in[4];
    }
    cn_tensor *y = cn_mul(cn_sub(x, mean), cn_rsqrt(cn_add(var, onnx_scalar_of(x, eps))));
    DONE(cn_add(cn_mul(y, per_channel(in[1], r)), per_channel(in[2], r)));
}

H(h_batch_norm) {
    UNUSED;
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    if (r < 2) return onnx_bad(c, "input of rank %d", r);
    if (c->trainable)
        return batch_norm_trainable(c, n, in, out, nout, onnx_attr_float(n, "epsilon", 1e-5));
    if (onnx_attr_int(n, "training_mode", 0))
        return onnx_unsup(c, "training_mode = 1 (train the model with cn_onnx_load_trainable, "
                             "whose written model is in inference mode)");
    if (c->opset_of_node < 7 && !onnx_attr_int(n, "is_test", 0) && nout > 1)
        return onnx_unsup(c, "training mode (is_test = 0)");
    if (c->opset_of_node < 9 && !onnx_attr_int(n, "spatial", 1))
        return onnx_unsup(c, "spatial = 0");
    double eps = onnx_attr_float(n, "epsilon", 1e-5);
    /* y = x a + b with a = scale / sqrt(var + eps), b = bias - mean a: on
     * constant statistics a and b fold at load time. */
    cn_tensor *a = cn_div(in[1], cn_sqrt(cn_add_scalar(in[4], eps)));
    cn_tensor *b = cn_sub(in[2], cn_mul(in[3], a));
    DONE(cn_add(cn_mul(x, per_channel(a, r)), per_channel(b, r)));
}

/* (x - mean) / sqrt(var + eps) over axes ax (the composed normalizations). */
static cn_tensor *standardized(cn_tensor *x, const int *ax, int na, double eps) {
    cn_tensor *d = cn_sub(x, cn_mean(x, ax, na, true));
    cn_tensor *var = cn_mean(cn_mul(d, d), ax, na, true);
    return cn_mul(d, cn_rsqrt(cn_add_scalar(var, eps)));
}

/* t in f32 where it is a half type: stash_type 1, the normalizations'
 * sums in f32. */
static cn_tensor *stashed(cn_tensor *t) {
    cn_dtype dt = cn_tensor_dtype(t);
    return dt == CN_F16 || dt == CN_BF16 ? cn_cast(t, CN_F32) : t;
}

/* LayerNormalization's and RMSNormalization's first normalized axis, or
 * < 0 after onnx_bad / onnx_unsup. */
static int norm_axis(onnx_ctx *c, const Onnx__NodeProto *n, int r) {
    int axis = onnx_axis(c, onnx_attr_int(n, "axis", -1), r, "axis");
    if (axis >= 0 && onnx_attr_int(n, "stash_type", 1) != 1)
        return onnx_unsup(c, "stash_type other than float");
    return axis;
}

H(h_instance_norm) {
    UNUSED;
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    if (r < 3) return onnx_bad(c, "input of rank %d", r);
    int ax[CN_MAX_DIMS];
    for (int i = 2; i < r; i++) ax[i - 2] = i;
    cn_tensor *y = standardized(x, ax, r - 2, onnx_attr_float(n, "epsilon", 1e-5));
    DONE(cn_add(cn_mul(y, per_channel(in[1], r)), per_channel(in[2], r)));
}

/* GroupNormalization (opset 18): x [N, C, ...] normalized over each group
 * of C / num_groups channels and the spatial axes; scale and bias one per
 * group before opset 21, one per channel from 21. */
H(h_group_norm) {
    UNUSED;
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    if (r < 3) return onnx_bad(c, "input of rank %d", r);
    int64_t G = onnx_attr_int(n, "num_groups", 0), C = cn_dim(x, 1), per = 1;
    if (C < 0) return onnx_unsup(c, "an unknown number of channels");
    if (G <= 0 || C % G) return onnx_bad(c, "num_groups %" PRId64 " for %" PRId64 " channels", G, C);
    for (int i = 2; i < r; i++) {
        if (cn_dim(x, i) < 0) return onnx_unsup(c, "unknown spatial sizes");
        per *= cn_dim(x, i);
    }
    bool per_group = c->opset_of_node < 21;
    int64_t want = per_group ? G : C;
    if (cn_numel(in[1]) != want || cn_numel(in[2]) != want)
        return onnx_bad(c, "scale and bias must have %" PRId64 " values (one per %s)", want,
                        per_group ? "group before opset 21" : "channel");
    if (onnx_attr_int(n, "stash_type", 1) != 1) return onnx_unsup(c, "stash_type other than float");
    /* Half types computed in f32, the result cast back. */
    cn_dtype dt = cn_tensor_dtype(x);
    x = stashed(x);
    /* [N, G, C / G * spatial], normalized along the last axis */
    cn_tensor *xg = cn_reshape(x, 3, (int64_t[]){cn_dim(x, 0), G, C / G * per});
    cn_tensor *y = standardized(xg, (int[]){2}, 1, onnx_attr_float(n, "epsilon", 1e-5));
    cn_tensor *sc = stashed(in[1]), *bi = stashed(in[2]);
    if (per_group) {
        int64_t g1[2] = {G, 1};
        y = cn_reshape(cn_add(cn_mul(y, cn_reshape(sc, 2, g1)), cn_reshape(bi, 2, g1)), r, cn_shape(x));
    } else {
        y = cn_add(cn_mul(cn_reshape(y, r, cn_shape(x)), per_channel(sc, r)), per_channel(bi, r));
    }
    DONE(cn_cast(y, dt));
}

/* RMSNormalization (opset 23): x / sqrt(mean(x^2) + epsilon) * scale over
 * the axes from axis on; half types computed in f32 (stash_type 1). */
H(h_rms_norm) {
    UNUSED;
    cn_tensor *x = in[0];
    int r = cn_ndim(x), axis = norm_axis(c, n, r);
    if (axis < 0) return axis;
    cn_dtype dt = cn_tensor_dtype(x);
    if (!cn_dtype_is_float(dt)) return onnx_unsup(c, "non-float input");
    cn_tensor *xf = stashed(x), *s = stashed(in[1]);
    int ax[CN_MAX_DIMS];
    for (int i = axis; i < r; i++) ax[i - axis] = i;
    cn_tensor *ms = cn_mean(cn_mul(xf, xf), ax, r - axis, true);
    cn_tensor *y = cn_mul(cn_mul(xf, cn_rsqrt(cn_add_scalar(ms, onnx_attr_float(n, "epsilon", 1e-5)))), s);
    DONE(cn_cast(y, dt));
}

/* Attention (opset 23) onto the fused scaled_dot_product_attention. Q, K
 * and V are [B, heads, L or S, E] or, given q_num_heads and kv_num_heads,
 * [B, L or S, heads * E] (split into heads here, the output joined back);
 * fewer K/V heads than Q heads (grouped-query attention) are repeated. The
 * mask is bool (true takes part) or added, as the fused op's; is_causal is
 * its top-left causal mask. Not supported: past_key and past_value (a KV
 * cache), the present and qk outputs, softcap, and a mask together with
 * is_causal. */
static cn_tensor *heads_of(cn_tensor *t, int64_t heads) {
    int64_t b = cn_dim(t, 0), s = cn_dim(t, 1), w = cn_dim(t, 2);
    return cn_permute(cn_reshape(t, 4, (int64_t[]){b, s, heads, w / heads}), (int[]){0, 2, 1, 3}, 4);
}

H(h_attention) {
    UNUSED;
    cn_tensor *q = in[0], *k = in[1], *v = in[2], *mask = nin > 3 ? in[3] : NULL;
    if ((nin > 4 && in[4]) || (nin > 5 && in[5]))
        return onnx_unsup(c, "past_key and past_value (a KV cache)");
    if (onnx_attr_float(n, "softcap", 0.0) != 0) return onnx_unsup(c, "softcap");
    bool causal = onnx_attr_int(n, "is_causal", 0) != 0;
    if (causal && mask) return onnx_unsup(c, "attn_mask together with is_causal");
    int r = cn_ndim(q);
    if (r != cn_ndim(k) || r != cn_ndim(v) || (r != 3 && r != 4))
        return onnx_bad(c, "Q, K and V must all be 3-D or all 4-D");
    for (int i = 0; i < r; i++)
        if (cn_dim(q, i) < 0 || cn_dim(k, i) < 0 || cn_dim(v, i) < 0) return onnx_unsup(c, "unknown sizes");
    int64_t qh, kvh;
    if (r == 3) {
        qh = onnx_attr_int(n, "q_num_heads", 0), kvh = onnx_attr_int(n, "kv_num_heads", 0);
        if (qh <= 0 || kvh <= 0 || cn_dim(q, 2) % qh || cn_dim(k, 2) % kvh || cn_dim(v, 2) % kvh)
            return onnx_bad(c, "3-D inputs need q_num_heads and kv_num_heads dividing their widths");
        q = heads_of(q, qh), k = heads_of(k, kvh), v = heads_of(v, kvh);
    } else {
        qh = cn_dim(q, 1), kvh = cn_dim(k, 1);
        if (cn_dim(v, 1) != kvh) return onnx_bad(c, "K and V have different numbers of heads");
    }
    if (kvh <= 0 || qh % kvh) return onnx_bad(c, "%" PRId64 " query heads for %" PRId64 " key heads", qh, kvh);
    if (qh != kvh) { /* each K and V head serves qh / kvh query heads in a row */
        int64_t g = qh / kvh;
        for (int i = 0; i < 2; i++) {
            cn_tensor *t = i ? v : k;
            int64_t b = cn_dim(t, 0), s = cn_dim(t, 2), e = cn_dim(t, 3);
            t = cn_expand(cn_unsqueeze(t, 2), 5, (int64_t[]){b, kvh, g, s, e});
            t = cn_reshape(t, 4, (int64_t[]){b, qh, s, e});
            if (i) v = t;
            else k = t;
        }
    }
    const Onnx__AttributeProto *sa = onnx_attr(n, "scale");
    double scale = sa ? sa->f : 0.0;
    if (sa && !(scale > 0)) return onnx_unsup(c, "scale %g (positive scales are supported)", scale);
    cn_tensor *y = cn_scaled_dot_product_attention(q, k, v, mask, 0.0, causal, scale);
    if (y && r == 3) {
        int64_t b = cn_dim(y, 0), l = cn_dim(y, 2), e = cn_dim(y, 3);
        y = cn_reshape(cn_permute(y, (int[]){0, 2, 1, 3}, 4), 3, (int64_t[]){b, l, qh * e});
    }
    DONE(y);
}

/* Is p of x's dtype and shaped as x's axes from axis on? */
static bool is_normalized_shape(cn_tensor *x, int axis, cn_tensor *p) {
    int r = cn_ndim(x);
    if (cn_tensor_dtype(p) != cn_tensor_dtype(x) || cn_ndim(p) != r - axis) return false;
    for (int d = axis; d < r; d++)
        if (cn_dim(p, d - axis) != cn_dim(x, d) || cn_dim(p, d - axis) < 0) return false;
    return true;
}

H(h_layer_norm) {
    UNUSED;
    cn_tensor *x = in[0];
    int r = cn_ndim(x), axis = norm_axis(c, n, r);
    if (axis < 0) return axis;
    double eps = onnx_attr_float(n, "epsilon", 1e-5);
    cn_dtype dt = cn_tensor_dtype(x);
    /* One layer_norm op, unless the mean and inverse deviation are asked
     * for too, or the types or Scale's and B's shapes are ones only the
     * composition below takes (broadcasting, half types stashed in f32). */
    if (nout == 1 && (dt == CN_F32 || dt == CN_F64) && is_normalized_shape(x, axis, in[1]) &&
        (nin < 3 || !in[2] || is_normalized_shape(x, axis, in[2])))
        DONE(cn_layer_norm(x, r - axis, in[1], nin > 2 ? in[2] : NULL, eps));
    cn_tensor *xf = dt == CN_F64 ? x : cn_cast(x, CN_F32);
    int ax[CN_MAX_DIMS], na = 0;
    for (int i = axis; i < r; i++) ax[na++] = i;
    cn_tensor *mean = cn_mean(xf, ax, na, true);
    cn_tensor *d = cn_sub(xf, mean);
    cn_tensor *inv = cn_rsqrt(cn_add_scalar(cn_mean(cn_mul(d, d), ax, na, true), eps));
    cn_tensor *y = cn_mul(cn_cast(cn_mul(d, inv), dt), in[1]);
    if (nin > 2 && in[2]) y = cn_add(y, in[2]);
    if (nout > 1) out[1] = mean;
    if (nout > 2) out[2] = inv;
    DONE(y);
}

H(h_lrn) {
    UNUSED;
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    int64_t size = onnx_attr_int(n, "size", 0);
    if (size < 1) return onnx_bad(c, "size %" PRId64, size);
    if (r < 3) return onnx_bad(c, "input of rank %d", r);
    int64_t C = cn_dim(x, 1);
    if (C < 0) return onnx_unsup(c, "an unknown channel count");
    double alpha = onnx_attr_float(n, "alpha", 1e-4), beta = onnx_attr_float(n, "beta", 0.75),
           bias = onnx_attr_float(n, "bias", 1.0);
    /* Sum of squares over channels [c - floor((size-1)/2), c + ceil((size-1)/2)].
     * Channels past either end are zeros: a window wider than the channels
     * sums the same as one reaching just past them (a file may ask for a
     * billion; the divisor below stays `size`). */
    int64_t pre = (size - 1) / 2, post = size - 1 - pre, reach = C > 0 ? C - 1 : 0;
    if (pre > reach) pre = reach;
    if (post > reach) post = reach;
    int64_t window = pre + post + 1;
    int np = 2 * (r - 1);
    int64_t p[2 * CN_MAX_DIMS] = {0};
    p[np - 2] = pre;
    p[np - 1] = post;
    cn_tensor *sq = cn_pad(cn_mul(x, x), p, np, CN_PAD_CONSTANT, 0);
    cn_tensor *sum = NULL;
    for (int64_t i = 0; i < window; i++) {
        cn_tensor *t = cn_narrow(sq, 1, i, C);
        sum = sum ? cn_add(sum, t) : t;
    }
    cn_tensor *den = cn_pow_scalar(cn_add_scalar(cn_mul_scalar(sum, alpha / (double)size), bias), beta);
    DONE(cn_div(x, den));
}

H(h_mvn) {
    UNUSED;
    cn_tensor *x = in[0];
    int64_t axes[CN_MAX_DIMS];
    int k = onnx_attr_ints(n, "axes", axes, CN_MAX_DIMS);
    if (k == -2) return onnx_bad(c, "too many axes");
    if (k < 0) {
        axes[0] = 0, axes[1] = 2, axes[2] = 3;
        k = 3;
    }
    int ax[CN_MAX_DIMS];
    for (int i = 0; i < k; i++) {
        ax[i] = onnx_axis(c, axes[i], cn_ndim(x), "axis");
        if (ax[i] < 0) return CN_EINVAL;
    }
    cn_tensor *d = cn_sub(x, cn_mean(x, ax, k, true));
    cn_tensor *sd = cn_sqrt(cn_mean(cn_mul(d, d), ax, k, true));
    DONE(cn_div(d, cn_add_scalar(sd, 1e-9)));
}

/* ---- Resize / Upsample ---- */

typedef enum { CT_HALF, CT_PT_HALF, CT_ALIGN, CT_ASYM, CT_TF_HALF_NN, CT_TF_CROP } ctmode;
typedef enum { NM_FLOOR_PREF, NM_CEIL_PREF, NM_FLOOR, NM_CEIL } nmode;

static double cubic_w(double t, double A) {
    t = fabs(t);
    if (t <= 1) return ((A + 2) * t - (A + 3)) * t * t + 1;
    if (t < 2) return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
    return 0;
}

/* Resample axis `ax` of x from `in` to `outn` cells. */
static cn_tensor *resize_axis(cn_tensor *x, int ax, int64_t in, int64_t outn, double scale,
                              ctmode ct, int mode, nmode nm, double A, bool excl, double roi_s,
                              double roi_e, double extrap) {
    int taps = mode == 0 ? 1 : mode == 1 ? 2 : 4;
    int64_t *idx = malloc(sizeof *idx * (size_t)(outn * taps + 1));
    double *wt = malloc(sizeof *wt * (size_t)(outn * taps + 1));
    uint8_t *outside = calloc((size_t)outn + 1, 1);
    if (!idx || !wt || !outside) {
        free(idx), free(wt), free(outside);
        return cn_fail("resize: out of memory");
    }
    bool any_out = false;
    /* The reference maps through the unrounded output length scale * in. */
    double len = scale * (double)in;
    for (int64_t i = 0; i < outn; i++) {
        double xo;
        switch (ct) {
        case CT_HALF: xo = (i + 0.5) / scale - 0.5; break;
        case CT_PT_HALF: xo = outn > 1 ? (i + 0.5) / scale - 0.5 : -0.5; break;
        case CT_ALIGN: xo = len == 1 ? 0 : (double)i * (double)(in - 1) / (len - 1); break;
        case CT_ASYM: xo = i / scale; break;
        case CT_TF_HALF_NN: xo = (i + 0.5) / scale; break;
        default:
            xo = len != 1 ? roi_s * (in - 1) + i * (roi_e - roi_s) * (in - 1) / (len - 1)
                          : 0.5 * (roi_s + roi_e) * (in - 1);
            if (xo < 0 || xo > in - 1) outside[i] = 1, any_out = true;
        }
        double fl = floor(xo), r = xo - fl;
        /* A roi from the file can put xo anywhere (or make it NaN): taps
         * beyond the edges read the edge cells, so clamping to just past
         * them changes nothing and keeps the conversion defined. */
        if (!(fl >= -4)) fl = -4, r = 0;
        else if (fl > (double)in + 1) fl = (double)in + 1, r = 0;
        int64_t base = (int64_t)fl;
        if (mode == 0) {
            bool up;
            switch (nm) {
            case NM_FLOOR_PREF: up = r > 0.5; break;
            case NM_CEIL_PREF: up = r >= 0.5; break;
            case NM_FLOOR: up = false; break;
            default: up = r > 0; break;
            }
            int64_t j = base + (up ? 1 : 0);
            idx[i] = j < 0 ? 0 : j >= in ? in - 1 : j;
            wt[i] = 1;
            continue;
        }
        int64_t first = mode == 1 ? base : base - 1;
        double sum = 0;
        for (int t = 0; t < taps; t++) {
            int64_t j = first + t;
            double w = mode == 1 ? (t == 0 ? 1 - r : r) : cubic_w(r - (t - (mode == 2 ? 1 : 0)), A);
            if (excl && (j < 0 || j >= in)) w = 0;
            sum += w;
            idx[i * taps + t] = j < 0 ? 0 : j >= in ? in - 1 : j;
            wt[i * taps + t] = w;
        }
        if (excl && sum != 0)
            for (int t = 0; t < taps; t++) wt[i * taps + t] /= sum;
    }
    int r = cn_ndim(x);
    int64_t shp[CN_MAX_DIMS];
    for (int i = 0; i < r; i++) shp[i] = i == ax ? outn : 1;
    cn_tensor *y = NULL;
    cn_scope_begin();
    for (int t = 0; t < taps; t++) {
        int64_t *it = malloc(sizeof *it * (size_t)(outn + 1));
        double *wtt = malloc(sizeof *wtt * (size_t)(outn + 1));
        if (!it || !wtt) {
            free(it), free(wtt);
            y = NULL;
            break;
        }
        for (int64_t i = 0; i < outn; i++) it[i] = idx[i * taps + t], wtt[i] = wt[i * taps + t];
        cn_tensor *g = cn_index_select(x, ax, cn_from_data(CN_I64, 1, (int64_t[]){outn}, it));
        if (taps > 1) {
            cn_tensor *wv = cn_cast(cn_reshape(cn_from_data(CN_F64, 1, (int64_t[]){outn}, wtt), r, shp),
                                    cn_tensor_dtype(x));
            g = cn_mul(g, wv);
        }
        free(it), free(wtt);
        y = y ? cn_add(y, g) : g;
    }
    if (y && any_out) {
        cn_tensor *m = cn_from_data(CN_U8, 1, (int64_t[]){outn}, outside);
        y = cn_where(cn_reshape(cn_cast(m, CN_BOOL), r, shp), cn_scalar(cn_tensor_dtype(x), extrap), y);
    }
    cn_keep(y);
    cn_scope_end();
    free(idx), free(wt), free(outside);
    return y;
}

static int resize_common(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor *x, cn_tensor *scales_t,
                         cn_tensor *sizes_t, cn_tensor *roi_t, const double *scales_attr,
                         cn_tensor **out) {
    int r = cn_ndim(x);
    for (int i = 0; i < r; i++)
        if (cn_dim(x, i) < 0) return onnx_unsup(c, "unknown input sizes");
    char mb[32], cb[40], nb[32];
    const char *mode = onnx_attr_str(n, "mode", "nearest", mb, sizeof mb);
    int m = !strcmp(mode, "nearest") ? 0 : !strcmp(mode, "linear") || !strcmp(mode, "bilinear") ? 1
            : !strcmp(mode, "cubic") ? 2 : -1;
    if (m < 0) return onnx_unsup(c, "mode '%s'", mode);
    bool legacy = c->opset_of_node < 11;
    const char *cts = onnx_attr_str(n, "coordinate_transformation_mode", legacy ? "asymmetric" : "half_pixel", cb, sizeof cb);
    ctmode ct;
    if (!strcmp(cts, "half_pixel")) ct = CT_HALF;
    else if (!strcmp(cts, "pytorch_half_pixel")) ct = CT_PT_HALF;
    else if (!strcmp(cts, "align_corners")) ct = CT_ALIGN;
    else if (!strcmp(cts, "asymmetric")) ct = CT_ASYM;
    else if (!strcmp(cts, "tf_half_pixel_for_nn")) ct = CT_TF_HALF_NN;
    else if (!strcmp(cts, "tf_crop_and_resize")) ct = CT_TF_CROP;
    else return onnx_unsup(c, "coordinate_transformation_mode '%s'", cts);
    /* Upsample and Resize-10 pick the nearest cell by flooring. */
    const char *nms = onnx_attr_str(n, "nearest_mode", legacy ? "floor" : "round_prefer_floor", nb, sizeof nb);
    nmode nm;
    if (!strcmp(nms, "round_prefer_floor")) nm = NM_FLOOR_PREF;
    else if (!strcmp(nms, "round_prefer_ceil")) nm = NM_CEIL_PREF;
    else if (!strcmp(nms, "floor")) nm = NM_FLOOR;
    else if (!strcmp(nms, "ceil")) nm = NM_CEIL;
    else return onnx_unsup(c, "nearest_mode '%s'", nms);
    double A = onnx_attr_float(n, "cubic_coeff_a", -0.75);
    bool excl = onnx_attr_int(n, "exclude_outside", 0);
    double extrap = onnx_attr_float(n, "extrapolation_value", 0.0);
    double sc[CN_MAX_DIMS], roi[2 * CN_MAX_DIMS];
    int64_t os[CN_MAX_DIMS];
    /* Opset 18's axes: scales, sizes and roi for these axes only (k of
     * them); the others keep their size. ax[j] is the axis of value j. */
    int64_t axes[CN_MAX_DIMS];
    int ax[CN_MAX_DIMS], k = onnx_attr_ints(n, "axes", axes, CN_MAX_DIMS);
    if (k == -2 || k == 0) return onnx_bad(c, "axes must list 1 to %d axes", r);
    if (k < 0) {
        k = r;
        for (int i = 0; i < r; i++) ax[i] = i;
    } else {
        for (int j = 0; j < k; j++) {
            if ((ax[j] = onnx_axis(c, axes[j], r, "axis")) < 0) return CN_EINVAL;
            for (int i = 0; i < j; i++)
                if (ax[i] == ax[j]) return onnx_bad(c, "axis %d listed twice", ax[j]);
        }
    }
    for (int i = 0; i < r; i++) roi[i] = 0, roi[r + i] = 1, sc[i] = 1, os[i] = cn_dim(x, i);
    if (ct == CT_TF_CROP) {
        double rv[2 * CN_MAX_DIMS];
        if (!roi_t || cn_numel(roi_t) != 2 * k) return onnx_bad(c, "tf_crop_and_resize needs roi with %d values", 2 * k);
        if (cn_is_symbolic_tensor(roi_t)) return onnx_unsup(c, "input 'roi' is computed at run time (only constants are supported)");
        if (cn_copy_to_buffer(roi_t, CN_F64, rv, sizeof rv) < 0) return CN_EINVAL;
        for (int j = 0; j < k; j++) roi[ax[j]] = rv[j], roi[r + ax[j]] = rv[k + j];
    }
    char kb[16];
    const char *keep = onnx_attr_str(n, "keep_aspect_ratio_policy", "stretch", kb, sizeof kb);
    if (strcmp(keep, "stretch") && strcmp(keep, "not_larger") && strcmp(keep, "not_smaller"))
        return onnx_unsup(c, "keep_aspect_ratio_policy '%s'", keep);
    if (sizes_t && cn_numel(sizes_t) > 0) {
        int64_t sz[CN_MAX_DIMS];
        int ks = onnx_const_ints(c, sizes_t, "sizes", sz, CN_MAX_DIMS);
        if (ks < 0) return ks;
        if (ks != k) return onnx_bad(c, "sizes has %d values for %d axes", ks, k);
        for (int j = 0; j < k; j++) sc[ax[j]] = (double)sz[j] / (double)cn_dim(x, ax[j]);
        if (strcmp(keep, "stretch")) {
            /* One scale for every listed axis: the smallest (not_larger)
             * or the largest, and sizes rounded from it. */
            double s1 = sc[ax[0]];
            for (int j = 1; j < k; j++)
                s1 = !strcmp(keep, "not_larger") ? fmin(s1, sc[ax[j]]) : fmax(s1, sc[ax[j]]);
            for (int j = 0; j < k; j++) {
                sc[ax[j]] = s1;
                sz[j] = (int64_t)floor(s1 * (double)cn_dim(x, ax[j]) + 0.5); /* halves up */
            }
        }
        for (int j = 0; j < k; j++) os[ax[j]] = sz[j];
    } else {
        if (scales_attr) memcpy(sc, scales_attr, sizeof(double) * (size_t)r);
        else {
            double sv[CN_MAX_DIMS];
            if (!scales_t) return onnx_bad(c, "neither scales nor sizes");
            if (cn_is_symbolic_tensor(scales_t))
                return onnx_unsup(c, "input 'scales' is computed at run time (only constants are supported)");
            if (cn_numel(scales_t) != k) return onnx_bad(c, "scales has %" PRId64 " values for %d axes", cn_numel(scales_t), k);
            if (cn_copy_to_buffer(scales_t, CN_F64, sv, sizeof sv) < 0) return CN_EINVAL;
            for (int j = 0; j < k; j++) sc[ax[j]] = sv[j];
        }
        for (int i = 0; i < r; i++) {
            if (!(sc[i] > 0)) return onnx_bad(c, "scale %g", sc[i]);
            /* Scales are floats in the file: the reference multiplies in float. */
            float size = (float)sc[i] * (float)cn_dim(x, i);
            if (!(size < 0x1p62f)) return onnx_bad(c, "scale %g makes axis %d %g long", sc[i], i, (double)size);
            os[i] = (int64_t)size;
        }
    }
    if (onnx_check_size(c, r, os) < 0) return CN_EINVAL;
    /* Opset 18's antialias widens the filter where linear or cubic
     * sampling shrinks an axis; growing, it changes nothing. */
    if (onnx_attr_int(n, "antialias", 0) && m > 0)
        for (int i = 0; i < r; i++)
            if (sc[i] < 1) return onnx_unsup(c, "antialias when an axis shrinks");
    cn_tensor *y = x;
    for (int i = r - 1; i >= 0 && y; i--) {
        int64_t d = cn_dim(x, i);
        if (os[i] == d && sc[i] == 1.0 && ct != CT_TF_CROP) continue;
        if (os[i] < 1) return onnx_bad(c, "output size %" PRId64 " on axis %d", os[i], i);
        y = resize_axis(y, i, d, os[i], sc[i], ct, m, nm, A, excl, roi[i], roi[r + i], extrap);
    }
    DONE(y);
}

H(h_resize) {
    UNUSED;
    if (c->opset_of_node < 11) return resize_common(c, n, in[0], in[1], NULL, NULL, NULL, out);
    return resize_common(c, n, in[0], nin > 2 ? in[2] : NULL, nin > 3 ? in[3] : NULL,
                         nin > 1 ? in[1] : NULL, NULL, out);
}

H(h_upsample) {
    UNUSED;
    if (c->opset_of_node < 9) {
        float f[CN_MAX_DIMS];
        int k = onnx_attr_floats(n, "scales", f, CN_MAX_DIMS);
        if (k != cn_ndim(in[0])) return onnx_bad(c, "scales must have one value per axis");
        double d[CN_MAX_DIMS];
        for (int i = 0; i < k; i++) d[i] = f[i];
        return resize_common(c, n, in[0], NULL, NULL, NULL, d, out);
    }
    if (nin < 2) return onnx_bad(c, "no scales");
    return resize_common(c, n, in[0], in[1], NULL, NULL, NULL, out);
}

/* ---- losses ---- */

static int nll(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor *logp, cn_tensor *target,
               cn_tensor *weight, cn_tensor **loss) {
    char rb[16];
    const char *red = onnx_attr_str(n, "reduction", "mean", rb, sizeof rb);
    if (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none"))
        return onnx_unsup(c, "reduction '%s'", red);
    if (cn_ndim(logp) < 2 || cn_ndim(target) != cn_ndim(logp) - 1)
        return onnx_bad(c, "input must be [N, C, ...] and target [N, ...]");
    const Onnx__AttributeProto *ig = onnx_attr(n, "ignore_index");
    cn_tensor *t = cn_cast(target, CN_I64), *valid = NULL;
    if (ig) {
        valid = cn_ne(t, cn_scalar(CN_I64, (double)ig->i));
        t = cn_where(valid, t, cn_scalar(CN_I64, 0));
    }
    cn_tensor *picked = cn_squeeze(cn_gather(logp, 1, cn_unsqueeze(t, 1)), 1);
    cn_tensor *l = cn_neg(picked), *w = NULL;
    if (weight) {
        int rt = cn_ndim(t);
        w = cn_reshape(cn_index_select(weight, 0, cn_reshape(t, 1, (int64_t[]){-1})), rt, cn_shape(t));
    }
    if (valid) {
        cn_tensor *v = cn_cast(valid, cn_tensor_dtype(logp));
        w = w ? cn_mul(w, v) : v;
    }
    if (w) l = cn_mul(l, w);
    if (!strcmp(red, "none")) *loss = l;
    else if (!strcmp(red, "sum")) *loss = cn_sum(l, NULL, 0, false);
    else if (w) *loss = cn_div(cn_sum(l, NULL, 0, false), cn_sum(w, NULL, 0, false));
    else *loss = cn_mean(l, NULL, 0, false);
    return *loss ? 0 : CN_EINVAL;
}

H(h_nll_loss) {
    UNUSED;
    return nll(c, n, in[0], in[1], nin > 2 ? in[2] : NULL, &out[0]);
}

H(h_softmax_ce_loss) {
    UNUSED;
    cn_tensor *lp = cn_log_softmax(in[0], 1);
    if (!lp) return CN_EINVAL;
    if (nout > 1) out[1] = lp;
    return nll(c, n, lp, in[1], nin > 2 ? in[2] : NULL, &out[0]);
}

const onnx_op_entry cn_onnx_ops_nn[] = {
    {"BatchNormalization", h_batch_norm, "epsilon,momentum,is_test,spatial,consumed_inputs,training_mode",
     5, 5, 3, "training_mode = 1 only in a trainable load"},
    {"InstanceNormalization", h_instance_norm, "epsilon", 3, 3, 1, ""},
    {"RMSNormalization", h_rms_norm, "axis,epsilon,stash_type", 2, 2, 1, "stash_type 1"},
    {"Attention", h_attention,
     "is_causal,kv_num_heads,q_num_heads,qk_matmul_output_mode,scale,softcap,softmax_precision", 3, 6, 1,
     "no past_key/past_value (KV cache), no present or qk outputs, no softcap, not attn_mask with is_causal"},
    {"GroupNormalization", h_group_norm, "epsilon,num_groups,stash_type", 3, 3, 1,
     "known channels and spatial sizes"},
    {"LayerNormalization", h_layer_norm, "axis,epsilon,stash_type", 2, 3, 3, "stash_type 1"},
    {"LRN", h_lrn, "alpha,beta,bias,size", 1, 1, 1, ""},
    {"MeanVarianceNormalization", h_mvn, "axes", 1, 1, 1, ""},
    {"Resize", h_resize,
     "mode,coordinate_transformation_mode,nearest_mode,cubic_coeff_a,exclude_outside,extrapolation_value,"
     "antialias,axes,keep_aspect_ratio_policy",
     1, 4, 1, "known input sizes; scales, sizes and roi constants"},
    {"Upsample", h_upsample, "mode,scales", 1, 2, 1, "known input sizes; constant scales"},
    {"NegativeLogLikelihoodLoss", h_nll_loss, "reduction,ignore_index", 2, 3, 1, ""},
    {"SoftmaxCrossEntropyLoss", h_softmax_ce_loss, "reduction,ignore_index", 2, 3, 2, ""},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

#endif /* CN_HAVE_ONNX */
