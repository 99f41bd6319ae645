/* Tensor methods over the op table, under PyTorch's names: elementwise
 * functions, reductions (dim=, keepdim=), shapes and views, softmax, joins
 * and splits, gathers. Module-level functions of the same names are made in
 * chutney/__init__.py from these methods. */
#include "common.h"

#include <stdarg.h>

#include <math.h>
#include <string.h>

#define KW (METH_VARARGS | METH_KEYWORDS)
#define FN(f) (PyCFunction)(void (*)(void))(f)

/* ---- elementwise, one input ---- */

#define UNARY(name, call)                                                                 \
    static PyObject *m_##name(PyObject *self, PyObject *unused) {                         \
        return cnpy_wrap(CNPY_CALL(call(TT(self))));                                      \
    }
UNARY(neg, cn_neg)
UNARY(abs, cn_abs)
UNARY(sign, cn_sign)
UNARY(exp, cn_exp)
UNARY(log, cn_log)
UNARY(log1p, cn_log1p)
UNARY(expm1, cn_expm1)
UNARY(sqrt, cn_sqrt)
UNARY(rsqrt, cn_rsqrt)
UNARY(square, cn_square)
UNARY(reciprocal, cn_reciprocal)
UNARY(sin, cn_sin)
UNARY(cos, cn_cos)
UNARY(tanh, cn_tanh)
UNARY(sigmoid, cn_sigmoid)
UNARY(relu, cn_relu)
UNARY(silu, cn_silu)
UNARY(erf, cn_erf)
UNARY(floor, cn_floor)
UNARY(ceil, cn_ceil)
UNARY(round, cn_round)
UNARY(logical_not, cn_logical_not)
UNARY(detach, cn_detach)
UNARY(tan, cn_tan)
UNARY(asin, cn_asin)
UNARY(acos, cn_acos)
UNARY(atan, cn_atan)
UNARY(sinh, cn_sinh)
UNARY(cosh, cn_cosh)
UNARY(asinh, cn_asinh)
UNARY(acosh, cn_acosh)
UNARY(atanh, cn_atanh)

/* atan2(other): atan(self / other) in the quadrant of (other, self), the
 * operands broadcast (and promoted) as in a binary op. */
static PyObject *m_atan2(PyObject *self, PyObject *other) {
    cn_tensor *o = cnpy_as_tensor(other, TT(self));
    if (!o) return NULL;
    cn_tensor *y = TT(self), *r;
    CNPY_SCOPE_BEGIN();
    cn_dtype dt = cn_result_type(y, o);
    if (!cn_dtype_is_float(dt)) dt = CN_F32;
    r = cn_atan2(cn_cast(y, dt), cn_cast(o, dt));
    CNPY_SCOPE_END_KEEP(r);
    cn_release(o);
    return cnpy_wrap(r);
}

/* PyArg_ParseTupleAndKeywords taking NumPy's names as PyTorch does: axis for
 * dim, keepdims for keepdim. (Parsed objects stay alive: the renamed dict
 * holds the caller's values.) */
static int parse_kw(PyObject *args, PyObject *kw, const char *fmt, char **kwlist, ...) {
    static const char *const alias[2][2] = {{"axis", "dim"}, {"keepdims", "keepdim"}};
    PyObject *renamed = NULL;
    for (int a = 0; kw && a < 2; a++) {
        PyObject *v = PyDict_GetItemString(kw, alias[a][0]);
        if (!v || PyDict_GetItemString(kw, alias[a][1])) continue;
        if (!renamed && !(renamed = PyDict_Copy(kw))) return 0;
        if (PyDict_SetItemString(renamed, alias[a][1], v) < 0 ||
            PyDict_DelItemString(renamed, alias[a][0]) < 0) {
            Py_DECREF(renamed);
            return 0;
        }
    }
    va_list va;
    va_start(va, kwlist);
    int ok = PyArg_VaParseTupleAndKeywords(args, renamed ? renamed : kw, fmt, kwlist, va);
    va_end(va);
    Py_XDECREF(renamed);
    return ok;
}

/* log2 and log10 from log. */
static PyObject *log_base(PyObject *self, double base) {
    cn_tensor *r;
    CNPY_SCOPE_BEGIN();
    r = cn_div_scalar(cn_log(TT(self)), log(base));
    CNPY_SCOPE_END_KEEP(r);
    return cnpy_wrap(r);
}
static PyObject *m_log2(PyObject *self, PyObject *u) { return log_base(self, 2.0); }
static PyObject *m_log10(PyObject *self, PyObject *u) { return log_base(self, 10.0); }

static PyObject *m_trunc(PyObject *self, PyObject *u) {
    cn_tensor *r;
    CNPY_SCOPE_BEGIN();
    r = cn_mul(cn_sign(TT(self)), cn_floor(cn_abs(TT(self))));
    CNPY_SCOPE_END_KEEP(r);
    return cnpy_wrap(r);
}

static PyObject *m_leaky_relu(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"negative_slope", NULL};
    double s = 0.01;
    if (!parse_kw(args, kw, "|d:leaky_relu", kwlist, &s)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_leaky_relu(TT(self), s)));
}

static PyObject *m_elu(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"alpha", NULL};
    double a = 1.0;
    if (!parse_kw(args, kw, "|d:elu", kwlist, &a)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_elu(TT(self), a)));
}

