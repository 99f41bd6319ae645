/* Fused scaled dot-product attention (PyTorch 2's
 * F.scaled_dot_product_attention) and its gradient op. The kernels are the
 * backends' (src/backend/cpu/attention.c: tiled, flash-attention style;
 * src/backend/gpu/gpu_attention.c: one work item per row).
 *
 * scaled_dot_product_attention(q [..., L, E], k [..., S, E], v [..., S, Ev],
 *                              mask?, seed?) -> y [..., L, Ev + 1]
 *   s = scale q k^T + mask (a float mask is added, a bool mask keeps the
 *   true entries, is_causal keeps j <= i), P = softmax(s) along S, y[..., :Ev]
 *   = P v and y[..., Ev] = the logsumexp of each row of s. The batch axes of
 *   q, k, v and the mask broadcast. The logsumexp is part of the output
 *   because an op has one output and the backward pass needs it (lstm_seq
 *   keeps its gates the same way); cn_scaled_dot_product_attention returns
 *   the view y[..., :Ev]. A row with every score masked gives zeros (not
 *   PyTorch 2's NaN) and a logsumexp of +inf, so exp(s - lse) is 0 there too.
 *   Dropout (dropout_p > 0) zeroes each weight of P with probability p and
 *   scales the rest by 1 / (1 - p); the keep bit of (batch b, i, j) is a
 *   Philox draw keyed by the seed input (64 fair bits that the bernoulli op
 *   draws, so a static graph draws a new key on every run and
 *   cn_manual_seed reproduces it) at counter (b L + i) S + j: the backward
 *   op recomputes exactly the same bits.
 *
 * Attributes: i[0] is_causal, i[1] has_mask (input 3 is the mask; the seed
 * follows it when dropout_p > 0), f[0] scale (<= 0 or NaN: 1 / sqrt(E),
 * filled in by infer), f[1] dropout_p.
 *
 * scaled_dot_product_attention_backward(q, k, v, y, dy, mask?, seed?): with
 * part (i[2]) 0 the gradient of q [..., L, E]; 1 that of q and the float
 * mask side by side [..., L, E + S]; 2 those of k and v side by side
 * [..., S, E + Ev]; 3 all three, q's rows over k's and v's [..., L + S,
 * E + Ev] (q's rows padded with zeros). Batch axes: the broadcast ones;
 * the gradient rule sums them down. Each part is packed along the last two
 * axes only, so the rule takes its pieces apart with narrow, which works
 * when batch sizes are unknown until run (static graphs). dy's last column
 * is the logsumexp's gradient, which is honoured. The kernels recompute P
 * block by block from q, k and the saved logsumexp (flash attention's
 * backward), so nothing of size L x S is kept between the passes (but
 * part 1's mask gradient itself). Not differentiable again. */
#include "op.h"

#include <inttypes.h>
#include <math.h>

#define SDPA "scaled_dot_product_attention"

static char *shp(char *buf, size_t n, const cn_tensor *t) {
    return cn_fmt_shape(buf, n, t->ndim, t->shape);
}

static bool known_ne(int64_t a, int64_t b) { return a >= 0 && b >= 0 && a != b; }

/* Size d of dims counted from the end (1: the last); 1 past the rank. */
static int64_t dim_end(const cn_tensor *t, int d) {
    return t->ndim >= d ? t->shape[t->ndim - d] : 1;
}

/* The sizes infer works out, shared by both ops. */
typedef struct sdpa_dims {
    int nb;                     /* batch rank of the result */
    int64_t batch[CN_MAX_DIMS]; /* -1: unknown until run */
    int64_t L, S, E, Ev;
    int mask_at, seed_at; /* input index, or -1 */
} sdpa_dims;

/* Broadcasts the batch axes (all but the last two) of t into d->batch
 * (right-aligned, d->nb wide). */
