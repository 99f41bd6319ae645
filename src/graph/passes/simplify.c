/* Algebraic simplification. Each rewrite keeps results bit for bit, except
 * merging scalar factors (t*a*b -> t*(a*b)), which rounds once instead of
 * twice and is applied only where it cannot move an overflow or underflow
 * (both factors at least 1 in magnitude, or both at most 1). Identities
 * that change NaN or Inf results (x*0 -> 0, x-x -> 0) are not applied.
 *
 *   x*1, 1*x, x/1, x+0, 0+x, x-0     -> x   (x+0 maps -0 to +0: equal, not
 *                                            bitwise; every other is exact)
 *   neg(neg(x))                      -> x
 *   permute(permute(x, p), q)        -> permute(x, p∘q), or x if identity
 *   reshape(reshape(x))              -> reshape(x); to x's own shape -> x
 *   mul(mul(t, a), b), a, b scalars  -> mul(t, a*b); div by a power of two
 *                                       counts as a multiplication
 *   sum of slice_scatter(zeros, g_i) -> concat(g_1, zeros, g_2, ...): the
 *     over disjoint slices of one axis   gradient of a tensor read slice by
 *                                       slice (an RNN's precomputed input
 *                                       gates, an LSTM's four gates), built
 *                                       once instead of as one full-size
 *                                       zero tensor per slice (exact)
 *   transpose(matmul(a, b)), 2-D     -> matmul(transpose(b), transpose(a)):
 *                                       the product is written in the layout
 *                                       wanted instead of copied into it
 *                                       (the same sums; BLAS may order them
 *                                       differently, so equal within rounding) */
#include "pass_util.h"

#include <math.h>
#include <stdlib.h>

/* A constant operand equal to v, of one element, that broadcasting does not
 * widen past x (so the result has x's shape). */
static bool is_identity_operand(cn_ir *ir, int32_t c, double v, int32_t x, int32_t out) {
    double got;
    if (!pass_const_scalar(ir, c, &got) || got != v || signbit(got) != signbit(v)) return false;
    if (ir->v[c].t->ndim > ir->v[out].t->ndim) return false;
    return pass_same_meta(ir->v[x].t, ir->v[out].t);
}

/* Replace the step's result by value x everywhere. */
static int forward_to(cn_ir *ir, ir_step *st, int32_t x, int32_t c) {
    if (c >= 0 && ir_assume(ir, ir->v[c].t) < 0) return -1;
    ir_replace_uses(ir, st->out, x);
    st->kind = IRS_DEAD;
    return 1;
}

static int identity(cn_ir *ir, ir_step *st) {
    int32_t a = st->in[0], b = st->nin > 1 ? st->in[1] : -1, o = st->out;
    switch (st->op) {
    case CN_OP_mul:
        if (is_identity_operand(ir, b, 1, a, o)) return forward_to(ir, st, a, b);
        if (is_identity_operand(ir, a, 1, b, o)) return forward_to(ir, st, b, a);
        break;
    case CN_OP_div:
        if (is_identity_operand(ir, b, 1, a, o)) return forward_to(ir, st, a, b);
        break;
    case CN_OP_add:
        /* x + (-0) is exact; x + 0 turns -0 into +0 (equal values). */
        if (is_identity_operand(ir, b, 0, a, o) || is_identity_operand(ir, b, -0.0, a, o))
            return forward_to(ir, st, a, b);
        if (is_identity_operand(ir, a, 0, b, o) || is_identity_operand(ir, a, -0.0, b, o))
            return forward_to(ir, st, b, a);
        break;
    case CN_OP_sub:
        if (is_identity_operand(ir, b, 0, a, o)) return forward_to(ir, st, a, b);
        break;
    case CN_OP_neg: {
        ir_step *p = pass_producer(ir, a);
        if (p && p->kind == IRS_OP && p->op == CN_OP_neg) return forward_to(ir, st, p->in[0], -1);
        break;
    }
    default: break;
    }
    return 0;
}

