/* Fused scaled dot-product attention (src/ops/attention.c, the CPU kernel
 * src/backend/cpu/attention.c): values and gradients against a naive loop
 * in double (masks, causal, broadcast batch axes, L != S, Ev != E, a long
 * causal sequence through many tiles), finite differences (the gradient
 * cases of grad_cases_attention.h, which test_grad and test_backends run
 * too), PyTorch 1.13's explicit softmax(q k^T scale + mask) v in f32, a
 * static graph against eager, dropout (reproducible, the expected keep
 * fraction, gradients through the same bits), the memory bound, ONNX
 * export and the errors. */
#include "gradcheck.h"
#include "ops/op.h"
#include "torch_ref.h"

#include "grad_cases_attention.h"

/* ---- the reference: attention in double, loop by loop ---- */

typedef struct ref {
    /* inputs */
    cn_tensor *q, *k, *v, *mask; /* mask: NULL, bool or float */
    bool causal;
    double scale; /* <= 0: 1 / sqrt(E) */
    double p;     /* dropout, with keep[(b L + i) S + j] */
    const uint8_t *keep;
    /* shapes */
    int nb;
    int64_t bsh[CN_MAX_DIMS], B, L, S, E, Ev;
    /* results: y [B, L, Ev] and lse [B, L]; the gradients of
     * sum(y * w) + sum(lse * wl) in each input's own shape */
    double *y, *lse, *dq, *dk, *dv, *dm;
} ref;

static const double *host_f64(cn_tensor *t) {
    return t ? cn_data(cn_contiguous(cn_cast(cn_detach(t), CN_F64))) : NULL;
}

/* The flat index of the batch matrix of t that batch index b reads
 * (t's batch axes right-aligned against the result's, size 1 broadcast). */
static int64_t batch_of(const cn_tensor *t, const ref *r, int64_t b) {
    int nd = cn_ndim(t), tb = nd > 2 ? nd - 2 : 0;
    const int64_t *sh = cn_shape(t);
    int64_t idx[CN_MAX_DIMS];
    th_unravel(b, r->nb, r->bsh, idx);
    int64_t f = 0;
    for (int d = 0; d < tb; d++) f = f * sh[d] + (sh[d] == 1 ? 0 : idx[d + r->nb - tb]);
    return f;
}

static int64_t mask_at(const ref *r, int64_t b, int64_t i, int64_t j) {
    int nd = cn_ndim(r->mask);
    const int64_t *sh = cn_shape(r->mask);
    int64_t Lm = nd >= 2 ? sh[nd - 2] : 1, Sm = nd >= 1 ? sh[nd - 1] : 1;
    return batch_of(r->mask, r, b) * Lm * Sm + (Lm == 1 ? 0 : i) * Sm + (Sm == 1 ? 0 : j);
}

static void ref_shapes(ref *r) {
    const cn_tensor *ts[4] = {r->q, r->k, r->v, r->mask};
    r->nb = 0;
    for (int t = 0; t < 4; t++)
        if (ts[t] && cn_ndim(ts[t]) - 2 > r->nb) r->nb = cn_ndim(ts[t]) - 2;
    for (int d = 0; d < r->nb; d++) r->bsh[d] = 1;
    for (int t = 0; t < 4; t++) {
        if (!ts[t]) continue;
        int tb = cn_ndim(ts[t]) - 2;
        for (int d = 0; d < tb; d++)
            if (cn_shape(ts[t])[d] != 1) r->bsh[d + r->nb - tb] = cn_shape(ts[t])[d];
    }
    r->B = th_numel(r->nb, r->bsh);
    r->L = cn_shape(r->q)[cn_ndim(r->q) - 2];
    r->E = cn_shape(r->q)[cn_ndim(r->q) - 1];
    r->S = cn_shape(r->k)[cn_ndim(r->k) - 2];
    r->Ev = cn_shape(r->v)[cn_ndim(r->v) - 1];
}

/* Forward, and with w (dO, [B, L, Ev]) the backward too (wl: dlse, or NULL). */
static void ref_run(ref *r, const double *w, const double *wl) {
    ref_shapes(r);
    const double *q = host_f64(r->q), *k = host_f64(r->k), *v = host_f64(r->v);
    const double *m = r->mask && cn_tensor_dtype(r->mask) != CN_BOOL ? host_f64(r->mask) : NULL;
    cn_tensor *mb = r->mask && cn_tensor_dtype(r->mask) == CN_BOOL ? cn_contiguous(r->mask) : NULL;
    const bool *mbool = mb ? cn_data(mb) : NULL;
    int64_t L = r->L, S = r->S, E = r->E, Ev = r->Ev;
    double scale = r->scale > 0 ? r->scale : 1 / sqrt((double)E);
    double dscale = r->p < 1 ? 1 / (1 - r->p) : 0;
    r->y = calloc((size_t)(r->B * L * Ev + 1), sizeof(double));
    r->lse = calloc((size_t)(r->B * L + 1), sizeof(double));
    r->dq = calloc((size_t)cn_numel(r->q) + 1, sizeof(double));
    r->dk = calloc((size_t)cn_numel(r->k) + 1, sizeof(double));
    r->dv = calloc((size_t)cn_numel(r->v) + 1, sizeof(double));
    r->dm = r->mask ? calloc((size_t)cn_numel(r->mask) + 1, sizeof(double)) : NULL;
    double *s = malloc(sizeof(double) * (size_t)(S + 1)),
           *P = malloc(sizeof(double) * (size_t)(S + 1));
    double *pd = malloc(sizeof(double) * (size_t)(S + 1)),
           *dp = malloc(sizeof(double) * (size_t)(S + 1));
    for (int64_t b = 0; b < r->B; b++) {
        const double *qb = q + batch_of(r->q, r, b) * L * E, *kb = k + batch_of(r->k, r, b) * S * E;
        const double *vb = v + batch_of(r->v, r, b) * S * Ev;
        double *dqb = r->dq + batch_of(r->q, r, b) * L * E,
               *dkb = r->dk + batch_of(r->k, r, b) * S * E;
        double *dvb = r->dv + batch_of(r->v, r, b) * S * Ev;
        for (int64_t i = 0; i < L; i++) {
            double mx = -INFINITY;
            for (int64_t j = 0; j < S; j++) {
                double d = 0;
                for (int64_t e = 0; e < E; e++) d += qb[i * E + e] * kb[j * E + e];
                s[j] = d * scale;
                if (m) s[j] += m[mask_at(r, b, i, j)];
                if ((mbool && !mbool[mask_at(r, b, i, j)]) || (r->causal && j > i))
                    s[j] = -INFINITY;
                if (s[j] > mx) mx = s[j];
            }
            double sum = 0;
            for (int64_t j = 0; j < S; j++) sum += mx == -INFINITY ? 0 : exp(s[j] - mx);
            for (int64_t j = 0; j < S; j++) {
                P[j] = mx == -INFINITY ? 0 : exp(s[j] - mx) / sum;
                pd[j] = r->keep ? (r->keep[(b * L + i) * S + j] ? P[j] * dscale : 0) : P[j];
            }
            r->lse[b * L + i] = mx == -INFINITY ? INFINITY : mx + log(sum);
            double *yr = r->y + (b * L + i) * Ev;
            for (int64_t j = 0; j < S; j++)
                for (int64_t e = 0; e < Ev; e++) yr[e] += pd[j] * vb[j * Ev + e];
            if (!w) continue;
            const double *g = w + (b * L + i) * Ev;
            double D = 0;
            for (int64_t j = 0; j < S; j++) {
                double d = 0;
                for (int64_t e = 0; e < Ev; e++) {
                    d += g[e] * vb[j * Ev + e];
                    dvb[j * Ev + e] += pd[j] * g[e];
                }
                dp[j] = r->keep ? (r->keep[(b * L + i) * S + j] ? d * dscale : 0) : d;
                D += P[j] * dp[j];
            }
            double dl = wl ? wl[b * L + i] : 0;
            for (int64_t j = 0; j < S; j++) {
                double ds = P[j] * (dp[j] - D + dl);
                if (r->dm) r->dm[mask_at(r, b, i, j)] += ds;
                for (int64_t e = 0; e < E; e++) {
                    dqb[i * E + e] += scale * ds * kb[j * E + e];
                    dkb[j * E + e] += scale * ds * qb[i * E + e];
                }
            }
        }
    }
    free(s), free(P), free(pd), free(dp);
}

