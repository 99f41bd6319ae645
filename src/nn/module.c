/* The module base: registration of parameters, buffers and children, the
 * tree walks (named parameters, state), training mode, forward, freeing,
 * and Sequential. */
#include "nn.h"

#include <stdlib.h>

cn_module *cn_module_new(const cn_module_vtable *vt, size_t size) {
    if (!vt || !vt->forward) return cn_fail("module_new: the vtable or its forward is NULL");
    if (size < sizeof(cn_module))
        return cn_fail("module_new: size %zu is smaller than cn_module (%zu)", size,
                       sizeof(cn_module));
    cn_module *m = calloc(1, size);
    if (!m) return cn_fail("module_new: out of memory");
    m->vt = vt;
    m->training = true;
    return m;
}

const char *cn_module_type(const cn_module *m) {
    return m && m->vt && m->vt->type ? m->vt->type : "";
}

/* ---- registration ---- */

static bool name_taken(const cn_module *m, const char *name) {
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params[i].name, name)) return true;
    for (int i = 0; i < m->nbuffers; i++)
        if (!strcmp(m->buffers[i].name, name)) return true;
    for (int i = 0; i < m->nchildren; i++)
        if (!strcmp(m->children[i].name, name)) return true;
    return false;
}

static int check_name(const char *fn, const cn_module *m, const char *name) {
    if (!name || !*name || strchr(name, '.'))
        return cn_failc(CN_EINVAL, "%s: name \"%s\" must be non-empty and contain no '.'", fn,
                        name ? name : "(null)");
    if (name_taken(m, name))
        return cn_failc(CN_EINVAL, "%s: %s already has something named \"%s\"", fn,
                        cn_module_type(m), name);
    return CN_OK;
}

/* Grow an array of n elements of size sz to hold one more. */
static int grow(void **arr, int n, int *cap, size_t sz) {
    if (n < *cap) return CN_OK;
    int ncap = *cap ? *cap * 2 : 4;
    void *na = realloc(*arr, (size_t)ncap * sz);
    if (!na) return cn_failc(CN_ENOMEM, "module: out of memory");
    *arr = na;
    *cap = ncap;
    return CN_OK;
}

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Takes t's reference (the caller's is handed over). */
static int add_tensor(const char *fn, cn_module *m, bool param, const char *name, cn_tensor *t) {
    if (!m || !t) {
        cn_release(t);
        return m ? CN_EINVAL : cn_failc(CN_EINVAL, "%s: module is NULL", fn);
    }
    int rc = check_name(fn, m, name);
    if (rc == CN_OK && param) {
        if (cn_is_symbolic(t) || t->node)
            rc = cn_failc(CN_EINVAL, "%s: parameter \"%s\" must be a leaf with data (not made by "
                                     "an op or a placeholder)", fn, name);
        else
            rc = cn_set_requires_grad(t, true);
    }
    if (rc == CN_OK && !param && cn_is_symbolic(t))
        rc = cn_failc(CN_EINVAL, "%s: buffer \"%s\" must have data", fn, name);
    cn_named_tensor **arr = param ? &m->params : &m->buffers;
    int *n = param ? &m->nparams : &m->nbuffers;
    if (rc == CN_OK)
        rc = grow((void **)arr, *n, param ? &m->cap_params : &m->cap_buffers, sizeof **arr);
    char *nm = rc == CN_OK ? dupstr(name) : NULL;
    if (rc == CN_OK && !nm) rc = cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    if (rc != CN_OK) {
        cn_release(t);
        return rc;
    }
    (*arr)[*n].name = nm;
    (*arr)[*n].t = t;
    (*n)++;
    return CN_OK;
}

int cn_module_add_param(cn_module *m, const char *name, cn_tensor *t) {
    return add_tensor("module_add_param", m, true, name, t ? cn_retain(t) : NULL);
}

int cn_module_add_buffer(cn_module *m, const char *name, cn_tensor *t) {
    return add_tensor("module_add_buffer", m, false, name, t ? cn_retain(t) : NULL);
}

cn_tensor *cn_nn_new_param(cn_module *m, const char *name, int ndim, const int64_t *shape) {
    cn_tensor *t = cn_t_full_on(cn_current_device(), CN_F32, ndim, shape, 0);
    if (!t) return NULL;
    return add_tensor("module", m, true, name, t) == CN_OK ? t : NULL;
}

cn_tensor *cn_nn_new_buffer(cn_module *m, const char *name, cn_dtype dt, int ndim,
                            const int64_t *shape, double value) {
    cn_tensor *t = cn_t_full_on(cn_current_device(), dt, ndim, shape, value);
    if (!t) return NULL;
    return add_tensor("module", m, false, name, t) == CN_OK ? t : NULL;
}

