/* MultiheadAttention with torch.nn.MultiheadAttention's parameters and
 * semantics. Internally everything is batch first, [N, L, E]; the heads are
 * [N, H, L, d] views (a reshape of the projection's last axis and a
 * transpose), so no head is copied before the attention itself.
 *
 * Two paths, as in PyTorch 2: without the attention weights, one fused
 * scaled_dot_product_attention op (flash-attention tiles on the CPU, never
 * the L x S scores; its dropout on the weights too); with them, the scores
 * are formed, softmaxed, dropped out and multiplied by v, so the weights
 * can be returned. Masks are merged into the one mask the op takes: all
 * bool masks stay bool ("may attend", the op's convention, so PyTorch's
 * "true = masked" is negated), and once any is float they are all made
 * additive (-inf where a bool mask forbids), as PyTorch's _canonical_mask
 * does. */
#include "transformer.h"

#include <inttypes.h>
#include <math.h>

typedef struct mha_mod {
    cn_module base;
    int64_t E, H, d, kdim, vdim;
    bool packed; /* in_proj_weight [3E, E] (kdim = vdim = E) */
    bool bias, batch_first;
    double dropout;
} mha_mod;

static cn_tensor *mha_module_forward(cn_module *m, cn_tensor *x);
static const cn_module_vtable mha_vt = {"MultiheadAttention", mha_module_forward, NULL};

bool cn_mha_is(const cn_module *m) { return m && m->vt == &mha_vt; }

/* x [..., in] times projection `which` (0 q, 1 k, 2 v): x W^T + b. */
static cn_tensor *project(mha_mod *a, cn_tensor *x, int which) {
    cn_module *m = &a->base;
    static const char *const sep[3] = {"q_proj_weight", "k_proj_weight", "v_proj_weight"};
    cn_tensor *w = a->packed ? cn_narrow(cn_module_param(m, "in_proj_weight"), 0, which * a->E, a->E)
                             : cn_module_param(m, sep[which]);
    cn_tensor *y = cn_matmul(x, cn_mT(w));
    if (a->bias) y = cn_add(y, cn_narrow(cn_module_param(m, "in_proj_bias"), 0, which * a->E, a->E));
    return y;
}

/* [N, T, E] -> [N, H, T, d]: a view when x's last axis is contiguous. */
static cn_tensor *split_heads(mha_mod *a, cn_tensor *x) {
    if (!x) return NULL;
    int64_t N = x->shape[0], T = x->shape[1];
    if (N < 0 && T < 0)
        return cn_fail("MultiheadAttention: the batch and the sequence length are both unknown "
                       "(-1); a static graph may leave one of them unknown");
    int64_t shape[4] = {N, T, a->H, a->d};
    return cn_transpose(cn_reshape(x, 4, shape), 1, 2);
}

int cn_mha_self_qkv(cn_module *m, cn_tensor *x, cn_tensor **q, cn_tensor **k, cn_tensor **v) {
    mha_mod *a = (mha_mod *)m;
    *q = *k = *v = NULL;
    if (a->packed) {
        /* One GEMM for the three projections, then views of its thirds. */
        cn_tensor *y = cn_matmul(x, cn_mT(cn_module_param(m, "in_proj_weight")));
        if (a->bias) y = cn_add(y, cn_module_param(m, "in_proj_bias"));
        cn_tensor *parts[3];
        if (!y || cn_chunk(y, 3, -1, parts) != 3) return CN_EINVAL;
        *q = split_heads(a, parts[0]);
        *k = split_heads(a, parts[1]);
        *v = split_heads(a, parts[2]);
    } else {
        *q = split_heads(a, project(a, x, 0));
        *k = split_heads(a, project(a, x, 1));
        *v = split_heads(a, project(a, x, 2));
    }
    return *q && *k && *v ? CN_OK : CN_EINVAL;
}

cn_tensor *cn_mha_merge_out(cn_module *m, cn_tensor *y) {
    mha_mod *a = (mha_mod *)m;
    if (!y) return NULL;
    /* At most one of N and T is unknown (split_heads checked): it is the -1. */
    int64_t N = y->shape[0] < 0 ? -1 : y->shape[0], T = y->shape[2] < 0 ? -1 : y->shape[2];
    cn_tensor *merged = cn_reshape(cn_transpose(y, 1, 2), 3, (int64_t[]){N, T, a->E});
    return cn_module_forward(cn_module_child(m, "out_proj"), merged);
}

/* ---- masks ---- */

/* A mask in the op's terms: bool "may attend", or float added to the
 * scores; NULL for none. */
