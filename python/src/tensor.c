/* chutney.Tensor: a Python object holding one reference to a cn_tensor.
 * Shape, dtype and device, printing, conversions to Python numbers, .to(),
 * and the type object itself (its methods come from the topic files). */
#include "common.h"

#include <stdlib.h>
#include <string.h>

/* ---- wrapping ---- */

PyObject *cnpy_wrap_type(PyTypeObject *tp, cn_tensor *t) {
    if (!t) return cnpy_raise(0);
    TensorObject *o = (TensorObject *)tp->tp_alloc(tp, 0);
    if (!o) {
        cn_release(t);
        return NULL;
    }
    o->t = t;
    return (PyObject *)o;
}

PyObject *cnpy_wrap(cn_tensor *t) { return cnpy_wrap_type(&Tensor_Type, t); }

PyObject *cnpy_wrap_borrowed(cn_tensor *t) {
    if (!t) Py_RETURN_NONE;
    return cnpy_wrap(cn_retain(t));
}

PyObject *cnpy_wrap_self(PyObject *self, cn_tensor *r) {
    if (r && r == TT(self)) {
        cn_release(r);
        Py_INCREF(self);
        return self;
    }
    return cnpy_wrap(r);
}

PyObject *cnpy_size(int ndim, const int64_t *shape) {
    PyObject *tup = PyTuple_New(ndim);
    if (!tup) return NULL;
    for (int i = 0; i < ndim; i++) {
        PyObject *v = PyLong_FromLongLong(shape[i]);
        if (!v) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, i, v);
    }
    PyObject *s = PyObject_CallOneArg((PyObject *)&Size_Type, tup);
    Py_DECREF(tup);
    return s;
}

/* ---- chutney.Size: a tuple of ints ---- */

static PyObject *size_repr(PyObject *self) {
    PyObject *lst = PySequence_List(self);
    if (!lst) return NULL;
    PyObject *r = PyUnicode_FromFormat("chutney.Size(%R)", lst);
    Py_DECREF(lst);
    return r;
}

static PyObject *size_numel(PyObject *self, PyObject *unused) {
    long long n = 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self); i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(self, i));
        if (v == -1 && PyErr_Occurred()) return NULL;
        n *= v;
    }
    return PyLong_FromLongLong(n);
}

static PyMethodDef size_methods[] = {
    {"numel", size_numel, METH_NOARGS, "the product of the sizes"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject Size_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "chutney.Size",
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A tensor's shape: a tuple of ints.",
    .tp_repr = size_repr,
    .tp_methods = size_methods,
};

/* ---- construction and destruction ---- */

static void tensor_dealloc(PyObject *self) {
    TensorObject *o = (TensorObject *)self;
    if (o->weakreflist) PyObject_ClearWeakRefs(self);
    cn_tensor *t = o->t;
    o->t = NULL;
    cnpy_wait_idle();
    cn_release(t);
    if (cnpy_pending_releases) cnpy_drain_releases();
    Py_TYPE(self)->tp_free(self);
}

/* Tensor(data) copies data as float32 (torch.Tensor's legacy constructor);
 * Tensor(2, 3) is an uninitialised float32 tensor of that shape; Tensor()
 * is empty. */
static PyObject *tensor_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Tensor() takes no keyword arguments; use chutney.tensor()");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    cn_tensor *t;
    if (n == 0) {
        t = CNPY_CALL(cn_empty(CN_F32, 1, (int64_t[]){0}));
        if (!t) return cnpy_raise(0);
    } else if (n == 1 && !PyLong_Check(PyTuple_GET_ITEM(args, 0))) {
        PyObject *a = PyTuple_GET_ITEM(args, 0);
        if (Tensor_Check(a)) {
            t = CNPY_CALL(cn_detach(TT(a))); /* shares the data, as torch.Tensor(tensor) */
            if (!t) return cnpy_raise(0);
        } else {
            t = cnpy_tensor_from_data(a, true, CN_F32);
            if (!t) return NULL;
        }
    } else {
        int ndim;
        int64_t shape[CN_MAX_DIMS];
        if (!cnpy_parse_shape(args, 0, NULL, &ndim, shape)) return NULL;
        t = CNPY_CALL(cn_empty(CN_F32, ndim, shape));
        if (!t) return cnpy_raise(0);
    }
    return cnpy_wrap_type(tp, t);
}

