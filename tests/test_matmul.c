/* matmul against a naive triple loop in double: every combination of 1-D,
 * 2-D and batched operands, batch broadcasting, every layout, zero sizes,
 * dtypes and promotion, the error messages; and the built-in GEMM directly
 * (every register tile, odd sizes, any strides, same bits for 1 and 2
 * threads), which is what the op runs on in builds without BLAS. */
#include "harness.h"

#include "backend/cpu/gemm.h"
#include "core/isa.h"

/* ---- the reference ---- */

typedef struct ref_result {
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    int64_t numel;
    double *val;    /* the product */
    double *abssum; /* sum of |a||b| per element: the scale of rounding errors */
} ref_result;

/* numpy.matmul of row-major values av (shape as) and bv (shape bs). */
static ref_result ref_matmul(int and_, const int64_t *as, const double *av, int bnd,
                             const int64_t *bs, const double *bv) {
    ref_result r = {0};
    int64_t m = and_ >= 2 ? as[and_ - 2] : 1, k = as[and_ - 1];
    int64_t n = bnd >= 2 ? bs[bnd - 1] : 1;
    int na = and_ > 2 ? and_ - 2 : 0, nb = bnd > 2 ? bnd - 2 : 0;
    int nbatch = na > nb ? na : nb;
    int64_t bshape[CN_MAX_DIMS], sa[CN_MAX_DIMS], sb[CN_MAX_DIMS];
    int64_t stride_a = m * k, stride_b = k * n;
    for (int d = nbatch - 1; d >= 0; d--) {
        int da = d - (nbatch - na), db = d - (nbatch - nb);
        int64_t x = da >= 0 ? as[da] : 1, y = db >= 0 ? bs[db] : 1;
        bshape[d] = x == 1 ? y : x;
        sa[d] = x == 1 ? 0 : stride_a;
        sb[d] = y == 1 ? 0 : stride_b;
        stride_a *= x;
        stride_b *= y;
    }
    for (int d = 0; d < nbatch; d++) r.shape[r.ndim++] = bshape[d];
    if (and_ >= 2) r.shape[r.ndim++] = m;
    if (bnd >= 2) r.shape[r.ndim++] = n;
    int64_t nmat = th_numel(nbatch, bshape);
    r.numel = nmat * m * n;
    r.val = calloc((size_t)(r.numel > 0 ? r.numel : 1), sizeof(double));
    r.abssum = calloc((size_t)(r.numel > 0 ? r.numel : 1), sizeof(double));
    int64_t idx[CN_MAX_DIMS];
    for (int64_t t = 0; t < nmat; t++) {
        th_unravel(t, nbatch, bshape, idx);
        int64_t oa = 0, ob = 0;
        for (int d = 0; d < nbatch; d++) {
            oa += idx[d] * sa[d];
            ob += idx[d] * sb[d];
        }
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0, as_ = 0;
                for (int64_t p = 0; p < k; p++) {
                    double x = av[oa + i * k + p], y = bv[ob + p * n + j];
                    s += x * y;
                    as_ += fabs(x * y);
                }
                r.val[(t * m + i) * n + j] = s;
                r.abssum[(t * m + i) * n + j] = as_;
            }
    }
    return r;
}

static void ref_free(ref_result *r) {
    free(r->val);
    free(r->abssum);
}

/* Relative tolerance (against the sum of |a||b|) for a result dtype. */
static double tol_for(cn_dtype dt) {
    switch (dt) {
    case CN_F64: return 1e-12;
    case CN_F32: return 1e-5;
    case CN_F16: return 2e-3;
    case CN_BF16: return 1.6e-2;
    default: return 0;
    }
}

/* c has r's shape and values (exactly for integer dtypes). */
static int check_result(const cn_tensor *c, const ref_result *r, cn_dtype dt, const char *what) {
    int bad = 0;
    th_checks++;
    if (!th_same_shape(c, r->ndim, r->shape)) {
        char b1[200], b2[200];
        th_fail(__FILE__, __LINE__, "%s: shape %s, expected %s (error: %s)", what,
                c ? cn_shape_str(c, b1, sizeof b1) : "NULL",
                cn_fmt_shape(b2, sizeof b2, r->ndim, r->shape), cn_last_error());
        return 1;
    }
    th_checks++;
    if (cn_tensor_dtype(c) != dt) {
        th_fail(__FILE__, __LINE__, "%s: dtype %s, expected %s", what,
                cn_dtype_name(cn_tensor_dtype(c)), cn_dtype_name(dt));
        return 1;
    }
    double *got = malloc(sizeof(double) * (size_t)(r->numel > 0 ? r->numel : 1));
    CHECK(cn_copy_to_buffer(c, CN_F64, got, sizeof(double) * (size_t)r->numel) == 0);
    double rtol = tol_for(dt);
    for (int64_t i = 0; i < r->numel && !bad; i++) {
        double err = fabs(got[i] - r->val[i]);
        if (cn_dtype_is_float(dt) ? !(err <= rtol * r->abssum[i] + 1e-30) : err != 0) {
            th_fail(__FILE__, __LINE__, "%s: element %" PRId64 " is %.10g, expected %.10g", what,
                    i, got[i], r->val[i]);
            bad = 1;
        }
    }
    th_checks++;
    free(got);
    return bad;
}

/* Random a (shape as, layout la) @ b (shape bs, layout lb) of dtype dt,
 * checked against the reference; the result dtype is want. */
