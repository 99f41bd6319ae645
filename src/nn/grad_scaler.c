/* Dynamic loss scaling (torch.cuda.amp.GradScaler) for f16 training: small
 * gradients that f16 would flush to zero are kept by scaling the loss up;
 * the optimiser's pre-step hook divides the gradients back and skips the
 * update when the scale made one overflow. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>

struct cn_grad_scaler {
    cn_optimizer *opt;
    cn_grad_scaler_opts o;
    double scale;
    int64_t good;      /* finite steps since the last change of scale */
    int64_t skipped;   /* updates skipped so far */
    bool last_skipped;
    cn_tensor *scale_t; /* rank 0, the scale: the loss is multiplied by it */
    int (*prev)(void *ctx); /* a hook that was there (data-parallel averaging) */
    void *prev_ctx;
};

/* g /= scale in place; *bad when a result is not finite. */
static int unscale(cn_tensor *g, double inv, bool *bad) {
    if (g->dtype == CN_F32 && g->storage && g->storage->device_kind == CN_DEVICE_CPU &&
        cn_is_contiguous(g)) {
        float *p = (float *)cn_t_ptr(g), f = (float)inv;
        int64_t n = cn_numel(g);
        bool b = false;
        for (int64_t i = 0; i < n; i++) {
            p[i] *= f;
            b |= !isfinite(p[i]);
        }
        *bad |= b;
        cn_storage_bump(g->storage);
        return CN_OK;
    }
    /* Elsewhere through ops: 0 * g sums to 0 exactly when every element is finite. */
    cn_scope_begin();
    cn_tensor *u = cn_mul(g, cn_scalar((cn_dtype)g->dtype, inv));
    int rc = cn_copy_(g, u);
    double z = rc == CN_OK ? cn_item(cn_sum(cn_mul(u, cn_scalar((cn_dtype)g->dtype, 0)), NULL, 0,
                                            false))
                           : 0;
    cn_scope_end();
    *bad |= !(z == 0);
    return rc;
}

static int set_scale(cn_grad_scaler *s, double v) {
    int rc = cn_fill_(s->scale_t, v);
    if (rc == CN_OK) s->scale = v; /* the two never disagree */
    return rc;
}

/* Runs first in every cn_optimizer_step: > 0 skips the update. */
static int pre_step(void *ctx) {
    cn_grad_scaler *s = ctx;
    if (s->prev) {
        int rc = s->prev(s->prev_ctx);
        if (rc != 0) return rc;
    }
    bool bad = false;
    int rc = CN_OK;
    cn_no_grad_begin();
    for (int i = 0, n = cn_opt_count(s->opt); i < n && rc == CN_OK; i++) {
        cn_tensor *g = cn_opt_param(s->opt, i)->grad;
        if (g) rc = unscale(g, 1 / s->scale, &bad);
    }
    cn_no_grad_end();
    if (rc != CN_OK) return rc;
    s->last_skipped = bad;
    if (bad) {
        s->skipped++;
        s->good = 0;
        rc = set_scale(s, s->scale * s->o.backoff_factor);
        return rc < 0 ? rc : 1;
    }
    if (++s->good >= s->o.growth_interval) {
        s->good = 0;
        double g = s->scale * s->o.growth_factor;
        /* As torch: growth stops where the scale would stop being finite in f32. */
        if (isfinite((float)g)) rc = set_scale(s, g);
    }
    return rc;
}

