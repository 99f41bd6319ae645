/* The register machine's loops for one instruction set (FR_SFX, FR_ATTR,
 * FR_VB, FR_NV: see fused_regs_loop.h), f32 and f64. */
#define FR_NAME FR_CAT(fr_run_f32, FR_SFX)
#define FR_ET float
#define FR_ITE int32_t
#define FR_P0(c) ((c)->p.f0)
#define FR_P1(c) ((c)->p.f1)
#include "fused_regs_loop.h"
#undef FR_NAME
#undef FR_ET
#undef FR_ITE
#undef FR_P0
#undef FR_P1

#define FR_NAME FR_CAT(fr_run_f64, FR_SFX)
#define FR_ET double
#define FR_ITE int64_t
#define FR_P0(c) ((c)->p.d0)
#define FR_P1(c) ((c)->p.d1)
#include "fused_regs_loop.h"
#undef FR_NAME
#undef FR_ET
#undef FR_ITE
#undef FR_P0
#undef FR_P1

#undef FR_SFX
#undef FR_ATTR
#undef FR_VB
#undef FR_NV
