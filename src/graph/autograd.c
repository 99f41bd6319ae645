/* Reverse- and forward-mode automatic differentiation.
 *
 * Recording: when an input of an op requires a gradient (and recording is
 * on), the dispatcher calls record_node, which hangs a node (op, inputs,
 * attributes) on the output. The output keeps its history alive; the history
 * holds no reference to the output, so there are no cycles.
 *
 * Backward: collect every value reachable from the roots through inputs that
 * require a gradient, visit them in decreasing node creation order (a
 * topological order, since a node's inputs always exist before it), and call
 * each op's vjp rule. The rules are built from ops, so the same walk computes
 * numbers (eager), records a differentiable backward pass (create_graph), or
 * appends gradient nodes to a static graph (symbolic values). */
#include "../ops/op.h"
#include "../core/grad_hooks.h"
#include "../core/profiler.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int record_node(cn_op_id op, cn_tensor *const *in, int nin, const cn_attrs *a,
                       cn_tensor *out) {
    if (cn_grad_disabled) return CN_OK;
    cn_node *n = cn_node_new(op, in, nin, a);
    if (!n) return cn_failc(CN_ENOMEM, "%s: out of memory recording for autograd", cn_ops[op]->name);
    n->out_version = out->storage ? out->storage->version : 0;
    cn_node_release(out->node);
    out->node = n;
    out->requires_grad = 1;
    return CN_OK;
}

__attribute__((constructor)) static void install_record_hook(void) {
    cn_graph_record_hook = record_node;
}

/* ---- leaves ---- */

int cn_set_requires_grad(cn_tensor *t, bool requires_grad) {
    if (!t) return CN_EINVAL;
    CN_CHECK_LIVE("set_requires_grad", t, CN_EINVAL);
    if (t->node && !cn_is_symbolic(t))
        return cn_failc(CN_EINVAL,
                        "set_requires_grad: only leaves (tensors not made by an op) can be marked; "
                        "use cn_detach for a leaf copy");
    if (requires_grad && !cn_dtype_is_float((cn_dtype)t->dtype))
        return cn_failc(CN_EINVAL, "set_requires_grad: only float tensors can require a gradient, "
                                   "this one is %s",
                        cn_dtype_name((cn_dtype)t->dtype));
    t->requires_grad = requires_grad;
    return CN_OK;
}

bool cn_requires_grad(const cn_tensor *t) { return t && t->requires_grad; }

bool cn_is_leaf(const cn_tensor *t) { return t && !t->node; }

cn_tensor *cn_get_grad(const cn_tensor *t) {
    CN_CHECK_LIVE("get_grad", t, NULL);
    return t ? t->grad : NULL;
}

