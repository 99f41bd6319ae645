/* int8: the i8 dtype (conversions, printing, .npy and safetensors), the
 * int8 GEMM behind cn_matmul_integer against naive int32 loops at every
 * instruction-set level, and int8 inference of Linear and Conv2d modules
 * (cn_module_quantize_int8) against their f32 outputs and, bit for bit,
 * against naive loops over their int8 weights at every level; and the GEMM's
 * kernels themselves (the AVX512_VNNI one at the avx512 level where the CPU
 * has it, the AVX2 one below it) on the edges of their blocks, with both
 * kinds of output. The ONNX integer ops are checked by the conformance
 * suite (tests/onnx). */
#include "harness.h"

#include "backend/cpu/qgemm.h"
#include "core/core.h"
#include "core/isa.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

static void test_i8_dtype(void) {
    CHECK(strcmp(cn_dtype_name(CN_I8), "i8") == 0);
    CHECK_EQ_INT(cn_dtype_size(CN_I8), 1);
    int8_t v[4] = {-128, -1, 0, 127};
    cn_tensor *t = cn_from_data(CN_I8, 1, (int64_t[]){4}, v);
    cn_tensor *f = cn_cast(t, CN_F32);
    for (int i = 0; i < 4; i++) CHECK_CLOSE(th_at(f, i), v[i], 0, 0);
    cn_tensor *back = cn_cast(cn_from_data(CN_F32, 1, (int64_t[]){3}, (float[]){-5, 3, 100}), CN_I8);
    CHECK(back && th_at(back, 0) == -5 && th_at(back, 2) == 100);
    /* Arithmetic wraps as torch.int8 does; u8 with i8 widens. */
    cn_tensor *s = cn_add(t, t);
    CHECK(s && cn_tensor_dtype(s) == CN_I8 && th_at(s, 0) == 0 && th_at(s, 3) == -2);
    CHECK(cn_promote_types(CN_U8, CN_I8) == CN_I32);
    char *text = cn_to_string(t);
    CHECK_MSG(text && strstr(text, "-128") && strstr(text, "127"), "printed %s", text);
    free(text);

    char npy[64], st[64];
    snprintf(npy, sizeof npy, "/tmp/cn_quant_%d.npy", (int)getpid());
    snprintf(st, sizeof st, "/tmp/cn_quant_%d.safetensors", (int)getpid());
    CHECK(cn_save_npy(npy, t) == 0);
    cn_tensor *r = cn_load_npy(npy);
    CHECK(r && cn_tensor_dtype(r) == CN_I8 && cn_equal(r, t));
    CHECK(cn_save_safetensors(st, (const char *[]){"q"}, &t, 1, NULL, NULL, 0) == 0);
    cn_checkpoint *c = cn_load_safetensors(st);
    cn_tensor *q = c ? cn_checkpoint_find(c, "q") : NULL;
    CHECK(q && cn_tensor_dtype(q) == CN_I8 && cn_equal(q, t));
    cn_checkpoint_free(c);
    remove(npy), remove(st);
}

/* (a - za) @ (b - zb) in int64 from the tensors' values. */
static void naive(const cn_tensor *a, const cn_tensor *b, int64_t za, int64_t zb, int64_t batch,
                  int64_t M, int64_t K, int64_t N, bool bbatched, int64_t *out) {
    for (int64_t i = 0; i < batch; i++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                int64_t s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += ((int64_t)th_at(a, (i * M + m) * K + k) - za) *
                         ((int64_t)th_at(b, ((bbatched ? i : 0) * K + k) * N + n) - zb);
                out[(i * M + m) * N + n] = s;
            }
}

static cn_tensor *random_q8(cn_dtype dt, int ndim, const int64_t *shape) {
    return dt == CN_U8 ? cn_randint(0, 256, CN_U8, ndim, shape)
                       : cn_randint(-128, 128, CN_I8, ndim, shape);
}

