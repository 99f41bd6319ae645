/* `chutney train --model gpt --data FILE`: a GPT language model on a
 * plain-text file. The tokenizer is learned from the training part of the
 * text only (so the validation text is new to it too) and travels in the
 * checkpoint; each epoch ends with the validation loss and perplexity,
 * beside the unigram baseline, the loss of the best model that ignores the
 * context. */
#include "train.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* The defaults: sized so an epoch of the fortunes corpus' first windows
 * takes minutes on 2 cores (docs/training.md has the figures). */
enum { GPT_VOCAB = 512, GPT_CONTEXT = 64, GPT_LAYERS = 4, GPT_HEADS = 4, GPT_EMBED = 128,
       GPT_BATCH = 16 };
#define GPT_LR 1e-3
#define GPT_CLIP 1.0
#define GPT_WEIGHT_DECAY 0.1
#define VAL_FRACTION 0.1

static void gpt_defaults(train_args *a) {
    if (!a->vocab) a->vocab = GPT_VOCAB;
    if (!a->context) a->context = GPT_CONTEXT;
    if (!a->layers) a->layers = GPT_LAYERS;
    if (!a->heads) a->heads = GPT_HEADS;
    if (!a->embed) a->embed = GPT_EMBED;
    if (a->dropout < 0) a->dropout = 0;
    if (a->clip < 0) a->clip = GPT_CLIP;
    if (a->batch <= 0) a->batch = GPT_BATCH;
    if (!(a->lr > 0)) a->lr = GPT_LR;
    if (a->epochs < 0) a->epochs = 1;
    if (!a->optimizer) a->optimizer = "adamw";
}

/* The whole file, NUL-terminated (malloc'd), or NULL after a message. */
static char *read_text(const char *path, size_t *len) {
    FILE *f = cn_tool_fopen_regular(path);
    char *buf = NULL;
    size_t cap = 0, n = 0;
    if (!f) return NULL;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = cap ? cap * 2 : 1 << 20;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                cn_tool_fail("%s: out of memory reading it", path);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, 65536, f);
        n += got;
        if (got < 65536) break;
    }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        cn_tool_fail("%s: read error", path);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The cross-entropy (nats per token) of targets under the unigram
 * frequencies of train, add-one smoothed: the best loss without context. */
static double unigram_loss(cn_tensor *train, cn_tensor *targets, int64_t V) {
    int64_t nt = cn_numel(train), nv = cn_numel(targets);
    double *count = calloc((size_t)V, sizeof *count);
    int64_t *ids = malloc(sizeof *ids * (size_t)(nt > nv ? nt : nv));
    double loss = NAN;
    if (count && ids && cn_copy_to_buffer(train, CN_I64, ids, sizeof *ids * (size_t)nt) == 0) {
        for (int64_t i = 0; i < nt; i++) count[ids[i]] += 1;
        if (cn_copy_to_buffer(targets, CN_I64, ids, sizeof *ids * (size_t)nv) == 0 && nv > 0) {
            double sum = 0, total = (double)nt + (double)V;
            for (int64_t i = 0; i < nv; i++) sum -= log((count[ids[i]] + 1) / total);
            loss = sum / (double)nv;
        }
    }
    free(count);
    free(ids);
    return loss;
}

/* The mean loss per token over the windows (inputs, targets) [W, T], in
 * evaluation mode, batch by batch. */
static double evaluate(cn_module *m, cn_tensor *inputs, cn_tensor *targets, int64_t batch) {
    int64_t W = cn_shape(inputs)[0], V;
    cn_gpt_config cfg;
    cn_gpt_get_config(m, &cfg);
    V = cfg.vocab_size;
    double sum = 0;
    bool ok = true;
    cn_module_train(m, false);
    cn_no_grad_begin();
    for (int64_t b = 0; b < W && ok; b += batch) {
        int64_t n = W - b < batch ? W - b : batch;
        cn_scope_begin();
        cn_tensor *logits = cn_module_forward(m, cn_narrow(inputs, 0, b, n));
        cn_tensor *loss = cn_cross_entropy(cn_reshape(logits, 2, (int64_t[]){-1, V}),
                                           cn_reshape(cn_narrow(targets, 0, b, n), 1,
                                                      (int64_t[]){-1}),
                                           CN_REDUCTION_SUM, 0);
        ok = loss != NULL;
        if (ok) sum += cn_item(loss);
        cn_scope_end();
    }
    cn_no_grad_end();
    cn_module_train(m, true);
    return ok && W > 0 ? sum / (double)(W * cn_shape(inputs)[1]) : NAN;
}

