/* Programs: cn_compile builds the IR of a static graph, runs the passes
 * of the optimisation level and places the steps on devices (inputs assumed
 * on the program's device); cn_run places them again when the inputs are
 * fed on other devices (or the constants moved), plans memory and a
 * schedule for the fed sizes (kept until the sizes or the placement
 * change) and executes each step on its placed device. */
#include "packs.h"
#include "plan.h"
#include "program.h"
#include "effects.h"
#include "../backend/cpu/epilogue.h"
#include "../core/profiler.h"
#include "../ops/cost.h"

#include <stdatomic.h>
#include <stdlib.h>

struct cn_program {
    cn_graph *graph;
    cn_compile_opts opts;
    int noutputs, ninputs;
    int nuser;           /* outputs cn_run hands back (the rest are gradients) */
    cn_tensor **out_sym; /* retained: the graph's outputs, to rebuild from */
    cn_tensor **out_param; /* per output: the parameter whose gradient it is
                              (retained), or NULL; split programs send it to
                              every rank reading the parameter (passes/split.c) */
    cn_tensor **bound;   /* per output: the tensor it is written into, or NULL */
    cn_tensor **direct;  /* per value, during a run: the bound tensor its step writes */
    /* A training step: the optimiser update, run after the steps. */
    int (*after_run)(void *ctx);
    void *after_ctx;
    cn_tensor **in_sym;  /* retained: the placeholders, in input order */
    cn_ir *ir;
    cn_plan *plan;
    int64_t *sig;        /* the input sizes the plan is for */
    bool plan_parallel;  /* and whether it schedules levels */
    int nsig;
    cn_tensor **live;    /* per value, during a run */
    int32_t *uses, *left;
    int ncompiles;
    /* Placement (passes/place.c): the devices of the inputs and constants
     * it was made for (per value id; 0 for step values), redone when a run
     * finds others. */
    cn_device *vdev;     /* per value: scratch for a run's devices */
    int64_t *place_key;
    int place_nv;
    bool warned;         /* the fallback warning was printed */
    /* The profiler's names of the steps ("fused[conv2d; add relu]"),
     * interned; made again after every placement (which changes steps). */
    const char **prof_names;
    int prof_nnames;
    /* A run in progress: the arenas and live values are one run's, so a
     * second thread's cn_run is refused rather than left to corrupt them. */
    atomic_bool running;
    /* Per step: its constant weights packed for the CPU's GEMM, or NULL
     * (packs.c); kept from run to run, made again when the weights are
     * written. */
    cn_gemm_pack **packs;
    int npacks;
    bool packs_planned;  /* checked against the current plan */
};

/* ---- compile ---- */

const cn_pass_def cn_passes[] = {
    {"fold", cn_pass_fold, 1},
    {"simplify", cn_pass_simplify, 1},
    {"cse", cn_pass_cse, 1},
    {"dce", cn_pass_dce, 1},
};
const int cn_npasses = (int)(sizeof cn_passes / sizeof cn_passes[0]);

static int trace_pass(cn_program *p, const char *name, int n) {
    if (p->opts.trace && n > 0) {
        fprintf(p->opts.trace, "== after %s (%d rewrites)\n", name, n);
        ir_print(p->ir, p->opts.trace);
    }
    return n;
}

/* A device as one number (kind, index). */
static int64_t dev_code_of(cn_device d) { return (int64_t)d.kind << 32 | (uint32_t)d.index; }

/* Per-value arrays of a run, sized for the IR's values. */
static int alloc_run_state(cn_program *p) {
    cn_ir *ir = p->ir;
    free(p->live); /* (empty between runs) */
    free(p->uses);
    free(p->left);
    free(p->direct);
    free(p->vdev);
    size_t n = (size_t)(ir->nv ? ir->nv : 1);
    p->direct = calloc(n, sizeof *p->direct);
    p->live = calloc(n, sizeof *p->live);
    p->left = malloc(sizeof *p->left * n);
    p->vdev = calloc(n, sizeof *p->vdev);
    p->uses = ir_use_counts(ir);
    if (!p->live || !p->left || !p->uses || !p->direct || !p->vdev)
        return cn_failc(CN_ENOMEM, "compile: out of memory");
    return 0;
}

/* The program's device: that of the first input or constant off the CPU
 * (rank-0 values aside), else the CPU. vdev[v] for every non-step value. */
static cn_device program_device(const cn_ir *ir, const cn_device *vdev) {
    for (int v = 0; v < ir->nv; v++)
        if (ir->v[v].kind != IRV_STEP && vdev[v].kind != CN_DEVICE_CPU && ir->v[v].t->ndim > 0)
            return vdev[v];
    return CN_CPU;
}

/* Place the steps for the devices in vdev (of every input and constant);
 * the plan is made again on the next run. */