static PyObject *m_gelu(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"approximate", NULL};
    const char *ap = "none";
    if (!parse_kw(args, kw, "|s:gelu", kwlist, &ap)) return NULL;
    bool tanh_form;
    if (strcmp(ap, "none") == 0) tanh_form = false;
    else if (strcmp(ap, "tanh") == 0) tanh_form = true;
    else {
        PyErr_Format(PyExc_ValueError, "gelu: approximate is 'none' or 'tanh', not '%s'", ap);
        return NULL;
    }
    return cnpy_wrap(CNPY_CALL(cn_gelu(TT(self), tanh_form)));
}

static PyObject *m_softplus(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"beta", "threshold", NULL};
    double beta = 1, thr = 20;
    if (!parse_kw(args, kw, "|dd:softplus", kwlist, &beta, &thr)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_softplus(TT(self), beta, thr)));
}

static PyObject *m_hardtanh(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"min_val", "max_val", NULL};
    double lo = -1, hi = 1;
    if (!parse_kw(args, kw, "|dd:hardtanh", kwlist, &lo, &hi)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_clamp(TT(self), lo, hi)));
}

/* ---- reductions ---- */

typedef cn_tensor *(*reduce_fn)(cn_tensor *, const int *, int, bool);

static PyObject *reduce(PyObject *self, PyObject *args, PyObject *kw, reduce_fn fn, const char *name) {
    static char *kwlist[] = {"dim", "keepdim", "dtype", NULL};
    PyObject *dim = Py_None, *dtype = Py_None;
    int keepdim = 0;
    char fmt[32];
    snprintf(fmt, sizeof fmt, "|OpO:%s", name);
    if (!parse_kw(args, kw, fmt, kwlist, &dim, &keepdim, &dtype)) return NULL;
    int dims[CN_MAX_DIMS], n;
    if (!cnpy_parse_dims(dim, dims, &n)) return NULL;
    cn_tensor *x = TT(self);
    cn_dtype dt = CN_F32;
    if (dtype != Py_None) {
        if (!cnpy_dtype_conv(dtype, &dt)) return NULL;
        cn_tensor *r;
        CNPY_SCOPE_BEGIN();
        r = fn(cn_cast(x, dt), n ? dims : NULL, n, keepdim);
        CNPY_SCOPE_END_KEEP(r);
        return cnpy_wrap(r);
    }
    return cnpy_wrap(CNPY_CALL_IF(cn_numel(x) >= 16 * CNPY_NOGIL_NUMEL, fn(x, n ? dims : NULL, n, keepdim)));
}

static PyObject *m_sum(PyObject *s, PyObject *a, PyObject *k) { return reduce(s, a, k, cn_sum, "sum"); }
static PyObject *m_mean(PyObject *s, PyObject *a, PyObject *k) { return reduce(s, a, k, cn_mean, "mean"); }
static PyObject *m_prod(PyObject *s, PyObject *a, PyObject *k) { return reduce(s, a, k, cn_prod, "prod"); }
static PyObject *m_amax(PyObject *s, PyObject *a, PyObject *k) { return reduce(s, a, k, cn_max, "amax"); }
static PyObject *m_amin(PyObject *s, PyObject *a, PyObject *k) { return reduce(s, a, k, cn_min, "amin"); }
static PyObject *m_logsumexp(PyObject *s, PyObject *a, PyObject *k) {
    return reduce(s, a, k, cn_logsumexp, "logsumexp");
}

/* The (values, indices) pair of max(dim) / min(dim), as a named tuple. */
static PyTypeObject *minmax_type;
static PyStructSequence_Field minmax_fields[] = {{"values", NULL}, {"indices", NULL}, {NULL, NULL}};
static PyStructSequence_Desc minmax_desc = {"chutney.return_types.max_min", NULL, minmax_fields, 2};

/* max(), max(dim, keepdim=False) -> (values, indices), max(other) */
static PyObject *max_min(PyObject *self, PyObject *args, PyObject *kw, bool is_max) {
    static char *kwlist[] = {"dim", "keepdim", NULL};
    PyObject *dim = Py_None;
    int keepdim = 0;
    if (!parse_kw(args, kw, is_max ? "|Op:max" : "|Op:min", kwlist, &dim, &keepdim))
        return NULL;
    cn_tensor *x = TT(self);
    if (dim != Py_None && Tensor_Check(dim))
        return cnpy_wrap(is_max ? CNPY_CALL(cn_maximum(x, TT(dim))) : CNPY_CALL(cn_minimum(x, TT(dim))));
    if (dim == Py_None) return cnpy_wrap(is_max ? CNPY_CALL(cn_max(x, NULL, 0, false)) : CNPY_CALL(cn_min(x, NULL, 0, false)));
    int d;
    if (!cnpy_as_int(dim, &d)) return NULL;
    PyObject *v = cnpy_wrap(is_max ? CNPY_CALL(cn_max(x, &d, 1, keepdim)) : CNPY_CALL(cn_min(x, &d, 1, keepdim)));
    if (!v) return NULL;
    PyObject *i = cnpy_wrap(is_max ? CNPY_CALL(cn_argmax(x, d, keepdim)) : CNPY_CALL(cn_argmin(x, d, keepdim)));
    if (!i) {
        Py_DECREF(v);
        return NULL;
    }
    PyObject *r = PyStructSequence_New(minmax_type);
    if (!r) {
        Py_DECREF(v);
        Py_DECREF(i);
        return NULL;
    }
    PyStructSequence_SetItem(r, 0, v);
    PyStructSequence_SetItem(r, 1, i);
    return r;
}
static PyObject *m_max(PyObject *s, PyObject *a, PyObject *k) { return max_min(s, a, k, true); }
static PyObject *m_min(PyObject *s, PyObject *a, PyObject *k) { return max_min(s, a, k, false); }

