/* The pre-LayerNorm Transformer block (GPT-2's): normalise, then attend or
 * transform, then add back, so the residual stream itself is never
 * normalised and gradients reach early layers undamped. Its MLP is a
 * module of its own ("mlp" with c_fc and c_proj), so the state names are
 * nanoGPT's ("h.0.mlp.c_fc.weight"). */
#include "transformer.h"

#include <inttypes.h>
#include <math.h>

typedef struct mlp_mod {
    cn_module base;
    double dropout;
} mlp_mod;

static cn_tensor *mlp_forward(cn_module *m, cn_tensor *x) {
    cn_tensor *h = cn_gelu(cn_module_forward(cn_module_child(m, "c_fc"), x), false);
    cn_tensor *y = cn_module_forward(cn_module_child(m, "c_proj"), h);
    return cn_dropout(y, ((mlp_mod *)m)->dropout, m->training);
}

static const cn_module_vtable mlp_vt = {"MLP", mlp_forward, NULL};

typedef struct block_mod {
    cn_module base;
    int64_t E;
    double dropout;
    bool causal;
    bool rope;
    double rope_base;
} block_mod;

static cn_tensor *block_forward(cn_module *m, cn_tensor *x) {
    block_mod *b = (block_mod *)m;
    if (x->ndim != 3 || (x->shape[2] != b->E && x->shape[2] >= 0)) {
        char buf[128];
        return cn_fail("TransformerBlock: input %s should be [N, T, %" PRId64 "]",
                       cn_fmt_shape(buf, sizeof buf, x->ndim, x->shape), b->E);
    }
    cn_tensor *h = cn_module_forward(cn_module_child(m, "ln_1"), x), *a = NULL;
    if (b->rope) {
        /* The attention module's own path with q and k turned in between:
         * the same projections and fused op as cn_mha_forward. */
        cn_module *attn = cn_module_child(m, "attn");
        cn_tensor *q, *k, *v;
        if (!h || cn_mha_self_qkv(attn, h, &q, &k, &v) < 0) return NULL;
        cn_rope_opts ro = {.base = b->rope_base};
        double p = m->training ? b->dropout : 0;
        a = cn_mha_merge_out(attn, cn_scaled_dot_product_attention(cn_rope(q, &ro), cn_rope(k, &ro),
                                                                    v, NULL, p, b->causal, 0));
        if (!a) return NULL;
    } else {
        cn_mha_forward_opts o = {.is_causal = b->causal};
        if (cn_mha_forward(cn_module_child(m, "attn"), h, h, h, &o, &a, NULL) < 0) return NULL;
    }
    x = cn_add(x, cn_dropout(a, b->dropout, m->training));
    cn_tensor *f = cn_module_forward(cn_module_child(m, "ln_2"), x);
    return cn_add(x, cn_module_forward(cn_module_child(m, "mlp"), f));
}

static const cn_module_vtable block_vt = {"TransformerBlock", block_forward, NULL};

cn_module *cn_nn_transformer_block(int64_t E, int64_t H, const cn_transformer_block_opts *opts) {
    cn_transformer_block_opts d = {0};
    if (!opts) opts = &d;
    if (E < 1 || H < 1 || E % H)
        return cn_fail("transformer_block: embed_dim %" PRId64 " must be divisible by num_heads "
                       "%" PRId64 " (both >= 1)", E, H);
    if (!(opts->dropout >= 0 && opts->dropout <= 1))
        return cn_fail("transformer_block: dropout %g must be in [0, 1]", opts->dropout);
    if (opts->rope && ((E / H) % 2 || !(opts->rope_base >= 0) || !isfinite(opts->rope_base)))
        return cn_fail("transformer_block: rope needs an even head size (embed_dim %" PRId64
                       " / num_heads %" PRId64 ") and a rope_base >= 0 (0: 10000), got %g", E, H,
                       opts->rope_base);
    if (opts->mlp_hidden < 0 || !(opts->ln_eps >= 0))
        return cn_fail("transformer_block: mlp_hidden %" PRId64 " and ln_eps %g must be >= 0",
                       opts->mlp_hidden, opts->ln_eps);
    int64_t hidden = opts->mlp_hidden ? opts->mlp_hidden : 4 * E;
    double eps = opts->ln_eps > 0 ? opts->ln_eps : 1e-5;
    block_mod *b = (block_mod *)cn_module_new(&block_vt, sizeof(block_mod));
    if (!b) return NULL;
    b->E = E;
    b->dropout = opts->dropout;
    b->causal = opts->causal;
    b->rope = opts->rope;
    b->rope_base = opts->rope_base;
    cn_module *m = &b->base;
    mlp_mod *mlp = (mlp_mod *)cn_module_new(&mlp_vt, sizeof(mlp_mod));
    if (mlp) mlp->dropout = opts->dropout;
    cn_mha_opts ao = {.dropout = opts->dropout, .batch_first = true};
    bool ok = cn_module_add_child(m, "ln_1", cn_nn_layer_norm(1, &E, eps, true)) == CN_OK &&
              cn_module_add_child(m, "attn", cn_nn_multihead_attention(E, H, &ao)) == CN_OK &&
              cn_module_add_child(m, "ln_2", cn_nn_layer_norm(1, &E, eps, true)) == CN_OK &&
              mlp && cn_module_add_child(&mlp->base, "c_fc", cn_nn_linear(E, hidden, true)) == CN_OK &&
              cn_module_add_child(&mlp->base, "c_proj", cn_nn_linear(hidden, E, true)) == CN_OK;
    if (!ok) {
        cn_module_free(mlp ? &mlp->base : NULL);
        cn_module_free(m);
        return NULL;
    }
    if (cn_module_add_child(m, "mlp", &mlp->base) < 0) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}
