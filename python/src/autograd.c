/* Autograd: requires_grad, .grad, .is_leaf, .data, backward(), and the
 * functions under chutney.autograd (grad, forward-mode duals) and
 * nn.utils (gradient clipping). Recording is per thread, as in the library. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KW (METH_VARARGS | METH_KEYWORDS)
#define FN(f) (PyCFunction)(void (*)(void))(f)

static PyObject *get_requires_grad(PyObject *self, void *c) {
    return PyBool_FromLong(cn_requires_grad(TT(self)));
}

static int set_requires_grad(PyObject *self, PyObject *v, void *c) {
    if (!v) {
        PyErr_SetString(PyExc_TypeError, "requires_grad cannot be deleted");
        return -1;
    }
    int b = PyObject_IsTrue(v);
    if (b < 0) return -1;
    cn_tensor *t = TT(self);
    if (!cn_is_leaf(t)) {
        if (!b) {
            PyErr_SetString(PyExc_RuntimeError, "you can only change requires_grad flags of leaf "
                                                "variables; use .detach() for a tensor without history");
            return -1;
        }
        return 0; /* already requires grad */
    }
    int rc;
    CNPY_INT(rc, cn_set_requires_grad(t, b));
    return rc < 0 ? cnpy_raise_int(rc) : 0;
}

static PyObject *get_grad(PyObject *self, void *c) { return cnpy_wrap_borrowed(cn_get_grad(TT(self))); }

static int set_grad(PyObject *self, PyObject *v, void *c) {
    cn_tensor *g = NULL;
    if (v && v != Py_None) {
        if (!Tensor_Check(v)) {
            PyErr_SetString(PyExc_TypeError, "grad must be a Tensor or None");
            return -1;
        }
        g = TT(v);
    }
    int rc;
    CNPY_INT(rc, cn_set_grad(TT(self), g));
    return rc < 0 ? cnpy_raise_int(rc) : 0;
}

static PyObject *get_is_leaf(PyObject *self, void *c) { return PyBool_FromLong(cn_is_leaf(TT(self))); }

/* .data: the same memory without history (a detached alias). */
static PyObject *get_data(PyObject *self, void *c) { return cnpy_wrap(CNPY_CALL(cn_detach(TT(self)))); }

static int set_data(PyObject *self, PyObject *v, void *c) {
    /* Not a storage swap (the library has none): the values are copied in,
     * which is what `p.data = new` is mostly used for. */
    if (!v || !Tensor_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "data must be a Tensor");
        return -1;
    }
    cn_tensor *t = TT(self), *s = TT(v);
    if (cn_ndim(t) != cn_ndim(s) ||
        memcmp(cn_shape(t), cn_shape(s), (size_t)cn_ndim(t) * sizeof(int64_t)) != 0) {
        PyErr_SetString(PyExc_NotImplementedError, "assigning .data of another shape is not supported "
                                                   "(the values are copied in place)");
        return -1;
    }
    bool prev = cn_set_grad_enabled(false);
    int rc;
    CNPY_INT(rc, cn_copy_(t, s));
    cn_set_grad_enabled(prev);
    return rc < 0 ? cnpy_raise_int(rc) : 0;
}

/* grad_fn: None for leaves and tensors without history; otherwise a marker
 * (the library does not expose its graph nodes). */
static PyObject *get_grad_fn(PyObject *self, void *c) {
    cn_tensor *t = TT(self);
    if (cn_is_leaf(t) || !cn_requires_grad(t)) Py_RETURN_NONE;
    return PyUnicode_FromString("<op>");
}

