/* The chutney._C extension: declarations shared by its source files.
 *
 * Ownership. The binding calls the library with no cn scope open, so every
 * tensor a cn_* function returns is owned by the caller: it is wrapped at once
 * in a Tensor object (cnpy_wrap), which holds that one reference and drops it
 * in tp_dealloc with cn_release. Where the binding composes several calls it
 * opens a scope around them and moves the final result out with cn_keep, so
 * the temporaries are released at cn_scope_end whatever happened (CNPY_SCOPE_*
 * below). Borrowed tensors (a .grad, a module's parameter, a checkpoint's
 * entry) are retained before they are wrapped.
 *
 * Threads. The library's tensor reference counts and graph records are not
 * synchronised, so only one thread may be inside it at a time. The GIL
 * serialises callers, and long kernels (matrix products, convolutions, big
 * reductions, backward, optimiser steps, file I/O) run without the GIL so
 * other Python threads can go on with Python code. While one does, a
 * "busy" flag is set: every other entry into the library first waits, with
 * the GIL released, until the flag clears (cnpy_wait_idle, which TT() and
 * CNPY_CALL call). A thread that passed that check while holding the GIL can
 * use the library until it releases the GIL, since a no-GIL section only
 * starts while holding it (gil.c). */
#ifndef CNPY_COMMON_H
#define CNPY_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <chutney.h>

#include <stdbool.h>
#include <stdint.h>

/* ---- the Tensor type (tensor.c) ---- */

typedef struct {
    PyObject_HEAD
    cn_tensor *t; /* one reference, never NULL once constructed */
    PyObject *weakreflist;
} TensorObject;

extern PyTypeObject Tensor_Type;
extern PyTypeObject Size_Type;

/* ---- one thread in the library at a time (gil.c) ---- */

extern _Atomic int cnpy_busy;              /* a thread runs the library without the GIL */
extern _Thread_local int cnpy_in_nogil;    /* this thread is that one */
extern _Atomic int cnpy_pending_releases;  /* from_numpy buffers to release (see convert.c) */
void cnpy_wait_idle_slow(void);
void cnpy_drain_releases(void);
/* Before touching the library: wait (GIL released) while another thread
 * runs it without the GIL. */
static inline void cnpy_wait_idle(void) {
    if (__builtin_expect(cnpy_busy != 0, 0) && !cnpy_in_nogil) cnpy_wait_idle_slow();
}
/* Enter / leave a no-GIL section (the GIL is held on entry and on return). */
void cnpy_nogil_begin(void);
void cnpy_nogil_end(void);

#define Tensor_Check(o) PyObject_TypeCheck((o), &Tensor_Type)
/* The tensor of a Tensor object; checks the library is free (see above). */
#define TT(o) (cnpy_wait_idle(), ((TensorObject *)(o))->t)

/* Wraps t (taking its one reference) in a new Tensor; NULL t raises the
 * library's error and returns NULL. */
PyObject *cnpy_wrap(cn_tensor *t);
/* The same as an instance of tp (a subclass of Tensor). */
PyObject *cnpy_wrap_type(PyTypeObject *tp, cn_tensor *t);
/* Retains a borrowed t and wraps it (None for NULL). */
PyObject *cnpy_wrap_borrowed(cn_tensor *t);
/* cnpy_wrap, except that a result that is self's own tensor (a function that
 * returns its input retained) gives self back. */
PyObject *cnpy_wrap_self(PyObject *self, cn_tensor *r);
/* A chutney.Size (tuple subclass) of the shape. */
PyObject *cnpy_size(int ndim, const int64_t *shape);

/* ---- errors (errors.c) ---- */

/* Raises the exception that fits cn_last_error() (and status, a CN_E* code
 * or 0 when the function returned NULL) and returns NULL. */
PyObject *cnpy_raise(int status);
/* The same, returning -1 (for int-returning slots). */
int cnpy_raise_int(int status);

/* ---- dtypes and devices (dtype.c, device.c) ---- */

extern PyTypeObject DType_Type;
extern PyTypeObject Device_Type;
PyObject *cnpy_dtype_obj(cn_dtype dt); /* new reference to the singleton */
/* A dtype object, name ("float32", "f32", "long"), Python type (float, int,
 * bool) or NumPy dtype: 1 and *out set; 0 with TypeError. None: 1, unchanged.
 * Usable as an O& converter. */
int cnpy_dtype_conv(PyObject *o, void *out);
PyObject *cnpy_device_obj(cn_device d);
/* A device object or string ("cpu", "opencl:0"); None: 1, unchanged. */
int cnpy_device_conv(PyObject *o, void *out);
int cnpy_dtype_init(PyObject *m);
int cnpy_device_init(PyObject *m);
/* bool < integers < floats, as the promotion rules rank them. */
int cnpy_dtype_category(cn_dtype dt);

