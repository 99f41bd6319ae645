/* cn_op_run: the one path every op application takes. */
#include "op.h"
#include "cost.h"
#include "../core/profiler.h"

#include <stdlib.h>

#define INLINE_INPUTS 8
#define INLINE_INPUTS_T 8

cn_symbolic_hook cn_graph_symbolic_hook = NULL;
cn_record_hook cn_graph_record_hook = NULL;
_Thread_local int cn_dual_level = 0;
_Thread_local uint32_t cn_dual_gen = 0;

/* The output's tangent from the inputs' tangents (forward mode). The rule
 * runs with propagation off: it is built from primals, not duals. */
static int push_tangent(const cn_op_def *op, cn_tensor *const *in, int nin, const cn_attrs *a,
                        cn_tensor *out) {
    cn_tensor *tin_buf[INLINE_INPUTS_T];
    cn_tensor **tin = nin > INLINE_INPUTS_T ? malloc(sizeof *tin * (size_t)nin) : tin_buf;
    if (!tin) return cn_failc(CN_ENOMEM, "%s: out of memory", op->name);
    bool any = false;
    for (int i = 0; i < nin; i++) {
        tin[i] = cn_tangent_of(in[i]);
        any |= tin[i] != NULL;
    }
    int rc = CN_OK;
    if (any && !(op->flags & CN_OPF_NONDIFF)) {
        if (!op->jvp) {
            rc = cn_failc(CN_EUNSUPPORTED, "%s: no forward-mode (jvp) rule", op->name);
        } else {
            int saved = cn_dual_level;
            cn_dual_level = 0;
            cn_scope_begin();
            /* The tangent is stored on out, so a rule that builds it from out
             * while its ops are recorded (or are graph nodes) would make the
             * tangent's history hold out: a cycle never freed. Rules see an
             * alias of out instead, sharing its data, history and graph, so
             * every rule may use out freely. */
            cn_tensor *o = cn_t_alias(out);
            if (o) {
                o->node = out->node;
                if (o->node) o->node->refcount++;
                o->requires_grad = out->requires_grad;
                cn_scope_add(o);
            }
            cn_tensor *t = o ? op->jvp(in, tin, nin, a, o) : NULL;
            if (t) {
                cn_retain(t);
                cn_release(out->tangent);
                out->tangent = t;
                out->tangent_gen = cn_dual_gen;
            } else {
                rc = CN_EINVAL;
            }
            cn_scope_end();
            cn_dual_level = saved;
        }
    }
    if (tin != tin_buf) free(tin);
    return rc;
}

static int category(cn_dtype dt) {
    if (dt == CN_BOOL) return 0;
    return cn_dtype_is_float(dt) ? 2 : 1;
}

/* PyTorch's result_type over several operands: dimensioned tensors decide
 * within a category, rank-0 tensors only raise the category. */
static cn_dtype result_type_n(cn_tensor *const *in, int nin) {
    int have_dim = 0, have_zero = 0;
    cn_dtype dim_t = CN_BOOL, zero_t = CN_BOOL;
    for (int i = 0; i < nin; i++) {
        cn_dtype d = (cn_dtype)in[i]->dtype;
        if (in[i]->ndim == 0) {
            zero_t = have_zero++ ? cn_promote_types(zero_t, d) : d;
        } else {
            dim_t = have_dim++ ? cn_promote_types(dim_t, d) : d;
        }
    }
    if (!have_dim) return zero_t;
    if (have_zero && category(zero_t) > category(dim_t)) return zero_t;
    return dim_t;
}

/* The device the op runs on: that of the inputs, which must agree, but for
 * rank-0 CPU tensors (Python-style scalars), which join any device and are
 * copied there (*slot replaced, the copy kept in owned[]). Symbolic inputs
 * are placed by the static program, not here. Returns 0 or -1 after
 * cn_fail naming both devices. */
