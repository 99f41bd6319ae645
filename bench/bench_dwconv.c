/* Depthwise convolutions (groups = channels, padding = kernel / 2) on layer
 * shapes of MobileNetV2/V3, EfficientNet-B0 and ConvNeXt-T: each product
 * (forward with bias, input gradient, weight gradient) with im2col + GEMM,
 * oneDNN (when the build has it), the direct kernel (conv_depthwise.c) and
 * the automatic choice, f32, interleaved per repeat; median ms, or with
 * --best the fastest repeat (steadier on a busy machine). --dense runs the
 * layers of ResNet-18 and RegNetY-400MF instead (dense 3x3 and 7x7, grouped
 * 3x3 of 8 channels a group, 1x1), where the direct kernel does not apply
 * (its column is im2col + GEMM again); --cpu-time times with the process's
 * CPU time (meaningful at one thread, on a machine shared with others).
 *
 *   bench_dwconv [--batch N] [--threads T] [--repeats R] [--best] [--dense] [--cpu-time]
 */
#include <chutney.h>

#include "bench_util.h"

#include <inttypes.h>

#include "backend/cpu/conv.h"
#include "ops/op.h"

typedef struct layer {
    int64_t C, H, K, s;
    int64_t O, g; /* 0, 0: depthwise (O = groups = C) */
} layer;
static const layer dw_layers[] = {
    {32, 112, 3, 1, 0, 0}, {96, 112, 3, 2, 0, 0}, {144, 56, 3, 1, 0, 0}, {192, 28, 3, 1, 0, 0},
    {576, 14, 3, 2, 0, 0}, {960, 7, 3, 1, 0, 0}, {240, 28, 5, 1, 0, 0}, {672, 14, 5, 1, 0, 0},
    {1152, 7, 5, 1, 0, 0}, {96, 56, 7, 1, 0, 0}, {192, 28, 7, 1, 0, 0}, {384, 14, 7, 1, 0, 0},
    {768, 7, 7, 1, 0, 0},
};
static const layer dense_layers[] = {
    {3, 224, 7, 2, 64, 1},    {64, 56, 3, 1, 64, 1},    {128, 28, 3, 1, 128, 1},
    {256, 14, 3, 1, 256, 1},  {512, 7, 3, 1, 512, 1},   {48, 112, 3, 2, 48, 6},
    {104, 28, 3, 1, 104, 13}, {208, 14, 3, 1, 208, 26}, {440, 7, 3, 1, 440, 55},
    {48, 56, 1, 1, 104, 1},   {208, 14, 1, 1, 208, 1},  {440, 7, 1, 1, 440, 1},
};
static const layer *layers = dw_layers;
static int nlayers = (int)(sizeof dw_layers / sizeof dw_layers[0]);

static bool use_cpu_time;
static double now_s(void) { return use_cpu_time ? bench_cpu_s() : bench_now_s(); }
static int64_t out_ch(const layer *L) { return L->O ? L->O : L->C; }
static int64_t groups(const layer *L) { return L->g ? L->g : L->C; }

enum { NIMPL = 4, NPASS = 3 };
static const cn_conv_impl impls[NIMPL] = {CN_CONV_GEMM, CN_CONV_DNNL, CN_CONV_DEPTHWISE,
                                          CN_CONV_AUTO};
static const char *impl_names[NIMPL] = {"gemm", "onednn", "direct", "auto"};
static const char *pass_names[NPASS] = {"forward", "input grad", "weight grad"};

