/* Trainable ONNX import (cn_onnx_load_trainable, cn_onnx_save_trained) on
 * tests/onnx/make_models.py's train_cnn.onnx, an f64 CNN as PyTorch exports
 * one in training mode: the parameters by name; their gradients, eager and
 * in a static program, against central finite differences in f64; the
 * running statistics against the batch's, computed here by plain loops; the
 * written model, run by the inference importer, against the module in
 * evaluation mode; what cannot be trained refused naming the node. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

static char dir[1024];

static cn_module *load(const char *name) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    return cn_onnx_load_trainable(path);
}

/* sum(model(x) * r): a scalar whose gradient reaches every output. The
 * global generator is reset first, so Dropout draws the same mask. */
static cn_tensor *loss_of(cn_module *m, cn_tensor *x, cn_tensor *r) {
    cn_manual_seed(5);
    return cn_sum(cn_mul(cn_module_forward(m, x), r), NULL, 0, false);
}

static void test_names(void) {
    cn_module *m = load("train_cnn");
    CHECK_MSG(m != NULL, "load: %s", cn_last_error());
    if (!m) return;
    const char **names = NULL;
    int n = cn_module_parameters(m, NULL, &names);
    const char *want[] = {"conv.weight", "conv.bias", "bn.weight", "bn.bias", "fc.weight", "fc.bias"};
    CHECK_EQ_INT(n, 6);
    for (int i = 0; i < n && i < 6; i++) CHECK_MSG(!strcmp(names[i], want[i]), "param %d: %s", i, names[i]);
    free(names);
    cn_tensor **state = NULL;
    int ns = cn_module_state(m, &state, &names);
    CHECK_EQ_INT(ns, 8); /* the running statistics are buffers, not parameters */
    CHECK(cn_module_find(m, "bn.running_var") != NULL);
    CHECK(!cn_requires_grad(cn_module_find(m, "bn.running_var")));
    CHECK_EQ_INT((int)cn_module_num_params(m), 54 + 3 + 3 + 3 + 24 + 2);
    free(state);
    free(names);
    cn_module_free(m);
}

static void test_gradients(void) {
    cn_module *m = load("train_cnn");
    CHECK_MSG(m != NULL, "load: %s", cn_last_error());
    if (!m) return;
    cn_scope_begin();
    th_seed(3);
    cn_tensor *x = th_random(CN_F64, 4, (int64_t[]){4, 2, 4, 4}, -1, 1, 0, NULL);
    cn_tensor *r = th_random(CN_F64, 2, (int64_t[]){4, 2}, -1, 1, 0, NULL);
    cn_tensor **params = NULL;
    const char **names = NULL;
    int np = cn_module_parameters(m, &params, &names);
    /* Eager: backward. */
    cn_module_zero_grad(m);
    CHECK(cn_backward(loss_of(m, x, r), NULL) == 0);
    /* Static: the same loss on a placeholder, its gradients one program. */
    cn_graph *g = cn_graph_new();
    cn_tensor *ph = cn_placeholder(g, "x", CN_F64, CN_SHAPE(4, 2, 4, 4));
    cn_tensor *outs[8] = {cn_sum(cn_mul(cn_module_forward(m, ph), r), NULL, 0, false)};
    CHECK(cn_grad(outs, NULL, 1, params, np, outs + 1, 0) == 0);
    cn_program *p = cn_compile(g, outs, np + 1, NULL);
    CHECK_MSG(p != NULL, "compile: %s", cn_last_error());
    cn_tensor *res[8] = {0};
    cn_manual_seed(5);
    CHECK(p && cn_run(p, &ph, &x, 1, res, np + 1) == 0);
    /* Central differences of the eager loss, element by element. */
    double worst = 0, worst_static = 0;
    const double h = 1e-6;
    for (int i = 0; i < np; i++) {
        cn_tensor *w = params[i], *gw = cn_get_grad(w);
        CHECK_MSG(gw != NULL, "%s has no gradient", names[i]);
        for (int64_t k = 0; gw && k < cn_numel(w); k++) {
            int64_t idx[CN_MAX_DIMS];
            th_unravel(k, cn_ndim(w), cn_shape(w), idx);
            double w0 = cn_get(w, idx);
            cn_no_grad_begin();
            cn_set(w, idx, w0 + h);
            double up = cn_item(loss_of(m, x, r));
            cn_set(w, idx, w0 - h);
            double down = cn_item(loss_of(m, x, r));
            cn_set(w, idx, w0);
            cn_no_grad_end();
            double fd = (up - down) / (2 * h), an = th_at(gw, k);
            double err = fabs(fd - an) / (1e-3 + fabs(fd));
            if (err > worst) worst = err;
            CHECK_MSG(err < 1e-5, "%s[%lld]: backward %.10g, finite differences %.10g", names[i],
                      (long long)k, an, fd);
            if (res[i + 1]) {
                double es = fabs(th_at(res[i + 1], k) - an) / (1e-12 + fabs(an));
                if (es > worst_static) worst_static = es;
                CHECK_MSG(th_close(th_at(res[i + 1], k), an, 1e-9, 1e-12),
                          "%s[%lld]: static %.17g, eager %.17g", names[i], (long long)k,
                          th_at(res[i + 1], k), an);
            }
        }
    }
    fprintf(stderr, "  gradients of %d parameters: finite differences within %.2g, the static "
                    "program's within %.2g of eager\n", np, worst, worst_static);
    cn_program_free(p);
    cn_graph_free(g);
    free(params);
    free(names);
    cn_scope_end();
    cn_module_free(m);
}