static void ref_free(ref *r) {
    free(r->y), free(r->lse), free(r->dq), free(r->dk), free(r->dv), free(r->dm);
}

/* max |got - want| <= tol max(|want|, 1): the error relative to the size
 * of the values, which is what float rounding gives for sums of products. */
static void check_near(const char *what, cn_tensor *got, const double *want, int64_t n,
                       double tol) {
    th_checks++;
    if (!got || cn_numel(got) != n) {
        th_fail(__FILE__, __LINE__, "%s: %s (%s)", what, got ? "wrong size" : "NULL",
                cn_last_error());
        return;
    }
    const double *g = host_f64(got);
    double worst = 0, big = 1;
    int64_t at = -1;
    for (int64_t i = 0; i < n; i++) {
        if (isinf(want[i]) || isinf(g[i])) {
            if (g[i] != want[i]) worst = INFINITY, at = i;
            continue;
        }
        double d = fabs(g[i] - want[i]);
        if (!(d <= worst)) worst = d, at = i;
        if (fabs(want[i]) > big) big = fabs(want[i]);
    }
    if (!(worst <= tol * big))
        th_fail(__FILE__, __LINE__,
                "%s: element %" PRId64 " is %.10g, expected %.10g (max error %.3g)", what, at,
                at >= 0 ? g[at] : NAN, at >= 0 ? want[at] : NAN, worst);
}

/* Values and gradients of cn_scaled_dot_product_attention against the
 * reference, for inputs as given (any dtype and layout). */
static void check_against_ref(const char *name, cn_tensor *q, cn_tensor *k, cn_tensor *v,
                              cn_tensor *mask, bool causal, double scale, double tol) {
    cn_scope_begin();
    cn_set_requires_grad(q, true);
    cn_set_requires_grad(k, true);
    cn_set_requires_grad(v, true);
    bool mask_grad = mask && cn_tensor_dtype(mask) != CN_BOOL;
    if (mask_grad) cn_set_requires_grad(mask, true);
    cn_tensor *y = cn_scaled_dot_product_attention(q, k, v, mask, 0, causal, scale);
    CHECK_MSG(y != NULL, "%s: %s", name, cn_last_error());
    if (!y) {
        cn_scope_end();
        return;
    }
    cn_tensor *w = th_random(CN_F64, cn_ndim(y), cn_shape(y), -1, 1, TH_CONTIG, NULL);
    cn_tensor *loss = cn_sum(cn_mul(cn_cast(y, CN_F64), w), NULL, 0, false);
    cn_tensor *xs[4] = {q, k, v, mask}, *gs[4] = {NULL};
    int rc = cn_grad(&loss, NULL, 1, xs, mask_grad ? 4 : 3, gs, 0);
    CHECK_MSG(rc == 0, "%s: grad: %s", name, cn_last_error());
    ref r = {.q = q, .k = k, .v = v, .mask = mask, .causal = causal, .scale = scale};
    ref_run(&r, cn_data(cn_contiguous(w)), NULL);
    char what[160];
    snprintf(what, sizeof what, "%s: output", name);
    check_near(what, y, r.y, r.B * r.L * r.Ev, tol);
    const char *names[4] = {"dq", "dk", "dv", "dmask"};
    double *want[4] = {r.dq, r.dk, r.dv, r.dm};
    for (int i = 0; rc == 0 && i < (mask_grad ? 4 : 3); i++) {
        snprintf(what, sizeof what, "%s: %s", name, names[i]);
        check_near(what, gs[i], want[i], cn_numel(xs[i]), tol);
    }
    ref_free(&r);
    cn_scope_end();
}

static cn_tensor *rnd(cn_dtype dt, int nd, const int64_t *shape, double lo, double hi, int layout) {
    return th_random(dt, nd, shape, lo, hi, layout, NULL);
}
#define RND(dt, layout, ...)                                                                       \
    rnd(dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__},   \
        -1.5, 1.5, layout)

/* ---- tests ---- */

/* Small shapes: every mask kind, causal both ways, broadcast batch axes,
 * L != S, Ev != E, awkward layouts; f64 and f32. */
