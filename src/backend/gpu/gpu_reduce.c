/* Reductions: sum mean prod max min var std logsumexp norm argmax
 * argmin, sum_to (attributes as src/ops/reduce.c: list = the axes, i[0] keepdim,
 * f[0] correction or p; argmax/argmin: i[1] axis, i[2] flatten).
 *
 * Plan. x's axes are split into kept and reduced ones, each group collapsed
 * (size-1 axes dropped, neighbours merged where the strides allow; the
 * row-major order of each group is kept, so argmax's index is the flat
 * index over the reduced axes). Output o folds the reduced elements j of
 * its group in P lanes: lane l takes j = l, l + P, l + 2P, ... in order,
 * then the P lane states are merged in lane order by a second kernel (or
 * P = 1 and the one kernel stores). P depends on the shapes only, never on
 * the device or the launch, so each output's reduction order is fixed and
 * the bits do not depend on the launch configuration.
 *
 * Accuracy. Float inputs accumulate in double where the device has fp64
 * (else float); sums are compensated (Kahan) within a lane; variance is
 * Welford within a lane and Chan's merge across lanes; logsumexp keeps a
 * running max. Integer sums and products wrap like the CPU's (i64). */
#include "gpu.h"

#include <math.h>
#include <stdio.h>

enum { RK_SUM, RK_MEAN, RK_PROD, RK_MAX, RK_MIN, RK_VAR, RK_STD, RK_LSE, RK_NORM, RK_ARGMAX,
       RK_ARGMIN };

static int kind_of(cn_op_id id) {
    switch (id) {
    case CN_OP_sum:
    case CN_OP_sum_to: return RK_SUM;
    case CN_OP_mean: return RK_MEAN;
    case CN_OP_prod: return RK_PROD;
    case CN_OP_max: return RK_MAX;
    case CN_OP_min: return RK_MIN;
    case CN_OP_var: return RK_VAR;
    case CN_OP_std: return RK_STD;
    case CN_OP_logsumexp: return RK_LSE;
    case CN_OP_norm: return RK_NORM;
    case CN_OP_argmax: return RK_ARGMAX;
    case CN_OP_argmin: return RK_ARGMIN;
    default: return -1;
    }
}

/* Collapse the axes of x listed in ax (ascending, n of them) into (shape,
 * strides); returns the rank. */
static int collapse(const cn_tensor *x, const int *ax, int n, int64_t *sh, int64_t *st) {
    int nd = 0;
    for (int k = 0; k < n; k++) {
        int d = ax[k];
        if (x->shape[d] == 1) continue;
        if (nd > 0 && st[nd - 1] == x->strides[d] * x->shape[d]) {
            sh[nd - 1] *= x->shape[d];
            st[nd - 1] = x->strides[d];
        } else {
            sh[nd] = x->shape[d];
            st[nd] = x->strides[d];
            nd++;
        }
    }
    return nd;
}

static void emit_offset(cn_gpu_src *s, const char *var, const char *idx, const char *l, int nd) {
    if (nd == 0) {
        cn_gpu_src_add(s, "    long %s = %s.offset;\n", var, l);
        return;
    }
    if (nd == 1) {
        cn_gpu_src_add(s, "    long %s = %s.offset + (%s) * %s.strides[0];\n", var, l, idx, l);
        return;
    }
    cn_gpu_src_add(s, "    long %s = %s.offset;\n    { long r_ = %s, q_;\n", var, l, idx);
    for (int d = nd - 1; d >= 0; d--) {
        if (d > 0) cn_gpu_src_add(s, "      q_ = r_ %% %s.shape[%d]; r_ /= %s.shape[%d];\n", l, d, l, d);
        else cn_gpu_src_add(s, "      q_ = r_;\n");
        cn_gpu_src_add(s, "      %s += q_ * %s.strides[%d];\n", var, l, d);
    }
    cn_gpu_src_add(s, "    }\n");
}

