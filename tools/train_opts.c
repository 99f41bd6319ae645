/* `chutney train`'s optimiser and schedule options (tools/train_opts.h).
 * Each is a row of one table: its name on the command line (the --config
 * key and the checkpoint's metadata key follow from it), its range, and
 * the optimisers or schedules it belongs to, so parsing, the checks
 * against the chosen optimiser, saving and resuming cannot drift apart. */
#include "train_opts.h"
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { K_REAL, K_INT, K_FLAG, K_PAIR, K_CHOICE };

/* Optimisers, in train.c's order of --optimizer's choices. */
enum { O_SGD = 1, O_ADAM = 2, O_ADAMW = 4, O_RMSPROP = 8, O_ADAGRAD = 16, O_ALL = 31 };
static const char *const opt_names[] = {"sgd", "adam", "adamw", "rmsprop", "adagrad"};

static const char *const sched_names[SCHED_COUNT] = {"none", "step", "exponential", "cosine",
                                                     "linear"};
enum { S_STEP = 1 << SCHED_STEP, S_EXP = 1 << SCHED_EXPONENTIAL, S_COS = 1 << SCHED_COSINE,
       S_LIN = 1 << SCHED_LINEAR };

typedef struct topt {
    const char *name; /* on the command line */
    int kind, slot;
    double lo, hi;       /* the accepted range; lo_open: lo itself is not */
    bool lo_open, hi_open;
    unsigned optimizers; /* 0: any (then schedules, if set, say where it belongs) */
    unsigned schedules;
    const char *what;    /* what it takes, for messages */
} topt;

static const topt table[] = {
    {"--momentum", K_REAL, TO_MOMENTUM, 0, 1, false, true, O_SGD | O_RMSPROP, 0,
     "a momentum factor from 0 to below 1, such as 0.9"},
    {"--dampening", K_REAL, TO_DAMPENING, 0, 1, false, false, O_SGD, 0,
     "a dampening from 0 to 1"},
    {"--nesterov", K_FLAG, TO_NESTEROV, 0, 1, false, false, O_SGD, 0, NULL},
    {"--weight-decay", K_REAL, TO_WEIGHT_DECAY, 0, 1e6, false, false, O_ALL, 0,
     "a weight decay, 0 or more, such as 1e-4"},
    {"--betas", K_PAIR, TO_BETA1, 0, 1, false, true, O_ADAM | O_ADAMW, 0,
     "two numbers from 0 to below 1, such as 0.9,0.999"},
    {"--eps", K_REAL, TO_EPS, 0, 1, true, false, O_ADAM | O_ADAMW | O_RMSPROP | O_ADAGRAD, 0,
     "a small positive number, such as 1e-8"},
    {"--amsgrad", K_FLAG, TO_AMSGRAD, 0, 1, false, false, O_ADAM | O_ADAMW, 0, NULL},
    {"--alpha", K_REAL, TO_ALPHA, 0, 1, true, false, O_RMSPROP, 0,
     "a smoothing constant above 0, up to 1, such as 0.99"},
    {"--centered", K_FLAG, TO_CENTERED, 0, 1, false, false, O_RMSPROP, 0, NULL},
    {"--lr-decay", K_REAL, TO_LR_DECAY, 0, 1e6, false, false, O_ADAGRAD, 0,
     "an lr decay, 0 or more"},
    {"--initial-accumulator", K_REAL, TO_INIT_ACC, 0, 1e6, false, false, O_ADAGRAD, 0,
     "the accumulators' start value, 0 or more"},
    {"--label-smoothing", K_REAL, TO_LABEL_SMOOTHING, 0, 1, false, false, 0, 0,
     "a label smoothing from 0 to 1, such as 0.1"},
    {"--schedule", K_CHOICE, TO_SCHEDULE, 0, 0, false, false, 0, 0,
     "none, step, exponential, cosine or linear"},
    {"--step-size", K_INT, TO_STEP_SIZE, 1, 1e9, false, false, 0, S_STEP,
     "the steps between decays (1 or more)"},
    {"--gamma", K_REAL, TO_GAMMA, 0, 1, true, false, 0, S_STEP | S_EXP,
     "a decay factor above 0, up to 1, such as 0.1"},
    {"--t-max", K_INT, TO_T_MAX, 1, 1e12, false, false, 0, S_COS,
     "the steps of the cosine's half period (1 or more)"},
    {"--eta-min", K_REAL, TO_ETA_MIN, 0, 1e6, false, false, 0, S_COS,
     "the lowest lr, 0 or more"},
    {"--start-factor", K_REAL, TO_START_FACTOR, 0, 1, true, false, 0, S_LIN,
     "a factor above 0, up to 1"},
    {"--end-factor", K_REAL, TO_END_FACTOR, 0, 1, false, false, 0, S_LIN,
     "a factor from 0 to 1"},
    {"--total-iters", K_INT, TO_TOTAL_ITERS, 1, 1e12, false, false, 0, S_LIN,
     "the steps the factor moves over (1 or more)"},
    {"--warmup", K_INT, TO_WARMUP, 1, 1e12, false, false, 0, 0,
     "the steps of linear warm-up (1 or more)"},
    {"--warmup-factor", K_REAL, TO_WARMUP_FACTOR, 0, 1, true, false, 0, 0,
     "the warm-up's first lr as a fraction of --lr, above 0, up to 1"},
};
#define NTABLE (int)(sizeof table / sizeof table[0])