typedef struct mask_acc {
    cn_tensor *allow; /* bool, broadcastable to [N, H, L, S] */
    cn_tensor *add;   /* float */
} mask_acc;

/* Adds a PyTorch-convention mask m (bool: true = masked; float: added),
 * already shaped to broadcast against [N, H, L, S]. */
static void mask_add(mask_acc *acc, cn_tensor *m, bool torch_bool) {
    if (!m) return;
    if (cn_tensor_dtype(m) == CN_BOOL) {
        cn_tensor *allow = torch_bool ? cn_logical_not(m) : m;
        acc->allow = acc->allow ? cn_logical_and(acc->allow, allow) : allow;
    } else {
        acc->add = acc->add ? cn_add(acc->add, m) : m;
    }
}

/* The merged mask for the op, or NULL: bool if every part was bool. */
static cn_tensor *mask_final(mask_acc *acc, cn_dtype dt) {
    if (!acc->add) return acc->allow;
    cn_tensor *add = cn_cast(acc->add, dt);
    if (!acc->allow) return add;
    return cn_add(add, cn_where(acc->allow, cn_scalar(dt, 0), cn_scalar(dt, -INFINITY)));
}

/* Keys j <= query i (top-left, as the op's is_causal), bool [L, S]. */
static cn_tensor *causal_allow(int64_t L, int64_t S) {
    if (L < 0 || S < 0)
        return cn_fail("MultiheadAttention: is_causal with other masks or the weights needs the "
                       "sequence lengths known (L %" PRId64 ", S %" PRId64 ")", L, S);
    cn_tensor *i = cn_reshape(cn_arange(0, (double)L, 1, CN_I64), 2, (int64_t[]){L, 1});
    cn_tensor *j = cn_reshape(cn_arange(0, (double)S, 1, CN_I64), 2, (int64_t[]){1, S});
    return cn_le(j, i);
}

static bool is_float_or_bool(const cn_tensor *t) {
    cn_dtype dt = cn_tensor_dtype(t);
    return dt == CN_BOOL || cn_dtype_is_float(dt);
}

/* ---- the forward ---- */

static int check_in(const mha_mod *a, const char *what, const cn_tensor *t, int rank, int64_t dim) {
    char b[128];
    if (t->ndim != rank || (t->shape[rank - 1] != dim && t->shape[rank - 1] >= 0))
        return cn_failc(CN_EINVAL, "MultiheadAttention: %s is %s; expected rank %d ending in %" PRId64
                                   " (%s)", what, cn_fmt_shape(b, sizeof b, t->ndim, t->shape), rank,
                        dim, rank == 2 ? "unbatched [L, E]" : a->batch_first ? "[N, L, E]" : "[L, N, E]");
    return CN_OK;
}

