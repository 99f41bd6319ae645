/* The backend-conformance suite: every op on every backend this build and
 * machine have, against the CPU backend as the reference.
 *
 * The cases are the gradient cases of every differentiable op
 * (grad_cases_*.h, the same ones test_grad.c checks against finite
 * differences) plus forward cases for what they leave out (comparisons,
 * logic, argmax, integer dtypes, random draws, zero-size tensors). Each case
 * runs on the CPU and, inside a device scope, on the device, from the same
 * random values in every layout the harness makes (contiguous, transposed,
 * reversed, strided, mixed: th_make builds them with view ops on the
 * device), in f64 and f32; the outputs and the gradients of sum(y * w)
 * must agree. The op table and the suite check each other: an op without a
 * kernel on a backend, or without a case here, fails.
 *
 * For each device kind this build has but the machine does not, it prints
 * "skipped: no OpenCL platform" / "skipped: no CUDA device" and how many
 * cases that is; it never passes silently.
 *
 * --compile-cuda (the `cuda` stage of make check): after the cases, every
 * kernel source the run generated (on OpenCL: the shared kernels are the
 * same source for both backends) is compiled for CUDA by NVRTC, which needs
 * no GPU; a source that does not compile fails, with the compiler's log.
 *
 * cuBLAS and NCCL are opened at run time (cuda_blas.c, dist_nccl.c): every
 * function the backend calls must resolve in the library this machine has,
 * so a misspelt symbol fails here rather than on the first GPU; with
 * --compile-cuda (a machine with the toolkit) the libraries must be found
 * too. */
#include "gradcheck.h"
#include "ops/op.h"
#include "backend/backend.h"
#ifdef CN_HAVE_CUDA
#include "backend/gpu/gpu.h"
#include "backend/cuda/cuda_nvrtc.h"
#include "backend/dist.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#include "grad_cases_shape.h"
#include "grad_cases_unary.h"
#include "grad_cases_binary.h"
#include "grad_cases_reduce.h"
#include "grad_cases_index.h"
#include "grad_cases_nn.h"
#include "grad_cases_rnn.h"
#include "grad_cases_attention.h"

typedef struct case_list {
    const grad_case *cases;
    size_t n;
} case_list;
#define LIST(arr) {arr, sizeof arr / sizeof arr[0]}
static const case_list grad_lists[] = {
    LIST(grad_cases_shape), LIST(grad_cases_unary), LIST(grad_cases_binary),
    LIST(grad_cases_reduce), LIST(grad_cases_index), LIST(grad_cases_nn), LIST(grad_cases_rnn),
    LIST(grad_cases_attention),
};

/* ---- forward cases: ops and dtypes the gradient cases leave out ---- */

typedef struct fwd_case {
    const char *op;
    const char *name;
    int nin;
    gc_input in[GC_MAX_IN]; /* dtype is used as given (CN_F32 = 0 means f32 here) */
    cn_tensor *(*fn)(cn_tensor **x);
    bool exact;             /* integer or boolean results: equal, not close */
} fwd_case;

