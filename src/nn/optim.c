/* Optimisers: parameters, gradients and state in flat buffers, one pass per
 * step (the rules are in optim_rules.c).
 *
 * Layout. At creation, parameters of one dtype whose storage nobody else
 * sees (refcount 1, allocated by the library) are copied into one flat
 * buffer, in list order, and each parameter tensor is re-pointed at its
 * slice in place (storage, offset, contiguous strides), so every pointer to
 * it stays valid (llm.c's malloc_and_point_parameters, KANN's collate). If
 * the parameters already tile one storage in list order (an earlier
 * optimiser flattened them, or there is only one), that storage is used as
 * it is. Gradients get one flat buffer too: each parameter's .grad is a
 * view of its slice, and backward adds into an existing gradient in place,
 * so it lands there directly. State buffers are flat alike. The rest
 * (another dtype, a view, a borrowed buffer) is updated per tensor by the
 * same kernels.
 *
 * Step. A gradient that is still our view costs nothing; one the user
 * replaced is copied into the slice; a missing one skips the parameter (no
 * update, no step count), as torch does. Runs of neighbouring parameters
 * with the same step count form one work item; all items go to the
 * parameters' backend in one call (the CPU cuts them into fixed chunks on
 * the pool). Every element is updated on its own, so the bits never depend
 * on the thread count or the device's split of the work. Parameters, their
 * gradient buffer and the state live on the parameters' device. */
#include "optim.h"
#include "../core/profiler.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CN_OPT_CHUNK 16384

typedef struct opt_slot {
    cn_tensor *p;       /* retained */
    int64_t numel;
    int64_t off;        /* elements from the start of the flat region, or -1 */
    int64_t step;       /* updates applied (torch's state['step']) */
    double wd;          /* this parameter's weight decay; NaN: the optimiser's */
    cn_tensor *gview;   /* flat: this parameter's slice of the gradient buffer */
    cn_tensor *state[CN_OPT_MAXSTATE]; /* standalone: contiguous, p's shape */
} opt_slot;

struct cn_optimizer {
    cn_opt_alg alg;
    cn_device device;  /* where every parameter and buffer lives */
    cn_opt_hyper h;
    double initial_lr; /* NaN until a schedule sets it */
    int n;
    opt_slot *s;
    const char *snames[CN_OPT_MAXSTATE];
    /* The flat group (nflat parameters of dtype fdt). */
    int nflat;
    cn_dtype fdt;
    int64_t ftotal;
    int64_t fbase;     /* element offset of the region in fparam */
    cn_storage *fparam;/* retained */
    cn_tensor *fgrad;  /* [ftotal] */
    cn_tensor *fstate[CN_OPT_MAXSTATE];
    cn_state_list out; /* what cn_optimizer_state last returned */
    /* A step's work lists, kept so that steps allocate nothing (a training
     * step compiled into a program runs without malloc). */
    cn_optim_update *w_items;
    int64_t *w_start;
    /* Runs first in every step (data-parallel averaging, ddp.c). */
    int (*pre_step)(void *ctx);
    void *pre_step_ctx;
    int *w_item_of;
    cn_tensor **w_ptmp, **w_gtmp;
    /* Clipping by global norm in every step (0: off); the parameter list
     * cn_clip_grad_norm reads, made once. */
    double clip_norm, last_norm;
    cn_tensor **clip_list;
};

static const char *const alg_names[CN_OPT_ALG_COUNT] = {"sgd", "adam", "adamw", "rmsprop",
                                                        "adagrad"};

/* ---- small helpers ---- */

/* A new tensor struct over st (retained) at offset off, contiguous, shaped
 * like shape_of (or 1-D of n elements when shape_of is NULL). */
static cn_tensor *view_of(cn_storage *st, cn_dtype dt, int64_t off, const cn_tensor *shape_of,
                          int64_t n) {
    cn_tensor *v = cn_t_alloc();
    if (!v) return NULL;
    v->dtype = (uint8_t)dt;
    if (shape_of) {
        v->ndim = shape_of->ndim;
        memcpy(v->shape, shape_of->shape, sizeof v->shape);
    } else {
        v->ndim = 1;
        v->shape[0] = n;
    }
    cn_contiguous_strides(v->ndim, v->shape, v->strides);
    v->offset = off;
    v->storage = st;
    st->refcount++;
    v->flags = CN_TF_LEAF;
    return v;
}

static int fill_zero(cn_tensor *t) {
    int rc = cn_backend_of(t)->fill(t, 0);
    cn_storage_bump(t->storage);
    return rc;
}

static cn_tensor *copy_of(const cn_tensor *t) {
    cn_tensor *c = cn_t_empty_on(cn_t_device(t), (cn_dtype)t->dtype, t->ndim, t->shape);
    if (c && cn_transfer(c, t, false) < 0) {
        cn_release(c);
        return NULL;
    }
    return c;
}

typedef struct memset_ctx {
    char *p;
    size_t nbytes, chunk;
} memset_ctx;

static void memset_task(void *ctx, int64_t t0, int64_t t1) {
    const memset_ctx *m = ctx;
    for (int64_t t = t0; t < t1; t++) {
        size_t lo = (size_t)t * m->chunk;
        size_t hi = lo + m->chunk < m->nbytes ? lo + m->chunk : m->nbytes;
        memset(m->p + lo, 0, hi - lo);
    }
}

static void zero_bytes(void *p, size_t nbytes, size_t elem) {
    memset_ctx m = {p, nbytes, CN_OPT_CHUNK * elem};
    cn_parallel_tasks((int64_t)((nbytes + m.chunk - 1) / m.chunk), memset_task, &m);
}

/* Zero a whole flat tensor: in chunks on the pool on the CPU, by its
 * backend's fill elsewhere. */