static void check_case(cn_dtype adt, int and_, const int64_t *as, int la, cn_dtype bdt, int bnd,
                       const int64_t *bs, int lb, cn_dtype want) {
    cn_scope_begin();
    int64_t na = th_numel(and_, as), nb = th_numel(bnd, bs);
    double *av = malloc(sizeof(double) * (size_t)(na > 0 ? na : 1));
    double *bv = malloc(sizeof(double) * (size_t)(nb > 0 ? nb : 1));
    double lo = cn_dtype_is_float(adt) ? -1 : -20, hi = cn_dtype_is_float(adt) ? 1 : 20;
    cn_tensor *a = th_random(adt, and_, as, lo, hi, la, av);
    lo = cn_dtype_is_float(bdt) ? -1 : -20, hi = cn_dtype_is_float(bdt) ? 1 : 20;
    cn_tensor *b = th_random(bdt, bnd, bs, lo, hi, lb, bv);
    cn_tensor *c = cn_matmul(a, b);
    ref_result r = ref_matmul(and_, as, av, bnd, bs, bv);
    char what[400], s1[160], s2[160];
    snprintf(what, sizeof what, "%s (layout %d) @ %s (layout %d)", cn_shape_str(a, s1, sizeof s1),
             la, cn_shape_str(b, s2, sizeof s2), lb);
    check_result(c, &r, want, what);
    ref_free(&r);
    free(av);
    free(bv);
    cn_scope_end();
}

/* ---- the op ---- */

/* Every rank combination 1..4 x 1..4, random sizes and layouts, with some
 * batch axes of size 1 or missing so they broadcast. */
static void test_rank_combinations(void) {
    th_seed(1);
    for (int ad = 1; ad <= 4; ad++)
        for (int bd = 1; bd <= 4; bd++)
            for (int rep = 0; rep < 3; rep++) {
                int64_t m = th_randint(1, 9), k = th_randint(1, 40), n = th_randint(1, 9);
                int64_t batch[2] = {th_randint(1, 4), th_randint(1, 4)};
                int64_t as[4], bs[4];
                int nba = ad - 2, nbb = bd - 2;
                for (int d = 0; d < nba; d++) {
                    int64_t full = batch[d + 2 - nba];
                    as[d] = th_randint(0, 3) == 0 ? 1 : full;
                }
                for (int d = 0; d < nbb; d++) {
                    int64_t full = batch[d + 2 - nbb];
                    bs[d] = th_randint(0, 3) == 0 ? 1 : full;
                }
                if (ad == 1) as[0] = k;
                else as[ad - 2] = m, as[ad - 1] = k;
                if (bd == 1) bs[0] = k;
                else bs[bd - 2] = k, bs[bd - 1] = n;
                check_case(CN_F32, ad, as, (int)th_randint(0, TH_NLAYOUTS), CN_F32, bd, bs,
                           (int)th_randint(0, TH_NLAYOUTS), CN_F32);
            }
}

/* Every pair of layouts, 2-D and batched, f32 and f64. With BLAS, a
 * transposed matrix (TH_TRANSPOSED) is passed as CblasTrans and a transposed
 * one with a reversed axis (TH_MIXED), like reversed or gapped ones, is
 * copied first; the built-in GEMM packs every layout directly. */
static void test_layouts(void) {
    th_seed(2);
    for (int la = 0; la < TH_NLAYOUTS; la++)
        for (int lb = 0; lb < TH_NLAYOUTS; lb++) {
            check_case(CN_F32, 2, (int64_t[]){13, 21}, la, CN_F32, 2, (int64_t[]){21, 17}, lb,
                       CN_F32);
            check_case(CN_F64, 2, (int64_t[]){5, 70}, la, CN_F64, 2, (int64_t[]){70, 33}, lb,
                       CN_F64);
            check_case(CN_F32, 3, (int64_t[]){3, 7, 9}, la, CN_F32, 3, (int64_t[]){3, 9, 5}, lb,
                       CN_F32);
            check_case(CN_F64, 3, (int64_t[]){2, 6, 8}, la, CN_F64, 2, (int64_t[]){8, 4}, lb,
                       CN_F64);
            check_case(CN_F32, 1, (int64_t[]){30}, la, CN_F32, 2, (int64_t[]){30, 11}, lb, CN_F32);
            check_case(CN_F32, 2, (int64_t[]){11, 30}, la, CN_F32, 1, (int64_t[]){30}, lb, CN_F32);
            check_case(CN_F64, 1, (int64_t[]){50}, la, CN_F64, 1, (int64_t[]){50}, lb, CN_F64);
            check_case(CN_I32, 2, (int64_t[]){6, 9}, la, CN_I32, 2, (int64_t[]){9, 7}, lb, CN_I32);
        }
}

/* Sizes past the block and tile sizes, with threads in play. */
static void test_larger(void) {
    th_seed(3);
    check_case(CN_F32, 2, (int64_t[]){150, 300}, TH_CONTIG, CN_F32, 2, (int64_t[]){300, 130},
               TH_CONTIG, CN_F32);
    check_case(CN_F32, 2, (int64_t[]){97, 260}, TH_TRANSPOSED, CN_F32, 2, (int64_t[]){260, 75},
               TH_TRANSPOSED, CN_F32);
    check_case(CN_F64, 2, (int64_t[]){70, 129}, TH_REVERSED, CN_F64, 2, (int64_t[]){129, 90},
               TH_STRIDED, CN_F64);
    check_case(CN_F32, 1, (int64_t[]){5000}, TH_STRIDED, CN_F32, 2, (int64_t[]){5000, 40},
               TH_TRANSPOSED, CN_F32);
    check_case(CN_F32, 2, (int64_t[]){300, 700}, TH_CONTIG, CN_F32, 1, (int64_t[]){700},
               TH_REVERSED, CN_F32);
    check_case(CN_I64, 2, (int64_t[]){40, 90}, TH_MIXED, CN_I64, 2, (int64_t[]){90, 600},
               TH_CONTIG, CN_I64);
}

