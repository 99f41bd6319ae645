/* Depthwise convolutions (groups = channels, padding = kernel / 2) on layer
 * shapes of MobileNetV2/V3, EfficientNet-B0 and ConvNeXt-T: each product
 * (forward with bias, input gradient, weight gradient) with im2col + GEMM,
 * oneDNN (when the build has it), the direct kernel (conv_depthwise.c) and
 * the automatic choice, f32, interleaved per repeat; median ms, or with
 * --best the fastest repeat (steadier on a busy machine).
 *
 *   bench_dwconv [--batch N] [--threads T] [--repeats R] [--best]
 */
#include <chutney.h>

#include "bench_util.h"

#include <inttypes.h>

#include "backend/cpu/conv.h"
#include "ops/op.h"

typedef struct layer {
    int64_t C, H, K, s;
} layer;
static const layer layers[] = {
    {32, 112, 3, 1}, {96, 112, 3, 2}, {144, 56, 3, 1}, {192, 28, 3, 1}, {576, 14, 3, 2},
    {960, 7, 3, 1},  {240, 28, 5, 1}, {672, 14, 5, 1}, {1152, 7, 5, 1}, {96, 56, 7, 1},
    {192, 28, 7, 1}, {384, 14, 7, 1}, {768, 7, 7, 1},
};
#define NLAYERS (int)(sizeof layers / sizeof layers[0])

enum { NIMPL = 4, NPASS = 3 };
static const cn_conv_impl impls[NIMPL] = {CN_CONV_GEMM, CN_CONV_DNNL, CN_CONV_DEPTHWISE,
                                          CN_CONV_AUTO};
static const char *impl_names[NIMPL] = {"gemm", "onednn", "direct", "auto"};
static const char *pass_names[NPASS] = {"forward", "input grad", "weight grad"};

static double run_pass(int pass, const layer *L, cn_tensor *x, cn_tensor *w, cn_tensor *b,
                       cn_tensor *dy) {
    int64_t p = L->K / 2;
    cn_conv_opts o = {{L->s, L->s}, {p, p}, {1, 1}, L->C, {0, 0}};
    int64_t oh = (L->H + 2 * p - L->K) / L->s + 1;
    cn_scope_begin();
    double t0 = bench_now_s();
    cn_tensor *r;
    if (pass == 0) {
        r = cn_conv2d(x, w, b, &o);
    } else if (pass == 1) {
        int64_t op = L->H - ((oh - 1) * L->s - 2 * p + L->K);
        cn_attrs a = {.i = {L->C}, .nlist = 8, .list = {L->s, L->s, p, p, 1, 1, op, op}};
        r = cn_op_apply(CN_OP_conv_transpose2d, (cn_tensor *[]){dy, w}, 2, &a);
    } else {
        cn_attrs a = {.i = {L->C, L->K, L->K}, .nlist = 6, .list = {L->s, L->s, p, p, 1, 1}};
        r = cn_op_apply(CN_OP_conv2d_weight_grad, (cn_tensor *[]){x, dy}, 2, &a);
    }
    double t = bench_now_s() - t0;
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
        else {
            fprintf(stderr, "usage: %s [--batch N] [--threads T] [--repeats R] [--best]\n", argv[0]);
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
    printf("batch %" PRId64 ", %d thread(s), %s of %d, ms\n", N, threads, best ? "best" : "median",
           repeats);
    printf("%-22s %-12s", "C HxW kxk /s", "product");
    for (int m = 0; m < NIMPL; m++) printf(" %8s", impl_names[m]);
    printf("\n");
    for (int l = 0; l < NLAYERS; l++) {
        const layer *L = &layers[l];
        int64_t oh = (L->H + 2 * (L->K / 2) - L->K) / L->s + 1;
        cn_scope_begin();
        cn_tensor *x = cn_randn(CN_F32, CN_SHAPE(N, L->C, L->H, L->H));
        cn_tensor *w = cn_randn(CN_F32, CN_SHAPE(L->C, 1, L->K, L->K));
        cn_tensor *b = cn_randn(CN_F32, CN_SHAPE(L->C));
        cn_tensor *dy = cn_randn(CN_F32, CN_SHAPE(N, L->C, oh, oh));
        for (int pass = 0; pass < NPASS; pass++) {
            for (int r = -1; r < repeats; r++)
                for (int m = 0; m < NIMPL; m++) {
                    if (impls[m] == CN_CONV_DNNL && !cn_conv_have_dnnl()) continue;
                    cn_conv_impl prev = cn_conv_set_impl(impls[m]);
                    double ms = run_pass(pass, L, x, w, b, dy);
                    cn_conv_set_impl(prev);
                    if (r >= 0) t[m * repeats + r] = ms; /* r = -1: warm-up */
                }
            char name[40];
            snprintf(name, sizeof name, "%" PRId64 " %" PRId64 "x%" PRId64 " %" PRId64 "x%" PRId64
                     " /%" PRId64, L->C, L->H, L->H, L->K, L->K, L->s);
            printf("%-22s %-12s", name, pass_names[pass]);
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
