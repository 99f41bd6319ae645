/* Printing (NumPy/PyTorch-like), summary statistics and comparisons. */
#include "core.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

/* A growable string. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t len) {
    if (b->oom) return;
    if (b->n + len + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + len + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

static void sb_printf(sbuf *b, const char *fmt, ...) CN_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0) sb_put(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* The layout follows PyTorch's print options: 4 digits, rows wrapped at 80
 * columns, and above 1000 elements every axis longer than 6 shows its first
 * and last 3 items around "...". The one format of a tensor is chosen from
 * the values shown. Unlike PyTorch, the dtype is always printed and nan/inf
 * count towards the column width, so columns line up. */
#define EDGE 3             /* items shown at each end of a summarised axis */
#define SUMMARY_NUMEL 1000 /* above this, long axes are summarised */
#define LINEWIDTH 80
#define PREFIX 7 /* strlen("tensor(") */

enum { F_BOOL, F_INT, F_FLOAT_INT, F_FIXED, F_SCI };

typedef struct print_ctx {
    const cn_tensor *t;
    sbuf *b;
    int kind; /* F_* */
    int width;
    bool summarise;
    /* format selection over the shown floats */
    double amin, amax;
    bool int_valued, any;
} print_ctx;

static int fmt_value_raw(char *out, size_t n, const print_ctx *c, int64_t off) {
    const void *p = c->t->storage->data;
    cn_dtype dt = (cn_dtype)c->t->dtype;
    /* Integers go through int64: a double would round i64 beyond 2^53. */
    if (c->kind == F_BOOL)
        return snprintf(out, n, "%s", cn_load_i64(p, dt, off) ? "true" : "false");
    if (c->kind == F_INT) return snprintf(out, n, "%" PRId64, cn_load_i64(p, dt, off));
    double v = cn_load_f64(p, dt, off);
    if (isnan(v)) return snprintf(out, n, "nan");
    if (isinf(v)) return snprintf(out, n, v > 0 ? "inf" : "-inf");
    if (c->kind == F_FLOAT_INT) return snprintf(out, n, "%.0f.", v);
    if (c->kind == F_FIXED) return snprintf(out, n, "%.4f", v);
    return snprintf(out, n, "%.4e", v);
}

/* The length written (snprintf's count can exceed the buffer). */
static int fmt_value(char *out, size_t n, const print_ctx *c, int64_t off) {
    int len = fmt_value_raw(out, n, c, off);
    return len < 0 ? 0 : len >= (int)n ? (int)n - 1 : len;
}

typedef void (*visit_fn)(print_ctx *c, int64_t off);

/* Call fn on every element that will be printed, in order. */
static void visit_shown(print_ctx *c, int dim, int64_t off, visit_fn fn) {
    const cn_tensor *t = c->t;
    if (dim == t->ndim) {
        fn(c, off);
        return;
    }
    int64_t n = t->shape[dim];
    for (int64_t i = 0; i < n; i++) {
        if (c->summarise && n > 2 * EDGE && i == EDGE) i = n - EDGE;
        visit_shown(c, dim + 1, off + i * t->strides[dim], fn);
    }
}

static void measure_range(print_ctx *c, int64_t off) {
    double v = cn_load_f64(c->t->storage->data, (cn_dtype)c->t->dtype, off);
    if (!isfinite(v) || v == 0) return;
    double a = fabs(v);
    if (a < c->amin) c->amin = a;
    if (a > c->amax) c->amax = a;
    if (v != ceil(v)) c->int_valued = false;
    c->any = true;
}

static void measure_width(print_ctx *c, int64_t off) {
    char v[64];
    int len = fmt_value(v, sizeof v, c, off);
    if (len > c->width) c->width = len;
}

static void put_spaces(sbuf *b, int n) {
    for (int k = 0; k < n; k++) sb_put(b, " ", 1);
}

static void put_value(print_ctx *c, int64_t off) {
    char v[64];
    int len = fmt_value(v, sizeof v, c, off);
    put_spaces(c->b, c->width - len);
    sb_put(c->b, v, (size_t)len);
}