static void test_batch_broadcast(void) {
    th_seed(4);
    /* [2,1,3,4] @ [5,4,6] -> [2,5,3,6] */
    check_case(CN_F32, 4, (int64_t[]){2, 1, 3, 4}, TH_CONTIG, CN_F32, 3, (int64_t[]){5, 4, 6},
               TH_CONTIG, CN_F32);
    check_case(CN_F32, 2, (int64_t[]){3, 4}, TH_CONTIG, CN_F32, 3, (int64_t[]){2, 4, 5},
               TH_TRANSPOSED, CN_F32);
    check_case(CN_F64, 3, (int64_t[]){2, 3, 4}, TH_MIXED, CN_F64, 1, (int64_t[]){4}, TH_CONTIG,
               CN_F64);
    check_case(CN_F64, 1, (int64_t[]){4}, TH_CONTIG, CN_F64, 3, (int64_t[]){2, 4, 5}, TH_REVERSED,
               CN_F64);
    /* A batch folded into rows (b shared), and one that cannot be. */
    check_case(CN_F32, 3, (int64_t[]){7, 9, 20}, TH_CONTIG, CN_F32, 2, (int64_t[]){20, 33},
               TH_CONTIG, CN_F32);
    check_case(CN_F32, 4, (int64_t[]){2, 3, 1, 20}, TH_CONTIG, CN_F32, 2, (int64_t[]){20, 33},
               TH_STRIDED, CN_F32);
    check_case(CN_F32, 3, (int64_t[]){7, 9, 20}, TH_TRANSPOSED, CN_F32, 2, (int64_t[]){20, 33},
               TH_CONTIG, CN_F32);
    /* Many small products, split over the pool. */
    check_case(CN_F32, 3, (int64_t[]){1500, 8, 8}, TH_CONTIG, CN_F32, 3, (int64_t[]){1500, 8, 8},
               TH_TRANSPOSED, CN_F32);
    check_case(CN_I32, 3, (int64_t[]){1500, 8, 8}, TH_REVERSED, CN_I32, 2, (int64_t[]){8, 8},
               TH_CONTIG, CN_I32);
    check_case(CN_F64, 4, (int64_t[]){20, 1, 3, 5}, TH_STRIDED, CN_F64, 3,
               (int64_t[]){7, 5, 2}, TH_CONTIG, CN_F64);

    /* A broadcast b given as an expanded view (stride 0) over the batch. */
    cn_tensor *a = cn_reshape(cn_arange(0, 24, 1, CN_F32), CN_SHAPE(2, 3, 4));
    cn_tensor *b = cn_expand(cn_reshape(cn_arange(0, 8, 1, CN_F32), CN_SHAPE(1, 4, 2)),
                             CN_SHAPE(2, 4, 2));
    cn_tensor *c = cn_matmul(a, b);
    CHECK_SHAPE(c, 2, 3, 2);
    /* row [12..15] @ [[0,1],[2,3],[4,5],[6,7]] */
    CHECK_CLOSE(cn_get(c, (int64_t[]){1, 0, 0}), 12 * 0 + 13 * 2 + 14 * 4 + 15 * 6, 0, 0);
    CHECK_CLOSE(cn_get(c, (int64_t[]){1, 0, 1}), 12 * 1 + 13 * 3 + 14 * 5 + 15 * 7, 0, 0);
}

static void test_by_hand(void) {
    cn_tensor *a = cn_from_data(CN_F32, CN_SHAPE(2, 3), (float[]){1, 2, 3, 4, 5, 6});
    cn_tensor *b = cn_from_data(CN_F32, CN_SHAPE(3, 2), (float[]){7, 8, 9, 10, 11, 12});
    cn_tensor *c = cn_matmul(a, b);
    CHECK_SHAPE(c, 2, 2);
    double want[] = {58, 64, 139, 154};
    for (int i = 0; i < 4; i++) CHECK_CLOSE(th_at(c, i), want[i], 0, 0);
    /* 1-D @ 1-D: a rank-0 dot product. */
    cn_tensor *v = cn_from_data(CN_F64, CN_SHAPE(3), (double[]){1, 2, 3});
    cn_tensor *d = cn_matmul(v, v);
    CHECK(d && cn_ndim(d) == 0);
    CHECK_CLOSE(cn_item(d), 14, 0, 0);
    /* 1-D left is a row, 1-D right a column; the added axis goes again. */
    cn_tensor *row = cn_matmul(cn_from_data(CN_F32, CN_SHAPE(2), (float[]){1, -1}), a);
    CHECK_SHAPE(row, 3);
    CHECK_CLOSE(th_at(row, 0), -3, 0, 0);
    cn_tensor *col = cn_matmul(a, cn_from_data(CN_F32, CN_SHAPE(3), (float[]){1, 0, -1}));
    CHECK_SHAPE(col, 2);
    CHECK_CLOSE(th_at(col, 1), -2, 0, 0);
}

static void test_zero_sizes(void) {
    th_seed(5);
    /* k = 0: zeros. */
    cn_tensor *c = cn_matmul(cn_ones(CN_F32, CN_SHAPE(3, 0)), cn_ones(CN_F32, CN_SHAPE(0, 4)));
    CHECK_SHAPE(c, 3, 4);
    for (int i = 0; i < 12; i++) CHECK_CLOSE(th_at(c, i), 0, 0, 0);
    cn_tensor *d = cn_matmul(cn_ones(CN_F64, CN_SHAPE(0)), cn_ones(CN_F64, CN_SHAPE(0)));
    CHECK(d && cn_ndim(d) == 0);
    CHECK_CLOSE(cn_item(d), 0, 0, 0);
    cn_tensor *e = cn_matmul(cn_ones(CN_I64, CN_SHAPE(2, 2, 0)), cn_ones(CN_I64, CN_SHAPE(0, 3)));
    CHECK_SHAPE(e, 2, 2, 3);
    CHECK_EQ_INT(th_at(e, 11), 0);
    /* m, n or a batch of 0: an empty result. */
    CHECK_SHAPE(cn_matmul(cn_ones(CN_F32, CN_SHAPE(0, 5)), cn_ones(CN_F32, CN_SHAPE(5, 4))), 0, 4);
    CHECK_SHAPE(cn_matmul(cn_ones(CN_F32, CN_SHAPE(3, 5)), cn_ones(CN_F32, CN_SHAPE(5, 0))), 3, 0);
    CHECK_SHAPE(cn_matmul(cn_ones(CN_F32, CN_SHAPE(0, 3, 5)), cn_ones(CN_F32, CN_SHAPE(5, 2))),
                0, 3, 2);
    CHECK_SHAPE(cn_matmul(cn_ones(CN_F32, CN_SHAPE(2, 1, 3, 5)), cn_ones(CN_F32, CN_SHAPE(0, 5, 2))),
                2, 0, 3, 2);
    CHECK_SHAPE(cn_matmul(cn_ones(CN_F32, CN_SHAPE(5)), cn_ones(CN_F32, CN_SHAPE(5, 0))), 0);
    for (int la = 0; la < TH_NLAYOUTS; la++)
        check_case(CN_F32, 3, (int64_t[]){2, 4, 0}, la, CN_F32, 2, (int64_t[]){0, 3}, la, CN_F32);
}

