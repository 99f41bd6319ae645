/* The chutney command-line program: a table of commands. */
#include "tools.h"

#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"train", cn_tool_train, "train a model on Fashion-MNIST (train --help for options)"},
    {"eval", cn_tool_eval, "test accuracy of a checkpoint written by train --save"},
    {"graph", cn_tool_graph, "write a model's graph as Graphviz DOT (graph --help)"},
    {"ops", cn_tool_ops, "list the op table (--markdown: the text of docs/ops.md)"},
    {"run", cn_tool_run, "run an ONNX model on .npy inputs (run --help for options)"},
    {"info", cn_tool_info, "an ONNX model's inputs, outputs, parameter count and ops"},
    {"export", cn_tool_export, "write a model (and a checkpoint's weights) as ONNX (export --help)"},
    {"devices", cn_tool_devices, "list the devices to run on (cpu:0, opencl:0, ...) with their memory"},
};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: chutney <command> [options]\n\ncommands:\n");
    for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "  %-12s %s\n", "--version", "print the version and the build configuration");
    fprintf(f, "  %-12s %s\n", "--help", "print this help");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("%s\n", cn_build_info());
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "chutney: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
