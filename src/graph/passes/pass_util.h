/* Small helpers the rewrite passes share. */
#ifndef CN_PASS_UTIL_H
#define CN_PASS_UTIL_H

#include "../ir.h"

/* May a pass rely on the contents of this constant? Not of a parameter
 * (requires_grad: an optimiser moves it between runs) nor of state a
 * program writes (running statistics). */
static inline bool pass_fixed(const cn_tensor *t) {
    return !t->requires_grad && !(t->flags & CN_TF_STATE);
}

/* A constant with one element whose value a rewrite may read (pass_fixed).
 * Sets *v. */
static inline bool pass_const_scalar(const cn_ir *ir, int32_t id, double *v) {
    const cn_tensor *t = ir->v[id].t;
    if (ir->v[id].kind != IRV_CONST || !pass_fixed(t) || !cn_t_on_cpu(t)) return false;
    if (cn_shape_numel(t->ndim, t->shape) != 1) return false;
    *v = cn_load_f64(cn_t_ptr(t), (cn_dtype)t->dtype, 0);
    return true;
}

/* Same dtype and the same shape, unknown sizes in the same places (so the
 * same sizes at run time when one is computed from the other elementwise). */
static inline bool pass_same_meta(const cn_tensor *a, const cn_tensor *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

/* The step producing value id, or NULL for inputs and constants. */
static inline ir_step *pass_producer(cn_ir *ir, int32_t id) {
    int32_t p = ir->v[id].producer;
    return p >= 0 && ir->s[p].kind != IRS_DEAD ? &ir->s[p] : NULL;
}

#endif
