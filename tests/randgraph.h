/* Random graphs for the pass tests (test_passes.c): a seeded generator
 * writes a recipe (a list of nodes over numbered values), and one
 * interpreter applies it to tensors through the public API. Given
 * placeholders it builds a static graph; given data it computes eagerly:
 * the same C code both ways, which is how this codebase traces.
 *
 * The generator tracks each value's shape with -1 for the batch size of
 * placeholders with an unknown first axis, and only emits ops that are
 * valid for every batch size (the batch axis meets only itself or 1 in a
 * broadcast, is never sliced to another length, concatenated along, or
 * reshaped except as the leading -1). */
#ifndef CN_TEST_RANDGRAPH_H
#define CN_TEST_RANDGRAPH_H

#include "harness.h"

#define RG_MAXD 4
#define RG_MAXN 28
#define RG_MAXIN 3
#define RG_MAXV (RG_MAXIN + RG_MAXN)
#define RG_MAXOUT 4
#define RG_MAXPARAM 4

typedef struct rg_shape {
    int nd;
    int64_t sh[RG_MAXD]; /* -1: the batch size */
    bool mask;           /* a bool value (a comparison) */
} rg_shape;

enum {
    R_UNARY, R_BINARY, R_SCALAR, R_SCALAR_T, R_CHAIN, R_IDENT, R_REDUCE, R_MATMUL, R_MATMUL2,
    R_LINEAR, R_PERMUTE, R_TRANSPOSE, R_PERM2, R_RESHAPE, R_RESHAPE2, R_SLICE, R_CONCAT, R_CMP,
    R_WHERE, R_SOFTMAX, R_DUP, R_NKINDS
};

typedef struct rg_node {
    int op, kind;
    int a, b, c;       /* operand values (-1: none) */
    double s[3];       /* scalars */
    int i[RG_MAXD + 2];/* axes, permutations, flags */
    int nd;            /* a reshape's shape as passed (-1: inferred) */
    int64_t sh[RG_MAXD];
    int nd2;
    int64_t sh2[RG_MAXD];
    cn_tensor *k, *k2; /* constant or parameter operands (borrowed from the scope) */
} rg_node;

typedef struct rg_graph {
    cn_dtype dt;
    int nin;
    int nn;
    rg_node n[RG_MAXN];
    rg_shape v[RG_MAXV]; /* inputs first, then one value per node */
    int nout, out[RG_MAXOUT];
    cn_tensor *loss_w[RG_MAXOUT]; /* grad graphs: loss = sum_k sum(out_k * loss_w[k]) */
    bool grad;
    int nparam;
    cn_tensor *param[RG_MAXPARAM]; /* requires_grad tensors the nodes read */
    bool batch;                    /* some input has an unknown first axis */
    bool inexact; /* may have scalar factors whose product rounds (rg_factor_value) */
    /* The gradient of a mean over the batch axis: eager multiplies by 1/N,
     * a graph with N unknown until run divides by N (src/ops/reduce.c,
     * scale_count): one rounding apart. */
    bool mean_over_batch;
    /* A matrix product or a sum (reductions, softmax): its kernel may add
     * in another order when a rewrite drops a copy (x/1 of a transposed x)
     * and it reads a view instead. */
    bool layout_sensitive;
} rg_graph;

/* ---- shapes ---- */

static bool rg_bcast(const rg_shape *a, const rg_shape *b, rg_shape *o) {
    int nd = a->nd > b->nd ? a->nd : b->nd;
    rg_shape r = {nd, {0}, false};
    for (int i = 0; i < nd; i++) {
        int64_t da = i < a->nd ? a->sh[a->nd - 1 - i] : 1, db = i < b->nd ? b->sh[b->nd - 1 - i] : 1;
        int64_t d;
        if (da == db) d = da;
        else if (da == 1) d = db;
        else if (db == 1) d = da;
        else return false;
        r.sh[nd - 1 - i] = d;
    }
    if (o) *o = r;
    return true;
}

static bool rg_has_batch(const rg_shape *s) {
    for (int i = 0; i < s->nd; i++)
        if (s->sh[i] < 0) return true;
    return false;
}

