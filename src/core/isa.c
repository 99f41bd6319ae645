/* Which compiled variant of the hot loops runs (isa.h). */
#include "core.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Atomic int cn_isa_level_ = -1;

static const char *const isa_names[CN_ISA_LEVELS] = {"default", "avx2", "avx512"};

const char *cn_isa_name(int level) {
    return level >= 0 && level < CN_ISA_LEVELS ? isa_names[level] : NULL;
}

/* What the CPU (and the OS, which must save the wider registers) supports;
 * the same feature sets the variants are compiled for. */
static bool cpu_has(int level) {
    if (level == CN_ISA_DEFAULT) return true;
#if defined(CN_ISA_HAVE_AVX2) || defined(CN_ISA_HAVE_AVX512)
    __builtin_cpu_init();
    bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
              __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
    if (level == CN_ISA_AVX2) return v3;
    if (level == CN_ISA_AVX512)
        return v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
#endif
    return false;
}

static bool compiled(int level) {
    switch (level) {
    case CN_ISA_DEFAULT: return true;
#ifdef CN_ISA_HAVE_AVX2
    case CN_ISA_AVX2: return true;
#endif
#ifdef CN_ISA_HAVE_AVX512
    case CN_ISA_AVX512: return true;
#endif
    default: return false;
    }
}

bool cn_isa_available(int level) { return compiled(level) && cpu_has(level); }

int cn_isa_max(void) {
    static _Atomic int best = -1;
    int b = atomic_load_explicit(&best, memory_order_relaxed);
    if (b < 0) {
        b = CN_ISA_DEFAULT;
        for (int l = CN_ISA_LEVELS - 1; l > CN_ISA_DEFAULT; l--)
            if (cn_isa_available(l)) {
                b = l;
                break;
            }
        atomic_store_explicit(&best, b, memory_order_relaxed);
    }
    return b;
}

/* The best level, or a lower one named by CN_ISA. */
int cn_isa_init_(void) {
    int level = cn_isa_max();
    const char *env = getenv("CN_ISA");
    if (env && *env) {
        int want = -1;
        for (int l = 0; l < CN_ISA_LEVELS; l++)
            if (strcmp(env, isa_names[l]) == 0) want = l;
        if (want < 0)
            fprintf(stderr, "chutney: CN_ISA=%s is not default, avx2 or avx512; using %s\n", env,
                    isa_names[level]);
        else if (!cn_isa_available(want))
            fprintf(stderr, "chutney: CN_ISA=%s: this %s; using %s\n", env,
                    compiled(want) ? "CPU lacks it" : "build has no such variant",
                    isa_names[level]);
        else
            level = want;
    }
    int expected = -1;
    /* A concurrent first call, or cn_isa_set, may have been first. */
    if (!atomic_compare_exchange_strong(&cn_isa_level_, &expected, level)) level = expected;
    return level;
}

int cn_isa_set(int level) {
    if (level < 0 || level >= CN_ISA_LEVELS)
        return cn_failc(CN_EINVAL, "isa: level %d is not one of 0 (default), 1 (avx2), 2 (avx512)",
                        level);
    if (!cn_isa_available(level))
        return cn_failc(CN_EUNSUPPORTED, "isa: %s code is not available (%s)", isa_names[level],
                        compiled(level) ? "this CPU lacks it" : "not compiled in this build");
    atomic_store_explicit(&cn_isa_level_, level, memory_order_relaxed);
    return CN_OK;
}

cn_cpu_lowp cn_cpu_lowp_features(void) {
    cn_cpu_lowp f = {0};
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
    unsigned max_sub = a, ecx0 = c, edx0 = d;
    /* AMX's tile state is enabled by the OS per process on request
     * (arch_prctl, which oneDNN makes); the CPUID bits say the CPU has it. */
    f.amx_bf16 = (edx0 >> 22) & 1;
    f.amx_int8 = (edx0 >> 25) & 1;
    /* libgcc reports AVX and AVX-512 only when the OS saves their
     * registers. */
    __builtin_cpu_init();
    bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    f.avx512_fp16 = avx512 && ((edx0 >> 23) & 1);
    f.avx512_vnni = avx512 && ((ecx0 >> 11) & 1);
    if (max_sub >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) {
        f.avx_vnni = __builtin_cpu_supports("avx2") && ((a >> 4) & 1);
        f.avx512_bf16 = avx512 && ((a >> 5) & 1);
        f.amx_fp16 = (a >> 21) & 1;
    }
#endif
    return f;
}

bool cn_isa_vnni(void) {
    static _Atomic int has = -1;
    int h = atomic_load_explicit(&has, memory_order_relaxed);
    if (h < 0) {
        h = cn_cpu_lowp_features().avx512_vnni;
        atomic_store_explicit(&has, h, memory_order_relaxed);
    }
    return h && cn_isa() == CN_ISA_AVX512;
}
