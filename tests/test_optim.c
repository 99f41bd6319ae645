/* Optimisers: parameter trajectories against torch.optim (the fixture of
 * tests/parity/torch_optim.py, same configs by name) for every algorithm
 * and option, through each path a gradient can take (backward into the flat
 * buffer, a gradient set by the user, a parameter that stays outside the
 * flat buffer); the flat layout itself; zero_grad keeping its buffers;
 * state save / load giving a bit-identical continuation (also through a
 * safetensors file); 1 and 2 threads giving the same bits; errors. */
#include "optim_fixture.h"

#include <unistd.h>

typedef enum { SGD, ADAM, ADAMW, RMSPROP, ADAGRAD } alg_t;

typedef struct config {
    const char *name;
    alg_t alg;
    cn_sgd_opts sgd;
    cn_adam_opts adam;
    cn_rmsprop_opts rms;
    cn_adagrad_opts ada;
    cn_dtype dp, dq;
    int skip[3]; /* steps (1-based) at which q has no gradient; 0 ends */
} config;

/* The same list as torch_optim.py's OPTIM. */
static const config CONFIGS[] = {
    {"sgd", SGD, .sgd = {.lr = 0.05}},
    {"sgd_momentum", SGD, .sgd = {.lr = 0.05, .momentum = 0.9}},
    {"sgd_dampening_wd", SGD,
     .sgd = {.lr = 0.05, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.1}},
    {"sgd_nesterov_wd", SGD,
     .sgd = {.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.05}},
    {"sgd_maximize", SGD, .sgd = {.lr = 0.01, .momentum = 0.5, .maximize = true}},
    {"sgd_momentum_skip", SGD, .sgd = {.lr = 0.05, .momentum = 0.9}, .skip = {1, 4, 5}},
    {"adam", ADAM, .adam = {.lr = 0.05}},
    {"adam_wd_amsgrad", ADAM, .adam = {.lr = 0.05, .weight_decay = 0.1, .amsgrad = true}},
    {"adam_betas_eps_maximize", ADAM,
     .adam = {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .maximize = true}},
    {"adam_skip", ADAM, .adam = {.lr = 0.05}, .skip = {3, 4}},
    {"adam_f64", ADAM, .adam = {.lr = 0.05, .amsgrad = true}, .dp = CN_F64, .dq = CN_F64},
    {"adam_mixed", ADAM, .adam = {.lr = 0.05, .weight_decay = 0.05}, .dp = CN_F32, .dq = CN_F64,
     .skip = {2}},
    {"adamw", ADAMW, .adam = {.lr = 0.05}},
    {"adamw_wd_amsgrad", ADAMW, .adam = {.lr = 0.05, .weight_decay = 0.2, .amsgrad = true}},
    {"rmsprop", RMSPROP, .rms = {.lr = 0.01}},
    {"rmsprop_momentum", RMSPROP, .rms = {.lr = 0.01, .momentum = 0.5}},
    {"rmsprop_centered", RMSPROP, .rms = {.lr = 0.01, .alpha = 0.9, .centered = true}},
    {"rmsprop_all", RMSPROP,
     .rms = {.lr = 0.01, .momentum = 0.9, .centered = true, .weight_decay = 0.1, .maximize = true}},
    {"rmsprop_mixed", RMSPROP, .rms = {.lr = 0.01, .centered = true, .momentum = 0.3},
     .dp = CN_F64, .dq = CN_F32},
    {"adagrad", ADAGRAD, .ada = {.lr = 0.1}},
    {"adagrad_all", ADAGRAD,
     .ada = {.lr = 0.1, .lr_decay = 0.05, .weight_decay = 0.1, .initial_accumulator_value = 0.2}},
    {"adagrad_eps_maximize_skip", ADAGRAD, .ada = {.lr = 0.1, .eps = 1e-3, .maximize = true},
     .skip = {2, 7}},
};
#define NCONFIGS ((int)(sizeof CONFIGS / sizeof CONFIGS[0]))

