/* ONNX import, internal: the import context, the op-handler tables (one per
 * family, onnx_ops_*.c) and the helpers handlers share. Only compiled with
 * protobuf-c (CN_HAVE_ONNX). */
#ifndef CN_IO_ONNX_INTERNAL_H
#define CN_IO_ONNX_INTERNAL_H

#include "../core/core.h"
#include "../core/budget.h"

#ifdef CN_HAVE_ONNX
#include "onnx.pb-c.h"

/* What one load needs while walking the nodes. */
typedef struct onnx_ctx {
    int opset;                   /* of the default domain */
    cn_graph *g;
    const char *base_dir;        /* for external data; may be NULL */
    const Onnx__NodeProto *node; /* the node being imported */
    int node_index;              /* its position in the graph, for messages */
    const Onnx__GraphProto *graph; /* the nodes, for patterns over several (may be NULL) */
    int64_t budget;              /* elements the load may compute (cn_t_budget's start) */
    int opset_of_node;
    /* A module's forward (onnx_module.c): the floating-point initializers
     * are parameters and state, which a static trace must read at run time
     * (never computed from alone while tracing); training: BatchNormalization
     * on batch statistics, Dropout drawing masks. */
    bool trainable, training;
    /* The values defined so far (set by onnx_import_node, for If's branches). */
    struct vmap *vals;
    /* Set when a node failed because its outputs' shapes depend on values
     * computed at run time (onnx_needs_values): the model then runs
     * eagerly, node by node, on every run (cn_onnx_run). */
    bool needs_values;
    /* A run of a model that runs eagerly (not a load): the element budget
     * is per node, and loops may run longer. */
    bool running;
    /* Loop iterations so far in this load or run, nested loops included. */
    int64_t loop_iters;
} onnx_ctx;

/* ONNX value name -> tensor (retained): what a walk over the nodes has
 * defined so far. */
typedef struct vmap {
    char **keys;
    cn_tensor **vals;
    size_t cap, n;
} vmap;
cn_tensor *vmap_get(const vmap *m, const char *k);
int vmap_put(vmap *m, const char *k, cn_tensor *v);
/* The value of k released (vmap_get gives NULL from then on). */
void vmap_drop(vmap *m, const char *k);
void vmap_free(vmap *m);

/* The declared dtype and shape (-1: unknown) of a graph input or output. */
int onnx_value_type(const Onnx__ValueInfoProto *v, int *dt, int *ndim, int64_t *shape);
/* The opset of the default domain, or < 0 after cn_fail (above 17). */
int onnx_model_opset(const Onnx__ModelProto *mp);
/* The ModelProto in data, checked (onnx_wire_check) before protobuf-c
 * unpacks it; what names it in messages. NULL after cn_fail. */
Onnx__ModelProto *onnx_unpack_model(const void *data, size_t size, const char *what);
/* The whole regular file path (at most ONNX_MAX_BYTES), malloc'd. */
void *onnx_read_file(const char *path, size_t *size);
/* path's folder, malloc'd ("." for a bare name). */
char *onnx_dir_of(const char *path);

/* Is there an importer for n's op, and does it know n's attributes (and
 * those of the nodes of its subgraphs)? 0, or < 0 after onnx_unsup. */
int onnx_check_node(onnx_ctx *c, const Onnx__NodeProto *n);
/* Node n through its family's handler, its outputs into vals: 0 or < 0
 * after cn_fail naming the node. */
int onnx_import_node(onnx_ctx *c, vmap *vals, const Onnx__NodeProto *n);

/* Patterns over several nodes (onnx_pattern.c). onnx_producer: the node
 * before the current one that writes name, or NULL. onnx_readers: how many
 * node inputs and graph outputs read name (a graph with subgraphs counts as
 * many: their bodies may read any outer value). onnx_inner: the node of
 * type op that writes name, when only one reader reads it. */
const Onnx__NodeProto *onnx_producer(const onnx_ctx *c, const char *name);
int onnx_readers(const onnx_ctx *c, const char *name);
bool onnx_is_op(const Onnx__NodeProto *n, const char *op);
const Onnx__NodeProto *onnx_inner(const onnx_ctx *c, const char *name, const char *op);
/* name is a float constant of one element that does not raise x's rank:
 * its value in *v. */
bool onnx_pattern_scalar(const vmap *vals, const char *name, const cn_tensor *x, double *v);
/* The value name is made from through Mul and Div by such constants (read
 * only there), their product multiplying *scale. */
const char *onnx_unscale(const onnx_ctx *c, const vmap *vals, const char *name, double *scale);

/* When n is the last MatMul of an attention subgraph whose values nothing
 * else reads, out[0] = the fused scaled_dot_product_attention of its Q, K,
 * V and mask, and 1; else 0 and nothing changes (onnx_attention.c). */
