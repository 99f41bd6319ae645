/* Neural networks: the library's layers as _C.CModule objects (each owns one
 * cn_module; chutney/nn/modules.py wraps them in torch-like nn.Module
 * classes and registers their parameters), nn.functional (convolutions,
 * pooling, dropout, losses, pad, one_hot) and nn.init. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define KW (METH_VARARGS | METH_KEYWORDS)
#define FN(f) (PyCFunction)(void (*)(void))(f)

typedef struct {
    PyObject_HEAD
    cn_module *m;
} CModuleObject;

static PyTypeObject CModule_Type;

static PyObject *cmodule_new(cn_module *m) {
    if (!m) return cnpy_raise(0);
    CModuleObject *o = PyObject_New(CModuleObject, &CModule_Type);
    if (!o) {
        cn_module_free(m);
        return NULL;
    }
    o->m = m;
    return (PyObject *)o;
}

static void cmodule_dealloc(PyObject *self) {
    cnpy_wait_idle();
    cn_module_free(((CModuleObject *)self)->m);
    PyObject_Free(self);
}

#define CM(o) (cnpy_wait_idle(), ((CModuleObject *)(o))->m)

static PyObject *cm_forward(PyObject *self, PyObject *x) {
    if (!Tensor_Check(x)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a Tensor, not %s", cn_module_type(CM(self)),
                     Py_TYPE(x)->tp_name);
        return NULL;
    }
    cn_module *m = CM(self);
    cn_tensor *t = TT(x);
    /* Long when the input or the layer is big (one Linear(512, 512) row). */
    bool long_run = cn_numel(t) >= CNPY_NOGIL_NUMEL / 8 || cn_module_num_params(m) >= (1 << 18);
    return cnpy_wrap(CNPY_CALL_IF(long_run, cn_module_forward(m, t)));
}

/* rnn_forward(x, h0=None, c0=None, lengths=None) -> (output, h_n, c_n or
 * None); lengths: a sequence of ints, one per sequence of the batch. */