static int permutes(cn_ir *ir, ir_step *st) {
    ir_step *p = pass_producer(ir, st->in[0]);
    if (!p || p->kind != IRS_OP || p->op != CN_OP_permute) return 0;
    int n = (int)st->attrs.nlist;
    if (p->attrs.nlist != n) return 0;
    /* out[i] = mid[q[i]] = x[p[q[i]]] */
    cn_attrs a = st->attrs;
    bool ident = true;
    for (int i = 0; i < n; i++) {
        a.list[i] = p->attrs.list[st->attrs.list[i]];
        ident &= a.list[i] == i;
    }
    if (ident) return forward_to(ir, st, p->in[0], -1);
    st->attrs = a;
    st->in[0] = p->in[0];
    return 1;
}

static int transposed_product(cn_ir *ir, int s, const int32_t *uses) {
    ir_step *st = &ir->s[s];
    if (st->attrs.nlist != 2 || st->attrs.list[0] != 1 || st->attrs.list[1] != 0) return 0;
    ir_step *p = pass_producer(ir, st->in[0]);
    if (!p || p->kind != IRS_OP || p->op != CN_OP_matmul || uses[st->in[0]] != 1) return 0;
    int32_t a = p->in[0], b = p->in[1];
    const cn_tensor *at = ir->v[a].t, *bt = ir->v[b].t;
    if (at->ndim != 2 || bt->ndim != 2) return 0;
    cn_attrs tr = st->attrs, ma = p->attrs;
    int64_t bs[2] = {bt->shape[1], bt->shape[0]}, as[2] = {at->shape[1], at->shape[0]};
    int32_t vb = ir_insert_step(ir, s, CN_OP_permute, &b, 1, &tr, (cn_dtype)bt->dtype, 2, bs);
    if (vb < 0) return -1;
    int32_t va = ir_insert_step(ir, s + 1, CN_OP_permute, &a, 1, &tr, (cn_dtype)at->dtype, 2, as);
    if (va < 0) return -1;
    st = &ir->s[s + 2];
    st->op = CN_OP_matmul;
    st->attrs = ma;
    free(st->in);
    st->in = malloc(sizeof *st->in * 2);
    if (!st->in) return -1;
    st->in[0] = vb;
    st->in[1] = va;
    st->nin = 2;
    return 1;
}

/* ---- sums of slice_scatters into zeros ---- */

typedef struct piece {
    int32_t g;
    int64_t start, stop;
} piece;

typedef struct scatter_sum {
    int32_t base; /* the zeros every piece is scattered into */
    int axis;
    piece *p;
    int n, cap;
} scatter_sum;

static bool is_zeros(cn_ir *ir, int32_t v) {
    ir_step *p = pass_producer(ir, v);
    return p && p->kind == IRS_OP && p->op == CN_OP_full_like && p->attrs.f[0] == 0 &&
           !signbit(p->attrs.f[0]);
}

/* Add the pieces of v to ss if v is a slice_scatter into zeros, or a sum of
 * such read by nothing else. */
static bool collect(cn_ir *ir, int32_t v, const int32_t *uses, bool root, scatter_sum *ss) {
    ir_step *p = pass_producer(ir, v);
    if (!p || p->kind != IRS_OP || (!root && uses[v] != 1)) return false;
    if (p->op == CN_OP_add) {
        const cn_tensor *o = ir->v[v].t;
        return pass_same_meta(ir->v[p->in[0]].t, o) && pass_same_meta(ir->v[p->in[1]].t, o) &&
               collect(ir, p->in[0], uses, false, ss) && collect(ir, p->in[1], uses, false, ss);
    }
    if (p->op != CN_OP_slice_scatter || p->attrs.i[3] != 1) return false;
    int32_t base = p->in[0];
    int axis = (int)p->attrs.i[0];
    const cn_tensor *bt = ir->v[base].t;
    if (ss->base >= 0 ? base != ss->base || axis != ss->axis : !is_zeros(ir, base)) return false;
    int64_t size = axis >= 0 && axis < bt->ndim ? bt->shape[axis] : -1;
    int64_t a = p->attrs.i[1], b = p->attrs.i[2];
    if (size < 0 || a < 0 || b > size || a >= b) return false;
    if (ss->n == ss->cap) {
        int nc = ss->cap ? 2 * ss->cap : 8;
        piece *np = realloc(ss->p, sizeof *np * (size_t)nc);
        if (!np) return false;
        ss->p = np;
        ss->cap = nc;
    }
    ss->base = base;
    ss->axis = axis;
    ss->p[ss->n++] = (piece){p->in[1], a, b};
    return true;
}

