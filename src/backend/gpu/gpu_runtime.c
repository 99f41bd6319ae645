/* What the shared kernels need of every runtime: devices by kind, the
 * program cache (each distinct generated source compiled once per device),
 * grid-stride launches, strided layouts, the dtypes' kernel types and the
 * prelude every generated program starts with. */
#include "gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CN_HAVE_OPENCL
cn_gpu_dev *cn_ocl_gpu_dev(int index);
#endif
#ifdef CN_HAVE_CUDA
cn_gpu_dev *cn_cuda_gpu_dev(int index);
#endif

/* ---- devices ---- */

cn_gpu_dev *cn_gpu_dev_get(cn_device_kind kind, int index) {
    switch (kind) {
#ifdef CN_HAVE_OPENCL
    case CN_DEVICE_OPENCL: return cn_ocl_gpu_dev(index);
#endif
#ifdef CN_HAVE_CUDA
    case CN_DEVICE_CUDA: return cn_cuda_gpu_dev(index);
#endif
    default: break;
    }
    cn_fail("gpu kernels: internal error: %s is not a device of a kernel-generating backend",
            cn_dev_name(CN_DEVICE(kind, index)));
    return NULL;
}

cn_gpu_dev *cn_gpu_dev_of(const cn_storage *s) {
    if (!s) {
        cn_fail("gpu kernels: internal error: no storage");
        return NULL;
    }
    return cn_gpu_dev_get((cn_device_kind)s->device_kind, s->device_index);
}

int cn_gpu_check_dtype(const char *fn, const cn_gpu_dev *dev, cn_dtype dt) {
    if (dt == CN_F64 && !dev->fp64)
        return cn_failc(CN_EUNSUPPORTED,
                        "%s: f64 on %s (%s): the device has no double precision; use f32", fn,
                        dev->label, dev->name);
    return CN_OK;
}

/* ---- what the runtimes share ---- */

void cn_gpu_log_excerpt(const char *log, char *out, size_t n) {
    const char *start = log;
    const char *e = strstr(log, "error");
    if (e) {
        while (e > log && e[-1] != '\n') e--;
        start = e;
    }
    size_t k = 0;
    for (const char *p = start; *p && k + 1 < n; p++) out[k++] = *p == '\n' ? ' ' : *p;
    out[k] = 0;
}

void cn_gpu_source_head(const char *src, char *out, size_t n) {
    size_t h = 0;
    while (src[h] && src[h] != '\n' && h + 1 < n) {
        out[h] = src[h];
        h++;
    }
    out[h] = 0;
}

bool cn_gpu_range_ok(const char *fn, const cn_storage *s, size_t off, size_t n) {
    if (off > s->nbytes || n > s->nbytes - off) {
        cn_failc(CN_EINVAL, "%s: bytes [%zu, %zu) are outside the %zu-byte storage on %s", fn,
                 off, off + n, s->nbytes, cn_dev_name(cn_storage_device(s)));
        return false;
    }
    return true;
}

/* ---- byte copies, through the device's backend ---- */

int cn_gpu_write(cn_storage *dst, size_t dst_off, const void *src, size_t n, bool async) {
    const cn_backend *b = cn_backend_for(cn_storage_device(dst), "write");
    return b ? b->write(dst, dst_off, src, n, async) : CN_EINVAL;
}

int cn_gpu_read(const cn_storage *src, size_t src_off, void *dst, size_t n) {
    const cn_backend *b = cn_backend_for(cn_storage_device(src), "read");
    return b ? b->read(src, src_off, dst, n) : CN_EINVAL;
}

int cn_gpu_copy_bytes(cn_storage *dst, size_t dst_off, const cn_storage *src, size_t src_off,
                      size_t n) {
    const cn_backend *b = cn_backend_for(cn_storage_device(dst), "copy");
    return b ? b->copy_bytes(dst, dst_off, src, src_off, n) : CN_EINVAL;
}

/* ---- the program cache ----
 * Keyed by (device, options, source); each entry keeps its kernels by name.
 * Lookups hash the whole source (a few kilobytes at most: cheap next to a
 * launch). */

