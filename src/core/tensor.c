/* Tensor structs: allocation, reference counts, metadata, element access. */
#include "core.h"
#include "budget.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- allocation and lifetime ---- */

/* Freed tensor structs are kept on a per-thread list: eager code makes and
 * drops one per op, and malloc would dominate small ops. */
static _Thread_local cn_tensor *cn_free_tensors;
static _Thread_local int cn_free_tensor_count;
#define CN_TENSOR_CACHE_MAX 32768

cn_tensor *cn_t_alloc(void) {
    cn_tensor *t = cn_free_tensors;
    if (t) {
        cn_free_tensors = t->grad;
        cn_free_tensor_count--;
        memset(t, 0, sizeof *t);
    } else {
        t = calloc(1, sizeof *t);
        if (!t) return cn_fail("out of memory allocating a tensor");
    }
    t->refcount = 1;
    return t;
}

static void tensor_struct_free(cn_tensor *t) {
    if (cn_free_tensor_count < CN_TENSOR_CACHE_MAX) {
        t->grad = cn_free_tensors; /* reuse the field as the list link */
        cn_free_tensors = t;
        cn_free_tensor_count++;
    } else {
        free(t);
    }
}

cn_tensor *cn_retain(cn_tensor *t) {
    if (t) t->refcount++;
    return t;
}

/* Releasing the last value of a long chain (an RNN unrolled over many steps,
 * a training loop's history) frees nodes that free tensors that free nodes...
 * An explicit work list keeps this off the C stack. */
typedef struct release_list {
    cn_tensor **items;
    size_t n, cap;
    cn_tensor *inline_items[32];
} release_list;

static void release_push(release_list *l, cn_tensor *t) {
    if (--t->refcount > 0) return;
    if (l->n == l->cap) {
        size_t ncap = l->cap * 2;
        cn_tensor **ns = malloc(ncap * sizeof *ns);
        if (!ns) abort(); /* freeing needs memory here: nothing sane is left to do */
        memcpy(ns, l->items, l->n * sizeof *ns);
        if (l->items != l->inline_items) free(l->items);
        l->items = ns;
        l->cap = ncap;
    }
    l->items[l->n++] = t;
}

void cn_release(cn_tensor *t) {
    if (!t) return;
    release_list l;
    l.items = l.inline_items;
    l.n = 0;
    l.cap = 32;
    release_push(&l, t);
    while (l.n > 0) {
        cn_tensor *x = l.items[--l.n];
        cn_storage_release(x->storage);
        cn_node *node = x->node;
        cn_tensor *grad = x->grad, *tangent = x->tangent;
        cn_graph_head *g = (cn_graph_head *)x->graph;
        free(x->name);
        tensor_struct_free(x);
        if (g && --g->refcount == 0) g->destroy(g);
        if (grad) release_push(&l, grad);
        if (tangent) release_push(&l, tangent);
        if (node && --node->refcount == 0) {
            for (int i = 0; i < node->nin; i++) release_push(&l, node->in[i]);
            node->nin = 0; /* its inputs are on the list now */
            node->refcount = 1;
            cn_node_release(node);
        }
    }
    if (l.items != l.inline_items) free(l.items);
}

/* ---- shapes ---- */

int64_t cn_shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

void cn_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

char *cn_fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %" PRId64 : "%" PRId64, shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

char *cn_shape_str(const cn_tensor *t, char *buf, size_t n) {
    if (!t) {
        snprintf(buf, n, "NULL");
        return buf;
    }
    int k = snprintf(buf, n, "%s", cn_dtype_name((cn_dtype)t->dtype));
    if (k >= 0 && (size_t)k < n) cn_fmt_shape(buf + k, n - (size_t)k, t->ndim, t->shape);
    return buf;
}


