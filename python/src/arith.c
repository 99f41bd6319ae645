/* Arithmetic: the number slots (+ - * / // % ** @, unary -, abs), the
 * comparisons, their in-place forms, and the methods of the same ops
 * (add(other, alpha=), maximum, logical_and, where, clamp, ...). Python
 * scalars meet tensors with PyTorch's promotion (args.c). */
#include "common.h"

#include <math.h>
#include <string.h>

typedef enum {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_FLOORDIV, OP_MOD, OP_MAXIMUM, OP_MINIMUM,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_AND, OP_OR, OP_XOR, OP_MATMUL, OP_COUNT
} binop;

static cn_tensor *apply_op(binop op, cn_tensor *a, cn_tensor *b);

static cn_tensor *floordiv(cn_tensor *a, cn_tensor *b) {
    cn_dtype rt = cn_result_type(a, b);
    cn_tensor *r;
    CNPY_SCOPE_BEGIN();
    r = cn_floor(cn_div(a, b));
    if (r && !cn_dtype_is_float(rt)) r = cn_cast(r, rt);
    CNPY_SCOPE_END_KEEP(r);
    return r;
}

/* Python's (and PyTorch's) remainder: the sign of the divisor. */
static cn_tensor *remainder_(cn_tensor *a, cn_tensor *b) {
    cn_dtype rt = cn_result_type(a, b);
    cn_tensor *r;
    CNPY_SCOPE_BEGIN();
    r = cn_sub(a, cn_mul(cn_floor(cn_div(a, b)), b));
    if (r && cn_tensor_dtype(r) != rt) r = cn_cast(r, rt);
    CNPY_SCOPE_END_KEEP(r);
    return r;
}

static cn_tensor *apply(binop op, cn_tensor *a, cn_tensor *b) {
    if (op != OP_MATMUL && cn_numel(a) + cn_numel(b) >= 16 * CNPY_NOGIL_NUMEL) {
        /* A big elementwise op: the same, without the GIL. */
        cnpy_nogil_begin();
        cn_tensor *r = apply_op(op, a, b);
        cnpy_nogil_end();
        return r;
    }
    return apply_op(op, a, b);
}

static cn_tensor *apply_op(binop op, cn_tensor *a, cn_tensor *b) {
    switch (op) {
    case OP_ADD: return CNPY_CALL(cn_add(a, b));
    case OP_SUB: return CNPY_CALL(cn_sub(a, b));
    case OP_MUL: return CNPY_CALL(cn_mul(a, b));
    case OP_DIV: return CNPY_CALL(cn_div(a, b));
    case OP_POW: return CNPY_CALL(cn_pow(a, b));
    case OP_FLOORDIV: return floordiv(a, b);
    case OP_MOD: return remainder_(a, b);
    case OP_MAXIMUM: return CNPY_CALL(cn_maximum(a, b));
    case OP_MINIMUM: return CNPY_CALL(cn_minimum(a, b));
    case OP_EQ: return CNPY_CALL(cn_eq(a, b));
    case OP_NE: return CNPY_CALL(cn_ne(a, b));
    case OP_LT: return CNPY_CALL(cn_lt(a, b));
    case OP_LE: return CNPY_CALL(cn_le(a, b));
    case OP_GT: return CNPY_CALL(cn_gt(a, b));
    case OP_GE: return CNPY_CALL(cn_ge(a, b));
    case OP_AND: return CNPY_CALL(cn_logical_and(a, b));
    case OP_OR: return CNPY_CALL(cn_logical_or(a, b));
    case OP_XOR: return CNPY_CALL(cn_logical_xor(a, b));
    case OP_MATMUL: return CNPY_CALL_IF_LONG(16 * (cn_numel(a) + cn_numel(b)), cn_matmul(a, b));
    default: return NULL;
    }
}

/* a op b where at least one of them is a Tensor. Returns a new reference, or
 * NULL with an exception, or NULL with *notimpl set when the other operand
 * is not something a tensor computes with. */
