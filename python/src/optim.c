/* Optimisers and learning-rate schedules: _C.Optimizer owns one cn_optimizer
 * (one per parameter group; chutney/optim wraps them with torch's classes),
 * _C.LRScheduler one cn_lr_scheduler, _C.GradScaler one cn_grad_scaler
 * (chutney/amp wraps it as torch.amp.GradScaler). */
#include "common.h"

#include <stdlib.h>
#include <string.h>

#define KW (METH_VARARGS | METH_KEYWORDS)
#define FN(f) (PyCFunction)(void (*)(void))(f)

typedef struct {
    PyObject_HEAD
    cn_optimizer *opt;
    PyObject *params; /* the parameter Tensors (a list), kept alive with the optimiser */
} OptimizerObject;

static PyTypeObject Optimizer_Type;

typedef struct {
    PyObject_HEAD
    cn_lr_scheduler *s;
    PyObject *opt; /* the Optimizer: outlives the schedule */
} SchedulerObject;

static PyTypeObject Scheduler_Type;

/* Options that are 0 in the C API mean "the default"; an explicit 0 becomes
 * a value too small to matter. */
static double nz(double v) { return v == 0 ? 1e-300 : v; }

static int get_opt(PyObject *kw, const char *name, double *v) {
    if (!kw) return 0;
    PyObject *o = PyDict_GetItemString(kw, name);
    if (!o || o == Py_None) return 0;
    double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) return -1;
    *v = d;
    return 1;
}

static int get_flag(PyObject *kw, const char *name, bool *v) {
    if (!kw) return 0;
    PyObject *o = PyDict_GetItemString(kw, name);
    if (!o) return 0;
    int b = PyObject_IsTrue(o);
    if (b < 0) return -1;
    *v = b;
    return 1;
}

