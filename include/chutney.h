/*
 * chutney.h — the whole public API of Chutney, a deep-learning framework in C11.
 *
 * A five-minute tour
 * ------------------
 *
 *     #include <chutney.h>
 *
 *     cn_scope_begin();                        // temporaries made from here on...
 *     cn_tensor *a = cn_randn(CN_F32, CN_SHAPE(2, 3));
 *     cn_tensor *b = cn_ones(CN_F32, CN_SHAPE(3));
 *     cn_tensor *c = cn_relu(cn_add(a, b));    // broadcasting, like NumPy
 *     cn_tensor *s = cn_sum(c, NULL, 0, false);// reduce over every axis
 *     if (!s) fprintf(stderr, "%s\n", cn_last_error());
 *     else cn_print(s);
 *     cn_scope_end();                          // ...are released here
 *
 * Memory. Tensors are reference counted. A tensor returned by any function is
 * owned by the innermost open scope (cn_scope_begin/cn_scope_end), or by the
 * caller when no scope is open, who then releases it with cn_release. cn_keep
 * moves a tensor out of the innermost scope into the enclosing one (or to the
 * caller, outside every scope). Views share their base's storage and keep it
 * alive.
 *
 * Errors. Functions that return a tensor return NULL on failure; functions that
 * return int return a negative CN_E* status. Either way cn_last_error() says
 * what went wrong, naming the function, the argument and the shapes. Any
 * function given a NULL tensor returns NULL (or CN_EINVAL) without touching
 * the message, so a chain of calls can be checked once, at its end. Nothing a
 * user can pass aborts the process.
 *
 * Axes. Every axis argument may be negative, counting from the end as in
 * NumPy and PyTorch.
 */
#ifndef CHUTNEY_H
#define CHUTNEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The library is compiled with -fvisibility=hidden so that only this API is
 * exported from libchutney.so; everything declared here is public. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define CN_VERSION_MAJOR 0
#define CN_VERSION_MINOR 1
#define CN_VERSION_PATCH 0
#define CN_VERSION_STRING "0.1.0"

/* The highest tensor rank. */
#define CN_MAX_DIMS 8

/* Shape literal: cn_zeros(CN_F32, CN_SHAPE(2, 3)) passes ndim = 2 and a shape
 * array. A rank-0 tensor is made with (0, NULL). */
#define CN_SHAPE(...)                                                           \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]) { __VA_ARGS__ }

/* Axes literal for reductions: cn_sum(x, CN_AXES(0, 2), false). */
#define CN_AXES(...)                                                            \
    (int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))

/* ------------------------------------------------------------------------ */
/* Types                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum cn_dtype {
    CN_F32 = 0, /* the workhorse */
    CN_F64,     /* gradient checks, references */
    CN_F16,     /* IEEE half: storage and conversion; ops compute in f32 */
    CN_BF16,    /* bfloat16: storage and conversion; ops compute in f32 */
    CN_I32,
    CN_I64, /* indices, labels */
    CN_U8,  /* images */
    CN_BOOL,
    CN_I8, /* quantised weights and activations (int8 inference) */
    CN_DTYPE_COUNT
} cn_dtype;

/* Status codes returned by int functions (0 is success). */
enum {
    CN_OK = 0,
    CN_EINVAL = -1,      /* bad argument: shape, dtype, axis, value */
    CN_ENOMEM = -2,      /* out of memory */
    CN_EIO = -3,         /* a file could not be opened, read or written */
    CN_EFORMAT = -4,     /* a file or buffer is corrupt or truncated */
    CN_EUNSUPPORTED = -5,/* valid, but not implemented (the message says what) */
    CN_ESTATE = -6       /* the call is not valid in the current state */
};

/* An n-dimensional array: dtype, shape, strides (in elements), offset, and a
 * reference-counted storage. Opaque: use the accessors below. */
typedef struct cn_tensor cn_tensor;

/* Summary statistics of a tensor (cn_tensor_stats). NaN and Inf are counted
 * and left out of min/max/mean/std. */
typedef struct cn_stats {
    double min, max, mean, std; /* std with correction 0; NaN if no finite value */
    int64_t numel, nan_count, inf_count;
} cn_stats;

/* ------------------------------------------------------------------------ */
/* Library                                                                  */
/* ------------------------------------------------------------------------ */

const char *cn_version(void);
/* What this build was compiled with, e.g. "openblas threads". */
const char *cn_build_info(void);
/* Every optional part a build may have, present or not, one by one: i
 * from 0 to cn_build_feature_count() - 1 (`chutney --version` lists them).
 * name is short ("onnx", "openblas", "cuda", ...), what says what it
 * gives; both static strings. */
typedef struct cn_build_feature {
    const char *name;
    const char *what;
    bool enabled;
} cn_build_feature;
int cn_build_feature_count(void);
int cn_build_feature_get(int i, cn_build_feature *out);
/* The instruction set the CPU kernels' hot loops run with now: "default"
 * (the build's own target), "avx2" (AVX2 + FMA) or "avx512" (AVX-512 F,
 * BW, CD, DQ, VL); the best this build and CPU have unless CN_ISA in the
 * environment lowered it. cn_cpu_isa_available: whether the level so named
 * is compiled in this build and this CPU runs it. */
const char *cn_cpu_isa(void);
bool cn_cpu_isa_available(const char *name);
/* Which GEMM f32/f64 products run on the CPU, and why, e.g. "OpenBLAS
 * (Haswell kernels)", "BLAS" (another CBLAS), "built-in (no BLAS in this
 * build)", or "built-in (OpenBLAS runs this CPU with Prescott's kernels,
 * ...)" when OpenBLAS chose an older core's kernels for a CPU it does not
 * know. CN_GEMM=blas|builtin in the environment forces it (blas only where
 * the build has a BLAS); the string says so, and names a CN_GEMM value it
 * did not understand. */
const char *cn_cpu_gemm(void);

/* The thread-local message of the last failure ("" if none). */
const char *cn_last_error(void);
void cn_clear_error(void);

/* Threads: one pool for every kernel. The default is CN_NUM_THREADS if set,
 * else the number of cores the process may run on. BLAS is told the same. */
int cn_set_num_threads(int n);
int cn_get_num_threads(void);

/* Memory: tensor buffers are cached for reuse once freed (at most
 * CN_ALLOC_CACHE_MB megabytes, default 1024; 0 turns the cache off).
 * cn_empty_cache returns every cached block to the system and says how many
 * bytes that was. */
size_t cn_empty_cache(void);

/* ------------------------------------------------------------------------ */
/* Devices                                                                  */
/* ------------------------------------------------------------------------ */

/* Where a tensor's storage lives. Every storage belongs to one device; ops
 * run on the device of their inputs (all on one device, or rank-0 tensors
 * on the CPU, which join any device), and give their result there. */
typedef enum cn_device_kind {
    CN_DEVICE_CPU = 0,
    CN_DEVICE_OPENCL, /* an OpenCL device (PoCL on the CPU in CI) */
    CN_DEVICE_CUDA,   /* an NVIDIA GPU (builds with the CUDA toolkit; runs with its driver) */
    CN_DEVICE_KIND_COUNT
} cn_device_kind;

typedef struct cn_device {
    int32_t kind;  /* cn_device_kind */
    int32_t index; /* which device of that kind, from 0 */
} cn_device;

#define CN_DEVICE(k, i) ((cn_device){(k), (i)})
#define CN_CPU CN_DEVICE(CN_DEVICE_CPU, 0)

/* A device of one process of an MPI job (docs/distributed.md): "rank:1/cpu:0"
 * is cpu:0 of rank 1. The rank rides in the upper bits of kind (kind =
 * KIND | (rank + 1) << CN_DEVICE_RANK_SHIFT), so cn_device keeps its two
 * fields and its size, and a plain device (upper bits 0) means "this
 * process", as always. Code that knows nothing of ranks sees a kind it does
 * not know and refuses it rather than running on a device of its own.
 * Devices of another rank only place the steps of a static graph: built
 * inside cn_device_scope_begin(rank device) ... _end(), cn_compile and
 * cn_compile_train_step cut the graph into per-rank programs joined by
 * send/recv steps (docs/graph-passes.md, "Placement"). Used eagerly (an op
 * computed inside such a scope, cn_to, cn_zeros_on, cn_set_default_device)
 * they fail, naming the device; a device of this process's own rank is
 * simply the local device. Tensors made inside a scope of a rank device
 * (parameters, constants) are made on this process's device of that kind:
 * every rank holds every parameter. */
#define CN_DEVICE_RANK_SHIFT 8
#define CN_DEVICE_ON_RANK(r, k, i) \
    ((cn_device){(int32_t)((k) | (((r) + 1) << CN_DEVICE_RANK_SHIFT)), (i)})
/* R for a device "rank:R/...", -1 for a device of this process. */
int cn_device_rank(cn_device d);
/* d without its rank ("rank:1/cpu:0" -> "cpu:0"). */
cn_device cn_device_local(cn_device d);

/* "cpu", "cpu:0", "opencl", "opencl:1", "cuda:0" (no index: 0), and with a
 * rank in front, "rank:1/cpu:0" ("rank:1" alone: "rank:1/cpu:0"). Returns
 * 0, or CN_EINVAL naming what is wrong (the device need not exist: that is
 * checked where it is used). */
int cn_device_parse(const char *s, cn_device *out);
/* "opencl:0" or "rank:1/opencl:0" into buf (48 bytes are always enough);
 * returns buf. */
char *cn_device_str(cn_device d, char *buf, size_t n);
bool cn_device_equal(cn_device a, cn_device b);
/* Devices of a kind this build and machine have (0 when none: no platform,
 * or the backend was not built). The CPU always has 1. */
int cn_device_count(cn_device_kind kind);

typedef struct cn_device_info {
    cn_device device;
    char name[128];     /* "pthread-haswell-AMD EPYC ..." */
    char vendor[64];
    char driver[128];   /* platform and driver version */
    uint64_t memory_bytes;    /* global memory */
    uint64_t max_alloc_bytes; /* largest single buffer */
    int compute_units;
    char capability[16]; /* CUDA compute capability ("9.0"); empty elsewhere */
} cn_device_info;
int cn_device_get_info(cn_device d, cn_device_info *info);

/* The device of t's storage (the CPU for symbolic tensors without one). */
cn_device cn_tensor_device(const cn_tensor *t);

/* A copy of t on device d (t itself, retained into the scope, when it is
 * there already). Differentiable: the gradient flows back to t's device. */
cn_tensor *cn_to(cn_tensor *t, cn_device d);
/* The same, returning as soon as the copy is queued: copies and kernels on
 * one device run in the order they were issued (one queue per device), so
 * ops on the result need no wait; reading it from the host (cn_item,
 * cn_copy_to_buffer, ...) or cn_device_synchronize waits for it. t's data
 * must not be written until then. */
cn_tensor *cn_to_async(cn_tensor *t, cn_device d);
/* Wait until everything queued on d has finished. */
int cn_device_synchronize(cn_device d);

/* A point in a device's queue: cn_event_synchronize waits until everything
 * issued on that device before cn_event_record has finished. */
typedef struct cn_event cn_event;
cn_event *cn_event_record(cn_device d);
int cn_event_synchronize(cn_event *e);
bool cn_event_query(cn_event *e); /* finished? (true after an error too) */
void cn_event_free(cn_event *e);

/* Where creation functions (cn_zeros, cn_from_data, cn_rand, ...) put new
 * tensors: the innermost open device scope, else the default device (the
 * CPU unless set). Per thread. A static graph's ops built inside a scope
 * run on its device when compiled, whatever their inputs' device (their
 * inputs are transferred); outside any scope they follow their inputs (the
 * default device does not place them). A scope may name a device of
 * another rank ("rank:1/cpu:0", above): its graph steps then run in that
 * process, and eager ops inside it fail (views aside: modules take views
 * of their parameters while a graph is traced). The default device must
 * be one of this process. */
int cn_set_default_device(cn_device d);
cn_device cn_get_default_device(void);
int cn_device_scope_begin(cn_device d); /* scopes nest (up to 64) */
void cn_device_scope_end(void);

/* A device's caching allocator: freed buffers are kept for reuse. */
typedef struct cn_memory_stats {
    uint64_t allocated_bytes;      /* in tensors now */
    uint64_t peak_allocated_bytes; /* the most at once since the start */
    uint64_t cached_bytes;         /* freed, kept for reuse */
    uint64_t allocations;          /* buffers handed out */
    uint64_t cache_hits;           /* of which from the cache */
} cn_memory_stats;
int cn_device_memory_stats(cn_device d, cn_memory_stats *stats);
/* Return d's cached buffers to the system (cn_empty_cache: the CPU's). */
size_t cn_device_empty_cache(cn_device d);

/* ------------------------------------------------------------------------ */
/* Profiler (docs/profiling.md)                                             */
/* ------------------------------------------------------------------------ */

/* While on, every op applied eagerly (views aside: they move no data) and
 * every step of a static program is recorded with its start and end
 * (monotonic clock), its thread, an estimate of its FLOPs and bytes, and
 * the CPU's bytes in tensors when it ended; cn_profiler_range_begin/end
 * add named ranges (cn_run, cn_backward and cn_optimizer_step open their
 * own), which nest the ops inside them. Each thread records into its own
 * buffer, without a lock. Off, the cost is one predictable branch per op.
 * Ops on a GPU are timed as the host enqueues them (they run later) unless
 * sync_devices is set. Start and stop from the thread that drives the
 * work, while no other thread of the caller's applies ops. */
typedef struct cn_profiler_opts {
    int64_t max_events; /* events kept (0: 1000000); later ones are counted as dropped */
    bool sync_devices;  /* wait for each op off the CPU to finish before its event ends
                           (exact device times, but it stops the queue running ahead) */
} cn_profiler_opts;
/* Starts recording (opts may be NULL), dropping the events of any earlier
 * session. */
int cn_profiler_start(const cn_profiler_opts *opts);
/* Stops recording; the events stay until the next start. */
int cn_profiler_stop(void);
bool cn_profiler_enabled(void);
/* A named range on the calling thread (ranges nest, up to 64 deep); the
 * name is copied. Nothing happens while the profiler is off. */
void cn_profiler_range_begin(const char *name);
void cn_profiler_range_end(void);

typedef enum cn_profile_kind {
    CN_PROFILE_OP = 0,    /* an op applied eagerly (cn_op_run) */
    CN_PROFILE_STEP = 1,  /* a step of a static program; fused groups are
                             named "fused[HEAD; op op ...]" as in the dumps */
    CN_PROFILE_RANGE = 2  /* a range: cn_profiler_range_begin, "run", "backward", ... */
} cn_profile_kind;
typedef struct cn_profile_event {
    const char *name;      /* valid until the next cn_profiler_start */
    cn_profile_kind kind;
    int thread;            /* 0: the thread that started the profiler; then by first event */
    int64_t start_ns, end_ns; /* since cn_profiler_start */
    double flops;          /* estimated (0 for copies, indexing, ranges) */
    double bytes;          /* estimated: the inputs' distinct elements read + the output */
    int64_t memory_bytes;  /* the CPU's bytes in tensors when it ended */
    cn_device device;
} cn_profile_event;
/* The recorded events (after cn_profiler_stop), ordered by start, an
 * enclosing event before those it contains. */
int64_t cn_profiler_num_events(void);
int cn_profiler_get_event(int64_t i, cn_profile_event *e);
/* Events not kept because max_events was reached. */
int64_t cn_profiler_dropped_events(void);
/* The events as a Chrome trace (JSON; chrome://tracing, ui.perfetto.dev):
 * one "X" event per op, step or range, with args flops, bytes and device,
 * and a "C" counter of the CPU's bytes in tensors. */
int cn_profiler_write_chrome_trace(const char *path);
/* A table by op name: calls, total and mean time (self time: what nested
 * events took is theirs), share of the total, GFLOP/s, GB/s, then the
 * memory high-water mark. cn_profile_trace_summary prints the same for a
 * trace file written by cn_profiler_write_chrome_trace (`chutney profile`). */
int cn_profiler_print_summary(FILE *f);
int cn_profile_trace_summary(const char *trace_path, FILE *f);

/* ------------------------------------------------------------------------ */
/* Dtypes                                                                   */
/* ------------------------------------------------------------------------ */

const char *cn_dtype_name(cn_dtype dt); /* "f32", "i64", ... */
size_t cn_dtype_size(cn_dtype dt);      /* bytes per element */
bool cn_dtype_is_float(cn_dtype dt);    /* f32, f64, f16, bf16 */
/* The dtype a binary op computes in, PyTorch's rules: dimensioned tensors
 * decide within a category (bool < integer < float); rank-0 tensors only
 * raise the category. */
cn_dtype cn_result_type(const cn_tensor *a, const cn_tensor *b);

/* IEEE-754 conversions (round to nearest even). */
uint16_t cn_f32_to_f16(float x);
float cn_f16_to_f32(uint16_t h);
uint16_t cn_f32_to_bf16(float x);
float cn_bf16_to_f32(uint16_t h);

/* ------------------------------------------------------------------------ */
/* Memory: reference counts and scopes                                      */
/* ------------------------------------------------------------------------ */

cn_tensor *cn_retain(cn_tensor *t); /* returns t */
void cn_release(cn_tensor *t);      /* NULL is fine */

void cn_scope_begin(void);
void cn_scope_end(void);
/* Move t out of the innermost scope into the enclosing one (or to the caller
 * outside every scope). Returns t. */
cn_tensor *cn_keep(cn_tensor *t);
int cn_scope_depth(void);
/* Hand a reference the caller owns to the innermost scope (what public
 * functions do with their results); outside every scope the caller keeps
 * it. Returns t. */
cn_tensor *cn_scope_add(cn_tensor *t);
/* For language bindings whose callbacks (a custom op's rules) run inside
 * the library's scopes but call public functions as if none were open:
 * until cn_scope_resume(saved), this thread is outside every scope (its
 * open ones are left untouched). Scopes opened in between must be closed
 * before resuming. Returns NULL (out of memory) or the saved state. */
void *cn_scope_suspend(void);
void cn_scope_resume(void *saved);

/* ------------------------------------------------------------------------ */
/* Creation                                                                 */
/* ------------------------------------------------------------------------ */

