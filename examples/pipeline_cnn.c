/* The cnn of train_cnn.c split over two processes (model parallelism):
 * rank 0 holds the convolutions, rank 1 the classifier. Two ways:
 *
 * - eager (the default): the activations go forward with cn_send / cn_recv
 *   and their gradients come back through the same ops' gradient rules, so
 *   each rank trains its half with the ordinary cn_backward and its own
 *   optimiser;
 * - --static: the model is built once as a static graph, the convolutions
 *   under cn_device_scope_begin("rank:0/cpu:0") and the rest under
 *   "rank:1/cpu:0", and trained with cn_compile_train_step. No message is
 *   written by hand: compiling cuts the graph into each rank's program and
 *   inserts the send/recv pairs, forward and backward (docs/distributed.md).
 *
 *   mpirun -np 2 build/examples/example_pipeline_cnn [--static] [STEPS] [LIMIT]
 *   build/examples/example_pipeline_cnn [--static] [STEPS] [LIMIT]   (one process, whole model)
 *
 * Both print the loss of every step from the process that has it; run as 2
 * ranks or as one process they print the same numbers (the same ops on the
 * same values: the messages carry exact bytes), which
 * tests/cli/pipeline_cli.sh checks. */
#include <chutney.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 64

/* Both halves, made on every rank from one seed, so each rank's half
 * starts as in one process. */
static void make_stages(cn_module *stage[2]) {
    cn_conv_opts pad1 = {.padding = {1, 1}};
    cn_pool_opts pool2 = {.kernel = {2, 2}};
    cn_module *l0[] = {cn_nn_conv2d(1, 32, 3, 3, &pad1, true), cn_nn_relu(),
                       cn_nn_max_pool2d(&pool2),               cn_nn_conv2d(32, 64, 3, 3, &pad1, true),
                       cn_nn_relu(),                           cn_nn_max_pool2d(&pool2)};
    cn_module *l1[] = {cn_nn_flatten(1, -1), cn_nn_linear(3136, 128, true), cn_nn_relu(),
                       cn_nn_linear(128, 10, true)};
    stage[0] = cn_nn_sequential(l0, 6);
    stage[1] = cn_nn_sequential(l1, 4);
}

static cn_optimizer *adam_over(cn_module *const *mods, int nmods) {
    cn_tensor **all = NULL;
    int n = 0;
    for (int s = 0; s < nmods; s++) {
        cn_tensor **params;
        int k = cn_module_parameters(mods[s], &params, NULL);
        all = realloc(all, sizeof *all * (size_t)(n + k));
        memcpy(all + n, params, sizeof *all * (size_t)k);
        n += k;
        free(params);
    }
    cn_optimizer *opt = cn_adam(all, n, &(cn_adam_opts){.lr = 1e-3});
    free(all);
    return opt;
}

/* Each rank trains its stage with cn_send / cn_recv between them. */
static int train_eager(cn_tensor *x, cn_tensor *y, int steps) {
    int size = cn_dist_size(), rank = cn_dist_rank();
    cn_module *stage[2];
    make_stages(stage);
    cn_optimizer *opt[2] = {adam_over(&stage[0], 1), adam_over(&stage[1], 1)};
    bool mine[2] = {size == 1 || rank == 0, size == 1 || rank == 1};
    cn_tensor *data[2] = {x, y};
    cn_loader *loader =
        cn_loader_new(data, 2, &(cn_loader_opts){.batch_size = BATCH, .shuffle = true, .seed = 1});
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
    return rc;
}

/* Open a device scope from its name (cn_device_parse: "rank:1/cpu:0"). */
static void scope(const char *name) {
    cn_device d;
    if (cn_device_parse(name, &d) == 0) cn_device_scope_begin(d);
}

/* The training step as one program, the stages placed on ranks 0 and 1 by
 * device scopes (two ranks) or all here (one process). The batch size is
 * fixed: the receiving rank must know each message's sizes when compiling. */