static cn_optimizer *make_opt(const config *c, cn_tensor **params, int n) {
    switch (c->alg) {
    case SGD: return cn_sgd(params, n, &c->sgd);
    case ADAM: return cn_adam(params, n, &c->adam);
    case ADAMW: return cn_adamw(params, n, &c->adam);
    case RMSPROP: return cn_rmsprop(params, n, &c->rms);
    default: return cn_adagrad(params, n, &c->ada);
    }
}

/* ---- the problem: loss = sum((A p - b)^2) + sum(q^3) / 3 ---- */

typedef struct problem {
    cn_tensor *a, *b, *p, *q;
} problem;

enum {
    MODE_BACKWARD, /* backward accumulates into the optimiser's gradient views */
    MODE_SET_GRAD, /* gradients from cn_grad, installed with cn_set_grad */
    MODE_VIEW,     /* p is a strided view: it stays outside the flat buffer */
    NMODES
};
static const char *mode_names[NMODES] = {"backward", "set_grad", "view"};

/* The starting values of torch_optim.py (owned by the current scope). */
static void problem_init(problem *pr, cn_dtype dp, cn_dtype dq, bool p_view) {
    double a[20], b[5], p[4], q[6];
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++) a[i * 4 + j] = 0.5 * sin(1.0 + 4 * i + j);
    for (int i = 0; i < 5; i++) b[i] = 0.3 * cos(2.0 + i);
    for (int j = 0; j < 4; j++) p[j] = 0.4 * sin(0.5 + 1.3 * j);
    for (int k = 0; k < 6; k++) q[k] = 0.8 * cos(0.7 + 0.9 * k);
    pr->a = cn_cast(cn_from_data(CN_F64, CN_SHAPE(5, 4), a), dp);
    pr->b = cn_cast(cn_from_data(CN_F64, CN_SHAPE(5), b), dp);
    if (p_view) {
        /* Every other element of a bigger tensor that stays alive. */
        cn_tensor *base = cn_zeros(dp, CN_SHAPE(8));
        pr->p = cn_slice(base, 0, 1, CN_END, 2);
        cn_copy_(pr->p, cn_from_data(CN_F64, CN_SHAPE(4), p));
    } else {
        pr->p = cn_cast(cn_from_data(CN_F64, CN_SHAPE(4), p), dp);
    }
    pr->q = cn_cast(cn_from_data(CN_F64, CN_SHAPE(2, 3), q), dq);
    cn_set_requires_grad(pr->p, true);
    cn_set_requires_grad(pr->q, true);
}

static cn_tensor *problem_loss(const problem *pr) {
    cn_tensor *r = cn_sub(cn_matmul(pr->a, pr->p), pr->b);
    cn_tensor *l1 = cn_sum(cn_pow_scalar(r, 2), NULL, 0, false);
    cn_tensor *l2 = cn_div_scalar(cn_sum(cn_pow_scalar(pr->q, 3), NULL, 0, false), 3);
    return cn_add(l1, l2);
}

static void read_values(const problem *pr, double *out) {
    for (int k = 0; k < 4; k++) out[k] = th_at(pr->p, k);
    for (int k = 0; k < 6; k++) out[4 + k] = th_at(pr->q, k);
}

static bool skipped(const config *c, int step) {
    for (int i = 0; i < 3 && c->skip[i]; i++)
        if (c->skip[i] == step) return true;
    return false;
}

/* One training step of the problem: gradients by the mode, q's dropped on
 * skipped steps, then the update. */
static int train_step(cn_optimizer *opt, const problem *pr, int mode, bool skip_q) {
    int rc = cn_optimizer_zero_grad(opt);
    cn_scope_begin();
    cn_tensor *loss = problem_loss(pr);
    if (mode == MODE_SET_GRAD) {
        cn_tensor *in[2] = {pr->p, pr->q}, *g[2];
        if (rc == 0) rc = cn_grad(&loss, NULL, 1, in, 2, g, 0);
        if (rc == 0) rc = cn_set_grad(pr->p, g[0]);
        if (rc == 0) rc = cn_set_grad(pr->q, g[1]);
    } else if (rc == 0) {
        rc = cn_backward(loss, NULL);
    }
    cn_scope_end();
    if (skip_q) cn_zero_grad(pr->q);
    return rc == 0 ? cn_optimizer_step(opt) : rc;
}

