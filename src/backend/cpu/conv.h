/* Convolution kernels on the CPU (NCHW, f32 and f64).
 *
 * Every kernel is stated for one convolution, y = conv2d(x, w): x is
 * [N, C, H, W], w is [O, C/groups, KH, KW], y is [N, O, OH, OW]. The three
 * products a network needs are
 *   fwd:   y  = conv2d(x, w) (+ bias over O)
 *   dgrad: x' = conv2d's input gradient given y' (= conv_transpose2d of y'
 *          with w), + bias over C (conv_transpose2d's bias)
 *   wgrad: w' = conv2d's weight gradient given x and y'.
 * conv_transpose2d is dgrad with the roles of the names swapped.
 *
 * Each has a fast path (im2col + GEMM by tiles of output pixels, parallel
 * over batch x group x tile; a direct kernel for depthwise convolutions,
 * conv_depthwise.c; or oneDNN where the build has it and it was measured
 * faster) and a reference path (plain loops in double, any
 * strides), the oracle of the tests. Inputs may have any strides; outputs
 * are contiguous and fully written. They return 0, or CN_ENOMEM after
 * cn_fail. */
#ifndef CN_CPU_CONV_H
#define CN_CPU_CONV_H

#include "../../core/core.h"

typedef struct cn_conv_geom {
    int64_t N, C, H, W;     /* x */
    int64_t O, KH, KW;      /* w: [O, C / groups, KH, KW] */
    int64_t OH, OW;         /* y */
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t groups;
} cn_conv_geom;

/* Which implementation the fast entry points use (tests and benchmarks). */
typedef enum cn_conv_impl {
    CN_CONV_AUTO = 0, /* measured choice per shape (see conv.c) */
    CN_CONV_REF,      /* reference loops */
    CN_CONV_GEMM,     /* im2col + GEMM */
    CN_CONV_DNNL,     /* oneDNN (falls back to GEMM without it) */
    CN_CONV_DEPTHWISE /* the direct depthwise kernel (GEMM where it does not apply) */
} cn_conv_impl;
/* Force an implementation (process-wide, not thread-safe: call it before
 * convolutions run). Returns the previous setting. */
cn_conv_impl cn_conv_set_impl(cn_conv_impl impl);
/* The implementation CN_CONV=name asks for ("auto", "ref", "gemm", "dnnl",
 * "depthwise"), or -1. */
int cn_conv_impl_from_name(const char *name);
/* Whether the build has oneDNN. */
bool cn_conv_have_dnnl(void);
/* Whether oneDNN multiplies product which (0 forward, 1 input gradient,
 * 2 weight gradient) of g with half (bf16, f16) inputs itself: autocast's
 * native path (conv.c); else those inputs are widened to f32. */
bool cn_conv_half_native(const cn_conv_geom *g, cn_dtype dt, int which);

/* dt is out's dtype (f32 or f64); every tensor has it. bias may be NULL.
 * (The op kernels, cn_cpu_k_conv2d and the others, also take autocast's
 * half inputs with an f32 output: conv.c, "autocast's native products".) */
int cn_cpu_conv2d_fwd(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *w,
                      const cn_tensor *bias, cn_tensor *y);
int cn_cpu_conv2d_dgrad(const cn_conv_geom *g, const cn_tensor *dy, const cn_tensor *w,
                        const cn_tensor *bias, cn_tensor *dx);
int cn_cpu_conv2d_wgrad(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *dy,
                        cn_tensor *dw);

/* Does conv2d with these attributes (the op's, after inference) and shapes
 * of x [N, C, H, W], w and y run its forward product on the built-in GEMM,
 * where a program's constant w is worth packing once (gemm.h)? */
bool cn_cpu_conv2d_fwd_packs(const cn_attrs *a, const int64_t *x, const int64_t *w,
                             const int64_t *y, cn_dtype dt);

/* Whether that product is made transposed, y^T = x^T w^T (a 1x1 kernel on a
 * small plane, conv.c), so that a pack of w is of the GEMM's B side. */
bool cn_cpu_conv2d_fwd_transposed(const cn_attrs *a, const int64_t *x, const int64_t *w,
                                  const int64_t *y, cn_dtype dt);

/* The same for conv2d's forward product on oneDNN, which reads its
 * weights in a format of its own: a pack of the program's constant w in
 * that format (gemm.h's opaque packs), which the product then uses; have
 * itself when it is still that (w not written since, the same geometry);
 * NULL where the product does not run on oneDNN, reads w as it is, or
 * there was no memory (the product then reorders w on each call). */
typedef struct cn_gemm_pack cn_gemm_pack;
cn_gemm_pack *cn_cpu_conv2d_fwd_dnnl_pack(const cn_attrs *a, const int64_t *x, const cn_tensor *w,
                                         const int64_t *y, bool bias,
                                         const cn_gemm_pack *have);

/* The reference loops. */
int cn_cpu_conv2d_fwd_ref(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *w,
                          const cn_tensor *bias, cn_tensor *y);
int cn_cpu_conv2d_dgrad_ref(const cn_conv_geom *g, const cn_tensor *dy, const cn_tensor *w,
                            const cn_tensor *bias, cn_tensor *dx);
int cn_cpu_conv2d_wgrad_ref(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *dy,
                            cn_tensor *dw);

/* The direct depthwise kernels (conv_depthwise.c), for the geometries
 * cn_dw_conv_takes accepts: one input channel per group and at most
 * CN_DW_MAX_MULT output channels per group. */
#define CN_DW_MAX_MULT 4
bool cn_dw_conv_takes(const cn_conv_geom *g);
int cn_dw_conv2d_fwd(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *w,
                     const cn_tensor *bias, cn_tensor *y);
int cn_dw_conv2d_dgrad(const cn_conv_geom *g, const cn_tensor *dy, const cn_tensor *w,
                       const cn_tensor *bias, cn_tensor *dx);
int cn_dw_conv2d_wgrad(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *dy,
                       cn_tensor *dw);

/* Shared by the kernels' files. */
static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
/* ceil(a / b) for b > 0 and any a. */
static inline int64_t ceil_div(int64_t a, int64_t b) {
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}
/* t's data, contiguous: *own is set (to release) when a copy was made;
 * NULL for t NULL or out of memory. */
const char *cn_conv_dense(const cn_tensor *t, cn_tensor **own);
/* cn_fail's CN_ENOMEM naming the product (what) and its geometry. */
int cn_conv_oom(const char *what, const cn_conv_geom *g);

#endif
