/* Scaled dot-product attention and its backward op (f32, f64) for OpenCL
 * and CUDA: the CPU kernels' results (src/backend/cpu/attention.c), one
 * work item per row, no score matrix either.
 *   forward: one work item per query row streams over the keys with the
 *     online softmax (running max and sum in ACC, the weighted sum of v in
 *     the output row, rescaled when the max grows); writes [P v, lse].
 *   part 0/1: one work item per query row: D = rowsum(dO O) - dlse, then
 *     per key P = exp(s - lse), dS = P (dO . v_j - D), dq += dS k_j (and
 *     dS is the float mask's gradient).
 *   part 2: D and lse of every row first (cn_sdpa_rowd), then one work item
 *     per key: dv += P dO_i, dk += dS q_i over the query rows.
 *   part 3: part 0's kernel, then part 2's, into one result [dq; dk dv].
 * Operands are read through their strides (batch axes broadcast, the mask
 * shared by every head); dropout keeps score (b, i, j) by the CPU's rule
 * (the Philox word of counter ((b L + i) S + j) / 4), so both drop the same
 * weights. Every work item writes its own rows: no atomics. */
#include "gpu_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char sdpa_src[] =
    /* the offset of flat batch index b: v[0..nb) hold the batch strides,
     * v[6] and v[7] the row and column strides */
    "CN_FN long cn_boff(long b, int nb, nd8 sh, nd8 st) {\n"
    "    long o = 0;\n"
    "    for (int d = nb - 1; d >= 0; d--) { o += (b % sh.v[d]) * st.v[d]; b /= sh.v[d]; }\n"
    "    return o;\n"
    "}\n"
    /* the masked score of (i, j): -INFINITY when masked */
    "CN_FN ACC cn_score(__global const T *q, long qb, nd8 qs, __global const T *k, long kb,\n"
    "                   nd8 ks, __global const MT *m, long mb, nd8 ms, long E, long i, long j,\n"
    "                   ACC scale, int causal) {\n"
    "    if (causal && j > i) return -INFINITY;\n"
    "#if MASK == 1\n"
    "    if (!m[mb + i * ms.v[6] + j * ms.v[7]]) return -INFINITY;\n"
    "#endif\n"
    "    ACC d = 0;\n"
    "    for (long p = 0; p < E; p++)\n"
    "        d += (ACC)q[qb + i * qs.v[6] + p * qs.v[7]] *\n"
    "             (ACC)k[kb + j * ks.v[6] + p * ks.v[7]];\n"
    "    d *= scale;\n"
    "#if MASK == 2\n"
    "    d += (ACC)m[mb + i * ms.v[6] + j * ms.v[7]];\n"
    "#endif\n"
    "    return d;\n"
    "}\n"
    "#if DROP\n"
    "CN_FN int cn_keep(ulong key, ulong c, uint thr) {\n"
    "    cn_u4 w = cn_philox(key, c >> 2);\n"
    "    uint l = (uint)(c & 3);\n"
    "    uint x = l == 0 ? w.s0 : l == 1 ? w.s1 : l == 2 ? w.s2 : w.s3;\n"
    "    return (x >> 8) < thr;\n"
    "}\n"
    "CN_FN ulong cn_key(__global const float *sd, long so, long ss) {\n"
    "    ulong key = 0;\n"
    "    for (int t = 0; t < 64; t++)\n"
    "        if (sd[so + t * ss] != 0) key |= (ulong)1 << t;\n"
    "    return key;\n"
    "}\n"
    "#endif\n"
    "#define OPERANDS __global const T *q, long qo, nd8 qs,\\\n"
    "    __global const T *k, long ko, nd8 ks,\\\n"
    "    __global const T *v, long vo, nd8 vs, __global const MT *m, long mo, nd8 ms,\\\n"
    "    __global const float *sd, long so, long ss\n"
    "__kernel void cn_sdpa_fwd(OPERANDS, __global T *y, long yo, nd8 bsh, int nb, long L, long S,\n"
    "                          long E, long Ev, ACC scale, int causal, uint thr, ACC dscale,\n"
    "                          long n) {\n"
    "    long r = get_global_id(0);\n"
    "    if (r >= n) return;\n"
    "    long b = r / L, i = r % L;\n"
    "    long qb = qo + cn_boff(b, nb, bsh, qs), kb = ko + cn_boff(b, nb, bsh, ks);\n"
    "    long vb = vo + cn_boff(b, nb, bsh, vs), mb = mo + cn_boff(b, nb, bsh, ms);\n"
    "    __global T *o = y + yo + r * (Ev + 1);\n"
    "    for (long e = 0; e < Ev; e++) o[e] = 0;\n"
    "#if DROP\n"
    "    ulong key = cn_key(sd, so, ss);\n"
    "#endif\n"
    "    ACC mx = -INFINITY, l = 0;\n"
    "    long jn = causal && i + 1 < S ? i + 1 : S;\n"
    "    for (long j = 0; j < jn; j++) {\n"
    "        ACC s = cn_score(q, qb, qs, k, kb, ks, m, mb, ms, E, i, j, scale, causal);\n"
    "        if (s == -INFINITY) continue;\n"
    "        if (s > mx) {\n"
    "            ACC al = exp(mx - s);\n"
    "            for (long e = 0; e < Ev; e++) o[e] = (T)((ACC)o[e] * al);\n"
    "            l *= al;\n"
    "            mx = s;\n"
    "        }\n"
    "        ACC w = exp(s - mx);\n"
    "        l += w;\n"
    "#if DROP\n"
    "        if (!cn_keep(key, (ulong)r * (ulong)S + (ulong)j, thr)) continue;\n"
    "        w *= dscale;\n"
    "#endif\n"
    "        for (long e = 0; e < Ev; e++)\n"
    "            o[e] = (T)((ACC)o[e] + w * (ACC)v[vb + j * vs.v[6] + e * vs.v[7]]);\n"
    "    }\n"
    "    if (l == 0) {\n"
    "        o[Ev] = INFINITY;\n"
    "        return;\n"
    "    }\n"
    "    for (long e = 0; e < Ev; e++) o[e] = (T)((ACC)o[e] / l);\n"
    "    o[Ev] = (T)(mx + log(l));\n"
    "}\n"
    /* D = rowsum(dO O) - dlse of row (b, i) */
    "CN_FN ACC cn_rowd(__global const T *y, long yb, nd8 ys, __global const T *dy, long db,\n"
    "                  nd8 dys, long Ev) {\n"
    "    ACC d = 0;\n"
    "    for (long e = 0; e < Ev; e++)\n"
    "        d += (ACC)dy[db + e * dys.v[7]] * (ACC)y[yb + e * ys.v[7]];\n"
    "    return d - (ACC)dy[db + Ev * dys.v[7]];\n"
    "}\n"
    "__kernel void cn_sdpa_dq(OPERANDS, __global const T *y, long yo, nd8 ys,\n"
    "                         __global const T *dy, long dyo, nd8 dys, __global T *out, long oo,\n"
    "                         long orows, long ow, nd8 bsh, int nb, long L, long S, long E,\n"
    "                         long Ev, ACC scale, int causal, uint thr, ACC dscale, int dmask,\n"
    "                         long n) {\n"
    "    long r = get_global_id(0);\n"
    "    if (r >= n) return;\n"
    "    long b = r / L, i = r % L;\n"
    "    long qb = qo + cn_boff(b, nb, bsh, qs), kb = ko + cn_boff(b, nb, bsh, ks);\n"
    "    long vb = vo + cn_boff(b, nb, bsh, vs), mb = mo + cn_boff(b, nb, bsh, ms);\n"
    "    long yb = yo + cn_boff(b, nb, bsh, ys) + i * ys.v[6];\n"
    "    long db = dyo + cn_boff(b, nb, bsh, dys) + i * dys.v[6];\n"
    "    ACC D = cn_rowd(y, yb, ys, dy, db, dys, Ev), lse = (ACC)y[yb + Ev * ys.v[7]];\n"
    "    __global T *o = out + oo + (b * orows + i) * ow;\n"
    "    for (long p = 0; p < E; p++) o[p] = 0;\n"
    "#if DROP\n"
    "    ulong key = cn_key(sd, so, ss);\n"
    "#endif\n"
    "    for (long j = 0; j < S; j++) {\n"
    "        ACC s = cn_score(q, qb, qs, k, kb, ks, m, mb, ms, E, i, j, scale, causal), ds = 0;\n"
    "        if (s != -INFINITY) {\n"
    "            ACC P = exp(s - lse), dp = 0;\n"
    "            for (long e = 0; e < Ev; e++)\n"
    "                dp += (ACC)dy[db + e * dys.v[7]] * (ACC)v[vb + j * vs.v[6] + e * vs.v[7]];\n"
    "#if DROP\n"
    "            dp = cn_keep(key, (ulong)r * (ulong)S + (ulong)j, thr) ? dp * dscale : 0;\n"
    "#endif\n"
    "            ds = P * (dp - D);\n"
    "            for (long p = 0; p < E; p++)\n"
    "                o[p] = (T)((ACC)o[p] + ds * (ACC)k[kb + j * ks.v[6] + p * ks.v[7]]);\n"
    "        }\n"
    "        if (dmask) o[E + j] = (T)ds;\n"
    "    }\n"
    "    for (long p = 0; p < E; p++) o[p] = (T)((ACC)o[p] * scale);\n"
    "    if (!dmask) for (long p = E; p < ow; p++) o[p] = 0;\n"
    "}\n"
    /* (D, lse) of every query row, for the key side */
    "__kernel void cn_sdpa_rowd(__global const T *y, long yo, nd8 ys, __global const T *dy,\n"
    "                           long dyo, nd8 dys, nd8 bsh, int nb, long L, long Ev,\n"
    "                           __global T *dd, long ddo, long n) {\n"
    "    long r = get_global_id(0);\n"
    "    if (r >= n) return;\n"
    "    long b = r / L, i = r % L;\n"
    "    long yb = yo + cn_boff(b, nb, bsh, ys) + i * ys.v[6];\n"
    "    long db = dyo + cn_boff(b, nb, bsh, dys) + i * dys.v[6];\n"
    "    dd[ddo + 2 * r] = (T)cn_rowd(y, yb, ys, dy, db, dys, Ev);\n"
    "    dd[ddo + 2 * r + 1] = y[yb + Ev * ys.v[7]];\n"
    "}\n"
    "__kernel void cn_sdpa_dkv(OPERANDS, __global const T *dy, long dyo, nd8 dys,\n"
    "                          __global const T *dd, long ddo, __global T *out, long oo,\n"
    "                          long orows, long kv0, nd8 bsh, int nb, long L, long S, long E,\n"
    "                          long Ev, ACC scale, int causal, uint thr, ACC dscale, long n) {\n"
    "    long r = get_global_id(0);\n"
    "    if (r >= n) return;\n"
    "    long b = r / S, j = r % S;\n"
    "    long qb = qo + cn_boff(b, nb, bsh, qs), kb = ko + cn_boff(b, nb, bsh, ks);\n"
    "    long vb = vo + cn_boff(b, nb, bsh, vs), mb = mo + cn_boff(b, nb, bsh, ms);\n"
    "    long d0 = dyo + cn_boff(b, nb, bsh, dys);\n"
    "    __global T *o = out + oo + (b * orows + kv0 + j) * (E + Ev);\n"
    "    for (long p = 0; p < E + Ev; p++) o[p] = 0;\n"
    "#if DROP\n"
    "    ulong key = cn_key(sd, so, ss);\n"
    "#else\n"
    "    ACC dsc = 1;\n"
    "#endif\n"
    "    for (long i = causal ? j : 0; i < L; i++) {\n"
    "        ACC s = cn_score(q, qb, qs, k, kb, ks, m, mb, ms, E, i, j, scale, causal);\n"
    "        if (s == -INFINITY) continue;\n"
    "        long ri = b * L + i, db = d0 + i * dys.v[6];\n"
    "        ACC P = exp(s - (ACC)dd[ddo + 2 * ri + 1]), dp = 0;\n"
    "#if DROP\n"
    "        ACC dsc = cn_keep(key, (ulong)ri * (ulong)S + (ulong)j, thr) ? dscale : 0;\n"
    "#endif\n"
    "        for (long e = 0; e < Ev; e++) {\n"
    "            ACC g = (ACC)dy[db + e * dys.v[7]];\n"
    "            dp += g * (ACC)v[vb + j * vs.v[6] + e * vs.v[7]];\n"
    "            o[E + e] = (T)((ACC)o[E + e] + P * dsc * g);\n"
    "        }\n"
    "        ACC ds = P * (dp * dsc - (ACC)dd[ddo + 2 * ri]);\n"
    "        for (long p = 0; p < E; p++)\n"
    "            o[p] = (T)((ACC)o[p] + ds * (ACC)q[qb + i * qs.v[6] + p * qs.v[7]]);\n"
    "    }\n"
    "    for (long p = 0; p < E; p++) o[p] = (T)((ACC)o[p] * scale);\n"
    "}\n";