static void test_small_against_loops(void) {
    th_seed(1);
    for (int di = 0; di < 2; di++) {
        cn_dtype dt = di ? CN_F32 : CN_F64;
        double tol = di ? 2e-5 : 1e-11;
        int lay = di ? TH_TRANSPOSED : TH_CONTIG;
        check_against_ref("plain", RND(dt, lay, 2, 5, 4), RND(dt, TH_CONTIG, 2, 7, 4),
                          RND(dt, lay, 2, 7, 3), NULL, false, 0, tol);
        check_against_ref("explicit scale, reversed strides", RND(dt, TH_REVERSED, 3, 6, 5),
                          RND(dt, TH_STRIDED, 3, 4, 5), RND(dt, TH_MIXED, 3, 4, 2), NULL, false,
                          0.9, tol);
        cn_tensor *bm = cn_gt(RND(CN_F64, TH_CONTIG, 5, 7), cn_scalar(CN_F64, -0.5));
        cn_set(bm, (int64_t[]){2, 0}, 0); /* row 2 entirely masked */
        for (int64_t j = 0; j < 7; j++) cn_set(bm, (int64_t[]){2, j}, 0);
        check_against_ref("bool mask [L, S], a fully masked row", RND(dt, lay, 2, 3, 5, 4),
                          RND(dt, TH_CONTIG, 2, 3, 7, 4), RND(dt, TH_CONTIG, 2, 3, 7, 6), bm, false,
                          0, tol);
        cn_tensor *fm = cn_cast(RND(CN_F64, TH_CONTIG, 2, 1, 1, 7), dt);
        cn_set(fm, (int64_t[]){1, 0, 0, 6}, -INFINITY); /* a padded key */
        check_against_ref("float mask [B, 1, 1, S] (padding)", RND(dt, lay, 2, 3, 5, 4),
                          RND(dt, TH_CONTIG, 2, 3, 7, 4), RND(dt, TH_CONTIG, 2, 3, 7, 6), fm, false,
                          0, tol);
        check_against_ref("float mask, batch axes from the mask", RND(dt, lay, 6, 4),
                          RND(dt, TH_CONTIG, 5, 4), RND(dt, TH_CONTIG, 5, 3),
                          cn_cast(RND(CN_F64, TH_CONTIG, 2, 6, 5), dt), false, 0, tol);
        check_against_ref("causal, L < S", RND(dt, lay, 2, 4, 3), RND(dt, TH_CONTIG, 2, 9, 3),
                          RND(dt, TH_CONTIG, 2, 9, 2), NULL, true, 0, tol);
        check_against_ref("causal, L > S", RND(dt, lay, 9, 3), RND(dt, TH_CONTIG, 4, 3),
                          RND(dt, TH_CONTIG, 4, 5), NULL, true, 0, tol);
        check_against_ref("broadcast: q [2,1,L,E] k [3,S,E] v [1,3,S,Ev]", RND(dt, lay, 2, 1, 5, 4),
                          RND(dt, TH_CONTIG, 3, 6, 4), RND(dt, TH_CONTIG, 1, 3, 6, 2), NULL, false,
                          0, tol);
        check_against_ref("one query, one key", RND(dt, lay, 1, 4), RND(dt, TH_CONTIG, 1, 4),
                          RND(dt, TH_CONTIG, 1, 3), NULL, false, 0, tol);
    }
}

/* Several tiles each way (forward: 200 rows in four blocks of at most 56
 * by 128 keys, or 256 without a mask; dk and dv: 64 keys x 128 rows),
 * ragged ends, a bool mask read through strides. */
static void test_medium_against_loops(void) {
    th_seed(2);
    cn_tensor *bm = cn_gt(RND(CN_F64, TH_CONTIG, 1, 300), cn_scalar(CN_F64, -0.9));
    check_against_ref("f32 [2, 200, 32] x [2, 300, 32], key mask",
                      RND(CN_F32, TH_CONTIG, 2, 200, 32), RND(CN_F32, TH_CONTIG, 2, 300, 32),
                      RND(CN_F32, TH_CONTIG, 2, 300, 24), bm, false, 0, 1e-4);
    check_against_ref("f32 [2, 200, 32] x [2, 300, 32], no mask (key blocks of 256 and 44)",
                      RND(CN_F32, TH_CONTIG, 2, 200, 32), RND(CN_F32, TH_CONTIG, 2, 300, 32),
                      RND(CN_F32, TH_CONTIG, 2, 300, 24), NULL, false, 0, 1e-4);
    /* 8 batch indices of 128 rows: forward blocks of 128 rows by 256 keys,
     * the largest score block */
    check_against_ref("f32 [8, 128, 16] x [8, 256, 16], no mask",
                      RND(CN_F32, TH_CONTIG, 8, 128, 16), RND(CN_F32, TH_CONTIG, 8, 256, 16),
                      RND(CN_F32, TH_CONTIG, 8, 256, 8), NULL, false, 0, 1e-4);
    check_against_ref("f64 [130, 16] x [70, 16], float mask", RND(CN_F64, TH_CONTIG, 130, 16),
                      RND(CN_F64, TH_CONTIG, 70, 16), RND(CN_F64, TH_CONTIG, 70, 8),
                      RND(CN_F64, TH_CONTIG, 130, 70), false, 0, 1e-11);
}

/* The gradients of q, k and v come from one pass per batch index when
 * there are as many batch indices as threads, else from a query-side and a
 * key-side pass: the same blocks, so the same bits (and the forward's bits
 * never depend on the thread count). */
static void test_same_bits_any_threads(void) {
    th_seed(12);
    int threads = cn_get_num_threads();
    for (int causal = 0; causal < 2; causal++) {
        cn_tensor *x[3] = {RND(CN_F32, TH_CONTIG, 1, 200, 16), RND(CN_F32, TH_CONTIG, 1, 300, 16),
                           RND(CN_F32, TH_CONTIG, 1, 300, 8)};
        cn_tensor *w = RND(CN_F32, TH_CONTIG, 1, 200, 8), *y[2], *g[2][3];
        for (int i = 0; i < 3; i++) cn_set_requires_grad(x[i], true);
        for (int t = 0; t < 2; t++) {
            cn_set_num_threads(t ? 3 : 1);
            y[t] = cn_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0, causal, 0);
            cn_tensor *loss = cn_sum(cn_mul(y[t], w), NULL, 0, false);
            CHECK(cn_grad(&loss, NULL, 1, x, 3, g[t], 0) == 0);
        }
        cn_set_num_threads(threads);
        CHECK_MSG(cn_equal(y[0], y[1]), "causal %d: the output depends on the threads", causal);
        for (int i = 0; i < 3; i++)
            CHECK_MSG(cn_equal(g[0][i], g[1][i]),
                      "causal %d: gradient %d differs between the "
                      "one-pass and two-pass schemes",
                      causal, i);
    }
    /* The forward's query-row blocks: 577 rows (ViT at 384 pixels) is
     * 64 k + 1, where blocks of 64 end in a block of one row (the GEMM's
     * matrix-vector path); at 1 and at 9 threads the same bits. */
    cn_tensor *q = RND(CN_F32, TH_CONTIG, 1, 577, 16), *k = RND(CN_F32, TH_CONTIG, 1, 577, 16);
    cn_tensor *v = RND(CN_F32, TH_CONTIG, 1, 577, 8), *y9[2];
    for (int t = 0; t < 2; t++) {
        cn_set_num_threads(t ? 9 : 1);
        y9[t] = cn_scaled_dot_product_attention(q, k, v, NULL, 0, false, 0);
    }
    cn_set_num_threads(threads);
    CHECK_MSG(th_same_bits(y9[0], y9[1]), "577 rows: the output depends on the threads");
}

