/* Pooling: max_pool2d (values and indices), avg_pool2d and
 * adaptive_avg_pool2d against PyTorch (computed in this run by python3 +
 * torch, tests/torch_ref.h) over kernels, strides, padding, dilation,
 * ceil_mode, count_include_pad and divisor_override, in f64 and f32 and
 * several layouts; ties and NaN; the backward ops against naive loops; every
 * user error. */
#include "torch_ref.h"

#include "ops/op.h"

typedef struct pool_case {
    int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw;
    bool ceil_mode, exclude_pad;
    int64_t divisor;
} pool_case;

static const pool_case max_cases[] = {
    {2, 3, 8, 8, 2, 2, 2, 2, 0, 0, 1, 1, false},
    {1, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, true},
    {2, 2, 10, 9, 3, 2, 2, 1, 1, 1, 2, 1, false},
    {1, 1, 5, 5, 2, 2, 2, 2, 0, 0, 1, 1, true},
    {1, 3, 6, 7, 3, 3, 1, 1, 1, 1, 2, 2, true},
    {2, 2, 9, 6, 4, 3, 3, 2, 2, 1, 1, 2, true},
    {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, false},
};

static const pool_case avg_cases[] = {
    {2, 3, 8, 8, 2, 2, 2, 2, 0, 0, 1, 1, false, false, 0},
    {1, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, true, false, 0},
    {1, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, true, true, 0},
    {2, 2, 10, 9, 3, 2, 2, 1, 1, 1, 1, 1, true, true, 0},
    {2, 2, 10, 9, 3, 2, 2, 1, 1, 1, 1, 1, false, false, 3},
    {1, 3, 5, 6, 4, 4, 3, 3, 2, 2, 1, 1, true, false, 0},
};

static const int64_t adaptive_cases[][6] = {
    /* N, C, H, W, OH, OW */
    {2, 3, 7, 9, 3, 4}, {1, 2, 8, 8, 1, 1}, {1, 2, 5, 6, 5, 6}, {2, 1, 9, 7, 5, 2}, {1, 2, 3, 4, 5, 7},
};

#define NMAX (int)(sizeof max_cases / sizeof max_cases[0])
#define NAVG (int)(sizeof avg_cases / sizeof avg_cases[0])
#define NAD (int)(sizeof adaptive_cases / sizeof adaptive_cases[0])

static cn_pool_opts opts_of(const pool_case *c) {
    cn_pool_opts o = {{c->kh, c->kw}, {c->sh, c->sw}, {c->ph, c->pw}, {c->dh, c->dw},
                      c->ceil_mode,   c->exclude_pad, c->divisor};
    return o;
}

static cn_tensor *do_max(cn_tensor *x, const void *o) { return cn_max_pool2d(x, o); }
static cn_tensor *do_idx(cn_tensor *x, const void *o) { return cn_max_pool2d_indices(x, o); }
static cn_tensor *do_avg(cn_tensor *x, const void *o) { return cn_avg_pool2d(x, o); }
static cn_tensor *do_adaptive(cn_tensor *x, const void *s) {
    const int64_t *hw = s;
    return cn_adaptive_avg_pool2d(x, hw[0], hw[1]);
}

static void check_both(const char *what, cn_tensor *x, cn_tensor *(*fn)(cn_tensor *, const void *),
                       const void *arg, cn_tensor *want) {
    char w[160];
    snprintf(w, sizeof w, "%s f64", what);
    tr_check_close(w, fn(x, arg), want, 1e-12, 1e-12);
    snprintf(w, sizeof w, "%s f32", what);
    cn_tensor *y = fn(cn_cast(x, CN_F32), arg);
    CHECK(y && cn_tensor_dtype(y) == (fn == do_idx ? CN_I64 : CN_F32));
    tr_check_close(w, y, want, 1e-5, 1e-5);
}

