/* A small test harness: TEST functions, CHECK macros that report and go on,
 * and helpers to make random tensors in awkward layouts (transposed,
 * negative strides, gaps, broadcast) with a generator independent of the
 * library's own. Each test program ends with `return th_summary();`. */
#ifndef CN_TEST_HARNESS_H
#define CN_TEST_HARNESS_H

#include <chutney.h>

#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int th_checks, th_failures, th_tests;
static const char *th_current;

static void th_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void th_fail(const char *file, int line, const char *fmt, ...) {
    th_failures++;
    fprintf(stderr, "%s:%d: [%s] ", file, line, th_current ? th_current : "?");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        th_checks++;                                                                               \
        if (!(cond)) th_fail(__FILE__, __LINE__, "CHECK(%s) failed (last error: %s)", #cond,        \
                             cn_last_error());                                                     \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        th_checks++;                                                                               \
        if (!(cond)) th_fail(__FILE__, __LINE__, __VA_ARGS__);                                     \
    } while (0)

/* |a - b| <= atol + rtol * |b|; NaNs must match. */
#define CHECK_CLOSE(a, b, rtol, atol)                                                              \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        th_checks++;                                                                               \
        if (!th_close(a_, b_, rtol, atol))                                                         \
            th_fail(__FILE__, __LINE__, "%s = %.9g, expected %s = %.9g", #a, a_, #b, b_);          \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        th_checks++;                                                                               \
        if (a_ != b_) th_fail(__FILE__, __LINE__, "%s = %lld, expected %lld", #a, a_, b_);         \
    } while (0)

/* The call returned NULL / an error, and the message contains `needle`. */
#define CHECK_ERROR(expr, needle)                                                                  \
    do {                                                                                           \
        cn_clear_error();                                                                          \
        th_checks++;                                                                               \
        if ((expr)) {                                                                              \
            th_fail(__FILE__, __LINE__, "%s succeeded, expected an error containing \"%s\"",       \
                    #expr, needle);                                                                \
        } else if (!strstr(cn_last_error(), needle)) {                                             \
            th_fail(__FILE__, __LINE__, "%s: error \"%s\" does not contain \"%s\"", #expr,         \
                    cn_last_error(), needle);                                                      \
        }                                                                                          \
    } while (0)

/* For int-returning calls: the status is negative and the message matches. */
#define CHECK_STATUS_ERROR(expr, needle) CHECK_ERROR((expr) >= 0, needle)

static inline int th_close(double a, double b, double rtol, double atol) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b)) return a == b;
    return fabs(a - b) <= atol + rtol * fabs(b);
}

