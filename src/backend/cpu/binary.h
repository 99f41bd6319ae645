/* CPU kernels of the binary elementwise family (src/ops/binary.c): arithmetic,
 * comparisons, logic and where, over inputs broadcast to the output. */
#ifndef CN_CPU_BINARY_H
#define CN_CPU_BINARY_H

#include "../../core/core.h"

typedef enum cn_binary_kind {
    CN_BIN_ADD,
    CN_BIN_SUB,
    CN_BIN_MUL,
    CN_BIN_DIV,
    CN_BIN_POW,
    CN_BIN_MAX,
    CN_BIN_MIN,
    CN_BIN_EQ,
    CN_BIN_NE,
    CN_BIN_LT,
    CN_BIN_LE,
    CN_BIN_GT,
    CN_BIN_GE,
    CN_BIN_AND,
    CN_BIN_OR,
    CN_BIN_XOR,
    CN_BIN_COUNT
} cn_binary_kind;

/* out = a <kind> b. Arithmetic and comparisons take a and b of one dtype
 * (the dispatcher promotes them); arithmetic writes that dtype, comparisons
 * and logic write bool; logic takes any two dtypes (non-zero is true).
 * Returns 0, or a negative status after cn_fail naming `name` (an integer
 * pow with a negative exponent, a dtype without a kernel). */
int cn_cpu_binary(const char *name, cn_binary_kind kind, cn_tensor *out, const cn_tensor *a,
                  const cn_tensor *b);

/* acc += a * b, the product rounded before the sum (the bits of a product
 * tensor added in): f32 and f64, a and b of acc's dtype, broadcast to acc's
 * shape; acc aliases neither. Returns CN_EUNSUPPORTED, without an error
 * message, for other dtypes (the caller builds the product instead). */
int cn_cpu_addmul(cn_tensor *acc, const cn_tensor *a, const cn_tensor *b);

/* out = cond ? a : b; cond of any dtype (non-zero is true), a and b of out's
 * dtype. */
int cn_cpu_where(cn_tensor *out, const cn_tensor *cond, const cn_tensor *a, const cn_tensor *b);

#endif
