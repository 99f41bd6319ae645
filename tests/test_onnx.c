/* ONNX import through the public API: external data and its path checks,
 * the exact "unsupported: OP (opset N): reason" messages, shape chains that
 * fold once input shapes are given, inputs bound at load time, run errors,
 * and truncated or corrupted files (an error, never a crash). The models
 * are written by tests/onnx/make_models.py (python3-onnx) during the run;
 * the op semantics are tested by the conformance suite (tests/onnx/). A
 * build without ONNX checks that every entry point says so. */
#include "harness.h"

#include <stdlib.h>

static char dir[1024];

static const char *model(const char *name) {
    static char p[1200];
    snprintf(p, sizeof p, "%s/%s.onnx", dir, name);
    return p;
}

static void test_external_data(void) {
    cn_onnx_model *m = cn_onnx_load(model("ext_ok"), NULL);
    CHECK(m != NULL);
    if (!m) return;
    CHECK_EQ_INT(cn_onnx_num_params(m), 6);
    cn_tensor *x = cn_ones(CN_F32, CN_SHAPE(2, 3)), *y;
    CHECK_EQ_INT(cn_onnx_run(m, &x, &y), 0);
    for (int i = 0; i < 6; i++) CHECK_CLOSE(cn_get(y, (int64_t[]){i / 3, i % 3}), 1 + i, 0, 0);
    cn_onnx_free(m);
    CHECK_ERROR(cn_onnx_load(model("ext_escape"), NULL), "is not a plain relative path");
    CHECK_ERROR(cn_onnx_load(model("ext_short"), NULL), "external data length 48, the tensor needs 24");
    /* From memory there is no directory to look in. */
    FILE *f = fopen(model("ext_ok"), "rb");
    CHECK(f != NULL);
    if (!f) return;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    CHECK_ERROR(cn_onnx_load_buffer(buf, n, NULL, NULL), "not loaded from a file");
}

static void test_unsupported(void) {
    cn_clear_error();
    CHECK(cn_onnx_load(model("unsup_op"), NULL) == NULL);
    CHECK_MSG(!strcmp(cn_last_error(), "unsupported: Det (opset 13): no importer for this op"),
              "message: %s", cn_last_error());
    CHECK(cn_onnx_load(model("unsup_attr"), NULL) == NULL);
    CHECK_MSG(!strcmp(cn_last_error(), "unsupported: Relu (opset 13): attribute 'foo' is not supported"),
              "message: %s", cn_last_error());
}

/* ONNX's reference: the range of all-zero x is taken as 1, so the scale is
 * 1/255 (not 0, which later divisions turn into inf); other x as usual. */
static void test_dynamic_quantize(void) {
    cn_onnx_model *m = cn_onnx_load(model("dql"), NULL);
    CHECK(m != NULL);
    if (!m) return;
    cn_tensor *out[3];
    CHECK_EQ_INT(cn_onnx_run(m, (cn_tensor *[]){cn_zeros(CN_F32, CN_SHAPE(4))}, out), 0);
    CHECK_CLOSE(cn_item(out[1]), 1.0 / 255, 1e-7, 0);
    CHECK_CLOSE(cn_item(out[2]), 0, 0, 0);
    for (int64_t i = 0; i < 4; i++) CHECK_CLOSE(cn_get(out[0], &i), 0, 0, 0);
    float v[4] = {-1, 0, 0.5f, 2};
    CHECK_EQ_INT(cn_onnx_run(m, (cn_tensor *[]){cn_from_data(CN_F32, CN_SHAPE(4), v)}, out), 0);
    CHECK_CLOSE(cn_item(out[1]), 3.0 / 255, 1e-7, 0);
    CHECK_CLOSE(cn_item(out[2]), 85, 0, 0); /* round(0 - (-1) / (3/255)) */
    CHECK_CLOSE(cn_get(out[0], (int64_t[]){3}), 255, 0, 0);
    cn_onnx_free(m);
}

/* Gelu (opset 20) against its formulas in double. */
static void test_gelu_node(void) {
    cn_onnx_model *m = cn_onnx_load(model("gelu"), NULL);
    CHECK(m != NULL);
    if (!m) return;
    float v[6] = {-6, -1.5f, -0.25f, 0, 0.75f, 3};
    cn_tensor *out[2] = {0};
    int rc = cn_onnx_run(m, (cn_tensor *[]){cn_from_data(CN_F32, CN_SHAPE(6), v)}, out);
    CHECK_EQ_INT(rc, 0);
    for (int64_t i = 0; rc == 0 && i < 6; i++) {
        double x = v[i], z = 0.7978845608028654 * (x + 0.044715 * x * x * x);
        CHECK_CLOSE(cn_get(out[0], &i), 0.5 * x * erfc(-x / sqrt(2)), 1e-5, 1e-12);
        CHECK_CLOSE(cn_get(out[1], &i), 0.5 * x * (1 + tanh(z)), 1e-5, 1e-12);
    }
    cn_onnx_free(m);
}

