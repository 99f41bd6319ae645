/* The LSTM sequence ops (f32, f64), the CPU kernels' scheme
 * (src/backend/cpu/rnn.c): per step one GEMM for the recurrent term (the
 * device GEMM, gpu_linalg.c) and one kernel over the N x H gate elements.
 * Layouts (H the hidden size, gates i, f, g, o):
 *   gx [T, N, 4H], w [4H, H], y [T, N, 6H] = (h, c, i, f, g, o) per step;
 *   lstm_seq_backward's out [T (+1), N, 4H]: the pre-activation gradients
 *   (and with state_grads a last row (dh0, dc0, 0, 0)).
 * gx, dy, y, h0 and c0 are made contiguous; w is read through its strides. */
#include "gpu_kernels.h"

#include <stdio.h>
#include <string.h>

static const char rnn_src[] =
    "static T sig(T v) { return (T)1 / ((T)1 + exp(-v)); }\n"
    /* one step forward: a = h_prev w^T (has_a), cp = c_prev (has_cp) */
    "__kernel void cn_lstm_fwd(__global const T *gx, long gxo, __global const T *a, int has_a,\n"
    "                          __global const T *cp, long cpo, long cps, int has_cp,\n"
    "                          __global T *y, long yo, long H, long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long r = e / H, j = e % H;\n"
    "    __global const T *g = gx + gxo + r * 4 * H;\n"
    "    __global const T *ar = a + r * 4 * H;\n"
    "    T ai = g[j], af = g[H + j], ag = g[2 * H + j], ao = g[3 * H + j];\n"
    "    if (has_a) { ai += ar[j]; af += ar[H + j]; ag += ar[2 * H + j]; ao += ar[3 * H + j]; }\n"
    "    T i = sig(ai), f = sig(af), gg = tanh(ag), o = sig(ao);\n"
    "    T c = f * (has_cp ? cp[cpo + r * cps + j] : (T)0) + i * gg;\n"
    "    __global T *yr = y + yo + r * 6 * H;\n"
    "    yr[j] = o * tanh(c);\n"
    "    yr[H + j] = c;\n"
    "    yr[2 * H + j] = i;\n"
    "    yr[3 * H + j] = f;\n"
    "    yr[4 * H + j] = gg;\n"
    "    yr[5 * H + j] = o;\n"
    "}\n"
    /* one step backward: y and dy (the first P of six parts) of the step */
    "__kernel void cn_lstm_bwd(__global const T *y, long yo, __global const T *dy, long dyo,\n"
    "                          int P, __global const T *cp, long cpo, long cps, int has_cp,\n"
    "                          __global const T *dhn, __global T *dcn, __global T *dg, long dgo,\n"
    "                          long H, long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long r = e / H, j = e % H;\n"
    "    __global const T *yr = y + yo + r * 6 * H;\n"
    "    __global const T *d = dy + dyo + r * P * H;\n"
    "    T dyv[6];\n"
    "    for (int k = 0; k < 6; k++) dyv[k] = k < P ? d[k * H + j] : (T)0;\n"
    "    T c = yr[H + j], i = yr[2 * H + j], f = yr[3 * H + j], g = yr[4 * H + j];\n"
    "    T o = yr[5 * H + j];\n"
    "    T tc = tanh(c);\n"
    "    T dh = dyv[0] + dhn[e];\n"
    "    T dc = dyv[1] + dcn[e] + dh * o * (1 - tc * tc);\n"
    "    T cpv = has_cp ? cp[cpo + r * cps + j] : (T)0;\n"
    "    __global T *o4 = dg + dgo + r * 4 * H;\n"
    "    o4[j] = (dc * g + dyv[2]) * (i * (1 - i));\n"
    "    o4[H + j] = (dc * cpv + dyv[3]) * (f * (1 - f));\n"
    "    o4[2 * H + j] = (dc * i + dyv[4]) * (1 - g * g);\n"
    "    o4[3 * H + j] = (dh * tc + dyv[5]) * (o * (1 - o));\n"
    "    dcn[e] = dc * f;\n"
    "}\n"
    /* the state row: (dh0, dc0, 0, 0) per sample */
    "__kernel void cn_lstm_last(__global const T *dhn, __global const T *dcn, __global T *out,\n"
    "                           long oo, long H, long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long r = e / (4 * H), q = e % (4 * H), part = q / H, j = q % H;\n"
    "    out[oo + e] = part == 0 ? dhn[r * H + j] : part == 1 ? dcn[r * H + j] : (T)0;\n"
    "}\n";