static PyObject *cm_rnn_forward(PyObject *self, PyObject *args) {
    PyObject *x, *h0 = Py_None, *c0 = Py_None, *plens = Py_None;
    if (!PyArg_ParseTuple(args, "O!|OOO:rnn_forward", &Tensor_Type, &x, &h0, &c0, &plens))
        return NULL;
    if ((h0 != Py_None && !Tensor_Check(h0)) || (c0 != Py_None && !Tensor_Check(c0))) {
        PyErr_SetString(PyExc_TypeError, "rnn: h0 and c0 must be Tensors or None");
        return NULL;
    }
    int64_t *lens = NULL, nlens = 0;
    if (plens != Py_None) {
        PyObject *seq = PySequence_Fast(plens, "rnn: lengths must be a sequence of ints");
        if (!seq) return NULL;
        nlens = PySequence_Fast_GET_SIZE(seq);
        Py_ssize_t n = nlens;
        lens = PyMem_Malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        for (Py_ssize_t i = 0; lens && i < n; i++) {
            lens[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
            if (lens[i] == -1 && PyErr_Occurred()) break;
        }
        Py_DECREF(seq);
        if (!lens) return PyErr_NoMemory();
        if (PyErr_Occurred()) {
            PyMem_Free(lens);
            return NULL;
        }
    }
    bool lstm = strcmp(cn_module_type(CM(self)), "LSTM") == 0;
    cn_tensor *out = NULL, *h = NULL, *c = NULL;
    cn_tensor *xt = TT(x), *h0t = h0 == Py_None ? NULL : TT(h0), *c0t = c0 == Py_None ? NULL : TT(c0);
    cn_module *mod = CM(self);
    bool long_run = cn_numel(xt) * 64 >= CNPY_NOGIL_NUMEL;
    int rc;
    if (long_run) cnpy_nogil_begin();
    else cnpy_wait_idle();
    cn_scope_begin();
    rc = cn_rnn_forward_lengths(mod, xt, lens, nlens, h0t, c0t, &out, &h, lstm ? &c : NULL);
    if (rc >= 0) {
        cn_keep(out);
        cn_keep(h);
        cn_keep(c);
    }
    cn_scope_end();
    if (long_run) cnpy_nogil_end();
    PyMem_Free(lens);
    if (rc < 0) return cnpy_raise(rc);
    PyObject *po = cnpy_wrap(out);
    PyObject *ph = cnpy_wrap(h);
    PyObject *pc = c ? cnpy_wrap(c) : (Py_INCREF(Py_None), Py_None);
    if (!po || !ph || !pc) {
        Py_XDECREF(po);
        Py_XDECREF(ph);
        Py_XDECREF(pc);
        return NULL;
    }
    return Py_BuildValue("(NNN)", po, ph, pc);
}

static PyObject *cm_train(PyObject *self, PyObject *arg) {
    int b = PyObject_IsTrue(arg);
    if (b < 0) return NULL;
    cn_module_train(CM(self), b);
    Py_RETURN_NONE;
}

/* The tree's state as [(dotted name, tensor, is_parameter)], parameters wrapped
 * as instances of param_cls (nn.Parameter), buffers as Tensors. */
static PyObject *cm_state(PyObject *self, PyObject *param_cls) {
    if (!PyType_Check(param_cls) || !PyType_IsSubtype((PyTypeObject *)param_cls, &Tensor_Type)) {
        PyErr_SetString(PyExc_TypeError, "state: expected a Tensor subclass");
        return NULL;
    }
    cn_module *m = CM(self);
    cn_tensor **ts = NULL, **ps = NULL;
    const char **names = NULL;
    int n = cn_module_state(m, &ts, &names);
    if (n < 0) return cnpy_raise(n);
    int np = cn_module_parameters(m, &ps, NULL);
    if (np < 0) {
        free(ts);
        free(names);
        return cnpy_raise(np);
    }
    PyObject *lst = PyList_New(0);
    for (int i = 0; lst && i < n; i++) {
        bool is_param = false;
        for (int j = 0; j < np; j++) is_param |= ps[j] == ts[i];
        PyObject *t = cnpy_wrap_type(is_param ? (PyTypeObject *)param_cls : &Tensor_Type,
                                     cn_retain(ts[i]));
        PyObject *item = t ? Py_BuildValue("(sNO)", names[i], t, is_param ? Py_True : Py_False) : NULL;
        if (!item || PyList_Append(lst, item) < 0) Py_CLEAR(lst);
        Py_XDECREF(item);
    }
    free(ts);
    free(names);
    free(ps);
    return lst;
}

/* set_tensor(name, tensor): cn_module_set_tensor (tying weights). */
static PyObject *cm_set_tensor(PyObject *self, PyObject *args) {
    const char *name;
    PyObject *t;
    if (!PyArg_ParseTuple(args, "sO!:set_tensor", &name, &Tensor_Type, &t)) return NULL;
    int rc;
    CNPY_INT(rc, cn_module_set_tensor(CM(self), name, TT(t)));
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *cm_to(PyObject *self, PyObject *arg) {
    cn_device d = CN_CPU;
    if (!cnpy_device_conv(arg, &d)) return NULL;
    int rc;
    CNPY_INT(rc, cn_module_to(CM(self), d));
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *cm_num_params(PyObject *self, PyObject *u) {
    return PyLong_FromLongLong(cn_module_num_params(CM(self)));
}

/* int8 inference: how many layers of the tree were quantised. */
static PyObject *cm_quantize_int8(PyObject *self, PyObject *u) {
    int rc;
    CNPY_INT(rc, cn_module_quantize_int8(CM(self)));
    if (rc < 0) return cnpy_raise(rc);
    return PyLong_FromLong(rc);
}

static PyObject *cm_type(PyObject *self, void *c) { return PyUnicode_FromString(cn_module_type(CM(self))); }
static PyObject *cm_training(PyObject *self, void *c) { return PyBool_FromLong(CM(self)->training); }

static PyMethodDef cmodule_methods[] = {
    {"forward", cm_forward, METH_O, NULL},
    {"rnn_forward", cm_rnn_forward, METH_VARARGS, NULL},
    {"train", cm_train, METH_O, NULL},
    {"state", cm_state, METH_O, NULL},
    {"to", cm_to, METH_O, NULL},
    {"num_params", cm_num_params, METH_NOARGS, NULL},
    {"set_tensor", cm_set_tensor, METH_VARARGS, "cn_module_set_tensor: replace a parameter or buffer"},
    {"quantize_int8", cm_quantize_int8, METH_NOARGS, "cn_module_quantize_int8: the count quantised"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef cmodule_getset[] = {
    {"type", cm_type, NULL, NULL, NULL},
    {"training", cm_training, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CModule_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "chutney._C.CModule",
    .tp_basicsize = sizeof(CModuleObject),
    .tp_dealloc = cmodule_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "one of the library's layers (cn_module)",
    .tp_methods = cmodule_methods,
    .tp_getset = cmodule_getset,
};

/* ---- option helpers ---- */

static int conv_opts(PyObject *stride, PyObject *padding, PyObject *dilation, long long groups,
                     PyObject *output_padding, cn_conv_opts *o) {
    memset(o, 0, sizeof *o);
    o->stride[0] = o->stride[1] = o->dilation[0] = o->dilation[1] = 1;
    if (stride && !cnpy_pair(stride, o->stride, "stride")) return -1;
    if (padding) {
        if (PyUnicode_Check(padding)) {
            if (PyUnicode_CompareWithASCIIString(padding, "valid") != 0) {
                PyErr_SetString(PyExc_NotImplementedError, "padding='same' is not supported; give the "
                                                           "padding as numbers");
                return -1;
            }
        } else if (!cnpy_pair(padding, o->padding, "padding")) {
            return -1;
        }
    }
    if (dilation && !cnpy_pair(dilation, o->dilation, "dilation")) return -1;
    if (output_padding && !cnpy_pair(output_padding, o->output_padding, "output_padding")) return -1;
    o->groups = groups;
    for (int i = 0; i < 2; i++)
        if (o->stride[i] <= 0 || o->dilation[i] <= 0 || o->padding[i] < 0 || o->groups <= 0) {
            PyErr_SetString(PyExc_ValueError, "conv: stride, dilation and groups must be positive, "
                                              "padding non-negative");
            return -1;
        }
    return 0;
}

static int pool_opts(PyObject *kernel, PyObject *stride, PyObject *padding, PyObject *dilation,
                     int ceil_mode, cn_pool_opts *o) {
    memset(o, 0, sizeof *o);
    o->dilation[0] = o->dilation[1] = 1;
    if (!cnpy_pair(kernel, o->kernel, "kernel_size")) return -1;
    if (stride && stride != Py_None && !cnpy_pair(stride, o->stride, "stride")) return -1;
    if (padding && !cnpy_pair(padding, o->padding, "padding")) return -1;
    if (dilation && !cnpy_pair(dilation, o->dilation, "dilation")) return -1;
    o->ceil_mode = ceil_mode;
    for (int i = 0; i < 2; i++)
        if (o->kernel[i] <= 0 || (stride && stride != Py_None && o->stride[i] <= 0) ||
            o->padding[i] < 0 || o->dilation[i] <= 0) {
            PyErr_SetString(PyExc_ValueError, "pool: kernel, stride and dilation must be positive, "
                                              "padding non-negative");
            return -1;
        }
    return 0;
}

static int reduction_of(const char *s, cn_reduction *r) {
    if (strcmp(s, "mean") == 0) *r = CN_REDUCTION_MEAN;
    else if (strcmp(s, "sum") == 0) *r = CN_REDUCTION_SUM;
    else if (strcmp(s, "none") == 0) *r = CN_REDUCTION_NONE;
    else {
        PyErr_Format(PyExc_ValueError, "reduction is 'mean', 'sum' or 'none', not '%s'", s);
        return -1;
    }
    return 0;
}

static cn_tensor *opt_tensor(PyObject *o) { return o && o != Py_None ? TT(o) : NULL; }

static int check_opt_tensor(PyObject *o, const char *what) {
    if (o && o != Py_None && !Tensor_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a Tensor or None", what);
        return -1;
    }
    return 0;
}

/* ---- layer constructors ---- */

static PyObject *f_nn_linear(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"in_features", "out_features", "bias", NULL};
    long long in, out;
    int bias = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "LL|p:Linear", kwlist, &in, &out, &bias)) return NULL;
    return cmodule_new(cn_nn_linear(in, out, bias));
}

static PyObject *conv_module(PyObject *args, PyObject *kw, int kind) {
    static char *kwlist[] = {"in_channels", "out_channels", "kernel_size", "stride", "padding",
                             "dilation", "groups", "bias", "output_padding", NULL};
    long long in, out, groups = 1;
    PyObject *kernel, *stride = NULL, *padding = NULL, *dilation = NULL, *outpad = NULL;
    int bias = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "LLO|OOOLpO:Conv", kwlist, &in, &out, &kernel, &stride,
                                     &padding, &dilation, &groups, &bias, &outpad))
        return NULL;
    cn_conv_opts o;
    if (conv_opts(stride, padding, dilation, groups, outpad, &o) < 0) return NULL;
    int64_t k[2];
    if (!cnpy_pair(kernel, k, "kernel_size")) return NULL;
    switch (kind) {
    case 1: return cmodule_new(cn_nn_conv1d(in, out, k[0], &o, bias));
    case 2: return cmodule_new(cn_nn_conv2d(in, out, k[0], k[1], &o, bias));
    default: return cmodule_new(cn_nn_conv_transpose2d(in, out, k[0], k[1], &o, bias));
    }
}
static PyObject *f_nn_conv1d(PyObject *m, PyObject *a, PyObject *k) { return conv_module(a, k, 1); }
static PyObject *f_nn_conv2d(PyObject *m, PyObject *a, PyObject *k) { return conv_module(a, k, 2); }
static PyObject *f_nn_conv_transpose2d(PyObject *m, PyObject *a, PyObject *k) { return conv_module(a, k, 3); }

static int avg_extra(int include_pad, PyObject *divisor, cn_pool_opts *o) {
    o->exclude_pad = !include_pad;
    if (divisor && divisor != Py_None) {
        int64_t d;
        if (!cnpy_as_int64(divisor, &d)) return -1;
        if (d <= 0) {
            PyErr_SetString(PyExc_ValueError, "divisor_override must be positive");
            return -1;
        }
        o->divisor_override = d;
    }
    return 0;
}

static PyObject *f_nn_embedding(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"num_embeddings", "embedding_dim", "padding_idx", NULL};
    long long num, dim;
    PyObject *pad = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "LL|O:Embedding", kwlist, &num, &dim, &pad)) return NULL;
    int64_t p = CN_NO_PADDING;
    if (pad != Py_None && !cnpy_as_int64(pad, &p)) return NULL;
    return cmodule_new(cn_nn_embedding(num, dim, p));
}

