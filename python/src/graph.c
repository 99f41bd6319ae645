/* Static graphs from Python: _C.Graph (cn_graph: placeholders, tracing),
 * _C.Program (cn_program: compiled once, run many times) and the ONNX
 * export of a traced graph. chutney/_compile.py does the tracing of Python
 * functions (chutney.compile) on top of these. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KW (METH_VARARGS | METH_KEYWORDS)
#define FN(f) (PyCFunction)(void (*)(void))(f)

typedef struct {
    PyObject_HEAD
    cn_graph *g;
} GraphObject;

typedef struct {
    PyObject_HEAD
    cn_program *p;
    PyObject *graph;        /* the Graph: its tensors stay valid while the program runs */
    PyObject *placeholders; /* tuple of the placeholder Tensors, in feed order */
    PyObject *keep;         /* what the program reads and must outlive it (the optimiser) */
    int noutputs;
} ProgramObject;

static PyTypeObject Graph_Type, Program_Type;

/* ---- Graph ---- */

static PyObject *graph_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    if (!PyArg_ParseTuple(args, ":Graph")) return NULL;
    GraphObject *self = (GraphObject *)tp->tp_alloc(tp, 0);
    if (!self) return NULL;
    cnpy_wait_idle();
    self->g = cn_graph_new();
    if (!self->g) {
        Py_DECREF(self);
        return cnpy_raise(0);
    }
    return (PyObject *)self;
}

static void graph_dealloc(GraphObject *self) {
    if (self->g) {
        cnpy_wait_idle();
        cn_graph_free(self->g);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* placeholder(name, dtype, shape): a graph input (-1 sizes are unknown). */
static PyObject *graph_placeholder(GraphObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"name", "dtype", "shape", NULL};
    const char *name;
    cn_dtype dt = CN_F32;
    PyObject *shape_o;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO&O:placeholder", kwlist, &name, cnpy_dtype_conv,
                                     &dt, &shape_o))
        return NULL;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    if (!cnpy_shape_from(shape_o, &ndim, shape)) return NULL;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < -1) {
            PyErr_Format(PyExc_ValueError, "placeholder: size %lld of dim %d (give >= 0, or -1 "
                                           "for a size known only at run time)",
                         (long long)shape[i], i);
            return NULL;
        }
    return cnpy_wrap(CNPY_CALL(cn_placeholder(self->g, name, dt, ndim, shape)));
}

static PyMethodDef graph_methods[] = {
    {"placeholder", FN(graph_placeholder), KW,
     "placeholder(name, dtype, shape): a graph input fed at run time (-1: a size known only then)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Graph_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chutney._C.Graph",
    .tp_basicsize = sizeof(GraphObject),
    .tp_dealloc = (destructor)graph_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A static graph: ops given its placeholders build nodes instead of computing.",
    .tp_methods = graph_methods,
    .tp_new = graph_new,
};

/* ---- tensors from Python sequences ---- */

/* The Tensors of a sequence, borrowed into a PyMem array (*n of them); the
 * list that keeps them alive is returned (a new reference) in *keep. */
static cn_tensor **tensor_array(PyObject *seq, const char *what, Py_ssize_t *n, PyObject **keep) {
    *keep = PySequence_List(seq);
    if (!*keep) return NULL;
    *n = PyList_GET_SIZE(*keep);
    cn_tensor **ts = PyMem_Calloc((size_t)*n + 1, sizeof *ts);
    if (!ts) {
        Py_CLEAR(*keep);
        return (cn_tensor **)PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *o = PyList_GET_ITEM(*keep, i);
        if (!Tensor_Check(o)) {
            PyErr_Format(PyExc_TypeError, "%s: element %zd is %s, not a Tensor", what, i,
                         Py_TYPE(o)->tp_name);
            PyMem_Free(ts);
            Py_CLEAR(*keep);
            return NULL;
        }
        ts[i] = TT(o);
    }
    return ts;
}

static int check_graph(PyObject *o, const char *what) {
    if (PyObject_TypeCheck(o, &Graph_Type)) return 0;
    PyErr_Format(PyExc_TypeError, "%s: expected a Graph, got %s", what, Py_TYPE(o)->tp_name);
    return -1;
}

/* ---- Program ---- */

static PyObject *make_program(cn_program *p, PyObject *graph, PyObject *placeholders,
                              PyObject *keep, int noutputs) {
    if (!p) return cnpy_raise(0);
    ProgramObject *self = PyObject_New(ProgramObject, &Program_Type);
    PyObject *phs = PySequence_Tuple(placeholders);
    if (!self || !phs) {
        Py_XDECREF(phs);
        Py_XDECREF(self);
        cn_program_free(p);
        return NULL;
    }
    self->p = p;
    Py_INCREF(graph);
    self->graph = graph;
    self->placeholders = phs;
    Py_XINCREF(keep);
    self->keep = keep;
    self->noutputs = noutputs;
    return (PyObject *)self;
}

static void program_dealloc(ProgramObject *self) {
    if (self->p) {
        cnpy_wait_idle();
        cn_program_free(self->p);
    }
    Py_XDECREF(self->placeholders);
    Py_XDECREF(self->keep);
    Py_XDECREF(self->graph);
    PyObject_Free(self);
}

/* compile(graph, placeholders, outputs, opt_level=2): the program computing
 * outputs from the placeholders (every one must be fed at run). */
static PyObject *f_compile(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"graph", "placeholders", "outputs", "opt_level", NULL};
    PyObject *graph, *phs, *outs;
    int level = 2;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|i:compile", kwlist, &graph, &phs, &outs, &level))
        return NULL;
    if (check_graph(graph, "compile") < 0) return NULL;
    if (level < 0 || level > 2) {
        PyErr_Format(PyExc_ValueError, "compile: opt_level %d (give 0, 1 or 2)", level);
        return NULL;
    }
    PyObject *keep;
    Py_ssize_t n;
    cn_tensor **ts = tensor_array(outs, "compile outputs", &n, &keep);
    if (!ts) return NULL;
    if (n < 1) {
        PyMem_Free(ts);
        Py_DECREF(keep);
        PyErr_SetString(PyExc_ValueError, "compile: no outputs");
        return NULL;
    }
    cn_compile_opts o = {.opt_level = level};
    cn_program *p;
    cnpy_nogil_begin();
    p = cn_compile(((GraphObject *)graph)->g, ts, (int)n, &o);
    cnpy_nogil_end();
    PyMem_Free(ts);
    Py_DECREF(keep);
    return make_program(p, graph, phs, NULL, (int)n);
}

