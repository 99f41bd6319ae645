/* The public functions that make tensors from values and read or write
 * their elements: they work on any device (new tensors go to the current
 * device; reads of a device tensor fetch the bytes), so they live above
 * the backends rather than in core. */
#include "backend.h"

#include <inttypes.h>
#include <math.h>

/* A tensor made on the CPU goes to the current device (cn_device_scope,
 * cn_set_default_device) before it is handed out. */
static cn_tensor *placed(cn_tensor *t) {
    if (!t) return NULL;
    cn_device d = cn_current_device();
    if (d.kind != CN_DEVICE_CPU) {
        cn_tensor *o = cn_t_to(t, d, false);
        cn_release(t);
        t = o;
    }
    return cn_scope_add(t);
}

cn_tensor *cn_empty(cn_dtype dt, int ndim, const int64_t *shape) {
    return cn_scope_add(cn_t_empty_on(cn_current_device(), dt, ndim, shape));
}
cn_tensor *cn_zeros(cn_dtype dt, int ndim, const int64_t *shape) {
    return cn_scope_add(cn_t_full_on(cn_current_device(), dt, ndim, shape, 0.0));
}
cn_tensor *cn_ones(cn_dtype dt, int ndim, const int64_t *shape) {
    return cn_scope_add(cn_t_full_on(cn_current_device(), dt, ndim, shape, 1.0));
}
cn_tensor *cn_full(cn_dtype dt, int ndim, const int64_t *shape, double value) {
    return cn_scope_add(cn_t_full_on(cn_current_device(), dt, ndim, shape, value));
}
cn_tensor *cn_scalar(cn_dtype dt, double value) { return placed(cn_t_scalar(dt, value)); }

cn_tensor *cn_empty_on(cn_device d, cn_dtype dt, int ndim, const int64_t *shape) {
    return cn_backend_for(d, "empty_on") ? cn_scope_add(cn_t_empty_on(d, dt, ndim, shape)) : NULL;
}
cn_tensor *cn_zeros_on(cn_device d, cn_dtype dt, int ndim, const int64_t *shape) {
    return cn_full_on(d, dt, ndim, shape, 0.0);
}
cn_tensor *cn_ones_on(cn_device d, cn_dtype dt, int ndim, const int64_t *shape) {
    return cn_full_on(d, dt, ndim, shape, 1.0);
}
cn_tensor *cn_full_on(cn_device d, cn_dtype dt, int ndim, const int64_t *shape, double value) {
    if (!cn_backend_for(d, "full_on")) return NULL;
    return cn_scope_add(cn_t_full_on(d, dt, ndim, shape, value));
}

cn_tensor *cn_full_like(const cn_tensor *t, double value) {
    if (!t) return NULL;
    CN_CHECK_LIVE("full_like", t, NULL);
    return cn_scope_add(
        cn_t_full_on(cn_t_device(t), (cn_dtype)t->dtype, t->ndim, t->shape, value));
}
cn_tensor *cn_zeros_like(const cn_tensor *t) { return cn_full_like(t, 0.0); }
cn_tensor *cn_ones_like(const cn_tensor *t) { return cn_full_like(t, 1.0); }

cn_tensor *cn_arange(double start, double stop, double step, cn_dtype dt) {
    if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step))
        return cn_fail("arange: start %g, stop %g, step %g: step must be non-zero and all finite",
                       start, stop, step);
    double count = ceil((stop - start) / step);
    if (count < 0) count = 0;
    if (count > (double)CN_MAX_NUMEL) return cn_fail("arange: %g elements is too many", count);
    int64_t n = (int64_t)count;
    cn_tensor *t = cn_t_empty(dt, 1, &n);
    if (!t) return NULL;
    /* Integer arithmetic where it is exact (beyond 2^53 too) and cannot
     * overflow: |start| and |start + n * step| below 2^62. */
    bool ints = cn_is_int_dtype(dt) && floor(start) == start && floor(step) == step &&
                fabs(start) < 0x1p62 && fabs(start) + (double)n * fabs(step) < 0x1p62;
    for (int64_t i = 0; i < n; i++) {
        if (ints)
            cn_store_i64(t->storage->data, dt, i, (int64_t)start + i * (int64_t)step);
        else
            cn_store_f64(t->storage->data, dt, i, start + (double)i * step);
    }
    return placed(t);
}