static int join_batch(const cn_op_def *op, const char *name, const cn_tensor *t, int nbt,
                      sdpa_dims *d) {
    char b1[160];
    for (int k = 0; k < nbt; k++) {
        int64_t s = t->shape[k], *r = &d->batch[d->nb - nbt + k];
        if (s == 1) continue;
        if (s < 0) {
            if (*r == 1) *r = -1;
            continue;
        }
        if (*r == 1 || *r == -1)
            *r = s;
        else if (*r != s)
            return cn_failc(CN_EINVAL,
                            "%s: the batch axes of %s %s do not broadcast with the "
                            "others' (size %" PRId64 " against %" PRId64 ")",
                            op->name, name, shp(b1, sizeof b1, t), s, *r);
    }
    return CN_OK;
}

/* Every check both ops share: inputs q, k, v (, mask) (, seed) from in[0]
 * with the mask at mask_base when attribute has_mask is set. */
static int sdpa_check(const cn_op_def *op, cn_tensor *const *in, int nin, int mask_base,
                      cn_attrs *a, sdpa_dims *d) {
    char b1[160], b2[160], b3[160];
    double p = a->f[1];
    if (!(p >= 0 && p <= 1))
        return cn_failc(CN_EINVAL, "%s: dropout_p is %g; it must be in [0, 1]", op->name, p);
    a->i[0] = a->i[0] != 0;
    a->i[1] = a->i[1] != 0;
    bool has_mask = a->i[1], has_seed = p > 0;
    int want = mask_base + has_mask + has_seed;
    if (nin != want)
        return cn_failc(CN_EINVAL, "%s: got %d inputs; expected %d (q, k, v%s%s%s)", op->name, nin,
                        want, mask_base > 3 ? ", y, dy" : "", has_mask ? ", attn_mask" : "",
                        has_seed ? ", the dropout seed" : "");
    const cn_tensor *q = in[0], *k = in[1], *v = in[2];
    cn_dtype dt = (cn_dtype)q->dtype;
    if (!cn_dtype_is_float(dt))
        return cn_failc(CN_EINVAL, "%s: q is %s; attention needs a float tensor", op->name,
                        cn_dtype_name(dt));
    if (k->dtype != dt || v->dtype != dt)
        return cn_failc(CN_EINVAL, "%s: q, k and v must have one dtype; got %s, %s and %s",
                        op->name, cn_dtype_name(dt), cn_dtype_name((cn_dtype)k->dtype),
                        cn_dtype_name((cn_dtype)v->dtype));
    if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2)
        return cn_failc(CN_EINVAL,
                        "%s: q %s, k %s and v %s must have rank 2 or more ([..., L, E], "
                        "[..., S, E], [..., S, Ev])",
                        op->name, shp(b1, sizeof b1, q), shp(b2, sizeof b2, k),
                        shp(b3, sizeof b3, v));
    d->L = dim_end(q, 2);
    d->E = dim_end(q, 1);
    d->S = dim_end(k, 2);
    d->Ev = dim_end(v, 1);
    if (known_ne(dim_end(k, 1), d->E) || known_ne(dim_end(v, 2), d->S))
        return cn_failc(CN_EINVAL,
                        "%s: q %s, k %s and v %s do not fit: expected q [..., L, E], "
                        "k [..., S, E], v [..., S, Ev]",
                        op->name, shp(b1, sizeof b1, q), shp(b2, sizeof b2, k),
                        shp(b3, sizeof b3, v));
    if (d->E < 0) d->E = dim_end(k, 1);
    if (d->S < 0) d->S = dim_end(v, 2);
    d->mask_at = has_mask ? mask_base : -1;
    d->seed_at = has_seed ? mask_base + has_mask : -1;
    const cn_tensor *m = has_mask ? in[mask_base] : NULL;
    if (m && a->i[0])
        return cn_failc(CN_EINVAL, "%s: give attn_mask or is_causal, not both (as PyTorch)",
                        op->name);
    if (m && m->dtype != CN_BOOL && m->dtype != dt)
        return cn_failc(CN_EINVAL, "%s: attn_mask is %s; it must be bool or q's dtype %s", op->name,
                        cn_dtype_name((cn_dtype)m->dtype), cn_dtype_name(dt));
    if (m && ((known_ne(dim_end(m, 2), 1) && known_ne(dim_end(m, 2), d->L)) ||
              (known_ne(dim_end(m, 1), 1) && known_ne(dim_end(m, 1), d->S))))
        return cn_failc(CN_EINVAL,
                        "%s: attn_mask %s does not broadcast to the scores [..., L, S] "
                        "= [..., %" PRId64 ", %" PRId64 "] of q %s and k %s",
                        op->name, shp(b1, sizeof b1, m), d->L, d->S, shp(b2, sizeof b2, q),
                        shp(b3, sizeof b3, k));
    if (has_seed) {
        const cn_tensor *s = in[d->seed_at];
        if (s->dtype != CN_F32 || s->ndim != 1 || known_ne(s->shape[0], 64))
            return cn_failc(CN_EINVAL,
                            "%s: the dropout seed is %s %s; expected f32 [64] (the "
                            "bits bernoulli draws)",
                            op->name, cn_dtype_name((cn_dtype)s->dtype), shp(b1, sizeof b1, s));
    }
    /* The batch axes of every operand broadcast (the mask's too, as in
     * softmax(q k^T + mask) v). */
    int nbm = m && m->ndim > 2 ? m->ndim - 2 : 0;
    d->nb = q->ndim - 2;
    if (k->ndim - 2 > d->nb) d->nb = k->ndim - 2;
    if (v->ndim - 2 > d->nb) d->nb = v->ndim - 2;
    if (nbm > d->nb) d->nb = nbm;
    for (int i = 0; i < d->nb; i++) d->batch[i] = 1;
    if (join_batch(op, "q", q, q->ndim - 2, d) < 0 || join_batch(op, "k", k, k->ndim - 2, d) < 0 ||
        join_batch(op, "v", v, v->ndim - 2, d) < 0 ||
        (m && join_batch(op, "attn_mask", m, nbm, d) < 0))
        return CN_EINVAL;
    /* The default scale once E is known (infer runs again with real sizes). */
    if (!(a->f[0] > 0) && d->E >= 0) a->f[0] = d->E > 0 ? 1 / sqrt((double)d->E) : 1;
    return CN_OK;
}