cn_tensor *cn_empty(cn_dtype dt, int ndim, const int64_t *shape);
cn_tensor *cn_zeros(cn_dtype dt, int ndim, const int64_t *shape);
cn_tensor *cn_ones(cn_dtype dt, int ndim, const int64_t *shape);
cn_tensor *cn_full(cn_dtype dt, int ndim, const int64_t *shape, double value);
cn_tensor *cn_scalar(cn_dtype dt, double value); /* rank 0 */
cn_tensor *cn_zeros_like(const cn_tensor *t);
cn_tensor *cn_ones_like(const cn_tensor *t);
cn_tensor *cn_full_like(const cn_tensor *t, double value);
/* [start, stop) with step, like numpy.arange. */
cn_tensor *cn_arange(double start, double stop, double step, cn_dtype dt);
/* n points from start to end inclusive. */
cn_tensor *cn_linspace(double start, double end, int64_t n, cn_dtype dt);
/* n x m, ones on the diagonal. */
cn_tensor *cn_eye(int64_t n, int64_t m, cn_dtype dt);
/* Copies numel(shape) elements of dt from data. */
cn_tensor *cn_from_data(cn_dtype dt, int ndim, const int64_t *shape, const void *data);
/* The same on device d (cn_empty, cn_zeros, ... use the current device:
 * cn_device_scope_begin, cn_set_default_device). */
cn_tensor *cn_empty_on(cn_device d, cn_dtype dt, int ndim, const int64_t *shape);
cn_tensor *cn_zeros_on(cn_device d, cn_dtype dt, int ndim, const int64_t *shape);
cn_tensor *cn_ones_on(cn_device d, cn_dtype dt, int ndim, const int64_t *shape);
cn_tensor *cn_full_on(cn_device d, cn_dtype dt, int ndim, const int64_t *shape, double value);
cn_tensor *cn_from_data_on(cn_device d, cn_dtype dt, int ndim, const int64_t *shape,
                           const void *data);
/* Borrows data without copying: the caller keeps it alive and unchanged in
 * size until the tensor and every view of it are released. If free_fn is not
 * NULL it is called with data when the last reference goes. */
cn_tensor *cn_from_buffer(cn_dtype dt, int ndim, const int64_t *shape, void *data,
                          void (*free_fn)(void *));

/* ------------------------------------------------------------------------ */
/* Random numbers                                                           */
/* ------------------------------------------------------------------------ */

/* A counter-based generator (Philox-4x32-10): element i of a draw depends
 * only on (seed, offset, i), so results do not depend on the thread count.
 * Each draw advances the global offset. */
void cn_manual_seed(uint64_t seed);
void cn_rng_get_state(uint64_t *seed, uint64_t *offset);
void cn_rng_set_state(uint64_t seed, uint64_t offset);

cn_tensor *cn_rand(cn_dtype dt, int ndim, const int64_t *shape);  /* U[0,1) */
cn_tensor *cn_randn(cn_dtype dt, int ndim, const int64_t *shape); /* N(0,1) */
cn_tensor *cn_uniform(cn_dtype dt, int ndim, const int64_t *shape, double lo, double hi);
cn_tensor *cn_normal(cn_dtype dt, int ndim, const int64_t *shape, double mean, double std);
/* Integers in [low, high). */
cn_tensor *cn_randint(int64_t low, int64_t high, cn_dtype dt, int ndim, const int64_t *shape);
/* Each element 1 with probability p[i] (same shape and dtype as p), else 0. */
cn_tensor *cn_bernoulli(const cn_tensor *p);
/* A random permutation of 0..n-1 (i64). */
cn_tensor *cn_randperm(int64_t n);

/* ------------------------------------------------------------------------ */
/* Inspection                                                               */
/* ------------------------------------------------------------------------ */

cn_dtype cn_tensor_dtype(const cn_tensor *t);
int cn_ndim(const cn_tensor *t);
const int64_t *cn_shape(const cn_tensor *t);   /* ndim entries */
const int64_t *cn_strides(const cn_tensor *t); /* in elements */
int64_t cn_dim(const cn_tensor *t, int axis);  /* size of one axis; -1 on error */
int64_t cn_numel(const cn_tensor *t);
int64_t cn_offset(const cn_tensor *t);         /* in elements */
bool cn_is_contiguous(const cn_tensor *t);
/* Pointer to element [0,...,0] (NULL for symbolic tensors of a static graph,
 * and NULL with an error for a tensor on another device than the CPU: read
 * it with cn_copy_to_buffer, or cn_to it to the CPU).
 * Walk it with cn_strides unless cn_is_contiguous. Writes through it are
 * not seen by what keeps a tensor's version (autograd's checks, a compiled
 * program's folded or packed constants): call cn_mark_written after them. */
void *cn_data(const cn_tensor *t);
/* Record that t's data was written from outside the library (through
 * cn_data, a NumPy view, DLPack): programs that folded or packed it compile
 * or pack again on their next run, and autograd refuses gradients through
 * its old values, as after an in-place op. */
int cn_mark_written(cn_tensor *t);
/* An optional name (parameters, placeholders); "" when unset. The name is
 * copied; NULL clears it. */
int cn_set_name(cn_tensor *t, const char *name);
const char *cn_get_name(const cn_tensor *t);
/* Do a and b share storage? */
bool cn_shares_storage(const cn_tensor *a, const cn_tensor *b);

/* Element access; idx has ndim entries (negative counts from the end). */
double cn_get(const cn_tensor *t, const int64_t *idx);
int64_t cn_get_int(const cn_tensor *t, const int64_t *idx);
int cn_set(cn_tensor *t, const int64_t *idx, double value);
/* The only element of a tensor with numel 1 (NaN and an error otherwise). */
double cn_item(const cn_tensor *t);
/* Copies the elements, in row-major order, as dt into buf (numel values). */
int cn_copy_to_buffer(const cn_tensor *t, cn_dtype dt, void *buf, size_t buf_bytes);

/* NumPy-like printing; long dimensions are summarised with "...". */
void cn_print(const cn_tensor *t);
void cn_fprint(FILE *f, const cn_tensor *t);
/* malloc'd string; free() it. */
char *cn_to_string(const cn_tensor *t);
/* "f32[2, 3]" into buf. Returns buf. */
char *cn_shape_str(const cn_tensor *t, char *buf, size_t n);
int cn_tensor_stats(const cn_tensor *t, cn_stats *out);
bool cn_equal(const cn_tensor *a, const cn_tensor *b); /* same shape and values */
bool cn_allclose(const cn_tensor *a, const cn_tensor *b, double rtol, double atol);

/* ------------------------------------------------------------------------ */
/* Views (no copy) and copies                                               */
/* ------------------------------------------------------------------------ */

/* One entry may be -1, inferred. A view when the strides allow, else a copy
 * (like torch.reshape). */
cn_tensor *cn_reshape(cn_tensor *t, int ndim, const int64_t *shape);
/* Like reshape, but fails instead of copying (like torch.view). */
cn_tensor *cn_view(cn_tensor *t, int ndim, const int64_t *shape);
cn_tensor *cn_flatten(cn_tensor *t, int start_axis, int end_axis);
cn_tensor *cn_transpose(cn_tensor *t, int axis0, int axis1);
cn_tensor *cn_permute(cn_tensor *t, const int *axes, int naxes);
/* Swap the last two axes (t.mT); a 1-D or 0-D tensor is returned as is. */
cn_tensor *cn_mT(cn_tensor *t);
cn_tensor *cn_squeeze(cn_tensor *t, int axis); /* axis must have size 1 */
cn_tensor *cn_squeeze_all(cn_tensor *t);       /* every size-1 axis */
cn_tensor *cn_unsqueeze(cn_tensor *t, int axis);
/* Python's t[start:stop:step] along axis; step may be negative (then start
 * defaults to the end). Out-of-range bounds are clamped as in Python. Use
 * CN_END for "to the end" and CN_BEGIN for "from the beginning". */
#define CN_END INT64_MAX
#define CN_BEGIN INT64_MIN
cn_tensor *cn_slice(cn_tensor *t, int axis, int64_t start, int64_t stop, int64_t step);
cn_tensor *cn_narrow(cn_tensor *t, int axis, int64_t start, int64_t length);
/* Size-1 axes repeat (stride 0); new leading axes may be added; -1 keeps a size. */
cn_tensor *cn_expand(cn_tensor *t, int ndim, const int64_t *shape);
cn_tensor *cn_broadcast_to(cn_tensor *t, int ndim, const int64_t *shape);
/* t itself (retained) if already contiguous, else a contiguous copy. */
cn_tensor *cn_contiguous(cn_tensor *t);
cn_tensor *cn_clone(const cn_tensor *t);
/* Element type conversion (a new tensor; t retained if already dt). */
cn_tensor *cn_cast(cn_tensor *t, cn_dtype dt);
/* Copy src into dst in place (src broadcast to dst's shape, cast to its
 * dtype). dst may be a view. */
int cn_copy_(cn_tensor *dst, const cn_tensor *src);
/* Set every element of t (or the view) to value. */
int cn_fill_(cn_tensor *t, double value);

/* ------------------------------------------------------------------------ */
/* Elementwise, unary                                                       */
/* ------------------------------------------------------------------------ */
/* Integer and bool inputs of float functions (exp, sin, ...) compute in f32. */

cn_tensor *cn_neg(cn_tensor *x);
cn_tensor *cn_abs(cn_tensor *x);   /* abs'(0) = 0 */
cn_tensor *cn_sign(cn_tensor *x);
cn_tensor *cn_exp(cn_tensor *x);
cn_tensor *cn_log(cn_tensor *x);
cn_tensor *cn_log1p(cn_tensor *x);
cn_tensor *cn_expm1(cn_tensor *x);
cn_tensor *cn_sqrt(cn_tensor *x);
cn_tensor *cn_rsqrt(cn_tensor *x);
cn_tensor *cn_square(cn_tensor *x);
cn_tensor *cn_reciprocal(cn_tensor *x);
cn_tensor *cn_sin(cn_tensor *x);
cn_tensor *cn_cos(cn_tensor *x);
cn_tensor *cn_tanh(cn_tensor *x);
/* The rest of the trigonometric and hyperbolic functions, composed of ops
 * (differentiable; float accuracy for f32): tan, the inverses (asin and
 * atanh NaN outside [-1, 1], acosh below 1), atan2(y, x) over the four
 * quadrants (0 at the origin), sinh, cosh. */
cn_tensor *cn_tan(cn_tensor *x);
cn_tensor *cn_asin(cn_tensor *x);
cn_tensor *cn_acos(cn_tensor *x);
cn_tensor *cn_atan(cn_tensor *x);
cn_tensor *cn_atan2(cn_tensor *y, cn_tensor *x);
cn_tensor *cn_sinh(cn_tensor *x);
cn_tensor *cn_cosh(cn_tensor *x);
cn_tensor *cn_asinh(cn_tensor *x);
cn_tensor *cn_acosh(cn_tensor *x);
cn_tensor *cn_atanh(cn_tensor *x);
cn_tensor *cn_sigmoid(cn_tensor *x);
cn_tensor *cn_relu(cn_tensor *x); /* relu'(0) = 0 */
cn_tensor *cn_leaky_relu(cn_tensor *x, double negative_slope);
cn_tensor *cn_elu(cn_tensor *x, double alpha);
/* approximate = false: x * Phi(x) (erf form); true: the tanh form. */
cn_tensor *cn_gelu(cn_tensor *x, bool approximate);
cn_tensor *cn_silu(cn_tensor *x);
/* log(1 + exp(beta x)) / beta, linear above threshold (PyTorch: 1, 20). */
cn_tensor *cn_softplus(cn_tensor *x, double beta, double threshold);
cn_tensor *cn_erf(cn_tensor *x);
cn_tensor *cn_floor(cn_tensor *x);
cn_tensor *cn_ceil(cn_tensor *x);
cn_tensor *cn_round(cn_tensor *x); /* half to even, like torch.round */
/* Bounds may be -INFINITY / INFINITY for "none". */
cn_tensor *cn_clamp(cn_tensor *x, double lo, double hi);
cn_tensor *cn_logical_not(cn_tensor *x); /* -> bool */

/* ------------------------------------------------------------------------ */
/* Elementwise, binary (NumPy broadcasting, PyTorch type promotion)         */
/* ------------------------------------------------------------------------ */

cn_tensor *cn_add(cn_tensor *a, cn_tensor *b);
cn_tensor *cn_sub(cn_tensor *a, cn_tensor *b);
cn_tensor *cn_mul(cn_tensor *a, cn_tensor *b);
cn_tensor *cn_div(cn_tensor *a, cn_tensor *b); /* true division: ints -> f32 */
cn_tensor *cn_pow(cn_tensor *a, cn_tensor *b);
cn_tensor *cn_maximum(cn_tensor *a, cn_tensor *b); /* NaN propagates */
cn_tensor *cn_minimum(cn_tensor *a, cn_tensor *b);
/* Comparisons and logic give bool tensors. */
cn_tensor *cn_eq(cn_tensor *a, cn_tensor *b);
cn_tensor *cn_ne(cn_tensor *a, cn_tensor *b);
cn_tensor *cn_lt(cn_tensor *a, cn_tensor *b);
cn_tensor *cn_le(cn_tensor *a, cn_tensor *b);
cn_tensor *cn_gt(cn_tensor *a, cn_tensor *b);
cn_tensor *cn_ge(cn_tensor *a, cn_tensor *b);
cn_tensor *cn_logical_and(cn_tensor *a, cn_tensor *b);
cn_tensor *cn_logical_or(cn_tensor *a, cn_tensor *b);
cn_tensor *cn_logical_xor(cn_tensor *a, cn_tensor *b);
/* cond ? a : b, all three broadcast together; cond is cast to bool. */
cn_tensor *cn_where(cn_tensor *cond, cn_tensor *a, cn_tensor *b);

/* With a Python-like scalar: the scalar takes x's dtype (as a rank-0 tensor),
 * except that a float scalar with an integer x gives f32. */
cn_tensor *cn_add_scalar(cn_tensor *x, double s);
cn_tensor *cn_sub_scalar(cn_tensor *x, double s); /* x - s */
cn_tensor *cn_rsub_scalar(cn_tensor *x, double s);/* s - x */
cn_tensor *cn_mul_scalar(cn_tensor *x, double s);
cn_tensor *cn_div_scalar(cn_tensor *x, double s);
cn_tensor *cn_pow_scalar(cn_tensor *x, double s);

/* ------------------------------------------------------------------------ */
/* Reductions                                                               */
/* ------------------------------------------------------------------------ */
/* axes/naxes: the axes to reduce (naxes = 0: every axis). keepdim keeps them
 * as size 1. Results are identical for any thread count. Integer and bool
 * sums and products give i64, as in PyTorch. */

cn_tensor *cn_sum(cn_tensor *x, const int *axes, int naxes, bool keepdim);
cn_tensor *cn_mean(cn_tensor *x, const int *axes, int naxes, bool keepdim);
cn_tensor *cn_prod(cn_tensor *x, const int *axes, int naxes, bool keepdim);
cn_tensor *cn_max(cn_tensor *x, const int *axes, int naxes, bool keepdim);
cn_tensor *cn_min(cn_tensor *x, const int *axes, int naxes, bool keepdim);
/* Divides by N - correction (1: unbiased, like torch.var's default). */
cn_tensor *cn_var(cn_tensor *x, const int *axes, int naxes, double correction, bool keepdim);
cn_tensor *cn_std(cn_tensor *x, const int *axes, int naxes, double correction, bool keepdim);
cn_tensor *cn_logsumexp(cn_tensor *x, const int *axes, int naxes, bool keepdim);
/* The p-norm (p = 2: Euclidean; p = INFINITY: max abs; p = 1; any p > 0). */
cn_tensor *cn_norm(cn_tensor *x, double p, const int *axes, int naxes, bool keepdim);
/* Index of the first max/min along axis (i64). */
cn_tensor *cn_argmax(cn_tensor *x, int axis, bool keepdim);
cn_tensor *cn_argmin(cn_tensor *x, int axis, bool keepdim);
/* Over the flattened tensor: a rank-0 i64. */
cn_tensor *cn_argmax_all(cn_tensor *x);
cn_tensor *cn_argmin_all(cn_tensor *x);

/* ------------------------------------------------------------------------ */
/* Linear algebra                                                           */
/* ------------------------------------------------------------------------ */

/* numpy.matmul: 1-D x 1-D is a dot product; a 1-D left operand is a row and
 * a 1-D right operand a column (the added axis is removed again); batch axes
 * broadcast. f32 and f64 go through BLAS when built with it. */
cn_tensor *cn_matmul(cn_tensor *a, cn_tensor *b);
/* ONNX MatMulInteger: (a - a_zero_point) @ (b - b_zero_point) with exact
 * int32 sums (CPU). a: u8 or i8 [..., M, K]; b: u8 or i8 [K, N], or
 * [..., K, N] with a's batch sizes; a_zero_point: NULL (0), a scalar or [M]
 * (one per row of a), of a's dtype; b_zero_point: NULL, a scalar or [N]
 * (one per column of b), of b's dtype. -> i32 [..., M, N]. */
cn_tensor *cn_matmul_integer(cn_tensor *a, cn_tensor *b, cn_tensor *a_zero_point,
                             cn_tensor *b_zero_point);

/* ------------------------------------------------------------------------ */
/* Softmax, shape and index operations                                      */
/* ------------------------------------------------------------------------ */

cn_tensor *cn_softmax(cn_tensor *x, int axis);
cn_tensor *cn_log_softmax(cn_tensor *x, int axis);
cn_tensor *cn_concat(cn_tensor *const *xs, int n, int axis);
cn_tensor *cn_stack(cn_tensor *const *xs, int n, int axis);
/* Split along axis into nsizes pieces of the given sizes (views), written to
 * out[0..nsizes-1]. Returns 0 or a negative status. */
int cn_split(cn_tensor *x, int axis, const int64_t *sizes, int nsizes, cn_tensor **out);
/* Split into `chunks` pieces of equal size (the last may be smaller), like
 * torch.chunk; returns the number written to out (at most chunks), or < 0. */