cn_tensor *cn_linspace(double start, double end, int64_t n, cn_dtype dt) {
    if (n < 0) return cn_fail("linspace: n is %" PRId64 ", must be >= 0", n);
    cn_tensor *t = cn_t_empty(dt, 1, &n);
    if (!t) return NULL;
    double step = n > 1 ? (end - start) / (double)(n - 1) : 0.0;
    /* Fill from both ends, as PyTorch does, so the last value is exactly end. */
    int64_t half = n > 1 ? n / 2 : 1; /* n == 1 gives start, as in NumPy and PyTorch */
    for (int64_t i = 0; i < n; i++) {
        double v = i < half ? start + step * (double)i : end - step * (double)(n - 1 - i);
        cn_store_f64(t->storage->data, dt, i, v);
    }
    return placed(t);
}

cn_tensor *cn_eye(int64_t n, int64_t m, cn_dtype dt) {
    if (n < 0 || m < 0) return cn_fail("eye: sizes %" PRId64 " x %" PRId64 " must be >= 0", n, m);
    int64_t shape[2] = {n, m};
    cn_tensor *t = cn_t_zeros(dt, 2, shape);
    if (!t) return NULL;
    for (int64_t i = 0; i < n && i < m; i++) cn_store_f64(t->storage->data, dt, i * m + i, 1.0);
    return placed(t);
}

cn_tensor *cn_from_data(cn_dtype dt, int ndim, const int64_t *shape, const void *data) {
    cn_tensor *t = cn_t_empty(dt, ndim, shape);
    if (!t) return NULL;
    size_t nbytes = (size_t)cn_shape_numel(ndim, shape) * cn_dsize(dt);
    if (nbytes && !data) {
        cn_release(t);
        return cn_fail("from_data: data is NULL");
    }
    if (nbytes) memcpy(t->storage->data, data, nbytes);
    return placed(t);
}

cn_tensor *cn_from_data_on(cn_device d, cn_dtype dt, int ndim, const int64_t *shape,
                           const void *data) {
    if (!cn_backend_for(d, "from_data_on")) return NULL;
    cn_tensor *t = cn_t_empty_on(d, dt, ndim, shape);
    if (!t) return NULL;
    size_t nbytes = (size_t)cn_shape_numel(ndim, shape) * cn_dsize(dt);
    if (nbytes && !data) {
        cn_release(t);
        return cn_fail("from_data_on: data is NULL");
    }
    if (nbytes && cn_t_write(t, dt, data) < 0) {
        cn_release(t);
        return NULL;
    }
    return cn_scope_add(t);
}

/* Element offset of idx, or -1 with an error. */
static int64_t elem_offset(const char *fn, const cn_tensor *t, const int64_t *idx) {
    if (!t->storage) {
        cn_fail("%s: the tensor is symbolic (a static-graph value) and holds no data", fn);
        return -1;
    }
    if (!idx && t->ndim > 0) {
        cn_fail("%s: idx is NULL for a tensor of rank %d", fn, t->ndim);
        return -1;
    }
    int64_t off = t->offset;
    for (int i = 0; i < t->ndim; i++) {
        int64_t k = idx[i] < 0 ? idx[i] + t->shape[i] : idx[i];
        if (k < 0 || k >= t->shape[i]) {
            char b[160];
            cn_fail("%s: index %" PRId64 " is out of range for axis %d of shape %s", fn, idx[i], i,
                    cn_fmt_shape(b, sizeof b, t->ndim, t->shape));
            return -1;
        }
        off += k * t->strides[i];
    }
    return off;
}

