/* The module library's own behaviour (values are checked against PyTorch in
 * test_nn_parity): the module tree (names, order, tied parameters, state,
 * lookup, training mode, freeing), user-defined modules, Sequential,
 * Dropout's statistics, BatchNorm's running statistics over several steps,
 * a whole model traced as a static graph with an unknown batch size, a
 * model whose parameters an optimiser moves into one buffer, and the errors
 * a user can cause. */
#include "harness.h"

/* ---- a user-defined module: two children and a tied parameter ---- */

typedef struct two_layer {
    cn_module base;
    double scale;
} two_layer;

static cn_tensor *two_layer_forward(cn_module *m, cn_tensor *x) {
    two_layer *t = (two_layer *)m;
    cn_tensor *h = cn_tanh(cn_module_forward(cn_module_child(m, "fc1"), x));
    h = cn_module_forward(cn_module_child(m, "fc2"), h);
    return cn_mul(cn_mul_scalar(h, t->scale), cn_module_param(m, "gain"));
}

static int free_calls;
static void two_layer_free(cn_module *m) {
    (void)m;
    free_calls++;
}

static const cn_module_vtable two_layer_vt = {"TwoLayer", two_layer_forward, two_layer_free};

static cn_module *make_two_layer(void) {
    cn_module *m = cn_module_new(&two_layer_vt, sizeof(two_layer));
    ((two_layer *)m)->scale = 2;
    CHECK_EQ_INT(cn_module_add_param(m, "gain", cn_full(CN_F32, CN_SHAPE(3), 0.5)), 0);
    CHECK_EQ_INT(cn_module_add_child(m, "fc1", cn_nn_linear(4, 5, true)), 0);
    CHECK_EQ_INT(cn_module_add_child(m, "fc2", cn_nn_linear(5, 3, false)), 0);
    CHECK_EQ_INT(cn_module_add_buffer(m, "steps", cn_zeros(CN_I64, 0, NULL)), 0);
    return m;
}

static void test_module_tree(void) {
    cn_module *m = make_two_layer();
    CHECK(!strcmp(cn_module_type(m), "TwoLayer"));
    cn_tensor **p;
    const char **names;
    int n = cn_module_parameters(m, &p, &names);
    const char *want[] = {"gain", "fc1.weight", "fc1.bias", "fc2.weight"};
    CHECK_EQ_INT(n, 4);
    for (int i = 0; i < n && i < 4; i++) {
        CHECK_MSG(!strcmp(names[i], want[i]), "parameter %d is %s, expected %s", i, names[i], want[i]);
        CHECK(cn_requires_grad(p[i]) && cn_is_leaf(p[i]));
        CHECK(p[i] == cn_module_find(m, names[i]));
    }
    free(p);
    free(names);
    CHECK_EQ_INT(cn_module_num_params(m), 3 + 20 + 5 + 15);
    n = cn_module_state(m, &p, &names);
    const char *wstate[] = {"gain", "steps", "fc1.weight", "fc1.bias", "fc2.weight"};
    CHECK_EQ_INT(n, 5);
    for (int i = 0; i < n && i < 5; i++)
        CHECK_MSG(!strcmp(names[i], wstate[i]), "state %d is %s, expected %s", i, names[i], wstate[i]);
    CHECK(!cn_requires_grad(p[1]));
    free(p);
    free(names);
    /* Either output may be left out. */
    CHECK_EQ_INT(cn_module_parameters(m, NULL, NULL), 4);

    /* Tied weights: listed once by parameters (as named_parameters), twice in the state. */
    cn_module *fc2 = cn_module_child(m, "fc2");
    CHECK_EQ_INT(cn_module_add_param(m, "tied", cn_module_param(fc2, "weight")), 0);
    CHECK_EQ_INT(cn_module_parameters(m, NULL, NULL), 4);
    CHECK_EQ_INT(cn_module_state(m, NULL, NULL), 6);
    CHECK_EQ_INT(cn_module_num_params(m), 3 + 20 + 5 + 15);

    /* Forward, gradients into every parameter, zero_grad. */
    cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(2, 4));
    cn_tensor *y = cn_module_forward(m, x);
    CHECK_SHAPE(y, 2, 3);
    CHECK_EQ_INT(cn_backward(cn_sum(y, NULL, 0, false), NULL), 0);
    n = cn_module_parameters(m, &p, NULL);
    for (int i = 0; i < n; i++) CHECK(cn_get_grad(p[i]) != NULL);
    cn_module_zero_grad(m);
    for (int i = 0; i < n; i++) CHECK(cn_get_grad(p[i]) == NULL);
    free(p);

    /* Training mode reaches every descendant. */
    CHECK(m->training && fc2->training);
    cn_module_train(m, false);
    CHECK(!m->training && !fc2->training && !cn_module_child(m, "fc1")->training);
    cn_module_train(m, true);
    CHECK(fc2->training);

    /* Registration errors. */
    CHECK_STATUS_ERROR(cn_module_add_param(m, "gain", cn_zeros(CN_F32, CN_SHAPE(1))), "already has");
    CHECK_STATUS_ERROR(cn_module_add_param(m, "a.b", cn_zeros(CN_F32, CN_SHAPE(1))), "no '.'");
    CHECK_STATUS_ERROR(cn_module_add_buffer(m, "", cn_zeros(CN_F32, CN_SHAPE(1))), "non-empty");
    cn_tensor *xr = cn_clone(x);
    cn_set_requires_grad(xr, true);
    CHECK_STATUS_ERROR(cn_module_add_param(m, "op", cn_add_scalar(xr, 1)), "leaf");
    CHECK_STATUS_ERROR(cn_module_add_param(m, "ints", cn_zeros(CN_I64, CN_SHAPE(1))), "float");
    CHECK_STATUS_ERROR(cn_module_add_child(m, "fc1", cn_nn_relu()), "already has"); /* freed */
    CHECK_STATUS_ERROR(cn_module_add_child(fc2, "loop", m), "its own descendant");
    CHECK_ERROR(cn_module_find(m, "fc1.nothing"), "no parameter or buffer \"fc1.nothing\"");
    CHECK_ERROR(cn_module_find(m, "fc3.weight"), "no parameter or buffer");
    CHECK(cn_module_find(m, "fc1.bias") == cn_module_param(cn_module_child(m, "fc1"), "bias"));
    CHECK(cn_module_child(m, "nothing") == NULL && cn_module_param(m, "nothing") == NULL);
    CHECK_ERROR(cn_module_new(&two_layer_vt, 4), "smaller than cn_module");
    CHECK_ERROR(cn_module_forward(NULL, x), "module is NULL");
    CHECK(cn_module_forward(m, NULL) == NULL);

    free_calls = 0;
    cn_module_free(m);
    CHECK_EQ_INT(free_calls, 1);
    cn_module_free(NULL);
}

