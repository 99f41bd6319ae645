/* One fuzz input for a file reader: arbitrary bytes as a .npy file, a
 * safetensors checkpoint, a safetensors JSON header, an IDX file (plain or
 * gzip), a CSV file, an image, a BPE tokenizer file or a WAV file. The reader must give
 * a value or an error message, never crash, read out of bounds, overflow,
 * leak or hang. Shared by the libFuzzer targets (fuzz_reader.c, one
 * executable per reader) and the test that replays what they found
 * (tests/test_reader_fuzz_regress.c). Tensors are the open scope's: the
 * caller's cn_fuzz_reader_one releases them.
 *
 * The readers take a path, so the bytes go to a memfd and the reader opens
 * /proc/self/fd/N: a regular file (cn_fopen_regular accepts it) that never
 * touches the disk. Options a reader takes (CSV delimiter, image channels,
 * gzip or not) are picked from the input's length, so every input replays
 * the same way and seed files stay plain files of their format.
 *
 * The including file must define _GNU_SOURCE before any include (memfd). */
#ifndef CN_READER_FUZZ_ONE_H
#define CN_READER_FUZZ_ONE_H

#include <chutney.h>

#include "../src/io/json.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef CN_HAVE_ZLIB
#include <zlib.h>
#endif

/* The readers' names, as the fuzz targets (fuzz_<name>) and the folders of
 * fuzz/seeds/ and fuzz/regressions/ spell them. */
static const char *const cn_fuzz_readers[] = {"npy", "safetensors", "json", "idx", "csv", "image", "bpe", "wav"};
#define CN_FUZZ_NREADERS ((int)(sizeof cn_fuzz_readers / sizeof *cn_fuzz_readers))

/* Writes data to the process's memfd (made once) and gives its path, or NULL. */
static const char *cn_fuzz_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("cn_fuzz", MFD_CLOEXEC);
        if (fd < 0) return NULL;
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) return NULL;
    size_t done = 0;
    while (done < size) {
        ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
        if (w <= 0) return NULL;
        done += (size_t)w;
    }
    return path;
}

/* Walks a parsed JSON value as a reader would (keys, lookups). */
static size_t cn_fuzz_json_walk(const cn_json *v, int depth) {
    size_t n = 1;
    if (v->kind == CN_JSON_ARRAY || v->kind == CN_JSON_OBJECT)
        for (size_t i = 0; i < v->n; i++) n += cn_fuzz_json_walk(&v->items[i], depth + 1);
    if (v->kind == CN_JSON_OBJECT && v->n > 0) (void)cn_json_get(v, v->keys[0]);
    return n;
}

static int cn_fuzz_npy(const char *path, size_t size) {
    (void)size;
    cn_tensor *t = cn_load_npy(path);
    return t != NULL;
}

static int cn_fuzz_safetensors(const char *path, size_t size) {
    if (size % 2) {
        /* Into existing tensors: the checks before anything is written. */
        cn_tensor *w = cn_zeros(CN_F32, CN_SHAPE(2, 3)), *b = cn_zeros(CN_I64, CN_SHAPE(3));
        const char *names[] = {"w", "b"};
        cn_tensor *ts[] = {w, b};
        return w && b && cn_load_safetensors_into(path, names, ts, 2, CN_CKPT_ALLOW_MISSING) == CN_OK;
    }
    cn_checkpoint *c = cn_load_safetensors(path);
    if (!c) return 0;
    for (int i = 0; i < cn_checkpoint_count(c); i++) {
        cn_tensor *t = cn_checkpoint_tensor(c, i);
        (void)cn_checkpoint_name(c, i);
        if (t && cn_numel(t) > 0) (void)cn_get(t, (int64_t[CN_MAX_DIMS]){0});
    }
    for (int i = 0; i < cn_checkpoint_metadata_count(c); i++) {
        (void)cn_checkpoint_metadata_key(c, i);
        (void)cn_checkpoint_metadata_value(c, i);
    }
    (void)cn_checkpoint_metadata(c, "format");
    cn_checkpoint_free(c);
    return 1;
}

static int cn_fuzz_json(const uint8_t *data, size_t size) {
    char err[256];
    cn_json *v = cn_json_parse((const char *)data, size, err, sizeof err);
    if (!v) return 0;
    (void)cn_fuzz_json_walk(v, 0);
    cn_json_free(v);
    return 1;
}