static int zero_flat(cn_tensor *t) {
    if (!cn_t_on_cpu(t)) return cn_backend_of(t)->fill(t, 0);
    zero_bytes(cn_t_ptr(t), (size_t)cn_shape_numel(t->ndim, t->shape) * cn_dsize((cn_dtype)t->dtype),
               cn_dsize((cn_dtype)t->dtype));
    return CN_OK;
}

/* ---- hyper-parameters ---- */

static int check_hyper(const char *fn, cn_opt_alg alg, const cn_opt_hyper *h) {
#define REQUIRE(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond)) return cn_failc(CN_EINVAL, __VA_ARGS__);                                      \
    } while (0)
    REQUIRE(h->lr >= 0 && isfinite(h->lr), "%s: lr %g must be >= 0 and finite", fn, h->lr);
    REQUIRE(h->weight_decay >= 0 && isfinite(h->weight_decay),
            "%s: weight_decay %g must be >= 0 and finite", fn, h->weight_decay);
    switch (alg) {
    case CN_OPT_SGD:
        REQUIRE(h->momentum >= 0 && isfinite(h->momentum), "%s: momentum %g must be >= 0", fn,
                h->momentum);
        REQUIRE(isfinite(h->dampening), "%s: dampening %g must be finite", fn, h->dampening);
        REQUIRE(!h->nesterov || (h->momentum > 0 && h->dampening == 0),
                "%s: nesterov needs momentum > 0 and dampening 0 (momentum %g, dampening %g)", fn,
                h->momentum, h->dampening);
        break;
    case CN_OPT_ADAM:
    case CN_OPT_ADAMW:
        REQUIRE(h->beta1 >= 0 && h->beta1 < 1, "%s: beta1 %g must be in [0, 1)", fn, h->beta1);
        REQUIRE(h->beta2 >= 0 && h->beta2 < 1, "%s: beta2 %g must be in [0, 1)", fn, h->beta2);
        REQUIRE(h->eps >= 0 && isfinite(h->eps), "%s: eps %g must be >= 0", fn, h->eps);
        break;
    case CN_OPT_RMSPROP:
        REQUIRE(h->alpha >= 0 && isfinite(h->alpha), "%s: alpha %g must be >= 0", fn, h->alpha);
        REQUIRE(h->eps >= 0 && isfinite(h->eps), "%s: eps %g must be >= 0", fn, h->eps);
        REQUIRE(h->momentum >= 0 && isfinite(h->momentum), "%s: momentum %g must be >= 0", fn,
                h->momentum);
        break;
    case CN_OPT_ADAGRAD:
        REQUIRE(h->lr_decay >= 0 && isfinite(h->lr_decay), "%s: lr_decay %g must be >= 0", fn,
                h->lr_decay);
        REQUIRE(h->initial_accumulator_value >= 0 && isfinite(h->initial_accumulator_value),
                "%s: initial_accumulator_value %g must be >= 0", fn, h->initial_accumulator_value);
        REQUIRE(h->eps >= 0 && isfinite(h->eps), "%s: eps %g must be >= 0", fn, h->eps);
        break;
    default: break;
    }
    return CN_OK;
#undef REQUIRE
}

/* The hyper-parameters a state holds, per algorithm (bools as 0/1). */
#define A_SGD (1u << CN_OPT_SGD)
#define A_ADAM ((1u << CN_OPT_ADAM) | (1u << CN_OPT_ADAMW))
#define A_RMS (1u << CN_OPT_RMSPROP)
#define A_ADAGRAD (1u << CN_OPT_ADAGRAD)
#define A_ALL (A_SGD | A_ADAM | A_RMS | A_ADAGRAD)
typedef struct hyper_field {
    const char *name;
    size_t off;
    bool is_bool;
    unsigned algs;
} hyper_field;
#define HF(name, is_bool, algs) {#name, offsetof(cn_opt_hyper, name), is_bool, algs}
static const hyper_field hyper_fields[] = {
    HF(lr, false, A_ALL),
    HF(momentum, false, A_SGD | A_RMS),
    HF(dampening, false, A_SGD),
    HF(nesterov, true, A_SGD),
    HF(alpha, false, A_RMS),
    HF(beta1, false, A_ADAM),
    HF(beta2, false, A_ADAM),
    HF(eps, false, A_ADAM | A_RMS | A_ADAGRAD),
    HF(weight_decay, false, A_ALL),
    HF(lr_decay, false, A_ADAGRAD),
    HF(initial_accumulator_value, false, A_ADAGRAD),
    HF(amsgrad, true, A_ADAM),
    HF(centered, true, A_RMS),
    HF(maximize, true, A_ALL),
};
#define NHYPER ((int)(sizeof hyper_fields / sizeof hyper_fields[0]))

static double hyper_get(const cn_opt_hyper *h, const hyper_field *f) {
    const char *p = (const char *)h + f->off;
    return f->is_bool ? (*(const bool *)p ? 1.0 : 0.0) : *(const double *)p;
}

static void hyper_set(cn_opt_hyper *h, const hyper_field *f, double v) {
    char *p = (char *)h + f->off;
    if (f->is_bool) *(bool *)p = v != 0;
    else *(double *)p = v;
}

/* ---- creation ---- */

static void opt_destroy(cn_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->n; i++) {
        opt_slot *s = &o->s[i];
        cn_release(s->gview);
        for (int k = 0; k < CN_OPT_MAXSTATE; k++) cn_release(s->state[k]);
        cn_release(s->p);
    }
    free(o->s);
    cn_release(o->fgrad);
    for (int k = 0; k < CN_OPT_MAXSTATE; k++) cn_release(o->fstate[k]);
    cn_storage_release(o->fparam);
    cn_state_list_free(&o->out);
    free(o->w_items);
    free(o->w_start);
    free(o->w_item_of);
    free(o->w_ptmp);
    free(o->w_gtmp);
    free(o->clip_list);
    free(o);
}

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)(*(cn_tensor *const *)a), y = (uintptr_t)(*(cn_tensor *const *)b);
    return x < y ? -1 : x > y;
}

