/* `chutney train --model-file M.onnx`: your own model, exported from
 * PyTorch, trained like the built-in ones (cn_onnx_load_trainable makes it
 * a module). Its checkpoints name the file and hold a hash of its bytes, so
 * a resume or an export against another file is refused; `chutney export
 * --load CKPT` writes the file back with the trained values. */
#define _DEFAULT_SOURCE /* realpath */
#include "train.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool cn_tool_is_onnx_file(const char *path) {
    size_t n = path ? strlen(path) : 0;
    return n >= 5 && !strcasecmp(path + n - 5, ".onnx");
}

/* FNV-1a over the file's bytes, as 16 hex digits; -1 after cn_tool_fail. */
static int file_hash(const char *path, char out[17]) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        cn_tool_fail("cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    uint64_t h = 0xcbf29ce484222325ull;
    unsigned char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t i = 0; i < n; i++) h = (h ^ buf[i]) * 0x100000001b3ull;
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        cn_tool_fail("cannot read %s", path);
        return -1;
    }
    snprintf(out, 17, "%016" PRIx64, h);
    return 0;
}

cn_module *cn_tool_onnx_model(const char *path, int ndim, const int64_t *in, int64_t nout,
                              bool regress) {
    cn_module *m = cn_onnx_load_trainable(path);
    if (!m) return NULL;
    /* The data's batches through the model once, on a placeholder: the
     * input and output shapes are checked before any data is trained on. */
    cn_graph *g = cn_graph_new();
    cn_scope_begin();
    int64_t xs[CN_MAX_DIMS] = {-1};
    for (int i = 0; i < ndim; i++) xs[i + 1] = in[i];
    cn_tensor *x = g ? cn_placeholder(g, "x", CN_F32, ndim + 1, xs) : NULL;
    cn_tensor *y = x ? cn_module_forward(m, x) : NULL;
    char b2[128];
    bool ok = y != NULL;
    if (!y) {
        char msg[1024], b1[128] = "";
        snprintf(msg, sizeof msg, "%s", cn_last_error());
        for (int i = 0, k = 0; i < ndim && k < (int)sizeof b1; i++)
            k += snprintf(b1 + k, sizeof b1 - (size_t)k, "%s%lld", i ? "x" : "", (long long)in[i]);
        cn_tool_fail("%s does not take the data's samples (%s): %s", path, b1, msg);
    } else if (cn_ndim(y) != 2 || (cn_shape(y)[1] >= 0 && cn_shape(y)[1] != nout)) {
        ok = false;
        cn_tool_fail("%s's output is %s; the data needs [N, %lld] (%s)", path,
                     cn_shape_str(y, b2, sizeof b2), (long long)nout,
                     regress ? "one value per sample, for --task regress"
                             : "one logit per class, for cross-entropy");
    }
    cn_scope_end();
    cn_graph_free(g);
    if (!ok) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}

int cn_tool_onnx_meta(const char *path, ds_meta *m) {
    char hash[17];
    if (file_hash(path, hash) < 0) return -1;
    char *real = realpath(path, NULL);
    if (m->n + 2 > (int)(sizeof m->keys / sizeof *m->keys) || !real) {
        free(real);
        cn_tool_fail("%s: cannot record the model file in the checkpoint", path);
        return -1;
    }
    m->keys[m->n] = "model_file";
    m->vals[m->n] = m->owned[m->n] = real;
    m->n++;
    m->keys[m->n] = "model_hash";
    m->vals[m->n] = m->owned[m->n] = strdup(hash);
    m->n++;
    return m->vals[m->n - 1] ? 0 : -1;
}

int cn_tool_onnx_check(const char *ckpt, const char *path) {
    cn_checkpoint *c = cn_load_safetensors(ckpt);
    if (!c) return -1;
    const char *model = cn_checkpoint_metadata(c, "model");
    const char *want = cn_checkpoint_metadata(c, "model_hash");
    const char *file = cn_checkpoint_metadata(c, "model_file");
    char hash[17];
    int rc = -1;
    if (!model || strcmp(model, "onnx") || !want)
        cn_tool_fail("%s was not trained from an ONNX model file (its model is '%s')", ckpt,
                     model ? model : "?");
    else if (file_hash(path, hash) < 0)
        ; /* said */
    else if (strcmp(hash, want))
        cn_tool_fail("%s was trained from %s, whose contents differ from %s (hash %s, this file's "
                     "%s): give the model file it was trained from",
                     ckpt, file ? file : "another file", path, want, hash);
    else
        rc = 0;
    cn_checkpoint_free(c);
    return rc;
}

/* A copy of the checkpoint's metadata key (malloc'd), or NULL: absent, or
 * the file not a checkpoint (the library's error then says why). */
static char *checkpoint_meta(const char *ckpt, const char *key) {
    cn_checkpoint *c = cn_load_safetensors(ckpt);
    const char *v = c ? cn_checkpoint_metadata(c, key) : NULL;
    char *r = v ? strdup(v) : NULL;
    cn_checkpoint_free(c);
    return r;
}

bool cn_tool_checkpoint_is(const char *ckpt, const char *model) {
    char *m = checkpoint_meta(ckpt, "model");
    bool r = m && !strcmp(m, model);
    free(m);
    cn_clear_error();
    return r;
}

cn_module *cn_tool_onnx_model_of(const char *ckpt, int ndim, const int64_t *in, int64_t nout,
                                 bool regress) {
    char *file = checkpoint_meta(ckpt, "model_file");
    if (!file && !cn_last_error()[0])
        cn_tool_fail("%s does not name the ONNX model file it was trained from", ckpt);
    cn_module *m = file && cn_tool_onnx_check(ckpt, file) == 0
                       ? cn_tool_onnx_model(file, ndim, in, nout, regress)
                       : NULL;
    free(file);
    return m;
}

int cn_tool_export_onnx(const char *ckpt, const char *model_file, const char *out) {
    char *file = model_file ? strdup(model_file) : checkpoint_meta(ckpt, "model_file");
    if (!file && !model_file && !cn_last_error()[0])
        cn_tool_fail("%s does not name the ONNX model file it was trained from", ckpt);
    cn_module *m = NULL;
    int epochs = 0, rc = -1;
    if (file && cn_tool_onnx_check(ckpt, file) == 0 && (m = cn_onnx_load_trainable(file)) &&
        cn_tool_load_checkpoint(ckpt, "onnx", m, NULL, &epochs) == 0) {
        cn_module_train(m, false);
        rc = cn_onnx_save_trained(m, out);
    }
    if (rc < 0)
        fprintf(stderr, "chutney export: cannot export %s: %s\n", ckpt, cn_tool_error());
    else
        printf("wrote %s: %s with the weights of %s (%d epoch%s), %lld parameters\n", out, file,
               ckpt, epochs, epochs == 1 ? "" : "s", (long long)cn_module_num_params(m));
    cn_module_free(m);
    free(file);
    return rc < 0 ? CN_TOOL_FAILED : 0;
}