/* Every case against torch; one python3 for all of them. */
static void test_against_torch(void) {
    cn_tensor *xm[NMAX + 2], *xa[NAVG], *xd[NAD];
    int im[NMAX + 2], ii[NMAX + 2], ia[NAVG], id[NAD];
    th_seed(17);
    tr_begin();
    char e[400];
    for (int k = 0; k < NMAX; k++) {
        const pool_case *c = &max_cases[k];
        xm[k] = th_random(CN_F64, CN_SHAPE(c->N, c->C, c->H, c->W), -1, 1, k % TH_NLAYOUTS, NULL);
        char args[200];
        snprintf(args, sizeof args,
                 "(%" PRId64 ",%" PRId64 "), (%" PRId64 ",%" PRId64 "), (%" PRId64 ",%" PRId64
                 "), (%" PRId64 ",%" PRId64 "), %s",
                 c->kh, c->kw, c->sh, c->sw, c->ph, c->pw, c->dh, c->dw,
                 c->ceil_mode ? "True" : "False");
        snprintf(e, sizeof e, "F.max_pool2d(t0, %s)", args);
        im[k] = tr_add(e, 1, &xm[k]);
        snprintf(e, sizeof e, "F.max_pool2d(t0, %s, return_indices=True)[1]", args);
        ii[k] = tr_add(e, 1, &xm[k]);
    }
    /* ties (small integers) and NaN, with the first case's window */
    {
        int64_t n = 2 * 3 * 8 * 8;
        double *v = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) v[i] = (double)th_randint(0, 3);
        xm[NMAX] = th_make(CN_F64, CN_SHAPE(2, 3, 8, 8), v, TH_TRANSPOSED);
        v[5] = v[77] = v[78] = NAN;
        v[200] = -INFINITY;
        xm[NMAX + 1] = th_make(CN_F64, CN_SHAPE(2, 3, 8, 8), v, TH_CONTIG);
        free(v);
        for (int k = NMAX; k < NMAX + 2; k++) {
            im[k] = tr_add("F.max_pool2d(t0, 2)", 1, &xm[k]);
            ii[k] = tr_add("F.max_pool2d(t0, 2, return_indices=True)[1]", 1, &xm[k]);
        }
    }
    for (int k = 0; k < NAVG; k++) {
        const pool_case *c = &avg_cases[k];
        xa[k] = th_random(CN_F64, CN_SHAPE(c->N, c->C, c->H, c->W), -1, 1, k % TH_NLAYOUTS, NULL);
        char div[32] = "None";
        if (c->divisor) snprintf(div, sizeof div, "%" PRId64, c->divisor);
        snprintf(e, sizeof e,
                 "F.avg_pool2d(t0, (%" PRId64 ",%" PRId64 "), (%" PRId64 ",%" PRId64 "), (%" PRId64
                 ",%" PRId64 "), %s, %s, %s)",
                 c->kh, c->kw, c->sh, c->sw, c->ph, c->pw, c->ceil_mode ? "True" : "False",
                 c->exclude_pad ? "False" : "True", div);
        ia[k] = tr_add(e, 1, &xa[k]);
    }
    for (int k = 0; k < NAD; k++) {
        const int64_t *c = adaptive_cases[k];
        xd[k] = th_random(CN_F64, CN_SHAPE(c[0], c[1], c[2], c[3]), -1, 1, k % TH_NLAYOUTS, NULL);
        snprintf(e, sizeof e, "F.adaptive_avg_pool2d(t0, (%" PRId64 ",%" PRId64 "))", c[4], c[5]);
        id[k] = tr_add(e, 1, &xd[k]);
    }
    /* unbatched [C, H, W] */
    cn_tensor *xu = th_random(CN_F64, CN_SHAPE(3, 6, 5), -1, 1, TH_CONTIG, NULL);
    int iu = tr_add("F.max_pool2d(t0, 3, 2, 1)", 1, &xu);
    tr_run();

    char what[64];
    for (int k = 0; k < NMAX + 2; k++) {
        cn_pool_opts o = k < NMAX ? opts_of(&max_cases[k]) : (cn_pool_opts){.kernel = {2, 2}};
        snprintf(what, sizeof what, "max_pool2d case %d", k);
        check_both(what, xm[k], do_max, &o, tr_result(im[k]));
        snprintf(what, sizeof what, "max_pool2d_indices case %d", k);
        cn_tensor *idx = cn_max_pool2d_indices(xm[k], &o);
        CHECK(idx && cn_tensor_dtype(idx) == CN_I64);
        check_both(what, xm[k], do_idx, &o, tr_result(ii[k]));
    }
    for (int k = 0; k < NAVG; k++) {
        cn_pool_opts o = opts_of(&avg_cases[k]);
        snprintf(what, sizeof what, "avg_pool2d case %d", k);
        check_both(what, xa[k], do_avg, &o, tr_result(ia[k]));
    }
    for (int k = 0; k < NAD; k++) {
        snprintf(what, sizeof what, "adaptive_avg_pool2d case %d", k);
        check_both(what, xd[k], do_adaptive, adaptive_cases[k] + 4, tr_result(id[k]));
    }
    cn_pool_opts ou = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
    tr_check_close("unbatched", cn_max_pool2d(xu, &ou), tr_result(iu), 0, 0);
    tr_end();
}