static void test_torch_parity(void) {
    if (!fx_load()) return;
    for (int c = 0; c < NCONFIGS; c++) {
        const config *cf = &CONFIGS[c];
        const fx_traj *want = fx_traj_find(cf->name);
        CHECK_MSG(want != NULL, "the fixture has no trajectory for %s", cf->name);
        if (!want) continue;
        for (int mode = 0; mode < NMODES; mode++) {
            cn_scope_begin();
            problem pr;
            problem_init(&pr, cf->dp, cf->dq, mode == MODE_VIEW);
            cn_tensor *params[2] = {pr.p, pr.q};
            cn_optimizer *opt = make_opt(cf, params, 2);
            CHECK_MSG(opt != NULL, "%s: %s", cf->name, cn_last_error());
            if (opt) {
                /* Same dtype and owned: flat; a view or a second dtype: not. */
                bool flat = cf->dp == cf->dq && mode != MODE_VIEW;
                CHECK_MSG(cn_optimizer_is_flat(opt) == flat, "%s/%s: is_flat %d", cf->name,
                          mode_names[mode], cn_optimizer_is_flat(opt));
                double worst = 0;
                int worst_step = 0, worst_k = 0;
                for (int s = 1; s <= FX_STEPS; s++) {
                    int rc = train_step(opt, &pr, mode, skipped(cf, s));
                    CHECK_MSG(rc == 0, "%s/%s step %d: %s", cf->name, mode_names[mode], s,
                              cn_last_error());
                    double got[FX_VALUES];
                    read_values(&pr, got);
                    for (int k = 0; k < FX_VALUES; k++) {
                        double w = want->v[s - 1][k], e = fabs(got[k] - w) / (1 + fabs(w));
                        if (!(e <= worst)) {
                            worst = e;
                            worst_step = s;
                            worst_k = k;
                        }
                    }
                }
                /* f32 lands within a few 1e-7 of torch; f64 within 1e-15. */
                double tol = cf->dp == CN_F64 && cf->dq == CN_F64 ? 1e-12 : 1e-5;
                CHECK_MSG(worst <= tol, "%s/%s: step %d value %d differs from torch by %.3g "
                          "(relative to 1 + |value|)", cf->name, mode_names[mode], worst_step,
                          worst_k, worst);
                cn_optimizer_free(opt);
            }
            cn_scope_end();
        }
    }
}

/* ---- the layout ---- */

