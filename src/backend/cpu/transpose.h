/* Tiled copies between views laid out along different axes (transpose.c). */
#ifndef CN_CPU_TRANSPOSE_H
#define CN_CPU_TRANSPOSE_H

#include "iter.h"

/* Run the copy of it (operand 0 the destination, of dtype dd; 1 the source,
 * of sd: the same dtype, or f32 and bf16 either way, the cast rounding as
 * cn_f32_to_bf16) in tiles when the destination is unit-stride along the
 * last axis and the source along another; false (nothing done) otherwise. */
bool cn_copy_transposed(const cn_iter *it, cn_dtype dd, cn_dtype sd);

/* dst[a * dsa + b] = src[a + b * ssb] for a < na, b < nb (in elements of
 * es bytes: 1, 2, 4 or 8; false otherwise), in the same tiles, over the
 * pool. */
bool cn_transpose_copy(size_t es, int64_t na, int64_t nb, const void *src, int64_t ssb, void *dst,
                       int64_t dsa);

#endif
