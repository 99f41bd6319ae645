/* ONNX import: _C.OnnxModel owns one cn_onnx_model (loaded from a file or
 * from bytes, with optional concrete input shapes and load-time input
 * values), tells its inputs and outputs, and runs it on Tensors without the
 * GIL. chutney/onnx.py wraps it in chutney.onnx.Model (feeds by position or
 * name, NumPy in and out, onnxruntime's run/get_inputs).
 *
 * Errors keep the library's message. Loading: a file that cannot be opened
 * is an OSError (FileNotFoundError, PermissionError, ...), an op or feature
 * the importer lacks NotImplementedError ("unsupported: OP (opset N):
 * reason"), a bad input_shapes/values entry or a node's shape problem
 * ValueError, anything else (a corrupt or invalid file) RuntimeError.
 * Running: a fed tensor of the wrong dtype TypeError, of the wrong shape
 * ValueError, both checked here before the library is called. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    cn_onnx_model *m; /* never NULL once constructed */
} OnnxModelObject;

static PyTypeObject OnnxModel_Type;

#define OM(o) (cnpy_wait_idle(), ((OnnxModelObject *)(o))->m)

static const char *const dt_names[CN_DTYPE_COUNT] = {
    "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool", "int8"};

static const char *dt_name(cn_dtype dt) {
    return (int)dt >= 0 && dt < CN_DTYPE_COUNT ? dt_names[dt] : "?";
}

/* "[?, 3, 224, 224]" (-1: unknown) into buf. */
static const char *fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int d = 0; d < ndim && k < n; d++) {
        if (shape[d] < 0) k += (size_t)snprintf(buf + k, n - k, "%s?", d ? ", " : "");
        else k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    }
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

static bool has(const char *msg, const char *word) { return strstr(msg, word) != NULL; }

static bool ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && memcmp(s + a - b, tail, b) == 0;
}

/* Sets an exception of type with msg, which may hold bytes of the file that
 * are not UTF-8 (names in a corrupt model): those are replaced, not lost. */
static void set_error(PyObject *type, const char *msg) {
    PyObject *u = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
    if (!u) return;
    PyErr_SetObject(type, u);
    Py_DECREF(u);
}

/* Raises the library's last error from a run (rc its status). */
static PyObject *raise_run_error(int rc) {
    char buf[2048];
    const char *msg = cn_last_error();
    snprintf(buf, sizeof buf, "%s", msg && *msg ? msg : "onnx_run: the run failed (the library gave no message)");
    cn_clear_error();
    PyObject *type = PyExc_RuntimeError;
    if (rc == CN_ENOMEM || ends_with(buf, "out of memory")) type = PyExc_MemoryError;
    else if (rc == CN_EUNSUPPORTED || has(buf, "unsupported")) type = PyExc_NotImplementedError;
    else if (has(buf, "shape") || has(buf, "rank") || has(buf, "broadcast") || has(buf, "size") ||
             has(buf, "dimension"))
        type = PyExc_ValueError;
    set_error(type, buf);
    return NULL;
}

