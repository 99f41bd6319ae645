/* What an op application costs, for the profiler (cost.c). */
#ifndef CN_OPS_COST_H
#define CN_OPS_COST_H

#include "op.h"

/* Bytes a tensor's distinct elements take (a broadcast axis, stride 0,
 * counts once): what a kernel reads of it. */
double cn_tensor_bytes_read(const cn_tensor *t);

/* FLOPs and bytes of op id on these inputs giving out: exact for matmul,
 * the convolutions, attention (counted dense, causal or not) and the LSTM's
 * products; one per output element for elementwise ops, one per input
 * element for reductions, softmax, pooling and the rest that compute; 0
 * for copies, indexing and transfers. Bytes: the inputs' distinct elements
 * plus the output. */
void cn_op_cost(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                const cn_tensor *out, double *flops, double *bytes);

#endif
