/* ONNX export: a static graph's program IR (as cn_compile builds it at -O1,
 * so folded and simplified graphs export, but no fused step appears) into
 * a ModelProto packed by the protobuf-c writer generated at build time.
 * Placeholders become graph inputs, constants initializers, and each step
 * the nodes its emitter (onnx_export_ops.c) writes. */
#include "onnx_export.h"

#include <stdlib.h>

#ifdef CN_HAVE_ONNX
#include "fileio.h"

#define OX_OPSET 17
#define OX_IR_VERSION 8 /* onnx 1.12 (Debian's) checks up to IR 8 */

/* ---- the model ---- */

static int oom(void) { return cn_failc(CN_ENOMEM, "export: out of memory"); }

/* The IR as cn_compile builds it at -O1: the passes before fusion. */
static cn_ir *build_ir(cn_tensor *const *outputs, int noutputs) {
    cn_ir *ir = ir_from_graph(outputs, noutputs);
    if (!ir) return NULL;
    for (int round = 0; round < 4; round++) {
        int changed = 0;
        for (int k = 0; k < cn_npasses; k++) {
            if (cn_passes[k].min_level > 1) continue;
            int n = cn_passes[k].run(ir);
            if (n < 0) {
                ir_free(ir);
                return NULL;
            }
            changed += n;
        }
        if (!changed) break;
    }
    return ir;
}

static uint64_t data_hash(const cn_tensor *t) {
    uint64_t h = 1469598103934665603ULL ^ t->dtype;
    for (int d = 0; d < t->ndim; d++) h = (h ^ (uint64_t)t->shape[d]) * 1099511628211ULL;
    const unsigned char *p = cn_t_ptr(t);
    size_t n = (size_t)cn_shape_numel(t->ndim, t->shape) * cn_dsize((cn_dtype)t->dtype);
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static bool same_data(const cn_tensor *a, const cn_tensor *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim ||
        memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim))
        return false;
    size_t n = (size_t)cn_shape_numel(a->ndim, a->shape) * cn_dsize((cn_dtype)a->dtype);
    return !memcmp(cn_t_ptr(a), cn_t_ptr(b), n);
}

/* The initializer of a constant: its data made contiguous and held until
 * the model is packed. Equal constants share one initializer (a graph
 * that recomputes W^T every step of a loop holds many equal copies). */
static const char *const_init(ox_ctx *c, cn_tensor *t, const char *base) {
    if (!ox_grow((void **)&c->held, &c->hcap, c->nheld + 1, sizeof *c->held)) return NULL;
    cn_tensor *ct = cn_t_host_contiguous(t);
    if (!ct) return NULL;
    uint64_t h = data_hash(ct);
    for (size_t i = 0; i < c->nheld; i++)
        if (c->held[i].hash == h && same_data(c->held[i].t, ct)) {
            cn_release(ct);
            return c->held[i].name;
        }
    struct ox_held *e = &c->held[c->nheld++];
    *e = (struct ox_held){ct, ox_unique_name(c, base), h};
    if (!e->name) return NULL;
    return ox_add_init(c, ox_tensor_proto(c, e->name, (cn_dtype)ct->dtype, ct->ndim, ct->shape, cn_t_ptr(ct)));
}

/* Is t a permuted view of the whole of p (an eager W^T of a parameter W)?
 * perm gets the axes. */
static bool permuted_view(const cn_tensor *t, const cn_tensor *p, int64_t *perm) {
    if (!p || p == t || t->storage != p->storage || t->offset != p->offset || t->ndim != p->ndim ||
        t->dtype != p->dtype || cn_shape_numel(p->ndim, p->shape) < 2)
        return false;
    bool used[CN_MAX_DIMS] = {false};
    for (int i = 0; i < t->ndim; i++) {
        int j = 0;
        while (j < p->ndim && (used[j] || p->shape[j] != t->shape[i] || p->strides[j] != t->strides[i])) j++;
        if (j == p->ndim) return false;
        used[j] = true;
        perm[i] = j;
    }
    return true;
}

/* The ONNX name of a constant value. Parameters (opts->params) keep their
 * names and layout; a permuted view of one becomes a Transpose of it. */
