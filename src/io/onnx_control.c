/* ONNX control flow. If, on a condition known when the node is imported
 * (a constant, or data in a model that runs eagerly), becomes the nodes of
 * the branch it takes; Loop and Scan are unrolled, their bodies imported
 * once per iteration. A condition or trip count computed at run time in a
 * static graph makes the model run eagerly (onnx_needs_values): Chutney's
 * programs have no branches. */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX
#include <inttypes.h>
#include <stdlib.h>

/* The iterations all Loops and Scans together may run while a model loads (their
 * values then become a static graph, or fold), and in one run of a model
 * that runs eagerly: a file cannot make either run for ever. */
#define LOOP_MAX_AT_LOAD 4096
#define LOOP_MAX_IN_RUN (INT64_C(1) << 20)

/* Counts one more iteration of a Loop or Scan (all of them together, in a
 * load or a run, are bounded) and gives it, in a run, a node's element
 * budget of its own: 0, or < 0 after the message. */
static int next_iteration(onnx_ctx *c, const Onnx__NodeProto *n) {
    if (++c->loop_iters > (c->running ? LOOP_MAX_IN_RUN : LOOP_MAX_AT_LOAD)) {
        c->node = n;
        return c->running ? onnx_bad(c, "more than %" PRId64 " loop iterations in one run", LOOP_MAX_IN_RUN)
                          : onnx_unsup(c, "more than %d loop iterations while the model loads", LOOP_MAX_AT_LOAD);
    }
    if (c->running) cn_t_budget.left = c->budget;
    return 0;
}

/* The names a branch or body defines (its inputs, initializers and nodes'
 * outputs), released once it has run: a loop's next iteration defines them
 * again, and nothing outside may read them (an If's outputs are taken
 * before). */
static void drop_body(vmap *vals, const Onnx__GraphProto *b) {
    for (size_t i = 0; i < b->n_input; i++)
        if (b->input[i]->name) vmap_drop(vals, b->input[i]->name);
    for (size_t i = 0; i < b->n_initializer; i++)
        if (b->initializer[i]->name) vmap_drop(vals, b->initializer[i]->name);
    for (size_t i = 0; i < b->n_node; i++)
        for (size_t k = 0; k < b->node[i]->n_output; k++)
            if (b->node[i]->output[k] && *b->node[i]->output[k]) vmap_drop(vals, b->node[i]->output[k]);
}

/* A branch's or body's initializers and nodes imported in place: they
 * see every value defined so far. */
static int import_body(onnx_ctx *c, vmap *vals, const Onnx__GraphProto *b) {
    int rc = 0;
    for (size_t i = 0; i < b->n_initializer && rc == 0; i++) {
        const Onnx__TensorProto *tp = b->initializer[i];
        cn_tensor *t = onnx_tensor_from_proto(tp, c->base_dir);
        rc = !t ? (cn_last_error()[0] ? CN_EFORMAT : CN_ENOMEM) : vmap_put(vals, tp->name ? tp->name : "", t);
    }
    for (size_t i = 0; i < b->n_node && rc == 0; i++) rc = onnx_import_node(c, vals, b->node[i]);
    return rc;
}

/* A scan output: the n steps' values, in order or reversed, stacked on a
 * new axis `axis` (counted in the result's rank); NULL after a message. */
static cn_tensor *stack_steps(onnx_ctx *c, cn_tensor *const *steps, int64_t n, int64_t axis, bool reverse) {
    if (n == 0) return onnx_unsup(c, "a scan output of no iterations (its shape is unknown)"), NULL;
    if (n > ONNX_MAX_INPUTS) return onnx_unsup(c, "a scan output of more than %d iterations", ONNX_MAX_INPUTS), NULL;
    int ax = onnx_axis(c, axis, cn_ndim(steps[0]) + 1, "scan output axis");
    if (ax < 0) return NULL;
    cn_tensor **parts = malloc(sizeof *parts * (size_t)n);
    if (!parts) return cn_fail("onnx: out of memory");
    for (int64_t t = 0; t < n; t++) parts[t] = cn_unsqueeze(steps[reverse ? n - 1 - t : t], ax);
    cn_tensor *y = cn_concat(parts, (int)n, ax);
    free(parts);
    return y;
}