/* The loss of logits [B, T, V] against targets [B, T]: the mean over tokens. */
static cn_tensor *lm_loss(cn_tensor *logits, cn_tensor *targets, int64_t V) {
    return cn_cross_entropy(cn_reshape(logits, 2, (int64_t[]){-1, V}),
                            cn_reshape(targets, 1, (int64_t[]){-1}), CN_REDUCTION_MEAN, 0);
}

/* progress: NULL at an epoch's end; a run stopped by a signal, midway. */
static int save_gpt(const train_args *a, const cn_gpt_config *cfg, const cn_tokenizer *tok,
                    cn_module *m, cn_optimizer *opt, int epochs_done,
                    const cn_tool_progress *progress) {
    char *tok_s = cn_tokenizer_to_string(tok, NULL);
    if (!tok_s) return -1;
    char v[5][32], d[32];
    snprintf(v[0], 32, "%lld", (long long)cfg->vocab_size);
    snprintf(v[1], 32, "%lld", (long long)cfg->context_length);
    snprintf(v[2], 32, "%d", cfg->n_layer);
    snprintf(v[3], 32, "%d", cfg->n_head);
    snprintf(v[4], 32, "%lld", (long long)cfg->n_embd);
    snprintf(d, sizeof d, "%.17g", cfg->dropout);
    /* gpt_rope (the base) only with rope: its absence means learned
     * positions, as in checkpoints from before it existed. */
    char rb[32];
    snprintf(rb, sizeof rb, "%.17g", cfg->rope_base > 0 ? cfg->rope_base : 10000.0);
    const char *keys[] = {CN_TOKENIZER_METADATA_KEY, "gpt_vocab", "gpt_context", "gpt_layers",
                          "gpt_heads", "gpt_embed", "gpt_dropout", "gpt_rope"};
    const char *vals[] = {tok_s, v[0], v[1], v[2], v[3], v[4], d, rb};
    int nk = cfg->rope ? 8 : 7;
    int rc = progress ? cn_tool_save_progress(a->save, a, m, opt, progress, keys, vals, nk)
                      : cn_tool_save_checkpoint(a->save, a, m, opt, epochs_done, keys, vals, nk);
    free(tok_s);
    return rc;
}

static long long meta_int(const cn_checkpoint *c, const char *key, bool *ok) {
    const char *s = cn_checkpoint_metadata(c, key);
    char *end;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || end == s || *end || v < 1 || v > INT_MAX) *ok = false;
    return v;
}

int cn_tool_gpt_config(const cn_checkpoint *c, const char *path, cn_gpt_config *cfg) {
    bool ok = true;
    *cfg = (cn_gpt_config){.vocab_size = meta_int(c, "gpt_vocab", &ok),
                           .context_length = meta_int(c, "gpt_context", &ok),
                           .n_layer = (int)meta_int(c, "gpt_layers", &ok),
                           .n_head = (int)meta_int(c, "gpt_heads", &ok),
                           .n_embd = meta_int(c, "gpt_embed", &ok)};
    /* Checkpoints from before gpt_dropout existed trained without. */
    const char *d = cn_checkpoint_metadata(c, "gpt_dropout");
    if (d) {
        char *end;
        cfg->dropout = strtod(d, &end);
        if (end == d || *end || !(cfg->dropout >= 0 && cfg->dropout < 1)) ok = false;
    }
    /* Rotary positions: the key holds the base; absent, learned positions. */
    const char *rope = cn_checkpoint_metadata(c, "gpt_rope");
    if (rope) {
        char *end;
        cfg->rope = true;
        cfg->rope_base = strtod(rope, &end);
        if (end == rope || *end || !(cfg->rope_base > 0) || !isfinite(cfg->rope_base)) ok = false;
    }
    if (ok) return 0;
    cn_tool_fail("%s: its GPT configuration (gpt_vocab, gpt_context, ...) is missing or corrupt",
                 path);
    return -1;
}

