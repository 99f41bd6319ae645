/* Unary elementwise ops: every op against a double-precision reference
 * (libm) on random values in every layout, rank 0 and zero-size axes; the
 * special values (NaN, infinities, signed zeros, overflow, underflow,
 * saturation); integer, half and bool dtypes; the attributes; the errors;
 * and the same bits for any thread count. */
#include "harness.h"

#include "ops/op.h"

#include <float.h>

/* ---- the cases ---- */

typedef cn_tensor *(*apply_fn)(cn_tensor *x, const double *p);
typedef double (*ref_fn)(double x, const double *p);

enum { UNIFORM, LOG_POS, LOG_SIGNED }; /* how random inputs are drawn */

typedef struct ucase {
    const char *name;
    apply_fn apply;
    ref_fn ref;
    double p[2];    /* attributes */
    int dist;       /* UNIFORM: [lo, hi); LOG_*: |x| = e^u, u in [lo, hi) */
    double lo, hi;
    double rtol32;  /* against the f32-rounded reference; 0: exact */
    double rtol64;
    bool ints;      /* also i32, i64, u8 (same dtype out) */
} ucase;

static cn_tensor *ap_neg(cn_tensor *x, const double *p) { (void)p; return cn_neg(x); }
static cn_tensor *ap_abs(cn_tensor *x, const double *p) { (void)p; return cn_abs(x); }
static cn_tensor *ap_sign(cn_tensor *x, const double *p) { (void)p; return cn_sign(x); }
static cn_tensor *ap_exp(cn_tensor *x, const double *p) { (void)p; return cn_exp(x); }
static cn_tensor *ap_log(cn_tensor *x, const double *p) { (void)p; return cn_log(x); }
static cn_tensor *ap_log1p(cn_tensor *x, const double *p) { (void)p; return cn_log1p(x); }
static cn_tensor *ap_expm1(cn_tensor *x, const double *p) { (void)p; return cn_expm1(x); }
static cn_tensor *ap_sqrt(cn_tensor *x, const double *p) { (void)p; return cn_sqrt(x); }
static cn_tensor *ap_rsqrt(cn_tensor *x, const double *p) { (void)p; return cn_rsqrt(x); }
static cn_tensor *ap_square(cn_tensor *x, const double *p) { (void)p; return cn_square(x); }
static cn_tensor *ap_recip(cn_tensor *x, const double *p) { (void)p; return cn_reciprocal(x); }
static cn_tensor *ap_sin(cn_tensor *x, const double *p) { (void)p; return cn_sin(x); }
static cn_tensor *ap_cos(cn_tensor *x, const double *p) { (void)p; return cn_cos(x); }
static cn_tensor *ap_tanh(cn_tensor *x, const double *p) { (void)p; return cn_tanh(x); }
static cn_tensor *ap_sigmoid(cn_tensor *x, const double *p) { (void)p; return cn_sigmoid(x); }
static cn_tensor *ap_relu(cn_tensor *x, const double *p) { (void)p; return cn_relu(x); }
static cn_tensor *ap_leaky(cn_tensor *x, const double *p) { return cn_leaky_relu(x, p[0]); }
static cn_tensor *ap_elu(cn_tensor *x, const double *p) { return cn_elu(x, p[0]); }
static cn_tensor *ap_gelu(cn_tensor *x, const double *p) { (void)p; return cn_gelu(x, false); }
static cn_tensor *ap_gelu_tanh(cn_tensor *x, const double *p) { (void)p; return cn_gelu(x, true); }
static cn_tensor *ap_silu(cn_tensor *x, const double *p) { (void)p; return cn_silu(x); }
static cn_tensor *ap_softplus(cn_tensor *x, const double *p) { return cn_softplus(x, p[0], p[1]); }
static cn_tensor *ap_erf(cn_tensor *x, const double *p) { (void)p; return cn_erf(x); }
static cn_tensor *ap_floor(cn_tensor *x, const double *p) { (void)p; return cn_floor(x); }
static cn_tensor *ap_ceil(cn_tensor *x, const double *p) { (void)p; return cn_ceil(x); }
static cn_tensor *ap_round(cn_tensor *x, const double *p) { (void)p; return cn_round(x); }
static cn_tensor *ap_clamp(cn_tensor *x, const double *p) { return cn_clamp(x, p[0], p[1]); }

