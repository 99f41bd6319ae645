/* The inputs the ONNX loader's fuzzer (fuzz/) once crashed on, replayed in
 * the normal suite (and so under ASan + UBSan in `make check`): each must
 * load or fail with a message, never crash. The files live in
 * fuzz/regressions/ (CN_FUZZ_REGRESSIONS); each fix also gets a direct
 * check here. */
#include "harness.h"

#include "../fuzz/onnx_fuzz_one.h"

#include <dirent.h>
#include <stdlib.h>

static void test_replay(void) {
    const char *dir = getenv("CN_FUZZ_REGRESSIONS");
    CHECK_MSG(dir != NULL, "CN_FUZZ_REGRESSIONS is not set");
    if (!dir) return;
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot open %s", dir);
    if (!d) return;
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        CHECK_MSG(f != NULL, "cannot open %s", path);
        if (!f) continue;
        static uint8_t buf[1 << 20];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        cn_clear_error();
        /* A model that loads is fine; one that does not must say why. */
        if (!cn_fuzz_onnx_one(buf, n))
            CHECK_MSG(cn_last_error()[0] != '\0', "%s: no error message", e->d_name);
        files++;
    }
    closedir(d);
    CHECK_MSG(files > 0, "no files in %s", dir);
}

/* lrn_size_1e9.onnx: an LRN of size 0x3bffffff padded its input by half a
 * billion channels on each side and summed that many slices (3 GB and
 * minutes); the window now stops one channel past either end, where the
 * padding is all zeros (the replay above loads and runs it). */

/* reshape_size_overflow.onnx: a Reshape whose shape's product overflowed
 * int64 while it was checked. */
static void test_reshape_overflow(void) {
    cn_tensor *x = cn_zeros(CN_F32, CN_SHAPE(9));
    CHECK_ERROR(cn_reshape(x, 2, (int64_t[]){9, INT64_C(7958535001752993796)}), "is too large");
    CHECK_ERROR(cn_reshape(x, 3, (int64_t[]){-1, INT64_C(1) << 40, INT64_C(1) << 40}), "is too large");
}

int main(void) {
    cn_clear_error();
    if (!cn_onnx_load_buffer("", 0, NULL, NULL) && strstr(cn_last_error(), "built without ONNX")) {
        RUN(test_reshape_overflow);
        return th_summary();
    }
    RUN(test_replay);
    RUN(test_reshape_overflow);
    return th_summary();
}
