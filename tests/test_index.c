/* Joining, indexing and padding: concat, stack, split, chunk, gather,
 * index_select, scatter_add, pad, one_hot, tril/triu and the masks, each
 * against a naive loop on random shapes, layouts and dtypes, plus every
 * error a user can cause. */
#include "harness.h"

static const cn_dtype any_dtypes[] = {CN_F32, CN_F64, CN_I32, CN_I64,
                                      CN_U8,  CN_BOOL, CN_F16, CN_BF16};
static const cn_dtype math_dtypes[] = {CN_F32, CN_F64, CN_I32, CN_I64};

static cn_dtype pick_dtype(void) { return any_dtypes[th_randint(0, 8)]; }
static int pick_layout(void) { return (int)th_randint(0, TH_NLAYOUTS); }
static int pick_axis_arg(int ax, int nd) { return th_randint(0, 2) ? ax : ax - nd; }

static double *alloc_vals(int64_t n) { return malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)); }

/* Random values fitting dt, in a random layout; *vals gets them (row-major). */
static cn_tensor *rand_data(cn_dtype dt, int nd, const int64_t *shape, double **vals) {
    double lo = -50, hi = 50;
    if (dt == CN_U8) lo = 0, hi = 250;
    if (dt == CN_BOOL) lo = 0, hi = 2;
    *vals = alloc_vals(th_numel(nd, shape));
    return th_random(dt, nd, shape, lo, hi, pick_layout(), *vals);
}

/* An index tensor (i32 or i64, random layout) holding vals. */
static cn_tensor *make_index(int nd, const int64_t *shape, const double *vals) {
    return th_make(th_randint(0, 2) ? CN_I64 : CN_I32, nd, shape, vals, pick_layout());
}

static double *rand_ints(int64_t n, int64_t lo, int64_t hi) {
    double *v = alloc_vals(n);
    for (int64_t k = 0; k < n; k++) v[k] = (double)th_randint(lo, hi);
    return v;
}

static int64_t ravel(int nd, const int64_t *shape, const int64_t *idx) {
    int64_t k = 0;
    for (int d = 0; d < nd; d++) k = k * shape[d] + idx[d];
    return k;
}

/* out's values in row-major order against want; reports the first mismatch. */
static bool same_values(const cn_tensor *out, const double *want, int64_t n, double tol) {
    if (!out || cn_numel(out) != n) return false;
    double *got = alloc_vals(n);
    bool ok = cn_copy_to_buffer(out, CN_F64, got, sizeof(double) * (size_t)(n > 0 ? n : 1)) == 0;
    for (int64_t k = 0; ok && k < n; k++) {
        if (!th_close(got[k], want[k], tol, tol)) {
            fprintf(stderr, "  element %" PRId64 ": got %.9g, want %.9g\n", k, got[k], want[k]);
            ok = false;
        }
    }
    free(got);
    return ok;
}

#define CHECK_VALUES(out, want, n, tol)                                                            \
    CHECK_MSG(same_values((out), (want), (n), (tol)), "%s: wrong values (last error: %s)", #out,   \
              cn_last_error())

/* The function returned NULL and left the message alone (a NULL input). */
#define CHECK_SILENT_NULL(expr)                                                                    \
    do {                                                                                           \
        cn_clear_error();                                                                          \
        CHECK(!(expr));                                                                            \
        CHECK(cn_last_error()[0] == '\0');                                                         \
    } while (0)

static void shape_with(int nd, const int64_t *shape, int ax, int64_t size, int64_t *out) {
    memcpy(out, shape, sizeof(int64_t) * (size_t)nd);
    out[ax] = size;
}

/* ---- concat and stack ---- */

static void test_concat_random(void) {
    for (int trial = 0; trial < 200; trial++) {
        int nd = (int)th_randint(1, 5), ax = (int)th_randint(0, nd), n = (int)th_randint(1, 5);
        int64_t shape[CN_MAX_DIMS], sizes[4], oshape[CN_MAX_DIMS], total = 0;
        th_random_shape(nd, 0, 4, shape);
        cn_dtype dt = pick_dtype();
        cn_tensor *xs[4];
        double *vals[4];
        for (int j = 0; j < n; j++) {
            int64_t s[CN_MAX_DIMS];
            sizes[j] = th_randint(0, 4);
            shape_with(nd, shape, ax, sizes[j], s);
            xs[j] = rand_data(dt, nd, s, &vals[j]);
            total += sizes[j];
        }
        cn_tensor *y = cn_concat(xs, n, pick_axis_arg(ax, nd));
        shape_with(nd, shape, ax, total, oshape);
        CHECK(th_same_shape(y, nd, oshape));
        CHECK(y && cn_tensor_dtype(y) == dt);
        int64_t numel = th_numel(nd, oshape), idx[CN_MAX_DIMS];
        double *want = alloc_vals(numel);
        for (int64_t k = 0; k < numel; k++) {
            th_unravel(k, nd, oshape, idx);
            int j = 0;
            while (idx[ax] >= sizes[j]) idx[ax] -= sizes[j++];
            int64_t s[CN_MAX_DIMS];
            shape_with(nd, shape, ax, sizes[j], s);
            want[k] = vals[j][ravel(nd, s, idx)];
        }
        CHECK_VALUES(y, want, numel, 0);
        free(want);
        for (int j = 0; j < n; j++) free(vals[j]);
    }
}

static void test_concat_promotes(void) {
    cn_tensor *a = cn_from_data(CN_I32, CN_SHAPE(2), (int32_t[]){1, -2});
    cn_tensor *b = cn_from_data(CN_F32, CN_SHAPE(3), (float[]){0.5f, 1.5f, 2.5f});
    cn_tensor *y = cn_concat((cn_tensor *[]){a, b}, 2, 0);
    CHECK(y && cn_tensor_dtype(y) == CN_F32);
    CHECK_VALUES(y, ((double[]){1, -2, 0.5, 1.5, 2.5}), 5, 0);
    cn_tensor *c = cn_from_data(CN_BOOL, CN_SHAPE(2), (uint8_t[]){1, 0});
    cn_tensor *d = cn_from_data(CN_I64, CN_SHAPE(1), (int64_t[]){7});
    y = cn_concat((cn_tensor *[]){c, d}, 2, -1);
    CHECK(y && cn_tensor_dtype(y) == CN_I64);
    CHECK_VALUES(y, ((double[]){1, 0, 7}), 3, 0);
    /* More inputs than the dispatcher keeps on its stack. */
    cn_tensor *many[12];
    double mw[24];
    for (int j = 0; j < 12; j++) {
        many[j] = cn_full(j % 2 ? CN_I32 : CN_I64, CN_SHAPE(1, 2), j);
        mw[2 * j] = mw[2 * j + 1] = j;
    }
    y = cn_concat(many, 12, 0);
    CHECK_SHAPE(y, 12, 2);
    CHECK(y && cn_tensor_dtype(y) == CN_I64);
    CHECK_VALUES(y, mw, 24, 0);
    cn_tensor *h = cn_cast(b, CN_F16);
    y = cn_concat((cn_tensor *[]){h, h}, 2, 0);
    CHECK(y && cn_tensor_dtype(y) == CN_F16);
    CHECK_VALUES(y, ((double[]){0.5, 1.5, 2.5, 0.5, 1.5, 2.5}), 6, 0);
}

