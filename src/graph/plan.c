/* Memory planning and scheduling (plan.h). */
#include "plan.h"

#include <stdlib.h>

#define PLAN_ALIGN 64
/* A group of steps runs concurrently only if every step in it is small:
 * a big step runs alone and uses the pool inside its kernel. */
#define SMALL_OUTPUT 32768

void cn_plan_free(cn_plan *pl) {
    if (!pl) return;
    for (int i = 0; i < pl->nv; i++) {
        if (pl->buf) cn_release(pl->buf[i]);
        if (pl->vbuf) cn_release(pl->vbuf[i]);
    }
    for (int k = 0; k < pl->narenas; k++)
        if (pl->arena[k]) cn_storage_release(pl->arena[k]);
    free(pl->meta);
    free(pl->attrs);
    free(pl->buf);
    free(pl->vbuf);
    free(pl->order);
    free(pl->group_start);
    free(pl->group_par);
    free(pl->dead_start);
    free(pl->dead_list);
    free(pl->task_rc);
    free(pl->task_err);
    free(pl);
}

/* A data-less tensor with m's shape, for running inference. */
static cn_tensor *meta_tensor(const cn_meta *m) {
    cn_tensor *t = cn_t_alloc();
    if (!t) return NULL;
    t->dtype = (uint8_t)m->dtype;
    t->ndim = (int8_t)m->ndim;
    memcpy(t->shape, m->shape, sizeof(int64_t) * (size_t)m->ndim);
    cn_contiguous_strides(m->ndim, t->shape, t->strides);
    t->flags = CN_TF_SYMBOLIC;
    return t;
}

static int infer_step(const cn_ir *ir, cn_plan *pl, int s, cn_tensor **mt) {
    const ir_step *st = &ir->s[s];
    cn_tensor *ins_buf[16], **ins = ins_buf;
    if (st->nin > 16 && !(ins = malloc(sizeof *ins * (size_t)st->nin)))
        return cn_failc(CN_ENOMEM, "run: out of memory");
    for (int i = 0; i < st->nin; i++) ins[i] = mt[st->in[i]];
    cn_meta *m = &pl->meta[st->out];
    memset(m, 0, sizeof *m);
    pl->attrs[s] = st->attrs;
    int rc = 0;
    if (st->kind == IRS_OP) {
        const cn_op_def *d = cn_ops[st->op];
        rc = d->infer(d, ins, st->nin, &pl->attrs[s], m);
    } else { /* fused: the broadcast of the inputs (and of the head's result) */
        cn_tensor *bins_buf[16], **bins = bins_buf;
        int nb = 0, from = 0;
        if (st->nin + 1 > 16 && !(bins = malloc(sizeof *bins * (size_t)(st->nin + 1)))) {
            rc = cn_failc(CN_ENOMEM, "run: out of memory");
            goto out;
        }
        cn_tensor *head = NULL;
        if (st->op != CN_OP_COUNT) {
            const cn_op_def *d = cn_ops[st->op];
            cn_meta hm;
            memset(&hm, 0, sizeof hm);
            rc = d->infer(d, ins, st->head_nin, &pl->attrs[s], &hm);
            if (rc == 0 && !(head = meta_tensor(&hm))) rc = cn_failc(CN_ENOMEM, "run: out of memory");
            if (rc == 0) bins[nb++] = head;
            from = st->head_nin;
        }
        for (int i = from; rc == 0 && i < st->nin; i++) bins[nb++] = ins[i];
        if (rc == 0) rc = cn_broadcast_shapes("fused", bins, nb, m);
        m->dtype = (cn_dtype)ir->v[st->out].t->dtype;
        cn_release(head);
        if (bins != bins_buf) free(bins);
    }
out:
    if (ins != ins_buf) free(ins);
    if (rc == 0 && !(mt[st->out] = meta_tensor(m))) rc = cn_failc(CN_ENOMEM, "run: out of memory");
    return rc < 0 ? rc : 0;
}

/* ---- the arena: best-fit over a free list sorted by offset ---- */

typedef struct block {
    size_t off, size;
} block;