static int cmp_piece(const void *x, const void *y) {
    const piece *a = x, *b = y;
    return (a->start > b->start) - (a->start < b->start);
}

/* Step s (an add) becomes a concat of the pieces, with slices of the zeros
 * for the gaps; returns how many steps were inserted before it, or < 0. */
static int scatter_sum_to_concat(cn_ir *ir, int s, const int32_t *uses) {
    scatter_sum ss = {-1, 0, NULL, 0, 0};
    int inserted = 0;
    if (!collect(ir, ir->s[s].out, uses, true, &ss) || ss.n < 2) goto none;
    qsort(ss.p, (size_t)ss.n, sizeof *ss.p, cmp_piece);
    for (int k = 1; k < ss.n; k++)
        if (ss.p[k].start < ss.p[k - 1].stop) goto none; /* overlapping: a real sum */
    const cn_tensor *bt = ir->v[ss.base].t;
    int64_t size = bt->shape[ss.axis];
    int32_t *in = malloc(sizeof *in * (size_t)(2 * ss.n + 1));
    if (!in) goto fail;
    int nin = 0;
    int64_t at = 0;
    for (int k = 0; k <= ss.n; k++) {
        int64_t next = k < ss.n ? ss.p[k].start : size;
        if (next > at) { /* a gap: that slice of the zeros */
            cn_attrs a;
            memset(&a, 0, sizeof a);
            a.i[0] = ss.axis, a.i[1] = at, a.i[2] = next, a.i[3] = 1;
            int64_t shape[CN_MAX_DIMS];
            memcpy(shape, bt->shape, sizeof(int64_t) * (size_t)bt->ndim);
            shape[ss.axis] = next - at;
            int32_t z = ir_insert_step(ir, s + inserted, CN_OP_slice, &ss.base, 1, &a,
                                       (cn_dtype)bt->dtype, bt->ndim, shape);
            if (z < 0) {
                free(in);
                goto fail;
            }
            inserted++;
            in[nin++] = z;
        }
        if (k < ss.n) {
            in[nin++] = ss.p[k].g;
            at = ss.p[k].stop;
        }
    }
    ir_step *st = &ir->s[s + inserted];
    free(st->in);
    st->in = in;
    st->nin = nin;
    st->op = CN_OP_concat;
    memset(&st->attrs, 0, sizeof st->attrs);
    st->attrs.i[0] = ss.axis;
    free(ss.p);
    return inserted + 1; /* > 0: rewritten */
none:
    free(ss.p);
    return 0;
fail:
    free(ss.p);
    return -1;
}

static int reshapes(cn_ir *ir, ir_step *st) {
    int32_t x = st->in[0];
    ir_step *p = pass_producer(ir, x);
    int n = 0;
    if (p && p->kind == IRS_OP && p->op == CN_OP_reshape) {
        st->in[0] = x = p->in[0];
        n = 1;
    }
    /* To x's own (fully known) shape: nothing to do. */
    const cn_tensor *xt = ir->v[x].t, *ot = ir->v[st->out].t;
    bool known = true;
    for (int i = 0; i < ot->ndim; i++) known &= ot->shape[i] >= 0;
    if (known && pass_same_meta(xt, ot)) return forward_to(ir, st, x, -1);
    return n;
}

static bool power_of_two(double v) {
    int e;
    return v != 0 && isfinite(v) && fabs(frexp(v, &e)) == 0.5;
}

/* t*a as (t, a) if step is a multiplication (or a division by a power of
 * two) of a value by a scalar constant. */
