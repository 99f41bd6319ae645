/* Every instruction-set variant of the hot loops that this CPU runs
 * (src/core/isa.h: default, AVX2, AVX-512), forced one after the other:
 *
 * - the f32 math (exp, log, tanh, sigmoid, gelu, ...) against libm in double
 *   on the special values (NaN, infinities, signed zeros, subnormals, the
 *   overflow and underflow edges, huge values) and on random ones, within
 *   each function's error bound and exactly where the result is 0, inf or
 *   NaN;
 * - the same bits at every level as at the default one (a NaN matching any
 *   NaN) from the elementwise ops, reductions, softmax, cumsum, pooling,
 *   gathers, copies of views, random draws, the fused kernel (also equal to
 *   the same ops unfused, at every level) and an Adam step;
 * - the built-in GEMM, whose AVX2 and AVX-512 tiles use FMA (gemm.c asks
 *   for it) and so round differently from the default ones: against a
 *   product in double at each level, and integer products exactly. */
#include "harness.h"

#include "backend/cpu/gemm.h"
#include "core/core.h"
#include "backend/fused_expr.h"
#include "vmath_ref.h"

#include <float.h>

static int levels[CN_ISA_LEVELS], nlevels;

/* ---- the f32 math against libm ---- */

static const float special[] = {
    NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1.fffffcp-127f,
    -0x1.fffffcp-127f, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX, 1e30f, -1e30f, 1e10f, -1e10f,
    1e-30f, -1e-30f, 1e-8f, -1e-8f, 1e-4f, -1e-4f, 0.5f, -0.5f, 0.625f, -0.625f, 0.875f,
    -0.875f, 1.0f, -1.0f, 1.5f, 2.5f, -2.5f, 3.0f, 10.0f, -10.0f, 10.6f, 17.4f, -17.4f, 20.0f,
    20.5f, 30.0f, -30.0f, 88.72f, 88.7229f, 89.0f, 89.5f, -87.33f, -88.0f, -103.97f, -104.0f,
    -104.5f, -148.0f, -149.0f, -150.0f, -160.0f, 0x1p23f, 8388609.0f, -8388609.0f, 4194304.5f,
    0x1p-126f * 3.0f, -0x1p-140f};
#define NSPECIAL ((int)(sizeof special / sizeof special[0]))
#define NMATH 2053 /* not a multiple of any vector width */

static cn_tensor *a_elu(cn_tensor *x) { return cn_elu(x, 1); }
static cn_tensor *a_sqrt(cn_tensor *x) { return cn_sqrt(x); }
static cn_tensor *a_floor(cn_tensor *x) { return cn_floor(x); }
static cn_tensor *a_ceil(cn_tensor *x) { return cn_ceil(x); }
static cn_tensor *a_round(cn_tensor *x) { return cn_round(x); }

typedef struct mcase {
    const char *name;
    apply_fn apply;
    ref_fn ref;
    int ulps; /* the bound from vmath.h's measured errors, rounded up */
} mcase;

static const mcase mcases[] = {
    {"exp", a_exp, exp, 1},
    {"expm1", a_expm1, expm1, 2},
    {"log", a_log, log, 1},
    {"log1p", a_log1p, log1p, 2},
    {"tanh", a_tanh, tanh, 2},
    {"sigmoid", a_sigmoid, ref_sigmoid, 3},
    {"silu", a_silu, ref_silu, 4},
    {"erf", a_erf, erf, 2},
    {"gelu", a_gelu, ref_gelu, 6},
    {"gelu_tanh", a_gelu_tanh, ref_gelu_tanh, 3},
    {"softplus", a_softplus, ref_softplus, 2},
    {"elu", a_elu, ref_elu, 2},
    {"rsqrt", a_rsqrt, ref_rsqrt, 1},
    {"sqrt", a_sqrt, sqrt, 0},
    {"floor", a_floor, floor, 0},
    {"ceil", a_ceil, ceil, 0},
    {"round", a_round, nearbyint, 0},
};
#define NMCASES ((int)(sizeof mcases / sizeof mcases[0]))

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The special values, then random ones: magnitudes log-uniform over the
 * whole f32 range, and a uniform stretch where exp and friends change. */
