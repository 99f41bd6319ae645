/* Gradient clipping (torch.nn.utils.clip_grad_value_ / clip_grad_norm_):
 * in place on the .grad of each parameter, outside the recorded graph. */
#include "../ops/op.h"

#include <math.h>

int cn_clip_grad_value(cn_tensor *const *params, int n, double clip) {
    if (n < 0 || (n > 0 && !params)) return cn_failc(CN_EINVAL, "clip_grad_value: bad parameter list");
    if (!(clip >= 0)) return cn_failc(CN_EINVAL, "clip_grad_value: clip value %g must be >= 0", clip);
    int rc = CN_OK;
    cn_no_grad_begin();
    cn_scope_begin();
    for (int i = 0; i < n && rc == CN_OK; i++) {
        cn_tensor *g = params[i] ? params[i]->grad : NULL;
        if (!g) continue;
        rc = cn_copy_(g, cn_clamp(g, -clip, clip));
    }
    cn_scope_end();
    cn_no_grad_end();
    return rc;
}

int cn_clip_grad_norm(cn_tensor *const *params, int n, double max_norm, double norm_type,
                      double *total_norm) {
    if (total_norm) *total_norm = NAN;
    if (n < 0 || (n > 0 && !params)) return cn_failc(CN_EINVAL, "clip_grad_norm: bad parameter list");
    if (!(max_norm >= 0))
        return cn_failc(CN_EINVAL, "clip_grad_norm: max_norm %g must be >= 0", max_norm);
    if (!(norm_type > 0))
        return cn_failc(CN_EINVAL, "clip_grad_norm: norm_type %g must be > 0 (or INFINITY)",
                        norm_type);
    int rc = CN_OK;
    cn_no_grad_begin();
    cn_scope_begin();
    /* The norm of the per-tensor norms is the norm of everything. */
    double total = 0;
    for (int i = 0; i < n; i++) {
        cn_tensor *g = params[i] ? params[i]->grad : NULL;
        if (!g || cn_numel(g) == 0) continue;
        cn_tensor *gd = cn_cast(g, CN_F64);
        cn_tensor *r = isinf(norm_type) ? cn_max(cn_abs(gd), NULL, 0, false)
                                        : cn_norm(gd, norm_type, NULL, 0, false);
        if (!r) {
            rc = CN_EINVAL;
            goto out;
        }
        double v = cn_item(r);
        total = isinf(norm_type) ? fmax(total, v) : total + pow(v, norm_type);
    }
    if (!isinf(norm_type)) total = pow(total, 1 / norm_type);
    if (total_norm) *total_norm = total;
    /* PyTorch's coefficient, including its 1e-6 guard. */
    double coef = max_norm / (total + 1e-6);
    if (coef < 1)
        for (int i = 0; i < n && rc == CN_OK; i++) {
            cn_tensor *g = params[i] ? params[i]->grad : NULL;
            if (g) rc = cn_copy_(g, cn_mul_scalar(g, coef));
        }
out:
    cn_scope_end();
    cn_no_grad_end();
    return rc;
}
