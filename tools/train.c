/* `chutney train` and `chutney eval`: the benchmark models of
 * docs/benchmarks.md on Fashion-MNIST, with checkpoints and exact resume. */
#include "train.h"
#include "dataset.h"
#include "model_text.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>




static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

/* The benchmark definitions: batch, optimiser, learning rate. */
static void model_defaults(train_args *a) {
    if (a->epochs < 0) a->epochs = 2;
    bool mlp = !strcmp(a->model, "mlp");
    bool cnn = !strcmp(a->model, "cnn") || !strcmp(a->model, CN_TOOL_TEXT_MODEL) ||
               !strcmp(a->model, "onnx");
    if (a->batch <= 0) a->batch = mlp ? 128 : cnn ? 64 : 128;
    if (!a->optimizer) a->optimizer = mlp ? "sgd" : "adam";
    if (!(a->lr > 0)) a->lr = mlp ? 0.05 : 1e-3;
}

/* The mlp benchmark's SGD has momentum 0.9 unless --momentum says otherwise. */
static cn_optimizer *make_optimizer(const train_args *a, cn_tensor **params, int n) {
    return cn_tool_optim_make(a, params, n, !strcmp(a->model, "mlp") ? 0.9 : 0.0);
}

/* ---- data ---- */

/* The pixels stay u8 as stored (a quarter of f32's memory: 47 MB for the
 * training set instead of 188) and become f32 in [0, 1] batch by batch
 * (dataset: tools/dataset.h). */

static const double PIXEL_MEAN[1] = {0}, PIXEL_SCALE[1] = {255};

/* The data's description: Fashion-MNIST's unless --data says otherwise. */
static ds_info g_info = {.kind = DS_IDX, .ndim = 3, .shape = {1, 28, 28}, .nclasses = 10,
                         .scale255 = true};

/* A loader of d's batches: u8 pixels scaled to [0, 1] f32, then (training,
 * --augment) crop, flip and jitter, then the standardisation of
 * --standardize. Crops and flips go before the scaling, on the u8 bytes. */
static cn_loader *split_loader(const dataset *d, const cn_loader_opts *o, int augment) {
    cn_tensor *data[2] = {d->images, d->labels};
    cn_loader *l = cn_loader_new(data, 2, o);
    if (!l) return NULL;
    bool image = cn_ndim(d->images) == 4;
    int64_t h = image ? cn_dim(d->images, 2) : 0, w = image ? cn_dim(d->images, 3) : 0;
    int rc = 0;
    /* Padding of an eighth of the side (4 for CIFAR's 32): a shift the
     * model should not care about, not a different picture. */
    int64_t pad = (h < w ? h : w) / 8 > 0 ? (h < w ? h : w) / 8 : 1;
    if (image && (augment & DS_AUG_CROP)) rc = cn_loader_random_crop(l, 0, h, w, pad);
    if (!rc && image && (augment & DS_AUG_FLIP)) rc = cn_loader_random_hflip(l, 0, 0.5);
    if (!rc && cn_tensor_dtype(d->images) == CN_U8)
        rc = cn_loader_normalize(l, 0, PIXEL_MEAN, PIXEL_SCALE, 1);
    if (!rc && image && (augment & DS_AUG_JITTER)) rc = cn_loader_color_jitter(l, 0, 0.2, 0.2);
    if (!rc && image && g_info.nnorm) rc = cn_loader_normalize(l, 0, g_info.mean, g_info.std, g_info.nnorm);
    if (rc < 0) {
        cn_loader_free(l);
        return NULL;
    }
    return l;
}

static int load_split(const char *dir, bool train, int64_t limit, dataset *d) {
    d->images = d->labels = NULL;
    cn_scope_begin();
    cn_tensor *images, *labels;
    if (cn_load_fashion_mnist_u8(dir, train, &images, &labels) < 0) {
        cn_scope_end();
        return -1;
    }
    if (limit > 0 && limit < cn_shape(images)[0]) {
        /* Copies: a view of the first rows would keep the whole set alive. */
        images = cn_clone(cn_narrow(images, 0, 0, limit));
        labels = cn_clone(cn_narrow(labels, 0, 0, limit));
    }
    d->images = cn_keep(images);
    d->labels = cn_keep(labels);
    cn_scope_end();
    /* The whole split, when --limit cut it, is not asked for again. */
    cn_empty_cache();
    return d->images && d->labels ? 0 : -1;
}

/* --data's training and test splits, and g_info: Fashion-MNIST's IDX files
 * as ever, or (tools/dataset.h) image folders, CSV, .npy. With stats
 * (eval), g_info holds the checkpoint's description and keeps it. */
static int load_data(const train_args *a, const ds_spec *spec, bool stats, bool train,
                     dataset *tr, dataset *te) {
    tr->images = tr->labels = te->images = te->labels = NULL;
    if (cn_tool_data_kind(a->data, a->labels) == DS_IDX && (!stats || g_info.kind == DS_IDX)) {
        if ((train && load_split(a->data, true, a->limit, tr) < 0) ||
            load_split(a->data, false, a->limit, te) < 0) {
            fprintf(stderr, "chutney: cannot load Fashion-MNIST: %s\n", cn_last_error());
            return -1;
        }
        return 0;
    }
    if (cn_tool_data_load(spec, a->limit, stats, tr, te, &g_info) < 0) {
        fprintf(stderr, "chutney: cannot load %s: %s\n", a->data, cn_tool_error());
        return -1;
    }
    return 0;
}

static ds_spec spec_of(const train_args *a) {
    return (ds_spec){.data = a->data, .labels = a->labels, .target = a->target,
                     .features = a->features, .task = a->task, .height = a->height,
                     .width = a->width, .channels = a->channels, .val_split = a->val_split,
                     .standardize = a->standardize, .augment = a->augment, .audio = a->audio};
}

/* An ONNX file (its initializers the parameters), --model-file's text (its
 * own `dropout` p, else --dropout's, else torch's 0.5), or a built-in
 * model, for the data of g_info. */
static cn_module *make_model(const train_args *a) {
    int64_t nout = g_info.regress ? 1 : g_info.nclasses;
    if (!strcmp(a->model, "onnx"))
        return cn_tool_onnx_model(a->model_file, g_info.ndim, g_info.shape, nout, g_info.regress);
    if (!a->model_text) return cn_tool_make_model_for(a->model, g_info.ndim, g_info.shape, nout);
    cn_tool_text_shape s;
    const char *name = a->model_file ? a->model_file : "the checkpoint's model text";
    cn_module *m = cn_tool_model_text_parse(a->model_text, name, a->dropout >= 0 ? a->dropout : 0.5, &s);
    if (m && cn_tool_model_text_fits(&s, name, g_info.ndim, g_info.shape, nout) < 0) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}

static void free_split(dataset *d) {
    cn_release(d->images);
    cn_release(d->labels);
}

/* Accuracy of m (in eval mode) on d, in batches of `batch` (the training
 * batch: the test pass then needs no more memory than a training step;
 * bench/torch_train.py does the same). With logits, the [N, 10] logits go
 * there (owned by the caller's scope). Returns -1 on failure. */
static double evaluate(cn_module *m, const dataset *d, int64_t batch, const train_args *a,
                       cn_tensor **logits_out) {
    int64_t n = cn_shape(d->images)[0], correct = 0, nb = (n + batch - 1) / batch;
    double sse = 0; /* a regression's squared errors, in the standardised units */
    cn_loader *l = split_loader(d, &(cn_loader_opts){.batch_size = batch}, 0);
    cn_tensor **parts = logits_out ? calloc((size_t)(nb ? nb : 1), sizeof *parts) : NULL;
    if (!l || (logits_out && !parts)) {
        cn_loader_free(l);
        free(parts);
        return -1;
    }
    bool ok = true;
    cn_module_train(m, false);
    cn_no_grad_begin();
    for (int64_t b = 0; b < nb && ok; b++) {
        cn_scope_begin();
        cn_tensor *xy[2];
        bool got = cn_loader_next(l, xy) == 1;
        if (got && a->on_device) {
            xy[0] = cn_to(xy[0], a->device);
            xy[1] = cn_to(xy[1], a->device);
        }
        cn_tensor *logits = got ? cn_module_forward(m, xy[0]) : NULL;
        if (g_info.regress) {
            cn_tensor *se = cn_mse_loss(logits, xy[1], CN_REDUCTION_SUM);
            ok = se != NULL;
            if (ok) sse += cn_item(se);
        } else {
            cn_tensor *hit = cn_eq(cn_argmax(logits, 1, false), xy[1]);
            cn_tensor *nhit = cn_sum(cn_cast(hit, CN_I64), NULL, 0, false);
            ok = nhit != NULL;
            if (ok) correct += (int64_t)cn_item(nhit);
        }
        if (parts) parts[b] = cn_keep(logits);
        cn_scope_end();
    }
    cn_no_grad_end();
    cn_module_train(m, true);
    if (ok && logits_out) {
        *logits_out = nb ? cn_concat(parts, (int)nb, 0) : NULL;
        ok = *logits_out != NULL;
    }
    free(parts);
    cn_loader_free(l);
    /* A regression's figure is the RMSE in the target's own units. */
    if (ok && g_info.regress) return n ? sqrt(sse / (double)n) * g_info.y_std : 0;
    return ok ? (n ? (double)correct / (double)n : 0) : -1;
}

/* evaluate() for training's test passes; a failure is reported here.
 * Distributed, each rank takes its slice of the test set and the counts
 * are summed. */
static double test_accuracy(cn_module *m, const dataset *d, const train_args *a) {
    if (a->nranks > 1) {
        int64_t n = cn_shape(d->images)[0];
        int64_t lo = n * a->rank / a->nranks, hi = n * (a->rank + 1) / a->nranks;
        cn_scope_begin();
        dataset part = {.images = cn_narrow(d->images, 0, lo, hi - lo),
                        .labels = cn_narrow(d->labels, 0, lo, hi - lo)};
        double acc = hi > lo ? evaluate(m, &part, a->batch, a, NULL) : 0;
        cn_tensor *counts = cn_zeros(CN_F64, CN_SHAPE(2));
        if (acc >= 0) {
            cn_set(counts, (int64_t[]){0}, (double)llround(acc * (double)(hi - lo)));
            cn_set(counts, (int64_t[]){1}, (double)(hi - lo));
        }
        bool ok = acc >= 0 && cn_dist_allreduce(counts, CN_DIST_SUM) == 0;
        double all = ok ? cn_get(counts, (int64_t[]){1}) : 0;
        acc = ok ? (all > 0 ? cn_get(counts, (int64_t[]){0}) / all : 0) : -1;
        cn_scope_end();
        if (acc < 0) fprintf(stderr, "chutney: test pass failed: %s\n", cn_last_error());
        return acc;
    }
    double acc = evaluate(m, d, a->batch, a, NULL);
    if (acc < 0) fprintf(stderr, "chutney: test pass failed: %s\n", cn_last_error());
    return acc;
}

/* ---- checkpoints: model state, optimiser state, progress, RNG ---- */

#define MAX_STATE 256

