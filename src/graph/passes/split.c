/* Splitting a program over the ranks of an MPI job (ir.h has the rules).
 *
 * Every rank builds the same graph with the same code, so every rank runs
 * this pass on the same IR: the ranks of the steps, the crossings and
 * their tags come out the same everywhere, and each rank keeps its part.
 *
 * Why no deadlock: MPI's send and recv block (a send may wait for its recv
 * once the message is large), so each rank must meet its peers' messages
 * in an order they agree on. The crossings are ordered by (position of the
 * producer in the shared IR, tag), both sides place their step of a pair at
 * that position, and the scheduler keeps the relative order of comm steps
 * (plan.c). The earliest unfinished pair in that order then always
 * completes: everything before it on either side is a local step (whose
 * inputs come earlier in a topological order) or an earlier pair, finished
 * by assumption. In a two-stage pipeline that is: the activations go
 * forward (after their producer on rank 0, before any reader on rank 1),
 * the loss and the backward of stage 1 run, and the gradient of the
 * activations comes back (after its producer on rank 1), before the
 * backward of stage 0 that reads it. */
#include "pass_util.h"

#include <inttypes.h>
#include <stdlib.h>

/* Tags of a program's crossings: 0, 1, ... (send/recv take up to 2^20). */
#define MAX_CROSSINGS (1 << 20)

typedef struct crossing {
    int32_t v;    /* the value */
    int32_t at;   /* its producer's position in the shared IR */
    int a, b;     /* from rank a to rank b */
    int32_t here; /* this rank's new value: the recv's result (b), the send's token (a) */
} crossing;

typedef struct split_state {
    cn_ir *ir;
    int me, size;
    int32_t *srank; /* per step: its rank, -1 for every rank */
    int32_t *vrank; /* per value */
    crossing *x;
    int nx, xcap;
    int32_t token;  /* the constant a recv step takes as its input */
} split_state;

static const char *step_name(const ir_step *st) {
    return st->kind == IRS_FUSED ? "fused" : cn_ops[st->op]->name;
}

/* Step s's rank (*rank): its scope's, else its first ranked input's, else
 * -1. Returns 0, or < 0 for a rank outside the job. */
static int step_rank(split_state *ps, int s, int *rank) {
    const ir_step *st = &ps->ir->s[s];
    int r = st->has_scope ? cn_device_rank(st->scope) : -1;
    if (r >= ps->size)
        return cn_failc(CN_EINVAL,
                        "compile: step %%%d (%s) is placed on %s, but the job has %d process%s "
                        "(ranks 0 to %d): start it with mpirun -np %d (or more) and call "
                        "cn_dist_init before compiling",
                        st->out, step_name(st), cn_dev_name(st->scope), ps->size,
                        ps->size == 1 ? "" : "es", ps->size - 1, r + 1);
    for (int i = 0; r < 0 && i < st->nin; i++) r = ps->vrank[st->in[i]];
    *rank = r < 0 ? -1 : r;
    return 0;
}

static crossing *find(split_state *ps, int32_t v, int b) {
    for (int k = 0; k < ps->nx; k++)
        if (ps->x[k].v == v && ps->x[k].b == b) return &ps->x[k];
    return NULL;
}

/* A symbolic value of the given meta (a recv's result, a send's token). */
static int32_t new_value(cn_ir *ir, cn_dtype dt, int ndim, const int64_t *shape) {
    cn_tensor *t = cn_t_alloc();
    if (!t) return -1;
    t->dtype = (uint8_t)dt;
    t->ndim = (int8_t)ndim;
    if (ndim) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    cn_contiguous_strides(ndim, t->shape, t->strides);
    t->flags = CN_TF_SYMBOLIC;
    int32_t id = ir_add_value(ir, t, IRV_STEP, -1);
    cn_release(t);
    return id;
}

/* Record that v goes from rank a to rank b (once per value and reader). */
static int add_crossing(split_state *ps, int32_t v, int a, int b) {
    if (find(ps, v, b)) return 0;
    cn_ir *ir = ps->ir;
    const cn_tensor *t = ir->v[v].t;
    const ir_step *p = &ir->s[ir->v[v].producer];
    char buf[160];
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0)
            return cn_failc(CN_EINVAL,
                            "compile: %%%d (%s's result, %s) goes from rank %d to rank %d, but its "
                            "sizes are not known when compiling, and the receiving rank needs them: "
                            "give the placeholders fixed sizes",
                            v, step_name(p), cn_shape_str(t, buf, sizeof buf), a, b);
    if (ps->nx == MAX_CROSSINGS)
        return cn_failc(CN_EUNSUPPORTED, "compile: more than %d values cross between ranks",
                        MAX_CROSSINGS);
    if (ps->nx == ps->xcap) {
        int nc = ps->xcap ? 2 * ps->xcap : 16;
        crossing *nx = realloc(ps->x, sizeof *nx * (size_t)nc);
        if (!nx) return cn_failc(CN_ENOMEM, "compile: out of memory");
        ps->x = nx;
        ps->xcap = nc;
    }
    int32_t here = -1;
    if (b == ps->me) here = new_value(ir, (cn_dtype)t->dtype, t->ndim, t->shape);
    else if (a == ps->me) here = new_value(ir, CN_F32, 0, NULL);
    if ((a == ps->me || b == ps->me) && here < 0) return cn_failc(CN_ENOMEM, "compile: out of memory");
    ps->x[ps->nx++] = (crossing){v, ir->v[v].producer, a, b, here};
    return 0;
}