/* The checkpoint's metadata key of a slot. */
static const char *const meta_keys[TO_NSLOTS] = {
    "momentum", "dampening", "nesterov", "weight_decay", "beta1", "beta2", "eps", "amsgrad",
    "alpha", "centered", "lr_decay", "initial_accumulator", "label_smoothing", "schedule",
    "step_size", "gamma", "t_max", "eta_min", "start_factor", "end_factor", "total_iters",
    "warmup", "warmup_factor"};

static const topt *find(const char *k) {
    for (int i = 0; i < NTABLE; i++)
        if (!strcmp(table[i].name, k)) return &table[i];
    return NULL;
}

bool cn_tool_optim_known(const char *k, bool *flag, const char **what) {
    const topt *t = find(k);
    if (t) {
        *flag = t->kind == K_FLAG;
        *what = t->what;
    }
    return t != NULL;
}

int cn_tool_optim_names(const char **names, int max) {
    int n = 0;
    for (int i = 0; i < NTABLE && n < max; i++) names[n++] = table[i].name;
    return n;
}

static bool in_range(const topt *t, double x) {
    return isfinite(x) && (t->lo_open ? x > t->lo : x >= t->lo) &&
           (t->hi_open ? x < t->hi : x <= t->hi);
}

static bool parse_real(const char *s, double *x) {
    char *end;
    errno = 0;
    *x = strtod(s, &end);
    return *s && end != s && !*end && !errno;
}

int cn_tool_optim_set(train_args *a, const char *cmd, const char *k, const char *v) {
    const topt *t = find(k);
    double x = NAN, y = NAN;
    bool ok = true;
    switch (t->kind) {
    case K_FLAG: {
        /* A --config file's "nesterov = false" says no, explicitly. */
        bool on = true;
        ok = !v || cn_tool_bool(v, &on);
        x = on;
        if (!ok)
            fprintf(stderr, "chutney %s: bad value '%s' for %s: expected true or false\n", cmd, v, k);
        break;
    }
    case K_CHOICE: {
        int i = cn_tool_choice(cmd, k, "schedule", v, sched_names, SCHED_COUNT);
        if (i < 0) return CN_TOOL_USAGE;
        x = i;
        break;
    }
    case K_PAIR: {
        const char *comma = strchr(v, ',');
        char first[64];
        ok = comma && (size_t)(comma - v) < sizeof first;
        if (ok) {
            memcpy(first, v, (size_t)(comma - v));
            first[comma - v] = '\0';
            ok = parse_real(first, &x) && parse_real(comma + 1, &y) && in_range(t, x) &&
                 in_range(t, y);
        }
        break;
    }
    case K_INT: {
        long long n;
        if (!cn_tool_int(cmd, k, v, (long long)t->lo, (long long)t->hi, &n)) return CN_TOOL_USAGE;
        x = (double)n;
        break;
    }
    default:
        ok = parse_real(v, &x) && in_range(t, x);
        break;
    }
    if (!ok) {
        if (t->kind != K_FLAG)
            fprintf(stderr, "chutney %s: bad value '%s' for %s: expected %s\n", cmd, v, k, t->what);
        return CN_TOOL_USAGE;
    }
    a->optv[t->slot] = x;
    if (t->kind == K_PAIR) a->optv[t->slot + 1] = y;
    return 0;
}

