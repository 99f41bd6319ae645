/* Eager per-op overhead: 10,000 tiny elementwise ops (add and mul in turn on
 * 64-element f32 tensors), without recording, and with recording plus one
 * backward through the whole chain; the same loop in PyTorch
 * (/usr/bin/python3, Debian's torch, unless --python names another
 * interpreter, such as build/bench-venv/bin/python with PyTorch 2) in the
 * same run, interleaved, T threads each (default 1; tensors this small run on
 * one anyway). Prints microseconds per op (medians of the repeats), the ratio
 * Chutney / PyTorch, and the peak RSS of each process.
 *
 *   bench_overhead [--repeats N] [--threads T] [--no-torch] [--python PATH] [--scope]
 *                  [--profile] [--cpu-time] [--json]
 *
 * --cpu-time times Chutney's loops by the process's CPU time (bench_cpu_s),
 * which a busy shared machine disturbs less; PyTorch's side keeps the wall
 * clock, so compare it with --no-torch.
 * --profile runs Chutney's loops with the profiler recording every op (the
 * cost of profiling, docs/profiling.md).
 */
#define _DEFAULT_SOURCE /* wait4, setenv */
#include <chutney.h>

#include "bench_util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOPS 10000
#define NUMEL 64

/* Whether the loop keeps every intermediate alive until the run ends (a
 * scope around it, --scope) or releases each as the next replaces it, as
 * the Python loop's `x = x + a` does (the default: the same lifetimes in
 * both frameworks). With recording, the graph keeps what backward needs
 * either way. */
static bool use_scope = false;
static bool profile = false;
static bool use_cpu_time = false;

static double now_s(void) { return use_cpu_time ? bench_cpu_s() : bench_now_s(); }

static void die_if_null(const cn_tensor *t) {
    if (!t) {
        fprintf(stderr, "bench_overhead: %s\n", cn_last_error());
        exit(1);
    }
}

/* x op y, releasing x unless it is the caller's x0 (scope runs release
 * nothing: the scope owns every result). */
static cn_tensor *step(cn_tensor *(*op)(cn_tensor *, cn_tensor *), cn_tensor *x,
                       cn_tensor *y, const cn_tensor *x0) {
    cn_tensor *r = op(x, y);
    if (!use_scope && x != x0) cn_release(x);
    return r;
}

/* One run; returns microseconds per op. */
static double chutney_run(bool grad, cn_tensor *x0, cn_tensor *a, cn_tensor *b) {
    if (use_scope) cn_scope_begin();
    if (profile) cn_profiler_start(NULL);
    double t0 = now_s();
    cn_tensor *x = x0;
    bool prev = cn_set_grad_enabled(grad);
    for (int i = 0; i < NOPS / 2; i++) {
        x = step(cn_add, x, a, x0);
        die_if_null(x);
        x = step(cn_mul, x, b, x0);
        die_if_null(x);
    }
    if (grad) {
        cn_tensor *loss = cn_sum(x, NULL, 0, false);
        if (!loss || cn_backward(loss, NULL) < 0) {
            fprintf(stderr, "bench_overhead: %s\n", cn_last_error());
            exit(1);
        }
        if (!use_scope) cn_release(loss);
    }
    cn_set_grad_enabled(prev);
    double t = now_s() - t0;
    if (profile) cn_profiler_stop();
    if (use_scope) cn_scope_end();
    else cn_release(x);
    cn_zero_grad(a);
    cn_zero_grad(b);
    cn_zero_grad(x0);
    return t * 1e6 / NOPS;
}

/* The same loop in PyTorch: a child process that times one run per line of
 * input ("0" or "1" = with grad) and answers microseconds per op, so the two
 * frameworks' runs interleave. */
static const char *torch_script =
    "import os, sys, time\n"
    "n = int(os.environ.get('CN_BENCH_THREADS', '1'))\n"
    "os.environ['OMP_NUM_THREADS'] = str(n)\n"
    "os.environ['OPENBLAS_NUM_THREADS'] = '1'\n"
    "os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')\n"
    "import torch\n"
    "torch.set_num_threads(n)\n"
    "x0 = torch.rand(64, requires_grad=True)\n"
    "a = torch.rand(64, requires_grad=True)\n"
    "b = (0.5 + torch.rand(64) * 0.5).requires_grad_()\n"
    "def run(grad):\n"
    "    t0 = time.perf_counter()\n"
    "    with torch.set_grad_enabled(grad):\n"
    "        x = x0\n"
    "        for i in range(5000):\n"
    "            x = x + a\n"
    "            x = x * b\n"
    "        if grad:\n"
    "            x.sum().backward()\n"
    "    t = time.perf_counter() - t0\n"
    "    x0.grad = a.grad = b.grad = None\n"
    "    return t * 1e6 / 10000\n"
    "for line in sys.stdin:\n"
    "    print(run(line.strip() == '1'), flush=True)\n";

typedef struct torch_proc {
    FILE *to, *from;
    pid_t pid;
} torch_proc;

