/* ONNX TensorProtos to tensors (raw_data, the typed fields, external data
 * files), attribute readers and the small helpers the op handlers share.
 * Every size in a file is checked before it is used: the file is untrusted. */
#define _DEFAULT_SOURCE /* realpath, for the external data's folder check */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX
#include "fileio.h"
#include "../ops/op.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>

static const char *const onnx_type_names[] = {
    "undefined", "float", "uint8",  "int8",   "uint16",    "int16",      "int32",   "int64", "string",
    "bool",      "float16", "double", "uint32", "uint64", "complex64", "complex128", "bfloat16"};

const char *onnx_dtype_name(int32_t t) {
    return t >= 0 && t < (int32_t)(sizeof onnx_type_names / sizeof *onnx_type_names)
               ? onnx_type_names[t]
               : "unknown";
}

int onnx_dtype(int32_t t) {
    switch (t) {
    case 1: return CN_F32;
    case 2: return CN_U8;
    case 3: return CN_I8;
    case 6: return CN_I32;
    case 7: return CN_I64;
    case 9: return CN_BOOL;
    case 10: return CN_F16;
    case 11: return CN_F64;
    case 16: return CN_BF16;
    default: return -1;
    }
}

/* ---- data sources ---- */

/* base_dir/location with every link and "." resolved, if it lies inside
 * the resolved base_dir, else NULL after cn_failc: a symbolic link in the
 * model's folder must not lead the loader to any file the process may
 * read. Freed by the caller. */
static char *resolve_inside(const char *base_dir, const char *location, const char *name) {
    char eb[128];
    size_t nb = strlen(base_dir) + strlen(location) + 2;
    char *joined = malloc(nb), *dir = realpath(base_dir, NULL), *real = NULL;
    if (!joined || !dir) {
        int err = errno;
        free(joined);
        free(dir);
        cn_failc(CN_EIO, "onnx: tensor '%s': the model's folder '%s': %s", name, base_dir,
                 cn_errno_str(err, eb, sizeof eb));
        return NULL;
    }
    snprintf(joined, nb, "%s/%s", base_dir, location);
    real = realpath(joined, NULL);
    if (!real) {
        cn_failc(CN_EIO, "onnx: tensor '%s': cannot open external data '%s': %s", name, joined,
                 cn_errno_str(errno, eb, sizeof eb));
    } else {
        size_t k = strlen(dir);
        bool inside = !strncmp(real, dir, k) && (real[k] == '/' || (k == 1 && real[k]));
        if (!inside) {
            cn_failc(CN_EFORMAT,
                     "onnx: tensor '%s': external data '%s' resolves to '%s', outside the model's "
                     "folder '%s' (through a symbolic link)",
                     name, joined, real, dir);
            free(real);
            real = NULL;
        }
    }
    free(joined);
    free(dir);
    return real;
}

/* Opens base_dir/location and checks that [offset, offset + len) lies in
 * it, before anything is allocated. The location must stay inside
 * base_dir: relative, no "..", no backslashes, no link out of it; and be a
 * regular file (a FIFO there would block the read forever). */
static FILE *open_external(const char *base_dir, const char *location, int64_t offset, int64_t len,
                           const char *name) {
    if (!base_dir) {
        cn_failc(CN_EUNSUPPORTED,
                 "onnx: tensor '%s' has external data, but the model was not loaded from a file", name);
        return NULL;
    }
    if (!location || !*location || location[0] == '/' || strstr(location, "..") ||
        strchr(location, '\\')) {
        cn_failc(CN_EFORMAT,
                 "onnx: tensor '%s': external data location '%s' is not a plain relative path "
                 "inside the model's directory",
                 name, location ? location : "");
        return NULL;
    }
    char *path = resolve_inside(base_dir, location, name);
    if (!path) return NULL;
    FILE *f = NULL;
    int64_t size = -1;
    if (cn_fopen_regular(path, "onnx", &f, &size) < 0) {
        char msg[800];
        snprintf(msg, sizeof msg, "%s", cn_last_error());
        cn_failc(CN_EFORMAT, "onnx: tensor '%s': external data: %s", name, msg);
    } else if (offset < 0 || len < 0 || offset > size || len > size - offset) {
        cn_failc(CN_EFORMAT,
                 "onnx: tensor '%s': external data '%s' holds %" PRId64
                 " bytes, the tensor needs %" PRId64 " from offset %" PRId64,
                 name, path, size, len, offset);
        fclose(f);
        f = NULL;
    } else if (fseeko(f, (off_t)offset, SEEK_SET) != 0) {
        cn_failc(CN_EIO, "onnx: tensor '%s': seeking in '%s' failed", name, path);
        fclose(f);
        f = NULL;
    }
    free(path);
    return f;
}

