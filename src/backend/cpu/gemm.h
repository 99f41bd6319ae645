/* Matrix products on the CPU: BLAS for f32/f64 when the build has it, and a
 * built-in blocked GEMM (packed panels, a register-tiled micro-kernel, split
 * over the pool) for every other case and for builds without BLAS.
 *
 * Every function takes each operand as a pointer and two strides in
 * elements, any sign, zero allowed: A is m x k with element (i, p) at
 * a[i*rsa + p*csa]; B is k x n with (p, j) at b[p*rsb + j*csb]. C is m x n,
 * row-major with row stride ldc >= n, and is overwritten (k = 0 gives zeros).
 * They return 0, or CN_ENOMEM after cn_fail when a buffer cannot be had.
 * Called from inside a parallel region they run serially. */
#ifndef CN_CPU_GEMM_H
#define CN_CPU_GEMM_H

#include "../../core/core.h"

/* dt: f32, f64 (BLAS when built with it), i32, i64, u8 (wrapping, like
 * PyTorch's integer matmul). Operands BLAS cannot read in place (no unit
 * stride, or a negative one) are copied first. */
int cn_gemm(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa,
             int64_t csa, const void *b, int64_t rsb, int64_t csb, void *c, int64_t ldc);

/* The built-in kernels only (never BLAS): what cn_gemm uses without BLAS. */
int cn_gemm_builtin(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa,
                    int64_t csa, const void *b, int64_t rsb, int64_t csb, void *c, int64_t ldc);

/* Register tiles of the built-in f32/f64 GEMM. The default is picked by the
 * CPU (AVX-512, AVX2, other); tests and benchmarks may force one. Returns the
 * name of tile i ("6x64", ...), or NULL when i is out of range; i = -1
 * restores the automatic choice and returns its name. Not thread-safe: call
 * it before products run. */
const char *cn_gemm_select_tile(cn_dtype dt, int i);

#endif
