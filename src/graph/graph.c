/* Static graphs: placeholders, symbolic values, compile and run.
 *
 * A symbolic tensor is a value of a graph: dtype and shape (sizes may be -1)
 * but no storage. The dispatcher hands any op with a symbolic input to
 * build_node, which records the node exactly as eager autograd would, so the
 * backward walk and every later pass see one IR.
 *
 * cn_compile orders the nodes the outputs depend on; cn_run executes them in
 * that order through the same dispatcher (inference runs again with the real
 * sizes), releasing each intermediate after its last use. */
#include "../ops/op.h"

#include <inttypes.h>
#include <stdlib.h>

struct cn_graph {
    cn_graph_head head; /* first: the core releases it */
    uint64_t id;
};

static void graph_destroy(cn_graph_head *h) { free(h); }

static uint64_t graph_counter;

cn_graph *cn_graph_new(void) {
    cn_graph *g = calloc(1, sizeof *g);
    if (!g) return cn_fail("graph_new: out of memory");
    g->head.refcount = 1;
    g->head.destroy = graph_destroy;
    g->id = ++graph_counter;
    return g;
}

void cn_graph_free(cn_graph *g) {
    if (g && --g->head.refcount == 0) graph_destroy(&g->head);
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
                             const cn_meta *m) {
    const cn_op_def *d = cn_ops[op];
    cn_graph *g = NULL;
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
    t->node = cn_node_new(op, in, nin, a);
    if (!t->node) {
        cn_release(t);
        return cn_fail("%s: out of memory building a graph node", d->name);
    }
    t->requires_grad = needs_grad && !(d->flags & CN_OPF_NONDIFF);
    return t;
}

__attribute__((constructor)) static void install_symbolic_hook(void) {
    cn_graph_symbolic_hook = build_node;
}

/* ---- programs ---- */

typedef struct step {
    cn_node *node;   /* borrowed from the value it produces */
    int32_t out;     /* value slot of the result */
    int32_t *in;     /* value slots of the inputs */
} step;

struct cn_program {
    cn_graph *graph;
    int nvalues;
    cn_tensor **sym;     /* the symbolic (or constant) value of each slot, retained */
    int32_t *uses;       /* how many steps and outputs read each slot */
    int nsteps;
    step *steps;
    int ninputs;
    int32_t *input_slots;/* placeholder slots */
    int noutputs;
    int32_t *output_slots;
    cn_tensor **live;    /* run-time values */
    int32_t *left;       /* run-time remaining uses */
};

typedef struct builder {
    cn_program *p;
    int cap;
    /* pointer -> slot */
    const void **keys;
    int32_t *vals;
    size_t mcap;
} builder;

static size_t bhash(const void *k, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)k * 0x9E3779B97F4A7C15ULL;
    return (size_t)(x >> 20) & (cap - 1);
}

static int32_t slot_get(builder *b, const void *k) {
    for (size_t h = bhash(k, b->mcap);; h = (h + 1) & (b->mcap - 1)) {
        if (!b->keys[h]) return -1;
        if (b->keys[h] == k) return b->vals[h];
    }
}

static int slot_put(builder *b, const void *k, int32_t v) {
    if ((size_t)(b->p->nvalues + 1) * 2 > b->mcap) {
        size_t ncap = b->mcap * 2;
        const void **nk = calloc(ncap, sizeof *nk);
        int32_t *nv = malloc(ncap * sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return -1;
        }
        for (size_t i = 0; i < b->mcap; i++) {
            if (!b->keys[i]) continue;
            size_t h = bhash(b->keys[i], ncap);
            while (nk[h]) h = (h + 1) & (ncap - 1);
            nk[h] = b->keys[i];
            nv[h] = b->vals[i];
        }
        free(b->keys);
        free(b->vals);
        b->keys = nk;
        b->vals = nv;
        b->mcap = ncap;
    }
    size_t h = bhash(k, b->mcap);
    while (b->keys[h]) h = (h + 1) & (b->mcap - 1);
    b->keys[h] = k;
    b->vals[h] = v;
    return 0;
}

static int32_t add_value(builder *b, cn_tensor *t) {
    cn_program *p = b->p;
    if (p->nvalues == b->cap) {
        int ncap = b->cap ? b->cap * 2 : 64;
        cn_tensor **ns = realloc(p->sym, sizeof *ns * (size_t)ncap);
        if (!ns) return -1;
        p->sym = ns;
        int32_t *nu = realloc(p->uses, sizeof *nu * (size_t)ncap);
        if (!nu) return -1;
        p->uses = nu;
        b->cap = ncap;
    }
    if (slot_put(b, t, p->nvalues) < 0) return -1;
    p->sym[p->nvalues] = cn_retain(t);
    p->uses[p->nvalues] = 0;
    return p->nvalues++;
}

