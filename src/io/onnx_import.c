/* ONNX import: a ModelProto (parsed by the protobuf-c reader generated at
 * build time) into a static graph. Initializers become constant tensors,
 * graph inputs placeholders, and each node is handed to its family's handler
 * (onnx_ops_*.c), which applies public ops: on constants they compute at
 * once (folding), on placeholders they build graph nodes. Without protobuf-c
 * every entry point fails with the packages to install. */
#include "onnx_internal.h"

#include <inttypes.h>
#include <stdlib.h>

#ifdef CN_HAVE_ONNX
#include "fileio.h"

#include <errno.h>

struct cn_onnx_model {
    cn_graph *g;
    int opset;
    int nin, nout;
    char **in_names, **out_names;
    cn_tensor **inputs;  /* placeholders, retained */
    cn_tensor **outputs; /* retained */
    cn_program *prog;    /* compiled on the first run */
    int64_t nparams;
    int64_t nweights; /* the floating-point initializers' elements */
    int nnodes;
    char **node_ops;
    /* A model whose shapes depend on values (onnx_needs_values) runs
     * eagerly: every run walks the kept ModelProto's nodes on the inputs'
     * data. NULL for a static model. */
    char *eager_reason;
    Onnx__ModelProto *mp;
    char *base_dir;
    char **const_names; /* initializers and inputs bound at load */
    cn_tensor **consts; /* retained */
    int nconsts;
    /* drops[i]: the values (names into mp) node i reads last, released
     * after it runs, so that a run holds what is live, not every value
     * of the graph; NULL-terminated lists, one allocation. */
    const char ***drops;
    /* The nodes before the first that needs values (eager_from) were
     * imported into the graph: what later nodes read of theirs is one
     * program (compiled on the first run; prefix_failed if it could not
     * be) or constants they folded. A run whose inputs have the load's
     * shapes runs that program, then walks the nodes from eager_from. */
    size_t eager_from;
    int nprefix, nfolded;
    char **prefix_names, **folded_names;
    cn_tensor **prefix_vals, **folded; /* retained */
    cn_program *prefix;
    bool prefix_failed;
};

/* ---- the value map (onnx_internal.h) ---- */

static uint64_t str_hash(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
    return h;
}

cn_tensor *vmap_get(const vmap *m, const char *k) {
    if (!m->cap) return NULL;
    for (size_t h = str_hash(k) & (m->cap - 1);; h = (h + 1) & (m->cap - 1)) {
        if (!m->keys[h]) return NULL;
        if (!strcmp(m->keys[h], k)) return m->vals[h];
    }
}

int vmap_put(vmap *m, const char *k, cn_tensor *v) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 256;
        char **nk = calloc(nc, sizeof *nk);
        cn_tensor **nv = calloc(nc, sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return cn_failc(CN_ENOMEM, "onnx: out of memory");
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i]) continue;
            size_t h = str_hash(m->keys[i]) & (nc - 1);
            while (nk[h]) h = (h + 1) & (nc - 1);
            nk[h] = m->keys[i];
            nv[h] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = nk;
        m->vals = nv;
        m->cap = nc;
    }
    size_t h = str_hash(k) & (m->cap - 1);
    while (m->keys[h] && strcmp(m->keys[h], k)) h = (h + 1) & (m->cap - 1);
    if (m->keys[h]) { /* SSA says once, but a model may rebind: the last wins */
        cn_tensor *old = m->vals[h];
        m->vals[h] = cn_retain(v); /* before the release: v may be old */
        cn_release(old);
        return 0;
    }
    m->keys[h] = strdup(k);
    if (!m->keys[h]) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    m->vals[h] = cn_retain(v);
    m->n++;
    return 0;
}

void vmap_drop(vmap *m, const char *k) {
    if (!m->cap) return;
    for (size_t h = str_hash(k) & (m->cap - 1); m->keys[h]; h = (h + 1) & (m->cap - 1))
        if (!strcmp(m->keys[h], k)) {
            cn_release(m->vals[h]);
            m->vals[h] = NULL;
            return;
        }
}

void vmap_free(vmap *m) {
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i]) {
            free(m->keys[i]);
            cn_release(m->vals[i]);
        }
    free(m->keys);
    free(m->vals);
}

/* ---- the op table ---- */

const onnx_op_entry *const *cn_onnx_families(void) {
    static const onnx_op_entry *const f[] = {
        cn_onnx_ops_elementwise, cn_onnx_ops_shape, cn_onnx_ops_reduce, cn_onnx_ops_index,
        cn_onnx_ops_conv,        cn_onnx_ops_nn,    cn_onnx_ops_rnn,    cn_onnx_ops_quant,
        cn_onnx_ops_control,     cn_onnx_ops_detect, cn_onnx_ops_grid, cn_onnx_ops_spectral, NULL};
    return f;
}

static bool default_domain(const char *d) { return !d || !*d || !strcmp(d, "ai.onnx"); }

static bool ms_domain(const char *d) { return d && !strcmp(d, "com.microsoft"); }

const onnx_op_entry *onnx_find_op(const char *domain, const char *name) {
    if (!name) return NULL;
    if (ms_domain(domain)) {
        size_t pre = strlen("com.microsoft.");
        for (const onnx_op_entry *e = cn_onnx_ops_ms; e->name; e++)
            if (!strcmp(e->name + pre, name)) return e;
        return NULL;
    }
    if (!default_domain(domain)) return NULL;
    for (const onnx_op_entry *const *f = cn_onnx_families(); *f; f++)
        for (const onnx_op_entry *e = *f; e->name; e++)
            if (!strcmp(e->name, name)) return e;
    return NULL;
}

static bool attr_known(const char *list, const char *name) {
    size_t k = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == k && !memcmp(p, name, k)) return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

/* ---- loading ---- */

/* ONNX graphs are in SSA form: a value has one producer. A second one
 * (another node, or a node writing over an initializer or a graph input)
 * would silently replace the value every earlier reader was given. */
static int check_outputs_new(onnx_ctx *c, const vmap *vals, const Onnx__NodeProto *n) {
    for (size_t i = 0; i < n->n_output; i++) {
        const char *name = n->output[i];
        if (!name || !*name) continue;
        if (vmap_get(vals, name))
            return onnx_bad(c, "output '%s' is already defined (by an earlier node, an initializer "
                               "or a graph input); a value can have only one producer",
                            name);
        for (size_t j = 0; j < i; j++)
            if (n->output[j] && !strcmp(n->output[j], name))
                return onnx_bad(c, "output '%s' is listed twice", name);
    }
    return 0;
}