/* Do a and b view overlapping elements of one storage? */
static void span(const cn_tensor *t, int64_t *lo, int64_t *hi) {
    *lo = *hi = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        int64_t e = (t->shape[d] - 1) * t->strides[d];
        if (e < 0) *lo += e;
        else *hi += e;
    }
}

static bool shares_bytes(const cn_tensor *a, const cn_tensor *b) {
    if (!a->storage || a->storage != b->storage || !cn_numel(a) || !cn_numel(b)) return false;
    int64_t alo, ahi, blo, bhi;
    span(a, &alo, &ahi);
    span(b, &blo, &bhi);
    return alo <= bhi && blo <= ahi;
}

/* The gradient of param (output value v, computed on rank a) goes to
 * every rank whose steps read the parameter, so each copy of it is
 * updated with its whole gradient. A step that every rank may run reads
 * it on every rank. */
static int deliver_gradient(split_state *ps, int32_t v, int a, const cn_tensor *param) {
    cn_ir *ir = ps->ir;
    uint8_t *reads = calloc((size_t)ps->size, 1);
    if (!reads) return cn_failc(CN_ENOMEM, "compile: out of memory");
    for (int s = 0; s < ir->ns; s++) {
        const ir_step *st = &ir->s[s];
        if (st->kind == IRS_DEAD) continue;
        for (int i = 0; i < st->nin; i++) {
            const ir_value *c = &ir->v[st->in[i]];
            if (c->kind != IRV_CONST || !shares_bytes(c->t, param)) continue;
            if (ps->srank[s] >= 0) reads[ps->srank[s]] = 1;
            else memset(reads, 1, (size_t)ps->size);
        }
    }
    int rc = 0;
    for (int b = 0; b < ps->size && rc == 0; b++)
        if (reads[b] && b != a) rc = add_crossing(ps, v, a, b);
    free(reads);
    return rc;
}

/* Ranks of every step and value, and the crossings, in the shared IR's
 * order. Returns the number of steps with a rank, or < 0. */
static int assign(split_state *ps, cn_tensor *const *out_param) {
    cn_ir *ir = ps->ir;
    int nranked = 0;
    for (int v = 0; v < ir->nv; v++) ps->vrank[v] = -1;
    for (int s = 0; s < ir->ns; s++) {
        if (ir->s[s].kind == IRS_DEAD) continue;
        int r = -1;
        if (step_rank(ps, s, &r) < 0) return -1;
        ps->srank[s] = ps->vrank[ir->s[s].out] = r;
        nranked += r >= 0;
    }
    if (!nranked) return 0;
    for (int s = 0; s < ir->ns; s++) {
        const ir_step *st = &ir->s[s];
        if (st->kind == IRS_DEAD || ps->srank[s] < 0) continue;
        for (int i = 0; i < st->nin; i++) {
            int a = ps->vrank[st->in[i]];
            if (a >= 0 && a != ps->srank[s] && add_crossing(ps, st->in[i], a, ps->srank[s]) < 0)
                return -1;
        }
    }
    for (int o = 0; out_param && o < ir->noutputs; o++) {
        int32_t v = ir->outputs[o];
        if (out_param[o] && ps->vrank[v] >= 0 &&
            deliver_gradient(ps, v, ps->vrank[v], out_param[o]) < 0)
            return -1;
    }
    return nranked;
}

