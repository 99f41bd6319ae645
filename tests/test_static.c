/* Static graphs: placeholders, tracing, compile and run, unknown sizes,
 * gradients as graphs, and the errors. Eager results are the reference. */
#include "harness.h"

#include "backend/cpu/conv.h"
#include "backend/cpu/gemm.h"

/* A model written once against the tensor API. */
static cn_tensor *mlp(cn_tensor *x, cn_tensor *w1, cn_tensor *b1, cn_tensor *w2) {
    cn_tensor *h = cn_tanh(cn_add(cn_matmul(x, w1), b1));
    return cn_matmul(h, w2);
}

static void test_trace_and_run(void) {
    th_seed(7);
    cn_tensor *w1 = th_random(CN_F64, CN_SHAPE(4, 5), -1, 1, TH_CONTIG, NULL);
    cn_tensor *b1 = th_random(CN_F64, CN_SHAPE(5), -1, 1, TH_CONTIG, NULL);
    cn_tensor *w2 = th_random(CN_F64, CN_SHAPE(5, 2), -1, 1, TH_CONTIG, NULL);
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F64, CN_SHAPE(-1, 4));
    CHECK(cn_is_symbolic_tensor(x));
    CHECK(strcmp(cn_get_name(x), "x") == 0);
    cn_tensor *y = mlp(x, w1, b1, w2);
    CHECK(cn_is_symbolic_tensor(y));
    CHECK_SHAPE(y, -1, 2);
    cn_program *p = cn_compile(g, &y, 1, NULL);
    CHECK(p != NULL);
    CHECK_EQ_INT(cn_program_num_inputs(p), 1);
    for (int batch = 1; batch <= 3; batch++) { /* the unknown size varies per run */
        cn_tensor *xv = th_random(CN_F64, CN_SHAPE(batch, 4), -1, 1, TH_CONTIG, NULL);
        cn_tensor *out;
        CHECK_EQ_INT(cn_run(p, &x, &xv, 1, &out, 1), 0);
        cn_tensor *ref = mlp(xv, w1, b1, w2);
        CHECK(cn_allclose(out, ref, 0, 0));
    }
    /* Parameters are captured by reference. */
    cn_fill_(b1, 0.5);
    cn_tensor *xv = th_random(CN_F64, CN_SHAPE(2, 4), -1, 1, TH_CONTIG, NULL), *out;
    CHECK_EQ_INT(cn_run(p, &x, &xv, 1, &out, 1), 0);
    CHECK(cn_allclose(out, mlp(xv, w1, b1, w2), 0, 0));
    cn_program_free(p);
    cn_graph_free(g);
}

static void test_build_time_errors(void) {
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 4));
    cn_tensor *w = cn_zeros(CN_F32, CN_SHAPE(5, 3));
    CHECK_ERROR(cn_matmul(x, w), "inner dimensions");
    cn_tensor *y = cn_placeholder(g, "y", CN_F32, CN_SHAPE(3, 5));
    CHECK_ERROR(cn_add(x, y), "cannot be broadcast");
    cn_graph *g2 = cn_graph_new();
    cn_tensor *z = cn_placeholder(g2, "z", CN_F32, CN_SHAPE(3, 4));
    CHECK_ERROR(cn_add(x, z), "different static graphs");
    cn_graph_free(g2);
    cn_graph_free(g);
}

