/* Device placement in static programs (src/graph/passes/place.c): steps run
 * on their inputs' device or their cn_device_scope's, a step whose device
 * has no kernel falls back to the CPU with transfer steps around it (and is
 * counted and reported), the dumps show devices and transfers, and every
 * placed program gives the CPU program's values, gradients included.
 *
 * With no OpenCL device this prints "skipped: no OpenCL platform" and runs
 * the CPU-only parts. */
#include "harness.h"

#include "backend/cpu/matmul_dnnl.h" /* autocast's native path, forced */
#include "graph/ir.h"

#include <unistd.h>

static const cn_device CL = {CN_DEVICE_OPENCL, 0};

static bool on(const cn_tensor *t, cn_device d) { return cn_device_equal(cn_tensor_device(t), d); }

/* a and b (any devices) within tolerance, compared on the CPU. */
static bool same_values(cn_tensor *a, cn_tensor *b) {
    return cn_allclose(cn_to(a, CN_CPU), cn_to(b, CN_CPU), 1e-5, 1e-6);
}

/* A text dump as a string (static buffer). */
static const char *dump(const cn_program *p, bool dot) {
    static char buf[1 << 16];
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    if (!f) return "";
    if (dot) cn_program_write_dot(p, f);
    else cn_program_dump(p, f);
    long n = ftell(f);
    fclose(f);
    buf[n < 0 ? 0 : n] = 0;
    return buf;
}

/* The model: a matmul, a bias, literals (rank-0 CPU constants), tanh and a
 * reduction, so fusion, views and scalars all meet placement. */
static cn_tensor *model(cn_tensor *x, cn_tensor *w, cn_tensor *b) {
    cn_tensor *h = cn_tanh(cn_mul_scalar(cn_add(cn_matmul(x, w), b), 0.5));
    return cn_sum(cn_transpose(h, 0, 1), (int[]){0}, 1, false);
}

/* Run p on xv; the first output. */
static cn_tensor *run1(cn_program *p, cn_tensor *x, cn_tensor *xv) {
    cn_tensor *out = NULL;
    CHECK_MSG(cn_run(p, &x, &xv, 1, &out, 1) == 0, "run: %s", cn_last_error());
    return out;
}

/* On the CPU: nothing moves, nothing is annotated; a scope device this
 * machine does not have is a compile error naming it. */
static void test_cpu_placement(void) {
    th_seed(3);
    cn_tensor *w = th_random(CN_F32, CN_SHAPE(4, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *b = th_random(CN_F32, CN_SHAPE(3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *xv = th_random(CN_F32, CN_SHAPE(5, 4), -1, 1, TH_CONTIG, NULL);
    for (int level = 0; level <= 2; level++) {
        cn_graph *g = cn_graph_new();
        cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 4));
        CHECK(cn_device_scope_begin(CN_CPU) == 0);
        cn_tensor *y = model(x, w, b);
        cn_device_scope_end();
        cn_program *p = cn_compile(g, &y, 1, &(cn_compile_opts){.opt_level = level});
        CHECK(p != NULL);
        CHECK(same_values(run1(p, x, xv), model(xv, w, b)));
        cn_program_stats st;
        CHECK(cn_program_stats_get(p, &st) == 0);
        CHECK_EQ_INT(st.ntransfers, 0);
        CHECK_EQ_INT(st.nfallbacks, 0);
        CHECK_EQ_INT(st.ndevice_steps[CN_DEVICE_CPU], st.nsteps);
        CHECK_MSG(!strstr(dump(p, false), "cpu:0"), "dump: %s", dump(p, false)); /* no devices shown */
        cn_program_free(p);
        cn_graph_free(g);
    }
    /* A scope device the machine does not have. */
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 4));
    CHECK(cn_device_scope_begin(CN_DEVICE(CN_DEVICE_OPENCL, 7)) == 0);
    cn_tensor *y = cn_tanh(x);
    cn_device_scope_end();
    CHECK(y != NULL);
    CHECK_ERROR(cn_compile(g, &y, 1, NULL) != NULL, "opencl:7");
    cn_graph_free(g);
}

/* Fed on the device (parameters there too): every step runs there; only
 * the CPU literal is transferred. */
