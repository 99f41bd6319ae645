/* Internal pieces of the attention and GPT modules (attention.c,
 * transformer.c, gpt.c) that the GPT's key/value cache (gpt_cache.c)
 * reuses, so the cached forward computes with the very same code as the
 * full one. */
#ifndef CN_NN_TRANSFORMER_H
#define CN_NN_TRANSFORMER_H

#include "nn.h"

/* Is m a MultiheadAttention module? */
bool cn_mha_is(const cn_module *m);
/* Self-attention projections of x [N, T, E] (batch first) into heads
 * [N, H, T, E / H] (views of one projection when the weights are packed). */
int cn_mha_self_qkv(cn_module *m, cn_tensor *x, cn_tensor **q, cn_tensor **k, cn_tensor **v);
/* Heads [N, H, T, d] back to [N, T, H d], then out_proj. */
cn_tensor *cn_mha_merge_out(cn_module *m, cn_tensor *y);

/* Is m a GPT (cn_nn_gpt)? */
bool cn_gpt_is(const cn_module *m);

#endif
