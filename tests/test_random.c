/* Random numbers: the documented mapping from Philox outputs to values,
 * reproducibility, independence from the thread count, the moments of large
 * draws, randperm, the generator state, and every argument error. */
#include "harness.h"

#include "core/core.h" /* cn_philox: the reference for the value mapping */

#define N_BIG (1 << 20)
#define TWO_PI 6.283185307179586477

/* The four Philox lanes of counter ctr. */
static void lanes(uint64_t key, uint64_t ctr, uint32_t o[4]) { cn_philox(key, ctr, o); }

static uint64_t state_offset(void) {
    uint64_t off;
    cn_rng_get_state(NULL, &off);
    return off;
}

/* Contiguous data of t as doubles (values, whatever the dtype). */
static double *values(const cn_tensor *t) {
    int64_t n = cn_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (cn_copy_to_buffer(t, CN_F64, v, sizeof(double) * (size_t)n) != CN_OK) {
        free(v);
        return NULL;
    }
    return v;
}

/* ---- the generator and the value mapping ---- */

static void test_philox_known_answer(void) {
    /* Random123's known-answer vector for Philox-4x32-10, zero key and counter */
    uint32_t o[4];
    cn_philox(0, 0, o);
    CHECK(o[0] == 0x6627e8d5u && o[1] == 0xe169c58du && o[2] == 0xbc57ac4cu && o[3] == 0x9b00dbd8u);
    /* both halves of key and counter matter */
    uint32_t a[4], b[4], c[4], d[4];
    cn_philox(1, 0, a);
    cn_philox(UINT64_C(1) << 32, 0, b);
    cn_philox(0, 1, c);
    cn_philox(0, UINT64_C(1) << 32, d);
    CHECK(memcmp(a, b, 16) && memcmp(a, o, 16) && memcmp(c, d, 16) && memcmp(c, o, 16));
}

/* Element i of a draw at state (seed, off) against its definition. Counters
 * start just below 2^32 so the carry into the counter's high word is
 * crossed, and the size is not a multiple of any block. */
static void test_value_mapping(void) {
    const uint64_t seed = UINT64_C(0x0123456789abcdef), off = (UINT64_C(1) << 32) - 37;
    const int64_t n = 100003;
    uint32_t o[4];
#define DRAW(expr) (cn_rng_set_state(seed, off), (expr))
    double *f32 = values(DRAW(cn_rand(CN_F32, 1, &n)));
    double *f64 = values(DRAW(cn_rand(CN_F64, 1, &n)));
    double *f16 = values(DRAW(cn_rand(CN_F16, 1, &n)));
    double *bf16 = values(DRAW(cn_rand(CN_BF16, 1, &n)));
    double *uni = values(DRAW(cn_uniform(CN_F64, 1, &n, -2, 6)));
    double *ri = values(DRAW(cn_randint(-5, 251, CN_I64, 1, &n)));
    double *ru8 = values(DRAW(cn_randint(0, 256, CN_U8, 1, &n)));
    double *rn = values(DRAW(cn_randn(CN_F64, 1, &n)));
    double *nf = values(DRAW(cn_normal(CN_F32, 1, &n, 3, 2)));
    cn_tensor *p = cn_full(CN_F32, 1, &n, 0.375);
    double *be = values(DRAW(cn_bernoulli(p)));
#undef DRAW
    CHECK(f32 && f64 && f16 && bf16 && uni && ri && ru8 && rn && nf && be);
    if (!(f32 && f64 && f16 && bf16 && uni && ri && ru8 && rn && nf && be)) return;
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        lanes(seed, off + (uint64_t)i, o);
        uint64_t b53 = ((uint64_t)o[0] << 21) | (o[1] >> 11);
        double u24 = (o[0] >> 8) * 0x1p-24, u53 = (double)b53 * 0x1p-53;
        double n1 = (double)((((uint64_t)o[0] << 21) | (o[1] >> 11)) + 1) * 0x1p-53;
        double n2 = (double)(((uint64_t)o[2] << 21) | (o[3] >> 11)) * 0x1p-53;
        double z = sqrt(-2 * log(n1)) * cos(TWO_PI * n2);
        double zf =
            sqrt(-2 * log(((o[0] >> 8) + 1) * 0x1p-24)) * cos(TWO_PI * (o[1] >> 8) * 0x1p-24);
        uint64_t x = ((uint64_t)o[0] << 32) | o[1];
        bool ok = f32[i] == u24 && f64[i] == u53 && f16[i] == (o[0] >> 21) * 0x1p-11 &&
                  bf16[i] == (o[0] >> 24) * 0x1p-8 && uni[i] == -2 + 8 * u53 &&
                  ri[i] == -5 + (double)(x >> 56) && ru8[i] == (double)(x >> 56) &&
                  th_close(rn[i], z, 1e-12, 1e-12) && th_close(nf[i], 3 + 2 * zf, 1e-5, 1e-5) &&
                  be[i] == (u24 < 0.375);
        if (!ok && bad++ < 5)
            th_fail(__FILE__, __LINE__,
                    "element %" PRId64 ": rand f32 %.9g (%.9g), f64 %.17g (%.17g), randn %.17g "
                    "(%.17g), randint %g (%g), bernoulli %g",
                    i, f32[i], u24, f64[i], u53, rn[i], z, ri[i], -5 + (double)(x >> 56), be[i]);
    }
    th_checks++;
    free(f32);
    free(f64);
    free(f16);
    free(bf16);
    free(uni);
    free(ri);
    free(ru8);
    free(rn);
    free(nf);
    free(be);
}