/* Optimizer(kind, params, **options) with torch's option names. */
static PyObject *optimizer_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    const char *kind;
    PyObject *params;
    if (!PyArg_ParseTuple(args, "sO:Optimizer", &kind, &params)) return NULL;
    static const char *const known[] = {"lr", "momentum", "dampening", "nesterov", "weight_decay",
                                        "maximize", "beta1", "beta2", "eps", "amsgrad", "alpha",
                                        "centered", "lr_decay", "initial_accumulator_value", NULL};
    if (kw) {
        PyObject *key, *val;
        Py_ssize_t pos = 0;
        while (PyDict_Next(kw, &pos, &key, &val)) {
            const char *k = PyUnicode_AsUTF8(key);
            if (!k) return NULL;
            bool ok = false;
            for (const char *const *n = known; *n; n++) ok |= strcmp(*n, k) == 0;
            if (!ok) {
                PyErr_Format(PyExc_TypeError, "%s: unexpected option '%s'", kind, k);
                return NULL;
            }
        }
    }
    PyObject *lst = PySequence_List(params);
    if (!lst) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(lst);
    if (n > INT32_MAX) {
        Py_DECREF(lst);
        PyErr_SetString(PyExc_ValueError, "too many parameters");
        return NULL;
    }
    cn_tensor **ps = PyMem_Calloc((size_t)(n ? n : 1), sizeof *ps);
    if (!ps) {
        Py_DECREF(lst);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(lst, i);
        if (!Tensor_Check(p)) {
            PyErr_Format(PyExc_TypeError, "optimizer: parameter %zd is a %s, not a Tensor", i,
                         Py_TYPE(p)->tp_name);
            PyMem_Free(ps);
            Py_DECREF(lst);
            return NULL;
        }
        ps[i] = TT(p);
    }
    double lr = -1;
    int has_lr = get_opt(kw, "lr", &lr);
    cn_optimizer *opt = NULL;
    int e = 0;
    if (has_lr < 0) goto fail;
    if (strcmp(kind, "SGD") == 0) {
        cn_sgd_opts o = {0};
        if (has_lr == 0) {
            PyErr_SetString(PyExc_TypeError, "SGD: lr is required");
            goto fail;
        }
        o.lr = nz(lr);
        e |= get_opt(kw, "momentum", &o.momentum) < 0;
        e |= get_opt(kw, "dampening", &o.dampening) < 0;
        e |= get_flag(kw, "nesterov", &o.nesterov) < 0;
        e |= get_opt(kw, "weight_decay", &o.weight_decay) < 0;
        e |= get_flag(kw, "maximize", &o.maximize) < 0;
        if (e) goto fail;
        cnpy_wait_idle(); /* reading the options may have run Python code */
        opt = cn_sgd(ps, (int)n, &o);
    } else if (strcmp(kind, "Adam") == 0 || strcmp(kind, "AdamW") == 0) {
        cn_adam_opts o = {0};
        bool adamw = kind[4] == 'W';
        o.lr = has_lr ? nz(lr) : 1e-3;
        o.beta1 = 0.9;
        o.beta2 = 0.999;
        o.eps = 1e-8;
        o.weight_decay = adamw ? 1e-2 : 0;
        e |= get_opt(kw, "beta1", &o.beta1) < 0;
        e |= get_opt(kw, "beta2", &o.beta2) < 0;
        e |= get_opt(kw, "eps", &o.eps) < 0;
        e |= get_opt(kw, "weight_decay", &o.weight_decay) < 0;
        e |= get_flag(kw, "amsgrad", &o.amsgrad) < 0;
        e |= get_flag(kw, "maximize", &o.maximize) < 0;
        if (e) goto fail;
        o.beta1 = nz(o.beta1);
        o.beta2 = nz(o.beta2);
        o.eps = nz(o.eps);
        /* AdamW without decay is Adam (the C API reads 0 as torch's 1e-2). */
        if (adamw && o.weight_decay == 0) adamw = false;
        cnpy_wait_idle(); /* reading the options may have run Python code */
        opt = adamw ? cn_adamw(ps, (int)n, &o) : cn_adam(ps, (int)n, &o);
    } else if (strcmp(kind, "RMSprop") == 0) {
        cn_rmsprop_opts o = {0};
        o.lr = has_lr ? nz(lr) : 1e-2;
        o.alpha = 0.99;
        o.eps = 1e-8;
        e |= get_opt(kw, "alpha", &o.alpha) < 0;
        e |= get_opt(kw, "eps", &o.eps) < 0;
        e |= get_opt(kw, "weight_decay", &o.weight_decay) < 0;
        e |= get_opt(kw, "momentum", &o.momentum) < 0;
        e |= get_flag(kw, "centered", &o.centered) < 0;
        e |= get_flag(kw, "maximize", &o.maximize) < 0;
        if (e) goto fail;
        o.alpha = nz(o.alpha);
        o.eps = nz(o.eps);
        cnpy_wait_idle(); /* reading the options may have run Python code */
        opt = cn_rmsprop(ps, (int)n, &o);
    } else if (strcmp(kind, "Adagrad") == 0) {
        cn_adagrad_opts o = {0};
        o.lr = has_lr ? nz(lr) : 1e-2;
        o.eps = 1e-10;
        e |= get_opt(kw, "lr_decay", &o.lr_decay) < 0;
        e |= get_opt(kw, "weight_decay", &o.weight_decay) < 0;
        e |= get_opt(kw, "initial_accumulator_value", &o.initial_accumulator_value) < 0;
        e |= get_opt(kw, "eps", &o.eps) < 0;
        e |= get_flag(kw, "maximize", &o.maximize) < 0;
        if (e) goto fail;
        o.eps = nz(o.eps);
        cnpy_wait_idle(); /* reading the options may have run Python code */
        opt = cn_adagrad(ps, (int)n, &o);
    } else {
        PyErr_Format(PyExc_ValueError, "unknown optimizer '%s' (SGD, Adam, AdamW, RMSprop, Adagrad)", kind);
        goto fail;
    }
    if (!opt) {
        cnpy_raise(0);
        goto fail;
    }
    if (has_lr && lr == 0 && cn_optimizer_set_lr(opt, 0) < 0) {
        cn_optimizer_free(opt);
        cnpy_raise(0);
        goto fail;
    }
    PyMem_Free(ps);
    OptimizerObject *o = (OptimizerObject *)tp->tp_alloc(tp, 0);
    if (!o) {
        cn_optimizer_free(opt);
        Py_DECREF(lst);
        return NULL;
    }
    o->opt = opt;
    o->params = lst;
    return (PyObject *)o;