int cn_chunk(cn_tensor *x, int chunks, int axis, cn_tensor **out);
/* torch.gather: out[i][j][k] = x[i][index[i][j][k]][k] for axis 1. */
cn_tensor *cn_gather(cn_tensor *x, int axis, cn_tensor *index);
/* Rows of x along axis picked by a 1-D integer index. */
cn_tensor *cn_index_select(cn_tensor *x, int axis, cn_tensor *index);
/* Out of place torch.scatter_add: a copy of x with src added at index. */
cn_tensor *cn_scatter_add(cn_tensor *x, int axis, cn_tensor *index, cn_tensor *src);

typedef enum cn_pad_mode { CN_PAD_CONSTANT = 0, CN_PAD_REFLECT, CN_PAD_REPLICATE } cn_pad_mode;
/* torch.nn.functional.pad: pads holds (before, after) pairs starting from the
 * LAST axis: {left, right, top, bottom, ...}; npads is even, <= 2*ndim.
 * Negative pads crop (constant mode). */
cn_tensor *cn_pad(cn_tensor *x, const int64_t *pads, int npads, cn_pad_mode mode, double value);
/* Integer tensor -> i64 tensor with a trailing axis of num_classes
 * (num_classes < 0: max + 1). */
cn_tensor *cn_one_hot(cn_tensor *index, int64_t num_classes);
cn_tensor *cn_cumsum(cn_tensor *x, int axis);
/* Keep elements on and below (tril) / above (triu) diagonal k of the last
 * two axes; zero the rest. */
cn_tensor *cn_tril(cn_tensor *x, int64_t k);
cn_tensor *cn_triu(cn_tensor *x, int64_t k);
/* Masks built from arange comparisons (bool):
 * cn_causal_mask(n): [n, n], true where column <= row (positions a query may see);
 * cn_sequence_mask(lengths, maxlen): [B, maxlen], true where j < lengths[b]. */
cn_tensor *cn_causal_mask(int64_t n);
cn_tensor *cn_sequence_mask(cn_tensor *lengths, int64_t maxlen);
/* PyTorch 2's F.scaled_dot_product_attention, one fused op: q [..., L, E],
 * k [..., S, E], v [..., S, Ev] -> softmax(scale q k^T + mask) v [..., L, Ev];
 * batch axes broadcast. attn_mask: NULL, bool (true takes part) or float
 * (added to the scores), broadcastable to [..., L, S]; is_causal keeps key
 * j <= query i (top-left; not together with a mask); scale <= 0 or NaN means
 * 1/sqrt(E); dropout_p drops attention weights with the library's generator
 * (cn_manual_seed reproduces them; 0 is exactly deterministic). A query row
 * whose every key is masked gives zeros (PyTorch 2 gives NaN). f32 and f64;
 * f16/bf16 compute in f32. On the CPU the kernel is tiled (flash attention):
 * memory O(L (E + Ev)), never the L x S scores. The result is a view of the
 * op's output [..., L, Ev + 1], whose last column is each row's logsumexp. */
cn_tensor *cn_scaled_dot_product_attention(cn_tensor *q, cn_tensor *k, cn_tensor *v,
                                           cn_tensor *attn_mask, double dropout_p,
                                           bool is_causal, double scale);
/* Rotary position embeddings (RoPE) of x [..., T, D], as GPT-NeoX, LLaMA and
 * Hugging Face's transformers apply them to q and k ([B, heads, T, head_dim],
 * the layout of cn_scaled_dot_product_attention): row t is at position
 * p = offset + t; of its first rotary_dim features (0: all; even), each pair
 * (u, v) turns by the angle p base^(-2i / rotary_dim), i = 0 .. rotary_dim/2
 * - 1: u' = u cos - v sin, v' = v cos + u sin. The pairs are (x[i],
 * x[i + rotary_dim/2]) (HF's rotate_half), or (x[2i], x[2i + 1]) with
 * interleaved (GPT-J). The other features pass through. inverse turns the
 * other way (undoes it). base 0 means 10000. offset places new rows after
 * the ones in a key/value cache. Angles, cos and sin are computed in double.
 * opts NULL: the defaults. */
typedef struct cn_rope_opts {
    int64_t offset;     /* the position of row 0 (>= 0) */
    int64_t rotary_dim; /* 0: D */
    double base;        /* 0: 10000 */
    bool interleaved;
    bool inverse;
} cn_rope_opts;
cn_tensor *cn_rope(cn_tensor *x, const cn_rope_opts *opts);
/* torch.nn.functional.layer_norm: x normalised over its last ndim axes,
 * y = (x - mean) / sqrt(var + eps) * weight + bias (var biased), one op.
 * weight and bias: NULL, or of the normalized shape (x's last ndim sizes)
 * and x's dtype. Mean and variance are computed in double. On a device
 * whose backend has no layer_norm kernel (CUDA, OpenCL), the same formula
 * is composed of mean, var, sub, rsqrt, mul and add. */
cn_tensor *cn_layer_norm(cn_tensor *x, int ndim, cn_tensor *weight, cn_tensor *bias, double eps);

/* ------------------------------------------------------------------------ */
/* Convolution and pooling                                                  */
/* ------------------------------------------------------------------------ */
/* Images are NCHW: [N, C, H, W], or [C, H, W] for one image without a batch
 * axis, as in torch.nn.functional; f32, f64, f16 or bf16. Pairs in the
 * options are {height, width}; zero-initialised options (or NULL) are
 * PyTorch's defaults, so designated initialisers name only what differs:
 *     cn_conv2d(x, w, b, &(cn_conv_opts){.padding = {1, 1}});
 *     cn_max_pool2d(x, &(cn_pool_opts){.kernel = {2, 2}}); */

typedef struct cn_conv_opts {
    int64_t stride[2];         /* 0: 1 */
    int64_t padding[2];        /* zeros added on both sides */
    int64_t dilation[2];       /* 0: 1 */
    int64_t groups;            /* 0: 1 */
    int64_t output_padding[2]; /* conv_transpose2d only: added to one side of the output */
} cn_conv_opts;

/* x [N, C, H, W], weight [O, C / groups, kH, kW], bias [O] or NULL (none)
 * -> [N, O, (H + 2 pad - dilation (kH - 1) - 1) / stride + 1, ...]. */
cn_tensor *cn_conv2d(cn_tensor *x, cn_tensor *weight, cn_tensor *bias, const cn_conv_opts *opts);
/* x [N, C, L] (or [C, L]), weight [O, C / groups, k]: conv2d over a height
 * of 1, with the first entry of each option pair. */
cn_tensor *cn_conv1d(cn_tensor *x, cn_tensor *weight, cn_tensor *bias, const cn_conv_opts *opts);
/* The adjoint of conv2d in x ("deconvolution"): x [N, Cin, H, W], weight
 * [Cin, Cout / groups, kH, kW], bias [Cout] or NULL -> [N, Cout,
 * (H - 1) stride - 2 pad + dilation (kH - 1) + output_padding + 1, ...].
 * output_padding must be smaller than the stride or the dilation. */
cn_tensor *cn_conv_transpose2d(cn_tensor *x, cn_tensor *weight, cn_tensor *bias,
                               const cn_conv_opts *opts);

typedef struct cn_pool_opts {
    int64_t kernel[2];        /* required */
    int64_t stride[2];        /* 0: the kernel size */
    int64_t padding[2];       /* at most half the kernel */
    int64_t dilation[2];      /* max pooling only; 0: 1 */
    bool ceil_mode;           /* round the output size up (windows must start inside) */
    bool exclude_pad;         /* avg: divide by the taps inside x (count_include_pad = false) */
    int64_t divisor_override; /* avg: > 0 divides every window by this */
} cn_pool_opts;

/* Window maxima; padding never wins. The gradient goes to the first maximum
 * of each window (row-major), as in PyTorch. */
cn_tensor *cn_max_pool2d(cn_tensor *x, const cn_pool_opts *opts);
/* Where max_pool2d's maxima are: i64, the flat position h * W + w within
 * the plane (PyTorch's return_indices=True). */
cn_tensor *cn_max_pool2d_indices(cn_tensor *x, const cn_pool_opts *opts);
/* Window means (padding counts as zeros unless exclude_pad). */
cn_tensor *cn_avg_pool2d(cn_tensor *x, const cn_pool_opts *opts);
/* Means over out_h x out_w windows that tile the image (rows
 * [floor(i H / out_h), ceil((i + 1) H / out_h))); (1, 1) is global pooling. */
cn_tensor *cn_adaptive_avg_pool2d(cn_tensor *x, int64_t out_h, int64_t out_w);

/* ------------------------------------------------------------------------ */
/* Automatic differentiation                                                */
/* ------------------------------------------------------------------------ */
/* Eager (define-by-run): an op whose input requires a gradient is recorded;
 * cn_backward walks the record in reverse and accumulates into the .grad of
 * every leaf that requires one. Gradients are built from ops themselves, so
 * with CN_GRAD_CREATE_GRAPH they are differentiable again (higher order).
 * The same functions build gradient subgraphs of static graphs. */

/* Mark a leaf (a tensor made by the user, not by an op) as a parameter.
 * Only float tensors can require a gradient. */
int cn_set_requires_grad(cn_tensor *t, bool requires_grad);
bool cn_requires_grad(const cn_tensor *t);
/* True for tensors made by the user (or detached), false for op results. */
bool cn_is_leaf(const cn_tensor *t);
/* The accumulated gradient of a leaf (borrowed: valid until the next
 * backward or cn_zero_grad), or NULL. */
cn_tensor *cn_get_grad(const cn_tensor *t);
/* Replace the gradient (NULL clears it). */
int cn_set_grad(cn_tensor *t, cn_tensor *grad);
/* Clear the gradient (like PyTorch's zero_grad(set_to_none=True)). */
void cn_zero_grad(cn_tensor *t);

/* Recording can be switched off (per thread), e.g. for evaluation or an
 * optimiser step. Returns the previous setting. */
bool cn_set_grad_enabled(bool enabled);
bool cn_is_grad_enabled(void);
/* No-grad regions nest: cn_no_grad_begin(); ... cn_no_grad_end(); */
void cn_no_grad_begin(void);
void cn_no_grad_end(void);

/* Mixed precision (torch.autocast(device_type="cpu")). Inside an autocast
 * region of dtype CN_BF16 or CN_F16 (per thread, nesting like no-grad
 * regions; a nested CN_F32 region turns it off), matmul (and linear
 * layers, which use it), conv2d, conv_transpose2d and scaled dot-product
 * attention round their f32 inputs to that dtype through cast ops, whose
 * gradients cast back, so parameters and their gradients stay f32. The
 * products accumulate in f32 and return f32 (PyTorch returns the low
 * precision; f32 keeps the sums, norms and losses that follow as they
 * were). Everything else computes as outside the region. Where the CPU
 * multiplies the dtype natively (avx512_bf16 or AMX tiles, through
 * oneDNN; cn_autocast_native) matmul multiplies the rounded values there;
 * elsewhere they are widened and multiplied in f32, which gives the same
 * products up to the order of the sums. A graph traced inside a region
 * records the casts, so its program computes the same way. Operations
 * running backward inside the region are autocast too (matmul's
 * gradients are products). */
int cn_autocast_begin(cn_dtype dt); /* CN_BF16, CN_F16, or CN_F32 (off) */
int cn_autocast_end(void);
/* The dtype of the innermost region, CN_F32 outside any. */
cn_dtype cn_autocast_dtype(void);
/* Does matmul under autocast to dt run on the CPU's own low-precision
 * products (true) or in f32 (false)? Detected once at run time: the
 * CPU's avx512_bf16 / amx_bf16 (avx512_fp16 / amx_fp16 for CN_F16) and
 * a oneDNN matmul primitive for them; CN_AUTOCAST_NATIVE=0 in the
 * environment turns it off. */
bool cn_autocast_native(cn_dtype dt);

/* A tensor sharing t's data with no history (a leaf). */
cn_tensor *cn_detach(cn_tensor *t);

enum {
    CN_GRAD_RETAIN_GRAPH = 1 << 0, /* keep the record for another backward */
    CN_GRAD_CREATE_GRAPH = 1 << 1, /* record the backward pass itself (higher order);
                                      implies RETAIN_GRAPH, as in PyTorch */
    CN_GRAD_ALLOW_UNUSED = 1 << 2  /* an input the outputs do not depend on gets NULL */
};

/* d(root)/d(leaves), accumulated into each leaf's grad. seed is the gradient
 * of root (NULL: root must have one element, seed 1). Frees the record
 * unless flags has CN_GRAD_RETAIN_GRAPH. */
/* Called with each leaf as soon as a cn_backward (or cn_backward_ex) has
 * made its .grad final, while the rest of the backward pass still runs
 * (PyTorch's post-accumulate-grad hooks; data-parallel training starts
 * averaging gradients from here). One hook per thread; NULL removes it. */
typedef void (*cn_grad_ready_fn)(cn_tensor *leaf, void *ctx);
void cn_set_grad_ready_hook(cn_grad_ready_fn fn, void *ctx);
/* A gradient hook on tensor t (PyTorch's Tensor.register_hook): called by
 * every backward pass (cn_backward*, cn_grad) with t's gradient once it is
 * complete, before it flows into t's history (or into a leaf's .grad). It
 * may set *replace to a gradient of the same shape and dtype (made by ops:
 * the scope the hook runs in owns it, as any result), which is used
 * instead; it returns < 0 (after cn_fail) to stop the pass. t must require grad. Hooks run in registration order; the hook
 * goes with t, or with cn_remove_grad_hook; free_ctx (may be NULL) is
 * called with ctx then. Returns the hook's id (> 0) or < 0. */
typedef int (*cn_grad_hook_fn)(cn_tensor *grad, cn_tensor **replace, void *ctx);
int cn_add_grad_hook(cn_tensor *t, cn_grad_hook_fn fn, void *ctx, void (*free_ctx)(void *));
int cn_remove_grad_hook(cn_tensor *t, int id);
int cn_backward(cn_tensor *root, cn_tensor *seed);
int cn_backward_ex(cn_tensor *root, cn_tensor *seed, unsigned flags);

/* The gradients of sum(outputs[i] * seeds[i]) with respect to inputs, as new
 * tensors in grads[0..ninputs) (owned by the current scope), without touching
 * any .grad (torch.autograd.grad). seeds may be NULL (each output must then
 * have one element). On symbolic tensors of a static graph this appends the
 * gradient subgraph. */
int cn_grad(cn_tensor *const *outputs, cn_tensor *const *seeds, int noutputs,
            cn_tensor *const *inputs, int ninputs, cn_tensor **grads, unsigned flags);

/* Gradient clipping, in place on the .grad of each of params (NULL entries
 * and parameters without a gradient are skipped), as torch.nn.utils does.
 * By value: every gradient element into [-clip, clip]. By norm: if the
 * norm_type-norm of all gradients together (INFINITY: the largest |g|)
 * exceeds max_norm, scale them all by max_norm / (norm + 1e-6); the norm
 * before clipping goes to *total_norm (may be NULL). */
int cn_clip_grad_value(cn_tensor *const *params, int n, double clip);
int cn_clip_grad_norm(cn_tensor *const *params, int n, double max_norm, double norm_type,
                      double *total_norm);

/* Forward mode. Inside a dual region, a tensor given a tangent with
 * cn_set_tangent propagates one through every op (jvp rules), readable with
 * cn_get_tangent. cn_jvp wraps this for a function. */
void cn_dual_begin(void);
void cn_dual_end(void);
int cn_set_tangent(cn_tensor *t, cn_tensor *tangent);
cn_tensor *cn_get_tangent(const cn_tensor *t); /* borrowed, or NULL (zero) */

/* A function of tensors: compute outputs[0..noutputs) from inputs. */
typedef int (*cn_tensor_fn)(void *ctx, cn_tensor *const *inputs, int ninputs, cn_tensor **outputs,
                            int noutputs);
/* Evaluate fn at primals and push tangents through it: outputs and their
 * tangents (Jacobian-vector products), owned by the current scope. */
int cn_jvp(cn_tensor_fn fn, void *ctx, cn_tensor *const *primals, cn_tensor *const *tangents,
           int ninputs, cn_tensor **outputs, cn_tensor **out_tangents, int noutputs);

/* ------------------------------------------------------------------------ */
/* Custom ops                                                               */
/* ------------------------------------------------------------------------ */
/* An op of the user's own, registered at run time (docs/adding-an-op.md,
 * "From your own program"). It then behaves like a built-in op: eagerly,
 * recorded for autograd, captured by static graphs and cn_compile. It has
 * one output (an op with several results returns them packed into one
 * tensor, as lstm_seq does). Registrations last as long as the process;
 * ids are not stable between processes (names are). A program using a
 * custom op cannot be exported to ONNX.
 *
 *     static const cn_custom_op_def swish_def = {
 *         .name = "swish", .ninputs = 2, .flags = CN_CUSTOM_PURE,
 *         .infer = swish_infer, .cpu_kernel = swish_cpu, .vjp = swish_vjp,
 *     };
 *     int swish = cn_register_op(&swish_def);
 *     cn_tensor *y = cn_apply_op(swish, (cn_tensor *[]){x, beta}, 2, NULL);
 */
#define CN_CUSTOM_MAX_INPUTS 8
#define CN_CUSTOM_MAX_ATTRS 5

/* Attribute values of one application: four integers and four floats; the
 * def's attrs[] names them. */
typedef struct cn_custom_attrs {
    int64_t i[4];
    double f[4];
} cn_custom_attrs;

/* dtype and shape of an input or of the output (sizes of -1 are unknown
 * until a static program runs: propagate them, skip checks that need them). */
typedef struct cn_custom_meta {
    cn_dtype dtype;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
} cn_custom_meta;

typedef struct cn_custom_attr_def {
    const char *name;  /* NULL ends the table */
    bool is_float;     /* f[slot] if true, else i[slot] */
    int slot;          /* 0..3 */
    double def;        /* the value cn_apply_op uses when given no attributes */
} cn_custom_attr_def;

/* Check the inputs and attributes and give the output's dtype and shape.
 * Returns 0, or nonzero after writing a message into err (err_size bytes);
 * the call fails with "<name>: <message>". Runs again with real sizes when
 * a static program runs, so it must depend only on its arguments. */
