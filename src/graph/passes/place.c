/* Placement: which device each step runs on, and the transfer steps
 * between devices (ir.h has the rules).
 *
 * Devices of the inputs are known only when they are fed, so placement runs
 * when the program is built (inputs assumed on the program's device) and
 * again from cn_run whenever the devices of the fed inputs or of the
 * constants differ from those it placed for (program.c). Each value has a
 * home (the device its step was placed on) and a place (where its bytes
 * are: the CPU for a step that fell back). A step reads each input on the
 * device it runs on: an input elsewhere is read through a `to` step, one per
 * (value, device), inserted before its first reader. Rank-0 values are no
 * exception (a literal on the CPU read by a step on a device is a transfer
 * step too), so every crossing is a step the dumps show and the stats
 * count. */
#include "pass_util.h"

#include <stdio.h>
#include <stdlib.h>

static uint8_t test_missing[CN_DEVICE_KIND_COUNT][CN_OP_COUNT];

void cn_place_test_missing_kernel(cn_device_kind kind, cn_op_id op, bool missing) {
    if ((unsigned)kind < CN_DEVICE_KIND_COUNT && (unsigned)op < CN_OP_COUNT)
        test_missing[kind][op] = missing;
}

static bool dev_eq(cn_device a, cn_device b) { return a.kind == b.kind && a.index == b.index; }

/* A product on autocast's native path (src/ops/dispatch.c): half inputs
 * to an f32 result, which only the CPU's kernels take, alone or as the
 * head of a fused step. A graph traced on the CPU and placed on a device
 * later may hold such steps. */
static bool native_half_step(const cn_ir *ir, const ir_step *st) {
    int n = st->kind == IRS_OP ? st->nin : st->kind == IRS_FUSED ? st->head_nin : 0;
    if (n <= 0 || st->op >= CN_OP_COUNT || !(cn_ops[st->op]->flags & CN_OPF_AUTOCAST) ||
        ir->v[st->out].t->dtype != CN_F32)
        return false;
    for (int i = 0; i < n; i++)
        if (cn_is_half((cn_dtype)ir->v[st->in[i]].t->dtype)) return true;
    return false;
}

/* Can step st run on dev (a device of this machine)? */
static bool has_kernel(const cn_ir *ir, const cn_backend *be, cn_device dev, const ir_step *st) {
    if (dev.kind != CN_DEVICE_CPU && native_half_step(ir, st)) return false;
    /* A custom op without a kernel of its own for the device runs on the CPU. */
    if (st->kind == IRS_OP && cn_op_is_custom(st->op))
        return dev.kind == CN_DEVICE_CPU || cn_custom_has_kernel((cn_op_id)st->op, (cn_device_kind)dev.kind);
    if (st->kind == IRS_FUSED) {
        if (!be->fused_run) return false;
        if (st->op != CN_OP_COUNT && (!be->kernels[st->op] || test_missing[dev.kind][st->op]))
            return false;
        for (int k = 0; k < st->fused->ninstr; k++)
            if (test_missing[dev.kind][st->fused->instr[k].op]) return false;
        return true;
    }
    return be->kernels[st->op] && !test_missing[dev.kind][st->op];
}

int ir_unplace(cn_ir *ir) {
    int n = 0;
    for (int s = 0; s < ir->ns; s++) {
        ir_step *st = &ir->s[s];
        if (st->kind == IRS_DEAD || !st->transfer) continue;
        st->kind = IRS_DEAD;
        ir_replace_uses(ir, st->out, st->in[0]);
        n++;
    }
    return n ? cn_pass_dce(ir) : 0;
}

bool ir_shows_devices(const cn_ir *ir) {
    if (ir->split) return true; /* every step names its rank */
    for (int s = 0; s < ir->ns; s++) {
        const ir_step *st = &ir->s[s];
        if (st->kind == IRS_DEAD) continue;
        if (st->dev.kind != CN_DEVICE_CPU || (st->kind == IRS_OP && st->op == CN_OP_to)) return true;
    }
    return false;
}

/* Transfers made so far: (value, device) -> the transfer's value. */
typedef struct xfer {
    int32_t from, to;
    cn_device dev;
} xfer;

typedef struct place_state {
    cn_ir *ir;
    cn_device *home, *where; /* per value */
    int cap;
    xfer *x;
    int nx, xcap;
    int ninserted;
} place_state;

/* The value holding v's contents on dev: v itself, a transfer made
 * earlier, or a new transfer step inserted at position pos. */
static int32_t value_on(place_state *ps, int32_t v, cn_device dev, int pos) {
    if (dev_eq(ps->where[v], dev)) return v;
    for (int k = 0; k < ps->nx; k++)
        if (ps->x[k].from == v && dev_eq(ps->x[k].dev, dev)) return ps->x[k].to;
    cn_ir *ir = ps->ir;
    if (ps->nx == ps->xcap) {
        int nc = ps->xcap ? ps->xcap * 2 : 16;
        xfer *nx = realloc(ps->x, sizeof *nx * (size_t)nc);
        if (!nx) return cn_failc(CN_ENOMEM, "place: out of memory");
        ps->x = nx;
        ps->xcap = nc;
    }
    if (ir->nv >= ps->cap) return cn_failc(CN_EINVAL, "place: internal error: too many values");
    cn_attrs a;
    memset(&a, 0, sizeof a);
    a.i[0] = dev.kind;
    a.i[1] = dev.index;
    const cn_tensor *t = ir->v[v].t;
    int32_t id = ir_insert_step(ir, pos, CN_OP_to, &v, 1, &a, (cn_dtype)t->dtype, t->ndim, t->shape);
    if (id < 0) return cn_failc(CN_ENOMEM, "place: out of memory");
    ir_step *st = &ir->s[pos];
    st->dev = dev;
    st->transfer = 1;
    ps->home[id] = ps->where[id] = dev;
    ps->x[ps->nx++] = (xfer){v, id, dev};
    ps->ninserted++;
    return id;
}

