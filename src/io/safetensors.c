/* Checkpoints in the safetensors format: an 8-byte little-endian header
 * length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__":
 * {string: string}}, then the raw little-endian data, offsets relative to the
 * end of the header. */
#include "../backend/backend.h"
#include "fileio.h"
#include "json.h"

#include <errno.h>
#include <stdlib.h>

/* The reference implementation refuses headers above 100 MB; so do we, so a
 * corrupt length cannot make us allocate gigabytes. */
#define ST_MAX_HEADER (100u << 20)

static const char *const st_dtype_names[CN_DTYPE_COUNT] = {"F32", "F64", "F16", "BF16",
                                                           "I32", "I64", "U8",  "BOOL", "I8"};

/* Chutney's saves carry a CRC-32C under this metadata key, checked on every
 * load: a bit flipped on disk or in a copy would otherwise load as a
 * slightly different model without a word. It covers the other metadata,
 * every tensor's entry and the data (see st_digest_*); files from other
 * writers have none and load unchecked. cn_load_safetensors does not list
 * it among the metadata. */
#define ST_CHECKSUM_KEY "chutney.crc32c"

static uint32_t st_digest_meta(uint32_t c, const char *key, const char *value) {
    c = cn_crc32c(c, key, strlen(key) + 1);
    return cn_crc32c(c, value, strlen(value) + 1);
}

static uint32_t st_digest_entry(uint32_t c, const char *name, cn_dtype dt, int ndim,
                                const int64_t *shape, uint64_t begin, uint64_t end) {
    c = cn_crc32c(c, name, strlen(name) + 1);
    c = cn_crc32c(c, st_dtype_names[dt], strlen(st_dtype_names[dt]) + 1);
    unsigned char b[8 * (CN_MAX_DIMS + 3)];
    size_t k = 0;
    uint64_t v[CN_MAX_DIMS + 3];
    v[k++] = (uint64_t)ndim;
    for (int d = 0; d < ndim; d++) v[k++] = (uint64_t)shape[d];
    v[k++] = begin;
    v[k++] = end;
    for (size_t i = 0; i < k; i++)
        for (int j = 0; j < 8; j++) b[8 * i + (size_t)j] = (unsigned char)(v[i] >> (8 * j));
    return cn_crc32c(c, b, 8 * k);
}

/* The CRC of n elements of esize bytes as they are stored: little-endian. */
static uint32_t st_digest_le(uint32_t c, const void *p, size_t n, size_t esize) {
    if (cn_host_is_le() || esize == 1) return cn_crc32c(c, p, n * esize);
    unsigned char buf[4096];
    const unsigned char *q = p;
    size_t per = sizeof buf / esize;
    while (n) {
        size_t k = n < per ? n : per;
        memcpy(buf, q, k * esize);
        cn_byteswap(buf, k, esize);
        c = cn_crc32c(c, buf, k * esize);
        q += k * esize;
        n -= k;
    }
    return c;
}

typedef struct st_entry {
    const char *name; /* points into the parsed header */
    cn_dtype dt;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    uint64_t begin, end;
} st_entry;

typedef struct st_file {
    FILE *f;
    cn_json *root;
    st_entry *e;
    int n;
    const cn_json *meta;
    uint64_t data_start, data_size;
} st_file;

static void st_close(st_file *h) {
    if (h->f) fclose(h->f);
    cn_json_free(h->root);
    free(h->e);
    memset(h, 0, sizeof *h);
}

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

