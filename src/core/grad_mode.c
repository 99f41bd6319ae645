/* The recording switch of eager autograd: a per-thread flag that the
 * dispatcher's record hook reads and no-grad regions set. In core, since
 * in-place writes below the graph layer check it too. */
#include "core.h"

#define CN_MAX_NO_GRAD_DEPTH 64
_Thread_local bool cn_grad_disabled;
static _Thread_local bool no_grad_stack[CN_MAX_NO_GRAD_DEPTH];
static _Thread_local int no_grad_depth;

bool cn_set_grad_enabled(bool enabled) {
    bool prev = !cn_grad_disabled;
    cn_grad_disabled = !enabled;
    return prev;
}

bool cn_is_grad_enabled(void) { return !cn_grad_disabled; }

void cn_no_grad_begin(void) {
    if (no_grad_depth < CN_MAX_NO_GRAD_DEPTH) no_grad_stack[no_grad_depth] = cn_grad_disabled;
    no_grad_depth++;
    cn_grad_disabled = true;
}

void cn_no_grad_end(void) {
    if (no_grad_depth == 0) {
        cn_fail("no_grad_end: no no-grad region is open");
        return;
    }
    no_grad_depth--;
    cn_grad_disabled = no_grad_depth < CN_MAX_NO_GRAD_DEPTH ? no_grad_stack[no_grad_depth] : true;
}

