/* Convolution and pooling modules over the conv/pool ops (src/ops/conv.c,
 * src/ops/pool.c). */
#include "nn.h"
#include "../ops/quant.h"

#include <inttypes.h>

typedef enum { CONV1D, CONV2D, CONV_T2D } conv_kind;

typedef struct conv_mod {
    cn_module base;
    conv_kind kind;
    cn_conv_opts o;
    cn_q_pack pack; /* Conv2dInt8's weights packed for the GEMM */
} conv_mod;

static cn_tensor *conv_forward(cn_module *m, cn_tensor *x) {
    conv_mod *c = (conv_mod *)m;
    cn_tensor *w = cn_nn_p(m, 0), *b = cn_nn_p(m, 1);
    switch (c->kind) {
    case CONV1D: return cn_conv1d(x, w, b, &c->o);
    case CONV2D: return cn_conv2d(x, w, b, &c->o);
    case CONV_T2D: return cn_conv_transpose2d(x, w, b, &c->o);
    }
    return cn_fail("module_forward: corrupt convolution module");
}

static const cn_module_vtable conv1d_vt = {"Conv1d", conv_forward, NULL};
static const cn_module_vtable conv2d_vt = {"Conv2d", conv_forward, NULL};
static const cn_module_vtable convt2d_vt = {"ConvTranspose2d", conv_forward, NULL};

/* Buffers: weight (i8), weight_scale, bias (cn_nn_quantize_weight). */
static cn_tensor *conv2d_int8_forward(cn_module *m, cn_tensor *x) {
    /* One unbatched image [C, H, W], as Conv2d takes it. */
    bool single = x && cn_ndim(x) == 3;
    if (single) x = cn_unsqueeze(x, 0);
    conv_mod *c = (conv_mod *)m;
    cn_tensor *y = cn_q_conv2d_int8(x, cn_nn_b(m, 0), cn_nn_b(m, 1), cn_nn_b(m, 2), &c->o, &c->pack);
    return single ? cn_squeeze(y, 0) : y;
}

static void conv2d_int8_free(cn_module *m) { cn_q_pack_clear(&((conv_mod *)m)->pack); }

static const cn_module_vtable conv2d_int8_vt = {"Conv2dInt8", conv2d_int8_forward,
                                                conv2d_int8_free};

int cn_nn_conv2d_quantize(cn_module *m) {
    const cn_conv_opts *o = &((conv_mod *)m)->o;
    if (m->vt != &conv2d_vt || o->groups > 1 || o->dilation[0] > 1 || o->dilation[1] > 1)
        return 0;
    int rc = cn_nn_quantize_weight(m);
    if (rc < 0) return rc;
    m->vt = &conv2d_int8_vt;
    return 1;
}

static cn_module *conv_new(const cn_module_vtable *vt, conv_kind kind, int64_t in, int64_t out,
                           int64_t kh, int64_t kw, const cn_conv_opts *opts, bool bias) {
    cn_conv_opts o = {0};
    if (opts) o = *opts;
    int64_t g = o.groups ? o.groups : 1;
    if (in < 1 || out < 1 || kh < 1 || kw < 1 || g < 1)
        return cn_fail("%s: channels (%" PRId64 ", %" PRId64 "), kernel (%" PRId64 ", %" PRId64
                       ") and groups %" PRId64 " must be positive",
                       vt->type, in, out, kh, kw, g);
    if (in % g || out % g)
        return cn_fail("%s: in_channels %" PRId64 " and out_channels %" PRId64
                       " must both be divisible by groups %" PRId64,
                       vt->type, in, out, g);
    conv_mod *c = (conv_mod *)cn_module_new(vt, sizeof(conv_mod));
    if (!c) return NULL;
    c->kind = kind;
    c->o = o;
    int64_t wshape[4] = {kind == CONV_T2D ? in : out, kind == CONV_T2D ? out / g : in / g, kh, kw};
    cn_module *m = &c->base;
    cn_tensor *w = cn_nn_new_param(m, "weight", kind == CONV1D ? 3 : 4, wshape);
    cn_tensor *b = w && bias ? cn_nn_new_param(m, "bias", 1, &out) : NULL;
    if (!w || (bias && !b) || cn_nn_init_default(w, b) < 0) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}

cn_module *cn_nn_conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                        const cn_conv_opts *opts, bool bias) {
    return conv_new(&conv1d_vt, CONV1D, in_channels, out_channels, kernel, 1, opts, bias);
}

cn_module *cn_nn_conv2d(int64_t in_channels, int64_t out_channels, int64_t kh, int64_t kw,
                        const cn_conv_opts *opts, bool bias) {
    return conv_new(&conv2d_vt, CONV2D, in_channels, out_channels, kh, kw, opts, bias);
}

cn_module *cn_nn_conv_transpose2d(int64_t in_channels, int64_t out_channels, int64_t kh,
                                  int64_t kw, const cn_conv_opts *opts, bool bias) {
    return conv_new(&convt2d_vt, CONV_T2D, in_channels, out_channels, kh, kw, opts, bias);
}

/* ---- pooling ---- */

typedef enum { MAX_POOL, AVG_POOL, ADAPTIVE_AVG } pool_kind;

typedef struct pool_mod {
    cn_module base;
    pool_kind kind;
    cn_pool_opts o;
    int64_t oh, ow;
} pool_mod;

static cn_tensor *pool_forward(cn_module *m, cn_tensor *x) {
    pool_mod *p = (pool_mod *)m;
    switch (p->kind) {
    case MAX_POOL: return cn_max_pool2d(x, &p->o);
    case AVG_POOL: return cn_avg_pool2d(x, &p->o);
    case ADAPTIVE_AVG: return cn_adaptive_avg_pool2d(x, p->oh, p->ow);
    }
    return cn_fail("module_forward: corrupt pooling module");
}

static const cn_module_vtable maxpool_vt = {"MaxPool2d", pool_forward, NULL};
static const cn_module_vtable avgpool_vt = {"AvgPool2d", pool_forward, NULL};
static const cn_module_vtable adaptive_vt = {"AdaptiveAvgPool2d", pool_forward, NULL};

static cn_module *pool_new(const cn_module_vtable *vt, pool_kind kind, const cn_pool_opts *o,
                           int64_t oh, int64_t ow) {
    if (kind != ADAPTIVE_AVG && (!o || o->kernel[0] < 1 || o->kernel[1] < 1))
        return cn_fail("%s: the options must give a positive kernel size", vt->type);
    if (kind == ADAPTIVE_AVG && (oh < 1 || ow < 1))
        return cn_fail("%s: output size (%" PRId64 ", %" PRId64 ") must be positive", vt->type,
                       oh, ow);
    pool_mod *p = (pool_mod *)cn_module_new(vt, sizeof(pool_mod));
    if (!p) return NULL;
    p->kind = kind;
    if (o) p->o = *o;
    p->oh = oh;
    p->ow = ow;
    return &p->base;
}

cn_module *cn_nn_max_pool2d(const cn_pool_opts *opts) {
    return pool_new(&maxpool_vt, MAX_POOL, opts, 0, 0);
}

cn_module *cn_nn_avg_pool2d(const cn_pool_opts *opts) {
    return pool_new(&avgpool_vt, AVG_POOL, opts, 0, 0);
}

cn_module *cn_nn_adaptive_avg_pool2d(int64_t out_h, int64_t out_w) {
    return pool_new(&adaptive_vt, ADAPTIVE_AVG, NULL, out_h, out_w);
}