/* Do the parameters already tile one storage, contiguous, in list order? */
static bool tiles_one_storage(cn_tensor *const *params, int n) {
    cn_storage *st = params[0]->storage;
    int64_t next = params[0]->offset;
    for (int i = 0; i < n; i++) {
        const cn_tensor *p = params[i];
        if (p->storage != st || p->dtype != params[0]->dtype || !cn_is_contiguous(p) ||
            p->offset != next)
            return false;
        next += cn_shape_numel(p->ndim, p->shape);
    }
    return (size_t)next * cn_dsize((cn_dtype)params[0]->dtype) <= st->nbytes;
}

static bool relocatable(const cn_tensor *p) {
    /* Device storage is always the library's own. */
    return p->storage->refcount == 1 && (p->storage->owned || p->storage->device_free);
}

static cn_optimizer *opt_new(const char *fn, cn_opt_alg alg, cn_tensor *const *params, int n,
                             const cn_opt_hyper *h) {
    if (n < 1 || !params) return cn_fail("%s: the parameter list is empty", fn);
    for (int i = 0; i < n; i++)
        if (!params[i]) return NULL; /* an earlier failure: keep its message */
    for (int i = 0; i < n; i++) {
        const cn_tensor *p = params[i];
        char b[160];
        if (cn_is_symbolic(p) || !p->storage)
            return cn_fail("%s: parameter %d (%s) is a value of a static graph, not a tensor with "
                           "data", fn, i, cn_shape_str(p, b, sizeof b));
        if (p->node)
            return cn_fail("%s: parameter %d (%s) has a recorded history (an op computed it); "
                           "parameters must be leaves: pass the tensor the model owns, or "
                           "cn_detach it", fn, i, cn_shape_str(p, b, sizeof b));
        if (p->dtype != CN_F32 && p->dtype != CN_F64)
            return cn_fail("%s: parameter %d is %s; optimisers update f32 and f64 parameters",
                           fn, i, cn_shape_str(p, b, sizeof b));
        if (!cn_device_equal(cn_t_device(p), cn_t_device(params[0])))
            return cn_fail("%s: parameter %d is on %s and parameter 0 on %s; an optimiser's "
                           "parameters must be on one device", fn, i, cn_dev_name(cn_t_device(p)),
                           cn_dev_name(cn_t_device(params[0])));
    }
    /* A parameter listed twice would be updated twice per step. */
    cn_tensor **sorted = malloc(sizeof *sorted * (size_t)n);
    if (!sorted) return cn_fail("%s: out of memory", fn);
    memcpy(sorted, params, sizeof *sorted * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_ptr);
    for (int i = 1; i < n; i++)
        if (sorted[i] == sorted[i - 1]) {
            int a = -1, c = -1;
            for (int j = 0; j < n; j++)
                if (params[j] == sorted[i]) {
                    if (a < 0) a = j;
                    else if (c < 0) c = j;
                }
            free(sorted);
            return cn_fail("%s: parameters %d and %d are the same tensor; list each once", fn, a,
                           c);
        }
    free(sorted);
    if (check_hyper(fn, alg, h) < 0) return NULL;

    cn_optimizer *o = calloc(1, sizeof *o);
    if (!o || !(o->s = calloc((size_t)n, sizeof *o->s))) {
        free(o);
        return cn_fail("%s: out of memory", fn);
    }
    o->alg = alg;
    o->h = *h;
    o->initial_lr = NAN;
    o->n = n;
    o->device = cn_t_device(params[0]);
    cn_opt_state_names(alg, h, o->snames);
    for (int i = 0; i < n; i++) {
        o->s[i].p = cn_retain(params[i]);
        o->s[i].numel = cn_shape_numel(params[i]->ndim, params[i]->shape);
        o->s[i].off = -1;
        o->s[i].wd = NAN;
    }

    /* Choose the flat group. */
    bool adopt = tiles_one_storage(params, n);
    if (adopt) {
        o->fdt = (cn_dtype)params[0]->dtype;
    } else {
        bool f32 = false;
        for (int i = 0; i < n; i++) f32 |= params[i]->dtype == CN_F32 && relocatable(params[i]);
        o->fdt = f32 ? CN_F32 : CN_F64;
    }
    uint32_t version = 0;
    for (int i = 0; i < n; i++) {
        cn_tensor *p = params[i];
        if (!adopt && (p->dtype != o->fdt || !relocatable(p))) continue;
        o->s[i].off = o->ftotal;
        o->ftotal += o->s[i].numel;
        o->nflat++;
        if (p->storage->version >= version) version = p->storage->version + 1;
    }

    /* Allocate and fill everything before touching a parameter, so a
     * failure leaves them as they were. */
    size_t es = cn_dsize(o->fdt);
    if (o->nflat > 0) {
        if (adopt) {
            o->fparam = params[0]->storage;
            o->fparam->refcount++;
            o->fbase = params[0]->offset;
        } else if (!(o->fparam = cn_storage_new_on(o->device, (size_t)o->ftotal * es))) {
            goto oom;
        }
        if (!(o->fgrad = cn_t_full_on(o->device, o->fdt, 1, &o->ftotal, 0))) goto oom;
        for (int k = 0; k < CN_OPT_MAXSTATE; k++)
            if (o->snames[k] && !(o->fstate[k] = cn_t_full_on(o->device, o->fdt, 1, &o->ftotal,
                                                               cn_opt_state_init(alg, h, k))))
                goto oom;
    }
    for (int i = 0; i < n; i++) {
        opt_slot *s = &o->s[i];
        cn_tensor *p = s->p;
        if (s->off < 0) {
            for (int k = 0; k < CN_OPT_MAXSTATE; k++)
                if (o->snames[k] &&
                    !(s->state[k] = cn_t_full_on(o->device, (cn_dtype)p->dtype, p->ndim, p->shape,
                                                 cn_opt_state_init(alg, h, k))))
                    goto oom;
            continue;
        }
        if (!(s->gview = view_of(o->fgrad->storage, o->fdt, s->off, p, 0))) goto oom;
        /* A gradient already there (backward ran before) keeps its values. */
        if (p->grad && cn_transfer(s->gview, p->grad, false) < 0) goto fail;
        if (!adopt) {
            cn_tensor *dst = view_of(o->fparam, o->fdt, s->off, p, 0);
            if (!dst) goto oom;
            int rc = cn_transfer(dst, p, false);
            cn_release(dst);
            if (rc < 0) goto fail;
        }
    }

    /* Commit: re-point the parameters (nothing below can fail). */
    if (o->nflat > 0 && !adopt) {
        o->fparam->version = version;
        cn_storage_bump(o->fparam);
    }
    for (int i = 0; i < n; i++) {
        opt_slot *s = &o->s[i];
        cn_tensor *p = s->p;
        if (s->off < 0) continue;
        if (!adopt) {
            cn_storage *old = p->storage;
            p->storage = o->fparam;
            o->fparam->refcount++;
            p->offset = s->off;
            cn_contiguous_strides(p->ndim, p->shape, p->strides);
            cn_storage_release(old);
        }
        if (p->requires_grad || p->grad) cn_set_grad(p, s->gview);
    }
    return o;

oom:
    cn_fail("%s: out of memory allocating the optimiser's buffers", fn);
fail:
    opt_destroy(o);
    return NULL;
}

