/* The chutney program's commands: each takes its own argv (argv[0] is the
 * command name) and returns the process exit status. */
#ifndef CN_TOOLS_H
#define CN_TOOLS_H

#include <chutney.h>

#include <stdbool.h>
#include <stdio.h>
#include <time.h>

int cn_tool_ops(int argc, char **argv);
int cn_tool_train(int argc, char **argv);
int cn_tool_eval(int argc, char **argv);
int cn_tool_run(int argc, char **argv);
int cn_tool_info(int argc, char **argv);
/* `chutney graph MODEL.onnx ...` (tools/onnx_cli.c), called by cn_tool_graph. */
int cn_tool_onnx_graph(int argc, char **argv);
int cn_tool_graph(int argc, char **argv);
/* The benchmark models of docs/benchmarks.md: "mlp", "cnn" or "lstm"
 * (NULL after cn_tool_fail for another name). Input [N, 1, 28, 28] f32. */
cn_module *cn_tool_make_model(const char *name);
/* The same for other data: samples [C, H, W] (ndim 3) or [F] features
 * (ndim 1; mlp only), nout outputs (the classes, or 1 for a regression).
 * The 1x28x28, 10-output models are cn_tool_make_model's exactly. */
cn_module *cn_tool_make_model_for(const char *name, int ndim, const int64_t *in, int64_t nout);
bool cn_tool_known_model(const char *name);
/* Loads a checkpoint written by `chutney train --save` into m (made by
 * cn_tool_make_model(model)); with opt, also the optimiser state and the
 * RNG. *epochs_done gets how far that run had got (tools/train.c). */
int cn_tool_load_checkpoint(const char *path, const char *model, cn_module *m, cn_optimizer *opt,
                            int *epochs_done);
int cn_tool_export(int argc, char **argv);
/* The GPT configuration a `train --model gpt` checkpoint keeps in its
 * metadata (gpt_vocab, gpt_context, ...; tools/train_gpt.c writes it).
 * 0, or -1 after cn_tool_fail naming path. */
int cn_tool_gpt_config(const cn_checkpoint *c, const char *path, cn_gpt_config *cfg);

/* Failures of the tools' own making (an unknown model, a checkpoint of
 * another model), reported like the library's: cn_tool_fail sets the
 * message and clears the library's (cn_clear_error), so cn_tool_error()
 * gives the message of the latest failure, the library's if it has one,
 * else the tools' (tools/error.c). */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void cn_tool_fail(const char *fmt, ...);
const char *cn_tool_error(void);
int cn_tool_devices(int argc, char **argv);
/* --device S (NULL: the CPU) into *out: 0, or, after a message on stderr
 * starting with prefix ("chutney", "chutney run"), the exit status: 2 when S
 * is not a device name, 1 when this machine has no such device
 * (tools/devices.c). */
int cn_tool_device(const char *prefix, const char *s, cn_device *out);


/* `chutney predict` (tools/predict.c). */
int cn_tool_predict(int argc, char **argv);
/* `chutney generate` (tools/generate.c): text from a GPT checkpoint. */
int cn_tool_generate(int argc, char **argv);
/* The GPT of a checkpoint of train --model gpt, with its weights, and its
 * tokenizer (NULL after cn_tool_fail). */
cn_module *cn_tool_gpt_model(const char *path, cn_tokenizer **tok);
/* `chutney quantize IN OUT` (tools/quantize.c): a checkpoint with int8
 * weights. */
int cn_tool_quantize(int argc, char **argv);
/* `chutney plot` (tools/plot.c): a train --log file's curves as a PNG. */
int cn_tool_plot(int argc, char **argv);
/* The names of the benchmark models, for messages and suggestions. */
extern const char *const cn_tool_models[3];
/* The 10 classes of Fashion-MNIST, by label. */
extern const char *const cn_tool_fashion_classes[10];

/* ---- the command line (tools/args.c) ----
 * Exit statuses: CN_TOOL_USAGE when the command line is wrong (it would be
 * on any machine), CN_TOOL_FAILED when it is right but something here
 * failed (a file, a directory, a device, the data). Every helper that
 * refuses something prints one message starting "chutney CMD: " that
 * names the option and what it accepts. */
enum { CN_TOOL_FAILED = 1, CN_TOOL_USAGE = 2 };
/* The candidate within 2 edits of word (Damerau-Levenshtein, fewer edits
 * than half its letters), or that word begins uniquely; else NULL. */
const char *cn_tool_suggest(const char *word, const char *const *cands, int n);
/* "unknown option" (or "unexpected argument") with "did you mean" over
 * opts; return CN_TOOL_USAGE. */