static int opt_bit(const char *optimizer) {
    for (int i = 0; i < 5; i++)
        if (!strcmp(optimizer, opt_names[i])) return 1 << i;
    return 0;
}

static void list_of(unsigned mask, const char *const *names, int n, char *buf, size_t size) {
    buf[0] = '\0';
    int count = 0, seen = 0;
    for (int i = 0; i < n; i++) count += (mask >> i) & 1;
    for (int i = 0; i < n; i++)
        if ((mask >> i) & 1) {
            seen++;
            snprintf(buf + strlen(buf), size - strlen(buf), "%s%s",
                     seen == 1 ? "" : seen == count ? " and " : ", ", names[i]);
        }
}

int cn_tool_optim_check(const train_args *a) {
    const double *v = a->optv;
    int sched = isnan(v[TO_SCHEDULE]) ? SCHED_NONE : (int)v[TO_SCHEDULE];
    unsigned bit = (unsigned)opt_bit(a->optimizer);
    for (int i = 0; i < NTABLE; i++) {
        const topt *t = &table[i];
        if (isnan(v[t->slot]) || (t->kind == K_FLAG && v[t->slot] == 0)) continue;
        char list[96];
        if (t->optimizers && !(t->optimizers & bit)) {
            list_of(t->optimizers, opt_names, 5, list, sizeof list);
            fprintf(stderr, "chutney train: %s is a setting of %s, and this run's optimizer is "
                            "%s\n", t->name, list, a->optimizer);
            return CN_TOOL_USAGE;
        }
        if (t->schedules && !(t->schedules & (1u << sched))) {
            list_of(t->schedules, sched_names, SCHED_COUNT, list, sizeof list);
            fprintf(stderr, "chutney train: %s is a setting of --schedule %s%s\n", t->name, list,
                    sched ? "" : " (no --schedule was given)");
            return CN_TOOL_USAGE;
        }
    }
    if (!isnan(v[TO_WARMUP_FACTOR]) && isnan(v[TO_WARMUP])) {
        fprintf(stderr, "chutney train: --warmup-factor is a setting of --warmup N\n");
        return CN_TOOL_USAGE;
    }
    if (sched == SCHED_STEP && isnan(v[TO_STEP_SIZE])) {
        fprintf(stderr, "chutney train: --schedule step needs --step-size N (the lr is multiplied "
                        "by --gamma, default 0.1, every N steps)\n");
        return CN_TOOL_USAGE;
    }
    if (sched == SCHED_EXPONENTIAL && isnan(v[TO_GAMMA])) {
        fprintf(stderr, "chutney train: --schedule exponential needs --gamma G (the lr is "
                        "multiplied by G every step)\n");
        return CN_TOOL_USAGE;
    }
    bool nesterov = v[TO_NESTEROV] == 1;
    double momentum = isnan(v[TO_MOMENTUM]) ? -1 : v[TO_MOMENTUM];
    if (nesterov && (momentum == 0 || (momentum < 0 && strcmp(a->model, "mlp")) ||
                     (!isnan(v[TO_DAMPENING]) && v[TO_DAMPENING] != 0))) {
        fprintf(stderr, "chutney train: --nesterov needs --momentum above 0 and no --dampening\n");
        return CN_TOOL_USAGE;
    }
    if (!isnan(v[TO_LABEL_SMOOTHING]) && !strcmp(a->model, "gpt")) {
        fprintf(stderr, "chutney train: --label-smoothing is for the classifiers, not --model "
                        "gpt\n");
        return CN_TOOL_USAGE;
    }
    return 0;
}

static double or_default(double v, double d) { return isnan(v) ? d : v; }

