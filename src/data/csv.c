/* CSV with numeric cells to a 2-D tensor. The whole file is read into
 * memory and parsed twice: once to count rows and columns and check every
 * cell, once to fill the tensor. */
#include "../io/fileio.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

typedef struct cell {
    const char *s; /* trimmed, unquoted */
    size_t n;
} cell;

/* Splits line [p, end) at delim into cells; returns the count, or -1 for an
 * unterminated quote. Quoted cells may contain the delimiter. Calls f on
 * each cell. */
typedef bool (*cell_fn)(void *ctx, int64_t col, cell c);

static int64_t split(const char *p, const char *end, char delim, cell_fn f, void *ctx) {
    int64_t col = 0;
    for (;;) {
        const char *s = p;
        while (s < end && (*s == ' ' || *s == '\t') && *s != delim)
            s++;
        cell c;
        const char *next;
        if (s < end && *s == '"') {
            const char *q = memchr(s + 1, '"', (size_t)(end - s - 1));
            if (!q) return -1;
            c.s = s + 1;
            c.n = (size_t)(q - s - 1);
            next = q + 1;
            while (next < end && *next != delim)
                next++;
        } else {
            next = memchr(s, delim, (size_t)(end - s));
            if (!next) next = end;
            const char *e = next;
            while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
            c.s = s;
            c.n = (size_t)(e - s);
        }
        if (f && !f(ctx, col, c)) return -2;
        col++;
        if (next >= end) break;
        p = next + 1;
    }
    return col;
}

/* Parses a cell as dt. */
static bool parse_cell(cell c, cn_dtype dt, double *d, int64_t *i) {
    char buf[128];
    if (c.n == 0 || c.n >= sizeof buf) return false;
    memcpy(buf, c.s, c.n);
    buf[c.n] = '\0';
    char *endp;
    errno = 0;
    if (dt == CN_I32 || dt == CN_I64) {
        long long v = strtoll(buf, &endp, 10);
        if (*endp || errno == ERANGE) return false;
        if (dt == CN_I32 && (v < INT32_MIN || v > INT32_MAX)) return false;
        *i = v;
        return true;
    }
    *d = strtod(buf, &endp);
    /* Hex floats are C, not CSV; overflow to inf is refused. */
    return !*endp && !(errno == ERANGE && isinf(*d)) && !strpbrk(buf, "xX");
}

typedef struct scan {
    cn_dtype dt;
    const char *path;
    int64_t line;
    int64_t bad_col; /* first bad cell (1-based), 0 if none */
    cell bad;
    void *out; /* fill pass */
    int64_t row, ncols;
} scan;

static bool check_cell(void *ctx, int64_t col, cell c) {
    scan *s = ctx;
    double d;
    int64_t i;
    if (!parse_cell(c, s->dt, &d, &i)) {
        s->bad_col = col + 1;
        s->bad = c;
        return false;
    }
    return true;
}

static bool fill_cell(void *ctx, int64_t col, cell c) {
    scan *s = ctx;
    double d = 0;
    int64_t i = 0;
    parse_cell(c, s->dt, &d, &i);
    int64_t k = s->row * s->ncols + col;
    switch (s->dt) {
    case CN_F32: ((float *)s->out)[k] = (float)d; break;
    case CN_F64: ((double *)s->out)[k] = d; break;
    case CN_I32: ((int32_t *)s->out)[k] = (int32_t)i; break;
    default: ((int64_t *)s->out)[k] = i; break;
    }
    return true;
}

/* For guessing a header: a cell no number starts ("x", "label"), as
 * opposed to a malformed number ("1e999", "2x"), which is an error. */
static bool textual_cell(void *ctx, int64_t col, cell c) {
    char buf[64];
    size_t k = c.n < sizeof buf - 1 ? c.n : sizeof buf - 1;
    memcpy(buf, c.s, k);
    buf[k] = '\0';
    char *endp;
    strtod(buf, &endp);
    if (c.n > 0 && endp == buf) {
        *(bool *)ctx = true;
        return false;
    }
    return true;
}

static bool blank(const char *p, const char *e) {
    for (; p < e; p++)
        if (*p != ' ' && *p != '\t') return false;
    return true;
}