static PyObject *f_nn_batch_norm(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dims", "num_features", "eps", "momentum", "affine",
                             "track_running_stats", NULL};
    int dims;
    long long nf;
    double eps = 1e-5;
    PyObject *mom = NULL;
    int affine = 1, track = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iL|dOpp:BatchNorm", kwlist, &dims, &nf, &eps, &mom,
                                     &affine, &track))
        return NULL;
    cn_batch_norm_opts o = {0};
    /* Zero fields mean the default in the C API: tiny values stand for 0. */
    o.eps = eps == 0 ? 1e-300 : eps;
    if (!mom) o.momentum = 0.1;
    else if (mom == Py_None) o.momentum = -1;
    else {
        o.momentum = PyFloat_AsDouble(mom);
        if (o.momentum == -1.0 && PyErr_Occurred()) return NULL;
        if (o.momentum == 0) o.momentum = 1e-300;
    }
    o.no_affine = !affine;
    o.no_running_stats = !track;
    return cmodule_new(dims == 1 ? cn_nn_batch_norm1d(nf, &o) : cn_nn_batch_norm2d(nf, &o));
}

static PyObject *f_nn_layer_norm(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"normalized_shape", "eps", "elementwise_affine", NULL};
    PyObject *shape;
    double eps = 1e-5;
    int affine = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|dp:LayerNorm", kwlist, &shape, &eps, &affine))
        return NULL;
    int nd;
    int64_t s[CN_MAX_DIMS];
    if (!cnpy_shape_from(shape, &nd, s)) return NULL;
    return cmodule_new(cn_nn_layer_norm(nd, s, eps, affine));
}

