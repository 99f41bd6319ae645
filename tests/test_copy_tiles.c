/* Copies of permuted views, which run in tiles (src/backend/cpu/transpose.c)
 * when the source is unit-stride along another axis than the destination:
 * every element against the view read element by element (cn_get walks
 * the view's strides), for 1-, 2-, 4- and 8-byte dtypes, shapes around the
 * tile (8) and block (256) sizes, extra axes, steps and reversed axes, and
 * at 1 and 2 threads. */
#include "harness.h"

static const cn_dtype dtypes[] = {CN_U8, CN_F16, CN_F32, CN_F64, CN_I64};

/* Distinct values (as far as the dtype holds them exactly) in row-major
 * order. */
static cn_tensor *source(cn_dtype dt, int nd, const int64_t *shape) {
    int64_t n = th_numel(nd, shape);
    double mod = dt == CN_U8 ? 251 : dt == CN_F16 ? 2039 : 1e9;
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = fmod((double)i * 7, mod);
    cn_tensor *t = cn_cast(cn_from_data(CN_F64, nd, shape, v), dt);
    free(v);
    return t;
}

/* contiguous(view) holds view's elements in row-major order. */
static void check_copy(cn_tensor *view, const char *what) {
    cn_tensor *c = cn_contiguous(view);
    CHECK(c != NULL && cn_is_contiguous(c));
    if (!c) return;
    int nd = cn_ndim(view);
    const int64_t *shape = cn_shape(view);
    int64_t n = cn_numel(view), idx[8];
    int bad = 0;
    for (int64_t k = 0; k < n && bad < 3; k++) {
        th_unravel(k, nd, shape, idx);
        double want = cn_get(view, idx), got = cn_get(c, idx);
        if (want != got) {
            bad++;
            CHECK_MSG(false, "%s (%s): element %" PRId64 " is %g, the view holds %g", what,
                      cn_dtype_name(cn_tensor_dtype(view)), k, got, want);
        }
    }
    /* copy_ into an existing tensor takes the same path. */
    cn_tensor *d = cn_empty(cn_tensor_dtype(view), nd, shape);
    CHECK(cn_copy_(d, view) == CN_OK);
    CHECK(memcmp(cn_data(d), cn_data(c), (size_t)n * cn_dtype_size(cn_tensor_dtype(c))) == 0);
}

static void test_transposes(void) {
    const int64_t sizes[][2] = {{8, 8}, {9, 17}, {1024, 64}, {33, 300}, {300, 520}, {7, 40}, {256, 257}};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            cn_tensor *x = source(dtypes[d], 2, sizes[s]);
            check_copy(cn_transpose(x, 0, 1), "transpose");
        }
}

/* Random permutations of 3-4 axes, some sliced with a step or reversed. */
static void test_permutes(void) {
    th_seed(9);
    for (int trial = 0; trial < 60; trial++) {
        cn_dtype dt = dtypes[trial % 5];
        int nd = 3 + (int)th_randint(0, 2);
        int64_t shape[4];
        for (int i = 0; i < nd; i++) shape[i] = th_randint(1, trial % 3 == 0 ? 70 : 20);
        cn_tensor *x = source(dt, nd, shape);
        int perm[4] = {0, 1, 2, 3};
        for (int i = nd - 1; i > 0; i--) {
            int j = (int)th_randint(0, i + 1), t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        cn_tensor *v = cn_permute(x, perm, nd);
        int ax = (int)th_randint(0, nd);
        int64_t step = trial % 4 == 1 ? 2 : trial % 4 == 2 ? -1 : 1;
        if (step != 1) v = cn_slice(v, ax, CN_BEGIN, CN_END, step);
        check_copy(v, "permute");
    }
}

static void test_threads(void) {
    int before = cn_get_num_threads();
    cn_tensor *x = source(CN_F32, 3, (int64_t[]){3, 200, 300});
    for (int t = 1; t <= 2; t++) {
        cn_set_num_threads(t);
        check_copy(cn_permute(x, (int[]){2, 0, 1}, 3), "permute 2 0 1");
        check_copy(cn_transpose(x, 1, 2), "transpose 1 2");
    }
    cn_set_num_threads(before);
}

int main(void) {
    RUN(test_transposes);
    RUN(test_permutes);
    RUN(test_threads);
    return th_summary();
}
