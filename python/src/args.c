/* Argument helpers: shapes, axes, integers, Python scalars. */
#include "common.h"

#include <limits.h>
#include <string.h>

int cnpy_as_int64(PyObject *o, int64_t *out) {
    if (PyFloat_Check(o)) {
        PyErr_Format(PyExc_TypeError, "expected an integer, not float");
        return 0;
    }
    PyObject *i = PyNumber_Index(o);
    if (!i) return 0;
    long long v = PyLong_AsLongLong(i);
    Py_DECREF(i);
    if (v == -1 && PyErr_Occurred()) return 0;
    *out = (int64_t)v;
    return 1;
}

int cnpy_as_int(PyObject *o, int *out) {
    int64_t v;
    if (!cnpy_as_int64(o, &v)) return 0;
    if (v < INT_MIN || v > INT_MAX) {
        PyErr_Format(PyExc_OverflowError, "%lld does not fit an int", (long long)v);
        return 0;
    }
    *out = (int)v;
    return 1;
}

int cnpy_shape_from(PyObject *o, int *ndim, int64_t *shape) {
    if (PyLong_Check(o) || (!PyTuple_Check(o) && !PyList_Check(o) && PyIndex_Check(o) &&
                            !Tensor_Check(o))) {
        *ndim = 1;
        return cnpy_as_int64(o, &shape[0]);
    }
    if (Tensor_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "a shape is a sequence of ints, not a Tensor");
        return 0;
    }
    PyObject *seq = PySequence_Fast(o, "a shape is an int or a sequence of ints");
    if (!seq) return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > CN_MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "a shape has at most %d axes, not %zd", CN_MAX_DIMS, n);
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!cnpy_as_int64(PySequence_Fast_GET_ITEM(seq, i), &shape[i])) {
            Py_DECREF(seq);
            return 0;
        }
    *ndim = (int)n;
    Py_DECREF(seq);
    return 1;
}

int cnpy_parse_shape(PyObject *args, Py_ssize_t start, PyObject *kw, int *ndim, int64_t *shape) {
    Py_ssize_t n = PyTuple_GET_SIZE(args) - start;
    if (kw && kw != Py_None) {
        if (n > 0) {
            PyErr_SetString(PyExc_TypeError, "the size given twice (as arguments and size=)");
            return 0;
        }
        return cnpy_shape_from(kw, ndim, shape);
    }
    if (n == 1) {
        PyObject *a = PyTuple_GET_ITEM(args, start);
        if (!PyLong_Check(a)) return cnpy_shape_from(a, ndim, shape);
    }
    if (n > CN_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "a shape has at most %d axes, not %zd", CN_MAX_DIMS, n);
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!cnpy_as_int64(PyTuple_GET_ITEM(args, start + i), &shape[i])) return 0;
    *ndim = (int)n;
    return 1;
}

int cnpy_parse_dims(PyObject *o, int *dims, int *n) {
    if (!o || o == Py_None) {
        *n = 0;
        return 1;
    }
    if (PyTuple_Check(o) || PyList_Check(o)) {
        Py_ssize_t k = PySequence_Fast_GET_SIZE(o);
        if (k > CN_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "at most %d dims, not %zd", CN_MAX_DIMS, k);
            return 0;
        }
        for (Py_ssize_t i = 0; i < k; i++)
            if (!cnpy_as_int(PySequence_Fast_GET_ITEM(o, i), &dims[i])) return 0;
        *n = (int)k;
        return 1;
    }
    *n = 1;
    return cnpy_as_int(o, &dims[0]);
}

int cnpy_pair(PyObject *o, int64_t out[2], const char *what) {
    if (PyTuple_Check(o) || PyList_Check(o)) {
        Py_ssize_t k = PySequence_Fast_GET_SIZE(o);
        if (k == 1) {
            if (!cnpy_as_int64(PySequence_Fast_GET_ITEM(o, 0), &out[0])) return 0;
            out[1] = out[0];
            return 1;
        }
        if (k != 2) {
            PyErr_Format(PyExc_ValueError, "%s: expected an int or a pair, got %zd values", what, k);
            return 0;
        }
        return cnpy_as_int64(PySequence_Fast_GET_ITEM(o, 0), &out[0]) &&
               cnpy_as_int64(PySequence_Fast_GET_ITEM(o, 1), &out[1]);
    }
    if (!cnpy_as_int64(o, &out[0])) return 0;
    out[1] = out[0];
    return 1;
}

/* NumPy scalars (numpy.float32(1), numpy.int64(2), numpy.bool_(True)) are
 * recognised by their type's module, so NumPy need not be imported. */
