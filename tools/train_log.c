/* `chutney train --log FILE` and `--tensorboard DIR`: the figures of every
 * step and epoch, as JSON lines (one object per line, flushed at once, so
 * `tail -f` and a plot of a run still going see each step) and as
 * TensorBoard scalars.
 *
 * A write that fails during the run (a full disk) does not stop the
 * training, which is worth more than its log: the message says so at once,
 * that output is closed, and the command exits with status 1 at the end,
 * after its checkpoints, so that a script learns the log is incomplete. */
#include "train_log.h"

#include "tfevents.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifdef CN_HAVE_TENSORBOARD
#define HAS_TENSORBOARD true
#else
#define HAS_TENSORBOARD false
#endif
#ifdef CN_HAVE_CAIRO
#define HAS_CAIRO true
#else
#define HAS_CAIRO false
#endif

const cn_build_feature cn_tool_features[] = {
    {"tensorboard", "chutney train --tensorboard: TensorBoard event files (protobuf-c)", HAS_TENSORBOARD},
    {"cairo", "chutney plot: training curves as PNG (cairo)", HAS_CAIRO},
};
const int cn_tool_nfeatures = 2;

struct train_log {
    FILE *json;
    const char *json_path;
    cn_tfevents *tb;
    char tb_path[4096];
    bool failed;
    cn_tensor **params; /* for the gradient norm, listed on first use */
    int nparams;
};

/* ---- one JSON line ---- */

typedef struct line {
    char buf[1024];
    size_t len;
} line;

static void put(line *ln, const char *fmt, ...) {
    if (ln->len >= sizeof ln->buf) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(ln->buf + ln->len, sizeof ln->buf - ln->len, fmt, ap);
    va_end(ap);
    if (n > 0) ln->len += (size_t)n;
}

/* ,"key":value with 9 significant digits: the --json line's "final_loss"
 * is printed the same way, so the two compare as text. */
static void put_num(line *ln, const char *key, double v) {
    if (isfinite(v)) put(ln, ",\"%s\":%.9g", key, v);
    else put(ln, ",\"%s\":null", key);
}

/* A loss, gradient norm or accuracy, which TensorBoard also gets as an
 * f32: that f32 itself, whose 9 digits name it exactly. Printed from the
 * double, 9 digits could round to the f32 beside the event's one (a mean
 * of losses near the midpoint of two floats did). The learning rate stays
 * as given (0.05, not the f32 0.0500000007). */
static void put_num32(line *ln, const char *key, double v) {
    put_num(ln, key, (double)(float)v);
}

/* Rates, memory and times: 6 digits say all they can. */
static void put_num6(line *ln, const char *key, double v) {
    if (isfinite(v)) put(ln, ",\"%s\":%.6g", key, v);
    else put(ln, ",\"%s\":null", key);
}

static void put_str(line *ln, const char *key, const char *s) {
    put(ln, ",\"%s\":\"", key);
    for (const char *p = s ? s : ""; *p; p++) {
        if (*p == '"' || *p == '\\') put(ln, "\\%c", *p);
        else if ((unsigned char)*p < 0x20) put(ln, "\\u%04x", (unsigned)(unsigned char)*p);
        else put(ln, "%c", *p);
    }
    put(ln, "\"");
}

static void json_failed(train_log *l, int err) {
    fprintf(stderr, "chutney train: --log %s: cannot write: %s; training goes on without the "
                    "log (the exit status will be 1)\n", l->json_path, strerror(err));
    fclose(l->json);
    l->json = NULL;
    l->failed = true;
}

static void write_line(train_log *l, line *ln) {
    if (!l->json) return;
    put(ln, "}\n");
    errno = 0;
    if (fwrite(ln->buf, 1, ln->len, l->json) != ln->len || fflush(l->json) != 0)
        json_failed(l, errno ? errno : EIO);
}

static void tb_scalars(train_log *l, int64_t step, const char *const *tags, const double *v,
                       int n) {
    if (!l->tb || cn_tfevents_scalars(l->tb, step, tags, v, n) == 0) return;
    fprintf(stderr, "chutney train: --tensorboard %s: cannot write: %s; training goes on "
                    "without it (the exit status will be 1)\n", l->tb_path, strerror(errno));
    cn_tfevents_close(l->tb);
    l->tb = NULL;
    l->failed = true;
}

/* ---- the run ---- */

int train_log_open(const char *cmd, const char *log_path, const char *tb_dir, train_log **out) {
    *out = NULL;
    if (!log_path && !tb_dir) return 0;
    if (tb_dir && !cn_tfevents_available) {
        fprintf(stderr, "chutney %s: --tensorboard: this build has no TensorBoard writer "
                        "(apt-get install libprotobuf-c-dev protobuf-c-compiler, then rebuild)\n",
                cmd);
        return CN_TOOL_FAILED;
    }
    train_log *l = calloc(1, sizeof *l);
    if (!l) {
        fprintf(stderr, "chutney %s: out of memory\n", cmd);
        return CN_TOOL_FAILED;
    }
    if (log_path) {
        /* Opened (and truncated) now, before any data is read: a log that
         * cannot be written fails in a second, not after an epoch. */
        l->json_path = log_path;
        if (!(l->json = fopen(log_path, "w"))) {
            fprintf(stderr, "chutney %s: --log %s: %s\n", cmd, log_path, strerror(errno));
            free(l);
            return CN_TOOL_FAILED;
        }
    }
    if (tb_dir && !(l->tb = cn_tfevents_open(tb_dir, l->tb_path, sizeof l->tb_path))) {
        fprintf(stderr, "chutney %s: --tensorboard %s: %s\n", cmd, tb_dir, strerror(errno));
        if (l->json) fclose(l->json);
        free(l);
        return CN_TOOL_FAILED;
    }
    *out = l;
    return 0;
}