static void test_flat_layout(void) {
    cn_tensor *w = cn_randn(CN_F32, CN_SHAPE(3, 5));
    cn_tensor *b = cn_randn(CN_F32, CN_SHAPE(5));
    cn_tensor *c = cn_randn(CN_F32, CN_SHAPE(2, 2, 2));
    cn_tensor *params[3] = {w, b, c};
    float before[15 + 5 + 8];
    cn_copy_to_buffer(w, CN_F32, before, 15 * sizeof(float));
    cn_copy_to_buffer(b, CN_F32, before + 15, 5 * sizeof(float));
    cn_copy_to_buffer(c, CN_F32, before + 20, 8 * sizeof(float));
    for (int i = 0; i < 3; i++) cn_set_requires_grad(params[i], true);
    /* b already has a gradient: it must survive the move. */
    cn_set_grad(b, cn_full(CN_F32, CN_SHAPE(5), 7.0));
    cn_optimizer *opt = cn_adam(params, 3, NULL);
    CHECK(opt != NULL);
    if (!opt) return;
    CHECK(cn_optimizer_is_flat(opt));
    CHECK_EQ_INT(cn_optimizer_num_params(opt), 3);
    cn_tensor *fp = cn_optimizer_flat_params(opt), *fg = cn_optimizer_flat_grads(opt);
    CHECK_SHAPE(fp, 28);
    CHECK_SHAPE(fg, 28);
    const float *base = cn_data(fp), *gbase = cn_data(fg);
    int64_t off[3] = {0, 15, 20};
    for (int i = 0; i < 3; i++) {
        CHECK(cn_shares_storage(params[i], fp));
        CHECK(cn_is_contiguous(params[i]));
        CHECK(cn_data(params[i]) == base + off[i]);
        CHECK(cn_get_grad(params[i]) != NULL && cn_data(cn_get_grad(params[i])) == gbase + off[i]);
    }
    CHECK_SHAPE(w, 3, 5);
    CHECK_SHAPE(c, 2, 2, 2);
    bool same = true, zero = true;
    for (int k = 0; k < 28; k++) same &= base[k] == before[k];
    CHECK_MSG(same, "the parameters' values changed when they were moved");
    for (int k = 0; k < 28; k++) zero &= gbase[k] == (k >= 15 && k < 20 ? 7.0f : 0.0f);
    CHECK_MSG(zero, "the gradient buffer should hold zeros and b's gradient");
    /* Ops on the moved parameters see the same values. */
    cn_tensor *w_before = cn_from_data(CN_F32, CN_SHAPE(3, 5), before);
    CHECK(cn_equal(w, w_before));
    /* backward lands in the flat buffer. */
    cn_tensor *loss = cn_sum(cn_mul(w, w), NULL, 0, false);
    CHECK_EQ_INT(cn_backward(loss, NULL), 0);
    CHECK(cn_data(cn_get_grad(w)) == gbase);
    CHECK_CLOSE(gbase[4], 2.0 * before[4], 1e-6, 0);
    /* A second optimiser over the same parameters finds them in place. */
    cn_optimizer_free(opt);
    cn_optimizer *opt2 = cn_sgd(params, 3, &(cn_sgd_opts){.lr = 0.1});
    CHECK(opt2 && cn_optimizer_is_flat(opt2));
    CHECK(cn_data(w) == base && cn_data(c) == base + 20);
    /* ...its gradients still include what backward wrote. */
    CHECK_CLOSE(cn_get(cn_get_grad(w), (int64_t[]){0, 4}), 2.0 * before[4], 1e-6, 0);
    cn_optimizer_free(opt2);
    /* A subset that tiles its part of the storage in order is used there
     * too; one that does not (w and c, with b between them) shares the
     * storage with b, so it is not moved: each is updated where it is. */
    cn_tensor *sub[2] = {b, c};
    cn_optimizer *opt3 = cn_sgd(sub, 2, &(cn_sgd_opts){.lr = 0.1});
    CHECK(opt3 != NULL);
    CHECK(opt3 && cn_optimizer_is_flat(opt3));
    cn_optimizer_free(opt3);
    cn_tensor *sub2[2] = {w, c};
    cn_optimizer *opt4 = cn_sgd(sub2, 2, &(cn_sgd_opts){.lr = 0.1});
    CHECK(opt4 != NULL);
    CHECK(opt4 && !cn_optimizer_is_flat(opt4));
    CHECK_ERROR(cn_optimizer_flat_params(opt4), "not in one flat buffer");
    if (opt4) {
        float w00 = base[0], g00 = (float)th_at(cn_get_grad(w), 0);
        CHECK_EQ_INT(cn_optimizer_step(opt4), 0);
        CHECK(cn_data(w) == base); /* updated in place */
        CHECK_CLOSE(base[0], w00 - 0.1f * g00, 1e-6, 1e-7);
    }
    cn_optimizer_free(opt4);
}