static void test_reproducible(void) {
    int64_t shape[2] = {123, 457};
    cn_manual_seed(7);
    uint64_t seed, off;
    cn_rng_get_state(&seed, &off);
    CHECK(seed == 7 && off == 0);
    cn_tensor *a = cn_rand(CN_F32, 2, shape);
    CHECK_EQ_INT(state_offset(), 123 * 457);
    cn_tensor *a2 = cn_rand(CN_F32, 2, shape); /* the next draw differs */
    cn_manual_seed(7);
    cn_tensor *b = cn_rand(CN_F32, 2, shape);
    CHECK(cn_equal(a, b));
    cn_manual_seed(8);
    cn_tensor *c = cn_rand(CN_F32, 2, shape);
    int64_t same_c = 0, same_a2 = 0;
    for (int64_t k = 0; k < 123 * 457; k++) {
        same_c += th_at(a, k) == th_at(c, k);
        same_a2 += th_at(a, k) == th_at(a2, k);
    }
    CHECK_MSG(same_c < 20 && same_a2 < 20, "%" PRId64 " and %" PRId64 " equal values", same_c,
              same_a2);

    /* get_state / set_state replay any draw */
    cn_rng_get_state(&seed, &off);
    cn_tensor *n1 = cn_normal(CN_F64, CN_SHAPE(50, 3), 1, 2);
    cn_tensor *i1 = cn_randint(0, 1000, CN_I32, CN_SHAPE(77));
    cn_tensor *p1 = cn_randperm(500);
    cn_tensor *q1 = cn_bernoulli(cn_full(CN_F64, CN_SHAPE(9, 9), 0.5));
    cn_rng_set_state(seed, off);
    CHECK(cn_equal(n1, cn_normal(CN_F64, CN_SHAPE(50, 3), 1, 2)));
    CHECK(cn_equal(i1, cn_randint(0, 1000, CN_I32, CN_SHAPE(77))));
    CHECK(cn_equal(p1, cn_randperm(500)));
    CHECK(cn_equal(q1, cn_bernoulli(cn_full(CN_F64, CN_SHAPE(9, 9), 0.5))));
    /* each draw advances the offset by its element count */
    CHECK_EQ_INT(state_offset(), off + 150 + 77 + 500 + 81);
    uint64_t o0 = state_offset();
    cn_randn(CN_F32, 0, NULL);
    CHECK_EQ_INT(state_offset(), o0 + 1);
    cn_uniform(CN_F64, CN_SHAPE(4, 0, 3), 0, 1);
    cn_bernoulli(cn_zeros(CN_F32, CN_SHAPE(0)));
    cn_randperm(0);
    CHECK_EQ_INT(state_offset(), o0 + 1);
    /* a fresh seed restarts the stream */
    cn_manual_seed(7);
    CHECK_EQ_INT(state_offset(), 0);
    CHECK(cn_equal(a, cn_rand(CN_F32, 2, shape)));
}

/* ---- the same bits for any thread count ---- */

typedef cn_tensor *(*draw_fn)(void);
static cn_tensor *bern_p;
static cn_tensor *d_rand32(void) { return cn_rand(CN_F32, CN_SHAPE(N_BIG + 13)); }
static cn_tensor *d_rand64(void) { return cn_rand(CN_F64, CN_SHAPE(1031, 1021)); }
static cn_tensor *d_rand16(void) { return cn_rand(CN_F16, CN_SHAPE(N_BIG)); }
static cn_tensor *d_randb16(void) { return cn_uniform(CN_BF16, CN_SHAPE(N_BIG), -4, 4); }
static cn_tensor *d_randn32(void) { return cn_randn(CN_F32, CN_SHAPE(N_BIG + 1)); }
static cn_tensor *d_randn64(void) { return cn_normal(CN_F64, CN_SHAPE(N_BIG - 1), -1, 3); }
static cn_tensor *d_randint(void) { return cn_randint(-100, 100, CN_I32, CN_SHAPE(N_BIG)); }
static cn_tensor *d_bern(void) { return cn_bernoulli(bern_p); }

