/* DLPack exchange: Tensor.__dlpack__ / __dlpack_device__ and
 * chutney.from_dlpack, zero copy both ways on the CPU.
 *
 * The ABI structs below are written from the DLPack specification
 * (https://dmlc.github.io/dlpack/latest/c_api.html and the Python
 * specification of the array API's data interchange): a tensor is passed as
 * a PyCapsule named "dltensor" (a DLManagedTensor, the legacy ABI) or, from
 * DLPack 1.0 on and only when the consumer asks for it with max_version,
 * "dltensor_versioned" (a DLManagedTensorVersioned, which adds the ABI
 * version and flags such as read-only). The consumer renames the capsule to
 * "used_dltensor" ("used_dltensor_versioned") when it takes it over, and
 * calls the managed tensor's deleter when it is done with the memory; a
 * capsule that was never consumed calls the deleter from its destructor.
 *
 * Exporting. The capsule owns a detached alias of the tensor (a second
 * tensor struct on the same storage, as the buffer protocol's export in
 * convert.c): the memory stays valid until the consumer calls the deleter,
 * whatever happens to the tensor meanwhile. The deleter may be called from
 * any thread, with or without the GIL (PyTorch frees its storage wherever
 * the last reference goes): it takes the GIL and waits until the library is
 * free (common.h) before releasing the alias.
 *
 * Importing. The producer's memory is wrapped with cn_from_buffer, whose
 * callback (free_fn) runs when the last tensor on it goes. That can happen
 * without the GIL (a backward pass in a no-GIL section) or in the middle of
 * the library's release of a chain, where running the producer's deleter
 * (NumPy's decrements the array: any Python code may run) is not safe. So,
 * as from_numpy does, free_fn only queues the pointer, and the queue is
 * drained with the GIL at a safe point: a pending call (Py_AddPendingCall,
 * run by the main thread between two bytecodes) and every DLPack entry
 * point. cn_from_buffer's callback gets only the data pointer, so a table
 * from pointers to the managed tensors finds the right one.
 *
 * cn_from_buffer wraps contiguous memory only. A strided DLTensor (a
 * transposed or sliced NumPy array, a torch.Tensor.t()) is wrapped as a
 * contiguous block covering its whole extent, viewed with the library's
 * view ops (slice with steps, view, permute, expand, flip) so that the
 * result has exactly the producer's strides: still zero copy. Copied
 * instead (each said in docs/python.md): memory that is read-only (the flag
 * of a versioned capsule), misaligned for its element type, or whose
 * strides overlap (as_strided windows), and empty tensors (nothing to
 * share). */
#include "common.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- the DLPack ABI (from the specification) ---- */

enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16,
    kDLMAIA = 17,
};

enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLOpaqueHandle = 3, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 };

#define DLPACK_VERSION_MAJOR 1u
#define DLPACK_VERSION_MINOR 0u
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef struct {
    int32_t device_type; /* a C enum (DLDeviceType) in the specification: int-sized */
    int32_t device_id;
} DLDevice;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL: compact row-major */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

_Static_assert(sizeof(DLDevice) == 8 && sizeof(DLDataType) == 4, "DLPack ABI");
_Static_assert(offsetof(DLTensor, device) == sizeof(void *) &&
                   offsetof(DLTensor, ndim) == sizeof(void *) + 8 &&
                   offsetof(DLTensor, shape) == sizeof(void *) + 16 &&
                   offsetof(DLManagedTensorVersioned, manager_ctx) == 8,
               "DLPack ABI");

static const char CAP_LEGACY[] = "dltensor";
static const char CAP_VERSIONED[] = "dltensor_versioned";
static const char CAP_USED_LEGACY[] = "used_dltensor";
static const char CAP_USED_VERSIONED[] = "used_dltensor_versioned";

/* ---- dtypes and devices ---- */

static int dl_dtype_of(cn_dtype dt, DLDataType *out) {
    out->lanes = 1;
    switch (dt) {
    case CN_F32: out->code = kDLFloat; out->bits = 32; return 0;
    case CN_F64: out->code = kDLFloat; out->bits = 64; return 0;
    case CN_F16: out->code = kDLFloat; out->bits = 16; return 0;
    case CN_BF16: out->code = kDLBfloat; out->bits = 16; return 0;
    case CN_I32: out->code = kDLInt; out->bits = 32; return 0;
    case CN_I64: out->code = kDLInt; out->bits = 64; return 0;
    case CN_U8: out->code = kDLUInt; out->bits = 8; return 0;
    case CN_I8: out->code = kDLInt; out->bits = 8; return 0;
    case CN_BOOL: out->code = kDLBool; out->bits = 8; return 0;
    default: return -1;
    }
}

static int cn_dtype_of(DLDataType d, cn_dtype *out) {
    if (d.lanes != 1) return -1;
    switch (d.code) {
    case kDLFloat:
        if (d.bits == 32) *out = CN_F32;
        else if (d.bits == 64) *out = CN_F64;
        else if (d.bits == 16) *out = CN_F16;
        else return -1;
        return 0;
    case kDLBfloat:
        if (d.bits != 16) return -1;
        *out = CN_BF16;
        return 0;
    case kDLInt:
        if (d.bits == 32) *out = CN_I32;
        else if (d.bits == 64) *out = CN_I64;
        else if (d.bits == 8) *out = CN_I8;
        else return -1;
        return 0;
    case kDLUInt:
        if (d.bits != 8) return -1;
        *out = CN_U8;
        return 0;
    case kDLBool:
        if (d.bits != 8) return -1;
        *out = CN_BOOL;
        return 0;
    default: return -1;
    }
}