/* Axis dim, whose '[' is at column PREFIX + dim. */
static void print_rec(print_ctx *c, int dim, int64_t off) {
    const cn_tensor *t = c->t;
    int64_t n = t->shape[dim];
    bool last = dim == t->ndim - 1;
    bool cut = c->summarise && n > 2 * EDGE;
    int64_t per_line = (LINEWIDTH - (PREFIX + dim)) / (c->width + 2);
    if (per_line < 1) per_line = 1;
    sb_put(c->b, "[", 1);
    int64_t item = 0; /* items printed so far, "..." included */
    for (int64_t i = 0; i < n; i++, item++) {
        if (item > 0) {
            sb_put(c->b, ",", 1);
            if (last && item % per_line != 0) {
                sb_put(c->b, " ", 1);
            } else {
                for (int k = dim; k < (last ? dim + 1 : t->ndim - 1); k++) sb_put(c->b, "\n", 1);
                put_spaces(c->b, PREFIX + dim + 1);
            }
        }
        if (cut && i == EDGE) {
            if (last)
                sb_put(c->b, " ...", 4);
            else
                sb_put(c->b, "...", 3);
            i = n - EDGE - 1;
            continue;
        }
        if (last)
            put_value(c, off + i * t->strides[dim]);
        else
            print_rec(c, dim + 1, off + i * t->strides[dim]);
    }
    sb_put(c->b, "]", 1);
}

/* Visit every element (row-major) of t. */
#define FOR_EACH_OFFSET(t, off, body)                                                              \
    do {                                                                                           \
        int64_t idx_[CN_MAX_DIMS] = {0};                                                           \
        int64_t n_ = cn_shape_numel((t)->ndim, (t)->shape);                                        \
        int64_t off = (t)->offset;                                                                 \
        for (int64_t k_ = 0; k_ < n_; k_++) {                                                      \
            body;                                                                                  \
            for (int d_ = (t)->ndim - 1; d_ >= 0; d_--) {                                          \
                if (++idx_[d_] < (t)->shape[d_]) {                                                 \
                    off += (t)->strides[d_];                                                       \
                    break;                                                                         \
                }                                                                                  \
                off -= (t)->strides[d_] * (idx_[d_] - 1);                                          \
                idx_[d_] = 0;                                                                      \
            }                                                                                      \
        }                                                                                          \
    } while (0)

