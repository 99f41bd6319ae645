/* Data-parallel training: every rank holds the whole model, trains on its
 * own shard of each global batch, and the gradients are averaged over the
 * ranks before each optimiser step (chutney.h, cn_ddp).
 *
 * Buckets: the parameters in reverse order (the backward pass finishes the
 * last layers first) are cut into buckets of about bucket_bytes. In eager
 * mode the gradient-ready hook (cn_set_grad_ready_hook) counts each
 * bucket's final gradients; a complete bucket goes to the communication
 * thread, which packs its gradients into one buffer, averages it over the
 * ranks (cn_dist_allreduce_raw: a ring, fixed order) and unpacks it, while
 * the backward pass goes on. The thread takes buckets strictly in bucket
 * order, so every rank issues the same collectives in the same order even
 * if their gradients become final in another. cn_optimizer_step (through
 * the optimiser's pre-step hook) releases the buckets still waiting
 * (compiled training steps, which have no hook, release all of them there;
 * a parameter without a gradient on this step gets zeros, so every rank
 * sends the same buckets) and waits for the thread.
 *
 * Threads: the tensor structs are touched only on the caller's thread (the
 * hook and the pre-step run there); the communication thread sees only raw
 * host pointers recorded by them. */
#include "nn.h"
#include "../backend/dist.h"
#include "optim.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct ddp_param {
    cn_tensor *p;  /* borrowed (the optimiser's) */
    int bucket;
    int64_t off;   /* its elements' offset in the bucket's buffer */
    int64_t n;
    void *grad;    /* its gradient's bytes, recorded when final */
    bool ready;
} ddp_param;

typedef struct ddp_bucket {
    int first, count; /* params [first, first + count) of the bucket order */
    int64_t numel;
    int nready;
    void *buf;
    int state;        /* 0 filling, 1 ready (the thread may take it), 2 averaged */
} ddp_bucket;

