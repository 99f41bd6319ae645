/* Learning-rate schedules: the lr after creation and after each step
 * against torch.optim.lr_scheduler's (the fixture of
 * tests/parity/torch_optim.py, same schedules by name), the closed forms in
 * f64, state save / load continuing bit for bit, and errors. */
#include "optim_fixture.h"

typedef cn_lr_scheduler *(*make_fn)(cn_optimizer *o);

static cn_lr_scheduler *m_step(cn_optimizer *o) { return cn_step_lr(o, 3, 0.5); }
static cn_lr_scheduler *m_exp(cn_optimizer *o) { return cn_exponential_lr(o, 0.9); }
static cn_lr_scheduler *m_cosine(cn_optimizer *o) { return cn_cosine_annealing_lr(o, 7, 0.01); }
static cn_lr_scheduler *m_linear(cn_optimizer *o) { return cn_linear_lr(o, 0.25, 1.0, 4); }
static cn_lr_scheduler *m_linear_down(cn_optimizer *o) { return cn_linear_lr(o, 1.0, 0.1, 6); }
static cn_lr_scheduler *m_warmup_cosine(cn_optimizer *o) {
    return cn_warmup_lr(o, 5, 0.1, cn_cosine_annealing_lr(o, 12, 0.001));
}
static cn_lr_scheduler *m_three(cn_optimizer *o) {
    cn_lr_scheduler *s[3] = {cn_linear_lr(o, 0.5, 1.0, 3), cn_step_lr(o, 2, 0.7),
                             cn_exponential_lr(o, 0.95)};
    return cn_sequential_lr(o, s, 3, (int64_t[]){3, 8});
}

static const struct {
    const char *name;
    make_fn make;
} SCHEDS[] = {
    {"step", m_step},       {"exponential", m_exp},           {"cosine", m_cosine},
    {"linear", m_linear},   {"linear_down", m_linear_down},   {"warmup_cosine", m_warmup_cosine},
    {"three", m_three},
};
#define NSCHEDS ((int)(sizeof SCHEDS / sizeof SCHEDS[0]))

static cn_optimizer *new_opt(cn_tensor **p) {
    *p = cn_zeros(CN_F32, CN_SHAPE(1));
    cn_set_requires_grad(*p, true);
    return cn_sgd(p, 1, &(cn_sgd_opts){.lr = 0.1});
}

static void test_torch_sequences(void) {
    if (!fx_load()) return;
    for (int i = 0; i < NSCHEDS; i++) {
        const fx_lrs *want = fx_sched_find(SCHEDS[i].name);
        CHECK_MSG(want != NULL, "the fixture has no schedule %s", SCHEDS[i].name);
        if (!want) continue;
        cn_tensor *p;
        cn_optimizer *opt = new_opt(&p);
        cn_lr_scheduler *s = SCHEDS[i].make(opt);
        CHECK_MSG(s != NULL, "%s: %s", SCHEDS[i].name, cn_last_error());
        if (!s) continue;
        int exact = 0;
        for (int k = 0; k < want->n; k++) {
            if (k > 0) CHECK_EQ_INT(cn_lr_scheduler_step(s), 0);
            double lr = cn_optimizer_get_lr(opt);
            CHECK_MSG(th_close(lr, want->v[k], 1e-13, 0), "%s: step %d: lr %.17g, torch %.17g",
                      SCHEDS[i].name, k, lr, want->v[k]);
            CHECK_CLOSE(cn_lr_scheduler_get_last_lr(s), lr, 0, 0);
            exact += lr == want->v[k];
        }
        /* The chainable forms are torch's own operations: the same doubles. */
        CHECK_MSG(exact == want->n, "%s: %d of %d values are not torch's bits", SCHEDS[i].name,
                  want->n - exact, want->n);
        CHECK_EQ_INT(cn_lr_scheduler_last_epoch(s), want->n - 1);
        cn_lr_scheduler_free(s);
        cn_optimizer_free(opt);
    }
}

