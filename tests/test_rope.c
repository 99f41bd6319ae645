/* Rotary position embeddings (src/ops/rope.c, the CPU kernel
 * src/backend/cpu/rope.c): values against a loop in double in every layout
 * (half-split and interleaved pairs, part of the features, offsets, bases,
 * the inverse), f32 to its rounding at large positions, the inverse undoing
 * the rotation, the same bits for any thread count, Hugging Face's
 * formulation (rotate_half, GPT-J's interleaved pairs) written in PyTorch,
 * finite differences (the rope cases of grad_cases_attention.h, which
 * test_grad and test_backends run too), a static graph, ONNX export
 * imported back, and the errors. */
#include "gradcheck.h"
#include "ops/op.h"
#include "torch_ref.h"

#include "grad_cases_attention.h"

static cn_tensor *rnd(cn_dtype dt, int nd, const int64_t *shape, int layout) {
    return th_random(dt, nd, shape, -2, 2, layout, NULL);
}
#define RND(dt, layout, ...)                                                                       \
    rnd(dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__},   \
        layout)

static const double *host_f64(cn_tensor *t) {
    return t ? cn_data(cn_contiguous(cn_cast(cn_detach(t), CN_F64))) : NULL;
}

/* The rotation of x (host doubles, row-major [rows, D], row r at position
 * offset + r mod T) into y, loop by loop. */
static void ref_rope(const double *x, double *y, int64_t rows, int64_t T, int64_t D,
                     const cn_rope_opts *o) {
    int64_t R = o->rotary_dim ? o->rotary_dim : D, h = R / 2;
    double base = o->base > 0 ? o->base : 10000;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * D;
        double *yr = y + r * D;
        for (int64_t k = 0; k < D; k++) yr[k] = xr[k];
        double p = (double)(o->offset + r % T);
        for (int64_t i = 0; i < h; i++) {
            double ang = p / pow(base, (double)(2 * i) / (double)R);
            if (o->inverse) ang = -ang;
            int64_t a = o->interleaved ? 2 * i : i, b = o->interleaved ? 2 * i + 1 : i + h;
            yr[a] = xr[a] * cos(ang) - xr[b] * sin(ang);
            yr[b] = xr[b] * cos(ang) + xr[a] * sin(ang);
        }
    }
}

/* cn_rope(x) against the loop; tol relative to the values' size (2). */
static void check_one(cn_tensor *x, const cn_rope_opts *o, double tol, const char *what) {
    int nd = cn_ndim(x);
    const int64_t *sh = cn_shape(x);
    int64_t T = sh[nd - 2], D = sh[nd - 1], n = cn_numel(x), rows = D ? n / D : 0;
    cn_tensor *y = cn_rope(x, o);
    CHECK_MSG(y, "%s: %s", what, cn_last_error());
    if (!y) return;
    CHECK_MSG(cn_tensor_dtype(y) == cn_tensor_dtype(x) && th_same_shape(y, nd, sh),
              "%s: dtype or shape", what);
    double *want = malloc(sizeof(double) * (size_t)(n + 1));
    ref_rope(host_f64(x), want, rows, T, D, o);
    const double *got = host_f64(y);
    double worst = 0;
    for (int64_t k = 0; k < n; k++) worst = fmax(worst, fabs(got[k] - want[k]));
    CHECK_MSG(worst <= tol, "%s: off by %g (tolerance %g)", what, worst, tol);
    free(want);
}

/* Every layout of th_make, f64 and f32, ranks 2 to 5, each option. */
static void test_against_loop(void) {
    th_seed(1);
    const cn_rope_opts opts[] = {
        {0},
        {.interleaved = true},
        {.rotary_dim = 4, .offset = 7, .base = 500},
        {.rotary_dim = 2, .interleaved = true, .inverse = true, .offset = 3},
        {.inverse = true, .base = 1e6},
    };
    const int64_t shapes[][5] = {{2, 3, 5, 8}, {7, 6}, {2, 2, 2, 3, 4}, {1, 9, 10}};
    const int ranks[] = {4, 2, 5, 3};
    for (size_t s = 0; s < 4; s++)
        for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
            for (int layout = 0; layout < TH_NLAYOUTS; layout++)
                for (int f = 0; f < 2; f++) {
                    cn_scope_begin();
                    char what[96];
                    snprintf(what, sizeof what, "shape %zu, options %zu, layout %d, %s", s, k,
                             layout, f ? "f32" : "f64");
                    cn_tensor *x = rnd(f ? CN_F32 : CN_F64, ranks[s], shapes[s], layout);
                    check_one(x, &opts[k], f ? 1e-6 : 1e-13, what);
                    cn_scope_end();
                }
    /* Zero sizes: no rows, or no features. */
    CHECK_SHAPE(cn_rope(cn_zeros(CN_F32, CN_SHAPE(2, 0, 4)), NULL), 2, 0, 4);
    CHECK_SHAPE(cn_rope(cn_zeros(CN_F32, CN_SHAPE(0, 3, 4)), NULL), 0, 3, 4);
    CHECK_SHAPE(cn_rope(cn_zeros(CN_F32, CN_SHAPE(3, 0)), NULL), 3, 0);
    /* Half types compute in f32 and round once. */
    cn_tensor *h = RND(CN_BF16, TH_CONTIG, 3, 4, 8);
    cn_tensor *yh = cn_rope(h, NULL), *yf = cn_rope(cn_cast(h, CN_F32), NULL);
    CHECK(yh && cn_tensor_dtype(yh) == CN_BF16 && cn_allclose(yh, cn_cast(yf, CN_BF16), 0, 0));
}

