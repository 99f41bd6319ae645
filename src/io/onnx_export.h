/* ONNX export, internal: the context the driver (onnx_export.c) gives the
 * per-op emitters (onnx_export_ops.c). Everything a node holds lives in the
 * context's arena and is freed in one go after the model is packed. Only
 * compiled with protobuf-c (CN_HAVE_ONNX). */
#ifndef CN_IO_ONNX_EXPORT_H
#define CN_IO_ONNX_EXPORT_H

#include "../graph/ir.h"

#ifdef CN_HAVE_ONNX
#include "onnx.pb-c.h"

/* The arena: every message and string of the model. */
typedef struct ox_block {
    struct ox_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} ox_block;

/* The context of one export. */
struct ox_ctx {
    ox_block *arena;
    bool oom;
    const cn_ir *ir;
    const char *op;        /* the op being exported, for messages */
    Onnx__NodeProto **nodes;
    size_t nnodes, ncap;
    Onnx__TensorProto **inits;
    size_t ninits, icap;
    Onnx__ValueInfoProto **vinfo;
    size_t nvinfo, vcap;
    const char **names; /* the set of names in use (open addressing) */
    size_t nnames, namecap;
    uint64_t fresh;
    Onnx__ValueInfoProto **gin, **gout; /* graph inputs and outputs */
    struct ox_held {  /* the constants written, contiguous, released at the end */
        cn_tensor *t;
        const char *name; /* its initializer */
        uint64_t hash;    /* of dtype, shape and bytes */
    } *held;
    size_t nheld, hcap;
    const char **param_init; /* per opts->params entry: its initializer, once written */
    struct ox_transposed {   /* per opts->params entry: its last Transpose */
        const char *name;
        int64_t perm[CN_MAX_DIMS];
    } *param_t;
    Onnx__TensorProto **small; /* the emitters' initializers, shared when equal */
    size_t nsmall, scap;
};
typedef struct ox_ctx ox_ctx;

/* Memory and names (onnx_export_proto.c). ox_alloc gives zeroed arena
 * memory (NULL and c->oom when out of memory); ox_grow a malloc'd array to
 * hold need elements; names must live as long as the context. */
void *ox_alloc(ox_ctx *c, size_t n);
bool ox_grow(void **arr, size_t *cap, size_t need, size_t esize);
bool ox_name_taken(const ox_ctx *c, const char *s);
int ox_name_add(ox_ctx *c, const char *s);
/* base, or base_<k> for the first k free; registered. */
const char *ox_unique_name(ox_ctx *c, const char *base);
/* A TensorProto of raw little-endian bytes (borrowed unless the host is
 * big-endian: data must outlive the packing), and adding one to the graph. */
Onnx__TensorProto *ox_tensor_proto(ox_ctx *c, const char *name, cn_dtype dt, int ndim,
                                   const int64_t *shape, const void *data);
const char *ox_add_init(ox_ctx *c, Onnx__TensorProto *tp);
/* The type of a value; with symbolic_dims an unknown size is named
 * "<name>_dim<k>", else left without a value. */
Onnx__ValueInfoProto *ox_value_info(ox_ctx *c, const char *name, const cn_tensor *t,
                                    bool symbolic_dims);
void ox_ctx_free(ox_ctx *c);

/* Emit the nodes of one step. in[k] is the ONNX name of the step's input k,
 * it[k] its tensor (dtype and shape; -1 sizes unknown), out the step's
 * result. Returns the name of the value holding the result, or NULL after
 * cn_fail (ox_unsup for what ONNX cannot express). */
typedef const char *(*ox_emit_fn)(ox_ctx *c, const ir_step *s, const char *const *in,
                                  cn_tensor *const *it, const cn_tensor *out);

/* The emitter of op id, or NULL when the op has none. */
ox_emit_fn ox_emitter(int op);
/* lstm_seq's (onnx_export_rnn.c). */
const char *ox_emit_lstm_seq(ox_ctx *c, const ir_step *s, const char *const *in,
                             cn_tensor *const *it, const cn_tensor *out);
/* scaled_dot_product_attention's (onnx_export_attention.c). */
const char *ox_emit_sdpa(ox_ctx *c, const ir_step *s, const char *const *in,
                         cn_tensor *const *it, const cn_tensor *out);
/* rope's (onnx_export_rope.c). */
const char *ox_emit_rope(ox_ctx *c, const ir_step *s, const char *const *in,
                         cn_tensor *const *it, const cn_tensor *out);

/* "export: OP is not supported (reason)", CN_EUNSUPPORTED; returns NULL. */
const char *ox_unsup(ox_ctx *c, const char *fmt, ...) CN_PRINTF(2, 3);

/* A node of op_type with nin inputs ("" for an omitted optional one) and
 * nout freshly named outputs; NULL when out of memory. */
Onnx__NodeProto *ox_node(ox_ctx *c, const char *op, const char *const *in, int nin, int nout);
/* ox_node with one output, returning that output's name. */
const char *ox_op1(ox_ctx *c, const char *op, const char *const *in, int nin);
const char *ox_unary(ox_ctx *c, const char *op, const char *x);
const char *ox_binary(ox_ctx *c, const char *op, const char *a, const char *b);
/* The output name of the node ox_node made last (for attributes). */
Onnx__NodeProto *ox_last(ox_ctx *c);

/* Attributes of a node; 0 or CN_ENOMEM. */
int ox_attr_int(ox_ctx *c, Onnx__NodeProto *n, const char *name, int64_t v);
int ox_attr_float(ox_ctx *c, Onnx__NodeProto *n, const char *name, double v);
int ox_attr_ints(ox_ctx *c, Onnx__NodeProto *n, const char *name, const int64_t *v, int k);
int ox_attr_str(ox_ctx *c, Onnx__NodeProto *n, const char *name, const char *s);
int ox_attr_tensor(ox_ctx *c, Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t);

/* Initializers made by emitters: a 1-D int64 vector, and a scalar (rank 0,
 * or rank 1 of one element with vec) of a dtype. Returns the name. */
const char *ox_const_i64s(ox_ctx *c, const int64_t *v, int n);
const char *ox_const_scalar(ox_ctx *c, cn_dtype dt, double v);
Onnx__TensorProto *ox_tensor_scalar(ox_ctx *c, cn_dtype dt, double v, bool vec);

/* x (of dtype from) as dtype to: x itself when they are the same. */
const char *ox_cast(ox_ctx *c, const char *x, cn_dtype from, cn_dtype to);

/* The ONNX TensorProto.DataType of a dtype. */
int ox_elem_type(cn_dtype dt);

#endif /* CN_HAVE_ONNX */
#endif