static void test_run_errors(void) {
    cn_graph *g = cn_graph_new();
    cn_tensor *a = cn_placeholder(g, "a", CN_F32, CN_SHAPE(-1, 3));
    cn_tensor *b = cn_placeholder(g, "b", CN_F32, CN_SHAPE(3));
    cn_tensor *y = cn_add(a, b);
    cn_program *p = cn_compile(g, &y, 1, NULL);
    cn_tensor *out;
    cn_tensor *av = cn_ones(CN_F32, CN_SHAPE(2, 3));
    CHECK_STATUS_ERROR(cn_run(p, &a, &av, 1, &out, 1), "'b' was not fed");
    cn_tensor *bad = cn_ones(CN_F32, CN_SHAPE(4));
    cn_tensor *ph[2] = {a, b}, *vals[2] = {av, bad};
    CHECK_STATUS_ERROR(cn_run(p, ph, vals, 2, &out, 1), "placeholder 'b' is f32[3], fed f32[4]");
    cn_tensor *badt = cn_ones(CN_F64, CN_SHAPE(3));
    vals[1] = badt;
    CHECK_STATUS_ERROR(cn_run(p, ph, vals, 2, &out, 1), "fed f64[3]");
    vals[1] = cn_ones(CN_F32, CN_SHAPE(3));
    CHECK_EQ_INT(cn_run(p, ph, vals, 2, &out, 1), 0);
    CHECK_CLOSE(th_at(out, 5), 2, 0, 0);
    cn_program_free(p);
    cn_graph_free(g);
}

/* The gradient subgraph of a static graph equals eager backward. */
static void test_static_gradient(void) {
    th_seed(11);
    cn_tensor *w1 = th_random(CN_F64, CN_SHAPE(4, 5), -1, 1, TH_CONTIG, NULL);
    cn_tensor *b1 = th_random(CN_F64, CN_SHAPE(5), -1, 1, TH_CONTIG, NULL);
    cn_tensor *w2 = th_random(CN_F64, CN_SHAPE(5, 2), -1, 1, TH_CONTIG, NULL);
    cn_tensor *params[3] = {w1, b1, w2};
    for (int i = 0; i < 3; i++) cn_set_requires_grad(params[i], true);
    cn_tensor *xv = th_random(CN_F64, CN_SHAPE(3, 4), -1, 1, TH_CONTIG, NULL);

    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F64, CN_SHAPE(-1, 4));
    cn_tensor *loss = cn_sum(cn_square(mlp(x, w1, b1, w2)), NULL, 0, false);
    cn_tensor *grads[3];
    CHECK_MSG(cn_grad(&loss, NULL, 1, params, 3, grads, 0) == 0, "grad: %s", cn_last_error());
    cn_tensor *outs[4] = {loss, grads[0], grads[1], grads[2]};
    cn_program *p = cn_compile(g, outs, 4, NULL);
    cn_tensor *res[4];
    CHECK_EQ_INT(cn_run(p, &x, &xv, 1, res, 4), 0);

    cn_tensor *eloss = cn_sum(cn_square(mlp(xv, w1, b1, w2)), NULL, 0, false);
    CHECK_EQ_INT(cn_backward(eloss, NULL), 0);
    CHECK(cn_allclose(res[0], eloss, 1e-12, 0));
    for (int i = 0; i < 3; i++) CHECK(cn_allclose(res[i + 1], cn_get_grad(params[i]), 1e-12, 1e-14));
    cn_program_free(p);
    cn_graph_free(g);
}

/* A gradient through a value with two unknown sizes (x[-1,1] * x^T is
 * [-1,-1]) summed back to x's shape. */
static void test_gradient_two_unknown_sizes(void) {
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F64, CN_SHAPE(-1, 1));
    cn_set_requires_grad(x, true);
    cn_tensor *v = cn_mul(x, cn_transpose(x, 0, 1));
    cn_tensor *l = cn_sum(cn_mul(v, cn_ones(CN_F64, CN_SHAPE(2, 1, 1))), NULL, 0, false), *gx;
    CHECK_MSG(cn_grad(&l, NULL, 1, &x, 1, &gx, 0) == 0, "grad: %s", cn_last_error());
    cn_tensor *outs[2] = {l, gx}, *res[2];
    cn_program *p = cn_compile(g, outs, 2, NULL);
    cn_tensor *xv = cn_reshape(cn_arange(1, 4, 1, CN_F64), CN_SHAPE(3, 1));
    CHECK_EQ_INT(cn_run(p, &x, &xv, 1, res, 2), 0);
    /* l = 2 (sum x)^2 = 72, dl/dx_i = 4 sum x = 24 */
    CHECK_CLOSE(th_at(res[0], 0), 72, 0, 0);
    for (int i = 0; i < 3; i++) CHECK_CLOSE(th_at(res[1], i), 24, 0, 0);
    cn_program_free(p);
    cn_graph_free(g);
}