static PyObject *f_nn_rnn(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"kind", "input_size", "hidden_size", "num_layers", "nonlinearity", "bias",
                             "batch_first", "dropout", "bidirectional", NULL};
    const char *kind, *nl = "tanh";
    long long in, hid;
    int layers = 1, bias = 1, bf = 0, bidir = 0;
    double dropout = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sLL|isppdp:RNN", kwlist, &kind, &in, &hid, &layers, &nl,
                                     &bias, &bf, &dropout, &bidir))
        return NULL;
    cn_rnn_opts o = {0};
    o.num_layers = layers;
    o.no_bias = !bias;
    o.batch_first = bf;
    o.bidirectional = bidir;
    o.dropout = dropout;
    if (strcmp(nl, "relu") == 0) o.relu = true;
    else if (strcmp(nl, "tanh") != 0) {
        PyErr_Format(PyExc_ValueError, "unknown nonlinearity '%s'", nl);
        return NULL;
    }
    if (layers <= 0) {
        PyErr_SetString(PyExc_ValueError, "num_layers must be positive");
        return NULL;
    }
    if (strcmp(kind, "LSTM") == 0) return cmodule_new(cn_nn_lstm(in, hid, &o));
    if (strcmp(kind, "GRU") == 0) return cmodule_new(cn_nn_gru(in, hid, &o));
    return cmodule_new(cn_nn_rnn(in, hid, &o));
}

/* ---- functional ---- */

