/* PyTorch parity of the module library: every layer and loss of
 * tests/parity/torch_nn.py is built here with the same configuration, its
 * parameters and buffers are loaded by their PyTorch names (so names, order
 * and shapes must match named_parameters() and state_dict()), and its
 * outputs, the gradients of sum_j sum(out_j * cos(k + j)) with respect to
 * the inputs and every parameter, and the buffers after the call (BatchNorm's
 * running statistics) are compared with torch's. Each case is run again as
 * a static graph on placeholders with an unknown batch size (-1), values and
 * gradients against eager. The fixture file comes from CTest's nn_fixtures
 * test (CN_NN_PARITY_FILE). */
#include "fixture_text.h"

#define MAXT 48
#define MAXIN 6
#define NO_STATIC (-2)

typedef struct fixture {
    char name[64];
    int n;
    char key[MAXT][64];
    cn_tensor *t[MAXT];
} fixture;

static cn_tensor *fx_get(const fixture *fx, const char *key) {
    for (int i = 0; i < fx->n; i++)
        if (!strcmp(fx->key[i], key)) return fx->t[i];
    return NULL;
}

/* "KEY dt ndim dims... values..." (after the "t") into the current scope. */
static cn_tensor *read_tensor(FILE *f, char *key) {
    if (fscanf(f, "%63s", key) != 1) return NULL;
    return fx_read_values(f);
}

/* 1: a case was read; 0: end of file; -1: malformed. */
static int read_case(FILE *f, fixture *fx) {
    char word[16];
    fx->n = 0;
    if (fscanf(f, "%15s", word) != 1) return 0;
    if (strcmp(word, "case") || fscanf(f, "%63s", fx->name) != 1) return -1;
    for (;;) {
        if (fscanf(f, "%15s", word) != 1) return -1;
        if (!strcmp(word, "end")) return 1;
        if (strcmp(word, "t") || fx->n == MAXT) return -1;
        if (!(fx->t[fx->n] = read_tensor(f, fx->key[fx->n]))) return -1;
        fx->n++;
    }
}

/* a against reference b: |a - b| <= rtol * (|b| + 0.1 max|b|): f32 sums
 * in a different order differ by a few ulp of the largest terms. */
static bool close_to(const char *cname, const char *what, cn_tensor *a, cn_tensor *b, double rtol) {
    if (!a || !b || cn_numel(a) != cn_numel(b) || cn_ndim(a) != cn_ndim(b)) {
        CHECK_MSG(0, "%s: %s: missing or wrong shape (%s)", cname, what, cn_last_error());
        return false;
    }
    for (int i = 0; i < cn_ndim(a); i++)
        if (cn_shape(a)[i] != cn_shape(b)[i]) {
            CHECK_MSG(0, "%s: %s: axis %d is %" PRId64 ", expected %" PRId64, cname, what, i,
                      cn_shape(a)[i], cn_shape(b)[i]);
            return false;
        }
    int64_t n = cn_numel(b);
    double scale = 0;
    for (int64_t k = 0; k < n; k++) scale = fmax(scale, fabs(th_at(b, k)));
    for (int64_t k = 0; k < n; k++) {
        double x = th_at(a, k), r = th_at(b, k);
        if (!th_close(x, r, rtol, rtol * scale * 0.1 + 1e-30)) {
            CHECK_MSG(0, "%s: %s[%" PRId64 "] = %.9g, expected %.9g", cname, what, k, x, r);
            return false;
        }
    }
    th_checks++;
    return true;
}

/* ---- the cases ---- */

typedef struct inputs {
    int n;
    const char *name[MAXIN];
    cn_tensor *t[MAXIN];
} inputs;

static cn_tensor *in_get(const inputs *in, const char *name) {
    for (int i = 0; i < in->n; i++)
        if (!strcmp(in->name[i], name)) return in->t[i];
    return NULL;
}

typedef cn_module *(*build_fn)(void);

static int run_forward(cn_module *m, const inputs *in, cn_tensor **out) {
    out[0] = cn_module_forward(m, in_get(in, "x"));
    return out[0] ? 1 : -1;
}

