/* One fuzz input: arbitrary bytes as an ONNX model, loaded from memory and,
 * when its inputs have known, small sizes, run once on zeros, so the
 * compiled program is exercised too. Shared by the libFuzzer target
 * (fuzz_onnx_load.c) and the regression test that replays what it found
 * (tests/test_onnx_fuzz_regress.c). Returns 1 if the model loaded. */
#ifndef CN_ONNX_FUZZ_ONE_H
#define CN_ONNX_FUZZ_ONE_H

#include <chutney.h>

#include <stddef.h>
#include <stdint.h>

/* Small enough that a fuzzed model cannot make one run slow. */
#define CN_FUZZ_RUN_MAX_ELEMS 4096

static int64_t cn_fuzz_numel(const cn_tensor *t) {
    const int64_t *shape = cn_shape(t);
    int64_t n = 1;
    for (int d = 0; d < cn_ndim(t); d++) {
        if (shape[d] < 0 || shape[d] > CN_FUZZ_RUN_MAX_ELEMS) return -1;
        n *= shape[d];
        if (n > CN_FUZZ_RUN_MAX_ELEMS) return -1;
    }
    return n;
}

static void cn_fuzz_try_run(cn_onnx_model *m) {
    int nin = cn_onnx_num_inputs(m), nout = cn_onnx_num_outputs(m);
    if (nin > 8 || nout > 8) return;
    cn_tensor *in[8], *out[8];
    for (int i = 0; i < nin; i++) {
        cn_tensor *p = cn_onnx_input(m, i);
        if (cn_fuzz_numel(p) < 0) return;
        in[i] = cn_zeros(cn_tensor_dtype(p), cn_ndim(p), cn_shape(p));
        if (!in[i]) return;
    }
    (void)cn_onnx_run(m, in, out);
}

static int cn_fuzz_onnx_one(const uint8_t *data, size_t size) {
    /* Both ways of loading a symbolic size: kept unknown (-1), or fixed (as
     * `chutney info` does), which lets shape computations fold. The length
     * picks, so every input is replayed the same way. */
    cn_onnx_load_opts opts = {.unknown_size = size % 2 ? 2 : 0};
    cn_scope_begin();
    cn_onnx_model *m = cn_onnx_load_buffer(data, size, NULL, &opts);
    if (m) {
        cn_fuzz_try_run(m);
        cn_onnx_free(m);
    }
    cn_scope_end();
    return m != NULL;
}

#endif
