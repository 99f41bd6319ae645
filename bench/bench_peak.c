/* The core's peak for the instructions a product kernel is built from:
 * f32 FMA on 256- and 512-bit vectors, the bf16 dot product (vdpbf16ps,
 * AVX-512 BF16), the int16 pair dot products (vpmaddwd + vpaddd, and
 * AVX-512 VNNI's vpdpwssd) and VNNI's u8 x s8 quads (vpdpbusd), each as 12 independent accumulator chains so
 * that latency does not limit them: what bf16 or int8 can gain over f32
 * on this CPU before any kernel is written. x86-64 with GCC or clang only;
 * rows the CPU cannot run are skipped. One thread; best of the repeats.
 *
 *   bench_peak [--repeats N]
 *
 * Figures are GFLOP/s (GOP/s for the integer rows), two operations per
 * multiply-add: vfmadd231ps zmm 32, ymm 16; vdpbf16ps zmm 64; vpdpwssd zmm
 * 64; vpmaddwd + vpaddd zmm 64 per pair; vpdpbusd zmm 128. */
#define _DEFAULT_SOURCE
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)

#define R12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define FMA512(i) "vfmadd231ps %%zmm30, %%zmm31, %%zmm" #i "\n\t"
#define FMA256(i) "vfmadd231ps %%ymm14, %%ymm15, %%ymm" #i "\n\t"
#define DPBF16(i) "vdpbf16ps %%zmm30, %%zmm31, %%zmm" #i "\n\t"
#define DPWSSD(i) "vpdpwssd %%zmm30, %%zmm31, %%zmm" #i "\n\t"
#define DPBUSD(i) "vpdpbusd %%zmm30, %%zmm31, %%zmm" #i "\n\t"
/* The AVX2-era pair: vpmaddwd into a scratch register, then the add. */
#define MADDWD(i) "vpmaddwd %%zmm30, %%zmm31, %%zmm1" #i "\n\tvpaddd %%zmm1" #i ", %%zmm" #i ", %%zmm" #i "\n\t"
#define R10(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9)

enum { P_FMA256, P_FMA512, P_DPBF16, P_MADDWD, P_DPWSSD, P_DPBUSD, NROWS };
static const char *names[NROWS] = {"f32 FMA, ymm (vfmadd231ps)", "f32 FMA, zmm (vfmadd231ps)",
                                   "bf16 dot, zmm (vdpbf16ps)", "int16 pairs, zmm (vpmaddwd+vpaddd)",
                                   "int16 pairs, zmm (vpdpwssd, VNNI)",
                                   "u8 x s8 quads, zmm (vpdpbusd, VNNI)"};
/* Operations per loop iteration (the vpmaddwd row has 10 chains: it needs
 * a scratch register per chain). */
static const double ops_per_iter[NROWS] = {12 * 16, 12 * 32, 12 * 64, 10 * 64, 12 * 64, 12 * 128};

/* Each loop is one asm statement, zeroed inputs included, so that no
 * compiler-generated code runs between them (zeros: the values do not
 * change these instructions' speed, and denormal garbage could). */
#define ZERO_ZMM "vpxord %%zmm30, %%zmm30, %%zmm30\n\tvpxord %%zmm31, %%zmm31, %%zmm31\n\t"
#define CLOBBER_ZMM "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
                    "xmm9", "xmm10", "xmm11", "xmm30", "xmm31", "cc"
/* vzeroupper after: the rows between leave no dirty upper state behind. */
#define LOOP(BODY) "1:\n\t" BODY "dec %0\n\tjnz 1b\n\tvzeroupper"

__attribute__((target("avx2,fma"))) static void run_fma256(long n) {
    __asm__ volatile("vxorps %%ymm14, %%ymm14, %%ymm14\n\tvxorps %%ymm15, %%ymm15, %%ymm15\n\t"
                     LOOP(R12(FMA256))
                     : "+r"(n)::"xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                       "xmm8", "xmm9", "xmm10", "xmm11", "xmm14", "xmm15", "cc");
}
__attribute__((target("avx512f"))) static void run_fma512(long n) {
    __asm__ volatile(ZERO_ZMM LOOP(R12(FMA512)) : "+r"(n)::CLOBBER_ZMM);
}
__attribute__((target("avx512f,avx512bf16"))) static void run_dpbf16(long n) {
    __asm__ volatile(ZERO_ZMM LOOP(R12(DPBF16)) : "+r"(n)::CLOBBER_ZMM);
}
__attribute__((target("avx512f,avx512bw"))) static void run_maddwd(long n) {
    __asm__ volatile(ZERO_ZMM LOOP(R10(MADDWD))
                     : "+r"(n)::CLOBBER_ZMM, "xmm12", "xmm13", "xmm14", "xmm15", "xmm16",
                       "xmm17", "xmm18", "xmm19");
}
__attribute__((target("avx512f,avx512vnni"))) static void run_dpwssd(long n) {
    __asm__ volatile(ZERO_ZMM LOOP(R12(DPWSSD)) : "+r"(n)::CLOBBER_ZMM);
}
__attribute__((target("avx512f,avx512vnni"))) static void run_dpbusd(long n) {
    __asm__ volatile(ZERO_ZMM LOOP(R12(DPBUSD)) : "+r"(n)::CLOBBER_ZMM);
}

static bool can_run(int row) {
    __builtin_cpu_init();
    switch (row) {
    case P_FMA256: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case P_FMA512: return __builtin_cpu_supports("avx512f");
    case P_DPBF16: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
    case P_MADDWD: return __builtin_cpu_supports("avx512bw");
    default: /* the two VNNI rows */
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
    }
}

int main(int argc, char **argv) {
    int repeats = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--repeats N]\n", argv[0]);
            return 2;
        }
    }
    if (repeats < 1) repeats = 1;
    void (*run[NROWS])(long) = {run_fma256, run_fma512, run_dpbf16,
                                run_maddwd, run_dpwssd, run_dpbusd};
    double best[NROWS] = {0};
    const long iters = 20000000; /* about 0.1 s a row */
    for (int r = 0; r < repeats; r++) /* the rows in turn, so drift falls on all */
        for (int row = 0; row < NROWS; row++) {
            if (!can_run(row)) continue;
            double t0 = bench_now_s();
            run[row](iters);
            double g = ops_per_iter[row] * (double)iters / (bench_now_s() - t0) * 1e-9;
            if (g > best[row]) best[row] = g;
        }
    printf("peak of one core, best of %d, 12 independent chains each\n", repeats);
    for (int row = 0; row < NROWS; row++) {
        if (!best[row]) {
            printf("%-38s %10s\n", names[row], "(not on this CPU)");
            continue;
        }
        printf("%-38s %10.1f", names[row], best[row]);
        if (row != P_FMA512 && best[P_FMA512] > 0)
            printf("   %.2fx f32 zmm", best[row] / best[P_FMA512]);
        printf("\n");
    }
    return 0;
}

#else

int main(void) {
    printf("bench_peak: x86-64 with GCC or clang only\n");
    return 0;
}

#endif
