/* Learning-rate schedules, as torch.optim.lr_scheduler (PyTorch 1.13).
 *
 * A step uses torch's chainable get_lr() form, which derives the next lr
 * from the optimiser's current one, with the same floating-point operations
 * in the same order, so the values are the same doubles as torch's. The
 * closed forms are used where torch uses them: when SequentialLR restarts a
 * schedule at a milestone (step(0)). */
#include "optim.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Python's math.pi. */
static const double CN_PI = 3.141592653589793;

typedef enum sched_kind { SK_STEP = 0, SK_EXP, SK_COSINE, SK_LINEAR, SK_SEQ } sched_kind;
static const char *const kind_names[] = {"step", "exponential", "cosine_annealing", "linear",
                                         "sequential"};

struct cn_lr_scheduler {
    sched_kind kind;
    cn_optimizer *opt;
    int64_t last_epoch, step_count;
    double base_lr, last_lr;
    double gamma, eta_min, start_factor, end_factor;
    int64_t step_size, t_max, total_iters;
    /* A sequence. */
    int nchild;
    cn_lr_scheduler **child;
    int64_t *milestones; /* nchild - 1 */
    bool owned;          /* a member of a sequence, freed by it */
    cn_state_list out;
};

/* torch's get_lr(): from the lr the optimiser has now. */
static double chain_lr(const cn_lr_scheduler *s) {
    double lr = cn_optimizer_get_lr(s->opt);
    int64_t e = s->last_epoch;
    switch (s->kind) {
    case SK_STEP:
        return e == 0 || e % s->step_size != 0 ? lr : lr * s->gamma;
    case SK_EXP:
        return e == 0 ? lr : lr * s->gamma;
    case SK_COSINE: {
        double t = (double)s->t_max, em = s->eta_min;
        if (e == 0) return lr;
        if (s->step_count == 1 && e > 0)
            return em + (s->base_lr - em) * (1 + cos((double)e * CN_PI / t)) / 2;
        if ((e - 1 - s->t_max) % (2 * s->t_max) == 0)
            return lr + (s->base_lr - em) * (1 - cos(CN_PI / t)) / 2;
        return (1 + cos(CN_PI * (double)e / t)) / (1 + cos(CN_PI * (double)(e - 1) / t)) *
                   (lr - em) +
               em;
    }
    case SK_LINEAR: {
        double sf = s->start_factor, ef = s->end_factor;
        if (e == 0) return lr * sf;
        if (e > s->total_iters) return lr;
        return lr * (1. + (ef - sf) / ((double)s->total_iters * sf + (double)(e - 1) * (ef - sf)));
    }
    default: return lr;
    }
}

/* torch's _get_closed_form_lr() (last_epoch >= 0). */
static double closed_lr(const cn_lr_scheduler *s) {
    int64_t e = s->last_epoch;
    switch (s->kind) {
    case SK_STEP: return s->base_lr * pow(s->gamma, (double)(e / s->step_size));
    case SK_EXP: return s->base_lr * pow(s->gamma, (double)e);
    case SK_COSINE:
        return s->eta_min +
               (s->base_lr - s->eta_min) * (1 + cos(CN_PI * (double)e / (double)s->t_max)) / 2;
    case SK_LINEAR: {
        int64_t k = e < s->total_iters ? e : s->total_iters;
        return s->base_lr * (s->start_factor + (s->end_factor - s->start_factor) * (double)k /
                                                   (double)s->total_iters);
    }
    default: return cn_optimizer_get_lr(s->opt);
    }
}

/* torch's step() / step(epoch) of a single schedule. */
static void single_step(cn_lr_scheduler *s, bool restart) {
    s->step_count++;
    double v;
    if (restart) {
        s->last_epoch = 0;
        v = closed_lr(s);
    } else {
        s->last_epoch++;
        v = chain_lr(s);
    }
    cn_opt_put_lr(s->opt, v);
    s->last_lr = v;
}

static void initial_step(cn_lr_scheduler *s) {
    s->step_count = 0;
    single_step(s, false);
}