/* An operand's buffer, offset and strides over the result's nb batch axes
 * (v[0..nb)), rows (v[6]) and columns (v[7]); size-1 axes read stride 0. */
typedef struct gop {
    cn_gpu_buf mem;
    int64_t off;
    cn_gpu_nd8 st;
} gop;

static void gop_of(const cn_tensor *t, int nb, gop *g) {
    memset(g, 0, sizeof *g);
    int r = t->ndim, tb = r > 2 ? r - 2 : 0;
    g->mem = cn_gpu_buf_of(t);
    g->off = t->offset;
    for (int d = 0; d < nb; d++) {
        int td = d - (nb - tb);
        g->st.v[d] = td >= 0 && t->shape[td] != 1 ? t->strides[td] : 0;
    }
    g->st.v[6] = r >= 2 && t->shape[r - 2] != 1 ? t->strides[r - 2] : 0;
    g->st.v[7] = r >= 1 && t->shape[r - 1] != 1 ? t->strides[r - 1] : 0;
}

/* Everything the four kernels share. */
typedef struct sdpa_launch {
    const char *op;
    cn_gpu_dev *dev;
    cn_dtype dt;
    gop q, k, v, m, y, dy;
    gop seed; /* f32 [64]: st.v[7] its stride */
    int nb, causal, mask, drop;
    cn_gpu_nd8 bsh;
    int64_t B, L, S, E, Ev;
    double scale, dscale;
    uint32_t thr;
} sdpa_launch;