cn_optimizer *cn_sgd(cn_tensor *const *params, int n, const cn_sgd_opts *o) {
    if (!o || o->lr == 0)
        return cn_fail("sgd: opts->lr must be set (it has no default, as in torch)");
    cn_sgd_opts opts = *o;
    cn_opt_hyper h = {.lr = opts.lr, .momentum = opts.momentum, .dampening = opts.dampening,
                      .nesterov = opts.nesterov, .weight_decay = opts.weight_decay,
                      .maximize = opts.maximize};
    return opt_new("sgd", CN_OPT_SGD, params, n, &h);
}

static cn_optimizer *adam_like(const char *fn, cn_opt_alg alg, cn_tensor *const *params, int n,
                               const cn_adam_opts *o) {
    cn_adam_opts opts = o ? *o : (cn_adam_opts){0};
    bool betas = opts.beta1 != 0 || opts.beta2 != 0;
    cn_opt_hyper h = {.lr = opts.lr != 0 ? opts.lr : 1e-3,
                      .beta1 = betas ? opts.beta1 : 0.9,
                      .beta2 = betas ? opts.beta2 : 0.999,
                      .eps = opts.eps != 0 ? opts.eps : 1e-8,
                      .weight_decay = opts.weight_decay,
                      .amsgrad = opts.amsgrad,
                      .maximize = opts.maximize};
    if (alg == CN_OPT_ADAMW && opts.weight_decay == 0) h.weight_decay = 1e-2;
    return opt_new(fn, alg, params, n, &h);
}

cn_optimizer *cn_adam(cn_tensor *const *params, int n, const cn_adam_opts *opts) {
    return adam_like("adam", CN_OPT_ADAM, params, n, opts);
}

cn_optimizer *cn_adamw(cn_tensor *const *params, int n, const cn_adam_opts *opts) {
    return adam_like("adamw", CN_OPT_ADAMW, params, n, opts);
}

cn_optimizer *cn_rmsprop(cn_tensor *const *params, int n, const cn_rmsprop_opts *o) {
    cn_rmsprop_opts opts = o ? *o : (cn_rmsprop_opts){0};
    cn_opt_hyper h = {.lr = opts.lr != 0 ? opts.lr : 1e-2,
                      .alpha = opts.alpha != 0 ? opts.alpha : 0.99,
                      .eps = opts.eps != 0 ? opts.eps : 1e-8,
                      .weight_decay = opts.weight_decay,
                      .momentum = opts.momentum,
                      .centered = opts.centered,
                      .maximize = opts.maximize};
    return opt_new("rmsprop", CN_OPT_RMSPROP, params, n, &h);
}

cn_optimizer *cn_adagrad(cn_tensor *const *params, int n, const cn_adagrad_opts *o) {
    cn_adagrad_opts opts = o ? *o : (cn_adagrad_opts){0};
    cn_opt_hyper h = {.lr = opts.lr != 0 ? opts.lr : 1e-2,
                      .lr_decay = opts.lr_decay,
                      .weight_decay = opts.weight_decay,
                      .initial_accumulator_value = opts.initial_accumulator_value,
                      .eps = opts.eps != 0 ? opts.eps : 1e-10,
                      .maximize = opts.maximize};
    return opt_new("adagrad", CN_OPT_ADAGRAD, params, n, &h);
}

void cn_optimizer_free(cn_optimizer *o) { opt_destroy(o); }

/* ---- step ---- */

void cn_opt_set_pre_step(cn_optimizer *o, int (*fn)(void *ctx), void *ctx) {
    o->pre_step = fn;
    o->pre_step_ctx = ctx;
}

void cn_opt_get_pre_step(const cn_optimizer *o, int (**fn)(void *ctx), void **ctx) {
    *fn = o->pre_step;
    *ctx = o->pre_step_ctx;
}

static int optimizer_step(cn_optimizer *o);

int cn_optimizer_step(cn_optimizer *o) {
    if (CN_LIKELY(!cn_prof_on())) return optimizer_step(o);
    cn_prof_range_begin("optimizer.step");
    int rc = optimizer_step(o);
    cn_prof_range_end();
    return rc;
}

