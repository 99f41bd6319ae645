/* Compiled kernels kept on disk between processes. NVRTC takes a good part
 * of a second per kernel source, and a training run or the conformance suite
 * compiles dozens to hundreds of them: PyTorch, Triton and the CUDA driver
 * itself keep such a cache for the same reason.
 *
 * Where: $CN_CUDA_KERNEL_CACHE, else $XDG_CACHE_HOME/chutney/cuda-kernels,
 * else ~/.cache/chutney/cuda-kernels; CN_CUDA_KERNEL_CACHE=0 (or empty)
 * turns it off. A file holds its whole key (architecture, NVRTC version,
 * options, source) in front of the image, so a hash collision or a file
 * from another toolkit is a miss, never a wrong kernel. Every failure here
 * (no home, a full disk, a corrupt file) is a miss too: the cache only ever
 * saves time. */
#include "cuda_nvrtc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char magic[8] = "CNKCUB1\n";

/* The cache folder into dir (created), or 0 when the cache is off. */
static int cache_dir(char *dir, size_t cap) {
    const char *e = getenv("CN_CUDA_KERNEL_CACHE");
    int n;
    if (e) {
        if (!*e || !strcmp(e, "0")) return 0;
        n = snprintf(dir, cap, "%s", e);
    } else if ((e = getenv("XDG_CACHE_HOME")) && *e) {
        n = snprintf(dir, cap, "%s/chutney/cuda-kernels", e);
    } else if ((e = getenv("HOME")) && *e) {
        n = snprintf(dir, cap, "%s/.cache/chutney/cuda-kernels", e);
    } else {
        return 0;
    }
    if (n <= 0 || (size_t)n >= cap) return 0;
    /* mkdir -p, one component at a time. */
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int r = mkdir(dir, 0755);
        *p = '/';
        if (r < 0 && errno != EEXIST) return 0;
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) return 0;
    return 1;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The key: every input that changes the image, NUL-separated. */
static char *make_key(const char *src, const char *opts, const char *arch, int nvrtc_version,
                      size_t *len) {
    char head[96];
    int hn = snprintf(head, sizeof head, "%s%c%d%c", arch, 0, nvrtc_version, 0);
    size_t no = opts ? strlen(opts) : 0, nd = strlen(cn_cuda_dialect()), ns = strlen(src);
    size_t n = (size_t)hn + no + 1 + nd + 1 + ns;
    char *k = malloc(n);
    if (!k) return NULL;
    char *p = k;
    memcpy(p, head, (size_t)hn), p += hn;
    memcpy(p, opts ? opts : "", no), p += no, *p++ = 0;
    memcpy(p, cn_cuda_dialect(), nd), p += nd, *p++ = 0;
    memcpy(p, src, ns);
    *len = n;
    return k;
}

static int read_full(int fd, void *p, size_t n) {
    char *b = p;
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            return -1;
        }
        b += r, n -= (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *p, size_t n) {
    const char *b = p;
    while (n) {
        ssize_t r = write(fd, b, n);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        b += r, n -= (size_t)r;
    }
    return 0;
}

static void *lookup(const char *path, const char *key, size_t klen, size_t *size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return NULL;
    struct stat st;
    char m[8];
    uint64_t lens[2];
    void *img = NULL;
    char *k = NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || read_full(fd, m, 8) < 0 ||
        memcmp(m, magic, 8) || read_full(fd, lens, sizeof lens) < 0 || lens[0] != klen ||
        (uint64_t)st.st_size != 8 + sizeof lens + lens[0] + lens[1] || lens[1] == 0)
        goto out;
    k = malloc(klen);
    if (!k || read_full(fd, k, klen) < 0 || memcmp(k, key, klen)) goto out;
    img = malloc(lens[1] + 1);
    if (img && read_full(fd, img, lens[1]) < 0) {
        free(img);
        img = NULL;
    }
    if (img) {
        ((char *)img)[lens[1]] = 0;
        *size = lens[1];
    }
out:
    free(k);
    close(fd);
    return img;
}

/* Written to a temporary name and renamed: a reader sees a whole file or
 * none, and processes compiling the same kernel at once do not collide. */
static void store(const char *path, const char *key, size_t klen, const void *img, size_t n) {
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp) return;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    uint64_t lens[2] = {klen, n};
    int bad = write_full(fd, magic, 8) < 0 || write_full(fd, lens, sizeof lens) < 0 ||
              write_full(fd, key, klen) < 0 || write_full(fd, img, n) < 0;
    bad |= close(fd) < 0;
    if (bad || rename(tmp, path) < 0) unlink(tmp);
}

void *cn_cuda_compile_cached(const char *src, const char *opts, const char *arch, size_t *size) {
    char dir[4096];
    int ver = cn_cuda_nvrtc_version();
    if (ver <= 0 || !cache_dir(dir, sizeof dir - 64))
        return cn_cuda_compile(src, opts, arch, size);
    size_t klen = 0;
    char *key = make_key(src, opts, arch, ver, &klen);
    if (!key) return cn_cuda_compile(src, opts, arch, size);
    char path[4200];
    snprintf(path, sizeof path, "%s/%016llx-%s.bin", dir,
             (unsigned long long)fnv1a(14695981039346656037ull, key, klen), arch);
    void *img = lookup(path, key, klen, size);
    if (!img) {
        img = cn_cuda_compile(src, opts, arch, size);
        if (img) store(path, key, klen, img, *size);
    }
    free(key);
    return img;
}