/* "int16", "complex64", "float32x4", "code 9 (8 bits)". */
static void dl_dtype_name(DLDataType d, char *buf, size_t n) {
    static const char *const names[] = {"int", "uint", "float", "opaque handle", "bfloat", "complex",
                                        "bool"};
    int k;
    if (d.code < sizeof names / sizeof names[0])
        k = snprintf(buf, n, "%s%u", names[d.code], (unsigned)d.bits);
    else
        k = snprintf(buf, n, "type code %u (%u bits)", (unsigned)d.code, (unsigned)d.bits);
    if (d.lanes != 1 && k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, "x%u", (unsigned)d.lanes);
}

static const char *dl_device_kind(int32_t type) {
    switch (type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda_host";
    case kDLOpenCL: return "opencl";
    case kDLVulkan: return "vulkan";
    case kDLMetal: return "metal";
    case kDLVPI: return "vpi";
    case kDLROCM: return "rocm";
    case kDLROCMHost: return "rocm_host";
    case kDLExtDev: return "ext_dev";
    case kDLCUDAManaged: return "cuda_managed";
    case kDLOneAPI: return "oneapi";
    case kDLWebGPU: return "webgpu";
    case kDLHexagon: return "hexagon";
    case kDLMAIA: return "maia";
    default: return NULL;
    }
}

static void dl_device_str(DLDevice d, char *buf, size_t n) {
    const char *k = dl_device_kind(d.device_type);
    if (k) snprintf(buf, n, "%s:%d", k, (int)d.device_id);
    else snprintf(buf, n, "DLPack device type %d:%d", (int)d.device_type, (int)d.device_id);
}

/* Host memory the CPU reads directly (pinned CUDA / ROCm memory too). */
static bool dl_device_is_host(int32_t type) {
    return type == kDLCPU || type == kDLCUDAHost || type == kDLROCMHost;
}

static DLDevice dl_device_of(cn_device d) {
    DLDevice r = {kDLCPU, 0};
    if (d.kind == CN_DEVICE_OPENCL) r.device_type = kDLOpenCL;
    else if (d.kind == CN_DEVICE_CUDA) r.device_type = kDLCUDA;
    if (d.kind != CN_DEVICE_CPU) r.device_id = d.index;
    return r;
}

/* A deleter may run while an exception is set (a capsule freed during
 * unwinding) and must leave it so. */
#if PY_VERSION_HEX >= 0x030C0000
#define SAVE_EXC() PyObject *saved_exc_ = PyErr_GetRaisedException()
#define RESTORE_EXC() PyErr_SetRaisedException(saved_exc_)
#else
#define SAVE_EXC()                                                                        \
    PyObject *saved_t_, *saved_v_, *saved_tb_;                                            \
    PyErr_Fetch(&saved_t_, &saved_v_, &saved_tb_)
#define RESTORE_EXC() PyErr_Restore(saved_t_, saved_v_, saved_tb_)
#endif

static bool interpreter_gone(void) {
    if (!Py_IsInitialized()) return true;
#if PY_VERSION_HEX >= 0x030D0000
    if (Py_IsFinalizing() && !PyGILState_Check()) return true;
#else
    if (_Py_IsFinalizing() && !PyGILState_Check()) return true;
#endif
    return false;
}

/* ---- exporting ---- */

typedef struct {
    union {
        DLManagedTensor legacy;
        DLManagedTensorVersioned versioned;
    } m;
    int64_t shape[CN_MAX_DIMS];
    int64_t strides[CN_MAX_DIMS];
    cn_tensor *alias; /* one reference: keeps the storage alive */
} export_ctx;

static _Atomic Py_ssize_t live_exports; /* managed tensors not yet deleted */
static char zero_size_dummy[16];

static void export_release(export_ctx *c) {
    if (!c) return;
    /* After the interpreter is gone the library's state may be too: leak. */
    if (interpreter_gone()) return;
    PyGILState_STATE g = PyGILState_Ensure();
    SAVE_EXC();
    cnpy_wait_idle();
    cn_release(c->alias);
    live_exports--;
    PyMem_RawFree(c);
    RESTORE_EXC();
    PyGILState_Release(g);
}

static void export_deleter_legacy(DLManagedTensor *self) {
    if (self) export_release((export_ctx *)self->manager_ctx);
}

static void export_deleter_versioned(DLManagedTensorVersioned *self) {
    if (self) export_release((export_ctx *)self->manager_ctx);
}

/* The destructor of a capsule: frees the managed tensor if no consumer took
 * it (a consumer renames the capsule). Works for any producer's capsule. */
static void capsule_destructor(PyObject *cap) {
    if (PyCapsule_IsValid(cap, CAP_LEGACY)) {
        DLManagedTensor *m = PyCapsule_GetPointer(cap, CAP_LEGACY);
        if (m && m->deleter) m->deleter(m);
    } else if (PyCapsule_IsValid(cap, CAP_VERSIONED)) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, CAP_VERSIONED);
        if (m && m->deleter) m->deleter(m);
    }
}

