/* Autocast's native products (matmul_dnnl.c): bf16 or f16 operands
 * multiplied by the CPU's own instructions through oneDNN, summed and
 * returned in f32. */
#ifndef CN_CPU_MATMUL_DNNL_H
#define CN_CPU_MATMUL_DNNL_H

#include "../../core/core.h"
#include "gemm.h"

/* c [m, n] (f32, rows of n) = a [m, k] @ b [k, n], a and b of dtype dt
 * with row and column strides in elements; rows split over the pool.
 * Returns 1 when oneDNN has no kernel for it (this build has no oneDNN,
 * the CPU lacks the instructions, or the layout is not one it takes: the
 * caller multiplies another way), else 0 or CN_ENOMEM after cn_fail. dt
 * may be f32, which the tests use to check the blocking on any CPU. */
int cn_dnnl_matmul(cn_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa,
                   int64_t csa, const void *b, int64_t rsb, int64_t csb, float *c,
                   const cn_gemm_pack *bpk);

/* bpk above: b, a program's constant half weight [k, n] (a view with any
 * strides), reordered once into the format in which the blocks of a
 * product of m rows read it at the current thread count (oneDNN's bf16
 * products otherwise copy b into it on every call); have, the step's pack
 * so far, is returned when it still fits. NULL where oneDNN has no such
 * format: the products then read b as it is, as they also do when a
 * product's blocks want another format than the pack's. */
cn_gemm_pack *cn_dnnl_matmul_pack(int64_t m, const cn_tensor *b, const cn_gemm_pack *have);

/* The selection of autocast's native path (cn_autocast_native): mode 0
 * off, 1 on (the products then still fall back to f32 where oneDNN has
 * no kernel: for tests of the path on any CPU), -1 automatic: on when the
 * CPU has the instructions and oneDNN makes a primitive. */
bool cn_autocast_native_choice(int mode, bool cpu_has, bool dnnl_has);
/* The mode for this process (CN_AUTOCAST_NATIVE=0|1|auto until set);
 * tests set it. */
void cn_autocast_native_mode_set(int mode);

#endif
