/* Gradient clipping against hand-computed values (naive loops in f64). */
#include "harness.h"

static cn_tensor *param_with_grad(int ndim, const int64_t *shape, const double *g) {
    cn_tensor *p = cn_zeros(CN_F32, ndim, shape);
    cn_set_requires_grad(p, true);
    cn_set_grad(p, th_make(CN_F32, ndim, shape, g, TH_CONTIG));
    return p;
}

static void test_clip_value(void) {
    double g0[] = {-3, -0.5, 0, 0.25, 2};
    cn_tensor *p[2] = {param_with_grad(CN_SHAPE(5), g0), cn_zeros(CN_F32, CN_SHAPE(2))};
    CHECK_EQ_INT(cn_clip_grad_value(p, 2, 1.0), 0);
    double want[] = {-1, -0.5, 0, 0.25, 1};
    for (int i = 0; i < 5; i++) CHECK_CLOSE(th_at(cn_get_grad(p[0]), i), want[i], 0, 0);
    CHECK(cn_get_grad(p[1]) == NULL);
    CHECK_STATUS_ERROR(cn_clip_grad_value(p, 2, -1), "must be >= 0");
}

static void test_clip_norm(void) {
    double g0[] = {3, -4, 1, 2}, g1[] = {0.5, -2, 7};
    for (int mode = 0; mode < 3; mode++) {
        cn_scope_begin();
        cn_tensor *p[2] = {param_with_grad(CN_SHAPE(2, 2), g0), param_with_grad(CN_SHAPE(3), g1)};
        double ptype = mode == 0 ? 2 : mode == 1 ? 1 : INFINITY;
        double want_norm = 0;
        for (int i = 0; i < 4; i++)
            want_norm = mode == 2 ? fmax(want_norm, fabs(g0[i])) : want_norm + pow(fabs(g0[i]), ptype);
        for (int i = 0; i < 3; i++)
            want_norm = mode == 2 ? fmax(want_norm, fabs(g1[i])) : want_norm + pow(fabs(g1[i]), ptype);
        if (mode < 2) want_norm = pow(want_norm, 1 / ptype);
        double norm = 0, max_norm = 2.5;
        CHECK_EQ_INT(cn_clip_grad_norm(p, 2, max_norm, ptype, &norm), 0);
        CHECK_CLOSE(norm, want_norm, 1e-6, 0);
        double coef = max_norm / (want_norm + 1e-6);
        for (int i = 0; i < 4; i++) CHECK_CLOSE(th_at(cn_get_grad(p[0]), i), g0[i] * coef, 1e-6, 1e-7);
        for (int i = 0; i < 3; i++) CHECK_CLOSE(th_at(cn_get_grad(p[1]), i), g1[i] * coef, 1e-6, 1e-7);
        /* Below the limit: untouched. */
        CHECK_EQ_INT(cn_clip_grad_norm(p, 2, 100, ptype, &norm), 0);
        CHECK_CLOSE(th_at(cn_get_grad(p[1]), 2), g1[2] * coef, 1e-6, 1e-7);
        cn_scope_end();
    }
}

int main(void) {
    RUN(test_clip_value);
    RUN(test_clip_norm);
    return th_summary();
}
