/* The GPT's key/value cache: each layer's keys and values of every
 * position so far, in buffers of the full context ([B, H, C, d]) written
 * in place as tokens arrive, so a new token costs its own projections and
 * one row of attention over the cache, not a forward over the sequence.
 * The computation is the full forward's, piece for piece (the same
 * modules and the same fused attention op), so the logits agree with it. */
#include "transformer.h"

#include <inttypes.h>
#include <stdlib.h>

struct cn_gpt_cache {
    cn_module *gpt;
    cn_gpt_config cfg;
    int64_t B, len, d;
    cn_tensor **k, **v; /* n_layer buffers each, [B, H, C, d] */
};

cn_gpt_cache *cn_gpt_cache_new(cn_module *gpt, int64_t batch) {
    cn_gpt_config cfg;
    if (cn_gpt_get_config(gpt, &cfg) < 0) return NULL;
    if (batch < 1) return cn_fail("gpt_cache_new: batch %" PRId64 " must be >= 1", batch);
    cn_gpt_cache *c = calloc(1, sizeof *c);
    if (c) {
        c->k = calloc((size_t)cfg.n_layer, sizeof *c->k);
        c->v = calloc((size_t)cfg.n_layer, sizeof *c->v);
    }
    if (!c || !c->k || !c->v) {
        if (c) free(c->k), free(c->v);
        free(c);
        return cn_fail("gpt_cache_new: out of memory");
    }
    c->gpt = gpt;
    c->cfg = cfg;
    c->B = batch;
    c->d = cfg.n_embd / cfg.n_head;
    cn_tensor *w = cn_module_param(cn_module_child(gpt, "wte"), "weight");
    int64_t shape[4] = {batch, cfg.n_head, cfg.context_length, c->d};
    bool ok = true;
    for (int l = 0; l < cfg.n_layer && ok; l++) {
        c->k[l] = cn_t_full_on(cn_t_device(w), (cn_dtype)w->dtype, 4, shape, 0);
        c->v[l] = cn_t_full_on(cn_t_device(w), (cn_dtype)w->dtype, 4, shape, 0);
        ok = c->k[l] && c->v[l];
    }
    if (!ok) {
        cn_gpt_cache_free(c);
        return NULL;
    }
    return c;
}

void cn_gpt_cache_free(cn_gpt_cache *c) {
    if (!c) return;
    for (int l = 0; l < c->cfg.n_layer; l++) {
        cn_release(c->k[l]);
        cn_release(c->v[l]);
    }
    free(c->k);
    free(c->v);
    free(c);
}

void cn_gpt_cache_reset(cn_gpt_cache *c) {
    if (c) c->len = 0; /* stale rows are never read: attention stops at len */
}

int64_t cn_gpt_cache_length(const cn_gpt_cache *c) { return c ? c->len : CN_EINVAL; }

/* Queries at positions len..len+Tn-1 against keys 0..len+Tn-1: bool "may
 * attend" [Tn, len + Tn], j <= len + i. */
static cn_tensor *offset_causal(int64_t len, int64_t Tn) {
    cn_tensor *i = cn_reshape(cn_arange((double)len, (double)(len + Tn), 1, CN_I64), 2,
                              (int64_t[]){Tn, 1});
    cn_tensor *j = cn_reshape(cn_arange(0, (double)(len + Tn), 1, CN_I64), 2,
                              (int64_t[]){1, len + Tn});
    return cn_le(j, i);
}

/* One block over the new positions x [B, Tn, E], reading and extending
 * layer l of the cache. */
