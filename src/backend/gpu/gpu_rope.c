/* Rotary position embeddings (src/ops/rope.c) for OpenCL and CUDA: one
 * work item per output element of a contiguous copy of x, viewed as rows of
 * D features at position offset + (row mod T). Each item computes its
 * pair's angle, cos and sin in ACC (double where the device has it, as the
 * CPU does) and reads its partner; features past rotary_dim are copied.
 * Recomputing cos and sin per element costs less than a table's extra
 * launch and buffer at the sizes attention uses, and keeps the kernel one
 * pass over memory. */
#include "gpu_kernels.h"

static const char rope_src[] =
    "__kernel void cn_rope(__global const T *x, long xo, __global T *y, long yo, long T_,\n"
    "                      long D, long R, long offset, int inter, int inv, ACC base, long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long row = e / D, j = e % D;\n"
    "    if (j >= R) {\n"
    "        y[yo + e] = x[xo + e];\n"
    "        return;\n"
    "    }\n"
    "    long h = R / 2, i, other;\n"
    "    int first;\n"
    "    if (inter) {\n"
    "        i = j / 2; first = (j % 2) == 0; other = first ? j + 1 : j - 1;\n"
    "    } else {\n"
    "        first = j < h; i = first ? j : j - h; other = first ? j + h : j - h;\n"
    "    }\n"
    "    ACC p = (ACC)(offset + row % T_);\n"
    "    ACC a = p * pow(base, -(ACC)(2 * i) / (ACC)R);\n"
    "    ACC c = cos(a), s = sin(a);\n"
    "    if (inv) s = -s;\n"
    "    ACC u = (ACC)x[xo + e], v = (ACC)x[xo + row * D + other];\n"
    /* first of the pair: u cos - v sin; second: u cos + v sin (v the first) */
    "    y[yo + e] = (T)(first ? u * c - v * s : u * c + v * s);\n"
    "}\n";

int cn_gpu_k_rope(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                  cn_tensor *out) {
    (void)id, (void)nin;
    const char *op = "rope";
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    cn_dtype dt = (cn_dtype)out->dtype;
    int64_t n = cn_numel(out);
    if (n == 0) return CN_OK;
    cn_gpu_kernel k = cn_gpu_x_float_kernel(op, dev, dt, rope_src, "cn_rope");
    if (!k) return CN_EINVAL;
    cn_tensor *x = cn_gpu_x_contig(in[0]);
    if (!x) return CN_ENOMEM;
    int64_t T = x->shape[x->ndim - 2], D = x->shape[x->ndim - 1];
    int64_t R = a->i[1] ? a->i[1] : D, off = a->i[0], xo = x->offset, yo = out->offset;
    int inter = a->i[2] != 0, inv = a->i[3] != 0;
    double based = a->f[0];
    float basef = (float)a->f[0];
    cn_gpu_buf xm = cn_gpu_buf_of(x), ym = cn_gpu_buf_of(out);
    cn_gpu_arg args[] = {CN_GPU_MEM(xm),   CN_GPU_VAL(xo),    CN_GPU_MEM(ym),  CN_GPU_VAL(yo),
                         CN_GPU_VAL(T),    CN_GPU_VAL(D),     CN_GPU_VAL(R),   CN_GPU_VAL(off),
                         CN_GPU_VAL(inter), CN_GPU_VAL(inv),
                         dev->fp64 ? CN_GPU_VAL(based) : CN_GPU_VAL(basef), CN_GPU_VAL(n)};
    int rc = cn_gpu_x_launch1(op, dev, k, (int)(sizeof args / sizeof args[0]), args, n);
    cn_release(x);
    return rc;
}