/* The causal flag takes exp of each row's visible keys only (attention_tiles.h,
 * live); a boolean mask of the same pattern takes whole rows. Output and
 * gradients must be the same bits, over several key blocks with L != S.
 * (Finite inputs: with a NaN in a query row the causal path also skips
 * whole blocks of keys no row of a block sees, so the NaN does not reach
 * those keys' gradients as it does through the mask.) */
static void test_causal_same_bits_as_mask(void) {
    th_seed(21);
    const int64_t L = 200, S = 300;
    uint8_t *keep = malloc((size_t)(L * S));
    for (int64_t i = 0; i < L; i++)
        for (int64_t j = 0; j < S; j++) keep[i * S + j] = j <= i;
    cn_tensor *mask = cn_from_data(CN_BOOL, CN_SHAPE(L, S), keep);
    for (int rep = 0; rep < 2; rep++) {
        cn_tensor *x[3] = {RND(CN_F32, TH_CONTIG, 2, L, 16), RND(CN_F32, TH_CONTIG, 2, S, 16),
                           RND(CN_F32, TH_CONTIG, 2, S, 8)};
        cn_tensor *w = RND(CN_F32, TH_CONTIG, 2, L, 8), *y[2], *g[2][3];
        for (int i = 0; i < 3; i++) cn_set_requires_grad(x[i], true);
        for (int t = 0; t < 2; t++) {
            y[t] = cn_scaled_dot_product_attention(x[0], x[1], x[2], t ? mask : NULL, 0, !t, 0);
            cn_tensor *loss = cn_sum(cn_mul(y[t], w), NULL, 0, false);
            CHECK(cn_grad(&loss, NULL, 1, x, 3, g[t], 0) == 0);
        }
        CHECK_MSG(th_same_bits(y[0], y[1]), "%d: causal output differs from the mask's", rep);
        for (int i = 0; i < 3; i++)
            CHECK_MSG(th_same_bits(g[0][i], g[1][i]),
                      "%d: gradient %d of causal attention differs from the mask's", rep, i);
    }
    free(keep);
}

/* L = S = 1024, E = 64: the tiled path with many blocks, causal skipping. */
static void test_long_sequence(void) {
    th_seed(3);
    check_against_ref("f32 L = S = 1024, E = 64, causal", RND(CN_F32, TH_CONTIG, 1, 1024, 64),
                      RND(CN_F32, TH_CONTIG, 1, 1024, 64), RND(CN_F32, TH_CONTIG, 1, 1024, 64),
                      NULL, true, 0, 2e-4);
}

/* The op's own output: the logsumexp column, +inf for a fully masked row,
 * and its gradient. */
static void test_logsumexp_column(void) {
    th_seed(4);
    cn_tensor *q = RND(CN_F64, TH_CONTIG, 2, 3, 4), *k = RND(CN_F64, TH_CONTIG, 2, 5, 4);
    cn_tensor *v = RND(CN_F64, TH_CONTIG, 2, 5, 3);
    cn_tensor *m = cn_gt(RND(CN_F64, TH_CONTIG, 3, 5), cn_scalar(CN_F64, -0.5));
    for (int64_t j = 0; j < 5; j++) cn_set(m, (int64_t[]){1, j}, 0);
    cn_set_requires_grad(q, true);
    cn_set_requires_grad(k, true);
    cn_set_requires_grad(v, true);
    cn_tensor *in[4] = {q, k, v, m};
    cn_tensor *y = cn_op_apply(CN_OP_scaled_dot_product_attention, in, 4, &(cn_attrs){.i = {0, 1}});
    CHECK_SHAPE(y, 2, 3, 4);
    cn_tensor *lse = cn_narrow(y, -1, 3, 1);
    CHECK(cn_get(lse, (int64_t[]){0, 1, 0}) == INFINITY &&
          cn_get(lse, (int64_t[]){1, 1, 0}) == INFINITY);
    /* a loss on the finite part of y, the logsumexp included */
    cn_tensor *fin = cn_where(cn_eq(y, cn_scalar(CN_F64, INFINITY)), cn_scalar(CN_F64, 0), y);
    cn_tensor *w = RND(CN_F64, TH_CONTIG, 2, 3, 4);
    cn_tensor *loss = cn_sum(cn_mul(fin, w), NULL, 0, false);
    cn_tensor *xs[3] = {q, k, v}, *gs[3];
    CHECK(cn_grad(&loss, NULL, 1, xs, 3, gs, 0) == 0);
    const double *wd = cn_data(cn_contiguous(w));
    double *dO = malloc(sizeof(double) * 2 * 3 * 3), *dl = malloc(sizeof(double) * 2 * 3);
    for (int64_t r = 0; r < 6; r++) {
        for (int e = 0; e < 3; e++) dO[r * 3 + e] = wd[r * 4 + e];
        dl[r] = r % 3 == 1 ? 0 : wd[r * 4 + 3];
    }
    ref rf = {.q = q, .k = k, .v = v, .mask = m};
    ref_run(&rf, dO, dl);
    check_near("logsumexp", lse, rf.lse, 6, 1e-12);
    check_near("dq (logsumexp too)", gs[0], rf.dq, cn_numel(q), 1e-11);
    check_near("dk (logsumexp too)", gs[1], rf.dk, cn_numel(k), 1e-11);
    check_near("dv", gs[2], rf.dv, cn_numel(v), 1e-11);
    ref_free(&rf);
    free(dO), free(dl);
}