static void test_zero_grad_keeps_buffers(void) {
    cn_tensor *p = cn_randn(CN_F32, CN_SHAPE(4, 3));
    cn_set_requires_grad(p, true);
    cn_tensor *frozen = cn_randn(CN_F32, CN_SHAPE(3));
    cn_tensor *params[2] = {p, frozen};
    cn_optimizer *opt = cn_sgd(params, 2, &(cn_sgd_opts){.lr = 0.5, .weight_decay = 0.1});
    CHECK(opt != NULL);
    if (!opt) return;
    cn_tensor *g0 = cn_get_grad(p);
    void *d0 = cn_data(g0);
    CHECK(cn_get_grad(frozen) == NULL); /* it cannot get a gradient */
    for (int it = 0; it < 3; it++) {
        CHECK_EQ_INT(cn_optimizer_zero_grad(opt), 0);
        CHECK(cn_get_grad(p) == g0 && cn_data(cn_get_grad(p)) == d0);
        CHECK_CLOSE(th_at(cn_get_grad(p), 5), 0, 0, 0);
        CHECK_EQ_INT(cn_backward(cn_sum(cn_mul_scalar(p, 3), NULL, 0, false), NULL), 0);
        CHECK(cn_data(cn_get_grad(p)) == d0);
        CHECK_CLOSE(th_at(cn_get_grad(p), 5), 3, 0, 0);
        double before = th_at(frozen, 1);
        CHECK_EQ_INT(cn_optimizer_step(opt), 0);
        CHECK_CLOSE(th_at(frozen, 1), before, 0, 0); /* no gradient: no weight decay */
    }
    /* The gradient cleared (set to none) and rebuilt by backward: read,
     * then the view comes back with zero_grad. */
    cn_zero_grad(p);
    CHECK_EQ_INT(cn_backward(cn_sum(cn_mul_scalar(p, 2), NULL, 0, false), NULL), 0);
    CHECK(cn_data(cn_get_grad(p)) != d0);
    double v = th_at(p, 0);
    CHECK_EQ_INT(cn_optimizer_step(opt), 0);
    CHECK_CLOSE(th_at(p, 0), v - 0.5 * (2 + 0.1 * v), 1e-6, 1e-6);
    CHECK_EQ_INT(cn_optimizer_zero_grad(opt), 0);
    CHECK(cn_get_grad(p) == g0 && cn_data(cn_get_grad(p)) == d0);
    cn_optimizer_free(opt);
}

/* ---- state: save, load, continue ---- */

static void copy_values(cn_tensor *dst, cn_tensor *src) {
    cn_no_grad_begin();
    cn_copy_(dst, src);
    cn_no_grad_end();
}

static void test_state_resume(void) {
    /* sgd_momentum_skip, adam_wd_amsgrad, adam_skip, adam_f64, adam_mixed,
     * adamw_wd_amsgrad, rmsprop_all, rmsprop_mixed, adagrad_eps_maximize_skip */
    static const int picks[] = {5, 7, 9, 10, 11, 13, 17, 18, 21};
    char path[64];
    snprintf(path, sizeof path, "/tmp/cn_test_optim_%d.safetensors", (int)getpid());
    for (size_t pi = 0; pi < sizeof picks / sizeof picks[0]; pi++) {
        const config *cf = &CONFIGS[picks[pi]];
        bool via_file = pi % 2 == 0;
        cn_scope_begin();
        /* Uninterrupted. */
        problem a;
        problem_init(&a, cf->dp, cf->dq, false);
        cn_tensor *pa[2] = {a.p, a.q};
        cn_optimizer *oa = make_opt(cf, pa, 2);
        for (int s = 1; s <= FX_STEPS; s++) train_step(oa, &a, MODE_BACKWARD, skipped(cf, s));
        /* Interrupted after 4 steps: state out, a fresh model and optimiser, state in. */
        problem b;
        problem_init(&b, cf->dp, cf->dq, false);
        cn_tensor *pb[2] = {b.p, b.q};
        cn_optimizer *ob = make_opt(cf, pb, 2);
        for (int s = 1; s <= 4; s++) train_step(ob, &b, MODE_BACKWARD, skipped(cf, s));
        cn_tensor **st = NULL;
        const char **names = NULL;
        int n = cn_optimizer_state(ob, &st, &names);
        CHECK_MSG(n > 0, "%s: state: %s", cf->name, cn_last_error());
        cn_checkpoint *ck = NULL;
        if (via_file && n > 0) {
            CHECK_EQ_INT(cn_save_safetensors(path, names, st, n, NULL, NULL, 0), 0);
            ck = cn_load_safetensors(path);
            CHECK(ck != NULL);
        }
        problem c;
        problem_init(&c, cf->dp, cf->dq, false);
        copy_values(c.p, b.p);
        copy_values(c.q, b.q);
        cn_tensor *pc[2] = {c.p, c.q};
        cn_optimizer *oc = make_opt(cf, pc, 2);
        cn_optimizer_set_lr(oc, 1.2345); /* the state's lr must win */
        int rc;
        if (ck) {
            int m = cn_checkpoint_count(ck);
            const char *cn[128];
            cn_tensor *ct[128];
            for (int i = 0; i < m && i < 128; i++) {
                cn[i] = cn_checkpoint_name(ck, i);
                ct[i] = cn_checkpoint_tensor(ck, i);
            }
            rc = cn_optimizer_load_state(oc, cn, ct, m);
        } else {
            rc = cn_optimizer_load_state(oc, names, st, n);
        }
        CHECK_MSG(rc == 0, "%s: load_state: %s", cf->name, cn_last_error());
        CHECK_CLOSE(cn_optimizer_get_lr(oc), cn_optimizer_get_lr(oa), 0, 0);
        free(st);
        free(names);
        cn_checkpoint_free(ck);
        cn_optimizer_free(ob);
        for (int s = 5; s <= FX_STEPS; s++) train_step(oc, &c, MODE_BACKWARD, skipped(cf, s));
        bool same = true;
        for (int k = 0; k < 4; k++) same &= th_at(a.p, k) == th_at(c.p, k);
        for (int k = 0; k < 6; k++) same &= th_at(a.q, k) == th_at(c.q, k);
        CHECK_MSG(same, "%s: resumed training differs from uninterrupted training", cf->name);
        cn_optimizer_free(oa);
        cn_optimizer_free(oc);
        cn_scope_end();
    }
    unlink(path);
}