int cn_tool_unknown_option(const char *cmd, const char *arg, const char *const *opts, int n);
int cn_tool_unknown_command(const char *arg, const char *const *cmds, int n);
int cn_tool_missing_value(const char *cmd, const char *opt, const char *what);
/* Seconds on the monotonic clock, for the rates commands report; and the
 * CPU seconds of the whole process (every thread), which other work on a
 * busy machine does not inflate. */
static inline double cn_tool_clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static inline double cn_tool_now_s(void) { return cn_tool_clock_s(CLOCK_MONOTONIC); }
static inline double cn_tool_cpu_s(void) { return cn_tool_clock_s(CLOCK_PROCESS_CPUTIME_ID); }
/* Parse a value of opt; false after a message. */
bool cn_tool_int(const char *cmd, const char *opt, const char *s, long long lo, long long hi,
                 long long *out);
bool cn_tool_u64(const char *cmd, const char *opt, const char *s, uint64_t *out);
bool cn_tool_positive(const char *cmd, const char *opt, const char *s, double *out);
/* true/false or 1/0 (a --config flag, a model file's bias=): false if s
 * is neither, without a message. */
bool cn_tool_bool(const char *s, bool *out);
/* The index of s among choices, or -1 after a message ("unknown NOUN", or
 * "bad value" when noun is NULL) listing them, with "did you mean". */
int cn_tool_choice(const char *cmd, const char *opt, const char *noun, const char *s,
                   const char *const *choices, int n);
/* ---- --precision (tools/precision.c; docs/training.md, "Mixed precision") ----
 * f32|bf16|f16: the dtype products compute in (autocast) into *out; false
 * after a message. cn_tool_autocast_begin opens the region for it
 * (nothing for f32 or -1); its failure is reported and returned. */
bool cn_tool_precision(const char *cmd, const char *s, int *out);
int cn_tool_autocast_begin(int precision);
void cn_tool_autocast_end(int precision);
/* An inference command (eval, predict, generate, run) run inside the
 * region of its --precision, which is taken out of argv first. */
int cn_tool_run_with_precision(int (*run)(int argc, char **argv), int argc, char **argv);
/* A compiled f16 step's outputs (outs[0] the loss, n of them, room for
 * one more): the scaled loss first, for the gradients, and the loss
 * itself appended, to report. The count; n when s is NULL. */
int cn_tool_scale_outputs(cn_grad_scaler *s, cn_tensor **outs, int n);
/* f16's loss scaling after training: the steps this run skipped (the scaler had
 * skipped_before when it began: a resumed run's), its scale (s NULL: nothing). */
void cn_tool_scaler_report(const cn_grad_scaler *s, int64_t steps, int64_t skipped_before);
/* Files checked before the work starts; false after a message. writable:
 * path's directory exists and may be written (saves go through a
 * temporary file there), and path is not a directory. */
bool cn_tool_readable(const char *cmd, const char *opt, const char *path);
/* Opens a file the tools read themselves (a text corpus) as the library
 * opens its files (src/io/fileio.c, cn_fopen_regular): non-blocking, then
 * refused unless fstat says regular file. NULL after cn_tool_fail. */
FILE *cn_tool_fopen_regular(const char *path);
/* A text file the tools read whole (a model file, a --config file), up
 * to max bytes, as a string to free(); NULL after cn_tool_fail ("PATH: too
 * large: not WHAT", a NUL byte, an error). */
char *cn_tool_read_text(const char *path, size_t max, const char *what);
bool cn_tool_directory(const char *cmd, const char *opt, const char *path);
/* --config FILE (tools/config_file.c): its `key = value` lines (`#`
 * comments, blank lines; '_' in a key reads as '-'), in order, into *out
 * (free() it; the strings live as long as the process). 0, or the exit
 * status after a message naming FILE:LINE. */
typedef struct cn_tool_config_entry {
    const char *key, *value;
    int line;
} cn_tool_config_entry;
int cn_tool_config_read(const char *cmd, const char *path, cn_tool_config_entry **out, int *n);
bool cn_tool_writable(const char *cmd, const char *opt, const char *path);

/* `chutney profile TRACE.json` and --profile FILE of train and run
 * (tools/profile.c): steps [start, stop) of a run are recorded, the
 * first ones (compiling, planning, filling caches) left out. */
int cn_tool_profile(int argc, char **argv);
typedef struct cn_tool_prof {
    const char *path;  /* NULL: not profiling */
    const char *range; /* the range each step is recorded in ("train_step") */
    int64_t start, stop, step;
    bool on, done;
} cn_tool_prof;
/* steps: how many to record (0: 10) of the run's total. */
void cn_tool_prof_init(cn_tool_prof *p, const char *path, int64_t steps, int64_t total);
void cn_tool_prof_step_begin(cn_tool_prof *p);
/* 0, or 1 after a message (the trace could not be written). */
int cn_tool_prof_step_end(cn_tool_prof *p);
int cn_tool_prof_finish(cn_tool_prof *p);

#endif