/* cn_module_set_tensor: a layer's weight replaced by another layer's (tied
 * weights): the forward reads the new one, gradients of both uses reach it,
 * and a tensor of another shape, dtype or kind is refused. */
static void test_set_tensor(void) {
    cn_module *emb = cn_nn_embedding(5, 3, CN_NO_PADDING), *head = cn_nn_linear(3, 5, false);
    cn_tensor *w = cn_module_param(head, "weight");
    CHECK_EQ_INT(cn_module_set_tensor(emb, "weight", w), 0);
    CHECK(cn_module_param(emb, "weight") == w);
    cn_tensor *idx = cn_from_data(CN_I64, 1, (int64_t[]){2}, (int64_t[]){4, 1});
    cn_tensor *e = cn_module_forward(emb, idx);
    CHECK_CLOSE(cn_get(e, (int64_t[]){0, 2}), cn_get(w, (int64_t[]){4, 2}), 0, 0);
    CHECK_CLOSE(cn_get(e, (int64_t[]){1, 0}), cn_get(w, (int64_t[]){1, 0}), 0, 0);
    /* d/dw of sum(head(emb(idx))): the head's use adds sum(e) over the batch to
     * every row, the embedding's adds each row's column sums of W to rows 4 and 1. */
    CHECK_EQ_INT(cn_backward(cn_sum(cn_module_forward(head, e), NULL, 0, false), NULL), 0);
    cn_tensor *g = cn_get_grad(w);
    CHECK(g != NULL);
    for (int r = 0; g && r < 5; r++)
        for (int c = 0; c < 3; c++) {
            double want = cn_get(e, (int64_t[]){0, c}) + cn_get(e, (int64_t[]){1, c});
            double colsum = 0;
            for (int k = 0; k < 5; k++) colsum += cn_get(w, (int64_t[]){k, c});
            if (r == 4 || r == 1) want += colsum;
            CHECK_CLOSE(cn_get(g, (int64_t[]){r, c}), want, 0, 1e-5);
        }
    CHECK_STATUS_ERROR(cn_module_set_tensor(emb, "weight", cn_zeros(CN_F32, CN_SHAPE(3, 5))),
                       "Embedding.weight is f32 [5, 3]");
    CHECK_STATUS_ERROR(cn_module_set_tensor(emb, "weight", cn_zeros(CN_F64, CN_SHAPE(5, 3))),
                       "must agree");
    CHECK_STATUS_ERROR(cn_module_set_tensor(emb, "bias", w), "no parameter or buffer \"bias\"");
    cn_tensor *wr = cn_clone(w);
    cn_set_requires_grad(wr, true);
    CHECK_STATUS_ERROR(cn_module_set_tensor(emb, "weight", cn_mul_scalar(wr, 2)), "leaf");
    cn_module_free(head);
    CHECK(cn_module_param(emb, "weight") == w); /* still held by the embedding */
    CHECK_CLOSE(cn_get(cn_module_forward(emb, idx), (int64_t[]){0, 0}), cn_get(w, (int64_t[]){4, 0}), 0, 0);
    cn_module_free(emb);
}

