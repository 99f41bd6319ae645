/* softmax, log_softmax and cumsum against naive double loops over random
 * shapes, axes and layouts, wide and long lines, rank 0, empty axes,
 * integer and half inputs, special values, errors, and the same bits for
 * 1 and 2 threads on large tensors. */
#include "harness.h"

enum { K_SOFTMAX, K_LOG_SOFTMAX, K_CUMSUM, K_N };
static const char *kname[K_N] = {"softmax", "log_softmax", "cumsum"};

static cn_tensor *apply(int kind, cn_tensor *x, int axis) {
    if (kind == K_SOFTMAX) return cn_softmax(x, axis);
    if (kind == K_LOG_SOFTMAX) return cn_log_softmax(x, axis);
    return cn_cumsum(x, axis);
}

/* One line of n values at stride `step` in row-major vals, into out. */
static void ref_line(int kind, const double *v, double *o, int64_t n, int64_t step) {
    double m = -INFINITY, s = 0;
    if (kind == K_CUMSUM) {
        for (int64_t i = 0; i < n; i++) o[i * step] = s += v[i * step];
        return;
    }
    for (int64_t i = 0; i < n; i++) m = isnan(v[i * step]) || v[i * step] > m ? v[i * step] : m;
    for (int64_t i = 0; i < n; i++) s += exp(v[i * step] - m);
    for (int64_t i = 0; i < n; i++)
        o[i * step] = kind == K_SOFTMAX ? exp(v[i * step] - m) / s : (v[i * step] - m) - log(s);
}

static void ref_apply(int kind, int nd, const int64_t *shape, const double *vals, int axis,
                      double *out) {
    if (nd == 0) {
        ref_line(kind, vals, out, 1, 1);
        return;
    }
    int64_t outer = 1, inner = 1, len = shape[axis];
    for (int d = 0; d < axis; d++) outer *= shape[d];
    for (int d = axis + 1; d < nd; d++) inner *= shape[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++)
            ref_line(kind, vals + o * len * inner + j, out + o * len * inner + j, len, inner);
}

static double *values_of(const cn_tensor *t) {
    int64_t n = cn_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    cn_copy_to_buffer(t, CN_F64, v, sizeof(double) * (size_t)(n > 0 ? n : 1));
    return v;
}

static void check_case(int kind, cn_tensor *x, int nd, const int64_t *shape, const double *vals,
                       int axis, double rtol, double atol, const char *what) {
    cn_tensor *y = apply(kind, x, axis);
    CHECK_MSG(y != NULL, "%s %s: failed: %s", kname[kind], what, cn_last_error());
    if (!y) return;
    CHECK_MSG(th_same_shape(y, nd, shape), "%s %s: wrong shape", kname[kind], what);
    int64_t n = th_numel(nd, shape);
    double *want = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    ref_apply(kind, nd, shape, vals, nd ? (axis + nd) % nd : 0, want);
    double *got = values_of(y);
    int bad = 0;
    for (int64_t k = 0; k < n && bad < 3; k++)
        if (!th_close(got[k], want[k], rtol, atol)) {
            bad++;
            CHECK_MSG(0, "%s %s: element %" PRId64 " = %.9g, expected %.9g", kname[kind], what, k,
                      got[k], want[k]);
        }
    th_checks++;
    free(want);
    free(got);
}

static void test_random(void) {
    th_seed(21);
    for (int trial = 0; trial < 300; trial++) {
        int nd = (int)th_randint(0, 5);
        int64_t shape[CN_MAX_DIMS];
        th_random_shape(nd, trial % 10 == 0 ? 0 : 1, 6, shape);
        cn_dtype dt = trial % 3 == 0 ? CN_F64 : CN_F32;
        int layout = (int)th_randint(0, TH_NLAYOUTS);
        int axis = nd ? (int)th_randint(-nd, nd) : (int)th_randint(-1, 1);
        int64_t n = th_numel(nd, shape);
        double *vals = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
        cn_tensor *x = th_random(dt, nd, shape, -6, 6, layout, vals);
        char what[96];
        snprintf(what, sizeof what, "trial %d (rank %d, axis %d, layout %d, %s)", trial, nd, axis,
                 layout, cn_dtype_name(dt));
        double tol = dt == CN_F32 ? 1e-5 : 1e-12;
        for (int kind = 0; kind < K_N; kind++)
            check_case(kind, x, nd, shape, vals, axis, tol, tol, what);
        free(vals);
    }
}

