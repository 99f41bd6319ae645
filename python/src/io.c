/* Files: safetensors checkpoints (save/load of dicts of tensors), .npy, and
 * the Fashion-MNIST reader. */
#include "common.h"

#include <stdlib.h>

#define KW (METH_VARARGS | METH_KEYWORDS)
#define FN(f) (PyCFunction)(void (*)(void))(f)

static const char *path_of(PyObject *o, PyObject **keep) {
    *keep = NULL;
    if (!PyUnicode_FSConverter(o, keep)) return NULL;
    return PyBytes_AS_STRING(*keep);
}

/* _save_safetensors(path, [(name, tensor)], {key: value}) */
static PyObject *f_save_safetensors(PyObject *m, PyObject *args) {
    PyObject *po, *items, *meta = Py_None;
    if (!PyArg_ParseTuple(args, "OO|O:save", &po, &items, &meta)) return NULL;
    PyObject *pk;
    const char *path = path_of(po, &pk);
    if (!path) return NULL;
    PyObject *lst = PySequence_List(items);
    PyObject *mlst = meta != Py_None ? PyDict_Items(meta) : PyList_New(0);
    if (!lst || !mlst) {
        Py_XDECREF(lst);
        Py_XDECREF(mlst);
        Py_DECREF(pk);
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(lst), nm = PyList_GET_SIZE(mlst);
    const char **names = PyMem_Calloc((size_t)n + 1, sizeof *names);
    cn_tensor **ts = PyMem_Calloc((size_t)n + 1, sizeof *ts);
    const char **mk = PyMem_Calloc((size_t)nm + 1, sizeof *mk);
    const char **mv = PyMem_Calloc((size_t)nm + 1, sizeof *mv);
    PyObject *res = NULL;
    if (!names || !ts || !mk || !mv) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyList_GET_ITEM(lst, i), *name, *t;
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2 ||
            !PyUnicode_Check(name = PyTuple_GET_ITEM(it, 0)) || !Tensor_Check(t = PyTuple_GET_ITEM(it, 1))) {
            PyErr_SetString(PyExc_TypeError, "save: expected a dict of str -> Tensor");
            goto done;
        }
        if (!(names[i] = PyUnicode_AsUTF8(name))) goto done;
        ts[i] = TT(t);
    }
    for (Py_ssize_t i = 0; i < nm; i++) {
        PyObject *it = PyList_GET_ITEM(mlst, i);
        PyObject *k = PyTuple_GET_ITEM(it, 0), *v = PyTuple_GET_ITEM(it, 1);
        if (!PyUnicode_Check(k) || !PyUnicode_Check(v)) {
            PyErr_SetString(PyExc_TypeError, "save: metadata must map str to str");
            goto done;
        }
        if (!(mk[i] = PyUnicode_AsUTF8(k)) || !(mv[i] = PyUnicode_AsUTF8(v))) goto done;
    }
    int rc;
    CNPY_INT_NOGIL(rc, cn_save_safetensors(path, names, ts, (int)n, mk, mv, (int)nm));
    if (rc < 0) {
        cnpy_raise(rc);
        goto done;
    }
    Py_INCREF(Py_None);
    res = Py_None;
done:
    PyMem_Free(names);
    PyMem_Free(ts);
    PyMem_Free(mk);
    PyMem_Free(mv);
    Py_DECREF(lst);
    Py_DECREF(mlst);
    Py_DECREF(pk);
    return res;
}