/* f32 at positions up to 100000: the angle in double keeps every result
 * within f32's rounding of the exact one, where an angle in f32 would be
 * off by about p * 6e-8 radians. */
static void test_f32_large_positions(void) {
    th_seed(2);
    cn_rope_opts o = {.offset = 100000};
    check_one(RND(CN_F32, TH_CONTIG, 2, 16, 64), &o, 1e-6, "f32 at offset 100000");
    o.interleaved = true;
    check_one(RND(CN_F32, TH_CONTIG, 2, 16, 64), &o, 1e-6, "f32 interleaved at offset 100000");
}

/* inverse undoes the rotation; the rotation keeps each pair's length. */
static void test_inverse(void) {
    th_seed(3);
    cn_tensor *x = RND(CN_F64, TH_CONTIG, 2, 3, 7, 10);
    cn_rope_opts o = {.offset = 11, .rotary_dim = 8, .interleaved = true};
    cn_tensor *y = cn_rope(x, &o);
    o.inverse = true;
    CHECK(cn_allclose(cn_rope(y, &o), x, 1e-13, 1e-13));
    cn_tensor *n1 = cn_sum(cn_square(x), (int[]){-1}, 1, false);
    cn_tensor *n2 = cn_sum(cn_square(y), (int[]){-1}, 1, false);
    CHECK(cn_allclose(n1, n2, 1e-12, 1e-12));
}

/* Rows are split across threads, each computed whole: the same bits. */
static void test_same_bits_any_threads(void) {
    th_seed(4);
    cn_tensor *x = RND(CN_F32, TH_CONTIG, 4, 8, 130, 64);
    cn_tensor *xt = cn_transpose(RND(CN_F32, TH_CONTIG, 4, 130, 8, 64), 1, 2);
    int before = cn_get_num_threads();
    cn_set_num_threads(1);
    cn_tensor *a = cn_rope(x, NULL), *at = cn_rope(xt, &(cn_rope_opts){.offset = 5});
    cn_set_num_threads(2);
    cn_tensor *b = cn_rope(x, NULL), *bt = cn_rope(xt, &(cn_rope_opts){.offset = 5});
    cn_set_num_threads(before);
    CHECK(cn_allclose(a, b, 0, 0) && cn_allclose(at, bt, 0, 0));
}

/* Hugging Face's rotary embedding as transformers writes it, in PyTorch
 * (which has no rotary op): inv_freq = 1 / base^(arange(0, R, 2) / R),
 * emb = cat(freqs, freqs), x cos + rotate_half(x) sin with rotate_half(x) =
 * cat(-x2, x1); GPT-J's interleaved pairs with repeat_interleave; partial
 * rotary (GPT-NeoX's rotary_pct) as a split. In f64 (torch_ref's), against
 * f64 and f32 results. */
