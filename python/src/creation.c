/* Creation functions with PyTorch's signatures: tensor, zeros, ones, empty,
 * full, *_like, arange, linspace, eye, rand, randn, randint, randperm,
 * normal, manual_seed. Each takes dtype=, device= and requires_grad=. */
#include "common.h"

#include <math.h>
#include <string.h>

typedef struct {
    cn_dtype dt;
    bool has_dt;
    cn_device dev;
    bool has_dev;
    int requires_grad;
    PyObject *size; /* size= keyword, borrowed */
} cargs;

/* dtype=, device=, requires_grad= (and size= when allow_size) from kw. */
static int parse_kw(PyObject *kw, cargs *c, bool allow_size, const char *fn) {
    memset(c, 0, sizeof *c);
    c->dt = CN_F32;
    c->dev = cn_get_default_device();
    if (!kw) return 0;
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kw, &pos, &key, &val)) {
        const char *k = PyUnicode_AsUTF8(key);
        if (!k) return -1;
        if (strcmp(k, "dtype") == 0) {
            if (val != Py_None) {
                if (!cnpy_dtype_conv(val, &c->dt)) return -1;
                c->has_dt = true;
            }
        } else if (strcmp(k, "device") == 0) {
            if (val != Py_None) {
                if (!cnpy_device_conv(val, &c->dev)) return -1;
                c->has_dev = true;
            }
        } else if (strcmp(k, "requires_grad") == 0) {
            int r = PyObject_IsTrue(val);
            if (r < 0) return -1;
            c->requires_grad = r;
        } else if (allow_size && strcmp(k, "size") == 0) {
            c->size = val;
        } else if (strcmp(k, "layout") == 0 || strcmp(k, "pin_memory") == 0 ||
                   strcmp(k, "memory_format") == 0) {
            /* accepted and ignored: one layout, no pinned memory */
        } else {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'", fn, k);
            return -1;
        }
    }
    return 0;
}

/* Remove the common keywords so a function's own ones can be parsed. */
static PyObject *own_kw(PyObject *kw, const char *const *names) {
    if (!kw) return NULL;
    PyObject *r = PyDict_New();
    if (!r) return NULL;
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kw, &pos, &key, &val)) {
        const char *k = PyUnicode_AsUTF8(key);
        if (!k) {
            Py_DECREF(r);
            return NULL;
        }
        for (const char *const *n = names; *n; n++)
            if (strcmp(*n, k) == 0 && PyDict_SetItem(r, key, val) < 0) {
                Py_DECREF(r);
                return NULL;
            }
    }
    return r;
}

static PyObject *common_kw(PyObject *kw, const char *const *own) {
    if (!kw) return NULL;
    PyObject *r = PyDict_Copy(kw);
    if (!r) return NULL;
    for (const char *const *n = own; *n; n++)
        if (PyDict_GetItemString(r, *n) && PyDict_DelItemString(r, *n) < 0) {
            Py_DECREF(r);
            return NULL;
        }
    return r;
}

static int dev_begin(const cargs *c) {
    if (!c->has_dev) return 0;
    int rc = cn_device_scope_begin(c->dev);
    if (rc < 0) {
        cnpy_raise(rc);
        return -1;
    }
    return 1;
}

static void dev_end(int began) {
    if (began > 0) cn_device_scope_end();
}

static PyObject *finish(cn_tensor *t, const cargs *c) {
    if (!t) return cnpy_raise(0);
    if (c->has_dev && !cn_device_equal(cn_tensor_device(t), c->dev)) {
        cn_tensor *m = CNPY_CALL(cn_to(t, c->dev));
        cn_release(t);
        if (!m) return cnpy_raise(0);
        t = m;
    }
    if (c->requires_grad) {
        int rc;
        CNPY_INT(rc, cn_set_requires_grad(t, true));
        if (rc < 0) {
            cn_release(t);
            return cnpy_raise(rc);
        }
    }
    return cnpy_wrap(t);
}

/* ---- tensor(data) ---- */

static PyObject *f_tensor(PyObject *m, PyObject *args, PyObject *kw) {
    cargs c;
    if (PyTuple_GET_SIZE(args) != 1) {
        PyErr_SetString(PyExc_TypeError, "tensor(data, dtype=None, device=None, requires_grad=False)");
        return NULL;
    }
    if (parse_kw(kw, &c, false, "tensor") < 0) return NULL;
    cn_tensor *t = cnpy_tensor_from_data(PyTuple_GET_ITEM(args, 0), c.has_dt, c.dt);
    if (!t) return NULL;
    return finish(t, &c);
}