static int setup(sdpa_launch *s, const char *op, cn_tensor *const *in, const cn_attrs *a,
                 const cn_tensor *out, int mask_base) {
    memset(s, 0, sizeof *s);
    s->op = op;
    s->dev = cn_gpu_dev_of(out->storage);
    s->dt = (cn_dtype)out->dtype;
    if (!s->dev) return CN_EINVAL;
    if (s->dt != CN_F32 && s->dt != CN_F64)
        return cn_failc(CN_EUNSUPPORTED, "%s: no kernel for dtype %s", op, cn_dtype_name(s->dt));
    if (cn_gpu_x_fp64(op, s->dev, s->dt) < 0) return CN_EUNSUPPORTED;
    s->nb = out->ndim - 2;
    s->B = 1;
    for (int d = 0; d < s->nb; d++) s->B *= s->bsh.v[d] = out->shape[d];
    const cn_tensor *q = in[0], *k = in[1], *v = in[2];
    s->L = q->shape[q->ndim - 2];
    s->E = q->shape[q->ndim - 1];
    s->S = k->shape[k->ndim - 2];
    s->Ev = v->shape[v->ndim - 1];
    s->scale = a->f[0] > 0 ? a->f[0] : s->E > 0 ? 1 / sqrt((double)s->E) : 1;
    s->causal = a->i[0] != 0;
    gop_of(q, s->nb, &s->q);
    gop_of(k, s->nb, &s->k);
    gop_of(v, s->nb, &s->v);
    if (mask_base > 3) {
        gop_of(in[3], s->nb, &s->y);
        gop_of(in[4], s->nb, &s->dy);
    }
    int at = mask_base;
    s->m = s->q; /* a buffer for the unused argument */
    if (a->i[1]) {
        const cn_tensor *m = in[at++];
        s->mask = m->dtype == CN_BOOL ? 1 : 2;
        gop_of(m, s->nb, &s->m);
    }
    s->seed = s->q;
    double p = a->f[1];
    if (p > 0) {
        const cn_tensor *sd = in[at];
        s->seed.mem = cn_gpu_buf_of(sd);
        s->seed.off = sd->offset;
        s->seed.st.v[7] = sd->strides[0];
        s->drop = 1;
        s->thr = (uint32_t)ceil((1 - p) * 16777216.0);
        s->dscale = p < 1 ? 1 / (1 - p) : 0;
    }
    return CN_OK;
}

