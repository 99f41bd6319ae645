/* Helpers shared by the gradient rules. They use the public ops, so they work
 * on eager and symbolic tensors alike and are differentiable themselves. */
#include "op.h"

cn_tensor *cn_sum_to(cn_tensor *g, cn_tensor *x) {
    if (!g || !x) return NULL;
    int ndim = x->ndim;
    const int64_t *shape = x->shape;
    int lead = g->ndim - ndim;
    if (lead < 0) return cn_fail("sum_to: gradient of rank %d for a tensor of rank %d", g->ndim, ndim);
    /* A size of x unknown until run against a known one of g (x [-1, 2],
     * g [4, 2]): x's may be 1, broadcast, or the same, so only the run can
     * tell which axes to sum, and the sum_to op decides then. Two unknown
     * sizes are taken to be the same one (a batch axis), as a sum there
     * would cost a step in every static training graph. */
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 && g->shape[lead + i] >= 0 && g->shape[lead + i] != 1) {
            cn_tensor *gx[2] = {g, x};
            cn_attrs a = {0};
            return cn_op_apply(CN_OP_sum_to, gx, 2, &a);
        }
    int axes[CN_MAX_DIMS], n = 0;
    /* The leading axes go first, without keepdim: no reshape is needed, so
     * this also works when several sizes are unknown (static graphs). */
    if (lead > 0) {
        for (int i = 0; i < lead; i++) axes[i] = i;
        g = cn_sum(g, axes, lead, false);
        if (!g) return NULL;
    }
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 1 && g->shape[i] != 1) axes[n++] = i;
    if (n == 0) return lead == 0 ? cn_scope_add(cn_retain(g)) : g;
    return cn_sum(g, axes, n, true);
}

cn_tensor *cn_unreduce(cn_tensor *g, const cn_tensor *x, const cn_attrs *a, bool keepdim) {
    if (!g) return NULL;
    if (!keepdim && a->nlist > 0) {
        int64_t kshape[CN_MAX_DIMS];
        bool red[CN_MAX_DIMS] = {false};
        for (int i = 0; i < a->nlist; i++) red[a->list[i]] = true;
        int k = 0;
        for (int i = 0; i < x->ndim; i++) kshape[i] = red[i] ? 1 : g->shape[k++];
        g = cn_reshape(g, x->ndim, kshape);
    }
    return cn_expand(g, x->ndim, x->shape);
}

cn_tensor *cn_expand_like(cn_tensor *t, cn_tensor *like) {
    if (!t || !like) return NULL;
    for (int i = 0; i < like->ndim; i++)
        if (like->shape[i] < 0) return cn_add(t, cn_zeros_like_op(like));
    return cn_expand(t, like->ndim, like->shape);
}

cn_tensor *cn_zeros_like_op(cn_tensor *t) {
    if (!t) return NULL;
    cn_attrs a = {0};
    a.i[0] = -1;
    return cn_op_apply(CN_OP_full_like, &t, 1, &a);
}
