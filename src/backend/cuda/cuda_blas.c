/* cuBLAS's GEMM for the shared kernels' cn_gpu_gemm_run (gpu_linalg.c).
 * The operands are row-major views; cuBLAS is column-major, so C = A B is
 * issued as C^T = B^T A^T, each operand read as it lies (a matrix whose
 * rows are contiguous is, to cuBLAS, its own transpose). f32 and f64 where
 * every operand has a unit stride on one axis; batches as strided batched
 * products over the innermost batch axis (outer ones in a loop). Other
 * layouts and dtypes go to the plain kernel.
 *
 * cuBLAS is opened at run time, on the first product that could use it,
 * as the driver and NVRTC are: linked in, libcublas and libcublasLt (over
 * 500 MB) were mapped and relocated at the start of every program using
 * Chutney, GPU or not, which cost a tenth of a second and 200 MB of
 * resident memory per start. The toolkit's header gives the types and
 * enums; the functions come from dlsym. Without the library the products
 * run the plain kernel, said once on stderr. */
#include "cuda_backend.h"
#include "../gpu/gpu_kernels.h"

#include <cublas_v2.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sonames tried in order: the current toolkit's, the previous one's
 * (the few functions below have the same signatures in both), then the
 * development link. */
static const char *const blas_names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};

/* The functions this file calls, by the symbols cublas_v2.h's macros name
 * (cublasCreate is cublasCreate_v2, ...). */
static struct {
    cublasStatus_t (*Create)(cublasHandle_t *h);
    cublasStatus_t (*SetStream)(cublasHandle_t h, cudaStream_t s);
    cublasStatus_t (*SetMathMode)(cublasHandle_t h, cublasMath_t mode);
    const char *(*GetStatusString)(cublasStatus_t s);
    cublasStatus_t (*SgemmStridedBatched)(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const float *alpha, const float *A, int lda,
                                          long long sa, const float *B, int ldb, long long sb,
                                          const float *beta, float *C, int ldc, long long sc,
                                          int batch);
    cublasStatus_t (*DgemmStridedBatched)(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const double *alpha, const double *A, int lda,
                                          long long sa, const double *B, int ldb, long long sb,
                                          const double *beta, double *C, int ldc, long long sc,
                                          int batch);
} cb;
static int cb_state; /* 1 loaded, 0 no library, -1 a library without one of the functions */
static char cb_why[512] = "not loaded";
static pthread_once_t cb_once = PTHREAD_ONCE_INIT;

static void cb_load(void) {
    void *h = NULL;
    const char *lib = NULL;
    /* Each slot's type against the header's declaration: a compile-time
     * check only (sizeof does not evaluate, so nothing is linked). */
    (void)sizeof(cb.Create = cublasCreate_v2);
    (void)sizeof(cb.SetStream = cublasSetStream_v2);
    (void)sizeof(cb.SetMathMode = cublasSetMathMode);
    (void)sizeof(cb.GetStatusString = cublasGetStatusString);
    (void)sizeof(cb.SgemmStridedBatched = cublasSgemmStridedBatched);
    (void)sizeof(cb.DgemmStridedBatched = cublasDgemmStridedBatched);
    char err[384] = "";
    for (size_t i = 0; i < sizeof blas_names / sizeof *blas_names && !h; i++) {
        lib = blas_names[i];
        h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        /* The first name's error: a library that is there but does not load
         * (a missing libcublasLt) says so there, not only "no such file". */
        if (!h && i == 0) snprintf(err, sizeof err, "%s", dlerror());
    }
    if (!h) {
        snprintf(cb_why, sizeof cb_why,
                 "cuBLAS not found (libcublas.so.13, libcublas.so.12, libcublas.so: %s)", err);
        return;
    }
    struct {
        void **slot;
        const char *name;
    } syms[] = {
#define S(field, sym) {(void **)&cb.field, sym}
        S(Create, "cublasCreate_v2"),
        S(SetStream, "cublasSetStream_v2"),
        S(SetMathMode, "cublasSetMathMode"),
        S(GetStatusString, "cublasGetStatusString"),
        S(SgemmStridedBatched, "cublasSgemmStridedBatched"),
        S(DgemmStridedBatched, "cublasDgemmStridedBatched"),
#undef S
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
        /* POSIX: dlsym's object pointer converts to the slot's function type. */
        void *p = dlsym(h, syms[i].name);
        if (!p) {
            snprintf(cb_why, sizeof cb_why, "cuBLAS (%s) has no %s (too old a cuBLAS?)", lib,
                     syms[i].name);
            cb_state = -1;
            dlclose(h);
            return;
        }
        *syms[i].slot = p;
    }
    snprintf(cb_why, sizeof cb_why, "%s", lib);
    cb_state = 1;
}

int cn_cuda_blas_load(const char **why) {
    pthread_once(&cb_once, cb_load);
    if (why) *why = cb_why;
    return cb_state;
}

static void cb_tell(void) {
    fprintf(stderr, "chutney: %s: CUDA matrix products use the built-in tiled kernel (slower)\n",
            cb_why);
}

/* true when cuBLAS is there; else says once why the products run the plain
 * kernel instead (slower, same results up to the order of summation): a
 * missing library is a set-up to report, not an error of the call. */
static bool cb_ready(void) {
    static pthread_once_t told = PTHREAD_ONCE_INIT;
    if (cn_cuda_blas_load(NULL) == 1) return true;
    pthread_once(&told, cb_tell);
    return false;
}

