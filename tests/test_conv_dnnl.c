/* The oneDNN path of the convolutions (src/backend/cpu/conv_dnnl.c) on the
 * shapes it is chosen for, against the reference loops: channel counts
 * that make oneDNN pick blocked formats (weights reordered once for every
 * block of the batch, the weight gradient's parts summed in that format),
 * the bias inside the forward primitive and outside the input gradient's,
 * batches that split into equal blocks and ones whose last block is
 * shorter, forward products of small batches also cut into blocks of
 * output channels (between groups for grouped convolutions); the same bits
 * at 1 and 2 threads. Without oneDNN in the build
 * there is nothing to test. */
#include "harness.h"

#include "backend/cpu/conv.h"
#include "ops/op.h"

typedef struct dcase {
    int64_t N, C, O, H, groups;
} dcase;

static const dcase cases[] = {
    {17, 32, 64, 9, 1}, /* blocks of 2, the last of 1 */
    {20, 16, 32, 7, 1}, /* blocks of 2 */
    {19, 1, 32, 10, 1}, /* one input channel: x stays plain */
    {5, 24, 40, 6, 1},  /* channels that are not a multiple of the block */
    {1, 48, 48, 9, 6},  /* batch 1: 6 blocks of one group (8 channels) */
    {2, 32, 64, 5, 8},  /* 2 samples x 8 blocks of one group (4 in, 8 out) */
    {3, 26, 26, 5, 13}, /* 13 groups, no divisor up to 16 / 3: one call a sample */
    {1, 16, 40, 6, 8},  /* 8 blocks of 2 in, 5 out channels */
    {1, 16, 64, 6, 1},  /* batch 1: 2 blocks of 32 output channels, each reading all x */
    {2, 8, 96, 5, 1},   /* 2 samples x 3 blocks of 32 output channels */
    {1, 24, 32, 7, 1},  /* batch 1: 2 blocks of 16 output channels (32 would be one) */
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* fwd (with and without bias), dgrad (with and without bias) and wgrad of
 * a 3x3 pad-1 convolution under impl. */
static void products(cn_conv_impl impl, int64_t groups, cn_tensor *x, cn_tensor *w, cn_tensor *b,
                     cn_tensor *dy, cn_tensor *r[5]) {
    cn_conv_impl prev = cn_conv_set_impl(impl);
    cn_conv_opts o = {.padding = {1, 1}, .groups = groups};
    cn_attrs at = {.i = {groups}, .nlist = 8, .list = {1, 1, 1, 1, 1, 1, 0, 0}};
    cn_attrs aw = {.i = {groups, 3, 3}, .nlist = 6, .list = {1, 1, 1, 1, 1, 1}};
    cn_tensor *bx = cn_narrow(b, 0, 0, cn_shape(x)[1]); /* dgrad's bias: one per input channel */
    r[0] = cn_conv2d(x, w, b, &o);
    r[1] = cn_conv2d(x, w, NULL, &o);
    r[2] = cn_op_apply(CN_OP_conv_transpose2d, (cn_tensor *[]){dy, w, bx}, 3, &at);
    r[3] = cn_op_apply(CN_OP_conv_transpose2d, (cn_tensor *[]){dy, w}, 2, &at);
    r[4] = cn_op_apply(CN_OP_conv2d_weight_grad, (cn_tensor *[]){x, dy}, 2, &aw);
    cn_conv_set_impl(prev);
}

/* Case c's x, weights, bias and output gradient, uniform in [-1, 1]. */
static void operands(const dcase *c, cn_tensor **x, cn_tensor **w, cn_tensor **b,
                     cn_tensor **dy) {
    *x = th_random(CN_F32, CN_SHAPE(c->N, c->C, c->H, c->H), -1, 1, TH_CONTIG, NULL);
    *w = th_random(CN_F32, CN_SHAPE(c->O, c->C / c->groups, 3, 3), -1, 1, TH_CONTIG, NULL);
    *b = th_random(CN_F32, CN_SHAPE(c->O), -1, 1, TH_CONTIG, NULL);
    *dy = th_random(CN_F32, CN_SHAPE(c->N, c->O, c->H, c->H), -1, 1, TH_CONTIG, NULL);
}

static void test_against_reference(void) {
    if (!cn_conv_have_dnnl()) return;
    th_seed(53);
    static const char *names[5] = {"forward + bias", "forward", "input grad + bias", "input grad",
                                   "weight grad"};
    for (int k = 0; k < NCASES; k++) {
        const dcase *c = &cases[k];
        cn_scope_begin();
        cn_tensor *x, *w, *b, *dy;
        operands(c, &x, &w, &b, &dy);
        cn_tensor *want[5], *got[5];
        products(CN_CONV_REF, c->groups, x, w, b, dy, want);
        products(CN_CONV_DNNL, c->groups, x, w, b, dy, got);
        for (int p = 0; p < 5; p++) {
            CHECK(want[p] && got[p]);
            if (!want[p] || !got[p]) continue;
            /* sums of up to N H W = 1,700 terms of size 1 */
            double tol = p == 4 ? 2e-4 : 2e-5;
            bool ok = cn_allclose(got[p], want[p], tol, tol);
            CHECK_MSG(ok, "case %d (N %lld, C %lld, O %lld, %lldx%lld, groups %lld): %s differs",
                      k, (long long)c->N, (long long)c->C, (long long)c->O, (long long)c->H,
                      (long long)c->H, (long long)c->groups, names[p]);
        }
        cn_scope_end();
    }
}

/* A batch split into blocks (case 0), a batch of one split into blocks of
 * groups (case 4) and into blocks of output channels (case 8). */
static void test_threads_same_bits(void) {
    if (!cn_conv_have_dnnl()) return;
    th_seed(59);
    int nt = cn_get_num_threads();
    for (int k = 0; k < NCASES; k += 4) {
        const dcase *c = &cases[k];
        cn_scope_begin();
        cn_tensor *x, *w, *b, *dy;
        operands(c, &x, &w, &b, &dy);
        cn_tensor *r[2][5];
        for (int t = 0; t < 2; t++) {
            cn_set_num_threads(t + 1);
            products(CN_CONV_DNNL, c->groups, x, w, b, dy, r[t]);
        }
        cn_set_num_threads(nt);
        for (int p = 0; p < 5; p++)
            CHECK_MSG(cn_equal(r[0][p], r[1][p]), "case %d: product %d differs", k, p);
        cn_scope_end();
    }
}

/* More geometries than the primitive cache holds (64): the least recently
 * used primitives make room, and a geometry asked for again after its
 * primitive went is created anew, with the same results. */
static void test_cache_eviction(void) {
    if (!cn_conv_have_dnnl()) return;
    th_seed(61);
    cn_tensor *w = th_random(CN_F32, CN_SHAPE(16, 2, 3, 3), -1, 1, TH_CONTIG, NULL);
    cn_conv_opts o = {.padding = {1, 1}};
    cn_conv_impl prev = cn_conv_set_impl(CN_CONV_DNNL);
    for (int i = 0; i <= 72; i++) {
        int64_t h = 3 + (i == 72 ? 0 : i); /* the last asks for the first again */
        cn_scope_begin();
        cn_tensor *x = th_random(CN_F32, CN_SHAPE(1, 2, h, 5), -1, 1, TH_CONTIG, NULL);
        cn_tensor *got = cn_conv2d(x, w, NULL, &o);
        cn_conv_set_impl(CN_CONV_REF);
        cn_tensor *want = cn_conv2d(x, w, NULL, &o);
        cn_conv_set_impl(CN_CONV_DNNL);
        CHECK_MSG(got && want && cn_allclose(got, want, 1e-5, 1e-5), "height %lld differs",
                  (long long)h);
        cn_scope_end();
    }
    cn_conv_set_impl(prev);
}

int main(void) {
    RUN(test_against_reference);
    RUN(test_threads_same_bits);
    RUN(test_cache_eviction);
    return th_summary();
}
