/* The attention subgraph exporters write, imported as one fused
 * scaled_dot_product_attention op (src/ops/attention.c):
 *
 *   MatMul(Softmax(masked(MatMul(Q', Kt') [* or / c]), axis = last), V)
 *
 * where Q' is Q scaled by constants (Mul or Div, any number of them), Kt'
 * a Transpose of K scaled the same way (before or after the transpose),
 * and masked(s) is s itself, s + a float mask (Add), or Where(cond, fill,
 * s) / Where(cond, s, fill) with fill -inf or the lowest f32 (a bool mask:
 * not cond, or cond). This is what PyTorch 1.13 writes for
 * nn.MultiheadAttention (q / sqrt(E), then baddbmm's Mul by 1 and Add),
 * what PyTorch 2 writes for F.scaled_dot_product_attention (sqrt(scale) on
 * Q and on K^T), and what hand-written attention becomes (masked_fill is a
 * Where). PyTorch 2.15's exporters (both) write F.scaled_dot_product_attention
 * with K^T as a Reshape to 3-D, a Transpose and a Reshape back
 * (key_of_reshaped), and the softmax under Where(IsNaN(P), 0, P)
 * (nan_guarded_softmax).
 * The fused kernel never keeps the L x S scores, and does the two matmuls
 * and the softmax in one pass over tiles.
 *
 * The match is made at the final MatMul, walking back through the file's
 * nodes; the nodes it covers were already imported as ordinary ops, and
 * nothing reads them afterwards (each covered value has exactly one
 * reader), so compiling the graph drops them. Anything else (another
 * reader, a scale that is not a positive constant, a softmax over another
 * axis, shapes or dtypes the fused op refuses, or too few keys: below)
 * leaves the MatMul to its ordinary handler. */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX
#include <float.h>
#include <math.h>

/* Fewer keys than this (known at load) and the ops stay: the fused op
 * made the BERT encoder of bench/infer_peer.py (128 tokens) 3% slower at 1
 * thread, while ViT-B/16 (197) was 5% faster (docs/benchmarks.md,
 * "Transformers (issue 19)"), when the kernel's key blocks (sdpa_keys,
 * src/backend/cpu/attention.h) held 128 keys; without a mask they now hold
 * up to 256, which made ViT's forward of the op 1.09x faster again. */
#define ONNX_ATTENTION_MIN_KEYS 129

static bool same_dims(const cn_tensor *t, int r, const int64_t *d) {
    if (!t || cn_ndim(t) != r) return false;
    for (int i = 0; i < r; i++)
        if (d[i] < 0 || cn_dim(t, i) != d[i]) return false;
    return true;
}

/* K for Kt written as PyTorch 2's exporter writes k.transpose(-2, -1):
 * Reshape(Transpose(Reshape(X, [P, S, E]), [0, 2, 1]), X's leading sizes +
 * [E, S]), X of rank r >= 3 and known sizes; X itself, or NULL. */
static cn_tensor *key_of_reshaped(const onnx_ctx *c, const vmap *vals, const char *kt) {
    const Onnx__NodeProto *r2 = onnx_inner(c, kt, "Reshape");
    const Onnx__NodeProto *t = r2 ? onnx_inner(c, r2->input[0], "Transpose") : NULL;
    const Onnx__NodeProto *r1 = t && t->n_input == 1 ? onnx_inner(c, t->input[0], "Reshape") : NULL;
    cn_tensor *x = r1 ? vmap_get(vals, r1->input[0]) : NULL;
    int64_t perm[4];
    if (!x || cn_ndim(x) < 3 || onnx_attr_ints(t, "perm", perm, 4) != 3 || perm[0] != 0 ||
        perm[1] != 2 || perm[2] != 1)
        return NULL;
    int r = cn_ndim(x);
    int64_t d[CN_MAX_DIMS], p = 1, S = cn_dim(x, r - 2), E = cn_dim(x, r - 1);
    for (int i = 0; i < r - 2; i++) {
        d[i] = cn_dim(x, i);
        p = d[i] < 0 || p < 0 ? -1 : p * d[i];
    }
    d[r - 2] = E, d[r - 1] = S;
    if (p < 0 || !same_dims(vmap_get(vals, t->input[0]), 3, (int64_t[]){p, S, E}) ||
        !same_dims(vmap_get(vals, kt), r, d))
        return NULL;
    return x;
}

/* K for Kt: Kt = Transpose(X, perm), K = X permuted by perm with its last
 * two entries swapped (a view; X itself when that is the identity); or
 * key_of_reshaped's form. */
static cn_tensor *key_of(const onnx_ctx *c, const vmap *vals, const char *kt, double *scale) {
    kt = onnx_unscale(c, vals, kt, scale);
    cn_tensor *xr = key_of_reshaped(c, vals, kt);
    if (xr) return xr;
    const Onnx__NodeProto *t = onnx_producer(c, kt);
    if (!onnx_is_op(t, "Transpose") || t->n_input != 1) return NULL;
    cn_tensor *x = vmap_get(vals, onnx_unscale(c, vals, t->input[0], scale));
    int r = x ? cn_ndim(x) : 0, perm[CN_MAX_DIMS];
    int64_t p64[CN_MAX_DIMS];
    int np = onnx_attr_ints(t, "perm", p64, CN_MAX_DIMS);
    if (r < 2 || (np >= 0 && np != r)) return NULL;
    bool identity = true;
    for (int i = 0; i < r; i++) {
        int64_t a = np < 0 ? r - 1 - i : p64[i];
        if (a < 0 || a >= r) return NULL;
        perm[i] = (int)a;
    }
    int s = perm[r - 1];
    perm[r - 1] = perm[r - 2];
    perm[r - 2] = s;
    for (int i = 0; i < r; i++) identity &= perm[i] == i;
    return identity ? x : cn_permute(x, perm, r);
}