static void check_matmul_integer(cn_dtype da, cn_dtype db, int64_t batch, int64_t M, int64_t K,
                                 int64_t N, bool bbatched) {
    cn_scope_begin();
    cn_tensor *a = random_q8(da, 3, (int64_t[]){batch, M, K});
    cn_tensor *b = bbatched ? random_q8(db, 3, (int64_t[]){batch, K, N})
                            : random_q8(db, 2, (int64_t[]){K, N});
    int64_t za = da == CN_U8 ? 255 : -128, zb = db == CN_U8 ? 7 : 3;
    cn_tensor *y = cn_matmul_integer(a, b, cn_scalar(da, (double)za), cn_scalar(db, (double)zb));
    CHECK_MSG(y && cn_tensor_dtype(y) == CN_I32, "%s", cn_last_error());
    int64_t *want = malloc(sizeof(int64_t) * (size_t)(batch * M * N));
    naive(a, b, za, zb, batch, M, K, N, bbatched, want);
    int bad = 0;
    for (int64_t i = 0; y && i < batch * M * N; i++) bad += (int64_t)th_at(y, i) != want[i];
    CHECK_MSG(bad == 0, "%s x %s [%lld, %lld, %lld] @ [%lld, %lld]: %d wrong", cn_dtype_name(da),
              cn_dtype_name(db), (long long)batch, (long long)M, (long long)K, (long long)K,
              (long long)N, bad);
    free(want);
    cn_scope_end();
}

static void test_matmul_integer_every_level(void) {
    cn_manual_seed(3);
    for (int l = 0; l < CN_ISA_LEVELS; l++) {
        if (!cn_isa_available(l)) continue;
        CHECK(cn_isa_set(l) == CN_OK);
        /* Odd sizes: edges of the 4 x 16 blocks and K past a multiple of 16. */
        check_matmul_integer(CN_U8, CN_I8, 1, 7, 37, 9, false);
        check_matmul_integer(CN_I8, CN_U8, 2, 5, 16, 6, true);
        check_matmul_integer(CN_I8, CN_I8, 1, 1, 1, 1, false);
        check_matmul_integer(CN_U8, CN_U8, 3, 4, 50, 13, false);
        check_matmul_integer(CN_U8, CN_I8, 1, 33, 300, 70, false);
        /* K in chunks of 128 pairs, rows in groups of 64. */
        check_matmul_integer(CN_I8, CN_I8, 1, 70, 517, 18, false);
    }
    CHECK(cn_isa_set(cn_isa_max()) == CN_OK);
    /* Per-row and per-column zero points. */
    uint8_t a[6] = {1, 2, 3, 4, 5, 6};
    int8_t b[6] = {1, -1, 2, 0, -3, 5};
    cn_tensor *y = cn_matmul_integer(
        cn_from_data(CN_U8, 2, (int64_t[]){2, 3}, a), cn_from_data(CN_I8, 2, (int64_t[]){3, 2}, b),
        cn_from_data(CN_U8, 1, (int64_t[]){2}, (uint8_t[]){1, 4}),
        cn_from_data(CN_I8, 1, (int64_t[]){2}, (int8_t[]){0, 1}));
    /* rows (0 1 2) and (0 1 2); columns (1 2 -3) and (-2 -1 4). */
    CHECK(y && th_at(y, 0) == -4 && th_at(y, 1) == 7 && th_at(y, 2) == -4 && th_at(y, 3) == 7);
    CHECK_ERROR(cn_matmul_integer(cn_zeros(CN_F32, 2, (int64_t[]){2, 2}),
                                  cn_zeros(CN_I8, 2, (int64_t[]){2, 2}), NULL, NULL),
                "must be u8 or i8");
    CHECK_ERROR(cn_matmul_integer(cn_zeros(CN_U8, 2, (int64_t[]){2, 3}),
                                  cn_zeros(CN_I8, 2, (int64_t[]){2, 2}), NULL, NULL),
                "a has 3 columns and b 2 rows");
    CHECK_ERROR(cn_matmul_integer(cn_zeros(CN_U8, 2, (int64_t[]){2, 2}),
                                  cn_zeros(CN_I8, 2, (int64_t[]){2, 2}),
                                  cn_scalar(CN_I8, 1), NULL),
                "a_zero_point must be u8");
}