static bool same_shape(const cn_tensor *a, const cn_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

int cn_set_grad(cn_tensor *t, cn_tensor *grad) {
    if (!t) return CN_EINVAL;
    CN_CHECK_LIVE("set_grad", t, CN_EINVAL);
    CN_CHECK_LIVE("set_grad", grad, CN_EINVAL);
    if (grad && !same_shape(t, grad)) {
        char b1[160], b2[160];
        return cn_failc(CN_EINVAL, "set_grad: gradient %s does not match tensor %s",
                        cn_shape_str(grad, b1, sizeof b1), cn_shape_str(t, b2, sizeof b2));
    }
    cn_retain(grad);
    cn_release(t->grad);
    t->grad = grad;
    return CN_OK;
}

void cn_zero_grad(cn_tensor *t) {
    CN_CHECK_LIVE("zero_grad", t, );
    if (!t) return;
    cn_release(t->grad);
    t->grad = NULL;
}

cn_tensor *cn_detach(cn_tensor *t) {
    if (!t) return NULL;
    CN_CHECK_LIVE("detach", t, NULL);
    cn_tensor *d = cn_t_alias(t);
    if (!d) return NULL;
    d->flags |= CN_TF_LEAF;
    return cn_scope_add(d);
}

/* ---- the walk's index on each tensor ---- */

static uint32_t walk_epoch_counter;

/* A walk inside another (a custom op's backward that runs one, as a
 * recomputing checkpoint does) overwrites the outer walk's index on the
 * tensors both reach (the parameters): it logs what it overwrites and puts
 * it back at its end. */
typedef struct map_undo {
    cn_tensor *t;
    uint32_t epoch;
    int32_t idx;
} map_undo;

static _Thread_local int walk_depth;

typedef struct epoch_map {
    uint32_t epoch;
    bool nested;
    bool oom;
    map_undo *log;
    int nlog, cap_log;
} epoch_map;

static int32_t map_get(const epoch_map *m, const cn_tensor *t) {
    return t->walk_epoch == m->epoch ? t->walk_idx : -1;
}

static void map_put(epoch_map *m, cn_tensor *t, int32_t v) {
    if (m->nested && t->walk_epoch != m->epoch) {
        if (m->nlog == m->cap_log) {
            int nc = m->cap_log ? 2 * m->cap_log : 64;
            map_undo *nl = realloc(m->log, sizeof *nl * (size_t)nc);
            if (!nl) {
                m->oom = true;
                return;
            }
            m->log = nl;
            m->cap_log = nc;
        }
        m->log[m->nlog++] = (map_undo){t, t->walk_epoch, t->walk_idx};
    }
    t->walk_epoch = m->epoch;
    t->walk_idx = v;
}

static void map_restore(epoch_map *m) {
    for (int i = m->nlog - 1; i >= 0; i--) {
        m->log[i].t->walk_epoch = m->log[i].epoch;
        m->log[i].t->walk_idx = m->log[i].idx;
    }
    free(m->log);
}

/* ---- the backward walk ---- */

typedef struct value {
    cn_tensor *t;     /* retained during the walk */
    cn_tensor *grad;  /* accumulated gradient (owned), or NULL */
    bool needed;      /* on a path to a target */
    bool target;
    bool hooked;      /* its tensor's gradient hooks have run on grad */
    int32_t last_use; /* the walk index of the last node reading it (-1: none) */
} value;

/* The gradient-ready hook (per thread): called as soon as a leaf's .grad is
 * final in a cn_backward, while the walk goes on (data-parallel training
 * starts averaging it then). Without a hook leaves get their gradients at
 * the end, as before. */
static _Thread_local cn_grad_ready_fn grad_ready_fn;
static _Thread_local void *grad_ready_ctx;

void cn_set_grad_ready_hook(cn_grad_ready_fn fn, void *ctx) {
    grad_ready_fn = fn;
    grad_ready_ctx = ctx;
}

typedef struct walk {
    value *v; /* the values with a node, then (once collected) the leaves */
    int n, cap;
    value *leaves; /* leaves while collecting, numbered from LEAF_MARK */
    int nleaves, leaves_cap;
    epoch_map map;
} walk;

/* A leaf's walk index while collecting: it moves behind the values with a
 * node once they are all known. */
#define LEAF_MARK (1 << 30)

static bool push_value(value **arr, int *n, int *cap, cn_tensor *t) {
    if (*n == *cap) {
        int ncap = *cap ? *cap * 2 : 64;
        value *nv = realloc(*arr, sizeof *nv * (size_t)ncap);
        if (!nv) return false;
        *arr = nv;
        *cap = ncap;
    }
    (*arr)[(*n)++] = (value){.t = cn_retain(t)};
    return true;
}

/* Collecting keeps the values with a node apart from the leaves, so the
 * walk's order (nodes, then leaves) needs no second pass over them. */
static int walk_add(walk *w, cn_tensor *t) {
    if (map_get(&w->map, t) >= 0) return 0;
    if (t->node) {
        if (!push_value(&w->v, &w->n, &w->cap, t)) return -1;
        map_put(&w->map, t, w->n - 1);
    } else {
        if (!push_value(&w->leaves, &w->nleaves, &w->leaves_cap, t)) return -1;
        map_put(&w->map, t, LEAF_MARK + w->nleaves - 1);
    }
    return w->map.oom ? -1 : 0;
}

/* Decreasing creation number; nodes of different threads may share one
 * (per-thread clocks, node.c), and those keep their collection order
 * (last_use holds it while sorting): qsort is not stable, and the order
 * decides how a shared input's gradient contributions are summed. */
static int cmp_seq_desc(const void *a, const void *b) {
    const value *x = a, *y = b;
    uint64_t sx = x->t->node ? x->t->node->seq : 0, sy = y->t->node ? y->t->node->seq : 0;
    if (sx != sy) return sx < sy ? 1 : -1;
    return (x->last_use > y->last_use) - (x->last_use < y->last_use);
}

/* grad may broadcast or differ in dtype from t after a sloppy rule; the
 * engine insists on an exact match so errors surface at the op at fault. */
static int check_grad(const cn_op_def *op, int i, const cn_tensor *in, const cn_tensor *g) {
    if (!same_shape(in, g)) {
        char b1[160], b2[160];
        return cn_failc(CN_EINVAL, "backward: %s's gradient for input %d is %s, expected %s",
                        op->name, i, cn_shape_str(g, b1, sizeof b1), cn_shape_str(in, b2, sizeof b2));
    }
    return CN_OK;
}

static bool accumulate_leaf(cn_tensor *acc, cn_tensor *g);

/* Add g into *acc (both owned references). */
static int accumulate(cn_tensor **acc, cn_tensor *g) {
    if (!*acc) {
        *acc = g;
        return CN_OK;
    }
    /* A sum only this walk holds (no other reference to it or its data)
     * takes g in place: a value used many times (a weight shared by every
     * step of a loop) then costs no new tensor per use. */
    cn_tensor *a = *acc;
    if (a->refcount == 1 && a->storage && a->storage->refcount == 1 && accumulate_leaf(a, g))
        return CN_OK;
    cn_tensor *pair[2] = {*acc, g};
    cn_tensor *s = cn_op_run(CN_OP_add, pair, 2, NULL);
    cn_release(*acc);
    cn_release(g);
    *acc = s;
    return s ? CN_OK : CN_EINVAL;
}

/* A gradient stored in a leaf must be its own contiguous buffer: optimisers
 * and clipping update it in place. */
static cn_tensor *own_buffer(cn_tensor *g) {
    if (cn_is_symbolic(g) || g->node) return g;
    /* Only a gradient nothing else holds (a hook, or the caller's seed,
     * may hold one): the next backward pass adds into .grad in place. */
    if (cn_is_contiguous(g) && g->refcount == 1 && g->storage->refcount == 1 && g->offset == 0)
        return g;
    cn_tensor *c = cn_op_run(CN_OP_contiguous, &g, 1, NULL);
    cn_release(g);
    return c;
}

/* Add g into a leaf's existing eager gradient in place, as PyTorch does: a
 * gradient set with cn_set_grad (a view into a flat buffer of all
 * parameters' gradients, say) stays where its owner put it. Consumes g when
 * it returns true; false means "not possible here, accumulate out of place". */
static bool accumulate_leaf(cn_tensor *acc, cn_tensor *g) {
    /* A recorded g (create_graph) must stay differentiable: out of place. */
    if (cn_is_symbolic(acc) || cn_is_symbolic(g) || acc->node || acc->requires_grad || g->node ||
        g->requires_grad || acc->dtype != g->dtype || !same_shape(acc, g) || !acc->storage)
        return false;
    /* A stride-0 (broadcast) gradient cannot take distinct sums. */
    for (int i = 0; i < acc->ndim; i++)
        if (acc->strides[i] == 0 && acc->shape[i] > 1) return false;
    /* The add kernel of acc's backend, writing over its first input: acc
     * must be contiguous (a kernel's output is) and g on acc's device. */
    if (!cn_is_contiguous(acc) || !cn_device_equal(cn_t_device(acc), cn_t_device(g)))
        return false;
    cn_tensor *pair[2] = {acc, g};
    cn_kernel_fn add = cn_backend_of(acc)->kernels[CN_OP_add];
    cn_attrs none = {0};
    if (!add || add(CN_OP_add, pair, 2, &none, acc) < 0) return false;
    cn_storage_bump(acc->storage);
    cn_release(g);
    return true;
}

/* Input x's gradient added in place by the op's vjp_add rule into the sum
 * this walk keeps for x (created as zeros if there is none yet), when the
 * walk owns that sum outright. True if done; false leaves everything as it
 * was, for the vjp rule. g stays the caller's. */
static bool add_in_place(cn_tensor **acc, const cn_op_def *op, const cn_node *n, int i,
                         cn_tensor *g) {
    const cn_tensor *x = n->in[i];
    if (cn_is_symbolic(g) || g->node || g->requires_grad || g->dtype != x->dtype) return false;
    cn_tensor *a = *acc;
    if (!a && (op->flags & CN_OPF_VJP_ADD_INTO)) return false;
    if (!a) {
        a = cn_t_full_on(cn_t_device(g), (cn_dtype)x->dtype, x->ndim, x->shape, 0);
        if (!a) return false;
    } else if (a->refcount != 1 || !a->storage || a->storage->refcount != 1 || a->node ||
               a->requires_grad || a->dtype != g->dtype || !same_shape(a, x)) {
        return false;
    } else {
        for (int d = 0; d < a->ndim; d++)
            if (a->strides[d] == 0 && a->shape[d] > 1) return false;
    }
    if (op->vjp_add(n->in, n->nin, n->attrs, g, i, a) < 0) {
        if (a != *acc) cn_release(a);
        return false;
    }
    cn_storage_bump(a->storage);
    *acc = a;
    return true;
}

/* A rule's gradient gi for input x (i) checked and cast to x's dtype, or
 * NULL after cn_fail (also when gi is). */
static cn_tensor *checked_grad(const cn_op_def *op, int i, const cn_tensor *x, cn_tensor *gi) {
    if (!gi || check_grad(op, i, x, gi) < 0) return NULL;
    return gi->dtype == x->dtype ? gi : cn_cast(gi, (cn_dtype)x->dtype);
}

/* The walk's error for a rule that failed, with the rule's message. */
static int rule_failed(const char *fn, const cn_op_def *op) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", cn_last_error());
    return cn_failc(CN_EINVAL, "%s: in the gradient of %s: %s", fn, op->name, msg);
}

