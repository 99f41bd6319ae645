/* libFuzzer targets for the command line's own text formats, chosen at
 * build time (CN_FUZZ_TOOL): "model_text", a model file of layers
 * (tools/model_text.c: read as `chutney train --model-file` reads it, then
 * fitted to Fashion-MNIST's shape), and "config", a --config file of
 * `key = value` lines (tools/config_file.c). Each input must give a model
 * or an error naming the line, never crash, leak or hang. Built with every
 * tools/ source but the command table (fuzz/CMakeLists.txt). */
#define _GNU_SOURCE /* memfd_create */
#include "../tools/model_text.h"
#include "../tools/tools.h"
#include "reader_fuzz_one.h" /* cn_fuzz_file */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    /* A legitimate model may be large; a fuzzer's is bounded far below its
     * memory limit, so an out-of-memory report is a missing bound. */
    setenv("CN_MAX_MODEL_PARAMS", "4194304", 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = cn_fuzz_file(data, size);
    if (!path) return 0;
    cn_scope_begin();
    if (!strcmp(CN_FUZZ_TOOL, "model_text")) {
        char *text = cn_tool_read_text(path, 1 << 20, "a model file (a text of layers)");
        cn_tool_text_shape s;
        cn_module *m = text ? cn_tool_model_text_parse(text, "fuzz.txt", 0.5, &s) : NULL;
        if (m) (void)cn_tool_model_text_fits(&s, "fuzz.txt", 3, (const int64_t[]){1, 28, 28}, 10);
        cn_module_free(m);
        free(text);
    } else {
        cn_tool_config_entry *e = NULL;
        int n = 0;
        if (cn_tool_config_read("train", path, &e, &n) == 0)
            for (int i = 0; i < n; i++) (void)strlen(e[i].key), (void)strlen(e[i].value);
        free(e);
    }
    cn_scope_end();
    return 0;
}