static const char *const_value(ox_ctx *c, cn_tensor *t, const cn_onnx_export_opts *o) {
    int np = o && o->params && o->param_names ? o->nparams : 0;
    for (int k = 0; k < np; k++) {
        int64_t perm[CN_MAX_DIMS];
        cn_tensor *p = o->params[k];
        bool view = permuted_view(t, p, perm);
        if (p != t && !view) continue;
        if (!c->param_init[k]) {
            const char *base = o->param_names[k] && *o->param_names[k] ? o->param_names[k] : "param";
            if (!(c->param_init[k] = const_init(c, p, base))) return NULL;
        }
        if (!view) return c->param_init[k];
        struct ox_transposed *pt = &c->param_t[k];
        if (pt->name && !memcmp(pt->perm, perm, sizeof(int64_t) * (size_t)t->ndim)) return pt->name;
        c->op = "permute";
        Onnx__NodeProto *n = ox_node(c, "Transpose", &c->param_init[k], 1, 1);
        if (!n || ox_attr_ints(c, n, "perm", perm, t->ndim) < 0) return NULL;
        memcpy(pt->perm, perm, sizeof(int64_t) * (size_t)t->ndim);
        return pt->name = n->output[0];
    }
    const char *base = cn_get_name(t);
    return const_init(c, t, base && *base ? base : "const");
}

static bool add_vinfo(ox_ctx *c, Onnx__ValueInfoProto *vi) {
    if (!vi || !ox_grow((void **)&c->vinfo, &c->vcap, c->nvinfo + 1, sizeof *c->vinfo)) return false;
    c->vinfo[c->nvinfo++] = vi;
    return true;
}

/* The nodes of one step; the result is named want when want is set. */
static const char *export_step(ox_ctx *c, const ir_step *s, const char **vname, const char *want) {
    const cn_ir *ir = c->ir;
    const cn_op_def *def = s->kind == IRS_OP && s->op != CN_OP_COUNT ? cn_ops[s->op] : NULL;
    c->op = def ? def->name : "a fused step";
    if (!def) return ox_unsup(c, "fused steps are not exported: export at -O1");
    ox_emit_fn emit = ox_emitter(s->op);
    if (!emit) return ox_unsup(c, "ONNX has no equivalent");
    const char **in = ox_alloc(c, sizeof *in * (size_t)(s->nin + 1));
    cn_tensor **it = ox_alloc(c, sizeof *it * (size_t)(s->nin + 1));
    if (!in || !it) return NULL;
    for (int k = 0; k < s->nin; k++) {
        in[k] = vname[s->in[k]];
        it[k] = ir->v[s->in[k]].t;
    }
    size_t before = c->nnodes;
    const cn_tensor *out = ir->v[s->out].t;
    /* Autocast's native products take half inputs to an f32 result, which
     * ONNX's ops do not: the rounded inputs are widened first (what the
     * products compute, up to the order of the sums). */
    if ((def->flags & CN_OPF_AUTOCAST) && out->dtype == CN_F32)
        for (int k = 0; k < s->nin; k++) {
            if (!cn_is_half((cn_dtype)it[k]->dtype)) continue;
            cn_tensor *wide = ox_alloc(c, sizeof *wide);
            if (!wide || !(in[k] = ox_cast(c, in[k], (cn_dtype)it[k]->dtype, CN_F32))) return NULL;
            *wide = *it[k]; /* its shape, read as f32 by the emitter */
            wide->dtype = CN_F32;
            it[k] = wide;
        }
    const char *r = emit(c, s, in, it, out);
    if (!r) return NULL;
    bool made = c->nnodes > before;
    if (want) {
        Onnx__NodeProto *last = ox_last(c);
        if (made && last->n_output >= 1 && last->output[0] == r) last->output[0] = (char *)want;
        else if (!(last = ox_node(c, "Identity", &r, 1, 1))) return NULL;
        else last->output[0] = (char *)want;
        return want;
    }
    /* The shapes Chutney inferred, for ONNX's shape inference to check. */
    if (made && !add_vinfo(c, ox_value_info(c, r, out, false))) return NULL;
    return r;
}