/* How many values the typed field of tp's dtype holds. */
static size_t typed_count(const Onnx__TensorProto *tp) {
    switch (tp->data_type) {
    case 1: return tp->n_float_data;
    case 11: return tp->n_double_data;
    case 7: return tp->n_int64_data;
    default: return tp->n_int32_data;
    }
}

/* The typed-field payload of tp (typed_count checked), into dst as dt. */
static void copy_typed(const Onnx__TensorProto *tp, int dt, int64_t n, void *dst) {
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case CN_F32: ((float *)dst)[i] = tp->float_data[i]; break;
        case CN_F64: ((double *)dst)[i] = tp->double_data[i]; break;
        case CN_I64: ((int64_t *)dst)[i] = tp->int64_data[i]; break;
        case CN_I32: ((int32_t *)dst)[i] = tp->int32_data[i]; break;
        case CN_U8: ((uint8_t *)dst)[i] = (uint8_t)tp->int32_data[i]; break;
        case CN_I8: ((int8_t *)dst)[i] = (int8_t)tp->int32_data[i]; break;
        case CN_BOOL: ((uint8_t *)dst)[i] = tp->int32_data[i] != 0; break;
        default: ((uint16_t *)dst)[i] = (uint16_t)tp->int32_data[i]; break; /* f16, bf16 bits */
        }
    }
}

cn_tensor *onnx_tensor_from_proto(const Onnx__TensorProto *tp, const char *base_dir) {
    const char *name = tp->name ? tp->name : "";
    int dt = onnx_dtype(tp->data_type);
    if (dt < 0) {
        cn_failc(CN_EUNSUPPORTED, "unsupported: tensor '%s' has dtype %s", name,
                 onnx_dtype_name(tp->data_type));
        return NULL;
    }
    if (tp->n_dims > CN_MAX_DIMS)
        return cn_fail("unsupported: tensor '%s' has rank %zu (at most %d)", name, tp->n_dims,
                       CN_MAX_DIMS);
    if (tp->segment) return cn_fail("unsupported: tensor '%s' is segmented", name);
    int64_t shape[CN_MAX_DIMS], n = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        shape[i] = tp->dims[i];
        if (shape[i] < 0 || (shape[i] > 0 && n > (INT64_C(1) << 40) / shape[i]))
            return cn_fail("onnx: tensor '%s' has a bad dimension %" PRId64, name, tp->dims[i]);
        n *= shape[i];
    }
    size_t es = cn_dtype_size((cn_dtype)dt);
    int64_t nbytes = n * (int64_t)es;
    bool external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    /* Check the payload's size before allocating. */
    if (!external && tp->has_raw_data && (int64_t)tp->raw_data.len != nbytes)
        return cn_fail("onnx: tensor '%s' has %zu bytes of raw data, %s[%" PRId64 "] needs %" PRId64,
                       name, tp->raw_data.len, cn_dtype_name((cn_dtype)dt), n, nbytes);
    const char *loc = NULL;
    int64_t off = 0, len = -1;
    if (external) {
        for (size_t i = 0; i < tp->n_external_data; i++) {
            const char *k = tp->external_data[i]->key, *v = tp->external_data[i]->value;
            if (!k || !v) continue;
            char *end;
            if (!strcmp(k, "location")) loc = v;
            else if (!strcmp(k, "offset") || !strcmp(k, "length")) {
                errno = 0;
                long long x = strtoll(v, &end, 10);
                if (errno || *end || end == v || x < 0)
                    return cn_fail("onnx: tensor '%s': bad external data %s '%s'", name, k, v);
                if (!strcmp(k, "offset")) off = x;
                else len = x;
            }
        }
        if (len >= 0 && len != nbytes)
            return cn_fail("onnx: tensor '%s': external data length %" PRId64 ", the tensor needs %" PRId64,
                           name, len, nbytes);
    } else if (!tp->has_raw_data && (int64_t)typed_count(tp) != n)
        return cn_fail("onnx: tensor '%s' has %zu values, its dims say %" PRId64, name, typed_count(tp), n);
    /* Every source now holds the bytes asked for, so nothing larger than
     * the file is allocated. */
    FILE *ext = external ? open_external(base_dir, loc, off, nbytes, name) : NULL;
    if (external && !ext) return NULL;
    void *data = cn_alloc((size_t)nbytes);
    if (!data) {
        if (ext) fclose(ext);
        return cn_fail("onnx: out of memory for tensor '%s'", name);
    }
    int rc = 0;
    if (external) {
        if (nbytes > 0 && fread(data, 1, (size_t)nbytes, ext) != (size_t)nbytes)
            rc = cn_failc(CN_EIO, "onnx: tensor '%s': reading its external data failed", name);
        fclose(ext);
    } else if (tp->has_raw_data) {
        if (nbytes) memcpy(data, tp->raw_data.data, (size_t)nbytes);
        if (!cn_host_is_le() && es > 1) cn_byteswap(data, (size_t)n, es);
        if (dt == CN_BOOL)
            for (int64_t i = 0; i < n; i++) ((uint8_t *)data)[i] = ((uint8_t *)data)[i] != 0;
    } else copy_typed(tp, dt, n, data);
    if (rc < 0) {
        cn_free(data);
        return NULL;
    }
    cn_tensor *t = cn_t_from_alloc((cn_dtype)dt, (int)tp->n_dims, shape, data);
    return t ? cn_scope_add(t) : NULL;
}

