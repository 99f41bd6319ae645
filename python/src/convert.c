/* Between tensors and Python data: nested lists and numbers (tolist, item,
 * chutney.tensor), the buffer protocol (memoryview(t), numpy.asarray(t):
 * zero copy on the CPU) and from_numpy (zero copy the other way). */
#include "common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- buffer formats ---- */

static const char *dtype_format(cn_dtype dt) {
    switch (dt) {
    case CN_F32: return "f";
    case CN_F64: return "d";
    case CN_F16: return "e";
    case CN_I32: return "i";
    case CN_I64: return "q";
    case CN_U8: return "B";
    case CN_I8: return "b";
    case CN_BOOL: return "?";
    default: return NULL; /* bf16 has no buffer format (nor a NumPy dtype) */
    }
}

int cnpy_format_dtype(const char *fmt, Py_ssize_t itemsize, cn_dtype *dt) {
    if (!fmt) fmt = "B";
    if (*fmt == '@' || *fmt == '=' || *fmt == '<') fmt++;
    else if (*fmt == '>' || *fmt == '!') return -1; /* big-endian data */
    if (fmt[0] == 0 || fmt[1] != 0) return -1;
    switch (fmt[0]) {
    case 'f': *dt = CN_F32; break;
    case 'd': *dt = CN_F64; break;
    case 'e': *dt = CN_F16; break;
    case '?': *dt = CN_BOOL; break;
    case 'B': *dt = CN_U8; break;
    case 'b': *dt = CN_I8; break;
    case 'i': case 'l': case 'q': case 'n':
        if (itemsize == 4) *dt = CN_I32;
        else if (itemsize == 8) *dt = CN_I64;
        else return -1;
        break;
    default: return -1;
    }
    return (Py_ssize_t)cn_dtype_size(*dt) == itemsize ? 0 : -1;
}

/* ---- exporting: the buffer protocol ----
 *
 * The buffer is owned by an Export object holding a detached alias of the
 * tensor (a second tensor struct on the same storage): the memory stays valid
 * while a memoryview or NumPy array uses it, even if the tensor itself is
 * re-pointed elsewhere (an optimiser flattening its parameters) or freed. */

typedef struct {
    PyObject_HEAD
    cn_tensor *alias;
    Py_ssize_t shape[CN_MAX_DIMS];
    Py_ssize_t strides[CN_MAX_DIMS];
} ExportObject;

static void export_dealloc(PyObject *self) {
    cnpy_wait_idle();
    cn_release(((ExportObject *)self)->alias);
    if (cnpy_pending_releases) cnpy_drain_releases();
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject Export_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "chutney._C._BufferOwner",
    .tp_basicsize = sizeof(ExportObject),
    .tp_dealloc = export_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "keeps a tensor's memory alive for a buffer export",
};

static char zero_size_dummy[16];

