/* FLOPs and bytes per op application, for the profiler. Computed from the
 * shapes after the op ran, only while profiling, so nothing here is on the
 * path of an op when the profiler is off. */
#include "cost.h"

static double numel_d(const cn_tensor *t) { return t ? (double)cn_numel(t) : 0; }

double cn_tensor_bytes_read(const cn_tensor *t) {
    if (!t) return 0;
    double n = 1;
    for (int d = 0; d < t->ndim; d++)
        if (t->strides[d] != 0 || t->shape[d] == 0) n *= (double)t->shape[d];
    return n * (double)cn_dsize((cn_dtype)t->dtype);
}

static int64_t dim_from_end(const cn_tensor *t, int k) {
    return t && t->ndim >= k ? t->shape[t->ndim - k] : 1;
}

/* Multiply-adds of one output element of a convolution: the weight's
 * elements per output channel (in/groups x kh x kw). */
static double per_channel(const cn_tensor *w) {
    return w && w->ndim == 4 && w->shape[0] > 0 ? numel_d(w) / (double)w->shape[0] : 0;
}

static double sdpa_flops(cn_tensor *const *in, int nin, int part, bool backward) {
    if (nin < 3) return 0;
    double L = (double)dim_from_end(in[0], 2), E = (double)dim_from_end(in[0], 1);
    double S = (double)dim_from_end(in[1], 2), Ev = (double)dim_from_end(in[2], 1);
    double B = L * E > 0 ? numel_d(in[0]) / (L * E) : 0;
    double blS = 2 * B * L * S;
    if (!backward) return blS * (E + Ev) + 1.5 * blS; /* q k^T, p v, the softmax */
    /* The backward recomputes q k^T, then dp = dy v^T and what each part
     * returns: dq = ds k; dk = ds^T q, dv = p^T dy. */
    switch (part) {
    case 0:
    case 1: return blS * (2 * E + Ev);
    case 2: return blS * (2 * E + 2 * Ev);
    default: return blS * (3 * E + 2 * Ev);
    }
}

void cn_op_cost(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                const cn_tensor *out, double *flops, double *bytes) {
    double b = cn_tensor_bytes_read(out);
    for (int i = 0; i < nin; i++) b += cn_tensor_bytes_read(in[i]);
    *bytes = b;
    const cn_op_def *op = cn_ops[id];
    double f = 0, nout = numel_d(out), nin0 = nin > 0 ? numel_d(in[0]) : 0;
    switch (id) {
    case CN_OP_matmul: /* [.., M, K] x [.., K, N]: K multiply-adds per output */
        f = 2 * nout * (double)dim_from_end(in[0], 1);
        break;
    case CN_OP_conv2d:
        f = nin >= 2 ? 2 * nout * per_channel(in[1]) + (nin >= 3 ? nout : 0) : 0;
        break;
    case CN_OP_conv_transpose2d: /* the forward conv's products, from its output (in[0]) */
        f = nin >= 2 ? 2 * nin0 * per_channel(in[1]) + (nin >= 3 ? nout : 0) : 0;
        break;
    case CN_OP_conv2d_weight_grad: /* x, dy: each dy element meets a weight's channel */
        f = nin >= 2 ? 2 * numel_d(in[1]) * per_channel(out) : 0;
        break;
    case CN_OP_lstm_seq: /* per step gates += h w_hh^T, then the cell's elementwise work */
        f = nin >= 2 ? 2 * nin0 * (double)dim_from_end(in[1], 1) + 3 * nin0 : 0;
        break;
    case CN_OP_lstm_seq_backward: /* the recurrence dh = dgates w_hh */
        f = nin >= 3 ? 2 * nout * (double)dim_from_end(in[2], 1) + 3 * nout : 0;
        break;
    case CN_OP_scaled_dot_product_attention:
        f = sdpa_flops(in, nin, 0, false);
        break;
    case CN_OP_scaled_dot_product_attention_backward:
        f = sdpa_flops(in, nin, a ? (int)a->i[2] : 3, true);
        break;
    case CN_OP_layer_norm: /* mean, squared deviations, then sub, mul, mul, add */
        f = 7 * nin0;
        break;
    case CN_OP_reshape: case CN_OP_permute: case CN_OP_slice: case CN_OP_expand:
    case CN_OP_contiguous: case CN_OP_cast: case CN_OP_slice_scatter: case CN_OP_full_like:
    case CN_OP_send: case CN_OP_recv: case CN_OP_concat: case CN_OP_gather:
    case CN_OP_index_select: case CN_OP_pad: case CN_OP_one_hot: case CN_OP_tril:
    case CN_OP_triu: case CN_OP_to: case CN_OP_max_pool2d_indices:
        f = 0; /* data movement */
        break;
    case CN_OP_sum: case CN_OP_mean: case CN_OP_prod: case CN_OP_max: case CN_OP_min:
    case CN_OP_var: case CN_OP_std: case CN_OP_logsumexp: case CN_OP_norm: case CN_OP_argmax:
    case CN_OP_argmin: case CN_OP_softmax: case CN_OP_log_softmax: case CN_OP_cumsum:
    case CN_OP_scatter_add:
        f = nin0;
        break;
    default:
        /* Elementwise ops: one per output element; pooling and the rest:
         * the larger side. */
        f = (op->flags & CN_OPF_ELEMENTWISE) || nout >= nin0 ? nout : nin0;
        break;
    }
    *flops = f;
}
