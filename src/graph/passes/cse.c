/* Common-subexpression elimination: two steps applying the same op with the
 * same attributes to the same values compute the same result; the later one
 * is dropped. One-element constants with the same dtype, shape and bits are
 * merged first (each literal 2.0 is its own tensor), so x*2 built twice
 * becomes one step. Ops that draw random numbers are never merged. */
#include "pass_util.h"

#include <stdlib.h>

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    return h;
}

static bool same_attrs(const cn_attrs *a, const cn_attrs *b) {
    if (memcmp(a->i, b->i, sizeof a->i) || memcmp(a->f, b->f, sizeof a->f)) return false;
    if (a->nlist != b->nlist) return false;
    return a->nlist <= 0 || !memcmp(a->list, b->list, sizeof(int64_t) * (size_t)a->nlist);
}

static uint64_t step_hash(const ir_step *st) {
    uint64_t h = mix(st->op, (uint64_t)st->nin);
    for (int i = 0; i < st->nin; i++) h = mix(h, (uint64_t)st->in[i]);
    for (int k = 0; k < 4; k++) h = mix(h, (uint64_t)st->attrs.i[k]);
    for (int k = 0; k < st->attrs.nlist && k < CN_ATTR_LIST_MAX; k++)
        h = mix(h, (uint64_t)st->attrs.list[k]);
    return h;
}

static bool same_step(const ir_step *a, const ir_step *b) {
    if (a->op != b->op || a->nin != b->nin || !ir_same_scope(a, b)) return false;
    for (int i = 0; i < a->nin; i++)
        if (a->in[i] != b->in[i]) return false;
    return same_attrs(&a->attrs, &b->attrs);
}

static bool same_scalar(const cn_tensor *a, const cn_tensor *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return !memcmp(cn_t_ptr(a), cn_t_ptr(b), cn_dsize((cn_dtype)a->dtype));
}

static int merge_scalars(cn_ir *ir, const int32_t *uses) {
    int merged = 0;
    int32_t *seen = malloc(sizeof *seen * (size_t)(ir->nv ? ir->nv : 1));
    int nseen = 0;
    if (!seen) return -1;
    for (int32_t v = 0; v < ir->nv; v++) {
        double dummy;
        if (!uses[v] || !pass_const_scalar(ir, v, &dummy)) continue;
        int32_t same = -1;
        for (int k = 0; k < nseen && same < 0; k++)
            if (same_scalar(ir->v[seen[k]].t, ir->v[v].t)) same = seen[k];
        if (same < 0) {
            if (nseen < 256) seen[nseen++] = v; /* literals are few; bound the scan */
            continue;
        }
        if (ir_assume(ir, ir->v[v].t) < 0 || ir_assume(ir, ir->v[same].t) < 0) {
            free(seen);
            return -1;
        }
        ir_replace_uses(ir, v, same);
        merged++;
    }
    free(seen);
    return merged;
}

int cn_pass_cse(cn_ir *ir) {
    int32_t *uses = ir_use_counts(ir);
    if (!uses) return CN_ENOMEM;
    int merged = merge_scalars(ir, uses);
    free(uses);
    if (merged < 0) return cn_failc(CN_ENOMEM, "cse: out of memory");
    size_t cap = 64;
    while (cap < (size_t)ir->ns * 2) cap *= 2;
    int32_t *table = malloc(sizeof *table * cap);
    if (!table) return cn_failc(CN_ENOMEM, "cse: out of memory");
    for (size_t i = 0; i < cap; i++) table[i] = -1;
    /* Topological order: when a step is reached its inputs are final. */
    for (int s = 0; s < ir->ns; s++) {
        ir_step *st = &ir->s[s];
        if (st->kind != IRS_OP || (cn_ops[st->op]->flags & (CN_OPF_RANDOM | CN_OPF_COMM))) continue;
        size_t h = step_hash(st) & (cap - 1);
        for (;; h = (h + 1) & (cap - 1)) {
            if (table[h] < 0) {
                table[h] = s;
                break;
            }
            ir_step *o = &ir->s[table[h]];
            if (o->kind == IRS_OP && same_step(o, st)) {
                ir_replace_uses(ir, st->out, o->out);
                st->kind = IRS_DEAD;
                merged++;
                break;
            }
        }
    }
    free(table);
    return merged;
}
