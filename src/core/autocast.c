/* The autocast switch: a per-thread dtype that the dispatcher reads for the
 * ops marked CN_OPF_AUTOCAST. In core beside the grad mode, since both are
 * thread state that the graph layer records through the dispatcher. */
#include "core.h"

#define CN_MAX_AUTOCAST_DEPTH 64
_Thread_local uint8_t cn_autocast_dt = CN_F32;
static _Thread_local uint8_t autocast_stack[CN_MAX_AUTOCAST_DEPTH];
static _Thread_local int autocast_depth;

int cn_autocast_begin(cn_dtype dt) {
    if (dt != CN_F32 && dt != CN_BF16 && dt != CN_F16)
        return cn_failc(CN_EINVAL, "autocast_begin: dtype %s: autocast takes bf16, f16 or f32 (off)",
                        cn_dtype_name(dt));
    /* Past the saved depth the regions still count, so that every end
     * matches a begin; they restore "off" rather than a lost dtype. */
    if (autocast_depth < CN_MAX_AUTOCAST_DEPTH) autocast_stack[autocast_depth] = cn_autocast_dt;
    autocast_depth++;
    cn_autocast_dt = (uint8_t)dt;
    return CN_OK;
}

int cn_autocast_end(void) {
    if (autocast_depth == 0) return cn_failc(CN_ESTATE, "autocast_end: no autocast region is open");
    autocast_depth--;
    cn_autocast_dt = autocast_depth < CN_MAX_AUTOCAST_DEPTH ? autocast_stack[autocast_depth] : CN_F32;
    return CN_OK;
}

cn_dtype cn_autocast_dtype(void) { return (cn_dtype)cn_autocast_dt; }
