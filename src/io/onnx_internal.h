/* ONNX import, internal: the import context, the op-handler tables (one per
 * family, onnx_ops_*.c) and the helpers handlers share. Only compiled with
 * protobuf-c (CN_HAVE_ONNX). */
#ifndef CN_IO_ONNX_INTERNAL_H
#define CN_IO_ONNX_INTERNAL_H

#include "../core/core.h"

#ifdef CN_HAVE_ONNX
#include "onnx.pb-c.h"

/* What one load needs while walking the nodes. */
typedef struct onnx_ctx {
    int opset;                   /* of the default domain */
    cn_graph *g;
    const char *base_dir;        /* for external data; may be NULL */
    const Onnx__NodeProto *node; /* the node being imported */
    int opset_of_node;
} onnx_ctx;

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

/* "unsupported: OP (opset N): reason", CN_EUNSUPPORTED. */
int onnx_unsup(onnx_ctx *c, const char *fmt, ...) CN_PRINTF(2, 3);
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
/* A tensor a handler creates at load time from sizes in the file (a
 * ConstantOfShape, a Tile): refuses negative sizes and more than 2^31
 * elements, so a hostile file cannot ask for terabytes. */
int onnx_check_size(onnx_ctx *c, int ndim, const int64_t *shape);
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