int onnx_fuse_attention(onnx_ctx *c, const vmap *vals, const Onnx__NodeProto *n, cn_tensor **out);
/* When n is the last Mul of GELU written out (the erf or the tanh form)
 * over values nothing else reads, out[0] = gelu of its input, and 1; else 0
 * (onnx_gelu.c). */
int onnx_fuse_gelu(onnx_ctx *c, const vmap *vals, const Onnx__NodeProto *n, cn_tensor **out);

/* Resource bounds of a load (docs/onnx.md, "Limits"). A file or buffer
 * larger than ONNX_MAX_BYTES (protobuf's own 2 GiB), nested deeper than
 * ONNX_MAX_DEPTH messages (protobuf's default recursion limit; the
 * ModelProto is depth 1) or holding more than ONNX_MAX_MESSAGES messages in
 * all is refused before protobuf-c unpacks it. */
#define ONNX_MAX_BYTES ((size_t)2 << 30)
#define ONNX_MAX_DEPTH 100
#define ONNX_MAX_MESSAGES ((size_t)1 << 22)
/* The elements the tensors computed while a model loads may take, beyond
 * its initializers' own (CN_ONNX_MAX_ELEMENTS overrides; 0: no limit). */
#define ONNX_MAX_ELEMENTS (INT64_C(1) << 28)
#define ONNX_MAX_ELEMENTS_ENV "CN_ONNX_MAX_ELEMENTS"
/* Window attributes (kernel_shape, strides, dilations, pads,
 * output_padding) above this are refused: no real model comes near it,
 * and their products stay far from overflowing int64. */
#define ONNX_MAX_WINDOW (INT64_C(1) << 24)
/* Inputs of one node (Concat, Sum, Max, Min, Mean take any number). */
#define ONNX_MAX_INPUTS 4096

enum {
    ONNX_WIRE_MALFORMED = -1,
    ONNX_WIRE_TOO_DEEP = -2,
    ONNX_WIRE_TOO_MANY = -3,
    ONNX_WIRE_TOO_BIG = -4,
};
/* Walks the serialized message of type d (tags and lengths only, with
 * bounded recursion): 0, or the first ONNX_WIRE_* bound it breaks. */
int onnx_wire_check(const void *data, size_t size, const ProtobufCMessageDescriptor *d);
/* Is data (checked by onnx_wire_check) a sequence, map or optional value
 * rather than a TensorProto? (onnx_wire.c says how it tells.) */
bool onnx_wire_not_tensor(const void *data, size_t size);

/* Import one node: in[0..nin) are its inputs (NULL for an omitted optional
 * input), out[0..nout) receives its outputs (scope-owned tensors; a slot
 * whose output name is empty may stay NULL). Returns 0 or a negative status
 * after cn_fail (onnx_unsup for what is not supported). Each call runs in its
 * own scope. */
typedef int (*onnx_handler)(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor **in, int nin,
                            cn_tensor **out, int nout);

typedef struct onnx_op_entry {
    const char *name;   /* ONNX op_type */
    onnx_handler fn;
    const char *attrs;  /* the attributes understood, comma-separated; any other fails */
    int min_in, max_in; /* input count range */
    int max_out;        /* outputs supported */
    const char *limits; /* what is not supported, for docs/onnx.md ("" if none) */
} onnx_op_entry;

/* Every family's table, in lookup order, NULL-terminated (onnx_import.c). */
const onnx_op_entry *const *cn_onnx_families(void);
/* The families' tables, each ended by an entry with a NULL name. */
extern const onnx_op_entry cn_onnx_ops_elementwise[];
extern const onnx_op_entry cn_onnx_ops_shape[];
extern const onnx_op_entry cn_onnx_ops_reduce[];
extern const onnx_op_entry cn_onnx_ops_index[];
extern const onnx_op_entry cn_onnx_ops_conv[];
extern const onnx_op_entry cn_onnx_ops_nn[];
extern const onnx_op_entry cn_onnx_ops_rnn[];
extern const onnx_op_entry cn_onnx_ops_quant[];
extern const onnx_op_entry cn_onnx_ops_control[];
extern const onnx_op_entry cn_onnx_ops_detect[];
extern const onnx_op_entry cn_onnx_ops_grid[];
extern const onnx_op_entry cn_onnx_ops_spectral[];
/* ONNX Runtime's com.microsoft quantized ops (onnx_ops_ms.c), named
 * "com.microsoft.<op>"; not in the families, which are the default
 * domain's (the op table lists them after those). */
extern const onnx_op_entry cn_onnx_ops_ms[];
/* The entry of op name in domain (NULL or "" or "ai.onnx": the default;
 * "com.microsoft"), or NULL. */
const onnx_op_entry *onnx_find_op(const char *domain, const char *name);

/* Conv's import (1 to 3 spatial axes, n's window attributes) of x with
 * weights wt and bias b (may be NULL), into *out; ConvInteger and
 * QLinearConv use it too. */
int onnx_conv(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor *x, cn_tensor *wt, cn_tensor *b,
              cn_tensor **out);
