/* matmul on the CPU: the products of cn_mm_geometry (../matmul_geom.h),
 * each over cn_gemm (gemm.c). */
#include "kernels.h"

#include "gemm.h"
#include "matmul_dnnl.h"
#include "../matmul_geom.h"

#include <stdatomic.h>

/* One product per batch index: offsets (in elements) of its a and b from
 * theirs, over batch axes already merged where all three operands allow. */
typedef struct mm_batch {
    cn_dtype dt, in_dt; /* in_dt: autocast's native path gives half inputs, an f32 output */
    size_t es, in_es;
    int nd;
    int64_t shape[CN_MAX_DIMS], sa[CN_MAX_DIMS], sb[CN_MAX_DIMS];
    int64_t m, n, k, rsa, csa, rsb, csb;
    const char *a, *b;
    char *c;
    const cn_gemm_pack *bpk; /* b packed once (a program's constant), or NULL */
    const cn_gemm_pack *hpk; /* the same for half inputs (oneDNN's format), or NULL */
    atomic_int failed;
} mm_batch;

static void mm_range(void *ctx, int64_t t0, int64_t t1) {
    mm_batch *g = ctx;
    for (int64_t t = t0; t < t1 && atomic_load_explicit(&g->failed, memory_order_relaxed) != 2;
         t++) {
        int64_t rem = t, oa = 0, ob = 0;
        for (int d = g->nd - 1; d >= 0; d--) {
            int64_t i = rem % g->shape[d];
            rem /= g->shape[d];
            oa += i * g->sa[d];
            ob += i * g->sb[d];
        }
        const char *a = g->a + oa * (int64_t)g->in_es, *b = g->b + ob * (int64_t)g->in_es;
        char *c = g->c + (size_t)(t * g->m * g->n) * g->es;
        int rc = g->in_dt != g->dt ? cn_dnnl_matmul(g->in_dt, g->m, g->n, g->k, a, g->rsa,
                                                    g->csa, b, g->rsb, g->csb, (float *)c, g->hpk)
                 : g->bpk ? cn_gemm_packed(g->dt, g->m, g->n, g->k, a, g->rsa, g->csa, b, g->rsb,
                                           g->csb, c, g->n, g->bpk, 0, NULL)
                          : cn_gemm(g->dt, g->m, g->n, g->k, a, g->rsa, g->csa, b, g->rsb,
                                    g->csb, c, g->n);
        if (rc != 0) atomic_store(&g->failed, rc > 0 ? 2 : 1);
    }
}

/* Products at most this big (multiply-adds) are run one per thread, the batch
 * split across the pool; larger ones use every thread each. (OpenBLAS runs
 * products this small on the calling thread, so the two never compete.) */
#define MM_SMALL_MACS (1 << 18)

/* Half inputs that oneDNN does not multiply: widened, then the f32 product
 * (the same numbers up to the order of the sums). */
static int matmul_widened(cn_op_id id, cn_tensor *const *in, const cn_attrs *at, cn_tensor *out) {
    cn_tensor *w[2] = {cn_cpu_widened(in[0]), NULL};
    if (w[0]) w[1] = cn_cpu_widened(in[1]);
    int rc = w[1] ? cn_cpu_k_matmul(id, w, 2, at, out) : CN_ENOMEM;
    cn_release(w[0]);
    cn_release(w[1]);
    return rc;
}

int cn_cpu_k_matmul(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *at,
                    cn_tensor *out) {
    (void)nin;
    const cn_tensor *a = in[0], *b = in[1];
    cn_mm_geom mg;
    cn_mm_geometry(a, b, out, &mg);
    mm_batch g = {0};
    g.dt = (cn_dtype)out->dtype;
    g.es = cn_dsize(g.dt);
    g.in_dt = (cn_dtype)a->dtype;
    g.in_es = cn_dsize(g.in_dt);
    if (g.in_dt != g.dt && b->dtype != a->dtype) return matmul_widened(id, in, at, out);
    g.m = mg.m;
    g.k = mg.k;
    g.n = mg.n;
    g.rsa = mg.rsa;
    g.csa = mg.csa;
    g.rsb = mg.rsb;
    g.csb = mg.csb;
    g.a = cn_t_ptr(a);
    g.b = cn_t_ptr(b);
    g.c = cn_t_ptr(out);
    g.nd = mg.nb;
    memcpy(g.shape, mg.shape, sizeof g.shape);
    memcpy(g.sa, mg.sa, sizeof g.sa);
    memcpy(g.sb, mg.sb, sizeof g.sb);
    int64_t nmat = mg.nmat;
    /* A 2-D b is the same matrix in every product. */
    const cn_gemm_pack *pk = cn_gemm_pack_step();
    if (b->ndim == 2 && g.in_dt == g.dt && cn_gemm_pack_current(pk, b)) g.bpk = pk;
    if (b->ndim == 2 && g.in_dt != g.dt && cn_gemm_pack_holds(pk, b)) g.hpk = pk;

    double macs = (double)g.m * (double)g.n * (double)g.k;
    /* oneDNN's products split their rows over the pool themselves. */
    if (nmat > 1 && macs <= MM_SMALL_MACS && g.in_dt == g.dt) {
        int64_t grain = (int64_t)(MM_SMALL_MACS / (macs > 1 ? macs : 1));
        cn_parallel_for(nmat, grain, mm_range, &g);
    } else {
        mm_range(&g, 0, nmat);
    }
    if (atomic_load(&g.failed) == 2) return matmul_widened(id, in, at, out);
    if (atomic_load(&g.failed)) {
        char sa[160], sb[160];
        return cn_failc(CN_ENOMEM, "matmul: out of memory multiplying %s by %s",
                        cn_fmt_shape(sa, sizeof sa, a->ndim, a->shape),
                        cn_fmt_shape(sb, sizeof sb, b->ndim, b->shape));
    }
    return CN_OK;
}
