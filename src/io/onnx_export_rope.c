/* ONNX export of rope as a composition of opset-17 ops. ONNX's
 * RotaryEmbedding comes with opset 23 (the export writes 17), so the
 * rotation is Slice, Mul, Sub, Add and Concat with constant cos and sin
 * tables of the sequence's positions ([T, R/2], from the same double
 * computation as the kernels, rounded to x's dtype): interleaved pairs are
 * taken apart with a Reshape to [..., T, R/2, 2] first. Any importer (ours
 * included) reads it back as those ops. */
#include "onnx_export.h"

#include <math.h>

#ifdef CN_HAVE_ONNX

/* x[..., lo:hi] along axis `axis`. */
static const char *slice_last(ox_ctx *c, const char *x, int64_t lo, int64_t hi, int64_t axis) {
    const char *ins[4] = {x, ox_const_i64s(c, &lo, 1), ox_const_i64s(c, &hi, 1),
                          ox_const_i64s(c, &axis, 1)};
    return ox_op1(c, "Slice", ins, 4);
}

static const char *concat_last(ox_ctx *c, const char *const *parts, int n) {
    Onnx__NodeProto *cat = ox_node(c, "Concat", parts, n, 1);
    if (!cat || ox_attr_int(c, cat, "axis", -1) < 0) return NULL;
    return cat->output[0];
}

/* Reshape x (rank nd) keeping its first nd - 1 sizes (0 copies one), then
 * the sizes tail[0..nt). */
static const char *reshape_tail(ox_ctx *c, const char *x, int nd, const int64_t *tail, int nt) {
    int64_t shape[CN_MAX_DIMS + 1] = {0};
    for (int k = 0; k < nt; k++) shape[nd - 1 + k] = tail[k];
    const char *ins[2] = {x, ox_const_i64s(c, shape, nd - 1 + nt)};
    return ox_op1(c, "Reshape", ins, 2);
}

/* The cos or sin table of T positions x h pairs (a trailing 1 with
 * interleaved pairs), in dtype dt (f32 or f64). */
static const char *table(ox_ctx *c, const cn_attrs *a, int64_t T, int64_t h, bool sine,
                         cn_dtype dt) {
    int64_t R = 2 * h, shape[3] = {T, h, 1};
    size_t n = (size_t)(T * h), es = dt == CN_F64 ? 8 : 4;
    unsigned char *data = ox_alloc(c, n * es + 1);
    if (!data) return NULL;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < h; i++) {
            double ang = (double)(a->i[0] + t) * pow(a->f[0], -(double)(2 * i) / (double)R);
            double v = sine ? (a->i[3] ? -sin(ang) : sin(ang)) : cos(ang);
            size_t k = (size_t)(t * h + i);
            if (dt == CN_F64)
                ((double *)data)[k] = v;
            else
                ((float *)data)[k] = (float)v;
        }
    return ox_add_init(c, ox_tensor_proto(c, ox_unique_name(c, sine ? "rope_sin" : "rope_cos"),
                                          dt, a->i[2] ? 3 : 2, shape, data));
}

const char *ox_emit_rope(ox_ctx *c, const ir_step *s, const char *const *in, cn_tensor *const *it,
                         const cn_tensor *out) {
    (void)out;
    const cn_attrs *a = &s->attrs;
    const cn_tensor *x = it[0];
    int nd = x->ndim;
    int64_t T = x->shape[nd - 2], D = x->shape[nd - 1];
    if (T < 0 || D < 0)
        return ox_unsup(c, "the sequence length T or the size D of x's last axis is unknown (the "
                           "cos and sin tables are constants of T positions)");
    int64_t R = a->i[1] ? a->i[1] : D, h = R / 2;
    /* The tables in f32 or f64; other float types compute in f32, as the
     * kernels do. */
    cn_dtype dt = (cn_dtype)x->dtype, ct = dt == CN_F64 ? CN_F64 : CN_F32;
    const char *xc = ox_cast(c, in[0], dt, ct);
    const char *cs = table(c, a, T, h, false, ct), *sn = table(c, a, T, h, true, ct);
    const char *u, *v;
    if (a->i[2]) {
        const char *xr = R < D ? slice_last(c, xc, 0, R, -1) : xc;
        const char *xp = reshape_tail(c, xr, nd, (int64_t[]){h, 2}, 2);
        u = slice_last(c, xp, 0, 1, -1);
        v = slice_last(c, xp, 1, 2, -1);
    } else {
        u = slice_last(c, xc, 0, h, -1);
        v = slice_last(c, xc, h, R, -1);
    }
    const char *u2 = ox_binary(c, "Sub", ox_binary(c, "Mul", u, cs), ox_binary(c, "Mul", v, sn));
    const char *v2 = ox_binary(c, "Add", ox_binary(c, "Mul", v, cs), ox_binary(c, "Mul", u, sn));
    const char *pair[2] = {u2, v2};
    const char *y = concat_last(c, pair, 2);
    if (a->i[2]) y = reshape_tail(c, y, nd, (int64_t[]){R}, 1);
    if (R < D) {
        const char *parts[2] = {y, slice_last(c, xc, R, D, -1)};
        y = concat_last(c, parts, 2);
    }
    return y ? ox_cast(c, y, ct, dt) : NULL;
}

#endif /* CN_HAVE_ONNX */
