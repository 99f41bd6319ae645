/* One device through the public API: what its matrix products, its
 * elementwise kernels and its per-op dispatch cost.
 *
 *   bench_gpu --device DEV [--quick] [--json] [--repeats N]
 *
 * - GEMM: f32 square cn_matmul at n = 1024, 2048, 4096, 8192 (--quick: 256,
 *   512), TFLOP/s (2 n^3 flops). The first size is also checked against the
 *   CPU, since a fast wrong product would make the rest meaningless. Built
 *   with CN_BENCH_CUBLAS on a CUDA device, cublasSgemm on cudaMalloc'd buffers
 *   runs at the same sizes and repeats, and the row gives chutney / cuBLAS.
 * - Elementwise at 16M f32 elements (--quick: 1M), GB/s counting every byte
 *   read and written once: a copy (cn_copy_ into a preallocated tensor,
 *   2 x 4 bytes per element), a + b (3 x 4), exp(a) (2 x 4), and
 *   relu(a * b + c) compiled as a static program (4 x 4) that fusion should
 *   make one kernel; with CN_BENCH_CUBLAS on a CUDA device also a direct
 *   device-to-device cudaMemcpy. Each row is given as a fraction of the best
 *   copy figure there is (cudaMemcpy where measured, else the public copy):
 *   elementwise kernels are bandwidth-bound, so that fraction is how close
 *   they come to the memory system's limit.
 * - Eager overhead: 20000 (--quick: 2000) adds of 1-element tensors, each
 *   result released as the next replaces it (bench_overhead's lifetimes),
 *   one synchronize at the end: microseconds per op.
 *
 * Every timed region starts and ends with cn_device_synchronize (and
 * cudaDeviceSynchronize for the direct rows): kernels are queued, and
 * without the waits the clock would measure only the queueing. Figures are
 * medians over the repeats, after warm-up runs that also pay for any kernel
 * compilation the device does on first use.
 */
#include <chutney.h>

#include "bench_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CN_BENCH_CUBLAS
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

#define MAX_SIZES 8

/* Each timed sample runs an op `iters` times between two synchronizes and
 * divides, so one launch's fixed cost does not dominate a fast kernel. The
 * count is picked from a warm run to make a sample last about this long. */
#define SAMPLE_TARGET_S 0.02
#define MAX_ITERS 50
/* A GEMM slower than this per call (a device falling back to the CPU, say)
 * gets fewer repeats, and the larger sizes are skipped, so the whole run
 * stays within the minutes a device check has. */
#define SLOW_CALL_S 1.0
#define TOO_SLOW_CALL_S 5.0

typedef struct gemm_row {
    int64_t n;
    double tflops;        /* < 0: not measured */
    double cublas_tflops; /* < 0: not measured */
    double check_err;     /* max |device - cpu| / max |cpu|; < 0: not checked */
} gemm_row;

typedef struct ew_result {
    int64_t n;
    double copy_gbs, add_gbs, exp_gbs, fused_gbs;
    double memcpy_gbs; /* < 0: not measured */
    int fused_steps, fused_kernels, fallbacks;
} ew_result;

static cn_device dev;
static int repeats = 7;

static void fail(const char *what) {
    fprintf(stderr, "bench_gpu: %s: %s\n", what, cn_last_error());
    exit(1);
}

static void sync_dev(void) {
    if (cn_device_synchronize(dev) < 0) fail("synchronize");
}

/* One call of what is being timed; returns 0 or a negative status. */
typedef int (*op_fn)(void *ctx);

/* The iteration count that makes a sample about SAMPLE_TARGET_S, from one
 * synchronized call (after the caller's warm-up). *one_s gets that call. */
static int pick_iters(op_fn f, void *ctx, double *one_s) {
    sync_dev();
    double t0 = bench_now_s();
    if (f(ctx) < 0) fail("warm-up run");
    sync_dev();
    double t = bench_now_s() - t0;
    if (one_s) *one_s = t;
    if (t <= 0) return MAX_ITERS;
    int it = (int)ceil(SAMPLE_TARGET_S / t);
    return it < 1 ? 1 : it > MAX_ITERS ? MAX_ITERS : it;
}