/* The gradient of a product broadcast against a size unknown until run sums
 * back to whatever is fed there: x [-1, 2] times y [4, 2] gives x's
 * gradient summed over axis 0 when x is fed [1, 2], and not summed when it
 * is fed [4, 2]. On the leading axis, a middle one, and
 * both operands at once; eager gradients at the fed shapes are the
 * reference. */
static void check_unknown_broadcast(int nd, const int64_t *xs, const int64_t *ys,
                                    const int64_t *xf, const int64_t *yf) {
    cn_graph *g = cn_graph_new();
    cn_tensor *ph[2] = {cn_placeholder(g, "x", CN_F64, nd, xs), cn_placeholder(g, "y", CN_F64, nd, ys)};
    for (int k = 0; k < 2; k++) cn_set_requires_grad(ph[k], true);
    cn_tensor *l = cn_sum(cn_square(cn_mul(ph[0], ph[1])), NULL, 0, false), *gs[2];
    CHECK_MSG(cn_grad(&l, NULL, 1, ph, 2, gs, 0) == 0, "grad: %s", cn_last_error());
    for (int k = 0; k < 2; k++) CHECK_EQ_INT(cn_ndim(gs[k]), nd);
    cn_program *p = cn_compile(g, gs, 2, NULL);
    cn_tensor *v[2] = {th_random(CN_F64, nd, xf, -1, 1, TH_CONTIG, NULL),
                       th_random(CN_F64, nd, yf, -1, 1, TH_CONTIG, NULL)}, *res[2], *ref[2];
    CHECK_MSG(cn_run(p, ph, v, 2, res, 2) == 0, "run: %s", cn_last_error());
    for (int k = 0; k < 2; k++) cn_set_requires_grad(v[k], true);
    cn_tensor *el = cn_sum(cn_square(cn_mul(v[0], v[1])), NULL, 0, false);
    CHECK_EQ_INT(cn_grad(&el, NULL, 1, v, 2, ref, 0), 0);
    for (int k = 0; k < 2; k++) CHECK(cn_allclose(res[k], ref[k], 1e-12, 1e-14));
    cn_program_free(p);
    cn_graph_free(g);
}

static void test_gradient_unknown_broadcast(void) {
    th_seed(5);
    /* symbolic x, y; then fed x, y */
    static const int64_t c[][4][3] = {
        {{-1, 2}, {4, 2}, {1, 2}, {4, 2}},          /* leading axis */
        {{-1, 2}, {4, 2}, {4, 2}, {4, 2}},          /* ... not broadcast this time */
        {{2, -1, 3}, {2, 4, 3}, {2, 1, 3}, {2, 4, 3}}, /* a middle axis */
        {{-1, 3}, {4, -1}, {1, 3}, {4, 1}},         /* both operands */
    };
    static const int nd[] = {2, 2, 3, 2};
    for (int i = 0; i < 4; i++) check_unknown_broadcast(nd[i], c[i][0], c[i][1], c[i][2], c[i][3]);
}

/* Constant weights packed once (src/graph/packs.c): a linear layer's b (a
 * transposed view, as ONNX's Gemm gives it) and a 1x1 convolution's weights
 * give the bits of the built-in GEMM packing as it goes, a 3x3
 * convolution's (oneDNN's at batch 1, in its own format, two blocks of
 * output channels) the bits of eager mode's reordering on each call; all
 * are counted in packed_bytes, and a weight written between runs (by an op,
 * or through cn_data and cn_mark_written) is packed again. */
