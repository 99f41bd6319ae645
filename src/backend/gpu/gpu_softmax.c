/* softmax, log_softmax and cumsum. The input is made contiguous
 * and viewed as [outer, len, inner] with the axis in the middle, as on the
 * CPU. softmax: one work group per line (a max, then a sum of
 * e^(x - max) in double where the device has it, both reduced in local
 * memory; a line holding NaN, or of -inf, gives NaN as on the CPU).
 * cumsum: one work item per line, the running sum in double for floats
 * (as the CPU) and in 64-bit wrapping integers for the rest. */
#include "gpu_kernels.h"

#include <stdio.h>

#define WG 64

static const char softmax_src[] =
    "#define NANMAX(a, b) ((a) > (b) || isnan(a) ? (a) : (b))\n"
    "__kernel CN_GROUP_SIZE(WG, 1)\n"
    "void cn_softmax(__global const T *x, long xo, __global T *y, long yo, long len,\n"
    "                long inner, int lg) {\n"
    "    long line = get_group_id(0), o = line / inner, j = line % inner;\n"
    "    long base = o * len * inner + j;\n"
    "    int lid = get_local_id(0);\n"
    "    __local T rm[WG];\n"
    "    __local ACC rs[WG];\n"
    "    T m = -INFINITY;\n"
    "    for (long i = lid; i < len; i += WG) m = NANMAX(x[xo + base + i * inner], m);\n"
    "    rm[lid] = m;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (int s = WG / 2; s > 0; s >>= 1) {\n"
    "        if (lid < s) rm[lid] = NANMAX(rm[lid + s], rm[lid]);\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    m = rm[0];\n"
    "    ACC s = 0;\n"
    "    for (long i = lid; i < len; i += WG) s += (ACC)exp(x[xo + base + i * inner] - m);\n"
    "    rs[lid] = s;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (int k = WG / 2; k > 0; k >>= 1) {\n"
    "        if (lid < k) rs[lid] += rs[lid + k];\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    s = rs[0];\n"
    "    if (lg) {\n"
    "        T ls = (T)log(s);\n"
    "        for (long i = lid; i < len; i += WG) {\n"
    "            long p = base + i * inner;\n"
    "            y[yo + p] = (x[xo + p] - m) - ls;\n"
    "        }\n"
    "    } else {\n"
    "        T inv = (T)(1 / s);\n"
    "        for (long i = lid; i < len; i += WG) {\n"
    "            long p = base + i * inner;\n"
    "            y[yo + p] = exp(x[xo + p] - m) * inv;\n"
    "        }\n"
    "    }\n"
    "}\n";

static const char cumsum_src[] =
    "__kernel void cn_cumsum(__global const TI *x, long xo, __global TO *y, long yo, long len,\n"
    "                        long inner, long lines) {\n"
    "    long line = get_global_id(0);\n"
    "    if (line >= lines) return;\n"
    "    long o = line / inner, j = line % inner, base = o * len * inner + j;\n"
    "    ACC a = 0;\n"
    "    for (long i = 0; i < len; i++) {\n"
    "        long p = base + i * inner;\n"
    "        a += CONV(x[xo + p]);\n"
    "        y[yo + p] = (TO)a;\n"
    "    }\n"
    "}\n";

static void lines_of(const cn_tensor *x, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
    *outer = *len = *inner = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (d < axis) *outer *= x->shape[d];
        else if (d == axis) *len = x->shape[d];
        else *inner *= x->shape[d];
    }
}