static cn_tensor *binary(binop op, PyObject *a, PyObject *b, bool *notimpl) {
    *notimpl = false;
    bool ta = Tensor_Check(a), tb = Tensor_Check(b);
    cn_tensor *r;
    if (ta && tb) {
        r = apply(op, TT(a), TT(b));
        if (!r) cnpy_raise(0);
        return r;
    }
    PyObject *other = ta ? b : a;
    cn_tensor *x = ta ? TT(a) : TT(b);
    bool reflected = !ta;
    double v;
    long long iv;
    int kind = cnpy_scalar_kind(other, &v, &iv);
    if (!kind && PyObject_CheckBuffer(other) && !PyBytes_Check(other) && !PyByteArray_Check(other)) {
        /* A NumPy array (numpy defers to tensors: __array_priority__). */
        cn_tensor *o = cnpy_tensor_from_data(other, false, CN_F32);
        if (!o) return NULL;
        r = reflected ? apply(op, o, x) : apply(op, x, o);
        cn_release(o);
        if (!r) cnpy_raise(0);
        return r;
    }
    if (!kind || op == OP_MATMUL) {
        *notimpl = true;
        return NULL;
    }
    /* The common case, a float tensor and a number: one call. */
    if (cn_dtype_is_float(cn_tensor_dtype(x)) && kind != CNPY_BOOL) {
        r = NULL;
        switch (op) {
        case OP_ADD: r = CNPY_CALL(cn_add_scalar(x, v)); break;
        case OP_SUB: r = reflected ? CNPY_CALL(cn_rsub_scalar(x, v)) : CNPY_CALL(cn_sub_scalar(x, v)); break;
        case OP_MUL: r = CNPY_CALL(cn_mul_scalar(x, v)); break;
        case OP_DIV: if (!reflected) r = CNPY_CALL(cn_div_scalar(x, v)); break;
        case OP_POW: if (!reflected) r = CNPY_CALL(cn_pow_scalar(x, v)); break;
        default: break;
        }
        if (r) return r;
        if (*cn_last_error() && (op == OP_ADD || op == OP_SUB || op == OP_MUL ||
                                 (!reflected && (op == OP_DIV || op == OP_POW)))) {
            cnpy_raise(0);
            return NULL;
        }
    }
    cn_tensor *s = cnpy_scalar_tensor(x, kind, v, iv);
    if (!s) {
        cnpy_raise(0);
        return NULL;
    }
    r = reflected ? apply(op, s, x) : apply(op, x, s);
    cn_release(s);
    if (!r) cnpy_raise(0);
    return r;
}

static PyObject *binary_obj(binop op, PyObject *a, PyObject *b) {
    bool notimpl;
    cn_tensor *r = binary(op, a, b, &notimpl);
    if (notimpl) Py_RETURN_NOTIMPLEMENTED;
    if (!r) return NULL;
    return cnpy_wrap(r);
}

/* In place: x op= other writes the result into x's memory (views of x see
 * it). Where the op must be recorded for autograd (x or the operand
 * requires grad), the library has no in-place op that rebases a tensor's
 * history, so the Python object takes the out-of-place result instead
 * (cnpy_rebase): the values and gradients are PyTorch's, but other views of
 * x's memory do not see the new values. A leaf that requires grad is
 * refused, as PyTorch does. */
int cnpy_check_inplace(cn_tensor *x, PyObject *other) {
    (void)other;
    if (cn_is_grad_enabled() && cn_requires_grad(x) && cn_is_leaf(x)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "a leaf Variable that requires grad is being used in an in-place "
                        "operation (write x = x + y, or change it under chutney.no_grad())");
        return -1;
    }
    return 0;
}

bool cnpy_records_inplace(cn_tensor *x, cn_tensor *r) {
    /* A symbolic tensor (chutney.compile's and the ONNX export's tracing)
     * has no memory to write into: the traced graph takes the result. */
    if (cn_is_symbolic_tensor(x) || (r && cn_is_symbolic_tensor(r))) return true;
    return cn_is_grad_enabled() && (cn_requires_grad(x) || (r && cn_requires_grad(r)));
}

/* self's object takes r (its reference is consumed): r broadcast to self's
 * shape and cast to its dtype, as a copy into self would be; r is copied
 * unless fresh (a result no one else holds). */
PyObject *cnpy_rebase(PyObject *self, cn_tensor *r, bool fresh) {
    cn_tensor *x = TT(self);
    int nd = cn_ndim(x);
    const int64_t *xs = cn_shape(x);
    bool same = cn_ndim(r) == nd && !memcmp(cn_shape(r), xs, sizeof(int64_t) * (size_t)nd);
    cn_tensor *y = r;
    if (!same || cn_tensor_dtype(r) != cn_tensor_dtype(x) || !fresh) {
        CNPY_SCOPE_BEGIN();
        bool cast = y && cn_tensor_dtype(y) != cn_tensor_dtype(x);
        if (!same) y = cn_broadcast_to(y, nd, xs);
        if (cast) y = cn_cast(y, cn_tensor_dtype(x));
        /* Never an operand's memory (a broadcast view shares it): later
         * writes into self must not reach it. */
        if (!cast && (!fresh || !same)) y = cn_clone(y);
        CNPY_SCOPE_END_KEEP(y);
        cn_release(r);
        if (!y) return cnpy_raise(0);
    }
    ((TensorObject *)self)->t = y;
    cn_release(x);
    Py_INCREF(self);
    return self;
}

