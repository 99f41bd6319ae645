/* Mixed precision (docs/training.md, "Mixed precision"):
 *
 * - autocast's products (matmul, conv2d, conv_transpose2d, attention) give
 *   the bits of the same op in f32 on inputs cast to bf16 / f16 and back by
 *   hand; other ops are untouched; regions nest and are checked;
 * - gradients under autocast against the f32 ones within bf16's rounding,
 *   with the parameters and their gradients staying f32;
 * - a program traced inside a region computes what the eager ops do;
 * - the native path (forced here: this CPU may lack the instructions) gives
 *   the same numbers, for matmul and for the convolutions' three products
 *   (oneDNN's or widened); its oneDNN blocking against the GEMM (in f32,
 *   which any CPU runs); its selection from the CPU's flags (/proc/cpuinfo);
 * - loss scaling: the scaled loss, unscaling, the skip and backoff on an
 *   injected inf, growth after the interval. */
#include "harness.h"

#include "backend/cpu/conv.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/matmul_dnnl.h"
#include "core/core.h"

#include <string.h>

static cn_tensor *randn(int ndim, const int64_t *shape) { return cn_randn(CN_F32, ndim, shape); }

/* x rounded to dt and widened again: the reference's inputs. */
static cn_tensor *rounded(cn_tensor *x, cn_dtype dt) { return cn_cast(cn_cast(x, dt), CN_F32); }

static void test_regions(void) {
    CHECK(cn_autocast_dtype() == CN_F32);
    CHECK_EQ_INT(cn_autocast_begin(CN_BF16), 0);
    CHECK_EQ_INT(cn_autocast_begin(CN_F32), 0); /* off inside */
    CHECK(cn_autocast_dtype() == CN_F32);
    CHECK_EQ_INT(cn_autocast_end(), 0);
    CHECK(cn_autocast_dtype() == CN_BF16);
    CHECK_EQ_INT(cn_autocast_end(), 0);
    CHECK_STATUS_ERROR(cn_autocast_end(), "no autocast region is open");
    CHECK_STATUS_ERROR(cn_autocast_begin(CN_I32), "takes bf16, f16 or f32");
    CHECK(cn_autocast_dtype() == CN_F32);
}

static void test_products_equal_reference(void) {
    cn_manual_seed(1);
    cn_tensor *a = randn(CN_SHAPE(2, 5, 7)), *b = randn(CN_SHAPE(7, 3));
    cn_tensor *wl = randn(CN_SHAPE(3, 7)); /* a linear layer's weight, read transposed */
    cn_tensor *x = randn(CN_SHAPE(2, 3, 6, 5)), *w = randn(CN_SHAPE(4, 3, 3, 3)),
              *bias = randn(CN_SHAPE(4));
    cn_tensor *q = randn(CN_SHAPE(2, 4, 8)), *k = randn(CN_SHAPE(2, 6, 8)),
              *v = randn(CN_SHAPE(2, 6, 5));
    cn_tensor *xt = randn(CN_SHAPE(1, 4, 3, 3)), *wt = randn(CN_SHAPE(4, 2, 3, 3));
    cn_conv_opts co = {.padding = {1, 1}};
    cn_dtype dts[2] = {CN_BF16, CN_F16};
    /* the rounded inputs multiplied in f32, the bits of the reference
     * (the native path sums in its own order: test_native_path) */
    cn_autocast_native_mode_set(0);
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = dts[i];
        cn_autocast_begin(dt);
        cn_tensor *mm = cn_matmul(a, b), *lin = cn_matmul(a, cn_mT(cn_mT(b)));
        cn_tensor *lin_t = cn_matmul(a, cn_mT(wl)); /* cast as wl, then viewed transposed */
        cn_tensor *cv = cn_conv2d(x, w, bias, &co);
        cn_tensor *ct = cn_conv_transpose2d(xt, wt, NULL, NULL);
        cn_tensor *at = cn_scaled_dot_product_attention(q, k, v, NULL, 0, false, 0);
        cn_tensor *sum = cn_add(a, a); /* not a product: f32 as ever */
        cn_autocast_end();
        CHECK(cn_tensor_dtype(mm) == CN_F32 && cn_tensor_dtype(cv) == CN_F32);
        CHECK(th_same_bits(mm, cn_matmul(rounded(a, dt), rounded(b, dt))));
        CHECK(th_same_bits(lin, mm));
        CHECK(th_same_bits(lin_t, cn_matmul(rounded(a, dt), cn_mT(rounded(wl, dt)))));
        CHECK(th_same_bits(cv, cn_conv2d(rounded(x, dt), rounded(w, dt), rounded(bias, dt), &co)));
        CHECK(th_same_bits(ct, cn_conv_transpose2d(rounded(xt, dt), rounded(wt, dt), NULL, NULL)));
        CHECK(th_same_bits(at, cn_scaled_dot_product_attention(rounded(q, dt), rounded(k, dt),
                                                             rounded(v, dt), NULL, 0, false, 0)));
        CHECK(th_same_bits(sum, cn_add(a, a)));
        /* and it is not the f32 product */
        CHECK(!th_same_bits(mm, cn_matmul(a, b)));
    }
    cn_autocast_native_mode_set(-1);
}

