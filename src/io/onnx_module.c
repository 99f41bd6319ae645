/* An ONNX model as a trainable module (cn_onnx_load_trainable): its
 * floating-point initializers become parameters (BatchNormalization's
 * running statistics buffers), and each forward walks the file's nodes
 * through the importer's handlers on the tensor it is given, so the same
 * model trains eagerly or as a static program, in training or evaluation
 * mode. The unpacked ModelProto is kept: cn_onnx_save_trained writes it back
 * with the trained values. */
#include "onnx_internal.h"

#include <inttypes.h>
#include <stdlib.h>

#ifdef CN_HAVE_ONNX
#include "fileio.h"
#include "../ops/op.h"

typedef struct onnx_mod {
    cn_module base;
    Onnx__ModelProto *mp;
    char *base_dir;
    int opset;
    const char *in_name; /* the graph input (into mp) */
    int in_dtype, in_ndim;
    int64_t in_shape[CN_MAX_DIMS];
    /* Every initializer by its index in the graph: the module's parameter
     * or buffer, or (integers) a constant; retained. */
    cn_tensor **inits;
    int ninits;
    bool *read; /* while loading: which initializers graph nodes read */
} onnx_mod;

static cn_tensor *part_forward(cn_module *m, cn_tensor *x) {
    (void)m, (void)x;
    return cn_fail("module_forward: this module holds part of an ONNX model's initializers; "
                   "run the model's own module");
}
static const cn_module_vtable part_vt = {"OnnxInitializers", part_forward, NULL};

static void om_free(cn_module *base) {
    onnx_mod *m = (onnx_mod *)base;
    for (int i = 0; i < m->ninits; i++) cn_release(m->inits[i]);
    free(m->inits);
    free(m->read);
    free(m->base_dir);
    if (m->mp) onnx__model_proto__free_unpacked(m->mp, NULL);
}

/* t registered under the initializer's own name: "fc.weight" as the
 * parameter "weight" of a child "fc", so state names are the file's. */
static int add_named(cn_module *m, const char *name, cn_tensor *t, bool param) {
    const char *dot;
    while ((dot = strchr(name, '.')) != NULL) {
        char part[256];
        size_t k = (size_t)(dot - name);
        if (k == 0 || k >= sizeof part || !dot[1])
            return cn_failc(CN_EUNSUPPORTED, "unsupported: initializer name '%s' (for training, "
                                             "names are dot-separated parts, none empty)", name);
        memcpy(part, name, k);
        part[k] = '\0';
        cn_module *child = cn_module_child(m, part);
        if (!child) {
            child = cn_module_new(&part_vt, sizeof(cn_module));
            if (!child || cn_module_add_child(m, part, child) < 0) return CN_EINVAL;
        }
        m = child;
        name = dot + 1;
    }
    return param ? cn_module_add_param(m, name, t) : cn_module_add_buffer(m, name, t);
}

/* Is name read as a BatchNormalization's running mean or variance? */
static bool running_stat(const Onnx__GraphProto *g, const char *name) {
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (!n->op_type || strcmp(n->op_type, "BatchNormalization") || n->n_input < 5) continue;
        if (!strcmp(n->input[3], name) || !strcmp(n->input[4], name)) return true;
    }
    return false;
}

/* ---- what a static trace of a node must not contain ---- */

/* A tensor with data that requires a gradient is read at run time only if
 * it is a parameter or a view of one; anything else was computed from the
 * parameters while tracing and would stay at their values of that moment. */
static const cn_tensor *view_base(const cn_tensor *t) {
    while (t->node && (cn_ops[t->node->op]->flags & CN_OPF_VIEW)) t = t->node->in[0];
    return t;
}

/* Tensors already walked: open addressing on the pointer (a handler may
 * build thousands of shared nodes: an unrolled recurrence). */
typedef struct ptrset {
    const void **k;
    size_t cap, n;
} ptrset;

/* Adds p: 1 if new, 0 if there already, < 0 out of memory. */
static int ptrset_add(ptrset *s, const void *p) {
    if ((s->n + 1) * 2 > s->cap) {
        ptrset b = {calloc(s->cap ? s->cap * 2 : 64, sizeof *b.k), s->cap ? s->cap * 2 : 64, 0};
        if (!b.k) return CN_ENOMEM;
        for (size_t i = 0; i < s->cap; i++)
            if (s->k[i]) ptrset_add(&b, s->k[i]);
        free(s->k);
        *s = b;
    }
    size_t h = (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ULL) & (s->cap - 1);
    for (; s->k[h]; h = (h + 1) & (s->cap - 1))
        if (s->k[h] == p) return 0;
    s->k[h] = p;
    s->n++;
    return 1;
}

