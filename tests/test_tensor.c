/* The tensor core: creation, element access, copies, comparisons, summary
 * statistics, printing, scopes, NULL propagation, dtypes, the f16/bf16
 * conversions, and releasing long chains. */
#include "harness.h"

#include "core/core.h" /* cn_node_new, struct fields: building chains by hand */
#include "core/isa.h"

static const cn_dtype all_dtypes[] = {CN_F32, CN_F64, CN_F16, CN_BF16,
                                      CN_I32, CN_I64, CN_U8,  CN_BOOL};
#define NDTYPES 8

/* A borrowed buffer whose release we can watch. */
static int frees_seen;
static void count_free(void *p) {
    frees_seen++;
    free(p);
}
static cn_tensor *watched(int64_t n) {
    float *buf = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) buf[i] = (float)i;
    return cn_from_buffer(CN_F32, 1, &n, buf, count_free);
}

/* Every element of t equals v. */
static bool all_equal(const cn_tensor *t, double v) {
    for (int64_t k = 0; k < cn_numel(t); k++)
        if (th_at(t, k) != v) return false;
    return true;
}

/* ---- creation ---- */

static void test_empty_zeros_ones_full(void) {
    cn_tensor *e = cn_empty(CN_F32, CN_SHAPE(2, 3));
    CHECK_SHAPE(e, 2, 3);
    CHECK(cn_tensor_dtype(e) == CN_F32);
    CHECK(cn_is_contiguous(e));
    CHECK_EQ_INT(cn_strides(e)[0], 3);
    CHECK_EQ_INT(cn_strides(e)[1], 1);
    CHECK_EQ_INT(cn_numel(e), 6);
    CHECK_EQ_INT(cn_offset(e), 0);
    CHECK(cn_data(e) != NULL);
    for (int d = 0; d < NDTYPES; d++) {
        cn_dtype dt = all_dtypes[d];
        cn_tensor *z = cn_zeros(dt, CN_SHAPE(3, 4));
        cn_tensor *o = cn_ones(dt, CN_SHAPE(5));
        CHECK(cn_tensor_dtype(z) == dt && cn_tensor_dtype(o) == dt);
        CHECK_MSG(all_equal(z, 0) && all_equal(o, 1), "zeros/ones of %s", cn_dtype_name(dt));
        cn_tensor *f = cn_full(dt, CN_SHAPE(2, 2), 2.75);
        double want = dt == CN_BOOL ? 1 : cn_dtype_is_float(dt) ? 2.75 : 2;
        CHECK_MSG(all_equal(f, want), "full(2.75) of %s gives %g", cn_dtype_name(dt), th_at(f, 0));
    }
    /* float -> int truncates toward zero, as cn_cast does */
    CHECK(all_equal(cn_full(CN_I32, CN_SHAPE(3), -3.7), -3));
    CHECK_CLOSE(th_at(cn_full(CN_F16, CN_SHAPE(1), 1.0 / 3), 0),
                cn_f16_to_f32(cn_f32_to_f16(1.0f / 3)), 0, 0);
    CHECK_CLOSE(th_at(cn_full(CN_BF16, CN_SHAPE(1), 1.0 / 3), 0),
                cn_bf16_to_f32(cn_f32_to_bf16(1.0f / 3)), 0, 0);
    /* rank 0 and zero-size */
    cn_tensor *r0 = cn_zeros(CN_F64, 0, NULL);
    CHECK_EQ_INT(cn_ndim(r0), 0);
    CHECK_EQ_INT(cn_numel(r0), 1);
    CHECK(cn_is_contiguous(r0));
    cn_tensor *z0 = cn_ones(CN_F32, CN_SHAPE(0, 3));
    CHECK_SHAPE(z0, 0, 3);
    CHECK_EQ_INT(cn_numel(z0), 0);
    CHECK(cn_is_contiguous(z0));
    CHECK_SHAPE(cn_full(CN_I64, CN_SHAPE(4, 0, 2), 7), 4, 0, 2);
}

static void test_scalar_and_like(void) {
    cn_tensor *s = cn_scalar(CN_F32, 2.5);
    CHECK_EQ_INT(cn_ndim(s), 0);
    CHECK_CLOSE(cn_item(s), 2.5, 0, 0);
    CHECK_CLOSE(cn_item(cn_scalar(CN_I64, -4.9)), -4, 0, 0);
    CHECK_CLOSE(cn_item(cn_scalar(CN_BOOL, -0.1)), 1, 0, 0);

    cn_tensor *base = cn_zeros(CN_I32, CN_SHAPE(4, 2, 3));
    cn_tensor *view = cn_transpose(base, 0, 2); /* [3, 2, 4], not contiguous */
    cn_tensor *z = cn_zeros_like(view), *o = cn_ones_like(view), *f = cn_full_like(view, -2);
    CHECK_SHAPE(z, 3, 2, 4);
    CHECK_SHAPE(f, 3, 2, 4);
    CHECK(cn_is_contiguous(z) && cn_is_contiguous(o) && cn_is_contiguous(f));
    CHECK(cn_tensor_dtype(o) == CN_I32);
    CHECK(!cn_shares_storage(z, base));
    CHECK(all_equal(z, 0) && all_equal(o, 1) && all_equal(f, -2));
    cn_tensor *s0 = cn_ones_like(s);
    CHECK_EQ_INT(cn_ndim(s0), 0);
    CHECK_CLOSE(cn_item(s0), 1, 0, 0);
    CHECK_SHAPE(cn_zeros_like(cn_zeros(CN_U8, CN_SHAPE(0, 5))), 0, 5);
}

static void test_creation_errors(void) {
    CHECK_ERROR(cn_zeros(CN_F32, CN_SHAPE(2, -1)), "negative size at axis 1");
    CHECK_ERROR(cn_empty(CN_F32, CN_SHAPE(2, -1)), "shape [2, -1]");
    CHECK_ERROR(cn_ones(CN_F32, 9, (int64_t[9]){1, 1, 1, 1, 1, 1, 1, 1, 1}),
                "rank 9 is out of range");
    CHECK_ERROR(cn_zeros(CN_F32, -1, NULL), "rank -1 is out of range");
    CHECK_ERROR(cn_zeros(CN_F32, 2, NULL), "shape is NULL");
    CHECK_ERROR(cn_full((cn_dtype)42, CN_SHAPE(2), 1), "invalid dtype 42");
    CHECK_ERROR(cn_scalar(CN_DTYPE_COUNT, 1), "invalid dtype");
    CHECK_ERROR(cn_zeros(CN_F32, CN_SHAPE(INT64_C(1) << 40, INT64_C(1) << 40)), "too large");
    /* a zero-size tensor whose other sizes would overflow the strides */
    CHECK_ERROR(cn_zeros(CN_F32, CN_SHAPE(0, INT64_C(1) << 40, INT64_C(1) << 40)), "too large");
    CHECK_ERROR(cn_zeros_like(NULL), "");
}

static void test_arange(void) {
    cn_tensor *a = cn_arange(0, 5, 1, CN_I64);
    CHECK_SHAPE(a, 5);
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(cn_get_int(a, (int64_t[]){i}), i);
    cn_tensor *b = cn_arange(5, 0, -1, CN_I32);
    CHECK_SHAPE(b, 5);
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(cn_get_int(b, (int64_t[]){i}), 5 - i);
    cn_tensor *c = cn_arange(0, 1, 0.25, CN_F32);
    CHECK_SHAPE(c, 4);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(th_at(c, i), 0.25 * i, 0, 0);
    cn_tensor *d = cn_arange(1, -1, -0.5, CN_F64);
    CHECK_SHAPE(d, 4);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(th_at(d, i), 1 - 0.5 * i, 0, 0);
    cn_tensor *e = cn_arange(0, 1, 0.1, CN_F64); /* numpy: 10 values */
    CHECK_SHAPE(e, 10);
    for (int i = 0; i < 10; i++) CHECK_CLOSE(th_at(e, i), 0.1 * i, 0, 0);
    CHECK_SHAPE(cn_arange(1, 1.3, 0.1, CN_F64), 4); /* 0.3 / 0.1 rounds above 3, as in numpy */
    CHECK_SHAPE(cn_arange(0, 0, 1, CN_F32), 0);
    CHECK_SHAPE(cn_arange(0, 5, -1, CN_F32), 0);
    CHECK_SHAPE(cn_arange(-2.5, 2.5, 1, CN_F32), 5);
    /* fractional start with an integer dtype truncates each value */
    cn_tensor *f = cn_arange(0.5, 3, 1, CN_I64);
    CHECK_SHAPE(f, 3);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(cn_get_int(f, (int64_t[]){i}), i);
    /* integer arithmetic for integer dtypes: exact beyond 2^53 */
    int64_t big = INT64_C(1) << 53;
    cn_tensor *g = cn_arange((double)big, (double)big + 4, 1, CN_I64);
    CHECK_SHAPE(g, 4);
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(cn_get_int(g, (int64_t[]){i}), big + i);
    /* beyond the int64 range the values go through double (no overflow) */
    CHECK_SHAPE(cn_arange(0x1p100, 0x1p100 + 3 * 0x1p70, 0x1p70, CN_I64), 3);
    CHECK_ERROR(cn_arange(0, 5, 0, CN_F32), "step must be non-zero");
    CHECK_ERROR(cn_arange(0, NAN, 1, CN_F32), "arange");
    CHECK_ERROR(cn_arange(0, INFINITY, 1, CN_F32), "arange");
    CHECK_ERROR(cn_arange(0, 1e30, 1, CN_F32), "too many");
    CHECK_ERROR(cn_arange(0, 3, 1, (cn_dtype)99), "invalid dtype");
}