static void test_state_names_and_errors(void) {
    problem pr;
    problem_init(&pr, CN_F32, CN_F32, false);
    cn_tensor *params[2] = {pr.p, pr.q};
    cn_optimizer *adam = cn_adam(params, 2, &(cn_adam_opts){.lr = 0.01, .amsgrad = true});
    cn_tensor **st;
    const char **names;
    int n = cn_optimizer_state(adam, &st, &names);
    /* algorithm, 7 hyper-parameters, initial_lr, step, 3 buffers x 2 */
    CHECK_EQ_INT(n, 16);
    if (n != 16) return;
    int found = 0;
    for (int i = 0; i < n; i++) {
        if (!strcmp(names[i], "exp_avg_sq.1")) {
            found++;
            CHECK_SHAPE(st[i], 2, 3);
        }
        if (!strcmp(names[i], "step")) {
            found++;
            CHECK_SHAPE(st[i], 2);
            CHECK(cn_tensor_dtype(st[i]) == CN_I64);
        }
        if (!strcmp(names[i], "lr")) {
            found++;
            CHECK_CLOSE(cn_item(st[i]), 0.01, 0, 0);
        }
    }
    CHECK_EQ_INT(found, 3);
    /* Another algorithm's state. */
    cn_optimizer *sgd = cn_sgd(params, 2, &(cn_sgd_opts){.lr = 0.1, .momentum = 0.9});
    CHECK_STATUS_ERROR(cn_optimizer_load_state(sgd, names, st, n),
                       "state is of optimiser \"adam\"");
    /* Missing, mismatched and unexpected entries, all named at once. */
    cn_optimizer *adam2 = cn_adam(params, 2, &(cn_adam_opts){.amsgrad = true});
    const char *nn[16];
    cn_tensor *tt[16];
    for (int i = 0; i < n; i++) {
        nn[i] = names[i];
        tt[i] = st[i];
        if (!strcmp(names[i], "exp_avg.0")) tt[i] = cn_zeros(CN_F32, CN_SHAPE(5));
        if (!strcmp(names[i], "max_exp_avg_sq.1")) nn[i] = "bogus";
    }
    cn_clear_error();
    CHECK(cn_optimizer_load_state(adam2, nn, tt, n) < 0);
    const char *msg = cn_last_error();
    CHECK_MSG(strstr(msg, "missing max_exp_avg_sq.1") && strstr(msg, "unexpected bogus") &&
                  strstr(msg, "exp_avg.0 is f32[5], expected f32[4]"),
              "unexpected message: %s", msg);
    /* Nothing was written: the step counts are still 0. */
    cn_tensor **st2;
    const char **names2;
    int n2 = cn_optimizer_state(adam2, &st2, &names2);
    for (int i = 0; i < n2; i++)
        if (!strcmp(names2[i], "step")) CHECK_CLOSE(th_at(st2[i], 0) + th_at(st2[i], 1), 0, 0, 0);
    free(st2);
    free(names2);
    /* amsgrad off: the state has a buffer this optimiser lacks. */
    cn_optimizer *adam3 = cn_adam(params, 2, NULL);
    CHECK_STATUS_ERROR(cn_optimizer_load_state(adam3, names, st, n), "unexpected max_exp_avg_sq.0");
    free(st);
    free(names);
    cn_optimizer_free(adam);
    cn_optimizer_free(adam2);
    cn_optimizer_free(adam3);
    cn_optimizer_free(sgd);
}

