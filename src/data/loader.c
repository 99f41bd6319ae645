/* The batching loader: seeded shuffling, per-sample transforms, and
 * prefetching on a background thread.
 *
 * Determinism: every random choice is a Philox draw keyed by the loader's
 * seed and addressed by (epoch, position) — the permutation of epoch e
 * draws at (e, i) for i = N-1 .. 1, the transform k of sample j at (e, j)
 * under a key derived from (seed, k) — so a batch is a pure function of the
 * seed, the epoch and its index. The background thread computes exactly
 * what cn_loader_next would compute itself; it only does it earlier.
 *
 * Threads: tensor structs and scopes are per-thread and reference counts
 * are not atomic, so the background thread never touches a cn_tensor: it
 * reads the dataset's (immutable, contiguous) bytes and writes plain
 * buffers from cn_alloc, which the caller's thread wraps into tensors.
 *
 * On a device (opts.device): the background thread also copies each batch
 * there, into storages (not tensors), so the copy overlaps the caller's
 * work on the previous batch; the copy is issued on the device's queue, so
 * kernels the caller issues later see the data without a wait.
 *
 * Workers: with opts.workers > 1 and transforms to run, the producing
 * thread cuts each batch's rows among that many threads; each draws
 * from the same (epoch, sample) addresses, so the batch does not depend
 * on how many there are. The time cn_loader_next blocks is summed
 * (cn_loader_wait_seconds), so a data path too slow for the model shows. */
#include "../io/fileio.h"
#include "../backend/backend.h"
#include "../core/profiler.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define LOADER_MAX_TENSORS 16
#define LOADER_MAX_TRANSFORMS 16
#define QUEUE_CAP 2

typedef enum xf_kind { XF_NORMALIZE, XF_CROP, XF_HFLIP, XF_JITTER } xf_kind;

#define LOADER_MAX_WORKERS 64

typedef struct transform {
    xf_kind kind;
    int which;
    int64_t h, w, pad;  /* crop */
    double p;           /* flip */
    double bright, contrast; /* jitter */
    double *mean, *std; /* normalize: nmean entries (1 or C) */
    int nmean;
    float *lut; /* normalize of u8: the 256 results per mean/std pair */
    float *lut_div; /* per pair: d where every lut entry is (float)v / d, else 0 */
    /* The sample's dtype and [C, H, W] before and after this step. */
    cn_dtype in_dt, out_dt;
    int64_t in_c, in_h, in_w, out_h, out_w;
} transform;

/* The per-tensor sample description: the dataset layout and the layout
 * after its transforms. */
typedef struct column {
    cn_tensor *data; /* contiguous, retained */
    const unsigned char *bytes;
    size_t sample_bytes; /* in the dataset */
    cn_dtype dt;         /* after transforms */
    int ndim;            /* sample rank after transforms */
    int64_t shape[CN_MAX_DIMS];
    size_t out_sample_bytes;
} column;

/* One prepared batch, or the end of an epoch, or an error. */
typedef struct item {
    int status; /* 1 batch, 0 end of epoch, < 0 error */
    int64_t rows;
    void *buf[LOADER_MAX_TENSORS];
    cn_storage *dev[LOADER_MAX_TENSORS]; /* the batch on the device (buf then NULL) */
    char err[512];
} item;

/* Where the producer is: epoch, next batch index, and that epoch's order. */
typedef struct cursor {
    int64_t epoch, batch;
    int64_t *perm;      /* N entries */
    int64_t perm_epoch; /* the epoch perm was drawn for (-1: none) */
} cursor;

struct cn_loader {
    int ncols;
    column col[LOADER_MAX_TENSORS];
    transform xf[LOADER_MAX_TRANSFORMS];
    int nxf;
    int64_t n, batch_size, nbatches;
    bool shuffle, drop_last, started;
    uint64_t seed;
    int prefetch;
    int workers;       /* threads per batch (1: the producing thread alone) */
    double wait_s;     /* cn_loader_next's time blocked on the data path */
    cn_device device; /* where batches go (the CPU: they stay in buf) */
    int64_t shard_index, shard_count; /* 0 and 1 without shards */
    int64_t epoch; /* the epoch cn_loader_next is in */
    int sticky;    /* a failed production stops the loader: its status */
    char sticky_msg[512];