/* On resume the model is the checkpoint's: its shape comes from there, and
 * a size given again must agree with it. */
static int resume_config(train_args *a) {
    cn_checkpoint *c = cn_load_safetensors(a->resume);
    if (!c) {
        cn_tool_fail("%s", cn_last_error());
        return -1;
    }
    cn_gpt_config cfg;
    const char *model = cn_checkpoint_metadata(c, "model");
    int rc = -1;
    if (model && !strcmp(model, "gpt")) rc = cn_tool_gpt_config(c, a->resume, &cfg);
    else cn_tool_fail("%s holds %s, not a GPT", a->resume, model ? model : "no model");
    cn_checkpoint_free(c);
    if (rc < 0) return rc;
    struct {
        const char *opt;
        int64_t *given, saved;
    } sizes[] = {{"--context", &a->context, cfg.context_length}, {"--layers", &a->layers, cfg.n_layer},
                 {"--heads", &a->heads, cfg.n_head}, {"--embed", &a->embed, cfg.n_embd}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        if (*sizes[i].given && *sizes[i].given != sizes[i].saved) {
            cn_tool_fail("%s %lld, but %s was trained with %lld", sizes[i].opt,
                         (long long)*sizes[i].given, a->resume, (long long)sizes[i].saved);
            return -1;
        }
        *sizes[i].given = sizes[i].saved;
    }
    if (a->rope && !cfg.rope) {
        cn_tool_fail("--rope, but %s was trained with learned positions", a->resume);
        return -1;
    }
    a->rope = cfg.rope;
    if (a->dropout < 0) a->dropout = cfg.dropout;
    return 0;
}

/* AdamW as GPT-2 trains: betas (0.9, 0.95), weight decay on the matrices
 * (embeddings and linear weights), none on biases and LayerNorms. */
static cn_optimizer *make_optimizer(const train_args *a, cn_module *m) {
    cn_tensor **p;
    int n = cn_module_parameters(m, &p, NULL);
    if (n < 0) return NULL;
    train_args g = *a; /* --betas, --weight-decay, ... where given */
    if (isnan(g.optv[TO_BETA1])) {
        g.optv[TO_BETA1] = 0.9;
        g.optv[TO_BETA2] = 0.95;
    }
    if (isnan(g.optv[TO_WEIGHT_DECAY])) g.optv[TO_WEIGHT_DECAY] = GPT_WEIGHT_DECAY;
    cn_optimizer *opt = cn_tool_optim_make(&g, p, n, 0);
    for (int i = 0; opt && i < n; i++)
        if (cn_ndim(p[i]) < 2 && cn_optimizer_set_param_weight_decay(opt, i, 0) < 0) {
            cn_optimizer_free(opt);
            opt = NULL;
        }
    free(p);
    return opt;
}

typedef struct run {
    cn_tokenizer *tok;
    cn_tensor *train, *val_in, *val_tg; /* tokens [n]; windows [W, T] */
    cn_module *model;
    cn_optimizer *opt;
    cn_loader *loader;
    cn_graph *graph;
    cn_program *prog;
    cn_tensor *ph[2];
    cn_lr_scheduler *sched; /* --schedule, --warmup (NULL: none) */
    cn_grad_scaler *scaler; /* --precision f16 (NULL: otherwise) */
    int nout;               /* the program's outputs: the loss (scaled), then the loss */
} run;

static void run_free(run *r) {
    cn_program_free(r->prog);
    cn_release(r->ph[0]);
    cn_release(r->ph[1]);
    cn_graph_free(r->graph);
    cn_loader_free(r->loader);
    cn_lr_scheduler_free(r->sched);
    cn_grad_scaler_free(r->scaler);
    cn_optimizer_free(r->opt);
    cn_module_free(r->model);
    cn_release(r->train);
    cn_release(r->val_in);
    cn_release(r->val_tg);
    cn_tokenizer_free(r->tok);
}

/* The tokenizer (learned, or the checkpoint's when resuming) and the token
 * windows. */
