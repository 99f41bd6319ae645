/* Initialisers: statistics of large draws against the formulas of
 * torch.nn.init (bounds exactly, mean and std within a few standard errors),
 * fans and gains, and every layer's default initialisation (PyTorch 1.13's)
 * against its formula. */
#include "harness.h"

static cn_stats stats_of(cn_tensor *t) {
    cn_stats s = {0};
    CHECK_EQ_INT(cn_tensor_stats(t, &s), 0);
    return s;
}

/* U(-b, b): inside the bounds, reaching close to them, std b / sqrt(3). */
static void check_uniform(const char *what, cn_tensor *t, double b) {
    cn_stats s = stats_of(t);
    double n = (double)s.numel, sd = b / sqrt(3.0);
    CHECK_MSG(s.min >= -b && s.max <= b, "%s: [%g, %g] outside +-%g", what, s.min, s.max, b);
    CHECK_MSG(s.min < -0.98 * b && s.max > 0.98 * b, "%s: [%g, %g] does not reach +-%g", what,
              s.min, s.max, b);
    CHECK_MSG(fabs(s.mean) < 5 * sd / sqrt(n), "%s: mean %g", what, s.mean);
    CHECK_MSG(fabs(s.std - sd) < 0.03 * sd, "%s: std %g, expected %g", what, s.std, sd);
}

static void check_normal(const char *what, cn_tensor *t, double mean, double sd) {
    cn_stats s = stats_of(t);
    double n = (double)s.numel;
    CHECK_MSG(fabs(s.mean - mean) < 5 * sd / sqrt(n), "%s: mean %g, expected %g", what, s.mean, mean);
    CHECK_MSG(fabs(s.std - sd) < 0.03 * sd, "%s: std %g, expected %g", what, s.std, sd);
}

static void test_fans_and_gains(void) {
    int64_t fi, fo;
    CHECK_EQ_INT(cn_init_fans(cn_empty(CN_F32, CN_SHAPE(6, 4, 3, 5)), &fi, &fo), 0);
    CHECK_EQ_INT(fi, 4 * 15);
    CHECK_EQ_INT(fo, 6 * 15);
    CHECK_EQ_INT(cn_init_fans(cn_empty(CN_F32, CN_SHAPE(7, 2)), &fi, &fo), 0);
    CHECK_EQ_INT(fi, 2);
    CHECK_EQ_INT(fo, 7);
    CHECK_STATUS_ERROR(cn_init_fans(cn_empty(CN_F32, CN_SHAPE(7)), &fi, &fo), "rank >= 2");
    CHECK_CLOSE(cn_init_gain(CN_NL_LINEAR, 0), 1, 0, 0);
    CHECK_CLOSE(cn_init_gain(CN_NL_SIGMOID, 0), 1, 0, 0);
    CHECK_CLOSE(cn_init_gain(CN_NL_TANH, 0), 5.0 / 3, 1e-15, 0);
    CHECK_CLOSE(cn_init_gain(CN_NL_RELU, 0), sqrt(2.0), 1e-15, 0);
    CHECK_CLOSE(cn_init_gain(CN_NL_LEAKY_RELU, 0.2), sqrt(2 / 1.04), 1e-15, 0);
    CHECK_CLOSE(cn_init_gain(CN_NL_SELU, 0), 0.75, 0, 0);
    CHECK(isnan(cn_init_gain((cn_nonlinearity)99, 0)));
}