static cn_tensor *ff_eq(cn_tensor **x) { return cn_eq(x[0], x[1]); }
static cn_tensor *ff_ne(cn_tensor **x) { return cn_ne(x[0], x[1]); }
static cn_tensor *ff_lt(cn_tensor **x) { return cn_lt(x[0], x[1]); }
static cn_tensor *ff_le(cn_tensor **x) { return cn_le(x[0], x[1]); }
static cn_tensor *ff_gt(cn_tensor **x) { return cn_gt(x[0], x[1]); }
static cn_tensor *ff_ge(cn_tensor **x) { return cn_ge(x[0], x[1]); }
static cn_tensor *ff_and(cn_tensor **x) { return cn_logical_and(x[0], x[1]); }
static cn_tensor *ff_or(cn_tensor **x) { return cn_logical_or(x[0], x[1]); }
static cn_tensor *ff_xor(cn_tensor **x) { return cn_logical_xor(x[0], x[1]); }
static cn_tensor *ff_not(cn_tensor **x) { return cn_logical_not(x[0]); }
static cn_tensor *ff_argmax(cn_tensor **x) { return cn_argmax(x[0], 1, false); }
static cn_tensor *ff_argmin(cn_tensor **x) { return cn_argmin(x[0], 0, true); }
static cn_tensor *ff_add(cn_tensor **x) { return cn_add(x[0], x[1]); }
static cn_tensor *ff_mul(cn_tensor **x) { return cn_mul(x[0], x[1]); }
static cn_tensor *ff_sub(cn_tensor **x) { return cn_sub(x[0], x[1]); }
static cn_tensor *ff_max(cn_tensor **x) { return cn_maximum(x[0], x[1]); }
static cn_tensor *ff_neg(cn_tensor **x) { return cn_neg(x[0]); }
static cn_tensor *ff_abs(cn_tensor **x) { return cn_abs(x[0]); }
static cn_tensor *ff_sum_all(cn_tensor **x) { return cn_sum(x[0], NULL, 0, false); }
static cn_tensor *ff_sum1(cn_tensor **x) { return cn_sum(x[0], CN_AXES(1), false); }
static cn_tensor *ff_max1(cn_tensor **x) { return cn_max(x[0], CN_AXES(1), false); }
static cn_tensor *ff_matmul(cn_tensor **x) { return cn_matmul(x[0], x[1]); }
static cn_tensor *ff_cumsum(cn_tensor **x) { return cn_cumsum(x[0], 1); }
static cn_tensor *ff_cast_f16(cn_tensor **x) { return cn_cast(cn_cast(x[0], CN_F16), CN_F32); }
static cn_tensor *ff_cast_bf16(cn_tensor **x) { return cn_cast(cn_cast(x[0], CN_BF16), CN_F32); }
static cn_tensor *ff_cast_i32(cn_tensor **x) { return cn_cast(x[0], CN_I32); }
static cn_tensor *ff_cast_u8(cn_tensor **x) { return cn_cast(x[0], CN_U8); }
static cn_tensor *ff_half_add(cn_tensor **x) {
    return cn_cast(cn_add(cn_cast(x[0], CN_F16), cn_cast(x[1], CN_BF16)), CN_F32);
}
static cn_tensor *ff_contig(cn_tensor **x) { return cn_contiguous(x[0]); }
static cn_tensor *ff_one_hot(cn_tensor **x) { return cn_one_hot(x[0], 5); }
static cn_tensor *ff_gather_i(cn_tensor **x) { return cn_gather(x[0], 1, x[1]); }
static cn_tensor *ff_concat_i(cn_tensor **x) {
    cn_tensor *p[2] = {x[0], x[1]};
    return cn_concat(p, 2, 0);
}
static cn_tensor *ff_tril_i(cn_tensor **x) { return cn_tril(x[0], 0); }
static cn_tensor *ff_where_i(cn_tensor **x) { return cn_where(cn_gt(x[0], x[1]), x[0], x[1]); }
static cn_tensor *ff_bernoulli(cn_tensor **x) {
    cn_manual_seed(7);
    return cn_bernoulli(x[0]);
}
static cn_tensor *ff_maxpool_idx(cn_tensor **x) {
    cn_pool_opts o = {.kernel = {2, 2}, .stride = {2, 2}};
    return cn_max_pool2d_indices(x[0], &o);
}
static cn_tensor *ff_floor_i(cn_tensor **x) { return cn_sign(x[0]); }
static cn_tensor *ff_full_like(cn_tensor **x) {
    cn_attrs a = {.i = {-1}, .f = {2.5}};
    return cn_op_apply(CN_OP_full_like, x, 1, &a);
}
static cn_tensor *ff_full_like_i(cn_tensor **x) {
    cn_attrs a = {.i = {CN_I64}, .f = {-7}};
    return cn_op_apply(CN_OP_full_like, x, 1, &a);
}

#define IN_F(...) {GC_SHAPE(__VA_ARGS__), -2, 2, .dtype = CN_F32}
#define IN_D(...) {GC_SHAPE(__VA_ARGS__), -2, 2, .dtype = CN_F64}
#define IN_T(dt, lo, hi, ...) {GC_SHAPE(__VA_ARGS__), lo, hi, .dtype = dt}

