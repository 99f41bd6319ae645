/* Convolutions (NCHW, f32 and f64): im2col / col2im kernels and
 * the device GEMM (gpu_linalg.c: the vendor BLAS where the runtime has one). Geometry as
 * on the CPU (src/backend/cpu/conv.h): y = conv2d(x, w) with x [N, C, H, W],
 * w [O, C / groups, KH, KW], y [N, O, OH, OW]; conv_transpose2d is its input
 * gradient (dgrad) and conv2d_weight_grad its weight gradient (wgrad).
 *
 *   fwd:   col = im2col(x) per image, y_g = w_g col_g (batched over images
 *          and groups), then the bias.
 *   dgrad: col_g = w_g^T dy_g, then dx = col2im(col) + bias: one work item
 *          per element of dx gathering its taps (no atomics).
 *   wgrad: col laid out [C KH KW, images x OH OW] and dy permuted to
 *          [O, images x OH OW], so each chunk of images is one product
 *          per group, accumulated over chunks.
 * Images go in chunks so that the column buffer stays under COL_BYTES. */
#include "gpu_kernels.h"

#include <stdio.h>
#include <string.h>

#define COL_BYTES ((int64_t)256 << 20)

typedef struct cgeom {
    int64_t N, C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, groups;
} cgeom;

static const char conv_src[] =
    "typedef struct { long N, C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, groups; } cgeom;\n"
    "typedef struct { long o, sn, sc, sh, sw; } xstr;\n"
    /* col[nl s_img + (c KK + i KW + j) s_row + l] = x[n0 + nl, c, tap] or 0 */
    "__kernel void cn_im2col(__global const T *x, xstr xs, cgeom g, __global T *col, long co,\n"
    "                        long n0, long s_img, long s_row, long n) {\n"
    /* one work item per row of OW columns: the divisions once per row */
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long KK = g.KH * g.KW, CKK = g.C * KK;\n"
    "    long oh = e % g.OH, r = e / g.OH, ckk = r % CKK, nl = r / CKK;\n"
    "    long c = ckk / KK, i = ckk % KK / g.KW, j = ckk % g.KW;\n"
    "    long ih = oh * g.sh - g.ph + i * g.dh;\n"
    "    __global T *dst = col + co + nl * s_img + ckk * s_row + oh * g.OW;\n"
    "    if (ih < 0 || ih >= g.H) {\n"
    "        for (long ow = 0; ow < g.OW; ow++) dst[ow] = 0;\n"
    "        return;\n"
    "    }\n"
    "    __global const T *src = x + xs.o + (n0 + nl) * xs.sn + c * xs.sc + ih * xs.sh;\n"
    "    long iw = j * g.dw - g.pw;\n"
    "    for (long ow = 0; ow < g.OW; ow++, iw += g.sw)\n"
    "        dst[ow] = iw >= 0 && iw < g.W ? src[iw * xs.sw] : (T)0;\n"
    "}\n"
    /* dx[n0 + nl, c, ih, iw] = bias[c] + the taps of col ([nl][C KK][L]) on it */
    "__kernel void cn_col2im(__global const T *col, long co, cgeom g, __global T *dx, long dxo,\n"
    "                        __global const T *bias, long bo, long bs, int has_bias, long n0,\n"
    "                        long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long iw = e % g.W, ih = e / g.W % g.H, c = e / (g.W * g.H) % g.C, nl = e / (g.W * g.H * g.C);\n"
    "    long L = g.OH * g.OW, KK = g.KH * g.KW;\n"
    "    __global const T *cp = col + co + (nl * g.C + c) * KK * L;\n"
    "    T acc = has_bias ? bias[bo + c * bs] : (T)0;\n"
    "    for (long i = 0; i < g.KH; i++) {\n"
    "        long th = ih + g.ph - i * g.dh;\n"
    "        if (th < 0 || th % g.sh) continue;\n"
    "        long oh = th / g.sh;\n"
    "        if (oh >= g.OH) continue;\n"
    "        for (long j = 0; j < g.KW; j++) {\n"
    "            long tw = iw + g.pw - j * g.dw;\n"
    "            if (tw < 0 || tw % g.sw) continue;\n"
    "            long ow = tw / g.sw;\n"
    "            if (ow >= g.OW) continue;\n"
    "            acc += cp[(i * g.KW + j) * L + oh * g.OW + ow];\n"
    "        }\n"
    "    }\n"
    "    dx[dxo + n0 * g.C * g.H * g.W + e] = acc;\n"
    "}\n"
    /* y[n, o, l] += bias[o] */
    "__kernel void cn_bias(__global T *y, long yo, __global const T *bias, long bo, long bs,\n"
    "                      long O, long L, long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    y[yo + e] += bias[bo + (e / L % O) * bs];\n"
    "}\n";