/* d(sum(tanh(x W^T + c)^2))/d(W, c) with and without autocast. */
static void test_gradients(void) {
    cn_manual_seed(2);
    /* scaled so that tanh does not saturate (where its gradient is ill-conditioned) */
    cn_tensor *x = cn_mul(randn(CN_SHAPE(6, 16)), cn_scalar(CN_F32, 0.25));
    cn_tensor *w = randn(CN_SHAPE(8, 16)), *c = randn(CN_SHAPE(8));
    cn_set_requires_grad(w, true);
    cn_set_requires_grad(c, true);
    cn_tensor *w0 = cn_clone(w);
    cn_tensor *g32[2], *g16[2];
    for (int pass = 0; pass < 2; pass++) {
        if (pass) cn_autocast_begin(CN_BF16);
        cn_tensor *y = cn_tanh(cn_add(cn_matmul(x, cn_mT(w)), c));
        CHECK_EQ_INT(cn_backward(cn_sum(cn_mul(y, y), NULL, 0, false), NULL), 0);
        if (pass) cn_autocast_end();
        cn_tensor **g = pass ? g16 : g32;
        g[0] = cn_clone(cn_get_grad(w));
        g[1] = cn_clone(cn_get_grad(c));
        cn_zero_grad(w);
        cn_zero_grad(c);
    }
    CHECK(cn_tensor_dtype(w) == CN_F32 && cn_tensor_dtype(g16[0]) == CN_F32 &&
          cn_tensor_dtype(g16[1]) == CN_F32);
    CHECK(th_same_bits(w, w0));
    for (int j = 0; j < 2; j++) {
        double d2 = 0, n2 = 0;
        for (int64_t i = 0; i < cn_numel(g32[j]); i++) {
            double d = th_at(g16[j], i) - th_at(g32[j], i);
            d2 += d * d;
            n2 += th_at(g32[j], i) * th_at(g32[j], i);
        }
        /* bf16 keeps 8 bits (2^-9 relative per rounding); a few roundings,
         * through tanh, summed over rows */
        CHECK_MSG(d2 <= 1e-4 * n2 && d2 > 0, "gradient %d: off by %g of %g (norms)", j,
                  sqrt(d2), sqrt(n2));
    }
}

static void test_program(void) {
    cn_manual_seed(3);
    cn_tensor *w = randn(CN_SHAPE(5, 4)), *x = randn(CN_SHAPE(3, 5));
    cn_graph *g = cn_graph_new();
    cn_autocast_begin(CN_BF16);
    cn_tensor *ph = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 5));
    cn_tensor *y = cn_relu(cn_matmul(ph, w));
    cn_tensor *eager = cn_relu(cn_matmul(x, w));
    cn_autocast_end();
    cn_program *p = cn_compile(g, &y, 1, NULL);
    cn_tensor *out = NULL;
    CHECK(p && cn_run(p, &ph, &x, 1, &out, 1) == 0);
    CHECK(th_same_bits(out, eager));
    cn_program_free(p);
    cn_graph_free(g);
}

/* A compiled training step traced inside a region takes the same steps
 * as eager ones: the parameters' casts are graph steps, read at each run
 * (not constants of the trace). */