/* Big enough to run on the pool, along the first and the last axis, with
 * contiguous and strided inputs mixed. */
static void test_concat_large(void) {
    for (int ax = 0; ax < 2; ax++) {
        int64_t s0[2] = {300, 300}, s1[2] = {300, 300}, s2[2] = {300, 300};
        s0[ax] = 200;
        s1[ax] = 150;
        s2[ax] = 1;
        double *v0 = alloc_vals(60000), *v1 = alloc_vals(45000), *v2 = alloc_vals(300);
        cn_tensor *x0 = th_random(CN_F32, 2, s0, -1, 1, TH_CONTIG, v0);
        cn_tensor *x1 = th_random(CN_F32, 2, s1, -1, 1, TH_TRANSPOSED, v1);
        cn_tensor *x2 = th_random(CN_F32, 2, s2, -1, 1, TH_CONTIG, v2);
        cn_tensor *y = cn_concat((cn_tensor *[]){x0, x1, x2, x0}, 4, ax);
        int64_t os[2] = {300, 300};
        os[ax] = 200 + 150 + 1 + 200;
        CHECK(th_same_shape(y, 2, os));
        double *want = alloc_vals(os[0] * os[1]);
        for (int64_t i = 0; i < os[0]; i++)
            for (int64_t j = 0; j < os[1]; j++) {
                int64_t p[2] = {i, j}, a = p[ax];
                double v;
                p[ax] = a < 200 ? a : a < 350 ? a - 200 : a < 351 ? 0 : a - 351;
                if (a < 200 || a >= 351) v = v0[p[0] * s0[1] + p[1]];
                else if (a < 350) v = v1[p[0] * s1[1] + p[1]];
                else v = v2[p[0] * s2[1] + p[1]];
                want[i * os[1] + j] = v;
            }
        CHECK_VALUES(y, want, os[0] * os[1], 0);
        free(want);
        free(v0);
        free(v1);
        free(v2);
    }
}

static void test_concat_errors(void) {
    cn_tensor *a = cn_zeros(CN_F32, CN_SHAPE(2, 3));
    cn_tensor *b = cn_zeros(CN_F32, CN_SHAPE(2, 4));
    cn_tensor *c = cn_zeros(CN_F32, CN_SHAPE(6));
    cn_tensor *s = cn_scalar(CN_F32, 1);
    CHECK_ERROR(cn_concat((cn_tensor *[]){a, a, b}, 3, 0),
                "concat: input 2 has shape [2, 4] but input 0 has [2, 3]; sizes must match except "
                "on axis 0 (axis 1: 4 vs 3)");
    CHECK(cn_concat((cn_tensor *[]){a, b}, 2, 1) != NULL);
    CHECK_ERROR(cn_concat((cn_tensor *[]){a, c}, 2, 0), "input 1 has shape [6] but input 0 has [2, 3]; ranks must match");
    CHECK_ERROR(cn_concat((cn_tensor *[]){a, a}, 2, 2), "axis 2 is out of range");
    CHECK_ERROR(cn_concat((cn_tensor *[]){a, a}, 2, -3), "axis -3 is out of range");
    CHECK_ERROR(cn_concat((cn_tensor *[]){s, s}, 2, 0), "input 0 has rank 0");
    CHECK_ERROR(cn_concat((cn_tensor *[]){a}, 0, 0), "need at least 1");
    CHECK_ERROR(cn_concat(NULL, 2, 0), "need at least 1");
    CHECK_SILENT_NULL(cn_concat((cn_tensor *[]){a, NULL}, 2, 0));
}

static void test_stack_random(void) {
    for (int trial = 0; trial < 100; trial++) {
        int nd = (int)th_randint(0, 4), n = (int)th_randint(1, 5);
        int ax = (int)th_randint(0, nd + 1);
        int64_t shape[CN_MAX_DIMS], oshape[CN_MAX_DIMS];
        th_random_shape(nd, 0, 4, shape);
        cn_dtype dt = pick_dtype();
        cn_tensor *xs[4];
        double *vals[4];
        for (int j = 0; j < n; j++) xs[j] = rand_data(dt, nd, shape, &vals[j]);
        cn_tensor *y = cn_stack(xs, n, pick_axis_arg(ax, nd + 1));
        for (int d = 0, k = 0; d <= nd; d++) oshape[d] = d == ax ? n : shape[k++];
        CHECK(th_same_shape(y, nd + 1, oshape));
        int64_t numel = th_numel(nd + 1, oshape), idx[CN_MAX_DIMS], q[CN_MAX_DIMS];
        double *want = alloc_vals(numel);
        for (int64_t k = 0; k < numel; k++) {
            th_unravel(k, nd + 1, oshape, idx);
            for (int d = 0, m = 0; d <= nd; d++)
                if (d != ax) q[m++] = idx[d];
            want[k] = vals[idx[ax]][ravel(nd, shape, q)];
        }
        CHECK_VALUES(y, want, numel, 0);
        free(want);
        for (int j = 0; j < n; j++) free(vals[j]);
    }
}

static void test_stack_errors(void) {
    cn_tensor *a = cn_zeros(CN_F32, CN_SHAPE(2, 3));
    cn_tensor *b = cn_zeros(CN_F32, CN_SHAPE(2, 4));
    CHECK_ERROR(cn_stack((cn_tensor *[]){a, b}, 2, 0),
                "stack: input 1 has shape [2, 4] but input 0 has [2, 3]; all must be equal");
    CHECK_ERROR(cn_stack((cn_tensor *[]){a, a}, 2, 3), "axis 3 is out of range");
    CHECK_ERROR(cn_stack((cn_tensor *[]){a}, 0, 0), "need at least 1");
    CHECK_SILENT_NULL(cn_stack((cn_tensor *[]){a, NULL}, 2, 0));
    cn_tensor *i = cn_ones(CN_I32, CN_SHAPE(2, 3));
    cn_tensor *y = cn_stack((cn_tensor *[]){i, a}, 2, -1);
    CHECK_SHAPE(y, 2, 3, 2);
    CHECK(y && cn_tensor_dtype(y) == CN_F32);
}