/* ---- attributes ---- */

const Onnx__AttributeProto *onnx_attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
    return NULL;
}

int64_t onnx_attr_int(const Onnx__NodeProto *n, const char *name, int64_t def) {
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    return a && a->has_i ? a->i : def;
}

double onnx_attr_float(const Onnx__NodeProto *n, const char *name, double def) {
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    return a && a->has_f ? a->f : def;
}

int onnx_attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *out, int cap) {
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a) return -1;
    if (a->n_ints > (size_t)cap) return -2;
    for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
    return (int)a->n_ints;
}

int onnx_attr_floats(const Onnx__NodeProto *n, const char *name, float *out, int cap) {
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a) return -1;
    if (a->n_floats > (size_t)cap) return -2;
    for (size_t i = 0; i < a->n_floats; i++) out[i] = a->floats[i];
    return (int)a->n_floats;
}

const char *onnx_attr_str(const Onnx__NodeProto *n, const char *name, const char *def, char *buf,
                          size_t cap) {
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a || !a->has_s) return def;
    size_t k = a->s.len < cap - 1 ? a->s.len : cap - 1;
    memcpy(buf, a->s.data, k);
    buf[k] = '\0';
    return buf;
}

/* ---- messages ---- */

const char *onnx_node_label(onnx_ctx *c, char *buf, size_t cap) {
    const char *name = c->node ? c->node->name : NULL;
    if (!name || !*name) return "";
    snprintf(buf, cap, " '%.100s'", name);
    return buf;
}

/* "unsupported: OP (opset N): reason" stays exactly that (what is not
 * supported is a property of the op); a model that is wrong also gets the
 * node's position and name, so the one bad node among thousands is found. */
static int vmsg(onnx_ctx *c, int status, const char *prefix, const char *fmt, va_list ap) {
    char reason[768], where[160] = "", lb[112];
    vsnprintf(reason, sizeof reason, fmt, ap);
    const char *op = c->node && c->node->op_type ? c->node->op_type : "?";
    if (status != CN_EUNSUPPORTED && c->node)
        snprintf(where, sizeof where, " node %d%s:", c->node_index, onnx_node_label(c, lb, sizeof lb));
    return cn_failc(status, "%s%s (opset %d):%s %s", prefix, op, c->opset_of_node, where, reason);
}

int onnx_unsup(onnx_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vmsg(c, CN_EUNSUPPORTED, "unsupported: ", fmt, ap);
    va_end(ap);
    return rc;
}

int onnx_needs_values(onnx_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vmsg(c, CN_EUNSUPPORTED, "unsupported: ", fmt, ap);
    va_end(ap);
    c->needs_values = true;
    return rc;
}