/* References: the textbook formulas in double. */
static double r_neg(double x, const double *p) { (void)p; return -x; }
static double r_abs(double x, const double *p) { (void)p; return fabs(x); }
static double r_sign(double x, const double *p) {
    (void)p;
    return isnan(x) ? x : x > 0 ? 1 : x < 0 ? -1 : 0;
}
static double r_exp(double x, const double *p) { (void)p; return exp(x); }
static double r_log(double x, const double *p) { (void)p; return log(x); }
static double r_log1p(double x, const double *p) { (void)p; return log1p(x); }
static double r_expm1(double x, const double *p) { (void)p; return expm1(x); }
static double r_sqrt(double x, const double *p) { (void)p; return sqrt(x); }
static double r_rsqrt(double x, const double *p) { (void)p; return 1 / sqrt(x); }
static double r_square(double x, const double *p) { (void)p; return x * x; }
static double r_recip(double x, const double *p) { (void)p; return 1 / x; }
static double r_sin(double x, const double *p) { (void)p; return sin(x); }
static double r_cos(double x, const double *p) { (void)p; return cos(x); }
static double r_tanh(double x, const double *p) { (void)p; return tanh(x); }
static double r_sigmoid(double x, const double *p) { (void)p; return 1 / (1 + exp(-x)); }
static double r_relu(double x, const double *p) { (void)p; return x < 0 ? 0 : x; }
static double r_leaky(double x, const double *p) { return x > 0 ? x : x * p[0]; }
static double r_elu(double x, const double *p) { return x > 0 ? x : p[0] * expm1(x); }
static double r_gelu(double x, const double *p) { (void)p; return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double r_gelu_tanh(double x, const double *p) {
    (void)p;
    double u = sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
    return x / (1 + exp(-2 * u)); /* = x/2 (1 + tanh u) without the cancellation */
}
static double r_silu(double x, const double *p) { (void)p; return x / (1 + exp(-x)); }
static double r_softplus(double x, const double *p) {
    return x * p[0] > p[1] ? x : log1p(exp(x * p[0])) / p[0];
}
static double r_erf(double x, const double *p) { (void)p; return erf(x); }
static double r_floor(double x, const double *p) { (void)p; return floor(x); }
static double r_ceil(double x, const double *p) { (void)p; return ceil(x); }
static double r_round(double x, const double *p) {
    (void)p;
    double f = floor(x), d = x - f;
    double r = d > 0.5 ? f + 1 : d < 0.5 ? f : (fmod(f, 2) == 0 ? f : f + 1);
    return copysign(r, x);
}
static double r_clamp(double x, const double *p) {
    double y = x < p[0] ? p[0] : x;
    return y > p[1] ? p[1] : y;
}

#define NOATTR {0, 0}
static const ucase cases[] = {
    {"neg", ap_neg, r_neg, NOATTR, UNIFORM, -10, 10, 0, 0, true},
    {"abs", ap_abs, r_abs, NOATTR, UNIFORM, -10, 10, 0, 0, true},
    {"sign", ap_sign, r_sign, NOATTR, UNIFORM, -3, 3, 0, 0, true},
    {"exp", ap_exp, r_exp, NOATTR, UNIFORM, -106, 90, 2.4e-7, 1e-15, false},
    {"log", ap_log, r_log, NOATTR, LOG_POS, -100, 88, 2.4e-7, 1e-15, false},
    {"log1p", ap_log1p, r_log1p, NOATTR, UNIFORM, -1, 20, 2.4e-7, 1e-15, false},
    {"log1p_small", ap_log1p, r_log1p, NOATTR, LOG_SIGNED, -40, 0, 2.4e-7, 1e-15, false},
    {"expm1", ap_expm1, r_expm1, NOATTR, UNIFORM, -30, 90, 2.4e-7, 1e-15, false},
    {"expm1_small", ap_expm1, r_expm1, NOATTR, LOG_SIGNED, -40, 0, 2.4e-7, 1e-15, false},
    {"sqrt", ap_sqrt, r_sqrt, NOATTR, LOG_POS, -100, 88, 6e-8, 1e-16, false},
    {"rsqrt", ap_rsqrt, r_rsqrt, NOATTR, LOG_POS, -100, 88, 6e-8, 3e-16, false},
    {"square", ap_square, r_square, NOATTR, UNIFORM, -100, 100, 0, 0, true},
    {"reciprocal", ap_recip, r_recip, NOATTR, LOG_SIGNED, -80, 80, 0, 0, false},
    {"sin", ap_sin, r_sin, NOATTR, UNIFORM, -10, 10, 1.2e-7, 1e-15, false},
    {"cos", ap_cos, r_cos, NOATTR, UNIFORM, -10, 10, 1.2e-7, 1e-15, false},
    {"tanh", ap_tanh, r_tanh, NOATTR, UNIFORM, -12, 12, 2.4e-7, 1e-15, false},
    {"tanh_small", ap_tanh, r_tanh, NOATTR, LOG_SIGNED, -30, 0, 2.4e-7, 1e-15, false},
    {"sigmoid", ap_sigmoid, r_sigmoid, NOATTR, UNIFORM, -110, 40, 3.6e-7, 1e-15, false},
    {"relu", ap_relu, r_relu, NOATTR, UNIFORM, -10, 10, 0, 0, true},
    {"leaky_relu", ap_leaky, r_leaky, {0.01, 0}, UNIFORM, -10, 10, 0, 0, true},
    {"elu", ap_elu, r_elu, {1.0, 0}, UNIFORM, -30, 5, 2.4e-7, 1e-15, false},
    /* f64: the kernel and the reference round x / sqrt 2 (or the cubic)
     * differently, and the tails magnify that by about x^2. */
    {"gelu", ap_gelu, r_gelu, NOATTR, UNIFORM, -14, 10, 7.2e-7, 1e-13, false},
    {"gelu_tanh", ap_gelu_tanh, r_gelu_tanh, NOATTR, UNIFORM, -12, 10, 3.6e-7, 2e-13, false},
    {"silu", ap_silu, r_silu, NOATTR, UNIFORM, -100, 40, 4.8e-7, 1e-15, false},
    {"softplus", ap_softplus, r_softplus, {1, 20}, UNIFORM, -100, 40, 2.4e-7, 1e-15, false},
    {"erf", ap_erf, r_erf, NOATTR, UNIFORM, -5, 5, 2.4e-7, 1e-15, false},
    {"erf_small", ap_erf, r_erf, NOATTR, LOG_SIGNED, -40, 0, 1.2e-7, 1e-15, false},
    {"floor", ap_floor, r_floor, NOATTR, UNIFORM, -10, 10, 0, 0, true},
    {"ceil", ap_ceil, r_ceil, NOATTR, UNIFORM, -10, 10, 0, 0, true},
    {"round", ap_round, r_round, NOATTR, UNIFORM, -10, 10, 0, 0, true},
    {"clamp", ap_clamp, r_clamp, {-2, 3}, UNIFORM, -10, 10, 0, 0, true},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- helpers ---- */

static double draw(const ucase *c) {
    double u = th_uniform(c->lo, c->hi);
    if (c->dist == UNIFORM) return u;
    double m = exp(u);
    return (c->dist == LOG_SIGNED && (th_next() & 1)) ? -m : m;
}

/* The value dt stores for x. */
static double as_dtype(double x, cn_dtype dt) {
    switch (dt) {
    case CN_F32: return (float)x;
    case CN_F16: return cn_f16_to_f32(cn_f32_to_f16((float)x));
    case CN_BF16: return cn_bf16_to_f32(cn_f32_to_bf16((float)x));
    default: return x;
    }
}

/* got against the reference want (in double) for a result of dtype dt: the
 * reference is rounded to dt first (so overflow to inf and underflow to 0
 * are checked), then |got - want| <= rtol |want|, plus two steps of the
 * smallest subnormal so results that underflow are judged fairly. */
static bool close_to(double got, double want, cn_dtype dt, double rtol) {
    if (isnan(want)) return isnan(got);
    double w = as_dtype(want, dt);
    if (isinf(w)) return got == w;
    double tiny = dt == CN_F64 ? 1e-322 : dt == CN_F32 ? 3e-45 : 0;
    return fabs(got - want) <= rtol * fabs(want) + tiny || got == w;
}

static int layout_shapes(int which, int64_t *shape) {
    switch (which) {
    case 0: return 0; /* rank 0 */
    case 1: shape[0] = 37; return 1;
    case 2: shape[0] = 3; shape[1] = 0; shape[2] = 4; return 3; /* zero-size axis */
    case 3: shape[0] = 0; return 1;
    default: th_random_shape(which % 3 + 2, 1, 6, shape); return which % 3 + 2;
    }
}

/* The attributes as a kernel of dtype dt sees them: f32 (and the half types,
 * which compute in f32) round them to f32, as PyTorch does. */
static void attrs_for(const double *p, cn_dtype dt, double *out) {
    out[0] = p ? p[0] : 0;
    out[1] = p ? p[1] : 0;
    if (dt == CN_F64) return;
    /* Through a volatile: GCC 12.2 at -O2 (its SLP vectoriser) drops this
     * conditional rounding of the pair when written as plain casts. */
    for (int i = 0; i < 2; i++) {
        volatile float f = (float)out[i];
        out[i] = f;
    }
}

/* Random values of c in dtype dt, every layout and several shapes, against
 * the reference elementwise. */
static void check_case(const ucase *c, cn_dtype dt) {
    double rtol = dt == CN_F64 ? c->rtol64 : c->rtol32;
    double p[2];
    attrs_for(c->p, dt, p);
    for (int which = 0; which < 8; which++) {
        int64_t shape[CN_MAX_DIMS];
        int nd = layout_shapes(which, shape);
        int64_t n = th_numel(nd, shape);
        double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
        for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
            for (int64_t k = 0; k < n; k++) v[k] = as_dtype(draw(c), dt);
            cn_tensor *x = th_make(dt, nd, shape, v, layout);
            cn_tensor *y = c->apply(x, c->p);
            CHECK_MSG(y != NULL, "%s %s: %s", c->name, cn_dtype_name(dt), cn_last_error());
            if (!y) continue;
            CHECK(th_same_shape(y, nd, shape));
            CHECK_EQ_INT(cn_tensor_dtype(y), dt);
            CHECK(cn_is_contiguous(y));
            int bad = 0;
            for (int64_t k = 0; k < n && bad < 3; k++) {
                double got = th_at(y, k), want = c->ref(v[k], p);
                if (!close_to(got, want, dt, rtol)) {
                    bad++;
                    CHECK_MSG(0, "%s %s layout %d: f(%.9g) = %.9g, expected %.9g", c->name,
                              cn_dtype_name(dt), layout, v[k], got, want);
                }
            }
            th_checks++;
        }
        free(v);
    }
}

static void test_float_values(void) {
    for (int i = 0; i < NCASES; i++) {
        check_case(&cases[i], CN_F32);
        check_case(&cases[i], CN_F64);
    }
}

/* An input broadcast with stride 0 (expand) and a sliced one. */
static void test_broadcast_and_views(void) {
    double v[3] = {-1.5, 0.25, 2};
    cn_tensor *col = th_make(CN_F32, 2, (int64_t[]){3, 1}, v, TH_CONTIG);
    cn_tensor *e = cn_expand(col, CN_SHAPE(2, 3, 4));
    cn_tensor *y = cn_exp(e);
    CHECK_SHAPE(y, 2, 3, 4);
    for (int64_t k = 0; k < 24; k++) CHECK_CLOSE(th_at(y, k), exp(v[(k / 4) % 3]), 2.4e-7, 0);
    cn_tensor *big = cn_reshape(cn_arange(0, 60, 1, CN_F64), CN_SHAPE(3, 4, 5));
    cn_tensor *s = cn_slice(cn_transpose(big, 0, 2), 1, 3, 0, -2); /* [5, 2, 3] */
    cn_tensor *r = cn_sqrt(s);
    CHECK_SHAPE(r, 5, 2, 3);
    for (int64_t k = 0; k < 30; k++) CHECK_CLOSE(th_at(r, k), sqrt(th_at(s, k)), 1e-16, 0);
}

/* ---- special values ---- */

typedef struct special {
    const char *op;
    double x, want;
    bool sign;   /* the sign of a zero want must match too */
    double rtol; /* 0: exact */
} special;

#define INF INFINITY
static const special specials[] = {
    {"exp", -INF, 0, true, 0}, {"exp", INF, INF, 0, 0}, {"exp", NAN, NAN, 0, 0},
    {"exp", -0.0, 1, 0, 0}, {"exp", 89, INF, 0, 0}, {"exp", 1e30, INF, 0, 0},
    {"exp", -104, 0, true, 0}, {"exp", -1e30, 0, true, 0},
    {"exp", -100, 3.7200759760208361e-44, 0, 0.07}, /* subnormal: 26 units of 2^-149 */
    {"exp", 88.5, 2.7230878250681117e38, 0, 2.4e-7}, {"exp", 1, 2.718281828459045, 0, 1.2e-7},
    {"log", 0, -INF, 0, 0}, {"log", -0.0, -INF, 0, 0}, {"log", -1, NAN, 0, 0},
    {"log", -INF, NAN, 0, 0}, {"log", INF, INF, 0, 0}, {"log", NAN, NAN, 0, 0},
    {"log", 1, 0, true, 0}, {"log", 1.401298464324817e-45, -103.27892990343185, 0, 1.2e-7},
    {"log", 3.4028234663852886e38, 88.72283905206835, 0, 1.2e-7},
    {"log1p", -1, -INF, 0, 0}, {"log1p", -2, NAN, 0, 0}, {"log1p", -0.0, -0.0, true, 0},
    {"log1p", 0, 0, true, 0}, {"log1p", INF, INF, 0, 0}, {"log1p", -INF, NAN, 0, 0},
    {"log1p", NAN, NAN, 0, 0}, {"log1p", 1e-30, 1e-30, 0, 1.2e-7},
    {"expm1", -0.0, -0.0, true, 0}, {"expm1", 0, 0, true, 0}, {"expm1", INF, INF, 0, 0},
    {"expm1", -INF, -1, 0, 0}, {"expm1", 89, INF, 0, 0}, {"expm1", -50, -1, 0, 0},
    {"expm1", 1e-30, 1e-30, 0, 1.2e-7}, {"expm1", NAN, NAN, 0, 0},
    {"expm1", 88.5, 2.7230878250681117e38, 0, 2.4e-7},
    {"sqrt", -0.0, -0.0, true, 0}, {"sqrt", -1, NAN, 0, 0}, {"sqrt", INF, INF, 0, 0},
    {"sqrt", 4, 2, 0, 0}, {"sqrt", NAN, NAN, 0, 0},
    {"rsqrt", 0, INF, 0, 0}, {"rsqrt", -0.0, -INF, 0, 0}, {"rsqrt", INF, 0, true, 0},
    {"rsqrt", -1, NAN, 0, 0}, {"rsqrt", 4, 0.5, 0, 0}, {"rsqrt", NAN, NAN, 0, 0},
    {"rsqrt", 1.401298464324817e-45, 2.6713738906281536e22, 0, 1.2e-7},
    {"reciprocal", 0, INF, 0, 0}, {"reciprocal", -0.0, -INF, 0, 0},
    {"reciprocal", -INF, -0.0, true, 0}, {"reciprocal", 4, 0.25, 0, 0},
    {"tanh", -0.0, -0.0, true, 0}, {"tanh", INF, 1, 0, 0}, {"tanh", -INF, -1, 0, 0},
    {"tanh", 10, 1, 0, 0}, {"tanh", -20, -1, 0, 0}, {"tanh", 1e30, 1, 0, 0},
    {"tanh", NAN, NAN, 0, 0}, {"tanh", 1e-30, 1e-30, 0, 0},
    {"sigmoid", INF, 1, 0, 0}, {"sigmoid", -INF, 0, 0, 0}, {"sigmoid", 100, 1, 0, 0},
    {"sigmoid", -200, 0, 0, 0}, {"sigmoid", 0, 0.5, 0, 0}, {"sigmoid", -0.0, 0.5, 0, 0},
    {"sigmoid", NAN, NAN, 0, 0},
    {"sigmoid", -100, 3.7200759760208361e-44, 0, 0.07}, /* subnormal */
    {"silu", INF, INF, 0, 0}, {"silu", -INF, 0, 0, 0}, {"silu", NAN, NAN, 0, 0},
    {"silu", 0, 0, true, 0}, {"silu", -0.0, -0.0, true, 0}, {"silu", -1e30, 0, 0, 0},
    {"silu", 100, 100, 0, 0}, {"silu", 1e30, 1e30, 0, 0},
    {"silu", -95, -5.245028163177106e-40, 0, 1.2e-5}, /* subnormal, within 4 ulp */
    {"gelu", INF, INF, 0, 0}, {"gelu", -INF, 0, 0, 0}, {"gelu", NAN, NAN, 0, 0},
    {"gelu", 0, 0, 0, 0}, {"gelu", -20, 0, 0, 0}, {"gelu", 20, 20, 0, 0},
    {"gelu", -1e30, 0, 0, 0}, {"gelu", 1e30, 1e30, 0, 1.2e-7},
    {"gelu_tanh", INF, INF, 0, 0}, {"gelu_tanh", -INF, 0, 0, 0}, {"gelu_tanh", NAN, NAN, 0, 0},
    {"gelu_tanh", 0, 0, true, 0}, {"gelu_tanh", -0.0, -0.0, true, 0},
    {"gelu_tanh", -20, 0, 0, 0}, {"gelu_tanh", 20, 20, 0, 0},
    {"gelu_tanh", -1e30, 0, 0, 0}, {"gelu_tanh", 1e30, 1e30, 0, 1.2e-7},
    {"erf", INF, 1, 0, 0}, {"erf", -INF, -1, 0, 0}, {"erf", 4, 1, 0, 0},
    {"erf", -10, -1, 0, 0}, {"erf", -0.0, -0.0, true, 0}, {"erf", NAN, NAN, 0, 0},
    {"erf", 1e-30, 1.1283791670955126e-30, 0, 1.2e-7},
    {"elu", INF, INF, 0, 0}, {"elu", -INF, -1, 0, 0}, {"elu", NAN, NAN, 0, 0},
    {"elu", -50, -1, 0, 0},
    {"softplus", INF, INF, 0, 0}, {"softplus", -INF, 0, 0, 0}, {"softplus", NAN, NAN, 0, 0},
    {"softplus", 30, 30, 0, 0}, {"softplus", -200, 0, 0, 0},
    {"softplus", -100, 3.7200759760208361e-44, 0, 0.07},
    {"leaky_relu", -INF, -INF, 0, 0}, {"leaky_relu", INF, INF, 0, 0},
    {"leaky_relu", NAN, NAN, 0, 0}, {"leaky_relu", -0.0, -0.0, true, 0},
    {"relu", NAN, NAN, 0, 0}, {"relu", -INF, 0, 0, 0}, {"relu", INF, INF, 0, 0},
    {"relu", -3, 0, true, 0},
    {"sign", -0.0, 0, true, 0}, {"sign", 0, 0, true, 0}, {"sign", NAN, NAN, 0, 0},
    {"sign", -INF, -1, 0, 0}, {"sign", INF, 1, 0, 0}, {"sign", 1.401298464324817e-45, 1, 0, 0},
    {"abs", -0.0, 0, true, 0}, {"abs", -INF, INF, 0, 0}, {"abs", NAN, NAN, 0, 0},
    {"neg", 0, -0.0, true, 0}, {"neg", NAN, NAN, 0, 0}, {"neg", INF, -INF, 0, 0},
    {"square", NAN, NAN, 0, 0}, {"square", -INF, INF, 0, 0},
    {"floor", -0.5, -1, 0, 0}, {"floor", 0.5, 0, true, 0}, {"floor", -0.0, -0.0, true, 0},
    {"floor", 2.5, 2, 0, 0}, {"floor", -2.5, -3, 0, 0}, {"floor", INF, INF, 0, 0},
    {"floor", -INF, -INF, 0, 0}, {"floor", NAN, NAN, 0, 0}, {"floor", 1e10, 1e10, 0, 0},
    {"floor", 8388607.5, 8388607, 0, 0}, {"floor", -1.401298464324817e-45, -1, 0, 0},
    {"floor", 4194303.75, 4194303, 0, 0},
    {"ceil", -0.5, -0.0, true, 0}, {"ceil", 0.5, 1, 0, 0}, {"ceil", -0.0, -0.0, true, 0},
    {"ceil", 2.5, 3, 0, 0}, {"ceil", -2.5, -2, 0, 0}, {"ceil", 8388607.5, 8388608, 0, 0},
    {"ceil", 1.401298464324817e-45, 1, 0, 0}, {"ceil", NAN, NAN, 0, 0},
    {"ceil", -INF, -INF, 0, 0},
    {"round", 0.5, 0, true, 0}, {"round", 1.5, 2, 0, 0}, {"round", 2.5, 2, 0, 0},
    {"round", -0.5, -0.0, true, 0}, {"round", -1.5, -2, 0, 0}, {"round", -2.5, -2, 0, 0},
    {"round", 8388607.5, 8388608, 0, 0}, {"round", 0.49999997, 0, true, 0},
    {"round", 1e10, 1e10, 0, 0}, {"round", INF, INF, 0, 0}, {"round", NAN, NAN, 0, 0},
    {"round", 3.5, 4, 0, 0}, {"round", -3.7, -4, 0, 0},
    {"clamp", NAN, NAN, 0, 0}, {"clamp", -INF, -2, 0, 0}, {"clamp", INF, 3, 0, 0},
    {"sin", INF, NAN, 0, 0}, {"sin", NAN, NAN, 0, 0}, {"sin", -0.0, -0.0, true, 0},
    {"cos", INF, NAN, 0, 0}, {"cos", 0, 1, 0, 0},
};

static const ucase *find_case(const char *name) {
    for (int i = 0; i < NCASES; i++)
        if (strcmp(cases[i].name, name) == 0) return &cases[i];
    return NULL;
}

static void test_special_values(void) {
    int ns = (int)(sizeof specials / sizeof specials[0]);
    for (int i = 0; i < ns; i++) {
        const special *s = &specials[i];
        const ucase *c = find_case(s->op);
        CHECK_MSG(c != NULL, "no case %s", s->op);
        if (!c) continue;
        /* Rank 0 and inside a longer row (the vectorised loop body). */
        float row[37];
        for (int k = 0; k < 37; k++) row[k] = (float)s->x;
        cn_tensor *xs[2] = {cn_scalar(CN_F32, s->x), cn_from_data(CN_F32, CN_SHAPE(37), row)};
        for (int t = 0; t < 2; t++) {
            cn_tensor *y = c->apply(xs[t], c->p);
            CHECK_MSG(y != NULL, "%s(%g): %s", s->op, s->x, cn_last_error());
            if (!y) continue;
            double got = th_at(y, t ? 36 : 0);
            bool ok = isnan(s->want) ? isnan(got)
                      : s->rtol > 0  ? fabs(got - s->want) <= s->rtol * fabs(s->want)
                                     : got == as_dtype(s->want, CN_F32);
            if (ok && s->sign && s->want == 0) ok = signbit(got) == signbit(s->want);
            CHECK_MSG(ok, "%s(%.9g) = %.9g, expected %.9g", s->op, s->x, got, s->want);
        }
    }
}

/* f64 follows libm at the extremes as well. */
static void test_special_values_f64(void) {
    const double x[] = {-INF, INF, NAN, -0.0, 0, 1e-310, -1e300, 1e300, 700, -700, 40, -40};
    for (int i = 0; i < NCASES; i++) {
        const ucase *c = &cases[i];
        for (size_t k = 0; k < sizeof x / sizeof x[0]; k++) {
            cn_tensor *y = c->apply(cn_scalar(CN_F64, x[k]), c->p);
            double want = c->ref(x[k], c->p), got = y ? cn_item(y) : NAN;
            /* The textbook references give NaN for inf/inf where the kernels
             * take the limit; the limits are checked in f32 above. */
            if (isnan(want) && !isnan(x[k])) continue;
            CHECK_MSG(close_to(got, want, CN_F64, c->rtol64 + 1e-15),
                      "%s f64(%g) = %.17g, expected %.17g", c->name, x[k], got, want);
        }
    }
}

/* ---- integer, half and bool dtypes ---- */

/* The reference in int64, wrapped to dt the way PyTorch does. */
static int64_t wrap(int64_t v, cn_dtype dt) {
    switch (dt) {
    case CN_I32: return (int32_t)(uint32_t)(uint64_t)v;
    case CN_U8: return (uint8_t)(uint64_t)v;
    default: return v;
    }
}

static int64_t iref(const char *op, int64_t v, cn_dtype dt, const double *p) {
    uint64_t u = (uint64_t)v;
    if (!strcmp(op, "neg")) return wrap((int64_t)(0 - u), dt);
    if (!strcmp(op, "abs")) return wrap(v < 0 ? (int64_t)(0 - u) : v, dt);
    if (!strcmp(op, "sign")) return v > 0 ? 1 : v < 0 ? -1 : 0;
    if (!strcmp(op, "square")) return wrap((int64_t)(u * u), dt);
    if (!strcmp(op, "relu")) return v < 0 ? 0 : v;
    if (!strcmp(op, "leaky_relu")) return v > 0 ? v : (int64_t)trunc((double)v * p[0]);
    if (!strcmp(op, "clamp")) {
        int64_t lo = (int64_t)ceil(p[0]), hi = (int64_t)floor(p[1]);
        int64_t y = v < lo ? lo : v;
        return y > hi ? hi : y;
    }
    return v; /* floor, ceil, round */
}

static void test_integer_dtypes(void) {
    const cn_dtype dts[] = {CN_I32, CN_I64, CN_U8};
    const int64_t edge32[] = {INT32_MIN, INT32_MIN + 1, INT32_MAX, -1, 0, 1, 46341, -70000};
    const int64_t edge64[] = {INT64_MIN, INT64_MAX, -1, 0, 1, 3037000500, -5000000000};
    const int64_t edge8[] = {0, 1, 2, 15, 16, 127, 128, 200, 255};
    for (int i = 0; i < NCASES; i++) {
        const ucase *c = &cases[i];
        if (!c->ints) continue;
        /* Fractional attributes exercise the integer rounding rules. */
        double p[2] = {c->p[0], c->p[1]};
        if (!strcmp(c->name, "leaky_relu")) p[0] = 0.3;
        if (!strcmp(c->name, "clamp")) {
            p[0] = -2.5;
            p[1] = 7.9;
        }
        for (int d = 0; d < 3; d++) {
            cn_dtype dt = dts[d];
            int64_t vals[64];
            int n = 0;
            const int64_t *edge = dt == CN_I32 ? edge32 : dt == CN_I64 ? edge64 : edge8;
            int nedge = dt == CN_I32 ? 8 : dt == CN_I64 ? 7 : 9;
            for (int k = 0; k < nedge; k++) vals[n++] = edge[k];
            while (n < 40) vals[n++] = dt == CN_U8 ? th_randint(0, 256) : th_randint(-50, 50);
            cn_tensor *x = cn_from_data(CN_I64, CN_SHAPE(5, 8), vals);
            x = cn_cast(x, dt);
            x = cn_transpose(x, 0, 1); /* a strided layout too */
            cn_tensor *y = c->apply(x, p);
            CHECK_MSG(y != NULL, "%s %s: %s", c->name, cn_dtype_name(dt), cn_last_error());
            if (!y) continue;
            CHECK_EQ_INT(cn_tensor_dtype(y), dt);
            for (int64_t k = 0; k < 40; k++) {
                int64_t idx[2] = {k / 5, k % 5};
                int64_t v = cn_get_int(x, idx), got = cn_get_int(y, idx);
                int64_t want = iref(c->name, v, dt, p);
                CHECK_MSG(got == want, "%s %s(%" PRId64 ") = %" PRId64 ", expected %" PRId64,
                          c->name, cn_dtype_name(dt), v, got, want);
            }
        }
    }
    /* Clamp bounds beyond the dtype's range saturate; lo > hi gives hi. */
    cn_tensor *u = cn_from_data(CN_U8, CN_SHAPE(3), (uint8_t[]){0, 100, 255});
    cn_tensor *cu = cn_clamp(u, -10, 1000);
    for (int k = 0; k < 3; k++) CHECK_EQ_INT(th_at(cu, k), th_at(u, k));
    cn_tensor *ci = cn_clamp(cn_arange(-3, 4, 1, CN_I32), 2, -1);
    for (int k = 0; k < 7; k++) CHECK_EQ_INT(th_at(ci, k), -1);
    cn_tensor *cl = cn_clamp(cn_arange(-3, 4, 1, CN_I64), -INFINITY, 1);
    CHECK_EQ_INT(th_at(cl, 0), -3);
    CHECK_EQ_INT(th_at(cl, 6), 1);
}

/* Float functions of integer and bool inputs compute in f32. */
static void test_int_to_float(void) {
    const char *ops[] = {"exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "reciprocal", "sin",
                         "cos", "tanh", "sigmoid", "elu", "gelu", "gelu_tanh", "silu",
                         "softplus", "erf"};
    const cn_dtype dts[] = {CN_I32, CN_I64, CN_U8, CN_BOOL};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const ucase *c = find_case(ops[i]);
        for (int d = 0; d < 4; d++) {
            double v[12];
            for (int k = 0; k < 12; k++)
                v[k] = dts[d] == CN_BOOL ? (k & 1) : dts[d] == CN_U8 ? k * 7 : k - 4;
            cn_tensor *x = th_make(dts[d], 2, (int64_t[]){3, 4}, v, TH_TRANSPOSED);
            cn_tensor *y = c->apply(x, c->p);
            CHECK_MSG(y && cn_tensor_dtype(y) == CN_F32, "%s %s: %s", ops[i],
                      cn_dtype_name(dts[d]), cn_last_error());
            if (!y) continue;
            for (int k = 0; k < 12; k++) {
                double want = c->ref(v[k], c->p), got = th_at(y, k);
                CHECK_MSG(close_to(got, want, CN_F32, c->rtol32 + 1.2e-7), "%s %s(%g) = %.9g",
                          ops[i], cn_dtype_name(dts[d]), v[k], got);
            }
        }
    }
}

