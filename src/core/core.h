/* Internal core: the tensor and storage structs, errors, scopes, threads.
 * Everything under src/ includes this; users see only chutney.h. */
#ifndef CN_CORE_H
#define CN_CORE_H

#include "chutney.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define CN_LIKELY(x) __builtin_expect(!!(x), 1)
#define CN_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define CN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CN_LIKELY(x) (x)
#define CN_UNLIKELY(x) (x)
#define CN_PRINTF(a, b)
#endif

#define CN_ALIGN 64

/* Hot loops: CN_HOT_FN (isa.h) compiles them for AVX2 and AVX-512 too and
 * picks a variant at run time. */
#include "isa.h"

/* A static graph is reference counted by its symbolic tensors; the graph
 * layer puts this header first in struct cn_graph. */
typedef struct cn_graph_head {
    int32_t refcount;
    void (*destroy)(struct cn_graph_head *self);
} cn_graph_head;
struct cn_graph;

/* Op ids: the enum of every op (op_list.h), and their names. Core and the
 * backends index kernel tables by id; the definitions live in src/ops. */
typedef enum cn_op_id {
#define CN_OP(name) CN_OP_##name,
#include "op_list.h"
#undef CN_OP
    CN_OP_COUNT
} cn_op_id;
extern const char *const cn_op_names[CN_OP_COUNT];

/* Attribute values of one op application. Which slot holds which attribute
 * is declared in the op's attrs[] table (src/ops/op.h). */
#define CN_ATTR_LIST_MAX (2 * CN_MAX_DIMS)
typedef struct cn_attrs {
    int64_t i[4];
    double f[4];
    int32_t nlist;
    int64_t list[CN_ATTR_LIST_MAX];
} cn_attrs;

/* One op applied to inputs: the IR node shared by eager recording (autograd
 * tape) and static graphs. It holds references to its inputs; the output
 * tensor holds a reference to the node, so a value keeps its history alive.
 * The backward walk reads the first 64 bytes of every node (a tape's nodes
 * start on a cache line: node.c), the rest only when needed. */
typedef struct cn_node {
    int32_t refcount;
    uint16_t op;          /* cn_op_id */
    uint16_t nin;
    struct cn_tensor **in;/* retained; points at in_inline for up to 3 inputs */
    uint64_t seq;         /* creation order: a topological order */
    uint64_t writes_mark; /* cn_inplace_writes when recorded */
    struct cn_tensor *in_inline[3];
    bool freed;           /* backward released its inputs */
    uint32_t out_version; /* the output's storage version when recorded */
    /* Static graphs' nodes only (the walk reads it for symbolic values). */
    void *extra;          /* owned by the graph layer */
    uint32_t *in_version; /* storage versions when recorded (eager) */
    uint32_t version_inline[3];
    void *chunk;          /* the arena chunk it was carved from, or NULL (node.c) */
    /* Read only by the rules: right after the node when it has some, else
     * a shared block of zeros (most recorded ops have none: the node is
     * then 2 cache lines, not 5). */
    const cn_attrs *attrs;
} cn_node;

/* A block of memory on one device, shared by every view of it. */
typedef struct cn_storage {
    void *data;            /* CPU: the bytes; another device: its backend's handle
                              (a cl_mem), never dereferenced outside that backend */
    size_t nbytes;
    int32_t refcount;
    int16_t device_kind;   /* cn_device_kind: CN_DEVICE_CPU is 0 */
    int16_t device_index;
    uint32_t version;      /* bumped by every in-place write (autograd checks it) */
    void (*free_fn)(void *);/* borrowed buffers: called on the last release */
    /* Device storage: its backend frees it (and this struct) on the last release. */
    void (*device_free)(struct cn_storage *s);
    void *device_ctx;      /* the backend's, e.g. a pending event */
    bool owned;            /* data came from cn_alloc */
    bool embedded;         /* this struct lives in its data block's header (alloc.c) */
} cn_storage;

static inline cn_device cn_storage_device(const cn_storage *s) {
    return CN_DEVICE(s->device_kind, s->device_index);
}
static inline bool cn_storage_on_cpu(const cn_storage *s) {
    return s->device_kind == CN_DEVICE_CPU;
}

/* Every in-place write anywhere also bumps this process-wide count, so the
 * backward pass can skip the per-input version checks of a node recorded
 * when the count was what it still is (nothing was written since). */
extern _Atomic uint64_t cn_inplace_writes;
/* Record an in-place write into s (autograd refuses gradients through data
 * changed after it was used). */