static const fwd_case fwd_cases[] = {
    {"eq", "f32", 2, {IN_T(CN_F32, -2, 2, 3, 4), IN_T(CN_F32, -2, 2, 3, 4)}, ff_eq, true},
    {"eq", "i64", 2, {IN_T(CN_I64, -2, 2, 3, 4), IN_T(CN_I64, -2, 2, 4)}, ff_eq, true},
    {"ne", "i32", 2, {IN_T(CN_I32, -2, 2, 3, 4), IN_T(CN_I32, -2, 2, 3, 1)}, ff_ne, true},
    {"lt", "f64", 2, {IN_D(3, 4), IN_D(4)}, ff_lt, true},
    {"le", "u8", 2, {IN_T(CN_U8, 0, 4, 3, 4), IN_T(CN_U8, 0, 4, 3, 4)}, ff_le, true},
    {"gt", "f32", 2, {IN_F(2, 3, 4), IN_F(3, 1)}, ff_gt, true},
    {"ge", "i64", 2, {IN_T(CN_I64, -3, 3, 5), IN_T(CN_I64, -3, 3, 5)}, ff_ge, true},
    {"logical_and", "bool", 2, {IN_T(CN_BOOL, 0, 2, 3, 4), IN_T(CN_BOOL, 0, 2, 3, 4)}, ff_and,
     true},
    {"logical_or", "f32", 2, {IN_T(CN_F32, -1, 2, 3, 4), IN_T(CN_I64, 0, 2, 4)}, ff_or, true},
    {"logical_xor", "u8", 2, {IN_T(CN_U8, 0, 3, 6), IN_T(CN_BOOL, 0, 2, 6)}, ff_xor, true},
    {"logical_not", "i32", 1, {IN_T(CN_I32, -2, 2, 3, 5)}, ff_not, true},
    {"argmax", "f32", 1, {IN_F(4, 6)}, ff_argmax, true},
    {"argmax", "i64", 1, {IN_T(CN_I64, -9, 9, 3, 7)}, ff_argmax, true},
    {"argmin", "f64", 1, {IN_D(5, 3)}, ff_argmin, true},
    {"add", "i64", 2, {IN_T(CN_I64, -100, 100, 3, 4), IN_T(CN_I64, -100, 100, 4)}, ff_add, true},
    {"add", "i32 + f32", 2, {IN_T(CN_I32, -100, 100, 3, 4), IN_F(3, 4)}, ff_add, false},
    {"add", "u8", 2, {IN_T(CN_U8, 0, 255, 8), IN_T(CN_U8, 0, 255, 8)}, ff_add, true},
    {"add", "zero-size", 2, {IN_F(0, 4), IN_F(4)}, ff_add, false},
    {"add", "f16 + bf16", 2, {IN_F(3, 4), IN_F(3, 4)}, ff_half_add, false},
    {"mul", "i32", 2, {IN_T(CN_I32, -50, 50, 3, 4), IN_T(CN_I32, -50, 50, 3, 4)}, ff_mul, true},
    {"sub", "i64", 2, {IN_T(CN_I64, -50, 50, 2, 3), IN_T(CN_I64, -50, 50, 1)}, ff_sub, true},
    {"maximum", "i32", 2, {IN_T(CN_I32, -9, 9, 4, 4), IN_T(CN_I32, -9, 9, 4, 4)}, ff_max, true},
    {"neg", "i64", 1, {IN_T(CN_I64, -9, 9, 7)}, ff_neg, true},
    {"abs", "i32", 1, {IN_T(CN_I32, -9, 9, 2, 5)}, ff_abs, true},
    {"sign", "i64", 1, {IN_T(CN_I64, -3, 3, 9)}, ff_floor_i, true},
    {"sum", "i32 all", 1, {IN_T(CN_I32, -9, 9, 3, 5)}, ff_sum_all, true},
    {"sum", "zero-size", 1, {IN_F(3, 0)}, ff_sum1, false},
    {"sum", "large f32", 1, {IN_F(3, 5000)}, ff_sum1, false},
    {"max", "u8", 1, {IN_T(CN_U8, 0, 200, 4, 6)}, ff_max1, true},
    {"matmul", "i64", 2, {IN_T(CN_I64, -5, 5, 3, 4), IN_T(CN_I64, -5, 5, 4, 2)}, ff_matmul, true},
    {"matmul", "k = 0", 2, {IN_F(3, 0), IN_F(0, 2)}, ff_matmul, false},
    {"matmul", "f32 64x48x40", 2, {IN_F(64, 48), IN_F(48, 40)}, ff_matmul, false},
    {"cumsum", "i32", 1, {IN_T(CN_I32, -9, 9, 3, 6)}, ff_cumsum, true},
    {"cast", "f32 -> f16 -> f32", 1, {IN_T(CN_F32, -70000, 70000, 40)}, ff_cast_f16, false},
    {"cast", "f32 -> bf16 -> f32", 1, {IN_T(CN_F32, -1e6, 1e6, 40)}, ff_cast_bf16, false},
    {"cast", "f32 -> i32", 1, {IN_T(CN_F32, -50, 50, 4, 5)}, ff_cast_i32, true},
    {"cast", "f64 -> u8", 1, {IN_T(CN_F64, 0, 255, 4, 5)}, ff_cast_u8, true},
    {"contiguous", "bool", 1, {IN_T(CN_BOOL, 0, 2, 3, 4)}, ff_contig, true},
    {"contiguous", "u8", 1, {IN_T(CN_U8, 0, 255, 3, 4)}, ff_contig, true},
    {"one_hot", "i64", 1, {{GC_SHAPE(2, 3), .is_index = true, .index_max = 5}}, ff_one_hot, true},
    {"gather", "i32 values", 2,
     {IN_T(CN_I32, -9, 9, 3, 4), {GC_SHAPE(3, 2), .is_index = true, .index_max = 4}},
     ff_gather_i, true},
    {"concat", "i64", 2, {IN_T(CN_I64, -9, 9, 2, 3), IN_T(CN_I64, -9, 9, 1, 3)}, ff_concat_i,
     true},
    {"tril", "u8", 1, {IN_T(CN_U8, 0, 200, 4, 4)}, ff_tril_i, true},
    {"where", "i64", 2, {IN_T(CN_I64, -9, 9, 3, 4), IN_T(CN_I64, -9, 9, 4)}, ff_where_i, true},
    {"bernoulli", "f32, seed 7", 1, {IN_T(CN_F32, 0, 1, 6, 7)}, ff_bernoulli, true},
    {"max_pool2d_indices", "f32", 1, {IN_F(2, 3, 6, 6)}, ff_maxpool_idx, true},
    {"full_like", "f32", 1, {IN_F(3, 4)}, ff_full_like, true},
    {"full_like", "as i64", 1, {IN_T(CN_U8, 0, 9, 2, 0, 3)}, ff_full_like_i, true},
};

