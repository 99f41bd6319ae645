/* What the file readers refuse, and the bounds they keep (docs/training.md,
 * "Limits"): anything but a regular file (a FIFO would block forever), a
 * gzip IDX whose header claims more than the decompressed-size budget, an
 * image with more pixels than the pixel limit, safetensors data that
 * overlaps, leaves gaps or has trailing bytes; and the temporaries of atomic
 * writes: listed for a signal handler to remove, and swept when their
 * writer is gone. Every malformed file is made here. */
#include "io_util.h"
#include "io/fileio.h"

#include <errno.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#ifdef CN_HAVE_ZLIB
#include <zlib.h>
#endif

/* A reader that opens a FIFO with a plain fopen blocks until a writer
 * comes, i.e. forever: the alarm turns that hang into a failure. */
static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_file_limits: a reader blocked on a FIFO (timeout)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

static void check_fifo_refused(const char *what, bool failed, const char *path) {
    th_checks++;
    if (!failed)
        th_fail(__FILE__, __LINE__, "%s accepted the FIFO %s", what, path);
    else if (!strstr(cn_last_error(), path) || !strstr(cn_last_error(), "FIFO"))
        th_fail(__FILE__, __LINE__, "%s: error \"%s\" does not name the FIFO %s", what,
                cn_last_error(), path);
}

static void test_fifo(void) {
    const char *p = io_path("fifo");
    CHECK(mkfifo(p, 0600) == 0);
    signal(SIGALRM, on_alarm);
    alarm(20);
    cn_clear_error();
    check_fifo_refused("load_idx", cn_load_idx(p) == NULL, p);
    check_fifo_refused("load_npy", cn_load_npy(p) == NULL, p);
    check_fifo_refused("load_csv", cn_load_csv(p, NULL) == NULL, p);
    check_fifo_refused("load_safetensors", cn_load_safetensors(p) == NULL, p);
    check_fifo_refused("load_safetensors_into", cn_load_safetensors_into(p, NULL, NULL, 0, 0) < 0,
                       p);
    check_fifo_refused("tokenizer_load", cn_tokenizer_load(p) == NULL, p);
    check_fifo_refused("bpe_train_file", cn_bpe_train_file(p, 300, NULL) == NULL, p);
#ifdef CN_HAVE_STB
    check_fifo_refused("load_image", cn_load_image(p, 0, CN_IMAGE_HWC, CN_U8) == NULL, p);
#endif
#ifdef CN_HAVE_SNDFILE
    check_fifo_refused("load_wav", cn_load_wav(p, NULL) == NULL, p);
#endif
    /* Fashion-MNIST's reader looks for name, then name.gz: a FIFO there is
     * found, then refused, not opened. */
    const char *dir = io_path("fifo_data");
    CHECK(mkdir(dir, 0700) == 0);
    char fp[600];
    snprintf(fp, sizeof fp, "%s/train-images-idx3-ubyte", dir);
    CHECK(mkfifo(fp, 0600) == 0);
    cn_tensor *im, *lb;
    check_fifo_refused("load_fashion_mnist_u8", cn_load_fashion_mnist_u8(dir, true, &im, &lb) < 0,
                       fp);
    /* A directory is refused the same way, naming it. */
    cn_clear_error();
    CHECK_ERROR(cn_load_npy(io_dir), "a directory");
    alarm(0);
    signal(SIGALRM, SIG_DFL);
}

#ifdef CN_HAVE_ZLIB /* the IDX cases need gzip files */
/* An IDX header for u8 data of shape dims (big-endian sizes). */
static size_t idx_header(unsigned char *h, int ndim, const uint32_t *dims) {
    h[0] = h[1] = 0;
    h[2] = 0x08;
    h[3] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++) {
        h[4 + 4 * i] = (unsigned char)(dims[i] >> 24);
        h[5 + 4 * i] = (unsigned char)(dims[i] >> 16);
        h[6 + 4 * i] = (unsigned char)(dims[i] >> 8);
        h[7 + 4 * i] = (unsigned char)dims[i];
    }
    return 4 + 4 * (size_t)ndim;
}

/* A gzip IDX file: the header, then data_len bytes (zeros: they compress
 * about 1000:1, as a bomb's do). */
static void write_gz_idx(const char *path, int ndim, const uint32_t *dims, size_t data_len) {
    unsigned char h[40];
    size_t hl = idx_header(h, ndim, dims);
    gzFile g = gzopen(path, "wb9");
    CHECK(g != NULL);
    if (!g) return;
    gzwrite(g, h, (unsigned)hl);
    static unsigned char zeros[1 << 16];
    while (data_len) {
        unsigned k = data_len < sizeof zeros ? (unsigned)data_len : (unsigned)sizeof zeros;
        gzwrite(g, zeros, k);
        data_len -= k;
    }
    gzclose(g);
}
#endif