static int tensor_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    cn_tensor *t = TT(self);
    view->obj = NULL;
    if (cn_tensor_device(t).kind != CN_DEVICE_CPU) {
        PyErr_SetString(PyExc_BufferError,
                        "the tensor is not on the CPU: copy it there first with .cpu()");
        return -1;
    }
    if (cn_requires_grad(t)) {
        PyErr_SetString(PyExc_RuntimeError, "can't export a tensor that requires grad to NumPy or a "
                                            "buffer: use tensor.detach().numpy()");
        return -1;
    }
    cn_dtype dt = cn_tensor_dtype(t);
    const char *fmt = dtype_format(dt);
    if (!fmt) {
        PyErr_Format(PyExc_TypeError, "%s has no buffer format (NumPy has no bfloat16): convert it "
                                      "first, e.g. .float()", cn_dtype_name(dt));
        return -1;
    }
    int n = cn_ndim(t);
    const int64_t *shape = cn_shape(t), *st = cn_strides(t);
    Py_ssize_t item = (Py_ssize_t)cn_dtype_size(dt);
    bool contig = cn_is_contiguous(t);
    if (!contig && (flags & PyBUF_STRIDES) != PyBUF_STRIDES) {
        PyErr_SetString(PyExc_BufferError, "the tensor is not contiguous: ask for strides or call "
                                           ".contiguous()");
        return -1;
    }
    ExportObject *ex = PyObject_New(ExportObject, &Export_Type);
    if (!ex) return -1;
    ex->alias = CNPY_CALL(cn_detach(t));
    if (!ex->alias) {
        Py_DECREF(ex);
        cnpy_raise(0);
        return -1;
    }
    int64_t numel = cn_numel(t);
    for (int i = 0; i < n; i++) {
        ex->shape[i] = (Py_ssize_t)shape[i];
        ex->strides[i] = (Py_ssize_t)st[i] * item;
    }
    void *data = numel > 0 ? cn_data(ex->alias) : zero_size_dummy;
    if (!data) {
        Py_DECREF(ex);
        cnpy_raise(0);
        return -1;
    }
    view->obj = (PyObject *)ex; /* the reference PyBuffer_Release drops */
    view->buf = data;
    view->len = (Py_ssize_t)numel * item;
    view->readonly = 0;
    view->itemsize = item;
    view->format = (flags & PyBUF_FORMAT) ? (char *)fmt : NULL;
    view->ndim = n;
    view->shape = (flags & PyBUF_ND) == PyBUF_ND ? ex->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? ex->strides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    if (!view->shape && n != 1 && numel != 1) {
        /* Only a flat view of contiguous data without shapes. */
        view->ndim = 1;
    }
    return 0;
}

PyBufferProcs cnpy_tensor_as_buffer = {
    .bf_getbuffer = tensor_getbuffer,
    .bf_releasebuffer = NULL,
};

/* ---- importing: from_numpy ----
 *
 * cn_from_buffer calls free_fn(data) when the last tensor on the memory goes;
 * a table from data pointers to the Py_buffer exports (several tensors may
 * wrap the same array) releases the right one. free_fn may run without the
 * GIL (a backward pass freeing its record) and, with it, in the middle of
 * the library's release of a chain, where releasing the array could run
 * Python code: so it only queues the pointer, and the queue is drained with
 * the GIL at the next safe point (after the call that freed it, or a
 * pending call). The table is used with the GIL held. */

typedef struct borrow {
    void *data;
    Py_buffer view;
    struct borrow *next;
} borrow;

#define NBUCKETS 256
static borrow *borrows[NBUCKETS];
static Py_ssize_t nborrows;

static pthread_mutex_t pending_mutex = PTHREAD_MUTEX_INITIALIZER;
static void **pending;
static size_t npending, cap_pending;
_Atomic int cnpy_pending_releases;

static size_t bucket_of(void *p) { return ((uintptr_t)p >> 4) % NBUCKETS; }

void cnpy_drain_releases(void) {
    for (;;) {
        pthread_mutex_lock(&pending_mutex);
        void *data = npending ? pending[--npending] : NULL;
        if (!npending) cnpy_pending_releases = 0;
        pthread_mutex_unlock(&pending_mutex);
        if (!data) return;
        borrow **pp = &borrows[bucket_of(data)];
        while (*pp && (*pp)->data != data) pp = &(*pp)->next;
        borrow *b = *pp;
        if (b) {
            *pp = b->next;
            nborrows--;
            PyBuffer_Release(&b->view);
            PyMem_RawFree(b);
        }
    }
}

static int drain_callback(void *unused) {
    (void)unused;
    cnpy_drain_releases();
    return 0;
}

static void borrow_free(void *data) {
    pthread_mutex_lock(&pending_mutex);
    if (npending == cap_pending) {
        size_t ncap = cap_pending ? 2 * cap_pending : 64;
        void **np = realloc(pending, ncap * sizeof *np);
        if (!np) { /* the buffer stays exported: a leak, not a crash */
            pthread_mutex_unlock(&pending_mutex);
            return;
        }
        pending = np;
        cap_pending = ncap;
    }
    pending[npending++] = data;
    cnpy_pending_releases = 1;
    pthread_mutex_unlock(&pending_mutex);
    /* In case no binding call follows soon (safe without the GIL). */
    if (Py_IsInitialized()) Py_AddPendingCall(drain_callback, NULL);
}