    /* Synchronous production, and the producer's own state. */
    cursor cur;

    /* The prefetch queue (a ring of QUEUE_CAP items). */
    pthread_t thread;
    bool running, stop;
    pthread_mutex_t mu;
    pthread_cond_t not_full, not_empty;
    item q[QUEUE_CAP];
    int qhead, qcount;
};

/* ---- random draws ---- */

/* Philox at (epoch, index) under key. Indices below 2^40 and epochs below
 * 2^24 address distinct counters. */
static void draw(uint64_t key, int64_t epoch, int64_t index, uint32_t out[4]) {
    cn_philox(key, ((uint64_t)epoch << 40) | (uint64_t)index, out);
}

/* The key for transform k: the seed mixed with k so transforms draw
 * independent streams (splitmix64's finaliser). */
static uint64_t xf_key(uint64_t seed, int k) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (uint64_t)(k + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void make_perm(const cn_loader *l, int64_t epoch, int64_t *perm) {
    for (int64_t i = 0; i < l->n; i++)
        perm[i] = i;
    if (!l->shuffle) return;
    /* Fisher-Yates from the end; the 64-bit draw's modulo bias is below
     * 2^-24 for any dataset that fits in memory. */
    for (int64_t i = l->n - 1; i > 0; i--) {
        uint32_t o[4];
        draw(l->seed, epoch, i, o);
        uint64_t x = ((uint64_t)o[0] << 32) | o[1];
        int64_t j = (int64_t)(x % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* ---- transforms on one sample ---- */

static void apply(const cn_loader *l, int k, const transform *x, int64_t epoch, int64_t sample,
                  const void *in, void *out) {
    size_t ies = cn_dsize(x->in_dt);
    int64_t C = x->in_c, H = x->in_h, W = x->in_w;
    switch (x->kind) {
    case XF_NORMALIZE: {
        float *o = out;
        if (x->lut) { /* u8 data kept as stored is scaled here, batch by batch */
            const uint8_t *u = in;
            for (int64_t c = 0; c < C; c++) {
                int k = x->nmean == 1 ? 0 : (int)c;
                const float *t = x->lut + 256 * k;
                float d = x->lut_div[k];
                if (d != 0) /* a scale alone (pixels / 255): a division the compiler vectorises */
                    for (int64_t i = c * H * W; i < (c + 1) * H * W; i++)
                        o[i] = (float)u[i] / d;
                else
                    for (int64_t i = c * H * W; i < (c + 1) * H * W; i++)
                        o[i] = t[u[i]];
            }
            break;
        }
        for (int64_t c = 0; c < C; c++) {
            double m = x->mean[x->nmean == 1 ? 0 : c], s = x->std[x->nmean == 1 ? 0 : c];
            for (int64_t i = 0; i < H * W; i++) {
                int64_t e = c * H * W + i;
                o[e] = (float)((cn_load_f64(in, x->in_dt, e) - m) / s);
            }
        }
        break;
    }
    case XF_CROP: {
        uint32_t r[4];
        draw(xf_key(l->seed, k), epoch, sample, r);
        int64_t oy = (int64_t)(r[0] % (uint32_t)(H + 2 * x->pad - x->h + 1));
        int64_t ox = (int64_t)(r[1] % (uint32_t)(W + 2 * x->pad - x->w + 1));
        /* Window origin in the unpadded image. */
        int64_t y0 = oy - x->pad, x0 = ox - x->pad;
        unsigned char *o = out;
        const unsigned char *src = in;
        memset(o, 0, (size_t)(C * x->h * x->w) * ies);
        for (int64_t c = 0; c < C; c++)
            for (int64_t y = 0; y < x->h; y++) {
                int64_t sy = y0 + y;
                if (sy < 0 || sy >= H) continue;
                int64_t xa = x0 < 0 ? -x0 : 0, xb = x->w;
                if (x0 + xb > W) xb = W - x0;
                if (xb <= xa) continue;
                memcpy(o + ((size_t)((c * x->h + y) * x->w + xa)) * ies,
                       src + ((size_t)((c * H + sy) * W + x0 + xa)) * ies, (size_t)(xb - xa) * ies);
            }
        break;
    }
    case XF_HFLIP: {
        uint32_t r[4];
        draw(xf_key(l->seed, k), epoch, sample, r);
        bool flip = (double)(r[2] >> 8) * 0x1p-24 < x->p;
        const unsigned char *src = in;
        unsigned char *o = out;
        if (!flip) {
            memcpy(o, src, (size_t)(C * H * W) * ies);
            break;
        }
        for (int64_t row = 0; row < C * H; row++)
            for (int64_t j = 0; j < W; j++)
                memcpy(o + (size_t)(row * W + j) * ies, src + (size_t)(row * W + W - 1 - j) * ies,
                       ies);
        break;
    }
    case XF_JITTER: {
        uint32_t r[4];
        draw(xf_key(l->seed, k), epoch, sample, r);
        double b = 1 + x->bright * (2 * ((double)(r[0] >> 8) * 0x1p-24) - 1);
        double c = 1 + x->contrast * (2 * ((double)(r[1] >> 8) * 0x1p-24) - 1);
        const float *src = in;
        float *o = out;
        int64_t n = C * H * W;
        double mean = 0;
        for (int64_t i = 0; i < n; i++) {
            double v = src[i] * b;
            v = v < 0 ? 0 : v > 1 ? 1 : v;
            o[i] = (float)v;
            mean += v;
        }
        mean = n ? mean / (double)n : 0;
        for (int64_t i = 0; i < n; i++) {
            double v = (o[i] - mean) * c + mean;
            o[i] = (float)(v < 0 ? 0 : v > 1 ? 1 : v);
        }
        break;
    }
    }
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rows [r0, r1) of a batch, every column: the work one thread does.
 * Reads the dataset and the permutation only, writes its own rows. */
typedef struct rows_job {
    const cn_loader *l;
    const cursor *cur;
    item *it;
    int64_t start, r0, r1;
    size_t scratch;
    bool ok;
} rows_job;

static void *produce_rows(void *arg) {
    rows_job *jb = arg;
    const cn_loader *l = jb->l;
    unsigned char *s0 = jb->scratch ? malloc(jb->scratch) : NULL;
    unsigned char *s1 = jb->scratch ? malloc(jb->scratch) : NULL;
    jb->ok = !jb->scratch || (s0 && s1);
    for (int c = 0; c < l->ncols && jb->ok; c++) {
        const column *col = &l->col[c];
        unsigned char *dst = jb->it->buf[c];
        /* The last transform of this column writes the batch. */
        int last = -1;
        for (int k = 0; k < l->nxf; k++)
            if (l->xf[k].which == c) last = k;
        for (int64_t r = jb->r0; r < jb->r1; r++) {
            int64_t j = jb->cur->perm[jb->start + r];
            const unsigned char *src = col->bytes + (size_t)j * col->sample_bytes;
            unsigned char *out = dst + (size_t)r * col->out_sample_bytes;
            if (last < 0) {
                memcpy(out, src, col->sample_bytes);
                continue;
            }
            /* The transforms in order, ping-ponging between the scratch buffers. */
            const void *in = src;
            unsigned char *bufs[2] = {s0, s1};
            int flip = 0;
            for (int k = 0; k <= last; k++) {
                if (l->xf[k].which != c) continue;
                void *o = k == last ? (void *)out : bufs[flip];
                apply(l, k, &l->xf[k], jb->cur->epoch, j, in, o);
                in = o;
                flip ^= 1;
            }
        }
    }
    free(s0);
    free(s1);
    return NULL;
}

/* Batch b of epoch e into it (buffers from cn_alloc). Runs on either
 * thread; touches no tensor struct. */
static void produce(cn_loader *l, cursor *cur, item *it) {
    memset(it, 0, sizeof *it);
    if (cur->batch >= l->nbatches) {
        it->status = 0;
        cur->epoch++;
        cur->batch = 0;
        return;
    }
    if (cur->perm_epoch != cur->epoch) {
        make_perm(l, cur->epoch, cur->perm);
        cur->perm_epoch = cur->epoch;
    }
    int64_t start = cur->batch * l->batch_size * l->shard_count + l->shard_index * l->batch_size;
    int64_t rows = l->n - start < l->batch_size ? l->n - start : l->batch_size;
    it->rows = rows;
    /* Scratch for transform chains: the largest intermediate sample. */
    size_t scratch = 0;
    for (int k = 0; k < l->nxf; k++) {
        const transform *x = &l->xf[k];
        size_t a = (size_t)(x->in_c * x->in_h * x->in_w) * cn_dsize(x->in_dt);
        size_t b = (size_t)(x->in_c * x->out_h * x->out_w) * cn_dsize(x->out_dt);
        if (a > scratch) scratch = a;
        if (b > scratch) scratch = b;
    }
    bool ok = true;
    for (int c = 0; c < l->ncols && ok; c++) {
        it->buf[c] = cn_alloc((size_t)rows * l->col[c].out_sample_bytes);
        ok = it->buf[c] != NULL;
    }
    if (ok) {
        /* Workers only where there is per-sample work to share: a plain
         * copy is faster than starting a thread. */
        int nw = l->nxf > 0 ? l->workers : 1;
        if (nw > rows) nw = rows > 0 ? (int)rows : 1;
        rows_job jobs[LOADER_MAX_WORKERS];
        pthread_t th[LOADER_MAX_WORKERS];
        bool started[LOADER_MAX_WORKERS] = {false};
        for (int w = 0; w < nw; w++)
            jobs[w] = (rows_job){.l = l, .cur = cur, .it = it, .start = start,
                                 .r0 = rows * w / nw, .r1 = rows * (w + 1) / nw,
                                 .scratch = scratch};
        for (int w = 1; w < nw; w++)
            started[w] = pthread_create(&th[w], NULL, produce_rows, &jobs[w]) == 0;
        produce_rows(&jobs[0]);
        for (int w = 1; w < nw; w++) {
            if (started[w]) pthread_join(th[w], NULL);
            else produce_rows(&jobs[w]); /* no thread to be had: done here */
        }
        for (int w = 0; w < nw; w++)
            ok = ok && jobs[w].ok;
    }
    if (!ok) {
        for (int c = 0; c < l->ncols; c++)
            cn_free(it->buf[c]);
        memset(it->buf, 0, sizeof it->buf);
        it->status = CN_ENOMEM;
        snprintf(it->err, sizeof it->err, "loader_next: out of memory preparing a batch of %lld",
                 (long long)rows);
        return;
    }
    it->status = 1;
    cur->batch++;
}

static void item_clear(item *it) {
    for (int c = 0; c < LOADER_MAX_TENSORS; c++) {
        cn_free(it->buf[c]);
        if (it->dev[c]) cn_storage_release(it->dev[c]);
    }
    memset(it, 0, sizeof *it);
}

/* A batch's buffers copied to the loader's device (it->dev), the host
 * buffers freed. On failure the item becomes an error. Either thread. */
static void upload(const cn_loader *l, item *it) {
    if (it->status != 1 || l->device.kind == CN_DEVICE_CPU) return;
    const cn_backend *b = cn_backend_for(l->device, "loader_next");
    for (int c = 0; c < l->ncols && b; c++) {
        size_t n = (size_t)it->rows * l->col[c].out_sample_bytes;
        cn_storage *s = cn_storage_new_on(l->device, n ? n : 1);
        if (!s || b->write(s, 0, it->buf[c], n, false) < 0) {
            if (s) cn_storage_release(s);
            b = NULL;
            break;
        }
        it->dev[c] = s;
        cn_free(it->buf[c]);
        it->buf[c] = NULL;
    }
    if (!b) {
        char msg[sizeof it->err];
        snprintf(msg, sizeof msg, "loader_next: copying a batch to %s: %s",
                 cn_dev_name(l->device), cn_last_error());
        item_clear(it);
        it->status = CN_ENOMEM;
        memcpy(it->err, msg, sizeof msg);
    }
}

/* ---- the background thread ---- */

static void *producer_main(void *arg) {
    cn_loader *l = arg;
    for (;;) {
        pthread_mutex_lock(&l->mu);
        while (l->qcount == l->prefetch && !l->stop)
            pthread_cond_wait(&l->not_full, &l->mu);
        bool stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        if (stop) break;
        item it;
        produce(l, &l->cur, &it);
        upload(l, &it);
        pthread_mutex_lock(&l->mu);
        l->q[(l->qhead + l->qcount) % QUEUE_CAP] = it;
        l->qcount++;
        pthread_cond_signal(&l->not_empty);
        pthread_mutex_unlock(&l->mu);
        if (it.status < 0) break; /* the consumer reports it; nothing more to do */
    }
    return NULL;
}

static int start_thread(cn_loader *l) {
    l->stop = false;
    if (pthread_create(&l->thread, NULL, producer_main, l) != 0)
        return cn_failc(CN_ESTATE, "loader_next: cannot start the prefetch thread");
    l->running = true;
    return CN_OK;
}

static void stop_thread(cn_loader *l) {
    if (l->running) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_broadcast(&l->not_full);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
        l->running = false;
    }
    while (l->qcount) {
        item_clear(&l->q[l->qhead]);
        l->qhead = (l->qhead + 1) % QUEUE_CAP;
        l->qcount--;
    }
    l->qhead = 0;
}

/* ---- public API ---- */

cn_loader *cn_loader_new(cn_tensor *const *tensors, int ntensors, const cn_loader_opts *opts) {
    static const char fn[] = "loader_new";
    if (!opts) return cn_fail("%s: opts is NULL", fn);
    if (ntensors < 1 || ntensors > LOADER_MAX_TENSORS)
        return cn_fail("%s: %d tensors; give 1 to %d", fn, ntensors, LOADER_MAX_TENSORS);
    if (!tensors) return cn_fail("%s: tensors is NULL", fn);
    for (int i = 0; i < ntensors; i++)
        if (!tensors[i]) return NULL; /* the error that made it NULL stands */
    if (opts->batch_size < 1)
        return cn_fail("%s: batch_size is %lld; it must be at least 1", fn,
                       (long long)opts->batch_size);
    if (opts->prefetch < 0 || opts->prefetch > QUEUE_CAP)
        return cn_fail("%s: prefetch is %d; it must be 0 to %d", fn, opts->prefetch, QUEUE_CAP);
    if (opts->device.kind != CN_DEVICE_CPU && !cn_backend_for(opts->device, fn)) return NULL;
    if (opts->shard_count < 0 || (opts->shard_count > 1 &&
                                  (opts->shard_index < 0 || opts->shard_index >= opts->shard_count)))
        return cn_fail("%s: shard %d of %d: give 0 <= shard_index < shard_count", fn,
                       opts->shard_index, opts->shard_count);
    int64_t n = -1;
    char b1[160], b2[160];
    for (int i = 0; i < ntensors; i++) {
        const cn_tensor *t = tensors[i];
        if (!t->storage) return cn_fail("%s: tensor %d is symbolic (a static graph value)", fn, i);
        if (t->ndim < 1)
            return cn_fail("%s: tensor %d is rank 0; the first axis is the sample", fn, i);
        if (n < 0)
            n = t->shape[0];
        else if (t->shape[0] != n)
            return cn_fail("%s: tensor 0 %s and tensor %d %s have different numbers of samples", fn,
                           cn_shape_str(tensors[0], b1, sizeof b1), i,
                           cn_shape_str(t, b2, sizeof b2));
    }
    if (n >= ((int64_t)1 << 40)) return cn_fail("%s: more than 2^40 samples", fn);
    cn_loader *l = calloc(1, sizeof *l);
    if (!l) return cn_fail("%s: out of memory", fn);
    l->cur.perm = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!l->cur.perm) {
        free(l);
        return cn_fail("%s: out of memory", fn);
    }
    l->cur.perm_epoch = -1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->not_full, NULL);
    pthread_cond_init(&l->not_empty, NULL);
    l->n = n;
    l->batch_size = opts->batch_size;
    l->shuffle = opts->shuffle;
    l->drop_last = opts->drop_last;
    l->seed = opts->seed;
    l->prefetch = opts->prefetch;
    l->workers = opts->workers < 1 ? 1 : opts->workers > LOADER_MAX_WORKERS ? LOADER_MAX_WORKERS
                                                                              : opts->workers;
    l->device = opts->device;
    l->shard_count = opts->shard_count > 1 ? opts->shard_count : 1;
    l->shard_index = opts->shard_count > 1 ? opts->shard_index : 0;
    if (l->shard_count > 1)
        /* Whole global batches only. */
        l->nbatches = l->batch_size > n / l->shard_count ? 0 : n / (l->batch_size * l->shard_count);
    else
        l->nbatches = l->drop_last ? n / l->batch_size : (n + l->batch_size - 1) / l->batch_size;
    for (int i = 0; i < ntensors; i++) {
        column *c = &l->col[i];
        c->data = cn_t_host_contiguous(tensors[i]);
        if (!c->data) {
            l->ncols = i;
            cn_loader_free(l);
            return NULL;
        }
        l->ncols = i + 1;
        c->bytes = cn_t_ptr(c->data);
        c->dt = (cn_dtype)c->data->dtype;
        c->ndim = c->data->ndim - 1;
        memcpy(c->shape, c->data->shape + 1, sizeof(int64_t) * (size_t)c->ndim);
        c->sample_bytes = (size_t)cn_shape_numel(c->ndim, c->shape) * cn_dsize(c->dt);
        c->out_sample_bytes = c->sample_bytes;
    }
    return l;
}

void cn_loader_free(cn_loader *l) {
    if (!l) return;
    stop_thread(l);
    for (int i = 0; i < l->ncols; i++)
        cn_release(l->col[i].data);
    for (int k = 0; k < l->nxf; k++) {
        free(l->xf[k].mean);
        free(l->xf[k].std);
        free(l->xf[k].lut);
        free(l->xf[k].lut_div);
    }
    free(l->cur.perm);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->not_full);
    pthread_cond_destroy(&l->not_empty);
    free(l);
}

/* Checks a new transform of column `which` and reads the sample as
 * [C, H, W]. */
static transform *add_xf(cn_loader *l, const char *fn, int which) {
    if (!l) return NULL;
    if (l->started)
        return cn_fail("%s: transforms must be added before the first cn_loader_next", fn);
    if (which < 0 || which >= l->ncols)
        return cn_fail("%s: tensor %d out of range for a loader of %d tensors", fn, which,
                       l->ncols);
    if (l->nxf >= LOADER_MAX_TRANSFORMS)
        return cn_fail("%s: more than %d transforms", fn, LOADER_MAX_TRANSFORMS);
    column *c = &l->col[which];
    if (c->ndim != 2 && c->ndim != 3) {
        char b[160];
        return cn_fail("%s: samples of tensor %d are %s; transforms take [C, H, W] or [H, W]", fn,
                       which, cn_fmt_shape(b, sizeof b, c->ndim, c->shape));
    }
    transform *x = &l->xf[l->nxf];
    memset(x, 0, sizeof *x);
    x->which = which;
    x->in_dt = x->out_dt = c->dt;
    x->in_c = c->ndim == 3 ? c->shape[0] : 1;
    x->in_h = c->shape[c->ndim - 2];
    x->in_w = c->shape[c->ndim - 1];
    x->out_h = x->in_h;
    x->out_w = x->in_w;
    return x;
}

/* Commits the transform: the column's sample takes its output form. */
static int commit_xf(cn_loader *l, transform *x) {
    column *c = &l->col[x->which];
    c->dt = x->out_dt;
    c->shape[c->ndim - 2] = x->out_h;
    c->shape[c->ndim - 1] = x->out_w;
    c->out_sample_bytes = (size_t)cn_shape_numel(c->ndim, c->shape) * cn_dsize(c->dt);
    l->nxf++;
    return CN_OK;
}

int cn_loader_normalize(cn_loader *l, int which, const double *mean, const double *std, int n) {
    static const char fn[] = "loader_normalize";
    if (!l) return CN_EINVAL;
    transform *x = add_xf(l, fn, which);
    if (!x) return CN_EINVAL;
    if (!mean || !std) return cn_failc(CN_EINVAL, "%s: mean or std is NULL", fn);
    if (n != 1 && n != x->in_c)
        return cn_failc(CN_EINVAL,
                        "%s: %d means and stds for samples of %lld channels (give 1 or %lld)", fn,
                        n, (long long)x->in_c, (long long)x->in_c);
    for (int i = 0; i < n; i++)
        if (!(std[i] != 0) || !isfinite(std[i]) || !isfinite(mean[i]))
            return cn_failc(CN_EINVAL,
                            "%s: channel %d has mean %g and std %g; std must be finite and "
                            "non-zero",
                            fn, i, mean[i], std[i]);
    x->kind = XF_NORMALIZE;
    x->out_dt = CN_F32;
    x->nmean = n;
    x->mean = malloc(sizeof(double) * (size_t)n);
    x->std = malloc(sizeof(double) * (size_t)n);
    if (!x->mean || !x->std) {
        free(x->mean);
        free(x->std);
        x->mean = x->std = NULL;
        return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    }
    memcpy(x->mean, mean, sizeof(double) * (size_t)n);
    memcpy(x->std, std, sizeof(double) * (size_t)n);
    if (x->in_dt == CN_U8) {
        /* The general path's exact values, looked up instead of divided. */
        x->lut = malloc(sizeof(float) * 256 * (size_t)n);
        x->lut_div = malloc(sizeof(float) * (size_t)n);
        if (!x->lut || !x->lut_div) {
            free(x->mean);
            free(x->std);
            free(x->lut);
            free(x->lut_div);
            x->mean = x->std = NULL;
            x->lut = x->lut_div = NULL;
            return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
        }
        for (int c = 0; c < n; c++) {
            float d = mean[c] == 0 ? (float)std[c] : 0;
            for (int v = 0; v < 256; v++) {
                float r = (float)(((double)v - mean[c]) / std[c]);
                x->lut[256 * c + v] = r;
                if (d != 0 && (float)v / d != r) d = 0; /* not exactly: use the table */
            }
            x->lut_div[c] = d;
        }
    }
    return commit_xf(l, x);
}

int cn_loader_random_crop(cn_loader *l, int which, int64_t height, int64_t width, int64_t padding) {
    static const char fn[] = "loader_random_crop";
    if (!l) return CN_EINVAL;
    transform *x = add_xf(l, fn, which);
    if (!x) return CN_EINVAL;
    if (padding < 0 || height < 1 || width < 1 || padding > (1 << 20) ||
        height > x->in_h + 2 * padding || width > x->in_w + 2 * padding)
        return cn_failc(CN_EINVAL,
                        "%s: a %lld x %lld window with padding %lld does not fit samples of "
                        "H x W = %lld x %lld",
                        fn, (long long)height, (long long)width, (long long)padding,
                        (long long)x->in_h, (long long)x->in_w);
    x->kind = XF_CROP;
    x->h = x->out_h = height;
    x->w = x->out_w = width;
    x->pad = padding;
    return commit_xf(l, x);
}

int cn_loader_random_hflip(cn_loader *l, int which, double p) {
    static const char fn[] = "loader_random_hflip";
    if (!l) return CN_EINVAL;
    transform *x = add_xf(l, fn, which);
    if (!x) return CN_EINVAL;
    if (!(p >= 0 && p <= 1)) return cn_failc(CN_EINVAL, "%s: p = %g is not in [0, 1]", fn, p);
    x->kind = XF_HFLIP;
    x->p = p;
    return commit_xf(l, x);
}

int cn_loader_color_jitter(cn_loader *l, int which, double brightness, double contrast) {
    static const char fn[] = "loader_color_jitter";
    if (!l) return CN_EINVAL;
    transform *x = add_xf(l, fn, which);
    if (!x) return CN_EINVAL;
    if (x->in_dt != CN_F32)
        return cn_failc(CN_EINVAL, "%s: samples of tensor %d are %s; jitter takes f32 in [0, 1] "
                        "(normalise u8 by 255 first)", fn, which, cn_dtype_name(x->in_dt));
    if (!(brightness >= 0 && brightness <= 1) || !(contrast >= 0 && contrast <= 1))
        return cn_failc(CN_EINVAL, "%s: brightness %g and contrast %g must be in [0, 1]", fn,
                        brightness, contrast);
    x->kind = XF_JITTER;
    x->bright = brightness;
    x->contrast = contrast;
    return commit_xf(l, x);
}

double cn_loader_wait_seconds(const cn_loader *l) { return l ? l->wait_s : 0; }

int64_t cn_loader_num_batches(const cn_loader *l) { return l ? l->nbatches : CN_EINVAL; }

int64_t cn_loader_epoch(const cn_loader *l) { return l ? l->epoch : CN_EINVAL; }

int cn_loader_set_epoch(cn_loader *l, int64_t epoch) {
    if (!l) return CN_EINVAL;
    if (epoch < 0 || epoch >= ((int64_t)1 << 24))
        return cn_failc(CN_EINVAL, "loader_set_epoch: epoch %lld is not in [0, 2^24)",
                        (long long)epoch);
    stop_thread(l);
    l->epoch = epoch;
    l->cur.epoch = epoch;
    l->cur.batch = 0;
    l->sticky = 0;
    return CN_OK;
}

/* A contiguous tensor over storage s (taking over its reference). */
static cn_tensor *wrap_storage(cn_dtype dt, int ndim, const int64_t *shape, cn_storage *s) {
    cn_tensor *t = cn_t_alloc();
    if (!t) {
        cn_storage_release(s);
        return NULL;
    }
    t->storage = s;
    t->dtype = (uint8_t)dt;
    t->ndim = (int8_t)ndim;
    t->flags = CN_TF_LEAF;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    cn_contiguous_strides(ndim, shape, t->strides);
    return t;
}

static int loader_next(cn_loader *l, cn_tensor **batch);

int cn_loader_next(cn_loader *l, cn_tensor **batch) {
    if (CN_LIKELY(!cn_prof_on())) return loader_next(l, batch);
    /* Time waiting for the batch shows in the trace as such, not as the
     * step's time outside its ops. */
    cn_prof_range_begin("loader.next");
    int rc = loader_next(l, batch);
    cn_prof_range_end();
    return rc;
}

static int loader_next(cn_loader *l, cn_tensor **batch) {
    static const char fn[] = "loader_next";
    if (!l) return CN_EINVAL;
    if (!batch) return cn_failc(CN_EINVAL, "%s: batch is NULL", fn);
    if (l->sticky) return cn_failc(l->sticky, "%s", l->sticky_msg);
    if (!l->running && l->cur.epoch >= ((int64_t)1 << 24))
        return cn_failc(CN_ESTATE, "%s: more than 2^24 epochs", fn);
    l->started = true;
    item it;
    if (l->prefetch == 0) {
        double t0 = mono_s();
        produce(l, &l->cur, &it);
        upload(l, &it);
        l->wait_s += mono_s() - t0;
    } else {
        if (!l->running) {
            int st = start_thread(l);
            if (st != CN_OK) return st;
        }
        pthread_mutex_lock(&l->mu);
        if (l->qcount == 0) {
            /* Timed only when the batch is not ready: the common case costs nothing. */
            double t0 = mono_s();
            while (l->qcount == 0)
                pthread_cond_wait(&l->not_empty, &l->mu);
            l->wait_s += mono_s() - t0;
        }
        it = l->q[l->qhead];
        memset(&l->q[l->qhead], 0, sizeof l->q[l->qhead]);
        l->qhead = (l->qhead + 1) % QUEUE_CAP;
        l->qcount--;
        pthread_cond_signal(&l->not_full);
        pthread_mutex_unlock(&l->mu);
    }
    if (it.status < 0) {
        l->sticky = it.status;
        snprintf(l->sticky_msg, sizeof l->sticky_msg, "%s", it.err);
        return cn_failc(it.status, "%s", it.err);
    }
    if (it.status == 0) {
        l->epoch++;
        return 0;
    }
    /* Wrap every buffer first, so a failure leaves nothing half-owned. */
    cn_tensor *out[LOADER_MAX_TENSORS] = {0};
    int status = CN_OK;
    for (int c = 0; c < l->ncols; c++) {
        const column *col = &l->col[c];
        int64_t shape[CN_MAX_DIMS];
        shape[0] = it.rows;
        memcpy(shape + 1, col->shape, sizeof(int64_t) * (size_t)col->ndim);
        if (it.dev[c]) {
            out[c] = wrap_storage(col->dt, col->ndim + 1, shape, it.dev[c]);
            it.dev[c] = NULL;
        } else {
            out[c] = cn_t_from_alloc(col->dt, col->ndim + 1, shape, it.buf[c]);
            it.buf[c] = NULL;
        }
        if (!out[c]) status = CN_ENOMEM;
    }
    for (int c = 0; c < l->ncols; c++) {
        if (status != CN_OK)
            cn_release(out[c]);
        else
            batch[c] = cn_scope_add(out[c]);
    }
    return status == CN_OK ? 1 : status;
}
