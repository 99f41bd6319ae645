/* Gradients of matmul and of the joining, indexing and padding ops at
 * explicit points, against values PyTorch 1.13.1 gives in f64
 * (torch.autograd.grad, F.pad, Tensor.gather, ...) or worked out by hand:
 * mirrored and replicated borders accumulating onto the elements they copy,
 * repeated indices accumulating, broadcast batch axes summed, second
 * derivatives, forward mode, static-graph gradients with sizes unknown at
 * build time, and the ops that carry no gradient. Smooth behaviour on random
 * inputs is checked against finite differences by test_grad. */
#include "harness.h"

static cn_tensor *param(int ndim, const int64_t *shape, const double *v, int layout) {
    cn_tensor *t = th_make(CN_F64, ndim, shape, v, layout);
    cn_set_requires_grad(t, true);
    return t;
}

/* 1, 2, 3, ... shaped like t (the weights of L = sum(w * y)). */
static cn_tensor *iota_like(cn_tensor *t) {
    int64_t n = cn_numel(t);
    return cn_reshape(cn_arange(1, (double)n + 1, 1, CN_F64), cn_ndim(t), cn_shape(t));
}

static void check_values(const char *what, cn_tensor *t, const double *want, int64_t n) {
    CHECK_MSG(t != NULL, "%s: no tensor: %s", what, cn_last_error());
    if (!t) return;
    CHECK_MSG(cn_numel(t) == n, "%s: %" PRId64 " elements, expected %" PRId64, what, cn_numel(t),
              n);
    for (int64_t k = 0; k < n && k < cn_numel(t); k++)
        CHECK_MSG(th_close(th_at(t, k), want[k], 1e-12, 1e-12), "%s [%" PRId64 "]: %.17g, expected %.17g",
                  what, k, th_at(t, k), want[k]);
}
#define CHECK_VALUES(what, t, ...)                                                                 \
    do {                                                                                           \
        const double w_[] = {__VA_ARGS__};                                                         \
        check_values(what, t, w_, (int64_t)(sizeof w_ / sizeof w_[0]));                           \
    } while (0)

static const int64_t pads_3_2[] = {3, 2};

/* Reflect: y = [x3 x2 x1 | x0..x4 | x3 x2]; each mirrored element adds its
 * weight onto the element it copies. In every input layout. */
static void test_reflect_pad(void) {
    const double xv[] = {1, 2, 3, 4, 5};
    for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
        cn_tensor *x = param(CN_SHAPE(5), xv, layout);
        cn_tensor *y = cn_pad(x, pads_3_2, 2, CN_PAD_REFLECT, 0);
        CHECK_VALUES("reflect 1-D forward", y, 4, 3, 2, 1, 2, 3, 4, 5, 4, 3);
        CHECK_EQ_INT(cn_backward(y, iota_like(y)), 0);
        CHECK_VALUES("reflect 1-D grad", cn_get_grad(x), 4, 8, 18, 17, 8);
    }
    /* 2-D, (2, 1) on the last axis and (1, 2) on the first: corners are
     * mirrored twice. */
    double x2[12];
    for (int i = 0; i < 12; i++) x2[i] = i + 1;
    cn_tensor *x = param(CN_SHAPE(3, 4), x2, TH_TRANSPOSED);
    cn_tensor *y = cn_pad(x, (int64_t[]){2, 1, 1, 2}, 4, CN_PAD_REFLECT, 0);
    CHECK_SHAPE(y, 6, 7);
    CHECK_EQ_INT(cn_backward(y, iota_like(y)), 0);
    CHECK_VALUES("reflect 2-D grad", cn_get_grad(x), 48, 96, 152, 54, 51, 102, 165, 60, 24, 48,
                 76, 27);
    /* A negative pad crops before the reflection: y = [x2 .. x5 x4 x3 x2 x1]. */
    double x6[] = {1, 2, 3, 4, 5, 6};
    cn_tensor *xn = param(CN_SHAPE(6), x6, TH_CONTIG);
    cn_tensor *yn = cn_pad(xn, (int64_t[]){-2, 4}, 2, CN_PAD_REFLECT, 0);
    CHECK_VALUES("reflect crop forward", yn, 3, 4, 5, 6, 5, 4, 3, 2);
    CHECK_EQ_INT(cn_backward(yn, iota_like(yn)), 0);
    CHECK_VALUES("reflect crop grad", cn_get_grad(xn), 0, 8, 8, 8, 8, 4);
}

