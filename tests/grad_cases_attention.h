/* Gradient cases for scaled dot-product attention (src/ops/attention.c):
 * the public function (the [..., L, Ev] view) with every kind of mask,
 * causal, broadcast batch axes and dropout, and the op itself, whose last
 * column (each row's logsumexp) and its gradient are checked too. Small
 * shapes: the numeric check costs two forward passes per input element in
 * each of five layouts. Masks are made inside the case (bool from a
 * comparison, so a case runs on any device), and the dropout case seeds the
 * generator on every call so each evaluation drops the same weights. */

static cn_tensor *gcf_sdpa(cn_tensor **x) {
    return cn_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0, false, 0);
}
/* A float mask [L, S], differentiated, shared by every batch index. */
static cn_tensor *gcf_sdpa_float_mask(cn_tensor **x) {
    return cn_scaled_dot_product_attention(x[0], x[1], x[2], x[3], 0, false, 0.7);
}
/* A bool mask from x[3] > 0 with query row 1 fully masked (its output and
 * gradients are zero). */
static cn_tensor *gcf_sdpa_bool_mask(cn_tensor **x) {
    int64_t L = cn_shape(x[0])[cn_ndim(x[0]) - 2];
    cn_tensor *rows = cn_reshape(cn_arange(0, (double)L, 1, CN_F64), CN_SHAPE(L, 1));
    cn_tensor *m =
        cn_logical_and(cn_gt(x[3], cn_scalar(CN_F64, 0)), cn_ne(rows, cn_scalar(CN_F64, 1)));
    return cn_scaled_dot_product_attention(x[0], x[1], x[2], m, 0, false, 0);
}
static cn_tensor *gcf_sdpa_causal(cn_tensor **x) {
    return cn_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0, true, 0);
}
static cn_tensor *gcf_sdpa_dropout(cn_tensor **x) {
    cn_manual_seed(11);
    return cn_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0.3, false, 0);
}
/* The op itself: the output and the logsumexp column. */
static cn_tensor *gcf_sdpa_op(cn_tensor **x) {
    cn_attrs a = {.i = {0, 1}, .f = {0.5}};
    return cn_op_apply(CN_OP_scaled_dot_product_attention, x, 4, &a);
}
static cn_tensor *gcf_sdpa_op_causal(cn_tensor **x) {
    cn_attrs a = {.i = {1}};
    return cn_op_apply(CN_OP_scaled_dot_product_attention, x, 3, &a);
}

/* Rotary embeddings (src/ops/rope.c): the default half-split pairing on
 * [B, H, T, D]; interleaved pairs over part of the features, at an offset,
 * with another base; the inverse rotation on a rank-3 input. */
static cn_tensor *gcf_rope(cn_tensor **x) { return cn_rope(x[0], NULL); }
static cn_tensor *gcf_rope_inter(cn_tensor **x) {
    cn_rope_opts o = {.offset = 5, .rotary_dim = 4, .base = 100, .interleaved = true};
    return cn_rope(x[0], &o);
}
static cn_tensor *gcf_rope_inverse(cn_tensor **x) {
    cn_rope_opts o = {.offset = 2, .rotary_dim = 2, .inverse = true};
    return cn_rope(x[0], &o);
}

static const grad_case grad_cases_attention[] = {
    {"rope", "half-split, [B, H, T, D]", 1, {{GC_SHAPE(2, 2, 3, 6), -1, 1}}, gcf_rope},
    {"rope",
     "interleaved, rotary_dim 4 of 6, offset 5, base 100",
     1,
     {{GC_SHAPE(2, 4, 6), -1, 1}},
     gcf_rope_inter},
    {"rope", "inverse, rotary_dim 2 of 4, offset 2", 1, {{GC_SHAPE(3, 5, 4), -1, 1}}, gcf_rope_inverse},
    {"scaled_dot_product_attention",
     "no mask, Ev != E",
     3,
     {{GC_SHAPE(2, 3, 4), -1, 1}, {GC_SHAPE(2, 5, 4), -1, 1}, {GC_SHAPE(2, 5, 3), -1, 1}},
     gcf_sdpa},
    {"scaled_dot_product_attention",
     "float mask [L, S], broadcast batch",
     4,
     {{GC_SHAPE(2, 1, 3, 2), -1, 1},
      {GC_SHAPE(3, 4, 2), -1, 1},
      {GC_SHAPE(1, 3, 4, 3), -1, 1},
      {GC_SHAPE(3, 4), -2, 2}},
     gcf_sdpa_float_mask},
    {"scaled_dot_product_attention",
     "bool mask, a fully masked row",
     4,
     {{GC_SHAPE(2, 4, 3), -1, 1},
      {GC_SHAPE(2, 5, 3), -1, 1},
      {GC_SHAPE(2, 5, 2), -1, 1},
      {GC_SHAPE(4, 5), -1, 1, .no_grad = true}},
     gcf_sdpa_bool_mask},
    {"scaled_dot_product_attention",
     "causal, L > S, broadcast k",
     3,
     {{GC_SHAPE(2, 5, 3), -1, 1}, {GC_SHAPE(1, 3, 3), -1, 1}, {GC_SHAPE(2, 3, 2), -1, 1}},
     gcf_sdpa_causal},
    {"scaled_dot_product_attention",
     "dropout 0.3 (seeded)",
     3,
     {{GC_SHAPE(2, 4, 3), -1, 1}, {GC_SHAPE(2, 6, 3), -1, 1}, {GC_SHAPE(2, 6, 2), -1, 1}},
     gcf_sdpa_dropout,
     .no_jvp = true},
    {"scaled_dot_product_attention",
     "op: output and logsumexp, float mask",
     4,
     {{GC_SHAPE(2, 3, 2), -1, 1},
      {GC_SHAPE(2, 4, 2), -1, 1},
      {GC_SHAPE(2, 4, 3), -1, 1},
      {GC_SHAPE(2, 1, 4), -1, 1}},
     gcf_sdpa_op},
    {"scaled_dot_product_attention",
     "op: causal, L < S",
     3,
     {{GC_SHAPE(3, 2), -1, 1}, {GC_SHAPE(5, 2), -1, 1}, {GC_SHAPE(5, 2), -1, 1}},
     gcf_sdpa_op_causal},
};
