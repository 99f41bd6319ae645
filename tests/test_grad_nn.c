/* Gradients of convolution and pooling at explicit points: max pooling's
 * ties and NaN (values from PyTorch 1.13.1's backward, quoted below),
 * forward mode at a tie, second derivatives (Hessian-vector products)
 * through conv2d, conv_transpose2d and the pools against finite
 * differences, and static-graph gradients with a batch size unknown at
 * build time against eager ones. Smooth behaviour on random inputs is
 * checked by test_grad (tests/grad_cases_nn.h). */
#include "harness.h"

static cn_tensor *param(int ndim, const int64_t *shape, const double *v, int layout) {
    cn_tensor *t = th_make(CN_F64, ndim, shape, v, layout);
    cn_set_requires_grad(t, true);
    return t;
}

static void check_values(const char *what, const cn_tensor *t, const double *want, int64_t n) {
    CHECK_MSG(t != NULL, "%s: no tensor: %s", what, cn_last_error());
    if (!t) return;
    CHECK_MSG(cn_numel(t) == n, "%s: %" PRId64 " elements, expected %" PRId64, what, cn_numel(t),
              n);
    for (int64_t k = 0; k < n && k < cn_numel(t); k++)
        CHECK_MSG(th_close(th_at(t, k), want[k], 1e-12, 1e-12),
                  "%s [%" PRId64 "]: %.17g, expected %.17g", what, k, th_at(t, k), want[k]);
}
#define CHECK_VALUES(what, t, ...)                                                                 \
    do {                                                                                           \
        const double w_[] = {__VA_ARGS__};                                                         \
        check_values(what, t, w_, (int64_t)(sizeof w_ / sizeof w_[0]));                           \
    } while (0)

static const cn_pool_opts k2 = {.kernel = {2, 2}};

/* torch: x = [[0, 2, 2, 1], [2, 0, 0, 2]], max_pool2d(x, 2), dy = [3, 5]
 * -> x.grad = [[0, 3, 5, 0], [0, 0, 0, 0]]: each window's first maximum. */
static void test_max_pool_ties(void) {
    const double xv[] = {0, 2, 2, 1, 2, 0, 0, 2};
    for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
        cn_tensor *x = param(CN_SHAPE(1, 1, 2, 4), xv, layout);
        cn_tensor *y = cn_max_pool2d(x, &k2);
        CHECK_VALUES("ties forward", y, 2, 2);
        CHECK_EQ_INT(cn_backward(y, cn_from_data(CN_F64, CN_SHAPE(1, 1, 1, 2), (double[]){3, 5})),
                     0);
        CHECK_VALUES("ties grad", cn_get_grad(x), 0, 3, 5, 0, 0, 0, 0, 0);
    }
    /* overlapping windows (stride 1) share a maximum: its gradient adds up.
     * torch: x = [[1, 5, 1], [1, 1, 1]], max_pool2d(x, 2, 1), dy = [3, 5]
     * -> [[0, 8, 0], [0, 0, 0]] */
    cn_tensor *x = param(CN_SHAPE(1, 1, 2, 3), (double[]){1, 5, 1, 1, 1, 1}, TH_TRANSPOSED);
    cn_tensor *y = cn_max_pool2d(x, &(cn_pool_opts){.kernel = {2, 2}, .stride = {1, 1}});
    CHECK_EQ_INT(cn_backward(y, cn_from_data(CN_F64, CN_SHAPE(1, 1, 1, 2), (double[]){3, 5})), 0);
    CHECK_VALUES("overlap grad", cn_get_grad(x), 0, 8, 0, 0, 0, 0);
    /* padding never wins, even over equal values: torch, all 3, kernel 2,
     * padding 1, dy = [1, 2, 3, 4] -> [[1, 2], [3, 4]] */
    x = param(CN_SHAPE(1, 1, 2, 2), (double[]){3, 3, 3, 3}, TH_CONTIG);
    y = cn_max_pool2d(x, &(cn_pool_opts){.kernel = {2, 2}, .padding = {1, 1}});
    CHECK_EQ_INT(cn_backward(y, cn_reshape(cn_arange(1, 5, 1, CN_F64), CN_SHAPE(1, 1, 2, 2))), 0);
    CHECK_VALUES("padding grad", cn_get_grad(x), 1, 2, 3, 4);
}

