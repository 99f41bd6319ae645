/* ONNX import: the quantized operators of ONNX Runtime's com.microsoft
 * domain that its quantizer writes in the QOperator format (QLinearAdd,
 * QLinearMul, QLinearConcat, QLinearGlobalAveragePool,
 * QLinearAveragePool, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax,
 * QGemm) and that domain's QuantizeLinear / DequantizeLinear, as in the
 * int8 models of the ONNX model zoo.
 *
 * Each one is what its definition says: the inputs dequantized, the float
 * op (the default domain's own handler, on the same node's attributes),
 * the result quantized with rounding half to even and saturation. ONNX
 * Runtime computes some of them in fixed point or through lookup tables,
 * so a result may differ from its by one quantization step where the
 * exact value lies within rounding of a half step. */
#include "onnx_internal.h"

#include <stdlib.h>
#include <string.h>

#ifdef CN_HAVE_ONNX

static cn_tensor *opt(cn_tensor **in, int nin, int i) { return i < nin ? in[i] : NULL; }

static bool is_q8(cn_tensor *t) {
    cn_dtype dt = cn_tensor_dtype(t);
    return dt == CN_U8 || dt == CN_I8;
}

/* (x - zp) * scale in f32 (zp may be NULL: 0). */
static cn_tensor *deq(cn_tensor *x, cn_tensor *scale, cn_tensor *zp) {
    cn_tensor *v = cn_cast(x, CN_F32);
    if (zp) v = cn_sub(v, cn_cast(zp, CN_F32));
    return cn_mul(v, cn_cast(scale, CN_F32));
}

/* A result's scale (required) and zero point (uint8 or int8, optional). */
static int check_out(onnx_ctx *c, cn_tensor *scale, cn_tensor *zp, const char *what) {
    if (!scale) return onnx_bad(c, "%s's scale is missing", what);
    if (cn_numel(scale) != 1 || (zp && cn_numel(zp) != 1))
        return onnx_bad(c, "%s's scale and zero point must be scalars", what);
    if (zp && !is_q8(zp))
        return onnx_unsup(c, "%s's zero point of type %s (uint8 and int8 are supported)", what,
                          cn_dtype_name(cn_tensor_dtype(zp)));
    return 0;
}

/* round(v / scale) + zp saturated to zp's type (uint8 without a zp). */
static cn_tensor *quant(cn_tensor *v, cn_tensor *scale, cn_tensor *zp) {
    cn_dtype dt = zp ? cn_tensor_dtype(zp) : CN_U8;
    cn_tensor *r = cn_round(cn_div(v, cn_cast(scale, CN_F32)));
    if (zp) r = cn_add(r, cn_cast(zp, CN_F32));
    return cn_cast(cn_clamp(r, dt == CN_U8 ? 0 : -128, dt == CN_U8 ? 255 : 127), dt);
}

static int check(onnx_ctx *c, cn_tensor *x, cn_tensor *zp, const char *what) {
    if (!x) return onnx_bad(c, "%s is missing", what);
    if (zp && cn_numel(zp) != 1) return onnx_bad(c, "%s's zero point must be a scalar", what);
    if (!is_q8(x))
        return onnx_unsup(c, "%s of type %s (uint8 and int8 are supported)", what,
                          cn_dtype_name(cn_tensor_dtype(x)));
    if (zp && cn_tensor_dtype(zp) != cn_tensor_dtype(x))
        return onnx_bad(c, "%s is %s but its zero point %s", what, cn_dtype_name(cn_tensor_dtype(x)),
                        cn_dtype_name(cn_tensor_dtype(zp)));
    return 0;
}

/* The default domain's op on float inputs, reading this node's attributes. */
static int float_op(onnx_ctx *c, const Onnx__NodeProto *n, const char *op, cn_tensor **fin, int k,
                    cn_tensor **y) {
    const onnx_op_entry *e = onnx_find_op(NULL, op);
    if (!e) return onnx_unsup(c, "no float %s", op);
    *y = NULL;
    int rc = e->fn(c, n, fin, k, y, 1);
    return rc < 0 ? rc : *y ? 0 : CN_EINVAL;
}