/* Ops that only gradients run: covered by the cases of the op whose
 * gradient they are. */
static const char *const covered_by[][2] = {
    {"lstm_seq_backward", "lstm_seq"},
    {"scaled_dot_product_attention_backward", "scaled_dot_product_attention"},
};

/* ---- running a case on one device ---- */

static int64_t cases_run, cases_compared;

/* The inputs of a forward case (the values from the harness's generator,
 * so the same seed gives the same inputs on every device). */
static cn_tensor *fwd_input(const gc_input *s, int layout) {
    if (s->is_index) return gc_make_input(s, layout);
    int64_t n = th_numel(s->ndim, s->shape);
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    cn_dtype dt = s->dtype;
    for (int64_t k = 0; k < n; k++) {
        double x = th_uniform(s->lo, s->hi);
        if (dt == CN_F32) x = (float)x;
        else if (dt != CN_F64) x = floor(x);
        if (dt == CN_BOOL) x = x != 0;
        v[k] = x;
    }
    cn_tensor *t = th_make(dt, s->ndim, s->shape, v, layout);
    free(v);
    return t;
}

/* y on the host, for comparing. */
static cn_tensor *host(cn_tensor *t) { return t ? cn_to(t, CN_CPU) : NULL; }

static bool close_all(cn_tensor *a, cn_tensor *b, bool exact, double rtol, double atol,
                      double *worst, int64_t *where) {
    if (!a || !b || cn_ndim(a) != cn_ndim(b) || cn_tensor_dtype(a) != cn_tensor_dtype(b))
        return false;
    for (int i = 0; i < cn_ndim(a); i++)
        if (cn_shape(a)[i] != cn_shape(b)[i]) return false;
    int64_t n = cn_numel(a);
    *worst = 0;
    for (int64_t k = 0; k < n; k++) {
        double x = th_at(a, k), y = th_at(b, k);
        if ((isnan(x) && isnan(y)) || x == y) continue;
        double d = fabs(x - y);
        if (exact ? x != y : !(d <= atol + rtol * fabs(y))) {
            *worst = d;
            *where = k;
            return false;
        }
    }
    return true;
}

static void compare(const char *what, const char *op, const char *name, cn_device dev,
                    int layout, cn_tensor *got, cn_tensor *want, bool exact, double rtol,
                    double atol) {
    double worst = 0;
    int64_t where = -1;
    cases_compared++;
    cn_tensor *g = host(got);
    bool ok = close_all(g, want, exact, rtol, atol, &worst, &where);
    char b1[160], b2[160], dn[32];
    CHECK_MSG(ok,
              "%s/%s on %s, layout %d: %s differs from the CPU: %s vs %s, element %" PRId64
              ": %.9g vs %.9g",
              op, name, cn_device_str(dev, dn, sizeof dn), layout, what,
              g ? cn_shape_str(g, b1, sizeof b1) : "NULL", cn_shape_str(want, b2, sizeof b2),
              where, where >= 0 && g ? th_at(g, where) : NAN,
              where >= 0 ? th_at(want, where) : NAN);
}

/* Forward values and gradients of grad case c in dtype dt (f64 or f32),
 * from seed, on the current device scope's device. */
typedef struct run_out {
    cn_tensor *y;
    cn_tensor *g[GC_MAX_IN];
    bool ok;
} run_out;

static run_out run_grad_case(const grad_case *c, cn_dtype dt, int layout, uint64_t seed) {
    run_out r = {0};
    th_seed(seed);
    cn_tensor *x[GC_MAX_IN];
    for (int i = 0; i < c->nin; i++) {
        cn_tensor *t = gc_make_input(&c->in[i], layout);
        if (dt != CN_F64 && cn_tensor_dtype(t) == CN_F64) {
            /* the same layout in dt: cast keeps the shape, so view it back */
            t = cn_detach(cn_cast(t, dt));
        }
        if (gc_differentiable(&c->in[i])) cn_set_requires_grad(t, true);
        x[i] = t;
    }
    r.y = c->fn(x);
    if (!r.y) return r;
    th_seed(seed + 1);
    /* w where y is (a case may end on another device: cn_to's). */
    cn_device_scope_begin(cn_tensor_device(r.y));
    cn_tensor *w = th_random(CN_F64, cn_ndim(r.y), cn_shape(r.y), -1, 1, TH_CONTIG, NULL);
    cn_device_scope_end();
    cn_tensor *diff[GC_MAX_IN];
    int nd = 0, map[GC_MAX_IN];
    for (int i = 0; i < c->nin; i++)
        if (gc_differentiable(&c->in[i])) {
            map[nd] = i;
            diff[nd++] = x[i];
        }
    r.ok = true;
    if (nd > 0 && cn_dtype_is_float(cn_tensor_dtype(r.y))) {
        cn_tensor *loss = cn_sum(cn_mul(cn_cast(r.y, CN_F64), w), NULL, 0, false);
        cn_tensor *gs[GC_MAX_IN];
        if (cn_grad(&loss, NULL, 1, diff, nd, gs, CN_GRAD_ALLOW_UNUSED) < 0) {
            r.ok = false;
            return r;
        }
        for (int d = 0; d < nd; d++) r.g[map[d]] = gs[d];
    }
    return r;
}