typedef int (*cn_custom_infer_fn)(void *user, const cn_custom_meta *in, int nin,
                                  const cn_custom_attrs *a, cn_custom_meta *out, char *err,
                                  size_t err_size);
/* Fill out (contiguous, shaped by infer) from the inputs, which are
 * contiguous and have the dtypes infer accepted (f16/bf16 arrive widened to
 * f32). The CPU kernel reads and writes with cn_data; a device kernel gets
 * tensors on its device (contiguous; read its handles with the backend's
 * API). Call no cn_ ops here. In static programs a CPU kernel of a
 * CN_CUSTOM_PURE op may run on several threads at once. Returns 0, or
 * nonzero after writing a message into err. */
typedef int (*cn_custom_kernel_fn)(void *user, cn_tensor *const *in, int nin,
                                   const cn_custom_attrs *a, cn_tensor *out, char *err,
                                   size_t err_size);
/* Reverse mode: the gradient with respect to input i (shaped like it) from
 * gout (shaped like out), built from cn_ ops, so that it is recorded and
 * differentiable again where those ops are (higher order), and traced into
 * static graphs. Called only for inputs that need a gradient. Results go to
 * the current scope (return what the ops return). NULL means an error. */
typedef cn_tensor *(*cn_custom_vjp_fn)(void *user, cn_tensor *const *in, int nin,
                                       const cn_custom_attrs *a, cn_tensor *out, cn_tensor *gout,
                                       int i);
/* Forward mode: out's tangent from the inputs' tangents tin (NULL entries
 * are zero), built from cn_ ops. NULL means an error. */
typedef cn_tensor *(*cn_custom_jvp_fn)(void *user, cn_tensor *const *in, cn_tensor *const *tin,
                                       int nin, const cn_custom_attrs *a, cn_tensor *out);
/* Reverse mode for every input at once, for gradients that share work:
 * grads[i] for each i with need[i] (results as for vjp; a NULL one is taken
 * as zeros). Returns 0, or nonzero after writing a message into err. Called
 * once per recorded application instead of vjp. */
typedef int (*cn_custom_vjp_multi_fn)(void *user, cn_tensor *const *in, int nin,
                                      const cn_custom_attrs *a, cn_tensor *out, cn_tensor *gout,
                                      const bool *need, cn_tensor **grads, char *err,
                                      size_t err_size);

enum {
    /* The output depends only on the inputs and attributes, and the kernel
     * has no side effects: static programs may fold it over constants,
     * merge equal applications and run it beside other steps. Without it
     * the op is treated like a random one: never folded or merged, run in
     * program order. */
    CN_CUSTOM_PURE = 1 << 0,
    /* The output carries no gradient (like a comparison). */
    CN_CUSTOM_NONDIFF = 1 << 1
};

typedef struct cn_custom_op_def {
    const char *name;   /* unique among built-in and custom ops; [A-Za-z0-9_.] */
    int ninputs;        /* 1..CN_CUSTOM_MAX_INPUTS */
    unsigned flags;     /* CN_CUSTOM_* */
    cn_custom_attr_def attrs[CN_CUSTOM_MAX_ATTRS];
    cn_custom_infer_fn infer;      /* required */
    cn_custom_kernel_fn cpu_kernel;/* required */
    /* Optional kernels for other devices, by cn_device_kind ([CN_DEVICE_CPU]
     * is ignored). Without one, the op runs on the CPU: eagerly its inputs
     * are copied to the host and the result back; in a static program the
     * step is placed on the CPU with explicit transfers around it. */
    cn_custom_kernel_fn device_kernels[CN_DEVICE_KIND_COUNT];
    cn_custom_vjp_fn vjp;          /* optional: without it (and vjp_multi), no reverse mode */
    cn_custom_vjp_multi_fn vjp_multi; /* optional: instead of vjp */
    cn_custom_jvp_fn jvp;          /* optional: without it, no forward mode */
    void *user;                    /* passed to every callback */
    const char *doc;               /* optional: one line, for listings */
} cn_custom_op_def;

/* Register an op; the def's strings are copied, the callbacks and user
 * pointer kept. Thread-safe. Returns its id (>= 0), or a negative status
 * after an error: a name already taken, a bad def. */
int cn_register_op(const cn_custom_op_def *def);
/* The id of a registered custom op, or a negative status. */
int cn_custom_op_find(const char *name);
/* Apply a custom op: attrs NULL takes the defaults of the def's attrs[].
 * Recorded for autograd, captured by static graphs, like any op. Returns
 * a tensor owned by the current scope, or NULL after an error. */
cn_tensor *cn_apply_op(int op, cn_tensor *const *inputs, int ninputs, const cn_custom_attrs *attrs);

/* Gradient checking, for custom ops and any differentiable function.
 * Every float input is converted to f64 (a leaf requiring a gradient) and
 * fn(ctx, inputs, n, &out, 1) is evaluated; the reverse-mode gradient of
 * sum(out * w) (w fixed pseudo-random) from cn_grad is compared with
 * central differences (L(x + eps) - L(x - eps)) / 2 eps element by element:
 * |analytic - numeric| <= atol + rtol |numeric|. Integer inputs are passed
 * through unchanged. fn may itself call cn_grad with CN_GRAD_CREATE_GRAPH
 * (checking second-order gradients). CPU tensors only. */
typedef struct cn_gradcheck_opts {
    double eps;  /* 0: 1e-6 */
    double atol; /* 0: 1e-5 */
    double rtol; /* 0: 1e-3 */
    bool check_jvp; /* also compare forward mode (cn_jvp) with differences */
} cn_gradcheck_opts;
typedef struct cn_gradcheck_result {
    double max_abs_err; /* the largest |analytic - numeric| */
    double max_ratio;   /* the largest error / (atol + rtol |numeric|): > 1 fails */
    int worst_input;    /* where max_ratio was reached (-1: forward mode) */
    int64_t worst_index;/* a row-major element index */
    bool passed;
} cn_gradcheck_result;
/* Returns 0 with *res filled (res->passed says whether it passed), or a
 * negative status when fn or a gradient fails to compute. */
int cn_gradcheck(cn_tensor_fn fn, void *ctx, cn_tensor *const *inputs, int ninputs,
                 const cn_gradcheck_opts *opts, cn_gradcheck_result *res);

/* ------------------------------------------------------------------------ */
/* Static graphs                                                            */
/* ------------------------------------------------------------------------ */
/* Define, then run many times. Ops given a placeholder (or any tensor made
 * from one) build graph nodes instead of computing: the same C code computes
 * eagerly when given data and builds a graph when given placeholders
 * (tracing). Shapes are checked while building; a size of -1 in a
 * placeholder is unknown until run. Tensors with data used by the graph
 * (parameters) are captured by reference: a run sees their current values.
 *
 *     cn_graph *g = cn_graph_new();
 *     cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 784));
 *     cn_tensor *y = model(x);                      // builds nodes
 *     cn_program *p = cn_compile(g, &y, 1, NULL);
 *     cn_tensor *out;
 *     cn_run(p, &x, &batch, 1, &out, 1);           // out = model(batch)
 */
typedef struct cn_graph cn_graph;
typedef struct cn_program cn_program;

cn_graph *cn_graph_new(void);
/* Drops the caller's reference: the graph lives on while tensors of it do. */
void cn_graph_free(cn_graph *g);
/* A graph input, fed at run time. The name is copied (cn_get_name). */
cn_tensor *cn_placeholder(cn_graph *g, const char *name, cn_dtype dt, int ndim,
                          const int64_t *shape);
/* Is t a value of a static graph (no data until run)? */
bool cn_is_symbolic_tensor(const cn_tensor *t);

/* Optimisation levels (docs/graph-passes.md shows what each pass does):
 *   0  run the graph as built: one step per node, every result allocated
 *   1  constant folding, algebraic simplification, common-subexpression and
 *      dead-code elimination; memory planning (intermediates live in one
 *      arena planned by liveness, reused across runs)
 *   2  (the default) also fusion of elementwise chains and of
 *      matmul/conv2d + elementwise epilogues, in-place execution of fused
 *      steps, and running independent small steps concurrently */
typedef struct cn_compile_opts {
    int opt_level;
    /* Print the program after each pass (NULL: quiet). */
    FILE *trace;
    /* Debugging the planner: fill each planned buffer with NaN bytes once
     * its value is dead, and check that no two live values share bytes. */
    bool poison;
    /* Do not warn on stderr when steps fall back to the CPU because their
     * device has no kernel for them (cn_program_stats counts them). */
    bool quiet_fallback;
    /* Do not pack constant weights for the CPU's GEMM. By default the b of
     * a matmul and the weights of a convolution that are constants of the
     * program (not parameters) are packed once into the built-in GEMM's
     * panels and kept with the program (cn_program_stats' packed_bytes),
     * packed again only when written; the products then run on the
     * built-in GEMM rather than BLAS. */
    bool no_packing;
} cn_compile_opts;

/* Order, check and optimise the nodes that outputs depend on. opts NULL:
 * every default (opt_level 2). A tensor with data the graph reads that
 * does not require a gradient may be folded into a constant; if it is
 * written later, the next cn_run notices (storage versions) and compiles
 * again. Parameters (requires_grad) are always read at run time. */
cn_program *cn_compile(cn_graph *g, cn_tensor *const *outputs, int noutputs,
                       const cn_compile_opts *opts);
void cn_program_free(cn_program *p);
/* The placeholders the program needs, in a fixed order. */
int cn_program_num_inputs(const cn_program *p);
/* How many steps (kernels, views, transfers) one run executes. */
int cn_program_num_steps(const cn_program *p);
cn_tensor *cn_program_input(const cn_program *p, int i);
/* Feed values[i] to placeholders[i] (every input must be fed), run, and put
 * the outputs (owned by the current scope) into outputs[0..noutputs).
 * Outputs are new tensors each run; intermediates live in the program's
 * planned arenas, one per device (allocated on the first run for the fed
 * sizes, again only when they change). Each step runs on the device of the
 * cn_device_scope it was built in, else on its inputs' device; the program
 * is placed again when the inputs are fed on other devices than the last
 * run's (docs/graph-passes.md, "Placement"). A program is one thread's at
 * a time (its arenas hold the run's intermediates): compile one per thread
 * to run a graph from several threads at once. */
int cn_run(cn_program *p, cn_tensor *const *placeholders, cn_tensor *const *values, int nfeeds,
           cn_tensor **outputs, int noutputs);
/* A graph built under scopes of rank devices ("rank:1/cpu:0") is cut into
 * per-rank programs: every rank builds the same graph with the same code
 * and compiles it; each keeps its own steps, and every value one rank
 * computes and another reads travels as a send/recv pair inserted by
 * cn_compile (docs/distributed.md). Every rank calls cn_run as often, in
 * the same order, feeding every placeholder. An output computed on another
 * rank is NULL in that run's outputs (cn_run still returns 0): the loss of
 * a pipeline is read on the rank of its last stage. This gives the rank
 * that computes output i, or -1 when every rank does (values of inputs
 * and constants only, or a program that is not split). */
int cn_program_output_rank(const cn_program *p, int i);

/* Output i is written into t on every run (t must have the output's dtype
 * and sizes; contiguous t is written by the step itself, no copy) and
 * cn_run hands back t itself: PyTorch's out= argument, for steps that must
 * not allocate. t NULL unbinds. */
int cn_program_bind_output(cn_program *p, int i, cn_tensor *t);

/* A whole training step as one program: the outputs (outputs[0] is the
 * scalar loss; more may follow, e.g. a count of correct predictions), the
 * gradients of the loss with respect to opt's parameters written straight
 * into their .grad (the optimiser's flat buffer), then opt's update. cn_run
 * with this program returns outputs[0..noutputs). The gradients replace
 * (not add to) .grad, so no zero_grad is needed between steps. opt must
 * outlive the program; create it before building the graph (see
 * cn_optimizer). */
typedef struct cn_optimizer cn_optimizer; /* (the Optimisers section) */
/* Split over ranks (cn_program_output_rank): the gradient steps run where
 * the forward steps they differentiate ran; each rank gets the gradients
 * of the parameters its own steps read (one read on several ranks gets its
 * summed gradient on each). A parameter only other ranks read gets no
 * gradient on this rank: its .grad is NULL, so the optimiser (built over
 * every parameter on every rank, so the graphs match) leaves it as it is;
 * its trained values live on the ranks that read it. */
cn_program *cn_compile_train_step(cn_graph *g, cn_tensor *const *outputs, int noutputs,
                                  cn_optimizer *opt, const cn_compile_opts *opts);

/* What the last run's memory plan found (all zero before the first run). */
typedef struct cn_program_stats {
    int nsteps;                /* steps per run */
    int nfused;                /* of which fused elementwise kernels */
    int nlevels;               /* groups of steps that may run concurrently */
    size_t planned_bytes;      /* the arena: peak memory of intermediates */
    size_t unplanned_bytes;    /* the sum of every intermediate's size */
    size_t output_bytes;       /* outputs, allocated per run */
    int ninplace;              /* steps writing over a dead input */
    int ncompiles;             /* builds, including rebuilds after a write */
    /* Placement (for the devices of the last run's inputs, or before the
     * first run for inputs on the program's device): steps other than
     * transfers by the kind of device they run on, transfer steps (`to`:
     * those the graph has and those placement inserted), and steps that
     * run on the CPU because their device has no kernel for them. */
    int ndevice_steps[CN_DEVICE_KIND_COUNT];
    int ntransfers;
    int nfallbacks;
    /* A program split over the ranks of an MPI job (devices "rank:R/...",
     * docs/distributed.md): the rank whose part this is (-1: not split),
     * and its send and recv steps (counted in ndevice_steps too). */
    int rank;
    int nsends;
    int nrecvs;
    /* Constant weights packed for the CPU's GEMM, kept with the program. */
    size_t packed_bytes;
} cn_program_stats;
int cn_program_stats_get(const cn_program *p, cn_program_stats *stats);
/* The steps as text, one per line. */
int cn_program_dump(const cn_program *p, FILE *f);
/* The program as a Graphviz DOT digraph. */
int cn_program_write_dot(const cn_program *p, FILE *f);

/* ------------------------------------------------------------------------ */
/* Data: datasets from files, and a batching loader                         */
/* ------------------------------------------------------------------------ */
/* The readers never abort on a bad file: they return NULL (or a negative
 * status) and cn_last_error() names the file and what is wrong with it
 * (missing, truncated, corrupt, which line and column). Results go to the
 * current scope. */

/* An IDX file (the MNIST family), plain or gzip-compressed (recognised by its
 * content, not its name; gzip needs a build with zlib). The tensor has the
 * header's shape and element type: unsigned byte -> u8; signed byte, short
 * and int -> i32; float -> f32; double -> f64. */
cn_tensor *cn_load_idx(const char *path);

/* Fashion-MNIST (or MNIST) from dir (NULL: /usr/share/datasets/fashion-mnist):
 * the training set (train = true, 60000 images) or the test set (10000).
 * images: f32 [N, 1, 28, 28] scaled to [0, 1]; labels: i64 [N]. The files are
 * {train,t10k}-{images-idx3,labels-idx1}-ubyte, with or without ".gz". */
int cn_load_fashion_mnist(const char *dir, bool train, cn_tensor **images, cn_tensor **labels);
/* The same with the pixels as stored: images u8 [N, 1, 28, 28] (0..255, a
 * quarter of the memory), labels i64 [N]. cn_loader_normalize(l, 0, {0},
 * {255}, 1) turns each batch into exactly cn_load_fashion_mnist's values. */
int cn_load_fashion_mnist_u8(const char *dir, bool train, cn_tensor **images, cn_tensor **labels);

/* Images through stb_image / stb_image_write. A build without stb fails with
 * "built without stb". */
typedef enum cn_image_layout {
    CN_IMAGE_HWC = 0, /* [height, width, channels], as stored in files */
    CN_IMAGE_CHW      /* [channels, height, width], as convolutions take them */
} cn_image_layout;
/* PNG, JPEG, BMP (and GIF, TGA, PSD, HDR, PNM) -> u8 (0..255) or f32 (scaled
 * to [0, 1]) in the given layout. channels: 0 keeps the file's, 1 to 4
 * converts (grey, grey + alpha, RGB, RGBA). */
cn_tensor *cn_load_image(const char *path, int channels, cn_image_layout layout, cn_dtype dt);
/* Writes PNG, JPEG or BMP, chosen by the extension (.png, .jpg/.jpeg, .bmp).
 * img: [H, W] (grey) or rank 3 in the given layout with 1 to 4 channels; u8,
 * or float with values in [0, 1] (scaled by 255, rounded and clamped).
 * jpeg_quality: 1 to 100 (0: 90). */
int cn_save_image(const char *path, const cn_tensor *img, cn_image_layout layout, int jpeg_quality);

/* Audio. WAV files through libsndfile (a build without it fails with "built
 * without libsndfile"): 8/16/24/32-bit PCM, float, A-law, mu-law, ADPCM...
 * in RIFF WAV, WAVE_FORMAT_EXTENSIBLE or RF64. The channels are mixed down
 * to mono (their mean) and samples scaled to [-1, 1]: f32 [frames]. The
 * rate is the file's, into *sample_rate (may be NULL); nothing is
 * resampled. A truncated file (its data chunk longer than the file) fails. */
cn_tensor *cn_load_wav(const char *path, int *sample_rate);
/* A log-mel spectrogram as torchaudio's MelSpectrogram computes it with its
 * defaults (center=True, reflect padding, periodic Hann window of n_fft,
 * power 2, HTK mel scale, no filter normalisation), then log(max(mel,
 * floor)), the natural log (torchaudio's AmplitudeToDB is 10 log10). The
 * FFT is FFTW's (a build without it fails with "built without FFTW"). Zero
 * fields take the defaults given. docs/training.md, "Audio". */
