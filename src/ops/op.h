/* The op registry: every op is one cn_op_def, the single source of truth for
 * its name, inputs, attributes, shape/dtype inference, kernels, gradient rules
 * and ONNX name. The list of ops is op_list.h (an X-macro); ids are the
 * enum below and are never serialised (names are), so the order may change. */
#ifndef CN_OP_H
#define CN_OP_H

#include "../backend/backend.h"


typedef enum cn_attr_kind {
    CN_ATTR_NONE = 0,
    CN_ATTR_INT,   /* i[slot] */
    CN_ATTR_BOOL,  /* i[slot], 0 or 1 */
    CN_ATTR_DTYPE, /* i[slot], a cn_dtype */
    CN_ATTR_FLOAT, /* f[slot] */
    CN_ATTR_INTS   /* list[0..nlist) (slot unused) */
} cn_attr_kind;

typedef struct cn_attr_def {
    const char *name;
    cn_attr_kind kind;
    uint8_t slot;
    double def; /* default, for documentation and importers */
} cn_attr_def;

#define CN_MAX_OP_ATTRS 5

/* Output metadata computed by infer. */
typedef struct cn_meta {
    cn_dtype dtype;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
} cn_meta;

struct cn_op_def;
typedef struct cn_op_def cn_op_def;

/* Check the inputs and attributes (every user-facing check lives here, with a
 * message naming the op, the argument and the shapes), canonicalise the
 * attributes (negative axes, defaults), and compute the output's dtype and
 * shape. Shapes may hold -1 (unknown until run) for symbolic inputs. Returns
 * 0 or a negative status after cn_fail. */
typedef int (*cn_infer_fn)(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                           cn_meta *out);


/* View ops: set out's strides and offset (out already shares in's storage and
 * has infer's shape). Return 0, or 1 if no strides express the result (the
 * dispatcher then retries on a contiguous copy of in, or fails for cn_view). */
typedef int (*cn_view_fn)(const cn_op_def *op, const cn_tensor *in, const cn_attrs *a,
                          cn_tensor *out);

/* Reverse mode: the gradient with respect to input i, built from ops (so it
 * is itself differentiable and traceable), with input i's shape and dtype.
 * gout has out's shape. Called only for inputs that need a gradient (float
 * inputs on a path to a leaf); NULL means an error. Results go to the
 * current scope or are owned by it (use the public ops). */
typedef cn_tensor *(*cn_vjp_fn)(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                                cn_tensor *gout, int i);
/* Forward mode: the tangent of the output from the inputs' tangents (NULL
 * entries are zero tangents; at least one is not NULL), built from ops, with
 * out's shape. NULL means an error. */
typedef cn_tensor *(*cn_jvp_fn)(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                                const cn_attrs *a, cn_tensor *out);
/* Optional, for ops whose gradient is mostly zeros (a slice), or cheap to
 * add as it is computed (mul: a factor shared by many steps, whose
 * product would be built only to be added): add the gradient for input i
 * into acc in place instead of building it. acc has
 * input i's shape and dtype, is eager, owned by the backward walk alone and
 * has no broadcast (stride 0) axis. Called only when nothing is recorded
 * (no create_graph) and gout is eager. Returns 0, or < 0 to have the walk
 * use vjp instead. */
typedef int (*cn_vjp_add_fn)(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *gout,
                             int i, cn_tensor *acc);
/* Optional, for ops whose gradients for several inputs share one costly
 * computation (lstm_seq's backward recurrence): the gradients of every
 * input i with need[i] into g[i] (the others stay NULL), in one call;
 * results as for vjp. Returns 0, or < 0 after cn_fail. The backward walk
 * calls it instead of vjp, once per node; vjp must still be given. */
typedef int (*cn_vjp_multi_fn)(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                               cn_tensor *gout, const bool *need, cn_tensor **g);
#define CN_VJP_MULTI_MAX_IN 8

