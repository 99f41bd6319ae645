/* ONNX export: the nodes each op becomes (opset 17). One emitter per op,
 * in a table indexed by op id; ops ONNX has no node for are exact
 * compositions (gelu through Erf, var through ReduceMean/ReduceSum, ...).
 * An op or a case with no exact ONNX form fails with ox_unsup. */
#include "onnx_export.h"

#include <math.h>

#ifdef CN_HAVE_ONNX

#define EMIT(name)                                                                                 \
    static const char *name(ox_ctx *c, const ir_step *s, const char *const *in,                   \
                            cn_tensor *const *it, const cn_tensor *out)
#define UNUSED_ARGS (void)c, (void)s, (void)in, (void)it, (void)out

#define OX_PI 3.14159265358979323846
#define OX_SQRT1_2 0.70710678118654752440

static cn_dtype dt(const cn_tensor *t) { return (cn_dtype)t->dtype; }
static bool is_float(cn_dtype d) { return d == CN_F32 || d == CN_F64 || d == CN_F16 || d == CN_BF16; }

/* A node with its attributes set, or NULL (the attribute calls only fail
 * when out of memory, which the driver reports). */
static Onnx__NodeProto *node1(ox_ctx *c, const char *op, const char *const *in, int nin) {
    return ox_node(c, op, in, nin, 1);
}
static const char *out0(Onnx__NodeProto *n) { return n ? n->output[0] : NULL; }

/* ---- unary ---- */

EMIT(e_unary) {
    (void)out;
    cn_dtype t = dt(it[0]);
    const cn_op_def *d = cn_ops[s->op];
    bool float_only = d->flags & CN_OPF_FLOAT_MATH;
    switch (s->op) {
    case CN_OP_floor:
    case CN_OP_ceil:
    case CN_OP_round:
        if (!is_float(t)) return ox_unary(c, "Identity", in[0]); /* integers are whole */
        break;
    case CN_OP_relu:
        if (t == CN_U8 || t == CN_BOOL) return ox_unary(c, "Identity", in[0]); /* never negative */
        break;
    case CN_OP_neg:
        if (t == CN_U8 || t == CN_BOOL) return ox_unsup(c, "%s input", cn_dtype_name(t));
        break;
    default:
        break;
    }
    if (t == CN_BOOL || (float_only && !is_float(t)))
        return ox_unsup(c, "%s input", cn_dtype_name(t));
    return ox_unary(c, d->onnx, in[0]);
}

static const char *scalar_op(ox_ctx *c, const char *op, const char *x, cn_dtype t, double v) {
    return ox_binary(c, op, x, ox_const_scalar(c, t, v));
}

EMIT(e_leaky_elu) {
    (void)out;
    cn_dtype t = dt(it[0]);
    if (!is_float(t)) return ox_unsup(c, "%s input (ONNX takes floats)", cn_dtype_name(t));
    Onnx__NodeProto *n = node1(c, s->op == CN_OP_leaky_relu ? "LeakyRelu" : "Elu", in, 1);
    if (n) ox_attr_float(c, n, "alpha", s->attrs.f[0]);
    return out0(n);
}

/* x/2 (1 + erf(x / sqrt 2)), or the tanh form with approximate. */
EMIT(e_gelu) {
    (void)out;
    cn_dtype t = dt(it[0]);
    const char *x = in[0], *inner;
    if (s->attrs.i[0]) {
        const char *x3 = ox_binary(c, "Mul", x, ox_binary(c, "Mul", x, x));
        const char *u = ox_binary(c, "Add", x, scalar_op(c, "Mul", x3, t, 0.044715));
        inner = ox_unary(c, "Tanh", scalar_op(c, "Mul", u, t, sqrt(2.0 / OX_PI)));
    } else {
        inner = ox_unary(c, "Erf", scalar_op(c, "Mul", x, t, OX_SQRT1_2));
    }
    const char *y = ox_binary(c, "Mul", x, scalar_op(c, "Add", inner, t, 1.0));
    return scalar_op(c, "Mul", y, t, 0.5);
}

EMIT(e_silu) {
    (void)out, (void)it, (void)s;
    return ox_binary(c, "Mul", in[0], ox_unary(c, "Sigmoid", in[0]));
}