/* ---- threads ---- */

static double grad_at(int64_t k, int t) {
    return (k % 2 ? 1 : -1) * (0.5 + 0.25 * sin((double)k + t));
}

/* Adam over ~200k parameters in a few tensors (several chunks), from the
 * same start with 1 and 2 threads: the same bits; and against a plain loop
 * of the update in double. */
static void test_thread_count_independence(void) {
    int64_t sizes[4] = {70001, 3, 100000, 29999};
    float *res[2] = {NULL, NULL};
    int64_t total = 200003;
    int saved = cn_get_num_threads();
    for (int r = 0; r < 2; r++) {
        cn_set_num_threads(r + 1);
        cn_scope_begin();
        cn_manual_seed(42);
        cn_tensor *params[4];
        for (int i = 0; i < 4; i++) {
            params[i] = cn_randn(CN_F32, 1, &sizes[i]);
            cn_set_requires_grad(params[i], true);
        }
        cn_optimizer *opt =
            cn_adam(params, 4, &(cn_adam_opts){.lr = 0.01, .weight_decay = 0.01, .amsgrad = true});
        CHECK(opt && cn_optimizer_is_flat(opt));
        cn_tensor *fp = cn_optimizer_flat_params(opt), *fg = cn_optimizer_flat_grads(opt);
        double *p0 = malloc(sizeof(double) * (size_t)total);
        double *ref = malloc(sizeof(double) * (size_t)total);
        const float *pd = cn_data(fp);
        for (int64_t k = 0; k < total; k++) p0[k] = pd[k];
        /* Three steps with gradients +-(0.5 + 0.25 sin(k + t)), written
         * straight into the flat gradient buffer (kept away from 0, where
         * Adam's g / |g| would magnify rounding). */
        double *m = calloc((size_t)total, sizeof(double));
        double *v = calloc((size_t)total, sizeof(double));
        double *vm = calloc((size_t)total, sizeof(double));
        for (int64_t k = 0; k < total; k++) ref[k] = p0[k];
        for (int t = 1; t <= 3; t++) {
            float *gd = cn_data(fg);
            for (int64_t k = 0; k < total; k++) gd[k] = (float)grad_at(k, t);
            CHECK_EQ_INT(cn_optimizer_step(opt), 0);
            double bc1 = 1 - pow(0.9, t), bc2 = 1 - pow(0.999, t);
            for (int64_t k = 0; k < total; k++) {
                double g = (float)grad_at(k, t) + 0.01 * ref[k];
                m[k] = 0.9 * m[k] + 0.1 * g;
                v[k] = 0.999 * v[k] + 0.001 * g * g;
                vm[k] = v[k] > vm[k] ? v[k] : vm[k];
                ref[k] -= 0.01 / bc1 * m[k] / (sqrt(vm[k]) / sqrt(bc2) + 1e-8);
            }
        }
        res[r] = malloc(sizeof(float) * (size_t)total);
        memcpy(res[r], cn_data(fp), sizeof(float) * (size_t)total);
        double worst = 0;
        for (int64_t k = 0; k < total; k++) worst = fmax(worst, fabs(res[r][k] - ref[k]));
        CHECK_MSG(worst < 2e-6, "Adam differs from the double reference by %g", worst);
        free(p0);
        free(ref);
        free(m);
        free(v);
        free(vm);
        cn_optimizer_free(opt);
        cn_scope_end();
    }
    CHECK_MSG(memcmp(res[0], res[1], sizeof(float) * (size_t)total) == 0,
              "1 and 2 threads give different parameters");
    free(res[0]);
    free(res[1]);
    cn_set_num_threads(saved);
}