static int rg_batch_axes(const rg_shape *s) {
    int n = 0;
    for (int i = 0; i < s->nd; i++) n += s->sh[i] < 0;
    return n;
}

static int64_t rg_numel_known(const rg_shape *s) { /* batch axes count as 1 */
    int64_t n = 1;
    for (int i = 0; i < s->nd; i++) n *= s->sh[i] < 0 ? 1 : s->sh[i];
    return n;
}

/* A tensor of the graph's dtype that broadcasts against s (batch axes 1,
 * some axes 1, some leading axes dropped). */
static cn_tensor *rg_operand_for(const rg_graph *g, const rg_shape *s, rg_shape *ks, bool param) {
    int drop = (int)th_randint(0, s->nd + 1);
    rg_shape k = {s->nd - drop, {0}, false};
    for (int i = 0; i < k.nd; i++) {
        int64_t d = s->sh[i + drop];
        k.sh[i] = d < 0 || th_randint(0, 3) == 0 ? 1 : d;
    }
    if (ks) *ks = k;
    cn_tensor *t = th_random(g->dt, k.nd, k.sh, -1, 1, (int)th_randint(0, TH_NLAYOUTS), NULL);
    if (param) cn_set_requires_grad(t, true);
    return t;
}

/* ---- the interpreter ---- */

static cn_tensor *rg_unary(int k, cn_tensor *x) {
    switch (k) {
    case 0: return cn_neg(x);
    case 1: return cn_abs(x);
    case 2: return cn_tanh(x);
    case 3: return cn_sigmoid(x);
    case 4: return cn_relu(x);
    case 5: return cn_square(x);
    case 6: return cn_sin(x);
    case 7: return cn_silu(x);
    case 8: return cn_gelu(x, true);
    case 9: return cn_gelu(x, false);
    case 10: return cn_leaky_relu(x, 0.1);
    case 11: return cn_elu(x, 1.0);
    case 12: return cn_softplus(x, 1.0, 20.0);
    case 13: return cn_clamp(x, -0.5, 0.7);
    case 14: return cn_erf(x);
    case 15: return cn_exp(cn_tanh(x));
    case 16: return cn_log(cn_add_scalar(cn_square(x), 1));
    case 17: return cn_sqrt(cn_add_scalar(cn_abs(x), 0.25));
    case 18: return cn_reciprocal(cn_add_scalar(cn_abs(x), 0.5));
    default: return cn_cos(x);
    }
}
#define RG_NUNARY 20

static cn_tensor *rg_binary(int k, cn_tensor *a, cn_tensor *b) {
    switch (k) {
    case 0: return cn_add(a, b);
    case 1: return cn_sub(a, b);
    case 2: return cn_mul(a, b);
    case 3: return cn_div(a, cn_add_scalar(cn_abs(b), 0.5)); /* away from 0 */
    case 4: return cn_maximum(a, b);
    case 5: return cn_minimum(a, b);
    default: return cn_pow(cn_add_scalar(cn_abs(a), 0.5), cn_clamp(b, -2, 2));
    }
}
#define RG_NBINARY 7

static cn_tensor *rg_scalar(int k, cn_tensor *x, double s) {
    switch (k) {
    case 0: return cn_add_scalar(x, s);
    case 1: return cn_sub_scalar(x, s);
    case 2: return cn_rsub_scalar(x, s);
    case 3: return cn_mul_scalar(x, s);
    default: return cn_div_scalar(x, s);
    }
}

static cn_tensor *rg_cmp(int k, cn_tensor *a, cn_tensor *b) {
    switch (k) {
    case 0: return cn_gt(a, b);
    case 1: return cn_lt(a, b);
    case 2: return cn_ge(a, b);
    case 3: return cn_le(a, b);
    case 4: return cn_eq(a, b);
    default: return cn_ne(a, b);
    }
}

static cn_tensor *rg_reduce(int k, cn_tensor *x, const int *axes, int naxes, bool keep) {
    switch (k) {
    case 0: return cn_sum(x, axes, naxes, keep);
    case 1: return cn_mean(x, axes, naxes, keep);
    case 2: return cn_max(x, axes, naxes, keep);
    case 3: return cn_min(x, axes, naxes, keep);
    default: return cn_logsumexp(x, axes, naxes, keep);
    }
}

