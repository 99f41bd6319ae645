/* The fused elementwise kernel: a tree of elementwise ops over inputs
 * broadcast to one output, run in one pass that reads each input once and
 * writes the output once (what the fusion pass turns chains of elementwise
 * steps into). Results are the same bits as running the ops one by one
 * through the op table (every op uses the unfused kernel's formula), but
 * for the sign and payload of a NaN computed from two NaNs.
 *
 * Registers 0..nin-1 hold the inputs; instruction k writes register
 * nin + k and reads only registers written before it. A register holds
 * either values of the expression's float dtype T (f32 or f64) or a 0/1
 * mask: a comparison, a logical op, logical_not and cast to bool make a
 * mask; a bool input is one. where takes any register as its condition
 * (non-zero is true) and two value registers (or two masks, giving a mask).
 * Arithmetic and math take value registers only: a mask enters arithmetic
 * through cast to T, as the dispatcher's promotion writes it. */
#ifndef CN_BACKEND_FUSED_EXPR_H
#define CN_BACKEND_FUSED_EXPR_H

#include "../core/core.h"

/* One instruction of a fused elementwise expression. Registers 0..nin-1
 * hold the inputs (broadcast to the output shape); each instruction
 * writes register nin + its index. */
typedef struct cn_fused_instr {
    uint16_t op;     /* a cn_op_id that cn_fused_supports accepts */
    int16_t a, b, c; /* operand registers (-1 unused) */
    cn_attrs attrs;  /* the op's attributes (leaky_relu slope, clamp bounds, ...) */
} cn_fused_instr;

typedef struct cn_fused_expr {
    int nin, ninstr;
    cn_fused_instr *instr;
    int result; /* register written to the output */
} cn_fused_expr;

/* Can op (with these attributes) be part of an expression computing in dt?
 * dt is the float dtype of the expression (f32 or f64; anything else:
 * false). Supported: neg abs sign exp log log1p expm1 sqrt rsqrt square
 * reciprocal sin cos tanh sigmoid relu leaky_relu elu gelu silu softplus
 * erf floor ceil round clamp add sub mul div pow maximum minimum, the
 * comparisons eq ne lt le gt ge, logical_and/or/xor/not, where, contiguous
 * and cast to dt or bool. Attributes the op's inference would refuse
 * (softplus beta 0, a NaN clamp bound, ...) give false. */
bool cn_fused_supports(cn_op_id op, const cn_attrs *a, cn_dtype dt);

/* out = expr(in...). Every input broadcasts to out's shape and may have
 * any strides; inputs are of dtype T, or bool for mask registers. out is
 * contiguous, of dtype T (a value result) or bool (a mask result). An input
 * may be out itself (same storage, offset and shape: an epilogue updating
 * a result in place); any other overlap with out is refused. Instructions
 * the result does not depend on are skipped. Parallel over blocks of the
 * output on the thread pool; the results do not depend on the thread
 * count. Returns 0, or a negative status after cn_fail naming what was
 * wrong with the expression or the tensors. */
/* The CPU backend's (backend/cpu/fused.c); other backends run groups
 * through their table's fused_run, with the same contract. */
int cn_fused_run(const cn_fused_expr *e, cn_tensor *const *in, cn_tensor *out);

/* Is e, over in (in[0] a value of out's dtype, the rest as for
 * cn_fused_run), a bound on in[0] alone: relu, clamp, or maximum/minimum
 * of the running value with a one-element input that is not NaN, as a
 * chain of at most one lower bound followed by at most one upper? Then
 * *lo and *hi are the bounds (-inf, inf where there is none), and the
 * expression's value is min(max(in[0], lo), hi), each written
 * bound > v ? bound : v (bound < v for the min): what a product's kernel
 * can apply as it writes (backend/cpu/gemm.h, cn_gemm_out). */
bool cn_fused_as_bounds(const cn_fused_expr *e, cn_tensor *const *in, double *lo, double *hi);

#endif