static int pick_device(const cn_op_def *op, cn_tensor **in, int nin, cn_device *dev,
                       cn_tensor **owned, int *nowned) {
    int first = -1;
    for (int i = 0; i < nin; i++) {
        const cn_storage *s = in[i]->storage;
        if (!s || (s->device_kind == CN_DEVICE_CPU && in[i]->ndim == 0)) continue;
        if (first < 0) {
            first = i;
            *dev = cn_storage_device(s);
        } else if (s->device_kind != dev->kind || s->device_index != dev->index) {
            return cn_failc(CN_EINVAL,
                            "%s: inputs on different devices: input %d is on %s and input %d on "
                            "%s (move one with cn_to)",
                            op->name, first, cn_dev_name(*dev), i,
                            cn_dev_name(cn_storage_device(s)));
        }
    }
    if (first < 0) {
        *dev = CN_CPU;
        return 0;
    }
    if (dev->kind == CN_DEVICE_CPU) return 0;
    for (int i = 0; i < nin; i++) {
        const cn_storage *s = in[i]->storage;
        if (!s || s->device_kind != CN_DEVICE_CPU) continue;
        cn_tensor *c = cn_t_to(in[i], *dev, false);
        if (!c) return -1;
        owned[(*nowned)++] = c;
        in[i] = c;
    }
    return 0;
}

/* The transfer op (cn_to): the output goes to the device in its
 * attributes, whatever the input's. */
static cn_tensor *run_transfer(cn_tensor *x, const cn_attrs *a, const cn_meta *m) {
    cn_device d = CN_DEVICE((int32_t)a->i[0], (int32_t)a->i[1]);
    cn_tensor *out = cn_t_empty_on(d, m->dtype, m->ndim, m->shape);
    if (out && cn_transfer(out, x, a->i[2] != 0) < 0) {
        cn_release(out);
        return NULL;
    }
    return out;
}

static inline cn_tensor *kernel_run(cn_op_id id, cn_tensor *const *in, int nin,
                                     const cn_attrs *a, const cn_meta *m, cn_device dev,
                                     cn_tensor *out) {
    const cn_op_def *op = cn_ops[id];
    if (CN_UNLIKELY(cn_op_is_custom(id))) return cn_custom_kernel_run(id, in, nin, a, m, dev, out);
    if (CN_LIKELY(dev.kind == CN_DEVICE_CPU && !(op->flags & CN_OPF_TRANSFER))) {
        cn_kernel_fn k = cn_backend_cpu.kernels[id];
        if (!out && !(out = cn_t_empty(m->dtype, m->ndim, m->shape))) return NULL;
        if ((cn_shape_numel(m->ndim, m->shape) > 0 || (op->flags & (CN_OPF_RANDOM | CN_OPF_COMM))) &&
            k(id, in, nin, a, out) < 0) {
            cn_release(out);
            return NULL;
        }
        return out;
    }
    if (op->flags & CN_OPF_TRANSFER) {
        cn_release(out);
        return run_transfer(in[0], a, m);
    }
    const cn_backend *be = dev.kind == CN_DEVICE_CPU ? &cn_backend_cpu : cn_backend_for(dev, op->name);
    if (!be) {
        cn_release(out);
        return NULL;
    }
    cn_kernel_fn k = be->kernels[id];
    if (!k) {
        cn_release(out);
        return cn_fail("%s: no kernel on %s (the %s backend does not implement this op)",
                       op->name, cn_dev_name(dev), be->name);
    }
    if (!out && !(out = cn_t_empty_on(dev, m->dtype, m->ndim, m->shape))) return NULL;
    if (cn_shape_numel(m->ndim, m->shape) > 0 || (op->flags & (CN_OPF_RANDOM | CN_OPF_COMM))) {
        if (k(id, in, nin, a, out) < 0) {
            cn_release(out);
            return NULL;
        }
    }
    return out;
}