static cn_tensor *rg_apply(const rg_graph *g, const rg_node *n, cn_tensor *const *v) {
    cn_tensor *a = n->a >= 0 ? v[n->a] : NULL;
    cn_tensor *b = n->b >= 0 ? v[n->b] : n->k;
    switch (n->op) {
    case R_UNARY: return rg_unary(n->kind, a);
    case R_BINARY:
        /* A constant subtree: computed while tracing (no symbolic input);
         * from a parameter it is an eager autograd record inside the graph. */
        if (n->i[1]) b = cn_sigmoid(cn_mul(b, b));
        return n->i[0] ? rg_binary(n->kind, b, a) : rg_binary(n->kind, a, b);
    case R_SCALAR: return rg_scalar(n->kind, a, n->s[0]);
    case R_SCALAR_T: {
        cn_tensor *c = cn_scalar(g->dt, n->s[0]);
        return n->i[0] ? rg_binary(n->kind, c, a) : rg_binary(n->kind, a, c);
    }
    case R_CHAIN: /* mul(mul(mul(t, a), b), c); kind 1: divisions */
        for (int k = 0; k < 3 && a; k++)
            a = n->kind ? cn_div_scalar(a, n->s[k]) : cn_mul_scalar(a, n->s[k]);
        return a;
    case R_IDENT:
        switch (n->kind) {
        case 0: return cn_mul_scalar(a, 1);
        case 1: return cn_mul(cn_scalar(g->dt, 1), a);
        case 2: return cn_add_scalar(a, 0);
        case 3: return cn_add(cn_scalar(g->dt, 0), a);
        case 4: return cn_sub_scalar(a, 0);
        case 5: return cn_div_scalar(a, 1);
        case 6: return cn_neg(cn_neg(a));
        case 7: return cn_mul_scalar(a, 0);           /* not x -> 0: NaN, Inf */
        case 8: return cn_add(a, cn_scalar(g->dt, -0.0));
        default: return cn_mul(a, n->k);              /* ones of a higher rank */
        }
    case R_REDUCE:
        return rg_reduce(n->kind, a, n->i[0] < 0 ? NULL : &n->i[0], n->i[0] < 0 ? 0 : 1,
                         n->i[1] != 0);
    case R_MATMUL: return cn_matmul(a, n->k);
    case R_MATMUL2: return cn_matmul(a, v[n->b]);
    case R_LINEAR: {
        cn_tensor *h = cn_add(cn_matmul(a, n->k), n->k2);
        return n->kind == 0 ? cn_relu(h) : n->kind == 1 ? cn_tanh(h) : h;
    }
    case R_PERMUTE: return cn_permute(a, n->i, cn_ndim(a));
    case R_TRANSPOSE: return cn_transpose(a, n->i[0], n->i[1]);
    case R_PERM2: {
        int q[RG_MAXD];
        for (int i = 0; i < cn_ndim(a); i++) q[i] = (int)n->sh[i];
        return cn_permute(cn_permute(a, n->i, cn_ndim(a)), q, cn_ndim(a));
    }
    case R_RESHAPE: return cn_reshape(a, n->nd, n->sh);
    case R_RESHAPE2: return cn_reshape(cn_reshape(a, n->nd, n->sh), n->nd2, n->sh2);
    case R_SLICE:
        if (n->kind) return cn_slice(a, n->i[0], CN_END, CN_BEGIN, -1);
        return cn_slice(a, n->i[0], n->i[1], n->i[2], n->i[3]);
    case R_CONCAT: {
        cn_tensor *xs[2] = {a, v[n->b]};
        return cn_concat(xs, 2, n->i[0]);
    }
    case R_CMP: return n->k ? rg_cmp(n->kind, a, n->k) : rg_cmp(n->kind, a, v[n->b]);
    case R_WHERE: return cn_where(v[n->c], a, b);
    case R_SOFTMAX: return n->kind ? cn_log_softmax(a, n->i[0]) : cn_softmax(a, n->i[0]);
    default: return NULL;
    }
}