/* Lines longer than a chunk, tiles wider than 256 and a ragged last tile,
 * an axis of one element, and columns of a few elements. */
static void test_large_layouts(void) {
    th_seed(22);
    struct {
        int nd;
        int64_t shape[3];
        int axis;
    } cases[] = {{2, {3, 1500}, 1}, {3, {3, 7, 300}, 1}, {3, {2, 70, 600}, 0},
                 {2, {2000, 3}, 0}, {3, {4, 1, 50}, 1},  {3, {5, 130, 9}, -2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int nd = cases[c].nd;
        int64_t n = th_numel(nd, cases[c].shape);
        double *vals = malloc(sizeof(double) * (size_t)n);
        for (int layout = 0; layout < TH_NLAYOUTS; layout += 2) {
            cn_scope_begin();
            cn_dtype dt = layout == 2 ? CN_F64 : CN_F32;
            cn_tensor *x = th_random(dt, nd, cases[c].shape, -10, 10, layout, vals);
            char what[64];
            snprintf(what, sizeof what, "case %zu layout %d", c, layout);
            double tol = dt == CN_F32 ? 2e-5 : 1e-12;
            for (int kind = 0; kind < K_N; kind++)
                check_case(kind, x, nd, cases[c].shape, vals, cases[c].axis, tol,
                           tol, what);
            cn_scope_end();
        }
        free(vals);
    }
}

/* A broadcast view (stride 0) gives the same lines as its copy. */
static void test_expanded_input(void) {
    double bv[5] = {0.5, -1, 2, 3, -4}, vals[40];
    cn_tensor *x = cn_expand(th_make(CN_F32, CN_SHAPE(1, 5), bv, TH_CONTIG), CN_SHAPE(8, 5));
    for (int k = 0; k < 40; k++) vals[k] = bv[k % 5];
    for (int kind = 0; kind < K_N; kind++)
        for (int axis = -2; axis < 2; axis++)
            check_case(kind, x, 2, (int64_t[]){8, 5}, vals, axis, 1e-6, 1e-6, "expanded");
}

static void test_special_values(void) {
    double v[12] = {-INFINITY, -INFINITY, -INFINITY, 1000, 1001, 999, -INFINITY, 0, 2, NAN, 1, 2};
    for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
        cn_tensor *x = th_make(CN_F32, CN_SHAPE(4, 3), v, layout);
        cn_tensor *s = cn_softmax(x, 1), *l = cn_log_softmax(x, -1);
        for (int j = 0; j < 3; j++) {
            CHECK(isnan(th_at(s, j))); /* a row of -inf, like PyTorch */
            CHECK(isnan(th_at(l, j)));
            CHECK(isnan(th_at(s, 9 + j))); /* NaN spreads over its row */
        }
        double z = exp(1000 - 1001.0) + 1 + exp(999 - 1001.0);
        CHECK_CLOSE(th_at(s, 4), 1 / z, 1e-6, 0); /* no overflow */
        CHECK_CLOSE(th_at(l, 3), -1 - log(z), 1e-6, 0);
        CHECK_CLOSE(th_at(s, 6), 0, 0, 0); /* exp(-inf) */
        CHECK_CLOSE(th_at(l, 6), -INFINITY, 0, 0);
        CHECK_CLOSE(th_at(s, 8), exp(2) / (1 + exp(2)), 1e-6, 0);
        cn_tensor *c = cn_cumsum(x, 0);
        CHECK_CLOSE(th_at(c, 3), -INFINITY, 0, 0);
        CHECK(isnan(th_at(c, 9)));
        CHECK_CLOSE(th_at(c, 11), -INFINITY, 0, 0);
    }
    /* e^x through the whole f32 range, subnormals included: softmax of
     * (0, x) is e^x / (1 + e^x). */
    for (double t = -110; t <= 0; t += 0.37) {
        cn_tensor *x = cn_from_data(CN_F32, CN_SHAPE(2), (float[]){0, (float)t});
        double want = exp((float)t) / (1 + exp((float)t));
        double got = th_at(cn_softmax(x, 0), 1);
        CHECK_MSG(fabs(got - want) <= 3e-7 * want + 1.5e-45, "softmax(0, %g)[1] = %.9g, not %.9g",
                  t, got, want);
    }
    /* log_softmax stays exact where softmax underflows */
    cn_tensor *far = cn_from_data(CN_F32, CN_SHAPE(2), (float[]){0, -200});
    CHECK_CLOSE(th_at(cn_log_softmax(far, 0), 1), -200, 1e-6, 0);
    CHECK_CLOSE(th_at(cn_softmax(far, 0), 1), 0, 0, 0);
}