cn_grad_scaler *cn_grad_scaler_new(cn_optimizer *opt, const cn_grad_scaler_opts *opts) {
    if (!opt) return cn_failc(CN_EINVAL, "grad_scaler_new: no optimiser"), NULL;
    cn_grad_scaler_opts o = opts ? *opts : (cn_grad_scaler_opts){0};
    if (o.init_scale == 0) o.init_scale = 65536;
    if (o.growth_factor == 0) o.growth_factor = 2;
    if (o.backoff_factor == 0) o.backoff_factor = 0.5;
    if (o.growth_interval == 0) o.growth_interval = 2000;
    if (!(o.init_scale > 0) || !isfinite(o.init_scale))
        return cn_failc(CN_EINVAL, "grad_scaler_new: init_scale %g must be > 0 and finite",
                        o.init_scale), NULL;
    if (!(o.growth_factor > 1))
        return cn_failc(CN_EINVAL, "grad_scaler_new: growth_factor %g must be > 1",
                        o.growth_factor), NULL;
    if (!(o.backoff_factor > 0 && o.backoff_factor < 1))
        return cn_failc(CN_EINVAL, "grad_scaler_new: backoff_factor %g must be in (0, 1)",
                        o.backoff_factor), NULL;
    if (o.growth_interval < 1)
        return cn_failc(CN_EINVAL, "grad_scaler_new: growth_interval %d must be >= 1",
                        o.growth_interval), NULL;
    cn_grad_scaler *s = calloc(1, sizeof *s);
    if (!s) return cn_failc(CN_ENOMEM, "grad_scaler_new: out of memory"), NULL;
    s->opt = opt;
    s->o = o;
    s->scale = o.init_scale;
    /* On the parameters' device, so that the scaled loss stays there. */
    cn_tensor *p0 = cn_opt_param(opt, 0);
    s->scale_t = cn_t_full_on(p0 ? cn_t_device(p0) : CN_CPU, CN_F32, 0, NULL, o.init_scale);
    if (!s->scale_t) {
        free(s);
        return NULL;
    }
    cn_opt_get_pre_step(opt, &s->prev, &s->prev_ctx);
    cn_opt_set_pre_step(opt, pre_step, s);
    return s;
}

void cn_grad_scaler_free(cn_grad_scaler *s) {
    if (!s) return;
    /* Only while the hook is still this scaler's: what it wrapped may be
     * gone already (a cn_ddp freed first). */
    int (*hook)(void *);
    void *hook_ctx;
    cn_opt_get_pre_step(s->opt, &hook, &hook_ctx);
    if (hook == pre_step && hook_ctx == s) cn_opt_set_pre_step(s->opt, s->prev, s->prev_ctx);
    cn_release(s->scale_t);
    free(s);
}

cn_tensor *cn_grad_scaler_scale(cn_grad_scaler *s, cn_tensor *loss) {
    if (!s || !loss) return NULL;
    return cn_mul(loss, s->scale_t);
}

double cn_grad_scaler_get_scale(const cn_grad_scaler *s) { return s ? s->scale : NAN; }

int64_t cn_grad_scaler_skipped(const cn_grad_scaler *s) { return s ? s->skipped : 0; }

bool cn_grad_scaler_last_skipped(const cn_grad_scaler *s) { return s && s->last_skipped; }

cn_grad_scaler_state cn_grad_scaler_get_state(const cn_grad_scaler *s) {
    cn_grad_scaler_state st = {NAN, 0, 0};
    if (s) st = (cn_grad_scaler_state){s->scale, s->good, s->skipped};
    return st;
}

int cn_grad_scaler_set_state(cn_grad_scaler *s, const cn_grad_scaler_state *st) {
    if (!s || !st) return cn_failc(CN_EINVAL, "grad_scaler_set_state: no scaler or no state");
    if (!(st->scale > 0) || !isfinite((float)st->scale))
        return cn_failc(CN_EINVAL,
                        "grad_scaler_set_state: scale %g must be > 0 and finite in f32",
                        st->scale);
    if (st->growth_tracker < 0 || st->skipped < 0)
        return cn_failc(CN_EINVAL,
                        "grad_scaler_set_state: growth_tracker %lld and skipped %lld must be >= 0",
                        (long long)st->growth_tracker, (long long)st->skipped);
    int rc = set_scale(s, st->scale);
    if (rc < 0) return rc;
    s->good = st->growth_tracker;
    s->skipped = st->skipped;
    return CN_OK;
}