/* Shape and strides of a buffer whose axes, sorted by decreasing stride, are
 * contiguous: perm gives that order, so the tensor is a permutation of a
 * contiguous block. */
static bool permuted_contiguous(const Py_buffer *v, int *perm) {
    int n = v->ndim;
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = 1; i < n; i++) /* insertion sort, stable, by stride descending */
        for (int j = i; j > 0 && v->strides[perm[j - 1]] < v->strides[perm[j]]; j--) {
            int tmp = perm[j];
            perm[j] = perm[j - 1];
            perm[j - 1] = tmp;
        }
    Py_ssize_t expect = v->itemsize;
    for (int k = n - 1; k >= 0; k--) {
        int a = perm[k];
        if (v->shape[a] != 1 && v->strides[a] != expect) return false;
        expect *= v->shape[a];
    }
    return true;
}

static PyObject *f_from_numpy(PyObject *m, PyObject *arr) {
    if (Tensor_Check(arr)) {
        PyErr_SetString(PyExc_TypeError, "from_numpy: expected a NumPy array (or a buffer), not a Tensor");
        return NULL;
    }
    if (!PyObject_CheckBuffer(arr)) {
        PyErr_Format(PyExc_TypeError, "from_numpy: expected a NumPy array, not %s", Py_TYPE(arr)->tp_name);
        return NULL;
    }
    borrow *b = PyMem_RawMalloc(sizeof *b);
    if (!b) return PyErr_NoMemory();
    if (PyObject_GetBuffer(arr, &b->view, PyBUF_RECORDS) < 0) {
        /* Read-only memory (a NumPy array that is not writeable): a tensor could
         * write to it, so it is copied instead. */
        PyErr_Clear();
        PyMem_RawFree(b);
        cn_tensor *t = cnpy_tensor_from_data(arr, false, CN_F32);
        return t ? cnpy_wrap(t) : NULL;
    }
    Py_buffer *v = &b->view;
    cn_dtype dt;
    if (cnpy_format_dtype(v->format, v->itemsize, &dt) < 0) {
        PyErr_Format(PyExc_TypeError, "from_numpy: unsupported element type '%s' (float64, float32, "
                     "float16, int64, int32, uint8 and bool are)", v->format ? v->format : "B");
        PyBuffer_Release(v);
        PyMem_RawFree(b);
        return NULL;
    }
    if (v->ndim > CN_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "from_numpy: at most %d axes, not %d", CN_MAX_DIMS, v->ndim);
        PyBuffer_Release(v);
        PyMem_RawFree(b);
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS], pshape[CN_MAX_DIMS];
    int perm[CN_MAX_DIMS], inv[CN_MAX_DIMS];
    int64_t numel = 1;
    for (int i = 0; i < v->ndim; i++) {
        shape[i] = v->shape[i];
        numel *= shape[i];
    }
    bool neg = false;
    for (int i = 0; i < v->ndim; i++)
        if (v->strides[i] < 0 || v->strides[i] % v->itemsize) neg = true;
    if (numel == 0 || neg || !permuted_contiguous(v, perm)) {
        /* Empty, reversed or gapped strides: copied (the library has no
         * constructor for borrowed memory with strides). */
        PyBuffer_Release(v);
        PyMem_RawFree(b);
        cn_tensor *t = cnpy_tensor_from_data(arr, false, CN_F32);
        return t ? cnpy_wrap(t) : NULL;
    }
    for (int k = 0; k < v->ndim; k++) {
        pshape[k] = shape[perm[k]];
        inv[perm[k]] = k;
    }
    cn_tensor *base = CNPY_CALL(cn_from_buffer(dt, v->ndim, pshape, v->buf, borrow_free));
    if (!base) {
        PyBuffer_Release(v);
        PyMem_RawFree(b);
        return cnpy_raise(0);
    }
    b->data = v->buf;
    size_t k = bucket_of(b->data);
    b->next = borrows[k];
    borrows[k] = b;
    nborrows++;
    bool identity = true;
    for (int i = 0; i < v->ndim; i++)
        if (perm[i] != i) identity = false;
    if (identity) return cnpy_wrap(base);
    cn_tensor *t = CNPY_CALL(cn_permute(base, inv, v->ndim));
    cn_release(base);
    return cnpy_wrap(t);
}

