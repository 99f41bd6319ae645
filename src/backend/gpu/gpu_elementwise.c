/* Elementwise kernels: copies and casts between any strides and
 * dtypes, fills, the unary and binary ops and where. Each kernel's OpenCL C
 * source is generated from a template (the dtypes, the op's one-element
 * expression, the collapsed rank of the operands) and compiled once per
 * distinct source through cn_gpu_kernel, as Theano generated C.
 *
 * Every operand, the output included, is addressed through its layout,
 * collapsed jointly (cn_gpu_layouts): contiguous and simply broadcast
 * operands come out as rank 1 with unit or zero strides, where an element's
 * offset is one multiply-add. Formulas follow the CPU kernels
 * (src/backend/cpu/unary.c, binary.c, elem_math.h); transcendental functions
 * are OpenCL's builtins (a few ulp from the CPU's vmath.h in f32). */
#include "gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- generated source ---- */

void cn_gpu_src_add(cn_gpu_src *s, const char *fmt, ...) {
    if (s->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = s->cap - s->len;
        int n = vsnprintf(s->buf ? s->buf + s->len : NULL, s->buf ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            s->oom = true;
            return;
        }
        if (s->buf && (size_t)n < room) {
            s->len += (size_t)n;
            return;
        }
        size_t nc = s->cap ? s->cap * 2 : 4096;
        while (nc < s->len + (size_t)n + 1) nc *= 2;
        char *nb = realloc(s->buf, nc);
        if (!nb) {
            s->oom = true;
            return;
        }
        s->buf = nb;
        s->cap = nc;
    }
}

void cn_gpu_src_free(cn_gpu_src *s) {
    free(s->buf);
    memset(s, 0, sizeof *s);
}

const char *cn_gpu_literal(char *buf, double v, cn_dtype T) {
    const char *ty = T == CN_F64 ? "double" : "float";
    if (v != v)
        snprintf(buf, 48, "((%s)NAN)", ty);
    else if (isinf(v))
        snprintf(buf, 48, "((%s)(%sINFINITY))", ty, v < 0 ? "-" : "");
    else if (T == CN_F64)
        snprintf(buf, 48, "(%a)", v);
    else if (T == CN_F32)
        snprintf(buf, 48, "(%af)", (double)(float)v);
    else
        snprintf(buf, 48, "((%s)%lld)", cn_gpu_ctype(T), (long long)v);
    return buf;
}

/* Math helpers for float ($T float, $F f, $N f) and double ($N d). */
static const char math_template[] =
    "CN_FN $T cn_sigmoid_$N($T v) { $T e = exp(-fabs(v)); return (v >= 0 ? 1.0$F : e) / (1.0$F + e); }\n"
    "CN_FN $T cn_silu_$N($T v) { return v == -INFINITY ? -0.0$F : v * cn_sigmoid_$N(v); }\n"
    "CN_FN $T cn_gelu_$N($T v) { return v == -INFINITY ? -0.0$F : 0.5$F * v * erfc(v * -0.70710678118654752440$F); }\n"
    "CN_FN $T cn_gelut_$N($T v) {\n"
    "  $T z = 1.5957691216057307117$F * (v + 0.044715$F * (v * v * v));\n"
    "  return v == -INFINITY ? -0.0$F : v * cn_sigmoid_$N(z);\n"
    "}\n"
    "CN_FN $T cn_softplus_$N($T v, $T beta, $T th) {\n"
    "  $T z = v * beta;\n"
    "  if (z > th) return v;\n"
    "  return ((z > 0 ? z : 0.0$F) + log1p(exp(-fabs(z)))) / beta;\n"
    "}\n"
    "CN_FN $T cn_elu_$N($T v, $T a) { return v > 0 ? v : a * expm1(v); }\n"
    "CN_FN $T cn_clamp_$N($T v, $T lo, $T hi) { $T y = v < lo ? lo : v; return y > hi ? hi : y; }\n"
    "CN_FN $T cn_sign_$N($T v) { return v != v ? v : ($T)((v > 0) - (v < 0)); }\n"
    "CN_FN $T cn_relu_$N($T v) { return v < 0 ? 0.0$F : v; }\n"
    "CN_FN $T cn_leaky_$N($T v, $T s) { return v > 0 ? v : v * s; }\n"
    "CN_FN $T cn_fmax_$N($T a, $T b) { return (b > a || b != b) ? b : a; }\n"
    "CN_FN $T cn_fmin_$N($T a, $T b) { return (b < a || b != b) ? b : a; }\n"
    "CN_FN $T cn_pow_$N($T a, $T b) {\n"
    "  if (b == 2) return a * a;\n"
    "  if (b == 1) return a;\n"
    "  if (b == 0) return 1.0$F;\n"
    "  if (b == -1) return 1.0$F / a;\n"
    "  if (b == 0.5$F) return a == -INFINITY ? INFINITY : sqrt(a) + 0.0$F;\n"
    "  return pow(a, b);\n"
    "}\n";