static void test_idx_budget(void) {
#ifndef CN_HAVE_ZLIB
    fprintf(stderr, "  (no zlib in this build: the budget of gzip files is not tested)\n");
#else
    const char *p = io_path("bomb.idx.gz");
    /* A header claiming 4 GiB over a file of a few KB: refused from the
     * header, before anything is inflated (a read would say "truncated"). */
    uint32_t big[2] = {4096, 1u << 20};
    write_gz_idx(p, 2, big, 1000);
    unsetenv("CN_MAX_DECOMPRESSED_MB");
    CHECK_ERROR(cn_load_idx(p), "more than the limit of 1024 MB");
    CHECK(strstr(cn_last_error(), "bomb.idx.gz") && strstr(cn_last_error(), "[4096, 1048576]") &&
          strstr(cn_last_error(), "CN_MAX_DECOMPRESSED_MB"));
    /* 3 MB that really are there: within the default, over a 2 MB budget,
     * fine again once raised, and 0 lifts the limit. */
    uint32_t mid[2] = {3, 1u << 20};
    write_gz_idx(p, 2, mid, 3u << 20);
    cn_tensor *t = cn_load_idx(p);
    CHECK(t && cn_numel(t) == 3 << 20);
    setenv("CN_MAX_DECOMPRESSED_MB", "2", 1);
    CHECK_ERROR(cn_load_idx(p), "more than the limit of 2 MB");
    setenv("CN_MAX_DECOMPRESSED_MB", "3", 1);
    CHECK(cn_load_idx(p) != NULL);
    setenv("CN_MAX_DECOMPRESSED_MB", "0", 1);
    CHECK(cn_load_idx(p) != NULL);
    setenv("CN_MAX_DECOMPRESSED_MB", "lots", 1);
    CHECK_ERROR(cn_load_idx(p), "CN_MAX_DECOMPRESSED_MB is 'lots'");
    unsetenv("CN_MAX_DECOMPRESSED_MB");
    /* An uncompressed file is held to its own size, not the budget. */
    const char *q = io_path("plain.idx");
    unsigned char h[40];
    size_t hl = idx_header(h, 2, mid);
    FILE *f = fopen(q, "wb");
    fwrite(h, 1, hl, f);
    fseek(f, (long)(3u << 20) - 1, SEEK_CUR);
    fputc(0, f);
    fclose(f);
    setenv("CN_MAX_DECOMPRESSED_MB", "1", 1);
    CHECK(cn_load_idx(q) != NULL);
    unsetenv("CN_MAX_DECOMPRESSED_MB");
#endif
}

/* ---- images ---- */

#ifdef CN_HAVE_STB
static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}
#endif

static void test_image_pixels(void) {
#ifndef CN_HAVE_STB
    fprintf(stderr, "  (no stb in this build: the pixel limit is not tested)\n");
#else
    /* A 33-byte PNG (signature, IHDR, no data) claiming 20000 x 10000
     * grey pixels: 200 MB as u8, 800 MB as f32 (and under stb's own cap
     * of 2^30 bytes). Refused from the header. */
    unsigned char png[8 + 25] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    put_be32(png + 8, 13);
    memcpy(png + 12, "IHDR", 4);
    put_be32(png + 16, 20000);
    put_be32(png + 20, 10000);
    png[24] = 8; /* bit depth */
    png[25] = 0; /* grey */
    const char *p = io_path("bomb.png");
    io_write(p, png, sizeof png);
    unsetenv("CN_MAX_IMAGE_PIXELS");
    CHECK_ERROR(cn_load_image(p, 0, CN_IMAGE_HWC, CN_U8), "20000 x 10000 = 200000000 pixels");
    CHECK(strstr(cn_last_error(), "bomb.png") && strstr(cn_last_error(), "89478485") &&
          strstr(cn_last_error(), "CN_MAX_IMAGE_PIXELS"));
    /* A real 40 x 30 image: under the default; over a limit of 1000, fine
     * at 1200 (the limit is inclusive) and with 0 (no limit). */
    cn_tensor *img = cn_zeros(CN_U8, CN_SHAPE(30, 40, 3));
    const char *q = io_path("small.png");
    CHECK(cn_save_image(q, img, CN_IMAGE_HWC, 0) == 0);
    CHECK(cn_load_image(q, 0, CN_IMAGE_HWC, CN_U8) != NULL);
    setenv("CN_MAX_IMAGE_PIXELS", "1000", 1);
    CHECK_ERROR(cn_load_image(q, 0, CN_IMAGE_HWC, CN_U8), "40 x 30 = 1200 pixels");
    setenv("CN_MAX_IMAGE_PIXELS", "1200", 1);
    CHECK(cn_load_image(q, 0, CN_IMAGE_HWC, CN_U8) != NULL);
    setenv("CN_MAX_IMAGE_PIXELS", "0", 1);
    CHECK(cn_load_image(q, 0, CN_IMAGE_HWC, CN_U8) != NULL);
    setenv("CN_MAX_IMAGE_PIXELS", "-5", 1);
    CHECK_ERROR(cn_load_image(q, 0, CN_IMAGE_HWC, CN_U8), "CN_MAX_IMAGE_PIXELS is '-5'");
    unsetenv("CN_MAX_IMAGE_PIXELS");
#endif
}

/* ---- safetensors layout ---- */

