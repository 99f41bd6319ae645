/* Constant folding: a step whose inputs are all constants runs once, at
 * compile time, and its result becomes a constant. Parameters (tensors that
 * require a gradient) are not constants: an optimiser moves them between
 * runs; nor is state programs write (CN_TF_STATE). Every other tensor folded is an assumption of the program, which is
 * rebuilt if the tensor is written later (cn_run checks the versions). */
#include "pass_util.h"

#include <stdlib.h>

/* Folding must not turn a cheap broadcast into a big constant. */
static bool worth_folding(const cn_ir *ir, const ir_step *st) {
    const cn_op_def *d = cn_ops[st->op];
    if (d->flags & (CN_OPF_RANDOM | CN_OPF_COMM)) return false;
    /* Autocast's native matmul (half inputs, an f32 result) is what the
     * dispatcher makes inside a region only: run again outside one, it
     * would give the half type. */
    if ((d->flags & CN_OPF_AUTOCAST) && st->nin > 0 &&
        ir->v[st->in[0]].t->dtype != ir->v[st->out].t->dtype)
        return false;
    int64_t in_numel = 0;
    for (int i = 0; i < st->nin; i++) {
        const cn_tensor *t = ir->v[st->in[i]].t;
        if (ir->v[st->in[i]].kind != IRV_CONST || !pass_fixed(t)) return false;
        in_numel += cn_shape_numel(t->ndim, t->shape);
    }
    const cn_tensor *o = ir->v[st->out].t;
    if (d->flags & CN_OPF_VIEW) return true;
    return cn_shape_numel(o->ndim, o->shape) <= 4 * in_numel + 4096;
}

int cn_pass_fold(cn_ir *ir) {
    int folded = 0;
    bool prev = cn_set_grad_enabled(false);
    for (int s = 0; s < ir->ns; s++) {
        ir_step *st = &ir->s[s];
        if (st->kind != IRS_OP || !worth_folding(ir, st)) continue;
        cn_tensor *ins[16];
        if (st->nin > 16) continue;
        for (int i = 0; i < st->nin; i++) ins[i] = ir->v[st->in[i]].t;
        cn_tensor *r = cn_op_run((cn_op_id)st->op, ins, st->nin, &st->attrs);
        if (!r) {
            /* The op fails on these values: leave it for run time, where
             * the same error reaches the caller. */
            cn_clear_error();
            continue;
        }
        int32_t id = ir_add_value(ir, r, IRV_CONST, -1);
        cn_release(r);
        if (id < 0) {
            cn_set_grad_enabled(prev);
            return cn_failc(CN_ENOMEM, "fold: out of memory");
        }
        st = &ir->s[s];
        for (int i = 0; i < st->nin; i++)
            if (ir_assume(ir, ir->v[st->in[i]].t) < 0) {
                cn_set_grad_enabled(prev);
                return CN_ENOMEM;
            }
        ir_replace_uses(ir, st->out, id);
        st->kind = IRS_DEAD;
        folded++;
    }
    cn_set_grad_enabled(prev);
    return folded;
}
