/* layer_norm (src/ops/layer_norm.c, the CPU kernel
 * src/backend/cpu/layer_norm.c): values against a two-pass loop in double
 * in every layout (ndim 1 and 2, rows not a multiple of the vector width,
 * weight and bias present or not, rows far from zero), the same bits for
 * any thread count, finite differences and forward mode (the layer_norm
 * cases of grad_cases_nn.h, eager and in a static graph), second order
 * against the composition of mean, var and elementwise ops, ONNX export
 * read back, and the errors. PyTorch's nn.LayerNorm is test_nn_parity's. */
#include "gradcheck.h"
#include "ops/op.h"

#include "grad_cases_nn.h"

static const double *host_f64(cn_tensor *t) {
    return t ? cn_data(cn_contiguous(cn_cast(cn_detach(t), CN_F64))) : NULL;
}

/* y (host doubles, [rows, n]) from x, w and b (NULL: ones, zeros). */
static void ref_layer_norm(const double *x, const double *w, const double *b, double *y,
                           int64_t rows, int64_t n, double eps) {
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * n;
        double mean = 0, var = 0;
        for (int64_t k = 0; k < n; k++) mean += xr[k];
        mean /= (double)n;
        for (int64_t k = 0; k < n; k++) var += (xr[k] - mean) * (xr[k] - mean);
        double inv = 1 / sqrt(var / (double)n + eps);
        for (int64_t k = 0; k < n; k++)
            y[r * n + k] = (xr[k] - mean) * inv * (w ? w[k] : 1) + (b ? b[k] : 0);
    }
}

static void check_one(cn_tensor *x, int nd, cn_tensor *w, cn_tensor *b, double eps, double tol,
                      const char *what) {
    int64_t n = 1, numel = cn_numel(x);
    for (int d = cn_ndim(x) - nd; d < cn_ndim(x); d++) n *= cn_shape(x)[d];
    cn_tensor *y = cn_layer_norm(x, nd, w, b, eps);
    CHECK_MSG(y, "%s: %s", what, cn_last_error());
    if (!y) return;
    CHECK_MSG(cn_tensor_dtype(y) == cn_tensor_dtype(x) && th_same_shape(y, cn_ndim(x), cn_shape(x)),
              "%s: dtype or shape", what);
    double *want = malloc(sizeof(double) * (size_t)(numel + 1));
    ref_layer_norm(host_f64(x), w ? host_f64(w) : NULL, b ? host_f64(b) : NULL, want, numel / n, n,
                   eps);
    const double *got = host_f64(y);
    double worst = 0;
    for (int64_t k = 0; k < numel; k++)
        worst = fmax(worst, fabs(got[k] - want[k]) / fmax(1, fabs(want[k])));
    CHECK_MSG(worst <= tol, "%s: off by %g (tolerance %g)", what, worst, tol);
    free(want);
}

/* Every layout of th_make, f64 and f32, with and without weight and bias. */
static void test_against_loop(void) {
    th_seed(1);
    const struct {
        int rank, nd;
        int64_t shape[4];
    } cases[] = {{2, 1, {3, 7}}, {3, 2, {2, 2, 17}}, {2, 1, {4, 33}}, {2, 1, {5, 1}}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int layout = 0; layout < TH_NLAYOUTS; layout++)
            for (int f = 0; f < 2; f++)
                for (int affine = 0; affine < 3; affine++) {
                    cn_scope_begin();
                    char what[96];
                    snprintf(what, sizeof what, "case %zu, layout %d, %s, affine %d", c, layout,
                             f ? "f32" : "f64", affine);
                    cn_dtype dt = f ? CN_F32 : CN_F64;
                    int r = cases[c].rank, nd = cases[c].nd;
                    const int64_t *ps = cases[c].shape + r - nd;
                    cn_tensor *x = th_random(dt, r, cases[c].shape, -2, 2, layout, NULL);
                    cn_tensor *w = affine ? th_random(dt, nd, ps, -2, 2, layout, NULL) : NULL;
                    cn_tensor *b = affine == 2 ? th_random(dt, nd, ps, -2, 2, layout, NULL) : NULL;
                    check_one(x, nd, w, b, 1e-5, f ? 1e-6 : 1e-13, what);
                    cn_scope_end();
                }
    /* Rows far from zero: the two passes lose nothing a one-pass E[x^2] -
     * E[x]^2 would. */
    cn_tensor *far = cn_add_scalar(th_random(CN_F32, 2, (int64_t[]){3, 40}, -1, 1, TH_CONTIG, NULL),
                                   3e4);
    check_one(far, 1, NULL, NULL, 0, 1e-6, "f32 rows around 3e4");
    /* Zero sizes; half types compute in f32 and round once. */
    CHECK_SHAPE(cn_layer_norm(cn_zeros(CN_F32, CN_SHAPE(0, 4)), 1, NULL, NULL, 1e-5), 0, 4);
    cn_tensor *h = th_random(CN_BF16, 2, (int64_t[]){3, 8}, -2, 2, TH_CONTIG, NULL);
    cn_tensor *yh = cn_layer_norm(h, 1, NULL, NULL, 1e-5);
    cn_tensor *yf = cn_layer_norm(cn_cast(h, CN_F32), 1, NULL, NULL, 1e-5);
    CHECK(yh && cn_tensor_dtype(yh) == CN_BF16 && cn_allclose(yh, cn_cast(yf, CN_BF16), 0, 0));
    /* Mixed types compute in the promoted one. */
    cn_tensor *w64 = cn_ones(CN_F64, CN_SHAPE(8));
    cn_tensor *ym = cn_layer_norm(cn_cast(h, CN_F32), 1, w64, NULL, 1e-5);
    CHECK(ym && cn_tensor_dtype(ym) == CN_F64);
}

