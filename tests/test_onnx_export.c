/* ONNX export: graphs and models exported, imported back and run give what
 * the library computes from the same graph (the reference: every op is
 * checked against naive loops and PyTorch elsewhere). Batch sizes are
 * unknown (-1) at export and given at import, twice with different sizes.
 * With CN_EXPORT_DIR set, every exported model is also written there, with
 * its first inputs and the library's outputs, for onnx.checker and an
 * evaluator written from the ONNX specs (tests/onnx/check_export.py and
 * np_onnx.py, the onnx_export_check test). */
#include "harness.h"

#include "backend/cpu/matmul_dnnl.h" /* autocast's native path, forced */
#include "ops/op.h" /* the full_like op: cn_full_like itself computes eagerly */

#include <sys/stat.h>
#include <unistd.h>

static const char *outdir;

/* Values to feed, by placeholder. */
typedef struct feed {
    cn_tensor *ph, *val;
} feed;

/* Import the exported buffer with the feeds' shapes, run it, compare. */
static void compare_import(const char *name, const void *buf, size_t n, const feed *f, int nf,
                           cn_tensor **ref, int nout, double tol) {
    cn_onnx_input_shape shapes[8];
    for (int i = 0; i < nf; i++) {
        shapes[i].name = cn_get_name(f[i].ph);
        shapes[i].ndim = cn_ndim(f[i].val);
        memcpy(shapes[i].shape, cn_shape(f[i].val), sizeof(int64_t) * (size_t)cn_ndim(f[i].val));
    }
    cn_onnx_load_opts lo = {.shapes = shapes, .nshapes = nf};
    cn_onnx_model *m = cn_onnx_load_buffer(buf, n, NULL, &lo);
    CHECK_MSG(m != NULL, "%s: import failed: %s", name, cn_last_error());
    if (!m) return;
    CHECK_EQ_INT(cn_onnx_num_inputs(m), nf);
    CHECK_EQ_INT(cn_onnx_num_outputs(m), nout);
    cn_tensor *in[8] = {0}, *out[64] = {0};
    for (int i = 0; i < cn_onnx_num_inputs(m) && i < 8; i++)
        for (int k = 0; k < nf; k++)
            if (!strcmp(cn_onnx_input_name(m, i), cn_get_name(f[k].ph))) in[i] = f[k].val;
    int rc = cn_onnx_run(m, in, out);
    CHECK_MSG(rc == 0, "%s: run failed: %s", name, cn_last_error());
    for (int o = 0; rc == 0 && o < nout; o++) {
        cn_tensor *a = out[o], *b = ref[o];
        char sa[128], sb[128];
        cn_shape_str(a, sa, sizeof sa);
        cn_shape_str(b, sb, sizeof sb);
        CHECK_MSG(cn_tensor_dtype(a) == cn_tensor_dtype(b) && !strcmp(sa, sb),
                  "%s output %d: %s %s, the library gives %s %s", name, o,
                  cn_dtype_name(cn_tensor_dtype(a)), sa, cn_dtype_name(cn_tensor_dtype(b)), sb);
        if (strcmp(sa, sb)) continue;
        cn_tensor *da = cn_contiguous(cn_cast(a, CN_F64)), *db = cn_contiguous(cn_cast(b, CN_F64));
        const double *pa = cn_data(da), *pb = cn_data(db);
        int64_t bad = 0, first = -1;
        for (int64_t k = 0; k < cn_numel(da); k++)
            if (!th_close(pa[k], pb[k], tol, tol) && bad++ == 0) first = k;
        CHECK_MSG(bad == 0, "%s output %d: %lld of %lld elements differ, first [%lld]: %.9g vs %.9g",
                  name, o, (long long)bad, (long long)cn_numel(da), (long long)first,
                  first >= 0 ? pa[first] : 0, first >= 0 ? pb[first] : 0);
    }
    cn_onnx_free(m);
}

/* The inputs and the library's outputs, for check_export.py to run the
 * model in its own evaluator (tests/onnx/np_onnx.py) and compare. */