static void batch_meta(const sdpa_dims *d, cn_dtype dt, int64_t rows, int64_t cols, cn_meta *m) {
    m->dtype = dt;
    m->ndim = d->nb + 2;
    for (int i = 0; i < d->nb; i++) m->shape[i] = d->batch[i];
    m->shape[d->nb] = rows;
    m->shape[d->nb + 1] = cols;
}

static int64_t plus(int64_t a, int64_t b) { return a >= 0 && b >= 0 ? a + b : -1; }

static int sdpa_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a, cn_meta *m) {
    sdpa_dims d;
    if (sdpa_check(op, in, nin, 3, a, &d) < 0) return CN_EINVAL;
    batch_meta(&d, (cn_dtype)in[0]->dtype, d.L, plus(d.Ev, 1), m);
    return CN_OK;
}

/* ---- gradients ---- */

static cn_tensor *bw_apply(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                           cn_tensor *gout, int part) {
    cn_tensor *bin[7] = {in[0], in[1], in[2], out, gout};
    for (int k = 3; k < nin; k++) bin[k + 2] = in[k];
    cn_attrs ba = *a;
    ba.i[2] = part;
    return cn_op_apply(CN_OP_scaled_dot_product_attention_backward, bin, nin + 2, &ba);
}

static int need_known(int64_t n, const char *what) {
    if (n >= 0) return CN_OK;
    return cn_failc(CN_EUNSUPPORTED, SDPA ": its gradient needs %s, which is unknown until run",
                    what);
}

/* q, k and v together: one backward op (part 3), which the CPU runs as
 * one pass over the score blocks. With the mask's gradient, or only one
 * side wanted: the query side (part 0, or 1 with the mask) and the key side
 * (part 2) as two ops. The walk asks for every gradient at once. */
