/* Messages between the ranks of an MPI job (docs/distributed.md): send and
 * recv, differentiable, so one model can be split over processes (model and
 * pipeline parallelism) and trained with the ordinary cn_backward on each.
 *
 *   rank 0:  tok = cn_send(h, 1, tag)          rank 1:  h = cn_recv(NULL, dt, shape, 0, tag)
 *            cn_backward(tok, NULL)                     cn_backward(loss(h), NULL)
 *
 * send's output is a token (an f32 scalar 0) standing for the message; its
 * gradient rule receives h's gradient from the peer. recv's input is a
 * token too (any f32 scalar: cn_recv makes a leaf that requires a gradient
 * when given NULL), through which the backward pass reaches recv's rule,
 * which sends the received value's gradient back. Gradients travel under
 * the tag plus 2^20. The kernels are the CPU's (src/backend/cpu/comm.c);
 * on other devices move the value to the CPU first. */
#include "op.h"

#include <inttypes.h>

#define GRAD_TAG (1 << 20)

static int check_peer(const cn_op_def *op, const cn_attrs *a) {
    int64_t peer = a->i[0], tag = a->i[1];
    if (peer < 0 || peer >= cn_dist_size() || peer == cn_dist_rank())
        return cn_failc(CN_EINVAL, "%s: rank %" PRId64 " is not another rank of the job (this is "
                                   "rank %d of %d; start the job with mpirun and cn_dist_init)",
                        op->name, peer, cn_dist_rank(), cn_dist_size());
    if (tag < 0 || tag >= 2 * GRAD_TAG)
        return cn_failc(CN_EINVAL, "%s: tag %" PRId64 " (give 0 to 2^20 - 1)", op->name, tag);
    return CN_OK;
}

/* ---- send ---- */

static int send_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                      cn_meta *m) {
    (void)in, (void)nin;
    int rc = check_peer(op, a);
    if (rc < 0) return rc;
    m->dtype = CN_F32;
    m->ndim = 0;
    return CN_OK;
}

static cn_tensor *send_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                           cn_tensor *g, int i) {
    (void)nin, (void)g, (void)i;
    /* The gradient of what was sent comes back from the peer. */
    const cn_tensor *x = in[0];
    return cn_recv(out, (cn_dtype)x->dtype, x->ndim, x->shape, (int)a->i[0],
                   (int)(a->i[1] + GRAD_TAG));
}

const cn_op_def cn_opdef_send = {
    .name = "send",
    .ninputs = 1,
    .flags = CN_OPF_NO_HALF | CN_OPF_COMM,
    .attrs = {{"peer", CN_ATTR_INT, 0, 0}, {"tag", CN_ATTR_INT, 1, 0}},
    .infer = send_infer,
    .vjp = send_vjp,
    .doc = "sends x to rank `peer` (MPI); y is a token (f32 0) whose gradient receives x's",
};

cn_tensor *cn_send(cn_tensor *t, int dst, int tag) {
    if (!t) return NULL;
    cn_attrs a = {0};
    a.i[0] = dst;
    a.i[1] = tag;
    return cn_op_apply(CN_OP_send, &t, 1, &a);
}

/* ---- recv ---- */

static int recv_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                      cn_meta *m) {
    (void)nin;
    int rc = check_peer(op, a);
    if (rc < 0) return rc;
    if (in[0]->ndim != 0 || in[0]->dtype != CN_F32)
        return cn_failc(CN_EINVAL, "%s: the token must be an f32 scalar (a send's output, or "
                                   "NULL to cn_recv)", op->name);
    cn_dtype dt = (cn_dtype)a->i[2];
    if (a->i[2] < 0 || a->i[2] >= CN_DTYPE_COUNT)
        return cn_failc(CN_EINVAL, "%s: dtype %" PRId64 " is not a dtype", op->name, a->i[2]);
    if (a->nlist > CN_MAX_DIMS)
        return cn_failc(CN_EINVAL, "%s: %d dimensions (at most %d)", op->name, a->nlist,
                        CN_MAX_DIMS);
    for (int d = 0; d < a->nlist; d++)
        if (a->list[d] < 0)
            return cn_failc(CN_EINVAL, "%s: dimension %d is %" PRId64, op->name, d, a->list[d]);
    m->dtype = dt;
    m->ndim = a->nlist;
    for (int d = 0; d < a->nlist; d++) m->shape[d] = a->list[d];
    return CN_OK;
}

static cn_tensor *recv_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                           cn_tensor *g, int i) {
    (void)nin, (void)out, (void)i;
    /* The received value's gradient goes back to its sender; the token's
     * own gradient is zero (the message carries it). */
    (void)in;
    cn_tensor *tok = cn_send(g, (int)a->i[0], (int)(a->i[1] + GRAD_TAG));
    return tok ? cn_mul_scalar(tok, 0.0) : NULL;
}

const cn_op_def cn_opdef_recv = {
    .name = "recv",
    .ninputs = 1,
    .flags = CN_OPF_NO_HALF | CN_OPF_COMM,
    .attrs = {{"peer", CN_ATTR_INT, 0, 0},
              {"tag", CN_ATTR_INT, 1, 0},
              {"dtype", CN_ATTR_DTYPE, 2, 0},
              {"shape", CN_ATTR_INTS, 0, 0}},
    .infer = recv_infer,
    .vjp = recv_vjp,
    .doc = "y = the tensor rank `peer` sends (MPI); its gradient is sent back",
};

cn_tensor *cn_recv(cn_tensor *token, cn_dtype dt, int ndim, const int64_t *shape, int src, int tag) {
    if (ndim < 0 || ndim > CN_MAX_DIMS || (ndim > 0 && !shape))
        return cn_fail("recv: %d dimensions (0 to %d, with a shape)", ndim, CN_MAX_DIMS);
    cn_scope_begin();
    if (!token) {
        /* A leaf that needs a gradient, so cn_backward reaches this recv's
         * rule and sends the gradient back (unless recording is off). */
        token = cn_scalar(CN_F32, 0.0);
        if (token) token->requires_grad = cn_is_grad_enabled(); /* a fresh leaf */
    }
    cn_attrs a = {0};
    a.i[0] = src;
    a.i[1] = tag;
    a.i[2] = dt;
    a.nlist = ndim;
    for (int d = 0; d < ndim; d++) a.list[d] = shape[d];
    cn_tensor *y = token ? cn_keep(cn_op_apply(CN_OP_recv, &token, 1, &a)) : NULL;
    cn_scope_end();
    return y;
}