static PyObject *write_into(PyObject *self, cn_tensor *r) {
    cn_tensor *x = TT(self);
    cn_dtype rd = cn_tensor_dtype(r), xd = cn_tensor_dtype(x);
    if (cnpy_dtype_category(rd) > cnpy_dtype_category(xd)) {
        cn_release(r);
        PyErr_Format(PyExc_TypeError, "result type %s can't be cast to the desired output type %s",
                     cn_dtype_name(rd), cn_dtype_name(xd));
        return NULL;
    }
    if (cnpy_records_inplace(x, r)) return cnpy_rebase(self, r, true);
    int rc;
    CNPY_INT(rc, cn_copy_(x, r));
    cn_release(r);
    if (rc < 0) return cnpy_raise(rc);
    Py_INCREF(self);
    return self;
}

static PyObject *inplace(binop op, PyObject *self, PyObject *other) {
    if (!Tensor_Check(self)) Py_RETURN_NOTIMPLEMENTED;
    if (cnpy_check_inplace(TT(self), other) < 0) return NULL;
    bool notimpl;
    cn_tensor *r = binary(op, self, other, &notimpl);
    if (notimpl) Py_RETURN_NOTIMPLEMENTED;
    if (!r) return NULL;
    return write_into(self, r);
}

/* ---- number slots ---- */

static PyObject *nb_add(PyObject *a, PyObject *b) { return binary_obj(OP_ADD, a, b); }
static PyObject *nb_sub(PyObject *a, PyObject *b) { return binary_obj(OP_SUB, a, b); }
static PyObject *nb_mul(PyObject *a, PyObject *b) { return binary_obj(OP_MUL, a, b); }
static PyObject *nb_div(PyObject *a, PyObject *b) { return binary_obj(OP_DIV, a, b); }
static PyObject *nb_floordiv(PyObject *a, PyObject *b) { return binary_obj(OP_FLOORDIV, a, b); }
static PyObject *nb_mod(PyObject *a, PyObject *b) { return binary_obj(OP_MOD, a, b); }
static PyObject *nb_matmul(PyObject *a, PyObject *b) { return binary_obj(OP_MATMUL, a, b); }
static PyObject *nb_and(PyObject *a, PyObject *b) { return binary_obj(OP_AND, a, b); }
static PyObject *nb_or(PyObject *a, PyObject *b) { return binary_obj(OP_OR, a, b); }
static PyObject *nb_xor(PyObject *a, PyObject *b) { return binary_obj(OP_XOR, a, b); }
static PyObject *nb_pow(PyObject *a, PyObject *b, PyObject *mod) {
    if (mod != Py_None) {
        PyErr_SetString(PyExc_TypeError, "pow() with a modulus is not supported for tensors");
        return NULL;
    }
    return binary_obj(OP_POW, a, b);
}

static PyObject *nb_iadd(PyObject *a, PyObject *b) { return inplace(OP_ADD, a, b); }
static PyObject *nb_isub(PyObject *a, PyObject *b) { return inplace(OP_SUB, a, b); }
static PyObject *nb_imul(PyObject *a, PyObject *b) { return inplace(OP_MUL, a, b); }
static PyObject *nb_idiv(PyObject *a, PyObject *b) { return inplace(OP_DIV, a, b); }
static PyObject *nb_ifloordiv(PyObject *a, PyObject *b) { return inplace(OP_FLOORDIV, a, b); }
static PyObject *nb_imod(PyObject *a, PyObject *b) { return inplace(OP_MOD, a, b); }
static PyObject *nb_iand(PyObject *a, PyObject *b) { return inplace(OP_AND, a, b); }
static PyObject *nb_ior(PyObject *a, PyObject *b) { return inplace(OP_OR, a, b); }
static PyObject *nb_ixor(PyObject *a, PyObject *b) { return inplace(OP_XOR, a, b); }
static PyObject *nb_ipow(PyObject *a, PyObject *b, PyObject *mod) {
    if (mod != Py_None) {
        PyErr_SetString(PyExc_TypeError, "pow() with a modulus is not supported for tensors");
        return NULL;
    }
    return inplace(OP_POW, a, b);
}