static void dl_drain(void);

/* A (major, minor) tuple of ints, or None: *major -1. */
static int parse_version(PyObject *o, long *major) {
    *major = -1;
    if (o == Py_None) return 0;
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 2 || !PyLong_Check(PyTuple_GET_ITEM(o, 0)) ||
        !PyLong_Check(PyTuple_GET_ITEM(o, 1))) {
        PyErr_Format(PyExc_TypeError, "__dlpack__: max_version must be None or a (major, minor) tuple "
                     "of ints, not %R", o);
        return -1;
    }
    int overflow;
    long v = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(o, 0), &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    *major = overflow > 0 ? LONG_MAX : overflow < 0 ? -1 : v;
    return 0;
}

/* None: -1; True 1; False 0. */
static int parse_copy(PyObject *o, const char *fn, int *copy) {
    if (o == Py_None) *copy = -1;
    else if (o == Py_True) *copy = 1;
    else if (o == Py_False) *copy = 0;
    else {
        PyErr_Format(PyExc_TypeError, "%s: copy must be None, True or False, not %s", fn,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    return 0;
}

/* A (device_type, device_id) tuple of ints. */
static int parse_dl_device(PyObject *o, const char *what, DLDevice *out) {
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 2 || !PyLong_Check(PyTuple_GET_ITEM(o, 0)) ||
        !PyLong_Check(PyTuple_GET_ITEM(o, 1))) {
        PyErr_Format(PyExc_TypeError, "%s must be a (device_type, device_id) tuple of ints, not %R",
                     what, o);
        return -1;
    }
    long t = PyLong_AsLong(PyTuple_GET_ITEM(o, 0));
    if (t == -1 && PyErr_Occurred()) return -1;
    long i = PyLong_AsLong(PyTuple_GET_ITEM(o, 1));
    if (i == -1 && PyErr_Occurred()) return -1;
    if (t < INT32_MIN || t > INT32_MAX || i < INT32_MIN || i > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: %R is out of range", what, o);
        return -1;
    }
    out->device_type = (int32_t)t;
    out->device_id = (int32_t)i;
    return 0;
}

static PyObject *m_dlpack(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOOO:__dlpack__", kwlist, &stream, &max_version,
                                     &dl_device, &copy_o))
        return NULL;
    /* The CPU has no streams: None (or an int, which PyTorch accepts too)
     * asks for nothing to synchronise. */
    if (stream != Py_None && !PyLong_Check(stream)) {
        PyErr_Format(PyExc_TypeError, "__dlpack__: stream must be None or an int, not %s",
                     Py_TYPE(stream)->tp_name);
        return NULL;
    }
    long major;
    int copy;
    if (parse_version(max_version, &major) < 0 || parse_copy(copy_o, "__dlpack__", &copy) < 0)
        return NULL;
    bool versioned = major >= 1;
    DLDevice want = {kDLCPU, 0};
    bool has_want = dl_device != Py_None;
    if (has_want && parse_dl_device(dl_device, "__dlpack__: dl_device", &want) < 0) return NULL;
    dl_drain();

    cn_tensor *t = TT(self);
    if (cn_requires_grad(t)) {
        PyErr_SetString(PyExc_RuntimeError, "Can't export tensors that require gradient, use "
                                            "tensor.detach()");
        return NULL;
    }
    cn_device dev = cn_tensor_device(t);
    char name[48];
    if (has_want && (want.device_type != kDLCPU || want.device_id != 0)) {
        dl_device_str(want, name, sizeof name);
        PyErr_Format(PyExc_BufferError, "__dlpack__: can't export to %s: chutney exchanges CPU "
                     "memory only (dl_device=(1, 0))", name);
        return NULL;
    }
    bool to_cpu = false;
    if (dev.kind != CN_DEVICE_CPU) {
        /* A consumer that names the CPU explicitly may get a copy there, as
         * the array API allows (unless it forbids copies). */
        if (!has_want || copy == 0) {
            PyErr_Format(PyExc_BufferError, "__dlpack__: the tensor is on %s; DLPack exchange is for "
                         "CPU tensors: call .cpu() first", cn_device_str(dev, name, sizeof name));
            return NULL;
        }
        to_cpu = true;
    }
    DLDataType dtype;
    cn_dtype dt = cn_tensor_dtype(t);
    if (dl_dtype_of(dt, &dtype) < 0) {
        PyErr_Format(PyExc_TypeError, "__dlpack__: DLPack has no type for %s", cn_dtype_name(dt));
        return NULL;
    }
    /* Negative strides (a flipped view) are valid DLPack, but some consumers
     * cannot import them (PyTorch 1.13 aborts the process): copied. */
    bool negative = false;
    for (int i = 0; i < cn_ndim(t); i++)
        if (cn_shape(t)[i] > 1 && cn_strides(t)[i] < 0) negative = true;
    if (negative && copy == 0) {
        PyErr_SetString(PyExc_BufferError, "__dlpack__(copy=False): the tensor has negative strides "
                                           "(a flipped view), which are exported as a copy");
        return NULL;
    }
    bool copied = copy == 1 || negative || to_cpu;

    export_ctx *c = PyMem_RawCalloc(1, sizeof *c);
    if (!c) return PyErr_NoMemory();
    CNPY_SCOPE_BEGIN();
    cn_tensor *a = cn_detach(t);
    if (a && to_cpu) a = cn_to(a, CN_CPU);
    if (a && copied && !to_cpu) a = cn_clone(a);
    CNPY_SCOPE_END_KEEP(a);
    if (!a) {
        PyMem_RawFree(c);
        return cnpy_raise(0);
    }
    c->alias = a;
    live_exports++; /* export_release counts it down */
    int64_t numel = cn_numel(a);
    void *data = numel > 0 ? cn_data(a) : zero_size_dummy;
    if (!data) {
        cnpy_raise(0);
        export_release(c);
        return NULL;
    }
    int nd = cn_ndim(a);
    for (int i = 0; i < nd; i++) {
        c->shape[i] = cn_shape(a)[i];
        c->strides[i] = cn_strides(a)[i];
    }
    DLTensor *dl = versioned ? &c->m.versioned.dl_tensor : &c->m.legacy.dl_tensor;
    dl->data = data;
    dl->device = (DLDevice){kDLCPU, 0};
    dl->ndim = nd;
    dl->dtype = dtype;
    dl->shape = c->shape;
    dl->strides = c->strides;
    dl->byte_offset = 0;
    PyObject *cap;
    if (versioned) {
        c->m.versioned.version = (DLPackVersion){DLPACK_VERSION_MAJOR, DLPACK_VERSION_MINOR};
        c->m.versioned.manager_ctx = c;
        c->m.versioned.deleter = export_deleter_versioned;
        c->m.versioned.flags = copied ? DLPACK_FLAG_BITMASK_IS_COPIED : 0;
        cap = PyCapsule_New(&c->m.versioned, CAP_VERSIONED, capsule_destructor);
    } else {
        c->m.legacy.manager_ctx = c;
        c->m.legacy.deleter = export_deleter_legacy;
        cap = PyCapsule_New(&c->m.legacy, CAP_LEGACY, capsule_destructor);
    }
    if (!cap) export_release(c);
    return cap;
}

