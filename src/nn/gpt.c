/* A GPT: token and learned position embeddings, causal pre-LayerNorm
 * blocks, a final LayerNorm and an LM head tied to the token embedding
 * (GPT-2's architecture; nanoGPT's names: wte, wpe, h.N, ln_f). With
 * rope, positions enter only through the rotation of q and k in every
 * block, and there is no wpe. */
#include "transformer.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct gpt_mod {
    cn_module base;
    cn_gpt_config cfg;
} gpt_mod;

static cn_tensor *gpt_forward(cn_module *m, cn_tensor *ids);
static const cn_module_vtable gpt_vt = {"GPT", gpt_forward, NULL};

bool cn_gpt_is(const cn_module *m) { return m && m->vt == &gpt_vt; }

int cn_gpt_get_config(const cn_module *m, cn_gpt_config *cfg) {
    if (!cn_gpt_is(m))
        return cn_failc(CN_EINVAL, "gpt_get_config: %s is not a GPT", m ? cn_module_type(m) : "NULL");
    if (cfg) *cfg = ((const gpt_mod *)m)->cfg;
    return CN_OK;
}

/* The positions 0..T-1 as [1, T] i64. In a static graph they are made from
 * ids (a cumulative sum of ones), not by cn_arange: an embedding lookup of
 * a constant in a parameter would be computed once while tracing and
 * frozen into the graph, and wpe would never learn. The row of ones is a
 * sum over the batch axis with keepdim, not a slice of ids: its leading 1
 * is then known while tracing even when the batch size is not, so the
 * gradient of the broadcast add is summed over the batch (a slice of an
 * unknown axis would have an unknown size, taken for the batch's). */
static cn_tensor *positions(cn_tensor *ids, int64_t T) {
    if (!cn_is_symbolic(ids)) return cn_reshape(cn_arange(0, (double)T, 1, CN_I64), 2, (int64_t[]){1, T});
    cn_tensor *zeros = cn_sum(cn_nn_full_like(cn_cast(ids, CN_I64), 0), (int[]){0}, 1, true);
    return cn_sub_scalar(cn_cumsum(cn_add_scalar(zeros, 1), 1), 1);
}

static cn_tensor *gpt_forward(cn_module *m, cn_tensor *ids) {
    gpt_mod *g = (gpt_mod *)m;
    char buf[128];
    cn_dtype dt = (cn_dtype)ids->dtype;
    if (ids->ndim != 2 || (dt != CN_I64 && dt != CN_I32 && dt != CN_U8))
        return cn_fail("GPT: ids %s %s must be integer token ids [B, T]", cn_dtype_name(dt),
                       cn_fmt_shape(buf, sizeof buf, ids->ndim, ids->shape));
    int64_t T = ids->shape[1];
    if (T > g->cfg.context_length)
        return cn_fail("GPT: %" PRId64 " positions; the model has context_length %" PRId64, T,
                       g->cfg.context_length);
    if (T < 0 && !cn_is_symbolic(ids)) return NULL;
    cn_tensor *x = cn_module_forward(cn_module_child(m, "wte"), ids);
    if (!g->cfg.rope) x = cn_add(x, cn_module_forward(cn_module_child(m, "wpe"), positions(ids, T)));
    x = cn_dropout(x, g->cfg.dropout, m->training);
    x = cn_module_forward(cn_module_child(m, "h"), x);
    x = cn_module_forward(cn_module_child(m, "ln_f"), x);
    /* The tied head: the token embedding's transpose (GPT-2's tie). */
    return cn_matmul(x, cn_mT(cn_module_param(cn_module_child(m, "wte"), "weight")));
}

/* GPT-2's initialisation (nanoGPT's _init_weights and c_proj rule). */
static int gpt_init(cn_module *m, int n_layer) {
    cn_tensor **p;
    const char **names;
    int n = cn_module_parameters(m, &p, &names);
    if (n < 0) return n;
    double resid = 0.02 / sqrt(2.0 * n_layer);
    int rc = CN_OK;
    for (int i = 0; i < n && rc == CN_OK; i++) {
        const char *s = names[i];
        size_t len = strlen(s);
        bool ends_weight = len >= 7 && !strcmp(s + len - 7, ".weight");
        bool is_ln = strstr(s, "ln_") != NULL;
        if (strstr(s, "out_proj.weight") || strstr(s, "c_proj.weight"))
            rc = cn_init_normal_(p[i], 0, resid);
        else if (is_ln && ends_weight)
            rc = cn_init_ones_(p[i]);
        else if (cn_ndim(p[i]) >= 2)
            rc = cn_init_normal_(p[i], 0, 0.02);
        else
            rc = cn_init_zeros_(p[i]);
    }
    free(p);
    free(names);
    return rc;
}

cn_module *cn_nn_gpt(const cn_gpt_config *c) {
    if (!c) return cn_fail("gpt: the config is NULL");
    if (c->vocab_size < 1 || c->context_length < 1 || c->n_layer < 1 || c->n_head < 1 ||
        c->n_embd < 1 || c->n_embd % c->n_head)
        return cn_fail("gpt: vocab_size %" PRId64 ", context_length %" PRId64 ", n_layer %d, "
                       "n_head %d and n_embd %" PRId64 " must be >= 1, with n_embd divisible by "
                       "n_head", c->vocab_size, c->context_length, c->n_layer, c->n_head, c->n_embd);
    if (!(c->dropout >= 0 && c->dropout < 1))
        return cn_fail("gpt: dropout %g must be in [0, 1)", c->dropout);
    if (c->rope && ((c->n_embd / c->n_head) % 2 || !(c->rope_base >= 0) || !isfinite(c->rope_base)))
        return cn_fail("gpt: rope needs an even head size (n_embd %" PRId64 " / n_head %d) and "
                       "rope_base >= 0 (0: 10000), got %g", c->n_embd, c->n_head, c->rope_base);
    gpt_mod *g = (gpt_mod *)cn_module_new(&gpt_vt, sizeof(gpt_mod));
    if (!g) return NULL;
    g->cfg = *c;
    cn_module *m = &g->base;
    cn_module *h = cn_nn_sequential(NULL, 0);
    cn_transformer_block_opts bo = {.dropout = c->dropout, .causal = true, .rope = c->rope,
                                    .rope_base = c->rope_base};
    bool ok = cn_module_add_child(m, "wte", cn_nn_embedding(c->vocab_size, c->n_embd, CN_NO_PADDING)) == CN_OK &&
              (c->rope || cn_module_add_child(m, "wpe", cn_nn_embedding(c->context_length, c->n_embd, CN_NO_PADDING)) == CN_OK);
    for (int i = 0; ok && i < c->n_layer; i++)
        ok = h && cn_nn_sequential_append(h, cn_nn_transformer_block(c->n_embd, c->n_head, &bo)) == CN_OK;
    if (!ok) cn_module_free(h);
    ok = ok && cn_module_add_child(m, "h", h) == CN_OK &&
         cn_module_add_child(m, "ln_f", cn_nn_layer_norm(1, &c->n_embd, 1e-5, true)) == CN_OK &&
         gpt_init(m, c->n_layer) == CN_OK;
    if (!ok) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}