/* Replicate: every border element adds onto the end it copies, also when
 * the pads are longer than the axis. */
static void test_replicate_pad(void) {
    cn_tensor *x = param(CN_SHAPE(2), ((double[]){1, 2}), TH_CONTIG);
    cn_tensor *y = cn_pad(x, (int64_t[]){4, 5}, 2, CN_PAD_REPLICATE, 0);
    CHECK_EQ_INT(cn_backward(y, iota_like(y)), 0);
    CHECK_VALUES("replicate 1-D grad", cn_get_grad(x), 15, 51); /* 1+..+5, 6+..+11 */
    double v[6] = {1, 2, 3, 4, 5, 6};
    cn_tensor *x2 = param(CN_SHAPE(2, 3), v, TH_REVERSED);
    cn_tensor *y2 = cn_pad(x2, (int64_t[]){2, 3, 1, 2}, 4, CN_PAD_REPLICATE, 0);
    CHECK_SHAPE(y2, 5, 8);
    CHECK_EQ_INT(cn_backward(y2, iota_like(y2)), 0);
    CHECK_VALUES("replicate 2-D grad", cn_get_grad(x2), 36, 16, 84, 234, 84, 366);
}

/* Constant: the padding gets no gradient, cropped elements get zero. */
static void test_constant_pad(void) {
    cn_tensor *x = param(CN_SHAPE(5), ((double[]){1, 2, 3, 4, 5}), TH_STRIDED);
    cn_tensor *y = cn_pad(x, (int64_t[]){1, -2}, 2, CN_PAD_CONSTANT, 3);
    CHECK_VALUES("constant forward", y, 3, 1, 2, 3);
    CHECK_EQ_INT(cn_backward(y, iota_like(y)), 0);
    CHECK_VALUES("constant grad", cn_get_grad(x), 2, 3, 4, 0, 0);
}

/* Forward mode of pad: the tangent is padded the same way, with zeros for
 * the constant (which does not depend on x). */
static int pad_fn(void *ctx, cn_tensor *const *in, int nin, cn_tensor **out, int nout) {
    (void)nin, (void)nout;
    out[0] = cn_pad(in[0], pads_3_2, 2, *(const cn_pad_mode *)ctx, 7);
    return out[0] ? 0 : -1;
}

static void test_pad_jvp(void) {
    cn_tensor *x = th_make(CN_F64, CN_SHAPE(5), (double[]){9, 9, 9, 9, 9}, TH_CONTIG);
    cn_tensor *v = th_make(CN_F64, CN_SHAPE(5), (double[]){1, 2, 3, 4, 5}, TH_REVERSED);
    cn_tensor *y, *t;
    cn_pad_mode m = CN_PAD_REFLECT;
    CHECK_EQ_INT(cn_jvp(pad_fn, &m, &x, &v, 1, &y, &t, 1), 0);
    CHECK_VALUES("reflect jvp", t, 4, 3, 2, 1, 2, 3, 4, 5, 4, 3);
    m = CN_PAD_REPLICATE;
    CHECK_EQ_INT(cn_jvp(pad_fn, &m, &x, &v, 1, &y, &t, 1), 0);
    CHECK_VALUES("replicate jvp", t, 1, 1, 1, 1, 2, 3, 4, 5, 5, 5);
    m = CN_PAD_CONSTANT;
    CHECK_EQ_INT(cn_jvp(pad_fn, &m, &x, &v, 1, &y, &t, 1), 0);
    CHECK_VALUES("constant jvp", t, 0, 0, 0, 1, 2, 3, 4, 5, 0, 0);
    CHECK_VALUES("constant forward", y, 7, 7, 7, 9, 9, 9, 9, 9, 7, 7);
}