/* ---- split and chunk ---- */

static void test_split(void) {
    cn_tensor *x = cn_reshape(cn_arange(0, 35, 1, CN_F32), CN_SHAPE(5, 7));
    cn_tensor *p[3];
    CHECK_EQ_INT(cn_split(x, 1, (int64_t[]){2, 0, 5}, 3, p), 0);
    CHECK_SHAPE(p[0], 5, 2);
    CHECK_SHAPE(p[1], 5, 0);
    CHECK_SHAPE(p[2], 5, 5);
    CHECK(cn_shares_storage(p[2], x));
    for (int64_t i = 0; i < 5; i++)
        for (int64_t j = 0; j < 5; j++)
            CHECK_CLOSE(cn_get(p[2], (int64_t[]){i, j}), (double)(i * 7 + 2 + j), 0, 0);
    CHECK_EQ_INT(cn_split(x, -2, (int64_t[]){1, 4}, 2, p), 0);
    CHECK_SHAPE(p[1], 4, 7);
    CHECK_CLOSE(cn_get(p[1], (int64_t[]){0, 0}), 7, 0, 0);

    CHECK_STATUS_ERROR(cn_split(x, 1, (int64_t[]){2, 4}, 2, p),
                       "split: sizes sum to 6 but axis 1 of shape [5, 7] has size 7");
    CHECK_STATUS_ERROR(cn_split(x, 1, (int64_t[]){-1, 8}, 2, p), "size -1 at position 0");
    CHECK_STATUS_ERROR(cn_split(x, 1, (int64_t[]){5, 5}, 2, p), "size 5 at position 1");
    CHECK_STATUS_ERROR(cn_split(x, 2, (int64_t[]){7}, 1, p), "axis 2 is out of range");
    CHECK_STATUS_ERROR(cn_split(x, 1, (int64_t[]){7}, 0, p), "0 sizes given");
    CHECK_STATUS_ERROR(cn_split(cn_scalar(CN_F32, 1), 0, (int64_t[]){1}, 1, p), "rank-0");
    cn_clear_error();
    CHECK(cn_split(NULL, 0, (int64_t[]){1}, 1, p) < 0 && cn_last_error()[0] == '\0');
}

static void test_chunk(void) {
    double vals[42];
    for (int k = 0; k < 42; k++) vals[k] = k;
    for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
        cn_tensor *x = th_make(CN_I64, 2, (int64_t[]){6, 7}, vals, layout);
        cn_tensor *p[8];
        CHECK_EQ_INT(cn_chunk(x, 3, 1, p), 3); /* 3, 3, 1 */
        CHECK_SHAPE(p[0], 6, 3);
        CHECK_SHAPE(p[2], 6, 1);
        CHECK_EQ_INT(cn_get_int(p[1], (int64_t[]){4, 2}), 4 * 7 + 5);
        CHECK_EQ_INT(cn_get_int(p[2], (int64_t[]){5, 0}), 41);
        CHECK_EQ_INT(cn_chunk(x, 4, 0, p), 3); /* 2, 2, 2 */
        CHECK_SHAPE(p[2], 2, 7);
        CHECK_EQ_INT(cn_get_int(p[2], (int64_t[]){1, 6}), 41);
        CHECK_EQ_INT(cn_chunk(x, 10, -1, p), 7);
    }
    cn_tensor *e = cn_zeros(CN_F32, CN_SHAPE(0, 2));
    cn_tensor *p[3];
    CHECK_EQ_INT(cn_chunk(e, 3, 0, p), 3);
    CHECK_SHAPE(p[2], 0, 2);
    CHECK_STATUS_ERROR(cn_chunk(e, 0, 0, p), "chunks is 0");
    CHECK_STATUS_ERROR(cn_chunk(e, 2, 5, p), "axis 5 is out of range");
}

/* ---- gather and index_select ---- */

static void test_gather_random(void) {
    for (int trial = 0; trial < 200; trial++) {
        int nd = (int)th_randint(1, 5), ax = (int)th_randint(0, nd);
        int64_t xs[CN_MAX_DIMS], is[CN_MAX_DIMS], idx[CN_MAX_DIMS];
        th_random_shape(nd, 0, 4, xs);
        for (int d = 0; d < nd; d++)
            is[d] = d == ax ? (xs[d] ? th_randint(0, 6) : 0) : th_randint(0, xs[d] + 1);
        cn_dtype dt = pick_dtype();
        double *xv;
        cn_tensor *x = rand_data(dt, nd, xs, &xv);
        int64_t n = th_numel(nd, is);
        double *iv = rand_ints(n, 0, xs[ax] ? xs[ax] : 1);
        cn_tensor *index = make_index(nd, is, iv);
        cn_tensor *y = cn_gather(x, pick_axis_arg(ax, nd), index);
        CHECK(th_same_shape(y, nd, is));
        CHECK(y && cn_tensor_dtype(y) == dt);
        double *want = alloc_vals(n);
        for (int64_t k = 0; k < n; k++) {
            th_unravel(k, nd, is, idx);
            idx[ax] = (int64_t)iv[k];
            want[k] = xv[ravel(nd, xs, idx)];
        }
        CHECK_VALUES(y, want, n, 0);
        free(want);
        free(iv);
        free(xv);
    }
}

static void test_gather_large_and_rank0(void) {
    for (int ax = 0; ax < 2; ax++) {
        int64_t xs[2] = {1000, 300}, is[2] = {1000, 300};
        is[ax] = ax ? 200 : 700;
        double *xv = alloc_vals(300000);
        cn_tensor *x = th_random(CN_F32, 2, xs, -1, 1, ax ? TH_CONTIG : TH_TRANSPOSED, xv);
        int64_t n = is[0] * is[1];
        double *iv = rand_ints(n, 0, xs[ax]);
        cn_tensor *index = th_make(CN_I64, 2, is, iv, TH_CONTIG);
        cn_tensor *y = cn_gather(x, ax, index);
        double *want = alloc_vals(n);
        for (int64_t k = 0; k < n; k++) {
            int64_t p[2] = {k / is[1], k % is[1]};
            p[ax] = (int64_t)iv[k];
            want[k] = xv[p[0] * xs[1] + p[1]];
        }
        CHECK_VALUES(y, want, n, 0);
        /* One bad index among many, found by whichever thread gets to it. */
        int64_t bad[2] = {is[0] - 3, 17};
        cn_set(index, bad, (double)xs[ax]);
        char msg[128];
        snprintf(msg, sizeof msg, "gather: index %" PRId64 " is out of range for axis %d of size %" PRId64,
                 xs[ax], ax, xs[ax]);
        CHECK_ERROR(cn_gather(x, ax, index), msg);
        free(want);
        free(iv);
        free(xv);
    }
    cn_tensor *s = cn_scalar(CN_F64, 3.5);
    cn_tensor *y = cn_gather(s, 0, cn_scalar(CN_I32, 0));
    CHECK(y && cn_ndim(y) == 0);
    CHECK_CLOSE(cn_item(y), 3.5, 0, 0);
    CHECK_ERROR(cn_gather(s, -1, cn_scalar(CN_I64, 1)), "index 1 is out of range for axis 0 of size 1");
}

