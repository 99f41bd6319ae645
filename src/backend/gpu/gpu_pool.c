/* Pooling (NCHW, f32 and f64), with the CPU kernels' exact
 * windows (src/backend/cpu/pool.c): which taps count, the first maximum of
 * a window in row-major order (a NaN takes over), what an average divides
 * by. Forward kernels: one work item per output element. Backward kernels:
 * one work item per input element, gathering from the outputs whose
 * windows hold it in (oh, ow) order, the order the CPU adds them in, so no
 * atomics and the same sums. max_pool2d_backward first finds the maxima
 * (max_pool2d_indices into a temporary). Inputs are read through their
 * strides. */
#include "gpu_kernels.h"

#include <stdio.h>

typedef struct pgeom {
    int64_t N, C, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, cip, div;
} pgeom;

/* x's (or dy's) offset and strides. */
typedef struct pstr {
    int64_t o, sn, sc, sh, sw;
} pstr;

static const char pool_src[] =
    "typedef struct { long N, C, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, cip, div; } pgeom;\n"
    "typedef struct { long o, sn, sc, sh, sw; } pstr;\n"
    "#define AT(s, n, c, h, w) ((s).o + (n) * (s).sn + (c) * (s).sc + (h) * (s).sh + (w) * (s).sw)\n"
    "static long ceil_div(long a, long b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }\n"
    /* max: want 0 writes the values to y, 1 the positions to ix */
    "__kernel void cn_max(__global const T *x, pstr xs, pgeom g, __global T *y,\n"
    "                     __global long *ix, long oo, int want, long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long ow = e % g.OW, oh = e / g.OW % g.OH, pl = e / (g.OW * g.OH);\n"
    "    long nn = pl / g.C, c = pl % g.C;\n"
    "    long h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;\n"
    "    long h1 = min(h0 + (g.kh - 1) * g.dh + 1, g.H), w1 = min(w0 + (g.kw - 1) * g.dw + 1, g.W);\n"
    "    while (h0 < 0) h0 += g.dh;\n"
    "    while (w0 < 0) w0 += g.dw;\n"
    "    T m = -INFINITY;\n"
    "    long best = h0 * g.W + w0;\n"
    "    for (long ih = h0; ih < h1; ih += g.dh)\n"
    "        for (long iw = w0; iw < w1; iw += g.dw) {\n"
    "            T v = x[AT(xs, nn, c, ih, iw)];\n"
    "            if (v > m || isnan(v)) { m = v; best = ih * g.W + iw; }\n"
    "        }\n"
    "    if (want) ix[oo + e] = best; else y[oo + e] = m;\n"
    "}\n"
    /* dx from dy at the maxima ix ([N, C, OH, OW], contiguous) */
    "__kernel void cn_max_back(__global const long *ix, __global const T *dy, pstr gs, pgeom g,\n"
    "                          __global T *dx, long oo, long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long iw = e % g.W, ih = e / g.W % g.H, pl = e / (g.W * g.H);\n"
    "    long nn = pl / g.C, c = pl % g.C, p = ih * g.W + iw;\n"
    "    long oh0 = max(ceil_div(ih + g.ph - (g.kh - 1) * g.dh, g.sh), 0L);\n"
    "    long oh1 = min((ih + g.ph) / g.sh, g.OH - 1);\n"
    "    long ow0 = max(ceil_div(iw + g.pw - (g.kw - 1) * g.dw, g.sw), 0L);\n"
    "    long ow1 = min((iw + g.pw) / g.sw, g.OW - 1);\n"
    "    __global const long *pix = ix + pl * g.OH * g.OW;\n"
    "    T acc = 0;\n"
    "    for (long oh = oh0; oh <= oh1; oh++)\n"
    "        for (long ow = ow0; ow <= ow1; ow++)\n"
    "            if (pix[oh * g.OW + ow] == p) acc += dy[AT(gs, nn, c, oh, ow)];\n"
    "    dx[oo + e] = acc;\n"
    "}\n"
    /* the window of output (oh, ow) clipped to the input, and its divisor */
    "static long avg_window(pgeom g, long oh, long ow, long *h0, long *h1, long *w0, long *w1) {\n"
    "    long a = oh * g.sh - g.ph, b = ow * g.sw - g.pw;\n"
    "    long ae = min(a + g.kh, g.H + g.ph), be = min(b + g.kw, g.W + g.pw);\n"
    "    long pool = (ae - a) * (be - b);\n"
    "    *h0 = max(a, 0L); *w0 = max(b, 0L); *h1 = min(ae, g.H); *w1 = min(be, g.W);\n"
    "    if (g.div > 0) return g.div;\n"
    "    if (g.cip) return pool;\n"
    "    return (*h1 - *h0) * (*w1 - *w0);\n"
    "}\n"
    "__kernel void cn_avg(__global const T *x, pstr xs, pgeom g, __global T *y, long oo, long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long ow = e % g.OW, oh = e / g.OW % g.OH, pl = e / (g.OW * g.OH);\n"
    "    long nn = pl / g.C, c = pl % g.C, h0, h1, w0, w1;\n"
    "    T div = (T)avg_window(g, oh, ow, &h0, &h1, &w0, &w1);\n"
    "    if (h0 >= h1 || w0 >= w1) { y[oo + e] = 0; return; }\n"
    "    ACC s = 0;\n"
    "    for (long ih = h0; ih < h1; ih++)\n"
    "        for (long iw = w0; iw < w1; iw++) s += x[AT(xs, nn, c, ih, iw)];\n"
    "    y[oo + e] = (T)(s / (ACC)div);\n"
    "}\n"
    "__kernel void cn_avg_back(__global const T *dy, pstr gs, pgeom g, __global T *dx, long oo,\n"
    "                          long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long iw = e % g.W, ih = e / g.W % g.H, pl = e / (g.W * g.H);\n"
    "    long nn = pl / g.C, c = pl % g.C;\n"
    "    long oh0 = max(ceil_div(ih + g.ph - g.kh + 1, g.sh), 0L);\n"
    "    long oh1 = min((ih + g.ph) / g.sh, g.OH - 1);\n"
    "    long ow0 = max(ceil_div(iw + g.pw - g.kw + 1, g.sw), 0L);\n"
    "    long ow1 = min((iw + g.pw) / g.sw, g.OW - 1);\n"
    "    T acc = 0;\n"
    "    for (long oh = oh0; oh <= oh1; oh++)\n"
    "        for (long ow = ow0; ow <= ow1; ow++) {\n"
    "            long h0, h1, w0, w1;\n"
    "            T div = (T)avg_window(g, oh, ow, &h0, &h1, &w0, &w1);\n"
    "            if (ih < h0 || ih >= h1 || iw < w0 || iw >= w1) continue;\n"
    "            acc += dy[AT(gs, nn, c, oh, ow)] / div;\n"
    "        }\n"
    "    dx[oo + e] = acc;\n"
    "}\n"
    "#define AD_START(o, out, in) ((o) * (in) / (out))\n"
    "#define AD_END(o, out, in) (((o) + 1) * (in) + (out) - 1) / (out)\n"
    "__kernel void cn_adaptive(__global const T *x, pstr xs, pgeom g, __global T *y, long oo,\n"
    "                          long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long ow = e % g.OW, oh = e / g.OW % g.OH, pl = e / (g.OW * g.OH);\n"
    "    long nn = pl / g.C, c = pl % g.C;\n"
    "    long h0 = AD_START(oh, g.OH, g.H), h1 = AD_END(oh, g.OH, g.H);\n"
    "    long w0 = AD_START(ow, g.OW, g.W), w1 = AD_END(ow, g.OW, g.W);\n"
    "    ACC s = 0;\n"
    "    for (long ih = h0; ih < h1; ih++)\n"
    "        for (long iw = w0; iw < w1; iw++) s += x[AT(xs, nn, c, ih, iw)];\n"
    "    y[oo + e] = (T)(s / (ACC)((h1 - h0) * (w1 - w0)));\n"
    "}\n"
    "__kernel void cn_adaptive_back(__global const T *dy, pstr gs, pgeom g, __global T *dx,\n"
    "                               long oo, long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long iw = e % g.W, ih = e / g.W % g.H, pl = e / (g.W * g.H);\n"
    "    long nn = pl / g.C, c = pl % g.C;\n"
    "    long oh0 = max(ih * g.OH / g.H - 1, 0L), oh1 = min((ih + 1) * g.OH / g.H + 1, g.OH - 1);\n"
    "    long ow0 = max(iw * g.OW / g.W - 1, 0L), ow1 = min((iw + 1) * g.OW / g.W + 1, g.OW - 1);\n"
    "    T acc = 0;\n"
    "    for (long oh = oh0; oh <= oh1; oh++) {\n"
    "        long h0 = AD_START(oh, g.OH, g.H), h1 = AD_END(oh, g.OH, g.H);\n"
    "        if (ih < h0 || ih >= h1) continue;\n"
    "        for (long ow = ow0; ow <= ow1; ow++) {\n"
    "            long w0 = AD_START(ow, g.OW, g.W), w1 = AD_END(ow, g.OW, g.W);\n"
    "            if (iw < w0 || iw >= w1) continue;\n"
    "            acc += dy[AT(gs, nn, c, oh, ow)] / (T)((h1 - h0) * (w1 - w0));\n"
    "        }\n"
    "    }\n"
    "    dx[oo + e] = acc;\n"
    "}\n";

