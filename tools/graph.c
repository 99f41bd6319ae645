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
            "its device, and transfer steps (to) and CPU fallbacks stand out.\n");
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

int cn_tool_graph(int argc, char **argv) {
    if (argc > 1 && argv[1][0] != '-') return cn_tool_onnx_graph(argc, argv); /* a model file */
    const char *model = NULL, *out_path = NULL, *png = NULL, *device = NULL;
    bool train = false, text = false;
    int level = 0;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--model") && v) model = argv[++i];
        else if (!strcmp(k, "--output") && v) out_path = argv[++i];
        else if (!strcmp(k, "--png") && v) png = argv[++i];
        else if (!strcmp(k, "--device") && v) device = argv[++i];
        else if (!strcmp(k, "--train")) train = true;
        else if (!strcmp(k, "--text")) text = true;
        else if (!strcmp(k, "--optimized")) level = 2;
        else if (!strcmp(k, "-O") && v) {
            char *end;
            level = (int)strtol(argv[++i], &end, 10);
            if (*end || level < 0 || level > 2) {
                fprintf(stderr, "chutney: -O takes 0, 1 or 2\n");
                return 2;
            }
        } else if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            graph_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "chutney: unknown option or missing value: '%s'\n", k);
            graph_usage(stderr);
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "chutney: --model is required\n");
        graph_usage(stderr);
        return 2;
    }
    cn_device dev = CN_CPU;
    if (device && cn_device_parse(device, &dev) < 0) {
        fprintf(stderr, "chutney: %s\n", cn_last_error());
        return 2;
    }
    cn_module *m = cn_tool_make_model(model);
    if (!m) {
        fprintf(stderr, "chutney: %s\n", cn_tool_error());
        return 2;
    }
    /* Before the optimiser takes the parameters into its flat buffer. */
    if (cn_module_to(m, dev) < 0) {
        fprintf(stderr, "chutney: %s\n", cn_last_error());
        cn_module_free(m);
        return 2;
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