static void note_fallback(ir_place_report *r, const ir_step *st, cn_device want) {
    const char *name = st->kind == IRS_FUSED ? "fused" : cn_ops[st->op]->name;
    if (!r->nfallback++) r->fallback_from = want;
    /* Each op once, as long as the names fit. */
    size_t n = strlen(r->fallback_ops), k = strlen(name);
    for (const char *p = r->fallback_ops; (p = strstr(p, name)); p += k)
        if ((p == r->fallback_ops || p[-1] == ' ') && (p[k] == ',' || p[k] == 0)) return;
    if (n + k + 3 < sizeof r->fallback_ops)
        snprintf(r->fallback_ops + n, sizeof r->fallback_ops - n, "%s%s", n ? ", " : "", name);
    else if (n + 5 < sizeof r->fallback_ops && !strstr(r->fallback_ops, "..."))
        snprintf(r->fallback_ops + n, sizeof r->fallback_ops - n, ", ...");
}

int cn_pass_place(cn_ir *ir, const cn_device *vdev, cn_device prog, ir_place_report *r) {
    memset(r, 0, sizeof *r);
    int nv0 = ir->nv;
    if (ir_unplace(ir) < 0) return -1;
    /* Every input of every step and every output may need one transfer. */
    int cap = ir->nv + ir->noutputs + 1;
    for (int s = 0; s < ir->ns; s++) cap += ir->s[s].nin;
    place_state ps = {ir, calloc((size_t)cap, sizeof(cn_device)), calloc((size_t)cap, sizeof(cn_device)),
                      cap, NULL, 0, 0, 0};
    int rc = 0;
    if (!ps.home || !ps.where) {
        rc = cn_failc(CN_ENOMEM, "place: out of memory");
        goto out;
    }
    for (int v = 0; v < ir->nv && v < nv0; v++)
        if (ir->v[v].kind != IRV_STEP) ps.home[v] = ps.where[v] = vdev[v];
    for (int s = 0; s < ir->ns; s++) {
        ir_step *st = &ir->s[s];
        if (st->kind == IRS_DEAD) continue;
        st->fallback = 0;
        const cn_op_def *d = st->kind == IRS_OP ? cn_ops[st->op] : NULL;
        if (d && (d->flags & CN_OPF_TRANSFER)) { /* goes where its attributes say */
            st->dev = CN_DEVICE((int32_t)st->attrs.i[0], (int32_t)st->attrs.i[1]);
            ps.home[st->out] = ps.where[st->out] = st->dev;
            continue;
        }
        if (d && (d->flags & CN_OPF_VIEW)) { /* shares its input's bytes */
            st->dev = ps.where[st->in[0]];
            ps.home[st->out] = ps.home[st->in[0]];
            ps.where[st->out] = st->dev;
            continue;
        }
        cn_device want = prog;
        if (st->has_scope) {
            want = st->scope;
        } else {
            for (int i = 0; i < st->nin; i++) {
                int32_t v = st->in[i];
                if (ir->v[v].t->ndim == 0 && ps.home[v].kind == CN_DEVICE_CPU) continue;
                want = ps.home[v];
                break;
            }
        }
        cn_device run = want;
        if (want.kind != CN_DEVICE_CPU) {
            const cn_backend *be = cn_backend_for(want, d ? d->name : "fused");
            if (!be) {
                rc = CN_EINVAL;
                goto out;
            }
            if (!has_kernel(ir, be, want, st)) {
                run = CN_CPU;
                st->fallback = 1;
                note_fallback(r, st, want);
            }
        }
        st->dev = run;
        ps.home[st->out] = want;
        ps.where[st->out] = run;
        for (int i = 0; i < ir->s[s].nin; i++) { /* (inserting moves the step: no st) */
            int32_t old = ir->s[s].in[i], v = value_on(&ps, old, run, s);
            if (v < 0) {
                rc = v;
                goto out;
            }
            if (v != old && ir->v[v].producer == s) s++; /* inserted before s */
            ir->s[s].in[i] = v;
        }
    }
    /* Outputs where their step was placed, not where a fallback left them. */
    for (int o = 0; o < ir->noutputs; o++) {
        int32_t v = ir->outputs[o];
        if (ir->v[v].kind != IRV_STEP) continue;
        int32_t t = value_on(&ps, v, ps.home[v], ir->ns);
        if (t < 0) {
            rc = t;
            goto out;
        }
        ir->outputs[o] = t;
    }
    for (int v = 0; v < ir->nv; v++) ir->v[v].dev = ps.where[v];
    r->ninserted = ps.ninserted;
    rc = ps.ninserted;
out:
    free(ps.home);
    free(ps.where);
    free(ps.x);
    return rc;
}
