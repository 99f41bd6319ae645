/* Reductions against naive double loops: every op over random shapes, axis
 * subsets and layouts, keepdim both ways, rank 0, empty axes, integer
 * dtypes, NaN/inf, var corrections, norm orders, the errors a user can
 * cause, and the same bits for 1 and 2 threads on large tensors. */
#include "harness.h"

enum { R_SUM, R_MEAN, R_PROD, R_MAX, R_MIN, R_VAR, R_STD, R_LSE, R_NORM, R_ARGMAX, R_ARGMIN, R_N };

static const char *rname[R_N] = {"sum", "mean", "prod", "max",    "min",   "var",
                                 "std", "logsumexp", "norm", "argmax", "argmin"};

/* ---- the reference: one output from its values in row-major order ---- */

static double ref_max(const double *v, int64_t n, int sign) {
    double m = -sign * INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i])) return NAN;
        if (sign * v[i] > sign * m) m = v[i];
    }
    return m;
}

static double ref_one(int kind, const double *v, int64_t n, double param) {
    double s = 0, m;
    switch (kind) {
    case R_SUM:
    case R_MEAN:
        for (int64_t i = 0; i < n; i++) s += v[i];
        return kind == R_SUM ? s : s / (double)n;
    case R_PROD:
        s = 1;
        for (int64_t i = 0; i < n; i++) s *= v[i];
        return s;
    case R_MAX: return ref_max(v, n, 1);
    case R_MIN: return ref_max(v, n, -1);
    case R_VAR:
    case R_STD: {
        for (int64_t i = 0; i < n; i++) s += v[i];
        double mean = s / (double)n, ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (v[i] - mean) * (v[i] - mean);
        double dof = (double)n - param;
        double var = ss / (dof > 0 ? dof : 0);
        return kind == R_VAR ? var : sqrt(var);
    }
    case R_LSE:
        m = ref_max(v, n, 1);
        if (!isfinite(m)) return m;
        for (int64_t i = 0; i < n; i++) s += exp(v[i] - m);
        return m + log(s);
    case R_NORM:
        if (isinf(param)) {
            m = 0;
            for (int64_t i = 0; i < n; i++) {
                if (isnan(v[i])) return NAN;
                if (fabs(v[i]) > m) m = fabs(v[i]);
            }
            return m;
        }
        for (int64_t i = 0; i < n; i++) s += pow(fabs(v[i]), param);
        return pow(s, 1 / param);
    case R_ARGMAX:
    case R_ARGMIN: {
        int sign = kind == R_ARGMAX ? 1 : -1;
        int64_t best = 0;
        for (int64_t i = 0; i < n; i++) {
            if (isnan(v[i])) return (double)i;
            if (sign * v[i] > sign * v[best]) best = i;
        }
        return (double)best;
    }
    }
    return NAN;
}

/* Reduce row-major vals of shape over the axes marked in red: out gets one
 * value per kept index (row-major). Returns the number of outputs. */
static int64_t ref_reduce(int kind, int nd, const int64_t *shape, const double *vals,
                          const bool *red, double param, double *out) {
    int64_t nout = 1, len = 1, n = th_numel(nd, shape);
    for (int d = 0; d < nd; d++) {
        if (red[d]) len *= shape[d];
        else nout *= shape[d];
    }
    double *buf = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    int64_t *fill = calloc((size_t)(nout > 0 ? nout : 1), sizeof(int64_t));
    int64_t idx[CN_MAX_DIMS];
    for (int64_t k = 0; k < n; k++) {
        th_unravel(k, nd, shape, idx);
        int64_t o = 0;
        for (int d = 0; d < nd; d++)
            if (!red[d]) o = o * shape[d] + idx[d];
        buf[o * len + fill[o]++] = vals[k];
    }
    for (int64_t o = 0; o < nout; o++) out[o] = ref_one(kind, buf + o * len, len, param);
    free(buf);
    free(fill);
    return nout;
}