static PyObject *nb_neg(PyObject *a) { return cnpy_wrap(CNPY_CALL(cn_neg(TT(a)))); }
static PyObject *nb_pos(PyObject *a) {
    Py_INCREF(a);
    return a;
}
static PyObject *nb_abs(PyObject *a) { return cnpy_wrap(CNPY_CALL(cn_abs(TT(a)))); }
static PyObject *nb_invert(PyObject *a) {
    cn_tensor *t = TT(a);
    if (cn_tensor_dtype(t) != CN_BOOL) {
        PyErr_SetString(PyExc_TypeError, "~ (bitwise not) is supported for bool tensors only");
        return NULL;
    }
    return cnpy_wrap(CNPY_CALL(cn_logical_not(t)));
}

/* Conversions of one-element tensors to Python numbers. */
static int one_element(cn_tensor *t, const char *what) {
    if (cn_numel(t) != 1) {
        PyErr_Format(PyExc_RuntimeError, "%s of a tensor with %lld elements is ambiguous (it needs one)",
                     what, (long long)cn_numel(t));
        return -1;
    }
    return 0;
}

static int nb_bool(PyObject *a) {
    cn_tensor *t = TT(a);
    if (one_element(t, "the truth value") < 0) return -1;
    PyObject *v = cnpy_item(t);
    if (!v) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

static PyObject *nb_float(PyObject *a) {
    cn_tensor *t = TT(a);
    if (one_element(t, "float()") < 0) return NULL;
    PyObject *v = cnpy_item(t);
    if (!v) return NULL;
    PyObject *r = PyNumber_Float(v);
    Py_DECREF(v);
    return r;
}

static PyObject *nb_int(PyObject *a) {
    cn_tensor *t = TT(a);
    if (one_element(t, "int()") < 0) return NULL;
    PyObject *v = cnpy_item(t);
    if (!v) return NULL;
    PyObject *r = PyNumber_Long(v);
    Py_DECREF(v);
    return r;
}

static PyObject *nb_index(PyObject *a) {
    cn_tensor *t = TT(a);
    cn_dtype dt = cn_tensor_dtype(t);
    if (cn_dtype_is_float(dt) || cn_numel(t) != 1) {
        PyErr_SetString(PyExc_TypeError,
                        "only integer tensors of a single element can be converted to an index");
        return NULL;
    }
    PyObject *v = cnpy_item(t);
    if (!v) return NULL;
    PyObject *r = PyNumber_Long(v);
    Py_DECREF(v);
    return r;
}

PyNumberMethods cnpy_tensor_as_number = {
    .nb_add = nb_add,
    .nb_subtract = nb_sub,
    .nb_multiply = nb_mul,
    .nb_remainder = nb_mod,
    .nb_power = nb_pow,
    .nb_negative = nb_neg,
    .nb_positive = nb_pos,
    .nb_absolute = nb_abs,
    .nb_bool = nb_bool,
    .nb_invert = nb_invert,
    .nb_and = nb_and,
    .nb_xor = nb_xor,
    .nb_or = nb_or,
    .nb_int = nb_int,
    .nb_float = nb_float,
    .nb_inplace_add = nb_iadd,
    .nb_inplace_subtract = nb_isub,
    .nb_inplace_multiply = nb_imul,
    .nb_inplace_remainder = nb_imod,
    .nb_inplace_power = nb_ipow,
    .nb_inplace_and = nb_iand,
    .nb_inplace_xor = nb_ixor,
    .nb_inplace_or = nb_ior,
    .nb_floor_divide = nb_floordiv,
    .nb_true_divide = nb_div,
    .nb_inplace_floor_divide = nb_ifloordiv,
    .nb_inplace_true_divide = nb_idiv,
    .nb_index = nb_index,
    .nb_matrix_multiply = nb_matmul,
};

PyObject *cnpy_richcompare(PyObject *a, PyObject *b, int cmp) {
    binop op;
    switch (cmp) {
    case Py_EQ: op = OP_EQ; break;
    case Py_NE: op = OP_NE; break;
    case Py_LT: op = OP_LT; break;
    case Py_LE: op = OP_LE; break;
    case Py_GT: op = OP_GT; break;
    default: op = OP_GE; break;
    }
    return binary_obj(op, a, b);
}

/* ---- methods ---- */

/* The operand of a method: tensors and numbers; anything else is an error. */
static PyObject *method_binary(binop op, PyObject *self, PyObject *other) {
    bool notimpl;
    cn_tensor *r = binary(op, self, other, &notimpl);
    if (notimpl) {
        cn_tensor *o = cnpy_as_tensor(other, TT(self));
        if (!o) return NULL;
        r = apply(op, TT(self), o);
        cn_release(o);
        if (!r) return cnpy_raise(0);
    }
    if (!r) return NULL;
    return cnpy_wrap(r);
}

static PyObject *method_inplace(binop op, PyObject *self, PyObject *other) {
    if (cnpy_check_inplace(TT(self), other) < 0) return NULL;
    bool notimpl;
    cn_tensor *r = binary(op, self, other, &notimpl);
    if (notimpl) {
        cn_tensor *o = cnpy_as_tensor(other, TT(self));
        if (!o) return NULL;
        r = apply(op, TT(self), o);
        cn_release(o);
        if (!r) return cnpy_raise(0);
    }
    if (!r) return NULL;
    return write_into(self, r);
}

/* add(other, alpha=1) and sub(other, alpha=1): self +- alpha * other. */
static PyObject *add_sub(binop op, PyObject *self, PyObject *args, PyObject *kw, bool in_place) {
    static char *kwlist[] = {"other", "alpha", NULL};
    PyObject *other, *alpha = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwlist, &other, &alpha)) return NULL;
    PyObject *scaled = NULL;
    int overflow = 0;
    if (alpha && !(PyLong_CheckExact(alpha) && PyLong_AsLongAndOverflow(alpha, &overflow) == 1)) {
        scaled = PyNumber_Multiply(other, alpha);
        if (!scaled) return NULL;
        other = scaled;
    }
    PyObject *r = in_place ? method_inplace(op, self, other) : method_binary(op, self, other);
    Py_XDECREF(scaled);
    return r;
}