enum {
    CN_OPF_VIEW = 1 << 0,        /* output aliases input 0 (view fn) */
    CN_OPF_ELEMENTWISE = 1 << 1, /* broadcasting elementwise: a fusion candidate */
    CN_OPF_FLOAT_MATH = 1 << 2,  /* integer/bool inputs compute in f32 */
    CN_OPF_PROMOTE = 1 << 3,     /* inputs from promote_from on are cast to their result type */
    CN_OPF_NONDIFF = 1 << 4,     /* the output carries no gradient (comparisons, argmax) */
    CN_OPF_RANDOM = 1 << 5,      /* draws from the generator: never folded or merged */
    CN_OPF_NO_HALF = 1 << 6,     /* f16/bf16 inputs are not widened (the op handles them) */
    CN_OPF_FIRST_ORDER = 1 << 7, /* a gradient op whose own gradient is not supported: its
                                    vjp and jvp fail, saying so (grad_doc says why) */
    CN_OPF_TRANSFER = 1 << 8,    /* the output goes to the device in attributes i[0], i[1]
                                    (cn_to): no backend kernel, a copy between devices */
    CN_OPF_COMM = 1 << 9,        /* a message between ranks (send, recv): never folded,
                                    merged or reordered, run even when empty */
    CN_OPF_AUTOCAST = 1 << 10,   /* a product: inside an autocast region its f32 inputs
                                    are rounded to the region's dtype (autocast.c) */
    CN_OPF_VJP_ADD_INTO = 1 << 11 /* vjp_add only adds into a sum the walk already has; the
                                    first gradient is vjp's own (from zeros, 0 + -0 would
                                    give +0: other bits than the vjp's) */
};

struct cn_op_def {
    const char *name;          /* public name, as in cn_<name> */
    int8_t ninputs;            /* -1: variadic (at least 1) */
    int8_t promote_from;       /* with CN_OPF_PROMOTE: first input that takes part */
    uint32_t flags;            /* CN_OPF_* */
    cn_attr_def attrs[CN_MAX_OP_ATTRS];
    cn_infer_fn infer;
    cn_view_fn view;
    cn_vjp_fn vjp;             /* filled by the autodiff work */
    cn_jvp_fn jvp;
    cn_vjp_add_fn vjp_add;     /* optional: see cn_vjp_add_fn */
    cn_vjp_multi_fn vjp_multi; /* optional: see cn_vjp_multi_fn */
    const char *onnx;          /* the ONNX op it maps to, or NULL */
    const void *impl;          /* family-private data for shared kernels */
    const char *doc;           /* one line of maths */
    /* The derivative used where the maths has none (kinks, ties, steps),
     * e.g. "relu'(0) = 0"; NULL for ops smooth everywhere they are defined.
     * docs/ops.md is generated from doc and grad_doc (chutney ops --markdown). */
    const char *grad_doc;
};

/* The registry (registry.c). Built-in ops are [0, CN_OP_COUNT); ops users
 * register at run time (custom.c) follow from CN_OP_CUSTOM_FIRST, leaving
 * CN_OP_COUNT free, since programs use it to mean "no op". Per-op tables
 * of the backends stay CN_OP_COUNT long: custom ids never index them (the
 * dispatcher and placement ask custom.c instead). Entries past the
 * registered ones are NULL; an entry is written once, before its id is
 * handed out, and never changes. */
#define CN_OP_CUSTOM_FIRST (CN_OP_COUNT + 1)
#define CN_OP_CUSTOM_MAX 256
#define CN_OP_TABLE_SIZE (CN_OP_CUSTOM_FIRST + CN_OP_CUSTOM_MAX)
extern const cn_op_def *cn_ops[CN_OP_TABLE_SIZE];
const cn_op_def *cn_op_find(const char *name);

/* Custom ops (custom.c). */
static inline bool cn_op_is_custom(int id) { return id >= CN_OP_CUSTOM_FIRST; }
/* The kernel step for a custom op, as cn_kernel_run: its kernel for dev's
 * kind, or its CPU kernel on host copies. */
cn_tensor *cn_custom_kernel_run(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                                const cn_meta *m, cn_device dev, cn_tensor *out);
/* Has the custom op a kernel of its own for this kind of device? */
bool cn_custom_has_kernel(cn_op_id id, cn_device_kind kind);

/* Run op on inputs: promotion, inference, then either a kernel (eager), a
 * view, or a node of a static graph (symbolic inputs); records the node for
 * autograd when an input requires a gradient. Returns a reference owned by
 * the caller (no scope). NULL inputs give NULL with the error untouched. */
cn_tensor *cn_op_run(cn_op_id op, cn_tensor *const *in, int nin, const cn_attrs *a);
/* A view op applied to x: out aliases x with m's shape and the strides
 * the op's view fn sets; where no strides express it, a view of a
 * contiguous copy. reuse, when only its owner holds it (refcount 1), is
 * made the result (a static program's per-value struct) instead of a new
 * struct. Returns a reference owned by the caller, or NULL after cn_fail. */