static cn_tensor *block_cached(cn_gpt_cache *c, int l, cn_module *blk, cn_tensor *x) {
    int64_t Tn = x->shape[1], S = c->len + Tn;
    cn_module *attn = cn_module_child(blk, "attn");
    cn_tensor *h = cn_module_forward(cn_module_child(blk, "ln_1"), x), *q, *k, *v;
    if (!h || cn_mha_self_qkv(attn, h, &q, &k, &v) < 0) return NULL;
    if (c->cfg.rope) {
        /* New rows at positions len.., as the full forward turns them; the
         * cache keeps keys already turned, so earlier ones are never redone. */
        cn_rope_opts ro = {.offset = c->len, .base = c->cfg.rope_base};
        q = cn_rope(q, &ro);
        k = cn_rope(k, &ro);
    }
    if (cn_copy_(cn_narrow(c->k[l], 2, c->len, Tn), k) < 0 ||
        cn_copy_(cn_narrow(c->v[l], 2, c->len, Tn), v) < 0)
        return NULL;
    cn_tensor *ka = cn_narrow(c->k[l], 2, 0, S), *va = cn_narrow(c->v[l], 2, 0, S), *y;
    if (Tn == 1) /* the cache holds only the past: no mask */
        y = cn_scaled_dot_product_attention(q, ka, va, NULL, 0, false, 0);
    else if (c->len == 0) /* a fresh prompt: the ordinary causal mask */
        y = cn_scaled_dot_product_attention(q, ka, va, NULL, 0, true, 0);
    else
        y = cn_scaled_dot_product_attention(q, ka, va, offset_causal(c->len, Tn), 0, false, 0);
    x = cn_add(x, cn_mha_merge_out(attn, y));
    cn_tensor *f = cn_module_forward(cn_module_child(blk, "ln_2"), x);
    return cn_add(x, cn_module_forward(cn_module_child(blk, "mlp"), f));
}

static cn_tensor *forward_cached(cn_gpt_cache *c, cn_tensor *ids) {
    cn_module *m = c->gpt;
    int64_t Tn = ids->shape[1];
    cn_tensor *x = cn_module_forward(cn_module_child(m, "wte"), ids);
    if (!c->cfg.rope) {
        cn_tensor *pos = cn_arange((double)c->len, (double)(c->len + Tn), 1, CN_I64);
        x = cn_add(x, cn_module_forward(cn_module_child(m, "wpe"), pos));
    }
    cn_module *h = cn_module_child(m, "h");
    for (int l = 0; l < h->nchildren && x; l++) x = block_cached(c, l, h->children[l].m, x);
    x = cn_module_forward(cn_module_child(m, "ln_f"), x);
    return cn_matmul(x, cn_mT(cn_module_param(cn_module_child(m, "wte"), "weight")));
}

cn_tensor *cn_gpt_forward_cached(cn_module *gpt, cn_gpt_cache *c, cn_tensor *ids) {
    if (!c || c->gpt != gpt) return cn_fail("gpt_forward_cached: the cache is NULL or of another model");
    if (!ids) return NULL;
    char buf[128];
    cn_dtype dt = (cn_dtype)ids->dtype;
    if (cn_is_symbolic(ids) || ids->ndim != 2 || ids->shape[0] != c->B || ids->shape[1] < 1 ||
        (dt != CN_I64 && dt != CN_I32 && dt != CN_U8))
        return cn_fail("gpt_forward_cached: ids %s %s must be integer token ids [%" PRId64 ", T], "
                       "T >= 1, with data", cn_dtype_name(dt),
                       cn_fmt_shape(buf, sizeof buf, ids->ndim, ids->shape), c->B);
    if (c->len + ids->shape[1] > c->cfg.context_length)
        return cn_fail("gpt_forward_cached: %" PRId64 " cached + %" PRId64 " new positions pass "
                       "the context length %" PRId64 "; reset the cache", c->len, ids->shape[1],
                       c->cfg.context_length);
    /* Inference: no dropout, nothing recorded (the cache is written in place). */
    bool training = gpt->training;
    cn_module_train(gpt, false);
    cn_no_grad_begin();
    cn_scope_begin();
    cn_tensor *logits = forward_cached(c, ids);
    cn_keep(logits);
    cn_scope_end();
    cn_no_grad_end();
    cn_module_train(gpt, training);
    if (logits) c->len += ids->shape[1];
    return logits;
}
