/* The CUDA backend's runtime: the driver API loaded at run time
 * (cuda_driver.c), devices with one context (the primary one, which
 * cuBLAS shares) and one stream each, the shared kernels
 * (src/backend/gpu) compiled by NVRTC (cuda_nvrtc.c), cuBLAS's GEMM
 * (cuda_blas.c), buffers, copies and events (cuda_runtime.c).
 *
 * The driver library (libcuda.so.1) comes with the GPU's driver, not with
 * the toolkit this is built against, so it is opened with dlopen: a build
 * with CUDA runs on machines without a GPU or driver, and finds no CUDA
 * devices there. NVRTC, cuBLAS and NCCL (../dist_nccl.c) are opened on
 * first use too, so that a program pays for them only when it uses them. */
#ifndef CN_CUDA_BACKEND_H
#define CN_CUDA_BACKEND_H

#include <cuda.h>

#include "../gpu/gpu.h"

/* ---- the driver API, resolved from libcuda.so.1 (cuda_driver.c) ---- */
typedef struct cn_cu_api {
    CUresult (*Init)(unsigned int flags);
    CUresult (*DriverGetVersion)(int *v);
    CUresult (*DeviceGetCount)(int *n);
    CUresult (*DeviceGet)(CUdevice *d, int ordinal);
    CUresult (*DeviceGetName)(char *name, int len, CUdevice d);
    CUresult (*DeviceGetAttribute)(int *v, CUdevice_attribute a, CUdevice d);
    CUresult (*DeviceTotalMem)(size_t *bytes, CUdevice d);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice d);
    CUresult (*CtxSetCurrent)(CUcontext ctx);
    CUresult (*StreamCreate)(CUstream *s, unsigned int flags);
    CUresult (*StreamSynchronize)(CUstream s);
    CUresult (*MemAlloc)(CUdeviceptr *p, size_t bytes);
    CUresult (*MemFree)(CUdeviceptr p);
    CUresult (*MemGetInfo)(size_t *free_bytes, size_t *total);
    CUresult (*MemHostAlloc)(void **p, size_t bytes, unsigned int flags);
    CUresult (*MemFreeHost)(void *p);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t n, CUstream s);
    CUresult (*MemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t n, CUstream s);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
    CUresult (*ModuleLoadData)(CUmodule *m, const void *image);
    CUresult (*ModuleGetFunction)(CUfunction *f, CUmodule m, const char *name);
    CUresult (*FuncGetAttribute)(int *v, CUfunction_attribute a, CUfunction f);
    CUresult (*LaunchKernel)(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz,
                             unsigned int shared, CUstream s, void **params, void **extra);
    CUresult (*EventCreate)(CUevent *e, unsigned int flags);
    CUresult (*EventRecord)(CUevent e, CUstream s);
    CUresult (*EventSynchronize)(CUevent e);
    CUresult (*EventQuery)(CUevent e);
    CUresult (*EventDestroy)(CUevent e);
    CUresult (*GetErrorName)(CUresult r, const char **s);
} cn_cu_api;

/* The driver's functions, or NULL when there is no driver (dlopen or
 * cuInit failed: the reason is in cn_cu_why()). Loaded once. */
const cn_cu_api *cn_cu(void);
const char *cn_cu_why(void);
/* A driver error as a Chutney error: "fn: what: CUDA_ERROR_OUT_OF_MEMORY (2)".
 * Returns CN_ENOMEM for out-of-memory errors, else CN_EUNSUPPORTED. */
int cn_cu_fail(const char *fn, const char *what, CUresult r);
const char *cn_cu_err_name(CUresult r);

/* ---- devices (cuda_runtime.c) ---- */
typedef struct cn_cuda_dev {
    cn_gpu_dev g; /* the shared kernels' view first */
    CUdevice dev;
    CUcontext ctx; /* the primary context (cuBLAS and the CUDA runtime use it too) */
    CUstream stream;
    int cc_major, cc_minor; /* compute capability */
    size_t total_mem;
    void *blas;                /* cublasHandle_t, made on first use (cuda_blas.c) */
    pthread_mutex_t blas_lock; /* cuBLAS handles are not for two threads at once */
} cn_cuda_dev;

int cn_cuda_device_count(void); /* 0 without a driver or GPU; never fails */
cn_cuda_dev *cn_cuda_dev_get(int index);
cn_cuda_dev *cn_cuda_dev_of(const cn_storage *s);
cn_gpu_dev *cn_cuda_gpu_dev(int index);
/* Makes d's context current on this thread (every entry point calls it:
 * a context is per thread). 0 or a negative status after cn_fail. */
int cn_cuda_enter(const char *fn, cn_cuda_dev *d);

/* ---- NVRTC (cuda_nvrtc.c) ---- */
#include "cuda_nvrtc.h"

/* ---- cuBLAS (cuda_blas.c; cn_cuda_blas_load is in cuda_nvrtc.h) ---- */
int cn_cuda_gemm_cublas(const char *fn, cn_gpu_dev *dev, const struct cn_gpu_gemm *g);
/* TF32 tensor cores for f32 products: off unless asked for (here, or the
 * environment's CN_CUDA_TF32=1), as PyTorch's default for matmul. */
void cn_cuda_set_tf32(bool on);

/* ---- the table's entries (cuda_runtime.c) ---- */
int cn_cuda_device_info(int index, cn_device_info *info);
int cn_cuda_write(cn_storage *dst, size_t dst_off, const void *src, size_t n, bool async);
int cn_cuda_read(const cn_storage *src, size_t src_off, void *dst, size_t n);
int cn_cuda_copy_bytes(cn_storage *dst, size_t dst_off, const cn_storage *src, size_t src_off,
                       size_t n);
int cn_cuda_synchronize(int index);
void *cn_cuda_event_record(int index);
int cn_cuda_event_synchronize(void *ev);
bool cn_cuda_event_query(void *ev);
void cn_cuda_event_free(void *ev);

#endif