static void test_torch(void) {
    th_seed(5);
    struct {
        int64_t offset, R;
        double base;
        bool inter;
    } cs[3] = {{0, 16, 10000, false}, {37, 8, 10000, false}, {5, 16, 500, true}};
    cn_tensor *x64 = RND(CN_F64, TH_CONTIG, 2, 3, 9, 16), *x32 = cn_cast(x64, CN_F32);
    cn_tensor *got[3][2];
    int k[3];
    tr_begin();
    for (int c = 0; c < 3; c++) {
        cn_rope_opts o = {.offset = cs[c].offset, .rotary_dim = cs[c].R, .base = cs[c].base,
                          .interleaved = cs[c].inter};
        got[c][0] = cn_rope(x64, &o);
        got[c][1] = cn_rope(x32, &o);
        char e[1024];
        long long R = (long long)cs[c].R;
        /* f: the angles [T, R/2]; r: the rotated first R features */
        const char *rot =
            cs[c].inter
                ? "(lambda x, f: x * f.repeat_interleave(2, -1).cos() + torch.stack([-x[..., 1::2], "
                  "x[..., ::2]], -1).flatten(-2) * f.repeat_interleave(2, -1).sin())"
                : "(lambda x, f: x * torch.cat([f, f], -1).cos() + torch.cat([-x[..., x.shape[-1] "
                  "// 2:], x[..., :x.shape[-1] // 2]], -1) * torch.cat([f, f], -1).sin())";
        snprintf(e, sizeof e,
                 "torch.cat([%s(t0[..., :%lld], (torch.arange(t0.shape[-2]).double() + %lld)[:, "
                 "None] * (1.0 / (%.17g ** (torch.arange(0, %lld, 2).double() / %lld)))[None, "
                 ":]), t0[..., %lld:]], -1)",
                 rot, R, (long long)cs[c].offset, cs[c].base, R, R, R);
        k[c] = tr_add(e, 1, &x64);
    }
    tr_run();
    for (int c = 0; c < 3; c++) {
        char what[64];
        snprintf(what, sizeof what, "torch case %d, f64", c);
        tr_check_close(what, got[c][0], tr_result(k[c]), 1e-12, 1e-12);
        snprintf(what, sizeof what, "torch case %d, f32", c);
        tr_check_close(what, got[c][1], tr_result(k[c]), 1e-6, 1e-6);
    }
    tr_end();
}

/* The rope cases of grad_cases_attention.h: f64 finite differences in
 * reverse and forward mode, five layouts, and as a static graph; and a
 * second-order gradient (the vjp is the op again). */
static void test_finite_differences(void) {
    size_t n = sizeof grad_cases_attention / sizeof grad_cases_attention[0];
    int seen = 0;
    for (size_t c = 0; c < n; c++) {
        if (strcmp(grad_cases_attention[c].op, "rope")) continue;
        seen++;
        th_seed(200 + c);
        for (int layout = 0; layout < TH_NLAYOUTS; layout++)
            if (!gc_check_case(&grad_cases_attention[c], layout)) break;
        gc_check_static(&grad_cases_attention[c]);
    }
    CHECK(seen >= 3);
    /* d/dx of sum(rope(x)^2 w) twice: the Hessian-vector product against
     * 2 R^T diag(w) R v, computed with the op itself. */
    th_seed(9);
    cn_tensor *x = RND(CN_F64, TH_CONTIG, 2, 5, 6), *w = RND(CN_F64, TH_CONTIG, 2, 5, 6);
    cn_tensor *v = RND(CN_F64, TH_CONTIG, 2, 5, 6), *g, *hv;
    cn_set_requires_grad(x, true);
    cn_rope_opts o = {.offset = 3}, inv = {.offset = 3, .inverse = true};
    cn_tensor *l = cn_sum(cn_mul(cn_square(cn_rope(x, &o)), w), NULL, 0, false);
    CHECK(cn_grad(&l, NULL, 1, &x, 1, &g, CN_GRAD_CREATE_GRAPH) == 0);
    cn_tensor *gv = cn_sum(cn_mul(g, v), NULL, 0, false);
    CHECK(cn_grad(&gv, NULL, 1, &x, 1, &hv, 0) == 0);
    cn_tensor *want = cn_mul_scalar(cn_rope(cn_mul(w, cn_rope(v, &o)), &inv), 2);
    CHECK(hv && cn_allclose(hv, want, 1e-12, 1e-12));
}

/* A placeholder with an unknown batch, compiled and run at two batch
 * sizes: the eager values. */
static void test_static_graph(void) {
    th_seed(6);
    cn_graph *g = cn_graph_new();
    cn_tensor *p = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 2, 5, 8));
    cn_rope_opts o = {.offset = 4, .rotary_dim = 6, .interleaved = true};
    cn_tensor *sy = cn_rope(p, &o);
    cn_program *prog = sy ? cn_compile(g, &sy, 1, NULL) : NULL;
    CHECK_MSG(prog, "compile: %s", cn_last_error());
    for (int64_t B = 1; B <= 3 && prog; B += 2) {
        cn_scope_begin();
        cn_tensor *x = rnd(CN_F32, 4, (int64_t[]){B, 2, 5, 8}, TH_CONTIG), *out = NULL;
        CHECK_EQ_INT(cn_run(prog, &p, &x, 1, &out, 1), 0);
        CHECK(out && cn_allclose(out, cn_rope(x, &o), 0, 0));
        cn_scope_end();
    }
    cn_program_free(prog);
    cn_graph_free(g);
}