/* The graph nodes the handler of n built: each must have a gradient rule
 * where a gradient flows, and read parameters at run time. The walk stops
 * at n's inputs (checked where they were made). */
static int check_node(onnx_mod *m, onnx_ctx *c, const vmap *vals, const Onnx__NodeProto *n) {
    ptrset seen = {0};
    cn_tensor **stack = NULL;
    size_t sp = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; i < n->n_input && rc >= 0; i++)
        if (n->input[i] && *n->input[i]) rc = ptrset_add(&seen, vmap_get(vals, n->input[i]));
    for (size_t i = 0; i < n->n_output && rc >= 0; i++) {
        cn_tensor *t = n->output[i] && *n->output[i] ? vmap_get(vals, n->output[i]) : NULL;
        if (!t) continue;
        if (sp == cap) {
            cap = cap ? 2 * cap : 64;
            cn_tensor **ns = realloc(stack, sizeof *ns * cap);
            if (!ns) rc = CN_ENOMEM;
            else stack = ns;
        }
        if (rc >= 0) stack[sp++] = t;
    }
    while (sp > 0 && rc >= 0) {
        cn_tensor *t = stack[--sp];
        if (!cn_is_symbolic_tensor(t) || !t->node || (rc = ptrset_add(&seen, t)) <= 0) continue;
        const cn_op_def *d = cn_ops[t->node->op];
        if (t->requires_grad && !d->vjp && !(d->flags & CN_OPF_NONDIFF)) {
            rc = onnx_bad(c, "cannot be trained: Chutney's %s, which it becomes, has no gradient "
                             "rule", d->name);
            break;
        }
        for (int k = 0; k < t->node->nin && rc >= 0; k++) {
            cn_tensor *u = t->node->in[k];
            if (!cn_is_symbolic_tensor(u)) {
                const cn_tensor *base = view_base(u);
                if (u->requires_grad && base->node)
                    rc = onnx_bad(c, "cannot be trained: it computes from its weights alone (%s "
                                     "of a parameter) while the graph is traced, which would "
                                     "keep their first values", cn_ops[u->node->op]->name);
                for (int i = 0; m->read && i < m->ninits; i++)
                    if (m->inits[i] == base) m->read[i] = true;
                continue;
            }
            if (sp == cap) {
                cap *= 2;
                cn_tensor **ns = realloc(stack, sizeof *ns * cap);
                if (!ns) {
                    rc = CN_ENOMEM;
                    break;
                }
                stack = ns;
            }
            stack[sp++] = u;
        }
    }
    free(stack);
    free(seen.k);
    if (rc == CN_ENOMEM) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    return rc < 0 ? rc : 0;
}

/* ---- forward ---- */