int onnx_check_node(onnx_ctx *c, const Onnx__NodeProto *n) {
    const Onnx__NodeProto *saved = c->node;
    c->node = n;
    c->opset_of_node = c->opset;
    const char *op = n->op_type ? n->op_type : "";
    int rc = 0;
    const onnx_op_entry *e = onnx_find_op(n->domain, op);
    if (!default_domain(n->domain) && !ms_domain(n->domain))
        rc = cn_failc(CN_EUNSUPPORTED,
                      "unsupported: %s (domain %s): only the default domain and com.microsoft's "
                      "quantized ops are supported",
                      op, n->domain);
    else if (!e)
        rc = onnx_unsup(c, ms_domain(n->domain) ? "no importer for this com.microsoft op" : "no importer for this op");
    for (size_t i = 0; rc == 0 && i < n->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->attribute[i];
        if (!a->name || !attr_known(e->attrs, a->name))
            rc = onnx_unsup(c, "attribute '%s' is not supported", a->name ? a->name : "");
        else if (a->ref_attr_name && *a->ref_attr_name)
            rc = onnx_unsup(c, "attribute references are not supported");
        else if (a->g)
            for (size_t k = 0; rc == 0 && k < a->g->n_node; k++) rc = onnx_check_node(c, a->g->node[k]);
    }
    if (rc == 0) c->node = saved;
    return rc;
}

int onnx_import_node(onnx_ctx *c, vmap *vals, const Onnx__NodeProto *n) {
    if (onnx_check_node(c, n) < 0) return CN_EUNSUPPORTED;
    c->node = n;
    c->opset_of_node = c->opset;
    c->vals = vals;
    const onnx_op_entry *e = onnx_find_op(n->domain, n->op_type);
    int nin = (int)n->n_input, nout = (int)n->n_output;
    if (nin < e->min_in || nin > e->max_in)
        return onnx_bad(c, "%d inputs (expects %d to %d)", nin, e->min_in, e->max_in);
    if (nout < 1) return onnx_bad(c, "no outputs");
    if (check_outputs_new(c, vals, n) < 0) return CN_EINVAL;
    for (int i = e->max_out; i < nout; i++)
        if (n->output[i] && *n->output[i])
            return onnx_unsup(c, "output %d ('%s') is not supported", i, n->output[i]);
    if (nout > e->max_out) nout = e->max_out;
    /* Concat, Sum and the like may have thousands of inputs (a detector's
     * per-class boxes). */
    cn_tensor *in_few[64] = {0}, *out[16] = {0};
    if (nin > ONNX_MAX_INPUTS || nout > 16) return onnx_unsup(c, "too many inputs or outputs");
    cn_tensor **in = nin > 64 ? calloc((size_t)nin, sizeof *in) : in_few;
    if (!in) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    int rc = 0;
    for (int i = 0; i < nin && rc == 0; i++) {
        const char *name = n->input[i];
        if (!name || !*name) continue;
        in[i] = vmap_get(vals, name);
        if (!in[i]) rc = onnx_bad(c, "input '%s' is not defined before the node", name);
    }
    for (int i = 0; i < e->min_in && rc == 0; i++)
        if (!in[i]) rc = onnx_bad(c, "required input %d is missing", i);
    if (rc < 0) {
        if (in != in_few) free(in);
        return rc;
    }
    cn_scope_begin();
    cn_clear_error();
    cn_t_budget.exceeded = false;
    rc = onnx_fuse_attention(c, vals, n, out);
    if (rc == 0) rc = onnx_fuse_gelu(c, vals, n, out);
    rc = rc > 0 ? 0 : e->fn(c, n, in, nin, out, nout);
    if (rc < 0 && cn_t_budget.exceeded) rc = onnx_budget_exceeded(c);
    for (int i = 0; rc >= 0 && i < nout; i++) {
        const char *name = n->output[i];
        if (!name || !*name) continue;
        if (!out[i]) rc = cn_last_error()[0] ? CN_EINVAL : onnx_unsup(c, "output %d is not supported", i);
        else rc = vmap_put(vals, name, out[i]);
    }
    if (rc < 0 && !strstr(cn_last_error(), "(opset ")) {
        /* An op or a tensor refused what the handler gave it: name the node,
         * keeping "unsupported: " first for what is not supported. */
        char msg[900];
        const char *e0 = cn_last_error();
        bool unsup = rc == CN_EUNSUPPORTED || !strncmp(e0, "unsupported: ", 13);
        snprintf(msg, sizeof msg, "%s", !strncmp(e0, "unsupported: ", 13) ? e0 + 13 : e0);
        rc = unsup ? onnx_unsup(c, "%s", msg) : onnx_bad(c, "%s", msg);
    }
    cn_scope_end();
    if (in != in_few) free(in);
    return rc;
}

/* Declared dtype and shape of a graph input/output. */
int onnx_value_type(const Onnx__ValueInfoProto *v, int *dt, int *ndim, int64_t *shape) {
    const char *name = v->name ? v->name : "";
    const Onnx__TypeProto *t = v->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type)
        return cn_failc(CN_EUNSUPPORTED, "unsupported: graph value '%s' is not a tensor", name);
    *dt = onnx_dtype(t->tensor_type->elem_type);
    if (*dt < 0)
        return cn_failc(CN_EUNSUPPORTED, "unsupported: graph value '%s' has dtype %s", name,
                        onnx_dtype_name(t->tensor_type->elem_type));
    const Onnx__TensorShapeProto *s = t->tensor_type->shape;
    *ndim = s ? (int)s->n_dim : 0;
    if (!s) return cn_failc(CN_EUNSUPPORTED, "unsupported: graph input '%s' has no shape", name);
    if (s->n_dim > CN_MAX_DIMS)
        return cn_failc(CN_EUNSUPPORTED, "unsupported: graph value '%s' has rank %zu (at most %d)",
                        name, s->n_dim, CN_MAX_DIMS);
    for (size_t i = 0; i < s->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = s->dim[i];
        shape[i] = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                           d->dim_value >= 0
                       ? d->dim_value
                       : -1;
    }
    return 0;
}

/* Does entry k of a by-name-or-position list (name NULL: position k) name
 * the input called name at position pos? */
static bool names_input(const char *entry, int k, const char *name, int pos) {
    return entry ? strcmp(entry, name) == 0 : k == pos;
}