static void test_thread_independence(void) {
    static const draw_fn fns[] = {d_rand32,  d_rand64,  d_rand16,  d_randb16,
                                  d_randn32, d_randn64, d_randint, d_bern};
    static const char *names[] = {"rand f32",  "rand f64",   "rand f16", "uniform bf16",
                                  "randn f32", "normal f64", "randint",  "bernoulli"};
    int saved = cn_get_num_threads();
    /* p in a transposed layout, so the kernel walks strided rows */
    bern_p = cn_transpose(cn_rand(CN_F32, CN_SHAPE(1025, 1023)), 0, 1);
    for (size_t f = 0; f < sizeof fns / sizeof *fns; f++) {
        cn_scope_begin();
        cn_tensor *ref = NULL;
        static const int threads[] = {1, 2, 3};
        for (int ti = 0; ti < 3; ti++) {
            cn_set_num_threads(threads[ti]);
            cn_rng_set_state(99, 12345);
            cn_tensor *t = fns[f]();
            CHECK(t != NULL);
            if (!t) break;
            if (!ref) {
                ref = t;
                continue;
            }
            size_t bytes = (size_t)cn_numel(t) * cn_dtype_size(cn_tensor_dtype(t));
            CHECK_MSG(cn_is_contiguous(t) && memcmp(cn_data(t), cn_data(ref), bytes) == 0,
                      "%s with %d threads differs from 1 thread", names[f], threads[ti]);
        }
        cn_scope_end();
    }
    cn_set_num_threads(saved);
}

/* ---- moments of large draws ---- */

typedef struct moments {
    double mean, var, skew, kurt, min, max, lag1;
} moments;

static moments moments_of(const double *v, int64_t n) {
    moments m = {0, 0, 0, 0, INFINITY, -INFINITY, 0};
    for (int64_t i = 0; i < n; i++) {
        m.mean += v[i];
        m.min = v[i] < m.min ? v[i] : m.min;
        m.max = v[i] > m.max ? v[i] : m.max;
    }
    m.mean /= (double)n;
    double m2 = 0, m3 = 0, m4 = 0, c = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = v[i] - m.mean;
        m2 += d * d;
        m3 += d * d * d;
        m4 += d * d * d * d;
        if (i) c += d * (v[i - 1] - m.mean);
    }
    m.var = m2 / (double)n;
    m.skew = m3 / (double)n / pow(m.var, 1.5);
    m.kurt = m4 / (double)n / (m.var * m.var);
    m.lag1 = c / m2;
    return m;
}

/* |got - want| within k standard errors. */
#define CHECK_SIGMA(got, want, se, what)                                                           \
    CHECK_MSG(fabs((got) - (want)) <= 6 * (se), "%s: %.6g, expected %.6g +- %.3g", what,           \
              (double)(got), (double)(want), 6 * (double)(se))

static void check_uniform(const cn_tensor *t, double lo, double hi, const char *what) {
    int64_t n = cn_numel(t);
    double *v = values(t);
    if (!v) return;
    moments m = moments_of(v, n);
    double w = hi - lo, sn = sqrt((double)n);
    CHECK_MSG(m.min >= lo && m.max < hi, "%s: range [%.9g, %.9g]", what, m.min, m.max);
    CHECK_SIGMA(m.mean, (lo + hi) / 2, w / sqrt(12.0) / sn, what);
    CHECK_SIGMA(m.var, w * w / 12, w * w * sqrt(1.0 / 80 - 1.0 / 144) / sn, what);
    CHECK_SIGMA(m.lag1, 0, 1 / sn, what);
    /* 32 equal bins */
    int64_t bins[32] = {0};
    for (int64_t i = 0; i < n; i++) {
        int b = (int)((v[i] - lo) / w * 32);
        bins[b < 0 ? 0 : b > 31 ? 31 : b]++;
    }
    double e = (double)n / 32, se = sqrt(e * 31 / 32);
    for (int b = 0; b < 32; b++) CHECK_SIGMA((double)bins[b], e, se, what);
    free(v);
}

static double normal_cdf(double x) { return 0.5 * (1 + erf(x / sqrt(2.0))); }