/* A send (to peer b) or recv (from peer a) step of crossing k. */
static int comm_step(const split_state *ps, int k, ir_step *st) {
    const crossing *x = &ps->x[k];
    const cn_tensor *t = ps->ir->v[x->v].t;
    memset(st, 0, sizeof *st);
    st->kind = IRS_OP;
    st->nin = 1;
    st->in = malloc(sizeof *st->in);
    if (!st->in) return cn_failc(CN_ENOMEM, "compile: out of memory");
    st->out = x->here;
    st->attrs.i[1] = k; /* the tag */
    if (x->a == ps->me) {
        st->op = CN_OP_send;
        st->in[0] = x->v;
        st->attrs.i[0] = x->b;
    } else {
        st->op = CN_OP_recv;
        st->in[0] = ps->token;
        st->attrs.i[0] = x->a;
        st->attrs.i[2] = t->dtype;
        st->attrs.nlist = t->ndim;
        memcpy(st->attrs.list, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    }
    /* The messages' kernels are the CPU's; placement moves the values. */
    st->has_scope = 1;
    st->scope = CN_CPU;
    return 0;
}

static void free_step(ir_step *st) {
    free(st->in);
    if (st->fused) {
        free(st->fused->instr);
        free(st->fused);
    }
}

/* This rank's steps in the shared order, each crossing's step right after
 * its producer's place. Returns the number of comm steps, or < 0. */
static int rebuild(split_state *ps) {
    cn_ir *ir = ps->ir;
    int cap = ir->ns + ps->nx + 1, w = 0, ncomm = 0, rc = 0;
    ir_step *ns = malloc(sizeof *ns * (size_t)cap);
    if (!ns) return cn_failc(CN_ENOMEM, "compile: out of memory");
    for (int s = 0, k = 0; s < ir->ns; s++) {
        ir_step *st = &ir->s[s];
        bool mine = st->kind != IRS_DEAD && (ps->srank[s] < 0 || ps->srank[s] == ps->me);
        if (!mine) {
            if (st->kind != IRS_DEAD) ir->v[st->out].producer = -1;
            free_step(st);
        } else {
            for (int i = 0; i < st->nin; i++) {
                int a = ps->vrank[st->in[i]];
                if (a >= 0 && a != ps->me) st->in[i] = find(ps, st->in[i], ps->me)->here;
            }
            if (st->has_scope) st->scope = cn_device_local(st->scope);
            ns[w++] = *st;
        }
        /* Crossings are in tag order; emit those of producer s (by tag). */
        for (k = 0; k < ps->nx; k++) {
            const crossing *x = &ps->x[k];
            if (x->at != s || (x->a != ps->me && x->b != ps->me)) continue;
            if (rc == 0 && (rc = comm_step(ps, k, &ns[w])) == 0) w++, ncomm++;
        }
    }
    free(ir->s);
    ir->s = ns;
    ir->ns = w;
    ir->scap = cap;
    for (int s = 0; s < w; s++) ir->v[ns[s].out].producer = s;
    return rc < 0 ? rc : ncomm;
}

/* Outputs of other ranks: a parameter's gradient sent here is the recv's
 * result; the rest are remote (cn_run hands back NULL), even when this rank
 * receives the value for its own steps: an output is where it is computed. */
static int route_outputs(split_state *ps, cn_tensor *const *out_param) {
    cn_ir *ir = ps->ir;
    size_t n = (size_t)(ir->noutputs ? ir->noutputs : 1);
    ir->out_rank = malloc(sizeof *ir->out_rank * n);
    ir->out_remote = calloc(n, 1);
    if (!ir->out_rank || !ir->out_remote) return cn_failc(CN_ENOMEM, "compile: out of memory");
    for (int o = 0; o < ir->noutputs; o++) {
        int32_t v = ir->outputs[o];
        int a = ps->vrank[v];
        ir->out_rank[o] = a;
        if (a < 0 || a == ps->me) continue;
        const crossing *x = out_param && out_param[o] ? find(ps, v, ps->me) : NULL;
        if (x) {
            ir->outputs[o] = x->here;
        } else {
            ir->outputs[o] = ps->token;
            ir->out_remote[o] = 1;
        }
    }
    return 0;
}

int cn_pass_split(cn_ir *ir, int me, int size, cn_tensor *const *out_param) {
    split_state ps = {ir, me, size, malloc(sizeof(int32_t) * (size_t)(ir->ns ? ir->ns : 1)),
                      malloc(sizeof(int32_t) * (size_t)(ir->nv ? ir->nv : 1)), NULL, 0, 0, -1};
    int rc = 0;
    if (!ps.srank || !ps.vrank) {
        rc = cn_failc(CN_ENOMEM, "compile: out of memory");
        goto out;
    }
    rc = assign(&ps, out_param);
    if (rc <= 0) goto out;
    cn_tensor *tok = cn_t_scalar(CN_F32, 0.0);
    ps.token = tok ? ir_add_value(ir, tok, IRV_CONST, -1) : -1;
    cn_release(tok);
    if (ps.token < 0) {
        rc = cn_failc(CN_ENOMEM, "compile: out of memory");
        goto out;
    }
    /* (route first: rebuild frees the steps of other ranks.) */
    if ((rc = route_outputs(&ps, out_param)) < 0) goto out;
    rc = rebuild(&ps);
    ir->split = true;
    ir->rank = me;
out:
    free(ps.srank);
    free(ps.vrank);
    free(ps.x);
    return rc;
}
