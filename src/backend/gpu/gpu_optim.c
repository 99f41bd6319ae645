/* Optimiser steps: SGD, Adam(W), RMSprop and Adagrad over
 * contiguous runs of elements (optim_update.h), the loops of
 * src/nn/optim_rules.c written as OpenCL C, one kernel per (rule, dtype,
 * option bits) with the bits as constants. Each element is updated on its
 * own, operation by operation as on the CPU (sqrt and division correctly
 * rounded where the device supports it), so results match the CPU's. */
#include "gpu.h"

#include <stdio.h>

static const char sgd_body[] =
    "    T d = sgn * g[i];\n"
    "    if (F & 1) d = d + wd * p[i];\n"
    "    if (F & 2) {\n"
    "      T m = (F & 4) ? d : s0[i] * mom + omd * d;\n"
    "      s0[i] = m;\n"
    "      d = (F & 8) ? d + mom * m : m;\n"
    "    }\n"
    "    p[i] = p[i] + nlr * d;\n";

static const char adam_body[] =
    "    T gi = sgn * g[i];\n"
    "    T pi = p[i];\n"
    "    if (F & 1) gi = gi + wd * pi;\n"
    "    pi = pi * decay;\n"
    "    T m = s0[i] * b1 + omb1 * gi;\n"
    "    T v = s1[i] * b2 + omb2 * gi * gi;\n"
    "    s0[i] = m;\n"
    "    s1[i] = v;\n"
    "    if (F & 2) { T vm = s2[i]; v = ((vm > v) | (vm != vm)) ? vm : v; s2[i] = v; }\n"
    "    T den = sqrt(v) / bc2s + eps;\n"
    "    p[i] = pi + nss * (m / den);\n";

static const char rmsprop_body[] =
    "    T gi = sgn * g[i];\n"
    "    if (F & 1) gi = gi + wd * p[i];\n"
    "    T sq = s0[i] * alpha + oma * gi * gi;\n"
    "    s0[i] = sq;\n"
    "    T avg;\n"
    "    if (F & 2) { T ga = s2[i] * alpha + oma * gi; s2[i] = ga; avg = sqrt(sq + (T)(-1) * ga * ga); }\n"
    "    else avg = sqrt(sq);\n"
    "    avg = avg + eps;\n"
    "    if (F & 4) { T bb = s1[i] * mom + gi / avg; s1[i] = bb; p[i] = p[i] + nlr * bb; }\n"
    "    else p[i] = p[i] + nlr * (gi / avg);\n";

static const char adagrad_body[] =
    "    T gi = sgn * g[i];\n"
    "    if (F & 1) gi = gi + wd * p[i];\n"
    "    T s = s0[i] + gi * gi;\n"
    "    s0[i] = s;\n"
    "    T sd = sqrt(s) + eps;\n"
    "    p[i] = p[i] + nclr * (gi / sd);\n";

