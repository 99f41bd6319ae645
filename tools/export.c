/* `chutney export`: a benchmark model (with a checkpoint's weights) traced
 * into a static graph and written as ONNX. */
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void export_usage(FILE *f) {
    fprintf(f,
            "usage: chutney export --model {mlp,cnn,lstm} [--load CKPT] --output MODEL.onnx\n"
            "                      [--batch N]\n"
            "\n"
            "Writes the model's forward pass as ONNX (opset 17): input 'images'\n"
            "[N, 1, 28, 28] f32, output 'logits' [N, 10]. --load takes the weights of\n"
            "a checkpoint written by `chutney train --save` (without it the weights\n"
            "are the model's random initialisation). The batch size N is symbolic\n"
            "unless --batch fixes it.\n");
}

int cn_tool_export(int argc, char **argv) {
    const char *model = NULL, *load = NULL, *out = NULL;
    int64_t batch = -1;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--model") && v) model = argv[++i];
        else if (!strcmp(k, "--load") && v) load = argv[++i];
        else if (!strcmp(k, "--output") && v) out = argv[++i];
        else if (!strcmp(k, "--batch") && v) {
            char *end;
            batch = strtoll(argv[++i], &end, 10);
            if (*end || batch < 1) {
                fprintf(stderr, "chutney: bad value '%s' for --batch\n", v);
                return 2;
            }
        } else if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            export_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "chutney: unknown option or missing value: '%s'\n", k);
            export_usage(stderr);
            return 2;
        }
    }
    if (!model || !out) {
        fprintf(stderr, "chutney: export needs --model and --output\n");
        export_usage(stderr);
        return 2;
    }
    if (!cn_tool_known_model(model)) {
        fprintf(stderr, "chutney: unknown model '%s' (choose mlp, cnn or lstm)\n", model);
        return 2;
    }
    cn_module *m = cn_tool_make_model(model);
    int epochs = 0, rc = 1;
    if (!m || (load && cn_tool_load_checkpoint(load, model, m, NULL, &epochs) < 0)) {
        fprintf(stderr, "chutney: cannot load %s: %s\n", load ? load : model, cn_tool_error());
        cn_module_free(m);
        return 1;
    }
    cn_module_train(m, false);
    cn_tensor **state = NULL;
    const char **names = NULL;
    int nstate = cn_module_state(m, &state, &names);
    cn_graph *g = cn_graph_new();
    cn_scope_begin();
    cn_tensor *x = cn_placeholder(g, "images", CN_F32, CN_SHAPE(batch, 1, 28, 28));
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
    return rc;
}
