/* The oneDNN path of the convolution kernels (CHUTNEY_WITH_DNNL): f32, and
 * autocast's native products, whose inputs are bf16 (or f16) and whose
 * output is f32 (oneDNN's AVX-512 BF16 or AMX kernels accumulate in f32).
 *
 * Each product (forward, input gradient, weight gradient) is a oneDNN
 * primitive for one geometry, created once and kept in a small cache: the
 * primitive picks its own memory formats (blocked, nChw16c and the like),
 * and reorders move our plain NCHW/OIHW tensors in and out. Scratch memory
 * is ours (user scratchpad), so one primitive may run on several threads at
 * once.
 *
 * oneDNN runs single-threaded inside our own pool, never on its OpenMP
 * threads: the batch is cut into blocks fixed by N alone, each block one
 * call on one pool thread. OpenMP's workers would otherwise spin after every
 * call on the cores the pool is about to use, and the blocks also make the
 * results independent of the thread count (the weight gradient sums the
 * blocks' parts in block order).
 *
 * Whether this or im2col + GEMM runs is decided per product in conv.c
 * (cn_dnnl_conv2d_prefer), from bench/bench_conv's measurements. */
#include "../backend.h"
#include "conv.h"
#include "dnnl_engine.h"
#include "epilogue.h"
#include "gemm.h"

#ifdef CN_HAVE_DNNL

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

enum { FWD, DGRAD, WGRAD };

/* One cached primitive and the reorders around it. */
typedef struct dnnl_conv {
    int which;
    bool bias;
    cn_dtype dt; /* the inputs' dtype; the output is f32 */
    cn_conv_geom g;
    dnnl_primitive_t prim;
    /* per argument: the user's (plain) and the primitive's memory formats,
     * and the reorder between them (NULL when they are the same) */
    dnnl_memory_desc_t user[3], mine[3];
    dnnl_primitive_t reorder[3];
    int arg[3];
    dnnl_memory_desc_t bias_md; /* FWD with bias: the bias (plain) */
    dnnl_memory_desc_t scratch_md;
    size_t scratch;
    /* in the cache: calls using it now, and when it was last asked for */
    bool cached;
    int users;
    uint64_t last_use;
} dnnl_conv;

/* At most this many primitives are kept; when full, the least recently
 * used one that no call is using makes room (a process that runs many
 * models, or one model at many sizes, would otherwise create a primitive
 * on every call once the cache had filled). */
#define CACHE_MAX 64

static struct {
    pthread_mutex_t mu;
    dnnl_conv *cache[CACHE_MAX];
    int n;
    uint64_t tick;
} dn = {.mu = PTHREAD_MUTEX_INITIALIZER};

static bool same_geom(const cn_conv_geom *a, const cn_conv_geom *b) {
    return memcmp(a, b, sizeof *a) == 0;
}

static void conv_free(dnnl_conv *c) {
    if (!c) return;
    if (c->prim) dnnl_primitive_destroy(c->prim);
    for (int k = 0; k < 3; k++)
        if (c->reorder[k]) dnnl_primitive_destroy(c->reorder[k]);
    free(c);
}

static bool make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                         dnnl_primitive_t *r) {
    *r = NULL;
    if (dnnl_memory_desc_equal(from, to)) return true;
    dnnl_primitive_desc_t pd;
    if (dnnl_reorder_primitive_desc_create(&pd, from, cn_dnnl_engine(), to, cn_dnnl_engine(), NULL) != dnnl_success)
        return false;
    bool ok = dnnl_primitive_create(r, pd) == dnnl_success;
    dnnl_primitive_desc_destroy(pd);
    return ok;
}

/* The primitive for one product, or NULL when oneDNN does not take it. */
static dnnl_data_type_t dnnl_dt(cn_dtype dt) {
    return dt == CN_BF16 ? dnnl_bf16 : dt == CN_F16 ? dnnl_f16 : dnnl_f32;
}