/* ---- the GEMM's kernels (qgemm.h) against naive loops ---- */

static uint32_t lcg_state;
static uint32_t lcg(void) { return (lcg_state = lcg_state * 1664525u + 1013904223u) >> 8; }
/* Every product at its largest instead of random values: values at the
 * type's lowest, zero points at its highest, so each widened value is
 * -255 and each product 65025. */
static bool q8_extreme;
/* A value (or zero point) of an 8-bit type: the extremes often. */
static int32_t q8_value(bool is_signed, bool is_zp) {
    uint32_t r = lcg();
    int32_t lo = is_signed ? -128 : 0, hi = is_signed ? 127 : 255;
    if (q8_extreme) return is_zp ? hi : lo;
    return r % 8 == 0 ? lo : r % 8 == 1 ? hi : lo + (int32_t)(r / 8 % 256);
}
static float small_float(void) { return (float)(lcg() % 20000 + 1) * 0x1p-12f; }

/* The ways the kernels are driven: the output (int32, or f32 with scales
 * and bias in its variants), the entry point (cn_qgemm packing as it
 * goes, cn_qgemm_packed, or cn_qgemm_panel panel by panel) and B's layout
 * ([N, K] or [K, N]). */
enum { QK_INT32, QK_F32_COL_BIAS, QK_F32_ROW_BIAS, QK_F32_NO_BIAS, QK_INT32_PACKED, QK_KINDS };

/* One product of M x K 8-bit values (a's signedness as_, row zero points)
 * by K x N (bs, column zero points, NULL when nozp), against int64 sums
 * and the float formula of qgemm.h's cn_qgemm_out, bit for bit; outputs
 * beyond N in each row (ld = N + 3) must stay untouched. The number of
 * wrong values. */
