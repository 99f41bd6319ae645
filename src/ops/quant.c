/* Integer products: cn_matmul_integer (ONNX MatMulInteger and QLinearMatMul)
 * and int8 inference's linear and conv2d (quant.h), all on the int8 GEMM
 * (src/backend/cpu/qgemm.c).
 *
 * They are registered as custom ops rather than built-in ones: they exist
 * for the CPU only, and a custom op without a device kernel runs on the CPU
 * with transfers around it, where a built-in op must have a kernel on every
 * backend. Registration happens once, on first use. */
#include "quant.h"
#include "../backend/cpu/qgemm.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

enum { Q_MATMUL, Q_LINEAR, Q_CONV, Q_PACK, Q_OPS };
static int q_ids[Q_OPS];
static int q_status;
static pthread_once_t q_once = PTHREAD_ONCE_INIT;

static bool is_int8(cn_dtype dt) { return dt == CN_U8 || dt == CN_I8; }

static int64_t meta_numel(const cn_custom_meta *m) {
    int64_t n = 1;
    for (int i = 0; i < m->ndim; i++) n *= m->shape[i];
    return n;
}

static int64_t tensor_rows(const cn_tensor *t, int last) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim - last; i++) n *= t->shape[i];
    return n;
}

/* ---- matmul_integer: a [..., M, K], b [K, N] or [..., K, N], a's and b's
 * zero points as i32 [1] or [M] / [N] -> i32 [..., M, N] ---- */