static cn_tensor *om_forward(cn_module *base, cn_tensor *x) {
    onnx_mod *m = (onnx_mod *)base;
    char b1[160], b2[160];
    bool ok = cn_tensor_dtype(x) == (cn_dtype)m->in_dtype && cn_ndim(x) == m->in_ndim;
    for (int d = 0; ok && d < m->in_ndim; d++)
        ok = m->in_shape[d] < 0 || cn_dim(x, d) == m->in_shape[d];
    bool batch_fixed = m->in_ndim > 0 && m->in_shape[0] >= 0 && cn_ndim(x) == m->in_ndim &&
                       cn_dim(x, 0) != m->in_shape[0];
    if (!ok)
        return cn_fail("onnx model: input '%s' is declared %s %s; given %s%s%s%s", m->in_name,
                       cn_dtype_name((cn_dtype)m->in_dtype),
                       cn_fmt_shape(b1, sizeof b1, m->in_ndim, m->in_shape),
                       cn_shape_str(x, b2, sizeof b2), batch_fixed ? " (a model trained in "
                       "batches needs a symbolic batch size: export it with dynamic_axes={'" : "",
                       batch_fixed ? m->in_name : "", batch_fixed ? "': {0: 'batch'}})" : "");
    const Onnx__GraphProto *g = m->mp->graph;
    onnx_ctx c = {.opset = m->opset, .base_dir = m->base_dir, .graph = g, .trainable = true,
                  .training = base->training, .budget = -1};
    vmap vals = {0};
    int rc = 0;
    for (int i = 0; i < m->ninits && rc == 0; i++)
        rc = vmap_put(&vals, g->initializer[i]->name ? g->initializer[i]->name : "", m->inits[i]);
    if (rc == 0) rc = vmap_put(&vals, m->in_name, x);
    bool symbolic = cn_is_symbolic_tensor(x);
    for (size_t i = 0; i < g->n_node && rc == 0; i++) {
        c.node_index = (int)i;
        rc = onnx_import_node(&c, &vals, g->node[i]);
        if (rc == 0 && symbolic) rc = check_node(m, &c, &vals, g->node[i]);
    }
    const char *oname = g->output[0]->name ? g->output[0]->name : "";
    cn_tensor *y = rc == 0 ? vmap_get(&vals, oname) : NULL;
    if (rc == 0 && !y) cn_fail("onnx model: graph output '%s' is not computed by any node", oname);
    if (y) y = cn_scope_add(cn_retain(y));
    vmap_free(&vals);
    return y;
}

static const cn_module_vtable onnx_vt = {"OnnxModel", om_forward, om_free};

static int setup(onnx_mod *m, const char *path) {
    const Onnx__GraphProto *g = m->mp->graph;
    if (!g) return cn_failc(CN_EFORMAT, "onnx: the model has no graph");
    if (g->n_sparse_initializer) return cn_failc(CN_EUNSUPPORTED, "unsupported: sparse initializers");
    if (g->n_output < 1) return cn_failc(CN_EFORMAT, "onnx: the graph has no outputs");
    if ((m->opset = onnx_model_opset(m->mp)) < 0) return m->opset;
    m->inits = calloc(g->n_initializer + 1, sizeof *m->inits);
    if (!m->inits) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        const char *name = tp->name ? tp->name : "";
        for (size_t j = 0; j < i; j++)
            if (!strcmp(name, g->initializer[j]->name ? g->initializer[j]->name : ""))
                return cn_failc(CN_EFORMAT, "onnx: initializer '%s' is given twice", name);
        cn_scope_begin();
        cn_tensor *t = onnx_tensor_from_proto(tp, m->base_dir);
        int rc = t ? 0 : cn_last_error()[0] ? CN_EFORMAT : CN_ENOMEM;
        if (t && cn_dtype_is_float(cn_tensor_dtype(t))) {
            /* A tensor of its own: the file's bytes may be shared views. */
            t = cn_contiguous(cn_clone(t));
            rc = t ? cn_set_requires_grad(t, !running_stat(g, name)) : CN_ENOMEM;
        }
        if (rc == 0) m->inits[m->ninits++] = cn_retain(t);
        cn_scope_end();
        if (rc < 0) return rc;
    }
    int ninputs = 0;
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *v = g->input[i];
        const char *name = v->name ? v->name : "";
        bool init = false;
        for (size_t j = 0; j < g->n_initializer && !init; j++)
            init = g->initializer[j]->name && !strcmp(g->initializer[j]->name, name);
        if (init) continue;
        if (ninputs++ == 0) {
            m->in_name = name;
            int rc = onnx_value_type(v, &m->in_dtype, &m->in_ndim, m->in_shape);
            if (rc < 0) return rc;
        }
    }
    if (ninputs != 1)
        return cn_failc(CN_EUNSUPPORTED, "unsupported: the model has %d inputs; a trainable model "
                                         "takes one (the batch)", ninputs);
    /* Every node once on a placeholder of the declared input, in training
     * mode: an op that cannot be trained, or is not supported, fails now,
     * naming the node, not at the first step. */
    m->read = calloc((size_t)m->ninits + 1, sizeof *m->read);
    if (!m->read) return cn_failc(CN_ENOMEM, "onnx: out of memory");
    cn_scope_begin();
    cn_graph *tg = cn_graph_new();
    cn_elem_budget saved = cn_t_budget;
    uint64_t lim;
    int rc = cn_env_limit(ONNX_MAX_ELEMENTS_ENV, (uint64_t)ONNX_MAX_ELEMENTS, &lim, "onnx");
    cn_t_budget = (cn_elem_budget){rc < 0 || lim > INT64_MAX / 2 ? -1 : (int64_t)lim, false};
    cn_tensor *ph = rc == 0 && tg ? cn_placeholder(tg, m->in_name, (cn_dtype)m->in_dtype, m->in_ndim,
                                                   m->in_shape) : NULL;
    cn_tensor *y = ph ? om_forward(&m->base, ph) : NULL;
    if (!y && rc == 0) rc = cn_last_error()[0] ? CN_EINVAL : CN_ENOMEM;
    cn_t_budget = saved;
    cn_scope_end();
    cn_graph_free(tg);
    /* The weights are what the graph reads; a float initializer the
     * handlers read while loading (a Dropout ratio, Resize scales) stays a
     * constant of the file. */
    for (int i = 0; i < m->ninits && rc == 0; i++) {
        cn_tensor *t = m->inits[i];
        const char *name = g->initializer[i]->name ? g->initializer[i]->name : "";
        if (!cn_dtype_is_float(cn_tensor_dtype(t))) continue;
        if (running_stat(g, name)) rc = add_named(&m->base, name, t, false);
        else if (m->read[i]) rc = add_named(&m->base, name, t, true);
        else rc = cn_set_requires_grad(t, false);
    }
    free(m->read);
    m->read = NULL;
    if (rc == 0 && cn_module_num_params(&m->base) <= 0)
        return cn_failc(CN_EINVAL, "onnx: %s has no floating-point weights: nothing to train "
                                   "(was it exported with its weights?)", path);
    return rc;
}