static void check_normal(const cn_tensor *t, double mean, double std, double slack,
                         const char *what) {
    int64_t n = cn_numel(t);
    double *v = values(t);
    if (!v) return;
    moments m = moments_of(v, n);
    double sn = sqrt((double)n);
    CHECK_SIGMA(m.mean, mean, std / sn + slack, what);
    CHECK_SIGMA(m.var, std * std, std * std * sqrt(2.0) / sn + slack, what);
    CHECK_SIGMA(m.skew, 0, sqrt(6.0) / sn + slack, what);
    CHECK_SIGMA(m.kurt, 3, sqrt(24.0) / sn + slack, what);
    CHECK_SIGMA(m.lag1, 0, 1 / sn, what);
    static const double xs[] = {-2.5, -1.5, -0.5, 0, 0.7, 1.96, 3};
    for (size_t k = 0; k < sizeof xs / sizeof *xs; k++) {
        int64_t below = 0;
        for (int64_t i = 0; i < n; i++) below += v[i] <= mean + xs[k] * std;
        double pk = normal_cdf(xs[k]);
        CHECK_SIGMA((double)below / (double)n, pk, sqrt(pk * (1 - pk)) / sn + slack, what);
    }
    free(v);
}

static void test_moments_uniform(void) {
    cn_manual_seed(2024);
    check_uniform(cn_rand(CN_F32, CN_SHAPE(N_BIG)), 0, 1, "rand f32");
    check_uniform(cn_rand(CN_F64, CN_SHAPE(1024, 1024)), 0, 1, "rand f64");
    check_uniform(cn_uniform(CN_F32, CN_SHAPE(N_BIG), -3, 5), -3, 5, "uniform f32");
    check_uniform(cn_uniform(CN_F64, CN_SHAPE(N_BIG), 1e6, 1e6 + 0.5), 1e6, 1e6 + 0.5,
                  "uniform f64 offset");
    /* half types: on their own grid, below 1, and the right spread */
    cn_tensor *h = cn_rand(CN_F16, CN_SHAPE(N_BIG));
    cn_tensor *b = cn_rand(CN_BF16, CN_SHAPE(N_BIG));
    /* uniform over the grid k / 2^bits: centred half a step below 0.5 */
    check_uniform(h, -0x1p-12, 1 - 0x1p-12, "rand f16");
    check_uniform(b, -0x1p-9, 1 - 0x1p-9, "rand bf16");
    double *hv = values(h), *bv = values(b);
    bool grid = true;
    for (int64_t i = 0; i < N_BIG; i++)
        grid &= hv[i] * 2048 == floor(hv[i] * 2048) && bv[i] * 256 == floor(bv[i] * 256);
    CHECK(grid);
    free(hv);
    free(bv);
    cn_tensor *hu = cn_uniform(CN_F16, CN_SHAPE(N_BIG), -1, 1);
    cn_stats s;
    cn_tensor_stats(hu, &s);
    CHECK(s.min >= -1 && s.max < 1 && fabs(s.mean) < 0.01);
}

static void test_moments_normal(void) {
    cn_manual_seed(77);
    check_normal(cn_randn(CN_F32, CN_SHAPE(N_BIG)), 0, 1, 0, "randn f32");
    check_normal(cn_randn(CN_F64, CN_SHAPE(N_BIG)), 0, 1, 0, "randn f64");
    check_normal(cn_normal(CN_F64, CN_SHAPE(512, 2048), 10, 0.5), 10, 0.5, 0, "normal f64");
    check_normal(cn_normal(CN_F32, CN_SHAPE(N_BIG), -3, 4), -3, 4, 0, "normal f32");
    /* rounding to a half type adds a little error of its own */
    check_normal(cn_randn(CN_F16, CN_SHAPE(N_BIG)), 0, 1, 1e-3, "randn f16");
    check_normal(cn_randn(CN_BF16, CN_SHAPE(N_BIG)), 0, 1, 4e-3, "randn bf16");
    cn_tensor *z = cn_normal(CN_F32, CN_SHAPE(1000), 2.5, 0);
    CHECK(z && cn_equal(z, cn_full(CN_F32, CN_SHAPE(1000), 2.5)));
    /* f32 draws are finite: u1 > 0 keeps the log finite */
    cn_stats s;
    cn_tensor_stats(cn_randn(CN_F32, CN_SHAPE(N_BIG)), &s);
    CHECK(s.nan_count == 0 && s.inf_count == 0 && s.max < 6 && s.min > -6);
}