static cn_tensor *math_input(void) {
    float v[NMATH];
    th_seed(11);
    for (int i = 0; i < NMATH; i++) {
        if (i < NSPECIAL) v[i] = special[i];
        else if (i % 2) v[i] = (float)th_uniform(-120, 100);
        else v[i] = (float)((th_next() & 1 ? -1 : 1) * exp(th_uniform(-92, 88)));
    }
    return cn_from_data(CN_F32, CN_SHAPE(NMATH), v);
}

static void check_math(const mcase *c, cn_tensor *x, int level) {
    cn_tensor *y = c->apply(x);
    CHECK(y != NULL);
    if (!y) return;
    const float *xv = cn_data(x), *yv = cn_data(y);
    int bad = 0;
    for (int i = 0; i < NMATH && bad < 5; i++) {
        double r = c->ref((double)xv[i]);
        float want = (float)r, got = yv[i];
        bool ok;
        if (isnan(r)) ok = isnan(got);
        else if (r == 0 || isinf(r)) ok = same_bits(got, want);
        else ok = !isnan(got) && llabs(ref_ordered(got) - ref_ordered(want)) <= c->ulps;
        if (!ok) {
            bad++;
            CHECK_MSG(false, "%s at level %s: x = %a gives %a, libm %a (%d ulp allowed)", c->name,
                      cn_isa_name(level), xv[i], got, want, c->ulps);
        }
    }
}

static void test_math_every_level(void) {
    cn_tensor *x = math_input();
    for (int k = 0; k < nlevels; k++) {
        CHECK(cn_isa_set(levels[k]) == CN_OK);
        for (int c = 0; c < NMCASES; c++) check_math(&mcases[c], x, levels[k]);
    }
}

/* ---- the same bits at every level ---- */

/* Inputs shared by the cases. */
static cn_tensor *X, *Y, *XM, *Z64, *COL, *ROW, *IMG, *IDX, *GIDX, *SCAL, *EDGE, *MATH;

typedef cn_tensor *(*case_fn)(void);