/* Raises the library's last error from a load (see the top of the file). */
static PyObject *raise_load_error(void) {
    char buf[2048];
    const char *msg = cn_last_error();
    snprintf(buf, sizeof buf, "%s",
             msg && *msg ? msg : "onnx: loading failed (the library gave no message)");
    cn_clear_error();
    PyObject *type = PyExc_RuntimeError;
    /* The part after "(opset N): " names a node's problem; a path before it
     * is not searched for words. */
    const char *opset = strstr(buf, " (opset ");
    const char *reason = opset ? opset : buf;
    if (has(buf, "cannot open")) { /* the model, or a file of its external data */
        if (ends_with(buf, "No such file or directory")) type = PyExc_FileNotFoundError;
        else if (ends_with(buf, "Permission denied")) type = PyExc_PermissionError;
        else if (ends_with(buf, "Is a directory")) type = PyExc_IsADirectoryError;
        else if (ends_with(buf, "Not a directory")) type = PyExc_NotADirectoryError;
        else type = PyExc_OSError;
    } else if (has(buf, "is a directory; only regular files")) {
        type = PyExc_IsADirectoryError;
    } else if (has(buf, "only regular files are read") || has(buf, "is not a regular file") ||
               has(buf, "reading '")) {
        type = PyExc_OSError;
    } else if (ends_with(buf, "out of memory")) {
        type = PyExc_MemoryError;
    } else if (!strncmp(buf, "unsupported: ", 13) || has(buf, "built without ONNX")) {
        type = PyExc_NotImplementedError;
    } else if (has(buf, "the shape given") || has(buf, "the value given") ||
               has(buf, "which is not an input of the model") || has(buf, "by position; the model has") ||
               has(buf, "bad load options")) {
        type = PyExc_ValueError; /* input_shapes / values */
    } else if (opset && (has(reason, "shape") || has(reason, "rank") || has(reason, "broadcast") ||
                         has(reason, "size") || has(reason, "dimension"))) {
        type = PyExc_ValueError;
    }
    set_error(type, buf);
    return NULL;
}

/* ---- construction ---- */

typedef struct {
    cn_onnx_input_shape *shapes;
    int nshapes;
    cn_onnx_input_value *values;
    int nvalues;
    cn_tensor **owned; /* the values' tensors, released after the load */
    PyObject *keep;    /* keeps the name strings alive */
} load_args;

static void load_args_free(load_args *a) {
    for (int i = 0; i < a->nvalues; i++) cn_release(a->owned[i]);
    PyMem_Free(a->shapes);
    PyMem_Free(a->values);
    PyMem_Free(a->owned);
    Py_XDECREF(a->keep);
}

/* items: a list of (name or None, object) pairs from a dict or a list. */
static PyObject *as_items(PyObject *o, const char *what) {
    if (PyDict_Check(o)) return PyDict_Items(o);
    if (!PyList_Check(o) && !PyTuple_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a dict (input name -> %s) or a list (one per input), "
                     "not %s", what, !strcmp(what, "input_shapes") ? "shape" : "value",
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    Py_ssize_t n = PySequence_Size(o);
    PyObject *lst = n >= 0 ? PyList_New(n) : NULL;
    for (Py_ssize_t i = 0; lst && i < n; i++) {
        PyObject *it = PySequence_GetItem(o, i);
        PyObject *pair = it ? PyTuple_Pack(2, Py_None, it) : NULL;
        Py_XDECREF(it);
        if (!pair) Py_CLEAR(lst);
        else PyList_SET_ITEM(lst, i, pair);
    }
    return lst;
}

static int name_of(PyObject *k, const char **out, const char *what) {
    if (k == Py_None) {
        *out = NULL;
        return 0;
    }
    if (!PyUnicode_Check(k)) {
        PyErr_Format(PyExc_TypeError, "%s: input names are str, not %s", what, Py_TYPE(k)->tp_name);
        return -1;
    }
    *out = PyUnicode_AsUTF8(k);
    return *out ? 0 : -1;
}

static int parse_shapes(PyObject *o, load_args *a) {
    if (o == Py_None) return 0;
    PyObject *items = as_items(o, "input_shapes");
    if (!items) return -1;
    if (PyList_Append(a->keep, items) < 0) {
        Py_DECREF(items);
        return -1;
    }
    Py_DECREF(items);
    Py_ssize_t n = PyList_GET_SIZE(items);
    if (n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "input_shapes: too many entries");
        return -1;
    }
    a->shapes = PyMem_Calloc((size_t)n + 1, sizeof *a->shapes);
    if (!a->shapes) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 0);
        PyObject *v = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 1);
        cn_onnx_input_shape *s = &a->shapes[i];
        if (name_of(k, &s->name, "input_shapes") < 0) return -1;
        if (v == Py_None || PyLong_Check(v) || Tensor_Check(v)) {
            if (s->name)
                PyErr_Format(PyExc_TypeError, "input_shapes: the shape of '%s' must be a sequence of ints "
                             "(e.g. (1, 3, 224, 224)), not %s", s->name, Py_TYPE(v)->tp_name);
            else
                PyErr_Format(PyExc_TypeError, "input_shapes: entry %zd must be a shape, a sequence of "
                             "ints (e.g. [(1, 3, 224, 224)] for one input), not %s", i,
                             Py_TYPE(v)->tp_name);
            return -1;
        }
        if (!cnpy_shape_from(v, &s->ndim, s->shape)) return -1;
        a->nshapes++;
    }
    return 0;
}