/* Median seconds per call over nrep samples of iters calls each. */
static double time_median(op_fn f, void *ctx, int iters, int nrep) {
    double *t = malloc(sizeof(double) * (size_t)nrep);
    if (!t) {
        fprintf(stderr, "bench_gpu: out of memory\n");
        exit(1);
    }
    for (int r = 0; r < nrep; r++) {
        sync_dev();
        double t0 = bench_now_s();
        for (int i = 0; i < iters; i++)
            if (f(ctx) < 0) fail("timed run");
        sync_dev();
        t[r] = (bench_now_s() - t0) / iters;
    }
    double m = bench_median(t, nrep);
    free(t);
    return m;
}

/* ---- the ops, each releasing what it makes ---- */

typedef struct bin_ctx {
    cn_tensor *a, *b, *c, *out;
    cn_tensor *(*binary)(cn_tensor *, cn_tensor *);
    cn_tensor *(*unary)(cn_tensor *);
} bin_ctx;

static int run_binary(void *p) {
    bin_ctx *c = p;
    cn_tensor *r = c->binary(c->a, c->b);
    if (!r) return -1;
    cn_release(r);
    return 0;
}

static int run_unary(void *p) {
    bin_ctx *c = p;
    cn_tensor *r = c->unary(c->a);
    if (!r) return -1;
    cn_release(r);
    return 0;
}

static int run_copy(void *p) {
    bin_ctx *c = p;
    return cn_copy_(c->out, c->a);
}

typedef struct prog_ctx {
    cn_program *p;
    cn_tensor *ph[3], *vals[3];
} prog_ctx;

/* The output is bound, so cn_run hands back the same tensor each time;
 * outside a scope the caller owns that reference. */
static int run_program(void *p) {
    prog_ctx *c = p;
    cn_tensor *o = NULL;
    int rc = cn_run(c->p, c->ph, c->vals, 3, &o, 1);
    if (rc < 0) return rc;
    cn_release(o);
    return 0;
}

/* ---- direct CUDA reference rows ---- */

#ifdef CN_BENCH_CUBLAS
static bool cuda_ok; /* a CUDA device is there and is the one benchmarked */

static void cuda_init(void) {
    int count = 0;
    if (dev.kind != CN_DEVICE_CUDA) return;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count <= dev.index) {
        /* Not an error: the same binary runs on machines without the GPU. */
        cudaGetLastError();
        fprintf(stderr, "bench_gpu: no CUDA device %d for the direct cuBLAS/cudaMemcpy rows; "
                        "skipping them\n", dev.index);
        return;
    }
    cuda_ok = cudaSetDevice(dev.index) == cudaSuccess;
}

/* Random values, so the products run on the data the other rows see (a
 * GPU draws less power, and clocks higher, on zeros). */
static float *host_random(size_t n) {
    float *h = malloc(n * sizeof(float));
    if (!h) return NULL;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        h[i] = (float)((double)(s >> 40) / (double)(1u << 24) * 2.0 - 1.0);
    }
    return h;
}

typedef struct cublas_ctx {
    cublasHandle_t h;
    float *a, *b, *c;
    int n;
} cublas_ctx;

/* Row-major C = A B is column-major C^T = B^T A^T: the operands swap. */
static int cublas_call(cublas_ctx *c) {
    const float one = 1, zero = 0;
    return cublasSgemm(c->h, CUBLAS_OP_N, CUBLAS_OP_N, c->n, c->n, c->n, &one, c->b, c->n, c->a,
                       c->n, &zero, c->c, c->n) == CUBLAS_STATUS_SUCCESS
               ? 0
               : -1;
}

static double cuda_median(int (*f)(void *), void *ctx, int iters, int nrep) {
    double *t = malloc(sizeof(double) * (size_t)nrep);
    if (!t) return -1;
    bool ok = true;
    for (int r = 0; r < nrep && ok; r++) {
        ok = cudaDeviceSynchronize() == cudaSuccess;
        double t0 = bench_now_s();
        for (int i = 0; i < iters && ok; i++) ok = f(ctx) == 0;
        ok = ok && cudaDeviceSynchronize() == cudaSuccess;
        t[r] = (bench_now_s() - t0) / iters;
    }
    double m = ok ? bench_median(t, nrep) : -1;
    free(t);
    return m;
}

static int cublas_op(void *p) { return cublas_call(p); }

/* TFLOP/s of cublasSgemm at n with the same iterations and repeats as the
 * Chutney row; < 0 when anything fails (reported, not fatal). */