/* Rows are split across threads, each computed whole: the same bits. */
static void test_same_bits_any_threads(void) {
    th_seed(4);
    int64_t shape[2] = {400, 301}, tshape[2] = {301, 400};
    cn_tensor *x = th_random(CN_F32, 2, shape, -2, 2, TH_CONTIG, NULL);
    cn_tensor *xt = cn_transpose(th_random(CN_F32, 2, tshape, -2, 2, TH_CONTIG, NULL), 0, 1);
    cn_tensor *w = th_random(CN_F32, 1, shape + 1, -2, 2, TH_CONTIG, NULL);
    int before = cn_get_num_threads();
    cn_set_num_threads(1);
    cn_tensor *a = cn_layer_norm(x, 1, w, w, 1e-5), *at = cn_layer_norm(xt, 1, w, NULL, 1e-5);
    cn_set_num_threads(2);
    cn_tensor *b = cn_layer_norm(x, 1, w, w, 1e-5), *bt = cn_layer_norm(xt, 1, w, NULL, 1e-5);
    cn_set_num_threads(before);
    CHECK(a && b && cn_allclose(a, b, 0, 0));
    CHECK(at && bt && cn_allclose(at, bt, 0, 0));
    /* A strided row gives the bits of its contiguous copy. */
    CHECK(at && cn_allclose(at, cn_layer_norm(cn_contiguous(xt), 1, w, NULL, 1e-5), 0, 0));
    /* Rows whose offsets span 16 consecutive elements out of order: an
     * NCHW [1, 8, 2, 8] tensor permuted to [N, W, H, C] has rows at 0, 8,
     * 1, 9, ..., 7, 15 (not a tile of adjacent rows). */
    int64_t nchw[4] = {1, 8, 2, 8};
    int perm[4] = {0, 3, 2, 1};
    cn_tensor *xp = cn_permute(th_random(CN_F32, 4, nchw, -2, 2, TH_CONTIG, NULL), perm, 4);
    cn_tensor *p = cn_layer_norm(xp, 1, NULL, NULL, 1e-5);
    CHECK(p && cn_allclose(p, cn_layer_norm(cn_contiguous(xp), 1, NULL, NULL, 1e-5), 0, 0));
}

/* The composition the op replaces, with its own ops' gradient rules. */
static cn_tensor *composed(cn_tensor *x, cn_tensor *w, cn_tensor *b, double eps) {
    int ax = -1;
    cn_tensor *d = cn_sub(x, cn_mean(x, &ax, 1, true));
    cn_tensor *r = cn_rsqrt(cn_add_scalar(cn_var(x, &ax, 1, 0, true), eps));
    return cn_add(cn_mul(cn_mul(d, r), w), b);
}

static void test_gradients(void) {
    size_t n = sizeof grad_cases_nn / sizeof grad_cases_nn[0];
    int seen = 0;
    for (size_t c = 0; c < n; c++) {
        if (strcmp(grad_cases_nn[c].op, "layer_norm")) continue;
        seen++;
        th_seed(200 + c);
        for (int layout = 0; layout < TH_NLAYOUTS; layout++)
            if (!gc_check_case(&grad_cases_nn[c], layout)) break;
        gc_check_static(&grad_cases_nn[c]);
    }
    CHECK(seen >= 3);
    /* Second order: the Hessian-vector product of sum(y^2 u) in x, w and
     * b, against the composition's. */
    th_seed(9);
    int64_t xs[2] = {3, 5};
    cn_tensor *in[3] = {th_random(CN_F64, 2, xs, -2, 2, TH_CONTIG, NULL),
                        th_random(CN_F64, 1, xs + 1, -2, 2, TH_CONTIG, NULL),
                        th_random(CN_F64, 1, xs + 1, -2, 2, TH_CONTIG, NULL)};
    cn_tensor *u = th_random(CN_F64, 2, xs, -2, 2, TH_CONTIG, NULL);
    cn_tensor *v = th_random(CN_F64, 2, xs, -2, 2, TH_CONTIG, NULL);
    for (int k = 0; k < 3; k++) cn_set_requires_grad(in[k], true);
    cn_tensor *hv[2][3] = {{0}};
    for (int f = 0; f < 2; f++) {
        cn_tensor *y = f ? composed(in[0], in[1], in[2], 1e-3)
                         : cn_layer_norm(in[0], 1, in[1], in[2], 1e-3);
        cn_tensor *l = cn_sum(cn_mul(cn_square(y), u), NULL, 0, false), *g[3];
        CHECK(cn_grad(&l, NULL, 1, in, 3, g, CN_GRAD_CREATE_GRAPH) == 0);
        cn_tensor *gv = cn_sum(cn_mul(g[0], v), NULL, 0, false);
        CHECK(cn_grad(&gv, NULL, 1, in, 3, hv[f], 0) == 0);
    }
    for (int k = 0; k < 3; k++)
        CHECK_MSG(hv[0][k] && hv[1][k] && cn_allclose(hv[0][k], hv[1][k], 1e-10, 1e-10),
                  "second order, input %d", k);
}