static void test_gather_errors(void) {
    cn_tensor *x = cn_zeros(CN_F32, CN_SHAPE(2, 3));
    cn_tensor *i = cn_from_data(CN_I64, CN_SHAPE(1, 2), (int64_t[]){0, 3});
    CHECK_ERROR(cn_gather(x, 1, i), "gather: index 3 is out of range for axis 1 of size 3");
    cn_tensor *neg = cn_from_data(CN_I32, CN_SHAPE(1, 2), (int32_t[]){0, -1});
    CHECK_ERROR(cn_gather(x, 1, neg), "gather: index -1 is out of range for axis 1 of size 3");
    CHECK_ERROR(cn_gather(x, 0, cn_zeros(CN_F32, CN_SHAPE(1, 2))), "gather: index must be i32 or i64, got f32");
    CHECK_ERROR(cn_gather(x, 0, cn_zeros(CN_U8, CN_SHAPE(1, 2))), "index must be i32 or i64, got u8");
    CHECK_ERROR(cn_gather(x, 0, cn_zeros(CN_I64, CN_SHAPE(2))), "gather: index [2] has rank 1 but x [2, 3] has rank 2");
    CHECK_ERROR(cn_gather(x, 1, cn_zeros(CN_I64, CN_SHAPE(3, 3))),
                "gather: index [3, 3] is larger than x [2, 3] on axis 0 (3 > 2)");
    CHECK(cn_gather(x, 0, cn_zeros(CN_I64, CN_SHAPE(5, 3))) != NULL); /* the gather axis may be larger */
    CHECK_ERROR(cn_gather(x, 2, i), "gather: axis 2 is out of range for a tensor of rank 2");
    CHECK_ERROR(cn_gather(cn_zeros(CN_F32, CN_SHAPE(2, 0)), 1, cn_zeros(CN_I64, CN_SHAPE(2, 1))),
                "index 0 is out of range for axis 1 of size 0");
    CHECK_SILENT_NULL(cn_gather(NULL, 0, i));
    CHECK_SILENT_NULL(cn_gather(x, 0, NULL));
}

static void test_index_select_random(void) {
    for (int trial = 0; trial < 200; trial++) {
        int nd = (int)th_randint(1, 5), ax = (int)th_randint(0, nd);
        int64_t xs[CN_MAX_DIMS], os[CN_MAX_DIMS], idx[CN_MAX_DIMS];
        th_random_shape(nd, 0, 5, xs);
        int64_t n = xs[ax] ? th_randint(0, 7) : 0;
        cn_dtype dt = pick_dtype();
        double *xv;
        cn_tensor *x = rand_data(dt, nd, xs, &xv);
        double *iv = rand_ints(n, 0, xs[ax] ? xs[ax] : 1);
        cn_tensor *index = make_index(1, &n, iv);
        cn_tensor *y = cn_index_select(x, pick_axis_arg(ax, nd), index);
        shape_with(nd, xs, ax, n, os);
        CHECK(th_same_shape(y, nd, os));
        int64_t numel = th_numel(nd, os);
        double *want = alloc_vals(numel);
        for (int64_t k = 0; k < numel; k++) {
            th_unravel(k, nd, os, idx);
            idx[ax] = (int64_t)iv[idx[ax]];
            want[k] = xv[ravel(nd, xs, idx)];
        }
        CHECK_VALUES(y, want, numel, 0);
        free(want);
        free(iv);
        free(xv);
    }
}

/* An embedding lookup (rows of a contiguous matrix) and a column pick, on the pool. */
static void test_index_select_large(void) {
    int64_t ws[2] = {5000, 64}, n = 3000;
    double *wv = alloc_vals(ws[0] * ws[1]);
    cn_tensor *w = th_random(CN_F32, 2, ws, -1, 1, TH_CONTIG, wv);
    double *iv = rand_ints(n, 0, ws[0]);
    cn_tensor *index = th_make(CN_I32, 1, &n, iv, TH_CONTIG);
    cn_tensor *y = cn_index_select(w, 0, index);
    CHECK_SHAPE(y, 3000, 64);
    double *want = alloc_vals(n * ws[1]);
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < ws[1]; c++) want[r * ws[1] + c] = wv[(int64_t)iv[r] * ws[1] + c];
    CHECK_VALUES(y, want, n * ws[1], 0);
    free(want);

    int64_t cols = 4000;
    double *cv = rand_ints(cols, 0, ws[1]);
    cn_tensor *ci = th_make(CN_I64, 1, &cols, cv, TH_REVERSED);
    y = cn_index_select(w, -1, ci);
    CHECK_SHAPE(y, 5000, 4000);
    want = alloc_vals(ws[0] * cols);
    for (int64_t r = 0; r < ws[0]; r++)
        for (int64_t c = 0; c < cols; c++) want[r * cols + c] = wv[r * ws[1] + (int64_t)cv[c]];
    CHECK_VALUES(y, want, ws[0] * cols, 0);
    free(want);
    free(cv);
    free(iv);
    free(wv);
}