typedef struct kern_entry {
    struct kern_entry *next;
    char *name;
    cn_gpu_kernel k;
} kern_entry;

typedef struct prog_entry {
    struct prog_entry *next;
    uint64_t hash;
    int kind, dev;
    char *opts, *src;
    void *prog; /* the runtime's; never released (the process keeps its kernels) */
    kern_entry *kernels;
} prog_entry;

#define PROG_BUCKETS 1024
static prog_entry *prog_table[PROG_BUCKETS];
static pthread_mutex_t prog_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t fnv(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return (h ^ 0xff) * 0x100000001b3ull;
}

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

cn_gpu_kernel cn_gpu_kernel_get(cn_gpu_dev *dev, const char *source, const char *opts,
                                const char *name) {
    if (!dev || !source || !name) {
        cn_fail("gpu kernels: internal error: a kernel without a device, source or name");
        return NULL;
    }
    const char *o = opts ? opts : "";
    uint64_t h = fnv(fnv(0xcbf29ce484222325ull ^ (uint64_t)dev->index ^ ((uint64_t)dev->kind << 32), o),
                     source);
    pthread_mutex_lock(&prog_lock);
    prog_entry *e = prog_table[h % PROG_BUCKETS];
    while (e && !(e->hash == h && e->kind == (int)dev->kind && e->dev == dev->index && !strcmp(e->opts, o) &&
                  !strcmp(e->src, source)))
        e = e->next;
    if (!e) {
        void *p = dev->rt->build(dev, source, o);
        if (!p) {
            pthread_mutex_unlock(&prog_lock);
            return NULL;
        }
        e = calloc(1, sizeof *e);
        char *so = dupstr(o), *ss = dupstr(source);
        if (!e || !so || !ss) {
            free(e);
            free(so);
            free(ss);
            pthread_mutex_unlock(&prog_lock);
            cn_fail("gpu kernels: out of memory caching a program");
            return NULL;
        }
        e->hash = h;
        e->kind = (int)dev->kind;
        e->dev = dev->index;
        e->opts = so;
        e->src = ss;
        e->prog = p;
        e->next = prog_table[h % PROG_BUCKETS];
        prog_table[h % PROG_BUCKETS] = e;
    }
    kern_entry *k = e->kernels;
    while (k && strcmp(k->name, name)) k = k->next;
    if (!k) {
        cn_gpu_kernel kk = dev->rt->kernel(dev, e->prog, name);
        if (!kk) {
            pthread_mutex_unlock(&prog_lock);
            return NULL;
        }
        k = calloc(1, sizeof *k);
        char *nm = dupstr(name);
        if (!k || !nm) {
            free(k);
            free(nm);
            pthread_mutex_unlock(&prog_lock);
            cn_fail("gpu kernels: out of memory caching a kernel");
            return NULL;
        }
        k->name = nm;
        k->k = kk;
        k->next = e->kernels;
        e->kernels = k;
    }
    cn_gpu_kernel r = k->k;
    pthread_mutex_unlock(&prog_lock);
    return r;
}

/* ---- kernels remembered by key ---- */

typedef struct memo_entry {
    struct memo_entry *next;
    uint64_t hash;
    int kind, dev;
    cn_gpu_kernel k;
    char key[]; /* NUL-terminated */
} memo_entry;

#define MEMO_BUCKETS 1024
static memo_entry *memo_table[MEMO_BUCKETS];
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t memo_hash(const cn_gpu_dev *dev, const char *key) {
    return fnv(0xcbf29ce484222325ull ^ (uint64_t)dev->index ^ ((uint64_t)dev->kind << 32), key);
}

cn_gpu_kernel cn_gpu_kernel_memo(cn_gpu_dev *dev, const char *key) {
    if (!dev || !key) return NULL;
    uint64_t h = memo_hash(dev, key);
    cn_gpu_kernel k = NULL;
    pthread_mutex_lock(&memo_lock);
    for (memo_entry *e = memo_table[h % MEMO_BUCKETS]; e; e = e->next)
        if (e->hash == h && e->kind == (int)dev->kind && e->dev == dev->index &&
            !strcmp(e->key, key)) {
            k = e->k;
            break;
        }
    pthread_mutex_unlock(&memo_lock);
    return k;
}