/* A safetensors file: header JSON (padded to 8 bytes), then data_len bytes. */
static void write_st(const char *path, const char *json, size_t data_len) {
    size_t jl = strlen(json), pad = (8 - jl % 8) % 8;
    size_t n = 8 + jl + pad + data_len;
    unsigned char *b = calloc(1, n);
    uint64_t hl = jl + pad;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(hl >> (8 * i));
    memcpy(b + 8, json, jl);
    memset(b + 8 + jl, ' ', pad);
    io_write(path, b, n);
    free(b);
}

static void test_safetensors_layout(void) {
    const char *p = io_path("layout.safetensors");
    /* Well formed: two tensors tiling the data, one empty tensor. */
    write_st(p,
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
             12);
    cn_checkpoint *c = cn_load_safetensors(p);
    CHECK(c && cn_checkpoint_count(c) == 3);
    cn_checkpoint_free(c);
    /* b reads a's last float too: the reference implementation refuses. */
    write_st(p,
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
             12);
    CHECK_ERROR(cn_load_safetensors(p), "tensor 'b' [4, 12) overlaps that of tensor 'a' [0, 8)");
    /* Two names over the same bytes. */
    write_st(p,
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"alias\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
             8);
    CHECK_ERROR(cn_load_safetensors(p), "overlaps");
    CHECK(strstr(cn_last_error(), "'a'") && strstr(cn_last_error(), "'alias'"));
    /* Bytes after the last tensor. */
    write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12);
    CHECK_ERROR(cn_load_safetensors(p), "4 trailing bytes after the data of tensor 'a'");
    CHECK_STATUS_ERROR(cn_load_safetensors_into(p, NULL, NULL, 0, 0), "trailing bytes");
    write_st(p, "{\"__metadata__\":{\"k\":\"v\"}}", 3);
    CHECK_ERROR(cn_load_safetensors(p), "3 trailing bytes after the data of no tensor");
    /* A gap between two tensors. */
    write_st(p,
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
             12);
    CHECK_ERROR(cn_load_safetensors(p), "bytes [4, 8) of the data, before tensor 'b', belong to "
                                        "no tensor");
    /* What the library writes passes its own check. */
    cn_tensor *ts[2] = {cn_ones(CN_F32, CN_SHAPE(3)), cn_ones(CN_BF16, CN_SHAPE(5))};
    const char *names[2] = {"x", "y"};
    CHECK(cn_save_safetensors(p, names, ts, 2, NULL, NULL, 0) == 0);
    c = cn_load_safetensors(p);
    CHECK(c && cn_checkpoint_count(c) == 2);
    cn_checkpoint_free(c);
}

/* ---- temporaries of atomic writes ---- */

static bool exists(const char *p) { return access(p, F_OK) == 0; }

static void test_temporaries(void) {
    const char *target = io_path("model.npy");
    /* A temporary in progress is removed by the signal handler's call. */
    cn_afile af;
    CHECK(cn_afile_open(&af, target, "test") == 0);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s", af.tmp ? af.tmp : "");
    CHECK(exists(tmp));
    cn_remove_temporary_files();
    CHECK(!exists(tmp));
    cn_afile_abort(&af);
    /* Committed or aborted, nothing is left listed: a later call touches
     * no file of that name (a file made there afterwards survives). */
    CHECK(cn_afile_open(&af, target, "test") == 0);
    snprintf(tmp, sizeof tmp, "%s", af.tmp);
    cn_afile_abort(&af);
    CHECK(!exists(tmp));
    io_write(tmp, "keep", 4);
    cn_remove_temporary_files();
    CHECK(exists(tmp));
    unlink(tmp);

    /* Stale temporaries of a writer that is gone (a child that exited, a
     * pid beyond any pid_max) go with the next save of the same file;
     * those of a live process, of another file, and names that only look
     * alike stay. */
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    char dead1[600], dead2[600], live[600], other[600], alike[600];
    snprintf(dead1, sizeof dead1, "%s.tmp.%ld.3.5f2a", target, (long)child);
    snprintf(dead2, sizeof dead2, "%s.tmp.999999999.0.1", target);
    snprintf(live, sizeof live, "%s.tmp.%ld.7.abc", target, (long)getppid());
    snprintf(other, sizeof other, "%s.tmp.999999999.0.1", io_path("other.npy"));
    snprintf(alike, sizeof alike, "%s.tmp.999999999.notes", target);
    const char *all[] = {dead1, dead2, live, other, alike};
    for (int i = 0; i < 5; i++) io_write(all[i], "x", 1);
    CHECK(cn_save_npy(target, cn_ones(CN_F32, CN_SHAPE(4))) == 0);
    CHECK(!exists(dead1));
    CHECK(!exists(dead2));
    CHECK(exists(live));
    CHECK(exists(other));
    CHECK(exists(alike));
    CHECK(cn_load_npy(target) != NULL);
}

int main(void) {
    io_init();
    RUN(test_fifo);
    RUN(test_idx_budget);
    RUN(test_image_pixels);
    RUN(test_safetensors_layout);
    RUN(test_temporaries);
    io_cleanup();
    return th_summary();
}