static void test_index_select_errors(void) {
    cn_tensor *x = cn_zeros(CN_F32, CN_SHAPE(5, 3));
    CHECK_ERROR(cn_index_select(x, 0, cn_zeros(CN_I64, CN_SHAPE(2, 2))),
                "index_select: index must be 1-D, got shape [2, 2]");
    CHECK_ERROR(cn_index_select(x, 0, cn_zeros(CN_F64, CN_SHAPE(2))),
                "index_select: index must be i32 or i64, got f64");
    CHECK_ERROR(cn_index_select(x, 0, cn_from_data(CN_I64, CN_SHAPE(2), (int64_t[]){4, 5})),
                "index_select: index 5 is out of range for axis 0 of size 5");
    CHECK_ERROR(cn_index_select(x, 1, cn_from_data(CN_I32, CN_SHAPE(1), (int32_t[]){-2})),
                "index_select: index -2 is out of range for axis 1 of size 3");
    CHECK_ERROR(cn_index_select(x, -3, cn_zeros(CN_I64, CN_SHAPE(1))), "axis -3 is out of range");
    cn_tensor *s = cn_scalar(CN_I32, 9);
    CHECK_ERROR(cn_index_select(s, 0, cn_zeros(CN_I64, CN_SHAPE(2))),
                "x has rank 0, so index must have one element, got shape [2]");
    cn_tensor *y = cn_index_select(s, 0, cn_zeros(CN_I64, CN_SHAPE(1)));
    CHECK(y && cn_ndim(y) == 0);
    CHECK_CLOSE(cn_item(y), 9, 0, 0);
    y = cn_index_select(x, 0, cn_scalar(CN_I64, 4));
    CHECK_SHAPE(y, 1, 3);
    CHECK_SILENT_NULL(cn_index_select(x, 0, NULL));
}

/* ---- scatter_add ---- */

static void test_scatter_add_random(void) {
    for (int trial = 0; trial < 200; trial++) {
        int nd = (int)th_randint(1, 5), ax = (int)th_randint(0, nd);
        int64_t xs[CN_MAX_DIMS], is[CN_MAX_DIMS], ss[CN_MAX_DIMS], idx[CN_MAX_DIMS];
        th_random_shape(nd, 0, 4, xs);
        for (int d = 0; d < nd; d++) {
            is[d] = d == ax ? (xs[d] ? th_randint(0, 6) : 0) : th_randint(0, xs[d] + 1);
            ss[d] = is[d] + th_randint(0, 2);
        }
        cn_dtype dt = math_dtypes[th_randint(0, 4)];
        double *xv, *sv;
        cn_tensor *x = rand_data(dt, nd, xs, &xv), *src = rand_data(dt, nd, ss, &sv);
        int64_t n = th_numel(nd, is), nx = th_numel(nd, xs);
        double *iv = rand_ints(n, 0, xs[ax] ? xs[ax] : 1);
        cn_tensor *index = make_index(nd, is, iv);
        cn_tensor *y = cn_scatter_add(x, pick_axis_arg(ax, nd), index, src);
        CHECK(th_same_shape(y, nd, xs));
        CHECK(y && cn_tensor_dtype(y) == dt);
        double *want = alloc_vals(nx);
        memcpy(want, xv, sizeof(double) * (size_t)nx);
        for (int64_t k = 0; k < n; k++) {
            th_unravel(k, nd, is, idx);
            double v = sv[ravel(nd, ss, idx)];
            idx[ax] = (int64_t)iv[k];
            want[ravel(nd, xs, idx)] += v;
        }
        CHECK_VALUES(y, want, nx, dt == CN_F32 ? 1e-5 : 1e-12);
        free(want);
        free(iv);
        free(xv);
        free(sv);
    }
}

/* On the pool, split over either axis; the sums must not depend on the
 * thread count. */
static void test_scatter_add_large(void) {
    int nt = cn_get_num_threads();
    for (int ax = 0; ax < 2; ax++) {
        int64_t xs[2] = {64, 1500}, is[2] = {300, 1500};
        if (ax) {
            xs[0] = is[0] = 1500;
            xs[1] = 64;
            is[1] = 300;
        }
        int64_t n = is[0] * is[1], nx = xs[0] * xs[1];
        double *xv = alloc_vals(nx), *sv = alloc_vals(n);
        cn_tensor *x = th_random(CN_F32, 2, xs, -1, 1, TH_CONTIG, xv);
        cn_tensor *src = th_random(CN_F32, 2, is, -1, 1, ax ? TH_CONTIG : TH_TRANSPOSED, sv);
        double *iv = rand_ints(n, 0, xs[ax]);
        cn_tensor *index = th_make(CN_I64, 2, is, iv, TH_CONTIG);
        cn_set_num_threads(2);
        cn_tensor *y2 = cn_scatter_add(x, ax, index, src);
        cn_set_num_threads(1);
        cn_tensor *y1 = cn_scatter_add(x, ax, index, src);
        cn_set_num_threads(nt);
        double *want = alloc_vals(nx);
        memcpy(want, xv, sizeof(double) * (size_t)nx);
        for (int64_t k = 0; k < n; k++) {
            int64_t p[2] = {k / is[1], k % is[1]};
            p[ax] = (int64_t)iv[k];
            want[p[0] * xs[1] + p[1]] += sv[k];
        }
        CHECK_VALUES(y2, want, nx, 1e-4);
        CHECK(y1 && y2 && memcmp(cn_data(y1), cn_data(y2), sizeof(float) * (size_t)nx) == 0);
        free(want);
        free(iv);
        free(xv);
        free(sv);
    }
}

static void test_scatter_add_cases(void) {
    /* Hand-worked: repeated indices add up. */
    cn_tensor *x = cn_from_data(CN_I64, CN_SHAPE(2, 3), (int64_t[]){1, 1, 1, 1, 1, 1});
    cn_tensor *i = cn_from_data(CN_I32, CN_SHAPE(2, 2), (int32_t[]){0, 0, 2, 1});
    cn_tensor *s = cn_from_data(CN_I64, CN_SHAPE(2, 3), (int64_t[]){10, 20, 30, 40, 50, 60});
    cn_tensor *y = cn_scatter_add(x, 1, i, s);
    CHECK_VALUES(y, ((double[]){31, 1, 1, 1, 51, 41}), 6, 0);
    i = cn_from_data(CN_I64, CN_SHAPE(2, 2), (int64_t[]){0, 1, 1, 1});
    y = cn_scatter_add(x, 0, i, s); /* out[i[r][c]][c] += s[r][c] */
    CHECK_VALUES(y, ((double[]){11, 1, 1, 41, 71, 1}), 6, 0);
    /* Half types compute in f32 and come back as themselves. */
    cn_tensor *h = cn_cast(cn_from_data(CN_F32, CN_SHAPE(4), (float[]){1, 2, 3, 4}), CN_F16);
    cn_tensor *hs = cn_cast(cn_from_data(CN_F32, CN_SHAPE(3), (float[]){0.5f, 0.25f, 8}), CN_F16);
    y = cn_scatter_add(h, 0, cn_from_data(CN_I64, CN_SHAPE(3), (int64_t[]){3, 3, 0}), hs);
    CHECK(y && cn_tensor_dtype(y) == CN_F16);
    CHECK_VALUES(y, ((double[]){9, 2, 3, 4.75}), 4, 0);
    /* Rank 0. */
    y = cn_scatter_add(cn_scalar(CN_F64, 1), 0, cn_scalar(CN_I64, 0), cn_scalar(CN_F64, 2.5));
    CHECK(y && cn_ndim(y) == 0);
    CHECK_CLOSE(cn_item(y), 3.5, 0, 0);
}