static inline void cn_storage_bump(cn_storage *s) {
    s->version++;
    __atomic_add_fetch((uint64_t *)&cn_inplace_writes, 1, __ATOMIC_RELAXED);
}

/* Tensor flags. */
enum {
    CN_TF_SYMBOLIC = 1 << 0,   /* a value of a static graph: no storage */
    CN_TF_PLACEHOLDER = 1 << 1,/* a graph input, fed at run time */
    CN_TF_LEAF = 1 << 2,       /* created by the user, not by an op */
    /* State a compiled program writes on every run (BatchNorm's running
     * statistics, graph effects): never folded into a constant. */
    CN_TF_STATE = 1 << 3,
    CN_TF_HOOKED = 1 << 4      /* has gradient hooks (grad_hooks.c) */
};

struct cn_tensor {
    /* The fields autograd and the dispatcher touch on every op come first,
     * in one cache line; shape and strides follow. */
    int32_t refcount;
    uint8_t dtype;         /* cn_dtype */
    int8_t ndim;
    uint8_t requires_grad;
    uint8_t flags;         /* CN_TF_* */
    int64_t offset;        /* elements from storage->data */
    cn_storage *storage;   /* NULL for symbolic tensors */
    cn_node *node;         /* the op that produced this value (recorded or symbolic) */
    struct cn_tensor *grad;/* accumulated gradient of a leaf */
    /* The backward walk's index of this tensor, valid while walk_epoch is
     * the running walk's: no hash lookups per edge. So backward calls over
     * graphs that share tensors must not run at the same time. */
    uint32_t walk_epoch;
    int32_t walk_idx;
    struct cn_tensor *tangent; /* forward-mode tangent (dual regions only) */
    uint32_t tangent_gen;      /* the dual region the tangent belongs to */
    /* CN_T_LIVE while the struct is a tensor, CN_T_DEAD once released: the
     * public entry points check it (cn_t_is_dead). It fills the padding
     * before shape, so the struct is no bigger. */
    uint32_t magic;
    int64_t shape[CN_MAX_DIMS];
    int64_t strides[CN_MAX_DIMS];
    struct cn_graph *graph;/* the static graph a symbolic tensor belongs to */
    char *name;                /* optional (placeholders, parameters); owned */
};

/* ---- released tensors (tensor.c; docs/architecture.md, "Debug mode") ----
 * A released struct's magic is CN_T_DEAD until it is handed out again: a
 * use after release or a double release through the public API is an error
 * naming the tensor instead of a write into a recycled struct. With
 * CN_DEBUG_API=1 (or the CMake option CHUTNEY_DEBUG_API) released structs
 * are also cleared and held back from reuse for a while (a quarantine), so
 * the check still sees them dead well after the release; under
 * AddressSanitizer they are poisoned on the free list as well (all but the
 * magic, which the check reads). */
#define CN_T_LIVE 0x7e250a11u
#define CN_T_DEAD 0xdead7e25u
/* One compare of a field in the line every op reads anyway. */
static inline bool cn_t_is_dead(const cn_tensor *t) { return CN_UNLIKELY(t->magic != CN_T_LIVE); }
/* The error for a dead tensor passed to fn (a message naming its dtype,
 * shape and, when known, the op that made it and its name). Returns CN_EINVAL. */
int cn_t_dead_fail(const char *fn, const cn_tensor *t);
/* For public functions: return ret with that error if t is dead. */
#define CN_CHECK_LIVE(fn, t, ret)                                                          \
    do {                                                                                   \
        if ((t) && cn_t_is_dead(t)) {                                                      \
            cn_t_dead_fail(fn, t);                                                         \
            return ret;                                                                    \
        }                                                                                  \
    } while (0)
/* Whether debug mode is on (CN_DEBUG_API, read once, or the build option). */
bool cn_debug_api(void);

/* ---- errors (error.c) ---- */
/* Sets the thread-local message. Returns NULL so `return cn_fail(...)` works in
 * tensor functions; cn_failc returns the status for int functions. */
void *cn_fail(const char *fmt, ...) CN_PRINTF(1, 2);
int cn_failc(int status, const char *fmt, ...) CN_PRINTF(2, 3);
void cn_vfail(const char *fmt, va_list ap);