static PyObject *m_dlpack_device(PyObject *self, PyObject *unused) {
    DLDevice d = dl_device_of(cn_tensor_device(TT(self)));
    return Py_BuildValue("(ii)", (int)d.device_type, (int)d.device_id);
}

/* ---- importing: the table of borrowed managed tensors ---- */

typedef struct dl_import {
    char *base;    /* what cn_from_buffer got, and free_fn gets back */
    size_t extent; /* bytes from base that the tensors may reach */
    void *managed; /* DLManagedTensor or DLManagedTensorVersioned */
    bool versioned;
    struct dl_import *next;
} dl_import;

#define NBUCKETS 256
static dl_import *imports[NBUCKETS]; /* used with the GIL held */
static Py_ssize_t nimports;

static pthread_mutex_t queue_mutex = PTHREAD_MUTEX_INITIALIZER;
static void **queue;
static size_t nqueue, cap_queue;
static _Atomic int drain_scheduled;

static size_t bucket_of(const void *p) { return ((uintptr_t)p >> 4) % NBUCKETS; }

static void call_deleter(void *managed, bool versioned) {
    if (versioned) {
        DLManagedTensorVersioned *m = managed;
        if (m->deleter) m->deleter(m);
    } else {
        DLManagedTensor *m = managed;
        if (m->deleter) m->deleter(m);
    }
}

/* With the GIL, at a safe point: the producers' deleters of the memory the
 * library let go of. Re-entrant (a deleter may run Python code that imports
 * or drops tensors): each entry is unlinked before its deleter runs. */
static void dl_drain(void) {
    for (;;) {
        pthread_mutex_lock(&queue_mutex);
        void *data = nqueue ? queue[--nqueue] : NULL;
        pthread_mutex_unlock(&queue_mutex);
        if (!data) return;
        /* Several tensors may wrap memory from one address (the same array
         * imported twice, or a[:2] and a): releasing the entry with the
         * smallest extent leaves entries that still cover every tensor. */
        dl_import **best = NULL;
        for (dl_import **pp = &imports[bucket_of(data)]; *pp; pp = &(*pp)->next)
            if ((*pp)->base == data && (!best || (*pp)->extent < (*best)->extent)) best = pp;
        if (!best) continue;
        dl_import *e = *best;
        *best = e->next;
        nimports--;
        SAVE_EXC();
        call_deleter(e->managed, e->versioned);
        if (PyErr_Occurred()) PyErr_WriteUnraisable(NULL);
        RESTORE_EXC();
        PyMem_RawFree(e);
    }
}

static int drain_callback(void *unused) {
    drain_scheduled = 0;
    dl_drain();
    return 0;
}

/* free_fn of cn_from_buffer: any thread, with or without the GIL, possibly
 * inside the library. Only queues. */
