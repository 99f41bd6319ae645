/* ONNX export of scaled_dot_product_attention as its exact composition.
 * ONNX has no attention op before opset 23 (the export writes opset 17),
 * so the op becomes MatMul, Mul, Where/Add for the mask, ReduceMax, Exp,
 * ReduceSum, Log, MatMul, Concat: the op's whole output, the logsumexp
 * column included, with a fully masked row's zeros and +inf (ONNX's Softmax
 * would give NaN there). Dropout draws from the library's generator, which
 * an ONNX runtime does not have: refused. */
#include "onnx_export.h"

#include <math.h>

#ifdef CN_HAVE_ONNX

/* op over the last axis, keepdims (ReduceSum takes the axes as an input
 * from opset 13, the others as an attribute until 18). */
static const char *reduce_last(ox_ctx *c, const char *op, const char *x) {
    int64_t ax = -1;
    bool as_input = !strcmp(op, "ReduceSum");
    const char *ins[2] = {x, as_input ? ox_const_i64s(c, &ax, 1) : NULL};
    Onnx__NodeProto *n = ox_node(c, op, ins, as_input ? 2 : 1, 1);
    if (!n || (!as_input && ox_attr_ints(c, n, "axes", &ax, 1) < 0) ||
        ox_attr_int(c, n, "keepdims", 1) < 0)
        return NULL;
    return n->output[0];
}

static int64_t size_at(const cn_tensor *t, int nb, int d) {
    int tb = t->ndim > 2 ? t->ndim - 2 : 0, td = d - (nb - tb);
    return td >= 0 ? t->shape[td] : 1;
}

/* The composition computes the logsumexp with the batch axes of the scores
 * (q's, k's and the mask's) and joins it to P v: v may not add batch axes
 * of its own. */
static bool v_adds_batch(const cn_tensor *q, const cn_tensor *k, const cn_tensor *m,
                         const cn_tensor *v) {
    int rank = q->ndim > k->ndim ? q->ndim : k->ndim;
    if (m && m->ndim > rank) rank = m->ndim;
    if (v->ndim > rank) return true;
    int nb = rank - 2;
    for (int d = 0; d < nb; d++) {
        int64_t sv = size_at(v, nb, d), so = 1;
        const cn_tensor *ts[3] = {q, k, m};
        for (int i = 0; i < 3; i++) {
            int64_t x = ts[i] ? size_at(ts[i], nb, d) : 1;
            if (x != 1) so = x;
        }
        if (sv != 1 && so == 1) return true;
    }
    return false;
}

const char *ox_emit_sdpa(ox_ctx *c, const ir_step *s, const char *const *in, cn_tensor *const *it,
                         const cn_tensor *out) {
    (void)out;
    const cn_attrs *a = &s->attrs;
    if (a->f[1] > 0)
        return ox_unsup(c, "dropout: a random op, ONNX's generator would draw other bits");
    const cn_tensor *q = it[0], *k = it[1], *v = it[2], *m = a->i[1] ? it[3] : NULL;
    cn_dtype t = (cn_dtype)q->dtype;
    if (v_adds_batch(q, k, m, v))
        return ox_unsup(c, "v broadcasts batch axes q, k and the mask lack");
    double scale = a->f[0];
    if (!(scale > 0)) return ox_unsup(c, "the scale is unknown (q's last size is unknown)");
    int64_t perm[CN_MAX_DIMS];
    for (int d = 0; d < k->ndim; d++) perm[d] = d;
    perm[k->ndim - 2] = k->ndim - 1;
    perm[k->ndim - 1] = k->ndim - 2;
    Onnx__NodeProto *tr = ox_node(c, "Transpose", &in[1], 1, 1);
    if (!tr || ox_attr_ints(c, tr, "perm", perm, k->ndim) < 0) return NULL;
    const char *sc = ox_binary(c, "MatMul", in[0], tr->output[0]);
    sc = ox_binary(c, "Mul", sc, ox_const_scalar(c, t, scale));
    const char *ninf = ox_const_scalar(c, t, -INFINITY);
    if (m && m->dtype == CN_BOOL) {
        const char *w[3] = {in[3], sc, ninf};
        sc = ox_op1(c, "Where", w, 3);
    } else if (m) {
        sc = ox_binary(c, "Add", sc, in[3]);
    }
    if (a->i[0]) { /* causal: a constant [L, S] of key j <= query i */
        int64_t shape[2] = {q->shape[q->ndim - 2], k->shape[k->ndim - 2]};
        if (shape[0] < 0 || shape[1] < 0) return ox_unsup(c, "causal with L or S unknown");
        uint8_t *tri = ox_alloc(c, (size_t)(shape[0] * shape[1] + 1));
        if (!tri) return NULL;
        for (int64_t i = 0; i < shape[0]; i++)
            for (int64_t j = 0; j < shape[1]; j++) tri[i * shape[1] + j] = j <= i;
        const char *cm = ox_add_init(
            c, ox_tensor_proto(c, ox_unique_name(c, "causal_mask"), CN_BOOL, 2, shape, tri));
        const char *w[3] = {cm, sc, ninf};
        sc = ox_op1(c, "Where", w, 3);
    }
    /* lse = max + log(sum(exp(s - max))); a row of -inf: max 0 for the
     * sums, lse +inf, so exp(s - lse) is 0 */
    const char *mx = reduce_last(c, "ReduceMax", sc);
    const char *dead = ox_binary(c, "Equal", mx, ninf);
    const char *w0[3] = {dead, ox_const_scalar(c, t, 0), mx};
    const char *m0 = ox_op1(c, "Where", w0, 3);
    const char *l = reduce_last(c, "ReduceSum", ox_unary(c, "Exp", ox_binary(c, "Sub", sc, m0)));
    const char *lse = ox_binary(c, "Add", m0, ox_unary(c, "Log", l));
    const char *w1[3] = {dead, ox_const_scalar(c, t, INFINITY), lse};
    lse = ox_op1(c, "Where", w1, 3);
    const char *p = ox_unary(c, "Exp", ox_binary(c, "Sub", sc, lse));
    const char *parts[2] = {ox_binary(c, "MatMul", p, in[2]), lse};
    Onnx__NodeProto *cat = ox_node(c, "Concat", parts, 2, 1);
    if (!cat || ox_attr_int(c, cat, "axis", -1) < 0) return NULL;
    return cat->output[0];
}

#endif /* CN_HAVE_ONNX */
