/* `chutney export`: a benchmark model (with a checkpoint's weights) traced
 * into a static graph and written as ONNX. */
#include "tools.h"
#include "dataset.h"
#include "model_text.h"
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void export_usage(FILE *f) {
    fprintf(f,
            "usage: chutney export --model {mlp,cnn,lstm} [--load CKPT] --output MODEL.onnx\n"
            "                      [--batch N]\n"
            "       chutney export --load CKPT --output MODEL.onnx [--batch N]\n"
            "       chutney export --load CKPT [--model-file M.onnx] --output MODEL.onnx\n"
            "\n"
            "Writes the model's forward pass as ONNX (opset 17): input 'images'\n"
            "[N, 1, 28, 28] f32, output 'logits' [N, 10]. --load takes the weights of\n"
            "a checkpoint written by `chutney train --save` (without it the weights\n"
            "are the model's random initialisation); without --model, the model is the\n"
            "checkpoint's (a --model-file model's text is in it). The batch size N is symbolic\n"
            "unless --batch fixes it. `chutney info MODEL.onnx` then counts the same\n"
            "parameters.\n"
            "A checkpoint of `chutney train --model-file M.onnx` is written as that file\n"
            "with the trained weights (M.onnx as the checkpoint names it, or\n"
            "--model-file where it moved; its contents must be the same).\n"
            "Exit status: 0 done, 1 a failure (files), 2 a bad command line.\n");
}

static const char *const export_options[] = {"--model", "--load", "--output", "--batch",
                                             "--model-file", "--help"};

typedef struct export_args {
    const char *model, *load, *out, *model_file;
    int64_t batch; /* -1: symbolic */
} export_args;

/* Option k with its value v into e: 0, or the exit status after a message. */
static int export_option(export_args *e, const char *k, const char *v) {
    if (!strcmp(k, "--model")) {
        e->model = v;
        return cn_tool_choice("export", k, "model", v, cn_tool_models, 3) < 0 ? CN_TOOL_USAGE : 0;
    }
    if (!strcmp(k, "--batch")) {
        long long n;
        if (!cn_tool_int("export", k, v, 1, INT32_MAX, &n)) return CN_TOOL_USAGE;
        e->batch = n;
    } else if (!strcmp(k, "--load")) e->load = v;
    else if (!strcmp(k, "--model-file")) e->model_file = v;
    else e->out = v;
    return 0;
}

/* 0: go on; -1: --help was printed; else the exit status. Files are
 * checked here, before the model is built and traced. */
static int export_args_parse(int argc, char **argv, export_args *e) {
    *e = (export_args){.batch = -1};
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            export_usage(stdout);
            return -1;
        }
        bool known = false;
        for (int o = 0; o < 5; o++) known |= !strcmp(k, export_options[o]);
        if (!known) return cn_tool_unknown_option("export", k, export_options, 6);
        if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))
            return cn_tool_missing_value("export", k, !strcmp(k, "--model") ? "mlp, cnn or lstm"
                                                      : !strcmp(k, "--batch") ? "a batch size (1 or more)"
                                                                               : "a file name");
        int rc = export_option(e, k, argv[++i]);
        if (rc) return rc;
    }
    /* A checkpoint of an ONNX model is exported as that model (tools/train_onnx.c). */
    bool onnx = e->load && !e->model && cn_tool_checkpoint_is(e->load, "onnx");
    if (e->model_file && !onnx) {
        fprintf(stderr, "chutney export: --model-file is for --load CKPT of a model trained "
                        "with train --model-file M.onnx\n");
        return CN_TOOL_USAGE;
    }
    if (e->model_file && !cn_tool_readable("export", "--model-file", e->model_file))
        return CN_TOOL_FAILED;
    if (onnx && e->batch >= 0) {
        fprintf(stderr, "chutney export: --batch is for --model; a model trained with "
                        "--model-file M.onnx keeps its file's input shape\n");
        return CN_TOOL_USAGE;
    }
    if (onnx) e->model = "onnx";
    if ((!e->model && !e->load) || !e->out) {
        fprintf(stderr, "chutney export: export needs --model and --output (or --load CKPT "
                        "and --output: the checkpoint's model)\n");
        export_usage(stderr);
        return CN_TOOL_USAGE;
    }
    if ((e->load && !cn_tool_readable("export", "--load", e->load)) ||
        !cn_tool_writable("export", "--output", e->out))
        return CN_TOOL_FAILED;
    return 0;
}

int cn_tool_export(int argc, char **argv) {
    export_args e;
    int prc = export_args_parse(argc, argv, &e);
    if (prc) return prc < 0 ? 0 : prc;
    if (e.model && !strcmp(e.model, "onnx")) return cn_tool_export_onnx(e.load, e.model_file, e.out);
    const char *model = e.model, *load = e.load, *out = e.out;
    int64_t batch = e.batch;
    char model_buf[16];
    if (!model && !cn_tool_checkpoint_model(load, model_buf, sizeof model_buf)) {
        fprintf(stderr, "chutney export: %s\n", cn_tool_error());
        return 1;
    }
    if (!model) model = model_buf;
    /* A checkpoint of other data (train --data) says its input shape and outputs. */
    ds_info info;
    if (load && cn_tool_data_from_checkpoint(load, NULL, &info, NULL, 0) < 0) {
        fprintf(stderr, "chutney: cannot load %s: %s\n", load, cn_tool_error());
        return 1;
    }
    if (!load) cn_tool_data_from_checkpoint_defaults(&info);
    int64_t nout = info.regress ? 1 : info.nclasses;
    cn_module *m = load ? cn_tool_model_for_checkpoint(model, load, 0.5, info.ndim, info.shape, nout)
                        : cn_tool_make_model_for(model, info.ndim, info.shape, nout);
    int epochs = 0, rc = 1;
    if (!m || (load && cn_tool_load_checkpoint(load, model, m, NULL, &epochs) < 0)) {
        fprintf(stderr, "chutney: cannot load %s: %s\n", load ? load : model, cn_tool_error());
        cn_module_free(m);
        cn_tool_data_info_free(&info);
        return 1;
    }
    cn_module_train(m, false);
    cn_tensor **state = NULL;
    const char **names = NULL;
    int nstate = cn_module_state(m, &state, &names);
    cn_graph *g = cn_graph_new();
    cn_scope_begin();
    cn_tensor *x = info.ndim == 3 ? cn_placeholder(g, "images", CN_F32,
                                                   CN_SHAPE(batch, info.shape[0], info.shape[1],
                                                            info.shape[2]))
                                  : cn_placeholder(g, "images", CN_F32, CN_SHAPE(batch, info.shape[0]));
    cn_tensor *y = x ? cn_module_forward(m, x) : NULL;
    const char *out_names[1] = {"logits"};
    cn_onnx_export_opts o = {.output_names = out_names,
                             .params = state,
                             .param_names = names,
                             .nparams = nstate > 0 ? nstate : 0,
                             .graph_name = model};
    if (nstate < 0 || !y || cn_onnx_export(g, &y, 1, out, &o) < 0) {
        fprintf(stderr, "chutney: %s\n", cn_last_error());
    } else {
        int64_t nparams = 0;
        for (int i = 0; i < nstate; i++) nparams += cn_numel(state[i]);
        printf("wrote %s: %s, %lld parameters%s\n", out, model, (long long)nparams,
               load ? "" : " (untrained: no --load)");
        rc = 0;
    }
    cn_scope_end();
    free(state);
    free(names);
    cn_graph_free(g);
    cn_module_free(m);
    cn_tool_data_info_free(&info);
    return rc;
}