static int cmp_entry_offsets(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The tensors' data must tile the data section exactly, as the reference
 * implementation requires: two tensors sharing bytes would load as one
 * value aliased (and a write through one would change the other), and
 * bytes no tensor claims (a gap, or trailing data) are either corruption
 * or something hidden in the file. */
static int check_layout(st_file *h, const char *fn, const char *path) {
    st_entry *e = malloc(sizeof *e * (size_t)(h->n ? h->n : 1));
    if (!e) return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    memcpy(e, h->e, sizeof *e * (size_t)h->n);
    qsort(e, (size_t)h->n, sizeof *e, cmp_entry_offsets);
    int status = CN_OK;
    uint64_t at = 0;
    for (int i = 0; i < h->n && status == CN_OK; i++) {
        if (e[i].begin < at)
            status = cn_failc(CN_EFORMAT,
                              "%s: '%s': the data of tensor '%.200s' [%llu, %llu) overlaps that "
                              "of tensor '%.200s' [%llu, %llu)",
                              fn, path, e[i].name, (unsigned long long)e[i].begin,
                              (unsigned long long)e[i].end, e[i - 1].name,
                              (unsigned long long)e[i - 1].begin, (unsigned long long)e[i - 1].end);
        else if (e[i].begin > at)
            status = cn_failc(CN_EFORMAT,
                              "%s: '%s': bytes [%llu, %llu) of the data, before tensor '%.200s', "
                              "belong to no tensor",
                              fn, path, (unsigned long long)at, (unsigned long long)e[i].begin,
                              e[i].name);
        at = e[i].end;
    }
    if (status == CN_OK && at != h->data_size)
        status = cn_failc(CN_EFORMAT,
                          "%s: '%s' has %llu trailing bytes after the data of %s%.200s%s (the "
                          "header accounts for %llu bytes of data, the file holds %llu)",
                          fn, path, (unsigned long long)(h->data_size - at),
                          h->n ? "tensor '" : "", h->n ? e[h->n - 1].name : "no tensor",
                          h->n ? "'" : "", (unsigned long long)at,
                          (unsigned long long)h->data_size);
    free(e);
    return status;
}

/* Checks the checksum a Chutney save wrote (none: nothing to check). */
static int st_verify(st_file *h, const char *fn, const char *path) {
    const char *want_s = NULL;
    uint32_t c = 0;
    for (size_t j = 0; h->meta && j < h->meta->n; j++) {
        if (strcmp(h->meta->keys[j], ST_CHECKSUM_KEY) == 0)
            want_s = h->meta->items[j].str;
        else
            c = st_digest_meta(c, h->meta->keys[j], h->meta->items[j].str);
    }
    if (!want_s) return CN_OK;
    char *end = NULL;
    unsigned long want = strtoul(want_s, &end, 16);
    if (strlen(want_s) != 8 || *end || want > 0xFFFFFFFFul)
        return cn_failc(CN_EFORMAT, "%s: '%s': its checksum \"%.40s\" is not 8 hex digits", fn,
                        path, want_s);
    for (int i = 0; i < h->n; i++) {
        const st_entry *e = &h->e[i];
        c = st_digest_entry(c, e->name, e->dt, e->ndim, e->shape, e->begin, e->end);
    }
    size_t cap = 1u << 20;
    unsigned char *buf = malloc(cap);
    if (!buf) return cn_failc(CN_ENOMEM, "%s: out of memory checking '%s'", fn, path);
    bool ok = fseeko(h->f, (off_t)h->data_start, SEEK_SET) == 0;
    for (uint64_t left = h->data_size; ok && left > 0;) {
        size_t k = left < cap ? (size_t)left : cap;
        ok = fread(buf, 1, k, h->f) == k;
        c = cn_crc32c(c, buf, k);
        left -= k;
    }
    free(buf);
    if (!ok)
        return cn_failc(CN_EIO, "%s: cannot read the data of '%s' (the file changed or is unreadable)",
                        fn, path);
    if (c != (uint32_t)want)
        return cn_failc(CN_EFORMAT,
                        "%s: '%s' is corrupt: its contents do not match the checksum it was saved "
                        "with (CRC-32C %08x, saved %s); the file was damaged after it was written",
                        fn, path, (unsigned)c, want_s);
    return CN_OK;
}

/* Opens path and checks its header completely (every entry's dtype, shape,
 * offsets against the file's size), without reading the data. */
static int st_open(const char *path, const char *fn, st_file *h) {
    memset(h, 0, sizeof *h);
    int64_t fsize;
    int ost = cn_fopen_regular(path, fn, &h->f, &fsize);
    if (ost != CN_OK) return ost;
    unsigned char lenb[8];
    if (fsize < 8 || fread(lenb, 1, 8, h->f) != 8) {
        st_close(h);
        return cn_failc(CN_EFORMAT,
                        "%s: '%s' is truncated: %lld bytes, less than the 8-byte header length", fn,
                        path, (long long)fsize);
    }
    uint64_t hlen = cn_rd_le64(lenb);
    if (hlen > ST_MAX_HEADER) {
        st_close(h);
        return cn_failc(CN_EFORMAT,
                        "%s: '%s' is not a safetensors file: its header length %llu is implausible "
                        "(more than %u bytes)",
                        fn, path, (unsigned long long)hlen, ST_MAX_HEADER);
    }
    if (hlen > (uint64_t)fsize - 8) {
        st_close(h);
        return cn_failc(CN_EFORMAT,
                        "%s: '%s' is truncated: the header length says %llu bytes, but only %lld "
                        "follow",
                        fn, path, (unsigned long long)hlen, (long long)fsize - 8);
    }
    char *hdr = malloc(hlen ? hlen : 1);
    if (!hdr) {
        st_close(h);
        return cn_failc(CN_ENOMEM, "%s: out of memory reading the header of '%s'", fn, path);
    }
    if (fread(hdr, 1, hlen, h->f) != hlen) {
        free(hdr);
        st_close(h);
        return cn_failc(CN_EIO, "%s: cannot read the header of '%s'", fn, path);
    }
    char jerr[300];
    h->root = cn_json_parse(hdr, hlen, jerr, sizeof jerr);
    free(hdr);
    if (!h->root) {
        st_close(h);
        return cn_failc(CN_EFORMAT, "%s: '%s' has a bad JSON header: %s", fn, path, jerr);
    }
    if (h->root->kind != CN_JSON_OBJECT) {
        st_close(h);
        return cn_failc(CN_EFORMAT, "%s: '%s' has a bad JSON header: not an object", fn, path);
    }
    h->data_start = 8 + hlen;
    h->data_size = (uint64_t)fsize - h->data_start;
    h->e = calloc(h->root->n ? h->root->n : 1, sizeof *h->e);
    if (!h->e) {
        st_close(h);
        return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    }
    int status = CN_OK;
    for (size_t k = 0; k < h->root->n && status == CN_OK; k++) {
        const char *name = h->root->keys[k];
        const cn_json *v = &h->root->items[k];
        if (h->root->key_lens[k] != strlen(name)) {
            status =
                cn_failc(CN_EFORMAT, "%s: '%s': a tensor name contains a NUL character", fn, path);
            break;
        }
        if (strcmp(name, "__metadata__") == 0) {
            if (h->meta) {
                status = cn_failc(CN_EFORMAT, "%s: '%s': \"__metadata__\" appears twice", fn, path);
                break;
            }
            if (v->kind != CN_JSON_OBJECT) {
                status =
                    cn_failc(CN_EFORMAT, "%s: '%s': \"__metadata__\" is not an object", fn, path);
                break;
            }
            for (size_t j = 0; j < v->n; j++)
                if (v->items[j].kind != CN_JSON_STRING || v->key_lens[j] != strlen(v->keys[j]) ||
                    v->items[j].len != strlen(v->items[j].str)) {
                    status = cn_failc(CN_EFORMAT,
                                      "%s: '%s': metadata \"%.100s\" is not a string without NULs",
                                      fn, path, v->keys[j]);
                    break;
                }
            h->meta = v;
            continue;
        }
        st_entry *e = &h->e[h->n];
        e->name = name;
        const cn_json *dt = cn_json_get(v, "dtype"), *sh = cn_json_get(v, "shape"),
                      *off = cn_json_get(v, "data_offsets");
        if (v->kind != CN_JSON_OBJECT || !dt || !sh || !off) {
            status = cn_failc(CN_EFORMAT,
                              "%s: '%s': the entry of tensor '%.200s' is not an object with dtype, "
                              "shape and data_offsets",
                              fn, path, name);
            break;
        }
        int d = -1;
        if (dt->kind == CN_JSON_STRING)
            for (int i = 0; i < CN_DTYPE_COUNT; i++)
                if (strcmp(dt->str, st_dtype_names[i]) == 0) d = i;
        if (d < 0) {
            status =
                cn_failc(dt->kind == CN_JSON_STRING ? CN_EUNSUPPORTED : CN_EFORMAT,
                         "%s: '%s': tensor '%.200s' has dtype %.40s, which Chutney does not "
                         "support (F32, F64, F16, BF16, I32, I64, U8, I8, BOOL)",
                         fn, path, name, dt->kind == CN_JSON_STRING ? dt->str : "(not a string)");
            break;
        }
        e->dt = (cn_dtype)d;
        if (sh->kind != CN_JSON_ARRAY || sh->n > CN_MAX_DIMS) {
            status =
                cn_failc(CN_EFORMAT,
                         "%s: '%s': the shape of tensor '%.200s' is not an array of at most %d "
                         "sizes",
                         fn, path, name, CN_MAX_DIMS);
            break;
        }
        e->ndim = (int)sh->n;
        /* numel * element size must not overflow: sizes are bounded by the
         * data it must describe, checked below against the file. */
        uint64_t bytes = cn_dsize(e->dt);
        bool overflow = false;
        for (int i = 0; i < e->ndim; i++) {
            const cn_json *s = &sh->items[i];
            if (s->kind != CN_JSON_NUMBER || !s->is_int || s->integer < 0) {
                status = cn_failc(CN_EFORMAT,
                                  "%s: '%s': the shape of tensor '%.200s' has a size that is not a "
                                  "non-negative integer",
                                  fn, path, name);
                break;
            }
            e->shape[i] = s->integer;
            if (s->integer && bytes > UINT64_MAX / (uint64_t)s->integer)
                overflow = true;
            else
                bytes *= (uint64_t)s->integer;
        }
        if (status != CN_OK) break;
        if (off->kind != CN_JSON_ARRAY || off->n != 2 || off->items[0].kind != CN_JSON_NUMBER ||
            off->items[1].kind != CN_JSON_NUMBER || !off->items[0].is_int ||
            !off->items[1].is_int || off->items[0].integer < 0 ||
            off->items[1].integer < off->items[0].integer) {
            status = cn_failc(CN_EFORMAT,
                              "%s: '%s': the data_offsets of tensor '%.200s' are not [begin, end] "
                              "with 0 <= begin <= end",
                              fn, path, name);
            break;
        }
        e->begin = (uint64_t)off->items[0].integer;
        e->end = (uint64_t)off->items[1].integer;
        if (overflow || e->end - e->begin != bytes) {
            char b[160];
            status = cn_failc(CN_EFORMAT,
                              "%s: '%s': tensor '%.200s' (%s %s) needs %llu bytes but its "
                              "data_offsets [%llu, %llu] hold %llu",
                              fn, path, name, st_dtype_names[e->dt],
                              cn_fmt_shape(b, sizeof b, e->ndim, e->shape),
                              (unsigned long long)bytes, (unsigned long long)e->begin,
                              (unsigned long long)e->end, (unsigned long long)(e->end - e->begin));
            break;
        }
        if (e->end > h->data_size) {
            status = cn_failc(CN_EFORMAT,
                              "%s: '%s' is truncated: tensor '%.200s' needs bytes [%llu, %llu) of "
                              "the data, but the file holds only %llu bytes of data",
                              fn, path, name, (unsigned long long)e->begin,
                              (unsigned long long)e->end, (unsigned long long)h->data_size);
            break;
        }
        h->n++;
    }
    if (status == CN_OK && h->n > 1) {
        /* Duplicate names: sort a copy. */
        st_entry *sorted = malloc(sizeof *sorted * (size_t)h->n);
        if (!sorted) {
            status = cn_failc(CN_ENOMEM, "%s: out of memory", fn);
        } else {
            memcpy(sorted, h->e, sizeof *sorted * (size_t)h->n);
            qsort(sorted, (size_t)h->n, sizeof *sorted, cmp_entry_name);
            for (int i = 1; i < h->n; i++)
                if (strcmp(sorted[i - 1].name, sorted[i].name) == 0) {
                    status = cn_failc(CN_EFORMAT, "%s: '%s': tensor '%.200s' appears twice", fn,
                                      path, sorted[i].name);
                    break;
                }
            free(sorted);
        }
    }
    if (status == CN_OK) status = check_layout(h, fn, path);
    if (status == CN_OK) status = st_verify(h, fn, path);
    if (status != CN_OK) st_close(h);
    return status;
}

/* Reads entry e's bytes into dst (contiguous, e's size). */
static int st_read(st_file *h, const st_entry *e, void *dst, const char *fn, const char *path) {
    size_t nbytes = (size_t)(e->end - e->begin);
    if (nbytes == 0) return CN_OK;
    if (fseeko(h->f, (off_t)(h->data_start + e->begin), SEEK_SET) != 0 ||
        fread(dst, 1, nbytes, h->f) != nbytes)
        return cn_failc(CN_EIO,
                        "%s: '%s': cannot read the data of tensor '%s' (the file changed or "
                        "is unreadable)",
                        fn, path, e->name);
    if (!cn_host_is_le()) cn_byteswap(dst, nbytes / cn_dsize(e->dt), cn_dsize(e->dt));
    return CN_OK;
}

/* ---- the loaded checkpoint ---- */

struct cn_checkpoint {
    int n, nmeta;
    char **names;
    cn_tensor **tensors;
    char **meta_keys, **meta_values;
};

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void cn_checkpoint_free(cn_checkpoint *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        free(c->names[i]);
        cn_release(c->tensors[i]);
    }
    for (int i = 0; i < c->nmeta; i++) {
        free(c->meta_keys[i]);
        free(c->meta_values[i]);
    }
    free(c->names);
    free(c->tensors);
    free(c->meta_keys);
    free(c->meta_values);
    free(c);
}