typedef struct xstr {
    int64_t o, sn, sc, sh, sw;
} xstr;

static cn_gpu_kernel conv_kernel(const char *op, cn_gpu_dev *dev, cn_dtype dt, const char *name) {
    return cn_gpu_x_float_kernel(op, dev, dt, conv_src, name);
}

/* Images per chunk. */
static int64_t chunk_of(const cgeom *g, size_t es) {
    int64_t per = g->C * g->KH * g->KW * g->OH * g->OW * (int64_t)es;
    int64_t nc = per > 0 ? COL_BYTES / per : g->N;
    if (nc < 1) nc = 1;
    return nc < g->N ? nc : g->N;
}

static int im2col(const char *op, cn_gpu_dev *dev, const cgeom *g, const cn_tensor *x,
                  cn_tensor *col, int64_t n0, int64_t nc, int64_t s_img, int64_t s_row) {
    cn_gpu_kernel k = conv_kernel(op, dev, (cn_dtype)x->dtype, "cn_im2col");
    if (!k) return CN_EINVAL;
    xstr xs = {x->offset, x->strides[0], x->strides[1], x->strides[2], x->strides[3]};
    cn_gpu_buf xm = cn_gpu_buf_of(x), cm = cn_gpu_buf_of(col);
    int64_t co = col->offset, cn0 = n0, si = s_img, sr = s_row;
    int64_t n = nc * g->C * g->KH * g->KW * g->OH; /* rows of OW columns */
    cn_gpu_arg args[] = {CN_GPU_MEM(xm), CN_GPU_VAL(xs), CN_GPU_VAL(*g), CN_GPU_MEM(cm),
                         CN_GPU_VAL(co), CN_GPU_VAL(cn0), CN_GPU_VAL(si), CN_GPU_VAL(sr),
                         CN_GPU_VAL(n)};
    return cn_gpu_x_launch1(op, dev, k, 9, args, n);
}

/* ---- conv2d ---- */

static int conv_fwd(const cgeom *g, const cn_tensor *x, const cn_tensor *w0, const cn_tensor *bias,
                    cn_tensor *y) {
    const char *op = "conv2d";
    cn_gpu_dev *dev = cn_gpu_dev_of(y->storage);
    cn_dtype dt = (cn_dtype)y->dtype;
    int64_t G = g->groups, Cg = g->C / G, Og = g->O / G, KK = g->KH * g->KW, Kg = Cg * KK;
    int64_t L = g->OH * g->OW, CKK = g->C * KK;
    /* A 1x1 kernel at stride 1 without padding reads x itself as the columns. */
    bool direct = g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 &&
                  g->pw == 0 && cn_is_contiguous(x);
    int64_t nc = direct ? g->N : chunk_of(g, cn_dsize(dt));
    cn_tensor *w = cn_gpu_x_contig(w0), *col = NULL;
    int rc = w ? CN_OK : CN_ENOMEM;
    if (rc == 0 && !direct) {
        col = cn_gpu_x_empty(y, dt, 1, (int64_t[]){nc * CKK * L});
        if (!col) rc = CN_ENOMEM;
    }
    for (int64_t n0 = 0; rc == 0 && n0 < g->N; n0 += nc) {
        int64_t m = g->N - n0 < nc ? g->N - n0 : nc;
        if (!direct) rc = im2col(op, dev, g, x, col, n0, m, CKK * L, L);
        if (rc < 0) break;
        cn_gpu_gemm gm;
        memset(&gm, 0, sizeof gm);
        gm.dt = dt;
        gm.m = Og, gm.n = L, gm.k = Kg;
        gm.a = cn_gpu_buf_of(w), gm.oa = w->offset, gm.rsa = Kg, gm.csa = 1;
        if (direct) gm.b = cn_gpu_buf_of(x), gm.ob = x->offset + n0 * g->C * L;
        else gm.b = cn_gpu_buf_of(col), gm.ob = col->offset;
        gm.rsb = L, gm.csb = 1;
        gm.c = cn_gpu_buf_of(y), gm.oc = y->offset + n0 * g->O * L, gm.ldc = L;
        gm.nb = 2;
        gm.bshape[0] = m, gm.bsa[0] = 0, gm.bsb[0] = CKK * L, gm.bsc[0] = g->O * L;
        gm.bshape[1] = G, gm.bsa[1] = Og * Kg, gm.bsb[1] = Kg * L, gm.bsc[1] = Og * L;
        rc = cn_gpu_gemm_run(op, dev, &gm);
    }
    if (rc == 0 && bias) {
        cn_gpu_kernel k = conv_kernel(op, dev, dt, "cn_bias");
        if (!k) {
            rc = CN_EINVAL;
        } else {
            cn_gpu_buf ym = cn_gpu_buf_of(y), bm = cn_gpu_buf_of(bias);
            int64_t yo = y->offset, bo = bias->offset, bs = bias->strides[0], O = g->O, cL = L;
            int64_t n = g->N * g->O * L;
            cn_gpu_arg args[] = {CN_GPU_MEM(ym), CN_GPU_VAL(yo), CN_GPU_MEM(bm), CN_GPU_VAL(bo),
                                 CN_GPU_VAL(bs), CN_GPU_VAL(O),  CN_GPU_VAL(cL), CN_GPU_VAL(n)};
            rc = cn_gpu_x_launch1(op, dev, k, 8, args, n);
        }
    }
    cn_release(w);
    cn_release(col);
    return rc;
}