static int numpy_scalar_kind(PyObject *o) {
    const char *n = Py_TYPE(o)->tp_name;
    if (strncmp(n, "numpy.", 6) != 0 || strcmp(n, "numpy.ndarray") == 0) return 0;
    n += 6;
    if (strncmp(n, "bool", 4) == 0) return CNPY_BOOL;
    if (strncmp(n, "float", 5) == 0 || strcmp(n, "double") == 0 || strcmp(n, "half") == 0 ||
        strcmp(n, "longdouble") == 0)
        return CNPY_FLOAT;
    if (strncmp(n, "int", 3) == 0 || strncmp(n, "uint", 4) == 0 || strcmp(n, "longlong") == 0 ||
        strcmp(n, "ulonglong") == 0 || strcmp(n, "short") == 0 || strcmp(n, "ushort") == 0 ||
        strcmp(n, "byte") == 0 || strcmp(n, "ubyte") == 0 || strcmp(n, "intc") == 0 ||
        strcmp(n, "uintc") == 0)
        return CNPY_INT;
    return 0;
}

int cnpy_scalar_kind(PyObject *o, double *v, long long *iv) {
    if (PyFloat_CheckExact(o)) {
        *v = PyFloat_AS_DOUBLE(o);
        *iv = 0;
        return CNPY_FLOAT;
    }
    if (PyBool_Check(o)) {
        *iv = o == Py_True;
        *v = (double)*iv;
        return CNPY_BOOL;
    }
    if (PyLong_Check(o)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow) {
            /* Beyond int64: as PyTorch, the value does not fit an integer. */
            *v = PyLong_AsDouble(o);
            if (*v == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return CNPY_NOT_SCALAR;
            }
            *iv = 0;
            return CNPY_FLOAT;
        }
        *iv = x;
        *v = (double)x;
        return CNPY_INT;
    }
    if (PyFloat_Check(o)) { /* numpy.float64 is a float subclass */
        *v = PyFloat_AsDouble(o);
        *iv = 0;
        return CNPY_FLOAT;
    }
    int k = numpy_scalar_kind(o);
    if (k == CNPY_FLOAT) {
        *v = PyFloat_AsDouble(o);
        if (*v == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return CNPY_NOT_SCALAR;
        }
        *iv = 0;
        return k;
    }
    if (k == CNPY_INT || k == CNPY_BOOL) {
        PyObject *i = k == CNPY_BOOL ? PyNumber_Long(o) : PyNumber_Index(o);
        if (!i) {
            PyErr_Clear();
            return CNPY_NOT_SCALAR;
        }
        int r = cnpy_scalar_kind(i, v, iv);
        Py_DECREF(i);
        return r == CNPY_NOT_SCALAR ? r : k;
    }
    return CNPY_NOT_SCALAR;
}

cn_tensor *cnpy_scalar_tensor(cn_tensor *x, int kind, double v, long long iv) {
    cn_dtype xd = x ? cn_tensor_dtype(x) : CN_F32, dt;
    int cat = x ? cnpy_dtype_category(xd) : -1;
    if (kind == CNPY_FLOAT) {
        dt = cat == 2 ? xd : CN_F32;
        if (dt == CN_F16 || dt == CN_BF16) dt = CN_F32; /* rank 0: keeps the tensor's dtype */
    } else if (kind == CNPY_INT) {
        dt = cat == 2 ? xd : cat == 1 ? xd : CN_I64;
        if (dt == CN_F16 || dt == CN_BF16) dt = CN_F32;
    } else {
        dt = cat == 2 ? xd : cat == 1 ? xd : CN_BOOL;
        if (dt == CN_F16 || dt == CN_BF16) dt = CN_F32;
    }
    if (dt == CN_I64 || dt == CN_I32) {
        int64_t i64 = kind == CNPY_FLOAT ? (int64_t)v : (int64_t)iv;
        if (dt == CN_I64) return CNPY_CALL(cn_from_data(CN_I64, 0, NULL, &i64));
        int32_t i32 = (int32_t)i64;
        return CNPY_CALL(cn_from_data(CN_I32, 0, NULL, &i32));
    }
    return CNPY_CALL(cn_scalar(dt, v));
}

cn_tensor *cnpy_as_tensor(PyObject *o, cn_tensor *like) {
    if (Tensor_Check(o)) return cn_retain(TT(o));
    double v;
    long long iv;
    int k = cnpy_scalar_kind(o, &v, &iv);
    if (k) {
        cn_tensor *r = cnpy_scalar_tensor(like, k, v, iv);
        if (!r) cnpy_raise(0);
        return r;
    }
    return cnpy_tensor_from_data(o, false, CN_F32);
}