/* Every function of the accuracy test, contiguous, on its inputs. */
static cn_tensor *c_math(void) {
    cn_tensor *r[NMCASES];
    for (int c = 0; c < NMCASES; c++) r[c] = mcases[c].apply(MATH);
    return cn_stack(r, NMCASES, 0);
}
static cn_tensor *c_add(void) { return cn_add(X, Y); }
static cn_tensor *c_sub_bcast(void) { return cn_sub(XM, ROW); }
static cn_tensor *c_mul_col(void) { return cn_mul(XM, COL); }
static cn_tensor *c_div(void) { return cn_div(X, Y); }
static cn_tensor *c_pow(void) { return cn_pow(cn_abs(X), Y); }
static cn_tensor *c_pow_half(void) { return cn_pow_scalar(X, 0.5); }
static cn_tensor *c_max(void) { return cn_maximum(X, Y); }
static cn_tensor *c_min_scalar(void) { return cn_minimum(X, SCAL); }
static cn_tensor *c_lt(void) { return cn_lt(X, Y); }
static cn_tensor *c_where(void) { return cn_where(cn_lt(X, Y), X, SCAL); }
static cn_tensor *c_relu(void) { return cn_relu(X); }
static cn_tensor *c_leaky(void) { return cn_leaky_relu(EDGE, 0.01); }
static cn_tensor *c_clamp(void) { return cn_clamp(EDGE, -3, 2.5); }
static cn_tensor *c_sign(void) { return cn_sign(EDGE); }
static cn_tensor *c_recip(void) { return cn_reciprocal(EDGE); }
static cn_tensor *c_exp_strided(void) { return cn_exp(cn_slice(X, 0, 1, cn_dim(X, 0), 3)); }
static cn_tensor *c_tanh_t(void) { return cn_tanh(cn_transpose(XM, 0, 1)); }
static cn_tensor *c_exp64(void) { return cn_exp(Z64); }
static cn_tensor *c_sigmoid64(void) { return cn_sigmoid(Z64); }
static cn_tensor *c_gelu64(void) { return cn_gelu(Z64, false); }
static cn_tensor *c_sum_all(void) { return cn_sum(XM, NULL, 0, false); }
static cn_tensor *c_sum0(void) { return cn_sum(XM, CN_AXES(0), false); }
static cn_tensor *c_sum1_64(void) { return cn_sum(cn_reshape(Z64, CN_SHAPE(31, 67)), CN_AXES(1), false); }
static cn_tensor *c_mean1(void) { return cn_mean(XM, CN_AXES(1), true); }
static cn_tensor *c_prod0(void) { return cn_prod(cn_div_scalar(XM, 2), CN_AXES(0), false); }
static cn_tensor *c_max1(void) { return cn_max(XM, CN_AXES(1), false); }
static cn_tensor *c_min0(void) { return cn_min(XM, CN_AXES(0), false); }
static cn_tensor *c_var1(void) { return cn_var(XM, CN_AXES(1), 1, false); }
static cn_tensor *c_lse0(void) { return cn_logsumexp(XM, CN_AXES(0), false); }
static cn_tensor *c_lse1(void) { return cn_logsumexp(XM, CN_AXES(1), false); }
static cn_tensor *c_argmax1(void) { return cn_argmax(XM, 1, false); }
static cn_tensor *c_norm(void) { return cn_norm(XM, 2, CN_AXES(1), false); }
static cn_tensor *c_softmax1(void) { return cn_softmax(XM, 1); }
static cn_tensor *c_softmax0(void) { return cn_softmax(XM, 0); }
static cn_tensor *c_logsoftmax1(void) { return cn_log_softmax(XM, 1); }
static cn_tensor *c_logsoftmax0(void) { return cn_log_softmax(XM, 0); }
static cn_tensor *c_cumsum0(void) { return cn_cumsum(XM, 0); }
static cn_tensor *c_cumsum1(void) { return cn_cumsum(XM, 1); }
static cn_tensor *c_maxpool(void) { return cn_max_pool2d(IMG, &(cn_pool_opts){.kernel = {2, 2}}); }
static cn_tensor *c_maxpool3(void) {
    return cn_max_pool2d(IMG, &(cn_pool_opts){.kernel = {3, 3}, .stride = {2, 1}, .padding = {1, 1}});
}
static cn_tensor *c_avgpool(void) { return cn_avg_pool2d(IMG, &(cn_pool_opts){.kernel = {3, 2}}); }
static cn_tensor *c_index_select(void) { return cn_index_select(XM, 0, IDX); }
static cn_tensor *c_gather(void) { return cn_gather(XM, 1, GIDX); }
static cn_tensor *c_copy_t(void) { return cn_contiguous(cn_transpose(XM, 0, 1)); }
static cn_tensor *c_uniform(void) {
    cn_manual_seed(5);
    return cn_uniform(CN_F32, CN_SHAPE(1001), -1, 1);
}
static cn_tensor *c_normal64(void) {
    cn_manual_seed(6);
    return cn_normal(CN_F64, CN_SHAPE(999), 0, 1);
}
static cn_tensor *c_bernoulli(void) {
    cn_manual_seed(7);
    return cn_bernoulli(cn_sigmoid(X));
}
static cn_tensor *c_igemm(void) {
    cn_tensor *a = cn_cast(cn_mul_scalar(XM, 10), CN_I32);
    return cn_matmul(a, cn_transpose(a, 0, 1));
}

/* exp(-relu(tanh(2x + 1) * y - y)) * 0.5, fused (as a static program's
 * fused step runs it) and as ops; the two must agree at every level. */
#define I(OP, A, B) {.op = CN_OP_##OP, .a = A, .b = B, .c = -1}
static const cn_fused_instr chain[8] = {
    I(mul, 0, 2), I(add, 5, 3), I(tanh, 6, -1), I(mul, 7, 1),
    I(sub, 8, 1), I(relu, 9, -1), I(neg, 10, -1), I(exp, 11, -1),
};
#undef I
static cn_tensor *c_fused(void) {
    cn_tensor *half = cn_scalar(CN_F32, 0.5);
    cn_tensor *in[5] = {X, Y, cn_scalar(CN_F32, 2), cn_scalar(CN_F32, 1), half};
    cn_fused_expr e = {5, 8, (cn_fused_instr *)chain, 12};
    cn_tensor *out = cn_empty(CN_F32, 1, cn_shape(X));
    if (cn_fused_run(&e, in, out) != CN_OK) return NULL;
    cn_tensor *t = cn_exp(cn_neg(cn_relu(cn_sub(cn_mul(cn_tanh(cn_add(cn_mul_scalar(X, 2), in[3])), Y), Y))));
    int64_t n = cn_numel(X);
    CHECK_MSG(t && memcmp(cn_data(t), cn_data(out), (size_t)n * sizeof(float)) == 0,
              "fused and unfused differ at level %s", cn_isa_name(cn_isa()));
    return out;
}