static void test_errors(void) {
    cn_tensor *x = cn_ones(CN_F32, CN_SHAPE(2, 3, 6));
    CHECK_ERROR(cn_rope(cn_ones(CN_I64, CN_SHAPE(3, 4)), NULL), "rope: x is i64; rotary embeddings need a float tensor");
    CHECK_ERROR(cn_rope(cn_ones(CN_F32, CN_SHAPE(4)), NULL), "rope: x [4] must have rank 2 or more");
    CHECK_ERROR(cn_rope(cn_ones(CN_F32, CN_SHAPE(3, 5)), NULL), "rotary_dim 5 must be even");
    CHECK_ERROR(cn_rope(x, &(cn_rope_opts){.rotary_dim = 3}), "rotary_dim 3 must be even");
    CHECK_ERROR(cn_rope(x, &(cn_rope_opts){.rotary_dim = 8}), "rotary_dim 8 must be in [0, D]");
    CHECK_ERROR(cn_rope(x, &(cn_rope_opts){.rotary_dim = -2}), "rotary_dim -2");
    CHECK_ERROR(cn_rope(x, &(cn_rope_opts){.offset = -1}), "offset -1 must be >= 0");
    CHECK_ERROR(cn_rope(x, &(cn_rope_opts){.base = -5}), "base -5 must be positive");
    CHECK_ERROR(cn_rope(x, &(cn_rope_opts){.base = INFINITY}), "base inf");
    CHECK(cn_rope(NULL, NULL) == NULL);
    /* An odd D is fine when only an even part turns. */
    CHECK_SHAPE(cn_rope(cn_ones(CN_F32, CN_SHAPE(3, 5)), &(cn_rope_opts){.rotary_dim = 4}), 3, 5);
}

#ifdef CN_HAVE_ONNX
/* ONNX export (Slice, Mul, Sub, Add, Concat, Reshape with cos and sin
 * tables), imported back and run at two batch sizes: the library's values. */
static void test_onnx_export(void) {
    th_seed(7);
    const cn_rope_opts opts[4] = {
        {0},
        {.offset = 9, .rotary_dim = 4, .interleaved = true},
        {.offset = 2, .rotary_dim = 6, .inverse = true, .base = 77},
        {.interleaved = true, .inverse = true},
    };
    for (int v = 0; v < 4; v++) {
        cn_scope_begin();
        cn_dtype dt = v == 3 ? CN_F64 : CN_F32;
        cn_graph *g = cn_graph_new();
        cn_tensor *p = cn_placeholder(g, "x", dt, CN_SHAPE(-1, 2, 5, 8));
        cn_tensor *sy = cn_rope(p, &opts[v]);
        void *buf = NULL;
        size_t size = 0;
        int rc = cn_onnx_export_buffer(g, &sy, 1, &buf, &size, NULL);
        CHECK_MSG(rc == 0, "variant %d: export: %s", v, cn_last_error());
        cn_onnx_model *m = rc == 0 ? cn_onnx_load_buffer(buf, size, NULL, NULL) : NULL;
        CHECK_MSG(rc != 0 || m, "variant %d: import: %s", v, cn_last_error());
        for (int64_t B = 1; m && B <= 3; B += 2) {
            cn_tensor *x = rnd(dt, 4, (int64_t[]){B, 2, 5, 8}, TH_CONTIG), *out[1] = {0};
            CHECK_MSG(cn_onnx_run(m, &x, out) == 0, "run: %s", cn_last_error());
            CHECK_MSG(out[0] && cn_allclose(out[0], cn_rope(x, &opts[v]), 1e-6, 1e-6),
                      "variant %d, batch %lld: ONNX differs", v, (long long)B);
        }
        cn_onnx_free(m);
        free(buf);
        cn_graph_free(g);
        cn_scope_end();
    }
    /* The tables need the sequence length. */
    cn_scope_begin();
    cn_graph *g = cn_graph_new();
    cn_tensor *p = cn_placeholder(g, "x", CN_F32, CN_SHAPE(2, -1, 8));
    cn_tensor *sy = cn_rope(p, NULL);
    void *buf = NULL;
    size_t size = 0;
    CHECK_STATUS_ERROR(cn_onnx_export_buffer(g, &sy, 1, &buf, &size, NULL), "sequence length");
    free(buf);
    cn_graph_free(g);
    cn_scope_end();
}
#endif

int main(void) {
    RUN(test_against_loop);
    RUN(test_f32_large_positions);
    RUN(test_inverse);
    RUN(test_same_bits_any_threads);
    RUN(test_torch);
    RUN(test_finite_differences);
    RUN(test_static_graph);
    RUN(test_errors);
#ifdef CN_HAVE_ONNX
    RUN(test_onnx_export);
#endif
    return th_summary();
}