/* ---- dtypes (dtype.c) ---- */
extern const size_t cn_dtype_sizes[CN_DTYPE_COUNT];
static inline size_t cn_dsize(cn_dtype dt) { return cn_dtype_sizes[dt]; }
static inline bool cn_is_int_dtype(cn_dtype dt) {
    return dt == CN_I32 || dt == CN_I64 || dt == CN_U8 || dt == CN_I8;
}
static inline bool cn_is_half(cn_dtype dt) { return dt == CN_F16 || dt == CN_BF16; }
/* f32 -> bf16 rounded to nearest even, a NaN kept quiet with its sign and
 * top payload: cn_f32_to_bf16, inline and written as selects so that
 * loops over it vectorise (copy.c's casts). */
static inline uint16_t cn_bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}
/* bf16 -> f32, exact (the bits move up): cn_bf16_to_f32, inline. */
static inline float cn_bf16_widen(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
/* Load element i of a typed array as double / store a double (with the cast
 * rules of cn_cast: float->int truncates toward zero, ->bool is != 0). */
double cn_load_f64(const void *p, cn_dtype dt, int64_t i);
void cn_store_f64(void *p, cn_dtype dt, int64_t i, double v);
int64_t cn_load_i64(const void *p, cn_dtype dt, int64_t i);
void cn_store_i64(void *p, cn_dtype dt, int64_t i, int64_t v);
/* Promotion by category then width: the dtype a and b compute in. */
cn_dtype cn_promote_types(cn_dtype a, cn_dtype b);

/* ---- memory (alloc.c) ---- */
void *cn_alloc(size_t nbytes);  /* CN_ALIGN-aligned, never NULL for 0 bytes */
void cn_free(void *p);
cn_storage *cn_storage_new(size_t nbytes);
/* A storage owning data, a block from cn_alloc of at least nbytes (the
 * struct goes into the block's header; never fails). */
cn_storage *cn_storage_adopt(void *data, size_t nbytes);
void cn_storage_release(cn_storage *s);

/* ---- tensors (tensor.c) ----
 * Functions named cn_t_* return a reference owned by the caller and never
 * touch scopes: they are for use inside the library. Public functions wrap
 * them with cn_scope_add. */
cn_tensor *cn_t_alloc(void);   /* zeroed struct, refcount 1 */
cn_tensor *cn_t_empty(cn_dtype dt, int ndim, const int64_t *shape);
cn_tensor *cn_t_zeros(cn_dtype dt, int ndim, const int64_t *shape);
cn_tensor *cn_t_full(cn_dtype dt, int ndim, const int64_t *shape, double v);
cn_tensor *cn_t_scalar(cn_dtype dt, double v);
/* A new tensor struct viewing t's storage (refcounted) with t's metadata. */
cn_tensor *cn_t_alias(const cn_tensor *t);
/* The same into v, a struct that holds no references (fresh, or reset). */
void cn_t_alias_into(cn_tensor *v, const cn_tensor *t);
void cn_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
int64_t cn_shape_numel(int ndim, const int64_t *shape);
/* Largest element count we accept: keeps every byte size in int64 range. */
#define CN_MAX_NUMEL (INT64_C(1) << 56)
bool cn_check_shape(const char *fn, int ndim, const int64_t *shape);
static inline void *cn_t_ptr(const cn_tensor *t) {
    return (char *)t->storage->data + (size_t)t->offset * cn_dsize((cn_dtype)t->dtype);
}
static inline bool cn_is_symbolic(const cn_tensor *t) { return t->flags & CN_TF_SYMBOLIC; }
/* "[2, 3]" into buf (at least 128 bytes is always enough). */
char *cn_fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape);
/* Normalise a possibly negative axis for rank ndim; -1 and an error if out of range. */
int cn_norm_axis(const char *fn, int axis, int ndim);

/* Where a tensor lives: its storage's device (the CPU for symbolic values). */
static inline cn_device cn_t_device(const cn_tensor *t) {
    return t->storage ? cn_storage_device(t->storage) : CN_CPU;
}
static inline bool cn_t_on_cpu(const cn_tensor *t) {
    return !t->storage || t->storage->device_kind == CN_DEVICE_CPU;
}
/* For functions that read or write elements on the host: an error naming fn
 * and the device, unless t is on the CPU (or symbolic). */
int cn_require_cpu(const char *fn, const cn_tensor *t);

/* ---- devices (device.c) ---- */
/* Where creation functions put tensors: the innermost device scope (a
 * rank device's local part: every rank holds every parameter), else the
 * thread's default device. Graph-only scopes do not count. */
