/* Gradient hooks on tensors (PyTorch's Tensor.register_hook): functions the
 * backward walk calls with a tensor's gradient once it is complete, which
 * may replace it. Few tensors carry hooks, so they live in one table beside
 * the tensors, and a flag on the tensor spares the walk and cn_release a
 * lookup for the rest. */
#include "grad_hooks.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct hook {
    cn_tensor *t; /* not a reference: the entry goes when the tensor does */
    int id;
    cn_grad_hook_fn fn;
    void *ctx;
    void (*free_ctx)(void *);
} hook;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static hook *hooks;
static int nhooks, cap_hooks, next_id = 1;

int cn_add_grad_hook(cn_tensor *t, cn_grad_hook_fn fn, void *ctx, void (*free_ctx)(void *)) {
    if (!t || !fn) return cn_failc(CN_EINVAL, "add_grad_hook: tensor or function is NULL");
    if (!t->requires_grad)
        return cn_failc(CN_EINVAL, "add_grad_hook: cannot register a hook on a tensor that "
                                   "doesn't require gradient");
    if (cn_is_symbolic(t))
        return cn_failc(CN_EUNSUPPORTED, "add_grad_hook: a value of a static graph has no "
                                         "gradient of its own to hook");
    pthread_mutex_lock(&lock);
    int id = -1;
    if (nhooks == cap_hooks) {
        int nc = cap_hooks ? 2 * cap_hooks : 16;
        hook *nh = realloc(hooks, sizeof *nh * (size_t)nc);
        if (nh) {
            hooks = nh;
            cap_hooks = nc;
        }
    }
    if (nhooks < cap_hooks) {
        id = next_id++;
        hooks[nhooks++] = (hook){t, id, fn, ctx, free_ctx};
        t->flags |= CN_TF_HOOKED;
    }
    pthread_mutex_unlock(&lock);
    return id > 0 ? id : cn_failc(CN_ENOMEM, "add_grad_hook: out of memory");
}

/* Takes entry i out (the lock held); its ctx is the caller's to free. */
static hook take(int i) {
    hook h = hooks[i];
    memmove(&hooks[i], &hooks[i + 1], sizeof *hooks * (size_t)(nhooks - i - 1));
    nhooks--;
    bool more = false;
    for (int k = 0; k < nhooks && !more; k++) more = hooks[k].t == h.t;
    if (!more) h.t->flags &= (uint8_t)~CN_TF_HOOKED;
    return h;
}

int cn_remove_grad_hook(cn_tensor *t, int id) {
    hook h = {0};
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nhooks; i++)
        if (hooks[i].t == t && hooks[i].id == id) {
            h = take(i);
            break;
        }
    pthread_mutex_unlock(&lock);
    if (!h.fn) return cn_failc(CN_EINVAL, "remove_grad_hook: no hook %d on this tensor", id);
    if (h.free_ctx) h.free_ctx(h.ctx);
    return CN_OK;
}

void cn_drop_grad_hooks(cn_tensor *t) {
    for (;;) {
        hook h = {0};
        pthread_mutex_lock(&lock);
        for (int i = 0; i < nhooks; i++)
            if (hooks[i].t == t) {
                h = take(i);
                break;
            }
        pthread_mutex_unlock(&lock);
        if (!h.fn) return;
        if (h.free_ctx) h.free_ctx(h.ctx);
    }
}

int cn_run_grad_hooks(cn_tensor *t, cn_tensor **grad) {
    /* In registration order; a hook added or removed by a hook takes
     * effect from the next gradient (ids are increasing: resume after the
     * last one run). */
    int last = 0;
    for (;;) {
        hook h = {0};
        pthread_mutex_lock(&lock);
        for (int i = 0; i < nhooks; i++)
            if (hooks[i].t == t && hooks[i].id > last) {
                h = hooks[i];
                break;
            }
        pthread_mutex_unlock(&lock);
        if (!h.fn) return CN_OK;
        last = h.id;
        cn_tensor *repl = NULL;
        /* What the hook makes is its scope's; the result comes out of it. */
        cn_scope_begin();
        int rc = h.fn(*grad, &repl, h.ctx);
        cn_retain(repl);
        cn_scope_end();
        if (rc < 0) {
            cn_release(repl);
            return CN_EINVAL;
        }
        if (!repl) continue;
        cn_tensor *g = *grad;
        if (repl->ndim != g->ndim || memcmp(repl->shape, g->shape, sizeof(int64_t) * (size_t)g->ndim) ||
            repl->dtype != g->dtype) {
            char b1[128], b2[128];
            cn_failc(CN_EINVAL, "grad hook: the hook returned a %s %s gradient for a %s %s tensor",
                     cn_dtype_name((cn_dtype)repl->dtype),
                     cn_fmt_shape(b1, sizeof b1, repl->ndim, repl->shape),
                     cn_dtype_name((cn_dtype)g->dtype), cn_fmt_shape(b2, sizeof b2, g->ndim, g->shape));
            cn_release(repl);
            return CN_EINVAL;
        }
        cn_release(g);
        *grad = repl;
    }
}