static cn_tensor *apply(int kind, cn_tensor *x, const int *axes, int naxes, bool keep,
                        double param) {
    switch (kind) {
    case R_SUM: return cn_sum(x, axes, naxes, keep);
    case R_MEAN: return cn_mean(x, axes, naxes, keep);
    case R_PROD: return cn_prod(x, axes, naxes, keep);
    case R_MAX: return cn_max(x, axes, naxes, keep);
    case R_MIN: return cn_min(x, axes, naxes, keep);
    case R_VAR: return cn_var(x, axes, naxes, param, keep);
    case R_STD: return cn_std(x, axes, naxes, param, keep);
    case R_LSE: return cn_logsumexp(x, axes, naxes, keep);
    case R_NORM: return cn_norm(x, param, axes, naxes, keep);
    case R_ARGMAX: return naxes ? cn_argmax(x, axes[0], keep) : cn_argmax_all(x);
    case R_ARGMIN: return naxes ? cn_argmin(x, axes[0], keep) : cn_argmin_all(x);
    }
    return NULL;
}

static double *values_of(const cn_tensor *t) {
    int64_t n = cn_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    cn_copy_to_buffer(t, CN_F64, v, sizeof(double) * (size_t)(n > 0 ? n : 1));
    return v;
}

/* Run one reduction of x (values vals, shape) and compare every output and
 * the shape with the reference. */
static void check_case(int kind, cn_tensor *x, int nd, const int64_t *shape, const double *vals,
                       const int *axes, int naxes, bool keep, double param, double rtol,
                       double atol, const char *what) {
    bool red[CN_MAX_DIMS] = {false};
    for (int i = 0; i < naxes; i++) red[(axes[i] + nd) % (nd ? nd : 1)] = nd > 0;
    if (naxes == 0)
        for (int d = 0; d < nd; d++) red[d] = true;
    int64_t want_shape[CN_MAX_DIMS];
    int wnd = 0;
    for (int d = 0; d < nd; d++)
        if (!red[d]) want_shape[wnd++] = shape[d];
        else if (keep && !((kind == R_ARGMAX || kind == R_ARGMIN) && naxes == 0))
            want_shape[wnd++] = 1;
    cn_tensor *y = apply(kind, x, axes, naxes, keep, param);
    CHECK_MSG(y != NULL, "%s %s: failed: %s", rname[kind], what, cn_last_error());
    if (!y) return;
    CHECK_MSG(th_same_shape(y, wnd, want_shape), "%s %s: wrong shape", rname[kind], what);
    int64_t n = th_numel(nd, shape), nout = th_numel(wnd, want_shape);
    double *want = malloc(sizeof(double) * (size_t)(nout > 0 ? nout : 1));
    (void)n;
    ref_reduce(kind, nd, shape, vals, red, param, want);
    double *got = values_of(y);
    int bad = 0;
    for (int64_t o = 0; o < nout && bad < 3; o++) {
        if (!th_close(got[o], want[o], rtol, atol)) {
            bad++;
            CHECK_MSG(0, "%s %s: output %" PRId64 " = %.9g, expected %.9g", rname[kind], what, o,
                      got[o], want[o]);
        }
    }
    th_checks++;
    free(want);
    free(got);
}

/* A random subset of the axes of rank nd, in random order and sign; none
 * chosen means all (naxes 0). */
static int random_axes(int nd, int *axes) {
    int n = 0;
    for (int d = 0; d < nd; d++)
        if (th_randint(0, 2)) axes[n++] = d;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)th_randint(0, i + 1), t = axes[i];
        axes[i] = axes[j];
        axes[j] = t;
    }
    for (int i = 0; i < n; i++)
        if (th_randint(0, 2)) axes[i] -= nd;
    return n;
}

/* The value range each op is tested on (products stay near 1, logsumexp
 * and norm see negative values). */
static void range_of(int kind, double *lo, double *hi) {
    *lo = -2;
    *hi = 2;
    if (kind == R_PROD) {
        *lo = 0.6;
        *hi = 1.4;
    }
}