char *cn_to_string(const cn_tensor *t) {
    sbuf b = {0};
    if (!t) {
        sb_printf(&b, "NULL");
        return b.p;
    }
    cn_dtype dt = (cn_dtype)t->dtype;
    char sh[160];
    if (!t->storage) {
        sb_printf(&b, "tensor(symbolic, shape=%s, dtype=%s)",
                  cn_fmt_shape(sh, sizeof sh, t->ndim, t->shape), cn_dtype_name(dt));
        return b.p;
    }
    int64_t numel = cn_shape_numel(t->ndim, t->shape);
    print_ctx c = {.t = t, .b = &b, .summarise = numel > SUMMARY_NUMEL, .width = 1,
                   .amin = INFINITY, .amax = 0, .int_valued = true};
    if (dt == CN_BOOL) {
        c.kind = F_BOOL;
    } else if (!cn_dtype_is_float(dt)) {
        c.kind = F_INT;
    } else {
        /* PyTorch's choice: integers as "3.", else 4 decimals, and
         * scientific notation when the magnitudes span more than 1000x or
         * reach 1e8 (or, for non-integers, go below 1e-4). */
        visit_shown(&c, 0, t->offset, measure_range);
        bool wide = c.any && (c.amax / c.amin > 1000.0 || c.amax > 1.0e8);
        if (c.int_valued)
            c.kind = wide ? F_SCI : F_FLOAT_INT;
        else
            c.kind = wide || (c.any && c.amin < 1.0e-4) ? F_SCI : F_FIXED;
    }
    sb_printf(&b, "tensor(");
    if (t->ndim == 0) {
        c.width = 0;
        put_value(&c, t->offset);
    } else if (numel == 0) {
        sb_printf(&b, "[], shape=%s", cn_fmt_shape(sh, sizeof sh, t->ndim, t->shape));
    } else {
        visit_shown(&c, 0, t->offset, measure_width);
        print_rec(&c, 0, t->offset);
    }
    sb_printf(&b, ", dtype=%s)", cn_dtype_name(dt));
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

void cn_fprint(FILE *f, const cn_tensor *t) {
    char *s = cn_to_string(t);
    if (s) {
        fprintf(f, "%s\n", s);
        free(s);
    }
}

void cn_print(const cn_tensor *t) { cn_fprint(stdout, t); }

int cn_tensor_stats(const cn_tensor *t, cn_stats *out) {
    if (!t || !out) return CN_EINVAL;
    if (!t->storage) return cn_failc(CN_EINVAL, "tensor_stats: the tensor is symbolic");
    cn_dtype dt = (cn_dtype)t->dtype;
    memset(out, 0, sizeof *out);
    out->numel = cn_shape_numel(t->ndim, t->shape);
    double mn = INFINITY, mx = -INFINITY, sum = 0, sum2 = 0;
    int64_t nfin = 0;
    /* Two passes (mean, then squared deviations) keep std accurate. */
    FOR_EACH_OFFSET(t, off, {
        double v = cn_load_f64(t->storage->data, dt, off);
        if (isnan(v)) {
            out->nan_count++;
        } else if (isinf(v)) {
            out->inf_count++;
        } else {
            if (v < mn) mn = v;
            if (v > mx) mx = v;
            sum += v;
            nfin++;
        }
    });
    if (nfin == 0) {
        out->min = out->max = out->mean = out->std = NAN;
        return CN_OK;
    }
    double mean = sum / (double)nfin;
    FOR_EACH_OFFSET(t, off, {
        double v = cn_load_f64(t->storage->data, dt, off);
        if (isfinite(v)) sum2 += (v - mean) * (v - mean);
    });
    out->min = mn;
    out->max = mx;
    out->mean = mean;
    out->std = sqrt(sum2 / (double)nfin);
    return CN_OK;
}

static bool same_shape(const cn_tensor *a, const cn_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

bool cn_equal(const cn_tensor *a, const cn_tensor *b) {
    if (!a || !b || !a->storage || !b->storage || !same_shape(a, b)) return false;
    return cn_allclose(a, b, 0, 0);
}

bool cn_allclose(const cn_tensor *a, const cn_tensor *b, double rtol, double atol) {
    if (!a || !b || !a->storage || !b->storage) return false;
    if (!same_shape(a, b)) return false;
    /* Walk both in row-major order with one index. */
    int64_t n = cn_shape_numel(a->ndim, a->shape);
    int64_t idx[CN_MAX_DIMS] = {0};
    int64_t oa = a->offset, ob = b->offset;
    /* Integers compare exactly (no rounding through double beyond 2^53)
     * unless a tolerance is asked for. */
    bool ints = !cn_dtype_is_float((cn_dtype)a->dtype) && !cn_dtype_is_float((cn_dtype)b->dtype) &&
                rtol == 0 && atol == 0;
    for (int64_t k = 0; k < n; k++) {
        if (ints) {
            if (cn_load_i64(a->storage->data, (cn_dtype)a->dtype, oa) !=
                cn_load_i64(b->storage->data, (cn_dtype)b->dtype, ob))
                return false;
        } else {
            double x = cn_load_f64(a->storage->data, (cn_dtype)a->dtype, oa);
            double y = cn_load_f64(b->storage->data, (cn_dtype)b->dtype, ob);
            if (isnan(x) || isnan(y)) {
                if (!(isnan(x) && isnan(y))) return false;
            } else if (isinf(x) || isinf(y)) {
                if (x != y) return false; /* an infinite tolerance must not match them */
            } else if (x != y && !(fabs(x - y) <= atol + rtol * fabs(y))) {
                return false;
            }
        }
        for (int d = a->ndim - 1; d >= 0; d--) {
            if (++idx[d] < a->shape[d]) {
                oa += a->strides[d];
                ob += b->strides[d];
                break;
            }
            oa -= a->strides[d] * (idx[d] - 1);
            ob -= b->strides[d] * (idx[d] - 1);
            idx[d] = 0;
        }
    }
    return true;
}