static PyObject *f_num_borrowed(PyObject *m, PyObject *unused) {
    cnpy_drain_releases();
    return PyLong_FromSsize_t(nborrows);
}

/* ---- to Python ---- */

PyObject *cnpy_item(cn_tensor *t) {
    if (cn_numel(t) != 1) {
        PyErr_Format(PyExc_ValueError, "item(): a tensor with %lld elements cannot be converted to a "
                     "Python number (it needs one)", (long long)cn_numel(t));
        return NULL;
    }
    cn_dtype dt = cn_tensor_dtype(t);
    if (cn_dtype_is_float(dt)) {
        double v;
        int rc;
        CNPY_INT(rc, cn_copy_to_buffer(t, CN_F64, &v, sizeof v));
        if (rc < 0) return cnpy_raise(rc);
        return PyFloat_FromDouble(v);
    }
    if (dt == CN_BOOL) {
        bool v;
        int rc;
        CNPY_INT(rc, cn_copy_to_buffer(t, CN_BOOL, &v, sizeof v));
        if (rc < 0) return cnpy_raise(rc);
        return PyBool_FromLong(v);
    }
    int64_t v;
    int rc;
    CNPY_INT(rc, cn_copy_to_buffer(t, CN_I64, &v, sizeof v));
    if (rc < 0) return cnpy_raise(rc);
    return PyLong_FromLongLong(v);
}

static PyObject *build_list(const void *data, int kind, int ndim, const int64_t *shape, int64_t *pos) {
    if (ndim == 0) {
        int64_t i = (*pos)++;
        if (kind == 2) return PyFloat_FromDouble(((const double *)data)[i]);
        if (kind == 0) return PyBool_FromLong(((const bool *)data)[i]);
        return PyLong_FromLongLong(((const int64_t *)data)[i]);
    }
    PyObject *lst = PyList_New((Py_ssize_t)shape[0]);
    if (!lst) return NULL;
    for (int64_t i = 0; i < shape[0]; i++) {
        PyObject *x = build_list(data, kind, ndim - 1, shape + 1, pos);
        if (!x) {
            Py_DECREF(lst);
            return NULL;
        }
        PyList_SET_ITEM(lst, (Py_ssize_t)i, x);
    }
    return lst;
}

PyObject *cnpy_tolist(cn_tensor *t) {
    cn_dtype dt = cn_tensor_dtype(t);
    int kind = cnpy_dtype_category(dt);
    cn_dtype bdt = kind == 2 ? CN_F64 : kind == 1 ? CN_I64 : CN_BOOL;
    int64_t n = cn_numel(t);
    size_t bytes = (size_t)(n > 0 ? n : 1) * cn_dtype_size(bdt);
    void *buf = PyMem_RawMalloc(bytes);
    if (!buf) return PyErr_NoMemory();
    int rc = 0;
    if (n > 0) CNPY_INT(rc, cn_copy_to_buffer(t, bdt, buf, bytes));
    if (rc < 0) {
        PyMem_RawFree(buf);
        return cnpy_raise(rc);
    }
    int64_t pos = 0;
    PyObject *r = build_list(buf, kind, cn_ndim(t), cn_shape(t), &pos);
    PyMem_RawFree(buf);
    return r;
}

static PyObject *m_tolist(PyObject *self, PyObject *u) { return cnpy_tolist(TT(self)); }
static PyObject *m_item(PyObject *self, PyObject *u) { return cnpy_item(TT(self)); }