static int optimizer_step(cn_optimizer *o) {
    if (!o) return CN_EINVAL;
    if (o->pre_step) {
        int prc = o->pre_step(o->pre_step_ctx);
        if (prc < 0) return prc;
        if (prc > 0) return CN_OK;
    }
    /* Clipping after the ranks' gradients are averaged (pre_step), before
     * they are read: what a caller of cn_clip_grad_norm between backward
     * and step gets, also inside a compiled training step. */
    if (o->clip_norm > 0) {
        int crc = cn_clip_grad_norm(o->clip_list, o->n, o->clip_norm, 2, &o->last_norm);
        if (crc < 0) return crc;
    }
    int n = o->n, rc = CN_OK, nitems = 0;
    if (!o->w_items) {
        size_t m = (size_t)(n ? n : 1);
        o->w_items = malloc(sizeof *o->w_items * m);
        o->w_start = malloc(sizeof *o->w_start * (m + 1));
        o->w_item_of = malloc(sizeof *o->w_item_of * m);
        o->w_ptmp = calloc(m, sizeof *o->w_ptmp);
        o->w_gtmp = calloc(m, sizeof *o->w_gtmp);
        if (!o->w_items || !o->w_start || !o->w_item_of || !o->w_ptmp || !o->w_gtmp) {
            free(o->w_items), free(o->w_start), free(o->w_item_of), free(o->w_ptmp),
                free(o->w_gtmp);
            /* All of them: cn_optimizer_free frees them again otherwise. */
            o->w_items = NULL, o->w_start = NULL, o->w_item_of = NULL;
            o->w_ptmp = o->w_gtmp = NULL;
            return cn_failc(CN_ENOMEM, "optimizer_step: out of memory");
        }
    }
    cn_optim_update *items = o->w_items;
    int64_t *start = o->w_start;
    int *item_of = o->w_item_of;      /* slot -> item, -1: skipped */
    cn_tensor **ptmp = o->w_ptmp;     /* standalone copies (NULL between steps) */
    cn_tensor **gtmp = o->w_gtmp;
    memset(items, 0, sizeof *items * (size_t)n);
    memset(start, 0, sizeof *start * ((size_t)n + 1));
    bool flat_touched = false;
    int last_flat = -1; /* the item the last updated flat slot went to */
    int64_t last_end = -1, last_step = -1;
    double last_wd = NAN;
    for (int i = 0; i < n; i++) {
        opt_slot *s = &o->s[i];
        cn_tensor *p = s->p, *g = p->grad;
        item_of[i] = -1;
        if (!g) continue;
        char b1[160];
        if (!g->storage) {
            rc = cn_failc(CN_EINVAL, "optimizer_step: the gradient of parameter %d is symbolic", i);
            goto out;
        }
        if (s->off >= 0) {
            if (p->storage != o->fparam || p->offset != o->fbase + s->off || !cn_is_contiguous(p)) {
                rc = cn_failc(CN_ESTATE, "optimizer_step: parameter %d (%s) no longer lies in the "
                                         "optimiser's buffer", i, cn_shape_str(p, b1, sizeof b1));
                goto out;
            }
            if (g != s->gview) {
                /* Replaced by the user (or by a backward after cn_zero_grad). */
                if ((rc = cn_transfer(s->gview, g, false)) < 0) goto out;
                cn_storage_bump(s->gview->storage);
            }
            /* A parameter with a weight decay of its own (a param group)
             * starts an item with its own constants. */
            bool same_wd = (isnan(s->wd) && isnan(last_wd)) || s->wd == last_wd;
            if (last_flat >= 0 && s->off == last_end && s->step == last_step && same_wd) {
                items[last_flat].n += s->numel;
            } else {
                cn_optim_update *it = &items[nitems];
                it->p = o->fparam;
                it->p_off = o->fbase + s->off;
                it->g = o->fgrad->storage;
                it->g_off = o->fgrad->offset + s->off;
                for (int k = 0; k < CN_OPT_MAXSTATE; k++) {
                    it->s[k] = o->fstate[k] ? o->fstate[k]->storage : NULL;
                    it->s_off[k] = o->fstate[k] ? o->fstate[k]->offset + s->off : 0;
                }
                it->n = s->numel;
                cn_opt_hyper h = o->h;
                if (!isnan(s->wd)) h.weight_decay = s->wd;
                cn_opt_prepare(o->alg, &h, o->fdt, s->step + 1, it);
                last_flat = nitems++;
            }
            last_end = s->off + s->numel;
            last_step = s->step;
            last_wd = s->wd;
            item_of[i] = last_flat;
            flat_touched = true;
        } else {
            cn_dtype dt = (cn_dtype)p->dtype;
            cn_optim_update *it = &items[nitems];
            const cn_tensor *pp = p, *gg = g;
            if (!cn_is_contiguous(p)) {
                if (!(ptmp[i] = copy_of(p))) goto fail;
                pp = ptmp[i];
            }
            if (g->dtype != dt || !cn_is_contiguous(g) || g->storage == p->storage ||
                !cn_device_equal(cn_t_device(g), o->device)) {
                if (!(gtmp[i] = cn_t_empty_on(o->device, dt, p->ndim, p->shape))) goto fail;
                if ((rc = cn_transfer(gtmp[i], g, false)) < 0) goto out;
                gg = gtmp[i];
            }
            it->p = pp->storage;
            it->p_off = pp->offset;
            it->g = gg->storage;
            it->g_off = gg->offset;
            for (int k = 0; k < CN_OPT_MAXSTATE; k++) {
                it->s[k] = s->state[k] ? s->state[k]->storage : NULL;
                it->s_off[k] = s->state[k] ? s->state[k]->offset : 0;
            }
            it->n = s->numel;
            cn_opt_hyper h = o->h;
            if (!isnan(s->wd)) h.weight_decay = s->wd;
            cn_opt_prepare(o->alg, &h, dt, s->step + 1, it);
            item_of[i] = nitems++;
        }
    }
    if (nitems > 0) {
        const cn_backend *be = cn_backend_for(o->device, "optimizer_step");
        if (!be) {
            rc = CN_EINVAL;
            goto out;
        }
        if (!be->optim_update) {
            rc = cn_failc(CN_EUNSUPPORTED, "optimizer_step: the %s backend has no optimiser update",
                          be->name);
            goto out;
        }
        if ((rc = be->optim_update(items, nitems)) < 0) goto out;
    }
    /* Commit. */
    for (int i = 0; i < n; i++) {
        if (item_of[i] < 0) continue;
        opt_slot *s = &o->s[i];
        s->step++;
        if (s->off >= 0) continue;
        if (ptmp[i]) cn_transfer(s->p, ptmp[i], false);
        cn_storage_bump(s->p->storage);
    }
    if (flat_touched) cn_storage_bump(o->fparam);
    goto out;
fail:
    rc = cn_failc(CN_ENOMEM, "optimizer_step: out of memory");
out:
    for (int i = 0; i < n; i++) {
        cn_release(ptmp[i]);
        cn_release(gtmp[i]);
        ptmp[i] = gtmp[i] = NULL;
    }
    return rc;
}