/* Was graph node n built inside a scope of a rank device ("rank:1/cpu:0"; the
 * graph layer keeps the scope in n->extra)? */
static bool on_rank_device(const cn_node *n) {
    return n->extra && cn_device_rank(*(const cn_device *)n->extra) >= 0;
}

/* Every needed input gradient of node n (output v) from one vjp_multi
 * call, checked and added into the walk's sums as vjp's results are. */
static int walk_vjp_multi(walk *w, const cn_op_def *op, const cn_node *n, value *v,
                          const char *fn) {
    if (n->nin > CN_VJP_MULTI_MAX_IN)
        return cn_failc(CN_EINVAL, "%s: %s has %d inputs, more than vjp_multi takes", fn, op->name,
                        n->nin);
    bool need[CN_VJP_MULTI_MAX_IN];
    cn_tensor *g[CN_VJP_MULTI_MAX_IN];
    int32_t at[CN_VJP_MULTI_MAX_IN];
    for (int i = 0; i < n->nin; i++) {
        at[i] = map_get(&w->map, n->in[i]);
        need[i] = at[i] >= 0 && w->v[at[i]].needed && n->in[i]->requires_grad;
        g[i] = NULL;
    }
    cn_scope_begin();
    int rc = op->vjp_multi(n->in, n->nin, n->attrs, v->t, v->grad, need, g);
    /* g[i]: owned for the needed inputs, NULL for the rest. */
    for (int i = 0; i < n->nin; i++) {
        if (need[i] && rc >= 0 && !g[i])
            rc = cn_failc(CN_EINVAL, "%s gave no gradient for input %d", op->name, i);
        else if (need[i] && rc >= 0 && !(g[i] = checked_grad(op, i, n->in[i], g[i])))
            rc = CN_EINVAL;
        g[i] = need[i] && rc >= 0 ? cn_retain(g[i]) : NULL;
    }
    cn_scope_end();
    if (rc < 0) {
        for (int i = 0; i < n->nin; i++) cn_release(g[i]);
        return rule_failed(fn, op);
    }
    for (int i = 0; i < n->nin; i++) {
        if (g[i] && accumulate(&w->v[at[i]].grad, g[i]) < 0) {
            for (int k = i + 1; k < n->nin; k++) cn_release(g[k]);
            return CN_EINVAL;
        }
    }
    return CN_OK;
}