/* Tensor._make_subclass(cls, data, requires_grad=False): an instance of cls
 * (a Tensor subclass such as nn.Parameter) that is a new leaf sharing data's
 * storage. */
static PyObject *tensor_make_subclass(PyObject *unused, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"cls", "data", "requires_grad", NULL};
    PyObject *cls, *data;
    int rg = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!|p:_make_subclass", kwlist, &cls, &Tensor_Type,
                                     &data, &rg))
        return NULL;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &Tensor_Type)) {
        PyErr_SetString(PyExc_TypeError, "_make_subclass: cls must be a subclass of Tensor");
        return NULL;
    }
    cn_tensor *t = CNPY_CALL(cn_detach(TT(data)));
    if (!t) return cnpy_raise(0);
    if (rg) {
        int rc;
        CNPY_INT(rc, cn_set_requires_grad(t, true));
        if (rc < 0) {
            cn_release(t);
            return cnpy_raise(rc);
        }
    }
    return cnpy_wrap_type((PyTypeObject *)cls, t);
}

/* Tensor._wrap_as(cls, tensor): an instance of cls holding the same tensor
 * (the same parameter: its requires_grad, its .grad, where an optimiser or a
 * module moves it). */
static PyObject *tensor_wrap_as(PyObject *unused, PyObject *args) {
    PyObject *cls, *data;
    if (!PyArg_ParseTuple(args, "OO!:_wrap_as", &cls, &Tensor_Type, &data)) return NULL;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &Tensor_Type)) {
        PyErr_SetString(PyExc_TypeError, "_wrap_as: cls must be a subclass of Tensor");
        return NULL;
    }
    return cnpy_wrap_type((PyTypeObject *)cls, cn_retain(TT(data)));
}

/* ---- printing ---- */

static const char *const torch_dtype_names[CN_DTYPE_COUNT] = {
    "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool", "int8"};

static PyObject *tensor_repr(PyObject *self) {
    cn_tensor *t = TT(self);
    cn_device d = cn_tensor_device(t);
    cn_tensor *host = NULL;
    if (d.kind != CN_DEVICE_CPU) {
        host = CNPY_CALL(cn_to(t, CN_CPU));
        if (!host) return cnpy_raise(0);
    }
    char *s = cn_to_string(host ? host : t);
    cn_release(host);
    if (!s) return cnpy_raise(0);
    /* "tensor([...], dtype=f32)": PyTorch leaves out float32, int64 and bool
     * (dtypes that the values show) and names the rest chutney.<name>. */
    size_t len = strlen(s);
    char *dt = strstr(s, "dtype=");
    char *last = dt;
    while (last && (last = strstr(last + 1, "dtype="))) dt = last;
    PyObject *head = NULL;
    cn_dtype dtype = cn_tensor_dtype(t);
    if (dt && len > 0 && s[len - 1] == ')') {
        /* s up to ", dtype=" */
        size_t cut = (size_t)(dt - s);
        while (cut > 0 && (s[cut - 1] == ' ' || s[cut - 1] == ',')) cut--;
        head = PyUnicode_FromStringAndSize(s, (Py_ssize_t)cut);
    } else {
        head = PyUnicode_FromStringAndSize(s, (Py_ssize_t)(len && s[len - 1] == ')' ? len - 1 : len));
    }
    free(s);
    if (!head) return NULL;
    if (dtype == CN_BOOL) {
        /* Python's True and False, as PyTorch prints them (the same widths) */
        static const char *const words[2][2] = {{"true", "True"}, {"false", "False"}};
        for (int i = 0; i < 2 && head; i++) {
            PyObject *from = PyUnicode_FromString(words[i][0]), *to = PyUnicode_FromString(words[i][1]);
            PyObject *r = from && to ? PyUnicode_Replace(head, from, to, -1) : NULL;
            Py_XDECREF(from);
            Py_XDECREF(to);
            Py_DECREF(head);
            head = r;
        }
        if (!head) return NULL;
    }
    PyObject *parts = PyList_New(0);
    if (!parts) {
        Py_DECREF(head);
        return NULL;
    }
    int rc = PyList_Append(parts, head);
    Py_DECREF(head);
    if (rc < 0) goto fail;
    if (d.kind != CN_DEVICE_CPU) {
        char buf[48];
        PyObject *x = PyUnicode_FromFormat(", device='%s'", cn_device_str(d, buf, sizeof buf));
        if (!x || PyList_Append(parts, x) < 0) {
            Py_XDECREF(x);
            goto fail;
        }
        Py_DECREF(x);
    }
    if (dtype != CN_F32 && dtype != CN_I64 && dtype != CN_BOOL) {
        PyObject *x = PyUnicode_FromFormat(", dtype=chutney.%s", torch_dtype_names[dtype]);
        if (!x || PyList_Append(parts, x) < 0) {
            Py_XDECREF(x);
            goto fail;
        }
        Py_DECREF(x);
    }
    if (cn_requires_grad(t)) {
        PyObject *x = PyUnicode_FromString(cn_is_leaf(t) ? ", requires_grad=True" : ", grad_fn=<op>");
        if (!x || PyList_Append(parts, x) < 0) {
            Py_XDECREF(x);
            goto fail;
        }
        Py_DECREF(x);
    }
    PyObject *close = PyUnicode_FromString(")");
    if (!close || PyList_Append(parts, close) < 0) {
        Py_XDECREF(close);
        goto fail;
    }
    Py_DECREF(close);
    PyObject *empty = PyUnicode_FromString("");
    if (!empty) goto fail;
    PyObject *r = PyUnicode_Join(empty, parts);
    Py_DECREF(empty);
    Py_DECREF(parts);
    return r;
fail:
    Py_DECREF(parts);
    return NULL;
}

