/* The OpenCL caching allocator: per device, freed buffers are kept on free
 * lists by size class (four classes per power of two, as src/core/alloc.c)
 * and handed out again, up to CN_OPENCL_CACHE_MB megabytes (default 1024;
 * 0 turns the cache off). Creating a buffer costs a driver call (and on a
 * GPU often a synchronisation); eager code frees and asks for buffers of the
 * same sizes every step. */
#include "ocl.h"

#include <stdio.h>
#include <stdlib.h>

#define NCLASSES 160
#define MIN_BYTES 64

typedef struct free_buf {
    struct free_buf *next;
    cl_mem mem;
} free_buf;

typedef struct dev_cache {
    free_buf *lists[NCLASSES];
    uint64_t allocated, peak, cached, allocations, hits;
} dev_cache;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static dev_cache *caches;
static int ncaches;
static size_t cache_limit;
static bool limit_read;

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

static dev_cache *cache_of(int index) {
    if (!caches) {
        int n = cn_ocl_device_count();
        caches = calloc(n > 0 ? (size_t)n : 1, sizeof *caches);
        if (!caches) return NULL;
        ncaches = n;
    }
    if (!limit_read) {
        const char *e = getenv("CN_OPENCL_CACHE_MB");
        long mb = e && *e ? strtol(e, NULL, 10) : 1024;
        if (mb < 0) mb = 0;
        cache_limit = (size_t)mb << 20;
        limit_read = true;
    }
    return index >= 0 && index < ncaches ? &caches[index] : NULL;
}

/* Release every cached buffer of c; returns the bytes. Under cache_lock. */
static size_t drain(dev_cache *c) {
    size_t total = 0;
    for (int k = 0; k < NCLASSES; k++) {
        while (c->lists[k]) {
            free_buf *f = c->lists[k];
            c->lists[k] = f->next;
            clReleaseMemObject(f->mem);
            free(f);
            total += class_size(k);
        }
    }
    c->cached = 0;
    return total;
}

static void storage_free(cn_storage *s) {
    int idx = s->device_index;
    cl_mem m = (cl_mem)s->data;
    int k = size_class(s->nbytes < MIN_BYTES ? MIN_BYTES : s->nbytes);
    size_t sz = class_size(k);
    cn_ocl_dev *d = cn_ocl_dev_get(idx);
    bool exact = d && d->max_alloc && sz > d->max_alloc; /* allocated at its exact size */
    if (exact) sz = s->nbytes;
    pthread_mutex_lock(&cache_lock);
    dev_cache *c = cache_of(idx);
    bool keep = false;
    if (c) {
        c->allocated -= sz;
        if (!exact && c->cached + sz <= cache_limit) {
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
    if (!keep) clReleaseMemObject(m);
    free(s);
}

cn_storage *cn_ocl_storage_new(int index, size_t nbytes) {
    cn_ocl_dev *d = cn_ocl_dev_get(index);
    if (!d) return NULL;
    if (nbytes > ((size_t)1 << 50) || (d->max_alloc && nbytes > d->max_alloc)) {
        cn_failc(CN_ENOMEM,
                 "alloc: %zu bytes on opencl:%d (%s): larger than the device's largest buffer "
                 "(%llu bytes)",
                 nbytes, index, d->name, (unsigned long long)d->max_alloc);
        return NULL;
    }
    int k = size_class(nbytes < MIN_BYTES ? MIN_BYTES : nbytes);
    size_t sz = class_size(k);
    if (d->max_alloc && sz > d->max_alloc) sz = nbytes; /* the class would not fit; exact size */
    cn_storage *s = calloc(1, sizeof *s);
    if (!s) {
        cn_failc(CN_ENOMEM, "alloc: out of host memory for a storage on opencl:%d", index);
        return NULL;
    }
    cl_mem m = NULL;
    pthread_mutex_lock(&cache_lock);
    dev_cache *c = cache_of(index);
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
        cl_int err;
        m = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, sz, NULL, &err);
        if (err != CL_SUCCESS || !m) {
            /* Give the cache back to the driver and try once more. */
            cn_ocl_empty_cache(index);
            m = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, sz, NULL, &err);
        }
        if (err != CL_SUCCESS || !m) {
            free(s);
            cn_failc(CN_ENOMEM, "alloc: cannot allocate %zu bytes on opencl:%d (%s): %s (%d)",
                     nbytes, index, d->name, cn_ocl_err_name(err), (int)err);
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
    s->device_kind = CN_DEVICE_OPENCL;
    s->device_index = (int16_t)index;
    s->device_free = storage_free;
    return s;
}

int cn_ocl_memory_stats(int index, cn_memory_stats *st) {
    if (!cn_ocl_dev_get(index)) return CN_EINVAL;
    pthread_mutex_lock(&cache_lock);
    dev_cache *c = cache_of(index);
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

size_t cn_ocl_empty_cache(int index) {
    if (index < 0 || index >= cn_ocl_device_count()) return 0;
    pthread_mutex_lock(&cache_lock);
    dev_cache *c = cache_of(index);
    size_t n = c ? drain(c) : 0;
    pthread_mutex_unlock(&cache_lock);
    return n;
}