/* compile_train_step(graph, placeholders, outputs, optimizer, opt_level=2):
 * outputs[0] is the loss; a run also writes the parameters' gradients and
 * makes the optimiser's update. */
static PyObject *f_compile_train_step(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"graph", "placeholders", "outputs", "optimizer", "opt_level", NULL};
    PyObject *graph, *phs, *outs, *opt_o;
    int level = 2;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|i:compile_train_step", kwlist, &graph, &phs,
                                     &outs, &opt_o, &level))
        return NULL;
    if (check_graph(graph, "compile_train_step") < 0) return NULL;
    cn_optimizer *opt = cnpy_optimizer_of(opt_o);
    if (!opt) return NULL;
    if (level < 0 || level > 2) {
        PyErr_Format(PyExc_ValueError, "compile_train_step: opt_level %d (give 0, 1 or 2)", level);
        return NULL;
    }
    PyObject *keep;
    Py_ssize_t n;
    cn_tensor **ts = tensor_array(outs, "compile_train_step outputs", &n, &keep);
    if (!ts) return NULL;
    cn_compile_opts o = {.opt_level = level};
    cn_program *p;
    cnpy_nogil_begin();
    p = cn_compile_train_step(((GraphObject *)graph)->g, ts, (int)n, opt, &o);
    cnpy_nogil_end();
    PyMem_Free(ts);
    Py_DECREF(keep);
    return make_program(p, graph, phs, opt_o, (int)n);
}

/* run(values): feeds values[i] to placeholder i; the outputs as a tuple. */
static PyObject *program_run(ProgramObject *self, PyObject *values) {
    PyObject *keep;
    Py_ssize_t n;
    cn_tensor **vs = tensor_array(values, "run", &n, &keep);
    if (!vs) return NULL;
    Py_ssize_t nph = PyTuple_GET_SIZE(self->placeholders);
    PyObject *res = NULL;
    cn_tensor **phs = NULL, **outs = NULL;
    if (n != nph) {
        PyErr_Format(PyExc_TypeError, "run: the program takes %zd inputs, %zd given", nph, n);
        goto done;
    }
    phs = PyMem_Calloc((size_t)n + 1, sizeof *phs);
    outs = PyMem_Calloc((size_t)self->noutputs + 1, sizeof *outs);
    if (!phs || !outs) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) phs[i] = TT(PyTuple_GET_ITEM(self->placeholders, i));
    int rc;
    cnpy_nogil_begin();
    cn_scope_begin();
    rc = cn_run(self->p, phs, vs, (int)n, outs, self->noutputs);
    for (int i = 0; rc == 0 && i < self->noutputs; i++) cn_keep(outs[i]);
    cn_scope_end();
    cnpy_nogil_end();
    if (rc < 0) {
        cnpy_raise(rc);
        goto done;
    }
    res = PyTuple_New(self->noutputs);
    for (int i = 0; i < self->noutputs; i++) {
        PyObject *t = res ? cnpy_wrap(outs[i]) : NULL;
        if (!t) {
            for (int j = i + (res ? 1 : 0); j < self->noutputs; j++) cn_release(outs[j]);
            Py_CLEAR(res);
            break;
        }
        PyTuple_SET_ITEM(res, i, t);
    }