static void test_fed_on_device(void) {
    th_seed(5);
    cn_tensor *w = th_random(CN_F32, CN_SHAPE(4, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *b = th_random(CN_F32, CN_SHAPE(3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *xv = th_random(CN_F32, CN_SHAPE(5, 4), -1, 1, TH_CONTIG, NULL);
    cn_tensor *wd = cn_to(w, CL), *bd = cn_to(b, CL), *xd = cn_to(xv, CL);
    cn_tensor *want = model(xv, w, b);
    for (int level = 0; level <= 2; level++) {
        cn_graph *g = cn_graph_new();
        cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 4));
        cn_tensor *y = model(x, wd, bd);
        cn_program *p = cn_compile(g, &y, 1, &(cn_compile_opts){.opt_level = level});
        CHECK(p != NULL);
        cn_tensor *out = run1(p, x, xd);
        CHECK(out && on(out, CL));
        CHECK_MSG(out && same_values(out, want), "-O%d on opencl differs from the CPU", level);
        cn_program_stats st;
        CHECK(cn_program_stats_get(p, &st) == 0);
        CHECK_EQ_INT(st.nfallbacks, 0);
        CHECK_EQ_INT(st.ndevice_steps[CN_DEVICE_CPU], 0);
        CHECK_EQ_INT(st.ndevice_steps[CN_DEVICE_OPENCL] + st.ntransfers, st.nsteps);
        CHECK(st.ntransfers >= 1); /* the literal 0.5 */
        CHECK_MSG(strstr(dump(p, false), "[opencl:0]") && strstr(dump(p, false), "[cpu:0 -> opencl:0]"),
                  "dump: %s", dump(p, false));
        int ncompiles = st.ncompiles;
        /* The same program fed on the CPU: placed again, without
         * compiling again; the steps follow their first input to the CPU
         * and the parameters are moved to them. */
        out = run1(p, x, xv);
        CHECK(out && on(out, CN_CPU) && same_values(out, want));
        CHECK(cn_program_stats_get(p, &st) == 0);
        CHECK_EQ_INT(st.ncompiles, ncompiles);
        CHECK_EQ_INT(st.ntransfers, 2);
        CHECK_EQ_INT(st.ndevice_steps[CN_DEVICE_OPENCL], 0);
        /* And on the device again. */
        out = run1(p, x, xd);
        CHECK(out && on(out, CL) && same_values(out, want));
        cn_program_free(p);
        cn_graph_free(g);
    }
}

/* Built inside cn_device_scope(opencl) from CPU parameters and fed on the
 * CPU: the steps run on the device, the inputs and parameters are
 * transferred to it, the result stays there. */
static void test_scope(void) {
    th_seed(7);
    cn_tensor *w = th_random(CN_F32, CN_SHAPE(4, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *b = th_random(CN_F32, CN_SHAPE(3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *xv = th_random(CN_F32, CN_SHAPE(5, 4), -1, 1, TH_CONTIG, NULL);
    cn_tensor *want = model(xv, w, b);
    for (int level = 0; level <= 2; level++) {
        cn_graph *g = cn_graph_new();
        cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 4));
        CHECK(cn_device_scope_begin(CL) == 0);
        cn_tensor *y = model(x, w, b);
        cn_device_scope_end();
        cn_program *p = cn_compile(g, &y, 1, &(cn_compile_opts){.opt_level = level});
        CHECK(p != NULL);
        cn_program_stats st;
        CHECK(cn_program_stats_get(p, &st) == 0); /* placed before the first run */
        CHECK(st.ntransfers >= 3);                /* x, w, b (and the literal) */
        cn_tensor *out = run1(p, x, xv);
        CHECK(out && on(out, CL));
        CHECK_MSG(out && same_values(out, want), "-O%d under a device scope differs", level);
        CHECK(cn_program_stats_get(p, &st) == 0);
        CHECK_EQ_INT(st.ndevice_steps[CN_DEVICE_CPU], 0);
        CHECK_EQ_INT(st.nfallbacks, 0);
        const char *d = dump(p, true);
        CHECK_MSG(strstr(d, "parallelogram") && strstr(d, "@opencl:0"), "dot: %s", d);
        cn_program_free(p);
        cn_graph_free(g);
    }
}

/* stderr into a buffer while fn-like code runs. */
static int saved_stderr = -1;
static FILE *capture;
static void capture_begin(void) {
    fflush(stderr);
    capture = tmpfile();
    saved_stderr = dup(2);
    dup2(fileno(capture), 2);
}
static const char *capture_end(void) {
    static char buf[4096];
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    rewind(capture);
    size_t n = fread(buf, 1, sizeof buf - 1, capture);
    buf[n] = 0;
    fclose(capture);
    return buf;
}

/* tanh "has no kernel" on OpenCL: the step runs on the CPU between two
 * transfers, once counted and reported, with the device's values. */
static void test_fallback(void) {
    th_seed(9);
    cn_tensor *w = th_random(CN_F32, CN_SHAPE(4, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *b = th_random(CN_F32, CN_SHAPE(3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *xv = th_random(CN_F32, CN_SHAPE(5, 4), -1, 1, TH_CONTIG, NULL);
    cn_tensor *want = model(xv, w, b);
    cn_tensor *wd = cn_to(w, CL), *bd = cn_to(b, CL), *xd = cn_to(xv, CL);
    cn_place_test_missing_kernel(CN_DEVICE_OPENCL, CN_OP_tanh, true);
    for (int level = 0; level <= 2; level++) {
        cn_graph *g = cn_graph_new();
        cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 4));
        cn_tensor *y = model(x, wd, bd);
        capture_begin();
        cn_program *p = cn_compile(g, &y, 1, &(cn_compile_opts){.opt_level = level, .quiet_fallback = level == 1});
        cn_tensor *out = p ? run1(p, x, xd) : NULL;
        if (p) run1(p, x, xd); /* warned once */
        const char *err = capture_end();
        CHECK(p != NULL);
        CHECK(out && on(out, CL));
        CHECK_MSG(out && same_values(out, want), "-O%d with a fallback differs", level);
        cn_program_stats st;
        CHECK(cn_program_stats_get(p, &st) == 0);
        CHECK_EQ_INT(st.nfallbacks, 1);
        CHECK_EQ_INT(st.ndevice_steps[CN_DEVICE_CPU], 2); /* and the view of its result */
        if (level == 1) {
            CHECK_MSG(!*err, "quiet_fallback, yet: %s", err);
        } else {
            const char *want_msg = level == 2 ? "program: 1 step falls back to the CPU (no kernel on opencl:0): fused\n"
                                              : "program: 1 step falls back to the CPU (no kernel on opencl:0): tanh\n";
            CHECK_MSG(!strcmp(err, want_msg), "stderr: '%s'", err);
        }
        CHECK_MSG(strstr(dump(p, false), "[cpu:0, fallback]") && strstr(dump(p, false), "[cpu:0 -> opencl:0]") &&
                      strstr(dump(p, false), "[opencl:0 -> cpu:0]"),
                  "dump: %s", dump(p, false));
        cn_program_free(p);
        cn_graph_free(g);
    }
    cn_place_test_missing_kernel(CN_DEVICE_OPENCL, CN_OP_tanh, false);
}

/* The gradients of a program built under the device scope (with a step
 * falling back) equal eager CPU backward. */
static void test_gradients(void) {
    th_seed(13);
    cn_tensor *w = th_random(CN_F32, CN_SHAPE(4, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *b = th_random(CN_F32, CN_SHAPE(3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *xv = th_random(CN_F32, CN_SHAPE(5, 4), -1, 1, TH_CONTIG, NULL);
    cn_set_requires_grad(w, true);
    cn_set_requires_grad(b, true);
    cn_tensor *eloss = model(xv, w, b);
    eloss = cn_sum(cn_square(eloss), NULL, 0, false);
    CHECK(cn_backward(eloss, NULL) == 0);
    cn_tensor *gw = cn_detach(cn_get_grad(w)), *gb = cn_detach(cn_get_grad(b));
    for (int missing = 0; missing <= 1; missing++) {
        cn_place_test_missing_kernel(CN_DEVICE_OPENCL, CN_OP_sum, missing);
        for (int level = 0; level <= 2; level += 2) {
            cn_graph *g = cn_graph_new();
            cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 4));
            CHECK(cn_device_scope_begin(CL) == 0);
            cn_tensor *loss = cn_sum(cn_square(model(x, w, b)), NULL, 0, false);
            cn_tensor *params[2] = {w, b}, *grads[2];
            CHECK(cn_grad(&loss, NULL, 1, params, 2, grads, 0) == 0);
            cn_device_scope_end();
            cn_tensor *outs[3] = {loss, grads[0], grads[1]}, *res[3];
            cn_program *p = cn_compile(g, outs, 3, &(cn_compile_opts){.opt_level = level, .quiet_fallback = true});
            CHECK(p != NULL);
            CHECK_MSG(cn_run(p, &x, &xv, 1, res, 3) == 0, "run: %s", cn_last_error());
            CHECK(same_values(res[0], eloss));
            CHECK_MSG(same_values(res[1], gw) && same_values(res[2], gb),
                      "-O%d gradients differ (sum missing: %d)", level, missing);
            CHECK(on(res[1], CL) && on(res[2], CL));
            cn_program_stats st;
            CHECK(cn_program_stats_get(p, &st) == 0);
            CHECK_MSG(missing ? st.nfallbacks >= 2 : st.nfallbacks == 0, "fallbacks %d", st.nfallbacks);
            cn_program_free(p);
            cn_graph_free(g);
        }
    }
    cn_place_test_missing_kernel(CN_DEVICE_OPENCL, CN_OP_sum, false);
}

/* A compiled training step (SGD) with its parameters on the device: the
 * same losses and parameters as on the CPU. */
static void test_train_step(void) {
    th_seed(17);
    cn_tensor *w0 = th_random(CN_F32, CN_SHAPE(4, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *b0 = th_random(CN_F32, CN_SHAPE(3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *xv = th_random(CN_F32, CN_SHAPE(5, 4), -1, 1, TH_CONTIG, NULL);
    cn_tensor *loss_at[2][3], *w_end[2];
    for (int k = 0; k < 2; k++) {
        cn_device d = k ? CL : CN_CPU;
        cn_tensor *w = k ? cn_to(w0, d) : cn_clone(w0), *b = k ? cn_to(b0, d) : cn_clone(b0);
        cn_set_requires_grad(w, true);
        cn_set_requires_grad(b, true);
        cn_tensor *params[2] = {w, b};
        cn_optimizer *opt = cn_sgd(params, 2, &(cn_sgd_opts){.lr = 0.1});
        CHECK(opt != NULL);
        cn_graph *g = cn_graph_new();
        cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 4));
        cn_tensor *loss = cn_mean(cn_square(model(x, w, b)), NULL, 0, false);
        cn_program *p = cn_compile_train_step(g, &loss, 1, opt, NULL);
        CHECK_MSG(p != NULL, "compile: %s", cn_last_error());
        for (int step = 0; p && step < 3; step++) {
            cn_tensor *l = NULL, *xf = cn_to(xv, d);
            CHECK_MSG(cn_run(p, &x, &xf, 1, &l, 1) == 0, "run: %s", cn_last_error());
            loss_at[k][step] = l ? cn_to(l, CN_CPU) : cn_scalar(CN_F32, 0);
        }
        cn_program_stats st;
        if (p && k) {
            CHECK(cn_program_stats_get(p, &st) == 0);
            CHECK_EQ_INT(st.ndevice_steps[CN_DEVICE_CPU], 0);
        }
        w_end[k] = cn_to(cn_detach(w), CN_CPU);
        cn_program_free(p);
        cn_graph_free(g);
        cn_optimizer_free(opt);
    }
    for (int step = 0; step < 3; step++) CHECK(same_values(loss_at[1][step], loss_at[0][step]));
    CHECK(same_values(w_end[1], w_end[0]));
}

/* Traced on the CPU under bf16 autocast with the native path (forced):
 * the matmul step takes bf16 inputs to an f32 result, which only the CPU's
 * kernels do. Fed on the device, that step falls back to the CPU (the
 * device's GEMM read the bf16 inputs as f32 before), the rest runs there,
 * and the values are the CPU program's. */
static void test_autocast_native_on_device(void) {
    th_seed(13);
    cn_tensor *w = th_random(CN_F32, CN_SHAPE(4, 3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *b = th_random(CN_F32, CN_SHAPE(3), -1, 1, TH_CONTIG, NULL);
    cn_tensor *xv = th_random(CN_F32, CN_SHAPE(5, 4), -1, 1, TH_CONTIG, NULL);
    cn_autocast_native_mode_set(1);
    cn_graph *g = cn_graph_new();
    cn_autocast_begin(CN_BF16);
    cn_tensor *x = cn_placeholder(g, "x", CN_F32, CN_SHAPE(-1, 4));
    cn_tensor *y = model(x, w, b);
    cn_autocast_end();
    /* -O2: the matmul the head of a fused step */
    for (int level = 1; level <= 2; level++) {
        cn_program *p = cn_compile(
            g, &y, 1, &(cn_compile_opts){.opt_level = level, .quiet_fallback = true});
        CHECK(p != NULL);
        cn_tensor *want = p ? run1(p, x, xv) : NULL;
        cn_tensor *got = p ? run1(p, x, cn_to(xv, CL)) : NULL;
        CHECK(want && got && on(got, CL));
        CHECK_MSG(want && got && same_values(got, want), "-O%d: the bf16 program on opencl differs",
                  level);
        cn_program_stats st;
        CHECK(p && cn_program_stats_get(p, &st) == 0 && st.nfallbacks == 1);
        cn_program_free(p);
    }
    cn_autocast_native_mode_set(-1);
    cn_graph_free(g);
}

int main(void) {
    RUN(test_cpu_placement);
    if (cn_device_count(CN_DEVICE_OPENCL) == 0) {
        printf("skipped: no OpenCL platform (device placement not run on a device)\n");
        return th_summary();
    }
    RUN(test_fed_on_device);
    RUN(test_scope);
    RUN(test_fallback);
    RUN(test_gradients);
    RUN(test_train_step);
    RUN(test_autocast_native_on_device);
    return th_summary();
}
