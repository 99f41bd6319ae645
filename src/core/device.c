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

/* The "KIND[:I]" part of a device name (s is the whole name, for messages). */
static int parse_local(const char *s, const char *p, cn_device *out) {
    const char *colon = strchr(p, ':');
    size_t klen = colon ? (size_t)(colon - p) : strlen(p);
    int kind = -1;
    for (int k = 0; k < CN_DEVICE_KIND_COUNT; k++)
        if (strlen(kind_names[k]) == klen && strncmp(p, kind_names[k], klen) == 0) kind = k;
    if (kind < 0)
        return cn_failc(CN_EINVAL, "device '%s': unknown kind (cpu, opencl or cuda, "
                                   "optionally with an index: opencl:0, and a rank in front: "
                                   "rank:1/cpu:0)", s);
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

/* The largest rank the kind field can carry. */
#define MAX_DEVICE_RANK ((INT32_MAX >> CN_DEVICE_RANK_SHIFT) - 1)

int cn_device_parse(const char *s, cn_device *out) {
    if (!s || !out) return cn_failc(CN_EINVAL, "device_parse: NULL argument");
    if (strncmp(s, "rank:", 5) != 0) return parse_local(s, s, out);
    /* "rank:R/KIND:I", or "rank:R" for its CPU. */
    char *end;
    errno = 0;
    long r = strtol(s + 5, &end, 10);
    if (end == s + 5 || errno || r < 0 || r > MAX_DEVICE_RANK || (*end && *end != '/'))
        return cn_failc(CN_EINVAL, "device '%s': 'rank:' must be followed by a rank from 0 "
                                   "(and '/' and a device: rank:1/cpu:0)", s);
    cn_device d = CN_CPU;
    if (*end && parse_local(s, end + 1, &d) < 0) return CN_EINVAL;
    *out = CN_DEVICE_ON_RANK((int)r, d.kind, d.index);
    return CN_OK;
}

int cn_device_rank(cn_device d) { return (d.kind >> CN_DEVICE_RANK_SHIFT) - 1; }

cn_device cn_device_local(cn_device d) {
    return CN_DEVICE(d.kind & ((1 << CN_DEVICE_RANK_SHIFT) - 1), d.index);
}

char *cn_device_str(cn_device d, char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    int r = cn_device_rank(d);
    cn_device l = cn_device_local(d);
    char rank[24] = "";
    if (r >= 0) snprintf(rank, sizeof rank, "rank:%d/", r);
    if (r < -1 || l.kind >= CN_DEVICE_KIND_COUNT)
        snprintf(buf, n, "device(kind %d):%d", (int)d.kind, (int)d.index);
    else
        snprintf(buf, n, "%s%s:%d", rank, kind_names[l.kind], (int)l.index);
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

/* ---- the process's rank ---- */

static int job_rank, job_size = 1;

void cn_device_set_job(int rank, int size) {
    job_rank = rank;
    job_size = size;
}

int cn_device_job_rank(void) { return job_rank; }

cn_device cn_device_here(cn_device d) {
    return cn_device_rank(d) == job_rank ? cn_device_local(d) : d;
}

int cn_fail_remote_device(const char *fn, cn_device d) {
    return cn_failc(CN_EINVAL,
                    "%s: %s is a device of rank %d, another process (this is rank %d of %d): "
                    "splitting a model over ranks needs a static graph (build it under "
                    "cn_device_scope_begin and compile it) or cn_send/cn_recv",
                    fn, cn_dev_name(d), cn_device_rank(d), job_rank, job_size);
}

/* ---- the default device and device scopes (per thread) ---- */

#define MAX_DEVICE_SCOPES 64
static _Thread_local cn_device default_device; /* zero: the CPU */
static _Thread_local cn_device scope_stack[MAX_DEVICE_SCOPES];
static _Thread_local bool scope_graph_only[MAX_DEVICE_SCOPES];
static _Thread_local int scope_depth;

static int check_kind(const char *fn, cn_device d) {
    cn_device l = cn_device_local(d);
    if (cn_device_rank(d) < -1 || l.kind >= CN_DEVICE_KIND_COUNT || d.index < 0)
        return cn_failc(CN_EINVAL, "%s: %s is not a device", fn, cn_dev_name(d));
    return CN_OK;
}

int cn_set_default_device(cn_device d) {
    if (check_kind("set_default_device", d) < 0) return CN_EINVAL;
    d = cn_device_here(d);
    if (cn_device_remote(d)) return cn_fail_remote_device("set_default_device", d);
    default_device = d;
    return CN_OK;
}

cn_device cn_get_default_device(void) { return default_device; }

static int scope_push(const char *fn, cn_device d, bool graph_only) {
    if (check_kind(fn, d) < 0) return CN_EINVAL;
    if (scope_depth >= MAX_DEVICE_SCOPES)
        return cn_failc(CN_ESTATE, "%s: more than %d nested device scopes", fn, MAX_DEVICE_SCOPES);
    scope_graph_only[scope_depth] = graph_only;
    scope_stack[scope_depth++] = d;
    return CN_OK;
}

int cn_device_scope_begin(cn_device d) { return scope_push("device_scope_begin", d, false); }

int cn_device_scope_begin_graph(cn_device d) { return scope_push("device_scope_begin", d, true); }

void cn_device_scope_end(void) {
    if (scope_depth == 0) {
        cn_fail("device_scope_end: no device scope is open");
        return;
    }
    scope_depth--;
}

/* The innermost scope that is not graph-only, or -1. */
static int real_scope(void) {
    int k = scope_depth - 1;
    while (k >= 0 && scope_graph_only[k]) k--;
    return k;
}

cn_device cn_current_device(void) {
    int k = scope_depth ? real_scope() : -1;
    return k >= 0 ? cn_device_local(scope_stack[k]) : default_device;
}

bool cn_device_scope_active(cn_device *d) {
    if (scope_depth == 0) return false;
    if (d) *d = scope_stack[scope_depth - 1];
    return true;
}

int cn_check_eager_scope(const char *fn) {
    int k = scope_depth ? real_scope() : -1;
    if (k >= 0 && cn_device_remote(scope_stack[k])) return cn_fail_remote_device(fn, scope_stack[k]);
    return CN_OK;
}
