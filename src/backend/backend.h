/* The backend seam: what a device must provide, as one table per backend.
 *
 * Op definitions (src/ops: attributes, shape inference, gradient rules, ONNX
 * names) know no device. The dispatcher (src/ops/dispatch.c) takes the
 * device of the inputs, the program executor (src/graph/program.c) the one
 * placement gave the step (src/graph/passes/place.c); they find its
 * backend here and call the table: kernels by op id, the fused-group entry,
 * copies, fills. The CPU is one backend like the others
 * (src/backend/cpu/backend_cpu.c); OpenCL is src/backend/opencl.
 * docs/backends.md walks through adding one.
 *
 * Layers: core <- backend <- ops <- graph <- nn, data, io <- tools. A
 * backend includes core and backend headers only. */
#ifndef CN_BACKEND_H
#define CN_BACKEND_H

#include "../core/core.h"
#include "fused_expr.h"
#include "optim_update.h"

/* Compute op `id` into out. out is allocated on the backend's device,
 * contiguous, of the shape and dtype the op's inference gave; the inputs are
 * on the same device (the dispatcher moved rank-0 CPU operands there) with
 * any strides, offsets and broadcast (stride-0) axes, and of the dtypes the
 * op's definition promises (f16/bf16 inputs were widened to f32 unless the
 * op takes halves itself). Never called with an empty output, except for
 * random ops. Returns 0, or a negative status after cn_fail for what only
 * the data can show (an index out of range) or a device failure. */
typedef int (*cn_kernel_fn)(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                            cn_tensor *out);

/* Draws of the counter-based generator (Philox-4x32-10): element i of the
 * draw depends only on (key, counter + i's block), as on the CPU, so a seed
 * gives the same numbers on every backend. */
typedef enum cn_random_kind {
    CN_RANDOM_UNIFORM, /* U[p0, p1) */
    CN_RANDOM_NORMAL,  /* N(p0, p1^2) */
    CN_RANDOM_INT      /* integers in [p0, p1) */
} cn_random_kind;

typedef struct cn_backend {
    const char *name; /* "cpu", "opencl": the device kind's name */
    cn_device_kind kind;

    /* Devices of this kind on this machine (0: none, or the runtime is
     * missing; never an error). Cheap after the first call. */
    int (*device_count)(void);
    /* Optional: why there is no device when device_count is 0 ("no CUDA
     * driver (libcuda.so.1: ...)"), for messages. */
    const char *(*why_none)(void);
    int (*device_info)(int index, cn_device_info *info);

    /* Memory: a storage of nbytes on device `index`, from the backend's
     * caching allocator (NULL after cn_fail, naming the device and the size).
     * The storage's device_free returns it to the cache. */
    cn_storage *(*storage_new)(int index, size_t nbytes);
    int (*memory_stats)(int index, cn_memory_stats *s);
    size_t (*empty_cache)(int index);

    /* Raw byte copies between the host and a storage of this backend, and
     * within the backend (dst and src may be on two devices of it). read
     * waits for the data; write may return before the device has the data
     * when async is set: the caller keeps src alive and unchanged until the
     * device's queue has passed the copy (cn_backend_keep_alive). */
    int (*write)(cn_storage *dst, size_t dst_off, const void *src, size_t n, bool async);
    int (*read)(const cn_storage *src, size_t src_off, void *dst, size_t n);
    int (*copy_bytes)(cn_storage *dst, size_t dst_off, const cn_storage *src, size_t src_off,
                      size_t n);

    /* dst = src, elementwise, both on this backend's device: any strides on
     * either side, src broadcast to dst's shape, converting between any two
     * dtypes with cn_cast's rules. (contiguous, cast, and a strided write
     * into a view all come here.) */
    int (*copy)(cn_tensor *dst, const cn_tensor *src);
    /* Every element of t (any strides) = v, converted to t's dtype. */
    int (*fill)(cn_tensor *t, double v);
    /* A draw into out (contiguous; f32, f64, f16, bf16, i32, i64 or u8). */
    int (*random_fill)(cn_tensor *out, cn_random_kind kind, double p0, double p1, uint64_t key,
                       uint64_t counter);

    /* The queue: one per device, in order. */
    int (*synchronize)(int index);
    void *(*event_record)(int index);
    int (*event_synchronize)(void *ev);
    bool (*event_query)(void *ev);
    void (*event_free)(void *ev);

    /* A kernel per op id, CN_OP_COUNT entries (NULL: the op does not run
     * on this backend; views need none, they only set strides). */
    const cn_kernel_fn *kernels;

    /* out = e(in...), a fused elementwise group (fused_expr.h has the
     * contract); NULL if the backend runs groups op by op. */
    int (*fused_run)(const cn_fused_expr *e, cn_tensor *const *in, cn_tensor *out);

    /* One optimiser step over n runs of contiguous elements
     * (optim_update.h), all on this backend's devices. */
    int (*optim_update)(const cn_optim_update *u, int n);
} cn_backend;