static void test_scatter_add_errors(void) {
    cn_tensor *x = cn_zeros(CN_F32, CN_SHAPE(4, 3));
    cn_tensor *i = cn_zeros(CN_I64, CN_SHAPE(2, 3));
    cn_tensor *s = cn_ones(CN_F32, CN_SHAPE(2, 3));
    CHECK_ERROR(cn_scatter_add(x, 0, i, cn_ones(CN_F64, CN_SHAPE(2, 3))),
                "scatter_add: x is f32 but src is f64; they must have the same dtype");
    CHECK_ERROR(cn_scatter_add(cn_zeros(CN_U8, CN_SHAPE(4, 3)), 0, i, cn_ones(CN_U8, CN_SHAPE(2, 3))),
                "scatter_add: dtype u8 is not supported");
    CHECK_ERROR(cn_scatter_add(x, 0, cn_zeros(CN_I64, CN_SHAPE(6)), s),
                "scatter_add: x [4, 3], index [6] and src [2, 3] must have the same rank");
    CHECK_ERROR(cn_scatter_add(x, 0, cn_zeros(CN_I64, CN_SHAPE(3, 3)), s),
                "scatter_add: index [3, 3] is larger than src [2, 3] on axis 0 (3 > 2)");
    CHECK_ERROR(cn_scatter_add(x, 0, cn_zeros(CN_I64, CN_SHAPE(2, 4)), cn_ones(CN_F32, CN_SHAPE(2, 4))),
                "scatter_add: index [2, 4] is larger than x [4, 3] on axis 1 (4 > 3)");
    CHECK_ERROR(cn_scatter_add(x, 0, cn_zeros(CN_F32, CN_SHAPE(2, 3)), s),
                "scatter_add: index must be i32 or i64, got f32");
    CHECK_ERROR(cn_scatter_add(x, 0, cn_full(CN_I32, CN_SHAPE(2, 3), 4), s),
                "scatter_add: index 4 is out of range for axis 0 of size 4");
    CHECK_ERROR(cn_scatter_add(x, 1, cn_full(CN_I64, CN_SHAPE(2, 3), -1), s),
                "scatter_add: index -1 is out of range for axis 1 of size 3");
    CHECK_ERROR(cn_scatter_add(x, 2, i, s), "scatter_add: axis 2 is out of range");
    CHECK_SILENT_NULL(cn_scatter_add(x, 0, NULL, s));
}

/* ---- pad ---- */

/* numpy.pad's meaning of each mode, for one axis. -1: the constant. */
static int64_t ref_pad_source(int mode, int64_t j, int64_t before, int64_t L) {
    int64_t s = j - before;
    if (s >= 0 && s < L) return s;
    if (mode == CN_PAD_CONSTANT) return -1;
    if (mode == CN_PAD_REPLICATE) return s < 0 ? 0 : L - 1;
    while (s < 0 || s >= L) s = s < 0 ? -s : 2 * (L - 1) - s;
    return s;
}

static void check_pad(cn_tensor *x, const double *xv, int nd, const int64_t *xs, const int64_t *pads,
                      int npads, int mode, double value) {
    int64_t before[CN_MAX_DIMS] = {0}, os[CN_MAX_DIMS], idx[CN_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        int p = nd - 1 - d;
        before[d] = 2 * p < npads ? pads[2 * p] : 0;
        os[d] = xs[d] + before[d] + (2 * p < npads ? pads[2 * p + 1] : 0);
    }
    cn_tensor *y = cn_pad(x, pads, npads, (cn_pad_mode)mode, value);
    CHECK(th_same_shape(y, nd, os));
    CHECK(y && cn_tensor_dtype(y) == cn_tensor_dtype(x));
    int64_t n = th_numel(nd, os);
    double *want = alloc_vals(n);
    for (int64_t k = 0; k < n; k++) {
        th_unravel(k, nd, os, idx);
        bool outside = false;
        for (int d = 0; d < nd; d++) {
            idx[d] = ref_pad_source(mode, idx[d], before[d], xs[d]);
            outside |= idx[d] < 0;
        }
        want[k] = outside ? value : xv[ravel(nd, xs, idx)];
    }
    CHECK_VALUES(y, want, n, 0);
    free(want);
}

static void test_pad_random(void) {
    for (int trial = 0; trial < 300; trial++) {
        int nd = (int)th_randint(0, 5), mode = (int)th_randint(0, 3);
        int64_t xs[CN_MAX_DIMS], pads[2 * CN_MAX_DIMS];
        th_random_shape(nd, 0, 5, xs);
        int npairs = (int)th_randint(0, nd + 1);
        for (int p = 0; p < npairs; p++) {
            int64_t L = xs[nd - 1 - p], b = 0, a = 0;
            if (mode == CN_PAD_CONSTANT) {
                b = th_randint(-2, 4);
                a = th_randint(-2, 4);
                while (L + b + a < 0) a++;
            } else if (L > 0 && mode == CN_PAD_REFLECT) {
                b = th_randint(0, L);
                a = th_randint(0, L);
            } else if (L > 0) {
                b = th_randint(0, 4);
                a = th_randint(0, 4);
            }
            pads[2 * p] = b;
            pads[2 * p + 1] = a;
        }
        cn_dtype dt = pick_dtype();
        double value = dt == CN_BOOL ? 1 : (double)th_randint(0, 9);
        double *xv;
        cn_tensor *x = rand_data(dt, nd, xs, &xv);
        check_pad(x, xv, nd, xs, pads, 2 * npairs, mode, value);
        free(xv);
    }
}

