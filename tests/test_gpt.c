/* The transformer modules (src/nn/attention.c, rms_norm.c, transformer.c,
 * gpt.c, gpt_cache.c, gpt_generate.c): MultiheadAttention's values and
 * gradients against attention written head by head in f64 with plain ops
 * (masks of every kind, causal, cross-attention, kdim/vdim, batch_first,
 * unbatched, the weights), against PyTorch 1.13's
 * F.multi_head_attention_forward with the same weights; RMSNorm against a
 * loop in double; the GPT's shapes, causality, learning on a repetitive
 * text, a compiled training step against eager steps, its static forward,
 * the KV cache against the full forward, generation with the cache against
 * recomputation and the seed's reproducibility; the optimiser's
 * per-parameter weight decay and in-step clipping; the errors. */
#include "torch_ref.h"

#include <float.h>

/* A float leaf of t's values in f64 that requires a gradient. */
static cn_tensor *leaf64(cn_tensor *t) {
    cn_tensor *c = cn_clone(cn_cast(cn_detach(t), CN_F64));
    cn_set_requires_grad(c, true);
    return c;
}

static cn_tensor *leaf32(cn_tensor *t) {
    cn_tensor *c = cn_clone(cn_cast(cn_detach(t), CN_F32));
    cn_set_requires_grad(c, true);
    return c;
}

static void check_close(const char *what, cn_tensor *got, cn_tensor *want, double rtol,
                        double atol) {
    tr_check_close(what, got, want, rtol, atol);
}

/* ---- MultiheadAttention against attention written head by head ---- */

typedef struct naive_in {
    cn_tensor *q, *k, *v;      /* [L, N, E], [S, N, kdim], [S, N, vdim], f64 leaves */
    cn_tensor *wq, *wk, *wv;   /* [E, E], [E, kdim], [E, vdim] */
    cn_tensor *b;              /* [3E] or NULL */
    cn_tensor *wo, *bo;        /* [E, E], [E] or NULL */
    cn_tensor *wpacked;        /* the leaf wq, wk, wv are views of, or NULL */
    int H;
    cn_tensor *kpm, *am;       /* PyTorch's conventions; NULL for none */
    bool causal;
} naive_in;

/* The additive mask of batch n, [L, S] f64, from the masks on the host. */
static cn_tensor *host_mask(const naive_in *in, int64_t n, int64_t L, int64_t S) {
    double *m = calloc((size_t)(L * S), sizeof *m);
    for (int64_t i = 0; i < L; i++)
        for (int64_t j = 0; j < S; j++) {
            double a = 0;
            if (in->causal && j > i) a = -INFINITY;
            if (in->kpm) {
                double x = cn_get(in->kpm, (int64_t[]){n, j});
                if (cn_tensor_dtype(in->kpm) == CN_BOOL) a += x != 0 ? -INFINITY : 0;
                else a += x;
            }
            if (in->am) {
                double x = cn_ndim(in->am) == 2 ? cn_get(in->am, (int64_t[]){i, j}) : NAN;
                if (cn_tensor_dtype(in->am) == CN_BOOL) a += x != 0 ? -INFINITY : 0;
                else a += x;
            }
            m[i * S + j] = a;
        }
    cn_tensor *t = cn_from_data(CN_F64, 2, (int64_t[]){L, S}, m);
    free(m);
    return t;
}

static cn_tensor *naive_mha(const naive_in *in, cn_tensor **weights) {
    int64_t L = cn_shape(in->q)[0], N = cn_shape(in->q)[1], S = cn_shape(in->k)[0];
    int64_t E = cn_shape(in->wq)[0], d = E / in->H;
    cn_tensor *outs[16], *ws[16];
    for (int64_t n = 0; n < N; n++) {
        cn_tensor *qn = cn_squeeze(cn_narrow(in->q, 1, n, 1), 1);
        cn_tensor *kn = cn_squeeze(cn_narrow(in->k, 1, n, 1), 1);
        cn_tensor *vn = cn_squeeze(cn_narrow(in->v, 1, n, 1), 1);
        cn_tensor *mask = host_mask(in, n, L, S), *heads[16], *wsum = NULL;
        for (int h = 0; h < in->H; h++) {
            cn_tensor *Q = cn_matmul(qn, cn_mT(cn_narrow(in->wq, 0, h * d, d)));
            cn_tensor *K = cn_matmul(kn, cn_mT(cn_narrow(in->wk, 0, h * d, d)));
            cn_tensor *V = cn_matmul(vn, cn_mT(cn_narrow(in->wv, 0, h * d, d)));
            if (in->b) {
                Q = cn_add(Q, cn_narrow(in->b, 0, h * d, d));
                K = cn_add(K, cn_narrow(in->b, 0, E + h * d, d));
                V = cn_add(V, cn_narrow(in->b, 0, 2 * E + h * d, d));
            }
            cn_tensor *s = cn_div_scalar(cn_matmul(Q, cn_mT(K)), sqrt((double)d));
            cn_tensor *P = cn_softmax(cn_add(s, mask), 1);
            heads[h] = cn_matmul(P, V);
            wsum = wsum ? cn_add(wsum, P) : P;
        }
        cn_tensor *o = cn_matmul(cn_concat(heads, in->H, 1), cn_mT(in->wo));
        if (in->bo) o = cn_add(o, in->bo);
        outs[n] = o;
        ws[n] = cn_div_scalar(wsum, in->H);
    }
    if (weights) *weights = cn_stack(ws, (int)N, 0);
    return cn_stack(outs, (int)N, 1);
}