static void test_train_step(void) {
    cn_manual_seed(5);
    cn_tensor *x = randn(CN_SHAPE(4, 6)), *y = randn(CN_SHAPE(4, 3)), *w0 = randn(CN_SHAPE(3, 6));
    cn_tensor *w[2] = {cn_clone(w0), cn_clone(w0)};
    cn_optimizer *opt[2];
    for (int i = 0; i < 2; i++) {
        cn_set_requires_grad(w[i], true);
        opt[i] = cn_sgd(&w[i], 1, &(cn_sgd_opts){.lr = 0.05});
    }
    cn_autocast_begin(CN_BF16);
    cn_graph *g = cn_graph_new();
    cn_tensor *ph[2] = {cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 6)),
                        cn_placeholder(g, "y", CN_F32, CN_SHAPE(-1, 3))};
    cn_tensor *loss = cn_mse_loss(cn_matmul(ph[0], cn_mT(w[1])), ph[1], CN_REDUCTION_MEAN);
    cn_program *p = cn_compile_train_step(g, &loss, 1, opt[1], NULL);
    CHECK(p != NULL);
    cn_tensor *feed[2] = {x, y};
    for (int s = 0; s < 3; s++) {
        cn_optimizer_zero_grad(opt[0]);
        cn_tensor *le = cn_mse_loss(cn_matmul(x, cn_mT(w[0])), y, CN_REDUCTION_MEAN);
        CHECK(cn_backward(le, NULL) == 0 && cn_optimizer_step(opt[0]) == 0);
        cn_tensor *ls = NULL;
        CHECK(p && cn_run(p, ph, feed, 2, &ls, 1) == 0);
        CHECK_CLOSE(cn_item(ls), cn_item(le), 1e-6, 1e-6);
    }
    cn_autocast_end();
    for (int64_t i = 0; i < cn_numel(w0); i++) CHECK_CLOSE(th_at(w[1], i), th_at(w[0], i), 1e-6, 1e-6);
    CHECK(!th_same_bits(w[0], w0));
    cn_program_free(p);
    cn_graph_free(g);
    cn_optimizer_free(opt[0]);
    cn_optimizer_free(opt[1]);
}

/* Forced on: half inputs reach the CPU's matmul kernel, which multiplies
 * them with oneDNN or, lacking it, widened: the same numbers. */
static void test_native_path(void) {
    cn_manual_seed(4);
    cn_tensor *a = randn(CN_SHAPE(2, 33, 20)), *b = randn(CN_SHAPE(20, 9));
    cn_set_requires_grad(b, true);
    cn_autocast_begin(CN_BF16);
    cn_tensor *ref = cn_matmul(a, b);
    CHECK_EQ_INT(cn_backward(cn_sum(ref, NULL, 0, false), NULL), 0);
    cn_tensor *gref = cn_clone(cn_get_grad(b));
    cn_zero_grad(b);
    cn_autocast_native_mode_set(1);
    CHECK(cn_autocast_native(CN_BF16));
    cn_tensor *nat = cn_matmul(a, b);
    CHECK_EQ_INT(cn_backward(cn_sum(nat, NULL, 0, false), NULL), 0);
    cn_autocast_native_mode_set(-1);
    cn_autocast_end();
    CHECK(cn_tensor_dtype(nat) == CN_F32);
    /* oneDNN, where it runs, sums in another order */
    for (int64_t i = 0; i < cn_numel(ref); i++)
        CHECK_CLOSE(th_at(nat, i), th_at(ref, i), 1e-5, 1e-5);
    CHECK(cn_tensor_dtype(cn_get_grad(b)) == CN_F32);
    for (int64_t i = 0; i < cn_numel(gref); i++)
        CHECK_CLOSE(th_at(cn_get_grad(b), i), th_at(gref, i), 1e-5, 1e-5);
}

/* The convolutions' native path, forced: their half inputs reach the CPU's
 * kernels, oneDNN's bf16 products where it has them (this CPU's
 * instructions), else widened to f32, as with the GEMM forced; forward,
 * input and weight gradients, a bias, groups and strides, a depthwise layer
 * (always widened). Against the products with autocast's rounded inputs
 * multiplied in f32 (native off): the same numbers up to the order of the
 * sums (the gradients within a bf16 rounding), each gradient f32. */