static bool torch_start(torch_proc *p, const char *python, int threads) {
    int in[2], out[2];
    if (pipe(in) < 0 || pipe(out) < 0) return false;
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        char t[16];
        snprintf(t, sizeof t, "%d", threads);
        setenv("CN_BENCH_THREADS", t, 1);
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execl(python, python, "-c", torch_script, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    /* A child that could not start (a --python without torch) closes the
     * pipe: the write then fails and we say so, instead of dying of SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    p->pid = pid;
    p->to = fdopen(in[1], "w");
    p->from = fdopen(out[0], "r");
    return p->to && p->from;
}

static double torch_run(torch_proc *p, bool grad) {
    fprintf(p->to, "%d\n", grad ? 1 : 0);
    fflush(p->to);
    double us = -1;
    if (fscanf(p->from, "%lf", &us) != 1) return -1;
    return us;
}

/* The python child's own peak, from wait4: one process per figure. */
static double torch_finish(torch_proc *p) {
    fclose(p->to);
    fclose(p->from);
    struct rusage ru;
    int status;
    if (wait4(p->pid, &status, 0, &ru) < 0) return 0;
    return (double)ru.ru_maxrss / 1024.0;
}

int main(int argc, char **argv) {
    int repeats = 9, threads = 1;
    bool use_torch = true, json = false;
    const char *python = "/usr/bin/python3";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-torch")) use_torch = false;
        else if (!strcmp(argv[i], "--python") && i + 1 < argc) python = argv[++i];
        else if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--scope")) use_scope = true;
        else if (!strcmp(argv[i], "--profile")) profile = true;
        else if (!strcmp(argv[i], "--cpu-time")) use_cpu_time = true;
        else {
            fprintf(stderr,
                    "usage: bench_overhead [--repeats N] [--threads T] [--no-torch] [--python PATH] "
                    "[--scope] [--profile] [--cpu-time] [--json]\n");
            return 2;
        }
    }
    if (repeats < 1) repeats = 1;
    if (threads < 1) {
        fprintf(stderr, "bench_overhead: --threads needs a positive count\n");
        return 2;
    }
    cn_set_num_threads(threads);
    cn_manual_seed(1);
    cn_tensor *x0 = cn_rand(CN_F32, CN_SHAPE(NUMEL));
    cn_tensor *a = cn_rand(CN_F32, CN_SHAPE(NUMEL));
    cn_tensor *b = cn_add_scalar(cn_mul_scalar(cn_rand(CN_F32, CN_SHAPE(NUMEL)), 0.5), 0.5);
    b = cn_detach(b);
    cn_set_requires_grad(x0, true);
    cn_set_requires_grad(a, true);
    cn_set_requires_grad(b, true);

    torch_proc tp = {0};
    if (use_torch && !torch_start(&tp, python, threads)) {
        fprintf(stderr, "bench_overhead: cannot start %s; use --no-torch\n", python);
        return 1;
    }
    double *c[2], *t[2];
    for (int g = 0; g < 2; g++) {
        c[g] = calloc((size_t)repeats, sizeof(double));
        t[g] = calloc((size_t)repeats, sizeof(double));
    }
    /* warm-up */
    for (int g = 0; g < 2; g++) {
        chutney_run(g, x0, a, b);
        if (use_torch && torch_run(&tp, g) < 0) {
            fprintf(stderr,
                    "bench_overhead: the PyTorch side failed (does %s import torch? Debian's "
                    "python3-torch for /usr/bin/python3)\n",
                    python);
            return 1;
        }
    }
    for (int r = 0; r < repeats; r++)
        for (int g = 0; g < 2; g++) {
            c[g][r] = chutney_run(g, x0, a, b);
            if (use_torch) t[g][r] = torch_run(&tp, g);
        }
    double torch_rss = use_torch ? torch_finish(&tp) : 0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double own_rss = (double)ru.ru_maxrss / 1024.0;
    const char *label[2] = {"no recording", "recording + backward"};
    double cm[2], tm[2];
    for (int g = 0; g < 2; g++) {
        cm[g] = bench_median(c[g], repeats);
        tm[g] = use_torch ? bench_median(t[g], repeats) : 0;
    }
    if (json) {
        printf("{\"bench\":\"overhead\",\"ops\":%d,\"numel\":%d,\"repeats\":%d,\"threads\":%d,"
               "\"chutney_us_per_op\":[%.4f,%.4f],\"torch_us_per_op\":[%.4f,%.4f],"
               "\"chutney_peak_rss_mb\":%.1f,\"torch_peak_rss_mb\":%.1f,\"python\":\"%s\"}\n",
               NOPS, NUMEL, repeats, threads, cm[0], cm[1], tm[0], tm[1], own_rss, torch_rss,
               python);
    } else {
        printf("eager overhead: %d ops on %d-element f32 tensors, %d thread%s, median of %d\n", NOPS,
               NUMEL, threads, threads == 1 ? "" : "s", repeats);
        printf("%-22s %12s %12s %8s\n", "", "chutney us", "torch us", "ratio");
        for (int g = 0; g < 2; g++) {
            if (use_torch)
                printf("%-22s %12.3f %12.3f %8.3f\n", label[g], cm[g], tm[g], cm[g] / tm[g]);
            else
                printf("%-22s %12.3f %12s %8s\n", label[g], cm[g], "-", "-");
        }
        printf("%-22s %12.1f %12.1f\n", "peak RSS, MB", own_rss, torch_rss);
    }
    for (int g = 0; g < 2; g++) {
        free(c[g]);
        free(t[g]);
    }
    return 0;
}