static void test_linspace(void) {
    cn_tensor *a = cn_linspace(0, 1, 5, CN_F32);
    CHECK_SHAPE(a, 5);
    for (int i = 0; i < 5; i++) CHECK_CLOSE(th_at(a, i), 0.25 * i, 0, 0);
    CHECK_SHAPE(cn_linspace(-1, 1, 0, CN_F32), 0);
    cn_tensor *one = cn_linspace(3, 7, 1, CN_F64); /* numpy and torch: the start */
    CHECK_SHAPE(one, 1);
    CHECK_CLOSE(th_at(one, 0), 3, 0, 0);
    for (int64_t n = 2; n < 60; n += 7) {
        cn_tensor *l = cn_linspace(0.1, 0.7, n, CN_F64);
        CHECK_MSG(th_at(l, 0) == 0.1 && th_at(l, n - 1) == 0.7,
                  "linspace n=%" PRId64 " ends %.17g %.17g", n, th_at(l, 0), th_at(l, n - 1));
        for (int64_t i = 0; i < n; i++)
            CHECK_CLOSE(th_at(l, i), 0.1 + 0.6 * (double)i / (double)(n - 1), 1e-14, 1e-16);
    }
    cn_tensor *f = cn_linspace(0, 0.3, 7, CN_F32);
    CHECK_CLOSE(th_at(f, 6), (float)0.3, 0, 0);
    cn_tensor *down = cn_linspace(1, 0, 3, CN_F64);
    CHECK_CLOSE(th_at(down, 1), 0.5, 0, 0);
    CHECK_CLOSE(th_at(down, 2), 0, 0, 0);
    cn_tensor *ints = cn_linspace(0, 10, 11, CN_I64);
    for (int i = 0; i <= 10; i++) CHECK_EQ_INT(cn_get_int(ints, (int64_t[]){i}), i);
    cn_tensor *big = cn_linspace(-1, 1, 1001, CN_F64);
    CHECK_CLOSE(th_at(big, 500), 0, 0, 1e-15);
    CHECK_CLOSE(th_at(big, 1000), 1, 0, 0);
    CHECK_ERROR(cn_linspace(0, 1, -1, CN_F32), "linspace: n is -1");
}

static void test_eye(void) {
    cn_tensor *a = cn_eye(2, 3, CN_F32);
    CHECK_SHAPE(a, 2, 3);
    cn_tensor *b = cn_eye(4, 2, CN_I64);
    CHECK_SHAPE(b, 4, 2);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) CHECK_CLOSE(cn_get(a, (int64_t[]){i, j}), i == j, 0, 0);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++) CHECK_EQ_INT(cn_get_int(b, (int64_t[]){i, j}), i == j);
    cn_tensor *c = cn_eye(3, 3, CN_BOOL);
    CHECK_EQ_INT(cn_get_int(c, (int64_t[]){2, 2}), 1);
    CHECK_EQ_INT(cn_get_int(c, (int64_t[]){2, 1}), 0);
    CHECK_SHAPE(cn_eye(0, 4, CN_F32), 0, 4);
    CHECK_SHAPE(cn_eye(3, 0, CN_F32), 3, 0);
    CHECK_ERROR(cn_eye(-1, 2, CN_F32), "eye: sizes -1 x 2");
}

static void test_from_data(void) {
    int32_t src[4] = {1, -2, 3, -4};
    cn_tensor *t = cn_from_data(CN_I32, CN_SHAPE(2, 2), src);
    src[0] = 100; /* copied: the tensor does not see this */
    CHECK_EQ_INT(cn_get_int(t, (int64_t[]){0, 0}), 1);
    CHECK_EQ_INT(cn_get_int(t, (int64_t[]){1, 1}), -4);
    /* every dtype round-trips through its bytes */
    for (int d = 0; d < NDTYPES; d++) {
        cn_dtype dt = all_dtypes[d];
        unsigned char bytes[6 * 8], back[6 * 8];
        for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)(i * 37 + 11);
        if (dt == CN_BOOL)
            for (size_t i = 0; i < 6; i++) bytes[i] &= 1;
        cn_tensor *x = cn_from_data(dt, CN_SHAPE(2, 3), bytes);
        CHECK(cn_copy_to_buffer(x, dt, back, sizeof back) == CN_OK);
        CHECK_MSG(memcmp(bytes, back, 6 * cn_dtype_size(dt)) == 0, "round trip of %s",
                  cn_dtype_name(dt));
    }
    CHECK_SHAPE(cn_from_data(CN_F32, CN_SHAPE(0), NULL), 0);
    cn_tensor *r0 = cn_from_data(CN_F64, 0, NULL, (double[]){6.5});
    CHECK_CLOSE(cn_item(r0), 6.5, 0, 0);
    CHECK_ERROR(cn_from_data(CN_F32, CN_SHAPE(2), NULL), "from_data: data is NULL");
    CHECK_ERROR(cn_from_data(CN_F32, CN_SHAPE(-2), src), "negative size");
}

static void test_from_buffer(void) {
    float buf[6] = {0, 1, 2, 3, 4, 5};
    cn_tensor *t = cn_from_buffer(CN_F32, CN_SHAPE(2, 3), buf, NULL);
    CHECK(cn_data(t) == (void *)buf); /* borrowed, not copied */
    buf[4] = 40;
    CHECK_CLOSE(cn_get(t, (int64_t[]){1, 1}), 40, 0, 0);
    cn_set(t, (int64_t[]){0, 2}, -7);
    CHECK_CLOSE(buf[2], -7, 0, 0);
    cn_tensor *v = cn_transpose(t, 0, 1);
    CHECK(cn_shares_storage(v, t));
    CHECK_CLOSE(cn_get(v, (int64_t[]){2, 0}), -7, 0, 0);

    /* free_fn runs once, when the last view goes, whatever the order */
    int depth = cn_scope_depth();
    cn_scope_begin();
    frees_seen = 0;
    cn_tensor *w = watched(12);
    cn_tensor *r = cn_retain(cn_reshape(w, CN_SHAPE(3, 4)));
    cn_tensor *s = cn_retain(cn_slice(cn_transpose(r, 0, 1), 0, 1, 3, 1));
    cn_tensor *wr = cn_retain(w);
    cn_scope_end();
    CHECK_EQ_INT(frees_seen, 0);
    CHECK_CLOSE(cn_get(s, (int64_t[]){1, 2}), 10, 0, 0); /* [2, 3] of the transposed */
    cn_release(wr);
    CHECK_EQ_INT(frees_seen, 0);
    cn_release(r);
    CHECK_EQ_INT(frees_seen, 0);
    cn_release(s);
    CHECK_EQ_INT(frees_seen, 1);
    CHECK_EQ_INT(cn_scope_depth(), depth);

    /* without views: the end of the scope frees it */
    cn_scope_begin();
    frees_seen = 0;
    cn_tensor *x = watched(3);
    CHECK_EQ_INT(cn_numel(x), 3);
    cn_scope_end();
    CHECK_EQ_INT(frees_seen, 1);

    /* a failed call takes no ownership */
    frees_seen = 0;
    CHECK_ERROR(cn_from_buffer(CN_F32, CN_SHAPE(2), NULL, count_free), "from_buffer: data is NULL");
    CHECK_ERROR(cn_from_buffer(CN_F32, CN_SHAPE(-2), buf, count_free), "negative size");
    CHECK_ERROR(cn_from_buffer((cn_dtype)9, CN_SHAPE(2), buf, count_free), "invalid dtype");
    CHECK_EQ_INT(frees_seen, 0);
}

/* ---- inspection and element access ---- */

static void test_inspection(void) {
    cn_tensor *a = cn_zeros(CN_F32, CN_SHAPE(4, 6));
    cn_tensor *s = cn_slice(a, 1, 1, CN_END, 2); /* [4, 3], strides [6, 2], offset 1 */
    CHECK_SHAPE(s, 4, 3);
    CHECK_EQ_INT(cn_strides(s)[0], 6);
    CHECK_EQ_INT(cn_strides(s)[1], 2);
    CHECK_EQ_INT(cn_offset(s), 1);
    CHECK(!cn_is_contiguous(s));
    CHECK((float *)cn_data(s) == (float *)cn_data(a) + 1);
    CHECK_EQ_INT(cn_dim(s, -1), 3);
    CHECK_EQ_INT(cn_dim(s, 0), 4);
    CHECK_ERROR(cn_dim(s, 2) >= 0, "axis 2 is out of range for a tensor of rank 2");
    CHECK_ERROR(cn_dim(s, -3) >= 0, "axis -3");
    CHECK(cn_is_contiguous(cn_slice(a, 0, 1, 3, 1)));
    CHECK(cn_is_contiguous(cn_unsqueeze(a, 1)));
    CHECK(!cn_shares_storage(a, cn_zeros(CN_F32, CN_SHAPE(1))));
    char buf[64];
    CHECK(strcmp(cn_shape_str(s, buf, sizeof buf), "f32[4, 3]") == 0);
    CHECK(strcmp(cn_shape_str(cn_scalar(CN_BOOL, 1), buf, sizeof buf), "bool[]") == 0);
    CHECK(strcmp(cn_shape_str(NULL, buf, sizeof buf), "NULL") == 0);
    char tiny[6];
    CHECK(strcmp(cn_shape_str(s, tiny, sizeof tiny), "f32[4") == 0); /* truncated, terminated */
    CHECK(cn_ndim(NULL) == -1 && cn_numel(NULL) == -1 && cn_shape(NULL) == NULL);
    CHECK(cn_data(NULL) == NULL && !cn_is_contiguous(NULL) && cn_dim(NULL, 0) == -1);
    CHECK(cn_tensor_dtype(NULL) == CN_DTYPE_COUNT);
}

