/* ONNX export: the protobuf side. The messages of the model (nodes,
 * attributes, initializers, value infos) built in the context's arena, and
 * the set of names in use. The driver (onnx_export.c) and the emitters
 * (onnx_export_ops.c) call these. */
#include "onnx_export.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>

#ifdef CN_HAVE_ONNX
#include "fileio.h"

#define OX_MAX_ATTRS 8

/* ---- memory ---- */

void *ox_alloc(ox_ctx *c, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!c->arena || c->arena->cap - c->arena->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        ox_block *b = malloc(sizeof *b + cap);
        if (!b) {
            c->oom = true;
            return NULL;
        }
        b->next = c->arena;
        b->used = 0;
        b->cap = cap;
        c->arena = b;
    }
    void *p = c->arena->data + c->arena->used;
    c->arena->used += n;
    memset(p, 0, n);
    return p;
}

static char *ox_strdup(ox_ctx *c, const char *s) {
    size_t k = strlen(s) + 1;
    char *d = ox_alloc(c, k);
    if (d) memcpy(d, s, k);
    return d;
}

bool ox_grow(void **arr, size_t *cap, size_t need, size_t esize) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, nc * esize);
    if (!p) {
        cn_fail("export: out of memory");
        return false;
    }
    *arr = p;
    *cap = nc;
    return true;
}

/* ---- names ---- */

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
    return h;
}

bool ox_name_taken(const ox_ctx *c, const char *s) {
    if (!c->namecap) return false;
    for (size_t h = name_hash(s) & (c->namecap - 1);; h = (h + 1) & (c->namecap - 1)) {
        if (!c->names[h]) return false;
        if (!strcmp(c->names[h], s)) return true;
    }
}

/* s must live as long as the context (an arena string or the caller's). */
int ox_name_add(ox_ctx *c, const char *s) {
    if ((c->nnames + 1) * 2 > c->namecap) {
        size_t nc = c->namecap ? c->namecap * 2 : 1024;
        const char **nn = calloc(nc, sizeof *nn);
        if (!nn) return CN_ENOMEM;
        for (size_t i = 0; i < c->namecap; i++) {
            if (!c->names[i]) continue;
            size_t h = name_hash(c->names[i]) & (nc - 1);
            while (nn[h]) h = (h + 1) & (nc - 1);
            nn[h] = c->names[i];
        }
        free(c->names);
        c->names = nn;
        c->namecap = nc;
    }
    size_t h = name_hash(s) & (c->namecap - 1);
    while (c->names[h]) h = (h + 1) & (c->namecap - 1);
    c->names[h] = s;
    c->nnames++;
    return 0;
}

/* base, or base_<k> for the first k that is free; registered. */
const char *ox_unique_name(ox_ctx *c, const char *base) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", base);
    for (uint64_t k = 1; ox_name_taken(c, buf); k++) snprintf(buf, sizeof buf, "%.200s_%" PRIu64, base, k);
    char *s = ox_strdup(c, buf);
    if (!s || ox_name_add(c, s) < 0) {
        c->oom = true;
        return NULL;
    }
    return s;
}

static const char *fresh_name(ox_ctx *c) {
    char buf[32];
    do snprintf(buf, sizeof buf, "t%" PRIu64, c->fresh++);
    while (ox_name_taken(c, buf));
    return ox_unique_name(c, buf);
}

/* ---- nodes, attributes, initializers (for the emitters) ---- */

const char *ox_unsup(ox_ctx *c, const char *fmt, ...) {
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    cn_failc(CN_EUNSUPPORTED, "export: %s is not supported (%s)", c->op, reason);
    return NULL;
}

Onnx__NodeProto *ox_node(ox_ctx *c, const char *op, const char *const *in, int nin, int nout) {
    for (int i = 0; i < nin; i++)
        if (!in[i]) return NULL; /* an earlier node of the step failed */
    Onnx__NodeProto *n = ox_alloc(c, sizeof *n);
    char **ins = ox_alloc(c, sizeof *ins * (size_t)(nin ? nin : 1));
    char **outs = ox_alloc(c, sizeof *outs * (size_t)nout);
    Onnx__AttributeProto **attrs = ox_alloc(c, sizeof *attrs * OX_MAX_ATTRS);
    if (!n || !ins || !outs || !attrs ||
        !ox_grow((void **)&c->nodes, &c->ncap, c->nnodes + 1, sizeof *c->nodes)) {
        c->oom = true;
        cn_failc(CN_ENOMEM, "export: out of memory");
        return NULL;
    }
    *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    for (int i = 0; i < nin; i++) ins[i] = (char *)in[i];
    for (int i = 0; i < nout; i++)
        if (!(outs[i] = (char *)fresh_name(c))) {
            cn_failc(CN_ENOMEM, "export: out of memory");
            return NULL;
        }
    n->op_type = (char *)op;
    n->n_input = (size_t)nin;
    n->input = ins;
    n->n_output = (size_t)nout;
    n->output = outs;
    n->attribute = attrs;
    c->nodes[c->nnodes++] = n;
    return n;
}