static cn_gpu_kernel sdpa_kernel(const sdpa_launch *s, const char *name) {
    const char *philox = s->drop ? cn_gpu_philox_source() : "";
    size_t n = strlen(philox) + 256;
    char *defs = malloc(n);
    if (!defs) {
        cn_failc(CN_ENOMEM, "%s: out of memory", s->op);
        return NULL;
    }
    const char *T = cn_gpu_ctype(s->dt);
    snprintf(defs, n,
             "#define T %s\n#define ACC %s\n#define MT %s\n#define MASK %d\n"
             "#define DROP %d\n" CN_GPU_ND8_SRC "%s",
             T, s->dev->fp64 ? "double" : "float", s->mask == 1 ? "uchar" : T, s->mask, s->drop,
             philox);
    cn_gpu_kernel k = cn_gpu_x_kernel(s->op, s->dev, defs, sdpa_src, name);
    free(defs);
    return k;
}

/* The ACC-typed scalars and the operand arguments every kernel but rowd
 * takes first. */
typedef struct acc_args {
    double d[2];
    float f[2];
} acc_args;

#define OPERAND_ARGS(s)                                                                            \
    CN_GPU_MEM((s)->q.mem), CN_GPU_VAL((s)->q.off), CN_GPU_VAL((s)->q.st), CN_GPU_MEM((s)->k.mem), \
        CN_GPU_VAL((s)->k.off), CN_GPU_VAL((s)->k.st), CN_GPU_MEM((s)->v.mem),                     \
        CN_GPU_VAL((s)->v.off), CN_GPU_VAL((s)->v.st), CN_GPU_MEM((s)->m.mem),                     \
        CN_GPU_VAL((s)->m.off), CN_GPU_VAL((s)->m.st), CN_GPU_MEM((s)->seed.mem),                  \
        CN_GPU_VAL((s)->seed.off), CN_GPU_VAL((s)->seed.st.v[7])