static void check_grad_case(const grad_case *c, cn_device dev, uint64_t seed) {
    for (int di = 0; di < 2; di++) {
        cn_dtype dt = di == 0 ? CN_F64 : CN_F32;
        double rtol = dt == CN_F64 ? 1e-9 : 2e-4, atol = dt == CN_F64 ? 1e-10 : 2e-5;
        for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
            cn_scope_begin();
            cases_run++;
            run_out want = run_grad_case(c, dt, layout, seed);
            if (!want.y || !want.ok) { /* the CPU refuses it: not this suite's business */
                cn_clear_error();
                cn_scope_end();
                continue;
            }
            cn_device_scope_begin(dev);
            run_out got = run_grad_case(c, dt, layout, seed);
            cn_device_scope_end();
            char dn[32];
            CHECK_MSG(got.y && got.ok, "%s/%s on %s, layout %d, %s: failed: %s", c->op, c->name,
                      cn_device_str(dev, dn, sizeof dn), layout, cn_dtype_name(dt),
                      cn_last_error());
            if (got.y && got.ok) {
                CHECK_MSG(cn_device_equal(cn_tensor_device(got.y), dev) ||
                              cn_ndim(got.y) == 0 || strcmp(c->op, "to") == 0,
                          "%s/%s: the result is on %s, not on %s", c->op, c->name,
                          cn_device_str(cn_tensor_device(got.y), dn, sizeof dn), "the device");
                compare("output", c->op, c->name, dev, layout, got.y, want.y, false, rtol, atol);
                for (int i = 0; i < c->nin; i++)
                    if (want.g[i] || got.g[i])
                        compare("gradient", c->op, c->name, dev, layout, got.g[i], want.g[i],
                                false, rtol * 10, atol * 10);
            }
            cn_scope_end();
            if (th_failures > 50) return;
        }
    }
}

static void check_fwd_case(const fwd_case *c, cn_device dev, uint64_t seed) {
    for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
        cn_scope_begin();
        cases_run++;
        cn_tensor *x[GC_MAX_IN];
        th_seed(seed);
        for (int i = 0; i < c->nin; i++) x[i] = fwd_input(&c->in[i], layout);
        cn_tensor *want = c->fn(x);
        char dn[32];
        CHECK_MSG(want != NULL, "%s/%s: the CPU fails: %s", c->op, c->name, cn_last_error());
        cn_device_scope_begin(dev);
        th_seed(seed);
        for (int i = 0; i < c->nin; i++) x[i] = fwd_input(&c->in[i], layout);
        cn_tensor *got = c->fn(x);
        cn_device_scope_end();
        CHECK_MSG(got != NULL, "%s/%s on %s, layout %d: failed: %s", c->op, c->name,
                  cn_device_str(dev, dn, sizeof dn), layout, cn_last_error());
        if (want && got)
            compare("output", c->op, c->name, dev, layout, got, want, c->exact, 2e-5, 2e-6);
        cn_scope_end();
    }
}

/* ---- the op table and the suite check each other ---- */

static bool has_case(const char *op) {
    for (size_t k = 0; k < sizeof covered_by / sizeof covered_by[0]; k++)
        if (strcmp(covered_by[k][0], op) == 0) op = covered_by[k][1];
    for (size_t l = 0; l < sizeof grad_lists / sizeof grad_lists[0]; l++)
        for (size_t k = 0; k < grad_lists[l].n; k++)
            if (strcmp(grad_lists[l].cases[k].op, op) == 0) return true;
    for (size_t k = 0; k < sizeof fwd_cases / sizeof fwd_cases[0]; k++)
        if (strcmp(fwd_cases[k].op, op) == 0) return true;
    return false;
}

/* Views only set strides, transfers are copies, and messages between
 * ranks run on the CPU (tests/test_dist.c checks them, between two ranks). */
static bool needs_kernel(const cn_op_def *d) {
    return !(d->flags & (CN_OPF_VIEW | CN_OPF_TRANSFER | CN_OPF_COMM));
}

/* Ops whose public function composes other ops on a backend without their
 * kernel (their cases run there through that function). */
static bool composed_on_devices(const cn_op_def *d) { return strcmp(d->name, "layer_norm") == 0; }