/* Rows whose every key is masked give zeros and pass no gradient (PyTorch
 * 2 gives NaN there; docs/ops.md says which). */
static void test_fully_masked_rows(void) {
    th_seed(5);
    cn_tensor *q = RND(CN_F32, TH_CONTIG, 3, 4), *k = RND(CN_F32, TH_CONTIG, 5, 4);
    cn_tensor *v = RND(CN_F32, TH_CONTIG, 5, 2);
    cn_set_requires_grad(q, true);
    cn_tensor *fm = cn_zeros(CN_F32, CN_SHAPE(3, 5));
    for (int64_t j = 0; j < 5; j++) cn_set(fm, (int64_t[]){0, j}, -INFINITY);
    cn_tensor *bm = cn_ne(fm, cn_scalar(CN_F32, -INFINITY));
    cn_tensor *ys[2] = {cn_scaled_dot_product_attention(q, k, v, fm, 0, false, 0),
                        cn_scaled_dot_product_attention(q, k, v, bm, 0, false, 0)};
    for (int t = 0; t < 2; t++) {
        CHECK(ys[t] && cn_get(ys[t], (int64_t[]){0, 0}) == 0 &&
              cn_get(ys[t], (int64_t[]){0, 1}) == 0);
        CHECK(ys[t] && cn_get(ys[t], (int64_t[]){1, 0}) != 0);
        cn_tensor *g;
        cn_tensor *loss = cn_sum(ys[t], NULL, 0, false);
        CHECK(cn_grad(&loss, NULL, 1, &q, 1, &g, 0) == 0);
        for (int e = 0; e < 4; e++) CHECK(cn_get(g, (int64_t[]){0, e}) == 0);
        cn_stats st;
        CHECK(cn_tensor_stats(g, &st) == 0 && st.nan_count == 0);
    }
    /* no key at all (S = 0): zeros too */
    cn_tensor *y0 = cn_scaled_dot_product_attention(
        q, cn_zeros(CN_F32, CN_SHAPE(0, 4)), cn_zeros(CN_F32, CN_SHAPE(0, 2)), NULL, 0, false, 0);
    CHECK_SHAPE(y0, 3, 2);
    CHECK(y0 && cn_item(cn_sum(cn_abs(y0), NULL, 0, false)) == 0);
}

/* The gradient cases of test_grad, here too: finite differences in f64
 * (reverse and forward mode) in five layouts, and each as a static graph. */
static void test_finite_differences(void) {
    size_t n = sizeof grad_cases_attention / sizeof grad_cases_attention[0];
    for (size_t c = 0; c < n; c++) {
        th_seed(100 + c);
        for (int layout = 0; layout < TH_NLAYOUTS; layout++)
            if (!gc_check_case(&grad_cases_attention[c], layout)) break;
        gc_check_static(&grad_cases_attention[c]);
    }
}

/* PyTorch 1.13 has no F.scaled_dot_product_attention: its explicit
 * softmax(q k^T scale + mask) v in f32, values and gradients (autograd). */
static void test_torch_f32(void) {
    th_seed(6);
    cn_tensor *q = RND(CN_F32, TH_CONTIG, 2, 3, 33, 16), *k = RND(CN_F32, TH_CONTIG, 2, 3, 47, 16);
    cn_tensor *v = RND(CN_F32, TH_CONTIG, 2, 3, 47, 24), *m = RND(CN_F32, TH_CONTIG, 33, 47);
    cn_set(m, (int64_t[]){4, 10}, -INFINITY);
    cn_tensor *w = RND(CN_F32, TH_CONTIG, 2, 3, 33, 24);
    cn_tensor *xs[4] = {q, k, v, m}, *gs[4];
    for (int i = 0; i < 4; i++) cn_set_requires_grad(xs[i], true);
    cn_tensor *y = cn_scaled_dot_product_attention(q, k, v, m, 0, false, 0);
    cn_tensor *loss = cn_sum(cn_mul(y, w), NULL, 0, false);
    CHECK(cn_grad(&loss, NULL, 1, xs, 4, gs, 0) == 0);
    tr_begin();
    int c = tr_add("(lambda q, k, v, m, w: (lambda o: torch.cat([o.flatten()] + [g.flatten() for "
                   "g in torch.autograd.grad((o * w).sum(), [q, k, v, m])]))(torch.softmax(q @ "
                   "k.transpose(-2, -1) * 0.25 + m, -1) @ v))(t0.float().requires_grad_(), "
                   "t1.float().requires_grad_(), t2.float().requires_grad_(), "
                   "t3.float().requires_grad_(), t4.float())",
                   5, (cn_tensor *[]){q, k, v, m, w});
    tr_run();
    cn_tensor *want = tr_result(c);
    if (want) {
        const double *t = cn_data(want);
        int64_t off = 0;
        cn_tensor *got[5] = {y, gs[0], gs[1], gs[2], gs[3]};
        const char *names[5] = {"output", "dq", "dk", "dv", "dmask"};
        for (int i = 0; i < 5; i++) {
            char what[64];
            snprintf(what, sizeof what, "torch f32: %s", names[i]);
            check_near(what, got[i], t + off, cn_numel(got[i]), 2e-5);
            off += cn_numel(got[i]);
        }
        CHECK_EQ_INT(off, cn_numel(want));
    }
    tr_end();
}

/* Placeholders, cn_grad on the graph, cn_compile, cn_run: the eager values
 * and gradients, with a bool and a float mask, causal, and dropout (a new
 * draw on every run; cn_manual_seed repeats one). */