static dnnl_conv *conv_create(int which, const cn_conv_geom *g, bool bias, cn_dtype dt) {
    dnnl_conv *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->which = which;
    c->g = *g;
    c->bias = bias;
    c->dt = dt;
    /* each argument's type: the product's inputs dt, its output f32 */
    dnnl_data_type_t tx = which == DGRAD ? dnnl_f32 : dnnl_dt(dt),
                     tw = which == WGRAD ? dnnl_f32 : dnnl_dt(dt),
                     ty = which == FWD ? dnnl_f32 : dnnl_dt(dt);
    int64_t G = g->groups;
    dnnl_dims_t xd = {g->N, g->C, g->H, g->W}, yd = {g->N, g->O, g->OH, g->OW};
    dnnl_dims_t wd = {G, g->O / G, g->C / G, g->KH, g->KW}, bd = {g->O};
    dnnl_dims_t strides = {g->sh, g->sw}, dil = {g->dh - 1, g->dw - 1}, pl = {g->ph, g->pw};
    /* right padding that makes oneDNN's size formula give exactly OH x OW */
    dnnl_dims_t pr = {(g->OH - 1) * g->sh + (g->KH - 1) * g->dh + 1 - g->H - g->ph,
                      (g->OW - 1) * g->sw + (g->KW - 1) * g->dw + 1 - g->W - g->pw};
    int wn = G > 1 ? 5 : 4;
    const int64_t *wdims = G > 1 ? wd : wd + 1;
    dnnl_format_tag_t wtag = G > 1 ? dnnl_goihw : dnnl_oihw;
    dnnl_memory_desc_t ux, uy, uw, ub, ax, ay, aw, hx, hy, hw;
    bool ok = dnnl_memory_desc_init_by_tag(&ux, 4, xd, tx, dnnl_nchw) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&uy, 4, yd, ty, dnnl_nchw) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&uw, wn, wdims, tw, wtag) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&ub, 1, bd, dnnl_f32, dnnl_x) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&ax, 4, xd, tx, dnnl_format_tag_any) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&ay, 4, yd, ty, dnnl_format_tag_any) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&aw, wn, wdims, tw, dnnl_format_tag_any) ==
                  dnnl_success;
    /* The forward product, or the hint a backward one is made from: that
     * of the same dtype (half inputs, an f32 output). */
    ok = ok &&
         dnnl_memory_desc_init_by_tag(&hx, 4, xd, dnnl_dt(dt), dnnl_format_tag_any) ==
             dnnl_success &&
         dnnl_memory_desc_init_by_tag(&hy, 4, yd, dnnl_f32, dnnl_format_tag_any) == dnnl_success &&
         dnnl_memory_desc_init_by_tag(&hw, wn, wdims, dnnl_dt(dt), dnnl_format_tag_any) ==
             dnnl_success;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t fpd = NULL, pd = NULL;
    ok = ok && dnnl_primitive_attr_create(&attr) == dnnl_success &&
         dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    dnnl_convolution_desc_t fd, bdsc;
    ok = ok && dnnl_dilated_convolution_forward_desc_init(
                   &fd, dnnl_forward_training, dnnl_convolution_direct, &hx, &hw,
                   which == FWD && bias ? &ub : NULL, &hy, strides, dil, pl, pr) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&fpd, &fd, which == FWD ? attr : NULL, cn_dnnl_engine(), NULL) ==
                   dnnl_success;
    if (ok && which == FWD) {
        pd = fpd;
        fpd = NULL;
    } else if (ok && which == DGRAD) {
        ok = dnnl_dilated_convolution_backward_data_desc_init(&bdsc, dnnl_convolution_direct, &ax,
                                                             &aw, &ay, strides, dil, pl, pr) ==
                 dnnl_success &&
             dnnl_primitive_desc_create(&pd, &bdsc, attr, cn_dnnl_engine(), fpd) == dnnl_success;
    } else if (ok) {
        ok = dnnl_dilated_convolution_backward_weights_desc_init(
                 &bdsc, dnnl_convolution_direct, &ax, &aw, NULL, &ay, strides, dil, pl, pr) ==
                 dnnl_success &&
             dnnl_primitive_desc_create(&pd, &bdsc, attr, cn_dnnl_engine(), fpd) == dnnl_success;
    }
    if (ok) {
        /* arguments: 0 the x-like tensor, 1 the weights, 2 the y-like one */
        static const dnnl_query_t q[3][3] = {
            {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md},
            {dnnl_query_diff_src_md, dnnl_query_weights_md, dnnl_query_diff_dst_md},
            {dnnl_query_src_md, dnnl_query_diff_weights_md, dnnl_query_diff_dst_md}};
        static const int args[3][3] = {
            {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
            {DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST},
            {DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST}};
        dnnl_memory_desc_t users[3] = {ux, uw, uy};
        /* which arguments are outputs (reordered from the primitive's format) */
        int out = which == FWD ? 2 : which == DGRAD ? 0 : 1;
        for (int k = 0; k < 3 && ok; k++) {
            c->user[k] = users[k];
            c->mine[k] = *dnnl_primitive_desc_query_md(pd, q[which][k], 0);
            c->arg[k] = args[which][k];
            ok = k == out ? make_reorder(&c->mine[k], &c->user[k], &c->reorder[k])
                          : make_reorder(&c->user[k], &c->mine[k], &c->reorder[k]);
        }
        if (which == FWD && bias)
            c->bias_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1);
        c->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        c->scratch = dnnl_memory_desc_get_size(&c->scratch_md);
        ok = ok && dnnl_primitive_create(&c->prim, pd) == dnnl_success;
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (!ok) {
        conv_free(c);
        return NULL;
    }
    return c;
}

