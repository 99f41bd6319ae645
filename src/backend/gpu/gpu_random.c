/* Random draws: random_fill (uniform, normal, integers) and the
 * bernoulli op, with Philox-4x32-10 in OpenCL C. Element i of a draw uses
 * counter + i, and every value is shaped from the counter's four words
 * exactly as the CPU does (src/ops/random.c / src/backend/cpu/random.c), so
 * a seed gives the same numbers on both: bit for bit for uniform, integer
 * and bernoulli draws and for f32/f16/bf16 normals (f32 division correctly
 * rounded and double precision available); f64 normals use the device's
 * log, sqrt and cos and may differ from glibc's in the last bit. */
#include "gpu.h"
#include "../random_bounds.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

static const char philox_src[] =
    "typedef struct { uint s0, s1, s2, s3; } cn_u4;\n"
    "CN_FN cn_u4 cn_philox(ulong key, ulong ctr) {\n"
    "  uint c0 = (uint)ctr, c1 = (uint)(ctr >> 32), c2 = 0, c3 = 0;\n"
    "  uint k0 = (uint)key, k1 = (uint)(key >> 32);\n"
    "  for (int r = 0; r < 10; r++) {\n"
    "    uint hi0 = mul_hi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;\n"
    "    uint hi1 = mul_hi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;\n"
    "    uint n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;\n"
    "    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;\n"
    "    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;\n"
    "  }\n"
    "  cn_u4 r = {c0, c1, c2, c3};\n"
    "  return r;\n"
    "}\n"
    "CN_FN ulong cn_bits53(uint hi, uint lo) { return ((ulong)hi << 21) | (lo >> 11); }\n"
    /* random.c's normal_f32, operation by operation */
    "CN_FN float cn_normal_f32(uint a, uint b) {\n"
    "  float u1 = (float)(int)(a + 1) * 0x1p-24f;\n"
    "  uint ix = as_uint(u1) - 0x3f3504f3u;\n"
    "  float e = (float)((int)((ix + 0x40000000u) >> 23) - 128);\n"
    "  float f = as_float((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;\n"
    "  float s = f / (2.0f + f), w = s * s;\n"
    "  float at = w * (1.0f / 3 + w * (1.0f / 5 + w * (1.0f / 7 + w * (1.0f / 9))));\n"
    "  float ln = e * 0x1.62e4p-1f + (e * 0x1.7f7d1cp-20f + (2 * s + 2 * s * at));\n"
    "  float y = -2.0f * ln;\n"
    "  float r = as_float(0x5f3759dfu - (as_uint(y) >> 1));\n"
    "  for (int it = 0; it < 3; it++) r = r * (1.5f - 0.5f * y * r * r);\n"
    "  float rad = y * r;\n"
    "  int k = (int)b, q = (k + (1 << 21)) >> 22;\n"
    "  float x = (float)(k - (q << 22)) * (6.2831853071795864769f * 0x1p-24f);\n"
    "  float x2 = x * x;\n"
    "  float c = 1 + x2 * (-0.5f + x2 * (1.0f / 24 + x2 * (-1.0f / 720 + x2 * (1.0f / 40320))));\n"
    "  float sn = 1.0f / 120 + x2 * (-1.0f / 5040 + x2 * (1.0f / 362880));\n"
    "  sn = x * (1 + x2 * (-1.0f / 6 + x2 * sn));\n"
    "  q &= 3;\n"
    "  float cs = q == 0 ? c : q == 1 ? -sn : q == 2 ? -c : sn;\n"
    "  return rad * cs;\n"
    "}\n";

const char *cn_gpu_philox_source(void) { return philox_src; }


typedef struct draw_params {
    double lo, span, hi, top;
    float topf;
    uint16_t toph;
    int shift;
    double scale;
    int64_t low;
    uint64_t range;
} draw_params;