/* ---- gradients, lr, introspection ---- */

cn_tensor *cn_opt_param(const cn_optimizer *o, int i) {
    return o && i >= 0 && i < o->n ? o->s[i].p : NULL;
}

int cn_opt_count(const cn_optimizer *o) { return o ? o->n : 0; }

int cn_optimizer_zero_grad(cn_optimizer *o) {
    if (!o) return CN_EINVAL;
    if (o->nflat > 0) {
        zero_flat(o->fgrad);
        cn_storage_bump(o->fgrad->storage);
    }
    int rc = CN_OK;
    for (int i = 0; i < o->n && rc == CN_OK; i++) {
        opt_slot *s = &o->s[i];
        cn_tensor *p = s->p, *g = p->grad;
        /* A parameter that cannot get a gradient must not be updated by a
         * zero one (weight decay, momentum): it is skipped instead. */
        if (!p->requires_grad) {
            if (g) rc = cn_set_grad(p, NULL);
            continue;
        }
        if (s->off >= 0) {
            if (g != s->gview) rc = cn_set_grad(p, s->gview);
        } else if (g) {
            if (g->node || !g->storage) {
                cn_tensor *z = cn_t_full_on(cn_t_device(p), (cn_dtype)g->dtype, g->ndim, g->shape, 0);
                rc = z ? cn_set_grad(p, z) : CN_ENOMEM;
                cn_release(z);
            } else {
                rc = fill_zero(g);
            }
        }
    }
    return rc;
}

int cn_optimizer_set_lr(cn_optimizer *o, double lr) {
    if (!o) return CN_EINVAL;
    if (!(lr >= 0) || !isfinite(lr))
        return cn_failc(CN_EINVAL, "optimizer_set_lr: lr %g must be >= 0 and finite", lr);
    o->h.lr = lr;
    return CN_OK;
}

double cn_optimizer_get_lr(const cn_optimizer *o) { return o ? o->h.lr : NAN; }

int cn_optimizer_set_param_weight_decay(cn_optimizer *o, int i, double wd) {
    if (!o) return CN_EINVAL;
    if (i < 0 || i >= o->n)
        return cn_failc(CN_EINVAL, "optimizer_set_param_weight_decay: parameter %d of %d", i, o->n);
    if (!isfinite(wd))
        return cn_failc(CN_EINVAL, "optimizer_set_param_weight_decay: weight_decay %g must be "
                                   "finite", wd);
    o->s[i].wd = wd < 0 ? NAN : wd;
    return CN_OK;
}

int cn_optimizer_set_clip_grad_norm(cn_optimizer *o, double max_norm) {
    if (!o) return CN_EINVAL;
    if (!(max_norm >= 0) || !isfinite(max_norm))
        return cn_failc(CN_EINVAL, "optimizer_set_clip_grad_norm: max_norm %g must be >= 0 and "
                                   "finite", max_norm);
    if (max_norm > 0 && !o->clip_list) {
        o->clip_list = malloc(sizeof *o->clip_list * (size_t)o->n);
        if (!o->clip_list) return cn_failc(CN_ENOMEM, "optimizer_set_clip_grad_norm: out of memory");
        for (int i = 0; i < o->n; i++) o->clip_list[i] = o->s[i].p;
    }
    o->clip_norm = max_norm;
    o->last_norm = NAN;
    return CN_OK;
}

double cn_optimizer_last_grad_norm(const cn_optimizer *o) {
    return o && o->clip_norm > 0 ? o->last_norm : NAN;
}

void cn_opt_put_lr(cn_optimizer *o, double lr) { o->h.lr = lr; }
double cn_opt_initial_lr(const cn_optimizer *o) { return o->initial_lr; }
void cn_opt_set_initial_lr(cn_optimizer *o, double lr) { o->initial_lr = lr; }

int cn_optimizer_num_params(const cn_optimizer *o) { return o ? o->n : CN_EINVAL; }

bool cn_optimizer_is_flat(const cn_optimizer *o) { return o && o->n > 0 && o->nflat == o->n; }

cn_tensor *cn_optimizer_flat_params(cn_optimizer *o) {
    if (!o) return NULL;
    if (!cn_optimizer_is_flat(o))
        return cn_fail("optimizer_flat_params: the parameters are not in one flat buffer (mixed "
                       "dtypes, views or borrowed buffers)");
    return cn_scope_add(view_of(o->fparam, o->fdt, o->fbase, NULL, o->ftotal));
}

cn_tensor *cn_optimizer_flat_grads(cn_optimizer *o) {
    if (!o) return NULL;
    if (!cn_optimizer_is_flat(o))
        return cn_fail("optimizer_flat_grads: the parameters are not in one flat buffer (mixed "
                       "dtypes, views or borrowed buffers)");
    return cn_scope_add(view_of(o->fgrad->storage, o->fdt, 0, NULL, o->ftotal));
}

/* ---- state ---- */

/* Every entry of the state: the algorithm, its hyper-parameters, the step
 * counts, then each buffer of each parameter ("exp_avg.0", ...), as views
 * of the optimiser's own. */