static void test_moments_randint(void) {
    cn_manual_seed(5);
    cn_tensor *t = cn_randint(-3, 7, CN_I32, CN_SHAPE(N_BIG));
    CHECK(cn_tensor_dtype(t) == CN_I32);
    double *v = values(t);
    int64_t count[10] = {0};
    bool in_range = true;
    for (int64_t i = 0; i < N_BIG; i++) {
        in_range &= v[i] >= -3 && v[i] < 7 && v[i] == floor(v[i]);
        if (v[i] >= -3 && v[i] < 7) count[(int)v[i] + 3]++;
    }
    CHECK(in_range);
    for (int k = 0; k < 10; k++)
        CHECK_SIGMA((double)count[k] / N_BIG, 0.1, sqrt(0.09 / N_BIG), "randint frequency");
    moments m = moments_of(v, N_BIG);
    CHECK_SIGMA(m.mean, 1.5, sqrt(99.0 / 12) / sqrt((double)N_BIG), "randint mean");
    free(v);
    /* the whole u8 range */
    cn_tensor *u = cn_randint(0, 256, CN_U8, CN_SHAPE(100000));
    v = values(u);
    bool seen[256] = {false};
    for (int64_t i = 0; i < 100000; i++) seen[(int)v[i]] = true;
    bool all = true;
    for (int k = 0; k < 256; k++) all &= seen[k];
    CHECK(all);
    free(v);
    /* a range wider than 2^63 and one wider than 2^32 */
    cn_tensor *w = cn_randint(INT64_MIN, INT64_MAX, CN_I64, CN_SHAPE(100000));
    const int64_t *wp = cn_data(w);
    int64_t neg = 0;
    for (int64_t i = 0; i < 100000; i++) neg += wp[i] < 0;
    CHECK_SIGMA((double)neg / 100000, 0.5, 0.5 / sqrt(100000.0), "randint full range sign");
    cn_tensor *g = cn_randint(0, INT64_C(3000000000), CN_I64, CN_SHAPE(N_BIG));
    v = values(g);
    m = moments_of(v, N_BIG);
    CHECK(m.min >= 0 && m.max < 3e9);
    CHECK_SIGMA(m.mean, 1.5e9, 3e9 / sqrt(12.0 * N_BIG), "randint wide mean");
    free(v);
    CHECK(cn_equal(cn_randint(5, 6, CN_I64, CN_SHAPE(100)), cn_full(CN_I64, CN_SHAPE(100), 5)));
    cn_tensor *i32 = cn_randint(INT32_MIN, INT32_MAX, CN_I32, CN_SHAPE(1000));
    CHECK(i32 != NULL);
}

static void test_moments_bernoulli(void) {
    cn_manual_seed(11);
    cn_tensor *p = cn_full(CN_F32, CN_SHAPE(N_BIG), 0.3);
    cn_tensor *b = cn_bernoulli(p);
    CHECK(cn_tensor_dtype(b) == CN_F32);
    cn_stats s;
    cn_tensor_stats(b, &s);
    CHECK(s.min == 0 && s.max == 1);
    CHECK_SIGMA(s.mean, 0.3, sqrt(0.21 / N_BIG), "bernoulli f32 0.3");
    cn_tensor *p64 = cn_full(CN_F64, CN_SHAPE(1024, 1024), 0.7);
    cn_tensor_stats(cn_bernoulli(p64), &s);
    CHECK_SIGMA(s.mean, 0.7, sqrt(0.21 / N_BIG), "bernoulli f64 0.7");
    /* the edges are exact */
    CHECK(cn_equal(cn_bernoulli(cn_zeros(CN_F32, CN_SHAPE(N_BIG))),
                   cn_zeros(CN_F32, CN_SHAPE(N_BIG))));
    CHECK(
        cn_equal(cn_bernoulli(cn_ones(CN_F64, CN_SHAPE(N_BIG))), cn_ones(CN_F64, CN_SHAPE(N_BIG))));
    /* per-element probabilities */
    int64_t n = 500000;
    float *pv = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) pv[i] = (float)(i % 5) / 4;
    cn_tensor *pp = cn_from_data(CN_F32, 1, &n, pv);
    double *bv = values(cn_bernoulli(pp));
    int64_t ones[5] = {0};
    for (int64_t i = 0; i < n; i++) ones[i % 5] += bv[i] == 1;
    for (int k = 0; k < 5; k++) {
        double pk = k / 4.0, f = (double)ones[k] / (double)(n / 5);
        CHECK_SIGMA(f, pk, sqrt(pk * (1 - pk) / (double)(n / 5)), "bernoulli per element");
    }
    free(pv);
    free(bv);
    /* half p: computed in f32, returned as f16 */
    cn_tensor *h = cn_bernoulli(cn_full(CN_F16, CN_SHAPE(100000), 0.5));
    CHECK(cn_tensor_dtype(h) == CN_F16);
    cn_tensor_stats(h, &s);
    CHECK(s.min == 0 && s.max == 1);
    CHECK_SIGMA(s.mean, 0.5, 0.5 / sqrt(100000.0), "bernoulli f16");
}