/* f16 and bf16 compute in f32 and round back: within an ulp of the half
 * type. */
static void test_half_dtypes(void) {
    const cn_dtype dts[] = {CN_F16, CN_BF16};
    for (int i = 0; i < NCASES; i++) {
        const ucase *c = &cases[i];
        for (int d = 0; d < 2; d++) {
            cn_dtype dt = dts[d];
            double v[24];
            for (int k = 0; k < 24; k++) {
                double x = draw(c);
                if (dt == CN_F16) x = x > 60000 ? 60000 : x < -60000 ? -60000 : x;
                v[k] = as_dtype(x, dt);
            }
            cn_tensor *x = th_make(dt, 2, (int64_t[]){4, 6}, v, TH_MIXED);
            cn_tensor *y = c->apply(x, c->p);
            CHECK_MSG(y && cn_tensor_dtype(y) == dt, "%s %s: %s", c->name, cn_dtype_name(dt),
                      cn_last_error());
            if (!y) continue;
            double rtol = dt == CN_F16 ? 1.0 / 1024 : 1.0 / 128;
            double tiny = dt == CN_F16 ? 6e-8 : 1e-40; /* the smallest subnormal */
            for (int k = 0; k < 24; k++) {
                double want = c->ref(v[k], c->p), got = th_at(y, k);
                double w = as_dtype(want, dt);
                bool ok = isnan(want) ? isnan(got)
                          : isinf(w)  ? got == w
                                      : fabs(got - want) <= rtol * fabs(want) + tiny || got == w;
                CHECK_MSG(ok, "%s %s(%.6g) = %.6g, expected %.6g", c->name, cn_dtype_name(dt),
                          v[k], got, want);
            }
        }
    }
}

