/* The elementwise iterator: walks an output and inputs broadcast to its shape
 * as a sequence of rows, after dropping size-1 axes and merging axes that are
 * laid out back to back, so a contiguous case becomes one long row. Kernels
 * supply a row function; the iterator splits the work across the pool. */
#ifndef CN_CPU_ITER_H
#define CN_CPU_ITER_H

#include "../../core/core.h"

#define CN_ITER_MAX_OPS 4 /* the output and up to three inputs */

typedef struct cn_iter {
    int ndim; /* >= 1 */
    int nops; /* operand 0 is the output */
    int64_t numel;
    int64_t shape[CN_MAX_DIMS];
    int64_t strides[CN_ITER_MAX_OPS][CN_MAX_DIMS]; /* in elements */
    char *base[CN_ITER_MAX_OPS];                    /* element [0,...,0] */
    size_t esize[CN_ITER_MAX_OPS];
} cn_iter;

/* One row: n elements; ptrs[k] is operand k's first element, strides[k] its
 * step in elements (0 for a broadcast input). */
typedef void (*cn_row_fn)(void *ctx, int64_t n, char **ptrs, const int64_t *strides);

/* out's shape must be the broadcast of the inputs' shapes. */
void cn_iter_init(cn_iter *it, cn_tensor *out, cn_tensor *const *in, int nin);
/* Run fn over every element, in parallel when there are enough. */
void cn_iter_run(const cn_iter *it, cn_row_fn fn, void *ctx);
/* Run fn over the elements [begin, end) in row-major order (serially). */
void cn_iter_run_range(const cn_iter *it, int64_t begin, int64_t end, cn_row_fn fn, void *ctx);

/* Elements per thread below which a loop is not worth splitting. */
#define CN_GRAIN_ELEMWISE 32768

#endif
