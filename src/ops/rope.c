/* Rotary position embeddings (RoPE, Su et al. 2021), as GPT-NeoX, LLaMA
 * and Hugging Face's transformers apply them to queries and keys.
 *
 * rope(x [..., T, D]) -> [..., T, D]: row t of x (the second axis from the
 * end, the layout of the attention op's q and k, [B, H, T, d]) is at
 * position p = offset + t. Of its first rotary_dim features (R, even;
 * 0: all of D), the pairs (u, v) below are turned by the angle p theta_i,
 * theta_i = base^(-2 i / R), i < R / 2:
 *     u' = u cos - v sin,   v' = v cos + u sin
 * half-split pairing (HF's rotate_half, the default): u = x[i],
 * v = x[i + R/2]; interleaved (GPT-J): u = x[2i], v = x[2i + 1]. Features
 * R..D pass through. inverse turns by -p theta_i.
 *
 * The kernels compute the angle, cos and sin in double and round only the
 * result, so f32 agrees with an exact reference to its rounding (HF computes
 * the angle in f32, which is off by about p * 6e-8 radians).
 *
 * A rotation is orthogonal and linear in x: the vjp is the inverse rotation
 * of the gradient (the same op with inverse flipped), the jvp the rotation
 * of the tangent; both are this op again, so every order of derivative
 * works.
 *
 * Attributes: i[0] offset (>= 0), i[1] rotary_dim (0: D, filled in by infer
 * once D is known), i[2] interleaved, i[3] inverse, f[0] base (0: 10000). */
#include "op.h"

#include <inttypes.h>
#include <math.h>

#define ROPE_DEFAULT_BASE 10000.0

static int rope_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                      cn_meta *m) {
    (void)nin;
    char b1[160];
    const cn_tensor *x = in[0];
    cn_dtype dt = (cn_dtype)x->dtype;
    if (!cn_dtype_is_float(dt))
        return cn_failc(CN_EINVAL, "%s: x is %s; rotary embeddings need a float tensor", op->name,
                        cn_dtype_name(dt));
    if (x->ndim < 2)
        return cn_failc(CN_EINVAL, "%s: x %s must have rank 2 or more ([..., T, D])", op->name,
                        cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape));
    if (a->i[0] < 0)
        return cn_failc(CN_EINVAL, "%s: offset %" PRId64 " must be >= 0 (the first row's position)",
                        op->name, a->i[0]);
    if (a->f[0] == 0) a->f[0] = ROPE_DEFAULT_BASE;
    if (!(a->f[0] > 0) || !isfinite(a->f[0]))
        return cn_failc(CN_EINVAL, "%s: base %g must be positive and finite", op->name, a->f[0]);
    a->i[2] = a->i[2] != 0;
    a->i[3] = a->i[3] != 0;
    int64_t D = x->shape[x->ndim - 1], R = a->i[1];
    if (R < 0 || (D >= 0 && R > D))
        return cn_failc(CN_EINVAL, "%s: rotary_dim %" PRId64 " must be in [0, D] (0: all) for x %s",
                        op->name, R, cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape));
    if (R == 0 && D >= 0) R = a->i[1] = D;
    if (R % 2)
        return cn_failc(CN_EINVAL, "%s: rotary_dim %" PRId64 " must be even (features turn in "
                                   "pairs) for x %s", op->name, R,
                        cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape));
    m->dtype = dt;
    m->ndim = x->ndim;
    for (int d = 0; d < x->ndim; d++) m->shape[d] = x->shape[d];
    return CN_OK;
}

static cn_tensor *rope_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                           cn_tensor *gout, int i) {
    (void)in, (void)nin, (void)out, (void)i;
    cn_attrs b = *a;
    b.i[3] = !a->i[3];
    return cn_op_apply(CN_OP_rope, &gout, 1, &b);
}

static cn_tensor *rope_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin, const cn_attrs *a,
                           cn_tensor *out) {
    (void)in, (void)nin, (void)out;
    cn_tensor *t = tin[0];
    return cn_op_apply(CN_OP_rope, &t, 1, a);
}

const cn_op_def cn_opdef_rope = {
    .name = "rope",
    .ninputs = 1,
    .attrs = {{"offset", CN_ATTR_INT, 0, 0},
              {"rotary_dim", CN_ATTR_INT, 1, 0},
              {"interleaved", CN_ATTR_BOOL, 2, 0},
              {"inverse", CN_ATTR_BOOL, 3, 0},
              {"base", CN_ATTR_FLOAT, 0, ROPE_DEFAULT_BASE}},
    .infer = rope_infer,
    .vjp = rope_vjp,
    .jvp = rope_jvp,
    .doc = "rotary position embeddings of x [..., T, D]: row t at position p = offset + t; "
           "features i and i + R/2 (interleaved: 2i and 2i + 1) of the first R = rotary_dim "
           "(0: D, even) turn by p base^(-2i/R): u' = u cos - v sin, v' = v cos + u sin (inverse: "
           "-angle); the rest pass through. Angles, cos and sin in double. ONNX: Slice, Mul, Sub, "
           "Add, Concat with cos/sin tables [T, R/2] (T known)",
};

cn_tensor *cn_rope(cn_tensor *x, const cn_rope_opts *opts) {
    if (!x) return NULL;
    cn_rope_opts d = {0};
    if (!opts) opts = &d;
    cn_attrs a = {0};
    a.i[0] = opts->offset;
    a.i[1] = opts->rotary_dim;
    a.i[2] = opts->interleaved;
    a.i[3] = opts->inverse;
    a.f[0] = opts->base;
    return cn_op_apply(CN_OP_rope, &x, 1, &a);
}