void cn_program_free(cn_program *p) {
    if (!p) return;
    for (int i = 0; i < p->nvalues; i++) {
        cn_release(p->sym[i]);
        if (p->live) cn_release(p->live[i]);
    }
    for (int s = 0; s < p->nsteps; s++) free(p->steps[s].in);
    free(p->sym);
    free(p->uses);
    free(p->steps);
    free(p->input_slots);
    free(p->output_slots);
    free(p->live);
    free(p->left);
    cn_graph_free(p->graph);
    free(p);
}

cn_program *cn_compile(cn_graph *g, cn_tensor *const *outputs, int noutputs,
                       const cn_compile_opts *opts) {
    (void)opts;
    if (!g) return cn_fail("compile: graph is NULL");
    if (!outputs || noutputs < 1) return cn_fail("compile: no outputs given");
    for (int i = 0; i < noutputs; i++) {
        if (!outputs[i]) return NULL;
        if (cn_is_symbolic(outputs[i]) && outputs[i]->graph != (struct cn_graph *)g)
            return cn_fail("compile: output %d belongs to another graph", i);
    }
    cn_program *p = calloc(1, sizeof *p);
    builder b = {.p = p, .mcap = 256};
    b.keys = calloc(b.mcap, sizeof *b.keys);
    b.vals = malloc(b.mcap * sizeof *b.vals);
    cn_tensor **stack = NULL;
    uint8_t *state = NULL; /* per slot: 1 = expanded */
    if (!p || !b.keys || !b.vals) goto oom;
    p->graph = g;
    g->head.refcount++;

    /* Depth-first post-order from the outputs (explicit stack: graphs of
     * unrolled loops are deep). */
    int sp = 0, scap = 64;
    stack = malloc(sizeof *stack * (size_t)scap);
    if (!stack) goto oom;
    int state_cap = 0;
    p->noutputs = noutputs;
    p->output_slots = malloc(sizeof *p->output_slots * (size_t)noutputs);
    if (!p->output_slots) goto oom;
    for (int o = 0; o < noutputs; o++) {
        if (slot_get(&b, outputs[o]) < 0) {
            stack[sp++] = outputs[o];
            while (sp > 0) {
                cn_tensor *t = stack[sp - 1];
                int32_t s = slot_get(&b, t);
                if (s < 0) {
                    s = add_value(&b, t);
                    if (s < 0) goto oom;
                    if (s >= state_cap) {
                        int nc = state_cap ? state_cap * 2 : 64;
                        while (nc <= s) nc *= 2;
                        uint8_t *ns = realloc(state, (size_t)nc);
                        if (!ns) goto oom;
                        memset(ns + state_cap, 0, (size_t)(nc - state_cap));
                        state = ns;
                        state_cap = nc;
                    }
                }
                cn_node *n = cn_is_symbolic(t) ? t->node : NULL;
                if (!n || state[s] == 2) {
                    sp--;
                    continue;
                }
                if (state[s] == 0) { /* push the inputs first */
                    state[s] = 1;
                    for (int i = n->nin - 1; i >= 0; i--) {
                        if (slot_get(&b, n->in[i]) >= 0) continue;
                        if (sp == scap) {
                            scap *= 2;
                            cn_tensor **ns = realloc(stack, sizeof *ns * (size_t)scap);
                            if (!ns) goto oom;
                            stack = ns;
                        }
                        stack[sp++] = n->in[i];
                    }
                    continue;
                }
                /* Inputs done: emit the step. */
                state[s] = 2;
                sp--;
                step *ns = realloc(p->steps, sizeof *ns * (size_t)(p->nsteps + 1));
                if (!ns) goto oom;
                p->steps = ns;
                step *st = &p->steps[p->nsteps++];
                st->node = n;
                st->out = s;
                st->in = malloc(sizeof *st->in * (size_t)(n->nin ? n->nin : 1));
                if (!st->in) goto oom;
                for (int i = 0; i < n->nin; i++) {
                    st->in[i] = slot_get(&b, n->in[i]);
                    p->uses[st->in[i]]++;
                }
            }
        }
        p->output_slots[o] = slot_get(&b, outputs[o]);
        p->uses[p->output_slots[o]]++;
    }
    /* Placeholders among the values are the inputs. */
    p->input_slots = malloc(sizeof *p->input_slots * (size_t)(p->nvalues ? p->nvalues : 1));
    if (!p->input_slots) goto oom;
    for (int i = 0; i < p->nvalues; i++)
        if (p->sym[i]->flags & CN_TF_PLACEHOLDER) p->input_slots[p->ninputs++] = i;
    p->live = calloc((size_t)p->nvalues, sizeof *p->live);
    p->left = malloc(sizeof *p->left * (size_t)(p->nvalues ? p->nvalues : 1));
    if (!p->live || !p->left) goto oom;
    free(stack);
    free(state);
    free(b.keys);
    free(b.vals);
    return p;
oom:
    free(stack);
    free(state);
    free(b.keys);
    free(b.vals);
    cn_program_free(p);
    return cn_fail("compile: out of memory");
}