static void test_packed_weights(void) {
    th_seed(11);
    cn_tensor *w = th_random(CN_F32, CN_SHAPE(64, 300), -1, 1, TH_CONTIG, NULL);
    /* 1x1: at batch 1 larger kernels run on oneDNN, which packs nothing */
    cn_tensor *cw = th_random(CN_F32, CN_SHAPE(8, 3, 1, 1), -1, 1, TH_CONTIG, NULL);
    cn_tensor *cw3 = th_random(CN_F32, CN_SHAPE(64, 4, 3, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *cb3 = th_random(CN_F32, CN_SHAPE(64), -1, 1, TH_CONTIG, NULL);
    /* 1x1 onto a 7x7 plane: made transposed (conv.c), its pack of w^T;
     * 190 channels: blocks of 64, of 8 and a remainder */
    cn_tensor *cwt = th_random(CN_F32, CN_SHAPE(190, 160, 1, 1), -1, 1, TH_CONTIG, NULL);
    cn_tensor *cbt = th_random(CN_F32, CN_SHAPE(190), -1, 1, TH_CONTIG, NULL);
    /* its own bias for a second such step with a bound -0 (one
     * convolution read by two steps is the head of neither) */
    cn_tensor *cbt2 = th_random(CN_F32, CN_SHAPE(190), -1, 1, TH_CONTIG, NULL);
    const cn_conv_opts pad1 = {.padding = {1, 1}};
    cn_graph *g = cn_graph_new();
    cn_tensor *ph[4] = {cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 300)),
                        cn_placeholder(g, "im", CN_F32, CN_SHAPE(1, 3, 12, 12)),
                        cn_placeholder(g, "im3", CN_F32, CN_SHAPE(1, 4, 10, 10)),
                        cn_placeholder(g, "imt", CN_F32, CN_SHAPE(1, 160, 7, 7))};
    cn_tensor *outs[5] = {cn_matmul(ph[0], cn_mT(w)), cn_conv2d(ph[1], cw, NULL, NULL),
                          cn_relu(cn_conv2d(ph[2], cw3, cb3, &pad1)),
                          cn_relu(cn_conv2d(ph[3], cwt, cbt, NULL)),
                          cn_clamp(cn_conv2d(ph[3], cwt, cbt2, NULL), -0.0, 6.0)};
    cn_program *p = cn_compile(g, outs, 5, NULL);
    cn_program *q = cn_compile(g, outs, 5, &(cn_compile_opts){.opt_level = 2, .no_packing = true});
    cn_tensor *in[4] = {th_random(CN_F32, CN_SHAPE(60, 300), -1, 1, TH_CONTIG, NULL),
                        th_random(CN_F32, CN_SHAPE(1, 3, 12, 12), -1, 1, TH_CONTIG, NULL),
                        th_random(CN_F32, CN_SHAPE(1, 4, 10, 10), -1, 1, TH_CONTIG, NULL),
                        th_random(CN_F32, CN_SHAPE(1, 160, 7, 7), -1, 1, TH_CONTIG, NULL)};
    float *want = malloc(sizeof(float) * 190 * 49); /* the larger of the two products */
    for (int round = 0; round < 3; round++) {
        cn_tensor *r[5], *u[5];
        CHECK_EQ_INT(cn_run(p, ph, in, 4, r, 5), 0);
        CHECK_EQ_INT(cn_run(q, ph, in, 4, u, 5), 0);
        cn_gemm_builtin(CN_F32, 60, 64, 300, cn_data(in[0]), 300, 1, cn_data(w), 1, 300, want, 64);
        CHECK(memcmp(cn_data(r[0]), want, sizeof(float) * 60 * 64) == 0);
        CHECK(cn_allclose(r[0], u[0], 1e-5, 1e-5)); /* unpacked: BLAS where built with it */
        CHECK(cn_allclose(r[0], cn_matmul(in[0], cn_mT(w)), 1e-5, 1e-5));
        CHECK(cn_equal(r[1], u[1]));
        CHECK(cn_allclose(r[1], cn_conv2d(in[1], cw, NULL, NULL), 1e-5, 1e-5));
        CHECK(cn_equal(r[2], u[2]));
        CHECK(cn_equal(r[2], cn_relu(cn_conv2d(in[2], cw3, cb3, &pad1))));
        /* The transposed 1x1 product: the bits of the product made the
         * usual way (w times x's pixels), then its bias and the ReLU. */
        CHECK(cn_equal(r[3], u[3]));
        CHECK(cn_equal(r[3], cn_relu(cn_conv2d(in[3], cwt, cbt, NULL))));
        cn_gemm_builtin(CN_F32, 190, 49, 160, cn_data(cwt), 160, 1, cn_data(in[3]), 49, 1, want, 49);
        const float *bt = cn_data(cbt);
        for (int i = 0; i < 190 * 49; i++) {
            float v = want[i] + bt[i / 49];
            want[i] = 0 > v ? 0 : v;
        }
        CHECK(memcmp(cn_data(r[3]), want, sizeof(float) * 190 * 49) == 0);
        /* clamp(-0, 6): a negative output is -0, as the unfused clamp gives */
        CHECK(cn_equal(r[4], u[4]));
        cn_gemm_builtin(CN_F32, 190, 49, 160, cn_data(cwt), 160, 1, cn_data(in[3]), 49, 1, want, 49);
        const float *bt2 = cn_data(cbt2);
        int negzero = 0;
        for (int i = 0; i < 190 * 49; i++) {
            float v = want[i] + bt2[i / 49];
            v = -0.0f > v ? -0.0f : v;
            want[i] = 6.0f < v ? 6.0f : v;
            negzero += want[i] == 0 && signbit(want[i]);
        }
        CHECK(negzero > 0);
        CHECK(memcmp(cn_data(r[4]), want, sizeof(float) * 190 * 49) == 0);
        cn_program_stats st, su;
        cn_program_stats_get(p, &st);
        cn_program_stats_get(q, &su);
        CHECK(st.packed_bytes >=
              sizeof(float) * (64 * 300 + 8 * 3 + 190 * 160 + (cn_conv_have_dnnl() ? 64 * 4 * 9 : 0)));
        CHECK(su.packed_bytes == 0);
        /* Written between runs, by ops or through cn_data and then
         * cn_mark_written: the next run reads the new weights. */
        if (round == 0) {
            CHECK_EQ_INT(cn_copy_(w, th_random(CN_F32, CN_SHAPE(64, 300), -1, 1, TH_CONTIG, NULL)),
                         0);
            cn_fill_(cw, 0.25);
            cn_fill_(cw3, -0.5);
            cn_fill_(cwt, 0.125);
        } else {
            float *wd = cn_data(w), *cd = cn_data(cw);
            for (int i = 0; i < 64 * 300; i++) wd[i] = -wd[i];
            for (int i = 0; i < 8 * 3; i++) cd[i] = (float)i / 100;
            CHECK_EQ_INT(cn_mark_written(w), 0);
            CHECK_EQ_INT(cn_mark_written(cw), 0);
            float *d3 = cn_data(cw3);
            for (int i = 0; i < 64 * 4 * 9; i++) d3[i] = (float)(i % 7) / 10;
            CHECK_EQ_INT(cn_mark_written(cw3), 0);
        }
    }
    free(want);
    cn_program_free(p);
    cn_program_free(q);
    cn_graph_free(g);
}

