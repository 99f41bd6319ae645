/* Train a multilayer perceptron on Fashion-MNIST, in about sixty lines.
 *
 *   build/examples/example_train_mlp [epochs] [images]
 *
 * images (default: all 60000) limits the training set, for a quick run.
 * Exits non-zero if the test accuracy stays below 20% (twice chance).
 * The same model as `chutney train --model mlp`: 784-512-256-10 with ReLU,
 * cross-entropy, SGD with momentum 0.9, lr 0.05, batch 128. */
#include <chutney.h>

#include <stdio.h>
#include <stdlib.h>

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
    cn_module *layers[] = {cn_nn_flatten(1, -1), cn_nn_linear(784, 512, true), cn_nn_relu(),
                           cn_nn_linear(512, 256, true), cn_nn_relu(),
                           cn_nn_linear(256, 10, true)};
    cn_module *model = cn_nn_sequential(layers, 6);

    /* The optimiser gathers the parameters into one flat buffer. */
    cn_tensor **params;
    int n = cn_module_parameters(model, &params, NULL);
    cn_optimizer *opt = cn_sgd(params, n, &(cn_sgd_opts){.lr = 0.05, .momentum = 0.9});
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
        cn_tensor *pred = cn_argmax(cn_module_forward(model, test_x), 1, false);
        acc = cn_item(cn_mean(cn_cast(cn_eq(pred, test_y), CN_F32), NULL, 0, false));
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