static int parse_values(PyObject *o, load_args *a) {
    if (o == Py_None) return 0;
    PyObject *items = as_items(o, "values");
    if (!items) return -1;
    if (PyList_Append(a->keep, items) < 0) {
        Py_DECREF(items);
        return -1;
    }
    Py_DECREF(items);
    Py_ssize_t n = PyList_GET_SIZE(items);
    if (n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "values: too many entries");
        return -1;
    }
    a->values = PyMem_Calloc((size_t)n + 1, sizeof *a->values);
    a->owned = PyMem_Calloc((size_t)n + 1, sizeof *a->owned);
    if (!a->values || !a->owned) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 0);
        PyObject *v = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 1);
        cn_onnx_input_value *e = &a->values[i];
        if (name_of(k, &e->name, "values") < 0) return -1;
        if (v != Py_None) { /* None in a list: that input stays an input */
            cn_tensor *t = cnpy_as_tensor(v, NULL);
            if (!t) return -1;
            e->value = a->owned[i] = t;
        }
        a->nvalues++;
    }
    return 0;
}

/* OnnxModel(source, shapes=None, values=None, unknown_size=0, base_dir=None):
 * source a path (str or os.PathLike) or a bytes-like object holding a
 * serialized ModelProto (bytes are never taken for a path). */
static PyObject *onnxmodel_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"source", "shapes", "values", "unknown_size", "base_dir", NULL};
    PyObject *src, *shapes = Py_None, *values = Py_None, *bdir = Py_None;
    long long unknown = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOLO:OnnxModel", kwlist, &src, &shapes, &values,
                                     &unknown, &bdir))
        return NULL;
    if (unknown < 0) {
        PyErr_SetString(PyExc_ValueError, "unknown_size must be >= 0 (0: unknown sizes stay unknown)");
        return NULL;
    }
    bool from_buffer = PyObject_CheckBuffer(src) && !PyUnicode_Check(src);
    if (!from_buffer && bdir != Py_None) {
        PyErr_SetString(PyExc_TypeError, "base_dir is for a model given as bytes (a file's external data "
                                         "is looked up next to it)");
        return NULL;
    }
    load_args a = {0};
    Py_buffer view = {0};
    PyObject *path_b = NULL, *dir_b = NULL;
    cn_onnx_model *m = NULL;
    PyObject *res = NULL;
    if (!(a.keep = PyList_New(0))) return NULL;
    if (parse_shapes(shapes, &a) < 0 || parse_values(values, &a) < 0) goto done;
    if (from_buffer) {
        if (PyObject_GetBuffer(src, &view, PyBUF_SIMPLE) < 0) goto done;
        if (bdir != Py_None && !PyUnicode_FSConverter(bdir, &dir_b)) goto done;
    } else if (!PyUnicode_FSConverter(src, &path_b)) {
        goto done;
    }
    cn_onnx_load_opts o = {
        .shapes = a.shapes, .nshapes = a.nshapes, .values = a.values, .nvalues = a.nvalues,
        .unknown_size = (int64_t)unknown,
    };
    const char *path = path_b ? PyBytes_AS_STRING(path_b) : NULL;
    const char *dir = dir_b ? PyBytes_AS_STRING(dir_b) : NULL;
    /* Reading, parsing and folding can be long: without the GIL. */
    cnpy_nogil_begin();
    cn_scope_begin();
    m = path ? cn_onnx_load(path, &o) : cn_onnx_load_buffer(view.buf, (size_t)view.len, dir, &o);
    cn_scope_end();
    cnpy_nogil_end();
    if (!m) {
        raise_load_error();
        goto done;
    }
    OnnxModelObject *self = (OnnxModelObject *)tp->tp_alloc(tp, 0);
    if (!self) {
        cnpy_wait_idle();
        cn_onnx_free(m);
        goto done;
    }
    self->m = m;
    res = (PyObject *)self;