static int prepare_data(train_args *a, run *r) {
    size_t len;
    char *text = read_text(a->data, &len);
    if (!text) return -1;
    /* The split at a line end near 90% of the bytes: the tokenizer learns
     * from the first part only. */
    size_t cut = len - (size_t)((double)len * VAL_FRACTION);
    while (cut < len && text[cut - (cut > 0)] != '\n') cut++;
    if (a->resume) {
        cn_checkpoint *c = cn_load_safetensors(a->resume);
        r->tok = c ? cn_tokenizer_from_checkpoint(c) : NULL;
        cn_checkpoint_free(c);
    } else {
        r->tok = cn_bpe_train(text, cut, (int)a->vocab, NULL);
    }
    if (!r->tok) {
        free(text);
        return -1;
    }
    cn_scope_begin();
    cn_tensor *tr = cn_tokenizer_encode_tensor(r->tok, text, cut, CN_TOKENIZE_SPECIAL);
    cn_tensor *va = cn_tokenizer_encode_tensor(r->tok, text + cut, len - cut, CN_TOKENIZE_SPECIAL);
    free(text);
    cn_tensor *vin = NULL, *vtg = NULL;
    int rc = tr && va ? 0 : -1;
    if (rc == 0 && (cn_numel(tr) < a->context + 1 || cn_numel(va) < a->context + 1)) {
        cn_tool_fail("%s is too short for windows of %lld tokens: %lld training and %lld "
                     "validation tokens (each part needs %lld)", a->data, (long long)a->context,
                     (long long)cn_numel(tr), (long long)cn_numel(va), (long long)a->context + 1);
        rc = -1;
    }
    if (rc == 0) rc = cn_text_windows(va, a->context, 0, &vin, &vtg);
    if (rc == 0 && a->limit > 0) {
        /* The first --limit windows of each part. */
        if (cn_numel(tr) > a->limit * a->context + 1)
            tr = cn_clone(cn_narrow(tr, 0, 0, a->limit * a->context + 1));
        if (cn_shape(vin)[0] > a->limit) {
            vin = cn_narrow(vin, 0, 0, a->limit);
            vtg = cn_narrow(vtg, 0, 0, a->limit);
        }
    }
    if (rc == 0 && a->save_tokens) {
        /* The exact tokens of both parts, for another framework's run on
         * the same data (bench/torch_gpt.py). */
        cn_tensor *vt = va;
        if (a->limit > 0 && cn_numel(va) > a->limit * a->context + 1)
            vt = cn_narrow(va, 0, 0, a->limit * a->context + 1);
        char path[4096];
        snprintf(path, sizeof path, "%s.train.npy", a->save_tokens);
        rc = cn_save_npy(path, tr) == CN_OK ? 0 : -1;
        snprintf(path, sizeof path, "%s.val.npy", a->save_tokens);
        if (rc == 0) rc = cn_save_npy(path, vt) == CN_OK ? 0 : -1;
    }
    if (rc == 0 && tr && vin && vtg) {
        r->train = cn_keep(tr);
        /* Copies: the validation windows outlive the token tensor's scope. */
        r->val_in = cn_keep(cn_contiguous(vin));
        r->val_tg = cn_keep(cn_contiguous(vtg));
    }
    cn_scope_end();
    return r->train && r->val_in && r->val_tg ? 0 : -1;
}

/* The training step as one program over placeholders ids, targets [-1, T]. */
static int compile_step(const train_args *a, run *r, int64_t V) {
    cn_scope_begin();
    r->graph = cn_graph_new();
    r->ph[0] = cn_placeholder(r->graph, "ids", CN_I64, CN_SHAPE(-1, a->context));
    r->ph[1] = cn_placeholder(r->graph, "targets", CN_I64, CN_SHAPE(-1, a->context));
    cn_tensor *outs[2] = {lm_loss(cn_module_forward(r->model, r->ph[0]), r->ph[1], V), NULL};
    r->nout = cn_tool_scale_outputs(r->scaler, outs, 1);
    r->prog = outs[0] ? cn_compile_train_step(r->graph, outs, r->nout, r->opt, NULL) : NULL;
    cn_retain(r->ph[0]); /* fed on every step */
    cn_retain(r->ph[1]);
    cn_scope_end();
    return r->prog ? 0 : -1;
}

