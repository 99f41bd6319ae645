/* IDX files (MNIST, Fashion-MNIST): two zero bytes, a type code, the rank,
 * rank big-endian 32-bit sizes, then the big-endian data. Often gzipped. */
#include "../io/fileio.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef CN_HAVE_ZLIB
#include <zlib.h>
#endif

/* A byte source: a plain FILE, or a gzip stream. */
typedef struct source {
    FILE *f;
#ifdef CN_HAVE_ZLIB
    gzFile gz;
#endif
    bool gzip;
    int64_t size; /* of a plain file, else -1 */
    const char *path;
    char msg[200]; /* zlib's message, copied: it dies with the stream */
} source;

static const char fn_idx[] = "load_idx";

static int src_open(source *s, const char *path) {
    memset(s, 0, sizeof *s);
    s->path = path;
    int st = cn_fopen_regular(path, fn_idx, &s->f, &s->size);
    if (st != CN_OK) return st;
    unsigned char m[2] = {0, 0};
    size_t got = fread(m, 1, 2, s->f);
    s->gzip = got == 2 && m[0] == 0x1f && m[1] == 0x8b;
    if (!s->gzip) {
        rewind(s->f);
        return CN_OK;
    }
#ifdef CN_HAVE_ZLIB
    /* zlib reads the descriptor already checked to be a regular file, not
     * the path again (which could have been swapped for a FIFO since). */
    char eb[128];
    int fd = dup(fileno(s->f));
    fclose(s->f);
    s->f = NULL;
    s->size = -1;
    if (fd < 0 || lseek(fd, 0, SEEK_SET) != 0 || !(s->gz = gzdopen(fd, "rb"))) {
        int err = errno;
        if (fd >= 0) close(fd);
        return cn_failc(CN_EIO, "%s: cannot open '%s': %s", fn_idx, path,
                        err ? cn_errno_str(err, eb, sizeof eb) : "out of memory");
    }
    gzbuffer(s->gz, 1 << 17);
    return CN_OK;
#else
    fclose(s->f);
    s->f = NULL;
    return cn_failc(CN_EUNSUPPORTED,
                    "%s: '%s' is gzip-compressed, but this build has no zlib (configure with "
                    "CHUTNEY_WITH_ZLIB=ON and zlib installed, or gunzip the file)",
                    fn_idx, path);
#endif
}

/* Keeps s->msg: the caller may still be reporting it. */
static void src_close(source *s) {
    if (s->f) fclose(s->f);
    s->f = NULL;
#ifdef CN_HAVE_ZLIB
    if (s->gz) gzclose(s->gz);
    s->gz = NULL;
#endif
}

/* Reads up to n bytes; returns the count, or -1 with *why set on a stream
 * error (corrupt or truncated compressed data). */
static int64_t src_read(source *s, void *buf, size_t n, const char **why) {
    *why = NULL;
    if (!s->gzip) {
        size_t got = fread(buf, 1, n, s->f);
        if (got < n && ferror(s->f)) {
            *why = "read error";
            return -1;
        }
        return (int64_t)got;
    }
#ifdef CN_HAVE_ZLIB
    size_t total = 0;
    while (total < n) {
        size_t want = n - total;
        if (want > (1u << 30)) want = 1u << 30;
        int got = gzread(s->gz, (char *)buf + total, (unsigned)want);
        int zerr = Z_OK;
        const char *msg = gzerror(s->gz, &zerr);
        if (got < 0 || (zerr != Z_OK && zerr != Z_STREAM_END)) {
            /* A gzip stream cut short reports Z_BUF_ERROR ("unexpected end
             * of file"); damaged data Z_DATA_ERROR. */
            snprintf(s->msg, sizeof s->msg, "%s",
                     zerr == Z_BUF_ERROR    ? "the gzip stream is truncated"
                     : msg && *msg          ? msg
                     : zerr == Z_DATA_ERROR ? "corrupt gzip data"
                                            : "gzip read error");
            *why = s->msg;
            return -1;
        }
        if (got == 0) break;
        total += (size_t)got;
    }
    return (int64_t)total;
#else
    *why = "no zlib";
    return -1;
#endif
}

/* IDX type codes, their sizes and the dtype each becomes. */
static bool idx_type(int code, size_t *esize, cn_dtype *dt, const char **name) {
    switch (code) {
    case 0x08: *esize = 1, *dt = CN_U8, *name = "unsigned byte"; return true;
    case 0x09: *esize = 1, *dt = CN_I32, *name = "signed byte"; return true;
    case 0x0B: *esize = 2, *dt = CN_I32, *name = "short"; return true;
    case 0x0C: *esize = 4, *dt = CN_I32, *name = "int"; return true;
    case 0x0D: *esize = 4, *dt = CN_F32, *name = "float"; return true;
    case 0x0E: *esize = 8, *dt = CN_F64, *name = "double"; return true;
    default: return false;
    }
}