typedef struct cn_mel_opts {
    int sample_rate; /* Hz, required */
    int n_fft;       /* window and FFT length (0: 400) */
    int hop;         /* samples between frames (0: n_fft / 2) */
    int n_mels;      /* filters (0: 128) */
    double fmin;     /* Hz, the lowest filter's lower edge (0) */
    double fmax;     /* Hz, the highest filter's upper edge (0: sample_rate / 2) */
    double floor;    /* the smallest value the log sees (0: 1e-10) */
} cn_mel_opts;
/* wave: 1-D float [samples], more than n_fft / 2 of them. Returns f32
 * [n_mels, 1 + samples / hop] (for an even n_fft). */
cn_tensor *cn_log_mel_spectrogram(const cn_tensor *wave, const cn_mel_opts *opts);
/* The triangular filters: f32 [n_mels, n_fft / 2 + 1], filter m rising
 * from mel point m to m + 1 and falling to m + 2, the n_mels + 2 points
 * equally spaced in HTK mels (2595 log10(1 + f / 700)) from fmin to fmax,
 * bin k at k * sample_rate / n_fft Hz. Needs no FFTW. */
cn_tensor *cn_mel_filterbank(const cn_mel_opts *opts);

/* CSV with numeric cells -> a 2-D tensor [rows, columns]. Blank lines are
 * skipped; cells may be quoted and padded with spaces; "nan" and "inf" are
 * read for float dtypes. */
enum { CN_CSV_HEADER_AUTO = 0, CN_CSV_HEADER_YES, CN_CSV_HEADER_NO };
typedef struct cn_csv_opts {
    char delimiter; /* 0: ',' */
    int header;     /* CN_CSV_HEADER_*: AUTO skips a first row with a cell that does
                       not start like a number ("x", "label") */
    cn_dtype dtype; /* f32 (the zero value), f64, i32 or i64 */
} cn_csv_opts;
cn_tensor *cn_load_csv(const char *path, const cn_csv_opts *opts); /* opts may be NULL */

/* NumPy .npy files (format versions 1, 2 and 3): f32, f64, f16, i32, i64,
 * u8 and bool, either byte order, C or Fortran order (read into C order).
 * Writing is atomic (see cn_save_safetensors) and in C order; bf16 has no
 * NumPy dtype and is refused. */
cn_tensor *cn_load_npy(const char *path);
int cn_save_npy(const char *path, const cn_tensor *t);

/* A loader over a dataset of tensors whose first axis is the sample: each
 * call to cn_loader_next gives one batch from every tensor (the same samples
 * in each). With shuffle, epoch e visits the samples in a permutation drawn
 * from (seed, e) with the Philox generator; random transforms draw from
 * (seed, e, sample), so batches depend only on the seed and the epoch, never
 * on the thread count, the prefetching or the global generator. With
 * prefetch 1 or 2, that many batches are prepared ahead on a background
 * thread. The dataset tensors are retained and must not be changed while the
 * loader lives. */
typedef struct cn_loader cn_loader;
typedef struct cn_loader_opts {
    int64_t batch_size; /* > 0 */
    bool shuffle;
    bool drop_last;     /* drop a last batch smaller than batch_size (else keep it) */
    uint64_t seed;
    int prefetch;       /* 0: prepare each batch in cn_loader_next; 1 or 2: ahead */
    cn_device device;   /* batches are given on this device (zero: the CPU); with
                           prefetch, the copy is made on the background thread */
    /* Data-parallel shards: with shard_count > 1, each epoch's order (the
     * same on every shard: same seed) is cut into global batches of
     * batch_size x shard_count samples, and this loader gives rows
     * [shard_index x batch_size, +batch_size) of each, so the shards
     * together see exactly what one loader of the global batch with
     * drop_last would (a last, partial global batch is dropped). */
    int shard_index, shard_count;
    /* Threads that prepare a batch's samples (transforms) together: 0 or 1
     * is one; the results do not depend on it. */
    int workers;
} cn_loader_opts;
cn_loader *cn_loader_new(cn_tensor *const *tensors, int ntensors, const cn_loader_opts *opts);
void cn_loader_free(cn_loader *l);
/* Transforms of dataset tensor `which`, applied per sample in the order they
 * are added, before the first batch. Samples are [C, H, W] or [H, W] (C = 1);
 * crops and flips work on any dtype, normalise gives f32. */
/* (x - mean[c]) / std[c]; n is C, or 1 for every channel. */
int cn_loader_normalize(cn_loader *l, int which, const double *mean, const double *std, int n);
/* Pad H and W by `padding` zeros on each side, then cut a random
 * height x width window (torchvision's RandomCrop). */
int cn_loader_random_crop(cn_loader *l, int which, int64_t height, int64_t width, int64_t padding);
/* Mirror the W axis with probability p. */
int cn_loader_random_hflip(cn_loader *l, int which, double p);
/* Colour jitter of f32 samples in [0, 1] (after normalising u8 by 255):
 * brightness scales by a factor from [1 - brightness, 1 + brightness],
 * then contrast moves the values from the sample's mean by one from
 * [1 - contrast, 1 + contrast], each clamped to [0, 1] (torchvision's
 * ColorJitter(brightness, contrast)). */
int cn_loader_color_jitter(cn_loader *l, int which, double brightness, double contrast);
/* Seconds cn_loader_next spent waiting for a batch (or, without prefetch,
 * preparing it) since the loader was made: the data path's cost. */
double cn_loader_wait_seconds(const cn_loader *l);
/* Batches per epoch. */
int64_t cn_loader_num_batches(const cn_loader *l);
/* The next batch into batch[0..ntensors) (owned by the current scope):
 * returns 1, or 0 at the end of an epoch (the next call starts the next
 * epoch), or a negative status. */
int cn_loader_next(cn_loader *l, cn_tensor **batch);
/* Restart at the beginning of epoch e (e.g. to resume training). */
int cn_loader_set_epoch(cn_loader *l, int64_t epoch);
int64_t cn_loader_epoch(const cn_loader *l);

/* ------------------------------------------------------------------------ */
/* Checkpoints: safetensors                                                 */
/* ------------------------------------------------------------------------ */
/* The safetensors format (8-byte little-endian header length, a JSON header
 * with dtype, shape and data_offsets per name plus an optional
 * "__metadata__" map of strings, then the raw little-endian data), readable
 * by the Python safetensors package and others. */

/* Writes n tensors (any layout) under names (NULL: each tensor's cn_get_name,
 * which must then be set), with nmeta metadata strings. The write is atomic:
 * the file is written as path.tmp.* in the same directory, flushed and
 * fsync'ed, then renamed over path and the directory fsync'ed, so a crash at
 * any moment leaves the previous file or the new one, complete. */
int cn_save_safetensors(const char *path, const char *const *names, cn_tensor *const *tensors,
                        int n, const char *const *meta_keys, const char *const *meta_values,
                        int nmeta);
/* Removes the temporary files of the atomic writes in progress (every
 * cn_save_*); async-signal-safe, for a SIGINT/SIGTERM handler that is about
 * to _exit. Temporaries left by a process killed outright are removed by
 * the next save of the same file. */
void cn_remove_temporary_files(void);
/* CRC-32C (Castagnoli) of n bytes, continuing crc (0 to start):
 * cn_crc32c(cn_crc32c(0, a, na), b, nb) is the CRC of a then b. The
 * checksum every cn_save_safetensors writes (docs/training.md,
 * "Checkpoints"), and TensorBoard's record checksum. */
uint32_t cn_crc32c(uint32_t crc, const void *data, size_t n);

/* A loaded checkpoint: its tensors and metadata in file order. */
typedef struct cn_checkpoint cn_checkpoint;
cn_checkpoint *cn_load_safetensors(const char *path);
void cn_checkpoint_free(cn_checkpoint *c); /* releases its tensors (retain to keep one) */
int cn_checkpoint_count(const cn_checkpoint *c);
const char *cn_checkpoint_name(const cn_checkpoint *c, int i);
/* Borrowed: valid until cn_checkpoint_free (cn_retain to keep). */
cn_tensor *cn_checkpoint_tensor(const cn_checkpoint *c, int i);
/* By name; NULL and an error naming it if absent. */
cn_tensor *cn_checkpoint_find(const cn_checkpoint *c, const char *name);
int cn_checkpoint_metadata_count(const cn_checkpoint *c);
const char *cn_checkpoint_metadata_key(const cn_checkpoint *c, int i);
const char *cn_checkpoint_metadata_value(const cn_checkpoint *c, int i);
/* The value stored under key, or NULL. */
const char *cn_checkpoint_metadata(const cn_checkpoint *c, const char *key);

enum {
    CN_CKPT_ALLOW_MISSING = 1 << 0,   /* names absent from the file are left unchanged */
    CN_CKPT_ALLOW_UNEXPECTED = 1 << 1 /* tensors of the file not asked for are ignored */
};
/* Load a checkpoint into existing tensors (e.g. a model's parameters; views
 * are fine, gradients are not recorded). Every name, shape and dtype is
 * checked before anything is written; the error lists every problem: a
 * missing name, an unexpected name, a shape mismatch (both shapes), a dtype
 * mismatch, a truncated file, a bad header. names NULL: the tensors' names. */
int cn_load_safetensors_into(const char *path, const char *const *names,
                             cn_tensor *const *tensors, int n, unsigned flags);

/* ------------------------------------------------------------------------ */
/* Text: a byte-level BPE tokenizer, and token windows for language models  */
/* ------------------------------------------------------------------------ */
/* docs/text.md describes the algorithm, the pre-tokenisation and the file
 * format. Ids 0-255 are the bytes, 256 + i is merge i, and the special
 * tokens come last. Any bytes encode and decode back exactly (invalid UTF-8
 * included). A tokenizer is immutable once made: any number of threads may
 * encode and decode with one at the same time. */
typedef struct cn_tokenizer cn_tokenizer;
#define CN_EOT_TOKEN "<|endoftext|>"
typedef struct cn_bpe_train_opts {
    /* Special tokens (ids after the merges, in this order); never learned
     * from: training cuts the text where they occur. special_tokens NULL:
     * one, CN_EOT_TOKEN; non-NULL with n_special 0: none. */
    const char *const *special_tokens;
    int n_special;
    int64_t min_frequency; /* a pair must occur this often to be merged (0: 2) */
} cn_bpe_train_opts;
/* Learns vocab_size - 256 - (special tokens) merges from text (fewer if no
 * pair is left that occurs min_frequency times). Deterministic: ties go to
 * the smallest (left, right) pair of ids. opts may be NULL. */
cn_tokenizer *cn_bpe_train(const char *text, size_t len, int vocab_size,
                           const cn_bpe_train_opts *opts);
cn_tokenizer *cn_bpe_train_file(const char *path, int vocab_size, const cn_bpe_train_opts *opts);
void cn_tokenizer_free(cn_tokenizer *tok);
/* 256 + merges + special tokens. */
int cn_tokenizer_vocab_size(const cn_tokenizer *tok);
int cn_tokenizer_num_merges(const cn_tokenizer *tok);
int cn_tokenizer_num_special(const cn_tokenizer *tok);
/* Merge i joins *left and *right (either may be NULL); returns its id, 256 + i. */
int cn_tokenizer_merge(const cn_tokenizer *tok, int i, int32_t *left, int32_t *right);
/* The bytes of token id: *len of them, not NUL-terminated (borrowed). */
const char *cn_tokenizer_token(const cn_tokenizer *tok, int32_t id, size_t *len);
/* The id of a special token by its text (CN_EOT_TOKEN, ...), or < 0. */
int32_t cn_tokenizer_special_id(const cn_tokenizer *tok, const char *name);

enum {
    /* Encode the special tokens' texts found in the input as their ids
     * (without it they are plain text, like any other bytes). */
    CN_TOKENIZE_SPECIAL = 1 << 0
};
/* text[0, len) -> *n ids in *ids (malloc'd: free() it). */
int cn_tokenizer_encode(const cn_tokenizer *tok, const char *text, size_t len, unsigned flags,
                        int32_t **ids, size_t *n);
/* The same as an i64 [n] tensor (current scope). */
cn_tensor *cn_tokenizer_encode_tensor(const cn_tokenizer *tok, const char *text, size_t len,
                                      unsigned flags);
/* A whole file's bytes, encoded: i64 [n]. */
cn_tensor *cn_tokenizer_encode_file(const cn_tokenizer *tok, const char *path, unsigned flags);
/* ids -> *len bytes in *text (malloc'd, with a NUL after them: free() it).
 * An id outside the vocabulary is an error naming it. */
int cn_tokenizer_decode(const cn_tokenizer *tok, const int32_t *ids, size_t n, char **text,
                        size_t *len);
/* The same from an integer tensor of any shape (its elements in order). */
int cn_tokenizer_decode_tensor(const cn_tokenizer *tok, const cn_tensor *ids, char **text,
                               size_t *len);

/* The tokenizer as its text format (docs/text.md; printable ASCII), and
 * back. A file is written atomically, as cn_save_safetensors does. A
 * corrupt or truncated text is an error naming the line, never a crash. */
int cn_tokenizer_save(const cn_tokenizer *tok, const char *path);
cn_tokenizer *cn_tokenizer_load(const char *path);
char *cn_tokenizer_to_string(const cn_tokenizer *tok, size_t *len); /* malloc'd; len may be NULL */
cn_tokenizer *cn_tokenizer_from_string(const char *s, size_t len);
/* In a checkpoint, the tokenizer travels as the metadata string under this
 * key: pass cn_tokenizer_to_string's text as its value to
 * cn_save_safetensors, and read it back with cn_tokenizer_from_checkpoint. */
#define CN_TOKENIZER_METADATA_KEY "tokenizer"
cn_tokenizer *cn_tokenizer_from_checkpoint(const cn_checkpoint *c);

/* Token streams (a 1-D integer tensor, e.g. from cn_tokenizer_encode_file).
 * The last floor(n x val_fraction) tokens are the validation part; both
 * parts are views (current scope). */
int cn_text_split(cn_tensor *tokens, double val_fraction, cn_tensor **train, cn_tensor **val);
/* Non-overlapping windows: inputs[i] = tokens[offset + iT, +T), targets[i]
 * the same one token later; both [W, T] with W = (n - offset - 1) / T, views
 * of tokens (no copy; current scope). Feed them to cn_loader_new for
 * shuffled batches, or use cn_text_loader_new. */
int cn_text_windows(cn_tensor *tokens, int64_t T, int64_t offset, cn_tensor **inputs,
                    cn_tensor **targets);
/* A cn_loader over the windows of tokens (offset 0, tokens cast to i64 if
 * they are not): cn_loader_next gives batch[0] = inputs and batch[1] =
 * targets, i64 [B, T], every window once per epoch, in the order opts
 * (seed, shuffle) fix. */
cn_loader *cn_text_loader_new(cn_tensor *tokens, int64_t T, const cn_loader_opts *opts);

/* ------------------------------------------------------------------------ */
/* ONNX                                                                     */
/* ------------------------------------------------------------------------ */
/* Import of ONNX models (opsets 6 to 17, the default domain) into a static
 * graph: graph inputs become placeholders, initializers (raw, typed or in
 * external files next to the model) constant tensors, and each node the
 * Chutney ops it means. Whatever can be computed at load time is (Constant,
 * Shape/Gather/Concat/Reshape chains over known sizes, any node whose inputs
 * are all constants). An op, attribute or dtype the importer does not
 * support fails the load with "unsupported: OP (opset N): reason", never a
 * silent skip; docs/onnx.md lists what is supported. Files are untrusted:
 * a corrupt or truncated one gives an error, never a crash. A build without
 * protobuf-c fails every call with "built without ONNX support". */
typedef struct cn_onnx_model cn_onnx_model;

/* A concrete shape for a graph input whose declared shape has unknown
 * (symbolic) sizes: with every size known, shape computations fold. */
typedef struct cn_onnx_input_shape {
    const char *name; /* NULL: entry k of the list is input k (initializers excluded) */
    int ndim;
    int64_t shape[CN_MAX_DIMS];
} cn_onnx_input_shape;

/* A value for a graph input known at load time (e.g. an integer argument
 * of shape computations): the input becomes a constant (a copy is kept) and
 * folds like an initializer; it is then no longer an input of the model. */
typedef struct cn_onnx_input_value {
    const char *name; /* NULL: entry k of the list is input k (initializers excluded) */
    cn_tensor *value; /* the input's dtype, and its shape where declared; NULL: not bound */
} cn_onnx_input_value;

typedef struct cn_onnx_load_opts {
    const cn_onnx_input_shape *shapes; /* may be NULL */
    int nshapes;
    const cn_onnx_input_value *values; /* may be NULL */
    int nvalues;
    /* > 0: the size of every input size still unknown after shapes (e.g. 1
     * to inspect a model with a symbolic batch); 0 keeps them -1. */
    int64_t unknown_size;
} cn_onnx_load_opts;

/* opts may be NULL (declared shapes; unknown sizes stay -1). */
cn_onnx_model *cn_onnx_load(const char *path, const cn_onnx_load_opts *opts);
/* From a serialized ModelProto in memory; external data files are looked up
 * in base_dir (NULL: a model with external data is refused). */
cn_onnx_model *cn_onnx_load_buffer(const void *data, size_t size, const char *base_dir,
                                   const cn_onnx_load_opts *opts);
void cn_onnx_free(cn_onnx_model *m);

/* The graph inputs (initializers excluded) and outputs, in the model's order.
 * cn_onnx_input gives the placeholder, cn_onnx_output the graph value
 * (symbolic, or a constant if the output folded); both borrowed, with the
 * dtype and shape the model declares (-1: unknown until run). A model that
 * runs eagerly (cn_onnx_eager_reason) gives NULL, without an error, for an
 * output declared without a shape. */
int cn_onnx_num_inputs(const cn_onnx_model *m);
int cn_onnx_num_outputs(const cn_onnx_model *m);
const char *cn_onnx_input_name(const cn_onnx_model *m, int i);
const char *cn_onnx_output_name(const cn_onnx_model *m, int i);
cn_tensor *cn_onnx_input(const cn_onnx_model *m, int i);
cn_tensor *cn_onnx_output(const cn_onnx_model *m, int i);
/* The static graph the model was loaded into (borrowed), for further use. */
cn_graph *cn_onnx_graph(const cn_onnx_model *m);
/* The opset of the default domain, the number of parameter elements (all
 * initializers), and the nodes of the file with their op types, for
 * inspection (`chutney info`). */