static int softmax(const char *op, bool lg, cn_tensor *x0, int axis, cn_tensor *out) {
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    cn_dtype dt = (cn_dtype)out->dtype;
    if (dt != CN_F32 && dt != CN_F64)
        return cn_failc(CN_EUNSUPPORTED, "%s: no kernel for dtype %s", op, cn_dtype_name(dt));
    int rc = cn_gpu_x_fp64(op, dev, dt);
    if (rc < 0) return rc;
    char defs[128];
    snprintf(defs, sizeof defs, "#define T %s\n#define ACC %s\n#define WG %d\n", cn_gpu_ctype(dt),
             dev->fp64 ? "double" : "float", WG);
    cn_gpu_kernel k = cn_gpu_x_kernel(op, dev, defs, softmax_src, "cn_softmax");
    if (!k) return CN_EINVAL;
    cn_tensor *x = cn_gpu_x_contig(x0);
    if (!x) return CN_ENOMEM;
    int64_t outer, len, inner;
    lines_of(x, axis, &outer, &len, &inner);
    cn_gpu_buf xm = cn_gpu_buf_of(x), ym = cn_gpu_buf_of(out);
    int64_t xo = x->offset, yo = out->offset;
    int clg = lg;
    cn_gpu_arg args[] = {CN_GPU_MEM(xm),  CN_GPU_VAL(xo),    CN_GPU_MEM(ym), CN_GPU_VAL(yo),
                         CN_GPU_VAL(len), CN_GPU_VAL(inner), CN_GPU_VAL(clg)};
    size_t local = WG, global = (size_t)(outer * inner) * WG;
    rc = cn_gpu_launch(op, dev, k, 7, args, 1, &global, &local);
    cn_release(x);
    return rc;
}

static int cumsum(cn_tensor *x0, int axis, cn_tensor *out) {
    const char *op = "cumsum";
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    cn_dtype dt = (cn_dtype)out->dtype, xt = (cn_dtype)x0->dtype;
    bool fl = dt == CN_F32 || dt == CN_F64;
    if (!fl && dt != CN_I64)
        return cn_failc(CN_EUNSUPPORTED, "%s: no kernel for dtype %s", op, cn_dtype_name(dt));
    if (fl && xt != dt)
        return cn_failc(CN_EUNSUPPORTED, "%s: no kernel for %s to %s", op, cn_dtype_name(xt),
                        cn_dtype_name(dt));
    int rc = cn_gpu_x_fp64(op, dev, dt);
    if (rc < 0) return rc;
    const char *acc = fl ? (dev->fp64 ? "double" : "float") : "ulong";
    char defs[192];
    snprintf(defs, sizeof defs, "#define TI %s\n#define TO %s\n#define ACC %s\n#define CONV(v) ((ACC)%s(v))\n",
             cn_gpu_ctype(xt), cn_gpu_ctype(dt), acc, fl ? "" : "(long)");
    cn_gpu_kernel k = cn_gpu_x_kernel(op, dev, defs, cumsum_src, "cn_cumsum");
    if (!k) return CN_EINVAL;
    cn_tensor *x = cn_gpu_x_contig(x0);
    if (!x) return CN_ENOMEM;
    int64_t outer, len, inner;
    lines_of(x, axis, &outer, &len, &inner);
    int64_t lines = outer * inner;
    cn_gpu_buf xm = cn_gpu_buf_of(x), ym = cn_gpu_buf_of(out);
    int64_t xo = x->offset, yo = out->offset;
    cn_gpu_arg args[] = {CN_GPU_MEM(xm),  CN_GPU_VAL(xo),    CN_GPU_MEM(ym),   CN_GPU_VAL(yo),
                         CN_GPU_VAL(len), CN_GPU_VAL(inner), CN_GPU_VAL(lines)};
    size_t local = 64, global = cn_gpu_x_round(lines, local);
    rc = cn_gpu_launch(op, dev, k, 7, args, 1, &global, &local);
    cn_release(x);
    return rc;
}

int cn_gpu_k_softmax(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                     cn_tensor *out) {
    (void)nin;
    switch (id) {
    case CN_OP_softmax: return softmax("softmax", false, in[0], (int)a->i[0], out);
    case CN_OP_log_softmax: return softmax("log_softmax", true, in[0], (int)a->i[0], out);
    case CN_OP_cumsum: return cumsum(in[0], (int)a->i[0], out);
    default:
        return cn_failc(CN_EUNSUPPORTED, "gpu kernels: op %d is not softmax or cumsum", (int)id);
    }
}