cn_tensor *cn_kernel_run(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                         const cn_meta *m, cn_device dev, cn_tensor *out) {
    return kernel_run(id, in, nin, a, m, dev, out);
}

/* Are the inputs on the CPU, or symbolic with the CPU the default device?
 * (Autocast's native path is the CPU's matmul kernel.) */
static bool on_cpu(cn_tensor *const *in, int nin) {
    for (int i = 0; i < nin; i++) {
        if (in[i]->storage ? in[i]->storage->device_kind != CN_DEVICE_CPU
                           : cn_get_default_device().kind != CN_DEVICE_CPU)
            return false;
    }
    return true;
}

/* Replace *slot by a cast of it to dt, kept in owned[] for release. graph:
 * a symbolic input of the op, which builds a graph node, so the cast of a
 * concrete input (a parameter under autocast) joins that graph too;
 * computed now, it would be a constant of the graph, stale once the
 * optimiser moves the parameter. */
static int cast_input_to(cn_tensor **slot, cn_dtype dt, const cn_tensor *graph,
                         cn_tensor **owned, int *nowned) {
    cn_attrs ca = {0};
    ca.i[0] = dt;
    cn_tensor *c;
    if (graph && !cn_is_symbolic(*slot) && cn_graph_symbolic_hook) {
        const cn_op_def *cop = cn_ops[CN_OP_cast];
        cn_meta m;
        memset(&m, 0, sizeof m);
        c = cop->infer(cop, slot, 1, &ca, &m) < 0
                ? NULL
                : cn_graph_symbolic_hook(CN_OP_cast, slot, 1, &ca, &m, graph);
    } else {
        c = cn_op_run(CN_OP_cast, slot, 1, &ca);
    }
    if (!c) return -1;
    owned[(*nowned)++] = c;
    *slot = c;
    return 0;
}

static int cast_input(cn_tensor **slot, cn_dtype dt, cn_tensor **owned, int *nowned) {
    return cast_input_to(slot, dt, NULL, owned, nowned);
}

/* Autocast's cast of an input. A transposed view of a contiguous matrix (a
 * linear layer's weight as matmul reads it) is cast as the matrix and then
 * viewed transposed again: the cast reads and writes whole rows, where a
 * cast of the view is a transposing copy (a third of a bf16 mlp step), and
 * the product's gradient comes out in the weight's own layout, with no
 * transposing copy back either. */
static int autocast_input(cn_tensor **slot, cn_dtype dt, const cn_tensor *graph,
                          cn_tensor **owned, int *nowned) {
    cn_tensor *x = *slot;
    if (x->ndim != 2 || x->shape[0] < 2 || x->shape[1] < 2 || x->strides[0] != 1 ||
        x->strides[1] != x->shape[0])
        return cast_input_to(slot, dt, graph, owned, nowned);
    cn_attrs swap = {0};
    swap.nlist = 2;
    swap.list[0] = 1;
    swap.list[1] = 0;
    cn_tensor *m = cn_op_run(CN_OP_permute, &x, 1, &swap); /* the contiguous matrix */
    if (!m) return -1;
    cn_tensor *tmp[1], *c = m;
    int ntmp = 0;
    int rc = cast_input_to(&c, dt, graph, tmp, &ntmp);
    cn_tensor *v = rc < 0 ? NULL : cn_op_run(CN_OP_permute, &c, 1, &swap);
    /* the records of the view and the cast hold what gradients need */
    cn_release(m);
    if (ntmp) cn_release(tmp[0]);
    if (!v) return -1;
    owned[(*nowned)++] = v;
    *slot = v;
    return 0;
}

/* A depthwise convolution (a group per channel, one filter each) or one of
 * its gradient products: bound by memory rather than by multiply-adds, so
 * autocast leaves it in f32. Rounding its input would cost a pass to bf16
 * and one back (its kernel is f32's), and save nothing: MobileNets ran
 * slower in bf16 than in f32. */