cn_checkpoint *cn_load_safetensors(const char *path) {
    static const char fn[] = "load_safetensors";
    st_file h;
    if (st_open(path, fn, &h) != CN_OK) return NULL;
    cn_checkpoint *c = calloc(1, sizeof *c);
    int nm = h.meta ? (int)h.meta->n : 0;
    if (c) {
        c->names = calloc((size_t)h.n + 1, sizeof *c->names);
        c->tensors = calloc((size_t)h.n + 1, sizeof *c->tensors);
        c->meta_keys = calloc((size_t)nm + 1, sizeof *c->meta_keys);
        c->meta_values = calloc((size_t)nm + 1, sizeof *c->meta_values);
    }
    if (!c || !c->names || !c->tensors || !c->meta_keys || !c->meta_values) {
        cn_checkpoint_free(c);
        st_close(&h);
        return cn_fail("%s: out of memory", fn);
    }
    for (int j = 0; j < nm; j++) {
        if (strcmp(h.meta->keys[j], ST_CHECKSUM_KEY) == 0) continue; /* checked: not the user's */
        int i = c->nmeta;
        c->meta_keys[i] = dupstr(h.meta->keys[j]);
        c->meta_values[i] = dupstr(h.meta->items[j].str);
        c->nmeta = i + 1;
        if (!c->meta_keys[i] || !c->meta_values[i]) {
            cn_checkpoint_free(c);
            st_close(&h);
            return cn_fail("%s: out of memory", fn);
        }
    }
    for (int i = 0; i < h.n; i++) {
        const st_entry *e = &h.e[i];
        cn_tensor *t = cn_t_empty(e->dt, e->ndim, e->shape);
        char *name = dupstr(e->name);
        if (!t || !name || st_read(&h, e, t->storage->data, fn, path) != CN_OK ||
            cn_set_name(t, e->name) != CN_OK) {
            if (!t || !name)
                cn_fail("%s: out of memory loading tensor '%s' of '%s'", fn, e->name, path);
            cn_release(t);
            free(name);
            cn_checkpoint_free(c);
            st_close(&h);
            return NULL;
        }
        c->names[i] = name;
        c->tensors[i] = t;
        c->n = i + 1;
    }
    st_close(&h);
    return c;
}