/* torch: x = [[1, nan], [nan, 0]], max_pool2d(x, 2) = nan, dy = 1 ->
 * [[0, 0], [1, 0]]: a NaN is the maximum, and a later NaN replaces an
 * earlier one. */
static void test_max_pool_nan(void) {
    cn_tensor *x = param(CN_SHAPE(1, 1, 2, 2), (double[]){1, NAN, NAN, 0}, TH_REVERSED);
    cn_tensor *y = cn_max_pool2d(x, &k2);
    CHECK(y && isnan(th_at(y, 0)));
    CHECK_EQ_INT(cn_backward(y, cn_ones(CN_F64, CN_SHAPE(1, 1, 1, 1))), 0);
    CHECK_VALUES("nan grad", cn_get_grad(x), 0, 0, 1, 0);
}

static int pool_fn(void *ctx, cn_tensor *const *in, int nin, cn_tensor **out, int nout) {
    out[0] = cn_max_pool2d(in[0], &k2);
    return out[0] ? 0 : -1;
}

/* Forward mode at a tie takes the first maximum's tangent. */
static void test_max_pool_jvp(void) {
    cn_tensor *x = cn_from_data(CN_F64, CN_SHAPE(1, 1, 2, 4), (double[]){0, 2, 2, 1, 2, 0, 0, 2});
    cn_tensor *t = cn_from_data(CN_F64, CN_SHAPE(1, 1, 2, 4), (double[]){1, 2, 3, 4, 5, 6, 7, 8});
    cn_tensor *y, *ty;
    CHECK_EQ_INT(cn_jvp(pool_fn, NULL, &x, &t, 1, &y, &ty, 1), 0);
    CHECK_VALUES("jvp", ty, 2, 3);
}

/* ---- second derivatives: d/dp <dL/dx, v> against central differences ---- */

typedef cn_tensor *(*loss_fn)(cn_tensor *x, cn_tensor *p);

/* <dL/dx at (x, p), v>, with the graph kept when create. */
static cn_tensor *gx_dot_v(loss_fn f, cn_tensor *x, cn_tensor *p, cn_tensor *v, bool create) {
    cn_tensor *L = f(x, p), *gx;
    if (cn_grad(&L, NULL, 1, &x, 1, &gx, create ? CN_GRAD_CREATE_GRAPH : 0) != 0) return NULL;
    return cn_sum(cn_mul(gx, v), NULL, 0, false);
}

static void check_hvp(const char *what, loss_fn f, cn_tensor *x, cn_tensor *p) {
    cn_scope_begin();
    cn_set_requires_grad(x, true);
    cn_set_requires_grad(p, true);
    cn_tensor *v = th_random(CN_F64, cn_ndim(x), cn_shape(x), -1, 1, TH_CONTIG, NULL);
    cn_tensor *s = gx_dot_v(f, x, p, v, true), *gp = NULL;
    CHECK_MSG(s && cn_grad(&s, NULL, 1, &p, 1, &gp, CN_GRAD_ALLOW_UNUSED) == 0,
              "%s: second derivative failed: %s", what, cn_last_error());
    const double eps = 1e-6;
    for (int64_t k = 0; gp && k < cn_numel(p); k++) {
        int64_t idx[CN_MAX_DIMS];
        th_unravel(k, cn_ndim(p), cn_shape(p), idx);
        double p0 = cn_get(p, idx);
        cn_no_grad_begin();
        cn_set(p, idx, p0 + eps);
        cn_no_grad_end();
        double hi = cn_item(gx_dot_v(f, x, p, v, false));
        cn_no_grad_begin();
        cn_set(p, idx, p0 - eps);
        cn_no_grad_end();
        double lo = cn_item(gx_dot_v(f, x, p, v, false));
        cn_no_grad_begin();
        cn_set(p, idx, p0);
        cn_no_grad_end();
        double num = (hi - lo) / (2 * eps), ana = th_at(gp, k);
        if (!th_close(ana, num, 1e-5, 1e-6)) {
            CHECK_MSG(0, "%s: element %" PRId64 ": analytic %.10g, numeric %.10g", what, k, ana,
                      num);
            break;
        }
        th_checks++;
    }
    cn_scope_end();
}