static void test_pad_cases(void) {
    cn_tensor *x = cn_from_data(CN_F32, CN_SHAPE(3), (float[]){1, 2, 3});
    CHECK_VALUES(cn_pad(x, (int64_t[]){2, 2}, 2, CN_PAD_REFLECT, 0), ((double[]){3, 2, 1, 2, 3, 2, 1}), 7, 0);
    CHECK_VALUES(cn_pad(x, (int64_t[]){2, 1}, 2, CN_PAD_REPLICATE, 0), ((double[]){1, 1, 1, 2, 3, 3}), 6, 0);
    CHECK_VALUES(cn_pad(x, (int64_t[]){-1, 1}, 2, CN_PAD_CONSTANT, 9), ((double[]){2, 3, 9}), 3, 0);
    CHECK_SHAPE(cn_pad(x, (int64_t[]){-2, -1}, 2, CN_PAD_CONSTANT, 9), 0);
    cn_tensor *m = cn_from_data(CN_I32, CN_SHAPE(2, 2), (int32_t[]){1, 2, 3, 4});
    cn_tensor *y = cn_pad(m, (int64_t[]){1, 0, 0, 1}, 4, CN_PAD_CONSTANT, -7.9); /* truncated to -7 */
    CHECK_SHAPE(y, 3, 3);
    CHECK_VALUES(y, ((double[]){-7, 1, 2, -7, 3, 4, -7, -7, -7}), 9, 0);
    y = cn_pad(cn_scalar(CN_F64, 2.5), NULL, 0, CN_PAD_REFLECT, 0);
    CHECK(y && cn_ndim(y) == 0);
    CHECK_CLOSE(cn_item(y), 2.5, 0, 0);
}

static void test_pad_large(void) {
    int64_t xs[2] = {600, 300};
    double *xv = alloc_vals(xs[0] * xs[1]);
    cn_tensor *x = th_random(CN_F32, 2, xs, -1, 1, TH_TRANSPOSED, xv);
    for (int mode = 0; mode < 3; mode++)
        check_pad(x, xv, 2, xs, (int64_t[]){3, 5, 2, 1}, 4, mode, 0.5);
    cn_tensor *c = cn_contiguous(x);
    check_pad(c, xv, 2, xs, (int64_t[]){-3, 7, 1, -2}, 4, CN_PAD_CONSTANT, 0.5);
    free(xv);
}

static void test_pad_errors(void) {
    cn_tensor *x = cn_zeros(CN_F32, CN_SHAPE(2, 3));
    CHECK_ERROR(cn_pad(x, (int64_t[]){1, 1, 1}, 3, CN_PAD_CONSTANT, 0),
                "pad: 3 pad values given; they come in (before, after) pairs");
    CHECK_ERROR(cn_pad(x, (int64_t[]){1, 1, 1, 1, 1, 1}, 6, CN_PAD_CONSTANT, 0),
                "pad: 6 pad values for shape [2, 3] (rank 2); at most 4, two per axis");
    CHECK_ERROR(cn_pad(x, (int64_t[]){3, 0}, 2, CN_PAD_REFLECT, 0),
                "pad: reflect pads (3, 0) on axis 1 of shape [2, 3] must be less than its size 3");
    CHECK_ERROR(cn_pad(x, (int64_t[]){0, 0, 0, 2}, 4, CN_PAD_REFLECT, 0),
                "reflect pads (0, 2) on axis 0 of shape [2, 3] must be less than its size 2");
    CHECK_ERROR(cn_pad(cn_zeros(CN_F32, CN_SHAPE(2, 0)), (int64_t[]){1, 0}, 2, CN_PAD_REPLICATE, 0),
                "pad: replicate pads (1, 0) on axis 1 of shape [2, 0] need a non-empty axis");
    CHECK_ERROR(cn_pad(x, (int64_t[]){-2, -2}, 2, CN_PAD_CONSTANT, 0),
                "pad: pads (-2, -2) on axis 1 of shape [2, 3] leave a negative size -1");
    CHECK_ERROR(cn_pad(x, (int64_t[]){1, 1}, 2, (cn_pad_mode)7, 0), "pad: invalid mode 7");
    CHECK_ERROR(cn_pad(x, NULL, 2, CN_PAD_CONSTANT, 0), "NULL pads");
    CHECK_ERROR(cn_pad(x, (int64_t[]){1, 1}, -2, CN_PAD_CONSTANT, 0), "pad: -2 pad values");
    CHECK_ERROR(cn_pad(x, (int64_t[]){INT64_MAX, 0}, 2, CN_PAD_CONSTANT, 0), "too large");
    CHECK_ERROR(cn_pad(cn_scalar(CN_F32, 1), (int64_t[]){1, 1}, 2, CN_PAD_CONSTANT, 0), "at most 0");
    CHECK_SILENT_NULL(cn_pad(NULL, (int64_t[]){1, 1}, 2, CN_PAD_CONSTANT, 0));
}

/* ---- one_hot ---- */

static void test_one_hot_random(void) {
    for (int trial = 0; trial < 100; trial++) {
        int nd = (int)th_randint(0, 4);
        int64_t is[CN_MAX_DIMS], C = th_randint(1, 6);
        th_random_shape(nd, 0, 4, is);
        int64_t n = th_numel(nd, is);
        double *iv = rand_ints(n, 0, C);
        cn_tensor *index = make_index(nd, is, iv);
        bool infer = n > 0 && th_randint(0, 2);
        if (infer) {
            C = 0;
            for (int64_t k = 0; k < n; k++) C = iv[k] + 1 > C ? (int64_t)iv[k] + 1 : C;
        }
        cn_tensor *y = cn_one_hot(index, infer ? -1 : C);
        is[nd] = C;
        CHECK(th_same_shape(y, nd + 1, is));
        CHECK(y && cn_tensor_dtype(y) == CN_I64);
        double *want = alloc_vals(n * C);
        for (int64_t k = 0; k < n * C; k++) want[k] = iv[k / C] == (double)(k % C);
        CHECK_VALUES(y, want, n * C, 0);
        free(want);
        free(iv);
    }
}

static void test_one_hot_errors(void) {
    cn_tensor *i = cn_from_data(CN_I64, CN_SHAPE(2), (int64_t[]){0, 3});
    CHECK_ERROR(cn_one_hot(i, 3), "one_hot: class 3 is out of range for num_classes 3");
    CHECK_ERROR(cn_one_hot(cn_from_data(CN_I32, CN_SHAPE(2), (int32_t[]){0, -1}), 3),
                "one_hot: class -1 is out of range for num_classes 3");
    CHECK_ERROR(cn_one_hot(i, 0), "one_hot: num_classes is 0, must be >= 1");
    CHECK_ERROR(cn_one_hot(cn_zeros(CN_F32, CN_SHAPE(2)), 3), "one_hot: index must be i32 or i64, got f32");
    CHECK_ERROR(cn_one_hot(cn_zeros(CN_F32, CN_SHAPE(2)), -1), "one_hot: index must be i32 or i64, got f32");
    CHECK_ERROR(cn_one_hot(cn_zeros(CN_I64, CN_SHAPE(0)), -1), "cannot infer num_classes from an empty index");
    CHECK_ERROR(cn_one_hot(cn_full(CN_I64, CN_SHAPE(2), -2), -1), "one_hot: class -2 is out of range");
    CHECK_SILENT_NULL(cn_one_hot(NULL, 3));
    cn_tensor *y = cn_one_hot(cn_scalar(CN_I32, 2), -1);
    CHECK_SHAPE(y, 3);
    CHECK_VALUES(y, ((double[]){0, 0, 1}), 3, 0);
}

