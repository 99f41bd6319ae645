/* The program IR: what cn_compile builds from a static graph, what the passes
 * rewrite, and what the executor runs.
 *
 * Values are numbered; each is a graph input (placeholder), a constant
 * (a tensor with data the graph read: a parameter, a literal), or the result
 * of one step. Steps are kept in an order where every step comes after the
 * steps producing its inputs. A pass is a function cn_ir -> cn_ir that
 * rewrites in place: it redirects uses (ir_replace_uses), changes a step's op
 * or inputs, appends values and marks steps dead; dce compacts. Passes never
 * touch the graph the IR was built from, so a program can always be rebuilt
 * (cn_run does when an assumption a pass made stops holding). */
#ifndef CN_GRAPH_IR_H
#define CN_GRAPH_IR_H

#include "../ops/op.h"
#include "../backend/backend.h"

#include <stdio.h>

struct cn_graph_effect;

struct cn_graph {
    cn_graph_head head; /* first: the core releases it */
    uint64_t id;
    /* Writes a program makes besides its outputs (effects.h). */
    struct cn_graph_effect *effects;
    int neffects, ecap;
};

enum { IRV_INPUT, IRV_CONST, IRV_STEP };

typedef struct ir_value {
    cn_tensor *t;     /* retained: the symbolic value, or the constant's data */
    int32_t producer; /* step index for IRV_STEP, else -1 */
    uint8_t kind;     /* IRV_* */
    cn_device dev;    /* where its bytes are, as placed (passes/place.c) */
} ir_value;

enum {
    IRS_OP,    /* one op of the table */
    IRS_FUSED, /* elementwise ops as one kernel (fused != NULL) */
    IRS_DEAD   /* removed; dce drops it */
};

typedef struct ir_step {
    uint8_t kind;       /* IRS_* */
    uint16_t op;        /* IRS_OP: cn_op_id. IRS_FUSED: the op of a head step run
                           first into the output (CN_OP_COUNT: none) */
    int32_t nin;
    int32_t *in;        /* value ids, owned */
    int32_t out;
    cn_attrs attrs;     /* of op */
    cn_fused_expr *fused; /* IRS_FUSED: owned. Register 0 is the head's result
                             when there is a head; the step's inputs follow */
    int32_t head_nin;   /* IRS_FUSED with a head: its inputs are in[0..head_nin) */
    /* Placement (passes/place.c). scope: the device of the cn_device_scope
     * open when the node was built (has_scope set), which the step must run
     * on; passes keep it (fuse and cse join only steps of one scope). dev:
     * where the step runs and its result lives (a transfer: the device it
     * copies to; a view: its input's). fallback: dev is the CPU because the
     * step's device has no kernel for it. transfer: a `to` step placement
     * inserted (removed and redone when the program is placed again). */
    cn_device scope;
    cn_device dev;
    uint8_t has_scope, fallback, transfer;
} ir_step;

/* Do two steps belong to the same device scope (or both to none)? */
static inline bool ir_same_scope(const ir_step *a, const ir_step *b) {
    return a->has_scope == b->has_scope &&
           (!a->has_scope || (a->scope.kind == b->scope.kind && a->scope.index == b->scope.index));
}

/* A tensor whose contents a pass relied on (a folded constant, a literal a
 * rewrite read): the program is rebuilt if its version changes. */
typedef struct ir_assumption {
    cn_tensor *t; /* retained */
    uint32_t version;
} ir_assumption;

typedef struct cn_ir {
    ir_value *v;
    int nv, vcap;
    ir_step *s;
    int ns, scap;
    int32_t *inputs; /* placeholder values, in the program's input order */
    int ninputs;
    int32_t *outputs;
    int noutputs;
    ir_assumption *assume;
    int nassume, acap;
    /* Split over the ranks of an MPI job (passes/split.c): split is set when
     * some step had a rank device; rank is then the process whose steps
     * these are. Per output: the rank computing it (-1: every rank), and
     * whether it is remote (computed on another rank and not sent here:
     * outputs[o] is then a placeholder constant and cn_run hands back NULL). */
    bool split;
    int rank;
    int32_t *out_rank;
    uint8_t *out_remote;
} cn_ir;

/* Build the IR of the nodes the outputs depend on (depth-first post-order). */
cn_ir *ir_from_graph(cn_tensor *const *outputs, int noutputs);
void ir_free(cn_ir *ir);
/* Append a value (t retained); returns its id or -1 (out of memory). */
int32_t ir_add_value(cn_ir *ir, cn_tensor *t, uint8_t kind, int32_t producer);
/* Insert a step (an IRS_OP of op on in[]) at position pos, before the step
 * now there, with a new symbolic result value of the given meta; returns the
 * value id or -1 (out of memory). Step pointers taken before are stale. */
