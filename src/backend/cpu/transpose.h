/* Tiled copies between views laid out along different axes (transpose.c). */
#ifndef CN_CPU_TRANSPOSE_H
#define CN_CPU_TRANSPOSE_H

#include "iter.h"

/* Run the copy of it (operand 0 the destination, of dtype dd; 1 the source,
 * of sd: the same dtype, or f32 and bf16 either way, the cast rounding as
 * cn_f32_to_bf16) in tiles when the destination is unit-stride along the
 * last axis and the source along another; false (nothing done) otherwise. */
bool cn_copy_transposed(const cn_iter *it, cn_dtype dd, cn_dtype sd);

#endif
