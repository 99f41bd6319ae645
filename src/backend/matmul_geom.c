/* Matmul shapes for every backend (matmul_geom.h). */
#include "matmul_geom.h"

void cn_mm_geometry(const cn_tensor *a, const cn_tensor *b, const cn_tensor *out, cn_mm_geom *g) {
    int ad = a->ndim, bd = b->ndim;
    memset(g, 0, sizeof *g);
    g->m = ad >= 2 ? a->shape[ad - 2] : 1;
    g->k = a->shape[ad - 1];
    g->n = bd >= 2 ? b->shape[bd - 1] : 1;
    g->rsa = ad >= 2 ? a->strides[ad - 2] : 1;
    g->csa = a->strides[ad - 1];
    g->rsb = b->strides[bd >= 2 ? bd - 2 : 0];
    g->csb = bd >= 2 ? b->strides[bd - 1] : 1;

    /* Batch axes of the output, with a's and b's strides (0 where
     * broadcast) and c's; size-1 axes dropped, and an axis merged into the
     * next inner one when every operand steps over it as over the whole
     * inner one. */
    int nbatch = out->ndim - (ad >= 2) - (bd >= 2);
    int64_t inner = g->m * g->n, csz[CN_MAX_DIMS];
    for (int d = nbatch - 1; d >= 0; d--) {
        csz[d] = inner;
        inner *= out->shape[d];
    }
    g->nmat = 1;
    for (int d = 0; d < nbatch; d++) {
        int64_t size = out->shape[d];
        g->nmat *= size;
        if (size == 1) continue;
        int da = d - (nbatch - (ad - 2)), db = d - (nbatch - (bd - 2));
        int64_t sa = ad > 2 && da >= 0 && a->shape[da] != 1 ? a->strides[da] : 0;
        int64_t sb = bd > 2 && db >= 0 && b->shape[db] != 1 ? b->strides[db] : 0;
        int j = g->nb - 1;
        if (j >= 0 && g->sa[j] == sa * size && g->sb[j] == sb * size &&
            g->sc[j] == csz[d] * size) {
            g->shape[j] *= size;
            g->sa[j] = sa;
            g->sb[j] = sb;
            g->sc[j] = csz[d];
            continue;
        }
        g->shape[g->nb] = size;
        g->sa[g->nb] = sa;
        g->sb[g->nb] = sb;
        g->sc[g->nb] = csz[d];
        g->nb++;
    }
    if (g->nb == 1 && g->sb[0] == 0 && (g->m == 1 || g->sa[0] == g->m * g->rsa)) {
        g->rsa = g->m == 1 ? g->sa[0] : g->rsa;
        g->m *= g->shape[0];
        g->nb = 0;
        g->nmat = 1;
    }
}
