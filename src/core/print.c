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

#define EDGE 3            /* items shown at each end of a summarised axis */
#define SUMMARY_NUMEL 1000/* above this, long axes are summarised */

typedef struct fmt_info {
    bool is_float, int_valued, sci;
    int width;
    int prec;
} fmt_info;

static void fmt_value(char *out, size_t n, double v, cn_dtype dt, const fmt_info *f) {
    if (dt == CN_BOOL) {
        snprintf(out, n, "%s", v != 0 ? "true" : "false");
    } else if (!f->is_float) {
        snprintf(out, n, "%.0f", v);
    } else if (isnan(v)) {
        snprintf(out, n, "nan");
    } else if (isinf(v)) {
        snprintf(out, n, v > 0 ? "inf" : "-inf");
    } else if (f->sci) {
        snprintf(out, n, "%.*e", f->prec, v);
    } else if (f->int_valued) {
        snprintf(out, n, "%.0f.", v);
    } else {
        snprintf(out, n, "%.*f", f->prec, v);
    }
}

typedef struct print_ctx {
    const cn_tensor *t;
    sbuf *b;
    fmt_info f;
    bool summarise;
    int indent;
} print_ctx;

static void print_rec(print_ctx *c, int dim, int64_t off) {
    const cn_tensor *t = c->t;
    if (dim == t->ndim) {
        char v[64];
        fmt_value(v, sizeof v, cn_load_f64(t->storage->data, (cn_dtype)t->dtype, off),
                  (cn_dtype)t->dtype, &c->f);
        size_t len = strlen(v);
        for (size_t k = len; k < (size_t)c->f.width; k++) sb_put(c->b, " ", 1);
        sb_put(c->b, v, len);
        return;
    }
    int64_t n = t->shape[dim];
    sb_put(c->b, "[", 1);
    for (int64_t i = 0; i < n; i++) {
        if (c->summarise && n > 2 * EDGE && i == EDGE) {
            if (dim == t->ndim - 1) {
                sb_put(c->b, " ...,", 5);
            } else {
                sb_put(c->b, "\n", 1);
                for (int k = 0; k < c->indent + dim + 1; k++) sb_put(c->b, " ", 1);
                sb_put(c->b, "...,", 4);
            }
            i = n - EDGE;
        }
        if (i > 0) {
            if (dim == t->ndim - 1) {
                sb_put(c->b, " ", 1);
            } else {
                for (int k = dim; k < t->ndim - 1; k++) sb_put(c->b, "\n", 1);
                for (int k = 0; k < c->indent + dim + 1; k++) sb_put(c->b, " ", 1);
            }
        }
        print_rec(c, dim + 1, off + i * t->strides[dim]);
        if (i + 1 < n) sb_put(c->b, ",", 1);
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
        sb_printf(&b, "tensor(symbolic, shape=%s, dtype=%s)", cn_fmt_shape(sh, sizeof sh, t->ndim, t->shape),
                  cn_dtype_name(dt));
        return b.p;
    }
    print_ctx c = {.t = t, .b = &b, .indent = 7};
    c.f.is_float = cn_dtype_is_float(dt);
    int64_t numel = cn_shape_numel(t->ndim, t->shape);
    c.summarise = numel > SUMMARY_NUMEL;
    /* Choose one format for all elements, from the finite values' range. */
    double amax = 0, amin = INFINITY;
    bool int_valued = true, any = false;
    FOR_EACH_OFFSET(t, off, {
        double v = cn_load_f64(t->storage->data, dt, off);
        if (isfinite(v)) {
            double a = fabs(v);
            if (a > amax) amax = a;
            if (a > 0 && a < amin) amin = a;
            if (v != floor(v)) int_valued = false;
            any = true;
        }
    });
    c.f.prec = 4;
    c.f.int_valued = int_valued;
    if (c.f.is_float && any && (amax >= 1e8 || (amin < 1e-4 && !int_valued) ||
                                (amax / (amin < INFINITY ? amin : 1) > 1e3 && !int_valued && amax >= 1e3))) {
        c.f.sci = true;
    }
    c.f.width = 1;
    FOR_EACH_OFFSET(t, off, {
        char v[64];
        fmt_value(v, sizeof v, cn_load_f64(t->storage->data, dt, off), dt, &c.f);
        int len = (int)strlen(v);
        if (len > c.f.width) c.f.width = len;
    });
    sb_printf(&b, "tensor(");
    if (t->ndim == 0) {
        c.f.width = 0;
        print_rec(&c, 0, t->offset);
    } else if (numel == 0) {
        sb_printf(&b, "[], shape=%s", cn_fmt_shape(sh, sizeof sh, t->ndim, t->shape));
    } else {
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
    bool ints = !cn_dtype_is_float((cn_dtype)a->dtype) && !cn_dtype_is_float((cn_dtype)b->dtype);
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