static int qgemm_case(int64_t M, int64_t N, int64_t K, bool as_, bool bs, bool nozp, int kind) {
    int64_t kp = cn_qgemm_kpad(K), ld = N + 3;
    uint8_t *a8 = malloc((size_t)(M * K + 1)), *b8 = malloc((size_t)(N * K + 1));
    int32_t *za = malloc(sizeof(int32_t) * (size_t)M), *zb = malloc(sizeof(int32_t) * (size_t)N);
    int16_t *A = malloc(sizeof(int16_t) * (size_t)(M * kp + 1));
    int16_t *Bp = malloc(sizeof(int16_t) * (size_t)(cn_qgemm_packed_len(N, K) + 1));
    float *rs = malloc(sizeof(float) * (size_t)M), *cs = malloc(sizeof(float) * (size_t)N);
    float *bias = malloc(sizeof(float) * (size_t)(M > N ? M : N));
    /* The outputs as bytes, compared with memcmp (int32 or float). */
    const uint32_t untouched = 0x7fc01234u; /* a NaN */
    char *out = malloc(4 * (size_t)(M * ld));
    for (int64_t i = 0; i < M * K; i++) a8[i] = (uint8_t)q8_value(as_, false);
    for (int64_t i = 0; i < N * K; i++) b8[i] = (uint8_t)q8_value(bs, false);
    for (int64_t m = 0; m < M; m++) za[m] = q8_value(as_, true), rs[m] = small_float();
    for (int64_t n = 0; n < N; n++) zb[n] = nozp ? 0 : q8_value(bs, true), cs[n] = small_float();
    for (int64_t i = 0; i < (M > N ? M : N); i++) bias[i] = small_float() - 2.0f;
    for (int64_t i = 0; i < M * ld; i++) memcpy(out + 4 * i, &untouched, 4);
    /* B [N, K] for the int32 kinds, [K, N] for the others. */
    bool bt = kind != QK_INT32 && kind != QK_INT32_PACKED;
    int64_t brs = bt ? 1 : K, bks = bt ? N : 1;
    cn_qgemm_b B = {b8, bs, brs, bks, nozp ? NULL : zb, 1};
    cn_qgemm_widen(A, M, K, kp, a8, as_, K, 1, za, 1);
    cn_qgemm_out o = {.ld = ld, .row_scale = rs, .col_scale = cs, .row_step = 1, .col_step = 1};
    if (kind == QK_INT32 || kind == QK_INT32_PACKED)
        o.c = (int32_t *)(void *)out;
    else
        o.y = (float *)(void *)out;
    if (kind == QK_F32_COL_BIAS) o.bias = bias;
    if (kind == QK_F32_ROW_BIAS) {
        /* A convolution's: one column scale, columns first, bias by row. */
        o.col_step = 0, o.col_first = true;
        o.bias = bias, o.bias_by_row = true;
    }
    if (kind == QK_F32_NO_BIAS) o.col_first = true;
    int rc = 0;
    if (kind == QK_INT32 || kind == QK_F32_NO_BIAS) {
        rc = cn_qgemm(M, N, K, A, &B, &o);
    } else {
        cn_qgemm_pack_b(Bp, &B, N, K);
        if (kind == QK_F32_ROW_BIAS)
            for (int64_t n0 = 0; n0 < N; n0 += CN_QGEMM_NR)
                cn_qgemm_panel(M, kp, A, Bp + n0 * kp, n0,
                               (int)(N - n0 < CN_QGEMM_NR ? N - n0 : CN_QGEMM_NR), &o);
        else
            cn_qgemm_packed(M, N, K, A, Bp, &o);
    }
    CHECK(rc == 0);
    int wrong = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            int64_t s = 0;
            for (int64_t k = 0; k < K; k++) {
                int32_t x = as_ ? (int8_t)a8[m * K + k] : a8[m * K + k];
                int32_t y = bs ? (int8_t)b8[n * brs + k * bks] : b8[n * brs + k * bks];
                s += (int64_t)(x - za[m]) * (y - zb[n]);
            }
            uint32_t want;
            if (o.c) {
                int32_t w = (int32_t)s;
                memcpy(&want, &w, 4);
            } else {
                float r = rs[m], c = cs[n * o.col_step];
                float y = o.col_first ? (float)s * c * r : (float)s * r * c;
                if (o.bias) y += o.bias[o.bias_by_row ? m : n];
                memcpy(&want, &y, 4);
            }
            wrong += memcmp(out + 4 * (m * ld + n), &want, 4) != 0 || s != (int32_t)s;
        }
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = N; n < ld; n++)
            wrong += memcmp(out + 4 * (m * ld + n), &untouched, 4) != 0;
    free(a8), free(b8), free(za), free(zb), free(A), free(Bp), free(rs), free(cs), free(bias);
    free(out);
    return wrong;
}

static void test_qgemm_kernels(void) {
    /* Rows around the kernels' blocks (4 rows for AVX2; 8, and 4 for the
     * last 1 to 4, for VNNI), columns around the 16 of a panel, K odd and
     * even and around the VNNI kernel's two pairs of k per step. */
    static const int64_t Ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 17, 24, 33};
    static const int64_t Ns[] = {1, 5, 15, 16, 17, 33};
    static const int64_t Ks[] = {1, 2, 3, 4, 5, 6, 7, 9, 30, 67, 258};
    const int nM = (int)(sizeof Ms / sizeof Ms[0]), nN = (int)(sizeof Ns / sizeof Ns[0]),
              nK = (int)(sizeof Ks / sizeof Ks[0]);
    cn_cpu_lowp lp = cn_cpu_lowp_features();
    char ran[256] = "";
    for (int l = 0; l < CN_ISA_LEVELS; l++) {
        if (!cn_isa_available(l)) continue;
        CHECK(cn_isa_set(l) == CN_OK);
        const char *kernel = cn_qgemm_kernel();
        bool vnni = !strcmp(kernel, "avx512-vnni");
        snprintf(ran + strlen(ran), sizeof ran - strlen(ran), "%s%s %s", *ran ? ", " : "",
                 cn_isa_name(l), kernel);
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) &&                    \
    defined(__AVX512VNNI__)
        /* A -march=native build for such a CPU: one level, VNNI. */
        CHECK_MSG(vnni, "%s, not avx512-vnni, in a build for AVX512_VNNI", kernel);