int cn_onnx_opset(const cn_onnx_model *m);
int64_t cn_onnx_num_params(const cn_onnx_model *m);
/* The elements of the floating-point initializers only: the weights, as
 * cn_module_num_params and `chutney export` count them, without the integer
 * shapes and indices a graph also keeps as initializers. */
int64_t cn_onnx_num_weights(const cn_onnx_model *m);
int cn_onnx_num_nodes(const cn_onnx_model *m);
const char *cn_onnx_node_op(const cn_onnx_model *m, int i);

/* NULL when the model loaded as a static graph. Otherwise the model's
 * shapes depend on values computed at run time (NonZero, NonMaxSuppression,
 * TopK with a computed k, If on a computed condition: detection models),
 * and this says which node made it so: such a model runs eagerly, every
 * cn_onnx_run walking its nodes on the inputs' data (on the CPU), and its
 * graph holds only the inputs and the outputs' declared types. */
const char *cn_onnx_eager_reason(const cn_onnx_model *m);

/* Run the model: inputs[i] feeds input i (dtype and known sizes must match),
 * outputs[0..cn_onnx_num_outputs) receive the results (owned by the current
 * scope). The program is compiled on the first call and reused. A model
 * (its program and planned arena) is one thread's at a time: to serve
 * requests from several threads at once, load one model per thread (from
 * one buffer with cn_onnx_load_buffer); they share the kernel pool. */
int cn_onnx_run(cn_onnx_model *m, cn_tensor *const *inputs, cn_tensor **outputs);

/* Training an imported model (docs/onnx.md, "Training"). The model as a
 * module (cn_module_forward, cn_module_train, optimisers,
 * cn_compile_train_step) whose forward walks the file's nodes on the tensor
 * it is given: eagerly on data, or building a static graph on a placeholder.
 * Its floating-point initializers are the module's parameters (one tensor
 * per name, however many nodes read it), BatchNormalization's running mean
 * and variance its buffers; cn_module_parameters and cn_module_state list
 * them under the initializers' names (PyTorch's "fc.weight" is the
 * parameter "weight" of a child "fc"). In training mode BatchNormalization
 * normalises with the batch's statistics and updates the running ones as
 * PyTorch does (momentum from the node, the unbiased variance), and Dropout
 * draws masks, whatever the file's training_mode; in evaluation mode both
 * are the inference ops. The model must have one graph input (the batch;
 * its declared sizes must match, so export with a symbolic batch size), and
 * forward returns the first graph output. Each node is tried on a
 * placeholder of the declared input at load: a node that cannot be trained
 * (an op without a gradient rule where gradients flow, or one computing
 * from weights alone, which a traced program would keep at their first
 * values) fails the load naming the node. */
typedef struct cn_module cn_module; /* (the Modules section) */
cn_module *cn_onnx_load_trainable(const char *path);
/* The file m (from cn_onnx_load_trainable) was loaded from, with every
 * floating-point initializer holding the module's current value, and
 * BatchNormalization and Dropout nodes in inference form (no training_mode,
 * no running-statistics outputs), written atomically: it runs in
 * `chutney run`, ONNX Runtime and other ONNX tools as the original would. */
int cn_onnx_save_trained(cn_module *m, const char *path);

/* A serialized TensorProto file (the ONNX test data's input_0.pb, ...). */
cn_tensor *cn_onnx_load_tensor(const char *path);

/* Export: the part of static graph g that outputs depend on, written as an
 * ONNX model (opset 17, IR version 8). The graph is first simplified as
 * cn_compile does at -O1 (folding, CSE; no fusion); placeholders become
 * graph inputs (a size of -1 a symbolic dim_param "<name>_dim<k>"), the
 * tensors with data it reads (parameters) initializers, and each step one
 * or more ONNX nodes. An op with no ONNX form fails the export with
 * "export: OP is not supported (reason)"; nothing is written then.
 * docs/onnx.md lists the ops. */
typedef struct cn_onnx_export_opts {
    /* noutputs names for the graph outputs (NULL: "output", or "output_<i>"
     * when there are several). */
    const char *const *output_names;
    /* Initializer names: a constant that is params[k] is called names[k]
     * (e.g. a module's state, cn_module_state); others take their tensor's
     * name (cn_get_name) or "const". Names are made unique. */
    cn_tensor *const *params;
    const char *const *param_names;
    int nparams;
    const char *graph_name; /* NULL: "chutney" */
} cn_onnx_export_opts;

/* Written atomically (a temporary file renamed over path). opts may be NULL. */
int cn_onnx_export(cn_graph *g, cn_tensor *const *outputs, int noutputs, const char *path,
                   const cn_onnx_export_opts *opts);
/* The serialized ModelProto in *data (malloc'd, the caller frees), *size bytes. */
int cn_onnx_export_buffer(cn_graph *g, cn_tensor *const *outputs, int noutputs, void **data,
                          size_t *size, const cn_onnx_export_opts *opts);

/* ------------------------------------------------------------------------ */
/* Optimisers                                                               */
/* ------------------------------------------------------------------------ */
/* torch.optim's SGD, Adam, AdamW, RMSprop and Adagrad with PyTorch 1.13's
 * update formulas (bias correction, per-parameter step counts, momentum
 * buffers that start as the first gradient), for f32 and f64 parameters.
 *
 *     cn_optimizer *opt = cn_adam(params, n, &(cn_adam_opts){.lr = 3e-4});
 *     for (...) {
 *         cn_optimizer_zero_grad(opt);
 *         cn_scope_begin();
 *         cn_backward(loss_of(model, batch), NULL);
 *         cn_scope_end();
 *         cn_optimizer_step(opt);
 *     }
 *     cn_optimizer_free(opt);
 *
 * Layout. When it is created, an optimiser moves the parameters of one dtype
 * into one contiguous buffer: each parameter tensor is re-pointed in place at
 * its slice (the cn_tensor pointers a model holds stay valid; pointers to
 * the old data do not), and its .grad becomes a view of the same slice of a
 * flat gradient buffer, zero-filled (or holding the gradient it had), into
 * which backward accumulates directly. A step is then one pass over
 * contiguous memory, split over the thread pool in fixed chunks: the result
 * is the same bits for any thread count. Parameters that already tile one
 * storage, contiguous and in list order (an earlier optimiser flattened
 * them, or there is one contiguous parameter), are used where they are as
 * that buffer. A parameter that another tensor shares storage with (a view
 * of it, or it a view of something), one on a borrowed buffer
 * (cn_from_buffer), or one of another dtype stays where it is and is
 * updated on its own by the same rules (cn_optimizer_is_flat tells).
 * Moving a parameter counts as a write: create the optimiser before
 * recording a graph through the parameters.
 *
 * Gradients. A parameter whose .grad is NULL is skipped (no update, its step
 * count unchanged), as torch does; a .grad the user replaced
 * (cn_set_grad) is read. cn_optimizer_zero_grad zeroes the flat buffer and
 * re-attaches the views; a parameter that does not require a gradient loses
 * its .grad there, so it is not updated.
 *
 * Options. A zero field takes torch's default where noted (so a literal 0
 * cannot be asked for there: use a tiny value, e.g. eps = 1e-300). */
typedef struct cn_optimizer cn_optimizer;

typedef struct cn_sgd_opts {
    double lr;           /* required (torch has no default either) */
    double momentum;     /* 0: plain SGD */
    double dampening;
    bool nesterov;       /* needs momentum > 0 and dampening 0 */
    double weight_decay; /* L2: weight_decay * p is added to the gradient */
    bool maximize;       /* ascend */
} cn_sgd_opts;

typedef struct cn_adam_opts {
    double lr;           /* 0: 1e-3 */
    double beta1, beta2; /* both 0: 0.9, 0.999 (set both to choose) */
    double eps;          /* 0: 1e-8 */
    /* Adam: added to the gradient (L2). AdamW: decoupled, p *= 1 - lr *
     * weight_decay each step; 0 there means torch's 1e-2 (AdamW without
     * decay is Adam). */
    double weight_decay;
    bool amsgrad;
    bool maximize;
} cn_adam_opts;

typedef struct cn_rmsprop_opts {
    double lr;    /* 0: 1e-2 */
    double alpha; /* smoothing constant; 0: 0.99 */
    double eps;   /* 0: 1e-8 */
    double weight_decay;
    double momentum;
    bool centered; /* normalise by the variance estimate */
    bool maximize;
} cn_rmsprop_opts;

typedef struct cn_adagrad_opts {
    double lr; /* 0: 1e-2 */
    double lr_decay;
    double weight_decay;
    double initial_accumulator_value;
    double eps; /* 0: 1e-10 */
    bool maximize;
} cn_adagrad_opts;

/* Optimisers over params[0..n) (leaves, f32 or f64, each listed once; they
 * are retained until cn_optimizer_free). opts NULL: every default (SGD has
 * none for lr, so it needs opts). NULL and an error on a bad option or
 * parameter. */
cn_optimizer *cn_sgd(cn_tensor *const *params, int n, const cn_sgd_opts *opts);
cn_optimizer *cn_adam(cn_tensor *const *params, int n, const cn_adam_opts *opts);
cn_optimizer *cn_adamw(cn_tensor *const *params, int n, const cn_adam_opts *opts);
cn_optimizer *cn_rmsprop(cn_tensor *const *params, int n, const cn_rmsprop_opts *opts);
cn_optimizer *cn_adagrad(cn_tensor *const *params, int n, const cn_adagrad_opts *opts);
/* Leaves the parameters where they are, with their gradients. */
void cn_optimizer_free(cn_optimizer *opt);

/* One update of every parameter that has a gradient (never recorded). */
int cn_optimizer_step(cn_optimizer *opt);
/* Gradients to zero, keeping the buffers (see above). */
int cn_optimizer_zero_grad(cn_optimizer *opt);
int cn_optimizer_set_lr(cn_optimizer *opt, double lr); /* lr >= 0 */
double cn_optimizer_get_lr(const cn_optimizer *opt);
/* Per-parameter weight decay, as a torch param group of its own with that
 * weight_decay (e.g. GPT's decay of matrices only: 0 for biases and norm
 * weights): parameter i (in the order given at creation) uses weight_decay
 * instead of the optimiser's; a negative value returns to the optimiser's.
 * A setting, not state: cn_optimizer_state does not save it, so set it
 * again after cn_optimizer_load_state (`chutney train` does). */
int cn_optimizer_set_param_weight_decay(cn_optimizer *opt, int i, double weight_decay);
/* Gradient clipping inside every cn_optimizer_step, eager or compiled
 * (cn_compile_train_step runs the step after the gradients, so this is how
 * a compiled step clips): the gradients of all parameters are scaled as
 * cn_clip_grad_norm(params, n, max_norm, 2, ...) does, after data-parallel
 * averaging and before the update. max_norm 0 turns it off.
 * cn_optimizer_last_grad_norm gives the norm before clipping of the last
 * step (NaN before one). */
int cn_optimizer_set_clip_grad_norm(cn_optimizer *opt, double max_norm);
double cn_optimizer_last_grad_norm(const cn_optimizer *opt);
int cn_optimizer_num_params(const cn_optimizer *opt);
/* Do all parameters lie in one flat buffer? Then these are 1-D views of the
 * parameters' and gradients' buffers, in parameter order (owned by the
 * current scope; writing to them writes the parameters / gradients). */
bool cn_optimizer_is_flat(const cn_optimizer *opt);
cn_tensor *cn_optimizer_flat_params(cn_optimizer *opt);
cn_tensor *cn_optimizer_flat_grads(cn_optimizer *opt);

/* The state, as named tensors for a checkpoint (cn_save_safetensors):
 * "algorithm" (u8 characters: "adam", ...), each hyper-parameter as an f64
 * scalar ("lr", "beta1", ..., flags as 0/1), "initial_lr" (NaN until a
 * schedule sets it), "step" (i64 [n]: updates per parameter), and each
 * buffer of parameter i with its shape and dtype ("exp_avg.0",
 * "exp_avg_sq.0", "momentum_buffer.3", ...). As cn_module_state: *tensors
 * and *names (either may be NULL) are malloc'd arrays to free() (one block
 * each); the tensors are borrowed from the optimiser, valid until its next
 * cn_optimizer_state or cn_optimizer_free, and the buffers among them are
 * views of the live state (a later step changes them: cn_clone to keep a
 * snapshot). Returns the count, or < 0. */
int cn_optimizer_state(cn_optimizer *opt, cn_tensor ***tensors, const char ***names);
/* Restore a state from an optimiser of the same algorithm and parameter
 * shapes: hyper-parameters (lr included), step counts and buffers, so
 * training continues bit for bit as if never interrupted. Every entry is
 * checked before anything is written; the error lists each missing,
 * unexpected or mismatched (dtype, shape) entry. */
int cn_optimizer_load_state(cn_optimizer *opt, const char *const *names,
                            cn_tensor *const *tensors, int n);

/* Dynamic loss scaling for f16 training (torch.cuda.amp.GradScaler):
 *
 *     cn_grad_scaler *gs = cn_grad_scaler_new(opt, NULL);
 *     ... cn_backward(cn_grad_scaler_scale(gs, loss), NULL);
 *     cn_optimizer_step(opt); // unscales, then updates or skips
 *
 * The scaler hooks into opt's steps (eager or compiled by
 * cn_compile_train_step, whose loss output is then the scaled loss): each
 * step first divides every gradient by the scale, before clipping; if any
 * is inf or NaN the update is skipped (no parameter, buffer or step count
 * changes) and the scale is multiplied by backoff_factor; after
 * growth_interval finite steps in a row it is multiplied by growth_factor.
 * The scale is a rank-0 tensor that cn_grad_scaler_scale multiplies by,
 * changed in place: a compiled step reads its value at every run.
 * Free the scaler before the optimiser. With data parallelism, make the
 * cn_ddp first (cn_ddp_new refuses an optimiser that has a scaler: the
 * gradients are averaged, then unscaled) and free the scaler first. */
typedef struct cn_grad_scaler cn_grad_scaler;
typedef struct cn_grad_scaler_opts {
    double init_scale;     /* 0: 65536 */
    double growth_factor;  /* 0: 2 */
    double backoff_factor; /* 0: 0.5 */
    int growth_interval;   /* 0: 2000 */
} cn_grad_scaler_opts;
cn_grad_scaler *cn_grad_scaler_new(cn_optimizer *opt, const cn_grad_scaler_opts *opts);
void cn_grad_scaler_free(cn_grad_scaler *s);
/* loss * scale (owned by the current scope). */
cn_tensor *cn_grad_scaler_scale(cn_grad_scaler *s, cn_tensor *loss);
double cn_grad_scaler_get_scale(const cn_grad_scaler *s);
int64_t cn_grad_scaler_skipped(const cn_grad_scaler *s);    /* updates skipped so far */
bool cn_grad_scaler_last_skipped(const cn_grad_scaler *s); /* by the last step */
/* What a checkpoint keeps of a scaler (torch's state_dict: scale and
 * _growth_tracker): the scale, the finite steps in a row since it last
 * changed, and the updates skipped so far. set_state puts them back (the
 * scale > 0 and finite, the counts >= 0), so a resumed run scales, skips
 * and grows exactly as the interrupted one would have. */
typedef struct cn_grad_scaler_state {
    double scale;
    int64_t growth_tracker;
    int64_t skipped;
} cn_grad_scaler_state;
cn_grad_scaler_state cn_grad_scaler_get_state(const cn_grad_scaler *s);
int cn_grad_scaler_set_state(cn_grad_scaler *s, const cn_grad_scaler_state *st);

/* ------------------------------------------------------------------------ */
/* Learning-rate schedules                                                  */
/* ------------------------------------------------------------------------ */
/* torch.optim.lr_scheduler: each call to cn_lr_scheduler_step (once per
 * epoch or per iteration, as you choose, after cn_optimizer_step) sets the
 * optimiser's lr with the same formulas as torch (its chainable forms, so
 * the values are the same doubles). Creating a schedule sets the
 * optimiser's initial_lr to its lr if no schedule did before, takes it as
 * the base lr, and applies step 0 (cn_linear_lr scales the lr by
 * start_factor at once), as torch does. A schedule points at its
 * optimiser: free the schedule first. */
typedef struct cn_lr_scheduler cn_lr_scheduler;

/* lr * gamma every step_size steps. */
cn_lr_scheduler *cn_step_lr(cn_optimizer *opt, int64_t step_size, double gamma);
/* lr * gamma every step. */
cn_lr_scheduler *cn_exponential_lr(cn_optimizer *opt, double gamma);
/* eta_min + (base - eta_min) (1 + cos(pi t / t_max)) / 2. */
cn_lr_scheduler *cn_cosine_annealing_lr(cn_optimizer *opt, int64_t t_max, double eta_min);
/* base * factor, the factor going linearly from start_factor (in (0, 1]) to
 * end_factor (in [0, 1]) over total_iters steps, then constant: a warm-up. */
cn_lr_scheduler *cn_linear_lr(cn_optimizer *opt, double start_factor, double end_factor,
                              int64_t total_iters);
/* torch's SequentialLR: schedulers[0] until step milestones[0], then
 * schedulers[1] (restarted from its step 0) and so on; milestones has n - 1
 * increasing entries. The schedules must be of opt; on success they belong
 * to the sequence (freed with it). */
cn_lr_scheduler *cn_sequential_lr(cn_optimizer *opt, cn_lr_scheduler *const *schedulers, int n,
                                  const int64_t *milestones);
/* Linear warm-up from start_factor * lr to lr over warmup_steps steps, then
 * `then` (which belongs to the result on success): a cn_sequential_lr of
 * cn_linear_lr(opt, start_factor, 1, warmup_steps) and then. */
cn_lr_scheduler *cn_warmup_lr(cn_optimizer *opt, int64_t warmup_steps, double start_factor,
                              cn_lr_scheduler *then);
/* A member of a sequence is freed with the sequence (freeing it alone does
 * nothing, and stepping it alone fails). */
void cn_lr_scheduler_free(cn_lr_scheduler *s);

int cn_lr_scheduler_step(cn_lr_scheduler *s);
/* The lr the last step set, and how many steps were taken (0 right after
 * creation, as torch's last_epoch). */