int32_t ir_insert_step(cn_ir *ir, int pos, uint16_t op, const int32_t *in, int nin,
                       const cn_attrs *a, cn_dtype dt, int ndim, const int64_t *shape);
/* Point every use of value `from` (step inputs, outputs) at `to`. */
void ir_replace_uses(cn_ir *ir, int32_t from, int32_t to);
/* Uses of each value by live steps and outputs: counts[nv], caller frees. */
int32_t *ir_use_counts(const cn_ir *ir);
int ir_assume(cn_ir *ir, cn_tensor *t);
/* Is value id a constant (data known at compile time)? */
static inline bool ir_is_const(const cn_ir *ir, int32_t id) { return ir->v[id].kind == IRV_CONST; }
/* Write the steps as text, one per line (cn_program_dump and pass tests). */
void ir_print(const cn_ir *ir, FILE *f);
/* Graphviz DOT (dot.c). labels (NULL, or one per output, NULL or "" for
 * none) name what an output is written into, e.g. a parameter's gradient. */
int ir_write_dot(const cn_ir *ir, FILE *f, const char *const *labels);
/* cn_dev_name of a device of the program, "rank:R/..." when it is one
 * rank's part of a split program. */
const char *ir_dev_name(const cn_ir *ir, cn_device d);

/* ---- passes (src/graph/passes/) ----
 * Each returns the number of rewrites (>= 0) or < 0 after cn_fail. */
int cn_pass_fold(cn_ir *ir);     /* constant folding */
int cn_pass_simplify(cn_ir *ir); /* algebraic identities */
int cn_pass_cse(cn_ir *ir);      /* common subexpressions */
int cn_pass_dce(cn_ir *ir);      /* dead steps and values; compacts */
int cn_pass_fuse(cn_ir *ir);     /* elementwise chains and GEMM epilogues */

/* Split over ranks (passes/split.c), before placement: every step gets a
 * rank, from its scope's rank device ("rank:1/cpu:0"), else from its first
 * input that has one, else none (it reads inputs and constants only, which
 * every rank has: it runs on each rank that needs it). The steps of other
 * ranks are dropped; every value computed on rank a and read on rank b
 * becomes a send step on a, right after its producer, and a recv step on b
 * at the same place, paired by a tag numbering the crossings in step
 * order: the same IR on every rank gives the same tags and the same order
 * of messages on both sides. out_param[o] (NULL, or NULL entries) names the
 * parameter whose gradient output o is: it is sent to every rank that
 * reads the parameter. Scopes keep only their local device. Returns the
 * number of send and recv steps, 0 when no step has a rank, or < 0 after
 * cn_fail (a rank outside the job, sizes not known at a cut). */
int cn_pass_split(cn_ir *ir, int me, int size, cn_tensor *const *out_param);

/* Placement (passes/place.c): assign every step a device and insert the
 * transfer steps its inputs need. vdev[v] is the device of each input and
 * constant value (entries of step values are ignored); prog is the
 * program's device, for steps with nothing else to go by. Transfer steps
 * inserted by an earlier placement are removed first. A step runs on its
 * scope device, else on the device of its first input that is not a rank-0
 * value on the CPU, else on prog; a `to` step on its attribute device; a
 * view where its input is. A step the device's backend has no kernel for
 * (a fused step: no fused_run) runs on the CPU instead (a fallback): its
 * inputs are moved there and its result moved back for the readers and
 * outputs that expect it on its device. Returns the number of transfer
 * steps inserted, or < 0 after cn_fail (a scope device this machine does
 * not have). */
typedef struct ir_place_report {
    int nfallback;       /* steps moved to the CPU */
    int ninserted;       /* transfer steps inserted */
    char fallback_ops[256]; /* their ops, ", "-separated, each once */
    cn_device fallback_from; /* the device the first fallback was placed on */
} ir_place_report;
int cn_pass_place(cn_ir *ir, const cn_device *vdev, cn_device prog, ir_place_report *r);
/* Remove the transfer steps an earlier placement inserted. */
int ir_unplace(cn_ir *ir);
/* Does the text or DOT form show devices: any step off the CPU, or any
 * transfer? */
bool ir_shows_devices(const cn_ir *ir);
/* For tests: placement treats op as having no kernel on devices of kind
 * (missing true), as if the backend's table had NULL there, so the CPU
 * fallback can be tested with backends that implement every op. */
void cn_place_test_missing_kernel(cn_device_kind kind, cn_op_id op, bool missing);

typedef struct cn_pass_def {
    const char *name;
    int (*run)(cn_ir *ir);
    int min_level; /* runs at -O<min_level> and above */
} cn_pass_def;
extern const cn_pass_def cn_passes[];
extern const int cn_npasses;

#endif