PyGetSetDef cnpy_autograd_getset[] = {
    {"requires_grad", get_requires_grad, set_requires_grad, "is a gradient recorded for it?", NULL},
    {"grad", get_grad, set_grad, "the accumulated gradient of a leaf, or None", NULL},
    {"is_leaf", get_is_leaf, NULL, "made by the user (or detached), not by an op", NULL},
    {"data", get_data, set_data, "the same memory without history", NULL},
    {"grad_fn", get_grad_fn, NULL, "None for leaves; a marker for recorded results", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *m_requires_grad_(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"requires_grad", NULL};
    int b = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:requires_grad_", kwlist, &b)) return NULL;
    if (set_requires_grad(self, b ? Py_True : Py_False, NULL) < 0) return NULL;
    Py_INCREF(self);
    return self;
}

/* chutney._compile (borrowed; imported on first use, NULL with an exception
 * if it cannot be). */
static PyObject *cnpy_compile_module(void) {
    static PyObject *mod;
    if (!mod) mod = PyImport_ImportModule("chutney._compile");
    return mod;
}

/* backward(gradient=None, retain_graph=None, create_graph=False) */
static PyObject *m_backward(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"gradient", "retain_graph", "create_graph", "inputs", NULL};
    PyObject *grad = Py_None, *retain = Py_None, *inputs = Py_None;
    int create = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOpO:backward", kwlist, &grad, &retain, &create,
                                     &inputs))
        return NULL;
    if (inputs != Py_None) {
        PyErr_SetString(PyExc_NotImplementedError, "backward(inputs=...) is not supported; use "
                                                   "chutney.autograd.grad");
        return NULL;
    }
    cn_tensor *t = TT(self);
    if (cn_is_symbolic_tensor(t)) /* inside chutney.compile: the trace records it */
        return PyObject_CallMethod(cnpy_compile_module(), "_record_backward", "OOOO", self, grad,
                                   retain, create ? Py_True : Py_False);
    if (!cn_requires_grad(t)) {
        PyErr_SetString(PyExc_RuntimeError, "element 0 of tensors does not require grad and does not "
                                            "have a grad_fn");
        return NULL;
    }
    cn_tensor *seed = NULL;
    if (grad != Py_None) {
        seed = cnpy_as_tensor(grad, t);
        if (!seed) return NULL;
    }
    unsigned flags = 0;
    int r = retain == Py_None ? create : PyObject_IsTrue(retain);
    if (r < 0) {
        cn_release(seed);
        return NULL;
    }
    if (r) flags |= CN_GRAD_RETAIN_GRAPH;
    if (create) flags |= CN_GRAD_CREATE_GRAPH;
    int rc;
    CNPY_INT_NOGIL(rc, cn_backward_ex(t, seed, flags));
    cn_release(seed);
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *m_retain_grad(PyObject *self, PyObject *u) {
    if (cn_is_leaf(TT(self))) Py_RETURN_NONE;
    PyErr_SetString(PyExc_NotImplementedError,
                    "retain_grad() on a non-leaf is not supported: use chutney.autograd.grad(y, x)");
    return NULL;
}

