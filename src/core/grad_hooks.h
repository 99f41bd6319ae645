/* Gradient hooks on tensors: what the backward walk and cn_release call. */
#ifndef CN_GRAD_HOOKS_H
#define CN_GRAD_HOOKS_H

#include "core.h"

/* t's hooks, in registration order, on *grad (a reference the caller owns,
 * replaced by a hook's result). < 0 after an error (a hook's, or a result
 * of another shape or dtype). */
int cn_run_grad_hooks(cn_tensor *t, cn_tensor **grad);
/* Forget t's hooks (t is being freed). */
void cn_drop_grad_hooks(cn_tensor *t);

static inline bool cn_has_grad_hooks(const cn_tensor *t) { return t->flags & CN_TF_HOOKED; }

#endif