static void test_basic_fills(void) {
    cn_manual_seed(3);
    cn_tensor *t = cn_empty(CN_F32, CN_SHAPE(200, 300));
    CHECK_EQ_INT(cn_init_uniform_(t, -0.5, 1.5), 0);
    cn_stats s = stats_of(t);
    CHECK(s.min >= -0.5 && s.max < 1.5 && s.min < -0.49 && s.max > 1.49);
    CHECK_MSG(fabs(s.mean - 0.5) < 5 * (2 / sqrt(12.0)) / sqrt(60000.0), "mean %g", s.mean);
    CHECK_EQ_INT(cn_init_normal_(t, 2, 0.5), 0);
    check_normal("normal_", t, 2, 0.5);
    CHECK_EQ_INT(cn_init_constant_(t, 3.25), 0);
    s = stats_of(t);
    CHECK(s.min == 3.25 && s.max == 3.25);
    CHECK_EQ_INT(cn_init_zeros_(t), 0);
    CHECK(stats_of(t).max == 0);
    CHECK_EQ_INT(cn_init_ones_(t), 0);
    CHECK(stats_of(t).min == 1);
    /* f64 and f16 tensors and views are filled in place. */
    cn_tensor *d = cn_zeros(CN_F64, CN_SHAPE(100, 100));
    CHECK_EQ_INT(cn_init_normal_(cn_slice(d, 1, 0, CN_END, 2), 0, 1), 0);
    CHECK_EQ_INT(cn_get(d, (int64_t[]){5, 1}), 0);
    CHECK(cn_get(d, (int64_t[]){5, 2}) != 0);
    cn_tensor *h = cn_zeros(CN_F16, CN_SHAPE(64, 64));
    CHECK_EQ_INT(cn_init_uniform_(h, -1, 1), 0);
    CHECK(stats_of(h).max > 0.9);
    /* A parameter (requires a gradient) is filled outside the recorded graph. */
    cn_tensor *p = cn_zeros(CN_F32, CN_SHAPE(10, 10));
    cn_set_requires_grad(p, true);
    CHECK_EQ_INT(cn_init_kaiming_normal_(p, 0, CN_FAN_IN, CN_NL_RELU), 0);
    CHECK(cn_is_leaf(p) && cn_requires_grad(p));
    /* Reproducible from the seed. */
    cn_manual_seed(9);
    cn_init_normal_(t, 0, 1);
    double a = th_at(t, 123);
    cn_manual_seed(9);
    cn_init_normal_(t, 0, 1);
    CHECK(th_at(t, 123) == a);
    CHECK_STATUS_ERROR(cn_init_normal_(cn_zeros(CN_I64, CN_SHAPE(3)), 0, 1), "float tensors");
    CHECK_STATUS_ERROR(cn_init_uniform_(t, 1, 0), "greater than");
    CHECK_STATUS_ERROR(cn_init_xavier_uniform_(cn_zeros(CN_F32, CN_SHAPE(4)), 1), "rank >= 2");
    CHECK_STATUS_ERROR(cn_init_kaiming_uniform_(t, 0, (cn_fan_mode)5, CN_NL_RELU), "CN_FAN_IN");
    /* Empty tensors: nothing to do (PyTorch warns). */
    CHECK_EQ_INT(cn_init_xavier_uniform_(cn_zeros(CN_F32, CN_SHAPE(0, 5)), 1), 0);
}

static void test_xavier_kaiming(void) {
    cn_manual_seed(5);
    /* fan_in = 80 * 9 = 720, fan_out = 40 * 9 = 360 */
    cn_tensor *w = cn_empty(CN_F32, CN_SHAPE(40, 80, 3, 3));
    CHECK_EQ_INT(cn_init_xavier_uniform_(w, 1.5), 0);
    check_uniform("xavier_uniform_", w, 1.5 * sqrt(6.0 / (720 + 360)));
    CHECK_EQ_INT(cn_init_xavier_normal_(w, 0.7), 0);
    check_normal("xavier_normal_", w, 0, 0.7 * sqrt(2.0 / (720 + 360)));
    CHECK_EQ_INT(cn_init_kaiming_uniform_(w, 0, CN_FAN_IN, CN_NL_RELU), 0);
    check_uniform("kaiming_uniform_ relu fan_in", w, sqrt(2.0) * sqrt(3.0 / 720));
    CHECK_EQ_INT(cn_init_kaiming_uniform_(w, 0.1, CN_FAN_OUT, CN_NL_LEAKY_RELU), 0);
    check_uniform("kaiming_uniform_ leaky fan_out", w, sqrt(2 / 1.01) * sqrt(3.0 / 360));
    CHECK_EQ_INT(cn_init_kaiming_normal_(w, 0, CN_FAN_OUT, CN_NL_TANH), 0);
    check_normal("kaiming_normal_ tanh fan_out", w, 0, (5.0 / 3) / sqrt(360.0));
    CHECK_EQ_INT(cn_init_kaiming_normal_(w, 0, CN_FAN_IN, CN_NL_LINEAR), 0);
    check_normal("kaiming_normal_ linear fan_in", w, 0, 1 / sqrt(720.0));
}

