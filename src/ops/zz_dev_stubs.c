/* TEMPORARY during the first build-out: weak placeholder definitions for
 * every op, so the library links while op families are written in parallel.
 * A family's strong definition replaces its placeholder. Deleted once every
 * family exists. */
#include "op.h"

static int stub_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a, cn_meta *m) {
    (void)in; (void)nin; (void)a; (void)m;
    return cn_failc(CN_EUNSUPPORTED, "%s: not implemented yet", op->name);
}

#define CN_OP(op_) \
    __attribute__((weak)) const cn_op_def cn_opdef_##op_ = {.name = #op_, .ninputs = -1, .infer = stub_infer};
#include "op_list.h"
#undef CN_OP
