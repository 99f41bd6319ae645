/* The backends of this build, and what is done the same way on all of them:
 * storage on a device, copies between devices, the public device functions. */
#include "backend.h"
#include "../core/budget.h"

#include <pthread.h>
#include <stdlib.h>

const cn_backend *const cn_backends[CN_DEVICE_KIND_COUNT] = {
    [CN_DEVICE_CPU] = &cn_backend_cpu,
#ifdef CN_HAVE_OPENCL
    [CN_DEVICE_OPENCL] = &cn_backend_opencl,
#endif
#ifdef CN_HAVE_CUDA
    [CN_DEVICE_CUDA] = &cn_backend_cuda,
#endif
};

static const char opencl_build[] = " (build with CHUTNEY_WITH_OPENCL and an OpenCL SDK: "
                                   "Debian's ocl-icd-opencl-dev and opencl-c-headers)";
static const char *const kind_builds[CN_DEVICE_KIND_COUNT] = {
    [CN_DEVICE_CPU] = "",
    [CN_DEVICE_OPENCL] = opencl_build,
    [CN_DEVICE_CUDA] = " (build with CHUTNEY_WITH_CUDA and the CUDA toolkit: nvcc, cuBLAS, "
                       "NVRTC)",
};

const cn_backend *cn_backend_for(cn_device d, const char *fn) {
    /* A rank device: this process's own is the local device (callers use
     * only d.index then); another rank's has no storage here. */
    d = cn_device_here(d);
    if (cn_device_remote(d)) {
        cn_fail_remote_device(fn, d);
        return NULL;
    }
    if (d.kind < 0 || d.kind >= CN_DEVICE_KIND_COUNT || d.index < 0) {
        cn_fail("%s: %s is not a device", fn, cn_dev_name(d));
        return NULL;
    }
    const cn_backend *b = cn_backends[d.kind];
    if (!b) {
        cn_fail("%s: this build of Chutney has no %s backend%s", fn, cn_dev_name(d),
                kind_builds[d.kind]);
        return NULL;
    }
    int n = b->device_count();
    if (d.index >= n) {
        if (n == 0)
            cn_fail("%s: no %s device on this machine (%s: %s)", fn, b->name, cn_dev_name(d),
                    b->why_none && b->why_none()[0] ? b->why_none()
                                                    : "no platform or driver found");
        else
            cn_fail("%s: %s: there %s %d %s device%s (%s:0%s)", fn, cn_dev_name(d),
                    n == 1 ? "is" : "are", n, b->name, n == 1 ? "" : "s", b->name,
                    n == 1 ? "" : " and up");
        return NULL;
    }
    return b;
}

cn_storage *cn_storage_new_on(cn_device d, size_t nbytes) {
    if (d.kind == CN_DEVICE_CPU) return cn_storage_new(nbytes);
    const cn_backend *b = cn_backend_for(d, "alloc");
    return b ? b->storage_new(d.index, nbytes) : NULL;
}

cn_tensor *cn_t_empty_on(cn_device d, cn_dtype dt, int ndim, const int64_t *shape) {
    if (d.kind == CN_DEVICE_CPU) return cn_t_empty(dt, ndim, shape);
    d = cn_device_here(d); /* (storage records the local device) */
    if (d.kind == CN_DEVICE_CPU) return cn_t_empty(dt, ndim, shape);
    if (!cn_check_shape("empty", ndim, shape)) return NULL;
    if (CN_UNLIKELY(cn_t_budget.left >= 0) && !cn_t_budget_take("empty", ndim, shape)) return NULL;
    int64_t numel = cn_shape_numel(ndim, shape);
    cn_storage *s = cn_storage_new_on(d, (size_t)numel * cn_dsize(dt));
    if (!s) return NULL;
    cn_tensor *t = cn_t_alloc();
    if (!t) {
        cn_storage_release(s);
        return cn_fail("empty: out of memory");
    }
    t->dtype = (uint8_t)dt;
    t->ndim = (int8_t)ndim;
    if (ndim > 0) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    cn_contiguous_strides(ndim, shape, t->strides);
    t->storage = s;
    t->flags = CN_TF_LEAF;
    return t;
}

cn_tensor *cn_t_full_on(cn_device d, cn_dtype dt, int ndim, const int64_t *shape, double v) {
    d = cn_device_here(d);
    if (d.kind == CN_DEVICE_CPU) return cn_t_full(dt, ndim, shape, v);
    cn_tensor *t = cn_t_empty_on(d, dt, ndim, shape);
    if (t && cn_shape_numel(ndim, shape) > 0 && cn_backend_of(t)->fill(t, v) < 0) {
        cn_release(t);
        return NULL;
    }
    return t;
}

/* ---- copies between devices ---- */

static bool is_contig(const cn_tensor *t) {
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != expect) return false;
        expect *= t->shape[i];
    }
    return true;
}