static bool scalar_factor(cn_ir *ir, const ir_step *st, int32_t *t, double *a, int32_t *c) {
    if (st->kind != IRS_OP || st->nin != 2) return false;
    if (st->op == CN_OP_mul) {
        if (pass_const_scalar(ir, st->in[1], a)) {
            *t = st->in[0];
            *c = st->in[1];
            return true;
        }
        if (pass_const_scalar(ir, st->in[0], a)) {
            *t = st->in[1];
            *c = st->in[0];
            return true;
        }
    } else if (st->op == CN_OP_div && pass_const_scalar(ir, st->in[1], a) && power_of_two(*a)) {
        *a = 1 / *a;
        *t = st->in[0];
        *c = st->in[1];
        return true;
    }
    return false;
}

static int scalar_chain(cn_ir *ir, ir_step *st, const int32_t *uses) {
    int32_t t, c;
    double b;
    if (!scalar_factor(ir, st, &t, &b, &c)) return 0;
    ir_step *p = pass_producer(ir, t);
    int32_t t2, c2;
    double a;
    /* The inner product must have no other reader, or it is computed anyway. */
    if (!p || uses[t] != 1 || !scalar_factor(ir, p, &t2, &a, &c2)) return 0;
    const cn_tensor *ot = ir->v[st->out].t, *ct = ir->v[c].t, *ct2 = ir->v[c2].t;
    if (!cn_dtype_is_float((cn_dtype)ot->dtype) || ct->dtype != ot->dtype ||
        ct2->dtype != ot->dtype || !pass_same_meta(ir->v[t2].t, ot) ||
        ct->ndim > ot->ndim || ct2->ndim > ot->ndim)
        return 0;
    bool up = fabs(a) >= 1 && fabs(b) >= 1, down = fabs(a) <= 1 && fabs(b) <= 1;
    if (!up && !down) return 0;
    double ab = a * b;
    if (!isfinite(ab) || ab == 0) return 0;
    if (ir_assume(ir, ir->v[c].t) < 0 || ir_assume(ir, ir->v[c2].t) < 0) return -1;
    cn_tensor *k = cn_t_scalar((cn_dtype)ot->dtype, ab);
    if (!k) return -1;
    int32_t kid = ir_add_value(ir, k, IRV_CONST, -1);
    cn_release(k);
    if (kid < 0) return -1;
    st->op = CN_OP_mul;
    st->in[0] = t2;
    st->in[1] = kid;
    return 1;
}

int cn_pass_simplify(cn_ir *ir) {
    int total = 0;
    int32_t *uses = ir_use_counts(ir);
    if (!uses) return CN_ENOMEM;
    /* Outermost sums first (backwards), so a sum's inner adds are not
     * rewritten on their own. */
    for (int s = ir->ns - 1; s >= 0; s--) {
        ir_step *st = &ir->s[s];
        if (st->kind != IRS_OP || st->op != CN_OP_add || !uses[st->out]) continue;
        int r = scatter_sum_to_concat(ir, s, uses);
        if (r < 0) {
            free(uses);
            return cn_failc(CN_ENOMEM, "simplify: out of memory");
        }
        if (r > 0) {
            total++;
            free(uses);
            if (!(uses = ir_use_counts(ir))) return CN_ENOMEM;
        }
    }
    for (int s = 0; s < ir->ns; s++) {
        ir_step *st = &ir->s[s];
        if (st->kind != IRS_OP) continue;
        int r;
        switch (st->op) {
        case CN_OP_permute:
            r = permutes(ir, st);
            if (r == 0) {
                r = transposed_product(ir, s, uses);
                if (r > 0) s += 2; /* two steps were inserted before it */
            }
            break;
        case CN_OP_reshape: r = reshapes(ir, st); break;
        default:
            r = identity(ir, st);
            if (r == 0) r = scalar_chain(ir, st, uses);
            break;
        }
        if (r < 0) {
            free(uses);
            return cn_failc(CN_ENOMEM, "simplify: out of memory");
        }
        if (r > 0) {
            total += r;
            /* Uses changed: recount (rewrites are rare; graphs are small). */
            free(uses);
            uses = ir_use_counts(ir);
            if (!uses) return CN_ENOMEM;
        }
    }
    free(uses);
    return total;
}