static int update_one(const cn_optim_update *u) {
    const char *fn = "optimizer step";
    if (!u || !u->p || !u->g) return cn_failc(CN_EINVAL, "%s: internal error: no tensors", fn);
    cn_gpu_dev *dev = cn_gpu_dev_of(u->p);
    if (!dev) return CN_EINVAL;
    cn_dtype dt = u->dtype;
    if (dt != CN_F32 && dt != CN_F64)
        return cn_failc(CN_EINVAL, "%s: dtype %s (f32 or f64 only)", fn, cn_dtype_name(dt));
    if (cn_gpu_check_dtype(fn, dev, dt) < 0) return CN_EUNSUPPORTED;
    if (u->n <= 0) return CN_OK;
    const char *body, *consts;
    switch (u->alg) {
    case CN_OPT_SGD:
        body = sgd_body;
        consts = "T sgn = c[0], wd = c[1], mom = c[2], omd = c[3], nlr = c[4];";
        break;
    case CN_OPT_ADAM:
    case CN_OPT_ADAMW:
        body = adam_body;
        consts = "T sgn = c[0], wd = c[1], decay = c[2], b1 = c[3], omb1 = c[4], b2 = c[5], "
                 "omb2 = c[6], bc2s = c[7], eps = c[8], nss = c[9];";
        break;
    case CN_OPT_RMSPROP:
        body = rmsprop_body;
        consts = "T sgn = c[0], wd = c[1], alpha = c[2], oma = c[3], eps = c[4], mom = c[5], "
                 "nlr = c[6];";
        break;
    case CN_OPT_ADAGRAD:
        body = adagrad_body;
        consts = "T sgn = c[0], wd = c[1], eps = c[2], nclr = c[3];";
        break;
    default: return cn_failc(CN_EINVAL, "%s: unknown rule %d", fn, (int)u->alg);
    }
    const char *T = cn_gpu_ctype(dt);
    cn_gpu_src s = {0};
    cn_gpu_src_add(&s, "/* chutney: optimizer rule %d %s bits %u */\n%s", (int)u->alg, T,
                   u->bits, cn_gpu_prelude());
    cn_gpu_src_add(&s,
                   "typedef %s T;\n#define F %uu\n"
                   "__kernel void cn_opt(long n, __global T *p, __global const T *g, __global T *s0, "
                   "__global T *s1, __global T *s2, __constant T *c, long po, long go, long o0, long o1, long o2) {\n"
                   "  p += po; g += go; s0 += o0; s1 += o1; s2 += o2;\n"
                   "  %s\n"
                   "  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {\n%s  }\n}\n",
                   T, u->bits, consts, body);
    if (s.oom) {
        cn_gpu_src_free(&s);
        return cn_failc(CN_ENOMEM, "%s: out of memory generating a kernel", fn);
    }
    cn_gpu_kernel k = cn_gpu_kernel_get(dev, s.buf, NULL, "cn_opt");
    cn_gpu_src_free(&s);
    if (!k) return CN_EUNSUPPORTED;
    size_t es = cn_dsize(dt);
    cn_storage *st[5] = {u->p, u->g, u->s[0], u->s[1], u->s[2]};
    int64_t off[5] = {u->p_off, u->g_off, u->s_off[0], u->s_off[1], u->s_off[2]};
    cn_gpu_buf mem[5];
    int r = CN_OK;
    for (int j = 0; j < 5; j++) {
        if (!st[j]) {
            mem[j] = mem[0];
            off[j] = off[0];
            continue;
        }
        if (st[j]->device_kind != (int)dev->kind || st[j]->device_index != dev->index) {
            r = cn_failc(CN_EINVAL, "%s: a tensor of the step is not on %s", fn, dev->label);
            break;
        }
        mem[j] = (cn_gpu_buf)st[j]->data;
    }
    unsigned char cb[10 * 8];
    for (int j = 0; j < 10; j++) {
        if (dt == CN_F64) memcpy(cb + 8 * j, &u->c[j], 8);
        else {
            float f = (float)u->c[j];
            memcpy(cb + 4 * j, &f, 4);
        }
    }
    cn_storage *cs = NULL;
    cn_gpu_buf cm = NULL;
    if (r == CN_OK) {
        cs = cn_gpu_temp(dev, 10 * es);
        if (!cs) r = CN_ENOMEM;
        else {
            r = cn_gpu_write(cs, 0, cb, 10 * es, false);
            cm = (cn_gpu_buf)cs->data;
        }
    }
    if (r == CN_OK) {
        int64_t nn = u->n;
        cn_gpu_arg args[12] = {CN_GPU_VAL(nn),     CN_GPU_MEM(mem[0]), CN_GPU_MEM(mem[1]),
                               CN_GPU_MEM(mem[2]), CN_GPU_MEM(mem[3]), CN_GPU_MEM(mem[4]),
                               CN_GPU_MEM(cm),     CN_GPU_VAL(off[0]), CN_GPU_VAL(off[1]),
                               CN_GPU_VAL(off[2]), CN_GPU_VAL(off[3]), CN_GPU_VAL(off[4])};
        r = cn_gpu_launch_n(fn, dev, k, 12, args, u->n);
    }
    if (cs) cn_storage_release(cs);
    return r;
}

int cn_gpu_optim_update(const cn_optim_update *u, int n) {
    for (int i = 0; i < n; i++) {
        int r = update_one(&u[i]);
        if (r < 0) return r;
    }
    return CN_OK;
}