static void dl_free(void *data) {
    pthread_mutex_lock(&queue_mutex);
    if (nqueue == cap_queue) {
        size_t ncap = cap_queue ? 2 * cap_queue : 64;
        void **nq = realloc(queue, ncap * sizeof *nq);
        if (!nq) { /* the producer's memory stays: a leak, not a crash */
            pthread_mutex_unlock(&queue_mutex);
            return;
        }
        queue = nq;
        cap_queue = ncap;
    }
    queue[nqueue++] = data;
    pthread_mutex_unlock(&queue_mutex);
    if (!drain_scheduled && Py_IsInitialized()) {
        drain_scheduled = 1;
        if (Py_AddPendingCall(drain_callback, NULL) < 0) drain_scheduled = 0;
    }
}

/* ---- importing: building the tensor ---- */

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* A contiguous copy (on the CPU) of the strided memory at p. */
static cn_tensor *copy_strided(cn_dtype dt, int nd, const int64_t *shape, const int64_t *st,
                               const char *p) {
    cn_tensor *t = CNPY_CALL(cn_empty_on(CN_CPU, dt, nd, shape));
    if (!t) return (cn_tensor *)cnpy_raise(0);
    int64_t numel = cn_numel(t);
    if (numel == 0) return t;
    char *dst = cn_data(t);
    if (!dst) {
        cn_release(t);
        return (cn_tensor *)cnpy_raise(0);
    }
    size_t item = cn_dtype_size(dt);
    bool contiguous = true;
    int64_t c = 1;
    for (int i = nd - 1; i >= 0; i--) {
        if (shape[i] != 1 && st[i] != c) contiguous = false;
        c *= shape[i];
    }
    if (contiguous) {
        memcpy(dst, p, (size_t)numel * item);
        return t;
    }
    int64_t idx[CN_MAX_DIMS] = {0};
    int64_t off = 0; /* in elements */
    for (int64_t k = 0; k < numel; k++) {
        memcpy(dst + (size_t)k * item, p + off * (int64_t)item, item);
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < shape[i]) {
                off += st[i];
                break;
            }
            off -= st[i] * (shape[i] - 1);
            idx[i] = 0;
        }
    }
    return t;
}

typedef struct {
    cn_dtype dt;
    int nd;
    int64_t shape[CN_MAX_DIMS];
    int64_t st[CN_MAX_DIMS]; /* elements */
    char *p;                 /* element [0, ..., 0] */
    char *base;              /* the lowest element */
    int64_t extent;          /* elements from base to the highest, inclusive */
    int64_t numel;
} dl_view;

/* Checks the DLTensor and fills v; -1 with an exception. */
static int read_dltensor(const DLTensor *dl, dl_view *v) {
    char name[64];
    if (!dl_device_is_host(dl->device.device_type)) {
        dl_device_str(dl->device, name, sizeof name);
        PyErr_Format(PyExc_BufferError, "from_dlpack: the tensor is on %s; chutney imports CPU memory "
                     "only: move it to the CPU first (e.g. .cpu())", name);
        return -1;
    }
    if (cn_dtype_of(dl->dtype, &v->dt) < 0) {
        dl_dtype_name(dl->dtype, name, sizeof name);
        PyErr_Format(PyExc_TypeError, "from_dlpack: chutney has no dtype for DLPack's %s (it takes "
                     "float32, float64, float16, bfloat16, int32, int64, uint8 and bool)", name);
        return -1;
    }
    if (dl->ndim < 0 || dl->ndim > CN_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "from_dlpack: %d axes (chutney tensors have 0 to %d)",
                     (int)dl->ndim, CN_MAX_DIMS);
        return -1;
    }
    v->nd = dl->ndim;
    if (v->nd > 0 && !dl->shape) {
        PyErr_SetString(PyExc_ValueError, "from_dlpack: the DLTensor has no shape");
        return -1;
    }
    v->numel = 1;
    for (int i = 0; i < v->nd; i++) {
        v->shape[i] = dl->shape[i];
        if (v->shape[i] < 0) {
            PyErr_Format(PyExc_ValueError, "from_dlpack: axis %d has a negative size %lld", i,
                         (long long)v->shape[i]);
            return -1;
        }
        if (v->numel && __builtin_mul_overflow(v->numel, v->shape[i], &v->numel)) {
            PyErr_SetString(PyExc_ValueError, "from_dlpack: the shape is too large");
            return -1;
        }
    }
    int64_t c = 1;
    for (int i = v->nd - 1; i >= 0; i--) { /* NULL strides: compact row-major */
        v->st[i] = dl->strides ? dl->strides[i] : c;
        if (v->shape[i] > 1 && __builtin_mul_overflow(c, v->shape[i], &c)) c = 0; /* empty: unused */
    }
    if (v->numel == 0) {
        v->p = v->base = NULL;
        v->extent = 0;
        return 0;
    }
    if (!dl->data) {
        PyErr_SetString(PyExc_ValueError, "from_dlpack: the DLTensor's data pointer is NULL");
        return -1;
    }
    int64_t item = (int64_t)cn_dtype_size(v->dt), lo = 0, hi = 0;
    bool ovf = dl->byte_offset > (uint64_t)INT64_MAX;
    for (int i = 0; i < v->nd && !ovf; i++) {
        int64_t span;
        if (v->shape[i] <= 1) continue;
        ovf = __builtin_mul_overflow(v->shape[i] - 1, v->st[i], &span) ||
              (span < 0 ? __builtin_add_overflow(lo, span, &lo) : __builtin_add_overflow(hi, span, &hi));
    }
    int64_t lo_bytes = 0, ext = 0;
    ovf = ovf || __builtin_mul_overflow(lo, item, &lo_bytes) || __builtin_sub_overflow(hi, lo, &ext) ||
          ext == INT64_MAX || __builtin_mul_overflow(ext + 1, item, &c);
    if (ovf) {
        PyErr_SetString(PyExc_ValueError, "from_dlpack: the DLTensor's strides reach outside the "
                                          "address space");
        return -1;
    }
    v->p = (char *)dl->data + dl->byte_offset;
    v->base = v->p + lo_bytes;
    v->extent = ext + 1;
    return 0;
}