static PyObject *conv_fn(PyObject *args, PyObject *kw, int kind) {
    static char *kwlist[] = {"input", "weight", "bias", "stride", "padding", "dilation", "groups",
                             "output_padding", NULL};
    PyObject *x, *w, *b = Py_None, *stride = NULL, *padding = NULL, *dilation = NULL, *outpad = NULL;
    long long groups = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!|OOOOLO:conv", kwlist, &Tensor_Type, &x,
                                     &Tensor_Type, &w, &b, &stride, &padding, &dilation, &groups, &outpad))
        return NULL;
    if (check_opt_tensor(b, "bias") < 0) return NULL;
    cn_conv_opts o;
    if (conv_opts(stride, padding, dilation, groups, outpad, &o) < 0) return NULL;
    cn_tensor *bt = opt_tensor(b), *xt = TT(x), *wt = TT(w);
    bool long_run = cn_numel(xt) + cn_numel(wt) >= CNPY_NOGIL_NUMEL / 16;
    switch (kind) {
    case 1: return cnpy_wrap(CNPY_CALL_IF(long_run, cn_conv1d(xt, wt, bt, &o)));
    case 2: return cnpy_wrap(CNPY_CALL_IF(long_run, cn_conv2d(xt, wt, bt, &o)));
    default: return cnpy_wrap(CNPY_CALL_IF(long_run, cn_conv_transpose2d(xt, wt, bt, &o)));
    }
}
static PyObject *f_conv1d(PyObject *m, PyObject *a, PyObject *k) { return conv_fn(a, k, 1); }
static PyObject *f_conv2d(PyObject *m, PyObject *a, PyObject *k) { return conv_fn(a, k, 2); }
static PyObject *f_conv_transpose2d(PyObject *m, PyObject *a, PyObject *k) { return conv_fn(a, k, 3); }

static PyObject *f_max_pool2d(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"input", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
                             "return_indices", NULL};
    PyObject *x, *kernel, *stride = NULL, *padding = NULL, *dilation = NULL;
    int ceil_mode = 0, ret_idx = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O|OOOpp:max_pool2d", kwlist, &Tensor_Type, &x, &kernel,
                                     &stride, &padding, &dilation, &ceil_mode, &ret_idx))
        return NULL;
    cn_pool_opts o;
    if (pool_opts(kernel, stride, padding, dilation, ceil_mode, &o) < 0) return NULL;
    PyObject *v = cnpy_wrap(CNPY_CALL_IF_LONG(cn_numel(TT(x)), cn_max_pool2d(TT(x), &o)));
    if (!v || !ret_idx) return v;
    PyObject *i = cnpy_wrap(CNPY_CALL(cn_max_pool2d_indices(TT(x), &o)));
    if (!i) {
        Py_DECREF(v);
        return NULL;
    }
    return Py_BuildValue("(NN)", v, i);
}

static PyObject *f_avg_pool2d(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"input", "kernel_size", "stride", "padding", "ceil_mode",
                             "count_include_pad", "divisor_override", NULL};
    PyObject *x, *kernel, *stride = NULL, *padding = NULL, *divisor = NULL;
    int ceil_mode = 0, include_pad = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O|OOppO:avg_pool2d", kwlist, &Tensor_Type, &x, &kernel,
                                     &stride, &padding, &ceil_mode, &include_pad, &divisor))
        return NULL;
    cn_pool_opts o;
    if (pool_opts(kernel, stride, padding, NULL, ceil_mode, &o) < 0) return NULL;
    if (avg_extra(include_pad, divisor, &o) < 0) return NULL;
    return cnpy_wrap(CNPY_CALL_IF_LONG(cn_numel(TT(x)), cn_avg_pool2d(TT(x), &o)));
}

static PyObject *f_adaptive_avg_pool2d(PyObject *m, PyObject *args) {
    PyObject *x, *size;
    if (!PyArg_ParseTuple(args, "O!O:adaptive_avg_pool2d", &Tensor_Type, &x, &size)) return NULL;
    int64_t s[2];
    if (!cnpy_pair(size, s, "output_size")) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_adaptive_avg_pool2d(TT(x), s[0], s[1])));
}

static PyObject *f_dropout(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"input", "p", "training", NULL};
    PyObject *x;
    double p = 0.5;
    int training = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|dp:dropout", kwlist, &Tensor_Type, &x, &p, &training))
        return NULL;
    if (p < 0 || p > 1) {
        PyErr_Format(PyExc_ValueError, "dropout probability has to be between 0 and 1, but got %g", p);
        return NULL;
    }
    return cnpy_wrap(CNPY_CALL(cn_dropout(TT(x), p, training)));
}

/* scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
 * is_causal=False, scale=None): PyTorch 2's signature; scale None is 1/sqrt(E). */
