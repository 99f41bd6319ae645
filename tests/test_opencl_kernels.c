/* The OpenCL backend's kernels against the CPU's: unary, binary, where,
 * casts between every pair of dtypes, reductions (including the lane-split
 * ones), random draws (the same numbers as the CPU for a seed), bernoulli,
 * a fused expression, the optimiser rules, strided copies and fills.
 * Passes without checking anything when the build or the machine has no
 * OpenCL device. (Float sums: the device accumulates in double, the CPU in
 * f32 lanes, so sums near zero are compared at 1e-4.) */
#include "harness.h"

#include "core/core.h"
#include "backend/backend.h"

#ifdef CN_HAVE_OPENCL

static cn_device DEV;
static int fails = 0;

static double maxrel(cn_tensor *a, cn_tensor *b, int64_t *bad) {
    int64_t n = cn_numel(a);
    double *x = malloc(8 * (size_t)(n ? n : 1)), *y = malloc(8 * (size_t)(n ? n : 1));
    cn_copy_to_buffer(a, CN_F64, x, 8 * (size_t)n);
    cn_copy_to_buffer(b, CN_F64, y, 8 * (size_t)n);
    double m = 0;
    *bad = -1;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i]) && isnan(y[i])) continue;
        if (x[i] == y[i]) continue;
        double d = fabs(x[i] - y[i]) / (fabs(x[i]) > 1e-2 ? fabs(x[i]) : 1e-2);
        if (isnan(d) || isinf(d)) d = 1e9;
        if (d > m) {
            m = d;
            *bad = i;
        }
    }
    free(x);
    free(y);
    return m;
}

/* dev (on the device) against cpu: same dtype, elements within tol
 * (relative, with values below 0.01 compared absolutely). */
static void check(const char *name, cn_tensor *cpu, cn_tensor *dev, double tol) {
    th_current = name;
    th_checks++;
    if (!cpu || !dev) {
        th_fail(__FILE__, __LINE__, "NULL result (%s)", cn_last_error());
        cn_clear_error();
        fails++;
        return;
    }
    cn_tensor *h = cn_to(dev, CN_CPU);
    if (!h || cn_tensor_dtype(h) != cn_tensor_dtype(cpu)) {
        th_fail(__FILE__, __LINE__, "dtype or copy back (%s)", cn_last_error());
        fails++;
        return;
    }
    int64_t bad;
    double r = maxrel(cpu, h, &bad);
    if (r > tol) {
        th_fail(__FILE__, __LINE__, "max relative error %g at flat index %lld", r,
                (long long)bad);
        fails++;
    }
}

#define D(t) cn_to(t, DEV)

