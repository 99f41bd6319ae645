/* int8: the i8 dtype (conversions, printing, .npy and safetensors), the
 * int8 GEMM behind cn_matmul_integer against naive int32 loops at every
 * instruction-set level, and int8 inference of Linear and Conv2d modules
 * (cn_module_quantize_int8) against their f32 outputs. The ONNX integer
 * ops are checked by the conformance suite (tests/onnx). */
#include "harness.h"

#include "core/core.h"
#include "core/isa.h"

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
        /* Odd sizes: edges of the 3 x 4 blocks and K past a multiple of 16. */
        check_matmul_integer(CN_U8, CN_I8, 1, 7, 37, 9, false);
        check_matmul_integer(CN_I8, CN_U8, 2, 5, 16, 6, true);
        check_matmul_integer(CN_I8, CN_I8, 1, 1, 1, 1, false);
        check_matmul_integer(CN_U8, CN_U8, 3, 4, 50, 13, false);
        check_matmul_integer(CN_U8, CN_I8, 1, 33, 300, 70, false);
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

int main(void) {
    RUN(test_i8_dtype);
    RUN(test_matmul_integer_every_level);
    RUN(test_quantized_modules);
    return th_summary();
}