static bool in_tree(const cn_module *root, const cn_module *x) {
    if (root == x) return true;
    for (int i = 0; i < root->nchildren; i++)
        if (in_tree(root->children[i].m, x)) return true;
    return false;
}

int cn_module_add_child(cn_module *m, const char *name, cn_module *child) {
    const char *fn = "module_add_child";
    if (!child) {
        /* The child's constructor failed and said why. */
        return m ? CN_EINVAL : cn_failc(CN_EINVAL, "%s: module is NULL", fn);
    }
    if (!m) {
        cn_module_free(child);
        return cn_failc(CN_EINVAL, "%s: module is NULL", fn);
    }
    int rc = check_name(fn, m, name);
    if (rc == CN_OK && in_tree(child, m)) {
        /* m itself is not freed with the child: it is still the caller's. */
        return cn_failc(CN_EINVAL, "%s: \"%s\" would make the module its own descendant", fn,
                        name);
    }
    if (rc == CN_OK) rc = grow((void **)&m->children, m->nchildren, &m->cap_children,
                               sizeof *m->children);
    char *nm = rc == CN_OK ? dupstr(name) : NULL;
    if (rc == CN_OK && !nm) rc = cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    if (rc != CN_OK) {
        cn_module_free(child);
        return rc;
    }
    m->children[m->nchildren].name = nm;
    m->children[m->nchildren].m = child;
    m->nchildren++;
    return CN_OK;
}

/* ---- lookups ---- */

cn_tensor *cn_module_param(const cn_module *m, const char *name) {
    if (!m || !name) return NULL;
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params[i].name, name)) return m->params[i].t;
    return NULL;
}

cn_module *cn_module_child(const cn_module *m, const char *name) {
    if (!m || !name) return NULL;
    for (int i = 0; i < m->nchildren; i++)
        if (!strcmp(m->children[i].name, name)) return m->children[i].m;
    return NULL;
}

cn_tensor *cn_module_find(const cn_module *m, const char *name) {
    if (!m || !name) return cn_fail("module_find: module or name is NULL");
    const cn_module *cur = m;
    const char *p = name;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (!dot) {
            for (int i = 0; i < cur->nparams; i++)
                if (!strcmp(cur->params[i].name, p)) return cur->params[i].t;
            for (int i = 0; i < cur->nbuffers; i++)
                if (!strcmp(cur->buffers[i].name, p)) return cur->buffers[i].t;
            break;
        }
        const cn_module *next = NULL;
        for (int i = 0; i < cur->nchildren && !next; i++)
            if (strlen(cur->children[i].name) == len && !strncmp(cur->children[i].name, p, len))
                next = cur->children[i].m;
        if (!next) break;
        cur = next;
        p = dot + 1;
    }
    return cn_fail("module_find: %s has no parameter or buffer \"%s\"", cn_module_type(m), name);
}

int cn_module_set_tensor(cn_module *m, const char *name, cn_tensor *t) {
    const char *fn = "module_set_tensor";
    if (!m || !name || !t) return cn_failc(CN_EINVAL, "%s: module, name or tensor is NULL", fn);
    cn_named_tensor *slot = NULL;
    bool param = false;
    for (int i = 0; i < m->nparams && !slot; i++)
        if (!strcmp(m->params[i].name, name)) slot = &m->params[i], param = true;
    for (int i = 0; i < m->nbuffers && !slot; i++)
        if (!strcmp(m->buffers[i].name, name)) slot = &m->buffers[i];
    if (!slot)
        return cn_failc(CN_EINVAL, "%s: %s has no parameter or buffer \"%s\"", fn,
                        cn_module_type(m), name);
    cn_tensor *old = slot->t;
    if (t == old) return CN_OK;
    char b1[128], b2[128], d1[32], d2[32];
    /* The layer's forward reads the tensor as it read the old one. */
    if (t->dtype != old->dtype || t->ndim != old->ndim ||
        memcmp(t->shape, old->shape, sizeof(int64_t) * (size_t)t->ndim) ||
        !cn_device_equal(cn_tensor_device(t), cn_tensor_device(old)))
        return cn_failc(CN_EINVAL, "%s: %s.%s is %s %s on %s; the new tensor is %s %s on %s "
                                   "(they must agree)",
                        fn, cn_module_type(m), name, cn_dtype_name(old->dtype),
                        cn_fmt_shape(b1, sizeof b1, old->ndim, old->shape),
                        cn_device_str(cn_tensor_device(old), d1, sizeof d1), cn_dtype_name(t->dtype),
                        cn_fmt_shape(b2, sizeof b2, t->ndim, t->shape),
                        cn_device_str(cn_tensor_device(t), d2, sizeof d2));
    if (cn_is_symbolic(t) || (param && t->node))
        return cn_failc(CN_EINVAL, "%s: %s.%s must be replaced by a %s with data%s", fn,
                        cn_module_type(m), name, param ? "leaf" : "tensor",
                        param ? " (not made by an op or a placeholder)" : "");
    slot->t = cn_retain(t);
    cn_release(old);
    return CN_OK;
}