/* Repeated indices accumulate. */
static void test_gather_index_select(void) {
    cn_tensor *x = param(CN_SHAPE(3, 2), ((double[]){0, 0, 0, 0, 0, 0}), TH_TRANSPOSED);
    cn_tensor *idx = th_make(CN_I64, CN_SHAPE(4, 2), (double[]){0, 1, 0, 0, 2, 0, 0, 1}, TH_MIXED);
    cn_tensor *y = cn_gather(x, 0, idx);
    CHECK_EQ_INT(cn_backward(y, iota_like(y)), 0);
    CHECK_VALUES("gather grad", cn_get_grad(x), 11, 10, 0, 10, 5, 0);

    cn_tensor *x2 = param(CN_SHAPE(2, 3), ((double[]){0, 0, 0, 0, 0, 0}), TH_STRIDED);
    cn_tensor *i32 = th_make(CN_I32, CN_SHAPE(4), (double[]){2, 0, 2, 2}, TH_REVERSED);
    cn_tensor *y2 = cn_index_select(x2, 1, i32);
    CHECK_EQ_INT(cn_backward(y2, iota_like(y2)), 0);
    CHECK_VALUES("index_select grad", cn_get_grad(x2), 2, 0, 8, 6, 0, 20);

    /* index_select along the first axis with a rank-0 index */
    cn_tensor *x3 = param(CN_SHAPE(3, 2), ((double[]){0, 0, 0, 0, 0, 0}), TH_CONTIG);
    cn_tensor *y3 = cn_index_select(x3, 0, cn_scalar(CN_I64, 1));
    CHECK_SHAPE(y3, 1, 2);
    CHECK_EQ_INT(cn_backward(y3, iota_like(y3)), 0);
    CHECK_VALUES("index_select rank-0 index grad", cn_get_grad(x3), 0, 0, 1, 2, 0, 0);
}

/* scatter_add: the base passes the gradient through; src reads it back at
 * the index, and the part of src beyond the index gets zero. (PyTorch 1.13
 * refuses to differentiate that case: its gradient has the index's shape.) */
static void test_scatter_add(void) {
    cn_tensor *x = param(CN_SHAPE(3, 2), ((double[]){0, 0, 0, 0, 0, 0}), TH_CONTIG);
    cn_tensor *src = param(CN_SHAPE(3, 3), ((double[]){1, 2, 3, 4, 5, 6, 7, 8, 9}), TH_TRANSPOSED);
    cn_tensor *idx = th_make(CN_I64, CN_SHAPE(2, 2), (double[]){0, 2, 0, 0}, TH_CONTIG);
    cn_tensor *y = cn_scatter_add(x, 0, idx, src);
    CHECK_VALUES("scatter_add forward", y, 5, 5, 0, 0, 0, 2);
    CHECK_EQ_INT(cn_backward(y, iota_like(y)), 0);
    CHECK_VALUES("scatter_add base grad", cn_get_grad(x), 1, 2, 3, 4, 5, 6);
    /* torch gives [1, 6, 1, 2] for the index-shaped part */
    CHECK_VALUES("scatter_add src grad", cn_get_grad(src), 1, 6, 0, 1, 2, 0, 0, 0, 0);
}

static void test_concat(void) {
    cn_tensor *a = param(CN_SHAPE(2, 1), ((double[]){0, 0}), TH_CONTIG);
    cn_tensor *b = param(CN_SHAPE(2, 3), ((double[]){0, 0, 0, 0, 0, 0}), TH_TRANSPOSED);
    cn_tensor *c = param(CN_SHAPE(2, 2), ((double[]){0, 0, 0, 0}), TH_REVERSED);
    cn_tensor *y = cn_concat((cn_tensor *[]){a, b, c}, 3, 1);
    CHECK_SHAPE(y, 2, 6);
    CHECK_EQ_INT(cn_backward(y, iota_like(y)), 0);
    CHECK_VALUES("concat grad 0", cn_get_grad(a), 1, 7);
    CHECK_VALUES("concat grad 1", cn_get_grad(b), 2, 3, 4, 8, 9, 10);
    CHECK_VALUES("concat grad 2", cn_get_grad(c), 5, 6, 11, 12);
}