static void test_errors(void) {
    cn_tensor *x = cn_ones(CN_F32, CN_SHAPE(2, 3, 4));
    CHECK_ERROR(cn_layer_norm(cn_ones(CN_I64, CN_SHAPE(3, 4)), 1, NULL, NULL, 1e-5),
                "layer_norm: x is i64; layer normalization needs a float tensor");
    CHECK_ERROR(cn_layer_norm(x, 0, NULL, NULL, 1e-5), "ndim 0 (the normalized axes) must be in [1, 3]");
    CHECK_ERROR(cn_layer_norm(x, 4, NULL, NULL, 1e-5), "ndim 4");
    CHECK_ERROR(cn_layer_norm(x, 1, cn_ones(CN_F32, CN_SHAPE(3)), NULL, 1e-5),
                "weight [3] must have the normalized shape, the last 1 sizes of x [2, 3, 4]");
    CHECK_ERROR(cn_layer_norm(x, 2, NULL, cn_ones(CN_F32, CN_SHAPE(4)), 1e-5), "bias [4]");
    CHECK_ERROR(cn_layer_norm(x, 1, NULL, NULL, -1), "eps -1 must be >= 0");
    CHECK_ERROR(cn_layer_norm(x, 1, NULL, NULL, NAN), "eps nan");
    cn_attrs a = {.i = {1, 1}};
    CHECK_ERROR(cn_op_apply(CN_OP_layer_norm, &x, 1, &a), "got 1 inputs for x, weight");
    CHECK(cn_layer_norm(NULL, 1, NULL, NULL, 1e-5) == NULL);
}

#ifdef CN_HAVE_ONNX
/* Exported as LayerNormalization (ones for an absent weight), imported back
 * and run at two batch sizes: the library's values. */
static void test_onnx_export(void) {
    th_seed(7);
    for (int v = 0; v < 3; v++) {
        cn_scope_begin();
        cn_dtype dt = v == 2 ? CN_F64 : CN_F32;
        int nd = v == 1 ? 2 : 1;
        cn_graph *g = cn_graph_new();
        cn_tensor *p = cn_placeholder(g, "x", dt, CN_SHAPE(-1, 3, 5));
        int64_t ps[2] = {3, 5};
        cn_tensor *w = v != 1 ? th_random(dt, nd, ps + 2 - nd, -2, 2, TH_CONTIG, NULL) : NULL;
        cn_tensor *b = v == 0 ? th_random(dt, nd, ps + 2 - nd, -2, 2, TH_CONTIG, NULL) : NULL;
        cn_tensor *sy = cn_layer_norm(p, nd, w, b, 1e-3);
        void *buf = NULL;
        size_t size = 0;
        int rc = cn_onnx_export_buffer(g, &sy, 1, &buf, &size, NULL);
        CHECK_MSG(rc == 0, "variant %d: export: %s", v, cn_last_error());
        cn_onnx_model *m = rc == 0 ? cn_onnx_load_buffer(buf, size, NULL, NULL) : NULL;
        CHECK_MSG(rc != 0 || m, "variant %d: import: %s", v, cn_last_error());
        for (int64_t B = 1; m && B <= 3; B += 2) {
            cn_tensor *x = th_random(dt, 3, (int64_t[]){B, 3, 5}, -2, 2, TH_CONTIG, NULL);
            cn_tensor *out[1] = {0};
            CHECK_MSG(cn_onnx_run(m, &x, out) == 0, "run: %s", cn_last_error());
            CHECK_MSG(out[0] && cn_allclose(out[0], cn_layer_norm(x, nd, w, b, 1e-3), 1e-6, 1e-6),
                      "variant %d, batch %lld: ONNX differs", v, (long long)B);
        }
        cn_onnx_free(m);
        free(buf);
        cn_graph_free(g);
        cn_scope_end();
    }
}
#endif

int main(void) {
    RUN(test_against_loop);
    RUN(test_same_bits_any_threads);
    RUN(test_gradients);
    RUN(test_errors);
#ifdef CN_HAVE_ONNX
    RUN(test_onnx_export);
#endif
    return th_summary();
}