done:
    if (view.obj) PyBuffer_Release(&view);
    Py_XDECREF(path_b);
    Py_XDECREF(dir_b);
    cnpy_wait_idle();
    load_args_free(&a);
    return res;
}

static void onnxmodel_dealloc(PyObject *self) {
    OnnxModelObject *o = (OnnxModelObject *)self;
    if (o->m) {
        cnpy_wait_idle();
        cn_onnx_free(o->m);
        o->m = NULL;
    }
    Py_TYPE(self)->tp_free(self);
}

/* ---- inspection ---- */

static PyObject *names_tuple(PyObject *self, bool outputs) {
    cn_onnx_model *m = OM(self);
    int n = outputs ? cn_onnx_num_outputs(m) : cn_onnx_num_inputs(m);
    if (n < 0) return cnpy_raise(n);
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        const char *s = outputs ? cn_onnx_output_name(m, i) : cn_onnx_input_name(m, i);
        PyObject *u = PyUnicode_DecodeUTF8(s ? s : "", (Py_ssize_t)strlen(s ? s : ""), "replace");
        if (!u) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, u);
    }
    return t;
}

static PyObject *om_input_names(PyObject *self, void *c) { return names_tuple(self, false); }
static PyObject *om_output_names(PyObject *self, void *c) { return names_tuple(self, true); }

/* The declared dtypes (what=0) or shapes (what=1, -1 for unknown sizes) of
 * the inputs or outputs. */
static PyObject *decl_tuple(PyObject *self, bool outputs, int what) {
    cn_onnx_model *m = OM(self);
    int n = outputs ? cn_onnx_num_outputs(m) : cn_onnx_num_inputs(m);
    if (n < 0) return cnpy_raise(n);
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        cn_tensor *v = outputs ? cn_onnx_output(m, i) : cn_onnx_input(m, i);
        if (!v && outputs && cn_onnx_eager_reason(m)) { /* declared without a shape */
            Py_INCREF(Py_None);
            PyTuple_SET_ITEM(t, i, Py_None);
            continue;
        }
        if (!v) {
            Py_DECREF(t);
            return cnpy_raise(0);
        }
        PyObject *e;
        if (what == 0) {
            e = cnpy_dtype_obj(cn_tensor_dtype(v));
        } else {
            int nd = cn_ndim(v);
            const int64_t *sh = cn_shape(v);
            e = PyTuple_New(nd);
            for (int d = 0; e && d < nd; d++) {
                PyObject *x = PyLong_FromLongLong(sh[d] < 0 ? -1 : (long long)sh[d]);
                if (!x) Py_CLEAR(e);
                else PyTuple_SET_ITEM(e, d, x);
            }
        }
        if (!e) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, e);
    }
    return t;
}

static PyObject *om_input_dtypes(PyObject *self, void *c) { return decl_tuple(self, false, 0); }
static PyObject *om_input_shapes(PyObject *self, void *c) { return decl_tuple(self, false, 1); }
static PyObject *om_output_dtypes(PyObject *self, void *c) { return decl_tuple(self, true, 0); }
static PyObject *om_output_shapes(PyObject *self, void *c) { return decl_tuple(self, true, 1); }