/* as_tensor(data, dtype=None, device=None): shares memory where it can (a
 * Tensor of that dtype and device, a NumPy array), else copies. */
static PyObject *f_as_tensor(PyObject *m, PyObject *args, PyObject *kw) {
    cargs c;
    if (PyTuple_GET_SIZE(args) != 1) {
        PyErr_SetString(PyExc_TypeError, "as_tensor(data, dtype=None, device=None)");
        return NULL;
    }
    if (parse_kw(kw, &c, false, "as_tensor") < 0) return NULL;
    PyObject *data = PyTuple_GET_ITEM(args, 0);
    cn_tensor *t = NULL;
    if (Tensor_Check(data)) {
        t = cn_retain(TT(data));
    } else if (PyObject_CheckBuffer(data) && !PyBytes_Check(data) && !PyByteArray_Check(data)) {
        PyObject *fn = PyObject_GetAttrString(m, "from_numpy");
        PyObject *r = fn ? PyObject_CallOneArg(fn, data) : NULL;
        Py_XDECREF(fn);
        if (!r) return NULL;
        t = cn_retain(TT(r));
        Py_DECREF(r);
    } else {
        t = cnpy_tensor_from_data(data, c.has_dt, c.dt);
        if (!t) return NULL;
    }
    if (c.has_dt && cn_tensor_dtype(t) != c.dt) {
        cn_tensor *x = CNPY_CALL(cn_cast(t, c.dt));
        cn_release(t);
        if (!x) return cnpy_raise(0);
        t = x;
    }
    c.requires_grad = 0;
    return finish(t, &c);
}

/* ---- from a shape ---- */

typedef enum { FILL_EMPTY, FILL_ZEROS, FILL_ONES, FILL_RAND, FILL_RANDN } fill_kind;

static PyObject *shaped(PyObject *args, PyObject *kw, fill_kind k, const char *fn) {
    cargs c;
    if (parse_kw(kw, &c, true, fn) < 0) return NULL;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    if (!cnpy_parse_shape(args, 0, c.size, &ndim, shape)) return NULL;
    int began = dev_begin(&c);
    if (began < 0) return NULL;
    cn_tensor *t = NULL;
    switch (k) {
    case FILL_EMPTY: t = CNPY_CALL(cn_empty(c.dt, ndim, shape)); break;
    case FILL_ZEROS: t = CNPY_CALL(cn_zeros(c.dt, ndim, shape)); break;
    case FILL_ONES: t = CNPY_CALL(cn_ones(c.dt, ndim, shape)); break;
    case FILL_RAND: t = CNPY_CALL(cn_rand(c.dt, ndim, shape)); break;
    case FILL_RANDN: t = CNPY_CALL(cn_randn(c.dt, ndim, shape)); break;
    }
    dev_end(began);
    return finish(t, &c);
}

static PyObject *f_empty(PyObject *m, PyObject *a, PyObject *k) { return shaped(a, k, FILL_EMPTY, "empty"); }
static PyObject *f_zeros(PyObject *m, PyObject *a, PyObject *k) { return shaped(a, k, FILL_ZEROS, "zeros"); }
static PyObject *f_ones(PyObject *m, PyObject *a, PyObject *k) { return shaped(a, k, FILL_ONES, "ones"); }
static PyObject *f_rand(PyObject *m, PyObject *a, PyObject *k) { return shaped(a, k, FILL_RAND, "rand"); }
static PyObject *f_randn(PyObject *m, PyObject *a, PyObject *k) { return shaped(a, k, FILL_RANDN, "randn"); }

