/* What the layers above the graph attach to a compiled program (the
 * training step of src/nn/train_step.c), without the graph knowing them. */
#ifndef CN_GRAPH_PROGRAM_H
#define CN_GRAPH_PROGRAM_H

#include "../ops/op.h"

/* The first nuser outputs of p are the user's; outputs nuser .. nuser +
 * nbound - 1 are written into bound[] on every run (retained), and after a
 * successful run p calls after_run(ctx) (an optimiser's update). */
void cn_program_attach_step(cn_program *p, int nuser, cn_tensor *const *bound, int nbound,
                            int (*after_run)(void *ctx), void *ctx);

/* cn_compile, where outputs[i] is the gradient of params[i] (NULL for
 * others): a program split over ranks sends it to every rank whose steps
 * read that parameter (passes/split.c). */
cn_program *cn_compile_params(cn_graph *g, cn_tensor *const *outputs, int noutputs,
                              cn_tensor *const *params, const cn_compile_opts *opts);
/* Does this rank get output i (false: another rank computes it)? */
bool cn_program_output_here(const cn_program *p, int i);

#endif
