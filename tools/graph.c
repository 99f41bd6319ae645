/* `chutney graph`: a model's static program as Graphviz DOT (or text), as
 * built or after the passes, so a person can see what the passes did. */
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void graph_usage(FILE *f) {
    fprintf(f,
            "usage: chutney graph --model {mlp,cnn,lstm} [--train] [--optimized | -O LEVEL]\n"
            "                     [--device DEV] [--text] [--output FILE] [--png FILE]\n"
            "       chutney graph MODEL.onnx [--optimized | -O LEVEL] [--text] [--output FILE]\n"
            "\n"
            "Writes the model's program as Graphviz DOT to stdout (or --output FILE):\n"
            "the forward pass for a batch of unknown size, or with --train the whole\n"
            "training step (loss, gradients; the optimiser update runs after it).\n"
            "As built by default (-O0); --optimized is -O2, after every pass.\n"
            "--text prints the steps as text instead; --png FILE renders the DOT\n"
            "with Graphviz's dot (apt-get install graphviz).\n"
            "--device DEV (opencl:0, ...) places the model there: each step then shows\n"
            "its device, and transfer steps (to) and CPU fallbacks stand out.\n"
            "Parameters are labelled with their names (1.weight, ...).\n");
}

/* dot -Tpng: through a temporary file, so a missing dot is reported. */
static int render_png(cn_program *p, const char *png) {
    char tmp[] = "/tmp/chutney-graph-XXXXXX";
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        fprintf(stderr, "chutney: cannot create a temporary file\n");
        return 1;
    }
    int rc = cn_program_write_dot(p, f);
    fclose(f);
    if (rc == 0) {
        if (system("command -v dot >/dev/null 2>&1") != 0) {
            fprintf(stderr, "chutney: Graphviz's dot is not installed (apt-get install graphviz)\n");
            rc = 1;
        } else {
            size_t n = strlen(tmp) + strlen(png) + 64;
            char *cmd = malloc(n);
            /* The file name is quoted for the shell; a quote in it is refused. */
            if (!cmd || strchr(png, '\'')) {
                fprintf(stderr, "chutney: bad --png file name\n");
                rc = 1;
            } else {
                snprintf(cmd, n, "dot -Tpng -o '%s' '%s'", png, tmp);
                if (system(cmd) != 0) {
                    fprintf(stderr, "chutney: dot failed to write %s\n", png);
                    rc = 1;
                }
            }
            free(cmd);
        }
    } else {
        fprintf(stderr, "chutney: %s\n", cn_last_error());
        rc = 1;
    }
    unlink(tmp);
    return rc;
}

static const char *const graph_options[] = {"--model", "--train",  "--optimized", "-O", "--device",
                                            "--text",  "--output", "--png",       "--help"};
#define NGRAPH_OPTIONS (int)(sizeof graph_options / sizeof graph_options[0])

typedef struct graph_args {
    const char *model, *out_path, *png, *device;
    bool train, text;
    int level;
} graph_args;

/* What an option that takes a value takes (NULL: a flag or not an option). */
static const char *graph_value(const char *k) {
    if (!strcmp(k, "--model")) return "mlp, cnn or lstm";
    if (!strcmp(k, "-O")) return "an optimisation level: 0, 1 or 2";
    if (!strcmp(k, "--device")) return "a device such as cpu, opencl:0 or cuda:0";
    if (!strcmp(k, "--output") || !strcmp(k, "--png")) return "a file name";
    return NULL;
}

static int graph_flag(graph_args *g, const char *k) {
    if (!strcmp(k, "--train")) g->train = true;
    else if (!strcmp(k, "--text")) g->text = true;
    else if (!strcmp(k, "--optimized")) g->level = 2;
    else return cn_tool_unknown_option("graph", k, graph_options, NGRAPH_OPTIONS);
    return 0;
}

static int graph_value_option(graph_args *g, const char *k, const char *v) {
    if (!strcmp(k, "--model")) {
        g->model = v;
        return cn_tool_choice("graph", k, "model", v, cn_tool_models, 3) < 0 ? CN_TOOL_USAGE : 0;
    }
    if (!strcmp(k, "-O")) {
        long long level;
        if (!cn_tool_int("graph", k, v, 0, 2, &level)) return CN_TOOL_USAGE;
        g->level = (int)level;
    } else if (!strcmp(k, "--device")) g->device = v;
    else if (!strcmp(k, "--output")) g->out_path = v;
    else g->png = v;
    return 0;
}