static pstr str_of(const cn_tensor *t) {
    pstr s = {t->offset, t->strides[0], t->strides[1], t->strides[2], t->strides[3]};
    return s;
}

/* x [N, C, H, W] and y [N, C, OH, OW]; the window from the attributes
 * (nwin 8: max, with dilation; 6: avg; 0: adaptive). */
static pgeom geom_of(const cn_attrs *a, int nwin, const cn_tensor *x, const cn_tensor *y) {
    const int64_t *l = a->list;
    pgeom g = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], y->shape[2], y->shape[3],
               0, 0, 1, 1, 0, 0, 1, 1, 0, 0};
    if (nwin >= 6) {
        g.kh = l[0], g.kw = l[1], g.sh = l[2], g.sw = l[3], g.ph = l[4], g.pw = l[5];
        if (nwin == 8) g.dh = l[6], g.dw = l[7];
        else g.cip = a->i[1] != 0, g.div = a->i[2];
    }
    return g;
}

static cn_gpu_kernel pool_kernel(const char *op, cn_gpu_dev *dev, cn_dtype dt, const char *name) {
    return cn_gpu_x_float_kernel(op, dev, dt, pool_src, name);
}

/* Maxima of x's windows: values into y (want 0) or positions into y (i64,
 * want 1). */
