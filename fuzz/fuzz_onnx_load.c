/* libFuzzer target: arbitrary bytes as an ONNX model. Loading (and running
 * what loads) must give a model or an error, never crash, read out of
 * bounds, overflow, leak or hang. `make fuzz` builds it with clang, ASan
 * and UBSan and runs it (fuzz/run.sh; docs/onnx.md, "Fuzzing"). */
#include "onnx_fuzz_one.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)cn_fuzz_onnx_one(data, size);
    return 0;
}
