/* Joining, indexing and padding: concat, gather, index_select,
 * scatter_add, pad, one_hot, tril, triu, slice_scatter. One work item per
 * output element, each finding its operands' elements from its
 * coordinates (shapes and strides passed as nd8 structs), so inputs of any
 * strides are read in place. Kernels that only move elements use an
 * unsigned type of the element's size, so every dtype (f16 and bf16
 * included) shares them.
 *
 * scatter_add is deterministic: each output element walks the index along
 * the axis and adds the matching src elements in order, as the CPU does
 * (no atomics). Indices out of range are reported through a flag buffer
 * (the first value a work item saw) with the CPU kernels' messages. */
#include "gpu_kernels.h"
#include "../pad_geom.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char index_src[] =
    CN_GPU_ND8_SRC CN_GPU_BAD_SRC
    "__kernel void cn_gather(__global T *out, long oo, __global const T *x, long xo, nd8 xs,\n"
    "                        __global const IT *ix, long io, nd8 is, nd8 shape, int nd,\n"
    "                        long L, long xa, long n, __global int *bad) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long rem = e, xoff = xo, ioff = io;\n"
    "    for (int d = nd - 1; d >= 0; d--) {\n"
    "        long c = rem % shape.v[d];\n"
    "        rem /= shape.v[d];\n"
    "        xoff += c * xs.v[d];\n"
    "        ioff += c * is.v[d];\n"
    "    }\n"
    "    long v = (long)ix[ioff];\n"
    "    if (v < 0 || v >= L) { CN_GPU_BAD(bad, v); return; }\n"
    "    out[oo + e] = x[xoff + v * xa];\n"
    "}\n"
    /* every index element in [0, L) */
    "__kernel void cn_check(__global const IT *ix, long io, nd8 is, nd8 shape, int nd, long L,\n"
    "                       long n, __global int *bad) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long rem = e, ioff = io;\n"
    "    for (int d = nd - 1; d >= 0; d--) {\n"
    "        ioff += (rem % shape.v[d]) * is.v[d];\n"
    "        rem /= shape.v[d];\n"
    "    }\n"
    "    long v = (long)ix[ioff];\n"
    "    if (v < 0 || v >= L) CN_GPU_BAD(bad, v);\n"
    "}\n"
    "__kernel void cn_pad(__global T *out, long oo, __global const T *x, long xo, nd8 xs,\n"
    "                     nd8 shape, nd8 xl, nd8 before, int nd, int mode, ulong val, long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long rem = e, xoff = xo;\n"
    "    bool outside = false;\n"
    "    for (int d = nd - 1; d >= 0; d--) {\n"
    "        long c = rem % shape.v[d];\n"
    "        rem /= shape.v[d];\n"
    "        long L = xl.v[d], s = c - before.v[d];\n"
    "        if (s < 0 || s >= L) {\n"
    "            if (mode == 0 || L == 0) { outside = true; continue; }\n"
    "            if (mode == 1) {\n"
    "                if (s < 0) s = -s;\n"
    "                if (s >= L) s = 2 * (L - 1) - s;\n"
    "            }\n"
    "            s = s < 0 ? 0 : s >= L ? L - 1 : s;\n"
    "        }\n"
    "        xoff += s * xs.v[d];\n"
    "    }\n"
    "    out[oo + e] = outside ? (T)val : x[xoff];\n"
    "}\n"
    "__kernel void cn_tri(__global T *out, long oo, __global const T *x, long xo, nd8 xs,\n"
    "                     nd8 shape, int nd, long k, int upper, long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long rem = e, xoff = xo, row = 0, col = 0;\n"
    "    for (int d = nd - 1; d >= 0; d--) {\n"
    "        long c = rem % shape.v[d];\n"
    "        rem /= shape.v[d];\n"
    "        if (d == nd - 1) col = c;\n"
    "        if (d == nd - 2) row = c;\n"
    "        xoff += c * xs.v[d];\n"
    "    }\n"
    "    bool keep = upper ? col - row >= k : col - row <= k;\n"
    "    out[oo + e] = keep ? x[xoff] : (T)0;\n"
    "}\n"
    "__kernel void cn_one_hot(__global long *out, long oo, __global const IT *ix, long io,\n"
    "                         nd8 is, nd8 shape, int nd, long C, long n, __global int *bad) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long k = e % C, rem = e / C, ioff = io;\n"
    "    for (int d = nd - 1; d >= 0; d--) {\n"
    "        ioff += (rem % shape.v[d]) * is.v[d];\n"
    "        rem /= shape.v[d];\n"
    "    }\n"
    "    long v = (long)ix[ioff];\n"
    "    if (v < 0 || v >= C) CN_GPU_BAD(bad, v);\n"
    "    out[oo + e] = v == k;\n"
    "}\n";

