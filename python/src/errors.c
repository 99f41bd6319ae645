/* The library's errors as Python exceptions.
 *
 * A failing cn_* function returns NULL (or a negative CN_E* status) and
 * cn_last_error() says what went wrong. The status picks the exception where
 * it is specific (out of memory, I/O, a corrupt file, not implemented);
 * otherwise, and for functions that return NULL (no status), the message
 * decides: dtype problems are TypeError, shape/axis/size problems ValueError,
 * the rest (autograd state, devices, ...) RuntimeError. The library has no
 * error code for NULL returns yet (docs/python.md lists the API wanted). */
#include "common.h"

#include <string.h>

static bool has(const char *msg, const char *word) { return strstr(msg, word) != NULL; }

static PyObject *classify(const char *m) {
    if (has(m, "out of memory")) return PyExc_MemoryError;
    if (has(m, "No such file or directory")) return PyExc_FileNotFoundError;
    if (has(m, "is a directory; only regular files")) return PyExc_IsADirectoryError;
    if (has(m, "only regular files are read")) return PyExc_OSError; /* a FIFO, a device */
    if (has(m, "Permission denied") || has(m, "cannot open") || has(m, "could not open") ||
        has(m, "Is a directory"))
        return PyExc_OSError;
    /* Recorded-graph state: a second backward, in-place changes. */
    if (has(m, "already freed") || has(m, "RETAIN_GRAPH") || has(m, "in place") ||
        has(m, "in-place") || has(m, "was modified") || has(m, "version"))
        return PyExc_RuntimeError;
    if (has(m, "dtype") || has(m, "only float") || has(m, "must be float") ||
        has(m, "float type") || has(m, "integer type") || has(m, "integer tensor") ||
        has(m, "class indices") || has(m, "must be an integer") || has(m, "must be integer") ||
        has(m, "must be bool"))
        return PyExc_TypeError;
    if (has(m, "built without") || has(m, "not implemented") || has(m, "unsupported"))
        return PyExc_NotImplementedError;
    if (has(m, "shape") || has(m, "[") || has(m, "axis") || has(m, "axes") || has(m, "size") ||
        has(m, "dimension") || has(m, "broadcast") || has(m, "rank") || has(m, "out of range") ||
        has(m, "numel") || has(m, "elements") || has(m, "must be") || has(m, "negative"))
        return PyExc_ValueError;
    return PyExc_RuntimeError;
}

PyObject *cnpy_raise(int status) {
    const char *msg = cn_last_error();
    char buf[2048];
    if (!msg || !*msg) msg = "chutney: the operation failed (the library gave no message)";
    snprintf(buf, sizeof buf, "%s", msg);
    PyObject *type;
    switch (status) {
    case CN_ENOMEM: type = PyExc_MemoryError; break;
    case CN_EIO: type = has(buf, "No such file") ? PyExc_FileNotFoundError : PyExc_OSError; break;
    case CN_EFORMAT: type = PyExc_ValueError; break;
    case CN_EUNSUPPORTED: type = PyExc_NotImplementedError; break;
    case CN_ESTATE: type = PyExc_RuntimeError; break;
    default: type = classify(buf); break;
    }
    cn_clear_error();
    PyErr_SetString(type, buf);
    return NULL;
}

int cnpy_raise_int(int status) {
    cnpy_raise(status);
    return -1;
}