/* (2,1,3,4) @ (5,4,2): a's batch axis of 1 and b's missing one are summed. */
static void test_matmul_broadcast(void) {
    double av[24], bv[40];
    for (int i = 0; i < 24; i++) av[i] = i / 10.0;
    for (int i = 0; i < 40; i++) bv[i] = i / 7.0 - 2;
    cn_tensor *a = param(CN_SHAPE(2, 1, 3, 4), av, TH_MIXED);
    cn_tensor *b = param(CN_SHAPE(5, 4, 2), bv, TH_STRIDED);
    cn_tensor *c = cn_matmul(a, b);
    CHECK_SHAPE(c, 2, 5, 3, 2);
    cn_tensor *w = cn_sin(cn_sub_scalar(iota_like(c), 1));
    CHECK_EQ_INT(cn_backward(c, w), 0);
    CHECK_VALUES("matmul broadcast grad a", cn_get_grad(a), -5.290932065975028,
                 -5.444190335991929, -5.597448606008831, -5.750706876025731, 4.514353075009357,
                 6.674731540938062, 8.835110006866767, 10.99548847279547, 1.5336645635310104,
                 -0.11114649513368557, -1.755957553798381, -3.4007686124630765,
                 -3.328921196643884, -5.6307023632306406, -7.9324835298173975,
                 -10.234264696404153, -3.011416712751373, -1.8678235609564244,
                 -0.7242304091614751, 0.41936274263347384, 5.835304273717241, 7.185280095471111,
                 8.53525591722498, 9.885231738978847);
    CHECK_VALUES("matmul broadcast grad b", cn_get_grad(b), 0.5130870877992486,
                 -0.45204295371491643, 0.5375843552779092, -0.43290712736564896,
                 0.5620816227565699, -0.41377130101638104, 0.5865788902352301,
                 -0.3946354746671137, 0.7348078326998322, -0.18256325072713697,
                 0.7563702850279026, -0.15948830457391489, 0.7779327373559732,
                 -0.13641335842069263, 0.7994951896840434, -0.11333841226747055,
                 0.8979942069134157, 0.10145933614992075, 0.9149041915002116,
                 0.12663526512541545, 0.9318141760870073, 0.15181119410091015,
                 0.9487241606738029, 0.17698712307640418, 0.9896468774250125,
                 0.37739973047598757, 1.0005573545928563, 0.40267114220494504, 1.0114678317607,
                 0.4279425539339028, 1.0223783089285434, 0.4532139656628599, 1.002464845046212,
                 0.6232766786358791, 1.0065066924388977, 0.6466304669480896, 1.0105485398315834,
                 0.6699842552603003, 1.0145903872242688, 0.6933380435725104);
}

/* The 1-D cases by hand: the gradients keep the operands' shapes. */
static void test_matmul_vectors(void) {
    cn_tensor *u = param(CN_SHAPE(3), ((double[]){1, 2, 3}), TH_REVERSED);
    cn_tensor *v = param(CN_SHAPE(3), ((double[]){4, -5, 6}), TH_STRIDED);
    cn_tensor *d = cn_matmul(u, v);
    CHECK_EQ_INT(cn_ndim(d), 0);
    CHECK_EQ_INT(cn_backward(cn_mul_scalar(d, 2), NULL), 0);
    CHECK_VALUES("dot grad u", cn_get_grad(u), 8, -10, 12);
    CHECK_VALUES("dot grad v", cn_get_grad(v), 2, 4, 6);

    /* M [2,3] @ v: dM[i][j] = w[i] v[j], dv[j] = sum_i w[i] M[i][j] */
    cn_tensor *m = param(CN_SHAPE(2, 3), ((double[]){1, 0, -1, 2, 1, 0}), TH_TRANSPOSED);
    cn_zero_grad(v);
    cn_tensor *mv = cn_matmul(m, v);
    CHECK_SHAPE(mv, 2);
    CHECK_EQ_INT(cn_backward(mv, iota_like(mv)), 0);
    CHECK_VALUES("mv grad m", cn_get_grad(m), 4, -5, 6, 8, -10, 12);
    CHECK_VALUES("mv grad v", cn_get_grad(v), 5, 2, -1);

    /* u @ N [3,2]: du[i] = sum_j N[i][j] w[j], dN[i][j] = u[i] w[j] */
    cn_tensor *n = param(CN_SHAPE(3, 2), ((double[]){1, 2, 3, 4, 5, 6}), TH_CONTIG);
    cn_zero_grad(u);
    cn_tensor *un = cn_matmul(u, n);
    CHECK_SHAPE(un, 2);
    CHECK_EQ_INT(cn_backward(un, iota_like(un)), 0);
    CHECK_VALUES("vm grad u", cn_get_grad(u), 5, 11, 17);
    CHECK_VALUES("vm grad n", cn_get_grad(n), 1, 2, 2, 4, 3, 6);

    /* An f32 product has an f32 gradient. */
    cn_tensor *a = cn_from_data(CN_F32, CN_SHAPE(2, 2), (float[]){1, 2, 3, 4});
    cn_set_requires_grad(a, true);
    cn_tensor *b = cn_from_data(CN_F32, CN_SHAPE(2), (float[]){0.5f, -1});
    CHECK_EQ_INT(cn_backward(cn_sum(cn_matmul(a, b), NULL, 0, false), NULL), 0);
    CHECK(cn_get_grad(a) && cn_tensor_dtype(cn_get_grad(a)) == CN_F32);
    CHECK_VALUES("f32 grad", cn_get_grad(a), 0.5, -1, 0.5, -1);
}

