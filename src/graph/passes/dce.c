/* Dead-code elimination: drop steps no output depends on, and compact. */
#include "../ir.h"

#include <stdlib.h>

int cn_pass_dce(cn_ir *ir) {
    uint8_t *live = calloc((size_t)(ir->nv ? ir->nv : 1), 1);
    if (!live) return cn_failc(CN_ENOMEM, "dce: out of memory");
    for (int o = 0; o < ir->noutputs; o++) live[ir->outputs[o]] = 1;
    /* Steps are in topological order: one backward sweep marks everything. */
    for (int s = ir->ns - 1; s >= 0; s--) {
        ir_step *st = &ir->s[s];
        if (st->kind == IRS_DEAD || !live[st->out]) continue;
        for (int i = 0; i < st->nin; i++) live[st->in[i]] = 1;
    }
    int removed = 0, w = 0;
    for (int s = 0; s < ir->ns; s++) {
        ir_step *st = &ir->s[s];
        if (st->kind == IRS_DEAD || !live[st->out]) {
            free(st->in);
            if (st->fused) {
                free(st->fused->instr);
                free(st->fused);
            }
            if (st->kind != IRS_DEAD) removed++;
            continue;
        }
        ir->s[w] = *st;
        ir->v[st->out].producer = w;
        w++;
    }
    ir->ns = w;
    free(live);
    return removed;
}
