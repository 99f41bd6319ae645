/* Internal helpers shared by the module library (src/nn/). */
#ifndef CN_NN_H
#define CN_NN_H

#include "../ops/op.h"

/* Register a new parameter (f32, zero-filled) or buffer (filled with value)
 * under name; the module holds the only reference. Returns the tensor
 * (borrowed) or NULL. */
cn_tensor *cn_nn_new_param(cn_module *m, const char *name, int ndim, const int64_t *shape);
cn_tensor *cn_nn_new_buffer(cn_module *m, const char *name, cn_dtype dt, int ndim,
                            const int64_t *shape, double value);

/* The i-th registered parameter or buffer (borrowed), or NULL. Modules
 * reach their state through these on every call and never keep pointers to
 * its data, so an optimiser may move the data elsewhere. */
static inline cn_tensor *cn_nn_p(const cn_module *m, int i) {
    return i >= 0 && i < m->nparams ? m->params[i].t : NULL;
}
static inline cn_tensor *cn_nn_b(const cn_module *m, int i) {
    return i >= 0 && i < m->nbuffers ? m->buffers[i].t : NULL;
}

/* U(-bound, bound): PyTorch's default for biases and recurrent weights. */
int cn_nn_init_bound(cn_tensor *t, double bound);
/* PyTorch's default for Linear and Conv weights, kaiming_uniform(a = sqrt(5)),
 * and U(+-1/sqrt(fan_in)) for the bias (may be NULL). */
int cn_nn_init_default(cn_tensor *weight, cn_tensor *bias);

/* int8 inference (quantize.c): m's parameters "weight" (f32 [O, ...]) and
 * optional "bias" become the buffers "weight" (i8, symmetric, one scale
 * per output channel), "weight_scale" (f32 [O]) and "bias". */
int cn_nn_quantize_weight(cn_module *m);
/* A Linear / Conv2d m quantised (its weights and its forward): 1, or 0
 * when it stays f32 (a convolution of several groups or dilated), or < 0
 * after an error. */
int cn_nn_linear_quantize(cn_module *m);
int cn_nn_conv2d_quantize(cn_module *m);

/* A tensor shaped like x filled with value, of x's dtype, as an op
 * (full_like), so it follows the unknown sizes of a static graph. */
cn_tensor *cn_nn_full_like(cn_tensor *x, double value);

/* Composite public functions (losses, dropout) build their result from
 * several ops: they run in a scope of their own and hand back only the
 * result, so their temporaries are released even when the caller has no
 * scope open (where they would otherwise be owned by nobody).
 *     cn_scope_begin();
 *     return cn_nn_scope_result(loss_of(...));                        */
static inline cn_tensor *cn_nn_scope_result(cn_tensor *y) {
    cn_keep(y);
    cn_scope_end();
    return y;
}

#endif