/* Element k of a contiguous f32 or f64 tensor. */
static void set_elem(cn_tensor *t, int64_t k, double v) {
    if (cn_tensor_dtype(t) == CN_F32) ((float *)cn_data(t))[k] = (float)v;
    else ((double *)cn_data(t))[k] = v;
}

/* The same numbers of a contiguous f32 or f64 tensor to the bit, any NaN
 * matching any NaN (the sign and payload of a NaN made from two NaNs
 * depend on the order a compiler gives a commutative op's operands). */
static bool same_bits(const cn_tensor *a, const cn_tensor *b) {
    if (cn_numel(a) != cn_numel(b) || cn_tensor_dtype(a) != cn_tensor_dtype(b)) return false;
    bool f32 = cn_tensor_dtype(a) == CN_F32;
    for (int64_t k = 0; k < cn_numel(a); k++) {
        double x = f32 ? ((const float *)cn_data((cn_tensor *)a))[k]
                       : ((const double *)cn_data((cn_tensor *)a))[k];
        double y = f32 ? ((const float *)cn_data((cn_tensor *)b))[k]
                       : ((const double *)cn_data((cn_tensor *)b))[k];
        if (x != x && y != y) continue;
        if (x != y || signbit(x) != signbit(y)) return false;
    }
    return true;
}