static int add_inputs(onnx_ctx *c, cn_onnx_model *m, vmap *vals, const Onnx__GraphProto *g,
                      const cn_onnx_load_opts *opts) {
    m->in_names = calloc(g->n_input + 1, sizeof *m->in_names);
    m->inputs = calloc(g->n_input + 1, sizeof *m->inputs);
    if (!m->in_names || !m->inputs) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    int nshapes = opts ? opts->nshapes : 0, nvalues = opts ? opts->nvalues : 0, pos = 0;
    if ((nshapes > 0 && !opts->shapes) || (nvalues > 0 && !opts->values) || nshapes < 0 || nvalues < 0)
        return cn_failc(CN_EINVAL, "onnx: bad load options (a count without its list)");
    bool *hit = calloc((size_t)(nshapes + nvalues) + 1, 1);
    if (!hit) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    int rc = 0;
    for (size_t i = 0; i < g->n_input && rc == 0; i++, pos++) {
        const Onnx__ValueInfoProto *v = g->input[i];
        const char *name = v->name ? v->name : "";
        if (vmap_get(vals, name)) { /* an initializer: a constant, not an input */
            pos--;
            continue;
        }
        int dt = 0, ndim = 0;
        int64_t shape[CN_MAX_DIMS];
        if ((rc = onnx_value_type(v, &dt, &ndim, shape)) < 0) break;
        for (int k = 0; k < nshapes && rc == 0; k++) {
            const cn_onnx_input_shape *s = &opts->shapes[k];
            if (!names_input(s->name, k, name, pos)) continue;
            hit[k] = true;
            if (s->ndim != ndim)
                rc = cn_failc(CN_EINVAL, "onnx: input '%s' has rank %d, the shape given has %d",
                                name, ndim, s->ndim);
            for (int d = 0; d < ndim && rc == 0; d++)
                if (s->shape[d] < 0 || (shape[d] >= 0 && shape[d] != s->shape[d])) {
                    char b1[128], b2[128];
                    rc = cn_failc(CN_EINVAL, "onnx: input '%s' is %s, the shape given is %s", name,
                                  cn_fmt_shape(b1, sizeof b1, ndim, shape),
                                  cn_fmt_shape(b2, sizeof b2, ndim, s->shape));
                }
            if (rc == 0) memcpy(shape, s->shape, sizeof(int64_t) * (size_t)ndim);
        }
        if (rc < 0) break;
        for (int d = 0; opts && opts->unknown_size > 0 && d < ndim; d++)
            if (shape[d] < 0) shape[d] = opts->unknown_size;
        cn_tensor *bound = NULL;
        for (int k = 0; k < nvalues && rc == 0; k++) {
            const cn_onnx_input_value *iv = &opts->values[k];
            if (!names_input(iv->name, k, name, pos)) continue;
            hit[nshapes + k] = true;
            if (!iv->value) continue; /* a hole in a positional list: stays an input */
            bound = iv->value;
            char b1[128], b2[160];
            bool ok = bound && !cn_is_symbolic_tensor(bound) && cn_tensor_dtype(bound) == (cn_dtype)dt &&
                      cn_ndim(bound) == ndim;
            for (int d = 0; ok && d < ndim; d++) ok = shape[d] < 0 || shape[d] == cn_dim(bound, d);
            if (!ok)
                rc = cn_failc(CN_EINVAL, "onnx: input '%s' is %s %s, the value given is %s", name,
                                cn_dtype_name((cn_dtype)dt), cn_fmt_shape(b1, sizeof b1, ndim, shape),
                                bound ? cn_shape_str(bound, b2, sizeof b2) : "NULL");
        }
        if (rc < 0) break;
        cn_scope_begin();
        if (bound) { /* a private copy: the graph keeps it as a constant */
            cn_tensor *t = cn_clone(bound);
            rc = t ? vmap_put(vals, name, t) : CN_ENOMEM;
            cn_scope_end();
            continue;
        }
        cn_tensor *ph = cn_placeholder(c->g, name, (cn_dtype)dt, ndim, shape);
        rc = ph ? vmap_put(vals, name, ph) : CN_EINVAL;
        if (rc == 0) {
            m->inputs[m->nin] = cn_retain(ph);
            m->in_names[m->nin] = strdup(name);
            if (!m->in_names[m->nin++]) rc = cn_failc(CN_ENOMEM, "onnx: out of memory");
        }
        cn_scope_end();
    }
    for (int k = 0; k < nshapes + nvalues && rc == 0; k++) {
        if (hit[k]) continue;
        const char *nm = k < nshapes ? opts->shapes[k].name : opts->values[k - nshapes].name;
        const char *what = k < nshapes ? "shape" : "value";
        if (nm) rc = cn_failc(CN_EINVAL, "onnx: a %s is given for '%s', which is not an input of the model", what, nm);
        else rc = cn_failc(CN_EINVAL, "onnx: a %s is given for input %d by position; the model has %d inputs",
                           what, k < nshapes ? k : k - nshapes, pos);
    }
    free(hit);
    return rc;
}

/* Every tensor made while the nodes are imported (folded constants,
 * ConstantOfShape, Expand, Tile, Range, the copies handlers make) draws on
 * one budget: the limit plus the initializers' own elements, so that the
 * load of a model computes at most about as much as its file holds, and a
 * file of a few bytes cannot make it compute gigabytes. */
static int start_budget(onnx_ctx *c, const cn_onnx_model *m) {
    uint64_t lim;
    if (cn_env_limit(ONNX_MAX_ELEMENTS_ENV, (uint64_t)ONNX_MAX_ELEMENTS, &lim, "onnx") < 0)
        return CN_EINVAL;
    int64_t headroom = INT64_MAX - m->nparams;
    c->budget = lim >= (uint64_t)headroom ? -1 : (int64_t)lim + m->nparams;
    cn_t_budget = (cn_elem_budget){c->budget, false};
    return 0;
}

int onnx_model_opset(const Onnx__ModelProto *mp) {
    int opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (default_domain(o->domain) && o->has_version) opset = (int)o->version;
    }
    if (opset < 0 && mp->has_ir_version && mp->ir_version < 3) opset = 1;
    if (opset < 0) opset = 0; /* only other domains: their nodes are refused one by one */
    if (opset > 23)
        return cn_failc(CN_EUNSUPPORTED, "unsupported: opset %d (opsets up to 23 are supported)", opset);
    return opset;
}

typedef struct {
    const char *name;
    size_t node;
} name_use;

static int by_name_then_node(const void *a, const void *b) {
    const name_use *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->node > y->node) - (x->node < y->node);
}