/* How views of a contiguous block at v->base give v's strides (see the top
 * of the file). */
typedef struct {
    int m;                    /* axes with size > 1 and a stride */
    int ax[CN_MAX_DIMS];      /* those axes, by |stride| descending */
    int64_t bshape[CN_MAX_DIMS];
    int64_t step[CN_MAX_DIMS];
} view_plan;

/* false where views cannot make the strides (they overlap). The block has
 * shape bshape and strides d (each dividing the one before it and its
 * axis's stride; the last 1), and axis k is sliced with step t[k] / d[k]:
 * that needs the axis to fit inside one step of the axis before it. With
 * two or more such axes the block may reach past the last element by less
 * than one outer stride; only the view, inside the producer's memory, is
 * ever read or written (the block itself is released at once). */
static bool plan_views(const dl_view *v, view_plan *pl) {
    int64_t t[CN_MAX_DIMS], d[CN_MAX_DIMS];
    int m = 0;
    for (int i = 0; i < v->nd; i++) {
        if (v->shape[i] <= 1 || v->st[i] == 0) continue;
        int64_t s = v->st[i] < 0 ? -v->st[i] : v->st[i];
        int j = m++;
        while (j > 0 && t[j - 1] < s) {
            t[j] = t[j - 1];
            pl->ax[j] = pl->ax[j - 1];
            j--;
        }
        t[j] = s;
        pl->ax[j] = i;
    }
    pl->m = m;
    if (m == 0) return true;
    if (m == 1) { /* one axis: the extent itself, sliced */
        pl->bshape[0] = v->extent;
        pl->step[0] = t[0];
        return true;
    }
    d[0] = t[0];
    for (int k = 1; k < m; k++) d[k] = k == m - 1 ? 1 : gcd64(d[k - 1], t[k]);
    pl->bshape[0] = v->shape[pl->ax[0]];
    pl->step[0] = 1;
    for (int k = 1; k < m; k++) {
        int64_t n = v->shape[pl->ax[k]];
        pl->step[k] = t[k] / d[k];
        pl->bshape[k] = d[k - 1] / d[k];
        if (n - 1 > (pl->bshape[k] - 1) / pl->step[k]) return false;
    }
    return true;
}

/* The planned views; e (the table's entry for the memory) is registered once
 * the library holds the memory. NULL with an exception, *created telling
 * whether the library took the memory (then the deleter is queued). */
static cn_tensor *build_views(const dl_view *v, const view_plan *pl, dl_import *e, bool *created) {
    int nd = v->nd, m = pl->m;
    int64_t one = 1;
    CNPY_SCOPE_BEGIN();
    cn_tensor *x = m > 0 ? cn_from_buffer(v->dt, m, pl->bshape, v->base, dl_free)
                         : cn_from_buffer(v->dt, nd > 0 ? 1 : 0, &one, v->base, dl_free);
    *created = x != NULL;
    if (x) {
        size_t b = bucket_of(v->base);
        e->next = imports[b];
        imports[b] = e;
        nimports++;
    }
    for (int k = 0; x && k < m; k++) {
        int64_t n = v->shape[pl->ax[k]];
        if (pl->step[k] != 1 || pl->bshape[k] != n)
            x = cn_slice(x, k, 0, (n - 1) * pl->step[k] + 1, pl->step[k]);
    }
    if (x && nd > 0) {
        /* The other axes (size 1, or broadcast: stride 0) as size 1 after
         * the sorted ones; then each axis to its place, broadcast, flipped. */
        int64_t vshape[CN_MAX_DIMS];
        int perm[CN_MAX_DIMS], pos = m;
        bool identity = true, broadcast = false;
        for (int k = 0; k < nd; k++) vshape[k] = k < m ? v->shape[pl->ax[k]] : 1;
        if (cn_ndim(x) != nd) x = cn_view(x, nd, vshape);
        for (int i = 0; i < nd; i++) perm[i] = -1;
        for (int k = 0; k < m; k++) perm[pl->ax[k]] = k;
        for (int i = 0; i < nd; i++) {
            if (perm[i] < 0) perm[i] = pos++;
            if (perm[i] != i) identity = false;
            if (v->shape[i] > 1 && v->st[i] == 0) broadcast = true;
        }
        if (x && !identity) x = cn_permute(x, perm, nd);
        if (x && broadcast) x = cn_expand(x, nd, v->shape);
        for (int i = 0; x && i < nd; i++)
            if (v->shape[i] > 1 && v->st[i] < 0) x = cn_slice(x, i, CN_END, CN_BEGIN, -1);
    }
    CNPY_SCOPE_END_KEEP(x);
    return x ? x : (cn_tensor *)cnpy_raise(0);
}