static cn_program *build_static(cn_graph *g, cn_module *stage[2], cn_optimizer *opt,
                                cn_tensor *ph[2], cn_dtype label_dt) {
    bool split = cn_dist_size() == 2;
    cn_scope_begin();
    ph[0] = cn_retain(cn_placeholder(g, "x", CN_F32, CN_SHAPE(BATCH, 1, 28, 28)));
    ph[1] = cn_retain(cn_placeholder(g, "y", label_dt, CN_SHAPE(BATCH)));
    if (split) scope("rank:0/cpu:0");
    cn_tensor *h = cn_module_forward(stage[0], ph[0]);
    if (split) {
        cn_device_scope_end();
        scope("rank:1/cpu:0");
    }
    cn_tensor *loss = cn_cross_entropy(cn_module_forward(stage[1], h), ph[1], CN_REDUCTION_MEAN, 0);
    if (split) cn_device_scope_end();
    cn_program *prog = loss ? cn_compile_train_step(g, &loss, 1, opt, NULL) : NULL;
    cn_scope_end();
    return prog;
}

static int train_static(cn_tensor *x, cn_tensor *y, int steps) {
    int rank = cn_dist_rank();
    cn_module *stage[2];
    make_stages(stage);
    /* One optimiser over every parameter on every rank (so every rank
     * builds the same graph), made before the graph: it moves the
     * parameters into its flat buffer. A rank's copy of the other stage's
     * parameters gets no gradient there and stays as it is. */
    cn_optimizer *opt = adam_over(stage, 2);
    cn_graph *g = cn_graph_new();
    cn_tensor *ph[2] = {NULL, NULL};
    cn_program *prog = build_static(g, stage, opt, ph, cn_tensor_dtype(y));
    cn_tensor *data[2] = {x, y};
    cn_loader *loader = cn_loader_new(
        data, 2,
        &(cn_loader_opts){.batch_size = BATCH, .shuffle = true, .seed = 1, .drop_last = true});
    int rc = prog ? 0 : 1;
    if (prog && rank == 0) {
        cn_program_stats st;
        cn_program_stats_get(prog, &st);
        fprintf(stderr, "rank %d: %d steps, %d sends, %d recvs\n", st.rank, st.nsteps, st.nsends,
                st.nrecvs);
    }
    for (int step = 0, epoch = 0; step < steps && rc == 0; epoch++) {
        cn_loader_set_epoch(loader, epoch);
        cn_tensor *b[2];
        while (step < steps && rc == 0 && cn_loader_next(loader, b) == 1) {
            cn_scope_begin();
            cn_tensor *loss = NULL;
            rc = cn_run(prog, ph, b, 2, &loss, 1) == 0 ? 0 : 1;
            /* The loss is computed on rank 1 (NULL on rank 0). */
            if (rc == 0 && loss) printf("step %d loss %.9g\n", step, cn_item(loss));
            cn_scope_end();
            step++;
        }
    }
    if (rc) fprintf(stderr, "rank %d: %s\n", rank, cn_last_error());
    cn_loader_free(loader);
    cn_program_free(prog);
    cn_graph_free(g);
    cn_release(ph[0]);
    cn_release(ph[1]);
    cn_optimizer_free(opt);
    for (int s = 0; s < 2; s++) cn_module_free(stage[s]);
    return rc;
}

int main(int argc, char **argv) {
    if (cn_dist_init(&argc, &argv) < 0) {
        fprintf(stderr, "%s\n", cn_last_error());
        return 1;
    }
    bool static_mode = false;
    int npos = 0;
    const char *pos[2] = {NULL, NULL};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--static") == 0) static_mode = true;
        else if (npos < 2) pos[npos++] = argv[i];
    }
    int steps = pos[0] ? atoi(pos[0]) : 20;
    int64_t limit = pos[1] ? atoll(pos[1]) : 2048;
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
    int rc = static_mode ? train_static(x, y, steps) : train_eager(x, y, steps);
    cn_scope_end();
    if (rc) cn_dist_abort(rc);
    cn_dist_finalize();
    return 0;
}