PyMethodDef cnpy_autograd_methods[] = {
    {"requires_grad_", FN(m_requires_grad_), KW, NULL},
    {"backward", FN(m_backward), KW, "backward(gradient=None, retain_graph=None, create_graph=False)"},
    {"retain_grad", m_retain_grad, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

/* ---- functions ---- */

static PyObject *f_set_grad_enabled(PyObject *m, PyObject *arg) {
    int b = PyObject_IsTrue(arg);
    if (b < 0) return NULL;
    return PyBool_FromLong(cn_set_grad_enabled(b));
}

static PyObject *f_is_grad_enabled(PyObject *m, PyObject *u) { return PyBool_FromLong(cn_is_grad_enabled()); }

/* Autocast regions (chutney.autocast): thread state like the grad mode. */
static PyObject *f_autocast_begin(PyObject *m, PyObject *arg) {
    cn_dtype dt = CN_F32;
    if (!cnpy_dtype_conv(arg, &dt)) return NULL;
    int rc = cn_autocast_begin(dt);
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *f_autocast_end(PyObject *m, PyObject *u) {
    int rc = cn_autocast_end();
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *f_autocast_dtype(PyObject *m, PyObject *u) { return cnpy_dtype_obj(cn_autocast_dtype()); }

static PyObject *f_autocast_native(PyObject *m, PyObject *arg) {
    cn_dtype dt = CN_F32;
    if (!cnpy_dtype_conv(arg, &dt)) return NULL;
    return PyBool_FromLong(cn_autocast_native(dt));
}

static int as_tensor_array(PyObject *o, cn_tensor ***out, Py_ssize_t *n, bool allow_none,
                           const char *what) {
    PyObject *fast;
    if (Tensor_Check(o)) {
        fast = PyTuple_Pack(1, o);
    } else {
        fast = PySequence_Fast(o, what);
    }
    if (!fast) return -1;
    *n = PySequence_Fast_GET_SIZE(fast);
    *out = PyMem_Calloc((size_t)(*n ? *n : 1), sizeof **out);
    if (!*out) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    cnpy_wait_idle(); /* the sequence may have been a generator: Python code ran */
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(fast, i);
        if (x == Py_None && allow_none) continue;
        if (!Tensor_Check(x)) {
            PyErr_Format(PyExc_TypeError, "%s: expected Tensors, got %s", what, Py_TYPE(x)->tp_name);
            PyMem_Free(*out);
            Py_DECREF(fast);
            return -1;
        }
        (*out)[i] = cn_retain(TT(x));
    }
    Py_DECREF(fast);
    return 0;
}

static void release_array(cn_tensor **a, Py_ssize_t n) {
    if (!a) return;
    for (Py_ssize_t i = 0; i < n; i++) cn_release(a[i]);
    PyMem_Free(a);
}

/* _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused) */
static PyObject *f_grad(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"outputs", "inputs", "grad_outputs", "retain_graph", "create_graph",
                             "allow_unused", NULL};
    PyObject *outs, *ins, *gouts = Py_None, *retain = Py_None;
    int create = 0, unused = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOpp:grad", kwlist, &outs, &ins, &gouts, &retain,
                                     &create, &unused))
        return NULL;
    cn_tensor **o = NULL, **in = NULL, **seeds = NULL, **grads = NULL;
    Py_ssize_t no = 0, ni = 0, ns = 0;
    PyObject *res = NULL;
    if (as_tensor_array(outs, &o, &no, false, "grad: outputs") < 0) return NULL;
    if (as_tensor_array(ins, &in, &ni, false, "grad: inputs") < 0) goto done;
    if (gouts != Py_None) {
        if (as_tensor_array(gouts, &seeds, &ns, true, "grad: grad_outputs") < 0) goto done;
        if (ns != no) {
            PyErr_Format(PyExc_ValueError, "grad: %zd grad_outputs for %zd outputs", ns, no);
            goto done;
        }
        /* None seeds: ones for one-element outputs. */
        for (Py_ssize_t i = 0; i < ns; i++)
            if (!seeds[i]) {
                seeds[i] = CNPY_CALL(cn_ones_like(o[i]));
                if (!seeds[i]) {
                    cnpy_raise(0);
                    goto done;
                }
            }
    }
    if (no > INT32_MAX || ni > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "grad: too many tensors");
        goto done;
    }
    for (Py_ssize_t i = 0; i < ni; i++)
        if (!cn_requires_grad(in[i])) {
            PyErr_Format(PyExc_RuntimeError, "grad: input %zd does not require grad", i);
            goto done;
        }
    grads = PyMem_Calloc((size_t)(ni ? ni : 1), sizeof *grads);
    if (!grads) {
        PyErr_NoMemory();
        goto done;
    }
    unsigned flags = 0;
    int r = retain == Py_None ? create : PyObject_IsTrue(retain);
    if (r < 0) goto done;
    if (r) flags |= CN_GRAD_RETAIN_GRAPH;
    if (create) flags |= CN_GRAD_CREATE_GRAPH;
    if (unused) flags |= CN_GRAD_ALLOW_UNUSED;
    int rc;
    cnpy_nogil_begin();
    cn_scope_begin();
    rc = cn_grad(o, seeds, (int)no, in, (int)ni, grads, flags);
    for (Py_ssize_t i = 0; rc >= 0 && i < ni; i++) cn_keep(grads[i]);
    cn_scope_end();
    cnpy_nogil_end();
    if (rc < 0) {
        cnpy_raise(rc);
        goto done;
    }
    res = PyTuple_New(ni);
    if (!res) goto done;
    for (Py_ssize_t i = 0; i < ni; i++) {
        PyObject *g;
        if (grads[i]) {
            g = cnpy_wrap(grads[i]);
            grads[i] = NULL;
        } else {
            Py_INCREF(Py_None);
            g = Py_None;
        }
        if (!g) {
            Py_CLEAR(res);
            goto done;
        }
        PyTuple_SET_ITEM(res, i, g);
    }
