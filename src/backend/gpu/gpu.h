/* Kernels shared by the backends that run generated source on a device
 * (OpenCL and CUDA): every op's kernel is written once, as source in the C
 * subset OpenCL C and CUDA C have in common, and each backend's runtime
 * compiles it (OpenCL's compiler, or NVRTC) behind the small interface
 * below (cn_gpu_runtime). The kernel files (gpu_*.c) see a device only
 * through cn_gpu_dev and that interface.
 *
 * The source dialect: kernels are OpenCL C (`__kernel`, `__global`,
 * `__local`, get_global_id, barrier, as_float, ...). The CUDA runtime puts
 * a header of definitions in front that maps each of those onto CUDA
 * (src/backend/cuda/cuda_dialect.c); helper functions are declared with
 * CN_FN, which each dialect defines (inline, or __device__ inline).
 *
 * A storage's data is the device's buffer handle (a cl_mem, or a CUDA
 * device pointer), the whole buffer: tensors address it by element offset,
 * passed to kernels as an argument, so views need no sub-buffers. Each
 * device has one in-order queue (stream): everything issued to a device
 * runs in issue order, so kernels need no events between them, and a
 * temporary buffer may go back to the cache right after the launch that
 * uses it is issued (whoever gets it next issues after that launch). */
#ifndef CN_GPU_H
#define CN_GPU_H

#include "../backend.h"

#include <pthread.h>

typedef void *cn_gpu_buf;    /* a device buffer: cl_mem, or a CUDA device pointer */
typedef void *cn_gpu_kernel; /* a compiled kernel: cl_kernel, or a CUfunction */

typedef struct cn_gpu_dev cn_gpu_dev;
struct cn_gpu_gemm;

/* Kernel arguments, in order: a value's size and address (a buffer is
 * passed as its handle's value). */
typedef struct cn_gpu_arg {
    size_t size;
    const void *value;
} cn_gpu_arg;
#define CN_GPU_MEM(m) ((cn_gpu_arg){sizeof(cn_gpu_buf), &(m)})
#define CN_GPU_VAL(v) ((cn_gpu_arg){sizeof(v), &(v)})

/* What a backend's runtime provides to the shared kernels. */
typedef struct cn_gpu_runtime {
    /* Compiles source (its dialect header goes in front) with extra
     * options (may be NULL); NULL after cn_fail carrying the compiler's
     * log. The program lives as long as the process (the cache keeps it). */
    void *(*build)(cn_gpu_dev *dev, const char *src, const char *opts);
    /* The kernel `name` of a built program; NULL after cn_fail. */
    cn_gpu_kernel (*kernel)(cn_gpu_dev *dev, void *prog, const char *name);
    /* The largest work group k can be launched with. */
    size_t (*kernel_max_group)(cn_gpu_dev *dev, cn_gpu_kernel k);
    /* Issues k over `global` work items in `dims` dimensions (1-3), in
     * groups of `local` (global a multiple of it per dimension; NULL lets
     * the runtime choose, and then kernels must not depend on the group).
     * Returns 0 or a negative status after cn_fail naming fn. */
    int (*launch)(const char *fn, cn_gpu_dev *dev, cn_gpu_kernel k, int nargs,
                  const cn_gpu_arg *args, unsigned dims, const size_t *global,
                  const size_t *local);
    /* A new device buffer of exactly nbytes; NULL with a reason in why. */
    cn_gpu_buf (*mem_alloc)(cn_gpu_dev *dev, size_t nbytes, char *why, size_t nwhy);
    void (*mem_free)(cn_gpu_dev *dev, cn_gpu_buf m);
    /* Optional: a vendor BLAS for cn_gpu_gemm_run. 0 when it did the
     * product, 1 when it does not apply (the plain kernel runs), < 0 on an
     * error (after cn_fail). */
    int (*gemm)(const char *fn, cn_gpu_dev *dev, const struct cn_gpu_gemm *g);
} cn_gpu_runtime;

/* One device of a backend that runs the shared kernels. */
struct cn_gpu_dev {
    const cn_gpu_runtime *rt;
    cn_device_kind kind;
    int index;          /* among the devices of its kind */
    char label[24];     /* "opencl:0", "cuda:1": for messages */
    char name[128];     /* the device's own name */
    bool fp64;          /* f64 kernels can be built and run */
    size_t max_wg;      /* the largest work group */
    unsigned units;     /* compute units (multiprocessors) */
    uint64_t max_alloc; /* the largest single buffer (0: no limit known) */
    void *impl;         /* the runtime's own state */
};

/* Device `index` of `kind` (the backend's runtime initialised on first
 * use); NULL after cn_fail when there is no such device. */
cn_gpu_dev *cn_gpu_dev_get(cn_device_kind kind, int index);
/* The device a storage lives on (NULL after cn_fail if not such a device). */
cn_gpu_dev *cn_gpu_dev_of(const cn_storage *s);