static void test_logical_not(void) {
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8, CN_BOOL};
    for (int d = 0; d < 8; d++) {
        cn_dtype dt = dts[d];
        bool fl = cn_dtype_is_float(dt);
        double v[6] = {0, fl ? -0.0 : 0, 1, dt == CN_U8 ? 200 : dt == CN_BOOL ? 1 : -3,
                       fl ? NAN : 0, fl ? 1e-3 : 1};
        bool want[6] = {true, true, false, false, !fl, false};
        for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
            cn_tensor *x = th_make(dt, 2, (int64_t[]){2, 3}, v, layout);
            cn_tensor *y = cn_logical_not(x);
            CHECK_MSG(y && cn_tensor_dtype(y) == CN_BOOL, "logical_not %s: %s",
                      cn_dtype_name(dt), cn_last_error());
            if (!y) continue;
            for (int k = 0; k < 6; k++)
                CHECK_MSG(th_at(y, k) == want[k], "logical_not %s(%g) = %g", cn_dtype_name(dt),
                          v[k], th_at(y, k));
        }
    }
    CHECK(cn_ops[CN_OP_logical_not]->flags & CN_OPF_NONDIFF);
    CHECK(!(cn_ops[CN_OP_sign]->flags & CN_OPF_NONDIFF));
    CHECK(!(cn_ops[CN_OP_round]->flags & CN_OPF_NONDIFF));
    CHECK(cn_ops[CN_OP_exp]->flags & CN_OPF_FLOAT_MATH);
    CHECK(!(cn_ops[CN_OP_neg]->flags & CN_OPF_FLOAT_MATH));
    CHECK(!strcmp(cn_ops[CN_OP_clamp]->onnx, "Clip"));
    CHECK(cn_ops[CN_OP_silu]->onnx == NULL);
}

