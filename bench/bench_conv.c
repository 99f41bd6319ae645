/* Convolution and pooling on the shapes of the Fashion-MNIST CNN (batch 64,
 * 28x28: conv 1->32 3x3 pad 1, ReLU, max pool 2; conv 32->64 3x3 pad 1,
 * ReLU, max pool 2; fc 3136->128; fc 128->10), chutney beside PyTorch, at 1
 * and 2 threads, f32:
 *   - each convolution's three products (forward with bias, input gradient,
 *     weight gradient) with each implementation (im2col + GEMM, oneDNN when
 *     the build has it) and with the automatic choice the ops make;
 *   - max pooling forward and backward;
 *   - one whole training step (forward, loss = mean(logits^2), gradients of
 *     every parameter).
 * Figures are the median time of the repeats, in milliseconds; runs of the
 * implementations are interleaved so drift on a shared machine hits them
 * alike. PyTorch runs in one python3 process (torch.set_num_threads), after
 * chutney, over the same shapes.
 *
 *   bench_conv [--repeats N] [--no-torch] [--cpu-time] [--json]
 */
#include <chutney.h>

#include "bench_util.h"

#include "backend/cpu/conv.h"
#include "ops/op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --cpu-time: bench_cpu_s instead of the wall clock. */
static bool use_cpu_time;

static double now_s(void) { return use_cpu_time ? bench_cpu_s() : bench_now_s(); }

static void die(const char *what) {
    fprintf(stderr, "bench_conv: %s: %s\n", what, cn_last_error());
    exit(1);
}

/* ---- the products ---- */

typedef struct layer {
    const char *name;
    int64_t N, C, H, O;
} layer;
static const layer layers[] = {{"conv1 1->32 28x28", 64, 1, 28, 32}, {"conv2 32->64 14x14", 64, 32, 14, 64}};
#define NLAYERS 2

enum { P_FWD, P_DGRAD, P_WGRAD, NPASS };
static const char *pass_names[NPASS] = {"forward", "input grad", "weight grad"};

typedef struct layer_data {
    cn_tensor *x, *w, *b, *dy;
} layer_data;

static const cn_conv_opts pad1 = {.padding = {1, 1}};

static void run_pass(int pass, const layer_data *d) {
    cn_scope_begin();
    cn_tensor *r = NULL;
    if (pass == P_FWD) {
        r = cn_conv2d(d->x, d->w, d->b, &pad1);
    } else if (pass == P_DGRAD) {
        cn_attrs a = {.i = {1}, .nlist = 8, .list = {1, 1, 1, 1, 1, 1, 0, 0}};
        r = cn_op_apply(CN_OP_conv_transpose2d, (cn_tensor *[]){d->dy, d->w}, 2, &a);
    } else {
        cn_attrs a = {.i = {1, 3, 3}, .nlist = 6, .list = {1, 1, 1, 1, 1, 1}};
        r = cn_op_apply(CN_OP_conv2d_weight_grad, (cn_tensor *[]){d->x, d->dy}, 2, &a);
    }
    if (!r) die(pass_names[pass]);
    cn_scope_end();
}

/* ---- the whole step ---- */

typedef struct cnn {
    cn_tensor *w1, *b1, *w2, *b2, *f1, *c1, *f2, *c2;
} cnn;

static const cn_pool_opts k2 = {.kernel = {2, 2}};

static void train_step(const cnn *m, cn_tensor *x) {
    cn_scope_begin();
    cn_tensor *h = cn_max_pool2d(cn_relu(cn_conv2d(x, m->w1, m->b1, &pad1)), &k2);
    h = cn_max_pool2d(cn_relu(cn_conv2d(h, m->w2, m->b2, &pad1)), &k2);
    h = cn_reshape(h, CN_SHAPE(cn_dim(x, 0), -1));
    h = cn_relu(cn_add(cn_matmul(h, m->f1), m->c1));
    cn_tensor *logits = cn_add(cn_matmul(h, m->f2), m->c2);
    cn_tensor *loss = cn_mean(cn_square(logits), NULL, 0, false);
    cn_tensor *params[8] = {m->w1, m->b1, m->w2, m->b2, m->f1, m->c1, m->f2, m->c2}, *g[8];
    if (cn_grad(&loss, NULL, 1, params, 8, g, 0) != 0) die("train step");
    cn_scope_end();
}

/* ---- PyTorch ---- */