static void test_table(void) {
    for (int id = 0; id < CN_OP_COUNT; id++) {
        const cn_op_def *d = cn_ops[id];
        CHECK_MSG(has_case(d->name) || (d->flags & CN_OPF_COMM),
                  "op %s has no case in the conformance suite", d->name);
        if (!needs_kernel(d)) continue;
        for (int k = 0; k < CN_DEVICE_KIND_COUNT; k++) {
            if (cn_device_count((cn_device_kind)k) == 0) continue;
            if (k != CN_DEVICE_CPU && composed_on_devices(d)) continue;
            const cn_backend *b = cn_backend_for(CN_DEVICE(k, 0), "test");
            CHECK_MSG(b && b->kernels[id], "op %s has no kernel on the %s backend", d->name,
                      b ? b->name : "?");
        }
    }
}

static const char *const kind_names[CN_DEVICE_KIND_COUNT] = {
    [CN_DEVICE_CPU] = "CPU", [CN_DEVICE_OPENCL] = "OpenCL", [CN_DEVICE_CUDA] = "CUDA"};

/* CN_TEST_DEVICE_KINDS ("cuda", "opencl,cuda"): the kinds to run the suite
 * on, for a lent GPU whose machine also has an OpenCL platform (the run on
 * it compiles every kernel again with that vendor's compiler). Unset: all. */
static bool kind_selected(int k) {
    const char *sel = getenv("CN_TEST_DEVICE_KINDS");
    if (!sel || !*sel) return true;
    const char *name = k == CN_DEVICE_OPENCL ? "opencl" : k == CN_DEVICE_CUDA ? "cuda" : "cpu";
    size_t n = strlen(name);
    for (const char *p = sel; (p = strstr(p, name)); p += n)
        if ((p == sel || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return true;
    return false;
}

static void test_devices(void) {
    int ndev = 0;
    size_t ncases = sizeof fwd_cases / sizeof fwd_cases[0];
    for (size_t l = 0; l < sizeof grad_lists / sizeof grad_lists[0]; l++) ncases += grad_lists[l].n;
    for (int k = 1; k < CN_DEVICE_KIND_COUNT; k++) {
        int n = cn_device_count((cn_device_kind)k);
        if (n > 0 && !kind_selected(k)) {
            printf("skipped: %s (CN_TEST_DEVICE_KINDS=%s)\n", kind_names[k],
                   getenv("CN_TEST_DEVICE_KINDS"));
            continue;
        }
        if (n == 0) {
            if (!cn_backends[k])
                printf("skipped: this build has no %s backend\n", kind_names[k]);
            else if (k == CN_DEVICE_OPENCL)
                printf("skipped: no OpenCL platform (%zu cases x %d layouts not run on "
                       "OpenCL)\n", ncases, TH_NLAYOUTS);
            else
                printf("skipped: no %s device (%zu cases x %d layouts not run on %s)\n",
                       kind_names[k], ncases, TH_NLAYOUTS, kind_names[k]);
        }
        for (int i = 0; i < n; i++) {
            cn_device dev = CN_DEVICE(k, i);
            ndev++;
            int64_t run0 = cases_run, cmp0 = cases_compared;
            uint64_t seed = 1;
            for (size_t l = 0; l < sizeof grad_lists / sizeof grad_lists[0]; l++)
                for (size_t c = 0; c < grad_lists[l].n; c++)
                    check_grad_case(&grad_lists[l].cases[c], dev, 1000 + seed++);
            for (size_t c = 0; c < sizeof fwd_cases / sizeof fwd_cases[0]; c++)
                check_fwd_case(&fwd_cases[c], dev, 5000 + c);
            char name[32];
            printf("conformance on %s: %zu cases, %" PRId64 " runs, %" PRId64
                   " comparisons against the CPU\n",
                   cn_device_str(dev, name, sizeof name), ncases, cases_run - run0,
                   cases_compared - cmp0);
        }
    }
    if (ndev == 0) printf("no device but the CPU: no case ran on a device\n");
}

#ifdef CN_HAVE_CUDA
typedef struct nvrtc_run {
    int compiled, failed;
} nvrtc_run;

static void compile_one(const char *src, const char *opts, void *ctx) {
    nvrtc_run *r = ctx;
    size_t n = 0;
    /* sm_90: the lent GPUs' architecture; CUBIN, so ptxas runs too. */
    void *img = cn_cuda_compile(src, opts, "sm_90", &n);
    r->compiled++;
    if (!img || n == 0) {
        r->failed++;
        CHECK_MSG(false, "NVRTC: %s", cn_last_error());
    }
    free(img);
}

static void test_compile_cuda(void) {
    nvrtc_run r = {0, 0};
    cn_gpu_sources_foreach(compile_one, &r);
    if (r.compiled == 0) {
        printf("skipped: no device ran a kernel, so none was compiled for CUDA\n");
        return;
    }
    printf("NVRTC: %d kernel sources compiled for CUDA (sm_90), %d failed\n", r.compiled,
           r.failed);
}

/* Files in dir whose name ends in ".bin" (the cache's entries). */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        n += l > 4 && !strcmp(e->d_name + l - 4, ".bin");
    }
    if (d) closedir(d);
    return n;
}