/* ---- argument helpers (args.c) ---- */

/* A shape from f(2, 3), f((2, 3)), f([2, 3]) or f(size) (args from index
 * `start` on; `kw` a size= keyword or NULL). */
int cnpy_parse_shape(PyObject *args, Py_ssize_t start, PyObject *kw, int *ndim, int64_t *shape);
/* A shape from one object (sequence of ints, or one int). */
int cnpy_shape_from(PyObject *o, int *ndim, int64_t *shape);
/* Axes: None (every axis: n = 0), an int, or a sequence of ints. */
int cnpy_parse_dims(PyObject *o, int *dims, int *n);
int cnpy_as_int(PyObject *o, int *out);
int cnpy_as_int64(PyObject *o, int64_t *out);
/* Pairs for conv/pool options: an int (both) or a sequence of 2. */
int cnpy_pair(PyObject *o, int64_t out[2], const char *what);

/* Python scalars: 0 not a scalar, else the kind; *v (double) and *iv (exact
 * integer) are set. NumPy scalars count too. */
enum { CNPY_NOT_SCALAR = 0, CNPY_BOOL = 1, CNPY_INT = 2, CNPY_FLOAT = 3 };
int cnpy_scalar_kind(PyObject *o, double *v, long long *iv);
/* A rank-0 tensor for a Python scalar meeting tensor x, with PyTorch's
 * promotion: a float tensor gives the scalar its dtype (f32 for halves); an
 * integer tensor keeps its dtype for ints and takes f32 for floats; a bool
 * tensor takes i64 for ints and f32 for floats. New reference or NULL. */
cn_tensor *cnpy_scalar_tensor(cn_tensor *x, int kind, double v, long long iv);
/* Any operand: a Tensor (retained), a Python scalar (rank 0, promoted against
 * `like` when given, else default dtypes) or data (lists, buffers). New
 * reference, or NULL with an exception. */
cn_tensor *cnpy_as_tensor(PyObject *o, cn_tensor *like);

/* ---- conversions (convert.c, creation.c) ---- */

/* Nested sequences, scalars, buffers (NumPy arrays) or Tensors into a new
 * tensor (a copy), dtype inferred unless has_dt. */
cn_tensor *cnpy_tensor_from_data(PyObject *data, bool has_dt, cn_dtype dt);
/* The buffer-format dtype: 0 and *dt set, or -1 (no exception). */
int cnpy_format_dtype(const char *fmt, Py_ssize_t itemsize, cn_dtype *dt);
PyObject *cnpy_tolist(cn_tensor *t);
PyObject *cnpy_item(cn_tensor *t);
extern PyBufferProcs cnpy_tensor_as_buffer;

/* ---- topic tables: module functions and Tensor methods ---- */

extern PyMethodDef cnpy_creation_functions[];
extern PyMethodDef cnpy_convert_functions[];
extern PyMethodDef cnpy_convert_methods[];
extern PyMethodDef cnpy_arith_functions[];
extern PyMethodDef cnpy_arith_methods[];
extern PyMethodDef cnpy_ops_functions[];
extern PyMethodDef cnpy_ops_methods[];
extern PyMethodDef cnpy_autograd_functions[];
extern PyMethodDef cnpy_autograd_methods[];
extern PyMethodDef cnpy_nn_functions[];
extern PyMethodDef cnpy_optim_functions[];
extern PyMethodDef cnpy_io_functions[];
extern PyMethodDef cnpy_device_functions[];
extern PyMethodDef cnpy_dlpack_functions[]; /* from_dlpack (dlpack.c) */
extern PyMethodDef cnpy_dlpack_methods[];   /* __dlpack__, __dlpack_device__ */
extern PyMethodDef cnpy_graph_functions[];
extern PyMethodDef cnpy_onnx_functions[];
extern PyMethodDef cnpy_tensor_methods[];
extern PyGetSetDef cnpy_tensor_getset[];
extern PyGetSetDef cnpy_autograd_getset[];

/* Number and comparison slots (arith.c), subscripts (index.c). */
extern PyNumberMethods cnpy_tensor_as_number;
PyObject *cnpy_richcompare(PyObject *a, PyObject *b, int op);
PyObject *cnpy_getitem(PyObject *self, PyObject *key);
int cnpy_setitem(PyObject *self, PyObject *key, PyObject *value);

/* In-place writes into x are refused while recording a graph through x or
 * other (the library cannot rebase a tensor's history): -1 with an
 * exception. */