/* vals[0..nin) = inputs; computes every node. 0, or -1 naming the node. */
static int rg_eval(const rg_graph *g, cn_tensor *const *inputs, cn_tensor **vals) {
    for (int i = 0; i < g->nin; i++) vals[i] = inputs[i];
    for (int j = 0; j < g->nn; j++) {
        const rg_node *n = &g->n[j];
        if (n->op == R_DUP) vals[g->nin + j] = rg_apply(g, &g->n[n->a], vals);
        else vals[g->nin + j] = rg_apply(g, n, vals);
        if (!vals[g->nin + j]) {
            fprintf(stderr, "randgraph: node %d (op %d kind %d) failed: %s\n", j, n->op, n->kind,
                    cn_last_error());
            return -1;
        }
    }
    return 0;
}

/* The graph's outputs: the chosen values, then for grad graphs the loss and
 * its gradient w.r.t. each input (wrt[0..nin)) and parameter (NULL where
 * the loss does not depend on it). Returns the count, or -1. */
static int rg_outputs(const rg_graph *g, cn_tensor *const *inputs, cn_tensor **outs) {
    cn_tensor *vals[RG_MAXV];
    if (rg_eval(g, inputs, vals) < 0) return -1;
    int no = 0;
    for (int k = 0; k < g->nout; k++) outs[no++] = vals[g->out[k]];
    if (!g->grad) return no;
    cn_tensor *loss = NULL;
    for (int k = 0; k < g->nout; k++) {
        if (g->v[g->out[k]].mask) continue;
        cn_tensor *l = cn_sum(cn_mul(vals[g->out[k]], g->loss_w[k]), NULL, 0, false);
        loss = loss ? cn_add(loss, l) : l;
    }
    cn_tensor *wrt[RG_MAXIN + RG_MAXPARAM];
    int nw = 0;
    for (int i = 0; i < g->nin; i++) wrt[nw++] = inputs[i];
    for (int i = 0; i < g->nparam; i++) wrt[nw++] = g->param[i];
    if (!loss || cn_grad(&loss, NULL, 1, wrt, nw, outs + no + 1, CN_GRAD_ALLOW_UNUSED) < 0) {
        fprintf(stderr, "randgraph: grad failed: %s\n", cn_last_error());
        return -1;
    }
    outs[no] = loss;
    return no + 1 + nw;
}

/* ---- the generator ---- */

static const double rg_scalars[] = {0, 1, -0.0, 2, 0.5, 3, 0.1, -1, 4, -2.5};
#define RG_NSCALARS 10

static bool rg_pow2(double v) {
    int e;
    return v != 0 && fabs(frexp(v, &e)) == 0.5;
}

/* A multiplication by a one-element constant: chains of them are merged
 * into one factor, which rounds like the chain only if the factors are
 * powers of two (0 and 1 are not merged). Graphs not marked inexact get
 * powers of two only, so they must match eager evaluation bit for bit. */
static double rg_factor_value(const rg_graph *g, double v) {
    if (g->inexact || v == 0 || fabs(v) == 1 || rg_pow2(v)) return v;
    return v < 0 ? -2 : 0.5;
}

static void rg_fix_factor_tensor(const rg_graph *g, cn_tensor *t) {
    if (cn_numel(t) == 1 && !cn_requires_grad(t)) cn_fill_(t, rg_factor_value(g, cn_item(t)));
}

/* A random float value, often a recent one (so chains form). */
static int rg_pick(const rg_graph *g, int nv) {
    for (int tries = 0; tries < 50; tries++) {
        int v = th_randint(0, 2) ? nv - 1 - (int)th_randint(0, nv < 3 ? nv : 3)
                                 : (int)th_randint(0, nv);
        if (!g->v[v].mask) return v;
    }
    for (int v = nv - 1; v >= 0; v--)
        if (!g->v[v].mask) return v;
    return 0;
}

/* A value (float or mask) that broadcasts with s, or -1. */
static int rg_find_compatible(const rg_graph *g, int nv, const rg_shape *s, bool mask, int avoid) {
    int start = (int)th_randint(0, nv);
    for (int k = 0; k < nv; k++) {
        int v = (start + k) % nv;
        if (v != avoid && g->v[v].mask == mask && rg_bcast(&g->v[v], s, NULL)) return v;
    }
    return -1;
}