static const char torch_script[] =
    "import sys, time, torch\n"
    "import torch.nn.functional as F\n"
    "reps = int(sys.argv[1])\n"
    "clock = time.process_time if sys.argv[2] == '1' else time.perf_counter\n"
    "def med(f):\n"
    "    f(); f()\n"
    "    ts = []\n"
    "    for _ in range(reps):\n"
    "        t = clock(); f(); ts.append(clock() - t)\n"
    "    ts.sort(); n = len(ts)\n"
    "    return 1e3 * (ts[n // 2] if n % 2 else 0.5 * (ts[n // 2 - 1] + ts[n // 2]))\n"
    "torch.manual_seed(0)\n"
    "for nt in (1, 2):\n"
    "    torch.set_num_threads(nt)\n"
    "    for li, (N, C, H, O) in enumerate(((64, 1, 28, 32), (64, 32, 14, 64))):\n"
    "        x = torch.randn(N, C, H, H); w = torch.randn(O, C, 3, 3); b = torch.randn(O)\n"
    "        dy = torch.randn(N, O, H, H)\n"
    "        cb = torch.ops.aten.convolution_backward\n"
    "        print('conv', li, 0, nt, med(lambda: F.conv2d(x, w, b, padding=1)))\n"
    "        print('conv', li, 1, nt, med(lambda: cb(dy, x, w, [O], [1, 1], [1, 1], [1, 1], "
    "False, [0, 0], 1, [True, False, False])))\n"
    "        print('conv', li, 2, nt, med(lambda: cb(dy, x, w, [O], [1, 1], [1, 1], [1, 1], "
    "False, [0, 0], 1, [False, True, False])))\n"
    "        xp = torch.randn(N, O, H, H, requires_grad=True)\n"
    "        y = F.max_pool2d(xp, 2); gy = torch.randn_like(y)\n"
    "        print('pool', li, 0, nt, med(lambda: F.max_pool2d(xp.detach(), 2)))\n"
    "        print('pool', li, 1, nt, med(lambda: torch.autograd.grad(F.max_pool2d(xp, 2), xp, "
    "gy)))\n"
    "    m = [torch.randn(32, 1, 3, 3) * 0.3, torch.zeros(32), torch.randn(64, 32, 3, 3) * 0.06,\n"
    "         torch.zeros(64), torch.randn(3136, 128) * 0.02, torch.zeros(128),\n"
    "         torch.randn(128, 10) * 0.1, torch.zeros(10)]\n"
    "    for p in m: p.requires_grad_(True)\n"
    "    x = torch.randn(64, 1, 28, 28)\n"
    "    def step():\n"
    "        h = F.max_pool2d(F.relu(F.conv2d(x, m[0], m[1], padding=1)), 2)\n"
    "        h = F.max_pool2d(F.relu(F.conv2d(h, m[2], m[3], padding=1)), 2)\n"
    "        h = F.relu(h.reshape(64, -1) @ m[4] + m[5])\n"
    "        loss = ((h @ m[6] + m[7]) ** 2).mean()\n"
    "        torch.autograd.grad(loss, m)\n"
    "    print('step', 0, 0, nt, med(step))\n";

/* torch_ms[kind][layer][pass][threads - 1]; kind 0 conv, 1 pool, 2 step */
static double torch_ms[3][NLAYERS][NPASS][2];

static bool run_torch(int repeats) {
    char path[] = "/tmp/cn_bench_conv_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return false;
    FILE *f = fdopen(fd, "w");
    fputs(torch_script, f);
    fclose(f);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %d %d", path, repeats, use_cpu_time);
    FILE *p = popen(cmd, "r");
    bool ok = p != NULL;
    char kind[16];
    int li, pass, nt;
    double ms;
    while (p && fscanf(p, "%15s %d %d %d %lf", kind, &li, &pass, &nt, &ms) == 5) {
        int k = !strcmp(kind, "conv") ? 0 : !strcmp(kind, "pool") ? 1 : 2;
        if (li >= 0 && li < NLAYERS && pass >= 0 && pass < NPASS && nt >= 1 && nt <= 2)
            torch_ms[k][li][pass][nt - 1] = ms;
    }
    if (p && pclose(p) != 0) ok = false;
    remove(path);
    return ok;
}

