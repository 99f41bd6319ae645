/* Gradient checks against central differences in f64.
 *
 * A grad_case names the op it covers, how to make its inputs, and a function
 * that applies the op through the public API. For each case, in several
 * memory layouts, the check compares:
 *   - reverse mode: cn_grad of sum(out * w) (w random) with respect to each
 *     float input, against (L(x + eps e_k) - L(x - eps e_k)) / 2 eps;
 *   - forward mode: cn_jvp's output tangent for random input tangents v,
 *     against (f(x + eps v) - f(x - eps v)) / 2 eps.
 * The test driver (test_grad.c) also fails for any differentiable op in the
 * op table that has no case, so a new op without a gradient test fails. */
#ifndef CN_TEST_GRADCHECK_H
#define CN_TEST_GRADCHECK_H

#include "harness.h"

#define GC_MAX_IN 4

typedef struct gc_input {
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    double lo, hi;   /* uniform values in [lo, hi) */
    double gap;      /* > 0: keep |x| >= gap (away from a kink at 0) */
    cn_dtype dtype;  /* 0 (CN_F32) means f64 here: every float input is f64 */
    bool is_index;   /* an integer input (i64) with values in [0, index_max) */
    int64_t index_max;
    bool no_grad;    /* a float input that is not differentiated (e.g. a mask) */
    bool fixed_layout; /* keep contiguous (inputs whose layout the fn relies on) */
} gc_input;

typedef struct grad_case {
    const char *op;   /* the op-table name this case covers */
    const char *name; /* a label */
    int nin;
    gc_input in[GC_MAX_IN];
    cn_tensor *(*fn)(cn_tensor **x);
    double rtol, atol; /* 0: 1e-5 and 1e-6 */
    bool no_jvp;       /* only when the op documents that it has no forward rule */
    double eps;        /* finite-difference step; 0: 1e-6 (cases that round through f32
                          need a larger one, e.g. 1e-2) */
} grad_case;

#define GC_SHAPE(...) .ndim = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                      .shape = {__VA_ARGS__}

/* ---- the checker ---- */

static cn_tensor *gc_make_input(const gc_input *s, int layout) {
    int64_t n = th_numel(s->ndim, s->shape);
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t k = 0; k < n; k++) {
        if (s->is_index) {
            v[k] = (double)th_randint(0, s->index_max);
        } else {
            double x = th_uniform(s->lo, s->hi);
            if (s->gap > 0 && fabs(x) < s->gap) x = x < 0 ? -s->gap - fabs(x) : s->gap + fabs(x);
            v[k] = x;
        }
    }
    cn_dtype dt = s->is_index ? CN_I64 : CN_F64;
    cn_tensor *t = th_make(dt, s->ndim, s->shape, v, s->fixed_layout ? TH_CONTIG : layout);
    free(v);
    return t;
}

static bool gc_differentiable(const gc_input *s) { return !s->is_index && !s->no_grad; }

/* L(x) = sum(f(x) * w), evaluated without recording. */
static double gc_loss(const grad_case *c, cn_tensor **x, cn_tensor *w) {
    cn_scope_begin();
    bool prev = cn_set_grad_enabled(false);
    cn_tensor *y = c->fn(x);
    double r = NAN;
    if (y) {
        cn_tensor *yw = cn_mul(cn_cast(y, CN_F64), w);
        r = cn_item(cn_sum(yw, NULL, 0, false));
    }
    cn_set_grad_enabled(prev);
    cn_scope_end();
    return r;
}

/* Element k of t (row-major), read and written through the accessors. */
static double gc_get(cn_tensor *t, int64_t k) { return th_at(t, k); }
static void gc_set(cn_tensor *t, int64_t k, double v) {
    int64_t idx[CN_MAX_DIMS];
    th_unravel(k, cn_ndim(t), cn_shape(t), idx);
    cn_no_grad_begin(); /* perturbing a leaf that requires a gradient */
    cn_set(t, idx, v);
    cn_no_grad_end();
}

static int gc_jvp_fn(void *ctx, cn_tensor *const *in, int nin, cn_tensor **out, int nout) {
    const grad_case *c = ctx;
    (void)nin;
    (void)nout;
    out[0] = c->fn((cn_tensor **)in);
    return out[0] ? 0 : -1;
}