int train_log_close(train_log *l) {
    if (!l) return 0;
    if (l->json && fclose(l->json) != 0 && !l->failed) {
        fprintf(stderr, "chutney train: --log %s: %s\n", l->json_path, strerror(errno));
        l->failed = true;
    }
    if (l->tb && cn_tfevents_close(l->tb) < 0 && !l->failed) {
        fprintf(stderr, "chutney train: --tensorboard %s: %s\n", l->tb_path, strerror(errno));
        l->failed = true;
    }
    int rc = l->failed ? -1 : 0;
    free(l->params);
    free(l);
    return rc;
}

void train_log_start(train_log *l, const train_log_start_info *s) {
    if (!l) return;
    line ln = {.len = 0};
    put(&ln, "{\"event\":\"start\"");
    put_str(&ln, "model", s->model);
    put_str(&ln, "mode", s->mode);
    put_str(&ln, "device", s->device);
    put(&ln, ",\"ranks\":%d,\"epochs\":%d,\"start_epoch\":%d,\"batch\":%lld,"
             "\"steps_per_epoch\":%lld,\"samples\":%lld",
        s->ranks, s->epochs, s->start_epoch, (long long)s->batch, (long long)s->steps_per_epoch,
        (long long)s->samples);
    put_num(&ln, "lr", s->lr);
    put(&ln, ",\"time\":%lld", (long long)time(NULL));
    write_line(l, &ln);
}

void train_log_step(train_log *l, const train_log_step_info *s) {
    if (!l) return;
    double rss = train_log_rss_mb();
    line ln = {.len = 0};
    put(&ln, "{\"event\":\"step\",\"epoch\":%d,\"step\":%lld", s->epoch, (long long)s->step);
    put_num32(&ln, "loss", s->loss);
    put_num(&ln, "lr", s->lr);
    put_num32(&ln, "grad_norm", s->grad_norm);
    put_num6(&ln, "samples_per_sec", s->samples_per_sec);
    if (!isnan(s->tokens_per_sec)) put_num6(&ln, "tokens_per_sec", s->tokens_per_sec);
    put_num6(&ln, "rss_mb", rss);
    write_line(l, &ln);
    static const char *const tags[] = {"train/loss", "lr", "train/grad_norm",
                                       "train/samples_per_sec", "train/tokens_per_sec",
                                       "memory/rss_mb"};
    double v[] = {s->loss, s->lr, s->grad_norm, s->samples_per_sec, s->tokens_per_sec, rss};
    tb_scalars(l, s->step, tags, v, 6);
}

void train_log_epoch(train_log *l, const train_log_epoch_info *e) {
    if (!l) return;
    double rss = train_log_rss_mb();
    line ln = {.len = 0};
    put(&ln, "{\"event\":\"epoch\",\"epoch\":%d,\"step\":%lld", e->epoch, (long long)e->step);
    put_num32(&ln, "train_loss", e->train_loss);
    /* The classifiers have accuracies, the language model a validation
     * loss: each line has the figures its model has. */
    if (!isnan(e->train_accuracy)) put_num32(&ln, "train_accuracy", e->train_accuracy);
    if (!isnan(e->test_accuracy)) put_num32(&ln, "test_accuracy", e->test_accuracy);
    if (!isnan(e->val_loss)) put_num32(&ln, "val_loss", e->val_loss);
    if (!isnan(e->val_perplexity)) put_num32(&ln, "val_perplexity", e->val_perplexity);
    put_num(&ln, "lr", e->lr);
    put_num6(&ln, "seconds", e->seconds);
    put_num6(&ln, "samples_per_sec", e->samples_per_sec);
    put_num6(&ln, "rss_mb", rss);
    write_line(l, &ln);
    /* At the epoch's last step, so that they line up with the step curves. */
    static const char *const tags[] = {"epoch/train_loss", "epoch/train_accuracy",
                                       "test/accuracy", "val/loss", "val/perplexity",
                                       "epoch/seconds", "epoch"};
    double v[] = {e->train_loss, e->train_accuracy, e->test_accuracy, e->val_loss,
                  e->val_perplexity, e->seconds, (double)e->epoch};
    tb_scalars(l, e->step, tags, v, 7);
}

double train_log_grad_norm(train_log *l, cn_module *m, cn_optimizer *opt) {
    if (!l) return NAN;
    double norm = cn_optimizer_last_grad_norm(opt); /* NaN unless the step clips */
    if (!isnan(norm)) return norm;
    if (!l->params && (l->nparams = cn_module_parameters(m, &l->params, NULL)) < 0) {
        l->params = NULL;
        return NAN;
    }
    /* No limit: the norm is measured and nothing is scaled. */
    if (cn_clip_grad_norm(l->params, l->nparams, INFINITY, 2, &norm) < 0) {
        cn_clear_error();
        return NAN;
    }
    return norm;
}

double train_log_rss_mb(void) {
    /* statm's second field: resident pages. */
    FILE *f = fopen("/proc/self/statm", "r");
    long long size, resident;
    if (f) {
        int n = fscanf(f, "%lld %lld", &size, &resident);
        fclose(f);
        long page = sysconf(_SC_PAGESIZE);
        if (n == 2 && page > 0) return (double)resident * (double)page / (1024.0 * 1024.0);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}