/* Did the views give exactly what the producer described? */
static bool same_layout(cn_tensor *x, const dl_view *v) {
    if (cn_data(x) != (void *)v->p || cn_ndim(x) != v->nd) {
        cn_clear_error();
        return false;
    }
    for (int i = 0; i < v->nd; i++)
        if (cn_shape(x)[i] != v->shape[i] || (v->shape[i] > 1 && cn_strides(x)[i] != v->st[i]))
            return false;
    return true;
}

/* The consumer's part once the memory is no longer needed (a copy was made). */
static void consume_and_free(PyObject *cap, bool versioned, void *managed) {
    /* Renaming a valid capsule cannot fail. */
    if (PyCapsule_SetName(cap, versioned ? CAP_USED_VERSIONED : CAP_USED_LEGACY) < 0) {
        PyErr_WriteUnraisable(cap);
        return;
    }
    SAVE_EXC();
    call_deleter(managed, versioned);
    if (PyErr_Occurred()) PyErr_WriteUnraisable(NULL);
    RESTORE_EXC();
}

/* Imports the capsule: a new reference, the capsule consumed (renamed); or
 * NULL with an exception, the capsule left as it was (unless the library
 * took the memory before the failure: then it is consumed and the deleter
 * queued). copy: -1 when needed, 1 always, 0 never (BufferError where
 * needed). */
