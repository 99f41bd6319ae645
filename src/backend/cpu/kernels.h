/* The CPU backend's op kernels: the entries of its kernel table (kernels.c),
 * indexed by op id, with the seam's signature (cn_kernel_fn, backend.h).
 * Each family's entries live in the family's file here, next to the loops
 * they call; one function serves several ops where the ops differ only in
 * a kind (unary, binary, reductions, ...), picking it from the op id. The
 * op definitions (src/ops) check everything before a kernel runs. */
#ifndef CN_CPU_KERNELS_H
#define CN_CPU_KERNELS_H

#include "../backend.h"

/* Copy src (any strides, any dtype, broadcast to dst) into dst, both on the
 * CPU (copy.c): the backend's copy entry, parallel for large tensors. */
int cn_copy_strided(cn_tensor *dst, const cn_tensor *src);
/* A contiguous f32 copy of t (half inputs a native product cannot take),
 * or NULL after cn_fail. */
cn_tensor *cn_cpu_widened(const cn_tensor *t);

/* CN_OP_COUNT entries; NULL for the views (reshape, permute, slice,
 * expand), which only set strides. */
extern const cn_kernel_fn cn_cpu_kernels[CN_OP_COUNT];

/* shape.c (copy: contiguous and cast) */
int cn_cpu_k_copy(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                  cn_tensor *out);
int cn_cpu_k_slice_scatter(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                           cn_tensor *out);
int cn_cpu_k_full_like(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                       cn_tensor *out);

/* unary.c: every unary elementwise op, neg .. logical_not */
int cn_cpu_k_unary(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                   cn_tensor *out);

/* binary.c: add .. logical_xor; where */
int cn_cpu_k_binary(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out);
int cn_cpu_k_where(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                   cn_tensor *out);

/* reduce.c: sum, mean, prod, max, min, var, std, logsumexp, norm; argmax
 * and argmin */
int cn_cpu_k_reduce(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out);
int cn_cpu_k_arg(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                 cn_tensor *out);

/* linalg.c */
int cn_cpu_k_matmul(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out);

/* softmax.c: softmax, log_softmax; cumsum */
int cn_cpu_k_softmax(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                     cn_tensor *out);
int cn_cpu_k_cumsum(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out);

/* index.c (tri: tril and triu) */
int cn_cpu_k_concat(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out);
int cn_cpu_k_gather(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out);
int cn_cpu_k_index_select(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                          cn_tensor *out);
int cn_cpu_k_scatter_add(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                         cn_tensor *out);
int cn_cpu_k_pad(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                 cn_tensor *out);
int cn_cpu_k_one_hot(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                     cn_tensor *out);
int cn_cpu_k_tri(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                 cn_tensor *out);

/* conv.c */
int cn_cpu_k_conv2d(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out);
int cn_cpu_k_conv_transpose2d(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                              cn_tensor *out);
int cn_cpu_k_conv2d_weight_grad(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                                cn_tensor *out);

/* pool.c */
int cn_cpu_k_max_pool2d(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                        cn_tensor *out);
int cn_cpu_k_max_pool2d_backward(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                                 cn_tensor *out);
int cn_cpu_k_max_pool2d_indices(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                                cn_tensor *out);
int cn_cpu_k_avg_pool2d(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                        cn_tensor *out);
int cn_cpu_k_avg_pool2d_backward(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                                 cn_tensor *out);
int cn_cpu_k_adaptive_avg_pool2d(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                                 cn_tensor *out);
int cn_cpu_k_adaptive_avg_pool2d_backward(cn_op_id id, cn_tensor *const *in, int nin,
                                          const cn_attrs *a, cn_tensor *out);

/* rnn.c */
int cn_cpu_k_lstm_seq(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                      cn_tensor *out);
int cn_cpu_k_lstm_seq_backward(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                               cn_tensor *out);

/* attention.c: scaled_dot_product_attention and its backward op */
int cn_cpu_k_sdpa(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                  cn_tensor *out);
int cn_cpu_k_sdpa_backward(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                           cn_tensor *out);

/* rope.c: rotary position embeddings */
int cn_cpu_k_rope(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                  cn_tensor *out);
/* layer_norm.c: layer normalisation over the last axes */
int cn_cpu_k_layer_norm(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                        cn_tensor *out);

/* random.c */
int cn_cpu_k_send(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
int cn_cpu_k_recv(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
int cn_cpu_k_bernoulli(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                       cn_tensor *out);

/* ---- random draws (random.c) ----
 * Philox-4x32-10, one counter per element: element i of out is a function
 * of (key, counter + i) only, whatever the thread count. */

/* The backend table's random_fill: out contiguous on the CPU. UNIFORM and
 * NORMAL take a float dtype (U[p0, p1), exact in out's dtype and never p1;
 * N(p0, p1^2)); INT takes i32, i64 or u8 and integers [p0, p1), exact when
 * both are within +-2^53 (wider i64 ranges: cn_cpu_randint_fill). The
 * caller checked the dtype and the bounds; a violation here is an error. */
int cn_cpu_random_fill(cn_tensor *out, cn_random_kind kind, double p0, double p1, uint64_t key,
                       uint64_t counter);
/* Integers low + [0, range) into out (i32, i64 or u8, contiguous; range >=
 * 1): randint's draw, for bounds that doubles cannot hold too. */
int cn_cpu_randint_fill(cn_tensor *out, int64_t low, uint64_t range, uint64_t key,
                        uint64_t counter);
/* A random permutation of 0 .. n - 1 into out (i64, contiguous, n
 * elements): Fisher-Yates from the top, step i drawing from counter
 * counter + i (n counters reserved). */
int cn_cpu_randperm_fill(cn_tensor *out, uint64_t key, uint64_t counter);

#endif