static double cublas_tflops(int64_t n, int iters, int nrep) {
    if (!cuda_ok) return -1;
    cublas_ctx c = {.n = (int)n};
    size_t bytes = (size_t)n * (size_t)n * sizeof(float);
    double secs = -1;
    float *h = host_random((size_t)n * (size_t)n);
    if (!h || cublasCreate(&c.h) != CUBLAS_STATUS_SUCCESS) {
        free(h);
        fprintf(stderr, "bench_gpu: cuBLAS unavailable; skipping the direct rows\n");
        cuda_ok = false;
        return -1;
    }
    if (cudaMalloc((void **)&c.a, bytes) == cudaSuccess &&
        cudaMalloc((void **)&c.b, bytes) == cudaSuccess &&
        cudaMalloc((void **)&c.c, bytes) == cudaSuccess &&
        cudaMemcpy(c.a, h, bytes, cudaMemcpyHostToDevice) == cudaSuccess &&
        cudaMemcpy(c.b, h, bytes, cudaMemcpyHostToDevice) == cudaSuccess) {
        bool warm = true;
        for (int i = 0; i < 2 && warm; i++) warm = cublas_call(&c) == 0;
        if (warm) secs = cuda_median(cublas_op, &c, iters, nrep);
    }
    if (secs < 0)
        fprintf(stderr, "bench_gpu: cublasSgemm at n=%lld failed: %s\n", (long long)n,
                cudaGetErrorString(cudaGetLastError()));
    cudaFree(c.a);
    cudaFree(c.b);
    cudaFree(c.c);
    cublasDestroy(c.h);
    free(h);
    return secs > 0 ? 2.0 * (double)n * (double)n * (double)n / secs / 1e12 : -1;
}

typedef struct memcpy_ctx {
    void *dst, *src;
    size_t bytes;
} memcpy_ctx;

static int memcpy_op(void *p) {
    memcpy_ctx *c = p;
    return cudaMemcpy(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice) == cudaSuccess ? 0 : -1;
}

/* GB/s of a device-to-device cudaMemcpy of n f32 (read + write). */
static double cuda_memcpy_gbs(int64_t n, int iters, int nrep) {
    if (!cuda_ok) return -1;
    memcpy_ctx c = {NULL, NULL, (size_t)n * sizeof(float)};
    double secs = -1;
    if (cudaMalloc(&c.src, c.bytes) == cudaSuccess && cudaMalloc(&c.dst, c.bytes) == cudaSuccess &&
        cudaMemset(c.src, 0x3c, c.bytes) == cudaSuccess && memcpy_op(&c) == 0 &&
        memcpy_op(&c) == 0)
        secs = cuda_median(memcpy_op, &c, iters, nrep);
    if (secs < 0)
        fprintf(stderr, "bench_gpu: cudaMemcpy failed: %s\n",
                cudaGetErrorString(cudaGetLastError()));
    cudaFree(c.src);
    cudaFree(c.dst);
    return secs > 0 ? 2.0 * (double)c.bytes / secs / 1e9 : -1;
}
#else
static double cublas_tflops(int64_t n, int iters, int nrep) {
    (void)n, (void)iters, (void)nrep;
    return -1;
}
static double cuda_memcpy_gbs(int64_t n, int iters, int nrep) {
    (void)n, (void)iters, (void)nrep;
    return -1;
}
#endif

/* ---- the three parts ---- */

typedef struct mm_ctx {
    cn_tensor *a, *b;
} mm_ctx;

static int run_matmul(void *p) {
    mm_ctx *c = p;
    cn_tensor *r = cn_matmul(c->a, c->b);
    if (!r) return -1;
    cn_release(r);
    return 0;
}

/* max |device - cpu| / max |cpu| of a @ b. */
static double check_matmul(cn_tensor *a, cn_tensor *b) {
    cn_scope_begin();
    cn_tensor *got = cn_to(cn_matmul(a, b), CN_CPU);
    cn_tensor *want = cn_matmul(cn_to(a, CN_CPU), cn_to(b, CN_CPU));
    cn_tensor *err = cn_max(cn_abs(cn_sub(got, want)), NULL, 0, false);
    cn_tensor *scale = cn_max(cn_abs(want), NULL, 0, false);
    double r = err && scale ? cn_item(err) / fmax(cn_item(scale), 1e-30) : -1;
    cn_scope_end();
    if (r < 0) fail("checking the matrix product against the CPU");
    return r;
}