int onnx_bad(onnx_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vmsg(c, CN_EINVAL, "", fmt, ap);
    va_end(ap);
    return rc;
}

int onnx_budget_exceeded(onnx_ctx *c) {
    if (c->running)
        return onnx_bad(c,
                        "the tensors this node computes would take more than the %" PRId64
                        " elements a node may compute in a run (%s, default %" PRId64
                        ", plus the model's initializers' and the inputs' elements; set it higher, "
                        "or to 0 for no limit)",
                        c->budget, ONNX_MAX_ELEMENTS_ENV, ONNX_MAX_ELEMENTS);
    return onnx_bad(c,
                    "the tensors computed while loading would take more than the %" PRId64
                    " elements the load may compute (%s, default %" PRId64
                    ", plus the initializers' elements; set it higher, or to 0 for no limit, to "
                    "load this model)",
                    c->budget, ONNX_MAX_ELEMENTS_ENV, ONNX_MAX_ELEMENTS);
}

/* ---- constants ---- */

int onnx_const_ints(onnx_ctx *c, cn_tensor *t, const char *what, int64_t *out, int cap) {
    if (!t) return onnx_bad(c, "input '%s' is missing", what);
    if (cn_is_symbolic_tensor(t))
        return onnx_unsup(c, "input '%s' is computed at run time (only constant %s are supported; "
                             "give concrete input shapes so shape computations fold)",
                          what, what);
    cn_dtype dt = cn_tensor_dtype(t);
    if (dt != CN_I64 && dt != CN_I32) return onnx_bad(c, "input '%s' must be int64 or int32", what);
    if (cn_ndim(t) > 1) return onnx_bad(c, "input '%s' must be a vector", what);
    int64_t n = cn_numel(t);
    if (n > cap) return onnx_bad(c, "input '%s' has %" PRId64 " values, at most %d", what, n, cap);
    if (cn_copy_to_buffer(t, CN_I64, out, sizeof(int64_t) * (size_t)(n ? n : 1)) < 0) return CN_EINVAL;
    return (int)n;
}

int onnx_const_scalar(onnx_ctx *c, cn_tensor *t, const char *what, double *out) {
    if (!t) return onnx_bad(c, "input '%s' is missing", what);
    if (cn_is_symbolic_tensor(t))
        return onnx_unsup(c, "input '%s' is computed at run time (only constants are supported)", what);
    if (cn_numel(t) != 1) return onnx_bad(c, "input '%s' must have one element", what);
    *out = cn_item(t);
    return 0;
}

cn_tensor *onnx_i64_vec(int n, const int64_t *v) {
    return cn_from_data(CN_I64, 1, (int64_t[]){n}, v);
}

cn_tensor *onnx_scalar_like(const cn_tensor *t, double v) {
    return cn_scalar(cn_tensor_dtype(t), v);
}

cn_tensor *onnx_full_like(cn_tensor *x, double v) {
    if (!x) return NULL;
    cn_attrs a = {0};
    a.f[0] = v;
    a.i[0] = -1; /* x's dtype */
    return cn_op_apply(CN_OP_full_like, &x, 1, &a);
}

cn_tensor *onnx_scalar_of(cn_tensor *x, double v) {
    if (!cn_is_symbolic_tensor(x)) return cn_scalar(CN_F32, v);
    cn_tensor *one = cn_reshape(cn_narrow(cn_reshape(x, 1, (int64_t[]){-1}), 0, 0, 1), 0, NULL);
    return onnx_full_like(cn_cast(one, CN_F32), v);
}

int onnx_check_size(onnx_ctx *c, int ndim, const int64_t *shape) {
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return onnx_bad(c, "negative size %" PRId64, shape[i]);
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) return 0;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (n > CN_MAX_NUMEL / shape[i]) return onnx_budget_exceeded(c);
        n *= shape[i];
    }
    if (cn_t_budget.left >= 0 && n > cn_t_budget.left) return onnx_budget_exceeded(c);
    return 0;
}

int onnx_axis(onnx_ctx *c, int64_t axis, int rank, const char *what) {
    if (axis < -rank || axis >= (rank ? rank : 1)) {
        onnx_bad(c, "%s %" PRId64 " is out of range for rank %d", what, axis, rank);
        return INT_MIN;
    }
    return (int)(axis < 0 ? axis + rank : axis);
}

#endif /* CN_HAVE_ONNX */
