/* Memory planning and scheduling of a program for one set of input sizes.
 *
 * Shape inference runs over the steps with the fed sizes; then every value
 * computed by a kernel (not a view, not an output) gets a byte range in one
 * arena. Two values may share bytes only if their lifetimes do not overlap:
 * a value lives from the time of the step producing it to the time of the
 * last step reading it or any view of it. Time is the step's position, or,
 * when independent steps may run concurrently, its level (1 + the highest
 * level among the steps it reads from), so any order within a level is
 * safe. A fused step may write its output over a dead input of the same
 * size (in place). Offsets come from a simulation in time order with a
 * best-fit free list, one per device: each step's result lives in the
 * arena of the device the step was placed on (ir_step.dev). */
#ifndef CN_GRAPH_PLAN_H
#define CN_GRAPH_PLAN_H

#include "ir.h"

#define CN_PLAN_MAX_DEVICES 8

typedef struct cn_plan {
    int nv, ns;
    cn_meta *meta;       /* per value: concrete dtype and shape */
    cn_attrs *attrs;     /* per step: attributes after inference with real sizes */
    cn_tensor **buf;     /* per value: its planned tensor in the arena, or NULL */
    cn_tensor **vbuf;    /* per view value: a struct reused by each run, or NULL */
    int32_t *order;      /* steps in execution order */
    int32_t *group_start;/* order[group_start[k] .. group_start[k+1]) may run together */
    uint8_t *group_par;  /* per group: run its steps concurrently */
    int ngroups;
    int32_t *dead_start; /* poison: values dead after group k are dead_list[dead_start[k]..[k+1]) */
    int32_t *dead_list;
    /* One arena per device that has planned values (the devices the steps
     * were placed on): a value lives in the arena of its step's device. */
    int narenas;
    cn_device arena_dev[CN_PLAN_MAX_DEVICES];
    cn_storage *arena[CN_PLAN_MAX_DEVICES];
    size_t arena_size[CN_PLAN_MAX_DEVICES];
    size_t arena_bytes, naive_bytes; /* arena_bytes: the sum over the arenas */
    int ninplace;
    int *task_rc;        /* per step of the largest concurrent group: status */
    char (*task_err)[512];/* and message, so a run allocates nothing */
} cn_plan;

/* vals[id]: the tensor of every input and constant value (NULL for steps).
 * memory: plan an arena (else every result is allocated when computed).
 * parallel: levels may run concurrently. Returns NULL after cn_fail (a
 * shape error the fed sizes show). */
cn_plan *cn_plan_build(const cn_ir *ir, cn_tensor *const *vals, bool memory, bool parallel,
                       bool check);
void cn_plan_free(cn_plan *pl);

#endif