/* ---- conv_transpose2d: conv2d's input gradient ---- */

static int conv_dgrad(const cgeom *g, const cn_tensor *dy0, const cn_tensor *w0,
                      const cn_tensor *bias, cn_tensor *dx) {
    const char *op = "conv_transpose2d";
    cn_gpu_dev *dev = cn_gpu_dev_of(dx->storage);
    cn_dtype dt = (cn_dtype)dx->dtype;
    int64_t G = g->groups, Cg = g->C / G, Og = g->O / G, KK = g->KH * g->KW, Kg = Cg * KK;
    int64_t L = g->OH * g->OW, CKK = g->C * KK;
    int64_t nc = chunk_of(g, cn_dsize(dt));
    cn_tensor *w = cn_gpu_x_contig(w0), *dy = cn_gpu_x_contig(dy0);
    cn_tensor *col = cn_gpu_x_empty(dx, dt, 1, (int64_t[]){nc * CKK * L});
    int rc = w && dy && col ? CN_OK : CN_ENOMEM;
    cn_gpu_kernel k = rc == 0 ? conv_kernel(op, dev, dt, "cn_col2im") : NULL;
    if (rc == 0 && !k) rc = CN_EINVAL;
    for (int64_t n0 = 0; rc == 0 && n0 < g->N; n0 += nc) {
        int64_t m = g->N - n0 < nc ? g->N - n0 : nc;
        cn_gpu_gemm gm;
        memset(&gm, 0, sizeof gm);
        gm.dt = dt;
        gm.m = Kg, gm.n = L, gm.k = Og;
        gm.a = cn_gpu_buf_of(w), gm.oa = w->offset, gm.rsa = 1, gm.csa = Kg;
        gm.b = cn_gpu_buf_of(dy), gm.ob = dy->offset + n0 * g->O * L, gm.rsb = L, gm.csb = 1;
        gm.c = cn_gpu_buf_of(col), gm.oc = col->offset, gm.ldc = L;
        gm.nb = 2;
        gm.bshape[0] = m, gm.bsa[0] = 0, gm.bsb[0] = g->O * L, gm.bsc[0] = CKK * L;
        gm.bshape[1] = G, gm.bsa[1] = Og * Kg, gm.bsb[1] = Og * L, gm.bsc[1] = Kg * L;
        rc = cn_gpu_gemm_run(op, dev, &gm);
        if (rc < 0) break;
        cn_gpu_buf cm = cn_gpu_buf_of(col), xm = cn_gpu_buf_of(dx);
        cn_gpu_buf bm = bias ? cn_gpu_buf_of(bias) : cm;
        int64_t co = col->offset, dxo = dx->offset, bo = bias ? bias->offset : 0;
        int64_t bs = bias ? bias->strides[0] : 0, cn0 = n0, n = m * g->C * g->H * g->W;
        int hb = bias != NULL;
        cn_gpu_arg args[] = {CN_GPU_MEM(cm), CN_GPU_VAL(co), CN_GPU_VAL(*g),  CN_GPU_MEM(xm),
                             CN_GPU_VAL(dxo), CN_GPU_MEM(bm), CN_GPU_VAL(bo), CN_GPU_VAL(bs),
                             CN_GPU_VAL(hb), CN_GPU_VAL(cn0), CN_GPU_VAL(n)};
        rc = cn_gpu_x_launch1(op, dev, k, 11, args, n);
    }
    cn_release(w);
    cn_release(dy);
    cn_release(col);
    return rc;
}

/* ---- conv2d_weight_grad ---- */

