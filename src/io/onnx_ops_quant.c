/* ONNX import: quantisation (QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear) and the integer products (MatMulInteger,
 * ConvInteger, QLinearMatMul, QLinearConv), opsets 10 to 17.
 *
 * Products are exact: matrix products through cn_matmul_integer (the int8
 * GEMM, int32 sums); convolutions in f64, where every int32 sum is exact
 * (an operand pair contributes at most 255 * 255, far from 2^53), then
 * cast to i32. Requantisation rounds half to even and saturates, as the
 * standard says. */
#include "onnx_internal.h"

#include <inttypes.h>

#ifdef CN_HAVE_ONNX

static bool is_q8(cn_dtype dt) { return dt == CN_U8 || dt == CN_I8; }

/* v clamped to dt's range (u8 or i8) and cast. */
static cn_tensor *saturate(cn_tensor *v, cn_dtype dt) {
    return cn_cast(cn_clamp(v, dt == CN_U8 ? 0 : -128, dt == CN_U8 ? 255 : 127), dt);
}

/* A per-axis parameter (1-D, more than one value) shaped to broadcast
 * along axis of a rank-r value; scalars and one-element vectors as they
 * are. NULL after onnx_bad. */
static cn_tensor *along(onnx_ctx *c, cn_tensor *p, int64_t axis, int r, const char *what) {
    if (!p || cn_ndim(p) == 0 || (cn_ndim(p) == 1 && cn_numel(p) == 1)) return p;
    if (cn_ndim(p) != 1) {
        onnx_bad(c, "%s must be a scalar or 1-D, not of rank %d", what, cn_ndim(p));
        return NULL;
    }
    int a = onnx_axis(c, axis, r, "axis");
    if (a == INT_MIN) return NULL;
    int64_t shape[CN_MAX_DIMS];
    for (int i = 0; i < r; i++) shape[i] = i == a ? -1 : 1;
    return cn_reshape(p, r, shape);
}

static cn_tensor *as_f32(cn_tensor *t) { return t ? cn_cast(t, CN_F32) : NULL; }

/* round(v) + zp, saturated to dt. */
static cn_tensor *requantize(cn_tensor *v, cn_tensor *zp, cn_dtype dt) {
    cn_tensor *r = cn_round(v);
    return saturate(zp ? cn_add(r, as_f32(zp)) : r, dt);
}

static int check_q8(onnx_ctx *c, cn_tensor *t, const char *what) {
    if (t && !is_q8(cn_tensor_dtype(t)))
        return onnx_unsup(c, "%s of type %s (uint8 and int8 are supported)", what,
                          cn_dtype_name(cn_tensor_dtype(t)));
    return 0;
}

/* QuantizeLinear's and DequantizeLinear's scale and zero point (*zp may
 * be NULL), shaped to broadcast along the node's axis of x; names "y" or
 * "x" in messages. */
static int scale_and_zero(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor *x, cn_tensor *s,
                          cn_tensor **scale, cn_tensor **zp, const char *name) {
    char what[32];
    int64_t axis = onnx_attr_int(n, "axis", 1);
    if (onnx_attr_int(n, "block_size", 0) != 0) return onnx_unsup(c, "block_size (blocked quantization)");
    snprintf(what, sizeof what, "%s_scale", name);
    *scale = along(c, s, axis, cn_ndim(x), what);
    snprintf(what, sizeof what, "%s_zero_point", name);
    if (*zp && !(*zp = along(c, *zp, axis, cn_ndim(x), what))) return CN_EINVAL;
    return *scale ? 0 : CN_EINVAL;
}