/* ln(1 + e^(beta x)) / beta, and x itself where beta x > threshold. */
EMIT(e_softplus) {
    (void)out;
    cn_dtype t = dt(it[0]);
    double beta = s->attrs.f[0], thr = s->attrs.f[1];
    const char *x = in[0];
    const char *bx = beta == 1.0 ? x : scalar_op(c, "Mul", x, t, beta);
    const char *y = ox_unary(c, "Softplus", bx);
    if (beta != 1.0) y = scalar_op(c, "Div", y, t, beta);
    if (isinf(thr) && thr > 0) return y;
    const char *over = scalar_op(c, "Greater", bx, t, thr);
    const char *w[3] = {over, x, y};
    return ox_op1(c, "Where", w, 3);
}

EMIT(e_composed_unary) {
    (void)out;
    cn_dtype t = dt(it[0]);
    const char *x = in[0];
    switch (s->op) {
    case CN_OP_log1p: return ox_unary(c, "Log", scalar_op(c, "Add", x, t, 1.0));
    case CN_OP_expm1: return scalar_op(c, "Sub", ox_unary(c, "Exp", x), t, 1.0);
    case CN_OP_rsqrt: return ox_unary(c, "Reciprocal", ox_unary(c, "Sqrt", x));
    case CN_OP_square:
        if (t == CN_BOOL) return ox_unsup(c, "bool input");
        return ox_binary(c, "Mul", x, x);
    default: return ox_unsup(c, "no composition");
    }
}

/* Clip with the bounds as inputs; an infinite bound is left out. Integer
 * tensors take the bounds rounded inward, as Chutney's kernel does. */
EMIT(e_clamp) {
    (void)out;
    cn_dtype t = dt(it[0]);
    if (t == CN_BOOL) return ox_unsup(c, "bool input");
    double b[2] = {s->attrs.f[0], s->attrs.f[1]};
    const char *names[3] = {in[0], "", ""};
    for (int k = 0; k < 2; k++) {
        if (isinf(b[k]) && (k == 0) == (b[k] < 0)) continue;
        double v = b[k];
        if (!is_float(t)) {
            double lo = t == CN_U8 ? 0 : t == CN_I32 ? -2147483648.0 : -9223372036854775808.0;
            double hi = t == CN_U8 ? 255 : t == CN_I32 ? 2147483647.0 : 9223372036854775807.0;
            v = k == 0 ? ceil(v) : floor(v);
            if (isnan(v)) return ox_unsup(c, "a NaN bound on integers");
            if (k == 0 && v <= lo) continue;
            if (k == 1 && v >= hi) continue;
            v = v < lo ? lo : v > hi ? hi : v;
        }
        names[k + 1] = ox_const_scalar(c, t, v);
    }
    int n = names[2][0] ? 3 : names[1][0] ? 2 : 1;
    return ox_op1(c, "Clip", names, n);
}

EMIT(e_not) {
    (void)out, (void)s;
    return ox_unary(c, "Not", ox_cast(c, in[0], dt(it[0]), CN_BOOL));
}

/* ---- binary ---- */

EMIT(e_binary) {
    (void)out;
    cn_dtype a = dt(it[0]), b = dt(it[1]);
    const char *op = cn_ops[s->op]->onnx, *x = in[0], *y = in[1];
    switch (s->op) {
    case CN_OP_logical_and:
    case CN_OP_logical_or:
    case CN_OP_logical_xor:
        return ox_binary(c, op, ox_cast(c, x, a, CN_BOOL), ox_cast(c, y, b, CN_BOOL));
    case CN_OP_ne: return ox_unary(c, "Not", ox_binary(c, "Equal", x, y));
    case CN_OP_eq: return ox_binary(c, op, x, y);
    case CN_OP_add:
    case CN_OP_maximum:
        if (a == CN_BOOL) return ox_binary(c, "Or", x, y);
        break;
    case CN_OP_mul:
    case CN_OP_minimum:
        if (a == CN_BOOL) return ox_binary(c, "And", x, y);
        break;
    case CN_OP_lt:
    case CN_OP_le:
    case CN_OP_gt:
    case CN_OP_ge:
        if (a == CN_BOOL) /* ONNX orders numbers only */
            return ox_binary(c, op, ox_cast(c, x, a, CN_U8), ox_cast(c, y, b, CN_U8));
        break;
    case CN_OP_pow:
        if (a == CN_U8) return ox_unsup(c, "u8 inputs");
        break;
    default:
        break;
    }
    if (a == CN_BOOL) return ox_unsup(c, "bool inputs");
    return ox_binary(c, op, x, y);
}