/* Forward mode of matmul: ta @ b + a @ tb. */
static int mm_fn(void *ctx, cn_tensor *const *in, int nin, cn_tensor **out, int nout) {
    (void)ctx, (void)nin, (void)nout;
    out[0] = cn_matmul(in[0], in[1]);
    return out[0] ? 0 : -1;
}

static void test_matmul_jvp(void) {
    cn_tensor *in[2] = {th_make(CN_F64, CN_SHAPE(2, 2), (double[]){1, 2, 3, 4}, TH_CONTIG),
                        th_make(CN_F64, CN_SHAPE(2), (double[]){5, 6}, TH_REVERSED)};
    cn_tensor *tan[2] = {th_make(CN_F64, CN_SHAPE(2, 2), (double[]){1, 0, 0, -1}, TH_CONTIG),
                         th_make(CN_F64, CN_SHAPE(2), (double[]){1, 1}, TH_CONTIG)};
    cn_tensor *y, *t;
    CHECK_EQ_INT(cn_jvp(mm_fn, NULL, in, tan, 2, &y, &t, 1), 0);
    CHECK_VALUES("matmul forward", y, 17, 39);
    CHECK_VALUES("matmul jvp", t, 5 + 3, -6 + 7);
    tan[0] = NULL; /* one operand constant */
    CHECK_EQ_INT(cn_jvp(mm_fn, NULL, in, tan, 2, &y, &t, 1), 0);
    CHECK_VALUES("matmul jvp, b only", t, 3, 7);
}