int cn_gpu_random_fill(cn_tensor *out, cn_random_kind kind, double p0, double p1, uint64_t key,
                       uint64_t counter) {
    const char *fn = kind == CN_RANDOM_NORMAL ? "normal" : kind == CN_RANDOM_INT ? "randint"
                                                                                 : "uniform";
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    if (!dev) return CN_EINVAL;
    cn_dtype dt = (cn_dtype)out->dtype;
    if (cn_gpu_check_dtype(fn, dev, dt) < 0) return CN_EUNSUPPORTED;
    int64_t n = cn_shape_numel(out->ndim, out->shape);
    if (n == 0) return CN_OK;
    bool fp64 = dev->fp64;
    const char *R = fp64 ? "double" : "float";
    const char *OT = cn_gpu_ctype(dt);
    char body[2048];
    if (kind == CN_RANDOM_INT) {
        if (dt != CN_I32 && dt != CN_I64 && dt != CN_U8)
            return cn_failc(CN_EINVAL, "%s: dtype %s is not an integer type", fn,
                            cn_dtype_name(dt));
        snprintf(body, sizeof body,
                 "ulong x = ((ulong)w.s0 << 32) | w.s1;\n"
                 "    o[i] = (%s)(ulong)((ulong)low + mul_hi(x, range));\n",
                 OT);
    } else if (!cn_dtype_is_float(dt)) {
        return cn_failc(CN_EINVAL, "%s: dtype %s is not a float type", fn, cn_dtype_name(dt));
    } else if (kind == CN_RANDOM_UNIFORM) {
        switch (dt) {
        case CN_F32:
            snprintf(body, sizeof body,
                     "%s u = (%s)(int)(w.s0 >> 8) * 0x1p-24%s;\n"
                     "    float v = (float)((%s)lo + (%s)span * u);\n"
                     "    o[i] = (%s)v < (%s)hi ? v : topf;\n",
                     R, R, fp64 ? "" : "f", R, R, R, R);
            break;
        case CN_F64:
            snprintf(body, sizeof body,
                     "double u = (double)(long)cn_bits53(w.s0, w.s1) * 0x1p-53;\n"
                     "    double v = lo + span * u;\n"
                     "    o[i] = v < hi ? v : top;\n");
            break;
        default:
            snprintf(body, sizeof body,
                     "%s u = (%s)(w.s0 >> shift) * (%s)scale;\n"
                     "    ushort h = %s((float)((%s)lo + (%s)span * u));\n"
                     "    o[i] = (%s)%s(h) < (%s)hi ? h : toph;\n",
                     R, R, R, dt == CN_F16 ? "cn_f2h" : "cn_f2bf", R, R, R,
                     dt == CN_F16 ? "cn_h2f" : "cn_bf2f", R);
            break;
        }
    } else {
        switch (dt) {
        case CN_F32:
            snprintf(body, sizeof body,
                     "o[i] = (float)((%s)lo + (%s)span * (%s)cn_normal_f32(w.s0 >> 8, w.s1 >> 8));\n",
                     R, R, R);
            break;
        case CN_F64:
            snprintf(body, sizeof body,
                     "double u1 = (double)(cn_bits53(w.s0, w.s1) + 1) * 0x1p-53;\n"
                     "    double u2 = (double)cn_bits53(w.s2, w.s3) * 0x1p-53;\n"
                     "    o[i] = lo + span * (sqrt(-2.0 * log(u1)) * cos(6.283185307179586477 * u2));\n");
            break;
        default:
            snprintf(body, sizeof body,
                     "%s z = (%s)cn_normal_f32(w.s0 >> 8, w.s1 >> 8);\n"
                     "    o[i] = %s((float)((%s)lo + (%s)span * z));\n",
                     R, R, dt == CN_F16 ? "cn_f2h" : "cn_f2bf", R, R);
            break;
        }
    }
    /* Parameters, computed on the host as the CPU does. */
    draw_params P;
    memset(&P, 0, sizeof P);
    P.lo = p0;
    P.span = p1 - p0;
    P.hi = p1;
    if (kind == CN_RANDOM_UNIFORM) {
        int bits = cn_uniform_bits(dt);
        P.shift = 32 - bits;
        P.scale = ldexp(1.0, -bits);
        if (dt == CN_F64) P.top = cn_uniform_top_f64(p0, p1);
        else if (dt == CN_F32) P.topf = cn_uniform_top_f32(p0, p1);
        else P.toph = cn_uniform_top_half(p0, p1, dt);
    } else if (kind == CN_RANDOM_INT) {
        P.low = (int64_t)p0;
        P.range = (uint64_t)((int64_t)p1 - (int64_t)p0);
    }

    cn_gpu_src s = {0};
    cn_gpu_src_add(&s, "/* chutney: %s %s */\n%s%s", fn, cn_dtype_name(dt),
                   cn_gpu_prelude(), philox_src);
    cn_gpu_src_add(&s,
                   "__kernel void cn_draw(long n, __global %s *o, ulong key, ulong ctr, %s lo, %s span, "
                   "%s hi, %s top, float topf, ushort toph, int shift, %s scale, long low, ulong range) {\n"
                   "  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
                   "    cn_u4 w = cn_philox(key, ctr + (ulong)i);\n"
                   "    %s  }\n}\n",
                   OT, R, R, R, R, R, body);
    if (s.oom) {
        cn_gpu_src_free(&s);
        return cn_failc(CN_ENOMEM, "%s: out of memory generating a kernel", fn);
    }
    cn_gpu_kernel k = cn_gpu_kernel_get(dev, s.buf, NULL, "cn_draw");
    cn_gpu_src_free(&s);
    if (!k) return CN_EUNSUPPORTED;
    /* Real parameters in R. */
    unsigned char rb[5][8];
    double rv[5] = {P.lo, P.span, P.hi, P.top, P.scale};
    size_t rs = fp64 ? 8 : 4;
    for (int j = 0; j < 5; j++) {
        if (fp64) memcpy(rb[j], &rv[j], 8);
        else {
            float f = (float)rv[j];
            memcpy(rb[j], &f, 4);
        }
    }
    if (out->offset != 0 && !cn_is_contiguous(out))
        return cn_failc(CN_EINVAL, "%s: internal error: the output is not contiguous", fn);
    /* The kernel writes from the buffer's start: an output at an offset is
     * drawn into a temporary and copied. */
    cn_storage *tmp = NULL;
    cn_gpu_buf om = cn_gpu_buf_of(out);
    if (out->offset != 0) {
        tmp = cn_gpu_temp(dev, (size_t)n * cn_dsize(dt));
        if (!tmp) return CN_ENOMEM;
        om = (cn_gpu_buf)tmp->data;
    }
    int64_t nn = n;
    uint64_t ck = key, cc = counter;
    cn_gpu_arg args[14] = {CN_GPU_VAL(nn),      CN_GPU_MEM(om),      CN_GPU_VAL(ck),
                           CN_GPU_VAL(cc),      {rs, rb[0]},      {rs, rb[1]},
                           {rs, rb[2]},      {rs, rb[3]},      CN_GPU_VAL(P.topf),
                           CN_GPU_VAL(P.toph),  CN_GPU_VAL(P.shift), {rs, rb[4]},
                           CN_GPU_VAL(P.low),   CN_GPU_VAL(P.range)};
    int r = cn_gpu_launch_n(fn, dev, k, 14, args, n);
    if (r == CN_OK && tmp)
        r = cn_gpu_copy_bytes(out->storage, (size_t)out->offset * cn_dsize(dt), tmp, 0,
                              (size_t)n * cn_dsize(dt));
    if (tmp) cn_storage_release(tmp);
    return r;
}