cn_optimizer *cn_tool_optim_make(const train_args *a, cn_tensor **params, int n,
                                 double default_momentum) {
    const double *v = a->optv;
    const char *o = a->optimizer;
    double wd = or_default(v[TO_WEIGHT_DECAY], 0);
    cn_optimizer *opt = NULL;
    if (!strcmp(o, "sgd")) {
        cn_sgd_opts s = {.lr = a->lr, .momentum = or_default(v[TO_MOMENTUM], default_momentum),
                         .dampening = or_default(v[TO_DAMPENING], 0),
                         .nesterov = v[TO_NESTEROV] == 1, .weight_decay = wd};
        opt = cn_sgd(params, n, &s);
    } else if (!strcmp(o, "adam") || !strcmp(o, "adamw")) {
        bool w = !strcmp(o, "adamw");
        /* The library reads a zero as torch's default (AdamW's decay is
         * 1e-2): a decay of 0 asked for is one too small to change a bit. */
        cn_adam_opts s = {.lr = a->lr, .beta1 = or_default(v[TO_BETA1], 0.9),
                          .beta2 = or_default(v[TO_BETA2], 0.999), .eps = or_default(v[TO_EPS], 1e-8),
                          .weight_decay = w ? or_default(v[TO_WEIGHT_DECAY], 1e-2) : wd,
                          .amsgrad = v[TO_AMSGRAD] == 1};
        if (w && s.weight_decay == 0) s.weight_decay = 1e-300;
        if (s.beta1 == 0 && s.beta2 == 0) s.beta1 = 1e-300;
        opt = w ? cn_adamw(params, n, &s) : cn_adam(params, n, &s);
    } else if (!strcmp(o, "rmsprop")) {
        cn_rmsprop_opts s = {.lr = a->lr, .alpha = or_default(v[TO_ALPHA], 0.99),
                             .eps = or_default(v[TO_EPS], 1e-8), .weight_decay = wd,
                             .momentum = or_default(v[TO_MOMENTUM], 0),
                             .centered = v[TO_CENTERED] == 1};
        opt = cn_rmsprop(params, n, &s);
    } else if (!strcmp(o, "adagrad")) {
        cn_adagrad_opts s = {.lr = a->lr, .lr_decay = or_default(v[TO_LR_DECAY], 0),
                             .weight_decay = wd,
                             .initial_accumulator_value = or_default(v[TO_INIT_ACC], 0),
                             .eps = or_default(v[TO_EPS], 1e-10)};
        opt = cn_adagrad(params, n, &s);
    } else {
        cn_tool_fail("unknown optimizer '%s' (choose sgd, adam, adamw, rmsprop or adagrad)", o);
        return NULL;
    }
    if (opt && a->clip > 0 && cn_optimizer_set_clip_grad_norm(opt, a->clip) < 0) {
        cn_optimizer_free(opt);
        return NULL;
    }
    return opt;
}

cn_lr_scheduler *cn_tool_schedule_make(train_args *a, cn_optimizer *opt, int64_t total,
                                       bool *failed) {
    double *v = a->optv;
    int sched = isnan(v[TO_SCHEDULE]) ? SCHED_NONE : (int)v[TO_SCHEDULE];
    *failed = false;
    if (sched == SCHED_NONE && isnan(v[TO_WARMUP])) return NULL;
    cn_lr_scheduler *s = NULL;
    switch (sched) {
    case SCHED_STEP:
        s = cn_step_lr(opt, (int64_t)v[TO_STEP_SIZE], or_default(v[TO_GAMMA], 0.1));
        break;
    case SCHED_EXPONENTIAL:
        s = cn_exponential_lr(opt, v[TO_GAMMA]);
        break;
    case SCHED_COSINE:
        /* The whole run by default, fixed from then on (a resume with more
         * epochs goes on along the same curve). */
        if (isnan(v[TO_T_MAX])) v[TO_T_MAX] = (double)(total > 0 ? total : 1);
        s = cn_cosine_annealing_lr(opt, (int64_t)v[TO_T_MAX], or_default(v[TO_ETA_MIN], 0));
        break;
    case SCHED_LINEAR:
        s = cn_linear_lr(opt, or_default(v[TO_START_FACTOR], 1.0 / 3), or_default(v[TO_END_FACTOR], 1),
                         (int64_t)or_default(v[TO_TOTAL_ITERS], 5));
        break;
    default:
        /* Warm-up alone: then the lr as given (a factor of 1 every step). */
        s = cn_exponential_lr(opt, 1);
        break;
    }
    if (s && !isnan(v[TO_WARMUP]))
        s = cn_warmup_lr(opt, (int64_t)v[TO_WARMUP], or_default(v[TO_WARMUP_FACTOR], 0.1), s);
    *failed = s == NULL;
    return s;
}