#define RUN(fn)                                                                                    \
    do {                                                                                           \
        th_current = #fn;                                                                          \
        th_tests++;                                                                                \
        int before_ = th_failures;                                                                 \
        cn_scope_begin();                                                                          \
        fn();                                                                                      \
        cn_scope_end();                                                                            \
        if (cn_scope_depth() != 0) th_fail(__FILE__, __LINE__, "scopes left open");               \
        fprintf(stderr, "%-40s %s\n", #fn, th_failures == before_ ? "ok" : "FAILED");             \
    } while (0)

static inline int th_summary(void) {
    fprintf(stderr, "%d tests, %d checks, %d failures\n", th_tests, th_checks, th_failures);
    return th_failures ? 1 : 0;
}

/* ---- a test-only generator (splitmix64), independent of cn_rand ---- */

static uint64_t th_rng_state = 0x243F6A8885A308D3ull;

static inline void th_seed(uint64_t s) { th_rng_state = s; }

static inline uint64_t th_next(void) {
    uint64_t z = (th_rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline double th_uniform(double lo, double hi) {
    return lo + (hi - lo) * ((double)(th_next() >> 11) * (1.0 / 9007199254740992.0));
}

static inline int64_t th_randint(int64_t lo, int64_t hi) { /* [lo, hi) */
    return lo + (int64_t)(th_next() % (uint64_t)(hi - lo));
}

/* ---- index helpers ---- */

static inline int64_t th_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

/* Multi-index of linear position k in a row-major shape. */
static inline void th_unravel(int64_t k, int ndim, const int64_t *shape, int64_t *idx) {
    for (int i = ndim - 1; i >= 0; i--) {
        idx[i] = shape[i] ? k % shape[i] : 0;
        k = shape[i] ? k / shape[i] : 0;
    }
}

/* Element k (row-major) of t, through the public accessor. */
static inline double th_at(const cn_tensor *t, int64_t k) {
    int64_t idx[CN_MAX_DIMS];
    th_unravel(k, cn_ndim(t), cn_shape(t), idx);
    return cn_get(t, idx);
}

/* Element of t for the output multi-index oidx of a broadcast result of rank ond. */
static inline double th_at_broadcast(const cn_tensor *t, int ond, const int64_t *oidx) {
    int64_t idx[CN_MAX_DIMS];
    int nd = cn_ndim(t);
    const int64_t *sh = cn_shape(t);
    for (int i = 0; i < nd; i++) {
        int64_t o = oidx[i + ond - nd];
        idx[i] = sh[i] == 1 ? 0 : o;
    }
    return cn_get(t, idx);
}

static inline int th_same_shape(const cn_tensor *t, int ndim, const int64_t *shape) {
    if (!t || cn_ndim(t) != ndim) return 0;
    for (int i = 0; i < ndim; i++)
        if (cn_shape(t)[i] != shape[i]) return 0;
    return 1;
}

/* Same dtype, size and bits (each element as f32: a NaN equals itself,
 * -0 differs from 0), where cn_equal compares values. */
static inline int th_same_bits(const cn_tensor *a, const cn_tensor *b) {
    if (!a || !b || cn_tensor_dtype(a) != cn_tensor_dtype(b) || cn_numel(a) != cn_numel(b))
        return 0;
    size_t n = (size_t)cn_numel(a);
    float *x = malloc(n * 4 + 4), *y = malloc(n * 4 + 4);
    int ok = x && y && cn_copy_to_buffer(a, CN_F32, x, n * 4) == 0 &&
             cn_copy_to_buffer(b, CN_F32, y, n * 4) == 0 && memcmp(x, y, n * 4) == 0;
    free(x);
    free(y);
    return ok;
}

#define CHECK_SHAPE(t, ...)                                                                        \
    do {                                                                                           \
        int64_t want_[] = {__VA_ARGS__};                                                           \
        int nd_ = (int)(sizeof want_ / sizeof want_[0]);                                           \
        th_checks++;                                                                               \
        if (!th_same_shape((t), nd_, want_)) {                                                     \
            char b_[200];                                                                          \
            th_fail(__FILE__, __LINE__, "%s has shape %s", #t,                                     \
                    (t) ? cn_shape_str((t), b_, sizeof b_) : "NULL");                              \
        }                                                                                          \
    } while (0)

/* ---- tensors in awkward layouts ----
 * Layouts: 0 contiguous; 1 stored transposed (axes reversed); 2 negative
 * strides on every axis; 3 gaps (every other element of a bigger buffer);
 * 4 a mix of 1 and 2. The logical content is the same for a given values
 * array: element k (row-major) is vals[k]. */
enum { TH_CONTIG, TH_TRANSPOSED, TH_REVERSED, TH_STRIDED, TH_MIXED, TH_NLAYOUTS };

static inline cn_tensor *th_make(cn_dtype dt, int ndim, const int64_t *shape, const double *vals,
                                 int layout) {
    int64_t n = th_numel(ndim, shape);
    cn_tensor *t = NULL;
    int64_t idx[CN_MAX_DIMS];
    if (ndim == 0) layout = TH_CONTIG;
    switch (layout) {
    case TH_TRANSPOSED:
    case TH_MIXED: {
        int64_t rshape[CN_MAX_DIMS] = {0};
        int perm[CN_MAX_DIMS];
        for (int i = 0; i < ndim; i++) {
            rshape[i] = shape[ndim - 1 - i];
            perm[i] = ndim - 1 - i;
        }
        cn_tensor *base = cn_zeros(dt, ndim, rshape);
        t = cn_permute(base, perm, ndim);
        if (layout == TH_MIXED && ndim > 0 && shape[0] > 0)
            t = cn_slice(t, 0, CN_END, CN_BEGIN, -1); /* reverse axis 0 */
        break;
    }
    case TH_REVERSED: {
        t = cn_zeros(dt, ndim, shape);
        for (int i = 0; i < ndim; i++) t = cn_slice(t, i, CN_END, CN_BEGIN, -1);
        break;
    }
    case TH_STRIDED: {
        int64_t bshape[CN_MAX_DIMS] = {0};
        for (int i = 0; i < ndim; i++) bshape[i] = shape[i] * 2;
        t = cn_zeros(dt, ndim, bshape);
        for (int i = 0; i < ndim; i++) t = cn_slice(t, i, 1, CN_END, 2);
        break;
    }
    default: t = cn_zeros(dt, ndim, shape); break;
    }
    for (int64_t k = 0; k < n; k++) {
        th_unravel(k, ndim, shape, idx);
        cn_set(t, idx, vals[k]);
    }
    return t;
}

/* A fresh random tensor (values in [lo, hi)) in the given layout; the
 * values are written to vals_out (numel entries) when it is not NULL. */
static inline cn_tensor *th_random(cn_dtype dt, int ndim, const int64_t *shape, double lo,
                                   double hi, int layout, double *vals_out) {
    int64_t n = th_numel(ndim, shape);
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t k = 0; k < n; k++) {
        double x = th_uniform(lo, hi);
        if (dt == CN_F32) x = (float)x;
        else if (dt == CN_F16) x = cn_f16_to_f32(cn_f32_to_f16((float)x));
        else if (dt == CN_BF16) x = cn_bf16_to_f32(cn_f32_to_bf16((float)x));
        else if (dt != CN_F64) x = floor(x);
        if (dt == CN_BOOL) x = x != 0;
        v[k] = x;
    }
    cn_tensor *t = th_make(dt, ndim, shape, v, layout);
    if (vals_out) memcpy(vals_out, v, sizeof(double) * (size_t)n);
    free(v);
    return t;
}

/* A random shape of rank ndim with sizes in [lo, hi]. */
static inline void th_random_shape(int ndim, int64_t lo, int64_t hi, int64_t *shape) {
    for (int i = 0; i < ndim; i++) shape[i] = th_randint(lo, hi + 1);
}

/* Replace some axes of shape by 1 (or drop leading axes) so it broadcasts
 * against shape. Returns the new rank. */
static inline int th_broadcastable(int ndim, const int64_t *shape, int64_t *out) {
    int drop = (int)th_randint(0, ndim + 1);
    int nd = ndim - drop;
    for (int i = 0; i < nd; i++) {
        int64_t s = shape[i + drop];
        out[i] = th_randint(0, 3) == 0 ? 1 : s;
    }
    return nd;
}

#endif