done:
    release_array(o, no);
    release_array(in, ni);
    release_array(seeds, ns);
    release_array(grads, ni);
    return res;
}

/* Forward mode: the dual region and tangents (autograd.forward_ad). */
static PyObject *f_dual_begin(PyObject *m, PyObject *u) {
    cn_dual_begin();
    Py_RETURN_NONE;
}
static PyObject *f_dual_end(PyObject *m, PyObject *u) {
    cn_dual_end();
    Py_RETURN_NONE;
}
static PyObject *f_set_tangent(PyObject *m, PyObject *args) {
    PyObject *t, *tan;
    if (!PyArg_ParseTuple(args, "O!O!:set_tangent", &Tensor_Type, &t, &Tensor_Type, &tan)) return NULL;
    int rc;
    CNPY_INT(rc, cn_set_tangent(TT(t), TT(tan)));
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}
static PyObject *f_get_tangent(PyObject *m, PyObject *t) {
    if (!Tensor_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "get_tangent: expected a Tensor");
        return NULL;
    }
    return cnpy_wrap_borrowed(cn_get_tangent(TT(t)));
}

/* clip_grad_norm_(params, max_norm, norm_type=2) -> total norm */
static PyObject *f_clip_grad_norm(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"parameters", "max_norm", "norm_type", NULL};
    PyObject *params, *nt = NULL;
    double max_norm, norm_type = 2;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Od|O:clip_grad_norm_", kwlist, &params, &max_norm, &nt))
        return NULL;
    if (nt) {
        if (PyUnicode_Check(nt) && PyUnicode_CompareWithASCIIString(nt, "inf") == 0) norm_type = INFINITY;
        else if ((norm_type = PyFloat_AsDouble(nt)) == -1.0 && PyErr_Occurred()) return NULL;
    }
    PyObject *lst = PySequence_List(params);
    if (!lst) return NULL;
    cn_tensor **ps;
    Py_ssize_t n;
    int rc = as_tensor_array(lst, &ps, &n, false, "clip_grad_norm_");
    Py_DECREF(lst);
    if (rc < 0) return NULL;
    double total = 0;
    CNPY_INT(rc, cn_clip_grad_norm(ps, (int)n, max_norm, norm_type, &total));
    release_array(ps, n);
    if (rc < 0) return cnpy_raise(rc);
    return cnpy_wrap(CNPY_CALL(cn_scalar(CN_F32, total)));
}

static PyObject *f_clip_grad_value(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"parameters", "clip_value", NULL};
    PyObject *params;
    double clip;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Od:clip_grad_value_", kwlist, &params, &clip)) return NULL;
    PyObject *lst = PySequence_List(params);
    if (!lst) return NULL;
    cn_tensor **ps;
    Py_ssize_t n;
    int rc = as_tensor_array(lst, &ps, &n, false, "clip_grad_value_");
    Py_DECREF(lst);
    if (rc < 0) return NULL;
    CNPY_INT(rc, cn_clip_grad_value(ps, (int)n, clip));
    release_array(ps, n);
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}