static void test_get_set(void) {
    cn_tensor *t = cn_reshape(cn_arange(0, 24, 1, CN_F64), CN_SHAPE(2, 3, 4));
    CHECK_CLOSE(cn_get(t, (int64_t[]){1, 2, 3}), 23, 0, 0);
    CHECK_CLOSE(cn_get(t, (int64_t[]){-1, -1, -1}), 23, 0, 0);
    CHECK_CLOSE(cn_get(t, (int64_t[]){-2, 0, -4}), 0, 0, 0);
    CHECK_CLOSE(cn_get(t, (int64_t[]){0, -2, 1}), 5, 0, 0);
    CHECK(cn_set(t, (int64_t[]){-1, 0, -1}, 99.5) == CN_OK);
    CHECK_CLOSE(cn_get(t, (int64_t[]){1, 0, 3}), 99.5, 0, 0);
    CHECK_EQ_INT(cn_get_int(t, (int64_t[]){1, 0, 3}), 99);

    cn_clear_error();
    CHECK(isnan(cn_get(t, (int64_t[]){2, 0, 0})));
    CHECK_MSG(strstr(cn_last_error(), "get: index 2 is out of range for axis 0 of shape [2, 3, 4]"),
              "message: %s", cn_last_error());
    CHECK_ERROR(!isnan(cn_get(t, (int64_t[]){0, -4, 0})), "index -4 is out of range for axis 1");
    CHECK_ERROR(cn_get_int(t, (int64_t[]){0, 0, 4}) != 0, "get_int: index 4");
    CHECK_STATUS_ERROR(cn_set(t, (int64_t[]){0, 3, 0}, 1),
                       "set: index 3 is out of range for axis 1");
    CHECK_ERROR(!isnan(cn_get(t, NULL)), "get: idx is NULL");
    CHECK_STATUS_ERROR(cn_set(t, NULL, 1), "set: idx is NULL");

    /* int64 values beyond 2^53 stay exact through get_int and set on i64 */
    cn_tensor *big = cn_zeros(CN_I64, CN_SHAPE(2));
    int64_t *p = cn_data(big);
    p[1] = (INT64_C(1) << 62) + 1;
    CHECK_EQ_INT(cn_get_int(big, (int64_t[]){-1}), (INT64_C(1) << 62) + 1);
    CHECK_EQ_INT(cn_get_int(cn_scalar(CN_F32, -2.7), NULL), -2);
    CHECK_EQ_INT(cn_get_int(cn_scalar(CN_F64, NAN), NULL), 0);

    /* rank 0: idx may be NULL */
    cn_tensor *s = cn_scalar(CN_F16, 0);
    CHECK(cn_set(s, NULL, 1.5) == CN_OK);
    CHECK_CLOSE(cn_get(s, NULL), 1.5, 0, 0);
    cn_tensor *b = cn_zeros(CN_BOOL, CN_SHAPE(2));
    cn_set(b, (int64_t[]){1}, 0.25);
    CHECK_EQ_INT(cn_get_int(b, (int64_t[]){1}), 1);

    /* item */
    CHECK_CLOSE(cn_item(cn_full(CN_I32, CN_SHAPE(1, 1), 7)), 7, 0, 0);
    CHECK_ERROR(!isnan(cn_item(t)), "item: the tensor has 24 elements (shape [2, 3, 4]), not 1");
    CHECK_ERROR(!isnan(cn_item(cn_zeros(CN_F32, CN_SHAPE(0)))), "has 0 elements");

    /* NULL: nothing happens, the message stays */
    cn_clear_error();
    cn_fail("earlier failure");
    CHECK(isnan(cn_get(NULL, (int64_t[]){0})));
    CHECK(cn_get_int(NULL, (int64_t[]){0}) == 0);
    CHECK(cn_set(NULL, (int64_t[]){0}, 1) == CN_EINVAL);
    CHECK(isnan(cn_item(NULL)));
    CHECK(strcmp(cn_last_error(), "earlier failure") == 0);
}

static void test_get_set_layouts(void) {
    int64_t shape[3] = {3, 4, 5};
    double vals[60];
    for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
        for (int d = 0; d < NDTYPES; d++) {
            cn_dtype dt = all_dtypes[d];
            cn_tensor *t = th_random(dt, 3, shape, dt == CN_U8 ? 0 : -50, 50, layout, vals);
            bool ok = true;
            for (int64_t k = 0; k < 60; k++) ok &= th_at(t, k) == vals[k];
            CHECK_MSG(ok, "get in layout %d of %s", layout, cn_dtype_name(dt));
        }
    }
}

/* ---- copies ---- */

static void test_copy_to_buffer(void) {
    cn_tensor *t = cn_from_data(CN_F32, CN_SHAPE(2, 3), (float[]){1.7f, -2.5f, 0, 3, 4.25f, -0.5f});
    float f[6];
    CHECK(cn_copy_to_buffer(t, CN_F32, f, sizeof f) == CN_OK);
    CHECK_CLOSE(f[1], -2.5, 0, 0);
    /* a view comes out in its own row-major order */
    CHECK(cn_copy_to_buffer(cn_transpose(t, 0, 1), CN_F32, f, sizeof f) == CN_OK);
    const float want_t[6] = {1.7f, 3, -2.5f, 4.25f, 0, -0.5f};
    CHECK(memcmp(f, want_t, sizeof f) == 0);
    int32_t i[6];
    CHECK(cn_copy_to_buffer(t, CN_I32, i, sizeof i) == CN_OK);
    const int32_t want_i[6] = {1, -2, 0, 3, 4, 0};
    CHECK(memcmp(i, want_i, sizeof i) == 0);
    uint8_t b[6];
    CHECK(cn_copy_to_buffer(t, CN_BOOL, b, sizeof b) == CN_OK);
    CHECK(b[0] == 1 && b[2] == 0 && b[5] == 1);
    uint16_t h[6];
    CHECK(cn_copy_to_buffer(t, CN_F16, h, sizeof h) == CN_OK);
    CHECK(h[4] == cn_f32_to_f16(4.25f) && h[0] == cn_f32_to_f16(1.7f));
    double d1;
    CHECK(cn_copy_to_buffer(cn_scalar(CN_I64, -3), CN_F64, &d1, sizeof d1) == CN_OK);
    CHECK_CLOSE(d1, -3, 0, 0);
    int64_t big[2];
    cn_tensor *bi = cn_from_data(CN_I64, CN_SHAPE(2), (int64_t[]){INT64_MAX, INT64_MIN + 1});
    CHECK(cn_copy_to_buffer(bi, CN_I64, big, sizeof big) == CN_OK);
    CHECK(big[0] == INT64_MAX && big[1] == INT64_MIN + 1);
    CHECK(cn_copy_to_buffer(cn_zeros(CN_F32, CN_SHAPE(0, 4)), CN_F32, NULL, 0) == CN_OK);
    CHECK_STATUS_ERROR(cn_copy_to_buffer(t, CN_F32, f, 12), "buffer of 12 bytes, 24 needed");
    CHECK_STATUS_ERROR(cn_copy_to_buffer(t, CN_F32, NULL, 24), "copy_to_buffer: buf is NULL");
    CHECK_STATUS_ERROR(cn_copy_to_buffer(t, (cn_dtype)-1, f, sizeof f), "invalid dtype");
    CHECK(cn_copy_to_buffer(NULL, CN_F32, f, sizeof f) == CN_EINVAL);

    /* big enough to be split across threads, in every layout */
    int64_t shape[2] = {300, 400};
    double *vals = malloc(sizeof(double) * 120000);
    double *out = malloc(sizeof(double) * 120000);
    for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
        cn_tensor *x = th_random(CN_F32, 2, shape, -1, 1, layout, vals);
        CHECK(cn_copy_to_buffer(x, CN_F64, out, sizeof(double) * 120000) == CN_OK);
        CHECK_MSG(memcmp(vals, out, sizeof(double) * 120000) == 0, "layout %d", layout);
    }
    free(vals);
    free(out);
}