static void test_random_float(void) {
    th_seed(11);
    const double params[] = {1, 2, 3, 0.5, INFINITY};
    for (int trial = 0; trial < 400; trial++) {
        int nd = (int)th_randint(0, 5);
        int64_t shape[CN_MAX_DIMS];
        th_random_shape(nd, 1, 5, shape);
        cn_dtype dt = trial % 3 == 0 ? CN_F64 : CN_F32;
        int layout = (int)th_randint(0, TH_NLAYOUTS);
        int axes[CN_MAX_DIMS];
        int naxes = random_axes(nd, axes);
        bool keep = th_randint(0, 2);
        for (int kind = 0; kind < R_N; kind++) {
            double lo, hi, param = 0;
            range_of(kind, &lo, &hi);
            if (kind == R_VAR || kind == R_STD) param = th_randint(0, 3);
            if (kind == R_NORM) param = params[th_randint(0, 5)];
            int na = naxes;
            int ax1[1];
            if (kind == R_ARGMAX || kind == R_ARGMIN) { /* one axis, or the flattened tensor */
                na = nd > 0 && th_randint(0, 3) ? 1 : 0;
                ax1[0] = nd > 0 ? (int)th_randint(-nd, nd) : 0;
            }
            int64_t n = th_numel(nd, shape);
            double *vals = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
            cn_scope_begin();
            cn_tensor *x = th_random(dt, nd, shape, lo, hi, layout, vals);
            char what[96];
            snprintf(what, sizeof what, "trial %d (rank %d, layout %d, %s)", trial, nd, layout,
                     cn_dtype_name(dt));
            double tol = dt == CN_F32 ? 2e-5 : 1e-12;
            bool arg = kind == R_ARGMAX || kind == R_ARGMIN;
            check_case(kind, x, nd, shape, vals, arg ? ax1 : axes, na, keep, param, tol, tol, what);
            cn_scope_end();
            free(vals);
        }
    }
}

/* Shapes large enough for the column tiles (wider than 256), several
 * blocks per output in both modes, groups of tiles, and strided tiles. */