/* full(size, fill_value): the dtype follows the value (bool, int64, float32). */
static PyObject *f_full(PyObject *m, PyObject *args, PyObject *kw) {
    static const char *const own[] = {"size", "fill_value", NULL};
    PyObject *ckw = common_kw(kw, own), *okw = own_kw(kw, own);
    if (kw && (!ckw || !okw)) {
        Py_XDECREF(ckw);
        Py_XDECREF(okw);
        return NULL;
    }
    static char *kwlist[] = {"size", "fill_value", NULL};
    PyObject *size, *value;
    cargs c;
    int ok = PyArg_ParseTupleAndKeywords(args, okw, "OO:full", kwlist, &size, &value) &&
             parse_kw(ckw, &c, false, "full") == 0;
    Py_XDECREF(ckw);
    Py_XDECREF(okw);
    if (!ok) return NULL;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    if (!cnpy_shape_from(size, &ndim, shape)) return NULL;
    double v;
    long long iv;
    int kind = cnpy_scalar_kind(value, &v, &iv);
    if (!kind) {
        if (Tensor_Check(value) && cn_numel(TT(value)) == 1) {
            PyObject *x = cnpy_item(TT(value));
            if (!x) return NULL;
            kind = cnpy_scalar_kind(x, &v, &iv);
            Py_DECREF(x);
        }
        if (!kind) {
            PyErr_SetString(PyExc_TypeError, "full: fill_value must be a number");
            return NULL;
        }
    }
    if (!c.has_dt) c.dt = kind == CNPY_FLOAT ? CN_F32 : kind == CNPY_INT ? CN_I64 : CN_BOOL;
    int began = dev_begin(&c);
    if (began < 0) return NULL;
    cn_tensor *t;
    if (c.dt == CN_I64 && kind == CNPY_INT) {
        /* Exact beyond 2^53. */
        t = CNPY_CALL(cn_empty(CN_I64, ndim, shape));
        if (t) {
            int64_t x = (int64_t)iv;
            cn_tensor *s = CNPY_CALL(cn_from_data(CN_I64, 0, NULL, &x));
            if (!s || cn_copy_(t, s) < 0) {
                cn_release(t);
                t = NULL;
            }
            cn_release(s);
        }
    } else {
        t = CNPY_CALL(cn_full(c.dt, ndim, shape, v));
    }
    dev_end(began);
    return finish(t, &c);
}

/* zeros_like(t, dtype=None, device=None, requires_grad=False), ... */
static PyObject *like(PyObject *args, PyObject *kw, int k, const char *fn) {
    static const char *const own[] = {"input", "fill_value", NULL};
    PyObject *ckw = common_kw(kw, own), *okw = own_kw(kw, own);
    if (kw && (!ckw || !okw)) {
        Py_XDECREF(ckw);
        Py_XDECREF(okw);
        return NULL;
    }
    static char *kwlist1[] = {"input", NULL};
    static char *kwlist2[] = {"input", "fill_value", NULL};
    PyObject *x, *value = NULL;
    cargs c;
    int ok = k == 5 ? PyArg_ParseTupleAndKeywords(args, okw, "O!O", kwlist2, &Tensor_Type, &x, &value)
                    : PyArg_ParseTupleAndKeywords(args, okw, "O!", kwlist1, &Tensor_Type, &x);
    ok = ok && parse_kw(ckw, &c, false, fn) == 0;
    Py_XDECREF(ckw);
    Py_XDECREF(okw);
    if (!ok) return NULL;
    cn_tensor *t = TT(x);
    if (!c.has_dt) c.dt = cn_tensor_dtype(t);
    if (!c.has_dev) {
        c.dev = cn_tensor_device(t);
        c.has_dev = true;
    }
    double v = 0;
    if (value) {
        v = PyFloat_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred()) return NULL;
    }
    int began = dev_begin(&c);
    if (began < 0) return NULL;
    int nd = cn_ndim(t);
    const int64_t *sh = cn_shape(t);
    cn_tensor *r = NULL;
    switch (k) {
    case 0: r = CNPY_CALL(cn_empty(c.dt, nd, sh)); break;
    case 1: r = CNPY_CALL(cn_zeros(c.dt, nd, sh)); break;
    case 2: r = CNPY_CALL(cn_ones(c.dt, nd, sh)); break;
    case 3: r = CNPY_CALL(cn_rand(c.dt, nd, sh)); break;
    case 4: r = CNPY_CALL(cn_randn(c.dt, nd, sh)); break;
    case 5: r = CNPY_CALL(cn_full(c.dt, nd, sh, v)); break;
    }
    dev_end(began);
    return finish(r, &c);
}