/* ---- attributes ---- */

static void check_attr(const char *what, cn_tensor *(*apply)(cn_tensor *, const double *),
                       ref_fn ref, const double *p, double lo, double hi, double rtol) {
    double v[64];
    for (int k = 0; k < 64; k++) v[k] = (float)th_uniform(lo, hi);
    v[0] = 0;
    v[1] = -0.0;
    for (int d = 0; d < 2; d++) {
        cn_dtype dt = d ? CN_F64 : CN_F32;
        cn_tensor *x = th_make(dt, 2, (int64_t[]){8, 8}, v, TH_REVERSED);
        cn_tensor *y = apply(x, p);
        CHECK_MSG(y != NULL, "%s: %s", what, cn_last_error());
        if (!y) continue;
        double pr[2];
        attrs_for(p, dt, pr);
        for (int k = 0; k < 64; k++) {
            double got = th_at(y, k), want = ref(v[k], pr);
            CHECK_MSG(close_to(got, want, dt, d ? 1e-13 : rtol), "%s %s(%.9g) = %.9g, want %.9g",
                      what, cn_dtype_name(dt), v[k], got, want);
        }
    }
}

static void test_attributes(void) {
    check_attr("leaky_relu 0.2", ap_leaky, r_leaky, (double[]){0.2, 0}, -5, 5, 0);
    check_attr("leaky_relu -1.5", ap_leaky, r_leaky, (double[]){-1.5, 0}, -5, 5, 0);
    check_attr("elu 0.5", ap_elu, r_elu, (double[]){0.5, 0}, -10, 5, 2.4e-7);
    check_attr("elu 2", ap_elu, r_elu, (double[]){2, 0}, -10, 5, 2.4e-7);
    check_attr("gelu", ap_gelu, r_gelu, NULL, -6, 6, 7.2e-7);
    check_attr("gelu tanh", ap_gelu_tanh, r_gelu_tanh, NULL, -6, 6, 3.6e-7);
    check_attr("softplus 2 5", ap_softplus, r_softplus, (double[]){2, 5}, -10, 10, 2.4e-7);
    check_attr("softplus 0.5 1", ap_softplus, r_softplus, (double[]){0.5, 1}, -10, 10, 2.4e-7);
    check_attr("softplus -1 20", ap_softplus, r_softplus, (double[]){-1, 20}, -10, 10, 2.4e-7);
    check_attr("clamp lo", ap_clamp, r_clamp, (double[]){-1, INFINITY}, -5, 5, 0);
    check_attr("clamp hi", ap_clamp, r_clamp, (double[]){-INFINITY, 0.5}, -5, 5, 0);
    check_attr("clamp both", ap_clamp, r_clamp, (double[]){-0.25, 0.75}, -5, 5, 0);
    check_attr("clamp none", ap_clamp, r_clamp, (double[]){-INFINITY, INFINITY}, -5, 5, 0);
    check_attr("clamp lo > hi", ap_clamp, r_clamp, (double[]){2, 1}, -5, 5, 0);
    /* The two gelu forms are different functions (by 1e-4 at x = -2). */
    cn_tensor *x = cn_scalar(CN_F32, -2);
    double ge = cn_item(cn_gelu(x, false)), gt = cn_item(cn_gelu(x, true));
    CHECK_CLOSE(ge, r_gelu(-2, NULL), 7.2e-7, 0);
    CHECK_CLOSE(gt, r_gelu_tanh(-2, NULL), 3.6e-7, 0);
    CHECK(fabs(ge - gt) > 5e-5);
    /* softplus is exactly x above the threshold, the formula up to it. */
    cn_tensor *sx = cn_from_data(CN_F32, CN_SHAPE(3), (float[]){2.6f, 2.5f, 2.4f});
    cn_tensor *s = cn_softplus(sx, 2, 5);
    CHECK(th_at(s, 0) == 2.6f);
    CHECK_CLOSE(th_at(s, 1), log1p(exp(5.0)) / 2, 1.2e-7, 0);
    CHECK_CLOSE(th_at(s, 2), log1p(exp((double)(2.4f * 2))) / 2, 1.2e-7, 0);
}