int cn_checkpoint_count(const cn_checkpoint *c) { return c ? c->n : CN_EINVAL; }

const char *cn_checkpoint_name(const cn_checkpoint *c, int i) {
    if (!c) return NULL;
    if (i < 0 || i >= c->n)
        return cn_fail("checkpoint_name: index %d out of range for %d tensors", i, c->n);
    return c->names[i];
}

cn_tensor *cn_checkpoint_tensor(const cn_checkpoint *c, int i) {
    if (!c) return NULL;
    if (i < 0 || i >= c->n)
        return cn_fail("checkpoint_tensor: index %d out of range for %d tensors", i, c->n);
    return c->tensors[i];
}

cn_tensor *cn_checkpoint_find(const cn_checkpoint *c, const char *name) {
    if (!c) return NULL;
    if (!name) return cn_fail("checkpoint_find: name is NULL");
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->names[i], name) == 0) return c->tensors[i];
    return cn_fail("checkpoint_find: no tensor named '%s' in the checkpoint (%d tensors)", name,
                   c->n);
}

int cn_checkpoint_metadata_count(const cn_checkpoint *c) { return c ? c->nmeta : CN_EINVAL; }

const char *cn_checkpoint_metadata_key(const cn_checkpoint *c, int i) {
    if (!c) return NULL;
    if (i < 0 || i >= c->nmeta)
        return cn_fail("checkpoint_metadata_key: index %d out of range for %d entries", i,
                       c->nmeta);
    return c->meta_keys[i];
}

