/* BatchNorm1d/2d, from reductions and elementwise ops, so its gradients
 * (through the batch statistics too) come from the ops' rules, and
 * LayerNorm, the layer_norm op (cn_layer_norm). */
#include "nn.h"
#include "../graph/effects.h"

#include <inttypes.h>
#include <math.h>

typedef struct bn_mod {
    cn_module base;
    int64_t C;
    int rank_lo, rank_hi; /* accepted input ranks */
    double eps, momentum;
    bool affine, track;
} bn_mod;

enum { BN_MEAN, BN_VAR, BN_COUNT }; /* buffer order */

/* The running statistics' update (eager only), as PyTorch: the unbiased
 * batch variance, and momentum < 0 for a cumulative average. */
static int bn_update(bn_mod *b, cn_tensor *mean, cn_tensor *var, int64_t n) {
    cn_module *m = &b->base;
    cn_tensor *rm = cn_nn_b(m, BN_MEAN), *rv = cn_nn_b(m, BN_VAR), *nb = cn_nn_b(m, BN_COUNT);
    int64_t count = cn_get_int(nb, NULL) + 1;
    int rc = cn_fill_(nb, (double)count);
    double f = b->momentum < 0 ? 1.0 / (double)count : b->momentum;
    cn_no_grad_begin();
    cn_tensor *bm = cn_reshape(mean, 1, &b->C);
    cn_tensor *bv = cn_mul_scalar(cn_reshape(var, 1, &b->C), (double)n / (double)(n - 1));
    if (rc == CN_OK)
        rc = cn_copy_(rm, cn_add(cn_mul_scalar(rm, 1 - f), cn_mul_scalar(bm, f)));
    if (rc == CN_OK)
        rc = cn_copy_(rv, cn_add(cn_mul_scalar(rv, 1 - f), cn_mul_scalar(bv, f)));
    cn_no_grad_end();
    return rc;
}

/* A scalar as a value of x's graph when x is symbolic. In evaluation mode
 * the statistics and the affine parameters are all data; without a
 * symbolic operand, scale and shift would be computed once while tracing
 * and frozen into the graph, whereas a graph must read the buffers' and
 * parameters' values at run time (they change with training). */
static cn_tensor *scalar_of(cn_tensor *x, double v) {
    if (!cn_is_symbolic(x)) return cn_scalar(CN_F32, v);
    cn_tensor *one = cn_reshape(cn_narrow(cn_reshape(x, 1, (int64_t[]){-1}), 0, 0, 1), 0, NULL);
    return cn_nn_full_like(one, v);
}

/* bn_update for a static graph: the same arithmetic as graph effects, so
 * every run of a program built from this forward updates the statistics
 * as an eager call does (effects.h). Every term reads the buffers through
 * a symbolic operand, so they are read at run time, not frozen. n < 0 (an
 * unknown batch size): the unbiased variance is computed from x. */
static int bn_update_effects(bn_mod *b, cn_tensor *x, const int *axes, int nax, cn_tensor *mean,
                             cn_tensor *var, int64_t n) {
    cn_module *m = &b->base;
    cn_tensor *rm = cn_nn_b(m, BN_MEAN), *rv = cn_nn_b(m, BN_VAR), *nb = cn_nn_b(m, BN_COUNT);
    cn_no_grad_begin();
    cn_tensor *count = cn_add(nb, cn_cast(scalar_of(x, 1), (cn_dtype)nb->dtype));
    cn_tensor *f = b->momentum < 0 ? cn_reciprocal(cn_cast(count, CN_F32))
                                   : scalar_of(x, b->momentum);
    cn_tensor *keep = cn_sub(scalar_of(x, 1), f);
    cn_tensor *bm = cn_reshape(mean, 1, &b->C);
    cn_tensor *bv = n >= 0 ? cn_mul_scalar(cn_reshape(var, 1, &b->C), (double)n / (double)(n - 1))
                           : cn_reshape(cn_var(x, axes, nax, 1, true), 1, &b->C);
    cn_tensor *nm = cn_add(cn_mul(rm, keep), cn_mul(bm, f));
    cn_tensor *nv = cn_add(cn_mul(rv, keep), cn_mul(bv, f));
    cn_no_grad_end();
    if (!count || !nm || !nv) return CN_EINVAL;
    int rc = cn_graph_add_effect(nb, count, var);
    if (rc == CN_OK) rc = cn_graph_add_effect(rm, nm, var);
    if (rc == CN_OK) rc = cn_graph_add_effect(rv, nv, var);
    return rc;
}