static int mm_infer(void *u, const cn_custom_meta *in, int nin, const cn_custom_attrs *a,
                    cn_custom_meta *out, char *err, size_t es) {
    (void)u, (void)nin, (void)a;
    const cn_custom_meta *x = &in[0], *y = &in[1];
    if (!is_int8(x->dtype) || !is_int8(y->dtype)) {
        snprintf(err, es, "a and b must be u8 or i8, not %s and %s", cn_dtype_name(x->dtype),
                 cn_dtype_name(y->dtype));
        return 1;
    }
    if (x->ndim < 2 || (y->ndim != 2 && y->ndim != x->ndim)) {
        snprintf(err, es, "a must have rank 2 or more and b rank 2 or a's (%d and %d)", x->ndim,
                 y->ndim);
        return 1;
    }
    int64_t K = x->shape[x->ndim - 1], M = x->shape[x->ndim - 2];
    int64_t Kb = y->shape[y->ndim - 2], N = y->shape[y->ndim - 1];
    if (K >= 0 && Kb >= 0 && K != Kb) {
        snprintf(err, es, "a has %" PRId64 " columns and b %" PRId64 " rows", K, Kb);
        return 1;
    }
    for (int i = 0; y->ndim > 2 && i < x->ndim - 2; i++)
        if (x->shape[i] >= 0 && y->shape[i] >= 0 && x->shape[i] != y->shape[i]) {
            snprintf(err, es, "a and b differ in batch axis %d (%" PRId64 " and %" PRId64 ")", i,
                     x->shape[i], y->shape[i]);
            return 1;
        }
    int64_t zn[2] = {meta_numel(&in[2]), meta_numel(&in[3])}, want[2] = {M, N};
    for (int z = 0; z < 2; z++)
        if (in[2 + z].dtype != CN_I32 || in[2 + z].ndim != 1 ||
            (zn[z] != 1 && want[z] >= 0 && zn[z] >= 0 && zn[z] != want[z])) {
            snprintf(err, es, "%s's zero point must have 1 or %" PRId64 " values", z ? "b" : "a",
                     want[z]);
            return 1;
        }
    out->dtype = CN_I32;
    out->ndim = x->ndim;
    memcpy(out->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    out->shape[x->ndim - 1] = N;
    return 0;
}

static int mm_kernel(void *u, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                     cn_tensor *out, char *err, size_t es) {
    (void)u, (void)nin, (void)a;
    const cn_tensor *x = in[0], *y = in[1];
    int64_t K = x->shape[x->ndim - 1], M = x->shape[x->ndim - 2], N = y->shape[y->ndim - 1];
    int64_t batch = tensor_rows(x, 2), bbatch = y->ndim == 2 ? 1 : batch, kp = cn_qgemm_kpad(K);
    const int32_t *za = cn_data(in[2]), *zb = cn_data(in[3]);
    int64_t zsa = cn_numel(in[2]) == 1 ? 0 : 1, zsb = cn_numel(in[3]) == 1 ? 0 : 1;
    int16_t *A = malloc(sizeof(int16_t) * (size_t)(M * kp + 1));
    int rc = A ? 0 : CN_ENOMEM;
    for (int64_t i = 0; i < batch && rc == 0; i++) {
        cn_qgemm_widen(A, M, K, kp, (const char *)cn_data(x) + i * M * K, x->dtype == CN_I8, K, 1,
                       za, zsa);
        /* b's columns are the GEMM's rows: its stride along K is N. */
        cn_qgemm_b B = {(const char *)cn_data(y) + (bbatch > 1 ? i : 0) * K * N,
                        y->dtype == CN_I8, 1, N, zb, zsb};
        cn_qgemm_out o = {.c = (int32_t *)cn_data(out) + i * M * N, .ld = N};
        rc = cn_qgemm(M, N, K, A, &B, &o);
    }
    free(A);
    if (rc) snprintf(err, es, "out of memory");
    return rc != 0;
}

/* ---- int8_pack: w i8 [N, ...] -> i32, the weights in the int8 GEMM's
 * layout, pairs of int16 along K as one i32: i[0] = PACK_B, B's panels
 * (a linear layer's weights, the right operand); PACK_A, rows of kp int16
 * (a convolution's, the left operand). ---- */

enum { PACK_B, PACK_A };

static int64_t pack_len(int layout, int64_t N, int64_t K) {
    return (layout == PACK_B ? cn_qgemm_packed_len(N, K) : N * cn_qgemm_kpad(K)) / 2;
}

/* N and K of weights [N, ...] (-1 when unknown). */
static void weight_nk(const cn_custom_meta *w, int64_t *N, int64_t *K) {
    *N = w->shape[0], *K = 1;
    for (int i = 1; i < w->ndim; i++) *K = *K < 0 || w->shape[i] < 0 ? -1 : *K * w->shape[i];
}

static int pack_infer(void *u, const cn_custom_meta *in, int nin, const cn_custom_attrs *a,
                      cn_custom_meta *out, char *err, size_t es) {
    (void)u, (void)nin;
    if (in[0].dtype != CN_I8 || in[0].ndim < 2 || (a->i[0] != PACK_B && a->i[0] != PACK_A)) {
        snprintf(err, es, "weights must be i8 [N, ...] and the layout 0 or 1");
        return 1;
    }
    int64_t N, K;
    weight_nk(&in[0], &N, &K);
    out->dtype = CN_I32;
    out->ndim = 1;
    out->shape[0] = N < 0 || K < 0 ? -1 : pack_len((int)a->i[0], N, K);
    return 0;
}

static int pack_kernel(void *u, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                       cn_tensor *out, char *err, size_t es) {
    (void)u, (void)nin, (void)err, (void)es;
    const cn_tensor *w = in[0];
    int64_t N = w->shape[0], K = N ? cn_numel(w) / N : 0;
    if (a->i[0] == PACK_B)
        cn_qgemm_pack_b(cn_data(out), &(cn_qgemm_b){cn_data(w), true, K, 1, NULL, 0}, N, K);
    else
        cn_qgemm_widen(cn_data(out), N, K, cn_qgemm_kpad(K), cn_data(w), true, K, 1, NULL, 0);
    return 0;
}

/* The packed weights' input (in[3]) of linear_int8 and conv2d_int8: [0]
 * packs them in the call (a static program's, which must read the weights
 * as they are at each run). */
static int check_pack(const cn_custom_meta *w, const cn_custom_meta *p, int layout, char *err,
                      size_t es) {
    int64_t N, K;
    weight_nk(w, &N, &K);
    int64_t want = N < 0 || K < 0 ? -1 : pack_len(layout, N, K);
    if (p->dtype != CN_I32 || p->ndim != 1 ||
        (want >= 0 && p->shape[0] > 0 && p->shape[0] != want)) {
        snprintf(err, es,
                 "the packed weights must be i32 [%" PRId64 "] (int8_pack of the weights), or "
                 "[0] to pack them in this call", want);
        return 1;
    }
    return 0;
}

/* The bias input (in[4]) of linear_int8 and conv2d_int8: f32 [N], or [0]
 * for none. */
static int check_bias(const cn_custom_meta *w, const cn_custom_meta *b, char *err, size_t es) {
    if (b->dtype != CN_F32 || b->ndim != 1 ||
        (b->shape[0] > 0 && w->shape[0] >= 0 && b->shape[0] != w->shape[0])) {
        snprintf(err, es, "the bias must be f32 [%" PRId64 "], or [0] for none", w->shape[0]);
        return 1;
    }
    return 0;
}

static const float *bias_data(const cn_tensor *b) { return cn_numel(b) ? cn_data(b) : NULL; }

/* ---- linear_int8: x f32 [..., K], w i8 [N, K], scale f32 [N], w packed
 * (PACK_B), bias ---- */

static int check_weights(const cn_custom_meta *w, const cn_custom_meta *s, int wrank, char *err,
                         size_t es) {
    if (w->dtype != CN_I8 || w->ndim != wrank || s->dtype != CN_F32 || s->ndim != 1 ||
        (s->shape[0] >= 0 && w->shape[0] >= 0 && s->shape[0] != w->shape[0])) {
        snprintf(err, es, "weights must be i8 of rank %d with one f32 scale per output channel",
                 wrank);
        return 1;
    }
    return 0;
}

static int lin_infer(void *u, const cn_custom_meta *in, int nin, const cn_custom_attrs *a,
                     cn_custom_meta *out, char *err, size_t es) {
    (void)u, (void)nin, (void)a;
    const cn_custom_meta *x = &in[0], *w = &in[1];
    if (check_weights(w, &in[2], 2, err, es) || check_pack(w, &in[3], PACK_B, err, es) ||
        check_bias(w, &in[4], err, es))
        return 1;
    if (x->dtype != CN_F32 || x->ndim < 1 ||
        (x->shape[x->ndim - 1] >= 0 && w->shape[1] >= 0 && x->shape[x->ndim - 1] != w->shape[1])) {
        snprintf(err, es, "input must be f32 [..., %" PRId64 "]", w->shape[1]);
        return 1;
    }
    *out = *x;
    out->shape[x->ndim - 1] = w->shape[0];
    return 0;
}

/* y[m, n] = sum[m, n] * row_scale[m] * w_scale[n] + bias[n], in the
 * GEMM's store. */
static int lin_kernel(void *u, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                      cn_tensor *out, char *err, size_t es) {
    (void)u, (void)nin, (void)a;
    const cn_tensor *x = in[0], *w = in[1];
    int64_t N = w->shape[0], K = w->shape[1], M = tensor_rows(x, 1), kp = cn_qgemm_kpad(K);
    int16_t *A = malloc(sizeof(int16_t) * (size_t)(M * kp + 1));
    float *rs = malloc(sizeof(float) * (size_t)(M + 1));
    bool ok = A && rs;
    if (ok) {
        cn_qgemm_quantize_rows(A, rs, M, K, kp, cn_data(x), K);
        cn_qgemm_out o = {.y = cn_data(out), .ld = N, .row_scale = rs, .row_step = 1,
                          .col_scale = cn_data(in[2]), .col_step = 1, .bias = bias_data(in[4])};
        if (cn_numel(in[3]))
            cn_qgemm_packed(M, N, K, A, cn_data(in[3]), &o);
        else
            ok = cn_qgemm(M, N, K, A, &(cn_qgemm_b){cn_data(w), true, K, 1, NULL, 0}, &o) == 0;
    }
    if (!ok) snprintf(err, es, "out of memory");
    free(A), free(rs);
    return ok ? 0 : 1;
}

/* ---- conv2d_int8: x f32 [B, C, H, W], w i8 [O, C, kH, kW], scale [O],
 * w packed (PACK_A), bias; stride and padding in i[0..3]; no dilation
 * (cn_module_quantize_int8 leaves dilated convolutions in f32) ---- */

/* 0 when the padded input is smaller than the kernel (C's division would
 * round that up to one output), as cn_conv2d refuses it. */
static int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p) {
    return in < 0 ? -1 : in + 2 * p < k ? 0 : (in + 2 * p - k) / s + 1;
}