double cn_lr_scheduler_get_last_lr(const cn_lr_scheduler *s);
int64_t cn_lr_scheduler_last_epoch(const cn_lr_scheduler *s);
/* State, as cn_optimizer_state / cn_optimizer_load_state ("kind",
 * "last_epoch", "base_lr", the schedule's parameters, ...; a sequence adds
 * its schedules' entries as "0.last_epoch", "1.base_lr", ...). The
 * optimiser's lr is in the optimiser's state: restore both. */
int cn_lr_scheduler_state(cn_lr_scheduler *s, cn_tensor ***tensors, const char ***names);
int cn_lr_scheduler_load_state(cn_lr_scheduler *s, const char *const *names,
                               cn_tensor *const *tensors, int n);

/* ------------------------------------------------------------------------ */
/* Neural-network modules                                                   */
/* ------------------------------------------------------------------------ */
/* A module is a function with state: named parameters (trainable leaves
 * with requires_grad set), named buffers (state that is not trained, e.g.
 * BatchNorm's running statistics) and named child modules, as in
 * torch.nn.Module. A module owns its parameters, buffers and children;
 * cn_module_free releases them all. Forward passes are built from public
 * ops, so the same module computes eagerly on data and builds a static graph
 * when given a placeholder (a batch size of -1 is fine).
 *
 * Parameters are always reached through the module's stored tensor
 * pointers, never through cached data pointers: an optimiser may move a
 * parameter's data (re-point its storage and offset in place) and the
 * module follows.
 *
 * Writing a module: embed cn_module as the first member of a struct, give it
 * a vtable, allocate it with cn_module_new and register what it owns:
 *
 *     typedef struct { cn_module base; } mlp;
 *     static cn_tensor *mlp_forward(cn_module *m, cn_tensor *x) {
 *         x = cn_relu(cn_module_forward(cn_module_child(m, "fc1"), x));
 *         return cn_module_forward(cn_module_child(m, "fc2"), x);
 *     }
 *     static const cn_module_vtable mlp_vt = {"MLP", mlp_forward, NULL};
 *     cn_module *m = cn_module_new(&mlp_vt, sizeof(mlp));
 *     cn_module_add_child(m, "fc1", cn_nn_linear(784, 100, true));
 *     cn_module_add_child(m, "fc2", cn_nn_linear(100, 10, true));
 */
typedef struct cn_module cn_module;

typedef struct cn_module_vtable {
    const char *type; /* "Linear", "MLP", ... */
    /* The output, owned by the current scope (or NULL after cn_fail). */
    cn_tensor *(*forward)(cn_module *m, cn_tensor *x);
    /* Releases what the module itself allocated beyond what it registered
     * (may be NULL). Parameters, buffers, children and the struct are freed
     * by cn_module_free. */
    void (*free_impl)(cn_module *m);
} cn_module_vtable;

typedef struct cn_named_tensor {
    char *name;
    cn_tensor *t;
} cn_named_tensor;

typedef struct cn_named_module {
    char *name;
    cn_module *m;
} cn_named_module;

struct cn_module {
    const cn_module_vtable *vt;
    bool training; /* true after cn_module_new; see cn_module_train */
    /* In registration order (read them; add with cn_module_add_*). */
    int nparams, nbuffers, nchildren;
    cn_named_tensor *params;
    cn_named_tensor *buffers;
    cn_named_module *children;
    int cap_params, cap_buffers, cap_children;
};

/* A zeroed module struct of `size` bytes (>= sizeof(cn_module)), in training
 * mode, freed by cn_module_free. */
cn_module *cn_module_new(const cn_module_vtable *vt, size_t size);
/* Register a parameter (a float leaf; requires_grad is set), a buffer, or a
 * child. Names are unique within a module and contain no '.'. Tensors are
 * retained (the caller's reference stays the caller's); a child is owned
 * from then on (freed even if the call fails, unless it contains m). */
int cn_module_add_param(cn_module *m, const char *name, cn_tensor *t);
int cn_module_add_buffer(cn_module *m, const char *name, cn_tensor *t);
int cn_module_add_child(cn_module *m, const char *name, cn_module *child);
/* This module's own parameter / child by name (borrowed), or NULL. */
cn_tensor *cn_module_param(const cn_module *m, const char *name);
cn_module *cn_module_child(const cn_module *m, const char *name);
/* Replace m's own parameter or buffer `name` by t (retained; the old one is
 * released), as PyTorch's `layer.weight = other`: how weights are tied
 * across layers (a language model's embedding and output projection). t
 * must have the old one's dtype, shape and device; a parameter's must be a
 * leaf with data (its requires_grad is left as it is). */
int cn_module_set_tensor(cn_module *m, const char *name, cn_tensor *t);
/* A parameter or buffer anywhere in the tree by its dotted state name
 * ("layers.1.weight"), borrowed; NULL and an error if absent. */
cn_tensor *cn_module_find(const cn_module *m, const char *name);
const char *cn_module_type(const cn_module *m);

/* m's forward on x; intermediate values the result does not need are freed
 * before it returns. NULL x gives NULL. */
cn_tensor *cn_module_forward(cn_module *m, cn_tensor *x);
/* Training (true) or evaluation mode, for m and every descendant (Dropout
 * and BatchNorm behave differently). */
void cn_module_train(cn_module *m, bool training);
/* Every parameter of the tree, as torch's named_parameters(): the module's
 * own in registration order, then each child's (depth first), with dotted
 * names ("0.weight", "layers.1.bias"); a tensor registered twice (tied
 * weights) is listed once. *params and *names (either may be NULL) are
 * malloc'd arrays to free() (one block each; names point into it); the
 * tensors are borrowed from the module. Returns the count, or < 0. */
int cn_module_parameters(const cn_module *m, cn_tensor ***params, const char ***names);
/* Parameters and buffers, as torch's state_dict(): for each module (depth
 * first) its parameters then its buffers; what a checkpoint holds (see
 * cn_save_safetensors, cn_load_safetensors_into). Same ownership as above. */
int cn_module_state(const cn_module *m, cn_tensor ***tensors, const char ***names);
/* Move every parameter and buffer (and gradient) of the tree to device d,
 * in place, as torch's module.to(device): the tensor structs stay, their
 * data moves. Make optimisers after moving (one made before still points
 * at the old buffers). */
int cn_module_to(cn_module *m, cn_device d);
/* The number of parameter elements (tied parameters counted once). */
int64_t cn_module_num_params(const cn_module *m);
/* Clear every parameter's gradient. */
void cn_module_zero_grad(cn_module *m);
/* int8 inference (docs/training.md, "int8"): every Linear, and every
 * Conv2d of one group, in m's tree (m included) gets symmetric int8
 * weights with one f32 scale per output channel (buffers "weight" i8 and
 * "weight_scale"; the bias stays f32, as a buffer), and from then on
 * quantises its input at run time (symmetric int8, one scale per row of
 * the product), multiplies with int32 sums and rescales to f32. CPU only;
 * the layers have no gradient. Returns how many layers were quantised, or
 * < 0 after an error; a Linear or Conv2d whose weights are not f32 on the
 * CPU refuses the whole tree, which is then left as it was. */
int cn_module_quantize_int8(cn_module *m);
/* Free m, its children, and its references to its parameters and buffers. */
void cn_module_free(cn_module *m);

/* Layers. Parameters are f32 and initialised as PyTorch 1.13 does, from the
 * library's generator (cn_manual_seed). Constructors return NULL (and an
 * error) for bad sizes. Inputs are batched as in PyTorch ([N, ...]); shapes
 * below omit N where PyTorch accepts unbatched input too. */

/* y = x W^T + b. x: [..., in]; weight [out, in], bias [out]. */
cn_module *cn_nn_linear(int64_t in_features, int64_t out_features, bool bias);
/* Convolutions over cn_conv1d / cn_conv2d / cn_conv_transpose2d, with their
 * options (opts may be NULL: stride 1, no padding, dilation 1, one group).
 * weight [out, in / groups, kH, kW] ([out, in / groups, k] for 1d;
 * [in, out / groups, kH, kW] transposed), bias [out] if bias. */
cn_module *cn_nn_conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                        const cn_conv_opts *opts, bool bias);
cn_module *cn_nn_conv2d(int64_t in_channels, int64_t out_channels, int64_t kh, int64_t kw,
                        const cn_conv_opts *opts, bool bias);
cn_module *cn_nn_conv_transpose2d(int64_t in_channels, int64_t out_channels, int64_t kh,
                                  int64_t kw, const cn_conv_opts *opts, bool bias);
/* Pooling over cn_max_pool2d / cn_avg_pool2d (opts gives the kernel) and
 * cn_adaptive_avg_pool2d. */
cn_module *cn_nn_max_pool2d(const cn_pool_opts *opts);
cn_module *cn_nn_avg_pool2d(const cn_pool_opts *opts);
cn_module *cn_nn_adaptive_avg_pool2d(int64_t out_h, int64_t out_w);
/* Flatten axes start..end (PyTorch's nn.Flatten: 1, -1). */
cn_module *cn_nn_flatten(int start_axis, int end_axis);
cn_module *cn_nn_identity(void);
/* Activations (no parameters). */
cn_module *cn_nn_relu(void);
cn_module *cn_nn_tanh(void);
cn_module *cn_nn_sigmoid(void);
cn_module *cn_nn_gelu(bool approximate);
cn_module *cn_nn_silu(void);
cn_module *cn_nn_leaky_relu(double negative_slope);
cn_module *cn_nn_elu(double alpha);
cn_module *cn_nn_softplus(double beta, double threshold);
cn_module *cn_nn_softmax(int axis);
cn_module *cn_nn_log_softmax(int axis);
/* Modules applied in order; children named "0", "1", ... . Takes ownership
 * of the n modules in every case (a NULL among them frees the others and
 * fails, so constructors can be nested). */
cn_module *cn_nn_sequential(cn_module *const *modules, int n);
int cn_nn_sequential_append(cn_module *seq, cn_module *m); /* owns m */

/* Dropout: in training mode each element is zeroed with probability p and
 * the rest scaled by 1 / (1 - p) (drawn from the library's generator); in
 * evaluation mode, and for p = 0, the identity. */
cn_tensor *cn_dropout(cn_tensor *x, double p, bool training);
cn_module *cn_nn_dropout(double p);

/* A lookup table: weight [num, dim] ~ N(0, 1); x: integer indices of any
 * shape -> [..., dim]. padding_idx (CN_NO_PADDING for none; negative counts
 * from the end) names a row that starts at zero and gets no gradient. */
#define CN_NO_PADDING INT64_MIN
cn_module *cn_nn_embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx);

/* Batch normalisation over [N, C] or [N, C, L] (1d) and [N, C, H, W] (2d):
 * in training mode, batch statistics (biased variance to normalise), and the
 * running mean and variance (unbiased) updated as
 * running = (1 - momentum) * running + momentum * batch; in evaluation mode
 * the running statistics. Parameters weight (ones) and bias (zeros); buffers
 * running_mean, running_var, num_batches_tracked (i64). The running update
 * happens in eager mode only: a static graph of a module in training mode
 * normalises with batch statistics but does not update its buffers. */
typedef struct cn_batch_norm_opts {
    double eps;            /* 0: 1e-5 */
    double momentum;       /* 0: 0.1; negative: a cumulative average (momentum=None) */
    bool no_affine;        /* no weight and bias */
    bool no_running_stats; /* always batch statistics (track_running_stats=False) */
} cn_batch_norm_opts;
cn_module *cn_nn_batch_norm1d(int64_t num_features, const cn_batch_norm_opts *opts);
cn_module *cn_nn_batch_norm2d(int64_t num_features, const cn_batch_norm_opts *opts);
/* Normalise over the last ndim axes (normalized_shape), then, if affine,
 * multiply by weight (ones) and add bias (zeros), both of that shape. */
cn_module *cn_nn_layer_norm(int ndim, const int64_t *normalized_shape, double eps, bool affine);

/* Recurrent layers, unrolled through time with ops, with PyTorch's gate
 * order, parameter names and shapes: weight_ih_l{k}[_reverse] [G*H, in],
 * weight_hh_l{k} [G*H, H], bias_ih_l{k}, bias_hh_l{k} [G*H], G = 1 (RNN),
 * 4 (LSTM: i, f, g, o) or 3 (GRU: r, z, n), all ~ U(-1/sqrt(H), 1/sqrt(H)).
 * Input [T, N, in] ([N, T, in] with batch_first; [T, in] unbatched); output
 * [T, N, D*H] (D = 2 if bidirectional), h_n and c_n [L*D, N, H]. */
typedef struct cn_rnn_opts {
    int num_layers;     /* 0: 1 */
    bool relu;          /* RNN only: relu instead of tanh */
    bool no_bias;
    bool batch_first;
    bool bidirectional;
    double dropout;     /* on each layer's output but the last, in training mode */
} cn_rnn_opts;
cn_module *cn_nn_rnn(int64_t input_size, int64_t hidden_size, const cn_rnn_opts *opts);
cn_module *cn_nn_lstm(int64_t input_size, int64_t hidden_size, const cn_rnn_opts *opts);
cn_module *cn_nn_gru(int64_t input_size, int64_t hidden_size, const cn_rnn_opts *opts);
/* The full recurrent forward: h0 (and c0 for LSTM) may be NULL (zeros);
 * *h_n and *c_n may be NULL pointers when not wanted (c_n is LSTM only).
 * cn_module_forward gives the output alone. */
int cn_rnn_forward(cn_module *m, cn_tensor *x, cn_tensor *h0, cn_tensor *c0, cn_tensor **output,
                   cn_tensor **h_n, cn_tensor **c_n);
/* The same over a batch of sequences of their own lengths (n_lengths of them:
 * one per sequence of the batch, each 1 to T; NULL: all T), padded at their ends to
 * T: a step past a sequence's end keeps its state and outputs zeros, so h_n
 * (c_n) holds each sequence's state after its last step, and the reverse
 * direction starts there (PyTorch's packed sequences, ONNX's sequence_lens). */
int cn_rnn_forward_lengths(cn_module *m, cn_tensor *x, const int64_t *lengths, int64_t n_lengths,
                           cn_tensor *h0, cn_tensor *c0, cn_tensor **output, cn_tensor **h_n,
                           cn_tensor **c_n);

/* Multi-head attention, torch.nn.MultiheadAttention (PyTorch 2.x): the
 * same parameters, names and shapes — in_proj_weight [3E, E] (q, k, v
 * projections stacked; xavier_uniform), in_proj_bias [3E] (zeros),
 * out_proj.weight [E, E] (Linear's default), out_proj.bias [E] (zeros); with
 * kdim or vdim other than E, q_proj_weight [E, E], k_proj_weight [E, kdim]
 * and v_proj_weight [E, vdim] replace in_proj_weight, as in PyTorch. Inputs
 * are [L, N, E] (query), [S, N, kdim] (key), [S, N, vdim] (value);
 * [N, L, E] ... with batch_first; [L, E] ... unbatched. E must divide into
 * num_heads heads of E / num_heads. add_bias_kv and add_zero_attn are not
 * offered. */
typedef struct cn_mha_opts {
    double dropout;      /* on the attention weights, in training mode */
    bool no_bias;        /* bias=False: no in_proj_bias and out_proj.bias */
    bool batch_first;
    int64_t kdim, vdim;  /* 0: embed_dim */
} cn_mha_opts;
cn_module *cn_nn_multihead_attention(int64_t embed_dim, int64_t num_heads, const cn_mha_opts *opts);
/* The forward of MultiheadAttention(query, key, value, key_padding_mask,
 * need_weights, attn_mask, average_attn_weights, is_causal). Masks follow
 * PyTorch's convention, which is the opposite of
 * cn_scaled_dot_product_attention's for bool masks: true means "may NOT
 * attend". key_padding_mask [N, S] ([S] unbatched): bool (true: that key is
 * padding) or float (added to the scores). attn_mask [L, S] or
 * [N * num_heads, L, S]: bool (true: not allowed) or float (added).
 * is_causal: query i sees keys j <= i; PyTorch takes it as a hint that
 * attn_mask is the causal mask and needs attn_mask with it, here it is the
 * mask itself (attn_mask may then be NULL; given too, both apply, which is
 * PyTorch's result when the hint is true). A query whose every key is
 * masked gives zeros on the fused path (PyTorch: NaN) and NaN on the
 * weights path, as PyTorch. */
typedef struct cn_mha_forward_opts {
    cn_tensor *key_padding_mask;
    cn_tensor *attn_mask;
    bool is_causal;
    /* Also give the attention weights (PyTorch's default is true; here
     * false is, since the weights cost the L x S matrix): without them the
     * attention is one fused cn_scaled_dot_product_attention (dropout
     * included); with them, softmax(q k^T / sqrt(d) + mask) is formed,
     * dropped out and multiplied by v, and *weights is its mean over the
     * heads [N, L, S] ([L, S] unbatched), or with per_head_weights
     * (average_attn_weights=False) [N, num_heads, L, S]. */
    bool need_weights;
    bool per_head_weights;
} cn_mha_forward_opts;
/* opts may be NULL (no masks, no weights); weights may be NULL, and is set
 * to NULL without need_weights. *output is [L, N, E] (batch_first:
 * [N, L, E]). cn_module_forward(m, x) is self-attention of x without
 * masks. */
int cn_mha_forward(cn_module *m, cn_tensor *query, cn_tensor *key, cn_tensor *value,
                   const cn_mha_forward_opts *opts, cn_tensor **output, cn_tensor **weights);

/* RMSNorm, torch.nn.RMSNorm (PyTorch 2.4): y = x / sqrt(mean(x^2) + eps)
 * over the last ndim axes, times weight (ones, normalized_shape) if
 * affine. eps 0 means PyTorch's eps=None: the machine epsilon of x's
 * dtype (f32: 2^-23; f64: 2^-52); a positive eps is used as given. */
cn_module *cn_nn_rms_norm(int ndim, const int64_t *normalized_shape, double eps, bool affine);