static void check_values(cn_tensor *t, int ndim, const int64_t *shape, const double *want) {
    CHECK(t != NULL);
    if (!t) return;
    CHECK_EQ_INT(cn_ndim(t), ndim);
    int64_t n = 1;
    for (int i = 0; i < ndim && i < cn_ndim(t); i++) {
        CHECK_EQ_INT(cn_dim(t, i), shape[i]);
        n *= shape[i];
    }
    if (cn_numel(t) != n) return;
    cn_tensor *f = cn_reshape(cn_cast(t, CN_F64), 1, (int64_t[]){n});
    for (int64_t i = 0; i < n; i++) CHECK_CLOSE(cn_get(f, &i), want[i], 1e-6, 1e-7);
}

/* What opsets 18 to 21 changed (make_models.py's op21), against values
 * worked out by hand. */
static void test_opset21(void) {
    cn_onnx_model *m = cn_onnx_load(model("op21"), NULL);
    CHECK_MSG(m != NULL, "%s", cn_last_error());
    if (!m) return;
    float xv[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, x8[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    cn_tensor *in[2] = {cn_from_data(CN_F32, CN_SHAPE(2, 5), xv), cn_from_data(CN_F32, CN_SHAPE(8), x8)};
    cn_tensor *o[10] = {0};
    CHECK_EQ_INT(cn_onnx_run(m, in, o), 0);
    check_values(o[0], 1, (int64_t[]){2}, (double[]){2, 7});
    check_values(o[1], 2, (int64_t[]){2, 3}, (double[]){0, 1, 2, 5, 6, 7});
    check_values(o[2], 2, (int64_t[]){2, 2}, (double[]){3, 4, 8, 9});
    check_values(o[3], 2, (int64_t[]){2, 8},
                 (double[]){0, 0, 1, 2, 3, 4, 0, 0, 0, 5, 6, 7, 8, 9, 0, 0});
    double mish[10];
    for (int i = 0; i < 10; i++) mish[i] = xv[i] * tanh(log1p(exp(xv[i])));
    check_values(o[4], 2, (int64_t[]){2, 5}, mish);
    check_values(o[5], 2, (int64_t[]){2, 10},
                 (double[]){0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9});
    /* sizes 3 x 3 for a 2 x 4 plane, not larger: one scale, 0.75, and a
     * 2 x 3 result; nearest (half-pixel) picks rows 0, 1 and columns 0, 1, 3 */
    check_values(o[6], 4, (int64_t[]){1, 1, 2, 3}, (double[]){0, 1, 3, 4, 5, 7});
    CHECK(o[7] && cn_tensor_dtype(o[7]) == CN_I8);
    check_values(o[7], 2, (int64_t[]){2, 5},
                 (double[]){0, 2, 4, 6, 8, 10, 12, 14, 16, 18});
    /* wrap: the last row before, the last two columns before and the first after */
    check_values(o[8], 2, (int64_t[]){3, 8},
                 (double[]){8, 9, 5, 6, 7, 8, 9, 5, 3, 4, 0, 1, 2, 3, 4, 0, 8, 9, 5, 6, 7, 8, 9, 5});
    /* sizes 2 x 5, not smaller: the scale 1.25, and 2.5 rows round up to 3 */
    check_values(o[9], 4, (int64_t[]){1, 1, 3, 5},
                 (double[]){0, 1, 1, 2, 3, 4, 5, 5, 6, 7, 4, 5, 5, 6, 7});
    cn_onnx_free(m);
}

/* GroupNormalization at opsets 18 (scale and bias per group) and 21 (per
 * channel), against the formula in double. */
static void test_group_norm(void) {
    const double scale[4] = {1.5, -0.5, 2.0, 0.25}, bias[4] = {0.1, 0.2, -0.3, 0.4};
    float xv[24];
    for (int i = 0; i < 24; i++) xv[i] = (float)((i * 7) % 11) - 3.5f;
    for (int opset = 18; opset <= 21; opset += 3) {
        char name[32];
        snprintf(name, sizeof name, "group_norm%d", opset);
        cn_onnx_model *m = cn_onnx_load(model(name), NULL);
        CHECK_MSG(m != NULL, "%s: %s", name, cn_last_error());
        if (!m) continue;
        cn_tensor *y = NULL;
        CHECK_EQ_INT(cn_onnx_run(m, (cn_tensor *[]){cn_from_data(CN_F32, CN_SHAPE(2, 4, 3), xv)}, &y), 0);
        double want[24];
        for (int nb = 0; nb < 2; nb++)
            for (int g = 0; g < 2; g++) {
                const float *v = xv + nb * 12 + g * 6; /* 2 channels x 3 positions */
                double mean = 0, var = 0;
                for (int i = 0; i < 6; i++) mean += v[i] / 6.0;
                for (int i = 0; i < 6; i++) var += (v[i] - mean) * (v[i] - mean) / 6.0;
                for (int i = 0; i < 6; i++) {
                    int ch = g * 2 + i / 3, p = opset < 21 ? g : ch;
                    want[nb * 12 + g * 6 + i] = (v[i] - mean) / sqrt(var + 1e-3) * scale[p] + bias[p];
                }
            }
        check_values(y, 3, (int64_t[]){2, 4, 3}, want);
        cn_onnx_free(m);
    }
}

/* Opset 23's Attention (grouped-query heads with an added mask; 3-D
 * inputs split into heads, causal; a bool mask and a scale) and
 * RMSNormalization, against numpy's results (make_models.py's att23). */
static void test_attention23(void) {
    static const char *in_names[] = {"qa", "ka", "va", "ma", "qb", "kb", "vb",
                                     "qc", "kc", "vc", "xr", "sr", "mc"};
    static const char *out_names[] = {"ya", "yb", "yc", "yr"};
    cn_onnx_model *m = cn_onnx_load(model("att23"), NULL);
    CHECK_MSG(m != NULL, "%s", cn_last_error());
    if (!m) return;
    char p[1200];
    cn_tensor *in[13] = {0}, *out[4] = {0};
    for (int i = 0; i < cn_onnx_num_inputs(m) && i < 13; i++) {
        const char *name = cn_onnx_input_name(m, i);
        for (int j = 0; j < 13; j++)
            if (!strcmp(name, in_names[j])) {
                snprintf(p, sizeof p, "%s/att23_%s.npy", dir, name);
                in[i] = cn_load_npy(p);
            }
        CHECK_MSG(in[i] != NULL, "input %s", name);
    }
    int rc = cn_onnx_run(m, in, out);
    CHECK_MSG(rc == 0, "%s", cn_last_error());
    for (int i = 0; rc == 0 && i < 4; i++) {
        CHECK(!strcmp(cn_onnx_output_name(m, i), out_names[i]));
        snprintf(p, sizeof p, "%s/att23_%s.npy", dir, out_names[i]);
        cn_tensor *want = cn_load_npy(p);
        CHECK(want && out[i] && cn_numel(want) == cn_numel(out[i]) && cn_ndim(want) == cn_ndim(out[i]));
        if (!want || !out[i] || cn_numel(want) != cn_numel(out[i])) continue;
        int64_t nel = cn_numel(want);
        cn_tensor *a = cn_reshape(cn_contiguous(out[i]), 1, &nel), *b = cn_reshape(want, 1, &nel);
        for (int64_t e = 0; e < nel; e++) CHECK_CLOSE(cn_get(a, &e), cn_get(b, &e), 1e-5, 1e-6);
    }
    cn_onnx_free(m);
}

/* The dd model (make_models.py): outputs whose shapes depend on values, so
 * it runs eagerly; each output against numpy's, exactly (indices, picked
 * values, sorted values) or to f32 rounding. */
static cn_tensor *dd_npy(const char *name) {
    char p[1200];
    snprintf(p, sizeof p, "%s/dd_%s.npy", dir, name);
    return cn_load_npy(p);
}

static bool same_values(cn_tensor *got, cn_tensor *want) {
    if (!got || !want || cn_ndim(got) != cn_ndim(want)) return false;
    for (int d = 0; d < cn_ndim(want); d++)
        if (cn_dim(got, d) != cn_dim(want, d)) return false;
    int64_t nel = cn_numel(want);
    cn_tensor *a = cn_reshape(cn_contiguous(got), 1, &nel), *b = cn_reshape(cn_contiguous(want), 1, &nel);
    for (int64_t e = 0; e < nel; e++)
        if (cn_get(a, &e) != cn_get(b, &e)) return false;
    return true;
}

static void test_data_dependent(void) {
    static const char *outs[] = {"nz", "picked", "branch", "tv", "ti", "sel"};
    cn_onnx_model *m = cn_onnx_load(model("dd"), NULL);
    CHECK_MSG(m != NULL, "%s", cn_last_error());
    if (!m) return;
    const char *why = cn_onnx_eager_reason(m);
    CHECK_MSG(why && strstr(why, "NonZero (opset 13): input 'X' is computed at run time"), "%s",
              why ? why : "(static)");
    int nin = cn_onnx_num_inputs(m);
    CHECK_EQ_INT(nin, 8);
    CHECK_EQ_INT(cn_onnx_num_outputs(m), 6);
    cn_tensor *in[8] = {0}, *out[6] = {0};
    for (int i = 0; i < nin && i < 8; i++) CHECK((in[i] = dd_npy(cn_onnx_input_name(m, i))) != NULL);
    for (int run = 0; run < 2; run++) { /* the second run walks the same kept model again */
        int rc = cn_onnx_run(m, in, out);
        CHECK_MSG(rc == 0, "%s", cn_last_error());
        for (int i = 0; rc == 0 && i < 6; i++) {
            CHECK(!strcmp(cn_onnx_output_name(m, i), outs[i]));
            CHECK_MSG(same_values(out[i], dd_npy(outs[i])), "output %s, run %d", outs[i], run);
        }
    }
    /* Another x: other nonzero positions, so other output sizes, and the
     * other branch. */
    cn_tensor *x = cn_mul_scalar(in[0], -1);
    cn_tensor *in2[8];
    memcpy(in2, in, sizeof in2);
    in2[0] = x;
    CHECK_EQ_INT(cn_onnx_run(m, in2, out), 0);
    int64_t npos = 0, nel = cn_numel(x);
    double sum = 0;
    for (int64_t e = 0; e < nel; e++) {
        double v = cn_get(cn_reshape(x, 1, &nel), &e);
        npos += v > 0, sum += v;
    }
    CHECK_SHAPE(out[0], 2, npos);
    CHECK(same_values(out[2], sum > 0 ? cn_mul_scalar(x, 2) : cn_neg(x)));
    CHECK(same_values(dd_npy("branch"), cn_item(cn_sum(in[0], NULL, 0, false)) > 0 ? cn_mul_scalar(in[0], 2)
                                                                                      : cn_neg(in[0])));
    /* The output is the model's own tensor no more than the inputs are. */
    CHECK(!cn_shares_storage(out[2], x));
    cn_tensor *bad[8];
    memcpy(bad, in, sizeof bad);
    bad[0] = cn_zeros(CN_F64, CN_SHAPE(4, 5));
    CHECK_STATUS_ERROR(cn_onnx_run(m, bad, out), "input 0 ('x') is f64[4, 5]; the model takes f32[4, 5]");
    cn_onnx_free(m);
    /* If and Loop around values that run eagerly (make_models.py says
     * what each part checks). */
    m = cn_onnx_load(model("control_eager"), NULL);
    CHECK_MSG(m != NULL, "%s", cn_last_error());
    if (m) {
        CHECK(cn_onnx_eager_reason(m) != NULL);
        cn_tensor *ins[2] = {cn_from_data(CN_F32, 1, (int64_t[]){2}, (float[]){1.5f, -2}),
                             cn_from_data(CN_F32, 1, (int64_t[]){3}, (float[]){-1, 2, 3})};
        cn_tensor *outs3[4] = {0};
        for (int run = 0; run < 2; run++) {
            int rc = cn_onnx_run(m, ins, outs3);
            CHECK_MSG(rc == 0, "%s", cn_last_error());
            if (rc < 0) break;
            /* three negations; the positive entries' positions; relu */
            CHECK(same_values(outs3[0], cn_from_data(CN_F32, 1, (int64_t[]){2}, (float[]){-1.5f, 2})));
            CHECK(same_values(outs3[1], cn_from_data(CN_I64, 2, (int64_t[]){1, 2}, (int64_t[]){1, 2})));
            CHECK(same_values(outs3[2], cn_from_data(CN_F32, 1, (int64_t[]){3}, (float[]){0, 2, 3})));
        }
        cn_onnx_free(m);
    }
    /* Sizes from a file stay bounded in a load and in an eager run. */
    CHECK_ERROR(cn_onnx_load(model("loop_long"), NULL),
                "unsupported: Loop (opset 13): more than 4096 loop iterations while the model loads");
    m = cn_onnx_load(model("eager_huge"), NULL);
    CHECK_MSG(m != NULL, "%s", cn_last_error());
    if (!m) return;
    cn_tensor *x3 = cn_ones(CN_F32, CN_SHAPE(3)), *o2[2];
    CHECK_STATUS_ERROR(cn_onnx_run(m, &x3, o2), "ConstantOfShape (opset 13): node 1: the tensors this node "
                                                "computes would take more than the 268435461 elements");
    cn_onnx_free(m);
}

/* Model NAME run on NAME_<input>.npy for each of its inputs, each output
 * against NAME_<output>.npy (saved by make_models.py from numpy's loops):
 * the same shape, values within rtol/atol. */
static void check_against_npy(const char *name, double rtol, double atol) {
    cn_onnx_model *m = cn_onnx_load(model(name), NULL);
    CHECK_MSG(m != NULL, "%s: %s", name, cn_last_error());
    if (!m) return;
    char p[1200];
    int nin = cn_onnx_num_inputs(m), nout = cn_onnx_num_outputs(m);
    cn_tensor *in[8] = {0}, *out[8] = {0};
    CHECK(nin <= 8 && nout <= 8);
    for (int i = 0; i < nin && i < 8; i++) {
        snprintf(p, sizeof p, "%s/%s_%s.npy", dir, name, cn_onnx_input_name(m, i));
        CHECK_MSG((in[i] = cn_load_npy(p)) != NULL, "%s", p);
    }
    int rc = nin <= 8 && nout <= 8 ? cn_onnx_run(m, in, out) : -1;
    CHECK_MSG(rc == 0, "%s: %s", name, cn_last_error());
    for (int i = 0; rc == 0 && i < nout; i++) {
        snprintf(p, sizeof p, "%s/%s_%s.npy", dir, name, cn_onnx_output_name(m, i));
        cn_tensor *want = cn_load_npy(p);
        bool same = want && out[i] && cn_ndim(want) == cn_ndim(out[i]);
        for (int d = 0; same && d < cn_ndim(want); d++) same = cn_dim(out[i], d) == cn_dim(want, d);
        CHECK_MSG(same, "%s: output %s's shape", name, cn_onnx_output_name(m, i));
        if (!same) continue;
        int64_t nel = cn_numel(want);
        cn_tensor *a = cn_reshape(cn_contiguous(out[i]), 1, &nel), *b = cn_reshape(want, 1, &nel);
        for (int64_t e = 0; e < nel; e++) CHECK_CLOSE(cn_get(a, &e), cn_get(b, &e), rtol, atol);
    }
    cn_onnx_free(m);
}

/* AffineGrid and GridSample (opset 20's "linear"), and GridSample on an
 * f16 image computed while loading (positions past f16's exact integers),
 * against numpy's loops in double. */
static void test_affine_grid(void) {
    cn_onnx_model *m = cn_onnx_load(model("affine20"), NULL);
    CHECK(m && cn_onnx_eager_reason(m) == NULL);
    cn_onnx_free(m);
    check_against_npy("affine20", 1e-5, 1e-6);
    m = cn_onnx_load(model("grid16"), NULL);
    CHECK(m && cn_tensor_dtype(cn_onnx_output(m, 0)) == CN_F16);
    cn_onnx_free(m);
    check_against_npy("grid16", 2e-3, 2e-3);
}

/* Scan with a reversed input on axis 1, a forward one on axis 0 and a
 * reversed output on axis 1, against numpy's loop (scan11_*.npy). */
static void test_scan(void) { check_against_npy("scan11", 1e-5, 1e-6); }

/* ONNX Runtime's com.microsoft quantized ops and MaxPool on int8 against
 * numpy's dequantize -> float op -> quantize in double: quantized results
 * within one step (a value within f32 rounding of a half step may round
 * the other way) and nearly all equal; the float QGemm within 1e-5. */
static void test_ms_quant(void) {
    cn_onnx_model *m = cn_onnx_load(model("ms_quant"), NULL);
    CHECK_MSG(m != NULL, "%s", cn_last_error());
    if (!m) return;
    char p[1200];
    int nin = cn_onnx_num_inputs(m), nout = cn_onnx_num_outputs(m);
    cn_tensor *in[8] = {0}, *out[16] = {0};
    CHECK(nin <= 8 && nout <= 16);
    for (int i = 0; i < nin && i < 8; i++) {
        snprintf(p, sizeof p, "%s/ms_quant_%s.npy", dir, cn_onnx_input_name(m, i));
        CHECK_MSG((in[i] = cn_load_npy(p)) != NULL, "%s", p);
    }
    int rc = nin <= 8 && nout <= 16 ? cn_onnx_run(m, in, out) : -1;
    CHECK_MSG(rc == 0, "%s", cn_last_error());
    int64_t total = 0, differ = 0;
    for (int i = 0; rc == 0 && i < nout; i++) {
        const char *name = cn_onnx_output_name(m, i);
        snprintf(p, sizeof p, "%s/ms_quant_%s.npy", dir, name);
        cn_tensor *want = cn_load_npy(p);
        CHECK_MSG(want && cn_tensor_dtype(want) == cn_tensor_dtype(out[i]) &&
                      cn_numel(want) == cn_numel(out[i]),
                  "%s: type or size", name);
        if (!want || cn_numel(want) != cn_numel(out[i])) continue;
        int64_t nel = cn_numel(want);
        bool fl = cn_dtype_is_float(cn_tensor_dtype(want));
        cn_tensor *a = cn_reshape(cn_contiguous(out[i]), 1, &nel), *b = cn_reshape(want, 1, &nel);
        for (int64_t e = 0; e < nel; e++) {
            double x = cn_get(a, &e), y = cn_get(b, &e);
            if (fl) CHECK_CLOSE(x, y, 1e-5, 1e-6);
            else {
                CHECK_MSG(fabs(x - y) <= 1, "%s[%lld]: %g, numpy %g", name, (long long)e, x, y);
                total++;
                differ += x != y;
            }
        }
    }
    CHECK_MSG(total > 900 && differ * 100 <= total, "%lld of %lld quantized values differ", (long long)differ,
              (long long)total);
    cn_onnx_free(m);
}

/* ScatterND with constant indices (runs of rows, distinct rows in any
 * order, a repeated row, replacing and adding) against numpy's loops; a
 * coordinate past its axis refused at load. */
static void test_scatter_const(void) {
    check_against_npy("scatter_const", 1e-6, 1e-6);
    CHECK(cn_onnx_load(model("scatter_bad"), NULL) == NULL);
    CHECK_MSG(strstr(cn_last_error(), "index 5 on axis 1 of size 4") != NULL, "%s", cn_last_error());
}

/* f16 in, f16 out through a compiled program, each op's result rounded to
 * f16 as eagerly (the rounding checked on values that need it). */
static void test_half_static(void) {
    cn_onnx_model *m = cn_onnx_load(model("half_ops"), NULL);
    CHECK_MSG(m != NULL, "%s", cn_last_error());
    if (!m) return;
    CHECK(cn_tensor_dtype(cn_onnx_output(m, 0)) == CN_F16);
    float av[5] = {1.5f, -2, 0.1f, 3.3f, 1000}, bv[5] = {0.25f, 1, -0.2f, 0.0009765625f, 1};
    cn_tensor *in[2] = {cn_cast(cn_from_data(CN_F32, 1, (int64_t[]){5}, av), CN_F16),
                        cn_cast(cn_from_data(CN_F32, 1, (int64_t[]){5}, bv), CN_F16)};
    cn_tensor *y = NULL;
    CHECK_EQ_INT(cn_onnx_run(m, in, &y), 0);
    if (!y) return;
    CHECK(cn_tensor_dtype(y) == CN_F16);
    cn_tensor *want = cn_mul(cn_relu(cn_add(in[0], in[1])), in[0]); /* eagerly, in f16 */
    for (int64_t i = 0; i < 5; i++) CHECK_CLOSE(cn_get(y, &i), cn_get(want, &i), 0, 0);
    cn_onnx_free(m);
}

static void test_dynamic_shapes(void) {
    CHECK_ERROR(cn_onnx_load(model("dyn"), NULL),
                "unsupported: Shape (opset 13): the shape of a tensor with unknown sizes");
    cn_onnx_input_shape s = {.name = "x", .ndim = 2, .shape = {4, 3}};
    cn_onnx_model *m = cn_onnx_load(model("dyn"), &(cn_onnx_load_opts){.shapes = &s, .nshapes = 1});
    CHECK(m != NULL);
    if (!m) return;
    CHECK_EQ_INT(cn_onnx_num_inputs(m), 1);
    CHECK(!strcmp(cn_onnx_input_name(m, 0), "x") && !strcmp(cn_onnx_output_name(m, 0), "y"));
    CHECK_SHAPE(cn_onnx_output(m, 0), 4, 3, 1);
    /* The shape chain folded: what is left is the reshape and the product. */
    cn_tensor *o = cn_onnx_output(m, 0);
    cn_program *p = cn_compile(cn_onnx_graph(m), &o, 1, &(cn_compile_opts){.opt_level = 0});
    CHECK(p && cn_program_num_steps(p) == 2);
    cn_program_free(p);
    cn_tensor *x = cn_arange(0, 12, 1, CN_F32), *y;
    x = cn_reshape(x, 2, (int64_t[]){4, 3});
    CHECK_EQ_INT(cn_onnx_run(m, &x, &y), 0);
    CHECK_SHAPE(y, 4, 3, 1);
    CHECK_CLOSE(cn_get(y, (int64_t[]){3, 2, 0}), 22, 0, 0);
    cn_tensor *bad = cn_zeros(CN_F64, CN_SHAPE(4, 3));
    CHECK_STATUS_ERROR(cn_onnx_run(m, &bad, &y), "fed f64[4, 3]");
    cn_tensor *none = NULL;
    CHECK_STATUS_ERROR(cn_onnx_run(m, &none, &y), "input 0 ('x') is NULL");
    cn_onnx_free(m);
    /* By position, and the errors. */
    s.name = NULL;
    m = cn_onnx_load(model("dyn"), &(cn_onnx_load_opts){.shapes = &s, .nshapes = 1});
    CHECK(m != NULL);
    cn_onnx_free(m);
    cn_onnx_input_shape r3 = {.name = "x", .ndim = 3, .shape = {4, 3, 1}};
    CHECK_ERROR(cn_onnx_load(model("dyn"), &(cn_onnx_load_opts){.shapes = &r3, .nshapes = 1}),
                "input 'x' has rank 2, the shape given has 3");
    cn_onnx_input_shape w3 = {.name = "x", .ndim = 2, .shape = {4, 5}};
    CHECK_ERROR(cn_onnx_load(model("dyn"), &(cn_onnx_load_opts){.shapes = &w3, .nshapes = 1}),
                "input 'x' is [-1, 3], the shape given is [4, 5]");
    cn_onnx_input_shape nm = {.name = "z", .ndim = 2, .shape = {4, 3}};
    CHECK_ERROR(cn_onnx_load(model("dyn"), &(cn_onnx_load_opts){.shapes = &nm, .nshapes = 1}),
                "a shape is given for 'z', which is not an input of the model");
}

static void test_bound_inputs(void) {
    CHECK_ERROR(cn_onnx_load(model("shape_input"), NULL),
                "unsupported: Reshape (opset 13): input 'shape' is computed at run time");
    cn_onnx_input_value v = {"shape", cn_from_data(CN_I64, 1, (int64_t[]){2}, (int64_t[]){3, 2})};
    cn_onnx_model *m = cn_onnx_load(model("shape_input"), &(cn_onnx_load_opts){.values = &v, .nvalues = 1});
    CHECK(m != NULL);
    if (!m) return;
    CHECK_EQ_INT(cn_onnx_num_inputs(m), 1);
    cn_tensor *x = cn_ones(CN_F32, CN_SHAPE(2, 3)), *y;
    CHECK_EQ_INT(cn_onnx_run(m, &x, &y), 0);
    CHECK_SHAPE(y, 3, 2);
    cn_onnx_free(m);
    cn_onnx_input_value f = {"shape", cn_zeros(CN_F32, CN_SHAPE(2))};
    CHECK_ERROR(cn_onnx_load(model("shape_input"), &(cn_onnx_load_opts){.values = &f, .nvalues = 1}),
                "input 'shape' is i64 [2], the value given is f32[2]");
}

/* Every truncation and many corruptions of a model: an error or a model,
 * never a crash (ASan checks the reads). */
static void test_corrupt_files(void) {
    FILE *f = fopen(model("dyn"), "rb");
    CHECK(f != NULL);
    if (!f) return;
    unsigned char buf[8192], mut[8192];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cn_onnx_input_shape s = {.name = NULL, .ndim = 2, .shape = {4, 3}};
    cn_onnx_load_opts o = {.shapes = &s, .nshapes = 1};
    int refused = 0;
    for (size_t len = 0; len < n; len++) {
        cn_clear_error();
        cn_onnx_model *m = cn_onnx_load_buffer(buf, len, NULL, &o);
        if (!m) {
            refused++;
            CHECK(cn_last_error()[0] != '\0');
        }
        cn_onnx_free(m);
    }
    CHECK(refused > (int)n / 2);
    th_seed(5);
    for (int k = 0; k < 400; k++) {
        memcpy(mut, buf, n);
        for (int j = 0; j < 3; j++) mut[th_next() % n] = (unsigned char)th_next();
        cn_scope_begin();
        cn_onnx_model *m = cn_onnx_load_buffer(mut, n, NULL, &o);
        if (m && cn_onnx_num_inputs(m) == 1) {
            cn_tensor *in = cn_onnx_input(m, 0), *outs[4];
            int64_t shp[CN_MAX_DIMS];
            bool ok = cn_ndim(in) <= 4;
            for (int d = 0; ok && d < cn_ndim(in); d++) ok = (shp[d] = cn_dim(in, d)) >= 0 && shp[d] < 64;
            if (ok && cn_onnx_num_outputs(m) <= 4)
                cn_onnx_run(m, (cn_tensor *[]){cn_zeros(cn_tensor_dtype(in), cn_ndim(in), shp)}, outs);
        }
        cn_onnx_free(m);
        cn_scope_end();
    }
    CHECK_ERROR(cn_onnx_load_tensor("/nonexistent/x.pb"), "cannot open");
    CHECK_ERROR(cn_onnx_load(model("missing"), NULL), "cannot open");
}

/* Test data stores sequence, map and optional values in .pb files like
 * tensors; read as TensorProtos an optional sequence would be int8 (its
 * elem_type 3 is int8's data_type). They are refused as unsupported, and
 * a real int8 tensor still reads. */
static const char *write_pb(const char *name, const unsigned char *b, size_t n) {
    static char p[1200];
    snprintf(p, sizeof p, "%s/%s.pb", dir, name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL && fwrite(b, 1, n, f) == n);
    if (f) fclose(f);
    return p;
}

static void test_value_files(void) {
    /* OptionalProto "o", elem_type 3, holding a sequence of one f32 [2] */
    static const unsigned char opt[] = {0x0a, 0x01, 'o',  0x10, 0x03, 0x2a, 0x12, 0x10, 0x01, 0x1a,
                                        0x0e, 0x08, 0x02, 0x10, 0x01, 0x4a, 0x08, 0,    0,    0x80,
                                        0x3f, 0,    0,    0,    0x40};
    CHECK_ERROR(cn_onnx_load_tensor(write_pb("opt_seq", opt, sizeof opt)),
                "unsupported: value type: ");
    /* TensorProto "t": int8 [3] = -1, 0, 127 */
    static const unsigned char i8[] = {0x08, 0x03, 0x10, 0x03, 0x42, 0x01, 't',
                                       0x4a, 0x03, 0xff, 0x00, 0x7f};
    cn_tensor *t = cn_onnx_load_tensor(write_pb("int8", i8, sizeof i8));
    CHECK_SHAPE(t, 3);
    if (!t) return;
    CHECK(cn_tensor_dtype(t) == CN_I8);
    static const int want[] = {-1, 0, 127};
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(th_at(t, i), want[i]);
}

int main(void) {
    cn_clear_error();
    if (!cn_onnx_load("/nonexistent.onnx", NULL) && strstr(cn_last_error(), "built without ONNX")) {
        /* The bare build: every entry point refuses clearly. */
        CHECK_ERROR(cn_onnx_load_buffer("", 0, NULL, NULL), "built without ONNX support (install");
        CHECK_ERROR(cn_onnx_load_tensor("x.pb"), "built without ONNX support");
        CHECK_STATUS_ERROR(cn_onnx_run(NULL, NULL, NULL), "built without ONNX support");
        fprintf(stderr, "built without ONNX: the stubs checked\n");
        return th_summary();
    }
    const char *d = getenv("CN_ONNX_MODELS");
    snprintf(dir, sizeof dir, "%s", d ? d : "");
    char skip[1100];
    snprintf(skip, sizeof skip, "%s/SKIP", dir);
    FILE *f = d ? fopen(skip, "r") : NULL;
    if (!d || f) {
        if (f) fclose(f);
        printf("SKIP: no ONNX test models (CN_ONNX_MODELS unset, or python3-onnx missing)\n");
        return 77;
    }
    RUN(test_external_data);
    RUN(test_unsupported);
    RUN(test_dynamic_shapes);
    RUN(test_dynamic_quantize);
    RUN(test_gelu_node);
    RUN(test_opset21);
    RUN(test_group_norm);
    RUN(test_attention23);
    RUN(test_data_dependent);
    RUN(test_affine_grid);
    RUN(test_scan);
    RUN(test_scatter_const);
    RUN(test_ms_quant);
    RUN(test_half_static);
    RUN(test_bound_inputs);
    RUN(test_corrupt_files);
    RUN(test_value_files);
    return th_summary();
}