static PyObject *import_capsule(PyObject *cap, int copy) {
    const char *cname = PyCapsule_GetName(cap);
    if (!cname && PyErr_Occurred()) return NULL;
    bool versioned;
    if (cname && strcmp(cname, CAP_LEGACY) == 0) versioned = false;
    else if (cname && strcmp(cname, CAP_VERSIONED) == 0) versioned = true;
    else if (cname && (strcmp(cname, CAP_USED_LEGACY) == 0 || strcmp(cname, CAP_USED_VERSIONED) == 0)) {
        PyErr_Format(PyExc_BufferError, "from_dlpack: this DLPack capsule was already consumed (its "
                     "name is '%s'): a capsule can be imported only once; ask the producer for a "
                     "new one", cname);
        return NULL;
    } else {
        PyErr_Format(PyExc_TypeError, "from_dlpack: expected a DLPack capsule named 'dltensor' or "
                     "'dltensor_versioned', not a capsule named '%s'", cname ? cname : "(none)");
        return NULL;
    }
    void *managed = PyCapsule_GetPointer(cap, cname);
    if (!managed) return NULL;
    const DLTensor *dl;
    bool readonly = false;
    if (versioned) {
        DLManagedTensorVersioned *mv = managed;
        if (mv->version.major != DLPACK_VERSION_MAJOR) {
            PyErr_Format(PyExc_BufferError, "from_dlpack: the capsule is DLPack %u.%u; chutney reads "
                         "DLPack %u.x", (unsigned)mv->version.major, (unsigned)mv->version.minor,
                         DLPACK_VERSION_MAJOR);
            return NULL;
        }
        dl = &mv->dl_tensor;
        readonly = (mv->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    } else {
        dl = &((DLManagedTensor *)managed)->dl_tensor;
    }
    dl_view v;
    if (read_dltensor(dl, &v) < 0) return NULL;

    /* Shared unless it can't be: read-only memory (a tensor could be
     * written), elements misaligned for their type, overlapping strides. */
    size_t item = cn_dtype_size(v.dt);
    view_plan pl;
    const char *why = NULL;
    if (v.numel == 0) why = NULL; /* nothing to share: an empty tensor */
    else if (copy == 1) why = "copy=True";
    else if (readonly) why = "the producer's memory is read-only";
    else if ((uintptr_t)v.p % item != 0) why = "the data is misaligned for its type";
    else if (!plan_views(&v, &pl)) why = "the strides overlap";
    if (v.numel > 0 && !why) {
        dl_import *e = PyMem_RawMalloc(sizeof *e);
        if (!e) return PyErr_NoMemory();
        e->base = v.base;
        e->extent = (size_t)v.extent * item;
        e->managed = managed;
        e->versioned = versioned;
        /* Consumed first: from here the deleter is ours to call. */
        if (PyCapsule_SetName(cap, versioned ? CAP_USED_VERSIONED : CAP_USED_LEGACY) < 0) {
            PyMem_RawFree(e);
            return NULL;
        }
        bool created;
        cn_tensor *x = build_views(&v, &pl, e, &created);
        if (!created) { /* the library never took the memory: not consumed */
            PyMem_RawFree(e);
            PyCapsule_SetName(cap, cname);
            return NULL;
        }
        if (!x) return NULL; /* the deleter is queued */
        if (same_layout(x, &v)) return cnpy_wrap(x);
        /* Should not happen: copied while x keeps the memory alive. */
        cn_tensor *r = copy_strided(v.dt, v.nd, v.shape, v.st, v.p);
        cn_release(x);
        return r ? cnpy_wrap(r) : NULL;
    }
    if (why && copy == 0) {
        PyErr_Format(PyExc_BufferError, "from_dlpack(copy=False): %s, so the tensor would have to be "
                     "copied", why);
        return NULL;
    }
    /* A copy (or an empty tensor); then the producer's memory is freed. */
    cn_tensor *r = copy_strided(v.dt, v.nd, v.shape, v.st, v.p);
    if (!r) return NULL;
    consume_and_free(cap, versioned, managed);
    return cnpy_wrap(r);
}
static PyObject *max_version_kw;

static PyObject *f_from_dlpack(PyObject *mod, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"x", "device", "copy", NULL};
    PyObject *x, *copy_o = Py_None;
    cn_device dev = CN_CPU;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$O&O:from_dlpack", kwlist, &x, cnpy_device_conv,
                                     &dev, &copy_o))
        return NULL;
    int copy;
    if (parse_copy(copy_o, "from_dlpack", &copy) < 0) return NULL;
    if (copy == 0 && dev.kind != CN_DEVICE_CPU) {
        PyErr_SetString(PyExc_BufferError, "from_dlpack(copy=False): a device other than the CPU needs "
                                           "a copy");
        return NULL;
    }
    dl_drain();
    PyObject *cap;
    if (PyCapsule_CheckExact(x)) {
        cap = x;
        Py_INCREF(cap);
    } else {
        PyObject *fn = PyObject_GetAttrString(x, "__dlpack__");
        if (!fn) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "from_dlpack: expected an object with __dlpack__ (a NumPy "
                         "array, a PyTorch tensor, ...) or a DLPack capsule, not %s",
                         Py_TYPE(x)->tp_name);
            return NULL;
        }
        /* The device first, so that a GPU producer is not asked for a
         * capsule chutney would refuse. */
        PyObject *devo = PyObject_CallMethod(x, "__dlpack_device__", NULL);
        if (devo) {
            DLDevice d;
            int rc = parse_dl_device(devo, "from_dlpack: __dlpack_device__()", &d);
            Py_DECREF(devo);
            if (rc < 0) {
                Py_DECREF(fn);
                return NULL;
            }
            if (!dl_device_is_host(d.device_type)) {
                char name[64];
                dl_device_str(d, name, sizeof name);
                PyErr_Format(PyExc_BufferError, "from_dlpack: the tensor is on %s; chutney imports CPU "
                             "memory only: move it to the CPU first (e.g. .cpu())", name);
                Py_DECREF(fn);
                return NULL;
            }
        } else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear(); /* optional: the capsule says where it is */
        } else {
            Py_DECREF(fn);
            return NULL;
        }
        /* DLPack 1.x if the producer knows max_version; older producers
         * (NumPy < 2.1, PyTorch < 2.4) take no such argument. */
        if (!max_version_kw)
            max_version_kw = Py_BuildValue("{s(II)}", "max_version", DLPACK_VERSION_MAJOR,
                                           DLPACK_VERSION_MINOR);
        PyObject *noargs = max_version_kw ? PyTuple_New(0) : NULL;
        cap = noargs ? PyObject_Call(fn, noargs, max_version_kw) : NULL;
        if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            cap = PyObject_Call(fn, noargs, NULL);
        }
        Py_XDECREF(noargs);
        Py_DECREF(fn);
        if (!cap) return NULL;
        if (!PyCapsule_CheckExact(cap)) {
            PyErr_Format(PyExc_TypeError, "from_dlpack: %s.__dlpack__() returned %s, not a DLPack "
                         "capsule", Py_TYPE(x)->tp_name, Py_TYPE(cap)->tp_name);
            Py_DECREF(cap);
            return NULL;
        }
    }
    PyObject *r = import_capsule(cap, copy);
    Py_DECREF(cap);
    if (!r || dev.kind == CN_DEVICE_CPU) return r;
    cn_tensor *moved = CNPY_CALL(cn_to(TT(r), dev));
    Py_DECREF(r);
    return moved ? cnpy_wrap(moved) : cnpy_raise(0);
}

static PyObject *f_dlpack_live(PyObject *mod, PyObject *unused) {
    dl_drain();
    return Py_BuildValue("(nn)", (Py_ssize_t)live_exports, nimports);
}

PyMethodDef cnpy_dlpack_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))m_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(stream=None, max_version=None, dl_device=None, copy=None): a DLPack capsule sharing "
     "the tensor's memory (CPU tensors; versioned when max_version >= (1, 0))"},
    {"__dlpack_device__", m_dlpack_device, METH_NOARGS,
     "(device_type, device_id) in DLPack's numbering: (1, 0) for the CPU"},
    {NULL, NULL, 0, NULL},
};

PyMethodDef cnpy_dlpack_functions[] = {
    {"from_dlpack", (PyCFunction)(void (*)(void))f_from_dlpack, METH_VARARGS | METH_KEYWORDS,
     "from_dlpack(x, *, device=None, copy=None): a tensor sharing the memory of x (anything with "
     "__dlpack__, e.g. a NumPy array or a PyTorch tensor, or a 'dltensor' capsule) on the CPU"},
    {"_dlpack_live", f_dlpack_live, METH_NOARGS,
     "(exported managed tensors not yet deleted, imported ones still held)"},
    {NULL, NULL, 0, NULL},
};