/* The buffer of a tensor's storage. */
static inline cn_gpu_buf cn_gpu_buf_of(const cn_tensor *t) { return (cn_gpu_buf)t->storage->data; }

/* A kernel of a program built from `source` (with build options `opts`,
 * may be NULL) on dev, cached by (device, source, options, name), so each
 * distinct generated source is compiled once per process. NULL after
 * cn_fail (a build failure carries the compiler's log). */
cn_gpu_kernel cn_gpu_kernel_get(cn_gpu_dev *dev, const char *source, const char *opts,
                                const char *name);
/* A kernel remembered under a short key naming everything its generated
 * source depends on, so a launch that hits skips generating and hashing
 * the source (kilobytes): what an eager op on a GPU costs on the host.
 * NULL: not remembered (nothing is set). Keys are at most
 * CN_GPU_MEMO_KEY - 1 characters; a caller whose key does not fit looks
 * the source up instead. */
#define CN_GPU_MEMO_KEY 768
cn_gpu_kernel cn_gpu_kernel_memo(cn_gpu_dev *dev, const char *key);
void cn_gpu_kernel_memo_put(cn_gpu_dev *dev, const char *key, cn_gpu_kernel k);
/* Calls fn(source, opts, ctx) for every program source built so far, of
 * every device kind (the CUDA tests compile what OpenCL ran). */
void cn_gpu_sources_foreach(void (*fn)(const char *src, const char *opts, void *ctx), void *ctx);

/* For the runtimes' build errors: the first lines of a compiler log that
 * fit in n bytes, from its first line containing "error"; and the first
 * line of a generated source (a comment naming the kernel family). */
void cn_gpu_log_excerpt(const char *log, char *out, size_t n);
void cn_gpu_source_head(const char *src, char *out, size_t n);
/* For the runtimes' byte copies: false after cn_fail naming fn when bytes
 * [off, off + n) are not inside s. */
bool cn_gpu_range_ok(const char *fn, const cn_storage *s, size_t off, size_t n);

/* Issues k (see cn_gpu_runtime.launch). */
static inline int cn_gpu_launch(const char *fn, cn_gpu_dev *dev, cn_gpu_kernel k, int nargs,
                                const cn_gpu_arg *args, unsigned dims, const size_t *global,
                                const size_t *local) {
    if (!k) return CN_EINVAL;
    return dev->rt->launch(fn, dev, k, nargs, args, dims, global, local);
}
/* The same for a 1-D grid-stride kernel over n items: picks a group size
 * (at most 256, within the kernel's limit) and a number of groups (enough
 * for n, at most a few per compute unit times 64k items); the kernel
 * loops `for (long i = get_global_id(0); i < n; i += get_global_size(0))`.
 * Nothing is issued for n <= 0. */
int cn_gpu_launch_n(const char *fn, cn_gpu_dev *dev, cn_gpu_kernel k, int nargs,
                    const cn_gpu_arg *args, int64_t n);

/* The OpenCL C type of a dtype ("float", "double", "half" is stored as
 * "ushort", "long", "int", "uchar"), and source text with conversions
 * between dtypes as macros (f16/bf16 bits to and from float, bool as 0/1):
 * every generated program starts with cn_gpu_prelude() (after the
 * runtime's dialect header). The prelude defines
 *   cn_layout (the kernels' twin of cn_gpu_layout),
 *   float cn_h2f(ushort), ushort cn_f2h(float)    f16 <-> f32 (RNE, as dtype.c)
 *   float cn_bf2f(ushort), ushort cn_f2bf(float)  bf16 <-> f32 (RNE, as dtype.c)
 *   long cn_f2l(float) [and cn_d2l(double) with CN_FP64]: float -> i64,
 *     truncating, saturating, NaN -> 0 (cn_cast's rule)
 *   CN_OFFSET(l, i): the element offset of flat index i (long) in layout l
 *     (a cn_layout value), for any rank up to 8. */
const char *cn_gpu_ctype(cn_dtype dt);
const char *cn_gpu_prelude(void);
/* An error (CN_EUNSUPPORTED) naming fn and the device when dt is f64 and
 * the device has no double precision; else 0. */
int cn_gpu_check_dtype(const char *fn, const cn_gpu_dev *dev, cn_dtype dt);

/* Strided addressing: a tensor's layout as kernels read it. Shapes and
 * strides are passed collapsed (size-1 axes dropped, mergeable axes merged)
 * in a struct argument; a kernel computes an element's offset from its flat
 * output index. */
#define CN_GPU_MAX_DIMS 8
typedef struct cn_gpu_layout {
    int64_t offset;                  /* elements */
    int64_t ndim;
    int64_t shape[CN_GPU_MAX_DIMS];
    int64_t strides[CN_GPU_MAX_DIMS];/* elements; 0 on broadcast axes */
} cn_gpu_layout;
/* t's layout broadcast to out_shape (rank out_ndim). */
void cn_gpu_layout_of(const cn_tensor *t, int out_ndim, const int64_t *out_shape,
                      cn_gpu_layout *l);