/* scatter_add needs arithmetic on T (f32, f64, i32, i64). */
static const char scatter_src[] =
    CN_GPU_ND8_SRC
    "__kernel void cn_scatter(__global T *out, long oo, __global const T *x, long xo, nd8 xs,\n"
    "                         __global const IT *ix, long io, nd8 is, __global const T *src,\n"
    "                         long so, nd8 ss, nd8 oshape, nd8 ishape, int nd, int axis,\n"
    "                         long n) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e >= n) return;\n"
    "    long rem = e, xoff = xo, ioff = io, soff = so, ca = 0;\n"
    "    bool inside = true;\n"
    "    for (int d = nd - 1; d >= 0; d--) {\n"
    "        long c = rem % oshape.v[d];\n"
    "        rem /= oshape.v[d];\n"
    "        xoff += c * xs.v[d];\n"
    "        if (d == axis) { ca = c; continue; }\n"
    "        if (c >= ishape.v[d]) inside = false;\n"
    "        ioff += c * is.v[d];\n"
    "        soff += c * ss.v[d];\n"
    "    }\n"
    "    T acc = x[xoff];\n"
    "    if (inside) {\n"
    "        long J = ishape.v[axis], isa = is.v[axis], ssa = ss.v[axis];\n"
    "        for (long j = 0; j < J; j++)\n"
    "            if ((long)ix[ioff + j * isa] == ca) acc += src[soff + j * ssa];\n"
    "    }\n"
    "    out[oo + e] = acc;\n"
    "}\n";

static void nd8_of(cn_gpu_nd8 *v, int nd, const int64_t *a) {
    memset(v, 0, sizeof *v);
    for (int d = 0; d < nd; d++) v->v[d] = a[d];
}

static cn_gpu_kernel index_kernel(const char *fn, cn_gpu_dev *dev, cn_dtype dt, cn_dtype it,
                              bool arith, const char *name) {
    char defs[128];
    snprintf(defs, sizeof defs, "#define T %s\n#define IT %s\n",
             arith ? cn_gpu_ctype(dt) : cn_gpu_x_bits_type(dt), it == CN_I64 ? "long" : "int");
    return cn_gpu_x_kernel(fn, dev, defs, arith ? scatter_src : index_src, name);
}

/* Run after a kernel that reports into f: the CPU's message for a bad
 * index, built by msg from the value. */
static int flag_done(cn_gpu_flag *f, int rc, int64_t *bad) {
    if (rc >= 0) rc = cn_gpu_flag_read(f, bad);
    cn_gpu_flag_free(f);
    return rc;
}

/* ---- gather and index_select ---- */

