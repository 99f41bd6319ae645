/* The parts of the CUDA backend that need no GPU: NVRTC compiling the
 * shared kernels' source (tests compile every kernel the OpenCL backend
 * ran), and opening cuBLAS (tests check that every function the backend
 * calls resolves). Free of the driver's header so tests can include it. */
#ifndef CN_CUDA_NVRTC_H
#define CN_CUDA_NVRTC_H

#include <stddef.h>

/* The CUDA side of the shared kernels' dialect (gpu.h), put in front of
 * every program. */
const char *cn_cuda_dialect(void);
/* Compiles source (the dialect header goes in front) for `arch`
 * ("sm_90" for a device's own code, "compute_80" for PTX) with extra
 * options (may be NULL). Returns the image (CUBIN for sm_, PTX text
 * NUL-terminated for compute_; free() it) and its size, or NULL after
 * cn_fail carrying the compiler's log. */
void *cn_cuda_compile(const char *src, const char *opts, const char *arch, size_t *size);
/* cn_cuda_compile through the on-disk cache of compiled kernels
 * (cuda_kcache.c: where it is, and CN_CUDA_KERNEL_CACHE=0 to turn it off). */
void *cn_cuda_compile_cached(const char *src, const char *opts, const char *arch, size_t *size);
/* NVRTC's version as major * 1000 + minor * 10, or 0 when it is not there. */
int cn_cuda_nvrtc_version(void);
/* The newest architecture this NVRTC compiles for (90 for sm_90). */
int cn_cuda_nvrtc_newest(int *arch);

/* cuBLAS (cuda_blas.c), opened once, here or on the first product it could
 * take: 1 when loaded, 0 when not found (the products run the shared
 * kernel), -1 when the library lacks a function cuda_blas.c calls (the
 * same); *why (if not NULL): the library, or why not. */
int cn_cuda_blas_load(const char **why);

#endif