static void test_copy_(void) {
    /* broadcast */
    cn_tensor *d = cn_zeros(CN_F32, CN_SHAPE(2, 3));
    CHECK(cn_copy_(d, cn_arange(0, 3, 1, CN_F32)) == CN_OK);
    for (int k = 0; k < 6; k++) CHECK_CLOSE(th_at(d, k), k % 3, 0, 0);
    CHECK(cn_copy_(d, cn_scalar(CN_F64, 4)) == CN_OK);
    CHECK(all_equal(d, 4));
    CHECK(cn_copy_(d, cn_reshape(cn_arange(0, 2, 1, CN_I64), CN_SHAPE(2, 1))) == CN_OK);
    for (int k = 0; k < 6; k++) CHECK_CLOSE(th_at(d, k), k / 3, 0, 0);
    /* cast */
    cn_tensor *di = cn_zeros(CN_I32, CN_SHAPE(3));
    CHECK(cn_copy_(di, cn_from_data(CN_F64, CN_SHAPE(3), (double[]){1.9, -1.9, 2.5})) == CN_OK);
    CHECK_EQ_INT(cn_get_int(di, (int64_t[]){0}), 1);
    CHECK_EQ_INT(cn_get_int(di, (int64_t[]){1}), -1);
    CHECK_EQ_INT(cn_get_int(di, (int64_t[]){2}), 2);
    /* into a strided view: only the view's elements change */
    cn_tensor *base = cn_zeros(CN_F64, CN_SHAPE(4, 6));
    cn_tensor *odd = cn_slice(base, 1, 1, CN_END, 2);
    CHECK(cn_copy_(odd, cn_reshape(cn_arange(1, 13, 1, CN_F64), CN_SHAPE(4, 3))) == CN_OK);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 6; c++)
            CHECK_CLOSE(cn_get(base, (int64_t[]){r, c}), c % 2 ? r * 3 + c / 2 + 1 : 0, 0, 0);
    /* overlapping source and destination, both directions */
    cn_tensor *a = cn_arange(0, 10, 1, CN_F32);
    CHECK(cn_copy_(cn_slice(a, 0, 1, 10, 1), cn_slice(a, 0, 0, 9, 1)) == CN_OK);
    for (int k = 0; k < 10; k++) CHECK_CLOSE(th_at(a, k), k ? k - 1 : 0, 0, 0);
    a = cn_arange(0, 10, 1, CN_F32);
    CHECK(cn_copy_(cn_slice(a, 0, 0, 9, 1), cn_slice(a, 0, 1, 10, 1)) == CN_OK);
    for (int k = 0; k < 10; k++) CHECK_CLOSE(th_at(a, k), k < 9 ? k + 1 : 9, 0, 0);
    a = cn_arange(0, 10, 1, CN_F32);
    CHECK(cn_copy_(a, cn_slice(a, 0, CN_END, CN_BEGIN, -1)) == CN_OK); /* reverse in place */
    for (int k = 0; k < 10; k++) CHECK_CLOSE(th_at(a, k), 9 - k, 0, 0);
    cn_tensor *m = cn_reshape(cn_arange(0, 9, 1, CN_I32), CN_SHAPE(3, 3));
    CHECK(cn_copy_(m, cn_transpose(m, 0, 1)) == CN_OK); /* transpose in place */
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) CHECK_EQ_INT(cn_get_int(m, (int64_t[]){r, c}), c * 3 + r);
    /* zero-size and rank 0 */
    CHECK(cn_copy_(cn_zeros(CN_F32, CN_SHAPE(0, 2)), cn_ones(CN_F32, CN_SHAPE(2))) == CN_OK);
    cn_tensor *s = cn_scalar(CN_U8, 0);
    CHECK(cn_copy_(s, cn_scalar(CN_F32, 200)) == CN_OK);
    CHECK_EQ_INT(cn_item(s), 200);
    /* errors */
    CHECK_STATUS_ERROR(cn_copy_(d, cn_zeros(CN_F32, CN_SHAPE(4))), "copy_");
    CHECK_STATUS_ERROR(cn_copy_(d, cn_zeros(CN_F32, CN_SHAPE(3, 3))), "[3, 3]");
    CHECK_STATUS_ERROR(cn_copy_(cn_zeros(CN_F32, CN_SHAPE(3)), cn_zeros(CN_F32, CN_SHAPE(2, 3))),
                       "source [2, 3] does not broadcast to destination [3]");
    CHECK(cn_copy_(NULL, d) == CN_EINVAL && cn_copy_(d, NULL) == CN_EINVAL);
}

static void test_copy_fill_layouts(void) {
    int64_t shape[3] = {5, 1, 7}, bshape[2] = {1, 7};
    double dv[35], sv[35];
    for (int dl = 0; dl < TH_NLAYOUTS; dl++) {
        for (int sl = 0; sl < TH_NLAYOUTS; sl++) {
            cn_tensor *dst = th_random(CN_F64, 3, shape, -9, 9, dl, dv);
            cn_tensor *src = th_random(CN_F32, 3, shape, -9, 9, sl, sv);
            CHECK(cn_copy_(dst, src) == CN_OK);
            bool ok = true;
            for (int k = 0; k < 35; k++) ok &= th_at(dst, k) == sv[k];
            CHECK_MSG(ok, "copy_ layouts %d <- %d", dl, sl);
            /* a broadcast source in every layout */
            cn_tensor *row = th_random(CN_I32, 2, bshape, -9, 9, sl, sv);
            CHECK(cn_copy_(dst, row) == CN_OK);
            ok = true;
            for (int k = 0; k < 35; k++) ok &= th_at(dst, k) == sv[k % 7];
            CHECK_MSG(ok, "broadcast copy_ layouts %d <- %d", dl, sl);
        }
        cn_tensor *t = th_random(CN_I64, 3, shape, -9, 9, dl, dv);
        CHECK(cn_fill_(t, -6.5) == CN_OK);
        CHECK_MSG(all_equal(t, -6), "fill_ layout %d", dl);
    }
}

static void test_fill_(void) {
    cn_tensor *a = cn_zeros(CN_F32, CN_SHAPE(3, 4));
    CHECK(cn_fill_(cn_slice(a, 1, 1, 3, 1), 2.5) == CN_OK);
    for (int k = 0; k < 12; k++)
        CHECK_CLOSE(th_at(a, k), (k % 4 == 1 || k % 4 == 2) ? 2.5 : 0, 0, 0);
    CHECK(cn_fill_(cn_slice(a, 0, CN_END, CN_BEGIN, -2), -1) == CN_OK); /* rows 2 and 0 */
    CHECK_CLOSE(cn_get(a, (int64_t[]){0, 0}), -1, 0, 0);
    CHECK_CLOSE(cn_get(a, (int64_t[]){1, 0}), 0, 0, 0);
    CHECK_CLOSE(cn_get(a, (int64_t[]){2, 3}), -1, 0, 0);
    for (int d = 0; d < NDTYPES; d++) {
        cn_tensor *t = cn_zeros(all_dtypes[d], CN_SHAPE(70000)); /* large: the parallel path */
        CHECK(cn_fill_(t, 3) == CN_OK);
        CHECK_MSG(all_equal(t, all_dtypes[d] == CN_BOOL ? 1 : 3), "fill_ %s",
                  cn_dtype_name(all_dtypes[d]));
    }
    cn_tensor *s = cn_scalar(CN_BF16, 0);
    CHECK(cn_fill_(s, 1.5) == CN_OK);
    CHECK_CLOSE(cn_item(s), 1.5, 0, 0);
    CHECK(cn_fill_(cn_zeros(CN_F32, CN_SHAPE(0)), 1) == CN_OK);
    CHECK(cn_fill_(NULL, 1) == CN_EINVAL);
}

/* ---- comparisons and statistics ---- */

static void test_equal_allclose(void) {
    int64_t shape[2] = {4, 5};
    double v[20];
    cn_tensor *a = th_random(CN_F32, 2, shape, -3, 3, TH_CONTIG, v);
    for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
        cn_tensor *b = th_make(CN_F32, 2, shape, v, layout);
        CHECK(cn_equal(a, b) && cn_allclose(b, a, 0, 0));
        cn_set(b, (int64_t[]){3, 4}, v[19] + 1e-3);
        CHECK(!cn_equal(a, b));
        CHECK(cn_allclose(a, b, 0, 2e-3) && !cn_allclose(a, b, 0, 5e-4));
    }
    CHECK(cn_equal(a, cn_cast(a, CN_F64))); /* values, not dtypes */
    CHECK(!cn_equal(a, cn_reshape(a, CN_SHAPE(5, 4))));
    CHECK(!cn_allclose(a, cn_reshape(a, CN_SHAPE(20)), 1, 1));
    /* |a - b| <= atol + rtol * |b| */
    cn_tensor *x = cn_from_data(CN_F64, CN_SHAPE(2), (double[]){100, -1});
    cn_tensor *y = cn_from_data(CN_F64, CN_SHAPE(2), (double[]){101, -1});
    CHECK(cn_allclose(x, y, 0.01, 0) && !cn_allclose(x, y, 0.009, 0));
    CHECK(cn_allclose(x, y, 0, 1) && !cn_allclose(x, y, 0, 0.99));
    /* integers honour the tolerances too, and compare exactly beyond 2^53 */
    cn_tensor *ix = cn_from_data(CN_I64, CN_SHAPE(2), (int64_t[]){100, INT64_C(1) << 62});
    cn_tensor *iy = cn_from_data(CN_I64, CN_SHAPE(2), (int64_t[]){102, INT64_C(1) << 62});
    CHECK(cn_allclose(ix, iy, 0, 2) && !cn_allclose(ix, iy, 0, 1) && !cn_equal(ix, iy));
    cn_tensor *iz = cn_from_data(CN_I64, CN_SHAPE(2), (int64_t[]){102, (INT64_C(1) << 62) + 1});
    CHECK(!cn_equal(iy, iz) && cn_equal(iy, iy));
    /* NaN matches NaN; infinities only themselves */
    cn_tensor *n1 = cn_from_data(CN_F32, CN_SHAPE(3), (float[]){NAN, INFINITY, 1});
    cn_tensor *n2 = cn_from_data(CN_F32, CN_SHAPE(3), (float[]){NAN, INFINITY, 1});
    cn_tensor *n3 = cn_from_data(CN_F32, CN_SHAPE(3), (float[]){NAN, -INFINITY, 1});
    cn_tensor *n4 = cn_from_data(CN_F32, CN_SHAPE(3), (float[]){1, INFINITY, 1});
    CHECK(cn_equal(n1, n2));
    CHECK(!cn_allclose(n1, n3, 10, 10));
    CHECK(!cn_allclose(n1, n4, 10, 10));
    cn_tensor *big = cn_from_data(CN_F32, CN_SHAPE(3), (float[]){NAN, 3e38f, 1});
    CHECK(!cn_allclose(n1, big, 10, 10) && !cn_allclose(big, n1, 10, 10));
    /* rank 0, zero-size, NULL */
    CHECK(cn_equal(cn_scalar(CN_I32, 3), cn_scalar(CN_F32, 3)));
    CHECK(!cn_equal(cn_scalar(CN_I32, 3), cn_full(CN_I32, CN_SHAPE(1), 3)));
    CHECK(cn_equal(cn_zeros(CN_F32, CN_SHAPE(0, 2)), cn_ones(CN_I64, CN_SHAPE(0, 2))));
    CHECK(!cn_equal(NULL, a) && !cn_equal(a, NULL) && !cn_allclose(NULL, NULL, 1, 1));
}