static int gather(const char *op, const cn_tensor *x, const cn_tensor *index, int axis,
                  bool select, cn_tensor *out) {
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    int nd = out->ndim;
    int64_t shape[CN_MAX_DIMS] = {1}, xs[CN_MAX_DIMS] = {0}, is[CN_MAX_DIMS] = {0};
    int64_t L = 1, xa = 0;
    if (nd == 0) {
        nd = 1;
    } else {
        for (int d = 0; d < nd; d++) {
            shape[d] = out->shape[d];
            xs[d] = d == axis ? 0 : x->strides[d];
            if (!select) is[d] = index->strides[d];
            else if (d == axis && index->ndim == 1) is[d] = index->strides[0];
        }
        L = x->shape[axis];
        xa = x->strides[axis];
    }
    cn_gpu_kernel k = index_kernel(op, dev, (cn_dtype)x->dtype, (cn_dtype)index->dtype, false,
                               "cn_gather");
    if (!k) return CN_EINVAL;
    cn_gpu_flag f;
    int rc = cn_gpu_flag_new(out, &f);
    if (rc < 0) return rc;
    cn_gpu_nd8 vxs, vis, vsh;
    nd8_of(&vxs, nd, xs);
    nd8_of(&vis, nd, is);
    nd8_of(&vsh, nd, shape);
    cn_gpu_buf om = cn_gpu_buf_of(out), xm = cn_gpu_buf_of(x), im = cn_gpu_buf_of(index);
    int64_t oo = out->offset, xo = x->offset, io = index->offset, cL = L, cxa = xa;
    int64_t n = cn_shape_numel(nd, shape);
    int cnd = nd;
    cn_gpu_arg args[] = {CN_GPU_MEM(om),  CN_GPU_VAL(oo),  CN_GPU_MEM(xm), CN_GPU_VAL(xo),
                         CN_GPU_VAL(vxs), CN_GPU_MEM(im),  CN_GPU_VAL(io), CN_GPU_VAL(vis),
                         CN_GPU_VAL(vsh), CN_GPU_VAL(cnd), CN_GPU_VAL(cL), CN_GPU_VAL(cxa),
                         CN_GPU_VAL(n),   CN_GPU_MEM(f.mem)};
    int64_t bad = 0;
    rc = flag_done(&f, cn_gpu_x_launch1(op, dev, k, 14, args, n), &bad);
    if (rc < 0) return rc;
    if (rc > 0)
        return cn_failc(CN_EINVAL, "%s: index %" PRId64 " is out of range for axis %d of size %" PRId64,
                        op, bad, axis, L);
    return CN_OK;
}

/* ---- scatter_add ---- */

static int scatter_add(const cn_tensor *x, const cn_tensor *index, const cn_tensor *src, int axis,
                       cn_tensor *out) {
    const char *op = "scatter_add";
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    int rc = cn_gpu_x_fp64(op, dev, (cn_dtype)out->dtype);
    if (rc < 0) return rc;
    int nd = out->ndim;
    int64_t oshape[CN_MAX_DIMS] = {1}, ishape[CN_MAX_DIMS] = {1}, xs[CN_MAX_DIMS] = {0},
            is[CN_MAX_DIMS] = {0}, ss[CN_MAX_DIMS] = {0};
    int64_t L = 1;
    if (nd == 0) {
        nd = 1;
        axis = 0;
    } else {
        for (int d = 0; d < nd; d++) {
            oshape[d] = out->shape[d];
            ishape[d] = index->shape[d];
            xs[d] = x->strides[d];
            is[d] = index->strides[d];
            ss[d] = src->strides[d];
        }
        L = x->shape[axis];
    }
    cn_gpu_nd8 vxs, vis, vss, vos, vish;
    nd8_of(&vxs, nd, xs);
    nd8_of(&vis, nd, is);
    nd8_of(&vss, nd, ss);
    nd8_of(&vos, nd, oshape);
    nd8_of(&vish, nd, ishape);
    cn_gpu_buf om = cn_gpu_buf_of(out), xm = cn_gpu_buf_of(x), im = cn_gpu_buf_of(index),
           sm = cn_gpu_buf_of(src);
    int64_t oo = out->offset, xo = x->offset, io = index->offset, so = src->offset, cL = L;
    int cnd = nd, cax = axis;
    int64_t ni = cn_shape_numel(nd, ishape), no = cn_shape_numel(nd, oshape);
    if (ni > 0) {
        cn_gpu_kernel kc = index_kernel(op, dev, CN_U8, (cn_dtype)index->dtype, false, "cn_check");
        if (!kc) return CN_EINVAL;
        cn_gpu_flag f;
        if ((rc = cn_gpu_flag_new(out, &f)) < 0) return rc;
        cn_gpu_arg cargs[] = {CN_GPU_MEM(im),   CN_GPU_VAL(io), CN_GPU_VAL(vis), CN_GPU_VAL(vish),
                              CN_GPU_VAL(cnd),  CN_GPU_VAL(cL), CN_GPU_VAL(ni),
                              CN_GPU_MEM(f.mem)};
        int64_t bad = 0;
        rc = flag_done(&f, cn_gpu_x_launch1(op, dev, kc, 8, cargs, ni), &bad);
        if (rc < 0) return rc;
        if (rc > 0)
            return cn_failc(CN_EINVAL,
                            "scatter_add: index %" PRId64 " is out of range for axis %d of size %" PRId64,
                            bad, axis, L);
    }
    cn_gpu_kernel k = index_kernel(op, dev, (cn_dtype)out->dtype, (cn_dtype)index->dtype, true,
                               "cn_scatter");
    if (!k) return CN_EINVAL;
    cn_gpu_arg args[] = {CN_GPU_MEM(om),   CN_GPU_VAL(oo),   CN_GPU_MEM(xm),  CN_GPU_VAL(xo),
                         CN_GPU_VAL(vxs),  CN_GPU_MEM(im),   CN_GPU_VAL(io),  CN_GPU_VAL(vis),
                         CN_GPU_MEM(sm),   CN_GPU_VAL(so),   CN_GPU_VAL(vss), CN_GPU_VAL(vos),
                         CN_GPU_VAL(vish), CN_GPU_VAL(cnd),  CN_GPU_VAL(cax), CN_GPU_VAL(no)};
    return cn_gpu_x_launch1(op, dev, k, 16, args, no);
}

