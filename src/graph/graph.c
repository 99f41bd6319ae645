/* Static graphs: placeholders, symbolic values, compile and run.
 *
 * A symbolic tensor is a value of a graph: dtype and shape (sizes may be -1)
 * but no storage. The dispatcher hands any op with a symbolic input to
 * build_node, which records the node exactly as eager autograd would, so the
 * backward walk and every later pass see one IR.
 *
 * Programs (cn_compile, cn_run) are in program.c. */
#include "effects.h"

#include <inttypes.h>
#include <stdlib.h>


static void graph_destroy(cn_graph_head *h) {
    free(((cn_graph *)h)->effects); /* empty: its tensors held h */
    free(h);
}

static uint64_t graph_counter;

cn_graph *cn_graph_new(void) {
    cn_graph *g = calloc(1, sizeof *g);
    if (!g) return cn_fail("graph_new: out of memory");
    g->head.refcount = 1;
    g->head.destroy = graph_destroy;
    /* Atomic: threads build graphs of their own at once (an ONNX model each). */
    g->id = __atomic_add_fetch(&graph_counter, 1, __ATOMIC_RELAXED);
    return g;
}

void cn_graph_unref(cn_graph *g) {
    if (g && --g->head.refcount == 0) graph_destroy(&g->head);
}

/* The caller's handle goes: so do the effects, whose tensors would
 * otherwise keep the graph alive (effects.h). */
void cn_graph_free(cn_graph *g) {
    if (!g) return;
    cn_graph_clear_effects(g);
    cn_graph_unref(g);
}

bool cn_is_symbolic_tensor(const cn_tensor *t) { return t && cn_is_symbolic(t); }

static cn_tensor *new_symbolic(cn_graph *g, cn_dtype dt, int ndim, const int64_t *shape) {
    cn_tensor *t = cn_t_alloc();
    if (!t) return NULL;
    t->dtype = (uint8_t)dt;
    t->ndim = (int8_t)ndim;
    if (ndim) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    cn_contiguous_strides(ndim, t->shape, t->strides);
    t->flags = CN_TF_SYMBOLIC;
    t->graph = (struct cn_graph *)g;
    g->head.refcount++;
    return t;
}

cn_tensor *cn_placeholder(cn_graph *g, const char *name, cn_dtype dt, int ndim,
                          const int64_t *shape) {
    if (!g) return cn_fail("placeholder: graph is NULL");
    if ((unsigned)dt >= CN_DTYPE_COUNT) return cn_fail("placeholder: invalid dtype %d", (int)dt);
    if (ndim < 0 || ndim > CN_MAX_DIMS || (ndim > 0 && !shape))
        return cn_fail("placeholder: rank %d is out of range (0..%d) or shape is NULL", ndim,
                       CN_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < -1) {
            char b[160];
            return cn_fail("placeholder '%s': size %" PRId64 " in %s (use -1 for unknown)",
                           name ? name : "", shape[i], cn_fmt_shape(b, sizeof b, ndim, shape));
        }
    cn_tensor *t = new_symbolic(g, dt, ndim, shape);
    if (!t) return NULL;
    t->flags |= CN_TF_PLACEHOLDER | CN_TF_LEAF;
    if (cn_set_name(t, name) < 0) {
        cn_release(t);
        return NULL;
    }
    return cn_scope_add(t);
}

static cn_tensor *build_node(cn_op_id op, cn_tensor *const *in, int nin, const cn_attrs *a,
                             const cn_meta *m, const cn_tensor *join) {
    const cn_op_def *d = cn_ops[op];
    cn_graph *g = join ? (cn_graph *)join->graph : NULL;
    bool needs_grad = false;
    for (int i = 0; i < nin; i++) {
        if (cn_is_symbolic(in[i])) {
            cn_graph *gi = (cn_graph *)in[i]->graph;
            if (g && gi != g)
                return cn_fail("%s: inputs belong to different static graphs", d->name);
            g = gi;
        }
        needs_grad |= in[i]->requires_grad;
    }
    cn_tensor *t = new_symbolic(g, m->dtype, m->ndim, m->shape);
    if (!t) return NULL;
    t->node = cn_node_new_heap(op, in, nin, a);
    if (!t->node) {
        cn_release(t);
        return cn_fail("%s: out of memory building a graph node", d->name);
    }
    t->requires_grad = needs_grad && !(d->flags & CN_OPF_NONDIFF);
    /* Inside cn_device_scope_begin(d) ... _end() the step is placed on d
     * (passes/place.c); the node keeps d in its extra (a transfer goes
     * where its attributes say, whatever the scope). */
    cn_device sd;
    if (!(d->flags & CN_OPF_TRANSFER) && cn_device_scope_active(&sd)) {
        cn_device *e = malloc(sizeof *e);
        if (!e) {
            cn_release(t);
            return cn_fail("%s: out of memory building a graph node", d->name);
        }
        *e = sd;
        t->node->extra = e;
    }
    return t;
}

__attribute__((constructor)) static void install_symbolic_hook(void) {
    cn_graph_symbolic_hook = build_node;
    cn_node_extra_free = free; /* a symbolic node's scope device */
}