/* The primitive for a product (created on first use), NULL when oneDNN
 * does not take it; conv_put hands it back. It is the cache's, or a fresh
 * one when every cached primitive is in use. */
static dnnl_conv *conv_get(int which, const cn_conv_geom *g, bool bias, cn_dtype dt) {
    cn_dnnl_one_thread();
    pthread_mutex_lock(&dn.mu);
    dnnl_conv *c = NULL;
    for (int i = 0; i < dn.n && !c; i++)
        if (dn.cache[i]->which == which && dn.cache[i]->bias == bias && dn.cache[i]->dt == dt &&
            same_geom(&dn.cache[i]->g, g))
            c = dn.cache[i];
    if (!c && (c = conv_create(which, g, bias, dt))) {
        int slot = dn.n < CACHE_MAX ? dn.n : -1;
        for (int i = 0; slot < 0 && i < dn.n; i++)
            if (!dn.cache[i]->users &&
                (slot < 0 || dn.cache[i]->last_use < dn.cache[slot]->last_use))
                slot = i;
        if (slot >= 0) {
            if (slot < dn.n) conv_free(dn.cache[slot]);
            else dn.n++;
            dn.cache[slot] = c;
            c->cached = true;
        }
    }
    if (c && c->cached) {
        c->users++;
        c->last_use = ++dn.tick;
    }
    pthread_mutex_unlock(&dn.mu);
    return c;
}

static void conv_put(dnnl_conv *c) {
    if (!c) return;
    if (!c->cached) {
        conv_free(c);
        return;
    }
    pthread_mutex_lock(&dn.mu);
    c->users--;
    pthread_mutex_unlock(&dn.mu);
}

#define mem cn_dnnl_mem

/* Runs product c on plain buffers p[3] (x-like, weights, y-like). pre[k],
 * when not NULL, holds argument k in the primitive's own format instead:
 * weights reordered once for every block of the batch, or a weight
 * gradient left in that format for the blocks' parts to be summed before
 * one reorder. bias: the forward primitive's bias (plain), or NULL. */