static bool depthwise_conv(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a) {
    int64_t g = a->i[0];
    if (g < 2 || nin < 2 || in[0]->ndim != 4 || in[1]->ndim != 4) return false;
    if (id == CN_OP_conv2d || id == CN_OP_conv_transpose2d)
        return in[1]->shape[0] == g && in[1]->shape[1] == 1;
    if (id == CN_OP_conv2d_weight_grad) return in[0]->shape[1] == g && in[1]->shape[1] == g;
    return false;
}

/* out = alias of x shaped by m, then the op's view fn sets its strides. */
static int view_onto(const cn_op_def *op, cn_tensor *x, const cn_attrs *a, const cn_meta *m,
                     cn_tensor *out) {
    out->ndim = (int8_t)m->ndim;
    memcpy(out->shape, m->shape, sizeof(int64_t) * (size_t)m->ndim);
    return op->view(op, x, a, out);
}

cn_tensor *cn_view_run(const cn_op_def *op, cn_tensor *x, const cn_attrs *a, const cn_meta *m,
                       cn_tensor *reuse) {
    cn_tensor *out;
    if (reuse && reuse->refcount == 1) {
        cn_storage *old = reuse->storage;
        memset(reuse, 0, sizeof *reuse);
        reuse->magic = CN_T_LIVE; /* cleared above; still the same live struct */
        cn_t_alias_into(reuse, x);
        reuse->refcount = 2; /* the owner's and the caller's */
        cn_storage_release(old);
        out = reuse;
    } else if (!(out = cn_t_alias(x))) {
        return NULL;
    }
    int r = view_onto(op, x, a, m, out);
    if (r == 1) {
        /* No strides express it: view a contiguous copy (torch.reshape). */
        cn_release(out);
        cn_tensor *c = cn_t_contiguous(x);
        out = c ? cn_t_alias(c) : NULL;
        r = out ? view_onto(op, c, a, m, out) : -1;
        cn_release(c);
        if (!out) return NULL;
    }
    if (r != 0) {
        if (r > 0) cn_fail("%s: internal error: no view of a contiguous tensor", op->name);
        cn_release(out);
        return NULL;
    }
    return out;
}

static __attribute__((cold, noinline)) cn_tensor *dead_input(const cn_op_def *op, cn_tensor *const *in, int nin) {
    for (int i = 0; i < nin; i++)
        if (cn_t_is_dead(in[i])) {
            cn_t_dead_fail(op->name, in[i]);
            break;
        }
    return NULL;
}

/* The body of cn_op_run, inlined into the plain path and the profiled one
 * so that the plain path is what it was before the profiler, plus one
 * branch. */