/* ---- errors ---- */

static void test_errors(void) {
    cn_tensor *b = cn_ones(CN_BOOL, CN_SHAPE(2, 3));
    CHECK_ERROR(cn_neg(b), "neg: x is bool[2, 3]; bool is not supported");
    CHECK_ERROR(cn_abs(b), "abs: x is bool[2, 3]");
    CHECK_ERROR(cn_sign(b), "sign: x is bool");
    CHECK_ERROR(cn_square(b), "square: x is bool");
    CHECK_ERROR(cn_relu(b), "relu: x is bool");
    CHECK_ERROR(cn_leaky_relu(b, 0.1), "leaky_relu: x is bool");
    CHECK_ERROR(cn_floor(b), "floor: x is bool");
    CHECK_ERROR(cn_ceil(b), "ceil: x is bool");
    CHECK_ERROR(cn_round(b), "round: x is bool");
    CHECK_ERROR(cn_clamp(b, 0, 1), "clamp: x is bool");
    CHECK(cn_logical_not(b) != NULL);
    CHECK(cn_exp(b) != NULL);

    cn_tensor *x = cn_ones(CN_F32, CN_SHAPE(4));
    CHECK_ERROR(cn_softplus(x, 0, 20), "softplus: beta is 0");
    CHECK_ERROR(cn_softplus(x, NAN, 20), "softplus: beta is nan");
    CHECK_ERROR(cn_softplus(x, 1, NAN), "softplus: threshold is NaN");
    CHECK_ERROR(cn_clamp(x, NAN, 1), "clamp: lo = nan, hi = 1: a bound is NaN");
    CHECK_ERROR(cn_clamp(x, 0, NAN), "clamp: lo = 0, hi = nan: a bound is NaN");
    cn_attrs a = {0};
    a.i[0] = 2;
    CHECK_ERROR(cn_op_apply(CN_OP_gelu, &x, 1, &a), "gelu: approximate is 2, not 0 (erf) or 1");
    CHECK_ERROR(cn_op_apply(CN_OP_exp, (cn_tensor *[]){x, x}, 2, NULL), "exp: got 2 inputs");

    /* A NULL input gives NULL and leaves the first error in place. */
    cn_fail("earlier error");
    CHECK(cn_exp(NULL) == NULL);
    CHECK(cn_gelu(NULL, true) == NULL);
    CHECK(cn_clamp(NULL, 0, 1) == NULL);
    CHECK(cn_logical_not(NULL) == NULL);
    CHECK(strstr(cn_last_error(), "earlier error") != NULL);
}