static int bench_gemm(const int64_t *sizes, int nsizes, gemm_row *rows) {
    int done = 0;
    for (int s = 0; s < nsizes; s++) {
        int64_t n = sizes[s];
        gemm_row *row = &rows[done++];
        *row = (gemm_row){n, -1, -1, -1};
        cn_manual_seed(10 + (uint64_t)s);
        cn_device_scope_begin(dev);
        mm_ctx c = {cn_uniform(CN_F32, CN_SHAPE(n, n), -1, 1),
                    cn_uniform(CN_F32, CN_SHAPE(n, n), -1, 1)};
        cn_device_scope_end();
        if (!c.a || !c.b) fail("allocating the GEMM operands");
        if (s == 0) row->check_err = check_matmul(c.a, c.b);
        if (run_matmul(&c) < 0) fail("matmul");
        double one = 0;
        int iters = pick_iters(run_matmul, &c, &one);
        int nrep = one > SLOW_CALL_S ? 3 : repeats;
        double secs = time_median(run_matmul, &c, iters, nrep);
        row->tflops = 2.0 * (double)n * (double)n * (double)n / secs / 1e12;
        cn_release(c.a);
        cn_release(c.b);
        row->cublas_tflops = cublas_tflops(n, iters, nrep);
        if (one > TOO_SLOW_CALL_S && s + 1 < nsizes) {
            fprintf(stderr, "bench_gpu: one %lldx%lld product took %.1f s; skipping the larger sizes\n",
                    (long long)n, (long long)n, one);
            break;
        }
    }
    return done;
}

static ew_result bench_elementwise(int64_t n) {
    ew_result r = {.n = n, .memcpy_gbs = -1};
    cn_manual_seed(3);
    cn_device_scope_begin(dev);
    bin_ctx c = {cn_uniform(CN_F32, CN_SHAPE(n), -2, 2), cn_uniform(CN_F32, CN_SHAPE(n), -2, 2),
                 cn_uniform(CN_F32, CN_SHAPE(n), -2, 2), cn_empty(CN_F32, CN_SHAPE(n)), NULL,
                 NULL};
    cn_device_scope_end();
    if (!c.a || !c.b || !c.c || !c.out) fail("allocating the elementwise operands");

    /* relu(a * b + c) as a program; placed on dev because its inputs are. */
    prog_ctx pc = {.vals = {c.a, c.b, c.c}};
    cn_scope_begin();
    cn_graph *g = cn_graph_new();
    const char *names[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) pc.ph[i] = cn_placeholder(g, names[i], CN_F32, CN_SHAPE(n));
    cn_tensor *y = cn_relu(cn_add(cn_mul(pc.ph[0], pc.ph[1]), pc.ph[2]));
    pc.p = y ? cn_compile(g, &y, 1, NULL) : NULL;
    for (int i = 0; i < 3; i++) cn_retain(pc.ph[i]);
    cn_scope_end();
    if (!pc.p) fail("compiling relu(a * b + c)");
    cn_device_scope_begin(dev);
    cn_tensor *fused_out = cn_empty(CN_F32, CN_SHAPE(n));
    cn_device_scope_end();
    if (!fused_out || cn_program_bind_output(pc.p, 0, fused_out) < 0)
        fail("binding the program's output");
    if (run_program(&pc) < 0) fail("running relu(a * b + c)");
    cn_program_stats st = {0};
    cn_program_stats_get(pc.p, &st);
    r.fused_steps = st.nsteps;
    r.fused_kernels = st.nfused;
    r.fallbacks = st.nfallbacks;

    struct {
        op_fn f;
        void *ctx;
        double bytes_per_elt;
        double *gbs;
    } rows[4] = {
        {run_copy, &c, 8, &r.copy_gbs},
        {run_binary, &c, 12, &r.add_gbs},
        {run_unary, &c, 8, &r.exp_gbs},
        {run_program, &pc, 16, &r.fused_gbs},
    };
    c.binary = cn_add;
    c.unary = cn_exp;
    int copy_iters = 1;
    for (int k = 0; k < 4; k++) {
        for (int w = 0; w < 2; w++)
            if (rows[k].f(rows[k].ctx) < 0) fail("elementwise warm-up");
        int iters = pick_iters(rows[k].f, rows[k].ctx, NULL);
        if (k == 0) copy_iters = iters;
        double secs = time_median(rows[k].f, rows[k].ctx, iters, repeats);
        *rows[k].gbs = rows[k].bytes_per_elt * (double)n / secs / 1e9;
    }
    r.memcpy_gbs = cuda_memcpy_gbs(n, copy_iters, repeats);

    cn_program_free(pc.p);
    for (int i = 0; i < 3; i++) cn_release(pc.ph[i]);
    cn_graph_free(g);
    cn_release(fused_out);
    cn_release(c.a);
    cn_release(c.b);
    cn_release(c.c);
    cn_release(c.out);
    return r;
}