static int conv_wgrad(const cgeom *g, const cn_tensor *x, const cn_tensor *dy0, cn_tensor *dw) {
    const char *op = "conv2d_weight_grad";
    cn_gpu_dev *dev = cn_gpu_dev_of(dw->storage);
    cn_dtype dt = (cn_dtype)dw->dtype;
    int64_t G = g->groups, Cg = g->C / G, Og = g->O / G, KK = g->KH * g->KW, Kg = Cg * KK;
    int64_t L = g->OH * g->OW, CKK = g->C * KK;
    if (g->N == 0 || L == 0) return cn_backend_of(dw)->fill(dw, 0);
    int64_t nc = chunk_of(g, cn_dsize(dt));
    cn_tensor *dy = cn_gpu_x_contig(dy0);
    cn_tensor *col = cn_gpu_x_empty(dw, dt, 1, (int64_t[]){nc * CKK * L});
    cn_tensor *dyp = cn_gpu_x_empty(dw, dt, 1, (int64_t[]){g->O * nc * L});
    int rc = dy && col && dyp ? CN_OK : CN_ENOMEM;
    for (int64_t n0 = 0; rc == 0 && n0 < g->N; n0 += nc) {
        int64_t m = g->N - n0 < nc ? g->N - n0 : nc;
        /* col [CKK, m L] and dy's images as [O, m L] */
        rc = im2col(op, dev, g, x, col, n0, m, L, m * L);
        if (rc < 0) break;
        cn_tensor src = *dy, dst = *dyp;
        src.ndim = dst.ndim = 3;
        src.shape[0] = dst.shape[0] = g->O;
        src.shape[1] = dst.shape[1] = m;
        src.shape[2] = dst.shape[2] = L;
        src.strides[0] = L, src.strides[1] = g->O * L, src.strides[2] = 1;
        src.offset = dy->offset + n0 * g->O * L;
        dst.strides[0] = m * L, dst.strides[1] = L, dst.strides[2] = 1;
        rc = cn_gpu_x_copy(&dst, &src);
        if (rc < 0) break;
        cn_gpu_gemm gm;
        memset(&gm, 0, sizeof gm);
        gm.dt = dt;
        gm.m = Og, gm.n = Kg, gm.k = m * L;
        gm.a = cn_gpu_buf_of(dyp), gm.oa = dyp->offset, gm.rsa = m * L, gm.csa = 1;
        gm.b = cn_gpu_buf_of(col), gm.ob = col->offset, gm.rsb = 1, gm.csb = m * L;
        gm.c = cn_gpu_buf_of(dw), gm.oc = dw->offset, gm.ldc = Kg;
        gm.nb = 1;
        gm.bshape[0] = G, gm.bsa[0] = Og * m * L, gm.bsb[0] = Kg * m * L, gm.bsc[0] = Og * Kg;
        gm.accumulate = n0 > 0;
        rc = cn_gpu_gemm_run(op, dev, &gm);
    }
    cn_release(dy);
    cn_release(col);
    cn_release(dyp);
    return rc;
}

int cn_gpu_k_conv(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out) {
    const int64_t *l = a->list;
    const cn_tensor *x = in[0], *w = in[1];
    cgeom g;
    switch (id) {
    case CN_OP_conv2d:
        g = (cgeom){x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[2],
                    w->shape[3], out->shape[2], out->shape[3], l[0], l[1], l[2], l[3], l[4], l[5],
                    a->i[0]};
        return conv_fwd(&g, x, w, nin == 3 ? in[2] : NULL, out);
    case CN_OP_conv_transpose2d:
        /* The convolution whose input gradient this is: its input is out,
         * its output x, its weight w (O = x's channels). */
        g = (cgeom){out->shape[0], out->shape[1], out->shape[2], out->shape[3], w->shape[0],
                    w->shape[2], w->shape[3], x->shape[2], x->shape[3], l[0], l[1], l[2], l[3],
                    l[4], l[5], a->i[0]};
        return conv_dgrad(&g, x, w, nin == 3 ? in[2] : NULL, out);
    case CN_OP_conv2d_weight_grad: {
        const cn_tensor *dy = in[1];
        g = (cgeom){x->shape[0], x->shape[1], x->shape[2], x->shape[3], out->shape[0],
                    out->shape[2], out->shape[3], dy->shape[2], dy->shape[3], l[0], l[1], l[2],
                    l[3], l[4], l[5], a->i[0]};
        return conv_wgrad(&g, x, dy, out);
    }
    default:
        return cn_failc(CN_EUNSUPPORTED, "gpu kernels: op %d is not a convolution", (int)id);
    }
}
