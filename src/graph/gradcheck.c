/* cn_gradcheck: a user's gradient rules against central differences in
 * f64, the check tests/gradcheck.h makes of every built-in op, for custom
 * ops and any other function of tensors. Written with the public API. */
#include "../ops/op.h"

#include <math.h>
#include <stdlib.h>

#define GC_MAX_INPUTS 64

typedef struct gc {
    cn_tensor_fn fn;
    void *ctx;
    cn_tensor **x;  /* the f64 leaves (float inputs) or the inputs as given */
    int n;
    double *w;      /* the seed, y's numel values */
    int64_t ny;
} gc;

/* Deterministic values in [-1, 1), so a failing check fails the same way
 * on every run. */
static double lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) / 9007199254740992.0 * 2 - 1;
}

static int eval(const gc *g, cn_tensor **y) {
    *y = NULL;
    int rc = g->fn(g->ctx, g->x, g->n, y, 1);
    if (rc < 0) return rc;
    if (!*y) return cn_failc(CN_EINVAL, "gradcheck: fn returned no output");
    if (cn_is_symbolic(*y)) return cn_failc(CN_EINVAL, "gradcheck: fn returned a symbolic tensor");
    if (!cn_dtype_is_float(cn_tensor_dtype(*y)))
        return cn_failc(CN_EINVAL, "gradcheck: fn's output is %s, not a float tensor",
                        cn_dtype_name(cn_tensor_dtype(*y)));
    return 0;
}

static int read_f64(const cn_tensor *t, double *buf, int64_t n) {
    return cn_copy_to_buffer(t, CN_F64, buf, sizeof(double) * (size_t)n);
}

/* sum(w * fn(x)) at the current values of x. */
static int loss(const gc *g, double *l) {
    cn_scope_begin();
    cn_tensor *y;
    int rc = eval(g, &y);
    double *v = NULL;
    if (rc == 0 && cn_numel(y) != g->ny)
        rc = cn_failc(CN_EINVAL, "gradcheck: fn's output changed size");
    if (rc == 0 && !(v = malloc(sizeof(double) * (size_t)(g->ny ? g->ny : 1))))
        rc = cn_failc(CN_ENOMEM, "gradcheck: out of memory");
    if (rc == 0 && (rc = read_f64(y, v, g->ny)) == 0) {
        double s = 0;
        for (int64_t k = 0; k < g->ny; k++) s += g->w[k] * v[k];
        *l = s;
    }
    free(v);
    cn_scope_end();
    return rc;
}

static void compare(cn_gradcheck_result *r, double an, double nu, double atol, double rtol,
                    int input, int64_t index) {
    double err = fabs(an - nu), ratio = err / (atol + rtol * fabs(nu));
    if (isnan(an) != isnan(nu)) ratio = err = INFINITY;
    else if (isnan(an)) ratio = err = 0; /* both NaN: the maths has no value there */
    if (err > r->max_abs_err) r->max_abs_err = err;
    if (ratio > r->max_ratio) {
        r->max_ratio = ratio;
        r->worst_input = input;
        r->worst_index = index;
    }
}

