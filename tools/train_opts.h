/* The optimiser's and the schedule's settings of `chutney train`
 * (tools/train_opts.c): one table of options that gives the command line,
 * the --config file, the checkpoint's metadata and the resume their
 * names, ranges and the optimisers or schedules each applies to. */
#ifndef CN_TOOLS_TRAIN_OPTS_H
#define CN_TOOLS_TRAIN_OPTS_H

#include <chutney.h>

#include <stdbool.h>
#include <stddef.h>

/* Slots of train_args.optv; NAN until given (or read from a checkpoint). */
enum {
    TO_MOMENTUM, TO_DAMPENING, TO_NESTEROV, TO_WEIGHT_DECAY, TO_BETA1, TO_BETA2, TO_EPS,
    TO_AMSGRAD, TO_ALPHA, TO_CENTERED, TO_LR_DECAY, TO_INIT_ACC, TO_LABEL_SMOOTHING,
    TO_SCHEDULE, TO_STEP_SIZE, TO_GAMMA, TO_T_MAX, TO_ETA_MIN, TO_START_FACTOR, TO_END_FACTOR,
    TO_TOTAL_ITERS, TO_WARMUP, TO_WARMUP_FACTOR, TO_NSLOTS
};

/* The schedules --schedule names (TO_SCHEDULE holds the index). */
enum { SCHED_NONE, SCHED_STEP, SCHED_EXPONENTIAL, SCHED_COSINE, SCHED_LINEAR, SCHED_COUNT };

struct train_args;

/* Is k one of these options? *flag: it takes no value on the command line. */
bool cn_tool_optim_known(const char *k, bool *flag, const char **what);
/* Their names, for "did you mean": up to max into names; the count. */
int cn_tool_optim_names(const char **names, int max);
/* Option k (a flag when v is NULL) into a->optv: 0, or 2 after a message. */
int cn_tool_optim_set(struct train_args *a, const char *cmd, const char *k, const char *v);
/* Every option given that this run's optimiser or schedule does not have
 * (a->optimizer must be final): 0, or 2 after a message naming it. */
int cn_tool_optim_check(const struct train_args *a);
/* The optimiser of a->optimizer with every setting given (the model's
 * defaults elsewhere), its clipping set from a->clip. NULL after
 * cn_tool_fail. */
cn_optimizer *cn_tool_optim_make(const struct train_args *a, cn_tensor **params, int n,
                                 double default_momentum);
/* The schedule (NULL when none is asked for, *failed false); total: the
 * steps of the whole run, --t-max's default (a->optv gets it). */
cn_lr_scheduler *cn_tool_schedule_make(struct train_args *a, cn_optimizer *opt, int64_t total,
                                       bool *failed);
/* The settings as checkpoint metadata: *n pairs into keys/vals (vals
 * stored in buf). */
void cn_tool_optim_meta(const struct train_args *a, const char **keys, const char **vals,
                        char (*buf)[40], int *n);
/* Settings not given on this command line from the checkpoint's metadata
 * (resume): 0, or -1 after cn_tool_fail (a malformed value). */
int cn_tool_optim_from_meta(struct train_args *a, cn_checkpoint *c, const char *path);
/* a->sched's state from a->resume's entries under "scheduler." (nothing
 * to do without either; a->sched is made before the optimiser's state is
 * loaded, as a fresh schedule sets the lr): 0, or the exit status after a
 * message (2: the checkpoint's schedule is another). */
int cn_tool_schedule_resume(const struct train_args *a);

#endif
