/* `chutney quantize IN OUT`: a checkpoint of `chutney train` with its
 * Linear and Conv2d layers in int8 (cn_module_quantize_int8). OUT keeps
 * IN's metadata, adds quantized=int8, and drops the optimiser's state:
 * eval, predict and generate load it as int8 (cn_tool_load_checkpoint
 * quantises the model they build before copying the weights in). */
#include "dataset.h"
#include "model_text.h"
#include "tools.h"

#include <stdlib.h>
#include <string.h>

static void quantize_usage(FILE *f) {
    fprintf(f, "usage: chutney quantize IN.safetensors OUT.safetensors\n\n"
               "IN is a checkpoint of chutney train --save (mlp, cnn, --model-file, gpt).\n"
               "OUT holds the same model with int8 weights, one scale per output channel,\n"
               "for its Linear and Conv2d layers (Conv2d of one group, not dilated); their\n"
               "inputs are quantised to int8 as they run. chutney eval, predict and generate\n"
               "run OUT in int8 on the CPU; it cannot be trained further.\n");
}

/* The model of checkpoint path, with its weights (the optimiser's left out). */
static cn_module *load_model(const char *path, const char *model) {
    if (!strcmp(model, "gpt")) {
        cn_tokenizer *tok = NULL;
        cn_module *m = cn_tool_gpt_model(path, &tok);
        cn_tokenizer_free(tok);
        return m;
    }
    ds_info info;
    if (cn_tool_data_from_checkpoint(path, NULL, &info, NULL, 0) < 0) return NULL;
    cn_module *m = cn_tool_model_for_checkpoint(model, path, 0.5, info.ndim, info.shape,
                                                info.regress ? 1 : info.nclasses);
    cn_tool_data_info_free(&info);
    int epochs;
    if (m && cn_tool_load_checkpoint(path, model, m, NULL, &epochs) < 0) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}

/* m's state with c's metadata and quantized=int8, into path. */
static int save(const char *path, cn_module *m, cn_checkpoint *c) {
    cn_tensor **t = NULL;
    const char **names = NULL;
    int n = cn_module_state(m, &t, &names), nmeta = cn_checkpoint_metadata_count(c);
    const char **keys = malloc(sizeof *keys * (size_t)(nmeta + 1));
    const char **vals = malloc(sizeof *vals * (size_t)(nmeta + 1));
    int rc = -1;
    if (n >= 0 && keys && vals) {
        for (int i = 0; i < nmeta; i++) {
            keys[i] = cn_checkpoint_metadata_key(c, i);
            vals[i] = cn_checkpoint_metadata_value(c, i);
        }
        keys[nmeta] = "quantized";
        vals[nmeta] = "int8";
        rc = cn_save_safetensors(path, names, t, n, keys, vals, nmeta + 1);
    }
    free(t), free(names), free(keys), free(vals);
    return rc;
}

int cn_tool_quantize(int argc, char **argv) {
    const char *files[2];
    int nfiles = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            quantize_usage(stdout);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1])
            return cn_tool_unknown_option("quantize", argv[i], (const char *const[]){"--help"}, 1);
        if (nfiles == 2) {
            fprintf(stderr, "chutney quantize: unexpected argument '%s' (give IN and OUT)\n",
                    argv[i]);
            return CN_TOOL_USAGE;
        }
        files[nfiles++] = argv[i];
    }
    if (nfiles < 2) {
        fprintf(stderr, "chutney quantize: give the checkpoint to read and the one to write\n");
        quantize_usage(stderr);
        return CN_TOOL_USAGE;
    }
    cn_checkpoint *c = cn_load_safetensors(files[0]);
    if (!c) {
        fprintf(stderr, "chutney quantize: cannot load %s: %s\n", files[0], cn_last_error());
        return CN_TOOL_FAILED;
    }
    const char *fmt = cn_checkpoint_metadata(c, "format"), *model = cn_checkpoint_metadata(c, "model");
    const char *why = !fmt || strcmp(fmt, "chutney-train-1") || !model
                          ? "it is not a checkpoint written by chutney train"
                      : cn_checkpoint_metadata(c, "quantized") ? "its weights are int8 already"
                                                               : NULL;
    cn_module *m = why ? NULL : load_model(files[0], model);
    int n = m ? cn_module_quantize_int8(m) : -1;
    if (n == 0) why = "its model has no Linear or Conv2d layer to quantise";
    int rc = CN_TOOL_FAILED;
    if (why) fprintf(stderr, "chutney quantize: %s: %s\n", files[0], why);
    else if (n < 0) fprintf(stderr, "chutney quantize: %s: %s\n", files[0], cn_tool_error());
    else if (save(files[1], m, c) < 0)
        fprintf(stderr, "chutney quantize: cannot write %s: %s\n", files[1], cn_last_error());
    else {
        printf("%s: %d layers in int8 -> %s\n", files[0], n, files[1]);
        rc = 0;
    }
    cn_module_free(m);
    cn_checkpoint_free(c);
    return rc;
}