static cn_lr_scheduler *sched_new(cn_optimizer *opt, sched_kind kind) {
    cn_lr_scheduler *s = calloc(1, sizeof *s);
    if (!s) return cn_fail("%s_lr: out of memory", kind_names[kind]);
    s->kind = kind;
    s->opt = opt;
    if (isnan(cn_opt_initial_lr(opt))) cn_opt_set_initial_lr(opt, cn_optimizer_get_lr(opt));
    s->base_lr = cn_opt_initial_lr(opt);
    s->last_epoch = -1;
    return s;
}

/* Parameter checks shared by the constructors and load_state. */
static int check_params(const char *fn, sched_kind kind, int64_t step_size, double gamma,
                        int64_t t_max, double eta_min, double sf, double ef, int64_t total) {
    switch (kind) {
    case SK_STEP:
        if (step_size < 1)
            return cn_failc(CN_EINVAL, "%s: step_size %" PRId64 " must be >= 1", fn, step_size);
        /* fall through */
    case SK_EXP:
        if (!(gamma >= 0) || !isfinite(gamma))
            return cn_failc(CN_EINVAL, "%s: gamma %g must be >= 0 and finite", fn, gamma);
        break;
    case SK_COSINE:
        if (t_max < 1) return cn_failc(CN_EINVAL, "%s: t_max %" PRId64 " must be >= 1", fn, t_max);
        if (!(eta_min >= 0) || !isfinite(eta_min))
            return cn_failc(CN_EINVAL, "%s: eta_min %g must be >= 0 and finite", fn, eta_min);
        break;
    case SK_LINEAR:
        if (!(sf > 0 && sf <= 1))
            return cn_failc(CN_EINVAL, "%s: start_factor %g must be in (0, 1]", fn, sf);
        if (!(ef >= 0 && ef <= 1))
            return cn_failc(CN_EINVAL, "%s: end_factor %g must be in [0, 1]", fn, ef);
        if (total < 1)
            return cn_failc(CN_EINVAL, "%s: total_iters %" PRId64 " must be >= 1", fn, total);
        break;
    default: break;
    }
    return CN_OK;
}

cn_lr_scheduler *cn_step_lr(cn_optimizer *opt, int64_t step_size, double gamma) {
    if (!opt) return NULL;
    if (check_params("step_lr", SK_STEP, step_size, gamma, 0, 0, 0, 0, 0) < 0) return NULL;
    cn_lr_scheduler *s = sched_new(opt, SK_STEP);
    if (!s) return NULL;
    s->step_size = step_size;
    s->gamma = gamma;
    initial_step(s);
    return s;
}

cn_lr_scheduler *cn_exponential_lr(cn_optimizer *opt, double gamma) {
    if (!opt) return NULL;
    if (check_params("exponential_lr", SK_EXP, 0, gamma, 0, 0, 0, 0, 0) < 0) return NULL;
    cn_lr_scheduler *s = sched_new(opt, SK_EXP);
    if (!s) return NULL;
    s->gamma = gamma;
    initial_step(s);
    return s;
}

cn_lr_scheduler *cn_cosine_annealing_lr(cn_optimizer *opt, int64_t t_max, double eta_min) {
    if (!opt) return NULL;
    if (check_params("cosine_annealing_lr", SK_COSINE, 0, 0, t_max, eta_min, 0, 0, 0) < 0)
        return NULL;
    cn_lr_scheduler *s = sched_new(opt, SK_COSINE);
    if (!s) return NULL;
    s->t_max = t_max;
    s->eta_min = eta_min;
    initial_step(s);
    return s;
}

cn_lr_scheduler *cn_linear_lr(cn_optimizer *opt, double start_factor, double end_factor,
                              int64_t total_iters) {
    if (!opt) return NULL;
    if (check_params("linear_lr", SK_LINEAR, 0, 0, 0, 0, start_factor, end_factor, total_iters) < 0)
        return NULL;
    cn_lr_scheduler *s = sched_new(opt, SK_LINEAR);
    if (!s) return NULL;
    s->start_factor = start_factor;
    s->end_factor = end_factor;
    s->total_iters = total_iters;
    initial_step(s);
    return s;
}