typedef struct arena_sim {
    block *free;
    int n, cap;
    size_t top; /* bytes in use at the end */
} arena_sim;

static int sim_free(arena_sim *a, size_t off, size_t size) {
    if (!size) return 0;
    if (off + size == a->top) { /* give the end back, with a free block before it */
        a->top = off;
        if (a->n && a->free[a->n - 1].off + a->free[a->n - 1].size == a->top) {
            a->top = a->free[a->n - 1].off;
            a->n--;
        }
        return 0;
    }
    if (a->n == a->cap) {
        int nc = a->cap ? a->cap * 2 : 32;
        block *nb = realloc(a->free, sizeof *nb * (size_t)nc);
        if (!nb) return -1;
        a->free = nb;
        a->cap = nc;
    }
    int i = a->n;
    while (i > 0 && a->free[i - 1].off > off) i--;
    memmove(a->free + i + 1, a->free + i, sizeof *a->free * (size_t)(a->n - i));
    a->free[i] = (block){off, size};
    a->n++;
    /* Coalesce with the neighbours. */
    if (i + 1 < a->n && a->free[i].off + a->free[i].size == a->free[i + 1].off) {
        a->free[i].size += a->free[i + 1].size;
        memmove(a->free + i + 1, a->free + i + 2, sizeof *a->free * (size_t)(a->n - i - 2));
        a->n--;
    }
    if (i > 0 && a->free[i - 1].off + a->free[i - 1].size == a->free[i].off) {
        a->free[i - 1].size += a->free[i].size;
        memmove(a->free + i, a->free + i + 1, sizeof *a->free * (size_t)(a->n - i - 1));
        a->n--;
    }
    return 0;
}

static size_t sim_alloc(arena_sim *a, size_t size, size_t *peak) {
    if (!size) return 0;
    int best = -1;
    for (int i = 0; i < a->n; i++)
        if (a->free[i].size >= size && (best < 0 || a->free[i].size < a->free[best].size)) best = i;
    size_t off;
    if (best >= 0) {
        off = a->free[best].off;
        a->free[best].off += size;
        a->free[best].size -= size;
        if (!a->free[best].size) {
            memmove(a->free + best, a->free + best + 1, sizeof *a->free * (size_t)(a->n - best - 1));
            a->n--;
        }
    } else {
        off = a->top;
        a->top += size;
    }
    if (a->top > *peak) *peak = a->top;
    return off;
}

