/* NumPy .npy files: the magic "\x93NUMPY", a version, a header length (2
 * bytes in version 1, 4 in versions 2 and 3), a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
 * spaces and a newline, then the raw data. */
#include "fileio.h"

#include <errno.h>
#include <stdlib.h>

#define NPY_MAX_HEADER (1u << 20)

typedef struct npy_header {
    char descr[32];
    bool fortran;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    bool have_descr, have_fortran, have_shape;
} npy_header;

typedef struct lexer {
    const char *s;
    size_t n, pos;
} lexer;

static void lx_ws(lexer *l) {
    while (l->pos < l->n && (l->s[l->pos] == ' ' || l->s[l->pos] == '\t' || l->s[l->pos] == '\n' ||
                             l->s[l->pos] == '\r'))
        l->pos++;
}

static bool lx_char(lexer *l, char c) {
    lx_ws(l);
    if (l->pos < l->n && l->s[l->pos] == c) {
        l->pos++;
        return true;
    }
    return false;
}

/* A quoted Python string (no escapes: descr and keys never need them). */
static bool lx_string(lexer *l, char *out, size_t cap) {
    lx_ws(l);
    if (l->pos >= l->n || (l->s[l->pos] != '\'' && l->s[l->pos] != '"')) return false;
    char q = l->s[l->pos++];
    size_t k = 0;
    while (l->pos < l->n && l->s[l->pos] != q) {
        if (l->s[l->pos] == '\\' || k + 1 >= cap) return false;
        out[k++] = l->s[l->pos++];
    }
    if (l->pos >= l->n) return false;
    l->pos++;
    out[k] = '\0';
    return true;
}

static bool lx_word(lexer *l, const char *w) {
    lx_ws(l);
    size_t k = strlen(w);
    if (l->n - l->pos >= k && memcmp(l->s + l->pos, w, k) == 0) {
        l->pos += k;
        return true;
    }
    return false;
}

static bool lx_int(lexer *l, int64_t *v) {
    lx_ws(l);
    if (l->pos >= l->n || l->s[l->pos] < '0' || l->s[l->pos] > '9') return false;
    int64_t acc = 0;
    while (l->pos < l->n && l->s[l->pos] >= '0' && l->s[l->pos] <= '9') {
        int d = l->s[l->pos++] - '0';
        if (acc > (INT64_MAX - d) / 10) return false;
        acc = acc * 10 + d;
    }
    if (l->pos < l->n && l->s[l->pos] == 'L') l->pos++; /* Python 2 longs */
    *v = acc;
    return true;
}

/* Parses the dict; returns NULL or what was wrong. */
static const char *parse_header(const char *s, size_t n, npy_header *h) {
    lexer l = {s, n, 0};
    memset(h, 0, sizeof *h);
    if (!lx_char(&l, '{')) return "the header is not a Python dict";
    for (;;) {
        if (lx_char(&l, '}')) break;
        char key[32];
        if (!lx_string(&l, key, sizeof key)) return "expected a quoted key in the header";
        if (!lx_char(&l, ':')) return "expected ':' in the header";
        if (strcmp(key, "descr") == 0) {
            if (!lx_string(&l, h->descr, sizeof h->descr))
                return "'descr' is not a simple dtype string (structured dtypes are not supported)";
            h->have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (lx_word(&l, "True"))
                h->fortran = true;
            else if (lx_word(&l, "False"))
                h->fortran = false;
            else
                return "'fortran_order' is not True or False";
            h->have_fortran = true;
        } else if (strcmp(key, "shape") == 0) {
            if (!lx_char(&l, '(')) return "'shape' is not a tuple";
            h->ndim = 0;
            while (!lx_char(&l, ')')) {
                int64_t v;
                if (h->ndim >= CN_MAX_DIMS) return "'shape' has more than 8 axes";
                if (!lx_int(&l, &v)) return "'shape' holds something other than sizes";
                h->shape[h->ndim++] = v;
                if (!lx_char(&l, ',')) {
                    if (!lx_char(&l, ')')) return "'shape' is not a tuple of sizes";
                    break;
                }
            }
            h->have_shape = true;
        } else {
            return "the header has an unknown key";
        }
        if (!lx_char(&l, ',')) {
            if (!lx_char(&l, '}')) return "expected ',' or '}' in the header";
            break;
        }
    }
    lx_ws(&l);
    if (l.pos != l.n) return "characters after the header dict";
    if (!h->have_descr || !h->have_fortran || !h->have_shape)
        return "the header lacks 'descr', 'fortran_order' or 'shape'";
    return NULL;
}