static void naive_stats(const double *v, int64_t n, cn_stats *s) {
    memset(s, 0, sizeof *s);
    s->numel = n;
    double sum = 0, mn = INFINITY, mx = -INFINITY;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i]))
            s->nan_count++;
        else if (isinf(v[i]))
            s->inf_count++;
        else {
            sum += v[i];
            k++;
            mn = v[i] < mn ? v[i] : mn;
            mx = v[i] > mx ? v[i] : mx;
        }
    }
    s->mean = k ? sum / (double)k : NAN;
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(v[i])) ss += (v[i] - s->mean) * (v[i] - s->mean);
    s->std = k ? sqrt(ss / (double)k) : NAN;
    s->min = k ? mn : NAN;
    s->max = k ? mx : NAN;
}

static void check_stats(const cn_tensor *t, const double *v, int64_t n, const char *what) {
    cn_stats got, want;
    naive_stats(v, n, &want);
    CHECK(cn_tensor_stats(t, &got) == CN_OK);
    CHECK_MSG(got.numel == want.numel && got.nan_count == want.nan_count &&
                  got.inf_count == want.inf_count,
              "%s: counts %" PRId64 "/%" PRId64 "/%" PRId64, what, got.numel, got.nan_count,
              got.inf_count);
    CHECK_MSG(th_close(got.min, want.min, 0, 0) && th_close(got.max, want.max, 0, 0), "%s: min/max",
              what);
    CHECK_MSG(th_close(got.mean, want.mean, 1e-12, 1e-12) &&
                  th_close(got.std, want.std, 1e-10, 1e-12),
              "%s: mean %.17g vs %.17g, std %.17g vs %.17g", what, got.mean, want.mean, got.std,
              want.std);
}

static void test_stats(void) {
    int64_t shape[3] = {6, 7, 8};
    double v[336];
    for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
        for (int d = 0; d < NDTYPES; d++) {
            cn_tensor *t =
                th_random(all_dtypes[d], 3, shape, all_dtypes[d] == CN_U8 ? 0 : -20, 30, layout, v);
            check_stats(t, v, 336, cn_dtype_name(all_dtypes[d]));
        }
        cn_tensor *t = th_random(CN_F64, 3, shape, 1e6, 1e6 + 1, layout, v); /* cancellation */
        v[5] = NAN;
        v[17] = INFINITY;
        v[100] = -INFINITY;
        v[300] = NAN;
        t = th_make(CN_F64, 3, shape, v, layout);
        check_stats(t, v, 336, "f64 with nan/inf");
    }
    cn_stats s;
    CHECK(cn_tensor_stats(cn_zeros(CN_F32, CN_SHAPE(0, 3)), &s) == CN_OK);
    CHECK(s.numel == 0 && isnan(s.mean) && isnan(s.min) && isnan(s.std));
    CHECK(cn_tensor_stats(cn_full(CN_F32, CN_SHAPE(4), NAN), &s) == CN_OK);
    CHECK(s.nan_count == 4 && isnan(s.max));
    CHECK(cn_tensor_stats(cn_scalar(CN_I64, -5), &s) == CN_OK);
    CHECK(s.numel == 1 && s.min == -5 && s.max == -5 && s.mean == -5 && s.std == 0);
    CHECK(cn_tensor_stats(NULL, &s) == CN_EINVAL);
    CHECK(cn_tensor_stats(cn_scalar(CN_F32, 1), NULL) == CN_EINVAL);
}

/* ---- printing ---- */

#define CHECK_STR(t, want)                                                                         \
    do {                                                                                           \
        char *s_ = cn_to_string(t);                                                                \
        th_checks++;                                                                               \
        if (!s_ || strcmp(s_, want) != 0)                                                          \
            th_fail(__FILE__, __LINE__, "printed\n%s\nexpected\n%s", s_ ? s_ : "(null)", want);    \
        free(s_);                                                                                  \
    } while (0)

static void test_print(void) {
    CHECK_STR(cn_reshape(cn_arange(0, 6, 1, CN_I64), CN_SHAPE(2, 3)),
              "tensor([[0, 1, 2],\n        [3, 4, 5]], dtype=i64)");
    CHECK_STR(cn_transpose(cn_reshape(cn_arange(0, 6, 1, CN_I64), CN_SHAPE(2, 3)), 0, 1),
              "tensor([[0, 3],\n        [1, 4],\n        [2, 5]], dtype=i64)");
    CHECK_STR(cn_reshape(cn_arange(-3, 9, 1, CN_I32), CN_SHAPE(2, 2, 3)),
              "tensor([[[-3, -2, -1],\n"
              "         [ 0,  1,  2]],\n"
              "\n"
              "        [[ 3,  4,  5],\n"
              "         [ 6,  7,  8]]], dtype=i32)");
    CHECK_STR(cn_from_data(CN_F32, CN_SHAPE(3), (float[]){1.5f, -2.25f, 3}),
              "tensor([ 1.5000, -2.2500,  3.0000], dtype=f32)");
    CHECK_STR(cn_from_data(CN_F32, CN_SHAPE(3), (float[]){1, -2, 3}),
              "tensor([ 1., -2.,  3.], dtype=f32)");
    CHECK_STR(cn_zeros(CN_F64, CN_SHAPE(2)), "tensor([0., 0.], dtype=f64)");
    CHECK_STR(cn_from_data(CN_F64, CN_SHAPE(3), (double[]){1e-5, 1, 1e10}),
              "tensor([1.0000e-05, 1.0000e+00, 1.0000e+10], dtype=f64)");
    /* integers spanning more than 1000x go scientific, as in PyTorch */
    CHECK_STR(cn_from_data(CN_F32, CN_SHAPE(2, 2), (float[]){1, 1001, 2, 3}),
              "tensor([[1.0000e+00, 1.0010e+03],\n        [2.0000e+00, 3.0000e+00]], dtype=f32)");
    CHECK_STR(cn_from_data(CN_F32, CN_SHAPE(2, 2), (float[]){1, 1000, 2, 3}),
              "tensor([[   1., 1000.],\n        [   2.,    3.]], dtype=f32)");
    CHECK_STR(cn_from_data(CN_F64, CN_SHAPE(4), (double[]){NAN, INFINITY, -1, 0.5}),
              "tensor([    nan,     inf, -1.0000,  0.5000], dtype=f64)");
    CHECK_STR(cn_from_data(CN_F16, CN_SHAPE(2), (uint16_t[]){0x3800, 0x3d00}),
              "tensor([0.5000, 1.2500], dtype=f16)");
    CHECK_STR(cn_from_data(CN_BOOL, CN_SHAPE(3), (uint8_t[]){1, 0, 1}),
              "tensor([ true, false,  true], dtype=bool)");
    CHECK_STR(cn_from_data(CN_U8, CN_SHAPE(3), (uint8_t[]){255, 0, 7}),
              "tensor([255,   0,   7], dtype=u8)");
    CHECK_STR(cn_from_data(CN_I64, CN_SHAPE(2), (int64_t[]){(INT64_C(1) << 53) + 1, INT64_MIN}),
              "tensor([    9007199254740993, -9223372036854775808], dtype=i64)");
    CHECK_STR(cn_scalar(CN_F32, 3.5), "tensor(3.5000, dtype=f32)");
    CHECK_STR(cn_scalar(CN_F32, 2), "tensor(2., dtype=f32)");
    CHECK_STR(cn_scalar(CN_I64, -7), "tensor(-7, dtype=i64)");
    CHECK_STR(cn_scalar(CN_BOOL, 0), "tensor(false, dtype=bool)");
    CHECK_STR(cn_zeros(CN_F32, CN_SHAPE(0, 3)), "tensor([], shape=[0, 3], dtype=f32)");
    CHECK_STR(cn_zeros(CN_I32, CN_SHAPE(0)), "tensor([], shape=[0], dtype=i32)");
    CHECK_STR(NULL, "NULL");
    /* long rows wrap at 80 columns */
    CHECK_STR(cn_arange(0, 30, 1, CN_F32),
              "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
              "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
              "        28., 29.], dtype=f32)");
    /* above 1000 elements, long axes are summarised */
    CHECK_STR(cn_arange(0, 2000, 1, CN_I64),
              "tensor([   0,    1,    2,  ..., 1997, 1998, 1999], dtype=i64)");
    CHECK_STR(cn_slice(cn_arange(0, 1000, 1, CN_I32), 0, 0, 4, 1),
              "tensor([0, 1, 2, 3], dtype=i32)");
    CHECK_STR(cn_reshape(cn_arange(0, 3000, 1, CN_I64), CN_SHAPE(10, 3, 100)),
              "tensor([[[   0,    1,    2,  ...,   97,   98,   99],\n"
              "         [ 100,  101,  102,  ...,  197,  198,  199],\n"
              "         [ 200,  201,  202,  ...,  297,  298,  299]],\n"
              "\n"
              "        [[ 300,  301,  302,  ...,  397,  398,  399],\n"
              "         [ 400,  401,  402,  ...,  497,  498,  499],\n"
              "         [ 500,  501,  502,  ...,  597,  598,  599]],\n"
              "\n"
              "        [[ 600,  601,  602,  ...,  697,  698,  699],\n"
              "         [ 700,  701,  702,  ...,  797,  798,  799],\n"
              "         [ 800,  801,  802,  ...,  897,  898,  899]],\n"
              "\n"
              "        ...,\n"
              "\n"
              "        [[2100, 2101, 2102,  ..., 2197, 2198, 2199],\n"
              "         [2200, 2201, 2202,  ..., 2297, 2298, 2299],\n"
              "         [2300, 2301, 2302,  ..., 2397, 2398, 2399]],\n"
              "\n"
              "        [[2400, 2401, 2402,  ..., 2497, 2498, 2499],\n"
              "         [2500, 2501, 2502,  ..., 2597, 2598, 2599],\n"
              "         [2600, 2601, 2602,  ..., 2697, 2698, 2699]],\n"
              "\n"
              "        [[2700, 2701, 2702,  ..., 2797, 2798, 2799],\n"
              "         [2800, 2801, 2802,  ..., 2897, 2898, 2899],\n"
              "         [2900, 2901, 2902,  ..., 2997, 2998, 2999]]], dtype=i64)");
    /* the format comes from the values shown: the hidden 1e9 does not matter */
    cn_tensor *g = cn_full(CN_F32, CN_SHAPE(2000), 0.5);
    cn_set(g, (int64_t[]){1000}, 1e9);
    CHECK_STR(g, "tensor([0.5000, 0.5000, 0.5000,  ..., 0.5000, 0.5000, 0.5000], dtype=f32)");

    /* cn_fprint writes the same string and a newline */
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (f) {
        cn_fprint(f, cn_scalar(CN_I32, 12));
        rewind(f);
        char line[64] = {0};
        CHECK(fgets(line, sizeof line, f) != NULL);
        CHECK(strcmp(line, "tensor(12, dtype=i32)\n") == 0);
        fclose(f);
    }
}