static int export_ir(ox_ctx *c, const char *const *out_names, const cn_onnx_export_opts *o) {
    const cn_ir *ir = c->ir;
    size_t nv = (size_t)(ir->nv ? ir->nv : 1);
    const char **vname = calloc(nv, sizeof *vname), **want = calloc(nv, sizeof *want);
    int32_t *uses = ir_use_counts(ir);
    c->gin = ox_alloc(c, sizeof *c->gin * (size_t)(ir->ninputs + 1));
    c->gout = ox_alloc(c, sizeof *c->gout * (size_t)ir->noutputs);
    int rc = 0;
    if (!vname || !want || !uses || !c->gin || !c->gout) {
        rc = oom();
        goto done;
    }
    /* Inputs and outputs keep their names exactly: they are reserved first.
     * An input's unknown sizes get names (dim_param): the model says which
     * sizes are free. */
    for (int i = 0; i < ir->ninputs && rc == 0; i++) {
        int32_t v = ir->inputs[i];
        const char *nm = cn_get_name(ir->v[v].t);
        char buf[32];
        if (!nm || !*nm) {
            snprintf(buf, sizeof buf, "input_%d", i);
            nm = buf;
        }
        if (ox_name_taken(c, nm)) rc = cn_failc(CN_EINVAL, "export: two graph inputs are named '%s'", nm);
        else if (!(vname[v] = ox_unique_name(c, nm)) ||
                 !(c->gin[i] = ox_value_info(c, vname[v], ir->v[v].t, true)))
            rc = oom();
    }
    for (int i = 0; i < ir->noutputs && rc == 0; i++) {
        int32_t v = ir->outputs[i];
        if (!out_names[i] || !*out_names[i])
            rc = cn_failc(CN_EINVAL, "export: output name %d is empty", i);
        else if (ox_name_taken(c, out_names[i]))
            rc = cn_failc(CN_EINVAL, "export: the name '%s' is given to two outputs, or to an input and an output",
                          out_names[i]);
        else if (ox_name_add(c, out_names[i]) < 0 ||
                 !(c->gout[i] = ox_value_info(c, out_names[i], ir->v[v].t, false)))
            rc = oom();
        if (rc == 0 && ir->v[v].kind == IRV_STEP && !want[v]) want[v] = out_names[i];
    }
    if (o && o->nparams > 0 && (!(c->param_init = calloc((size_t)o->nparams, sizeof *c->param_init)) ||
                                !(c->param_t = calloc((size_t)o->nparams, sizeof *c->param_t))))
        rc = oom();
    for (int32_t v = 0; v < ir->nv && rc == 0; v++)
        if (ir->v[v].kind == IRV_CONST && uses[v] && !(vname[v] = const_value(c, ir->v[v].t, o)))
            rc = oom();
    for (int i = 0; i < ir->ns && rc == 0; i++) {
        const ir_step *s = &ir->s[i];
        if (s->kind == IRS_DEAD) continue;
        if (!(vname[s->out] = export_step(c, s, vname, want[s->out])))
            rc = c->oom ? oom() : CN_EUNSUPPORTED;
    }
    /* Outputs that are inputs, constants, or a second name of a step. */
    for (int i = 0; i < ir->noutputs && rc == 0; i++) {
        int32_t v = ir->outputs[i];
        if (vname[v] != out_names[i]) {
            Onnx__NodeProto *n = ox_node(c, "Identity", &vname[v], 1, 1);
            if (!n) rc = oom();
            else n->output[0] = (char *)out_names[i];
        }
    }
    if (rc == 0 && c->oom) rc = oom();
done:
    free(vname);
    free(want);
    free(uses);
    return rc;
}

static int check_args(cn_graph *g, cn_tensor *const *outputs, int noutputs) {
    if (!g) return cn_failc(CN_EINVAL, "export: graph is NULL");
    if (!outputs || noutputs < 1) return cn_failc(CN_EINVAL, "export: no outputs given");
    for (int i = 0; i < noutputs; i++) {
        if (!outputs[i]) return cn_failc(CN_EINVAL, "export: output %d is NULL", i);
        if (cn_is_symbolic(outputs[i]) && outputs[i]->graph != (struct cn_graph *)g)
            return cn_failc(CN_EINVAL, "export: output %d belongs to another graph", i);
    }
    return 0;
}

/* Protobuf cannot hold a message over 2 GiB (weights would have to go to
 * external data files, which the exporter does not write). */
#define OX_MAX_MODEL ((size_t)INT32_MAX)