/* The backends this build has (registry.c), by device kind (NULL: not built). */
extern const cn_backend *const cn_backends[CN_DEVICE_KIND_COUNT];
extern const cn_backend cn_backend_cpu;
#ifdef CN_HAVE_OPENCL
extern const cn_backend cn_backend_opencl;
#endif
#ifdef CN_HAVE_CUDA
extern const cn_backend cn_backend_cuda;
#endif

/* The backend of d's kind, checking that d is a device of this machine;
 * NULL after cn_fail naming fn and d when it is not (or this build has no
 * such backend). */
const cn_backend *cn_backend_for(cn_device d, const char *fn);
/* The backend of t's storage (the CPU's for symbolic tensors). */
static inline const cn_backend *cn_backend_of(const cn_tensor *t) {
    const cn_backend *b = t->storage ? cn_backends[t->storage->device_kind] : NULL;
    return b ? b : &cn_backend_cpu;
}
/* Has this build's backend for kind a kernel for op (a built-in op id)?
 * For public functions that compose other ops where the op has none
 * (cn_layer_norm). */
static inline bool cn_backend_has_kernel(cn_device_kind kind, int op) {
    const cn_backend *b = (unsigned)kind < CN_DEVICE_KIND_COUNT ? cn_backends[kind] : NULL;
    return b && b->kernels[op] != NULL;
}

/* Storage of nbytes on d (through its backend's allocator), NULL after
 * cn_fail. */
cn_storage *cn_storage_new_on(cn_device d, size_t nbytes);
/* An uninitialised contiguous tensor on d. */
cn_tensor *cn_t_empty_on(cn_device d, cn_dtype dt, int ndim, const int64_t *shape);
cn_tensor *cn_t_full_on(cn_device d, cn_dtype dt, int ndim, const int64_t *shape, double v);

/* dst = src where the two may be on different devices (shapes equal or src
 * broadcast to dst, any dtypes and strides): on one device its backend's
 * copy; across devices a contiguous staging copy through the host. */
int cn_transfer(cn_tensor *dst, const cn_tensor *src, bool async);
/* A contiguous copy of t on d (t retained when it is there and contiguous
 * is not asked). */
cn_tensor *cn_t_to(cn_tensor *t, cn_device d, bool async);
/* A CPU tensor with t's contents (t retained when it is on the CPU). */
cn_tensor *cn_t_to_host(cn_tensor *t);
/* A contiguous copy of t on its device, not recorded (t retained when it is
 * contiguous already); and the same on the CPU, for code that reads the
 * bytes (writers of files). */
cn_tensor *cn_t_contiguous(cn_tensor *t);
cn_tensor *cn_t_host_contiguous(cn_tensor *t);
/* Read / write the elements of t (any device, any strides) as a
 * row-major buffer of dtype dt. */
int cn_t_read(const cn_tensor *t, cn_dtype dt, void *buf);
int cn_t_write(cn_tensor *t, cn_dtype dt, const void *buf);

#endif