/* ---- scopes ---- */

static void test_scopes_nested_keep(void) {
    int base = cn_scope_depth();
    cn_scope_begin();
    CHECK_EQ_INT(cn_scope_depth(), base + 1);
    frees_seen = 0;
    cn_tensor *outer = watched(4);
    cn_scope_begin();
    cn_tensor *a = watched(4), *b = watched(4);
    (void)a;
    CHECK(cn_keep(b) == b);
    cn_keep(outer); /* not made in this scope: nothing to move */
    cn_scope_end();
    CHECK_EQ_INT(frees_seen, 1); /* a */
    CHECK_CLOSE(th_at(b, 3), 3, 0, 0);
    CHECK_CLOSE(th_at(outer, 2), 2, 0, 0);
    cn_scope_end();
    CHECK_EQ_INT(frees_seen, 3); /* b and outer, once each */
    CHECK_EQ_INT(cn_scope_depth(), base);

    /* kept step by step through three levels */
    frees_seen = 0;
    cn_scope_begin();
    cn_scope_begin();
    cn_scope_begin();
    cn_tensor *t = watched(2);
    cn_tensor *u = watched(2);
    cn_keep(t);
    cn_scope_end();
    CHECK_EQ_INT(frees_seen, 1);
    (void)u;
    cn_keep(t);
    cn_scope_end();
    CHECK_EQ_INT(frees_seen, 1);
    CHECK_CLOSE(th_at(t, 1), 1, 0, 0);
    cn_scope_end();
    CHECK_EQ_INT(frees_seen, 2);
    CHECK(cn_keep(NULL) == NULL);

    /* many tensors in one scope */
    frees_seen = 0;
    cn_scope_begin();
    for (int i = 0; i < 5000; i++) watched(1);
    cn_scope_end();
    CHECK_EQ_INT(frees_seen, 5000);
}

static void test_scopes_outliving(void) {
    /* a view kept past the scope keeps the storage alive */
    frees_seen = 0;
    cn_scope_begin();
    cn_tensor *w = watched(6);
    cn_tensor *v = cn_keep(cn_reshape(w, CN_SHAPE(2, 3)));
    cn_scope_end();
    CHECK_EQ_INT(frees_seen, 0);
    CHECK_CLOSE(cn_get(v, (int64_t[]){1, 2}), 5, 0, 0);
    /* a retained tensor too */
    cn_scope_begin();
    cn_tensor *r = cn_retain(watched(3));
    cn_scope_end();
    CHECK_EQ_INT(frees_seen, 0);
    CHECK_CLOSE(th_at(r, 2), 2, 0, 0);
    cn_release(r);
    CHECK_EQ_INT(frees_seen, 1);
    /* v belongs to the test's scope, which frees it */
}

static void test_scopes_caller(void) {
    /* Leave every scope (the harness opened one) to see the caller's side. */
    int depth = cn_scope_depth();
    for (int i = 0; i < depth; i++) cn_scope_end();
    CHECK_EQ_INT(cn_scope_depth(), 0);
    frees_seen = 0;
    cn_tensor *mine = watched(2); /* no scope: the caller owns it */
    cn_scope_begin();
    cn_tensor *kept = cn_keep(watched(2)); /* kept out of the only scope: to the caller */
    cn_tensor *dropped = watched(2);
    (void)dropped;
    cn_scope_end();
    CHECK_EQ_INT(frees_seen, 1);
    CHECK(cn_keep(mine) == mine); /* no scope: nothing to do */
    cn_release(kept);
    cn_release(mine);
    CHECK_EQ_INT(frees_seen, 3);
    /* ending a scope that is not open is an error, not a crash */
    CHECK_ERROR((cn_scope_end(), cn_scope_depth() != 0), "scope_end: no scope is open");
    CHECK_EQ_INT(cn_scope_depth(), 0);
    for (int i = 0; i < depth; i++) cn_scope_begin();
}

static void test_scopes_deep(void) {
    /* Past the depth limit the extra levels merge into the last one. */
    int base = cn_scope_depth();
    frees_seen = 0;
    cn_clear_error();
    for (int i = 0; i < 300; i++) cn_scope_begin();
    CHECK(strstr(cn_last_error(), "nested scopes") != NULL);
    CHECK_EQ_INT(cn_scope_depth(), base + 300);
    cn_tensor *t = watched(1);
    CHECK(cn_keep(t) == t);
    watched(1);
    for (int i = 0; i < 300; i++) cn_scope_end();
    CHECK_EQ_INT(cn_scope_depth(), base);
    CHECK_EQ_INT(frees_seen, 2);
}

/* ---- errors and NULL propagation ---- */

static void test_null_propagation(void) {
    cn_clear_error();
    cn_tensor *bad = cn_zeros(CN_F32, CN_SHAPE(3, -3));
    CHECK(bad == NULL);
    char first[256];
    snprintf(first, sizeof first, "%s", cn_last_error());
    CHECK(strstr(first, "negative size") != NULL);
    cn_tensor *good = cn_ones(CN_F32, CN_SHAPE(3));
    CHECK(cn_reshape(bad, CN_SHAPE(9)) == NULL);
    CHECK(cn_view(bad, CN_SHAPE(9)) == NULL);
    CHECK(cn_transpose(bad, 0, 1) == NULL);
    CHECK(cn_permute(bad, (int[]){1, 0}, 2) == NULL);
    CHECK(cn_slice(bad, 0, 0, 1, 1) == NULL);
    CHECK(cn_narrow(bad, 0, 0, 1) == NULL);
    CHECK(cn_expand(bad, CN_SHAPE(3, 3)) == NULL);
    CHECK(cn_squeeze(bad, 0) == NULL && cn_unsqueeze(bad, 0) == NULL);
    CHECK(cn_flatten(bad, 0, -1) == NULL && cn_mT(bad) == NULL);
    CHECK(cn_contiguous(bad) == NULL && cn_clone(bad) == NULL && cn_cast(bad, CN_F64) == NULL);
    CHECK(cn_bernoulli(bad) == NULL);
    CHECK(cn_add(bad, good) == NULL && cn_add(good, bad) == NULL);
    CHECK(cn_zeros_like(bad) == NULL && cn_full_like(bad, 1) == NULL);
    CHECK(cn_copy_(bad, good) == CN_EINVAL && cn_fill_(bad, 1) == CN_EINVAL);
    CHECK(!cn_equal(bad, good) && isnan(cn_item(bad)));
    cn_stats st;
    CHECK(cn_tensor_stats(bad, &st) == CN_EINVAL);
    CHECK(cn_transpose(cn_reshape(cn_cast(bad, CN_F64), CN_SHAPE(3, 3)), 0, 1) == NULL);
    cn_retain(bad);
    cn_release(bad);
    CHECK_MSG(strcmp(cn_last_error(), first) == 0, "message changed to \"%s\"", cn_last_error());
}