static int place(cn_program *p, const cn_device *vdev) {
    cn_ir *ir = p->ir;
    int nv = ir->nv;
    int64_t *key = malloc(sizeof *key * (size_t)(nv ? nv : 1));
    if (!key) return cn_failc(CN_ENOMEM, "run: out of memory");
    for (int v = 0; v < nv; v++) key[v] = ir->v[v].kind == IRV_STEP ? 0 : dev_code_of(vdev[v]);
    ir_place_report r;
    int n = cn_pass_place(ir, vdev, program_device(ir, vdev), &r);
    if (n < 0) {
        free(key);
        return n;
    }
    trace_pass(p, "place", n);
    p->prof_nnames = 0;
    free(p->place_key);
    p->place_key = key;
    cn_plan_free(p->plan);
    p->plan = NULL;
    free(p->sig);
    p->sig = NULL;
    p->nsig = 0;
    if (alloc_run_state(p) < 0) return CN_ENOMEM;
    p->place_nv = ir->nv;
    if (r.nfallback && !p->opts.quiet_fallback && !p->warned) {
        p->warned = true;
        fprintf(stderr, "program: %d step%s fall%s back to the CPU (no kernel on %s): %s\n",
                r.nfallback, r.nfallback == 1 ? "" : "s", r.nfallback == 1 ? "s" : "",
                cn_dev_name(r.fallback_from), r.fallback_ops);
    }
    return 0;
}

/* Was the program placed for the devices in p->vdev? */
static bool placed_for(const cn_program *p) {
    const cn_ir *ir = p->ir;
    if (!p->place_key) return false;
    for (int v = 0; v < ir->nv; v++)
        if (ir->v[v].kind != IRV_STEP && (v >= p->place_nv || p->place_key[v] != dev_code_of(p->vdev[v])))
            return false;
    return true;
}

static void drop_packs(cn_program *p) {
    cn_packs_free(p->packs, p->npacks);
    free(p->packs);
    p->packs = NULL;
    p->npacks = 0;
    p->packs_planned = false;
}

static int build(cn_program *p) {
    drop_packs(p); /* per step, and the steps are made anew */
    ir_free(p->ir);
    cn_plan_free(p->plan);
    p->plan = NULL;
    free(p->sig);
    p->sig = NULL;
    p->ir = ir_from_graph(p->out_sym, p->noutputs);
    if (!p->ir) return CN_ENOMEM;
    cn_ir *ir = p->ir;
    p->ncompiles++;
    if (p->opts.trace) {
        fprintf(p->opts.trace, "== as built (-O%d)\n", p->opts.opt_level);
        ir_print(ir, p->opts.trace);
    }
    /* Rewrites enable each other (a fold exposes x*1, a merge exposes a
     * fold): repeat the cheap passes until nothing changes. */
    for (int round = 0; round < 4; round++) {
        int changed = 0;
        for (int k = 0; k < cn_npasses; k++) {
            if (p->opts.opt_level < cn_passes[k].min_level) continue;
            int n = cn_passes[k].run(ir);
            if (n < 0) return n;
            changed += trace_pass(p, cn_passes[k].name, n);
        }
        if (!changed) break;
    }
    if (p->opts.opt_level >= 2) {
        int n = cn_pass_fuse(ir);
        if (n < 0) return n;
        trace_pass(p, "fuse", n);
        if ((n = cn_pass_dce(ir)) < 0) return n;
    }
    /* Steps on rank devices: keep this rank's, with a send or recv step at
     * every cut (passes/split.c), after the passes, so every rank splits
     * the same program; then drop what this rank does not need. */
    int nsplit = cn_pass_split(ir, cn_dist_rank(), cn_dist_size(), p->out_param);
    if (nsplit < 0) return nsplit;
    if (ir->split) {
        if (p->opts.trace) fprintf(p->opts.trace, "== split: rank %d of %d, %d send/recv steps\n",
                                   ir->rank, cn_dist_size(), nsplit);
        if (trace_pass(p, "dce", cn_pass_dce(ir)) < 0) return -1;
    }
    /* Placed for inputs on the program's device (that of its constants)
     * until a run feeds them elsewhere. */
    free(p->place_key);
    p->place_key = NULL;
    if (alloc_run_state(p) < 0) return CN_ENOMEM;
    p->place_nv = ir->nv;
    for (int v = 0; v < ir->nv; v++)
        if (ir->v[v].kind == IRV_CONST) p->vdev[v] = cn_t_device(ir->v[v].t);
    cn_device prog = program_device(ir, p->vdev);
    for (int v = 0; v < ir->nv; v++)
        if (ir->v[v].kind == IRV_INPUT) p->vdev[v] = prog;
    cn_device *guess = malloc(sizeof *guess * (size_t)(ir->nv ? ir->nv : 1));
    if (!guess) return cn_failc(CN_ENOMEM, "compile: out of memory");
    memcpy(guess, p->vdev, sizeof *guess * (size_t)ir->nv);
    int rc = place(p, guess);
    free(guess);
    return rc;
}

void cn_program_free(cn_program *p) {
    if (!p) return;
    if (p->live && p->ir)
        for (int i = 0; i < p->ir->nv && i < p->place_nv; i++) cn_release(p->live[i]);
    for (int i = 0; i < p->noutputs; i++) {
        if (p->out_sym) cn_release(p->out_sym[i]);
        if (p->bound) cn_release(p->bound[i]);
        if (p->out_param) cn_release(p->out_param[i]);
    }
    drop_packs(p);
    free(p->bound);
    free(p->out_param);
    free(p->direct);
    for (int i = 0; i < p->ninputs; i++) cn_release(p->in_sym[i]);
    free(p->out_sym);
    free(p->in_sym);
    ir_free(p->ir);
    cn_plan_free(p->plan);
    free(p->sig);
    free(p->live);
    free(p->uses);
    free(p->left);
    free(p->vdev);
    free(p->place_key);
    free(p->prof_names);
    cn_graph_unref(p->graph);
    free(p);
}