static bool same_shape(const cn_tensor *a, const cn_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

/* Keeps src's storage alive until its device has passed everything queued
 * so far (an async host-to-device copy reads it later). */
typedef struct keep_entry {
    cn_storage *s;
    const cn_backend *b;
    int index;
    void *ev;
    struct keep_entry *next;
} keep_entry;
static keep_entry *keep_list;
static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;

/* Releases the kept storages whose event has passed (all of them when
 * `all`, after a synchronize). */
static void keep_collect(bool all) {
    pthread_mutex_lock(&keep_lock);
    keep_entry **p = &keep_list;
    keep_entry *done = NULL;
    while (*p) {
        keep_entry *e = *p;
        if (all || e->b->event_query(e->ev)) {
            *p = e->next;
            e->next = done;
            done = e;
        } else {
            p = &e->next;
        }
    }
    pthread_mutex_unlock(&keep_lock);
    while (done) {
        keep_entry *n = done->next;
        done->b->event_free(done->ev);
        cn_storage_release(done->s);
        free(done);
        done = n;
    }
}

static int keep_alive(const cn_backend *b, int index, cn_storage *s) {
    keep_collect(false);
    keep_entry *e = malloc(sizeof *e);
    void *ev = e ? b->event_record(index) : NULL;
    if (!ev) {
        free(e);
        /* No event: wait instead, which is always correct. */
        return b->synchronize(index);
    }
    __atomic_add_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL);
    e->s = s;
    e->b = b;
    e->index = index;
    e->ev = ev;
    pthread_mutex_lock(&keep_lock);
    e->next = keep_list;
    keep_list = e;
    pthread_mutex_unlock(&keep_lock);
    return CN_OK;
}

int cn_transfer(cn_tensor *dst, const cn_tensor *src, bool async) {
    const cn_backend *bd = cn_backend_of(dst), *bs = cn_backend_of(src);
    cn_device dd = cn_t_device(dst), ds = cn_t_device(src);
    if (cn_device_equal(dd, ds)) return bd->copy(dst, src);
    /* Across devices: raw bytes of a contiguous tensor of dst's dtype and
     * shape. Make one on the source side first (the cast and any layout
     * change happen on the source device), then move the bytes. */
    cn_tensor *s = NULL;
    if (src->dtype == dst->dtype && same_shape(src, dst) && is_contig(src)) {
        s = cn_retain((cn_tensor *)src);
    } else {
        s = bs == &cn_backend_cpu ? cn_t_empty((cn_dtype)dst->dtype, dst->ndim, dst->shape)
                                  : cn_t_empty_on(ds, (cn_dtype)dst->dtype, dst->ndim, dst->shape);
        if (!s) return CN_ENOMEM;
        int rc = bs->copy(s, src);
        if (rc < 0) {
            cn_release(s);
            return rc;
        }
    }
    size_t n = (size_t)cn_shape_numel(dst->ndim, dst->shape) * cn_dsize((cn_dtype)dst->dtype);
    size_t es = cn_dsize((cn_dtype)dst->dtype);
    size_t soff = (size_t)s->offset * es;
    int rc = CN_OK;
    cn_tensor *d = NULL;
    bool direct = is_contig(dst);
    if (direct) {
        d = cn_retain(dst);
    } else {
        d = cn_t_empty_on(dd, (cn_dtype)dst->dtype, dst->ndim, dst->shape);
        if (!d) {
            cn_release(s);
            return CN_ENOMEM;
        }
    }
    size_t doff = (size_t)d->offset * es;
    if (n == 0) {
        /* nothing to move */
    } else if (bs == &cn_backend_cpu) {
        rc = bd->write(d->storage, doff, (const char *)s->storage->data + soff, n, async);
        if (rc == 0 && async) rc = keep_alive(bd, dd.index, s->storage);
    } else if (bd == &cn_backend_cpu) {
        rc = bs->read(s->storage, soff, (char *)d->storage->data + doff, n);
    } else if (bs == bd) {
        rc = bs->copy_bytes(d->storage, doff, s->storage, soff, n);
    } else {
        /* Two device kinds: through a host buffer. */
        void *tmp = cn_alloc(n);
        if (!tmp) rc = cn_failc(CN_ENOMEM, "to: out of memory for %zu bytes of staging", n);
        if (rc == 0) rc = bs->read(s->storage, soff, tmp, n);
        if (rc == 0) rc = bd->write(d->storage, doff, tmp, n, false);
        cn_free(tmp);
    }
    if (rc == 0 && !direct) rc = bd->copy(dst, d);
    cn_release(d);
    cn_release(s);
    return rc;
}

cn_tensor *cn_t_to(cn_tensor *t, cn_device d, bool async) {
    d = cn_device_here(d);
    if (cn_device_equal(cn_t_device(t), d)) return cn_retain(t);
    if (!cn_backend_for(d, "to")) return NULL;
    cn_tensor *o = cn_t_empty_on(d, (cn_dtype)t->dtype, t->ndim, t->shape);
    if (!o) return NULL;
    if (cn_transfer(o, t, async) < 0) {
        cn_release(o);
        return NULL;
    }
    return o;
}

