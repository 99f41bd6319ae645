/* Tiled copies between views laid out along different axes (transpose.c). */
#ifndef CN_CPU_TRANSPOSE_H
#define CN_CPU_TRANSPOSE_H

#include "iter.h"

/* Run the copy of it (operand 0 the destination, 1 the source, both of
 * es-byte elements) in tiles when the destination is unit-stride along the
 * last axis and the source along another; false (nothing done) otherwise. */
bool cn_copy_transposed(const cn_iter *it, size_t es);

#endif