/* ---- chutney.autograd.Function: custom ops with Python rules ----
 *
 * Function.apply (chutney/autograd/function.py) runs forward itself and
 * then, when a gradient is wanted, applies a custom op of the C library
 * whose inputs are the tensor arguments, forward's result and a holder of
 * the Python backward closure: its kernel copies the result, and its vjp
 * calls the closure. The op is recorded like any other, so the holder (and
 * with it the closure and ctx) lives exactly as long as the record. */

typedef struct py_holder {
    PyObject *bw; /* a strong reference */
} py_holder;

/* The holder's buffer is freed with the last tensor on it, possibly
 * without the GIL (a backward pass) or at exit. */
static void holder_free(void *data) {
    py_holder *h = data;
    if (h->bw && Py_IsInitialized()) {
        PyGILState_STATE st = PyGILState_Ensure();
        Py_DECREF(h->bw);
        PyGILState_Release(st);
    }
    free(h);
}

static int fn_infer(void *user, const cn_custom_meta *in, int nin, const cn_custom_attrs *a,
                    cn_custom_meta *out, char *err, size_t err_size) {
    *out = in[nin - 2]; /* forward's result */
    return 0;
}

static int fn_kernel(void *user, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                     cn_tensor *out, char *err, size_t err_size) {
    const cn_tensor *r = in[nin - 2];
    size_t n = (size_t)cn_numel(out) * cn_dtype_size(cn_tensor_dtype(out));
    memcpy(cn_data(out), cn_data(r), n);
    return 0;
}

/* The Python backward, called from the library's backward walk (which may
 * run without the GIL, inside the library's scopes). */
static int fn_vjp_multi(void *user, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                        cn_tensor *out, cn_tensor *gout, const bool *need, cn_tensor **grads,
                        char *err, size_t err_size) {
    const py_holder *h = cn_data(in[nin - 1]);
    int ntensors = nin - 2, rc = 0;
    PyGILState_STATE st = PyGILState_Ensure();
    /* The binding owns what public functions return only outside every
     * scope: leave the walk's while Python code runs. */
    void *saved = cn_scope_suspend();
    if (!saved) {
        PyGILState_Release(st);
        snprintf(err, err_size, "out of memory");
        return 1;
    }
    PyObject *g = cnpy_wrap_borrowed(gout);
    PyObject *res = g ? PyObject_CallOneArg(h->bw, g) : NULL;
    Py_XDECREF(g);
    cn_tensor *got[CN_CUSTOM_MAX_INPUTS] = {NULL};
    if (res && (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != ntensors)) {
        PyErr_Format(PyExc_RuntimeError, "backward gave %s, expected a tuple of %d gradients",
                     Py_TYPE(res)->tp_name, ntensors);
        Py_CLEAR(res);
    }
    for (int i = 0; res && i < ntensors; i++) {
        PyObject *gi = PyTuple_GET_ITEM(res, i);
        if (gi == Py_None || !need[i]) continue;
        if (!Tensor_Check(gi)) {
            PyErr_Format(PyExc_TypeError, "backward's gradient %d is %s, not a Tensor or None", i,
                         Py_TYPE(gi)->tp_name);
            Py_CLEAR(res);
            break;
        }
        got[i] = cn_retain(((TensorObject *)gi)->t);
    }
    if (!res) {
        /* The message goes through the library's error to the caller of
         * backward, where it is raised again. */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *msg = value ? PyObject_Str(value) : NULL;
        const char *m = msg ? PyUnicode_AsUTF8(msg) : NULL;
        snprintf(err, err_size, "backward raised %s: %s",
                 type ? ((PyTypeObject *)type)->tp_name : "an error", m ? m : "");
        PyErr_Clear();
        Py_XDECREF(msg);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        rc = 1;
    }
    Py_XDECREF(res);
    cn_scope_resume(saved);
    /* The walk wants results owned by its scope. */
    for (int i = 0; i < ntensors; i++) {
        if (rc == 0) grads[i] = cn_scope_add(got[i]);
        else cn_release(got[i]);
    }
    PyGILState_Release(st);
    return rc;
}

