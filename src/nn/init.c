/* Initialisers (torch.nn.init): fans, gains, and in-place fills drawn from
 * the library's generator. Each fill is a draw followed by a copy outside
 * the recorded graph, so parameters can be (re)initialised at any time. */
#include "nn.h"

#include <math.h>

static int check_target(const char *fn, const cn_tensor *t) {
    if (!t) return CN_EINVAL;
    if (cn_is_symbolic(t)) return cn_failc(CN_EINVAL, "%s: the tensor is symbolic (no data)", fn);
    if (!cn_dtype_is_float((cn_dtype)t->dtype))
        return cn_failc(CN_EINVAL, "%s: the tensor is %s; initialisers fill float tensors", fn,
                        cn_dtype_name((cn_dtype)t->dtype));
    return CN_OK;
}

/* Copy the fresh draw r into t without recording. Takes the scope's r. */
static int fill_from(cn_tensor *t, cn_tensor *r) {
    if (!r) return CN_EINVAL;
    cn_no_grad_begin();
    int rc = cn_copy_(t, r);
    cn_no_grad_end();
    return rc;
}

/* Halves are drawn in f32, then rounded by the copy. */
static cn_dtype draw_dtype(const cn_tensor *t) {
    return t->dtype == CN_F64 ? CN_F64 : CN_F32;
}

int cn_init_uniform_(cn_tensor *t, double lo, double hi) {
    int rc = check_target("init_uniform_", t);
    if (rc < 0) return rc;
    cn_scope_begin();
    rc = fill_from(t, cn_uniform(draw_dtype(t), t->ndim, t->shape, lo, hi));
    cn_scope_end();
    return rc;
}

int cn_init_normal_(cn_tensor *t, double mean, double std) {
    int rc = check_target("init_normal_", t);
    if (rc < 0) return rc;
    cn_scope_begin();
    rc = fill_from(t, cn_normal(draw_dtype(t), t->ndim, t->shape, mean, std));
    cn_scope_end();
    return rc;
}

int cn_init_constant_(cn_tensor *t, double value) {
    int rc = check_target("init_constant_", t);
    if (rc < 0) return rc;
    /* cn_fill_ writes in place like copy_, so the same no-grad rule applies. */
    cn_no_grad_begin();
    rc = cn_fill_(t, value);
    cn_no_grad_end();
    return rc;
}

int cn_init_zeros_(cn_tensor *t) { return cn_init_constant_(t, 0); }
int cn_init_ones_(cn_tensor *t) { return cn_init_constant_(t, 1); }

double cn_init_gain(cn_nonlinearity nl, double param) {
    switch (nl) {
    case CN_NL_LINEAR:
    case CN_NL_SIGMOID: return 1;
    case CN_NL_TANH: return 5.0 / 3;
    case CN_NL_RELU: return sqrt(2.0);
    case CN_NL_LEAKY_RELU: return sqrt(2.0 / (1 + param * param));
    case CN_NL_SELU: return 0.75;
    }
    cn_fail("init_gain: unknown nonlinearity %d", (int)nl);
    return NAN;
}

int cn_init_fans(const cn_tensor *t, int64_t *fan_in, int64_t *fan_out) {
    if (!t) return CN_EINVAL;
    if (t->ndim < 2)
        return cn_failc(CN_EINVAL, "init: fans need a tensor of rank >= 2, this one has rank %d",
                        t->ndim);
    int64_t rf = 1;
    for (int i = 2; i < t->ndim; i++) rf *= t->shape[i];
    if (fan_in) *fan_in = t->shape[1] * rf;
    if (fan_out) *fan_out = t->shape[0] * rf;
    return CN_OK;
}

static int xavier_std(const char *fn, const cn_tensor *t, double gain, double *std) {
    int rc = check_target(fn, t);
    int64_t fi = 0, fo = 0;
    if (rc == CN_OK) rc = cn_init_fans(t, &fi, &fo);
    /* An empty tensor has nothing to fill (PyTorch warns and does nothing). */
    if (rc == CN_OK) *std = fi + fo > 0 ? gain * sqrt(2.0 / (double)(fi + fo)) : 0;
    return rc;
}

int cn_init_xavier_uniform_(cn_tensor *t, double gain) {
    double std = 0;
    int rc = xavier_std("init_xavier_uniform_", t, gain, &std);
    if (rc < 0) return rc;
    double b = sqrt(3.0) * std;
    return cn_init_uniform_(t, -b, b);
}

int cn_init_xavier_normal_(cn_tensor *t, double gain) {
    double std = 0;
    int rc = xavier_std("init_xavier_normal_", t, gain, &std);
    return rc < 0 ? rc : cn_init_normal_(t, 0, std);
}

static int kaiming_std(const char *fn, const cn_tensor *t, double a, cn_fan_mode mode,
                       cn_nonlinearity nl, double *std) {
    int rc = check_target(fn, t);
    int64_t fi = 0, fo = 0;
    if (rc == CN_OK) rc = cn_init_fans(t, &fi, &fo);
    if (rc < 0) return rc;
    if (mode != CN_FAN_IN && mode != CN_FAN_OUT)
        return cn_failc(CN_EINVAL, "%s: mode %d is not CN_FAN_IN or CN_FAN_OUT", fn, (int)mode);
    int64_t fan = mode == CN_FAN_IN ? fi : fo;
    double gain = cn_init_gain(nl, a);
    if (isnan(gain)) return CN_EINVAL;
    /* An empty tensor has nothing to fill (PyTorch warns and does nothing). */
    *std = fan > 0 ? gain / sqrt((double)fan) : 0;
    return CN_OK;
}

int cn_init_kaiming_uniform_(cn_tensor *t, double a, cn_fan_mode mode, cn_nonlinearity nl) {
    double std = 0;
    int rc = kaiming_std("init_kaiming_uniform_", t, a, mode, nl, &std);
    if (rc < 0) return rc;
    double b = sqrt(3.0) * std;
    return cn_init_uniform_(t, -b, b);
}

int cn_init_kaiming_normal_(cn_tensor *t, double a, cn_fan_mode mode, cn_nonlinearity nl) {
    double std = 0;
    int rc = kaiming_std("init_kaiming_normal_", t, a, mode, nl, &std);
    return rc < 0 ? rc : cn_init_normal_(t, 0, std);
}

/* ---- the layers' defaults ---- */

int cn_nn_init_bound(cn_tensor *t, double bound) { return cn_init_uniform_(t, -bound, bound); }

int cn_nn_init_default(cn_tensor *weight, cn_tensor *bias) {
    int rc = cn_init_kaiming_uniform_(weight, sqrt(5.0), CN_FAN_IN, CN_NL_LEAKY_RELU);
    if (rc < 0 || !bias) return rc;
    int64_t fan_in = 0;
    cn_init_fans(weight, &fan_in, NULL);
    return cn_nn_init_bound(bias, fan_in > 0 ? 1 / sqrt((double)fan_in) : 0);
}

cn_tensor *cn_nn_full_like(cn_tensor *x, double value) {
    if (!x) return NULL;
    cn_attrs a = {0};
    a.f[0] = value;
    a.i[0] = -1; /* x's dtype */
    return cn_op_apply(CN_OP_full_like, &x, 1, &a);
}