#else
        /* VNNI exactly at the avx512 level of a CPU with it; AVX2 at avx2. */
        CHECK_EQ_INT(vnni, l == CN_ISA_AVX512 && lp.avx512_vnni);
        CHECK_EQ_INT(cn_isa_vnni(), vnni);
        if (l == CN_ISA_AVX2) CHECK_MSG(!strcmp(kernel, "avx2"), "%s at avx2", kernel);
#endif
        lcg_state = 12345;
        int cases = 0, bad_cases = 0;
        for (int i = 0; i < nM; i++)
            for (int j = 0; j < nN; j++)
                for (int k = 0; k < nK; k++) {
                    int c = i + 3 * j + 5 * k;
                    bool as_ = c & 1, bs = c >> 1 & 1, nozp = c % 7 == 3;
                    for (int kind = 0; kind < QK_KINDS; kind++) {
                        int wrong = qgemm_case(Ms[i], Ns[j], Ks[k], as_, bs, nozp, kind);
                        cases++;
                        bad_cases += wrong != 0;
                        if (wrong && bad_cases <= 5)
                            CHECK_MSG(0, "%s: M %lld N %lld K %lld, %s x %s, kind %d: %d wrong",
                                      kernel, (long long)Ms[i], (long long)Ns[j],
                                      (long long)Ks[k], as_ ? "i8" : "u8", bs ? "i8" : "u8", kind,
                                      wrong);
                    }
                }
        CHECK_MSG(bad_cases == 0, "%s: %d of %d cases wrong", kernel, bad_cases, cases);
        /* Long sums: random over several panels and blocks of rows, then
         * every product -255 * -255 (sums of 65025 * 4099, near 2^28); the
         * VNNI kernel takes K in chunks of 512 and rows in groups of 64. */
        for (int x = 0; x < 2; x++) {
            q8_extreme = x;
            for (int kind = 0; kind < QK_KINDS; kind++)
                CHECK_MSG(qgemm_case(19, 40, 4099, kind & 1, kind >> 1 & 1, false, kind) == 0,
                          "%s: K 4099, kind %d%s", kernel, kind, x ? ", extremes" : "");
        }
        q8_extreme = false;
        /* the row groups' edge (64) with K past one chunk (1024 = 512
         * pairs), a whole number of chunks, and one past it */
        static const int64_t Mg[] = {63, 64, 65, 70, 131, 64, 65},
                             Kg[] = {1025, 1026, 2048, 513, 1100, 2049, 511};
        for (int i = 0; i < 7; i++)
            for (int kind = 0; kind < QK_KINDS; kind++)
                CHECK_MSG(qgemm_case(Mg[i], 17, Kg[i], kind & 1, i & 1, false, kind) == 0,
                          "%s: M %lld K %lld, kind %d", kernel, (long long)Mg[i],
                          (long long)Kg[i], kind);
    }
    CHECK(cn_isa_set(cn_isa_max()) == CN_OK);
    fprintf(stderr, "  int8 GEMM kernel by level: %s (avx512_vnni: %s)\n", ran,
            lp.avx512_vnni ? "yes" : "not on this CPU");
}