static void save_case(const char *name, cn_tensor **phs, cn_tensor **vals, int nf, cn_tensor **ref,
                      int nout) {
    char path[1400];
    for (int k = 0; k < nf; k++) {
        snprintf(path, sizeof path, "%s/%s.in.%s.npy", outdir, name, cn_get_name(phs[k]));
        CHECK(cn_save_npy(path, vals[k]) == 0);
    }
    for (int o = 0; o < nout; o++) {
        snprintf(path, sizeof path, "%s/%s.out.%d.npy", outdir, name, o);
        CHECK(cn_save_npy(path, ref[o]) == 0);
    }
}

/* Export outs of g, then for each feed set: the library's outputs against
 * the imported model's. f[set * nf + k] feeds placeholder k in set. */
static void roundtrip(const char *name, cn_graph *g, cn_tensor **outs, int nout, const feed *f,
                      int nf, int nsets, const cn_onnx_export_opts *o, double tol) {
    void *buf = NULL;
    size_t n = 0;
    int rc = cn_onnx_export_buffer(g, outs, nout, &buf, &n, o);
    CHECK_MSG(rc == 0, "%s: export failed: %s", name, cn_last_error());
    if (rc) return;
    if (outdir) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s.onnx", outdir, name);
        FILE *fp = fopen(path, "wb");
        CHECK(fp && fwrite(buf, 1, n, fp) == n);
        if (fp) fclose(fp);
    }
    cn_program *p = cn_compile(g, outs, nout, NULL);
    CHECK(p != NULL);
    for (int set = 0; p && set < nsets; set++) {
        cn_scope_begin();
        cn_tensor *phs[8], *vals[8], *ref[64];
        for (int k = 0; k < nf; k++) {
            phs[k] = f[set * nf + k].ph;
            vals[k] = f[set * nf + k].val;
        }
        CHECK(cn_run(p, phs, vals, nf, ref, nout) == 0);
        compare_import(name, buf, n, f + set * nf, nf, ref, nout, tol);
        if (outdir && set == 0) save_case(name, phs, vals, nf, ref, nout);
        cn_scope_end();
    }
    cn_program_free(p);
    free(buf);
}

static cn_tensor *full_like_op(cn_tensor *x, double v, int dtype) {
    cn_attrs a = {0};
    a.f[0] = v;
    a.i[0] = dtype;
    return cn_op_apply(CN_OP_full_like, &x, 1, &a);
}

static cn_tensor *uniform(int ndim, const int64_t *shape, double lo, double hi) {
    return cn_uniform(CN_F32, ndim, shape, lo, hi);
}

/* ---- models ---- */

static void run_model(const char *name, cn_module *m, int ndim, const int64_t *shape) {
    cn_scope_begin();
    cn_module_train(m, false);
    cn_tensor **state = NULL;
    const char **names = NULL;
    int ns = cn_module_state(m, &state, &names);
    cn_graph *g = cn_graph_new();
    int64_t sym[CN_MAX_DIMS];
    memcpy(sym, shape, sizeof(int64_t) * (size_t)ndim);
    sym[0] = -1;
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, ndim, sym);
    cn_tensor *y = cn_module_forward(m, x);
    CHECK(y != NULL);
    int64_t s3[CN_MAX_DIMS], s5[CN_MAX_DIMS];
    memcpy(s3, shape, sizeof s3[0] * (size_t)ndim);
    memcpy(s5, shape, sizeof s5[0] * (size_t)ndim);
    s3[0] = 3;
    s5[0] = 5;
    feed f[2] = {{x, uniform(ndim, s3, -1, 1)}, {x, uniform(ndim, s5, -1, 1)}};
    const char *on[1] = {"logits"};
    cn_onnx_export_opts o = {.output_names = on, .params = state, .param_names = names, .nparams = ns};
    if (y) roundtrip(name, g, &y, 1, f, 1, 2, &o, 1e-5);
    free(state);
    free(names);
    cn_graph_free(g);
    cn_module_free(m);
    cn_scope_end();
}