static void test_dtypes(void) {
    th_seed(6);
    int64_t as[] = {2, 5, 23}, bs[] = {23, 6};
    check_case(CN_F64, 3, as, TH_MIXED, CN_F64, 2, bs, TH_TRANSPOSED, CN_F64);
    check_case(CN_I32, 3, as, TH_REVERSED, CN_I32, 2, bs, TH_CONTIG, CN_I32);
    check_case(CN_I64, 3, as, TH_CONTIG, CN_I64, 2, bs, TH_STRIDED, CN_I64);
    check_case(CN_I64, 1, (int64_t[]){23}, TH_REVERSED, CN_I64, 1, (int64_t[]){23}, TH_STRIDED,
               CN_I64);
    /* Promotion, PyTorch's rules: the int operand is cast. */
    check_case(CN_I32, 3, as, TH_CONTIG, CN_F32, 2, bs, TH_TRANSPOSED, CN_F32);
    check_case(CN_F64, 3, as, TH_CONTIG, CN_I64, 2, bs, TH_CONTIG, CN_F64);
    check_case(CN_I32, 2, (int64_t[]){5, 23}, TH_CONTIG, CN_I64, 2, bs, TH_MIXED, CN_I64);
    check_case(CN_F32, 2, (int64_t[]){5, 23}, TH_CONTIG, CN_F64, 2, bs, TH_CONTIG, CN_F64);
    /* Half types compute in f32 and give their own dtype back. */
    check_case(CN_F16, 3, as, TH_TRANSPOSED, CN_F16, 2, bs, TH_CONTIG, CN_F16);
    check_case(CN_BF16, 2, (int64_t[]){5, 23}, TH_CONTIG, CN_BF16, 1, (int64_t[]){23}, TH_MIXED,
               CN_BF16);
    check_case(CN_F16, 2, (int64_t[]){5, 23}, TH_CONTIG, CN_F32, 2, bs, TH_CONTIG, CN_F32);

    /* u8 wraps modulo 256, as in PyTorch. */
    double uv[9 * 40], wv[40 * 70];
    cn_tensor *u = th_random(CN_U8, 2, (int64_t[]){9, 40}, 0, 256, TH_TRANSPOSED, uv);
    cn_tensor *w = th_random(CN_U8, 2, (int64_t[]){40, 70}, 0, 256, TH_STRIDED, wv);
    cn_tensor *uw = cn_matmul(u, w);
    ref_result r = ref_matmul(2, (int64_t[]){9, 40}, uv, 2, (int64_t[]){40, 70}, wv);
    CHECK(uw && cn_tensor_dtype(uw) == CN_U8);
    for (int64_t i = 0; uw && i < r.numel; i++)
        if (th_at(uw, i) != fmod(r.val[i], 256)) {
            CHECK_EQ_INT(th_at(uw, i), fmod(r.val[i], 256));
            break;
        }
    ref_free(&r);
    /* Integer products wrap instead of overflowing (UBSan checks this). */
    cn_tensor *x = cn_from_data(CN_I32, CN_SHAPE(1, 2), (int32_t[]){65536, INT32_MAX});
    cn_tensor *y = cn_from_data(CN_I32, CN_SHAPE(2, 1), (int32_t[]){65536, 2});
    CHECK_EQ_INT(cn_get_int(cn_matmul(x, y), (int64_t[]){0, 0}), -2);
    cn_tensor *p = cn_from_data(CN_I64, CN_SHAPE(2), (int64_t[]){INT64_MAX, 1});
    CHECK_EQ_INT(cn_item(cn_cast(cn_matmul(p, cn_from_data(CN_I64, CN_SHAPE(2), (int64_t[]){2, 2})),
                                 CN_F64)),
                 0);
}

static void test_errors(void) {
    cn_tensor *a = cn_zeros(CN_F32, CN_SHAPE(32, 784)), *b = cn_zeros(CN_F32, CN_SHAPE(512, 256));
    CHECK_ERROR(cn_matmul(a, b),
                "matmul: a is [32, 784] and b is [512, 256]: inner dimensions 784 != 512");
    CHECK_ERROR(cn_matmul(cn_zeros(CN_F32, CN_SHAPE(3)), cn_zeros(CN_F32, CN_SHAPE(4))),
                "a is [3] and b is [4]: inner dimensions 3 != 4");
    CHECK_ERROR(cn_matmul(cn_zeros(CN_F32, CN_SHAPE(2, 3)), cn_zeros(CN_F32, CN_SHAPE(4))),
                "a is [2, 3] and b is [4]: inner dimensions 3 != 4");
    CHECK_ERROR(cn_matmul(cn_zeros(CN_F32, CN_SHAPE(4)), cn_zeros(CN_F32, CN_SHAPE(2, 3, 5))),
                "a is [4] and b is [2, 3, 5]: inner dimensions 4 != 3");
    CHECK_ERROR(cn_matmul(cn_zeros(CN_F32, CN_SHAPE(2, 3, 4)), cn_zeros(CN_F32, CN_SHAPE(5, 4, 6))),
                "matmul: a is [2, 3, 4] and b is [5, 4, 6]: batch dimensions [2] and [5] do not "
                "broadcast");
    CHECK_ERROR(cn_matmul(cn_scalar(CN_F32, 2), a), "matmul: a is [] and b is [32, 784]");
    CHECK_ERROR(cn_matmul(a, cn_scalar(CN_F32, 2)), "at least one dimension");
    CHECK_ERROR(cn_matmul(cn_zeros(CN_BOOL, CN_SHAPE(2, 2)), cn_zeros(CN_BOOL, CN_SHAPE(2, 2))),
                "bool");
    /* NULL in, NULL out, and the first error is kept. */
    cn_clear_error();
    CHECK(cn_matmul(NULL, a) == NULL && cn_matmul(a, NULL) == NULL);
    CHECK(strcmp(cn_last_error(), "") == 0);
}