/* v's gradient is complete: its tensor's hooks (Tensor.register_hook) may
 * look at it and replace it, once. */
static int run_hooks(value *v) {
    if (v->hooked || !v->grad || !cn_has_grad_hooks(v->t)) return CN_OK;
    v->hooked = true;
    return cn_run_grad_hooks(v->t, &v->grad);
}

/* Move v's gradient into its leaf's .grad (adding to one it has). */
static int deliver_leaf(value *v, bool create) {
    if (run_hooks(v) < 0) return CN_EINVAL;
    cn_tensor *g = v->grad;
    v->grad = NULL;
    if (v->t->grad) {
        if (accumulate_leaf(v->t->grad, g)) return CN_OK;
        return accumulate(&v->t->grad, g) < 0 ? CN_EINVAL : CN_OK;
    }
    /* A new .grad gets its own buffer (only then: copying a gradient that
     * is about to be added somewhere is waste). */
    if (!create && !(g = own_buffer(g))) return CN_EINVAL;
    v->t->grad = g;
    return CN_OK;
}

typedef struct engine_args {
    cn_tensor *const *roots;
    cn_tensor *const *seeds;
    int nroots;
    cn_tensor *const *inputs; /* NULL: accumulate into every leaf */
    int ninputs;
    cn_tensor **grads;
    unsigned flags;
    const char *fn;
} engine_args;

