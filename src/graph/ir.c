/* Building, editing and printing the program IR (ir.h). */
#include "ir.h"

#include <inttypes.h>
#include <stdlib.h>

/* Pointer -> value id, open addressing (graphs of unrolled loops are big). */
typedef struct ptrmap {
    const void **keys;
    int32_t *vals;
    size_t cap, n;
} ptrmap;

static size_t phash(const void *k, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)k * 0x9E3779B97F4A7C15ULL;
    return (size_t)(x >> 20) & (cap - 1);
}

static int32_t map_get(const ptrmap *m, const void *k) {
    for (size_t h = phash(k, m->cap);; h = (h + 1) & (m->cap - 1)) {
        if (!m->keys[h]) return -1;
        if (m->keys[h] == k) return m->vals[h];
    }
}

static int map_put(ptrmap *m, const void *k, int32_t v) {
    if ((m->n + 1) * 2 > m->cap) {
        ptrmap nm = {calloc(m->cap * 2, sizeof(void *)), malloc(m->cap * 2 * sizeof(int32_t)),
                     m->cap * 2, 0};
        if (!nm.keys || !nm.vals) {
            free(nm.keys);
            free(nm.vals);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) map_put(&nm, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = nm;
    }
    size_t h = phash(k, m->cap);
    while (m->keys[h]) h = (h + 1) & (m->cap - 1);
    m->keys[h] = k;
    m->vals[h] = v;
    m->n++;
    return 0;
}

int32_t ir_add_value(cn_ir *ir, cn_tensor *t, uint8_t kind, int32_t producer) {
    if (ir->nv == ir->vcap) {
        int nc = ir->vcap ? ir->vcap * 2 : 64;
        ir_value *nv = realloc(ir->v, sizeof *nv * (size_t)nc);
        if (!nv) return -1;
        ir->v = nv;
        ir->vcap = nc;
    }
    ir->v[ir->nv] = (ir_value){cn_retain(t), producer, kind, CN_CPU};
    return ir->nv++;
}

static ir_step *add_step(cn_ir *ir) {
    if (ir->ns == ir->scap) {
        int nc = ir->scap ? ir->scap * 2 : 64;
        ir_step *ns = realloc(ir->s, sizeof *ns * (size_t)nc);
        if (!ns) return NULL;
        ir->s = ns;
        ir->scap = nc;
    }
    ir_step *st = &ir->s[ir->ns++];
    memset(st, 0, sizeof *st);
    return st;
}

void ir_free(cn_ir *ir) {
    if (!ir) return;
    for (int i = 0; i < ir->nv; i++) cn_release(ir->v[i].t);
    for (int s = 0; s < ir->ns; s++) {
        free(ir->s[s].in);
        if (ir->s[s].fused) {
            free(ir->s[s].fused->instr);
            free(ir->s[s].fused);
        }
    }
    for (int i = 0; i < ir->nassume; i++) cn_release(ir->assume[i].t);
    free(ir->v);
    free(ir->s);
    free(ir->inputs);
    free(ir->outputs);
    free(ir->assume);
    free(ir->out_rank);
    free(ir->out_remote);
    free(ir);
}

static uint8_t kind_of(const cn_tensor *t) {
    if (!cn_is_symbolic(t)) return IRV_CONST;
    return (t->flags & CN_TF_PLACEHOLDER) ? IRV_INPUT : IRV_STEP;
}

cn_ir *ir_from_graph(cn_tensor *const *outputs, int noutputs) {
    cn_ir *ir = calloc(1, sizeof *ir);
    if (!ir) return cn_fail("compile: out of memory");
    ptrmap m = {calloc(256, sizeof(void *)), malloc(256 * sizeof(int32_t)), 256, 0};
    cn_tensor **stack = NULL;
    uint8_t *state = NULL; /* per value: 1 = inputs pushed, 2 = emitted */
    int state_cap = 0, sp = 0, scap = 64;
    stack = malloc(sizeof *stack * (size_t)scap);
    ir->outputs = malloc(sizeof *ir->outputs * (size_t)noutputs);
    if (!m.keys || !m.vals || !stack || !ir->outputs) goto oom;
    ir->noutputs = noutputs;
    /* Depth-first post-order from the outputs (explicit stack: graphs of
     * unrolled loops are deep). */
    for (int o = 0; o < noutputs; o++) {
        if (map_get(&m, outputs[o]) < 0) {
            stack[sp++] = outputs[o];
            while (sp > 0) {
                cn_tensor *t = stack[sp - 1];
                int32_t id = map_get(&m, t);
                if (id < 0) {
                    id = ir_add_value(ir, t, kind_of(t), -1);
                    if (id < 0 || map_put(&m, t, id) < 0) goto oom;
                    if (id >= state_cap) {
                        int nc = state_cap ? state_cap * 2 : 64;
                        while (nc <= id) nc *= 2;
                        uint8_t *ns = realloc(state, (size_t)nc);
                        if (!ns) goto oom;
                        memset(ns + state_cap, 0, (size_t)(nc - state_cap));
                        state = ns;
                        state_cap = nc;
                    }
                }
                cn_node *n = ir->v[id].kind == IRV_STEP ? t->node : NULL;
                if (!n || state[id] == 2) {
                    sp--;
                    continue;
                }
                if (state[id] == 0) { /* push the inputs first */
                    state[id] = 1;
                    for (int i = n->nin - 1; i >= 0; i--) {
                        if (map_get(&m, n->in[i]) >= 0) continue;
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
                state[id] = 2;
                sp--;
                ir_step *st = add_step(ir);
                if (!st) goto oom;
                st->kind = IRS_OP;
                st->op = n->op;
                st->attrs = *n->attrs;
                st->out = id;
                st->nin = n->nin;
                st->in = malloc(sizeof *st->in * (size_t)(n->nin ? n->nin : 1));
                if (!st->in) goto oom;
                for (int i = 0; i < n->nin; i++) st->in[i] = map_get(&m, n->in[i]);
                if (n->extra) { /* built inside a device scope (graph.c) */
                    st->scope = *(const cn_device *)n->extra;
                    st->has_scope = 1;
                }
                ir->v[id].producer = ir->ns - 1;
            }
        }
        ir->outputs[o] = map_get(&m, outputs[o]);
    }
    ir->inputs = malloc(sizeof *ir->inputs * (size_t)(ir->nv ? ir->nv : 1));
    if (!ir->inputs) goto oom;
    for (int i = 0; i < ir->nv; i++)
        if (ir->v[i].kind == IRV_INPUT) ir->inputs[ir->ninputs++] = i;
    free(stack);
    free(state);
    free(m.keys);
    free(m.vals);
    return ir;
oom:
    free(stack);
    free(state);
    free(m.keys);
    free(m.vals);
    ir_free(ir);
    return cn_fail("compile: out of memory");
}

int32_t ir_insert_step(cn_ir *ir, int pos, uint16_t op, const int32_t *in, int nin,
                       const cn_attrs *a, cn_dtype dt, int ndim, const int64_t *shape) {
    cn_tensor *t = cn_t_alloc();
    int32_t *ins = malloc(sizeof *ins * (size_t)(nin ? nin : 1));
    if (!t || !ins) {
        cn_release(t);
        free(ins);
        return -1;
    }
    t->dtype = (uint8_t)dt;
    t->ndim = (int8_t)ndim;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    cn_contiguous_strides(ndim, t->shape, t->strides);
    t->flags = CN_TF_SYMBOLIC;
    int32_t id = ir_add_value(ir, t, IRV_STEP, pos);
    cn_release(t);
    if (id < 0 || !add_step(ir)) {
        free(ins);
        return -1;
    }
    memmove(ir->s + pos + 1, ir->s + pos, sizeof *ir->s * (size_t)(ir->ns - 1 - pos));
    for (int s = pos + 1; s < ir->ns; s++) ir->v[ir->s[s].out].producer = s;
    ir_step *st = &ir->s[pos];
    memset(st, 0, sizeof *st);
    st->kind = IRS_OP;
    st->op = op;
    st->attrs = *a;
    st->nin = nin;
    st->in = ins;
    memcpy(ins, in, sizeof *ins * (size_t)nin);
    st->out = id;
    return id;
}

void ir_replace_uses(cn_ir *ir, int32_t from, int32_t to) {
    for (int s = 0; s < ir->ns; s++) {
        ir_step *st = &ir->s[s];
        if (st->kind == IRS_DEAD) continue;
        for (int i = 0; i < st->nin; i++)
            if (st->in[i] == from) st->in[i] = to;
    }
    for (int o = 0; o < ir->noutputs; o++)
        if (ir->outputs[o] == from) ir->outputs[o] = to;
}

int32_t *ir_use_counts(const cn_ir *ir) {
    int32_t *c = calloc((size_t)(ir->nv ? ir->nv : 1), sizeof *c);
    if (!c) return cn_fail("compile: out of memory");
    for (int s = 0; s < ir->ns; s++) {
        const ir_step *st = &ir->s[s];
        if (st->kind == IRS_DEAD) continue;
        for (int i = 0; i < st->nin; i++) c[st->in[i]]++;
    }
    for (int o = 0; o < ir->noutputs; o++) c[ir->outputs[o]]++;
    return c;
}

int ir_assume(cn_ir *ir, cn_tensor *t) {
    for (int i = 0; i < ir->nassume; i++)
        if (ir->assume[i].t == t) return 0;
    if (ir->nassume == ir->acap) {
        int nc = ir->acap ? ir->acap * 2 : 16;
        ir_assumption *na = realloc(ir->assume, sizeof *na * (size_t)nc);
        if (!na) return cn_failc(CN_ENOMEM, "compile: out of memory");
        ir->assume = na;
        ir->acap = nc;
    }
    ir->assume[ir->nassume++] = (ir_assumption){cn_retain(t), t->storage->version};
    return 0;
}

static void print_value(const cn_ir *ir, int32_t id, FILE *f) {
    const cn_tensor *t = ir->v[id].t;
    char b[160];
    if (ir->v[id].kind == IRV_CONST && t->ndim == 0 && cn_dtype_is_float((cn_dtype)t->dtype) &&
        cn_t_on_cpu(t)) {
        fprintf(f, "%%%d(=%g)", id, cn_load_f64(cn_t_ptr(t), (cn_dtype)t->dtype, 0));
        return;
    }
    fprintf(f, "%%%d", id);
    if (ir->v[id].kind == IRV_INPUT) fprintf(f, "(%s)", cn_get_name(t));
    else if (ir->v[id].kind == IRV_CONST)
        fprintf(f, "(const %s%s%s%s%s)", cn_shape_str(t, b, sizeof b), *cn_get_name(t) ? " " : "",
                cn_get_name(t), cn_t_on_cpu(t) ? "" : " on ",
                cn_t_on_cpu(t) ? "" : cn_dev_name(cn_t_device(t)));
}

static void print_attrs(const cn_op_def *d, const cn_attrs *a, FILE *f) {
    bool any = false;
    for (int k = 0; k < CN_MAX_OP_ATTRS && d->attrs[k].name; k++) {
        const cn_attr_def *ad = &d->attrs[k];
        fprintf(f, "%s%s=", any ? ", " : " {", ad->name);
        any = true;
        switch (ad->kind) {
        case CN_ATTR_FLOAT: fprintf(f, "%g", a->f[ad->slot]); break;
        case CN_ATTR_DTYPE: /* out of range: "the input's" */
            if (a->i[ad->slot] >= 0 && a->i[ad->slot] < CN_DTYPE_COUNT)
                fprintf(f, "%s", cn_dtype_name((cn_dtype)a->i[ad->slot]));
            else
                fprintf(f, "same");
            break;
        case CN_ATTR_INTS:
            fputc('[', f);
            for (int j = 0; j < a->nlist; j++) fprintf(f, "%s%" PRId64, j ? "," : "", a->list[j]);
            fputc(']', f);
            break;
        default: fprintf(f, "%" PRId64, a->i[ad->slot]); break;
        }
    }
    if (any) fputc('}', f);
}

/* A device of the program: with its rank when the program is one rank's
 * part of a split ("rank:1/cpu:0"). */
const char *ir_dev_name(const cn_ir *ir, cn_device d) {
    return cn_dev_name(ir->split ? CN_DEVICE_ON_RANK(ir->rank, d.kind, d.index) : d);
}

/* " [opencl:0]" after a step: where it runs; a transfer "[cpu:0 -> opencl:0]",
 * a step that fell back "[cpu:0, fallback]"; a message between ranks
 * "[rank:0/cpu:0 -> rank:1]" (send), "[rank:0 -> rank:1/cpu:0]" (recv). */
static void print_device(const cn_ir *ir, const ir_step *st, FILE *f) {
    if (st->kind == IRS_OP && st->op == CN_OP_to)
        fprintf(f, " [%s -> %s]", ir_dev_name(ir, ir->v[st->in[0]].dev), ir_dev_name(ir, st->dev));
    else if (st->kind == IRS_OP && st->op == CN_OP_send)
        fprintf(f, " [%s -> rank:%d]", ir_dev_name(ir, st->dev), (int)st->attrs.i[0]);
    else if (st->kind == IRS_OP && st->op == CN_OP_recv)
        fprintf(f, " [rank:%d -> %s]", (int)st->attrs.i[0], ir_dev_name(ir, st->dev));
    else
        fprintf(f, " [%s%s]", ir_dev_name(ir, st->dev), st->fallback ? ", fallback" : "");
}

void ir_print(const cn_ir *ir, FILE *f) {
    char b[160];
    bool devices = ir_shows_devices(ir);
    for (int s = 0; s < ir->ns; s++) {
        const ir_step *st = &ir->s[s];
        if (st->kind == IRS_DEAD) continue;
        fprintf(f, "%%%d: %s = ", st->out, cn_shape_str(ir->v[st->out].t, b, sizeof b));
        if (st->kind == IRS_FUSED) {
            fprintf(f, "fused[");
            if (st->op != CN_OP_COUNT) fprintf(f, "%s; ", cn_ops[st->op]->name);
            for (int k = 0; k < st->fused->ninstr; k++)
                fprintf(f, "%s%s", k ? " " : "", cn_ops[st->fused->instr[k].op]->name);
            fprintf(f, "](");
        } else {
            fprintf(f, "%s(", cn_ops[st->op]->name);
        }
        for (int i = 0; i < st->nin; i++) {
            if (i) fprintf(f, ", ");
            print_value(ir, st->in[i], f);
        }
        fputc(')', f);
        bool xfer = st->kind == IRS_OP && st->op == CN_OP_to;
        if (st->kind == IRS_OP && !(devices && xfer)) print_attrs(cn_ops[st->op], &st->attrs, f);
        if (devices) print_device(ir, st, f);
        fputc('\n', f);
    }
    fprintf(f, "outputs:");
    for (int o = 0; o < ir->noutputs; o++) {
        if (ir->out_remote && ir->out_remote[o]) /* computed on another rank, not sent here */
            fprintf(f, " (on rank:%d)", (int)ir->out_rank[o]);
        else
            fprintf(f, " %%%d", ir->outputs[o]);
    }
    fputc('\n', f);
}
