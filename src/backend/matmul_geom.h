/* The shape of a matmul as every backend runs it: numpy.matmul's batched
 * products (a 1-D a is a row, a 1-D b a column, batch axes broadcast) as
 * m x k x n matrices with row and column strides, over batch axes merged
 * where a, b and the contiguous output all allow. Shapes were checked by
 * the op's infer (src/ops/linalg.c). */
#ifndef CN_BACKEND_MATMUL_GEOM_H
#define CN_BACKEND_MATMUL_GEOM_H

#include "../core/core.h"

typedef struct cn_mm_geom {
    int64_t m, k, n;
    int64_t rsa, csa, rsb, csb; /* elements */
    int nb;                     /* batch axes after merging */
    int64_t shape[CN_MAX_DIMS]; /* their sizes, and a's, b's and c's strides */
    int64_t sa[CN_MAX_DIMS], sb[CN_MAX_DIMS], sc[CN_MAX_DIMS];
    int64_t nmat;               /* products: the batch axes' sizes multiplied */
} cn_mm_geom;

/* out = a @ b. A b shared by every product over evenly spaced rows of a
 * becomes one product with m * batch rows (a linear layer over a
 * sequence). */
void cn_mm_geometry(const cn_tensor *a, const cn_tensor *b, const cn_tensor *out, cn_mm_geom *g);

#endif