/* _load_safetensors(path) -> ([(name, tensor)], {metadata}) */
static PyObject *f_load_safetensors(PyObject *m, PyObject *po) {
    PyObject *pk;
    const char *path = path_of(po, &pk);
    if (!path) return NULL;
    cn_checkpoint *c = cn_load_safetensors(path);
    Py_DECREF(pk);
    if (!c) return cnpy_raise(0);
    PyObject *lst = PyList_New(0), *meta = PyDict_New();
    int n = cn_checkpoint_count(c);
    for (int i = 0; lst && meta && i < n; i++) {
        PyObject *t = cnpy_wrap(cn_retain(cn_checkpoint_tensor(c, i)));
        PyObject *it = t ? Py_BuildValue("(sN)", cn_checkpoint_name(c, i), t) : NULL;
        if (!it || PyList_Append(lst, it) < 0) Py_CLEAR(lst);
        Py_XDECREF(it);
    }
    int nm = cn_checkpoint_metadata_count(c);
    for (int i = 0; lst && meta && i < nm; i++) {
        PyObject *v = PyUnicode_FromString(cn_checkpoint_metadata_value(c, i));
        if (!v || PyDict_SetItemString(meta, cn_checkpoint_metadata_key(c, i), v) < 0) Py_CLEAR(meta);
        Py_XDECREF(v);
    }
    cn_checkpoint_free(c);
    if (!lst || !meta) {
        Py_XDECREF(lst);
        Py_XDECREF(meta);
        return NULL;
    }
    return Py_BuildValue("(NN)", lst, meta);
}

static PyObject *f_load_npy(PyObject *m, PyObject *po) {
    PyObject *pk;
    const char *path = path_of(po, &pk);
    if (!path) return NULL;
    cn_tensor *t = CNPY_CALL(cn_load_npy(path));
    Py_DECREF(pk);
    if (!t) return cnpy_raise(0);
    return cnpy_wrap(t);
}

static PyObject *f_save_npy(PyObject *m, PyObject *args) {
    PyObject *po, *t;
    if (!PyArg_ParseTuple(args, "OO!:save_npy", &po, &Tensor_Type, &t)) return NULL;
    PyObject *pk;
    const char *path = path_of(po, &pk);
    if (!path) return NULL;
    int rc;
    CNPY_INT_NOGIL(rc, cn_save_npy(path, TT(t)));
    Py_DECREF(pk);
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}

/* load_fashion_mnist(root=None, train=True, raw=False) -> (images, labels) */
static PyObject *f_load_fashion_mnist(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"root", "train", "raw", NULL};
    PyObject *ro = Py_None;
    int train = 1, raw = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Opp:load_fashion_mnist", kwlist, &ro, &train, &raw))
        return NULL;
    PyObject *pk = NULL;
    const char *root = NULL;
    if (ro != Py_None && !(root = path_of(ro, &pk))) return NULL;
    cn_tensor *x = NULL, *y = NULL;
    int rc;
    cnpy_nogil_begin();
    cn_scope_begin();
    rc = raw ? cn_load_fashion_mnist_u8(root, train, &x, &y) : cn_load_fashion_mnist(root, train, &x, &y);
    if (rc >= 0) {
        cn_keep(x);
        cn_keep(y);
    } else {
        x = y = NULL; /* released with the scope, if made */
    }
    cn_scope_end();
    cnpy_nogil_end();
    Py_XDECREF(pk);
    if (rc < 0) return cnpy_raise(rc);
    PyObject *px = cnpy_wrap(x), *py = cnpy_wrap(y);
    if (!px || !py) {
        Py_XDECREF(px);
        Py_XDECREF(py);
        return NULL;
    }
    return Py_BuildValue("(NN)", px, py);
}

PyMethodDef cnpy_io_functions[] = {
    {"_save_safetensors", f_save_safetensors, METH_VARARGS, NULL},
    {"_load_safetensors", f_load_safetensors, METH_O, NULL},
    {"load_npy", f_load_npy, METH_O, "a .npy file as a tensor"},
    {"save_npy", f_save_npy, METH_VARARGS, "save_npy(path, tensor)"},
    {"load_fashion_mnist", FN(f_load_fashion_mnist), KW,
     "load_fashion_mnist(root=None, train=True, raw=False) -> (images, labels)"},
    {NULL, NULL, 0, NULL},
};
