/* Convolutions: conv2d, conv1d, conv_transpose2d against PyTorch (computed in
 * this run by python3 + torch, tests/torch_ref.h) over strides, padding,
 * dilation, groups, bias and output padding, in f64 and f32 and in several
 * memory layouts; the fast paths (im2col + GEMM, oneDNN) against the
 * reference loops, including the column tiling, the 1x1 shortcut and the
 * direct depthwise kernel; the same bits at 1 and 2 threads; empty batches;
 * every user error. */
#include "torch_ref.h"

#include "backend/cpu/conv.h"
#include "ops/op.h"

typedef struct conv_case {
    int64_t N, C, H, W, O, KH, KW;
    int64_t sh, sw, ph, pw, dh, dw, groups;
    bool bias;
    int64_t oph, opw; /* transpose only */
} conv_case;

static const conv_case conv_cases[] = {
    {2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},
    {2, 4, 9, 8, 6, 3, 2, 2, 1, 1, 0, 1, 2, 2, true},
    {1, 6, 10, 10, 6, 3, 3, 2, 2, 2, 2, 2, 2, 6, false}, /* depthwise, dilated */
    {3, 2, 5, 5, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, true},    /* 1x1: no columns */
    {2, 2, 6, 7, 2, 1, 1, 2, 2, 0, 0, 1, 1, 1, false},   /* 1x1 with stride */
    {1, 3, 4, 5, 2, 4, 5, 1, 1, 0, 0, 1, 1, 1, true},    /* kernel = image: 1x1 output */
    {2, 4, 33, 70, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},  /* several column tiles */
    {1, 4, 12, 11, 8, 2, 3, 3, 2, 1, 1, 1, 1, 4, true},
    {2, 1, 28, 28, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},  /* the CNN's first layer, smaller */
    {2, 1, 5, 5, 3, 5, 5, 1, 1, 2, 2, 1, 1, 1, false},   /* padding = kernel / 2 */
    /* 1x1 onto 7x7 planes: made transposed (x^T w^T), also in groups */
    {2, 130, 7, 7, 190, 1, 1, 1, 1, 0, 0, 1, 1, 1, true},
    {1, 260, 7, 7, 60, 1, 1, 1, 1, 0, 0, 1, 1, 2, false}, /* 30 a group: 8-channel blocks and 6 */
};

static const conv_case convt_cases[] = {
    {2, 4, 5, 5, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, 1, 1},
    {1, 6, 4, 3, 3, 2, 3, 2, 3, 0, 1, 1, 2, 3, true, 1, 0},
    {2, 3, 3, 3, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, 0, 0}, /* 1x1: no columns */
    {1, 2, 4, 4, 3, 3, 3, 1, 1, 1, 1, 2, 2, 1, true, 1, 1},  /* output_padding < dilation */
    {2, 4, 6, 5, 4, 3, 2, 3, 2, 2, 0, 1, 1, 2, false, 2, 1},
};

#define NCONV (int)(sizeof conv_cases / sizeof conv_cases[0])
#define NCONVT (int)(sizeof convt_cases / sizeof convt_cases[0])

static cn_conv_opts opts_of(const conv_case *c) {
    cn_conv_opts o = {{c->sh, c->sw}, {c->ph, c->pw}, {c->dh, c->dw}, c->groups, {c->oph, c->opw}};
    return o;
}

static void fmt_kwargs(char *buf, size_t n, const conv_case *c, bool transpose) {
    int k = snprintf(buf, n, "stride=(%" PRId64 ",%" PRId64 "), padding=(%" PRId64 ",%" PRId64
                     "), dilation=(%" PRId64 ",%" PRId64 "), groups=%" PRId64,
                     c->sh, c->sw, c->ph, c->pw, c->dh, c->dw, c->groups);
    if (transpose)
        snprintf(buf + k, n - (size_t)k, ", output_padding=(%" PRId64 ",%" PRId64 ")", c->oph,
                 c->opw);
}

/* Inputs of case c in f64, in the given layout: x, w, b. */
static void make_inputs(const conv_case *c, bool transpose, int layout, cn_tensor **x,
                        cn_tensor **w, cn_tensor **b) {
    int64_t Cg = c->C / c->groups;
    *x = th_random(CN_F64, CN_SHAPE(c->N, c->C, c->H, c->W), -1, 1, layout, NULL);
    if (transpose) {
        *w = th_random(CN_F64, CN_SHAPE(c->C, c->O / c->groups, c->KH, c->KW), -1, 1,
                       (layout + 1) % TH_NLAYOUTS, NULL);
        *b = c->bias ? th_random(CN_F64, CN_SHAPE(c->O), -1, 1, TH_REVERSED, NULL) : NULL;
    } else {
        *w = th_random(CN_F64, CN_SHAPE(c->O, Cg, c->KH, c->KW), -1, 1,
                       (layout + 1) % TH_NLAYOUTS, NULL);
        *b = c->bias ? th_random(CN_F64, CN_SHAPE(c->O), -1, 1, TH_REVERSED, NULL) : NULL;
    }
}