static int conv_infer(void *u, const cn_custom_meta *in, int nin, const cn_custom_attrs *a,
                      cn_custom_meta *out, char *err, size_t es) {
    (void)u, (void)nin;
    const cn_custom_meta *x = &in[0], *w = &in[1];
    if (check_weights(w, &in[2], 4, err, es) || check_pack(w, &in[3], PACK_A, err, es) ||
        check_bias(w, &in[4], err, es))
        return 1;
    if (x->dtype != CN_F32 || x->ndim != 4 || (x->shape[1] >= 0 && x->shape[1] != w->shape[1])) {
        snprintf(err, es, "input must be f32 [N, %" PRId64 ", H, W]", w->shape[1]);
        return 1;
    }
    *out = *x;
    out->shape[1] = w->shape[0];
    for (int i = 0; i < 2; i++) {
        out->shape[2 + i] = conv_out(x->shape[2 + i], w->shape[2 + i], a->i[i], a->i[2 + i]);
        if (x->shape[2 + i] >= 0 && out->shape[2 + i] < 1) {
            snprintf(err, es, "the input is smaller than the kernel");
            return 1;
        }
    }
    return 0;
}

typedef struct conv_job {
    const float *x, *ws, *bias;
    const int16_t *A; /* the weights, [O, kp] */
    const int64_t *koff;
    float *y;
    int64_t C, H, W, O, oh, ow, K, kp, sh, sw, ph, pw, Hp, Wp;
    _Atomic bool failed; /* set by any image's thread */
} conv_job;

