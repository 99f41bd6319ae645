/* int8 inference's ops (quant.c), for the quantised modules (src/nn/
 * quantize.c). Results go to the current scope, like public functions. */
#ifndef CN_OPS_QUANT_H
#define CN_OPS_QUANT_H

#include "op.h"

/* A quantised module's weights in the int8 GEMM's layout (the op
 * int8_pack), made on first use and again when the weights change: while
 * src is the module's weight tensor and its storage's version is version.
 * Zeroed: empty. */
typedef struct cn_q_pack {
    cn_tensor *src, *packed;
    uint32_t version;
} cn_q_pack;
void cn_q_pack_clear(cn_q_pack *p);

/* x f32 [..., K] times w^T plus bias, w i8 [N, K] with scale [N] per
 * row, bias f32 [N] or NULL: x quantised per row at run time, int32 sums,
 * f32 [..., N]. pack may be NULL (the weights are packed for this call). */
cn_tensor *cn_q_linear_int8(cn_tensor *x, cn_tensor *w, cn_tensor *scale, cn_tensor *bias,
                            cn_q_pack *pack);
/* conv2d of x f32 [B, C, H, W] with w i8 [O, C, kH, kW] (one group, no
 * dilation), scale [O] and bias [O] or NULL: each image quantised at run
 * time, int32 sums, f32 output. */
cn_tensor *cn_q_conv2d_int8(cn_tensor *x, cn_tensor *w, cn_tensor *scale, cn_tensor *bias,
                            const cn_conv_opts *o, cn_q_pack *pack);

#endif