cn_program *cn_compile(cn_graph *g, cn_tensor *const *outputs, int noutputs,
                       const cn_compile_opts *opts) {
    return cn_compile_params(g, outputs, noutputs, NULL, opts);
}

cn_program *cn_compile_params(cn_graph *g, cn_tensor *const *outputs, int noutputs,
                              cn_tensor *const *params, const cn_compile_opts *opts) {
    if (!g) return cn_fail("compile: graph is NULL");
    if (!outputs || noutputs < 1) return cn_fail("compile: no outputs given");
    for (int i = 0; i < noutputs; i++) {
        if (!outputs[i]) return NULL;
        if (cn_is_symbolic(outputs[i]) && outputs[i]->graph != (struct cn_graph *)g)
            return cn_fail("compile: output %d belongs to another graph", i);
    }
    if (opts && (opts->opt_level < 0 || opts->opt_level > 2))
        return cn_fail("compile: opt_level %d is out of range (0..2)", opts->opt_level);
    /* The state these outputs' computation writes (effects.h): more
     * outputs, each bound to its target. */
    const cn_graph_effect **fx;
    int nfx;
    if (cn_graph_effects_for(g, outputs, noutputs, &fx, &nfx) < 0)
        return cn_fail("compile: out of memory");
    cn_program *p = calloc(1, sizeof *p);
    if (!p) {
        free(fx);
        return cn_fail("compile: out of memory");
    }
    p->graph = g;
    g->head.refcount++;
    p->opts = opts ? *opts : (cn_compile_opts){.opt_level = 2};
    p->nuser = noutputs;
    p->noutputs = noutputs + nfx;
    p->out_sym = calloc((size_t)p->noutputs, sizeof *p->out_sym); /* (freed on failure) */
    p->bound = calloc((size_t)p->noutputs, sizeof *p->bound);
    if (!p->out_sym || !p->bound) {
        free(fx);
        goto oom;
    }
    for (int i = 0; i < noutputs; i++) p->out_sym[i] = cn_retain(outputs[i]);
    if (params) {
        p->out_param = calloc((size_t)p->noutputs, sizeof *p->out_param);
        if (!p->out_param) {
            free(fx);
            goto oom;
        }
        for (int i = 0; i < noutputs; i++) p->out_param[i] = params[i] ? cn_retain(params[i]) : NULL;
    }
    for (int i = 0; i < nfx; i++) {
        p->out_sym[noutputs + i] = cn_retain(fx[i]->value);
        p->bound[noutputs + i] = cn_retain(fx[i]->target);
    }
    free(fx);
    if (build(p) < 0) {
        cn_program_free(p);
        return NULL;
    }
    /* The inputs are fixed by the graph, whatever later rebuilds find. */
    p->in_sym = malloc(sizeof *p->in_sym * (size_t)(p->ir->ninputs ? p->ir->ninputs : 1));
    if (!p->in_sym) goto oom;
    for (int i = 0; i < p->ir->ninputs; i++)
        p->in_sym[p->ninputs++] = cn_retain(p->ir->v[p->ir->inputs[i]].t);
    return p;
oom:
    cn_program_free(p);
    return cn_fail("compile: out of memory");
}

int cn_program_num_inputs(const cn_program *p) { return p ? p->ninputs : -1; }

int cn_program_num_steps(const cn_program *p) { return p ? p->ir->ns : -1; }

cn_tensor *cn_program_input(const cn_program *p, int i) {
    if (!p || i < 0 || i >= p->ninputs) return cn_fail("program_input: index %d out of range", i);
    return p->in_sym[i];
}

int cn_program_output_rank(const cn_program *p, int i) {
    if (!p || i < 0 || i >= p->nuser)
        return cn_failc(CN_EINVAL, "program_output_rank: output %d out of range", i);
    return p->ir->out_rank ? p->ir->out_rank[i] : -1;
}

/* Computed on another rank and not sent here (cn_run hands back NULL)? */
static bool remote_output(const cn_ir *ir, int o) { return ir->out_remote && ir->out_remote[o]; }

bool cn_program_output_here(const cn_program *p, int i) { return !remote_output(p->ir, i); }

int cn_program_stats_get(const cn_program *p, cn_program_stats *st) {
    if (!p || !st) return cn_failc(CN_EINVAL, "program_stats: NULL argument");
    memset(st, 0, sizeof *st);
    st->nsteps = p->ir->ns;
    for (int s = 0; s < p->ir->ns; s++) {
        const ir_step *is = &p->ir->s[s];
        st->nfused += is->kind == IRS_FUSED;
        if (is->kind == IRS_OP && is->op == CN_OP_to) st->ntransfers++;
        else if ((unsigned)is->dev.kind < CN_DEVICE_KIND_COUNT) st->ndevice_steps[is->dev.kind]++;
        st->nfallbacks += is->fallback;
        st->nsends += is->kind == IRS_OP && is->op == CN_OP_send;
        st->nrecvs += is->kind == IRS_OP && is->op == CN_OP_recv;
    }
    st->rank = p->ir->split ? p->ir->rank : -1;
    st->ncompiles = p->ncompiles;
    if (p->plan) {
        st->nlevels = p->plan->ngroups;
        st->planned_bytes = p->plan->arena_bytes;
        st->unplanned_bytes = p->plan->naive_bytes;
        st->ninplace = p->plan->ninplace;
        st->packed_bytes = cn_packs_bytes(p->packs, p->npacks);
        for (int o = 0; o < p->ir->noutputs; o++) {
            const cn_meta *m = &p->plan->meta[p->ir->outputs[o]];
            if (p->ir->v[p->ir->outputs[o]].kind == IRV_STEP)
                st->output_bytes += (size_t)cn_shape_numel(m->ndim, m->shape) * cn_dsize(m->dtype);
        }
    }
    return 0;
}

