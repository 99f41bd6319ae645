/* Max pooling over 2x2 windows with stride 2 (no padding, no dilation, no
 * window cut by ceil_mode), f32: the pooling of most CNNs, the CNN
 * benchmark's included. Used by pool.c where it applies. */
#ifndef CN_CPU_POOL_MAX2X2_H
#define CN_CPU_POOL_MAX2X2_H

#include "pool.h"

/* Whether the kernels below take geometry g for an input whose column
 * stride is xw (and, for the backward pass, dy's column stride gw; pass 1
 * for the forward pass). */
bool cn_max2x2_applies(const cn_pool_geom *g, int64_t xw, int64_t gw);

/* Planes [b, e) of x (plane p at x + (p / C) xn + (p % C) xc, rows xh
 * apart, columns adjacent): y (contiguous, may be NULL) gets the window
 * maxima, idx (contiguous, may be NULL) their flat positions ih W + iw,
 * the first maximum of each window in row-major order with a NaN taking
 * over, as PyTorch's kernel picks them. */
void cn_max2x2_fwd_f32(const cn_pool_geom *g, const float *x, int64_t xn, int64_t xc, int64_t xh,
                       int64_t b, int64_t e, float *y, int64_t *idx);
/* dx (contiguous, every element written) for planes [b, e): dy[n, c, oh,
 * ow] (strides gn, gc, gh; columns adjacent) at its window's maximum of x,
 * zeros elsewhere. */
void cn_max2x2_bwd_f32(const cn_pool_geom *g, const float *x, int64_t xn, int64_t xc, int64_t xh,
                       const float *dy, int64_t gn, int64_t gc, int64_t gh, int64_t b, int64_t e,
                       float *dx);

#endif
