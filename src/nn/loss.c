/* Losses (torch.nn.functional semantics), built from ops so their gradients
 * come from the ops' rules and they trace into static graphs. Cross-entropy
 * is log_softmax and a gather of the target's column: no one-hot matrix. */
#include "nn.h"

#include <inttypes.h>
#include <math.h>

static bool bad_reduction(const char *fn, cn_reduction r) {
    if (r == CN_REDUCTION_MEAN || r == CN_REDUCTION_SUM || r == CN_REDUCTION_NONE) return false;
    cn_fail("%s: unknown reduction %d", fn, (int)r);
    return true;
}

static cn_tensor *reduce(cn_tensor *l, cn_reduction r) {
    if (r == CN_REDUCTION_NONE) return l;
    return r == CN_REDUCTION_SUM ? cn_sum(l, NULL, 0, false) : cn_mean(l, NULL, 0, false);
}

cn_tensor *cn_mse_loss(cn_tensor *input, cn_tensor *target, cn_reduction reduction) {
    if (!input || !target || bad_reduction("mse_loss", reduction)) return NULL;
    cn_scope_begin();
    return cn_nn_scope_result(reduce(cn_square(cn_sub(input, target)), reduction));
}

cn_tensor *cn_l1_loss(cn_tensor *input, cn_tensor *target, cn_reduction reduction) {
    if (!input || !target || bad_reduction("l1_loss", reduction)) return NULL;
    cn_scope_begin();
    return cn_nn_scope_result(reduce(cn_abs(cn_sub(input, target)), reduction));
}

/* ---- classification ---- */

/* t with the shape of the integer tensor `like` ([-1] flat values back to
 * the target's shape; at most one size may be unknown). */
static cn_tensor *like_target(const char *fn, cn_tensor *t, const cn_tensor *like) {
    int64_t shape[CN_MAX_DIMS];
    int unknown = 0;
    for (int i = 0; i < like->ndim; i++) unknown += (shape[i] = like->shape[i]) < 0;
    if (unknown > 1)
        return cn_fail("%s: class weights need a target with at most one unknown size", fn);
    return cn_reshape(t, like->ndim, shape);
}

static bool check_class_shapes(const char *fn, const cn_tensor *x, const cn_tensor *target,
                               bool probs) {
    char b1[128], b2[128];
    bool ok = x->ndim >= 1;
    if (ok && probs) {
        ok = target->ndim == x->ndim;
        for (int i = 0; ok && i < x->ndim; i++)
            ok = target->shape[i] == x->shape[i] || target->shape[i] < 0 || x->shape[i] < 0;
    } else if (ok) {
        ok = target->ndim == x->ndim - 1;
        for (int i = 0; ok && i < target->ndim; i++) {
            int64_t xs = x->shape[i == 0 ? 0 : i + 1], ts = target->shape[i];
            ok = xs == ts || xs < 0 || ts < 0;
        }
    }
    if (!ok)
        cn_fail("%s: input %s and target %s do not match: expected [N, C, d...] and %s", fn,
                cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape),
                cn_fmt_shape(b2, sizeof b2, target->ndim, target->shape),
                probs ? "probabilities of the same shape" : "class indices [N, d...]");
    return ok;
}

/* The weighted sum over classes (axis 1) of -logp, the label-smoothing term. */
static cn_tensor *neg_class_sum(cn_tensor *logp, cn_tensor *wb) {
    return cn_neg(cn_sum(wb ? cn_mul(logp, wb) : logp, (int[]){1}, 1, false));
}