int cn_program_dump(const cn_program *p, FILE *f) {
    if (!p || !f) return cn_failc(CN_EINVAL, "program_dump: NULL argument");
    ir_print(p->ir, f);
    return 0;
}

int cn_program_write_dot(const cn_program *p, FILE *f) {
    if (!p || !f) return cn_failc(CN_EINVAL, "program_write_dot: NULL argument");
    /* Bound outputs are labelled with their tensors' names: a training
     * step's gradients carry "grad <parameter>" (train_step.c). */
    const char **labels = calloc((size_t)p->noutputs, sizeof *labels);
    if (!labels) return cn_failc(CN_ENOMEM, "program_write_dot: out of memory");
    for (int o = 0; o < p->noutputs && o < p->ir->noutputs; o++)
        labels[o] = p->bound[o] ? cn_get_name(p->bound[o]) : NULL;
    int rc = ir_write_dot(p->ir, f, labels);
    free(labels);
    return rc;
}

/* ---- run ---- */

static bool fits(const cn_tensor *ph, const cn_tensor *v) {
    if (ph->ndim != v->ndim) return false;
    for (int i = 0; i < ph->ndim; i++)
        if (ph->shape[i] != -1 && ph->shape[i] != v->shape[i]) return false;
    return true;
}

static void drop_live(cn_program *p) {
    for (int i = 0; i < p->ir->nv; i++) {
        cn_release(p->live[i]);
        p->live[i] = NULL;
    }
}

/* The tensor step s writes value v into: a bound output, its planned
 * place in the arena (when that is on the step's device), or a new one. */
static cn_tensor *result_tensor(const cn_program *p, int32_t v, cn_device dev) {
    const cn_plan *pl = p->plan;
    if (p->direct[v] && cn_device_equal(cn_t_device(p->direct[v]), dev))
        return cn_retain(p->direct[v]);
    if (pl->buf[v] && cn_device_equal(cn_t_device(pl->buf[v]), dev)) return cn_retain(pl->buf[v]);
    const cn_meta *m = &pl->meta[v];
    return cn_t_empty_on(dev, m->dtype, m->ndim, m->shape);
}