/* ---- threads ---- */

/* 1M elements: the work is split over the pool; the bits must not depend on
 * how (the vectorised body and the scalar tail compute the same thing). */
static void test_threads_bitwise(void) {
    int saved = cn_get_num_threads();
    const int64_t n = 1 << 20;
    cn_manual_seed(7);
    cn_tensor *x = cn_mul_scalar(cn_randn(CN_F32, CN_SHAPE(1024, 1024)), 4);
    cn_tensor *xt = cn_transpose(x, 0, 1);
    cn_tensor *x64 = cn_cast(x, CN_F64);
    if (!x || !xt || !x64) {
        CHECK(0);
        return;
    }
    cn_tensor *ins[3] = {x, xt, x64};
    float *a = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n);
    /* Every op on the contiguous f32 input; the strided and f64 rows of a
     * few (they are the same loops with other element expressions). */
    const char *more[] = {"exp", "tanh", "gelu", "sigmoid", "round", "leaky_relu"};
    for (int i = 0; i < NCASES; i++) {
        const ucase *c = &cases[i];
        if (strstr(c->name, "_small")) continue;
        bool all = false;
        for (size_t m = 0; m < sizeof more / sizeof more[0]; m++) all |= !strcmp(c->name, more[m]);
        for (int t = 0; t < (all ? 3 : 1); t++) {
            cn_scope_begin();
            cn_dtype dt = t == 2 ? CN_F64 : CN_F32;
            size_t bytes = (size_t)n * cn_dtype_size(dt);
            cn_set_num_threads(1);
            cn_tensor *y1 = c->apply(ins[t], c->p);
            cn_set_num_threads(2);
            cn_tensor *y2 = c->apply(ins[t], c->p);
            CHECK_MSG(y1 && y2, "%s: %s", c->name, cn_last_error());
            if (y1 && y2) {
                cn_copy_to_buffer(y1, dt, a, bytes);
                cn_copy_to_buffer(y2, dt, b, bytes);
                CHECK_MSG(memcmp(a, b, bytes) == 0, "%s %s (input %d): 1 and 2 threads differ",
                          c->name, cn_dtype_name(dt), t);
            }
            cn_scope_end();
        }
    }
    /* And the large result is right (spot checks across the row). */
    cn_set_num_threads(2);
    cn_tensor *e = cn_tanh(x);
    float *xv = malloc(sizeof(float) * (size_t)n);
    cn_copy_to_buffer(x, CN_F32, xv, sizeof(float) * (size_t)n);
    cn_copy_to_buffer(e, CN_F32, a, sizeof(float) * (size_t)n);
    for (int64_t k = 0; k < n; k += 4099)
        CHECK_CLOSE(a[k], tanh(xv[k]), 2.4e-7, 1e-30);
    free(xv);
    free(a);
    free(b);
    cn_set_num_threads(saved);
}

int main(void) {
    th_seed(20240611);
    RUN(test_float_values);
    RUN(test_broadcast_and_views);
    RUN(test_special_values);
    RUN(test_special_values_f64);
    RUN(test_integer_dtypes);
    RUN(test_int_to_float);
    RUN(test_half_dtypes);
    RUN(test_logical_not);
    RUN(test_attributes);
    RUN(test_errors);
    RUN(test_threads_bitwise);
    return th_summary();
}