/* ---- the built-in GEMM, called directly ---- */

/* C = A B with A and B at arbitrary strides inside bigger buffers; checks
 * every element against double. */
static void check_builtin(cn_dtype dt, int64_t m, int64_t n, int64_t k, int64_t rsa, int64_t csa,
                          int64_t rsb, int64_t csb, int64_t ldc) {
    size_t es = dt == CN_F32 ? 4 : 8;
    /* Strides may be negative: place element (0,0) so every element fits. */
    int64_t spanA = (m - 1) * llabs(rsa) + (k - 1) * llabs(csa) + 1;
    int64_t spanB = (k - 1) * llabs(rsb) + (n - 1) * llabs(csb) + 1;
    int64_t offA = (rsa < 0 ? (m - 1) * -rsa : 0) + (csa < 0 ? (k - 1) * -csa : 0);
    int64_t offB = (rsb < 0 ? (k - 1) * -rsb : 0) + (csb < 0 ? (n - 1) * -csb : 0);
    char *A = calloc((size_t)spanA, es), *B = calloc((size_t)spanB, es);
    char *C = calloc((size_t)(m * ldc + 1), es);
    double *ad = malloc(sizeof(double) * (size_t)(m * k + 1)), *bd = malloc(sizeof(double) * (size_t)(k * n + 1));
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = 0; p < k; p++) {
            double v = th_uniform(-1, 1);
            int64_t at = offA + i * rsa + p * csa;
            if (dt == CN_F32) v = ((float *)A)[at] = (float)v;
            else ((double *)A)[at] = v;
            ad[i * k + p] = v;
        }
    for (int64_t p = 0; p < k; p++)
        for (int64_t j = 0; j < n; j++) {
            double v = th_uniform(-1, 1);
            int64_t at = offB + p * rsb + j * csb;
            if (dt == CN_F32) v = ((float *)B)[at] = (float)v;
            else ((double *)B)[at] = v;
            bd[p * n + j] = v;
        }
    /* Rows of C past n must stay untouched. */
    for (int64_t i = 0; i < m * ldc; i++) {
        if (dt == CN_F32) ((float *)C)[i] = 42.0f;
        else ((double *)C)[i] = 42.0;
    }
    int rc = cn_gemm_builtin(dt, m, n, k, A + offA * (int64_t)es, rsa, csa, B + offB * (int64_t)es,
                             rsb, csb, C, ldc);
    CHECK_EQ_INT(rc, 0);
    double rtol = tol_for(dt);
    int bad = 0;
    for (int64_t i = 0; i < m && !bad; i++)
        for (int64_t j = 0; j < ldc && !bad; j++) {
            double got = dt == CN_F32 ? ((float *)C)[i * ldc + j] : ((double *)C)[i * ldc + j];
            double want = 42, scale = 0;
            if (j < n) {
                want = 0;
                for (int64_t p = 0; p < k; p++) {
                    want += ad[i * k + p] * bd[p * n + j];
                    scale += fabs(ad[i * k + p] * bd[p * n + j]);
                }
            }
            if (!(fabs(got - want) <= rtol * scale)) {
                th_fail(__FILE__, __LINE__,
                        "builtin %s m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " strides (%" PRId64
                        ",%" PRId64 ") (%" PRId64 ",%" PRId64 ") ldc %" PRId64
                        ": C[%" PRId64 ",%" PRId64 "] = %.9g, expected %.9g",
                        cn_dtype_name(dt), m, n, k, rsa, csa, rsb, csb, ldc, i, j, got, want);
                bad = 1;
            }
        }
    th_checks++;
    free(A);
    free(B);
    free(C);
    free(ad);
    free(bd);
}

/* Each register tile on sizes around its edges, several k blocks, and
 * operands row-major, transposed, reversed and with gaps. */
static void test_builtin_tiles(void) {
    th_seed(7);
    cn_dtype dts[] = {CN_F32, CN_F64};
    for (int d = 0; d < 2; d++) {
        cn_dtype dt = dts[d];
        for (int t = 0; cn_gemm_select_tile(dt, t); t++) {
            int64_t shapes[][3] = {{1, 1, 1},   {7, 5, 3},    {13, 65, 1},  {6, 64, 257},
                                   {25, 97, 40}, {37, 130, 600}, {64, 24, 31}, {2, 300, 9}};
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                check_builtin(dt, m, n, k, k, 1, n, 1, n);         /* row-major */
                check_builtin(dt, m, n, k, 1, m, 1, k, n + 3);     /* both transposed, ldc > n */
                check_builtin(dt, m, n, k, -k, -1, 2 * n, -2, n);  /* reversed, gaps */
                check_builtin(dt, m, n, k, 3, 3 * m + 1, -1, -k, n); /* column gaps */
            }
        }
        cn_gemm_select_tile(dt, -1);
    }
}

