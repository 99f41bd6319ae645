/* Moving tensors between devices: the `to` op (cn_to), differentiable, so
 * a gradient flows back to the device the value came from, and placeable in
 * static programs, where it is the transfer step. */
#include "op.h"

#include <inttypes.h>

static cn_device attr_device(const cn_attrs *a) {
    return CN_DEVICE((int32_t)a->i[0], (int32_t)a->i[1]);
}

static int to_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a, cn_meta *m) {
    (void)nin;
    /* (cn_to gives a device of this rank as the local one.) Another rank's
     * holds nothing here, in a graph too: a scope places steps there. */
    if (a->i[0] >= 0 && a->i[0] <= INT32_MAX && a->i[1] >= 0 && a->i[1] <= INT32_MAX &&
        cn_device_remote(attr_device(a)))
        return cn_fail_remote_device(op->name, attr_device(a));
    if (a->i[0] < 0 || a->i[0] >= CN_DEVICE_KIND_COUNT || a->i[1] < 0 || a->i[1] > INT32_MAX)
        return cn_failc(CN_EINVAL, "%s: device kind %" PRId64 " index %" PRId64
                                   " is not a device", op->name, a->i[0], a->i[1]);
    if (!cn_backend_for(attr_device(a), op->name)) return CN_EINVAL;
    a->i[2] = a->i[2] != 0;
    m->dtype = (cn_dtype)in[0]->dtype;
    m->ndim = in[0]->ndim;
    memcpy(m->shape, in[0]->shape, sizeof m->shape);
    return CN_OK;
}

static cn_tensor *to_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                         cn_tensor *g, int i) {
    (void)nin, (void)a, (void)out, (void)i;
    return cn_to(g, cn_t_device(in[0]));
}

static cn_tensor *to_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin, const cn_attrs *a,
                         cn_tensor *out) {
    (void)in, (void)nin, (void)out;
    return cn_to(tin[0], attr_device(a));
}

const cn_op_def cn_opdef_to = {
    .name = "to",
    .ninputs = 1,
    .flags = CN_OPF_NO_HALF | CN_OPF_TRANSFER,
    .attrs = {{"device_kind", CN_ATTR_INT, 0, 0},
              {"device_index", CN_ATTR_INT, 1, 0},
              {"async", CN_ATTR_BOOL, 2, 0}},
    .infer = to_infer,
    .vjp = to_vjp,
    .jvp = to_jvp,
    .onnx = "Identity",
    .doc = "y = x, copied to another device",
};

static cn_tensor *to_impl(cn_tensor *t, cn_device d, bool async) {
    if (!t) return NULL;
    d = cn_device_here(d);
    if (cn_device_equal(cn_t_device(t), d) && !cn_is_symbolic(t))
        return cn_scope_add(cn_retain(t));
    cn_attrs a = {0};
    a.i[0] = d.kind;
    a.i[1] = d.index;
    a.i[2] = async;
    return cn_op_apply(CN_OP_to, &t, 1, &a);
}

cn_tensor *cn_to(cn_tensor *t, cn_device d) { return to_impl(t, d, false); }
cn_tensor *cn_to_async(cn_tensor *t, cn_device d) { return to_impl(t, d, true); }