void cn_gpu_kernel_memo_put(cn_gpu_dev *dev, const char *key, cn_gpu_kernel k) {
    if (!dev || !key || !k || cn_gpu_kernel_memo(dev, key)) return;
    size_t n = strlen(key) + 1;
    memo_entry *e = malloc(sizeof *e + n);
    if (!e) return; /* only a missed shortcut */
    e->hash = memo_hash(dev, key);
    e->kind = (int)dev->kind;
    e->dev = dev->index;
    e->k = k;
    memcpy(e->key, key, n);
    pthread_mutex_lock(&memo_lock);
    e->next = memo_table[e->hash % MEMO_BUCKETS];
    memo_table[e->hash % MEMO_BUCKETS] = e;
    pthread_mutex_unlock(&memo_lock);
}

void cn_gpu_sources_foreach(void (*fn)(const char *src, const char *opts, void *ctx), void *ctx) {
    pthread_mutex_lock(&prog_lock);
    for (int b = 0; b < PROG_BUCKETS; b++)
        for (prog_entry *e = prog_table[b]; e; e = e->next) fn(e->src, e->opts, ctx);
    pthread_mutex_unlock(&prog_lock);
}

/* ---- launches ---- */

int cn_gpu_launch_n(const char *fn, cn_gpu_dev *dev, cn_gpu_kernel k, int nargs,
                    const cn_gpu_arg *args, int64_t n) {
    if (!k) return CN_EINVAL;
    if (n <= 0) return CN_OK;
    size_t wg = dev->rt->kernel_max_group(dev, k);
    if (wg == 0) wg = dev->max_wg;
    size_t local = 256;
    if (local > wg) local = wg;
    if (local > dev->max_wg) local = dev->max_wg;
    if (local == 0) local = 1;
    uint64_t groups = ((uint64_t)n + local - 1) / local;
    uint64_t maxg = (uint64_t)dev->units * 64;
    if (maxg < 256) maxg = 256;
    if (groups > maxg) groups = maxg;
    size_t global = (size_t)groups * local;
    return cn_gpu_launch(fn, dev, k, nargs, args, 1, &global, &local);
}

/* ---- layouts ---- */

/* Broadcast t to (nd, shape): full-rank strides (0 where broadcast). */
static void bcast_strides(const cn_tensor *t, int nd, const int64_t *shape, int64_t *st) {
    int lead = nd - t->ndim;
    for (int d = 0; d < nd; d++) {
        int k = d - lead;
        if (k < 0 || t->shape[k] == 1 || shape[d] == 1)
            st[d] = 0;
        else
            st[d] = t->strides[k];
    }
}

int cn_gpu_layouts(int n, const cn_tensor *const *ts, int out_ndim, const int64_t *out_shape,
                   cn_gpu_layout *ls) {
    int64_t st[16][CN_MAX_DIMS];
    int64_t sh[CN_MAX_DIMS];
    int nd = 0;
    if (n > 16) n = 16; /* callers pass at most a few */
    int64_t full[16][CN_MAX_DIMS];
    for (int j = 0; j < n; j++) bcast_strides(ts[j], out_ndim, out_shape, full[j]);
    /* Drop size-1 axes, then merge axis d into the one before it where every
     * tensor's strides allow. */
    for (int d = 0; d < out_ndim; d++) {
        if (out_shape[d] == 1) continue;
        bool merge = nd > 0;
        for (int j = 0; j < n && merge; j++)
            if (st[j][nd - 1] != full[j][d] * out_shape[d]) merge = false;
        if (merge) {
            sh[nd - 1] *= out_shape[d];
            for (int j = 0; j < n; j++) st[j][nd - 1] = full[j][d];
        } else {
            sh[nd] = out_shape[d];
            for (int j = 0; j < n; j++) st[j][nd] = full[j][d];
            nd++;
        }
    }
    for (int j = 0; j < n; j++) {
        memset(&ls[j], 0, sizeof ls[j]);
        ls[j].offset = ts[j]->offset;
        ls[j].ndim = nd;
        for (int d = 0; d < nd; d++) {
            ls[j].shape[d] = sh[d];
            ls[j].strides[d] = st[j][d];
        }
    }
    return nd;
}