EMIT(e_where) {
    (void)out, (void)s;
    const char *w[3] = {ox_cast(c, in[0], dt(it[0]), CN_BOOL), in[1], in[2]};
    return ox_op1(c, "Where", w, 3);
}

/* ---- reductions ---- */

static const char *reduce(ox_ctx *c, const char *op, const char *x, const cn_attrs *a, int keep) {
    bool axes_input = !strcmp(op, "ReduceSum"); /* the others take them as an attribute until 18 */
    const char *ins[2] = {x, NULL};
    if (axes_input && a->nlist > 0) ins[1] = ox_const_i64s(c, a->list, (int)a->nlist);
    Onnx__NodeProto *n = node1(c, op, ins, ins[1] ? 2 : 1);
    if (!n) return NULL;
    if (!axes_input && a->nlist > 0) ox_attr_ints(c, n, "axes", a->list, (int)a->nlist);
    ox_attr_int(c, n, "keepdims", keep);
    return n->output[0];
}

/* The number of elements each reduction group holds, or -1 if unknown. */
static double group_size(const cn_tensor *x, const cn_attrs *a) {
    double n = 1;
    for (int k = 0; k < a->nlist; k++) {
        int64_t d = x->shape[a->list[k]];
        if (d < 0) return -1;
        n *= (double)d;
    }
    return n;
}

EMIT(e_reduce) {
    const cn_attrs *a = &s->attrs;
    int keep = (int)a->i[0];
    cn_dtype t = dt(it[0]), ot = dt(out);
    if (t == CN_BOOL && s->op != CN_OP_sum) return ox_unsup(c, "bool input");
    /* Integer sums and products are i64 in Chutney, the input's type in ONNX. */
    const char *x = ox_cast(c, in[0], t, ot);
    switch (s->op) {
    case CN_OP_sum:
    case CN_OP_mean:
    case CN_OP_prod:
    case CN_OP_max:
    case CN_OP_min:
    case CN_OP_logsumexp: return reduce(c, cn_ops[s->op]->onnx, x, a, keep);
    case CN_OP_var:
    case CN_OP_std: {
        double n = group_size(it[0], a);
        if (n < 0) return ox_unsup(c, "the reduced sizes are unknown until run");
        const char *d = ox_binary(c, "Sub", x, reduce(c, "ReduceMean", x, a, 1));
        const char *ss = reduce(c, "ReduceSum", ox_binary(c, "Mul", d, d), a, keep);
        const char *v = scalar_op(c, "Div", ss, ot, n - a->f[0]);
        return s->op == CN_OP_std ? ox_unary(c, "Sqrt", v) : v;
    }
    case CN_OP_norm: {
        double p = a->f[0];
        if (p == 1) return reduce(c, "ReduceL1", x, a, keep);
        if (p == 2) return reduce(c, "ReduceL2", x, a, keep);
        if (isinf(p) && p > 0) return reduce(c, "ReduceMax", ox_unary(c, "Abs", x), a, keep);
        if (!(p > 0) || isinf(p)) return ox_unsup(c, "p = %g", p);
        const char *pw = scalar_op(c, "Pow", ox_unary(c, "Abs", x), ot, p);
        return scalar_op(c, "Pow", reduce(c, "ReduceSum", pw, a, keep), ot, 1.0 / p);
    }
    default: return ox_unsup(c, "no reduction");
    }
}

EMIT(e_arg) {
    const cn_attrs *a = &s->attrs;
    cn_dtype t = dt(it[0]);
    if (t == CN_BOOL) return ox_unsup(c, "bool input");
    const char *op = s->op == CN_OP_argmax ? "ArgMax" : "ArgMin", *x = in[0];
    int64_t axis = a->i[1];
    int keep = (int)a->i[0];
    if (a->i[2]) { /* over the flattened tensor */
        int64_t flat = -1;
        const char *r[2] = {x, ox_const_i64s(c, &flat, 1)};
        x = ox_op1(c, "Reshape", r, 2);
        axis = 0;
    }
    Onnx__NodeProto *n = node1(c, op, &x, 1);
    if (!n) return NULL;
    ox_attr_int(c, n, "axis", axis);
    ox_attr_int(c, n, "keepdims", a->i[2] ? 0 : keep);
    const char *y = n->output[0];
    if (a->i[2] && out->ndim > 0) {
        const char *r[2] = {y, ox_const_i64s(c, out->shape, out->ndim)};
        y = ox_op1(c, "Reshape", r, 2);
    }
    return ox_cast(c, y, CN_I64, dt(out));
}

