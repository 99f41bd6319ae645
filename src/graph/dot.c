/* The program IR as a Graphviz DOT digraph: inputs as ellipses, constants
 * as small grey boxes (one-element constants print their value), each step
 * as a box with its op and result shape; fused steps list their ops. When
 * the program has steps off the CPU or transfers, each step also shows its
 * device (fallbacks to the CPU in salmon), and transfer steps are light blue
 * parallelograms "to DEVICE". One rank's part of a program split over
 * ranks names the rank with each device ("rank:1/cpu:0"), its send and
 * recv steps their peer and tag, and outputs of other ranks are dashed. */
#include "ir.h"

#include <stdlib.h>

static void label_value(const cn_ir *ir, int32_t id, FILE *f) {
    const cn_tensor *t = ir->v[id].t;
    char b[160];
    if (ir->v[id].kind == IRV_INPUT) {
        fprintf(f, "  v%d [shape=ellipse, label=\"%s\\n%s\"];\n", id, cn_get_name(t),
                cn_shape_str(t, b, sizeof b));
    } else if (cn_shape_numel(t->ndim, t->shape) == 1 && cn_t_on_cpu(t)) {
        fprintf(f, "  v%d [shape=box, style=filled, fillcolor=grey90, fontsize=10, label=\"%g\"];\n",
                id, cn_load_f64(cn_t_ptr(t), (cn_dtype)t->dtype, 0));
    } else {
        const char *name = cn_get_name(t);
        fprintf(f, "  v%d [shape=box, style=filled, fillcolor=grey90, fontsize=10, label=\"%s%s%s%s%s\"];\n",
                id, name, *name ? "\\n" : "", cn_shape_str(t, b, sizeof b),
                cn_t_on_cpu(t) ? "" : "\\n@", cn_t_on_cpu(t) ? "" : cn_dev_name(cn_t_device(t)));
    }
}

int ir_write_dot(const cn_ir *ir, FILE *f, const char *const *labels) {
    char b[160];
    uint8_t *shown = calloc((size_t)(ir->nv ? ir->nv : 1), 1);
    if (!shown) return cn_failc(CN_ENOMEM, "write_dot: out of memory");
    fprintf(f, "digraph program {\n  rankdir=TB;\n  node [fontname=\"Helvetica\"];\n");
    bool devices = ir_shows_devices(ir);
    for (int s = 0; s < ir->ns; s++) {
        const ir_step *st = &ir->s[s];
        if (st->kind == IRS_DEAD) continue;
        const cn_tensor *ot = ir->v[st->out].t;
        if (st->kind == IRS_OP && st->op == CN_OP_to) {
            fprintf(f, "  v%d [shape=parallelogram, style=filled, fillcolor=lightblue, "
                       "label=\"to %s\\n%s\"];\n",
                    st->out, ir_dev_name(ir, st->dev), cn_shape_str(ot, b, sizeof b));
            goto edges;
        }
        fprintf(f, "  v%d [shape=box, ", st->out);
        if (st->fallback && st->kind != IRS_FUSED) fprintf(f, "style=filled, fillcolor=salmon, ");
        if (st->kind == IRS_FUSED) {
            fprintf(f, "style=filled, fillcolor=%s, label=\"fused",
                    st->fallback ? "salmon" : "lightyellow");
            if (st->op != CN_OP_COUNT) fprintf(f, " %s +", cn_ops[st->op]->name);
            for (int k = 0; k < st->fused->ninstr; k++)
                fprintf(f, "%s%s", k % 4 ? " " : "\\n", cn_ops[st->fused->instr[k].op]->name);
        } else {
            fprintf(f, "label=\"%s", cn_ops[st->op]->name);
        }
        fprintf(f, "\\n%s", cn_shape_str(ot, b, sizeof b));
        if (devices) fprintf(f, "\\n@%s%s", ir_dev_name(ir, st->dev), st->fallback ? " (fallback)" : "");
        if (st->kind == IRS_OP && (st->op == CN_OP_send || st->op == CN_OP_recv))
            fprintf(f, "\\n%s rank %d, tag %d", st->op == CN_OP_send ? "to" : "from",
                    (int)st->attrs.i[0], (int)st->attrs.i[1]);
        fprintf(f, "\"];\n");
    edges:
        for (int i = 0; i < st->nin; i++) {
            int32_t v = st->in[i];
            if (ir->v[v].kind != IRV_STEP && !shown[v]) {
                label_value(ir, v, f);
                shown[v] = 1;
            }
            fprintf(f, "  v%d -> v%d;\n", v, st->out);
        }
    }
    for (int o = 0; o < ir->noutputs; o++) {
        int32_t v = ir->outputs[o];
        if (ir->out_remote && ir->out_remote[o]) { /* computed on another rank */
            fprintf(f, "  out%d [shape=ellipse, style=dashed, label=\"output %d\\non rank %d\"];\n",
                    o, o, (int)ir->out_rank[o]);
            continue;
        }
        if (ir->v[v].kind != IRV_STEP && !shown[v]) {
            label_value(ir, v, f);
            shown[v] = 1;
        }
        const char *l = labels && labels[o] ? labels[o] : "";
        fprintf(f, "  out%d [shape=ellipse, style=bold, label=\"output %d%s%s\"];\n  v%d -> out%d;\n",
                o, o, *l ? "\\n" : "", l, v, o);
    }
    fprintf(f, "}\n");
    free(shown);
    return ferror(f) ? cn_failc(CN_EIO, "write_dot: write error") : 0;
}