int cn_tool_save_checkpoint(const char *path, const train_args *a, cn_module *m,
                            cn_optimizer *opt, int epochs_done, const char *const *xkeys,
                            const char *const *xvals, int nextra) {
    cn_tensor **mt = NULL, **ot = NULL, **st = NULL;
    const char **mn = NULL, **on = NULL, **sn = NULL;
    int nm = cn_module_state(m, &mt, &mn);
    int no = cn_optimizer_state(opt, &ot, &on);
    int ns = a->sched ? cn_lr_scheduler_state(a->sched, &st, &sn) : 0;
    int rc = -1;
    if (nm < 0 || no < 0 || ns < 0) goto out;
    int total = nm + no + ns;
    const char **names = malloc(sizeof *names * (size_t)total);
    cn_tensor **tensors = malloc(sizeof *tensors * (size_t)total);
    char **owned = malloc(sizeof *owned * (size_t)(no + ns ? no + ns : 1));
    if (!names || !tensors || !owned) {
        free(names);
        free(tensors);
        free(owned);
        goto out;
    }
    for (int i = 0; i < nm; i++) {
        names[i] = mn[i];
        tensors[i] = mt[i];
    }
    for (int i = 0; i < no; i++) {
        size_t len = strlen(on[i]) + 11;
        owned[i] = malloc(len);
        if (owned[i]) snprintf(owned[i], len, "optimizer.%s", on[i]);
        names[nm + i] = owned[i] ? owned[i] : "";
        tensors[nm + i] = ot[i];
    }
    for (int i = 0; i < ns; i++) {
        size_t len = strlen(sn[i]) + 11;
        owned[no + i] = malloc(len);
        if (owned[no + i]) snprintf(owned[no + i], len, "scheduler.%s", sn[i]);
        names[nm + no + i] = owned[no + i] ? owned[no + i] : "";
        tensors[nm + no + i] = st[i];
    }
    uint64_t seed, offset;
    cn_rng_get_state(&seed, &offset);
    char epochs_s[32], seed_s[32], offset_s[32], lr_s[64], batch_s[32];
    snprintf(epochs_s, sizeof epochs_s, "%d", epochs_done);
    snprintf(seed_s, sizeof seed_s, "%llu", (unsigned long long)seed);
    snprintf(offset_s, sizeof offset_s, "%llu", (unsigned long long)offset);
    snprintf(lr_s, sizeof lr_s, "%.17g", a->lr);
    snprintf(batch_s, sizeof batch_s, "%lld", (long long)a->batch);
    char run_seed[32];
    snprintf(run_seed, sizeof run_seed, "%llu", (unsigned long long)a->seed);
    char device_s[32]; /* informative: a checkpoint loads on any device */
    cn_device_str(a->device, device_s, sizeof device_s);
    enum { NBASE = 10, MAXEXTRA = 32, MAXRUN = TO_NSLOTS + 7 };
    const char *keys[NBASE + MAXRUN + MAXEXTRA] = {"format", "model", "optimizer", "epochs_done",
                                                   "rng_seed", "rng_offset", "lr", "batch", "seed",
                                                   "device"};
    const char *vals[NBASE + MAXRUN + MAXEXTRA] = {"chutney-train-1", a->model, a->optimizer,
                                                   epochs_s, seed_s, offset_s, lr_s, batch_s,
                                                   run_seed, device_s};
    /* The optimiser's and schedule's settings, clipping, dropout and a
     * text model: what a resume rebuilds the run from. */
    char run_buf[TO_NSLOTS + 7][40]; /* indexed by nrun, which counts every key */
    int nrun = 0;
    cn_tool_optim_meta(a, keys + NBASE, vals + NBASE, run_buf, &nrun);
    if (a->clip >= 0) {
        snprintf(run_buf[nrun], 40, "%.17g", a->clip);
        keys[NBASE + nrun] = "clip";
        vals[NBASE + nrun] = run_buf[nrun];
        nrun++;
    }
    if (a->dropout >= 0 && a->model_text) {
        snprintf(run_buf[nrun], 40, "%.17g", a->dropout);
        keys[NBASE + nrun] = "dropout";
        vals[NBASE + nrun] = run_buf[nrun];
        nrun++;
    }
    if (a->model_text) {
        keys[NBASE + nrun] = "model_text";
        vals[NBASE + nrun++] = a->model_text;
    }
    if (a->precision >= 0) {
        keys[NBASE + nrun] = "precision";
        vals[NBASE + nrun++] = cn_dtype_name((cn_dtype)a->precision);
    }
    if (a->scaler) {
        cn_grad_scaler_state gs = cn_grad_scaler_get_state(a->scaler);
        static const char *const gkeys[3] = {"loss_scale", "loss_scale_growth",
                                             "loss_scale_skipped"};
        snprintf(run_buf[nrun], 40, "%.17g", gs.scale);
        snprintf(run_buf[nrun + 1], 40, "%lld", (long long)gs.growth_tracker);
        snprintf(run_buf[nrun + 2], 40, "%lld", (long long)gs.skipped);
        for (int i = 0; i < 3; i++, nrun++) {
            keys[NBASE + nrun] = gkeys[i];
            vals[NBASE + nrun] = run_buf[nrun];
        }
    }
    if (nextra > MAXEXTRA) nextra = MAXEXTRA; /* the tools' own use: far fewer */
    for (int i = 0; i < nextra; i++) {
        keys[NBASE + nrun + i] = xkeys[i];
        vals[NBASE + nrun + i] = xvals[i];
    }
    rc = cn_save_safetensors(path, names, tensors, total, keys, vals, NBASE + nrun + nextra);
    for (int i = 0; i < no + ns; i++) free(owned[i]);
    free(owned);
    free(names);
    free(tensors);
out:
    free(mt);
    free(mn);
    free(ot);
    free(on);
    free(st);
    free(sn);
    return rc;
}

/* Metadata read strictly: a value that is not exactly a number in range is
 * a damaged or foreign file, never a silent 0 (atoi) or a wrapped count
 * that changes how many epochs run. A missing key leaves *out alone. */