static int tf32 = -1; /* -1: read CN_CUDA_TF32 on first use */

void cn_cuda_set_tf32(bool on) { tf32 = on; }

static bool tf32_on(void) {
    if (tf32 < 0) {
        const char *e = getenv("CN_CUDA_TF32");
        tf32 = e && e[0] == '1';
    }
    return tf32 == 1;
}

static const char *status_name(cublasStatus_t s) { return cb.GetStatusString(s); }

/* d's handle on its stream (under d->blas_lock). NULL after cn_fail. */
static cublasHandle_t handle_of(const char *fn, cn_cuda_dev *d) {
    if (!d->blas) {
        cublasHandle_t h = NULL;
        cublasStatus_t s = cb.Create(&h);
        if (s != CUBLAS_STATUS_SUCCESS) {
            cn_failc(s == CUBLAS_STATUS_ALLOC_FAILED ? CN_ENOMEM : CN_EUNSUPPORTED,
                     "%s: cuBLAS did not start on %s: %s", fn, d->g.label, status_name(s));
            return NULL;
        }
        cb.SetStream(h, (cudaStream_t)d->stream);
        d->blas = h;
    }
    cublasHandle_t h = d->blas;
    cb.SetMathMode(h, tf32_on() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    return h;
}

int cn_cuda_gemm_cublas(const char *fn, cn_gpu_dev *g, const cn_gpu_gemm *p) {
    if ((p->dt != CN_F32 && p->dt != CN_F64) || p->k == 0) return 1;
    bool ta, tb;
    int64_t lda, ldb;
    if (!cn_gpu_blas_layout(p->m, p->k, p->rsa, p->csa, &ta, &lda) ||
        !cn_gpu_blas_layout(p->k, p->n, p->rsb, p->csb, &tb, &ldb) || p->ldc < p->n)
        return 1;
    int64_t ldc = p->ldc > 0 ? p->ldc : 1;
    if (p->m > INT_MAX || p->n > INT_MAX || p->k > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
        ldc > INT_MAX)
        return 1;
    /* Batch axes of more than one product; the innermost is cuBLAS's. */
    int nb = 0;
    int64_t shape[CN_GPU_GEMM_MAX_BATCH], sa[CN_GPU_GEMM_MAX_BATCH], sb[CN_GPU_GEMM_MAX_BATCH],
        sc[CN_GPU_GEMM_MAX_BATCH];
    for (int d = 0; d < p->nb; d++) {
        if (p->bshape[d] == 1) continue;
        shape[nb] = p->bshape[d];
        sa[nb] = p->bsa[d];
        sb[nb] = p->bsb[d];
        sc[nb] = p->bsc[d];
        nb++;
    }
    int64_t inner = nb ? shape[nb - 1] : 1, outer = 1;
    for (int d = 0; d + 1 < nb; d++) outer *= shape[d];
    if (inner > INT_MAX) return 1;
    int64_t isa = nb ? sa[nb - 1] : 0, isb = nb ? sb[nb - 1] : 0, isc = nb ? sc[nb - 1] : 0;

    if (!cb_ready()) return 1;

    cn_cuda_dev *d = (cn_cuda_dev *)g;
    int rc = cn_cuda_enter(fn, d);
    if (rc < 0) return rc;
    pthread_mutex_lock(&d->blas_lock);
    cublasHandle_t h = handle_of(fn, d);
    if (!h) {
        pthread_mutex_unlock(&d->blas_lock);
        return CN_EUNSUPPORTED;
    }
    size_t es = cn_dsize(p->dt);
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    for (int64_t o = 0; o < outer && st == CUBLAS_STATUS_SUCCESS; o++) {
        int64_t oa = p->oa, ob = p->ob, oc = p->oc, rem = o;
        for (int q = nb - 2; q >= 0; q--) {
            int64_t i = rem % shape[q];
            rem /= shape[q];
            oa += i * sa[q];
            ob += i * sb[q];
            oc += i * sc[q];
        }
        char *A = (char *)p->a + oa * (int64_t)es, *B = (char *)p->b + ob * (int64_t)es;
        char *C = (char *)p->c + oc * (int64_t)es;
        if (p->dt == CN_F32) {
            const float one = 1.0f, beta = p->accumulate ? 1.0f : 0.0f;
            st = cb.SgemmStridedBatched(h, opb, opa, (int)p->n, (int)p->m, (int)p->k, &one,
                                        (const float *)B, (int)ldb, isb, (const float *)A,
                                        (int)lda, isa, &beta, (float *)C, (int)ldc, isc,
                                        (int)inner);
        } else {
            const double one = 1.0, beta = p->accumulate ? 1.0 : 0.0;
            st = cb.DgemmStridedBatched(h, opb, opa, (int)p->n, (int)p->m, (int)p->k, &one,
                                        (const double *)B, (int)ldb, isb, (const double *)A,
                                        (int)lda, isa, &beta, (double *)C, (int)ldc, isc,
                                        (int)inner);
        }
    }
    pthread_mutex_unlock(&d->blas_lock);
    if (st != CUBLAS_STATUS_SUCCESS)
        return cn_failc(st == CUBLAS_STATUS_ALLOC_FAILED ? CN_ENOMEM : CN_EUNSUPPORTED,
                        "%s: cuBLAS on %s: %s", fn, g->label, status_name(st));
    return CN_OK;
}