static PyObject *numpy_module;

static PyObject *to_numpy(PyObject *self, bool force) {
    if (!numpy_module) {
        numpy_module = PyImport_ImportModule("numpy");
        if (!numpy_module) return NULL;
    }
    PyObject *src = self;
    PyObject *tmp = NULL;
    cn_tensor *t = TT(self);
    if (force && (cn_requires_grad(t) || cn_tensor_device(t).kind != CN_DEVICE_CPU)) {
        cn_tensor *d = CNPY_CALL(cn_detach(t));
        cn_tensor *h = d && cn_tensor_device(d).kind != CN_DEVICE_CPU ? CNPY_CALL(cn_to(d, CN_CPU)) : NULL;
        if (h) {
            cn_release(d);
            d = h;
        }
        tmp = cnpy_wrap(d);
        if (!tmp) return NULL;
        src = tmp;
    } else if (cn_requires_grad(t)) {
        PyErr_SetString(PyExc_RuntimeError, "can't call numpy() on a tensor that requires grad: use "
                                            "tensor.detach().numpy()");
        return NULL;
    } else if (cn_tensor_device(t).kind != CN_DEVICE_CPU) {
        char buf[48];
        PyErr_Format(PyExc_TypeError, "can't convert a tensor on %s to numpy: use .cpu() first",
                     cn_device_str(cn_tensor_device(t), buf, sizeof buf));
        return NULL;
    }
    /* Through a memoryview: the buffer's error (bfloat16, ...) is the error,
     * where numpy.asarray(t) would go on to try __array__. */
    PyObject *mv = PyMemoryView_FromObject(src);
    Py_XDECREF(tmp);
    if (!mv) return NULL;
    PyObject *r = PyObject_CallMethod(numpy_module, "asarray", "O", mv);
    Py_DECREF(mv);
    return r;
}

static PyObject *m_numpy(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"force", NULL};
    int force = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:numpy", kwlist, &force)) return NULL;
    return to_numpy(self, force);
}

/* __array__(dtype=None): for numpy.array(t) and NumPy functions. */
static PyObject *m_array(PyObject *self, PyObject *args) {
    PyObject *dtype = Py_None;
    if (!PyArg_ParseTuple(args, "|O:__array__", &dtype)) return NULL;
    PyObject *a = to_numpy(self, false);
    if (!a || dtype == Py_None) return a;
    PyObject *r = PyObject_CallMethod(a, "astype", "O", dtype);
    Py_DECREF(a);
    return r;
}

/* ---- from Python data ---- */

#define KIND_NONE (-1)

/* Walks nested sequences: checks they are rectangular, finds the shape and
 * the widest kind of leaf (0 bool, 1 int, 2 float). */