/* ---- pad ---- */

static int pad(const cn_tensor *x, const int64_t *pads, int npads, int mode, double value,
               cn_tensor *out) {
    const char *op = "pad";
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    int64_t oshape[CN_MAX_DIMS], L[CN_MAX_DIMS], xs[CN_MAX_DIMS], before[CN_MAX_DIMS];
    int nd = cn_pad_geometry(x, out, pads, npads, oshape, L, xs, before);
    cn_gpu_kernel k = index_kernel(op, dev, (cn_dtype)out->dtype, CN_I64, false, "cn_pad");
    if (!k) return CN_EINVAL;
    uint64_t val = 0;
    cn_store_f64(&val, (cn_dtype)out->dtype, 0, value);
    cn_gpu_nd8 vxs, vsh, vl, vb;
    nd8_of(&vxs, nd, xs);
    nd8_of(&vsh, nd, oshape);
    nd8_of(&vl, nd, L);
    nd8_of(&vb, nd, before);
    cn_gpu_buf om = cn_gpu_buf_of(out), xm = cn_gpu_buf_of(x);
    int64_t oo = out->offset, xo = x->offset, n = cn_shape_numel(nd, oshape);
    int cnd = nd, cmode = mode;
    cn_gpu_arg args[] = {CN_GPU_MEM(om), CN_GPU_VAL(oo),  CN_GPU_MEM(xm),    CN_GPU_VAL(xo),
                         CN_GPU_VAL(vxs), CN_GPU_VAL(vsh), CN_GPU_VAL(vl),   CN_GPU_VAL(vb),
                         CN_GPU_VAL(cnd), CN_GPU_VAL(cmode), CN_GPU_VAL(val), CN_GPU_VAL(n)};
    return cn_gpu_x_launch1(op, dev, k, 12, args, n);
}

/* ---- one_hot ---- */

static int one_hot(const cn_tensor *index, cn_tensor *out) {
    const char *op = "one_hot";
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    int nd = index->ndim;
    int64_t shape[CN_MAX_DIMS] = {1}, is[CN_MAX_DIMS] = {0};
    for (int d = 0; d < nd; d++) {
        shape[d] = index->shape[d];
        is[d] = index->strides[d];
    }
    cn_gpu_kernel k = index_kernel(op, dev, CN_U8, (cn_dtype)index->dtype, false, "cn_one_hot");
    if (!k) return CN_EINVAL;
    cn_gpu_flag f;
    int rc = cn_gpu_flag_new(out, &f);
    if (rc < 0) return rc;
    cn_gpu_nd8 vis, vsh;
    nd8_of(&vis, nd, is);
    nd8_of(&vsh, nd, shape);
    cn_gpu_buf om = cn_gpu_buf_of(out), im = cn_gpu_buf_of(index);
    int64_t oo = out->offset, io = index->offset, C = out->shape[out->ndim - 1];
    int64_t n = cn_shape_numel(out->ndim, out->shape);
    int cnd = nd;
    cn_gpu_arg args[] = {CN_GPU_MEM(om),  CN_GPU_VAL(oo),  CN_GPU_MEM(im), CN_GPU_VAL(io),
                         CN_GPU_VAL(vis), CN_GPU_VAL(vsh), CN_GPU_VAL(cnd), CN_GPU_VAL(C),
                         CN_GPU_VAL(n),   CN_GPU_MEM(f.mem)};
    int64_t bad = 0;
    rc = flag_done(&f, cn_gpu_x_launch1(op, dev, k, 10, args, n), &bad);
    if (rc < 0) return rc;
    if (rc > 0)
        return cn_failc(CN_EINVAL, "one_hot: class %" PRId64 " is out of range for num_classes %" PRId64,
                        bad, (int64_t)C);
    return CN_OK;
}

