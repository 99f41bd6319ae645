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

/* The thread-local message of the last failure ("" if none). */
const char *cn_last_error(void);
void cn_clear_error(void);

/* Threads: one pool for every kernel. The default is CN_NUM_THREADS if set,
 * else the number of cores the process may run on. BLAS is told the same. */
int cn_set_num_threads(int n);
int cn_get_num_threads(void);

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
/* Pointer to element [0,...,0] (NULL for symbolic tensors of a static graph).
 * Walk it with cn_strides unless cn_is_contiguous. */
void *cn_data(const cn_tensor *t);
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

/* A tensor sharing t's data with no history (a leaf). */
cn_tensor *cn_detach(cn_tensor *t);

enum {
    CN_GRAD_RETAIN_GRAPH = 1 << 0, /* keep the record for another backward */
    CN_GRAD_CREATE_GRAPH = 1 << 1, /* record the backward pass itself (higher order) */
    CN_GRAD_ALLOW_UNUSED = 1 << 2  /* an input the outputs do not depend on gets NULL */
};

/* d(root)/d(leaves), accumulated into each leaf's grad. seed is the gradient
 * of root (NULL: root must have one element, seed 1). Frees the record
 * unless flags has CN_GRAD_RETAIN_GRAPH. */
int cn_backward(cn_tensor *root, cn_tensor *seed);
int cn_backward_ex(cn_tensor *root, cn_tensor *seed, unsigned flags);

/* The gradients of sum(outputs[i] * seeds[i]) with respect to inputs, as new
 * tensors in grads[0..ninputs) (owned by the current scope), without touching
 * any .grad (torch.autograd.grad). seeds may be NULL (each output must then
 * have one element). On symbolic tensors of a static graph this appends the
 * gradient subgraph. */
int cn_grad(cn_tensor *const *outputs, cn_tensor *const *seeds, int noutputs,
            cn_tensor *const *inputs, int ninputs, cn_tensor **grads, unsigned flags);

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

typedef struct cn_compile_opts {
    int opt_level; /* 0: run the graph as built; higher levels optimise (see docs) */
} cn_compile_opts;

/* Order, check and prepare the nodes that outputs depend on. opts may be NULL. */
cn_program *cn_compile(cn_graph *g, cn_tensor *const *outputs, int noutputs,
                       const cn_compile_opts *opts);
void cn_program_free(cn_program *p);
/* The placeholders the program needs, in a fixed order. */
int cn_program_num_inputs(const cn_program *p);
cn_tensor *cn_program_input(const cn_program *p, int i);
/* Feed values[i] to placeholders[i] (every input must be fed), run, and put
 * the outputs (owned by the current scope) into outputs[0..noutputs). */
int cn_run(cn_program *p, cn_tensor *const *placeholders, cn_tensor *const *values, int nfeeds,
           cn_tensor **outputs, int noutputs);

#ifdef __cplusplus
}
#endif

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#endif /* CHUTNEY_H */
