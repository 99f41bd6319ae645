/* libFuzzer target for one file reader, chosen at build time: fuzz/CMakeLists.txt
 * builds this file once per reader as fuzz_<reader> with CN_FUZZ_READER set
 * to its name (fuzz/reader_fuzz_one.h; docs/architecture.md, "Fuzzing"). */
#define _GNU_SOURCE /* memfd_create */
#include "reader_fuzz_one.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    /* Bounds low enough that what a file may legitimately make a reader
     * allocate stays far below the fuzzer's memory limit: a report is then
     * a bound missing, not a big valid file. */
    setenv("CN_MAX_IMAGE_PIXELS", "4194304", 0);
    setenv("CN_MAX_AUDIO_SAMPLES", "4194304", 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)cn_fuzz_reader_one(CN_FUZZ_READER, data, size);
    return 0;
}