static void test_models(void) {
    cn_manual_seed(11);
    cn_module *mlp[] = {cn_nn_flatten(1, -1), cn_nn_linear(64, 32, true), cn_nn_relu(),
                        cn_nn_linear(32, 10, true), cn_nn_log_softmax(1)};
    run_model("mlp", cn_nn_sequential(mlp, 5), CN_SHAPE(1, 1, 8, 8));
    cn_conv_opts pad1 = {.padding = {1, 1}};
    cn_pool_opts pool = {.kernel = {2, 2}};
    cn_module *cnn[] = {cn_nn_conv2d(1, 4, 3, 3, &pad1, true), cn_nn_relu(), cn_nn_max_pool2d(&pool),
                        cn_nn_conv2d(4, 8, 3, 3, &pad1, true), cn_nn_relu(), cn_nn_max_pool2d(&pool),
                        cn_nn_flatten(1, -1), cn_nn_linear(32, 10, true)};
    run_model("cnn", cn_nn_sequential(cnn, 8), CN_SHAPE(1, 1, 8, 8));
    cn_rnn_opts bf = {.batch_first = true};
    run_model("lstm", cn_nn_lstm(6, 8, &bf), CN_SHAPE(1, 5, 6));
    cn_rnn_opts two = {.batch_first = true, .num_layers = 2, .bidirectional = true};
    run_model("gru", cn_nn_gru(6, 5, &two), CN_SHAPE(1, 4, 6));
    cn_batch_norm_opts bn = {0};
    cn_module *norm[] = {cn_nn_conv2d(3, 4, 3, 3, &pad1, false), cn_nn_batch_norm2d(4, &bn),
                         cn_nn_gelu(false), cn_nn_layer_norm(2, (int64_t[]){6, 6}, 1e-5, true),
                         cn_nn_adaptive_avg_pool2d(1, 1), cn_nn_flatten(1, -1), cn_nn_silu()};
    run_model("norms", cn_nn_sequential(norm, 7), CN_SHAPE(1, 3, 6, 6));
}

/* Token ids -> embedding -> one causal self-attention head. */
static void test_attention(void) {
    cn_scope_begin();
    cn_manual_seed(5);
    cn_module *emb = cn_nn_embedding(11, 8, -1), *q = cn_nn_linear(8, 8, false),
              *k = cn_nn_linear(8, 8, false), *v = cn_nn_linear(8, 8, true);
    cn_graph *g = cn_graph_new();
    cn_tensor *ids = cn_placeholder(g, "ids", CN_I64, CN_SHAPE(-1, 6));
    cn_tensor *e = cn_module_forward(emb, ids);
    cn_tensor *s = cn_div_scalar(cn_matmul(cn_module_forward(q, e), cn_transpose(cn_module_forward(k, e), 1, 2)), sqrt(8.0));
    cn_tensor *mask = cn_tril(cn_ones(CN_BOOL, CN_SHAPE(6, 6)), 0);
    s = cn_where(mask, s, cn_scalar(CN_F32, -1e9));
    cn_tensor *y = cn_matmul(cn_softmax(s, -1), cn_module_forward(v, e));
    feed f[2] = {{ids, cn_randint(0, 11, CN_I64, CN_SHAPE(2, 6))}, {ids, cn_randint(0, 11, CN_I64, CN_SHAPE(4, 6))}};
    roundtrip("attention", g, &y, 1, f, 1, 2, NULL, 1e-5);
    cn_graph_free(g);
    cn_module_free(emb);
    cn_module_free(q);
    cn_module_free(k);
    cn_module_free(v);
    cn_scope_end();
}

/* ---- op zoos: every output is one op (or a short chain) ---- */