/* ---- bernoulli ---- */

int cn_gpu_k_bernoulli(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                       cn_tensor *out) {
    (void)id;
    (void)nin;
    (void)a;
    const char *fn = "bernoulli";
    const cn_tensor *p = in[0];
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    if (!dev) return CN_EINVAL;
    cn_dtype dt = (cn_dtype)p->dtype;
    if (dt != CN_F32 && dt != CN_F64)
        return cn_failc(CN_EINVAL, "%s: p must be f32 or f64 here, got %s", fn, cn_dtype_name(dt));
    if (out->dtype != dt)
        return cn_failc(CN_EINVAL, "%s: internal error: output dtype", fn);
    if (cn_gpu_check_dtype(fn, dev, dt) < 0) return CN_EUNSUPPORTED;
    int64_t n = cn_shape_numel(out->ndim, out->shape);
    uint64_t key, ctr;
    cn_rng_reserve((uint64_t)n, &key, &ctr); /* at run time: a static graph redraws */
    if (n == 0) return CN_OK;
    cn_gpu_layout lp, lo;
    const cn_tensor *ops[2] = {out, p};
    cn_gpu_layout ls[2];
    cn_gpu_layouts(2, ops, out->ndim, out->shape, ls);
    lo = ls[0];
    lp = ls[1];
    const char *T = cn_gpu_ctype(dt);
    cn_gpu_src s = {0};
    cn_gpu_src_add(&s, "/* chutney: bernoulli %s */\n%s%s", cn_dtype_name(dt),
                   cn_gpu_prelude(), philox_src);
    cn_gpu_src_add(&s,
                   "__kernel void cn_bern(long n, __global %s *o, cn_layout lo, __global const %s *p, "
                   "cn_layout lp, ulong key, ulong ctr, __global int *bad) {\n"
                   "  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
                   "    cn_u4 w = cn_philox(key, ctr + (ulong)i);\n"
                   "    %s pj = p[CN_OFFSET(lp, i)];\n"
                   "    %s u = %s;\n"
                   "    o[CN_OFFSET(lo, i)] = u < pj ? (%s)1 : (%s)0;\n"
                   "    if (!(pj >= 0 && pj <= 1)) atomic_min(bad, (int)min(i, (long)INT_MAX));\n"
                   "  }\n}\n",
                   T, T, T, T,
                   dt == CN_F32 ? "(float)(int)(w.s0 >> 8) * 0x1p-24f"
                                : "(double)(long)cn_bits53(w.s0, w.s1) * 0x1p-53",
                   T, T);
    if (s.oom) {
        cn_gpu_src_free(&s);
        return cn_failc(CN_ENOMEM, "%s: out of memory generating a kernel", fn);
    }
    cn_gpu_kernel k = cn_gpu_kernel_get(dev, s.buf, NULL, "cn_bern");
    cn_gpu_src_free(&s);
    if (!k) return CN_EUNSUPPORTED;
    cn_storage *bad = cn_gpu_temp(dev, sizeof(int));
    if (!bad) return CN_ENOMEM;
    int none = INT32_MAX;
    int r = cn_gpu_write(bad, 0, &none, sizeof none, false);
    cn_gpu_buf om = cn_gpu_buf_of(out), pm = cn_gpu_buf_of(p), bm = (cn_gpu_buf)bad->data;
    int64_t nn = n;
    uint64_t ck = key, cc = ctr;
    cn_gpu_arg args[8] = {CN_GPU_VAL(nn), CN_GPU_MEM(om), {sizeof lo, &lo},
                          CN_GPU_MEM(pm), {sizeof lp, &lp}, CN_GPU_VAL(ck),
                          CN_GPU_VAL(cc), CN_GPU_MEM(bm)};
    if (r == CN_OK) r = cn_gpu_launch_n(fn, dev, k, 8, args, n);
    /* p outside [0, 1] is only known from the data: this waits for the
     * kernel (one int read back). */
    int b = INT32_MAX;
    if (r == CN_OK) r = cn_gpu_read(bad, 0, &b, sizeof b);
    cn_storage_release(bad);
    if (r < 0 || b == INT32_MAX) return r;
    int64_t off = p->offset, rem = b;
    for (int d = p->ndim - 1; d >= 0; d--) {
        off += rem % p->shape[d] * p->strides[d];
        rem /= p->shape[d];
    }
    double v = NAN;
    unsigned char buf[8];
    if (cn_gpu_read(p->storage, (size_t)off * cn_dsize(dt), buf, cn_dsize(dt)) == CN_OK)
        v = cn_load_f64(buf, dt, 0);
    char sb[160];
    return cn_failc(CN_EINVAL, "%s: p must be in [0, 1], got %g at flat index %" PRId64 " (shape %s)",
                    fn, v, (int64_t)b, cn_fmt_shape(sb, sizeof sb, p->ndim, p->shape));
}