static void test_large_layouts(void) {
    th_seed(12);
    struct {
        int nd;
        int64_t shape[3];
        int naxes;
        int axes[3];
    } cases[] = {
        {2, {520, 300}, 1, {0}},      {2, {3, 33000}, 1, {1}},    {3, {3, 40, 300}, 1, {1}},
        {3, {20, 30, 50}, 2, {0, 2}}, {2, {20000, 9}, 1, {0}},    {1, {40000}, 0, {0}},
        {3, {5, 9, 600}, 2, {0, 1}},  {2, {300, 12}, 1, {-2}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int nd = cases[c].nd;
        int64_t n = th_numel(nd, cases[c].shape);
        double *vals = malloc(sizeof(double) * (size_t)n);
        double *pvals = malloc(sizeof(double) * (size_t)n);
        for (int layout = 0; layout < TH_NLAYOUTS; layout += 2) {
            cn_scope_begin();
            cn_dtype dt = layout == 2 ? CN_F64 : CN_F32;
            cn_tensor *x = th_random(dt, nd, cases[c].shape, -2, 2, layout, vals);
            cn_tensor *px = th_random(dt, nd, cases[c].shape, 0.999, 1.001, layout, pvals);
            for (int kind = 0; kind < R_N; kind++) {
                if ((kind == R_ARGMAX || kind == R_ARGMIN) && cases[c].naxes > 1) continue;
                char what[64];
                snprintf(what, sizeof what, "case %zu layout %d", c, layout);
                double param = kind == R_NORM ? (layout ? 3 : 2) : 1;
                double tol = dt == CN_F32 ? 1e-5 : 1e-11;
                check_case(kind, kind == R_PROD ? px : x, nd, cases[c].shape,
                           kind == R_PROD ? pvals : vals, cases[c].axes, cases[c].naxes,
                           layout % 4 == 0, param, tol, tol, what);
            }
            cn_scope_end();
        }
        free(vals);
        free(pvals);
    }
}

/* Broadcast views (stride 0, as autograd makes them) reduce like copies. */
static void test_expanded_inputs(void) {
    th_seed(15);
    struct {
        int64_t small[3], full[3];
    } cases[] = {{{1, 300, 1}, {6, 300, 5}}, {{7, 1, 5}, {7, 300, 5}}, {{1, 1, 9}, {6, 300, 9}}};
    const int axsets[][2] = {{0}, {1}, {2}, {0, 1}, {0, 2}};
    for (int c = 0; c < 3; c++) {
        const int64_t *bs = cases[c].small, *fs = cases[c].full;
        int64_t n = th_numel(3, fs), idx[3];
        double *bv = malloc(sizeof(double) * (size_t)th_numel(3, bs));
        double *vals = malloc(sizeof(double) * (size_t)n);
        cn_scope_begin();
        cn_tensor *x = cn_expand(th_random(CN_F32, 3, bs, -1, 1, TH_CONTIG, bv), 3, fs);
        for (int64_t k = 0; k < n; k++) {
            th_unravel(k, 3, fs, idx);
            int64_t bk = 0;
            for (int d = 0; d < 3; d++) bk = bk * bs[d] + (bs[d] == 1 ? 0 : idx[d]);
            vals[k] = bv[bk];
        }
        for (int a = 0; a < 5; a++) {
            int na = a < 3 ? 1 : 2;
            for (int kind = 0; kind < R_N; kind++) {
                if ((kind == R_ARGMAX || kind == R_ARGMIN) && na > 1) continue;
                if (kind == R_PROD) continue; /* thousands of equal factors under/overflow */
                char what[48];
                snprintf(what, sizeof what, "expanded case %d axes %d", c, a);
                check_case(kind, x, 3, fs, vals, axsets[a], na, a & 1, kind == R_NORM ? 2 : 1,
                           1e-5, 1e-5, what);
            }
        }
        cn_scope_end();
        free(bv);
        free(vals);
    }
}

static void test_ints(void) {
    th_seed(13);
    const cn_dtype dts[] = {CN_I32, CN_I64, CN_U8, CN_BOOL};
    const int kinds[] = {R_SUM, R_PROD, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN};
    for (int trial = 0; trial < 120; trial++) {
        cn_dtype dt = dts[trial % 4];
        int nd = (int)th_randint(0, 4);
        int64_t shape[CN_MAX_DIMS];
        th_random_shape(nd, 1, 4, shape);
        int axes[CN_MAX_DIMS];
        int naxes = random_axes(nd, axes);
        int layout = (int)th_randint(0, TH_NLAYOUTS);
        int64_t n = th_numel(nd, shape);
        double *vals = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
        double lo = dt == CN_U8 ? 0 : -9, hi = dt == CN_BOOL ? 2 : 10;
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            int kind = kinds[k];
            cn_scope_begin();
            /* products of -1, 0 and 1 stay exact */
            bool pr = kind == R_PROD, unsig = dt == CN_U8 || dt == CN_BOOL;
            cn_tensor *x = th_random(dt, nd, shape, pr ? (unsig ? 0 : -1) : lo, pr ? 2 : hi, layout,
                                     vals);
            int ax1[1] = {nd > 0 ? (int)th_randint(0, nd) : 0};
            bool arg = kind == R_ARGMAX || kind == R_ARGMIN;
            check_case(kind, x, nd, shape, vals, arg ? ax1 : axes, arg ? nd > 0 : naxes, trial & 1,
                       0, 0, 0, cn_dtype_name(dt));
            cn_tensor *y = apply(kind, x, arg ? ax1 : axes, arg ? nd > 0 : naxes, false, 0);
            cn_dtype want = (kind == R_MAX || kind == R_MIN) ? dt : CN_I64;
            CHECK_MSG(y && cn_tensor_dtype(y) == want, "%s of %s gives %s", rname[kind],
                      cn_dtype_name(dt), y ? cn_dtype_name(cn_tensor_dtype(y)) : "NULL");
            cn_scope_end();
        }
        free(vals);
    }
    /* i64 sums are exact beyond 2^53, and wrap like PyTorch's on overflow. */
    int64_t big[3] = {(int64_t)1 << 60, 1, -((int64_t)1 << 58)};
    cn_tensor *b = cn_from_data(CN_I64, CN_SHAPE(3), big);
    int64_t z[1] = {0};
    CHECK(cn_get_int(cn_sum(b, NULL, 0, false), z) == big[0] + 1 + big[2]);
    int64_t wrap[2] = {INT64_MAX, 2};
    CHECK(cn_get_int(cn_sum(cn_from_data(CN_I64, CN_SHAPE(2), wrap), NULL, 0, false), z) ==
          INT64_MIN + 1);
    /* float functions of integers compute in f32 */
    cn_tensor *xi = cn_from_data(CN_I32, CN_SHAPE(4), (int32_t[]){1, 2, 3, 4});
    cn_tensor *m = cn_mean(xi, NULL, 0, false);
    CHECK(cn_tensor_dtype(m) == CN_F32);
    CHECK_CLOSE(cn_item(m), 2.5, 0, 0);
    CHECK_CLOSE(cn_item(cn_var(xi, NULL, 0, 1, false)), 5.0 / 3, 1e-6, 0);
    CHECK_CLOSE(cn_item(cn_norm(xi, 2, NULL, 0, false)), sqrt(30), 1e-6, 0);
}

