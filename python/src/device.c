/* chutney.device: where a tensor lives ("cpu", "opencl:0", "cuda:0"), as
 * torch.device; compares equal to its string. */
#include "common.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    cn_device d;
} DeviceObject;

static const char *const kind_names[CN_DEVICE_KIND_COUNT] = {"cpu", "opencl", "cuda"};

PyObject *cnpy_device_obj(cn_device d) {
    DeviceObject *o = PyObject_New(DeviceObject, &Device_Type);
    if (!o) return NULL;
    o->d = d;
    return (PyObject *)o;
}

static int parse_str(PyObject *s, cn_device *out) {
    const char *c = PyUnicode_AsUTF8(s);
    if (!c) return 0;
    int rc = cn_device_parse(c, out);
    if (rc < 0) {
        /* A malformed string is a bad value, whatever the message says. */
        PyErr_SetString(PyExc_ValueError, cn_last_error());
        cn_clear_error();
        return 0;
    }
    return 1;
}

int cnpy_device_conv(PyObject *o, void *out) {
    if (o == Py_None) return 1;
    if (PyObject_TypeCheck(o, &Device_Type)) {
        *(cn_device *)out = ((DeviceObject *)o)->d;
        return 1;
    }
    if (PyUnicode_Check(o)) return parse_str(o, out);
    PyErr_Format(PyExc_TypeError, "expected a device or a string such as 'cpu' or 'opencl:0', not %s",
                 Py_TYPE(o)->tp_name);
    return 0;
}

static PyObject *device_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"type", "index", NULL};
    PyObject *type;
    PyObject *index = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:device", kwlist, &type, &index)) return NULL;
    if (PyObject_TypeCheck(type, &Device_Type)) {
        Py_INCREF(type);
        return type;
    }
    cn_device d;
    if (!PyUnicode_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "device(): expected a string such as 'cpu' or 'opencl:0'");
        return NULL;
    }
    if (!parse_str(type, &d)) return NULL;
    if (index != Py_None) {
        long i = PyLong_AsLong(index);
        if (i == -1 && PyErr_Occurred()) return NULL;
        if (i < 0 || i > 1 << 20) {
            PyErr_Format(PyExc_ValueError, "device(): index %ld out of range", i);
            return NULL;
        }
        if (strchr(PyUnicode_AsUTF8(type), ':')) {
            PyErr_SetString(PyExc_ValueError, "device(): an index in the string and as an argument");
            return NULL;
        }
        d.index = (int32_t)i;
    }
    DeviceObject *o = (DeviceObject *)tp->tp_alloc(tp, 0);
    if (!o) return NULL;
    o->d = d;
    return (PyObject *)o;
}

static PyObject *device_str(PyObject *self) {
    cn_device d = ((DeviceObject *)self)->d;
    if (d.kind == CN_DEVICE_CPU && d.index == 0) return PyUnicode_FromString("cpu");
    char buf[48];
    return PyUnicode_FromString(cn_device_str(d, buf, sizeof buf));
}

/* The kind's name; a device of a rank of an MPI job ("rank:1/cpu:0") is
 * named by its local part's kind. */
static const char *kind_name(cn_device d) {
    int k = cn_device_local(d).kind;
    return k >= 0 && k < CN_DEVICE_KIND_COUNT ? kind_names[k] : "?";
}

static PyObject *device_repr(PyObject *self) {
    cn_device d = ((DeviceObject *)self)->d;
    const char *k = kind_name(d);
    if (cn_device_rank(d) >= 0) {
        char buf[48];
        return PyUnicode_FromFormat("device('%s')", cn_device_str(d, buf, sizeof buf));
    }
    if (d.kind == CN_DEVICE_CPU && d.index == 0) return PyUnicode_FromString("device(type='cpu')");
    return PyUnicode_FromFormat("device(type='%s', index=%d)", k, (int)d.index);
}

