/* Ops users register at run time (cn_register_op): each gets a cn_op_def of
 * its own in the tail of cn_ops[], whose infer, vjp and jvp adapt the
 * user's callbacks, so the dispatcher, autograd, static graphs and the
 * program passes treat it like a built-in op. Kernels are not in the
 * backends' tables (those are sized for the built-in ops): the dispatcher
 * and placement call cn_custom_kernel_run / cn_custom_has_kernel. */
#include "op.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct custom_op {
    cn_op_def def;   /* first: the table holds &def, impl points back here */
    cn_custom_op_def user;
    int id;
} custom_op;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static int ncustom; /* under reg_lock */

/* The vjp and jvp signatures carry no op, so infer stores the id in the
 * attribute list (custom ops have no list attribute of their own); every
 * later use of the attributes (the record, graph nodes, program steps)
 * then names the op. */
static const custom_op *custom_of_attrs(const cn_attrs *a) {
    if (a->nlist != 1 || !cn_op_is_custom((int)a->list[0]) || a->list[0] >= CN_OP_TABLE_SIZE)
        return NULL;
    const cn_op_def *d = cn_ops[a->list[0]];
    return d ? (const custom_op *)d->impl : NULL;
}

static void to_user_attrs(const cn_attrs *a, cn_custom_attrs *u) {
    for (int k = 0; k < 4; k++) {
        u->i[k] = a->i[k];
        u->f[k] = a->f[k];
    }
}

static int custom_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                        cn_meta *out) {
    const custom_op *c = op->impl;
    cn_custom_meta mi[CN_CUSTOM_MAX_INPUTS], mo;
    for (int k = 0; k < nin; k++) {
        mi[k].dtype = (cn_dtype)in[k]->dtype;
        mi[k].ndim = in[k]->ndim;
        memcpy(mi[k].shape, in[k]->shape, sizeof(int64_t) * CN_MAX_DIMS);
    }
    memset(&mo, 0, sizeof mo);
    mo.dtype = CN_DTYPE_COUNT; /* so a forgotten dtype is caught below */
    cn_custom_attrs ua;
    to_user_attrs(a, &ua);
    char err[512] = "";
    if (c->user.infer(c->user.user, mi, nin, &ua, &mo, err, sizeof err) != 0)
        return cn_failc(CN_EINVAL, "%s: %s", op->name, err[0] ? err : "invalid inputs (infer failed)");
    if (mo.ndim < 0 || mo.ndim > CN_MAX_DIMS)
        return cn_failc(CN_EINVAL, "%s: infer gave rank %d, not in [0, %d]", op->name, mo.ndim,
                        CN_MAX_DIMS);
    if ((unsigned)mo.dtype >= CN_DTYPE_COUNT)
        return cn_failc(CN_EINVAL, "%s: infer gave no valid output dtype", op->name);
    for (int d = 0; d < mo.ndim; d++)
        if (mo.shape[d] < -1)
            return cn_failc(CN_EINVAL, "%s: infer gave size %lld for axis %d", op->name,
                            (long long)mo.shape[d], d);
    out->dtype = mo.dtype;
    out->ndim = mo.ndim;
    memcpy(out->shape, mo.shape, sizeof(int64_t) * (size_t)mo.ndim);
    a->nlist = 1;
    a->list[0] = c->id;
    return 0;
}

static cn_tensor *custom_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                             cn_tensor *gout, int i) {
    const custom_op *c = custom_of_attrs(a);
    if (!c) return cn_fail("custom op: internal error: attributes name no custom op");
    cn_custom_attrs ua;
    to_user_attrs(a, &ua);
    cn_clear_error(); /* so a NULL without a message can be told apart */
    cn_tensor *g = c->user.vjp(c->user.user, in, nin, &ua, out, gout, i);
    if (!g) {
        if (!cn_last_error()[0]) cn_fail("%s: vjp for input %d returned NULL", c->def.name, i);
        return NULL;
    }
    bool same = g->ndim == in[i]->ndim;
    for (int d = 0; same && d < g->ndim; d++)
        same = g->shape[d] == in[i]->shape[d] || g->shape[d] < 0 || in[i]->shape[d] < 0;
    if (!same) {
        char b1[160], b2[160];
        return cn_fail("%s: vjp for input %d gave shape %s, the input has %s", c->def.name, i,
                       cn_shape_str(g, b1, sizeof b1), cn_shape_str(in[i], b2, sizeof b2));
    }
    return g;
}