int main(int argc, char **argv) {
    int repeats = 15;
    bool torch = true, json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--no-torch")) torch = false;
        else if (!strcmp(argv[i], "--cpu-time")) use_cpu_time = true;
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--repeats N] [--no-torch] [--cpu-time] [--json]\n", argv[0]);
            return 2;
        }
    }
    if (repeats < 1) repeats = 1;
    cn_manual_seed(0);

    cn_conv_impl impls[3] = {CN_CONV_GEMM, CN_CONV_DNNL, CN_CONV_AUTO};
    const char *impl_names[3] = {"gemm", "onednn", "auto"};
    int nimpl = 3;
    bool have_dnnl = cn_conv_have_dnnl();
    /* conv_ms[layer][pass][threads - 1][impl] */
    double conv_ms[NLAYERS][NPASS][2][3] = {{{{0}}}};
    double pool_ms[NLAYERS][2][2] = {{{0}}}, step_ms[2] = {0};
    double *t = malloc(sizeof(double) * (size_t)repeats * 3);

    layer_data d[NLAYERS];
    cn_tensor *px[NLAYERS], *pgy[NLAYERS];
    for (int l = 0; l < NLAYERS; l++) {
        const layer *L = &layers[l];
        d[l].x = cn_randn(CN_F32, CN_SHAPE(L->N, L->C, L->H, L->H));
        d[l].w = cn_randn(CN_F32, CN_SHAPE(L->O, L->C, 3, 3));
        d[l].b = cn_randn(CN_F32, CN_SHAPE(L->O));
        d[l].dy = cn_randn(CN_F32, CN_SHAPE(L->N, L->O, L->H, L->H));
        px[l] = cn_randn(CN_F32, CN_SHAPE(L->N, L->O, L->H, L->H));
        cn_set_requires_grad(px[l], true);
        pgy[l] = cn_randn(CN_F32, CN_SHAPE(L->N, L->O, L->H / 2, L->H / 2));
    }
    cnn m = {cn_mul_scalar(cn_randn(CN_F32, CN_SHAPE(32, 1, 3, 3)), 0.3),
             cn_zeros(CN_F32, CN_SHAPE(32)),
             cn_mul_scalar(cn_randn(CN_F32, CN_SHAPE(64, 32, 3, 3)), 0.06),
             cn_zeros(CN_F32, CN_SHAPE(64)),
             cn_mul_scalar(cn_randn(CN_F32, CN_SHAPE(3136, 128)), 0.02),
             cn_zeros(CN_F32, CN_SHAPE(128)),
             cn_mul_scalar(cn_randn(CN_F32, CN_SHAPE(128, 10)), 0.1),
             cn_zeros(CN_F32, CN_SHAPE(10))};
    cn_tensor *params[8] = {m.w1, m.b1, m.w2, m.b2, m.f1, m.c1, m.f2, m.c2};
    for (int i = 0; i < 8; i++) cn_set_requires_grad(params[i], true);
    cn_tensor *xs = cn_randn(CN_F32, CN_SHAPE(64, 1, 28, 28));

    for (int nt = 1; nt <= 2; nt++) {
        cn_set_num_threads(nt);
        for (int l = 0; l < NLAYERS; l++)
            for (int pass = 0; pass < NPASS; pass++) {
                for (int k = 0; k < nimpl; k++) { /* warm-up */
                    if (impls[k] == CN_CONV_DNNL && !have_dnnl) continue;
                    cn_conv_set_impl(impls[k]);
                    run_pass(pass, &d[l]);
                    run_pass(pass, &d[l]);
                }
                for (int r = 0; r < repeats; r++)
                    for (int k = 0; k < nimpl; k++) {
                        if (impls[k] == CN_CONV_DNNL && !have_dnnl) continue;
                        cn_conv_set_impl(impls[k]);
                        double t0 = now_s();
                        run_pass(pass, &d[l]);
                        t[k * repeats + r] = now_s() - t0;
                    }
                for (int k = 0; k < nimpl; k++)
                    if (impls[k] != CN_CONV_DNNL || have_dnnl)
                        conv_ms[l][pass][nt - 1][k] = 1e3 * bench_median(t + k * repeats, repeats);
            }
        cn_conv_set_impl(CN_CONV_AUTO);
        for (int l = 0; l < NLAYERS; l++)
            for (int pass = 0; pass < 2; pass++) {
                for (int r = -2; r < repeats; r++) {
                    cn_scope_begin();
                    double t0 = now_s();
                    if (pass == 0) {
                        cn_no_grad_begin();
                        if (!cn_max_pool2d(px[l], &k2)) die("max_pool2d");
                        cn_no_grad_end();
                    } else {
                        cn_tensor *y = cn_max_pool2d(px[l], &k2), *gx;
                        if (cn_grad(&y, &pgy[l], 1, &px[l], 1, &gx, 0) != 0) die("pool grad");
                    }
                    if (r >= 0) t[r] = now_s() - t0;
                    cn_scope_end();
                }
                pool_ms[l][pass][nt - 1] = 1e3 * bench_median(t, repeats);
            }
        for (int r = -2; r < repeats; r++) {
            double t0 = now_s();
            train_step(&m, xs);
            if (r >= 0) t[r] = now_s() - t0;
        }
        step_ms[nt - 1] = 1e3 * bench_median(t, repeats);
    }
    free(t);
    bool have_torch = torch && run_torch(repeats);
    if (torch && !have_torch) fprintf(stderr, "bench_conv: the PyTorch run failed\n");

    if (json) {
        printf("{\"benchmark\": \"conv\", \"build\": \"%s\", \"repeats\": %d, \"results\": [",
               cn_build_info(), repeats);
        bool first = true;
        for (int nt = 1; nt <= 2; nt++) {
            for (int l = 0; l < NLAYERS; l++) {
                for (int pass = 0; pass < NPASS; pass++) {
                    printf("%s{\"op\": \"%s %s\", \"threads\": %d", first ? "" : ", ",
                           layers[l].name, pass_names[pass], nt);
                    first = false;
                    for (int k = 0; k < nimpl; k++)
                        if (conv_ms[l][pass][nt - 1][k] > 0)
                            printf(", \"%s_ms\": %.4f", impl_names[k], conv_ms[l][pass][nt - 1][k]);
                    if (have_torch) printf(", \"torch_ms\": %.4f", torch_ms[0][l][pass][nt - 1]);
                    printf("}");
                }
                for (int pass = 0; pass < 2; pass++) {
                    printf(", {\"op\": \"max_pool2d %s %s\", \"threads\": %d, \"auto_ms\": %.4f",
                           layers[l].name, pass ? "backward" : "forward", nt,
                           pool_ms[l][pass][nt - 1]);
                    if (have_torch) printf(", \"torch_ms\": %.4f", torch_ms[1][l][pass][nt - 1]);
                    printf("}");
                }
            }
            printf(", {\"op\": \"train step\", \"threads\": %d, \"auto_ms\": %.4f", nt,
                   step_ms[nt - 1]);
            if (have_torch) printf(", \"torch_ms\": %.4f", torch_ms[2][0][0][nt - 1]);
            printf("}");
        }
        printf("]}\n");
        return 0;
    }
    printf("CNN shapes (batch 64, f32), median of %d, ms; %s%s\n\n", repeats, cn_build_info(),
           have_dnnl ? "" : " (no oneDNN in this build)");
    printf("%-32s %3s | %8s %8s %8s | %8s | %7s\n", "op", "thr", "gemm", "onednn", "auto",
           "torch", "torch/auto");
    for (int nt = 1; nt <= 2; nt++) {
        for (int l = 0; l < NLAYERS; l++) {
            for (int pass = 0; pass < NPASS; pass++) {
                char name[64];
                snprintf(name, sizeof name, "%s %s", layers[l].name + 6, pass_names[pass]);
                printf("%-32s %3d |", name, nt);
                for (int k = 0; k < nimpl; k++) {
                    double v = conv_ms[l][pass][nt - 1][k];
                    if (v > 0) printf(" %8.3f", v);
                    else printf(" %8s", "-");
                }
                double tv = have_torch ? torch_ms[0][l][pass][nt - 1] : 0;
                if (tv > 0) printf(" | %8.3f | %7.2f\n", tv, tv / conv_ms[l][pass][nt - 1][2]);
                else printf(" | %8s | %7s\n", "-", "-");
            }
            for (int pass = 0; pass < 2; pass++) {
                char name[64];
                snprintf(name, sizeof name, "maxpool2 %s %s", pass ? "bwd" : "fwd",
                         l ? "64x14x14" : "32x28x28");
                double tv = have_torch ? torch_ms[1][l][pass][nt - 1] : 0;
                printf("%-32s %3d | %8s %8s %8.3f |", name, nt, "", "", pool_ms[l][pass][nt - 1]);
                if (tv > 0) printf(" %8.3f | %7.2f\n", tv, tv / pool_ms[l][pass][nt - 1]);
                else printf(" %8s | %7s\n", "-", "-");
            }
        }
        double tv = have_torch ? torch_ms[2][0][0][nt - 1] : 0;
        printf("%-32s %3d | %8s %8s %8.3f |", "train step (fwd + grads)", nt, "", "",
               step_ms[nt - 1]);
        if (tv > 0) printf(" %8.3f | %7.2f\n", tv, tv / step_ms[nt - 1]);
        else printf(" %8s | %7s\n", "-", "-");
    }
    return 0;
}
