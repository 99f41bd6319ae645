/* Fusion: elementwise steps whose intermediate results are read only
 * inside the group (a chain, a tree, or a value several of its steps read)
 * become one fused step (src/backend/fused_expr.h: one pass over the output, each
 * input read once, the result written once; a value read twice inside is
 * kept in L1 between its readers, never written out). A matmul or
 * conv2d whose readers are all in such a group (bias add, activation)
 * becomes the fused step's head: its kernel writes the output and the
 * expression then updates it in place, while it is still in cache (an
 * epilogue).
 *
 * A producer joins its reader only with the reader's shape: broadcasting
 * an intermediate would compute it once per output element instead of once
 * per its own element. All values of a group are of one float dtype, or
 * bool (masks of comparisons, conditions of where). */
#include "pass_util.h"

#include <stdlib.h>

static bool same_shape(const cn_tensor *a, const cn_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

static bool fusable(const cn_ir *ir, const ir_step *st, cn_dtype T) {
    if (st->kind != IRS_OP) return false;
    if (!cn_fused_supports((cn_op_id)st->op, &st->attrs, T)) return false;
    cn_dtype od = (cn_dtype)ir->v[st->out].t->dtype;
    if (od != T && od != CN_BOOL) return false;
    for (int i = 0; i < st->nin; i++) {
        cn_dtype d = (cn_dtype)ir->v[st->in[i]].t->dtype;
        if (d != T && d != CN_BOOL) return false;
    }
    return true;
}

typedef struct group {
    int32_t *steps; /* step indices */
    int n;
    int32_t *ext;   /* input values from outside */
    int next;
} group;

static bool in_group(const group *g, int32_t s) {
    for (int k = 0; k < g->n; k++)
        if (g->steps[k] == s) return true;
    return false;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* How many times the group's steps read value v. */
static int32_t group_reads(const cn_ir *ir, const group *g, int32_t v) {
    int32_t n = 0;
    for (int k = 0; k < g->n; k++) {
        const ir_step *st = &ir->s[g->steps[k]];
        for (int i = 0; i < st->nin; i++) n += st->in[i] == v;
    }
    return n;
}

/* Grow the group from its root s toward the inputs: a producer joins once
 * every read of its value is by a step of the group (so the value never
 * leaves the fused step). Steps added are scanned in turn, so a chain
 * joins in one sweep; a value with two readers joins when the second
 * reader has. */
static void grow(cn_ir *ir, group *g, uint8_t *taken, const int32_t *uses, cn_dtype T,
                 const cn_tensor *root_out, int32_t s) {
    g->steps[g->n++] = s;
    taken[s] = 1;
    for (bool grew = true; grew;) {
        grew = false;
        for (int k = 0; k < g->n; k++) {
            const ir_step *st = &ir->s[g->steps[k]];
            for (int i = 0; i < st->nin; i++) {
                int32_t v = st->in[i], p = ir->v[v].producer;
                if (ir->v[v].kind != IRV_STEP || p < 0 || taken[p]) continue;
                if (!same_shape(ir->v[v].t, root_out) || !fusable(ir, &ir->s[p], T)) continue;
                if (!ir_same_scope(&ir->s[p], &ir->s[s])) continue; /* one device */
                if (group_reads(ir, g, v) != uses[v]) continue;
                g->steps[g->n++] = p;
                taken[p] = 1;
                grew = true;
            }
        }
    }
}

static bool is_head_op(uint16_t op) { return op == CN_OP_matmul || op == CN_OP_conv2d; }

int cn_pass_fuse(cn_ir *ir) {
    int32_t *uses = ir_use_counts(ir);
    uint8_t *taken = calloc((size_t)(ir->ns ? ir->ns : 1), 1);
    group g = {malloc(sizeof(int32_t) * (size_t)(ir->ns ? ir->ns : 1)), 0,
               malloc(sizeof(int32_t) * (size_t)(ir->nv + 1)), 0};
    int nfused = 0;
    if (!uses || !taken || !g.steps || !g.ext) {
        nfused = cn_failc(CN_ENOMEM, "fuse: out of memory");
        goto out;
    }
    for (int s = ir->ns - 1; s >= 0; s--) {
        ir_step *st = &ir->s[s];
        if (taken[s] || st->kind != IRS_OP) continue;
        const cn_tensor *ot = ir->v[st->out].t;
        cn_dtype T = (cn_dtype)ot->dtype;
        if ((T != CN_F32 && T != CN_F64) || !fusable(ir, st, T)) continue;
        g.n = 0;
        grow(ir, &g, taken, uses, T, ot, s);
        qsort(g.steps, (size_t)g.n, sizeof *g.steps, cmp_i32); /* topological */
        /* Inputs from outside the group, each once. */
        g.next = 0;
        int32_t head = -1; /* a matmul/conv2d result only this group reads */
        for (int k = 0; k < g.n; k++) {
            const ir_step *gs = &ir->s[g.steps[k]];
            for (int i = 0; i < gs->nin; i++) {
                int32_t v = gs->in[i], p = ir->v[v].producer;
                if (p >= 0 && in_group(&g, p)) continue;
                bool dup = false;
                for (int j = 0; j < g.next; j++) dup |= g.ext[j] == v;
                if (dup) continue;
                g.ext[g.next++] = v;
                if (head < 0 && p >= 0 && !taken[p] && ir->s[p].kind == IRS_OP &&
                    is_head_op(ir->s[p].op) && group_reads(ir, &g, v) == uses[v] &&
                    ir_same_scope(&ir->s[p], st) &&
                    ir->v[v].t->dtype == T && same_shape(ir->v[v].t, ot))
                    head = v;
            }
        }
        if (g.n < 2 && head < 0) { /* one op alone: its own kernel is as good */
            taken[s] = 0;
            continue;
        }
        if (head >= 0) { /* the head's result is register 0 */
            int j = 0;
            while (g.ext[j] != head) j++;
            memmove(g.ext + 1, g.ext, sizeof *g.ext * (size_t)j);
            g.ext[0] = head;
        }
        cn_fused_expr *e = calloc(1, sizeof *e);
        cn_fused_instr *ins = calloc((size_t)g.n, sizeof *ins);
        const ir_step *hs = head >= 0 ? &ir->s[ir->v[head].producer] : NULL;
        int hn = hs ? hs->nin : 0;
        int32_t *nin = malloc(sizeof *nin * (size_t)(hn + g.next));
        if (!e || !ins || !nin) {
            free(e), free(ins), free(nin);
            nfused = cn_failc(CN_ENOMEM, "fuse: out of memory");
            goto out;
        }
        e->nin = g.next;
        e->ninstr = g.n;
        e->instr = ins;
        for (int k = 0; k < g.n; k++) {
            const ir_step *gs = &ir->s[g.steps[k]];
            int16_t ops[3] = {-1, -1, -1};
            for (int i = 0; i < gs->nin && i < 3; i++) {
                int32_t v = gs->in[i], p = ir->v[v].producer;
                int r = -1;
                for (int j = 0; j < g.n && r < 0; j++)
                    if (p >= 0 && g.steps[j] == p) r = g.next + j;
                for (int j = 0; j < g.next && r < 0; j++)
                    if (g.ext[j] == v) r = j;
                ops[i] = (int16_t)r;
            }
            ins[k] = (cn_fused_instr){gs->op, ops[0], ops[1], ops[2], gs->attrs};
        }
        e->result = g.next + g.n - 1; /* the root: last in topological order */
        int w = 0;
        if (hs)
            for (int i = 0; i < hn; i++) nin[w++] = hs->in[i];
        for (int j = hs ? 1 : 0; j < g.next; j++) nin[w++] = g.ext[j];
        for (int k = 0; k < g.n; k++)
            if (g.steps[k] != s) ir->s[g.steps[k]].kind = IRS_DEAD;
        st = &ir->s[s];
        if (hs) {
            ir_step *h = &ir->s[ir->v[head].producer];
            st->op = h->op;
            st->attrs = h->attrs;
            st->head_nin = h->nin;
            h->kind = IRS_DEAD;
            taken[ir->v[head].producer] = 1;
        } else {
            st->op = CN_OP_COUNT;
            st->head_nin = 0;
        }
        free(st->in);
        st->in = nin;
        st->nin = w;
        st->kind = IRS_FUSED;
        st->fused = e;
        nfused++;
    }
out:
    free(uses);
    free(taken);
    free(g.steps);
    free(g.ext);
    return nfused;
}
