/* Gradient cases for reductions (src/ops/reduce.c) and for softmax,
 * log_softmax and cumsum (src/ops/softmax.c): several axis sets, negative
 * axes, keepdim and not, full reductions, size-1 reduced axes, rank 0.
 * Random inputs have no ties and no zeros, so max, min and the norms are
 * smooth at them; the conventions at ties and zeros are tested against
 * PyTorch in test_grad_reduce.c. */

#define GCR_AXES(...) (int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))

/* sum */
static cn_tensor *gcr_sum_1(cn_tensor **x) { return cn_sum(x[0], GCR_AXES(1), false); }
static cn_tensor *gcr_sum_02k(cn_tensor **x) { return cn_sum(x[0], GCR_AXES(0, 2), true); }
static cn_tensor *gcr_sum_all(cn_tensor **x) { return cn_sum(x[0], NULL, 0, false); }
static cn_tensor *gcr_sum_neg(cn_tensor **x) { return cn_sum(x[0], GCR_AXES(-1, -3), false); }
static cn_tensor *gcr_sum_allk(cn_tensor **x) { return cn_sum(x[0], NULL, 0, true); }
/* mean */
static cn_tensor *gcr_mean_1(cn_tensor **x) { return cn_mean(x[0], GCR_AXES(1), false); }
static cn_tensor *gcr_mean_neg(cn_tensor **x) { return cn_mean(x[0], GCR_AXES(-1, 0), true); }
static cn_tensor *gcr_mean_all(cn_tensor **x) { return cn_mean(x[0], NULL, 0, false); }
/* prod */
static cn_tensor *gcr_prod_1(cn_tensor **x) { return cn_prod(x[0], GCR_AXES(1), false); }
static cn_tensor *gcr_prod_02k(cn_tensor **x) { return cn_prod(x[0], GCR_AXES(0, -1), true); }
static cn_tensor *gcr_prod_all(cn_tensor **x) { return cn_prod(x[0], NULL, 0, false); }
/* max, min */
static cn_tensor *gcr_max_1(cn_tensor **x) { return cn_max(x[0], GCR_AXES(1), false); }
static cn_tensor *gcr_max_02k(cn_tensor **x) { return cn_max(x[0], GCR_AXES(0, 2), true); }
static cn_tensor *gcr_max_all(cn_tensor **x) { return cn_max(x[0], NULL, 0, false); }
static cn_tensor *gcr_min_neg(cn_tensor **x) { return cn_min(x[0], GCR_AXES(-1), false); }
static cn_tensor *gcr_min_01k(cn_tensor **x) { return cn_min(x[0], GCR_AXES(0, 1), true); }
static cn_tensor *gcr_min_all(cn_tensor **x) { return cn_min(x[0], NULL, 0, true); }
/* var, std */
static cn_tensor *gcr_var_1(cn_tensor **x) { return cn_var(x[0], GCR_AXES(1), 1, false); }
static cn_tensor *gcr_var_c0k(cn_tensor **x) { return cn_var(x[0], GCR_AXES(0, -1), 0, true); }
static cn_tensor *gcr_var_all(cn_tensor **x) { return cn_var(x[0], NULL, 0, 2.5, false); }
static cn_tensor *gcr_std_1(cn_tensor **x) { return cn_std(x[0], GCR_AXES(-2), 1, false); }
static cn_tensor *gcr_std_c0k(cn_tensor **x) { return cn_std(x[0], GCR_AXES(0, 2), 0, true); }
static cn_tensor *gcr_std_all(cn_tensor **x) { return cn_std(x[0], NULL, 0, 0.5, false); }
/* logsumexp */
static cn_tensor *gcr_lse_1(cn_tensor **x) { return cn_logsumexp(x[0], GCR_AXES(1), false); }
static cn_tensor *gcr_lse_neg(cn_tensor **x) {
    return cn_logsumexp(x[0], GCR_AXES(-1, 0), true);
}
static cn_tensor *gcr_lse_all(cn_tensor **x) { return cn_logsumexp(x[0], NULL, 0, false); }
/* norm */
static cn_tensor *gcr_norm2_1(cn_tensor **x) { return cn_norm(x[0], 2, GCR_AXES(1), false); }
static cn_tensor *gcr_norm2_all(cn_tensor **x) { return cn_norm(x[0], 2, NULL, 0, false); }
static cn_tensor *gcr_norm1_k(cn_tensor **x) { return cn_norm(x[0], 1, GCR_AXES(-1), true); }
static cn_tensor *gcr_norm3(cn_tensor **x) { return cn_norm(x[0], 3, GCR_AXES(0, 2), false); }
static cn_tensor *gcr_norm15(cn_tensor **x) { return cn_norm(x[0], 1.5, GCR_AXES(1), false); }
static cn_tensor *gcr_norm05(cn_tensor **x) { return cn_norm(x[0], 0.5, GCR_AXES(-1), false); }
static cn_tensor *gcr_norminf(cn_tensor **x) {
    return cn_norm(x[0], INFINITY, GCR_AXES(1), true);
}
static cn_tensor *gcr_norminf_all(cn_tensor **x) { return cn_norm(x[0], INFINITY, NULL, 0, false); }
/* softmax, log_softmax, cumsum */
static cn_tensor *gcr_softmax_last(cn_tensor **x) { return cn_softmax(x[0], -1); }
static cn_tensor *gcr_softmax_0(cn_tensor **x) { return cn_softmax(x[0], 0); }
static cn_tensor *gcr_softmax_mid(cn_tensor **x) { return cn_softmax(x[0], 1); }
static cn_tensor *gcr_log_softmax_last(cn_tensor **x) { return cn_log_softmax(x[0], -1); }
static cn_tensor *gcr_log_softmax_0(cn_tensor **x) { return cn_log_softmax(x[0], 0); }
static cn_tensor *gcr_cumsum_0(cn_tensor **x) { return cn_cumsum(x[0], 0); }
static cn_tensor *gcr_cumsum_last(cn_tensor **x) { return cn_cumsum(x[0], -1); }
/* sum_to: x[0] summed to x[1]'s shape (x[1]'s values unused: gradient 0) */
static cn_tensor *gcr_sum_to(cn_tensor **x) {
    return cn_op_apply(CN_OP_sum_to, x, 2, &(cn_attrs){0});
}