static cn_tensor *class_loss(const char *fn, cn_tensor *logp, cn_tensor *target,
                             const cn_class_loss_opts *o, double eps) {
    cn_reduction r = o->reduction;
    int64_t C = logp->shape[1];
    cn_tensor *w = o->weight, *wb = NULL;
    if (w) {
        if (w->ndim != 1 || (w->shape[0] != C && C >= 0) || !cn_dtype_is_float((cn_dtype)w->dtype)) {
            char b1[128];
            return cn_fail("%s: weight %s %s should be a float [C] with C = %" PRId64, fn,
                           cn_dtype_name((cn_dtype)w->dtype),
                           cn_fmt_shape(b1, sizeof b1, w->ndim, w->shape), C);
        }
        int64_t bs[CN_MAX_DIMS];
        for (int i = 0; i < logp->ndim; i++) bs[i] = i == 1 ? C : 1;
        wb = cn_reshape(w, logp->ndim, bs);
    }
    if (cn_dtype_is_float((cn_dtype)target->dtype)) {
        /* Class probabilities (PyTorch >= 1.10): smoothing mixes in the uniform
         * distribution; the mean is over the samples, weights or not. */
        if (o->use_ignore_index)
            return cn_fail("%s: ignore_index is for class-index targets, not probabilities", fn);
        cn_tensor *t = eps > 0 ? cn_add_scalar(cn_mul_scalar(target, 1 - eps), eps / (double)C) : target;
        cn_tensor *per = cn_neg(cn_sum(cn_mul(wb ? cn_mul(logp, wb) : logp, t), (int[]){1}, 1, false));
        return reduce(per, r);
    }
    cn_tensor *idx = target, *valid = NULL;
    if (o->use_ignore_index) {
        valid = cn_ne(target, cn_scalar(CN_I64, (double)o->ignore_index));
        /* Ignored entries gather column 0 and are masked out afterwards. */
        idx = cn_where(valid, target, cn_scalar((cn_dtype)target->dtype, 0));
    }
    cn_tensor *picked = cn_squeeze(cn_gather(logp, 1, cn_unsqueeze(idx, 1)), 1);
    cn_tensor *wt = w ? like_target(fn, cn_index_select(w, 0, cn_reshape(idx, 1, (int64_t[]){-1})),
                                    target)
                      : NULL;
    cn_tensor *nll = cn_neg(wt ? cn_mul(picked, wt) : picked);
    cn_tensor *zero = cn_scalar(CN_F32, 0);
    if (valid) {
        nll = cn_where(valid, nll, zero);
        if (wt) wt = cn_where(valid, wt, zero);
    }
    /* The mean divides by the total weight of the counted targets. */
    cn_tensor *denom = NULL;
    if (r == CN_REDUCTION_MEAN && (wt || valid))
        denom = wt ? cn_sum(wt, NULL, 0, false) : cn_sum(cn_cast(valid, CN_F32), NULL, 0, false);
    cn_tensor *loss = denom ? cn_div(cn_sum(nll, NULL, 0, false), denom) : reduce(nll, r);
    if (eps > 0) {
        cn_tensor *smooth = neg_class_sum(logp, wb);
        if (valid) smooth = cn_where(valid, smooth, zero);
        /* The mean divides by the same total weight (or count) as the nll term. */
        smooth = denom ? cn_div(cn_sum(smooth, NULL, 0, false), denom) : reduce(smooth, r);
        loss = cn_add(cn_mul_scalar(loss, 1 - eps), cn_mul_scalar(smooth, eps / (double)C));
    }
    return loss;
}

static cn_tensor *class_entry(const char *fn, cn_tensor *x, cn_tensor *target,
                              const cn_class_loss_opts *o, bool from_logits) {
    cn_class_loss_opts d0 = {0};
    if (!o) o = &d0;
    if (!x || !target || bad_reduction(fn, o->reduction)) return NULL;
    double eps = from_logits ? o->label_smoothing : 0;
    if (!(eps >= 0 && eps <= 1))
        return cn_fail("%s: label_smoothing %g must be in [0, 1]", fn, o->label_smoothing);
    if (!from_logits && o->label_smoothing != 0)
        return cn_fail("%s: label_smoothing is an option of cross_entropy", fn);
    if (!cn_dtype_is_float((cn_dtype)x->dtype))
        return cn_fail("%s: input must be float, not %s", fn, cn_dtype_name((cn_dtype)x->dtype));
    cn_dtype tdt = (cn_dtype)target->dtype;
    bool probs = cn_dtype_is_float(tdt);
    if (probs && !from_logits)
        return cn_fail("%s: target must hold class indices (integers), not %s", fn,
                       cn_dtype_name(tdt));
    if (!probs && tdt != CN_I64 && tdt != CN_I32 && tdt != CN_U8)
        return cn_fail("%s: target must hold class indices (integers) or probabilities, not %s",
                       fn, cn_dtype_name(tdt));
    /* Unbatched: [C] with a rank-0 target (or [C] probabilities). */
    bool unbatched = x->ndim == 1;
    if (unbatched) {
        x = cn_unsqueeze(x, 0);
        target = cn_unsqueeze(target, 0);
    }
    if (!x || !target || !check_class_shapes(fn, x, target, probs)) return NULL;
    cn_tensor *logp = from_logits ? cn_log_softmax(x, 1) : x;
    if (!logp) return NULL;
    cn_tensor *l = class_loss(fn, logp, target, o, eps);
    return unbatched && o->reduction == CN_REDUCTION_NONE ? cn_squeeze(l, 0) : l;
}