static int run_engine(const engine_args *e) {
    walk w = {0};
    int rc = CN_OK;
    bool free_record = false;
    /* Epoch 0 is never used: fresh tensors have walk_epoch 0. */
    do w.map.epoch = __atomic_add_fetch(&walk_epoch_counter, 1, __ATOMIC_RELAXED);
    while (w.map.epoch == 0);
    w.map.nested = ++walk_depth > 1;
    bool create = e->flags & CN_GRAD_CREATE_GRAPH;
    bool prev_enabled = cn_set_grad_enabled(create);

    for (int r = 0; r < e->nroots; r++) {
        cn_tensor *root = e->roots[r];
        if (!root) {
            rc = CN_EINVAL;
            goto out;
        }
        if (!root->requires_grad) {
            rc = cn_failc(CN_EINVAL,
                          "%s: output %d does not require a gradient (no input it was computed "
                          "from requires one, or it was computed with recording off)",
                          e->fn, r);
            goto out;
        }
        if (walk_add(&w, root) < 0) goto oom;
    }
    /* Collect everything reachable through values that require a gradient,
     * noting whether the values with a node came in decreasing creation
     * order (the breadth-first collection of a chain such as an unrolled
     * loop does), which the walk needs. */
    bool sorted = true;
    uint64_t prev_seq = UINT64_MAX;
    for (int k = 0; k < w.n; k++) {
        cn_node *n = w.v[k].t->node;
        if (n->freed) {
            rc = cn_failc(CN_ESTATE,
                          "%s: the recorded graph was already freed by an earlier backward; pass "
                          "CN_GRAD_RETAIN_GRAPH to the first call to go through it twice",
                          e->fn);
            goto out;
        }
        if (n->seq >= prev_seq) sorted = false;
        prev_seq = n->seq;
        for (int i = 0; i < n->nin; i++)
            if (n->in[i]->requires_grad && walk_add(&w, n->in[i]) < 0) goto oom;
    }
    int nodes = w.n;
    if (!sorted) {
        for (int k = 0; k < nodes; k++) w.v[k].last_use = k;
        qsort(w.v, (size_t)nodes, sizeof *w.v, cmp_seq_desc);
        for (int k = 0; k < nodes; k++) map_put(&w.map, w.v[k].t, k);
    }
    /* The leaves after them (in any order: they have no rule to call). */
    if (w.nleaves > w.cap - w.n) {
        value *nv = realloc(w.v, sizeof *nv * (size_t)(w.n + w.nleaves));
        if (!nv) goto oom;
        w.v = nv;
        w.cap = w.n + w.nleaves;
    }
    for (int j = 0; j < w.nleaves; j++) {
        w.v[w.n] = w.leaves[j];
        map_put(&w.map, w.v[w.n].t, w.n);
        w.n++;
    }
    w.nleaves = 0;
    /* Targets: the requested inputs, or every leaf. */
    if (e->inputs) {
        for (int i = 0; i < e->ninputs; i++) {
            if (!e->inputs[i]) {
                rc = CN_EINVAL;
                goto out;
            }
            int32_t k = map_get(&w.map, e->inputs[i]);
            if (k >= 0) w.v[k].target = true;
        }
    } else {
        for (int k = nodes; k < w.n; k++) w.v[k].target = true;
    }
    /* needed = leads to a target; inputs come later in this order. */
    for (int k = w.n - 1; k >= 0; k--) {
        value *v = &w.v[k];
        v->needed = v->target;
        cn_node *n = v->t->node;
        if (!n) continue;
        for (int i = 0; i < n->nin && !v->needed; i++) {
            int32_t j = map_get(&w.map, n->in[i]);
            if (j >= 0 && w.v[j].needed) v->needed = true;
        }
    }
    /* Seeds. */
    for (int r = 0; r < e->nroots; r++) {
        cn_tensor *root = e->roots[r], *seed = e->seeds ? e->seeds[r] : NULL, *g;
        if (seed) {
            if (!same_shape(seed, root)) {
                char b1[160], b2[160];
                rc = cn_failc(CN_EINVAL, "%s: seed %s does not match output %s", e->fn,
                              cn_shape_str(seed, b1, sizeof b1), cn_shape_str(root, b2, sizeof b2));
                goto out;
            }
            g = seed->dtype == root->dtype ? cn_retain(seed)
                                           : cn_op_run(CN_OP_cast, &seed, 1,
                                                       &(cn_attrs){.i = {root->dtype}});
        } else {
            int64_t numel = cn_shape_numel(root->ndim, root->shape);
            if (numel != 1) {
                char b[160];
                rc = cn_failc(CN_EINVAL,
                              "%s: output %s is not a single value; pass a seed gradient of its "
                              "shape",
                              e->fn, cn_shape_str(root, b, sizeof b));
                goto out;
            }
            if (cn_is_symbolic(root)) {
                /* A node, not a constant: placement puts it where the loss
                 * is (a CPU constant would feed the device's steps). */
                cn_attrs fa = {.i = {-1}, .f = {1.0}};
                g = cn_op_run(CN_OP_full_like, &root, 1, &fa);
            } else {
                g = cn_t_full_on(cn_t_device(root), (cn_dtype)root->dtype, root->ndim,
                                 root->shape, 1.0);
            }
        }
        if (!g) goto fail;
        int32_t k = map_get(&w.map, root);
        if (accumulate(&w.v[k].grad, g) < 0) goto fail;
    }

    /* With a gradient-ready hook, each leaf target's last reader, so its
     * gradient can be delivered right after that node. */
    bool early = grad_ready_fn && !e->inputs;
    if (early) {
        for (int k = 0; k < w.n; k++) w.v[k].last_use = -1;
        for (int k = 0; k < w.n; k++) {
            cn_node *n = w.v[k].t->node;
            if (!n) continue;
            for (int i = 0; i < n->nin; i++) {
                int32_t j = map_get(&w.map, n->in[i]);
                if (j >= 0 && w.v[j].last_use < k) w.v[j].last_use = k;
            }
        }
    }

    /* The walk. */
    uint64_t writes_now = __atomic_load_n((uint64_t *)&cn_inplace_writes, __ATOMIC_RELAXED);
    for (int k = 0; k < w.n; k++) {
        value *v = &w.v[k];
        cn_node *n = v->t->node;
        if (!n || !v->grad || !v->needed) continue;
        if (n->freed) {
            /* a walk inside this one (a hook's or a custom op's) freed it */
            rc = cn_failc(CN_ESTATE, "%s: trying to backward through the graph a second time "
                                     "(its record was freed by a backward pass that ran inside "
                                     "this one; pass retain_graph there)", e->fn);
            goto out;
        }
        if (run_hooks(v) < 0) goto fail;
        const cn_op_def *op = cn_ops[n->op];
        bool any = false;
        for (int i = 0; i < n->nin; i++) {
            int32_t j = map_get(&w.map, n->in[i]);
            if (j >= 0 && w.v[j].needed && n->in[i]->requires_grad) any = true;
        }
        if (!any) continue;
        if (!op->vjp) {
            rc = cn_failc(CN_EUNSUPPORTED, "%s: %s has no gradient rule", e->fn, op->name);
            goto out;
        }
        /* Data a rule reads must not have changed since it was recorded
         * (nothing at all was written in place since: nothing to check). */
        for (int i = 0; i < n->nin && n->writes_mark != writes_now; i++) {
            const cn_tensor *x = n->in[i];
            if (x->storage && x->storage->version != n->in_version[i]) {
                char b[160];
                rc = cn_failc(CN_ESTATE,
                              "%s: input %d of %s (%s) was modified in place after it was used; "
                              "its gradient cannot be computed (clone it before changing it)",
                              e->fn, i, op->name, cn_shape_str(x, b, sizeof b));
                goto out;
            }
        }
        /* A graph node built on a rank device: its gradient steps run on
         * that rank too (the data they read is there). */
        bool coloc = cn_is_symbolic(v->t) && on_rank_device(n);
        if (op->vjp_multi) {
            if (coloc) cn_device_scope_begin_graph(*(const cn_device *)n->extra);
            rc = walk_vjp_multi(&w, op, n, v, e->fn);
            if (coloc) cn_device_scope_end();
            if (rc < 0) goto out;
        } else for (int i = 0; i < n->nin; i++) {
            cn_tensor *x = n->in[i];
            int32_t j = map_get(&w.map, x);
            if (j < 0 || !w.v[j].needed || !x->requires_grad) continue;
            if (op->vjp_add && !create && x->storage && add_in_place(&w.v[j].grad, op, n, i, v->grad))
                continue;
            if (coloc) cn_device_scope_begin_graph(*(const cn_device *)n->extra);
            cn_scope_begin();
            cn_tensor *gi = op->vjp(n->in, n->nin, n->attrs, v->t, v->grad, i);
            gi = checked_grad(op, i, x, gi);
            cn_retain(gi);
            cn_scope_end();
            if (coloc) cn_device_scope_end();
            if (!gi) {
                rc = rule_failed(e->fn, op);
                goto out;
            }
            if (accumulate(&w.v[j].grad, gi) < 0) goto fail;
        }
        if (!v->target) {
            cn_release(v->grad);
            v->grad = NULL;
        }
        if (early) {
            for (int i = 0; i < n->nin; i++) {
                int32_t j = map_get(&w.map, n->in[i]);
                if (j < 0 || w.v[j].last_use != k || !w.v[j].target || !w.v[j].grad) continue;
                if (deliver_leaf(&w.v[j], create) < 0) goto fail;
                grad_ready_fn(w.v[j].t, grad_ready_ctx);
            }
        }
    }

    /* Deliver. */
    if (e->inputs) {
        for (int i = 0; i < e->ninputs; i++) {
            int32_t k = map_get(&w.map, e->inputs[i]);
            if (k >= 0 && run_hooks(&w.v[k]) < 0) {
                for (int q = 0; q < i; q++) e->grads[q] = NULL;
                goto fail;
            }
            cn_tensor *g = k >= 0 ? w.v[k].grad : NULL;
            if (!g && !(e->flags & CN_GRAD_ALLOW_UNUSED)) {
                rc = cn_failc(CN_EINVAL,
                              "%s: input %d was not used to compute the outputs (or does not "
                              "require a gradient); pass CN_GRAD_ALLOW_UNUSED to get NULL",
                              e->fn, i);
                for (int q = 0; q < i; q++) e->grads[q] = NULL;
                goto out;
            }
            e->grads[i] = g ? cn_scope_add(cn_retain(g)) : NULL;
        }
    } else {
        for (int k = 0; k < w.n; k++) {
            value *v = &w.v[k];
            if (!v->target || !v->grad) continue;
            if (deliver_leaf(v, create) < 0) goto fail;
            if (early) grad_ready_fn(v->t, grad_ready_ctx);
        }
    }
    /* Free the record (below, in the pass that lets go of the values):
     * later backward calls through it fail clearly. */
    free_record = !(e->flags & (CN_GRAD_RETAIN_GRAPH | CN_GRAD_CREATE_GRAPH));
    goto out;

oom:
    rc = cn_failc(CN_ENOMEM, "%s: out of memory", e->fn);
    goto out;
fail:
    rc = CN_EINVAL;
out:
    cn_set_grad_enabled(prev_enabled);
    /* The values are still retained: put back what an outer walk had. */
    map_restore(&w.map);
    walk_depth--;
    for (int k = 0; k < w.n; k++) {
        cn_node *n = w.v[k].t->node;
        if (free_record && n && !n->freed && !cn_is_symbolic(w.v[k].t)) {
            for (int i = 0; i < n->nin; i++) cn_release(n->in[i]);
            n->nin = 0;
            n->freed = true;
        }
        cn_release(w.v[k].grad);
        cn_release(w.v[k].t);
    }
    for (int j = 0; j < w.nleaves; j++) cn_release(w.leaves[j].t);
    free(w.v);
    free(w.leaves);
    return rc;
}