static void test_elementwise(void) {
    cn_scope_begin();
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 7));
    cn_tensor *y = cn_placeholder(g, "y", CN_F32, CN_SHAPE(-1, 7));
    cn_tensor *ax = cn_add_scalar(cn_abs(x), 0.5);
    cn_tensor *o[] = {
        cn_neg(x), cn_abs(x), cn_sign(x), cn_exp(x), cn_log(ax), cn_log1p(ax), cn_expm1(x),
        cn_sqrt(ax), cn_rsqrt(ax), cn_square(x), cn_reciprocal(ax), cn_sin(x), cn_cos(x),
        cn_tanh(x), cn_sigmoid(x), cn_relu(x), cn_leaky_relu(x, 0.2), cn_elu(x, 0.7),
        cn_gelu(x, false), cn_gelu(x, true), cn_silu(x), cn_softplus(x, 1, 20),
        cn_softplus(x, 2, 3), cn_erf(x), cn_floor(x), cn_ceil(x), cn_round(cn_mul_scalar(x, 2)),
        cn_clamp(x, -0.5, 0.75), cn_clamp(x, -INFINITY, 0.25), cn_add(x, y), cn_sub(x, y),
        cn_mul(x, y), cn_div(x, y), cn_pow(ax, y), cn_maximum(x, y), cn_minimum(x, y),
        cn_eq(cn_round(x), cn_round(y)), cn_ne(cn_round(x), cn_round(y)), cn_lt(x, y),
        cn_le(x, y), cn_gt(x, y), cn_ge(x, y), cn_logical_and(cn_gt(x, y), cn_gt(x, cn_scalar(CN_F32, 0))),
        cn_logical_or(x, cn_round(y)), cn_logical_xor(cn_lt(x, y), cn_round(y)),
        cn_logical_not(cn_round(x)), cn_where(cn_gt(x, y), x, cn_mul_scalar(y, 3)),
        cn_add(cn_gt(x, y), cn_lt(x, y)), cn_mul(cn_cast(x, CN_I32), cn_cast(y, CN_I32)),
        cn_relu(cn_cast(x, CN_I64)), cn_clamp(cn_cast(cn_mul_scalar(x, 3), CN_I32), -1.5, 2.5),
        cn_add(cn_cast(cn_add_scalar(cn_abs(x), 1), CN_U8), cn_cast(cn_abs(y), CN_U8)),
        cn_cast(cn_cast(x, CN_F16), CN_F32), cn_cast(x, CN_F64), cn_cast(x, CN_BOOL),
    };
    int n = (int)(sizeof o / sizeof o[0]);
    feed f[4] = {{x, uniform(CN_SHAPE(3, 7), -2, 2)}, {y, uniform(CN_SHAPE(3, 7), 0.25, 2)},
                 {x, uniform(CN_SHAPE(1, 7), -2, 2)}, {y, uniform(CN_SHAPE(1, 7), 0.25, 2)}};
    roundtrip("elementwise", g, o, n, f, 2, 2, NULL, 1e-5);
    cn_graph_free(g);
    cn_scope_end();
}