static PyObject *m_add(PyObject *s, PyObject *a, PyObject *k) { return add_sub(OP_ADD, s, a, k, false); }
static PyObject *m_sub(PyObject *s, PyObject *a, PyObject *k) { return add_sub(OP_SUB, s, a, k, false); }
static PyObject *m_add_(PyObject *s, PyObject *a, PyObject *k) { return add_sub(OP_ADD, s, a, k, true); }
static PyObject *m_sub_(PyObject *s, PyObject *a, PyObject *k) { return add_sub(OP_SUB, s, a, k, true); }

/* div(other, rounding_mode=None | 'floor' | 'trunc') */
static PyObject *m_div(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"other", "rounding_mode", NULL};
    PyObject *other;
    const char *mode = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|z:div", kwlist, &other, &mode)) return NULL;
    if (!mode) return method_binary(OP_DIV, self, other);
    if (strcmp(mode, "floor") == 0) return method_binary(OP_FLOORDIV, self, other);
    if (strcmp(mode, "trunc") != 0) {
        PyErr_Format(PyExc_ValueError, "div: rounding_mode is None, 'floor' or 'trunc', not '%s'", mode);
        return NULL;
    }
    cn_tensor *o = cnpy_as_tensor(other, TT(self));
    if (!o) return NULL;
    cn_dtype rt = cn_result_type(TT(self), o);
    cn_tensor *r;
    CNPY_SCOPE_BEGIN();
    cn_tensor *q = cn_div(TT(self), o);
    /* trunc(q) = sign(q) * floor(|q|) */
    r = cn_mul(cn_sign(q), cn_floor(cn_abs(q)));
    if (r && !cn_dtype_is_float(rt)) r = cn_cast(r, rt);
    CNPY_SCOPE_END_KEEP(r);
    cn_release(o);
    return cnpy_wrap(r);
}

#define BIN_METHOD(name, op)                                                              \
    static PyObject *m_##name(PyObject *self, PyObject *other) {                          \
        return method_binary(op, self, other);                                            \
    }
#define BIN_METHOD_(name, op)                                                             \
    static PyObject *m_##name##_(PyObject *self, PyObject *other) {                       \
        return method_inplace(op, self, other);                                           \
    }
BIN_METHOD(mul, OP_MUL)
BIN_METHOD(true_divide, OP_DIV)
BIN_METHOD(pow, OP_POW)
BIN_METHOD(floor_divide, OP_FLOORDIV)
BIN_METHOD(remainder, OP_MOD)
BIN_METHOD(maximum, OP_MAXIMUM)
BIN_METHOD(minimum, OP_MINIMUM)
BIN_METHOD(eq, OP_EQ)
BIN_METHOD(ne, OP_NE)
BIN_METHOD(lt, OP_LT)
BIN_METHOD(le, OP_LE)
BIN_METHOD(gt, OP_GT)
BIN_METHOD(ge, OP_GE)
BIN_METHOD(logical_and, OP_AND)
BIN_METHOD(logical_or, OP_OR)
BIN_METHOD(logical_xor, OP_XOR)
BIN_METHOD(matmul, OP_MATMUL)
BIN_METHOD_(mul, OP_MUL)
BIN_METHOD_(div, OP_DIV)
BIN_METHOD_(pow, OP_POW)