static PyObject *arg_max_min(PyObject *self, PyObject *args, PyObject *kw, bool is_max) {
    static char *kwlist[] = {"dim", "keepdim", NULL};
    PyObject *dim = Py_None;
    int keepdim = 0;
    if (!parse_kw(args, kw, is_max ? "|Op:argmax" : "|Op:argmin", kwlist, &dim,
                                     &keepdim))
        return NULL;
    cn_tensor *x = TT(self);
    if (dim == Py_None) {
        cn_tensor *r = is_max ? CNPY_CALL(cn_argmax_all(x)) : CNPY_CALL(cn_argmin_all(x));
        if (r && keepdim) {
            int nd = cn_ndim(x);
            int64_t ones[CN_MAX_DIMS];
            for (int i = 0; i < nd; i++) ones[i] = 1;
            cn_tensor *k = CNPY_CALL(cn_reshape(r, nd, ones));
            cn_release(r);
            r = k;
        }
        return cnpy_wrap(r);
    }
    int d;
    if (!cnpy_as_int(dim, &d)) return NULL;
    return cnpy_wrap(is_max ? CNPY_CALL(cn_argmax(x, d, keepdim)) : CNPY_CALL(cn_argmin(x, d, keepdim)));
}
static PyObject *m_argmax(PyObject *s, PyObject *a, PyObject *k) { return arg_max_min(s, a, k, true); }
static PyObject *m_argmin(PyObject *s, PyObject *a, PyObject *k) { return arg_max_min(s, a, k, false); }

/* var/std(dim=None, unbiased=True, keepdim=False, correction=None) */
static PyObject *var_std(PyObject *self, PyObject *args, PyObject *kw, bool is_std) {
    static char *kwlist[] = {"dim", "unbiased", "keepdim", "correction", NULL};
    PyObject *dim = Py_None, *unbiased = Py_None, *corr = Py_None;
    int keepdim = 0;
    if (!parse_kw(args, kw, is_std ? "|OOpO:std" : "|OOpO:var", kwlist, &dim,
                                     &unbiased, &keepdim, &corr))
        return NULL;
    /* var(True) is var(unbiased=True), as PyTorch's overload */
    if (PyBool_Check(dim)) {
        unbiased = dim;
        dim = Py_None;
    }
    double c = 1;
    if (corr != Py_None) {
        c = PyFloat_AsDouble(corr);
        if (c == -1.0 && PyErr_Occurred()) return NULL;
    } else if (unbiased != Py_None) {
        int u = PyObject_IsTrue(unbiased);
        if (u < 0) return NULL;
        c = u ? 1 : 0;
    }
    int dims[CN_MAX_DIMS], n;
    if (!cnpy_parse_dims(dim, dims, &n)) return NULL;
    cn_tensor *x = TT(self);
    return cnpy_wrap(is_std ? CNPY_CALL(cn_std(x, n ? dims : NULL, n, c, keepdim))
                            : CNPY_CALL(cn_var(x, n ? dims : NULL, n, c, keepdim)));
}
static PyObject *m_var(PyObject *s, PyObject *a, PyObject *k) { return var_std(s, a, k, false); }
static PyObject *m_std(PyObject *s, PyObject *a, PyObject *k) { return var_std(s, a, k, true); }

/* norm(p='fro', dim=None, keepdim=False) */
static PyObject *m_norm(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"p", "dim", "keepdim", NULL};
    PyObject *po = Py_None, *dim = Py_None;
    int keepdim = 0;
    if (!parse_kw(args, kw, "|OOp:norm", kwlist, &po, &dim, &keepdim)) return NULL;
    double p = 2;
    if (po != Py_None) {
        if (PyUnicode_Check(po)) {
            if (PyUnicode_CompareWithASCIIString(po, "fro") != 0) {
                PyErr_SetString(PyExc_ValueError, "norm: p is a number or 'fro'");
                return NULL;
            }
        } else {
            p = PyFloat_AsDouble(po);
            if (p == -1.0 && PyErr_Occurred()) return NULL;
        }
    }
    int dims[CN_MAX_DIMS], n;
    if (!cnpy_parse_dims(dim, dims, &n)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_norm(TT(self), p, n ? dims : NULL, n, keepdim)));
}

/* all(dim=None) / any(dim=None): bool results. */
static PyObject *all_any(PyObject *self, PyObject *args, PyObject *kw, bool is_all) {
    static char *kwlist[] = {"dim", "keepdim", NULL};
    PyObject *dim = Py_None;
    int keepdim = 0;
    if (!parse_kw(args, kw, is_all ? "|Op:all" : "|Op:any", kwlist, &dim, &keepdim))
        return NULL;
    int dims[CN_MAX_DIMS], n;
    if (!cnpy_parse_dims(dim, dims, &n)) return NULL;
    cn_tensor *r;
    CNPY_SCOPE_BEGIN();
    cn_tensor *b = cn_cast(cn_ne(TT(self), cn_scalar(CN_F32, 0)), CN_I32);
    r = is_all ? cn_min(b, n ? dims : NULL, n, keepdim) : cn_max(b, n ? dims : NULL, n, keepdim);
    r = cn_cast(r, CN_BOOL);
    CNPY_SCOPE_END_KEEP(r);
    return cnpy_wrap(r);
}
static PyObject *m_all(PyObject *s, PyObject *a, PyObject *k) { return all_any(s, a, k, true); }
static PyObject *m_any(PyObject *s, PyObject *a, PyObject *k) { return all_any(s, a, k, false); }