done:
    PyMem_Free(phs);
    PyMem_Free(outs);
    PyMem_Free(vs);
    Py_DECREF(keep);
    return res;
}

static PyObject *program_stats(ProgramObject *self, PyObject *u) {
    cn_program_stats s;
    cnpy_wait_idle();
    if (cn_program_stats_get(self->p, &s) < 0) return cnpy_raise(0);
    return Py_BuildValue("{s:i,s:i,s:i,s:n,s:n,s:n,s:i,s:i,s:i,s:i}", "steps", s.nsteps, "fused",
                         s.nfused, "levels", s.nlevels, "planned_bytes", (Py_ssize_t)s.planned_bytes,
                         "unplanned_bytes", (Py_ssize_t)s.unplanned_bytes, "output_bytes",
                         (Py_ssize_t)s.output_bytes, "inplace", s.ninplace, "compiles", s.ncompiles,
                         "transfers", s.ntransfers, "fallbacks", s.nfallbacks);
}

/* The program's text (dot=False) or Graphviz DOT (dot=True). */
static PyObject *program_dump(ProgramObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dot", NULL};
    int dot = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:dump", kwlist, &dot)) return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return PyErr_NoMemory();
    cnpy_wait_idle();
    int rc = dot ? cn_program_write_dot(self->p, f) : cn_program_dump(self->p, f);
    fclose(f);
    PyObject *res = rc < 0 ? cnpy_raise(rc) : PyUnicode_DecodeUTF8(buf, (Py_ssize_t)len, "replace");
    free(buf);
    return res;
}

static PyObject *program_num_steps(ProgramObject *self, void *u) {
    cnpy_wait_idle();
    return PyLong_FromLong(cn_program_num_steps(self->p));
}

static PyObject *program_placeholders(ProgramObject *self, void *u) {
    Py_INCREF(self->placeholders);
    return self->placeholders;
}