/* The most a gzip-compressed IDX file may inflate to, in MB (2^20 bytes),
 * and the variable that changes it: the largest MNIST-family set
 * (EMNIST ByClass, 550 MB) fits. docs/training.md, "Limits". */
#define CN_IDX_LIMIT_MB 1024
#define CN_IDX_LIMIT_ENV "CN_MAX_DECOMPRESSED_MB"

/* The largest data a compressed file's header is trusted for before its
 * bytes arrive (1 GiB: reserved, not touched, until read). */
#define DIRECT_MAX ((uint64_t)1 << 30)

/* The data buffer of load_idx: the tensor read into, or the raw bytes. */
static void drop_data(cn_tensor *t, unsigned char *raw) {
    if (t)
        cn_release(t);
    else
        free(raw);
}

/* Sets *out to an owned tensor, or returns a negative status. */
static int load_idx(const char *path, cn_tensor **out) {
    *out = NULL;
    if (!path) return cn_failc(CN_EINVAL, "%s: path is NULL", fn_idx);
    source s;
    int st = src_open(&s, path);
    if (st != CN_OK) return st;
    const char *why;
    unsigned char hdr[4 + 4 * 255];
    int64_t got = src_read(&s, hdr, 4, &why);
    if (got < 0) {
        src_close(&s);
        return cn_failc(CN_EFORMAT, "%s: '%s': %s", fn_idx, path, why);
    }
    if (got < 4) {
        src_close(&s);
        return cn_failc(CN_EFORMAT,
                        "%s: '%s' is truncated: %lld bytes, less than the 4-byte IDX magic", fn_idx,
                        path, (long long)got);
    }
    size_t esize;
    cn_dtype dt;
    const char *tname;
    if (hdr[0] != 0 || hdr[1] != 0 || !idx_type(hdr[2], &esize, &dt, &tname)) {
        src_close(&s);
        return cn_failc(
            CN_EFORMAT,
            "%s: '%s' is not an IDX file: bad magic %02x %02x %02x %02x (expected 00 00, "
            "a type code 08/09/0b/0c/0d/0e, the rank)",
            fn_idx, path, hdr[0], hdr[1], hdr[2], hdr[3]);
    }
    int ndim = hdr[3];
    if (ndim > CN_MAX_DIMS) {
        src_close(&s);
        return cn_failc(CN_EFORMAT, "%s: '%s' has rank %d, more than the %d Chutney supports",
                        fn_idx, path, ndim, CN_MAX_DIMS);
    }
    got = src_read(&s, hdr + 4, 4 * (size_t)ndim, &why);
    if (got < 0 || got < 4 * ndim) {
        src_close(&s);
        return cn_failc(CN_EFORMAT, "%s: '%s' is truncated in its header (%s)", fn_idx, path,
                        why ? why : "the sizes are cut short");
    }
    int64_t shape[CN_MAX_DIMS];
    uint64_t numel = 1;
    bool huge = false;
    for (int i = 0; i < ndim; i++) {
        shape[i] = cn_rd_be32(hdr + 4 + 4 * i);
        if (shape[i] && numel > ((uint64_t)1 << 46) / (uint64_t)shape[i])
            huge = true;
        else
            numel *= (uint64_t)shape[i];
    }
    char b[160];
    if (huge) {
        src_close(&s);
        return cn_failc(CN_EFORMAT, "%s: '%s' claims an implausible shape %s", fn_idx, path,
                        cn_fmt_shape(b, sizeof b, ndim, shape));
    }
    uint64_t nbytes = numel * esize, hbytes = 4 + 4 * (uint64_t)ndim;
    if (s.gzip) {
        /* A few MB of gzip can inflate to gigabytes: the header's claim is
         * held to a budget before any data is inflated (and the reads below
         * never ask for more than the claim). */
        uint64_t mb;
        st = cn_env_limit(CN_IDX_LIMIT_ENV, CN_IDX_LIMIT_MB, &mb, fn_idx);
        if (st != CN_OK) {
            src_close(&s);
            return st;
        }
        if (mb <= (UINT64_MAX >> 20) && nbytes > (mb << 20)) {
            src_close(&s);
            return cn_failc(CN_EFORMAT,
                            "%s: '%s' is gzip-compressed and its header says shape %s of %s, "
                            "%llu bytes once decompressed: more than the limit of %llu MB (set "
                            "%s to raise it, 0 for no limit)",
                            fn_idx, path, cn_fmt_shape(b, sizeof b, ndim, shape), tname,
                            (unsigned long long)nbytes, (unsigned long long)mb,
                            CN_IDX_LIMIT_ENV);
        }
    }
    if (s.size >= 0 && (uint64_t)s.size != hbytes + nbytes) {
        uint64_t have = (uint64_t)s.size - hbytes;
        src_close(&s);
        return cn_failc(CN_EFORMAT,
                        "%s: '%s' %s: its header says shape %s of %s, %llu bytes of data, but the "
                        "file has %llu",
                        fn_idx, path, have < nbytes ? "is truncated" : "has the wrong size",
                        cn_fmt_shape(b, sizeof b, ndim, shape), tname, (unsigned long long)nbytes,
                        (unsigned long long)have);
    }
    /* Where the element size is the file's (u8, int, float, double), the
     * data is read straight into the tensor: no second copy of a 47 MB
     * image file at its peak. A compressed file's size is known only by
     * reading, so a header claiming more than DIRECT_MAX is not trusted
     * that far: its buffer grows as the data arrives, then is copied. */
    cn_tensor *t = NULL;
    unsigned char *raw = NULL;
    size_t cap;
    if (esize == cn_dsize(dt) && (s.size >= 0 || nbytes <= DIRECT_MAX)) {
        t = cn_t_empty(dt, ndim, shape);
        if (!t) {
            src_close(&s);
            return CN_ENOMEM;
        }
        raw = t->storage->data;
        cap = (size_t)nbytes;
    } else {
        cap = s.size >= 0 ? (size_t)nbytes : (size_t)(nbytes < (1u << 20) ? nbytes : (1u << 20));
        raw = malloc(cap ? cap : 1);
    }
    uint64_t have = 0;
    while (raw && have < nbytes) {
        if (have == cap) { /* only without t: its cap is nbytes */
            size_t ncap = cap * 2 < nbytes ? cap * 2 : (size_t)nbytes;
            unsigned char *nr = realloc(raw, ncap);
            if (!nr) {
                free(raw);
                raw = NULL;
                break;
            }
            raw = nr;
            cap = ncap;
        }
        got = src_read(&s, raw + have, cap - have, &why);
        if (got < 0) {
            drop_data(t, raw);
            src_close(&s);
            return cn_failc(CN_EFORMAT, "%s: '%s': %s (after %llu of %llu bytes of data)", fn_idx,
                            path, why, (unsigned long long)have, (unsigned long long)nbytes);
        }
        if (got == 0) break;
        have += (uint64_t)got;
    }
    if (!raw) {
        src_close(&s);
        return cn_failc(CN_ENOMEM, "%s: out of memory reading '%s'", fn_idx, path);
    }
    if (have < nbytes) {
        drop_data(t, raw);
        src_close(&s);
        return cn_failc(
            CN_EFORMAT,
            "%s: '%s' is truncated: its header says shape %s of %s, %llu bytes of data, "
            "but it holds %llu",
            fn_idx, path, cn_fmt_shape(b, sizeof b, ndim, shape), tname, (unsigned long long)nbytes,
            (unsigned long long)have);
    }
    if (s.gzip) {
        /* Anything after the data, or a damaged end of the stream (its
         * checksum is only verified here), is an error too. */
        unsigned char extra;
        got = src_read(&s, &extra, 1, &why);
        if (got != 0) {
            drop_data(t, raw);
            src_close(&s);
            if (got < 0)
                return cn_failc(CN_EFORMAT, "%s: '%s': %s (at the end of the data)", fn_idx, path,
                                why);
            return cn_failc(
                CN_EFORMAT,
                "%s: '%s' has the wrong size: more data follows the %llu bytes of shape "
                "%s its header announces",
                fn_idx, path, (unsigned long long)nbytes, cn_fmt_shape(b, sizeof b, ndim, shape));
        }
    }
    src_close(&s);
    if (t) { /* read in place: multi-byte values still need host order */
        if (esize > 1 && cn_host_is_le()) cn_byteswap(raw, (size_t)numel, esize);
        *out = t;
        return CN_OK;
    }
    t = cn_t_empty(dt, ndim, shape);
    if (!t) {
        free(raw);
        return CN_ENOMEM;
    }
    void *dst = t->storage->data;
    switch (hdr[2]) {
    case 0x09:
        for (uint64_t i = 0; i < numel; i++)
            ((int32_t *)dst)[i] = (int8_t)raw[i];
        break;
    case 0x0B:
        for (uint64_t i = 0; i < numel; i++)
            ((int32_t *)dst)[i] = (int16_t)(uint16_t)(raw[2 * i] << 8 | raw[2 * i + 1]);
        break;
    default: /* a claim beyond DIRECT_MAX that held: the values as stored */
        memcpy(dst, raw, (size_t)nbytes);
        if (esize > 1 && cn_host_is_le()) cn_byteswap(dst, (size_t)numel, esize);
        break;
    }
    free(raw);
    *out = t;
    return CN_OK;
}