static PyObject *m_rsub(PyObject *self, PyObject *other) {
    cn_tensor *o = cnpy_as_tensor(other, TT(self));
    if (!o) return NULL;
    cn_tensor *r = CNPY_CALL(cn_sub(o, TT(self)));
    cn_release(o);
    return cnpy_wrap(r);
}

/* mm and bmm: matmul restricted to 2-D and 3-D operands, as PyTorch. */
static PyObject *checked_matmul(PyObject *self, PyObject *other, int rank, const char *name) {
    if (!Tensor_Check(other)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a Tensor", name);
        return NULL;
    }
    if (cn_ndim(TT(self)) != rank || cn_ndim(TT(other)) != rank) {
        PyErr_Format(PyExc_ValueError, "%s: expected %d-D tensors, got %d-D and %d-D", name, rank,
                     cn_ndim(TT(self)), cn_ndim(TT(other)));
        return NULL;
    }
    return cnpy_wrap(CNPY_CALL(cn_matmul(TT(self), TT(other))));
}
static PyObject *m_mm(PyObject *self, PyObject *other) { return checked_matmul(self, other, 2, "mm"); }
static PyObject *m_bmm(PyObject *self, PyObject *other) { return checked_matmul(self, other, 3, "bmm"); }
static PyObject *m_dot(PyObject *self, PyObject *other) { return checked_matmul(self, other, 1, "dot"); }

/* where(cond, a, b): a and b may be numbers. */
static cn_tensor *where3(PyObject *cond, PyObject *a, PyObject *b) {
    cn_tensor *c = cnpy_as_tensor(cond, NULL);
    if (!c) return NULL;
    cn_tensor *ta = NULL, *tb = NULL, *r = NULL;
    /* A number takes the other operand's dtype when that is a tensor. */
    if (Tensor_Check(a)) ta = cn_retain(TT(a));
    if (Tensor_Check(b)) tb = cn_retain(TT(b));
    if (!ta) ta = cnpy_as_tensor(a, tb);
    if (ta && !tb) tb = cnpy_as_tensor(b, ta);
    if (ta && tb) {
        r = CNPY_CALL(cn_where(c, ta, tb));
        if (!r) cnpy_raise(0);
    }
    cn_release(c);
    cn_release(ta);
    cn_release(tb);
    return r;
}

static PyObject *m_where(PyObject *self, PyObject *args) {
    PyObject *cond, *other;
    if (!PyArg_ParseTuple(args, "OO:where", &cond, &other)) return NULL;
    cn_tensor *r = where3(cond, self, other);
    return r ? cnpy_wrap(r) : NULL;
}

static PyObject *f_where(PyObject *m, PyObject *args) {
    PyObject *cond, *a, *b;
    if (!PyArg_ParseTuple(args, "OOO:where", &cond, &a, &b)) return NULL;
    cn_tensor *r = where3(cond, a, b);
    return r ? cnpy_wrap(r) : NULL;
}

/* masked_fill(mask, value): where(mask, value, self) in self's dtype. */
static cn_tensor *masked_fill(PyObject *self, PyObject *mask, PyObject *value) {
    cn_tensor *x = TT(self);
    cn_tensor *m = cnpy_as_tensor(mask, NULL);
    if (!m) return NULL;
    cn_tensor *v, *r;
    if (Tensor_Check(value)) {
        v = CNPY_CALL(cn_cast(TT(value), cn_tensor_dtype(x)));
    } else {
        double d;
        long long iv;
        int k = cnpy_scalar_kind(value, &d, &iv);
        if (!k) {
            cn_release(m);
            PyErr_SetString(PyExc_TypeError, "masked_fill: value must be a number or a Tensor");
            return NULL;
        }
        if (cn_tensor_dtype(x) == CN_I64) {
            int64_t i = k == CNPY_FLOAT ? (int64_t)d : (int64_t)iv;
            v = CNPY_CALL(cn_from_data(CN_I64, 0, NULL, &i));
        } else {
            v = CNPY_CALL(cn_scalar(cn_tensor_dtype(x), d));
        }
    }
    r = v ? CNPY_CALL(cn_where(m, v, x)) : NULL;
    cn_release(m);
    cn_release(v);
    if (!r) cnpy_raise(0);
    return r;
}