int cn_program_num_inputs(const cn_program *p) { return p ? p->ninputs : -1; }

int cn_program_num_steps(const cn_program *p) { return p ? p->nsteps : -1; }

cn_tensor *cn_program_input(const cn_program *p, int i) {
    if (!p || i < 0 || i >= p->ninputs) return cn_fail("program_input: index %d out of range", i);
    return p->sym[p->input_slots[i]];
}

static bool fits(const cn_tensor *ph, const cn_tensor *v) {
    if (ph->ndim != v->ndim) return false;
    for (int i = 0; i < ph->ndim; i++)
        if (ph->shape[i] != -1 && ph->shape[i] != v->shape[i]) return false;
    return true;
}

static void drop_live(cn_program *p) {
    for (int i = 0; i < p->nvalues; i++) {
        cn_release(p->live[i]);
        p->live[i] = NULL;
    }
}

int cn_run(cn_program *p, cn_tensor *const *placeholders, cn_tensor *const *values, int nfeeds,
           cn_tensor **outputs, int noutputs) {
    /* Outputs are NULL on every failure, so callers never read garbage. */
    if (outputs)
        for (int i = 0; i < noutputs; i++) outputs[i] = NULL;
    if (!p) return cn_failc(CN_EINVAL, "run: program is NULL");
    if (noutputs != p->noutputs || !outputs)
        return cn_failc(CN_EINVAL, "run: the program has %d outputs, %d requested", p->noutputs,
                        noutputs);
    if (nfeeds < 0 || (nfeeds > 0 && (!placeholders || !values)))
        return cn_failc(CN_EINVAL, "run: bad feeds");
    for (int i = 0; i < noutputs; i++) outputs[i] = NULL;
    for (int i = 0; i < p->nvalues; i++) p->left[i] = p->uses[i];
    /* Constants and parameters: their current values. */
    for (int i = 0; i < p->nvalues; i++)
        if (!cn_is_symbolic(p->sym[i])) p->live[i] = cn_retain(p->sym[i]);
    for (int f = 0; f < nfeeds; f++) {
        if (!placeholders[f] || !values[f]) {
            drop_live(p);
            return CN_EINVAL;
        }
        int found = -1;
        for (int k = 0; k < p->ninputs; k++)
            if (p->sym[p->input_slots[k]] == placeholders[f]) found = p->input_slots[k];
        if (found < 0) continue; /* a placeholder this program does not read */
        const cn_tensor *ph = p->sym[found], *v = values[f];
        char b1[160], b2[160];
        if (cn_is_symbolic(v) || v->dtype != ph->dtype || !fits(ph, v)) {
            drop_live(p);
            return cn_failc(CN_EINVAL, "run: placeholder '%s' is %s, fed %s",
                            cn_get_name(ph), cn_shape_str(ph, b1, sizeof b1),
                            cn_shape_str(v, b2, sizeof b2));
        }
        cn_release(p->live[found]);
        p->live[found] = cn_retain((cn_tensor *)v);
    }
    for (int k = 0; k < p->ninputs; k++)
        if (!p->live[p->input_slots[k]]) {
            const cn_tensor *ph = p->sym[p->input_slots[k]];
            drop_live(p);
            return cn_failc(CN_EINVAL, "run: placeholder '%s' was not fed",
                            cn_get_name(ph));
        }
    bool prev = cn_set_grad_enabled(false);
    cn_tensor *ins_buf[8];
    int rc = CN_OK;
    for (int s = 0; s < p->nsteps; s++) {
        step *st = &p->steps[s];
        cn_node *n = st->node;
        cn_tensor **ins = n->nin > 8 ? malloc(sizeof *ins * n->nin) : ins_buf;
        if (!ins) {
            rc = cn_failc(CN_ENOMEM, "run: out of memory");
            break;
        }
        for (int i = 0; i < n->nin; i++) ins[i] = p->live[st->in[i]];
        cn_tensor *out = cn_op_run((cn_op_id)n->op, ins, n->nin, &n->attrs);
        if (ins != ins_buf) free(ins);
        if (!out) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", cn_last_error());
            rc = cn_failc(CN_EINVAL, "run: step %d (%s): %s", s, cn_ops[n->op]->name, msg);
            break;
        }
        p->live[st->out] = out;
        for (int i = 0; i < n->nin; i++) {
            int32_t v = st->in[i];
            if (--p->left[v] == 0) {
                cn_release(p->live[v]);
                p->live[v] = NULL;
            }
        }
    }
    cn_set_grad_enabled(prev);
    if (rc == CN_OK)
        for (int o = 0; o < noutputs; o++)
            outputs[o] = cn_scope_add(cn_retain(p->live[p->output_slots[o]]));
    drop_live(p);
    return rc;
}