static int custom_vjp_multi(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                            cn_tensor *gout, const bool *need, cn_tensor **g) {
    const custom_op *c = custom_of_attrs(a);
    if (!c) return cn_failc(CN_EINVAL, "custom op: internal error: attributes name no custom op");
    cn_custom_attrs ua;
    to_user_attrs(a, &ua);
    char err[512] = "";
    if (c->user.vjp_multi(c->user.user, in, nin, &ua, out, gout, need, g, err, sizeof err) != 0)
        return cn_failc(CN_EINVAL, "%s: %s", c->def.name, err[0] ? err : "vjp_multi failed");
    for (int i = 0; i < nin; i++) {
        if (!need[i]) continue;
        /* A missing gradient is zeros, as in PyTorch's custom functions. */
        if (!g[i] && !(g[i] = cn_zeros_like_op(in[i]))) return CN_EINVAL;
        bool same = g[i]->ndim == in[i]->ndim;
        for (int d = 0; same && d < g[i]->ndim; d++)
            same = g[i]->shape[d] == in[i]->shape[d] || g[i]->shape[d] < 0 || in[i]->shape[d] < 0;
        if (!same) {
            char b1[160], b2[160];
            return cn_failc(CN_EINVAL, "%s: gradient for input %d has shape %s, the input %s",
                            c->def.name, i, cn_shape_str(g[i], b1, sizeof b1),
                            cn_shape_str(in[i], b2, sizeof b2));
        }
    }
    return 0;
}

/* vjp for an op given only vjp_multi: the walk calls vjp_multi itself, but
 * the table needs a vjp (and other callers use it). */
static cn_tensor *custom_vjp_via_multi(cn_tensor *const *in, int nin, const cn_attrs *a,
                                       cn_tensor *out, cn_tensor *gout, int i) {
    bool need[CN_VJP_MULTI_MAX_IN] = {false};
    cn_tensor *g[CN_VJP_MULTI_MAX_IN] = {NULL};
    need[i] = true;
    return custom_vjp_multi(in, nin, a, out, gout, need, g) < 0 ? NULL : g[i];
}

static cn_tensor *custom_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                             const cn_attrs *a, cn_tensor *out) {
    const custom_op *c = custom_of_attrs(a);
    if (!c) return cn_fail("custom op: internal error: attributes name no custom op");
    cn_custom_attrs ua;
    to_user_attrs(a, &ua);
    cn_clear_error(); /* so a NULL without a message can be told apart */
    cn_tensor *t = c->user.jvp(c->user.user, in, tin, nin, &ua, out);
    if (!t && !cn_last_error()[0]) cn_fail("%s: jvp returned NULL", c->def.name);
    return t;
}

static bool valid_name(const char *s) {
    if (!s || !*s || strlen(s) > 64) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '.'))
            return false;
    return true;
}

static int check_def(const cn_custom_op_def *u) {
    if (!u) return cn_failc(CN_EINVAL, "register_op: def is NULL");
    if (!valid_name(u->name))
        return cn_failc(CN_EINVAL,
                        "register_op: name '%s' is not 1 to 64 of [A-Za-z0-9_.]",
                        u->name ? u->name : "(null)");
    _Static_assert(CN_CUSTOM_MAX_INPUTS <= CN_VJP_MULTI_MAX_IN, "vjp_multi takes fewer inputs");
    if (u->ninputs < 1 || u->ninputs > CN_CUSTOM_MAX_INPUTS)
        return cn_failc(CN_EINVAL, "register_op: %s: ninputs %d not in [1, %d]", u->name,
                        u->ninputs, CN_CUSTOM_MAX_INPUTS);
    if (!u->infer) return cn_failc(CN_EINVAL, "register_op: %s: no infer function", u->name);
    if (!u->cpu_kernel) return cn_failc(CN_EINVAL, "register_op: %s: no CPU kernel", u->name);
    if (u->flags & ~(unsigned)(CN_CUSTOM_PURE | CN_CUSTOM_NONDIFF))
        return cn_failc(CN_EINVAL, "register_op: %s: unknown flags 0x%x", u->name, u->flags);
    bool used[2][4] = {{false}};
    for (int k = 0; k < CN_CUSTOM_MAX_ATTRS && u->attrs[k].name; k++) {
        const cn_custom_attr_def *ad = &u->attrs[k];
        if (!valid_name(ad->name) || ad->slot < 0 || ad->slot > 3 || used[ad->is_float][ad->slot])
            return cn_failc(CN_EINVAL,
                            "register_op: %s: attribute %d ('%s') needs a name of [A-Za-z0-9_.] "
                            "and a %s slot of its own in [0, 3] (got %d)",
                            u->name, k, ad->name, ad->is_float ? "float" : "int", ad->slot);
        used[ad->is_float][ad->slot] = true;
    }
    return 0;
}

