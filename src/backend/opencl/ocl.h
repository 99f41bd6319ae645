/* The OpenCL backend's runtime, shared by its kernel files: devices and
 * queues, the caching allocator, programs compiled from generated source and
 * cached by that source, and kernel launches.
 *
 * A storage's data is a cl_mem (the whole buffer; tensors address it by
 * element offset, passed to kernels as an argument, so views need no
 * sub-buffers). Each device has one in-order queue: everything issued to a
 * device runs in issue order, so kernels need no events between them (and
 * a temporary buffer may go back to the cache right after the launch that
 * uses it is enqueued: whoever gets it next enqueues after that launch). */
#ifndef CN_OCL_H
#define CN_OCL_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "../backend.h"

#include <pthread.h>

/* One device: its context, in-order queue, and what the kernels need to know. */
typedef struct cn_ocl_dev {
    cl_platform_id platform;
    cl_device_id id;
    cl_context ctx;
    cl_command_queue queue;
    bool fp64;        /* cl_khr_fp64: f64 kernels can be built */
    size_t max_wg;    /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    cl_uint units;    /* compute units */
    /* added by the runtime: */
    int index;                /* its index among the OpenCL devices */
    char name[128];           /* CL_DEVICE_NAME */
    bool correct_divsqrt;     /* f32 / and sqrt correctly rounded (build option given) */
    cl_ulong max_alloc;       /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    pthread_mutex_t launch_lock; /* kernel arguments + enqueue (cn_ocl_launch) */
} cn_ocl_dev;

/* Device `index` (initialising the runtime on first use); NULL after cn_fail
 * when there is no such device. */
cn_ocl_dev *cn_ocl_dev_get(int index);
/* The device a storage lives on. */
cn_ocl_dev *cn_ocl_dev_of(const cn_storage *s);
/* The number of OpenCL devices (0 without a platform; never fails). */
int cn_ocl_device_count(void);

/* cl_mem of a tensor's storage. */
static inline cl_mem cn_ocl_mem(const cn_tensor *t) { return (cl_mem)t->storage->data; }

/* An OpenCL error as a Chutney error: "fn: what failed: CL_OUT_OF_RESOURCES (-5)".
 * Returns a negative status (CN_ENOMEM for allocation failures, else
 * CN_EUNSUPPORTED/CN_EINVAL as fits). */
int cn_ocl_fail(const char *fn, const char *what, cl_int err);
const char *cn_ocl_err_name(cl_int err);

/* A kernel of a program built from `source` (with build options `opts`,
 * may be NULL) on dev, cached by (device, source, options, name), so each
 * distinct generated source is compiled once per process. A build failure is
 * an error carrying the compiler's log. The kernel object is shared: set its
 * arguments and enqueue it under the device's launch lock (cn_ocl_launch).
 * The runtime adds its own options: -DCN_FP64 where the device has fp64
 * (cn_ocl_prelude enables the extension then) and
 * -cl-fp32-correctly-rounded-divide-sqrt where the device supports it. */
cl_kernel cn_ocl_kernel(cn_ocl_dev *dev, const char *source, const char *opts, const char *name);

/* Kernel arguments, set in order by cn_ocl_launch. */
typedef struct cn_ocl_arg {
    size_t size;      /* sizeof the value, or 0 for a __local buffer of `local` bytes */
    const void *value;
    size_t local;
} cn_ocl_arg;
#define CN_OCL_MEM(m) ((cn_ocl_arg){sizeof(cl_mem), &(m), 0})
#define CN_OCL_VAL(v) ((cn_ocl_arg){sizeof(v), &(v), 0})
#define CN_OCL_LOCAL(bytes) ((cn_ocl_arg){0, NULL, (bytes)})

/* Set the arguments and enqueue k over `global` work items (1-3 dims; local
 * may be NULL), atomically with respect to other launches of the same kernel.
 * Returns 0 or a negative status after cn_fail naming fn. */
int cn_ocl_launch(const char *fn, cn_ocl_dev *dev, cl_kernel k, int nargs, const cn_ocl_arg *args,
                  cl_uint work_dim, const size_t *global, const size_t *local);
/* The same for a 1-D grid-stride kernel over n items: picks a work-group
 * size (at most 256, within the kernel's limit) and a number of groups
 * (enough for n, at most a few per compute unit times 64k items); the
 * kernel loops `for (long i = get_global_id(0); i < n; i += get_global_size(0))`.
 * Nothing is enqueued for n <= 0. */
int cn_ocl_launch_n(const char *fn, cn_ocl_dev *dev, cl_kernel k, int nargs,
                    const cn_ocl_arg *args, int64_t n);

/* The OpenCL C type of a dtype ("float", "double", "half" is stored as
 * "ushort", "long", "int", "uchar"), and source text with conversions
 * between dtypes as macros (f16/bf16 bits to and from float, bool as 0/1):
 * every generated program starts with cn_ocl_prelude(). The prelude defines
 *   cn_layout (the OpenCL C twin of cn_ocl_layout),
 *   float cn_h2f(ushort), ushort cn_f2h(float)    f16 <-> f32 (RNE, as dtype.c)
 *   float cn_bf2f(ushort), ushort cn_f2bf(float)  bf16 <-> f32 (RNE, as dtype.c)
 *   long cn_f2l(float) [and cn_d2l(double) with CN_FP64]: float -> i64,
 *     truncating, saturating, NaN -> 0 (cn_cast's rule)
 *   CN_OFFSET(l, i): the element offset of flat index i (long) in layout l
 *     (a cn_layout value), for any rank up to 8. */