static cn_tensor *bn_forward(cn_module *m, cn_tensor *x) {
    bn_mod *b = (bn_mod *)m;
    const char *type = m->vt->type;
    char buf[128];
    if (x->ndim < b->rank_lo || x->ndim > b->rank_hi || (x->shape[1] != b->C && x->shape[1] >= 0))
        return cn_fail("%s: input %s should be %s with C = %" PRId64, type,
                       cn_fmt_shape(buf, sizeof buf, x->ndim, x->shape),
                       b->rank_lo == 4 ? "[N, C, H, W]" : "[N, C] or [N, C, L]", b->C);
    int axes[CN_MAX_DIMS], nax = 0;
    int64_t bshape[CN_MAX_DIMS];
    int64_t n = 1; /* values per channel; -1 if unknown */
    for (int i = 0; i < x->ndim; i++) {
        bshape[i] = i == 1 ? b->C : 1;
        if (i == 1) continue;
        axes[nax++] = i;
        n = n < 0 || x->shape[i] < 0 ? -1 : n * x->shape[i];
    }
    bool batch_stats = m->training || !b->track;
    cn_tensor *mean, *var;
    if (batch_stats) {
        if (m->training && n >= 0 && n <= 1)
            return cn_fail("%s: training needs more than one value per channel, input %s", type,
                           cn_fmt_shape(buf, sizeof buf, x->ndim, x->shape));
        mean = cn_mean(x, axes, nax, true);
        var = cn_var(x, axes, nax, 0, true);
        if (!var) return NULL;
        if (m->training && b->track &&
            (cn_is_symbolic(x) ? bn_update_effects(b, x, axes, nax, mean, var, n)
                               : bn_update(b, mean, var, n)) < 0)
            return NULL;
    } else {
        mean = cn_reshape(cn_nn_b(m, BN_MEAN), x->ndim, bshape);
        var = cn_reshape(cn_nn_b(m, BN_VAR), x->ndim, bshape);
    }
    /* y = x * scale + shift with scale = w / sqrt(var + eps), shift = b - mean * scale:
     * two passes over x instead of four. */
    cn_tensor *scale = cn_rsqrt(cn_add(var, scalar_of(x, b->eps)));
    if (b->affine) scale = cn_mul(scale, cn_reshape(cn_nn_p(m, 0), x->ndim, bshape));
    cn_tensor *shift = cn_neg(cn_mul(mean, scale));
    if (b->affine) shift = cn_add(shift, cn_reshape(cn_nn_p(m, 1), x->ndim, bshape));
    return cn_add(cn_mul(x, scale), shift);
}

static const cn_module_vtable bn1_vt = {"BatchNorm1d", bn_forward, NULL};
static const cn_module_vtable bn2_vt = {"BatchNorm2d", bn_forward, NULL};

