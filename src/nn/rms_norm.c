/* RMSNorm (torch.nn.RMSNorm, PyTorch 2.4) from ops, with its composite's
 * formula x * rsqrt(mean(x^2) + eps) * weight, so gradients come from the
 * ops' rules and the module traces into static graphs. */
#include "nn.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>

typedef struct rms_mod {
    cn_module base;
    int nd;
    int64_t shape[CN_MAX_DIMS];
    double eps; /* 0: the input dtype's machine epsilon (eps=None) */
} rms_mod;

/* torch.finfo(dtype).eps: what eps=None means. */
static double dtype_eps(cn_dtype dt) {
    switch (dt) {
    case CN_F64: return DBL_EPSILON;
    case CN_F16: return 0.0009765625; /* 2^-10 */
    case CN_BF16: return 0.0078125;   /* 2^-7 */
    default: return FLT_EPSILON;
    }
}

static cn_tensor *rms_forward(cn_module *m, cn_tensor *x) {
    rms_mod *r = (rms_mod *)m;
    bool ok = x->ndim >= r->nd;
    for (int i = 0; ok && i < r->nd; i++) {
        int64_t s = x->shape[x->ndim - r->nd + i];
        ok = s == r->shape[i] || s < 0;
    }
    if (!ok) {
        char b1[128], b2[128];
        return cn_fail("RMSNorm: input %s does not end in normalized_shape %s",
                       cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape),
                       cn_fmt_shape(b2, sizeof b2, r->nd, r->shape));
    }
    int axes[CN_MAX_DIMS];
    for (int i = 0; i < r->nd; i++) axes[i] = x->ndim - r->nd + i;
    double eps = r->eps > 0 ? r->eps : dtype_eps((cn_dtype)x->dtype);
    cn_tensor *ms = cn_mean(cn_square(x), axes, r->nd, true);
    cn_tensor *y = cn_mul(x, cn_rsqrt(cn_add_scalar(ms, eps)));
    if (m->nparams == 1) y = cn_mul(y, cn_nn_p(m, 0));
    return y;
}

static const cn_module_vtable rms_vt = {"RMSNorm", rms_forward, NULL};

cn_module *cn_nn_rms_norm(int ndim, const int64_t *shape, double eps, bool affine) {
    if (ndim < 1 || ndim > CN_MAX_DIMS || !shape)
        return cn_fail("rms_norm: normalized_shape must have 1 to %d sizes", CN_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return cn_fail("rms_norm: normalized_shape has a negative size");
    if (!(eps >= 0) || !isfinite(eps))
        return cn_fail("rms_norm: eps %g must be >= 0 (0: the dtype's epsilon)", eps);
    rms_mod *r = (rms_mod *)cn_module_new(&rms_vt, sizeof(rms_mod));
    if (!r) return NULL;
    r->nd = ndim;
    memcpy(r->shape, shape, sizeof(int64_t) * (size_t)ndim);
    r->eps = eps;
    cn_module *m = &r->base;
    if (affine) {
        cn_tensor *w = cn_nn_new_param(m, "weight", ndim, shape);
        if (!w || cn_init_ones_(w) < 0) {
            cn_module_free(m);
            return NULL;
        }
    }
    return m;
}