static int build_state(cn_optimizer *o, cn_state_list *l) {
    int rc = cn_state_add_str(l, "algorithm", alg_names[o->alg]);
    for (int f = 0; f < NHYPER && rc == CN_OK; f++)
        if (hyper_fields[f].algs & (1u << o->alg))
            rc = cn_state_add_f64(l, hyper_fields[f].name, hyper_get(&o->h, &hyper_fields[f]));
    if (rc == CN_OK) rc = cn_state_add_f64(l, "initial_lr", o->initial_lr);
    if (rc == CN_OK) {
        int64_t n = o->n;
        cn_tensor *st = cn_t_empty(CN_I64, 1, &n);
        if (st)
            for (int i = 0; i < o->n; i++) ((int64_t *)st->storage->data)[i] = o->s[i].step;
        rc = cn_state_add(l, "step", st);
    }
    for (int k = 0; k < CN_OPT_MAXSTATE && rc == CN_OK; k++) {
        if (!o->snames[k]) continue;
        for (int i = 0; i < o->n && rc == CN_OK; i++) {
            opt_slot *s = &o->s[i];
            cn_tensor *v = s->off >= 0 ? view_of(o->fstate[k]->storage, o->fdt, s->off, s->p, 0)
                                       : cn_retain(s->state[k]);
            char name[96];
            snprintf(name, sizeof name, "%s.%d", o->snames[k], i);
            rc = cn_state_add(l, name, v);
        }
    }
    return rc;
}

int cn_optimizer_state(cn_optimizer *o, cn_tensor ***tensors, const char ***names) {
    if (tensors) *tensors = NULL;
    if (names) *names = NULL;
    if (!o) return CN_EINVAL;
    cn_state_list l = {0};
    if (build_state(o, &l) < 0) {
        cn_state_list_free(&l);
        return cn_failc(CN_ENOMEM, "optimizer_state: out of memory");
    }
    return cn_state_publish(&l, &o->out, tensors, names);
}

int cn_optimizer_load_state(cn_optimizer *o, const char *const *names, cn_tensor *const *tensors,
                            int n) {
    static const char *fn = "optimizer_load_state";
    if (!o) return CN_EINVAL;
    if (n < 0 || (n > 0 && (!names || !tensors)))
        return cn_failc(CN_EINVAL, "%s: bad entry list (n = %d)", fn, n);
    /* A state of another algorithm: say so rather than list every name. */
    for (int i = 0; i < n; i++) {
        const cn_tensor *t = tensors[i];
        if (!names[i] || strcmp(names[i], "algorithm") != 0 || !t || !t->storage ||
            t->dtype != CN_U8 || t->ndim != 1 || !cn_is_contiguous(t))
            continue;
        const char *want = alg_names[o->alg];
        if ((size_t)t->shape[0] != strlen(want) || memcmp(cn_t_ptr(t), want, strlen(want)) != 0)
            return cn_failc(CN_EINVAL, "%s: the state is of optimiser \"%.*s\", this one is %s",
                            fn, (int)(t->shape[0] < 32 ? t->shape[0] : 32),
                            (const char *)cn_t_ptr(t), want);
    }
    cn_state_list l = {0};
    cn_tensor **m = NULL;
    int rc = build_state(o, &l);
    if (rc < 0 || !(m = calloc((size_t)l.n, sizeof *m))) {
        rc = cn_failc(CN_ENOMEM, "%s: out of memory", fn);
        goto out;
    }
    if ((rc = cn_state_match(fn, &l, names, tensors, n, m)) < 0) goto out;
    /* Read and check everything before writing anything. */
    cn_opt_hyper h = o->h;
    int e = 1;
    for (int f = 0; f < NHYPER; f++)
        if (hyper_fields[f].algs & (1u << o->alg))
            hyper_set(&h, &hyper_fields[f], cn_state_f64(m[e++]));
    double initial_lr = cn_state_f64(m[e++]);
    const cn_tensor *steps = m[e++];
    if ((rc = check_hyper(fn, o->alg, &h)) < 0) goto out;
    const char *sn[CN_OPT_MAXSTATE];
    cn_opt_state_names(o->alg, &h, sn);
    for (int k = 0; k < CN_OPT_MAXSTATE; k++)
        if ((sn[k] == NULL) != (o->snames[k] == NULL)) {
            rc = cn_failc(CN_EINVAL, "%s: the state's hyper-parameters need other buffers than "
                                     "this optimiser has (%s)", fn,
                          sn[k] ? sn[k] : o->snames[k]);
            goto out;
        }
    int64_t *sv = malloc(sizeof *sv * (size_t)o->n);
    if (!sv) {
        rc = cn_failc(CN_ENOMEM, "%s: out of memory", fn);
        goto out;
    }
    cn_copy_to_buffer(steps, CN_I64, sv, sizeof *sv * (size_t)o->n);
    for (int i = 0; i < o->n; i++)
        if (sv[i] < 0) {
            rc = cn_failc(CN_EINVAL, "%s: step[%d] = %" PRId64 " is negative", fn, i, sv[i]);
            free(sv);
            goto out;
        }
    /* Write. */
    for (int i = e; i < l.n && rc == CN_OK; i++) rc = cn_transfer(l.tensors[i], m[i], false);
    if (rc == CN_OK) {
        o->h = h;
        o->initial_lr = initial_lr;
        for (int i = 0; i < o->n; i++) o->s[i].step = sv[i];
        for (int k = 0; k < CN_OPT_MAXSTATE; k++) {
            if (o->fstate[k]) cn_storage_bump(o->fstate[k]->storage);
            for (int i = 0; i < o->n; i++)
                if (o->s[i].state[k]) cn_storage_bump(o->s[i].state[k]->storage);
        }
    }
    free(sv);
out:
    free(m);
    cn_state_list_free(&l);
    return rc;
}

/* ---- named state lists ---- */