static cn_gpu_kernel rnn_kernel(const char *op, cn_gpu_dev *dev, cn_dtype dt, const char *name) {
    return cn_gpu_x_float_kernel(op, dev, dt, rnn_src, name);
}

/* ---- forward ---- */

static int lstm_fwd(const cn_tensor *gx0, const cn_tensor *w, const cn_tensor *h00,
                    const cn_tensor *c00, bool reverse, cn_tensor *y) {
    const char *op = "lstm_seq";
    cn_gpu_dev *dev = cn_gpu_dev_of(y->storage);
    cn_dtype dt = (cn_dtype)y->dtype;
    int64_t T = y->shape[0], N = y->shape[1], H = w->shape[1];
    cn_gpu_kernel k = rnn_kernel(op, dev, dt, "cn_lstm_fwd");
    if (!k) return CN_EINVAL;
    cn_tensor *gx = cn_gpu_x_contig(gx0), *h0 = cn_gpu_x_contig(h00), *c0 = cn_gpu_x_contig(c00);
    cn_tensor *a = cn_gpu_x_empty(y, dt, 2, (int64_t[]){N, 4 * H});
    int rc = gx && (!h00 || h0) && (!c00 || c0) && a ? CN_OK : CN_ENOMEM;
    int64_t ys = N * 6 * H;
    cn_gpu_buf ym = cn_gpu_buf_of(y), am = a ? cn_gpu_buf_of(a) : NULL, gm = gx ? cn_gpu_buf_of(gx) : NULL;
    for (int64_t s = 0; rc == 0 && s < T; s++) {
        int64_t t = reverse ? T - 1 - s : s, tp = reverse ? t + 1 : t - 1;
        cn_gpu_buf hm = NULL, cm = ym;
        int64_t ho = 0, hs = 0, co = 0, cs = 0;
        int has_a = 0, has_cp = 0;
        if (s > 0) {
            hm = cm = ym;
            ho = y->offset + tp * ys;
            co = ho + H;
            hs = cs = 6 * H;
            has_cp = 1;
        } else {
            if (h0) hm = cn_gpu_buf_of(h0), ho = h0->offset, hs = H;
            if (c0) cm = cn_gpu_buf_of(c0), co = c0->offset, cs = H, has_cp = 1;
        }
        if (hm) {
            /* a = h_prev w^T */
            cn_gpu_gemm g;
            memset(&g, 0, sizeof g);
            g.dt = dt;
            g.m = N, g.n = 4 * H, g.k = H;
            g.a = hm, g.oa = ho, g.rsa = hs, g.csa = 1;
            g.b = cn_gpu_buf_of(w), g.ob = w->offset, g.rsb = w->strides[1], g.csb = w->strides[0];
            g.c = am, g.oc = a->offset, g.ldc = 4 * H;
            if ((rc = cn_gpu_gemm_run(op, dev, &g)) < 0) break;
            has_a = 1;
        }
        int64_t gxo = gx->offset + t * N * 4 * H, yo = y->offset + t * ys, cH = H, n = N * H;
        cn_gpu_arg args[] = {CN_GPU_MEM(gm), CN_GPU_VAL(gxo),    CN_GPU_MEM(am), CN_GPU_VAL(has_a),
                             CN_GPU_MEM(cm), CN_GPU_VAL(co),     CN_GPU_VAL(cs), CN_GPU_VAL(has_cp),
                             CN_GPU_MEM(ym), CN_GPU_VAL(yo),     CN_GPU_VAL(cH), CN_GPU_VAL(n)};
        rc = cn_gpu_x_launch1(op, dev, k, 12, args, n);
    }
    cn_release(gx);
    cn_release(h0);
    cn_release(c0);
    cn_release(a);
    return rc;
}

/* ---- backward ---- */