static void add_math(cn_gpu_src *s, bool f64) {
    const char *T = f64 ? "double" : "float", *F = f64 ? "" : "f", *N = f64 ? "d" : "f";
    for (const char *p = math_template; *p; p++) {
        if (p[0] == '$' && p[1]) {
            const char *r = p[1] == 'T' ? T : p[1] == 'F' ? F : N;
            cn_gpu_src_add(s, "%s", r);
            p++;
        } else {
            cn_gpu_src_add(s, "%c", *p);
        }
    }
}

/* Integer helpers (always included; cheap to compile). */
static const char int_helpers[] =
    "#ifdef CN_FP64\n"
    "typedef double cn_real;\n"
    "#else\n"
    "typedef float cn_real;\n"
    "#endif\n"
    "CN_FN long cn_tsat(cn_real x, long lo, long hi) {\n"
    "  if (x != x) return 0;\n"
    "  if (x <= (cn_real)lo) return lo;\n"
    "  if (x >= (cn_real)hi) return hi;\n"
    "  return (long)x;\n"
    "}\n"
    "CN_FN long cn_clampi(long v, long lo, long hi) { long y = v < lo ? lo : v; return y > hi ? hi : y; }\n"
    "CN_FN ulong cn_ipow(ulong x, ulong e) {\n"
    "  ulong r = 1;\n"
    "  while (e) { if (e & 1) r *= x; x *= x; e >>= 1; }\n"
    "  return r;\n"
    "}\n";

/* The helpers' text, made once: every launch of an elementwise or fused
 * kernel generates its source to look the program up, and expanding the
 * template character by character there cost most of an eager op's time on
 * a GPU (84 us of a 1-element add on an H200). */
static cn_gpu_src ew_helpers;
static pthread_once_t ew_helpers_once = PTHREAD_ONCE_INIT;

static void make_ew_helpers(void) {
    add_math(&ew_helpers, false);
    cn_gpu_src_add(&ew_helpers, "#ifdef CN_FP64\n");
    add_math(&ew_helpers, true);
    cn_gpu_src_add(&ew_helpers, "#endif\n%s", int_helpers);
}

/* The helpers every elementwise program may call. */
void cn_gpu_add_ew_helpers(cn_gpu_src *s) {
    pthread_once(&ew_helpers_once, make_ew_helpers);
    if (ew_helpers.oom || !ew_helpers.buf) {
        s->oom = true;
        return;
    }
    cn_gpu_src_add(s, "%s", ew_helpers.buf);
}

/* ---- expressions ---- */

static const char *fsuf(cn_dtype T) { return T == CN_F64 ? "d" : "f"; }

