/* chutney.dtype: one immutable object per element type, with PyTorch's names
 * (chutney.float32, chutney.int64, ...). */
#include "common.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    cn_dtype dt;
} DTypeObject;

static PyObject *dtype_objs[CN_DTYPE_COUNT];

/* PyTorch's name of each dtype, and the NumPy name where it differs. */
static const char *const torch_names[CN_DTYPE_COUNT] = {
    "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool", "int8"};

static const struct {
    const char *name;
    cn_dtype dt;
} aliases[] = {
    {"float32", CN_F32}, {"float", CN_F32},   {"f32", CN_F32},     {"float64", CN_F64},
    {"double", CN_F64},  {"f64", CN_F64},     {"float16", CN_F16}, {"half", CN_F16},
    {"f16", CN_F16},     {"bfloat16", CN_BF16}, {"bf16", CN_BF16}, {"int32", CN_I32},
    {"int", CN_I32},     {"i32", CN_I32},     {"int64", CN_I64},   {"long", CN_I64},
    {"i64", CN_I64},     {"uint8", CN_U8},    {"u8", CN_U8},       {"bool", CN_BOOL},
    {"bool_", CN_BOOL}, {"int8", CN_I8},   {"i8", CN_I8},
};

int cnpy_dtype_category(cn_dtype dt) {
    if (dt == CN_BOOL) return 0;
    return cn_dtype_is_float(dt) ? 2 : 1;
}

PyObject *cnpy_dtype_obj(cn_dtype dt) {
    if ((int)dt < 0 || dt >= CN_DTYPE_COUNT) {
        PyErr_Format(PyExc_RuntimeError, "chutney: unknown dtype %d", (int)dt);
        return NULL;
    }
    Py_INCREF(dtype_objs[dt]);
    return dtype_objs[dt];
}

static int dtype_from_name(const char *s, cn_dtype *out) {
    if (strncmp(s, "chutney.", 8) == 0) s += 8;
    else if (strncmp(s, "torch.", 6) == 0) s += 6;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(s, aliases[i].name) == 0) {
            *out = aliases[i].dt;
            return 1;
        }
    return 0;
}

int cnpy_dtype_conv(PyObject *o, void *out) {
    cn_dtype *dt = out;
    if (o == Py_None) return 1;
    if (PyObject_TypeCheck(o, &DType_Type)) {
        *dt = ((DTypeObject *)o)->dt;
        return 1;
    }
    if (o == (PyObject *)&PyFloat_Type) { *dt = CN_F64; return 1; }
    if (o == (PyObject *)&PyBool_Type) { *dt = CN_BOOL; return 1; }
    if (o == (PyObject *)&PyLong_Type) { *dt = CN_I64; return 1; }
    if (PyUnicode_Check(o)) {
        const char *s = PyUnicode_AsUTF8(o);
        if (!s) return 0;
        if (dtype_from_name(s, dt)) return 1;
        PyErr_Format(PyExc_TypeError, "unknown dtype '%s' (float32, float64, float16, bfloat16, "
                     "int32, int64, uint8, bool)", s);
        return 0;
    }
    /* NumPy dtypes (numpy.dtype('float32')) and scalar types (numpy.float32):
     * by their name. */
    PyObject *name = NULL;
    if (PyType_Check(o) && strncmp(((PyTypeObject *)o)->tp_name, "numpy.", 6) == 0) {
        PyObject *np = PyImport_ImportModule("numpy");
        PyObject *npdt = np ? PyObject_CallMethod(np, "dtype", "O", o) : NULL;
        name = npdt ? PyObject_GetAttrString(npdt, "name") : NULL;
        Py_XDECREF(npdt);
        Py_XDECREF(np);
    } else if (!PyType_Check(o) && PyObject_HasAttrString(o, "name") &&
               PyObject_HasAttrString(o, "itemsize")) {
        name = PyObject_GetAttrString(o, "name");
    }
    PyErr_Clear();
    if (name && PyUnicode_Check(name)) {
        const char *s = PyUnicode_AsUTF8(name);
        int ok = s && dtype_from_name(s, dt);
        Py_DECREF(name);
        if (ok) return 1;
        PyErr_Clear();
    } else {
        Py_XDECREF(name);
    }
    PyObject *r = PyObject_Repr(o);
    PyErr_Format(PyExc_TypeError, "not a chutney dtype: %s", r ? PyUnicode_AsUTF8(r) : "?");
    Py_XDECREF(r);
    return 0;
}

static PyObject *dtype_repr(PyObject *self) {
    return PyUnicode_FromFormat("chutney.%s", torch_names[((DTypeObject *)self)->dt]);
}

static PyObject *dtype_is_floating_point(PyObject *self, void *c) {
    return PyBool_FromLong(cn_dtype_is_float(((DTypeObject *)self)->dt));
}

static PyObject *dtype_itemsize(PyObject *self, void *c) {
    return PyLong_FromSize_t(cn_dtype_size(((DTypeObject *)self)->dt));
}

static PyObject *dtype_is_signed(PyObject *self, void *c) {
    cn_dtype dt = ((DTypeObject *)self)->dt;
    return PyBool_FromLong(dt != CN_U8 && dt != CN_BOOL);
}

static PyObject *dtype_name(PyObject *self, void *c) {
    return PyUnicode_FromString(torch_names[((DTypeObject *)self)->dt]);
}

static PyObject *dtype_reduce(PyObject *self, PyObject *unused) {
    return PyUnicode_FromString(torch_names[((DTypeObject *)self)->dt]);
}

static PyGetSetDef dtype_getset[] = {
    {"is_floating_point", dtype_is_floating_point, NULL, "float32, float64, float16 or bfloat16", NULL},
    {"itemsize", dtype_itemsize, NULL, "bytes per element", NULL},
    {"is_signed", dtype_is_signed, NULL, NULL, NULL},
    {"name", dtype_name, NULL, "PyTorch's name (float32, ...)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef dtype_methods[] = {
    /* Pickled by name: the module attribute of that name. */
    {"__reduce__", dtype_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject DType_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "chutney.dtype",
    .tp_basicsize = sizeof(DTypeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An element type (chutney.float32, ...).",
    .tp_repr = dtype_repr,
    .tp_getset = dtype_getset,
    .tp_methods = dtype_methods,
};

int cnpy_dtype_init(PyObject *m) {
    if (PyType_Ready(&DType_Type) < 0) return -1;
    for (int i = 0; i < CN_DTYPE_COUNT; i++) {
        DTypeObject *o = PyObject_New(DTypeObject, &DType_Type);
        if (!o) return -1;
        o->dt = (cn_dtype)i;
        dtype_objs[i] = (PyObject *)o;
    }
    if (cnpy_add_ref(m, "dtype", (PyObject *)&DType_Type) < 0) return -1;
    /* The names and PyTorch's aliases (float, double, half, int, long). */
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        const char *n = aliases[i].name;
        if (strchr("fiub", n[0]) && (n[1] >= '0' && n[1] <= '9')) continue; /* f32, i64, u8 */
        if (strcmp(n, "bf16") == 0 || strcmp(n, "bool_") == 0) continue;
        if (cnpy_add_ref(m, n, dtype_objs[aliases[i].dt]) < 0) return -1;
    }
    return 0;
}