static PyObject *m_count_nonzero(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dim", NULL};
    PyObject *dim = Py_None;
    if (!parse_kw(args, kw, "|O:count_nonzero", kwlist, &dim)) return NULL;
    int dims[CN_MAX_DIMS], n;
    if (!cnpy_parse_dims(dim, dims, &n)) return NULL;
    cn_tensor *r;
    CNPY_SCOPE_BEGIN();
    r = cn_sum(cn_ne(TT(self), cn_scalar(CN_F32, 0)), n ? dims : NULL, n, false);
    CNPY_SCOPE_END_KEEP(r);
    return cnpy_wrap(r);
}

static PyObject *m_cumsum(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dim", NULL};
    int d;
    if (!parse_kw(args, kw, "i:cumsum", kwlist, &d)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_cumsum(TT(self), d)));
}

/* ---- softmax ---- */

static PyObject *softmax(PyObject *self, PyObject *args, PyObject *kw, bool logf) {
    static char *kwlist[] = {"dim", "dtype", NULL};
    PyObject *dim = Py_None, *dtype = Py_None;
    if (!parse_kw(args, kw, logf ? "|OO:log_softmax" : "|OO:softmax", kwlist, &dim,
                                     &dtype))
        return NULL;
    cn_tensor *x = TT(self);
    int d;
    if (dim == Py_None) {
        /* PyTorch's implicit choice: dim 0 for ranks 0, 1 and 3, else 1. */
        int nd = cn_ndim(x);
        d = (nd == 0 || nd == 1 || nd == 3) ? 0 : 1;
    } else if (!cnpy_as_int(dim, &d)) {
        return NULL;
    }
    cn_tensor *r;
    CNPY_SCOPE_BEGIN();
    cn_tensor *in = x;
    if (dtype != Py_None) {
        cn_dtype dt;
        if (!cnpy_dtype_conv(dtype, &dt)) {
            cn_scope_end();
            return NULL;
        }
        in = CNPY_CALL(cn_cast(x, dt));
    }
    r = logf ? CNPY_CALL(cn_log_softmax(in, d)) : CNPY_CALL(cn_softmax(in, d));
    CNPY_SCOPE_END_KEEP(r);
    return cnpy_wrap(r);
}
static PyObject *m_softmax(PyObject *s, PyObject *a, PyObject *k) { return softmax(s, a, k, false); }
static PyObject *m_log_softmax(PyObject *s, PyObject *a, PyObject *k) { return softmax(s, a, k, true); }

/* ---- shapes and views ---- */

static PyObject *m_reshape(PyObject *self, PyObject *args) {
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    if (!cnpy_parse_shape(args, 0, NULL, &ndim, shape)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_reshape(TT(self), ndim, shape)));
}

static PyObject *m_view(PyObject *self, PyObject *args) {
    if (PyTuple_GET_SIZE(args) == 1) {
        PyObject *a = PyTuple_GET_ITEM(args, 0);
        cn_dtype dt;
        if (PyObject_TypeCheck(a, &DType_Type)) {
            (void)cnpy_dtype_conv(a, &dt);
            if (dt != cn_tensor_dtype(TT(self))) {
                PyErr_SetString(PyExc_NotImplementedError,
                                "view(dtype) reinterpreting the bytes is not supported");
                return NULL;
            }
            Py_INCREF(self);
            return self;
        }
    }
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    if (!cnpy_parse_shape(args, 0, NULL, &ndim, shape)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_view(TT(self), ndim, shape)));
}

static PyObject *m_view_as(PyObject *self, PyObject *other) {
    if (!Tensor_Check(other)) {
        PyErr_SetString(PyExc_TypeError, "view_as: expected a Tensor");
        return NULL;
    }
    return cnpy_wrap(CNPY_CALL(cn_view(TT(self), cn_ndim(TT(other)), cn_shape(TT(other)))));
}

static PyObject *m_reshape_as(PyObject *self, PyObject *other) {
    if (!Tensor_Check(other)) {
        PyErr_SetString(PyExc_TypeError, "reshape_as: expected a Tensor");
        return NULL;
    }
    return cnpy_wrap(CNPY_CALL(cn_reshape(TT(self), cn_ndim(TT(other)), cn_shape(TT(other)))));
}

static PyObject *m_flatten(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"start_dim", "end_dim", NULL};
    int s = 0, e = -1;
    if (!parse_kw(args, kw, "|ii:flatten", kwlist, &s, &e)) return NULL;
    cn_tensor *x = TT(self);
    if (cn_ndim(x) == 0) return cnpy_wrap(CNPY_CALL(cn_reshape(x, 1, (int64_t[]){1})));
    return cnpy_wrap(CNPY_CALL(cn_flatten(x, s, e)));
}

static PyObject *m_ravel(PyObject *self, PyObject *u) {
    return cnpy_wrap(CNPY_CALL(cn_reshape(TT(self), 1, (int64_t[]){-1})));
}

static PyObject *m_permute(PyObject *self, PyObject *args) {
    int ndim;
    int64_t a64[CN_MAX_DIMS];
    if (!cnpy_parse_shape(args, 0, NULL, &ndim, a64)) return NULL;
    int axes[CN_MAX_DIMS];
    for (int i = 0; i < ndim; i++) axes[i] = (int)a64[i];
    return cnpy_wrap(CNPY_CALL(cn_permute(TT(self), axes, ndim)));
}

static PyObject *m_transpose(PyObject *self, PyObject *args) {
    int a, b;
    if (!PyArg_ParseTuple(args, "ii:transpose", &a, &b)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_transpose(TT(self), a, b)));
}