H(h_if) {
    UNUSED;
    cn_tensor *cond = in[0];
    if (cn_is_symbolic_tensor(cond))
        return onnx_needs_values(c, "input 'cond' is computed at run time (which branch runs, and so "
                                    "the outputs' shapes, depends on it)");
    if (cn_numel(cond) != 1) return onnx_bad(c, "cond has %" PRId64 " elements (one expected)", cn_numel(cond));
    bool take = cn_item(cond) != 0;
    const char *which = take ? "then_branch" : "else_branch";
    const Onnx__AttributeProto *a = onnx_attr(n, which);
    if (!a || !a->g) return onnx_bad(c, "attribute %s (a graph) is missing", which);
    const Onnx__GraphProto *b = a->g;
    if (b->n_output != n->n_output)
        return onnx_bad(c, "%s has %zu outputs for the node's %zu", which, b->n_output, n->n_output);
    vmap *vals = c->vals;
    /* The branch's nodes see every value defined so far. No patterns are
     * matched inside it (they count a value's readers over one graph). */
    const Onnx__GraphProto *outer = c->graph;
    c->graph = NULL;
    int rc = import_body(c, vals, b);
    c->graph = outer;
    c->node = n;
    c->opset_of_node = c->opset;
    c->vals = vals;
    /* The outputs in this node's scope before the branch's names go. */
    for (int k = 0; k < nout && rc == 0; k++) {
        const char *name = b->output[k]->name ? b->output[k]->name : "";
        cn_tensor *v = vmap_get(vals, name);
        if (!v) rc = onnx_bad(c, "%s's output '%s' is not computed by any of its nodes", which, name);
        else out[k] = cn_scope_add(cn_retain(v));
    }
    drop_body(vals, b);
    return rc;
}

/* Loop: the body run while the trip count and the condition allow, both
 * known when the node is imported (a computed one makes the model run
 * eagerly). Loop-carried values pass from one iteration to the next; scan
 * outputs are stacked on a new first axis. */