static PyObject *device_richcompare(PyObject *a, PyObject *b, int op) {
    if (op != Py_EQ && op != Py_NE) Py_RETURN_NOTIMPLEMENTED;
    cn_device x = ((DeviceObject *)a)->d, y;
    if (PyObject_TypeCheck(b, &Device_Type)) {
        y = ((DeviceObject *)b)->d;
    } else if (PyUnicode_Check(b)) {
        const char *c = PyUnicode_AsUTF8(b);
        if (!c) return NULL;
        if (cn_device_parse(c, &y) < 0) {
            cn_clear_error();
            return PyBool_FromLong(op == Py_NE);
        }
    } else {
        Py_RETURN_NOTIMPLEMENTED;
    }
    bool eq = cn_device_equal(x, y);
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t device_hash(PyObject *self) {
    cn_device d = ((DeviceObject *)self)->d;
    Py_hash_t h = (Py_hash_t)d.kind * 1000003 + d.index + 17;
    return h == -1 ? -2 : h;
}

static PyObject *device_type(PyObject *self, void *c) {
    return PyUnicode_FromString(kind_name(((DeviceObject *)self)->d));
}

static PyObject *device_index(PyObject *self, void *c) {
    cn_device d = ((DeviceObject *)self)->d;
    if (d.kind == CN_DEVICE_CPU) Py_RETURN_NONE;
    return PyLong_FromLong(d.index);
}

static PyGetSetDef device_getset[] = {
    {"type", device_type, NULL, "'cpu', 'opencl' or 'cuda'", NULL},
    {"index", device_index, NULL, "which device of its kind (None for the CPU)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject Device_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "chutney.device",
    .tp_basicsize = sizeof(DeviceObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "device(type, index=None): a device ('cpu', 'opencl:0', 'cuda:0').",
    .tp_new = device_new,
    .tp_str = device_str,
    .tp_repr = device_repr,
    .tp_richcompare = device_richcompare,
    .tp_hash = device_hash,
    .tp_getset = device_getset,
};

/* ---- module functions ---- */

static int kind_of(PyObject *o, cn_device_kind *k) {
    const char *s = PyUnicode_AsUTF8(o);
    if (!s) return 0;
    for (int i = 0; i < CN_DEVICE_KIND_COUNT; i++)
        if (strcmp(s, kind_names[i]) == 0) {
            *k = (cn_device_kind)i;
            return 1;
        }
    PyErr_Format(PyExc_ValueError, "unknown device kind '%s' (cpu, opencl, cuda)", s);
    return 0;
}

static PyObject *f_device_count(PyObject *m, PyObject *arg) {
    cn_device_kind k;
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "device_count(kind): kind is 'cpu', 'opencl' or 'cuda'");
        return NULL;
    }
    if (!kind_of(arg, &k)) return NULL;
    return PyLong_FromLong(cn_device_count(k));
}

static PyObject *f_synchronize(PyObject *m, PyObject *args) {
    PyObject *dev = Py_None;
    if (!PyArg_ParseTuple(args, "|O:synchronize", &dev)) return NULL;
    cn_device d = cn_get_default_device();
    if (!cnpy_device_conv(dev, &d)) return NULL;
    int rc = cn_device_synchronize(d);
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *f_get_default_device(PyObject *m, PyObject *unused) {
    return cnpy_device_obj(cn_get_default_device());
}

static PyObject *f_set_default_device(PyObject *m, PyObject *arg) {
    cn_device d = CN_CPU;
    if (!cnpy_device_conv(arg, &d)) return NULL;
    int rc = cn_set_default_device(d);
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *f_memory_stats(PyObject *m, PyObject *args) {
    PyObject *dev = Py_None;
    if (!PyArg_ParseTuple(args, "|O:memory_stats", &dev)) return NULL;
    cn_device d = CN_CPU;
    if (!cnpy_device_conv(dev, &d)) return NULL;
    cn_memory_stats s;
    int rc = cn_device_memory_stats(d, &s);
    if (rc < 0) return cnpy_raise(rc);
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K}", "allocated_bytes",
                         (unsigned long long)s.allocated_bytes, "peak_allocated_bytes",
                         (unsigned long long)s.peak_allocated_bytes, "cached_bytes",
                         (unsigned long long)s.cached_bytes, "allocations",
                         (unsigned long long)s.allocations, "cache_hits",
                         (unsigned long long)s.cache_hits);
}

static PyObject *f_empty_cache(PyObject *m, PyObject *args) {
    PyObject *dev = Py_None;
    if (!PyArg_ParseTuple(args, "|O:empty_cache", &dev)) return NULL;
    cn_device d = CN_CPU;
    if (!cnpy_device_conv(dev, &d)) return NULL;
    return PyLong_FromSize_t(cn_device_empty_cache(d));
}

static PyObject *f_set_num_threads(PyObject *m, PyObject *arg) {
    int n;
    if (!cnpy_as_int(arg, &n)) return NULL;
    int rc = cn_set_num_threads(n);
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *f_get_num_threads(PyObject *m, PyObject *unused) {
    return PyLong_FromLong(cn_get_num_threads());
}

static PyObject *f_build_info(PyObject *m, PyObject *unused) {
    return PyUnicode_FromString(cn_build_info());
}

PyMethodDef cnpy_device_functions[] = {
    {"device_count", f_device_count, METH_O, "device_count(kind): devices of a kind ('opencl')"},
    {"synchronize", f_synchronize, METH_VARARGS, "synchronize(device=None): wait for its queue"},
    {"get_default_device", f_get_default_device, METH_NOARGS, NULL},
    {"set_default_device", f_set_default_device, METH_O,
     "where creation functions put tensors (per thread)"},
    {"memory_stats", f_memory_stats, METH_VARARGS, "memory_stats(device='cpu') -> dict"},
    {"empty_cache", f_empty_cache, METH_VARARGS, "return cached buffers to the system"},
    {"set_num_threads", f_set_num_threads, METH_O, NULL},
    {"get_num_threads", f_get_num_threads, METH_NOARGS, NULL},
    {"build_info", f_build_info, METH_NOARGS, "what the library was built with"},
    {NULL, NULL, 0, NULL},
};

int cnpy_device_init(PyObject *m) {
    if (PyType_Ready(&Device_Type) < 0) return -1;
    return cnpy_add_ref(m, "device", (PyObject *)&Device_Type);
}