/* ---- linear algebra, softmax, joining, indexing ---- */

EMIT(e_matmul) {
    (void)out, (void)s;
    cn_dtype t = dt(it[0]);
    if (t == CN_U8 || t == CN_BOOL) return ox_unsup(c, "%s inputs", cn_dtype_name(t));
    return ox_binary(c, "MatMul", in[0], in[1]);
}

EMIT(e_axis_op) {
    (void)out, (void)it;
    Onnx__NodeProto *n = node1(c, cn_ops[s->op]->onnx, in, s->nin);
    if (n) ox_attr_int(c, n, "axis", s->attrs.i[0]);
    return out0(n);
}

/* ONNX's LayerNormalization (opset 17) requires Scale: ones of the
 * normalized shape stand in for an absent weight. */
EMIT(e_layer_norm) {
    (void)out;
    const cn_attrs *a = &s->attrs;
    const cn_tensor *x = it[0];
    int nd = (int)a->i[0], axis = x->ndim - nd;
    cn_dtype t = dt(x);
    const char *ins[3] = {in[0], a->i[1] ? in[1] : NULL, a->i[2] ? in[1 + a->i[1]] : NULL};
    if (!ins[1]) {
        if (t != CN_F32 && t != CN_F64) return ox_unsup(c, "%s input", cn_dtype_name(t));
        int64_t numel = 1;
        for (int d = axis; d < x->ndim; d++) {
            if (x->shape[d] < 0)
                return ox_unsup(c, "no weight and an unknown normalized size (Scale is required)");
            numel *= x->shape[d];
        }
        size_t es = cn_dsize(t);
        unsigned char *ones = ox_alloc(c, (size_t)numel * es + 1);
        if (!ones) return NULL;
        for (int64_t k = 0; k < numel; k++) {
            if (t == CN_F64)
                ((double *)ones)[k] = 1;
            else
                ((float *)ones)[k] = 1;
        }
        ins[1] = ox_add_init(c, ox_tensor_proto(c, ox_unique_name(c, "layer_norm_scale"), t, nd,
                                                x->shape + axis, ones));
        if (!ins[1]) return NULL;
    }
    Onnx__NodeProto *n = node1(c, "LayerNormalization", ins, ins[2] ? 3 : 2);
    if (!n || ox_attr_int(c, n, "axis", axis) < 0 || ox_attr_float(c, n, "epsilon", a->f[0]) < 0)
        return NULL;
    return n->output[0];
}

EMIT(e_scatter_add) {
    (void)out, (void)it;
    Onnx__NodeProto *n = node1(c, "ScatterElements", in, 3);
    if (!n) return NULL;
    ox_attr_int(c, n, "axis", s->attrs.i[0]);
    ox_attr_str(c, n, "reduction", "add");
    return n->output[0];
}

/* Chutney's pads are (before, after) pairs from the last axis back, and
 * may be negative (a crop): the crops become a Slice, the rest a Pad. */
EMIT(e_pad) {
    (void)out;
    const cn_attrs *a = &s->attrs;
    const cn_tensor *x = it[0];
    int r = x->ndim, np = (int)a->nlist / 2;
    static const char *const modes[] = {"constant", "reflect", "edge"};
    if (a->i[0] < 0 || a->i[0] > 2) return ox_unsup(c, "mode %d", (int)a->i[0]);
    int64_t pads[2 * CN_MAX_DIMS] = {0}, starts[CN_MAX_DIMS], ends[CN_MAX_DIMS], axes[CN_MAX_DIMS];
    int ncrop = 0;
    for (int p = 0; p < np; p++) {
        int d = r - 1 - p;
        int64_t before = a->list[2 * p], after = a->list[2 * p + 1];
        if ((before < 0 || after < 0) && a->i[0] != 0)
            return ox_unsup(c, "negative pads with mode %s", modes[a->i[0]]);
        if (before < 0 || after < 0) {
            starts[ncrop] = before < 0 ? -before : 0;
            ends[ncrop] = after < 0 ? after : INT64_MAX;
            axes[ncrop++] = d;
        }
        pads[d] = before > 0 ? before : 0;
        pads[r + d] = after > 0 ? after : 0;
    }
    const char *xn = in[0];
    if (ncrop) {
        const char *sl[4] = {xn, ox_const_i64s(c, starts, ncrop), ox_const_i64s(c, ends, ncrop),
                             ox_const_i64s(c, axes, ncrop)};
        xn = ox_op1(c, "Slice", sl, 4);
    }
    const char *pin[3] = {xn, ox_const_i64s(c, pads, 2 * r), ox_const_scalar(c, dt(x), a->f[0])};
    Onnx__NodeProto *n = node1(c, "Pad", pin, a->i[0] == 0 ? 3 : 2);
    if (n) ox_attr_str(c, n, "mode", modes[a->i[0]]);
    return out0(n);
}