bool cn_check_shape(const char *fn, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > CN_MAX_DIMS) {
        cn_fail("%s: rank %d is out of range (0..%d)", fn, ndim, CN_MAX_DIMS);
        return false;
    }
    if (ndim > 0 && !shape) {
        cn_fail("%s: shape is NULL for rank %d", fn, ndim);
        return false;
    }
    /* The product skips empty axes, as the strides do: a zero-size tensor
     * must not overflow them either. */
    int64_t m = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            char b[160];
            cn_fail("%s: shape %s has a negative size at axis %d", fn,
                    cn_fmt_shape(b, sizeof b, ndim, shape), i);
            return false;
        }
        if (shape[i] > 0 && m > CN_MAX_NUMEL / shape[i]) {
            char b[160];
            cn_fail("%s: shape %s is too large", fn, cn_fmt_shape(b, sizeof b, ndim, shape));
            return false;
        }
        if (shape[i] > 0) m *= shape[i];
    }
    return true;
}

int cn_norm_axis(const char *fn, int axis, int ndim) {
    int r = ndim > 0 ? ndim : 1; /* a rank-0 tensor accepts axis 0 and -1, like PyTorch */
    if (axis < -r || axis >= r) {
        cn_fail("%s: axis %d is out of range for a tensor of rank %d", fn, axis, ndim);
        return -1;
    }
    return axis < 0 ? axis + r : axis;
}

_Thread_local cn_elem_budget cn_t_budget = {-1, false};

bool cn_t_budget_take(const char *fn, int ndim, const int64_t *shape) {
    int64_t n = cn_shape_numel(ndim, shape);
    if (n <= cn_t_budget.left) {
        cn_t_budget.left -= n;
        return true;
    }
    char b[160];
    cn_t_budget.exceeded = true;
    cn_fail("%s: a tensor of shape %s (%" PRId64 " elements) is more than the %" PRId64
            " elements left of this thread's allocation budget",
            fn, cn_fmt_shape(b, sizeof b, ndim, shape), n, cn_t_budget.left);
    return false;
}

/* ---- creation (owned references, no scope) ---- */

cn_tensor *cn_t_empty(cn_dtype dt, int ndim, const int64_t *shape) {
    if ((unsigned)dt >= CN_DTYPE_COUNT) return cn_fail("empty: invalid dtype %d", (int)dt);
    if (!cn_check_shape("empty", ndim, shape)) return NULL;
    if (CN_UNLIKELY(cn_t_budget.left >= 0) && !cn_t_budget_take("empty", ndim, shape)) return NULL;
    cn_tensor *t = cn_t_alloc();
    if (!t) return NULL;
    int64_t numel = cn_shape_numel(ndim, shape);
    t->storage = cn_storage_new((size_t)numel * cn_dsize(dt));
    if (!t->storage) {
        tensor_struct_free(t);
        char b[160];
        return cn_fail("out of memory allocating a %s tensor of shape %s", cn_dtype_name(dt),
                       cn_fmt_shape(b, sizeof b, ndim, shape));
    }
    t->dtype = (uint8_t)dt;
    t->ndim = (int8_t)ndim;
    t->flags = CN_TF_LEAF;
    if (ndim > 0) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    cn_contiguous_strides(ndim, shape, t->strides);
    return t;
}

cn_tensor *cn_t_zeros(cn_dtype dt, int ndim, const int64_t *shape) {
    cn_tensor *t = cn_t_empty(dt, ndim, shape);
    if (t) memset(t->storage->data, 0, t->storage->nbytes);
    return t;
}

cn_tensor *cn_t_full(cn_dtype dt, int ndim, const int64_t *shape, double v) {
    cn_tensor *t = cn_t_empty(dt, ndim, shape);
    if (!t) return NULL;
    int64_t n = cn_shape_numel(ndim, shape);
    void *p = t->storage->data;
    switch (dt) {
    case CN_F32: {
        float f = (float)v;
        for (int64_t i = 0; i < n; i++) ((float *)p)[i] = f;
        break;
    }
    case CN_F64:
        for (int64_t i = 0; i < n; i++) ((double *)p)[i] = v;
        break;
    default:
        if (n > 0) {
            cn_store_f64(p, dt, 0, v);
            size_t es = cn_dsize(dt);
            for (int64_t i = 1; i < n; i++) memcpy((char *)p + (size_t)i * es, p, es);
        }
        break;
    }
    return t;
}