static int run(dnnl_conv *c, void *const p[3], void *const pre[3], const void *bias) {
    int rc = CN_ENOMEM;
    dnnl_stream_t s = NULL;
    dnnl_memory_t user[3] = {NULL}, mine[3] = {NULL}, scratch = NULL, bmem = NULL;
    void *buf[3] = {NULL}, *sbuf = NULL;
    if (dnnl_stream_create(&s, cn_dnnl_engine(), dnnl_stream_default_flags) != dnnl_success) goto out;
    cn_dnnl_one_thread();
    int out = c->which == FWD ? 2 : c->which == DGRAD ? 0 : 1;
    for (int k = 0; k < 3; k++) {
        if (pre[k]) {
            if (!(mine[k] = mem(&c->mine[k], pre[k]))) goto out;
            continue;
        }
        if (!(user[k] = mem(&c->user[k], p[k]))) goto out;
        if (c->reorder[k]) {
            if (!(buf[k] = cn_alloc(dnnl_memory_desc_get_size(&c->mine[k])))) goto out;
            if (!(mine[k] = mem(&c->mine[k], buf[k]))) goto out;
            if (k != out) {
                dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, user[k]}, {DNNL_ARG_TO, mine[k]}};
                if (dnnl_primitive_execute(c->reorder[k], s, 2, a) != dnnl_success) goto out;
            }
        }
    }
    if (!(sbuf = cn_alloc(c->scratch)) || !(scratch = mem(&c->scratch_md, sbuf))) goto out;
    if (c->bias && !(bmem = mem(&c->bias_md, (void *)bias))) goto out;
    dnnl_exec_arg_t a[5];
    for (int k = 0; k < 3; k++) a[k] = (dnnl_exec_arg_t){c->arg[k], mine[k] ? mine[k] : user[k]};
    a[3] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scratch};
    a[4] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bmem};
    if (dnnl_primitive_execute(c->prim, s, c->bias ? 5 : 4, a) != dnnl_success) goto out;
    if (c->reorder[out] && !pre[out]) {
        dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, mine[out]}, {DNNL_ARG_TO, user[out]}};
        if (dnnl_primitive_execute(c->reorder[out], s, 2, r) != dnnl_success) goto out;
    }
    if (dnnl_stream_wait(s) == dnnl_success) rc = CN_OK;
out:
    for (int k = 0; k < 3; k++) {
        if (user[k]) dnnl_memory_destroy(user[k]);
        if (mine[k]) dnnl_memory_destroy(mine[k]);
        cn_free(buf[k]);
    }
    if (scratch) dnnl_memory_destroy(scratch);
    if (bmem) dnnl_memory_destroy(bmem);
    cn_free(sbuf);
    if (s) dnnl_stream_destroy(s);
    return rc;
}

/* One reorder r from buffer src (format from) to dst (format to). */
static int reorder_once(dnnl_primitive_t r, const dnnl_memory_desc_t *from, void *src,
                        const dnnl_memory_desc_t *to, void *dst) {
    int rc = CN_ENOMEM;
    dnnl_stream_t s = NULL;
    dnnl_memory_t m[2] = {mem(from, src), mem(to, dst)};
    if (m[0] && m[1] && dnnl_stream_create(&s, cn_dnnl_engine(), dnnl_stream_default_flags) == dnnl_success) {
        cn_dnnl_one_thread();
        dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, m[0]}, {DNNL_ARG_TO, m[1]}};
        if (dnnl_primitive_execute(r, s, 2, a) == dnnl_success &&
            dnnl_stream_wait(s) == dnnl_success)
            rc = CN_OK;
    }
    for (int k = 0; k < 2; k++)
        if (m[k]) dnnl_memory_destroy(m[k]);
    if (s) dnnl_stream_destroy(s);
    return rc;
}

static bool usable(void) { return cn_dnnl_engine() != NULL; }

/* Contiguous copies where needed (*own set when one was made). */
static void *dense(const cn_tensor *t, cn_tensor **own) {
    *own = NULL;
    cn_tensor *c = cn_t_contiguous((cn_tensor *)t);
    if (!c) return NULL;
    if (c != t) *own = c;
    else cn_release(c);
    return cn_t_ptr(c);
}


/* The batch is cut into at most this many blocks (of equal size but the
 * last): enough for the pool to share, and each call still big enough to
 * amortise its overhead. */
#define DNNL_BLOCKS 16

static int64_t block_size(int64_t N) { return (N + DNNL_BLOCKS - 1) / DNNL_BLOCKS; }

/* A forward product is also cut into blocks of output channels, each a
 * convolution of its own, when every block of the batch is one sample (N <=
 * DNNL_BLOCKS): at batch 1 there would otherwise be one call on one
 * thread. A grouped convolution is cut between groups (a block is then a
 * convolution of its groups' input channels, contiguous in x), any other
 * into blocks of at least OUT_BLOCK_MIN channels (16 where that leaves one
 * block), a multiple of 16 (the widest channel block of oneDNN's formats),
 * that all read the whole of x.
 * The count is the largest divisor that keeps N x (blocks) within
 * DNNL_BLOCKS, so it depends on the geometry alone. */