static cn_tensor *rg_const_or_param(rg_graph *g, const rg_shape *s, rg_shape *ks) {
    bool param = g->nparam < RG_MAXPARAM && th_randint(0, 4) == 0;
    cn_tensor *t = rg_operand_for(g, s, ks, param);
    if (param) g->param[g->nparam++] = t;
    return t;
}

static cn_tensor *rg_matrix(rg_graph *g, int64_t r, int64_t c) {
    bool param = g->nparam < RG_MAXPARAM && th_randint(0, 3) == 0;
    cn_tensor *t = th_random(g->dt, 2, (int64_t[]){r, c}, -1, 1, (int)th_randint(0, TH_NLAYOUTS), NULL);
    if (param) {
        cn_set_requires_grad(t, true);
        g->param[g->nparam++] = t;
    }
    return t;
}

/* Split n into nd factors (nd in 1..3) at random. */
static int rg_factor(int64_t n, int64_t *out) {
    int nd = (int)th_randint(1, 4);
    for (int i = 0; i < nd - 1; i++) {
        int64_t divs[64];
        int nds = 0;
        for (int64_t d = 1; d <= n && nds < 64; d++)
            if (n % d == 0) divs[nds++] = d;
        out[i] = divs[th_randint(0, nds)];
        n /= out[i];
    }
    out[nd - 1] = n;
    return nd;
}

/* Fill in node j (value id nv) of the given op from value a; false if the
 * op does not apply to it. */