static cn_tensor *apply(bool transpose, cn_tensor *x, cn_tensor *w, cn_tensor *b,
                        const cn_conv_opts *o) {
    return transpose ? cn_conv_transpose2d(x, w, b, o) : cn_conv2d(x, w, b, o);
}

/* Inputs and torch's case numbers of one table. */
typedef struct queued {
    cn_tensor *x[16], *w[16], *b[16];
    int id[16];
} queued;

static void queue_cases(bool transpose, queued *q) {
    const conv_case *cases = transpose ? convt_cases : conv_cases;
    int n = transpose ? NCONVT : NCONV;
    for (int k = 0; k < n; k++) {
        char kw[256], expr[400];
        make_inputs(&cases[k], transpose, k % TH_NLAYOUTS, &q->x[k], &q->w[k], &q->b[k]);
        fmt_kwargs(kw, sizeof kw, &cases[k], transpose);
        snprintf(expr, sizeof expr, "F.conv%s2d(t0, t1, %s, %s)", transpose ? "_transpose" : "",
                 q->b[k] ? "t2" : "None", kw);
        cn_tensor *in[3] = {q->x[k], q->w[k], q->b[k]};
        q->id[k] = tr_add(expr, q->b[k] ? 3 : 2, in);
    }
}

/* Every case of a table against torch, f64 and f32, with each implementation. */
static void check_cases(bool transpose, const queued *q) {
    const conv_case *cases = transpose ? convt_cases : conv_cases;
    int n = transpose ? NCONVT : NCONV;
    cn_conv_impl impls[4] = {CN_CONV_REF, CN_CONV_GEMM, CN_CONV_DNNL, CN_CONV_DEPTHWISE};
    for (int m = 0; m < 4; m++) {
        if (impls[m] == CN_CONV_DNNL && !cn_conv_have_dnnl()) continue;
        cn_conv_impl prev = cn_conv_set_impl(impls[m]);
        for (int k = 0; k < n; k++) {
            cn_scope_begin();
            cn_conv_opts o = opts_of(&cases[k]);
            cn_tensor *x = q->x[k], *w = q->w[k], *b = q->b[k];
            char what[128];
            snprintf(what, sizeof what, "%s case %d impl %d f64", transpose ? "convT" : "conv", k,
                     (int)impls[m]);
            tr_check_close(what, apply(transpose, x, w, b, &o), tr_result(q->id[k]), 1e-10,
                           1e-10);
            snprintf(what, sizeof what, "%s case %d impl %d f32", transpose ? "convT" : "conv", k,
                     (int)impls[m]);
            cn_tensor *y = apply(transpose, cn_cast(x, CN_F32), cn_cast(w, CN_F32),
                                 b ? cn_cast(b, CN_F32) : NULL, &o);
            CHECK(y && cn_tensor_dtype(y) == CN_F32);
            tr_check_close(what, y, tr_result(q->id[k]), 1e-4, 1e-4);
            cn_scope_end();
        }
        cn_conv_set_impl(prev);
    }
}