EMIT(e_one_hot) {
    (void)it;
    int64_t depth = s->attrs.i[0];
    int64_t v01[2] = {0, 1};
    const char *ins[3] = {in[0], ox_const_i64s(c, &depth, 1), ox_const_i64s(c, v01, 2)};
    Onnx__NodeProto *n = node1(c, "OneHot", ins, 3);
    if (n) ox_attr_int(c, n, "axis", -1);
    return ox_cast(c, out0(n), CN_I64, dt(out));
}

EMIT(e_cumsum) {
    cn_dtype t = dt(it[0]), ot = dt(out);
    if (ot == CN_U8 || ot == CN_BOOL) return ox_unsup(c, "%s result", cn_dtype_name(ot));
    const char *ins[2] = {ox_cast(c, in[0], t, ot), ox_const_scalar(c, CN_I64, (double)s->attrs.i[0])};
    return ox_op1(c, "CumSum", ins, 2);
}

EMIT(e_tri) {
    (void)it, (void)out;
    const char *ins[2] = {in[0], ox_const_scalar(c, CN_I64, (double)s->attrs.i[0])};
    Onnx__NodeProto *n = node1(c, "Trilu", ins, 2);
    if (n) ox_attr_int(c, n, "upper", s->op == CN_OP_triu);
    return out0(n);
}

/* ---- convolution and pooling ---- */

EMIT(e_conv) {
    (void)out;
    const cn_attrs *a = &s->attrs;
    const cn_tensor *w = it[1];
    if (w->shape[2] < 0 || w->shape[3] < 0) return ox_unsup(c, "the kernel size is unknown");
    bool tr = s->op == CN_OP_conv_transpose2d;
    Onnx__NodeProto *n = node1(c, tr ? "ConvTranspose" : "Conv", in, s->nin);
    if (!n) return NULL;
    const int64_t *l = a->list;
    int64_t pads[4] = {l[2], l[3], l[2], l[3]};
    ox_attr_ints(c, n, "strides", l, 2);
    ox_attr_ints(c, n, "pads", pads, 4);
    ox_attr_ints(c, n, "dilations", l + 4, 2);
    ox_attr_ints(c, n, "kernel_shape", w->shape + 2, 2);
    ox_attr_int(c, n, "group", a->i[0] ? a->i[0] : 1);
    if (tr) ox_attr_ints(c, n, "output_padding", l + 6, 2);
    return n->output[0];
}

/* The output size of a pooling window without PyTorch's rule that the
 * last ceil-mode window starts inside the input (ONNX has no such rule). */
static int64_t onnx_pool_out(int64_t in, int64_t k, int64_t st, int64_t p, int64_t d, bool ceil_mode) {
    int64_t num = in + 2 * p - d * (k - 1) - 1;
    if (num < 0) return 0;
    return (ceil_mode ? (num + st - 1) / st : num / st) + 1;
}

/* The ceil_mode to write, or -1 when no mode of ONNX gives Chutney's size. */
static int pool_ceil(const cn_tensor *x, const cn_tensor *out, const int64_t *l, bool dil) {
    int mode = -1;
    for (int m = 0; m < 2 && mode < 0; m++) {
        bool ok = true;
        for (int ax = 0; ax < 2; ax++) {
            int64_t in = x->shape[2 + ax], o = out->shape[2 + ax];
            if (in < 0 || o < 0) return -1;
            ok &= onnx_pool_out(in, l[ax], l[2 + ax], l[4 + ax], dil ? l[6 + ax] : 1, m) == o;
        }
        if (ok) mode = m;
    }
    return mode;
}