static void test_half(void) {
    double v[6] = {1, -2, 3.5, 0.25, 8, -1};
    cn_tensor *h = th_make(CN_F16, CN_SHAPE(2, 3), v, TH_TRANSPOSED);
    cn_tensor *s = cn_sum(h, CN_AXES(1), false);
    CHECK(cn_tensor_dtype(s) == CN_F16);
    CHECK_CLOSE(th_at(s, 0), 2.5, 0, 0);
    CHECK_CLOSE(th_at(s, 1), 7.25, 0, 0);
    CHECK_CLOSE(cn_item(cn_max(h, NULL, 0, false)), 8, 0, 0);
    CHECK_EQ_INT(cn_item(cn_argmax_all(h)), 4);
    cn_tensor *b = cn_mean(th_make(CN_BF16, CN_SHAPE(2, 3), v, TH_CONTIG), CN_AXES(0), false);
    CHECK(cn_tensor_dtype(b) == CN_BF16);
    CHECK_CLOSE(th_at(b, 2), 1.25, 0, 0);
}

static void test_rank0_and_empty(void) {
    cn_tensor *s = cn_scalar(CN_F32, 3);
    CHECK(th_same_shape(cn_sum(s, NULL, 0, false), 0, NULL));
    CHECK_CLOSE(cn_item(cn_sum(s, CN_AXES(0), true)), 3, 0, 0);
    CHECK_CLOSE(cn_item(cn_mean(s, CN_AXES(-1), false)), 3, 0, 0);
    CHECK_CLOSE(cn_item(cn_prod(s, NULL, 0, false)), 3, 0, 0);
    CHECK_CLOSE(cn_item(cn_max(s, NULL, 0, false)), 3, 0, 0);
    CHECK(isnan(cn_item(cn_var(s, NULL, 0, 1, false))));
    CHECK_CLOSE(cn_item(cn_var(s, NULL, 0, 0, false)), 0, 0, 0);
    CHECK_CLOSE(cn_item(cn_logsumexp(s, NULL, 0, false)), 3, 0, 0);
    CHECK_CLOSE(cn_item(cn_norm(s, 2, NULL, 0, false)), 3, 0, 0);
    CHECK_EQ_INT(cn_item(cn_argmax(s, 0, false)), 0);
    CHECK_EQ_INT(cn_item(cn_argmin_all(s)), 0);
    CHECK(th_same_shape(cn_argmax(s, -1, true), 0, NULL));
    CHECK_ERROR(cn_sum(s, CN_AXES(1), false), "axis 1 is out of range");

    cn_tensor *e = cn_zeros(CN_F32, CN_SHAPE(0, 3));
    cn_tensor *r = cn_sum(e, CN_AXES(0), false);
    CHECK_SHAPE(r, 3);
    for (int i = 0; i < 3; i++) CHECK_CLOSE(th_at(r, i), 0, 0, 0);
    CHECK_SHAPE(cn_sum(e, CN_AXES(1), true), 0, 1);
    CHECK_SHAPE(cn_max(e, CN_AXES(1), false), 0); /* reduces over 3, keeps the empty axis */
    CHECK_CLOSE(cn_item(cn_sum(e, NULL, 0, false)), 0, 0, 0);
    CHECK_CLOSE(cn_item(cn_prod(e, NULL, 0, false)), 1, 0, 0);
    CHECK(isnan(cn_item(cn_mean(e, NULL, 0, false))));
    CHECK(isnan(cn_item(cn_var(e, NULL, 0, 1, false))));
    CHECK(isnan(cn_item(cn_std(e, NULL, 0, 0, false))));
    CHECK_CLOSE(cn_item(cn_logsumexp(e, NULL, 0, false)), -INFINITY, 0, 0);
    CHECK_CLOSE(cn_item(cn_norm(e, 2, NULL, 0, false)), 0, 0, 0);
    cn_tensor *ei = cn_zeros(CN_I32, CN_SHAPE(2, 0));
    cn_tensor *si = cn_sum(ei, CN_AXES(1), false);
    CHECK_SHAPE(si, 2);
    CHECK(cn_tensor_dtype(si) == CN_I64);
    CHECK_EQ_INT(th_at(cn_prod(ei, CN_AXES(1), false), 1), 1);
    CHECK_SHAPE(cn_argmax(ei, 0, false), 0);

    CHECK_ERROR(cn_max(e, NULL, 0, false),
                "max: cannot reduce over axis 0 of size 0 (shape [0, 3])");
    CHECK_ERROR(cn_min(e, CN_AXES(0), true), "min: cannot reduce over axis 0 of size 0");
    CHECK_ERROR(cn_argmax(e, 0, false), "argmax: cannot reduce over axis 0 of size 0");
    CHECK_ERROR(cn_argmin_all(e), "argmin: the tensor of shape [0, 3] is empty");
}