/* Can scheds[0..n) join a sequence over opt? */
static int check_members(const char *fn, cn_optimizer *opt, cn_lr_scheduler *const *scheds,
                         int n) {
    for (int i = 0; i < n; i++) {
        const cn_lr_scheduler *c = scheds[i];
        if (c->opt != opt)
            return cn_failc(CN_EINVAL, "%s: schedule %d belongs to another optimiser", fn, i);
        if (c->kind == SK_SEQ)
            return cn_failc(CN_EINVAL, "%s: schedule %d is a sequence; sequences do not nest", fn,
                            i);
        if (c->owned)
            return cn_failc(CN_EINVAL, "%s: schedule %d already belongs to a sequence", fn, i);
        for (int j = 0; j < i; j++)
            if (scheds[j] == c)
                return cn_failc(CN_EINVAL, "%s: schedules %d and %d are the same", fn, j, i);
    }
    return CN_OK;
}

cn_lr_scheduler *cn_sequential_lr(cn_optimizer *opt, cn_lr_scheduler *const *scheds, int n,
                                  const int64_t *milestones) {
    static const char *fn = "sequential_lr";
    if (!opt) return NULL;
    if (n < 1 || !scheds) return cn_fail("%s: no schedules given", fn);
    for (int i = 0; i < n; i++)
        if (!scheds[i]) return NULL;
    if (n > 1 && !milestones)
        return cn_fail("%s: %d schedules need %d milestones", fn, n, n - 1);
    for (int i = 0; i + 1 < n; i++)
        if (milestones[i] < 1 || (i > 0 && milestones[i] <= milestones[i - 1]))
            return cn_fail("%s: milestones must be >= 1 and increasing (milestone %d is %" PRId64
                           ")", fn, i, milestones[i]);
    if (check_members(fn, opt, scheds, n) < 0) return NULL;
    cn_lr_scheduler *s = calloc(1, sizeof *s);
    if (s) {
        s->child = malloc(sizeof *s->child * (size_t)n);
        s->milestones = malloc(sizeof *s->milestones * (size_t)(n > 1 ? n - 1 : 1));
    }
    if (!s || !s->child || !s->milestones) {
        if (s) {
            free(s->child);
            free(s->milestones);
        }
        free(s);
        return cn_fail("%s: out of memory", fn);
    }
    s->kind = SK_SEQ;
    s->opt = opt;
    s->nchild = n;
    memcpy(s->child, scheds, sizeof *s->child * (size_t)n);
    if (n > 1) memcpy(s->milestones, milestones, sizeof *s->milestones * (size_t)(n - 1));
    /* torch: back to the initial lr, undo the members' first steps, redo
     * the first member's. */
    s->last_epoch = 0;
    cn_opt_put_lr(opt, cn_opt_initial_lr(opt));
    for (int i = 0; i < n; i++) {
        s->child[i]->last_epoch--;
        s->child[i]->owned = true;
    }
    initial_step(s->child[0]);
    s->last_lr = s->child[0]->last_lr;
    return s;
}

cn_lr_scheduler *cn_warmup_lr(cn_optimizer *opt, int64_t warmup_steps, double start_factor,
                              cn_lr_scheduler *then) {
    if (!opt || !then) return NULL;
    if (warmup_steps < 1)
        return cn_fail("warmup_lr: warmup_steps %" PRId64 " must be >= 1", warmup_steps);
    if (check_members("warmup_lr", opt, &then, 1) < 0) return NULL;
    cn_lr_scheduler *w = cn_linear_lr(opt, start_factor, 1.0, warmup_steps);
    if (!w) return NULL;
    cn_lr_scheduler *pair[2] = {w, then};
    cn_lr_scheduler *s = cn_sequential_lr(opt, pair, 2, &warmup_steps);
    if (!s) cn_lr_scheduler_free(w);
    return s;
}

static void sched_destroy(cn_lr_scheduler *s) {
    for (int i = 0; i < s->nchild; i++) sched_destroy(s->child[i]);
    free(s->child);
    free(s->milestones);
    cn_state_list_free(&s->out);
    free(s);
}

void cn_lr_scheduler_free(cn_lr_scheduler *s) {
    if (s && !s->owned) sched_destroy(s); /* a member goes with its sequence */
}