static char *dup_str(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int cn_register_op(const cn_custom_op_def *u) {
    if (check_def(u) < 0) return CN_EINVAL;
    custom_op *c = calloc(1, sizeof *c);
    if (!c) return cn_failc(CN_ENOMEM, "register_op: out of memory");
    c->user = *u;
    /* The strings are the caller's: keep copies (Python passes temporaries). */
    bool ok = (c->user.name = dup_str(u->name)) != NULL;
    if (u->doc) ok &= (c->user.doc = dup_str(u->doc)) != NULL;
    for (int k = 0; k < CN_CUSTOM_MAX_ATTRS && u->attrs[k].name; k++) {
        ok &= (c->user.attrs[k].name = dup_str(u->attrs[k].name)) != NULL;
        c->def.attrs[k] = (cn_attr_def){c->user.attrs[k].name,
                                        u->attrs[k].is_float ? CN_ATTR_FLOAT : CN_ATTR_INT,
                                        (uint8_t)u->attrs[k].slot, u->attrs[k].def};
    }
    c->def.name = c->user.name;
    c->def.ninputs = (int8_t)u->ninputs;
    /* Not known to be pure: kept out of folding, merging and parallel
     * groups, as random ops are. */
    c->def.flags = (u->flags & CN_CUSTOM_PURE ? 0u : (uint32_t)CN_OPF_RANDOM) |
                   (u->flags & CN_CUSTOM_NONDIFF ? (uint32_t)CN_OPF_NONDIFF : 0u);
    c->def.infer = custom_infer;
    c->def.vjp = u->vjp ? custom_vjp : u->vjp_multi ? custom_vjp_via_multi : NULL;
    c->def.vjp_multi = u->vjp_multi ? custom_vjp_multi : NULL;
    c->def.jvp = u->jvp ? custom_jvp : NULL;
    c->def.impl = c;
    c->def.doc = c->user.doc ? c->user.doc : "a custom op";
    int rc = CN_ENOMEM;
    if (!ok) {
        cn_failc(CN_ENOMEM, "register_op: out of memory");
        goto fail;
    }

    pthread_mutex_lock(&reg_lock);
    if (cn_op_find(u->name) || cn_custom_op_find(u->name) >= 0) {
        rc = cn_failc(CN_EINVAL, "register_op: an op named '%s' exists already", u->name);
    } else if (ncustom >= CN_OP_CUSTOM_MAX) {
        rc = cn_failc(CN_EUNSUPPORTED, "register_op: %s: the limit of %d custom ops is reached",
                      u->name, CN_OP_CUSTOM_MAX);
    } else {
        c->id = rc = CN_OP_CUSTOM_FIRST + ncustom;
        /* Written before the count that makes it findable, and before its
         * id is returned: readers never see a half-made entry. */
        __atomic_store_n(&cn_ops[c->id], &c->def, __ATOMIC_RELEASE);
        __atomic_store_n(&ncustom, ncustom + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&reg_lock);
    if (rc >= 0) {
        cn_clear_error();
        return rc;
    }
fail:
    free((void *)c->user.name);
    free((void *)c->user.doc);
    for (int k = 0; k < CN_CUSTOM_MAX_ATTRS; k++) free((void *)c->user.attrs[k].name);
    free(c);
    return rc;
}

int cn_custom_op_find(const char *name) {
    if (!name) return cn_failc(CN_EINVAL, "custom_op_find: name is NULL");
    int n = __atomic_load_n(&ncustom, __ATOMIC_ACQUIRE);
    for (int k = 0; k < n; k++) {
        const cn_op_def *d = __atomic_load_n(&cn_ops[CN_OP_CUSTOM_FIRST + k], __ATOMIC_ACQUIRE);
        if (strcmp(d->name, name) == 0) return CN_OP_CUSTOM_FIRST + k;
    }
    return CN_EINVAL; /* no message: register_op asks too, and it is no error there */
}

static const custom_op *custom_of_id(int op) {
    if (!cn_op_is_custom(op) || op >= CN_OP_CUSTOM_FIRST + __atomic_load_n(&ncustom, __ATOMIC_ACQUIRE))
        return NULL;
    return cn_ops[op]->impl;
}

cn_tensor *cn_apply_op(int op, cn_tensor *const *inputs, int ninputs, const cn_custom_attrs *attrs) {
    const custom_op *c = custom_of_id(op);
    if (!c) return cn_fail("apply_op: %d is not the id of a registered custom op", op);
    if (ninputs > 0 && !inputs) return cn_fail("apply_op: %s: inputs is NULL", c->def.name);
    cn_attrs a;
    memset(&a, 0, sizeof a);
    if (attrs) {
        for (int k = 0; k < 4; k++) {
            a.i[k] = attrs->i[k];
            a.f[k] = attrs->f[k];
        }
    } else {
        for (int k = 0; k < CN_CUSTOM_MAX_ATTRS && c->user.attrs[k].name; k++) {
            const cn_custom_attr_def *ad = &c->user.attrs[k];
            if (ad->is_float)
                a.f[ad->slot] = ad->def;
            else
                a.i[ad->slot] = (int64_t)ad->def;
        }
    }
    return cn_op_apply((cn_op_id)op, inputs, ninputs, &a);
}

bool cn_custom_has_kernel(cn_op_id id, cn_device_kind kind) {
    const custom_op *c = custom_of_id(id);
    if (!c) return false;
    if (kind == CN_DEVICE_CPU) return true;
    return (unsigned)kind < CN_DEVICE_KIND_COUNT && c->user.device_kernels[kind] != NULL;
}

static int call_kernel(const custom_op *c, cn_custom_kernel_fn k, cn_tensor *const *in, int nin,
                       const cn_attrs *a, cn_tensor *out, const char *where) {
    cn_custom_attrs ua;
    to_user_attrs(a, &ua);
    char err[512] = "";
    if (k(c->user.user, in, nin, &ua, out, err, sizeof err) != 0)
        return cn_failc(CN_EINVAL, "%s: %s", c->def.name,
                        err[0] ? err : where);
    return 0;
}

cn_tensor *cn_custom_kernel_run(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                                const cn_meta *m, cn_device dev, cn_tensor *out) {
    const custom_op *c = custom_of_id(id);
    if (!c) {
        cn_release(out);
        return cn_fail("op %d: internal error: not a registered custom op", (int)id);
    }
    if (nin > CN_CUSTOM_MAX_INPUTS) {
        cn_release(out);
        return cn_fail("%s: got %d inputs", c->def.name, nin);
    }
    cn_custom_kernel_fn dk = dev.kind != CN_DEVICE_CPU && (unsigned)dev.kind < CN_DEVICE_KIND_COUNT
                                 ? c->user.device_kernels[dev.kind]
                                 : NULL;
    bool on_host = dev.kind == CN_DEVICE_CPU || !dk;
    /* Kernels get contiguous inputs: user code then needs no strides. */
    cn_tensor *ci[CN_CUSTOM_MAX_INPUTS] = {0};
    cn_tensor *res = NULL, *host_out = NULL;
    int k = 0;
    for (; k < nin; k++)
        if (!(ci[k] = on_host ? cn_t_host_contiguous(in[k]) : cn_t_contiguous(in[k]))) goto done;
    if (!out && !(out = cn_t_empty_on(dev, m->dtype, m->ndim, m->shape))) goto done;
    if (cn_shape_numel(m->ndim, m->shape) == 0) {
        /* Nothing to compute, as for built-in kernels. */
    } else if (on_host && dev.kind != CN_DEVICE_CPU) {
        /* No kernel of its own there: compute on the host, then copy over. */
        if (!(host_out = cn_t_empty(m->dtype, m->ndim, m->shape))) goto done;
        if (call_kernel(c, c->user.cpu_kernel, ci, nin, a, host_out, "the CPU kernel failed") < 0 ||
            cn_transfer(out, host_out, false) < 0)
            goto done;
    } else if (call_kernel(c, on_host ? c->user.cpu_kernel : dk, ci, nin, a, out,
                           on_host ? "the CPU kernel failed" : "the device kernel failed") < 0) {
        goto done;
    }
    res = out;
    out = NULL;
done:
    for (int j = 0; j < k; j++) cn_release(ci[j]);
    cn_release(host_out);
    cn_release(out);
    return res;
}
