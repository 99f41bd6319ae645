/* The inputs the file readers' fuzzers (fuzz/fuzz_reader.c) once crashed
 * on, and the seed files, replayed in the normal suite (and so under ASan +
 * UBSan in `make check`): each must load or fail with a message, never
 * crash. fuzz/regressions/<reader>/ and fuzz/seeds/<reader>/ (the folder
 * CN_FUZZ_DIR names) hold them, one folder per reader. */
#define _GNU_SOURCE /* memfd_create */
#include "harness.h"

#include "../fuzz/reader_fuzz_one.h"

#include <dirent.h>
#include <stdlib.h>

static uint8_t buf[1 << 22];

/* Replays every file of dir through reader; returns how many there were. */
static int replay_dir(const char *reader, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        CHECK_MSG(f != NULL, "cannot open %s", path);
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        cn_clear_error();
        int r = cn_fuzz_reader_one(reader, buf, n);
        CHECK_MSG(r >= 0, "%s: no memfd, or unknown reader %s", path, reader);
        /* A file that loads is fine; one that does not must say why. */
        if (r == 0) CHECK_MSG(cn_last_error()[0] != '\0', "%s: refused without a message", path);
        files++;
    }
    closedir(d);
    return files;
}

static void test_replay(void) {
    const char *dir = getenv("CN_FUZZ_DIR");
    CHECK_MSG(dir != NULL, "CN_FUZZ_DIR is not set");
    if (!dir) return;
    setenv("CN_MAX_IMAGE_PIXELS", "4194304", 0);
    setenv("CN_MAX_AUDIO_SAMPLES", "4194304", 0);
    for (int i = 0; i < CN_FUZZ_NREADERS; i++) {
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/seeds/%s", dir, cn_fuzz_readers[i]);
        int seeds = replay_dir(cn_fuzz_readers[i], sub);
        CHECK_MSG(seeds > 0, "no seeds in %s", sub);
        snprintf(sub, sizeof sub, "%s/regressions/%s", dir, cn_fuzz_readers[i]);
        replay_dir(cn_fuzz_readers[i], sub);
    }
}

/* The seeds are valid files: each loads (where the build has the reader). */
static void test_seeds_load(void) {
    const char *dir = getenv("CN_FUZZ_DIR");
    if (!dir) return;
    static const char *const ok[][2] = {{"npy", "f32_2x3.npy"},       {"safetensors", "two.safetensors"},
                                        {"json", "header.json"},      {"csv", "header.csv"},
                                        {"bpe", "tiny.bpe"},          {"idx", "labels.idx"}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/seeds/%s/%s", dir, ok[i][0], ok[i][1]);
        FILE *f = fopen(path, "rb");
        CHECK_MSG(f != NULL, "cannot open %s", path);
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        cn_clear_error();
        CHECK_MSG(cn_fuzz_reader_one(ok[i][0], buf, n) == 1, "%s: %s", path, cn_last_error());
    }
}

/* pnm16_channels_overflow.ppm: stb_image 2.27 converted a 16-bit PNM's
 * channels as bytes, then read the result as 16-bit, past its buffer. The
 * file is now decoded with its own channels and converted by image.c, as
 * stb converts 8-bit files (grey (77 r + 150 g + 29 b) >> 8, alpha 255). */
static void test_pnm16_channels(void) {
    static const uint8_t ppm[] = "P6 1 1 65535\n\x12\x34\x56\x78\x9a\xbc";
    const char *path = cn_fuzz_file(ppm, sizeof ppm - 1);
    CHECK(path != NULL);
    if (!path) return;
    cn_clear_error();
    cn_tensor *rgb = cn_load_image(path, 0, CN_IMAGE_CHW, CN_U8);
    if (!rgb && strstr(cn_last_error(), "without stb")) return;
    CHECK_MSG(rgb != NULL, "%s", cn_last_error());
    cn_tensor *grey = cn_load_image(path, 1, CN_IMAGE_HWC, CN_U8);
    cn_tensor *rgba = cn_load_image(path, 4, CN_IMAGE_CHW, CN_U8);
    CHECK_MSG(grey && rgba, "%s", cn_last_error());
    if (!rgb || !grey || !rgba) return;
    CHECK_SHAPE(rgb, 3, 1, 1);
    CHECK_SHAPE(rgba, 4, 1, 1);
    int64_t c[4];
    for (int64_t k = 0; k < 3; k++) c[k] = cn_get_int(rgb, (int64_t[]){k, 0, 0});
    c[3] = 255;
    CHECK(cn_get_int(grey, (int64_t[]){0, 0, 0}) == (c[0] * 77 + c[1] * 150 + c[2] * 29) >> 8);
    for (int64_t k = 0; k < 4; k++) CHECK(cn_get_int(rgba, (int64_t[]){k, 0, 0}) == c[k]);
}

/* jpeg_undefined_huffman_table.jpg: a scan naming an AC table no DHT
 * segment defined; stb_image 2.27 decoded it with uninitialised tables
 * (an assertion in debug builds, reads past its arrays otherwise). */
static void test_jpeg_undefined_table(void) {
    const char *dir = getenv("CN_FUZZ_DIR");
    if (!dir) return;
    char path[1024];
    snprintf(path, sizeof path, "%s/regressions/image/jpeg_undefined_huffman_table.jpg", dir);
    cn_clear_error();
    cn_tensor *t = cn_load_image(path, 0, CN_IMAGE_HWC, CN_U8);
    CHECK(t == NULL);
    CHECK_MSG(strstr(cn_last_error(), "without stb") ||
                  strstr(cn_last_error(), "a scan uses a Huffman table that no DHT segment defined"),
              "%s", cn_last_error());
}

int main(void) {
    RUN(test_replay);
    RUN(test_seeds_load);
    RUN(test_pnm16_channels);
    RUN(test_jpeg_undefined_table);
    return th_summary();
}