static void test_static_graph(void) {
    th_seed(7);
    for (int variant = 0; variant < 3; variant++) {
        cn_scope_begin();
        cn_graph *g = cn_graph_new();
        cn_tensor *x[4] = {RND(CN_F64, TH_CONTIG, 2, 6, 4), RND(CN_F64, TH_CONTIG, 2, 9, 4),
                           RND(CN_F64, TH_CONTIG, 2, 9, 3),
                           variant == 0
                               ? RND(CN_F64, TH_CONTIG, 6, 9)
                               : cn_gt(RND(CN_F64, TH_CONTIG, 6, 9), cn_scalar(CN_F64, 0))};
        int nx = variant == 2 ? 3 : 4, nd = variant == 0 ? 4 : 3;
        cn_tensor *ph[4];
        for (int i = 0; i < nx; i++) {
            ph[i] = cn_placeholder(g, "x", cn_tensor_dtype(x[i]), cn_ndim(x[i]), cn_shape(x[i]));
            if (i < nd) {
                cn_set_requires_grad(x[i], true);
                cn_set_requires_grad(ph[i], true);
            }
        }
        cn_tensor *w = RND(CN_F64, TH_CONTIG, 2, 6, 3);
        cn_tensor *y = cn_scaled_dot_product_attention(x[0], x[1], x[2], variant < 2 ? x[3] : NULL,
                                                       0, variant == 2, 0);
        cn_tensor *sy = cn_scaled_dot_product_attention(
            ph[0], ph[1], ph[2], variant < 2 ? ph[3] : NULL, 0, variant == 2, 0);
        cn_tensor *loss = cn_sum(cn_mul(y, w), NULL, 0, false);
        cn_tensor *sloss = cn_sum(cn_mul(sy, w), NULL, 0, false);
        cn_tensor *eg[4], *outs[5] = {sy}, *res[5];
        CHECK(cn_grad(&loss, NULL, 1, x, nd, eg, 0) == 0);
        CHECK(cn_grad(&sloss, NULL, 1, ph, nd, outs + 1, 0) == 0);
        cn_program *p = cn_compile(g, outs, nd + 1, NULL);
        CHECK_MSG(p != NULL, "compile: %s", cn_last_error());
        CHECK(p && cn_run(p, ph, x, nx, res, nd + 1) == 0);
        if (p) {
            CHECK(cn_allclose(res[0], y, 1e-13, 1e-13));
            for (int i = 0; i < nd; i++)
                CHECK_MSG(cn_allclose(res[i + 1], eg[i], 1e-13, 1e-13), "variant %d: gradient %d",
                          variant, i);
        }
        cn_program_free(p);
        cn_graph_free(g);
        cn_scope_end();
    }
    /* dropout in a static graph */
    cn_scope_begin();
    cn_graph *g = cn_graph_new();
    cn_tensor *x[3] = {RND(CN_F32, TH_CONTIG, 8, 4), RND(CN_F32, TH_CONTIG, 8, 4),
                       RND(CN_F32, TH_CONTIG, 8, 4)};
    cn_tensor *ph[3];
    for (int i = 0; i < 3; i++) ph[i] = cn_placeholder(g, "x", CN_F32, CN_SHAPE(8, 4));
    cn_tensor *sy = cn_scaled_dot_product_attention(ph[0], ph[1], ph[2], NULL, 0.5, false, 0);
    cn_program *p = cn_compile(g, &sy, 1, NULL);
    cn_tensor *r1, *r2, *r3;
    CHECK(p && cn_run(p, ph, x, 3, &r1, 1) == 0 && cn_run(p, ph, x, 3, &r2, 1) == 0);
    CHECK_MSG(p && !cn_equal(r1, r2), "two runs drew the same dropout bits");
    cn_manual_seed(9);
    CHECK(p && cn_run(p, ph, x, 3, &r3, 1) == 0);
    cn_manual_seed(9);
    cn_tensor *e = cn_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0.5, false, 0);
    CHECK_MSG(p && cn_equal(r3, e), "a seeded static run differs from eager");
    cn_program_free(p);
    cn_graph_free(g);
    cn_scope_end();
}

/* Dropout: reproducible with the seed, p = 0 draws nothing, the keep
 * fraction, the same bits for any thread count, and gradients through the
 * bits the forward used. */
static void test_dropout(void) {
    th_seed(8);
    const int64_t n = 256;
    cn_tensor *q = RND(CN_F32, TH_CONTIG, n, 8), *k = RND(CN_F32, TH_CONTIG, n, 8);
    cn_tensor *eye = cn_eye(n, n, CN_F32);
    uint64_t s0, o0, s1, o1;
    cn_rng_get_state(&s0, &o0);
    cn_tensor *a = cn_scaled_dot_product_attention(q, k, eye, NULL, 0, false, 0);
    cn_tensor *b = cn_scaled_dot_product_attention(q, k, eye, NULL, 0, false, 0);
    cn_rng_get_state(&s1, &o1);
    CHECK_MSG(cn_equal(a, b) && s0 == s1 && o0 == o1, "p = 0 is not exactly deterministic");
    /* with v = I, y = P keep / (1 - p): the kept entries are y's nonzeros */
    cn_manual_seed(3);
    cn_tensor *d1 = cn_scaled_dot_product_attention(q, k, eye, NULL, 0.3, false, 0);
    cn_manual_seed(3);
    cn_tensor *d2 = cn_scaled_dot_product_attention(q, k, eye, NULL, 0.3, false, 0);
    CHECK_MSG(cn_equal(d1, d2), "the same seed gave other dropout bits");
    cn_manual_seed(4);
    CHECK(!cn_equal(d1, cn_scaled_dot_product_attention(q, k, eye, NULL, 0.3, false, 0)));
    int threads = cn_get_num_threads();
    cn_set_num_threads(1);
    cn_manual_seed(3);
    cn_tensor *d3 = cn_scaled_dot_product_attention(q, k, eye, NULL, 0.3, false, 0);
    cn_set_num_threads(threads);
    CHECK_MSG(cn_equal(d1, d3), "the bits depend on the thread count");
    cn_tensor *dc = cn_contiguous(d1);
    const float *dv = cn_data(dc), *pv = cn_data(cn_contiguous(a));
    uint8_t *keep = malloc((size_t)(n * n));
    int64_t kept = 0;
    bool scaled = true;
    for (int64_t i = 0; i < n * n; i++) {
        keep[i] = dv[i] != 0;
        kept += keep[i];
        if (keep[i]) scaled &= fabsf(dv[i] - pv[i] / 0.7f) <= 1e-6f * fabsf(pv[i] / 0.7f) + 1e-12f;
    }
    double frac = (double)kept / (double)(n * n);
    CHECK_MSG(fabs(frac - 0.7) < 0.01, "kept %.4f of the weights with p = 0.3", frac);
    CHECK_MSG(scaled, "the kept weights are not scaled by 1 / (1 - p)");
    /* gradients with the bits just read off */
    cn_tensor *v = RND(CN_F64, TH_CONTIG, n, 5), *q64 = cn_cast(q, CN_F64),
              *k64 = cn_cast(k, CN_F64);
    cn_tensor *xs[3] = {cn_detach(q64), cn_detach(k64), v}, *gs[3];
    for (int i = 0; i < 3; i++) cn_set_requires_grad(xs[i], true);
    cn_manual_seed(3);
    cn_tensor *y = cn_scaled_dot_product_attention(xs[0], xs[1], xs[2], NULL, 0.3, false, 0);
    cn_tensor *w = RND(CN_F64, TH_CONTIG, n, 5);
    cn_tensor *loss = cn_sum(cn_mul(y, w), NULL, 0, false);
    CHECK(cn_grad(&loss, NULL, 1, xs, 3, gs, 0) == 0);
    ref r = {.q = xs[0], .k = xs[1], .v = v, .p = 0.3, .keep = keep};
    ref_run(&r, cn_data(w), NULL);
    check_near("dropout: output", y, r.y, n * 5, 1e-11);
    check_near("dropout: dq", gs[0], r.dq, n * 8, 1e-11);
    check_near("dropout: dk", gs[1], r.dk, n * 8, 1e-11);
    check_near("dropout: dv", gs[2], r.dv, n * 5, 1e-11);
    ref_free(&r);
    free(keep);
    /* p = 1 drops everything */
    cn_tensor *z = cn_scaled_dot_product_attention(q, k, eye, NULL, 1, false, 0);
    CHECK(z && cn_item(cn_sum(cn_abs(z), NULL, 0, false)) == 0);
    /* forward mode refuses dropout */
    cn_tensor *dq = cn_clone(q), *out = NULL;
    cn_dual_begin();
    CHECK(cn_set_tangent(dq, cn_ones_like(q)) == 0);
    out = cn_scaled_dot_product_attention(dq, k, eye, NULL, 0.3, false, 0);
    cn_dual_end();
    CHECK_MSG(out == NULL && strstr(cn_last_error(), "forward mode"), "jvp with dropout: %s",
              cn_last_error());
}

