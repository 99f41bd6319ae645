/* Atomic file replacement, byte order and small file helpers. */
#include "fileio.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *cn_errno_str(int err, char *buf, size_t n) {
    /* strerror is not thread-safe; the XSI strerror_r is what
     * _POSIX_C_SOURCE=200809L gives. */
    if (strerror_r(err, buf, n) != 0) snprintf(buf, n, "error %d", err);
    return buf;
}

static atomic_uint cn_tmp_counter;

int cn_afile_open(cn_afile *af, const char *path, const char *fn) {
    memset(af, 0, sizeof *af);
    if (!path || !*path) return cn_failc(CN_EINVAL, "%s: the path is empty", fn);
    size_t n = strlen(path);
    af->path = malloc(n + 1);
    af->tmp = malloc(n + 64);
    if (!af->path || !af->tmp) {
        free(af->path);
        free(af->tmp);
        af->path = af->tmp = NULL;
        return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    }
    memcpy(af->path, path, n + 1);
    /* O_EXCL with a name unique to this process and call: two writers of
     * the same target never share a temporary file. open() rather than
     * mkstemp() so the new file gets the usual 0666 & ~umask permissions. */
    int fd = -1, err = 0;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        unsigned c = atomic_fetch_add(&cn_tmp_counter, 1u);
        snprintf(af->tmp, n + 64, "%s.tmp.%ld.%u.%lx", path, (long)getpid(), c,
                 (unsigned long)time(NULL) ^ (unsigned long)(uintptr_t)af);
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        err = errno;
        if (fd < 0 && err != EEXIST) break;
    }
    if (fd < 0) {
        char eb[128];
        int r = cn_failc(CN_EIO, "%s: cannot create a temporary file next to '%s': %s", fn, path,
                         cn_errno_str(err, eb, sizeof eb));
        free(af->path);
        free(af->tmp);
        af->path = af->tmp = NULL;
        return r;
    }
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        close(fd);
        unlink(af->tmp);
        free(af->path);
        free(af->tmp);
        af->path = af->tmp = NULL;
        return cn_failc(CN_EIO, "%s: cannot open a stream on the temporary file", fn);
    }
    return CN_OK;
}

void cn_afile_abort(cn_afile *af) {
    if (af->f) fclose(af->f);
    if (af->tmp) unlink(af->tmp);
    free(af->path);
    free(af->tmp);
    memset(af, 0, sizeof *af);
}

/* Make the rename itself durable: without this a power loss right after
 * the call could bring back the old directory entry. */
static void fsync_dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash) {
        dir = malloc(2);
        if (!dir) return;
        memcpy(dir, ".", 2);
    } else {
        size_t len = slash == path ? 1 : (size_t)(slash - path);
        dir = malloc(len + 1);
        if (!dir) return;
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd); /* some file systems refuse (EINVAL); the data is safe anyway */
        close(fd);
    }
    free(dir);
}

int cn_afile_commit(cn_afile *af, const char *fn) {
    char eb[128];
    int err = 0;
    if (fflush(af->f) != 0 || ferror(af->f)) err = errno ? errno : EIO;
    if (!err && fsync(fileno(af->f)) != 0) err = errno;
    if (fclose(af->f) != 0 && !err) err = errno ? errno : EIO;
    af->f = NULL;
    if (err) {
        int r = cn_failc(CN_EIO, "%s: writing '%s' failed: %s", fn, af->path,
                         cn_errno_str(err, eb, sizeof eb));
        cn_afile_abort(af);
        return r;
    }
    if (rename(af->tmp, af->path) != 0) {
        err = errno;
        int r = cn_failc(CN_EIO, "%s: cannot rename the temporary file to '%s': %s", fn, af->path,
                         cn_errno_str(err, eb, sizeof eb));
        cn_afile_abort(af);
        return r;
    }
    fsync_dir_of(af->path);
    free(af->path);
    free(af->tmp);
    memset(af, 0, sizeof *af);
    return CN_OK;
}

void cn_byteswap(void *p, size_t n, size_t esize) {
    unsigned char *b = p;
    if (esize < 2) return;
    for (size_t i = 0; i < n; i++, b += esize)
        for (size_t j = 0; j < esize / 2; j++) {
            unsigned char t = b[j];
            b[j] = b[esize - 1 - j];
            b[esize - 1 - j] = t;
        }
}

int cn_write_le(FILE *f, const void *p, size_t n, size_t esize) {
    if (cn_host_is_le() || esize < 2) return fwrite(p, esize, n, f) == n ? 0 : -1;
    unsigned char buf[4096];
    size_t per = sizeof buf / esize;
    const unsigned char *src = p;
    while (n) {
        size_t k = n < per ? n : per;
        memcpy(buf, src, k * esize);
        cn_byteswap(buf, k, esize);
        if (fwrite(buf, esize, k, f) != k) return -1;
        src += k * esize;
        n -= k;
    }
    return 0;
}

int64_t cn_file_size(FILE *f) {
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) return -1;
    return (int64_t)st.st_size;
}

cn_tensor *cn_t_from_alloc(cn_dtype dt, int ndim, const int64_t *shape, void *data) {
    cn_tensor *t = cn_t_alloc();
    if (!t) {
        cn_free(data);
        return cn_fail("out of memory");
    }
    cn_storage *s = cn_storage_adopt(data, (size_t)cn_shape_numel(ndim, shape) * cn_dsize(dt));
    t->storage = s;
    t->dtype = (uint8_t)dt;
    t->ndim = (int8_t)ndim;
    t->flags = CN_TF_LEAF;
    if (ndim > 0) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    cn_contiguous_strides(ndim, shape, t->strides);
    return t;
}

bool cn_has_ext(const char *path, const char *ext) {
    size_t n = strlen(path), m = strlen(ext);
    if (n < m) return false;
    for (size_t i = 0; i < m; i++)
        if (tolower((unsigned char)path[n - m + i]) != tolower((unsigned char)ext[i])) return false;
    return true;
}