/* NHWC <-> NCHW for the channels_last attribute of the pools. */
static cn_tensor *to_channels_first(cn_tensor *x) {
    int r = cn_ndim(x), p[CN_MAX_DIMS] = {0, r - 1};
    for (int i = 2; i < r; i++) p[i] = i - 1;
    return cn_permute(x, p, r);
}

static cn_tensor *to_channels_last(cn_tensor *x) {
    int r = cn_ndim(x), p[CN_MAX_DIMS] = {0};
    for (int i = 1; i < r - 1; i++) p[i] = i + 1;
    p[r - 1] = 1;
    return cn_contiguous(cn_permute(x, p, r));
}

/* A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp */
static int binary(onnx_ctx *c, cn_tensor **in, int nin, cn_tensor **out, bool mul) {
    cn_tensor *a = in[0], *b = opt(in, nin, 3), *azp = opt(in, nin, 2), *bzp = opt(in, nin, 5);
    cn_tensor *czp = opt(in, nin, 7);
    int rc;
    if ((rc = check(c, a, azp, "A")) < 0 || (rc = check(c, opt(in, nin, 3), bzp, "B")) < 0 ||
        (rc = check_out(c, opt(in, nin, 6), czp, "C")) < 0)
        return rc;
    cn_tensor *as = opt(in, nin, 1), *bs = opt(in, nin, 4);
    if (!as || !bs) return onnx_bad(c, "A's or B's scale is missing");
    if (cn_numel(as) != 1 || cn_numel(bs) != 1) return onnx_bad(c, "A's and B's scales must be scalars");
    cn_tensor *fa = deq(a, as, azp), *fb = deq(b, bs, bzp);
    DONE(quant(mul ? cn_mul(fa, fb) : cn_add(fa, fb), in[6], czp));
}

H(h_qlinear_add) {
    UNUSED;
    return binary(c, in, nin, out, false);
}

H(h_qlinear_mul) {
    UNUSED;
    return binary(c, in, nin, out, true);
}

/* X, X_scale, X_zp, Y_scale, Y_zp around a one-input float op. */
static int unary(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor **in, int nin, cn_tensor **out,
                 const char *op, bool channels) {
    cn_tensor *x = in[0], *xzp = opt(in, nin, 2), *yzp = opt(in, nin, 4);
    int rc;
    if ((rc = check(c, x, xzp, "X")) < 0 || (rc = check_out(c, opt(in, nin, 3), yzp, "Y")) < 0)
        return rc;
    if (cn_numel(in[1]) != 1) return onnx_bad(c, "X's scale must be a scalar");
    bool last = channels && onnx_attr_int(n, "channels_last", 0);
    if (last && cn_ndim(x) < 3) return onnx_bad(c, "channels_last on a tensor of rank %d", cn_ndim(x));
    cn_tensor *f = deq(x, in[1], xzp), *y;
    if (last) f = to_channels_first(f);
    rc = float_op(c, n, op, &f, 1, &y);
    if (rc < 0) return rc;
    if (last) y = to_channels_last(y);
    DONE(quant(y, in[3], yzp));
}

H(h_qlinear_global_average_pool) {
    UNUSED;
    return unary(c, n, in, nin, out, "GlobalAveragePool", true);
}

H(h_qlinear_average_pool) {
    UNUSED;
    return unary(c, n, in, nin, out, "AveragePool", true);
}

H(h_qlinear_sigmoid) {
    UNUSED;
    return unary(c, n, in, nin, out, "Sigmoid", false);
}

H(h_qlinear_leaky_relu) {
    UNUSED;
    return unary(c, n, in, nin, out, "LeakyRelu", false);
}

/* The "opset" attribute says which Softmax it is (before 13: the input
 * flattened to 2-D at axis); axis defaults to -1 whatever the opset, as
 * ONNX Runtime's schema says. */