cn_tensor *cn_t_to_host(cn_tensor *t) { return cn_t_to(t, CN_CPU, false); }

cn_tensor *cn_t_contiguous(cn_tensor *t) {
    if (!t) return NULL;
    if (cn_is_contiguous(t)) return cn_retain(t);
    if (!t->storage) return cn_fail("contiguous: the tensor is symbolic (no data)");
    cn_tensor *c = cn_t_empty_on(cn_t_device(t), (cn_dtype)t->dtype, t->ndim, t->shape);
    if (c && cn_backend_of(t)->copy(c, t) < 0) {
        cn_release(c);
        return NULL;
    }
    return c;
}

cn_tensor *cn_t_host_contiguous(cn_tensor *t) {
    if (!t) return NULL;
    if (cn_t_on_cpu(t)) return cn_t_contiguous(t);
    return cn_t_to_host(t); /* a transfer's result is contiguous */
}

int cn_t_read(const cn_tensor *t, cn_dtype dt, void *buf) {
    cn_storage s = {.data = buf, .nbytes = (size_t)cn_shape_numel(t->ndim, t->shape) * cn_dsize(dt),
                    .refcount = 1};
    cn_tensor d = {.refcount = 1, .magic = CN_T_LIVE, .dtype = (uint8_t)dt, .ndim = t->ndim, .storage = &s};
    memcpy(d.shape, t->shape, sizeof d.shape);
    cn_contiguous_strides(t->ndim, t->shape, d.strides);
    return cn_transfer(&d, t, false);
}

int cn_t_write(cn_tensor *t, cn_dtype dt, const void *buf) {
    cn_storage s = {.data = (void *)buf,
                    .nbytes = (size_t)cn_shape_numel(t->ndim, t->shape) * cn_dsize(dt),
                    .refcount = 1};
    cn_tensor d = {.refcount = 1, .magic = CN_T_LIVE, .dtype = (uint8_t)dt, .ndim = t->ndim, .storage = &s};
    memcpy(d.shape, t->shape, sizeof d.shape);
    cn_contiguous_strides(t->ndim, t->shape, d.strides);
    return cn_transfer(t, &d, false);
}

/* ---- the public device functions ---- */

int cn_device_count(cn_device_kind kind) {
    if ((int)kind < 0 || kind >= CN_DEVICE_KIND_COUNT || !cn_backends[kind]) return 0;
    return cn_backends[kind]->device_count();
}

int cn_device_get_info(cn_device d, cn_device_info *info) {
    if (!info) return cn_failc(CN_EINVAL, "device_get_info: info is NULL");
    const cn_backend *b = cn_backend_for(d, "device_get_info");
    if (!b) return CN_EINVAL;
    memset(info, 0, sizeof *info);
    info->device = d;
    return b->device_info(d.index, info);
}

int cn_device_synchronize(cn_device d) {
    const cn_backend *b = cn_backend_for(d, "device_synchronize");
    if (!b) return CN_EINVAL;
    int rc = b->synchronize(d.index);
    keep_collect(false);
    return rc;
}

struct cn_event {
    const cn_backend *b;
    void *ev;
};

cn_event *cn_event_record(cn_device d) {
    const cn_backend *b = cn_backend_for(d, "event_record");
    if (!b) return NULL;
    cn_event *e = malloc(sizeof *e);
    if (!e) return cn_fail("event_record: out of memory");
    e->b = b;
    e->ev = b->event_record(d.index);
    if (!e->ev) {
        free(e);
        return NULL;
    }
    return e;
}

int cn_event_synchronize(cn_event *e) {
    if (!e) return cn_failc(CN_EINVAL, "event_synchronize: the event is NULL");
    int rc = e->b->event_synchronize(e->ev);
    keep_collect(false);
    return rc;
}

bool cn_event_query(cn_event *e) { return !e || e->b->event_query(e->ev); }

void cn_event_free(cn_event *e) {
    if (!e) return;
    e->b->event_free(e->ev);
    free(e);
}

int cn_device_memory_stats(cn_device d, cn_memory_stats *stats) {
    if (!stats) return cn_failc(CN_EINVAL, "device_memory_stats: stats is NULL");
    const cn_backend *b = cn_backend_for(d, "device_memory_stats");
    if (!b) return CN_EINVAL;
    memset(stats, 0, sizeof *stats);
    return b->memory_stats(d.index, stats);
}

size_t cn_device_empty_cache(cn_device d) {
    const cn_backend *b = cn_backend_for(d, "device_empty_cache");
    if (!b) return 0;
    if (d.kind != CN_DEVICE_CPU) keep_collect(false);
    return b->empty_cache(d.index);
}