static PyObject *f_sdpa(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"query", "key", "value", "attn_mask", "dropout_p", "is_causal",
                             "scale", NULL};
    PyObject *q, *k, *v, *mask = Py_None, *so = Py_None;
    double p = 0, scale = 0;
    int causal = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!O!|OdpO:scaled_dot_product_attention", kwlist,
                                     &Tensor_Type, &q, &Tensor_Type, &k, &Tensor_Type, &v, &mask,
                                     &p, &causal, &so))
        return NULL;
    if (check_opt_tensor(mask, "attn_mask") < 0) return NULL;
    if (so != Py_None && (scale = PyFloat_AsDouble(so)) == -1.0 && PyErr_Occurred()) return NULL;
    if (so != Py_None && !(scale > 0)) {
        PyErr_Format(PyExc_ValueError, "scaled_dot_product_attention: scale must be > 0 (None: "
                                       "1/sqrt(E)), got %g", scale);
        return NULL;
    }
    return cnpy_wrap(CNPY_CALL(cn_scaled_dot_product_attention(TT(q), TT(k), TT(v), opt_tensor(mask),
                                                               p, causal, scale)));
}

/* layer_norm(input, ndim, weight=None, bias=None, eps=1e-5): cn_layer_norm
 * over the last ndim axes (functional.layer_norm passes its
 * normalized_shape's length). */
static PyObject *f_layer_norm(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"input", "ndim", "weight", "bias", "eps", NULL};
    PyObject *x, *w = Py_None, *b = Py_None;
    int nd;
    double eps = 1e-5;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!i|OOd:layer_norm", kwlist, &Tensor_Type, &x, &nd,
                                     &w, &b, &eps))
        return NULL;
    if (check_opt_tensor(w, "weight") < 0 || check_opt_tensor(b, "bias") < 0) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_layer_norm(TT(x), nd, opt_tensor(w), opt_tensor(b), eps)));
}

static PyObject *class_loss(PyObject *args, PyObject *kw, bool ce) {
    static char *kwlist[] = {"input", "target", "weight", "ignore_index", "reduction", "label_smoothing",
                             NULL};
    PyObject *x, *y, *w = Py_None;
    long long ignore = -100;
    const char *red = "mean";
    double ls = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, ce ? "O!O!|OLsd:cross_entropy" : "O!O!|OLsd:nll_loss",
                                     kwlist, &Tensor_Type, &x, &Tensor_Type, &y, &w, &ignore, &red, &ls))
        return NULL;
    if (check_opt_tensor(w, "weight") < 0) return NULL;
    cn_class_loss_opts o = {0};
    if (reduction_of(red, &o.reduction) < 0) return NULL;
    o.label_smoothing = ls;
    o.weight = opt_tensor(w);
    o.use_ignore_index = true;
    o.ignore_index = ignore;
    if (!ce && ls != 0) {
        PyErr_SetString(PyExc_TypeError, "nll_loss has no label_smoothing");
        return NULL;
    }
    return cnpy_wrap(ce ? CNPY_CALL(cn_cross_entropy_ex(TT(x), TT(y), &o)) : CNPY_CALL(cn_nll_loss_ex(TT(x), TT(y), &o)));
}
static PyObject *f_cross_entropy(PyObject *m, PyObject *a, PyObject *k) { return class_loss(a, k, true); }
static PyObject *f_nll_loss(PyObject *m, PyObject *a, PyObject *k) { return class_loss(a, k, false); }

static PyObject *pair_loss(PyObject *args, PyObject *kw, int kind) {
    static char *kwlist[] = {"input", "target", "reduction", NULL};
    PyObject *x, *y;
    const char *red = "mean";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O|s:loss", kwlist, &Tensor_Type, &x, &y, &red))
        return NULL;
    cn_reduction r;
    if (reduction_of(red, &r) < 0) return NULL;
    cn_tensor *t = cnpy_as_tensor(y, TT(x));
    if (!t) return NULL;
    cn_tensor *res;
    switch (kind) {
    case 0: res = CNPY_CALL(cn_mse_loss(TT(x), t, r)); break;
    case 1: res = CNPY_CALL(cn_l1_loss(TT(x), t, r)); break;
    default: res = CNPY_CALL(cn_bce_loss(TT(x), t, r)); break;
    }
    cn_release(t);
    return cnpy_wrap(res);
}
static PyObject *f_mse_loss(PyObject *m, PyObject *a, PyObject *k) { return pair_loss(a, k, 0); }
static PyObject *f_l1_loss(PyObject *m, PyObject *a, PyObject *k) { return pair_loss(a, k, 1); }
static PyObject *f_bce_loss(PyObject *m, PyObject *a, PyObject *k) { return pair_loss(a, k, 2); }

static PyObject *f_bce_with_logits(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"input", "target", "reduction", "pos_weight", NULL};
    PyObject *x, *y, *pw = Py_None;
    const char *red = "mean";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!|sO:binary_cross_entropy_with_logits", kwlist,
                                     &Tensor_Type, &x, &Tensor_Type, &y, &red, &pw))
        return NULL;
    if (check_opt_tensor(pw, "pos_weight") < 0) return NULL;
    cn_reduction r;
    if (reduction_of(red, &r) < 0) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_bce_with_logits(TT(x), TT(y), opt_tensor(pw), r)));
}