/* A convolution followed only by bounds (ReLU, ReLU6 as maximum and
 * minimum with constants, clamp, an upper bound alone) has them applied
 * by its kernel as it writes the output (cn_gemm_out): the 1x1, im2col,
 * grouped, depthwise and oneDNN paths, f32 and f64, batch 1 and 3, 1 and 2
 * threads, give eager mode's bits, with NaN inputs and +0 outputs tied
 * with a bound -0. Expressions that are not such bounds (a constant on
 * the left, a NaN bound, a residual add, SiLU, an add) are applied by the
 * kernels too, as epilogues, on the GEMM, depthwise and oneDNN paths. */
static void test_conv_bounds(void) {
    th_seed(17);
    for (int dti = 0; dti < 2; dti++) {
        cn_dtype dt = dti ? CN_F64 : CN_F32;
        for (int64_t n = 1; n <= 3; n += 2) {
            cn_tensor *x = th_random(dt, CN_SHAPE(n, 4, 9, 9), -2, 2, TH_CONTIG, NULL);
            /* a NaN and negative pixels in channel 0 */
            for (int k = 0; k < 9; k++) set_elem(x, k * 7, k ? -1.0 : NAN);
            cn_tensor *w1 = th_random(dt, CN_SHAPE(6, 4, 1, 1), -1, 1, TH_CONTIG, NULL);
            cn_tensor *w3 = th_random(dt, CN_SHAPE(6, 4, 3, 3), -1, 1, TH_CONTIG, NULL);
            cn_tensor *wg = th_random(dt, CN_SHAPE(6, 2, 3, 3), -1, 1, TH_CONTIG, NULL);
            cn_tensor *wd = th_random(dt, CN_SHAPE(4, 1, 3, 3), -1, 1, TH_CONTIG, NULL);
            cn_tensor *b6 = th_random(dt, CN_SHAPE(6), -1, 1, TH_CONTIG, NULL);
            cn_tensor *b4 = th_random(dt, CN_SHAPE(4), -1, 1, TH_CONTIG, NULL);
            /* Output channels 1 and 2 of a 1x1 with zero weights: channel
             * 1 is its bias, 6, a tie with the upper bound; channel 2 is
             * +0 (its bias, +0 or -0, added to a sum from +0). */
            cn_tensor *w1z = th_random(dt, CN_SHAPE(6, 4, 1, 1), -1, 1, TH_CONTIG, NULL);
            cn_tensor *b6z = th_random(dt, CN_SHAPE(6), -1, 1, TH_CONTIG, NULL);
            for (int c = 0; c < 8; c++) set_elem(w1z, 4 + c, 0.0);
            set_elem(b6z, 1, 6.0);
            set_elem(b6z, 2, -0.0);
            cn_tensor *bz[2];
            for (int i = 0; i < 2; i++) {
                bz[i] = th_random(dt, CN_SHAPE(6), -1, 1, TH_CONTIG, NULL);
                set_elem(bz[i], 2, 0.0);
            }
            const cn_conv_opts s1 = {.padding = {1, 1}}; /* im2col's path */
            /* 32 output channels: oneDNN's path (two blocks of 16), whose
             * channel 3 is +0 */
            cn_tensor *w32 = th_random(dt, CN_SHAPE(32, 4, 3, 3), -1, 1, TH_CONTIG, NULL);
            cn_tensor *b32 = th_random(dt, CN_SHAPE(32), -1, 1, TH_CONTIG, NULL);
            for (int k = 3 * 36; k < 4 * 36; k++) set_elem(w32, k, 0.0);
            set_elem(b32, 3, 0.0);
            /* The depthwise conv's channel 3 is +0: a tie with a bound -0. */
            for (int k = 27; k < 36; k++) set_elem(wd, k, 0.0);
            set_elem(b4, 3, 0.0);
            cn_tensor *zero = cn_scalar(dt, 0), *six = cn_scalar(dt, 6), *nan = cn_scalar(dt, NAN);
            const cn_conv_opts s2 = {.stride = {2, 2}, .padding = {1, 1}};
            const cn_conv_opts grp = {.padding = {1, 1}, .groups = 2};
            const cn_conv_opts dw = {.padding = {1, 1}, .groups = 4};
            cn_graph *g = cn_graph_new();
            cn_tensor *ph = cn_placeholder(g, "x", dt, CN_SHAPE(n, 4, 9, 9));
            cn_tensor *src[2] = {ph, x};
            cn_tensor *outs[2][12];
            for (int v = 0; v < 2; v++) {
                cn_tensor *in = src[v];
                outs[v][0] = cn_relu(cn_conv2d(in, w1z, b6z, NULL));
                outs[v][1] = cn_minimum(cn_maximum(cn_conv2d(in, w3, b6, &s2), zero), six);
                outs[v][2] = cn_clamp(cn_conv2d(in, wd, b4, &dw), -0.0, 6.0);
                outs[v][3] = cn_minimum(cn_conv2d(in, wg, NULL, &grp), cn_scalar(dt, 0.5));
                outs[v][4] = cn_maximum(six, cn_conv2d(in, w1z, b6z, NULL));
                outs[v][5] = cn_maximum(cn_conv2d(in, w1, NULL, NULL), nan);
                outs[v][6] = cn_relu(cn_add(cn_conv2d(in, w1, b6, NULL), cn_conv2d(in, w1z, NULL, NULL)));
                /* (their own biases: one convolution read by several
                 * steps is the head of none) */
                outs[v][7] = cn_clamp(cn_conv2d(in, w1z, bz[0], NULL), -0.0, 6.0);
                outs[v][8] = cn_maximum(cn_conv2d(in, w1z, bz[1], &s1), cn_scalar(dt, -0.0));
                outs[v][9] = cn_clamp(cn_conv2d(in, w32, b32, &s1), -0.0, 6.0);
                /* epilogues (epilogue.h): SiLU on the depthwise path, an
                 * add on oneDNN's */
                cn_tensor *dwc = cn_conv2d(in, wd, b4, &(cn_conv_opts){.padding = {1, 1}, .groups = 4, .stride = {2, 1}});
                outs[v][10] = cn_mul(dwc, cn_sigmoid(dwc));
                outs[v][11] = cn_add(cn_conv2d(in, w32, NULL, &s1), cn_scalar(dt, 0.5));
            }
            cn_program *p = cn_compile(g, outs[0], 12, NULL);
            for (int t = 1; t <= 2; t++) {
                cn_set_num_threads(t);
                cn_tensor *r[12];
                CHECK_EQ_INT(cn_run(p, &ph, &x, 1, r, 12), 0);
                for (int k = 0; k < 12; k++)
                    CHECK_MSG(same_bits(r[k], cn_contiguous(outs[1][k])),
                              "%s batch %" PRId64 " output %d, %d threads", cn_dtype_name(dt), n,
                              k, t);
            }
            cn_set_num_threads(0);
            cn_program_free(p);
            cn_graph_free(g);
        }
    }
}