static int walk(PyObject *o, int depth, int *ndim, int64_t *shape, int *kind) {
    if (Tensor_Check(o)) {
        cn_tensor *t = TT(o);
        if (cn_ndim(t) == 0) {
            int k = cnpy_dtype_category(cn_tensor_dtype(t));
            if (depth != *ndim && *ndim >= 0) goto ragged;
            *ndim = depth;
            if (k > *kind) *kind = k;
            return 0;
        }
        PyObject *lst = cnpy_tolist(t);
        if (!lst) return -1;
        int rc = walk(lst, depth, ndim, shape, kind);
        Py_DECREF(lst);
        return rc;
    }
    double v;
    long long iv;
    int k = cnpy_scalar_kind(o, &v, &iv);
    if (k) {
        if (*ndim >= 0 && depth != *ndim) goto ragged;
        *ndim = depth;
        int kk = k == CNPY_BOOL ? 0 : k == CNPY_INT ? 1 : 2;
        if (kk > *kind) *kind = kk;
        return 0;
    }
    if (PyUnicode_Check(o) || PyBytes_Check(o) || !PySequence_Check(o)) {
        PyErr_Format(PyExc_TypeError, "can't make a tensor from an object of type %s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    if (depth >= CN_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "tensor data nested deeper than %d levels", CN_MAX_DIMS);
        return -1;
    }
    PyObject *seq = PySequence_Fast(o, "expected a sequence");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (*ndim >= 0 && depth >= *ndim) {
        Py_DECREF(seq);
        goto ragged;
    }
    if (*ndim < 0 && shape[depth] < 0) shape[depth] = n;
    else if (shape[depth] != n) {
        Py_DECREF(seq);
        goto ragged;
    }
    if (n == 0 && *ndim < 0) {
        *ndim = depth + 1;
        Py_DECREF(seq);
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (walk(PySequence_Fast_GET_ITEM(seq, i), depth + 1, ndim, shape, kind) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    Py_DECREF(seq);
    return 0;
ragged:
    PyErr_SetString(PyExc_ValueError, "tensor data is ragged: every sequence at one depth must have the "
                                      "same length, and numbers must all be at the same depth");
    return -1;
}

static int fill(PyObject *o, int kind, void *buf, int64_t *pos) {
    if (Tensor_Check(o) && cn_ndim(TT(o)) > 0) {
        PyObject *lst = cnpy_tolist(TT(o));
        if (!lst) return -1;
        int rc = fill(lst, kind, buf, pos);
        Py_DECREF(lst);
        return rc;
    }
    if (Tensor_Check(o)) {
        PyObject *x = cnpy_item(TT(o));
        if (!x) return -1;
        int rc = fill(x, kind, buf, pos);
        Py_DECREF(x);
        return rc;
    }
    double v;
    long long iv;
    int k = cnpy_scalar_kind(o, &v, &iv);
    if (k) {
        int64_t i = (*pos)++;
        if (kind == 2) ((double *)buf)[i] = v;
        else if (kind == 1) ((int64_t *)buf)[i] = (int64_t)iv;
        else ((bool *)buf)[i] = iv != 0;
        return 0;
    }
    PyObject *seq = PySequence_Fast(o, "expected a sequence");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++)
        if (fill(PySequence_Fast_GET_ITEM(seq, i), kind, buf, pos) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    Py_DECREF(seq);
    return 0;
}

/* From a buffer (NumPy array, memoryview, array.array, bytes): a copy. */
static cn_tensor *from_buffer_copy(PyObject *o, bool has_dt, cn_dtype want) {
    Py_buffer v;
    if (PyObject_GetBuffer(o, &v, PyBUF_RECORDS_RO) < 0) return NULL;
    cn_dtype dt;
    if (cnpy_format_dtype(v.format, v.itemsize, &dt) < 0) {
        /* Other element types (int8, int16, uint32, ...): NumPy converts. */
        PyBuffer_Release(&v);
        PyObject *astype = PyObject_GetAttrString(o, "astype");
        if (!astype) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "unsupported buffer element type '%s'",
                         v.format ? v.format : "B");
            return NULL;
        }
        const char *to = "float64";
        if (v.format && strchr("bhilqBHILQnN", v.format[strlen(v.format) - 1])) to = "int64";
        PyObject *conv = PyObject_CallFunction(astype, "s", to);
        Py_DECREF(astype);
        if (!conv) return NULL;
        cn_tensor *t = from_buffer_copy(conv, has_dt, want);
        Py_DECREF(conv);
        return t;
    }
    if (v.ndim > CN_MAX_DIMS) {
        PyBuffer_Release(&v);
        PyErr_Format(PyExc_ValueError, "at most %d axes", CN_MAX_DIMS);
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS];
    for (int i = 0; i < v.ndim; i++) shape[i] = v.shape ? v.shape[i] : v.len / v.itemsize;
    cn_tensor *t;
    if (PyBuffer_IsContiguous(&v, 'C')) {
        t = CNPY_CALL(cn_from_data(dt, v.ndim, shape, v.buf));
    } else {
        void *tmp = PyMem_RawMalloc(v.len ? (size_t)v.len : 1);
        if (!tmp) {
            PyBuffer_Release(&v);
            PyErr_NoMemory();
            return NULL;
        }
        if (PyBuffer_ToContiguous(tmp, &v, v.len, 'C') < 0) {
            PyMem_RawFree(tmp);
            PyBuffer_Release(&v);
            return NULL;
        }
        t = CNPY_CALL(cn_from_data(dt, v.ndim, shape, tmp));
        PyMem_RawFree(tmp);
    }
    PyBuffer_Release(&v);
    if (!t) {
        cnpy_raise(0);
        return NULL;
    }
    if (has_dt && want != dt) {
        cn_tensor *c = CNPY_CALL(cn_cast(t, want));
        cn_release(t);
        if (!c) cnpy_raise(0);
        t = c;
    }
    return t;
}

cn_tensor *cnpy_tensor_from_data(PyObject *data, bool has_dt, cn_dtype want) {
    if (Tensor_Check(data)) {
        cn_tensor *t = TT(data);
        cn_tensor *r = has_dt && want != cn_tensor_dtype(t) ? CNPY_CALL(cn_cast(t, want)) : CNPY_CALL(cn_clone(t));
        if (!r) cnpy_raise(0);
        /* A clone is recorded; tensor() gives a new leaf. */
        if (r && cn_requires_grad(r)) {
            cn_tensor *d = CNPY_CALL(cn_detach(r));
            cn_release(r);
            r = d;
            if (!r) cnpy_raise(0);
        }
        return r;
    }
    if (PyObject_CheckBuffer(data) && !PyBytes_Check(data) && !PyByteArray_Check(data)) {
        /* NumPy scalars export buffers too, with ndim 0: fine. */
        return from_buffer_copy(data, has_dt, want);
    }
    int ndim = -1, kind = 0;
    int64_t shape[CN_MAX_DIMS];
    for (int i = 0; i < CN_MAX_DIMS; i++) shape[i] = -1;
    if (walk(data, 0, &ndim, shape, &kind) < 0) return NULL;
    if (ndim < 0) ndim = 0;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    /* An empty list is float32, as PyTorch. */
    if (n == 0) kind = 2;
    cn_dtype bdt = kind == 2 ? CN_F64 : kind == 1 ? CN_I64 : CN_BOOL;
    cn_dtype out = has_dt ? want : kind == 2 ? CN_F32 : kind == 1 ? CN_I64 : CN_BOOL;
    void *buf = PyMem_RawMalloc((size_t)(n > 0 ? n : 1) * cn_dtype_size(bdt));
    if (!buf) {
        PyErr_NoMemory();
        return NULL;
    }
    int64_t pos = 0;
    if (n > 0 && fill(data, kind, buf, &pos) < 0) {
        PyMem_RawFree(buf);
        return NULL;
    }
    cn_tensor *t = CNPY_CALL(cn_from_data(bdt, ndim, shape, buf));
    PyMem_RawFree(buf);
    if (t && out != bdt) {
        cn_tensor *c = CNPY_CALL(cn_cast(t, out));
        cn_release(t);
        t = c;
    }
    if (!t) cnpy_raise(0);
    return t;
}

PyMethodDef cnpy_convert_methods[] = {
    {"tolist", m_tolist, METH_NOARGS, "the values as nested lists of Python numbers"},
    {"item", m_item, METH_NOARGS, "the only element as a Python number"},
    {"numpy", (PyCFunction)(void (*)(void))m_numpy, METH_VARARGS | METH_KEYWORDS,
     "numpy(force=False): a NumPy array sharing the memory (CPU tensors)"},
    {"__array__", m_array, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyMethodDef cnpy_convert_functions[] = {
    {"from_numpy", f_from_numpy, METH_O,
     "from_numpy(array): a tensor sharing the array's memory (C- or permuted-contiguous, writeable; "
     "others are copied)"},
    {"_num_borrowed", f_num_borrowed, METH_NOARGS, "buffers borrowed by from_numpy, alive now"},
    {NULL, NULL, 0, NULL},
};

int cnpy_convert_init(PyObject *m) { return PyType_Ready(&Export_Type); }
