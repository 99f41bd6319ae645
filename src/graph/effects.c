/* Graph effects (effects.h). */
#include "effects.h"

#include <stdlib.h>
#include <string.h>

int cn_graph_add_effect(cn_tensor *target, cn_tensor *value, cn_tensor *anchor) {
    char b1[160], b2[160];
    if (!target || !value || !anchor) return CN_EINVAL;
    if (cn_is_symbolic(target) || !cn_is_symbolic(value) || !cn_is_symbolic(anchor) ||
        value->graph != anchor->graph)
        return cn_failc(CN_EINVAL, "graph effect: the target must have data and the value and "
                                   "anchor be values of one static graph");
    if (target->dtype != value->dtype || target->ndim != value->ndim ||
        memcmp(target->shape, value->shape, sizeof(int64_t) * (size_t)target->ndim))
        return cn_failc(CN_EINVAL, "graph effect: value %s written into %s",
                        cn_shape_str(value, b1, sizeof b1), cn_shape_str(target, b2, sizeof b2));
    cn_graph *g = (cn_graph *)value->graph;
    if (g->neffects == g->ecap) {
        int nc = g->ecap ? 2 * g->ecap : 8;
        cn_graph_effect *ne = realloc(g->effects, sizeof *ne * (size_t)nc);
        if (!ne) return cn_failc(CN_ENOMEM, "graph effect: out of memory");
        g->effects = ne;
        g->ecap = nc;
    }
    target->flags |= CN_TF_STATE;
    g->effects[g->neffects++] =
        (cn_graph_effect){cn_retain(target), cn_retain(value), cn_retain(anchor)};
    return CN_OK;
}

void cn_graph_clear_effects(cn_graph *g) {
    /* The tensors released may hold the last references to g. */
    g->head.refcount++;
    cn_graph_effect *e = g->effects;
    int n = g->neffects;
    g->effects = NULL;
    g->neffects = g->ecap = 0;
    for (int i = 0; i < n; i++) {
        cn_release(e[i].target);
        cn_release(e[i].value);
        cn_release(e[i].anchor);
    }
    free(e);
    cn_graph_unref(g);
}

int cn_graph_effects_for(cn_graph *g, cn_tensor *const *outputs, int noutputs,
                         const cn_graph_effect ***out, int *n) {
    *out = NULL;
    *n = 0;
    if (!g->neffects) return 0;
    /* The IR builder already walks what the outputs depend on. */
    cn_ir *ir = ir_from_graph(outputs, noutputs);
    const cn_graph_effect **sel = malloc(sizeof *sel * (size_t)g->neffects);
    if (!ir || !sel) {
        ir_free(ir);
        free(sel);
        return -1;
    }
    for (int i = 0; i < g->neffects; i++) {
        bool reached = false;
        for (int v = 0; v < ir->nv && !reached; v++) reached = ir->v[v].t == g->effects[i].anchor;
        if (reached) sel[(*n)++] = &g->effects[i];
    }
    ir_free(ir);
    if (!*n) {
        free(sel);
        sel = NULL;
    }
    *out = sel;
    return 0;
}