EMIT(e_pool) {
    const cn_attrs *a = &s->attrs;
    const int64_t *l = a->list;
    bool is_max = s->op == CN_OP_max_pool2d;
    int ceil_mode = a->i[0] ? pool_ceil(it[0], out, l, is_max) : 0;
    if (ceil_mode < 0)
        return ox_unsup(c, "ceil_mode with sizes unknown until run, or a last window ONNX would not count");
    if (!is_max && ceil_mode)
        return ox_unsup(c, "ceil_mode windows that run past the input average differently in ONNX");
    if (!is_max && a->i[2]) return ox_unsup(c, "divisor_override");
    Onnx__NodeProto *n = node1(c, is_max ? "MaxPool" : "AveragePool", in, 1);
    if (!n) return NULL;
    int64_t pads[4] = {l[4], l[5], l[4], l[5]};
    ox_attr_ints(c, n, "kernel_shape", l, 2);
    ox_attr_ints(c, n, "strides", l + 2, 2);
    ox_attr_ints(c, n, "pads", pads, 4);
    if (is_max) ox_attr_ints(c, n, "dilations", l + 6, 2);
    else ox_attr_int(c, n, "count_include_pad", a->i[1] != 0);
    if (ceil_mode) ox_attr_int(c, n, "ceil_mode", 1);
    return n->output[0];
}

EMIT(e_adaptive_avg) {
    (void)out;
    const cn_tensor *x = it[0];
    const int64_t *o = s->attrs.list;
    if (o[0] == 1 && o[1] == 1) return ox_unary(c, "GlobalAveragePool", in[0]);
    int64_t h = x->shape[2], w = x->shape[3];
    if (h < 0 || w < 0 || h % o[0] || w % o[1])
        return ox_unsup(c, "output size %dx%d from an input whose size is not a known multiple of it",
                        (int)o[0], (int)o[1]);
    int64_t k[2] = {h / o[0], w / o[1]};
    Onnx__NodeProto *n = node1(c, "AveragePool", in, 1);
    if (!n) return NULL;
    ox_attr_ints(c, n, "kernel_shape", k, 2);
    ox_attr_ints(c, n, "strides", k, 2);
    return n->output[0];
}

/* ---- shapes, views, copies ---- */

EMIT(e_reshape) {
    (void)it, (void)out;
    const cn_attrs *a = &s->attrs;
    bool zero = false, infer = false;
    for (int k = 0; k < a->nlist; k++) {
        zero |= a->list[k] == 0;
        infer |= a->list[k] == -1;
    }
    if (zero && infer) return ox_unsup(c, "an empty shape with a size to infer");
    const char *ins[2] = {in[0], ox_const_i64s(c, a->list, (int)a->nlist)};
    Onnx__NodeProto *n = node1(c, "Reshape", ins, 2);
    /* ONNX reads 0 as "copy this size" unless allowzero. */
    if (n && zero) ox_attr_int(c, n, "allowzero", 1);
    return out0(n);
}

EMIT(e_permute) {
    (void)it, (void)out;
    Onnx__NodeProto *n = node1(c, "Transpose", in, 1);
    if (n) ox_attr_ints(c, n, "perm", s->attrs.list, (int)s->attrs.nlist);
    return out0(n);
}

/* Chutney's "from the beginning"/"to the end" markers in ONNX's terms:
 * ONNX clamps starts and ends, and reads INT64_MIN as "before index 0"
 * for a negative step. */
static void slice_bounds(const cn_attrs *a, int64_t *start, int64_t *stop) {
    int64_t step = a->i[3];
    *start = a->i[1];
    *stop = a->i[2];
    if (*start == CN_BEGIN || *start == CN_END) *start = step > 0 ? 0 : INT64_MAX;
    if (*stop == CN_BEGIN || *stop == CN_END) *stop = step > 0 ? INT64_MAX : INT64_MIN;
}

EMIT(e_slice) {
    (void)it, (void)out;
    const cn_attrs *a = &s->attrs;
    int64_t start, stop, axis = a->i[0], step = a->i[3];
    slice_bounds(a, &start, &stop);
    const char *ins[5] = {in[0], ox_const_i64s(c, &start, 1), ox_const_i64s(c, &stop, 1),
                          ox_const_i64s(c, &axis, 1), ox_const_i64s(c, &step, 1)};
    return ox_op1(c, "Slice", ins, 5);
}

