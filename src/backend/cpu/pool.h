/* Pooling kernels on the CPU (NCHW, f32 and f64): direct loops, one plane
 * (n, c) per task across the pool. Inputs may have any strides; outputs are
 * contiguous and fully written. */
#ifndef CN_CPU_POOL_H
#define CN_CPU_POOL_H

#include "../../core/core.h"

/* x [N, C, H, W], y [N, C, OH, OW]. */
typedef struct cn_pool_geom {
    int64_t N, C, H, W, OH, OW;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    bool count_include_pad;
    int64_t divisor; /* avg: > 0 overrides the divisor */
} cn_pool_geom;

/* y = the window maxima and idx (i64) = their flat positions ih * W + iw in
 * the plane, the first maximum of each window (NaN wins); either may be
 * NULL. */
int cn_cpu_max_pool2d(const cn_pool_geom *g, const cn_tensor *x, cn_tensor *y, cn_tensor *idx);
/* dx (N, C, H, W) = dy (N, C, OH, OW) added at each window's maximum of x. */
int cn_cpu_max_pool2d_backward(const cn_pool_geom *g, const cn_tensor *x, const cn_tensor *dy,
                               cn_tensor *dx);
int cn_cpu_avg_pool2d(const cn_pool_geom *g, const cn_tensor *x, cn_tensor *y);
/* dx (N, C, H, W) from dy (N, C, OH, OW): the adjoint of avg_pool2d. */
int cn_cpu_avg_pool2d_backward(const cn_pool_geom *g, const cn_tensor *dy, cn_tensor *dx);
/* Adaptive: window i covers [floor(i H / OH), ceil((i + 1) H / OH)). */
int cn_cpu_adaptive_avg_pool2d(const cn_pool_geom *g, const cn_tensor *x, cn_tensor *y);
int cn_cpu_adaptive_avg_pool2d_backward(const cn_pool_geom *g, const cn_tensor *dy,
                                        cn_tensor *dx);

#endif