/* ---- properties ---- */

static PyObject *get_shape(PyObject *self, void *c) {
    return cnpy_size(cn_ndim(TT(self)), cn_shape(TT(self)));
}

static PyObject *get_dtype(PyObject *self, void *c) { return cnpy_dtype_obj(cn_tensor_dtype(TT(self))); }

static PyObject *get_device(PyObject *self, void *c) { return cnpy_device_obj(cn_tensor_device(TT(self))); }

static PyObject *get_ndim(PyObject *self, void *c) { return PyLong_FromLong(cn_ndim(TT(self))); }

static PyObject *get_name(PyObject *self, void *c) { return PyUnicode_FromString(cn_get_name(TT(self))); }

static int set_name(PyObject *self, PyObject *v, void *c) {
    const char *s = NULL;
    if (v && v != Py_None) {
        if (!PyUnicode_Check(v)) {
            PyErr_SetString(PyExc_TypeError, "name must be a string or None");
            return -1;
        }
        s = PyUnicode_AsUTF8(v);
        if (!s) return -1;
    }
    int rc = cn_set_name(TT(self), s);
    return rc < 0 ? cnpy_raise_int(rc) : 0;
}

static PyObject *get_T(PyObject *self, void *c) {
    cn_tensor *t = TT(self);
    int n = cn_ndim(t);
    int axes[CN_MAX_DIMS];
    for (int i = 0; i < n; i++) axes[i] = n - 1 - i;
    return cnpy_wrap(CNPY_CALL(cn_permute(t, axes, n)));
}

static PyObject *get_mT(PyObject *self, void *c) { return cnpy_wrap(CNPY_CALL(cn_mT(TT(self)))); }

static PyObject *get_itemsize(PyObject *self, void *c) {
    return PyLong_FromSize_t(cn_dtype_size(cn_tensor_dtype(TT(self))));
}

static PyObject *get_nbytes(PyObject *self, void *c) {
    return PyLong_FromLongLong((long long)cn_numel(TT(self)) *
                               (long long)cn_dtype_size(cn_tensor_dtype(TT(self))));
}

static PyObject *get_is_cpu(PyObject *self, void *c) {
    return PyBool_FromLong(cn_tensor_device(TT(self)).kind == CN_DEVICE_CPU);
}