cn_tensor *cn_cross_entropy_ex(cn_tensor *logits, cn_tensor *target, const cn_class_loss_opts *o) {
    cn_scope_begin();
    return cn_nn_scope_result(class_entry("cross_entropy", logits, target, o, true));
}

cn_tensor *cn_nll_loss_ex(cn_tensor *log_probs, cn_tensor *target, const cn_class_loss_opts *o) {
    cn_scope_begin();
    return cn_nn_scope_result(class_entry("nll_loss", log_probs, target, o, false));
}

cn_tensor *cn_cross_entropy(cn_tensor *logits, cn_tensor *target, cn_reduction reduction,
                            double label_smoothing) {
    cn_class_loss_opts o = {.reduction = reduction, .label_smoothing = label_smoothing};
    return cn_cross_entropy_ex(logits, target, &o);
}

cn_tensor *cn_nll_loss(cn_tensor *log_probs, cn_tensor *target, cn_reduction reduction) {
    cn_class_loss_opts o = {.reduction = reduction};
    return cn_nll_loss_ex(log_probs, target, &o);
}

/* ---- binary ---- */

static cn_tensor *bce_with_logits(cn_tensor *x, cn_tensor *y, cn_tensor *pos_weight,
                                  cn_reduction reduction) {
    /* softplus without its linear cut-off is max(x, 0) + log1p(e^-|x|), and
     * its derivative is sigmoid(x) exactly, so the gradient is sigmoid(x) - y. */
    cn_tensor *l;
    if (!pos_weight) {
        l = cn_sub(cn_softplus(x, 1, INFINITY), cn_mul(x, y));
    } else {
        /* (1 - y) x + (1 + (pw - 1) y) softplus(-x) */
        cn_tensor *lw = cn_add_scalar(cn_mul(cn_sub_scalar(pos_weight, 1), y), 1);
        l = cn_add(cn_mul(cn_rsub_scalar(y, 1), x), cn_mul(lw, cn_softplus(cn_neg(x), 1, INFINITY)));
    }
    return reduce(l, reduction);
}

cn_tensor *cn_bce_with_logits(cn_tensor *x, cn_tensor *y, cn_tensor *pos_weight,
                              cn_reduction reduction) {
    if (!x || !y || bad_reduction("bce_with_logits", reduction)) return NULL;
    cn_scope_begin();
    return cn_nn_scope_result(bce_with_logits(x, y, pos_weight, reduction));
}

/* log(p) clamped below at -100 as PyTorch, without a 0 * inf in the
 * gradient where p = 0: the log only sees positive values. */
static cn_tensor *clamped_log(cn_tensor *p) {
    cn_tensor *pos = cn_gt(p, cn_scalar(CN_F32, 0));
    cn_tensor *lp = cn_clamp(cn_log(cn_where(pos, p, cn_scalar(CN_F32, 1))), -100, INFINITY);
    return cn_where(pos, lp, cn_scalar(CN_F32, -100));
}

cn_tensor *cn_bce_loss(cn_tensor *p, cn_tensor *y, cn_reduction reduction) {
    if (!p || !y || bad_reduction("bce_loss", reduction)) return NULL;
    cn_scope_begin();
    cn_tensor *a = cn_mul(y, clamped_log(p));
    cn_tensor *b = cn_mul(cn_rsub_scalar(y, 1), clamped_log(cn_rsub_scalar(p, 1)));
    return cn_nn_scope_result(reduce(cn_neg(cn_add(a, b)), reduction));
}