const char *cn_checkpoint_metadata_value(const cn_checkpoint *c, int i) {
    if (!c) return NULL;
    if (i < 0 || i >= c->nmeta)
        return cn_fail("checkpoint_metadata_value: index %d out of range for %d entries", i,
                       c->nmeta);
    return c->meta_values[i];
}

const char *cn_checkpoint_metadata(const cn_checkpoint *c, const char *key) {
    if (!c || !key) return NULL;
    for (int i = 0; i < c->nmeta; i++)
        if (strcmp(c->meta_keys[i], key) == 0) return c->meta_values[i];
    return NULL;
}

/* ---- saving ---- */

static const char *tensor_name(const char *const *names, cn_tensor *const *tensors, int i) {
    if (names) return names[i];
    return tensors[i] ? cn_get_name(tensors[i]) : NULL;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Names given (or taken from the tensors) must be present, non-empty,
 * unique, and not the metadata key. */
static int check_names(const char *fn, const char *const *names, cn_tensor *const *tensors, int n) {
    if (n == 0) return CN_OK;
    const char **s = malloc(sizeof *s * (size_t)n);
    if (!s) return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    int status = CN_OK;
    for (int i = 0; i < n && status == CN_OK; i++) {
        s[i] = tensor_name(names, tensors, i);
        if (!s[i] || !*s[i])
            status = cn_failc(CN_EINVAL, "%s: tensor %d has no name%s", fn, i,
                              names ? "" : " (names is NULL, so each tensor needs cn_set_name)");
        else if (strcmp(s[i], "__metadata__") == 0)
            status = cn_failc(CN_EINVAL, "%s: \"__metadata__\" cannot name a tensor", fn);
    }
    if (status == CN_OK) {
        qsort(s, (size_t)n, sizeof *s, cmp_str);
        for (int i = 1; i < n && status == CN_OK; i++)
            if (strcmp(s[i - 1], s[i]) == 0)
                status = cn_failc(CN_EINVAL, "%s: the name '%s' is given twice", fn, s[i]);
    }
    free(s);
    return status;
}

int cn_save_safetensors(const char *path, const char *const *names, cn_tensor *const *tensors,
                        int n, const char *const *meta_keys, const char *const *meta_values,
                        int nmeta) {
    static const char fn[] = "save_safetensors";
    if (n < 0 || nmeta < 0) return cn_failc(CN_EINVAL, "%s: negative count", fn);
    if (n > 0 && !tensors) return cn_failc(CN_EINVAL, "%s: tensors is NULL", fn);
    if (nmeta > 0 && (!meta_keys || !meta_values))
        return cn_failc(CN_EINVAL, "%s: metadata keys or values are NULL", fn);
    for (int i = 0; i < n; i++) {
        if (!tensors[i]) return cn_failc(CN_EINVAL, "%s: tensor %d is NULL", fn, i);
        if (!tensors[i]->storage)
            return cn_failc(CN_EINVAL,
                            "%s: tensor %d is symbolic (a static graph value): it has no data", fn,
                            i);
    }
    int status = check_names(fn, names, tensors, n);
    if (status != CN_OK) return status;
    for (int i = 0; i < nmeta; i++) {
        if (!meta_keys[i] || !meta_values[i])
            return cn_failc(CN_EINVAL, "%s: metadata entry %d is NULL", fn, i);
        if (strcmp(meta_keys[i], ST_CHECKSUM_KEY) == 0)
            return cn_failc(CN_EINVAL, "%s: metadata key \"%s\" is reserved (the checksum)", fn,
                            ST_CHECKSUM_KEY);
    }

    /* The data as it will be written (host, contiguous), first for the
     * checksum that goes into the header before it. */
    cn_tensor **cs = calloc((size_t)(n ? n : 1), sizeof *cs);
    if (!cs) return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    uint32_t crc = 0;
    for (int i = 0; i < nmeta; i++) crc = st_digest_meta(crc, meta_keys[i], meta_values[i]);
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const cn_tensor *t = tensors[i];
        uint64_t nbytes =
            (uint64_t)cn_shape_numel(t->ndim, t->shape) * cn_dsize((cn_dtype)t->dtype);
        crc = st_digest_entry(crc, tensor_name(names, tensors, i), (cn_dtype)t->dtype, t->ndim,
                              t->shape, offset, offset + nbytes);
        offset += nbytes;
    }
    for (int i = 0; i < n; i++) {
        cs[i] = cn_t_host_contiguous(tensors[i]);
        if (!cs[i]) {
            status = cn_failc(CN_ENOMEM, "%s: out of memory copying tensor %d", fn, i);
            goto out;
        }
        crc = st_digest_le(crc, cn_t_ptr(cs[i]), (size_t)cn_shape_numel(cs[i]->ndim, cs[i]->shape),
                           cn_dsize((cn_dtype)cs[i]->dtype));
    }
    char crc_s[16];
    snprintf(crc_s, sizeof crc_s, "%08x", (unsigned)crc);

    /* The header. */
    char *hdr = NULL;
    size_t len = 0, cap = 0;
    int r = cn_json_append(&hdr, &len, &cap, "{\"__metadata__\":{", 17);
    for (int i = 0; i <= nmeta && !r; i++) {
        const char *key = i < nmeta ? meta_keys[i] : ST_CHECKSUM_KEY;
        const char *value = i < nmeta ? meta_values[i] : crc_s;
        if (i) r = cn_json_append(&hdr, &len, &cap, ",", 1);
        r = r ? r : cn_json_append_string(&hdr, &len, &cap, key);
        r = r ? r : cn_json_append(&hdr, &len, &cap, ":", 1);
        r = r ? r : cn_json_append_string(&hdr, &len, &cap, value);
        if (r == -1) {
            free(hdr);
            status = cn_failc(CN_EINVAL, "%s: metadata entry %d is not valid UTF-8", fn, i);
            goto out;
        }
    }
    r = r ? r : cn_json_append(&hdr, &len, &cap, "}", 1);
    offset = 0;
    for (int i = 0; i < n && !r; i++) {
        const cn_tensor *t = tensors[i];
        char buf[128];
        r = cn_json_append(&hdr, &len, &cap, ",", 1);
        r = r ? r : cn_json_append_string(&hdr, &len, &cap, tensor_name(names, tensors, i));
        if (r == -1) {
            free(hdr);
            status = cn_failc(CN_EINVAL, "%s: the name of tensor %d is not valid UTF-8", fn, i);
            goto out;
        }
        int k =
            snprintf(buf, sizeof buf, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_names[t->dtype]);
        r = r ? r : cn_json_append(&hdr, &len, &cap, buf, (size_t)k);
        for (int d = 0; d < t->ndim && !r; d++) {
            k = snprintf(buf, sizeof buf, "%s%lld", d ? "," : "", (long long)t->shape[d]);
            r = cn_json_append(&hdr, &len, &cap, buf, (size_t)k);
        }
        uint64_t nbytes =
            (uint64_t)cn_shape_numel(t->ndim, t->shape) * cn_dsize((cn_dtype)t->dtype);
        k = snprintf(buf, sizeof buf, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                     (unsigned long long)(offset + nbytes));
        r = r ? r : cn_json_append(&hdr, &len, &cap, buf, (size_t)k);
        offset += nbytes;
    }
    r = r ? r : cn_json_append(&hdr, &len, &cap, "}", 1);
    /* Pad with spaces so the data starts 8-byte aligned, as the reference
     * writer does (readers may then map the data in place). */
    while (!r && (len % 8) != 0)
        r = cn_json_append(&hdr, &len, &cap, " ", 1);
    if (r) {
        free(hdr);
        status = cn_failc(CN_ENOMEM, "%s: out of memory building the header", fn);
        goto out;
    }

    cn_afile af;
    status = cn_afile_open(&af, path, fn);
    if (status != CN_OK) {
        free(hdr);
        goto out;
    }
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++)
        lenb[i] = (unsigned char)((uint64_t)len >> (8 * i));
    bool ok = fwrite(lenb, 1, 8, af.f) == 8 && fwrite(hdr, 1, len, af.f) == len;
    free(hdr);
    for (int i = 0; i < n && ok; i++)
        ok = cn_write_le(af.f, cn_t_ptr(cs[i]), (size_t)cn_shape_numel(cs[i]->ndim, cs[i]->shape),
                         cn_dsize((cn_dtype)cs[i]->dtype)) == 0;
    if (!ok) {
        char eb[128];
        int err = errno;
        cn_afile_abort(&af);
        status = cn_failc(CN_EIO, "%s: writing '%s' failed: %s", fn, path,
                          cn_errno_str(err, eb, sizeof eb));
        goto out;
    }
    status = cn_afile_commit(&af, fn);
