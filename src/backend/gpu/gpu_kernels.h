/* Shared kernels of the structured ops: matrix products (gpu_linalg.c),
 * convolutions (gpu_conv.c), pooling (gpu_pool.c), softmax and cumsum
 * (gpu_softmax.c), joining and indexing (gpu_index.c) and the LSTM
 * sequence ops (gpu_rnn.c). Each entry has the backend seam's kernel
 * signature (backend.h) and switches on the op id where one entry serves a
 * family; gpu_table.c puts them in the table.
 *
 * Below the entries: the helpers these files share (implemented in
 * gpu_linalg.c): the device GEMM that matmul, the convolutions and the
 * LSTM use, contiguous temporaries, generated-source builds and the
 * "first bad index" flag of the indexing kernels. */
#ifndef CN_GPU_KERNELS_H
#define CN_GPU_KERNELS_H

#include "gpu.h"

/* ---- the entries (cn_kernel_fn) ---- */

/* matmul: f32, f64 (the vendor BLAS where the runtime has one), i32, i64, u8 (wrapping). */
int cn_gpu_k_matmul(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out);
/* conv2d, conv_transpose2d, conv2d_weight_grad (f32, f64). */
int cn_gpu_k_conv(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
/* max_pool2d, max_pool2d_backward, max_pool2d_indices, avg_pool2d,
 * avg_pool2d_backward, adaptive_avg_pool2d, adaptive_avg_pool2d_backward. */
int cn_gpu_k_pool(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
/* softmax, log_softmax, cumsum. */
int cn_gpu_k_softmax(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                     cn_tensor *out);
/* concat, gather, index_select, scatter_add, pad, one_hot, tril, triu,
 * slice_scatter. */
int cn_gpu_k_index(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
/* lstm_seq, lstm_seq_backward (f32, f64). */
int cn_gpu_k_rnn(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
/* scaled_dot_product_attention and its backward op (f32, f64; gpu_attention.c). */
int cn_gpu_k_attention(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                       cn_tensor *out);
/* rope (f32, f64; gpu_rope.c). */
int cn_gpu_k_rope(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);

/* ---- shared helpers (gpu_linalg.c) ---- */

#define CN_GPU_GEMM_MAX_BATCH 8

/* C = A B (or C += A B with accumulate) for every batch index, on one
 * device. A is m x k with (i, p) at a[oa + i rsa + p csa], B k x n with
 * (p, j) at b[ob + p rsb + j csb], C m x n at c[oc + i ldc + j]; strides in
 * elements, any sign, zero allowed for A and B. Batch index (b_0, ...,
 * b_{nb-1}) moves each operand's offset by sum b_d s*[d]. dt: f32, f64
 * (the runtime's vendor BLAS where its layouts allow), i32,
 * i64, u8 (wrapping). m, n or k may be 0 (k = 0: C = 0, or unchanged with
 * accumulate). */
typedef struct cn_gpu_gemm {
    cn_dtype dt;
    int64_t m, n, k;
    cn_gpu_buf a, b, c;
    int64_t oa, ob, oc;
    int64_t rsa, csa, rsb, csb, ldc;
    int nb;
    int64_t bshape[CN_GPU_GEMM_MAX_BATCH];
    int64_t bsa[CN_GPU_GEMM_MAX_BATCH], bsb[CN_GPU_GEMM_MAX_BATCH], bsc[CN_GPU_GEMM_MAX_BATCH];
    bool accumulate;
} cn_gpu_gemm;

/* How a vendor BLAS reads a rows x cols row-major operand with strides
 * (rs, cs): *trans false when its rows are contiguous (leading dimension
 * rs), true when its columns are (leading dimension cs); false when
 * neither (the plain kernel then runs). For the runtimes' gemm hooks. */
bool cn_gpu_blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans,
                        int64_t *ld);

/* Returns 0 or a negative status after cn_fail naming fn. */
int cn_gpu_gemm_run(const char *fn, cn_gpu_dev *dev, const cn_gpu_gemm *g);
/* Forces the plain GEMM kernel even where a vendor BLAS applies (tests);
 * returns the previous setting. */
bool cn_gpu_gemm_force_plain(bool on);

/* A kernel named `name` from generated source: a comment naming fn,
 * cn_gpu_prelude(), `defs` (may be NULL), then `body`.
 * NULL after cn_fail (fn names the op). */
cn_gpu_kernel cn_gpu_x_kernel(const char *fn, cn_gpu_dev *dev, const char *defs, const char *body,
                          const char *name);

/* An uninitialised contiguous tensor on t's device. NULL after cn_fail. */
cn_tensor *cn_gpu_x_empty(const cn_tensor *on, cn_dtype dt, int ndim, const int64_t *shape);
/* t itself (retained) when contiguous, else a contiguous copy on its
 * device; NULL (t NULL, or after cn_fail). */
cn_tensor *cn_gpu_x_contig(const cn_tensor *t);
/* dst = src through the backend's copy (views of one device). */
int cn_gpu_x_copy(cn_tensor *dst, const cn_tensor *src);

/* An error when dt is f64 on a device without double precision. */
static inline int cn_gpu_x_fp64(const char *fn, const cn_gpu_dev *dev, cn_dtype dt) {
    return cn_gpu_check_dtype(fn, dev, dt);
}

/* Global size rounded up to a multiple of local. */
static inline size_t cn_gpu_x_round(int64_t n, size_t local) {
    size_t u = n > 0 ? (size_t)n : 1;
    return (u + local - 1) / local * local;
}

/* A kernel of `body` for a float dtype (f32, f64), with T defined as its
 * OpenCL type and ACC as the accumulator (double where the device has it);
 * an error naming fn for other dtypes. */
cn_gpu_kernel cn_gpu_x_float_kernel(const char *fn, cn_gpu_dev *dev, cn_dtype dt, const char *body,
                                const char *name);
/* k over n work items, one each, in groups of 64 (kernels check
 * get_global_id(0) < n themselves). */
int cn_gpu_x_launch1(const char *fn, cn_gpu_dev *dev, cn_gpu_kernel k, int nargs,
                     const cn_gpu_arg *args, int64_t n);

/* The "first bad value" flag of kernels that check indices: a small
 * device buffer {int hit; int pad; long value}. Kernels take it as
 * `__global int *bad` and report with CN_GPU_BAD(bad, v) (source below). */
typedef struct cn_gpu_flag {
    cn_tensor *t;
    cn_gpu_buf mem;
} cn_gpu_flag;
int cn_gpu_flag_new(const cn_tensor *on, cn_gpu_flag *f);
/* 1 and *value when a kernel reported, 0 when not, < 0 on a device error. */
int cn_gpu_flag_read(cn_gpu_flag *f, int64_t *value);
void cn_gpu_flag_free(cn_gpu_flag *f);
#define CN_GPU_BAD_SRC                                                                             \
    "#define CN_GPU_BAD(bad, v) do { if (atomic_cmpxchg((volatile __global int *)(bad), 0, 1) "    \
    "== 0) ((__global long *)(bad))[1] = (long)(v); } while (0)\n"

/* Shapes and strides as kernels take them: 8 longs by value (declared in
 * kernel source as `typedef struct { long v[8]; } nd8;`). */
typedef struct cn_gpu_nd8 {
    int64_t v[8];
} cn_gpu_nd8;
#define CN_GPU_ND8_SRC "typedef struct { long v[8]; } nd8;\n"

/* The element type of a dtype for kernels that only move bits. */
static inline const char *cn_gpu_x_bits_type(cn_dtype dt) {
    switch (cn_dsize(dt)) {
    case 1: return "uchar";
    case 2: return "ushort";
    case 4: return "uint";
    default: return "ulong";
    }
}

#endif