/* Execute step s: its result into p->live. */
static inline __attribute__((always_inline)) int exec_step_impl(cn_program *p, int s) {
    const ir_step *st = &p->ir->s[s];
    cn_plan *pl = p->plan;
    cn_tensor *ins_buf[32], **ins = ins_buf;
    if (st->nin > 16 && !(ins = malloc(sizeof *ins * 2 * (size_t)st->nin)))
        return cn_failc(CN_ENOMEM, "run: out of memory");
    for (int i = 0; i < st->nin; i++) ins[i] = p->live[st->in[i]];
    /* Steps of a level run concurrently, and a kernel may retain and
     * release an input (a reduction, a softmax): tensor reference counts
     * are not atomic, so a concurrent step reads its own tensor structs
     * over the shared storage. */
    cn_tensor **own = cn_in_parallel_region() ? ins + st->nin : NULL;
    int nown = 0;
    while (own && nown < st->nin && (own[nown] = ins[nown] = cn_t_alias(ins[nown]))) nown++;
    if (own && nown < st->nin) {
        for (int i = 0; i < nown; i++) cn_release(own[i]);
        if (ins != ins_buf) free(ins);
        return cn_failc(CN_ENOMEM, "run: out of memory");
    }
    const cn_meta *m = &pl->meta[st->out];
    const cn_attrs *a = &pl->attrs[s];
    cn_tensor *out = NULL;
    int rc = 0;
    cn_device dev = st->dev; /* placed (passes/place.c): every input is there */
    /* ... which a kernel relies on (it reads its inputs' handles as its
     * device's): a value elsewhere is a placement bug, and an error, never
     * a kernel reading another device's memory. */
    bool transfer = st->kind == IRS_OP && (cn_ops[st->op]->flags & CN_OPF_TRANSFER);
    for (int i = 0; i < st->nin && !transfer && rc == 0; i++) {
        const cn_storage *sto = ins[i]->storage;
        if (sto && (sto->device_kind != dev.kind || sto->device_index != dev.index))
            rc = cn_failc(CN_EINVAL, "input %d is on %s, the step on %s", i,
                          cn_dev_name(cn_storage_device(sto)), cn_dev_name(dev));
    }
    if (rc < 0) {
        /* nothing to run */
    } else if (st->kind == IRS_OP) {
        const cn_op_def *d = cn_ops[st->op];
        if (d->flags & CN_OPF_VIEW) {
            out = cn_view_run(d, ins[0], a, m, pl->vbuf ? pl->vbuf[st->out] : NULL);
            if (!out) rc = CN_EINVAL;
        } else if (d->flags & CN_OPF_TRANSFER) {
            /* Into its planned place; synchronous, since the source may be
             * arena bytes a later step reuses. */
            out = result_tensor(p, st->out, dev);
            if (!out) rc = CN_ENOMEM;
            else if (cn_transfer(out, ins[0], false) < 0) rc = CN_EINVAL;
        } else {
            const cn_gemm_pack *prev = cn_gemm_pack_set_step(p->packs[s]);
            out = cn_kernel_run((cn_op_id)st->op, ins, st->nin, a, m, dev,
                                result_tensor(p, st->out, dev));
            cn_gemm_pack_set_step(prev);
            if (!out) rc = CN_EINVAL;
        }
    } else {
        const cn_backend *be = dev.kind == CN_DEVICE_CPU ? &cn_backend_cpu : cn_backend_for(dev, "run");
        out = be ? result_tensor(p, st->out, dev) : NULL;
        if (!be) {
            rc = CN_EINVAL;
        } else if (!out) {
            rc = CN_ENOMEM;
        } else if (!be->fused_run) {
            rc = cn_failc(CN_EUNSUPPORTED, "run: the %s backend cannot run fused groups", be->name);
        } else if (st->op != CN_OP_COUNT) {
            /* The head computes into out; the expression then updates out
             * in place, reading it as register 0 (an epilogue). On the
             * CPU a convolution's kernel is offered the expression, to
             * apply as it finishes pieces of out: as bounds when it only
             * bounds the value (ReLU, ReLU6: cn_gemm_out), else as an
             * epilogue (epilogue.h). */
            bool applied = false;
            if (cn_shape_numel(m->ndim, m->shape) > 0) {
                cn_gemm_out bounds = {0};
                cn_epilogue *ep = NULL;
                if (dev.kind == CN_DEVICE_CPU && st->op == CN_OP_conv2d) {
                    cn_tensor *head_last = ins[st->head_nin - 1];
                    ins[st->head_nin - 1] = out;
                    bounds.clamp = cn_fused_as_bounds(st->fused, ins + st->head_nin - 1,
                                                      &bounds.lo, &bounds.hi);
                    if (!bounds.clamp)
                        ep = cn_epilogue_begin(st->fused, ins + st->head_nin - 1, out);
                    ins[st->head_nin - 1] = head_last;
                }
                const cn_gemm_pack *prev = cn_gemm_pack_set_step(p->packs[s]);
                cn_gemm_out *prev_out = cn_gemm_out_offer(bounds.clamp ? &bounds : NULL);
                cn_epilogue *prev_ep = cn_epilogue_offer(ep);
                out = cn_kernel_run((cn_op_id)st->op, ins, st->head_nin, a, m, dev, out);
                cn_epilogue_offer(prev_ep);
                cn_gemm_out_offer(prev_out);
                cn_gemm_pack_set_step(prev);
                applied = bounds.taken || cn_epilogue_taken(ep);
                int erc = cn_epilogue_end(ep);
                if (!out) rc = CN_EINVAL;
                else if (erc < 0) rc = erc;
            }
            if (rc == 0 && !applied) {
                ins[st->head_nin - 1] = out;
                rc = be->fused_run(st->fused, ins + st->head_nin - 1, out);
            }
        } else {
            rc = be->fused_run(st->fused, ins, out);
        }
    }
    for (int i = 0; i < nown; i++) cn_release(own[i]);
    if (ins != ins_buf) free(ins);
    if (rc < 0) {
        cn_release(out);
        return rc;
    }
    p->live[st->out] = out;
    return 0;
}

/* Names for the profiler's events, made before the steps run (steps of a
 * group run on several threads). Fused steps are named as the dumps show
 * them; others by their op, a static string. */
static void prof_prepare_names(cn_program *p) {
    const cn_ir *ir = p->ir;
    if (p->prof_nnames == ir->ns && p->prof_names) return;
    free(p->prof_names);
    p->prof_nnames = 0;
    p->prof_names = malloc(sizeof *p->prof_names * (size_t)(ir->ns ? ir->ns : 1));
    if (!p->prof_names) return;
    for (int s = 0; s < ir->ns; s++) {
        const ir_step *st = &ir->s[s];
        if (st->kind != IRS_FUSED) {
            p->prof_names[s] = st->kind == IRS_OP ? cn_ops[st->op]->name : "step";
            continue;
        }
        char buf[256];
        int len = snprintf(buf, sizeof buf, "fused[%s%s", st->op != CN_OP_COUNT ? cn_ops[st->op]->name : "",
                           st->op != CN_OP_COUNT ? "; " : "");
        for (int k = 0; k < st->fused->ninstr && len < (int)sizeof buf - 2; k++)
            len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%s", k ? " " : "",
                            cn_ops[st->fused->instr[k].op]->name);
        if (len > (int)sizeof buf - 2) len = (int)sizeof buf - 2;
        buf[len] = ']';
        buf[len + 1] = '\0';
        p->prof_names[s] = cn_prof_intern(buf);
    }
    p->prof_nnames = ir->ns;
}