/* The reads of node n and its subgraphs (their nodes' inputs, and their
 * outputs, which may name an outer value), as node `at`'s, into u (NULL:
 * only counted). */
static size_t reads_of(const Onnx__NodeProto *n, size_t at, name_use *u, size_t k) {
    for (size_t i = 0; i < n->n_input; i++)
        if (n->input[i] && *n->input[i]) {
            if (u) u[k] = (name_use){n->input[i], at};
            k++;
        }
    for (size_t a = 0; a < n->n_attribute; a++) {
        const Onnx__GraphProto *g = n->attribute[a]->g;
        if (!g) continue;
        for (size_t j = 0; j < g->n_node; j++) k = reads_of(g->node[j], at, u, k);
        for (size_t j = 0; j < g->n_output; j++)
            if (g->output[j]->name && *g->output[j]->name) {
                if (u) u[k] = (name_use){g->output[j]->name, at};
                k++;
            }
    }
    return k;
}

/* m->drops for the graph g: each value after its last reader, except the
 * graph's outputs. */
static int plan_drops(cn_onnx_model *m, const Onnx__GraphProto *g) {
    size_t nu = 0;
    for (size_t i = 0; i < g->n_node; i++) nu = reads_of(g->node[i], i, NULL, nu);
    name_use *u = malloc(sizeof *u * (nu + 1));
    if (!u) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    nu = 0;
    for (size_t i = 0; i < g->n_node; i++) nu = reads_of(g->node[i], i, u, nu);
    qsort(u, nu, sizeof *u, by_name_then_node);
    /* The last use of each name, outputs left out, grouped by node. */
    size_t *count = calloc(g->n_node + 1, sizeof *count), nlast = 0;
    for (size_t i = 0; count && i < nu; i++) {
        if (i + 1 < nu && !strcmp(u[i].name, u[i + 1].name)) continue;
        bool out = false;
        for (size_t o = 0; o < g->n_output && !out; o++) out = g->output[o]->name && !strcmp(g->output[o]->name, u[i].name);
        if (out) continue;
        u[nlast++] = u[i];
        count[u[i].node]++;
    }
    size_t heads = (g->n_node + 1) * sizeof(const char **), slots = (nlast + g->n_node + 1) * sizeof(const char *);
    char *mem = count ? malloc(heads + slots) : NULL;
    if (!mem) {
        free(u);
        free(count);
        return cn_failc(CN_ENOMEM, "onnx: out of memory");
    }
    m->drops = (const char ***)mem;
    const char **slot = (const char **)(mem + heads);
    for (size_t i = 0; i < g->n_node; i++) {
        m->drops[i] = slot;
        slot += count[i] + 1;
        m->drops[i][count[i]] = NULL;
        count[i] = 0;
    }
    for (size_t i = 0; i < nlast; i++) m->drops[u[i].node][count[u[i].node]++] = u[i].name;
    free(u);
    free(count);
    return 0;
}

static int by_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int add_named(char ***names, cn_tensor ***vals, int *n, size_t cap, const char *name, cn_tensor *t) {
    if (!*names && (!(*names = calloc(cap, sizeof **names)) || !(*vals = calloc(cap, sizeof **vals))))
        return cn_failc(CN_ENOMEM, "onnx: out of memory");
    if (!((*names)[*n] = strdup(name))) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    (*vals)[(*n)++] = cn_retain(t);
    return 0;
}

/* What nodes from `at` on (and the graph's outputs) read of the values the
 * nodes before computed: graph values (the prefix program's outputs) or
 * constants they folded. */
static int split_prefix(cn_onnx_model *m, const Onnx__GraphProto *g, vmap *vals, size_t at) {
    size_t nu = g->n_output;
    for (size_t i = at; i < g->n_node; i++) nu = reads_of(g->node[i], i, NULL, nu);
    name_use *u = malloc(sizeof *u * (nu + 1));
    if (!u) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    nu = 0;
    for (size_t o = 0; o < g->n_output; o++) u[nu++] = (name_use){g->output[o]->name ? g->output[o]->name : "", 0};
    for (size_t i = at; i < g->n_node; i++) nu = reads_of(g->node[i], i, u, nu);
    qsort(u, nu, sizeof *u, by_name_then_node);
    /* The names the top-level nodes before `at` wrote (not those of a
     * branch that failed half-way), sorted for lookups. */
    size_t nd = 0;
    for (size_t i = 0; i < at; i++) nd += g->node[i]->n_output;
    const char **defined = malloc(sizeof *defined * (nd + 1));
    if (!defined) {
        free(u);
        return cn_failc(CN_ENOMEM, "onnx: out of memory");
    }
    nd = 0;
    for (size_t i = 0; i < at; i++)
        for (size_t k = 0; k < g->node[i]->n_output; k++)
            if (g->node[i]->output[k] && *g->node[i]->output[k]) defined[nd++] = g->node[i]->output[k];
    qsort(defined, nd, sizeof *defined, by_str);
    int rc = 0;
    for (size_t i = 0; i < nu && rc == 0; i++) {
        if (i > 0 && !strcmp(u[i].name, u[i - 1].name)) continue;
        cn_tensor *t = vmap_get(vals, u[i].name);
        bool known = !t || !bsearch(&u[i].name, defined, nd, sizeof *defined, by_str);
        for (int k = 0; k < m->nconsts && !known; k++) known = !strcmp(m->const_names[k], u[i].name);
        /* An input under its own name is fed; under another (an Identity
         * of it) it is one of the program's outputs like any value. */
        for (int k = 0; k < m->nin && !known; k++) known = t == m->inputs[k] && !strcmp(u[i].name, m->in_names[k]);
        if (known) continue;
        if (cn_is_symbolic_tensor(t)) rc = add_named(&m->prefix_names, &m->prefix_vals, &m->nprefix, nu, u[i].name, t);
        else rc = add_named(&m->folded_names, &m->folded, &m->nfolded, nu, u[i].name, t);
    }
    free(defined);
    free(u);
    return rc;
}

/* Node `at` (of the top-level graph) needs values computed at run time
 * (onnx_needs_values): the model runs eagerly instead. The nodes not yet
 * imported are checked now, so that an op without an importer still fails
 * the load; the constants (initializers, inputs bound at load) and the
 * ModelProto are kept for the runs. */