static int sdpa_vjp_multi(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                          cn_tensor *gout, const bool *need, cn_tensor **g) {
    cn_tensor *q = in[0], *k = in[1], *v = in[2];
    int64_t L = q->shape[q->ndim - 2], E = q->shape[q->ndim - 1], S = k->shape[k->ndim - 2];
    int64_t Ev = v->shape[v->ndim - 1];
    bool has_mask = a->i[1] != 0;
    bool want_mask = has_mask && need[3] && cn_dtype_is_float((cn_dtype)in[3]->dtype);
    if (need[0] && (need[1] || need[2]) && !want_mask) {
        if (need_known(L, "the number L of queries") < 0 ||
            need_known(S, "the number S of keys") < 0 ||
            need_known(E, "the size E of q's last axis") < 0 ||
            need_known(Ev, "the size Ev of v's last axis") < 0)
            return CN_EUNSUPPORTED;
        cn_tensor *b = bw_apply(in, nin, a, out, gout, 3);
        cn_tensor *bq = cn_narrow(b, -2, 0, L), *bkv = cn_narrow(b, -2, L, S);
        if (!(g[0] = cn_sum_to(cn_narrow(bq, -1, 0, E), q))) return CN_EINVAL;
        if (need[1] && !(g[1] = cn_sum_to(cn_narrow(bkv, -1, 0, E), k)))
            return CN_EINVAL;
        if (need[2] && !(g[2] = cn_sum_to(cn_narrow(bkv, -1, E, Ev), v)))
            return CN_EINVAL;
        return CN_OK;
    }
    if (need[0] || want_mask) {
        if (need_known(E, "the size E of q's last axis") < 0) return CN_EUNSUPPORTED;
        if (want_mask && need_known(S, "the number S of keys") < 0) return CN_EUNSUPPORTED;
        cn_tensor *b = bw_apply(in, nin, a, out, gout, want_mask ? 1 : 0);
        if (!b) return CN_EINVAL;
        if (need[0] &&
            !(g[0] = cn_sum_to(want_mask ? cn_narrow(b, -1, 0, E) : b, q)))
            return CN_EINVAL;
        if (want_mask && !(g[3] = cn_sum_to(cn_narrow(b, -1, E, S), in[3])))
            return CN_EINVAL;
    }
    if (need[1] || need[2]) {
        if (need_known(E, "the size E of k's last axis") < 0 ||
            need_known(Ev, "the size Ev of v's last axis") < 0)
            return CN_EUNSUPPORTED;
        cn_tensor *b = bw_apply(in, nin, a, out, gout, 2);
        if (!b) return CN_EINVAL;
        if (need[1] && !(g[1] = cn_sum_to(cn_narrow(b, -1, 0, E), k)))
            return CN_EINVAL;
        if (need[2] && !(g[2] = cn_sum_to(cn_narrow(b, -1, E, Ev), v)))
            return CN_EINVAL;
    }
    return CN_OK;
}

static cn_tensor *sdpa_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                           cn_tensor *gout, int i) {
    bool need[CN_VJP_MULTI_MAX_IN] = {false};
    cn_tensor *g[CN_VJP_MULTI_MAX_IN] = {NULL};
    need[i] = true;
    return sdpa_vjp_multi(in, nin, a, out, gout, need, g) < 0 ? NULL : g[i];
}

static cn_tensor *add_opt(cn_tensor *a, cn_tensor *b) { return a && b ? cn_add(a, b) : a ? a : b; }

/* Forward mode, built from ops (it holds [..., L, S] tensors): with s the
 * masked scores and P = exp(s - lse) from the saved logsumexp (0 on fully
 * masked rows), ds = scale (dq k^T + q dk^T) + dmask, dlse = sum(P ds),
 * dy = [P (ds - dlse) v + P dv, dlse]. Dropout's bits are not exposed as a
 * tensor, so forward mode refuses it. */