/* The f64 leaves of m's projection parameters for naive_in. */
static void naive_params(cn_module *m, int64_t E, naive_in *in) {
    cn_tensor *w = cn_module_param(m, "in_proj_weight");
    if (w) {
        cn_tensor *w64 = in->wpacked = leaf64(w);
        in->wq = cn_narrow(w64, 0, 0, E);
        in->wk = cn_narrow(w64, 0, E, E);
        in->wv = cn_narrow(w64, 0, 2 * E, E);
    } else {
        in->wq = leaf64(cn_module_param(m, "q_proj_weight"));
        in->wk = leaf64(cn_module_param(m, "k_proj_weight"));
        in->wv = leaf64(cn_module_param(m, "v_proj_weight"));
    }
    cn_tensor *b = cn_module_param(m, "in_proj_bias");
    in->b = b ? leaf64(b) : NULL;
    in->wo = leaf64(cn_module_find(m, "out_proj.weight"));
    cn_clear_error();
    cn_tensor *bo = cn_module_param(cn_module_child(m, "out_proj"), "bias");
    in->bo = bo ? leaf64(bo) : NULL;
}

/* Random non-zero biases (PyTorch starts them at zero, which would hide a
 * bias applied to the wrong head). */
static void randomise_biases(cn_module *m) {
    cn_tensor *b = cn_module_param(m, "in_proj_bias");
    if (b) cn_init_uniform_(b, -0.5, 0.5);
    cn_tensor *bo = cn_module_param(cn_module_child(m, "out_proj"), "bias");
    if (bo) cn_init_uniform_(bo, -0.5, 0.5);
}

typedef struct mha_case {
    const char *name;
    int64_t L, S, N, E, H, kdim, vdim;
    bool self, kpm_bool, kpm_float, am_bool, am_float, causal, need_weights, no_bias;
} mha_case;

/* Values and the gradients of sum(out * G) with respect to query, key,
 * value and every parameter, against the naive attention in f64. */
static void run_mha_case(const mha_case *c) {
    cn_manual_seed(11);
    cn_mha_opts mo = {.kdim = c->kdim, .vdim = c->vdim, .no_bias = c->no_bias};
    cn_module *m = cn_nn_multihead_attention(c->E, c->H, &mo);
    CHECK_MSG(m, "%s: %s", c->name, cn_last_error());
    if (!m) return;
    randomise_biases(m);
    int64_t kd = c->kdim ? c->kdim : c->E, vd = c->vdim ? c->vdim : c->E;
    cn_tensor *q = leaf32(th_random(CN_F32, 3, (int64_t[]){c->L, c->N, c->E}, -1, 1, TH_CONTIG, NULL));
    cn_tensor *k = c->self ? q : leaf32(th_random(CN_F32, 3, (int64_t[]){c->S, c->N, kd}, -1, 1, TH_TRANSPOSED, NULL));
    cn_tensor *v = c->self ? q : leaf32(th_random(CN_F32, 3, (int64_t[]){c->S, c->N, vd}, -1, 1, TH_CONTIG, NULL));
    int64_t S = c->self ? c->L : c->S;
    naive_in in = {.H = (int)c->H, .causal = c->causal};
    in.q = leaf64(q);
    in.k = c->self ? in.q : leaf64(k);
    in.v = c->self ? in.q : leaf64(v);
    naive_params(m, c->E, &in);
    cn_mha_forward_opts fo = {.is_causal = c->causal, .need_weights = c->need_weights};
    if (c->kpm_bool || c->kpm_float) {
        /* Pad the last key of batch 1 and the first of batch 0: no row is
         * left without a key. */
        double *kv = calloc((size_t)(c->N * S), sizeof *kv);
        for (int64_t n = 0; n < c->N; n++)
            for (int64_t j = 0; j < S; j++)
                kv[n * S + j] = c->kpm_float ? th_uniform(-2, 1) : (n == 1 && j == S - 1) || (n == 0 && j == 1);
        cn_tensor *t = cn_from_data(CN_F64, 2, (int64_t[]){c->N, S}, kv);
        fo.key_padding_mask = c->kpm_bool ? cn_cast(t, CN_BOOL) : cn_cast(t, CN_F32);
        in.kpm = fo.key_padding_mask;
        free(kv);
    }
    if (c->am_bool || c->am_float) {
        double *av = calloc((size_t)(c->L * S), sizeof *av);
        for (int64_t i = 0; i < c->L; i++)
            for (int64_t j = 0; j < S; j++)
                av[i * S + j] = c->am_float ? th_uniform(-1, 1) : (j == 2 && i != 2);
        cn_tensor *t = cn_from_data(CN_F64, 2, (int64_t[]){c->L, S}, av);
        fo.attn_mask = c->am_bool ? cn_cast(t, CN_BOOL) : cn_cast(t, CN_F32);
        in.am = fo.attn_mask;
        free(av);
    }
    cn_tensor *out = NULL, *w = NULL, *wref = NULL;
    CHECK_MSG(cn_mha_forward(m, q, k, v, &fo, &out, &w) == 0, "%s: %s", c->name, cn_last_error());
    cn_tensor *ref = naive_mha(&in, &wref);
    char what[160];
    snprintf(what, sizeof what, "%s: output", c->name);
    check_close(what, out, ref, 1e-4, 2e-5);
    if (c->need_weights) {
        snprintf(what, sizeof what, "%s: weights", c->name);
        check_close(what, w, wref, 1e-4, 1e-6);
    } else {
        CHECK(w == NULL);
    }
    if (!out) return;
    cn_tensor *G = th_random(CN_F64, 3, cn_shape(out), -1, 1, TH_CONTIG, NULL);
    cn_tensor *loss = cn_sum(cn_mul(out, cn_cast(G, CN_F32)), NULL, 0, false);
    cn_tensor *loss_ref = cn_sum(cn_mul(ref, G), NULL, 0, false);
    cn_tensor **params;
    const char **names;
    int np = cn_module_parameters(m, &params, &names);
    cn_tensor *xs[16], *xr[16], *gs[16], *gr[16];
    int n = 0;
    xs[n] = q, xr[n++] = in.q;
    if (!c->self) {
        xs[n] = k, xr[n++] = in.k;
        xs[n] = v, xr[n++] = in.v;
    }
    int first_param = n;
    for (int i = 0; i < np; i++) {
        xs[n] = params[i];
        const char *s = names[i];
        if (!strcmp(s, "in_proj_weight")) xr[n] = in.wpacked;
        else if (!strcmp(s, "q_proj_weight")) xr[n] = in.wq;
        else if (!strcmp(s, "k_proj_weight")) xr[n] = in.wk;
        else if (!strcmp(s, "v_proj_weight")) xr[n] = in.wv;
        else if (!strcmp(s, "in_proj_bias")) xr[n] = in.b;
        else if (!strcmp(s, "out_proj.weight")) xr[n] = in.wo;
        else xr[n] = in.bo;
        n++;
    }
    CHECK_EQ_INT(cn_grad(&loss, NULL, 1, xs, n, gs, 0), 0);
    CHECK_EQ_INT(cn_grad(&loss_ref, NULL, 1, xr, n, gr, 0), 0);
    for (int i = 0; i < n; i++) {
        snprintf(what, sizeof what, "%s: gradient of %s", c->name,
                 i < first_param ? (i == 0 ? "query" : i == 1 ? "key" : "value")
                                 : names[i - first_param]);
        check_close(what, gs[i], gr[i], 1e-3, 1e-4);
    }
    free(params);
    free(names);
    cn_module_free(m);
}