/* 0: go on; -1: --help was printed; else the exit status. */
static int graph_args_parse(int argc, char **argv, graph_args *g) {
    *g = (graph_args){0};
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *what = graph_value(k);
        int rc;
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            graph_usage(stdout);
            return -1;
        }
        if (!what) rc = graph_flag(g, k);
        else if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))
            rc = cn_tool_missing_value("graph", k, what);
        else rc = graph_value_option(g, k, argv[++i]);
        if (rc) return rc;
    }
    if (!g->model) {
        fprintf(stderr, "chutney graph: --model is required: mlp, cnn or lstm (or give a MODEL.onnx)\n");
        graph_usage(stderr);
        return CN_TOOL_USAGE;
    }
    return 0;
}

/* Where the drawing goes, checked before the model is built. */
static bool outputs_ok(const graph_args *g) {
    return (!g->out_path || cn_tool_writable("graph", "--output", g->out_path)) &&
           (!g->png || cn_tool_writable("graph", "--png", g->png));
}

/* The parameters named as the module names them ("1.weight"), so the DOT
 * shows which box is which weight. */
static void name_parameters(cn_module *m) {
    cn_tensor **params = NULL;
    const char **names = NULL;
    int np = cn_module_parameters(m, &params, &names);
    for (int i = 0; i < np; i++) cn_set_name(params[i], names[i]);
    free(params);
    free(names);
}

int cn_tool_graph(int argc, char **argv) {
    if (argc > 1 && argv[1][0] != '-') return cn_tool_onnx_graph(argc, argv); /* a model file */
    graph_args ga;
    int prc = graph_args_parse(argc, argv, &ga);
    if (prc) return prc < 0 ? 0 : prc;
    const char *model = ga.model, *out_path = ga.out_path, *png = ga.png;
    bool train = ga.train, text = ga.text;
    int level = ga.level;
    cn_device dev;
    int drc = cn_tool_device("chutney graph", ga.device, &dev);
    if (drc) return drc;
    if (!outputs_ok(&ga)) return CN_TOOL_FAILED;
    cn_module *m = cn_tool_make_model(model);
    if (!m) {
        fprintf(stderr, "chutney graph: %s\n", cn_tool_error());
        return CN_TOOL_FAILED;
    }
    name_parameters(m);
    /* Before the optimiser takes the parameters into its flat buffer. */
    if (cn_module_to(m, dev) < 0) {
        fprintf(stderr, "chutney graph: %s\n", cn_last_error());
        cn_module_free(m);
        return CN_TOOL_FAILED;
    }
    cn_tensor **params = NULL;
    int np = cn_module_parameters(m, &params, NULL);
    cn_optimizer *opt = train && np >= 0 ? cn_sgd(params, np, &(cn_sgd_opts){.lr = 0.01}) : NULL;
    free(params);
    cn_scope_begin(); /* the graph's values: the program keeps what it needs */
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "images", CN_F32, CN_SHAPE(-1, 1, 28, 28));
    cn_tensor *y = cn_module_forward(m, x);
    cn_compile_opts o = {.opt_level = level};
    cn_program *p = NULL;
    if (train) {
        cn_tensor *labels = cn_placeholder(g, "labels", CN_I64, CN_SHAPE(-1));
        cn_tensor *loss = cn_cross_entropy(y, labels, CN_REDUCTION_MEAN, 0);
        p = loss && opt ? cn_compile_train_step(g, &loss, 1, opt, &o) : NULL;
    } else {
        p = y ? cn_compile(g, &y, 1, &o) : NULL;
    }
    int rc = 0;
    if (!p) {
        fprintf(stderr, "chutney: %s\n", cn_last_error());
        rc = 1;
    } else if (png) {
        rc = render_png(p, png);
    } else {
        FILE *f = out_path ? fopen(out_path, "w") : stdout;
        if (!f) {
            fprintf(stderr, "chutney: cannot write %s\n", out_path);
            rc = 1;
        } else {
            rc = (text ? cn_program_dump(p, f) : cn_program_write_dot(p, f)) < 0;
            if (out_path && fclose(f) != 0) rc = 1;
            if (rc) fprintf(stderr, "chutney: %s\n", cn_last_error());
        }
    }
    cn_program_free(p);
    cn_graph_free(g);
    cn_scope_end();
    cn_optimizer_free(opt);
    cn_module_free(m);
    return rc;
}