cn_tensor *cn_t_scalar(cn_dtype dt, double v) { return cn_t_full(dt, 0, NULL, v); }

cn_tensor *cn_t_alias(const cn_tensor *t) {
    cn_tensor *v = cn_t_alloc();
    if (!v) return NULL;
    cn_t_alias_into(v, t);
    return v;
}

void cn_t_alias_into(cn_tensor *v, const cn_tensor *t) {
    v->dtype = t->dtype;
    v->ndim = t->ndim;
    v->offset = t->offset;
    memcpy(v->shape, t->shape, sizeof v->shape);
    memcpy(v->strides, t->strides, sizeof v->strides);
    v->storage = t->storage;
    if (v->storage) __atomic_add_fetch(&v->storage->refcount, 1, __ATOMIC_RELAXED);
    v->graph = t->graph;
    if (v->graph) ((cn_graph_head *)v->graph)->refcount++;
    v->flags = t->flags & CN_TF_SYMBOLIC;
}

cn_tensor *cn_from_buffer(cn_dtype dt, int ndim, const int64_t *shape, void *data,
                          void (*free_fn)(void *)) {
    if ((unsigned)dt >= CN_DTYPE_COUNT) return cn_fail("from_buffer: invalid dtype %d", (int)dt);
    if (!cn_check_shape("from_buffer", ndim, shape)) return NULL;
    if (!data) return cn_fail("from_buffer: data is NULL");
    cn_storage *s = calloc(1, sizeof *s); /* not embedded: the buffer is the caller's */
    cn_tensor *t = s ? cn_t_alloc() : NULL;
    if (!t) {
        free(s);
        return cn_fail("out of memory");
    }
    s->data = data;
    s->nbytes = (size_t)cn_shape_numel(ndim, shape) * cn_dsize(dt);
    s->refcount = 1;
    s->version = 0;
    s->free_fn = free_fn;
    s->owned = false;
    t->storage = s;
    t->dtype = (uint8_t)dt;
    t->ndim = (int8_t)ndim;
    t->flags = CN_TF_LEAF;
    if (ndim > 0) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    cn_contiguous_strides(ndim, shape, t->strides);
    return cn_scope_add(t);
}

/* ---- inspection ---- */

int cn_set_name(cn_tensor *t, const char *name) {
    if (!t) return CN_EINVAL;
    char *copy = NULL;
    if (name) {
        size_t n = strlen(name);
        copy = malloc(n + 1);
        if (!copy) return cn_failc(CN_ENOMEM, "set_name: out of memory");
        memcpy(copy, name, n + 1);
    }
    free(t->name);
    t->name = copy;
    return CN_OK;
}

const char *cn_get_name(const cn_tensor *t) { return t && t->name ? t->name : ""; }

cn_dtype cn_tensor_dtype(const cn_tensor *t) { return t ? (cn_dtype)t->dtype : CN_DTYPE_COUNT; }
int cn_ndim(const cn_tensor *t) { return t ? t->ndim : -1; }
const int64_t *cn_shape(const cn_tensor *t) { return t ? t->shape : NULL; }
const int64_t *cn_strides(const cn_tensor *t) { return t ? t->strides : NULL; }
int64_t cn_offset(const cn_tensor *t) { return t ? t->offset : -1; }
int64_t cn_numel(const cn_tensor *t) { return t ? cn_shape_numel(t->ndim, t->shape) : -1; }

int64_t cn_dim(const cn_tensor *t, int axis) {
    if (!t) return -1;
    int a = cn_norm_axis("dim", axis, t->ndim);
    if (a < 0) return -1;
    return t->ndim ? t->shape[a] : 1;
}

bool cn_is_contiguous(const cn_tensor *t) {
    if (!t) return false;
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 1) continue;
        if (t->shape[i] == 0) return true;
        if (t->strides[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}

void *cn_data(const cn_tensor *t) {
    if (!t || !t->storage) return NULL;
    if (cn_require_cpu("data", t) < 0) return NULL;
    return cn_t_ptr(t);
}

bool cn_shares_storage(const cn_tensor *a, const cn_tensor *b) {
    return a && b && a->storage && a->storage == b->storage;
}