H(h_qlinear_softmax) {
    UNUSED;
    cn_tensor *x = in[0], *xzp = opt(in, nin, 2), *yzp = opt(in, nin, 4);
    int rc;
    if ((rc = check(c, x, xzp, "X")) < 0 || (rc = check_out(c, opt(in, nin, 3), yzp, "Y")) < 0)
        return rc;
    if (cn_numel(in[1]) != 1) return onnx_bad(c, "X's scale must be a scalar");
    int64_t v = onnx_attr_int(n, "opset", 0);
    if (v < 1 || v > 1000) return onnx_bad(c, "attribute 'opset' %lld (the Softmax version it follows)", (long long)v);
    int r = cn_ndim(x), axis = onnx_axis(c, onnx_attr_int(n, "axis", -1), r, "axis");
    if (axis == INT_MIN) return CN_EINVAL;
    cn_tensor *f = deq(x, in[1], xzp), *y;
    if (v < 13) {
        int64_t rows = 1;
        for (int i = 0; i < axis; i++) rows *= cn_dim(x, i);
        y = cn_reshape(cn_softmax(cn_reshape(f, 2, (int64_t[]){rows, -1}), 1), r, cn_shape(x));
    } else
        y = cn_softmax(f, axis);
    DONE(quant(y, in[3], yzp));
}

/* Y_scale, Y_zp, then (X, X_scale, X_zp) for each input. */
H(h_qlinear_concat) {
    UNUSED;
    if (nin < 5 || (nin - 2) % 3) return onnx_bad(c, "%d inputs (Y_scale, Y_zero_point and triples of X, X_scale, X_zero_point)", nin);
    int k = (nin - 2) / 3;
    cn_tensor **f = malloc((size_t)k * sizeof *f);
    if (!f) return CN_ENOMEM;
    int rc = 0;
    for (int i = 0; i < k && rc == 0; i++) {
        cn_tensor *x = in[2 + 3 * i], *zp = in[4 + 3 * i];
        if (!x || !in[3 + 3 * i]) rc = onnx_bad(c, "input %d or its scale is missing", i);
        else if (cn_numel(in[3 + 3 * i]) != 1) rc = onnx_bad(c, "input %d's scale must be a scalar", i);
        else if ((rc = check(c, x, zp, "X")) == 0 && !(f[i] = deq(x, in[3 + 3 * i], zp))) rc = CN_EINVAL;
    }
    cn_tensor *y = NULL;
    if (rc == 0) rc = check_out(c, in[0], in[1], "Y");
    if (rc == 0) rc = float_op(c, n, "Concat", f, k, &y);
    free(f);
    if (rc < 0) return rc;
    DONE(quant(y, in[0], in[1]));
}

/* A, a_scale, a_zp, B, b_scale, b_zp, C (int32, scale a_scale * b_scale),
 * y_scale, y_zp: alpha * A' B' + C, quantized when y_scale is given. */