const char *cn_gpu_unary_expr(char *b, size_t n, cn_op_id id, const cn_attrs *a, cn_dtype T,
                              const char *x, const char *p0, const char *p1) {
    bool fl = T == CN_F32 || T == CN_F64;
    const char *S = fsuf(T), *ty = cn_gpu_ctype(T);
    if (fl) {
        switch (id) {
        case CN_OP_neg: snprintf(b, n, "(-(%s))", x); return b;
        case CN_OP_abs: snprintf(b, n, "fabs(%s)", x); return b;
        case CN_OP_sign: snprintf(b, n, "cn_sign_%s(%s)", S, x); return b;
        case CN_OP_exp: snprintf(b, n, "exp(%s)", x); return b;
        case CN_OP_log: snprintf(b, n, "log(%s)", x); return b;
        case CN_OP_log1p: snprintf(b, n, "log1p(%s)", x); return b;
        case CN_OP_expm1: snprintf(b, n, "expm1(%s)", x); return b;
        case CN_OP_sqrt: snprintf(b, n, "sqrt(%s)", x); return b;
        case CN_OP_rsqrt:
            if (T == CN_F32) snprintf(b, n, "rsqrt(%s)", x);
            else snprintf(b, n, "(1.0 / sqrt(%s))", x);
            return b;
        case CN_OP_square: snprintf(b, n, "((%s) * (%s))", x, x); return b;
        case CN_OP_reciprocal: snprintf(b, n, "((%s)1 / (%s))", ty, x); return b;
        case CN_OP_sin: snprintf(b, n, "sin(%s)", x); return b;
        case CN_OP_cos: snprintf(b, n, "cos(%s)", x); return b;
        case CN_OP_tanh: snprintf(b, n, "tanh(%s)", x); return b;
        case CN_OP_sigmoid: snprintf(b, n, "cn_sigmoid_%s(%s)", S, x); return b;
        case CN_OP_relu: snprintf(b, n, "cn_relu_%s(%s)", S, x); return b;
        case CN_OP_leaky_relu: snprintf(b, n, "cn_leaky_%s(%s, %s)", S, x, p0); return b;
        case CN_OP_elu: snprintf(b, n, "cn_elu_%s(%s, %s)", S, x, p0); return b;
        case CN_OP_gelu:
            snprintf(b, n, "cn_%s_%s(%s)", a && a->i[0] ? "gelut" : "gelu", S, x);
            return b;
        case CN_OP_silu: snprintf(b, n, "cn_silu_%s(%s)", S, x); return b;
        case CN_OP_softplus: snprintf(b, n, "cn_softplus_%s(%s, %s, %s)", S, x, p0, p1); return b;
        case CN_OP_erf: snprintf(b, n, "erf(%s)", x); return b;
        case CN_OP_floor: snprintf(b, n, "floor(%s)", x); return b;
        case CN_OP_ceil: snprintf(b, n, "ceil(%s)", x); return b;
        case CN_OP_round: snprintf(b, n, "rint(%s)", x); return b;
        case CN_OP_clamp: snprintf(b, n, "cn_clamp_%s(%s, %s, %s)", S, x, p0, p1); return b;
        default: return NULL;
        }
    }
    const char *ut = T == CN_I32 ? "uint" : T == CN_I64 ? "ulong" : "uint";
    bool sgn = T == CN_I32 || T == CN_I64;
    if (T != CN_I32 && T != CN_I64 && T != CN_U8) return NULL;
    switch (id) {
    case CN_OP_neg: snprintf(b, n, "((%s)((%s)0 - (%s)(%s)))", ty, ut, ut, x); return b;
    case CN_OP_sign:
        if (sgn) snprintf(b, n, "((%s)(((%s) > 0) - ((%s) < 0)))", ty, x, x);
        else snprintf(b, n, "((%s)((%s) > 0))", ty, x);
        return b;
    case CN_OP_square: snprintf(b, n, "((%s)((%s)(%s) * (%s)(%s)))", ty, ut, x, ut, x); return b;
    case CN_OP_clamp: snprintf(b, n, "((%s)cn_clampi((long)(%s), %s, %s))", ty, x, p0, p1); return b;
    /* the identities on integers (u8's abs, relu, leaky_relu; floor, ceil,
     * round) are plain copies and never get here */
    default: break;
    }
    if (!sgn) return NULL;
    switch (id) {
    case CN_OP_abs:
        snprintf(b, n, "((%s) < 0 ? (%s)((%s)0 - (%s)(%s)) : (%s))", x, ty, ut, ut, x, x);
        return b;
    case CN_OP_relu: snprintf(b, n, "((%s) < 0 ? (%s)0 : (%s))", x, ty, x); return b;
    case CN_OP_leaky_relu:
        snprintf(b, n, "((%s) > 0 ? (%s) : (%s)cn_tsat((cn_real)(%s) * %s, %s, %s))", x, x, ty, x,
                 p0, T == CN_I32 ? "INT_MIN" : "LONG_MIN", T == CN_I32 ? "INT_MAX" : "LONG_MAX");
        return b;
    default: return NULL;
    }
}