static PyObject *f_function_register(PyObject *m, PyObject *args) {
    const char *name;
    int ntensors;
    if (!PyArg_ParseTuple(args, "si", &name, &ntensors)) return NULL;
    if (ntensors < 1 || ntensors > CN_CUSTOM_MAX_INPUTS - 2) {
        PyErr_Format(PyExc_ValueError, "Function.apply takes 1 to %d tensor arguments, got %d",
                     CN_CUSTOM_MAX_INPUTS - 2, ntensors);
        return NULL;
    }
    cn_custom_op_def d = {
        .name = name,
        .ninputs = ntensors + 2,
        .infer = fn_infer,
        .cpu_kernel = fn_kernel,
        .vjp_multi = fn_vjp_multi,
        .doc = "a chutney.autograd.Function",
    };
    cnpy_wait_idle();
    int id = cn_register_op(&d);
    if (id < 0) return cnpy_raise(id);
    return PyLong_FromLong(id);
}

static PyObject *f_function_apply(PyObject *m, PyObject *args) {
    int op;
    PyObject *tensors, *result, *bw;
    if (!PyArg_ParseTuple(args, "iO!O!O", &op, &PyList_Type, &tensors, &Tensor_Type, &result, &bw))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(tensors);
    if (n < 1 || n > CN_CUSTOM_MAX_INPUTS - 2) {
        PyErr_SetString(PyExc_ValueError, "Function.apply: wrong number of tensor arguments");
        return NULL;
    }
    cn_tensor *in[CN_CUSTOM_MAX_INPUTS];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(tensors, i);
        if (!Tensor_Check(t)) {
            PyErr_SetString(PyExc_TypeError, "Function.apply: tensors must be Tensors");
            return NULL;
        }
        in[i] = TT(t);
    }
    py_holder *h = malloc(sizeof *h);
    if (!h) return PyErr_NoMemory();
    Py_INCREF(bw);
    h->bw = bw;
    int64_t hshape[1] = {(int64_t)sizeof *h};
    cn_tensor *holder = CNPY_CALL(cn_from_buffer(CN_U8, 1, hshape, h, holder_free));
    if (!holder) {
        Py_DECREF(bw);
        free(h);
        return cnpy_raise(0);
    }
    in[n] = TT(result);
    in[n + 1] = holder;
    cn_tensor *r = CNPY_CALL(cn_apply_op(op, in, (int)n + 2, NULL));
    cn_release(holder); /* the record keeps it while it is needed */
    return cnpy_wrap(r);
}

/* ---- Tensor.register_hook: the library's gradient hooks calling Python ---- */

static void pyhook_free(void *ctx) {
    PyObject *fn = ctx;
    if (Py_IsInitialized()) {
        PyGILState_STATE st = PyGILState_Ensure();
        Py_DECREF(fn);
        PyGILState_Release(st);
    }
}

/* Called from the backward walk, which may run without the GIL and inside
 * the library's scopes (as fn_vjp_multi is). */