static void test_native_conv(void) {
    cn_manual_seed(5);
    bool cpu_native = cn_autocast_native(CN_BF16); /* this CPU's own choice */
    static const int64_t cases[][9] = {
        /* N, C, H, W, O, kernel, stride, padding, groups */
        {4, 16, 10, 9, 32, 3, 1, 1, 1},
        {3, 8, 11, 11, 16, 3, 2, 0, 2},
        {2, 8, 9, 9, 8, 3, 1, 1, 8},
        {5, 3, 8, 8, 16, 1, 1, 0, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int gemm = 0; gemm < 2; gemm++) {
            const int64_t *k = cases[c];
            cn_tensor *x = randn(CN_SHAPE(k[0], k[1], k[2], k[3]));
            cn_tensor *w = randn(CN_SHAPE(k[4], k[1] / k[8], k[5], k[5]));
            cn_tensor *bias = randn(CN_SHAPE(k[4]));
            cn_tensor *params[3] = {x, w, bias}, *got[2][4];
            for (int i = 0; i < 3; i++) cn_set_requires_grad(params[i], true);
            cn_conv_opts co = {.stride = {k[6], k[6]}, .padding = {k[7], k[7]}, .groups = k[8]};
            cn_tensor *weights = NULL; /* of the loss: a gradient other than ones */
            for (int native = 0; native < 2; native++) {
                cn_autocast_native_mode_set(native);
                cn_conv_impl prev = native && gemm ? cn_conv_set_impl(CN_CONV_GEMM) : CN_CONV_AUTO;
                cn_autocast_begin(CN_BF16);
                cn_tensor *y = cn_conv2d(x, w, bias, &co);
                if (!weights) weights = cn_randn(CN_F32, cn_ndim(y), cn_shape(y));
                CHECK_EQ_INT(cn_backward(cn_sum(cn_mul(y, weights), NULL, 0, false), NULL), 0);
                cn_autocast_end();
                if (native && gemm) cn_conv_set_impl(prev);
                got[native][0] = y;
                for (int i = 0; i < 3; i++) {
                    got[native][i + 1] = cn_clone(cn_get_grad(params[i]));
                    cn_zero_grad(params[i]);
                }
            }
            cn_autocast_native_mode_set(-1);
            for (int j = 0; j < 4; j++) {
                CHECK_MSG(cn_tensor_dtype(got[1][j]) == CN_F32, "case %zu: result %d is %s", c,
                          j, cn_dtype_name(cn_tensor_dtype(got[1][j])));
                CHECK_EQ_INT(cn_numel(got[1][j]), cn_numel(got[0][j]));
                /* the gradients of the rounded x, w and bias are bf16, as
                 * PyTorch's, before their casts' gradients widen them: the
                 * two orders of the sums may round to neighbours */
                double rtol = j ? 0x1p-7 : 1e-5, atol = 1e-4;
                if (c == 2 && !gemm) rtol = atol = 0; /* depthwise: f32 both times */
                for (int64_t i = 0; i < cn_numel(got[0][j]); i++)
                    CHECK_MSG(th_close(th_at(got[1][j], i), th_at(got[0][j], i), rtol, atol),
                              "case %zu (GEMM %d), result %d [%lld]: %.9g, expected %.9g", c, gemm, j,
                              (long long)i, th_at(got[1][j], i), th_at(got[0][j], i));
            }
            /* and not the f32 product, but for the depthwise layer (case
             * 2), which autocast leaves in f32 (the same kernel but with
             * the GEMM forced) */
            if (c != 2) CHECK(!th_same_bits(got[1][0], cn_conv2d(x, w, bias, &co)));
            else if (!gemm) CHECK(th_same_bits(got[1][0], cn_conv2d(x, w, bias, &co)));
            /* On a CPU with the instructions oneDNN took all three products
             * but of the depthwise layer (case 2). */
            int64_t oh = (k[2] + 2 * k[7] - k[5]) / k[6] + 1, ow = (k[3] + 2 * k[7] - k[5]) / k[6] + 1;
            cn_conv_geom g = {k[0], k[1], k[2], k[3], k[4], k[5], k[5], oh, ow,
                              k[6], k[6], k[7], k[7], 1, 1, k[8]};
            for (int which = 0; which < 3 && gemm == 0 && cpu_native; which++)
                CHECK_MSG(cn_conv_half_native(&g, CN_BF16, which) == (c != 2),
                          "case %zu: product %d %s oneDNN's", c, which,
                          c != 2 ? "not on" : "on");
        }
    /* A depthwise convolution stays f32 under autocast, its result f32 even
     * for a bf16 input (widened, not rounded again). */
    cn_tensor *xd = randn(CN_SHAPE(2, 8, 6, 6)), *wd = randn(CN_SHAPE(8, 1, 3, 3));
    cn_conv_opts dwo = {.padding = {1, 1}, .groups = 8};
    cn_autocast_begin(CN_BF16);
    cn_tensor *yd = cn_conv2d(xd, wd, NULL, &dwo), *yh = cn_conv2d(cn_cast(xd, CN_BF16), wd, NULL, &dwo);
    cn_autocast_end();
    CHECK(cn_tensor_dtype(yd) == CN_F32 && cn_tensor_dtype(yh) == CN_F32);
    CHECK(th_same_bits(yd, cn_conv2d(xd, wd, NULL, &dwo)));
    CHECK(th_same_bits(yh, cn_conv2d(cn_cast(cn_cast(xd, CN_BF16), CN_F32), wd, NULL, &dwo)));
    /* conv_transpose2d with a bias (its bias added to the input gradient's
     * channels after oneDNN's product), strided */
    cn_tensor *xt = randn(CN_SHAPE(2, 16, 5, 5)), *wt = randn(CN_SHAPE(16, 8, 3, 3));
    cn_tensor *bt = randn(CN_SHAPE(8)), *yt[2];
    cn_conv_opts tr = {.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}};
    for (int native = 0; native < 2; native++) {
        cn_autocast_native_mode_set(native);
        cn_autocast_begin(CN_BF16);
        yt[native] = cn_conv_transpose2d(xt, wt, bt, &tr);
        cn_autocast_end();
    }
    cn_autocast_native_mode_set(-1);
    CHECK(cn_tensor_dtype(yt[1]) == CN_F32 && cn_numel(yt[1]) == 2 * 8 * 10 * 10);
    for (int64_t i = 0; i < cn_numel(yt[0]); i++)
        CHECK_CLOSE(th_at(yt[1], i), th_at(yt[0], i), 1e-5, 1e-4);
}