/* One Adam step of a parameter, from a gradient through the usual ops. */
static cn_tensor *c_adam(void) {
    cn_tensor *p = cn_clone(XM);
    cn_set_requires_grad(p, true);
    cn_tensor *loss = cn_sum(cn_mul(cn_tanh(p), cn_sigmoid(cn_mul(p, p))), NULL, 0, false);
    if (cn_backward(loss, NULL) != CN_OK) return NULL;
    cn_optimizer *opt = cn_adam(&p, 1, &(cn_adam_opts){.lr = 0.01, .weight_decay = 0.1});
    if (!opt || cn_optimizer_step(opt) != CN_OK || cn_optimizer_step(opt) != CN_OK) return NULL;
    cn_optimizer_free(opt);
    return cn_clone(p);
}

typedef struct bcase {
    const char *name;
    case_fn fn;
} bcase;
#define C(f) {#f, c_##f}
static const bcase bcases[] = {
    C(math), C(add), C(sub_bcast), C(mul_col), C(div), C(pow), C(pow_half), C(max), C(min_scalar),
    C(lt), C(where), C(relu), C(leaky), C(clamp), C(sign), C(recip), C(exp_strided),
    C(tanh_t), C(exp64), C(sigmoid64), C(gelu64), C(sum_all), C(sum0), C(sum1_64), C(mean1),
    C(prod0), C(max1), C(min0), C(var1), C(lse0), C(lse1), C(argmax1), C(norm), C(softmax1),
    C(softmax0), C(logsoftmax1), C(logsoftmax0), C(cumsum0), C(cumsum1), C(maxpool),
    C(maxpool3), C(avgpool), C(index_select), C(gather), C(copy_t), C(uniform), C(normal64),
    C(bernoulli), C(igemm), C(fused), C(adam),
};
#undef C
#define NBCASES ((int)(sizeof bcases / sizeof bcases[0]))

/* Same elements, bit for bit, but any NaN equals any NaN (which NaN an op
 * on two NaNs returns is the compiler's operand order). */
static bool same_values(const cn_tensor *a, const cn_tensor *b) {
    if (cn_tensor_dtype(a) != cn_tensor_dtype(b) || cn_numel(a) != cn_numel(b)) return false;
    cn_dtype dt = cn_tensor_dtype(a);
    int64_t n = cn_numel(a);
    size_t es = cn_dtype_size(dt);
    const char *p = cn_data(a), *q = cn_data(b);
    for (int64_t i = 0; i < n; i++) {
        const char *u = p + i * (int64_t)es, *v = q + i * (int64_t)es;
        if (memcmp(u, v, es) == 0) continue;
        if (dt == CN_F32) {
            float x, y;
            memcpy(&x, u, 4), memcpy(&y, v, 4);
            if (isnan(x) && isnan(y)) continue;
        } else if (dt == CN_F64) {
            double x, y;
            memcpy(&x, u, 8), memcpy(&y, v, 8);
            if (isnan(x) && isnan(y)) continue;
        }
        return false;
    }
    return true;
}

static void make_inputs(void) {
    cn_manual_seed(3);
    int64_t n = 4099;
    X = cn_uniform(CN_F32, CN_SHAPE(n), -4, 4);
    Y = cn_uniform(CN_F32, CN_SHAPE(n), -4, 4);
    XM = cn_uniform(CN_F32, CN_SHAPE(37, 131), -3, 3);
    Z64 = cn_uniform(CN_F64, CN_SHAPE(31 * 67), -30, 30);
    COL = cn_uniform(CN_F32, CN_SHAPE(37, 1), -2, 2);
    ROW = cn_uniform(CN_F32, CN_SHAPE(131), -2, 2);
    IMG = cn_uniform(CN_F32, CN_SHAPE(2, 3, 17, 19), -1, 1);
    IDX = cn_from_data(CN_I64, CN_SHAPE(6), (int64_t[]){36, 0, 5, 5, 17, 2});
    GIDX = cn_randint(0, 131, CN_I64, CN_SHAPE(37, 50));
    SCAL = cn_scalar(CN_F32, 0.25);
    EDGE = cn_from_data(CN_F32, CN_SHAPE(NSPECIAL), special);
    MATH = math_input();
}