/* m = 1 or n = 1 take the matrix-vector kernels; every stride kind. */
static void test_builtin_vectors(void) {
    th_seed(8);
    int64_t ks[] = {1, 5, 31, 32, 33, 1000};
    for (int d = 0; d < 2; d++) {
        cn_dtype dt = d ? CN_F64 : CN_F32;
        for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
            int64_t k = ks[i];
            check_builtin(dt, 1, 1, k, 1, 1, 1, 1, 1);     /* dot */
            check_builtin(dt, 1, 1, k, 7, -2, 3, 5, 1);    /* strided dot */
            check_builtin(dt, 1, 70, k, 1, 1, 70, 1, 70);  /* row @ matrix */
            check_builtin(dt, 1, 70, k, 1, -3, 1, k, 70);  /* row @ transposed matrix */
            check_builtin(dt, 1, 9, k, 1, 2, -2, -2 * k, 9); /* neither unit: the GEMM */
            check_builtin(dt, 45, 1, k, k, 1, 1, 1, 1);    /* matrix @ column */
            check_builtin(dt, 45, 1, k, 1, 45, -1, 1, 1);  /* transposed matrix @ column */
            check_builtin(dt, 45, 1, k, k, 1, 2, 1, 4);    /* column output with a gap */
        }
    }
}

/* The same bits for 1 and 2 threads, on products big enough to be split:
 * the GEMM, the vector kernels, and the op itself. */
static void test_thread_invariance(void) {
    th_seed(9);
    int saved = cn_get_num_threads();
    int64_t shapes[][3] = {{200, 150, 300}, {1, 3000, 200}, {3000, 1, 200}, {5, 700, 900}};
    for (int d = 0; d < 2; d++) {
        cn_dtype dt = d ? CN_F64 : CN_F32;
        size_t es = d ? 8 : 4;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            char *A = malloc(es * (size_t)(m * k)), *B = malloc(es * (size_t)(k * n));
            char *C1 = malloc(es * (size_t)(m * n)), *C2 = malloc(es * (size_t)(m * n));
            for (int64_t i = 0; i < m * k; i++) {
                if (d) ((double *)A)[i] = th_uniform(-1, 1);
                else ((float *)A)[i] = (float)th_uniform(-1, 1);
            }
            for (int64_t i = 0; i < k * n; i++) {
                if (d) ((double *)B)[i] = th_uniform(-1, 1);
                else ((float *)B)[i] = (float)th_uniform(-1, 1);
            }
            cn_set_num_threads(1);
            cn_gemm_builtin(dt, m, n, k, A, k, 1, B, 1, k, C1, n); /* B transposed */
            cn_set_num_threads(2);
            cn_gemm_builtin(dt, m, n, k, A, k, 1, B, 1, k, C2, n);
            CHECK_MSG(memcmp(C1, C2, es * (size_t)(m * n)) == 0,
                      "%s %" PRId64 "x%" PRId64 "x%" PRId64 ": 1 and 2 threads differ",
                      cn_dtype_name(dt), m, n, k);
            free(A);
            free(B);
            free(C1);
            free(C2);
        }
    }
    /* Through the op (BLAS where built with it, whose results may depend on
     * its threads: only compared without BLAS). */
    cn_tensor *a = th_random(CN_F32, 3, (int64_t[]){6, 40, 70}, -1, 1, TH_CONTIG, NULL);
    cn_tensor *b = th_random(CN_F32, 2, (int64_t[]){70, 90}, -1, 1, TH_TRANSPOSED, NULL);
    cn_set_num_threads(1);
    cn_tensor *c1 = cn_matmul(a, b);
    cn_set_num_threads(2);
    cn_tensor *c2 = cn_matmul(a, b);
    CHECK(cn_allclose(c1, c2, 1e-5, 1e-5));
#ifndef CN_HAVE_CBLAS
    CHECK(cn_equal(c1, c2));
#endif
    cn_tensor *ia = th_random(CN_I64, 2, (int64_t[]){300, 64}, -9, 9, TH_CONTIG, NULL);
    cn_tensor *ib = th_random(CN_I64, 2, (int64_t[]){64, 50}, -9, 9, TH_MIXED, NULL);
    cn_set_num_threads(1);
    cn_tensor *i1 = cn_matmul(ia, ib);
    cn_set_num_threads(2);
    CHECK(cn_equal(i1, cn_matmul(ia, ib)));
    cn_set_num_threads(saved);
}

/* Operands packed once (cn_gemm_pack): the same bits as packing on the
 * fly, for the A and the B side, any layout, either of two matrices of a
 * pack, every tile, 1 and 2 threads; within rounding of double; and a
 * pointer, stride or tile the pack was not made for falls back. */
static void fill_rand(cn_dtype dt, void *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (dt == CN_F32) ((float *)p)[i] = (float)th_uniform(-1, 1);
        else ((double *)p)[i] = th_uniform(-1, 1);
    }
}

static double elem(cn_dtype dt, const void *p, int64_t i) {
    return dt == CN_F32 ? ((const float *)p)[i] : ((const double *)p)[i];
}