static void test_bernoulli_layouts(void) {
    int64_t shape[3] = {37, 5, 41};
    double vals[37 * 5 * 41];
    cn_tensor *ref = NULL;
    th_random(CN_F64, 3, shape, 0, 1, TH_CONTIG, vals);
    for (int layout = 0; layout < TH_NLAYOUTS; layout++) {
        cn_tensor *p = th_make(CN_F64, 3, shape, vals, layout);
        cn_rng_set_state(3, 1000);
        cn_tensor *b = cn_bernoulli(p);
        CHECK_SHAPE(b, 37, 5, 41);
        CHECK(cn_is_contiguous(b) && cn_tensor_dtype(b) == CN_F64);
        if (!ref)
            ref = b;
        else
            CHECK_MSG(cn_equal(b, ref), "bernoulli of layout %d differs from contiguous", layout);
    }
    /* a broadcast (stride 0) p */
    cn_tensor *row = cn_rand(CN_F32, CN_SHAPE(1, 41));
    cn_rng_set_state(4, 0);
    cn_tensor *e = cn_bernoulli(cn_expand(row, CN_SHAPE(300, 41)));
    cn_rng_set_state(4, 0);
    cn_tensor *c = cn_bernoulli(cn_contiguous(cn_expand(row, CN_SHAPE(300, 41))));
    CHECK(cn_equal(e, c));
    /* rank 0 */
    cn_tensor *one = cn_bernoulli(cn_scalar(CN_F32, 1));
    CHECK(cn_ndim(one) == 0 && cn_item(one) == 1);
    CHECK_SHAPE(cn_bernoulli(cn_zeros(CN_F64, CN_SHAPE(3, 0))), 3, 0);
}

/* A static graph draws when it runs, not when it is built: every run gives
 * new values and advances the generator; replaying the state replays them. */
static void test_static_graph_redraws(void) {
    cn_graph *g = cn_graph_new();
    cn_tensor *x = cn_placeholder(g, "p", CN_F32, CN_SHAPE(-1));
    cn_tensor *y = cn_bernoulli(x);
    CHECK(y != NULL && cn_is_symbolic_tensor(y));
    cn_program *prog = y ? cn_compile(g, &y, 1, NULL) : NULL;
    CHECK(prog != NULL);
    if (prog) {
        cn_tensor *p = cn_full(CN_F32, CN_SHAPE(4000), 0.5), *o1 = NULL, *o2 = NULL, *o3 = NULL;
        uint64_t seed, off;
        cn_rng_get_state(&seed, &off);
        CHECK(cn_run(prog, &x, &p, 1, &o1, 1) == CN_OK);
        CHECK(cn_run(prog, &x, &p, 1, &o2, 1) == CN_OK);
        CHECK_EQ_INT(state_offset(), off + 8000);
        CHECK(o1 && o2 && !cn_equal(o1, o2));
        cn_rng_set_state(seed, off);
        CHECK(cn_run(prog, &x, &p, 1, &o3, 1) == CN_OK);
        CHECK(o3 && cn_equal(o1, o3));
        cn_stats s;
        cn_tensor_stats(o1, &s);
        CHECK_SIGMA(s.mean, 0.5, 0.5 / sqrt(4000.0), "bernoulli in a graph");
        cn_program_free(prog);
    }
    cn_graph_free(g);
}

/* ---- randperm ---- */