static PyObject *f_empty_like(PyObject *m, PyObject *a, PyObject *k) { return like(a, k, 0, "empty_like"); }
static PyObject *f_zeros_like(PyObject *m, PyObject *a, PyObject *k) { return like(a, k, 1, "zeros_like"); }
static PyObject *f_ones_like(PyObject *m, PyObject *a, PyObject *k) { return like(a, k, 2, "ones_like"); }
static PyObject *f_rand_like(PyObject *m, PyObject *a, PyObject *k) { return like(a, k, 3, "rand_like"); }
static PyObject *f_randn_like(PyObject *m, PyObject *a, PyObject *k) { return like(a, k, 4, "randn_like"); }
static PyObject *f_full_like(PyObject *m, PyObject *a, PyObject *k) { return like(a, k, 5, "full_like"); }

/* arange(end), arange(start, end, step=1): int64 unless a bound is a float. */
static PyObject *f_arange(PyObject *m, PyObject *args, PyObject *kw) {
    static const char *const own[] = {"start", "end", "step", NULL};
    PyObject *ckw = common_kw(kw, own), *okw = own_kw(kw, own);
    if (kw && (!ckw || !okw)) {
        Py_XDECREF(ckw);
        Py_XDECREF(okw);
        return NULL;
    }
    static char *kwlist[] = {"start", "end", "step", NULL};
    PyObject *a = NULL, *b = NULL, *s = NULL;
    cargs c;
    int ok = PyArg_ParseTupleAndKeywords(args, okw, "O|OO:arange", kwlist, &a, &b, &s) &&
             parse_kw(ckw, &c, false, "arange") == 0;
    Py_XDECREF(ckw);
    Py_XDECREF(okw);
    if (!ok) return NULL;
    PyObject *vals[3] = {b ? a : NULL, b ? b : a, s};
    double d[3] = {0, 0, 1};
    bool any_float = false;
    for (int i = 0; i < 3; i++) {
        if (!vals[i] || vals[i] == Py_None) continue;
        long long iv;
        int k = cnpy_scalar_kind(vals[i], &d[i], &iv);
        if (!k && Tensor_Check(vals[i]) && cn_numel(TT(vals[i])) == 1) {
            PyObject *x = cnpy_item(TT(vals[i]));
            if (!x) return NULL;
            k = cnpy_scalar_kind(x, &d[i], &iv);
            Py_DECREF(x);
        }
        if (!k) {
            PyErr_SetString(PyExc_TypeError, "arange: bounds and step must be numbers");
            return NULL;
        }
        if (k == CNPY_FLOAT) any_float = true;
    }
    if (d[2] == 0) {
        PyErr_SetString(PyExc_ValueError, "arange: step must be nonzero");
        return NULL;
    }
    if (!c.has_dt) c.dt = any_float ? CN_F32 : CN_I64;
    int began = dev_begin(&c);
    if (began < 0) return NULL;
    cn_tensor *t = CNPY_CALL(cn_arange(d[0], d[1], d[2], c.dt));
    dev_end(began);
    return finish(t, &c);
}

static PyObject *f_linspace(PyObject *m, PyObject *args, PyObject *kw) {
    static const char *const own[] = {"start", "end", "steps", NULL};
    PyObject *ckw = common_kw(kw, own), *okw = own_kw(kw, own);
    if (kw && (!ckw || !okw)) {
        Py_XDECREF(ckw);
        Py_XDECREF(okw);
        return NULL;
    }
    static char *kwlist[] = {"start", "end", "steps", NULL};
    double a, b;
    long long n;
    cargs c;
    int ok = PyArg_ParseTupleAndKeywords(args, okw, "ddL:linspace", kwlist, &a, &b, &n) &&
             parse_kw(ckw, &c, false, "linspace") == 0;
    Py_XDECREF(ckw);
    Py_XDECREF(okw);
    if (!ok) return NULL;
    int began = dev_begin(&c);
    if (began < 0) return NULL;
    cn_tensor *t = CNPY_CALL(cn_linspace(a, b, (int64_t)n, c.dt));
    dev_end(began);
    return finish(t, &c);
}

