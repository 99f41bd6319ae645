/* Atomic file replacement, byte order and small file helpers. */
#include "fileio.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
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

/* ---- reading: regular files only ---- */

static const char *file_kind(mode_t m) {
    return S_ISFIFO(m)   ? "a FIFO (named pipe)"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISDIR(m)  ? "a directory"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

int cn_fopen_regular(const char *path, const char *fn, FILE **out, int64_t *size) {
    char eb[128];
    *out = NULL;
    if (size) *size = -1;
    if (!path) return cn_failc(CN_EINVAL, "%s: path is NULL", fn);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return cn_failc(CN_EIO, "%s: cannot open '%s': %s", fn, path,
                        cn_errno_str(errno, eb, sizeof eb));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return cn_failc(CN_EIO, "%s: cannot stat '%s': %s", fn, path,
                        cn_errno_str(err, eb, sizeof eb));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return cn_failc(CN_EINVAL,
                        "%s: '%s' is %s; only regular files are read (a pipe or a device could "
                        "block or never end)",
                        fn, path, file_kind(st.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return cn_failc(CN_ENOMEM, "%s: cannot open a stream on '%s'", fn, path);
    }
    *out = f;
    if (size) *size = (int64_t)st.st_size;
    return CN_OK;
}

int cn_env_limit(const char *name, uint64_t dflt, uint64_t *out, const char *fn) {
    const char *v = getenv(name);
    *out = dflt;
    if (!v || !*v) return CN_OK;
    uint64_t x = 0;
    const char *p = v;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (x > (UINT64_MAX - 9) / 10) break;
        x = x * 10 + (uint64_t)(*p - '0');
    }
    if (*p)
        return cn_failc(CN_EINVAL,
                        "%s: the environment variable %s is '%.60s', not a whole number (0: no "
                        "limit)",
                        fn, name, v);
    *out = x ? x : UINT64_MAX;
    return CN_OK;
}

/* ---- temporaries of atomic writes ---- */

/* The temporaries being written, for a signal handler to remove: fixed
 * slots, since a handler may neither lock nor follow freed pointers. A slot
 * is 0 free, 1 being filled, 2 listed. More saves at once than slots just
 * go unlisted (they are still removed on failure and by the stale sweep). */
#define TMP_SLOTS 32
#define TMP_PATH 4096
static struct {
    atomic_int state;
    char path[TMP_PATH];
} tmp_slots[TMP_SLOTS];

static int tmp_list(const char *tmp) {
    if (strlen(tmp) >= TMP_PATH) return 0;
    for (int i = 0; i < TMP_SLOTS; i++) {
        int free_ = 0;
        if (atomic_compare_exchange_strong(&tmp_slots[i].state, &free_, 1)) {
            memcpy(tmp_slots[i].path, tmp, strlen(tmp) + 1);
            atomic_store(&tmp_slots[i].state, 2);
            return i + 1;
        }
    }
    return 0;
}

static void tmp_unlist(cn_afile *af) {
    if (af->slot > 0) atomic_store(&tmp_slots[af->slot - 1].state, 0);
    af->slot = 0;
}

void cn_remove_temporary_files(void) {
    /* Only async-signal-safe calls: atomic loads and unlink. */
    for (int i = 0; i < TMP_SLOTS; i++)
        if (atomic_load(&tmp_slots[i].state) == 2) unlink(tmp_slots[i].path);
}

/* Does name (in the target's directory) read "<base>.tmp.<pid>.<n>.<hex>",
 * the temporaries' pattern? Then *pid gets the writer's pid. Strict, so no
 * file of the user's that merely starts like one is ever touched. */
static bool is_temp_of(const char *name, const char *base, long *pid) {
    size_t bl = strlen(base);
    if (strncmp(name, base, bl) != 0 || strncmp(name + bl, ".tmp.", 5) != 0) return false;
    const char *p = name + bl + 5;
    long v = 0;
    int fields = 0;
    for (int part = 0; part < 3; part++) {
        const char *start = p;
        while (part < 2 ? isdigit((unsigned char)*p) : isxdigit((unsigned char)*p)) {
            if (part == 0) {
                if (v > 100000000L) return false;
                v = v * 10 + (*p - '0');
            }
            p++;
        }
        if (p == start) return false;
        fields++;
        if (part < 2 && *p++ != '.') return false;
    }
    *pid = v;
    return fields == 3 && *p == '\0' && v > 0;
}

/* Removes the temporaries of path whose writer is gone: a process killed
 * outright (SIGKILL, a power cut) cannot clean up, and each such file may
 * be as large as the checkpoint. A writer that is alive (kill(pid, 0)
 * succeeds or says EPERM) keeps its file: it may be saving right now. */
static void remove_stale_temps(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base) return;
    char dir[TMP_PATH];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - path) < sizeof dir)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else
        return;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    long self = (long)getpid();
    while ((de = readdir(d)) != NULL) {
        long pid;
        if (!is_temp_of(de->d_name, base, &pid) || pid == self) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char full[TMP_PATH];
        if (snprintf(full, sizeof full, "%s/%s", dir, de->d_name) >= (int)sizeof full) continue;
        struct stat st;
        if (lstat(full, &st) == 0 && S_ISREG(st.st_mode)) unlink(full);
    }
    closedir(d);
}

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
    remove_stale_temps(path);
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
    af->slot = tmp_list(af->tmp);
    return CN_OK;
}

void cn_afile_abort(cn_afile *af) {
    if (af->f) fclose(af->f);
    if (af->tmp) unlink(af->tmp);
    tmp_unlist(af);
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
    tmp_unlist(af);
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