static PyObject *om_opset(PyObject *self, void *c) {
    int v = cn_onnx_opset(OM(self));
    return v < 0 ? cnpy_raise(v) : PyLong_FromLong(v);
}

static PyObject *om_eager_reason(PyObject *self, void *c) {
    const char *why = cn_onnx_eager_reason(OM(self));
    if (!why) Py_RETURN_NONE;
    return PyUnicode_FromString(why);
}

static PyObject *om_num_params(PyObject *self, void *c) {
    int64_t v = cn_onnx_num_params(OM(self));
    return v < 0 ? cnpy_raise((int)v) : PyLong_FromLongLong((long long)v);
}

static PyObject *om_nodes(PyObject *self, void *c) {
    cn_onnx_model *m = OM(self);
    int n = cn_onnx_num_nodes(m);
    if (n < 0) return cnpy_raise(n);
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        const char *s = cn_onnx_node_op(m, i);
        PyObject *u = PyUnicode_DecodeUTF8(s ? s : "", (Py_ssize_t)strlen(s ? s : ""), "replace");
        if (!u) Py_CLEAR(l);
        else PyList_SET_ITEM(l, i, u);
    }
    return l;
}

/* ---- running ---- */

/* Checks Tensor x against input i's placeholder: TypeError for the dtype,
 * ValueError for the shape. */
static int check_input(cn_onnx_model *m, int i, PyObject *x) {
    const char *name = cn_onnx_input_name(m, i);
    if (!Tensor_Check(x)) {
        PyErr_Format(PyExc_TypeError, "OnnxModel.run: input %d ('%s') must be a Tensor, not %s", i, name,
                     Py_TYPE(x)->tp_name);
        return -1;
    }
    cn_tensor *ph = cn_onnx_input(m, i), *t = TT(x);
    if (!ph) return cnpy_raise_int(0);
    if (cn_is_symbolic_tensor(t)) {
        PyErr_Format(PyExc_TypeError, "OnnxModel.run: input '%s' is a symbolic tensor (of a graph being "
                     "built); run the model on tensors with data", name);
        return -1;
    }
    cn_dtype want = cn_tensor_dtype(ph), got = cn_tensor_dtype(t);
    char b1[256], b2[256];
    int pnd = cn_ndim(ph), tnd = cn_ndim(t);
    const int64_t *ps = cn_shape(ph), *ts = cn_shape(t);
    if (want != got) {
        PyErr_Format(PyExc_TypeError, "OnnxModel.run: input '%s' must be %s, not %s (shape %s)", name,
                     dt_name(want), dt_name(got), fmt_shape(b2, sizeof b2, tnd, ts));
        return -1;
    }
    bool ok = pnd == tnd;
    for (int d = 0; ok && d < pnd; d++) ok = ps[d] < 0 || ps[d] == ts[d];
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "OnnxModel.run: input '%s' must have shape %s (? any size), not %s",
                     name, fmt_shape(b1, sizeof b1, pnd, ps), fmt_shape(b2, sizeof b2, tnd, ts));
        return -1;
    }
    return 0;
}

/* Does output i of a run need a copy of its own? It does when it is (a view
 * of) a constant of the model, of a fed input, or of an earlier output:
 * writing into it must not change the model or the caller's arrays. */
static bool needs_copy(cn_onnx_model *m, cn_tensor **outs, int i, cn_tensor *const *ins, int nin) {
    cn_tensor *o = outs[i];
    cn_tensor *decl = cn_onnx_output(m, i);
    if (!decl || !cn_is_symbolic_tensor(decl)) return true; /* folded to a constant */
    if (cn_offset(o) != 0 || !cn_is_contiguous(o)) return true; /* a view of something */
    for (int k = 0; k < nin; k++)
        if (cn_shares_storage(o, ins[k])) return true;
    for (int k = 0; k < i; k++)
        if (cn_shares_storage(o, outs[k])) return true;
    int nout = cn_onnx_num_outputs(m);
    for (int k = 0; k < nout; k++) {
        cn_tensor *c = cn_onnx_output(m, k);
        if (c && !cn_is_symbolic_tensor(c) && cn_shares_storage(o, c)) return true;
    }
    return false;
}

