/* Tensors in the text fixtures that the scripts in tests/parity/ write during a
 * test run: "DT NDIM DIM... VALUE..." after a tag the test reads itself, DT f
 * (f32) or i (i64), values in row-major order. */
#ifndef CN_TEST_FIXTURE_TEXT_H
#define CN_TEST_FIXTURE_TEXT_H

#include "harness.h"

/* The tensor (in the current scope), or NULL if the record is malformed. */
static cn_tensor *fx_read_values(FILE *f) {
    char dt[4];
    int ndim;
    if (fscanf(f, "%3s %d", dt, &ndim) != 2 || ndim < 0 || ndim > CN_MAX_DIMS) return NULL;
    int64_t shape[CN_MAX_DIMS], n = 1;
    for (int i = 0; i < ndim; i++) {
        if (fscanf(f, "%" SCNd64, &shape[i]) != 1 || shape[i] < 0) return NULL;
        n *= shape[i];
    }
    bool isint = dt[0] == 'i';
    cn_tensor *t = cn_empty(isint ? CN_I64 : CN_F32, ndim, shape);
    for (int64_t k = 0; t && k < n; k++) {
        if (isint) {
            if (fscanf(f, "%" SCNd64, &((int64_t *)cn_data(t))[k]) != 1) return NULL;
        } else {
            double v;
            if (fscanf(f, "%lf", &v) != 1) return NULL;
            ((float *)cn_data(t))[k] = (float)v;
        }
    }
    return t;
}

#endif