const char *cn_gpu_binary_expr(char *b, size_t n, cn_op_id id, cn_dtype T, const char *x,
                               const char *y) {
    const char *cmp = NULL;
    switch (id) {
    case CN_OP_eq: cmp = "=="; break;
    case CN_OP_ne: cmp = "!="; break;
    case CN_OP_lt: cmp = "<"; break;
    case CN_OP_le: cmp = "<="; break;
    case CN_OP_gt: cmp = ">"; break;
    case CN_OP_ge: cmp = ">="; break;
    default: break;
    }
    if (cmp) {
        if (T == CN_BOOL)
            snprintf(b, n, "((uchar)(((%s) != 0) %s ((%s) != 0)))", x, cmp, y);
        else
            snprintf(b, n, "((uchar)((%s) %s (%s)))", x, cmp, y);
        return b;
    }
    const char *ty = cn_gpu_ctype(T);
    if (T == CN_F32 || T == CN_F64) {
        const char *S = fsuf(T);
        switch (id) {
        case CN_OP_add: snprintf(b, n, "((%s) + (%s))", x, y); return b;
        case CN_OP_sub: snprintf(b, n, "((%s) - (%s))", x, y); return b;
        case CN_OP_mul: snprintf(b, n, "((%s) * (%s))", x, y); return b;
        case CN_OP_div: snprintf(b, n, "((%s) / (%s))", x, y); return b;
        case CN_OP_pow: snprintf(b, n, "cn_pow_%s(%s, %s)", S, x, y); return b;
        case CN_OP_maximum: snprintf(b, n, "cn_fmax_%s(%s, %s)", S, x, y); return b;
        case CN_OP_minimum: snprintf(b, n, "cn_fmin_%s(%s, %s)", S, x, y); return b;
        default: return NULL;
        }
    }
    if (T == CN_BOOL) {
        switch (id) {
        case CN_OP_add:
        case CN_OP_maximum: snprintf(b, n, "((uchar)(((%s) | (%s)) != 0))", x, y); return b;
        case CN_OP_mul:
        case CN_OP_minimum:
            snprintf(b, n, "((uchar)(((%s) != 0) & ((%s) != 0)))", x, y);
            return b;
        default: return NULL;
        }
    }
    const char *ut = T == CN_I64 ? "ulong" : "uint";
    switch (id) {
    case CN_OP_add: snprintf(b, n, "((%s)((%s)(%s) + (%s)(%s)))", ty, ut, x, ut, y); return b;
    case CN_OP_sub: snprintf(b, n, "((%s)((%s)(%s) - (%s)(%s)))", ty, ut, x, ut, y); return b;
    case CN_OP_mul: snprintf(b, n, "((%s)((%s)(%s) * (%s)(%s)))", ty, ut, x, ut, y); return b;
    case CN_OP_maximum: snprintf(b, n, "((%s) > (%s) ? (%s) : (%s))", y, x, y, x); return b;
    case CN_OP_minimum: snprintf(b, n, "((%s) < (%s) ? (%s) : (%s))", y, x, y, x); return b;
    case CN_OP_pow:
        /* negative exponents set the flag (the host refuses them afterwards) */
        snprintf(b, n, "((%s) < 0 ? (flag[0] = 1, (%s)0) : (%s)cn_ipow((ulong)(long)(%s), (ulong)(%s)))",
                 y, ty, ty, x, y);
        return b;
    default: return NULL;
    }
}

/* The truth value of a stored element of dtype dt (NaN true, -0 false). */
static const char *truth_expr(char *b, size_t n, cn_dtype dt, const char *x) {
    if (cn_is_half(dt))
        snprintf(b, n, "(((%s) & 0x7fff) != 0)", x);
    else
        snprintf(b, n, "((%s) != 0)", x);
    return b;
}