/* ---- errors ---- */

static void test_errors(void) {
    cn_tensor *p = cn_zeros(CN_F32, CN_SHAPE(3));
    cn_set_requires_grad(p, true);
    cn_tensor *ps[2] = {p, p};
    CHECK_ERROR(cn_adam(ps, 0, NULL), "parameter list is empty");
    CHECK_ERROR(cn_adam(ps, 2, NULL), "parameters 0 and 1 are the same tensor");
    cn_tensor *y = cn_mul_scalar(p, 2);
    CHECK_ERROR(cn_adam(&y, 1, NULL), "recorded history");
    cn_tensor *i = cn_zeros(CN_I64, CN_SHAPE(3));
    CHECK_ERROR(cn_sgd(&i, 1, &(cn_sgd_opts){.lr = 1}), "f32 and f64");
    CHECK_ERROR(cn_sgd(&p, 1, NULL), "lr must be set");
    CHECK_ERROR(cn_sgd(&p, 1, &(cn_sgd_opts){.lr = -1}), "lr -1 must be >= 0");
    CHECK_ERROR(cn_sgd(&p, 1, &(cn_sgd_opts){.lr = 1, .nesterov = true}),
                "nesterov needs momentum");
    CHECK_ERROR(cn_adam(&p, 1, &(cn_adam_opts){.beta1 = 1.0, .beta2 = 0.9}),
                "beta1 1 must be in [0, 1)");
    CHECK_ERROR(cn_rmsprop(&p, 1, &(cn_rmsprop_opts){.momentum = -0.5}), "momentum -0.5");
    CHECK_ERROR(cn_adagrad(&p, 1, &(cn_adagrad_opts){.lr_decay = -1}), "lr_decay -1");
    cn_graph *g = cn_graph_new();
    cn_tensor *ph = cn_placeholder(g, "x", CN_F32, CN_SHAPE(3));
    CHECK_ERROR(cn_adam(&ph, 1, NULL), "static graph");
    cn_graph_free(g);
    /* A NULL parameter keeps the earlier error. */
    cn_tensor *nul = cn_squeeze(p, 0); /* fails: axis 0 has size 3 */
    CHECK(nul == NULL);
    char earlier[256];
    snprintf(earlier, sizeof earlier, "%s", cn_last_error());
    CHECK(cn_adam(&nul, 1, NULL) == NULL);
    CHECK(earlier[0] && strcmp(cn_last_error(), earlier) == 0);
    /* Nothing was moved by the failed constructors. */
    CHECK(cn_get_grad(p) == NULL);
    cn_optimizer *opt = cn_adam(&p, 1, NULL);
    CHECK_STATUS_ERROR(cn_optimizer_set_lr(opt, -0.1), "lr -0.1");
    CHECK_STATUS_ERROR(cn_optimizer_set_lr(opt, NAN), "must be >= 0");
    CHECK_EQ_INT(cn_optimizer_set_lr(opt, 0.25), 0);
    CHECK_CLOSE(cn_optimizer_get_lr(opt), 0.25, 0, 0);
    CHECK(cn_optimizer_step(NULL) < 0);
    cn_optimizer_free(opt);
    cn_optimizer_free(NULL);
}

int main(void) {
    RUN(test_torch_parity);
    RUN(test_flat_layout);
    RUN(test_zero_grad_keeps_buffers);
    RUN(test_state_resume);
    RUN(test_state_names_and_errors);
    RUN(test_thread_count_independence);
    RUN(test_errors);
    return th_summary();
}
