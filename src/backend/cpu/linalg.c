/* matmul on the CPU: numpy.matmul's batched products (a 1-D a a row, a 1-D
 * b a column, batch axes broadcast), each over cn_gemm (gemm.c). Shapes
 * were checked by the op's infer (src/ops/linalg.c). */
#include "kernels.h"

#include "gemm.h"

#include <stdatomic.h>

/* One product per batch index: offsets (in elements) of its a and b from
 * theirs, over batch axes already merged where all three operands allow. */
typedef struct mm_batch {
    cn_dtype dt;
    size_t es;
    int nd;
    int64_t shape[CN_MAX_DIMS], sa[CN_MAX_DIMS], sb[CN_MAX_DIMS];
    int64_t m, n, k, rsa, csa, rsb, csb;
    const char *a, *b;
    char *c;
    atomic_int failed;
} mm_batch;

static void mm_range(void *ctx, int64_t t0, int64_t t1) {
    mm_batch *g = ctx;
    for (int64_t t = t0; t < t1; t++) {
        int64_t rem = t, oa = 0, ob = 0;
        for (int d = g->nd - 1; d >= 0; d--) {
            int64_t i = rem % g->shape[d];
            rem /= g->shape[d];
            oa += i * g->sa[d];
            ob += i * g->sb[d];
        }
        if (cn_gemm(g->dt, g->m, g->n, g->k, g->a + oa * (int64_t)g->es, g->rsa, g->csa,
                    g->b + ob * (int64_t)g->es, g->rsb, g->csb,
                    g->c + (size_t)(t * g->m * g->n) * g->es, g->n) < 0)
            atomic_store(&g->failed, 1);
    }
}

/* Products at most this big (multiply-adds) are run one per thread, the batch
 * split across the pool; larger ones use every thread each. (OpenBLAS runs
 * products this small on the calling thread, so the two never compete.) */
#define MM_SMALL_MACS (1 << 18)

int cn_cpu_k_matmul(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *at,
                    cn_tensor *out) {
    (void)id, (void)nin, (void)at;
    const cn_tensor *a = in[0], *b = in[1];
    int ad = a->ndim, bd = b->ndim;
    mm_batch g = {0};
    g.dt = (cn_dtype)out->dtype;
    g.es = cn_dsize(g.dt);
    g.m = ad >= 2 ? a->shape[ad - 2] : 1;
    g.k = a->shape[ad - 1];
    g.n = bd >= 2 ? b->shape[bd - 1] : 1;
    g.rsa = ad >= 2 ? a->strides[ad - 2] : 1;
    g.csa = a->strides[ad - 1];
    g.rsb = b->strides[bd >= 2 ? bd - 2 : 0];
    g.csb = bd >= 2 ? b->strides[bd - 1] : 1;
    g.a = cn_t_ptr(a);
    g.b = cn_t_ptr(b);
    g.c = cn_t_ptr(out);

    /* Batch axes of the output, with a's and b's strides (0 where broadcast);
     * size-1 axes dropped, and an axis merged into the next inner one when
     * both a and b step over it as over the whole inner one (c always does). */
    int nbatch = out->ndim - (ad >= 2) - (bd >= 2);
    int64_t nmat = 1;
    for (int d = 0; d < nbatch; d++) {
        int64_t size = out->shape[d];
        nmat *= size;
        if (size == 1) continue;
        int da = d - (nbatch - (ad - 2)), db = d - (nbatch - (bd - 2));
        int64_t sa = ad > 2 && da >= 0 && a->shape[da] != 1 ? a->strides[da] : 0;
        int64_t sb = bd > 2 && db >= 0 && b->shape[db] != 1 ? b->strides[db] : 0;
        int j = g.nd - 1;
        if (j >= 0 && g.sa[j] == sa * size && g.sb[j] == sb * size) {
            g.shape[j] *= size;
            g.sa[j] = sa;
            g.sb[j] = sb;
            continue;
        }
        g.shape[g.nd] = size;
        g.sa[g.nd] = sa;
        g.sb[g.nd] = sb;
        g.nd++;
    }

    /* b shared by every product and a's matrices evenly spaced rows: one
     * product with m * batch rows (a linear layer over a sequence). */
    if (g.nd == 1 && g.sb[0] == 0 && (g.m == 1 || g.sa[0] == g.m * g.rsa)) {
        g.rsa = g.m == 1 ? g.sa[0] : g.rsa;
        g.m *= g.shape[0];
        g.nd = 0;
        nmat = 1;
    }

    double macs = (double)g.m * (double)g.n * (double)g.k;
    if (nmat > 1 && macs <= MM_SMALL_MACS) {
        int64_t grain = (int64_t)(MM_SMALL_MACS / (macs > 1 ? macs : 1));
        cn_parallel_for(nmat, grain, mm_range, &g);
    } else {
        mm_range(&g, 0, nmat);
    }
    if (atomic_load(&g.failed)) {
        char sa[160], sb[160];
        return cn_failc(CN_ENOMEM, "matmul: out of memory multiplying %s by %s",
                        cn_fmt_shape(sa, sizeof sa, a->ndim, a->shape),
                        cn_fmt_shape(sb, sizeof sb, b->ndim, b->shape));
    }
    return CN_OK;
}