static void test_sequential(void) {
    cn_module *inner[] = {cn_nn_linear(3, 4, true), cn_nn_relu()};
    cn_module *outer[] = {cn_nn_sequential(inner, 2), cn_nn_identity(), cn_nn_linear(4, 2, false)};
    cn_module *s = cn_nn_sequential(outer, 3);
    CHECK(s != NULL);
    CHECK_EQ_INT(cn_nn_sequential_append(s, cn_nn_sigmoid()), 0);
    const char **names;
    int n = cn_module_parameters(s, NULL, &names);
    CHECK_EQ_INT(n, 3);
    if (n == 3) {
        CHECK(!strcmp(names[0], "0.0.weight"));
        CHECK(!strcmp(names[1], "0.0.bias"));
        CHECK(!strcmp(names[2], "2.weight"));
    }
    free(names);
    CHECK(!strcmp(cn_module_type(cn_module_child(s, "3")), "Sigmoid"));
    /* The value: sigmoid(relu(x W0^T + b0) W2^T), by hand. */
    cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(5, 3));
    cn_tensor *w0 = cn_module_find(s, "0.0.weight"), *b0 = cn_module_find(s, "0.0.bias");
    cn_tensor *w2 = cn_module_find(s, "2.weight");
    cn_tensor *want = cn_sigmoid(cn_matmul(cn_relu(cn_add(cn_matmul(x, cn_mT(w0)), b0)), cn_mT(w2)));
    CHECK(cn_allclose(cn_module_forward(s, x), want, 1e-6, 1e-7));
    /* Identity returns its input (a new reference). */
    cn_module *id = cn_nn_identity();
    cn_tensor *same = cn_module_forward(id, x);
    CHECK(same && cn_shares_storage(same, x) && cn_equal(same, x));
    cn_module_free(id);
    cn_module_free(s);
    /* A failed constructor inside the list: the others are freed, NULL returned. */
    cn_module *bad[] = {cn_nn_linear(3, 4, true), cn_nn_linear(-1, 2, true), cn_nn_relu()};
    CHECK(cn_nn_sequential(bad, 3) == NULL);
    CHECK_MSG(strstr(cn_last_error(), "must be >= 0"), "the constructor's error is kept: %s",
              cn_last_error());
    cn_module *relu = cn_nn_relu();
    CHECK_STATUS_ERROR(cn_nn_sequential_append(relu, cn_nn_relu()), "not a Sequential");
    cn_module_free(relu);
}

static void test_dropout(void) {
    cn_manual_seed(1);
    int64_t n = 40000;
    cn_tensor *x = cn_add_scalar(cn_rand(CN_F32, CN_SHAPE(n)), 1); /* no zeros */
    cn_set_requires_grad(x, true);
    /* Identity for p = 0 and in evaluation mode. */
    CHECK(cn_equal(cn_dropout(x, 0, true), x));
    CHECK(cn_equal(cn_dropout(x, 0.7, false), x));
    cn_module *d = cn_nn_dropout(0.3);
    cn_module_train(d, false);
    CHECK(cn_equal(cn_module_forward(d, x), x));
    cn_module_train(d, true);
    cn_tensor *y = cn_module_forward(d, x);
    int64_t zeros = 0;
    bool scaled = true;
    for (int64_t k = 0; k < n; k++) {
        double v = th_at(y, k), xv = th_at(x, k);
        if (v == 0) zeros++;
        else scaled &= fabs(v - xv / 0.7) <= 1e-6 * fabs(v);
    }
    /* Binomial(n, 0.3): standard deviation sqrt(n p (1 - p)) ~ 92. */
    double sd = sqrt(n * 0.3 * 0.7);
    CHECK_MSG(fabs((double)zeros - 0.3 * n) < 5 * sd, "%" PRId64 " zeros of %" PRId64, zeros, n);
    CHECK_MSG(scaled, "survivors must be x / (1 - p)");
    /* The gradient is the same mask, scaled. */
    CHECK_EQ_INT(cn_backward(cn_sum(y, NULL, 0, false), NULL), 0);
    cn_tensor *g = cn_get_grad(x);
    bool gmask = true;
    for (int64_t k = 0; k < n; k++) {
        double gv = th_at(g, k);
        gmask &= th_at(y, k) == 0 ? gv == 0 : fabs(gv - 1 / 0.7) < 1e-6;
    }
    CHECK_MSG(gmask, "the gradient must be mask / (1 - p)");
    /* A fresh mask each call; the same mask from the same seed. */
    cn_manual_seed(42);
    cn_tensor *a = cn_dropout(x, 0.5, true);
    cn_tensor *b = cn_dropout(x, 0.5, true);
    cn_manual_seed(42);
    cn_tensor *c = cn_dropout(x, 0.5, true);
    CHECK(!cn_equal(a, b));
    CHECK(cn_equal(a, c));
    /* p = 1 drops everything. */
    CHECK(cn_item(cn_max(cn_abs(cn_dropout(x, 1, true)), NULL, 0, false)) == 0);
    CHECK_ERROR(cn_dropout(x, 1.5, true), "must be in [0, 1]");
    CHECK_ERROR(cn_dropout(cn_zeros(CN_I64, CN_SHAPE(3)), 0.5, true), "float");
    CHECK_ERROR(cn_nn_dropout(-0.1), "must be in [0, 1]");
    cn_module_free(d);
}