const char *cn_ocl_ctype(cn_dtype dt);
const char *cn_ocl_prelude(void);
/* An error (CN_EUNSUPPORTED) naming fn and the device when dt is f64 and
 * the device has no cl_khr_fp64; else 0. */
int cn_ocl_check_dtype(const char *fn, const cn_ocl_dev *dev, cn_dtype dt);

/* Strided addressing: a tensor's layout as kernels read it. Shapes and
 * strides are passed collapsed (size-1 axes dropped, mergeable axes merged)
 * in a struct argument; a kernel computes an element's offset from its flat
 * output index. */
#define CN_OCL_MAX_DIMS 8
typedef struct cn_ocl_layout {
    cl_long offset;                  /* elements */
    cl_long ndim;
    cl_long shape[CN_OCL_MAX_DIMS];
    cl_long strides[CN_OCL_MAX_DIMS];/* elements; 0 on broadcast axes */
} cn_ocl_layout;
/* t's layout broadcast to out_shape (rank out_ndim). */
void cn_ocl_layout_of(const cn_tensor *t, int out_ndim, const int64_t *out_shape,
                      cn_ocl_layout *l);
/* The layouts of n tensors broadcast to (out_ndim, out_shape), collapsed
 * jointly (an axis merges with the next only where it does for every
 * tensor), so all n share one shape. Returns the common rank (0 for one
 * element). */
int cn_ocl_layouts(int n, const cn_tensor *const *ts, int out_ndim, const int64_t *out_shape,
                   cn_ocl_layout *ls);

/* ---- memory (ocl_alloc.c) ---- */
/* A storage of nbytes (at least 64 bytes of buffer) on device index, from
 * the cache; NULL after cn_fail naming the device and the size. */
cn_storage *cn_ocl_storage_new(int index, size_t nbytes);
int cn_ocl_memory_stats(int index, cn_memory_stats *s);
size_t cn_ocl_empty_cache(int index);
/* A temporary device buffer of nbytes for one launch (release it with
 * cn_storage_release right after enqueueing: the in-order queue keeps it
 * valid for that launch). */
static inline cn_storage *cn_ocl_temp(cn_ocl_dev *dev, size_t nbytes) {
    return cn_ocl_storage_new(dev->index, nbytes);
}

/* ---- the table's entries (ocl_runtime.c, ocl_elementwise.c, ...) ---- */
int cn_ocl_device_info(int index, cn_device_info *info);
int cn_ocl_write(cn_storage *dst, size_t dst_off, const void *src, size_t n, bool async);
int cn_ocl_read(const cn_storage *src, size_t src_off, void *dst, size_t n);
int cn_ocl_copy_bytes(cn_storage *dst, size_t dst_off, const cn_storage *src, size_t src_off,
                      size_t n);
int cn_ocl_synchronize(int index);
void *cn_ocl_event_record(int index);
int cn_ocl_event_synchronize(void *ev);
bool cn_ocl_event_query(void *ev);
void cn_ocl_event_free(void *ev);

int cn_ocl_copy(cn_tensor *dst, const cn_tensor *src);
int cn_ocl_fill(cn_tensor *t, double v);
int cn_ocl_random_fill(cn_tensor *out, cn_random_kind kind, double p0, double p1, uint64_t key,
                       uint64_t counter);
int cn_ocl_fused_run(const cn_fused_expr *e, cn_tensor *const *in, cn_tensor *out);
int cn_ocl_optim_update(const cn_optim_update *u, int n);

/* Kernels (cn_kernel_fn), one per family. */
int cn_ocl_k_copy(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
int cn_ocl_k_full_like(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                       cn_tensor *out);
int cn_ocl_k_unary(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
int cn_ocl_k_binary(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
int cn_ocl_k_where(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
int cn_ocl_k_reduce(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out);
int cn_ocl_k_bernoulli(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                       cn_tensor *out);

/* ---- source generation helpers (ocl_elementwise.c) ---- */
/* A growing string for generated source. */
typedef struct cn_ocl_src {
    char *buf;
    size_t len, cap;
    bool oom;
} cn_ocl_src;
void cn_ocl_src_add(cn_ocl_src *s, const char *fmt, ...) CN_PRINTF(2, 3);
void cn_ocl_src_free(cn_ocl_src *s);
/* The math helpers the expressions below call (cn_sigmoid_f, cn_pow_d,
 * cn_ipow, ...): add them after the prelude. */
void cn_ocl_add_ew_helpers(cn_ocl_src *s);
/* A literal of value v in OpenCL C of type T (f32: "0x1.8p+1f", f64:
 * "0x1.8p+1", infinities and NaN as (T)INFINITY / (T)NAN) into buf (>= 48). */
const char *cn_ocl_literal(char *buf, double v, cn_dtype T);
/* The expression of unary op id (float or integer T) applied to `x`, with
 * parameters as the OpenCL C expressions p0, p1 (of type T), into buf
 * (>= 512); NULL if the op has no formula for T. For the fused kernel and
 * the unary kernels. */
const char *cn_ocl_unary_expr(char *buf, size_t n, cn_op_id id, const cn_attrs *a, cn_dtype T,
                              const char *x, const char *p0, const char *p1);
/* The expression of arithmetic or comparison op id on `x`, `y` of type T. */
const char *cn_ocl_binary_expr(char *buf, size_t n, cn_op_id id, cn_dtype T, const char *x,
                               const char *y);
/* An expression converting `x` (of dtype S, its storage type) to dtype D's
 * storage type with cn_cast's rules; fp64 says double may be used. */
const char *cn_ocl_cast_expr(char *buf, size_t n, cn_dtype S, cn_dtype D, const char *x,
                             bool fp64);

#endif