static int run(void) {
    DEV = CN_DEVICE(CN_DEVICE_OPENCL, 0);
    cn_device_info info;
    th_current = "device_info";
    CHECK(cn_device_get_info(DEV, &info) == 0 && info.name[0] && info.compute_units > 0);
    cn_manual_seed(1);
    cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(37, 53));
    cn_tensor *y = cn_randn(CN_F32, CN_SHAPE(37, 53));
    cn_tensor *xd = D(x), *yd = D(y);
    if (!xd) {
        th_fail(__FILE__, __LINE__, "to device: %s", cn_last_error());
        return 1;
    }
    check("roundtrip", x, xd, 0);
    /* unary */
    check("neg", cn_neg(x), cn_neg(xd), 0);
    check("abs", cn_abs(x), cn_abs(xd), 0);
    check("exp", cn_exp(x), cn_exp(xd), 1e-6);
    check("log|x|", cn_log(cn_abs(x)), cn_log(cn_abs(xd)), 1e-6);
    check("tanh", cn_tanh(x), cn_tanh(xd), 1e-6);
    check("sigmoid", cn_sigmoid(x), cn_sigmoid(xd), 1e-6);
    check("gelu", cn_gelu(x, false), cn_gelu(xd, false), 1e-5);
    check("gelu tanh", cn_gelu(x, true), cn_gelu(xd, true), 1e-5);
    check("silu", cn_silu(x), cn_silu(xd), 1e-6);
    check("erf", cn_erf(x), cn_erf(xd), 1e-6);
    check("softplus", cn_softplus(x, 2, 20), cn_softplus(xd, 2, 20), 1e-6);
    check("elu", cn_elu(x, 0.5), cn_elu(xd, 0.5), 1e-6);
    check("leaky", cn_leaky_relu(x, 0.1), cn_leaky_relu(xd, 0.1), 0);
    check("round", cn_round(cn_mul_scalar(x, 3)), cn_round(cn_mul_scalar(xd, 3)), 0);
    check("clamp", cn_clamp(x, -0.5, 0.7), cn_clamp(xd, -0.5, 0.7), 0);
    check("sqrt", cn_sqrt(cn_abs(x)), cn_sqrt(cn_abs(xd)), 0);
    check("rsqrt", cn_rsqrt(cn_abs(x)), cn_rsqrt(cn_abs(xd)), 1e-6);
    /* binary with broadcast and transposes */
    cn_tensor *row = cn_randn(CN_F32, CN_SHAPE(53));
    check("add bcast", cn_add(x, row), cn_add(xd, D(row)), 0);
    check("mul T", cn_mul(cn_transpose(x, 0, 1), cn_transpose(y, 0, 1)), cn_mul(cn_transpose(xd, 0, 1), cn_transpose(yd, 0, 1)), 0);
    check("div", cn_div(x, y), cn_div(xd, yd), 0);
    check("pow", cn_pow(cn_abs(x), y), cn_pow(cn_abs(xd), yd), 1e-6);
    check("maximum", cn_maximum(x, y), cn_maximum(xd, yd), 0);
    check("lt", cn_lt(x, y), cn_lt(xd, yd), 0);
    check("where", cn_where(cn_gt(x, y), x, y), cn_where(cn_gt(xd, yd), xd, yd), 0);
    check("logical_xor", cn_logical_xor(cn_gt(x, y), x), cn_logical_xor(cn_gt(xd, yd), xd), 0);
    /* integers */
    cn_tensor *xi = cn_randint(-50, 50, CN_I32, CN_SHAPE(37, 53));
    cn_tensor *xid = D(xi);
    check("i32 add", cn_add(xi, xi), cn_add(xid, xid), 0);
    check("i32 abs", cn_abs(xi), cn_abs(xid), 0);
    check("i32 clamp", cn_clamp(xi, -3.5, 7.2), cn_clamp(xid, -3.5, 7.2), 0);
    check("i32 sum", cn_sum(xi, CN_AXES(1), false), cn_sum(xid, CN_AXES(1), false), 0);
    check("i32 max", cn_max(xi, CN_AXES(0), true), cn_max(xid, CN_AXES(0), true), 0);
    /* casts */
    cn_dtype dts[8] = {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8, CN_BOOL};
    cn_tensor *big = cn_mul_scalar(cn_randn(CN_F32, CN_SHAPE(1000)), 300);
    cn_tensor *bigd = D(big);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            char nm[64];
            snprintf(nm, sizeof nm, "cast %s->%s", cn_dtype_name(dts[i]), cn_dtype_name(dts[j]));
            cn_tensor *a = cn_cast(big, dts[i]), *ad = cn_cast(bigd, dts[i]);
            check(nm, cn_cast(a, dts[j]), cn_cast(ad, dts[j]), 0);
        }
    /* reductions */
    cn_tensor *z = cn_randn(CN_F32, CN_SHAPE(5, 300, 70));
    cn_tensor *zd = D(z);
    check("sum all", cn_sum(z, NULL, 0, false), cn_sum(zd, NULL, 0, false), 1e-5);
    check("sum 1", cn_sum(z, CN_AXES(1), false), cn_sum(zd, CN_AXES(1), false), 1e-4);
    check("sum 0,2", cn_sum(z, CN_AXES(0, 2), true), cn_sum(zd, CN_AXES(0, 2), true), 1e-4);
    check("mean 2", cn_mean(z, CN_AXES(2), false), cn_mean(zd, CN_AXES(2), false), 1e-5);
    check("prod 0", cn_prod(z, CN_AXES(0), false), cn_prod(zd, CN_AXES(0), false), 1e-5);
    check("max 1", cn_max(z, CN_AXES(1), false), cn_max(zd, CN_AXES(1), false), 0);
    check("min all", cn_min(z, NULL, 0, false), cn_min(zd, NULL, 0, false), 0);
    check("var 1", cn_var(z, CN_AXES(1), 1, false), cn_var(zd, CN_AXES(1), 1, false), 1e-5);
    check("std all", cn_std(z, NULL, 0, 1, false), cn_std(zd, NULL, 0, 1, false), 1e-5);
    check("lse 2", cn_logsumexp(z, CN_AXES(2), false), cn_logsumexp(zd, CN_AXES(2), false), 1e-5);
    check("norm2", cn_norm(z, 2, NULL, 0, false), cn_norm(zd, 2, NULL, 0, false), 1e-5);
    check("norm3 1", cn_norm(z, 3, CN_AXES(1), false), cn_norm(zd, 3, CN_AXES(1), false), 1e-5);
    check("norm inf", cn_norm(z, INFINITY, CN_AXES(2), false), cn_norm(zd, INFINITY, CN_AXES(2), false), 0);
    check("argmax 1", cn_argmax(z, 1, false), cn_argmax(zd, 1, false), 0);
    check("argmin flat", cn_argmin_all(z), cn_argmin_all(zd), 0);
    cn_tensor *zt = cn_permute(z, CN_AXES(2, 0, 1)), *ztd = cn_permute(zd, CN_AXES(2, 0, 1));
    check("sum perm 2", cn_sum(zt, CN_AXES(2), false), cn_sum(ztd, CN_AXES(2), false), 1e-4);
    /* big full reduction (lanes) */
    cn_tensor *w = cn_randn(CN_F32, CN_SHAPE(1 << 20));
    cn_tensor *wd = D(w);
    check("sum 1M", cn_sum(w, NULL, 0, false), cn_sum(wd, NULL, 0, false), 1e-5);
    check("var 1M", cn_var(w, NULL, 0, 1, false), cn_var(wd, NULL, 0, 1, false), 1e-5);
    check("argmax 1M", cn_argmax_all(w), cn_argmax_all(wd), 0);
    /* random: same seed same numbers */
    for (int i = 0; i < 4; i++) {
        cn_manual_seed(7);
        cn_tensor *a = cn_rand(dts[i], CN_SHAPE(1001));
        cn_tensor *b = cn_randn(dts[i], CN_SHAPE(1001));
        cn_manual_seed(7);
        cn_set_default_device(DEV);
        cn_tensor *ad = cn_rand(dts[i], CN_SHAPE(1001));
        cn_tensor *bd = cn_randn(dts[i], CN_SHAPE(1001));
        cn_set_default_device(CN_CPU);
        char nm[64];
        snprintf(nm, sizeof nm, "rand %s", cn_dtype_name(dts[i]));
        check(nm, a, ad, 0);
        snprintf(nm, sizeof nm, "randn %s", cn_dtype_name(dts[i]));
        check(nm, b, bd, dts[i] == CN_F64 ? 1e-15 : 0);
    }
    cn_manual_seed(9);
    cn_tensor *ri = cn_randint(-5, 1000, CN_I64, CN_SHAPE(999));
    cn_tensor *pb = cn_rand(CN_F32, CN_SHAPE(999));
    cn_tensor *be = cn_bernoulli(pb);
    cn_manual_seed(9);
    cn_set_default_device(DEV);
    cn_tensor *rid = cn_randint(-5, 1000, CN_I64, CN_SHAPE(999));
    cn_tensor *pbd = cn_rand(CN_F32, CN_SHAPE(999));
    cn_tensor *bed = cn_bernoulli(pbd);
    cn_set_default_device(CN_CPU);
    check("randint", ri, rid, 0);
    check("bernoulli", be, bed, 0);
    /* fused: r = where(x > y, sigmoid(x) * 2 + y, clamp(x, -0.5, 0.5)) as mask-cast */
    {
        cn_fused_instr ins[7];
        memset(ins, 0, sizeof ins);
        ins[0] = (cn_fused_instr){.op = CN_OP_gt, .a = 0, .b = 1, .c = -1};
        ins[1] = (cn_fused_instr){.op = CN_OP_sigmoid, .a = 0, .b = -1, .c = -1};
        ins[2] = (cn_fused_instr){.op = CN_OP_mul, .a = 4, .b = 2, .c = -1};
        ins[3] = (cn_fused_instr){.op = CN_OP_add, .a = 5, .b = 1, .c = -1};
        ins[4] = (cn_fused_instr){.op = CN_OP_clamp, .a = 0, .b = -1, .c = -1};
        ins[4].attrs.f[0] = -0.5; ins[4].attrs.f[1] = 0.5;
        ins[5] = (cn_fused_instr){.op = CN_OP_where, .a = 3, .b = 6, .c = 7};
        ins[6] = (cn_fused_instr){.op = CN_OP_gelu, .a = 8, .b = -1, .c = -1};
        cn_fused_expr e = {3, 7, ins, 9};
        cn_tensor *two = cn_full(CN_F32, CN_SHAPE(1), 2.0);
        cn_tensor *in[3] = {x, cn_transpose(cn_transpose(y, 0, 1), 0, 1), two};
        cn_tensor *ind[3] = {xd, yd, D(two)};
        cn_tensor *o = cn_empty(CN_F32, CN_SHAPE(37, 53));
        cn_tensor *od = cn_scope_add(cn_t_empty_on(DEV, CN_F32, 2, (int64_t[]){37, 53}));
        int r1 = cn_fused_run(&e, in, o);
        int r2 = cn_backend_opencl.fused_run(&e, ind, od);
        th_current = "fused run";
        CHECK(r1 == 0 && r2 == 0);
        /* sigmoid(x) * 2 + y cancels up to 40-fold on these inputs (x =
         * -0.145, y = -0.904 at flat index 884), so one ulp between the two
         * sides' sigmoids, each within its bound, is 2.5e-6 of the result. */
        check("fused", o, od, 1e-5);
    }
    /* optimiser: Adam with amsgrad, 3 steps */
    for (int alg = 0; alg < 4; alg++) {
        cn_tensor *p = cn_randn(CN_F32, CN_SHAPE(1000)), *g = cn_randn(CN_F32, CN_SHAPE(1000));
        cn_tensor *s0 = cn_zeros(CN_F32, CN_SHAPE(1000)), *s1 = cn_zeros(CN_F32, CN_SHAPE(1000)), *s2 = cn_zeros(CN_F32, CN_SHAPE(1000));
        cn_tensor *pd = D(p), *gd = D(g), *s0d = D(s0), *s1d = D(s1), *s2d = D(s2);
        cn_opt_alg algs[4] = {CN_OPT_SGD, CN_OPT_ADAM, CN_OPT_RMSPROP, CN_OPT_ADAGRAD};
        unsigned bits[4] = {1 | 2 | 8, 1 | 2, 1 | 2 | 4, 1};
        for (int step = 0; step < 3; step++) {
            cn_optim_update u = {.alg = algs[alg], .bits = bits[alg] | (alg == 0 && step == 0 ? 4 : 0), .dtype = CN_F32, .n = 990,
                                 .c = {1, 0.01, 0.9, 0.99, 0.1, 0.999, 0.001, 0.5, 1e-8, -0.01}};
            cn_optim_update ud = u;
            u.p = p->storage; u.g = g->storage; u.s[0] = s0->storage; u.s[1] = s1->storage; u.s[2] = s2->storage;
            ud.p = pd->storage; ud.g = gd->storage; ud.s[0] = s0d->storage; ud.s[1] = s1d->storage; ud.s[2] = s2d->storage;
            u.p_off = ud.p_off = 3; u.g_off = ud.g_off = 5; u.s_off[1] = ud.s_off[1] = 7;
            int r1 = cn_backend_cpu.optim_update(&u, 1), r2 = cn_backend_opencl.optim_update(&ud, 1);
            th_current = "optim run";
            CHECK(r1 == 0 && r2 == 0);
        }
        char nm[32];
        snprintf(nm, sizeof nm, "optim %d p", alg);
        check(nm, p, pd, 0);
        snprintf(nm, sizeof nm, "optim %d s1", alg);
        check(nm, s1, s1d, 0);
    }
    /* strided write into a view, fill, empty storage, events */
    {
        cn_tensor *a = cn_zeros(CN_F64, CN_SHAPE(6, 8)), *ad = D(a);
        cn_tensor *v = cn_slice(a, 1, 1, 7, 2), *vd = cn_slice(ad, 1, 1, 7, 2);
        cn_tensor *src = cn_randn(CN_F32, CN_SHAPE(6, 3));
        th_current = "copy_";
        CHECK(cn_copy_(v, src) == 0 && cn_copy_(vd, D(src)) == 0);
        check("copy_ strided", a, ad, 0);
        cn_fill_(vd, 3.25); cn_fill_(v, 3.25);
        check("fill_ strided", a, ad, 0);
        cn_tensor *e0 = cn_scope_add(cn_t_empty_on(DEV, CN_F32, 1, (int64_t[]){0}));
        th_current = "events";
        CHECK(e0 != NULL);
        cn_event *ev = cn_event_record(DEV);
        CHECK(ev != NULL);
        CHECK(cn_event_synchronize(ev) == 0);
        CHECK(cn_event_query(ev));
        cn_event_free(ev);
        CHECK(cn_device_synchronize(DEV) == 0);
        cn_tensor *bp = cn_full(CN_F32, CN_SHAPE(5), 0.5);
        cn_set(bp, (int64_t[]){3}, 1.5);
        cn_tensor *bb = cn_bernoulli(D(bp));
        th_current = "bernoulli p > 1";
        CHECK(bb == NULL && strstr(cn_last_error(), "flat index 3"));
        cn_clear_error();
        cn_tensor *x64 = cn_cast(z, CN_F64), *x64d = D(x64);
        check("f64 sum 1", cn_sum(x64, CN_AXES(1), false), cn_sum(x64d, CN_AXES(1), false), 1e-12);
        check("f64 var 0,2", cn_var(x64, CN_AXES(0, 2), 0, false), cn_var(x64d, CN_AXES(0, 2), 0, false), 1e-12);
        check("f64 exp", cn_exp(x64), cn_exp(x64d), 1e-15);
        check("f16 add", cn_add(cn_cast(x, CN_F16), cn_cast(y, CN_F16)), cn_add(cn_cast(xd, CN_F16), cn_cast(yd, CN_F16)), 0);
        check("f16 logical_not", cn_logical_not(cn_cast(cn_round(x), CN_F16)), cn_logical_not(cn_cast(cn_round(xd), CN_F16)), 0);
        check("i64 pow", cn_pow(cn_cast(xi, CN_I64), cn_abs(cn_cast(xi, CN_I64))), cn_pow(cn_cast(xid, CN_I64), cn_abs(cn_cast(xid, CN_I64))), 0);
        cn_tensor *np = cn_pow(xid, xid);
        th_current = "int pow negative";
        CHECK(np == NULL && strstr(cn_last_error(), "negative"));
        cn_clear_error();
    }
    cn_memory_stats ms;
    th_current = "memory_stats";
    CHECK(cn_device_memory_stats(DEV, &ms) == 0 && ms.allocations > 0 && ms.peak_allocated_bytes > 0);
    return fails;
}
#endif

int main(void) {
#ifdef CN_HAVE_OPENCL
    if (cn_device_count(CN_DEVICE_OPENCL) > 0) {
        cn_scope_begin();
        run();
        cn_scope_end();
    } else {
        printf("no OpenCL device: nothing to test\n");
    }
#else
    printf("built without OpenCL: nothing to test\n");
    th_current = "no OpenCL";
    CHECK(cn_device_count(CN_DEVICE_OPENCL) == 0);
#endif
    return th_summary();
}
