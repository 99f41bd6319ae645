/* Max pooling over 2x2 windows with stride 2 in f32 (the vectorised kernel
 * of src/backend/cpu/pool_max2x2.c) against naive loops in double: values,
 * indices and the backward op, with many ties, NaN and infinities, widths
 * whose rows take one chunk, several, or an overlapping last one (and odd
 * sizes the windows leave out), inputs with gaps between rows and reversed
 * channels, at every ISA level the CPU runs and at 1 and 2 threads. */
#include "harness.h"

#include "core/isa.h"
#include "ops/op.h"

#include <math.h>

static double at4(const cn_tensor *t, int64_t n, int64_t c, int64_t h, int64_t w) {
    return cn_get(t, (int64_t[]){n, c, h, w});
}

/* PyTorch's rule: taps row by row, a later one taking over when greater or
 * NaN. The flat position ih W + iw of the window's pick. */
static int64_t ref_pick(const cn_tensor *x, int64_t n, int64_t c, int64_t oh, int64_t ow) {
    int64_t W = cn_shape(x)[3], best = 2 * oh * W + 2 * ow;
    double m = at4(x, n, c, 2 * oh, 2 * ow);
    for (int t = 1; t < 4; t++) {
        int64_t h = 2 * oh + t / 2, w = 2 * ow + t % 2;
        double v = at4(x, n, c, h, w);
        if (v > m || v != v) m = v, best = h * W + w;
    }
    return best;
}

static bool same_value(double a, double b) { return (a != a && b != b) || a == b; }

/* Values in {-1, 0, 1, 2} (ties everywhere), with NaN and +-inf sprinkled. */
static cn_tensor *tie_input(int64_t N, int64_t C, int64_t H, int64_t W, int layout) {
    static const double special[4] = {NAN, INFINITY, -INFINITY, -0.0};
    int64_t pad = layout == 1 ? 3 : 0;
    cn_tensor *x = cn_zeros(CN_F32, CN_SHAPE(N, C, H, W + pad));
    if (pad) x = cn_narrow(x, 3, 1, W);
    if (layout == 2) x = cn_slice(x, 1, CN_END, CN_BEGIN, -1);
    int64_t idx[4];
    for (idx[0] = 0; idx[0] < N; idx[0]++)
        for (idx[1] = 0; idx[1] < C; idx[1]++)
            for (idx[2] = 0; idx[2] < H; idx[2]++)
                for (idx[3] = 0; idx[3] < W; idx[3]++) {
                    double v = (double)th_randint(-1, 3);
                    if (th_randint(0, 40) == 0) v = special[th_randint(0, 4)];
                    cn_set(x, idx, v);
                }
    return x;
}

/* One shape and layout at the current ISA level and thread count. */
static void check_case(int64_t N, int64_t C, int64_t H, int64_t W, int layout) {
    cn_scope_begin();
    cn_tensor *x = tie_input(N, C, H, W, layout);
    cn_pool_opts o = {.kernel = {2, 2}};
    cn_tensor *y = cn_max_pool2d(x, &o), *ix = cn_max_pool2d_indices(x, &o);
    int64_t OH = H / 2, OW = W / 2;
    CHECK(y && ix);
    if (!y || !ix) {
        cn_scope_end();
        return;
    }
    cn_tensor *dy = th_random(CN_F32, CN_SHAPE(N, C, OH, OW), -1, 1, TH_CONTIG, NULL);
    cn_attrs a = {.nlist = 8, .list = {2, 2, 2, 2, 0, 0, 1, 1}};
    cn_tensor *dx = cn_op_apply(CN_OP_max_pool2d_backward, (cn_tensor *[]){x, dy}, 2, &a);
    CHECK(dx);
    if (!dx) {
        cn_scope_end();
        return;
    }
    double *want = calloc((size_t)(N * C * H * W), sizeof(double));
    int bad = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t p = ref_pick(x, n, c, oh, ow);
                    double v = at4(x, n, c, p / W, p % W), g = at4(dy, n, c, oh, ow);
                    want[((n * C + c) * H + p / W) * W + p % W] += g;
                    int64_t got_i = (int64_t)at4(ix, n, c, oh, ow);
                    if (bad < 5 && (!same_value(at4(y, n, c, oh, ow), v) || got_i != p)) {
                        bad++;
                        CHECK_MSG(false, "[%lld, %lld, %lld, %lld] layout %d at (%lld, %lld, "
                                  "%lld, %lld): %g at %lld, want %g at %lld",
                                  (long long)N, (long long)C, (long long)H, (long long)W, layout,
                                  (long long)n, (long long)c, (long long)oh, (long long)ow,
                                  at4(y, n, c, oh, ow), (long long)got_i, v, (long long)p);
                    }
                }
    for (int64_t k = 0; k < N * C * H * W && bad < 5; k++) {
        int64_t w = k % W, h = k / W % H, c = k / (W * H) % C, n = k / (W * H * C);
        double got = at4(dx, n, c, h, w);
        if (got != want[k] || signbit(got) != signbit(want[k])) {
            bad++;
            CHECK_MSG(false, "[%lld, %lld, %lld, %lld] layout %d: dx at %lld is %g, want %g",
                      (long long)N, (long long)C, (long long)H, (long long)W, layout,
                      (long long)k, got, want[k]);
        }
    }
    CHECK(bad == 0);
    free(want);
    cn_scope_end();
}