/* ---- forward, mode, gradients ---- */

cn_tensor *cn_module_forward(cn_module *m, cn_tensor *x) {
    if (!m || !m->vt || !m->vt->forward) return cn_fail("module_forward: module is NULL");
    if (!x) return NULL;
    cn_scope_begin();
    cn_tensor *y = m->vt->forward(m, x);
    cn_keep(y);
    cn_scope_end();
    return y;
}

void cn_module_train(cn_module *m, bool training) {
    if (!m) return;
    m->training = training;
    for (int i = 0; i < m->nchildren; i++) cn_module_train(m->children[i].m, training);
}

void cn_module_zero_grad(cn_module *m) {
    if (!m) return;
    for (int i = 0; i < m->nparams; i++) cn_zero_grad(m->params[i].t);
    for (int i = 0; i < m->nchildren; i++) cn_module_zero_grad(m->children[i].m);
}

void cn_module_free(cn_module *m) {
    if (!m) return;
    if (m->vt && m->vt->free_impl) m->vt->free_impl(m);
    for (int i = 0; i < m->nchildren; i++) {
        cn_module_free(m->children[i].m);
        free(m->children[i].name);
    }
    for (int i = 0; i < m->nparams; i++) {
        cn_release(m->params[i].t);
        free(m->params[i].name);
    }
    for (int i = 0; i < m->nbuffers; i++) {
        cn_release(m->buffers[i].t);
        free(m->buffers[i].name);
    }
    free(m->children);
    free(m->params);
    free(m->buffers);
    free(m);
}

/* ---- tree walks ---- */

typedef struct walk_list {
    cn_tensor **t;
    char **names;
    int n, cap;
    bool buffers; /* state: parameters and buffers */
    bool dedup;   /* parameters: a tied tensor once */
} walk_list;

static int push(walk_list *L, const char *prefix, const char *name, cn_tensor *t) {
    if (L->dedup)
        for (int i = 0; i < L->n; i++)
            if (L->t[i] == t) return CN_OK;
    if (L->n == L->cap) {
        int ncap = L->cap ? L->cap * 2 : 16;
        cn_tensor **nt = realloc(L->t, (size_t)ncap * sizeof *nt);
        if (nt) L->t = nt;
        char **nn = nt ? realloc(L->names, (size_t)ncap * sizeof *nn) : NULL;
        if (nn) L->names = nn;
        if (!nt || !nn) return cn_failc(CN_ENOMEM, "module: out of memory listing tensors");
        L->cap = ncap;
    }
    size_t pl = strlen(prefix), nl = strlen(name);
    char *s = malloc(pl + nl + 1);
    if (!s) return cn_failc(CN_ENOMEM, "module: out of memory listing tensors");
    memcpy(s, prefix, pl);
    memcpy(s + pl, name, nl + 1);
    L->t[L->n] = t;
    L->names[L->n++] = s;
    return CN_OK;
}

static int walk(const cn_module *m, const char *prefix, walk_list *L) {
    for (int i = 0; i < m->nparams; i++)
        if (push(L, prefix, m->params[i].name, m->params[i].t) < 0) return CN_ENOMEM;
    if (L->buffers)
        for (int i = 0; i < m->nbuffers; i++)
            if (push(L, prefix, m->buffers[i].name, m->buffers[i].t) < 0) return CN_ENOMEM;
    for (int i = 0; i < m->nchildren; i++) {
        size_t pl = strlen(prefix), nl = strlen(m->children[i].name);
        char *sub = malloc(pl + nl + 2);
        if (!sub) return cn_failc(CN_ENOMEM, "module: out of memory listing tensors");
        memcpy(sub, prefix, pl);
        memcpy(sub + pl, m->children[i].name, nl);
        sub[pl + nl] = '.';
        sub[pl + nl + 1] = 0;
        int rc = walk(m->children[i].m, sub, L);
        free(sub);
        if (rc < 0) return rc;
    }
    return CN_OK;
}

/* Hands the list out as two malloc'd blocks (the names' strings inside the
 * names block) and frees the working copy. */
