/* Two training steps of the benchmark CNN (conv, pool, linear, ReLU,
 * cross-entropy, Adam) against PyTorch's: the same initial parameters (read
 * by PyTorch's names), the same batch; the losses agree to 1e-5 relative,
 * the first step's gradients to 1e-5 of each tensor's largest, and the
 * parameters after both steps to 1e-5, except where a gradient is itself
 * below the f32 rounding of its sums (Adam divides by the gradients' root
 * mean square, so such noise becomes a step of up to lr either way; at
 * most 1% of a tensor may be such). Fixtures from CTest's
 * train_step_fixtures test (CN_TRAIN_STEP_FILE). */
#include "fixture_text.h"

static cn_module *benchmark_cnn(void) {
    cn_conv_opts pad1 = {.padding = {1, 1}};
    cn_pool_opts pool2 = {.kernel = {2, 2}};
    cn_module *layers[] = {cn_nn_conv2d(1, 32, 3, 3, &pad1, true),  cn_nn_relu(),
                           cn_nn_max_pool2d(&pool2),                 cn_nn_conv2d(32, 64, 3, 3, &pad1, true),
                           cn_nn_relu(),                             cn_nn_max_pool2d(&pool2),
                           cn_nn_flatten(1, -1),                     cn_nn_linear(3136, 128, true),
                           cn_nn_relu(),                             cn_nn_linear(128, 10, true)};
    return cn_nn_sequential(layers, 10);
}

/* "tag name dt ndim dims... values..."; NULL at the end or on a malformed
 * record. */
static cn_tensor *read_record(FILE *f, char *tag, char *name) {
    if (fscanf(f, "%15s", tag) != 1 || !strcmp(tag, "end")) return NULL;
    if (fscanf(f, "%63s", name) != 1) return NULL;
    return fx_read_values(f);
}

static void test_cnn_steps(void) {
    const char *path = getenv("CN_TRAIN_STEP_FILE");
    CHECK_MSG(path != NULL, "CN_TRAIN_STEP_FILE is not set (CTest's train_step_fixtures writes it)");
    if (!path) return;
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f) return;
    cn_scope_begin();
    cn_module *model = benchmark_cnn();
    cn_tensor *x = NULL, *y = NULL, *losses[2] = {NULL, NULL};
    int nloss = 0, nafter = 0, ninit = 0;
    char tag[16], name[64];
    cn_tensor *t;
    struct {
        char name[64];
        cn_tensor *t;
    } after[16], grads[16];
    int ngrads = 0;
    while ((t = read_record(f, tag, name)) != NULL) {
        if (!strcmp(tag, "init")) {
            cn_tensor *p = cn_module_find(model, name);
            CHECK_MSG(p && cn_numel(p) == cn_numel(t), "parameter %s: missing or wrong size", name);
            cn_no_grad_begin();
            if (p) cn_copy_(p, t);
            cn_no_grad_end();
            ninit++;
        } else if (!strcmp(tag, "x")) {
            x = t;
        } else if (!strcmp(tag, "y")) {
            y = cn_cast(t, CN_I64);
        } else if (!strcmp(tag, "loss") && nloss < 2) {
            losses[nloss++] = t;
        } else if (!strcmp(tag, "grad") && ngrads < 16) {
            snprintf(grads[ngrads].name, sizeof grads[ngrads].name, "%s", name);
            grads[ngrads++].t = t;
        } else if (!strcmp(tag, "after") && nafter < 16) {
            snprintf(after[nafter].name, sizeof after[nafter].name, "%s", name);
            after[nafter++].t = t;
        }
    }
    fclose(f);
    CHECK_MSG(ninit == 8 && nafter == 8 && ngrads == 8 && nloss == 2 && x && y,
              "fixture %s is incomplete", path);
    if (ninit == 8 && nafter == 8 && nloss == 2 && x && y) {
        cn_tensor **params;
        int n = cn_module_parameters(model, &params, NULL);
        cn_optimizer *opt = cn_adam(params, n, &(cn_adam_opts){.lr = 1e-3});
        free(params);
        for (int step = 0; step < 2; step++) {
            cn_optimizer_zero_grad(opt);
            cn_tensor *loss =
                cn_cross_entropy(cn_module_forward(model, x), y, CN_REDUCTION_MEAN, 0);
            CHECK_EQ_INT(cn_backward(loss, NULL), 0);
            CHECK_CLOSE(cn_item(loss), th_at(losses[step], 0), 1e-5, 0);
            for (int k = 0; step == 0 && k < ngrads; k++) {
                cn_tensor *g = cn_get_grad(cn_module_find(model, grads[k].name)), *want = grads[k].t;
                double scale = cn_item(cn_max(cn_abs(want), NULL, 0, false)), worst = 0;
                for (int64_t i = 0; g && i < cn_numel(want); i++)
                    worst = fmax(worst, fabs(th_at(g, i) - th_at(want, i)));
                CHECK_MSG(g && worst <= 1e-5 * scale, "gradient of %s: largest difference %g (scale %g)",
                          grads[k].name, worst, scale);
            }
            CHECK_EQ_INT(cn_optimizer_step(opt), 0);
        }
        for (int k = 0; k < nafter; k++) {
            cn_tensor *p = cn_module_find(model, after[k].name), *want = after[k].t, *g0 = NULL;
            for (int j = 0; j < ngrads; j++)
                if (!strcmp(grads[j].name, after[k].name)) g0 = grads[j].t;
            double gscale = g0 ? cn_item(cn_max(cn_abs(g0), NULL, 0, false)) : 0, worst = 0;
            int64_t m = cn_numel(want), noisy = 0;
            for (int64_t i = 0; i < m; i++) {
                double d = fabs(th_at(p, i) - th_at(want, i));
                /* A gradient below f32's rounding of the sums that make it
                 * (1e-5 of the tensor's largest) is noise in both
                 * frameworks, and Adam scales it to a step of up to lr:
                 * there the two may differ by up to 2 lr per step. */
                double gi = g0 ? fabs(th_at(g0, i)) : 1;
                if (gi > 0 && gi < 1e-5 * gscale) {
                    noisy++;
                    CHECK_MSG(d <= 4 * 1e-3 + 1e-5, "%s[%" PRId64 "]: differs by %g", after[k].name, i, d);
                    continue;
                }
                if (d > worst) worst = d;
            }
            CHECK_MSG(worst <= 1e-5, "%s after two steps: largest difference %g",
                      after[k].name, worst);
            CHECK_MSG(noisy * 100 <= m, "%s: %" PRId64 " of %" PRId64 " gradients are noise-sized",
                      after[k].name, noisy, m);
        }
        cn_optimizer_free(opt);
    }
    cn_module_free(model);
    cn_scope_end();
}

int main(void) {
    RUN(test_cnn_steps);
    return th_summary();
}