const char *cn_gpu_cast_expr(char *b, size_t n, cn_dtype S, cn_dtype D, const char *x,
                             bool fp64) {
    if (S == D) {
        snprintf(b, n, "(%s)", x);
        return b;
    }
    bool si = !cn_dtype_is_float(S), di = !cn_dtype_is_float(D);
    char v[256];
    if (si && di) {
        /* through long: exact */
        if (S == CN_BOOL) snprintf(v, sizeof v, "((long)((%s) != 0))", x);
        else snprintf(v, sizeof v, "((long)(%s))", x);
        switch (D) {
        case CN_I64: snprintf(b, n, "%s", v); break;
        case CN_I32: snprintf(b, n, "((int)(uint)(ulong)%s)", v); break;
        case CN_U8: snprintf(b, n, "((uchar)(ulong)%s)", v); break;
        case CN_I8: snprintf(b, n, "((char)(uchar)(ulong)%s)", v); break;
        default: snprintf(b, n, "((uchar)(%s != 0))", v); break;
        }
        return b;
    }
    bool dbl = S == CN_F64 || D == CN_F64 || (fp64 && S == CN_I64 && cn_is_half(D));
    const char *R = dbl ? "double" : "float";
    switch (S) {
    case CN_F16: snprintf(v, sizeof v, "((%s)cn_h2f(%s))", R, x); break;
    case CN_BF16: snprintf(v, sizeof v, "((%s)cn_bf2f(%s))", R, x); break;
    case CN_BOOL: snprintf(v, sizeof v, "((%s)((%s) != 0))", R, x); break;
    default: snprintf(v, sizeof v, "((%s)(%s))", R, x); break;
    }
    const char *tol = dbl ? "cn_d2l" : "cn_f2l";
    switch (D) {
    case CN_F32: snprintf(b, n, "((float)%s)", v); break;
    case CN_F64: snprintf(b, n, "((double)%s)", v); break;
    case CN_F16: snprintf(b, n, "cn_f2h((float)%s)", v); break;
    case CN_BF16: snprintf(b, n, "cn_f2bf((float)%s)", v); break;
    case CN_I64: snprintf(b, n, "%s(%s)", tol, v); break;
    case CN_I32: snprintf(b, n, "((int)(uint)(ulong)%s(%s))", tol, v); break;
    case CN_U8: snprintf(b, n, "((uchar)(ulong)%s(%s))", tol, v); break;
    case CN_I8: snprintf(b, n, "((char)(uchar)(ulong)%s(%s))", tol, v); break;
    default: snprintf(b, n, "((uchar)(%s != 0))", v); break;
    }
    return b;
}

/* ---- the elementwise launcher ---- */

#define EW_MAX 4
#define EW_UNROLL 4

typedef struct ew_spec {
    const char *name;                 /* for the source's first line and messages */
    int nops;                         /* operands, the output first */
    const cn_tensor *ops[EW_MAX];
    cn_dtype dts[EW_MAX];             /* their dtypes (storage types) */
    const char *expr;                 /* out's value from v1.., p0, p1 */
    const char *ptype;                /* the parameters' OpenCL C type, NULL: none */
    unsigned char p[2][8];            /* their bytes */
    size_t psize;
    bool flag;                        /* the expression may set flag[0] */
} ew_spec;

static void set_param(ew_spec *s, int k, cn_dtype dt, double v) {
    cn_store_f64(s->p[k], dt, 0, v);
    s->psize = cn_dsize(dt);
}

/* The kernel of spec s over nd collapsed dimensions: its source generated
 * and looked up (compiled on first use). */
static cn_gpu_kernel ew_kernel(const ew_spec *s, int nd, cn_gpu_dev *dev) {
    cn_gpu_src src = {0};
    cn_gpu_src_add(&src, "/* chutney: %s */\n%s", s->name, cn_gpu_prelude());
    cn_gpu_add_ew_helpers(&src);
    cn_gpu_src_add(&src, "__kernel void cn_ew(long n");
    for (int j = 0; j < s->nops; j++)
        cn_gpu_src_add(&src, ", __global %s%s *a%d, cn_layout l%d", j ? "const " : "",
                       cn_gpu_ctype(s->dts[j]), j, j);
    if (s->ptype) cn_gpu_src_add(&src, ", %s p0, %s p1", s->ptype, s->ptype);
    if (s->flag) cn_gpu_src_add(&src, ", __global int *flag");
    /* Each work-item takes EW_UNROLL elements a grid apart and issues all
     * their loads before any store: with one load in flight per work-item,
     * a grid-stride loop reached under half of an H200's copy bandwidth
     * (the compiler may not hoist a load above the previous element's store,
     * since the output may alias an input). Reordering is safe because an
     * element's value depends on that element's inputs alone. */
    cn_gpu_src_add(&src, ") {\n  const long G = get_global_size(0);\n"
                         "  for (long b = get_global_id(0); b < n; b += %d * G) {\n", EW_UNROLL);
    cn_gpu_src_add(&src, "    long o0_[%d];\n", EW_UNROLL);
    for (int j = 1; j < s->nops; j++)
        cn_gpu_src_add(&src, "    %s v%d_[%d];\n", cn_gpu_ctype(s->dts[j]), j, EW_UNROLL);
    cn_gpu_src_add(&src, "    for (int u = 0; u < %d; u++) {\n      long i = b + u * G;\n"
                         "      if (i >= n) break;\n", EW_UNROLL);
    for (int j = 0; j < s->nops; j++) {
        if (nd == 0) cn_gpu_src_add(&src, "      long o%d = l%d.offset;\n", j, j);
        else if (nd == 1) cn_gpu_src_add(&src, "      long o%d = l%d.offset + i * l%d.strides[0];\n", j, j, j);
        else cn_gpu_src_add(&src, "      long o%d = l%d.offset;\n", j, j);
    }
    if (nd >= 2) {
        cn_gpu_src_add(&src, "      long r = i, q;\n");
        for (int d = nd - 1; d >= 0; d--) {
            if (d > 0) cn_gpu_src_add(&src, "      q = r %% l0.shape[%d]; r /= l0.shape[%d];\n", d, d);
            else cn_gpu_src_add(&src, "      q = r;\n");
            for (int j = 0; j < s->nops; j++)
                cn_gpu_src_add(&src, "      o%d += q * l%d.strides[%d];\n", j, j, d);
        }
    }
    cn_gpu_src_add(&src, "      o0_[u] = o0;\n");
    for (int j = 1; j < s->nops; j++) cn_gpu_src_add(&src, "      v%d_[u] = a%d[o%d];\n", j, j, j);
    cn_gpu_src_add(&src, "    }\n    for (int u = 0; u < %d; u++) {\n      if (b + u * G >= n) break;\n",
                   EW_UNROLL);
    for (int j = 1; j < s->nops; j++)
        cn_gpu_src_add(&src, "      %s v%d = v%d_[u];\n", cn_gpu_ctype(s->dts[j]), j, j);
    cn_gpu_src_add(&src, "      a0[o0_[u]] = (%s)(%s);\n    }\n  }\n}\n", cn_gpu_ctype(s->dts[0]),
                   s->expr);
    if (src.oom) {
        cn_gpu_src_free(&src);
        cn_failc(CN_ENOMEM, "%s: out of memory generating a kernel", s->name);
        return NULL;
    }
    cn_gpu_kernel k = cn_gpu_kernel_get(dev, src.buf, NULL, "cn_ew");
    cn_gpu_src_free(&src);
    return k;
}

