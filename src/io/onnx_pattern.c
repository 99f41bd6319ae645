/* Helpers for the importer's patterns over several nodes (onnx_attention.c,
 * onnx_gelu.c): which node wrote a value, who reads it, constants and
 * scalings on the way. A pattern covers nodes that were already imported as
 * ordinary ops; it may replace them only where nothing else reads their
 * values, so that compiling the graph drops them. */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX

/* The node before the current one that writes name, or NULL. */
const Onnx__NodeProto *onnx_producer(const onnx_ctx *c, const char *name) {
    const Onnx__GraphProto *g = c->graph;
    for (int i = c->node_index - 1; i >= 0; i--) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_output; k++)
            if (n->output[k] && !strcmp(n->output[k], name))
                return n->domain && *n->domain && strcmp(n->domain, "ai.onnx") ? NULL : n;
    }
    return NULL;
}

/* How many node inputs and graph outputs read name; a subgraph (If, Loop)
 * may read any outer value, so a graph with one counts as "many". */
int onnx_readers(const onnx_ctx *c, const char *name) {
    const Onnx__GraphProto *g = c->graph;
    int k = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t j = 0; j < n->n_input; j++) k += n->input[j] && !strcmp(n->input[j], name);
        for (size_t j = 0; j < n->n_attribute; j++)
            if (n->attribute[j]->g || n->attribute[j]->n_graphs) return 1 << 20;
    }
    for (size_t i = 0; i < g->n_output; i++) k += g->output[i]->name && !strcmp(g->output[i]->name, name);
    return k;
}

bool onnx_is_op(const Onnx__NodeProto *n, const char *op) {
    return n && n->op_type && !strcmp(n->op_type, op);
}

/* A value read only by the pattern and made by op (NULL otherwise). */
const Onnx__NodeProto *onnx_inner(const onnx_ctx *c, const char *name, const char *op) {
    const Onnx__NodeProto *p = onnx_producer(c, name);
    return onnx_is_op(p, op) && onnx_readers(c, name) == 1 ? p : NULL;
}

/* A constant of one element that does not raise x's rank, as a double. */
bool onnx_pattern_scalar(const vmap *vals, const char *name, const cn_tensor *x, double *v) {
    const cn_tensor *t = name ? vmap_get(vals, name) : NULL;
    if (!t || cn_is_symbolic_tensor(t) || cn_numel(t) != 1 || cn_ndim(t) > cn_ndim(x) ||
        !cn_dtype_is_float(cn_tensor_dtype(t)))
        return false;
    *v = cn_item(t);
    return true;
}

/* Follows name back through Mul and Div by constants read only here,
 * multiplying *scale; returns the value they were applied to. */
const char *onnx_unscale(const onnx_ctx *c, const vmap *vals, const char *name, double *scale) {
    for (;;) {
        const Onnx__NodeProto *p = onnx_inner(c, name, "Mul");
        if (!p) p = onnx_inner(c, name, "Div");
        if (!p || p->n_input != 2) return name;
        /* The constant is checked against the other operand: against the
         * product, which has the broadcast rank already, a constant that
         * raises it would pass. */
        const cn_tensor *x0 = vmap_get(vals, p->input[0]), *x1 = vmap_get(vals, p->input[1]);
        double v;
        if (onnx_is_op(p, "Mul") && x0 && onnx_pattern_scalar(vals, p->input[1], x0, &v)) name = p->input[0];
        else if (onnx_is_op(p, "Mul") && x1 && onnx_pattern_scalar(vals, p->input[0], x1, &v)) name = p->input[1];
        else if (onnx_is_op(p, "Div") && x0 && onnx_pattern_scalar(vals, p->input[1], x0, &v) && v != 0) {
            name = p->input[0];
            v = 1 / v;
        } else
            return name;
        *scale *= v;
    }
}

#endif