static PyObject *f_eye(PyObject *m, PyObject *args, PyObject *kw) {
    static const char *const own[] = {"n", "m", NULL};
    PyObject *ckw = common_kw(kw, own), *okw = own_kw(kw, own);
    if (kw && (!ckw || !okw)) {
        Py_XDECREF(ckw);
        Py_XDECREF(okw);
        return NULL;
    }
    static char *kwlist[] = {"n", "m", NULL};
    long long n, mm = -1;
    PyObject *mo = Py_None;
    cargs c;
    int ok = PyArg_ParseTupleAndKeywords(args, okw, "L|O:eye", kwlist, &n, &mo) &&
             parse_kw(ckw, &c, false, "eye") == 0;
    Py_XDECREF(ckw);
    Py_XDECREF(okw);
    if (!ok) return NULL;
    if (mo != Py_None) {
        int64_t x;
        if (!cnpy_as_int64(mo, &x)) return NULL;
        mm = x;
    } else {
        mm = n;
    }
    int began = dev_begin(&c);
    if (began < 0) return NULL;
    cn_tensor *t = CNPY_CALL(cn_eye((int64_t)n, (int64_t)mm, c.dt));
    dev_end(began);
    return finish(t, &c);
}

/* randint(high, size) or randint(low, high, size) */
static PyObject *f_randint(PyObject *m, PyObject *args, PyObject *kw) {
    static const char *const own[] = {"low", "high", "size", NULL};
    PyObject *ckw = common_kw(kw, own), *okw = own_kw(kw, own);
    if (kw && (!ckw || !okw)) {
        Py_XDECREF(ckw);
        Py_XDECREF(okw);
        return NULL;
    }
    cargs c;
    int ok = parse_kw(ckw, &c, false, "randint") == 0;
    Py_XDECREF(ckw);
    if (!ok) {
        Py_XDECREF(okw);
        return NULL;
    }
    PyObject *lo = NULL, *hi = NULL, *size = NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n == 3) {
        lo = PyTuple_GET_ITEM(args, 0);
        hi = PyTuple_GET_ITEM(args, 1);
        size = PyTuple_GET_ITEM(args, 2);
    } else if (n == 2) {
        hi = PyTuple_GET_ITEM(args, 0);
        size = PyTuple_GET_ITEM(args, 1);
    } else if (n == 1) {
        hi = PyTuple_GET_ITEM(args, 0);
    }
    if (okw) {
        PyObject *x;
        if ((x = PyDict_GetItemString(okw, "low"))) lo = x;
        if ((x = PyDict_GetItemString(okw, "high"))) hi = x;
        if ((x = PyDict_GetItemString(okw, "size"))) size = x;
    }
    int64_t low = 0, high;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    ok = hi && size && (!lo || cnpy_as_int64(lo, &low)) && cnpy_as_int64(hi, &high) &&
         cnpy_shape_from(size, &ndim, shape);
    Py_XDECREF(okw);
    if (!ok) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "randint(low=0, high, size, dtype=int64)");
        return NULL;
    }
    if (!c.has_dt) c.dt = CN_I64;
    int began = dev_begin(&c);
    if (began < 0) return NULL;
    cn_tensor *t = CNPY_CALL(cn_randint(low, high, c.dt, ndim, shape));
    dev_end(began);
    return finish(t, &c);
}

static PyObject *f_randperm(PyObject *m, PyObject *args, PyObject *kw) {
    static const char *const own[] = {"n", NULL};
    PyObject *ckw = common_kw(kw, own), *okw = own_kw(kw, own);
    if (kw && (!ckw || !okw)) {
        Py_XDECREF(ckw);
        Py_XDECREF(okw);
        return NULL;
    }
    static char *kwlist[] = {"n", NULL};
    long long n;
    cargs c;
    int ok = PyArg_ParseTupleAndKeywords(args, okw, "L:randperm", kwlist, &n) &&
             parse_kw(ckw, &c, false, "randperm") == 0;
    Py_XDECREF(ckw);
    Py_XDECREF(okw);
    if (!ok) return NULL;
    int began = dev_begin(&c);
    if (began < 0) return NULL;
    cn_tensor *t = CNPY_CALL(cn_randperm((int64_t)n));
    dev_end(began);
    if (t && c.has_dt && c.dt != CN_I64) {
        cn_tensor *x = CNPY_CALL(cn_cast(t, c.dt));
        cn_release(t);
        t = x;
    }
    return finish(t, &c);
}

