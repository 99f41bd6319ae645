/* Helpers shared by the file formats (src/io/, src/data/): atomic writes,
 * byte order, whole-file reads, and tensors made from raw buffers. */
#ifndef CN_IO_FILEIO_H
#define CN_IO_FILEIO_H

#include "../backend/backend.h"

#include <stdio.h>

/* A file written under a temporary name in the target's directory and
 * renamed over the target only when complete, so a crash or a kill at any
 * moment leaves either the old file or the new one, never a torn one. */
typedef struct cn_afile {
    FILE *f;
    char *path;
    char *tmp;
    int slot; /* 1 + its entry in the table of temporaries a signal removes; 0: none */
} cn_afile;

/* Opens path.tmp.<pid>.<n>.<hex> for writing. fn names the caller in
 * messages. Temporaries of path left by a process that no longer exists (a
 * kill -9 during a save) are removed first. While open, the temporary is
 * listed for cn_remove_temporary_files (a signal handler's clean-up). */
int cn_afile_open(cn_afile *af, const char *path, const char *fn);
/* Flush, fsync, rename over the target, fsync the directory. On failure the
 * temporary file is removed and the target is untouched. */
int cn_afile_commit(cn_afile *af, const char *fn);
/* Give up: close and remove the temporary file. */
void cn_afile_abort(cn_afile *af);

static inline bool cn_host_is_le(void) {
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}
/* Reverse the bytes of each of n elements of esize bytes, in place. */
void cn_byteswap(void *p, size_t n, size_t esize);
/* Write n elements of esize bytes as little-endian. */
int cn_write_le(FILE *f, const void *p, size_t n, size_t esize);

static inline uint32_t cn_rd_le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t cn_rd_le64(const unsigned char *p) {
    return (uint64_t)cn_rd_le32(p) | (uint64_t)cn_rd_le32(p + 4) << 32;
}
static inline uint32_t cn_rd_be32(const unsigned char *p) {
    return (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
}

/* Every reader of a file Chutney is given (IDX, images, CSV, .npy,
 * safetensors, tokenizers, text, ONNX) opens it through this: a FIFO,
 * device or socket passed as a data file would block the open or the read
 * forever, and a directory fails late with a confusing message. The open is
 * non-blocking (so a FIFO without a writer cannot hang it), then fstat must
 * say "regular file". Returns the stream (blocking again), *size (may be
 * NULL) its size, into *out: CN_OK, or a negative status after cn_failc
 * naming fn, the file and what it is. */
int cn_fopen_regular(const char *path, const char *fn, FILE **out, int64_t *size);

/* A size limit from the environment variable name (a whole number; 0: no
 * limit, *out = UINT64_MAX), else dflt. A malformed value fails (naming fn
 * and the variable) rather than silently falling back: a user who set it
 * meant something. */
int cn_env_limit(const char *name, uint64_t dflt, uint64_t *out, const char *fn);

/* The size of an open regular file, or -1. */
int64_t cn_file_size(FILE *f);
/* strerror(errno) for a failed fopen etc. (thread-safe). */
const char *cn_errno_str(int err, char *buf, size_t n);

/* A tensor owning a buffer from cn_alloc (taken over, also on failure). */
cn_tensor *cn_t_from_alloc(cn_dtype dt, int ndim, const int64_t *shape, void *data);

/* Does the file name end with ext (case-insensitive, ext with its dot)? */
bool cn_has_ext(const char *path, const char *ext);

#endif