static int lstm_bwd(const cn_tensor *y0, const cn_tensor *dy0, int parts, const cn_tensor *w,
                    const cn_tensor *c00, bool reverse, bool state_grads, cn_tensor *out) {
    const char *op = "lstm_seq_backward";
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    cn_dtype dt = (cn_dtype)out->dtype;
    int64_t T = y0->shape[0], N = y0->shape[1], H = w->shape[1];
    cn_gpu_kernel k = rnn_kernel(op, dev, dt, "cn_lstm_bwd");
    cn_gpu_kernel kl = k && state_grads ? rnn_kernel(op, dev, dt, "cn_lstm_last") : NULL;
    if (!k || (state_grads && !kl)) return CN_EINVAL;
    cn_tensor *y = cn_gpu_x_contig(y0), *dy = cn_gpu_x_contig(dy0), *c0 = cn_gpu_x_contig(c00);
    cn_tensor *dhn = cn_gpu_x_empty(out, dt, 2, (int64_t[]){N, H});
    cn_tensor *dcn = cn_gpu_x_empty(out, dt, 2, (int64_t[]){N, H});
    int rc = y && dy && (!c00 || c0) && dhn && dcn ? CN_OK : CN_ENOMEM;
    if (rc == 0) rc = cn_backend_of(dhn)->fill(dhn, 0);
    if (rc == 0) rc = cn_backend_of(dcn)->fill(dcn, 0);
    int64_t ys = N * 6 * H, gs = N * 4 * H;
    cn_gpu_buf ym = y ? cn_gpu_buf_of(y) : NULL, dym = dy ? cn_gpu_buf_of(dy) : NULL;
    cn_gpu_buf hm = dhn ? cn_gpu_buf_of(dhn) : NULL, cm = dcn ? cn_gpu_buf_of(dcn) : NULL;
    cn_gpu_buf om = cn_gpu_buf_of(out);
    for (int64_t s = T - 1; rc == 0 && s >= 0; s--) {
        int64_t t = reverse ? T - 1 - s : s, tp = reverse ? t + 1 : t - 1;
        cn_gpu_buf cpm = ym;
        int64_t cpo = 0, cps = 0;
        int has_cp = 0;
        if (s > 0) {
            cpo = y->offset + tp * ys + H, cps = 6 * H, has_cp = 1;
        } else if (c0) {
            cpm = cn_gpu_buf_of(c0), cpo = c0->offset, cps = H, has_cp = 1;
        }
        int64_t yo = y->offset + t * ys, dyo = dy->offset + t * N * parts * H;
        int64_t dgo = out->offset + t * gs, cH = H, n = N * H;
        int P = parts;
        cn_gpu_arg args[] = {CN_GPU_MEM(ym),  CN_GPU_VAL(yo),     CN_GPU_MEM(dym), CN_GPU_VAL(dyo),
                             CN_GPU_VAL(P),   CN_GPU_MEM(cpm),    CN_GPU_VAL(cpo), CN_GPU_VAL(cps),
                             CN_GPU_VAL(has_cp), CN_GPU_MEM(hm),  CN_GPU_MEM(cm),  CN_GPU_MEM(om),
                             CN_GPU_VAL(dgo), CN_GPU_VAL(cH),     CN_GPU_VAL(n)};
        if ((rc = cn_gpu_x_launch1(op, dev, k, 15, args, n)) < 0) break;
        if (s > 0 || state_grads) {
            /* dhn = dg w: what reaches h of the previous step */
            cn_gpu_gemm g;
            memset(&g, 0, sizeof g);
            g.dt = dt;
            g.m = N, g.n = H, g.k = 4 * H;
            g.a = om, g.oa = dgo, g.rsa = 4 * H, g.csa = 1;
            g.b = cn_gpu_buf_of(w), g.ob = w->offset, g.rsb = w->strides[0], g.csb = w->strides[1];
            g.c = hm, g.oc = dhn->offset, g.ldc = H;
            rc = cn_gpu_gemm_run(op, dev, &g);
        }
    }
    if (rc == 0 && state_grads) {
        int64_t oo = out->offset + T * gs, cH = H, n = gs;
        cn_gpu_arg args[] = {CN_GPU_MEM(hm), CN_GPU_MEM(cm), CN_GPU_MEM(om),
                             CN_GPU_VAL(oo), CN_GPU_VAL(cH), CN_GPU_VAL(n)};
        rc = cn_gpu_x_launch1(op, dev, kl, 6, args, n);
    }
    cn_release(y);
    cn_release(dy);
    cn_release(c0);
    cn_release(dhn);
    cn_release(dcn);
    return rc;
}

int cn_gpu_k_rnn(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out) {
    switch (id) {
    case CN_OP_lstm_seq:
        return lstm_fwd(in[0], in[1], nin > 2 ? in[2] : NULL, nin > 3 ? in[3] : NULL,
                        a->i[0] != 0, out);
    case CN_OP_lstm_seq_backward:
        return lstm_bwd(in[0], in[1], (int)(a->i[2] ? a->i[2] : 6), in[2], nin > 3 ? in[3] : NULL,
                        a->i[0] != 0, a->i[1] != 0, out);
    default:
        return cn_failc(CN_EUNSUPPORTED, "gpu kernels: op %d is not an LSTM op", (int)id);
    }
}