Onnx__NodeProto *ox_last(ox_ctx *c) { return c->nnodes ? c->nodes[c->nnodes - 1] : NULL; }

const char *ox_op1(ox_ctx *c, const char *op, const char *const *in, int nin) {
    Onnx__NodeProto *n = ox_node(c, op, in, nin, 1);
    return n ? n->output[0] : NULL;
}
const char *ox_unary(ox_ctx *c, const char *op, const char *x) { return ox_op1(c, op, &x, 1); }
const char *ox_binary(ox_ctx *c, const char *op, const char *a, const char *b) {
    const char *in[2] = {a, b};
    return ox_op1(c, op, in, 2);
}

static Onnx__AttributeProto *new_attr(ox_ctx *c, Onnx__NodeProto *n, const char *name,
                                      Onnx__AttributeProto__AttributeType type) {
    if (!n || n->n_attribute >= OX_MAX_ATTRS) return NULL;
    Onnx__AttributeProto *a = ox_alloc(c, sizeof *a);
    if (!a) return NULL;
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)name;
    a->has_type = true;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

int ox_attr_int(ox_ctx *c, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = new_attr(c, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (!a) return CN_ENOMEM;
    a->has_i = true;
    a->i = v;
    return 0;
}

int ox_attr_float(ox_ctx *c, Onnx__NodeProto *n, const char *name, double v) {
    Onnx__AttributeProto *a = new_attr(c, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (!a) return CN_ENOMEM;
    a->has_f = true;
    a->f = (float)v;
    return 0;
}

int ox_attr_ints(ox_ctx *c, Onnx__NodeProto *n, const char *name, const int64_t *v, int k) {
    Onnx__AttributeProto *a = new_attr(c, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *copy = ox_alloc(c, sizeof *copy * (size_t)(k ? k : 1));
    if (!a || !copy) return CN_ENOMEM;
    memcpy(copy, v, sizeof *copy * (size_t)k);
    a->n_ints = (size_t)k;
    a->ints = copy;
    return 0;
}

int ox_attr_str(ox_ctx *c, Onnx__NodeProto *n, const char *name, const char *s) {
    Onnx__AttributeProto *a = new_attr(c, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    if (!a) return CN_ENOMEM;
    a->has_s = true;
    a->s.data = (uint8_t *)s;
    a->s.len = strlen(s);
    return 0;
}

int ox_attr_tensor(ox_ctx *c, Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t) {
    Onnx__AttributeProto *a = new_attr(c, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    if (!a || !t) return CN_ENOMEM;
    a->t = t;
    return 0;
}

int ox_elem_type(cn_dtype dt) {
    switch (dt) {
    case CN_F32: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    case CN_F64: return ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    case CN_F16: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    case CN_BF16: return ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    case CN_I32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    case CN_I64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    case CN_U8: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    case CN_I8: return ONNX__TENSOR_PROTO__DATA_TYPE__INT8;
    case CN_BOOL: return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    default: return ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED;
    }
}

/* A TensorProto of raw little-endian bytes (copied into the arena when
 * the host is big-endian, else borrowed: data must outlive the packing). */
Onnx__TensorProto *ox_tensor_proto(ox_ctx *c, const char *name, cn_dtype dt, int ndim,
                                   const int64_t *shape, const void *data) {
    Onnx__TensorProto *tp = ox_alloc(c, sizeof *tp);
    int64_t *dims = ox_alloc(c, sizeof *dims * (size_t)(ndim ? ndim : 1));
    if (!tp || !dims) return NULL;
    *tp = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    memcpy(dims, shape, sizeof *dims * (size_t)ndim);
    size_t es = cn_dsize(dt), nbytes = (size_t)cn_shape_numel(ndim, shape) * es;
    tp->name = (char *)name;
    tp->n_dims = (size_t)ndim;
    tp->dims = dims;
    tp->has_data_type = true;
    tp->data_type = ox_elem_type(dt);
    tp->has_raw_data = true;
    tp->raw_data.len = nbytes;
    tp->raw_data.data = (uint8_t *)data;
    if (!cn_host_is_le() && es > 1 && nbytes) {
        uint8_t *copy = ox_alloc(c, nbytes);
        if (!copy) return NULL;
        memcpy(copy, data, nbytes);
        cn_byteswap(copy, nbytes / es, es);
        tp->raw_data.data = copy;
    }
    return tp;
}

const char *ox_add_init(ox_ctx *c, Onnx__TensorProto *tp) {
    if (!tp || !ox_grow((void **)&c->inits, &c->icap, c->ninits + 1, sizeof *c->inits)) {
        c->oom = true;
        return NULL;
    }
    c->inits[c->ninits++] = tp;
    return tp->name;
}

/* An initializer for an emitter's small constant (an axis, a shape, a
 * scalar), shared with an earlier equal one: a loop unrolled 28 times asks
 * for the same few again and again. */
static const char *small_init(ox_ctx *c, Onnx__TensorProto *tp) {
    if (!tp) return NULL;
    for (size_t i = 0; i < c->nsmall; i++) {
        const Onnx__TensorProto *o = c->small[i];
        if (o->data_type == tp->data_type && o->n_dims == tp->n_dims &&
            !memcmp(o->dims, tp->dims, sizeof *o->dims * o->n_dims) && o->raw_data.len == tp->raw_data.len &&
            !memcmp(o->raw_data.data, tp->raw_data.data, tp->raw_data.len))
            return o->name;
    }
    if (!(tp->name = (char *)fresh_name(c)) ||
        !ox_grow((void **)&c->small, &c->scap, c->nsmall + 1, sizeof *c->small)) {
        c->oom = true;
        return NULL;
    }
    c->small[c->nsmall++] = tp;
    return ox_add_init(c, tp);
}

const char *ox_const_i64s(ox_ctx *c, const int64_t *v, int n) {
    int64_t *copy = ox_alloc(c, sizeof *copy * (size_t)(n ? n : 1));
    if (!copy) return NULL;
    memcpy(copy, v, sizeof *copy * (size_t)n);
    int64_t shape[1] = {n};
    return small_init(c, ox_tensor_proto(c, NULL, CN_I64, 1, shape, copy));
}

Onnx__TensorProto *ox_tensor_scalar(ox_ctx *c, cn_dtype dt, double v, bool vec) {
    void *buf = ox_alloc(c, 8);
    if (!buf) return NULL;
    cn_store_f64(buf, dt, 0, v);
    int64_t shape[1] = {1};
    return ox_tensor_proto(c, NULL, dt, vec ? 1 : 0, shape, buf);
}

const char *ox_const_scalar(ox_ctx *c, cn_dtype dt, double v) {
    return small_init(c, ox_tensor_scalar(c, dt, v, false));
}

const char *ox_cast(ox_ctx *c, const char *x, cn_dtype from, cn_dtype to) {
    if (from == to || !x) return x;
    Onnx__NodeProto *n = ox_node(c, "Cast", &x, 1, 1);
    if (!n || ox_attr_int(c, n, "to", ox_elem_type(to)) < 0) return NULL;
    return n->output[0];
}

/* ---- graph inputs, outputs and value infos ---- */

Onnx__ValueInfoProto *ox_value_info(ox_ctx *c, const char *name, const cn_tensor *t,
                                    bool symbolic_dims) {
    Onnx__ValueInfoProto *vi = ox_alloc(c, sizeof *vi);
    Onnx__TypeProto *tp = ox_alloc(c, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ox_alloc(c, sizeof *tt);
    Onnx__TensorShapeProto *sp = ox_alloc(c, sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dims = ox_alloc(c, sizeof *dims * (size_t)(t->ndim + 1));
    if (!vi || !tp || !tt || !sp || !dims) return NULL;
    *vi = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    *tp = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    *tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    *sp = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    for (int d = 0; d < t->ndim; d++) {
        Onnx__TensorShapeProto__Dimension *dim = ox_alloc(c, sizeof *dim);
        if (!dim) return NULL;
        *dim = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        if (t->shape[d] >= 0) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = t->shape[d];
        } else if (symbolic_dims) {
            char buf[300];
            snprintf(buf, sizeof buf, "%.250s_dim%d", name, d);
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            if (!(dim->dim_param = ox_strdup(c, buf))) return NULL;
        }
        dims[d] = dim;
    }
    sp->n_dim = (size_t)t->ndim;
    sp->dim = dims;
    tt->has_elem_type = true;
    tt->elem_type = ox_elem_type((cn_dtype)t->dtype);
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = (char *)name;
    vi->type = tp;
    return vi;
}

void ox_ctx_free(ox_ctx *c) {
    while (c->arena) {
        ox_block *b = c->arena->next;
        free(c->arena);
        c->arena = b;
    }
    for (size_t i = 0; i < c->nheld; i++) cn_release(c->held[i].t);
    free(c->held);
    free(c->param_init);
    free(c->param_t);
    free(c->small);
    free(c->nodes);
    free(c->inits);
    free(c->vinfo);
    free(c->names);
}

#endif /* CN_HAVE_ONNX */