int cn_state_add(cn_state_list *l, const char *name, cn_tensor *t) {
    if (!t) return CN_ENOMEM;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **nn = realloc(l->names, sizeof *nn * (size_t)cap);
        if (nn) l->names = nn;
        cn_tensor **nt = nn ? realloc(l->tensors, sizeof *nt * (size_t)cap) : NULL;
        if (nt) l->tensors = nt;
        if (!nn || !nt) {
            cn_release(t);
            return CN_ENOMEM;
        }
        l->cap = cap;
    }
    size_t len = strlen(name) + 1;
    char *copy = malloc(len);
    if (!copy) {
        cn_release(t);
        return CN_ENOMEM;
    }
    memcpy(copy, name, len);
    l->names[l->n] = copy;
    l->tensors[l->n++] = t;
    return CN_OK;
}

int cn_state_add_f64(cn_state_list *l, const char *name, double v) {
    return cn_state_add(l, name, cn_t_scalar(CN_F64, v));
}

int cn_state_add_i64(cn_state_list *l, const char *name, int64_t v) {
    cn_tensor *t = cn_t_empty(CN_I64, 0, NULL);
    if (t) *(int64_t *)t->storage->data = v;
    return cn_state_add(l, name, t);
}

int cn_state_add_str(cn_state_list *l, const char *name, const char *s) {
    int64_t len = (int64_t)strlen(s);
    cn_tensor *t = cn_t_empty(CN_U8, 1, &len);
    if (t) memcpy(t->storage->data, s, (size_t)len);
    return cn_state_add(l, name, t);
}

void cn_state_list_free(cn_state_list *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->names[i]);
        cn_release(l->tensors[i]);
    }
    free(l->names);
    free(l->tensors);
    memset(l, 0, sizeof *l);
}

int cn_state_publish(cn_state_list *l, cn_state_list *keep, cn_tensor ***tensors,
                     const char ***names) {
    cn_tensor **ta = NULL;
    char **na = NULL;
    size_t n = (size_t)l->n, bytes = n * sizeof(char *);
    for (size_t i = 0; i < n; i++) bytes += strlen(l->names[i]) + 1;
    if ((tensors && !(ta = malloc(sizeof *ta * (n ? n : 1)))) || (names && !(na = malloc(bytes)))) {
        free(ta);
        cn_state_list_free(l);
        return cn_failc(CN_ENOMEM, "out of memory listing a state");
    }
    if (na) {
        char *str = (char *)(na + n);
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(l->names[i]) + 1;
            memcpy(str, l->names[i], len);
            na[i] = str;
            str += len;
        }
    }
    if (ta) memcpy(ta, l->tensors, sizeof *ta * n);
    cn_state_list_free(keep);
    *keep = *l;
    memset(l, 0, sizeof *l);
    if (tensors) *tensors = ta;
    if (names) *names = (const char **)na;
    return (int)n;
}

static void problem(char *msg, size_t cap, size_t *len, int *count, const char *fmt, ...)
    CN_PRINTF(5, 6);
static void problem(char *msg, size_t cap, size_t *len, int *count, const char *fmt, ...) {
    (*count)++;
    if (*len + 8 >= cap) return;
    if (*len) *len += (size_t)snprintf(msg + *len, cap - *len, "; ");
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(msg + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (k > 0) *len += (size_t)k;
    if (*len >= cap) {
        *len = cap - 1;
        memcpy(msg + cap - 5, "...", 4);
    }
}

static bool same_shape(const cn_tensor *a, const cn_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

int cn_state_match(const char *fn, const cn_state_list *expected, const char *const *names,
                   cn_tensor *const *tensors, int n, cn_tensor **matched) {
    char msg[760] = "";
    size_t len = 0;
    int count = 0;
    bool *used = calloc((size_t)(n > 0 ? n : 1), sizeof *used);
    if (!used) return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    for (int i = 0; i < expected->n; i++) {
        const char *name = expected->names[i];
        const cn_tensor *want = expected->tensors[i];
        int j = 0;
        while (j < n && (used[j] || !names[j] || strcmp(names[j], name) != 0)) j++;
        matched[i] = NULL;
        if (j == n) {
            problem(msg, sizeof msg, &len, &count, "missing %s", name);
            continue;
        }
        used[j] = true;
        cn_tensor *t = tensors[j];
        char b1[160], b2[160];
        if (!t || !t->storage) {
            problem(msg, sizeof msg, &len, &count, "%s has no data", name);
        } else if (t->dtype != want->dtype || !same_shape(t, want)) {
            problem(msg, sizeof msg, &len, &count, "%s is %s, expected %s", name,
                    cn_shape_str(t, b1, sizeof b1), cn_shape_str(want, b2, sizeof b2));
        } else if (want->dtype == CN_U8) {
            /* A string entry ("algorithm", "kind"): same characters. */
            for (int64_t k = 0; k < want->shape[0]; k++)
                if (cn_load_i64(cn_t_ptr(t), CN_U8, k * t->strides[0]) !=
                    ((const uint8_t *)want->storage->data)[k]) {
                    problem(msg, sizeof msg, &len, &count, "%s is not \"%.*s\"", name,
                            (int)want->shape[0], (const char *)want->storage->data);
                    break;
                }
            matched[i] = t;
        } else {
            matched[i] = t;
        }
    }
    for (int j = 0; j < n; j++)
        if (!used[j]) {
            if (names[j]) problem(msg, sizeof msg, &len, &count, "unexpected %s", names[j]);
            else problem(msg, sizeof msg, &len, &count, "entry %d has no name", j);
        }
    free(used);
    if (count == 0) return CN_OK;
    return cn_failc(CN_EINVAL, "%s: %d problem%s: %s", fn, count, count == 1 ? "" : "s", msg);
}

double cn_state_f64(const cn_tensor *t) { return cn_load_f64(cn_t_ptr(t), (cn_dtype)t->dtype, 0); }
int64_t cn_state_i64(const cn_tensor *t) { return cn_load_i64(cn_t_ptr(t), (cn_dtype)t->dtype, 0); }