int cn_gradcheck(cn_tensor_fn fn, void *ctx, cn_tensor *const *inputs, int ninputs,
                 const cn_gradcheck_opts *opts, cn_gradcheck_result *res) {
    if (!fn || !res || ninputs < 1 || ninputs > GC_MAX_INPUTS || !inputs)
        return cn_failc(CN_EINVAL, "gradcheck: needs fn, res and 1 to %d inputs (got %d)",
                        GC_MAX_INPUTS, ninputs);
    memset(res, 0, sizeof *res);
    res->worst_input = -1;
    for (int i = 0; i < ninputs; i++) {
        if (!inputs[i]) return cn_failc(CN_EINVAL, "gradcheck: input %d is NULL", i);
        if (cn_is_symbolic(inputs[i]) || !inputs[i]->storage ||
            inputs[i]->storage->device_kind != CN_DEVICE_CPU)
            return cn_failc(CN_EINVAL, "gradcheck: input %d is not a CPU tensor with data", i);
    }
    double eps = opts && opts->eps > 0 ? opts->eps : 1e-6;
    double atol = opts && opts->atol > 0 ? opts->atol : 1e-5;
    double rtol = opts && opts->rtol > 0 ? opts->rtol : 1e-3;

    cn_tensor *x[GC_MAX_INPUTS], *xf[GC_MAX_INPUTS], *grads[GC_MAX_INPUTS];
    int fi[GC_MAX_INPUTS], nf = 0;
    gc g = {fn, ctx, x, ninputs, NULL, 0};
    double *an = NULL, *dir = NULL, *tv = NULL, *yp = NULL, *ym = NULL;
    int rc = 0;
    uint64_t seed = 0x5eed;
    cn_scope_begin();
    for (int i = 0; i < ninputs && rc == 0; i++) {
        if (!cn_dtype_is_float(cn_tensor_dtype(inputs[i]))) {
            x[i] = inputs[i];
            continue;
        }
        /* A contiguous f64 leaf of its own, whose elements we nudge. */
        x[i] = cn_detach(cn_clone(cn_cast(inputs[i], CN_F64)));
        if (!x[i] || !cn_is_contiguous(x[i]) || cn_set_requires_grad(x[i], true) < 0)
            rc = x[i] ? cn_failc(CN_EINVAL, "gradcheck: input %d: no f64 copy", i) : CN_EINVAL;
        xf[nf] = x[i];
        fi[nf++] = i;
    }
    if (rc == 0 && nf == 0) rc = cn_failc(CN_EINVAL, "gradcheck: no float input to check");
    cn_tensor *y = NULL;
    if (rc == 0) rc = eval(&g, &y);
    if (rc == 0) {
        g.ny = cn_numel(y);
        if (!(g.w = malloc(sizeof(double) * (size_t)(g.ny ? g.ny : 1))))
            rc = cn_failc(CN_ENOMEM, "gradcheck: out of memory");
    }
    cn_tensor *w = NULL;
    if (rc == 0) {
        for (int64_t k = 0; k < g.ny; k++) g.w[k] = lcg(&seed);
        cn_tensor *w64 = cn_from_data(CN_F64, cn_ndim(y), cn_shape(y), g.w);
        w = cn_cast(w64, cn_tensor_dtype(y));
        if (!w) rc = CN_EINVAL;
    }
    /* Reverse mode, every float input at once. */
    if (rc == 0) rc = cn_grad(&y, &w, 1, xf, nf, grads, CN_GRAD_ALLOW_UNUSED);
    for (int f = 0; f < nf && rc == 0; f++) {
        cn_tensor *xi = xf[f];
        int64_t n = cn_numel(xi);
        double *xd = cn_data(xi);
        free(an);
        if (!(an = calloc((size_t)(n ? n : 1), sizeof(double)))) {
            rc = cn_failc(CN_ENOMEM, "gradcheck: out of memory");
            break;
        }
        if (grads[f] && (rc = read_f64(grads[f], an, n)) < 0) break;
        for (int64_t e = 0; e < n && rc == 0; e++) {
            double v = xd[e], lp = 0, lm = 0;
            xd[e] = v + eps;
            rc = loss(&g, &lp);
            xd[e] = v - eps;
            if (rc == 0) rc = loss(&g, &lm);
            xd[e] = v;
            if (rc == 0) compare(res, an[e], (lp - lm) / (2 * eps), atol, rtol, fi[f], e);
        }
    }
    /* Forward mode: one random direction for all inputs together. */
    if (rc == 0 && opts && opts->check_jvp) {
        cn_tensor *tan[GC_MAX_INPUTS] = {0};
        int64_t tot = 0, ny1 = g.ny ? g.ny : 1;
        for (int f = 0; f < nf; f++) tot += cn_numel(xf[f]);
        if (!(dir = malloc(sizeof(double) * 2 * (size_t)(tot ? tot : 1))) ||
            !(tv = calloc((size_t)ny1, sizeof(double))) ||
            !(yp = malloc(sizeof(double) * (size_t)ny1)) ||
            !(ym = malloc(sizeof(double) * (size_t)ny1)))
            rc = cn_failc(CN_ENOMEM, "gradcheck: out of memory");
        double *bk = dir ? dir + tot : NULL; /* the values, restored exactly */
        for (int64_t k = 0; k < tot && rc == 0; k++) dir[k] = lcg(&seed);
        for (int64_t f = 0, off = 0; f < nf && rc == 0; off += cn_numel(xf[f]), f++) {
            memcpy(bk + off, cn_data(xf[f]), sizeof(double) * (size_t)cn_numel(xf[f]));
            if (!(tan[fi[f]] = cn_from_data(CN_F64, cn_ndim(xf[f]), cn_shape(xf[f]), dir + off)))
                rc = CN_EINVAL;
        }
        cn_tensor *jy = NULL, *jt = NULL;
        if (rc == 0) rc = cn_jvp(fn, ctx, x, tan, ninputs, &jy, &jt, 1);
        if (rc == 0 && jt) rc = read_f64(jt, tv, g.ny);
        /* y(x + eps d) and y(x - eps d). */
        for (int side = 0; side < 2 && rc == 0; side++) {
            double s = side ? -eps : eps;
            for (int64_t f = 0, off = 0; f < nf; off += cn_numel(xf[f]), f++) {
                double *xd = cn_data(xf[f]);
                for (int64_t e = 0; e < cn_numel(xf[f]); e++) xd[e] = bk[off + e] + s * dir[off + e];
            }
            cn_scope_begin();
            cn_tensor *ys;
            rc = eval(&g, &ys);
            if (rc == 0) rc = read_f64(ys, side ? ym : yp, g.ny);
            cn_scope_end();
            for (int64_t f = 0, off = 0; f < nf; off += cn_numel(xf[f]), f++)
                memcpy(cn_data(xf[f]), bk + off, sizeof(double) * (size_t)cn_numel(xf[f]));
        }
        for (int64_t k = 0; k < g.ny && rc == 0; k++)
            compare(res, tv[k], (yp[k] - ym[k]) / (2 * eps), atol, rtol, -1, k);
    }
    cn_scope_end();
    free(g.w);
    free(an);
    free(dir);
    free(tv);
    free(yp);
    free(ym);
    if (rc < 0) return rc;
    res->passed = res->max_ratio <= 1;
    return 0;
}