/* base with base[start:stop] (step 1) replaced by src: the two parts of
 * base around the slice, joined with src. */
EMIT(e_slice_scatter) {
    (void)out;
    const cn_attrs *a = &s->attrs;
    int64_t axis = a->i[0];
    if (a->i[3] != 1) return ox_unsup(c, "step %d (only 1)", (int)a->i[3]);
    if (it[0]->shape[axis] < 0) return ox_unsup(c, "the size of axis %d is unknown", (int)axis);
    int64_t start, stop, zero = 0, end = INT64_MAX;
    slice_bounds(a, &start, &stop);
    const char *ax = ox_const_i64s(c, &axis, 1);
    const char *b[4] = {in[0], ox_const_i64s(c, &zero, 1), ox_const_i64s(c, &start, 1), ax};
    const char *e[4] = {in[0], ox_const_i64s(c, &stop, 1), ox_const_i64s(c, &end, 1), ax};
    const char *parts[3] = {ox_op1(c, "Slice", b, 4), in[1], ox_op1(c, "Slice", e, 4)};
    Onnx__NodeProto *n = node1(c, "Concat", parts, 3);
    if (n) ox_attr_int(c, n, "axis", axis);
    return out0(n);
}

EMIT(e_expand) {
    (void)it, (void)out;
    int64_t shape[CN_MAX_DIMS];
    int nd = (int)s->attrs.nlist;
    /* -1 keeps an unknown size: a 1 broadcasts to it. */
    for (int k = 0; k < nd; k++) shape[k] = s->attrs.list[k] < 0 ? 1 : s->attrs.list[k];
    const char *ins[2] = {in[0], ox_const_i64s(c, shape, nd)};
    return ox_op1(c, "Expand", ins, 2);
}

EMIT(e_identity) {
    UNUSED_ARGS;
    return ox_unary(c, "Identity", in[0]);
}

EMIT(e_cast) {
    (void)s;
    Onnx__NodeProto *n = node1(c, "Cast", in, 1);
    if (n) ox_attr_int(c, n, "to", ox_elem_type(dt(out)));
    (void)it;
    return out0(n);
}

EMIT(e_full_like) {
    const cn_tensor *x = it[0];
    if (dt(out) == CN_BF16) return ox_unsup(c, "bf16 (ConstantOfShape takes it from opset 20)");
    bool known = true;
    for (int d = 0; d < x->ndim; d++) known &= x->shape[d] >= 0;
    const char *shape = known ? ox_const_i64s(c, x->shape, x->ndim) : ox_unary(c, "Shape", in[0]);
    Onnx__NodeProto *n = node1(c, "ConstantOfShape", &shape, 1);
    if (n) ox_attr_tensor(c, n, "value", ox_tensor_scalar(c, dt(out), s->attrs.f[0], true));
    return out0(n);
}

/* ---- ops with no ONNX form, each with its reason ---- */

EMIT(e_gradient_op) {
    UNUSED_ARGS;
    return ox_unsup(c, "a gradient op: export the forward graph");
}

EMIT(e_pool_indices) {
    UNUSED_ARGS;
    return ox_unsup(c, "ONNX counts MaxPool's indices over the whole tensor, Chutney within each plane");
}

EMIT(e_random) {
    UNUSED_ARGS;
    return ox_unsup(c, "a random op: ONNX's generator would draw other numbers");
}