/* exec_step timed and recorded as a program step (views aside). */
static __attribute__((noinline, cold)) int exec_step_profiled(cn_program *p, int s) {
    const ir_step *st = &p->ir->s[s];
    if (st->kind == IRS_OP && (cn_ops[st->op]->flags & CN_OPF_VIEW)) return exec_step_impl(p, s);
    cn_tensor *ins_buf[32], **ins = ins_buf;
    if (st->nin > 32 && !(ins = malloc(sizeof *ins * (size_t)st->nin))) return exec_step_impl(p, s);
    for (int i = 0; i < st->nin; i++) ins[i] = p->live[st->in[i]];
    int64_t t0 = cn_prof_now();
    int rc = exec_step_impl(p, s);
    cn_tensor *out = rc == 0 ? p->live[st->out] : NULL;
    if (out) {
        if (st->dev.kind != CN_DEVICE_CPU && cn_prof_sync_devices()) cn_device_synchronize(st->dev);
        int64_t t1 = cn_prof_now();
        double flops = 0, bytes = 0;
        const char *name;
        if (st->kind == IRS_OP) {
            cn_op_cost((cn_op_id)st->op, ins, st->nin, &p->plan->attrs[s], out, &flops, &bytes);
            name = cn_ops[st->op]->name;
        } else {
            /* The head's products, then one FLOP per instruction per element;
             * the group reads each input once and writes the output once. */
            if (st->op != CN_OP_COUNT)
                cn_op_cost((cn_op_id)st->op, ins, st->head_nin, &p->plan->attrs[s], out, &flops,
                           &bytes);
            flops += (double)cn_numel(out) * st->fused->ninstr;
            bytes = cn_tensor_bytes_read(out);
            for (int i = 0; i < st->nin; i++) bytes += cn_tensor_bytes_read(ins[i]);
            name = p->prof_names && s < p->prof_nnames ? p->prof_names[s] : "fused";
        }
        cn_prof_record(CN_PROFILE_STEP, name, t0, t1, flops, bytes, st->dev);
    }
    if (ins != ins_buf) free(ins);
    return rc;
}

static int exec_step(cn_program *p, int s) {
    if (CN_UNLIKELY(cn_prof_on())) return exec_step_profiled(p, s);
    return exec_step_impl(p, s);
}

/* The inputs of step s that no later step reads are released. */
static void release_inputs(cn_program *p, int s) {
    const ir_step *st = &p->ir->s[s];
    for (int i = 0; i < st->nin; i++) {
        int32_t v = st->in[i];
        if (--p->left[v] == 0) {
            cn_release(p->live[v]);
            p->live[v] = NULL;
        }
    }
}

typedef struct group_ctx {
    cn_program *p;
    const int32_t *steps;
    int *rc;
    char (*err)[512];
} group_ctx;

static void run_group_task(void *ctx, int64_t b, int64_t e) {
    group_ctx *g = ctx;
    for (int64_t k = b; k < e; k++) {
        g->rc[k] = exec_step(g->p, g->steps[k]);
        if (g->rc[k] < 0) snprintf(g->err[k], sizeof g->err[k], "%s", cn_last_error());
    }
}

static int fail_step(cn_program *p, int s, const char *msg) {
    const ir_step *st = &p->ir->s[s];
    return cn_failc(CN_EINVAL, "run: step %d (%s): %s", s,
                    st->kind == IRS_FUSED ? "fused" : cn_ops[st->op]->name, msg);
}

static int run_steps(cn_program *p) {
    cn_plan *pl = p->plan;
    int *rc = pl->task_rc;
    char (*err)[512] = pl->task_err;
    int status = 0;
    for (int gi = 0; gi < pl->ngroups && status == 0; gi++) {
        int b = pl->group_start[gi], e = pl->group_start[gi + 1];
        if (pl->group_par[gi] && cn_get_num_threads() > 1) {
            group_ctx g = {p, pl->order + b, rc, err};
            cn_parallel_tasks(e - b, run_group_task, &g);
            for (int k = 0; k < e - b && status == 0; k++)
                if (rc[k] < 0) status = fail_step(p, pl->order[b + k], err[k]);
        } else {
            for (int k = b; k < e && status == 0; k++)
                if (exec_step(p, pl->order[k]) < 0) {
                    char msg[512];
                    snprintf(msg, sizeof msg, "%s", cn_last_error());
                    status = fail_step(p, pl->order[k], msg);
                }
        }
        if (status) break;
        for (int k = b; k < e; k++) release_inputs(p, pl->order[k]);
        if (p->opts.poison && pl->dead_start)
            for (int k = pl->dead_start[gi]; k < pl->dead_start[gi + 1]; k++) {
                const cn_tensor *t = pl->buf[pl->dead_list[k]];
                if (cn_storage_on_cpu(t->storage)) /* (device arenas are not poisoned) */
                    memset(cn_t_ptr(t), 0xFF, (size_t)cn_numel(t) * cn_dsize((cn_dtype)t->dtype));
            }
    }
    return status;
}

/* A fed tensor's device as one number of the plan's signature: a plan's
 * arena lives on the device its inputs came on. */
static int64_t dev_code(const cn_tensor *t) { return dev_code_of(cn_t_device(t)); }

/* Bound outputs computed by a kernel step are written by it directly. */
static int bind_direct(cn_program *p) {
    const cn_ir *ir = p->ir;
    char b1[160], b2[160];
    for (int o = 0; o < p->noutputs; o++) {
        cn_tensor *t = p->bound[o];
        int32_t v = ir->outputs[o];
        if (!t || remote_output(ir, o)) continue;
        const cn_meta *m = ir->v[v].kind == IRV_STEP ? &p->plan->meta[v] : NULL;
        const cn_tensor *src = m ? NULL : p->live[v];
        int nd = m ? m->ndim : src->ndim;
        const int64_t *shape = m ? m->shape : src->shape;
        cn_dtype dt = m ? m->dtype : (cn_dtype)src->dtype;
        bool same = t->dtype == dt && t->ndim == nd &&
                    !memcmp(t->shape, shape, sizeof(int64_t) * (size_t)nd);
        if (!same)
            return cn_failc(CN_EINVAL, "run: output %d is %s%s, bound to %s", o, cn_dtype_name(dt),
                            cn_fmt_shape(b1, sizeof b1, nd, shape), cn_shape_str(t, b2, sizeof b2));
        const ir_step *st = m ? &ir->s[ir->v[v].producer] : NULL;
        bool kernel = st && !(st->kind == IRS_OP && (cn_ops[st->op]->flags & CN_OPF_VIEW));
        if (kernel && !p->direct[v] && cn_is_contiguous(t)) p->direct[v] = t;
    }
    return 0;
}