#define OUT_BLOCK_MIN 32

static int64_t out_blocks(int which, const cn_conv_geom *g) {
    if (which != FWD || block_size(g->N) > 1) return 1;
    /* Blocks of 16 channels only where 32 leave one: DenseNet-121's 3x3
     * layers (32 output channels) ran 1.3x faster at batch 1 in two
     * blocks on oneDNN than on im2col + GEMM; wider layers keep their
     * blocks of 32 and up, each of which reads all of x. */
    for (int64_t min = OUT_BLOCK_MIN; min >= 16; min /= 2)
        for (int64_t d = DNNL_BLOCKS / g->N; d > 1; d--) {
            if (g->groups > 1 && g->groups % d == 0) return d;
            int64_t ob = g->O / d;
            if (g->groups == 1 && g->O % d == 0 && ob % 16 == 0 && ob >= min) return d;
        }
    return 1;
}

int64_t cn_dnnl_conv2d_tasks(const cn_conv_geom *g, int which) {
    int64_t bs = block_size(g->N);
    return (g->N + bs - 1) / bs * out_blocks(which, g);
}

/* The geometry of one call: a block of the batch and of the output
 * channels (with their groups' input channels). */
static cn_conv_geom block_geom(const cn_conv_geom *g, int64_t n, int64_t nob) {
    cn_conv_geom b = *g;
    b.N = n;
    b.O /= nob;
    if (g->groups > 1) b.C /= nob, b.groups /= nob;
    return b;
}

bool cn_dnnl_conv2d_available(const cn_conv_geom *g, cn_dtype dt, int which) {
    if ((dt != CN_F32 && !cn_is_half(dt)) || g->N < 1 || !usable()) return false;
    cn_conv_geom gb = block_geom(g, block_size(g->N), out_blocks(which, g));
    dnnl_conv *c = conv_get(which, &gb, false, dt);
    conv_put(c);
    return c != NULL;
}

typedef struct blocks {
    int which;
    const cn_conv_geom *g;
    dnnl_conv *full, *last; /* primitives for a whole block and the last one */
    int64_t bs, nblk;
    int64_t nob;     /* blocks of output channels (tasks: nblk x nob, channels fastest) */
    size_t xg, wg, yg; /* floats of x, w and y per channel block (0 when nob is 1) */
    size_t og;         /* output channels per block (the bias's offset; 0 when nob is 1) */
    size_t wmine_block; /* bytes of a channel block's weights in wmine */
    char *p[3];      /* x-like, weights, y-like (plain, contiguous) */
    size_t es[3];    /* their element sizes (the inputs half or f32, the output f32) */
    char *partial;   /* wgrad: one weight-sized part per block */
    size_t part_size; /* bytes of each part (in the primitive's format with wmine) */
    char *wmine;     /* the weights (fwd, dgrad) or the parts (wgrad) in the primitive's format */
    char *xmine;     /* fwd in blocks of channels that all read x: x in the primitive's format */
    size_t xmine_block; /* bytes of a block of the batch in xmine */
    const float *bias; /* fwd: the primitive's bias; dgrad: added to the C channels */
    cn_gemm_out eo;    /* fwd: the step's bounds, taken (clamp set), or none */
    cn_epilogue *ep;   /* fwd: the step's epilogue, taken, or NULL */
    atomic_int failed;
} blocks;