static void test_batch_norm_steps(void) {
    cn_module *bn = cn_nn_batch_norm1d(2, &(cn_batch_norm_opts){.momentum = 0.5});
    /* Channel 0 of both batches, by hand: mean, unbiased variance. */
    double b1[4][2] = {{1, 10}, {2, 20}, {3, 30}, {6, 40}};
    double b2[4][2] = {{0, 1}, {0, 1}, {4, 1}, {4, 5}};
    double rm[2] = {0, 0}, rv[2] = {1, 1};
    for (int step = 0; step < 2; step++) {
        double (*b)[2] = step ? b2 : b1;
        cn_tensor *x = th_make(CN_F32, 2, (int64_t[]){4, 2}, &b[0][0], TH_CONTIG);
        cn_tensor *y = cn_module_forward(bn, x);
        for (int c = 0; c < 2; c++) {
            double m = 0, v = 0;
            for (int i = 0; i < 4; i++) m += b[i][c] / 4;
            for (int i = 0; i < 4; i++) v += (b[i][c] - m) * (b[i][c] - m);
            for (int i = 0; i < 4; i++)
                CHECK_CLOSE(cn_get(y, (int64_t[]){i, c}), (b[i][c] - m) / sqrt(v / 4 + 1e-5), 1e-5, 1e-6);
            rm[c] = 0.5 * rm[c] + 0.5 * m;
            rv[c] = 0.5 * rv[c] + 0.5 * v / 3;
        }
    }
    for (int c = 0; c < 2; c++) {
        CHECK_CLOSE(th_at(cn_module_find(bn, "running_mean"), c), rm[c], 1e-6, 1e-7);
        CHECK_CLOSE(th_at(cn_module_find(bn, "running_var"), c), rv[c], 1e-6, 1e-7);
    }
    CHECK_EQ_INT(cn_get_int(cn_module_find(bn, "num_batches_tracked"), NULL), 2);
    /* Evaluation uses the running statistics and changes nothing. */
    cn_module_train(bn, false);
    cn_tensor *x = cn_full(CN_F32, CN_SHAPE(1, 2), 3.0);
    cn_tensor *y = cn_module_forward(bn, x);
    for (int c = 0; c < 2; c++) CHECK_CLOSE(th_at(y, c), (3 - rm[c]) / sqrt(rv[c] + 1e-5), 1e-5, 1e-6);
    CHECK_EQ_INT(cn_get_int(cn_module_find(bn, "num_batches_tracked"), NULL), 2);
    /* Training needs more than one value per channel (eval does not). */
    cn_module_train(bn, true);
    CHECK_ERROR(cn_module_forward(bn, x), "more than one value per channel");
    CHECK_ERROR(cn_module_forward(bn, cn_zeros(CN_F32, CN_SHAPE(4, 3))), "with C = 2");
    CHECK_ERROR(cn_module_forward(bn, cn_zeros(CN_F32, CN_SHAPE(4, 2, 2, 2))), "[N, C] or [N, C, L]");
    /* A static graph in training mode normalises with batch statistics and
     * updates the buffers on every run, as eager calls do (graph effects),
     * here with an unknown batch size (the unbiased variance from x). */
    cn_graph *g = cn_graph_new();
    cn_tensor *ph = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 2));
    cn_tensor *sy = cn_module_forward(bn, ph);
    cn_module_train(bn, false);
    cn_tensor *sy_eval = cn_module_forward(bn, ph);
    cn_module_train(bn, true);
    cn_program *p = cn_compile(g, &sy, 1, NULL);
    cn_program *pe = cn_compile(g, &sy_eval, 1, NULL);
    for (int run = 0; run < 2; run++) {
        double (*b)[2] = run ? b2 : b1;
        cn_tensor *xv = th_make(CN_F32, 2, (int64_t[]){4, 2}, &b[0][0], TH_CONTIG), *out;
        CHECK_EQ_INT(cn_run(p, &ph, &xv, 1, &out, 1), 0);
        for (int c = 0; c < 2; c++) {
            double m = 0, v = 0;
            for (int i = 0; i < 4; i++) m += b[i][c] / 4;
            for (int i = 0; i < 4; i++) v += (b[i][c] - m) * (b[i][c] - m);
            CHECK_CLOSE(th_at(out, c), (b[0][c] - m) / sqrt(v / 4 + 1e-5), 1e-5, 1e-6);
            rm[c] = 0.5 * rm[c] + 0.5 * m;
            rv[c] = 0.5 * rv[c] + 0.5 * v / 3;
        }
        CHECK_EQ_INT(cn_get_int(cn_module_find(bn, "num_batches_tracked"), NULL), 3 + run);
        for (int c = 0; c < 2; c++) {
            CHECK_CLOSE(th_at(cn_module_find(bn, "running_mean"), c), rm[c], 1e-6, 1e-6);
            CHECK_CLOSE(th_at(cn_module_find(bn, "running_var"), c), rv[c], 1e-6, 1e-6);
        }
        /* The evaluation program of the same graph reads the statistics as
         * they are now (not folded at compile time) and writes nothing. */
        CHECK_EQ_INT(cn_run(pe, &ph, &xv, 1, &out, 1), 0);
        for (int c = 0; c < 2; c++)
            CHECK_CLOSE(th_at(out, c), (b[0][c] - rm[c]) / sqrt(rv[c] + 1e-5), 1e-5, 1e-6);
        CHECK_EQ_INT(cn_get_int(cn_module_find(bn, "num_batches_tracked"), NULL), 3 + run);
    }
    cn_program_free(pe);
    cn_program_free(p);
    cn_graph_free(g);
    cn_module_free(bn);
}

