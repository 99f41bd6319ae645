/* The loops of the fused elementwise kernel (src/graph/fused.c): one op over
 * a block of contiguous registers, o[i] = f(a[i], b[i], c[i]), for f32 and
 * f64, with the unfused kernels' formulas (unary.c, binary.c) so results are
 * the same bits. Masks (comparisons, logic) are 0/1 in the float dtype. */
#ifndef CN_CPU_FUSED_KERNELS_H
#define CN_CPU_FUSED_KERNELS_H

#include "binary.h"
#include "unary.h"

typedef struct cn_fk_params {
    float f0, f1;   /* the op's float attributes rounded to f32 (as unary.c does) */
    double d0, d1;
} cn_fk_params;

/* n elements; o, a, b, c point at blocks of n elements; unused operands
 * may be NULL. o never overlaps an operand. */
typedef void (*cn_fk_fn)(int64_t n, void *o, const void *a, const void *b, const void *c,
                         const cn_fk_params *p);

/* o = kind(a); logical_not gives a mask. NULL for dtypes other than f32/f64. */
cn_fk_fn cn_fk_unary(cn_unary_kind kind, cn_dtype dt);
/* o = a kind b (comparisons and logic give masks). */
cn_fk_fn cn_fk_binary(cn_binary_kind kind, cn_dtype dt);
/* pow with the scalar exponent e when pow has a cheaper exact form for it
 * (binary.c's shortcuts, which an unfused pow with a one-element exponent
 * takes), else NULL. The fn reads only a. */
cn_fk_fn cn_fk_pow_scalar(cn_dtype dt, double e);
/* o = a != 0 ? b : c (a the condition, always a block). */
cn_fk_fn cn_fk_where(cn_dtype dt);
/* o = a; o = (a != 0) as 0/1. */
cn_fk_fn cn_fk_copy(cn_dtype dt);
cn_fk_fn cn_fk_truth(cn_dtype dt);

#endif
