/* Helpers for the file-format tests: a temporary directory, whole-file
 * reads and writes, and running Python (NumPy is the independent reader
 * and writer of the formats). */
#ifndef CN_TEST_IO_UTIL_H
#define CN_TEST_IO_UTIL_H

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char io_dir[256];

/* Creates the directory (removed by io_cleanup). */
static inline void io_init(void) {
    const char *base = getenv("TMPDIR");
    snprintf(io_dir, sizeof io_dir, "%s/chutney-io-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(io_dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

static inline void io_cleanup(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", io_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", io_dir);
}

/* io_dir/name in a static ring of buffers (several may be live at once). */
static inline const char *io_path(const char *name) {
    static char bufs[8][512];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, 512, "%s/%s", io_dir, name);
    return b;
}

static inline int io_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    fclose(f);
    return w == n ? 0 : -1;
}

/* malloc'd contents; *n the size. NULL if unreadable. */
static inline unsigned char *io_read(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(sz > 0 ? (size_t)sz : 1);
    size_t got = fread(b, 1, (size_t)sz, f);
    fclose(f);
    *n = got;
    return b;
}

/* The first n bytes of src into dst. */
static inline int io_truncate_copy(const char *src, const char *dst, size_t n) {
    size_t sz;
    unsigned char *b = io_read(src, &sz);
    if (!b) return -1;
    int r = io_write(dst, b, n < sz ? n : sz);
    free(b);
    return r;
}

#define PYTHON "/usr/bin/python3"

/* Writes script to io_dir/name.py, runs it with io_dir as its argument,
 * and returns its stdout (malloc'd, NULL if it failed to run or exited
 * non-zero; stderr passes through). */
static inline char *io_python(const char *name, const char *script) {
    char sp[512], cmd[1200];
    snprintf(sp, sizeof sp, "%s/script_%s.py", io_dir, name); /* never a module name */
    if (io_write(sp, script, strlen(script)) != 0) return NULL;
    snprintf(cmd, sizeof cmd, PYTHON " '%s' '%s'", sp, io_dir);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 4096, n = 0;
    char *out = malloc(cap);
    for (;;) {
        if (n + 1 >= cap) out = realloc(out, cap *= 2);
        size_t got = fread(out + n, 1, cap - n - 1, p);
        if (!got) break;
        n += got;
    }
    out[n] = '\0';
    int st = pclose(p);
    if (st != 0) {
        fprintf(stderr, "python script %s failed (status %d); output:\n%s\n", name, st, out);
        free(out);
        return NULL;
    }
    return out;
}

/* Is NumPy there? Its absence fails the tests that need it, loudly: it is a
 * required package (scripts/setup.sh). */
static inline int io_have_numpy(void) {
    static int have = -1;
    if (have < 0) have = system(PYTHON " -c 'import numpy' >/dev/null 2>&1") == 0;
    return have;
}

#endif