fail:
    PyMem_Free(ps);
    Py_DECREF(lst);
    return NULL;
}

static void optimizer_dealloc(PyObject *self) {
    OptimizerObject *o = (OptimizerObject *)self;
    PyObject_GC_UnTrack(self);
    cnpy_wait_idle();
    cn_optimizer_free(o->opt);
    o->opt = NULL;
    Py_CLEAR(o->params);
    Py_TYPE(self)->tp_free(self);
}

static int optimizer_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((OptimizerObject *)self)->params);
    return 0;
}

static int optimizer_clear(PyObject *self) {
    Py_CLEAR(((OptimizerObject *)self)->params);
    return 0;
}

#define OPT(o) (cnpy_wait_idle(), ((OptimizerObject *)(o))->opt)

static PyObject *op_step(PyObject *self, PyObject *u) {
    int rc;
    CNPY_INT_NOGIL(rc, cn_optimizer_step(OPT(self)));
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *op_zero_grad(PyObject *self, PyObject *u) {
    int rc;
    CNPY_INT(rc, cn_optimizer_zero_grad(OPT(self)));
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *op_get_lr(PyObject *self, void *c) { return PyFloat_FromDouble(cn_optimizer_get_lr(OPT(self))); }

static int op_set_lr(PyObject *self, PyObject *v, void *c) {
    double lr = v ? PyFloat_AsDouble(v) : -1;
    if (lr == -1.0 && PyErr_Occurred()) return -1;
    int rc;
    CNPY_INT(rc, cn_optimizer_set_lr(OPT(self), lr));
    return rc < 0 ? cnpy_raise_int(rc) : 0;
}

static PyObject *op_is_flat(PyObject *self, void *c) { return PyBool_FromLong(cn_optimizer_is_flat(OPT(self))); }

static PyObject *op_params(PyObject *self, void *c) {
    PyObject *p = ((OptimizerObject *)self)->params;
    return PyList_GetSlice(p, 0, PyList_GET_SIZE(p));
}

/* state() -> [(name, tensor)], copies (a later step changes the live state). */
static PyObject *named_list(cn_tensor **ts, const char **names, int n) {
    PyObject *lst = PyList_New(0);
    for (int i = 0; lst && i < n; i++) {
        PyObject *t = cnpy_wrap(CNPY_CALL(cn_clone(ts[i])));
        PyObject *item = t ? Py_BuildValue("(sN)", names[i], t) : NULL;
        if (!item || PyList_Append(lst, item) < 0) Py_CLEAR(lst);
        Py_XDECREF(item);
    }
    return lst;
}

static PyObject *op_state(PyObject *self, PyObject *u) {
    cn_tensor **ts = NULL;
    const char **names = NULL;
    int n = cn_optimizer_state(OPT(self), &ts, &names);
    if (n < 0) return cnpy_raise(n);
    PyObject *r = named_list(ts, names, n);
    free(ts);
    free(names);
    return r;
}

/* load_state(list of (name, tensor)) */
static int unpack_state(PyObject *items, const char ***names, cn_tensor ***ts, Py_ssize_t *n,
                        PyObject **keep) {
    PyObject *lst = PySequence_List(items);
    if (!lst) return -1;
    *n = PyList_GET_SIZE(lst);
    *names = PyMem_Calloc((size_t)(*n ? *n : 1), sizeof **names);
    *ts = PyMem_Calloc((size_t)(*n ? *n : 1), sizeof **ts);
    if (!*names || !*ts) {
        PyMem_Free(*names);
        PyMem_Free(*ts);
        Py_DECREF(lst);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *it = PyList_GET_ITEM(lst, i);
        PyObject *name, *t;
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2 ||
            !PyUnicode_Check(name = PyTuple_GET_ITEM(it, 0)) ||
            !Tensor_Check(t = PyTuple_GET_ITEM(it, 1))) {
            PyErr_SetString(PyExc_TypeError, "load_state: expected (name, Tensor) pairs");
            goto fail;
        }
        (*names)[i] = PyUnicode_AsUTF8(name);
        if (!(*names)[i]) goto fail;
        (*ts)[i] = TT(t);
    }
    *keep = lst;
    return 0;
fail:
    PyMem_Free(*names);
    PyMem_Free(*ts);
    Py_DECREF(lst);
    return -1;
}

static PyObject *op_load_state(PyObject *self, PyObject *items) {
    const char **names;
    cn_tensor **ts;
    Py_ssize_t n;
    PyObject *keep;
    if (unpack_state(items, &names, &ts, &n, &keep) < 0) return NULL;
    int rc;
    CNPY_INT(rc, cn_optimizer_load_state(OPT(self), names, ts, (int)n));
    PyMem_Free(names);
    PyMem_Free(ts);
    Py_DECREF(keep);
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}

static PyMethodDef optimizer_methods[] = {
    {"step", op_step, METH_NOARGS, NULL},
    {"zero_grad", op_zero_grad, METH_NOARGS, "gradients to zero, keeping the flat buffer"},
    {"state", op_state, METH_NOARGS, "[(name, tensor)]: copies of the state"},
    {"load_state", op_load_state, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef optimizer_getset[] = {
    {"lr", op_get_lr, op_set_lr, NULL, NULL},
    {"is_flat", op_is_flat, NULL, "all parameters in one flat buffer?", NULL},
    {"params", op_params, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Optimizer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "chutney._C.Optimizer",
    .tp_basicsize = sizeof(OptimizerObject),
    .tp_dealloc = optimizer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Optimizer(kind, params, **options): one of the library's optimisers",
    .tp_traverse = optimizer_traverse,
    .tp_clear = optimizer_clear,
    .tp_methods = optimizer_methods,
    .tp_getset = optimizer_getset,
    .tp_new = optimizer_new,
};

/* ---- schedules ---- */

/* LRScheduler(kind, optimizer, *args): StepLR(step_size, gamma),
 * ExponentialLR(gamma), CosineAnnealingLR(t_max, eta_min),
 * LinearLR(start_factor, end_factor, total_iters). */
static PyObject *scheduler_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    const char *kind;
    PyObject *opt;
    double a = 0, b = 0, c = 0;
    if (!PyArg_ParseTuple(args, "sO!|ddd:LRScheduler", &kind, &Optimizer_Type, &opt, &a, &b, &c))
        return NULL;
    cn_optimizer *o = OPT(opt);
    cn_lr_scheduler *s;
    if (strcmp(kind, "StepLR") == 0) s = cn_step_lr(o, (int64_t)a, b);
    else if (strcmp(kind, "ExponentialLR") == 0) s = cn_exponential_lr(o, a);
    else if (strcmp(kind, "CosineAnnealingLR") == 0) s = cn_cosine_annealing_lr(o, (int64_t)a, b);
    else if (strcmp(kind, "LinearLR") == 0) s = cn_linear_lr(o, a, b, (int64_t)c);
    else {
        PyErr_Format(PyExc_ValueError, "unknown schedule '%s'", kind);
        return NULL;
    }
    if (!s) return cnpy_raise(0);
    SchedulerObject *r = (SchedulerObject *)tp->tp_alloc(tp, 0);
    if (!r) {
        cn_lr_scheduler_free(s);
        return NULL;
    }
    r->s = s;
    Py_INCREF(opt);
    r->opt = opt;
    return (PyObject *)r;
}

static void scheduler_dealloc(PyObject *self) {
    SchedulerObject *o = (SchedulerObject *)self;
    PyObject_GC_UnTrack(self);
    cnpy_wait_idle();
    cn_lr_scheduler_free(o->s); /* before its optimiser */
    o->s = NULL;
    Py_CLEAR(o->opt);
    Py_TYPE(self)->tp_free(self);
}

static int scheduler_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((SchedulerObject *)self)->opt);
    return 0;
}

#define SCH(o) (cnpy_wait_idle(), ((SchedulerObject *)(o))->s)

static PyObject *sc_step(PyObject *self, PyObject *u) {
    int rc;
    CNPY_INT(rc, cn_lr_scheduler_step(SCH(self)));
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}

static PyObject *sc_last_lr(PyObject *self, void *c) {
    return PyFloat_FromDouble(cn_lr_scheduler_get_last_lr(SCH(self)));
}

static PyObject *sc_last_epoch(PyObject *self, void *c) {
    return PyLong_FromLongLong(cn_lr_scheduler_last_epoch(SCH(self)));
}

static PyObject *sc_state(PyObject *self, PyObject *u) {
    cn_tensor **ts = NULL;
    const char **names = NULL;
    int n = cn_lr_scheduler_state(SCH(self), &ts, &names);
    if (n < 0) return cnpy_raise(n);
    PyObject *r = named_list(ts, names, n);
    free(ts);
    free(names);
    return r;
}

static PyObject *sc_load_state(PyObject *self, PyObject *items) {
    const char **names;
    cn_tensor **ts;
    Py_ssize_t n;
    PyObject *keep;
    if (unpack_state(items, &names, &ts, &n, &keep) < 0) return NULL;
    int rc;
    CNPY_INT(rc, cn_lr_scheduler_load_state(SCH(self), names, ts, (int)n));
    PyMem_Free(names);
    PyMem_Free(ts);
    Py_DECREF(keep);
    if (rc < 0) return cnpy_raise(rc);
    Py_RETURN_NONE;
}

static PyMethodDef scheduler_methods[] = {
    {"step", sc_step, METH_NOARGS, NULL},
    {"state", sc_state, METH_NOARGS, NULL},
    {"load_state", sc_load_state, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef scheduler_getset[] = {
    {"last_lr", sc_last_lr, NULL, NULL, NULL},
    {"last_epoch", sc_last_epoch, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Scheduler_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "chutney._C.LRScheduler",
    .tp_basicsize = sizeof(SchedulerObject),
    .tp_dealloc = scheduler_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "LRScheduler(kind, optimizer, *args): one of the library's schedules",
    .tp_traverse = scheduler_traverse,
    .tp_methods = scheduler_methods,
    .tp_getset = scheduler_getset,
    .tp_new = scheduler_new,
};

/* ---- dynamic loss scaling ---- */

typedef struct {
    PyObject_HEAD
    cn_grad_scaler *s;
    PyObject *opt; /* the Optimizer whose steps it hooks: outlives the scaler */
} ScalerObject;

static PyTypeObject Scaler_Type;

/* GradScaler(optimizer, init_scale, growth_factor, backoff_factor,
 * growth_interval): every option explicit (the C API's 0 means "default"). */
static PyObject *scaler_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    PyObject *opt;
    cn_grad_scaler_opts o = {0};
    if (!PyArg_ParseTuple(args, "O!dddi:GradScaler", &Optimizer_Type, &opt, &o.init_scale,
                          &o.growth_factor, &o.backoff_factor, &o.growth_interval))
        return NULL;
    if (o.init_scale == 0 || o.growth_factor == 0 || o.backoff_factor == 0 || o.growth_interval == 0) {
        PyErr_SetString(PyExc_ValueError, "GradScaler: init_scale, growth_factor, backoff_factor and "
                                          "growth_interval must not be 0");
        return NULL;
    }
    cn_grad_scaler *s = cn_grad_scaler_new(OPT(opt), &o);
    if (!s) return cnpy_raise(0);
    ScalerObject *r = (ScalerObject *)tp->tp_alloc(tp, 0);
    if (!r) {
        cn_grad_scaler_free(s);
        return NULL;
    }
    r->s = s;
    Py_INCREF(opt);
    r->opt = opt;
    return (PyObject *)r;
}

static void scaler_dealloc(PyObject *self) {
    ScalerObject *o = (ScalerObject *)self;
    PyObject_GC_UnTrack(self);
    cnpy_wait_idle();
    cn_grad_scaler_free(o->s); /* before its optimiser */
    o->s = NULL;
    Py_CLEAR(o->opt);
    Py_TYPE(self)->tp_free(self);
}

static int scaler_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((ScalerObject *)self)->opt);
    return 0;
}

#define SCALER(o) (cnpy_wait_idle(), ((ScalerObject *)(o))->s)

static PyObject *gs_scale(PyObject *self, PyObject *loss) {
    if (!Tensor_Check(loss)) {
        PyErr_Format(PyExc_TypeError, "GradScaler.scale: expected a Tensor, not %s", Py_TYPE(loss)->tp_name);
        return NULL;
    }
    return cnpy_wrap(CNPY_CALL(cn_grad_scaler_scale(SCALER(self), TT(loss))));
}

static PyObject *gs_get_scale(PyObject *self, void *c) { return PyFloat_FromDouble(cn_grad_scaler_get_scale(SCALER(self))); }

static PyObject *gs_skipped(PyObject *self, void *c) { return PyLong_FromLongLong(cn_grad_scaler_skipped(SCALER(self))); }

static PyObject *gs_last_skipped(PyObject *self, void *c) {
    return PyBool_FromLong(cn_grad_scaler_last_skipped(SCALER(self)));
}

static PyObject *gs_get_state(PyObject *self, PyObject *unused) {
    (void)unused;
    cn_grad_scaler_state st = cn_grad_scaler_get_state(SCALER(self));
    return Py_BuildValue("(dLL)", st.scale, (long long)st.growth_tracker, (long long)st.skipped);
}

static PyObject *gs_set_state(PyObject *self, PyObject *args) {
    double scale;
    long long tracker, skipped;
    if (!PyArg_ParseTuple(args, "dLL:set_state", &scale, &tracker, &skipped)) return NULL;
    cn_grad_scaler_state st = {scale, tracker, skipped};
    if (cn_grad_scaler_set_state(SCALER(self), &st) < 0) return cnpy_raise(0);
    Py_RETURN_NONE;
}

static PyMethodDef scaler_methods[] = {
    {"scale", gs_scale, METH_O, "loss * scale"},
    {"get_state", gs_get_state, METH_NOARGS, "(scale, growth_tracker, skipped)"},
    {"set_state", gs_set_state, METH_VARARGS, "set_state(scale, growth_tracker, skipped)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef scaler_getset[] = {
    {"scale_value", gs_get_scale, NULL, "the scale now", NULL},
    {"skipped", gs_skipped, NULL, "updates skipped so far", NULL},
    {"last_skipped", gs_last_skipped, NULL, "was the last step's update skipped?", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Scaler_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "chutney._C.GradScaler",
    .tp_basicsize = sizeof(ScalerObject),
    .tp_dealloc = scaler_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "GradScaler(optimizer, init_scale, growth_factor, backoff_factor, growth_interval): "
              "the library's loss scaler, hooked into the optimiser's steps",
    .tp_traverse = scaler_traverse,
    .tp_methods = scaler_methods,
    .tp_getset = scaler_getset,
    .tp_new = scaler_new,
};

PyMethodDef cnpy_optim_functions[] = {
    {NULL, NULL, 0, NULL},
};

int cnpy_optim_init(PyObject *m) {
    if (PyType_Ready(&Optimizer_Type) < 0 || PyType_Ready(&Scheduler_Type) < 0 ||
        PyType_Ready(&Scaler_Type) < 0)
        return -1;
    if (cnpy_add_ref(m, "Optimizer", (PyObject *)&Optimizer_Type) < 0 ||
        cnpy_add_ref(m, "GradScaler", (PyObject *)&Scaler_Type) < 0)
        return -1;
    return cnpy_add_ref(m, "LRScheduler", (PyObject *)&Scheduler_Type);
}

cn_optimizer *cnpy_optimizer_of(PyObject *o) {
    if (PyObject_TypeCheck(o, &Optimizer_Type)) return ((OptimizerObject *)o)->opt;
    PyErr_Format(PyExc_TypeError, "expected a _C.Optimizer, got %s", Py_TYPE(o)->tp_name);
    return NULL;
}