static int go_eager(cn_onnx_model *m, onnx_ctx *c, const Onnx__ModelProto *mp, vmap *vals,
                    const char *base_dir, size_t at) {
    const Onnx__GraphProto *g = mp->graph;
    const char *why = cn_last_error();
    m->eager_reason = strdup(!strncmp(why, "unsupported: ", 13) ? why + 13 : why);
    if (!m->eager_reason) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    cn_clear_error();
    for (size_t i = at + 1; i < g->n_node; i++) {
        c->node_index = (int)i;
        if (onnx_check_node(c, g->node[i]) < 0) return CN_EUNSUPPORTED;
    }
    for (size_t i = at + 1; i < g->n_node; i++) {
        m->node_ops[i] = strdup(g->node[i]->op_type ? g->node[i]->op_type : "");
        if (!m->node_ops[i]) return cn_failc(CN_ENOMEM, "onnx: out of memory");
        m->nnodes++;
    }
    size_t cap = g->n_initializer + g->n_input + 1;
    m->consts = calloc(cap, sizeof *m->consts);
    m->const_names = calloc(cap, sizeof *m->const_names);
    if (!m->consts || !m->const_names) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    for (size_t i = 0; i < g->n_initializer + g->n_input; i++) {
        const char *name = i < g->n_initializer ? g->initializer[i]->name
                                                : g->input[i - g->n_initializer]->name;
        if (!name) name = "";
        cn_tensor *t = vmap_get(vals, name);
        bool seen = false;
        for (int k = 0; k < m->nconsts && !seen; k++) seen = !strcmp(m->const_names[k], name);
        if (!t || cn_is_symbolic_tensor(t) || seen) continue;
        m->const_names[m->nconsts] = strdup(name);
        if (!m->const_names[m->nconsts]) return cn_failc(CN_ENOMEM, "onnx: out of memory");
        m->consts[m->nconsts++] = cn_retain(t);
    }
    if (base_dir && !(m->base_dir = strdup(base_dir))) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    m->mp = (Onnx__ModelProto *)mp; /* kept: load() leaves it to cn_onnx_free */
    m->eager_from = at;
    int rc = plan_drops(m, g);
    return rc < 0 ? rc : split_prefix(m, g, vals, at);
}

static int build(cn_onnx_model *m, const Onnx__ModelProto *mp, const char *base_dir,
                 const cn_onnx_load_opts *opts) {
    onnx_ctx c = {.base_dir = base_dir, .opset = onnx_model_opset(mp)};
    if (c.opset < 0) return c.opset;
    m->opset = c.opset;
    const Onnx__GraphProto *g = mp->graph;
    if (!g) return cn_failc(CN_EFORMAT, "onnx: the model has no graph");
    if (g->n_sparse_initializer)
        return cn_failc(CN_EUNSUPPORTED, "unsupported: sparse initializers");
    m->g = cn_graph_new();
    if (!m->g) return CN_ENOMEM;
    c.g = m->g;
    c.graph = g;
    vmap vals = {0};
    int rc = 0;
    for (size_t i = 0; i < g->n_initializer && rc == 0; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        cn_scope_begin();
        cn_tensor *t = onnx_tensor_from_proto(tp, base_dir);
        if (!t) rc = cn_last_error()[0] ? CN_EFORMAT : CN_ENOMEM;
        else {
            m->nparams += cn_numel(t);
            if (cn_dtype_is_float(cn_tensor_dtype(t))) m->nweights += cn_numel(t);
            rc = vmap_put(&vals, tp->name ? tp->name : "", t);
        }
        cn_scope_end();
    }
    if (rc == 0) rc = add_inputs(&c, m, &vals, g, opts);
    m->node_ops = calloc(g->n_node + 1, sizeof *m->node_ops);
    if (!m->node_ops && rc == 0) rc = cn_failc(CN_ENOMEM, "onnx: out of memory");
    cn_elem_budget saved = cn_t_budget;
    if (rc == 0) rc = start_budget(&c, m);
    for (size_t i = 0; i < g->n_node && rc == 0; i++) {
        m->node_ops[i] = strdup(g->node[i]->op_type ? g->node[i]->op_type : "");
        if (!m->node_ops[i]) {
            rc = cn_failc(CN_ENOMEM, "onnx: out of memory");
            break;
        }
        m->nnodes++;
        c.node_index = (int)i;
        rc = onnx_import_node(&c, &vals, g->node[i]);
        if (rc < 0 && c.needs_values) {
            rc = go_eager(m, &c, mp, &vals, base_dir, i);
            break;
        }
    }
    cn_t_budget = saved;
    if (rc == 0) {
        m->out_names = calloc(g->n_output + 1, sizeof *m->out_names);
        m->outputs = calloc(g->n_output + 1, sizeof *m->outputs);
        if (!m->out_names || !m->outputs) rc = cn_failc(CN_ENOMEM, "onnx: out of memory");
        if (rc == 0 && g->n_output == 0) rc = cn_failc(CN_EFORMAT, "onnx: the graph has no outputs");
    }
    for (size_t i = 0; i < g->n_output && rc == 0; i++) {
        const char *name = g->output[i]->name ? g->output[i]->name : "";
        cn_scope_begin();
        cn_tensor *t = vmap_get(&vals, name);
        if (!t && !m->eager_reason) {
            rc = cn_failc(CN_EFORMAT, "onnx: graph output '%s' is not computed by any node", name);
        } else if (!t) {
            /* A model that runs eagerly: the declared type, for inspection
             * (NULL when declared without a shape: known once it runs). */
            const Onnx__TypeProto *ty = g->output[i]->type;
            bool shapeless = ty && ty->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
                             ty->tensor_type && !ty->tensor_type->shape;
            int dt = 0, ndim = 0;
            int64_t shape[CN_MAX_DIMS];
            if (!shapeless && (rc = onnx_value_type(g->output[i], &dt, &ndim, shape)) == 0 &&
                !(t = cn_placeholder(m->g, name, (cn_dtype)dt, ndim, shape)))
                rc = CN_EINVAL;
        }
        if (rc == 0) {
            m->outputs[m->nout] = t ? cn_retain(t) : NULL;
            m->out_names[m->nout] = strdup(name);
            if (!m->out_names[m->nout++]) rc = cn_failc(CN_ENOMEM, "onnx: out of memory");
        }
        cn_scope_end();
    }
    vmap_free(&vals);
    return rc;
}

/* Refuses what protobuf-c must not be handed (onnx_wire_check), naming
 * the bound it breaks; 0 if it may be unpacked. */