int cn_backward_ex(cn_tensor *root, cn_tensor *seed, unsigned flags) {
    if (!root) return CN_EINVAL;
    CN_CHECK_LIVE("backward", root, CN_EINVAL);
    CN_CHECK_LIVE("backward", seed, CN_EINVAL);
    engine_args e = {.roots = &root, .seeds = seed ? &seed : NULL, .nroots = 1, .flags = flags,
                     .fn = "backward"};
    if (CN_LIKELY(!cn_prof_on())) return run_engine(&e);
    cn_prof_range_begin("backward");
    int rc = run_engine(&e);
    cn_prof_range_end();
    return rc;
}

int cn_backward(cn_tensor *root, cn_tensor *seed) { return cn_backward_ex(root, seed, 0); }

int cn_grad(cn_tensor *const *outputs, cn_tensor *const *seeds, int noutputs,
            cn_tensor *const *inputs, int ninputs, cn_tensor **grads, unsigned flags) {
    if (!outputs || !inputs || !grads || noutputs < 1 || ninputs < 1)
        return cn_failc(CN_EINVAL, "grad: outputs, inputs and grads must be non-empty arrays");
    for (int i = 0; i < ninputs; i++) grads[i] = NULL;
    /* A static graph's gradient is always a graph: keep its record. */
    bool symbolic = false;
    for (int i = 0; i < noutputs; i++)
        if (outputs[i] && cn_is_symbolic(outputs[i])) symbolic = true;
    if (symbolic) flags |= CN_GRAD_RETAIN_GRAPH | CN_GRAD_CREATE_GRAPH;
    engine_args e = {.roots = outputs, .seeds = seeds, .nroots = noutputs, .inputs = inputs,
                     .ninputs = ninputs, .grads = grads, .flags = flags, .fn = "grad"};
    return run_engine(&e);
}