/* Run the spec; *flag_out gets flag[0] when s->flag (waits for the kernel). */
static int ew_run(const char *fn, ew_spec *s, int *flag_out) {
    const cn_tensor *out = s->ops[0];
    cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
    if (!dev) return CN_EINVAL;
    for (int j = 0; j < s->nops; j++) {
        if (cn_gpu_check_dtype(fn, dev, s->dts[j]) < 0) return CN_EUNSUPPORTED;
        if (!s->ops[j]->storage || s->ops[j]->storage->device_kind != (int)dev->kind ||
            s->ops[j]->storage->device_index != dev->index)
            return cn_failc(CN_EINVAL, "%s: operand %d is not on %s", fn, j,
                            cn_dev_name(cn_storage_device(out->storage)));
    }
    int64_t n = cn_shape_numel(out->ndim, out->shape);
    if (n == 0) return CN_OK;
    cn_gpu_layout ls[EW_MAX];
    int nd = cn_gpu_layouts(s->nops, s->ops, out->ndim, out->shape, ls);

    /* Everything the source depends on: a hit skips generating it. */
    char key[CN_GPU_MEMO_KEY];
    int kl = snprintf(key, sizeof key, "ew|%s|%s|%s|%d|%d|%d", s->name, s->expr,
                      s->ptype ? s->ptype : "-", (int)s->flag, nd, s->nops);
    for (int j = 0; j < s->nops && kl > 0 && (size_t)kl < sizeof key; j++)
        kl += snprintf(key + kl, sizeof key - (size_t)kl, "|%d", (int)s->dts[j]);
    bool keyed = kl > 0 && (size_t)kl < sizeof key;
    cn_gpu_kernel k = keyed ? cn_gpu_kernel_memo(dev, key) : NULL;
    if (!k) {
        k = ew_kernel(s, nd, dev);
        if (!k) return CN_EUNSUPPORTED;
        if (keyed) cn_gpu_kernel_memo_put(dev, key, k);
    }

    cn_gpu_arg args[2 * EW_MAX + 4];
    cn_gpu_buf mems[EW_MAX];
    int64_t nn = n;
    int na = 0;
    args[na++] = CN_GPU_VAL(nn);
    for (int j = 0; j < s->nops; j++) {
        mems[j] = cn_gpu_buf_of(s->ops[j]);
        args[na++] = CN_GPU_MEM(mems[j]);
        args[na++] = (cn_gpu_arg){sizeof(cn_gpu_layout), &ls[j]};
    }
    if (s->ptype) {
        args[na++] = (cn_gpu_arg){s->psize, s->p[0]};
        args[na++] = (cn_gpu_arg){s->psize, s->p[1]};
    }
    cn_storage *fl = NULL;
    cn_gpu_buf flm = NULL;
    if (s->flag) {
        fl = cn_gpu_temp(dev, sizeof(int));
        if (!fl) return CN_ENOMEM;
        int zero = 0;
        int r = cn_gpu_write(fl, 0, &zero, sizeof zero, false);
        if (r < 0) {
            cn_storage_release(fl);
            return r;
        }
        flm = (cn_gpu_buf)fl->data;
        args[na++] = CN_GPU_MEM(flm);
    }
    int r = cn_gpu_launch_n(fn, dev, k, na, args, n);
    if (fl) {
        int f = 0;
        if (r == CN_OK) r = cn_gpu_read(fl, 0, &f, sizeof f);
        if (flag_out) *flag_out = f;
        cn_storage_release(fl);
    }
    return r;
}

