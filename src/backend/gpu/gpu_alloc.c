/* The caching allocator of the devices that run the shared kernels: per
 * device, freed buffers are kept on free lists by size class (four classes
 * per power of two, as src/core/alloc.c) and handed out again, up to
 * CN_OPENCL_CACHE_MB / CN_CUDA_CACHE_MB megabytes (default 1024; 0 turns
 * the cache off). Creating a buffer costs a driver call (and on a
 * GPU often a synchronisation); eager code frees and asks for buffers of the
 * same sizes every step. */
#include "gpu.h"

#include <stdio.h>
#include <stdlib.h>

#define NCLASSES 160
#define MIN_BYTES 64

typedef struct free_buf {
    struct free_buf *next;
    cn_gpu_buf mem;
} free_buf;

typedef struct dev_cache {
    free_buf *lists[NCLASSES];
    uint64_t allocated, peak, cached, allocations, hits;
} dev_cache;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
/* By device kind: one cache per device of that kind. */
static dev_cache *caches[CN_DEVICE_KIND_COUNT];
static int ncaches[CN_DEVICE_KIND_COUNT];
static size_t cache_limit[CN_DEVICE_KIND_COUNT];
static bool limit_read[CN_DEVICE_KIND_COUNT];

/* Size class of n bytes (n >= MIN_BYTES): classes 0..3 for [64, 128), then
 * four per power of two; class_size gives the class's (largest) size. */
static int size_class(size_t n) {
    if (n <= MIN_BYTES) return 0;
    size_t m = n - 1;
    int p = 63 - __builtin_clzll((unsigned long long)m); /* 2^p <= m < 2^(p+1) */
    int q = (int)((m >> (p - 2)) & 3u);                  /* quarter within the power */
    int c = (p - 6) * 4 + q;
    return c < 0 ? 0 : c;
}
static size_t class_size(int c) {
    int p = c / 4 + 6, q = c % 4;
    return ((size_t)1 << p) + ((size_t)(q + 1) << (p - 2));
}

static dev_cache *cache_of(cn_device_kind kind, int index) {
    if ((int)kind < 0 || kind >= CN_DEVICE_KIND_COUNT) return NULL;
    if (!caches[kind]) {
        const cn_backend *b = cn_backends[kind];
        int n = b ? b->device_count() : 0;
        caches[kind] = calloc(n > 0 ? (size_t)n : 1, sizeof *caches[kind]);
        if (!caches[kind]) return NULL;
        ncaches[kind] = n;
    }
    if (!limit_read[kind]) {
        const char *e = getenv(kind == CN_DEVICE_CUDA ? "CN_CUDA_CACHE_MB" : "CN_OPENCL_CACHE_MB");
        long mb = e && *e ? strtol(e, NULL, 10) : 1024;
        if (mb < 0) mb = 0;
        cache_limit[kind] = (size_t)mb << 20;
        limit_read[kind] = true;
    }
    return index >= 0 && index < ncaches[kind] ? &caches[kind][index] : NULL;
}

/* Release every cached buffer of c; returns the bytes. Under cache_lock. */
static size_t drain(cn_gpu_dev *d, dev_cache *c) {
    size_t total = 0;
    for (int k = 0; k < NCLASSES; k++) {
        while (c->lists[k]) {
            free_buf *f = c->lists[k];
            c->lists[k] = f->next;
            d->rt->mem_free(d, f->mem);
            free(f);
            total += class_size(k);
        }
    }
    c->cached = 0;
    return total;
}

static void storage_free(cn_storage *s) {
    cn_device_kind kind = (cn_device_kind)s->device_kind;
    int idx = s->device_index;
    cn_gpu_buf m = (cn_gpu_buf)s->data;
    int k = size_class(s->nbytes < MIN_BYTES ? MIN_BYTES : s->nbytes);
    size_t sz = class_size(k);
    cn_gpu_dev *d = cn_gpu_dev_get(kind, idx);
    if (!d) { /* cannot happen: the storage was made on it */
        free(s);
        return;
    }
    bool exact = d->max_alloc && sz > d->max_alloc; /* allocated at its exact size */
    if (exact) sz = s->nbytes;
    pthread_mutex_lock(&cache_lock);
    dev_cache *c = cache_of(kind, idx);
    bool keep = false;
    if (c) {
        c->allocated -= sz;
        if (!exact && c->cached + sz <= cache_limit[kind]) {
            free_buf *f = malloc(sizeof *f);
            if (f) {
                f->mem = m;
                f->next = c->lists[k];
                c->lists[k] = f;
                c->cached += sz;
                keep = true;
            }
        }
    }
    pthread_mutex_unlock(&cache_lock);
    if (!keep) d->rt->mem_free(d, m);
    free(s);
}