static void block_task(void *ctx, int64_t b0, int64_t b1) {
    blocks *k = ctx;
    const cn_conv_geom *g = k->g;
    size_t xs = (size_t)(g->C * g->H * g->W), ys = (size_t)(g->O * g->OH * g->OW);
    for (int64_t t = b0; t < b1; t++) {
        int64_t b = t / k->nob, j = t % k->nob;
        int64_t n0 = b * k->bs, n = b == k->nblk - 1 ? g->N - n0 : k->bs;
        void *p[3] = {k->p[0] + k->es[0] * (xs * (size_t)n0 + k->xg * (size_t)j),
                      k->p[1] + k->es[1] * k->wg * (size_t)j,
                      k->p[2] + k->es[2] * (ys * (size_t)n0 + k->yg * (size_t)j)};
        void *pre[3] = {NULL, NULL, NULL};
        if (k->which != WGRAD && k->wmine) pre[1] = k->wmine + k->wmine_block * (size_t)j;
        if (k->xmine) pre[0] = k->xmine + k->xmine_block * (size_t)b;
        if (k->which == WGRAD && k->partial) {
            void *part = k->partial + k->part_size * (size_t)b;
            if (k->wmine) pre[1] = part;
            else p[1] = part;
        }
        dnnl_conv *c = n == k->bs ? k->full : k->last;
        const float *bias = k->which == FWD && k->bias ? k->bias + k->og * (size_t)j : NULL;
        if (run(c, p, pre, bias) != CN_OK) {
            atomic_store(&k->failed, 1);
            continue;
        }
        /* the call's output, sample by sample, while it is in cache: at
         * batch 16 a pass of its own read it back from memory */
        size_t len = (k->nob > 1 ? k->og : (size_t)g->O) * (size_t)(g->OH * g->OW);
        for (int64_t s = 0; s < n && (k->eo.clamp || k->ep); s++) {
            size_t at = ys * (size_t)(n0 + s) + k->yg * (size_t)j; /* in y */
            if (k->eo.clamp)
                cn_gemm_out_apply(CN_F32, (float *)k->p[2] + at, 1, (int64_t)len, (int64_t)len,
                                  &k->eo);
            if (k->ep) cn_epilogue_apply(k->ep, (int64_t)at, (int64_t)(at + len));
        }
        if (k->which != DGRAD || !k->bias) continue;
        int64_t ch = g->C, P = g->H * g->W;
        float *o = p[0];
        for (int64_t s = 0; s < n * ch; s++) {
            float v = k->bias[s % ch], *r = o + s * P;
            for (int64_t i = 0; i < P; i++) r[i] += v;
        }
    }
}

/* The blocks of product which on g, and the primitives of a whole block
 * and of the last one (unplan hands them back).
 * Returns CN_OK, or 1 when oneDNN does not take the geometry. */
static int plan(int which, const cn_conv_geom *g, bool bias, cn_dtype dt, blocks *k) {
    memset(k, 0, sizeof *k);
    k->which = which;
    k->g = g;
    int out = which == FWD ? 2 : which == DGRAD ? 0 : 1;
    for (int j = 0; j < 3; j++) k->es[j] = j == out ? sizeof(float) : cn_dsize(dt);
    k->bs = block_size(g->N);
    k->nblk = (g->N + k->bs - 1) / k->bs;
    k->nob = out_blocks(which, g);
    cn_conv_geom gb = block_geom(g, k->bs, k->nob),
                 gl = block_geom(g, g->N - (k->nblk - 1) * k->bs, k->nob);
    if (k->nob > 1) {
        k->xg = g->groups > 1 ? (size_t)(gb.C * g->H * g->W) : 0; /* else every block reads all x */
        k->yg = (size_t)(gb.O * g->OH * g->OW);
        k->wg = (size_t)(gb.O * (g->C / g->groups) * g->KH * g->KW);
        k->og = (size_t)gb.O;
    }
    /* the forward primitive adds the bias itself (one pass over y fewer) */
    bool pbias = which == FWD && bias;
    k->full = conv_get(which, &gb, pbias, dt);
    k->last = gl.N == gb.N ? k->full : conv_get(which, &gl, pbias, dt);
    return k->full && k->last ? CN_OK : 1;
}

static void unplan(blocks *k) {
    if (k->last != k->full) conv_put(k->last);
    conv_put(k->full);
}

/* What a program's pack of a forward product's weights was made for: the
 * geometry and the primitive's weight format (conv_dnnl's key). */
typedef struct wpack_key {
    cn_conv_geom g;
    bool bias;
    dnnl_memory_desc_t md;
} wpack_key;

static void wpack_key_of(wpack_key *key, const cn_conv_geom *g, bool bias,
                         const dnnl_memory_desc_t *md) {
    memset(key, 0, sizeof *key); /* the padding too: keys compare byte for byte */
    key->g = *g;
    key->bias = bias;
    key->md = *md;
}