static void test_dtypes(void) {
    cn_tensor *xi = cn_from_data(CN_I32, CN_SHAPE(2, 2), (int32_t[]){1, 2, 3, 3});
    cn_tensor *s = cn_softmax(xi, 1);
    CHECK(cn_tensor_dtype(s) == CN_F32);
    CHECK_CLOSE(th_at(s, 1), exp(1) / (1 + exp(1)), 1e-6, 0);
    CHECK_CLOSE(th_at(s, 2), 0.5, 1e-7, 0);
    cn_tensor *c = cn_cumsum(xi, 0);
    CHECK(cn_tensor_dtype(c) == CN_I64);
    CHECK_EQ_INT(th_at(c, 3), 5);
    cn_tensor *b = cn_cumsum(cn_from_data(CN_BOOL, CN_SHAPE(4), (uint8_t[]){1, 0, 1, 1}), 0);
    CHECK(cn_tensor_dtype(b) == CN_I64);
    CHECK_EQ_INT(th_at(b, 3), 3);
    cn_tensor *u = cn_cumsum(cn_from_data(CN_U8, CN_SHAPE(3), (uint8_t[]){200, 100, 250}), -1);
    CHECK_EQ_INT(th_at(u, 2), 550); /* no wrap at 255: the sum is i64 */
    int64_t big[2] = {INT64_MAX, 1};
    CHECK_EQ_INT(th_at(cn_cumsum(cn_from_data(CN_I64, CN_SHAPE(2), big), 0), 1), INT64_MIN);
    double hv[4] = {0.5, 1.5, -2, 4};
    cn_tensor *h = cn_softmax(th_make(CN_F16, CN_SHAPE(2, 2), hv, TH_TRANSPOSED), 0);
    CHECK(cn_tensor_dtype(h) == CN_F16);
    CHECK_CLOSE(th_at(h, 0), exp(0.5) / (exp(0.5) + exp(-2)), 1e-3, 0);
    cn_tensor *hc = cn_cumsum(th_make(CN_BF16, CN_SHAPE(4), hv, TH_REVERSED), 0);
    CHECK(cn_tensor_dtype(hc) == CN_BF16);
    CHECK_CLOSE(th_at(hc, 3), 4, 0, 0);
    /* f32 cumsum adds in double: 0.1f ten million times is off by less
     * than a unit of the result */
    cn_tensor *t = cn_cumsum(cn_full(CN_F32, CN_SHAPE(1 << 21), 0.1), 0);
    CHECK_CLOSE(th_at(t, (1 << 21) - 1), (double)(1 << 21) * (double)0.1f, 1e-7, 0);
}