int cn_gpu_k_reduce(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out) {
    (void)nin;
    const char *fn = cn_op_names[id];
    int kind = kind_of(id);
    if (kind < 0) return cn_failc(CN_EINVAL, "%s: internal error: not a reduction", fn);
    const cn_tensor *x = in[0];
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    if (!dev) return CN_EINVAL;
    cn_dtype X = (cn_dtype)x->dtype, O = (cn_dtype)out->dtype;
    if (cn_gpu_check_dtype(fn, dev, X) < 0 || cn_gpu_check_dtype(fn, dev, O) < 0)
        return CN_EUNSUPPORTED;

    /* The reduced axes. */
    bool red[CN_MAX_DIMS] = {false};
    bool arg = kind == RK_ARGMAX || kind == RK_ARGMIN;
    if (arg) {
        if (a->i[2] || x->ndim == 0) {
            for (int d = 0; d < x->ndim; d++) red[d] = true;
        } else {
            int ax = (int)a->i[1];
            if (ax < 0) ax += x->ndim;
            if (ax < 0 || ax >= x->ndim)
                return cn_failc(CN_EINVAL, "%s: axis %d is out of range for rank %d", fn,
                                (int)a->i[1], x->ndim);
            red[ax] = true;
        }
    } else if (a->nlist == 0 && id != CN_OP_sum_to) { /* sum_to: none is a copy */
        for (int d = 0; d < x->ndim; d++) red[d] = true;
    } else {
        for (int k = 0; k < a->nlist; k++) {
            int64_t ax = a->list[k];
            if (ax < 0) ax += x->ndim;
            if (ax < 0 || ax >= x->ndim)
                return cn_failc(CN_EINVAL, "%s: axis %d is out of range for rank %d", fn,
                                (int)a->list[k], x->ndim);
            red[ax] = true;
        }
    }
    int kax[CN_MAX_DIMS], rax[CN_MAX_DIMS], nk = 0, nr = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (red[d]) rax[nr++] = d;
        else kax[nk++] = d;
    }
    cn_gpu_layout lk, lr;
    memset(&lk, 0, sizeof lk);
    memset(&lr, 0, sizeof lr);
    int64_t sh[CN_MAX_DIMS], st[CN_MAX_DIMS];
    int ndk = collapse(x, kax, nk, sh, st);
    int64_t nout = 1, len = 1;
    lk.offset = x->offset;
    lk.ndim = ndk;
    for (int d = 0; d < ndk; d++) {
        lk.shape[d] = sh[d];
        lk.strides[d] = st[d];
        nout *= sh[d];
    }
    int ndr = collapse(x, rax, nr, sh, st);
    lr.ndim = ndr;
    for (int d = 0; d < ndr; d++) {
        lr.shape[d] = sh[d];
        lr.strides[d] = st[d];
    }
    for (int d = 0; d < nr; d++) len *= x->shape[rax[d]];
    if (nout == 0) return CN_OK;
    if (len == 0 && (kind == RK_MAX || kind == RK_MIN || arg))
        return cn_failc(CN_EINVAL, "%s: the %s of no elements is undefined", fn, fn);

    /* Lanes per output: a function of the shapes only. */
    int64_t P = 1;
    if (len >= 8192) {
        P = len / 2048;
        int64_t cap = ((int64_t)1 << 20) / nout;
        if (P > cap) P = cap;
        if (P > 1024) P = 1024;
        if (P < 1) P = 1;
    }

    /* Types: the accumulator A, and whether the fold is integer. */
    bool ints = !cn_dtype_is_float(X) &&
                (kind == RK_SUM || kind == RK_PROD || kind == RK_MAX || kind == RK_MIN || arg);
    bool dbl = X == CN_F64 || O == CN_F64 || dev->fp64;
    const char *A = dbl ? "double" : "float";
    const char *F = dbl ? "" : "f";
    char load[160];
    if (ints)
        snprintf(load, sizeof load, X == CN_BOOL ? "((long)(x[o] != 0))" : "((long)x[o])");
    else if (X == CN_F16)
        snprintf(load, sizeof load, "((%s)cn_h2f(x[o]))", A);
    else if (X == CN_BF16)
        snprintf(load, sizeof load, "((%s)cn_bf2f(x[o]))", A);
    else
        snprintf(load, sizeof load, "((%s)x[o])", A);
    double param = a->f[0];

    cn_gpu_src s = {0};
    cn_gpu_src_add(&s, "/* chutney: %s %s -> %s */\n%s", fn, cn_dtype_name(X),
                   cn_dtype_name(O), cn_gpu_prelude());
    cn_gpu_src_add(&s, "typedef %s A;\ntypedef struct { A f, g; long i, n; } st_t;\n", A);
    cn_gpu_src_add(&s,
                   "CN_FN A nmax(A a, A b) { return (b > a || b != b) ? b : a; }\n"
                   "CN_FN A nmin(A a, A b) { return (b < a || b != b) ? b : a; }\n");
    /* init */
    const char *init = "";
    switch (kind) {
    case RK_PROD: init = "s->f = 1; s->i = 1;"; break;
    case RK_MAX: init = "s->f = -INFINITY; s->i = LONG_MIN;"; break;
    case RK_MIN: init = "s->f = INFINITY; s->i = LONG_MAX;"; break;
    case RK_LSE: init = "s->f = -INFINITY;"; break;
    case RK_ARGMAX:
    case RK_ARGMIN: init = "s->n = -1;"; break;
    default: break;
    }
    cn_gpu_src_add(&s, "CN_FN void st_init(st_t *s) { s->f = 0; s->g = 0; s->i = 0; s->n = 0; %s }\n",
                   init);
    /* argmax/argmin comparisons */
    bool amax = kind == RK_ARGMAX;
    if (ints) {
        cn_gpu_src_add(&s, "CN_FN bool better(long b, long a) { return b %s a; }\n",
                       amax ? ">" : "<");
    } else {
        cn_gpu_src_add(&s,
                       "CN_FN bool better(A b, A a) { if (a != a) return false; if (b != b) return true; "
                       "return b %s a; }\n",
                       amax ? ">" : "<");
    }
    cn_gpu_src_add(&s,
                   "CN_FN void lse_merge(st_t *a, A m, A sm) {\n"
                   "  A mm = nmax(a->f, m);\n"
                   "  if (!isfinite(mm)) { a->f = mm; a->g = mm > 0 ? 1 : 0; return; }\n"
                   "  a->g = a->g * exp(a->f - mm) + sm * exp(m - mm);\n"
                   "  a->f = mm;\n"
                   "}\n"
                   "CN_FN void var_merge(st_t *a, A mean, A m2, long n) {\n"
                   "  if (n == 0) return;\n"
                   "  if (a->n == 0) { a->f = mean; a->g = m2; a->n = n; return; }\n"
                   "  A na = (A)a->n, nb = (A)n, nt = na + nb, d = mean - a->f;\n"
                   "  a->f += d * (nb / nt);\n"
                   "  a->g += m2 + d * d * (na * nb / nt);\n"
                   "  a->n += n;\n"
                   "}\n");
    /* the element step: v (A or long) at reduced index j; p = the parameter */
    const char *ety = ints ? "long" : "A";
    cn_gpu_src_add(&s, "CN_FN void st_add(st_t *s, %s v, long j, A p) {\n", ety);
    switch (kind) {
    case RK_SUM:
    case RK_MEAN:
        if (ints) cn_gpu_src_add(&s, "  s->i = (long)((ulong)s->i + (ulong)v);\n");
        else
            cn_gpu_src_add(&s, "  A y = v - s->g, t = s->f + y;\n"
                               "  s->g = isfinite(t) ? (t - s->f) - y : 0;\n  s->f = t;\n");
        break;
    case RK_PROD:
        if (ints) cn_gpu_src_add(&s, "  s->i = (long)((ulong)s->i * (ulong)v);\n");
        else cn_gpu_src_add(&s, "  s->f *= v;\n");
        break;
    case RK_MAX:
        cn_gpu_src_add(&s, ints ? "  s->i = v > s->i ? v : s->i;\n" : "  s->f = nmax(s->f, v);\n");
        break;
    case RK_MIN:
        cn_gpu_src_add(&s, ints ? "  s->i = v < s->i ? v : s->i;\n" : "  s->f = nmin(s->f, v);\n");
        break;
    case RK_VAR:
    case RK_STD:
        cn_gpu_src_add(&s, "  s->n++;\n  A d = v - s->f;\n  s->f += d / (A)s->n;\n"
                           "  s->g += d * (v - s->f);\n");
        break;
    case RK_LSE: cn_gpu_src_add(&s, "  lse_merge(s, v, 1);\n"); break;
    case RK_NORM:
        if (isinf(param)) cn_gpu_src_add(&s, "  s->f = nmax(s->f, fabs(v));\n");
        else if (param == 1) cn_gpu_src_add(&s, "  s->f += fabs(v);\n");
        else if (param == 2) cn_gpu_src_add(&s, "  s->f += v * v;\n");
        else cn_gpu_src_add(&s, "  s->f += pow(fabs(v), p);\n");
        break;
    case RK_ARGMAX:
    case RK_ARGMIN:
        if (ints)
            cn_gpu_src_add(&s, "  if (s->n < 0 || better(v, s->i)) { s->i = v; s->n = j; }\n");
        else
            cn_gpu_src_add(&s, "  if (s->n < 0 || better(v, s->f)) { s->f = v; s->n = j; }\n");
        break;
    default: break;
    }
    cn_gpu_src_add(&s, "}\n");
    /* merge b into a (b's lane comes after a's) */
    cn_gpu_src_add(&s, "CN_FN void st_merge(st_t *a, st_t b) {\n");
    switch (kind) {
    case RK_SUM:
    case RK_MEAN:
        cn_gpu_src_add(&s, ints ? "  a->i = (long)((ulong)a->i + (ulong)b.i);\n"
                                : "  a->f = (a->f - a->g) + (b.f - b.g);\n  a->g = 0;\n");
        break;
    case RK_PROD:
        cn_gpu_src_add(&s, ints ? "  a->i = (long)((ulong)a->i * (ulong)b.i);\n"
                                : "  a->f *= b.f;\n");
        break;
    case RK_MAX:
        cn_gpu_src_add(&s, ints ? "  a->i = b.i > a->i ? b.i : a->i;\n" : "  a->f = nmax(a->f, b.f);\n");
        break;
    case RK_MIN:
        cn_gpu_src_add(&s, ints ? "  a->i = b.i < a->i ? b.i : a->i;\n" : "  a->f = nmin(a->f, b.f);\n");
        break;
    case RK_VAR:
    case RK_STD: cn_gpu_src_add(&s, "  var_merge(a, b.f, b.g, b.n);\n"); break;
    case RK_LSE: cn_gpu_src_add(&s, "  lse_merge(a, b.f, b.g);\n"); break;
    case RK_NORM:
        cn_gpu_src_add(&s, isinf(param) ? "  a->f = nmax(a->f, b.f);\n" : "  a->f += b.f;\n");
        break;
    case RK_ARGMAX:
    case RK_ARGMIN:
        if (ints)
            cn_gpu_src_add(&s, "  if (b.n >= 0 && (a->n < 0 || better(b.i, a->i) || "
                               "(b.i == a->i && b.n < a->n))) *a = b;\n");
        else
            cn_gpu_src_add(&s, "  if (b.n >= 0 && (a->n < 0 || better(b.f, a->f) || "
                               "((b.f == a->f || (b.f != b.f && a->f != a->f)) && b.n < a->n))) *a = b;\n");
        break;
    default: break;
    }
    cn_gpu_src_add(&s, "}\n");
    /* the result of a state, as a value of O */
    const char *OT = cn_gpu_ctype(O);
    cn_gpu_src_add(&s, "CN_FN void st_store(__global %s *o, st_t s, long len, A p) {\n", OT);
    bool int_out = false;
    switch (kind) {
    case RK_SUM: cn_gpu_src_add(&s, "  A v = s.f - s.g;\n"); int_out = ints; break;
    case RK_PROD:
    case RK_MAX:
    case RK_MIN: cn_gpu_src_add(&s, "  A v = s.f;\n"); int_out = ints; break;
    case RK_MEAN: cn_gpu_src_add(&s, "  A v = (s.f - s.g) / (A)len;\n"); break;
    case RK_VAR:
    case RK_STD:
        cn_gpu_src_add(&s, "  A dof = (A)len - p;\n  A v = s.g / (dof > 0 ? dof : (A)0);\n%s",
                       kind == RK_STD ? "  v = sqrt(v);\n" : "");
        break;
    case RK_LSE: cn_gpu_src_add(&s, "  A v = isfinite(s.f) ? s.f + log(s.g) : s.f;\n"); break;
    case RK_NORM:
        if (param == 1 || isinf(param)) cn_gpu_src_add(&s, "  A v = s.f;\n");
        else if (param == 2) cn_gpu_src_add(&s, "  A v = sqrt(s.f);\n");
        else cn_gpu_src_add(&s, "  A v = pow(s.f, 1.0%s / p);\n", F);
        break;
    default: cn_gpu_src_add(&s, "  A v = 0;\n"); int_out = true; break;
    }
    if (int_out) {
        const char *iv = arg ? "s.n" : "s.i";
        char e[256];
        cn_gpu_cast_expr(e, sizeof e, CN_I64, O, iv, dev->fp64);
        cn_gpu_src_add(&s, "  (void)v;\n  *o = %s;\n", e);
    } else {
        char e[256];
        cn_gpu_cast_expr(e, sizeof e, dbl ? CN_F64 : CN_F32, O, "v", dev->fp64);
        cn_gpu_src_add(&s, "  *o = %s;\n", e);
    }
    cn_gpu_src_add(&s, "}\n");
    /* the kernels */
    const char *XT = cn_gpu_ctype(X);
    for (int direct = 0; direct < 2; direct++) {
        cn_gpu_src_add(&s,
                       "__kernel void %s(long nw, long P, long len, A p, __global const %s *x, "
                       "cn_layout lk, cn_layout lr, __global %s *out, __global st_t *part) {\n"
                       "  for (long w = get_global_id(0); w < nw; w += get_global_size(0)) {\n"
                       "    long oi = w / P, lane = w - oi * P;\n",
                       direct ? "cn_red_direct" : "cn_red_part", XT, OT);
        emit_offset(&s, "base", "oi", "lk", ndk);
        cn_gpu_src_add(&s, "    st_t st; st_init(&st);\n"
                           "    for (long j = lane; j < len; j += P) {\n");
        if (ndr == 0) cn_gpu_src_add(&s, "    long o = base;\n");
        else if (ndr == 1) cn_gpu_src_add(&s, "    long o = base + j * lr.strides[0];\n");
        else {
            emit_offset(&s, "ro", "j", "lr", ndr);
            cn_gpu_src_add(&s, "    long o = base + ro;\n");
        }
        cn_gpu_src_add(&s, "      st_add(&st, %s, j, p);\n    }\n", load);
        if (direct) cn_gpu_src_add(&s, "    st_store(out + oi, st, len, p);\n  }\n}\n");
        else cn_gpu_src_add(&s, "    part[w] = st;\n  }\n}\n");
    }
    cn_gpu_src_add(&s,
                   "__kernel void cn_red_final(long nout, long P, long len, A p, __global %s *out, "
                   "__global const st_t *part) {\n"
                   "  for (long oi = get_global_id(0); oi < nout; oi += get_global_size(0)) {\n"
                   "    st_t st = part[oi * P];\n"
                   "    for (long l = 1; l < P; l++) st_merge(&st, part[oi * P + l]);\n"
                   "    st_store(out + oi, st, len, p);\n  }\n}\n",
                   OT);
    if (s.oom) {
        cn_gpu_src_free(&s);
        return cn_failc(CN_ENOMEM, "%s: out of memory generating a kernel", fn);
    }
    cn_gpu_kernel k1 = cn_gpu_kernel_get(dev, s.buf, NULL, P == 1 ? "cn_red_direct" : "cn_red_part");
    cn_gpu_kernel k2 = P == 1 ? NULL : cn_gpu_kernel_get(dev, s.buf, NULL, "cn_red_final");
    cn_gpu_src_free(&s);
    if (!k1 || (P > 1 && !k2)) return CN_EUNSUPPORTED;

    cn_storage *part = NULL;
    cn_gpu_buf xm = cn_gpu_buf_of(x), om = cn_gpu_buf_of(out), pm;
    if (P > 1) {
        part = cn_gpu_temp(dev, (size_t)(nout * P) * 32);
        if (!part) return CN_ENOMEM;
        pm = (cn_gpu_buf)part->data;
    } else {
        pm = om; /* unused */
    }
    unsigned char pbytes[8];
    size_t psz = dbl ? 8 : 4;
    if (dbl) memcpy(pbytes, &param, 8);
    else {
        float pf = (float)param;
        memcpy(pbytes, &pf, 4);
    }
    int64_t nw = nout * P, cP = P, clen = len, cnout = nout;
    /* The kernels write out from element 0 of its buffer: an output at an
     * offset is written through a temporary and copied there. */
    cn_storage *tmp_out = NULL;
    if (out->offset != 0) {
        tmp_out = cn_gpu_temp(dev, (size_t)nout * cn_dsize(O));
        if (!tmp_out) {
            if (part) cn_storage_release(part);
            return CN_ENOMEM;
        }
        om = (cn_gpu_buf)tmp_out->data;
    }
    cn_gpu_arg args1[9] = {CN_GPU_VAL(nw), CN_GPU_VAL(cP), CN_GPU_VAL(clen),
                           {psz, pbytes}, CN_GPU_MEM(xm), {sizeof lk, &lk},
                           {sizeof lr, &lr}, CN_GPU_MEM(om), CN_GPU_MEM(pm)};
    int r = cn_gpu_launch_n(fn, dev, k1, 9, args1, nw);
    if (r == CN_OK && P > 1) {
        cn_gpu_arg args2[6] = {CN_GPU_VAL(cnout), CN_GPU_VAL(cP), CN_GPU_VAL(clen),
                               {psz, pbytes}, CN_GPU_MEM(om), CN_GPU_MEM(pm)};
        r = cn_gpu_launch_n(fn, dev, k2, 6, args2, nout);
    }
    if (r == CN_OK && tmp_out)
        r = cn_gpu_copy_bytes(out->storage, (size_t)out->offset * cn_dsize(O), tmp_out, 0,
                              (size_t)nout * cn_dsize(O));
    if (tmp_out) cn_storage_release(tmp_out);
    if (part) cn_storage_release(part);
    return r;
}