/* Image by image: quantised with one scale (dynamic, per image) into a
 * zero-padded int16 copy, so every patch reads in bounds, then in panels
 * of 16 output pixels (in order, across rows): the weights [O, K] times
 * the panel's patches gathered into B's layout, scaled into [O, oh, ow].
 * The output channels are the GEMM's rows, so it writes the image's layout
 * directly. The gather reads up to 16 values on either side of a patch
 * (into columns it drops), hence the copy's margins. */
static void conv_images(void *p, int64_t begin, int64_t end) {
    conv_job *j = p;
    int64_t P = j->oh * j->ow, HW = j->H * j->W, margin = CN_QGEMM_NR * j->sw;
    int16_t *buf = calloc((size_t)(j->C * j->Hp * j->Wp + 2 * margin), sizeof(int16_t));
    int16_t *img = buf + margin;
    int16_t *panel = cn_qgemm_panel_alloc(j->kp);
    if (!buf || !panel) j->failed = true;
    for (int64_t b = begin; b < end && !j->failed; b++) {
        const float *x = j->x + b * j->C * HW;
        float sc = cn_qgemm_scale(x, j->C * HW);
        for (int64_t r = 0; r < j->C * j->H; r++)
            cn_qgemm_quantize_by(img + (r / j->H * j->Hp + r % j->H + j->ph) * j->Wp + j->pw,
                                 x + r * j->W, j->W, sc);
        cn_qgemm_out o = {.y = j->y + b * j->O * P, .ld = P, .row_scale = j->ws, .row_step = 1,
                          .col_scale = &sc, .col_step = 0, .col_first = true, .bias = j->bias,
                          .bias_by_row = true};
        for (int64_t p0 = 0; p0 < P; p0 += CN_QGEMM_NR) {
            /* Each pixel's patch corner; past P the last one's row goes on. */
            int64_t coff[CN_QGEMM_NR];
            int nn = (int)(P - p0 < CN_QGEMM_NR ? P - p0 : CN_QGEMM_NR);
            for (int c = 0; c < CN_QGEMM_NR; c++)
                coff[c] = c < nn ? (p0 + c) / j->ow * j->sh * j->Wp + (p0 + c) % j->ow * j->sw
                                 : coff[nn - 1] + (c - nn + 1);
            cn_qgemm_pack_gather(panel, j->K, j->kp, img, j->koff, coff);
            cn_qgemm_panel(j->O, j->kp, j->A, panel, p0, nn, &o);
        }
    }
    free(buf), free(panel);
}