static void test_shapes_reductions(void) {
    cn_scope_begin();
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 3, 4, 5));
    cn_tensor *idx = cn_placeholder(g, "idx", CN_I64, CN_SHAPE(-1, 3, 2, 5));
    cn_tensor *flat = cn_reshape(x, CN_SHAPE(-1, 60));
    cn_tensor *x3 = cn_reshape(x, CN_SHAPE(-1, 12, 5));
    cn_tensor *pieces[2] = {cn_slice(x, 2, 0, 2, 1), cn_slice(x, 2, -1, CN_END, 1)};
    cn_tensor *o[] = {
        cn_sum(x, CN_AXES(1, 3), false), cn_mean(x, CN_AXES(2), true), cn_prod(cn_mul_scalar(x, 0.5), CN_AXES(3), false),
        cn_max(x, CN_AXES(1), false), cn_min(x, CN_AXES(-1), true), cn_var(x, CN_AXES(2, 3), 1, false),
        cn_std(x, CN_AXES(1), 0, true), cn_logsumexp(x, CN_AXES(3), false), cn_norm(x, 2, CN_AXES(3), false),
        cn_norm(x, 1, CN_AXES(2), true), cn_norm(x, INFINITY, CN_AXES(1), false), cn_norm(x, 3, CN_AXES(3), false),
        cn_sum(cn_cast(cn_gt(x, cn_scalar(CN_F32, 0)), CN_I32), CN_AXES(1), false),
        cn_argmax(x, 2, false), cn_argmin(x, -1, true), cn_argmax(flat, 1, true),
        cn_softmax(x, 1), cn_log_softmax(x, -1), cn_concat(pieces, 2, 2),
        cn_gather(x, 2, idx), cn_index_select(x, 3, cn_from_data(CN_I64, CN_SHAPE(3), (int64_t[]){4, 0, 4})),
        cn_scatter_add(full_like_op(x, 0, -1), 2, idx, cn_slice(x, 2, 0, 2, 1)),
        cn_pad(x, (int64_t[]){1, 2, -1, 1}, 4, CN_PAD_CONSTANT, 0.5), cn_pad(x, (int64_t[]){2, 1}, 2, CN_PAD_REFLECT, 0),
        cn_pad(x, (int64_t[]){1, 0, 0, 2}, 4, CN_PAD_REPLICATE, 0), cn_one_hot(cn_argmax(x, 3, false), 5),
        cn_cumsum(x, 2), cn_cumsum(cn_cast(cn_mul_scalar(x, 4), CN_I64), 3), cn_tril(x, 1), cn_triu(x, -1),
        cn_slice(x, 3, CN_END, CN_END, -1), cn_slice(x, 3, 3, 0, -2), cn_slice(x, 1, 1, CN_END, 1),
        cn_expand(cn_slice(x, 1, 0, 1, 1), CN_SHAPE(-1, 3, 4, 5)), cn_permute(x, (int[]){0, 3, 1, 2}, 4),
        cn_transpose(x3, 1, 2), full_like_op(x, 2.5, -1), full_like_op(cn_argmax(x, 1, false), 1, CN_BOOL),
        cn_matmul(x3, cn_transpose(x3, 1, 2)), cn_matmul(x, cn_ones(CN_F32, CN_SHAPE(5))),
        cn_squeeze(cn_unsqueeze(cn_narrow(x, 3, 2, 1), 0), 0), cn_contiguous(cn_transpose(x, 1, 3)),
    };
    int n = (int)(sizeof o / sizeof o[0]);
    feed f[4] = {{x, uniform(CN_SHAPE(2, 3, 4, 5), -2, 2)}, {idx, cn_randint(0, 4, CN_I64, CN_SHAPE(2, 3, 2, 5))},
                 {x, uniform(CN_SHAPE(3, 3, 4, 5), -2, 2)}, {idx, cn_randint(0, 4, CN_I64, CN_SHAPE(3, 3, 2, 5))}};
    roundtrip("shapes_reductions", g, o, n, f, 2, 2, NULL, 1e-5);
    cn_graph_free(g);
    cn_scope_end();
}

static void test_conv_pool(void) {
    cn_scope_begin();
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "image", CN_F32, CN_SHAPE(-1, 4, 9, 9));
    cn_tensor *w = cn_randn(CN_F32, CN_SHAPE(6, 2, 3, 3)), *b = cn_randn(CN_F32, CN_SHAPE(6));
    cn_tensor *wt = cn_randn(CN_F32, CN_SHAPE(4, 3, 3, 3));
    cn_conv_opts grouped = {.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}, .groups = 2};
    cn_conv_opts tr = {.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 0}};
    cn_pool_opts ceil = {.kernel = {2, 2}, .ceil_mode = true};
    cn_pool_opts dil = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .dilation = {2, 1}};
    cn_pool_opts avg = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .exclude_pad = true};
    cn_pool_opts avg_in = {.kernel = {3, 2}, .stride = {1, 2}, .padding = {1, 1}};
    cn_tensor *o[] = {
        cn_conv2d(x, w, b, &grouped), cn_conv2d(x, cn_permute(wt, (int[]){1, 0, 2, 3}, 4), NULL, NULL),
        cn_conv_transpose2d(x, wt, cn_ones(CN_F32, CN_SHAPE(3)), &tr), cn_max_pool2d(x, &ceil),
        cn_max_pool2d(x, &dil), cn_avg_pool2d(x, &avg), cn_avg_pool2d(x, &avg_in),
        cn_adaptive_avg_pool2d(cn_slice(x, 2, 0, 8, 1), 2, 3), cn_adaptive_avg_pool2d(x, 1, 1),
    };
    int n = (int)(sizeof o / sizeof o[0]);
    feed f[2] = {{x, cn_randn(CN_F32, CN_SHAPE(2, 4, 9, 9))}, {x, cn_randn(CN_F32, CN_SHAPE(1, 4, 9, 9))}};
    roundtrip("conv_pool", g, o, n, f, 1, 2, NULL, 1e-4);
    cn_graph_free(g);
    cn_scope_end();
}

