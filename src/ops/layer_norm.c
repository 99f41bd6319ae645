/* layer_norm: PyTorch's F.layer_norm as one op.
 *
 * layer_norm(x, [weight], [bias]) normalises x over its last `ndim` axes
 * (one row per index of the leading axes): y = (x - mean) / sqrt(var + eps)
 * * weight + bias, var biased. weight and bias have the normalised shape
 * and x's dtype. The CPU kernel reads each row twice (mean, then the sum of
 * squared deviations, both in double) and writes y in a third loop over the
 * row, where the composition of mean, var, sub, rsqrt, mul and add makes
 * five to seven passes over memory.
 *
 * Gradients are compositions, so every order works. With x^ = (x - mean) r,
 * r = 1 / sqrt(var + eps), N the row length, the Jacobian of x^ along a row,
 * J = r (I - 1 1^T / N - x^ x^T / N), is symmetric: the vjp of x is
 * J (g weight) and the jvp J t. x^ is this op again without weight and bias
 * (or the output itself when it has none).
 *
 * Backends without a kernel (the GPU ones) get the composition from
 * cn_layer_norm instead of the op.
 *
 * Attributes: i[0] ndim (the normalised axes), i[1] has weight, i[2] has
 * bias (the inputs follow x in that order), f[0] eps. */
#include "op.h"

#include <inttypes.h>
#include <math.h>

static int ln_check_param(const cn_op_def *op, const char *what, const cn_tensor *x,
                          const cn_tensor *p, int nd) {
    char b1[160], b2[160];
    if (p->dtype != x->dtype)
        return cn_failc(CN_EINVAL, "%s: %s is %s but x is %s", op->name, what,
                        cn_dtype_name((cn_dtype)p->dtype), cn_dtype_name((cn_dtype)x->dtype));
    bool ok = p->ndim == nd;
    for (int d = 0; ok && d < nd; d++) {
        int64_t s = p->shape[d], t = x->shape[x->ndim - nd + d];
        ok = s == t || s < 0 || t < 0;
    }
    if (!ok)
        return cn_failc(CN_EINVAL, "%s: %s %s must have the normalized shape, the last %d sizes of "
                                   "x %s",
                        op->name, what, cn_fmt_shape(b1, sizeof b1, p->ndim, p->shape), nd,
                        cn_fmt_shape(b2, sizeof b2, x->ndim, x->shape));
    return CN_OK;
}

static int ln_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a, cn_meta *m) {
    char b1[160];
    const cn_tensor *x = in[0];
    cn_dtype dt = (cn_dtype)x->dtype;
    if (!cn_dtype_is_float(dt))
        return cn_failc(CN_EINVAL, "%s: x is %s; layer normalization needs a float tensor",
                        op->name, cn_dtype_name(dt));
    int64_t nd = a->i[0];
    if (nd < 1 || nd > x->ndim)
        return cn_failc(CN_EINVAL, "%s: ndim %" PRId64 " (the normalized axes) must be in [1, %d] "
                                   "for x %s",
                        op->name, nd, x->ndim, cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape));
    a->i[1] = a->i[1] != 0;
    a->i[2] = a->i[2] != 0;
    if (nin != 1 + a->i[1] + a->i[2])
        return cn_failc(CN_EINVAL, "%s: got %d inputs for x%s%s", op->name, nin,
                        a->i[1] ? ", weight" : "", a->i[2] ? ", bias" : "");
    if (!(a->f[0] >= 0) || !isfinite(a->f[0]))
        return cn_failc(CN_EINVAL, "%s: eps %g must be >= 0 and finite", op->name, a->f[0]);
    int k = 1;
    if (a->i[1] && ln_check_param(op, "weight", x, in[k++], (int)nd) < 0) return CN_EINVAL;
    if (a->i[2] && ln_check_param(op, "bias", x, in[k], (int)nd) < 0) return CN_EINVAL;
    m->dtype = dt;
    m->ndim = x->ndim;
    memcpy(m->shape, x->shape, sizeof m->shape);
    return CN_OK;
}

/* ---- the composition: gradients, and devices without a kernel ---- */

static int ln_axes(const cn_tensor *x, int nd, int *axes) {
    for (int k = 0; k < nd; k++) axes[k] = x->ndim - nd + k;
    return nd;
}

static cn_tensor *inv_std(cn_tensor *x, const int *axes, int nd, double eps) {
    return cn_rsqrt(cn_add_scalar(cn_var(x, axes, nd, 0, true), eps));
}

static cn_tensor *composed(cn_tensor *x, int nd, cn_tensor *w, cn_tensor *b, double eps) {
    int axes[CN_MAX_DIMS];
    ln_axes(x, nd, axes);
    cn_tensor *y = cn_mul(cn_sub(x, cn_mean(x, axes, nd, true)), inv_std(x, axes, nd, eps));
    if (w) y = cn_mul(y, w);
    if (b) y = cn_add(y, b);
    return y;
}

/* J v along each row (J symmetric: the header). */
static cn_tensor *row_jacobian(cn_tensor *xhat, cn_tensor *r, cn_tensor *v, const int *axes,
                               int nd) {
    cn_tensor *c = cn_sub(v, cn_mean(v, axes, nd, true));
    return cn_mul(r, cn_sub(c, cn_mul(xhat, cn_mean(cn_mul(v, xhat), axes, nd, true))));
}