static const cn_conv_opts pad1 = {.padding = {1, 1}};

/* L = sum(tanh(conv2d(x, w)) c): smooth, with a non-zero mixed derivative. */
static cn_tensor *conv_loss(cn_tensor *x, cn_tensor *w) {
    cn_tensor *y = cn_tanh(cn_conv2d(x, w, NULL, &(cn_conv_opts){.stride = {2, 1},
                                                                 .padding = {1, 1}}));
    return cn_sum(cn_mul(y, cn_sin(y)), NULL, 0, false);
}
static cn_tensor *convt_loss(cn_tensor *x, cn_tensor *w) {
    cn_conv_opts o = {.stride = {2, 2}, .padding = {1, 0}, .output_padding = {1, 1}};
    return cn_sum(cn_square(cn_tanh(cn_conv_transpose2d(x, w, NULL, &o))), NULL, 0, false);
}
/* x's own second derivative through a pool (p scales the input). */
static cn_tensor *max_pool_loss(cn_tensor *x, cn_tensor *p) {
    cn_tensor *y = cn_max_pool2d(cn_mul(x, p), &(cn_pool_opts){.kernel = {3, 3}, .stride = {2, 2},
                                                                 .padding = {1, 1}});
    return cn_sum(cn_pow_scalar(y, 3), NULL, 0, false);
}
static cn_tensor *avg_pool_loss(cn_tensor *x, cn_tensor *p) {
    cn_tensor *y = cn_avg_pool2d(cn_mul(x, p), &(cn_pool_opts){.kernel = {3, 3}, .stride = {2, 2},
                                                                 .padding = {1, 1},
                                                                 .ceil_mode = true});
    cn_tensor *z = cn_adaptive_avg_pool2d(cn_mul(x, p), 2, 3);
    return cn_add(cn_sum(cn_pow_scalar(y, 3), NULL, 0, false),
                  cn_sum(cn_pow_scalar(z, 3), NULL, 0, false));
}

static void test_second_order(void) {
    th_seed(41);
    check_hvp("conv2d: d/dw <dL/dx, v>", conv_loss,
              th_random(CN_F64, CN_SHAPE(2, 2, 5, 4), -1, 1, TH_TRANSPOSED, NULL),
              th_random(CN_F64, CN_SHAPE(3, 2, 3, 2), -1, 1, TH_CONTIG, NULL));
    check_hvp("conv2d: d/dx <dL/dx, v>", conv_loss,
              th_random(CN_F64, CN_SHAPE(1, 2, 4, 4), -1, 1, TH_CONTIG, NULL),
              th_random(CN_F64, CN_SHAPE(2, 2, 3, 3), -1, 1, TH_CONTIG, NULL));
    check_hvp("conv_transpose2d: d/dw <dL/dx, v>", convt_loss,
              th_random(CN_F64, CN_SHAPE(2, 2, 3, 3), -1, 1, TH_STRIDED, NULL),
              th_random(CN_F64, CN_SHAPE(2, 2, 3, 2), -1, 1, TH_CONTIG, NULL));
    check_hvp("max_pool2d: d/dp <dL/dx, v>", max_pool_loss,
              th_random(CN_F64, CN_SHAPE(1, 2, 5, 5), -1, 1, TH_CONTIG, NULL),
              th_random(CN_F64, CN_SHAPE(1, 2, 1, 1), 0.5, 1.5, TH_CONTIG, NULL));
    check_hvp("avg_pool2d, adaptive: d/dp <dL/dx, v>", avg_pool_loss,
              th_random(CN_F64, CN_SHAPE(1, 2, 5, 6), -1, 1, TH_REVERSED, NULL),
              th_random(CN_F64, CN_SHAPE(1, 2, 1, 1), 0.5, 1.5, TH_CONTIG, NULL));
}