static cn_tensor *sdpa_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin, const cn_attrs *a,
                           cn_tensor *out) {
    if (a->f[1] > 0) {
        cn_failc(CN_EUNSUPPORTED, SDPA ": forward mode (jvp) with dropout_p > 0 is not supported");
        return NULL;
    }
    cn_tensor *q = in[0], *k = in[1], *v = in[2];
    cn_tensor *mask = a->i[1] ? in[3] : NULL, *tm = a->i[1] ? tin[3] : NULL;
    cn_dtype dt = (cn_dtype)q->dtype;
    int64_t L = q->shape[q->ndim - 2], S = k->shape[k->ndim - 2], Ev = v->shape[v->ndim - 1];
    double scale = a->f[0];
    if (L < 0 || S < 0 || Ev < 0) {
        cn_failc(CN_EUNSUPPORTED, SDPA ": forward mode needs L, S and Ev known");
        return NULL;
    }
    cn_tensor *kt = cn_mT(k), *ninf = cn_scalar(dt, -INFINITY);
    cn_tensor *s = cn_mul_scalar(cn_matmul(q, kt), scale);
    if (mask) s = mask->dtype == CN_BOOL ? cn_where(mask, s, ninf) : cn_add(s, mask);
    if (a->i[0]) {
        cn_tensor *cols = cn_reshape(cn_arange(0, (double)S, 1, CN_I64), CN_SHAPE(1, S));
        cn_tensor *rows = cn_reshape(cn_arange(0, (double)L, 1, CN_I64), CN_SHAPE(L, 1));
        s = cn_where(cn_le(cols, rows), s, ninf);
    }
    cn_tensor *lse = cn_narrow(out, -1, Ev, 1);
    cn_tensor *P = cn_exp(cn_sub(s, lse));
    cn_tensor *ts = NULL;
    if (tin[0]) ts = cn_matmul(tin[0], kt);
    if (tin[1]) ts = add_opt(ts, cn_matmul(q, cn_mT(tin[1])));
    if (ts) ts = cn_mul_scalar(ts, scale);
    if (tm && mask->dtype != CN_BOOL) ts = add_opt(ts, tm);
    cn_tensor *to = NULL, *tl = NULL;
    if (ts) {
        int ax = -1;
        tl = cn_sum(cn_mul(P, ts), &ax, 1, true);
        to = cn_matmul(cn_mul(P, cn_sub(ts, tl)), v);
    }
    if (tin[2]) to = add_opt(to, cn_matmul(P, tin[2]));
    if (!to) return NULL;
    /* The logsumexp's tangent has the batch axes of the scores; the output's
     * may have more (v's). */
    tl = tl ? cn_expand(tl, lse->ndim, lse->shape) : cn_zeros_like_op(lse);
    cn_tensor *parts[2] = {to, tl};
    return cn_concat(parts, 2, -1);
}

const cn_op_def cn_opdef_scaled_dot_product_attention = {
    .name = SDPA,
    .ninputs = -1,
    .flags = CN_OPF_AUTOCAST,
    .attrs = {{"is_causal", CN_ATTR_BOOL, 0, 0},
              {"has_mask", CN_ATTR_BOOL, 1, 0},
              {"scale", CN_ATTR_FLOAT, 0, 0},
              {"dropout_p", CN_ATTR_FLOAT, 1, 0}},
    .infer = sdpa_infer,
    .vjp = sdpa_vjp,
    .jvp = sdpa_jvp,
    .vjp_multi = sdpa_vjp_multi,
    .doc = "inputs q [..., L, E], k [..., S, E], v [..., S, Ev], attn_mask? (bool: true takes "
           "part; float: added), seed? (dropout); s = scale q k^T + mask (is_causal: j <= i, "
           "top-left), P = softmax(s) over S, dropped with dropout_p (Philox bits from the seed, "
           "survivors / (1 - p)); y = [P v, logsumexp(s)] [..., L, Ev + 1] (cn_ returns P v); "
           "batch axes broadcast; scale <= 0: 1/sqrt(E). A fully masked row gives 0 (PyTorch 2: "
           "NaN) and logsumexp +inf. CPU: flash-attention tiles (blocks of 256 keys, 128 with a "
           "mask or the causal one; query rows in "
           "equal blocks of at most 128 in the forward pass, 64 with the causal mask and in the "
           "backward; a GEMM per block, online softmax), O(L (E + Ev)) memory, never the L x S "
           "scores. ONNX: no "
           "Attention op before opset 23; exported as MatMul, ReduceMax, Exp, ReduceSum nodes "
           "(no dropout)",
    .grad_doc = "the gradient of a fully masked row is 0; dropout's gradient uses the forward's "
                "bits; forward mode (jvp) refuses dropout_p > 0",
};