/* Against the closed forms, computed here in f64. */
static void test_closed_forms(void) {
    const double pi = 3.14159265358979323846, base = 0.1;
    cn_tensor *p;
    cn_optimizer *opt = new_opt(&p);
    cn_lr_scheduler *cos_s = cn_cosine_annealing_lr(opt, 10, 0.002);
    for (int t = 0; t <= 10; t++) {
        if (t) cn_lr_scheduler_step(cos_s);
        CHECK_CLOSE(cn_optimizer_get_lr(opt), 0.002 + (base - 0.002) * (1 + cos(pi * t / 10)) / 2,
                    1e-12, 1e-15);
    }
    cn_lr_scheduler_free(cos_s);
    cn_optimizer_free(opt);

    opt = new_opt(&p);
    cn_lr_scheduler *st = cn_step_lr(opt, 4, 0.3);
    for (int t = 0; t <= 13; t++) {
        if (t) cn_lr_scheduler_step(st);
        CHECK_CLOSE(cn_optimizer_get_lr(opt), base * pow(0.3, t / 4), 1e-13, 0);
    }
    cn_lr_scheduler_free(st);
    cn_optimizer_free(opt);

    /* Warm-up: linear from 0.2 base to base over 5 steps, then constant
     * (exponential with gamma 1 after the milestone). */
    opt = new_opt(&p);
    cn_lr_scheduler *w = cn_warmup_lr(opt, 5, 0.2, cn_exponential_lr(opt, 1.0));
    CHECK(w != NULL);
    for (int t = 0; t <= 8; t++) {
        if (t) cn_lr_scheduler_step(w);
        double f = t < 5 ? 0.2 + 0.8 * t / 5 : 1.0;
        CHECK_CLOSE(cn_optimizer_get_lr(opt), base * f, 1e-13, 0);
    }
    cn_lr_scheduler_free(w);
    cn_optimizer_free(opt);
}

/* Save after k steps; a new optimiser and schedule, both loaded; the lrs
 * that follow are the uninterrupted ones, bit for bit. */
static void test_state_resume(void) {
    for (int i = 0; i < NSCHEDS; i++) {
        cn_scope_begin();
        cn_tensor *pa, *pb, *pc;
        cn_optimizer *oa = new_opt(&pa), *ob = new_opt(&pb), *oc = new_opt(&pc);
        cn_lr_scheduler *sa = SCHEDS[i].make(oa), *sb = SCHEDS[i].make(ob);
        double want[40];
        for (int k = 0; k < 30; k++) {
            cn_lr_scheduler_step(sa);
            want[k] = cn_optimizer_get_lr(oa);
        }
        for (int k = 0; k < 7; k++) cn_lr_scheduler_step(sb);
        cn_tensor **ot, **st;
        const char **on, **sn;
        int no = cn_optimizer_state(ob, &ot, &on), ns = cn_lr_scheduler_state(sb, &st, &sn);
        CHECK(no > 0 && ns > 0);
        cn_lr_scheduler *sc = SCHEDS[i].make(oc);
        CHECK_MSG(cn_optimizer_load_state(oc, on, ot, no) == 0, "%s: %s", SCHEDS[i].name,
                  cn_last_error());
        CHECK_MSG(cn_lr_scheduler_load_state(sc, sn, st, ns) == 0, "%s: %s", SCHEDS[i].name,
                  cn_last_error());
        CHECK_EQ_INT(cn_lr_scheduler_last_epoch(sc), 7);
        CHECK_CLOSE(cn_lr_scheduler_get_last_lr(sc), want[6], 0, 0);
        bool same = true;
        for (int k = 7; k < 30; k++) {
            cn_lr_scheduler_step(sc);
            same &= cn_optimizer_get_lr(oc) == want[k];
        }
        CHECK_MSG(same, "%s: resumed schedule differs", SCHEDS[i].name);
        /* A state of another kind of schedule is refused, naming what differs. */
        if (i > 0 && i != 4) { /* 4 and 3 are both linear */
            cn_tensor *pd;
            cn_optimizer *od = new_opt(&pd);
            cn_lr_scheduler *sd = SCHEDS[i - 1].make(od);
            CHECK(cn_lr_scheduler_load_state(sd, sn, st, ns) < 0);
            CHECK_MSG(strstr(cn_last_error(), "lr_scheduler_load_state: ") != NULL,
                      "message: %s", cn_last_error());
            cn_lr_scheduler_free(sd);
            cn_optimizer_free(od);
        }
        free(ot);
        free(on);
        free(st);
        free(sn);
        cn_lr_scheduler_free(sa);
        cn_lr_scheduler_free(sb);
        cn_lr_scheduler_free(sc);
        cn_optimizer_free(oa);
        cn_optimizer_free(ob);
        cn_optimizer_free(oc);
        cn_scope_end();
    }
}