/* max |y - y_f32| / max |y_f32| of module m on x, after quantising it. */
static double quantized_error(cn_module *m, cn_tensor *x, int want_layers) {
    cn_module_train(m, false);
    cn_tensor *ref = cn_module_forward(m, x);
    CHECK_EQ_INT(cn_module_quantize_int8(m), want_layers);
    CHECK_EQ_INT(cn_module_quantize_int8(m), 0); /* already done */
    cn_tensor *y = cn_module_forward(m, x);
    CHECK_MSG(y && cn_tensor_dtype(y) == CN_F32, "%s", cn_last_error());
    if (!y || !ref) return 1e9;
    double err = 0, mag = 0;
    for (int64_t i = 0; i < cn_numel(ref); i++) {
        err = fmax(err, fabs(th_at(y, i) - th_at(ref, i)));
        mag = fmax(mag, fabs(th_at(ref, i)));
    }
    return err / mag;
}

static void test_quantized_modules(void) {
    cn_manual_seed(5);
    cn_module *lin = cn_nn_linear(70, 9, true);
    double e = quantized_error(lin, cn_randn(CN_F32, 2, (int64_t[]){5, 70}), 1);
    CHECK_MSG(e < 0.03, "Linear: relative error %g", e);
    CHECK(cn_module_find(lin, "weight") && cn_tensor_dtype(cn_module_find(lin, "weight")) == CN_I8);
    CHECK(cn_module_find(lin, "weight_scale") && cn_module_num_params(lin) == 0);
    cn_module_free(lin);

    /* The depthwise convolution (8 groups) stays f32. */
    cn_module *layers[] = {
        cn_nn_conv2d(3, 8, 3, 3, &(cn_conv_opts){.stride = {2, 1}, .padding = {1, 0}}, true),
        cn_nn_conv2d(8, 8, 3, 3, &(cn_conv_opts){.groups = 8}, true)};
    cn_module *seq = cn_nn_sequential(layers, 2);
    e = quantized_error(seq, cn_randn(CN_F32, 4, (int64_t[]){2, 3, 9, 7}), 1);
    CHECK_MSG(e < 0.03, "Conv2d: relative error %g", e);
    cn_module_free(seq);

    /* What Conv2d takes, its int8 form takes: one unbatched image; and
     * what it refuses (a padded input smaller than the kernel) too. */
    cn_module *c = cn_nn_conv2d(2, 3, 3, 3, &(cn_conv_opts){.stride = {2, 2}}, true);
    e = quantized_error(c, cn_randn(CN_F32, 3, (int64_t[]){2, 6, 5}), 1);
    CHECK_MSG(e < 0.03, "Conv2d on [C, H, W]: relative error %g", e);
    CHECK_ERROR(cn_module_forward(c, cn_randn(CN_F32, 4, (int64_t[]){1, 2, 2, 5})),
                "smaller than the kernel");
    cn_module_free(c);

    /* A layer that cannot be quantised (f64) leaves the whole model f32. */
    cn_module *two[] = {cn_nn_linear(4, 3, true), cn_nn_linear(3, 2, true)};
    cn_release(two[1]->params[0].t);
    two[1]->params[0].t = cn_retain(cn_zeros(CN_F64, 2, (int64_t[]){2, 3}));
    cn_module *mixed = cn_nn_sequential(two, 2);
    int64_t nparams = cn_module_num_params(mixed);
    CHECK_STATUS_ERROR(cn_module_quantize_int8(mixed), "weights must be f32 on the CPU");
    CHECK(cn_tensor_dtype(cn_module_find(mixed, "0.weight")) == CN_F32 &&
          cn_module_num_params(mixed) == nparams);
    cn_module_free(mixed);
}

/* What the int8 forward computes, naively: x quantised with scale
 * max |x| / 127 (v rounded half to even after clamping to +-127), int32
 * sums with the i8 weights, then sum * x's scale * the weight's scale +
 * bias, in f32 in that order. */
static float q_scale(const float *x, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m > 0 ? m / 127.0f : 1.0f;
}

