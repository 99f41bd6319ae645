/* Every op, once. Include with CN_OP(name) defined. The order only sets
 * the enum values, which are never serialised. Each name has a definition
 * `const cn_op_def cn_opdef_<name>` in its family's file under src/ops/. */

/* views and copies (shape.c) */
CN_OP(reshape)
CN_OP(permute)
CN_OP(slice)
CN_OP(expand)
CN_OP(contiguous)
CN_OP(cast)
CN_OP(slice_scatter)
CN_OP(full_like)

/* messages between the ranks of an MPI job (comm.c) */
CN_OP(send)
CN_OP(recv)

/* unary elementwise (unary.c) */
CN_OP(neg)
CN_OP(abs)
CN_OP(sign)
CN_OP(exp)
CN_OP(log)
CN_OP(log1p)
CN_OP(expm1)
CN_OP(sqrt)
CN_OP(rsqrt)
CN_OP(square)
CN_OP(reciprocal)
CN_OP(sin)
CN_OP(cos)
CN_OP(tanh)
CN_OP(sigmoid)
CN_OP(relu)
CN_OP(leaky_relu)
CN_OP(elu)
CN_OP(gelu)
CN_OP(silu)
CN_OP(softplus)
CN_OP(erf)
CN_OP(floor)
CN_OP(ceil)
CN_OP(round)
CN_OP(clamp)
CN_OP(logical_not)

/* binary elementwise with broadcasting (binary.c) */
CN_OP(add)
CN_OP(sub)
CN_OP(mul)
CN_OP(div)
CN_OP(pow)
CN_OP(maximum)
CN_OP(minimum)
CN_OP(eq)
CN_OP(ne)
CN_OP(lt)
CN_OP(le)
CN_OP(gt)
CN_OP(ge)
CN_OP(logical_and)
CN_OP(logical_or)
CN_OP(logical_xor)
CN_OP(where)

/* reductions (reduce.c) */
CN_OP(sum)
CN_OP(mean)
CN_OP(prod)
CN_OP(max)
CN_OP(min)
CN_OP(var)
CN_OP(std)
CN_OP(logsumexp)
CN_OP(norm)
CN_OP(argmax)
CN_OP(argmin)
CN_OP(sum_to)

/* linear algebra (linalg.c) */
CN_OP(matmul)

/* softmax, joining, indexing, padding (index.c, softmax.c) */
CN_OP(softmax)
CN_OP(log_softmax)
CN_OP(concat)
CN_OP(gather)
CN_OP(index_select)
CN_OP(scatter_add)
CN_OP(pad)
CN_OP(one_hot)
CN_OP(cumsum)
CN_OP(tril)
CN_OP(triu)

/* convolution and pooling, NCHW (conv.c, pool.c) */
CN_OP(conv2d)
CN_OP(conv_transpose2d)
CN_OP(conv2d_weight_grad)
CN_OP(max_pool2d)
CN_OP(max_pool2d_backward)
CN_OP(max_pool2d_indices)
CN_OP(avg_pool2d)
CN_OP(avg_pool2d_backward)
CN_OP(adaptive_avg_pool2d)
CN_OP(adaptive_avg_pool2d_backward)

/* recurrent layers, one direction over a whole sequence (rnn.c) */
CN_OP(lstm_seq)
CN_OP(lstm_seq_backward)

/* fused scaled dot-product attention and its gradient (attention.c) */
CN_OP(scaled_dot_product_attention)
CN_OP(scaled_dot_product_attention_backward)

/* rotary position embeddings (rope.c) */
CN_OP(rope)

/* normalisation (layer_norm.c) */
CN_OP(layer_norm)

/* moving between devices (device.c) */
CN_OP(to)

/* random (random.c) */
CN_OP(bernoulli)