/* Microseconds per eager add of two 1-element tensors on dev. */
static double bench_overhead(int nops) {
    float one = 1;
    cn_tensor *x0 = cn_from_data_on(dev, CN_F32, CN_SHAPE(1), &one);
    cn_tensor *a = cn_from_data_on(dev, CN_F32, CN_SHAPE(1), &one);
    if (!x0 || !a) fail("allocating the overhead operands");
    double *t = malloc(sizeof(double) * (size_t)repeats);
    if (!t) fail("out of memory");
    for (int r = -1; r < repeats; r++) { /* r = -1: warm-up */
        sync_dev();
        double t0 = bench_now_s();
        cn_tensor *x = x0;
        for (int i = 0; i < nops; i++) {
            cn_tensor *nx = cn_add(x, a);
            if (!nx) fail("add");
            if (x != x0) cn_release(x);
            x = nx;
        }
        sync_dev();
        if (r >= 0) t[r] = (bench_now_s() - t0) * 1e6 / nops;
        if (x != x0) cn_release(x);
    }
    double us = bench_median(t, repeats);
    free(t);
    cn_release(x0);
    cn_release(a);
    return us;
}

/* ---- output ---- */

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch < 0x20) printf("\\u%04x", ch);
        else putchar(ch);
    }
    putchar('"');
}

static void json_num(const char *fmt, double v) {
    if (v < 0 || !isfinite(v)) printf("null");
    else printf(fmt, v);
}

int main(int argc, char **argv) {
    const char *dev_name = NULL;
    bool quick = false, json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) dev_name = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_gpu --device DEV [--quick] [--json] [--repeats N]\n"
                            "  DEV: cuda:0, opencl:0, cpu, ... (`chutney devices` lists them)\n");
            return 2;
        }
    }
    if (!dev_name) {
        fprintf(stderr, "bench_gpu: --device DEV is required (cuda:0, opencl:0, cpu, ...)\n");
        return 2;
    }
    if (repeats < 1) repeats = 1;
    if (cn_device_parse(dev_name, &dev) < 0) {
        fprintf(stderr, "bench_gpu: bad --device '%s': %s\n", dev_name, cn_last_error());
        return 1;
    }
    char dstr[32];
    cn_device_str(dev, dstr, sizeof dstr);
    int count = cn_device_count((cn_device_kind)dev.kind);
    if (dev.index >= count) {
        fprintf(stderr, "bench_gpu: no device %s here (this build and machine have %d device%s of "
                        "that kind; `chutney devices` lists them)\n",
                dstr, count, count == 1 ? "" : "s");
        return 1;
    }
    cn_device_info info;
    if (cn_device_get_info(dev, &info) < 0) fail(dstr);
#ifdef CN_BENCH_CUBLAS
    cuda_init();