/* ---- the gradient op ---- */

static int sdpab_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                       cn_meta *m) {
    char b1[160], b2[160];
    sdpa_dims d;
    if (nin < 5)
        return cn_failc(CN_EINVAL,
                        "%s: got %d inputs; expected q, k, v, y, dy (, attn_mask) (, "
                        "seed)",
                        op->name, nin);
    if (sdpa_check(op, in, nin, 5, a, &d) < 0) return CN_EINVAL;
    int part = (int)a->i[2];
    if (part < 0 || part > 3)
        return cn_failc(CN_EINVAL,
                        "%s: part is %d; it must be 0 (q), 1 (q and the mask), 2 (k "
                        "and v) or 3 (q, k and v)",
                        op->name, part);
    if (part == 1 && (d.mask_at < 0 || in[d.mask_at]->dtype == CN_BOOL))
        return cn_failc(CN_EINVAL, "%s: part 1 (the mask's gradient) needs a float attn_mask",
                        op->name);
    cn_meta ym;
    batch_meta(&d, (cn_dtype)in[0]->dtype, d.L, plus(d.Ev, 1), &ym);
    for (int k = 3; k < 5; k++) {
        const cn_tensor *t = in[k];
        bool same = t->ndim == ym.ndim && t->dtype == ym.dtype;
        for (int i = 0; same && i < t->ndim; i++) same = !known_ne(t->shape[i], ym.shape[i]);
        if (!same)
            return cn_failc(CN_EINVAL, "%s: %s is %s %s; expected %s %s (the forward's output)",
                            op->name, k == 3 ? "y" : "dy", cn_dtype_name((cn_dtype)t->dtype),
                            shp(b1, sizeof b1, t), cn_dtype_name(ym.dtype),
                            cn_fmt_shape(b2, sizeof b2, ym.ndim, ym.shape));
    }
    cn_dtype dt = (cn_dtype)in[0]->dtype;
    if (part == 0)
        batch_meta(&d, dt, d.L, d.E, m);
    else if (part == 1)
        batch_meta(&d, dt, d.L, plus(d.E, d.S), m);
    else if (part == 2)
        batch_meta(&d, dt, d.S, plus(d.E, d.Ev), m);
    else
        batch_meta(&d, dt, plus(d.L, d.S), plus(d.E, d.Ev), m);
    return CN_OK;
}

static cn_tensor *sdpab_unsupported(void) {
    cn_failc(CN_EUNSUPPORTED, SDPA "_backward: the gradient of attention's gradient is not "
                                   "supported (double backward)");
    return NULL;
}

static cn_tensor *sdpab_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                            cn_tensor *gout, int i) {
    (void)in, (void)nin, (void)a, (void)out, (void)gout, (void)i;
    return sdpab_unsupported();
}

static cn_tensor *sdpab_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin, const cn_attrs *a,
                            cn_tensor *out) {
    (void)in, (void)tin, (void)nin, (void)a, (void)out;
    return sdpab_unsupported();
}