int cn_program_bind_output(cn_program *p, int i, cn_tensor *t) {
    if (!p || i < 0 || i >= p->nuser)
        return cn_failc(CN_EINVAL, "program_bind_output: output %d out of range", i);
    if (t && cn_is_symbolic(t))
        return cn_failc(CN_EINVAL, "program_bind_output: the tensor is symbolic");
    cn_release(p->bound[i]);
    p->bound[i] = t ? cn_retain(t) : NULL;
    return 0;
}

void cn_program_attach_step(cn_program *p, int nuser, cn_tensor *const *bound, int nbound,
                            int (*after_run)(void *ctx), void *ctx) {
    p->nuser = nuser;
    for (int i = 0; i < nbound; i++) {
        cn_release(p->bound[nuser + i]);
        p->bound[nuser + i] = cn_retain(bound[i]);
    }
    p->after_run = after_run;
    p->after_ctx = ctx;
}

/* Packs for this run's plan (packs.c), unless the program opted out. */
static int update_packs(cn_program *p) {
    if (p->npacks != p->ir->ns) { /* placement added or removed transfer steps */
        drop_packs(p);
        if (!(p->packs = calloc((size_t)(p->ir->ns ? p->ir->ns : 1), sizeof *p->packs)))
            return cn_failc(CN_ENOMEM, "run: out of memory");
        p->npacks = p->ir->ns;
    }
    if (p->opts.no_packing) return CN_OK; /* every slot stays NULL */
    /* Which steps pack depends on the plan's sizes (and asking whether a
     * convolution runs on oneDNN is not free): once per plan, then only
     * whether a constant was written. */
    if (p->packs_planned && cn_packs_current(p->ir, p->packs)) return CN_OK;
    int rc = cn_packs_update(p->ir, p->plan, p->live, p->packs);
    p->packs_planned = rc == CN_OK;
    return rc;
}

/* Was a tensor a pass relied on written since? */
static bool assumptions_hold(const cn_ir *ir) {
    for (int i = 0; i < ir->nassume; i++)
        if (ir->assume[i].t->storage->version != ir->assume[i].version) return false;
    return true;
}

static int run_program(cn_program *p, cn_tensor *const *placeholders, cn_tensor *const *values,
                       int nfeeds, cn_tensor **outputs, int noutputs);

int cn_run(cn_program *p, cn_tensor *const *placeholders, cn_tensor *const *values, int nfeeds,
           cn_tensor **outputs, int noutputs) {
    if (p && atomic_exchange_explicit(&p->running, true, memory_order_acquire)) {
        if (outputs)
            for (int i = 0; i < noutputs; i++) outputs[i] = NULL;
        return cn_failc(CN_ESTATE, "run: the program is running already (on another thread, or "
                                   "from inside its own run): a program is one thread's at a "
                                   "time, so compile one per thread");
    }
    int rc;
    if (CN_LIKELY(!cn_prof_on())) {
        rc = run_program(p, placeholders, values, nfeeds, outputs, noutputs);
    } else {
        cn_prof_range_begin("run");
        rc = run_program(p, placeholders, values, nfeeds, outputs, noutputs);
        cn_prof_range_end();
    }
    if (p) atomic_store_explicit(&p->running, false, memory_order_release);
    return rc;
}