/* ---- dtypes ---- */

static void test_dtype_helpers(void) {
    static const char *names[NDTYPES] = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"};
    static const size_t sizes[NDTYPES] = {4, 8, 2, 2, 4, 8, 1, 1};
    for (int d = 0; d < NDTYPES; d++) {
        CHECK(strcmp(cn_dtype_name(all_dtypes[d]), names[d]) == 0);
        CHECK_EQ_INT(cn_dtype_size(all_dtypes[d]), sizes[d]);
        CHECK(cn_dtype_is_float(all_dtypes[d]) == (d < 4));
    }
    CHECK(strcmp(cn_dtype_name(CN_DTYPE_COUNT), "invalid") == 0);
    CHECK(strcmp(cn_dtype_name((cn_dtype)-1), "invalid") == 0);
    CHECK_EQ_INT(cn_dtype_size(CN_DTYPE_COUNT), 0);
    CHECK(!cn_dtype_is_float(CN_DTYPE_COUNT));
}

/* torch.result_type for [a, b] of dtypes a (row) and b (column), both
 * dimensioned; and a dimensioned with b rank 0. Generated with PyTorch. */
static const cn_dtype rt_dim_dim[NDTYPES][NDTYPES] = {
    {CN_F32, CN_F64, CN_F32, CN_F32, CN_F32, CN_F32, CN_F32, CN_F32},      /* F32 */
    {CN_F64, CN_F64, CN_F64, CN_F64, CN_F64, CN_F64, CN_F64, CN_F64},      /* F64 */
    {CN_F32, CN_F64, CN_F16, CN_F32, CN_F16, CN_F16, CN_F16, CN_F16},      /* F16 */
    {CN_F32, CN_F64, CN_F32, CN_BF16, CN_BF16, CN_BF16, CN_BF16, CN_BF16}, /* BF16 */
    {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_I32, CN_I32},     /* I32 */
    {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I64, CN_I64, CN_I64, CN_I64},     /* I64 */
    {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8, CN_U8},       /* U8 */
    {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8, CN_BOOL},     /* BOOL */
};
static const cn_dtype rt_dim_zero[NDTYPES][NDTYPES] = {
    {CN_F32, CN_F32, CN_F32, CN_F32, CN_F32, CN_F32, CN_F32, CN_F32},         /* F32 */
    {CN_F64, CN_F64, CN_F64, CN_F64, CN_F64, CN_F64, CN_F64, CN_F64},         /* F64 */
    {CN_F16, CN_F16, CN_F16, CN_F16, CN_F16, CN_F16, CN_F16, CN_F16},         /* F16 */
    {CN_BF16, CN_BF16, CN_BF16, CN_BF16, CN_BF16, CN_BF16, CN_BF16, CN_BF16}, /* BF16 */
    {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I32, CN_I32, CN_I32},        /* I32 */
    {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I64, CN_I64, CN_I64, CN_I64},        /* I64 */
    {CN_F32, CN_F64, CN_F16, CN_BF16, CN_U8, CN_U8, CN_U8, CN_U8},            /* U8 */
    {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8, CN_BOOL},        /* BOOL */
};

static void test_result_type(void) {
    for (int i = 0; i < NDTYPES; i++) {
        for (int j = 0; j < NDTYPES; j++) {
            cn_dtype a = all_dtypes[i], b = all_dtypes[j];
            cn_tensor *ad = cn_zeros(a, CN_SHAPE(2)), *bd = cn_zeros(b, CN_SHAPE(3, 1));
            cn_tensor *az = cn_zeros(a, 0, NULL), *bz = cn_zeros(b, 0, NULL);
            cn_dtype dd = cn_result_type(ad, bd), dz = cn_result_type(ad, bz);
            cn_dtype zd = cn_result_type(az, bd), zz = cn_result_type(az, bz);
            CHECK_MSG(dd == rt_dim_dim[i][j], "result_type(%s[2], %s[3,1]) = %s", cn_dtype_name(a),
                      cn_dtype_name(b), cn_dtype_name(dd));
            CHECK_MSG(dz == rt_dim_zero[i][j], "result_type(%s[2], %s[]) = %s", cn_dtype_name(a),
                      cn_dtype_name(b), cn_dtype_name(dz));
            CHECK_MSG(zd == rt_dim_zero[j][i], "result_type(%s[], %s[3,1]) = %s", cn_dtype_name(a),
                      cn_dtype_name(b), cn_dtype_name(zd));
            CHECK_MSG(zz == rt_dim_dim[i][j], "result_type(%s[], %s[]) = %s", cn_dtype_name(a),
                      cn_dtype_name(b), cn_dtype_name(zz));
        }
    }
    /* a zero-size tensor is still dimensioned */
    CHECK(cn_result_type(cn_zeros(CN_I32, CN_SHAPE(0)), cn_scalar(CN_I64, 1)) == CN_I32);
}

/* ---- f16 and bf16 ---- */