PyGetSetDef cnpy_tensor_getset[] = {
    {"shape", get_shape, NULL, "the sizes, a chutney.Size", NULL},
    {"dtype", get_dtype, NULL, "the element type", NULL},
    {"device", get_device, NULL, "where the data lives", NULL},
    {"ndim", get_ndim, NULL, "the number of axes", NULL},
    {"name", get_name, set_name, "an optional name (\"\" when unset)", NULL},
    {"T", get_T, NULL, "the axes reversed (a view)", NULL},
    {"mT", get_mT, NULL, "the last two axes swapped (a view)", NULL},
    {"itemsize", get_itemsize, NULL, NULL, NULL},
    {"nbytes", get_nbytes, NULL, NULL, NULL},
    {"is_cpu", get_is_cpu, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* ---- methods: inspection and conversion ---- */

static PyObject *m_size(PyObject *self, PyObject *args) {
    PyObject *dim = Py_None;
    if (!PyArg_ParseTuple(args, "|O:size", &dim)) return NULL;
    cn_tensor *t = TT(self);
    if (dim == Py_None) return cnpy_size(cn_ndim(t), cn_shape(t));
    int d;
    if (!cnpy_as_int(dim, &d)) return NULL;
    int n = cn_ndim(t);
    if (d < -n || d >= n || n == 0) {
        PyErr_Format(PyExc_IndexError, "dimension %d out of range for a tensor of %d dims", d, n);
        return NULL;
    }
    return PyLong_FromLongLong(cn_shape(t)[d < 0 ? d + n : d]);
}

static PyObject *m_stride(PyObject *self, PyObject *args) {
    PyObject *dim = Py_None;
    if (!PyArg_ParseTuple(args, "|O:stride", &dim)) return NULL;
    cn_tensor *t = TT(self);
    int n = cn_ndim(t);
    const int64_t *s = cn_strides(t);
    if (dim == Py_None) {
        PyObject *tup = PyTuple_New(n);
        if (!tup) return NULL;
        for (int i = 0; i < n; i++) {
            PyObject *v = PyLong_FromLongLong(s[i]);
            if (!v) {
                Py_DECREF(tup);
                return NULL;
            }
            PyTuple_SET_ITEM(tup, i, v);
        }
        return tup;
    }
    int d;
    if (!cnpy_as_int(dim, &d)) return NULL;
    if (d < -n || d >= n) {
        PyErr_Format(PyExc_IndexError, "dimension %d out of range for a tensor of %d dims", d, n);
        return NULL;
    }
    return PyLong_FromLongLong(s[d < 0 ? d + n : d]);
}

static PyObject *m_dim(PyObject *self, PyObject *unused) { return PyLong_FromLong(cn_ndim(TT(self))); }
static PyObject *m_numel(PyObject *self, PyObject *unused) {
    return PyLong_FromLongLong(cn_numel(TT(self)));
}
static PyObject *m_is_contiguous(PyObject *self, PyObject *unused) {
    return PyBool_FromLong(cn_is_contiguous(TT(self)));
}
static PyObject *m_storage_offset(PyObject *self, PyObject *unused) {
    return PyLong_FromLongLong(cn_offset(TT(self)));
}
static PyObject *m_element_size(PyObject *self, PyObject *unused) {
    return PyLong_FromSize_t(cn_dtype_size(cn_tensor_dtype(TT(self))));
}
static PyObject *m_is_floating_point(PyObject *self, PyObject *unused) {
    return PyBool_FromLong(cn_dtype_is_float(cn_tensor_dtype(TT(self))));
}
static PyObject *m_data_ptr(PyObject *self, PyObject *unused) {
    cn_tensor *t = TT(self);
    if (cn_tensor_device(t).kind != CN_DEVICE_CPU) {
        PyErr_SetString(PyExc_RuntimeError, "data_ptr: the tensor is not on the CPU");
        return NULL;
    }
    return PyLong_FromVoidPtr(cn_data(t));
}
/* contiguous(memory_format=...): row-major whatever the format asked for
 * (the same values; chutney.channels_last is accepted for PyTorch's code). */
static PyObject *m_contiguous(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"memory_format", NULL};
    PyObject *layout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:contiguous", kwlist, &layout)) return NULL;
    return cnpy_wrap_self(self, CNPY_CALL(cn_contiguous(TT(self))));
}
static PyObject *m_clone(PyObject *self, PyObject *unused) { return cnpy_wrap(CNPY_CALL(cn_clone(TT(self)))); }
static PyObject *m_shares_storage(PyObject *self, PyObject *other) {
    if (!Tensor_Check(other)) {
        PyErr_SetString(PyExc_TypeError, "expected a Tensor");
        return NULL;
    }
    return PyBool_FromLong(cn_shares_storage(TT(self), TT(other)));
}

/* t.to(device), t.to(dtype), t.to(other), t.to(device, dtype), with copy= */
static PyObject *m_to(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"device", "dtype", "non_blocking", "copy", "memory_format", NULL};
    PyObject *a0 = Py_None, *a1 = Py_None, *layout = Py_None;
    int non_blocking = 0, copy = 0;
    /* memory_format (chutney.channels_last, ...): tensors stay row-major,
     * the values are the same. */
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOppO:to", kwlist, &a0, &a1, &non_blocking, &copy,
                                     &layout))
        return NULL;
    cn_tensor *t = TT(self);
    cn_device dev = cn_tensor_device(t);
    cn_dtype dt = cn_tensor_dtype(t);
    PyObject *objs[2] = {a0, a1};
    for (int i = 0; i < 2; i++) {
        PyObject *o = objs[i];
        if (o == Py_None) continue;
        if (Tensor_Check(o)) {
            dev = cn_tensor_device(TT(o));
            dt = cn_tensor_dtype(TT(o));
        } else if (PyObject_TypeCheck(o, &Device_Type) || PyUnicode_Check(o)) {
            /* A string names a device, or a dtype ("float64"). */
            if (PyUnicode_Check(o)) {
                cn_device d;
                const char *s = PyUnicode_AsUTF8(o);
                if (!s) return NULL;
                if (cn_device_parse(s, &d) == 0) {
                    dev = d;
                    continue;
                }
                cn_clear_error();
                if (!cnpy_dtype_conv(o, &dt)) return NULL;
                continue;
            }
            if (!cnpy_device_conv(o, &dev)) return NULL;
        } else {
            if (!cnpy_dtype_conv(o, &dt)) return NULL;
        }
    }
    cn_tensor *r;
    CNPY_SCOPE_BEGIN();
    r = t;
    if (dt != cn_tensor_dtype(t)) r = cn_cast(r, dt);
    if (r && !cn_device_equal(dev, cn_tensor_device(r)))
        r = non_blocking ? cn_to_async(r, dev) : cn_to(r, dev);
    if (r && copy && r == t) r = cn_clone(t);
    if (r == t) r = cn_retain(t);
    else if (r) cn_keep(r);
    cn_scope_end();
    if (!r) return cnpy_raise(0);
    return cnpy_wrap_self(self, r);
}