/* conv2d, conv_transpose2d and conv1d against torch: one python3 for all. */
static void test_against_torch(void) {
    static queued qc, qt;
    th_seed(7);
    tr_begin();
    queue_cases(false, &qc);
    queue_cases(true, &qt);
    cn_tensor *x = th_random(CN_F64, CN_SHAPE(2, 4, 13), -1, 1, TH_TRANSPOSED, NULL);
    cn_tensor *w = th_random(CN_F64, CN_SHAPE(6, 2, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *b = th_random(CN_F64, CN_SHAPE(6), -1, 1, TH_CONTIG, NULL);
    cn_tensor *x1 = th_random(CN_F64, CN_SHAPE(3, 9), -1, 1, TH_CONTIG, NULL);
    cn_tensor *w1 = th_random(CN_F64, CN_SHAPE(2, 3, 4), -1, 1, TH_REVERSED, NULL);
    int k0 = tr_add("F.conv1d(t0, t1, t2, stride=2, padding=2, dilation=2, groups=2)", 3,
                    (cn_tensor *[]){x, w, b});
    int k1 = tr_add("F.conv1d(t0, t1, None, padding=1)", 2, (cn_tensor *[]){x1, w1});
    tr_run();

    check_cases(false, &qc);
    check_cases(true, &qt);
    /* conv1d: the height entries of the pairs are ignored */
    cn_conv_opts o = {{2, 5}, {2, 7}, {2, 3}, 2, {0, 0}};
    tr_check_close("conv1d", cn_conv1d(x, w, b, &o), tr_result(k0), 1e-10, 1e-10);
    cn_tensor *y1 = cn_conv1d(x1, w1, NULL, &(cn_conv_opts){.padding = {1, 0}});
    CHECK_SHAPE(y1, 2, 8);
    tr_check_close("conv1d unbatched", y1, tr_result(k1), 1e-10, 1e-10);
    tr_end();
}

/* An unbatched image [C, H, W] is a batch of one. */
static void test_unbatched(void) {
    th_seed(5);
    cn_tensor *x = th_random(CN_F64, CN_SHAPE(3, 6, 5), -1, 1, TH_CONTIG, NULL);
    cn_tensor *w = th_random(CN_F64, CN_SHAPE(2, 3, 3, 3), -1, 1, TH_CONTIG, NULL);
    cn_conv_opts o = {.padding = {1, 1}};
    cn_tensor *y = cn_conv2d(x, w, NULL, &o);
    CHECK_SHAPE(y, 2, 6, 5);
    cn_tensor *y4 = cn_conv2d(cn_unsqueeze(x, 0), w, NULL, &o);
    CHECK(cn_equal(y, cn_squeeze(y4, 0)));
    cn_tensor *t = cn_conv_transpose2d(y, w, NULL, &o);
    CHECK_SHAPE(t, 3, 6, 5);
}

/* conv2d's output size for case c. */
static void out_size(const conv_case *c, int64_t *OH, int64_t *OW) {
    *OH = (c->H + 2 * c->ph - c->dh * (c->KH - 1) - 1) / c->sh + 1;
    *OW = (c->W + 2 * c->pw - c->dw * (c->KW - 1) - 1) / c->sw + 1;
}

/* conv2d (r[0]), its weight gradient (r[1]) and its input gradient (r[2],
 * conv_transpose2d sized back to x, as conv2d's gradient uses it) of case c
 * with dy as y's gradient. */
static void products(const conv_case *c, cn_tensor *x, cn_tensor *w, cn_tensor *b, cn_tensor *dy,
                     cn_tensor *r[3]) {
    cn_conv_opts o = opts_of(c);
    cn_attrs a = {.i = {c->groups, c->KH, c->KW},
                  .nlist = 6,
                  .list = {c->sh, c->sw, c->ph, c->pw, c->dh, c->dw}};
    int64_t OH, OW;
    out_size(c, &OH, &OW);
    cn_attrs at = {.i = {c->groups},
                   .nlist = 8,
                   .list = {c->sh, c->sw, c->ph, c->pw, c->dh, c->dw,
                            c->H - ((OH - 1) * c->sh - 2 * c->ph + c->dh * (c->KH - 1) + 1),
                            c->W - ((OW - 1) * c->sw - 2 * c->pw + c->dw * (c->KW - 1) + 1)}};
    r[0] = cn_conv2d(x, w, b, &o);
    r[1] = cn_op_apply(CN_OP_conv2d_weight_grad, (cn_tensor *[]){x, dy}, 2, &a);
    r[2] = cn_op_apply(CN_OP_conv_transpose2d, (cn_tensor *[]){dy, w}, 2, &at);
    CHECK_SHAPE(r[2], c->N, c->C, c->H, c->W);
}

/* Random inputs of case c in dtype dt (layouts picked by k): x, w, b, dy. */
static void random_inputs(const conv_case *c, cn_dtype dt, int k, cn_tensor *in[4]) {
    int64_t OH, OW;
    out_size(c, &OH, &OW);
    in[0] = th_random(dt, CN_SHAPE(c->N, c->C, c->H, c->W), -1, 1, k % TH_NLAYOUTS, NULL);
    in[1] = th_random(dt, CN_SHAPE(c->O, c->C / c->groups, c->KH, c->KW), -1, 1,
                      (k + 2) % TH_NLAYOUTS, NULL);
    in[2] = c->bias ? th_random(dt, CN_SHAPE(c->O), -1, 1, TH_CONTIG, NULL) : NULL;
    in[3] = th_random(dt, CN_SHAPE(c->N, c->O, OH, OW), -1, 1, TH_TRANSPOSED, NULL);
}

/* The three products of case c with implementation impl against the
 * reference loops' (ref). */
static void check_products(const char *label, const conv_case *c, cn_dtype dt, cn_tensor *in[4],
                           cn_tensor *ref[3], cn_conv_impl impl) {
    cn_conv_impl prev = cn_conv_set_impl(impl);
    cn_tensor *r[3];
    products(c, in[0], in[1], in[2], in[3], r);
    cn_conv_set_impl(prev);
    double tol = dt == CN_F32 ? 2e-5 : 1e-12;
    char what[240];
    snprintf(what, sizeof what,
             "%s impl %d (%s N%" PRId64 " C%" PRId64 " %" PRId64 "x%" PRId64 " O%" PRId64
             " k%" PRId64 "x%" PRId64 " s%" PRId64 ",%" PRId64 " g%" PRId64 ")",
             label, (int)impl, cn_dtype_name(dt), c->N, c->C, c->H, c->W, c->O, c->KH, c->KW,
             c->sh, c->sw, c->groups);
    tr_check_close(what, r[0], ref[0], tol, tol);
    tr_check_close(what, r[1], ref[1], tol * 10, tol * 10);
    tr_check_close(what, r[2], ref[2], tol, tol);
}

/* The fast products against the reference loops on random geometries,
 * including the weight gradient and the conv_transpose2d (input gradient)
 * kernels, f32 and f64. */
static void test_fast_vs_reference(void) {
    th_seed(99);
    for (int it = 0; it < 40; it++) {
        cn_scope_begin();
        int64_t groups = th_randint(1, 4), Cg = th_randint(1, 4), Og = th_randint(1, 4);
        int64_t KH = th_randint(1, 4), KW = th_randint(1, 4);
        int64_t sh = th_randint(1, 4), sw = th_randint(1, 4), dh = th_randint(1, 3),
                dw = th_randint(1, 3);
        int64_t ph = th_randint(0, 3), pw = th_randint(0, 3);
        int64_t H = th_randint(1, 20), W = th_randint(1, 20), N = th_randint(1, 5);
        if (it == 0) { /* long rows: several column tiles */
            H = 70, W = 90, KH = KW = 3, sh = sw = dh = dw = 1, ph = pw = 1;
        }
        if (H + 2 * ph < dh * (KH - 1) + 1) H = dh * (KH - 1) + 1;
        if (W + 2 * pw < dw * (KW - 1) + 1) W = dw * (KW - 1) + 1;
        cn_dtype dt = it % 2 ? CN_F32 : CN_F64;
        conv_case c = {N, Cg * groups, H, W, Og * groups, KH, KW, sh, sw, ph, pw, dh, dw, groups,
                       it % 3 != 0};
        cn_tensor *in[4], *ref[3];
        random_inputs(&c, dt, it, in);
        cn_conv_impl prev = cn_conv_set_impl(CN_CONV_REF);
        products(&c, in[0], in[1], in[2], in[3], ref);
        cn_conv_set_impl(prev);
        char label[32];
        snprintf(label, sizeof label, "iteration %d", it);
        check_products(label, &c, dt, in, ref, CN_CONV_GEMM);
        if (cn_conv_have_dnnl()) check_products(label, &c, dt, in, ref, CN_CONV_DNNL);
        cn_scope_end();
    }
}

/* The direct depthwise kernel against the reference loops over the
 * geometries it takes, f32 and f64, at every instruction-set level this CPU
 * runs (f32 at the AVX-512 level has 64-byte vectors of its own), and the
 * same bits at 1 and 2 threads. */
static void test_depthwise(void) {
    static const conv_case cases[] = {
        {2, 3, 9, 11, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, true},    /* MobileNet's 3x3 */
        {1, 4, 10, 9, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4, true},    /* stride 2 */
        {2, 2, 11, 13, 4, 3, 3, 1, 2, 2, 1, 2, 2, 2, false},  /* dilation 2, multiplier 2 */
        {1, 3, 1, 1, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, true},     /* 1-pixel planes */
        {2, 2, 9, 10, 2, 7, 7, 1, 1, 3, 3, 1, 1, 2, true},    /* ConvNeXt's 7x7 */
        {1, 3, 12, 17, 6, 5, 5, 2, 3, 2, 0, 1, 1, 3, true},   /* 5x5, strides 2 and 3 */
        {1, 2, 15, 16, 2, 7, 7, 2, 2, 3, 3, 1, 1, 2, true},   /* 7x7, stride 2 */
        {3, 2, 5, 6, 2, 2, 3, 3, 2, 0, 3, 2, 1, 2, false},    /* padding wider than the kernel */
        {9, 16, 6, 19, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16, true}, /* several items per thread */
        {1, 2, 8, 13, 2, 3, 3, 2, 2, 0, 0, 1, 1, 2, true},    /* stride 2, no padding, odd width */
        {1, 2, 7, 20, 2, 5, 5, 2, 2, 2, 1, 1, 1, 2, true},    /* stride 2, padding 1 on a side */
        {1, 2, 16, 40, 2, 3, 3, 2, 2, 1, 1, 1, 1, 2, true},   /* stride 2, 20 columns: 2 vectors */
        {2, 3, 6, 16, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, true},    /* 16 columns: 2 vectors exactly */
        /* rows for 64-byte vectors (AVX-512): 37 columns, a block of 32 and
         * an overlapping vector; stride 2 onto 19; 5x5 onto 12 (one vector,
         * its store spilling into the next row); 7x7 onto 9 */
        {1, 2, 9, 37, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, true},
        {1, 2, 10, 38, 2, 3, 3, 2, 2, 1, 1, 1, 1, 2, true},
        {2, 2, 7, 12, 2, 5, 5, 1, 1, 2, 2, 1, 1, 2, true},
        {1, 3, 8, 9, 6, 7, 7, 1, 1, 3, 3, 1, 1, 3, false},
        /* forward planes whose buffers pass 32 KB go in bands of output
         * rows (35 rows: 8, 8, 8, 11; 80 rows, multiplier 2); stride-2
         * rows split in whole vectors, the last overlapping, or (13
         * columns: 64-byte vectors at AVX-512) in one masked vector */
        {1, 2, 70, 120, 2, 3, 3, 2, 2, 1, 1, 1, 1, 2, true},
        {1, 2, 80, 100, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2, true},
        {2, 2, 38, 67, 2, 5, 5, 2, 2, 0, 0, 1, 1, 2, false},
        {1, 3, 12, 26, 3, 3, 3, 2, 2, 1, 1, 1, 1, 3, true},
        /* padding 4 on 10 columns: the masked odd half reaches one
         * element into the next row; 299 rows of 13 columns: bands with
         * the masked split (64-byte vectors) */
        {1, 2, 12, 10, 2, 3, 3, 2, 2, 4, 4, 1, 1, 2, true},
        {1, 1, 600, 26, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, true},
        /* stride 1, padded rows in one or two aligned vectors (the
         * aligned-rows kernel): 7 columns (64-byte vectors, a whole
         * store reaching two rows on), 5 rows of 6 columns in two f64
         * vectors, 600 rows of 12 in bands, 5x5 onto 7 columns; stride 2,
         * rows split into halves of one or two vectors: 3x3 onto 7x7,
         * 17x17 unpadded, 5x5 onto 8x7 */
        {1, 3, 7, 7, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, false},
        {2, 2, 5, 6, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, true},
        {1, 2, 600, 12, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, true},
        {1, 2, 9, 7, 4, 5, 5, 1, 1, 2, 2, 1, 1, 2, true},
        {1, 2, 14, 14, 2, 3, 3, 2, 2, 1, 1, 1, 1, 2, false},
        {2, 2, 17, 17, 2, 3, 3, 2, 2, 0, 0, 1, 1, 2, true},
        {1, 2, 15, 14, 2, 5, 5, 2, 2, 2, 2, 1, 1, 2, true},
        /* read in place (stride 2, and stride 1 with two vectors a row):
         * multiplier 2, three samples (the rows at x's ends copied) */
        {3, 2, 14, 14, 4, 3, 3, 2, 2, 1, 1, 1, 1, 2, true},
        {3, 2, 9, 20, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, false},
    };
    th_seed(33);
    int nt = cn_get_num_threads();
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++)
        for (int d = 0; d < 2; d++) {
            cn_scope_begin();
            const conv_case *c = &cases[k];
            cn_dtype dt = d ? CN_F32 : CN_F64;
            cn_tensor *in[4], *ref[3], *r[2][3];
            random_inputs(c, dt, k, in);
            cn_conv_impl prev = cn_conv_set_impl(CN_CONV_REF);
            products(c, in[0], in[1], in[2], in[3], ref);
            cn_conv_set_impl(prev);
            char label[32];
            int level = cn_isa();
            for (int l = 0; l < CN_ISA_LEVELS; l++)
                if (cn_isa_available(l)) {
                    cn_isa_set(l);
                    snprintf(label, sizeof label, "depthwise case %d %s", k, cn_isa_name(l));
                    check_products(label, c, dt, in, ref, CN_CONV_DEPTHWISE);
                }
            cn_isa_set(level);
            snprintf(label, sizeof label, "depthwise case %d", k);
            for (int t = 0; t < 2; t++) {
                cn_set_num_threads(t + 1);
                products(c, in[0], in[1], in[2], in[3], r[t]);
            }
            cn_set_num_threads(nt);
            for (int p = 0; p < 3; p++)
                CHECK_MSG(cn_equal(r[0][p], r[1][p]), "%s %s: product %d differs at 2 threads",
                          label, cn_dtype_name(dt), p);
            cn_scope_end();
        }
}

/* An inf in an input column that no window reads (right of the last one,
 * stride 2) stays out of the depthwise weight gradient: the reference gives
 * dy * x over the two columns read. */
static void test_depthwise_unread_inf(void) {
    const conv_case c = {1, 1, 1, 3, 1, 1, 2, 1, 2, 0, 0, 1, 1, 1, false};
    float xv[3] = {1, 2, INFINITY}, wv[2] = {1, 1}, dyv[1] = {3};
    cn_tensor *x = cn_from_data(CN_F32, CN_SHAPE(1, 1, 1, 3), xv);
    cn_tensor *w = cn_from_data(CN_F32, CN_SHAPE(1, 1, 1, 2), wv);
    cn_tensor *dy = cn_from_data(CN_F32, CN_SHAPE(1, 1, 1, 1), dyv);
    cn_conv_impl prev = cn_conv_set_impl(CN_CONV_DEPTHWISE);
    cn_tensor *r[3];
    products(&c, x, w, NULL, dy, r);
    cn_conv_set_impl(prev);
    CHECK_CLOSE(cn_get(r[1], (int64_t[]){0, 0, 0, 0}), 3, 0, 0);
    CHECK_CLOSE(cn_get(r[1], (int64_t[]){0, 0, 0, 1}), 6, 0, 0);
    CHECK_CLOSE(cn_get(r[0], (int64_t[]){0, 0, 0, 0}), 3, 0, 0);
}

/* The names CN_CONV takes. */
static void test_impl_names(void) {
    CHECK(cn_conv_impl_from_name("auto") == CN_CONV_AUTO);
    CHECK(cn_conv_impl_from_name("ref") == CN_CONV_REF);
    CHECK(cn_conv_impl_from_name("gemm") == CN_CONV_GEMM);
    CHECK(cn_conv_impl_from_name("dnnl") == CN_CONV_DNNL);
    CHECK(cn_conv_impl_from_name("depthwise") == CN_CONV_DEPTHWISE);
    CHECK(cn_conv_impl_from_name("GEMM") == -1);
    CHECK(cn_conv_impl_from_name("") == -1);
    CHECK(cn_conv_impl_from_name(NULL) == -1);
}

/* The reference loops themselves against a tiny hand computation. */
static void test_reference_by_hand(void) {
    /* x = 1..9 in a 3x3 image, w = [[1, 0], [0, -1]]: y = x[i][j] - x[i+1][j+1] = -4 */
    cn_tensor *x = cn_arange(1, 10, 1, CN_F64);
    x = cn_reshape(x, CN_SHAPE(1, 1, 3, 3));
    cn_tensor *w = cn_from_data(CN_F64, CN_SHAPE(1, 1, 2, 2), (double[]){1, 0, 0, -1});
    cn_conv_impl prev = cn_conv_set_impl(CN_CONV_REF);
    cn_tensor *y = cn_conv2d(x, w, NULL, NULL);
    CHECK_SHAPE(y, 1, 1, 2, 2);
    for (int k = 0; k < 4; k++) CHECK_CLOSE(th_at(y, k), -4, 0, 0);
    /* stride 2 with padding 1: windows at (-1,-1), (-1,1), (1,-1), (1,1) */
    y = cn_conv2d(x, w, NULL, &(cn_conv_opts){.stride = {2, 2}, .padding = {1, 1}});
    double want[4] = {-1, -3, -7, 5 - 9};
    for (int k = 0; k < 4; k++) CHECK_CLOSE(th_at(y, k), want[k], 0, 0);
    cn_conv_set_impl(prev);
}

/* Same bits at 1 and 2 threads (the batch is split across threads, and the
 * weight gradient sums over it). */
static void test_threads_same_bits(void) {
    th_seed(21);
    int nt = cn_get_num_threads();
    cn_tensor *x = th_random(CN_F32, CN_SHAPE(9, 8, 14, 14), -1, 1, TH_CONTIG, NULL);
    cn_tensor *w = th_random(CN_F32, CN_SHAPE(16, 8, 3, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *b = th_random(CN_F32, CN_SHAPE(16), -1, 1, TH_CONTIG, NULL);
    cn_tensor *dy = th_random(CN_F32, CN_SHAPE(9, 16, 14, 14), -1, 1, TH_CONTIG, NULL);
    cn_conv_opts o = {.padding = {1, 1}};
    cn_attrs a = {.i = {1, 3, 3}, .nlist = 6, .list = {1, 1, 1, 1, 1, 1}};
    cn_tensor *r[2][3];
    for (int t = 0; t < 2; t++) {
        cn_set_num_threads(t + 1);
        r[t][0] = cn_conv2d(x, w, b, &o);
        r[t][1] = cn_conv_transpose2d(dy, w, NULL, &o);
        r[t][2] = cn_op_apply(CN_OP_conv2d_weight_grad, (cn_tensor *[]){x, dy}, 2, &a);
    }
    cn_set_num_threads(nt);
    for (int k = 0; k < 3; k++) CHECK_MSG(cn_equal(r[0][k], r[1][k]), "product %d differs", k);

    /* The forward product on the GEMM path cuts a sample's pixels into
     * tiles by the thread count (conv.c, balance_tiles): 56x56 planes, 1x1
     * over 24 channels (two tiles of setup's, equal ones here) and 3x3
     * over 8 (four); 28x28, 3x3 over 32, where 30 threads would leave a
     * last tile of one pixel (the GEMM's matrix-vector path); at 1, 2, 3
     * and 30 threads, against the reference loops. */
    static const int64_t shapes[3][4] = {{24, 1, 0, 56}, {8, 3, 1, 56}, {32, 3, 1, 28}};
    static const int nthr[4] = {1, 2, 3, 30};
    cn_conv_impl prev = cn_conv_set_impl(CN_CONV_GEMM);
    for (int s = 0; s < 3; s++) {
        int64_t C = shapes[s][0], K = shapes[s][1], pad = shapes[s][2], H = shapes[s][3];
        cn_tensor *xs = th_random(CN_F32, CN_SHAPE(1, C, H, H), -1, 1, TH_CONTIG, NULL);
        cn_tensor *ws = th_random(CN_F32, CN_SHAPE(40, C, K, K), -1, 1, TH_CONTIG, NULL);
        cn_conv_opts os = {.padding = {pad, pad}};
        cn_tensor *y[4];
        for (int t = 0; t < 4; t++) {
            cn_set_num_threads(nthr[t]);
            y[t] = cn_conv2d(xs, ws, NULL, &os);
        }
        cn_set_num_threads(nt);
        cn_conv_set_impl(CN_CONV_REF);
        cn_tensor *ref = cn_conv2d(xs, ws, NULL, &os);
        cn_conv_set_impl(CN_CONV_GEMM);
        CHECK_MSG(cn_equal(y[0], y[1]) && cn_equal(y[0], y[2]) && cn_equal(y[0], y[3]),
                  "%" PRId64 "x%" PRId64 " over %" PRId64 " channels: the bits depend on the threads",
                  K, K, C);
        tr_check_close("tiled forward", y[1], ref, 2e-5, 2e-5);
    }
    cn_conv_set_impl(prev);
}

static void test_empty_and_half(void) {
    cn_tensor *x = cn_zeros(CN_F32, CN_SHAPE(0, 2, 5, 5));
    cn_tensor *w = cn_ones(CN_F32, CN_SHAPE(3, 2, 3, 3));
    cn_tensor *y = cn_conv2d(x, w, NULL, NULL);
    CHECK_SHAPE(y, 0, 3, 3, 3);
    cn_attrs a = {.i = {1, 3, 3}, .nlist = 6, .list = {1, 1, 0, 0, 1, 1}};
    cn_tensor *gw = cn_op_apply(CN_OP_conv2d_weight_grad, (cn_tensor *[]){x, y}, 2, &a);
    CHECK_SHAPE(gw, 3, 2, 3, 3);
    CHECK(gw && cn_item(cn_sum(cn_abs(gw), NULL, 0, false)) == 0);
    /* zero input channels: the bias alone */
    cn_tensor *y0 = cn_conv2d(cn_ones(CN_F32, CN_SHAPE(1, 0, 4, 4)),
                              cn_ones(CN_F32, CN_SHAPE(2, 0, 3, 3)),
                              cn_full(CN_F32, CN_SHAPE(2), 1.5), NULL);
    CHECK_SHAPE(y0, 1, 2, 2, 2);
    CHECK(y0 && th_at(y0, 7) == 1.5);

    /* f16 computes in f32 and comes back as f16 */
    th_seed(8);
    cn_tensor *xh = th_random(CN_F16, CN_SHAPE(1, 2, 5, 5), -1, 1, TH_CONTIG, NULL);
    cn_tensor *wh = th_random(CN_F16, CN_SHAPE(2, 2, 3, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *yh = cn_conv2d(xh, wh, NULL, NULL);
    CHECK(yh && cn_tensor_dtype(yh) == CN_F16);
    cn_tensor *yf = cn_conv2d(cn_cast(xh, CN_F32), cn_cast(wh, CN_F32), NULL, NULL);
    CHECK(yh && cn_allclose(cn_cast(yh, CN_F32), yf, 1e-2, 1e-2));
}

static void test_errors(void) {
    cn_tensor *x = cn_ones(CN_F32, CN_SHAPE(1, 3, 5, 5));
    cn_tensor *w = cn_ones(CN_F32, CN_SHAPE(4, 3, 3, 3));
    CHECK_ERROR(cn_conv2d(x, cn_ones(CN_F32, CN_SHAPE(4, 2, 3, 3)), NULL, NULL),
                "has 3 channels, but weight [4, 2, 3, 3] with groups = 1 expects 2");
    CHECK_ERROR(cn_conv2d(x, w, NULL, &(cn_conv_opts){.groups = 3}), "does not divide");
    CHECK_ERROR(cn_conv2d(x, cn_ones(CN_F32, CN_SHAPE(4, 3, 7, 3)), NULL, NULL),
                "padded input size 5 is smaller than the kernel, 7");
    CHECK_ERROR(cn_conv2d(x, w, NULL, &(cn_conv_opts){.dilation = {3, 1}}),
                "smaller than the kernel, 3 (dilated: 7)");
    CHECK_ERROR(cn_conv2d(x, cn_ones(CN_F64, CN_SHAPE(4, 3, 3, 3)), NULL, NULL),
                "x is f32 but weight is f64");
    CHECK_ERROR(cn_conv2d(cn_ones(CN_I64, CN_SHAPE(1, 3, 5, 5)), w, NULL, NULL),
                "x is i64; convolutions need float tensors");
    CHECK_ERROR(cn_conv2d(x, cn_ones(CN_F32, CN_SHAPE(4, 3, 3)), NULL, NULL),
                "weight must be 4-D [out_channels, in_channels / groups, kH, kW], got [4, 3, 3]");
    CHECK_ERROR(cn_conv2d(cn_ones(CN_F32, CN_SHAPE(5, 5)), w, NULL, NULL),
                "x must be 4-D [N, C, H, W], got [5, 5]");
    CHECK_ERROR(cn_conv2d(x, w, cn_ones(CN_F32, CN_SHAPE(3)), NULL),
                "bias must be 1-D with 4 elements");
    CHECK_ERROR(cn_conv2d(x, w, NULL, &(cn_conv_opts){.stride = {-1, 1}}),
                "stride must be positive");
    CHECK_ERROR(cn_conv2d(x, w, NULL, &(cn_conv_opts){.padding = {0, -2}}),
                "padding must be non-negative");
    CHECK_ERROR(cn_conv2d(x, w, NULL, &(cn_conv_opts){.groups = -2}), "groups must be positive");
    CHECK_ERROR(cn_conv_transpose2d(x, w, NULL, &(cn_conv_opts){.output_padding = {1, 0}}),
                "output_padding (1, 0) must be smaller than either stride (1, 1) or dilation");
    CHECK_ERROR(cn_conv_transpose2d(cn_ones(CN_F32, CN_SHAPE(1, 2, 5, 5)), w, NULL, NULL),
                "x [1, 2, 5, 5] has 2 channels, but weight [4, 3, 3, 3] expects 4");
    CHECK_ERROR(cn_conv_transpose2d(cn_ones(CN_F32, CN_SHAPE(1, 4, 1, 1)), w, NULL,
                                    &(cn_conv_opts){.padding = {2, 2}}),
                "non-positive output size");
    CHECK_ERROR(cn_conv1d(cn_ones(CN_F32, CN_SHAPE(1, 3, 5)), w, NULL, NULL),
                "conv1d: weight must be 3-D");
    CHECK_ERROR(cn_conv1d(cn_ones(CN_F32, CN_SHAPE(4)), w, NULL, NULL),
                "conv1d: x must be 3-D [N, C, L] or 2-D [C, L]");
    CHECK(cn_conv2d(NULL, w, NULL, NULL) == NULL);
    cn_attrs a = {.i = {1, 3, 3}, .nlist = 6, .list = {1, 1, 0, 0, 1, 1}};
    CHECK_ERROR(cn_op_apply(CN_OP_conv2d_weight_grad,
                            (cn_tensor *[]){x, cn_ones(CN_F32, CN_SHAPE(1, 4, 2, 3))}, 2, &a),
                "does not match conv2d's output size 3x3");
}

int main(void) {
    RUN(test_reference_by_hand);
    RUN(test_against_torch);
    RUN(test_unbatched);
    RUN(test_fast_vs_reference);
    RUN(test_depthwise);
    RUN(test_impl_names);
    RUN(test_depthwise_unread_inf);
    RUN(test_threads_same_bits);
    RUN(test_empty_and_half);
    RUN(test_errors);
    return th_summary();
}
