/* What `chutney train` shares between its Fashion-MNIST models
 * (tools/train.c) and the GPT on a text file (tools/train_gpt.c): the
 * parsed command line and the checkpoint writer. */
#ifndef CN_TOOLS_TRAIN_H
#define CN_TOOLS_TRAIN_H

#include "dataset.h"
#include "tools.h"
#include "train_log.h"
#include "train_opts.h"
#include "dataset.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

typedef struct train_args {
    const char *model, *optimizer, *data, *save, *resume, *load;
    /* --model-file: an ONNX model (model is then "onnx"; tools/train_onnx.c) or a text of
     * layers (model CN_TOOL_TEXT_MODEL, its text in model_text; tools/model_text.c) */
    const char *model_file;
    const char *logits; /* eval: write the test logits here (.npy) */
    const char *device_name; /* --device as given (NULL: the CPU) */
    cn_device device;        /* where the model lives and the batches go */
    bool on_device;          /* device is not the CPU: batches are copied there */
    int epochs, threads;
    int64_t batch, limit;
    double lr;
    uint64_t seed;
    bool json, quiet;
    bool static_mode; /* --mode static (the default): the step is one compiled program */
    bool distributed; /* --distributed: one rank of an MPI job (data-parallel) */
    int rank, nranks; /* 0 and 1 unless distributed */
    bool data_given;  /* --data was on the command line */
    /* --model gpt (0: its default; dropout < 0: its default) */
    int64_t vocab, context, layers, heads, embed;
    double dropout, clip;
    bool rope; /* --rope: rotary position embeddings instead of learned ones */
    const char *save_tokens; /* --save-tokens PREFIX: PREFIX.train.npy, PREFIX.val.npy */
    const char *log, *tensorboard; /* --log FILE, --tensorboard DIR */
    const char *profile;           /* --profile FILE: a Chrome trace (tools/profile.c) */
    int64_t profile_steps;         /* --profile-steps N (0: 10) */
    int64_t save_every;            /* --save-every N: a resumable checkpoint each N steps (0: none) */
    struct train_log *logger;      /* both, opened (rank 0); NULL: neither (train_log.h) */
    /* Data other than Fashion-MNIST (tools/dataset.h): --labels, --target,
     * --features, --task (-1: from the data), --image-size, --channels,
     * --val-split (< 0: default), --standardize, --augment (bits). */
    const char *labels, *target, *features;
    int task, channels, augment;
    int64_t height, width;
    double val_split;
    bool standardize;
    /* A text model's layers (docs/model-format.md): --model-file's text, or
     * on resume and eval the checkpoint's, kept here. */
    char *model_text;
    const char *config; /* --config FILE */
    int precision;      /* --precision: CN_F32, CN_BF16 or CN_F16 (-1: not given) */
    /* The optimiser's and schedule's settings (train_opts.h); NAN: not given. */
    double optv[TO_NSLOTS];
    cn_lr_scheduler *sched; /* the run's schedule, saved under "scheduler." (NULL: none) */
    /* --precision f16's loss scaler: its state saved as loss_scale,
     * loss_scale_growth and loss_scale_skipped (NULL: none) */
    const cn_grad_scaler *scaler;
    ds_audio audio; /* --n-fft, --hop, --n-mels, --fmin, --fmax, --clip-seconds */
} train_args;

/* The model state, the optimiser state under "optimizer.", and metadata:
 * format, model, optimizer, epochs_done, the RNG's state, lr, batch, seed,
 * device, then nextra more (keys[i], vals[i]), atomically (tools/train.c). */
int cn_tool_save_checkpoint(const char *path, const train_args *a, cn_module *m,
                            cn_optimizer *opt, int epochs_done, const char *const *keys,
                            const char *const *vals, int nextra);

/* --save-every: true when the step just trained (0-based b of nb in the
 * epoch, global step number `step`, 1-based) should write a mid-epoch
 * checkpoint; the end of an epoch has its own. */
static inline bool cn_tool_save_due(const train_args *a, int64_t step, int64_t b, int64_t nb) {
    return a->save && a->save_every > 0 && a->rank == 0 && b + 1 < nb && step % a->save_every == 0;
}

/* How far the run that wrote a checkpoint got, and its settings, read
 * strictly from the metadata (a malformed value fails the load). */
typedef struct cn_tool_progress {
    int epochs_done;      /* whole epochs */
    int64_t batches_done; /* batches of the next epoch already trained: a checkpoint
                             written on SIGINT/SIGTERM; 0 at an epoch's end */
    double loss_sum;      /* that part epoch's sums, so its figures cover all of it */
    int64_t correct, seen;
    double lr;     /* the run's --lr and --batch (0: not recorded) */
    int64_t batch;
    bool has_loss_scale; /* an f16 run's loss scaler, to put back (cn_tool_restore_scaler) */
    cn_grad_scaler_state loss_scale;
} cn_tool_progress;