cn_module *cn_onnx_load_trainable(const char *path) {
    if (!path) return cn_fail("onnx_load_trainable: path is NULL");
    size_t size;
    void *buf = onnx_read_file(path, &size);
    if (!buf) return NULL;
    Onnx__ModelProto *mp = onnx_unpack_model(buf, size, path);
    free(buf);
    if (!mp) return NULL;
    onnx_mod *m = (onnx_mod *)cn_module_new(&onnx_vt, sizeof(onnx_mod));
    if (!m) {
        onnx__model_proto__free_unpacked(mp, NULL);
        return NULL;
    }
    m->mp = mp;
    m->base_dir = onnx_dir_of(path);
    int rc = m->base_dir ? setup(m, path) : cn_failc(CN_ENOMEM, "onnx: out of memory");
    if (rc < 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", cn_last_error());
        cn_module_free(&m->base);
        if (!strncmp(msg, "unsupported: ", 13)) return cn_fail("%s", msg);
        return cn_fail("%s: %s", path, msg);
    }
    return &m->base;
}

/* ---- writing the trained model ---- */

/* tp's data replaced by t's values (little-endian raw_data, as exporters
 * write it); the typed fields and any external location dropped. */
static int set_data(Onnx__TensorProto *tp, cn_tensor *t, void **owned) {
    cn_tensor *h = cn_contiguous(cn_to(t, CN_CPU));
    if (!h) return CN_EINVAL;
    size_t nbytes = (size_t)cn_numel(h) * cn_dtype_size(cn_tensor_dtype(h));
    void *p = malloc(nbytes ? nbytes : 1);
    if (!p) return cn_failc(CN_ENOMEM, "onnx_save_trained: out of memory");
    if (nbytes) memcpy(p, cn_data(h), nbytes);
    if (!cn_host_is_le()) cn_byteswap(p, (size_t)cn_numel(h), cn_dtype_size(cn_tensor_dtype(h)));
    *owned = p;
    tp->raw_data.data = p;
    tp->raw_data.len = nbytes;
    tp->has_raw_data = 1;
    tp->n_float_data = tp->n_double_data = tp->n_int32_data = tp->n_int64_data = 0;
    tp->n_external_data = 0;
    tp->has_data_location = 0;
    tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
    return 0;
}

/* Inference form: BatchNormalization without training_mode and its
 * running-statistics outputs, Dropout without its training_mode input. */
