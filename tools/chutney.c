/* The chutney command-line program: a table of commands. */
#include "tools.h"
#include "train_log.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
    bool precision; /* an inference command: takes --precision (tools/precision.c) */
} command;

static const command commands[] = {
    {"train", cn_tool_train, "train a model on Fashion-MNIST or your own data, or a GPT on text (train --help)", false},
    {"eval", cn_tool_eval, "test accuracy of a checkpoint written by train --save", true},
    {"quantize", cn_tool_quantize, "write a checkpoint's model with int8 weights (quantize --help)", false},
    {"predict", cn_tool_predict, "classify image files with a checkpoint (predict --help)", true},
    {"generate", cn_tool_generate, "continue a text with a GPT checkpoint of train --model gpt", true},
    {"graph", cn_tool_graph, "write a model's graph as Graphviz DOT (graph --help)", false},
    {"ops", cn_tool_ops, "list the op table (--markdown: the text of docs/ops.md)", false},
    {"run", cn_tool_run, "run an ONNX model on .npy inputs (run --help for options)", true},
    {"info", cn_tool_info, "an ONNX model's inputs, outputs, parameter count and ops", false},
    {"export", cn_tool_export, "write a model (and a checkpoint's weights) as ONNX (export --help)", false},
    {"plot", cn_tool_plot, "draw the loss and accuracy curves of a train --log file as a PNG", false},
    {"profile", cn_tool_profile, "the table by op of a trace written by train/run --profile", false},
    {"devices", cn_tool_devices, "list the devices to run on (cpu:0, opencl:0, ...) with their memory", false},
};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: chutney <command> [options]\n\ncommands:\n");
    for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "  %-12s %s\n", "help CMD", "a command's options (the same as CMD --help)");
    fprintf(f, "  %-12s %s\n", "--version", "the version, the optional features built in, the CPU code in use");
    fprintf(f, "  %-12s %s\n", "--help", "print this help");
    fprintf(f, "\nExit status: 0 done, 1 a failure (data, files, device), 2 a bad command line.\n");
}

/* The version line (as before: scripts grep it for "+mpi"), then every
 * optional feature with yes or no, then the CPU code the kernels run. */
static int version(void) {
    printf("%s\n\nfeatures:\n", cn_build_info());
    for (int i = 0; i < cn_build_feature_count(); i++) {
        cn_build_feature f;
        if (cn_build_feature_get(i, &f) == 0)
            printf("  %-11s %-4s %s\n", f.name, f.enabled ? "yes" : "no", f.what);
    }
    for (int i = 0; i < cn_tool_nfeatures; i++) /* the program's own (tools/train_log.c) */
        printf("  %-11s %-4s %s\n", cn_tool_features[i].name,
               cn_tool_features[i].enabled ? "yes" : "no", cn_tool_features[i].what);
    static const char *const levels[] = {"default", "avx2", "avx512"};
    printf("\ncpu: %s code in use (this CPU and build run:", cn_cpu_isa());
    for (int l = 0; l < 3; l++)
        if (cn_cpu_isa_available(levels[l])) printf(" %s", levels[l]);
    printf("; CN_ISA=default|avx2|avx512 lowers it)\n");
    printf("gemm: %s\n", cn_cpu_gemm());
    /* Which path --precision takes here (docs/training.md, "Mixed precision"). */
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = i ? CN_F16 : CN_BF16;
        printf("%s matmul: %s\n", cn_dtype_name(dt),
               cn_autocast_native(dt)
                   ? "native: oneDNN's products on this CPU (f32 where it has no kernel)"
                   : "rounded inputs multiplied in f32 (no native products)");
    }
    printf("threads: %d\n", cn_get_num_threads());
    return 0;
}

static const command *find_command(const char *name) {
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(name, commands[i].name) == 0) return &commands[i];
    return NULL;
}

static int unknown_command(const char *name) {
    const char *names[NCOMMANDS + 3];
    for (int i = 0; i < NCOMMANDS; i++) names[i] = commands[i].name;
    names[NCOMMANDS] = "help";
    names[NCOMMANDS + 1] = "--help";
    names[NCOMMANDS + 2] = "--version";
    return cn_tool_unknown_command(name, names, NCOMMANDS + 3);
}

/* `chutney help [CMD]`: the command's own --help. */
static int help(int argc, char **argv) {
    if (argc < 3) {
        usage(stdout);
        return 0;
    }
    const command *c = find_command(argv[2]);
    if (!c) return unknown_command(argv[2]);
    char help_opt[] = "--help"; /* commands take char **: a literal is read-only */
    char *args[] = {argv[2], help_opt, NULL};
    return c->run(2, args);
}

/* SIGINT, SIGTERM, SIGHUP where a command has no handling of its own
 * (train installs its own while it trains): the temporaries of any save in
 * progress go, then the process dies of the signal as it would have, so
 * the shell sees the usual status. */
static void die_clean(int sig) {
    cn_remove_temporary_files();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_clean_exit(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        struct sigaction old, sa;
        /* A signal the caller ignores (nohup, a background job) stays ignored. */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = die_clean;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

/* Output that never arrived (a full disk, `> /dev/full`, a closed pipe
 * with SIGPIPE ignored) is a failure: a script must not read success from
 * a result that is not there. */
static int finish(int rc) {
    errno = 0;
    bool flush_failed = fflush(stdout) != 0;
    int err = errno;
    if (flush_failed || ferror(stdout)) {
        fprintf(stderr, "chutney: cannot write to standard output: %s\n",
                flush_failed && err ? strerror(err) : "a write failed");
        return rc ? rc : CN_TOOL_FAILED;
    }
    return rc;
}

static int run_main(int argc, char **argv);

int main(int argc, char **argv) {
    install_clean_exit();
    return finish(run_main(argc, argv));
}

static int run_main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CN_TOOL_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) return version();
    if (strcmp(argv[1], "help") == 0) return help(argc, argv);
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    const command *c = find_command(argv[1]);
    if (c && c->precision) return cn_tool_run_with_precision(c->run, argc - 1, argv + 1);
    if (c) return c->run(argc - 1, argv + 1);
    return unknown_command(argv[1]);
}