/* The adjoint ops against naive loops: <pool(x), dy> = <x, backward(dy)>
 * for random x and dy, which pins backward down given the forward. */
static void test_backward_adjoint(void) {
    th_seed(23);
    for (int k = 0; k < NAVG + NAD; k++) {
        cn_scope_begin();
        cn_tensor *x, *y, *dy, *dx;
        bool avg = k < NAVG;
        if (avg) {
            const pool_case *c = &avg_cases[k];
            cn_pool_opts o = opts_of(c);
            x = th_random(CN_F64, CN_SHAPE(c->N, c->C, c->H, c->W), -1, 1, TH_CONTIG, NULL);
            y = cn_avg_pool2d(x, &o);
            dy = th_random(CN_F64, 4, cn_shape(y), -1, 1, TH_REVERSED, NULL);
            cn_attrs a = {.i = {c->ceil_mode, !c->exclude_pad, c->divisor},
                          .nlist = 8,
                          .list = {c->kh, c->kw, c->sh, c->sw, c->ph, c->pw, c->H, c->W}};
            dx = cn_op_apply(CN_OP_avg_pool2d_backward, &dy, 1, &a);
        } else {
            const int64_t *c = adaptive_cases[k - NAVG];
            x = th_random(CN_F64, CN_SHAPE(c[0], c[1], c[2], c[3]), -1, 1, TH_CONTIG, NULL);
            y = cn_adaptive_avg_pool2d(x, c[4], c[5]);
            dy = th_random(CN_F64, 4, cn_shape(y), -1, 1, TH_STRIDED, NULL);
            cn_attrs a = {.nlist = 2, .list = {c[2], c[3]}};
            dx = cn_op_apply(CN_OP_adaptive_avg_pool2d_backward, &dy, 1, &a);
        }
        CHECK(dx && th_same_shape(dx, 4, cn_shape(x)));
        if (!dx || !y) {
            cn_scope_end();
            continue;
        }
        double lhs = 0, rhs = 0;
        for (int64_t i = 0; i < cn_numel(y); i++) lhs += th_at(y, i) * th_at(dy, i);
        for (int64_t i = 0; i < cn_numel(x); i++) rhs += th_at(x, i) * th_at(dx, i);
        CHECK_MSG(fabs(lhs - rhs) < 1e-12 * (1 + fabs(lhs)), "%s case %d: <y, dy> = %.15g but "
                  "<x, dx> = %.15g", avg ? "avg" : "adaptive", avg ? k : k - NAVG, lhs, rhs);
        cn_scope_end();
    }
}