static int run_program(cn_program *p, cn_tensor *const *placeholders, cn_tensor *const *values,
                       int nfeeds, cn_tensor **outputs, int noutputs) {
    /* Outputs are NULL on every failure, so callers never read garbage. */
    if (outputs)
        for (int i = 0; i < noutputs; i++) outputs[i] = NULL;
    if (!p) return cn_failc(CN_EINVAL, "run: program is NULL");
    if (noutputs != p->nuser || !outputs)
        return cn_failc(CN_EINVAL, "run: the program has %d outputs, %d requested", p->nuser,
                        noutputs);
    if (nfeeds < 0 || (nfeeds > 0 && (!placeholders || !values)))
        return cn_failc(CN_EINVAL, "run: bad feeds");
    if (!assumptions_hold(p->ir) && build(p) < 0) return CN_ENOMEM;
    cn_ir *ir = p->ir;
    /* The fed value of each input, checked against its placeholder. */
    cn_tensor *fed_buf[16], **fed = fed_buf;
    if (p->ninputs > 16 && !(fed = calloc((size_t)p->ninputs, sizeof *fed)))
        return cn_failc(CN_ENOMEM, "run: out of memory");
    memset(fed, 0, sizeof *fed * (size_t)(p->ninputs < 16 ? 16 : p->ninputs));
    int rc = CN_OK;
    for (int f = 0; f < nfeeds && rc == CN_OK; f++) {
        if (!placeholders[f] || !values[f]) {
            rc = cn_failc(CN_EINVAL, "run: feed %d is NULL", f);
            break;
        }
        int k = 0;
        while (k < p->ninputs && p->in_sym[k] != placeholders[f]) k++;
        if (k == p->ninputs) continue; /* a placeholder this program does not read */
        const cn_tensor *ph = p->in_sym[k], *v = values[f];
        char b1[160], b2[160];
        if (cn_is_symbolic(v) || v->dtype != ph->dtype || !fits(ph, v))
            rc = cn_failc(CN_EINVAL, "run: placeholder '%s' is %s, fed %s", cn_get_name(ph),
                          cn_shape_str(ph, b1, sizeof b1), cn_shape_str(v, b2, sizeof b2));
        fed[k] = values[f];
    }
    for (int k = 0; k < p->ninputs && rc == CN_OK; k++)
        if (!fed[k])
            rc = cn_failc(CN_EINVAL, "run: placeholder '%s' was not fed", cn_get_name(p->in_sym[k]));
    if (rc != CN_OK) goto out;

    /* Placed for the devices of these inputs and of the constants (a
     * module moved with cn_module_to moves its parameters in place)? */
    for (int v = 0; v < ir->nv; v++) {
        if (ir->v[v].kind == IRV_CONST) {
            p->vdev[v] = cn_t_device(ir->v[v].t);
        } else if (ir->v[v].kind == IRV_INPUT) {
            for (int k = 0; k < p->ninputs; k++)
                if (p->in_sym[k] == ir->v[v].t) p->vdev[v] = cn_t_device(fed[k]);
        }
    }
    if (!placed_for(p)) {
        cn_device *vd = malloc(sizeof *vd * (size_t)(ir->nv ? ir->nv : 1));
        if (!vd) {
            rc = cn_failc(CN_ENOMEM, "run: out of memory");
            goto out;
        }
        memcpy(vd, p->vdev, sizeof *vd * (size_t)ir->nv);
        rc = place(p, vd);
        free(vd);
        if (rc < 0) goto out;
    }

    /* Values of inputs and constants, by value id. */
    for (int v = 0; v < ir->nv; v++) {
        if (ir->v[v].kind == IRV_CONST) {
            p->live[v] = cn_retain(ir->v[v].t);
        } else if (ir->v[v].kind == IRV_INPUT) {
            for (int k = 0; k < p->ninputs; k++)
                if (p->in_sym[k] == ir->v[v].t) p->live[v] = cn_retain(fed[k]);
        }
    }
    /* Plan for these sizes unless the last plan was for them. */
    int nsig = 0;
    for (int k = 0; k < p->ninputs; k++) nsig += 2 + fed[k]->ndim;
    /* Levels pay only with threads to run them on; one thread keeps the
     * build order (shorter lifetimes, a smaller arena). */
    bool parallel = p->opts.opt_level >= 2 && cn_get_num_threads() > 1;
    bool same = p->plan && p->nsig == nsig && p->plan_parallel == parallel;
    for (int k = 0, j = 0; same && k < p->ninputs; k++) {
        same &= p->sig[j++] == fed[k]->ndim;
        for (int d = 0; same && d < fed[k]->ndim; d++) same &= p->sig[j++] == fed[k]->shape[d];
        same &= p->sig[j++] == dev_code(fed[k]);
    }
    if (!same) {
        cn_plan_free(p->plan);
        free(p->sig);
        p->plan = NULL;
        p->sig = malloc(sizeof *p->sig * (size_t)(nsig ? nsig : 1));
        if (!p->sig) {
            rc = cn_failc(CN_ENOMEM, "run: out of memory");
            goto out;
        }
        p->nsig = nsig;
        for (int k = 0, j = 0; k < p->ninputs; k++) {
            p->sig[j++] = fed[k]->ndim;
            for (int d = 0; d < fed[k]->ndim; d++) p->sig[j++] = fed[k]->shape[d];
            p->sig[j++] = dev_code(fed[k]);
        }
        int level = p->opts.opt_level;
        p->plan = cn_plan_build(ir, p->live, level >= 1, parallel, p->opts.poison);
        p->packs_planned = false;
        p->plan_parallel = parallel;
        if (!p->plan) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", cn_last_error());
            rc = cn_failc(CN_EINVAL, "run: %s", msg);
            goto out;
        }
    }
    if ((rc = update_packs(p)) < 0) goto out;
    if ((rc = bind_direct(p)) < 0) goto out;
    for (int v = 0; v < ir->nv; v++) p->left[v] = p->uses[v];
    bool prev = cn_set_grad_enabled(false);
    if (CN_UNLIKELY(cn_prof_on())) prof_prepare_names(p);
    rc = run_steps(p);
    cn_set_grad_enabled(prev);
    for (int o = 0; o < p->noutputs && rc == CN_OK; o++) {
        cn_tensor *b = p->bound[o], *v = p->live[ir->outputs[o]];
        if (remote_output(ir, o)) continue; /* another rank's: nothing to write */
        if (b && v != b && cn_transfer(b, v, false) < 0) rc = CN_EINVAL;
        else if (b) cn_storage_bump(b->storage);
    }
    if (rc == CN_OK && p->after_run) rc = p->after_run(p->after_ctx);
    if (rc == CN_OK)
        for (int o = 0; o < noutputs; o++) {
            cn_tensor *b = p->bound[o];
            if (!remote_output(ir, o)) /* (another rank's: NULL) */
                outputs[o] = cn_scope_add(cn_retain(b ? b : p->live[ir->outputs[o]]));
        }
out:
    memset(p->direct, 0, sizeof *p->direct * (size_t)ir->nv);
    drop_live(p);
    if (fed != fed_buf) free(fed);
    return rc;
}