/* pad(input, pad, mode='constant', value=0) */
static PyObject *f_pad(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"input", "pad", "mode", "value", NULL};
    PyObject *x, *pads;
    const char *mode = "constant";
    double value = 0;
    PyObject *vo = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O|sO:pad", kwlist, &Tensor_Type, &x, &pads, &mode, &vo))
        return NULL;
    if (vo != Py_None && (value = PyFloat_AsDouble(vo)) == -1.0 && PyErr_Occurred()) return NULL;
    int64_t p[2 * CN_MAX_DIMS];
    PyObject *fast = PySequence_Fast(pads, "pad: expected a sequence of ints");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > 2 * CN_MAX_DIMS || n % 2) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "pad: an even number of sizes (before, after per axis from the "
                                          "last)");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!cnpy_as_int64(PySequence_Fast_GET_ITEM(fast, i), &p[i])) {
            Py_DECREF(fast);
            return NULL;
        }
    Py_DECREF(fast);
    cn_pad_mode pm;
    if (strcmp(mode, "constant") == 0) pm = CN_PAD_CONSTANT;
    else if (strcmp(mode, "reflect") == 0) pm = CN_PAD_REFLECT;
    else if (strcmp(mode, "replicate") == 0) pm = CN_PAD_REPLICATE;
    else {
        PyErr_Format(PyExc_NotImplementedError, "pad: mode '%s' (constant, reflect, replicate are "
                                                "supported)", mode);
        return NULL;
    }
    return cnpy_wrap(CNPY_CALL(cn_pad(TT(x), p, (int)n, pm, value)));
}

static PyObject *f_one_hot(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"input", "num_classes", NULL};
    PyObject *x;
    long long n = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|L:one_hot", kwlist, &Tensor_Type, &x, &n)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_one_hot(TT(x), n)));
}

/* ---- nn.init ---- */

static int nl_of(const char *s, cn_nonlinearity *nl) {
    static const struct {
        const char *n;
        cn_nonlinearity v;
    } t[] = {{"linear", CN_NL_LINEAR}, {"conv1d", CN_NL_LINEAR}, {"conv2d", CN_NL_LINEAR},
             {"conv3d", CN_NL_LINEAR}, {"sigmoid", CN_NL_SIGMOID}, {"tanh", CN_NL_TANH},
             {"relu", CN_NL_RELU}, {"leaky_relu", CN_NL_LEAKY_RELU}, {"selu", CN_NL_SELU}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(s, t[i].n) == 0) {
            *nl = t[i].v;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "unsupported nonlinearity '%s'", s);
    return -1;
}

static PyObject *init_result(PyObject *t, int rc) {
    if (rc < 0) return cnpy_raise(rc);
    Py_INCREF(t);
    return t;
}