cn_storage *cn_gpu_storage_new(cn_device_kind kind, int index, size_t nbytes) {
    cn_gpu_dev *d = cn_gpu_dev_get(kind, index);
    if (!d) return NULL;
    if (nbytes > ((size_t)1 << 50) || (d->max_alloc && nbytes > d->max_alloc)) {
        cn_failc(CN_ENOMEM,
                 "alloc: %zu bytes on %s (%s): larger than the device's largest buffer "
                 "(%llu bytes)",
                 nbytes, d->label, d->name, (unsigned long long)d->max_alloc);
        return NULL;
    }
    int k = size_class(nbytes < MIN_BYTES ? MIN_BYTES : nbytes);
    size_t sz = class_size(k);
    if (d->max_alloc && sz > d->max_alloc) sz = nbytes; /* the class would not fit; exact size */
    cn_storage *s = calloc(1, sizeof *s);
    if (!s) {
        cn_failc(CN_ENOMEM, "alloc: out of host memory for a storage on %s", d->label);
        return NULL;
    }
    cn_gpu_buf m = NULL;
    pthread_mutex_lock(&cache_lock);
    dev_cache *c = cache_of(kind, index);
    if (c && c->lists[k] && sz == class_size(k)) {
        free_buf *f = c->lists[k];
        c->lists[k] = f->next;
        c->cached -= sz;
        m = f->mem;
        free(f);
        c->hits++;
    }
    pthread_mutex_unlock(&cache_lock);
    if (!m) {
        char why[160] = "";
        m = d->rt->mem_alloc(d, sz, why, sizeof why);
        if (!m) {
            /* Give the cache back to the driver and try once more. */
            cn_gpu_empty_cache(kind, index);
            m = d->rt->mem_alloc(d, sz, why, sizeof why);
        }
        if (!m) {
            free(s);
            cn_failc(CN_ENOMEM, "alloc: cannot allocate %zu bytes on %s (%s): %s", nbytes,
                     d->label, d->name, why);
            return NULL;
        }
    }
    pthread_mutex_lock(&cache_lock);
    if (c) {
        c->allocated += sz;
        if (c->allocated > c->peak) c->peak = c->allocated;
        c->allocations++;
    }
    pthread_mutex_unlock(&cache_lock);
    s->data = m;
    s->nbytes = nbytes;
    s->refcount = 1;
    s->device_kind = (int16_t)kind;
    s->device_index = (int16_t)index;
    s->device_free = storage_free;
    return s;
}

int cn_gpu_memory_stats(cn_device_kind kind, int index, cn_memory_stats *st) {
    if (!cn_gpu_dev_get(kind, index)) return CN_EINVAL;
    pthread_mutex_lock(&cache_lock);
    dev_cache *c = cache_of(kind, index);
    memset(st, 0, sizeof *st);
    if (c) {
        st->allocated_bytes = c->allocated;
        st->peak_allocated_bytes = c->peak;
        st->cached_bytes = c->cached;
        st->allocations = c->allocations;
        st->cache_hits = c->hits;
    }
    pthread_mutex_unlock(&cache_lock);
    return CN_OK;
}

size_t cn_gpu_empty_cache(cn_device_kind kind, int index) {
    const cn_backend *b = (int)kind >= 0 && kind < CN_DEVICE_KIND_COUNT ? cn_backends[kind] : NULL;
    if (!b || index < 0 || index >= b->device_count()) return 0;
    cn_gpu_dev *d = cn_gpu_dev_get(kind, index);
    if (!d) return 0;
    pthread_mutex_lock(&cache_lock);
    dev_cache *c = cache_of(kind, index);
    size_t n = c ? drain(d, c) : 0;
    pthread_mutex_unlock(&cache_lock);
    return n;
}