static void test_special_values(void) {
    double v[8] = {1, NAN, 5, -INFINITY, 2, 7, 7, INFINITY};
    for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
        cn_tensor *x = th_make(CN_F32, CN_SHAPE(2, 4), v, layout);
        cn_tensor *mx = cn_max(x, CN_AXES(1), false);
        CHECK(isnan(th_at(mx, 0)));
        CHECK_CLOSE(th_at(mx, 1), INFINITY, 0, 0);
        cn_tensor *mn = cn_min(x, CN_AXES(1), false);
        CHECK(isnan(th_at(mn, 0)));
        CHECK_CLOSE(th_at(mn, 1), 2, 0, 0);
        cn_tensor *am = cn_argmax(x, 1, false);
        CHECK_EQ_INT(th_at(am, 0), 1); /* NaN counts as the max */
        CHECK_EQ_INT(th_at(am, 1), 3);
        CHECK_EQ_INT(th_at(cn_argmin(x, 1, false), 0), 1);
        CHECK_EQ_INT(th_at(cn_argmin(x, 1, false), 1), 0);
        CHECK_EQ_INT(cn_item(cn_argmax_all(x)), 1);
        CHECK_EQ_INT(th_at(cn_argmax(x, 0, true), 2), 1);
        CHECK_EQ_INT(th_at(cn_argmax(x, 0, true), 1), 0);
        CHECK_EQ_INT(th_at(cn_argmin(x, 0, false), 3), 0); /* -inf */
        cn_tensor *lse = cn_logsumexp(x, CN_AXES(1), false);
        CHECK(isnan(th_at(lse, 0)));
        CHECK_CLOSE(th_at(lse, 1), INFINITY, 0, 0);
        CHECK(isnan(th_at(cn_sum(x, CN_AXES(0), false), 3))); /* -inf + inf */
        CHECK_CLOSE(th_at(cn_sum(x, CN_AXES(0), false), 2), 12, 0, 0);
        CHECK(isnan(th_at(cn_sum(x, CN_AXES(0), false), 1)));
        CHECK_CLOSE(th_at(cn_norm(x, INFINITY, CN_AXES(1), false), 1), INFINITY, 0, 0);
        CHECK(isnan(th_at(cn_var(x, CN_AXES(1), 1, false), 1))); /* inf - inf */
    }
    /* ties: the first index */
    double t[6] = {3, 1, 3, 1, 3, 1};
    cn_tensor *tt = th_make(CN_F64, CN_SHAPE(6), t, TH_REVERSED);
    CHECK_EQ_INT(cn_item(cn_argmax(tt, 0, false)), 0);
    CHECK_EQ_INT(cn_item(cn_argmin(tt, 0, false)), 1);
    /* rows of -inf: logsumexp is -inf */
    cn_tensor *ni = cn_full(CN_F32, CN_SHAPE(3, 5), -INFINITY);
    CHECK_CLOSE(th_at(cn_logsumexp(ni, CN_AXES(1), false), 2), -INFINITY, 0, 0);
    CHECK_CLOSE(th_at(cn_logsumexp(ni, CN_AXES(0), false), 4), -INFINITY, 0, 0);
    /* logsumexp of large values does not overflow */
    cn_tensor *big = cn_full(CN_F32, CN_SHAPE(4), 1000);
    CHECK_CLOSE(cn_item(cn_logsumexp(big, NULL, 0, false)), 1000 + log(4), 1e-6, 0);
    /* norms of large f32 values do not overflow through their squares */
    cn_tensor *lg = cn_full(CN_F32, CN_SHAPE(4), 1e30);
    CHECK_CLOSE(cn_item(cn_norm(lg, 2, NULL, 0, false)), 2e30, 1e-6, 0);
}