/* Second derivatives: the rules are built from differentiable ops. */
static void test_second_order(void) {
    /* L = sum(w * reflect_pad(x)^2); Hessian-vector product with v. */
    cn_tensor *x = param(CN_SHAPE(5), ((double[]){0.5, -1, 2, 0.25, -0.75}), TH_CONTIG);
    cn_tensor *y = cn_pad(x, pads_3_2, 2, CN_PAD_REFLECT, 0);
    cn_tensor *L = cn_sum(cn_mul(iota_like(y), cn_square(y)), NULL, 0, false);
    cn_tensor *g;
    CHECK_EQ_INT(cn_grad(&L, NULL, 1, &x, 1, &g, CN_GRAD_CREATE_GRAPH), 0);
    CHECK_VALUES("pad grad", g, 4, -16, 72, 8.5, -12);
    cn_tensor *v = th_make(CN_F64, CN_SHAPE(5), (double[]){1, 2, -1, 0.5, 3}, TH_CONTIG);
    cn_tensor *gv = cn_sum(cn_mul(g, v), NULL, 0, false), *h;
    CHECK_EQ_INT(cn_grad(&gv, NULL, 1, &x, 1, &h, 0), 0);
    CHECK_VALUES("pad hvp", h, 8, 32, -36, 17, 48);

    /* L = sum((a @ b)^3): d/da, then the mixed and pure second derivatives. */
    cn_tensor *a = param(CN_SHAPE(2, 3), ((double[]){0.5, -1, 2, 0.3, 0.7, -0.2}), TH_TRANSPOSED);
    cn_tensor *b = param(CN_SHAPE(3, 2), ((double[]){1, 0.5, -0.5, 2, 0.25, -1}), TH_CONTIG);
    cn_tensor *c = cn_matmul(a, b);
    cn_tensor *L2 = cn_sum(cn_mul(c, cn_square(c)), NULL, 0, false), *ga;
    CHECK_EQ_INT(cn_grad(&L2, NULL, 1, &a, 1, &ga, CN_GRAD_CREATE_GRAPH), 0);
    CHECK_VALUES("matmul grad", ga, 27.84375, 81.0, -40.5, 4.6237499999999985, 18.359999999999992,
                 -9.179999999999996);
    cn_tensor *va = th_make(CN_F64, CN_SHAPE(2, 3), (double[]){1, 2, 3, -1, 0.5, 0}, TH_CONTIG);
    cn_tensor *gva = cn_sum(cn_mul(ga, va), NULL, 0, false), *hh[2];
    CHECK_EQ_INT(cn_grad(&gva, NULL, 1, (cn_tensor *[]){b, a}, 2, hh, 0), 0);
    CHECK_VALUES("matmul d2/dadb", hh[0], 10.32, 17.7, 7.29, 126.39375, 33.6, 58.0125);
    CHECK_VALUES("matmul d2/da2", hh[1], -10.125, -70.875, 35.4375, 3.3749999999999996,
                 10.124999999999998, -5.062499999999999);

    /* gather with repeated indices, through scatter_add's own gradient */
    cn_tensor *xg = param(CN_SHAPE(3, 2), ((double[]){1, 2, 3, -1, 0.5, 4}), TH_CONTIG);
    cn_tensor *idx = th_make(CN_I64, CN_SHAPE(4, 2), (double[]){0, 1, 0, 0, 2, 0, 0, 1}, TH_CONTIG);
    cn_tensor *yg = cn_gather(xg, 0, idx);
    cn_tensor *L3 = cn_sum(cn_mul(iota_like(yg), cn_square(yg)), NULL, 0, false), *gg;
    CHECK_EQ_INT(cn_grad(&L3, NULL, 1, &xg, 1, &gg, CN_GRAD_CREATE_GRAPH), 0);
    CHECK_VALUES("gather grad", gg, 22, 40, 0, -20, 5, 0);
    cn_tensor *vg = th_make(CN_F64, CN_SHAPE(3, 2), (double[]){1, -1, 2, 0.5, 3, 1}, TH_CONTIG);
    cn_tensor *gvg = cn_sum(cn_mul(gg, vg), NULL, 0, false), *hg;
    CHECK_EQ_INT(cn_grad(&gvg, NULL, 1, &xg, 1, &hg, 0), 0);
    CHECK_VALUES("gather hvp", hg, 22, -20, 0, 10, 30, 0);
}

/* Gradient subgraphs of static graphs, with a batch size unknown until run,
 * equal eager backward. */
static cn_tensor *static_model(cn_tensor *x, cn_tensor *w, cn_tensor *idx) {
    cn_tensor *h = cn_matmul(x, w);                                  /* [B, 3, 2] */
    cn_tensor *s = cn_index_select(h, 1, idx);                       /* [B, 4, 2] */
    cn_tensor *p = cn_pad(s, (int64_t[]){1, 1}, 2, CN_PAD_REFLECT, 0);     /* [B, 4, 4] */
    cn_tensor *r = cn_pad(p, (int64_t[]){0, 0, 1, -1}, 4, CN_PAD_CONSTANT, 0.5);
    cn_tensor *q = cn_concat((cn_tensor *[]){p, cn_tril(r, 0)}, 2, 2); /* [B, 4, 8] */
    return cn_sum(cn_square(q), NULL, 0, false);
}