static int conv_kernel(void *u, cn_tensor *const *in, int nin, const cn_custom_attrs *a,
                       cn_tensor *out, char *err, size_t es) {
    (void)u, (void)nin;
    const cn_tensor *x = in[0], *w = in[1];
    conv_job j = {.x = cn_data(x), .ws = cn_data(in[2]), .bias = bias_data(in[4]),
                  .A = cn_data(in[3]), .y = cn_data(out),
                  .C = x->shape[1], .H = x->shape[2], .W = x->shape[3], .O = w->shape[0],
                  .oh = out->shape[2], .ow = out->shape[3], .sh = a->i[0], .sw = a->i[1],
                  .ph = a->i[2], .pw = a->i[3]};
    int64_t kh = w->shape[2], kw = w->shape[3];
    j.K = j.C * kh * kw;
    j.kp = cn_qgemm_kpad(j.K);
    int16_t *A = NULL;
    if (!cn_numel(in[3])) {
        if (!(A = malloc(sizeof(int16_t) * (size_t)(j.O * j.kp)))) {
            snprintf(err, es, "out of memory");
            return 1;
        }
        cn_qgemm_widen(A, j.O, j.K, j.kp, cn_data(w), true, j.K, 1, NULL, 0);
        j.A = A;
    }
    j.Hp = j.H + 2 * j.ph;
    j.Wp = j.W + 2 * j.pw;
    /* Patch element k = (c, ky, kx) sits this far from its patch's corner. */
    int64_t *koff = malloc(sizeof(int64_t) * (size_t)j.K);
    if (!koff) {
        free(A);
        snprintf(err, es, "out of memory");
        return 1;
    }
    for (int64_t k = 0; k < j.K; k++)
        koff[k] = (k / (kh * kw) * j.Hp + k / kw % kh) * j.Wp + k % kw;
    j.koff = koff;
    cn_parallel_for(x->shape[0], 1, conv_images, &j);
    free(koff), free(A);
    if (j.failed) snprintf(err, es, "out of memory");
    return j.failed;
}

/* ---- registration ---- */

static void q_register(void) {
    static const cn_custom_op_def defs[Q_OPS] = {
        [Q_MATMUL] = {.name = "matmul_integer", .ninputs = 4,
                      .flags = CN_CUSTOM_PURE | CN_CUSTOM_NONDIFF, .infer = mm_infer,
                      .cpu_kernel = mm_kernel,
                      .doc = "(a - a_zero_point) @ (b - b_zero_point), u8/i8, exact int32 sums"},
        [Q_LINEAR] = {.name = "linear_int8", .ninputs = 5,
                      .flags = CN_CUSTOM_PURE | CN_CUSTOM_NONDIFF, .infer = lin_infer,
                      .cpu_kernel = lin_kernel,
                      .doc = "x @ (w * scale)^T + bias with x quantised to int8 per row at run time"},
        [Q_CONV] = {.name = "conv2d_int8", .ninputs = 5, .flags = CN_CUSTOM_PURE | CN_CUSTOM_NONDIFF,
                    .attrs = {{"stride_h", false, 0, 1},
                              {"stride_w", false, 1, 1},
                              {"pad_h", false, 2, 0},
                              {"pad_w", false, 3, 0}},
                    .infer = conv_infer, .cpu_kernel = conv_kernel,
                    .doc = "conv2d with int8 weights, each image quantised to int8 at run time"},
        [Q_PACK] = {.name = "int8_pack", .ninputs = 1, .flags = CN_CUSTOM_PURE | CN_CUSTOM_NONDIFF,
                    .attrs = {{"layout", false, 0, 0}},
                    .infer = pack_infer, .cpu_kernel = pack_kernel,
                    .doc = "int8 weights in the int8 GEMM's layout, for linear_int8 and conv2d_int8"},
    };
    for (int i = 0; i < Q_OPS; i++) {
        q_ids[i] = cn_register_op(&defs[i]);
        if (q_ids[i] < 0) q_status = q_ids[i];
    }
}

static int q_op(int which) {
    pthread_once(&q_once, q_register);
    if (q_status < 0) return cn_failc(q_status, "int8 ops could not be registered");
    return q_ids[which];
}

/* A zero point as i32 [1] or [len]: 0 when z is NULL. */
static cn_tensor *zero_point(const char *what, cn_tensor *z, cn_dtype want) {
    if (!z) return cn_zeros(CN_I32, 1, (int64_t[]){1});
    if (cn_tensor_dtype(z) != want)
        return cn_fail("matmul_integer: %s must be %s like its operand, not %s", what,
                       cn_dtype_name(want), cn_dtype_name(cn_tensor_dtype(z)));
    if (cn_ndim(z) > 1)
        return cn_fail("matmul_integer: %s must be a scalar or a vector, not of rank %d", what,
                       cn_ndim(z));
    return cn_reshape(cn_cast(z, CN_I32), 1, (int64_t[]){-1});
}