/* ---- copies and fills ---- */

int cn_gpu_copy(cn_tensor *dst, const cn_tensor *src) {
    cn_dtype S = (cn_dtype)src->dtype, D = (cn_dtype)dst->dtype;
    cn_gpu_dev *dev = cn_gpu_dev_of(dst->storage);
    if (!dev) return CN_EINVAL;
    char e[512], name[64];
    cn_gpu_cast_expr(e, sizeof e, S, D, "v1", dev->fp64);
    snprintf(name, sizeof name, "copy %s -> %s", cn_dtype_name(S), cn_dtype_name(D));
    ew_spec s = {.name = name, .nops = 2, .ops = {dst, src}, .dts = {D, S}, .expr = e};
    return ew_run("copy", &s, NULL);
}

int cn_gpu_fill(cn_tensor *t, double v) {
    cn_dtype D = (cn_dtype)t->dtype;
    char name[64];
    snprintf(name, sizeof name, "fill %s", cn_dtype_name(D));
    ew_spec s = {.name = name, .nops = 1, .ops = {t}, .dts = {D}, .expr = "p0",
                 .ptype = cn_gpu_ctype(D)};
    set_param(&s, 0, D, v);
    set_param(&s, 1, D, v);
    return ew_run("fill", &s, NULL);
}

int cn_gpu_k_copy(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out) {
    (void)id;
    (void)nin;
    (void)a;
    return cn_gpu_copy(out, in[0]);
}

int cn_gpu_k_full_like(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                       cn_tensor *out) {
    (void)id;
    (void)in;
    (void)nin;
    return cn_gpu_fill(out, a->f[0]);
}

/* ---- unary ---- */

/* A clamp bound for an integer dtype of range [tmin, tmax] (unary.c's). */
static int64_t int_bound(double v, bool lower, int64_t tmin, int64_t tmax) {
    double r = lower ? ceil(v) : floor(v);
    if (r != r) return lower ? tmin : tmax;
    if (r <= (double)tmin) return tmin;
    if (r >= (double)tmax) return tmax;
    return (int64_t)r;
}

int cn_gpu_k_unary(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out) {
    (void)nin;
    const cn_tensor *x = in[0];
    cn_dtype T = (cn_dtype)x->dtype;
    const char *opname = cn_op_names[id];
    char e[1024], name[96], tb[128];
    snprintf(name, sizeof name, "%s %s", opname, cn_dtype_name(T));
    ew_spec s = {.name = name, .nops = 2, .ops = {out, x}, .dts = {(cn_dtype)out->dtype, T},
                 .expr = e};
    if (id == CN_OP_logical_not) {
        snprintf(e, sizeof e, "(uchar)!%s", truth_expr(tb, sizeof tb, T, "v1"));
        return ew_run(opname, &s, NULL);
    }
    if (cn_is_int_dtype(T) &&
        (id == CN_OP_floor || id == CN_OP_ceil || id == CN_OP_round ||
         (T == CN_U8 && (id == CN_OP_abs || id == CN_OP_relu || id == CN_OP_leaky_relu))))
        return cn_gpu_copy(out, x);
    if (out->dtype != T)
        return cn_failc(CN_EINVAL, "%s: internal error: input %s, output %s", opname,
                        cn_dtype_name(T), cn_dtype_name((cn_dtype)out->dtype));
    bool fl = T == CN_F32 || T == CN_F64;
    if (fl) {
        s.ptype = cn_gpu_ctype(T);
        set_param(&s, 0, T, a ? a->f[0] : 0);
        set_param(&s, 1, T, a ? a->f[1] : 0);
    } else if (id == CN_OP_clamp) {
        int64_t tmin = T == CN_I32 ? INT32_MIN : T == CN_I64 ? INT64_MIN : 0;
        int64_t tmax = T == CN_I32 ? INT32_MAX : T == CN_I64 ? INT64_MAX : UINT8_MAX;
        s.ptype = "long";
        int64_t lo = int_bound(a->f[0], true, tmin, tmax), hi = int_bound(a->f[1], false, tmin, tmax);
        memcpy(s.p[0], &lo, 8);
        memcpy(s.p[1], &hi, 8);
        s.psize = 8;
    } else if (id == CN_OP_leaky_relu) {
        cn_gpu_dev *dev = cn_gpu_dev_of(out->storage);
        if (!dev) return CN_EINVAL;
        s.ptype = "cn_real";
        cn_dtype R = dev->fp64 ? CN_F64 : CN_F32;
        set_param(&s, 0, R, a->f[0]);
        set_param(&s, 1, R, 0);
    }
    if (!cn_gpu_unary_expr(e, sizeof e, id, a, T, "v1", "p0", "p1"))
        return cn_failc(CN_EUNSUPPORTED, "%s: no kernel for dtype %s", opname,
                        cn_dtype_name(T));
    return ew_run(opname, &s, NULL);
}