/* ---- forward mode ---- */

static _Thread_local uint32_t dual_gen_counter;
static _Thread_local uint32_t dual_gen_stack[16];

void cn_dual_begin(void) {
    if (cn_dual_level < 16) dual_gen_stack[cn_dual_level] = cn_dual_gen;
    cn_dual_level++;
    cn_dual_gen = ++dual_gen_counter;
}

void cn_dual_end(void) {
    if (cn_dual_level == 0) {
        cn_fail("dual_end: no dual region is open");
        return;
    }
    cn_dual_level--;
    cn_dual_gen = cn_dual_level < 16 ? dual_gen_stack[cn_dual_level] : cn_dual_gen;
    if (cn_dual_level == 0) cn_dual_gen = 0;
}

int cn_set_tangent(cn_tensor *t, cn_tensor *tangent) {
    if (!t) return CN_EINVAL;
    if (cn_dual_level == 0)
        return cn_failc(CN_ESTATE, "set_tangent: no dual region is open (cn_dual_begin)");
    if (tangent && !same_shape(t, tangent)) {
        char b1[160], b2[160];
        return cn_failc(CN_EINVAL, "set_tangent: tangent %s does not match tensor %s",
                        cn_shape_str(tangent, b1, sizeof b1), cn_shape_str(t, b2, sizeof b2));
    }
    if (tangent && !cn_dtype_is_float((cn_dtype)t->dtype))
        return cn_failc(CN_EINVAL, "set_tangent: only float tensors have tangents");
    cn_retain(tangent);
    cn_release(t->tangent);
    t->tangent = tangent;
    t->tangent_gen = cn_dual_gen;
    return CN_OK;
}

