/* The LSTM sequence kernels (the ops are in src/ops/rnn.c): a whole layer
 * direction per call, one GEMM and one fused pointwise pass per time step,
 * f32 and f64. Inputs may have any strides; outputs are contiguous and
 * fully written.
 *
 * Layouts (H the hidden size, gates in PyTorch's order i, f, g, o):
 *   gx [T, N, 4H]  each step's input projection, both biases included
 *   w  [4H, H]     weight_hh
 *   y  [T, N, 6H]  per step h, c and the activated gates i, f, g, o
 *                  (what the backward pass reads; nothing is recomputed
 *                  but tanh(c)). */
#ifndef CN_CPU_RNN_H
#define CN_CPU_RNN_H

#include "../../core/core.h"

/* y from gx, w and the initial state h0, c0 [N, H] (either NULL: zeros).
 * reverse: the steps run from T - 1 down to 0 (y stays indexed by t). */
int cn_cpu_lstm_seq(const cn_tensor *gx, const cn_tensor *w, const cn_tensor *h0,
                    const cn_tensor *c0, bool reverse, cn_tensor *y);

/* The backward recurrence: from y, its gradient dy, w and c0 (NULL:
 * zeros), out [T, N, 4H] gets the gradients of the gates' pre-activations
 * (which are gx's); with state_grads, out is [T + 1, N, 4H] and row T
 * holds (dh0, dc0, 0, 0). dy holds the first dy_parts (1 to 6) of y's six
 * parts, [T, N, dy_parts H]; the others are zeros. */
int cn_cpu_lstm_seq_backward(const cn_tensor *y, const cn_tensor *dy, int dy_parts,
                             const cn_tensor *w, const cn_tensor *c0, bool reverse,
                             bool state_grads, cn_tensor *out);

#endif
