/* Optimiser step time: Adam (default options) over three parameter sets of
 * layer-like shapes, about 0.42M (the CNN benchmark model's size), 1.07M and
 * 2.92M parameters, with fixed random gradients; Chutney's flat step next
 * to torch.optim.Adam with foreach=False (a loop of per-tensor ops) and
 * foreach=True (multi-tensor ops), in the same run, interleaved, the same
 * thread count each (default 1). A PyTorch child process (/usr/bin/python3)
 * times its steps on request, as in bench_overhead. Prints milliseconds per
 * step (medians of the repeats) and the ratios torch / Chutney.
 *
 *   bench_optim [--threads N] [--repeats N] [--steps N] [--no-torch] [--json]
 */
#include <chutney.h>

#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Shapes of each set (0-terminated rows of up to 4 sizes; a row of zeros
 * ends the set): conv and linear weights with their biases. */
#define MAXT 12
static const int64_t SETS[3][MAXT][4] = {
    /* 421,642: conv 1->32 3x3, conv 32->64 3x3, linear 3136->128, 128->10 */
    {{32, 1, 3, 3}, {32}, {64, 32, 3, 3}, {64}, {128, 3136}, {128}, {10, 128}, {10}},
    /* 1,066,240: linear 784->1024, 1024->256 */
    {{1024, 784}, {1024}, {256, 1024}, {256}},
    /* 2,924,554: linear 784->2048, 2048->512, 512->512, 512->10 */
    {{2048, 784}, {2048}, {512, 2048}, {512}, {512, 512}, {512}, {10, 512}, {10}},
};
#define NSETS 3

static int rank_of(const int64_t *s) {
    int r = 0;
    while (r < 4 && s[r]) r++;
    return r;
}

typedef struct cset {
    cn_tensor *params[MAXT];
    int n;
    int64_t numel;
    cn_optimizer *opt;
} cset;

static void die(const char *what) {
    fprintf(stderr, "bench_optim: %s: %s\n", what, cn_last_error());
    exit(1);
}

static void cset_init(cset *c, int which) {
    memset(c, 0, sizeof *c);
    cn_scope_begin(); /* the optimiser keeps the parameters */
    for (int i = 0; i < MAXT && SETS[which][i][0]; i++) {
        int r = rank_of(SETS[which][i]);
        c->params[i] = cn_mul_scalar(cn_randn(CN_F32, r, SETS[which][i]), 0.05);
        cn_set_requires_grad(c->params[i], true);
        c->numel += cn_numel(c->params[i]);
        c->n++;
    }
    c->opt = cn_adam(c->params, c->n, NULL);
    if (!c->opt) die("adam");
    /* Fixed gradients, straight into the flat buffer the grads view. */
    for (int i = 0; i < c->n; i++) {
        cn_tensor *g = cn_get_grad(c->params[i]);
        if (!g || cn_copy_(g, cn_randn(CN_F32, cn_ndim(g), cn_shape(g))) < 0) die("gradients");
    }
    cn_scope_end();
}

/* Milliseconds per step over `steps` steps. */
static double chutney_run(cset *c, int steps) {
    double t0 = bench_now_s();
    for (int s = 0; s < steps; s++)
        if (cn_optimizer_step(c->opt) < 0) die("step");
    return (bench_now_s() - t0) * 1e3 / steps;
}

/* The PyTorch side: the same shapes; each input line "SET MODE STEPS"
 * (MODE 0: foreach=False, 1: foreach=True) is answered with ms per step. */
static const char *torch_script =
    "import os, sys, time\n"
    "nt = int(sys.argv[1])\n"
    "os.environ['OMP_NUM_THREADS'] = str(nt)\n"
    "import torch\n"
    "torch.set_num_threads(nt)\n"
    "torch.manual_seed(0)\n"
    "SETS = [\n"
    "  [(32,1,3,3),(32,),(64,32,3,3),(64,),(128,3136),(128,),(10,128),(10,)],\n"
    "  [(1024,784),(1024,),(256,1024),(256,)],\n"
    "  [(2048,784),(2048,),(512,2048),(512,),(512,512),(512,),(10,512),(10,)],\n"
    "]\n"
    "state = {}\n"
    "def get(k, fe):\n"
    "    if (k, fe) not in state:\n"
    "        ps = [(torch.randn(*s) * 0.05).requires_grad_() for s in SETS[k]]\n"
    "        for p in ps: p.grad = torch.randn_like(p)\n"
    "        state[(k, fe)] = torch.optim.Adam(ps, foreach=bool(fe))\n"
    "    return state[(k, fe)]\n"
    "for line in sys.stdin:\n"
    "    k, fe, steps = map(int, line.split())\n"
    "    opt = get(k, fe)\n"
    "    t0 = time.perf_counter()\n"
    "    for _ in range(steps): opt.step()\n"
    "    print((time.perf_counter() - t0) * 1e3 / steps, flush=True)\n";