/* After a resume: the loss scaler given the interrupted run's state, when
 * the checkpoint has one (an f16 run from before it was saved starts from
 * the default scale). Returns 0, or -1 after printing the error. */
int cn_tool_restore_scaler(cn_grad_scaler *s, const cn_tool_progress *p);

/* cn_tool_load_checkpoint (tools.h) with all of the progress. */
int cn_tool_load_checkpoint_ex(const char *path, const char *model, cn_module *m,
                               cn_optimizer *opt, cn_tool_progress *p);

/* After a resume: --lr and --batch given on the command line (given: the
 * arguments as parsed, before any default) win over the checkpoint's;
 * those not given take the checkpoint's, so the run goes on as it was.
 * The optimiser gets the lr. A different batch size cannot finish an
 * epoch stopped midway (the batches done would not match): refused.
 * Prints the "resuming" line. 0, or the exit status after a message. */
int cn_tool_resume_settings(train_args *a, const train_args *given, cn_optimizer *opt,
                            const cn_tool_progress *p);

/* Draws and drops the loader's next n batches: the part of an epoch that
 * a run stopped by a signal had trained already (resume: the checkpoint,
 * for messages). 0, or -1 after a message. */
int cn_tool_skip_batches(cn_loader *l, int64_t n, const char *resume);

/* SIGINT and SIGTERM while training: the first asks the loop to stop
 * after the step in progress (cn_tool_stop_signal then returns it); a
 * second removes the temporaries of a save in progress and exits at once
 * with 128 + the signal. end puts the previous handlers back. */
void cn_tool_signals_begin(void);
int cn_tool_stop_signal(void);
/* The next batch of an epoch that promised one: 0, or -1 after a message
 * (an error, or the epoch ending early, which is as wrong here). */
int cn_tool_next_batch(cn_loader *l, cn_tensor **batch);
void cn_tool_signals_end(void);

/* A checkpoint of a run stopped by a signal after `batches` batches of
 * epoch epochs_done (0-based), with that part epoch's sums: the metadata
 * batches_done, epoch_loss_sum, epoch_correct, epoch_seen added to
 * nextra more. */
int cn_tool_save_progress(const char *path, const train_args *a, cn_module *m,
                          cn_optimizer *opt, const cn_tool_progress *p, const char *const *keys,
                          const char *const *vals, int nextra);

/* The message and exit status of a run stopped by signal sig: what was
 * saved (saved: the path, NULL: no --save) and how to go on. */
int cn_tool_stopped(int sig, const char *saved, const cn_tool_progress *p, int64_t nbatches);

/* --model-file M.onnx (tools/train_onnx.c). Does path end in .onnx? */
bool cn_tool_is_onnx_file(const char *path);
/* The ONNX model at path as a trainable module, checked against the data:
 * samples of shape in[0..ndim), nout outputs. NULL after cn_tool_fail. */
cn_module *cn_tool_onnx_model(const char *path, int ndim, const int64_t *in, int64_t nout,
                              bool regress);
/* The checkpoint metadata model_file (its real path) and model_hash added
 * to m. 0, or -1 after cn_tool_fail. */
int cn_tool_onnx_meta(const char *path, ds_meta *m);
/* Was ckpt trained from this very file (its hash)? 0, or -1 after
 * cn_tool_fail. */
int cn_tool_onnx_check(const char *ckpt, const char *path);
/* Is ckpt a checkpoint whose metadata model is model ("onnx", "gpt")? */
bool cn_tool_checkpoint_is(const char *ckpt, const char *model);
/* cn_tool_onnx_model of the file a checkpoint of train --model-file names
 * (checked against its hash); its weights are still the file's. */
cn_module *cn_tool_onnx_model_of(const char *ckpt, int ndim, const int64_t *in, int64_t nout,
                                 bool regress);
/* `chutney export --load CKPT`: the model file (model_file, or the one the
 * checkpoint names) with the checkpoint's weights, written to out. The
 * exit status, after a message. */
int cn_tool_export_onnx(const char *ckpt, const char *model_file, const char *out);

/* `chutney train --model gpt` after the command line was checked
 * (tools/train_gpt.c). */
int cn_tool_train_gpt(train_args *a);
/* `chutney eval --load GPT.ckpt --data FILE`: the validation loss and
 * perplexity of the file's last 10% (tools/train_gpt.c). */
int cn_tool_eval_gpt(const train_args *a);

#endif
