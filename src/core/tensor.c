/* Tensor structs: allocation, reference counts, metadata, element access. */
#include "core.h"
#include "grad_hooks.h"
#include "budget.h"
#include "thread_state.h"

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

/* AddressSanitizer cannot see a struct on the free list as freed: it is
 * poisoned by hand there, all but the 8 bytes holding the magic, which the
 * public entry points read to report a use after release as an error, and
 * the list's link (grad): LeakSanitizer follows no pointer stored in
 * poisoned memory, and would report the whole list as leaked. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CN_ASAN 1
#endif
#endif
#if !defined(CN_ASAN) && defined(__SANITIZE_ADDRESS__)
#define CN_ASAN 1
#endif
#ifdef CN_ASAN
void __asan_poison_memory_region(void const volatile *addr, size_t size);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
static void t_bury(cn_tensor *t) {
    __asan_poison_memory_region(t, sizeof *t);
    __asan_unpoison_memory_region(&t->magic, sizeof t->magic);
    __asan_unpoison_memory_region(&t->grad, sizeof t->grad);
}
static void t_unbury(cn_tensor *t) { __asan_unpoison_memory_region(t, sizeof *t); }
#else
static inline void t_bury(cn_tensor *t) { (void)t; }
static inline void t_unbury(cn_tensor *t) { (void)t; }
#endif

/* Debug mode: CN_DEBUG_API=1 in the environment (read once, by the first
 * release or check), or built in by -DCHUTNEY_DEBUG_API=ON. */
#ifndef CN_DEBUG_API_DEFAULT
#define CN_DEBUG_API_DEFAULT 0
#endif
static int debug_api_state = -1; /* -1: not read yet */

static __attribute__((cold, noinline)) int debug_api_read(void) {
    const char *e = getenv("CN_DEBUG_API");
    int s = e && *e ? (strcmp(e, "0") != 0) : CN_DEBUG_API_DEFAULT;
    __atomic_store_n(&debug_api_state, s, __ATOMIC_RELAXED);
    return s;
}

/* Every release asks: one load and a compare once the variable is read. */
static inline bool debug_api_on(void) {
    int s = __atomic_load_n(&debug_api_state, __ATOMIC_RELAXED);
    if (CN_UNLIKELY(s < 0)) s = debug_api_read();
    return s > 0;
}

bool cn_debug_api(void) { return debug_api_on(); }

/* Debug mode holds the last released structs back from the free list, so
 * that a use soon after a release finds the struct still dead rather than
 * recycled into another tensor (which no check could tell apart). */
#define CN_QUARANTINE 4096
static _Thread_local cn_tensor **quarantine;
static _Thread_local unsigned quarantine_n, quarantine_head;

cn_tensor *cn_t_alloc(void) {
    cn_tensor *t = cn_free_tensors;
    if (t) {
        t_unbury(t);
        cn_free_tensors = t->grad;
        cn_free_tensor_count--;
        memset(t, 0, sizeof *t);
    } else {
        t = calloc(1, sizeof *t);
        if (!t) return cn_fail("out of memory allocating a tensor");
        cn_thread_state_keep();
    }
    t->refcount = 1;
    t->magic = CN_T_LIVE;
    return t;
}

static void tensor_struct_recycle(cn_tensor *t) {
    t->magic = CN_T_DEAD;
    if (cn_free_tensor_count < CN_TENSOR_CACHE_MAX) {
        if (!cn_free_tensors) cn_thread_state_keep(); /* a thread that only releases */
        t->grad = cn_free_tensors; /* reuse the field as the list link */
        cn_free_tensors = t;
        cn_free_tensor_count++;
        t_bury(t);
    } else {
        free(t);
    }
}

/* What a dead struct keeps for the message, in fields a dead tensor has no
 * use for: the op that made it in walk_idx, its name in strides. */
#define DEAD_NAME(t) ((char *)(t)->strides)

