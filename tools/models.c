/* The benchmark models of docs/benchmarks.md (../shared/docs/benchmarks.md),
 * shared by `chutney train`, `chutney graph` and bench/bench_static. */
#include "tools.h"

#include <string.h>

typedef struct lstm_classifier {
    cn_module base;
    int64_t c, h, w; /* the images' C x H x W */
} lstm_classifier;

/* Each image is H steps of C x W features (a row of every channel); the
 * last hidden state -> the classes. Fashion-MNIST: 28 steps of 28. */
static cn_tensor *lstm_classifier_forward(cn_module *m, cn_tensor *x) {
    const lstm_classifier *l = (const lstm_classifier *)m;
    int64_t shape[3] = {-1, l->h, l->c * l->w};
    if (l->c > 1) x = cn_permute(x, (const int[]){0, 2, 1, 3}, 4);
    cn_tensor *seq = cn_reshape(x, 3, shape), *out = NULL;
    if (cn_rnn_forward(cn_module_child(m, "lstm"), seq, NULL, NULL, &out, NULL, NULL) < 0)
        return NULL;
    cn_tensor *last = cn_squeeze(cn_narrow(out, 1, l->h - 1, 1), 1);
    return cn_module_forward(cn_module_child(m, "fc"), last);
}

static const cn_module_vtable lstm_classifier_vt = {"LSTMClassifier", lstm_classifier_forward,
                                                    NULL};

const char *const cn_tool_models[3] = {"mlp", "cnn", "lstm"};

/* Fashion-MNIST's labels 0..9 (github.com/zalandoresearch/fashion-mnist). */
const char *const cn_tool_fashion_classes[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress",
                                                 "Coat",        "Sandal",  "Shirt",    "Sneaker",
                                                 "Bag",         "Ankle boot"};

bool cn_tool_known_model(const char *name) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, cn_tool_models[i])) return true;
    return false;
}

cn_module *cn_tool_make_model(const char *name) {
    return cn_tool_make_model_for(name, 3, (const int64_t[]){1, 28, 28}, 10);
}

cn_module *cn_tool_make_model_for(const char *name, int ndim, const int64_t *in, int64_t nout) {
    bool image = ndim == 3;
    int64_t numel = image ? in[0] * in[1] * in[2] : in[0];
    if (!strcmp(name, "mlp")) {
        cn_module *layers[] = {cn_nn_flatten(1, -1),      cn_nn_linear(numel, 512, true),
                               cn_nn_relu(),              cn_nn_linear(512, 256, true),
                               cn_nn_relu(),              cn_nn_linear(256, nout, true)};
        return cn_nn_sequential(layers, 6);
    }
    if (!image && (!strcmp(name, "cnn") || !strcmp(name, "lstm"))) {
        cn_tool_fail("--model %s reads images (C x H x W), and this data is a table of %lld "
                     "features; use --model mlp", name, (long long)in[0]);
        return NULL;
    }
    if (!strcmp(name, "cnn")) {
        /* Two 2x2 poolings (floor): 28x28 -> 7x7 x 64 = 3136, as before. */
        if (in[1] < 4 || in[2] < 4) {
            cn_tool_fail("--model cnn needs images of 4x4 pixels or more (it pools twice); these "
                         "are %lldx%lld", (long long)in[1], (long long)in[2]);
            return NULL;
        }
        int64_t flat = 64 * (in[1] / 2 / 2) * (in[2] / 2 / 2);
        cn_conv_opts c = {.padding = {1, 1}};
        cn_pool_opts pool = {.kernel = {2, 2}};
        cn_module *layers[] = {cn_nn_conv2d(in[0], 32, 3, 3, &c, true),  cn_nn_relu(),
                               cn_nn_max_pool2d(&pool),              cn_nn_conv2d(32, 64, 3, 3, &c, true),
                               cn_nn_relu(),                         cn_nn_max_pool2d(&pool),
                               cn_nn_flatten(1, -1),                 cn_nn_linear(flat, 128, true),
                               cn_nn_relu(),                         cn_nn_linear(128, nout, true)};
        return cn_nn_sequential(layers, 10);
    }
    if (!strcmp(name, "lstm")) {
        cn_module *m = cn_module_new(&lstm_classifier_vt, sizeof(lstm_classifier));
        if (!m) return NULL;
        lstm_classifier *l = (lstm_classifier *)m;
        l->c = in[0];
        l->h = in[1];
        l->w = in[2];
        cn_rnn_opts o = {.batch_first = true};
        if (cn_module_add_child(m, "lstm", cn_nn_lstm(in[0] * in[2], 128, &o)) < 0 ||
            cn_module_add_child(m, "fc", cn_nn_linear(128, nout, true)) < 0) {
            cn_module_free(m);
            return NULL;
        }
        return m;
    }
    cn_tool_fail("unknown model '%s' (choose mlp, cnn or lstm)", name);
    return NULL;
}