static int meta_int(cn_checkpoint *c, const char *path, const char *key, long long lo,
                    long long hi, long long *out) {
    const char *s = cn_checkpoint_metadata(c, key);
    if (!s) return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    /* strtoll skips leading spaces and takes a '+': neither is written. */
    if (!*s || *s == ' ' || *s == '+' || *end || errno || v < lo || v > hi) {
        cn_tool_fail("%s: metadata %s is '%.40s', not a whole number from %lld to %lld (the "
                     "checkpoint is damaged or was not written by chutney train)",
                     path, key, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int meta_u64(cn_checkpoint *c, const char *path, const char *key, uint64_t *out) {
    const char *s = cn_checkpoint_metadata(c, key);
    if (!s) return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s < '0' || *s > '9' || *end || errno) {
        cn_tool_fail("%s: metadata %s is '%.40s', not a whole number from 0 to 2^64 - 1 (the "
                     "checkpoint is damaged or was not written by chutney train)",
                     path, key, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int meta_double(cn_checkpoint *c, const char *path, const char *key, double *out) {
    const char *s = cn_checkpoint_metadata(c, key);
    if (!s) return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *s == ' ' || *end || errno || !isfinite(v) || v < 0) {
        cn_tool_fail("%s: metadata %s is '%.40s', not a finite number of 0 or more (the "
                     "checkpoint is damaged or was not written by chutney train)",
                     path, key, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* How far the run got, and its settings, strictly from c's metadata. */
static int read_progress(cn_checkpoint *c, const char *path, cn_tool_progress *p) {
    long long epochs = 0, batches = 0, correct = 0, seen = 0, batch = 0;
    *p = (cn_tool_progress){0};
    if (meta_int(c, path, "epochs_done", 0, 1000000, &epochs) < 0 ||
        meta_int(c, path, "batches_done", 0, INT64_MAX, &batches) < 0 ||
        meta_int(c, path, "epoch_correct", 0, INT64_MAX, &correct) < 0 ||
        meta_int(c, path, "epoch_seen", 0, INT64_MAX, &seen) < 0 ||
        meta_int(c, path, "batch", 1, INT32_MAX, &batch) < 0 ||
        meta_double(c, path, "epoch_loss_sum", &p->loss_sum) < 0 ||
        meta_double(c, path, "lr", &p->lr) < 0)
        return -1;
    p->epochs_done = (int)epochs;
    p->batches_done = batches;
    p->correct = correct;
    p->seen = seen;
    p->batch = batch;
    if (cn_checkpoint_metadata(c, "loss_scale")) {
        long long growth = 0, skipped = 0;
        if (meta_double(c, path, "loss_scale", &p->loss_scale.scale) < 0 ||
            meta_int(c, path, "loss_scale_growth", 0, INT64_MAX, &growth) < 0 ||
            meta_int(c, path, "loss_scale_skipped", 0, INT64_MAX, &skipped) < 0)
            return -1;
        if (!(p->loss_scale.scale > 0) || !isfinite(p->loss_scale.scale)) {
            cn_tool_fail("%s: metadata loss_scale %g is not a positive finite number", path,
                         p->loss_scale.scale);
            return -1;
        }
        p->loss_scale.growth_tracker = growth;
        p->loss_scale.skipped = skipped;
        p->has_loss_scale = true;
    }
    return 0;
}

int cn_tool_restore_scaler(cn_grad_scaler *s, const cn_tool_progress *p) {
    if (!s || !p->has_loss_scale) return 0;
    if (cn_grad_scaler_set_state(s, &p->loss_scale) < 0) {
        fprintf(stderr, "chutney: %s\n", cn_last_error());
        return -1;
    }
    return 0;
}

int cn_tool_load_checkpoint(const char *path, const char *model, cn_module *m, cn_optimizer *opt,
                            int *epochs_done) {
    cn_tool_progress p;
    int rc = cn_tool_load_checkpoint_ex(path, model, m, opt, &p);
    *epochs_done = rc == 0 ? p.epochs_done : 0;
    return rc;
}

int cn_tool_load_checkpoint_ex(const char *path, const char *model, cn_module *m,
                               cn_optimizer *opt, cn_tool_progress *progress) {
    *progress = (cn_tool_progress){0};
    cn_checkpoint *c = cn_load_safetensors(path);
    if (!c) return -1;
    int rc = -1;
    const char *fmt = cn_checkpoint_metadata(c, "format");
    const char *saved_model = cn_checkpoint_metadata(c, "model");
    if (!fmt || strcmp(fmt, "chutney-train-1") != 0) {
        cn_tool_fail("%s is not a checkpoint written by chutney train", path);
        goto out;
    }
    if (!saved_model || strcmp(saved_model, model) != 0) {
        char was[64], want[64];
        bool text = saved_model && !strcmp(saved_model, CN_TOOL_TEXT_MODEL);
        snprintf(was, sizeof was, text ? "--model-file" : "'%s'", saved_model ? saved_model : "?");
        snprintf(want, sizeof want, strcmp(model, CN_TOOL_TEXT_MODEL) ? "'%s'" : "--model-file", model);
        cn_tool_fail("%s holds a %s model, not %s", path, was, want);
        goto out;
    }
    /* int8 weights (chutney quantize): the model takes their form first. */
    const char *quant = cn_checkpoint_metadata(c, "quantized");
    if (quant && strcmp(quant, "int8")) {
        cn_tool_fail("%s: metadata quantized is '%.20s', not int8", path, quant);
        goto out;
    }
    if (quant && opt) {
        cn_tool_fail("%s holds int8 weights (chutney quantize): it can be evaluated, not "
                     "trained further", path);
        goto out;
    }
    if (quant && cn_module_quantize_int8(m) < 0) goto out;
    /* Before any state is copied: a bad value refuses the whole file. */
    uint64_t rng_seed = 0, rng_offset = 0;
    bool has_rng = cn_checkpoint_metadata(c, "rng_seed") && cn_checkpoint_metadata(c, "rng_offset");
    if (read_progress(c, path, progress) < 0 || meta_u64(c, path, "rng_seed", &rng_seed) < 0 ||
        meta_u64(c, path, "rng_offset", &rng_offset) < 0)
        goto out;
    if (opt && !cn_checkpoint_metadata(c, "epochs_done")) {
        cn_tool_fail("%s has no epochs_done metadata: it cannot say where to resume", path);
        goto out;
    }
    cn_tensor **mt = NULL;
    const char **mn = NULL;
    int nm = cn_module_state(m, &mt, &mn);
    if (nm < 0) goto out;
    int ok = 0;
    cn_no_grad_begin();
    for (int i = 0; i < nm && ok == 0; i++) {
        cn_tensor *src = cn_checkpoint_find(c, mn[i]);
        if (!src) {
            cn_tool_fail("%s has no '%s': it was saved from a different model", path, mn[i]);
            ok = -1;
            break;
        }
        char b1[128], b2[128];
        bool same = cn_ndim(src) == cn_ndim(mt[i]) && cn_tensor_dtype(src) == cn_tensor_dtype(mt[i]);
        for (int k = 0; same && k < cn_ndim(src); k++) same = cn_shape(src)[k] == cn_shape(mt[i])[k];
        if (!same) {
            cn_tool_fail("%s: '%s' is %s in the file, the model has %s", path, mn[i],
                         cn_shape_str(src, b1, sizeof b1), cn_shape_str(mt[i], b2, sizeof b2));
            ok = -1;
            break;
        }
        ok = cn_copy_(mt[i], src);
    }
    cn_no_grad_end();
    free(mt);
    free(mn);
    if (ok < 0) goto out;
    if (opt) {
        /* The optimiser's entries, without their "optimizer." prefix. */
        int n = cn_checkpoint_count(c), k = 0;
        const char **names = malloc(sizeof *names * (size_t)(n ? n : 1));
        cn_tensor **tensors = malloc(sizeof *tensors * (size_t)(n ? n : 1));
        if (!names || !tensors) {
            free(names);
            free(tensors);
            goto out;
        }
        /* The hyper-parameters (the lr aside: cn_tool_resume_settings)
         * are this run's: the optimiser was built from the checkpoint's
         * settings and any given again on the command line, which win. */
        cn_scope_begin();
        cn_tensor **ft = NULL;
        const char **fn = NULL;
        int nf = cn_optimizer_state(opt, &ft, &fn);
        for (int i = 0; i < n; i++) {
            const char *name = cn_checkpoint_name(c, i);
            if (!strncmp(name, "optimizer.", 10)) {
                names[k] = name + 10;
                tensors[k] = cn_checkpoint_tensor(c, i);
                for (int f = 0; f < nf; f++)
                    if (cn_ndim(ft[f]) == 0 && !strcmp(fn[f], names[k]) && strcmp(fn[f], "lr") &&
                        strcmp(fn[f], "initial_lr"))
                        tensors[k] = cn_clone(ft[f]);
                k++;
            }
        }
        int lrc = nf < 0 ? -1 : cn_optimizer_load_state(opt, names, tensors, k);
        cn_scope_end();
        free(ft);
        free(fn);
        free(names);
        free(tensors);
        if (lrc < 0) goto out;
        if (has_rng) cn_rng_set_state(rng_seed, rng_offset);
    }
    rc = 0;
out:
    cn_checkpoint_free(c);
    return rc;
}

int cn_tool_resume_settings(train_args *a, const train_args *given, cn_optimizer *opt,
                            const cn_tool_progress *p) {
    bool lr_given = given->lr > 0, batch_given = given->batch > 0;
    /* The optimiser's state brought the saved lr back with it. */
    double saved_lr = p->lr > 0 ? p->lr : cn_optimizer_get_lr(opt);
    if (lr_given) {
        if (cn_optimizer_set_lr(opt, a->lr) < 0) {
            fprintf(stderr, "chutney: %s\n", cn_last_error());
            return CN_TOOL_FAILED;
        }
    } else {
        a->lr = cn_optimizer_get_lr(opt);
    }
    if (!batch_given && p->batch > 0) a->batch = p->batch;
    if (p->batches_done > 0 && p->batch > 0 && a->batch != p->batch) {
        fprintf(stderr,
                "chutney train: --batch %lld: %s stopped in epoch %d after %lld batches of %lld; "
                "that epoch can only be finished with the same batch size (drop --batch, or "
                "resume from a checkpoint written at the end of an epoch)\n",
                (long long)a->batch, a->resume, p->epochs_done + 1, (long long)p->batches_done,
                (long long)p->batch);
        return CN_TOOL_USAGE;
    }
    if (p->batches_done > 0 && a->nranks > 1) {
        fprintf(stderr, "chutney train: %s stopped in the middle of epoch %d; a distributed run "
                        "resumes only from the end of an epoch\n", a->resume, p->epochs_done + 1);
        return CN_TOOL_USAGE;
    }
    if (!a->quiet) {
        char where[96] = "";
        if (p->batches_done > 0)
            snprintf(where, sizeof where, " and %lld batches of epoch %d",
                     (long long)p->batches_done, p->epochs_done + 1);
        char lr_s[96], batch_s[96];
        if (lr_given && a->lr != saved_lr)
            snprintf(lr_s, sizeof lr_s, "lr %g from --lr (the checkpoint's was %g)", a->lr, saved_lr);
        else
            snprintf(lr_s, sizeof lr_s, "lr %g %s", a->lr, lr_given ? "(--lr, as saved)" : "(saved)");
        if (batch_given && p->batch > 0 && a->batch != p->batch)
            snprintf(batch_s, sizeof batch_s, "batch %lld from --batch (the checkpoint's was %lld)",
                     (long long)a->batch, (long long)p->batch);
        else
            snprintf(batch_s, sizeof batch_s, "batch %lld %s", (long long)a->batch,
                     batch_given ? "(--batch, as saved)" : p->batch > 0 ? "(saved)" : "(default)");
        fprintf(stderr, "resuming %s: %d epoch%s done%s; %s, %s\n", a->resume, p->epochs_done,
                p->epochs_done == 1 ? "" : "s", where, lr_s, batch_s);
    }
    return 0;
}

int cn_tool_skip_batches(cn_loader *l, int64_t n, const char *resume) {
    int64_t nb = cn_loader_num_batches(l);
    if (n > nb) {
        fprintf(stderr, "chutney: %s stopped after %lld batches of its epoch, but this run's "
                        "epochs have %lld (--limit or the data changed)\n", resume, (long long)n,
                (long long)nb);
        return -1;
    }
    for (int64_t b = 0; b < n; b++) {
        cn_scope_begin();
        cn_tensor *batch[2];
        int r = cn_loader_next(l, batch);
        cn_scope_end();
        if (r != 1) {
            fprintf(stderr, "chutney: cannot skip the %lld batches already trained: %s\n",
                    (long long)n, r < 0 ? cn_last_error() : "the epoch ended early");
            return -1;
        }
    }
    return 0;
}

/* ---- stopping on a signal ---- */

static volatile sig_atomic_t stop_signal;
static struct sigaction old_int, old_term;

static void on_stop_signal(int sig) {
    if (stop_signal) {
        /* The second: the user means now. Nothing but async-signal-safe calls. */
        cn_remove_temporary_files();
        static const char msg[] = "\nchutney: stopped at once (second signal); no checkpoint written\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(128 + sig);
    }
    stop_signal = sig;
}

void cn_tool_signals_begin(void) {
    stop_signal = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    /* Both handled one at a time: a SIGTERM during the SIGINT handler is the second. */
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sa.sa_flags = SA_RESTART; /* reads and writes of the step go on */
    sigaction(SIGINT, NULL, &old_int);
    sigaction(SIGTERM, NULL, &old_term);
    /* An ignored SIGINT (a background job, nohup) stays ignored. */
    if (old_int.sa_handler != SIG_IGN) sigaction(SIGINT, &sa, NULL);
    if (old_term.sa_handler != SIG_IGN) sigaction(SIGTERM, &sa, NULL);
}

int cn_tool_stop_signal(void) { return stop_signal; }

int cn_tool_next_batch(cn_loader *l, cn_tensor **batch) {
    int got = cn_loader_next(l, batch);
    if (got == 1) return 0;
    fprintf(stderr, "chutney: %s\n", got < 0 ? cn_last_error() : "the loader ended the epoch early");
    return -1;
}

void cn_tool_signals_end(void) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
}

int cn_tool_save_progress(const char *path, const train_args *a, cn_module *m,
                          cn_optimizer *opt, const cn_tool_progress *p, const char *const *xkeys,
                          const char *const *xvals, int nextra) {
    enum { NP = 4, MAXX = 28 };
    char v[NP][40];
    snprintf(v[0], sizeof v[0], "%lld", (long long)p->batches_done);
    snprintf(v[1], sizeof v[1], "%.17g", p->loss_sum);
    snprintf(v[2], sizeof v[2], "%lld", (long long)p->correct);
    snprintf(v[3], sizeof v[3], "%lld", (long long)p->seen);
    const char *keys[NP + MAXX] = {"batches_done", "epoch_loss_sum", "epoch_correct", "epoch_seen"};
    const char *vals[NP + MAXX] = {v[0], v[1], v[2], v[3]};
    if (nextra > MAXX) nextra = MAXX;
    for (int i = 0; i < nextra; i++) {
        keys[NP + i] = xkeys[i];
        vals[NP + i] = xvals[i];
    }
    return cn_tool_save_checkpoint(path, a, m, opt, p->epochs_done, keys, vals, NP + nextra);
}

int cn_tool_stopped(int sig, const char *saved, const cn_tool_progress *p, int64_t nbatches) {
    const char *name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
    char where[96];
    if (p->batches_done > 0)
        snprintf(where, sizeof where, "after batch %lld of %lld of epoch %d",
                 (long long)p->batches_done, (long long)nbatches, p->epochs_done + 1);
    else
        snprintf(where, sizeof where, "after epoch %d", p->epochs_done);
    if (saved)
        fprintf(stderr, "\nchutney: stopped by %s %s; checkpoint saved to %s (--resume %s goes "
                        "on from there)\n", name, where, saved, saved);
    else
        fprintf(stderr, "\nchutney: stopped by %s %s; no checkpoint written (train with --save "
                        "FILE to keep the progress)\n", name, where);
    return 128 + sig;
}

/* ---- progress ---- */

static void progress(bool tty, int epoch, int epochs, int64_t done, int64_t total, double loss,
                     double acc, double sps, double elapsed) {
    double left = done > 0 ? elapsed * (double)(total - done) / (double)done : 0;
    if (tty) {
        int width = 24, filled = total ? (int)(width * done / total) : width;
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr,
                "\repoch %d/%d [%s] %lld/%lld  loss %.4f  acc %5.2f%%  %6.0f samples/s  "
                "%3.0fs left ",
                epoch, epochs, bar, (long long)done, (long long)total, loss, 100 * acc, sps, left);
        fflush(stderr);
    } else {
        fprintf(stderr, "epoch %d/%d: batch %lld/%lld  loss %.4f  acc %.2f%%  %.0f samples/s\n",
                epoch, epochs, (long long)done, (long long)total, loss, 100 * acc, sps);
    }
}

/* ---- the commands ---- */

static void train_usage(FILE *f) {
    fprintf(f,
            "usage: chutney train --model {mlp,cnn,lstm} [--epochs N] [--batch B] [--lr X]\n"
            "                     [--optimizer {sgd,adam,adamw,rmsprop,adagrad}] [--threads T]\n"
            "                     [--seed S] [--data DIR] [--save FILE] [--save-every N]\n"
            "                     [--resume FILE] [--limit N] [--mode {eager,static}]\n"
            "                     [--device DEV] [--json] [--precision {f32,bf16,f16}]\n"
            "                     [--distributed] [--log FILE] [--tensorboard DIR]\n"
            "                     [--profile TRACE.json [--profile-steps N]]\n"
            "                     [--target COL] [--features a,b] [--task T] [--labels Y.npy]\n"
            "                     [--image-size HxW] [--channels C] [--val-split F]\n"
            "                     [--standardize] [--augment crop,flip,jitter]\n"
            "                     [--n-fft N] [--hop N] [--n-mels N] [--fmin HZ] [--fmax HZ]\n"
            "                     [--clip-seconds S]\n"
            "       chutney train --model-file FILE [the options above] [--dropout P]\n"
            "       chutney train --model-file MODEL.onnx [the options above]\n"
            "       chutney train --resume CKPT [--epochs N] [any option, to change it]\n"
            "       chutney train --model gpt --data FILE.txt [--vocab V] [--context T]\n"
            "                     [--layers L] [--heads H] [--embed E] [--dropout P] [--clip C]\n"
            "                     [--rope] [--epochs N] [--batch B] [--lr X] [--limit N] [--mode M]\n"
            "                     [--precision P]\n"
            "                     [--threads T] [--seed S] [--save FILE] [--save-every N]\n"
            "                     [--resume FILE] [--json] [--log FILE] [--tensorboard DIR]\n"
            "                     [--save-tokens PREFIX]\n"
            "\n"
            "gpt: a GPT language model on a plain-text file (docs/training.md): a BPE\n"
            "tokenizer of --vocab ids (default 512) is trained on the first 90%% of the text\n"
            "and saved in checkpoints; the last 10%% is for validation. Windows of --context\n"
            "tokens (64); 4 layers, 4 heads, 128 wide, dropout 0; AdamW lr 1e-3, betas\n"
            "0.9/0.95, weight decay 0.1 on matrices, gradients clipped to norm --clip (1);\n"
            "batch 16; 1 epoch. Each epoch reports the validation loss and perplexity, and\n"
            "the unigram baseline. --limit N uses the first N training and validation\n"
            "windows. --rope: rotary position embeddings (each head's q and k turned by\n"
            "position) instead of a learned position embedding.\n"
            "--save-tokens PREFIX writes the token ids of both parts (after --limit) to\n"
            "PREFIX.train.npy and PREFIX.val.npy, for another framework to train on the\n"
            "same tokens (bench/torch_gpt.py).\n"
            "`chutney generate --load FILE` continues a prompt with the model.\n"
            "\n"
            "--model-file FILE: a network as a text of layers, one per line (`input 1 28\n"
            "28`, `conv2d 32 kernel=3 padding=1`, `relu`, `maxpool2d 2`, `flatten`,\n"
            "`linear 10`, ...; docs/model-format.md, examples/models/cnn.txt), its\n"
            "shapes checked as it is read; defaults as cnn's. The checkpoint keeps the\n"
            "text: resume, eval, export and predict need only the checkpoint.\n"
            "\n"
            "The optimiser and schedule, for every model (docs/training.md):\n"
            "  --momentum M, --dampening D, --nesterov (sgd; momentum also rmsprop)\n"
            "  --weight-decay W (all), --betas B1,B2, --amsgrad (adam, adamw)\n"
            "  --eps E (adam, adamw, rmsprop, adagrad), --alpha A, --centered (rmsprop)\n"
            "  --lr-decay D, --initial-accumulator V (adagrad)\n"
            "  --schedule step --step-size N [--gamma G]; --schedule exponential --gamma G;\n"
            "  --schedule cosine [--t-max N] [--eta-min X]; --schedule linear\n"
            "  [--start-factor A] [--end-factor B] [--total-iters N]; --warmup N\n"
            "  [--warmup-factor F]: per step, torch.optim.lr_scheduler's formulas\n"
            "  --clip C (gradient norm), --label-smoothing E (cross-entropy),\n"
            "  --dropout P (a model file's dropout lines without a p; gpt)\n"
            "Each is saved in the checkpoint and comes back on --resume unless given.\n"
            "--config FILE: options as `key = value` lines (`weight-decay = 1e-4`, `#`\n"
            "comments); the command line wins over the file.\n"
"--model-file MODEL.onnx: your own model, e.g. exported untrained from PyTorch\n"
            "(docs/training.md, \"Your own model: ONNX\"): its float initializers are the\n"
            "parameters; one input, the batch (a symbolic batch size), and one output, the\n"
            "logits (classes: cross-entropy) or one value (--task regress: MSE), checked\n"
            "against the data before training. BatchNormalization and Dropout train as in\n"
            "PyTorch. Defaults as cnn. Checkpoints keep a hash of the file (a resume\n"
            "or eval from another file is refused; give --model-file again to resume);\n"
            "`chutney export --load FILE --output OUT.onnx` writes the trained model,\n"
            "which `chutney run` runs.\n"
            "\n"
            "Defaults are the benchmark workloads of docs/benchmarks.md: mlp = SGD lr 0.05\n"
            "momentum 0.9 batch 128; cnn = Adam lr 1e-3 batch 64; lstm = Adam lr 1e-3 batch\n"
            "128; 2 epochs; seed 1; data in " DEFAULT_DATA ".\n"
            "Every option is checked before the data is read: a bad value, a --save whose\n"
            "directory is missing, a --resume file that is not there stop at once.\n"
            "--save writes a checkpoint after every epoch, and after every N steps with\n"
            "--save-every N; --resume continues one exactly (--lr, --batch and the options\n"
            "above given then win over the checkpoint's). SIGINT or SIGTERM saves the\n"
            "progress to --save after the current step and exits 130 or 143. Checkpoints\n"
            "carry a CRC-32C checked on every load.\n"
            "--limit uses only the first N training and test images (quick checks).\n"
            "--profile writes a Chrome trace of --profile-steps steps (10) after two of\n"
            "warm-up; `chutney profile TRACE.json` prints the time by op (docs/profiling.md).\n"
            "--mode static (the default) compiles forward, backward and the optimiser\n"
            "update into one program (graph passes, fusion, memory planning) and runs it\n"
            "per batch; --mode eager runs each op as it is called (the same losses).\n"
            "--precision bf16 or f16: mixed precision (autocast): matmul, convolution and\n"
            "attention take their inputs rounded to that type and sum in f32; weights,\n"
            "gradients, norms and losses stay f32; f16 scales the loss (skipping steps\n"
            "whose gradients overflow). Kept in the checkpoint. `chutney --version` says\n"
            "whether this CPU multiplies bf16 itself (docs/training.md).\n"
            "--device cpu (the default), opencl or opencl:N: where the model lives and\n"
            "the steps run (`chutney devices` lists them); checkpoints load on any device.\n"
            "--distributed: run as one rank of `mpirun -np N chutney train ...` (or srun):\n"
            "data-parallel, each rank trains on its shard of every global batch (--batch\n"
            "per rank, so the global batch is N times it), gradients averaged over the\n"
            "ranks; rank 0 prints and writes checkpoints; the test pass is split.\n"
            "--log FILE writes one JSON line per step (loss, lr, gradient norm, samples/s,\n"
            "memory) and per epoch (train loss, test accuracy or validation loss), flushed\n"
            "as it goes (`chutney plot FILE -o curves.png` draws them); --tensorboard DIR\n"
            "writes the same figures as a TensorBoard event file in DIR. A write that\n"
            "fails is reported and training goes on; the exit status is then 1.\n"
            "Your own data (docs/training.md, \"Data\"): --data DIR of class folders of\n"
            "images (train/ and test/ inside, or --val-split F held out, default 0.2),\n"
            "--data FILE.csv --target COLUMN [--features a,b] [--task classify|regress],\n"
            "--data DIR with x.npy and y.npy, or --data X.npy --labels Y.npy. Images:\n"
            "--image-size HxW, --channels 1|3, --standardize (per-channel mean/std),\n"
            "--augment crop,flip,jitter (training only, seeded). Class folders of WAV\n"
            "files: each clip, padded or cut to --clip-seconds (default: the longest\n"
            "training clip), becomes a log-mel spectrogram [1, n_mels, frames]: --n-fft\n"
            "(512), --hop (n_fft/2), --n-mels (40), --fmin (0), --fmax (half the rate)\n"
            "Hz; every clip must have the first one's sample rate. The checkpoint keeps\n"
            "the shape, classes, statistics and audio settings for eval and predict.\n"
            "Exit status: 0 done, 1 a failure (data, files, device), 2 a bad command line.\n");
}

static void eval_usage(FILE *f) {
    fprintf(f,
            "usage: chutney eval [--model {mlp,cnn,lstm}] --load FILE [--data DIR] [--threads T]\n"
            "                    [--limit N] [--logits OUT.npy] [--device DEV] [--json]\n"
            "                    [--precision {f32,bf16,f16}]\n"
            "\n"
            "The test accuracy of a checkpoint written by `chutney train --save`\n"
            "(a regression's: the test RMSE). Its model is the checkpoint's (a\n"
            "--model-file model's text is in it); --model only checks it. A\n"
            "checkpoint of your own data is evaluated on its test split, read as\n"
            "training read it (--data only if the data moved).\n"
            "--logits writes the model's logits for the test images ([N, 10] f32 .npy).\n"
            "--limit uses only the first N test images; data in " DEFAULT_DATA ".\n"
            "--precision bf16 or f16: the products in that type (autocast; default f32).\n"
            "Exit status: 0 done, 1 a failure (data, files, device), 2 a bad command line.\n");
}

/* The options of train and eval: what each takes (NULL: a flag), for
 * "needs a value" and "did you mean"; train's optimiser and schedule
 * options are train_opts.c's table, which find_option also asks. */
enum { FOR_TRAIN = 1, FOR_EVAL = 2, FOR_BOTH = 3 };
typedef struct option_info {
    const char *name, *value;
    int cmds;
} option_info;

static const option_info options[] = {
    {"--model", "mlp, cnn or lstm (train: or gpt)", FOR_BOTH},
    {"--model-file", "a model file of layers (docs/model-format.md) or an ONNX model (.onnx)", FOR_BOTH},
    {"--config", "a file of 'key = value' lines (docs/training.md)", FOR_TRAIN},
    {"--epochs", "the number of epochs (0 or more)", FOR_TRAIN},
    {"--batch", "the batch size (1 or more)", FOR_TRAIN},
    {"--lr", "a learning rate such as 0.01", FOR_TRAIN},
    {"--optimizer", "sgd, adam, adamw, rmsprop or adagrad", FOR_TRAIN},
    {"--threads", "the number of threads (1 or more)", FOR_BOTH},
    {"--seed", "a whole number", FOR_BOTH},
    {"--data", "the directory of Fashion-MNIST's files (gpt: a text file)", FOR_BOTH},
    {"--save", "a checkpoint file to write", FOR_TRAIN},
    {"--resume", "a checkpoint file written by --save", FOR_TRAIN},
    {"--load", "a checkpoint file written by train --save", FOR_EVAL},
    {"--logits", "an .npy file to write", FOR_EVAL},
    {"--limit", "the number of images to use (1 or more)", FOR_BOTH},
    {"--mode", "static or eager", FOR_TRAIN},
    {"--precision", "f32, bf16 or f16 (mixed precision)", FOR_TRAIN},
    {"--device", "a device such as cpu, opencl:0 or cuda:0", FOR_BOTH},
    {"--json", NULL, FOR_BOTH},
    {"--distributed", NULL, FOR_TRAIN},
    {"--vocab", "the tokenizer's vocabulary size (257 or more)", FOR_TRAIN},
    {"--context", "the window of tokens (1 or more)", FOR_TRAIN},
    {"--layers", "the number of transformer blocks (1 or more)", FOR_TRAIN},
    {"--heads", "the number of attention heads (1 or more)", FOR_TRAIN},
    {"--embed", "the embedding width (a multiple of --heads)", FOR_TRAIN},
    {"--dropout", "a dropout probability in [0, 1)", FOR_TRAIN},
    {"--clip", "the gradient norm to clip to (0: none)", FOR_TRAIN},
    {"--rope", NULL, FOR_TRAIN},
    {"--save-tokens", "a path prefix for PREFIX.train.npy and PREFIX.val.npy", FOR_TRAIN},
    {"--log", "a file to write one JSON line per step and epoch", FOR_TRAIN},
    {"--tensorboard", "a directory for TensorBoard event files", FOR_TRAIN},
    {"--profile", "a Chrome trace file to write (docs/profiling.md)", FOR_TRAIN},
    {"--profile-steps", "the number of steps to profile (1 or more)", FOR_TRAIN},
    {"--save-every", "the number of steps between checkpoints (1 or more)", FOR_TRAIN},
    {"--labels", "the labels' .npy file for --data X.npy", FOR_TRAIN},
    {"--target", "the CSV column to learn (a header name or a 0-based index)", FOR_TRAIN},
    {"--features", "the CSV columns to read, such as a,b,c", FOR_TRAIN},
    {"--task", "classify or regress", FOR_TRAIN},
    {"--image-size", "HxW, such as 32x32", FOR_TRAIN},
    {"--channels", "1 (grey) or 3 (RGB)", FOR_TRAIN},
    {"--val-split", "the fraction held out for testing, such as 0.2", FOR_TRAIN},
    {"--augment", "crop, flip, jitter, or a list such as crop,flip", FOR_TRAIN},
    {"--standardize", NULL, FOR_TRAIN},
    {"--n-fft", "the spectrogram's window in samples, such as 512", FOR_TRAIN},
    {"--hop", "the samples between frames, such as 256", FOR_TRAIN},
    {"--n-mels", "the number of mel filters, such as 40", FOR_TRAIN},
    {"--fmin", "the lowest frequency in Hz, such as 0", FOR_TRAIN},
    {"--fmax", "the highest frequency in Hz, such as 8000", FOR_TRAIN},
    {"--clip-seconds", "the clips' length in seconds, such as 1", FOR_TRAIN},
    {"--help", NULL, FOR_BOTH},
};
#define NOPTIONS (int)(sizeof options / sizeof options[0])

static const char *const optimizers[] = {"sgd", "adam", "adamw", "rmsprop", "adagrad"};
static const char *const modes[] = {"static", "eager"};
static const char *const tasks[] = {"classify", "regress"};
static const char *const augments[] = {"crop", "flip", "jitter"};

/* The options of data other than Fashion-MNIST: true if k was one. */
static bool set_data_option(train_args *a, const char *cmd, const char *k, const char *v, bool *ok) {
    int audio = cn_tool_audio_option(&a->audio, cmd, k, v);
    if (audio) {
        *ok = audio > 0;
    } else if (!strcmp(k, "--labels")) {
        a->labels = v;
    } else if (!strcmp(k, "--target")) {
        a->target = v;
    } else if (!strcmp(k, "--features")) {
        a->features = v;
    } else if (!strcmp(k, "--task")) {
        a->task = cn_tool_choice(cmd, k, NULL, v, tasks, 2);
        *ok = a->task >= 0;
    } else if (!strcmp(k, "--image-size")) {
        long long h = 0, w = 0;
        char tail;
        *ok = sscanf(v, "%lldx%lld%c", &h, &w, &tail) == 2 && h >= 1 && w >= 1 && h <= 65536 &&
              w <= 65536;
        if (!*ok)
            fprintf(stderr, "chutney %s: bad value '%s' for --image-size: expected HxW, such as "
                            "32x32\n", cmd, v);
        a->height = h;
        a->width = w;
    } else if (!strcmp(k, "--channels")) {
        long long c = 0;
        *ok = cn_tool_int(cmd, k, v, 1, 3, &c) && c != 2;
        if (*ok) a->channels = (int)c;
        else if (c == 2) fprintf(stderr, "chutney %s: bad value '2' for --channels: choose 1 or 3\n", cmd);
    } else if (!strcmp(k, "--val-split")) {
        char *end;
        errno = 0;
        double f = strtod(v, &end);
        *ok = !errno && end != v && !*end && f >= 0 && f < 1;
        if (!*ok)
            fprintf(stderr, "chutney %s: bad value '%s' for --val-split: expected a fraction from "
                            "0 to below 1, such as 0.2\n", cmd, v);
        a->val_split = f;
    } else if (!strcmp(k, "--augment")) {
        char buf[128];
        snprintf(buf, sizeof buf, "%s", v);
        a->augment = 0;
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && *ok;
             t = strtok_r(NULL, ",", &save)) {
            int i = cn_tool_choice(cmd, k, NULL, t, augments, 3);
            *ok = i >= 0;
            if (*ok) a->augment |= 1 << i;
        }
    } else {
        return false;
    }
    return true;
}

/* The option k of this command, or NULL. */
static const option_info *find_option(const char *k, int cmd) {
    for (int i = 0; i < NOPTIONS; i++)
        if ((options[i].cmds & cmd) && !strcmp(options[i].name, k)) return &options[i];
    static option_info optim; /* one of train_opts.c's */
    bool flag;
    const char *what;
    if (!(cmd & FOR_TRAIN) || !cn_tool_optim_known(k, &flag, &what)) return NULL;
    optim = (option_info){k, flag ? NULL : what, FOR_TRAIN};
    return &optim;
}

static int unknown_option(const char *cmd_name, int cmd, const char *k) {
    const char *names[NOPTIONS + 64];
    int n = 0;
    for (int i = 0; i < NOPTIONS; i++)
        if (options[i].cmds & cmd) names[n++] = options[i].name;
    if (cmd & FOR_TRAIN) n += cn_tool_optim_names(names + n, 64);
    return cn_tool_unknown_option(cmd_name, k, names, n);
}

/* A numeric option's value into a; true if k is one of them (*ok: valid). */
static bool set_number(train_args *a, const char *cmd, const char *k, const char *v, bool *ok) {
    long long n = 0;
    if (!strcmp(k, "--epochs")) {
        *ok = cn_tool_int(cmd, k, v, 0, 1000000, &n);
        a->epochs = (int)n;
    } else if (!strcmp(k, "--batch")) {
        *ok = cn_tool_int(cmd, k, v, 1, INT32_MAX, &n);
        a->batch = n;
    } else if (!strcmp(k, "--limit")) {
        *ok = cn_tool_int(cmd, k, v, 1, LLONG_MAX, &n);
        a->limit = n;
    } else if (!strcmp(k, "--threads")) {
        /* The library's own range, checked now rather than ignored later. */
        *ok = cn_tool_int(cmd, k, v, 1, 65536, &n);
        if (*ok && cn_set_num_threads((int)n) < 0) {
            fprintf(stderr, "chutney %s: bad value '%s' for --threads: %s\n", cmd, v, cn_last_error());
            *ok = false;
        }
        a->threads = (int)n;
    } else if (!strcmp(k, "--vocab")) {
        *ok = cn_tool_int(cmd, k, v, 257, 1 << 24, &n);
        a->vocab = n;
    } else if (!strcmp(k, "--context")) {
        *ok = cn_tool_int(cmd, k, v, 1, 1 << 20, &n);
        a->context = n;
    } else if (!strcmp(k, "--layers")) {
        *ok = cn_tool_int(cmd, k, v, 1, 1024, &n);
        a->layers = n;
    } else if (!strcmp(k, "--heads")) {
        *ok = cn_tool_int(cmd, k, v, 1, 1024, &n);
        a->heads = n;
    } else if (!strcmp(k, "--embed")) {
        *ok = cn_tool_int(cmd, k, v, 1, 1 << 20, &n);
        a->embed = n;
    } else if (!strcmp(k, "--dropout") || !strcmp(k, "--clip")) {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        bool drop = !strcmp(k, "--dropout");
        *ok = !errno && end != v && !*end && isfinite(x) && x >= 0 && (!drop || x < 1);
        if (!*ok)
            fprintf(stderr, "chutney %s: bad value '%s' for %s: expected %s\n", cmd, v, k,
                    drop ? "a probability from 0 to below 1, such as 0.1" : "a number, 0 or more");
        if (drop) a->dropout = x;
        else a->clip = x;
    } else if (!strcmp(k, "--profile-steps")) {
        *ok = cn_tool_int(cmd, k, v, 1, 1000000, &n);
        a->profile_steps = n;
    } else if (!strcmp(k, "--save-tokens")) {
        a->save_tokens = v;
    } else if (!strcmp(k, "--save-every")) {
        *ok = cn_tool_int(cmd, k, v, 1, INT64_MAX / 2, &n);
        a->save_every = n;
    } else if (!strcmp(k, "--lr")) {
        *ok = cn_tool_positive(cmd, k, v, &a->lr);
    } else if (!strcmp(k, "--seed")) {
        *ok = cn_tool_u64(cmd, k, v, &a->seed);
    } else {
        return false;
    }
    return true;
}

/* Option k (taking a value) set to v: 0, or CN_TOOL_USAGE after a message. */
static int set_value(train_args *a, const char *cmd, const char *k, const char *v) {
    bool ok = true, flag;
    const char *what;
    if (cn_tool_optim_known(k, &flag, &what)) return cn_tool_optim_set(a, cmd, k, v);
    if (set_number(a, cmd, k, v, &ok)) return ok ? 0 : CN_TOOL_USAGE;
    if (set_data_option(a, cmd, k, v, &ok)) return ok ? 0 : CN_TOOL_USAGE;
    if (!strcmp(k, "--model")) {
        a->model = v;
        /* train also has the language model; eval the classifiers only. */
        static const char *const train_models[] = {"mlp", "cnn", "lstm", "gpt"};
        ok = strncmp(cmd, "train", 5) ? cn_tool_choice(cmd, k, "model", v, cn_tool_models, 3) >= 0
                                  : cn_tool_choice(cmd, k, "model", v, train_models, 4) >= 0;
    } else if (!strcmp(k, "--optimizer")) {
        a->optimizer = v;
        ok = cn_tool_choice(cmd, k, "optimizer", v, optimizers, 5) >= 0;
    } else if (!strcmp(k, "--mode")) {
        int m = cn_tool_choice(cmd, k, NULL, v, modes, 2);
        a->static_mode = m == 0;
        ok = m >= 0;
    } else if (!strcmp(k, "--precision")) {
        ok = cn_tool_precision(cmd, v, &a->precision);
    } else if (!strcmp(k, "--data")) {
        a->data = v;
        a->data_given = true;
    }
    else if (!strcmp(k, "--save")) a->save = v;
    else if (!strcmp(k, "--model-file")) a->model_file = v;
    else if (!strcmp(k, "--config")) a->config = v;
    else if (!strcmp(k, "--profile")) a->profile = v;
    else if (!strcmp(k, "--resume")) a->resume = v;
    else if (!strcmp(k, "--load")) a->load = v;
    else if (!strcmp(k, "--logits")) a->logits = v;
    else if (!strcmp(k, "--device")) a->device_name = v;
    else if (!strcmp(k, "--log")) a->log = v;
    else if (!strcmp(k, "--tensorboard")) a->tensorboard = v;
    return ok ? 0 : CN_TOOL_USAGE;
}

static bool directory_quiet(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int check_data(const train_args *a, const char *cmd);

/* The files, before any data is read (after the command line and the
 * device: a usage error is reported first): 0, or the exit status after a
 * message. */
static int check_files(const train_args *a, const char *cmd) {
    if ((a->save && !cn_tool_writable(cmd, "--save", a->save)) ||
        (a->resume && !cn_tool_readable(cmd, "--resume", a->resume)) ||
        (a->model_file && !cn_tool_readable(cmd, "--model-file", a->model_file)) ||
        (a->load && !cn_tool_readable(cmd, "--load", a->load)) ||
        (a->logits && !cn_tool_writable(cmd, "--logits", a->logits)) ||
        (a->profile && !cn_tool_writable(cmd, "--profile", a->profile)))
        return CN_TOOL_FAILED;
    return check_data(a, cmd);
}

/* --data (and --labels): 0, or the exit status after a message. */
static int check_data(const train_args *a, const char *cmd) {
    if (!a->data) return 0; /* eval: checked once the checkpoint has said where */
    /* The language model reads one text file; the classifiers a directory. */
    if (a->model && !strcmp(a->model, "gpt"))
        return cn_tool_readable(cmd, "--data", a->data) ? 0 : CN_TOOL_FAILED;
    /* A CSV table or an .npy file; else a directory (IDX, x.npy, class folders). */
    ds_kind kind = cn_tool_data_kind(a->data, a->labels);
    bool file = a->labels || kind == DS_CSV || (kind == DS_NPY && !directory_quiet(a->data));
    if (kind == DS_CSV && !a->target && !strcmp(cmd, "train")) {
        fprintf(stderr, "chutney %s: --data %s is a table: give --target COLUMN, the column to "
                        "learn (a header name or a 0-based index)\n", cmd, a->data);
        return CN_TOOL_USAGE;
    }
    if (kind != DS_IMAGES && kind != DS_IDX &&
        (a->height > 0 || a->width > 0 || a->channels > 0 || a->standardize || a->augment)) {
        fprintf(stderr, "chutney %s: --image-size, --channels, --standardize and --augment are "
                        "for a folder of images, not %s\n", cmd,
                kind == DS_CSV ? "a CSV table" : kind == DS_AUDIO ? "WAV clips" : ".npy arrays");
        return CN_TOOL_USAGE;
    }
    if (cn_tool_audio_check(cmd, kind, &a->audio)) return CN_TOOL_USAGE;
    if (kind != DS_CSV && (a->target || a->features)) {
        fprintf(stderr, "chutney %s: --target and --features are for a CSV table (--data "
                        "FILE.csv)\n", cmd);
        return CN_TOOL_USAGE;
    }
    if (a->labels && !cn_tool_readable(cmd, "--labels", a->labels)) return CN_TOOL_FAILED;
    if (file) return cn_tool_readable(cmd, "--data", a->data) ? 0 : CN_TOOL_FAILED;
    if (!cn_tool_directory(cmd, "--data", a->data)) {
        if (!strcmp(a->data, DEFAULT_DATA))
            fprintf(stderr, "(Fashion-MNIST is looked for there unless --data DIR says where; "
                            "Debian's dataset-fashion-mnist installs it there)\n");
        return CN_TOOL_FAILED;
    }
    return 0;
}

/* What must be given: 0, or CN_TOOL_USAGE after a message. */
static int check_required(train_args *a, const char *cmd, bool eval) {
    if (a->model && a->model_file && strcmp(a->model, CN_TOOL_TEXT_MODEL) &&
        strcmp(a->model, "onnx")) {
        fprintf(stderr, "chutney %s: --model and --model-file both name the model: give one\n", cmd);
        return CN_TOOL_USAGE;
    }
    if (a->model_file) {
        /* An .onnx file trains as ONNX (tools/train_onnx.c), any other is a text of layers. */
        bool onnx = cn_tool_is_onnx_file(a->model_file);
        if (eval && !onnx) {
            fprintf(stderr, "chutney %s: --model-file %s: a model text comes from the checkpoint "
                            "(--load); --model-file is for an ONNX model that moved\n", cmd,
                    a->model_file);
            return CN_TOOL_USAGE;
        }
        a->model = onnx ? "onnx" : CN_TOOL_TEXT_MODEL;
    }
    /* A checkpoint knows its model: eval --load and train --resume may leave it out. */
    if (!a->model && !(eval ? a->load : a->resume)) {
        fprintf(stderr, "chutney %s: --model is required: mlp, cnn or lstm%s\n", cmd,
                eval ? " (or none with --load: the checkpoint's)"
                     : " (or gpt), or --model-file FILE");
        return CN_TOOL_USAGE;
    }
    if (!a->model) return 0;
    bool gpt = !strcmp(a->model, "gpt");
    if (gpt && !a->data_given) {
        fprintf(stderr, "chutney %s: --model gpt needs --data FILE: a plain-text file to learn "
                        "from (e.g. scripts/text-corpus.sh fortunes > fortunes.txt)\n", cmd);
        return CN_TOOL_USAGE;
    }
    if (gpt && a->distributed) {
        fprintf(stderr, "chutney %s: --distributed is not available for --model gpt yet\n", cmd);
        return CN_TOOL_USAGE;
    }
    if (gpt && a->device_name) {
        fprintf(stderr, "chutney %s: --model gpt trains on the CPU only for now; drop --device\n",
                cmd);
        return CN_TOOL_USAGE;
    }
    if (!gpt && (a->vocab || a->context || a->layers || a->heads || a->embed || a->rope ||
                 a->save_tokens)) {
        fprintf(stderr, "chutney %s: --vocab, --context, --layers, --heads, --embed, --rope and "
                        "--save-tokens are options of --model gpt\n", cmd);
        return CN_TOOL_USAGE;
    }
    if (a->save_every && !a->save) {
        fprintf(stderr, "chutney %s: --save-every N needs --save FILE: the checkpoint to write "
                        "every N steps\n", cmd);
        return CN_TOOL_USAGE;
    }
    if (!gpt && strcmp(a->model, CN_TOOL_TEXT_MODEL) && a->dropout >= 0) {
        fprintf(stderr, "chutney %s: --dropout: --model %s has no dropout (--model gpt has, and "
                        "a --model-file with dropout lines)\n", cmd, a->model);
        return CN_TOOL_USAGE;
    }
    if (eval && !a->load) {
        fprintf(stderr, "chutney %s: eval needs --load FILE (a checkpoint of train --save)\n", cmd);
        return CN_TOOL_USAGE;
    }
    return 0;
}

/* A flag option k: on, or (a --config file's "false") off. */
static int set_flag(train_args *a, const char *cmd, const char *k, bool on) {
    bool flag;
    const char *what;
    if (cn_tool_optim_known(k, &flag, &what)) return cn_tool_optim_set(a, cmd, k, on ? "1" : "0");
    if (!strcmp(k, "--json")) a->json = on;
    else if (!strcmp(k, "--standardize")) a->standardize = on;
    else if (!strcmp(k, "--rope")) a->rope = on;
    else a->distributed = on;
    return 0;
}

/* --config FILE's lines, as if given before the command line's options
 * (which then win): 0, or the exit status after a message naming the line. */
static int apply_config(train_args *a, const char *path) {
    cn_tool_config_entry *e;
    int n, rc = cn_tool_config_read("train", path, &e, &n);
    for (int i = 0; i < n && !rc; i++) {
        char k[80], where[600];
        snprintf(k, sizeof k, "--%s", e[i].key);
        snprintf(where, sizeof where, "train: %s:%d", path, e[i].line);
        const option_info *o = find_option(k, FOR_TRAIN);
        if (!o || !strcmp(k, "--config") || !strcmp(k, "--help")) {
            rc = unknown_option(where, FOR_TRAIN, k);
        } else if (!o->value) {
            bool on;
            if (!cn_tool_bool(e[i].value, &on)) {
                fprintf(stderr, "chutney %s: bad value '%s' for %s: expected true or false\n",
                        where, e[i].value, e[i].key);
                rc = CN_TOOL_USAGE;
            } else {
                rc = set_flag(a, where, k, on);
            }
        } else {
            rc = set_value(a, where, k, e[i].value);
        }
    }
    free(e);
    return rc;
}

/* 0: go on; -1: --help was printed (exit 0); else the exit status. */
static int parse_args(int argc, char **argv, train_args *a, bool eval) {
    /* epochs, dropout and clip: < 0 until given (each model has its defaults). */
    *a = (train_args){.epochs = -1, .seed = 1, .data = DEFAULT_DATA, .static_mode = true,
                      .dropout = -1, .clip = -1, .task = -1, .val_split = -1,
                      .precision = -1};
    for (int i = 0; i < TO_NSLOTS; i++) a->optv[i] = NAN;
    const char *cmd = eval ? "eval" : "train";
    int which = eval ? FOR_EVAL : FOR_TRAIN;
    /* The file first, wherever --config stands: the command line wins. */
    for (int i = 1; !eval && i + 1 < argc; i++)
        if (!strcmp(argv[i], "--config") && strncmp(argv[i + 1], "--", 2)) {
            int rc = apply_config(a, argv[i + 1]);
            if (rc) return rc;
            break;
        }
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            (eval ? eval_usage : train_usage)(stdout);
            return -1;
        }
        const option_info *o = find_option(k, which);
        if (!o) return unknown_option(cmd, which, k);
        if (!o->value) {
            int rc = set_flag(a, cmd, k, true);
            if (rc) return rc;
            continue;
        }
        /* "--model --epochs 3" forgot the model: not a model named "--epochs". */
        if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))
            return cn_tool_missing_value(cmd, k, o->value);
        int rc = set_value(a, cmd, k, argv[++i]);
        if (rc) return rc;
    }
    return check_required(a, cmd, eval);
}

/* --device: 0, or the exit status after a message (2: not a device name;
 * 1: no such device here). */
static int resolve_device(train_args *a, const char *prefix) {
    int rc = cn_tool_device(prefix, a->device_name, &a->device);
    a->on_device = rc == 0 && a->device.kind != CN_DEVICE_CPU;
    return rc;
}

/* Every rank must train on the same data: a hash of the training split's
 * shape and first images, compared over the ranks. */
static int check_same_data(const dataset *d, const train_args *a) {
    uint64_t h = 0xcbf29ce484222325ull;
    const int64_t *sh = cn_shape(d->images);
    for (int i = 0; i < cn_ndim(d->images); i++) h = (h ^ (uint64_t)sh[i]) * 0x100000001b3ull;
    int64_t n = sh[0] < 64 ? sh[0] : 64;
    cn_scope_begin();
    cn_tensor *first = cn_contiguous(cn_narrow(d->images, 0, 0, n));
    const unsigned char *b = first ? cn_data(first) : NULL;
    size_t nbytes = first ? (size_t)cn_numel(first) * cn_dtype_size(cn_tensor_dtype(first)) : 0;
    for (size_t i = 0; b && i < nbytes; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    cn_tensor *all = cn_dist_allgather(cn_full(CN_I64, CN_SHAPE(1), (double)(int64_t)(h >> 12)));
    int bad = -1;
    for (int r = 1; all && r < a->nranks && bad < 0; r++)
        if (cn_get(all, (int64_t[]){r, 0}) != cn_get(all, (int64_t[]){0, 0})) bad = r;
    cn_scope_end();
    if (bad > 0) {
        fprintf(stderr, "chutney: rank %d's training data differs from rank 0's (--data, "
                        "--limit: every rank must read the same data)\n", bad);
        return -1;
    }
    return all ? 0 : -1;
}

/* The name among names equal to s (a checkpoint's string outlives its
 * file this way), or NULL. */
static const char *known_name(const char *s, const char *const *names, int n) {
    for (int i = 0; s && i < n; i++)
        if (!strcmp(s, names[i])) return names[i];
    return NULL;
}

/* What a --resume checkpoint says of the run and the command line does
 * not: the model (a text model's text), the optimiser and its settings,
 * clipping and dropout. 0, or the exit status after a message. */
static int settings_from_checkpoint(train_args *a) {
    cn_checkpoint *c = cn_load_safetensors(a->resume);
    if (!c) {
        fprintf(stderr, "chutney: cannot resume: %s\n", cn_last_error());
        return CN_TOOL_FAILED;
    }
    static const char *const models[] = {"mlp", "cnn", "lstm", "gpt", CN_TOOL_TEXT_MODEL, "onnx"};
    const char *m = known_name(cn_checkpoint_metadata(c, "model"), models, 6);
    const char *text = cn_checkpoint_metadata(c, "model_text");
    const char *o = known_name(cn_checkpoint_metadata(c, "optimizer"), optimizers, 5);
    int rc = 0;
    if (!a->model && (!m || (m == models[4] && !text))) {
        fprintf(stderr, "chutney train: %s does not say which model it holds: give --model\n",
                a->resume);
        rc = CN_TOOL_FAILED;
    } else if (m == models[5] && !a->model_file) {
        /* The file is not in the checkpoint, only its path and hash. */
        const char *f = cn_checkpoint_metadata(c, "model_file");
        fprintf(stderr, "chutney train: %s holds an ONNX model: give --model-file with the "
                        "file it was trained from (%s)\n", a->resume, f ? f : "its path is not recorded");
        rc = CN_TOOL_USAGE;
    } else if (!a->model) {
        a->model = m;
        if (text && !(a->model_text = strdup(text))) rc = CN_TOOL_FAILED;
    } else if (a->model_text && text && strcmp(a->model_text, text)) {
        fprintf(stderr, "chutney train: %s is not the model text %s was trained with (drop "
                        "--model-file to go on with the checkpoint's)\n", a->model_file, a->resume);
        rc = CN_TOOL_USAGE;
    }
    if (!a->optimizer) a->optimizer = o;
    const char *prec = cn_checkpoint_metadata(c, "precision");
    if (!rc && a->precision < 0 && prec && !cn_tool_precision("train", prec, &a->precision)) {
        fprintf(stderr, "chutney train: %s: its precision is not one this version knows\n",
                a->resume);
        rc = CN_TOOL_FAILED;
    }
    double clip = -1, drop = -1;
    if (!rc && (meta_double(c, a->resume, "clip", &clip) < 0 ||
                meta_double(c, a->resume, "dropout", &drop) < 0 ||
                cn_tool_optim_from_meta(a, c, a->resume) < 0)) {
        fprintf(stderr, "chutney: cannot resume: %s\n", cn_tool_error());
        rc = CN_TOOL_FAILED;
    }
    if (a->clip < 0) a->clip = clip;
    if (a->dropout < 0 && drop < 1) a->dropout = drop;
    cn_checkpoint_free(c);
    return rc;
}

/* The run's model and settings, complete and checked before any data is
 * read: the checkpoint's where the command line is silent, --model-file's
 * text read and its layers checked, each optimiser option against the
 * optimiser. 0, or the exit status after a message. */
static int settle_run(train_args *a) {
    if (a->model_file && !cn_tool_is_onnx_file(a->model_file)) {
        if (!(a->model_text = cn_tool_read_text(a->model_file, 1 << 20, "a model file (a text of layers)"))) {
            fprintf(stderr, "chutney train: --model-file %s\n", cn_tool_error());
            return CN_TOOL_FAILED;
        }
    }
    int rc = a->resume ? settings_from_checkpoint(a) : 0;
    if (a->precision < 0) a->precision = CN_F32;
    if (!rc) rc = check_required(a, "train", false);
    if (!rc && a->model_text) {
        cn_tool_text_shape s;
        const char *name = a->model_file ? a->model_file : a->resume;
        cn_module *m = cn_tool_model_text_parse(a->model_text, name, 0.5, &s);
        if (!m) {
            fprintf(stderr, "chutney train: %s\n", cn_tool_error());
            rc = CN_TOOL_USAGE;
        } else if (a->dropout >= 0 && !s.dropouts_unset) {
            fprintf(stderr, "chutney train: --dropout: %s has no 'dropout' line without its own "
                            "p for it to set\n", name);
            rc = CN_TOOL_USAGE;
        }
        cn_module_free(m);
    }
    if (!rc) {
        train_args t = *a; /* the optimiser the run will have */
        if (strcmp(t.model, "gpt")) model_defaults(&t);
        else if (!t.optimizer) t.optimizer = "adamw";
        rc = cn_tool_optim_check(&t);
    }
    return rc;
}

static int train_main(train_args *ap);
static int train_run(train_args *ap);

int cn_tool_train(int argc, char **argv) {
    train_args a;
    int prc = parse_args(argc, argv, &a, false);
    if (prc) return prc < 0 ? 0 : prc;
    int rc = train_run(&a);
    free(a.model_text);
    return rc;
}

static int train_run(train_args *ap) {
    train_args a = *ap;
    int drc = resolve_device(&a, "chutney train");
    /* The files, then the run's settings (which read --resume and
     * --model-file), then --data: every usage error before the data's. */
    const char *data = a.data;
    a.data = NULL;
    if (!drc) drc = check_files(&a, "train");
    a.data = data;
    if (!drc) drc = settle_run(&a);
    if (!drc) drc = check_data(&a, "train");
    ap->model_text = a.model_text;
    if (drc) return drc;
    a.rank = 0;
    a.nranks = 1;
    /* Mixed precision: the whole run, training and its test passes, in
     * one autocast region (only products are affected). */
    if (!strcmp(a.model, "gpt")) {
        if ((drc = train_log_open("train", a.log, a.tensorboard, &a.logger))) return drc;
        int grc = cn_tool_autocast_begin(a.precision);
        if (!grc) {
            grc = cn_tool_train_gpt(&a);
            cn_tool_autocast_end(a.precision);
        }
        return train_log_close(a.logger) < 0 && grc == 0 ? CN_TOOL_FAILED : grc;
    }
    if (a.distributed) {
        if (!cn_dist_available()) {
            fprintf(stderr, "chutney: --distributed: this build has no MPI (apt-get install "
                            "libopenmpi-dev openmpi-bin, and build with CHUTNEY_WITH_MPI)\n");
            return 2;
        }
        bool nccl = strstr(cn_build_info(), "+nccl") != NULL;
        if (a.on_device && !(a.device.kind == CN_DEVICE_CUDA && nccl)) {
            fprintf(stderr, "chutney: --distributed runs on the CPU, and on CUDA devices in "
                            "builds with NCCL; drop --device\n");
            return 2;
        }
        if (cn_dist_init(NULL, NULL) < 0) {
            fprintf(stderr, "chutney: %s\n", cn_last_error());
            return 1;
        }
        a.rank = cn_dist_rank();
        a.nranks = cn_dist_size();
        if (a.on_device) {
            /* One GPU per rank: the rank's place among the ranks of its host. */
            const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
            if (!lr) lr = getenv("SLURM_LOCALID");
            int local = lr ? atoi(lr) : a.rank;
            int n = cn_device_count(CN_DEVICE_CUDA);
            a.device.index = n > 0 ? local % n : 0;
        }
        /* Only rank 0 talks (its counts are the job's, summed over ranks). */
        if (a.rank != 0) a.quiet = true;
    }
    /* --log and --tensorboard: rank 0 writes them, as it prints. */
    int rc = a.rank == 0 ? train_log_open("train", a.log, a.tensorboard, &a.logger) : 0;
    if (rc == 0 && (rc = cn_tool_autocast_begin(a.precision)) == 0) {
        rc = train_main(&a);
        cn_tool_autocast_end(a.precision);
    }
    if (train_log_close(a.logger) < 0 && rc == 0) rc = CN_TOOL_FAILED;
    if (a.distributed) {
        /* A rank that failed ends the job: the others would wait for it. */
        if (rc != 0 && a.nranks > 1) cn_dist_abort(rc);
        cn_dist_finalize();
    }
    return rc;
}

static int train_main(train_args *ap) {
    train_args a = *ap;
    model_defaults(&a);
    if (a.threads) cn_set_num_threads(a.threads);
    cn_manual_seed(a.seed);
    double t_start = now_s();

    /* What the run holds, released in one place (done:) on every way out:
     * each free takes NULL, so an exit frees exactly what was made. */
    dataset tr = {0}, te = {0};
    ds_meta dmeta = {0};
    cn_module *model = NULL;
    cn_optimizer *opt = NULL;
    cn_ddp *ddp = NULL;
    cn_grad_scaler *scaler = NULL;
    cn_loader *loader = NULL;
    cn_graph *graph = NULL;
    cn_program *prog = NULL;
    cn_tensor *ph[2] = {NULL, NULL};
    int rc = 1;

    ds_spec spec = spec_of(&a);
    if (load_data(&a, &spec, false, true, &tr, &te) < 0) goto done;
    if (a.nranks > 1 && g_info.regress) {
        fprintf(stderr, "chutney: --distributed trains classifiers only for now (not --task "
                        "regress)\n");
        rc = 2;
        goto done;
    }
    cn_tool_data_meta(&spec, &g_info, &dmeta);
    if (!strcmp(a.model, "onnx") && (cn_tool_onnx_meta(a.model_file, &dmeta) < 0 ||
                         (a.resume && cn_tool_onnx_check(a.resume, a.model_file) < 0))) {
        fprintf(stderr, "chutney: %s%s\n", a.resume ? "cannot resume: " : "", cn_tool_error());
        goto done;
    }
    if (a.nranks > 1 && check_same_data(&tr, &a) < 0) goto done;
    if (g_info.regress && !isnan(a.optv[TO_LABEL_SMOOTHING])) {
        fprintf(stderr, "chutney train: --label-smoothing is for classification, and this data "
                        "is a regression\n");
        rc = 2;
        goto done;
    }
    double smoothing = isnan(a.optv[TO_LABEL_SMOOTHING]) ? 0 : a.optv[TO_LABEL_SMOOTHING];
    model = make_model(&a);
    /* On the device before the optimiser is made: it keeps the parameters'
     * buffers (and makes its state where they are). */
    if (model && a.on_device && cn_module_to(model, a.device) < 0) {
        cn_module_free(model);
        model = NULL;
    }
    cn_tensor **params = NULL;
    int np = model ? cn_module_parameters(model, &params, NULL) : -1;
    opt = np >= 0 ? make_optimizer(&a, params, np) : NULL;
    free(params);
    /* Before the checkpoint's state: making a schedule sets the lr, the
     * optimiser's state then brings the saved one back. */
    bool sched_failed = false;
    if (opt) {
        int64_t per_rank = (cn_shape(tr.images)[0] + a.nranks - 1) / a.nranks;
        a.sched = cn_tool_schedule_make(&a, opt, (int64_t)a.epochs * ((per_rank + a.batch - 1) / a.batch),
                                        &sched_failed);
    }
    if (!model || !opt || sched_failed) {
        fprintf(stderr, "chutney: %s\n", cn_tool_error());
        goto done;
    }
    cn_tool_progress resumed = {0};
    int rrc = 0;
    if (a.resume && cn_tool_load_checkpoint_ex(a.resume, a.model, model, opt, &resumed) < 0) {
        fprintf(stderr, "chutney: cannot resume: %s\n", cn_tool_error());
        rrc = 1;
    }
    if (!rrc) rrc = cn_tool_schedule_resume(&a);
    if (a.resume && !rrc) rrc = cn_tool_resume_settings(&a, ap, opt, &resumed);
    /* Counting lists the parameters, which can fail (out of memory). */
    int64_t nparams = rrc ? 0 : cn_module_num_params(model);
    if (nparams < 0) {
        fprintf(stderr, "chutney: %s\n", cn_last_error());
        rrc = 1;
    }
    if (rrc) {
        rc = rrc;
        goto done;
    }
    int start_epoch = resumed.epochs_done;
    /* Data-parallel: the same model checked and rank 0's values broadcast;
     * gradients averaged in every optimiser step from here on. */
    if (a.distributed && !(ddp = cn_ddp_new(model, opt, NULL))) {
        fprintf(stderr, "chutney: rank %d: %s\n", a.rank, cn_last_error());
        goto done;
    }
    /* f16: the loss scaled up so that small gradients survive; made after
     * the data-parallel wrapper, whose averaging then runs first in each
     * step, before the gradients are unscaled. */
    if (a.precision == CN_F16 && !(scaler = cn_grad_scaler_new(opt, NULL))) {
        fprintf(stderr, "chutney: %s\n", cn_last_error());
        goto done;
    }
    if (cn_tool_restore_scaler(scaler, &resumed) < 0) goto done;
    a.scaler = scaler;
    char dev_s[32];
    cn_device_str(a.device, dev_s, sizeof dev_s);
    char ranks_s[32] = "";
    if (a.distributed) snprintf(ranks_s, sizeof ranks_s, " x %d ranks", a.nranks);
    if (!a.quiet && !a.json)
        printf("training %s (%lld parameters) on %s%s: %lld %s, batch %lld%s, %s lr %g, "
               "%d thread%s%s%s\n",
               a.model_file ? a.model_file : a.model_text ? "the checkpoint's model file" : a.model,
               (long long)nparams, dev_s, ranks_s,
               (long long)cn_shape(tr.images)[0],
               g_info.kind == DS_AUDIO ? "clips" : g_info.ndim == 3 ? "images" : "samples",
               (long long)(a.batch * a.nranks),
               a.nranks > 1 ? " (global)" : "", a.optimizer, a.lr,
               cn_get_num_threads(), cn_get_num_threads() == 1 ? "" : "s",
               a.precision == CN_F32 ? "" : ", precision ",
               a.precision == CN_F32 ? "" : cn_dtype_name((cn_dtype)a.precision));

    /* Augmentation is per-sample work: two threads share each batch's. */
    loader = split_loader(
        &tr, &(cn_loader_opts){.batch_size = a.batch, .shuffle = true, .seed = a.seed, .prefetch = 1,
                               .device = a.device, .shard_index = a.rank,
                               .shard_count = a.nranks, .workers = a.augment ? 2 : 1},
        a.augment);
    if (!loader) {
        fprintf(stderr, "chutney: %s\n", cn_last_error());
        goto done;
    }
    /* Static mode: the step as one program over placeholders for a batch
     * (the batch size is left unknown: the last batch may be shorter). */
    cn_tensor *outs[3] = {NULL, NULL, NULL};
    int nout = 0;
    if (a.static_mode) {
        cn_scope_begin(); /* the graph's values: the program keeps what it needs */
        /* Constants the tracing and the backward pass make go to the device. */
        if (a.on_device) cn_device_scope_begin(a.device);
        graph = cn_graph_new();
        int64_t xs[CN_MAX_DIMS];
        int xnd = cn_ndim(tr.images);
        memcpy(xs, cn_shape(tr.images), sizeof(int64_t) * (size_t)xnd);
        xs[0] = -1;
        ph[0] = cn_placeholder(graph, "images", CN_F32, xnd, xs); /* as the loader gives them */
        if (g_info.regress)
            ph[1] = cn_placeholder(graph, "labels", CN_F32, CN_SHAPE(-1, 1));
        else
            ph[1] = cn_placeholder(graph, "labels", cn_tensor_dtype(tr.labels), CN_SHAPE(-1));
        cn_tensor *logits = cn_module_forward(model, ph[0]);
        if (g_info.regress) {
            outs[0] = cn_mse_loss(logits, ph[1], CN_REDUCTION_MEAN);
            nout = 1;
        } else {
            outs[0] = cn_cross_entropy(logits, ph[1], CN_REDUCTION_MEAN, smoothing);
            outs[1] = cn_sum(cn_cast(cn_eq(cn_argmax(logits, 1, false), ph[1]), CN_I64), NULL, 0, false);
            nout = 2;
        }
        nout = cn_tool_scale_outputs(scaler, outs, nout);
        prog = outs[0] && outs[nout - 1] ? cn_compile_train_step(graph, outs, nout, opt, NULL)
                                         : NULL;
        for (int i = 0; i < 2; i++) cn_retain(ph[i]); /* fed on every step */
        if (a.on_device) cn_device_scope_end();
        cn_scope_end();
        if (!prog) {
            fprintf(stderr, "chutney: cannot compile the training step: %s\n", cn_last_error());
            goto done;
        }
    }
    bool tty = isatty(2);
    int64_t nb = cn_loader_num_batches(loader);
    train_log_start(a.logger, &(train_log_start_info){
        .model = a.model, .mode = prog ? "static" : "eager", .device = dev_s, .ranks = a.nranks,
        .epochs = a.epochs, .start_epoch = start_epoch, .batch = a.batch * a.nranks,
        .steps_per_epoch = nb, .samples = cn_shape(tr.images)[0], .lr = a.lr});
    double train_time = 0, acc = 0, last_loss = NAN, all_time = 0;
    int64_t timed_samples = 0, step = 0, all_samples = 0;
    const int warmup = 20;
    rc = 0;
    /* Distributed ranks would stop at different steps and wait on each
     * other forever: there a signal ends the job as before. */
    if (a.nranks == 1) cn_tool_signals_begin();
    cn_tool_progress stopped = {0}; /* set when a signal stopped the loop */
    int stop_sig = 0;
    cn_tool_prof prof;
    cn_tool_prof_init(&prof, a.profile, a.profile_steps,
                      nb * (a.epochs - start_epoch) - resumed.batches_done);
    for (int epoch = start_epoch; epoch < a.epochs && rc == 0 && !stop_sig; epoch++) {
        if (cn_loader_set_epoch(loader, epoch) < 0) {
            fprintf(stderr, "chutney: %s\n", cn_last_error());
            rc = 1;
            break;
        }
        cn_module_train(model, true);
        double e_start = now_s(), loss_sum = 0, e_wait = cn_loader_wait_seconds(loader);
        int64_t correct = 0, seen = 0, b0 = 0;
        if (epoch == start_epoch && resumed.batches_done > 0) {
            /* The part of this epoch the stopped run trained: its batches
             * are passed over, its sums carried on. */
            b0 = resumed.batches_done;
            loss_sum = resumed.loss_sum;
            correct = resumed.correct;
            seen = resumed.seen;
            if (cn_tool_skip_batches(loader, b0, a.resume) < 0) {
                rc = 1;
                break;
            }
        }
        for (int64_t b = b0; b < nb; b++, step++) {
            cn_tool_prof_step_begin(&prof);
            cn_tensor *batch[2];
            cn_scope_begin();
            if (cn_tool_next_batch(loader, batch) < 0) {
                cn_scope_end();
                rc = 1;
                break;
            }
            double t0 = now_s(), step_lr = cn_optimizer_get_lr(opt); /* the schedule moves it after */
            /* The loader's thread copies batches to the device; this only
             * makes sure of it (a no-op for a batch already there). */
            if (a.on_device) {
                batch[0] = cn_to(batch[0], a.device);
                batch[1] = cn_to(batch[1], a.device);
            }
            cn_tensor *loss = NULL, *logits = NULL, *res[3] = {NULL, NULL, NULL};
            if (!batch[0] || !batch[1]) {
                /* the copy failed: reported below */
            } else if (prog) {
                if (cn_run(prog, ph, batch, 2, res, nout) == 0) loss = res[scaler ? nout - 1 : 0];
            } else {
                cn_optimizer_zero_grad(opt);
                logits = cn_module_forward(model, batch[0]);
                loss = g_info.regress ? cn_mse_loss(logits, batch[1], CN_REDUCTION_MEAN)
                                      : cn_cross_entropy(logits, batch[1], CN_REDUCTION_MEAN, smoothing);
                cn_tensor *root = scaler ? cn_grad_scaler_scale(scaler, loss) : loss;
                if (loss && (cn_backward(root, NULL) < 0 || cn_optimizer_step(opt) < 0)) loss = NULL;
            }
            /* The schedule moves per step (batch), after the update. */
            if (loss && a.sched && cn_lr_scheduler_step(a.sched) < 0) loss = NULL;
            if (!loss) {
                fprintf(stderr, "chutney: training step failed: %s\n", cn_last_error());
                cn_scope_end();
                rc = 1;
                break;
            }
            /* A device runs the step's kernels after cn_run returns: wait for them. */
            if (a.on_device && cn_device_synchronize(a.device) < 0) {
                fprintf(stderr, "chutney: training step failed: %s\n", cn_last_error());
                cn_scope_end();
                rc = 1;
                break;
            }
            double dt = now_s() - t0;
            int64_t bs = cn_shape(batch[1])[0];
            if (epoch > start_epoch || b >= warmup) {
                train_time += dt;
                timed_samples += bs;
            }
            all_time += dt;
            all_samples += bs;
            last_loss = cn_item(loss);
            if (g_info.regress) {
                /* the loss is the figure: RMSE from its sum */
            } else if (prog) {
                correct += (int64_t)cn_item(res[1]);
            } else {
                cn_no_grad_begin();
                cn_tensor *hit = cn_eq(cn_argmax(logits, 1, false), batch[1]);
                correct += (int64_t)cn_item(cn_sum(cn_cast(hit, CN_I64), NULL, 0, false));
                cn_no_grad_end();
            }
            seen += bs;
            loss_sum += last_loss * (double)bs;
            cn_scope_end();
            if (cn_tool_prof_step_end(&prof)) {
                rc = 1;
                break;
            }
            /* Distributed, rank 0's own loss: averaging it over the ranks
             * would cost a collective per step (the epoch line has the job's). */
            if (a.logger)
                train_log_step(a.logger, &(train_log_step_info){
                    .epoch = epoch + 1, .step = (int64_t)epoch * nb + b + 1, .loss = last_loss,
                    .lr = step_lr,
                    .grad_norm = train_log_grad_norm(a.logger, model, opt),
                    .samples_per_sec = (double)(bs * a.nranks) / dt, .tokens_per_sec = NAN});
            if (!a.json && !a.quiet && (tty ? (b % 10 == 9 || b == nb - 1) : (b % 200 == 199)))
                progress(tty, epoch + 1, a.epochs, b + 1, nb, loss_sum / (double)seen,
                         (double)correct / (double)seen,
                         (double)seen / (now_s() - e_start), now_s() - e_start);
            if (cn_tool_save_due(&a, (int64_t)epoch * nb + b + 1, b, nb)) {
                cn_tool_progress now = {.epochs_done = epoch, .batches_done = b + 1,
                                        .loss_sum = loss_sum, .correct = correct, .seen = seen};
                if (cn_tool_save_progress(a.save, &a, model, opt, &now, dmeta.keys, dmeta.vals,
                                          dmeta.n) < 0) {
                    fprintf(stderr, "chutney: cannot save checkpoint: %s\n", cn_last_error());
                    rc = 1;
                    break;
                }
            }
            if ((stop_sig = cn_tool_stop_signal()) != 0) {
                stopped = (cn_tool_progress){.epochs_done = epoch, .batches_done = b + 1,
                                             .loss_sum = loss_sum, .correct = correct,
                                             .seen = seen};
                break;
            }
        }
        if (rc) break;
        if (stop_sig) {
            if (a.save && cn_tool_save_progress(a.save, &a, model, opt, &stopped, dmeta.keys,
                                                dmeta.vals, dmeta.n) < 0) {
                fprintf(stderr, "chutney: cannot save checkpoint: %s\n", cn_last_error());
                rc = 1;
            }
            break;
        }
        double e_train = now_s() - e_start; /* the epoch's steps, without its test pass */
        if (a.nranks > 1) {
            /* The job's figures: every rank's sums; BatchNorm's running
             * statistics from rank 0 for the test pass. */
            cn_scope_begin();
            cn_tensor *sums = cn_zeros(CN_F64, CN_SHAPE(4));
            cn_set(sums, (int64_t[]){0}, loss_sum);
            cn_set(sums, (int64_t[]){1}, (double)correct);
            cn_set(sums, (int64_t[]){2}, (double)seen);
            cn_set(sums, (int64_t[]){3}, last_loss / a.nranks); /* the global batch's loss */
            if (cn_dist_allreduce(sums, CN_DIST_SUM) < 0 || cn_ddp_sync_buffers(ddp) < 0) {
                fprintf(stderr, "chutney: rank %d: %s\n", a.rank, cn_last_error());
                rc = 1;
            }
            loss_sum = cn_get(sums, (int64_t[]){0});
            correct = (int64_t)cn_get(sums, (int64_t[]){1});
            seen = (int64_t)cn_get(sums, (int64_t[]){2});
            last_loss = cn_get(sums, (int64_t[]){3});
            cn_scope_end();
            if (rc) break;
        }
        if ((acc = test_accuracy(model, &te, &a)) < 0) {
            rc = 1;
            break;
        }
        if (tty && !a.json && !a.quiet) fputc('\n', stderr);
        /* How long this epoch's steps waited for the loader: a slow data path shows here. */
        double waited = cn_loader_wait_seconds(loader) - e_wait;
        if (!a.json && !a.quiet && g_info.regress)
            printf("epoch %d: train loss %.4f, train RMSE %.4g, test RMSE %.4g, loader wait %.2f s\n",
                   epoch + 1, loss_sum / (double)(seen ? seen : 1),
                   sqrt(loss_sum / (double)(seen ? seen : 1)) * g_info.y_std, acc, waited);
        else if (!a.json && !a.quiet)
            printf("epoch %d: train loss %.4f, train accuracy %.2f%%, test accuracy %.2f%%, "
                   "loader wait %.2f s\n",
                   epoch + 1, loss_sum / (double)(seen ? seen : 1),
                   100.0 * (double)correct / (double)(seen ? seen : 1), 100 * acc, waited);
        fflush(stdout);
        train_log_epoch(a.logger, &(train_log_epoch_info){
            .epoch = epoch + 1, .step = (int64_t)(epoch + 1) * nb,
            .train_loss = loss_sum / (double)(seen ? seen : 1),
            .train_accuracy = g_info.regress ? NAN : (double)correct / (double)(seen ? seen : 1),
            .test_accuracy = g_info.regress ? NAN : acc,
            .val_loss = NAN, .val_perplexity = NAN, .lr = cn_optimizer_get_lr(opt),
            .seconds = now_s() - e_start,
            .samples_per_sec = (double)seen / (e_train > 0 ? e_train : NAN)});
        if (a.save && a.rank == 0 && cn_tool_save_checkpoint(a.save, &a, model, opt, epoch + 1, dmeta.keys,
                                                               dmeta.vals, dmeta.n) < 0) {
            fprintf(stderr, "chutney: cannot save checkpoint: %s\n", cn_last_error());
            rc = 1;
        }
        /* A signal during the test pass or the save: the epoch is whole. */
        if (rc == 0 && (stop_sig = cn_tool_stop_signal()) != 0)
            stopped = (cn_tool_progress){.epochs_done = epoch + 1};
    }
    if (a.nranks == 1) cn_tool_signals_end();
    if (rc == 0 && stop_sig) rc = cn_tool_stopped(stop_sig, a.save, &stopped, nb);
    if (rc == 0 && !stop_sig && start_epoch >= a.epochs && (acc = test_accuracy(model, &te, &a)) < 0)
        rc = 1;
    /* Runs too short for the warm-up are timed whole. */
    double sps = train_time > 0 ? (double)timed_samples / train_time
                 : all_time > 0 ? (double)all_samples / all_time
                                : 0;
    /* Distributed: every rank trained its share in the time; the job's rate. */
    sps *= a.nranks;
    if (rc == 0 && a.rank == 0) {
        if (g_info.regress) printf("test RMSE: %.6g on %s\n", acc, dev_s);
        else printf("test accuracy: %.2f%% on %s\n", 100 * acc, dev_s);
        cn_program_stats ps = {0};
        if (prog) cn_program_stats_get(prog, &ps);
        /* JSON has no NaN or infinity: no batch run, or a diverged loss, is null. */
        char loss_s[32] = "null", rmse_s[48] = "", acc_s[32] = "null";
        if (isfinite(last_loss)) snprintf(loss_s, sizeof loss_s, "%.9g", last_loss);
        /* A regression has no accuracy: null beside its RMSE, not a 0 that reads as one. */
        if (g_info.regress) snprintf(rmse_s, sizeof rmse_s, ",\"test_rmse\":%.6g", acc);
        else snprintf(acc_s, sizeof acc_s, "%.4f", acc);
        if (a.json)
            printf("{\"model\":\"%s\",\"device\":\"%s\",\"ranks\":%d,\"mode\":\"%s\",\"epochs\":%d,"
                   "\"test_accuracy\":%s,"
                   "\"samples_per_sec\":%.1f,\"seconds\":%.2f,\"peak_rss_mb\":%.1f,"
                   "\"final_loss\":%s,\"program_steps\":%d,\"planned_mb\":%.3f,"
                   "\"unplanned_mb\":%.3f,\"loader_wait_s\":%.3f%s}\n",
                   a.model, dev_s, a.nranks, prog ? "static" : "eager", a.epochs,
                   acc_s, sps, now_s() - t_start,
                   peak_rss_mb(), loss_s, ps.nsteps, ps.planned_bytes / 1e6,
                   ps.unplanned_bytes / 1e6, cn_loader_wait_seconds(loader), rmse_s);
    }
    if (cn_tool_prof_finish(&prof) && rc == 0) rc = 1;
    if (ddp && a.rank == 0 && a.json) {
        cn_ddp_stats st;
        if (cn_ddp_get_stats(ddp, &st) == 0)
            fprintf(stderr, "ddp: %lld steps, %lld buckets, %.1f MB averaged, %.2f s in "
                            "collectives, %.2f s waited for them\n",
                    (long long)st.steps, (long long)st.buckets, (double)st.bytes / 1e6,
                    st.comm_seconds, st.wait_seconds);
    }
    if (!a.quiet && !a.json) cn_tool_scaler_report(scaler, step, resumed.loss_scale.skipped);
done:
    cn_program_free(prog);
    cn_release(ph[0]);
    cn_release(ph[1]);
    cn_graph_free(graph);
    cn_loader_free(loader);
    cn_grad_scaler_free(scaler);
    cn_ddp_free(ddp);
    cn_lr_scheduler_free(a.sched);
    cn_optimizer_free(opt);
    cn_module_free(model);
    free_split(&tr);
    free_split(&te);
    cn_tool_data_meta_free(&dmeta);
    return rc;
}

int cn_tool_eval(int argc, char **argv) {
    train_args a;
    int prc = parse_args(argc, argv, &a, true);
    if (prc) return prc < 0 ? 0 : prc;
    int drc = resolve_device(&a, "chutney eval");
    if (!drc && a.load && cn_tool_checkpoint_is(a.load, "gpt")) return cn_tool_eval_gpt(&a);
    /* The data the checkpoint was trained on, read as it was: its
     * description (shape, classes, normalisation) and, unless --data says
     * otherwise, its path. */
    ds_spec spec = spec_of(&a);
    spec.data = a.data_given ? a.data : NULL;
    char data_buf[4096];
    if (!drc) {
        /* The other files first, then what the checkpoint says of --data. */
        const char *given = a.data;
        a.data = NULL;
        drc = check_files(&a, "eval");
        a.data = given;
    }
    char model_buf[16];
    if (!drc && !a.model) {
        if (!cn_tool_checkpoint_model(a.load, model_buf, sizeof model_buf)) {
            fprintf(stderr, "chutney eval: %s\n", cn_tool_error());
            return 1;
        }
        a.model = model_buf;
    }
    if (!drc && cn_tool_data_from_checkpoint(a.load, &spec, &g_info, data_buf, sizeof data_buf) < 0) {
        fprintf(stderr, "chutney eval: cannot load %s: %s\n", a.load, cn_tool_error());
        return 1;
    }
    if (!spec.data) spec.data = a.data;
    a.data = spec.data;
    a.labels = spec.labels;
    if (!drc) drc = check_data(&a, "eval");
    if (drc) return drc;
    model_defaults(&a); /* the test pass's batch */
    if (a.threads) cn_set_num_threads(a.threads);
    dataset tr, te;
    if (load_data(&a, &spec, true, false, &tr, &te) < 0) {
        free_split(&tr);
        free_split(&te);
        return 1;
    }
    free_split(&tr);
    /* An ONNX model from the --model-file given (the file moved), else the checkpoint's. */
    cn_module *model = a.model_file && !strcmp(a.model, "onnx")
                           ? make_model(&a)
                           : cn_tool_model_for_checkpoint(a.model, a.load, 0.5, g_info.ndim,
                                                          g_info.shape,
                                                          g_info.regress ? 1 : g_info.nclasses);
    int epochs = 0;
    if (model && a.on_device && cn_module_to(model, a.device) < 0) {
        fprintf(stderr, "chutney: cannot move the model to %s: %s\n", a.device_name,
                cn_last_error());
        cn_module_free(model);
        free_split(&te);
        return 1;
    }
    if (!model || (a.model_file && !strcmp(a.model, "onnx") &&
                   cn_tool_onnx_check(a.load, a.model_file) < 0) ||
        cn_tool_load_checkpoint(a.load, a.model, model, NULL, &epochs) < 0) {
        fprintf(stderr, "chutney: cannot load %s: %s\n", a.load, cn_tool_error());
        cn_module_free(model);
        free_split(&te);
        return 1;
    }
    /* --logits: what an exported model must reproduce (tests/cli/export_cli.sh). */
    cn_scope_begin();
    cn_tensor *l = NULL;
    double acc = evaluate(model, &te, a.batch, &a, a.logits ? &l : NULL);
    if (acc < 0) {
        fprintf(stderr, "chutney: test pass failed: %s\n", cn_last_error());
        cn_scope_end();
        cn_module_free(model);
        free_split(&te);
        return 1;
    }
    char dev_s[32];
    cn_device_str(a.device, dev_s, sizeof dev_s);
    if (g_info.regress) printf("test RMSE: %.6g on %s\n", acc, dev_s);
    else printf("test accuracy: %.2f%% on %s\n", 100 * acc, dev_s);
    int lrc = a.logits ? cn_save_npy(a.logits, l) : 0;
    cn_scope_end();
    if (lrc < 0) {
        fprintf(stderr, "chutney: cannot write %s: %s\n", a.logits, cn_last_error());
        cn_module_free(model);
        free_split(&te);
        return 1;
    }
    if (a.json && g_info.regress)
        printf("{\"model\":\"%s\",\"device\":\"%s\",\"epochs\":%d,\"test_rmse\":%.6g}\n",
               a.model, dev_s, epochs, acc);
    else if (a.json)
        printf("{\"model\":\"%s\",\"device\":\"%s\",\"epochs\":%d,\"test_accuracy\":%.4f}\n",
               a.model, dev_s, epochs, acc);
    cn_module_free(model);
    free_split(&te);
    return 0;
}