/* ---- binary and where ---- */

int cn_gpu_k_binary(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                    cn_tensor *out) {
    (void)nin;
    (void)a;
    const cn_tensor *x = in[0], *y = in[1];
    cn_dtype A = (cn_dtype)x->dtype, B = (cn_dtype)y->dtype, O = (cn_dtype)out->dtype;
    const char *opname = cn_op_names[id];
    char e[1024], name[96], ta[128], tb[128];
    snprintf(name, sizeof name, "%s %s %s", opname, cn_dtype_name(A), cn_dtype_name(B));
    ew_spec s = {.name = name, .nops = 3, .ops = {out, x, y}, .dts = {O, A, B}, .expr = e};
    if (id == CN_OP_logical_and || id == CN_OP_logical_or || id == CN_OP_logical_xor) {
        const char *op = id == CN_OP_logical_and ? "&" : id == CN_OP_logical_or ? "|" : "^";
        snprintf(e, sizeof e, "(uchar)(%s %s %s)", truth_expr(ta, sizeof ta, A, "v1"), op,
                 truth_expr(tb, sizeof tb, B, "v2"));
        return ew_run(opname, &s, NULL);
    }
    if (A != B)
        return cn_failc(CN_EINVAL, "%s: internal error: dtypes %s and %s", opname, cn_dtype_name(A),
                        cn_dtype_name(B));
    if (!cn_gpu_binary_expr(e, sizeof e, id, A, "v1", "v2"))
        return cn_failc(CN_EUNSUPPORTED, "%s: not implemented for %s tensors", opname,
                        cn_dtype_name(A));
    if (id == CN_OP_pow && (A == CN_I32 || A == CN_I64 || A == CN_U8)) {
        s.flag = true;
        int f = 0;
        int r = ew_run(opname, &s, &f);
        if (r == CN_OK && f)
            return cn_failc(CN_EINVAL, "%s: integers to negative integer powers are not allowed",
                            opname);
        return r;
    }
    return ew_run(opname, &s, NULL);
}

int cn_gpu_k_where(cn_op_id id, cn_tensor *const *in, int nin, const cn_attrs *a,
                   cn_tensor *out) {
    (void)id;
    (void)nin;
    (void)a;
    cn_dtype C = (cn_dtype)in[0]->dtype, O = (cn_dtype)out->dtype;
    if (in[1]->dtype != O || in[2]->dtype != O)
        return cn_failc(CN_EINVAL, "where: internal error: dtypes %s, %s -> %s",
                        cn_dtype_name((cn_dtype)in[1]->dtype), cn_dtype_name((cn_dtype)in[2]->dtype),
                        cn_dtype_name(O));
    char e[512], name[96], tc[128];
    snprintf(name, sizeof name, "where %s %s", cn_dtype_name(C), cn_dtype_name(O));
    snprintf(e, sizeof e, "%s ? v2 : v3", truth_expr(tc, sizeof tc, C, "v1"));
    ew_spec s = {.name = name, .nops = 4, .ops = {out, in[0], in[1], in[2]}, .dts = {O, C, O, O},
                 .expr = e};
    return ew_run("where", &s, NULL);
}