/* The same on the paths test_conv_bounds's small shapes do not reach: a 1x1
 * product big enough to be cut into row parts over two threads, and
 * depthwise layers whose rows are two vectors wide, at stride 1 and at
 * stride 2 (split rows), with bounds and with an epilogue; f32, batch 1,
 * 1 and 2 threads. (The bias of each row part is test_conv's: against
 * PyTorch and the reference loops.) */
static void test_conv_bounds_wide(void) {
    th_seed(19);
    cn_tensor *x = th_random(CN_F32, CN_SHAPE(1, 256, 7, 7), -2, 2, TH_CONTIG, NULL);
    cn_tensor *w = th_random(CN_F32, CN_SHAPE(256, 256, 1, 1), -0.2, 0.2, TH_CONTIG, NULL);
    cn_tensor *b = th_random(CN_F32, CN_SHAPE(256), -1, 1, TH_CONTIG, NULL);
    cn_tensor *xd = th_random(CN_F32, CN_SHAPE(1, 8, 40, 66), -2, 2, TH_CONTIG, NULL);
    cn_tensor *wd = th_random(CN_F32, CN_SHAPE(8, 1, 3, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *bd = th_random(CN_F32, CN_SHAPE(8), -1, 1, TH_CONTIG, NULL);
    const cn_conv_opts dw1 = {.padding = {1, 1}, .groups = 8};
    const cn_conv_opts dw2 = {.padding = {1, 1}, .groups = 8, .stride = {2, 2}};
    cn_graph *g = cn_graph_new();
    cn_tensor *ph[2] = {cn_placeholder(g, "x", CN_F32, CN_SHAPE(1, 256, 7, 7)),
                        cn_placeholder(g, "xd", CN_F32, CN_SHAPE(1, 8, 40, 66))};
    cn_tensor *src[2][2] = {{ph[0], ph[1]}, {x, xd}};
    cn_tensor *outs[2][6];
    for (int v = 0; v < 2; v++) {
        cn_tensor *in = src[v][0], *ind = src[v][1];
        cn_tensor *c1 = cn_conv2d(in, w, b, NULL), *c2 = cn_conv2d(in, w, NULL, NULL);
        cn_tensor *d1 = cn_conv2d(ind, wd, bd, &dw1), *d2 = cn_conv2d(ind, wd, bd, &dw2);
        cn_tensor *d3 = cn_conv2d(ind, wd, NULL, &dw1), *d4 = cn_conv2d(ind, wd, NULL, &dw2);
        outs[v][0] = cn_clamp(c1, -0.5, 0.5);
        outs[v][1] = cn_add(c2, cn_scalar(CN_F32, 0.25));
        outs[v][2] = cn_clamp(d1, -0.0, 1.0);
        outs[v][3] = cn_minimum(cn_maximum(d2, cn_scalar(CN_F32, 0)), cn_scalar(CN_F32, 6));
        outs[v][4] = cn_mul(d3, cn_sigmoid(d3));
        outs[v][5] = cn_add(d4, cn_scalar(CN_F32, -0.5));
    }
    cn_program *p = cn_compile(g, outs[0], 6, NULL);
    cn_tensor *feeds[2] = {x, xd};
    for (int t = 1; t <= 2; t++) {
        cn_set_num_threads(t);
        cn_tensor *r[6];
        CHECK_EQ_INT(cn_run(p, ph, feeds, 2, r, 6), 0);
        for (int k = 0; k < 6; k++)
            CHECK_MSG(same_bits(r[k], cn_contiguous(outs[1][k])), "output %d, %d threads", k, t);
    }
    cn_set_num_threads(0);
    cn_program_free(p);
    cn_graph_free(g);
}

int main(void) {
    RUN(test_trace_and_run);
    RUN(test_gradient_two_unknown_sizes);
    RUN(test_gradient_unknown_broadcast);
    RUN(test_build_time_errors);
    RUN(test_run_errors);
    RUN(test_static_gradient);
    RUN(test_packed_weights);
    RUN(test_conv_bounds);
    RUN(test_conv_bounds_wide);
    return th_summary();
}