static inline __attribute__((always_inline)) cn_tensor *op_run(cn_op_id id,
                                                               cn_tensor *const *in_orig, int nin,
                                                               const cn_attrs *attrs) {
    const cn_op_def *op = cn_ops[id];
    /* Released inputs (docs/architecture.md, "Released tensors"): one
     * branch for all of them, taken only to report. */
    uint32_t dead = 0;
    for (int i = 0; i < nin; i++) {
        if (!in_orig[i]) return NULL; /* keep the first error */
        dead |= in_orig[i]->magic ^ CN_T_LIVE;
    }
    if (CN_UNLIKELY(dead)) return dead_input(op, in_orig, nin);
    if ((op->ninputs >= 0 && nin != op->ninputs) || (op->ninputs < 0 && nin < 1))
        return cn_fail("%s: got %d inputs, expects %d", op->name, nin, op->ninputs);

    cn_attrs a;
    if (attrs)
        a = *attrs;
    else
        memset(&a, 0, sizeof a);

    /* autocast's casts, then widening casts, then copies to the device */
    cn_tensor *in_buf[INLINE_INPUTS], *owned_buf[3 * INLINE_INPUTS + 1];
    cn_tensor **in = in_buf, **owned = owned_buf;
    if (nin > INLINE_INPUTS) {
        in = malloc(sizeof *in * (size_t)nin);
        owned = malloc(sizeof *owned * (size_t)(3 * nin + 1));
        if (!in || !owned) {
            free(in);
            free(owned);
            return cn_fail("%s: out of memory", op->name);
        }
    }
    int nowned = 0;
    memcpy(in, in_orig, sizeof *in * (size_t)nin);
    cn_tensor *out = NULL;
    cn_dtype half_dt = CN_DTYPE_COUNT; /* set when computing a half type in f32 */
    cn_device dev = CN_CPU;
    bool widen = !(op->flags & CN_OPF_NO_HALF), autocast = false;

    /* Autocast (autocast.c): a product's f32 inputs rounded by recorded
     * casts, whose gradients cast back to f32. The rounded values are then
     * widened again like any half input, unless the CPU multiplies them
     * itself (the native path of matmul and the convolutions: half inputs,
     * an f32 output). */
    if (CN_UNLIKELY(cn_autocast_dt != CN_F32) && (op->flags & CN_OPF_AUTOCAST)) {
        cn_dtype ac = (cn_dtype)cn_autocast_dt;
        const cn_tensor *graph = NULL;
        for (int i = 0; i < nin; i++)
            if (cn_is_symbolic(in[i])) graph = in[i];
        autocast = true; /* the result f32, depthwise convolutions' too */
        bool dw = depthwise_conv(id, in, nin, &a);
        for (int i = 0; i < nin && !dw; i++)
            if (in[i]->dtype == CN_F32 && autocast_input(&in[i], ac, graph, owned, &nowned) < 0)
                goto done;
        bool product = id == CN_OP_matmul || id == CN_OP_conv2d ||
                       id == CN_OP_conv_transpose2d || id == CN_OP_conv2d_weight_grad;
        bool all_half = !dw;
        for (int i = 0; i < nin; i++) all_half &= in[i]->dtype == ac;
        if (product && all_half && on_cpu(in, nin) && cn_autocast_native(ac)) widen = false;
    }

    /* Type promotion. */
    if (op->flags & CN_OPF_PROMOTE) {
        int from = op->promote_from;
        cn_dtype rt = result_type_n(in + from, nin - from);
        if ((op->flags & CN_OPF_FLOAT_MATH) && !cn_dtype_is_float(rt)) rt = CN_F32;
        if (cn_is_half(rt) && widen) {
            half_dt = rt;
            rt = CN_F32;
        }
        for (int i = from; i < nin; i++)
            if (in[i]->dtype != rt && cast_input(&in[i], rt, owned, &nowned) < 0) goto done;
    } else if (widen) {
        for (int i = 0; i < nin; i++) {
            cn_dtype d = (cn_dtype)in[i]->dtype;
            if (cn_is_half(d)) {
                half_dt = d;
                if (cast_input(&in[i], CN_F32, owned, &nowned) < 0) goto done;
            } else if ((op->flags & CN_OPF_FLOAT_MATH) && i == 0 && !cn_dtype_is_float(d)) {
                if (cast_input(&in[i], CN_F32, owned, &nowned) < 0) goto done;
            }
        }
    }

    cn_meta m;
    memset(&m, 0, sizeof m);
    if (op->infer(op, in, nin, &a, &m) < 0) goto done;

    bool symbolic = false, needs_grad = false, off_cpu = false;
    for (int i = 0; i < nin; i++) {
        symbolic |= cn_is_symbolic(in[i]);
        needs_grad |= in[i]->requires_grad;
        off_cpu |= in[i]->storage && in[i]->storage->device_kind != CN_DEVICE_CPU;
    }
    /* Inputs all on the CPU (the common case) need no more. */
    if (off_cpu && !symbolic && !(op->flags & CN_OPF_TRANSFER) &&
        pick_device(op, in, nin, &dev, owned, &nowned) < 0)
        goto done;
    if (symbolic) {
        if (!cn_graph_symbolic_hook) {
            cn_fail("%s: symbolic inputs need the static-graph layer, which is not linked", op->name);
            goto done;
        }
        out = cn_graph_symbolic_hook(id, in, nin, &a, &m, NULL);
        /* As eagerly (step 8 below): a half op's value is half in a graph
         * too, so a program's outputs have the dtypes eager mode gives. */
        if (out && half_dt != CN_DTYPE_COUNT && !autocast && out->dtype == CN_F32) {
            cn_tensor *o = out;
            cn_attrs ca = {0};
            ca.i[0] = half_dt;
            out = cn_op_run(CN_OP_cast, &o, 1, &ca);
            cn_release(o);
        }
        goto done;
    }

    if (op->flags & CN_OPF_VIEW) {
        out = cn_view_run(op, in[0], &a, &m, NULL);
        if (!out) goto done;
    } else {
        /* Computing inside a scope of another rank's device: nothing runs
         * there eagerly (views pass: modules view their parameters while a
         * graph is traced, and compute nothing). */
        if (CN_UNLIKELY(cn_check_eager_scope(op->name) < 0)) goto done;
        out = kernel_run(id, in, nin, &a, &m, dev, NULL);
        if (!out) goto done;
    }
    out->flags &= (uint8_t)~CN_TF_LEAF;

    if (needs_grad && !(op->flags & CN_OPF_NONDIFF) && cn_graph_record_hook &&
        cn_graph_record_hook(id, in, nin, &a, out) < 0) {
        cn_release(out);
        out = NULL;
        goto done;
    }

    if (cn_dual_level > 0 && push_tangent(op, in, nin, &a, out) < 0) {
        cn_release(out);
        out = NULL;
        goto done;
    }

    if (half_dt != CN_DTYPE_COUNT && !autocast && out && out->dtype == CN_F32) {
        cn_tensor *o = out;
        cn_attrs ca = {0};
        ca.i[0] = half_dt;
        out = cn_op_run(CN_OP_cast, &o, 1, &ca);
        cn_release(o);
    }

done:
    for (int i = 0; i < nowned; i++) cn_release(owned[i]);
    if (in != in_buf) free(in);
    if (owned != owned_buf) free(owned);
    return out;
}