static void test_mha_naive(void) {
    th_seed(21);
    static const mha_case cases[] = {
        {"self", 4, 4, 2, 8, 2, 0, 0, true},
        {"cross, bool masks", 5, 7, 2, 8, 2, 0, 0, false, true, false, true},
        {"cross, float masks", 5, 7, 2, 8, 4, 0, 0, false, false, true, false, true},
        {"bool kpm + float am, weights", 5, 7, 2, 8, 2, 0, 0, false, true, false, false, true,
         false, true},
        {"causal", 6, 6, 2, 8, 2, 0, 0, true, false, false, false, false, true},
        {"causal + kpm", 6, 6, 2, 8, 2, 0, 0, true, true, false, false, false, true},
        {"causal, weights", 6, 6, 2, 12, 3, 0, 0, true, false, false, false, false, true, true},
        {"kdim, vdim", 3, 5, 2, 8, 2, 6, 10, false, true},
        {"no bias", 4, 4, 2, 8, 2, 0, 0, true, false, false, false, false, false, false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cn_scope_begin();
        cn_clear_error();
        run_mha_case(&cases[i]);
        cn_scope_end();
    }
}

/* batch_first and unbatched inputs give the same values as [L, N, E];
 * the module's forward is self-attention; per-head weights; a 3-D mask. */
static void test_mha_layouts(void) {
    cn_manual_seed(4);
    cn_module *a = cn_nn_multihead_attention(8, 2, NULL);
    cn_module *b = cn_nn_multihead_attention(8, 2, &(cn_mha_opts){.batch_first = true});
    cn_tensor **pa, **pb;
    int n = cn_module_parameters(a, &pa, NULL);
    CHECK_EQ_INT(cn_module_parameters(b, &pb, NULL), n);
    randomise_biases(a);
    cn_no_grad_begin();
    for (int i = 0; i < n; i++) CHECK_EQ_INT(cn_copy_(pb[i], pa[i]), 0);
    cn_no_grad_end();
    cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(5, 3, 8)), *y, *yb, *yu, *w, *wh;
    CHECK_EQ_INT(cn_mha_forward(a, x, x, x, NULL, &y, NULL), 0);
    CHECK(cn_allclose(y, cn_module_forward(a, x), 1e-6, 1e-6));
    cn_tensor *xb = cn_contiguous(cn_transpose(x, 0, 1));
    CHECK_EQ_INT(cn_mha_forward(b, xb, xb, xb, NULL, &yb, NULL), 0);
    CHECK(cn_allclose(yb, cn_transpose(y, 0, 1), 1e-5, 1e-6));
    cn_tensor *x1 = cn_squeeze(cn_narrow(x, 1, 2, 1), 1);
    CHECK_EQ_INT(cn_mha_forward(a, x1, x1, x1, NULL, &yu, NULL), 0);
    CHECK_SHAPE(yu, 5, 8);
    CHECK(cn_allclose(yu, cn_squeeze(cn_narrow(y, 1, 2, 1), 1), 1e-5, 1e-6));
    /* Weights: averaged [N, L, S] and per head [N, H, L, S]; the average
     * of the per-head ones; each row sums to 1. */
    cn_mha_forward_opts o = {.need_weights = true};
    CHECK_EQ_INT(cn_mha_forward(a, x, x, x, &o, &y, &w), 0);
    o.per_head_weights = true;
    CHECK_EQ_INT(cn_mha_forward(a, x, x, x, &o, &y, &wh), 0);
    CHECK_SHAPE(w, 3, 5, 5);
    CHECK_SHAPE(wh, 3, 2, 5, 5);
    CHECK(cn_allclose(w, cn_mean(wh, CN_AXES(1), false), 1e-6, 1e-7));
    CHECK(cn_allclose(cn_sum(w, CN_AXES(2), false), cn_ones(CN_F32, CN_SHAPE(3, 5)), 1e-5, 1e-6));
    /* A 3-D bool mask [N H, L, S] equal in every (n, h) to a 2-D one. */
    cn_tensor *m2 = cn_gt(cn_rand(CN_F32, CN_SHAPE(5, 5)), cn_scalar(CN_F32, 0.7));
    m2 = cn_logical_and(m2, cn_logical_not(cn_cast(cn_eye(5, 5, CN_F32), CN_BOOL))); /* every row keeps its diagonal */
    cn_tensor *m3 = cn_contiguous(cn_expand(cn_unsqueeze(m2, 0), 3, (int64_t[]){6, 5, 5}));
    cn_tensor *y2, *y3;
    CHECK_EQ_INT(cn_mha_forward(a, x, x, x, &(cn_mha_forward_opts){.attn_mask = m2}, &y2, NULL), 0);
    CHECK_EQ_INT(cn_mha_forward(a, x, x, x, &(cn_mha_forward_opts){.attn_mask = m3}, &y3, NULL), 0);
    CHECK(cn_allclose(y2, y3, 1e-6, 1e-7));
    CHECK(!cn_allclose(y2, y, 1e-3, 1e-4));
    free(pa);
    free(pb);
    cn_module_free(a);
    cn_module_free(b);
}