static bool is_permutation(const cn_tensor *t, int64_t n) {
    if (!t || cn_tensor_dtype(t) != CN_I64 || cn_ndim(t) != 1 || cn_numel(t) != n) return false;
    const int64_t *v = cn_data(t);
    char *seen = calloc((size_t)(n > 0 ? n : 1), 1);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        ok = v[i] >= 0 && v[i] < n && !seen[v[i]];
        if (ok) seen[v[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_randperm(void) {
    static const int64_t ns[] = {0, 1, 2, 10, 17, 1000, 100003};
    cn_manual_seed(31);
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        uint64_t o = state_offset();
        cn_tensor *p = cn_randperm(ns[k]);
        CHECK_MSG(is_permutation(p, ns[k]), "randperm(%" PRId64 ")", ns[k]);
        CHECK_EQ_INT(state_offset(), o + (uint64_t)ns[k]);
    }
    /* every ordering of 2 and 3 about equally often; every position of 0 in
     * 8 and 18 (whose last block of counters starts at 1) too */
    int64_t perms[6] = {0}, pos[8] = {0}, pos18[18] = {0}, swapped2 = 0;
    const int draws = 12000;
    cn_scope_begin();
    for (int d = 0; d < draws; d++) {
        const int64_t *v = cn_data(cn_randperm(3));
        perms[v[0] * 2 + (v[1] > v[2])]++;
        const int64_t *w = cn_data(cn_randperm(8));
        for (int i = 0; i < 8; i++)
            if (w[i] == 0) pos[i]++;
        const int64_t *x = cn_data(cn_randperm(18));
        for (int i = 0; i < 18; i++)
            if (x[i] == 0) pos18[i]++;
        swapped2 += ((const int64_t *)cn_data(cn_randperm(2)))[0] == 1;
        if (d % 1000 == 999) { /* keep the scope small */
            cn_scope_end();
            cn_scope_begin();
        }
    }
    cn_scope_end();
    for (int k = 0; k < 6; k++)
        CHECK_SIGMA((double)perms[k], draws / 6.0, sqrt(draws / 6.0 * 5 / 6), "randperm(3) orders");
    for (int k = 0; k < 8; k++)
        CHECK_SIGMA((double)pos[k], draws / 8.0, sqrt(draws / 8.0 * 7 / 8),
                    "randperm(8) positions");
    for (int k = 0; k < 18; k++)
        CHECK_SIGMA((double)pos18[k], draws / 18.0, sqrt(draws / 18.0 * 17 / 18),
                    "randperm(18) positions");
    CHECK_SIGMA((double)swapped2, draws / 2.0, sqrt(draws / 4.0), "randperm(2) swaps");
    /* it is not the identity */
    cn_tensor *big = cn_randperm(1000);
    int64_t fixed = 0;
    for (int64_t i = 0; i < 1000; i++) fixed += ((const int64_t *)cn_data(big))[i] == i;
    CHECK(fixed < 10);
}

/* ---- edges and errors ---- */

static void test_edges(void) {
    cn_tensor *r0 = cn_rand(CN_F64, 0, NULL);
    CHECK(r0 && cn_ndim(r0) == 0 && cn_item(r0) >= 0 && cn_item(r0) < 1);
    CHECK_SHAPE(cn_randn(CN_F32, CN_SHAPE(0, 5)), 0, 5);
    CHECK_SHAPE(cn_randint(0, 3, CN_U8, CN_SHAPE(2, 0)), 2, 0);
    CHECK_SHAPE(cn_randint(0, 3, CN_U8, CN_SHAPE(2, 3, 4, 1, 1, 1, 1, 2)), 2, 3, 4, 1, 1, 1, 1, 2);
    /* lo == hi gives lo; a range narrower than the dtype's spacing stays below hi */
    CHECK(cn_equal(cn_uniform(CN_F32, CN_SHAPE(100), 2, 2), cn_full(CN_F32, CN_SHAPE(100), 2)));
    double next = nextafterf(1.0f, 2.0f);
    cn_tensor *narrow = cn_uniform(CN_F32, CN_SHAPE(1000), 1, next);
    CHECK(cn_equal(narrow, cn_ones(CN_F32, CN_SHAPE(1000))));
    cn_stats s;
    cn_tensor_stats(cn_uniform(CN_F32, CN_SHAPE(100000), 1, 1 + 1e-6), &s);
    CHECK(s.min >= 1 && s.max < 1 + 1e-6);
    cn_tensor_stats(cn_uniform(CN_F16, CN_SHAPE(100000), 1000, 1001), &s);
    CHECK(s.min >= 1000 && s.max < 1001);
    cn_tensor_stats(cn_uniform(CN_BF16, CN_SHAPE(100000), -1, -0.5), &s);
    CHECK(s.min >= -1 && s.max < -0.5);
    cn_tensor_stats(cn_uniform(CN_F32, CN_SHAPE(100000), -3e38, 3e38), &s);
    CHECK(s.inf_count == 0 && s.min >= -3e38 && s.max < 3e38);
}

static void test_errors(void) {
    uint64_t o = state_offset();
    CHECK_ERROR(cn_rand(CN_I32, CN_SHAPE(3)), "rand: dtype i32 is not a float type");
    CHECK_ERROR(cn_randn(CN_BOOL, CN_SHAPE(3)), "randn: dtype bool is not a float type");
    CHECK_ERROR(cn_uniform(CN_U8, CN_SHAPE(3), 0, 1), "uniform: dtype u8");
    CHECK_ERROR(cn_normal(CN_I64, CN_SHAPE(3), 0, 1), "normal: dtype i64");
    CHECK_ERROR(cn_rand((cn_dtype)42, CN_SHAPE(3)), "rand: invalid dtype 42");
    CHECK_ERROR(cn_rand(CN_F32, CN_SHAPE(2, -1)),
                "rand: shape [2, -1] has a negative size at axis 1");
    CHECK_ERROR(cn_randn(CN_F32, 9, (int64_t[9]){1, 1, 1, 1, 1, 1, 1, 1, 1}),
                "randn: rank 9 is out of range");
    CHECK_ERROR(cn_rand(CN_F32, 2, NULL), "rand: shape is NULL");
    CHECK_ERROR(cn_rand(CN_F32, CN_SHAPE(INT64_C(1) << 40, INT64_C(1) << 40)), "too large");
    CHECK_ERROR(cn_uniform(CN_F32, CN_SHAPE(3), 2, 1), "uniform: lo 2 is greater than hi 1");
    CHECK_ERROR(cn_uniform(CN_F32, CN_SHAPE(3), NAN, 1), "must be finite");
    CHECK_ERROR(cn_uniform(CN_F64, CN_SHAPE(3), 0, INFINITY), "must be finite");
    CHECK_ERROR(cn_uniform(CN_F64, CN_SHAPE(3), -1.5e308, 1.5e308), "must be finite");
    CHECK_ERROR(cn_uniform(CN_F16, CN_SHAPE(3), 0, 1e5),
                "uniform: bounds [0, 100000) do not fit f16");
    CHECK_ERROR(cn_uniform(CN_F32, CN_SHAPE(3), -1e39, 0), "do not fit f32");
    CHECK_ERROR(cn_normal(CN_F32, CN_SHAPE(3), 0, -1), "normal: std -1 is negative");
    CHECK_ERROR(cn_normal(CN_F32, CN_SHAPE(3), NAN, 1),
                "normal: mean nan and std 1 must be finite");
    CHECK_ERROR(cn_normal(CN_F32, CN_SHAPE(3), 0, INFINITY), "must be finite");
    CHECK_ERROR(cn_randint(5, 5, CN_I64, CN_SHAPE(3)),
                "randint: high 5 must be greater than low 5");
    CHECK_ERROR(cn_randint(5, -5, CN_I64, CN_SHAPE(3)), "high -5");
    CHECK_ERROR(cn_randint(0, 2, CN_F32, CN_SHAPE(3)), "randint: dtype f32 is not an integer type");
    CHECK_ERROR(cn_randint(0, 2, CN_BOOL, CN_SHAPE(3)), "dtype bool");
    CHECK_ERROR(cn_randint(0, 2, (cn_dtype)-1, CN_SHAPE(3)), "randint: invalid dtype");
    CHECK_ERROR(cn_randint(0, 300, CN_U8, CN_SHAPE(3)), "randint: [0, 300) does not fit u8");
    CHECK_ERROR(cn_randint(-1, 5, CN_U8, CN_SHAPE(3)), "does not fit u8");
    CHECK_ERROR(cn_randint(0, INT64_C(1) << 40, CN_I32, CN_SHAPE(3)), "does not fit i32");
    CHECK_ERROR(cn_randint(0, 5, CN_I32, CN_SHAPE(-3)), "randint: shape [-3]");
    CHECK_ERROR(cn_randperm(-1), "randperm: n is -1");
    CHECK_EQ_INT(state_offset(), o); /* failed calls draw nothing */

    CHECK_ERROR(cn_bernoulli(cn_ones(CN_I64, CN_SHAPE(3))),
                "bernoulli: p must be a float tensor, got i64");
    CHECK_ERROR(cn_bernoulli(cn_ones(CN_BOOL, CN_SHAPE(3))), "got bool");
    cn_tensor *p = cn_full(CN_F32, CN_SHAPE(3, 4), 0.5);
    cn_set(p, (int64_t[]){1, 3}, 1.5);
    CHECK_ERROR(cn_bernoulli(p),
                "bernoulli: p must be in [0, 1], got 1.5 at flat index 7 (shape [3, 4])");
    CHECK_ERROR(cn_bernoulli(cn_transpose(p, 0, 1)), "got 1.5 at flat index 10 (shape [4, 3])");
    cn_set(p, (int64_t[]){1, 3}, NAN);
    CHECK_ERROR(cn_bernoulli(p), "got nan at flat index 7");
    cn_set(p, (int64_t[]){1, 3}, -1e-7);
    CHECK_ERROR(cn_bernoulli(cn_cast(p, CN_F64)), "got -1e-07");
    CHECK_ERROR(cn_bernoulli(cn_cast(p, CN_F16)), "bernoulli: p must be in [0, 1]");
    /* in a large p the smallest bad index is reported, whatever the threads */
    cn_tensor *big = cn_full(CN_F64, CN_SHAPE(N_BIG), 0.5);
    cn_set(big, (int64_t[]){N_BIG - 5}, 2);
    cn_set(big, (int64_t[]){600000}, -3);
    cn_set(big, (int64_t[]){400001}, 7);
    CHECK_ERROR(cn_bernoulli(big), "got 7 at flat index 400001");
    /* NULL in, NULL out, message untouched */
    cn_clear_error();
    cn_fail("first");
    CHECK(cn_bernoulli(NULL) == NULL);
    CHECK(strcmp(cn_last_error(), "first") == 0);
}

int main(void) {
    RUN(test_philox_known_answer);
    RUN(test_value_mapping);
    RUN(test_reproducible);
    RUN(test_thread_independence);
    RUN(test_moments_uniform);
    RUN(test_moments_normal);
    RUN(test_moments_randint);
    RUN(test_moments_bernoulli);
    RUN(test_bernoulli_layouts);
    RUN(test_static_graph_redraws);
    RUN(test_randperm);
    RUN(test_edges);
    RUN(test_errors);
    return th_summary();
}