/* One step in training mode moves the running statistics as PyTorch does:
 * stat + (batch - stat) * 0.1, the variance unbiased; eagerly and as the
 * effect of a static program alike. */
static void test_running_stats(void) {
    cn_module *m = load("train_cnn");
    CHECK(m != NULL);
    if (!m) return;
    cn_scope_begin();
    th_seed(4);
    cn_tensor *x = th_random(CN_F64, 4, (int64_t[]){3, 2, 4, 4}, -1, 2, 0, NULL);
    cn_tensor *rm = cn_module_find(m, "bn.running_mean"), *rv = cn_module_find(m, "bn.running_var");
    cn_tensor *rm0 = cn_clone(rm), *rv0 = cn_clone(rv);
    /* The batch statistics of the convolution's output, by plain loops. */
    cn_tensor *c = cn_conv2d(x, cn_module_find(m, "conv.weight"), cn_module_find(m, "conv.bias"),
                             &(cn_conv_opts){.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1});
    double want_m[3], want_v[3];
    for (int ch = 0; ch < 3; ch++) {
        double s = 0, s2 = 0;
        int n = 0;
        for (int64_t b = 0; b < 3; b++)
            for (int64_t i = 0; i < 4; i++)
                for (int64_t j = 0; j < 4; j++, n++) s += cn_get(c, (int64_t[]){b, ch, i, j});
        double mean = s / n;
        for (int64_t b = 0; b < 3; b++)
            for (int64_t i = 0; i < 4; i++)
                for (int64_t j = 0; j < 4; j++) {
                    double d = cn_get(c, (int64_t[]){b, ch, i, j}) - mean;
                    s2 += d * d;
                }
        double m0 = cn_get(rm0, (int64_t[]){ch}), v0 = cn_get(rv0, (int64_t[]){ch});
        /* ONNX's momentum is a float attribute: 0.9f, so 1 - 0.9f of the batch. */
        want_m[ch] = m0 + (mean - m0) * (1 - (double)0.9f);
        want_v[ch] = v0 + (s2 / (n - 1) - v0) * (1 - (double)0.9f);
    }
    cn_module_forward(m, x);
    for (int ch = 0; ch < 3; ch++) {
        CHECK_CLOSE(cn_get(rm, (int64_t[]){ch}), want_m[ch], 1e-12, 1e-12);
        CHECK_CLOSE(cn_get(rv, (int64_t[]){ch}), want_v[ch], 1e-12, 1e-12);
    }
    cn_copy_(rm, rm0);
    cn_copy_(rv, rv0);
    cn_graph *g = cn_graph_new();
    cn_tensor *ph = cn_placeholder(g, "x", CN_F64, CN_SHAPE(-1, 2, 4, 4));
    cn_tensor *y = cn_module_forward(m, ph);
    cn_program *p = cn_compile(g, &y, 1, NULL);
    cn_tensor *out = NULL;
    CHECK(p && cn_run(p, &ph, &x, 1, &out, 1) == 0);
    for (int ch = 0; ch < 3; ch++) {
        CHECK_CLOSE(cn_get(rm, (int64_t[]){ch}), want_m[ch], 1e-12, 1e-12);
        CHECK_CLOSE(cn_get(rv, (int64_t[]){ch}), want_v[ch], 1e-12, 1e-12);
    }
    cn_program_free(p);
    cn_graph_free(g);
    cn_scope_end();
    cn_module_free(m);
}

