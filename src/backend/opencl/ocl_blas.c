/* CLBlast's GEMM for the shared kernels' cn_gpu_gemm_run (gpu_linalg.c):
 * f32 and f64 where each operand is a matrix BLAS can address (a unit
 * stride on one axis, a leading dimension at least the other's size);
 * batches through its batched call with an offset per product. */
#include "ocl.h"
#include "../gpu/gpu_kernels.h"

#ifdef CN_HAVE_CLBLAST
#include <clblast_c.h>

#include <stdlib.h>

/* A BLAS layout (cn_gpu_blas_layout) as CLBlast's arguments. */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, CLBlastTranspose *tr,
                        size_t *ld) {
    bool t;
    int64_t l;
    if (!cn_gpu_blas_layout(rows, cols, rs, cs, &t, &l)) return false;
    *tr = t ? CLBlastTransposeYes : CLBlastTransposeNo;
    *ld = (size_t)l;
    return true;
}

/* 0 when CLBlast did the product, 1 when it does not apply or failed (the
 * plain kernel then runs), < 0 on a host error. */
int cn_ocl_gemm_clblast(const char *fn, cn_gpu_dev *dev, const cn_gpu_gemm *g) {
    if ((g->dt != CN_F32 && g->dt != CN_F64) || g->k == 0) return 1;
    CLBlastTranspose ta, tb;
    size_t lda, ldb;
    if (!blas_layout(g->m, g->k, g->rsa, g->csa, &ta, &lda) ||
        !blas_layout(g->k, g->n, g->rsb, g->csb, &tb, &ldb) || g->ldc < g->n)
        return 1;
    int64_t nbatch = 1;
    for (int d = 0; d < g->nb; d++) nbatch *= g->bshape[d];
    size_t ldc = (size_t)(g->ldc > 0 ? g->ldc : 1);
    cl_command_queue q = ((cn_ocl_dev *)dev)->queue;
    CLBlastStatusCode st;
    bool f64 = g->dt == CN_F64;
    if (nbatch == 1) {
        if (f64)
            st = CLBlastDgemm(CLBlastLayoutRowMajor, ta, tb, (size_t)g->m, (size_t)g->n,
                              (size_t)g->k, 1.0, (cl_mem)g->a, (size_t)g->oa, lda, (cl_mem)g->b, (size_t)g->ob, ldb,
                              g->accumulate ? 1.0 : 0.0, (cl_mem)g->c, (size_t)g->oc, ldc, &q, NULL);
        else
            st = CLBlastSgemm(CLBlastLayoutRowMajor, ta, tb, (size_t)g->m, (size_t)g->n,
                              (size_t)g->k, 1.0f, (cl_mem)g->a, (size_t)g->oa, lda, (cl_mem)g->b, (size_t)g->ob,
                              ldb, g->accumulate ? 1.0f : 0.0f, (cl_mem)g->c, (size_t)g->oc, ldc, &q, NULL);
        return st == CLBlastSuccess ? CN_OK : 1;
    }
    size_t nb = (size_t)nbatch;
    size_t *offs = malloc(sizeof(size_t) * 3 * nb);
    double *ab = malloc(sizeof(double) * 2 * nb);
    if (!offs || !ab) {
        free(offs);
        free(ab);
        return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    }
    for (size_t t = 0; t < nb; t++) {
        int64_t rem = (int64_t)t, oa = g->oa, ob = g->ob, oc = g->oc;
        for (int d = g->nb - 1; d >= 0; d--) {
            int64_t i = rem % g->bshape[d];
            rem /= g->bshape[d];
            oa += i * g->bsa[d];
            ob += i * g->bsb[d];
            oc += i * g->bsc[d];
        }
        offs[t] = (size_t)oa;
        offs[nb + t] = (size_t)ob;
        offs[2 * nb + t] = (size_t)oc;
    }
    if (f64) {
        for (size_t t = 0; t < nb; t++) {
            ab[t] = 1.0;
            ab[nb + t] = g->accumulate ? 1.0 : 0.0;
        }
        st = CLBlastDgemmBatched(CLBlastLayoutRowMajor, ta, tb, (size_t)g->m, (size_t)g->n,
                                 (size_t)g->k, ab, (cl_mem)g->a, offs, lda, (cl_mem)g->b, offs + nb, ldb, ab + nb,
                                 (cl_mem)g->c, offs + 2 * nb, ldc, nb, &q, NULL);
    } else {
        float *fab = (float *)ab;
        for (size_t t = 0; t < nb; t++) {
            fab[t] = 1.0f;
            fab[nb + t] = g->accumulate ? 1.0f : 0.0f;
        }
        st = CLBlastSgemmBatched(CLBlastLayoutRowMajor, ta, tb, (size_t)g->m, (size_t)g->n,
                                 (size_t)g->k, fab, (cl_mem)g->a, offs, lda, (cl_mem)g->b, offs + nb, ldb,
                                 fab + nb, (cl_mem)g->c, offs + 2 * nb, ldc, nb, &q, NULL);
    }
    free(offs);
    free(ab);
    return st == CLBlastSuccess ? CN_OK : 1;
}
#endif