static PyObject *m_t(PyObject *self, PyObject *u) {
    cn_tensor *x = TT(self);
    if (cn_ndim(x) > 2) {
        PyErr_Format(PyExc_ValueError, "t() expects a tensor with <= 2 dims, got %d", cn_ndim(x));
        return NULL;
    }
    if (cn_ndim(x) < 2) return cnpy_wrap(cn_retain(x));
    return cnpy_wrap(CNPY_CALL(cn_transpose(x, 0, 1)));
}

static PyObject *m_squeeze(PyObject *self, PyObject *args) {
    PyObject *dim = Py_None;
    if (!PyArg_ParseTuple(args, "|O:squeeze", &dim)) return NULL;
    cn_tensor *x = TT(self);
    if (dim == Py_None) return cnpy_wrap(CNPY_CALL(cn_squeeze_all(x)));
    int d;
    if (!cnpy_as_int(dim, &d)) return NULL;
    int nd = cn_ndim(x);
    if (nd == 0 && (d == 0 || d == -1)) return cnpy_wrap(cn_retain(x));
    if (d < -nd || d >= nd) {
        PyErr_Format(PyExc_IndexError, "squeeze: dim %d out of range for %d dims", d, nd);
        return NULL;
    }
    /* PyTorch leaves an axis of size != 1 alone. */
    if (cn_shape(x)[d < 0 ? d + nd : d] != 1) return cnpy_wrap(CNPY_CALL(cn_reshape(x, nd, cn_shape(x))));
    return cnpy_wrap(CNPY_CALL(cn_squeeze(x, d)));
}

static PyObject *m_unsqueeze(PyObject *self, PyObject *arg) {
    int d;
    if (!cnpy_as_int(arg, &d)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_unsqueeze(TT(self), d)));
}

static PyObject *m_expand(PyObject *self, PyObject *args) {
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    if (!cnpy_parse_shape(args, 0, NULL, &ndim, shape)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_expand(TT(self), ndim, shape)));
}

static PyObject *m_expand_as(PyObject *self, PyObject *other) {
    if (!Tensor_Check(other)) {
        PyErr_SetString(PyExc_TypeError, "expand_as: expected a Tensor");
        return NULL;
    }
    return cnpy_wrap(CNPY_CALL(cn_expand(TT(self), cn_ndim(TT(other)), cn_shape(TT(other)))));
}

static PyObject *m_broadcast_to(PyObject *self, PyObject *arg) {
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    if (!cnpy_shape_from(arg, &ndim, shape)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_broadcast_to(TT(self), ndim, shape)));
}

static PyObject *m_narrow(PyObject *self, PyObject *args) {
    int d;
    long long start, len;
    if (!PyArg_ParseTuple(args, "iLL:narrow", &d, &start, &len)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_narrow(TT(self), d, start, len)));
}

/* select(dim, index): the view x[..., index, ...] without that axis. */
static PyObject *m_select(PyObject *self, PyObject *args) {
    int d;
    long long i;
    if (!PyArg_ParseTuple(args, "iL:select", &d, &i)) return NULL;
    cn_tensor *x = TT(self);
    int nd = cn_ndim(x);
    if (d < -nd || d >= nd) {
        PyErr_Format(PyExc_IndexError, "select: dim %d out of range for %d dims", d, nd);
        return NULL;
    }
    if (d < 0) d += nd;
    int64_t size = cn_shape(x)[d];
    if (i < -size || i >= size) {
        PyErr_Format(PyExc_IndexError, "index %lld is out of bounds for dimension %d with size %lld", i,
                     d, (long long)size);
        return NULL;
    }
    if (i < 0) i += size;
    cn_tensor *r;
    CNPY_SCOPE_BEGIN();
    r = CNPY_CALL(cn_squeeze(cn_slice(x, d, i, i + 1, 1), d));
    CNPY_SCOPE_END_KEEP(r);
    return cnpy_wrap(r);
}

/* flip(dims): reversed views along each axis. */
static PyObject *m_flip(PyObject *self, PyObject *args) {
    PyObject *dimsobj = PyTuple_GET_SIZE(args) == 1 ? PyTuple_GET_ITEM(args, 0) : args;
    int dims[CN_MAX_DIMS], n;
    if (!cnpy_parse_dims(dimsobj, dims, &n)) return NULL;
    cn_tensor *r;
    CNPY_SCOPE_BEGIN();
    r = TT(self);
    for (int i = 0; i < n && r; i++) r = CNPY_CALL(cn_slice(r, dims[i], CN_END, CN_BEGIN, -1));
    if (r == TT(self)) r = CNPY_CALL(cn_reshape(r, cn_ndim(r), cn_shape(r)));
    CNPY_SCOPE_END_KEEP(r);
    return cnpy_wrap(r);
}

/* repeat(*sizes): tile, as torch.Tensor.repeat. */
static PyObject *m_repeat(PyObject *self, PyObject *args) {
    int nr;
    int64_t reps[CN_MAX_DIMS];
    if (!cnpy_parse_shape(args, 0, NULL, &nr, reps)) return NULL;
    cn_tensor *x = TT(self);
    int nd = cn_ndim(x);
    if (nr < nd) {
        PyErr_Format(PyExc_ValueError, "repeat: %d repeats for a tensor of %d dims", nr, nd);
        return NULL;
    }
    if (2 * nr > CN_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "repeat: at most %d dims", CN_MAX_DIMS / 2);
        return NULL;
    }
    /* [r0, s0, r1, s1, ...] by expanding size-1 axes, then merged pairs. */
    int64_t sh1[CN_MAX_DIMS], sh2[CN_MAX_DIMS], out[CN_MAX_DIMS];
    for (int i = 0; i < nr; i++) {
        int64_t s = i < nr - nd ? 1 : cn_shape(x)[i - (nr - nd)];
        sh1[2 * i] = 1;
        sh1[2 * i + 1] = s;
        sh2[2 * i] = reps[i];
        sh2[2 * i + 1] = s;
        out[i] = reps[i] * s;
    }
    cn_tensor *r;
    CNPY_SCOPE_BEGIN();
    r = CNPY_CALL(cn_reshape(cn_contiguous(cn_expand(cn_reshape(x, 2 * nr, sh1), 2 * nr, sh2)), nr, out));
    CNPY_SCOPE_END_KEEP(r);
    return cnpy_wrap(r);
}