H(h_loop) {
    const Onnx__AttributeProto *a = onnx_attr(n, "body");
    if (!a || !a->g) return onnx_bad(c, "attribute body (a graph) is missing");
    const Onnx__GraphProto *b = a->g;
    if (nin < 2) return onnx_bad(c, "%d inputs (M and cond, each may be empty, then the loop-carried values)", nin);
    int nv = nin - 2;
    if ((int)b->n_input != nv + 2)
        return onnx_bad(c, "the body has %zu inputs for %d loop-carried values (expects 2 more)", b->n_input, nv);
    if ((int)b->n_output < nv + 1)
        return onnx_bad(c, "the body has %zu outputs for %d loop-carried values (expects at least 1 more)",
                        b->n_output, nv);
    int nscan = (int)b->n_output - 1 - nv;
    if (nout > nv + nscan) return onnx_bad(c, "%d outputs for %d loop-carried values and %d scan outputs", nout, nv, nscan);
    int64_t trips = INT64_MAX;
    bool cond = true;
    if (in[0]) {
        if (cn_is_symbolic_tensor(in[0]))
            return onnx_needs_values(c, "input 'M' (the trip count) is computed at run time");
        if (cn_numel(in[0]) != 1) return onnx_bad(c, "M has %" PRId64 " elements (one expected)", cn_numel(in[0]));
        double m = cn_item(in[0]);
        trips = m < 0 ? 0 : onnx_fits_i64(m) ? (int64_t)m : INT64_MAX;
    }
    if (in[1]) {
        if (cn_is_symbolic_tensor(in[1]))
            return onnx_needs_values(c, "input 'cond' is computed at run time (how many times the body runs)");
        if (cn_numel(in[1]) != 1) return onnx_bad(c, "cond has %" PRId64 " elements (one expected)", cn_numel(in[1]));
        cond = cn_item(in[1]) != 0;
    }
    vmap *vals = c->vals;
    const Onnx__GraphProto *outer = c->graph;
    c->graph = NULL; /* no patterns inside the body */
    cn_tensor **carried = calloc((size_t)nv + 1, sizeof *carried);
    cn_tensor ***scans = calloc((size_t)nscan + 1, sizeof *scans);
    int64_t nit = 0, cap_scans = 0;
    int rc = carried && scans ? 0 : cn_failc(CN_ENOMEM, "onnx: out of memory");
    for (int k = 0; k < nv && rc == 0; k++) carried[k] = cn_retain(in[2 + k]);
    for (; rc == 0 && nit < trips && cond; nit++) {
        if ((rc = next_iteration(c, n)) < 0) break;
        cn_scope_begin();
        rc = vmap_put(vals, b->input[0]->name ? b->input[0]->name : "", cn_scalar(CN_I64, (double)nit));
        if (rc == 0) rc = vmap_put(vals, b->input[1]->name ? b->input[1]->name : "", cn_scalar(CN_BOOL, cond));
        for (int k = 0; k < nv && rc == 0; k++)
            rc = vmap_put(vals, b->input[2 + k]->name ? b->input[2 + k]->name : "", carried[k]);
        if (rc == 0) rc = import_body(c, vals, b);
        cn_tensor *res[1 + 64 + 16] = {0};
        if (rc == 0 && b->n_output > sizeof res / sizeof *res) rc = onnx_unsup(c, "a body of more than 80 outputs");
        for (size_t k = 0; k < b->n_output && rc == 0; k++) {
            const char *name = b->output[k]->name ? b->output[k]->name : "";
            res[k] = vmap_get(vals, name);
            if (!res[k]) rc = onnx_bad(c, "the body's output '%s' is not computed by any of its nodes", name);
        }
        if (rc == 0) {
            c->node = n;
            if (cn_is_symbolic_tensor(res[0]))
                rc = onnx_needs_values(c, "the body's condition is computed at run time");
            else if (cn_numel(res[0]) != 1)
                rc = onnx_bad(c, "the body's condition has %" PRId64 " elements", cn_numel(res[0]));
            else
                cond = cn_item(res[0]) != 0;
        }
        if (rc == 0 && nscan > 0 && nit >= cap_scans) {
            cap_scans = cap_scans ? 2 * cap_scans : 16;
            for (int j = 0; j < nscan && rc == 0; j++) {
                cn_tensor **g = realloc(scans[j], sizeof *g * (size_t)cap_scans);
                if (!g) rc = cn_failc(CN_ENOMEM, "onnx: out of memory");
                else scans[j] = g;
            }
        }
        for (int k = 0; k < nv && rc == 0; k++) {
            cn_release(carried[k]);
            carried[k] = cn_retain(res[1 + k]);
        }
        for (int j = 0; j < nscan && rc == 0; j++) scans[j][nit] = cn_retain(res[1 + nv + j]);
        drop_body(vals, b);
        cn_scope_end();
        if (rc < 0) break;
    }
    c->graph = outer;
    c->node = n;
    c->opset_of_node = c->opset;
    c->vals = vals;
    for (int k = 0; k < nv && k < nout && rc == 0; k++) out[k] = cn_scope_add(cn_retain(carried[k]));
    for (int j = 0; j < nscan && nv + j < nout && rc == 0; j++)
        if (!(out[nv + j] = stack_steps(c, scans[j], nit, 0, false))) rc = CN_EINVAL;
    for (int k = 0; carried && k < nv; k++) cn_release(carried[k]);
    for (int j = 0; scans && j < nscan; j++) {
        for (int64_t i = 0; scans[j] && i < nit && i < cap_scans; i++) cn_release(scans[j][i]);
        free(scans[j]);
    }
    free(carried);
    free(scans);
    return rc;
}

/* Scan (opsets 9 and up): the body run once per position along each scan
 * input's scan axis (in either direction), the states passed from one
 * iteration to the next, the scan outputs stacked along their axes.
 * Unrolled like Loop; the length is a size, so no value is needed. */
