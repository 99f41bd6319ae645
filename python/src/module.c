/* chutney._C: the module. Gathers the functions and Tensor methods of the
 * topic files into one table each and readies the types. */
#include "common.h"

#include <string.h>

static PyMethodDef *concat_methods(PyMethodDef *const *lists, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++)
        for (PyMethodDef *d = lists[i]; d->ml_name; d++) total++;
    /* Lives as long as the process: types and modules point into it. */
    PyMethodDef *all = PyMem_RawCalloc(total + 1, sizeof *all);
    if (!all) return NULL;
    size_t k = 0;
    for (int i = 0; i < n; i++)
        for (PyMethodDef *d = lists[i]; d->ml_name; d++) all[k++] = *d;
    return all;
}

static PyGetSetDef *concat_getset(PyGetSetDef *const *lists, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++)
        for (PyGetSetDef *d = lists[i]; d->name; d++) total++;
    PyGetSetDef *all = PyMem_RawCalloc(total + 1, sizeof *all);
    if (!all) return NULL;
    size_t k = 0;
    for (int i = 0; i < n; i++)
        for (PyGetSetDef *d = lists[i]; d->name; d++) all[k++] = *d;
    return all;
}

static PyObject *f_version(PyObject *m, PyObject *u) { return PyUnicode_FromString(cn_version()); }

static PyObject *f_scope_depth(PyObject *m, PyObject *u) { return PyLong_FromLong(cn_scope_depth()); }

/* Python-written Tensor methods (chutney/_tensor_extras.py) go into the
 * type's dict, where a function binds as a method; the C methods are
 * never replaced. */
static PyObject *f_add_tensor_methods(PyObject *m, PyObject *d) {
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "_add_tensor_methods: a dict of name -> function");
        return NULL;
    }
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (!PyUnicode_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "_add_tensor_methods: names are strings");
            return NULL;
        }
        int has = PyDict_Contains(Tensor_Type.tp_dict, k);
        if (has < 0) return NULL;
        if (!has && PyDict_SetItem(Tensor_Type.tp_dict, k, v) < 0) return NULL;
    }
    PyType_Modified(&Tensor_Type);
    Py_RETURN_NONE;
}

static PyMethodDef misc_functions[] = {
    {"version", f_version, METH_NOARGS, "the library's version"},
    {"_add_tensor_methods", f_add_tensor_methods, METH_O,
     "adds Python functions as Tensor methods (never replacing the library's)"},
    {"_scope_depth", f_scope_depth, METH_NOARGS, "open cn scopes on this thread (0 between calls)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "chutney._C",
    .m_doc = "The C extension of chutney: the library's tensors, ops, autograd, nn and optimisers.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__C(void) {
    static PyMethodDef *const fn_lists[] = {
        misc_functions,         cnpy_creation_functions, cnpy_convert_functions,
        cnpy_arith_functions,   cnpy_ops_functions,      cnpy_autograd_functions,
        cnpy_nn_functions,      cnpy_optim_functions,    cnpy_io_functions,
        cnpy_device_functions,  cnpy_graph_functions,    cnpy_onnx_functions,
        cnpy_dlpack_functions,
    };
    static PyMethodDef *const tensor_lists[] = {
        cnpy_tensor_methods, cnpy_convert_methods, cnpy_arith_methods,
        cnpy_ops_methods,    cnpy_autograd_methods, cnpy_dlpack_methods,
    };
    static PyGetSetDef *const getset_lists[] = {cnpy_tensor_getset, cnpy_autograd_getset};

    static PyMethodDef *functions, *tensor_methods;
    static PyGetSetDef *tensor_getset;
    if (!functions) {
        functions = concat_methods(fn_lists, (int)(sizeof fn_lists / sizeof fn_lists[0]));
        tensor_methods = concat_methods(tensor_lists, (int)(sizeof tensor_lists / sizeof tensor_lists[0]));
        tensor_getset = concat_getset(getset_lists, (int)(sizeof getset_lists / sizeof getset_lists[0]));
        if (!functions || !tensor_methods || !tensor_getset) return PyErr_NoMemory();
    }
    module_def.m_methods = functions;
    Tensor_Type.tp_methods = tensor_methods;
    Tensor_Type.tp_getset = tensor_getset;
    Size_Type.tp_base = &PyTuple_Type;

    if (PyType_Ready(&Size_Type) < 0 || PyType_Ready(&Tensor_Type) < 0) return NULL;
    /* NumPy defers binary operators to tensors (ndarray + tensor -> tensor). */
    PyObject *prio = PyFloat_FromDouble(1000.0);
    if (!prio || PyDict_SetItemString(Tensor_Type.tp_dict, "__array_priority__", prio) < 0) {
        Py_XDECREF(prio);
        return NULL;
    }
    Py_DECREF(prio);
    PyType_Modified(&Tensor_Type);

    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (cnpy_add_ref(m, "Tensor", (PyObject *)&Tensor_Type) < 0 ||
        cnpy_add_ref(m, "Size", (PyObject *)&Size_Type) < 0 || cnpy_dtype_init(m) < 0 ||
        cnpy_device_init(m) < 0 || cnpy_convert_init(m) < 0 || cnpy_ops_init(m) < 0 ||
        cnpy_autograd_init(m) < 0 || cnpy_nn_init(m) < 0 || cnpy_optim_init(m) < 0 ||
        cnpy_graph_init(m) < 0 || cnpy_onnx_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddStringConstant(m, "__version__", cn_version()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