/* Element `off` of t's storage into one[] (8 bytes): read straight on the
 * CPU, fetched from another device. */
static const void *element(const char *fn, const cn_tensor *t, int64_t off, void *one) {
    size_t es = cn_dsize((cn_dtype)t->dtype);
    if (cn_t_on_cpu(t)) return (const char *)t->storage->data + (size_t)off * es;
    if (cn_backend_of(t)->read(t->storage, (size_t)off * es, one, es) < 0) {
        (void)fn;
        return NULL;
    }
    return one;
}

double cn_get(const cn_tensor *t, const int64_t *idx) {
    if (!t) return NAN;
    CN_CHECK_LIVE("get", t, NAN);
    int64_t off = elem_offset("get", t, idx);
    _Alignas(8) unsigned char one[8];
    const void *p = off < 0 ? NULL : element("get", t, off, one);
    return p ? cn_load_f64(p, (cn_dtype)t->dtype, 0) : NAN;
}

int64_t cn_get_int(const cn_tensor *t, const int64_t *idx) {
    if (!t) return 0;
    CN_CHECK_LIVE("get_int", t, 0);
    int64_t off = elem_offset("get_int", t, idx);
    _Alignas(8) unsigned char one[8];
    const void *p = off < 0 ? NULL : element("get_int", t, off, one);
    return p ? cn_load_i64(p, (cn_dtype)t->dtype, 0) : 0;
}

int cn_set(cn_tensor *t, const int64_t *idx, double value) {
    if (!t) return CN_EINVAL;
    CN_CHECK_LIVE("set", t, CN_EINVAL);
    if (t->requires_grad && cn_is_grad_enabled())
        return cn_failc(CN_ESTATE, "set: the tensor requires a gradient and in-place changes "
                                   "are not recorded; do it inside cn_no_grad_begin/end");
    int64_t off = elem_offset("set", t, idx);
    if (off < 0) return CN_EINVAL;
    if (cn_t_on_cpu(t)) {
        cn_store_f64(t->storage->data, (cn_dtype)t->dtype, off, value);
    } else {
        _Alignas(8) unsigned char one[8];
        size_t es = cn_dsize((cn_dtype)t->dtype);
        cn_store_f64(one, (cn_dtype)t->dtype, 0, value);
        int rc = cn_backend_of(t)->write(t->storage, (size_t)off * es, one, es, false);
        if (rc < 0) return rc;
    }
    cn_storage_bump(t->storage);
    return CN_OK;
}

double cn_item(const cn_tensor *t) {
    if (!t) return NAN;
    CN_CHECK_LIVE("item", t, NAN);
    if (cn_numel(t) != 1) {
        char b[160];
        cn_fail("item: the tensor has %" PRId64 " elements (shape %s), not 1", cn_numel(t),
                cn_fmt_shape(b, sizeof b, t->ndim, t->shape));
        return NAN;
    }
    int64_t zero[CN_MAX_DIMS] = {0};
    return cn_get(t, zero);
}

int cn_copy_to_buffer(const cn_tensor *t, cn_dtype dt, void *buf, size_t buf_bytes) {
    if (!t) return CN_EINVAL;
    CN_CHECK_LIVE("copy_to_buffer", t, CN_EINVAL);
    if (!t->storage) return cn_failc(CN_EINVAL, "copy_to_buffer: the tensor is symbolic");
    if ((unsigned)dt >= CN_DTYPE_COUNT) return cn_failc(CN_EINVAL, "copy_to_buffer: invalid dtype");
    size_t need = (size_t)cn_numel(t) * cn_dsize(dt);
    if (!buf && need > 0) return cn_failc(CN_EINVAL, "copy_to_buffer: buf is NULL");
    if (buf_bytes < need)
        return cn_failc(CN_EINVAL, "copy_to_buffer: buffer of %zu bytes, %zu needed", buf_bytes,
                        need);
    return cn_t_read(t, dt, buf);
}