static PyObject *m_tril(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"diagonal", NULL};
    long long k = 0;
    if (!parse_kw(args, kw, "|L:tril", kwlist, &k)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_tril(TT(self), k)));
}

static PyObject *m_triu(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"diagonal", NULL};
    long long k = 0;
    if (!parse_kw(args, kw, "|L:triu", kwlist, &k)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_triu(TT(self), k)));
}

/* ---- joins and splits ---- */

/* The tensors of a sequence, each retained (the sequence may be made on the
 * fly, e.g. the rows of a tensor, and freed before they are used). */
static int tensor_list(PyObject *seq, cn_tensor ***out, Py_ssize_t *n, const char *fn) {
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of tensors");
    if (!fast) return -1;
    *n = PySequence_Fast_GET_SIZE(fast);
    if (*n == 0) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: expected a non-empty list of tensors", fn);
        return -1;
    }
    *out = PyMem_Calloc((size_t)*n, sizeof **out);
    if (!*out) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    cnpy_wait_idle(); /* the sequence may have been a generator: Python code ran */
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
        if (!Tensor_Check(o)) {
            PyErr_Format(PyExc_TypeError, "%s: expected Tensors, got %s at position %zd", fn,
                         Py_TYPE(o)->tp_name, i);
            for (Py_ssize_t j = 0; j < i; j++) cn_release((*out)[j]);
            PyMem_Free(*out);
            Py_DECREF(fast);
            return -1;
        }
        (*out)[i] = cn_retain(TT(o));
    }
    Py_DECREF(fast);
    return 0;
}

static void tensor_list_free(cn_tensor **ts, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) cn_release(ts[i]);
    PyMem_Free(ts);
}

static PyObject *join(PyObject *args, PyObject *kw, bool stack) {
    static char *kwlist[] = {"tensors", "dim", NULL};
    PyObject *seq;
    int d = 0;
    if (!parse_kw(args, kw, stack ? "O|i:stack" : "O|i:cat", kwlist, &seq, &d))
        return NULL;
    cn_tensor **ts;
    Py_ssize_t n;
    if (tensor_list(seq, &ts, &n, stack ? "stack" : "cat") < 0) return NULL;
    if (n > INT32_MAX) {
        tensor_list_free(ts, n);
        PyErr_SetString(PyExc_ValueError, "too many tensors");
        return NULL;
    }
    cn_tensor *r = stack ? CNPY_CALL(cn_stack(ts, (int)n, d)) : CNPY_CALL(cn_concat(ts, (int)n, d));
    tensor_list_free(ts, n);
    return cnpy_wrap(r);
}

static PyObject *f_cat(PyObject *m, PyObject *a, PyObject *k) { return join(a, k, false); }
static PyObject *f_stack(PyObject *m, PyObject *a, PyObject *k) { return join(a, k, true); }

static PyObject *pieces_tuple(cn_tensor **out, int n) {
    PyObject *tup = PyTuple_New(n);
    if (!tup) {
        for (int i = 0; i < n; i++) cn_release(out[i]);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        PyObject *o = cnpy_wrap(out[i]);
        out[i] = NULL;
        if (!o) {
            for (int j = i + 1; j < n; j++) cn_release(out[j]);
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, i, o);
    }
    return tup;
}

static PyObject *m_chunk(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"chunks", "dim", NULL};
    int chunks, d = 0;
    if (!parse_kw(args, kw, "i|i:chunk", kwlist, &chunks, &d)) return NULL;
    if (chunks <= 0) {
        PyErr_SetString(PyExc_ValueError, "chunk: chunks must be positive");
        return NULL;
    }
    cn_tensor **out = PyMem_Calloc((size_t)chunks, sizeof *out);
    if (!out) return PyErr_NoMemory();
    cn_tensor *x = TT(self);
    cn_scope_begin();
    int n = cn_chunk(x, chunks, d, out);
    for (int i = 0; i < n; i++) cn_keep(out[i]);
    cn_scope_end();
    if (n < 0) {
        PyMem_Free(out);
        return cnpy_raise(n);
    }
    PyObject *r = pieces_tuple(out, n);
    PyMem_Free(out);
    return r;
}