static void remove_entries(const char *dir) {
    DIR *d = opendir(dir);
    char path[512];
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(dir);
}

/* The on-disk kernel cache: a second compile of the same source reads the
 * file (an image changed in the file comes back changed), a damaged file is
 * a miss that compiles again, other options are another entry, and
 * CN_CUDA_KERNEL_CACHE=0 writes nothing. */
static void test_kernel_cache(void) {
    char dir[] = "/tmp/cn-kcache-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    const char *old = getenv("CN_CUDA_KERNEL_CACHE");
    char *saved = old ? strdup(old) : NULL;
    setenv("CN_CUDA_KERNEL_CACHE", dir, 1);
    const char *src = "__kernel void k(__global float *x) { x[get_global_id(0)] = X; }\n";
    size_t n1 = 0, n2 = 0, n3 = 0;
    unsigned char *a = cn_cuda_compile_cached(src, "-DX=1", "sm_90", &n1);
    CHECK_MSG(a && n1 > 0, "%s", cn_last_error());
    CHECK(count_entries(dir) == 1);
    /* Flip the image's last byte in the file: a hit returns the file's bytes. */
    DIR *d = opendir(dir);
    char path[512] = "";
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
    FILE *f = fopen(path, "r+b");
    CHECK(f && fseek(f, -1, SEEK_END) == 0 && fputc(a[n1 - 1] ^ 0xff, f) != EOF);
    if (f) fclose(f);
    unsigned char *b = cn_cuda_compile_cached(src, "-DX=1", "sm_90", &n2);
    CHECK(b && n2 == n1 && memcmp(a, b, n1 - 1) == 0 && b[n1 - 1] == (a[n1 - 1] ^ 0xff));
    free(b);
    /* Truncated: a miss, compiled again, the file rewritten whole. */
    CHECK(truncate(path, 20) == 0);
    b = cn_cuda_compile_cached(src, "-DX=1", "sm_90", &n3);
    CHECK(b && n3 == n1 && memcmp(a, b, n1) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size > (off_t)n1);
    free(b);
    b = cn_cuda_compile_cached(src, "-DX=2", "sm_90", &n2);
    CHECK(b && count_entries(dir) == 2);
    free(b);
    setenv("CN_CUDA_KERNEL_CACHE", "0", 1);
    b = cn_cuda_compile_cached(src, "-DX=3", "sm_90", &n2);
    CHECK(b && count_entries(dir) == 2);
    free(b);
    free(a);
    if (saved) setenv("CN_CUDA_KERNEL_CACHE", saved, 1);
    else unsetenv("CN_CUDA_KERNEL_CACHE");
    free(saved);
    remove_entries(dir);
}

static bool libs_required; /* --compile-cuda: the toolkit is here, so are they */

/* 1 loaded (every symbol resolved), 0 not found, -1 found without a symbol. */
static void check_library(const char *name, int st, const char *why, bool required) {
    CHECK_MSG(st == 1 || (st == 0 && !required), "%s: %s", name, why);
    if (st == 1)
        printf("%s: %s opened, every function the backend calls resolved\n", name, why);
    else if (st == 0 && !required)
        printf("skipped: %s: %s\n", name, why);
}

static void test_cuda_libraries(void) {
    const char *why = NULL;
    int st = cn_cuda_blas_load(&why);
    check_library("cuBLAS", st, why, libs_required);
    st = cn_dist_nccl_load(&why);
#ifdef CN_HAVE_NCCL
    check_library("NCCL", st, why, libs_required);
#else
    check_library("NCCL", st, why, false);
#endif
}
#endif

/* A tensor moved to a device and back, its gradient flowing back to the
 * source device; ops across two devices fail naming both. */
