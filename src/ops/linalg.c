/* Linear algebra: matmul, with numpy.matmul's rules. The kernels are the
 * backends' (src/backend/cpu/linalg.c, over the CPU GEMM, for the CPU). */
#include "op.h"

#include <inttypes.h>
#include <stdio.h>

/* ---- matmul: a [..., m, k] (or [k]) @ b [..., k, n] (or [k]) ---- */

static int matmul_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *at,
                        cn_meta *m) {
    (void)nin, (void)at;
    const cn_tensor *a = in[0], *b = in[1];
    char sa[160], sb[160];
    cn_fmt_shape(sa, sizeof sa, a->ndim, a->shape);
    cn_fmt_shape(sb, sizeof sb, b->ndim, b->shape);
    if (a->ndim == 0 || b->ndim == 0)
        return cn_failc(CN_EINVAL,
                        "%s: a is %s and b is %s: both operands need at least one dimension "
                        "(use mul to scale by a scalar)",
                        op->name, sa, sb);
    if (a->dtype == CN_BOOL || b->dtype == CN_BOOL)
        return cn_failc(CN_EINVAL,
                        "%s: a is %s %s and b is %s %s: bool matrices are not supported (cast "
                        "to an integer or float dtype)",
                        op->name, cn_dtype_name((cn_dtype)a->dtype), sa,
                        cn_dtype_name((cn_dtype)b->dtype), sb);
    int64_t ka = a->shape[a->ndim - 1], kb = b->shape[b->ndim == 1 ? 0 : b->ndim - 2];
    if (ka >= 0 && kb >= 0 && ka != kb)
        return cn_failc(CN_EINVAL, "%s: a is %s and b is %s: inner dimensions %" PRId64
                                   " != %" PRId64,
                        op->name, sa, sb, ka, kb);

    /* Batch axes: all but the last two, broadcast against each other. */
    int na = a->ndim > 2 ? a->ndim - 2 : 0, nb = b->ndim > 2 ? b->ndim - 2 : 0;
    int nbatch = na > nb ? na : nb;
    for (int d = 0; d < nbatch; d++) {
        int da = d - (nbatch - na), db = d - (nbatch - nb);
        int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;
        int64_t o;
        if (x == y || y == 1) o = x;
        else if (x == 1) o = y;
        else if (x < 0 || y < 0) o = x < 0 ? y : x; /* unknown: the known one, if not 1 */
        else {
            char ba[160], bb[160];
            return cn_failc(CN_EINVAL,
                            "%s: a is %s and b is %s: batch dimensions %s and %s do not broadcast",
                            op->name, sa, sb, cn_fmt_shape(ba, sizeof ba, na, a->shape),
                            cn_fmt_shape(bb, sizeof bb, nb, b->shape));
        }
        m->shape[d] = o;
    }
    int nd = nbatch;
    if (a->ndim >= 2) m->shape[nd++] = a->shape[a->ndim - 2];
    if (b->ndim >= 2) m->shape[nd++] = b->shape[b->ndim - 1];
    m->ndim = nd;
    /* Half inputs reach here only on autocast's native path (the dispatcher
     * widens them otherwise), whose products accumulate and return in f32. */
    m->dtype = cn_is_half((cn_dtype)a->dtype) ? CN_F32 : (cn_dtype)a->dtype;
    return CN_OK;
}

/* ---- gradients ----
 * A 1-D operand takes part as a matrix (a as a row [1, k], b as a column
 * [k, 1]) so one formula covers every case; the gradient is reshaped back.
 * Broadcast batch axes are summed away by cn_sum_to. */

/* A matrix stored column by column: a transposed view, as linear's weight
 * enters the product. Its gradient is then computed transposed, as PyTorch
 * does, so that it comes out in the same layout: added into a parameter's
 * contiguous .grad it is read in order instead of with a stride. */
static bool col_major(const cn_tensor *t) {
    return t->ndim == 2 && !cn_is_symbolic(t) && t->shape[0] > 1 && t->shape[1] > 1 &&
           t->strides[0] == 1 && t->strides[1] == t->shape[0];
}

static cn_tensor *matmul_vjp(cn_tensor *const *in, int nin, const cn_attrs *at, cn_tensor *out,
                             cn_tensor *g, int i) {
    (void)nin, (void)at, (void)out;
    cn_tensor *a = in[0], *b = in[1];
    bool a1 = a->ndim == 1, b1 = b->ndim == 1;
    if (a1) a = cn_unsqueeze(a, 0);
    if (b1) b = cn_unsqueeze(b, 1);
    if (a1 && b1) g = cn_reshape(g, CN_SHAPE(1, 1));
    else if (a1) g = cn_unsqueeze(g, -2);
    else if (b1) g = cn_unsqueeze(g, -1);
    if (!a || !b || !g) return NULL;
    cn_tensor *r;
    if (i == 0) {
        if (col_major(a) && g->ndim == 2 && !b1) r = cn_mT(cn_matmul(b, cn_mT(g)));
        else r = cn_sum_to(cn_matmul(g, cn_mT(b)), a);
    } else if (a->ndim > 2 && b->ndim == 2 && a->shape[a->ndim - 1] > 0 &&
               g->shape[g->ndim - 1] > 0) {
        /* A shared matrix (a linear layer over a batch): one product over the
         * batch's rows instead of one per batch entry summed afterwards. */
        cn_tensor *a2 = cn_reshape(a, CN_SHAPE(-1, a->shape[a->ndim - 1]));
        cn_tensor *g2 = cn_reshape(g, CN_SHAPE(-1, g->shape[g->ndim - 1]));
        r = col_major(b) ? cn_mT(cn_matmul(cn_mT(g2), a2)) : cn_matmul(cn_mT(a2), g2);
    } else {
        if (col_major(b) && g->ndim == 2 && !a1) r = cn_mT(cn_matmul(cn_mT(g), a));
        else r = cn_sum_to(cn_matmul(cn_mT(a), g), b);
    }
    if (r && (a1 || b1)) r = cn_reshape(r, in[i]->ndim, in[i]->shape);
    return r;
}

static cn_tensor *matmul_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                             const cn_attrs *at, cn_tensor *out) {
    (void)nin, (void)at, (void)out;
    cn_tensor *r = tin[0] ? cn_matmul(tin[0], in[1]) : NULL;
    if (tin[1]) {
        cn_tensor *t = cn_matmul(in[0], tin[1]);
        r = r ? cn_add(r, t) : t;
    }
    return r;
}

const cn_op_def cn_opdef_matmul = {
    .name = "matmul",
    .ninputs = 2,
    .promote_from = 0,
    .flags = CN_OPF_PROMOTE | CN_OPF_AUTOCAST,
    .infer = matmul_infer,
    .vjp = matmul_vjp,
    .jvp = matmul_jvp,
    .onnx = "MatMul",
    .doc = "c[..., i, j] = sum_p a[..., i, p] b[..., p, j]; a 1-D a is a row, a 1-D b a column; "
           "batch axes broadcast",
};

cn_tensor *cn_matmul(cn_tensor *a, cn_tensor *b) {
    cn_tensor *in[2] = {a, b};
    return cn_op_apply(CN_OP_matmul, in, 2, NULL);
}