/* The case as a static graph (placeholders of the inputs' shapes, cn_grad,
 * cn_compile, cn_run) gives the eager value and gradients. */
static void gc_check_static(const grad_case *c) {
    cn_scope_begin();
    cn_tensor *x[GC_MAX_IN], *ph[GC_MAX_IN], *dx[GC_MAX_IN], *dph[GC_MAX_IN];
    int nd = 0;
    cn_graph *g = cn_graph_new();
    for (int i = 0; i < c->nin; i++) {
        x[i] = gc_make_input(&c->in[i], TH_CONTIG);
        ph[i] = cn_placeholder(g, "x", cn_tensor_dtype(x[i]), cn_ndim(x[i]), cn_shape(x[i]));
        if (gc_differentiable(&c->in[i])) {
            cn_set_requires_grad(x[i], true);
            cn_set_requires_grad(ph[i], true);
            dx[nd] = x[i];
            dph[nd++] = ph[i];
        }
    }
    cn_tensor *y = c->fn(x), *sy = c->fn(ph);
    CHECK_MSG(y && sy, "%s/%s: static build failed: %s", c->op, c->name, cn_last_error());
    if (!y || !sy) goto out;
    cn_tensor *w = th_random(CN_F64, cn_ndim(y), cn_shape(y), -1, 1, TH_CONTIG, NULL);
    cn_tensor *loss = cn_sum(cn_mul(cn_cast(y, CN_F64), w), NULL, 0, false);
    cn_tensor *sloss = cn_sum(cn_mul(cn_cast(sy, CN_F64), w), NULL, 0, false);
    cn_tensor *eg[GC_MAX_IN], *outs[GC_MAX_IN + 1], *res[GC_MAX_IN + 1];
    outs[0] = sy;
    int rc = nd ? cn_grad(&loss, NULL, 1, dx, nd, eg, CN_GRAD_ALLOW_UNUSED) : 0;
    int src = nd ? cn_grad(&sloss, NULL, 1, dph, nd, outs + 1, CN_GRAD_ALLOW_UNUSED) : 0;
    CHECK_MSG(rc == 0 && src == 0, "%s/%s: static grad failed: %s", c->op, c->name,
              cn_last_error());
    if (rc || src) goto out;
    /* Unused inputs have no gradient subgraph: fetch only the others. */
    int nout = 1, map[GC_MAX_IN + 1];
    for (int d = 0; d < nd; d++)
        if (outs[d + 1]) {
            map[nout] = d;
            outs[nout++] = outs[d + 1];
        }
    cn_program *p = cn_compile(g, outs, nout, NULL);
    rc = cn_run(p, ph, x, c->nin, res, nout);
    CHECK_MSG(rc == 0, "%s/%s: static run failed: %s", c->op, c->name, cn_last_error());
    if (rc == 0) {
        CHECK_MSG(cn_allclose(res[0], y, 1e-12, 1e-12), "%s/%s: static value differs from eager",
                  c->op, c->name);
        for (int k = 1; k < nout; k++)
            CHECK_MSG(eg[map[k]] && cn_allclose(res[k], eg[map[k]], 1e-12, 1e-12),
                      "%s/%s: static gradient for input %d differs from eager", c->op, c->name,
                      map[k]);
    }
    cn_program_free(p);
out:
    cn_graph_free(g);
    cn_scope_end();
}