static void test_rank0_empty_errors(void) {
    cn_tensor *s = cn_scalar(CN_F32, 3);
    CHECK_CLOSE(cn_item(cn_softmax(s, 0)), 1, 0, 0);
    CHECK_CLOSE(cn_item(cn_log_softmax(s, -1)), 0, 0, 0);
    CHECK_CLOSE(cn_item(cn_cumsum(s, 0)), 3, 0, 0);
    CHECK(th_same_shape(cn_softmax(s, -1), 0, NULL));
    CHECK_ERROR(cn_softmax(s, 1), "softmax: axis 1 is out of range for a tensor of rank 0");

    cn_tensor *e = cn_zeros(CN_F32, CN_SHAPE(0, 3));
    CHECK_SHAPE(cn_softmax(e, 0), 0, 3);
    CHECK_SHAPE(cn_log_softmax(e, 1), 0, 3);
    CHECK_SHAPE(cn_cumsum(e, 0), 0, 3);
    CHECK_SHAPE(cn_cumsum(cn_zeros(CN_I32, CN_SHAPE(3, 0)), 1), 3, 0);

    cn_tensor *x = cn_zeros(CN_F32, CN_SHAPE(2, 3));
    CHECK_ERROR(cn_softmax(x, 2), "softmax: axis 2 is out of range for a tensor of rank 2");
    CHECK_ERROR(cn_log_softmax(x, -3), "log_softmax: axis -3 is out of range");
    CHECK_ERROR(cn_cumsum(x, 5), "cumsum: axis 5 is out of range");
    cn_clear_error();
    CHECK(cn_softmax(NULL, 0) == NULL);
    CHECK(cn_cumsum(NULL, 0) == NULL);
    CHECK(strcmp(cn_last_error(), "") == 0);
}

static cn_tensor *big_random(cn_dtype dt, int nd, const int64_t *shape) {
    int64_t n = th_numel(nd, shape);
    size_t es = cn_dtype_size(dt);
    char *buf = malloc((size_t)n * es);
    for (int64_t i = 0; i < n; i++) {
        double v = th_uniform(-5, 5);
        if (dt == CN_F32) ((float *)buf)[i] = (float)v;
        else ((double *)buf)[i] = v;
    }
    cn_tensor *t = cn_from_data(dt, nd, shape, buf);
    free(buf);
    return t;
}

static bool same_bits(cn_tensor *a, cn_tensor *b) {
    if (!a || !b || cn_numel(a) != cn_numel(b)) return false;
    size_t nb = (size_t)cn_numel(a) * cn_dtype_size(cn_tensor_dtype(a));
    return memcmp(cn_data(a), cn_data(b), nb) == 0;
}

static void test_thread_determinism(void) {
    int saved = cn_get_num_threads();
    th_seed(23);
    cn_tensor *x = big_random(CN_F32, CN_SHAPE(1200, 1000));
    cn_tensor *x3 = big_random(CN_F32, CN_SHAPE(48, 130, 170));
    cn_tensor *xd = big_random(CN_F64, CN_SHAPE(1100, 1000));
    struct {
        cn_tensor *x;
        int axis;
    } cases[] = {{x, 0}, {x, 1}, {x3, 1}, {xd, 1}, {xd, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int kind = 0; kind < K_N; kind++) {
            cn_tensor *y[2];
            for (int t = 0; t < 2; t++) {
                cn_set_num_threads(t + 1);
                y[t] = apply(kind, cases[c].x, cases[c].axis);
            }
            CHECK_MSG(same_bits(y[0], y[1]), "%s case %zu: results differ between 1 and 2 threads",
                      kname[kind], c);
        }
    cn_set_num_threads(saved);
}

int main(void) {
    RUN(test_random);
    RUN(test_large_layouts);
    RUN(test_expanded_input);
    RUN(test_special_values);
    RUN(test_dtypes);
    RUN(test_rank0_empty_errors);
    RUN(test_thread_determinism);
    return th_summary();
}