static int max_fwd(const char *op, const pgeom *g, const cn_tensor *x, cn_tensor *y, int want) {
    cn_gpu_dev *dev = cn_gpu_dev_of(y->storage);
    cn_gpu_kernel k = pool_kernel(op, dev, (cn_dtype)x->dtype, "cn_max");
    if (!k) return CN_EINVAL;
    pstr xs = str_of(x);
    cn_gpu_buf xm = cn_gpu_buf_of(x), ym = cn_gpu_buf_of(y);
    int64_t oo = y->offset, n = g->N * g->C * g->OH * g->OW;
    int cw = want;
    cn_gpu_arg args[] = {CN_GPU_MEM(xm), CN_GPU_VAL(xs), CN_GPU_VAL(*g), CN_GPU_MEM(ym),
                         CN_GPU_MEM(ym), CN_GPU_VAL(oo), CN_GPU_VAL(cw), CN_GPU_VAL(n)};
    return cn_gpu_x_launch1(op, dev, k, 8, args, n);
}

static int max_back(const pgeom *g, const cn_tensor *x, const cn_tensor *dy, cn_tensor *dx) {
    const char *op = "max_pool2d_backward";
    cn_gpu_dev *dev = cn_gpu_dev_of(dx->storage);
    cn_tensor *ix = cn_gpu_x_empty(dx, CN_I64, 4, dy->shape);
    if (!ix) return CN_ENOMEM;
    int rc = max_fwd(op, g, x, ix, 1);
    cn_gpu_kernel k = rc < 0 ? NULL : pool_kernel(op, dev, (cn_dtype)dx->dtype, "cn_max_back");
    if (k) {
        pstr gs = str_of(dy);
        cn_gpu_buf im = cn_gpu_buf_of(ix), gm = cn_gpu_buf_of(dy), xm = cn_gpu_buf_of(dx);
        int64_t oo = dx->offset, n = g->N * g->C * g->H * g->W;
        cn_gpu_arg args[] = {CN_GPU_MEM(im), CN_GPU_MEM(gm), CN_GPU_VAL(gs), CN_GPU_VAL(*g),
                             CN_GPU_MEM(xm), CN_GPU_VAL(oo), CN_GPU_VAL(n)};
        rc = cn_gpu_x_launch1(op, dev, k, 7, args, n);
    } else if (rc >= 0) {
        rc = CN_EINVAL;
    }
    cn_release(ix);
    return rc;
}