static void check_packed(cn_dtype dt, bool b_side, int64_t m, int64_t n, int64_t k, bool trans,
                         bool naive) {
    size_t es = cn_dsize(dt);
    /* Two matrices of the packed side, 7 elements apart beyond their size. */
    int64_t rows = b_side ? n : m, gstride = rows * k + 7;
    char *P = malloc(es * (size_t)(2 * gstride)), *O = malloc(es * (size_t)(m > n ? m : n) * k);
    char *C1 = malloc(es * (size_t)(m * n)), *C2 = malloc(es * (size_t)(m * n));
    fill_rand(dt, P, 2 * gstride);
    fill_rand(dt, O, (m > n ? m : n) * k);
    /* The packed side's strides: row-major, or its transpose. */
    int64_t rs = b_side ? (trans ? 1 : n) : (trans ? 1 : k);
    int64_t cs = b_side ? (trans ? k : 1) : (trans ? m : 1);
    cn_gemm_pack *pk = cn_gemm_pack_new(dt, b_side, rows, k, NULL, P, rs, cs, 2, gstride);
    CHECK(pk != NULL);
    CHECK(cn_gemm_pack_bytes(pk) >= es * (size_t)(2 * rows * k));
    const char *mat = P + es * (size_t)gstride; /* matrix 1 */
    const char *a = b_side ? O : mat, *b = b_side ? mat : O;
    int64_t rsa = b_side ? k : rs, csa = b_side ? 1 : cs;
    int64_t rsb = b_side ? rs : n, csb = b_side ? cs : 1;
    for (int threads = 1; threads <= 2; threads++) {
        cn_set_num_threads(threads);
        CHECK_EQ_INT(cn_gemm_builtin(dt, m, n, k, a, rsa, csa, b, rsb, csb, C1, n), 0);
        memset(C2, 0x7f, es * (size_t)(m * n));
        CHECK_EQ_INT(cn_gemm_packed(dt, m, n, k, a, rsa, csa, b, rsb, csb, C2, n, pk, 1, NULL), 0);
        CHECK_MSG(memcmp(C1, C2, es * (size_t)(m * n)) == 0,
                  "%s %s side %" PRId64 "x%" PRId64 "x%" PRId64 "%s, %d threads: packed differs",
                  cn_dtype_name(dt), b_side ? "B" : "A", m, n, k, trans ? " transposed" : "",
                  threads);
    }
    double worst = 0;
    for (int64_t i = 0; naive && i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double want = 0, scale = 0;
            for (int64_t p = 0; p < k; p++) {
                double x = elem(dt, a, i * rsa + p * csa) * elem(dt, b, p * rsb + j * csb);
                want += x;
                scale += fabs(x);
            }
            double err = fabs(elem(dt, C2, i * n + j) - want) / (scale > 0 ? scale : 1);
            if (err > worst) worst = err;
        }
    CHECK_MSG(worst <= tol_for(dt), "packed %s: error %g of the scale", cn_dtype_name(dt), worst);
    /* Matrix 0's pack does not match matrix 1's pointer, nor another
     * stride: the product packs on the fly and is still right. */
    CHECK_EQ_INT(cn_gemm_packed(dt, m, n, k, a, rsa, csa, b, rsb, csb, C2, n, pk, 0, NULL), 0);
    CHECK(memcmp(C1, C2, es * (size_t)(m * n)) == 0);
    cn_gemm_pack_free(pk);
    free(P);
    free(O);
    free(C1);
    free(C2);
}

static void test_builtin_packed(void) {
    th_seed(10);
    int saved = cn_get_num_threads();
    /* Two k blocks in the last three (the tiles' kc is 256), whose next
     * block a packed operand prefetches; in the third also several blocks
     * of columns (the tiles' nc is 1032 at most), where a packed B has A
     * packed whole first; the last one's rows split between 2 threads (it
     * was 700 x 600 x 300, which split them too, at twice the time: 35 s
     * of the test under ASan). */
    int64_t shapes[][3] = {{25, 97, 40}, {37, 70, 300}, {45, 1100, 300}, {700, 300, 300}};
    for (int d = 0; d < 2; d++) {
        cn_dtype dt = d ? CN_F64 : CN_F32;
        /* Every f32 tile (the layouts differ), f64's default one. */
        for (int t = d ? -1 : 0; t < 0 || cn_gemm_select_tile(dt, t); t++) {
            if (t < 0) cn_gemm_select_tile(dt, -1);
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int side = 0; side < 2; side++)
                    check_packed(dt, side, shapes[s][0], shapes[s][1], shapes[s][2], s == 1,
                                 t <= 0);
            if (t < 0) break;
        }
        cn_gemm_select_tile(dt, -1);
    }
    /* A pack made for another tile is not used. */
    float A[6 * 5], B[5 * 40], C1[6 * 40], C2[6 * 40];
    fill_rand(CN_F32, A, 30);
    fill_rand(CN_F32, B, 200);
    cn_gemm_select_tile(CN_F32, 0);
    cn_gemm_pack *pk = cn_gemm_pack_new(CN_F32, true, 40, 5, NULL, B, 40, 1, 1, 0);
    cn_gemm_select_tile(CN_F32, 1);
    cn_gemm_builtin(CN_F32, 6, 40, 5, A, 5, 1, B, 40, 1, C1, 40);
    cn_gemm_packed(CN_F32, 6, 40, 5, A, 5, 1, B, 40, 1, C2, 40, pk, 0, NULL);
    CHECK(memcmp(C1, C2, sizeof C1) == 0);
    cn_gemm_select_tile(CN_F32, -1);
    cn_gemm_pack_free(pk);
    /* What a pack was made as: its side, sizes, strides and groups. */
    pk = cn_gemm_pack_new(CN_F32, true, 40, 5, NULL, B, 1, 5, 1, 0);
    CHECK(cn_gemm_pack_made_as(pk, true, 40, 5, 1, 5, 1, 0));
    CHECK(!cn_gemm_pack_made_as(pk, false, 40, 5, 1, 5, 1, 0));
    CHECK(!cn_gemm_pack_made_as(pk, true, 40, 5, 5, 1, 1, 0));
    CHECK(!cn_gemm_pack_made_as(pk, true, 40, 5, 1, 5, 2, 200));
    CHECK(!cn_gemm_pack_made_as(NULL, true, 40, 5, 1, 5, 1, 0));
    cn_gemm_pack_free(pk);
    /* Nothing to pack is an error naming it. */
    CHECK(cn_gemm_pack_new(CN_I32, true, 4, 4, NULL, B, 4, 1, 1, 0) == NULL);
    CHECK(strstr(cn_last_error(), "nothing to pack") != NULL);
    cn_set_num_threads(saved);
}

/* Which GEMM cn_gemm calls: CN_GEMM forces it (the test runs with each,
 * tests/CMakeLists.txt); otherwise OpenBLAS unless its kernels are an older
 * core's than the built-in tile's. */