static PyObject *m_cpu(PyObject *self, PyObject *unused) {
    cn_tensor *t = TT(self);
    if (cn_tensor_device(t).kind == CN_DEVICE_CPU) {
        Py_INCREF(self);
        return self;
    }
    return cnpy_wrap(CNPY_CALL(cn_to(t, CN_CPU)));
}

static PyObject *cast_to(PyObject *self, cn_dtype dt) {
    return cnpy_wrap_self(self, CNPY_CALL(cn_cast(TT(self), dt)));
}
static PyObject *m_float(PyObject *self, PyObject *u) { return cast_to(self, CN_F32); }
static PyObject *m_double(PyObject *self, PyObject *u) { return cast_to(self, CN_F64); }
static PyObject *m_half(PyObject *self, PyObject *u) { return cast_to(self, CN_F16); }
static PyObject *m_bfloat16(PyObject *self, PyObject *u) { return cast_to(self, CN_BF16); }
static PyObject *m_int(PyObject *self, PyObject *u) { return cast_to(self, CN_I32); }
static PyObject *m_long(PyObject *self, PyObject *u) { return cast_to(self, CN_I64); }
static PyObject *m_byte(PyObject *self, PyObject *u) { return cast_to(self, CN_U8); }
static PyObject *m_bool(PyObject *self, PyObject *u) { return cast_to(self, CN_BOOL); }

static PyObject *m_type_as(PyObject *self, PyObject *other) {
    if (!Tensor_Check(other)) {
        PyErr_SetString(PyExc_TypeError, "type_as: expected a Tensor");
        return NULL;
    }
    return cast_to(self, cn_tensor_dtype(TT(other)));
}

static PyObject *m_stats(PyObject *self, PyObject *unused) {
    cn_stats s;
    int rc;
    CNPY_INT(rc, cn_tensor_stats(TT(self), &s));
    if (rc < 0) return cnpy_raise(rc);
    return Py_BuildValue("{s:d,s:d,s:d,s:d,s:L,s:L,s:L}", "min", s.min, "max", s.max, "mean", s.mean,
                         "std", s.std, "numel", (long long)s.numel, "nan_count",
                         (long long)s.nan_count, "inf_count", (long long)s.inf_count);
}