/* A small CNN traced once on a placeholder of unknown batch size, run on
 * two batch sizes, equals eager; in training mode each run draws a new
 * dropout mask. */
static cn_module *make_cnn(void) {
    cn_module *l[] = {
        cn_nn_conv2d(1, 4, 3, 3, &(cn_conv_opts){.padding = {1, 1}}, true),
        cn_nn_batch_norm2d(4, NULL),
        cn_nn_relu(),
        cn_nn_max_pool2d(&(cn_pool_opts){.kernel = {2, 2}}),
        cn_nn_flatten(1, -1),
        cn_nn_dropout(0.5),
        cn_nn_linear(4 * 3 * 3, 5, true),
        cn_nn_layer_norm(CN_SHAPE(5), 1e-5, true),
    };
    return cn_nn_sequential(l, 8);
}

static void test_static_model(void) {
    cn_manual_seed(7);
    cn_module *m = make_cnn();
    /* Some BatchNorm statistics to use in evaluation mode. */
    for (int i = 0; i < 2; i++) cn_module_forward(m, cn_randn(CN_F32, CN_SHAPE(6, 1, 6, 6)));
    cn_module_train(m, false);
    cn_graph *g = cn_graph_new();
    cn_tensor *ph = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 1, 6, 6));
    cn_tensor *sy = cn_module_forward(m, ph);
    CHECK(sy && cn_is_symbolic_tensor(sy));
    CHECK_SHAPE(sy, -1, 5);
    cn_program *p = cn_compile(g, &sy, 1, NULL);
    for (int64_t batch = 1; batch <= 5; batch += 4) {
        cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(batch, 1, 6, 6)), *out;
        CHECK_EQ_INT(cn_run(p, &ph, &x, 1, &out, 1), 0);
        CHECK(cn_allclose(out, cn_module_forward(m, x), 1e-6, 1e-6));
        CHECK_SHAPE(out, batch, 5);
    }
    /* The graph reads parameters and buffers when it runs: after more
     * training (new running statistics) and new weights it still equals eager. */
    cn_module_train(m, true);
    cn_module_forward(m, cn_randn(CN_F32, CN_SHAPE(4, 1, 6, 6)));
    cn_module_train(m, false);
    CHECK_EQ_INT(cn_init_uniform_(cn_module_find(m, "1.weight"), 0.5, 2), 0);
    CHECK_EQ_INT(cn_init_uniform_(cn_module_find(m, "1.bias"), -1, 1), 0);
    CHECK_EQ_INT(cn_init_uniform_(cn_module_find(m, "6.weight"), -1, 1), 0);
    cn_tensor *x2 = cn_randn(CN_F32, CN_SHAPE(2, 1, 6, 6)), *out2;
    CHECK_EQ_INT(cn_run(p, &ph, &x2, 1, &out2, 1), 0);
    CHECK(cn_allclose(out2, cn_module_forward(m, x2), 1e-6, 1e-6));
    cn_program_free(p);
    cn_graph_free(g);
    /* Training mode: dropout draws a fresh mask per run. */
    cn_module_train(m, true);
    g = cn_graph_new();
    ph = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 1, 6, 6));
    sy = cn_module_forward(m, ph);
    p = cn_compile(g, &sy, 1, NULL);
    cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(3, 1, 6, 6)), *o1, *o2;
    CHECK_EQ_INT(cn_run(p, &ph, &x, 1, &o1, 1), 0);
    CHECK_EQ_INT(cn_run(p, &ph, &x, 1, &o2, 1), 0);
    CHECK(o1 && o2 && !cn_equal(o1, o2));
    cn_program_free(p);
    cn_graph_free(g);
    cn_module_free(m);
}