static cn_gpu_arg acc_arg(const sdpa_launch *s, acc_args *x, int i, double v) {
    x->d[i] = v;
    x->f[i] = (float)v;
    return s->dev->fp64 ? CN_GPU_VAL(x->d[i]) : CN_GPU_VAL(x->f[i]);
}

static int forward(sdpa_launch *s, cn_tensor *out) {
    cn_gpu_kernel k = sdpa_kernel(s, "cn_sdpa_fwd");
    if (!k) return CN_EINVAL;
    cn_gpu_buf ym = cn_gpu_buf_of(out);
    int64_t yo = out->offset, n = s->B * s->L;
    acc_args x;
    cn_gpu_arg args[] = {OPERAND_ARGS(s),
                         CN_GPU_MEM(ym),
                         CN_GPU_VAL(yo),
                         CN_GPU_VAL(s->bsh),
                         CN_GPU_VAL(s->nb),
                         CN_GPU_VAL(s->L),
                         CN_GPU_VAL(s->S),
                         CN_GPU_VAL(s->E),
                         CN_GPU_VAL(s->Ev),
                         acc_arg(s, &x, 0, s->scale),
                         CN_GPU_VAL(s->causal),
                         CN_GPU_VAL(s->thr),
                         acc_arg(s, &x, 1, s->dscale),
                         CN_GPU_VAL(n)};
    return cn_gpu_x_launch1(s->op, s->dev, k, (int)(sizeof args / sizeof args[0]), args, n);
}

/* Rows of out per batch index, and its row length. */
static int64_t rows_of(const cn_tensor *out) { return out->shape[out->ndim - 2]; }
static int64_t cols_of(const cn_tensor *out) { return out->shape[out->ndim - 1]; }

static int grad_q(sdpa_launch *s, int dmask, cn_tensor *out) {
    cn_gpu_kernel k = sdpa_kernel(s, "cn_sdpa_dq");
    if (!k) return CN_EINVAL;
    cn_gpu_buf om = cn_gpu_buf_of(out);
    int64_t oo = out->offset, n = s->B * s->L, orows = rows_of(out), ow = cols_of(out);
    acc_args x;
    cn_gpu_arg args[] = {OPERAND_ARGS(s),       CN_GPU_MEM(s->y.mem),  CN_GPU_VAL(s->y.off),
                         CN_GPU_VAL(s->y.st),   CN_GPU_MEM(s->dy.mem), CN_GPU_VAL(s->dy.off),
                         CN_GPU_VAL(s->dy.st),  CN_GPU_MEM(om),        CN_GPU_VAL(oo),
                         CN_GPU_VAL(orows),     CN_GPU_VAL(ow),        CN_GPU_VAL(s->bsh),
                         CN_GPU_VAL(s->nb),     CN_GPU_VAL(s->L),      CN_GPU_VAL(s->S),
                         CN_GPU_VAL(s->E),      CN_GPU_VAL(s->Ev),     acc_arg(s, &x, 0, s->scale),
                         CN_GPU_VAL(s->causal), CN_GPU_VAL(s->thr),    acc_arg(s, &x, 1, s->dscale),
                         CN_GPU_VAL(dmask),     CN_GPU_VAL(n)};
    return cn_gpu_x_launch1(s->op, s->dev, k, (int)(sizeof args / sizeof args[0]), args, n);
}