void cn_tool_optim_meta(const train_args *a, const char **keys, const char **vals,
                        char (*buf)[40], int *n) {
    *n = 0;
    for (int i = 0; i < TO_NSLOTS; i++) {
        if (isnan(a->optv[i])) continue;
        if (i == TO_SCHEDULE) snprintf(buf[*n], 40, "%s", sched_names[(int)a->optv[i]]);
        else snprintf(buf[*n], 40, "%.17g", a->optv[i]);
        keys[*n] = meta_keys[i];
        vals[*n] = buf[*n];
        (*n)++;
    }
}

/* A slot that belongs to a schedule (or the warm-up). */
static bool schedule_slot(int slot) {
    for (int i = 0; i < NTABLE; i++)
        if (table[i].slot == slot) return table[i].schedules || slot == TO_WARMUP || slot == TO_WARMUP_FACTOR;
    return false;
}

int cn_tool_optim_from_meta(train_args *a, cn_checkpoint *c, const char *path) {
    /* A --schedule given again brings its own settings, not the old one's. */
    bool new_schedule = !isnan(a->optv[TO_SCHEDULE]);
    for (int i = 0; i < TO_NSLOTS; i++) {
        const char *s = cn_checkpoint_metadata(c, meta_keys[i]);
        if (!s || !isnan(a->optv[i]) || (new_schedule && schedule_slot(i))) continue;
        double x = NAN;
        bool ok;
        if (i == TO_SCHEDULE) {
            for (int k = 0; k < SCHED_COUNT; k++)
                if (!strcmp(s, sched_names[k])) x = k;
            ok = !isnan(x);
        } else {
            ok = parse_real(s, &x) && isfinite(x);
        }
        if (!ok) {
            cn_tool_fail("%s: metadata %s is '%.40s', not a value of --%s (the checkpoint is "
                         "damaged or was not written by chutney train)", path, meta_keys[i], s,
                         meta_keys[i]);
            return -1;
        }
        a->optv[i] = x;
    }
    return 0;
}

static int schedule_load(cn_lr_scheduler *s, cn_checkpoint *c) {
    int n = cn_checkpoint_count(c), k = 0;
    const char **names = malloc(sizeof *names * (size_t)(n ? n : 1));
    cn_tensor **tensors = malloc(sizeof *tensors * (size_t)(n ? n : 1));
    int rc = -1;
    if (names && tensors) {
        for (int i = 0; i < n; i++) {
            const char *name = cn_checkpoint_name(c, i);
            if (!strncmp(name, "scheduler.", 10)) {
                names[k] = name + 10;
                tensors[k++] = cn_checkpoint_tensor(c, i);
            }
        }
        rc = cn_lr_scheduler_load_state(s, names, tensors, k);
    }
    free(names);
    free(tensors);
    return rc;
}

int cn_tool_schedule_resume(const train_args *a) {
    if (!a->resume || !a->sched) return 0;
    cn_checkpoint *c = cn_load_safetensors(a->resume);
    const char *was = c ? cn_checkpoint_metadata(c, "schedule") : NULL;
    int now = isnan(a->optv[TO_SCHEDULE]) ? SCHED_NONE : (int)a->optv[TO_SCHEDULE];
    bool warm = c && cn_checkpoint_metadata(c, "warmup");
    if (c && (strcmp(was ? was : "none", sched_names[now]) || warm != !isnan(a->optv[TO_WARMUP]))) {
        fprintf(stderr, "chutney train: %s was trained with --schedule %s%s, and a schedule "
                        "cannot change on resume (give --schedule none to go on at the lr it "
                        "reached)\n", a->resume, was ? was : "none", warm ? " and --warmup" : "");
        cn_checkpoint_free(c);
        return CN_TOOL_USAGE;
    }
    int rc = c ? schedule_load(a->sched, c) : -1;
    cn_checkpoint_free(c);
    if (rc < 0) fprintf(stderr, "chutney: cannot resume the schedule: %s\n", cn_last_error());
    return rc < 0 ? CN_TOOL_FAILED : 0;
}