static PyMethodDef program_methods[] = {
    {"run", (PyCFunction)program_run, METH_O, "run(values): the outputs (a tuple) for these inputs"},
    {"stats", (PyCFunction)program_stats, METH_NOARGS, "what the last run's plan found (a dict)"},
    {"dump", FN(program_dump), KW, "dump(dot=False): the steps as text, or Graphviz DOT"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef program_getset[] = {
    {"num_steps", (getter)program_num_steps, NULL, "steps per run", NULL},
    {"placeholders", (getter)program_placeholders, NULL, "the inputs, in feed order", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Program_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chutney._C.Program",
    .tp_basicsize = sizeof(ProgramObject),
    .tp_dealloc = (destructor)program_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A compiled static graph (from _C.compile or _C.compile_train_step).",
    .tp_methods = program_methods,
    .tp_getset = program_getset,
};

/* ---- ONNX export ---- */

/* onnx_export(graph, outputs, path=None, output_names=None, params=None,
 * param_names=None, graph_name=None): the ONNX model of what outputs need;
 * written to path (atomically), or returned as bytes when path is None. */
static PyObject *f_onnx_export(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"graph",  "outputs",     "path",       "output_names",
                             "params", "param_names", "graph_name", NULL};
    PyObject *graph, *outs, *path_o = Py_None, *onames_o = Py_None, *params_o = Py_None,
                            *pnames_o = Py_None;
    const char *graph_name = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOOOz:onnx_export", kwlist, &graph, &outs,
                                     &path_o, &onames_o, &params_o, &pnames_o, &graph_name))
        return NULL;
    if (check_graph(graph, "onnx_export") < 0) return NULL;
    PyObject *keep_out = NULL, *keep_par = NULL, *keep_path = NULL, *onames = NULL, *pnames = NULL;
    PyObject *res = NULL;
    cn_tensor **ts = NULL, **ps = NULL;
    const char **on = NULL, **pn = NULL;
    Py_ssize_t n, np = 0;
    if (!(ts = tensor_array(outs, "onnx_export outputs", &n, &keep_out))) goto done;
    if (params_o != Py_None && !(ps = tensor_array(params_o, "onnx_export params", &np, &keep_par)))
        goto done;
    if (onames_o != Py_None) {
        if (!(onames = PySequence_List(onames_o))) goto done;
        if (PyList_GET_SIZE(onames) != n) {
            PyErr_Format(PyExc_ValueError, "onnx_export: %zd output names for %zd outputs",
                         PyList_GET_SIZE(onames), n);
            goto done;
        }
        if (!(on = PyMem_Calloc((size_t)n + 1, sizeof *on))) goto nomem;
        for (Py_ssize_t i = 0; i < n; i++)
            if (!(on[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(onames, i)))) goto done;
    }
    if (ps) {
        if (pnames_o == Py_None || !(pnames = PySequence_List(pnames_o))) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "onnx_export: params given without param_names");
            goto done;
        }
        if (PyList_GET_SIZE(pnames) != np) {
            PyErr_Format(PyExc_ValueError, "onnx_export: %zd param names for %zd params",
                         PyList_GET_SIZE(pnames), np);
            goto done;
        }
        if (!(pn = PyMem_Calloc((size_t)np + 1, sizeof *pn))) goto nomem;
        for (Py_ssize_t i = 0; i < np; i++)
            if (!(pn[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(pnames, i)))) goto done;
    }
    cn_onnx_export_opts o = {.output_names = on, .params = ps, .param_names = pn,
                             .nparams = (int)np, .graph_name = graph_name};
    cn_graph *g = ((GraphObject *)graph)->g;
    int rc;
    if (path_o == Py_None) {
        void *data = NULL;
        size_t size = 0;
        CNPY_INT_NOGIL(rc, cn_onnx_export_buffer(g, ts, (int)n, &data, &size, &o));
        if (rc < 0) {
            cnpy_raise(rc);
            goto done;
        }
        res = PyBytes_FromStringAndSize(data, (Py_ssize_t)size);
        free(data);
    } else {
        if (!PyUnicode_FSConverter(path_o, &keep_path)) goto done;
        const char *path = PyBytes_AS_STRING(keep_path);
        CNPY_INT_NOGIL(rc, cn_onnx_export(g, ts, (int)n, path, &o));
        if (rc < 0) {
            cnpy_raise(rc);
            goto done;
        }
        res = Py_None;
        Py_INCREF(res);
    }
    goto done;
nomem:
    PyErr_NoMemory();
done:
    PyMem_Free(ts);
    PyMem_Free(ps);
    PyMem_Free(on);
    PyMem_Free(pn);
    Py_XDECREF(keep_out);
    Py_XDECREF(keep_par);
    Py_XDECREF(keep_path);
    Py_XDECREF(onames);
    Py_XDECREF(pnames);
    return res;
}

static PyObject *f_is_symbolic(PyObject *m, PyObject *o) {
    if (!Tensor_Check(o)) Py_RETURN_FALSE;
    return PyBool_FromLong(cn_is_symbolic_tensor(TT(o)));
}

PyMethodDef cnpy_graph_functions[] = {
    {"compile", FN(f_compile), KW,
     "compile(graph, placeholders, outputs, opt_level=2): a Program computing outputs"},
    {"compile_train_step", FN(f_compile_train_step), KW,
     "compile_train_step(graph, placeholders, outputs, optimizer, opt_level=2): outputs[0] is the "
     "loss; a run also writes the gradients and makes the optimiser's update"},
    {"onnx_export", FN(f_onnx_export), KW,
     "onnx_export(graph, outputs, path=None, output_names=None, params=None, param_names=None, "
     "graph_name=None): the ONNX model of the graph (bytes when path is None)"},
    {"_is_symbolic", f_is_symbolic, METH_O, "is this a traced tensor of a static graph?"},
    {NULL, NULL, 0, NULL},
};

int cnpy_graph_init(PyObject *m) {
    if (PyType_Ready(&Graph_Type) < 0 || PyType_Ready(&Program_Type) < 0) return -1;
    if (cnpy_add_ref(m, "Graph", (PyObject *)&Graph_Type) < 0 ||
        cnpy_add_ref(m, "Program", (PyObject *)&Program_Type) < 0)
        return -1;
    return 0;
}