typedef struct torch_proc {
    FILE *to, *from;
    pid_t pid;
} torch_proc;

static bool torch_start(torch_proc *p, int threads) {
    int in[2], out[2];
    if (pipe(in) < 0 || pipe(out) < 0) return false;
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        char nt[16];
        snprintf(nt, sizeof nt, "%d", threads);
        execl("/usr/bin/python3", "python3", "-c", torch_script, nt, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    p->pid = pid;
    p->to = fdopen(in[1], "w");
    p->from = fdopen(out[0], "r");
    return p->to && p->from;
}

static double torch_run(torch_proc *p, int set, int foreach, int steps) {
    fprintf(p->to, "%d %d %d\n", set, foreach, steps);
    fflush(p->to);
    double ms = -1;
    if (fscanf(p->from, "%lf", &ms) != 1) return -1;
    return ms;
}

int main(int argc, char **argv) {
    int repeats = 7, steps = 10, threads = 1;
    bool use_torch = true, json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-torch")) use_torch = false;
        else if (!strcmp(argv[i], "--json")) json = true;
        else {
            fprintf(stderr, "usage: bench_optim [--threads N] [--repeats N] [--steps N] "
                            "[--no-torch] [--json]\n");
            return 2;
        }
    }
    if (repeats < 1) repeats = 1;
    if (steps < 1) steps = 1;
    if (threads < 1) threads = 1;
    cn_set_num_threads(threads);
    cn_manual_seed(0);
    cset sets[NSETS];
    for (int k = 0; k < NSETS; k++) cset_init(&sets[k], k);

    torch_proc tp = {0};
    if (use_torch && !torch_start(&tp, threads)) {
        fprintf(stderr, "bench_optim: cannot start /usr/bin/python3; use --no-torch\n");
        return 1;
    }
    double *c[NSETS], *t[NSETS][2];
    for (int k = 0; k < NSETS; k++) {
        c[k] = calloc((size_t)repeats, sizeof(double));
        t[k][0] = calloc((size_t)repeats, sizeof(double));
        t[k][1] = calloc((size_t)repeats, sizeof(double));
    }
    /* Warm-up: first-touch of the state, torch's lazy state. */
    for (int k = 0; k < NSETS; k++) {
        chutney_run(&sets[k], 2);
        for (int fe = 0; fe < 2 && use_torch; fe++)
            if (torch_run(&tp, k, fe, 2) < 0) {
                fprintf(stderr, "bench_optim: the PyTorch side failed (is python3-torch "
                                "installed?)\n");
                return 1;
            }
    }
    for (int r = 0; r < repeats; r++)
        for (int k = 0; k < NSETS; k++) {
            c[k][r] = chutney_run(&sets[k], steps);
            for (int fe = 0; fe < 2 && use_torch; fe++) t[k][fe][r] = torch_run(&tp, k, fe, steps);
        }
    if (use_torch) {
        fclose(tp.to);
        fclose(tp.from);
        waitpid(tp.pid, NULL, 0);
    }
    double cm[NSETS], tm[NSETS][2];
    for (int k = 0; k < NSETS; k++) {
        cm[k] = bench_median(c[k], repeats);
        for (int fe = 0; fe < 2; fe++) tm[k][fe] = use_torch ? bench_median(t[k][fe], repeats) : 0;
    }
    if (json) {
        printf("{\"bench\":\"optim\",\"optimizer\":\"adam\",\"threads\":%d,\"repeats\":%d,"
               "\"steps\":%d,\"sets\":[",
               threads, repeats, steps);
        for (int k = 0; k < NSETS; k++)
            printf("%s{\"params\":%lld,\"chutney_ms\":%.4f,\"torch_ms\":%.4f,"
                   "\"torch_foreach_ms\":%.4f}",
                   k ? "," : "", (long long)sets[k].numel, cm[k], tm[k][0], tm[k][1]);
        printf("]}\n");
    } else {
        printf("Adam step, f32, %d thread%s, ms per step (median of %d runs of %d steps)\n",
               threads, threads == 1 ? "" : "s", repeats, steps);
        printf("%10s %10s %10s %14s %10s %10s\n", "params", "chutney", "torch", "torch foreach",
               "ratio", "ratio fe");
        for (int k = 0; k < NSETS; k++) {
            if (use_torch)
                printf("%10lld %10.3f %10.3f %14.3f %10.2f %10.2f\n", (long long)sets[k].numel,
                       cm[k], tm[k][0], tm[k][1], tm[k][0] / cm[k], tm[k][1] / cm[k]);
            else
                printf("%10lld %10.3f %10s %14s %10s %10s\n", (long long)sets[k].numel, cm[k], "-",
                       "-", "-", "-");
        }
    }
    for (int k = 0; k < NSETS; k++) {
        cn_optimizer_free(sets[k].opt);
        free(c[k]);
        free(t[k][0]);
        free(t[k][1]);
    }
    return 0;
}