static void test_same_bits_every_level(void) {
    make_inputs();
    cn_tensor *want[NBCASES];
    CHECK(cn_isa_set(CN_ISA_DEFAULT) == CN_OK);
    for (int c = 0; c < NBCASES; c++) {
        cn_scope_begin();
        want[c] = cn_keep(bcases[c].fn());
        cn_scope_end();
        CHECK_MSG(want[c] != NULL, "%s failed: %s", bcases[c].name, cn_last_error());
    }
    for (int k = 1; k < nlevels; k++) {
        CHECK(cn_isa_set(levels[k]) == CN_OK);
        for (int c = 0; c < NBCASES; c++) {
            cn_scope_begin();
            cn_tensor *got = bcases[c].fn();
            CHECK_MSG(got && want[c] && same_values(got, want[c]),
                      "%s: level %s differs from the default level (%s)", bcases[c].name,
                      cn_isa_name(levels[k]), got ? "values" : cn_last_error());
            cn_scope_end();
        }
    }
}

/* ---- the built-in GEMM: FMA in the wider variants ---- */

static void test_gemm_every_level(void) {
    const int64_t m = 45, n = 83, k = 67;
    float a[45 * 67], b[67 * 83], c[45 * 83];
    double ad[45 * 67], bd[67 * 83];
    th_seed(5);
    for (int i = 0; i < m * k; i++) ad[i] = a[i] = (float)th_uniform(-1, 1);
    for (int i = 0; i < k * n; i++) bd[i] = b[i] = (float)th_uniform(-1, 1);
    for (int l = 0; l < nlevels; l++) {
        CHECK(cn_isa_set(levels[l]) == CN_OK);
        cn_gemm_select_tile(CN_F32, -1); /* the level's own tile */
        CHECK(cn_gemm_builtin(CN_F32, m, n, k, a, k, 1, b, n, 1, c, n) == CN_OK);
        double worst = 0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double r = 0, mag = 0;
                for (int64_t p = 0; p < k; p++) {
                    r += ad[i * k + p] * bd[p * n + j];
                    mag += fabs(ad[i * k + p] * bd[p * n + j]);
                }
                double e = fabs(c[i * n + j] - r) / (mag * FLT_EPSILON);
                if (e > worst) worst = e;
            }
        /* |error| <= k eps sum |a b| is the textbook bound; it is far lower. */
        CHECK_MSG(worst <= 8, "gemm at level %s: error %.2f eps * sum|ab|", cn_isa_name(levels[l]),
                  worst);
    }
    cn_gemm_select_tile(CN_F32, -1);
}

/* ---- setting the level ---- */

static void test_set(void) {
    CHECK(cn_isa_available(CN_ISA_DEFAULT));
    CHECK(cn_isa_max() >= CN_ISA_DEFAULT && cn_isa_max() < CN_ISA_LEVELS);
    CHECK_STATUS_ERROR(cn_isa_set(-1), "not one of");
    CHECK_STATUS_ERROR(cn_isa_set(CN_ISA_LEVELS), "not one of");
    for (int l = 0; l < CN_ISA_LEVELS; l++) {
        CHECK(cn_isa_name(l) != NULL);
        if (!cn_isa_available(l)) CHECK_STATUS_ERROR(cn_isa_set(l), "not available");
    }
    CHECK(cn_isa_name(CN_ISA_LEVELS) == NULL);
    CHECK(cn_isa_set(cn_isa_max()) == CN_OK && cn_isa() == cn_isa_max());
}

int main(void) {
    for (int l = 0; l < CN_ISA_LEVELS; l++)
        if (cn_isa_available(l)) levels[nlevels++] = l;
    printf("levels:");
    for (int k = 0; k < nlevels; k++) printf(" %s", cn_isa_name(levels[k]));
    printf(" (active at start: %s)\n", cn_isa_name(cn_isa()));
    RUN(test_set);
    RUN(test_math_every_level);
    RUN(test_same_bits_every_level);
    RUN(test_gemm_every_level);
    CHECK(cn_isa_set(cn_isa_max()) == CN_OK);
    return th_summary();
}