static bool rg_try(rg_graph *g, int op, int nv) {
    rg_node *n = &g->n[g->nn];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->a = rg_pick(g, nv);
    n->b = n->c = -1;
    const rg_shape *sa = &g->v[n->a];
    rg_shape r = *sa;
    r.mask = false;
    switch (op) {
    case R_UNARY: n->kind = (int)th_randint(0, RG_NUNARY); break;
    case R_BINARY: {
        n->kind = (int)th_randint(0, RG_NBINARY);
        n->i[0] = (int)th_randint(0, 2); /* operand order */
        int b = th_randint(0, 2) ? rg_find_compatible(g, nv, sa, false, -1) : -1;
        rg_shape sb;
        if (b >= 0) {
            n->b = b;
            sb = g->v[b];
        } else {
            n->k = rg_const_or_param(g, sa, &sb);
            rg_fix_factor_tensor(g, n->k);
            n->i[1] = th_randint(0, 4) == 0 && (n->kind != 2 || g->inexact);
        }
        rg_bcast(sa, &sb, &r);
        break;
    }
    case R_SCALAR:
        n->kind = (int)th_randint(0, 5);
        n->s[0] = rg_scalars[th_randint(0, RG_NSCALARS)];
        if (n->kind == 4 && n->s[0] == 0) n->s[0] = 1;
        if (n->kind == 3) n->s[0] = rg_factor_value(g, n->s[0]);
        break;
    case R_SCALAR_T:
        n->kind = (int)th_randint(0, 3); /* add, sub, mul with a rank-0 literal */
        n->i[0] = (int)th_randint(0, 2);
        n->s[0] = rg_scalars[th_randint(0, RG_NSCALARS)];
        if (n->kind == 2) n->s[0] = rg_factor_value(g, n->s[0]);
        break;
    case R_CHAIN: {
        static const double up[] = {2, 4, -2, 3, 1.5, -3}, down[] = {0.5, 0.25, -0.5, 0.1, 0.3, -0.7};
        static const double mixed[] = {3, 0.1, 2, 0.5};
        int dir = (int)th_randint(0, 3);
        n->kind = th_randint(0, 4) == 0; /* divisions */
        for (int k = 0; k < 3; k++) {
            n->s[k] = dir == 0 ? up[th_randint(0, 6)] : dir == 1 ? down[th_randint(0, 6)]
                                                               : mixed[th_randint(0, 4)];
            n->s[k] = n->kind && !rg_pow2(n->s[k]) ? 2 : rg_factor_value(g, n->s[k]);
        }
        break;
    }
    case R_IDENT:
        n->kind = (int)th_randint(0, 10);
        if (n->kind == 9) {
            if (sa->nd >= RG_MAXD) return false;
            /* All ones: one element of a higher rank (x*1 widens x) */
            bool one = th_randint(0, 2);
            rg_shape big = {sa->nd + 1, {one ? 1 : 3}, false};
            for (int i = 0; i < sa->nd; i++) big.sh[i + 1] = sa->sh[i] < 0 || one ? 1 : sa->sh[i];
            n->k = cn_ones(g->dt, big.nd, big.sh);
            rg_bcast(sa, &big, &r);
        }
        break;
    case R_REDUCE:
        if (sa->nd == 0) return false;
        n->kind = (int)th_randint(0, 5);
        n->i[0] = th_randint(0, 4) == 0 ? -1 : (int)th_randint(0, sa->nd);
        n->i[1] = (int)th_randint(0, 2);
        if (n->kind == 1 && (n->i[0] < 0 ? rg_has_batch(sa) : sa->sh[n->i[0]] < 0))
            g->mean_over_batch = true;
        if (n->kind != 2 && n->kind != 3) g->layout_sensitive = true; /* not max, min */
        if (n->i[0] < 0) {
            r.nd = 0;
            if (n->i[1]) {
                r.nd = sa->nd;
                for (int i = 0; i < r.nd; i++) r.sh[i] = 1;
            }
        } else if (n->i[1]) {
            r.sh[n->i[0]] = 1;
        } else {
            for (int i = n->i[0]; i < sa->nd - 1; i++) r.sh[i] = sa->sh[i + 1];
            r.nd--;
        }
        break;
    case R_MATMUL:
    case R_LINEAR: {
        g->layout_sensitive = true;
        if (sa->nd == 0 || sa->sh[sa->nd - 1] < 0) return false;
        int64_t K = sa->sh[sa->nd - 1], N = th_randint(1, 6);
        n->k = rg_matrix(g, K, N);
        if (op == R_LINEAR) {
            n->kind = (int)th_randint(0, 3);
            n->k2 = th_random(g->dt, 1, (int64_t[]){N}, -1, 1, TH_CONTIG, NULL);
            if (g->nparam < RG_MAXPARAM && th_randint(0, 2)) {
                cn_set_requires_grad(n->k2, true);
                g->param[g->nparam++] = n->k2;
            }
        }
        if (sa->nd == 1) r.nd = 1, r.sh[0] = N;
        else r.sh[r.nd - 1] = N;
        break;
    }
    case R_MATMUL2: { /* two values: a [.., M, K] @ b [K, N] */
        if (sa->nd < 1 || sa->sh[sa->nd - 1] < 0) return false;
        int64_t K = sa->sh[sa->nd - 1];
        for (int v = 0; v < nv && n->b < 0; v++)
            if (!g->v[v].mask && g->v[v].nd == 2 && g->v[v].sh[0] == K && g->v[v].sh[1] > 0)
                n->b = v;
        if (n->b < 0) return false;
        g->layout_sensitive = true;
        int64_t N = g->v[n->b].sh[1];
        if (sa->nd == 1) r.nd = 1, r.sh[0] = N;
        else r.sh[r.nd - 1] = N;
        break;
    }
    case R_PERMUTE:
    case R_PERM2: {
        if (sa->nd < 2) return false;
        for (int i = 0; i < sa->nd; i++) n->i[i] = i;
        for (int i = sa->nd - 1; i > 0; i--) {
            int j = (int)th_randint(0, i + 1), t = n->i[i];
            n->i[i] = n->i[j];
            n->i[j] = t;
        }
        for (int i = 0; i < sa->nd; i++) r.sh[i] = sa->sh[n->i[i]];
        if (op == R_PERM2) { /* the inverse half of the time: the pair is the identity */
            int q[RG_MAXD];
            if (th_randint(0, 2))
                for (int i = 0; i < sa->nd; i++) q[n->i[i]] = i;
            else {
                for (int i = 0; i < sa->nd; i++) q[i] = sa->nd - 1 - i;
            }
            rg_shape m = r;
            for (int i = 0; i < sa->nd; i++) n->sh[i] = q[i], r.sh[i] = m.sh[q[i]];
        }
        break;
    }
    case R_TRANSPOSE:
        if (sa->nd < 2) return false;
        n->i[0] = (int)th_randint(0, sa->nd);
        n->i[1] = (int)th_randint(0, sa->nd);
        r.sh[n->i[0]] = sa->sh[n->i[1]];
        r.sh[n->i[1]] = sa->sh[n->i[0]];
        break;
    case R_RESHAPE:
    case R_RESHAPE2: {
        bool lead = sa->nd > 0 && sa->sh[0] < 0;
        for (int i = lead ? 1 : 0; i < sa->nd; i++)
            if (sa->sh[i] < 0) return false; /* the batch axis elsewhere */
        int64_t N = rg_numel_known(sa);
        for (int pass = 0; pass < (op == R_RESHAPE2 ? 2 : 1); pass++) {
            int64_t f[RG_MAXD];
            int nf = rg_factor(N, f);
            int nd = 0;
            int64_t call[RG_MAXD];
            if (lead) r.sh[0] = -1, call[nd++] = -1;
            for (int i = 0; i < nf && nd < RG_MAXD; i++) r.sh[nd] = f[i], call[nd++] = f[i];
            if (nd == RG_MAXD && nf + lead > RG_MAXD) return false;
            r.nd = nd;
            if (!lead && nd > 0 && th_randint(0, 3) == 0) call[th_randint(0, nd)] = -1;
            if (pass == 1 && th_randint(0, 3) == 0) { /* back to a's own shape */
                r = *sa;
                r.mask = false;
                nd = sa->nd;
                for (int i = 0; i < nd; i++) call[i] = sa->sh[i];
            }
            if (pass == 0) n->nd = nd, memcpy(n->sh, call, sizeof call);
            else n->nd2 = nd, memcpy(n->sh2, call, sizeof call);
        }
        break;
    }
    case R_SLICE: {
        if (sa->nd == 0) return false;
        int ax = (int)th_randint(0, sa->nd);
        n->i[0] = ax;
        int64_t d = sa->sh[ax];
        if (d < 0 || d < 2 || th_randint(0, 4) == 0) {
            n->kind = 1; /* reversed: any length, the batch axis too */
            break;
        }
        int64_t st = th_randint(0, d - 1), sp = th_randint(st + 1, d + 1), step = th_randint(1, 3);
        n->i[1] = (int)st, n->i[2] = (int)sp, n->i[3] = (int)step;
        r.sh[ax] = (sp - st + step - 1) / step;
        break;
    }
    case R_CONCAT: {
        if (sa->nd == 0) return false;
        int ax = (int)th_randint(0, sa->nd);
        if (sa->sh[ax] < 0) return false;
        n->i[0] = ax;
        n->b = n->a;
        for (int v = 0; v < nv; v++) {
            const rg_shape *sv = &g->v[v];
            bool ok = !sv->mask && sv->nd == sa->nd && sv->sh[ax] > 0;
            for (int i = 0; ok && i < sa->nd; i++) ok = i == ax || sv->sh[i] == sa->sh[i];
            if (ok && th_randint(0, 2)) n->b = v;
        }
        r.sh[ax] = sa->sh[ax] + g->v[n->b].sh[ax];
        break;
    }
    case R_CMP:
        n->kind = (int)th_randint(0, 6);
        if (th_randint(0, 2)) {
            n->k = cn_scalar(g->dt, th_randint(0, 2) ? 0 : 0.25);
        } else {
            n->b = rg_find_compatible(g, nv, sa, false, n->a);
            if (n->b < 0) n->b = n->a;
            rg_bcast(sa, &g->v[n->b], &r);
        }
        r.mask = true;
        break;
    case R_WHERE: {
        n->c = rg_find_compatible(g, nv, sa, true, -1);
        if (n->c < 0) return false;
        rg_bcast(sa, &g->v[n->c], &r);
        int b = rg_find_compatible(g, nv, &r, false, -1);
        rg_shape sb;
        if (b >= 0 && th_randint(0, 2)) {
            n->b = b;
            sb = g->v[b];
        } else {
            n->k = rg_operand_for(g, &r, &sb, false);
        }
        rg_bcast(&r, &sb, &r);
        r.mask = false;
        break;
    }
    case R_SOFTMAX:
        if (sa->nd == 0) return false;
        g->layout_sensitive = true;
        n->kind = (int)th_randint(0, 2);
        n->i[0] = (int)th_randint(0, sa->nd);
        break;
    case R_DUP: { /* the same expression built again: CSE's work */
        if (g->nn == 0) return false;
        int j = (int)th_randint(0, g->nn);
        if (g->n[j].op == R_DUP) return false;
        n->a = j;
        r = g->v[g->nin + j];
        break;
    }
    default: return false;
    }
    /* Gradients cannot yet go back through a value with two unknown axes
     * ([B,1] * [1,B]): their rules reshape to a shape with two -1 sizes. */
    if (g->grad && rg_batch_axes(&r) > 1) return false;
    g->v[nv] = r;
    g->nn++;
    return true;
}