/* The op timed and recorded (views aside: they move no data; and building
 * a static graph, which computes nothing). */
static __attribute__((noinline, cold)) cn_tensor *op_run_profiled(cn_op_id id,
                                                                   cn_tensor *const *in, int nin,
                                                                   const cn_attrs *attrs) {
    if (cn_ops[id]->flags & CN_OPF_VIEW) return op_run(id, in, nin, attrs);
    int64_t t0 = cn_prof_now();
    cn_tensor *out = op_run(id, in, nin, attrs);
    if (!out || cn_is_symbolic(out)) return out;
    cn_device dev = out->storage ? cn_storage_device(out->storage) : CN_CPU;
    /* Off the CPU the kernel was only queued: wait for it if asked. */
    if (dev.kind != CN_DEVICE_CPU && cn_prof_sync_devices()) cn_device_synchronize(dev);
    int64_t t1 = cn_prof_now();
    double flops, bytes;
    cn_op_cost(id, in, nin, attrs, out, &flops, &bytes);
    cn_prof_record(CN_PROFILE_OP, cn_ops[id]->name, t0, t1, flops, bytes, dev);
    return out;
}

cn_tensor *cn_op_run(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *attrs) {
    if (CN_UNLIKELY(cn_prof_on())) return op_run_profiled(id, in, nin, attrs);
    return op_run(id, in, nin, attrs);
}

cn_tensor *cn_op_apply(cn_op_id op, cn_tensor *const *in, int nin, const cn_attrs *a) {
    return cn_scope_add(cn_op_run(op, in, nin, a));
}