void cn_gpu_layout_of(const cn_tensor *t, int out_ndim, const int64_t *out_shape,
                      cn_gpu_layout *l) {
    cn_gpu_layouts(1, &t, out_ndim, out_shape, l);
}

/* ---- types and the prelude ---- */

const char *cn_gpu_ctype(cn_dtype dt) {
    switch (dt) {
    case CN_F32: return "float";
    case CN_F64: return "double";
    case CN_F16:
    case CN_BF16: return "ushort";
    case CN_I32: return "int";
    case CN_I64: return "long";
    case CN_I8: return "char";
    default: return "uchar";
    }
}

/* The runtime's dialect header comes first (CN_FN, the work-item
 * functions, as_float, LONG_MAX, ...). */
static const char prelude[] =
    "typedef struct { long offset; long ndim; long shape[8]; long strides[8]; } cn_layout;\n"
    "CN_FN float cn_h2f(ushort h) {\n"
    "  uint sign = (uint)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;\n"
    "  if (e == 0x1fu) return as_float(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));\n"
    "  if (e == 0u) { float f = (float)m * 5.9604644775390625e-08f; return sign ? -f : f; }\n"
    "  return as_float(sign | ((e + 112u) << 23) | (m << 13));\n"
    "}\n"
    "CN_FN ushort cn_f2h(float x) {\n"
    "  uint u = as_uint(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;\n"
    "  if (a >= 0x7f800000u)\n"
    "    return (ushort)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u));\n"
    "  if (a >= 0x477ff000u) return (ushort)(sign | 0x7c00u);\n"
    "  if (a < 0x38800000u) { float f = as_float(a) + 0.5f; return (ushort)(sign | (as_uint(f) - 0x3f000000u)); }\n"
    "  uint odd = (a >> 13) & 1u;\n"
    "  a += 0xc8000fffu + odd;\n"
    "  return (ushort)(sign | (a >> 13));\n"
    "}\n"
    "CN_FN float cn_bf2f(ushort h) { return as_float((uint)h << 16); }\n"
    "CN_FN ushort cn_f2bf(float x) {\n"
    "  uint u = as_uint(x);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);\n"
    "  u += 0x7fffu + ((u >> 16) & 1u);\n"
    "  return (ushort)(u >> 16);\n"
    "}\n"
    "CN_FN long cn_f2l(float v) {\n"
    "  if (!(v == v)) return 0;\n"
    "  if (v >= 9.2233720368547758e18f) return LONG_MAX;\n"
    "  if (v <= -9.2233720368547758e18f) return LONG_MIN;\n"
    "  return (long)v;\n"
    "}\n"
    "#ifdef CN_FP64\n"
    "CN_FN long cn_d2l(double v) {\n"
    "  if (!(v == v)) return 0;\n"
    "  if (v >= 9.2233720368547758e18) return LONG_MAX;\n"
    "  if (v <= -9.2233720368547758e18) return LONG_MIN;\n"
    "  return (long)v;\n"
    "}\n"
    "#endif\n"
    "CN_FN long cn_offset(const cn_layout *l, long i) {\n"
    "  long o = l->offset;\n"
    "  for (int d = (int)l->ndim - 1; d >= 0; d--) {\n"
    "    long q = i % l->shape[d];\n"
    "    i /= l->shape[d];\n"
    "    o += q * l->strides[d];\n"
    "  }\n"
    "  return o;\n"
    "}\n"
    "#define CN_OFFSET(l, i) cn_offset(&(l), (i))\n";

const char *cn_gpu_prelude(void) { return prelude; }