/* Debug mode: clear what points elsewhere, so an access through a stale
 * pointer faults instead of reading freed memory, and quarantine. */
static __attribute__((cold, noinline)) void tensor_struct_quarantine(cn_tensor *t, int op, const char *name) {
    t->storage = NULL;
    t->node = NULL;
    t->grad = t->tangent = NULL;
    t->graph = NULL;
    t->name = NULL;
    t->offset = 0;
    t->walk_idx = op;
    memset(t->strides, 0, sizeof t->strides);
    if (name) snprintf(DEAD_NAME(t), sizeof t->strides, "%s", name);
    t->magic = CN_T_DEAD;
    if (!quarantine && !(quarantine = calloc(CN_QUARANTINE, sizeof *quarantine))) {
        tensor_struct_recycle(t);
        return;
    }
    /* A ring: the slot at the head is the oldest once it is full. */
    if (quarantine_n == CN_QUARANTINE) {
        cn_tensor *old = quarantine[quarantine_head];
        t_unbury(old);
        tensor_struct_recycle(old);
    } else {
        quarantine_n++;
    }
    quarantine[quarantine_head] = t;
    quarantine_head = (quarantine_head + 1) % CN_QUARANTINE;
    t_bury(t);
}

static void tensor_struct_free(cn_tensor *t) { tensor_struct_recycle(t); }

void cn_t_struct_cache_flush(void) {
    while (cn_free_tensors) {
        cn_tensor *t = cn_free_tensors;
        t_unbury(t);
        cn_free_tensors = t->grad;
        free(t);
    }
    cn_free_tensor_count = 0;
}

int cn_t_dead_fail(const char *fn, const cn_tensor *t) {
    /* The struct may be poisoned (ASan): read a copy made with it unpoisoned. */
    cn_tensor c;
    bool dead = t->magic == CN_T_DEAD;
    if (dead) t_unbury((cn_tensor *)t);
    memcpy(&c, t, sizeof c);
    if (dead) t_bury((cn_tensor *)t);
    char shape[200], made[160] = "";
    if ((unsigned)c.dtype < CN_DTYPE_COUNT && c.ndim >= 0 && c.ndim <= CN_MAX_DIMS)
        cn_shape_str(&c, shape, sizeof shape);
    else
        snprintf(shape, sizeof shape, "(dtype and shape unknown)");
    if (c.magic == CN_T_DEAD && cn_debug_api()) {
        DEAD_NAME(&c)[sizeof c.strides - 1] = '\0';
        int k = 0;
        if (DEAD_NAME(&c)[0]) k = snprintf(made, sizeof made, " '%s'", DEAD_NAME(&c));
        if (c.walk_idx >= 0 && k >= 0 && (size_t)k < sizeof made) {
            if (c.walk_idx < CN_OP_COUNT)
                snprintf(made + k, sizeof made - (size_t)k, " made by %s", cn_op_names[c.walk_idx]);
            else
                snprintf(made + k, sizeof made - (size_t)k, " made by op #%d", (int)c.walk_idx);
        }
    }
    if (c.magic != CN_T_DEAD)
        return cn_failc(CN_EINVAL, "%s: %p is not a tensor (never made by Chutney, or long since freed)", fn,
                        (const void *)t);
    return cn_failc(CN_EINVAL, "%s: tensor %s%s was already released (a use after cn_release, or a release "
                    "too many)%s", fn, shape, made,
                    cn_debug_api() ? "" : "; run with CN_DEBUG_API=1 to catch this longer after the release");
}