static int mha_impl(mha_mod *a, cn_tensor *query, cn_tensor *key, cn_tensor *value,
                    const cn_mha_forward_opts *o, cn_tensor **out, cn_tensor **weights) {
    char b1[128], b2[128];
    int rank = query->ndim;
    if (rank != 2 && rank != 3)
        return cn_failc(CN_EINVAL, "MultiheadAttention: query %s must be [L, N, E], [N, L, E] "
                                   "(batch_first) or [L, E]",
                        cn_fmt_shape(b1, sizeof b1, query->ndim, query->shape));
    if (check_in(a, "query", query, rank, a->E) < 0 || check_in(a, "key", key, rank, a->kdim) < 0 ||
        check_in(a, "value", value, rank, a->vdim) < 0)
        return CN_EINVAL;
    bool batched = rank == 3, self = query == key && key == value;
    cn_tensor *q = query, *k = key, *v = value, *kpm = o->key_padding_mask, *am = o->attn_mask;
    if (!batched) {
        q = cn_unsqueeze(q, 0);
        k = self ? q : cn_unsqueeze(k, 0);
        v = self ? q : cn_unsqueeze(v, 0);
        if (kpm) kpm = cn_unsqueeze(kpm, 0);
    } else if (!a->batch_first) {
        q = cn_transpose(q, 0, 1);
        k = self ? q : cn_transpose(k, 0, 1);
        v = self ? q : cn_transpose(v, 0, 1);
    }
    if (!q || !k || !v || (o->key_padding_mask && !kpm)) return CN_EINVAL;
    int64_t N = q->shape[0], L = q->shape[1], S = k->shape[1];
    if (k->shape[0] != v->shape[0] || k->shape[1] != v->shape[1] ||
        (N >= 0 && k->shape[0] >= 0 && k->shape[0] != N))
        return cn_failc(CN_EINVAL, "MultiheadAttention: key %s and value %s must have the same "
                                   "sequence length and batch as the query",
                        cn_fmt_shape(b1, sizeof b1, key->ndim, key->shape),
                        cn_fmt_shape(b2, sizeof b2, value->ndim, value->shape));
    cn_tensor *qh, *kh, *vh;
    if (self && a->packed) {
        if (cn_mha_self_qkv(&a->base, q, &qh, &kh, &vh) < 0) return CN_EINVAL;
    } else {
        qh = split_heads(a, project(a, q, 0));
        kh = split_heads(a, project(a, k, 1));
        vh = split_heads(a, project(a, v, 2));
        if (!qh || !kh || !vh) return CN_EINVAL;
    }
    cn_dtype dt = cn_tensor_dtype(qh);
    /* Masks, shaped to broadcast against the scores [N, H, L, S]. */
    mask_acc acc = {NULL, NULL};
    if (kpm) {
        bool ok = is_float_or_bool(kpm) && kpm->ndim == 2 &&
                  (kpm->shape[0] == N || kpm->shape[0] < 0 || N < 0) &&
                  (kpm->shape[1] == S || kpm->shape[1] < 0 || S < 0);
        if (!ok)
            return cn_failc(CN_EINVAL, "MultiheadAttention: key_padding_mask %s %s must be bool or "
                                       "float [N, S] ([S] unbatched) with N = %" PRId64 ", S = %" PRId64,
                            cn_dtype_name(cn_tensor_dtype(kpm)),
                            cn_fmt_shape(b1, sizeof b1, o->key_padding_mask->ndim,
                                         o->key_padding_mask->shape), N, S);
        mask_add(&acc, cn_reshape(kpm, 4, (int64_t[]){N < 0 ? -1 : N, 1, 1, S < 0 ? -1 : S}), true);
    }
    if (am) {
        bool ok = is_float_or_bool(am) && (am->ndim == 2 || am->ndim == 3);
        for (int i = 0; ok && i < 2; i++) {
            int64_t s = am->shape[am->ndim - 2 + i], want = i ? S : L;
            ok = s == want || s < 0 || want < 0;
        }
        if (ok && am->ndim == 3) ok = N >= 0 && am->shape[0] == N * a->H;
        if (!ok)
            return cn_failc(CN_EINVAL, "MultiheadAttention: attn_mask %s %s must be bool or float "
                                       "[L, S] or [N * num_heads, L, S] with L = %" PRId64
                                       ", S = %" PRId64 ", N * num_heads = %" PRId64,
                            cn_dtype_name(cn_tensor_dtype(am)),
                            cn_fmt_shape(b1, sizeof b1, am->ndim, am->shape), L, S, N * a->H);
        if (am->ndim == 3) am = cn_reshape(am, 4, (int64_t[]){N, a->H, L, S});
        mask_add(&acc, am, true);
    }
    /* The op's own causal mask when nothing else is: no [L, S] tensor. */
    bool op_causal = o->is_causal && !acc.allow && !acc.add && !o->need_weights;
    if (o->is_causal && !op_causal) {
        cn_tensor *causal = causal_allow(L, S);
        if (!causal) return CN_EINVAL;
        mask_add(&acc, causal, false);
    }
    if ((kpm || am) && !acc.allow && !acc.add) return CN_EINVAL;
    cn_tensor *mask = mask_final(&acc, dt);
    double p = a->base.training ? a->dropout : 0;
    cn_tensor *y, *w = NULL;
    if (!o->need_weights) {
        y = cn_scaled_dot_product_attention(qh, kh, vh, mask, p, op_causal, 0);
    } else {
        cn_tensor *s = cn_matmul(cn_mul_scalar(qh, 1 / sqrt((double)a->d)), cn_mT(kh));
        if (mask && cn_tensor_dtype(mask) == CN_BOOL)
            s = cn_where(mask, s, cn_scalar(dt, -INFINITY));
        else if (mask)
            s = cn_add(s, mask);
        w = cn_dropout(cn_softmax(s, -1), p, p > 0);
        y = cn_matmul(w, vh);
        if (!o->per_head_weights) w = cn_mean(w, (int[]){1}, 1, false);
    }
    cn_tensor *res = cn_mha_merge_out(&a->base, y);
    if (!res || (o->need_weights && !w)) return CN_EINVAL;
    if (!batched) {
        res = cn_squeeze(res, 0);
        if (w) w = cn_squeeze(w, 0);
    } else if (!a->batch_first) {
        res = cn_transpose(res, 0, 1);
    }
    *out = res;
    if (weights) *weights = w;
    return res ? CN_OK : CN_EINVAL;
}

