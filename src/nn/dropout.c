/* Dropout: a Bernoulli mask drawn as an op (so a static graph draws a fresh
 * mask on every run) and the survivors scaled by 1 / (1 - p). */
#include "nn.h"

#include <math.h>

cn_tensor *cn_dropout(cn_tensor *x, double p, bool training) {
    if (!x) return NULL;
    if (!(p >= 0 && p <= 1)) return cn_fail("dropout: p = %g must be in [0, 1]", p);
    if (!cn_dtype_is_float((cn_dtype)x->dtype))
        return cn_fail("dropout: the input is %s; dropout needs a float tensor",
                       cn_dtype_name((cn_dtype)x->dtype));
    if (!training || p == 0) return cn_scope_add(cn_retain(x));
    /* p = 1 drops everything; multiplying keeps the gradient's shape and NaNs as PyTorch. */
    if (p == 1) return cn_mul_scalar(x, 0);
    cn_scope_begin();
    cn_tensor *keep = cn_bernoulli(cn_nn_full_like(x, 1 - p));
    return cn_nn_scope_result(cn_mul(x, cn_mul_scalar(keep, 1 / (1 - p))));
}

typedef struct dropout_mod {
    cn_module base;
    double p;
} dropout_mod;

static cn_tensor *dropout_forward(cn_module *m, cn_tensor *x) {
    return cn_dropout(x, ((dropout_mod *)m)->p, m->training);
}

static const cn_module_vtable dropout_vt = {"Dropout", dropout_forward, NULL};

cn_module *cn_nn_dropout(double p) {
    if (!(p >= 0 && p <= 1)) return cn_fail("dropout: p = %g must be in [0, 1]", p);
    dropout_mod *d = (dropout_mod *)cn_module_new(&dropout_vt, sizeof(dropout_mod));
    if (!d) return NULL;
    d->p = p;
    return &d->base;
}