/* split(split_size_or_sections, dim=0) */
static PyObject *m_split(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"split_size_or_sections", "dim", NULL};
    PyObject *spec;
    int d = 0;
    if (!parse_kw(args, kw, "O|i:split", kwlist, &spec, &d)) return NULL;
    cn_tensor *x = TT(self);
    int nd = cn_ndim(x);
    if (d < -nd || d >= nd) {
        PyErr_Format(PyExc_IndexError, "split: dim %d out of range for %d dims", d, nd);
        return NULL;
    }
    int64_t size = cn_shape(x)[d < 0 ? d + nd : d];
    int64_t *sizes = NULL;
    Py_ssize_t n;
    if (PyLong_Check(spec)) {
        int64_t s;
        if (!cnpy_as_int64(spec, &s)) return NULL;
        if (s <= 0) {
            PyErr_SetString(PyExc_ValueError, "split: split_size must be positive");
            return NULL;
        }
        n = size == 0 ? 1 : (Py_ssize_t)((size + s - 1) / s);
        sizes = PyMem_Calloc((size_t)n, sizeof *sizes);
        if (!sizes) return PyErr_NoMemory();
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t left = size - (int64_t)i * s;
            sizes[i] = left < s ? left : s;
        }
    } else {
        PyObject *fast = PySequence_Fast(spec, "split: sizes must be an int or a list of ints");
        if (!fast) return NULL;
        n = PySequence_Fast_GET_SIZE(fast);
        sizes = PyMem_Calloc((size_t)(n ? n : 1), sizeof *sizes);
        if (!sizes) {
            Py_DECREF(fast);
            return PyErr_NoMemory();
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if (!cnpy_as_int64(PySequence_Fast_GET_ITEM(fast, i), &sizes[i])) {
                Py_DECREF(fast);
                PyMem_Free(sizes);
                return NULL;
            }
        Py_DECREF(fast);
    }
    if (n > INT32_MAX || n == 0) {
        PyMem_Free(sizes);
        PyErr_SetString(PyExc_ValueError, "split: bad number of pieces");
        return NULL;
    }
    cn_tensor **out = PyMem_Calloc((size_t)n, sizeof *out);
    if (!out) {
        PyMem_Free(sizes);
        return PyErr_NoMemory();
    }
    cnpy_wait_idle();
    cn_scope_begin();
    int rc = cn_split(x, d, sizes, (int)n, out);
    for (Py_ssize_t i = 0; rc >= 0 && i < n; i++) cn_keep(out[i]);
    cn_scope_end();
    PyMem_Free(sizes);
    if (rc < 0) {
        PyMem_Free(out);
        return cnpy_raise(rc);
    }
    PyObject *r = pieces_tuple(out, (int)n);
    PyMem_Free(out);
    return r;
}

static PyObject *m_unbind(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dim", NULL};
    int d = 0;
    if (!parse_kw(args, kw, "|i:unbind", kwlist, &d)) return NULL;
    cn_tensor *x = TT(self);
    int nd = cn_ndim(x);
    if (d < -nd || d >= nd) {
        PyErr_Format(PyExc_IndexError, "unbind: dim %d out of range for %d dims", d, nd);
        return NULL;
    }
    if (d < 0) d += nd;
    int64_t n = cn_shape(x)[d];
    PyObject *tup = PyTuple_New((Py_ssize_t)n);
    if (!tup) return NULL;
    for (int64_t i = 0; i < n; i++) {
        cn_tensor *r;
        CNPY_SCOPE_BEGIN();
        r = CNPY_CALL(cn_squeeze(cn_slice(x, d, i, i + 1, 1), d));
        CNPY_SCOPE_END_KEEP(r);
        PyObject *o = cnpy_wrap(r);
        if (!o) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, (Py_ssize_t)i, o);
    }
    return tup;
}

/* ---- gathers ---- */

static PyObject *m_gather(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dim", "index", NULL};
    int d;
    PyObject *idx;
    if (!parse_kw(args, kw, "iO!:gather", kwlist, &d, &Tensor_Type, &idx)) return NULL;
    return cnpy_wrap(CNPY_CALL(cn_gather(TT(self), d, TT(idx))));
}

static PyObject *m_index_select(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dim", "index", NULL};
    int d;
    PyObject *idx;
    if (!parse_kw(args, kw, "iO:index_select", kwlist, &d, &idx)) return NULL;
    cn_tensor *i = cnpy_as_tensor(idx, NULL);
    if (!i) return NULL;
    cn_tensor *r = CNPY_CALL(cn_index_select(TT(self), d, i));
    cn_release(i);
    return cnpy_wrap(r);
}

static PyObject *m_scatter_add(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dim", "index", "src", NULL};
    int d;
    PyObject *idx, *src;
    if (!parse_kw(args, kw, "iO!O!:scatter_add", kwlist, &d, &Tensor_Type, &idx,
                                     &Tensor_Type, &src))
        return NULL;
    return cnpy_wrap(CNPY_CALL(cn_scatter_add(TT(self), d, TT(idx), TT(src))));
}

