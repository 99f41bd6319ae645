/* Hot loops compiled for several instruction sets, one picked at run time.
 *
 *     CN_HOT_FN(name, (params), (args)) { body }
 *
 * defines a static void function `name(params)` whose body is compiled once
 * for the build's target ("default") and, on x86-64 with GCC or clang, once
 * more for AVX2+FMA and once for AVX-512 (F, BW, CD, DQ, VL): the body is an
 * always_inline function inlined into one wrapper per target, and `name`
 * calls the wrapper of the active level (cn_isa()). `args` names the
 * parameters in order. Helpers the body calls should be static inline (or
 * always_inline, like vmath.h), so they are compiled for each target too.
 *
 * The level is the best one the CPU has, lowered by CN_ISA=default|avx2|
 * avx512 in the environment or by cn_isa_set (tests/test_isa.c runs every
 * level). A dispatcher of our own rather than GCC's target_clones (ifunc):
 * the level can be forced, and sanitizer and clang builds run the same
 * variants. Its cost, a load and two compares per call, did not show in
 * the kernels' times (docs/benchmarks.md).
 *
 * Every level gives the same bits: the build turns floating-point
 * contraction off (-ffp-contract=off), so FMA is used only where a file
 * asks for it. gemm.c, conv.c and conv_depthwise.c turn contraction on,
 * so their results differ in the last bits between the default level and
 * the others. vmath.h's exp core calls __builtin_fmaf, one rounding at
 * every level (libm's fmaf at the x86 default level), so its results do
 * not differ. Only levels above the build's own target are compiled: with
 * -march=native (CHUTNEY_NATIVE) on an AVX-512 machine there is one. */
#ifndef CN_CORE_ISA_H
#define CN_CORE_ISA_H

#include <stdatomic.h>
#include <stdbool.h>

enum { CN_ISA_DEFAULT, CN_ISA_AVX2, CN_ISA_AVX512, CN_ISA_LEVELS };

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(CN_NO_ISA_VARIANTS)
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__BMI2__)
#define CN_ISA_HAVE_AVX2 1
#endif
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512DQ__) ||                \
    !defined(__AVX512VL__) || !defined(__AVX512CD__)
#define CN_ISA_HAVE_AVX512 1
#endif
#endif

/* The active level; -1 until the first cn_isa(). */
extern _Atomic int cn_isa_level_;
int cn_isa_init_(void);

static inline int cn_isa(void) {
    int l = atomic_load_explicit(&cn_isa_level_, memory_order_relaxed);
    return l >= 0 ? l : cn_isa_init_();
}

/* Whether this build has the level's variant and this CPU can run it
 * (CN_ISA_DEFAULT always). */
bool cn_isa_available(int level);
/* The best available level. */
int cn_isa_max(void);
/* Make `level` active (for every thread, from the next kernel call on);
 * CN_OK, or CN_EUNSUPPORTED after cn_fail when it is not available. */
int cn_isa_set(int level);
/* "default", "avx2", "avx512"; NULL for anything else. */
const char *cn_isa_name(int level);

/* Low-precision products in hardware, read from CPUID (not levels: no
 * variant of the hot loops is compiled for them as a whole; oneDNN brings
 * its own kernels): avx512_bf16 (with AVX-512 usable) or amx_bf16 for
 * bf16; avx512_fp16 or amx_fp16 for f16; for int8, avx512_vnni (with
 * AVX-512 usable: the int8 GEMM's vpdpwssd kernel, cn_isa_vnni), avx_vnni
 * (its VEX form on ymm, with AVX2 usable) and amx_int8. False off x86-64. */
typedef struct cn_cpu_lowp {
    bool avx512_bf16, amx_bf16, avx512_fp16, amx_fp16;
    bool avx512_vnni, avx_vnni, amx_int8;
} cn_cpu_lowp;
cn_cpu_lowp cn_cpu_lowp_features(void);

/* Whether kernels may use AVX512_VNNI now: the active level is avx512
 * and the CPU has avx512_vnni. Not a level of its own: forcing avx2 or
 * default (CN_ISA, cn_isa_set) turns it off, so the int8 GEMM's VNNI
 * kernel and its AVX2 one are both tested on a CPU with VNNI. */
bool cn_isa_vnni(void);

#if defined(__GNUC__)
#define CN_ISA_INLINE_ static inline __attribute__((always_inline))
#else
#define CN_ISA_INLINE_ static inline
#endif

/* One variant: its definition (a wrapper compiled for TARGET around the
 * inlined body) and its branch of the dispatcher. */
#define CN_ISA_DEF_(NAME, SFX, TARGET, PARAMS, ARGS)                                              \
    __attribute__((target(TARGET))) static void NAME##SFX PARAMS { NAME##_body_ ARGS; }
#define CN_ISA_CALL_(NAME, SFX, LEVEL, ARGS)                                                      \
    if (l_ == (LEVEL)) {                                                                           \
        NAME##SFX ARGS;                                                                            \
        return;                                                                                    \
    }

#ifdef CN_ISA_HAVE_AVX2
#define CN_ISA_AVX2_DEF_(NAME, PARAMS, ARGS)                                                       \
    CN_ISA_DEF_(NAME, _avx2_, "avx2,fma,bmi,bmi2", PARAMS, ARGS)
#define CN_ISA_AVX2_CALL_(NAME, ARGS) CN_ISA_CALL_(NAME, _avx2_, CN_ISA_AVX2, ARGS)
#else
#define CN_ISA_AVX2_DEF_(NAME, PARAMS, ARGS)
#define CN_ISA_AVX2_CALL_(NAME, ARGS)
#endif

#ifdef CN_ISA_HAVE_AVX512
#define CN_ISA_AVX512_DEF_(NAME, PARAMS, ARGS)                                                     \
    CN_ISA_DEF_(NAME, _avx512_, "avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx2,fma,bmi,bmi2",  \
                PARAMS, ARGS)
#define CN_ISA_AVX512_CALL_(NAME, ARGS) CN_ISA_CALL_(NAME, _avx512_, CN_ISA_AVX512, ARGS)
#else
#define CN_ISA_AVX512_DEF_(NAME, PARAMS, ARGS)
#define CN_ISA_AVX512_CALL_(NAME, ARGS)
#endif

#define CN_HOT_FN(NAME, PARAMS, ARGS)                                                              \
    CN_ISA_INLINE_ void NAME##_body_ PARAMS;                                                       \
    CN_ISA_AVX2_DEF_(NAME, PARAMS, ARGS)                                                           \
    CN_ISA_AVX512_DEF_(NAME, PARAMS, ARGS)                                                         \
    static void NAME PARAMS {                                                                      \
        const int l_ = cn_isa();                                                                   \
        (void)l_;                                                                                  \
        CN_ISA_AVX512_CALL_(NAME, ARGS)                                                            \
        CN_ISA_AVX2_CALL_(NAME, ARGS)                                                              \
        NAME##_body_ ARGS;                                                                         \
    }                                                                                              \
    CN_ISA_INLINE_ void NAME##_body_ PARAMS

#endif