H(h_qgemm) {
    UNUSED;
    cn_tensor *a = in[0], *b = opt(in, nin, 3), *azp = opt(in, nin, 2), *bzp = opt(in, nin, 5);
    cn_tensor *bias = opt(in, nin, 6), *ys = opt(in, nin, 7), *yzp = opt(in, nin, 8);
    int rc;
    if ((rc = check(c, a, azp, "A")) < 0 || (rc = check(c, b, NULL, "B")) < 0 ||
        (ys && (rc = check_out(c, ys, yzp, "Y")) < 0))
        return rc;
    if (bzp && cn_tensor_dtype(bzp) != cn_tensor_dtype(b))
        return onnx_bad(c, "B is %s but its zero point %s", cn_dtype_name(cn_tensor_dtype(b)),
                        cn_dtype_name(cn_tensor_dtype(bzp)));
    if (!opt(in, nin, 1) || !opt(in, nin, 4)) return onnx_bad(c, "a_scale or b_scale is missing");
    if (cn_numel(in[1]) != 1) return onnx_bad(c, "a_scale must be a scalar");
    if (yzp && !ys) return onnx_bad(c, "y_zero_point without y_scale");
    if (bias && cn_tensor_dtype(bias) != CN_I32)
        return onnx_bad(c, "C must be int32, not %s", cn_dtype_name(cn_tensor_dtype(bias)));
    if (cn_ndim(a) != 2 || cn_ndim(b) != 2) return onnx_bad(c, "A and B must be matrices");
    /* a per-column scale and zero point of B index N: B's columns, or
     * its rows when transB */
    cn_tensor *bs = in[4], *bz = bzp;
    int64_t ncols = cn_ndim(b) == 2 ? cn_dim(b, onnx_attr_int(n, "transB", 0) ? 0 : 1) : -1;
    if ((cn_numel(bs) != 1 && cn_numel(bs) != ncols) || (bz && cn_numel(bz) != 1 && cn_numel(bz) != ncols))
        return onnx_bad(c, "b_scale and b_zero_point hold one value or one per column of B");
    int64_t col[2] = {onnx_attr_int(n, "transB", 0) ? -1 : 1, onnx_attr_int(n, "transB", 0) ? 1 : -1};
    if (cn_numel(bs) > 1) bs = cn_reshape(bs, 2, col);
    if (bz && cn_numel(bz) > 1) bz = cn_reshape(bz, 2, col);
    cn_tensor *fa = deq(a, in[1], azp), *fb = deq(b, bs, bz);
    if (onnx_attr_int(n, "transA", 0)) fa = cn_transpose(fa, 0, 1);
    if (onnx_attr_int(n, "transB", 0)) fb = cn_transpose(fb, 0, 1);
    /* alpha scales the bias too: alpha (A'B' + C a_scale b_scale) */
    cn_tensor *y = cn_matmul(fa, fb);
    if (bias) {
        cn_tensor *cs = cn_mul(cn_cast(in[1], CN_F32), cn_cast(in[4], CN_F32));
        y = cn_add(y, cn_mul(cn_cast(bias, CN_F32), cs));
    }
    y = cn_mul_scalar(y, onnx_attr_float(n, "alpha", 1.0));
    DONE(ys ? quant(y, ys, yzp) : y);
}

/* This domain's QuantizeLinear and DequantizeLinear are the standard ones. */
H(h_ms_quantize) {
    UNUSED;
    return float_op(c, n, "QuantizeLinear", in, nin, out);
}

H(h_ms_dequantize) {
    UNUSED;
    return float_op(c, n, "DequantizeLinear", in, nin, out);
}

/* Names carry the domain, so that the op table (`chutney info
 * --supported-ops`) tells them from the default domain's. */
#define MS "com.microsoft."
#define POOL_ATTRS "auto_pad,ceil_mode,count_include_pad,kernel_shape,pads,strides,channels_last"

const onnx_op_entry cn_onnx_ops_ms[] = {
    {MS "QLinearAdd", h_qlinear_add, "", 2, 8, 1, "uint8 and int8"},
    {MS "QLinearMul", h_qlinear_mul, "", 2, 8, 1, "uint8 and int8"},
    {MS "QLinearConcat", h_qlinear_concat, "axis", 5, ONNX_MAX_INPUTS, 1, "uint8 and int8"},
    {MS "QLinearGlobalAveragePool", h_qlinear_global_average_pool, "channels_last", 2, 5, 1, "uint8 and int8"},
    {MS "QLinearAveragePool", h_qlinear_average_pool, POOL_ATTRS, 2, 5, 1, "as AveragePool; uint8 and int8"},
    {MS "QLinearSigmoid", h_qlinear_sigmoid, "", 2, 5, 1, "uint8 and int8"},
    {MS "QLinearLeakyRelu", h_qlinear_leaky_relu, "alpha", 2, 5, 1, "uint8 and int8"},
    {MS "QLinearSoftmax", h_qlinear_softmax, "axis,opset", 2, 5, 1, "uint8 and int8"},
    {MS "QGemm", h_qgemm, "alpha,transA,transB", 2, 9, 1, "uint8 and int8; 2-D"},
    {MS "QuantizeLinear", h_ms_quantize, "axis", 2, 3, 1, "as the default domain's"},
    {MS "DequantizeLinear", h_ms_dequantize, "axis", 2, 3, 1, "as the default domain's"},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

#endif /* CN_HAVE_ONNX */