static cn_module *bn_new(const cn_module_vtable *vt, int lo, int hi, int64_t C,
                         const cn_batch_norm_opts *o) {
    cn_batch_norm_opts d = {0};
    if (!o) o = &d;
    if (C < 0) return cn_fail("%s: num_features %" PRId64 " must be >= 0", vt->type, C);
    if (!(o->eps >= 0) || !isfinite(o->eps) || !isfinite(o->momentum) || o->momentum > 1)
        return cn_fail("%s: eps %g must be >= 0 and momentum %g at most 1", vt->type, o->eps,
                       o->momentum);
    bn_mod *b = (bn_mod *)cn_module_new(vt, sizeof(bn_mod));
    if (!b) return NULL;
    b->C = C;
    b->rank_lo = lo;
    b->rank_hi = hi;
    b->eps = o->eps > 0 ? o->eps : 1e-5;
    b->momentum = o->momentum != 0 ? o->momentum : 0.1;
    b->affine = !o->no_affine;
    b->track = !o->no_running_stats;
    cn_module *m = &b->base;
    bool ok = true;
    if (b->affine) {
        cn_tensor *w = cn_nn_new_param(m, "weight", 1, &C);
        ok = w && cn_init_ones_(w) == CN_OK && cn_nn_new_param(m, "bias", 1, &C);
    }
    if (ok && b->track)
        ok = cn_nn_new_buffer(m, "running_mean", CN_F32, 1, &C, 0) &&
             cn_nn_new_buffer(m, "running_var", CN_F32, 1, &C, 1) &&
             cn_nn_new_buffer(m, "num_batches_tracked", CN_I64, 0, NULL, 0);
    if (!ok) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}

cn_module *cn_nn_batch_norm1d(int64_t num_features, const cn_batch_norm_opts *opts) {
    return bn_new(&bn1_vt, 2, 3, num_features, opts);
}

cn_module *cn_nn_batch_norm2d(int64_t num_features, const cn_batch_norm_opts *opts) {
    return bn_new(&bn2_vt, 4, 4, num_features, opts);
}

/* ---- LayerNorm ---- */

typedef struct ln_mod {
    cn_module base;
    int nd;
    int64_t shape[CN_MAX_DIMS];
    double eps;
} ln_mod;

static cn_tensor *ln_forward(cn_module *m, cn_tensor *x) {
    ln_mod *l = (ln_mod *)m;
    bool ok = x->ndim >= l->nd;
    for (int i = 0; ok && i < l->nd; i++) {
        int64_t s = x->shape[x->ndim - l->nd + i];
        ok = s == l->shape[i] || s < 0;
    }
    if (!ok) {
        char b1[128], b2[128];
        return cn_fail("LayerNorm: input %s does not end in normalized_shape %s",
                       cn_fmt_shape(b1, sizeof b1, x->ndim, x->shape),
                       cn_fmt_shape(b2, sizeof b2, l->nd, l->shape));
    }
    bool affine = m->nparams == 2;
    return cn_layer_norm(x, l->nd, affine ? cn_nn_p(m, 0) : NULL, affine ? cn_nn_p(m, 1) : NULL,
                         l->eps);
}

static const cn_module_vtable ln_vt = {"LayerNorm", ln_forward, NULL};

cn_module *cn_nn_layer_norm(int ndim, const int64_t *shape, double eps, bool affine) {
    if (ndim < 1 || ndim > CN_MAX_DIMS || !shape)
        return cn_fail("layer_norm: normalized_shape must have 1 to %d sizes", CN_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return cn_fail("layer_norm: normalized_shape has a negative size");
    if (!(eps >= 0) || !isfinite(eps)) return cn_fail("layer_norm: eps %g must be >= 0", eps);
    ln_mod *l = (ln_mod *)cn_module_new(&ln_vt, sizeof(ln_mod));
    if (!l) return NULL;
    l->nd = ndim;
    memcpy(l->shape, shape, sizeof(int64_t) * (size_t)ndim);
    l->eps = eps;
    cn_module *m = &l->base;
    if (affine) {
        cn_tensor *w = cn_nn_new_param(m, "weight", ndim, shape);
        if (!w || cn_init_ones_(w) < 0 || !cn_nn_new_param(m, "bias", ndim, shape)) {
            cn_module_free(m);
            return NULL;
        }
    }
    return m;
}