H(h_scan) {
    if (c->opset_of_node < 9) return onnx_unsup(c, "opset 8's form (batch axis, sequence_lens)");
    const Onnx__AttributeProto *a = onnx_attr(n, "body");
    if (!a || !a->g) return onnx_bad(c, "attribute body (a graph) is missing");
    const Onnx__GraphProto *b = a->g;
    int64_t m = onnx_attr_int(n, "num_scan_inputs", -1);
    for (int k = 0; k < nin; k++)
        if (!in[k]) return onnx_bad(c, "input %d is missing", k);
    if (m < 1 || m > nin) return onnx_bad(c, "num_scan_inputs %" PRId64 " for %d inputs", m, nin);
    int ns = nin - (int)m, nk = (int)b->n_output - ns;
    if ((int)b->n_input != nin) return onnx_bad(c, "the body has %zu inputs for the node's %d", b->n_input, nin);
    if (nk < 0 || (int)n->n_output != ns + nk)
        return onnx_bad(c, "the body has %zu outputs for %d states and the node's %zu outputs", b->n_output, ns, n->n_output);
    if (nk > 16 || m > 64) return onnx_unsup(c, "more than 64 scan inputs or 16 scan outputs");
    int64_t in_ax[64], in_dir[64], out_ax[16], out_dir[16];
    for (int k = 0; k < 64; k++) in_ax[k] = 0, in_dir[k] = 0;
    for (int k = 0; k < 16; k++) out_ax[k] = 0, out_dir[k] = 0;
    if (onnx_attr_ints(n, "scan_input_axes", in_ax, 64) > (int)m || onnx_attr_ints(n, "scan_input_directions", in_dir, 64) > (int)m ||
        onnx_attr_ints(n, "scan_output_axes", out_ax, 16) > nk || onnx_attr_ints(n, "scan_output_directions", out_dir, 16) > nk)
        return onnx_bad(c, "more scan axes or directions than scan inputs or outputs");
    int64_t len = -1;
    for (int k = 0; k < m; k++) {
        cn_tensor *x = in[ns + k];
        int ax = onnx_axis(c, in_ax[k], cn_ndim(x), "scan_input_axes");
        if (ax < 0) return CN_EINVAL;
        in_ax[k] = ax;
        if (cn_dim(x, ax) < 0) return onnx_unsup(c, "a scan axis of unknown size");
        if (len >= 0 && cn_dim(x, ax) != len) return onnx_bad(c, "scan inputs of %" PRId64 " and %" PRId64 " steps", len, cn_dim(x, ax));
        len = cn_dim(x, ax);
    }
    vmap *vals = c->vals;
    const Onnx__GraphProto *outer = c->graph;
    c->graph = NULL;
    cn_tensor *state[64] = {0}, **steps = NULL;
    if (ns > 64) return onnx_unsup(c, "more than 64 states");
    int rc = 0;
    if (nk > 0 && len > 0 && !(steps = calloc((size_t)(nk * len), sizeof *steps)))
        rc = cn_failc(CN_ENOMEM, "onnx: out of memory");
    for (int k = 0; k < ns; k++) state[k] = cn_retain(in[k]);
    for (int64_t t = 0; rc == 0 && t < len; t++) {
        if ((rc = next_iteration(c, n)) < 0) break;
        cn_scope_begin();
        for (int k = 0; k < ns && rc == 0; k++) rc = vmap_put(vals, b->input[k]->name ? b->input[k]->name : "", state[k]);
        for (int k = 0; k < m && rc == 0; k++) {
            cn_tensor *x = in[ns + k];
            int64_t at = in_dir[k] ? len - 1 - t : t;
            cn_tensor *sl = cn_squeeze(cn_narrow(x, (int)in_ax[k], at, 1), (int)in_ax[k]);
            rc = sl ? vmap_put(vals, b->input[ns + k]->name ? b->input[ns + k]->name : "", sl) : CN_EINVAL;
        }
        if (rc == 0) rc = import_body(c, vals, b);
        for (int k = 0; k < ns + nk && rc == 0; k++) {
            const char *name = b->output[k]->name ? b->output[k]->name : "";
            cn_tensor *v = vmap_get(vals, name);
            if (!v) {
                rc = onnx_bad(c, "the body's output '%s' is not computed by any of its nodes", name);
                break;
            }
            if (k < ns) {
                cn_release(state[k]);
                state[k] = cn_retain(v);
            } else {
                steps[(k - ns) * len + t] = cn_retain(v);
            }
        }
        drop_body(vals, b);
        cn_scope_end();
    }
    c->graph = outer;
    c->node = n;
    c->opset_of_node = c->opset;
    c->vals = vals;
    for (int k = 0; k < ns && rc == 0; k++) out[k] = cn_scope_add(cn_retain(state[k]));
    for (int j = 0; j < nk && rc == 0; j++)
        if (!(out[ns + j] = stack_steps(c, steps ? steps + j * len : NULL, len, out_ax[j], out_dir[j] != 0))) rc = CN_EINVAL;
    for (int k = 0; k < ns; k++) cn_release(state[k]);
    for (int64_t i = 0; steps && i < nk * len; i++) cn_release(steps[i]);
    free(steps);
    return rc;
}

const onnx_op_entry cn_onnx_ops_control[] = {
    {"Scan", h_scan, "body,num_scan_inputs,scan_input_axes,scan_input_directions,scan_output_axes,scan_output_directions",
     0, ONNX_MAX_INPUTS, 16, "opsets 9 and up; unrolled"},
    /* M and cond may both be left out, by empty names: counted in the handler */
    {"Loop", h_loop, "body", 0, ONNX_MAX_INPUTS, 16,
     "trip count and condition known at load time, or the model runs eagerly; unrolled"},
    {"If", h_if, "then_branch,else_branch", 1, 1, 16,
     "on a computed condition, the model runs eagerly"},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

#endif /* CN_HAVE_ONNX */