/* run(inputs) -> tuple of Tensors: inputs a sequence of Tensors in the
 * model's input order. */
static PyObject *om_run(PyObject *self, PyObject *inputs) {
    cn_onnx_model *m = OM(self);
    PyObject *seq = PySequence_Fast(inputs, "OnnxModel.run: expected a sequence of Tensors");
    if (!seq) return NULL;
    int nin = cn_onnx_num_inputs(m), nout = cn_onnx_num_outputs(m);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *res = NULL;
    cn_tensor **ins = NULL, **outs = NULL;
    if (nin < 0 || nout < 0) {
        cnpy_raise(nin < 0 ? nin : nout);
        goto done;
    }
    if (n != nin) {
        PyErr_Format(PyExc_TypeError, "OnnxModel.run: the model has %d input%s, %zd given", nin,
                     nin == 1 ? "" : "s", n);
        goto done;
    }
    ins = PyMem_Calloc((size_t)nin + 1, sizeof *ins);
    outs = PyMem_Calloc((size_t)nout + 1, sizeof *outs);
    if (!ins || !outs) {
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < nin; i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(seq, i);
        if (check_input(m, i, x) < 0) goto done;
        ins[i] = TT(x);
    }
    int rc;
    cnpy_nogil_begin();
    cn_scope_begin();
    rc = cn_onnx_run(m, ins, outs);
    for (int i = 0; rc >= 0 && i < nout; i++) {
        if (needs_copy(m, outs, i, ins, nin)) {
            outs[i] = cn_clone(outs[i]);
            if (!outs[i]) rc = CN_ENOMEM;
        }
    }
    if (rc >= 0)
        for (int i = 0; i < nout; i++) cn_keep(outs[i]);
    cn_scope_end();
    cnpy_nogil_end();
    if (rc < 0) {
        raise_run_error(rc);
        goto done;
    }
    /* cnpy_wrap takes each reference, also when it fails. */
    res = PyTuple_New(nout);
    for (int i = 0; i < nout; i++) {
        PyObject *t = res ? cnpy_wrap(outs[i]) : NULL;
        if (!res) cn_release(outs[i]);
        else if (!t) Py_CLEAR(res);
        else PyTuple_SET_ITEM(res, i, t);
    }
done:
    PyMem_Free(ins);
    PyMem_Free(outs);
    Py_DECREF(seq);
    return res;
}

static PyObject *om_repr(PyObject *self) {
    cn_onnx_model *m = OM(self);
    int nin = cn_onnx_num_inputs(m), nout = cn_onnx_num_outputs(m), nn = cn_onnx_num_nodes(m);
    return PyUnicode_FromFormat("<chutney._C.OnnxModel: opset %d, %d input%s, %d output%s, %d node%s>",
                                cn_onnx_opset(m), nin, nin == 1 ? "" : "s", nout, nout == 1 ? "" : "s",
                                nn, nn == 1 ? "" : "s");
}