static int run_rnn(cn_module *m, const inputs *in, cn_tensor **out) {
    bool lstm = !strcmp(cn_module_type(m), "LSTM");
    int rc = cn_rnn_forward(m, in_get(in, "x"), in_get(in, "h0"), in_get(in, "c0"), &out[0],
                            &out[1], lstm ? &out[2] : NULL);
    return rc < 0 ? -1 : lstm ? 3 : 2;
}

static cn_conv_opts conv_o(int64_t s0, int64_t s1, int64_t p0, int64_t p1, int64_t d0, int64_t d1,
                           int64_t g) {
    return (cn_conv_opts){.stride = {s0, s1}, .padding = {p0, p1}, .dilation = {d0, d1}, .groups = g};
}

static cn_module *b_linear(void) { return cn_nn_linear(5, 4, true); }
static cn_module *b_linear_nobias_3d(void) { return cn_nn_linear(4, 3, false); }
static cn_module *b_conv1d(void) {
    cn_conv_opts o = conv_o(2, 0, 1, 0, 2, 0, 2);
    return cn_nn_conv1d(4, 6, 3, &o, true);
}
static cn_module *b_conv2d_basic(void) {
    cn_conv_opts o = conv_o(1, 1, 1, 1, 1, 1, 1);
    return cn_nn_conv2d(3, 4, 3, 3, &o, true);
}
static cn_module *b_conv2d_sdg(void) {
    cn_conv_opts o = conv_o(2, 1, 1, 2, 2, 1, 2);
    return cn_nn_conv2d(4, 6, 3, 2, &o, true);
}
static cn_module *b_conv2d_depthwise(void) {
    cn_conv_opts o = conv_o(2, 2, 0, 0, 0, 0, 4);
    return cn_nn_conv2d(4, 8, 3, 3, &o, false);
}
static cn_module *b_conv_transpose2d(void) {
    cn_conv_opts o = conv_o(2, 2, 1, 1, 1, 1, 2);
    o.output_padding[0] = o.output_padding[1] = 1;
    return cn_nn_conv_transpose2d(4, 6, 3, 3, &o, true);
}
static cn_module *b_conv_transpose2d_dil(void) {
    cn_conv_opts o = conv_o(1, 2, 0, 1, 2, 1, 1);
    return cn_nn_conv_transpose2d(2, 3, 2, 3, &o, false);
}
static cn_module *b_max_pool2d(void) {
    return cn_nn_max_pool2d(&(cn_pool_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
}
static cn_module *b_max_pool2d_ceil(void) {
    return cn_nn_max_pool2d(&(cn_pool_opts){.kernel = {2, 3}, .stride = {2, 2}, .ceil_mode = true});
}
static cn_module *b_avg_pool2d(void) {
    return cn_nn_avg_pool2d(&(cn_pool_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
}
static cn_module *b_avg_pool2d_nopad(void) {
    return cn_nn_avg_pool2d(&(cn_pool_opts){
        .kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}, .exclude_pad = true});
}
static cn_module *b_adaptive_avg_pool2d(void) { return cn_nn_adaptive_avg_pool2d(3, 2); }
static cn_module *b_bn1d_train(void) { return cn_nn_batch_norm1d(4, NULL); }
static cn_module *b_bn1d_3d_train(void) {
    return cn_nn_batch_norm1d(3, &(cn_batch_norm_opts){.momentum = 0.3});
}
static cn_module *b_bn2d(void) { return cn_nn_batch_norm2d(3, NULL); }
static cn_module *b_bn2d_cumulative(void) {
    return cn_nn_batch_norm2d(2, &(cn_batch_norm_opts){.momentum = -1, .eps = 1e-3});
}
static cn_module *b_bn2d_noaffine_nostats(void) {
    return cn_nn_batch_norm2d(3, &(cn_batch_norm_opts){.no_affine = true, .no_running_stats = true});
}
static cn_module *b_layer_norm(void) { return cn_nn_layer_norm(CN_SHAPE(4, 5), 1e-5, true); }
static cn_module *b_layer_norm_noaffine(void) { return cn_nn_layer_norm(CN_SHAPE(6), 1e-3, false); }
static cn_module *b_embedding(void) { return cn_nn_embedding(10, 4, CN_NO_PADDING); }
static cn_module *b_embedding_pad(void) { return cn_nn_embedding(6, 3, 2); }
static cn_module *b_rnn_tanh(void) {
    return cn_nn_rnn(4, 5, &(cn_rnn_opts){.num_layers = 2, .bidirectional = true});
}
static cn_module *b_rnn_relu_bf(void) {
    return cn_nn_rnn(3, 4, &(cn_rnn_opts){.relu = true, .batch_first = true});
}
static cn_module *b_lstm(void) {
    return cn_nn_lstm(4, 5, &(cn_rnn_opts){.num_layers = 2, .bidirectional = true, .batch_first = true});
}
static cn_module *b_lstm_simple(void) { return cn_nn_lstm(3, 4, NULL); }
static cn_module *b_gru(void) {
    return cn_nn_gru(4, 5, &(cn_rnn_opts){.num_layers = 2, .bidirectional = true, .batch_first = true});
}
static cn_module *b_gru_nobias_unbatched(void) {
    return cn_nn_gru(3, 4, &(cn_rnn_opts){.no_bias = true});
}
static cn_module *b_gru_zero_state(void) { return cn_nn_gru(3, 2, &(cn_rnn_opts){.num_layers = 2}); }
static cn_module *b_sequential(void) {
    cn_module *l[] = {cn_nn_linear(6, 5, true), cn_nn_relu(), cn_nn_linear(5, 3, true), cn_nn_tanh(),
                      cn_nn_flatten(0, -1)};
    return cn_nn_sequential(l, 5);
}
static cn_module *b_activations(void) {
    cn_module *l[] = {cn_nn_gelu(false), cn_nn_silu(),        cn_nn_leaky_relu(0.2),
                      cn_nn_elu(0.5),    cn_nn_sigmoid(),     cn_nn_softplus(2.0, 1.0),
                      cn_nn_log_softmax(1)};
    return cn_nn_sequential(l, 7);
}

static const struct module_case {
    const char *name;
    build_fn build;
    bool rnn;
    bool train;
    int static_axis; /* the axis of x that is unknown (-1) in the static run */
} module_cases[] = {
    {"linear", b_linear, false, true, 0},
    {"linear_nobias_3d", b_linear_nobias_3d, false, true, 0},
    {"conv1d", b_conv1d, false, true, 0},
    {"conv2d_basic", b_conv2d_basic, false, true, 0},
    {"conv2d_sdg", b_conv2d_sdg, false, true, 0},
    {"conv2d_depthwise", b_conv2d_depthwise, false, true, 0},
    {"conv_transpose2d", b_conv_transpose2d, false, true, 0},
    {"conv_transpose2d_dil", b_conv_transpose2d_dil, false, true, 0},
    {"max_pool2d", b_max_pool2d, false, true, 0},
    {"max_pool2d_ceil", b_max_pool2d_ceil, false, true, 0},
    {"avg_pool2d", b_avg_pool2d, false, true, 0},
    {"avg_pool2d_nopad", b_avg_pool2d_nopad, false, true, 0},
    {"adaptive_avg_pool2d", b_adaptive_avg_pool2d, false, true, 0},
    {"bn1d_train", b_bn1d_train, false, true, 0},
    {"bn1d_3d_train", b_bn1d_3d_train, false, true, 0},
    {"bn2d_train", b_bn2d, false, true, 0},
    {"bn2d_eval", b_bn2d, false, false, 0},
    {"bn2d_cumulative", b_bn2d_cumulative, false, true, 0},
    {"bn2d_noaffine_nostats", b_bn2d_noaffine_nostats, false, false, 0},
    {"layer_norm", b_layer_norm, false, true, 0},
    {"layer_norm_noaffine", b_layer_norm_noaffine, false, true, 0},
    {"embedding", b_embedding, false, true, 0},
    {"embedding_pad", b_embedding_pad, false, true, 0},
    {"rnn_tanh", b_rnn_tanh, true, true, 1},
    {"rnn_relu_bf", b_rnn_relu_bf, true, true, 0},
    {"lstm", b_lstm, true, true, 0},
    {"lstm_simple", b_lstm_simple, true, true, 1},
    {"gru", b_gru, true, true, 0},
    {"gru_nobias_unbatched", b_gru_nobias_unbatched, true, true, -1},
    {"gru_zero_state", b_gru_zero_state, true, true, 1},
    {"sequential", b_sequential, false, true, 0},
    {"activations", b_activations, false, true, 0},
};
#define NMODULES (int)(sizeof module_cases / sizeof module_cases[0])

/* Losses: the case name is KIND_REDUCTION[_SMOOTHING]. */
static int run_loss(const char *cname, const inputs *in, cn_tensor **out) {
    const char *reds[3] = {"_mean", "_sum", "_none"};
    const cn_reduction rv[3] = {CN_REDUCTION_MEAN, CN_REDUCTION_SUM, CN_REDUCTION_NONE};
    char kind[64] = "";
    cn_reduction r = CN_REDUCTION_MEAN;
    double ls = 0;
    for (int i = 0; i < 3; i++) {
        const char *p = strstr(cname, reds[i]);
        if (!p) continue;
        snprintf(kind, sizeof kind, "%.*s", (int)(p - cname), cname);
        r = rv[i];
        p += strlen(reds[i]);
        if (*p == '_') ls = atof(p + 1);
    }
    cn_tensor *x = in_get(in, "x"), *t = in_get(in, "target"), *w = in_get(in, "weight");
    cn_tensor *y = NULL;
    if (!strcmp(kind, "mse")) y = cn_mse_loss(x, t, r);
    else if (!strcmp(kind, "l1")) y = cn_l1_loss(x, t, r);
    else if (!strcmp(kind, "ce") || !strcmp(kind, "ce_spatial")) y = cn_cross_entropy(x, t, r, ls);
    else if (!strcmp(kind, "ce_weight_ignore"))
        y = cn_cross_entropy_ex(x, t, &(cn_class_loss_opts){r, ls, w, true, 1});
    else if (!strcmp(kind, "ce_ignore"))
        y = cn_cross_entropy_ex(x, t, &(cn_class_loss_opts){r, ls, NULL, true, 2});
    else if (!strcmp(kind, "ce_probs"))
        y = cn_cross_entropy_ex(x, t, &(cn_class_loss_opts){r, ls, w, false, 0});
    else if (!strcmp(kind, "nll")) y = cn_nll_loss(x, t, r);
    else if (!strcmp(kind, "nll_weight_ignore"))
        y = cn_nll_loss_ex(x, t, &(cn_class_loss_opts){r, 0, w, true, 0});
    else if (!strcmp(kind, "bce_logits")) y = cn_bce_with_logits(x, t, NULL, r);
    else if (!strcmp(kind, "bce_logits_pw")) y = cn_bce_with_logits(x, t, in_get(in, "pos_weight"), r);
    else if (!strcmp(kind, "bce")) y = cn_bce_loss(in_get(in, "p"), t, r);
    else CHECK_MSG(0, "%s: no C counterpart for loss kind \"%s\"", cname, kind);
    out[0] = y;
    return y ? 1 : -1;
}

/* ---- the runner ---- */

static cn_tensor *loss_of(cn_tensor **ys, int ny) {
    cn_tensor *total = NULL;
    for (int j = 0; j < ny; j++) {
        int64_t n = cn_numel(ys[j]);
        cn_tensor *w = cn_reshape(cn_cos(cn_arange(j, (double)n + j, 1, CN_F32)), cn_ndim(ys[j]),
                                  cn_shape(ys[j]));
        cn_tensor *s = cn_sum(cn_mul(ys[j], w), NULL, 0, false);
        total = total ? cn_add(total, s) : s;
    }
    return total;
}

/* One fixture case: a module case (mc) or a loss (mc NULL). */
static int run_case(const fixture *fx, const struct module_case *mc) {
    const char *cname = fx->name;
    cn_module *m = mc ? mc->build() : NULL;
    if (mc && !m) {
        CHECK_MSG(0, "%s: constructor failed: %s", cname, cn_last_error());
        return -1;
    }
    /* Parameters and buffers by name, in PyTorch's order. */
    if (m) {
        cn_module_train(m, mc->train);
        cn_tensor **st;
        const char **sn;
        int ns = cn_module_state(m, &st, &sn);
        int k = 0;
        for (int i = 0; i < fx->n; i++) {
            bool p = !strncmp(fx->key[i], "p:", 2), b = !strncmp(fx->key[i], "b0:", 3);
            if (!p && !b) continue;
            const char *nm = fx->key[i] + (p ? 2 : 3);
            CHECK_MSG(k < ns && !strcmp(sn[k], nm), "%s: state entry %d is \"%s\", PyTorch's is \"%s\"",
                      cname, k, k < ns ? sn[k] : "(none)", nm);
            cn_tensor *t = cn_module_find(m, nm);
            CHECK_MSG(t && cn_ndim(t) == cn_ndim(fx->t[i]) && cn_numel(t) == cn_numel(fx->t[i]),
                      "%s: %s missing or shaped differently", cname, nm);
            cn_no_grad_begin();
            if (t) CHECK(cn_copy_(t, fx->t[i]) == 0);
            cn_no_grad_end();
            k++;
        }
        CHECK_MSG(k == ns, "%s: Chutney has %d state tensors, PyTorch %d", cname, ns, k);
        free(st);
        free(sn);
    }
    inputs in = {0};
    for (int i = 0; i < fx->n && in.n < MAXIN; i++)
        if (!strncmp(fx->key[i], "in:", 3)) {
            in.name[in.n] = fx->key[i] + 3;
            in.t[in.n] = cn_clone(fx->t[i]);
            char gk[80];
            snprintf(gk, sizeof gk, "g:%s", fx->key[i]);
            if (fx_get(fx, gk)) cn_set_requires_grad(in.t[in.n], true);
            in.n++;
        }
    cn_tensor *ys[4];
    int ny = !mc ? run_loss(cname, &in, ys) : mc->rnn ? run_rnn(m, &in, ys) : run_forward(m, &in, ys);
    CHECK_MSG(ny > 0, "%s: forward failed: %s", cname, cn_last_error());
    bool ok = ny > 0;
    for (int j = 0; ok && j < ny; j++) {
        char key[16];
        snprintf(key, sizeof key, "out:%d", j);
        ok = close_to(cname, key, ys[j], fx_get(fx, key), 1e-5);
    }
    /* Gradients w.r.t. the inputs torch differentiated and every parameter. */
    cn_tensor *wrt[MAXT], *grads[MAXT], *ref[MAXT];
    const char *wname[MAXT];
    int nw = 0;
    for (int i = 0; ok && i < fx->n; i++)
        if (!strncmp(fx->key[i], "g:", 2)) {
            const char *k = fx->key[i] + 2;
            wrt[nw] = !strncmp(k, "in:", 3) ? in_get(&in, k + 3) : cn_module_find(m, k + 2);
            ref[nw] = fx->t[i];
            wname[nw++] = fx->key[i];
        }
    if (ok) {
        cn_tensor *loss = loss_of(ys, ny);
        int rc = cn_grad(&loss, NULL, 1, wrt, nw, grads, CN_GRAD_ALLOW_UNUSED);
        CHECK_MSG(rc == 0, "%s: grad: %s", cname, cn_last_error());
        for (int i = 0; rc == 0 && i < nw; i++)
            close_to(cname, wname[i], grads[i] ? grads[i] : cn_zeros_like(ref[i]), ref[i], 1e-5);
    }
    for (int i = 0; ok && i < fx->n; i++)
        if (!strncmp(fx->key[i], "b1:", 3))
            close_to(cname, fx->key[i], cn_module_find(m, fx->key[i] + 3), fx->t[i], 1e-5);

    /* Static: placeholders with the batch axis unknown, same module. */
    if (ok && (!mc || mc->static_axis != NO_STATIC)) {
        cn_graph *g = cn_graph_new();
        inputs ph = in;
        for (int i = 0; i < in.n; i++) {
            int64_t shape[CN_MAX_DIMS];
            int nd = cn_ndim(in.t[i]);
            memcpy(shape, cn_shape(in.t[i]), sizeof(int64_t) * (size_t)nd);
            const char *nm = in.name[i];
            int ax = !mc ? (strcmp(nm, "weight") && strcmp(nm, "pos_weight") ? 0 : -1)
                     : !strcmp(nm, "x") ? mc->static_axis : 1;
            if (ax >= 0 && ax < nd) shape[ax] = -1;
            ph.t[i] = cn_placeholder(g, nm, cn_tensor_dtype(in.t[i]), nd, shape);
            if (cn_requires_grad(in.t[i])) cn_set_requires_grad(ph.t[i], true);
        }
        cn_tensor *sy[4], *sw[MAXT], *sg[MAXT], *outs[4 + MAXT], *res[4 + MAXT];
        int sny = !mc ? run_loss(cname, &ph, sy) : mc->rnn ? run_rnn(m, &ph, sy) : run_forward(m, &ph, sy);
        CHECK_MSG(sny == ny, "%s: static forward failed: %s", cname, cn_last_error());
        if (sny == ny) {
            /* The loss weights must not depend on unknown sizes: feed them. */
            cn_tensor *wph[4], *wval[4], *tot = NULL;
            for (int j = 0; j < ny; j++) {
                wval[j] = cn_reshape(cn_cos(cn_arange(j, (double)cn_numel(ys[j]) + j, 1, CN_F32)),
                                     cn_ndim(ys[j]), cn_shape(ys[j]));
                wph[j] = cn_placeholder(g, "w", CN_F32, cn_ndim(sy[j]), cn_shape(sy[j]));
                cn_tensor *s = cn_sum(cn_mul(sy[j], wph[j]), NULL, 0, false);
                tot = tot ? cn_add(tot, s) : s;
            }
            for (int i = 0; i < nw; i++) {
                const char *k = wname[i] + 2;
                sw[i] = !strncmp(k, "in:", 3) ? in_get(&ph, k + 3) : wrt[i];
            }
            int rc = cn_grad(&tot, NULL, 1, sw, nw, sg, CN_GRAD_ALLOW_UNUSED);
            CHECK_MSG(rc == 0, "%s: static grad: %s", cname, cn_last_error());
            int no = 0;
            for (int j = 0; j < ny; j++) outs[no++] = sy[j];
            for (int i = 0; i < nw; i++)
                if (sg[i]) outs[no++] = sg[i];
            cn_program *p = rc == 0 ? cn_compile(g, outs, no, NULL) : NULL;
            cn_tensor *feedp[MAXIN + 4], *feedv[MAXIN + 4];
            int nf = 0;
            for (int i = 0; i < in.n; i++) {
                feedp[nf] = ph.t[i];
                feedv[nf++] = in.t[i];
            }
            for (int j = 0; j < ny; j++) {
                feedp[nf] = wph[j];
                feedv[nf++] = wval[j];
            }
            rc = p ? cn_run(p, feedp, feedv, nf, res, no) : -1;
            CHECK_MSG(rc == 0, "%s: static run: %s", cname, cn_last_error());
            if (rc == 0) {
                int r = 0;
                for (int j = 0; j < ny; j++) close_to(cname, "static output", res[r++], ys[j], 1e-6);
                for (int i = 0; i < nw; i++)
                    if (sg[i]) close_to(cname, wname[i], res[r++], grads[i], 1e-6);
            }
            cn_program_free(p);
        }
        cn_graph_free(g);
    }
    cn_module_free(m);
    return 0;
}

static void test_nn_parity(void) {
    const char *path = getenv("CN_NN_PARITY_FILE");
    CHECK_MSG(path != NULL, "CN_NN_PARITY_FILE is not set (CTest's nn_fixtures test writes it)");
    FILE *f = path ? fopen(path, "r") : NULL;
    CHECK_MSG(f != NULL, "cannot open %s", path ? path : "(null)");
    if (!f) return;
    int seen_modules = 0, seen = 0;
    fixture *fx = malloc(sizeof *fx);
    for (;;) {
        cn_scope_begin();
        int rc = read_case(f, fx);
        CHECK_MSG(rc >= 0, "fixture file %s is malformed near case %s", path, fx->name);
        if (rc <= 0) {
            cn_scope_end();
            break;
        }
        const struct module_case *mc = NULL;
        for (int i = 0; i < NMODULES; i++)
            if (!strcmp(module_cases[i].name, fx->name)) mc = &module_cases[i];
        seen_modules += mc != NULL;
        run_case(fx, mc);
        seen++;
        cn_scope_end();
    }
    free(fx);
    fclose(f);
    CHECK_MSG(seen_modules == NMODULES, "%d of %d module cases were in the fixtures", seen_modules,
              NMODULES);
    CHECK_MSG(seen > NMODULES + 50, "only %d cases in the fixtures", seen);
}

int main(void) {
    RUN(test_nn_parity);
    return th_summary();
}