/* The attributes onnx_conv reads. */
#define ONNX_CONV_ATTRS "auto_pad,dilations,group,kernel_shape,pads,strides"

/* "unsupported: OP (opset N): reason", CN_EUNSUPPORTED. */
int onnx_unsup(onnx_ctx *c, const char *fmt, ...) CN_PRINTF(2, 3);
/* "unsupported: OP (opset N): reason", CN_EUNSUPPORTED, for a node whose
 * outputs' shapes depend on the values of an input computed at run time
 * (NonZero, NonMaxSuppression, TopK's k, If's condition): sets
 * c->needs_values, so the load goes on with the model run eagerly. */
int onnx_needs_values(onnx_ctx *c, const char *fmt, ...) CN_PRINTF(2, 3);
/* "OP (opset N): reason", CN_EINVAL: the model itself is wrong. */
int onnx_bad(onnx_ctx *c, const char *fmt, ...) CN_PRINTF(2, 3);

/* Attributes of the current node. */
const Onnx__AttributeProto *onnx_attr(const Onnx__NodeProto *n, const char *name);
int64_t onnx_attr_int(const Onnx__NodeProto *n, const char *name, int64_t def);
double onnx_attr_float(const Onnx__NodeProto *n, const char *name, double def);
/* The list into out (at most cap), its length, or -1 if absent (-2 if longer
 * than cap). */
int onnx_attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *out, int cap);
int onnx_attr_floats(const Onnx__NodeProto *n, const char *name, float *out, int cap);
/* A string attribute copied into buf (def if absent). */
const char *onnx_attr_str(const Onnx__NodeProto *n, const char *name, const char *def, char *buf,
                          size_t cap);

/* The values of a constant integer tensor (shapes, axes, pads given as
 * inputs): the count, or < 0 after onnx_unsup when t is computed at run
 * time, or onnx_bad when it is not an integer vector or has more than cap. */
int onnx_const_ints(onnx_ctx *c, cn_tensor *t, const char *what, int64_t *out, int cap);
/* A constant scalar (or one-element tensor) as a double. */
int onnx_const_scalar(onnx_ctx *c, cn_tensor *t, const char *what, double *out);

/* TensorProto -> tensor (scope-owned), data from raw_data, the typed fields
 * or an external file under base_dir. */
cn_tensor *onnx_tensor_from_proto(const Onnx__TensorProto *tp, const char *base_dir);
/* ONNX elem type -> cn dtype, or -1 (name: the ONNX name for messages). */
int onnx_dtype(int32_t elem_type);
const char *onnx_dtype_name(int32_t elem_type);

/* Small tensor helpers for handlers (scope-owned results). */
cn_tensor *onnx_i64_vec(int n, const int64_t *v);
cn_tensor *onnx_scalar_like(const cn_tensor *t, double v); /* rank 0, t's dtype */
/* x's shape filled with v, as an op: a value of x's graph when x is
 * symbolic (cn_full_like needs data). */
cn_tensor *onnx_full_like(cn_tensor *x, double v);
/* An f32 scalar v; when x is symbolic, a value of x's graph, so that
 * arithmetic with parameters and running statistics runs in the program
 * instead of being computed once while tracing (onnx_ctx.trainable). */
cn_tensor *onnx_scalar_of(cn_tensor *x, double v);
/* A tensor a handler creates at load time from sizes in the file (a
 * ConstantOfShape, a Tile): refuses negative sizes and more elements than
 * are left of the load's budget (cn_t_budget, which every tensor made
 * during the load draws on), before anything is computed. */
int onnx_check_size(onnx_ctx *c, int ndim, const int64_t *shape);
/* The refusal when the budget ran out, naming the node and the variable
 * that raises it. */
int onnx_budget_exceeded(onnx_ctx *c);
/* " 'name'" of the current node for messages, or "" when it has none. */
const char *onnx_node_label(onnx_ctx *c, char *buf, size_t cap);
/* Can v (a value read from the file as a double) be converted to int64?
 * False for NaN, infinities and beyond +-2^62: converting those is
 * undefined behaviour in C. */
static inline bool onnx_fits_i64(double v) { return v > -0x1p62 && v < 0x1p62; }
/* Normalise an axis against rank, or fail (onnx_bad) and return INT_MIN. */
int onnx_axis(onnx_ctx *c, int64_t axis, int rank, const char *what);

/* For the handler files (onnx_ops_*.c): H(name) declares a handler,
 * UNUSED silences the arguments one does not read, DONE(x) stores the one
 * output and returns its status. */
#define H(name)                                                                                   \
    static int name(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor **in, int nin,              \
                    cn_tensor **out, int nout)
#define UNUSED (void)c, (void)n, (void)nin, (void)nout
#define DONE(x) return (out[0] = (x)) ? 0 : CN_EINVAL

#endif /* CN_HAVE_ONNX */
#endif