PyMethodDef cnpy_ops_methods[] = {
    {"neg", m_neg, METH_NOARGS, NULL},
    {"negative", m_neg, METH_NOARGS, NULL},
    {"abs", m_abs, METH_NOARGS, NULL},
    {"absolute", m_abs, METH_NOARGS, NULL},
    {"sign", m_sign, METH_NOARGS, NULL},
    {"exp", m_exp, METH_NOARGS, NULL},
    {"log", m_log, METH_NOARGS, NULL},
    {"log2", m_log2, METH_NOARGS, NULL},
    {"log10", m_log10, METH_NOARGS, NULL},
    {"log1p", m_log1p, METH_NOARGS, NULL},
    {"expm1", m_expm1, METH_NOARGS, NULL},
    {"sqrt", m_sqrt, METH_NOARGS, NULL},
    {"rsqrt", m_rsqrt, METH_NOARGS, NULL},
    {"square", m_square, METH_NOARGS, NULL},
    {"reciprocal", m_reciprocal, METH_NOARGS, NULL},
    {"sin", m_sin, METH_NOARGS, NULL},
    {"cos", m_cos, METH_NOARGS, NULL},
    {"tan", m_tan, METH_NOARGS, NULL},
    {"asin", m_asin, METH_NOARGS, NULL},
    {"acos", m_acos, METH_NOARGS, NULL},
    {"atan", m_atan, METH_NOARGS, NULL},
    {"sinh", m_sinh, METH_NOARGS, NULL},
    {"cosh", m_cosh, METH_NOARGS, NULL},
    {"asinh", m_asinh, METH_NOARGS, NULL},
    {"acosh", m_acosh, METH_NOARGS, NULL},
    {"atanh", m_atanh, METH_NOARGS, NULL},
    {"arcsin", m_asin, METH_NOARGS, NULL},
    {"arccos", m_acos, METH_NOARGS, NULL},
    {"arctan", m_atan, METH_NOARGS, NULL},
    {"arcsinh", m_asinh, METH_NOARGS, NULL},
    {"arccosh", m_acosh, METH_NOARGS, NULL},
    {"arctanh", m_atanh, METH_NOARGS, NULL},
    {"atan2", m_atan2, METH_O, NULL},
    {"arctan2", m_atan2, METH_O, NULL},
    {"tanh", m_tanh, METH_NOARGS, NULL},
    {"sigmoid", m_sigmoid, METH_NOARGS, NULL},
    {"relu", m_relu, METH_NOARGS, NULL},
    {"silu", m_silu, METH_NOARGS, NULL},
    {"erf", m_erf, METH_NOARGS, NULL},
    {"floor", m_floor, METH_NOARGS, NULL},
    {"ceil", m_ceil, METH_NOARGS, NULL},
    {"round", m_round, METH_NOARGS, NULL},
    {"trunc", m_trunc, METH_NOARGS, NULL},
    {"logical_not", m_logical_not, METH_NOARGS, NULL},
    {"detach", m_detach, METH_NOARGS, "a leaf sharing the data, with no history"},
    {"leaky_relu", FN(m_leaky_relu), KW, NULL},
    {"elu", FN(m_elu), KW, NULL},
    {"gelu", FN(m_gelu), KW, NULL},
    {"softplus", FN(m_softplus), KW, NULL},
    {"hardtanh", FN(m_hardtanh), KW, NULL},
    {"sum", FN(m_sum), KW, "sum(dim=None, keepdim=False, dtype=None)"},
    {"mean", FN(m_mean), KW, "mean(dim=None, keepdim=False, dtype=None)"},
    {"prod", FN(m_prod), KW, NULL},
    {"amax", FN(m_amax), KW, NULL},
    {"amin", FN(m_amin), KW, NULL},
    {"logsumexp", FN(m_logsumexp), KW, NULL},
    {"max", FN(m_max), KW, "max(), max(dim, keepdim=False) -> (values, indices), max(other)"},
    {"min", FN(m_min), KW, NULL},
    {"argmax", FN(m_argmax), KW, NULL},
    {"argmin", FN(m_argmin), KW, NULL},
    {"var", FN(m_var), KW, "var(dim=None, unbiased=True, keepdim=False, correction=None)"},
    {"std", FN(m_std), KW, NULL},
    {"norm", FN(m_norm), KW, "norm(p='fro', dim=None, keepdim=False)"},
    {"all", FN(m_all), KW, NULL},
    {"any", FN(m_any), KW, NULL},
    {"count_nonzero", FN(m_count_nonzero), KW, NULL},
    {"cumsum", FN(m_cumsum), KW, NULL},
    {"softmax", FN(m_softmax), KW, "softmax(dim, dtype=None)"},
    {"log_softmax", FN(m_log_softmax), KW, NULL},
    {"reshape", m_reshape, METH_VARARGS, "reshape(*shape): a view when possible, else a copy"},
    {"view", m_view, METH_VARARGS, "view(*shape): a view, or an error"},
    {"view_as", m_view_as, METH_O, NULL},
    {"reshape_as", m_reshape_as, METH_O, NULL},
    {"flatten", FN(m_flatten), KW, "flatten(start_dim=0, end_dim=-1)"},
    {"ravel", m_ravel, METH_NOARGS, NULL},
    {"permute", m_permute, METH_VARARGS, NULL},
    {"transpose", m_transpose, METH_VARARGS, NULL},
    {"swapaxes", m_transpose, METH_VARARGS, NULL},
    {"t", m_t, METH_NOARGS, NULL},
    {"squeeze", m_squeeze, METH_VARARGS, NULL},
    {"unsqueeze", m_unsqueeze, METH_O, NULL},
    {"expand", m_expand, METH_VARARGS, NULL},
    {"expand_as", m_expand_as, METH_O, NULL},
    {"broadcast_to", m_broadcast_to, METH_O, NULL},
    {"narrow", m_narrow, METH_VARARGS, NULL},
    {"select", m_select, METH_VARARGS, NULL},
    {"flip", m_flip, METH_VARARGS, NULL},
    {"repeat", m_repeat, METH_VARARGS, NULL},
    {"tril", FN(m_tril), KW, NULL},
    {"triu", FN(m_triu), KW, NULL},
    {"chunk", FN(m_chunk), KW, NULL},
    {"split", FN(m_split), KW, NULL},
    {"unbind", FN(m_unbind), KW, NULL},
    {"gather", FN(m_gather), KW, NULL},
    {"index_select", FN(m_index_select), KW, NULL},
    {"scatter_add", FN(m_scatter_add), KW, NULL},
    {NULL, NULL, 0, NULL},
};

PyMethodDef cnpy_ops_functions[] = {
    {"cat", FN(f_cat), KW, "cat(tensors, dim=0)"},
    {"concat", FN(f_cat), KW, NULL},
    {"stack", FN(f_stack), KW, "stack(tensors, dim=0)"},
    {NULL, NULL, 0, NULL},
};

int cnpy_ops_init(PyObject *m) {
    minmax_type = PyStructSequence_NewType(&minmax_desc);
    return minmax_type ? 0 : -1;
}