static int cn_fuzz_idx(const uint8_t *data, size_t size) {
    const char *path = NULL;
#ifdef CN_HAVE_ZLIB
    /* Odd lengths: the bytes are the decompressed content of a gzip file,
     * so mutations reach the gzip path's header and size checks (mutating
     * a .gz itself mostly breaks its CRC). Even: the bytes as they are. */
    if (size % 2) {
        uLongf cap = compressBound((uLong)size) + 32;
        uint8_t *gz = malloc(cap);
        if (!gz) return 0;
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            free(gz);
            return 0;
        }
        zs.next_in = (Bytef *)data;
        zs.avail_in = (uInt)size;
        zs.next_out = gz;
        zs.avail_out = (uInt)cap;
        int st = deflate(&zs, Z_FINISH);
        size_t n = cap - zs.avail_out;
        deflateEnd(&zs);
        if (st == Z_STREAM_END) path = cn_fuzz_file(gz, n);
        free(gz);
        if (!path) return 0;
    }
#endif
    if (!path) path = cn_fuzz_file(data, size);
    if (!path) return 0;
    cn_tensor *t = cn_load_idx(path);
    return t != NULL;
}

static int cn_fuzz_csv(const char *path, size_t size) {
    static const char delims[] = {0, ';', '\t'};
    static const cn_dtype dts[] = {CN_F32, CN_F64, CN_I32, CN_I64};
    cn_csv_opts o = {.delimiter = delims[size % 3],
                     .header = (int)(size / 3 % 3),
                     .dtype = dts[size / 9 % 4]};
    cn_tensor *t = cn_load_csv(path, &o);
    return t != NULL;
}

static int cn_fuzz_image(const char *path, size_t size) {
    cn_tensor *t = cn_load_image(path, (int)(size % 5), size / 5 % 2 ? CN_IMAGE_CHW : CN_IMAGE_HWC,
                                 size / 10 % 2 ? CN_F32 : CN_U8);
    return t != NULL;
}

static int cn_fuzz_bpe(const char *path, size_t size) {
    (void)size;
    cn_tokenizer *tok = cn_tokenizer_load(path);
    if (!tok) return 0;
    /* A file that loads must give a tokenizer that works. */
    static const char text[] = "Hello, world! 12 345 \xc3\xa9t\xc3\xa9  <|endoftext|>\n";
    int32_t *ids = NULL;
    size_t n = 0;
    if (cn_tokenizer_encode(tok, text, sizeof text - 1, CN_TOKENIZE_SPECIAL, &ids, &n) == CN_OK) {
        char *back = NULL;
        size_t len = 0;
        if (cn_tokenizer_decode(tok, ids, n, &back, &len) == CN_OK) free(back);
        free(ids);
    }
    for (int i = 0; i < cn_tokenizer_num_merges(tok); i++) (void)cn_tokenizer_merge(tok, i, NULL, NULL);
    cn_tokenizer_free(tok);
    return 1;
}

/* A clip that loads is made a spectrogram too, with a window picked from
 * the length (the reflection padding needs more samples than half of it). */
static int cn_fuzz_wav(const char *path, size_t size) {
    int rate = 0;
    cn_tensor *w = cn_load_wav(path, &rate);
    if (!w) return 0;
    static const int nfft[] = {2, 16, 64, 400};
    cn_mel_opts o = {.sample_rate = rate, .n_fft = nfft[size % 4], .n_mels = (int)(size / 4 % 8) + 1};
    if (cn_numel(w) > o.n_fft / 2 && cn_numel(w) <= 1 << 16) (void)cn_log_mel_spectrogram(w, &o);
    return 1;
}

/* Returns 1 if the reader accepted the input, 0 if it refused it (an error
 * message is set), -1 for an unknown reader or no memfd. Inline: a file that
 * includes this header only for cn_fuzz_file leaves it unused. */
static inline int cn_fuzz_reader_one(const char *reader, const uint8_t *data, size_t size) {
    if (!strcmp(reader, "json")) return cn_fuzz_json(data, size);
    cn_scope_begin();
    int r = -1;
    if (!strcmp(reader, "idx")) {
        r = cn_fuzz_idx(data, size);
    } else {
        const char *path = cn_fuzz_file(data, size);
        if (!path)
            r = -1;
        else if (!strcmp(reader, "npy"))
            r = cn_fuzz_npy(path, size);
        else if (!strcmp(reader, "safetensors"))
            r = cn_fuzz_safetensors(path, size);
        else if (!strcmp(reader, "csv"))
            r = cn_fuzz_csv(path, size);
        else if (!strcmp(reader, "image"))
            r = cn_fuzz_image(path, size);
        else if (!strcmp(reader, "bpe"))
            r = cn_fuzz_bpe(path, size);
        else if (!strcmp(reader, "wav"))
            r = cn_fuzz_wav(path, size);
    }
    cn_scope_end();
    return r;
}

#endif