/* The layouts of n tensors broadcast to (out_ndim, out_shape), collapsed
 * jointly (an axis merges with the next only where it does for every
 * tensor), so all n share one shape. Returns the common rank (0 for one
 * element). */
int cn_gpu_layouts(int n, const cn_tensor *const *ts, int out_ndim, const int64_t *out_shape,
                   cn_gpu_layout *ls);

/* ---- memory (gpu_alloc.c): a caching allocator per device ---- */
/* A storage of nbytes (at least 64 bytes of buffer) on the device, from
 * the cache; NULL after cn_fail naming the device and the size. */
cn_storage *cn_gpu_storage_new(cn_device_kind kind, int index, size_t nbytes);
int cn_gpu_memory_stats(cn_device_kind kind, int index, cn_memory_stats *s);
size_t cn_gpu_empty_cache(cn_device_kind kind, int index);
/* A temporary device buffer of nbytes for one launch (release it with
 * cn_storage_release right after issuing: the in-order queue keeps it
 * valid for that launch). */
static inline cn_storage *cn_gpu_temp(cn_gpu_dev *dev, size_t nbytes) {
    return cn_gpu_storage_new(dev->kind, dev->index, nbytes);
}

/* ---- byte copies through the device's backend (backend.h) ---- */
int cn_gpu_write(cn_storage *dst, size_t dst_off, const void *src, size_t n, bool async);
int cn_gpu_read(const cn_storage *src, size_t src_off, void *dst, size_t n);
int cn_gpu_copy_bytes(cn_storage *dst, size_t dst_off, const cn_storage *src, size_t src_off,
                      size_t n);

/* ---- the backend table's shared entries ---- */
/* Kernels for every op the shared files implement, indexed by op id. */
extern const cn_kernel_fn cn_gpu_kernels[CN_OP_COUNT];
int cn_gpu_copy(cn_tensor *dst, const cn_tensor *src);
int cn_gpu_fill(cn_tensor *t, double v);
int cn_gpu_random_fill(cn_tensor *out, cn_random_kind kind, double p0, double p1, uint64_t key,
                       uint64_t counter);
/* The OpenCL C of Philox-4x32-10 the draws use (gpu_random.c): cn_philox(key,
 * counter) -> cn_u4 {s0, s1, s2, s3}, bit for bit cn_philox on the host. */
const char *cn_gpu_philox_source(void);
int cn_gpu_fused_run(const cn_fused_expr *e, cn_tensor *const *in, cn_tensor *out);
int cn_gpu_optim_update(const cn_optim_update *u, int n);

/* Kernels (cn_kernel_fn), one per family. */
int cn_gpu_k_copy(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
int cn_gpu_k_full_like(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                       cn_tensor *out);
int cn_gpu_k_unary(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
int cn_gpu_k_binary(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
int cn_gpu_k_where(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
int cn_gpu_k_reduce(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
int cn_gpu_k_bernoulli(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                       cn_tensor *out);

/* ---- source generation helpers (gpu_elementwise.c) ---- */
/* A growing string for generated source. */
typedef struct cn_gpu_src {
    char *buf;
    size_t len, cap;
    bool oom;
} cn_gpu_src;
void cn_gpu_src_add(cn_gpu_src *s, const char *fmt, ...) CN_PRINTF(2, 3);
void cn_gpu_src_free(cn_gpu_src *s);
/* The math helpers the expressions below call (cn_sigmoid_f, cn_pow_d,
 * cn_ipow, ...): add them after the prelude. */
void cn_gpu_add_ew_helpers(cn_gpu_src *s);
/* A literal of value v in OpenCL C of type T (f32: "0x1.8p+1f", f64:
 * "0x1.8p+1", infinities and NaN as (T)INFINITY / (T)NAN) into buf (>= 48). */
const char *cn_gpu_literal(char *buf, double v, cn_dtype T);
/* The expression of unary op id (float or integer T) applied to `x`, with
 * parameters as the OpenCL C expressions p0, p1 (of type T), into buf
 * (>= 512); NULL if the op has no formula for T. For the fused kernel and
 * the unary kernels. */
const char *cn_gpu_unary_expr(char *buf, size_t n, cn_op_id id, const cn_attrs *a, cn_dtype T,
                              const char *x, const char *p0, const char *p1);
/* The expression of arithmetic or comparison op id on `x`, `y` of type T. */
const char *cn_gpu_binary_expr(char *buf, size_t n, cn_op_id id, cn_dtype T, const char *x,
                               const char *y);
/* An expression converting `x` (of dtype S, its storage type) to dtype D's
 * storage type with cn_cast's rules; fp64 says double may be used. */
const char *cn_gpu_cast_expr(char *buf, size_t n, cn_dtype S, cn_dtype D, const char *x,
                             bool fp64);

#endif
