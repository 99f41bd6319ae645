/* pad's geometry as every backend reads it: per output axis its size, the
 * input's size and stride and the padding before it (pads are given last
 * axis first, as the op's attribute list holds them). A rank-0 tensor is
 * one axis of size 1. Returns the number of axes. */
#ifndef CN_BACKEND_PAD_GEOM_H
#define CN_BACKEND_PAD_GEOM_H

#include "../core/core.h"

static inline int cn_pad_geometry(const cn_tensor *x, const cn_tensor *out, const int64_t *pads,
                                  int npads, int64_t *oshape, int64_t *len, int64_t *xs,
                                  int64_t *before) {
    int nd = out->ndim;
    if (nd == 0) {
        oshape[0] = len[0] = 1;
        xs[0] = before[0] = 0;
        return 1;
    }
    for (int d = 0; d < nd; d++) {
        int pair = nd - 1 - d;
        oshape[d] = out->shape[d];
        len[d] = x->shape[d];
        xs[d] = x->strides[d];
        before[d] = 2 * pair < npads ? pads[2 * pair] : 0;
    }
    return nd;
}

#endif