int cn_tool_train_gpt(train_args *ap) {
    train_args a = *ap;
    if (a.resume && resume_config(&a) < 0) {
        fprintf(stderr, "chutney: cannot resume: %s\n", cn_tool_error());
        return 1;
    }
    gpt_defaults(&a);
    if (strcmp(a.optimizer, "adamw")) {
        fprintf(stderr, "chutney train: --model gpt trains with adamw (GPT-2's settings), not %s\n",
                a.optimizer);
        return CN_TOOL_USAGE;
    }
    if (a.embed % a.heads) {
        fprintf(stderr, "chutney train: --embed %lld must be a multiple of --heads %lld\n",
                (long long)a.embed, (long long)a.heads);
        return CN_TOOL_USAGE;
    }
    if (a.threads) cn_set_num_threads(a.threads);
    cn_manual_seed(a.seed);
    double t_start = cn_tool_now_s();
    run r = {0};
    int rc = 0;
    if (prepare_data(&a, &r) < 0) {
        fprintf(stderr, "chutney: cannot prepare %s: %s\n", a.data, cn_tool_error());
        run_free(&r);
        return 1;
    }
    cn_gpt_config cfg = {.vocab_size = cn_tokenizer_vocab_size(r.tok),
                         .context_length = a.context,
                         .n_layer = (int)a.layers,
                         .n_head = (int)a.heads,
                         .n_embd = a.embed,
                         .dropout = a.dropout,
                         .rope = a.rope};
    int64_t V = cfg.vocab_size, T = a.context;
    r.model = cn_nn_gpt(&cfg);
    r.opt = r.model ? make_optimizer(&a, r.model) : NULL;
    cn_tool_progress resumed = {0};
    bool sched_failed = false;
    if (r.opt) {
        int64_t windows = (cn_numel(r.train) - 1) / T;
        r.sched = a.sched = cn_tool_schedule_make(&a, r.opt, (int64_t)a.epochs * ((windows + a.batch - 1) / a.batch),
                                                  &sched_failed);
    }
    if (!r.model || !r.opt || sched_failed) {
        fprintf(stderr, "chutney: %s\n", cn_tool_error());
        run_free(&r);
        return 1;
    }
    if (a.resume && cn_tool_load_checkpoint_ex(a.resume, "gpt", r.model, r.opt, &resumed) < 0) {
        fprintf(stderr, "chutney: cannot resume: %s\n", cn_tool_error());
        run_free(&r);
        return 1;
    }
    int src = cn_tool_schedule_resume(&a);
    if (src) {
        run_free(&r);
        return src;
    }
    int rrc = a.resume ? cn_tool_resume_settings(&a, ap, r.opt, &resumed) : 0;
    if (rrc) {
        run_free(&r);
        return rrc;
    }
    int start_epoch = resumed.epochs_done;
    if (a.precision == CN_F16 && !(r.scaler = cn_grad_scaler_new(r.opt, NULL))) {
        fprintf(stderr, "chutney: %s\n", cn_last_error());
        run_free(&r);
        return 1;
    }
    if (cn_tool_restore_scaler(r.scaler, &resumed) < 0) {
        run_free(&r);
        return 1;
    }
    a.scaler = r.scaler;
    r.loader = cn_text_loader_new(r.train, T,
                                  &(cn_loader_opts){.batch_size = a.batch, .shuffle = true,
                                                    .seed = a.seed, .prefetch = 1});
    if (!r.loader || (a.static_mode && compile_step(&a, &r, V) < 0)) {
        fprintf(stderr, "chutney: %s%s\n", r.loader ? "cannot compile the training step: " : "",
                cn_last_error());
        run_free(&r);
        return 1;
    }
    /* Counting lists the parameters, which can fail (out of memory). */
    int64_t nparams = cn_module_num_params(r.model);
    if (nparams < 0) {
        fprintf(stderr, "chutney: %s\n", cn_last_error());
        run_free(&r);
        return 1;
    }
    int64_t nb = cn_loader_num_batches(r.loader), nval = cn_shape(r.val_in)[0];
    double unigram = unigram_loss(r.train, r.val_tg, V);
    train_log_start(a.logger, &(train_log_start_info){
        .model = "gpt", .mode = r.prog ? "static" : "eager", .device = "cpu:0", .ranks = 1,
        .epochs = a.epochs, .start_epoch = start_epoch, .batch = a.batch,
        .steps_per_epoch = nb, .samples = (cn_numel(r.train) - 1) / T, .lr = a.lr});
    if (!a.json && !a.quiet) {
        printf("training gpt (%lld parameters: %d layers, %d heads, width %lld, context %lld, "
               "vocab %lld%s) on %s: %lld training windows, %lld validation, batch %lld, adamw lr "
               "%g, %s mode, %d thread%s%s%s\n",
               (long long)nparams, cfg.n_layer, cfg.n_head,
               (long long)cfg.n_embd, (long long)T, (long long)V, cfg.rope ? ", rope" : "", a.data,
               (long long)(cn_numel(r.train) - 1) / T, (long long)nval, (long long)a.batch, a.lr,
               r.prog ? "static" : "eager", cn_get_num_threads(),
               cn_get_num_threads() == 1 ? "" : "s", a.precision == CN_F32 ? "" : ", precision ",
               a.precision == CN_F32 ? "" : cn_dtype_name((cn_dtype)a.precision));
        printf("unigram baseline: validation loss %.4f (perplexity %.2f)\n", unigram, exp(unigram));
        fflush(stdout);
    }
    bool tty = isatty(2);
    double val = NAN, last_loss = NAN, train_time = 0, epoch_time = 0, all_time = 0, cpu_time = 0;
    /* this run's, for --json; tokens/s leaves out the first warmup steps
     * (first-touch allocations, caches), as train.c does */
    int64_t tokens = 0, all_tokens = 0, steps_run = 0;
    const int warmup = 20;
    cn_tool_signals_begin();
    cn_tool_progress stopped = {0}; /* set when a signal stopped the loop */
    int stop_sig = 0;
    cn_tool_prof prof;
    cn_tool_prof_init(&prof, a.profile, a.profile_steps,
                      nb * (a.epochs - start_epoch) - resumed.batches_done);
    for (int epoch = start_epoch; epoch < a.epochs && rc == 0 && !stop_sig; epoch++) {
        if (cn_loader_set_epoch(r.loader, epoch) < 0) {
            fprintf(stderr, "chutney: %s\n", cn_last_error());
            rc = 1;
            break;
        }
        cn_module_train(r.model, true);
        double e_start = cn_tool_now_s(), loss_sum = 0;
        int64_t seen = 0, b0 = 0;
        if (epoch == start_epoch && resumed.batches_done > 0) {
            /* The part of this epoch the stopped run trained. */
            b0 = resumed.batches_done;
            loss_sum = resumed.loss_sum;
            seen = resumed.seen;
            if (cn_tool_skip_batches(r.loader, b0, a.resume) < 0) {
                rc = 1;
                break;
            }
        }
        for (int64_t b = b0; b < nb; b++) {
            cn_tool_prof_step_begin(&prof);
            cn_tensor *batch[2], *loss = NULL;
            cn_scope_begin();
            if (cn_tool_next_batch(r.loader, batch) < 0) {
                cn_scope_end();
                rc = 1;
                break;
            }
            double t0 = cn_tool_now_s(), c0 = cn_tool_cpu_s();
            double step_lr = cn_optimizer_get_lr(r.opt); /* the schedule moves it after */
            if (r.prog) {
                cn_tensor *res[2] = {NULL, NULL};
                loss = cn_run(r.prog, r.ph, batch, 2, res, r.nout) < 0 ? NULL : res[r.nout - 1];
            } else {
                cn_optimizer_zero_grad(r.opt);
                loss = lm_loss(cn_module_forward(r.model, batch[0]), batch[1], V);
                cn_tensor *root = r.scaler ? cn_grad_scaler_scale(r.scaler, loss) : loss;
                if (loss && (cn_backward(root, NULL) < 0 || cn_optimizer_step(r.opt) < 0))
                    loss = NULL;
            }
            if (loss && r.sched && cn_lr_scheduler_step(r.sched) < 0) loss = NULL;
            if (!loss) {
                fprintf(stderr, "chutney: training step failed: %s\n", cn_last_error());
                cn_scope_end();
                rc = 1;
                break;
            }
            double dt = cn_tool_now_s() - t0;
            int64_t bs = cn_shape(batch[0])[0];
            if (steps_run >= warmup) {
                train_time += dt;
                cpu_time += cn_tool_cpu_s() - c0;
                tokens += bs * T;
            }
            all_time += dt;
            all_tokens += bs * T;
            steps_run++;
            last_loss = cn_item(loss);
            loss_sum += last_loss * (double)bs;
            seen += bs;
            cn_scope_end();
            if (cn_tool_prof_step_end(&prof)) {
                rc = 1;
                break;
            }
            if (a.logger)
                train_log_step(a.logger, &(train_log_step_info){
                    .epoch = epoch + 1, .step = (int64_t)epoch * nb + b + 1, .loss = last_loss,
                    .lr = step_lr,
                    .grad_norm = train_log_grad_norm(a.logger, r.model, r.opt),
                    .samples_per_sec = (double)bs / dt, .tokens_per_sec = (double)(bs * T) / dt});
            if (!a.json && !a.quiet && (tty ? (b % 10 == 9 || b == nb - 1) : (b % 200 == 199))) {
                double el = cn_tool_now_s() - e_start;
                fprintf(stderr, tty ? "\repoch %d/%d: batch %lld/%lld  loss %.4f  %.0f tokens/s  "
                                      "%3.0fs left "
                                    : "epoch %d/%d: batch %lld/%lld  loss %.4f  %.0f tokens/s  "
                                      "%.0fs left\n",
                        epoch + 1, a.epochs, (long long)(b + 1), (long long)nb,
                        loss_sum / (double)seen, (double)(seen * T) / el,
                        el * (double)(nb - b - 1) / (double)(b + 1));
                fflush(stderr);
            }
            if (cn_tool_save_due(&a, (int64_t)epoch * nb + b + 1, b, nb)) {
                cn_tool_progress now = {.epochs_done = epoch, .batches_done = b + 1,
                                        .loss_sum = loss_sum, .seen = seen};
                if (save_gpt(&a, &cfg, r.tok, r.model, r.opt, epoch, &now) < 0) {
                    fprintf(stderr, "chutney: cannot save checkpoint: %s\n", cn_last_error());
                    rc = 1;
                    break;
                }
            }
            if ((stop_sig = cn_tool_stop_signal()) != 0) {
                stopped = (cn_tool_progress){.epochs_done = epoch, .batches_done = b + 1,
                                             .loss_sum = loss_sum, .seen = seen};
                break;
            }
        }
        if (rc) break;
        if (stop_sig) {
            if (a.save && save_gpt(&a, &cfg, r.tok, r.model, r.opt, epoch, &stopped) < 0) {
                fprintf(stderr, "chutney: cannot save checkpoint: %s\n", cn_last_error());
                rc = 1;
            }
            break;
        }
        epoch_time = cn_tool_now_s() - e_start;
        val = evaluate(r.model, r.val_in, r.val_tg, a.batch);
        if (!isfinite(val)) {
            fprintf(stderr, "chutney: validation failed: %s\n", cn_last_error());
            rc = 1;
            break;
        }
        if (tty && !a.json && !a.quiet) fputc('\n', stderr);
        if (!a.json && !a.quiet)
            printf("epoch %d: train loss %.4f, validation loss %.4f (perplexity %.2f; unigram "
                   "%.4f), %.1f s, %.0f tokens/s\n",
                   epoch + 1, loss_sum / (double)(seen ? seen : 1), val, exp(val), unigram,
                   epoch_time, (double)(seen * T) / epoch_time);
        fflush(stdout);
        train_log_epoch(a.logger, &(train_log_epoch_info){
            .epoch = epoch + 1, .step = (int64_t)(epoch + 1) * nb,
            .train_loss = loss_sum / (double)(seen ? seen : 1), .train_accuracy = NAN,
            .test_accuracy = NAN, .val_loss = val, .val_perplexity = exp(val),
            .lr = cn_optimizer_get_lr(r.opt), .seconds = cn_tool_now_s() - e_start,
            .samples_per_sec = (double)seen / (epoch_time > 0 ? epoch_time : NAN)});
        if (a.save && save_gpt(&a, &cfg, r.tok, r.model, r.opt, epoch + 1, NULL) < 0) {
            fprintf(stderr, "chutney: cannot save checkpoint: %s\n", cn_last_error());
            rc = 1;
        }
        /* A signal during the validation pass or the save: the epoch is whole. */
        if (rc == 0 && (stop_sig = cn_tool_stop_signal()) != 0)
            stopped = (cn_tool_progress){.epochs_done = epoch + 1};
    }
    cn_tool_signals_end();
    if (rc == 0 && stop_sig) rc = cn_tool_stopped(stop_sig, a.save, &stopped, nb);
    if (rc == 0 && isnan(val)) {
        val = evaluate(r.model, r.val_in, r.val_tg, a.batch); /* nothing left to train */
        if (!isfinite(val)) {
            fprintf(stderr, "chutney: validation failed: %s\n", cn_last_error());
            rc = 1;
        }
    }
    if (rc == 0 && !a.json && !a.quiet) cn_tool_scaler_report(r.scaler, steps_run, resumed.loss_scale.skipped);
    if (rc == 0) {
        printf("validation loss: %.4f (perplexity %.2f; unigram baseline %.4f, perplexity %.2f)\n",
               val, exp(val), unigram, exp(unigram));
        char loss_s[32] = "null";
        if (isfinite(last_loss)) snprintf(loss_s, sizeof loss_s, "%.9g", last_loss);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        if (a.json)
            printf("{\"model\":\"gpt\",\"mode\":\"%s\",\"epochs\":%d,\"steps\":%lld,"
                   "\"vocab\":%lld,\"parameters\":%lld,"
                   "\"val_loss\":%.6f,\"val_perplexity\":%.4f,\"unigram_loss\":%.6f,"
                   "\"tokens_per_sec\":%.1f,\"tokens_per_cpu_sec\":%.1f,\"seconds\":%.2f,"
                   "\"peak_rss_mb\":%.1f,"
                   "\"final_loss\":%s}\n",
                   r.prog ? "static" : "eager", a.epochs, (long long)steps_run, (long long)V,
                   (long long)nparams,
                   val, exp(val), unigram,
                   train_time > 0 ? (double)tokens / train_time  /* too short: timed whole */
                   : all_time > 0 ? (double)all_tokens / all_time
                                  : 0,
                   cpu_time > 0 ? (double)tokens / cpu_time : 0,
                   cn_tool_now_s() - t_start, (double)ru.ru_maxrss / 1024.0, loss_s);
    }
    if (cn_tool_prof_finish(&prof) && rc == 0) rc = 1;
    run_free(&r);
    return rc;
}