static PyObject *m_equal(PyObject *self, PyObject *other) {
    if (!Tensor_Check(other)) {
        PyErr_SetString(PyExc_TypeError, "equal: expected a Tensor");
        return NULL;
    }
    return PyBool_FromLong(cn_equal(TT(self), TT(other)));
}

static PyObject *m_allclose(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"other", "rtol", "atol", "equal_nan", NULL};
    PyObject *other;
    double rtol = 1e-5, atol = 1e-8;
    int equal_nan = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|ddp:allclose", kwlist, &Tensor_Type, &other,
                                     &rtol, &atol, &equal_nan))
        return NULL;
    cn_clear_error();
    bool r = cn_allclose(TT(self), TT(other), rtol, atol);
    if (!r && *cn_last_error()) return cnpy_raise(0);
    return PyBool_FromLong(r);
}

static PyObject *m_iter(PyObject *self);

/* f"{loss:.4f}": a 0-d tensor formats as its value. */
static PyObject *m_format(PyObject *self, PyObject *spec) {
    if (cn_ndim(TT(self)) == 0) {
        PyObject *v = cnpy_item(TT(self));
        if (!v) return NULL;
        PyObject *r = PyObject_Format(v, spec);
        Py_DECREF(v);
        return r;
    }
    if (PyUnicode_Check(spec) && PyUnicode_GET_LENGTH(spec) > 0) {
        PyErr_SetString(PyExc_TypeError, "unsupported format string passed to Tensor.__format__ "
                                         "(only 0-d tensors take a format)");
        return NULL;
    }
    return PyObject_Str(self);
}

/* _replace_(other): this object holds other's tensor from now on (the same
 * memory and history), for the in-place forms of view ops written in Python
 * (squeeze_, t_, ...): the object changes, as PyTorch's does. */
static PyObject *m_replace_(PyObject *self, PyObject *other) {
    if (!Tensor_Check(other)) {
        PyErr_SetString(PyExc_TypeError, "_replace_: expected a Tensor");
        return NULL;
    }
    cn_tensor *old = TT(self);
    ((TensorObject *)self)->t = cn_retain(TT(other));
    cn_release(old);
    Py_INCREF(self);
    return self;
}

PyMethodDef cnpy_tensor_methods[] = {
    {"_replace_", m_replace_, METH_O, NULL},
    {"_make_subclass", (PyCFunction)(void (*)(void))tensor_make_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_STATIC, NULL},
    {"_wrap_as", tensor_wrap_as, METH_VARARGS | METH_STATIC, NULL},
    {"__format__", m_format, METH_O, NULL},
    {"size", m_size, METH_VARARGS, "size(dim=None): the shape, or one size"},
    {"stride", m_stride, METH_VARARGS, "stride(dim=None): strides in elements"},
    {"dim", m_dim, METH_NOARGS, NULL},
    {"ndimension", m_dim, METH_NOARGS, NULL},
    {"numel", m_numel, METH_NOARGS, NULL},
    {"nelement", m_numel, METH_NOARGS, NULL},
    {"is_contiguous", m_is_contiguous, METH_NOARGS, NULL},
    {"storage_offset", m_storage_offset, METH_NOARGS, NULL},
    {"element_size", m_element_size, METH_NOARGS, NULL},
    {"is_floating_point", m_is_floating_point, METH_NOARGS, NULL},
    {"data_ptr", m_data_ptr, METH_NOARGS, NULL},
    {"contiguous", (PyCFunction)(void (*)(void))m_contiguous, METH_VARARGS | METH_KEYWORDS, NULL},
    {"clone", m_clone, METH_NOARGS, NULL},
    {"is_set_to", m_shares_storage, METH_O, NULL},
    {"shares_storage", m_shares_storage, METH_O, "do both tensors share storage?"},
    {"to", (PyCFunction)(void (*)(void))m_to, METH_VARARGS | METH_KEYWORDS,
     "to(device=None, dtype=None, non_blocking=False, copy=False)"},
    {"cpu", m_cpu, METH_NOARGS, NULL},
    {"float", m_float, METH_NOARGS, NULL},
    {"double", m_double, METH_NOARGS, NULL},
    {"half", m_half, METH_NOARGS, NULL},
    {"bfloat16", m_bfloat16, METH_NOARGS, NULL},
    {"int", m_int, METH_NOARGS, NULL},
    {"long", m_long, METH_NOARGS, NULL},
    {"byte", m_byte, METH_NOARGS, NULL},
    {"bool", m_bool, METH_NOARGS, NULL},
    {"type_as", m_type_as, METH_O, NULL},
    {"stats", m_stats, METH_NOARGS, "min, max, mean, std and NaN/Inf counts"},
    {"equal", m_equal, METH_O, "same shape and values"},
    {"allclose", (PyCFunction)(void (*)(void))m_allclose, METH_VARARGS | METH_KEYWORDS, NULL},
    {NULL, NULL, 0, NULL},
};