/* f16 and bf16 compute in f32 and come back in their own type. */
static void test_half(void) {
    th_seed(9);
    cn_tensor *q = RND(CN_F32, TH_CONTIG, 2, 7, 8), *k = RND(CN_F32, TH_CONTIG, 2, 9, 8);
    cn_tensor *v = RND(CN_F32, TH_CONTIG, 2, 9, 4);
    cn_tensor *want = cn_scaled_dot_product_attention(q, k, v, NULL, 0, true, 0);
    cn_dtype hs[2] = {CN_F16, CN_BF16};
    for (int h = 0; h < 2; h++) {
        cn_tensor *qh = cn_cast(q, hs[h]);
        cn_set_requires_grad(qh, true);
        cn_tensor *y = cn_scaled_dot_product_attention(qh, cn_cast(k, hs[h]), cn_cast(v, hs[h]),
                                                       NULL, 0, true, 0);
        CHECK(y && cn_tensor_dtype(y) == hs[h]);
        CHECK(y && cn_allclose(cn_cast(y, CN_F32), want, 3e-2, 3e-2));
        cn_tensor *loss = cn_sum(cn_cast(y, CN_F32), NULL, 0, false), *g;
        CHECK(cn_grad(&loss, NULL, 1, &qh, 1, &g, 0) == 0 && cn_tensor_dtype(g) == hs[h]);
    }
}

/* Memory: the forward and backward of L = S = 2048 never hold the 16 MiB
 * f32 score matrix (what softmax(q k^T) v would). Runs first, while the
 * peak is this test's. */
static void test_memory_bound(void) {
    th_seed(10);
    const int64_t T = 2048;
    cn_tensor *q = RND(CN_F32, TH_CONTIG, T, 16), *k = RND(CN_F32, TH_CONTIG, T, 16);
    cn_tensor *v = RND(CN_F32, TH_CONTIG, T, 16);
    for (int i = 0; i < 2; i++) cn_set_requires_grad(i ? k : q, true);
    cn_memory_stats before, after;
    CHECK(cn_device_memory_stats(CN_CPU, &before) == 0);
    cn_tensor *y = cn_scaled_dot_product_attention(q, k, v, NULL, 0, false, 0);
    cn_tensor *loss = cn_sum(y, NULL, 0, false), *gs[2], *xs[2] = {q, k};
    CHECK(cn_grad(&loss, NULL, 1, xs, 2, gs, 0) == 0);
    CHECK(cn_device_memory_stats(CN_CPU, &after) == 0);
    uint64_t extra = after.peak_allocated_bytes - before.allocated_bytes;
    CHECK_MSG(extra < 4u << 20, "peak %.2f MiB above the inputs (the scores alone are 16 MiB)",
              (double)extra / (1 << 20));
}