static int gc_check_case(const grad_case *c, int layout) {
    int failures_before = th_failures;
    double rtol = c->rtol > 0 ? c->rtol : 1e-5, atol = c->atol > 0 ? c->atol : 1e-6;
    const double eps = c->eps > 0 ? c->eps : 1e-6;
    cn_scope_begin();
    cn_tensor *x[GC_MAX_IN];
    for (int i = 0; i < c->nin; i++) {
        x[i] = gc_make_input(&c->in[i], layout);
        if (gc_differentiable(&c->in[i])) cn_set_requires_grad(x[i], true);
    }
    cn_tensor *y = c->fn(x);
    CHECK_MSG(y != NULL, "%s/%s: forward failed: %s", c->op, c->name, cn_last_error());
    if (!y) goto out;
    cn_tensor *w = th_random(CN_F64, cn_ndim(y), cn_shape(y), -1, 1, TH_CONTIG, NULL);
    cn_tensor *loss = cn_sum(cn_mul(cn_cast(y, CN_F64), w), NULL, 0, false);

    /* Reverse mode. */
    cn_tensor *diff_in[GC_MAX_IN], *grads[GC_MAX_IN];
    int nd = 0, map[GC_MAX_IN];
    for (int i = 0; i < c->nin; i++)
        if (gc_differentiable(&c->in[i])) {
            map[nd] = i;
            diff_in[nd++] = x[i];
        }
    if (nd == 0) goto out;
    int rc = cn_grad(&loss, NULL, 1, diff_in, nd, grads, CN_GRAD_ALLOW_UNUSED);
    CHECK_MSG(rc == 0, "%s/%s: grad failed: %s", c->op, c->name, cn_last_error());
    if (rc != 0) goto out;
    for (int d = 0; d < nd && th_failures == failures_before; d++) {
        cn_tensor *xi = x[map[d]];
        int64_t n = cn_numel(xi);
        for (int64_t k = 0; k < n; k++) {
            double x0 = gc_get(xi, k);
            gc_set(xi, k, x0 + eps);
            double lp = gc_loss(c, x, w);
            gc_set(xi, k, x0 - eps);
            double lm = gc_loss(c, x, w);
            gc_set(xi, k, x0);
            double num = (lp - lm) / (2 * eps);
            double ana = grads[d] ? gc_get(grads[d], k) : 0.0;
            if (!th_close(ana, num, rtol, atol)) {
                char b[160];
                CHECK_MSG(0, "%s/%s layout %d: d/d input %d [%" PRId64 "] of %s: analytic %.9g, "
                          "numeric %.9g",
                          c->op, c->name, layout, map[d], k, cn_shape_str(xi, b, sizeof b), ana,
                          num);
                break;
            }
            th_checks++;
        }
    }

    /* Forward mode. */
    if (!c->no_jvp) {
        cn_tensor *tan[GC_MAX_IN] = {NULL};
        for (int i = 0; i < c->nin; i++)
            if (gc_differentiable(&c->in[i]))
                tan[i] = th_random(CN_F64, cn_ndim(x[i]), cn_shape(x[i]), -1, 1, TH_CONTIG, NULL);
        cn_tensor *out = NULL, *out_t = NULL;
        rc = cn_jvp(gc_jvp_fn, (void *)c, x, tan, c->nin, &out, &out_t, 1);
        CHECK_MSG(rc == 0, "%s/%s: jvp failed: %s", c->op, c->name, cn_last_error());
        if (rc == 0) {
            /* numeric: (f(x + eps v) - f(x - eps v)) / 2 eps, elementwise */
            cn_tensor *xp[GC_MAX_IN], *xm[GC_MAX_IN];
            for (int i = 0; i < c->nin; i++) {
                if (tan[i]) {
                    xp[i] = cn_add(x[i], cn_mul_scalar(tan[i], eps));
                    xm[i] = cn_sub(x[i], cn_mul_scalar(tan[i], eps));
                } else {
                    xp[i] = xm[i] = x[i];
                }
            }
            bool prev = cn_set_grad_enabled(false);
            cn_tensor *yp = cn_cast(c->fn(xp), CN_F64), *ym = cn_cast(c->fn(xm), CN_F64);
            cn_set_grad_enabled(prev);
            cn_tensor *num = cn_div_scalar(cn_sub(yp, ym), 2 * eps);
            int64_t n = cn_numel(out_t);
            CHECK_MSG(num && cn_numel(num) == n, "%s/%s: jvp tangent has %" PRId64 " elements",
                      c->op, c->name, n);
            for (int64_t k = 0; num && k < n; k++) {
                double a = gc_get(out_t, k), b = gc_get(num, k);
                if (!th_close(a, b, rtol, atol)) {
                    CHECK_MSG(0, "%s/%s layout %d: jvp [%" PRId64 "]: analytic %.9g, numeric %.9g",
                              c->op, c->name, layout, k, a, b);
                    break;
                }
                th_checks++;
            }
        }
    }
out:
    cn_scope_end();
    return th_failures == failures_before;
}

#endif