static int check_wire(const void *data, size_t size, const ProtobufCMessageDescriptor *d,
                      const char *what, const char *kind) {
    switch (onnx_wire_check(data, size, d)) {
    case 0: return 0;
    case ONNX_WIRE_TOO_BIG:
        return cn_failc(CN_EFORMAT, "onnx: %s is %zu bytes, more than %zu (2 GiB, protobuf's limit)",
                        what, size, ONNX_MAX_BYTES);
    case ONNX_WIRE_TOO_DEEP:
        return cn_failc(CN_EFORMAT,
                        "onnx: %s nests messages more than %d deep (graphs in attributes, types "
                        "in types); refused before parsing, as deeper nesting could overflow the "
                        "stack",
                        what, ONNX_MAX_DEPTH);
    case ONNX_WIRE_TOO_MANY:
        return cn_failc(CN_EFORMAT, "onnx: %s holds more than %zu protobuf messages", what,
                        ONNX_MAX_MESSAGES);
    default:
        return cn_failc(CN_EFORMAT, "onnx: %s is not a valid %s (the protobuf does not parse)", what, kind);
    }
}

/* protobuf-c allocates through this rather than its own default: the calls
 * are then the library's own (the fault-injection sweeps count and fail
 * them, tests/test_faults.c), and an unpack that ran out of memory says so
 * instead of blaming the file, which check_wire has already accepted. */
typedef struct pb_heap {
    ProtobufCAllocator a;
    bool failed;
} pb_heap;
static void *pb_alloc(void *ctx, size_t n) {
    void *p = malloc(n);
    if (!p) ((pb_heap *)ctx)->failed = true;
    return p;
}
static void pb_free(void *ctx, void *p) {
    (void)ctx;
    free(p);
}
#define PB_HEAP_INIT(h) {{pb_alloc, pb_free, &(h)}, false}

static void *pb_unpack_failed(const pb_heap *h, const char *what, const char *kind) {
    if (h->failed) return cn_fail("onnx: out of memory reading %s", what);
    return cn_fail("onnx: %s is not a valid %s (the protobuf does not parse)", what, kind);
}

/* The allocator is malloc and free, so what this returns is freed by
 * onnx__model_proto__free_unpacked(mp, NULL) as well. */
Onnx__ModelProto *onnx_unpack_model(const void *data, size_t size, const char *what) {
    if (check_wire(data, size, &onnx__model_proto__descriptor, what, "ONNX model") < 0) return NULL;
    pb_heap heap = PB_HEAP_INIT(heap);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(&heap.a, size, data);
    if (!mp) return pb_unpack_failed(&heap, what, "ONNX model");
    return mp;
}

static cn_onnx_model *load(const void *data, size_t size, const char *base_dir,
                           const cn_onnx_load_opts *opts, const char *what) {
    Onnx__ModelProto *mp = onnx_unpack_model(data, size, what);
    if (!mp) return NULL;
    cn_onnx_model *m = calloc(1, sizeof *m);
    if (!m) {
        onnx__model_proto__free_unpacked(mp, NULL);
        return cn_fail("onnx: out of memory");
    }
    int rc = build(m, mp, base_dir, opts);
    if (!m->mp) onnx__model_proto__free_unpacked(mp, NULL);
    if (rc < 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", cn_last_error());
        cn_onnx_free(m);
        /* "unsupported: OP (opset N): reason" stays exactly that. */
        if (!strncmp(msg, "unsupported: ", 13)) return cn_fail("%s", msg);
        return cn_fail("%s: %s", what, msg);
    }
    return m;
}

/* The whole file into memory, size checked first. Only a regular file: a
 * FIFO given as the model would block the open or the read forever. */