H(h_quantize) {
    UNUSED;
    cn_tensor *x = in[0], *zp = nin > 2 ? in[2] : NULL;
    if (check_q8(c, zp, "y_zero_point") < 0) return CN_EUNSUPPORTED;
    /* Opset 21's output_dtype: the result's type where no zero point gives it. */
    int64_t odt = onnx_attr_int(n, "output_dtype", 0);
    if (odt < 0 || odt > INT32_MAX) return onnx_bad(c, "output_dtype %" PRId64, odt);
    int want = odt ? onnx_dtype((int32_t)odt) : -1;
    if (odt && (want < 0 || !is_q8((cn_dtype)want)))
        return onnx_unsup(c, "output_dtype %s (uint8 and int8 are supported)", onnx_dtype_name((int32_t)odt));
    if (odt && zp && cn_tensor_dtype(zp) != (cn_dtype)want)
        return onnx_bad(c, "output_dtype %s and y_zero_point of type %s", onnx_dtype_name((int32_t)odt),
                        cn_dtype_name(cn_tensor_dtype(zp)));
    cn_tensor *scale;
    if (scale_and_zero(c, n, x, in[1], &scale, &zp, "y") < 0) return CN_EINVAL;
    DONE(requantize(cn_div(as_f32(x), scale), zp, zp ? cn_tensor_dtype(zp) : odt ? (cn_dtype)want : CN_U8));
}

H(h_dequantize) {
    UNUSED;
    cn_tensor *x = in[0], *zp = nin > 2 ? in[2] : NULL;
    cn_dtype dt = cn_tensor_dtype(x);
    /* Opset 23's output_dtype: float (the default, as the scale's) only */
    int64_t odt = onnx_attr_int(n, "output_dtype", 0);
    if (odt && onnx_dtype(odt >= 0 && odt <= INT32_MAX ? (int32_t)odt : -1) != CN_F32)
        return onnx_unsup(c, "output_dtype other than float");
    if (!is_q8(dt) && dt != CN_I32)
        return onnx_unsup(c, "x of type %s (uint8, int8 and int32 are supported)", cn_dtype_name(dt));
    cn_tensor *scale;
    if (scale_and_zero(c, n, x, in[1], &scale, &zp, "x") < 0) return CN_EINVAL;
    cn_tensor *v = as_f32(x);
    DONE(cn_mul(zp ? cn_sub(v, as_f32(zp)) : v, scale));
}

/* The scale and zero point that map [min(x, 0), max(x, 0)] onto 0..255; an
 * empty range (x all zeros) takes the scale 1/255, as ONNX's reference does,
 * rather than 0, which later divisions would turn into inf. */
H(h_dynamic_quantize) {
    UNUSED;
    cn_tensor *x = as_f32(in[0]), *zero = onnx_scalar_of(x, 0);
    cn_tensor *lo = cn_minimum(cn_min(x, NULL, 0, false), zero);
    cn_tensor *hi = cn_maximum(cn_max(x, NULL, 0, false), zero);
    cn_tensor *range = cn_where(cn_eq(hi, lo), onnx_scalar_of(x, 1), cn_sub(hi, lo));
    cn_tensor *scale = cn_div(range, onnx_scalar_of(x, 255));
    cn_tensor *zp = saturate(cn_round(cn_sub(zero, cn_div(lo, scale))), CN_U8);
    out[0] = requantize(cn_div(x, scale), zp, CN_U8);
    if (nout > 1) out[1] = scale;
    if (nout > 2) out[2] = zp;
    return out[0] && (nout < 2 || out[1]) && (nout < 3 || out[2]) ? 0 : CN_EINVAL;
}

static int check_operands(onnx_ctx *c, cn_tensor *const *in, const int *idx, int k) {
    static const char *const names[] = {"A", "B", "a_zero_point", "b_zero_point"};
    for (int i = 0; i < k; i++)
        if (check_q8(c, in[idx[i]], names[i]) < 0) return CN_EUNSUPPORTED;
    return 0;
}

H(h_matmul_integer) {
    UNUSED;
    if (check_operands(c, in, (const int[]){0, 1}, 2) < 0) return CN_EUNSUPPORTED;
    DONE(cn_matmul_integer(in[0], in[1], nin > 2 ? in[2] : NULL, nin > 3 ? in[3] : NULL));
}

/* (x - x_zp) conv (w - w_zp) (+ bias) in f64, exact; w_zp may be one per
 * output channel. */
