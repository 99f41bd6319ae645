/* The benchmark models of docs/benchmarks.md (../shared/docs/benchmarks.md),
 * shared by `chutney train`, `chutney graph` and bench/bench_static. */
#include "tools.h"

#include <string.h>

typedef struct lstm_classifier {
    cn_module base;
} lstm_classifier;

/* Each image is 28 steps of 28 features; the last hidden state -> 10. */
static cn_tensor *lstm_classifier_forward(cn_module *m, cn_tensor *x) {
    int64_t shape[3] = {-1, 28, 28};
    cn_tensor *seq = cn_reshape(x, 3, shape), *out = NULL;
    if (cn_rnn_forward(cn_module_child(m, "lstm"), seq, NULL, NULL, &out, NULL, NULL) < 0)
        return NULL;
    cn_tensor *last = cn_squeeze(cn_narrow(out, 1, 27, 1), 1);
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
    if (!strcmp(name, "mlp")) {
        cn_module *layers[] = {cn_nn_flatten(1, -1),      cn_nn_linear(784, 512, true),
                               cn_nn_relu(),              cn_nn_linear(512, 256, true),
                               cn_nn_relu(),              cn_nn_linear(256, 10, true)};
        return cn_nn_sequential(layers, 6);
    }
    if (!strcmp(name, "cnn")) {
        cn_conv_opts c = {.padding = {1, 1}};
        cn_pool_opts pool = {.kernel = {2, 2}};
        cn_module *layers[] = {cn_nn_conv2d(1, 32, 3, 3, &c, true),  cn_nn_relu(),
                               cn_nn_max_pool2d(&pool),              cn_nn_conv2d(32, 64, 3, 3, &c, true),
                               cn_nn_relu(),                         cn_nn_max_pool2d(&pool),
                               cn_nn_flatten(1, -1),                 cn_nn_linear(3136, 128, true),
                               cn_nn_relu(),                         cn_nn_linear(128, 10, true)};
        return cn_nn_sequential(layers, 10);
    }
    if (!strcmp(name, "lstm")) {
        cn_module *m = cn_module_new(&lstm_classifier_vt, sizeof(lstm_classifier));
        if (!m) return NULL;
        cn_rnn_opts o = {.batch_first = true};
        if (cn_module_add_child(m, "lstm", cn_nn_lstm(28, 128, &o)) < 0 ||
            cn_module_add_child(m, "fc", cn_nn_linear(128, 10, true)) < 0) {
            cn_module_free(m);
            return NULL;
        }
        return m;
    }
    cn_tool_fail("unknown model '%s' (choose mlp, cnn or lstm)", name);
    return NULL;
}
