/* The tile loops of scaled dot-product attention (attention_tiles.h),
 * compiled once for f32 (vmath's vectorised exp, the one the exp op uses)
 * and once for f64 (libm). */
#include "attention.h"

#include "gemm.h"
#include "vmath.h"

#include <math.h>
#include <string.h>

/* One level of expansion, so CN_HOT_FN pastes the finished name. */
#define SDPA_HOT(name, params, args) CN_HOT_FN(name, params, args)

#define T float
#define IT int32_t /* an integer as wide as T: the lanes' comparison masks */
#define SFX f32
#define EXPT cn_vexpf
#include "attention_tiles.h"
#undef T
#undef IT
#undef SFX
#undef EXPT

#define T double
#define IT int64_t
#define SFX f64
#define EXPT exp
#include "attention_tiles.h"
#undef T
#undef IT
#undef SFX
#undef EXPT
