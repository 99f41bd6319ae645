/* Devices as values: names, parsing, and which device new tensors go to.
 * What a device can do (memory, copies, kernels) is its backend's table
 * (src/backend/backend.h); core only knows that a storage belongs to one. */
#include "core.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

const char *const cn_op_names[CN_OP_COUNT] = {
#define CN_OP(name) [CN_OP_##name] = #name,
#include "op_list.h"
#undef CN_OP
};

static const char *const kind_names[CN_DEVICE_KIND_COUNT] = {
    [CN_DEVICE_CPU] = "cpu",
    [CN_DEVICE_OPENCL] = "opencl",
    [CN_DEVICE_CUDA] = "cuda",
};

int cn_device_parse(const char *s, cn_device *out) {
    if (!s || !out) return cn_failc(CN_EINVAL, "device_parse: NULL argument");
    const char *colon = strchr(s, ':');
    size_t klen = colon ? (size_t)(colon - s) : strlen(s);
    int kind = -1;
    for (int k = 0; k < CN_DEVICE_KIND_COUNT; k++)
        if (strlen(kind_names[k]) == klen && strncmp(s, kind_names[k], klen) == 0) kind = k;
    if (kind < 0)
        return cn_failc(CN_EINVAL, "device '%s': unknown kind (cpu, opencl or cuda, "
                                   "optionally with an index: opencl:0)", s);
    long idx = 0;
    if (colon) {
        char *end;
        errno = 0;
        idx = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end || errno || idx < 0 || idx > INT_MAX)
            return cn_failc(CN_EINVAL, "device '%s': the index after ':' must be a "
                                       "non-negative integer", s);
    }
    out->kind = kind;
    out->index = (int32_t)idx;
    return CN_OK;
}

char *cn_device_str(cn_device d, char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    if (d.kind < 0 || d.kind >= CN_DEVICE_KIND_COUNT)
        snprintf(buf, n, "device(kind %d):%d", (int)d.kind, (int)d.index);
    else
        snprintf(buf, n, "%s:%d", kind_names[d.kind], (int)d.index);
    return buf;
}

const char *cn_dev_name(cn_device d) {
    static _Thread_local char bufs[2][48];
    static _Thread_local int next;
    char *b = bufs[next++ & 1];
    return cn_device_str(d, b, sizeof bufs[0]);
}

bool cn_device_equal(cn_device a, cn_device b) { return a.kind == b.kind && a.index == b.index; }

cn_device cn_tensor_device(const cn_tensor *t) { return t ? cn_t_device(t) : CN_CPU; }

int cn_require_cpu(const char *fn, const cn_tensor *t) {
    if (cn_t_on_cpu(t)) return CN_OK;
    return cn_failc(CN_EINVAL,
                    "%s: the tensor is on %s; copy it to the CPU first (cn_to(t, CN_CPU))", fn,
                    cn_dev_name(cn_t_device(t)));
}

/* ---- the default device and device scopes (per thread) ---- */

#define MAX_DEVICE_SCOPES 64
static _Thread_local cn_device default_device; /* zero: the CPU */
static _Thread_local cn_device scope_stack[MAX_DEVICE_SCOPES];
static _Thread_local int scope_depth;

static int check_kind(const char *fn, cn_device d) {
    if (d.kind < 0 || d.kind >= CN_DEVICE_KIND_COUNT || d.index < 0)
        return cn_failc(CN_EINVAL, "%s: %s is not a device", fn, cn_dev_name(d));
    return CN_OK;
}

int cn_set_default_device(cn_device d) {
    if (check_kind("set_default_device", d) < 0) return CN_EINVAL;
    default_device = d;
    return CN_OK;
}

cn_device cn_get_default_device(void) { return default_device; }

int cn_device_scope_begin(cn_device d) {
    if (check_kind("device_scope_begin", d) < 0) return CN_EINVAL;
    if (scope_depth >= MAX_DEVICE_SCOPES)
        return cn_failc(CN_ESTATE, "device_scope_begin: more than %d nested device scopes",
                        MAX_DEVICE_SCOPES);
    scope_stack[scope_depth++] = d;
    return CN_OK;
}

void cn_device_scope_end(void) {
    if (scope_depth == 0) {
        cn_fail("device_scope_end: no device scope is open");
        return;
    }
    scope_depth--;
}

cn_device cn_current_device(void) {
    return scope_depth > 0 ? scope_stack[scope_depth - 1] : default_device;
}

bool cn_device_scope_active(cn_device *d) {
    if (scope_depth == 0) return false;
    if (d) *d = scope_stack[scope_depth - 1];
    return true;
}
