/* The fused scaled_dot_product_attention against the same maths composed of
 * ops, softmax(q k^T scale) v (what a model without the fused op runs):
 * median time of the forward pass and of forward + backward (the gradients
 * of q, k and v), and the peak CPU memory in tensors above the inputs. f32,
 * batch 1, 8 heads, E = Ev = 64. Each configuration runs in a child process,
 * so the allocator's peak is its own. Not part of make check.
 *
 *   bench_attention [--T N]... [--heads H] [--repeats R] [--causal]
 *                   [--only fused|composed]
 *   (default: --T 256 --T 1024 --T 4096, both kinds) */
#include "chutney.h"

#include "bench_util.h"

#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#define E 64

static cn_tensor *composed(cn_tensor *q, cn_tensor *k, cn_tensor *v, bool causal, int64_t T) {
    cn_tensor *s = cn_mul_scalar(cn_matmul(q, cn_mT(k)), 1 / sqrt((double)E));
    if (causal) s = cn_where(cn_causal_mask(T), s, cn_scalar(CN_F32, -INFINITY));
    return cn_matmul(cn_softmax(s, -1), v);
}

static cn_tensor *apply(bool fused, cn_tensor *q, cn_tensor *k, cn_tensor *v, bool causal,
                        int64_t T) {
    return fused ? cn_scaled_dot_product_attention(q, k, v, NULL, 0, causal, 0)
                 : composed(q, k, v, causal, T);
}

/* One configuration: prints its line. */
static int run(bool fused, int64_t T, int heads, int repeats, bool causal) {
    cn_manual_seed(1);
    cn_tensor *x[3];
    for (int i = 0; i < 3; i++) {
        x[i] = cn_randn(CN_F32, CN_SHAPE(1, heads, T, E));
        cn_set_requires_grad(x[i], true);
    }
    cn_memory_stats before, after;
    cn_device_memory_stats(CN_CPU, &before);
    double *tf = malloc(sizeof(double) * (size_t)repeats),
           *tb = malloc(sizeof(double) * (size_t)repeats);
    for (int r = 0; r < repeats; r++) {
        cn_scope_begin();
        double t0 = bench_now_s();
        cn_tensor *y = apply(fused, x[0], x[1], x[2], causal, T);
        double t1 = bench_now_s();
        cn_tensor *loss = cn_sum(y, NULL, 0, false), *g[3];
        if (!y || cn_grad(&loss, NULL, 1, x, 3, g, 0) < 0) {
            fprintf(stderr, "bench_attention: %s\n", cn_last_error());
            return 1;
        }
        double t2 = bench_now_s();
        cn_scope_end();
        tf[r] = t1 - t0;
        tb[r] = t2 - t0;
    }
    cn_device_memory_stats(CN_CPU, &after);
    double peak = (double)(after.peak_allocated_bytes - before.allocated_bytes) / (1 << 20);
    printf("| %5lld | %-8s | %9.2f | %13.2f | %8.1f |\n", (long long)T,
           fused ? "fused" : "composed", bench_median(tf, repeats) * 1e3,
           bench_median(tb, repeats) * 1e3, peak);
    fflush(stdout);
    free(tf);
    free(tb);
    return 0;
}

int main(int argc, char **argv) {
    int64_t Ts[16];
    int nT = 0, heads = 8, repeats = 0;
    bool causal = false;
    int only = -1; /* 1 fused, 0 composed */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--T") && i + 1 < argc && nT < 16)
            Ts[nT++] = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--heads") && i + 1 < argc)
            heads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc)
            repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--causal"))
            causal = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = !strcmp(argv[++i], "fused");
        else {
            fprintf(stderr,
                    "usage: %s [--T N]... [--heads H] [--repeats R] [--causal] "
                    "[--only fused|composed]\n",
                    argv[0]);
            return 2;
        }
    }
    if (nT == 0) Ts[nT++] = 256, Ts[nT++] = 1024, Ts[nT++] = 4096;
    printf("f32, batch 1, %d heads, E = %d%s, %d threads\n\n", heads, E, causal ? ", causal" : "",
           cn_get_num_threads());
    printf("|     T | kind     | fwd (ms)  | fwd+bwd (ms)  | peak MiB |\n");
    printf("|------:|----------|----------:|--------------:|---------:|\n");
    fflush(stdout);
    for (int t = 0; t < nT; t++) {
        int reps = repeats > 0 ? repeats : Ts[t] >= 4096 ? 3 : Ts[t] >= 1024 ? 5 : 20;
        for (int fused = 1; fused >= 0; fused--) {
            if (only >= 0 && fused != only) continue;
            pid_t pid = fork();
            if (pid < 0) return 1;
            if (pid == 0) _exit(run(fused, Ts[t], heads, reps, causal));
            int st = 0;
            waitpid(pid, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
        }
    }
    return 0;
}