static PyObject *m_masked_fill(PyObject *self, PyObject *args) {
    PyObject *mask, *value;
    if (!PyArg_ParseTuple(args, "OO:masked_fill", &mask, &value)) return NULL;
    cn_tensor *r = masked_fill(self, mask, value);
    return r ? cnpy_wrap(r) : NULL;
}

static PyObject *m_masked_fill_(PyObject *self, PyObject *args) {
    PyObject *mask, *value;
    if (!PyArg_ParseTuple(args, "OO:masked_fill_", &mask, &value)) return NULL;
    if (cnpy_check_inplace(TT(self), value) < 0) return NULL;
    cn_tensor *r = masked_fill(self, mask, value);
    return r ? write_into(self, r) : NULL;
}

/* clamp(min=None, max=None); bounds may be tensors (then maximum/minimum). */
static cn_tensor *clamp(PyObject *self, PyObject *lo, PyObject *hi) {
    cn_tensor *x = TT(self);
    if ((lo && Tensor_Check(lo)) || (hi && Tensor_Check(hi))) {
        /* Operands are made before the scope: only cn_* results belong in it. */
        cn_tensor *l = NULL, *h = NULL, *r = NULL;
        if (lo && lo != Py_None && !(l = cnpy_as_tensor(lo, x))) return NULL;
        if (hi && hi != Py_None && !(h = cnpy_as_tensor(hi, x))) {
            cn_release(l);
            return NULL;
        }
        CNPY_SCOPE_BEGIN();
        r = x;
        if (l) r = cn_maximum(r, l);
        if (h) r = cn_minimum(r, h);
        if (r == x) r = cn_clone(x);
        CNPY_SCOPE_END_KEEP(r);
        cn_release(l);
        cn_release(h);
        if (!r) cnpy_raise(0);
        return r;
    }
    double l = -INFINITY, h = INFINITY;
    if (lo && lo != Py_None) {
        l = PyFloat_AsDouble(lo);
        if (l == -1.0 && PyErr_Occurred()) return NULL;
    }
    if (hi && hi != Py_None) {
        h = PyFloat_AsDouble(hi);
        if (h == -1.0 && PyErr_Occurred()) return NULL;
    }
    if (isinf(l) && l < 0 && isinf(h) && h > 0 && (!lo || lo == Py_None) && (!hi || hi == Py_None)) {
        PyErr_SetString(PyExc_ValueError, "clamp: at least one of min and max must be given");
        return NULL;
    }
    cn_tensor *r = CNPY_CALL(cn_clamp(x, l, h));
    if (!r) cnpy_raise(0);
    return r;
}

static PyObject *m_clamp(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"min", "max", NULL};
    PyObject *lo = NULL, *hi = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:clamp", kwlist, &lo, &hi)) return NULL;
    cn_tensor *r = clamp(self, lo, hi);
    return r ? cnpy_wrap(r) : NULL;
}

static PyObject *m_clamp_(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"min", "max", NULL};
    PyObject *lo = NULL, *hi = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:clamp_", kwlist, &lo, &hi)) return NULL;
    if (cnpy_check_inplace(TT(self), NULL) < 0) return NULL;
    cn_tensor *r = clamp(self, lo, hi);
    return r ? write_into(self, r) : NULL;
}

/* copy_(src), fill_(value), zero_(): in place, not recorded. */
static PyObject *m_copy_(PyObject *self, PyObject *src) {
    if (cnpy_check_inplace(TT(self), src) < 0) return NULL;
    cn_tensor *s = cnpy_as_tensor(src, TT(self));
    if (!s) return NULL;
    if (cnpy_records_inplace(TT(self), s)) return cnpy_rebase(self, s, false);
    int rc;
    CNPY_INT(rc, cn_copy_(TT(self), s));
    cn_release(s);
    if (rc < 0) return cnpy_raise(rc);
    Py_INCREF(self);
    return self;
}

static PyObject *m_fill_(PyObject *self, PyObject *value) {
    if (cnpy_check_inplace(TT(self), value) < 0) return NULL;
    if (Tensor_Check(value)) return m_copy_(self, value);
    double v;
    long long iv;
    if (!cnpy_scalar_kind(value, &v, &iv)) {
        PyErr_SetString(PyExc_TypeError, "fill_: value must be a number");
        return NULL;
    }
    if (cnpy_records_inplace(TT(self), NULL)) {
        /* A constant from here on: its history ends. */
        cn_tensor *c = CNPY_CALL(cn_full_like(TT(self), v));
        return c ? cnpy_rebase(self, c, true) : cnpy_raise(0);
    }
    int rc;
    CNPY_INT(rc, cn_fill_(TT(self), v));
    if (rc < 0) return cnpy_raise(rc);
    Py_INCREF(self);
    return self;
}