/* An optimiser moves every parameter into one flat buffer, re-pointing the
 * tensors in place: the model keeps computing the same values, backward
 * lands in the flat gradient buffer, and steps change what the model
 * computes. */
static void test_moved_parameters(void) {
    cn_manual_seed(3);
    cn_module *l[] = {cn_nn_linear(4, 6, true), cn_nn_tanh(),
                      cn_nn_lstm(6, 3, &(cn_rnn_opts){.batch_first = true})};
    cn_module *m = cn_nn_sequential(l, 3);
    cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(2, 5, 4));
    /* Not recorded: the optimiser must be created before a graph holds the parameters. */
    cn_no_grad_begin();
    cn_tensor *before = cn_module_forward(m, x);
    cn_no_grad_end();
    cn_tensor **params;
    int n = cn_module_parameters(m, &params, NULL);
    cn_optimizer *opt = cn_sgd(params, n, &(cn_sgd_opts){.lr = 0.1});
    CHECK(opt && cn_optimizer_is_flat(opt));
    cn_tensor *flat = cn_optimizer_flat_params(opt);
    for (int i = 0; i < n; i++) CHECK(cn_shares_storage(params[i], flat));
    CHECK(cn_equal(cn_module_forward(m, x), before));
    cn_tensor *loss = cn_sum(cn_module_forward(m, x), NULL, 0, false);
    CHECK_EQ_INT(cn_backward(loss, NULL), 0);
    cn_tensor *fg = cn_optimizer_flat_grads(opt);
    CHECK(cn_item(cn_norm(fg, 2, NULL, 0, false)) > 0);
    /* One step: p -= 0.1 g; the model computes with the new values. */
    cn_tensor *w = cn_module_find(m, "2.weight_hh_l0");
    cn_tensor *want = cn_sub(cn_clone(w), cn_mul_scalar(cn_clone(cn_get_grad(w)), 0.1));
    CHECK_EQ_INT(cn_optimizer_step(opt), 0);
    CHECK(cn_allclose(w, want, 1e-6, 1e-7));
    CHECK(!cn_allclose(cn_module_forward(m, x), before, 1e-6, 1e-6));
    cn_optimizer_free(opt);
    free(params);
    cn_module_free(m);
}