static int pyhook_call(cn_tensor *grad, cn_tensor **replace, void *ctx) {
    PyGILState_STATE st = PyGILState_Ensure();
    void *saved = cn_scope_suspend();
    if (!saved) {
        PyGILState_Release(st);
        return cn_failc(CN_ENOMEM, "hook: out of memory");
    }
    PyObject *g = cnpy_wrap_borrowed(grad);
    PyObject *res = g ? PyObject_CallOneArg((PyObject *)ctx, g) : NULL;
    Py_XDECREF(g);
    cn_tensor *r = NULL;
    char msg[512] = "";
    if (!res) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *s = value ? PyObject_Str(value) : NULL;
        const char *m = s ? PyUnicode_AsUTF8(s) : NULL;
        snprintf(msg, sizeof msg, "a gradient hook raised %s: %s",
                 type ? ((PyTypeObject *)type)->tp_name : "an error", m ? m : "");
        PyErr_Clear();
        Py_XDECREF(s);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    } else if (res != Py_None && !Tensor_Check(res)) {
        snprintf(msg, sizeof msg, "a gradient hook returned %s, not a Tensor or None",
                 Py_TYPE(res)->tp_name);
    } else if (res != Py_None) {
        r = cn_retain(TT(res));
    }
    Py_XDECREF(res);
    cn_scope_resume(saved);
    PyGILState_Release(st);
    if (*msg) return cn_failc(CN_EINVAL, "%s", msg);
    if (r) *replace = cn_scope_add(r);
    return 0;
}

/* _add_grad_hook(tensor, fn) -> id */
static PyObject *f_add_grad_hook(PyObject *m, PyObject *args) {
    PyObject *t, *fn;
    if (!PyArg_ParseTuple(args, "O!O:_add_grad_hook", &Tensor_Type, &t, &fn)) return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "register_hook: the hook must be callable");
        return NULL;
    }
    if (!cn_requires_grad(TT(t))) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cannot register a hook on a tensor that doesn't require gradient");
        return NULL;
    }
    Py_INCREF(fn);
    cnpy_wait_idle();
    int id = cn_add_grad_hook(TT(t), pyhook_call, fn, pyhook_free);
    if (id < 0) {
        Py_DECREF(fn);
        return cnpy_raise(id);
    }
    return PyLong_FromLong(id);
}

/* _remove_grad_hook(tensor, id): False if it is gone already. */
static PyObject *f_remove_grad_hook(PyObject *m, PyObject *args) {
    PyObject *t;
    int id;
    if (!PyArg_ParseTuple(args, "O!i:_remove_grad_hook", &Tensor_Type, &t, &id)) return NULL;
    cnpy_wait_idle();
    int rc = cn_remove_grad_hook(TT(t), id);
    if (rc < 0) cn_clear_error();
    return PyBool_FromLong(rc >= 0);
}

PyMethodDef cnpy_autograd_functions[] = {
    {"_set_grad_enabled", f_set_grad_enabled, METH_O, "returns the previous setting"},
    {"is_grad_enabled", f_is_grad_enabled, METH_NOARGS, NULL},
    {"_autocast_begin", f_autocast_begin, METH_O, "(dtype): bfloat16, float16, or float32 (off)"},
    {"_autocast_end", f_autocast_end, METH_NOARGS, NULL},
    {"_autocast_dtype", f_autocast_dtype, METH_NOARGS, "the innermost region's, float32 outside"},
    {"_autocast_native", f_autocast_native, METH_O, "(dtype): products in that dtype on this CPU?"},
    {"_grad", FN(f_grad), KW, NULL},
    {"_dual_begin", f_dual_begin, METH_NOARGS, NULL},
    {"_dual_end", f_dual_end, METH_NOARGS, NULL},
    {"_set_tangent", f_set_tangent, METH_VARARGS, NULL},
    {"_get_tangent", f_get_tangent, METH_O, NULL},
    {"clip_grad_norm_", FN(f_clip_grad_norm), KW, NULL},
    {"clip_grad_value_", FN(f_clip_grad_value), KW, NULL},
    {"_function_register", f_function_register, METH_VARARGS, "(name, ntensors) -> op id"},
    {"_add_grad_hook", f_add_grad_hook, METH_VARARGS, "(tensor, fn) -> hook id"},
    {"_remove_grad_hook", f_remove_grad_hook, METH_VARARGS, "(tensor, id) -> removed"},
    {"_function_apply", f_function_apply, METH_VARARGS, "(op, tensors, result, backward) -> Tensor"},
    {NULL, NULL, 0, NULL},
};

int cnpy_autograd_init(PyObject *m) { return 0; }