static int pack_model(ox_ctx *c, const cn_onnx_export_opts *o, void **data, size_t *size) {
    const cn_ir *ir = c->ir;
    Onnx__GraphProto gp = ONNX__GRAPH_PROTO__INIT;
    gp.name = (char *)(o && o->graph_name ? o->graph_name : "chutney");
    gp.n_node = c->nnodes;
    gp.node = c->nodes;
    gp.n_initializer = c->ninits;
    gp.initializer = c->inits;
    gp.n_input = (size_t)ir->ninputs;
    gp.input = c->gin;
    gp.n_output = (size_t)ir->noutputs;
    gp.output = c->gout;
    gp.n_value_info = c->nvinfo;
    gp.value_info = c->vinfo;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[1] = {&opset};
    opset.domain = (char *)"";
    opset.has_version = true;
    opset.version = OX_OPSET;
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    mp.has_ir_version = true;
    mp.ir_version = OX_IR_VERSION;
    mp.n_opset_import = 1;
    mp.opset_import = opsets;
    mp.producer_name = (char *)"chutney";
    mp.producer_version = (char *)cn_version();
    mp.graph = &gp;
    size_t n = onnx__model_proto__get_packed_size(&mp);
    if (n > OX_MAX_MODEL)
        return cn_failc(CN_EUNSUPPORTED,
                        "export: the model is %zu bytes, over protobuf's 2 GiB limit (external data "
                        "files are not written)", n);
    void *buf = malloc(n ? n : 1);
    if (!buf) return oom();
    if (onnx__model_proto__pack(&mp, buf) != n) {
        free(buf);
        return cn_failc(CN_EINVAL, "export: packing the model failed");
    }
    *data = buf;
    *size = n;
    return 0;
}

static int serialize(cn_graph *g, cn_tensor *const *outputs, int noutputs, void **data,
                     size_t *size, const cn_onnx_export_opts *o) {
    if (check_args(g, outputs, noutputs) < 0) return CN_EINVAL;
    const char **out_names = calloc((size_t)noutputs, sizeof *out_names);
    char (*defaults)[32] = calloc((size_t)noutputs, sizeof *defaults);
    int rc = 0;
    if (!out_names || !defaults) rc = oom();
    for (int i = 0; rc == 0 && i < noutputs; i++) {
        if (noutputs == 1) snprintf(defaults[i], sizeof defaults[i], "output");
        else snprintf(defaults[i], sizeof defaults[i], "output_%d", i);
        out_names[i] = o && o->output_names ? o->output_names[i] : defaults[i];
    }
    ox_ctx c = {0};
    cn_ir *ir = NULL;
    if (rc == 0 && !(ir = build_ir(outputs, noutputs))) rc = CN_EINVAL;
    c.ir = ir;
    if (rc == 0) rc = export_ir(&c, out_names, o);
    if (rc == 0) rc = pack_model(&c, o, data, size);
    ox_ctx_free(&c);
    ir_free(ir);
    free(out_names);
    free(defaults);
    return rc;
}

int cn_onnx_export_buffer(cn_graph *g, cn_tensor *const *outputs, int noutputs, void **data,
                          size_t *size, const cn_onnx_export_opts *opts) {
    if (!data || !size) return cn_failc(CN_EINVAL, "onnx_export_buffer: data or size is NULL");
    *data = NULL;
    *size = 0;
    return serialize(g, outputs, noutputs, data, size, opts);
}

int cn_onnx_export(cn_graph *g, cn_tensor *const *outputs, int noutputs, const char *path,
                   const cn_onnx_export_opts *opts) {
    if (!path) return cn_failc(CN_EINVAL, "onnx_export: path is NULL");
    void *buf = NULL;
    size_t n = 0;
    int rc = serialize(g, outputs, noutputs, &buf, &n, opts);
    if (rc < 0) return rc;
    cn_afile af;
    if ((rc = cn_afile_open(&af, path, "onnx_export")) == 0) {
        if (fwrite(buf, 1, n, af.f) != n) {
            cn_afile_abort(&af);
            rc = cn_failc(CN_EIO, "onnx_export: writing '%s' failed", path);
        } else {
            rc = cn_afile_commit(&af, "onnx_export");
        }
    }
    free(buf);
    return rc;
}

#else /* !CN_HAVE_ONNX */

#define NO_ONNX "built without ONNX support (install libprotobuf-c-dev protobuf-c-compiler libonnx-dev)"

int cn_onnx_export_buffer(cn_graph *g, cn_tensor *const *outputs, int noutputs, void **data,
                          size_t *size, const cn_onnx_export_opts *opts) {
    (void)g, (void)outputs, (void)noutputs, (void)data, (void)size, (void)opts;
    return cn_failc(CN_EUNSUPPORTED, "onnx_export_buffer: " NO_ONNX);
}

int cn_onnx_export(cn_graph *g, cn_tensor *const *outputs, int noutputs, const char *path,
                   const cn_onnx_export_opts *opts) {
    (void)g, (void)outputs, (void)noutputs, (void)path, (void)opts;
    return cn_failc(CN_EUNSUPPORTED, "onnx_export: " NO_ONNX);
}

#endif