static void test_rnn_api(void) {
    cn_module *gru = cn_nn_gru(3, 4, &(cn_rnn_opts){.num_layers = 2, .dropout = 0.5});
    cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(5, 2, 3));
    cn_module_train(gru, false); /* no dropout between layers in evaluation */
    cn_tensor *y, *h, *c = (cn_tensor *)1;
    CHECK_EQ_INT(cn_rnn_forward(gru, x, NULL, NULL, &y, &h, &c), 0);
    CHECK_SHAPE(y, 5, 2, 4);
    CHECK_SHAPE(h, 2, 2, 4);
    CHECK(c == NULL);
    CHECK(cn_equal(cn_module_forward(gru, x), y));
    /* The last output of the top layer is its final state. */
    CHECK(cn_equal(cn_narrow(y, 0, 4, 1), cn_narrow(h, 0, 1, 1)));
    /* An explicit zero state equals none. */
    cn_tensor *y0;
    CHECK_EQ_INT(cn_rnn_forward(gru, x, cn_zeros(CN_F32, CN_SHAPE(2, 2, 4)), NULL, &y0, NULL, NULL), 0);
    CHECK(cn_allclose(y0, y, 1e-6, 1e-7));
    /* Dropout between layers in training mode changes the output. */
    cn_module_train(gru, true);
    CHECK(!cn_allclose(cn_module_forward(gru, x), y, 1e-6, 1e-6));
    CHECK_STATUS_ERROR(cn_rnn_forward(gru, x, cn_zeros(CN_F32, CN_SHAPE(1, 2, 4)), NULL, &y, NULL, NULL),
                       "h0 has shape [1, 2, 4], expected [2, 2, 4]");
    CHECK_STATUS_ERROR(cn_rnn_forward(gru, x, NULL, cn_zeros(CN_F32, CN_SHAPE(2, 2, 4)), &y, NULL, NULL),
                       "c0 is for LSTM only");
    CHECK_ERROR(cn_module_forward(gru, cn_zeros(CN_F32, CN_SHAPE(5, 2, 4))), "should be [T, N, 3]");
    CHECK_ERROR(cn_module_forward(gru, cn_zeros(CN_F32, CN_SHAPE(0, 2, 3))), "the sequence is empty");
    cn_module *lin = cn_nn_linear(2, 2, true);
    CHECK_STATUS_ERROR(cn_rnn_forward(lin, x, NULL, NULL, &y, NULL, NULL), "Linear is not an RNN");
    CHECK_ERROR(cn_nn_lstm(3, 4, &(cn_rnn_opts){.relu = true}), "RNN only");
    CHECK_ERROR(cn_nn_rnn(3, 0, NULL), "hidden_size 0");
    cn_module_free(lin);
    cn_module_free(gru);
}

static void test_layer_errors(void) {
    cn_module *lin = cn_nn_linear(3, 2, true);
    CHECK_ERROR(cn_module_forward(lin, cn_zeros(CN_F32, CN_SHAPE(4, 5))), "in_features = 3");
    /* 1-D input works as in PyTorch. */
    CHECK_SHAPE(cn_module_forward(lin, cn_zeros(CN_F32, CN_SHAPE(3))), 2);
    cn_module_free(lin);
    CHECK_ERROR(cn_nn_conv2d(3, 4, 3, 3, &(cn_conv_opts){.groups = 2}, true), "divisible by groups");
    CHECK_ERROR(cn_nn_conv2d(3, 4, 0, 3, NULL, true), "must be positive");
    CHECK_ERROR(cn_nn_max_pool2d(NULL), "positive kernel");
    CHECK_ERROR(cn_nn_adaptive_avg_pool2d(0, 1), "must be positive");
    cn_module *conv = cn_nn_conv2d(3, 4, 3, 3, NULL, true);
    CHECK(cn_module_forward(conv, cn_zeros(CN_F32, CN_SHAPE(1, 2, 5, 5))) == NULL);
    cn_module_free(conv);
    CHECK_ERROR(cn_nn_layer_norm(0, NULL, 1e-5, true), "normalized_shape");
    cn_module *ln = cn_nn_layer_norm(CN_SHAPE(4), 1e-5, true);
    CHECK_ERROR(cn_module_forward(ln, cn_zeros(CN_F32, CN_SHAPE(2, 3))), "does not end in");
    cn_module_free(ln);
    CHECK_ERROR(cn_nn_embedding(5, 2, 5), "padding_idx 5 is out of range");
    cn_module *emb = cn_nn_embedding(5, 2, CN_NO_PADDING);
    CHECK_ERROR(cn_module_forward(emb, cn_zeros(CN_F32, CN_SHAPE(3))), "integer tensor");
    CHECK(cn_module_forward(emb, cn_full(CN_I64, CN_SHAPE(3), 5)) == NULL); /* out of range */
    /* i32 indices of any rank, rank 0 too. */
    cn_tensor *w = cn_module_param(emb, "weight");
    cn_tensor *e = cn_module_forward(emb, cn_full(CN_I32, CN_SHAPE(2, 1, 2), 3));
    CHECK_SHAPE(e, 2, 1, 2, 2);
    CHECK(e && cn_get(e, (int64_t[]){1, 0, 1, 1}) == cn_get(w, (int64_t[]){3, 1}));
    cn_tensor *e0 = cn_module_forward(emb, cn_scalar(CN_I64, 4));
    CHECK_SHAPE(e0, 2);
    cn_module_free(emb);
    CHECK_ERROR(cn_nn_batch_norm2d(-1, NULL), "num_features");
}

/* Composite functions called with no scope open hand back only their
 * result: the caller releases it and nothing else stays alive (the ASan
 * stage's leak check fails this test otherwise). */