cn_device cn_current_device(void);
/* Is a device scope open on this thread (cn_device_scope_begin)? Sets *d to
 * the innermost one when it is (d may be NULL). The default device does not
 * count: static programs place a step explicitly only inside a scope. */
bool cn_device_scope_active(cn_device *d);
/* A scope that places graph nodes only (cn_device_scope_active sees it,
 * creation functions and the eager check below do not): autograd opens one
 * around the rules of a node built on a rank device, so its gradient steps
 * run on the same rank. Closed with cn_device_scope_end. */
int cn_device_scope_begin_graph(cn_device d);
/* The process's place in an MPI job, for devices "rank:R/..." (set by
 * cn_dist_init and cn_dist_finalize, below core). */
void cn_device_set_job(int rank, int size);
int cn_device_job_rank(void);
/* d, or its local part when it names this process's own rank. */
cn_device cn_device_here(cn_device d);
/* Does d name a device of another process of the job? */
static inline bool cn_device_remote(cn_device d) {
    return (d.kind >> CN_DEVICE_RANK_SHIFT) > 0 &&
           (d.kind >> CN_DEVICE_RANK_SHIFT) - 1 != cn_device_job_rank();
}
/* The error for a device of another rank used eagerly (fn: what used it). */
int cn_fail_remote_device(const char *fn, cn_device d);
/* Fails (as above) when the innermost real scope is a device of another
 * rank: eager ops cannot run there. */
int cn_check_eager_scope(const char *fn);
/* cn_device_str into a thread-local buffer, for messages (two at a time). */
const char *cn_dev_name(cn_device d);

/* ---- CPU memory statistics (alloc.c) ---- */
void cn_cpu_memory_stats(cn_memory_stats *s);

/* ---- recording switch (grad_mode.c) ---- */
extern _Thread_local bool cn_grad_disabled;

/* ---- autocast (autocast.c): the region's dtype, CN_F32 when off ---- */
extern _Thread_local uint8_t cn_autocast_dt;

/* ---- nodes (node.c) ---- */
cn_node *cn_node_new(int op, cn_tensor *const *in, int nin, const cn_attrs *a);
/* The same from malloc, for nodes that outlive a step (static graphs). */
cn_node *cn_node_new_heap(int op, cn_tensor *const *in, int nin, const cn_attrs *a);
void cn_node_release(cn_node *n);
/* Chunks of tape nodes taken from malloc and not given back (tests). */
int64_t cn_node_arena_chunks(void);
/* Set by the graph layer to free node->extra. */
extern void (*cn_node_extra_free)(void *extra);

/* ---- scopes (scope.c) ---- */
cn_tensor *cn_scope_add(cn_tensor *t); /* hands t's reference to the scope; returns t */

/* ---- random numbers (rng.c) ---- */
/* Reserve n counters of the global stream: returns the key and first counter. */
void cn_rng_reserve(uint64_t n, uint64_t *key, uint64_t *counter);
/* Philox-4x32-10: four 32-bit outputs for (key, counter). */
void cn_philox(uint64_t key, uint64_t counter, uint32_t out[4]);

/* ---- threads (threads.c) ---- */
typedef void (*cn_range_fn)(void *ctx, int64_t begin, int64_t end);
/* Chunks per thread of a cn_parallel_for, at most: a late or descheduled
 * worker then holds up one chunk in this many, while the cost of a chunk
 * (a compare-and-swap and a call) stays far below its work. */
#define CN_CHUNKS_PER_THREAD 4
/* Split [0, n) into min(n / grain, nthreads * CN_CHUNKS_PER_THREAD)
 * contiguous chunks (chunk c is [n*c/k, n*(c+1)/k) for k chunks, so every
 * chunk has at least `grain` elements, and the split depends on n, grain and
 * the thread count only) and run fn on each once, on the pool; the caller
 * takes part and runs whatever chunks no worker has claimed. Chunks may run
 * in any order, on any thread. Nested calls from inside a chunk run serially. */
void cn_parallel_for(int64_t n, int64_t grain, cn_range_fn fn, void *ctx);
/* Spinning workers go to sleep at once (benchmarks that time another
 * library's threads next, so ours do not compete with them). */
void cn_threads_park(void);
/* Run fn(ctx, task, task+1) for task in [0, ntasks) across the pool. */
void cn_parallel_tasks(int64_t ntasks, cn_range_fn fn, void *ctx);
bool cn_in_parallel_region(void);

#endif