int cn_lr_scheduler_step(cn_lr_scheduler *s) {
    if (!s) return CN_EINVAL;
    if (s->owned)
        return cn_failc(CN_ESTATE, "lr_scheduler_step: this schedule belongs to a sequence; step "
                                   "the sequence");
    if (s->kind != SK_SEQ) {
        single_step(s, false);
        return CN_OK;
    }
    s->last_epoch++;
    int idx = 0; /* bisect_right(milestones, last_epoch) */
    while (idx < s->nchild - 1 && s->milestones[idx] <= s->last_epoch) idx++;
    cn_lr_scheduler *c = s->child[idx];
    single_step(c, idx > 0 && s->milestones[idx - 1] == s->last_epoch);
    s->last_lr = c->last_lr;
    return CN_OK;
}

double cn_lr_scheduler_get_last_lr(const cn_lr_scheduler *s) { return s ? s->last_lr : NAN; }

int64_t cn_lr_scheduler_last_epoch(const cn_lr_scheduler *s) { return s ? s->last_epoch : -1; }

/* ---- state ---- */

static int build_state(const cn_lr_scheduler *s, cn_state_list *l, const char *prefix) {
    char name[128];
#define NM(x) (snprintf(name, sizeof name, "%s%s", prefix, x), name)
    int rc = cn_state_add_str(l, NM("kind"), kind_names[s->kind]);
    if (rc == CN_OK) rc = cn_state_add_i64(l, NM("last_epoch"), s->last_epoch);
    if (rc == CN_OK) rc = cn_state_add_f64(l, NM("last_lr"), s->last_lr);
    if (s->kind == SK_SEQ) {
        int64_t nm = s->nchild - 1;
        cn_tensor *m = cn_t_empty(CN_I64, 1, &nm);
        if (m && nm > 0) memcpy(m->storage->data, s->milestones, sizeof(int64_t) * (size_t)nm);
        if (rc == CN_OK) rc = cn_state_add(l, NM("milestones"), m);
        else cn_release(m);
        for (int i = 0; i < s->nchild && rc == CN_OK; i++) {
            char sub[96];
            snprintf(sub, sizeof sub, "%s%d.", prefix, i);
            rc = build_state(s->child[i], l, sub);
        }
        return rc;
    }
    if (rc == CN_OK) rc = cn_state_add_i64(l, NM("step_count"), s->step_count);
    if (rc == CN_OK) rc = cn_state_add_f64(l, NM("base_lr"), s->base_lr);
    switch (s->kind) {
    case SK_STEP:
        if (rc == CN_OK) rc = cn_state_add_i64(l, NM("step_size"), s->step_size);
        if (rc == CN_OK) rc = cn_state_add_f64(l, NM("gamma"), s->gamma);
        break;
    case SK_EXP:
        if (rc == CN_OK) rc = cn_state_add_f64(l, NM("gamma"), s->gamma);
        break;
    case SK_COSINE:
        if (rc == CN_OK) rc = cn_state_add_i64(l, NM("t_max"), s->t_max);
        if (rc == CN_OK) rc = cn_state_add_f64(l, NM("eta_min"), s->eta_min);
        break;
    case SK_LINEAR:
        if (rc == CN_OK) rc = cn_state_add_f64(l, NM("start_factor"), s->start_factor);
        if (rc == CN_OK) rc = cn_state_add_f64(l, NM("end_factor"), s->end_factor);
        if (rc == CN_OK) rc = cn_state_add_i64(l, NM("total_iters"), s->total_iters);
        break;
    default: break;
    }
    return rc;
#undef NM
}

/* Read the matched entries in build_state's order (m[*e] onward): check
 * them, and store them when commit is set. */