/* A program's products under autocast (native, forced): the casts of its
 * constant weights are folded, and where oneDNN takes the bf16 products
 * the program keeps the bf16 weights in oneDNN's formats, packed once
 * (counted in packed_bytes): a convolution's, and a linear layer's
 * (transposed) weight. The bits of the program without packs, and eager
 * mode's numbers. */
static void test_native_program_packs(void) {
    cn_manual_seed(6);
    bool cpu_native = cn_autocast_native(CN_BF16); /* this CPU's own choice */
    cn_tensor *w = randn(CN_SHAPE(32, 16, 3, 3)), *bias = randn(CN_SHAPE(32));
    cn_tensor *wl = randn(CN_SHAPE(96, 48));
    cn_tensor *x[2] = {randn(CN_SHAPE(2, 16, 9, 9)), randn(CN_SHAPE(70, 48))};
    const cn_conv_opts pad1 = {.padding = {1, 1}};
    cn_autocast_native_mode_set(1);
    cn_graph *g = cn_graph_new();
    cn_autocast_begin(CN_BF16);
    cn_tensor *ph[2] = {cn_placeholder(g, "x", CN_F32, CN_SHAPE(2, 16, 9, 9)),
                        cn_placeholder(g, "h", CN_F32, CN_SHAPE(70, 48))};
    cn_tensor *y[2] = {cn_relu(cn_conv2d(ph[0], w, bias, &pad1)), cn_matmul(ph[1], cn_mT(wl))};
    cn_tensor *eager[2] = {cn_relu(cn_conv2d(x[0], w, bias, &pad1)), cn_matmul(x[1], cn_mT(wl))};
    cn_autocast_end();
    cn_program *p = cn_compile(g, y, 2, NULL);
    cn_program *q = cn_compile(g, y, 2, &(cn_compile_opts){.opt_level = 2, .no_packing = true});
    cn_tensor *r[2] = {NULL, NULL}, *u[2] = {NULL, NULL};
    CHECK(p && q && cn_run(p, ph, x, 2, r, 2) == 0 && cn_run(q, ph, x, 2, u, 2) == 0);
    for (int i = 0; i < 2 && r[i] && u[i]; i++) {
        CHECK(cn_tensor_dtype(r[i]) == CN_F32);
        CHECK(cn_equal(r[i], u[i]));
        CHECK(cn_allclose(r[i], eager[i], 1e-5, 1e-4));
    }
    cn_program_stats st;
    cn_program_stats_get(p, &st);
    if (cpu_native) CHECK(st.packed_bytes >= 2 * (32 * 16 * 9 + 96 * 48));
    cn_autocast_native_mode_set(-1);
    cn_program_free(p);
    cn_program_free(q);
    cn_graph_free(g);
}