void *onnx_read_file(const char *path, size_t *size) {
    FILE *f = NULL;
    int64_t n = -1;
    if (cn_fopen_regular(path, "onnx", &f, &n) < 0) return NULL;
    if (n < 0 || (uint64_t)n > ONNX_MAX_BYTES) {
        fclose(f);
        return cn_fail("onnx: '%s' is larger than %zu bytes (2 GiB, protobuf's limit)", path,
                       ONNX_MAX_BYTES);
    }
    void *buf = malloc(n ? (size_t)n : 1);
    if (!buf || (n && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        free(buf);
        fclose(f);
        return cn_fail("onnx: reading '%s' failed", path);
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

char *onnx_dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    size_t k = slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(k + 1);
    if (d) {
        memcpy(d, path, k);
        d[k] = '\0';
    }
    return d;
}

cn_onnx_model *cn_onnx_load(const char *path, const cn_onnx_load_opts *opts) {
    if (!path) return cn_fail("onnx_load: path is NULL");
    size_t n;
    void *buf = onnx_read_file(path, &n);
    if (!buf) return NULL;
    char *dir = onnx_dir_of(path);
    cn_onnx_model *m = dir ? load(buf, n, dir, opts, path) : cn_fail("onnx: out of memory");
    free(dir);
    free(buf);
    return m;
}

cn_onnx_model *cn_onnx_load_buffer(const void *data, size_t size, const char *base_dir,
                                   const cn_onnx_load_opts *opts) {
    if (!data && size) return cn_fail("onnx_load_buffer: data is NULL");
    return load(data ? data : "", size, base_dir, opts, "onnx_load_buffer");
}

/* A list of names and the tensors they hold (retained), and the lists. */
static void free_named(char **names, cn_tensor **vals, int n) {
    for (int i = 0; i < n; i++) {
        cn_release(vals[i]);
        free(names[i]);
    }
    free(names);
    free(vals);
}

void cn_onnx_free(cn_onnx_model *m) {
    if (!m) return;
    cn_program_free(m->prog);
    for (int i = 0; i < m->nin; i++) {
        cn_release(m->inputs[i]);
        free(m->in_names[i]);
    }
    for (int i = 0; i < m->nout; i++) {
        cn_release(m->outputs[i]);
        free(m->out_names[i]);
    }
    free_named(m->const_names, m->consts, m->nconsts);
    free_named(m->prefix_names, m->prefix_vals, m->nprefix);
    free_named(m->folded_names, m->folded, m->nfolded);
    free(m->eager_reason);
    free(m->drops);
    cn_program_free(m->prefix);
    free(m->base_dir);
    if (m->mp) onnx__model_proto__free_unpacked(m->mp, NULL);
    for (int i = 0; i < m->nnodes; i++) free(m->node_ops[i]);
    free(m->node_ops);
    free(m->inputs);
    free(m->outputs);
    free(m->in_names);
    free(m->out_names);
    cn_graph_free(m->g);
    free(m);
}

int cn_onnx_num_inputs(const cn_onnx_model *m) { return m ? m->nin : CN_EINVAL; }
int cn_onnx_num_outputs(const cn_onnx_model *m) { return m ? m->nout : CN_EINVAL; }
const char *cn_onnx_input_name(const cn_onnx_model *m, int i) {
    return m && i >= 0 && i < m->nin ? m->in_names[i] : NULL;
}
const char *cn_onnx_output_name(const cn_onnx_model *m, int i) {
    return m && i >= 0 && i < m->nout ? m->out_names[i] : NULL;
}
cn_tensor *cn_onnx_input(const cn_onnx_model *m, int i) {
    if (!m || i < 0 || i >= m->nin) return cn_fail("onnx_input: index %d out of range", i);
    return m->inputs[i];
}
cn_tensor *cn_onnx_output(const cn_onnx_model *m, int i) {
    if (!m || i < 0 || i >= m->nout) return cn_fail("onnx_output: index %d out of range", i);
    return m->outputs[i];
}
cn_graph *cn_onnx_graph(const cn_onnx_model *m) { return m ? m->g : NULL; }
int cn_onnx_opset(const cn_onnx_model *m) { return m ? m->opset : CN_EINVAL; }
int64_t cn_onnx_num_params(const cn_onnx_model *m) { return m ? m->nparams : CN_EINVAL; }
int64_t cn_onnx_num_weights(const cn_onnx_model *m) { return m ? m->nweights : CN_EINVAL; }
int cn_onnx_num_nodes(const cn_onnx_model *m) { return m ? m->nnodes : CN_EINVAL; }
const char *cn_onnx_node_op(const cn_onnx_model *m, int i) {
    return m && i >= 0 && i < m->nnodes ? m->node_ops[i] : NULL;
}

const char *cn_onnx_eager_reason(const cn_onnx_model *m) { return m ? m->eager_reason : NULL; }

/* A run of a model with data-dependent shapes: every node through its
 * handler on the inputs' data, as the load would fold constants. */
static int run_eager(cn_onnx_model *m, cn_tensor *const *inputs, cn_tensor **outputs) {
    const Onnx__GraphProto *g = m->mp->graph;
    for (int i = 0; i < m->nin; i++) {
        const cn_tensor *p = m->inputs[i], *x = inputs[i];
        bool ok = cn_tensor_dtype(x) == cn_tensor_dtype(p) && cn_ndim(x) == cn_ndim(p);
        for (int d = 0; ok && d < cn_ndim(p); d++) ok = cn_dim(p, d) < 0 || cn_dim(p, d) == cn_dim(x, d);
        if (!ok) {
            char b1[160], b2[160];
            return cn_failc(CN_EINVAL, "onnx_run: input %d ('%s') is %s; the model takes %s", i,
                            m->in_names[i], cn_shape_str(x, b1, sizeof b1), cn_shape_str(p, b2, sizeof b2));
        }
    }
    /* Sizes in such a model come from data: each node may make at most
     * the load's budget plus the model's and the inputs' elements. */
    uint64_t lim;
    if (cn_env_limit(ONNX_MAX_ELEMENTS_ENV, (uint64_t)ONNX_MAX_ELEMENTS, &lim, "onnx") < 0) return CN_EINVAL;
    int64_t per_node = lim > INT64_MAX / 4 ? -1 : (int64_t)lim + m->nparams;
    for (int i = 0; i < m->nin && per_node >= 0; i++)
        per_node = cn_numel(inputs[i]) > INT64_MAX / 4 - per_node ? -1 : per_node + cn_numel(inputs[i]);
    if (lim == 0) per_node = -1;
    onnx_ctx c = {.opset = m->opset, .base_dir = m->base_dir, .graph = g, .budget = per_node, .running = true};
    vmap vals = {0};
    cn_tensor **res = calloc((size_t)m->nout + 1, sizeof *res);
    if (!res) return cn_failc(CN_ENOMEM, "onnx_run: out of memory");
    cn_elem_budget saved = cn_t_budget;
    cn_t_budget = (cn_elem_budget){-1, false};
    cn_no_grad_begin();
    cn_scope_begin();
    /* The nodes before eager_from as the program they were imported into,
     * when the inputs have the shapes it was made for. */
    bool same_shapes = m->eager_from > 0 && !m->prefix_failed;
    for (int i = 0; i < m->nin && same_shapes; i++)
        for (int d = 0; d < cn_ndim(m->inputs[i]); d++)
            same_shapes = same_shapes && cn_dim(m->inputs[i], d) == cn_dim(inputs[i], d);
    if (same_shapes && m->nprefix > 0 && !m->prefix) {
        m->prefix = cn_compile(m->g, m->prefix_vals, m->nprefix, NULL);
        if (!m->prefix) { /* the walk from the first node still works */
            same_shapes = false;
            m->prefix_failed = true;
            cn_clear_error();
        }
    }
    cn_tensor **xs = calloc((size_t)m->nin + 1, sizeof *xs);
    cn_tensor **pv = calloc((size_t)m->nprefix + 1, sizeof *pv);
    int rc = xs && pv ? 0 : cn_failc(CN_ENOMEM, "onnx_run: out of memory");
    for (int i = 0; i < m->nconsts && rc == 0; i++) rc = vmap_put(&vals, m->const_names[i], m->consts[i]);
    for (int i = 0; i < m->nin && rc == 0; i++) {
        xs[i] = cn_to(inputs[i], CN_CPU); /* the constants are the CPU's */
        rc = xs[i] ? vmap_put(&vals, m->in_names[i], xs[i]) : CN_EINVAL;
    }
    size_t start = 0;
    if (rc == 0 && same_shapes) {
        if (m->nprefix > 0) rc = cn_run(m->prefix, m->inputs, xs, m->nin, pv, m->nprefix);
        for (int i = 0; i < m->nprefix && rc == 0; i++) rc = vmap_put(&vals, m->prefix_names[i], pv[i]);
        for (int i = 0; i < m->nfolded && rc == 0; i++) rc = vmap_put(&vals, m->folded_names[i], m->folded[i]);
        start = m->eager_from;
    }
    free(xs);
    free(pv);
    for (size_t i = start; i < g->n_node && rc == 0; i++) {
        c.node_index = (int)i;
        cn_t_budget = (cn_elem_budget){per_node, false};
        rc = onnx_import_node(&c, &vals, g->node[i]);
        cn_t_budget = (cn_elem_budget){-1, false};
        for (const char **d = m->drops[i]; rc == 0 && *d; d++) vmap_drop(&vals, *d);
    }
    for (int i = 0; i < m->nout && rc == 0; i++) {
        cn_tensor *t = vmap_get(&vals, m->out_names[i]);
        if (!t) {
            rc = cn_failc(CN_EFORMAT, "onnx: graph output '%s' is not computed by any node", m->out_names[i]);
            break;
        }
        /* An output must not let the caller write into the model's
         * constants, its inputs or another output. */
        bool shared = false;
        for (int k = 0; k < m->nconsts && !shared; k++) shared = cn_shares_storage(t, m->consts[k]);
        for (int k = 0; k < m->nfolded && !shared; k++) shared = cn_shares_storage(t, m->folded[k]);
        for (int k = 0; k < m->nin && !shared; k++) shared = cn_shares_storage(t, inputs[k]);
        for (int k = 0; k < i && !shared; k++) shared = cn_shares_storage(t, res[k]);
        if (shared) t = cn_clone(t);
        if (!t) rc = CN_EINVAL;
        else res[i] = cn_retain(t);
    }
    vmap_free(&vals);
    cn_scope_end();
    cn_no_grad_end();
    cn_t_budget = saved;
    for (int i = 0; i < m->nout; i++)
        if (rc == 0) outputs[i] = cn_scope_add(res[i]);
        else cn_release(res[i]);
    free(res);
    return rc;
}

int cn_onnx_run(cn_onnx_model *m, cn_tensor *const *inputs, cn_tensor **outputs) {
    if (!m) return cn_failc(CN_EINVAL, "onnx_run: model is NULL");
    if (!outputs) return cn_failc(CN_EINVAL, "onnx_run: outputs is NULL");
    if (m->nin && !inputs) return cn_failc(CN_EINVAL, "onnx_run: inputs is NULL");
    for (int i = 0; i < m->nin; i++)
        if (!inputs[i]) return cn_failc(CN_EINVAL, "onnx_run: input %d ('%s') is NULL", i, m->in_names[i]);
    if (m->eager_reason) return run_eager(m, inputs, outputs);
    if (!m->prog) {
        m->prog = cn_compile(m->g, m->outputs, m->nout, NULL);
        if (!m->prog) return CN_EINVAL;
    }
    return cn_run(m->prog, m->inputs, inputs, m->nin, outputs, m->nout);
}

cn_tensor *cn_onnx_load_tensor(const char *path) {
    if (!path) return cn_fail("onnx_load_tensor: path is NULL");
    size_t n;
    void *buf = onnx_read_file(path, &n);
    if (!buf) return NULL;
    char what[1100];
    snprintf(what, sizeof what, "'%.1000s'", path);
    if (check_wire(buf, n, &onnx__tensor_proto__descriptor, what, "TensorProto") < 0) {
        free(buf);
        return NULL;
    }
    if (onnx_wire_not_tensor(buf, n)) {
        free(buf);
        cn_failc(CN_EUNSUPPORTED,
                 "unsupported: value type: %s holds a sequence, map or optional value, not a "
                 "tensor (only tensors are read)",
                 what);
        return NULL;
    }
    pb_heap heap = PB_HEAP_INIT(heap);
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(&heap.a, n, buf);
    free(buf);
    if (!tp) return pb_unpack_failed(&heap, what, "TensorProto");
    char *dir = onnx_dir_of(path);
    cn_tensor *t = dir ? onnx_tensor_from_proto(tp, dir) : cn_fail("onnx: out of memory");
    free(dir);
    onnx__tensor_proto__free_unpacked(tp, &heap.a);
    if (!t) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", cn_last_error());
        return cn_fail("%s: %s", path, msg);
    }
    return t;
}

#else /* !CN_HAVE_ONNX */

#define NO_ONNX "built without ONNX support (install libprotobuf-c-dev protobuf-c-compiler libonnx-dev)"

cn_onnx_model *cn_onnx_load(const char *path, const cn_onnx_load_opts *opts) {
    (void)path, (void)opts;
    return cn_fail("onnx_load: " NO_ONNX);
}
cn_onnx_model *cn_onnx_load_buffer(const void *data, size_t size, const char *base_dir,
                                   const cn_onnx_load_opts *opts) {
    (void)data, (void)size, (void)base_dir, (void)opts;
    return cn_fail("onnx_load_buffer: " NO_ONNX);
}
void cn_onnx_free(cn_onnx_model *m) { (void)m; }
int cn_onnx_num_inputs(const cn_onnx_model *m) { return (void)m, cn_failc(CN_EUNSUPPORTED, NO_ONNX); }
int cn_onnx_num_outputs(const cn_onnx_model *m) { return (void)m, cn_failc(CN_EUNSUPPORTED, NO_ONNX); }
const char *cn_onnx_input_name(const cn_onnx_model *m, int i) { return (void)m, (void)i, NULL; }
const char *cn_onnx_output_name(const cn_onnx_model *m, int i) { return (void)m, (void)i, NULL; }
cn_tensor *cn_onnx_input(const cn_onnx_model *m, int i) { return (void)m, (void)i, cn_fail(NO_ONNX); }
cn_tensor *cn_onnx_output(const cn_onnx_model *m, int i) { return (void)m, (void)i, cn_fail(NO_ONNX); }
cn_graph *cn_onnx_graph(const cn_onnx_model *m) { return (void)m, NULL; }
const char *cn_onnx_eager_reason(const cn_onnx_model *m) { return (void)m, NULL; }
int cn_onnx_opset(const cn_onnx_model *m) { return (void)m, cn_failc(CN_EUNSUPPORTED, NO_ONNX); }
int64_t cn_onnx_num_params(const cn_onnx_model *m) { return (void)m, cn_failc(CN_EUNSUPPORTED, NO_ONNX); }
int64_t cn_onnx_num_weights(const cn_onnx_model *m) { return (void)m, cn_failc(CN_EUNSUPPORTED, NO_ONNX); }
int cn_onnx_num_nodes(const cn_onnx_model *m) { return (void)m, cn_failc(CN_EUNSUPPORTED, NO_ONNX); }
const char *cn_onnx_node_op(const cn_onnx_model *m, int i) { return (void)m, (void)i, NULL; }
int cn_onnx_run(cn_onnx_model *m, cn_tensor *const *inputs, cn_tensor **outputs) {
    (void)m, (void)inputs, (void)outputs;
    return cn_failc(CN_EUNSUPPORTED, "onnx_run: " NO_ONNX);
}
cn_tensor *cn_onnx_load_tensor(const char *path) {
    (void)path;
    return cn_fail("onnx_load_tensor: " NO_ONNX);
}

#endif
