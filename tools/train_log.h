/* What `chutney train --log FILE --tensorboard DIR` writes while it trains
 * (tools/train_log.c): one JSON line per step and per epoch, and the same
 * figures as TensorBoard scalars (tools/tfevents.c). tools/train.c and
 * tools/train_gpt.c only hand it their figures; --log, --tensorboard and
 * the gradient norm cost nothing when neither option is given. */
#ifndef CN_TOOLS_TRAIN_LOG_H
#define CN_TOOLS_TRAIN_LOG_H

#include "tools.h"

#include <stdint.h>

typedef struct train_log train_log;

/* Opens FILE (--log, truncated) and/or a new event file in DIR
 * (--tensorboard, made if missing); either may be NULL. 0 and *out (NULL
 * when both are NULL), or the exit status after a message naming the
 * option: 1 when the file cannot be made, or when the build has no
 * TensorBoard writer. */
int train_log_open(const char *cmd, const char *log_path, const char *tb_dir, train_log **out);
/* Closes both; -1 when a write failed during the run (reported then). */
int train_log_close(train_log *l);

/* The run's settings, as the first line ({"event":"start",...}). */
typedef struct train_log_start_info {
    const char *model, *mode, *device;
    int ranks, epochs, start_epoch;
    int64_t batch, steps_per_epoch, samples; /* batch: the global batch */
    double lr;
} train_log_start_info;
void train_log_start(train_log *l, const train_log_start_info *s);

/* NaN fields are left out of the event file and written null in the log
 * (JSON has no NaN). */
typedef struct train_log_step_info {
    int epoch;     /* from 1 */
    int64_t step;  /* from 1, counted over every epoch (resumed runs too) */
    double loss, lr, grad_norm, samples_per_sec, tokens_per_sec;
} train_log_step_info;
void train_log_step(train_log *l, const train_log_step_info *s);

typedef struct train_log_epoch_info {
    int epoch;
    int64_t step; /* the last step of the epoch */
    double train_loss, train_accuracy, test_accuracy, val_loss, val_perplexity, lr, seconds,
        samples_per_sec;
} train_log_epoch_info;
void train_log_epoch(train_log *l, const train_log_epoch_info *e);

/* The 2-norm of all of m's gradients after the step just taken: what the
 * optimiser's clipping measured when it clips, else the same computation
 * (cn_clip_grad_norm with no limit). NaN when l is NULL: the reduction is
 * only paid for when something logs it. */
double train_log_grad_norm(train_log *l, cn_module *m, cn_optimizer *opt);

/* The process's resident memory now, in MB (the peak where /proc is
 * missing). */
double train_log_rss_mb(void);

/* The command line's optional features (`chutney --version` lists them
 * after the library's). */
extern const cn_build_feature cn_tool_features[];
extern const int cn_tool_nfeatures;

#endif
