/* Dead-code elimination: drop steps no output depends on (messages between
 * ranks stay), and compact. */
#include "../ir.h"

#include <stdlib.h>

/* A message between ranks: its peer waits for it, whether or not anything
 * here reads its result (a send's token never is). */
static bool is_comm(const ir_step *st) {
    return st->kind == IRS_OP && (cn_ops[st->op]->flags & CN_OPF_COMM);
}

int cn_pass_dce(cn_ir *ir) {
    uint8_t *live = calloc((size_t)(ir->nv ? ir->nv : 1), 1);
    if (!live) return cn_failc(CN_ENOMEM, "dce: out of memory");
    for (int o = 0; o < ir->noutputs; o++) live[ir->outputs[o]] = 1;
    for (int s = 0; s < ir->ns; s++)
        if (is_comm(&ir->s[s])) live[ir->s[s].out] = 1;
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