static void test_corrections_and_p(void) {
    double v[5] = {1, 2, 4, 8, 16};
    cn_tensor *x = th_make(CN_F64, CN_SHAPE(5), v, TH_STRIDED);
    double mean = 31.0 / 5, ss = 0;
    for (int i = 0; i < 5; i++) ss += (v[i] - mean) * (v[i] - mean);
    const double corr[] = {0, 1, 2, 0.5, -1};
    for (int i = 0; i < 5; i++) {
        CHECK_CLOSE(cn_item(cn_var(x, NULL, 0, corr[i], false)), ss / (5 - corr[i]), 1e-14, 0);
        CHECK_CLOSE(cn_item(cn_std(x, CN_AXES(0), corr[i], true)), sqrt(ss / (5 - corr[i])), 1e-14,
                    0);
    }
    /* N - correction <= 0: division by zero, as in PyTorch */
    CHECK_CLOSE(cn_item(cn_var(x, NULL, 0, 5, false)), INFINITY, 0, 0);
    CHECK_CLOSE(cn_item(cn_var(x, NULL, 0, 7, false)), INFINITY, 0, 0);
    CHECK(isnan(cn_item(cn_var(cn_ones(CN_F32, CN_SHAPE(3)), NULL, 0, 3, false))));
    CHECK_ERROR(cn_var(x, NULL, 0, NAN, false), "var: correction is NaN");
    /* a large mean does not swallow the variance */
    float w[4] = {1e6f + 1, 1e6f + 2, 1e6f + 3, 1e6f + 4};
    cn_tensor *xw = cn_from_data(CN_F32, CN_SHAPE(4), w);
    CHECK_CLOSE(cn_item(cn_var(xw, NULL, 0, 1, false)), 5.0 / 3, 1e-6, 0);

    const double ps[] = {1, 2, 3, 0.5, 1.5, INFINITY};
    for (int i = 0; i < 6; i++) {
        double want = 0;
        for (int k = 0; k < 5; k++)
            want = isinf(ps[i]) ? fmax(want, v[k]) : want + pow(v[k], ps[i]);
        if (!isinf(ps[i])) want = pow(want, 1 / ps[i]);
        CHECK_CLOSE(cn_item(cn_norm(x, ps[i], NULL, 0, false)), want, 1e-13, 0);
    }
    CHECK_ERROR(cn_norm(x, 0, NULL, 0, false), "norm: p = 0 is not supported");
    CHECK_ERROR(cn_norm(x, -2, NULL, 0, false), "norm: p = -2");
    CHECK_ERROR(cn_norm(x, NAN, NULL, 0, false), "norm: p = nan");
    CHECK_ERROR(cn_norm(x, -INFINITY, NULL, 0, false), "norm: p = -inf");
}

static void test_errors(void) {
    cn_tensor *x = cn_zeros(CN_F32, CN_SHAPE(2, 3, 4));
    CHECK_ERROR(cn_sum(x, CN_AXES(3), false), "sum: axis 3 is out of range for a tensor of rank 3");
    CHECK_ERROR(cn_mean(x, CN_AXES(-4), false), "mean: axis -4 is out of range");
    CHECK_ERROR(cn_max(x, CN_AXES(1, -2), false), "max: axis -2 appears more than once");
    CHECK_ERROR(cn_var(x, CN_AXES(0, 0), 1, false), "var: axis 0 appears more than once");
    CHECK_ERROR(cn_sum(x, NULL, 2, false), "sum: axes is NULL but naxes is 2");
    CHECK_ERROR(cn_sum(x, CN_AXES(0, 1, 2, 0, 1, 2, 0, 1, 2), false), "sum: 9 axes given");
    CHECK_ERROR(cn_prod(x, (int[]){0}, -1, false), "prod: -1 axes given");
    CHECK_ERROR(cn_argmax(x, 3, false), "argmax: axis 3 is out of range");
    CHECK_ERROR(cn_argmin(x, -4, true), "argmin: axis -4 is out of range");
    /* a NULL input gives NULL and leaves the message alone */
    cn_clear_error();
    CHECK(cn_sum(NULL, NULL, 0, false) == NULL);
    CHECK(cn_argmax_all(NULL) == NULL);
    CHECK(cn_norm(NULL, 2, NULL, 0, false) == NULL);
    CHECK(strcmp(cn_last_error(), "") == 0);
}