int cn_mha_forward(cn_module *m, cn_tensor *query, cn_tensor *key, cn_tensor *value,
                   const cn_mha_forward_opts *opts, cn_tensor **output, cn_tensor **weights) {
    if (output) *output = NULL;
    if (weights) *weights = NULL;
    if (!cn_mha_is(m))
        return cn_failc(CN_EINVAL, "mha_forward: %s is not a MultiheadAttention module",
                        m ? cn_module_type(m) : "NULL");
    if (!output) return cn_failc(CN_EINVAL, "mha_forward: output is NULL");
    if (!query || !key || !value) return CN_EINVAL;
    cn_mha_forward_opts none = {0};
    if (!opts) opts = &none;
    cn_tensor *y = NULL, *w = NULL;
    cn_scope_begin();
    int rc = mha_impl((mha_mod *)m, query, key, value, opts, &y, &w);
    /* Into the caller's scope, as every public result (both are NULL on
     * failure). */
    cn_keep(y);
    cn_keep(w);
    cn_scope_end();
    if (rc < 0) return rc;
    *output = y;
    if (weights) *weights = w;
    return CN_OK;
}

static cn_tensor *mha_module_forward(cn_module *m, cn_tensor *x) {
    cn_tensor *y = NULL;
    cn_mha_forward_opts none = {0};
    return mha_impl((mha_mod *)m, x, x, x, &none, &y, NULL) < 0 ? NULL : y;
}

cn_module *cn_nn_multihead_attention(int64_t E, int64_t H, const cn_mha_opts *opts) {
    cn_mha_opts d = {0};
    if (!opts) opts = &d;
    if (E < 1 || H < 1 || E % H)
        return cn_fail("multihead_attention: embed_dim %" PRId64 " must be divisible by num_heads "
                       "%" PRId64 " (both >= 1)", E, H);
    if (!(opts->dropout >= 0 && opts->dropout <= 1))
        return cn_fail("multihead_attention: dropout %g must be in [0, 1]", opts->dropout);
    if (opts->kdim < 0 || opts->vdim < 0)
        return cn_fail("multihead_attention: kdim %" PRId64 " and vdim %" PRId64 " must be >= 0",
                       opts->kdim, opts->vdim);
    mha_mod *a = (mha_mod *)cn_module_new(&mha_vt, sizeof(mha_mod));
    if (!a) return NULL;
    a->E = E;
    a->H = H;
    a->d = E / H;
    a->kdim = opts->kdim ? opts->kdim : E;
    a->vdim = opts->vdim ? opts->vdim : E;
    a->packed = a->kdim == E && a->vdim == E;
    a->bias = !opts->no_bias;
    a->batch_first = opts->batch_first;
    a->dropout = opts->dropout;
    cn_module *m = &a->base;
    bool ok;
    /* PyTorch's registration order (named_parameters): the projection
     * weights, in_proj_bias, then out_proj's. */
    if (a->packed) {
        cn_tensor *w = cn_nn_new_param(m, "in_proj_weight", 2, (int64_t[]){3 * E, E});
        ok = w && cn_init_xavier_uniform_(w, 1) == CN_OK;
    } else {
        cn_tensor *wq = cn_nn_new_param(m, "q_proj_weight", 2, (int64_t[]){E, E});
        cn_tensor *wk = wq ? cn_nn_new_param(m, "k_proj_weight", 2, (int64_t[]){E, a->kdim}) : NULL;
        cn_tensor *wv = wk ? cn_nn_new_param(m, "v_proj_weight", 2, (int64_t[]){E, a->vdim}) : NULL;
        ok = wv && cn_init_xavier_uniform_(wq, 1) == CN_OK &&
             cn_init_xavier_uniform_(wk, 1) == CN_OK && cn_init_xavier_uniform_(wv, 1) == CN_OK;
    }
    if (ok && a->bias) ok = cn_nn_new_param(m, "in_proj_bias", 1, (int64_t[]){3 * E}) != NULL;
    if (ok) {
        cn_module *out = cn_nn_linear(E, E, a->bias);
        ok = cn_module_add_child(m, "out_proj", out) == CN_OK &&
             (!a->bias || cn_init_zeros_(cn_module_param(out, "bias")) == CN_OK);
    }
    if (!ok) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}