static void test_gemm_choice(void) {
    const char *why = NULL, *env = getenv("CN_GEMM");
    bool blas = cn_gemm_uses_blas(&why);
    CHECK(why && strcmp(why, cn_cpu_gemm()) == 0);
#ifdef CN_HAVE_CBLAS
    if (env && !strcmp(env, "builtin")) CHECK(!blas && strstr(why, "CN_GEMM=builtin"));
    if (env && !strcmp(env, "blas")) CHECK(blas && strstr(why, "CN_GEMM=blas"));
#else
    (void)env;
    CHECK(!blas && strstr(why, "no BLAS in this build"));
#endif
    if (!blas) CHECK(strncmp(why, "built-in", 8) == 0);
    /* OpenBLAS's names for its kernels (openblas_get_corename) */
    CHECK(cn_gemm_blas_core_narrow("Prescott"));
    CHECK(cn_gemm_blas_core_narrow("prescott"));
    CHECK(cn_gemm_blas_core_narrow("Core2"));
    CHECK(cn_gemm_blas_core_narrow("Sandybridge"));
    CHECK(cn_gemm_blas_core_narrow("Nehalem"));
    CHECK(!cn_gemm_blas_core_narrow("Haswell"));
    CHECK(!cn_gemm_blas_core_narrow("SkylakeX"));
    CHECK(!cn_gemm_blas_core_narrow("Cooperlake"));
    CHECK(!cn_gemm_blas_core_narrow("Zen"));
    CHECK(!cn_gemm_blas_core_narrow("Prescott2")); /* unknown names are trusted */
    CHECK(!cn_gemm_blas_core_narrow(""));
    CHECK(!cn_gemm_blas_core_narrow(NULL));
    /* The whole rule, whatever this machine is: (CN_GEMM, BLAS built in,
     * OpenBLAS's core, level) -> BLAS or not, and what the reason says. */
    static const struct {
        const char *env;
        bool have;
        const char *core;
        int isa;
        bool blas;
        const char *says;
    } rules[] = {
        {NULL, true, "Prescott", CN_ISA_AVX512, false, "Prescott's kernels"},
        {NULL, true, "Prescott", CN_ISA_AVX2, false, "without AVX2+FMA"},
        {NULL, true, "Prescott", CN_ISA_DEFAULT, true, "OpenBLAS (Prescott kernels)"},
        {NULL, true, "Haswell", CN_ISA_AVX2, true, "OpenBLAS (Haswell kernels)"},
        {NULL, true, "Zen", CN_ISA_AVX512, true, "OpenBLAS (Zen kernels)"},
        {NULL, true, NULL, CN_ISA_AVX512, true, "BLAS"},
        {"blas", true, "Prescott", CN_ISA_AVX512, true, "CN_GEMM=blas"},
        {"builtin", true, "Haswell", CN_ISA_AVX2, false, "CN_GEMM=builtin"},
        {"blas", false, NULL, CN_ISA_AVX2, false, "CN_GEMM=blas ignored"},
        {NULL, false, NULL, CN_ISA_AVX2, false, "no BLAS in this build"},
        {"BLAS", true, "Haswell", CN_ISA_AVX2, true, "CN_GEMM=BLAS not understood"},
        {"bltin", true, "Prescott", CN_ISA_AVX2, false, "CN_GEMM=bltin not understood"},
        {"x", true, NULL, CN_ISA_AVX2, true, "BLAS (CN_GEMM=x not understood)"},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        char said[192];
        bool got = cn_gemm_blas_choose(rules[i].env, rules[i].have, rules[i].core, rules[i].isa,
                                       said, sizeof said);
        CHECK_MSG(got == rules[i].blas && strstr(said, rules[i].says),
                  "rule %zu: %s, \"%s\"", i, got ? "BLAS" : "built-in", said);
    }
}

/* Rows that fill tiles of 7 better than of 8 take the 7x32 tile where
 * 8x32 is the automatic one (gemm.c): the same bits as 8x32 forced, with A
 * packed on the fly and B packed on the fly or beforehand (for 8x32). */
static void test_seven_row_tile(void) {
    if (strcmp(cn_gemm_select_tile(CN_F32, -1), "8x32") != 0) return; /* not this CPU's tile */
    th_seed(12);
    const int64_t m = 49, n = 70, k = 300;
    float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
    float *c7 = malloc(sizeof(float) * (size_t)(m * n)), *c8 = malloc(sizeof(float) * (size_t)(m * n));
    float *cp = malloc(sizeof(float) * (size_t)(m * n));
    fill_rand(CN_F32, a, m * k);
    fill_rand(CN_F32, b, k * n);
    cn_gemm_pack *pk = cn_gemm_pack_new(CN_F32, true, n, k, NULL, b, n, 1, 1, 0);
    CHECK(pk != NULL);
    cn_gemm_builtin(CN_F32, m, n, k, a, k, 1, b, n, 1, c7, n);
    cn_gemm_packed(CN_F32, m, n, k, a, k, 1, b, n, 1, cp, n, pk, 0, NULL);
    cn_gemm_select_tile(CN_F32, 0);
    cn_gemm_builtin(CN_F32, m, n, k, a, k, 1, b, n, 1, c8, n);
    cn_gemm_select_tile(CN_F32, -1);
    CHECK(memcmp(c7, c8, sizeof(float) * (size_t)(m * n)) == 0);
    CHECK(memcmp(cp, c8, sizeof(float) * (size_t)(m * n)) == 0);
    cn_gemm_pack_free(pk);
    free(a), free(b), free(c7), free(c8), free(cp);
}

int main(void) {
    fprintf(stderr, "%s; f32 tile %s, f64 tile %s; gemm: %s\n", cn_build_info(),
            cn_gemm_select_tile(CN_F32, -1), cn_gemm_select_tile(CN_F64, -1), cn_cpu_gemm());
    RUN(test_gemm_choice);
    RUN(test_by_hand);
    RUN(test_rank_combinations);
    RUN(test_layouts);
    RUN(test_larger);
    RUN(test_batch_broadcast);
    RUN(test_zero_sizes);
    RUN(test_dtypes);
    RUN(test_errors);
    RUN(test_builtin_tiles);
    RUN(test_builtin_vectors);
    RUN(test_thread_invariance);
    RUN(test_builtin_packed);
    RUN(test_seven_row_tile);
    return th_summary();
}