cn_tensor *cn_retain(cn_tensor *t) {
    CN_CHECK_LIVE("retain", t, NULL);
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

static __attribute__((cold, noinline)) void release_dead(const cn_tensor *t) { cn_t_dead_fail("release", t); }

static __attribute__((noinline)) void release_grow(release_list *l) {
    size_t ncap = l->cap * 2;
    cn_tensor **ns = malloc(ncap * sizeof *ns);
    if (!ns) abort(); /* freeing needs memory here: nothing sane is left to do */
    memcpy(ns, l->items, l->n * sizeof *ns);
    if (l->items != l->inline_items) free(l->items);
    l->items = ns;
    l->cap = ncap;
}

static inline __attribute__((always_inline)) void release_push(release_list *l, cn_tensor *t) {
    /* Released once too often: the struct may already hold another tensor
     * (or sit on the free list, where this would corrupt it). */
    if (cn_t_is_dead(t)) {
        release_dead(t);
        return;
    }
    if (--t->refcount > 0) return;
    if (CN_UNLIKELY(l->n == l->cap)) release_grow(l);
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
        if (CN_UNLIKELY(cn_has_grad_hooks(x))) cn_drop_grad_hooks(x);
        cn_storage_release(x->storage);
        cn_node *node = x->node;
        cn_tensor *grad = x->grad, *tangent = x->tangent;
        cn_graph_head *g = (cn_graph_head *)x->graph;
        char *name = x->name;
        if (CN_UNLIKELY(debug_api_on()))
            tensor_struct_quarantine(x, node ? (int)node->op : -1, name);
        else
            tensor_struct_recycle(x);
        free(name);
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
    CN_CHECK_LIVE("set_name", t, CN_EINVAL);
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

/* Metadata of a dead tensor reads as that of NULL, with the error set. */
const char *cn_get_name(const cn_tensor *t) {
    CN_CHECK_LIVE("get_name", t, "");
    return t && t->name ? t->name : "";
}

cn_dtype cn_tensor_dtype(const cn_tensor *t) {
    CN_CHECK_LIVE("tensor_dtype", t, CN_DTYPE_COUNT);
    return t ? (cn_dtype)t->dtype : CN_DTYPE_COUNT;
}
int cn_ndim(const cn_tensor *t) {
    CN_CHECK_LIVE("ndim", t, -1);
    return t ? t->ndim : -1;
}
const int64_t *cn_shape(const cn_tensor *t) {
    CN_CHECK_LIVE("shape", t, NULL);
    return t ? t->shape : NULL;
}
const int64_t *cn_strides(const cn_tensor *t) {
    CN_CHECK_LIVE("strides", t, NULL);
    return t ? t->strides : NULL;
}
int64_t cn_offset(const cn_tensor *t) {
    CN_CHECK_LIVE("offset", t, -1);
    return t ? t->offset : -1;
}
int64_t cn_numel(const cn_tensor *t) {
    CN_CHECK_LIVE("numel", t, -1);
    return t ? cn_shape_numel(t->ndim, t->shape) : -1;
}

int64_t cn_dim(const cn_tensor *t, int axis) {
    if (!t) return -1;
    CN_CHECK_LIVE("dim", t, -1);
    int a = cn_norm_axis("dim", axis, t->ndim);
    if (a < 0) return -1;
    return t->ndim ? t->shape[a] : 1;
}

bool cn_is_contiguous(const cn_tensor *t) {
    if (!t) return false;
    CN_CHECK_LIVE("is_contiguous", t, false);
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
    CN_CHECK_LIVE("data", t, NULL);
    if (!t || !t->storage) return NULL;
    if (cn_require_cpu("data", t) < 0) return NULL;
    return cn_t_ptr(t);
}

int cn_mark_written(cn_tensor *t) {
    CN_CHECK_LIVE("mark_written", t, CN_EINVAL);
    if (!t) return cn_failc(CN_EINVAL, "mark_written: t is NULL");
    if (!t->storage) return cn_failc(CN_EINVAL, "mark_written: t has no data (a symbolic tensor)");
    cn_storage_bump(t->storage);
    return CN_OK;
}

bool cn_shares_storage(const cn_tensor *a, const cn_tensor *b) {
    CN_CHECK_LIVE("shares_storage", a, false);
    CN_CHECK_LIVE("shares_storage", b, false);
    return a && b && a->storage && a->storage == b->storage;
}