static int grad_kv(sdpa_launch *s, int64_t kv0, cn_tensor *out) {
    cn_gpu_kernel kd = sdpa_kernel(s, "cn_sdpa_rowd"),
                  k = kd ? sdpa_kernel(s, "cn_sdpa_dkv") : NULL;
    if (!k) return CN_EINVAL;
    int64_t nr = s->B * s->L, n = s->B * s->S;
    cn_tensor *dd = cn_gpu_x_empty(out, s->dt, 1, (int64_t[]){2 * nr});
    if (!dd) return CN_ENOMEM;
    cn_gpu_buf dm = cn_gpu_buf_of(dd), om = cn_gpu_buf_of(out);
    int64_t ddo = dd->offset, oo = out->offset, orows = rows_of(out);
    int rc = CN_OK;
    if (nr > 0) {
        cn_gpu_arg ra[] = {CN_GPU_MEM(s->y.mem),  CN_GPU_VAL(s->y.off),  CN_GPU_VAL(s->y.st),
                           CN_GPU_MEM(s->dy.mem), CN_GPU_VAL(s->dy.off), CN_GPU_VAL(s->dy.st),
                           CN_GPU_VAL(s->bsh),    CN_GPU_VAL(s->nb),     CN_GPU_VAL(s->L),
                           CN_GPU_VAL(s->Ev),     CN_GPU_MEM(dm),        CN_GPU_VAL(ddo),
                           CN_GPU_VAL(nr)};
        rc = cn_gpu_x_launch1(s->op, s->dev, kd, (int)(sizeof ra / sizeof ra[0]), ra, nr);
    }
    if (rc == 0) {
        acc_args x;
        cn_gpu_arg args[] = {OPERAND_ARGS(s),
                             CN_GPU_MEM(s->dy.mem),
                             CN_GPU_VAL(s->dy.off),
                             CN_GPU_VAL(s->dy.st),
                             CN_GPU_MEM(dm),
                             CN_GPU_VAL(ddo),
                             CN_GPU_MEM(om),
                             CN_GPU_VAL(oo),
                             CN_GPU_VAL(orows),
                             CN_GPU_VAL(kv0),
                             CN_GPU_VAL(s->bsh),
                             CN_GPU_VAL(s->nb),
                             CN_GPU_VAL(s->L),
                             CN_GPU_VAL(s->S),
                             CN_GPU_VAL(s->E),
                             CN_GPU_VAL(s->Ev),
                             acc_arg(s, &x, 0, s->scale),
                             CN_GPU_VAL(s->causal),
                             CN_GPU_VAL(s->thr),
                             acc_arg(s, &x, 1, s->dscale),
                             CN_GPU_VAL(n)};
        rc = cn_gpu_x_launch1(s->op, s->dev, k, (int)(sizeof args / sizeof args[0]), args, n);
    }
    cn_release(dd);
    return rc;
}

int cn_gpu_k_attention(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                       cn_tensor *out) {
    (void)nin;
    sdpa_launch s;
    switch (id) {
    case CN_OP_scaled_dot_product_attention:
        if (setup(&s, "scaled_dot_product_attention", in, a, out, 3) < 0) return CN_EINVAL;
        return forward(&s, out);
    case CN_OP_scaled_dot_product_attention_backward:
        if (setup(&s, "scaled_dot_product_attention_backward", in, a, out, 5) < 0) return CN_EINVAL;
        if (a->i[2] < 2) return grad_q(&s, a->i[2] == 1, out);
        if (a->i[2] == 2) return grad_kv(&s, 0, out);
        /* part 3: q's rows, then k's and v's below them */
        int rc = grad_q(&s, 0, out);
        return rc < 0 ? rc : grad_kv(&s, s.L, out);
    default: return cn_failc(CN_EUNSUPPORTED, "gpu kernels: op %d is not attention", (int)id);
    }
}