/* Runs one product on t = {x-like, weights, y-like} (the output is the
 * y-like for fwd, the x-like for dgrad, the weights for wgrad). Returns 1
 * when oneDNN does not take the geometry (the caller falls back), else a
 * status. */
static int product(int which, const cn_conv_geom *g, const cn_tensor *bias,
                   const cn_tensor *t[3]) {
    if (!usable() || g->N < 1) return 1;
    blocks k;
    /* the inputs' dtype: the weights' but for the weight gradient */
    int rc = plan(which, g, bias != NULL, (cn_dtype)t[which == WGRAD ? 0 : 1]->dtype, &k);
    cn_tensor *own[4] = {NULL};
    size_t ws = (size_t)(g->O * (g->C / g->groups) * g->KH * g->KW) * sizeof(float);
    for (int j = 0; j < 3 && rc == CN_OK; j++)
        if (!(k.p[j] = dense(t[j], &own[j]))) rc = CN_ENOMEM;
    if (rc == CN_OK && bias && !(k.bias = dense(bias, &own[3]))) rc = CN_ENOMEM;
    /* oneDNN takes the product: the step's bounds too (its bias is the
     * primitive's) */
    if (rc == CN_OK && which == FWD && cn_gemm_out_take(&k.eo)) k.eo.bias = NULL;
    if (rc == CN_OK && which == FWD && !own[2]) k.ep = cn_epilogue_take(t[2]);
    /* The weights in the primitive's format: reordered once here rather
     * than by every block (the blocks' primitives share that format). */
    bool blocked_w = rc == CN_OK && k.full->reorder[1] &&
                     dnnl_memory_desc_equal(&k.full->mine[1], &k.last->mine[1]);
    size_t wmine_size = blocked_w ? dnnl_memory_desc_get_size(&k.full->mine[1]) : 0;
    /* A program's constant weights come reordered already (its pack). */
    bool packed = false;
    if (blocked_w && which == FWD) {
        wpack_key key;
        wpack_key_of(&key, g, bias != NULL, &k.full->mine[1]);
        const cn_gemm_pack *pk = cn_gemm_pack_step();
        if (cn_gemm_pack_holds(pk, t[1]) &&
            (k.wmine = cn_gemm_pack_opaque_data(pk, &key, sizeof key)))
            packed = true, k.wmine_block = wmine_size;
    }
    if (blocked_w && which != WGRAD && !packed) {
        k.wmine_block = wmine_size;
        if (!(k.wmine = cn_alloc(wmine_size * (size_t)k.nob))) rc = CN_ENOMEM;
        for (int64_t j = 0; j < k.nob && rc == CN_OK; j++)
            rc = reorder_once(k.full->reorder[1], &k.full->user[1],
                              k.p[1] + k.es[1] * k.wg * (size_t)j, &k.full->mine[1],
                              k.wmine + wmine_size * (size_t)j);
    }
    /* Blocks of output channels that all read the whole of x (not grouped):
     * x in the primitive's format once per sample, not once per block.
     * ResNet-18 at batch 1 reordered each 3x3 layer's input 2 to 16 times
     * (1.5 ms of its 29 on an AVX-512 Xeon, one thread). */
    if (rc == CN_OK && which == FWD && k.nob > 1 && k.xg == 0 && k.full->reorder[0] &&
        k.full == k.last) {
        size_t xs = (size_t)(g->C * g->H * g->W) * k.es[0] * (size_t)k.bs;
        k.xmine_block = dnnl_memory_desc_get_size(&k.full->mine[0]);
        if (!(k.xmine = cn_alloc(k.xmine_block * (size_t)k.nblk))) rc = CN_ENOMEM;
        for (int64_t b = 0; b < k.nblk && rc == CN_OK; b++)
            rc = reorder_once(k.full->reorder[0], &k.full->user[0], k.p[0] + xs * (size_t)b,
                              &k.full->mine[0], k.xmine + k.xmine_block * (size_t)b);
    }
    /* The weight gradient: one part per block, summed in block order (in the
     * primitive's format when it has one, then reordered once). */
    if (rc == CN_OK && which == WGRAD && (k.nblk > 1 || blocked_w)) {
        k.part_size = blocked_w ? wmine_size : ws;
        if (!(k.partial = cn_alloc(k.part_size * (size_t)k.nblk))) rc = CN_ENOMEM;
        k.wmine = blocked_w ? k.partial : NULL;
    }
    if (rc == CN_OK) {
        atomic_init(&k.failed, 0);
        if (k.nblk * k.nob > 1) cn_parallel_tasks(k.nblk * k.nob, block_task, &k);
        else block_task(&k, 0, 1);
        if (atomic_load(&k.failed)) rc = CN_ENOMEM;
    }
    if (rc == CN_OK && k.partial) {
        size_t nf = k.part_size / sizeof(float);
        float *sum = (float *)k.partial;
        for (int64_t b = 1; b < k.nblk; b++)
            for (size_t i = 0; i < nf; i++) sum[i] += sum[(size_t)b * nf + i];
        if (blocked_w)
            rc = reorder_once(k.full->reorder[1], &k.full->mine[1], k.partial, &k.full->user[1],
                              k.p[1]);
        else
            memcpy(k.p[1], k.partial, ws);
    }
    if (which != WGRAD && !packed) cn_free(k.wmine);
    cn_free(k.xmine);
    cn_free(k.partial);
    for (int j = 0; j < 4; j++) cn_release(own[j]);
    unplan(&k);
    return rc;
}