static const ox_emit_fn table[CN_OP_COUNT] = {
    [CN_OP_reshape] = e_reshape,
    [CN_OP_permute] = e_permute,
    [CN_OP_slice] = e_slice,
    [CN_OP_expand] = e_expand,
    [CN_OP_contiguous] = e_identity,
    [CN_OP_cast] = e_cast,
    [CN_OP_slice_scatter] = e_slice_scatter,
    [CN_OP_full_like] = e_full_like,

    [CN_OP_neg] = e_unary,
    [CN_OP_abs] = e_unary,
    [CN_OP_sign] = e_unary,
    [CN_OP_exp] = e_unary,
    [CN_OP_log] = e_unary,
    [CN_OP_log1p] = e_composed_unary,
    [CN_OP_expm1] = e_composed_unary,
    [CN_OP_sqrt] = e_unary,
    [CN_OP_rsqrt] = e_composed_unary,
    [CN_OP_square] = e_composed_unary,
    [CN_OP_reciprocal] = e_unary,
    [CN_OP_sin] = e_unary,
    [CN_OP_cos] = e_unary,
    [CN_OP_tanh] = e_unary,
    [CN_OP_sigmoid] = e_unary,
    [CN_OP_relu] = e_unary,
    [CN_OP_leaky_relu] = e_leaky_elu,
    [CN_OP_elu] = e_leaky_elu,
    [CN_OP_gelu] = e_gelu,
    [CN_OP_silu] = e_silu,
    [CN_OP_softplus] = e_softplus,
    [CN_OP_erf] = e_unary,
    [CN_OP_floor] = e_unary,
    [CN_OP_ceil] = e_unary,
    [CN_OP_round] = e_unary,
    [CN_OP_clamp] = e_clamp,
    [CN_OP_logical_not] = e_not,

    [CN_OP_add] = e_binary,
    [CN_OP_sub] = e_binary,
    [CN_OP_mul] = e_binary,
    [CN_OP_div] = e_binary,
    [CN_OP_pow] = e_binary,
    [CN_OP_maximum] = e_binary,
    [CN_OP_minimum] = e_binary,
    [CN_OP_eq] = e_binary,
    [CN_OP_ne] = e_binary,
    [CN_OP_lt] = e_binary,
    [CN_OP_le] = e_binary,
    [CN_OP_gt] = e_binary,
    [CN_OP_ge] = e_binary,
    [CN_OP_logical_and] = e_binary,
    [CN_OP_logical_or] = e_binary,
    [CN_OP_logical_xor] = e_binary,
    [CN_OP_where] = e_where,

    [CN_OP_sum] = e_reduce,
    [CN_OP_mean] = e_reduce,
    [CN_OP_prod] = e_reduce,
    [CN_OP_max] = e_reduce,
    [CN_OP_min] = e_reduce,
    [CN_OP_var] = e_reduce,
    [CN_OP_std] = e_reduce,
    [CN_OP_logsumexp] = e_reduce,
    [CN_OP_norm] = e_reduce,
    [CN_OP_argmax] = e_arg,
    [CN_OP_argmin] = e_arg,

    [CN_OP_matmul] = e_matmul,

    [CN_OP_softmax] = e_axis_op,
    [CN_OP_log_softmax] = e_axis_op,
    [CN_OP_concat] = e_axis_op,
    [CN_OP_gather] = e_axis_op,
    [CN_OP_index_select] = e_axis_op,
    [CN_OP_scatter_add] = e_scatter_add,
    [CN_OP_pad] = e_pad,
    [CN_OP_one_hot] = e_one_hot,
    [CN_OP_cumsum] = e_cumsum,
    [CN_OP_tril] = e_tri,
    [CN_OP_triu] = e_tri,

    [CN_OP_conv2d] = e_conv,
    [CN_OP_conv_transpose2d] = e_conv,
    [CN_OP_conv2d_weight_grad] = e_gradient_op,
    [CN_OP_max_pool2d] = e_pool,
    [CN_OP_max_pool2d_backward] = e_gradient_op,
    [CN_OP_max_pool2d_indices] = e_pool_indices,
    [CN_OP_avg_pool2d] = e_pool,
    [CN_OP_avg_pool2d_backward] = e_gradient_op,
    [CN_OP_adaptive_avg_pool2d] = e_adaptive_avg,
    [CN_OP_adaptive_avg_pool2d_backward] = e_gradient_op,

    [CN_OP_lstm_seq] = ox_emit_lstm_seq,
    [CN_OP_lstm_seq_backward] = e_gradient_op,

    [CN_OP_scaled_dot_product_attention] = ox_emit_sdpa,
    [CN_OP_scaled_dot_product_attention_backward] = e_gradient_op,
    [CN_OP_rope] = ox_emit_rope,
    [CN_OP_layer_norm] = e_layer_norm,

    [CN_OP_bernoulli] = e_random,
};

ox_emit_fn ox_emitter(int op) { return op >= 0 && op < CN_OP_COUNT ? table[op] : NULL; }

#endif /* CN_HAVE_ONNX */