/* ---- Python protocols ---- */

static Py_ssize_t tensor_len(PyObject *self) {
    cn_tensor *t = TT(self);
    if (cn_ndim(t) == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
        return -1;
    }
    return (Py_ssize_t)cn_shape(t)[0];
}

static PyObject *m_iter(PyObject *self) {
    cn_tensor *t = TT(self);
    if (cn_ndim(t) == 0) {
        PyErr_SetString(PyExc_TypeError, "iteration over a 0-d tensor");
        return NULL;
    }
    int64_t n = cn_shape(t)[0];
    PyObject *lst = PyList_New((Py_ssize_t)n);
    if (!lst) return NULL;
    for (int64_t i = 0; i < n; i++) {
        cn_tensor *s = CNPY_CALL(cn_slice(t, 0, i, i + 1, 1)), *q = NULL;
        if (s) {
            q = CNPY_CALL(cn_squeeze(s, 0));
            cn_release(s);
        }
        PyObject *o = cnpy_wrap(q);
        if (!o) {
            Py_DECREF(lst);
            return NULL;
        }
        PyList_SET_ITEM(lst, (Py_ssize_t)i, o);
    }
    PyObject *it = PyObject_GetIter(lst);
    Py_DECREF(lst);
    return it;
}

static int tensor_contains(PyObject *self, PyObject *v) {
    PyObject *eq = cnpy_richcompare(self, v, Py_EQ);
    if (!eq) return -1;
    if (eq == Py_NotImplemented) {
        Py_DECREF(eq);
        PyErr_Format(PyExc_TypeError, "'in' needs a Tensor or a number, not %s", Py_TYPE(v)->tp_name);
        return -1;
    }
    cn_tensor *any;
    CNPY_SCOPE_BEGIN();
    any = cn_max(cn_cast(TT(eq), CN_I32), NULL, 0, false);
    CNPY_SCOPE_END_KEEP(any);
    Py_DECREF(eq);
    if (!any) return cnpy_raise_int(0);
    double r = cn_item(any);
    cn_release(any);
    return r != 0;
}

static PySequenceMethods tensor_as_sequence = {
    .sq_contains = tensor_contains,
};

static PyMappingMethods tensor_as_mapping = {
    .mp_length = tensor_len,
    .mp_subscript = cnpy_getitem,
    .mp_ass_subscript = cnpy_setitem,
};

/* By identity, as torch.Tensor (== is elementwise). */
static Py_hash_t tensor_hash(PyObject *self) {
    uintptr_t p = (uintptr_t)self;
    Py_hash_t h = (Py_hash_t)((p >> 4) | (p << (8 * sizeof p - 4)));
    return h == -1 ? -2 : h;
}

PyTypeObject Tensor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "chutney.Tensor",
    .tp_basicsize = sizeof(TensorObject),
    .tp_dealloc = tensor_dealloc,
    .tp_repr = tensor_repr,
    .tp_as_number = &cnpy_tensor_as_number,
    .tp_as_sequence = &tensor_as_sequence,
    .tp_as_mapping = &tensor_as_mapping,
    .tp_hash = tensor_hash,
    .tp_as_buffer = &cnpy_tensor_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "An n-dimensional array on a device, with autograd (chutney.tensor() makes one).",
    .tp_richcompare = cnpy_richcompare,
    .tp_weaklistoffset = offsetof(TensorObject, weakreflist),
    .tp_iter = m_iter,
    .tp_new = tensor_new,
};