const cn_op_def cn_opdef_scaled_dot_product_attention_backward = {
    .name = SDPA "_backward",
    .ninputs = -1,
    .flags = CN_OPF_FIRST_ORDER,
    .attrs = {{"is_causal", CN_ATTR_BOOL, 0, 0},
              {"has_mask", CN_ATTR_BOOL, 1, 0},
              {"part", CN_ATTR_INT, 2, 0},
              {"scale", CN_ATTR_FLOAT, 0, 0},
              {"dropout_p", CN_ATTR_FLOAT, 1, 0}},
    .infer = sdpab_infer,
    .vjp = sdpab_vjp,
    .jvp = sdpab_jvp,
    .doc = "inputs q, k, v, y = scaled_dot_product_attention(...), dy, attn_mask?, seed?: part 0 "
           "dq [..., L, E]; 1 [dq, dmask] [..., L, E + S] (float mask); 2 [dk, dv] [..., S, E + "
           "Ev]; 3 rows [dq, 0; dk, dv] [..., L + S, E + Ev]; P is recomputed block by block from "
           "q, k and y's logsumexp (flash attention's backward: dS = P (dP - rowsum(dO O) + "
           "dlse)); the CPU runs part 3 in one pass when there are as many batch indices as "
           "threads",
    .grad_doc = "not differentiable again (no double backward through attention)",
};

/* ---- the public function ---- */

/* 64 fair bits from the bernoulli op, made from q through ops so that in a
 * static graph they are a node (drawn again on every run), not a constant. */
static cn_tensor *dropout_seed(cn_tensor *q) {
    cn_tensor *one = cn_reshape(cn_sum(q, NULL, 0, false), CN_SHAPE(1));
    cn_tensor *wide = cn_expand(one, CN_SHAPE(64));
    if (!wide) return NULL;
    cn_attrs fa = {0};
    fa.i[0] = CN_F32;
    fa.f[0] = 0.5;
    return cn_bernoulli(cn_op_apply(CN_OP_full_like, &wide, 1, &fa));
}

cn_tensor *cn_scaled_dot_product_attention(cn_tensor *q, cn_tensor *k, cn_tensor *v,
                                           cn_tensor *attn_mask, double dropout_p, bool is_causal,
                                           double scale) {
    if (!q || !k || !v) return NULL;
    if (!(dropout_p >= 0 && dropout_p <= 1))
        return cn_fail(SDPA ": dropout_p is %g; it must be in [0, 1]", dropout_p);
    /* Half types compute in f32 here rather than in the dispatcher, so the
     * saved logsumexp keeps f32's precision for the backward pass. */
    cn_dtype dt = (cn_dtype)q->dtype, half = cn_is_half(dt) ? dt : CN_DTYPE_COUNT;
    if (half != CN_DTYPE_COUNT) {
        q = cn_cast(q, CN_F32);
        if (k->dtype == half) k = cn_cast(k, CN_F32);
        if (v->dtype == half) v = cn_cast(v, CN_F32);
        if (!q || !k || !v) return NULL;
        dt = CN_F32;
    }
    if (attn_mask && attn_mask->dtype != CN_BOOL && attn_mask->dtype != dt &&
        cn_dtype_is_float((cn_dtype)attn_mask->dtype) && cn_dtype_is_float(dt))
        attn_mask = cn_cast(attn_mask, dt);
    cn_tensor *ins[5] = {q, k, v};
    int n = 3;
    if (attn_mask) ins[n++] = attn_mask;
    if (dropout_p > 0) {
        if (!(ins[n++] = dropout_seed(q))) return NULL;
    }
    cn_attrs a = {0};
    a.i[0] = is_causal;
    a.i[1] = attn_mask != NULL;
    a.f[0] = scale > 0 ? scale : 0;
    a.f[1] = dropout_p;
    cn_tensor *y = cn_op_apply(CN_OP_scaled_dot_product_attention, ins, n, &a);
    if (!y) return NULL;
    int64_t Ev = y->shape[y->ndim - 1] - 1;
    if (Ev < 0) return cn_fail(SDPA ": the size Ev of v's last axis is unknown until run");
    y = cn_narrow(y, -1, 0, Ev);
    return half != CN_DTYPE_COUNT ? cn_cast(y, half) : y;
}