#define GCR_IN(lo_, hi_, ...) {GC_SHAPE(__VA_ARGS__), lo_, hi_}
#define GCR_GAP(lo_, hi_, gap_, ...) {GC_SHAPE(__VA_ARGS__), lo_, hi_, gap_}

static const grad_case grad_cases_reduce[] = {
    {"sum", "axis 1", 1, {GCR_IN(-1, 1, 2, 3, 4)}, gcr_sum_1},
    {"sum", "axes 0,2 keepdim", 1, {GCR_IN(-1, 1, 2, 3, 4)}, gcr_sum_02k},
    {"sum", "all", 1, {GCR_IN(-1, 1, 3, 4)}, gcr_sum_all},
    {"sum", "axes -1,-3", 1, {GCR_IN(-1, 1, 2, 3, 2)}, gcr_sum_neg},
    {"sum", "size-1 axis", 1, {GCR_IN(-1, 1, 3, 1, 2)}, gcr_sum_1},
    {"sum", "all keepdim", 1, {GCR_IN(-1, 1, 2, 3)}, gcr_sum_allk},
    {"sum", "rank 0", 1, {{.ndim = 0, .lo = -1, .hi = 1}}, gcr_sum_all},

    {"mean", "axis 1", 1, {GCR_IN(-1, 1, 2, 3, 4)}, gcr_mean_1},
    {"mean", "axes -1,0 keepdim", 1, {GCR_IN(-1, 1, 2, 3, 4)}, gcr_mean_neg},
    {"mean", "all", 1, {GCR_IN(-1, 1, 3, 4)}, gcr_mean_all},
    {"mean", "size-1 axis", 1, {GCR_IN(-1, 1, 2, 1, 3)}, gcr_mean_1},

    {"prod", "axis 1", 1, {GCR_IN(-1.5, 1.5, 2, 3, 4)}, gcr_prod_1},
    {"prod", "axes 0,-1 keepdim", 1, {GCR_IN(-1.5, 1.5, 2, 3, 2)}, gcr_prod_02k},
    {"prod", "all", 1, {GCR_IN(0.5, 1.5, 3, 4)}, gcr_prod_all},
    {"prod", "size-1 axis", 1, {GCR_IN(-1.5, 1.5, 2, 1, 3)}, gcr_prod_1},

    {"max", "axis 1", 1, {GCR_IN(-1, 1, 2, 4, 3)}, gcr_max_1},
    {"max", "axes 0,2 keepdim", 1, {GCR_IN(-1, 1, 2, 3, 4)}, gcr_max_02k},
    {"max", "all", 1, {GCR_IN(-1, 1, 3, 4)}, gcr_max_all},
    {"max", "size-1 axis", 1, {GCR_IN(-1, 1, 2, 1, 3)}, gcr_max_1},
    {"min", "axis -1", 1, {GCR_IN(-1, 1, 3, 5)}, gcr_min_neg},
    {"min", "axes 0,1 keepdim", 1, {GCR_IN(-1, 1, 2, 3, 2)}, gcr_min_01k},
    {"min", "all keepdim", 1, {GCR_IN(-1, 1, 3, 4)}, gcr_min_all},

    {"var", "axis 1", 1, {GCR_IN(-1, 1, 2, 4, 3)}, gcr_var_1},
    {"var", "axes 0,-1 correction 0 keepdim", 1, {GCR_IN(-1, 1, 2, 3, 4)}, gcr_var_c0k},
    {"var", "all correction 2.5", 1, {GCR_IN(-1, 1, 3, 4)}, gcr_var_all},
    {"std", "axis -2", 1, {GCR_IN(-1, 1, 2, 4, 3)}, gcr_std_1},
    {"std", "axes 0,2 correction 0 keepdim", 1, {GCR_IN(-1, 1, 2, 3, 4)}, gcr_std_c0k},
    {"std", "all correction 0.5", 1, {GCR_IN(-1, 1, 3, 4)}, gcr_std_all},

    {"logsumexp", "axis 1", 1, {GCR_IN(-3, 3, 2, 3, 4)}, gcr_lse_1},
    /* far from 0: a naive log(sum(exp)) would overflow */
    {"logsumexp", "axes -1,0 keepdim, large", 1, {GCR_IN(700, 705, 2, 3, 4)}, gcr_lse_neg,
     .rtol = 1e-4, .atol = 1e-5},
    {"logsumexp", "all", 1, {GCR_IN(-3, 3, 3, 4)}, gcr_lse_all},

    {"norm", "p 2 axis 1", 1, {GCR_IN(-1, 1, 2, 3, 4)}, gcr_norm2_1},
    {"norm", "p 2 all", 1, {GCR_IN(-1, 1, 3, 4)}, gcr_norm2_all},
    {"norm", "p 1 axis -1 keepdim", 1, {GCR_GAP(-1, 1, 0.1, 3, 4)}, gcr_norm1_k},
    {"norm", "p 3 axes 0,2", 1, {GCR_IN(-1, 1, 2, 3, 4)}, gcr_norm3},
    {"norm", "p 1.5 axis 1", 1, {GCR_GAP(-1, 1, 0.1, 2, 3, 4)}, gcr_norm15},
    {"norm", "p 0.5 axis -1", 1, {GCR_GAP(-1, 1, 0.1, 3, 4)}, gcr_norm05},
    {"norm", "p inf axis 1 keepdim", 1, {GCR_GAP(-1, 1, 0.1, 3, 4)}, gcr_norminf},
    {"norm", "p inf all", 1, {GCR_GAP(-1, 1, 0.1, 3, 4)}, gcr_norminf_all},

    {"softmax", "axis -1", 1, {GCR_IN(-3, 3, 2, 3, 4)}, gcr_softmax_last},
    {"softmax", "axis 0", 1, {GCR_IN(-3, 3, 3, 4)}, gcr_softmax_0},
    {"softmax", "axis 1 of 3", 1, {GCR_IN(-3, 3, 2, 3, 4)}, gcr_softmax_mid},
    {"softmax", "size-1 axis", 1, {GCR_IN(-3, 3, 3, 1)}, gcr_softmax_last},
    {"softmax", "rank 0", 1, {{.ndim = 0, .lo = -3, .hi = 3}}, gcr_softmax_last},
    {"log_softmax", "axis -1", 1, {GCR_IN(-3, 3, 2, 3, 4)}, gcr_log_softmax_last},
    {"log_softmax", "axis 0", 1, {GCR_IN(-3, 3, 3, 4)}, gcr_log_softmax_0},
    {"log_softmax", "rank 0", 1, {{.ndim = 0, .lo = -3, .hi = 3}}, gcr_log_softmax_0},
    {"log_softmax", "large", 1, {GCR_IN(500, 510, 3, 4)}, gcr_log_softmax_last, .rtol = 1e-4,
     .atol = 1e-5},

    {"cumsum", "axis 0", 1, {GCR_IN(-1, 1, 4, 3)}, gcr_cumsum_0},
    {"cumsum", "axis -1", 1, {GCR_IN(-1, 1, 2, 3, 4)}, gcr_cumsum_last},
    {"cumsum", "rank 1", 1, {GCR_IN(-1, 1, 6)}, gcr_cumsum_0},
    {"cumsum", "rank 0", 1, {{.ndim = 0, .lo = -1, .hi = 1}}, gcr_cumsum_0},

    {"sum_to", "leading axis and a middle one", 2,
     {GCR_IN(-1, 1, 2, 3, 4), GCR_IN(-1, 1, 1, 4)}, gcr_sum_to},
    {"sum_to", "nothing to sum", 2, {GCR_IN(-1, 1, 3, 2), GCR_IN(-1, 1, 3, 2)}, gcr_sum_to},
};