out:
    for (int i = 0; i < n; i++) cn_release(cs[i]);
    free(cs);
    return status;
}

/* ---- loading into existing tensors ---- */

/* Appends one problem to the message; counts those that do not fit. */
typedef struct problems {
    char msg[900];
    size_t len;
    int count, shown;
} problems;

static void problem(problems *p, const char *fmt, ...) CN_PRINTF(2, 3);
static void problem(problems *p, const char *fmt, ...) {
    p->count++;
    char one[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(one, sizeof one, fmt, ap);
    va_end(ap);
    size_t k = strlen(one);
    if (p->len + k + 3 >= sizeof p->msg - 40) return;
    if (p->len) {
        memcpy(p->msg + p->len, "; ", 2);
        p->len += 2;
    }
    memcpy(p->msg + p->len, one, k + 1);
    p->len += k;
    p->shown++;
}

static int find_entry(const st_entry *sorted, int n, const char *name) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(sorted[mid].name, name);
        if (c == 0) return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

int cn_load_safetensors_into(const char *path, const char *const *names, cn_tensor *const *tensors,
                             int n, unsigned flags) {
    static const char fn[] = "load_safetensors_into";
    if (n < 0) return cn_failc(CN_EINVAL, "%s: negative count", fn);
    if (n > 0 && !tensors) return cn_failc(CN_EINVAL, "%s: tensors is NULL", fn);
    for (int i = 0; i < n; i++) {
        if (!tensors[i]) return cn_failc(CN_EINVAL, "%s: tensor %d is NULL", fn, i);
        if (!tensors[i]->storage)
            return cn_failc(CN_EINVAL, "%s: tensor %d is symbolic (a static graph value)", fn, i);
    }
    int status = check_names(fn, names, tensors, n);
    if (status != CN_OK) return status;
    st_file h;
    status = st_open(path, fn, &h);
    if (status != CN_OK) return status;

    /* Match names both ways, collecting every problem before touching any
     * destination. */
    st_entry *sorted = malloc(sizeof *sorted * (size_t)(h.n ? h.n : 1));
    bool *used = calloc((size_t)(h.n ? h.n : 1), sizeof *used);
    int *match = malloc(sizeof *match * (size_t)(n ? n : 1));
    if (!sorted || !used || !match) {
        free(sorted);
        free(used);
        free(match);
        st_close(&h);
        return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    }
    memcpy(sorted, h.e, sizeof *sorted * (size_t)h.n);
    qsort(sorted, (size_t)h.n, sizeof *sorted, cmp_entry_name);
    problems pr = {.len = 0};
    for (int i = 0; i < n; i++) {
        const char *name = tensor_name(names, tensors, i);
        const cn_tensor *t = tensors[i];
        int j = find_entry(sorted, h.n, name);
        match[i] = j;
        if (j < 0) {
            if (!(flags & CN_CKPT_ALLOW_MISSING)) problem(&pr, "missing '%s'", name);
            continue;
        }
        used[j] = true;
        const st_entry *e = &sorted[j];
        bool same = e->ndim == t->ndim;
        for (int d = 0; same && d < e->ndim; d++)
            same = e->shape[d] == t->shape[d];
        if (!same) {
            char b1[160], b2[160];
            problem(&pr, "'%s' has shape %s in the file but %s here", name,
                    cn_fmt_shape(b1, sizeof b1, e->ndim, e->shape),
                    cn_fmt_shape(b2, sizeof b2, t->ndim, t->shape));
        }
        if (e->dt != (cn_dtype)t->dtype)
            problem(&pr, "'%s' is %s in the file but %s here", name, cn_dtype_name(e->dt),
                    cn_dtype_name((cn_dtype)t->dtype));
    }
    if (!(flags & CN_CKPT_ALLOW_UNEXPECTED))
        for (int j = 0; j < h.n; j++)
            if (!used[j]) problem(&pr, "unexpected '%s'", sorted[j].name);
    if (pr.count) {
        if (pr.shown < pr.count)
            status = cn_failc(CN_EINVAL, "%s: '%s' does not match: %s; ... (%d problems in all)",
                              fn, path, pr.msg, pr.count);
        else
            status = cn_failc(CN_EINVAL, "%s: '%s' does not match: %s", fn, path, pr.msg);
    }
    /* Read each tensor into its destination: directly when it is
     * contiguous, through a temporary otherwise. */
    for (int i = 0; i < n && status == CN_OK; i++) {
        if (match[i] < 0) continue;
        const st_entry *e = &sorted[match[i]];
        cn_tensor *dst = tensors[i];
        if (cn_is_contiguous(dst)) {
            status = st_read(&h, e, cn_t_ptr(dst), fn, path);
        } else {
            cn_tensor *tmp = cn_t_empty(e->dt, e->ndim, e->shape);
            if (!tmp) {
                status = CN_ENOMEM;
                break;
            }
            status = st_read(&h, e, tmp->storage->data, fn, path);
            if (status == CN_OK) status = cn_transfer(dst, tmp, false) < 0 ? CN_ENOMEM : CN_OK;
            cn_release(tmp);
        }
        cn_storage_bump(dst->storage);
    }
    free(sorted);
    free(used);
    free(match);
    st_close(&h);
    return status;
}
