/* Internal interface of the optimisers (optim.c), their constants
 * (optim_consts.c; the loops are each backend's) and the learning-rate
 * schedules (sched.c). */
#ifndef CN_NN_OPTIM_H
#define CN_NN_OPTIM_H

#include "../ops/op.h"

/* Every hyper-parameter of every algorithm; each uses its own subset. */
typedef struct cn_opt_hyper {
    double lr, momentum, dampening, weight_decay, beta1, beta2, eps, alpha, lr_decay,
        initial_accumulator_value;
    bool nesterov, maximize, amsgrad, centered;
} cn_opt_hyper;

/* Per-parameter state buffers: a fixed slot per kind, so the rules find
 * them without a lookup. A slot an algorithm (or configuration) does not use
 * has a NULL name. */
void cn_opt_state_names(cn_opt_alg alg, const cn_opt_hyper *h,
                        const char *names[CN_OPT_MAXSTATE]);
/* The value a state buffer starts from (Adagrad's accumulator). */
double cn_opt_state_init(cn_opt_alg alg, const cn_opt_hyper *h, int slot);

/* The option bits and constants of update number t (1 for the first) of
 * a parameter, into it (alg, bits, dtype and c; the caller sets the
 * storages and n). */
void cn_opt_prepare(cn_opt_alg alg, const cn_opt_hyper *h, cn_dtype dt, int64_t t,
                    cn_optim_update *it);

/* fn(ctx) runs at the start of every cn_optimizer_step; a negative return
 * stops the step with that status, a positive one skips the update (loss
 * scaling found an overflow) and the step returns CN_OK (NULL removes
 * it). get: the hook in place, for one that chains to it. */
void cn_opt_set_pre_step(cn_optimizer *o, int (*fn)(void *ctx), void *ctx);
void cn_opt_get_pre_step(const cn_optimizer *o, int (**fn)(void *ctx), void **ctx);
int cn_opt_count(const cn_optimizer *o);

/* Parameter i (borrowed), NULL if out of range. */
cn_tensor *cn_opt_param(const cn_optimizer *o, int i);

/* ---- learning rates, for the schedules ---- */
/* The lr every schedule of this optimiser starts from (torch's
 * param_group['initial_lr']): NaN until the first schedule sets it. */
double cn_opt_initial_lr(const cn_optimizer *o);
void cn_opt_set_initial_lr(cn_optimizer *o, double lr);
/* Set the lr without the range check of cn_optimizer_set_lr: a schedule
 * writes whatever its formula gives, as torch does. */
void cn_opt_put_lr(cn_optimizer *o, double lr);

/* ---- named state lists (shared by optimisers and schedules) ---- */
typedef struct cn_state_list {
    int n, cap;
    char **names;       /* owned */
    cn_tensor **tensors;/* owned references */
} cn_state_list;

/* Append (name, t); t's reference is taken over (released on failure). */
int cn_state_add(cn_state_list *l, const char *name, cn_tensor *t);
int cn_state_add_f64(cn_state_list *l, const char *name, double v);
int cn_state_add_i64(cn_state_list *l, const char *name, int64_t v);
/* A u8 tensor holding the characters of s (no terminator). */
int cn_state_add_str(cn_state_list *l, const char *name, const char *s);
void cn_state_list_free(cn_state_list *l);
/* Give the caller malloc'd copies of the list's arrays (the names in one
 * block, as cn_module_state) and move the list into *keep, whose tensors
 * stay alive until the next publish or the owner's free. Returns the
 * count. */
int cn_state_publish(cn_state_list *l, cn_state_list *keep, cn_tensor ***tensors,
                     const char ***names);

/* Match the given (names, tensors) against the expected list: every
 * expected name present once with the expected dtype and shape, no other
 * names; a u8 string entry must have the same characters. matched[i] gets
 * the given tensor for expected entry i. On any problem, fails with one
 * message listing them (fn names the caller). */
int cn_state_match(const char *fn, const cn_state_list *expected, const char *const *names,
                   cn_tensor *const *tensors, int n, cn_tensor **matched);
/* Scalar values of a matched rank-0 tensor. */
double cn_state_f64(const cn_tensor *t);
int64_t cn_state_i64(const cn_tensor *t);

#endif