static size_t value_bytes(const cn_meta *m) {
    size_t n = (size_t)cn_shape_numel(m->ndim, m->shape) * cn_dsize(m->dtype);
    return (n + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
}

static bool is_view_step(const ir_step *st);
static size_t value_bytes(const cn_meta *m);

/* Graphs larger than this keep their build order (the greedy order below
 * is quadratic in the number of steps). */
#define GREEDY_MAX_STEPS 4096

/* A sequential order that keeps memory low: among the steps whose inputs
 * are ready, run the one that frees the most bytes net of what it
 * allocates (ties: build order). The backward pass of a network is built
 * layer by layer with each layer's weight gradient last; run as built, the
 * activations a weight gradient reads stay alive through the next layer's
 * backward. Messages between ranks (send, recv) keep their order in the
 * IR, which is the order every rank agrees on (passes/split.c): each waits
 * for the one before it as for an input. Writes rank[s] = position of
 * step s. */
static bool is_comm_step(const ir_step *st) {
    return st->kind == IRS_OP && (cn_ops[st->op]->flags & CN_OPF_COMM);
}

static int greedy_order(const cn_ir *ir, const cn_plan *pl, const int32_t *root, int32_t *rank) {
    int ns = ir->ns, nv = ir->nv;
    int32_t *left = calloc((size_t)(nv ? nv : 1), sizeof *left);   /* readers of a root not yet run */
    int32_t *waiting = calloc((size_t)(ns ? ns : 1), sizeof *waiting); /* inputs not yet computed */
    uint8_t *done = calloc((size_t)(ns ? ns : 1), 1);
    int64_t *bytes = calloc((size_t)(nv ? nv : 1), sizeof *bytes);
    if (!left || !waiting || !done || !bytes) {
        free(left), free(waiting), free(done), free(bytes);
        return -1;
    }
    for (int s = 0; s < ns; s++) {
        const ir_step *st = &ir->s[s];
        if (root[st->out] == st->out) bytes[st->out] = (int64_t)value_bytes(&pl->meta[st->out]);
        for (int i = 0; i < st->nin; i++) {
            if (root[st->in[i]] >= 0) left[root[st->in[i]]]++;
            if (ir->v[st->in[i]].producer >= 0) waiting[s]++;
        }
    }
    for (int o = 0; o < ir->noutputs; o++)
        if (root[ir->outputs[o]] >= 0) left[root[ir->outputs[o]]] += 1 << 20; /* never freed */
    int32_t next_comm = -1; /* the first comm step not yet run */
    for (int s = 0, prev = -1; s < ns; s++)
        if (is_comm_step(&ir->s[s])) {
            if (prev >= 0) waiting[s]++;
            else next_comm = s;
            prev = s;
        }
    for (int k = 0; k < ns; k++) {
        int best = -1;
        int64_t best_gain = 0;
        for (int s = 0; s < ns; s++) {
            if (done[s] || waiting[s]) continue;
            const ir_step *st = &ir->s[s];
            int64_t gain = -bytes[st->out];
            for (int i = 0; i < st->nin; i++) {
                int32_t r = root[st->in[i]];
                if (r < 0) continue;
                int n = 0;
                for (int j = 0; j < st->nin; j++) n += root[st->in[j]] == r;
                bool first = true; /* count each root once */
                for (int j = 0; j < i; j++) first &= root[st->in[j]] != r;
                if (first && left[r] == n) gain += bytes[r];
            }
            if (best < 0 || gain > best_gain) best = s, best_gain = gain;
        }
        const ir_step *st = &ir->s[best];
        done[best] = 1;
        rank[best] = k;
        if (best == next_comm) { /* the next one may go */
            next_comm = -1;
            for (int s = best + 1; s < ns && next_comm < 0; s++)
                if (is_comm_step(&ir->s[s])) next_comm = s;
            if (next_comm >= 0) waiting[next_comm]--;
        }
        for (int i = 0; i < st->nin; i++)
            if (root[st->in[i]] >= 0) left[root[st->in[i]]]--;
        /* Its readers wait for one input fewer (per use). */
        for (int s = 0; s < ns; s++)
            if (!done[s])
                for (int i = 0; i < ir->s[s].nin; i++)
                    if (ir->s[s].in[i] == st->out) waiting[s]--;
    }
    free(left), free(waiting), free(done), free(bytes);
    return 0;
}

/* Can this step share a parallel group? Small outputs only: big steps
 * split themselves over the pool. Matmul and convolution cost more than
 * their output shows; random ops keep their order (one generator). */
static bool small_step(const cn_ir *ir, const cn_plan *pl, int s) {
    const ir_step *st = &ir->s[s];
    const cn_meta *m = &pl->meta[st->out];
    /* Device steps and transfers keep the order of their device's queue. */
    if (st->dev.kind != CN_DEVICE_CPU || (st->kind == IRS_OP && st->op == CN_OP_to)) return false;
    if (st->kind == IRS_OP && (cn_ops[st->op]->flags & (CN_OPF_RANDOM | CN_OPF_COMM))) return false;
    if (st->op == CN_OP_matmul || st->op == CN_OP_conv2d || st->op == CN_OP_conv_transpose2d ||
        st->op == CN_OP_conv2d_weight_grad)
        return false;
    return cn_shape_numel(m->ndim, m->shape) <= SMALL_OUTPUT;
}

/* How far past its last member a parallel group looks for independent
 * small steps in the memory-first order: far enough to find a layer's
 * parallel branches, near enough not to compute small values long before
 * they are needed. */
#define GROUP_LOOKAHEAD 16

/* Steps in groups, in execution order: the memory-first order (build order
 * for very large graphs), and with parallel, each small step gathers the
 * independent small steps that follow it closely into one group that runs
 * as pool tasks. (ASAP levels found more parallelism but kept activations
 * alive longer: 54% of the unplanned sum on the cnn step against 45%.) */
static int schedule(const cn_ir *ir, cn_plan *pl, bool parallel, const int32_t *root,
                    int32_t *time) {
    int ns = ir->ns;
    int32_t *level = calloc((size_t)(ns ? ns : 1), sizeof *level);
    int32_t *seq = malloc(sizeof *seq * (size_t)(ns ? ns : 1));
    if (!level || !seq) {
        free(level), free(seq);
        return -1;
    }
    if (ns <= GREEDY_MAX_STEPS) {
        if (greedy_order(ir, pl, root, level) < 0) {
            free(level), free(seq);
            return -1;
        }
        for (int s = 0; s < ns; s++) seq[level[s]] = s;
    } else {
        for (int s = 0; s < ns; s++) seq[s] = s;
    }
    int nlev = 0;
    if (!parallel) {
        for (int k = 0; k < ns; k++) level[seq[k]] = k;
        nlev = ns;
    } else {
        for (int s = 0; s < ns; s++) level[s] = -1;
        for (int k = 0; k < ns; k++) {
            int s = seq[k];
            if (level[s] >= 0) continue;
            int g = nlev++;
            level[s] = g;
            if (!small_step(ir, pl, s)) continue;
            for (int k2 = k + 1, last = k; k2 < ns && k2 <= last + GROUP_LOOKAHEAD; k2++) {
                int t = seq[k2];
                if (level[t] >= 0 || !small_step(ir, pl, t)) continue;
                bool ready = true; /* every input made by an earlier group */
                for (int i = 0; i < ir->s[t].nin && ready; i++) {
                    int32_t p = ir->v[ir->s[t].in[i]].producer;
                    ready = p < 0 || (level[p] >= 0 && level[p] < g);
                }
                if (ready) level[t] = g, last = k2;
            }
        }
    }
    free(seq);
    /* Counting sort by group keeps the sequence within a group. */
    pl->group_start = calloc((size_t)nlev + 1, sizeof *pl->group_start);
    pl->group_par = calloc((size_t)(nlev ? nlev : 1), 1);
    if (!pl->group_start || !pl->group_par) {
        free(level);
        return -1;
    }
    for (int s = 0; s < ns; s++) pl->group_start[level[s] + 1]++;
    for (int l = 0; l < nlev; l++) pl->group_start[l + 1] += pl->group_start[l];
    int32_t *fill = malloc(sizeof *fill * (size_t)(nlev ? nlev : 1));
    if (!fill) {
        free(level);
        return -1;
    }
    memcpy(fill, pl->group_start, sizeof *fill * (size_t)nlev);
    for (int s = 0; s < ns; s++) pl->order[fill[level[s]]++] = s;
    for (int l = 0; l < nlev; l++) pl->group_par[l] = pl->group_start[l + 1] - pl->group_start[l] >= 2;
    for (int s = 0; s < ns; s++) time[s] = level[s];
    pl->ngroups = nlev;
    int widest = 1;
    for (int l = 0; l < nlev; l++)
        if (pl->group_par[l] && pl->group_start[l + 1] - pl->group_start[l] > widest)
            widest = pl->group_start[l + 1] - pl->group_start[l];
    pl->task_rc = malloc(sizeof *pl->task_rc * (size_t)widest);
    pl->task_err = malloc(sizeof *pl->task_err * (size_t)widest);
    if (!pl->task_rc || !pl->task_err) {
        free(fill);
        free(level);
        return -1;
    }
    free(fill);
    free(level);
    return 0;
}

static bool is_view_step(const ir_step *st) {
    return st->kind == IRS_OP && (cn_ops[st->op]->flags & CN_OPF_VIEW);
}

/* Verify the plan: no two values with overlapping lifetimes share bytes. */
static int check_overlaps(int nv, const int32_t *root, const int32_t *start, const int32_t *end,
                          const int64_t *off, const size_t *size, const int8_t *slot) {
    for (int a = 0; a < nv; a++) {
        if (root[a] != a || off[a] < 0 || !size[a]) continue;
        for (int b = a + 1; b < nv; b++) {
            if (root[b] != b || off[b] < 0 || !size[b] || slot[a] != slot[b]) continue;
            bool time_overlap = start[a] < end[b] && start[b] < end[a];
            /* In place: b starts exactly when a ends, on a's bytes. */
            bool bytes = (size_t)off[a] < (size_t)off[b] + size[b] &&
                         (size_t)off[b] < (size_t)off[a] + size[a];
            if (time_overlap && bytes)
                return cn_failc(CN_EINVAL, "plan: values %%%d and %%%d are live together and share bytes",
                                a, b);
        }
    }
    return 0;
}

cn_plan *cn_plan_build(const cn_ir *ir, cn_tensor *const *vals, bool memory, bool parallel,
                       bool check) {
    int nv = ir->nv, ns = ir->ns;
    cn_plan *pl = calloc(1, sizeof *pl);
    cn_tensor **mt = calloc((size_t)(nv ? nv : 1), sizeof *mt);
    int32_t *root = NULL, *start = NULL, *end = NULL, *time = NULL, *inplace = NULL;
    int64_t *off = NULL;
    size_t *size = NULL;
    int8_t *slot = NULL; /* per value: its arena */
    arena_sim sim[CN_PLAN_MAX_DEVICES];
    memset(sim, 0, sizeof sim);
    if (!pl || !mt) goto oom;
    pl->nv = nv;
    pl->ns = ns;
    pl->meta = calloc((size_t)(nv ? nv : 1), sizeof *pl->meta);
    pl->attrs = calloc((size_t)(ns ? ns : 1), sizeof *pl->attrs);
    pl->buf = calloc((size_t)(nv ? nv : 1), sizeof *pl->buf);
    pl->order = malloc(sizeof *pl->order * (size_t)(ns ? ns : 1));
    if (!pl->meta || !pl->attrs || !pl->buf || !pl->order) goto oom;
    for (int v = 0; v < nv; v++)
        if (ir->v[v].kind != IRV_STEP) mt[v] = cn_retain(vals[v]);
    for (int s = 0; s < ns; s++)
        if (infer_step(ir, pl, s, mt) < 0) goto fail;

    /* Roots: the value owning the bytes a value is a view of (-1: none,
     * an input's or a constant's). */
    root = malloc(sizeof *root * (size_t)(nv ? nv : 1));
    if (!root) goto oom;
    for (int v = 0; v < nv; v++) root[v] = -1;
    for (int s = 0; s < ns; s++) {
        const ir_step *st = &ir->s[s];
        root[st->out] = is_view_step(st) ? root[st->in[0]] : st->out;
    }
    time = malloc(sizeof *time * (size_t)(ns ? ns : 1));
    if (!time || schedule(ir, pl, parallel, root, time) < 0) goto oom;
    /* View structs made once: a run's views then allocate nothing (a view
     * made on a worker thread would otherwise come from that thread's free
     * list, which releases on the main thread never refill). */
    pl->vbuf = calloc((size_t)(nv ? nv : 1), sizeof *pl->vbuf);
    if (!pl->vbuf) goto oom;
    for (int s = 0; s < ns; s++)
        if (is_view_step(&ir->s[s]) && !(pl->vbuf[ir->s[s].out] = cn_t_alloc())) goto oom;
    if (!memory) goto done;

    start = malloc(sizeof *start * (size_t)nv);
    end = malloc(sizeof *end * (size_t)nv);
    inplace = malloc(sizeof *inplace * (size_t)nv);
    off = malloc(sizeof *off * (size_t)nv);
    size = calloc((size_t)nv, sizeof *size);
    slot = calloc((size_t)nv, sizeof *slot);
    if (!start || !end || !inplace || !off || !size || !slot) goto oom;
    /* The arenas: one per device a step result lives on. */
    for (int s = 0; s < ns; s++) {
        const ir_step *st = &ir->s[s];
        if (root[st->out] != st->out) continue;
        int k = 0;
        while (k < pl->narenas && !cn_device_equal(pl->arena_dev[k], st->dev)) k++;
        if (k == pl->narenas) {
            if (k == CN_PLAN_MAX_DEVICES) {
                cn_fail("run: a program's steps run on more than %d devices", CN_PLAN_MAX_DEVICES);
                goto fail;
            }
            pl->arena_dev[pl->narenas++] = st->dev;
        }
        slot[st->out] = (int8_t)k;
    }
    for (int v = 0; v < nv; v++) inplace[v] = -1, off[v] = -1;
    for (int s = 0; s < ns; s++) {
        const ir_step *st = &ir->s[s];
        if (root[st->out] == st->out) {
            start[st->out] = end[st->out] = time[s];
            size[st->out] = value_bytes(&pl->meta[st->out]);
            pl->naive_bytes += size[st->out];
        }
    }
    for (int s = 0; s < ns; s++)
        for (int i = 0; i < ir->s[s].nin; i++) {
            int32_t r = root[ir->s[s].in[i]];
            if (r >= 0 && time[s] > end[r]) end[r] = time[s];
        }
    /* Outputs (and what they view) leave the program: never planned. */
    for (int o = 0; o < ir->noutputs; o++) {
        int32_t r = root[ir->outputs[o]];
        if (r >= 0) size[r] = 0, root[r] = -2;
    }
    /* In place: a fused step over an input it alone reads last, same bytes. */
    int32_t *readers = calloc((size_t)nv, sizeof *readers);
    if (!readers) goto oom;
    for (int s = 0; s < ns; s++)
        for (int i = 0; i < ir->s[s].nin; i++) {
            int32_t r = root[ir->s[s].in[i]];
            if (r >= 0 && time[s] == end[r]) readers[r]++;
        }
    for (int s = 0; s < ns; s++) {
        const ir_step *st = &ir->s[s];
        int32_t o = st->out;
        if (st->kind != IRS_FUSED || st->op != CN_OP_COUNT || root[o] != o) continue;
        for (int i = 0; i < st->nin; i++) {
            int32_t x = st->in[i];
            /* (One element: nothing to gain.) */
            if (root[x] != x || end[x] != time[s] || size[x] != size[o] || slot[x] != slot[o] ||
                cn_shape_numel(pl->meta[o].ndim, pl->meta[o].shape) <= 1)
                continue;
            int n = 0;
            for (int k = 0; k < st->nin; k++) n += st->in[k] == x;
            if (readers[x] != n) continue; /* another step reads it at this time */
            const cn_meta *mx = &pl->meta[x], *mo = &pl->meta[o];
            if (mx->dtype != mo->dtype || mx->ndim != mo->ndim ||
                memcmp(mx->shape, mo->shape, sizeof(int64_t) * (size_t)mo->ndim))
                continue;
            inplace[o] = x;
            readers[x] = -1; /* taken */
            pl->ninplace++;
            break;
        }
    }
    free(readers);

    /* Simulate in time order: allocate what starts, then free what ends. */
    {
        int32_t ntime = 0;
        for (int s = 0; s < ns; s++)
            if (time[s] + 1 > ntime) ntime = time[s] + 1;
        /* Values by start and by end time (counting sort). */
        int32_t *sb = calloc((size_t)ntime + 1, sizeof *sb), *eb = calloc((size_t)ntime + 1, sizeof *eb);
        int32_t *sl = malloc(sizeof *sl * (size_t)nv), *el = malloc(sizeof *el * (size_t)nv);
        uint8_t *gone = calloc((size_t)nv, 1);
        pl->dead_start = calloc((size_t)ntime + 1, sizeof *pl->dead_start);
        pl->dead_list = malloc(sizeof *pl->dead_list * (size_t)nv);
        if (!sb || !eb || !sl || !el || !gone || !pl->dead_start || !pl->dead_list) {
            free(sb), free(eb), free(sl), free(el), free(gone);
            goto oom;
        }
        for (int v = 0; v < nv; v++)
            if (root[v] == v) sb[start[v] + 1]++, eb[end[v] + 1]++;
        for (int t = 0; t < ntime; t++) sb[t + 1] += sb[t], eb[t + 1] += eb[t];
        for (int v = 0; v < nv; v++)
            if (root[v] == v) sl[sb[start[v]]++] = v, el[eb[end[v]]++] = v;
        /* sb[t] is now the end of time t's run: rebuild the starts. */
        for (int t = ntime; t > 0; t--) sb[t] = sb[t - 1], eb[t] = eb[t - 1];
        sb[0] = eb[0] = 0;
        size_t peak[CN_PLAN_MAX_DEVICES] = {0};
        int nd = 0;
        for (int t = 0; t < ntime; t++) {
            for (int k = sb[t]; k < sb[t + 1]; k++) {
                int32_t v = sl[k];
                if (inplace[v] >= 0) {
                    off[v] = off[inplace[v]];
                    gone[inplace[v]] = 1; /* its bytes passed to v */
                } else {
                    off[v] = (int64_t)sim_alloc(&sim[slot[v]], size[v], &peak[slot[v]]);
                }
            }
            pl->dead_start[t] = nd;
            for (int k = eb[t]; k < eb[t + 1]; k++) {
                int32_t v = el[k];
                if (gone[v]) continue;
                if (sim_free(&sim[slot[v]], (size_t)off[v], size[v]) < 0) {
                    free(sb), free(eb), free(sl), free(el), free(gone);
                    goto oom;
                }
                pl->dead_list[nd++] = v;
            }
        }
        pl->dead_start[ntime] = nd;
        for (int k = 0; k < pl->narenas; k++) {
            pl->arena_size[k] = peak[k];
            pl->arena_bytes += peak[k];
        }
        free(sb), free(eb), free(sl), free(el), free(gone);
    }
    if (check) {
        /* In place pairs touch at one time; shorten the reader's interval
         * by one for the check so they do not count as overlapping. */
        for (int v = 0; v < nv; v++)
            if (root[v] == v) end[v] = end[v] + 1 > start[v] ? end[v] + 1 : end[v];
        for (int v = 0; v < nv; v++)
            if (inplace[v] >= 0) end[inplace[v]]--;
        if (check_overlaps(nv, root, start, end, off, size, slot) < 0) goto fail;
    }
    for (int k = 0; k < pl->narenas; k++)
        if (pl->arena_size[k] && !(pl->arena[k] = cn_storage_new_on(pl->arena_dev[k], pl->arena_size[k])))
            goto fail; /* (the allocator's message names the device and the size) */
    for (int v = 0; v < nv; v++) {
        if (root[v] != v || off[v] < 0) continue;
        const cn_meta *m = &pl->meta[v];
        cn_tensor *t = cn_t_alloc();
        if (!t) goto oom;
        t->dtype = (uint8_t)m->dtype;
        t->ndim = (int8_t)m->ndim;
        memcpy(t->shape, m->shape, sizeof(int64_t) * (size_t)m->ndim);
        cn_contiguous_strides(m->ndim, t->shape, t->strides);
        cn_storage *arena = pl->arena[slot[v]];
        if (arena) {
            t->storage = arena;
            arena->refcount++;
        } else { /* every planned value of this device is empty */
            t->storage = cn_storage_new_on(pl->arena_dev[slot[v]], 0);
            if (!t->storage) {
                cn_release(t);
                goto oom;
            }
        }
        t->offset = off[v] / (int64_t)cn_dsize(m->dtype);
        pl->buf[v] = t;
    }
done:
    for (int v = 0; v < nv; v++) cn_release(mt[v]);
    free(mt), free(root), free(start), free(end), free(time), free(inplace), free(off), free(size);
    free(slot);
    for (int k = 0; k < CN_PLAN_MAX_DEVICES; k++) free(sim[k].free);
    return pl;
oom:
    cn_fail("run: out of memory planning the program");
fail:
    if (mt)
        for (int v = 0; v < nv; v++) cn_release(mt[v]);
    free(mt), free(root), free(start), free(end), free(time), free(inplace), free(off), free(size);
    free(slot);
    for (int k = 0; k < CN_PLAN_MAX_DEVICES; k++) free(sim[k].free);
    cn_plan_free(pl);
    return NULL;
}