/* ---- tril / triu ---- */

static int tri(const cn_tensor *x, int64_t kk, bool upper, cn_tensor *out) {
    const char *op = upper ? "triu" : "tril";
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    int nd = x->ndim;
    int64_t R = x->shape[nd - 2], C = x->shape[nd - 1];
    /* Beyond these bounds every k gives the same result. */
    int64_t k = kk < -R - 1 ? -R - 1 : kk > C + 1 ? C + 1 : kk;
    cn_gpu_kernel kn = index_kernel(op, dev, (cn_dtype)out->dtype, CN_I64, false, "cn_tri");
    if (!kn) return CN_EINVAL;
    cn_gpu_nd8 vxs, vsh;
    nd8_of(&vxs, nd, x->strides);
    nd8_of(&vsh, nd, x->shape);
    cn_gpu_buf om = cn_gpu_buf_of(out), xm = cn_gpu_buf_of(x);
    int64_t oo = out->offset, xo = x->offset, n = cn_shape_numel(nd, x->shape);
    int cnd = nd, cup = upper;
    cn_gpu_arg args[] = {CN_GPU_MEM(om),  CN_GPU_VAL(oo), CN_GPU_MEM(xm), CN_GPU_VAL(xo),
                         CN_GPU_VAL(vxs), CN_GPU_VAL(vsh), CN_GPU_VAL(cnd), CN_GPU_VAL(k),
                         CN_GPU_VAL(cup), CN_GPU_VAL(n)};
    return cn_gpu_x_launch1(op, dev, kn, 10, args, n);
}

/* ---- concat and slice_scatter: copies into views of out ---- */

static int concat(cn_tensor *const *in, int nin, int axis, cn_tensor *out) {
    int64_t at = 0;
    for (int j = 0; j < nin; j++) {
        if (cn_shape_numel(in[j]->ndim, in[j]->shape) > 0) {
            cn_tensor v = *out;
            v.shape[axis] = in[j]->shape[axis];
            v.offset = out->offset + at * out->strides[axis];
            int rc = cn_gpu_x_copy(&v, in[j]);
            if (rc < 0) return rc;
        }
        at += in[j]->shape[axis];
    }
    return CN_OK;
}

static int slice_scatter(cn_tensor *const *in, const cn_attrs *a, cn_tensor *out) {
    int rc = cn_gpu_x_copy(out, in[0]);
    if (rc < 0) return rc;
    const cn_tensor *src = in[1];
    if (cn_shape_numel(src->ndim, src->shape) == 0) return CN_OK;
    /* The slice's view (slice_view in src/ops/shape.c). */
    int ax = (int)a->i[0];
    cn_tensor v = *out;
    v.ndim = src->ndim;
    memcpy(v.shape, src->shape, sizeof v.shape);
    v.strides[ax] = out->strides[ax] * a->i[3];
    v.offset = out->offset + a->i[1] * out->strides[ax];
    return cn_gpu_x_copy(&v, src);
}

int cn_gpu_k_index(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                   cn_tensor *out) {
    switch (id) {
    case CN_OP_concat: return concat(in, nin, (int)a->i[0], out);
    case CN_OP_gather: return gather("gather", in[0], in[1], (int)a->i[0], false, out);
    case CN_OP_index_select:
        return gather("index_select", in[0], in[1], (int)a->i[0], true, out);
    case CN_OP_scatter_add: return scatter_add(in[0], in[1], in[2], (int)a->i[0], out);
    case CN_OP_pad: return pad(in[0], a->list, (int)a->nlist, (int)a->i[0], a->f[0], out);
    case CN_OP_one_hot: return one_hot(in[0], out);
    case CN_OP_tril: return tri(in[0], a->i[0], false, out);
    case CN_OP_triu: return tri(in[0], a->i[0], true, out);
    case CN_OP_slice_scatter: return slice_scatter(in, a, out);
    default:
        return cn_failc(CN_EUNSUPPORTED, "gpu kernels: op %d is not an indexing op", (int)id);
    }
}