static void test_transfers(void) {
    cn_device dev;
    CHECK(cn_device_parse("opencl:0", &dev) == 0 && dev.kind == CN_DEVICE_OPENCL);
    CHECK(cn_device_parse("cpu", &dev) == 0 && dev.kind == CN_DEVICE_CPU && dev.index == 0);
    CHECK(cn_device_parse("cuda:3", &dev) == 0 && dev.kind == CN_DEVICE_CUDA && dev.index == 3);
    CHECK_ERROR(cn_device_parse("tpu:0", &dev) == 0, "unknown kind");
    CHECK_ERROR(cn_device_parse("opencl:x", &dev) == 0, "non-negative integer");
    if (cn_device_count(CN_DEVICE_OPENCL) == 0) {
        CHECK(cn_to(cn_ones(CN_F32, CN_SHAPE(2)), CN_DEVICE(CN_DEVICE_OPENCL, 0)) == NULL);
        CHECK_MSG(strstr(cn_last_error(), "opencl") != NULL, "error: %s", cn_last_error());
        return;
    }
    cn_device cl = CN_DEVICE(CN_DEVICE_OPENCL, 0);
    cn_scope_begin();
    /* Creation on a device, and under a device scope. */
    float vals[6] = {1, 2, 3, 4, 5, 6};
    cn_tensor *fd = cn_from_data_on(cl, CN_F32, CN_SHAPE(2, 3), vals);
    CHECK(fd && cn_device_equal(cn_tensor_device(fd), cl) && cn_get(fd, (int64_t[]){1, 2}) == 6);
    cn_tensor *z = cn_zeros_on(cl, CN_I64, CN_SHAPE(4));
    CHECK(z && cn_device_equal(cn_tensor_device(z), cl) && cn_item(cn_sum(z, NULL, 0, false)) == 0);
    CHECK(cn_item(cn_sum(cn_full_on(cl, CN_F64, CN_SHAPE(3), 2.5), NULL, 0, false)) == 7.5);
    CHECK_ERROR(cn_ones_on(CN_DEVICE(CN_DEVICE_OPENCL, 9), CN_F32, CN_SHAPE(1)), "opencl:9");
    CHECK(cn_device_scope_begin(cl) == 0);
    cn_tensor *r = cn_arange(0, 5, 1, CN_F32);
    cn_device_scope_end();
    CHECK(r && cn_device_equal(cn_tensor_device(r), cl) && cn_item(cn_sum(r, NULL, 0, false)) == 10);
    CHECK(cn_data(r) == NULL && strstr(cn_last_error(), "opencl:0"));
    cn_tensor *x = th_random(CN_F32, 2, (int64_t[]){3, 4}, -1, 1, TH_TRANSPOSED, NULL);
    cn_set_requires_grad(x, true);
    cn_tensor *xd = cn_to(x, cl);
    CHECK(cn_device_equal(cn_tensor_device(xd), cl));
    cn_tensor *y = cn_sum(cn_mul(cn_to(cn_exp(xd), CN_CPU), cn_scalar(CN_F32, 3)), NULL, 0, false);
    CHECK(cn_backward(y, NULL) == 0);
    cn_tensor *want = cn_mul_scalar(cn_exp(x), 3);
    CHECK(cn_get_grad(x) && cn_allclose(cn_get_grad(x), cn_detach(want), 1e-5, 1e-6));
    CHECK(cn_device_equal(cn_tensor_device(cn_get_grad(x)), CN_CPU));
    /* Mixed devices: an error naming both; a rank-0 CPU tensor joins. */
    cn_tensor *a = cn_to(cn_ones(CN_F32, CN_SHAPE(2, 2)), cl);
    CHECK(cn_add(a, cn_ones(CN_F32, CN_SHAPE(2, 2))) == NULL);
    CHECK_MSG(strstr(cn_last_error(), "opencl:0") && strstr(cn_last_error(), "cpu:0"),
              "error: %s", cn_last_error());
    cn_tensor *b = cn_add(a, cn_scalar(CN_F32, 2));
    CHECK(b && cn_device_equal(cn_tensor_device(b), cl) && cn_item(cn_sum(b, NULL, 0, false)) == 12);
    /* Async copy, then an event. */
    cn_tensor *big = cn_arange(0, 100000, 1, CN_F32);
    cn_tensor *bd = cn_to_async(big, cl);
    cn_event *e = cn_event_record(cl);
    CHECK(e && cn_event_synchronize(e) == 0 && cn_event_query(e));
    cn_event_free(e);
    CHECK(cn_item(cn_sum(cn_cast(bd, CN_F64), NULL, 0, false)) == 4999950000.0);
    cn_memory_stats st;
    CHECK(cn_device_memory_stats(cl, &st) == 0 && st.allocated_bytes >= 400000 &&
          st.peak_allocated_bytes >= st.allocated_bytes && st.allocations > 0);
    cn_scope_end();
    CHECK(cn_device_synchronize(cl) == 0);
}

/* The gradient checker's drivers are test_grad.c's. */
static void (*const unused_drivers[])(const grad_case *) = {gc_check_static};
static int (*const unused_case_driver)(const grad_case *, int) = gc_check_case;

int main(int argc, char **argv) {
    (void)unused_drivers, (void)unused_case_driver;
    bool compile_cuda = argc > 1 && !strcmp(argv[1], "--compile-cuda");
    if (argc > 1 && !compile_cuda) {
        fprintf(stderr, "usage: %s [--compile-cuda]\n", argv[0]);
        return 2;
    }
    RUN(test_table);
    RUN(test_transfers);
    RUN(test_devices);
#ifdef CN_HAVE_CUDA
    libs_required = compile_cuda;
    RUN(test_cuda_libraries);
#endif
    if (compile_cuda) {
#ifdef CN_HAVE_CUDA
        RUN(test_compile_cuda);
        RUN(test_kernel_cache);
#else
        CHECK_MSG(false, "--compile-cuda: this build has no CUDA backend (CHUTNEY_WITH_CUDA)");
#endif
    }
    return th_summary();
}
