/* The CPU backend's kernel table: one entry per op id (src/core/op_list.h).
 * The views (reshape, permute, slice, expand) have none: they only set
 * strides; nor has `to`, a transfer. An op missing here has a NULL entry:
 * no CPU kernel. */
#include "kernels.h"

const cn_kernel_fn cn_cpu_kernels[CN_OP_COUNT] = {
    /* views and copies (shape.c) */
    [CN_OP_reshape] = NULL,
    [CN_OP_permute] = NULL,
    [CN_OP_slice] = NULL,
    [CN_OP_expand] = NULL,
    [CN_OP_contiguous] = cn_cpu_k_copy,
    [CN_OP_cast] = cn_cpu_k_copy,
    [CN_OP_slice_scatter] = cn_cpu_k_slice_scatter,
    [CN_OP_full_like] = cn_cpu_k_full_like,

    /* unary elementwise (unary.c) */
    [CN_OP_neg] = cn_cpu_k_unary,
    [CN_OP_abs] = cn_cpu_k_unary,
    [CN_OP_sign] = cn_cpu_k_unary,
    [CN_OP_exp] = cn_cpu_k_unary,
    [CN_OP_log] = cn_cpu_k_unary,
    [CN_OP_log1p] = cn_cpu_k_unary,
    [CN_OP_expm1] = cn_cpu_k_unary,
    [CN_OP_sqrt] = cn_cpu_k_unary,
    [CN_OP_rsqrt] = cn_cpu_k_unary,
    [CN_OP_square] = cn_cpu_k_unary,
    [CN_OP_reciprocal] = cn_cpu_k_unary,
    [CN_OP_sin] = cn_cpu_k_unary,
    [CN_OP_cos] = cn_cpu_k_unary,
    [CN_OP_tanh] = cn_cpu_k_unary,
    [CN_OP_sigmoid] = cn_cpu_k_unary,
    [CN_OP_relu] = cn_cpu_k_unary,
    [CN_OP_leaky_relu] = cn_cpu_k_unary,
    [CN_OP_elu] = cn_cpu_k_unary,
    [CN_OP_gelu] = cn_cpu_k_unary,
    [CN_OP_silu] = cn_cpu_k_unary,
    [CN_OP_softplus] = cn_cpu_k_unary,
    [CN_OP_erf] = cn_cpu_k_unary,
    [CN_OP_floor] = cn_cpu_k_unary,
    [CN_OP_ceil] = cn_cpu_k_unary,
    [CN_OP_round] = cn_cpu_k_unary,
    [CN_OP_clamp] = cn_cpu_k_unary,
    [CN_OP_logical_not] = cn_cpu_k_unary,

    /* binary elementwise (binary.c) */
    [CN_OP_add] = cn_cpu_k_binary,
    [CN_OP_sub] = cn_cpu_k_binary,
    [CN_OP_mul] = cn_cpu_k_binary,
    [CN_OP_div] = cn_cpu_k_binary,
    [CN_OP_pow] = cn_cpu_k_binary,
    [CN_OP_maximum] = cn_cpu_k_binary,
    [CN_OP_minimum] = cn_cpu_k_binary,
    [CN_OP_eq] = cn_cpu_k_binary,
    [CN_OP_ne] = cn_cpu_k_binary,
    [CN_OP_lt] = cn_cpu_k_binary,
    [CN_OP_le] = cn_cpu_k_binary,
    [CN_OP_gt] = cn_cpu_k_binary,
    [CN_OP_ge] = cn_cpu_k_binary,
    [CN_OP_logical_and] = cn_cpu_k_binary,
    [CN_OP_logical_or] = cn_cpu_k_binary,
    [CN_OP_logical_xor] = cn_cpu_k_binary,
    [CN_OP_where] = cn_cpu_k_where,

    /* reductions (reduce.c) */
    [CN_OP_sum] = cn_cpu_k_reduce,
    [CN_OP_sum_to] = cn_cpu_k_reduce,
    [CN_OP_mean] = cn_cpu_k_reduce,
    [CN_OP_prod] = cn_cpu_k_reduce,
    [CN_OP_max] = cn_cpu_k_reduce,
    [CN_OP_min] = cn_cpu_k_reduce,
    [CN_OP_var] = cn_cpu_k_reduce,
    [CN_OP_std] = cn_cpu_k_reduce,
    [CN_OP_logsumexp] = cn_cpu_k_reduce,
    [CN_OP_norm] = cn_cpu_k_reduce,
    [CN_OP_argmax] = cn_cpu_k_arg,
    [CN_OP_argmin] = cn_cpu_k_arg,

    /* linear algebra (linalg.c) */
    [CN_OP_matmul] = cn_cpu_k_matmul,

    /* softmax, joining, indexing, padding (softmax.c, index.c) */
    [CN_OP_softmax] = cn_cpu_k_softmax,
    [CN_OP_log_softmax] = cn_cpu_k_softmax,
    [CN_OP_concat] = cn_cpu_k_concat,
    [CN_OP_gather] = cn_cpu_k_gather,
    [CN_OP_index_select] = cn_cpu_k_index_select,
    [CN_OP_scatter_add] = cn_cpu_k_scatter_add,
    [CN_OP_pad] = cn_cpu_k_pad,
    [CN_OP_one_hot] = cn_cpu_k_one_hot,
    [CN_OP_cumsum] = cn_cpu_k_cumsum,
    [CN_OP_tril] = cn_cpu_k_tri,
    [CN_OP_triu] = cn_cpu_k_tri,

    /* convolution and pooling (conv.c, pool.c) */
    [CN_OP_conv2d] = cn_cpu_k_conv2d,
    [CN_OP_conv_transpose2d] = cn_cpu_k_conv_transpose2d,
    [CN_OP_conv2d_weight_grad] = cn_cpu_k_conv2d_weight_grad,
    [CN_OP_max_pool2d] = cn_cpu_k_max_pool2d,
    [CN_OP_max_pool2d_backward] = cn_cpu_k_max_pool2d_backward,
    [CN_OP_max_pool2d_indices] = cn_cpu_k_max_pool2d_indices,
    [CN_OP_avg_pool2d] = cn_cpu_k_avg_pool2d,
    [CN_OP_avg_pool2d_backward] = cn_cpu_k_avg_pool2d_backward,
    [CN_OP_adaptive_avg_pool2d] = cn_cpu_k_adaptive_avg_pool2d,
    [CN_OP_adaptive_avg_pool2d_backward] = cn_cpu_k_adaptive_avg_pool2d_backward,

    /* recurrent layers (rnn.c) */
    [CN_OP_lstm_seq] = cn_cpu_k_lstm_seq,
    [CN_OP_lstm_seq_backward] = cn_cpu_k_lstm_seq_backward,

    /* attention (attention.c) */
    [CN_OP_scaled_dot_product_attention] = cn_cpu_k_sdpa,
    [CN_OP_scaled_dot_product_attention_backward] = cn_cpu_k_sdpa_backward,

    /* rotary position embeddings (rope.c) */
    [CN_OP_rope] = cn_cpu_k_rope,

    /* normalisation (layer_norm.c) */
    [CN_OP_layer_norm] = cn_cpu_k_layer_norm,

    /* moving between devices: a transfer (cn_transfer), no kernel */
    [CN_OP_to] = NULL,

    /* random (random.c) */
    [CN_OP_bernoulli] = cn_cpu_k_bernoulli,

    /* messages between ranks (comm.c) */
    [CN_OP_send] = cn_cpu_k_send,
    [CN_OP_recv] = cn_cpu_k_recv,
};