static const int rg_weights[R_NKINDS] = {
    [R_UNARY] = 10, [R_BINARY] = 10, [R_SCALAR] = 5, [R_SCALAR_T] = 3, [R_CHAIN] = 3,
    [R_IDENT] = 6,  [R_REDUCE] = 4,  [R_MATMUL] = 3, [R_MATMUL2] = 1,  [R_LINEAR] = 2,
    [R_PERMUTE] = 2, [R_TRANSPOSE] = 2, [R_PERM2] = 2, [R_RESHAPE] = 2, [R_RESHAPE2] = 2,
    [R_SLICE] = 3,  [R_CONCAT] = 2,  [R_CMP] = 3,    [R_WHERE] = 3,    [R_SOFTMAX] = 1,
    [R_DUP] = 5};

static int rg_random_op(void) {
    int total = 0;
    for (int k = 0; k < R_NKINDS; k++) total += rg_weights[k];
    int r = (int)th_randint(0, total);
    for (int k = 0; k < R_NKINDS; k++) {
        if (r < rg_weights[k]) return k;
        r -= rg_weights[k];
    }
    return R_UNARY;
}

/* A random graph from seed. Its constants live in the current scope. */
static void rg_generate(rg_graph *g, uint64_t seed) {
    memset(g, 0, sizeof *g);
    th_seed(seed * 0x9E3779B97F4A7C15ull + 1);
    g->dt = th_randint(0, 4) == 0 ? CN_F64 : CN_F32;
    g->inexact = th_randint(0, 3) == 0;
    g->nin = (int)th_randint(1, RG_MAXIN + 1);
    g->batch = th_randint(0, 2);
    for (int i = 0; i < g->nin; i++) {
        rg_shape *s = &g->v[i];
        s->nd = (int)th_randint(i == 0 ? 1 : 0, 4);
        for (int d = 0; d < s->nd; d++) s->sh[d] = th_randint(1, 6);
        if (g->batch && s->nd > 0 && (i == 0 || th_randint(0, 2))) s->sh[0] = -1;
    }
    g->grad = th_randint(0, 5) < 2;
    int want = (int)th_randint(6, RG_MAXN + 1);
    for (int tries = 0; g->nn < want && tries < 400; tries++) rg_try(g, rg_random_op(), g->nin + g->nn);
    int nv = g->nin + g->nn;
    /* Outputs: the last value and up to two others; the rest is dead code. */
    g->out[g->nout++] = nv - 1;
    int extra = (int)th_randint(0, 3);
    for (int k = 0; k < extra; k++) {
        int v = (int)th_randint(g->nin, nv);
        bool dup = false;
        for (int j = 0; j < g->nout; j++) dup |= g->out[j] == v;
        if (!dup) g->out[g->nout++] = v;
    }
    bool any_float = false;
    for (int k = 0; k < g->nout; k++) {
        const rg_shape *s = &g->v[g->out[k]];
        any_float |= !s->mask;
        rg_shape w = *s;
        for (int i = 0; i < w.nd; i++) w.sh[i] = w.sh[i] < 0 ? 1 : w.sh[i];
        g->loss_w[k] = th_random(g->dt, w.nd, w.sh, -1, 1, TH_CONTIG, NULL);
        rg_fix_factor_tensor(g, g->loss_w[k]);
    }
    if (!any_float) g->grad = false;
}

/* The inputs' concrete shape for a batch size. */
static void rg_input_shape(const rg_graph *g, int i, int64_t batch, int64_t *sh) {
    for (int d = 0; d < g->v[i].nd; d++) sh[d] = g->v[i].sh[d] < 0 ? batch : g->v[i].sh[d];
}

#endif
