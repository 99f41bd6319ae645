/* A program's constant weights packed once for the CPU's GEMM (packs.c). */
#ifndef CN_GRAPH_PACKS_H
#define CN_GRAPH_PACKS_H

#include "plan.h"
#include "../backend/cpu/gemm.h"

/* packs[s] for each of the ir->ns steps of a run planned by pl, with the
 * values of its inputs and constants in live: packed anew where a step may
 * use one and has none, or one of a constant written since (storage
 * version); freed where the step no longer qualifies (sizes fed since).
 * Returns 0, or CN_ENOMEM after cn_fail. */
int cn_packs_update(const cn_ir *ir, const cn_plan *pl, cn_tensor *const *live,
                    cn_gemm_pack **packs);
/* Do the packs still hold their constants (none written since)? Which
 * steps want one depends only on the plan: a run with the same plan needs
 * cn_packs_update only when this is false. */
bool cn_packs_current(const cn_ir *ir, cn_gemm_pack *const *packs);
void cn_packs_free(cn_gemm_pack **packs, int n);
size_t cn_packs_bytes(cn_gemm_pack *const *packs, int n);

#endif