/* Same bits at 1 and 2 threads (planes are split across threads). */
static void test_threads(void) {
    th_seed(31);
    int nt = cn_get_num_threads();
    cn_tensor *x = th_random(CN_F32, CN_SHAPE(8, 16, 28, 28), -1, 1, TH_CONTIG, NULL);
    cn_pool_opts o = {.kernel = {2, 2}};
    cn_tensor *r[2][3];
    for (int t = 0; t < 2; t++) {
        cn_set_num_threads(t + 1);
        r[t][0] = cn_max_pool2d(x, &o);
        r[t][1] = cn_avg_pool2d(x, &o);
        r[t][2] = cn_adaptive_avg_pool2d(x, 3, 5);
    }
    cn_set_num_threads(nt);
    for (int k = 0; k < 3; k++) CHECK_MSG(cn_equal(r[0][k], r[1][k]), "pool %d differs", k);
}

static void test_errors(void) {
    cn_tensor *x = cn_ones(CN_F32, CN_SHAPE(1, 2, 5, 5));
    CHECK_ERROR(cn_max_pool2d(x, &(cn_pool_opts){.kernel = {3, 3}, .padding = {2, 0}}),
                "padding (2, 0) must be between 0 and half the kernel size (3, 3)");
    CHECK_ERROR(cn_avg_pool2d(x, &(cn_pool_opts){.kernel = {6, 6}}),
                "gives output size 0x0, which is too small");
    CHECK_ERROR(cn_max_pool2d(x, &(cn_pool_opts){.kernel = {0, 2}}), "kernel size must be positive");
    CHECK_ERROR(cn_max_pool2d(x, &(cn_pool_opts){.kernel = {2, 2}, .stride = {-1, 1}}),
                "stride must be positive");
    CHECK_ERROR(cn_max_pool2d(x, &(cn_pool_opts){.kernel = {2, 2}, .dilation = {-1, 1}}),
                "dilation must be positive");
    CHECK_ERROR(cn_max_pool2d(cn_ones(CN_F32, CN_SHAPE(1, 1, 2, 2)),
                              &(cn_pool_opts){.kernel = {2, 2}, .padding = {1, 1},
                                              .dilation = {3, 3}}),
                "covers only padding");
    CHECK_ERROR(cn_max_pool2d(cn_ones(CN_I64, CN_SHAPE(1, 2, 5, 5)),
                              &(cn_pool_opts){.kernel = {2, 2}}),
                "x is i64; pooling needs a float tensor");
    CHECK_ERROR(cn_avg_pool2d(cn_ones(CN_F32, CN_SHAPE(5, 5)), &(cn_pool_opts){.kernel = {2, 2}}),
                "x must be 4-D [N, C, H, W], got [5, 5]");
    CHECK_ERROR(cn_max_pool2d(cn_ones(CN_F32, CN_SHAPE(1, 0, 5, 5)),
                              &(cn_pool_opts){.kernel = {2, 2}}),
                "empty channel or spatial axis");
    CHECK_ERROR(cn_max_pool2d(x, NULL), "max_pool2d: options with a kernel size are required");
    CHECK_ERROR(cn_adaptive_avg_pool2d(x, 0, 2), "output size must be two positive sizes");
    CHECK_ERROR(cn_avg_pool2d(x, &(cn_pool_opts){.kernel = {2, 2}, .divisor_override = -1}),
                "divisor_override must be positive");
    CHECK(cn_max_pool2d(NULL, &(cn_pool_opts){.kernel = {2, 2}}) == NULL);
    /* an empty batch is fine */
    cn_tensor *y = cn_max_pool2d(cn_ones(CN_F32, CN_SHAPE(0, 2, 4, 4)),
                                 &(cn_pool_opts){.kernel = {2, 2}});
    CHECK_SHAPE(y, 0, 2, 2, 2);
}

int main(void) {
    RUN(test_against_torch);
    RUN(test_backward_adjoint);
    RUN(test_threads);
    RUN(test_errors);
    return th_summary();
}