/* normal(mean, std, size) with float mean and std. */
static PyObject *f_normal(PyObject *m, PyObject *args, PyObject *kw) {
    static const char *const own[] = {"mean", "std", "size", NULL};
    PyObject *ckw = common_kw(kw, own), *okw = own_kw(kw, own);
    if (kw && (!ckw || !okw)) {
        Py_XDECREF(ckw);
        Py_XDECREF(okw);
        return NULL;
    }
    static char *kwlist[] = {"mean", "std", "size", NULL};
    double mean, std;
    PyObject *size;
    cargs c;
    int ok = PyArg_ParseTupleAndKeywords(args, okw, "ddO:normal", kwlist, &mean, &std, &size) &&
             parse_kw(ckw, &c, false, "normal") == 0;
    Py_XDECREF(ckw);
    Py_XDECREF(okw);
    if (!ok) return NULL;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    if (!cnpy_shape_from(size, &ndim, shape)) return NULL;
    int began = dev_begin(&c);
    if (began < 0) return NULL;
    cn_tensor *t = CNPY_CALL(cn_normal(c.dt, ndim, shape, mean, std));
    dev_end(began);
    return finish(t, &c);
}

static PyObject *f_manual_seed(PyObject *m, PyObject *arg) {
    int64_t s;
    if (!cnpy_as_int64(arg, &s)) return NULL;
    cn_manual_seed((uint64_t)s);
    Py_RETURN_NONE;
}

static PyObject *f_get_rng_state(PyObject *m, PyObject *u) {
    uint64_t seed, off;
    cn_rng_get_state(&seed, &off);
    return Py_BuildValue("(KK)", (unsigned long long)seed, (unsigned long long)off);
}

static PyObject *f_set_rng_state(PyObject *m, PyObject *arg) {
    unsigned long long seed, off;
    if (!PyArg_ParseTuple(arg, "KK:set_rng_state", &seed, &off)) return NULL;
    cn_rng_set_state(seed, off);
    Py_RETURN_NONE;
}

#define KW (METH_VARARGS | METH_KEYWORDS)
#define FN(f) (PyCFunction)(void (*)(void))(f)

PyMethodDef cnpy_creation_functions[] = {
    {"tensor", FN(f_tensor), KW, "tensor(data, dtype=None, device=None, requires_grad=False): a copy"},
    {"as_tensor", FN(f_as_tensor), KW, "as_tensor(data, dtype=None, device=None): shares where it can"},
    {"empty", FN(f_empty), KW, "empty(*size, dtype=None, device=None, requires_grad=False)"},
    {"zeros", FN(f_zeros), KW, "zeros(*size, dtype=None, device=None, requires_grad=False)"},
    {"ones", FN(f_ones), KW, "ones(*size, dtype=None, device=None, requires_grad=False)"},
    {"rand", FN(f_rand), KW, "rand(*size, ...): U[0, 1)"},
    {"randn", FN(f_randn), KW, "randn(*size, ...): N(0, 1)"},
    {"full", FN(f_full), KW, "full(size, fill_value, dtype=None, ...)"},
    {"empty_like", FN(f_empty_like), KW, NULL},
    {"zeros_like", FN(f_zeros_like), KW, NULL},
    {"ones_like", FN(f_ones_like), KW, NULL},
    {"rand_like", FN(f_rand_like), KW, NULL},
    {"randn_like", FN(f_randn_like), KW, NULL},
    {"full_like", FN(f_full_like), KW, NULL},
    {"arange", FN(f_arange), KW, "arange(end) or arange(start, end, step=1, dtype=None, ...)"},
    {"linspace", FN(f_linspace), KW, "linspace(start, end, steps, ...)"},
    {"eye", FN(f_eye), KW, "eye(n, m=None, ...)"},
    {"randint", FN(f_randint), KW, "randint(low=0, high, size, dtype=int64, ...)"},
    {"randperm", FN(f_randperm), KW, "randperm(n, ...)"},
    {"normal", FN(f_normal), KW, "normal(mean, std, size, ...)"},
    {"manual_seed", f_manual_seed, METH_O, "seed the generator (Philox: the same numbers for any "
                                           "thread count)"},
    {"get_rng_state", f_get_rng_state, METH_NOARGS, "(seed, offset)"},
    {"set_rng_state", f_set_rng_state, METH_O, "set_rng_state((seed, offset))"},
    {NULL, NULL, 0, NULL},
};
