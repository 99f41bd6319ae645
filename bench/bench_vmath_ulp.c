/* The f32 math of src/backend/cpu/vmath.h against libm in double, over a
 * sweep of bit patterns: where the error figures at the top of vmath.h and
 * in docs/benchmarks.md come from.
 *
 *   bench_vmath_ulp [--step N] [--op NAME]...
 *
 * Every N-th f32 bit pattern (default 7: about 6e8 inputs, both signs, NaN
 * and infinity included) goes through the public ops (cn_exp, cn_sigmoid,
 * ...) at every instruction-set level this build and CPU have. For each
 * function it prints the largest error in ulps of the exact value (the
 * double reference; below the normal range, in units of 2^-149) and in ulps
 * of the reference rounded to f32 (how far apart the two floats are, as
 * tests/test_isa.c counts them), where each occurs, how many results were
 * finite, how many results that round to 0, inf or NaN were not exactly
 * that, and how many results differ in bits from the default level (a NaN
 * matching any NaN). Not a timing: an accuracy sweep, about 20 s a
 * function at the default step on one Zen 3 core. */
#include <chutney.h>

#include "core/core.h"
#include "../tests/vmath_ref.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mfn {
    const char *name;
    apply_fn apply;
    ref_fn ref;
} mfn;

static const mfn fns[] = {
    {"exp", a_exp, exp},
    {"log", a_log, log},
    {"expm1", a_expm1, expm1},
    {"log1p", a_log1p, log1p},
    {"tanh", a_tanh, tanh},
    {"softplus", a_softplus, ref_softplus},
    {"sigmoid", a_sigmoid, ref_sigmoid},
    {"silu", a_silu, ref_silu},
    {"erf", a_erf, erf},
    {"gelu", a_gelu, ref_gelu},
    {"gelu_tanh", a_gelu_tanh, ref_gelu_tanh},
    {"rsqrt", a_rsqrt, ref_rsqrt},
};
#define NFNS ((int)(sizeof fns / sizeof fns[0]))
#define BLOCK 65536

typedef struct tally {
    double worst;     /* ulps of the exact value */
    float worst_x;
    int64_t worst_r;  /* ulps of the rounded reference */
    float worst_r_x;
    int64_t finite, special_bad, level_diff[CN_ISA_LEVELS];
} tally;

static void check_block(const mfn *f, const float *x, const float *y, int n, tally *t) {
    for (int i = 0; i < n; i++) {
        double r = f->ref((double)x[i]);
        float want = (float)r, got = y[i];
        if (isnan(r) || r == 0 || isinf(want)) {
            bool ok = isnan(r) ? isnan(got) : memcmp(&got, &want, sizeof got) == 0;
            t->special_bad += !ok;
            continue;
        }
        t->finite++;
        int64_t d = llabs(ref_ordered(got) - ref_ordered(want));
        if (d > t->worst_r) t->worst_r = d, t->worst_r_x = x[i];
        double ulp = fabs(r) < 0x1p-126 ? 0x1p-149 : ldexp(1.0, ilogb(r) - 23);
        double e = isnan(got) ? INFINITY : fabs((double)got - r) / ulp;
        if (e > t->worst) t->worst = e, t->worst_x = x[i];
    }
}

static void sweep(const mfn *f, uint32_t step, const int *levels, int nlevels) {
    static float x[BLOCK], y0[BLOCK];
    tally t = {0};
    uint64_t u = 0;
    while (u < ((uint64_t)1 << 32)) {
        int n = 0;
        for (; n < BLOCK && u < ((uint64_t)1 << 32); u += step) {
            uint32_t b = (uint32_t)u;
            memcpy(&x[n++], &b, sizeof b);
        }
        cn_scope_begin();
        cn_tensor *xt = cn_from_data(CN_F32, CN_SHAPE(n), x);
        const float *y = NULL;
        for (int k = 0; k < nlevels; k++) {
            cn_isa_set(levels[k]);
            y = cn_data(f->apply(xt));
            if (k == 0) memcpy(y0, y, (size_t)n * sizeof *y);
            for (int i = 0; k > 0 && i < n; i++)
                t.level_diff[k] += memcmp(&y[i], &y0[i], sizeof *y) && !(isnan(y[i]) && isnan(y0[i]));
        }
        check_block(f, x, y, n, &t); /* the last level's: the best */
        cn_scope_end();
    }
    printf("%-10s %6.3f ulp at %-16a rounded reference: %" PRId64 " ulp at %-16a %" PRId64
           " finite, %" PRId64 " special wrong",
           f->name, t.worst, (double)t.worst_x, t.worst_r, (double)t.worst_r_x, t.finite,
           t.special_bad);
    for (int k = 1; k < nlevels; k++)
        printf(", %s: %" PRId64 " differ", cn_isa_name(levels[k]), t.level_diff[k]);
    printf("\n");
    fflush(stdout);
}

static int usage(const char *argv0) {
    fprintf(stderr, "usage: %s [--step N] [--op NAME]...\n  NAME:", argv0);
    for (int i = 0; i < NFNS; i++) fprintf(stderr, " %s", fns[i].name);
    fprintf(stderr, "\n");
    return 2;
}

int main(int argc, char **argv) {
    long step = 7;
    bool pick[NFNS] = {false}, any = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--step") && i + 1 < argc) {
            char *end;
            step = strtol(argv[++i], &end, 10);
            if (*end || step < 1 || step > 0x7fffffff) {
                fprintf(stderr, "%s: --step takes a whole number from 1, not '%s'\n", argv[0],
                        argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--op") && i + 1 < argc) {
            int j = 0;
            while (j < NFNS && strcmp(fns[j].name, argv[i + 1])) j++;
            if (j == NFNS) {
                fprintf(stderr, "%s: no function '%s'\n", argv[0], argv[i + 1]);
                return usage(argv[0]);
            }
            pick[j] = any = true;
            i++;
        } else {
            return usage(argv[0]);
        }
    }
    /* the default level first: the others are compared with it */
    int levels[CN_ISA_LEVELS], nlevels = 0;
    for (int l = 0; l < CN_ISA_LEVELS; l++)
        if (cn_isa_available(l)) levels[nlevels++] = l;
    printf("every %ld-th f32 bit pattern; errors at level %s, levels compared:", step,
           cn_isa_name(levels[nlevels - 1]));
    for (int k = 0; k < nlevels; k++) printf(" %s", cn_isa_name(levels[k]));
    printf("\n");
    for (int i = 0; i < NFNS; i++) {
        if (any && !pick[i]) continue;
        sweep(&fns[i], (uint32_t)step, levels, nlevels);
    }
    return 0;
}