/* The scores: MatMul(Q', Kt') scaled by constants, whose product
 * multiplies *scale when they are. */
static bool scores(const onnx_ctx *c, const vmap *vals, const char *s, double *scale,
                   cn_tensor **q, cn_tensor **k) {
    double f = 1;
    const Onnx__NodeProto *mm = onnx_inner(c, onnx_unscale(c, vals, s, &f), "MatMul");
    if (!mm || mm->n_input != 2) return false;
    *q = vmap_get(vals, onnx_unscale(c, vals, mm->input[0], &f));
    *k = key_of(c, vals, mm->input[1], &f);
    if (!*q || !*k || cn_ndim(*q) < 2) return false;
    *scale *= f;
    return true;
}

/* The scores and the mask under the softmax's input x (masked() above). */
static bool masked(const onnx_ctx *c, const vmap *vals, const char *x, double *scale,
                   cn_tensor **q, cn_tensor **k, cn_tensor **mask) {
    const Onnx__NodeProto *add = onnx_inner(c, x, "Add"), *where = onnx_inner(c, x, "Where");
    if (add && add->n_input == 2) {
        for (int i = 0; i < 2; i++)
            if (scores(c, vals, add->input[i], scale, q, k)) {
                *mask = vmap_get(vals, add->input[1 - i]);
                return *mask && cn_tensor_dtype(*mask) == cn_tensor_dtype(*q);
            }
        return false;
    }
    if (where && where->n_input == 3) {
        cn_tensor *cond = vmap_get(vals, where->input[0]);
        double fill;
        for (int i = 1; i < 3; i++) {
            const cn_tensor *s = vmap_get(vals, where->input[i]);
            if (!cond || cn_tensor_dtype(cond) != CN_BOOL || !s ||
                !onnx_pattern_scalar(vals, where->input[3 - i], s, &fill) || !(fill <= -FLT_MAX) ||
                !scores(c, vals, where->input[i], scale, q, k))
                continue;
            /* The scores are kept where cond is true (i = 1) or false. */
            *mask = i == 1 ? cond : cn_logical_not(cond);
            return *mask != NULL;
        }
        return false;
    }
    return scores(c, vals, x, scale, q, k);
}

/* The softmax under Where(IsNaN(P), 0, P), P = Softmax(...): PyTorch 2's
 * exporter writes F.scaled_dot_product_attention's probabilities so, a
 * fully masked row's NaNs made zeros (what the fused op gives). P is read
 * by the IsNaN and the Where only. */
static const Onnx__NodeProto *nan_guarded_softmax(const onnx_ctx *c, const vmap *vals,
                                                  const char *name) {
    const Onnx__NodeProto *w = onnx_inner(c, name, "Where");
    const Onnx__NodeProto *isnan = w && w->n_input == 3 ? onnx_inner(c, w->input[0], "IsNaN") : NULL;
    const Onnx__NodeProto *sm = isnan ? onnx_producer(c, w->input[2]) : NULL;
    const cn_tensor *p = sm ? vmap_get(vals, w->input[2]) : NULL;
    double zero;
    if (!onnx_is_op(sm, "Softmax") || isnan->n_input != 1 || strcmp(isnan->input[0], w->input[2]) ||
        onnx_readers(c, w->input[2]) != 2 || !onnx_pattern_scalar(vals, w->input[1], p, &zero) ||
        zero != 0)
        return NULL;
    return sm;
}

int onnx_fuse_attention(onnx_ctx *c, const vmap *vals, const Onnx__NodeProto *n, cn_tensor **out) {
    if (!c->graph || !onnx_is_op(n, "MatMul") || n->n_input != 2) return 0;
    cn_tensor *v = vmap_get(vals, n->input[1]);
    const Onnx__NodeProto *sm = onnx_inner(c, n->input[0], "Softmax");
    if (!sm) sm = nan_guarded_softmax(c, vals, n->input[0]);
    if (!v || cn_ndim(v) < 2 || !sm || sm->n_input != 1) return 0;
    const cn_tensor *x = vmap_get(vals, sm->input[0]);
    int r = x ? cn_ndim(x) : 0;
    int64_t axis = onnx_attr_int(sm, "axis", c->opset_of_node < 13 ? 1 : -1);
    if (r < 2 || (axis != -1 && axis != r - 1)) return 0;
    double outer = 1, scale = 1;
    cn_tensor *q = NULL, *k = NULL, *mask = NULL;
    const char *x1 = onnx_unscale(c, vals, sm->input[0], &outer);
    if (!masked(c, vals, x1, &scale, &q, &k, &mask)) {
        cn_clear_error(); /* a failed cn_logical_not: the ops stay */
        return 0;
    }
    /* A scale outside the mask would scale a float mask too (the fused op
     * adds it as it is), and a fill -inf * 0 is NaN. */
    if (mask && outer != 1) return 0;
    scale *= outer;
    if (!(scale > 0) || !isfinite(scale)) return 0;
    int64_t keys = cn_ndim(k) >= 2 ? cn_dim(k, cn_ndim(k) - 2) : -1;
    if (keys >= 0 && keys < ONNX_ATTENTION_MIN_KEYS) return 0;
    cn_tensor *y = cn_scaled_dot_product_attention(q, k, v, mask, 0.0, false, scale);
    if (!y) { /* the fused op refused these shapes or dtypes: the ops stay */
        cn_clear_error();
        return 0;
    }
    out[0] = y;
    return 1;
}

#endif