static cn_tensor *normalized(cn_tensor *const *in, const cn_attrs *a, cn_tensor *out) {
    if (!a->i[1] && !a->i[2]) return out;
    cn_attrs b = *a;
    b.i[1] = b.i[2] = 0;
    return cn_op_apply(CN_OP_layer_norm, in, 1, &b);
}

static int ln_vjp_multi(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                        cn_tensor *g, const bool *need, cn_tensor **grads) {
    (void)nin;
    int nd = (int)a->i[0], iw = a->i[1] ? 1 : -1, ib = a->i[2] ? 1 + (int)a->i[1] : -1;
    int axes[CN_MAX_DIMS];
    ln_axes(in[0], nd, axes);
    cn_tensor *xhat = normalized(in, a, out);
    if (need[0]) {
        cn_tensor *gh = iw > 0 ? cn_mul(g, in[iw]) : g;
        grads[0] = row_jacobian(xhat, inv_std(in[0], axes, nd, a->f[0]), gh, axes, nd);
        if (!grads[0]) return CN_EINVAL;
    }
    if (iw > 0 && need[iw]) {
        grads[iw] = cn_sum_to(cn_mul(g, xhat), in[iw]);
        if (!grads[iw]) return CN_EINVAL;
    }
    if (ib > 0 && need[ib]) {
        grads[ib] = cn_sum_to(g, in[ib]);
        if (!grads[ib]) return CN_EINVAL;
    }
    return CN_OK;
}

static cn_tensor *ln_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                         cn_tensor *g, int i) {
    bool need[3] = {false, false, false};
    cn_tensor *grads[3] = {NULL, NULL, NULL};
    need[i] = true;
    return ln_vjp_multi(in, nin, a, out, g, need, grads) < 0 ? NULL : grads[i];
}

static cn_tensor *ln_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin, const cn_attrs *a,
                         cn_tensor *out) {
    (void)nin;
    int nd = (int)a->i[0], iw = a->i[1] ? 1 : -1, ib = a->i[2] ? 1 + (int)a->i[1] : -1;
    int axes[CN_MAX_DIMS];
    ln_axes(in[0], nd, axes);
    cn_tensor *xhat = normalized(in, a, out);
    cn_tensor *t = NULL;
    if (tin[0]) {
        t = row_jacobian(xhat, inv_std(in[0], axes, nd, a->f[0]), tin[0], axes, nd);
        if (iw > 0) t = cn_mul(t, in[iw]);
    }
    if (iw > 0 && tin[iw]) {
        cn_tensor *tw = cn_mul(xhat, tin[iw]);
        t = t ? cn_add(t, tw) : tw;
    }
    if (ib > 0 && tin[ib]) t = cn_add(t ? t : cn_zeros_like_op(out), tin[ib]);
    return t;
}

const cn_op_def cn_opdef_layer_norm = {
    .name = "layer_norm",
    .ninputs = -1,
    .attrs = {{"ndim", CN_ATTR_INT, 0, 1},
              {"has_weight", CN_ATTR_BOOL, 1, 0},
              {"has_bias", CN_ATTR_BOOL, 2, 0},
              {"eps", CN_ATTR_FLOAT, 0, 1e-5}},
    .infer = ln_infer,
    .vjp = ln_vjp,
    .vjp_multi = ln_vjp_multi,
    .jvp = ln_jvp,
    .onnx = "LayerNormalization",
    .doc = "y = (x - mean) / sqrt(var + eps) * weight + bias over the last ndim axes (var "
           "biased; weight, bias optional, of the normalized shape and x's dtype); mean and var "
           "in double, one row at a time. Kernel: CPU; on other devices cn_layer_norm composes "
           "mean, var, sub, rsqrt, mul, add. ONNX: LayerNormalization (ones for an absent weight)",
};

/* Does the backend x computes on have a kernel for the op? Symbolic x: the
 * default device's, where a program places its steps. */
static bool kernel_for(const cn_tensor *x) {
    int kind = x->storage ? x->storage->device_kind : cn_get_default_device().kind;
    return cn_backend_has_kernel((cn_device_kind)kind, CN_OP_layer_norm);
}

cn_tensor *cn_layer_norm(cn_tensor *x, int ndim, cn_tensor *weight, cn_tensor *bias, double eps) {
    if (!x) return NULL;
    /* Mixed dtypes (bf16 activations with f32 parameters under autocast)
     * compute in their common type, as the composition's promotion did. */
    cn_dtype t = cn_tensor_dtype(x);
    if (weight) t = cn_promote_types(t, cn_tensor_dtype(weight));
    if (bias) t = cn_promote_types(t, cn_tensor_dtype(bias));
    cn_tensor *in[3] = {x};
    int n = 1;
    if (weight) in[n++] = weight;
    if (bias) in[n++] = bias;
    for (int k = 0; k < n; k++)
        if (cn_tensor_dtype(in[k]) != t && !(in[k] = cn_cast(in[k], t))) return NULL;
    x = in[0];
    weight = weight ? in[1] : NULL;
    bias = bias ? in[n - 1] : NULL;
    cn_attrs a = {0};
    a.i[0] = ndim;
    a.i[1] = weight != NULL;
    a.i[2] = bias != NULL;
    a.f[0] = eps;
    if (kernel_for(x)) return cn_op_apply(CN_OP_layer_norm, in, n, &a);
    cn_meta m; /* the op's checks and messages for the composition too */
    if (cn_opdef_layer_norm.infer(&cn_opdef_layer_norm, in, n, &a, &m) < 0) return NULL;
    return composed(x, ndim, weight, bias, eps);
}