cn_tensor *cn_get_tangent(const cn_tensor *t) { return t ? cn_tangent_of(t) : NULL; }

int cn_jvp(cn_tensor_fn fn, void *ctx, cn_tensor *const *primals, cn_tensor *const *tangents,
           int ninputs, cn_tensor **outputs, cn_tensor **out_tangents, int noutputs) {
    if (!fn || ninputs < 0 || noutputs < 1 || !outputs || !out_tangents || (ninputs && !primals))
        return cn_failc(CN_EINVAL, "jvp: bad arguments");
    for (int i = 0; i < noutputs; i++) outputs[i] = out_tangents[i] = NULL;
    cn_tensor **duals = calloc((size_t)(ninputs ? ninputs : 1), sizeof *duals);
    if (!duals) return cn_failc(CN_ENOMEM, "jvp: out of memory");
    int rc = CN_OK;
    cn_dual_begin();
    for (int i = 0; i < ninputs; i++) {
        if (!primals[i]) {
            rc = CN_EINVAL;
            goto out;
        }
        /* Tangents go on aliases: the caller's tensors stay untouched. */
        duals[i] = cn_t_alias(primals[i]);
        if (!duals[i]) goto oom;
        duals[i]->requires_grad = primals[i]->requires_grad;
        duals[i]->node = primals[i]->node;
        if (duals[i]->node) duals[i]->node->refcount++;
        if (tangents && tangents[i] && (rc = cn_set_tangent(duals[i], tangents[i])) < 0) goto out;
    }
    cn_scope_begin();
    rc = fn(ctx, duals, ninputs, outputs, noutputs);
    for (int i = 0; i < noutputs && rc >= 0; i++)
        if (!outputs[i]) rc = CN_EINVAL;
    if (rc >= 0) {
        for (int i = 0; i < noutputs; i++) {
            cn_tensor *t = cn_tangent_of(outputs[i]);
            cn_retain(outputs[i]);
            out_tangents[i] = t ? cn_retain(t)
                                : cn_t_full_on(cn_t_device(outputs[i]), (cn_dtype)outputs[i]->dtype,
                                               outputs[i]->ndim, outputs[i]->shape, 0);
        }
    }
    cn_scope_end();
    for (int i = 0; i < noutputs; i++) {
        if (rc >= 0) {
            cn_scope_add(outputs[i]);
            cn_scope_add(out_tangents[i]);
        } else {
            outputs[i] = out_tangents[i] = NULL;
        }
    }
    goto out;
oom:
    rc = cn_failc(CN_ENOMEM, "jvp: out of memory");
out:
    cn_dual_end();
    for (int i = 0; i < ninputs; i++) cn_release(duals[i]);
    free(duals);
    return rc;
}