/* Trained values written back: the inference importer runs the file (its
 * BatchNormalization and Dropout in inference form) as the module runs in
 * evaluation mode, where Dropout is the identity. */
static void test_save(void) {
    cn_module *m = load("train_cnn");
    CHECK(m != NULL);
    if (!m) return;
    cn_scope_begin();
    th_seed(5);
    cn_tensor *x = th_random(CN_F64, 4, (int64_t[]){5, 2, 4, 4}, -1, 1, 0, NULL);
    cn_tensor **params = NULL;
    int np = cn_module_parameters(m, &params, NULL);
    cn_optimizer *opt = cn_sgd(params, np, &(cn_sgd_opts){.lr = 0.1});
    cn_tensor *r = th_random(CN_F64, 2, (int64_t[]){5, 2}, -1, 1, 0, NULL);
    for (int step = 0; step < 3; step++) {
        cn_optimizer_zero_grad(opt);
        CHECK(cn_backward(loss_of(m, x, r), NULL) == 0);
        CHECK(cn_optimizer_step(opt) == 0);
    }
    cn_module_train(m, false);
    cn_tensor *a = cn_module_forward(m, x), *b = cn_module_forward(m, x);
    char path[64];
    snprintf(path, sizeof path, "/tmp/cn_onnx_train_%d.onnx", (int)getpid());
    CHECK_MSG(cn_onnx_save_trained(m, path) == 0, "save: %s", cn_last_error());
    cn_onnx_model *im = cn_onnx_load(path, NULL);
    CHECK_MSG(im != NULL, "load the written model: %s", cn_last_error());
    cn_tensor *y = NULL;
    CHECK(im && cn_onnx_run(im, &x, &y) == 0);
    for (int64_t k = 0; y && k < cn_numel(a); k++) {
        CHECK_CLOSE(th_at(y, k), th_at(a, k), 1e-12, 1e-12);
        CHECK(th_at(a, k) == th_at(b, k));
    }
    /* Saving twice gives the same bytes: the kept message is put back. */
    cn_onnx_free(im);
    CHECK(cn_onnx_save_trained(m, path) == 0);
    im = cn_onnx_load(path, NULL);
    CHECK(im != NULL);
    cn_onnx_free(im);
    unlink(path);
    CHECK_STATUS_ERROR(cn_onnx_save_trained(NULL, path), "not made by cn_onnx_load_trainable");
    cn_optimizer_free(opt);
    free(params);
    cn_scope_end();
    cn_module_free(m);
}

static void test_refused(void) {
    CHECK_ERROR(load("train_frozen"), "Gemm (opset 13): node 0 'head': cannot be trained: it "
                                      "computes from its weights alone");
    CHECK_ERROR(load("unsup_op"), "unsupported: Det");
    CHECK_ERROR(load("shape_input"), "the model has 2 inputs; a trainable model takes one");
    CHECK_ERROR(cn_onnx_load_trainable("/nonexistent.onnx"), "/nonexistent.onnx");
    cn_module *cnn = load("train_cnn");
    cn_scope_begin();
    CHECK_ERROR(cn_module_forward(cnn, cn_zeros(CN_F64, CN_SHAPE(2, 3, 4, 4))),
                "input 'x' is declared f64 [-1, 2, 4, 4]; given f64[2, 3, 4, 4]");
    cn_scope_end();
    cn_module_free(cnn);
}

int main(void) {
    cn_clear_error();
    cn_module *bare = cn_onnx_load_trainable("/nonexistent.onnx");
    if (!bare && strstr(cn_last_error(), "built without ONNX")) {
        CHECK_STATUS_ERROR(cn_onnx_save_trained(NULL, "x.onnx"), "built without ONNX support");
        return th_summary();
    }
    const char *d = getenv("CN_ONNX_MODELS");
    snprintf(dir, sizeof dir, "%s", d ? d : "");
    char skip[1100];
    snprintf(skip, sizeof skip, "%s/SKIP", dir);
    FILE *f = d ? fopen(skip, "r") : NULL;
    if (!d || f) {
        if (f) fclose(f);
        printf("SKIP: no ONNX test models (CN_ONNX_MODELS unset, or python3-onnx missing)\n");
        return 77;
    }
    cn_set_num_threads(1);
    RUN(test_names);
    RUN(test_gradients);
    RUN(test_running_stats);
    RUN(test_save);
    RUN(test_refused);
    return th_summary();
}
