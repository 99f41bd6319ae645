/* The register machine of the fused elementwise kernel (fused_regs.h): one
 * loop per instruction set and dtype (fused_regs_variant.h and
 * fused_regs_loop.h). The vector width is chosen per variant, not left to
 * GCC's lowering of wide generic vectors: a 512-bit vector type compiled
 * for AVX2 went through the stack and ran 30x slower. */
#include "fused_regs.h"

#include "../../core/isa.h"

#include <stdint.h>

#if !defined(__GNUC__)
#error "the fused kernel's register machine needs GCC's vector extensions (GCC or clang)"
#endif

#define FR_CAT_(a, b) a##b
#define FR_CAT(a, b) FR_CAT_(a, b)
#if defined(__clang__)
#define FR_EACH(j) _Pragma("unroll") for (int j = 0; j < FR_NV; j++)
#else
#define FR_EACH(j) _Pragma("GCC unroll 16") for (int j = 0; j < FR_NV; j++)
#endif

/* The build's own target: the widest vectors it has. */
#if defined(__AVX512F__)
#define FR_DEFAULT_VB 64
#elif defined(__AVX2__) || defined(__AVX__)
#define FR_DEFAULT_VB 32
#else
#define FR_DEFAULT_VB 16
#endif

#define FR_SFX _default
#define FR_ATTR
#define FR_VB FR_DEFAULT_VB
#define FR_NV 8
#include "fused_regs_variant.h"

#ifdef CN_ISA_HAVE_AVX2
#define FR_SFX _avx2
#define FR_ATTR __attribute__((target("avx2,fma,bmi,bmi2")))
#define FR_VB 32
#define FR_NV 8
#include "fused_regs_variant.h"
#endif

#ifdef CN_ISA_HAVE_AVX512
#define FR_SFX _avx512
#define FR_ATTR                                                                                    \
    __attribute__((target("avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx2,fma,bmi,bmi2")))
#define FR_VB 64
#define FR_NV 8
#include "fused_regs_variant.h"
#endif

typedef void (*fr_loop)(const cn_fr_code *, int, char **, const int16_t *, int, int64_t, int64_t,
                        char *);

/* [level][0 f32, 1 f64]; a level this build does not have is left NULL. */
static const fr_loop fr_loops[CN_ISA_LEVELS][2] = {
    [CN_ISA_DEFAULT] = {fr_run_f32_default, fr_run_f64_default},
#ifdef CN_ISA_HAVE_AVX2
    [CN_ISA_AVX2] = {fr_run_f32_avx2, fr_run_f64_avx2},
#endif
#ifdef CN_ISA_HAVE_AVX512
    [CN_ISA_AVX512] = {fr_run_f32_avx512, fr_run_f64_avx512},
#endif
};

void cn_fr_run(cn_dtype dt, const cn_fr_code *code, int ncode, char **ptr, const int16_t *adv,
               int nadv, int64_t ngroups, int64_t last_n, char *out) {
    const int d = dt == CN_F32 ? 0 : 1;
    fr_loop f = fr_loops[cn_isa()][d];
    (f ? f : fr_loops[CN_ISA_DEFAULT][d])(code, ncode, ptr, adv, nadv, ngroups, last_n, out);
}