/* The blocking of cn_dnnl_matmul (rows split over the pool, a last short
 * block, a transposed b) against the GEMM, in f32, which oneDNN runs on
 * any x86-64 CPU. */
static void test_dnnl_blocks(void) {
    int64_t m = 70, n = 11, k = 13;
    float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
    float *c = malloc(sizeof(float) * (size_t)(m * n)), *r = malloc(sizeof(float) * (size_t)(m * n));
    for (int64_t i = 0; i < m * k; i++) a[i] = (float)th_uniform(-1, 1);
    for (int64_t i = 0; i < k * n; i++) b[i] = (float)th_uniform(-1, 1);
    int saved = cn_get_num_threads();
    cn_set_num_threads(2); /* two blocks of 35 rows, whatever the machine */
    for (int t = 0; t < 3; t++) {
        /* t = 1: b read as the transpose of an [n, k] matrix; t = 2: a as
         * the transpose of a [k, m] one (copied to rows before the calls) */
        int64_t rsb = t == 1 ? 1 : n, csb = t == 1 ? k : 1;
        int64_t rsa = t == 2 ? 1 : k, csa = t == 2 ? m : 1;
        int rc = cn_dnnl_matmul(CN_F32, m, n, k, a, rsa, csa, b, rsb, csb, c, NULL);
        cn_gemm_builtin(CN_F32, m, n, k, a, rsa, csa, b, rsb, csb, r, n);
#ifdef CN_HAVE_DNNL
        CHECK_EQ_INT(rc, 0);
        for (int64_t i = 0; i < m * n; i++) CHECK_CLOSE(c[i], r[i], 1e-5, 1e-5);
#else
        CHECK_EQ_INT(rc, 1);
#endif
    }
    cn_set_num_threads(saved);
    free(a), free(b), free(c), free(r);
}

/* The native products' bits do not depend on the thread count: the weight
 * gradient's product (x^T, a transposed first operand over k = 2048, a
 * size where oneDNN's own copy of it summed in an order that followed the
 * call's rows) and a linear layer's, at 1, 2 and 3 threads (forced native:
 * oneDNN's bf16 products on a CPU with the instructions, widened
 * elsewhere). */
static void test_native_threads(void) {
    cn_manual_seed(8);
    cn_tensor *x = randn(CN_SHAPE(2048, 128)), *dy = randn(CN_SHAPE(2048, 130));
    cn_tensor *w = randn(CN_SHAPE(130, 128));
    int saved = cn_get_num_threads();
    cn_autocast_native_mode_set(1);
    cn_tensor *r[3][2];
    for (int t = 0; t < 3; t++) {
        cn_set_num_threads(t + 1);
        cn_autocast_begin(CN_BF16);
        r[t][0] = cn_matmul(cn_mT(x), dy);
        r[t][1] = cn_matmul(x, cn_mT(w));
        cn_autocast_end();
    }
    cn_autocast_native_mode_set(-1);
    cn_set_num_threads(saved);
    for (int t = 1; t < 3; t++)
        for (int j = 0; j < 2; j++)
            CHECK_MSG(th_same_bits(r[t][j], r[0][j]), "product %d at %d threads: other bits", j,
                      t + 1);
}

/* The flags as the kernel reports them ("flags : ... avx512_bf16 ..."). */
static bool cpuinfo_has(const char *flags, const char *name) {
    size_t n = strlen(name);
    for (const char *p = flags; (p = strstr(p, name)); p += n)
        if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || !p[n])) return true;
    return false;
}