static int apply_state(cn_lr_scheduler *s, cn_tensor *const *m, int *e, bool commit,
                       const char *fn) {
    int k = *e + 1; /* past "kind" */
    int64_t last_epoch = cn_state_i64(m[k++]);
    double last_lr = cn_state_f64(m[k++]);
    /* -1: a member of a sequence that has not started yet. */
    if (last_epoch < -1)
        return cn_failc(CN_EINVAL, "%s: last_epoch %" PRId64 " is below -1", fn, last_epoch);
    if (s->kind == SK_SEQ) {
        const cn_tensor *mt = m[k++];
        int64_t ms[64];
        int nm = s->nchild - 1;
        if (nm > 64) return cn_failc(CN_EUNSUPPORTED, "%s: more than 65 schedules", fn);
        for (int i = 0; i < nm; i++) {
            ms[i] = cn_load_i64(cn_t_ptr(mt), CN_I64, i * mt->strides[0]);
            if (ms[i] < 1 || (i > 0 && ms[i] <= ms[i - 1]))
                return cn_failc(CN_EINVAL, "%s: milestones must be >= 1 and increasing", fn);
        }
        for (int i = 0; i < s->nchild; i++) {
            int rc = apply_state(s->child[i], m, &k, commit, fn);
            if (rc < 0) return rc;
        }
        if (commit) {
            s->last_epoch = last_epoch;
            s->last_lr = last_lr;
            memcpy(s->milestones, ms, sizeof(int64_t) * (size_t)nm);
        }
        *e = k;
        return CN_OK;
    }
    int64_t step_count = cn_state_i64(m[k++]);
    double base_lr = cn_state_f64(m[k++]);
    int64_t step_size = s->step_size, t_max = s->t_max, total = s->total_iters;
    double gamma = s->gamma, eta_min = s->eta_min, sf = s->start_factor, ef = s->end_factor;
    switch (s->kind) {
    case SK_STEP:
        step_size = cn_state_i64(m[k++]);
        gamma = cn_state_f64(m[k++]);
        break;
    case SK_EXP: gamma = cn_state_f64(m[k++]); break;
    case SK_COSINE:
        t_max = cn_state_i64(m[k++]);
        eta_min = cn_state_f64(m[k++]);
        break;
    case SK_LINEAR:
        sf = cn_state_f64(m[k++]);
        ef = cn_state_f64(m[k++]);
        total = cn_state_i64(m[k++]);
        break;
    default: break;
    }
    int rc = check_params(fn, s->kind, step_size, gamma, t_max, eta_min, sf, ef, total);
    if (rc < 0) return rc;
    if (step_count < 0)
        return cn_failc(CN_EINVAL, "%s: step_count %" PRId64 " is negative", fn, step_count);
    if (commit) {
        s->last_epoch = last_epoch;
        s->last_lr = last_lr;
        s->step_count = step_count;
        s->base_lr = base_lr;
        s->step_size = step_size;
        s->gamma = gamma;
        s->t_max = t_max;
        s->eta_min = eta_min;
        s->start_factor = sf;
        s->end_factor = ef;
        s->total_iters = total;
    }
    *e = k;
    return CN_OK;
}

int cn_lr_scheduler_state(cn_lr_scheduler *s, cn_tensor ***tensors, const char ***names) {
    if (tensors) *tensors = NULL;
    if (names) *names = NULL;
    if (!s) return CN_EINVAL;
    cn_state_list l = {0};
    if (build_state(s, &l, "") < 0) {
        cn_state_list_free(&l);
        return cn_failc(CN_ENOMEM, "lr_scheduler_state: out of memory");
    }
    return cn_state_publish(&l, &s->out, tensors, names);
}

int cn_lr_scheduler_load_state(cn_lr_scheduler *s, const char *const *names,
                               cn_tensor *const *tensors, int n) {
    static const char *fn = "lr_scheduler_load_state";
    if (!s) return CN_EINVAL;
    if (n < 0 || (n > 0 && (!names || !tensors)))
        return cn_failc(CN_EINVAL, "%s: bad entry list (n = %d)", fn, n);
    cn_state_list l = {0};
    cn_tensor **m = NULL;
    int rc = build_state(s, &l, "");
    if (rc < 0 || !(m = calloc((size_t)l.n, sizeof *m))) {
        rc = cn_failc(CN_ENOMEM, "%s: out of memory", fn);
        goto out;
    }
    if ((rc = cn_state_match(fn, &l, names, tensors, n, m)) < 0) goto out;
    int e = 0;
    if ((rc = apply_state(s, m, &e, false, fn)) < 0) goto out;
    e = 0;
    rc = apply_state(s, m, &e, true, fn);
out:
    free(m);
    cn_state_list_free(&l);
    return rc;
}
