/* Graph effects: state a compiled program writes on every run besides its
 * outputs, as eager code writes it on every call (BatchNorm's running
 * statistics in training mode).
 *
 * An effect is (target, value, anchor): value, a symbolic tensor of the
 * graph, is written into target, a tensor with data, whenever a program
 * computes anchor. A program computes an anchor when the anchor is among
 * the values its outputs depend on, so an effect recorded while tracing a
 * training-mode forward rides with every program built from that forward
 * (its training step, its outputs alone) and with none built from other
 * parts of the graph. cn_compile appends the included effects' values to
 * the program's outputs, bound to their targets; targets are marked
 * CN_TF_STATE so no pass folds them.
 *
 * The graph holds the effects' tensors, and those tensors hold the graph:
 * cn_graph_free drops the effects (programs already compiled keep theirs),
 * so compile before freeing the graph handle. */
#ifndef CN_GRAPH_EFFECTS_H
#define CN_GRAPH_EFFECTS_H

#include "ir.h"

typedef struct cn_graph_effect {
    cn_tensor *target; /* retained, has data */
    cn_tensor *value;  /* retained, symbolic: target's dtype and shape */
    cn_tensor *anchor; /* retained, symbolic */
} cn_graph_effect;

/* Record that programs computing anchor write value into target. */
int cn_graph_add_effect(cn_tensor *target, cn_tensor *value, cn_tensor *anchor);
/* Drop a reference to g without touching its effects (programs hold one). */
void cn_graph_unref(cn_graph *g);
/* Release every effect of g. */
void cn_graph_clear_effects(cn_graph *g);
/* The effects of g whose anchors the outputs depend on: *n of them, in a
 * malloc'd array of pointers into g's list (NULL with *n = 0 when none);
 * -1 when out of memory. */
int cn_graph_effects_for(cn_graph *g, cn_tensor *const *outputs, int noutputs,
                         const cn_graph_effect ***out, int *n);

#endif