static void test_state_names(void) {
    cn_tensor *p;
    cn_optimizer *opt = new_opt(&p);
    cn_lr_scheduler *s = m_warmup_cosine(opt);
    cn_tensor **t;
    const char **n;
    int k = cn_lr_scheduler_state(s, &t, &n);
    /* kind, last_epoch, last_lr, milestones; linear: 8; cosine: 7 */
    CHECK_EQ_INT(k, 19);
    bool seen_cos = false, seen_ms = false;
    for (int i = 0; i < k; i++) {
        if (!strcmp(n[i], "1.t_max")) seen_cos = cn_item(t[i]) == 12;
        if (!strcmp(n[i], "milestones")) seen_ms = cn_numel(t[i]) == 1 && th_at(t[i], 0) == 5;
    }
    CHECK(seen_cos && seen_ms);
    free(t);
    free(n);
    cn_lr_scheduler_free(s);
    cn_optimizer_free(opt);
}

static void test_errors(void) {
    cn_tensor *p, *p2;
    cn_optimizer *opt = new_opt(&p), *other = new_opt(&p2);
    CHECK_ERROR(cn_step_lr(opt, 0, 0.5), "step_size 0 must be >= 1");
    CHECK_ERROR(cn_exponential_lr(opt, -1), "gamma -1");
    CHECK_ERROR(cn_cosine_annealing_lr(opt, 0, 0), "t_max 0");
    CHECK_ERROR(cn_linear_lr(opt, 0, 1, 5), "start_factor 0 must be in (0, 1]");
    CHECK_ERROR(cn_linear_lr(opt, 0.5, 1.5, 5), "end_factor 1.5");
    CHECK(cn_step_lr(NULL, 1, 1) == NULL);
    cn_lr_scheduler *a = cn_step_lr(opt, 2, 0.5), *b = cn_exponential_lr(other, 0.9);
    CHECK_ERROR(cn_warmup_lr(opt, 0, 0.1, a), "warmup_steps 0 must be >= 1");
    CHECK_ERROR(cn_warmup_lr(opt, 3, 0.1, b), "belongs to another optimiser");
    cn_lr_scheduler *ab[2] = {a, b};
    CHECK_ERROR(cn_sequential_lr(opt, ab, 2, (int64_t[]){3}),
                "schedule 1 belongs to another optimiser");
    cn_lr_scheduler *c = cn_exponential_lr(opt, 0.9);
    cn_lr_scheduler *ac[2] = {a, c};
    CHECK_ERROR(cn_sequential_lr(opt, ac, 2, (int64_t[]){0}), "milestones must be >= 1");
    CHECK_ERROR(cn_sequential_lr(opt, ac, 2, NULL), "2 schedules need 1 milestones");
    cn_lr_scheduler *seq = cn_sequential_lr(opt, ac, 2, (int64_t[]){3});
    CHECK(seq != NULL);
    CHECK_ERROR(cn_sequential_lr(opt, ac, 2, (int64_t[]){3}), "already belongs to a sequence");
    CHECK_ERROR(cn_sequential_lr(opt, &seq, 1, NULL), "sequences do not nest");
    CHECK_STATUS_ERROR(cn_lr_scheduler_step(a), "belongs to a sequence");
    cn_lr_scheduler_free(a); /* a member: freed with its sequence, not here */
    CHECK_EQ_INT(cn_lr_scheduler_step(seq), 0);
    cn_lr_scheduler_free(seq);
    cn_lr_scheduler_free(b);
    cn_optimizer_free(opt);
    cn_optimizer_free(other);
}

int main(void) {
    RUN(test_torch_sequences);
    RUN(test_closed_forms);
    RUN(test_state_resume);
    RUN(test_state_names);
    RUN(test_errors);
    return th_summary();
}