static PyMethodDef onnxmodel_methods[] = {
    {"run", om_run, METH_O,
     "run(inputs) -> tuple of Tensors: inputs a sequence of Tensors in input order (dtypes and known "
     "sizes must match; the GIL is released while it runs)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef onnxmodel_getset[] = {
    {"input_names", om_input_names, NULL, "the graph inputs (initializers and bound values excluded)", NULL},
    {"output_names", om_output_names, NULL, "the graph outputs", NULL},
    {"input_dtypes", om_input_dtypes, NULL, "the inputs' declared dtypes", NULL},
    {"input_shapes", om_input_shapes, NULL, "the inputs' shapes (-1: unknown until run)", NULL},
    {"output_dtypes", om_output_dtypes, NULL, "the outputs' dtypes", NULL},
    {"output_shapes", om_output_shapes, NULL, "the outputs' shapes (-1: unknown until run)", NULL},
    {"opset", om_opset, NULL, "the opset of the default domain", NULL},
    {"num_params", om_num_params, NULL, "elements of all initializers", NULL},
    {"eager_reason", om_eager_reason, NULL,
     "None for a static graph; else why the model runs eagerly (shapes that depend on values)", NULL},
    {"nodes", om_nodes, NULL, "the op type of each node of the file, in order", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject OnnxModel_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "chutney._C.OnnxModel",
    .tp_basicsize = sizeof(OnnxModelObject),
    .tp_dealloc = onnxmodel_dealloc,
    .tp_repr = om_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "OnnxModel(source, shapes=None, values=None, unknown_size=0, base_dir=None): an ONNX model "
              "(cn_onnx_model) loaded from a path or from bytes; shapes: {name: shape} or [shape, ...] "
              "for inputs with unknown sizes; values: {name: value} or [value or None, ...] for inputs "
              "known at load time; unknown_size: the size of every size still unknown (0: keep them "
              "unknown); base_dir: where a model given as bytes has its external data",
    .tp_methods = onnxmodel_methods,
    .tp_getset = onnxmodel_getset,
    .tp_new = onnxmodel_new,
};

/* ---- module functions ---- */

/* onnx_load_tensor(path) -> Tensor: a serialized TensorProto. */
static PyObject *f_onnx_load_tensor(PyObject *mod, PyObject *po) {
    PyObject *pk = NULL;
    if (!PyUnicode_FSConverter(po, &pk)) return NULL;
    cn_tensor *t;
    cnpy_nogil_begin();
    cn_scope_begin();
    t = cn_onnx_load_tensor(PyBytes_AS_STRING(pk));
    if (t) cn_keep(t);
    cn_scope_end();
    cnpy_nogil_end();
    Py_DECREF(pk);
    if (!t) return raise_load_error();
    return cnpy_wrap(t);
}

/* onnx_supported_ops() -> sorted list of the ONNX op types the importer
 * reads (empty without ONNX support). */
static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static PyObject *f_onnx_supported_ops(PyObject *mod, PyObject *unused) {
    cnpy_wait_idle();
    int n = cn_onnx_op_count();
    if (n < 0) n = 0;
    const char **names = PyMem_Calloc((size_t)n + 1, sizeof *names);
    if (!names) return PyErr_NoMemory();
    int k = 0;
    for (int i = 0; i < n; i++) {
        cn_onnx_op_info info;
        if (cn_onnx_get_op_info(i, &info) == 0 && info.name) names[k++] = info.name;
    }
    qsort(names, (size_t)k, sizeof *names, cmp_str);
    PyObject *l = PyList_New(k);
    for (int i = 0; l && i < k; i++) {
        PyObject *u = PyUnicode_FromString(names[i]);
        if (!u) Py_CLEAR(l);
        else PyList_SET_ITEM(l, i, u);
    }
    PyMem_Free(names);
    return l;
}

PyMethodDef cnpy_onnx_functions[] = {
    {"onnx_load_tensor", f_onnx_load_tensor, METH_O,
     "onnx_load_tensor(path) -> Tensor: a serialized ONNX TensorProto (the test data's input_0.pb)"},
    {"onnx_supported_ops", f_onnx_supported_ops, METH_NOARGS,
     "the ONNX op types the importer reads, sorted (empty in a build without ONNX support)"},
    {NULL, NULL, 0, NULL},
};

int cnpy_onnx_init(PyObject *m) {
    if (PyType_Ready(&OnnxModel_Type) < 0) return -1;
    return cnpy_add_ref(m, "OnnxModel", (PyObject *)&OnnxModel_Type);
}
