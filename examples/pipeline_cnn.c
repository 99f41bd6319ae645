/* The cnn of train_cnn.c split over two processes (model parallelism):
 * rank 0 holds the convolutions, rank 1 the classifier; the activations go
 * forward with cn_send / cn_recv and their gradients come back through the
 * same ops' gradient rules, so each rank trains its half with the ordinary
 * cn_backward and its own optimiser.
 *
 *   mpirun -np 2 build/examples/example_pipeline_cnn [STEPS] [LIMIT]
 *   build/examples/example_pipeline_cnn [STEPS] [LIMIT]    (one process, whole model)
 *
 * Both print the loss of every step from the process that has it; the two
 * runs print the same numbers (the same ops on the same values: the
 * messages carry exact bytes), which tests/CMakeLists.txt checks. */
#include <chutney.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (cn_dist_init(&argc, &argv) < 0) {
        fprintf(stderr, "%s\n", cn_last_error());
        return 1;
    }
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    int64_t limit = argc > 2 ? atoll(argv[2]) : 2048;
    int size = cn_dist_size(), rank = cn_dist_rank();
    if (size > 2) {
        if (rank == 0) fprintf(stderr, "pipeline_cnn: run it as 1 or 2 processes\n");
        cn_dist_finalize();
        return 2;
    }
    cn_manual_seed(1);
    cn_scope_begin();
    cn_tensor *x, *y;
    if (cn_load_fashion_mnist(NULL, true, &x, &y) < 0) {
        fprintf(stderr, "%s\n", cn_last_error());
        cn_dist_abort(1);
    }
    x = cn_narrow(x, 0, 0, limit);
    y = cn_narrow(y, 0, 0, limit);

    /* Both halves are made on every rank from one seed, so each rank's
     * half starts as in one process; a rank trains only its own. */
    cn_conv_opts pad1 = {.padding = {1, 1}};
    cn_pool_opts pool2 = {.kernel = {2, 2}};
    cn_module *l0[] = {cn_nn_conv2d(1, 32, 3, 3, &pad1, true), cn_nn_relu(),
                       cn_nn_max_pool2d(&pool2),               cn_nn_conv2d(32, 64, 3, 3, &pad1, true),
                       cn_nn_relu(),                           cn_nn_max_pool2d(&pool2)};
    cn_module *l1[] = {cn_nn_flatten(1, -1), cn_nn_linear(3136, 128, true), cn_nn_relu(),
                       cn_nn_linear(128, 10, true)};
    cn_module *stage[2] = {cn_nn_sequential(l0, 6), cn_nn_sequential(l1, 4)};
    cn_optimizer *opt[2];
    for (int s = 0; s < 2; s++) {
        cn_tensor **params;
        int n = cn_module_parameters(stage[s], &params, NULL);
        opt[s] = cn_adam(params, n, &(cn_adam_opts){.lr = 1e-3});
        free(params);
    }
    bool mine[2] = {size == 1 || rank == 0, size == 1 || rank == 1};
    cn_tensor *data[2] = {x, y};
    cn_loader *loader =
        cn_loader_new(data, 2, &(cn_loader_opts){.batch_size = 64, .shuffle = true, .seed = 1});
    int rc = 0;
    for (int step = 0, epoch = 0; step < steps && rc == 0; epoch++) {
        cn_loader_set_epoch(loader, epoch);
        cn_tensor *b[2];
        while (step < steps && rc == 0 && cn_loader_next(loader, b) == 1) {
            cn_scope_begin();
            for (int s = 0; s < 2; s++)
                if (mine[s]) cn_optimizer_zero_grad(opt[s]);
            cn_tensor *h = NULL, *loss = NULL;
            if (mine[0]) h = cn_module_forward(stage[0], b[0]);
            if (size == 2 && rank == 0) {
                /* The activations to rank 1; their gradient comes back here. */
                cn_tensor *tok = cn_send(h, 1, step % 1000);
                rc = tok && cn_backward(tok, NULL) == 0 ? 0 : 1;
            } else {
                if (size == 2) /* rank 1: the activations from rank 0 */
                    h = cn_recv(NULL, CN_F32, 4, (int64_t[]){cn_dim(b[0], 0), 64, 7, 7}, 0,
                                step % 1000);
                loss = cn_cross_entropy(cn_module_forward(stage[1], h), b[1], CN_REDUCTION_MEAN, 0);
                rc = loss && cn_backward(loss, NULL) == 0 ? 0 : 1;
                if (rc == 0) printf("step %d loss %.9g\n", step, cn_item(loss));
            }
            for (int s = 0; s < 2 && rc == 0; s++)
                if (mine[s] && cn_optimizer_step(opt[s]) < 0) rc = 1;
            if (rc) fprintf(stderr, "rank %d: %s\n", rank, cn_last_error());
            cn_scope_end();
            step++;
        }
    }
    cn_loader_free(loader);
    for (int s = 0; s < 2; s++) {
        cn_optimizer_free(opt[s]);
        cn_module_free(stage[s]);
    }
    cn_scope_end();
    if (rc) cn_dist_abort(rc);
    cn_dist_finalize();
    return 0;
}