static void test_selection(void) {
    /* mode 0 off, 1 on, -1 automatic: both the CPU and oneDNN */
    CHECK(!cn_autocast_native_choice(0, true, true));
    CHECK(cn_autocast_native_choice(1, false, false));
    CHECK(cn_autocast_native_choice(-1, true, true));
    CHECK(!cn_autocast_native_choice(-1, true, false));
    CHECK(!cn_autocast_native_choice(-1, false, true));
    CHECK(!cn_autocast_native(CN_F32));
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[8192];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = !strncmp(line, "flags", 5);
    fclose(f);
    if (!found) return;
    cn_cpu_lowp lp = cn_cpu_lowp_features();
    bool avx512 = cpuinfo_has(line, "avx512f") && cpuinfo_has(line, "avx512bw");
    CHECK_EQ_INT(lp.amx_bf16, cpuinfo_has(line, "amx_bf16"));
    CHECK_EQ_INT(lp.amx_fp16, cpuinfo_has(line, "amx_fp16"));
    CHECK_EQ_INT(lp.avx512_bf16, avx512 && cpuinfo_has(line, "avx512_bf16"));
    CHECK_EQ_INT(lp.avx512_fp16, avx512 && cpuinfo_has(line, "avx512_fp16"));
    /* The int8 ones (the int8 GEMM's VNNI kernel, test_quant). */
    CHECK_EQ_INT(lp.avx512_vnni, avx512 && cpuinfo_has(line, "avx512_vnni"));
    CHECK_EQ_INT(lp.avx_vnni, cpuinfo_has(line, "avx2") && cpuinfo_has(line, "avx_vnni"));
    CHECK_EQ_INT(lp.amx_int8, cpuinfo_has(line, "amx_int8"));
    /* Without the instructions the automatic choice is f32 (oneDNN is not asked). */
    if (!lp.amx_bf16 && !lp.avx512_bf16) CHECK(!cn_autocast_native(CN_BF16));
    fprintf(stderr, "  this CPU: avx512_bf16 %d amx_bf16 %d avx512_fp16 %d amx_fp16 %d "
                    "avx512_vnni %d avx_vnni %d amx_int8 %d; native bf16 %d f16 %d\n",
            lp.avx512_bf16, lp.amx_bf16, lp.avx512_fp16, lp.amx_fp16, lp.avx512_vnni,
            lp.avx_vnni, lp.amx_int8, cn_autocast_native(CN_BF16), cn_autocast_native(CN_F16));
}

static void test_grad_scaler(void) {
    double p0[] = {1, 2, 3}, cv[] = {0.5, -1, 0.25};
    cn_tensor *p = th_make(CN_F32, CN_SHAPE(3), p0, TH_CONTIG);
    cn_tensor *cvec = th_make(CN_F32, CN_SHAPE(3), cv, TH_CONTIG);
    cn_set_requires_grad(p, true);
    cn_optimizer *opt = cn_sgd(&p, 1, &(cn_sgd_opts){.lr = 1});
    CHECK(cn_grad_scaler_new(opt, &(cn_grad_scaler_opts){.backoff_factor = 2}) == NULL);
    CHECK(strstr(cn_last_error(), "backoff_factor") != NULL);
    cn_grad_scaler *gs = cn_grad_scaler_new(
        opt, &(cn_grad_scaler_opts){.init_scale = 4, .growth_interval = 2});
    CHECK(gs && cn_grad_scaler_get_scale(gs) == 4);
    double want[3] = {1, 2, 3};
    /* steps 1, 2: gradient c (scaled by 4, then unscaled) taken; after the
     * second the scale doubles; step 3: an inf, skipped and halved. */
    for (int step = 1; step <= 3; step++) {
        cn_optimizer_zero_grad(opt);
        double inf[] = {INFINITY, 1, 1};
        cn_tensor *c = step < 3 ? cvec : th_make(CN_F32, CN_SHAPE(3), inf, TH_CONTIG);
        cn_tensor *loss = cn_sum(cn_mul(p, c), NULL, 0, false);
        cn_tensor *scaled = cn_grad_scaler_scale(gs, loss);
        if (step < 3) CHECK_CLOSE(cn_item(scaled), cn_item(loss) * 4, 1e-6, 0);
        CHECK_EQ_INT(cn_backward(scaled, NULL), 0);
        CHECK_EQ_INT(cn_optimizer_step(opt), 0);
        if (step < 3)
            for (int i = 0; i < 3; i++) want[i] -= cv[i];
        for (int i = 0; i < 3; i++) CHECK_CLOSE(th_at(p, i), want[i], 0, 0);
        CHECK_EQ_INT(cn_grad_scaler_last_skipped(gs), step == 3);
    }
    CHECK_EQ_INT(cn_grad_scaler_skipped(gs), 1);
    CHECK_CLOSE(cn_grad_scaler_get_scale(gs), 4, 0, 0);
    cn_grad_scaler_state st = cn_grad_scaler_get_state(gs);
    CHECK(st.scale == 4 && st.growth_tracker == 0 && st.skipped == 1);
    cn_grad_scaler_free(gs);
    /* A scaler given a saved state goes on as the first would have: one
     * finite step after a growth_tracker of 1 doubles the scale. */
    gs = cn_grad_scaler_new(opt, &(cn_grad_scaler_opts){.init_scale = 1, .growth_interval = 2});
    CHECK(cn_grad_scaler_set_state(gs, &(cn_grad_scaler_state){-1, 0, 0}) < 0);
    CHECK(strstr(cn_last_error(), "scale -1") != NULL);
    CHECK_EQ_INT(cn_grad_scaler_set_state(gs, &(cn_grad_scaler_state){4, 1, 1}), 0);
    cn_optimizer_zero_grad(opt);
    cn_tensor *loss = cn_sum(cn_mul(p, cvec), NULL, 0, false);
    cn_tensor *scaled = cn_grad_scaler_scale(gs, loss);
    CHECK_CLOSE(cn_item(scaled), cn_item(loss) * 4, 1e-6, 0);
    CHECK_EQ_INT(cn_backward(scaled, NULL), 0);
    CHECK_EQ_INT(cn_optimizer_step(opt), 0);
    for (int i = 0; i < 3; i++) CHECK_CLOSE(th_at(p, i), want[i] - cv[i], 0, 0);
    st = cn_grad_scaler_get_state(gs);
    CHECK(st.scale == 8 && st.growth_tracker == 0 && st.skipped == 1);
    cn_grad_scaler_free(gs);
    cn_optimizer_free(opt);
}