/* ---- tril / triu ---- */

static void check_tri(cn_tensor *x, const double *xv, int nd, const int64_t *xs, int64_t k, bool upper) {
    cn_tensor *y = upper ? cn_triu(x, k) : cn_tril(x, k);
    CHECK(th_same_shape(y, nd, xs));
    CHECK(y && cn_tensor_dtype(y) == cn_tensor_dtype(x));
    int64_t n = th_numel(nd, xs), idx[CN_MAX_DIMS];
    double *want = alloc_vals(n);
    for (int64_t e = 0; e < n; e++) {
        th_unravel(e, nd, xs, idx);
        double diff = (double)idx[nd - 1] - (double)idx[nd - 2], kd = (double)k;
        bool keep = upper ? diff >= kd : diff <= kd;
        want[e] = keep ? xv[e] : 0;
    }
    CHECK_VALUES(y, want, n, 0);
    free(want);
}

static void test_tri_random(void) {
    for (int trial = 0; trial < 200; trial++) {
        int nd = (int)th_randint(2, 5);
        int64_t xs[CN_MAX_DIMS];
        th_random_shape(nd, 0, 5, xs);
        int64_t k = th_randint(-6, 7);
        if (trial % 20 == 0) k = trial % 40 ? INT64_MAX : INT64_MIN;
        double *xv;
        cn_tensor *x = rand_data(pick_dtype(), nd, xs, &xv);
        check_tri(x, xv, nd, xs, k, trial % 2);
        free(xv);
    }
    int64_t xs[3] = {3, 300, 300};
    double *xv = alloc_vals(3 * 300 * 300);
    cn_tensor *x = th_random(CN_F32, 3, xs, -1, 1, TH_TRANSPOSED, xv);
    check_tri(x, xv, 3, xs, 5, false);
    check_tri(cn_contiguous(x), xv, 3, xs, -7, true);
    free(xv);
    CHECK_ERROR(cn_tril(cn_zeros(CN_F32, CN_SHAPE(3)), 0), "tril: x must have at least 2 axes, got shape [3]");
    CHECK_ERROR(cn_triu(cn_scalar(CN_F32, 1), 0), "triu: x must have at least 2 axes, got shape []");
    CHECK_SILENT_NULL(cn_tril(NULL, 0));
}

/* ---- masks ---- */

static void test_masks(void) {
    cn_tensor *m = cn_causal_mask(4);
    CHECK_SHAPE(m, 4, 4);
    CHECK(m && cn_tensor_dtype(m) == CN_BOOL);
    double want[16];
    for (int i = 0; i < 16; i++) want[i] = (i % 4) <= (i / 4);
    CHECK_VALUES(m, want, 16, 0);
    CHECK_SHAPE(cn_causal_mask(0), 0, 0);
    CHECK_ERROR(cn_causal_mask(-1), "causal_mask: n is -1, must be >= 0");

    double lens[3] = {2, 0, 4};
    for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
        cn_tensor *l = th_make(layout % 2 ? CN_I32 : CN_I64, 1, (int64_t[]){3}, lens, layout);
        cn_tensor *s = cn_sequence_mask(l, 5);
        CHECK_SHAPE(s, 3, 5);
        CHECK(s && cn_tensor_dtype(s) == CN_BOOL);
        double w[15];
        for (int i = 0; i < 15; i++) w[i] = (i % 5) < lens[i / 5];
        CHECK_VALUES(s, w, 15, 0);
        s = cn_sequence_mask(l, -1); /* as long as the longest */
        CHECK_SHAPE(s, 3, 4);
    }
    CHECK_SHAPE(cn_sequence_mask(cn_zeros(CN_I64, CN_SHAPE(0)), -1), 0, 0);
    CHECK_ERROR(cn_sequence_mask(cn_zeros(CN_F32, CN_SHAPE(3)), 4), "sequence_mask: lengths must be i32 or i64, got f32");
    CHECK_ERROR(cn_sequence_mask(cn_zeros(CN_I64, CN_SHAPE(3, 1)), 4), "sequence_mask: lengths must be 1-D, got shape [3, 1]");
    CHECK_SILENT_NULL(cn_sequence_mask(NULL, 4));
}

/* Results returned with no scope open belong to the caller. */
static void test_no_scope_ownership(void) {
    cn_scope_end(); /* RUN opened one */
    cn_tensor *m = cn_causal_mask(3);
    cn_tensor *x = cn_arange(0, 6, 1, CN_F32);
    cn_tensor *p[2];
    CHECK_EQ_INT(cn_split(x, 0, (int64_t[]){2, 4}, 2, p), 0);
    cn_tensor *s = cn_stack((cn_tensor *[]){x, x}, 2, 0);
    CHECK_SHAPE(s, 2, 6);
    cn_release(s);
    cn_release(p[0]);
    cn_release(p[1]);
    cn_release(x);
    cn_release(m);
    cn_scope_begin();
}

int main(void) {
    th_seed(20240611);
    RUN(test_concat_random);
    RUN(test_concat_promotes);
    RUN(test_concat_large);
    RUN(test_concat_errors);
    RUN(test_stack_random);
    RUN(test_stack_errors);
    RUN(test_split);
    RUN(test_chunk);
    RUN(test_gather_random);
    RUN(test_gather_large_and_rank0);
    RUN(test_gather_errors);
    RUN(test_index_select_random);
    RUN(test_index_select_large);
    RUN(test_index_select_errors);
    RUN(test_scatter_add_random);
    RUN(test_scatter_add_large);
    RUN(test_scatter_add_cases);
    RUN(test_scatter_add_errors);
    RUN(test_pad_random);
    RUN(test_pad_cases);
    RUN(test_pad_large);
    RUN(test_pad_errors);
    RUN(test_one_hot_random);
    RUN(test_one_hot_errors);
    RUN(test_tri_random);
    RUN(test_masks);
    RUN(test_no_scope_ownership);
    return th_summary();
}