int cnpy_check_inplace(cn_tensor *x, PyObject *other);
/* Must an in-place op on x with result r be recorded (then cnpy_rebase)? */
bool cnpy_records_inplace(cn_tensor *x, cn_tensor *r);
PyObject *cnpy_rebase(PyObject *self, cn_tensor *r, bool fresh);

/* Types defined by nn.c and optim.c, readied by the module. */
int cnpy_nn_init(PyObject *m);
int cnpy_optim_init(PyObject *m);
int cnpy_convert_init(PyObject *m);
int cnpy_autograd_init(PyObject *m);
int cnpy_ops_init(PyObject *m);
int cnpy_graph_init(PyObject *m);
int cnpy_onnx_init(PyObject *m); /* _C.OnnxModel (onnx.c) */
/* The library optimiser of an _C.Optimizer (NULL with TypeError). */
cn_optimizer *cnpy_optimizer_of(PyObject *o);

/* PyModule_AddObjectRef for every Python version: o is not stolen. */
static inline int cnpy_add_ref(PyObject *m, const char *name, PyObject *o) {
    Py_INCREF(o);
    if (PyModule_AddObject(m, name, o) < 0) {
        Py_DECREF(o);
        return -1;
    }
    return 0;
}

/* ---- scopes ----
 *
 * The library's composite functions (losses, for instance) return their
 * intermediates to their caller's scope; called with no scope open, those
 * would never be released. So every cn_* call that gives a tensor is made as
 * CNPY_CALL(cn_add(a, b)): in a scope of its own, whose one result is moved
 * out to the caller (the binding, which owns it as before) and the rest
 * released. */
static inline void cnpy_scope_begin(void) {
    cnpy_wait_idle();
    cn_scope_begin();
}
static inline cn_tensor *cnpy_scope_result(cn_tensor *r) {
    if (r) cn_keep(r);
    cn_scope_end();
    if (__builtin_expect(cnpy_pending_releases != 0, 0) && !cnpy_in_nogil) cnpy_drain_releases();
    return r;
}
#define CNPY_CALL(expr) (cnpy_scope_begin(), cnpy_scope_result(expr))

/* The same without the GIL, for long kernels: expr must not touch Python
 * objects (read TT(x) and the arguments before, or inside: TT only reads
 * the object's pointer, and the caller keeps the object alive). */
static inline void cnpy_scope_begin_nogil(void) {
    cnpy_nogil_begin();
    cn_scope_begin();
}
static inline cn_tensor *cnpy_scope_result_nogil(cn_tensor *r) {
    if (r) cn_keep(r);
    cn_scope_end();
    cnpy_nogil_end();
    return r;
}
#define CNPY_CALL_NOGIL(expr) (cnpy_scope_begin_nogil(), cnpy_scope_result_nogil(expr))
/* Long when its inputs have at least this many elements. */
#define CNPY_NOGIL_NUMEL ((int64_t)1 << 16)
#define CNPY_CALL_IF_LONG(n, expr)                                                        \
    ((n) >= CNPY_NOGIL_NUMEL ? CNPY_CALL_NOGIL(expr) : CNPY_CALL(expr))
#define CNPY_CALL_IF(cond, expr) ((cond) ? CNPY_CALL_NOGIL(expr) : CNPY_CALL(expr))
/* An int-returning call in a scope of its own (what it makes on the way is
 * released): CNPY_INT(rc, cn_copy_(dst, src)). */
#define CNPY_INT(rc, expr)                                                                \
    do {                                                                                  \
        cnpy_scope_begin();                                                               \
        (rc) = (expr);                                                                    \
        cn_scope_end();                                                                   \
        if (cnpy_pending_releases && !cnpy_in_nogil) cnpy_drain_releases();               \
    } while (0)
/* An int-returning call without the GIL, in a scope of its own:
 * CNPY_INT_NOGIL(rc, cn_backward_ex(...)). */
#define CNPY_INT_NOGIL(rc, expr)                                                          \
    do {                                                                                  \
        cnpy_nogil_begin();                                                               \
        cn_scope_begin();                                                                 \
        (rc) = (expr);                                                                    \
        cn_scope_end();                                                                   \
        cnpy_nogil_end();                                                                 \
    } while (0)

/* ---- scopes for composite operations ----
 *
 *     CNPY_SCOPE_BEGIN();
 *     cn_tensor *r = cn_sum(cn_square(x), NULL, 0, false);
 *     CNPY_SCOPE_END_KEEP(r);   // r: one reference owned by the caller, or NULL
 */
#define CNPY_SCOPE_BEGIN() cnpy_scope_begin()
#define CNPY_SCOPE_END_KEEP(r) ((void)cnpy_scope_result(r))

#endif /* CNPY_COMMON_H */