static int32_t q_value(float x, float sc) {
    float v = fminf(fmaxf(x * (1.0f / sc), -127.0f), 127.0f);
    return (int32_t)nearbyintf(v);
}

static float q_out(int64_t sum, float sc, const cn_tensor *ws, const cn_tensor *b, int64_t n) {
    float y = (float)sum * sc * ((const float *)cn_data(ws))[n];
    return b ? y + ((const float *)cn_data(b))[n] : y;
}

/* The int8 module's output against the naive loops, exactly: the number
 * of outputs that differ. */
static int linear_int8_wrong(cn_module *m, cn_tensor *x) {
    const cn_tensor *w = cn_module_find(m, "weight");
    int64_t M = cn_shape(x)[0], K = cn_shape(x)[1], N = cn_shape(w)[0];
    const float *xd = cn_data(x), *y = cn_data(cn_module_forward(m, x));
    const int8_t *wd = cn_data(w);
    int wrong = 0;
    for (int64_t r = 0; r < M; r++) {
        float sc = q_scale(xd + r * K, K);
        for (int64_t n = 0; n < N; n++) {
            int64_t s = 0;
            for (int64_t k = 0; k < K; k++) s += q_value(xd[r * K + k], sc) * wd[n * K + k];
            float want = q_out(s, sc, cn_module_find(m, "weight_scale"), cn_module_find(m, "bias"), n);
            wrong += memcmp(&want, &y[r * N + n], 4) != 0;
        }
    }
    return wrong;
}

static int conv_int8_wrong(cn_module *m, cn_tensor *x, int sh, int sw, int ph, int pw) {
    const cn_tensor *w = cn_module_find(m, "weight");
    const int64_t *xs = cn_shape(x), *ws = cn_shape(w);
    int64_t B = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ws[0], kh = ws[2], kw = ws[3];
    int64_t oh = (H + 2 * ph - kh) / sh + 1, ow = (W + 2 * pw - kw) / sw + 1;
    const float *xd = cn_data(x), *y = cn_data(cn_module_forward(m, x));
    const int8_t *wd = cn_data(w);
    int wrong = 0;
    for (int64_t b = 0; b < B; b++) {
        const float *img = xd + b * C * H * W;
        float sc = q_scale(img, C * H * W);
        for (int64_t o = 0; o < O; o++)
            for (int64_t oy = 0; oy < oh; oy++)
                for (int64_t ox = 0; ox < ow; ox++) {
                    int64_t s = 0;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t ky = 0; ky < kh; ky++)
                            for (int64_t kx = 0; kx < kw; kx++) {
                                int64_t iy = oy * sh - ph + ky, ix = ox * sw - pw + kx;
                                if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                                    s += q_value(img[(c * H + iy) * W + ix], sc) *
                                         wd[((o * C + c) * kh + ky) * kw + kx];
                            }
                    float want = q_out(s, sc, cn_module_find(m, "weight_scale"),
                                       cn_module_find(m, "bias"), o);
                    wrong += memcmp(&want, &y[((b * O + o) * oh + oy) * ow + ox], 4) != 0;
                }
    }
    return wrong;
}

/* Values on the rounding's ties: with max |x| = 127 the scale is 1. */
static cn_tensor *with_ties(cn_tensor *x) {
    float *d = cn_data(x);
    static const float ties[] = {127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 1.5f};
    for (int i = 0; i < 6; i++) d[i] = ties[i];
    return x;
}