/* A pre-LayerNorm Transformer block (GPT-2's): on x [N, T, E],
 *     x = x + dropout(attn(ln_1(x)))      attn: self-attention, causal if asked
 *     x = x + mlp(ln_2(x))                mlp: c_fc (E -> hidden), GELU (erf
 *                                         form), c_proj (hidden -> E), dropout
 * Children: ln_1, attn (cn_nn_multihead_attention, batch_first, with the
 * dropout on its weights), ln_2, mlp (with c_fc, c_proj): names such as
 * "attn.in_proj_weight", "mlp.c_fc.weight". Each layer starts with
 * PyTorch's default initialisation (cn_nn_gpt re-initialises GPT-2's way). */
typedef struct cn_transformer_block_opts {
    int64_t mlp_hidden; /* 0: 4 E */
    double dropout;     /* attention weights and both residual branches */
    bool causal;        /* query t attends positions <= t */
    double ln_eps;      /* 0: 1e-5 */
    bool rope;          /* rotary position embeddings (cn_rope) on each head's q and k */
    double rope_base;   /* 0: 10000 */
} cn_transformer_block_opts;
cn_module *cn_nn_transformer_block(int64_t embed_dim, int64_t num_heads,
                                   const cn_transformer_block_opts *opts);

/* A GPT (GPT-2's architecture, nanoGPT's layout): token embedding wte
 * [vocab_size, n_embd] plus learned position embedding wpe
 * [context_length, n_embd], dropout, n_layer causal blocks
 * (cn_nn_transformer_block: children h.0, h.1, ...), a final LayerNorm ln_f,
 * and the LM head. The head is tied to the token embedding: logits = x
 * wte.weight^T, so there is no lm_head parameter of its own (the state has
 * wte.weight once; its gradient sums both uses), as GPT-2 ties them.
 * Initialisation as GPT-2/nanoGPT: every linear weight, in_proj_weight and
 * both embeddings N(0, 0.02), the residual projections (attn.out_proj.weight,
 * mlp.c_proj.weight) N(0, 0.02 / sqrt(2 n_layer)), biases zero, LayerNorms
 * ones and zeros; drawn from the library's generator (cn_manual_seed).
 * With rope, there is no wpe: every block turns each head's queries and
 * keys by their positions (cn_rope, half-split pairs over the whole head,
 * GPT-NeoX/LLaMA style), so attention sees relative positions; the head
 * size n_embd / n_head must then be even.
 * cn_module_forward(gpt, ids): ids [B, T] integer (T <= context_length) ->
 * logits [B, T, vocab_size] f32. The forward traces into a static graph
 * (a placeholder ids of shape [-1, T]) and trains with
 * cn_compile_train_step like any module. */
typedef struct cn_gpt_config {
    int64_t vocab_size;     /* required */
    int64_t context_length; /* required: the most positions (block size) */
    int n_layer;            /* required */
    int n_head;             /* required; must divide n_embd */
    int64_t n_embd;         /* required */
    double dropout;         /* embeddings, attention weights, residual branches */
    bool rope;              /* rotary position embeddings instead of wpe */
    double rope_base;       /* with rope; 0: 10000 */
} cn_gpt_config;
cn_module *cn_nn_gpt(const cn_gpt_config *config);
/* The configuration a GPT was made with; CN_EINVAL if m is not one. */
int cn_gpt_get_config(const cn_module *m, cn_gpt_config *config);

/* A key/value cache for generating with a GPT: per layer, the keys and
 * values of every position seen so far ([B, heads, context_length,
 * head_dim] buffers filled step by step), so each new token costs one
 * position of attention over the cache instead of a forward over the whole
 * sequence. cn_gpt_forward_cached(gpt, cache, ids [B, Tn]) runs the new
 * tokens at positions length .. length + Tn - 1, appends their keys and
 * values and gives their logits [B, Tn, vocab_size]; it is inference only
 * (no gradient is recorded; dropout is not applied whatever the mode) and
 * fails once the cache would pass context_length (reset it). The
 * attention of a single new token reads the cache with the fused op and no
 * mask, since the cache holds only the past. With rope, the new queries and
 * keys are turned at positions length .. length + Tn - 1 (cn_rope's offset)
 * and the cache keeps the turned keys. */
typedef struct cn_gpt_cache cn_gpt_cache;
cn_gpt_cache *cn_gpt_cache_new(cn_module *gpt, int64_t batch);
void cn_gpt_cache_free(cn_gpt_cache *c);
void cn_gpt_cache_reset(cn_gpt_cache *c);
int64_t cn_gpt_cache_length(const cn_gpt_cache *c);
cn_tensor *cn_gpt_forward_cached(cn_module *gpt, cn_gpt_cache *c, cn_tensor *ids);

/* Autoregressive generation of n_new tokens after prompt[0..n_prompt)
 * (n_prompt >= 1) into out[0..n_new), batch 1, in evaluation mode (the
 * module's mode is restored after). Each token is drawn from the last
 * position's logits: temperature 0 takes the argmax (greedy; the first
 * maximum); otherwise softmax(logits / temperature), cut to the top_k most
 * likely tokens (0: no cut) and then to the smallest set of most likely
 * tokens whose probability reaches top_p (0 or >= 1: no cut), drawn with
 * Philox keyed by seed and the step, so a seed gives the same text on any
 * machine and thread count, independent of the global generator. The
 * window the model sees is at most context_length tokens: when it is
 * full it restarts from its last context_length / 2 tokens (computed once
 * into a fresh cache). no_cache recomputes the forward over the whole
 * window for every token instead of using the KV cache: the same tokens
 * (the test checks it), for reference and timing. on_token, if set, is
 * called with each new token as it is made (streaming). */
typedef struct cn_gpt_generate_opts {
    double temperature;
    int64_t top_k;
    double top_p;
    uint64_t seed;
    bool no_cache;
    void (*on_token)(void *ctx, int64_t token);
    void *ctx;
} cn_gpt_generate_opts;
int cn_gpt_generate(cn_module *gpt, const int64_t *prompt, int64_t n_prompt, int64_t n_new,
                    const cn_gpt_generate_opts *opts, int64_t *out);

/* ------------------------------------------------------------------------ */
/* Losses                                                                   */
/* ------------------------------------------------------------------------ */
/* Functions of (prediction, target), built from ops (so they differentiate
 * and trace like any other), as in torch.nn.functional. */

typedef enum cn_reduction {
    CN_REDUCTION_MEAN = 0, /* PyTorch's default */
    CN_REDUCTION_SUM,
    CN_REDUCTION_NONE      /* the per-element (or per-sample) losses */
} cn_reduction;

/* (input - target)^2 and |input - target|; the two broadcast together. */
cn_tensor *cn_mse_loss(cn_tensor *input, cn_tensor *target, cn_reduction reduction);
cn_tensor *cn_l1_loss(cn_tensor *input, cn_tensor *target, cn_reduction reduction);

/* Classification: logits (or log-probabilities for nll) [N, C] or
 * [N, C, d1, ...] ([C] unbatched), target integer class indices [N] or
 * [N, d1, ...]. label_smoothing e in [0, 1] mixes the target with the
 * uniform distribution (PyTorch's formula: (1 - e) * nll + e * mean over
 * classes of -log p). The mean is over the samples (weighted by weight[target]
 * when weights are given); ignored targets count nowhere. cross_entropy
 * also takes class probabilities as the target (float, the logits' shape);
 * the mean is then over the samples whatever the weights. Labels out of
 * [0, C) fail. */
cn_tensor *cn_cross_entropy(cn_tensor *logits, cn_tensor *target, cn_reduction reduction,
                            double label_smoothing);
cn_tensor *cn_nll_loss(cn_tensor *log_probs, cn_tensor *target, cn_reduction reduction);
typedef struct cn_class_loss_opts {
    cn_reduction reduction;
    double label_smoothing; /* cross_entropy only */
    cn_tensor *weight;      /* [C] per-class weights, or NULL */
    bool use_ignore_index;  /* targets equal to ignore_index add nothing */
    int64_t ignore_index;
} cn_class_loss_opts;
cn_tensor *cn_cross_entropy_ex(cn_tensor *logits, cn_tensor *target, const cn_class_loss_opts *opts);
cn_tensor *cn_nll_loss_ex(cn_tensor *log_probs, cn_tensor *target, const cn_class_loss_opts *opts);

/* Binary cross-entropy of logits x and targets y in [0, 1], computed stably
 * as max(x, 0) - x y + log(1 + e^-|x|); pos_weight (NULL: 1) weights the
 * positive term (broadcast against x, e.g. [C] for [N, C]). */
cn_tensor *cn_bce_with_logits(cn_tensor *x, cn_tensor *y, cn_tensor *pos_weight,
                              cn_reduction reduction);
/* Binary cross-entropy of probabilities p: -(y log p + (1 - y) log(1 - p)),
 * each log clamped at -100 as in PyTorch. */
cn_tensor *cn_bce_loss(cn_tensor *p, cn_tensor *y, cn_reduction reduction);

/* ------------------------------------------------------------------------ */
/* Initialisers                                                             */
/* ------------------------------------------------------------------------ */
/* In place on a float tensor (a parameter is fine: no gradient is
 * recorded), drawing from the library's generator; as torch.nn.init. Fans
 * of a tensor of rank >= 2: fan_in = shape[1] * receptive field, fan_out =
 * shape[0] * receptive field (the product of shape[2:]). */

typedef enum cn_nonlinearity {
    CN_NL_LINEAR = 0, /* also conv and sigmoid: gain 1 */
    CN_NL_SIGMOID,
    CN_NL_TANH,       /* 5/3 */
    CN_NL_RELU,       /* sqrt(2) */
    CN_NL_LEAKY_RELU, /* sqrt(2 / (1 + a^2)) */
    CN_NL_SELU        /* 3/4 */
} cn_nonlinearity;
typedef enum cn_fan_mode { CN_FAN_IN = 0, CN_FAN_OUT } cn_fan_mode;

/* torch.nn.init.calculate_gain (param: leaky_relu's slope). */
double cn_init_gain(cn_nonlinearity nl, double param);
int cn_init_fans(const cn_tensor *t, int64_t *fan_in, int64_t *fan_out);
int cn_init_uniform_(cn_tensor *t, double lo, double hi);
int cn_init_normal_(cn_tensor *t, double mean, double std);
int cn_init_constant_(cn_tensor *t, double value);
int cn_init_zeros_(cn_tensor *t);
int cn_init_ones_(cn_tensor *t);
/* U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)); N(0, gain * sqrt(2 / (fan_in + fan_out))). */
int cn_init_xavier_uniform_(cn_tensor *t, double gain);
int cn_init_xavier_normal_(cn_tensor *t, double gain);
/* std = gain(nl, a) / sqrt(fan); uniform bound sqrt(3) * std. */
int cn_init_kaiming_uniform_(cn_tensor *t, double a, cn_fan_mode mode, cn_nonlinearity nl);
int cn_init_kaiming_normal_(cn_tensor *t, double a, cn_fan_mode mode, cn_nonlinearity nl);

/* ------------------------------------------------------------------------ */
/* Op table introspection                                                   */
/* ------------------------------------------------------------------------ */
/* Every op of the library, as the op table describes it (docs/ops.md is
 * generated from this: `chutney ops --markdown`), by index from 0 to
 * cn_op_count() - 1. Indices may change between versions; names do not.
 * The strings are static: they live as long as the library. */

#define CN_OP_INFO_MAX_ATTRS 8

typedef struct cn_op_attr_info {
    const char *name;
    const char *kind;     /* "int", "bool", "float", "dtype" or "ints" (a list) */
    double default_value; /* a cn_dtype for "dtype" (-1: the input's); 0 for "ints" */
} cn_op_attr_info;

typedef struct cn_op_info {
    const char *name;     /* cn_<name> calls it */
    int ninputs;          /* -1: any number (at least 1) */
    int nattrs;
    cn_op_attr_info attrs[CN_OP_INFO_MAX_ATTRS];
    /* Its properties, as words separated by one space ("" if none):
     * "view" (the output aliases input 0), "elementwise" (broadcasting),
     * "float_math" (integer inputs compute in f32), "promote" (inputs are
     * cast to their common type), "nondiff" (the output carries no
     * gradient), "random" (draws from the generator), "no_half" (f16/bf16
     * are not widened), "first_order" (a gradient op that cannot be
     * differentiated again), "transfer" (a copy between devices). */
    char flags[128];
    /* Its gradient: "vjp+jvp" (reverse and forward mode), "vjp only",
     * "none" (nondiff), "unsupported" (first_order) or "missing". */
    const char *grad;
    const char *doc;      /* one line of maths ("" if none) */
    const char *grad_doc; /* the derivative used where the maths has none,
                             e.g. "relu'(0) = 0" ("" if smooth) */
    const char *onnx;     /* the ONNX op it exports to ("" if none) */
} cn_op_info;

int cn_op_count(void);
/* Op i into *info; CN_EINVAL if i is out of range. */
int cn_op_get_info(int i, cn_op_info *info);
/* The index of the op called name, or CN_EINVAL if there is none. */
int cn_op_index(const char *name);

/* The ONNX importer's table (docs/onnx.md's, `chutney info
 * --supported-ops`): every ONNX op type cn_onnx_load reads, by index from
 * 0 to cn_onnx_op_count() - 1, in no particular order (sort by name to
 * list them). Without ONNX support the count is 0. Static strings. */
typedef struct cn_onnx_op_info {
    const char *name;   /* the ONNX op_type, e.g. "Conv" */
    const char *attrs;  /* the attributes read, comma-separated ("" if none);
                           a node with any other attribute is refused */
    int min_inputs, max_inputs;
    int max_outputs;    /* the outputs supported */
    const char *limits; /* what is not supported ("" if nothing) */
} cn_onnx_op_info;

int cn_onnx_op_count(void);
/* Entry i into *info; CN_EINVAL if i is out of range. */
int cn_onnx_get_op_info(int i, cn_onnx_op_info *info);

/* ------------------------------------------------------------------------ */
/* Distributed training (MPI)                                               */
/* ------------------------------------------------------------------------ */

/* Processes started together by `mpirun -np N` (or Slurm's srun) form one
 * job; each has a rank in [0, N). cn_dist_init once (it starts MPI; argc
 * and argv may be NULL), cn_dist_finalize at the end. Without MPI in the
 * build (cn_dist_available false), or started without mpirun, the job is
 * one process of rank 0 and the collectives change nothing. */
bool cn_dist_available(void);
int cn_dist_init(int *argc, char ***argv);
int cn_dist_finalize(void);
int cn_dist_rank(void); /* 0 before cn_dist_init */
int cn_dist_size(void); /* 1 before cn_dist_init */
/* Ends the whole job (every rank) with this exit status: for a rank that
 * cannot go on, so the others do not wait for it. */
void cn_dist_abort(int code);

/* Collectives: every rank calls them in the same order, on tensors of the
 * same shape and dtype (f32, f64, i32, i64), on the CPU, contiguous.
 * Allreduce is in place; its sums run in one fixed order of the ranks (a
 * ring), so reruns give the same bits, and every rank gets the same
 * result. */
typedef enum cn_dist_op { CN_DIST_SUM, CN_DIST_MEAN, CN_DIST_MAX, CN_DIST_MIN } cn_dist_op;
int cn_dist_allreduce(cn_tensor *t, cn_dist_op op);
int cn_dist_broadcast(cn_tensor *t, int root);  /* root's values to every rank */
cn_tensor *cn_dist_allgather(cn_tensor *t);     /* [size, ...t's shape], rank order */
int cn_dist_barrier(void);

/* Messages between two ranks, as ops (differentiable: a model split over
 * processes trains with cn_backward on each). cn_send sends t's values to
 * rank dst and returns a token (an f32 scalar 0); cn_backward(token, NULL)
 * on the sender receives t's gradient back and goes on from t. cn_recv
 * receives a tensor of the given dtype and shape from rank src; token is
 * NULL (a fresh one is made) or any f32 scalar; cn_backward through the
 * result sends its gradient back to src. Tags 0 to 2^20 - 1 pair the two
 * sides (gradients use tag + 2^20). CPU tensors; blocking until the peer
 * takes or gives the message. In a static graph, keep the token among the
 * program's outputs (nothing else uses it), or better, build the graph
 * under device scopes of ranks ("rank:1/cpu:0", the Devices section) and
 * let cn_compile insert the messages. */
cn_tensor *cn_send(cn_tensor *t, int dst, int tag);
cn_tensor *cn_recv(cn_tensor *token, cn_dtype dt, int ndim, const int64_t *shape, int src, int tag);

/* Data-parallel training (PyTorch's DistributedDataParallel): made after
 * the optimiser, on every rank, it
 *   - checks that every rank has the same model (parameter names, shapes
 *     and dtypes), an error naming the first rank that differs;
 *   - broadcasts rank 0's parameters and buffers, so every rank starts
 *     from the same values;
 *   - averages the gradients over the ranks before each cn_optimizer_step
 *     (eager steps and compiled training steps alike), in buckets of about
 *     bucket_bytes; in eager mode a bucket is sent as soon as cn_backward
 *     has made its gradients final (cn_set_grad_ready_hook), while the rest
 *     of the backward pass runs, on a thread of its own.
 * Give each rank its own shard of the data (cn_loader_opts.shard_*), and
 * the global batch is the per-rank batch times the number of ranks. One
 * wrapper per optimiser; free it before the optimiser. */
typedef struct cn_ddp cn_ddp;
typedef struct cn_ddp_opts {
    size_t bucket_bytes; /* 0: 4 MiB */
    bool no_overlap;     /* average everything in cn_optimizer_step instead */
} cn_ddp_opts;
cn_ddp *cn_ddp_new(cn_module *m, cn_optimizer *opt, const cn_ddp_opts *opts);
void cn_ddp_free(cn_ddp *d);
/* Broadcast rank 0's buffers (BatchNorm's running statistics) to every
 * rank, e.g. before evaluating. */
int cn_ddp_sync_buffers(cn_ddp *d);
typedef struct cn_ddp_stats {
    int64_t steps, buckets, bytes; /* averaged so far */
    double comm_seconds;           /* the communication thread's time in collectives */
    double wait_seconds;           /* cn_optimizer_step's wait for them */
} cn_ddp_stats;
int cn_ddp_get_stats(const cn_ddp *d, cn_ddp_stats *s);

#ifdef __cplusplus
}
#endif

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#endif /* CHUTNEY_H */