static void test_composites_without_a_scope(void) {
    cn_scope_end(); /* RUN's scope: depth 0 from here */
    CHECK_EQ_INT(cn_scope_depth(), 0);
    cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(4, 3));
    cn_tensor *p = cn_sigmoid(x), *y = cn_full(CN_F32, CN_SHAPE(4, 3), 1);
    cn_tensor *t = cn_full(CN_I64, CN_SHAPE(4), 2);
    cn_tensor *r[] = {
        cn_mse_loss(x, y, CN_REDUCTION_MEAN),
        cn_l1_loss(x, y, CN_REDUCTION_SUM),
        cn_cross_entropy(x, t, CN_REDUCTION_MEAN, 0.1),
        cn_nll_loss(x, t, CN_REDUCTION_NONE),
        cn_bce_with_logits(x, y, NULL, CN_REDUCTION_MEAN),
        cn_bce_loss(p, y, CN_REDUCTION_MEAN),
        cn_dropout(x, 0.5, true),
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        CHECK(r[i] != NULL);
        CHECK_EQ_INT(cn_scope_depth(), 0);
        cn_release(r[i]);
    }
    /* mse by hand: mean((x - 1)^2). */
    cn_tensor *mse = cn_mse_loss(x, y, CN_REDUCTION_MEAN);
    double want = 0;
    for (int i = 0; i < 12; i++) {
        double d = th_at(x, i) - 1;
        want += d * d / 12;
    }
    CHECK_CLOSE(cn_item(mse), want, 1e-6, 1e-7);
    cn_release(mse);
    cn_release(x);
    cn_release(p);
    cn_release(y);
    cn_release(t);
    cn_scope_begin();
}

static void test_loss_errors(void) {
    cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(4, 3));
    cn_tensor *t = cn_full(CN_I64, CN_SHAPE(4), 1);
    CHECK_ERROR(cn_mse_loss(x, x, (cn_reduction)7), "unknown reduction");
    CHECK_ERROR(cn_cross_entropy(x, cn_full(CN_I64, CN_SHAPE(3), 1), CN_REDUCTION_MEAN, 0),
                "do not match");
    CHECK_ERROR(cn_cross_entropy(x, t, CN_REDUCTION_MEAN, 1.5), "label_smoothing");
    CHECK_ERROR(cn_cross_entropy(x, cn_full(CN_BOOL, CN_SHAPE(4), 1), CN_REDUCTION_MEAN, 0),
                "class indices");
    CHECK_ERROR(cn_nll_loss(x, cn_zeros(CN_F32, CN_SHAPE(4, 3)), CN_REDUCTION_MEAN), "integers");
    CHECK_ERROR(cn_nll_loss_ex(x, t, &(cn_class_loss_opts){.label_smoothing = 0.1}),
                "option of cross_entropy");
    CHECK_ERROR(cn_cross_entropy_ex(x, t, &(cn_class_loss_opts){.weight = cn_ones(CN_F32, CN_SHAPE(4))}),
                "weight f32 [4] should be a float [C] with C = 3");
    CHECK_ERROR(cn_cross_entropy(cn_zeros(CN_I64, CN_SHAPE(4, 3)), t, CN_REDUCTION_MEAN, 0),
                "input must be float");
    /* A label out of range is caught by the gather. */
    CHECK(cn_cross_entropy(x, cn_full(CN_I64, CN_SHAPE(4), 3), CN_REDUCTION_MEAN, 0) == NULL);
    /* Unbatched: [C] with a rank-0 target. */
    cn_tensor *l = cn_cross_entropy(cn_narrow(cn_reshape(x, 1, (int64_t[]){12}), 0, 0, 3),
                                    cn_scalar(CN_I64, 2), CN_REDUCTION_NONE, 0);
    CHECK(l && cn_ndim(l) == 0);
    double m = fmax(fmax(th_at(x, 0), th_at(x, 1)), th_at(x, 2));
    double lse = m + log(exp(th_at(x, 0) - m) + exp(th_at(x, 1) - m) + exp(th_at(x, 2) - m));
    CHECK_CLOSE(cn_item(l), lse - th_at(x, 2), 1e-6, 1e-6);
    /* Every target ignored: the mean is 0 / 0. */
    cn_tensor *all = cn_cross_entropy_ex(x, t, &(cn_class_loss_opts){.use_ignore_index = true, .ignore_index = 1});
    CHECK(all && isnan(cn_item(all)));
}

int main(void) {
    RUN(test_module_tree);
    RUN(test_set_tensor);
    RUN(test_sequential);
    RUN(test_dropout);
    RUN(test_batch_norm_steps);
    RUN(test_static_model);
    RUN(test_moved_parameters);
    RUN(test_rnn_api);
    RUN(test_layer_errors);
    RUN(test_composites_without_a_scope);
    RUN(test_loss_errors);
    return th_summary();
}