cn_tensor *cn_load_csv(const char *path, const cn_csv_opts *opts) {
    static const char fn[] = "load_csv";
    cn_csv_opts o = opts ? *opts : (cn_csv_opts){0};
    char delim = o.delimiter ? o.delimiter : ',';
    if (!path) return cn_fail("%s: path is NULL", fn);
    if (o.dtype != CN_F32 && o.dtype != CN_F64 && o.dtype != CN_I32 && o.dtype != CN_I64)
        return cn_fail("%s: dtype %s is not supported (f32, f64, i32, i64)", fn,
                       cn_dtype_name(o.dtype));
    if (o.header < CN_CSV_HEADER_AUTO || o.header > CN_CSV_HEADER_NO)
        return cn_fail("%s: header %d is not one of CN_CSV_HEADER_AUTO/YES/NO", fn, o.header);
    if (delim == '"' || delim == '\n' || delim == '\r')
        return cn_fail("%s: the delimiter cannot be a quote or a line break", fn);
    FILE *f;
    if (cn_fopen_regular(path, fn, &f, NULL) != CN_OK) return NULL;
    /* Read it all (the size may change while it is read). */
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    bool rerr = ferror(f);
    fclose(f);
    if (!buf) return cn_fail("%s: out of memory reading '%s'", fn, path);
    if (rerr) {
        free(buf);
        return cn_fail("%s: error reading '%s'", fn, path);
    }
    if (memchr(buf, '\0', n)) {
        free(buf);
        return cn_fail("%s: '%s' contains NUL bytes: not a text file", fn, path);
    }
    const char *end = buf + n;
    /* Skip a UTF-8 byte order mark. */
    const char *start = n >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0 ? buf + 3 : buf;

    scan s = {.dt = o.dtype, .path = path};
    int64_t rows = 0, cols = -1, first_line = 0;
    bool header_seen = false;
    cn_tensor *t = NULL;
    for (int pass = 0; pass < 2; pass++) {
        s.line = 0;
        s.row = 0;
        header_seen = false;
        for (const char *p = start; p < end;) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const char *le = nl ? nl : end;
            const char *next = nl ? nl + 1 : end;
            if (le > p && le[-1] == '\r') le--;
            s.line++;
            if (blank(p, le)) {
                p = next;
                continue;
            }
            if (!header_seen) {
                header_seen = true;
                first_line = s.line;
                bool is_header = o.header == CN_CSV_HEADER_YES;
                if (o.header == CN_CSV_HEADER_AUTO) split(p, le, delim, textual_cell, &is_header);
                if (is_header) {
                    if (pass == 0) {
                        int64_t hc = split(p, le, delim, NULL, NULL);
                        if (hc < 0) {
                            free(buf);
                            return cn_fail("%s: '%s' line %lld: unterminated quote", fn, path,
                                           (long long)s.line);
                        }
                        cols = hc;
                    }
                    p = next;
                    continue;
                }
            }
            if (pass == 0) {
                s.bad_col = 0;
                int64_t c = split(p, le, delim, check_cell, &s);
                if (c == -1) {
                    free(buf);
                    return cn_fail("%s: '%s' line %lld: unterminated quote", fn, path,
                                   (long long)s.line);
                }
                if (c == -2) {
                    int k = (int)(s.bad.n > 40 ? 40 : s.bad.n);
                    const char *what = s.bad.n == 0 ? "is empty" : "is not a number";
                    if (s.bad.n && (o.dtype == CN_I32 || o.dtype == CN_I64)) {
                        what = o.dtype == CN_I32 ? "is not an integer in i32's range"
                                                 : "is not an integer in i64's range";
                    }
                    cn_fail("%s: '%s' line %lld, column %lld: the cell \"%.*s%s\" %s", fn, path,
                            (long long)s.line, (long long)s.bad_col, k, s.bad.s,
                            s.bad.n > 40 ? "..." : "", what);
                    free(buf);
                    return NULL;
                }
                if (cols < 0)
                    cols = c;
                else if (c != cols) {
                    free(buf);
                    return cn_fail("%s: '%s' line %lld has %lld columns, but line %lld has %lld",
                                   fn, path, (long long)s.line, (long long)c, (long long)first_line,
                                   (long long)cols);
                }
                rows++;
            } else {
                split(p, le, delim, fill_cell, &s);
                s.row++;
            }
            p = next;
        }
        if (pass == 0) {
            int64_t shape[2] = {rows, cols < 0 ? 0 : cols};
            t = cn_t_empty(o.dtype, 2, shape);
            if (!t) {
                free(buf);
                return NULL;
            }
            s.out = t->storage->data;
            s.ncols = shape[1];
        }
    }
    free(buf);
    return cn_scope_add(t);
}
