/* Indexing: t[key] and t[key] = value, with NumPy's (and PyTorch's) rules.
 *
 * Basic indexing (ints, slices with any step, None, Ellipsis) gives a view:
 * slices, squeezes and unsqueezes of the tensor. Advanced indexing (integer
 * tensors or lists, boolean masks) gives a copy: the indexed axes are merged
 * into one, picked with index_select by a linear index computed on the host,
 * and the result reshaped; several advanced indices broadcast together, and
 * when they are not adjacent their axes go first (NumPy's rule). Gradients
 * flow through both kinds.
 *
 * Assignment writes through the same basic view (copy_ or fill_); with a
 * boolean mask and one value it is a where(); other advanced assignments
 * copy element by element (slow for many indices). */
#include "common.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ITEMS 64

enum { IX_INT, IX_SLICE, IX_NONE, IX_ELLIPSIS, IX_TENSOR, IX_BOOL };

typedef struct {
    int kind;
    int64_t i;                 /* IX_INT */
    int64_t start, stop, step; /* IX_SLICE, library conventions (CN_BEGIN/CN_END) */
    cn_tensor *t;              /* IX_TENSOR (integer) and IX_BOOL: owned */
} ix_item;

typedef struct {
    ix_item it[MAX_ITEMS];
    int n;
} ix_key;

static void key_free(ix_key *k) {
    for (int i = 0; i < k->n; i++) cn_release(k->it[i].t);
    k->n = 0;
}

static int slice_bound(PyObject *o, int64_t dflt, int64_t *out) {
    if (o == Py_None) {
        *out = dflt;
        return 0;
    }
    return cnpy_as_int64(o, out) ? 0 : -1;
}

static int parse_item(PyObject *o, ix_item *it) {
    memset(it, 0, sizeof *it);
    if (o == Py_None) {
        it->kind = IX_NONE;
        return 0;
    }
    if (o == Py_Ellipsis) {
        it->kind = IX_ELLIPSIS;
        return 0;
    }
    if (PySlice_Check(o)) {
        PySliceObject *s = (PySliceObject *)o;
        it->kind = IX_SLICE;
        if (slice_bound(s->step, 1, &it->step) < 0) return -1;
        if (it->step == 0) {
            PyErr_SetString(PyExc_ValueError, "slice step cannot be zero");
            return -1;
        }
        bool fwd = it->step > 0;
        if (slice_bound(s->start, fwd ? CN_BEGIN : CN_END, &it->start) < 0) return -1;
        if (slice_bound(s->stop, fwd ? CN_END : CN_BEGIN, &it->stop) < 0) return -1;
        return 0;
    }
    if (PyBool_Check(o)) {
        PyErr_SetString(PyExc_IndexError, "indexing with a Python bool is not supported; use a bool tensor");
        return -1;
    }
    if (PyLong_Check(o)) {
        it->kind = IX_INT;
        return cnpy_as_int64(o, &it->i) ? 0 : -1;
    }
    cn_tensor *t = NULL;
    if (Tensor_Check(o)) {
        t = cn_retain(TT(o));
    } else if (PyList_Check(o) || PyTuple_Check(o) || PyObject_CheckBuffer(o)) {
        t = cnpy_tensor_from_data(o, false, CN_F32);
        if (!t) return -1;
    } else if (PyIndex_Check(o)) {
        it->kind = IX_INT;
        return cnpy_as_int64(o, &it->i) ? 0 : -1;
    } else {
        PyErr_Format(PyExc_IndexError, "only integers, slices (`:`), ellipsis (`...`), None and integer "
                     "or bool tensors are valid indices (got %s)", Py_TYPE(o)->tp_name);
        return -1;
    }
    cn_dtype dt = cn_tensor_dtype(t);
    if (dt == CN_BOOL || dt == CN_U8) {
        if (cn_ndim(t) == 0) {
            cn_release(t);
            PyErr_SetString(PyExc_IndexError, "indexing with a 0-d bool tensor is not supported");
            return -1;
        }
        it->kind = IX_BOOL;
        it->t = t;
        return 0;
    }
    if (cn_dtype_is_float(dt)) {
        cn_release(t);
        PyErr_SetString(PyExc_IndexError, "tensors used as indices must be integer or bool tensors");
        return -1;
    }
    if (cn_ndim(t) == 0) {
        int64_t v;
        int rc;
        CNPY_INT(rc, cn_copy_to_buffer(t, CN_I64, &v, sizeof v));
        cn_release(t);
        if (rc < 0) {
            cnpy_raise(rc);
            return -1;
        }
        it->kind = IX_INT;
        it->i = v;
        return 0;
    }
    it->kind = IX_TENSOR;
    it->t = t;
    return 0;
}

