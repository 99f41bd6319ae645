/* The shared kernels by op id: the `kernels` of the OpenCL and CUDA
 * backends' tables (a backend with a vendor library for an op puts its own
 * entry over this one). To add a kernel: declare it in gpu.h (or
 * gpu_kernels.h) and add one line below. */
#include "gpu.h"
#include "gpu_kernels.h"

const cn_kernel_fn cn_gpu_kernels[CN_OP_COUNT] = {
    /* copies (gpu_elementwise.c) */
    [CN_OP_contiguous] = cn_gpu_k_copy,
    [CN_OP_cast] = cn_gpu_k_copy,
    [CN_OP_full_like] = cn_gpu_k_full_like,

    /* unary (gpu_elementwise.c) */
    [CN_OP_neg] = cn_gpu_k_unary,
    [CN_OP_abs] = cn_gpu_k_unary,
    [CN_OP_sign] = cn_gpu_k_unary,
    [CN_OP_exp] = cn_gpu_k_unary,
    [CN_OP_log] = cn_gpu_k_unary,
    [CN_OP_log1p] = cn_gpu_k_unary,
    [CN_OP_expm1] = cn_gpu_k_unary,
    [CN_OP_sqrt] = cn_gpu_k_unary,
    [CN_OP_rsqrt] = cn_gpu_k_unary,
    [CN_OP_square] = cn_gpu_k_unary,
    [CN_OP_reciprocal] = cn_gpu_k_unary,
    [CN_OP_sin] = cn_gpu_k_unary,
    [CN_OP_cos] = cn_gpu_k_unary,
    [CN_OP_tanh] = cn_gpu_k_unary,
    [CN_OP_sigmoid] = cn_gpu_k_unary,
    [CN_OP_relu] = cn_gpu_k_unary,
    [CN_OP_leaky_relu] = cn_gpu_k_unary,
    [CN_OP_elu] = cn_gpu_k_unary,
    [CN_OP_gelu] = cn_gpu_k_unary,
    [CN_OP_silu] = cn_gpu_k_unary,
    [CN_OP_softplus] = cn_gpu_k_unary,
    [CN_OP_erf] = cn_gpu_k_unary,
    [CN_OP_floor] = cn_gpu_k_unary,
    [CN_OP_ceil] = cn_gpu_k_unary,
    [CN_OP_round] = cn_gpu_k_unary,
    [CN_OP_clamp] = cn_gpu_k_unary,
    [CN_OP_logical_not] = cn_gpu_k_unary,

    /* binary and where (gpu_elementwise.c) */
    [CN_OP_add] = cn_gpu_k_binary,
    [CN_OP_sub] = cn_gpu_k_binary,
    [CN_OP_mul] = cn_gpu_k_binary,
    [CN_OP_div] = cn_gpu_k_binary,
    [CN_OP_pow] = cn_gpu_k_binary,
    [CN_OP_maximum] = cn_gpu_k_binary,
    [CN_OP_minimum] = cn_gpu_k_binary,
    [CN_OP_eq] = cn_gpu_k_binary,
    [CN_OP_ne] = cn_gpu_k_binary,
    [CN_OP_lt] = cn_gpu_k_binary,
    [CN_OP_le] = cn_gpu_k_binary,
    [CN_OP_gt] = cn_gpu_k_binary,
    [CN_OP_ge] = cn_gpu_k_binary,
    [CN_OP_logical_and] = cn_gpu_k_binary,
    [CN_OP_logical_or] = cn_gpu_k_binary,
    [CN_OP_logical_xor] = cn_gpu_k_binary,
    [CN_OP_where] = cn_gpu_k_where,

    /* reductions (gpu_reduce.c) */
    [CN_OP_sum] = cn_gpu_k_reduce,
    [CN_OP_sum_to] = cn_gpu_k_reduce,
    [CN_OP_mean] = cn_gpu_k_reduce,
    [CN_OP_prod] = cn_gpu_k_reduce,
    [CN_OP_max] = cn_gpu_k_reduce,
    [CN_OP_min] = cn_gpu_k_reduce,
    [CN_OP_var] = cn_gpu_k_reduce,
    [CN_OP_std] = cn_gpu_k_reduce,
    [CN_OP_logsumexp] = cn_gpu_k_reduce,
    [CN_OP_norm] = cn_gpu_k_reduce,
    [CN_OP_argmax] = cn_gpu_k_reduce,
    [CN_OP_argmin] = cn_gpu_k_reduce,

    /* random (gpu_random.c) */
    [CN_OP_bernoulli] = cn_gpu_k_bernoulli,

    /* linear algebra, convolution, pooling, softmax, indexing, recurrent
     * layers (gpu_linalg.c, gpu_conv.c, gpu_pool.c, gpu_softmax.c,
     * gpu_index.c, gpu_rnn.c) */
    [CN_OP_matmul] = cn_gpu_k_matmul,
    [CN_OP_conv2d] = cn_gpu_k_conv,
    [CN_OP_conv_transpose2d] = cn_gpu_k_conv,
    [CN_OP_conv2d_weight_grad] = cn_gpu_k_conv,
    [CN_OP_max_pool2d] = cn_gpu_k_pool,
    [CN_OP_max_pool2d_backward] = cn_gpu_k_pool,
    [CN_OP_max_pool2d_indices] = cn_gpu_k_pool,
    [CN_OP_avg_pool2d] = cn_gpu_k_pool,
    [CN_OP_avg_pool2d_backward] = cn_gpu_k_pool,
    [CN_OP_adaptive_avg_pool2d] = cn_gpu_k_pool,
    [CN_OP_adaptive_avg_pool2d_backward] = cn_gpu_k_pool,
    [CN_OP_softmax] = cn_gpu_k_softmax,
    [CN_OP_log_softmax] = cn_gpu_k_softmax,
    [CN_OP_cumsum] = cn_gpu_k_softmax,
    [CN_OP_concat] = cn_gpu_k_index,
    [CN_OP_gather] = cn_gpu_k_index,
    [CN_OP_index_select] = cn_gpu_k_index,
    [CN_OP_scatter_add] = cn_gpu_k_index,
    [CN_OP_pad] = cn_gpu_k_index,
    [CN_OP_one_hot] = cn_gpu_k_index,
    [CN_OP_tril] = cn_gpu_k_index,
    [CN_OP_triu] = cn_gpu_k_index,
    [CN_OP_slice_scatter] = cn_gpu_k_index,
    [CN_OP_lstm_seq] = cn_gpu_k_rnn,
    [CN_OP_lstm_seq_backward] = cn_gpu_k_rnn,

    /* attention, one work item per row (gpu_attention.c) */
    [CN_OP_scaled_dot_product_attention] = cn_gpu_k_attention,
    [CN_OP_scaled_dot_product_attention_backward] = cn_gpu_k_attention,

    /* rotary position embeddings, one work item per element (gpu_rope.c) */
    [CN_OP_rope] = cn_gpu_k_rope,
};