static void to_inference(Onnx__GraphProto *g) {
    for (size_t i = 0; i < g->n_node; i++) {
        Onnx__NodeProto *n = g->node[i];
        if (!n->op_type) continue;
        if (!strcmp(n->op_type, "BatchNormalization")) {
            size_t k = 0;
            for (size_t a = 0; a < n->n_attribute; a++)
                if (!n->attribute[a]->name || strcmp(n->attribute[a]->name, "training_mode"))
                    n->attribute[k++] = n->attribute[a];
            n->n_attribute = k;
            if (n->n_output > 1) n->n_output = 1;
        } else if (!strcmp(n->op_type, "Dropout") && n->n_input > 2) {
            n->n_input = 2;
        }
    }
}

int cn_onnx_save_trained(cn_module *base, const char *path) {
    if (!base || base->vt != &onnx_vt)
        return cn_failc(CN_EINVAL, "onnx_save_trained: the module was not made by "
                                   "cn_onnx_load_trainable");
    if (!path) return cn_failc(CN_EINVAL, "onnx_save_trained: path is NULL");
    onnx_mod *m = (onnx_mod *)base;
    Onnx__GraphProto *g = m->mp->graph;
    /* The kept message is edited in place and put back as it was, so the
     * module stays what it loaded. */
    size_t ni = g->n_initializer;
    Onnx__TensorProto *saved = malloc(sizeof *saved * (ni ? ni : 1));
    void **owned = calloc(ni ? ni : 1, sizeof *owned);
    Onnx__NodeProto *nodes = malloc(sizeof *nodes * (g->n_node ? g->n_node : 1));
    Onnx__AttributeProto **attrs = NULL;
    size_t nattrs = 0;
    for (size_t i = 0; i < g->n_node; i++) nattrs += g->node[i]->n_attribute;
    attrs = malloc(sizeof *attrs * (nattrs ? nattrs : 1));
    int rc = saved && owned && nodes && attrs ? 0 : cn_failc(CN_ENOMEM, "onnx_save_trained: out of memory");
    size_t ai = 0;
    for (size_t i = 0; rc == 0 && i < g->n_node; i++) {
        nodes[i] = *g->node[i];
        for (size_t a = 0; a < g->node[i]->n_attribute; a++) attrs[ai++] = g->node[i]->attribute[a];
    }
    cn_scope_begin();
    for (size_t i = 0; rc == 0 && i < ni; i++) {
        saved[i] = *g->initializer[i];
        if (cn_dtype_is_float(cn_tensor_dtype(m->inits[i])))
            rc = set_data(g->initializer[i], m->inits[i], &owned[i]);
    }
    void *out = NULL;
    size_t n = 0;
    if (rc == 0) {
        to_inference(g);
        n = onnx__model_proto__get_packed_size(m->mp);
        out = malloc(n ? n : 1);
        if (!out) rc = cn_failc(CN_ENOMEM, "onnx_save_trained: out of memory");
        else onnx__model_proto__pack(m->mp, out);
    }
    cn_scope_end();
    for (size_t i = 0; owned && i < ni; i++)
        if (owned[i]) *g->initializer[i] = saved[i];
    ai = 0;
    for (size_t i = 0; nodes && attrs && i < g->n_node; i++) {
        *g->node[i] = nodes[i];
        for (size_t a = 0; a < g->node[i]->n_attribute; a++) g->node[i]->attribute[a] = attrs[ai++];
    }
    for (size_t i = 0; owned && i < ni; i++) free(owned[i]);
    free(saved);
    free(owned);
    free(nodes);
    free(attrs);
    cn_afile af;
    if (rc == 0 && (rc = cn_afile_open(&af, path, "onnx_save_trained")) == 0) {
        if (fwrite(out, 1, n, af.f) != n) {
            cn_afile_abort(&af);
            rc = cn_failc(CN_EIO, "onnx_save_trained: writing '%s' failed", path);
        } else {
            rc = cn_afile_commit(&af, "onnx_save_trained");
        }
    }
    free(out);
    return rc;
}

#else /* !CN_HAVE_ONNX */

#define NO_ONNX "built without ONNX support (install libprotobuf-c-dev protobuf-c-compiler libonnx-dev)"

cn_module *cn_onnx_load_trainable(const char *path) {
    (void)path;
    return cn_fail("onnx_load_trainable: " NO_ONNX);
}
int cn_onnx_save_trained(cn_module *m, const char *path) {
    (void)m, (void)path;
    return cn_failc(CN_EUNSUPPORTED, "onnx_save_trained: " NO_ONNX);
}

#endif