static void test_accuracy(void) {
    /* 2^22 copies of 0.1f: a naive f32 loop is off by percents */
    int64_t n = (int64_t)1 << 22;
    cn_tensor *x = cn_full(CN_F32, CN_SHAPE(n), 0.1);
    double want = (double)n * (double)0.1f;
    CHECK_CLOSE(cn_item(cn_sum(x, NULL, 0, false)), want, 1e-6, 0);
    cn_tensor *c = cn_reshape(x, CN_SHAPE(n / 16, 16));
    CHECK_CLOSE(th_at(cn_sum(c, CN_AXES(0), false), 5), want / 16, 1e-6, 0);
    CHECK_CLOSE(th_at(cn_mean(cn_reshape(x, CN_SHAPE(4, n / 4)), CN_AXES(1), false), 3), 0.1f,
                1e-6, 0);
}

/* A large tensor of values around `shift` (a shifted mean tests the
 * variance), filled from a buffer rather than element by element. */
static cn_tensor *big_random(cn_dtype dt, int nd, const int64_t *shape, double shift) {
    int64_t n = th_numel(nd, shape);
    size_t es = cn_dtype_size(dt);
    char *buf = malloc((size_t)n * es);
    for (int64_t i = 0; i < n; i++) {
        double v = shift + th_uniform(-1, 1);
        if (dt == CN_F32) ((float *)buf)[i] = (float)v;
        else ((double *)buf)[i] = v;
    }
    cn_tensor *t = cn_from_data(dt, nd, shape, buf);
    free(buf);
    return t;
}

/* The same bits for 1 and 2 threads. */
static bool same_bits(cn_tensor *a, cn_tensor *b) {
    if (!a || !b || cn_numel(a) != cn_numel(b)) return false;
    size_t nb = (size_t)cn_numel(a) * cn_dtype_size(cn_tensor_dtype(a));
    return memcmp(cn_data(a), cn_data(b), nb) == 0;
}

static void test_thread_determinism(void) {
    int saved = cn_get_num_threads();
    th_seed(14);
    cn_tensor *x = big_random(CN_F32, CN_SHAPE(1200, 1000), 3);
    cn_tensor *x3 = big_random(CN_F32, CN_SHAPE(48, 130, 170), 0);
    cn_tensor *xt = cn_transpose(x, 0, 1);
    cn_tensor *xd = big_random(CN_F64, CN_SHAPE(1100, 1000), -2);
    struct {
        cn_tensor *x;
        int naxes;
        int axes[2];
    } cases[] = {{x, 1, {0}},     {x, 1, {1}},  {x, 0, {0}},  {x3, 1, {1}},
                 {x3, 2, {0, 2}}, {xt, 1, {1}}, {xd, 0, {0}}, {xd, 1, {0}}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int kinds[] = {R_SUM, R_MEAN, R_VAR, R_MAX, R_LSE, R_NORM, R_ARGMAX};
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            int kind = kinds[k];
            if (kind == R_ARGMAX && cases[c].naxes != 1) continue;
            cn_tensor *y[2];
            for (int t = 0; t < 2; t++) {
                cn_set_num_threads(t + 1);
                y[t] = apply(kind, cases[c].x, cases[c].axes, cases[c].naxes, false, 2);
            }
            CHECK_MSG(same_bits(y[0], y[1]), "%s case %zu: results differ between 1 and 2 threads",
                      rname[kind], c);
        }
    }
    /* and the full sum is accurate */
    cn_set_num_threads(2);
    double *v = values_of(x), want = 0;
    for (int64_t i = 0; i < cn_numel(x); i++) want += v[i];
    free(v);
    CHECK_CLOSE(cn_item(cn_sum(x, NULL, 0, false)), want, 1e-6, 1e-3);
    cn_set_num_threads(saved);
}

int main(void) {
    RUN(test_random_float);
    RUN(test_large_layouts);
    RUN(test_expanded_inputs);
    RUN(test_ints);
    RUN(test_half);
    RUN(test_rank0_and_empty);
    RUN(test_special_values);
    RUN(test_corrections_and_p);
    RUN(test_errors);
    RUN(test_accuracy);
    RUN(test_thread_determinism);
    return th_summary();
}