/* A graph traced under bf16 autocast with the products on the native
 * path (forced, so on any CPU): their steps take the rounded bf16 inputs
 * to an f32 result, which ONNX's Conv and MatMul do not; the file widens
 * those inputs with Casts (onnx.checker's strict type inference in
 * onnx_export_check refused it before), and computes the program's
 * numbers up to the order of the sums. */
static void test_autocast_bf16(void) {
    cn_scope_begin();
    cn_tensor *w = cn_randn(CN_F32, CN_SHAPE(4, 3, 3, 3)), *b = cn_randn(CN_F32, CN_SHAPE(4));
    cn_tensor *wl = cn_randn(CN_F32, CN_SHAPE(5, 256));
    const cn_conv_opts pad1 = {.padding = {1, 1}};
    cn_autocast_native_mode_set(1);
    cn_graph *g = cn_graph_new();
    cn_autocast_begin(CN_BF16);
    cn_tensor *x = cn_placeholder(g, "image", CN_F32, CN_SHAPE(-1, 3, 8, 8));
    cn_tensor *h = cn_tanh(cn_conv2d(x, w, b, &pad1));
    cn_tensor *o = cn_matmul(cn_reshape(h, CN_SHAPE(-1, 256)), cn_mT(wl));
    cn_autocast_end();
    feed f[2] = {{x, cn_randn(CN_F32, CN_SHAPE(2, 3, 8, 8))}, {x, cn_randn(CN_F32, CN_SHAPE(3, 3, 8, 8))}};
    roundtrip("autocast_bf16", g, &o, 1, f, 1, 2, NULL, 1e-4);
    cn_autocast_native_mode_set(-1);
    cn_graph_free(g);
    cn_scope_end();
}

/* ---- files, names and errors ---- */

static void test_file_and_names(void) {
    cn_scope_begin();
    char path[] = "/tmp/cn-export-XXXXXX";
    CHECK(mkdtemp(path) != NULL);
    char file[256], missing[256];
    snprintf(file, sizeof file, "%s/m.onnx", path);
    snprintf(missing, sizeof missing, "%s/no/such/dir/m.onnx", path);
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "in put", CN_F32, CN_SHAPE(-1, 2));
    cn_tensor *w = cn_from_data(CN_F32, CN_SHAPE(2, 2), (float[]){1, 2, 3, 4});
    cn_set_name(w, "w");
    cn_tensor *outs[3] = {cn_matmul(x, w), x, cn_matmul(x, w)};
    const char *names[3] = {"first", "same input", "again"};
    cn_onnx_export_opts o = {.output_names = names};
    CHECK(cn_onnx_export(g, outs, 3, file, &o) == 0);
    cn_onnx_model *m = cn_onnx_load(file, NULL);
    CHECK(m != NULL);
    if (m) {
        CHECK(!strcmp(cn_onnx_input_name(m, 0), "in put"));
        CHECK_EQ_INT(cn_shape(cn_onnx_input(m, 0))[0], -1); /* declared symbolic */
        for (int i = 0; i < 3; i++) CHECK(!strcmp(cn_onnx_output_name(m, i), names[i]));
        CHECK_EQ_INT(cn_onnx_num_params(m), 4);
        cn_tensor *in = cn_from_data(CN_F32, CN_SHAPE(1, 2), (float[]){1, 1}), *r[3];
        CHECK(cn_onnx_run(m, &in, r) == 0);
        CHECK_CLOSE(((float *)cn_data(cn_contiguous(r[2])))[1], 6, 0, 0);
        CHECK_CLOSE(((float *)cn_data(cn_contiguous(r[1])))[0], 1, 0, 0);
        cn_onnx_free(m);
    }
    /* A constant output (no inputs at all) and an input named like the
     * exporter's own value names. */
    cn_graph *g3 = cn_graph_new();
    cn_tensor *t0 = cn_placeholder(g3, "t0", CN_F32, CN_SHAPE(2));
    cn_tensor *pair[2] = {cn_exp(t0), cn_from_data(CN_I32, CN_SHAPE(3), (int32_t[]){7, 8, 9})};
    feed f3[1] = {{t0, cn_from_data(CN_F32, CN_SHAPE(2), (float[]){0, 1})}};
    roundtrip("constant_output", g3, pair, 2, f3, 1, 1, NULL, 1e-6);
    cn_graph_free(g3);
    /* A directory that does not exist: an error naming it, no file. */
    CHECK(cn_onnx_export(g, outs, 1, missing, NULL) < 0);
    CHECK(strstr(cn_last_error(), "no/such/dir") != NULL);
    const char *dup[2] = {"y", "y"};
    o.output_names = dup;
    CHECK(cn_onnx_export(g, outs, 2, file, &o) < 0);
    CHECK(strstr(cn_last_error(), "'y' is given to two outputs") != NULL);
    const char *clash[1] = {"in put"};
    o.output_names = clash;
    CHECK(cn_onnx_export(g, outs, 1, file, &o) < 0);
    cn_graph *g2 = cn_graph_new();
    cn_tensor *z = cn_relu(cn_placeholder(g2, "z", CN_F32, CN_SHAPE(2)));
    CHECK(cn_onnx_export(g, &z, 1, file, NULL) < 0);
    CHECK(strstr(cn_last_error(), "another graph") != NULL);
    CHECK(cn_onnx_export(NULL, &z, 1, file, NULL) < 0);
    CHECK(cn_onnx_export(g2, &z, 1, NULL, NULL) < 0);
    cn_graph_free(g2);
    cn_graph_free(g);
    unlink(file);
    rmdir(path);
    cn_scope_end();
}