/* '<f4' -> f32 etc.; swap says the file's byte order is not the host's. */
static bool descr_dtype(const char *d, cn_dtype *dt, bool *swap) {
    if (strlen(d) < 3) return false;
    char order = d[0];
    const char *t = d + 1;
    static const struct {
        const char *code;
        cn_dtype dt;
    } map[] = {{"f4", CN_F32}, {"f8", CN_F64}, {"f2", CN_F16}, {"i4", CN_I32},
               {"i8", CN_I64}, {"u1", CN_U8},  {"b1", CN_BOOL}, {"i1", CN_I8}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(t, map[i].code) != 0) continue;
        bool one = cn_dsize(map[i].dt) == 1;
        if (order == '|' && !one) return false;
        if (order != '<' && order != '>' && order != '|' && order != '=') return false;
        *dt = map[i].dt;
        *swap = !one && ((order == '<' && !cn_host_is_le()) || (order == '>' && cn_host_is_le()));
        return true;
    }
    return false;
}

cn_tensor *cn_load_npy(const char *path) {
    static const char fn[] = "load_npy";
    if (!path) return cn_fail("%s: path is NULL", fn);
    FILE *f;
    int64_t fsize;
    if (cn_fopen_regular(path, fn, &f, &fsize) != CN_OK) return NULL;
    unsigned char pre[12];
    size_t got = fread(pre, 1, 10, f);
    if (got < 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        fclose(f);
        if (got >= 6 && memcmp(pre, "\x93NUMPY", 6) == 0)
            return cn_fail("%s: '%s' is truncated: %zu bytes, less than the .npy preamble", fn,
                           path, got);
        return cn_fail("%s: '%s' is not a .npy file (bad magic)", fn, path);
    }
    int major = pre[6];
    uint32_t hlen;
    size_t preamble;
    if (major == 1) {
        hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
        preamble = 10;
    } else if (major == 2 || major == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            fclose(f);
            return cn_fail("%s: '%s' is truncated in its preamble", fn, path);
        }
        hlen = cn_rd_le32(pre + 8);
        preamble = 12;
    } else {
        fclose(f);
        return cn_fail("%s: '%s' has .npy format version %d.%d, which is not supported (1 to 3)",
                       fn, path, major, pre[7]);
    }
    if (hlen > NPY_MAX_HEADER) {
        fclose(f);
        return cn_fail("%s: '%s' has an implausible header length %u", fn, path, hlen);
    }
    char *hdr = malloc(hlen + 1);
    if (!hdr) {
        fclose(f);
        return cn_fail("%s: out of memory", fn);
    }
    if (fread(hdr, 1, hlen, f) != hlen) {
        free(hdr);
        fclose(f);
        return cn_fail("%s: '%s' is truncated in its header", fn, path);
    }
    hdr[hlen] = '\0';
    npy_header h;
    const char *why = parse_header(hdr, hlen, &h);
    free(hdr);
    if (why) {
        fclose(f);
        return cn_fail("%s: '%s' has a bad header: %s", fn, path, why);
    }
    cn_dtype dt;
    bool swap;
    if (!descr_dtype(h.descr, &dt, &swap)) {
        fclose(f);
        return cn_fail(
            "%s: '%s' has dtype '%s', which is not supported (f4, f8, f2, i4, i8, u1, i1, b1)", fn,
            path, h.descr);
    }
    /* Check the size before allocating, so a corrupt shape cannot ask for
     * terabytes. */
    uint64_t numel = 1;
    bool big = false;
    for (int i = 0; i < h.ndim; i++) {
        if (h.shape[i] && numel > UINT64_MAX / 16 / (uint64_t)h.shape[i])
            big = true;
        else
            numel *= (uint64_t)h.shape[i];
    }
    uint64_t nbytes = numel * cn_dsize(dt),
             have = fsize < 0 ? 0 : (uint64_t)fsize - preamble - hlen;
    char b[160];
    if (big || (fsize >= 0 && have < nbytes)) {
        fclose(f);
        return cn_fail(
            "%s: '%s' is truncated: shape %s of %s needs %llu bytes of data, the file has "
            "%llu",
            fn, path, cn_fmt_shape(b, sizeof b, h.ndim, h.shape), cn_dtype_name(dt),
            (unsigned long long)nbytes, (unsigned long long)have);
    }
    if (fsize >= 0 && have > nbytes) {
        fclose(f);
        return cn_fail("%s: '%s' has %llu bytes after the data of shape %s (corrupt or not a .npy "
                       "file)",
                       fn, path, (unsigned long long)(have - nbytes),
                       cn_fmt_shape(b, sizeof b, h.ndim, h.shape));
    }
    /* Fortran order is C order of the reversed shape, transposed back. */
    int64_t fshape[CN_MAX_DIMS];
    for (int i = 0; i < h.ndim; i++)
        fshape[i] = h.fortran ? h.shape[h.ndim - 1 - i] : h.shape[i];
    cn_tensor *t = cn_t_empty(dt, h.ndim, fshape);
    if (!t) {
        fclose(f);
        return NULL;
    }
    if (fread(t->storage->data, 1, nbytes, f) != nbytes) {
        cn_release(t);
        fclose(f);
        return cn_fail("%s: '%s' is truncated: could not read %llu bytes of data", fn, path,
                       (unsigned long long)nbytes);
    }
    fclose(f);
    if (swap) cn_byteswap(t->storage->data, numel, cn_dsize(dt));
    if (dt == CN_BOOL) {
        /* Only 0 and 1 are valid bool bytes. */
        unsigned char *p = t->storage->data;
        for (uint64_t i = 0; i < numel; i++)
            p[i] = p[i] != 0;
    }
    if (h.fortran && h.ndim > 1) {
        int perm[CN_MAX_DIMS];
        for (int i = 0; i < h.ndim; i++)
            perm[i] = h.ndim - 1 - i;
        cn_tensor *v = cn_t_alias(t);
        cn_release(t);
        if (!v) return NULL;
        int64_t cs[CN_MAX_DIMS];
        cn_contiguous_strides(h.ndim, fshape, cs);
        for (int i = 0; i < h.ndim; i++) {
            v->shape[i] = fshape[perm[i]];
            v->strides[i] = cs[perm[i]];
        }
        v->flags |= CN_TF_LEAF;
        t = cn_t_host_contiguous(v);
        cn_release(v);
        if (!t) return NULL;
    }
    return cn_scope_add(t);
}