/* The same weights through PyTorch 1.13's F.multi_head_attention_forward. */
static void test_mha_torch(void) {
    cn_manual_seed(9);
    int64_t L = 4, S = 6, N = 2, E = 8, H = 2;
    cn_module *m = cn_nn_multihead_attention(E, H, NULL);
    randomise_biases(m);
    cn_tensor *q = cn_randn(CN_F32, CN_SHAPE(L, N, E)), *k = cn_randn(CN_F32, CN_SHAPE(S, N, E));
    cn_tensor *v = cn_randn(CN_F32, CN_SHAPE(S, N, E));
    double kv[12] = {0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    cn_tensor *kpm = cn_cast(cn_from_data(CN_F64, CN_SHAPE(2, 6), kv), CN_BOOL);
    cn_tensor *am = cn_uniform(CN_F32, CN_SHAPE(L, S), -1, 1);
    cn_tensor *args[9] = {q, k, v, cn_module_param(m, "in_proj_weight"),
                          cn_module_param(m, "in_proj_bias"), cn_module_find(m, "out_proj.weight"),
                          cn_module_find(m, "out_proj.bias"), kpm, am};
    tr_begin();
    int c0 = tr_add("F.multi_head_attention_forward(t0, t1, t2, 8, 2, t3, t4, None, None, False, "
                    "0.0, t5, t6, training=False, key_padding_mask=t7.bool(), need_weights=False, "
                    "attn_mask=t8)[0]", 9, args);
    int c1 = tr_add("F.multi_head_attention_forward(t0, t1, t2, 8, 2, t3, t4, None, None, False, "
                    "0.0, t5, t6, training=False, key_padding_mask=t7.bool(), need_weights=True, "
                    "attn_mask=t8)[1]", 9, args);
    int c2 = tr_add("F.multi_head_attention_forward(t0, t0, t0, 8, 2, t3, t4, None, None, False, "
                    "0.0, t5, t6, training=False, need_weights=False)[0]", 9, args);
    tr_run();
    cn_tensor *y, *w, *ys;
    cn_mha_forward_opts o = {.key_padding_mask = kpm, .attn_mask = am};
    CHECK_EQ_INT(cn_mha_forward(m, q, k, v, &o, &y, NULL), 0);
    tr_check_close("torch: masked cross-attention", y, tr_result(c0), 1e-4, 1e-5);
    o.need_weights = true;
    CHECK_EQ_INT(cn_mha_forward(m, q, k, v, &o, &y, &w), 0);
    tr_check_close("torch: masked cross-attention, weights path", y, tr_result(c0), 1e-4, 1e-5);
    tr_check_close("torch: the weights", w, tr_result(c1), 1e-4, 1e-6);
    CHECK_EQ_INT(cn_mha_forward(m, q, q, q, NULL, &ys, NULL), 0);
    tr_check_close("torch: self-attention", ys, tr_result(c2), 1e-4, 1e-5);
    tr_end();
    cn_module_free(m);
}

/* ---- RMSNorm ---- */

static void test_rms_norm(void) {
    th_seed(5);
    for (int variant = 0; variant < 3; variant++) {
        cn_scope_begin();
        int nd = variant == 2 ? 2 : 1;
        int64_t D = variant == 2 ? 12 : 5;
        double eps = variant == 1 ? 1e-2 : 0;
        cn_module *m = cn_nn_rms_norm(nd, variant == 2 ? (int64_t[]){3, 4} : (int64_t[]){5}, eps,
                                      variant != 1);
        CHECK(m);
        cn_tensor *w = cn_module_param(m, "weight");
        CHECK((w != NULL) == (variant != 1));
        if (w) cn_init_uniform_(w, 0.5, 1.5);
        cn_tensor *x = leaf32(th_random(CN_F32, 3, variant == 2 ? (int64_t[]){2, 3, 4} : (int64_t[]){2, 3, 5},
                                        -2, 2, TH_TRANSPOSED, NULL));
        cn_tensor *y = cn_module_forward(m, x);
        cn_tensor *G = th_random(CN_F32, 3, cn_shape(x), -1, 1, TH_CONTIG, NULL);
        cn_tensor *gs[2];
        cn_tensor *xs[2] = {x, w};
        CHECK_EQ_INT(cn_grad((cn_tensor *[]){cn_sum(cn_mul(y, G), NULL, 0, false)}, NULL, 1, xs,
                             w ? 2 : 1, gs, 0),
                     0);
        double e = eps > 0 ? eps : FLT_EPSILON;
        int64_t rows = cn_numel(x) / D;
        double *gw = calloc((size_t)D, sizeof *gw);
        int bad = 0;
        for (int64_t r = 0; r < rows; r++) {
            double ss = 0, sgwx = 0;
            for (int64_t j = 0; j < D; j++) {
                double xv = th_at(x, r * D + j);
                ss += xv * xv;
            }
            double inv = 1 / sqrt(ss / (double)D + e);
            for (int64_t j = 0; j < D; j++) {
                double wv = w ? th_at(w, j) : 1, g = th_at(G, r * D + j), xv = th_at(x, r * D + j);
                sgwx += g * wv * xv;
                gw[j] += g * xv * inv;
                if (!th_close(th_at(y, r * D + j), xv * inv * wv, 1e-5, 1e-6)) bad++;
            }
            for (int64_t j = 0; j < D; j++) {
                double wv = w ? th_at(w, j) : 1, g = th_at(G, r * D + j), xv = th_at(x, r * D + j);
                double want = wv * g * inv - xv * inv * inv * inv * sgwx / (double)D;
                if (!th_close(th_at(gs[0], r * D + j), want, 1e-4, 1e-5)) bad++;
            }
        }
        for (int64_t j = 0; w && j < D; j++)
            if (!th_close(th_at(gs[1], j), gw[j], 1e-4, 1e-5)) bad++;
        CHECK_MSG(bad == 0, "RMSNorm variant %d: %d values or gradients differ", variant, bad);
        free(gw);
        cn_module_free(m);
        cn_scope_end();
    }
    CHECK_ERROR(cn_nn_rms_norm(1, (int64_t[]){-1}, 0, true), "negative size");
    cn_module *m = cn_nn_rms_norm(1, (int64_t[]){4}, 0, true);
    CHECK_ERROR(cn_module_forward(m, cn_zeros(CN_F32, CN_SHAPE(2, 3))), "normalized_shape");
    cn_module_free(m);
}

/* ---- GPT ---- */

static cn_gpt_config tiny_config(void) {
    return (cn_gpt_config){.vocab_size = 16, .context_length = 16, .n_layer = 2, .n_head = 2,
                           .n_embd = 16};
}

static cn_tensor *ids_of(const int64_t *v, int64_t B, int64_t T) {
    return cn_from_data(CN_I64, 2, (int64_t[]){B, T}, v);
}

static void test_gpt_structure(void) {
    cn_manual_seed(1);
    cn_gpt_config cfg = tiny_config();
    cn_module *g = cn_nn_gpt(&cfg);
    CHECK(g);
    cn_gpt_config back;
    CHECK_EQ_INT(cn_gpt_get_config(g, &back), 0);
    CHECK_EQ_INT(back.n_embd, 16);
    /* nanoGPT's names; the head tied: no parameter of its own. */
    const char **names;
    cn_tensor **p;
    int n = cn_module_parameters(g, &p, &names);
    CHECK_EQ_INT(n, 2 + 2 * 12 + 2);
    CHECK(n > 3 && !strcmp(names[0], "wte.weight") && !strcmp(names[1], "wpe.weight"));
    CHECK(cn_module_find(g, "h.1.attn.in_proj_weight") && cn_module_find(g, "h.0.mlp.c_fc.weight"));
    CHECK(cn_module_find(g, "h.0.attn.out_proj.weight") && cn_module_find(g, "ln_f.bias"));
    /* GPT-2's initialisation: std 0.02, residual projections 0.02 / sqrt(2 L). */
    cn_stats s;
    cn_tensor_stats(cn_module_find(g, "h.0.mlp.c_fc.weight"), &s);
    CHECK_CLOSE(s.std, 0.02, 0.15, 0);
    cn_tensor_stats(cn_module_find(g, "h.1.mlp.c_proj.weight"), &s);
    CHECK_CLOSE(s.std, 0.01, 0.15, 0);
    cn_tensor_stats(cn_module_find(g, "h.0.attn.in_proj_bias"), &s);
    CHECK(s.min == 0 && s.max == 0);
    cn_tensor_stats(cn_module_find(g, "h.0.ln_1.weight"), &s);
    CHECK(s.min == 1 && s.max == 1);
    free(p);
    free(names);
    /* Shapes, and causality: a later token changes no earlier logits. */
    int64_t v[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0};
    cn_tensor *a = cn_module_forward(g, ids_of(v, 2, 8));
    CHECK_SHAPE(a, 2, 8, 16);
    v[5] = 9;
    v[8 + 2] = 0;
    cn_tensor *b = cn_module_forward(g, ids_of(v, 2, 8));
    CHECK(cn_equal(cn_narrow(cn_narrow(a, 0, 0, 1), 1, 0, 5), cn_narrow(cn_narrow(b, 0, 0, 1), 1, 0, 5)));
    CHECK(!cn_allclose(cn_narrow(cn_narrow(a, 0, 0, 1), 1, 5, 3), cn_narrow(cn_narrow(b, 0, 0, 1), 1, 5, 3), 1e-4, 1e-5));
    CHECK(cn_equal(cn_narrow(cn_narrow(a, 0, 1, 1), 1, 0, 2), cn_narrow(cn_narrow(b, 0, 1, 1), 1, 0, 2)));
    /* A static graph (unknown batch) equals eager. */
    cn_module_train(g, false);
    cn_graph *gr = cn_graph_new();
    cn_tensor *ph = cn_placeholder(gr, "ids", CN_I64, CN_SHAPE(-1, 8));
    cn_tensor *sy = cn_module_forward(g, ph);
    CHECK_MSG(sy, "trace: %s", cn_last_error());
    CHECK_SHAPE(sy, -1, 8, 16);
    cn_program *prog = sy ? cn_compile(gr, &sy, 1, NULL) : NULL;
    CHECK(prog);
    for (int64_t B = 1; prog && B <= 2; B++) {
        cn_tensor *ids = ids_of(v, B, 8), *out;
        CHECK_EQ_INT(cn_run(prog, &ph, &ids, 1, &out, 1), 0);
        CHECK(cn_allclose(out, cn_module_forward(g, ids), 1e-5, 1e-6));
    }
    cn_program_free(prog);
    cn_graph_free(gr);
    /* Errors. */
    CHECK_ERROR(cn_module_forward(g, cn_zeros(CN_F32, CN_SHAPE(1, 4))), "integer token ids");
    CHECK_ERROR(cn_module_forward(g, cn_zeros(CN_I64, CN_SHAPE(1, 17))), "context_length 16");
    cn_gpt_config badc = cfg;
    badc.n_head = 3;
    CHECK_ERROR(cn_nn_gpt(&badc), "divisible by n_head");
    CHECK_ERROR(cn_nn_gpt(NULL), "config is NULL");
    CHECK_STATUS_ERROR(cn_gpt_get_config(cn_module_child(g, "ln_f"), &back), "not a GPT");
    cn_module_free(g);
}

/* The repetitive text of the learning tests: period 7 over 16 tokens. */
static void pattern(int64_t *v, int64_t n, int64_t offset) {
    static const int64_t cyc[7] = {3, 1, 4, 1, 5, 9, 2};
    for (int64_t i = 0; i < n; i++) v[i] = cyc[(i + offset) % 7];
}

static cn_optimizer *gpt_adamw(cn_module *g) {
    cn_tensor **p;
    int n = cn_module_parameters(g, &p, NULL);
    cn_optimizer *o = cn_adamw(p, n, &(cn_adam_opts){.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95,
                                                     .weight_decay = 0.1});
    for (int i = 0; i < n; i++)
        if (cn_ndim(p[i]) < 2) cn_optimizer_set_param_weight_decay(o, i, 0);
    cn_optimizer_set_clip_grad_norm(o, 1.0);
    free(p);
    return o;
}

static cn_tensor *lm_loss(cn_tensor *logits, cn_tensor *targets) {
    return cn_cross_entropy(cn_reshape(logits, 2, (int64_t[]){-1, 16}),
                            cn_reshape(targets, 1, (int64_t[]){-1}), CN_REDUCTION_MEAN, 0);
}

/* A tiny GPT learns a repetitive text: the loss falls far below chance
 * (with learned positions, or rotary ones). */
static void gpt_learns(bool rope) {
    cn_manual_seed(2);
    cn_module *g = cn_nn_gpt(&(cn_gpt_config){.vocab_size = 16, .context_length = 16, .n_layer = 2,
                                              .n_head = 2, .n_embd = 16, .dropout = 0.1,
                                              .rope = rope});
    cn_optimizer *opt = gpt_adamw(g);
    int64_t v[4 * 17];
    double first = 0, last = 0;
    for (int step = 0; step < 60; step++) {
        cn_scope_begin();
        for (int b = 0; b < 4; b++) pattern(v + b * 17, 17, step * 3 + b);
        cn_tensor *all = cn_from_data(CN_I64, CN_SHAPE(4, 17), v);
        cn_optimizer_zero_grad(opt);
        cn_tensor *loss = lm_loss(cn_module_forward(g, cn_narrow(all, 1, 0, 16)), cn_narrow(all, 1, 1, 16));
        CHECK_EQ_INT(cn_backward(loss, NULL), 0);
        CHECK_EQ_INT(cn_optimizer_step(opt), 0);
        if (step == 0) first = cn_item(loss);
        last = cn_item(loss);
        cn_scope_end();
    }
    CHECK_MSG(first > 2.3 && last < 1.0, "loss %g -> %g: the model (rope %d) did not learn the "
              "pattern", first, last, rope);
    CHECK(isfinite(cn_optimizer_last_grad_norm(opt)));
    cn_optimizer_free(opt);
    cn_module_free(g);
}
static void test_gpt_learns(void) { gpt_learns(false); }
static void test_gpt_rope_learns(void) { gpt_learns(true); }

/* Three compiled training steps (clipping and per-parameter weight decay
 * inside the step) equal three eager ones. */
static void gpt_static_step(bool rope) {
    cn_module *g[2];
    cn_tensor **p[2];
    int n = 0;
    int64_t v[3 * 17];
    pattern(v, 3 * 17, 0);
    for (int i = 0; i < 3 * 17; i += 5) v[i] = (v[i] + i) % 16;
    cn_tensor *all = cn_from_data(CN_I64, CN_SHAPE(3, 17), v);
    cn_tensor *ids = cn_contiguous(cn_narrow(all, 1, 0, 16)), *tg = cn_contiguous(cn_narrow(all, 1, 1, 16));
    double losses[2][3];
    for (int mode = 0; mode < 2; mode++) {
        cn_manual_seed(8);
        cn_gpt_config cfg = tiny_config();
        cfg.rope = rope;
        g[mode] = cn_nn_gpt(&cfg);
        n = cn_module_parameters(g[mode], &p[mode], NULL);
        cn_optimizer *opt = gpt_adamw(g[mode]);
        /* A low clip so it acts. */
        cn_optimizer_set_clip_grad_norm(opt, 0.5);
        if (mode == 0) {
            for (int s = 0; s < 3; s++) {
                cn_scope_begin();
                cn_optimizer_zero_grad(opt);
                cn_tensor *loss = lm_loss(cn_module_forward(g[0], ids), tg);
                CHECK_EQ_INT(cn_backward(loss, NULL), 0);
                CHECK_EQ_INT(cn_optimizer_step(opt), 0);
                losses[0][s] = cn_item(loss);
                cn_scope_end();
            }
        } else {
            cn_graph *gr = cn_graph_new();
            cn_tensor *ph[2] = {cn_placeholder(gr, "ids", CN_I64, CN_SHAPE(-1, 16)),
                                cn_placeholder(gr, "targets", CN_I64, CN_SHAPE(-1, 16))};
            cn_tensor *loss = lm_loss(cn_module_forward(g[1], ph[0]), ph[1]);
            cn_program *prog = loss ? cn_compile_train_step(gr, &loss, 1, opt, NULL) : NULL;
            CHECK_MSG(prog, "compile_train_step: %s", cn_last_error());
            cn_tensor *vals[2] = {ids, tg}, *out;
            for (int s = 0; s < 3 && prog; s++) {
                cn_scope_begin();
                CHECK_EQ_INT(cn_run(prog, ph, vals, 2, &out, 1), 0);
                losses[1][s] = cn_item(out);
                cn_scope_end();
            }
            cn_program_free(prog);
            cn_graph_free(gr);
        }
        CHECK(cn_optimizer_last_grad_norm(opt) > 0.5); /* clipping did act */
        cn_optimizer_free(opt);
    }
    for (int s = 0; s < 3; s++) CHECK_CLOSE(losses[1][s], losses[0][s], 1e-5, 1e-6);
    for (int i = 0; i < n; i++)
        CHECK_MSG(cn_allclose(p[0][i], p[1][i], 1e-4, 1e-6),
                  "parameter %d after 3 steps: static differs from eager", i);
    for (int mode = 0; mode < 2; mode++) {
        free(p[mode]);
        cn_module_free(g[mode]);
    }
}
static void test_gpt_static_step(void) { gpt_static_step(false); }
static void test_gpt_rope_static_step(void) { gpt_static_step(true); }

/* Per-parameter weight decay: a parameter with 0 is updated as by Adam, one
 * with the optimiser's decay as AdamW. */
static void test_param_weight_decay(void) {
    cn_tensor *a = cn_ones(CN_F32, CN_SHAPE(3)), *b = cn_ones(CN_F32, CN_SHAPE(3));
    cn_tensor *c = cn_ones(CN_F32, CN_SHAPE(3));
    cn_set_requires_grad(a, true);
    cn_set_requires_grad(b, true);
    cn_set_requires_grad(c, true);
    cn_tensor *ps[3] = {a, b, c};
    cn_optimizer *o = cn_adamw(ps, 3, &(cn_adam_opts){.lr = 0.1, .weight_decay = 0.5});
    CHECK_EQ_INT(cn_optimizer_set_param_weight_decay(o, 1, 0), 0);
    CHECK_STATUS_ERROR(cn_optimizer_set_param_weight_decay(o, 3, 0), "parameter 3");
    cn_optimizer_zero_grad(o);
    cn_backward(cn_sum(cn_add(cn_add(a, b), c), NULL, 0, false), NULL);
    CHECK_EQ_INT(cn_optimizer_step(o), 0);
    /* Adam's first step moves by lr; AdamW's first multiplies by 1 - lr wd. */
    CHECK_CLOSE(cn_get(a, (int64_t[]){0}), 1 * (1 - 0.05) - 0.1, 1e-6, 1e-6);
    CHECK_CLOSE(cn_get(b, (int64_t[]){0}), 1 - 0.1, 1e-6, 1e-6);
    CHECK_CLOSE(cn_get(c, (int64_t[]){0}), 1 * (1 - 0.05) - 0.1, 1e-6, 1e-6);
    CHECK_STATUS_ERROR(cn_optimizer_set_clip_grad_norm(o, -1), "max_norm");
    CHECK(isnan(cn_optimizer_last_grad_norm(o)));
    cn_optimizer_free(o);
}

/* The KV cache gives the full forward's logits, prompt at once or token
 * by token, in a batch; generation with it equals recomputation. With
 * rope, the cached rows are turned at their offsets. */
static void gpt_cache(bool rope) {
    cn_manual_seed(6);
    cn_gpt_config cfg = tiny_config();
    cfg.rope = rope;
    cn_module *g = cn_nn_gpt(&cfg);
    cn_module_train(g, false);
    int64_t v[2 * 12];
    for (int i = 0; i < 24; i++) v[i] = (i * 7 + 3) % 16;
    cn_tensor *ids = ids_of(v, 2, 12);
    cn_tensor *full = cn_module_forward(g, ids);
    cn_gpt_cache *c = cn_gpt_cache_new(g, 2);
    CHECK(c);
    /* 5 positions at once, then 1, 1, then 5 (an offset causal mask). */
    int64_t pieces[4] = {5, 1, 1, 5}, at = 0;
    for (int k = 0; k < 4; k++) {
        cn_tensor *lg = cn_gpt_forward_cached(g, c, cn_narrow(ids, 1, at, pieces[k]));
        CHECK_MSG(lg, "cached forward: %s", cn_last_error());
        CHECK(cn_allclose(lg, cn_narrow(full, 1, at, pieces[k]), 1e-5, 1e-5));
        at += pieces[k];
        CHECK_EQ_INT(cn_gpt_cache_length(c), at);
    }
    CHECK_ERROR(cn_gpt_forward_cached(g, c, cn_narrow(ids, 1, 0, 5)), "reset the cache");
    cn_gpt_cache_reset(c);
    CHECK_EQ_INT(cn_gpt_cache_length(c), 0);
    CHECK_ERROR(cn_gpt_forward_cached(g, c, cn_zeros(CN_I64, CN_SHAPE(3, 2))), "[2, T]");
    cn_gpt_cache_free(c);
    CHECK(!g->training);
    /* Generation: greedy and sampled, past the context (the window
     * restarts), with the cache and without: the same tokens. */
    int64_t prompt[3] = {3, 1, 4}, a[40], b[40], s1[40], s2[40], s3[40];
    cn_gpt_generate_opts go = {0};
    CHECK_EQ_INT(cn_gpt_generate(g, prompt, 3, 40, &go, a), 0);
    go.no_cache = true;
    CHECK_EQ_INT(cn_gpt_generate(g, prompt, 3, 40, &go, b), 0);
    int same = 0;
    for (int i = 0; i < 40; i++) same += a[i] == b[i];
    CHECK_MSG(same == 40, "greedy: %d of 40 tokens equal with and without the cache", same);
    go = (cn_gpt_generate_opts){.temperature = 1.5, .top_k = 8, .top_p = 0.9, .seed = 42};
    CHECK_EQ_INT(cn_gpt_generate(g, prompt, 3, 40, &go, s1), 0);
    CHECK_EQ_INT(cn_gpt_generate(g, prompt, 3, 40, &go, s2), 0);
    go.no_cache = true;
    CHECK_EQ_INT(cn_gpt_generate(g, prompt, 3, 40, &go, s3), 0);
    int rep = 0, nocache = 0, distinct = 0;
    for (int i = 0; i < 40; i++) {
        rep += s1[i] == s2[i];
        nocache += s1[i] == s3[i];
        distinct += s1[i] != a[i];
    }
    CHECK_MSG(rep == 40 && nocache == 40, "seeded sampling: %d and %d of 40 equal", rep, nocache);
    CHECK(distinct > 0);
    go = (cn_gpt_generate_opts){.temperature = 1.5, .seed = 43};
    CHECK_EQ_INT(cn_gpt_generate(g, prompt, 3, 40, &go, s2), 0);
    int other = 0;
    for (int i = 0; i < 40; i++) other += s1[i] != s2[i];
    CHECK(other > 0);
    /* Errors. */
    CHECK_STATUS_ERROR(cn_gpt_generate(g, prompt, 0, 4, NULL, a), "at least one token");
    CHECK_STATUS_ERROR(cn_gpt_generate(g, (int64_t[]){16}, 1, 4, NULL, a), "outside the vocabulary");
    CHECK_STATUS_ERROR(cn_gpt_generate(cn_module_child(g, "ln_f"), prompt, 3, 4, NULL, a), "not a GPT");
    cn_module_free(g);
}
static void test_gpt_cache(void) { gpt_cache(false); }
static void test_gpt_rope_cache(void) { gpt_cache(true); }

/* With rope there is no wpe (context x n_embd fewer parameters) and the
 * head size must be even. */
static void test_gpt_rope_structure(void) {
    cn_manual_seed(3);
    cn_gpt_config cfg = tiny_config();
    cfg.rope = true;
    cn_module *g = cn_nn_gpt(&cfg);
    CHECK(g && !cn_module_child(g, "wpe") && cn_module_child(g, "wte"));
    cn_gpt_config back;
    CHECK(g && cn_gpt_get_config(g, &back) == 0 && back.rope);
    cn_gpt_config lc = tiny_config();
    cn_module *learned = cn_nn_gpt(&lc);
    CHECK_EQ_INT(cn_module_num_params(learned) - cn_module_num_params(g),
                 lc.context_length * lc.n_embd);
    cn_module_free(learned);
    cn_module_free(g);
    cfg.n_embd = 18; /* head size 9 */
    cfg.n_head = 2;
    CHECK_ERROR(cn_nn_gpt(&cfg), "even head size");
}

static void test_mha_errors(void) {
    CHECK_ERROR(cn_nn_multihead_attention(10, 3, NULL), "divisible by num_heads");
    CHECK_ERROR(cn_nn_multihead_attention(8, 2, &(cn_mha_opts){.dropout = 2}), "dropout");
    cn_module *m = cn_nn_multihead_attention(8, 2, NULL);
    cn_tensor *x = cn_zeros(CN_F32, CN_SHAPE(4, 2, 8)), *y;
    CHECK_STATUS_ERROR(cn_mha_forward(m, cn_zeros(CN_F32, CN_SHAPE(4, 2, 6)), x, x, NULL, &y, NULL),
                       "query");
    CHECK_STATUS_ERROR(cn_mha_forward(m, x, cn_zeros(CN_F32, CN_SHAPE(5, 3, 8)), cn_zeros(CN_F32, CN_SHAPE(5, 3, 8)), NULL, &y, NULL),
                       "same sequence length and batch");
    cn_mha_forward_opts o = {.key_padding_mask = cn_zeros(CN_BOOL, CN_SHAPE(2, 5))};
    CHECK_STATUS_ERROR(cn_mha_forward(m, x, x, x, &o, &y, NULL), "key_padding_mask");
    o = (cn_mha_forward_opts){.attn_mask = cn_zeros(CN_BOOL, CN_SHAPE(3, 4, 4))};
    CHECK_STATUS_ERROR(cn_mha_forward(m, x, x, x, &o, &y, NULL), "attn_mask");
    o = (cn_mha_forward_opts){.attn_mask = cn_zeros(CN_I64, CN_SHAPE(4, 4))};
    CHECK_STATUS_ERROR(cn_mha_forward(m, x, x, x, &o, &y, NULL), "bool or float");
    CHECK_STATUS_ERROR(cn_mha_forward(cn_module_child(m, "out_proj"), x, x, x, NULL, &y, NULL),
                       "not a MultiheadAttention");
    cn_module_free(m);
    CHECK_ERROR(cn_nn_transformer_block(8, 3, NULL), "divisible");
    cn_module *b = cn_nn_transformer_block(8, 2, NULL);
    CHECK_ERROR(cn_module_forward(b, cn_zeros(CN_F32, CN_SHAPE(2, 8))), "[N, T, 8]");
    cn_module_free(b);
}

int main(void) {
    cn_set_num_threads(2);
    RUN(test_mha_naive);
    RUN(test_mha_layouts);
    RUN(test_mha_torch);
    RUN(test_mha_errors);
    RUN(test_rms_norm);
    RUN(test_gpt_structure);
    RUN(test_gpt_learns);
    RUN(test_gpt_static_step);
    RUN(test_param_weight_decay);
    RUN(test_gpt_cache);
    RUN(test_gpt_rope_learns);
    RUN(test_gpt_rope_static_step);
    RUN(test_gpt_rope_cache);
    RUN(test_gpt_rope_structure);
    return th_summary();
}