/* A small CNN, its loss built once on a placeholder of unknown batch size,
 * run for a batch of 3, against eager backward. */
static cn_tensor *cnn(cn_tensor *x, cn_tensor *w1, cn_tensor *b1, cn_tensor *w2) {
    cn_tensor *h = cn_max_pool2d(cn_relu(cn_conv2d(x, w1, b1, &pad1)), &k2);
    h = cn_avg_pool2d(cn_conv2d(h, w2, NULL, &(cn_conv_opts){.groups = 2}),
                      &(cn_pool_opts){.kernel = {2, 2}, .stride = {1, 1}});
    h = cn_conv_transpose2d(h, cn_transpose(w2, 2, 3), NULL,
                            &(cn_conv_opts){.stride = {2, 2}, .groups = 2});
    return cn_sum(cn_square(cn_adaptive_avg_pool2d(h, 2, 2)), NULL, 0, false);
}

static void test_static_gradient(void) {
    th_seed(43);
    cn_tensor *w1 = th_random(CN_F64, CN_SHAPE(4, 2, 3, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *b1 = th_random(CN_F64, CN_SHAPE(4), -1, 1, TH_CONTIG, NULL);
    cn_tensor *w2 = th_random(CN_F64, CN_SHAPE(4, 2, 2, 2), -1, 1, TH_CONTIG, NULL);
    cn_tensor *params[3] = {w1, b1, w2};
    for (int i = 0; i < 3; i++) cn_set_requires_grad(params[i], true);
    cn_tensor *xv = th_random(CN_F64, CN_SHAPE(3, 2, 8, 8), -1, 1, TH_CONTIG, NULL);

    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F64, CN_SHAPE(-1, 2, 8, 8));
    CHECK_EQ_INT(cn_set_requires_grad(x, true), 0);
    cn_tensor *loss = cnn(x, w1, b1, w2);
    cn_tensor *grads[4];
    CHECK_EQ_INT(cn_grad(&loss, NULL, 1, params, 3, grads, 0), 0);
    CHECK_EQ_INT(cn_grad(&loss, NULL, 1, &x, 1, &grads[3], 0), 0);
    cn_tensor *outs[5] = {loss, grads[0], grads[1], grads[2], grads[3]};
    cn_program *p = cn_compile(g, outs, 5, NULL);
    CHECK(p != NULL);
    cn_tensor *res[5] = {NULL};
    CHECK_EQ_INT(cn_run(p, &x, &xv, 1, res, 5), 0);

    cn_set_requires_grad(xv, true);
    cn_tensor *eloss = cnn(xv, w1, b1, w2);
    CHECK_EQ_INT(cn_backward(eloss, NULL), 0);
    CHECK(res[0] && cn_allclose(res[0], eloss, 1e-12, 0));
    for (int i = 0; i < 3; i++)
        CHECK_MSG(res[i + 1] && cn_allclose(res[i + 1], cn_get_grad(params[i]), 1e-12, 1e-14),
                  "parameter %d", i);
    CHECK(res[4] && cn_allclose(res[4], cn_get_grad(xv), 1e-12, 1e-14));
    cn_program_free(p);
    cn_graph_free(g);
}

int main(void) {
    RUN(test_max_pool_ties);
    RUN(test_max_pool_nan);
    RUN(test_max_pool_jvp);
    RUN(test_second_order);
    RUN(test_static_gradient);
    return th_summary();
}