static int parse_key(PyObject *key, ix_key *k) {
    k->n = 0;
    if (!PyTuple_Check(key)) {
        if (parse_item(key, &k->it[0]) < 0) return -1;
        k->n = 1;
        return 0;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(key);
    if (n > MAX_ITEMS) {
        PyErr_Format(PyExc_IndexError, "too many indices (%zd)", n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (parse_item(PyTuple_GET_ITEM(key, i), &k->it[i]) < 0) {
            key_free(k);
            return -1;
        }
        k->n = (int)i + 1;
    }
    return 0;
}

/* An advanced index on one axis of the basic view: its values on the host,
 * normalised (negatives wrapped, range checked). */
typedef struct {
    int axis;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    int64_t *v; /* PyMem_Malloc'd */
    int64_t n;
} adv_index;

typedef struct {
    cn_tensor *view; /* the basic view (a new reference) */
    adv_index adv[CN_MAX_DIMS];
    int nadv;
} indexed;

static void indexed_free(indexed *r) {
    cn_release(r->view);
    r->view = NULL;
    for (int i = 0; i < r->nadv; i++) PyMem_Free(r->adv[i].v);
    r->nadv = 0;
}

static int add_adv(indexed *r, int axis, int ndim, const int64_t *shape, int64_t *v, int64_t n) {
    if (r->nadv >= CN_MAX_DIMS) {
        PyMem_Free(v);
        PyErr_SetString(PyExc_IndexError, "too many advanced indices");
        return -1;
    }
    adv_index *a = &r->adv[r->nadv++];
    a->axis = axis;
    a->ndim = ndim;
    memcpy(a->shape, shape, (size_t)ndim * sizeof *shape);
    a->v = v;
    a->n = n;
    return 0;
}

/* Integer index tensor -> host values, checked against the axis size. */
static int int_index(indexed *r, int axis, cn_tensor *t, int64_t size) {
    int64_t n = cn_numel(t);
    int64_t *v = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = 0;
    if (n > 0) CNPY_INT(rc, cn_copy_to_buffer(t, CN_I64, v, (size_t)n * sizeof *v));
    if (rc < 0) {
        PyMem_Free(v);
        cnpy_raise(rc);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < -size || v[i] >= size) {
            PyErr_Format(PyExc_IndexError, "index %lld is out of bounds for dimension %d with size %lld",
                         (long long)v[i], axis, (long long)size);
            PyMem_Free(v);
            return -1;
        }
        if (v[i] < 0) v[i] += size;
    }
    return add_adv(r, axis, cn_ndim(t), cn_shape(t), v, n);
}

/* Bool mask over axes [axis, axis + k) of view -> k index arrays (its
 * nonzeros). */
static int mask_index(indexed *r, int axis, cn_tensor *m, cn_tensor *view) {
    int k = cn_ndim(m);
    const int64_t *ms = cn_shape(m);
    const int64_t *vs = cn_shape(view);
    if (axis + k > cn_ndim(view)) {
        PyErr_SetString(PyExc_IndexError, "too many indices: the mask has more dims than are left");
        return -1;
    }
    for (int i = 0; i < k; i++)
        if (ms[i] != vs[axis + i]) {
            PyErr_Format(PyExc_IndexError, "the shape of the mask at index %d (size %lld) does not "
                         "match the indexed tensor's (size %lld)", i, (long long)ms[i],
                         (long long)vs[axis + i]);
            return -1;
        }
    int64_t n = cn_numel(m);
    bool *b = PyMem_Malloc((size_t)(n > 0 ? n : 1));
    if (!b) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = 0;
    if (n > 0) CNPY_INT(rc, cn_copy_to_buffer(m, CN_BOOL, b, (size_t)n));
    if (rc < 0) {
        PyMem_Free(b);
        cnpy_raise(rc);
        return -1;
    }
    int64_t nnz = 0;
    for (int64_t i = 0; i < n; i++) nnz += b[i] != 0;
    for (int d = 0; d < k; d++) {
        int64_t *v = PyMem_Malloc((size_t)(nnz > 0 ? nnz : 1) * sizeof *v);
        if (!v) {
            PyMem_Free(b);
            PyErr_NoMemory();
            return -1;
        }
        int64_t j = 0;
        for (int64_t i = 0; i < n; i++) {
            if (!b[i]) continue;
            /* coordinate d of flat position i */
            int64_t rem = i;
            for (int e = k - 1; e > d; e--) rem /= ms[e];
            v[j++] = rem % ms[d];
        }
        if (add_adv(r, axis + d, 1, &nnz, v, nnz) < 0) {
            PyMem_Free(b);
            return -1;
        }
    }
    PyMem_Free(b);
    return 0;
}

/* The basic view of x under key, and the advanced indices on its axes. */
static int apply_key(cn_tensor *x, ix_key *k, indexed *r) {
    memset(r, 0, sizeof *r);
    cnpy_wait_idle(); /* parsing the key may have run Python code */
    int nd = cn_ndim(x);
    int consumed = 0, nell = 0;
    for (int i = 0; i < k->n; i++) {
        ix_item *it = &k->it[i];
        if (it->kind == IX_INT || it->kind == IX_SLICE || it->kind == IX_TENSOR) consumed++;
        else if (it->kind == IX_BOOL) consumed += cn_ndim(it->t);
        else if (it->kind == IX_ELLIPSIS) nell++;
    }
    if (nell > 1) {
        PyErr_SetString(PyExc_IndexError, "an index can only have a single ellipsis ('...')");
        return -1;
    }
    if (consumed > nd) {
        PyErr_Format(PyExc_IndexError, "too many indices for tensor of dimension %d", nd);
        return -1;
    }
    cn_tensor *cur = cn_retain(x);
    int axis = 0;
    for (int i = 0; i < k->n; i++) {
        ix_item *it = &k->it[i];
        cn_tensor *next = NULL;
        switch (it->kind) {
        case IX_NONE:
            if (cn_ndim(cur) >= CN_MAX_DIMS) {
                PyErr_Format(PyExc_IndexError, "indexing would give more than %d dims", CN_MAX_DIMS);
                goto fail;
            }
            next = CNPY_CALL(cn_unsqueeze(cur, axis));
            axis++;
            break;
        case IX_ELLIPSIS:
            axis += nd - consumed;
            continue;
        case IX_INT: {
            int64_t size = cn_shape(cur)[axis];
            int64_t v = it->i;
            if (v < -size || v >= size) {
                PyErr_Format(PyExc_IndexError, "index %lld is out of bounds for dimension %d with size %lld",
                             (long long)v, axis, (long long)size);
                goto fail;
            }
            if (v < 0) v += size;
            cn_tensor *s = CNPY_CALL(cn_slice(cur, axis, v, v + 1, 1));
            next = s ? CNPY_CALL(cn_squeeze(s, axis)) : NULL;
            cn_release(s);
            break;
        }
        case IX_SLICE:
            next = CNPY_CALL(cn_slice(cur, axis, it->start, it->stop, it->step));
            axis++;
            break;
        case IX_TENSOR:
            if (int_index(r, axis, it->t, cn_shape(cur)[axis]) < 0) goto fail;
            axis++;
            continue;
        case IX_BOOL:
            if (mask_index(r, axis, it->t, cur) < 0) goto fail;
            axis += cn_ndim(it->t);
            continue;
        }
        if (!next) {
            cnpy_raise(0);
            goto fail;
        }
        cn_release(cur);
        cur = next;
    }
    r->view = cur;
    return 0;
fail:
    cn_release(cur);
    indexed_free(r);
    return -1;
}

/* Broadcast shape of the advanced indices (NumPy's rule). */
static int adv_broadcast(const indexed *r, int *bnd, int64_t *bshape) {
    int nb = 0;
    for (int m = 0; m < r->nadv; m++)
        if (r->adv[m].ndim > nb) nb = r->adv[m].ndim;
    for (int i = 0; i < nb; i++) bshape[i] = 1;
    for (int m = 0; m < r->nadv; m++) {
        const adv_index *a = &r->adv[m];
        for (int i = 0; i < a->ndim; i++) {
            int j = nb - a->ndim + i;
            int64_t s = a->shape[i];
            if (s == bshape[j] || s == 1) continue;
            if (bshape[j] == 1) {
                bshape[j] = s;
                continue;
            }
            PyErr_SetString(PyExc_IndexError, "shape mismatch: indexing tensors could not be broadcast "
                                              "together");
            return -1;
        }
    }
    *bnd = nb;
    return 0;
}

/* Value of advanced index m at flat position j of the broadcast shape. */
static int64_t adv_at(const adv_index *a, int nb, const int64_t *bshape, int64_t j) {
    int64_t pos = 0, mult = 1;
    for (int i = nb - 1; i >= 0; i--) {
        int64_t c = j % bshape[i];
        j /= bshape[i];
        int ai = i - (nb - a->ndim);
        if (ai >= 0) {
            if (a->shape[ai] != 1) pos += c * mult;
            mult *= a->shape[ai];
        }
    }
    return a->v[pos];
}

static bool adv_adjacent(const indexed *r) {
    for (int m = 1; m < r->nadv; m++)
        if (r->adv[m].axis != r->adv[m - 1].axis + 1) return false;
    return true;
}

static cn_tensor *gather_advanced(indexed *r) {
    int nb;
    int64_t bshape[CN_MAX_DIMS];
    if (adv_broadcast(r, &nb, bshape) < 0) return NULL;
    int64_t nB = 1;
    for (int i = 0; i < nb; i++) nB *= bshape[i];
    cn_tensor *view = r->view;
    int nd = cn_ndim(view);
    const int64_t *vs = cn_shape(view);
    int k = r->nadv;
    bool adjacent = adv_adjacent(r);
    int a1 = adjacent ? r->adv[0].axis : 0;
    /* Axis order: the advanced axes at a1 (moved to the front when apart). */
    int perm[CN_MAX_DIMS], np = 0;
    int64_t pshape[CN_MAX_DIMS];
    if (adjacent) {
        for (int i = 0; i < nd; i++) perm[np++] = i;
    } else {
        for (int m = 0; m < k; m++) perm[np++] = r->adv[m].axis;
        for (int i = 0; i < nd; i++) {
            bool is_adv = false;
            for (int m = 0; m < k; m++) is_adv |= r->adv[m].axis == i;
            if (!is_adv) perm[np++] = i;
        }
    }
    for (int i = 0; i < nd; i++) pshape[i] = vs[perm[i]];
    /* Linear index into the k merged axes. */
    int64_t *lin = PyMem_Malloc((size_t)(nB > 0 ? nB : 1) * sizeof *lin);
    if (!lin) {
        PyErr_NoMemory();
        return NULL;
    }
    for (int64_t j = 0; j < nB; j++) {
        int64_t l = 0;
        for (int m = 0; m < k; m++) l = l * pshape[a1 + m] + adv_at(&r->adv[m], nb, bshape, j);
        lin[j] = l;
    }
    int64_t merged = 1;
    for (int m = 0; m < k; m++) merged *= pshape[a1 + m];
    int64_t mshape[CN_MAX_DIMS], oshape[CN_MAX_DIMS];
    int mn = 0, on = 0;
    for (int i = 0; i < a1; i++) mshape[mn++] = oshape[on++] = pshape[i];
    mshape[mn++] = merged;
    for (int i = 0; i < nb; i++) oshape[on++] = bshape[i];
    for (int i = a1 + k; i < nd; i++) mshape[mn++] = oshape[on++] = pshape[i];
    if (on > CN_MAX_DIMS) {
        PyMem_Free(lin);
        PyErr_Format(PyExc_IndexError, "indexing would give more than %d dims", CN_MAX_DIMS);
        return NULL;
    }
    cn_tensor *res;
    CNPY_SCOPE_BEGIN();
    cn_tensor *p = adjacent ? view : cn_permute(view, perm, nd);
    cn_tensor *li = cn_from_data(CN_I64, 1, &nB, lin);
    res = cn_reshape(cn_index_select(cn_reshape(p, mn, mshape), a1, li), on, oshape);
    CNPY_SCOPE_END_KEEP(res);
    PyMem_Free(lin);
    if (!res) cnpy_raise(0);
    return res;
}

PyObject *cnpy_getitem(PyObject *self, PyObject *key) {
    cn_tensor *x = TT(self);
    ix_key k;
    if (parse_key(key, &k) < 0) return NULL;
    indexed r;
    int rc = apply_key(x, &k, &r);
    key_free(&k);
    if (rc < 0) return NULL;
    if (r.nadv == 0) {
        cn_tensor *v = r.view;
        r.view = NULL;
        indexed_free(&r);
        return cnpy_wrap(v);
    }
    cn_tensor *res = gather_advanced(&r);
    indexed_free(&r);
    return res ? cnpy_wrap(res) : NULL;
}

/* ---- assignment ---- */

static int assign_basic(cn_tensor *view, PyObject *value) {
    double v;
    long long iv;
    int kind = Tensor_Check(value) ? 0 : cnpy_scalar_kind(value, &v, &iv);
    int rc;
    if (kind) {
        if (cn_tensor_dtype(view) == CN_I64 && kind != CNPY_FLOAT) {
            int64_t x = (int64_t)iv;
            cn_tensor *s = CNPY_CALL(cn_from_data(CN_I64, 0, NULL, &x));
            if (!s) return cnpy_raise_int(0);
            CNPY_INT(rc, cn_copy_(view, s));
            cn_release(s);
        } else {
            CNPY_INT(rc, cn_fill_(view, v));
        }
    } else {
        cn_tensor *s = cnpy_as_tensor(value, view);
        if (!s) return -1;
        CNPY_INT(rc, cn_copy_(view, s));
        cn_release(s);
    }
    return rc < 0 ? cnpy_raise_int(rc) : 0;
}

/* view[mask] = one value: where(mask, value, view) written back. */
static int assign_mask(cn_tensor *view, int axis, cn_tensor *mask, cn_tensor *val) {
    int nd = cn_ndim(view), k = cn_ndim(mask);
    int64_t mshape[CN_MAX_DIMS];
    for (int i = 0; i < nd; i++) mshape[i] = 1;
    for (int i = 0; i < k; i++) mshape[axis + i] = cn_shape(mask)[i];
    int rc;
    cn_tensor *w;
    CNPY_SCOPE_BEGIN();
    cn_tensor *m = cn_reshape(cn_cast(mask, CN_BOOL), nd, mshape);
    cn_tensor *v = cn_reshape(cn_cast(val, cn_tensor_dtype(view)), 0, NULL);
    w = cn_where(m, v, view);
    rc = w ? cn_copy_(view, w) : CN_EINVAL;
    cn_scope_end();
    return rc < 0 ? cnpy_raise_int(rc) : 0;
}

static int assign_advanced(indexed *r, cn_tensor *val) {
    int nb;
    int64_t bshape[CN_MAX_DIMS];
    if (adv_broadcast(r, &nb, bshape) < 0) return -1;
    int64_t nB = 1;
    for (int i = 0; i < nb; i++) nB *= bshape[i];
    cn_tensor *view = r->view;
    int nd = cn_ndim(view);
    const int64_t *vs = cn_shape(view);
    int k = r->nadv;
    bool adjacent = adv_adjacent(r);
    /* The shape of view[key] (what the value broadcasts to). */
    int64_t R[CN_MAX_DIMS];
    int rn = 0, bpos;
    if (adjacent) {
        int a1 = r->adv[0].axis;
        for (int i = 0; i < a1; i++) R[rn++] = vs[i];
        bpos = rn;
        for (int i = 0; i < nb; i++) R[rn++] = bshape[i];
        for (int i = a1 + k; i < nd; i++) R[rn++] = vs[i];
    } else {
        bpos = 0;
        for (int i = 0; i < nb; i++) R[rn++] = bshape[i];
        for (int i = 0; i < nd; i++) {
            bool is_adv = false;
            for (int m = 0; m < k; m++) is_adv |= r->adv[m].axis == i;
            if (!is_adv) R[rn++] = vs[i];
        }
    }
    cn_tensor *V = CNPY_CALL(cn_broadcast_to(val, rn, R));
    if (!V) return cnpy_raise_int(0);
    int rc = 0;
    for (int64_t j = 0; j < nB && rc >= 0; j++) {
        CNPY_SCOPE_BEGIN();
        cn_tensor *tgt = view;
        for (int m = k - 1; m >= 0 && tgt; m--) {
            int ax = r->adv[m].axis;
            int64_t i = adv_at(&r->adv[m], nb, bshape, j);
            tgt = cn_squeeze(cn_slice(tgt, ax, i, i + 1, 1), ax);
        }
        cn_tensor *src = V;
        int64_t rem = j;
        for (int q = nb - 1; q >= 0 && src; q--) {
            int64_t c = rem % bshape[q];
            rem /= bshape[q];
            src = cn_squeeze(cn_slice(src, bpos + q, c, c + 1, 1), bpos + q);
        }
        rc = tgt && src ? cn_copy_(tgt, src) : CN_EINVAL;
        cn_scope_end();
    }
    cn_release(V);
    return rc < 0 ? cnpy_raise_int(rc) : 0;
}

/* x[key] = value where autograd must record it: the object takes
 * where(hit, scatter of value, x) over x's flattened positions (the key
 * applied to their numbers says which ones it reaches), so gradients reach
 * x outside the key and value inside it. A key that reaches one place twice
 * is refused (which write wins is not defined). */
static int setitem_recorded(PyObject *self, PyObject *key, cn_tensor *val) {
    cn_tensor *x = TT(self);
    int nd = cn_ndim(x);
    int64_t N = cn_numel(x), flat[1] = {N};
    cn_tensor *pos = CNPY_CALL(cn_reshape(cn_arange(0, (double)N, 1, CN_I64), nd, cn_shape(x)));
    PyObject *po = pos ? cnpy_wrap(pos) : NULL;
    PyObject *sel = po ? PyObject_GetItem(po, key) : NULL;
    Py_XDECREF(po);
    if (!sel) return -1;
    cn_tensor *s = TT(sel), *r = NULL;
    bool repeated = false;
    CNPY_SCOPE_BEGIN();
    cn_device dev = cn_tensor_device(x);
    /* Scatters add floats: integer and bool tensors (a traced program's)
     * go through f64 and back. */
    cn_dtype xd = cn_tensor_dtype(x), wd = cn_dtype_is_float(xd) ? xd : CN_F64;
    cn_tensor *idx = cn_to(cn_reshape(s, 1, (int64_t[]){-1}), dev);
    cn_tensor *v = cn_cast(val, wd);
    v = v ? cn_broadcast_to(v, cn_ndim(s), cn_shape(s)) : NULL;
    v = v ? cn_reshape(cn_contiguous(v), 1, (int64_t[]){-1}) : NULL;
    cn_tensor *zeros = cn_zeros_on(dev, wd, 1, flat);
    cn_tensor *ones = idx ? cn_cast(cn_ones_like(idx), wd) : NULL;
    cn_tensor *counts = ones ? cn_scatter_add(zeros, 0, idx, ones) : NULL;
    cn_tensor *most = counts && N && !cn_is_symbolic_tensor(counts) ? cn_max(counts, NULL, 0, false)
                                                                    : NULL;
    repeated = most && cn_item(most) > 1;
    if (!repeated && counts && v) {
        cn_tensor *hit = cn_gt(counts, cn_scalar(wd, 0));
        r = cn_where(hit, cn_scatter_add(zeros, 0, idx, v), cn_cast(cn_reshape(x, 1, flat), wd));
        r = cn_cast(cn_reshape(r, nd, cn_shape(x)), xd);
    }
    CNPY_SCOPE_END_KEEP(r);
    Py_DECREF(sel);
    if (repeated) {
        PyErr_SetString(PyExc_RuntimeError,
                        "assignment through a key that reaches one element more than once, "
                        "recorded for autograd: not supported (which write wins is undefined)");
        return -1;
    }
    if (!r) {
        cnpy_raise(0);
        return -1;
    }
    PyObject *out = cnpy_rebase(self, r, true);
    Py_XDECREF(out);
    return out ? 0 : -1;
}

int cnpy_setitem(PyObject *self, PyObject *key, PyObject *value) {
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "tensor elements cannot be deleted");
        return -1;
    }
    cn_tensor *x = TT(self);
    if (cnpy_check_inplace(x, value) < 0) return -1;
    if (cnpy_records_inplace(x, Tensor_Check(value) ? TT(value) : NULL)) {
        cn_tensor *val = cnpy_as_tensor(value, x);
        if (!val) return -1;
        int rc = setitem_recorded(self, key, val);
        cn_release(val);
        return rc;
    }
    ix_key k;
    if (parse_key(key, &k) < 0) return -1;
    indexed r;
    int rc = apply_key(x, &k, &r);
    if (rc < 0) {
        key_free(&k);
        return -1;
    }
    if (r.nadv == 0) {
        rc = assign_basic(r.view, value);
        key_free(&k);
        indexed_free(&r);
        return rc;
    }
    cn_tensor *val = cnpy_as_tensor(value, x);
    if (!val) {
        key_free(&k);
        indexed_free(&r);
        return -1;
    }
    /* One bool mask and one value: a single where(). */
    int nmask = 0, nother = 0, mask_item = -1;
    for (int i = 0; i < k.n; i++) {
        if (k.it[i].kind == IX_BOOL) {
            nmask++;
            mask_item = i;
        } else if (k.it[i].kind == IX_TENSOR) {
            nother++;
        }
    }
    if (nmask == 1 && nother == 0 && cn_numel(val) == 1) {
        int axis = r.adv[0].axis;
        rc = assign_mask(r.view, axis, k.it[mask_item].t, val);
    } else {
        rc = assign_advanced(&r, val);
    }
    cn_release(val);
    key_free(&k);
    indexed_free(&r);
    return rc;
}
