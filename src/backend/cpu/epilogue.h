/* Epilogues: a program's fused elementwise expression applied to a
 * product's output piece by piece, each piece as soon as the kernel has
 * written it, rather than in a pass of its own over the whole output once
 * the product is done.
 *
 * A program's fused step whose head is a convolution computes
 * out = expr(head(...), ...), the head's result being the expression's
 * register 0 (src/graph/program.c, src/backend/fused_expr.h). On the CPU
 * the program prepares the expression for out (cn_epilogue_begin), offers
 * it to the head's kernel on the calling thread (cn_epilogue_offer) and
 * runs the kernel. A kernel that writes out's elements itself may take the
 * offer (cn_epilogue_take); it then owes every element of out exactly one
 * cn_epilogue_apply, after that element's final value is written, from any
 * of its threads. When no kernel takes it, the program runs the expression
 * over out afterwards, as before. Each element goes through the same ops in
 * the same order either way, so the bits are the same.
 *
 * What it saves is memory traffic, so it pays where outputs do not fit in
 * the caches: at batch 16 a convolution's output is tens of megabytes, and
 * the pass read it back from DRAM; a piece (one sample's output of a
 * product, a run of depthwise planes) is still in L2 or L3. At batch 1 on
 * a CPU with a 32 MB L3 it changed nothing measurable, and applied to
 * every block of the GEMM it was slower (a call has a fixed cost).
 * Expressions that only bound the value (ReLU, ReLU6) go the cheaper way
 * of cn_gemm_out (gemm.h) instead. */
#ifndef CN_CPU_EPILOGUE_H
#define CN_CPU_EPILOGUE_H

#include "../fused_expr.h"

typedef struct cn_epilogue cn_epilogue;

/* e over in (in[0] is out itself) into out, planned for pieces; NULL where
 * it cannot be (a mask or constant result, an expression the fused kernel
 * refuses, no memory): the error, if any, is cleared, since the program's
 * own pass then runs and reports it. */
cn_epilogue *cn_epilogue_begin(const cn_fused_expr *e, cn_tensor *const *in, cn_tensor *out);
/* Offer ep (or NULL: none) to the next kernel on this thread; returns the
 * offer it replaces. */
cn_epilogue *cn_epilogue_offer(cn_epilogue *ep);
/* The offer on this thread if it is for out (same data, dtype and number
 * of elements, out contiguous), now taken; else NULL. */
cn_epilogue *cn_epilogue_take(const cn_tensor *out);
/* The expression over out's elements [lo, hi) in flat order: on the
 * calling thread inside a parallel region, else split over the pool as the
 * program's pass would be. */
void cn_epilogue_apply(cn_epilogue *ep, int64_t lo, int64_t hi);
/* The block [i0, i1) x [j0, j1) of a row-major matrix laid in out with its
 * element (0, 0) at out's element base and rows ld elements apart. */
void cn_epilogue_block(cn_epilogue *ep, int64_t base, int64_t ld, int64_t i0, int64_t i1,
                       int64_t j0, int64_t j1);
bool cn_epilogue_taken(const cn_epilogue *ep);
/* Frees ep: CN_OK, or CN_ENOMEM after cn_fail when a piece could not get
 * its buffers (those elements are then wrong, so the step must fail). */
int cn_epilogue_end(cn_epilogue *ep);

/* Consecutive pieces of a kernel's output gathered into ranges of at least
 * CN_EPILOGUE_MIN elements before they are applied: a call has a fixed
 * cost, and pieces can be as small as a 7x7 plane. */
#define CN_EPILOGUE_MIN 4096
typedef struct cn_epilogue_runs {
    cn_epilogue *ep;
    int64_t lo, hi; /* the pending range, empty when lo == hi */
} cn_epilogue_runs;
/* Piece [lo, hi) is final: added to the pending range when it continues
 * it, else the pending range is applied and the piece starts the next. */
void cn_epilogue_piece(cn_epilogue_runs *r, int64_t lo, int64_t hi);
/* Apply what is pending. */
void cn_epilogue_flush(cn_epilogue_runs *r);

#endif