cn_tensor *cn_matmul_integer(cn_tensor *a, cn_tensor *b, cn_tensor *a_zero_point,
                             cn_tensor *b_zero_point) {
    if (!a || !b) return NULL;
    int op = q_op(Q_MATMUL);
    if (op < 0) return NULL;
    cn_tensor *za = zero_point("a_zero_point", a_zero_point, cn_tensor_dtype(a));
    cn_tensor *zb = zero_point("b_zero_point", b_zero_point, cn_tensor_dtype(b));
    if (!za || !zb) return NULL;
    return cn_apply_op(op, (cn_tensor *[]){a, b, za, zb}, 4, NULL);
}

/* The pack cache's one lock: held only to check or swap a pack, and
 * while a missing one is made (once per module and weight change). */
static pthread_mutex_t pack_mu = PTHREAD_MUTEX_INITIALIZER;

void cn_q_pack_clear(cn_q_pack *p) {
    cn_release(p->src), cn_release(p->packed);
    p->src = p->packed = NULL;
}

/* w packed in layout, owned by the current scope: from the cache while w
 * is the tensor it was made from and its storage has not been written
 * since. Traced into a static graph (x or w symbolic), none (i32 [0]): an
 * op on the weights alone would run now, not in the program, and its
 * result would stay what the weights were; the ops pack them at each run
 * instead. */
static cn_tensor *packed(int layout, cn_tensor *x, cn_tensor *w, cn_q_pack *cache) {
    int op = q_op(Q_PACK);
    if (op < 0 || !x || !w) return NULL;
    cn_custom_attrs a = {{layout}, {0}};
    if (cn_is_symbolic(x) || cn_is_symbolic(w) || !w->storage)
        return cn_zeros(CN_I32, 1, (int64_t[]){0});
    if (!cache) return cn_apply_op(op, (cn_tensor *[]){w}, 1, &a);
    pthread_mutex_lock(&pack_mu);
    if (cache->src != w || cache->version != w->storage->version) {
        cn_q_pack_clear(cache);
        cn_tensor *p = cn_apply_op(op, (cn_tensor *[]){w}, 1, &a);
        if (p) {
            cache->src = cn_retain(w);
            cache->packed = cn_retain(p);
            cache->version = w->storage->version;
        }
        pthread_mutex_unlock(&pack_mu);
        return p;
    }
    /* Held by the scope too: another thread may replace the cache's. */
    cn_tensor *p = cn_scope_add(cn_retain(cache->packed));
    pthread_mutex_unlock(&pack_mu);
    return p;
}

/* The op's bias input: b, or f32 [0] for none. */
static cn_tensor *bias_or_none(cn_tensor *b) {
    return b ? b : cn_zeros(CN_F32, 1, (int64_t[]){0});
}

cn_tensor *cn_q_linear_int8(cn_tensor *x, cn_tensor *w, cn_tensor *scale, cn_tensor *bias,
                            cn_q_pack *pack) {
    int op = q_op(Q_LINEAR);
    cn_tensor *p = op < 0 ? NULL : packed(PACK_B, x, w, pack), *b = p ? bias_or_none(bias) : NULL;
    return b ? cn_apply_op(op, (cn_tensor *[]){x, w, scale, p, b}, 5, NULL) : NULL;
}

cn_tensor *cn_q_conv2d_int8(cn_tensor *x, cn_tensor *w, cn_tensor *scale, cn_tensor *bias,
                            const cn_conv_opts *o, cn_q_pack *pack) {
    int op = q_op(Q_CONV);
    cn_tensor *p = op < 0 ? NULL : packed(PACK_A, x, w, pack), *b = p ? bias_or_none(bias) : NULL;
    if (!b) return NULL;
    cn_custom_attrs a = {{o->stride[0] ? o->stride[0] : 1, o->stride[1] ? o->stride[1] : 1,
                          o->padding[0], o->padding[1]},
                         {0}};
    return cn_apply_op(op, (cn_tensor *[]){x, w, scale, p, b}, 5, &a);
}