static int conv_integer(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor *x, cn_tensor *xzp,
                        cn_tensor *w, cn_tensor *wzp, cn_tensor *bias, cn_tensor **y) {
    if (check_q8(c, x, "x") < 0 || check_q8(c, w, "w") < 0) return CN_EUNSUPPORTED;
    cn_tensor *xf = cn_cast(x, CN_F64), *wf = cn_cast(w, CN_F64);
    if (xzp) xf = cn_sub(xf, cn_cast(xzp, CN_F64));
    if (wzp) {
        wzp = along(c, wzp, 0, cn_ndim(w), "w_zero_point");
        if (!wzp) return CN_EINVAL;
        wf = cn_sub(wf, cn_cast(wzp, CN_F64));
    }
    int rc = onnx_conv(c, n, xf, wf, bias ? cn_cast(bias, CN_F64) : NULL, y);
    return rc < 0 ? rc : 0;
}

H(h_conv_integer) {
    UNUSED;
    cn_tensor *y = NULL;
    int rc = conv_integer(c, n, in[0], nin > 2 ? in[2] : NULL, in[1], nin > 3 ? in[3] : NULL,
                          NULL, &y);
    if (rc < 0) return rc;
    DONE(cn_cast(y, CN_I32));
}

/* acc * (a_scale * b_scale / y_scale), requantised to y_zp's type; per
 * channel scales of b along axis. */
static cn_tensor *qlinear_out(onnx_ctx *c, cn_tensor *acc, cn_tensor *sa, cn_tensor *sb,
                              int axis, cn_tensor *sy, cn_tensor *zy) {
    sb = along(c, sb, axis, cn_ndim(acc), "the weights' scale");
    if (!sb) return NULL;
    cn_tensor *m = cn_div(cn_mul(as_f32(sa), as_f32(sb)), as_f32(sy));
    return requantize(cn_mul(cn_cast(acc, CN_F32), m), zy, cn_tensor_dtype(zy));
}

H(h_qlinear_matmul) {
    UNUSED;
    if (check_operands(c, in, (const int[]){0, 3, 2, 5}, 4) < 0 || check_q8(c, in[7], "y_zero_point") < 0)
        return CN_EUNSUPPORTED;
    cn_tensor *sa = in[1];
    /* One scale per row of a: a column vector. */
    if (cn_ndim(sa) == 1 && cn_numel(sa) > 1) sa = cn_reshape(sa, 2, (int64_t[]){-1, 1});
    cn_tensor *acc = cn_matmul_integer(in[0], in[3], in[2], in[5]);
    if (!acc) return CN_EINVAL;
    DONE(qlinear_out(c, acc, sa, in[4], cn_ndim(acc) - 1, in[6], in[7]));
}

H(h_qlinear_conv) {
    UNUSED;
    if (check_q8(c, in[7], "y_zero_point") < 0) return CN_EUNSUPPORTED;
    cn_tensor *acc = NULL, *bias = nin > 8 ? in[8] : NULL;
    if (bias && cn_tensor_dtype(bias) != CN_I32)
        return onnx_bad(c, "B must be int32, not %s", cn_dtype_name(cn_tensor_dtype(bias)));
    int rc = conv_integer(c, n, in[0], in[2], in[3], in[5], bias, &acc);
    if (rc < 0) return rc;
    DONE(qlinear_out(c, acc, in[1], in[4], 1, in[6], in[7]));
}

const onnx_op_entry cn_onnx_ops_quant[] = {
    {"QuantizeLinear", h_quantize, "axis,block_size,output_dtype,saturate", 2, 3, 1,
     "uint8 and int8 results; block_size 0"},
    {"DequantizeLinear", h_dequantize, "axis,block_size,output_dtype", 2, 3, 1,
     "uint8, int8 and int32 inputs; block_size 0; output_dtype float"},
    {"DynamicQuantizeLinear", h_dynamic_quantize, "", 1, 1, 3, ""},
    {"MatMulInteger", h_matmul_integer, "", 2, 4, 1, "uint8 and int8"},
    {"ConvInteger", h_conv_integer, ONNX_CONV_ATTRS, 2, 4, 1, "as Conv; uint8 and int8"},
    {"QLinearMatMul", h_qlinear_matmul, "", 8, 8, 1, "uint8 and int8"},
    {"QLinearConv", h_qlinear_conv, ONNX_CONV_ATTRS, 8, 9, 1, "as Conv; uint8 and int8"},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

#endif /* CN_HAVE_ONNX */