/* The same in a compiled f16 step: the skip, and the halved scale read by
 * the next run (the scaled loss is an output beside the loss). */
static void test_grad_scaler_compiled(void) {
    cn_manual_seed(6);
    cn_tensor *w = randn(CN_SHAPE(3, 6)), *x = randn(CN_SHAPE(4, 6));
    cn_tensor *xinf = cn_mul(x, cn_scalar(CN_F32, INFINITY));
    cn_set_requires_grad(w, true);
    cn_optimizer *opt = cn_sgd(&w, 1, &(cn_sgd_opts){.lr = 0.01});
    cn_grad_scaler *gs = cn_grad_scaler_new(opt, &(cn_grad_scaler_opts){.init_scale = 1024});
    cn_autocast_begin(CN_F16);
    cn_graph *g = cn_graph_new();
    cn_tensor *ph = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 6));
    cn_tensor *outs[2] = {NULL, cn_sum(cn_square(cn_matmul(ph, cn_mT(w))), NULL, 0, false)};
    outs[0] = cn_grad_scaler_scale(gs, outs[1]);
    cn_program *p = cn_compile_train_step(g, outs, 2, opt, NULL);
    CHECK(p != NULL);
    double want_scale[3] = {1024, 512, 512};
    for (int s = 0; s < 3 && p; s++) {
        cn_tensor *before = cn_clone(w), *r[2] = {NULL, NULL}, *feed = s == 1 ? xinf : x;
        CHECK_EQ_INT(cn_run(p, &ph, &feed, 1, r, 2), 0);
        if (s != 1) CHECK_CLOSE(cn_item(r[0]) / cn_item(r[1]), s ? 512 : 1024, 1e-6, 0);
        CHECK_EQ_INT(th_same_bits(w, before), s == 1); /* the inf step changes nothing */
        CHECK_CLOSE(cn_grad_scaler_get_scale(gs), want_scale[s], 0, 0);
    }
    cn_autocast_end();
    CHECK_EQ_INT(cn_grad_scaler_skipped(gs), 1);
    cn_program_free(p);
    cn_graph_free(g);
    cn_grad_scaler_free(gs);
    cn_optimizer_free(opt);
}

int main(void) {
    RUN(test_regions);
    RUN(test_products_equal_reference);
    RUN(test_gradients);
    RUN(test_program);
    RUN(test_train_step);
    RUN(test_native_path);
    RUN(test_native_conv);
    RUN(test_native_program_packs);
    RUN(test_dnnl_blocks);
    RUN(test_native_threads);
    RUN(test_selection);
    RUN(test_grad_scaler);
    RUN(test_grad_scaler_compiled);
    return th_summary();
}