static void test_static_gradient(void) {
    th_seed(5);
    cn_tensor *w = th_random(CN_F64, CN_SHAPE(4, 2), -1, 1, TH_CONTIG, NULL);
    cn_set_requires_grad(w, true);
    cn_tensor *idx = th_make(CN_I64, CN_SHAPE(4), (double[]){2, 0, 2, 1}, TH_CONTIG);
    cn_graph *gr = cn_graph_new();
    cn_tensor *x = cn_placeholder(gr, "x", CN_F64, CN_SHAPE(-1, 3, 4));
    cn_set_requires_grad(x, true);
    cn_tensor *loss = static_model(x, w, idx);
    CHECK_MSG(loss != NULL, "symbolic forward: %s", cn_last_error());
    cn_tensor *grads[2];
    int rc = cn_grad(&loss, NULL, 1, (cn_tensor *[]){w, x}, 2, grads, 0);
    CHECK_MSG(rc == 0, "symbolic grad: %s", cn_last_error());
    if (rc != 0) {
        cn_graph_free(gr);
        return;
    }
    cn_tensor *outs[3] = {loss, grads[0], grads[1]};
    cn_program *p = cn_compile(gr, outs, 3, NULL);
    CHECK(p != NULL);
    for (int batch = 1; p && batch <= 3; batch += 2) {
        cn_tensor *xv = th_random(CN_F64, CN_SHAPE(batch, 3, 4), -1, 1, TH_CONTIG, NULL);
        cn_set_requires_grad(xv, true);
        cn_tensor *res[3];
        CHECK_EQ_INT(cn_run(p, &x, &xv, 1, res, 3), 0);
        cn_zero_grad(w);
        CHECK_EQ_INT(cn_backward(static_model(xv, w, idx), NULL), 0);
        CHECK(cn_allclose(res[1], cn_get_grad(w), 1e-12, 1e-12));
        CHECK(cn_allclose(res[2], cn_get_grad(xv), 1e-12, 1e-12));
    }
    cn_program_free(p);

    /* Reflecting along an axis whose size is unknown: the gradient's runs
     * cannot be laid out yet, and the error says so. */
    cn_tensor *z = cn_placeholder(gr, "z", CN_F64, CN_SHAPE(-1, 3));
    cn_set_requires_grad(z, true);
    cn_tensor *lz = cn_sum(cn_pad(z, (int64_t[]){1, 0, 1, 1}, 4, CN_PAD_REFLECT, 0), NULL, 0, false);
    cn_tensor *gz;
    CHECK_STATUS_ERROR(cn_grad(&lz, NULL, 1, &z, 1, &gz, 0), "unknown until run");
    cn_graph_free(gr);
}

/* one_hot (an integer result) and bernoulli (a draw) carry no gradient, as
 * in PyTorch. */
static void test_no_gradient(void) {
    cn_tensor *p = param(CN_SHAPE(3), ((double[]){0.2, 0.5, 0.9}), TH_CONTIG);
    cn_tensor *d = cn_bernoulli(p);
    CHECK(d != NULL && !cn_requires_grad(d));
    cn_tensor *oh = cn_one_hot(th_make(CN_I64, CN_SHAPE(2), (double[]){0, 2}, TH_CONTIG), 3);
    CHECK(oh != NULL && !cn_requires_grad(oh));
    /* the draw used as a mask: p gets the mask as its gradient */
    CHECK_EQ_INT(cn_backward(cn_sum(cn_mul(p, d), NULL, 0, false), NULL), 0);
    CHECK(cn_allclose(cn_get_grad(p), d, 0, 0));
}

int main(void) {
    RUN(test_reflect_pad);
    RUN(test_replicate_pad);
    RUN(test_constant_pad);
    RUN(test_pad_jvp);
    RUN(test_gather_index_select);
    RUN(test_scatter_add);
    RUN(test_concat);
    RUN(test_matmul_broadcast);
    RUN(test_matmul_vectors);
    RUN(test_matmul_jvp);
    RUN(test_second_order);
    RUN(test_static_gradient);
    RUN(test_no_gradient);
    return th_summary();
}