static uint32_t f2u(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static float u2f(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

#ifdef __FLT16_MAX__
static uint16_t ref_f32_to_f16(float x) {
    _Float16 h = (_Float16)x;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static float ref_f16_to_f32(uint16_t u) {
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}

static int f16_mismatches;
static void check_to_f16(uint32_t bits) {
    float x = u2f(bits);
    uint16_t got = cn_f32_to_f16(x), want = ref_f32_to_f16(x);
    if (got != want && f16_mismatches++ < 10)
        th_fail(__FILE__, __LINE__, "f32_to_f16(%a = 0x%08x) = 0x%04x, _Float16 gives 0x%04x", x,
                bits, got, want);
}
#endif

static void test_f16(void) {
#ifdef __FLT16_MAX__
    /* every half to f32, bit for bit (NaNs quietened as the hardware does) */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t got = f2u(cn_f16_to_f32((uint16_t)h)), want = f2u(ref_f16_to_f32((uint16_t)h));
        if (got != want && bad++ < 10)
            th_fail(__FILE__, __LINE__, "f16_to_f32(0x%04x) = 0x%08x, _Float16 gives 0x%08x", h,
                    got, want);
    }
    th_checks++;
    /* f32 to f16 around every half: the value, the midpoints to its
     * neighbours (ties) and one f32 ulp either side of each */
    f16_mismatches = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        for (uint32_t sign = 0; sign < 2; sign++) {
            float lo = cn_f16_to_f32((uint16_t)h), hi = cn_f16_to_f32((uint16_t)(h + 1));
            uint32_t s = sign << 31;
            uint32_t v = f2u(lo), mid = f2u((lo + hi) / 2); /* exact: 12 significant bits */
            check_to_f16(s | v);
            check_to_f16(s | (v + 1));
            if (v) check_to_f16(s | (v - 1));
            check_to_f16(s | mid);
            check_to_f16(s | (mid + 1));
            check_to_f16(s | (mid - 1));
        }
    }
    /* random bit patterns: every exponent, NaN payloads, subnormal f32s */
    for (int i = 0; i < 300000; i++) check_to_f16((uint32_t)th_next());
    for (uint32_t e = 0; e < 256; e++)
        for (int i = 0; i < 200; i++) check_to_f16((e << 23) | ((uint32_t)th_next() & 0x807fffffu));
    th_checks++;
    CHECK(f16_mismatches == 0);
#else
    fprintf(stderr, "  (no _Float16 in this compiler: checking fixed values only)\n");
#endif
    /* fixed values, whatever the compiler */
    CHECK_EQ_INT(cn_f32_to_f16(65504.0f), 0x7bff);
    CHECK_EQ_INT(cn_f32_to_f16(65519.99f), 0x7bff);
    CHECK_EQ_INT(cn_f32_to_f16(65520.0f), 0x7c00); /* ties to even: overflows */
    CHECK_EQ_INT(cn_f32_to_f16(-1e6f), 0xfc00);
    CHECK_EQ_INT(cn_f32_to_f16(INFINITY), 0x7c00);
    CHECK_EQ_INT(cn_f32_to_f16(u2f(0x33800000)), 0x0001); /* 2^-24, the smallest subnormal */
    CHECK_EQ_INT(cn_f32_to_f16(u2f(0x33000000)), 0x0000); /* 2^-25: tie to even 0 */
    CHECK_EQ_INT(cn_f32_to_f16(u2f(0x33c00000)), 0x0002); /* 1.5 * 2^-24: tie to even 2 */
    CHECK_EQ_INT(cn_f32_to_f16(-0.0f), 0x8000);
    CHECK_EQ_INT(cn_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);     /* tie to even, down */
    CHECK_EQ_INT(cn_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02); /* tie to even, up */
    uint16_t qn = cn_f32_to_f16(NAN);
    CHECK((qn & 0x7c00) == 0x7c00 && (qn & 0x3ff) != 0);
    CHECK(isnan(cn_f16_to_f32(0x7c01)) && isnan(cn_f16_to_f32(0xfe00)));
    CHECK(cn_f16_to_f32(0x7c00) == INFINITY && cn_f16_to_f32(0xfc00) == -INFINITY);
    CHECK(cn_f16_to_f32(0x0001) == 0x1p-24f && cn_f16_to_f32(0x03ff) == 1023 * 0x1p-24f);
}

/* Round to nearest even, written from the definition. */
static uint16_t ref_f32_to_bf16(float x) {
    uint32_t u = f2u(x);
    if (isnan(x)) return (uint16_t)((u >> 16) | 0x40); /* quiet, sign and top payload kept */
    uint32_t keep = u >> 16, rest = u & 0xffff;
    if (rest > 0x8000 || (rest == 0x8000 && (keep & 1))) keep++; /* may carry into inf */
    return (uint16_t)keep;
}

static void test_bf16(void) {
    static const uint32_t lows[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff, 0x4000, 0xc000};
    int bad = 0;
    for (uint32_t hi = 0; hi < 65536; hi++) {
        for (size_t k = 0; k < sizeof lows / sizeof lows[0] + 2; k++) {
            uint32_t lo = k < sizeof lows / sizeof lows[0] ? lows[k] : (uint32_t)th_next() & 0xffff;
            float x = u2f(hi << 16 | lo);
            uint16_t got = cn_f32_to_bf16(x), want = ref_f32_to_bf16(x);
            bool ok = isnan(x)
                          ? (got & 0x7f80) == 0x7f80 && (got & 0x7f) && (got >> 15) == (hi >> 15)
                          : got == want;
            if (!ok && bad++ < 10)
                th_fail(__FILE__, __LINE__, "f32_to_bf16(0x%08x) = 0x%04x, expected 0x%04x",
                        hi << 16 | lo, got, want);
        }
        /* bf16 -> f32 is exact: the bits move up */
        float back = cn_bf16_to_f32((uint16_t)hi);
        if (!isnan(back) && f2u(back) != hi << 16 && bad++ < 10)
            th_fail(__FILE__, __LINE__, "bf16_to_f32(0x%04x) = 0x%08x", hi, f2u(back));
    }
    th_checks++;
    /* The same through cn_cast, whose contiguous rows take a vectorised
     * loop of their own (copy.c), at every instruction-set level: every
     * high half with a few low halves, each result against the scalar
     * function checked above, and back. */
    int64_t n = 65536 * 4;
    uint32_t *bits = malloc(sizeof *bits * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        static const uint32_t lo4[] = {0x7fff, 0x8000, 0x8001, 0x18000};
        bits[i] = (uint32_t)(i / 4) << 16 | (lo4[i % 4] & 0xffff);
        if (i % 4 == 3) bits[i] = (uint32_t)(i / 4) << 16 | ((uint32_t)th_next() & 0xffff);
    }
    cn_tensor *xs = cn_from_data(CN_F32, CN_SHAPE(n), (const float *)bits);
    for (int level = 0; level < CN_ISA_LEVELS; level++) {
        if (!cn_isa_available(level)) continue;
        CHECK(cn_isa_set(level) == CN_OK);
        cn_scope_begin();
        cn_tensor *h = cn_cast(xs, CN_BF16), *back = cn_cast(h, CN_F32);
        const uint16_t *hv = h ? cn_data(h) : NULL;
        const float *bv = back ? cn_data(back) : NULL;
        CHECK(hv && bv);
        int wrong = 0;
        for (int64_t i = 0; hv && bv && i < n; i++) {
            float x = u2f(bits[i]);
            if (hv[i] != cn_f32_to_bf16(x) || f2u(bv[i]) != (uint32_t)hv[i] << 16) {
                if (wrong++ < 5)
                    th_fail(__FILE__, __LINE__, "level %s: cast of 0x%08x: 0x%04x (0x%08x back)",
                            cn_isa_name(level), bits[i], hv[i], f2u(bv[i]));
            }
        }
        th_checks++;
        /* strided rows: the transpose of a 512 x 512 view */
        cn_tensor *ht = cn_cast(cn_mT(cn_reshape(xs, CN_SHAPE(512, 512))), CN_BF16);
        const uint16_t *tv = ht && cn_is_contiguous(ht) ? cn_data(ht) : NULL;
        CHECK(tv != NULL);
        for (int64_t i = 0; tv && i < 512 * 512; i++) {
            uint32_t b = bits[(i % 512) * 512 + i / 512];
            if (tv[i] != cn_f32_to_bf16(u2f(b)) && wrong++ < 5)
                th_fail(__FILE__, __LINE__, "level %s: strided cast of 0x%08x: 0x%04x",
                        cn_isa_name(level), b, tv[i]);
        }
        /* and back, transposed again (tiles; bf16 -> f32 is exact), and a
         * shape of partial tiles: 37 x 509 read as its transpose */
        cn_tensor *bt = cn_cast(cn_mT(ht), CN_F32);
        const float *btv = bt && cn_is_contiguous(bt) ? cn_data(bt) : NULL;
        CHECK(btv != NULL);
        for (int64_t i = 0; btv && tv && i < 512 * 512; i++)
            if (f2u(btv[i]) != (uint32_t)tv[(i % 512) * 512 + i / 512] << 16 && wrong++ < 5)
                th_fail(__FILE__, __LINE__, "level %s: strided cast back of 0x%04x: 0x%08x",
                        cn_isa_name(level), tv[(i % 512) * 512 + i / 512], f2u(btv[i]));
        cn_tensor *odd = cn_mT(cn_reshape(cn_slice(xs, 0, 0, 37 * 509, 1), CN_SHAPE(37, 509)));
        cn_tensor *ho = cn_cast(odd, CN_BF16);
        const uint16_t *ov = ho && cn_is_contiguous(ho) ? cn_data(ho) : NULL;
        CHECK(ov != NULL);
        for (int64_t i = 0; ov && i < 37 * 509; i++) {
            uint32_t b = bits[(i % 37) * 509 + i / 37];
            if (ov[i] != cn_f32_to_bf16(u2f(b)) && wrong++ < 5)
                th_fail(__FILE__, __LINE__, "level %s: 509 x 37 cast of 0x%08x: 0x%04x",
                        cn_isa_name(level), b, ov[i]);
        }
        cn_scope_end();
    }
    cn_isa_set(cn_isa_max());
    cn_release(xs);
    free(bits);
    CHECK_EQ_INT(cn_f32_to_bf16(u2f(0x7f7fffff)), 0x7f80); /* rounds up to inf */
    CHECK_EQ_INT(cn_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);  /* tie to even, down */
    CHECK_EQ_INT(cn_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
    CHECK_CLOSE(cn_bf16_to_f32(cn_f32_to_bf16(-2.7f)), -2.703125, 0, 0);
}

/* ---- long chains ---- */

static void test_deep_chains(void) {
    const int n = 1000000;
    /* a million views of views in one scope */
    cn_scope_begin();
    cn_tensor *t = cn_arange(0, 12, 1, CN_F32);
    for (int i = 0; i < n && t; i++)
        t = i % 2 ? cn_reshape(t, CN_SHAPE(12)) : cn_reshape(t, CN_SHAPE(3, 4));
    CHECK(t != NULL);
    CHECK_CLOSE(th_at(t, 11), 11, 0, 0);
    cn_scope_end();

    /* a million op results, each holding the previous one through its node
     * (as an autograd record or a static graph does), every other one also
     * through .grad, released from the end */
    frees_seen = 0;
    cn_scope_begin();
    cn_tensor *prev = cn_retain(watched(1));
    for (int i = 0; i < n && prev; i++) {
        cn_tensor *next = cn_t_alias(prev);
        if (!next) break;
        next->node = cn_node_new(0, &prev, 1, NULL);
        if (i % 2) next->grad = cn_retain(prev);
        cn_release(prev);
        prev = next;
    }
    CHECK(prev != NULL);
    cn_release(prev);
    CHECK_EQ_INT(frees_seen, 0); /* the scope still holds the first */
    cn_scope_end();
    CHECK_EQ_INT(frees_seen, 1); /* and nothing of the chain leaked */
}

int main(void) {
    RUN(test_empty_zeros_ones_full);
    RUN(test_scalar_and_like);
    RUN(test_creation_errors);
    RUN(test_arange);
    RUN(test_linspace);
    RUN(test_eye);
    RUN(test_from_data);
    RUN(test_from_buffer);
    RUN(test_inspection);
    RUN(test_get_set);
    RUN(test_get_set_layouts);
    RUN(test_copy_to_buffer);
    RUN(test_copy_);
    RUN(test_copy_fill_layouts);
    RUN(test_fill_);
    RUN(test_equal_allclose);
    RUN(test_stats);
    RUN(test_print);
    RUN(test_scopes_nested_keep);
    RUN(test_scopes_outliving);
    RUN(test_scopes_caller);
    RUN(test_scopes_deep);
    RUN(test_null_propagation);
    RUN(test_dtype_helpers);
    RUN(test_result_type);
    RUN(test_f16);
    RUN(test_bf16);
    RUN(test_deep_chains);
    return th_summary();
}