static PyObject *f_init_uniform(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"tensor", "a", "b", NULL};
    PyObject *t;
    double a = 0, b = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|dd:uniform_", kwlist, &Tensor_Type, &t, &a, &b))
        return NULL;
    return init_result(t, cn_init_uniform_(TT(t), a, b));
}
static PyObject *f_init_normal(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"tensor", "mean", "std", NULL};
    PyObject *t;
    double mean = 0, std = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|dd:normal_", kwlist, &Tensor_Type, &t, &mean, &std))
        return NULL;
    return init_result(t, cn_init_normal_(TT(t), mean, std));
}
static PyObject *f_init_constant(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"tensor", "val", NULL};
    PyObject *t;
    double v;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!d:constant_", kwlist, &Tensor_Type, &t, &v)) return NULL;
    return init_result(t, cn_init_constant_(TT(t), v));
}
static PyObject *f_init_xavier(PyObject *m, PyObject *args, PyObject *kw, bool normal) {
    static char *kwlist[] = {"tensor", "gain", NULL};
    PyObject *t;
    double gain = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|d:xavier", kwlist, &Tensor_Type, &t, &gain)) return NULL;
    return init_result(t, normal ? cn_init_xavier_normal_(TT(t), gain)
                                 : cn_init_xavier_uniform_(TT(t), gain));
}
static PyObject *f_init_xavier_uniform(PyObject *m, PyObject *a, PyObject *k) {
    return f_init_xavier(m, a, k, false);
}
static PyObject *f_init_xavier_normal(PyObject *m, PyObject *a, PyObject *k) {
    return f_init_xavier(m, a, k, true);
}
static PyObject *f_init_kaiming(PyObject *m, PyObject *args, PyObject *kw, bool normal) {
    static char *kwlist[] = {"tensor", "a", "mode", "nonlinearity", NULL};
    PyObject *t;
    double a = 0;
    const char *mode = "fan_in", *nl = "leaky_relu";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|dss:kaiming", kwlist, &Tensor_Type, &t, &a, &mode, &nl))
        return NULL;
    cn_fan_mode fm;
    if (strcmp(mode, "fan_in") == 0) fm = CN_FAN_IN;
    else if (strcmp(mode, "fan_out") == 0) fm = CN_FAN_OUT;
    else {
        PyErr_Format(PyExc_ValueError, "mode is 'fan_in' or 'fan_out', not '%s'", mode);
        return NULL;
    }
    cn_nonlinearity n;
    if (nl_of(nl, &n) < 0) return NULL;
    return init_result(t, normal ? cn_init_kaiming_normal_(TT(t), a, fm, n)
                                 : cn_init_kaiming_uniform_(TT(t), a, fm, n));
}
static PyObject *f_init_kaiming_uniform(PyObject *m, PyObject *a, PyObject *k) {
    return f_init_kaiming(m, a, k, false);
}
static PyObject *f_init_kaiming_normal(PyObject *m, PyObject *a, PyObject *k) {
    return f_init_kaiming(m, a, k, true);
}
static PyObject *f_calculate_gain(PyObject *m, PyObject *args) {
    const char *nl;
    double param = 0.01;
    if (!PyArg_ParseTuple(args, "s|d:calculate_gain", &nl, &param)) return NULL;
    cn_nonlinearity n;
    if (nl_of(nl, &n) < 0) return NULL;
    return PyFloat_FromDouble(cn_init_gain(n, param));
}

PyMethodDef cnpy_nn_functions[] = {
    {"_nn_linear", FN(f_nn_linear), KW, NULL},
    {"_nn_conv1d", FN(f_nn_conv1d), KW, NULL},
    {"_nn_conv2d", FN(f_nn_conv2d), KW, NULL},
    {"_nn_conv_transpose2d", FN(f_nn_conv_transpose2d), KW, NULL},
    {"_nn_embedding", FN(f_nn_embedding), KW, NULL},
    {"_nn_batch_norm", FN(f_nn_batch_norm), KW, NULL},
    {"_nn_layer_norm", FN(f_nn_layer_norm), KW, NULL},
    {"_nn_rnn", FN(f_nn_rnn), KW, NULL},
    {"conv1d", FN(f_conv1d), KW, NULL},
    {"conv2d", FN(f_conv2d), KW, NULL},
    {"conv_transpose2d", FN(f_conv_transpose2d), KW, NULL},
    {"max_pool2d", FN(f_max_pool2d), KW, NULL},
    {"avg_pool2d", FN(f_avg_pool2d), KW, NULL},
    {"adaptive_avg_pool2d", f_adaptive_avg_pool2d, METH_VARARGS, NULL},
    {"dropout", FN(f_dropout), KW, NULL},
    {"scaled_dot_product_attention", FN(f_sdpa), KW, NULL},
    {"layer_norm", FN(f_layer_norm), KW, NULL},
    {"cross_entropy", FN(f_cross_entropy), KW, NULL},
    {"nll_loss", FN(f_nll_loss), KW, NULL},
    {"mse_loss", FN(f_mse_loss), KW, NULL},
    {"l1_loss", FN(f_l1_loss), KW, NULL},
    {"binary_cross_entropy", FN(f_bce_loss), KW, NULL},
    {"binary_cross_entropy_with_logits", FN(f_bce_with_logits), KW, NULL},
    {"pad", FN(f_pad), KW, NULL},
    {"one_hot", FN(f_one_hot), KW, NULL},
    {"_init_uniform_", FN(f_init_uniform), KW, NULL},
    {"_init_normal_", FN(f_init_normal), KW, NULL},
    {"_init_constant_", FN(f_init_constant), KW, NULL},
    {"_init_xavier_uniform_", FN(f_init_xavier_uniform), KW, NULL},
    {"_init_xavier_normal_", FN(f_init_xavier_normal), KW, NULL},
    {"_init_kaiming_uniform_", FN(f_init_kaiming_uniform), KW, NULL},
    {"_init_kaiming_normal_", FN(f_init_kaiming_normal), KW, NULL},
    {"_calculate_gain", f_calculate_gain, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int cnpy_nn_init(PyObject *m) {
    if (PyType_Ready(&CModule_Type) < 0) return -1;
    return cnpy_add_ref(m, "CModule", (PyObject *)&CModule_Type);
}