cn_tensor *cn_view_run(const cn_op_def *op, cn_tensor *x, const cn_attrs *a, const cn_meta *m,
                       cn_tensor *reuse);
/* The kernel step of cn_op_run, for the dispatcher and the program
 * executor: op `id` on dev's backend into out (NULL: allocated on dev with
 * m's dtype and shape), or the transfer of a cn_to. Returns out, or NULL
 * after cn_fail (out released): no kernel on that device, a device failure,
 * or the kernel's own error. */
cn_tensor *cn_kernel_run(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                         const cn_meta *m, cn_device dev, cn_tensor *out);

/* cn_op_run, and the result goes to the current scope (what public op
 * functions return). */
cn_tensor *cn_op_apply(cn_op_id op, cn_tensor *const *in, int nin, const cn_attrs *a);

/* Hooks the graph layer installs (src/graph): building a node on symbolic
 * inputs (or, given join, on concrete ones, in join's graph: autocast's
 * cast of a parameter), and recording an eager node for autograd. */
typedef cn_tensor *(*cn_symbolic_hook)(cn_op_id op, cn_tensor *const *in, int nin,
                                       const cn_attrs *a, const cn_meta *m,
                                       const cn_tensor *join);
typedef int (*cn_record_hook)(cn_op_id op, cn_tensor *const *in, int nin, const cn_attrs *a,
                              cn_tensor *out);
extern cn_symbolic_hook cn_graph_symbolic_hook;
extern cn_record_hook cn_graph_record_hook;

/* Forward mode: > 0 inside cn_dual_begin/end; ops then push tangents through
 * their jvp rules. Per thread. */
extern _Thread_local int cn_dual_level;
/* Tangents of other (ended) dual regions are ignored. */
extern _Thread_local uint32_t cn_dual_gen;
static inline cn_tensor *cn_tangent_of(const cn_tensor *t) {
    return t->tangent && t->tangent_gen == cn_dual_gen ? t->tangent : NULL;
}

/* Gradient helpers (grad_util.c), built from public ops (results go to the
 * current scope). */
/* g summed down to x's shape: over leading axes and where x has size 1;
 * where x has a size unknown until run against a known one of g, by the
 * sum_to op, which picks the axes at run time. */
cn_tensor *cn_sum_to(cn_tensor *g, cn_tensor *x);
/* g (the gradient of a reduction's output) broadcast back over the reduced
 * axes a->list of x: reshaped to keepdim form, then expanded to x's shape. */
cn_tensor *cn_unreduce(cn_tensor *g, const cn_tensor *x, const cn_attrs *a, bool keepdim);
/* t broadcast to like's shape; where like has sizes unknown until run
 * (static graphs), which expand cannot name, t plus zeros shaped like it. */
cn_tensor *cn_expand_like(cn_tensor *t, cn_tensor *like);
/* Zeros shaped like t (an op, so it also works on symbolic tensors). */
cn_tensor *cn_zeros_like_op(cn_tensor *t);

/* An LSTM layer direction as one lstm_seq op (rnn.c), for nn's LSTM and
 * ONNX's: gx [T, N, 4H] (the input projections, biases included), w_hh
 * [4H, H], the optional initial state h0, c0 [N, H] (a c0 without h0 gets
 * zeros for h0). Returns the hidden states of every step [T, N, H] and sets
 * *hn, *cn to the last step's (all views of the op's output). */
cn_tensor *cn_lstm_seq_run(cn_tensor *gx, cn_tensor *w_hh, cn_tensor *h0, cn_tensor *c0,
                           bool reverse, cn_tensor **hn, cn_tensor **cn);

/* Shared inference helpers (infer_util.c). */
/* NumPy broadcasting of n shapes into out (-1 dims are unknown). */
int cn_broadcast_shapes(const char *op, cn_tensor *const *in, int nin, cn_meta *out);
/* Canonicalise reduction axes in a->list (naxes 0: all), sorted, unique;
 * sets a->nlist. */
int cn_norm_axes(const char *op, cn_attrs *a, int ndim);
/* Output shape of reducing shape over the axes in a (keepdim in a->i[keep_slot]). */
void cn_reduce_shape(const cn_tensor *x, const cn_attrs *a, bool keepdim, cn_meta *out);

#endif