/* PyTorch 1.13's defaults: Linear and Conv weights kaiming_uniform(a = sqrt(5)),
 * i.e. U(+-1/sqrt(fan_in)), and biases U(+-1/sqrt(fan_in)). */
static void test_layer_defaults(void) {
    cn_manual_seed(11);
    cn_module *lin = cn_nn_linear(400, 300, true);
    check_uniform("Linear.weight", cn_module_param(lin, "weight"), 1 / sqrt(400.0));
    /* The bias has only 300 elements: bounds only. */
    cn_stats s = stats_of(cn_module_param(lin, "bias"));
    CHECK(s.min >= -0.05 && s.max <= 0.05 && s.max > 0.045 && s.min < -0.045);
    cn_module_free(lin);

    cn_module *conv = cn_nn_conv2d(64, 128, 3, 3, &(cn_conv_opts){.groups = 2}, true);
    double b = 1 / sqrt(32.0 * 9);
    check_uniform("Conv2d.weight", cn_module_param(conv, "weight"), b);
    s = stats_of(cn_module_param(conv, "bias"));
    CHECK(s.min >= -b && s.max <= b && s.max > 0.9 * b);
    cn_module_free(conv);
    cn_module *ct = cn_nn_conv_transpose2d(96, 128, 4, 4, NULL, true);
    check_uniform("ConvTranspose2d.weight", cn_module_param(ct, "weight"), 1 / sqrt(128.0 * 16));
    cn_module_free(ct);
    cn_module *c1 = cn_nn_conv1d(100, 200, 5, NULL, false);
    check_uniform("Conv1d.weight", cn_module_param(c1, "weight"), 1 / sqrt(500.0));
    CHECK(cn_module_param(c1, "bias") == NULL);
    cn_module_free(c1);

    cn_module *lstm = cn_nn_lstm(50, 100, &(cn_rnn_opts){.num_layers = 2});
    cn_tensor **p;
    const char **names;
    int n = cn_module_parameters(lstm, &p, &names);
    CHECK_EQ_INT(n, 8);
    for (int i = 0; i < n; i++) {
        s = stats_of(p[i]);
        CHECK_MSG(s.min >= -0.1 && s.max <= 0.1 && s.max > 0.099, "%s: [%g, %g]", names[i], s.min,
                  s.max);
    }
    check_uniform("LSTM.weight_hh_l1", cn_module_param(lstm, "weight_hh_l1"), 0.1);
    free(p);
    free(names);
    cn_module_free(lstm);

    cn_module *emb = cn_nn_embedding(1000, 64, -1);
    cn_tensor *w = cn_module_param(emb, "weight");
    check_normal("Embedding.weight", cn_narrow(w, 0, 0, 999), 0, 1);
    s = stats_of(cn_narrow(w, 0, 999, 1));
    CHECK_MSG(s.min == 0 && s.max == 0, "the padding row (-1 = 999) must start at zero");
    cn_module_free(emb);

    cn_module *bn = cn_nn_batch_norm2d(5, NULL);
    CHECK(stats_of(cn_module_find(bn, "weight")).min == 1);
    CHECK(stats_of(cn_module_find(bn, "bias")).max == 0);
    CHECK(stats_of(cn_module_find(bn, "running_mean")).max == 0);
    CHECK(stats_of(cn_module_find(bn, "running_var")).min == 1);
    CHECK_EQ_INT(cn_get_int(cn_module_find(bn, "num_batches_tracked"), NULL), 0);
    CHECK(cn_tensor_dtype(cn_module_find(bn, "num_batches_tracked")) == CN_I64);
    cn_module_free(bn);
    cn_module *ln = cn_nn_layer_norm(CN_SHAPE(3, 4), 1e-5, true);
    CHECK(stats_of(cn_module_param(ln, "weight")).min == 1);
    CHECK(stats_of(cn_module_param(ln, "bias")).max == 0);
    CHECK_SHAPE(cn_module_param(ln, "weight"), 3, 4);
    cn_module_free(ln);
}

int main(void) {
    RUN(test_fans_and_gains);
    RUN(test_basic_fills);
    RUN(test_xavier_kaiming);
    RUN(test_layer_defaults);
    return th_summary();
}