static double run_pass(int pass, const layer *L, cn_tensor *x, cn_tensor *w, cn_tensor *b,
                       cn_tensor *dy) {
    int64_t p = L->K / 2;
    cn_conv_opts o = {{L->s, L->s}, {p, p}, {1, 1}, groups(L), {0, 0}};
    int64_t oh = (L->H + 2 * p - L->K) / L->s + 1;
    cn_scope_begin();
    double t0 = now_s();
    cn_tensor *r;
    if (pass == 0) {
        r = cn_conv2d(x, w, b, &o);
    } else if (pass == 1) {
        int64_t op = L->H - ((oh - 1) * L->s - 2 * p + L->K);
        cn_attrs a = {.i = {groups(L)}, .nlist = 8, .list = {L->s, L->s, p, p, 1, 1, op, op}};
        r = cn_op_apply(CN_OP_conv_transpose2d, (cn_tensor *[]){dy, w}, 2, &a);
    } else {
        cn_attrs a = {.i = {groups(L), L->K, L->K}, .nlist = 6, .list = {L->s, L->s, p, p, 1, 1}};
        r = cn_op_apply(CN_OP_conv2d_weight_grad, (cn_tensor *[]){x, dy}, 2, &a);
    }
    double t = now_s() - t0;
    if (!r) {
        fprintf(stderr, "bench_dwconv: %s: %s\n", pass_names[pass], cn_last_error());
        exit(1);
    }
    cn_scope_end();
    return t * 1e3;
}

int main(int argc, char **argv) {
    int64_t N = 1;
    int threads = 1, repeats = 7;
    bool best = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--best")) best = true;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) N = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cpu-time")) use_cpu_time = true;
        else if (!strcmp(argv[i], "--dense")) {
            layers = dense_layers;
            nlayers = (int)(sizeof dense_layers / sizeof dense_layers[0]);
        } else {
            fprintf(stderr,
                    "usage: %s [--batch N] [--threads T] [--repeats R] [--best] [--dense] "
                    "[--cpu-time]\n",
                    argv[0]);
            return 2;
        }
    }
    if (N < 1 || threads < 1 || repeats < 1) {
        fprintf(stderr, "bench_dwconv: --batch, --threads and --repeats take positive counts\n");
        return 2;
    }
    cn_set_num_threads(threads);
    cn_manual_seed(0);
    double *t = malloc(sizeof(double) * (size_t)repeats * NIMPL);
    printf("batch %" PRId64 ", %d thread(s), %s of %d, ms%s\n", N, threads,
           best ? "best" : "median", repeats, use_cpu_time ? " of CPU time" : "");
    printf("%-26s %-12s", "C>O HxW kxk /s gG", "product");
    for (int m = 0; m < NIMPL; m++) printf(" %8s", impl_names[m]);
    printf("\n");
    for (int l = 0; l < nlayers; l++) {
        const layer *L = &layers[l];
        int64_t oh = (L->H + 2 * (L->K / 2) - L->K) / L->s + 1;
        cn_scope_begin();
        cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(N, L->C, L->H, L->H));
        cn_tensor *w = cn_randn(CN_F32, CN_SHAPE(out_ch(L), L->C / groups(L), L->K, L->K));
        cn_tensor *b = cn_randn(CN_F32, CN_SHAPE(out_ch(L)));
        cn_tensor *dy = cn_randn(CN_F32, CN_SHAPE(N, out_ch(L), oh, oh));
        for (int pass = 0; pass < NPASS; pass++) {
            for (int r = -1; r < repeats; r++)
                for (int m = 0; m < NIMPL; m++) {
                    if (impls[m] == CN_CONV_DNNL && !cn_conv_have_dnnl()) continue;
                    cn_conv_impl prev = cn_conv_set_impl(impls[m]);
                    double ms = run_pass(pass, L, x, w, b, dy);
                    cn_conv_set_impl(prev);
                    if (r >= 0) t[m * repeats + r] = ms; /* r = -1: warm-up */
                }
            char name[48];
            snprintf(name, sizeof name,
                     "%" PRId64 ">%" PRId64 " %" PRId64 "x%" PRId64 " %" PRId64 "x%" PRId64
                     " /%" PRId64 " g%" PRId64,
                     L->C, out_ch(L), L->H, L->H, L->K, L->K, L->s, groups(L));
            printf("%-26s %-12s", name, pass_names[pass]);
            for (int m = 0; m < NIMPL; m++) {
                if (impls[m] == CN_CONV_DNNL && !cn_conv_have_dnnl()) printf(" %8s", "-");
                else {
                    double v = bench_median(t + m * repeats, repeats); /* sorts */
                    printf(" %8.3f", best ? t[m * repeats] : v);
                }
            }
            printf("\n");
        }
        cn_scope_end();
    }
    free(t);
    return 0;
}