cn_tensor *cn_load_idx(const char *path) {
    cn_tensor *t;
    return load_idx(path, &t) == CN_OK ? cn_scope_add(t) : NULL;
}

/* dir/name, or dir/name.gz when only that exists. malloc'd. */
static char *find_file(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 8;
    char *p = malloc(n);
    if (!p) return NULL;
    snprintf(p, n, "%s/%s", dir, name);
    /* stat, not an open: opening a FIFO here would block; whatever the
     * name is, load_idx says what is wrong with it. */
    struct stat st;
    if (stat(p, &st) == 0) return p;
    snprintf(p, n, "%s/%s.gz", dir, name);
    return p;
}

/* The images u8 [N, 1, H, W] as stored and the labels i64 [N], owned, into
 * *images and *labels; or a negative status. */
static int load_fashion(const char *fn, const char *dir, bool train, cn_tensor **images,
                        cn_tensor **labels) {
    *images = *labels = NULL;
    if (!dir) dir = "/usr/share/datasets/fashion-mnist";
    char *ip = find_file(dir, train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte");
    char *lp = find_file(dir, train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte");
    if (!ip || !lp) {
        free(ip);
        free(lp);
        return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    }
    cn_tensor *img = NULL, *lab = NULL;
    int status = load_idx(ip, &img);
    if (status == CN_OK) status = load_idx(lp, &lab);
    if (status != CN_OK) {
        char msg[900];
        snprintf(msg, sizeof msg, "%s", cn_last_error());
        status = cn_failc(status, "%s: %s (Fashion-MNIST is in Debian's dataset-fashion-mnist)", fn,
                          msg);
    } else if (cn_tensor_dtype(img) != CN_U8 || cn_ndim(img) != 3 ||
               cn_tensor_dtype(lab) != CN_U8 || cn_ndim(lab) != 1 ||
               cn_dim(img, 0) != cn_dim(lab, 0)) {
        char b1[160], b2[160];
        status = cn_failc(
            CN_EFORMAT,
            "%s: '%s' (%s) and '%s' (%s) are not u8 images [N, H, W] and u8 labels [N] "
            "of the same N",
            fn, ip, cn_shape_str(img, b1, sizeof b1), lp, cn_shape_str(lab, b2, sizeof b2));
    }
    if (status == CN_OK) {
        int64_t n = cn_dim(img, 0);
        /* [N, H, W] -> [N, 1, H, W] in place: the struct is ours alone. */
        img->shape[3] = img->shape[2];
        img->shape[2] = img->shape[1];
        img->shape[1] = 1;
        img->ndim = 4;
        cn_contiguous_strides(4, img->shape, img->strides);
        cn_tensor *li = cn_t_empty(CN_I64, 1, &n);
        if (li) {
            const uint8_t *ls = cn_data(lab);
            int64_t *ld = li->storage->data;
            for (int64_t i = 0; i < n; i++)
                ld[i] = ls[i];
            *images = img;
            *labels = li;
            img = NULL;
        } else {
            status = CN_ENOMEM;
        }
    }
    cn_release(img);
    cn_release(lab);
    free(ip);
    free(lp);
    return status;
}

int cn_load_fashion_mnist_u8(const char *dir, bool train, cn_tensor **images, cn_tensor **labels) {
    static const char fn[] = "load_fashion_mnist_u8";
    if (!images || !labels) return cn_failc(CN_EINVAL, "%s: images or labels is NULL", fn);
    int status = load_fashion(fn, dir, train, images, labels);
    cn_scope_add(*images);
    cn_scope_add(*labels);
    return status;
}

int cn_load_fashion_mnist(const char *dir, bool train, cn_tensor **images, cn_tensor **labels) {
    static const char fn[] = "load_fashion_mnist";
    if (!images || !labels) return cn_failc(CN_EINVAL, "%s: images or labels is NULL", fn);
    cn_tensor *img, *lab;
    int status = load_fashion(fn, dir, train, &img, &lab);
    if (status != CN_OK) return status;
    cn_tensor *fi = cn_t_empty(CN_F32, 4, img->shape);
    if (!fi) {
        cn_release(img);
        cn_release(lab);
        return CN_ENOMEM;
    }
    const uint8_t *src = cn_data(img);
    float *dst = fi->storage->data;
    /* The loader's cn_loader_normalize(0, 255) gives these same values. */
    for (int64_t i = 0, n = cn_numel(img); i < n; i++)
        dst[i] = (float)src[i] / 255.0f;
    cn_release(img);
    *images = cn_scope_add(fi);
    *labels = cn_scope_add(lab);
    return CN_OK;
}
