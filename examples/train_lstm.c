/* Train an LSTM on Fashion-MNIST, reading each image as a sequence.
 *
 *   build/examples/example_train_lstm [epochs] [images]
 *
 * images (default: all 60000) limits the training set, for a quick run.
 * Exits non-zero if the test accuracy stays below 20% (twice chance).
 * The same model as `chutney train --model lstm`: each image is 28 steps of
 * 28 pixels; a one-layer LSTM with 128 hidden units reads them, and a linear
 * layer maps its last hidden state to 10 classes; Adam lr 1e-3, batch 128.
 * It shows how to write a module of your own. */
#include <chutney.h>

#include <stdio.h>
#include <stdlib.h>

/* A module of our own: embed cn_module first, give it a vtable, register the
 * children (their parameters are then the module's, with dotted names). */
typedef struct classifier {
    cn_module base;
} classifier;

static cn_tensor *classifier_forward(cn_module *m, cn_tensor *x) {
    cn_tensor *seq = cn_reshape(x, CN_SHAPE(-1, 28, 28)); /* [N, T = 28, 28 features] */
    cn_tensor *out;
    if (cn_rnn_forward(cn_module_child(m, "lstm"), seq, NULL, NULL, &out, NULL, NULL) < 0)
        return NULL;
    cn_tensor *last = cn_squeeze(cn_narrow(out, 1, 27, 1), 1); /* [N, 128] */
    return cn_module_forward(cn_module_child(m, "fc"), last);
}

static const cn_module_vtable classifier_vt = {"Classifier", classifier_forward, NULL};

static cn_module *classifier_new(void) {
    cn_module *m = cn_module_new(&classifier_vt, sizeof(classifier));
    cn_module_add_child(m, "lstm", cn_nn_lstm(28, 128, &(cn_rnn_opts){.batch_first = true}));
    cn_module_add_child(m, "fc", cn_nn_linear(128, 10, true));
    return m;
}

int main(int argc, char **argv) {
    int epochs = argc > 1 ? atoi(argv[1]) : 2;
    int64_t limit = argc > 2 ? atoll(argv[2]) : 0;
    cn_manual_seed(1);
    cn_scope_begin(); /* owns the data sets; freed at the end */

    /* Data: images [N, 1, 28, 28] in [0, 1], labels [N] (i64). */
    cn_tensor *train_x, *train_y, *test_x, *test_y;
    if (cn_load_fashion_mnist(NULL, true, &train_x, &train_y) < 0 ||
        cn_load_fashion_mnist(NULL, false, &test_x, &test_y) < 0) {
        fprintf(stderr, "%s\n", cn_last_error());
        return 1;
    }
    if (limit > 0) {
        train_x = cn_narrow(train_x, 0, 0, limit);
        train_y = cn_narrow(train_y, 0, 0, limit);
    }

    /* The model: modules in sequence; parameters initialised as PyTorch does. */
    cn_module *model = classifier_new();

    /* The optimiser gathers the parameters into one flat buffer. */
    cn_tensor **params;
    int n = cn_module_parameters(model, &params, NULL);
    cn_optimizer *opt = cn_adam(params, n, &(cn_adam_opts){.lr = 1e-3});
    free(params);

    cn_tensor *data[2] = {train_x, train_y};
    cn_loader *loader =
        cn_loader_new(data, 2, &(cn_loader_opts){.batch_size = 128, .shuffle = true, .seed = 1});

    double acc = 0;
    for (int epoch = 0; epoch < epochs; epoch++) {
        cn_loader_set_epoch(loader, epoch);
        double total = 0;
        int64_t nb = cn_loader_num_batches(loader);
        for (int64_t b = 0; b < nb; b++) {
            cn_scope_begin(); /* everything made for this batch is freed at its end */
            cn_tensor *batch[2];
            cn_loader_next(loader, batch);
            cn_optimizer_zero_grad(opt);
            cn_tensor *loss =
                cn_cross_entropy(cn_module_forward(model, batch[0]), batch[1], CN_REDUCTION_MEAN, 0);
            cn_backward(loss, NULL);
            cn_optimizer_step(opt);
            total += cn_item(loss);
            cn_scope_end();
        }

        /* Test accuracy, without recording, in evaluation mode. */
        cn_scope_begin();
        cn_module_train(model, false);
        cn_no_grad_begin();
        double correct = 0;
        for (int64_t s = 0; s < 10000; s += 1000) { /* 1000 images at a time */
            cn_tensor *pred = cn_argmax(cn_module_forward(model, cn_narrow(test_x, 0, s, 1000)), 1, false);
            correct += cn_item(cn_sum(cn_eq(pred, cn_narrow(test_y, 0, s, 1000)), NULL, 0, false));
        }
        acc = correct / 10000;
        cn_no_grad_end();
        cn_module_train(model, true);
        printf("epoch %d: mean loss %.4f, test accuracy %.2f%%\n", epoch + 1, total / (double)nb,
               100 * acc);
        cn_scope_end();
    }
    cn_loader_free(loader);
    cn_optimizer_free(opt);
    cn_module_free(model);
    cn_scope_end();
    /* Ten classes: a model that learned nothing scores about 10%. */
    if (epochs > 0 && acc < 0.2) {
        fprintf(stderr, "test accuracy %.1f%%: the model did not learn\n", 100 * acc);
        return 1;
    }
    return 0;
}