int cn_tool_eval_gpt(const train_args *ap) {
    train_args a = *ap;
    if (!a.data_given) {
        fprintf(stderr, "chutney eval: a GPT checkpoint is scored on a text: give --data FILE "
                        "(the last 10%% is the validation part, as in training)\n");
        return CN_TOOL_USAGE;
    }
    if (a.threads) cn_set_num_threads(a.threads);
    run r = {0};
    cn_tokenizer *tok = NULL;
    r.model = cn_tool_gpt_model(a.load, &tok);
    cn_tokenizer_free(tok); /* prepare_data reads it again, from a.resume */
    cn_gpt_config cfg;
    if (r.model) cn_gpt_get_config(r.model, &cfg);
    a.context = r.model ? cfg.context_length : 0;
    a.resume = a.load;
    gpt_defaults(&a);
    if (!r.model || prepare_data(&a, &r) < 0) {
        fprintf(stderr, "chutney eval: cannot load %s: %s\n", r.model ? a.data : a.load,
                cn_tool_error());
        run_free(&r);
        return 1;
    }
    double val = evaluate(r.model, r.val_in, r.val_tg, a.batch);
    int rc = isfinite(val) ? 0 : 1;
    if (rc) fprintf(stderr, "chutney eval: validation failed: %s\n", cn_last_error());
    else if (a.json)
        printf("{\"model\":\"gpt\",\"val_windows\":%lld,\"val_loss\":%.6f,\"val_perplexity\":%.4f}\n",
               (long long)cn_shape(r.val_in)[0], val, exp(val));
    else
        printf("validation loss: %.4f (perplexity %.2f) over %lld windows of %lld tokens\n", val,
               exp(val), (long long)cn_shape(r.val_in)[0], (long long)a.context);
    run_free(&r);
    return rc;
}
