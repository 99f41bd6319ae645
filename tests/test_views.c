/* Views: reshape, permute, slice, expand and friends share storage and see
 * the right elements; copies are independent. */
#include "harness.h"

static void test_reshape_shares(void) {
    cn_tensor *a = cn_arange(0, 24, 1, CN_F32);
    cn_tensor *b = cn_reshape(a, CN_SHAPE(2, 3, 4));
    CHECK_SHAPE(b, 2, 3, 4);
    CHECK(cn_shares_storage(a, b));
    CHECK_CLOSE(cn_get(b, (int64_t[]){1, 2, 3}), 23, 0, 0);
    cn_tensor *c = cn_reshape(b, CN_SHAPE(-1, 4));
    CHECK_SHAPE(c, 6, 4);
    CHECK_ERROR(cn_reshape(a, CN_SHAPE(5, -1)), "cannot reshape [24]");
    CHECK_ERROR(cn_reshape(a, CN_SHAPE(-1, -1)), "more than one -1");
}

static void test_transpose_then_reshape_copies(void) {
    cn_tensor *a = cn_reshape(cn_arange(0, 6, 1, CN_F32), CN_SHAPE(2, 3));
    cn_tensor *t = cn_transpose(a, 0, 1);
    CHECK_SHAPE(t, 3, 2);
    CHECK(!cn_is_contiguous(t));
    CHECK_CLOSE(cn_get(t, (int64_t[]){2, 1}), 5, 0, 0);
    cn_tensor *f = cn_reshape(t, CN_SHAPE(6));
    CHECK(!cn_shares_storage(f, a)); /* no strides express it: a copy */
    double want[] = {0, 3, 1, 4, 2, 5};
    for (int i = 0; i < 6; i++) CHECK_CLOSE(th_at(f, i), want[i], 0, 0);
    CHECK_ERROR(cn_view(t, CN_SHAPE(6)), "without a copy");
}

static void test_slice_negative_step(void) {
    cn_tensor *a = cn_arange(0, 10, 1, CN_I64);
    cn_tensor *r = cn_slice(a, 0, CN_END, CN_BEGIN, -1);
    CHECK_SHAPE(r, 10);
    for (int i = 0; i < 10; i++) CHECK_EQ_INT(th_at(r, i), 9 - i);
    cn_tensor *s = cn_slice(a, 0, 8, 1, -3); /* 8, 5, 2 */
    CHECK_SHAPE(s, 3);
    CHECK_EQ_INT(th_at(s, 2), 2);
    cn_tensor *e = cn_slice(a, 0, 20, 30, 1);
    CHECK_SHAPE(e, 0);
    cn_tensor *p = cn_slice(a, 0, -3, CN_END, 1);
    CHECK_SHAPE(p, 3);
    CHECK_EQ_INT(th_at(p, 0), 7);
    CHECK_ERROR(cn_slice(a, 0, 0, 5, 0), "step is 0");
    CHECK_ERROR(cn_slice(a, 1, 0, 5, 1), "axis 1 is out of range");
}

static void test_expand_and_copy(void) {
    cn_tensor *a = cn_reshape(cn_arange(0, 3, 1, CN_F32), CN_SHAPE(3, 1));
    cn_tensor *e = cn_expand(a, CN_SHAPE(2, 3, 4));
    CHECK_SHAPE(e, 2, 3, 4);
    CHECK_EQ_INT(cn_strides(e)[2], 0);
    CHECK_CLOSE(cn_get(e, (int64_t[]){1, 2, 3}), 2, 0, 0);
    cn_tensor *c = cn_contiguous(e);
    CHECK(cn_is_contiguous(c));
    CHECK_CLOSE(th_at(c, 23), 2, 0, 0);
    CHECK_ERROR(cn_expand(a, CN_SHAPE(2, 4, 4)), "cannot expand [3, 1]");
}

static void test_squeeze_unsqueeze_flatten(void) {
    cn_tensor *a = cn_zeros(CN_F32, CN_SHAPE(2, 1, 3));
    CHECK_SHAPE(cn_squeeze(a, 1), 2, 3);
    CHECK_SHAPE(cn_squeeze_all(a), 2, 3);
    CHECK_SHAPE(cn_unsqueeze(a, -1), 2, 1, 3, 1);
    CHECK_SHAPE(cn_unsqueeze(a, 0), 1, 2, 1, 3);
    CHECK_SHAPE(cn_flatten(a, 0, -1), 6);
    CHECK_SHAPE(cn_flatten(a, 1, 2), 2, 3);
    CHECK_ERROR(cn_squeeze(a, 0), "has size 2, not 1");
}

static void test_cast_and_half(void) {
    cn_tensor *a = cn_from_data(CN_F32, CN_SHAPE(4), (float[]){1.5f, -2.7f, 65504.f, 1e-8f});
    cn_tensor *h = cn_cast(a, CN_F16);
    CHECK_CLOSE(th_at(h, 0), 1.5, 0, 0);
    CHECK_CLOSE(th_at(h, 2), 65504, 0, 0);
    cn_tensor *i = cn_cast(a, CN_I32);
    CHECK_EQ_INT(th_at(i, 1), -2);
    cn_tensor *b = cn_cast(a, CN_BF16);
    CHECK_CLOSE(th_at(b, 1), -2.703125, 0, 0);
}

int main(void) {
    RUN(test_reshape_shares);
    RUN(test_transpose_then_reshape_copies);
    RUN(test_slice_negative_step);
    RUN(test_expand_and_copy);
    RUN(test_squeeze_unsqueeze_flatten);
    RUN(test_cast_and_half);
    return th_summary();
}