static const int64_t shapes[][4] = {
    {2, 3, 8, 8},   {1, 2, 9, 9},   {2, 2, 14, 14}, {1, 3, 28, 28}, {2, 1, 6, 11},
    {1, 2, 10, 16}, {1, 1, 4, 17},  {2, 2, 5, 40},  {1, 1, 2, 33},  {1, 2, 7, 6},
    {3, 2, 4, 30},  {1, 1, 3, 3},   {1, 1, 2, 2},
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

static void test_against_loops(void) {
    th_seed(41);
    int level = cn_isa();
    for (int l = 0; l < CN_ISA_LEVELS; l++) {
        if (!cn_isa_available(l)) continue;
        CHECK(cn_isa_set(l) == CN_OK);
        for (int s = 0; s < NSHAPES; s++)
            for (int layout = 0; layout < 3; layout++)
                check_case(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], layout);
    }
    cn_isa_set(level);
}

/* Planes split across threads: the same bits at 1 and 2 threads. */
static void test_threads(void) {
    th_seed(43);
    int nt = cn_get_num_threads();
    cn_tensor *x = tie_input(16, 32, 28, 28, 0);
    cn_tensor *dy = th_random(CN_F32, CN_SHAPE(16, 32, 14, 14), -1, 1, TH_CONTIG, NULL);
    cn_pool_opts o = {.kernel = {2, 2}};
    cn_attrs a = {.nlist = 8, .list = {2, 2, 2, 2, 0, 0, 1, 1}};
    cn_tensor *r[2][2];
    for (int t = 0; t < 2; t++) {
        cn_set_num_threads(t + 1);
        r[t][0] = cn_max_pool2d(x, &o);
        r[t][1] = cn_op_apply(CN_OP_max_pool2d_backward, (cn_tensor *[]){x, dy}, 2, &a);
    }
    cn_set_num_threads(nt);
    CHECK(r[0][0] && r[1][0] && r[0][1] && r[1][1]);
    if (!r[0][1] || !r[1][1]) return;
    CHECK(cn_equal(r[0][1], r[1][1]));
    /* cn_equal treats NaN as unequal: compare the values bit for bit */
    CHECK(memcmp(cn_data(r[0][0]), cn_data(r[1][0]), sizeof(float) * 16 * 32 * 14 * 14) == 0);
}

/* The gradient through autograd: sum(max_pool2d(x) * w) has gradient w at
 * each window's pick. */
static void test_autograd(void) {
    th_seed(47);
    cn_tensor *x = tie_input(2, 3, 12, 20, 0);
    cn_set_requires_grad(x, true);
    cn_tensor *w = th_random(CN_F32, CN_SHAPE(2, 3, 6, 10), -1, 1, TH_CONTIG, NULL);
    cn_pool_opts o = {.kernel = {2, 2}};
    cn_tensor *loss = cn_sum(cn_mul(cn_max_pool2d(x, &o), w), NULL, 0, false);
    CHECK(loss && cn_backward(loss, NULL) == CN_OK);
    cn_tensor *g = cn_get_grad(x);
    CHECK(g);
    if (!g) return;
    int bad = 0;
    for (int64_t n = 0; n < 2; n++)
        for (int64_t c = 0; c < 3; c++)
            for (int64_t oh = 0; oh < 6; oh++)
                for (int64_t ow = 0; ow < 10; ow++) {
                    int64_t p = ref_pick(x, n, c, oh, ow);
                    for (int t = 0; t < 4; t++) {
                        int64_t h = 2 * oh + t / 2, ww = 2 * ow + t % 2;
                        double want = h * 20 + ww == p ? at4(w, n, c, oh, ow) : 0;
                        if (at4(g, n, c, h, ww) != want) bad++;
                    }
                }
    CHECK_MSG(bad == 0, "%d gradient entries differ", bad);
}

int main(void) {
    RUN(test_against_loops);
    RUN(test_threads);
    RUN(test_autograd);
    return th_summary();
}