/* Everything a caller can get wrong, with the shapes named. */
static void test_errors(void) {
    cn_tensor *q = cn_ones(CN_F32, CN_SHAPE(2, 3, 4)), *k = cn_ones(CN_F32, CN_SHAPE(2, 5, 4));
    cn_tensor *v = cn_ones(CN_F32, CN_SHAPE(2, 5, 6));
    CHECK_ERROR(
        cn_scaled_dot_product_attention(cn_ones(CN_F32, CN_SHAPE(4)), k, v, NULL, 0, false, 0),
        "rank 2 or more");
    CHECK_ERROR(cn_scaled_dot_product_attention(q, cn_ones(CN_F32, CN_SHAPE(2, 5, 3)), v, NULL, 0,
                                                false, 0),
                "k [2, 5, 3]");
    CHECK_ERROR(cn_scaled_dot_product_attention(q, k, cn_ones(CN_F32, CN_SHAPE(2, 4, 6)), NULL, 0,
                                                false, 0),
                "do not fit");
    CHECK_ERROR(cn_scaled_dot_product_attention(q, cn_ones(CN_F32, CN_SHAPE(3, 5, 4)), v, NULL, 0,
                                                false, 0),
                "do not broadcast");
    CHECK_ERROR(
        cn_scaled_dot_product_attention(q, k, v, cn_ones(CN_BOOL, CN_SHAPE(3, 7)), 0, false, 0),
        "attn_mask [3, 7] does not broadcast to the scores [..., L, S] = [..., 3, 5]");
    CHECK_ERROR(
        cn_scaled_dot_product_attention(q, k, v, cn_ones(CN_BOOL, CN_SHAPE(3, 5)), 0, true, 0),
        "not both");
    CHECK_ERROR(
        cn_scaled_dot_product_attention(q, k, v, cn_ones(CN_I64, CN_SHAPE(3, 5)), 0, false, 0),
        "bool or q's dtype");
    CHECK_ERROR(cn_scaled_dot_product_attention(q, k, v, NULL, 1.5, false, 0), "dropout_p");
    CHECK_ERROR(cn_scaled_dot_product_attention(q, k, v, NULL, NAN, false, 0), "dropout_p");
    CHECK_ERROR(cn_scaled_dot_product_attention(cn_ones(CN_I32, CN_SHAPE(3, 4)),
                                                cn_ones(CN_I32, CN_SHAPE(5, 4)),
                                                cn_ones(CN_I32, CN_SHAPE(5, 4)), NULL, 0, false, 0),
                "float");
    CHECK_ERROR(cn_scaled_dot_product_attention(q, cn_ones(CN_F64, CN_SHAPE(2, 5, 4)), v, NULL, 0,
                                                false, 0),
                "one dtype");
    CHECK(cn_scaled_dot_product_attention(NULL, k, v, NULL, 0, false, 0) == NULL);
    /* the backward op checks its own inputs */
    cn_tensor *y = cn_ones(CN_F32, CN_SHAPE(2, 3, 7));
    CHECK_ERROR(cn_op_apply(CN_OP_scaled_dot_product_attention_backward,
                            (cn_tensor *[]){q, k, v, y, cn_ones(CN_F32, CN_SHAPE(2, 3, 6))}, 5,
                            NULL),
                "dy is f32 [2, 3, 6]; expected f32 [2, 3, 7]");
    CHECK_ERROR(cn_op_apply(CN_OP_scaled_dot_product_attention_backward,
                            (cn_tensor *[]){q, k, v, y, y}, 5, &(cn_attrs){.i = {0, 0, 1}}),
                "needs a float attn_mask");
    /* no double backward */
    cn_tensor *qq = cn_ones(CN_F64, CN_SHAPE(3, 4));
    cn_set_requires_grad(qq, true);
    cn_tensor *yy =
        cn_scaled_dot_product_attention(cn_sin(qq), cn_ones(CN_F64, CN_SHAPE(5, 4)),
                                        cn_ones(CN_F64, CN_SHAPE(5, 2)), NULL, 0, false, 0);
    cn_tensor *l = cn_sum(cn_square(yy), NULL, 0, false), *g1, *g2;
    CHECK(cn_grad(&l, NULL, 1, &qq, 1, &g1, CN_GRAD_CREATE_GRAPH) == 0);
    cn_tensor *l2 = cn_sum(g1, NULL, 0, false);
    CHECK_STATUS_ERROR(cn_grad(&l2, NULL, 1, &qq, 1, &g2, 0), "double backward");
}

#ifdef CN_HAVE_ONNX
/* ONNX export (a composition of MatMul, ReduceMax, Exp, ...), imported
 * back and run: the library's values, a fully masked row's zeros included. */
static void test_onnx_export(void) {
    th_seed(11);
    for (int variant = 0; variant < 2; variant++) {
        cn_scope_begin();
        cn_graph *g = cn_graph_new();
        cn_tensor *x[4] = {RND(CN_F32, TH_CONTIG, 2, 3, 5, 4), RND(CN_F32, TH_CONTIG, 3, 6, 4),
                           RND(CN_F32, TH_CONTIG, 2, 1, 6, 2),
                           cn_gt(RND(CN_F32, TH_CONTIG, 5, 6), cn_scalar(CN_F32, -0.3))};
        for (int64_t j = 0; j < 6; j++) cn_set(x[3], (int64_t[]){4, j}, 0);
        int nx = variant ? 3 : 4;
        const char *names[4] = {"q", "k", "v", "mask"};
        cn_tensor *ph[4];
        for (int i = 0; i < nx; i++)
            ph[i] =
                cn_placeholder(g, names[i], cn_tensor_dtype(x[i]), cn_ndim(x[i]), cn_shape(x[i]));
        cn_tensor *sy = cn_scaled_dot_product_attention(ph[0], ph[1], ph[2], variant ? NULL : ph[3],
                                                        0, variant == 1, 0.6);
        cn_tensor *y = cn_scaled_dot_product_attention(x[0], x[1], x[2], variant ? NULL : x[3], 0,
                                                       variant == 1, 0.6);
        void *buf = NULL;
        size_t size = 0;
        int rc = cn_onnx_export_buffer(g, &sy, 1, &buf, &size, NULL);
        CHECK_MSG(rc == 0, "export: %s", cn_last_error());
        cn_onnx_model *m = rc == 0 ? cn_onnx_load_buffer(buf, size, NULL, NULL) : NULL;
        CHECK_MSG(rc != 0 || m, "import: %s", cn_last_error());
        if (m) {
            cn_tensor *in[4] = {0}, *out[1] = {0};
            for (int i = 0; i < cn_onnx_num_inputs(m); i++)
                for (int k = 0; k < nx; k++)
                    if (!strcmp(cn_onnx_input_name(m, i), names[k])) in[i] = x[k];
            CHECK_MSG(cn_onnx_run(m, in, out) == 0, "run: %s", cn_last_error());
            CHECK_MSG(out[0] && cn_allclose(out[0], y, 1e-5, 1e-6), "variant %d: ONNX differs",
                      variant);
            cn_onnx_free(m);
        }
        free(buf);
        cn_graph_free(g);
        cn_scope_end();
    }
    /* dropout has no ONNX form */
    cn_scope_begin();
    cn_graph *g = cn_graph_new();
    cn_tensor *p = cn_placeholder(g, "q", CN_F32, CN_SHAPE(3, 4));
    cn_tensor *sy = cn_scaled_dot_product_attention(p, p, p, NULL, 0.1, false, 0);
    void *buf = NULL;
    size_t size = 0;
    CHECK_STATUS_ERROR(cn_onnx_export_buffer(g, &sy, 1, &buf, &size, NULL), "random");
    free(buf);
    cn_graph_free(g);
    cn_scope_end();
}
#endif

int main(void) {
    (void)tr_check_close; /* torch_ref.h's; the f32 case compares with check_near */
    RUN(test_memory_bound);
    RUN(test_small_against_loops);
    RUN(test_medium_against_loops);
    RUN(test_same_bits_any_threads);
    RUN(test_causal_same_bits_as_mask);
    RUN(test_long_sequence);
    RUN(test_logsumexp_column);
    RUN(test_fully_masked_rows);
    RUN(test_finite_differences);
    RUN(test_torch_f32);
    RUN(test_static_graph);
    RUN(test_dropout);
    RUN(test_half);
    RUN(test_errors);
#ifdef CN_HAVE_ONNX
    RUN(test_onnx_export);
#endif
    return th_summary();
}