static PyObject *m_zero_(PyObject *self, PyObject *unused) {
    if (cnpy_check_inplace(TT(self), NULL) < 0) return NULL;
    if (cnpy_records_inplace(TT(self), NULL)) {
        cn_tensor *c = CNPY_CALL(cn_zeros_like(TT(self)));
        return c ? cnpy_rebase(self, c, true) : cnpy_raise(0);
    }
    int rc;
    CNPY_INT(rc, cn_fill_(TT(self), 0));
    if (rc < 0) return cnpy_raise(rc);
    Py_INCREF(self);
    return self;
}

PyMethodDef cnpy_arith_methods[] = {
    {"add", (PyCFunction)(void (*)(void))m_add, METH_VARARGS | METH_KEYWORDS, "add(other, alpha=1)"},
    {"sub", (PyCFunction)(void (*)(void))m_sub, METH_VARARGS | METH_KEYWORDS, "sub(other, alpha=1)"},
    {"subtract", (PyCFunction)(void (*)(void))m_sub, METH_VARARGS | METH_KEYWORDS, NULL},
    {"add_", (PyCFunction)(void (*)(void))m_add_, METH_VARARGS | METH_KEYWORDS, NULL},
    {"sub_", (PyCFunction)(void (*)(void))m_sub_, METH_VARARGS | METH_KEYWORDS, NULL},
    {"mul", m_mul, METH_O, NULL},
    {"multiply", m_mul, METH_O, NULL},
    {"mul_", m_mul_, METH_O, NULL},
    {"div", (PyCFunction)(void (*)(void))m_div, METH_VARARGS | METH_KEYWORDS,
     "div(other, rounding_mode=None)"},
    {"divide", (PyCFunction)(void (*)(void))m_div, METH_VARARGS | METH_KEYWORDS, NULL},
    {"true_divide", m_true_divide, METH_O, NULL},
    {"div_", m_div_, METH_O, NULL},
    {"pow", m_pow, METH_O, NULL},
    {"pow_", m_pow_, METH_O, NULL},
    {"floor_divide", m_floor_divide, METH_O, NULL},
    {"remainder", m_remainder, METH_O, NULL},
    {"rsub", m_rsub, METH_O, "other - self"},
    {"maximum", m_maximum, METH_O, NULL},
    {"minimum", m_minimum, METH_O, NULL},
    {"eq", m_eq, METH_O, NULL},
    {"ne", m_ne, METH_O, NULL},
    {"lt", m_lt, METH_O, NULL},
    {"le", m_le, METH_O, NULL},
    {"gt", m_gt, METH_O, NULL},
    {"ge", m_ge, METH_O, NULL},
    {"greater", m_gt, METH_O, NULL},
    {"less", m_lt, METH_O, NULL},
    {"logical_and", m_logical_and, METH_O, NULL},
    {"logical_or", m_logical_or, METH_O, NULL},
    {"logical_xor", m_logical_xor, METH_O, NULL},
    {"matmul", m_matmul, METH_O, NULL},
    {"mm", m_mm, METH_O, NULL},
    {"bmm", m_bmm, METH_O, NULL},
    {"dot", m_dot, METH_O, NULL},
    {"where", m_where, METH_VARARGS, "where(condition, other): self where condition, else other"},
    {"masked_fill", m_masked_fill, METH_VARARGS, NULL},
    {"masked_fill_", m_masked_fill_, METH_VARARGS, NULL},
    {"clamp", (PyCFunction)(void (*)(void))m_clamp, METH_VARARGS | METH_KEYWORDS, NULL},
    {"clip", (PyCFunction)(void (*)(void))m_clamp, METH_VARARGS | METH_KEYWORDS, NULL},
    {"clamp_", (PyCFunction)(void (*)(void))m_clamp_, METH_VARARGS | METH_KEYWORDS, NULL},
    {"copy_", m_copy_, METH_O, "copy_(src): src's values (broadcast, cast) into self"},
    {"fill_", m_fill_, METH_O, NULL},
    {"zero_", m_zero_, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyMethodDef cnpy_arith_functions[] = {
    {"where", f_where, METH_VARARGS, "where(condition, input, other)"},
    {NULL, NULL, 0, NULL},
};