static void test_int8_forward_exact(void) {
    cn_manual_seed(9);
    cn_module *lin = cn_nn_linear(37, 19, true);
    /* Panels of 16 output pixels: c2's span two rows of 22 (an odd K, 27,
     * and a partial last panel); c3's four rows of 4 (no bias); c4's
     * strides of 2, gathered one by one. */
    cn_module *c2 = cn_nn_conv2d(3, 5, 3, 3, &(cn_conv_opts){.padding = {1, 2}}, true);
    cn_module *c3 = cn_nn_conv2d(2, 3, 3, 3, NULL, false);
    cn_module *c4 = cn_nn_conv2d(2, 6, 2, 3, &(cn_conv_opts){.stride = {2, 2}, .padding = {0, 1}},
                                 true);
    cn_module *mods[4] = {lin, c2, c3, c4};
    for (int i = 0; i < 4; i++) {
        cn_module_train(mods[i], false);
        CHECK_EQ_INT(cn_module_quantize_int8(mods[i]), 1);
    }
    cn_tensor *xl = with_ties(cn_mul_scalar(cn_randn(CN_F32, 2, (int64_t[]){6, 37}), 20));
    cn_tensor *x2 = with_ties(cn_randn(CN_F32, 4, (int64_t[]){2, 3, 7, 18}));
    cn_tensor *x3 = cn_randn(CN_F32, 4, (int64_t[]){2, 2, 6, 6});
    cn_tensor *x4 = cn_randn(CN_F32, 4, (int64_t[]){1, 2, 9, 11});
    for (int l = 0; l < CN_ISA_LEVELS; l++) {
        if (!cn_isa_available(l)) continue;
        CHECK(cn_isa_set(l) == CN_OK);
        for (int pass = 0; pass < 2; pass++) {
            CHECK_MSG(linear_int8_wrong(lin, xl) == 0, "Linear, %s", cn_isa_name(l));
            CHECK_MSG(conv_int8_wrong(c2, x2, 1, 1, 1, 2) == 0, "Conv2d, %s", cn_isa_name(l));
            CHECK_MSG(conv_int8_wrong(c3, x3, 1, 1, 0, 0) == 0, "Conv2d 4 wide, %s",
                      cn_isa_name(l));
            CHECK_MSG(conv_int8_wrong(c4, x4, 2, 2, 0, 1) == 0, "Conv2d stride 2, %s",
                      cn_isa_name(l));
            /* The packed weights follow a write to the weights. */
            for (int i = 0; i < 4; i++) {
                cn_tensor *w = cn_module_find(mods[i], "weight");
                CHECK(cn_copy_(w, cn_randint(-127, 128, CN_I8, cn_ndim(w), cn_shape(w))) == CN_OK);
            }
        }
    }
    CHECK(cn_isa_set(cn_isa_max()) == CN_OK);
    /* Traced into a program, the weights are packed at each run: a run
     * after they change reads the new ones, as eager mode does. */
    cn_tensor *xs[2] = {xl, x2};
    for (int i = 0; i < 2; i++) {
        cn_graph *g = cn_graph_new();
        cn_tensor *ph = cn_placeholder(g, "x", CN_F32, cn_ndim(xs[i]), cn_shape(xs[i]));
        cn_tensor *yg = cn_module_forward(mods[i], ph);
        cn_program *prog = yg ? cn_compile(g, &yg, 1, NULL) : NULL;
        CHECK_MSG(prog, "%s", cn_last_error());
        for (int pass = 0; prog && pass < 2; pass++) {
            cn_tensor *yr = NULL;
            CHECK(cn_run(prog, &ph, &xs[i], 1, &yr, 1) == CN_OK);
            CHECK_MSG(yr && cn_equal(yr, cn_module_forward(mods[i], xs[i])), "%s, run %d",
                      mods[i]->vt->type, pass);
            cn_tensor *w = cn_module_find(mods[i], "weight");
            CHECK(cn_copy_(w, cn_randint(-127, 128, CN_I8, cn_ndim(w), cn_shape(w))) == CN_OK);
        }
        cn_program_free(prog);
        cn_graph_free(g);
    }
    for (int i = 0; i < 4; i++) cn_module_free(mods[i]);
}

int main(void) {
    RUN(test_i8_dtype);
    RUN(test_matmul_integer_every_level);
    RUN(test_qgemm_kernels);
    RUN(test_quantized_modules);
    RUN(test_int8_forward_exact);
    return th_summary();
}