/* y from x (forward kernels) or dx from dy (backward), elementwise over out. */
static int simple(const char *op, const char *name, const pgeom *g, const cn_tensor *x,
                  cn_tensor *out) {
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    cn_gpu_kernel k = pool_kernel(op, dev, (cn_dtype)out->dtype, name);
    if (!k) return CN_EINVAL;
    pstr xs = str_of(x);
    cn_gpu_buf xm = cn_gpu_buf_of(x), ym = cn_gpu_buf_of(out);
    int64_t oo = out->offset, n = cn_shape_numel(4, out->shape);
    cn_gpu_arg args[] = {CN_GPU_MEM(xm), CN_GPU_VAL(xs), CN_GPU_VAL(*g),
                         CN_GPU_MEM(ym), CN_GPU_VAL(oo), CN_GPU_VAL(n)};
    return cn_gpu_x_launch1(op, dev, k, 6, args, n);
}

int cn_gpu_k_pool(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                  cn_tensor *out) {
    (void)nin;
    pgeom g;
    switch (id) {
    case CN_OP_max_pool2d:
        g = geom_of(a, 8, in[0], out);
        return max_fwd("max_pool2d", &g, in[0], out, 0);
    case CN_OP_max_pool2d_indices:
        g = geom_of(a, 8, in[0], out);
        return max_fwd("max_pool2d_indices", &g, in[0], out, 1);
    case CN_OP_max_pool2d_backward:
        g = geom_of(a, 8, in[0], in[1]);
        return max_back(&g, in[0], in[1], out);
    case CN_OP_avg_pool2d:
        g = geom_of(a, 6, in[0], out);
        return simple("avg_pool2d", "cn_avg", &g, in[0], out);
    case CN_OP_avg_pool2d_backward:
        g = geom_of(a, 6, out, in[0]);
        return simple("avg_pool2d_backward", "cn_avg_back", &g, in[0], out);
    case CN_OP_adaptive_avg_pool2d:
        g = geom_of(a, 0, in[0], out);
        return simple("adaptive_avg_pool2d", "cn_adaptive", &g, in[0], out);
    case CN_OP_adaptive_avg_pool2d_backward:
        g = geom_of(a, 0, out, in[0]);
        return simple("adaptive_avg_pool2d_backward", "cn_adaptive_back", &g, in[0], out);
    default:
        return cn_failc(CN_EUNSUPPORTED, "gpu kernels: op %d is not a pooling op", (int)id);
    }
}
