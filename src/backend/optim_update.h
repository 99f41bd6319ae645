/* One optimiser step over contiguous elements, as a backend runs it: the
 * rule, its option bits and its constants for this step are worked out by
 * the optimiser (src/nn/optim.c, cn_opt_prepare); the backend only loops.
 * Each element is updated on its own, so any split of the work gives the
 * same bits. */
#ifndef CN_BACKEND_OPTIM_UPDATE_H
#define CN_BACKEND_OPTIM_UPDATE_H

#include "../core/core.h"

typedef enum cn_opt_alg {
    CN_OPT_SGD = 0,
    CN_OPT_ADAM,
    CN_OPT_ADAMW,
    CN_OPT_RMSPROP,
    CN_OPT_ADAGRAD,
    CN_OPT_ALG_COUNT
} cn_opt_alg;

#define CN_OPT_MAXSTATE 3

/* The rules and their constants c[] (torch.optim's single-tensor code,
 * PyTorch 1.13, in the parameter's dtype):
 *
 * SGD      c: sign (-1 to maximise), weight_decay, momentum, 1 - dampening,
 *          -lr. bits: 1 weight decay, 2 momentum, 4 first step (the buffer
 *          starts as the gradient), 8 nesterov. s[0]: momentum buffer.
 * Adam(W)  c: sign, weight_decay (Adam's, added to the gradient), decay
 *          (AdamW's 1 - lr * weight_decay, else 1), beta1, 1 - beta1, beta2,
 *          1 - beta2, sqrt(1 - beta2^t), eps, -lr / (1 - beta1^t).
 *          bits: 1 Adam's weight decay, 2 amsgrad. s: exp_avg, exp_avg_sq,
 *          max_exp_avg_sq.
 * RMSprop  c: sign, weight_decay, alpha, 1 - alpha, eps, momentum, -lr.
 *          bits: 1 weight decay, 2 centered, 4 momentum. s: square_avg,
 *          momentum_buffer, grad_avg.
 * Adagrad  c: sign, weight_decay, eps, -lr / (1 + (t - 1) lr_decay).
 *          bits: 1 weight decay. s[0]: sum. */
typedef struct cn_optim_update {
    cn_opt_alg alg;   /* AdamW runs Adam's loop (its decay is in c[2]) */
    unsigned bits;
    cn_dtype dtype;   /* f32 or f64 */
    /* n elements each, contiguous, from element offset *_off of each storage;
     * s[k] NULL where the rule does not use slot k. */
    int64_t n;
    cn_storage *p, *g, *s[CN_OPT_MAXSTATE];
    int64_t p_off, g_off, s_off[CN_OPT_MAXSTATE];
    double c[12];
} cn_optim_update;

#endif