struct cn_ddp {
    cn_module *m;
    cn_optimizer *opt;
    cn_dtype dt;
    bool overlap;
    bool gpu; /* parameters on a CUDA device: NCCL in the step, no buckets */
    int np, nb;
    ddp_param *ps; /* bucket order: the optimiser's parameters reversed */
    ddp_bucket *bs;
    void *scratch;
    pthread_t thread;
    bool running, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int next;      /* the thread's next bucket */
    int done;      /* buckets averaged this step */
    int rc;        /* the thread's first failure */
    char err[512];
    bool accumulated; /* a second backward before the step */
    cn_ddp_stats st;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

/* ---- the communication thread ---- */

static void *comm_main(void *arg) {
    cn_ddp *d = arg;
    size_t es = cn_dsize(d->dt);
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->stop && d->bs[d->next].state != 1) pthread_cond_wait(&d->cv, &d->mu);
        if (d->stop) break;
        ddp_bucket *b = &d->bs[d->next];
        pthread_mutex_unlock(&d->mu);
        double t0 = now_s();
        char *buf = b->buf;
        for (int i = b->first; i < b->first + b->count; i++)
            memcpy(buf + d->ps[i].off * (int64_t)es, d->ps[i].grad, (size_t)d->ps[i].n * es);
        int rc = cn_dist_allreduce_raw(buf, b->numel, d->dt, CN_DIST_MEAN, d->scratch);
        if (rc == CN_OK)
            for (int i = b->first; i < b->first + b->count; i++)
                memcpy(d->ps[i].grad, buf + d->ps[i].off * (int64_t)es, (size_t)d->ps[i].n * es);
        double dt = now_s() - t0;
        pthread_mutex_lock(&d->mu);
        if (rc < 0 && d->rc == CN_OK) {
            d->rc = rc;
            snprintf(d->err, sizeof d->err, "%s", cn_last_error());
        }
        d->st.comm_seconds += dt;
        d->st.buckets++;
        d->st.bytes += b->numel * (int64_t)es;
        b->state = 2;
        d->done++;
        d->next = (d->next + 1) % d->nb;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* ---- recording gradients (the caller's thread) ---- */

/* p's gradient as the thread needs it: on the CPU, contiguous, of the
 * wrapper's dtype; zeros when it has none. Records its bytes. */
static int record_grad(cn_ddp *d, ddp_param *q) {
    cn_tensor *g = q->p->grad;
    if (!g) {
        g = cn_t_zeros(d->dt, q->p->ndim, q->p->shape);
        if (!g) return CN_ENOMEM;
        int rc = cn_set_grad(q->p, g);
        cn_release(g);
        if (rc < 0) return rc;
        g = q->p->grad;
    } else if (!cn_t_on_cpu(g) || !cn_is_contiguous(g) || g->dtype != d->dt) {
        if (!cn_t_on_cpu(g))
            return cn_failc(CN_EUNSUPPORTED, "ddp: a gradient on %s: data-parallel training "
                                             "averages CPU gradients (NCCL for CUDA devices is "
                                             "not built yet)", cn_dev_name(cn_t_device(g)));
        cn_tensor *c = cn_t_empty(d->dt, g->ndim, g->shape);
        if (!c) return CN_ENOMEM;
        const cn_backend *b = cn_backend_of(c);
        int rc = b->copy(c, g);
        if (rc == CN_OK) rc = cn_set_grad(q->p, c);
        cn_release(c);
        if (rc < 0) return rc;
        g = q->p->grad;
    }
    q->grad = (char *)g->storage->data + (size_t)g->offset * cn_dsize(d->dt);
    q->ready = true;
    return CN_OK;
}

/* Under d->mu: bucket b is complete. */
static void release_bucket(cn_ddp *d, ddp_bucket *b) {
    b->state = 1;
    pthread_cond_broadcast(&d->cv);
}

static void on_grad_ready(cn_tensor *leaf, void *ctx) {
    cn_ddp *d = ctx;
    for (int i = 0; i < d->np; i++) {
        ddp_param *q = &d->ps[i];
        if (q->p != leaf) continue;
        if (q->ready) {
            /* Its bucket may be on the wire already: adding more to it now
             * would be averaged wrongly. */
            d->accumulated = true;
            return;
        }
        if (record_grad(d, q) < 0) {
            pthread_mutex_lock(&d->mu);
            if (d->rc == CN_OK) {
                d->rc = CN_EINVAL;
                snprintf(d->err, sizeof d->err, "%s", cn_last_error());
            }
            pthread_mutex_unlock(&d->mu);
            return;
        }
        ddp_bucket *b = &d->bs[q->bucket];
        pthread_mutex_lock(&d->mu);
        if (++b->nready == b->count && b->state == 0) release_bucket(d, b);
        pthread_mutex_unlock(&d->mu);
        return;
    }
}

/* The optimiser's pre-step: every bucket released, all averaged. */
/* CUDA parameters: each gradient averaged in place by NCCL on the
 * device's stream (ordered with the step's kernels). */
static int pre_step_gpu(cn_ddp *d) {
    int rc = CN_OK;
    double t0 = now_s();
    for (int i = 0; i < d->np && rc == CN_OK; i++) {
        cn_tensor *p = d->ps[i].p;
        if (!p->grad) {
            cn_tensor *z = cn_t_full_on(cn_t_device(p), (cn_dtype)p->dtype, p->ndim, p->shape, 0);
            rc = z ? cn_set_grad(p, z) : CN_ENOMEM;
            cn_release(z);
            if (rc < 0) break;
        }
        rc = cn_dist_allreduce(p->grad, CN_DIST_MEAN);
        d->st.bytes += cn_numel(p) * (int64_t)cn_dsize(d->dt);
    }
    d->st.comm_seconds += now_s() - t0;
    if (rc == CN_OK) {
        d->st.steps++;
        d->st.buckets += d->np;
    }
    return rc;
}

static int pre_step(void *ctx) {
    cn_ddp *d = ctx;
    static const char fn[] = "ddp (optimizer_step)";
    if (d->gpu) return pre_step_gpu(d);
    if (d->accumulated) {
        d->accumulated = false;
        return cn_failc(CN_ESTATE,
                        "%s: a parameter's gradient was made final twice before the step (two "
                        "backward passes: gradient accumulation); with data-parallel training "
                        "give cn_ddp_opts.no_overlap for that", fn);
    }
    int rc = CN_OK;
    for (int i = 0; i < d->np && rc == CN_OK; i++)
        if (!d->ps[i].ready) rc = record_grad(d, &d->ps[i]);
    double t0 = now_s();
    pthread_mutex_lock(&d->mu);
    if (rc == CN_OK)
        for (int k = 0; k < d->nb; k++)
            if (d->bs[k].state == 0) release_bucket(d, &d->bs[k]);
    /* Wait for every bucket released (all of them, unless recording failed
     * here): the thread may be inside one whose memory the caller reuses. */
    int released = 0;
    for (int k = 0; k < d->nb; k++) released += d->bs[k].state >= 1;
    while (d->done < released && d->rc == CN_OK) pthread_cond_wait(&d->cv, &d->mu);
    if (d->rc != CN_OK && rc == CN_OK) rc = cn_failc(d->rc, "%s", d->err);
    /* The next step starts from empty buckets. */
    for (int k = 0; k < d->nb; k++) {
        d->bs[k].state = 0;
        d->bs[k].nready = 0;
    }
    d->done = 0;
    d->next = 0;
    d->rc = CN_OK;
    pthread_mutex_unlock(&d->mu);
    for (int i = 0; i < d->np; i++) {
        d->ps[i].ready = false;
        d->ps[i].grad = NULL;
    }
    d->st.wait_seconds += now_s() - t0;
    if (rc == CN_OK) d->st.steps++;
    return rc;
}

/* ---- making and freeing ---- */

/* One hash of every parameter's name, dtype and shape. */
static uint64_t model_hash(const cn_module *m) {
    cn_tensor **ts = NULL;
    const char **names = NULL;
    int n = cn_module_parameters(m, &ts, &names);
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, &n, sizeof n);
    for (int i = 0; i < n; i++) {
        h = fnv(h, names[i], strlen(names[i]) + 1);
        h = fnv(h, &ts[i]->dtype, sizeof ts[i]->dtype);
        h = fnv(h, &ts[i]->ndim, sizeof ts[i]->ndim);
        h = fnv(h, ts[i]->shape, sizeof(int64_t) * (size_t)ts[i]->ndim);
    }
    free(ts);
    free(names);
    return h;
}

static int broadcast_state(const cn_module *m, bool buffers_only, const char *fn) {
    cn_tensor **ts = NULL, **ps = NULL;
    int n = cn_module_state(m, &ts, NULL);
    if (n < 0) return n;
    int np = buffers_only ? cn_module_parameters(m, &ps, NULL) : 0;
    int rc = np < 0 ? np : CN_OK;
    for (int i = 0; i < n && rc == CN_OK; i++) {
        bool is_param = false;
        for (int j = 0; j < np && !is_param; j++) is_param = ps[j] == ts[i];
        if (is_param) continue;
        rc = cn_dist_broadcast(ts[i], 0);
    }
    free(ts);
    free(ps);
    return rc;
}

cn_ddp *cn_ddp_new(cn_module *m, cn_optimizer *opt, const cn_ddp_opts *opts) {
    static const char fn[] = "ddp_new";
    if (!m || !opt) return cn_fail("%s: give the model and its optimiser", fn);
    if (!cn_dist_initialized()) return cn_fail("%s: call cn_dist_init first", fn);
    cn_ddp_opts o = opts ? *opts : (cn_ddp_opts){0};
    size_t bucket_bytes = o.bucket_bytes ? o.bucket_bytes : (size_t)4 << 20;
    int np = cn_opt_count(opt);
    if (np <= 0) return cn_fail("%s: the optimiser has no parameters", fn);
    /* The averaging must run first in the step (a grad scaler unscales
     * the averaged gradients), and the hook has one slot. */
    int (*hook)(void *);
    void *hook_ctx;
    cn_opt_get_pre_step(opt, &hook, &hook_ctx);
    if (hook)
        return cn_fail("%s: the optimiser has a step hook already (a grad scaler?): make the "
                       "cn_ddp before the cn_grad_scaler", fn);
    if (cn_dist_check_same(model_hash(m), fn, "model (parameter names, shapes and dtypes)") < 0)
        return NULL;
    if (cn_dist_check_same((uint64_t)np, fn, "optimiser (its number of parameters)") < 0)
        return NULL;
    cn_ddp *d = calloc(1, sizeof *d);
    if (!d) return cn_fail("%s: out of memory", fn);
    d->m = m;
    d->opt = opt;
    d->overlap = !o.no_overlap;
    d->np = np;
    d->ps = calloc((size_t)np, sizeof *d->ps);
    d->bs = calloc((size_t)np, sizeof *d->bs);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    if (!d->ps || !d->bs) {
        cn_ddp_free(d);
        return cn_fail("%s: out of memory", fn);
    }
    d->dt = (cn_dtype)cn_opt_param(opt, 0)->dtype;
    size_t es = cn_dsize(d->dt);
    int64_t maxb = 0;
    for (int i = 0; i < np; i++) {
        cn_tensor *p = cn_opt_param(opt, np - 1 - i);
        if (p->dtype != d->dt || (d->dt != CN_F32 && d->dt != CN_F64)) {
            cn_ddp_free(d);
            return cn_fail("%s: parameters of dtype %s and %s: data-parallel training averages "
                           "f32 or f64 parameters of one dtype", fn, cn_dtype_name(d->dt),
                           cn_dtype_name((cn_dtype)p->dtype));
        }
        bool gpu = p->storage && p->storage->device_kind == CN_DEVICE_CUDA &&
                   cn_dist_nccl_available();
        if (i == 0) d->gpu = gpu;
        if (gpu != d->gpu || (!gpu && !cn_t_on_cpu(p))) {
            cn_ddp_free(d);
            return cn_fail("%s: parameters on %s: data-parallel training runs on the CPU, and on "
                           "CUDA devices in builds with NCCL, with every parameter on one kind",
                           fn, cn_dev_name(cn_t_device(p)));
        }
        ddp_param *q = &d->ps[i];
        q->p = p;
        q->n = cn_numel(p);
        ddp_bucket *b = d->nb ? &d->bs[d->nb - 1] : NULL;
        if (!b || (size_t)(b->numel + q->n) * es > bucket_bytes) {
            b = &d->bs[d->nb++];
            b->first = i;
        }
        q->bucket = (int)(b - d->bs);
        q->off = b->numel;
        b->count++;
        b->numel += q->n;
    }
    for (int k = 0; k < d->nb && !d->gpu; k++) {
        ddp_bucket *b = &d->bs[k];
        if (b->numel > maxb) maxb = b->numel;
        b->buf = malloc((size_t)(b->numel ? b->numel : 1) * es);
        if (!b->buf) {
            cn_ddp_free(d);
            return cn_fail("%s: out of memory for the gradient buckets", fn);
        }
    }
    d->scratch = malloc((size_t)(maxb / cn_dist_size() + 2) * es);
    if (!d->scratch) {
        cn_ddp_free(d);
        return cn_fail("%s: out of memory", fn);
    }
    /* Every rank starts from rank 0's values. */
    if (broadcast_state(m, false, fn) < 0) {
        cn_ddp_free(d);
        return NULL;
    }
    if (d->gpu) {
        d->overlap = false; /* NCCL in the step (no buckets, no thread) */
        cn_opt_set_pre_step(opt, pre_step, d);
        return d;
    }
    if (pthread_create(&d->thread, NULL, comm_main, d) != 0) {
        cn_ddp_free(d);
        return cn_fail("%s: cannot start the communication thread", fn);
    }
    d->running = true;
    cn_opt_set_pre_step(opt, pre_step, d);
    if (d->overlap) cn_set_grad_ready_hook(on_grad_ready, d);
    return d;
}

void cn_ddp_free(cn_ddp *d) {
    if (!d) return;
    if (d->running) {
        pthread_mutex_lock(&d->mu);
        d->stop = true;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
        if (d->overlap) cn_set_grad_ready_hook(NULL, NULL);
    }
    int (*hook)(void *);
    void *hook_ctx;
    cn_opt_get_pre_step(d->opt, &hook, &hook_ctx);
    if (hook == pre_step && hook_ctx == d) cn_opt_set_pre_step(d->opt, NULL, NULL);
    for (int k = 0; k < d->nb; k++) free(d->bs[k].buf);
    free(d->bs);
    free(d->ps);
    free(d->scratch);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
}

int cn_ddp_sync_buffers(cn_ddp *d) {
    if (!d) return CN_EINVAL;
    return broadcast_state(d->m, true, "ddp_sync_buffers");
}

int cn_ddp_get_stats(const cn_ddp *d, cn_ddp_stats *s) {
    if (!d || !s) return CN_EINVAL;
    pthread_mutex_lock((pthread_mutex_t *)&d->mu);
    *s = d->st;
    pthread_mutex_unlock((pthread_mutex_t *)&d->mu);
    return CN_OK;
}