cn_gemm_pack *cn_dnnl_conv2d_fwd_pack(const cn_conv_geom *g, const cn_tensor *w, bool bias) {
    cn_dtype dt = (cn_dtype)w->dtype;
    if (!usable() || g->N < 1 || (dt != CN_F32 && !cn_is_half(dt))) return NULL;
    blocks k;
    cn_gemm_pack *pk = NULL;
    if (plan(FWD, g, bias, dt, &k) == CN_OK && k.full->reorder[1] &&
        dnnl_memory_desc_equal(&k.full->mine[1], &k.last->mine[1])) {
        size_t size = dnnl_memory_desc_get_size(&k.full->mine[1]);
        wpack_key key;
        wpack_key_of(&key, g, bias, &k.full->mine[1]);
        cn_tensor *own = NULL;
        const char *src = dense(w, &own);
        if (src && (pk = cn_gemm_pack_opaque(w, size * (size_t)k.nob, &key, sizeof key))) {
            char *dst = cn_gemm_pack_opaque_data(pk, &key, sizeof key);
            int rc = CN_OK;
            for (int64_t j = 0; j < k.nob && rc == CN_OK; j++)
                rc = reorder_once(k.full->reorder[1], &k.full->user[1],
                                  (char *)src + k.es[1] * k.wg * (size_t)j,
                                  &k.full->mine[1], dst + size * (size_t)j);
            if (rc != CN_OK) {
                cn_gemm_pack_free(pk);
                pk = NULL;
            }
        }
        cn_release(own);
    }
    unplan(&k);
    return pk;
}

bool cn_dnnl_conv2d_fwd_pack_fits(const cn_gemm_pack *pk, const cn_conv_geom *g, bool bias,
                                  cn_dtype dt) {
    if (!pk || !usable() || g->N < 1) return false;
    blocks k;
    bool fits = false;
    if (plan(FWD, g, bias, dt, &k) == CN_OK) {
        wpack_key key;
        wpack_key_of(&key, g, bias, &k.full->mine[1]);
        fits = cn_gemm_pack_opaque_data(pk, &key, sizeof key) != NULL;
    }
    unplan(&k);
    return fits;
}

int cn_dnnl_conv2d_fwd(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *w,
                       const cn_tensor *bias, cn_tensor *y) {
    const cn_tensor *t[3] = {x, w, y};
    return product(FWD, g, bias, t);
}

int cn_dnnl_conv2d_dgrad(const cn_conv_geom *g, const cn_tensor *dy, const cn_tensor *w,
                         const cn_tensor *bias, cn_tensor *dx) {
    const cn_tensor *t[3] = {dx, w, dy};
    return product(DGRAD, g, bias, t);
}

int cn_dnnl_conv2d_wgrad(const cn_conv_geom *g, const cn_tensor *x, const cn_tensor *dy,
                         cn_tensor *dw) {
    const cn_tensor *t[3] = {x, dw, dy};
    return product(WGRAD, g, NULL, t);
}

#endif