static void test_unsupported(void) {
    cn_scope_begin();
    char path[] = "/tmp/cn-export-XXXXXX";
    CHECK(mkdtemp(path) != NULL);
    char file[256];
    snprintf(file, sizeof file, "%s/m.onnx", path);
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 4));
    cn_tensor *r = cn_bernoulli(cn_sigmoid(x));
    CHECK(cn_onnx_export(g, &r, 1, file, NULL) == CN_EUNSUPPORTED);
    CHECK_MSG(strstr(cn_last_error(), "export: bernoulli is not supported (a random op") != NULL,
              "message: %s", cn_last_error());
    CHECK(access(file, F_OK) != 0); /* nothing written */
    cn_tensor *img = cn_placeholder(g, "img", CN_F32, CN_SHAPE(-1, 1, 5, 5));
    cn_tensor *idx = cn_max_pool2d_indices(img, &(cn_pool_opts){.kernel = {2, 2}});
    CHECK(cn_onnx_export(g, &idx, 1, file, NULL) == CN_EUNSUPPORTED);
    CHECK(strstr(cn_last_error(), "export: max_pool2d_indices is not supported (") != NULL);
    /* Ceil-mode windows PyTorch drops and ONNX would keep. */
    cn_tensor *p = cn_avg_pool2d(img, &(cn_pool_opts){.kernel = {2, 2}, .ceil_mode = true});
    CHECK(cn_onnx_export(g, &p, 1, file, NULL) == CN_EUNSUPPORTED);
    CHECK(strstr(cn_last_error(), "export: avg_pool2d is not supported (") != NULL);
    cn_graph_free(g);
    rmdir(path);
    cn_scope_end();
}

int main(void) {
    outdir = getenv("CN_EXPORT_DIR");
    cn_onnx_model *probe = cn_onnx_load_buffer("", 0, NULL, NULL);
    if (!probe && strstr(cn_last_error(), "built without ONNX")) {
        printf("skipped: built without ONNX support\n");
        return 77;
    }
    cn_onnx_free(probe);
    if (outdir) mkdir(outdir, 0777); /* may exist */
    RUN(test_models);
    RUN(test_attention);
    RUN(test_elementwise);
    RUN(test_shapes_reductions);
    RUN(test_conv_pool);
    RUN(test_autocast_bf16);
    RUN(test_file_and_names);
    RUN(test_unsupported);
    return th_summary();
}