static const char *npy_descr(cn_dtype dt) {
    bool le = cn_host_is_le();
    switch (dt) {
    case CN_F32: return le ? "<f4" : ">f4";
    case CN_F64: return le ? "<f8" : ">f8";
    case CN_F16: return le ? "<f2" : ">f2";
    case CN_I32: return le ? "<i4" : ">i4";
    case CN_I64: return le ? "<i8" : ">i8";
    case CN_U8: return "|u1";
    case CN_I8: return "|i1";
    case CN_BOOL: return "|b1";
    default: return NULL;
    }
}

int cn_save_npy(const char *path, const cn_tensor *t) {
    static const char fn[] = "save_npy";
    if (!t) return CN_EINVAL;
    if (!t->storage)
        return cn_failc(CN_EINVAL, "%s: the tensor is symbolic (a static graph value)", fn);
    const char *descr = npy_descr((cn_dtype)t->dtype);
    if (!descr)
        return cn_failc(CN_EUNSUPPORTED, "%s: NumPy has no %s dtype; cast to f32 first", fn,
                        cn_dtype_name((cn_dtype)t->dtype));
    char dict[512];
    int k =
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < t->ndim; i++)
        k += snprintf(dict + k, sizeof dict - (size_t)k, "%lld,%s", (long long)t->shape[i],
                      i + 1 < t->ndim ? " " : "");
    k += snprintf(dict + k, sizeof dict - (size_t)k, "), }");
    /* The data starts on a 64-byte boundary, as NumPy writes it. */
    size_t total = 10 + (size_t)k + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)k + pad + 1;
    unsigned char pre[10] = {0x93,
                             'N',
                             'U',
                             'M',
                             'P',
                             'Y',
                             1,
                             0,
                             (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    cn_afile af;
    int status = cn_afile_open(&af, path, fn);
    if (status != CN_OK) return status;
    bool ok = fwrite(pre, 1, 10, af.f) == 10 && fwrite(dict, 1, (size_t)k, af.f) == (size_t)k;
    for (size_t i = 0; ok && i < pad; i++)
        ok = fputc(' ', af.f) != EOF;
    ok = ok && fputc('\n', af.f) != EOF;
    cn_tensor *c = ok ? cn_t_host_contiguous((cn_tensor *)t) : NULL;
    if (ok && !c) {
        cn_afile_abort(&af);
        return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    }
    if (ok) {
        size_t n = (size_t)cn_shape_numel(c->ndim, c->shape), es = cn_dsize((cn_dtype)c->dtype);
        ok = fwrite(cn_t_ptr(c), es, n, af.f) == n;
        cn_release(c);
    }
    if (!ok) {
        char eb[128];
        int err = errno;
        cn_afile_abort(&af);
        return cn_failc(CN_EIO, "%s: writing '%s' failed: %s", fn, path,
                        cn_errno_str(err, eb, sizeof eb));
    }
    return cn_afile_commit(&af, fn);
}