#endif

    static const int64_t full_sizes[] = {1024, 2048, 4096, 8192}, quick_sizes[] = {256, 512};
    const int64_t *sizes = quick ? quick_sizes : full_sizes;
    int nsizes = quick ? 2 : 4;
    int64_t ew_n = quick ? (int64_t)1 << 20 : (int64_t)1 << 24;
    int nops = quick ? 2000 : 20000;

    gemm_row rows[MAX_SIZES];
    int nrows = bench_gemm(sizes, nsizes, rows);
    ew_result ew = bench_elementwise(ew_n);
    double overhead_us = bench_overhead(nops);

    /* The reference for the fractions: the hardware's copy where measured. */
    bool ref_memcpy = ew.memcpy_gbs > 0;
    double ref = ref_memcpy ? ew.memcpy_gbs : ew.copy_gbs;
    if (json) {
        printf("{\"device\": ");
        json_string(dstr);
        printf(", \"device_name\": ");
        json_string(info.name);
        printf(", \"quick\": %s, \"repeats\": %d, \"gemm\": [", quick ? "true" : "false", repeats);
        for (int i = 0; i < nrows; i++) {
            gemm_row *g = &rows[i];
            bool both = g->tflops > 0 && g->cublas_tflops > 0;
            printf("%s{\"n\": %lld, \"tflops\": ", i ? ", " : "", (long long)g->n);
            json_num("%.4f", g->tflops);
            printf(", \"cublas_tflops\": ");
            json_num("%.4f", g->cublas_tflops);
            printf(", \"ratio\": ");
            json_num("%.4f", both ? g->tflops / g->cublas_tflops : -1);
            if (g->check_err >= 0) printf(", \"max_rel_err_vs_cpu\": %.3g", g->check_err);
            printf("}");
        }
        printf("], \"elementwise\": {\"n\": %lld, \"copy_gbs\": %.2f, \"cuda_memcpy_gbs\": ",
               (long long)ew.n, ew.copy_gbs);
        json_num("%.2f", ew.memcpy_gbs);
        printf(", \"add_gbs\": %.2f, \"exp_gbs\": %.2f, \"fused_gbs\": %.2f, \"reference\": \"%s\", "
               "\"copy_frac\": %.4f, \"add_frac\": %.4f, \"exp_frac\": %.4f, \"fused_frac\": %.4f, "
               "\"fused_program_steps\": %d, \"fused_kernels\": %d, \"fallbacks\": %d}, "
               "\"overhead_us\": %.3f, \"overhead_ops\": %d}\n",
               ew.add_gbs, ew.exp_gbs, ew.fused_gbs, ref_memcpy ? "cuda_memcpy" : "copy",
               ew.copy_gbs / ref, ew.add_gbs / ref, ew.exp_gbs / ref, ew.fused_gbs / ref,
               ew.fused_steps, ew.fused_kernels, ew.fallbacks, overhead_us, nops);
    } else {
        printf("%s: %s (%s), medians of %d repeats\n\n", dstr, info.name, info.driver, repeats);
        printf("GEMM f32, square      n  chutney TFLOP/s   cuBLAS TFLOP/s   chutney/cuBLAS\n");
        for (int i = 0; i < nrows; i++) {
            gemm_row *g = &rows[i];
            printf("%24lld  %15.3f", (long long)g->n, g->tflops);
            if (g->cublas_tflops > 0)
                printf("  %15.3f  %15.3f", g->cublas_tflops, g->tflops / g->cublas_tflops);
            else printf("  %15s  %15s", "-", "-");
            if (g->check_err >= 0) printf("   (max rel. error vs CPU %.2g)", g->check_err);
            printf("\n");
        }
        printf("\nelementwise f32, %lld elements        GB/s   of %s\n", (long long)ew.n,
               ref_memcpy ? "cudaMemcpy" : "the copy");
        if (ref_memcpy) printf("  cudaMemcpy D2D            %10.1f   %5.1f%%\n", ew.memcpy_gbs, 100.0);
        printf("  copy (cn_copy_)           %10.1f   %5.1f%%\n", ew.copy_gbs, 100 * ew.copy_gbs / ref);
        printf("  a + b                     %10.1f   %5.1f%%\n", ew.add_gbs, 100 * ew.add_gbs / ref);
        printf("  exp(a)                    %10.1f   %5.1f%%\n", ew.exp_gbs, 100 * ew.exp_gbs / ref);
        printf("  relu(a*b+c), program      %10.1f   %5.1f%%   (%d step%s, %d fused, %d on the CPU)\n",
               ew.fused_gbs, 100 * ew.fused_gbs / ref, ew.fused_steps,
               ew.fused_steps == 1 ? "" : "s", ew.fused_kernels, ew.fallbacks);
        printf("\neager overhead: %.3f us per add of 1-element tensors (%d ops, one synchronize)\n",
               overhead_us, nops);
    }
    if (rows[0].check_err > 1e-2) {
        fprintf(stderr, "bench_gpu: the %lldx%lld product on %s is off from the CPU's by %.3g "
                        "(relative): these timings are of a wrong result\n",
                (long long)rows[0].n, (long long)rows[0].n, dstr, rows[0].check_err);
        return 1;
    }
    return 0;
}