static int list_out(const char *fn, const cn_module *m, bool buffers, bool dedup,
                    cn_tensor ***tensors, const char ***names) {
    if (tensors) *tensors = NULL;
    if (names) *names = NULL;
    if (!m) return cn_failc(CN_EINVAL, "%s: module is NULL", fn);
    walk_list L = {.buffers = buffers, .dedup = dedup};
    int rc = walk(m, "", &L);
    size_t sbytes = 0;
    for (int i = 0; i < L.n; i++) sbytes += strlen(L.names[i]) + 1;
    cn_tensor **tout = NULL;
    char **nout = NULL;
    if (rc == CN_OK && L.n > 0) {
        tout = tensors ? malloc((size_t)L.n * sizeof *tout) : NULL;
        nout = names ? malloc((size_t)L.n * sizeof *nout + sbytes) : NULL;
        if ((tensors && !tout) || (names && !nout)) {
            rc = cn_failc(CN_ENOMEM, "%s: out of memory", fn);
            free(tout);
            free(nout);
            tout = NULL;
            nout = NULL;
        }
    }
    if (rc == CN_OK && L.n > 0) {
        char *s = nout ? (char *)(nout + L.n) : NULL;
        for (int i = 0; i < L.n; i++) {
            if (tout) tout[i] = L.t[i];
            if (nout) {
                size_t len = strlen(L.names[i]) + 1;
                memcpy(s, L.names[i], len);
                nout[i] = s;
                s += len;
            }
        }
    }
    for (int i = 0; i < L.n; i++) free(L.names[i]);
    free(L.names);
    free(L.t);
    if (rc < 0) return rc;
    if (tensors) *tensors = tout;
    if (names) *names = (const char **)nout;
    return L.n;
}

int cn_module_parameters(const cn_module *m, cn_tensor ***params, const char ***names) {
    return list_out("module_parameters", m, false, true, params, names);
}

int cn_module_state(const cn_module *m, cn_tensor ***tensors, const char ***names) {
    return list_out("module_state", m, true, false, tensors, names);
}

/* t's contents moved to d in place: the struct stays (modules and users
 * hold it), its storage is replaced. */
static int move_tensor(cn_tensor *t, cn_device d) {
    if (!t || cn_is_symbolic(t) || cn_device_equal(cn_t_device(t), d)) return CN_OK;
    cn_tensor *c = cn_t_to(t, d, false);
    if (!c) return CN_EINVAL;
    cn_storage *old = t->storage;
    t->storage = c->storage;
    __atomic_add_fetch(&c->storage->refcount, 1, __ATOMIC_ACQ_REL);
    t->offset = c->offset;
    memcpy(t->strides, c->strides, sizeof t->strides);
    cn_release(c);
    cn_storage_release(old);
    cn_storage_bump(t->storage);
    if (t->grad) {
        cn_tensor *g = cn_t_to(t->grad, d, false);
        if (!g) return CN_EINVAL;
        cn_release(t->grad);
        t->grad = g;
    }
    return CN_OK;
}

int cn_module_to(cn_module *m, cn_device d) {
    if (!m) return cn_failc(CN_EINVAL, "module_to: the module is NULL");
    if (!cn_backend_for(d, "module_to")) return CN_EINVAL;
    cn_tensor **ts;
    int n = cn_module_state(m, &ts, NULL);
    if (n < 0) return n;
    int rc = CN_OK;
    for (int i = 0; i < n && rc == CN_OK; i++) rc = move_tensor(ts[i], d);
    free(ts);
    return rc;
}

int64_t cn_module_num_params(const cn_module *m) {
    cn_tensor **p;
    int n = cn_module_parameters(m, &p, NULL);
    if (n < 0) return n;
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += cn_numel(p[i]);
    free(p);
    return total;
}

/* ---- Sequential ---- */

static cn_tensor *seq_forward(cn_module *m, cn_tensor *x) {
    cn_tensor *y = cn_scope_add(cn_retain(x));
    for (int i = 0; i < m->nchildren && y; i++) y = cn_module_forward(m->children[i].m, y);
    return y;
}

static const cn_module_vtable seq_vt = {"Sequential", seq_forward, NULL};

int cn_nn_sequential_append(cn_module *seq, cn_module *m) {
    if (!seq || seq->vt != &seq_vt) {
        cn_module_free(m);
        return cn_failc(CN_EINVAL, "sequential_append: not a Sequential module");
    }
    char name[24];
    snprintf(name, sizeof name, "%d", seq->nchildren);
    return cn_module_add_child(seq, name, m);
}

cn_module *cn_nn_sequential(cn_module *const *modules, int n) {
    bool bad = n < 0 || (n > 0 && !modules);
    for (int i = 0; i < n && !bad; i++) bad = !modules[i];
    if (bad) {
        for (int i = 0; modules && i < n; i++) cn_module_free(modules[i]);
        /* A NULL module's constructor has already said what was wrong. */
        if (n < 0 || !modules) return cn_fail("sequential: bad module list (n = %d)", n);
        return NULL;
    }
    cn_module *s = cn_module_new(&seq_vt, sizeof(cn_module));
    if (!s) {
        for (int i = 0; i < n; i++) cn_module_free(modules[i]);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (cn_nn_sequential_append(s, modules[i]) < 0) {
            for (int j = i + 1; j < n; j++) cn_module_free(modules[j]);
            cn_module_free(s);
            return NULL;
        }
    return s;
}
