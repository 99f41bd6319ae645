/* The wrapped allocation and write functions (fault_inject.h). Counting is
 * one atomic increment per call while armed; the sweeps run the library on
 * one thread, so the Nth call is the same call in every run.
 *
 * Compiled with FI_PRELOAD it is instead a library for LD_PRELOAD that
 * replaces these functions in a whole program (the `chutney` command,
 * tests/cli/faults_cli.sh), armed from the environment: CN_FAULT_WRITE=N
 * fails the Nth write, CN_FAULT_KIND=enospc|eio|short how (or
 * CN_FAULT_ALLOC=N the Nth allocation), and the count of the calls is
 * written to the file CN_FAULT_COUNT at exit (CN_FAULT_TRAP set: fi_trap). */
#define _GNU_SOURCE
#include "fault_inject.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef FI_PRELOAD
#include <dlfcn.h>
#define WRAP(name) name
#define REAL(name) ((__typeof__(&name))real_fn(#name))
/* dlsym's own allocations are not the program's: never failed. */
static _Thread_local bool resolving;
static void *real_fn(const char *name) {
    resolving = true;
    void *p = dlsym(RTLD_NEXT, name);
    resolving = false;
    return p;
}
/* glibc's own entry points: dlsym may allocate, so the allocation functions
 * cannot be looked up through it. Calls inside libc (fopen, strdup, ...)
 * come here too, as they would to any replacement malloc. */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
#define __real_malloc __libc_malloc
#define __real_calloc __libc_calloc
#define __real_realloc __libc_realloc
static int __real_posix_memalign(void **out, size_t align, size_t n) {
    void *p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
static void *__real_aligned_alloc(size_t align, size_t n) { return __libc_memalign(align, n); }
#else
#define WRAP(name) __wrap_##name
#define REAL(name) __real_##name
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_posix_memalign(void **out, size_t align, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
size_t __real_fwrite(const void *p, size_t size, size_t n, FILE *f);
int __real_fputs(const char *s, FILE *f);
int __real_fputc(int c, FILE *f);
int __real_putc(int c, FILE *f);
int __real_puts(const char *s);
int __real_putchar(int c);
int __real_vfprintf(FILE *f, const char *fmt, va_list ap);
int __real_fflush(FILE *f);
int __real_fclose(FILE *f);
ssize_t __real_write(int fd, const void *p, size_t n);
int __real_fsync(int fd);
int __real_rename(const char *from, const char *to);
#endif

static atomic_int armed = -1; /* the class counted, -1: none */
static atomic_long calls, target;
static atomic_bool fired;
static fi_write_kind write_kind;
bool fi_trap;

void fi_arm(fi_class c, long nth, fi_write_kind kind) {
    atomic_store(&calls, 0);
    atomic_store(&target, nth);
    atomic_store(&fired, false);
    write_kind = kind;
    atomic_store(&armed, (int)c);
}

long fi_disarm(void) {
    atomic_store(&armed, -1);
    return atomic_load(&calls);
}

bool fi_fired(void) { return atomic_load(&fired); }

/* Is this call of class c the one to fail? */
static bool fail_now(fi_class c) {
    if (atomic_load_explicit(&armed, memory_order_relaxed) != (int)c) return false;
#ifdef FI_PRELOAD
    if (resolving) return false;
#endif
    long k = atomic_fetch_add(&calls, 1) + 1;
    if (k != atomic_load(&target)) return false;
    atomic_store(&fired, true);
    if (fi_trap) raise(SIGTRAP);
    return true;
}

/* ---- allocations ---- */

void *WRAP(malloc)(size_t n) {
    if (fail_now(FI_ALLOC)) return errno = ENOMEM, NULL;
    return __real_malloc(n);
}
void *WRAP(calloc)(size_t n, size_t m) {
    if (fail_now(FI_ALLOC)) return errno = ENOMEM, NULL;
    return __real_calloc(n, m);
}
void *WRAP(realloc)(void *p, size_t n) {
    if (fail_now(FI_ALLOC)) return errno = ENOMEM, NULL;
    return __real_realloc(p, n);
}
#ifndef FI_PRELOAD /* there libc's own strdup calls the malloc above */
char *WRAP(strdup)(const char *s) {
    if (fail_now(FI_ALLOC)) return errno = ENOMEM, NULL;
    return __real_strdup(s);
}
char *WRAP(strndup)(const char *s, size_t n) {
    if (fail_now(FI_ALLOC)) return errno = ENOMEM, NULL;
    return __real_strndup(s, n);
}
#endif
int WRAP(posix_memalign)(void **out, size_t align, size_t n) {
    if (fail_now(FI_ALLOC)) return ENOMEM;
    return __real_posix_memalign(out, align, n);
}
void *WRAP(aligned_alloc)(size_t align, size_t n) {
    if (fail_now(FI_ALLOC)) return errno = ENOMEM, NULL;
    return __real_aligned_alloc(align, n);
}

/* ---- writes ---- */

static int fault_errno(void) { return write_kind == FI_EIO ? EIO : ENOSPC; }

/* A stream's write failed: stdio marks it (glibc's flag, which ferror
 * reads), so code that checks ferror at the end sees it as it would a
 * failure of the write(2) inside stdio. */
static void stream_failed(FILE *f) {
    f->_flags |= _IO_ERR_SEEN;
    errno = fault_errno();
}

/* glibc's flag of a stream opened for reading only (libio.h, not installed):
 * closing one is not a write. */
#define FI_IO_NO_WRITES 0x0008

static bool stream_fails(FILE *f) {
    return fileno(f) != STDERR_FILENO && !(f->_flags & FI_IO_NO_WRITES) && fail_now(FI_WRITE);
}

size_t WRAP(fwrite)(const void *p, size_t size, size_t n, FILE *f) {
    if (!stream_fails(f)) return REAL(fwrite)(p, size, n, f);
    size_t done = write_kind == FI_SHORT && n > 1 ? REAL(fwrite)(p, size, n / 2, f) : 0;
    stream_failed(f);
    return done;
}
int WRAP(fputs)(const char *s, FILE *f) {
    if (!stream_fails(f)) return REAL(fputs)(s, f);
    size_t len = strlen(s);
    if (write_kind == FI_SHORT && len > 1) REAL(fwrite)(s, 1, len / 2, f);
    stream_failed(f);
    return EOF;
}
int WRAP(fputc)(int c, FILE *f) {
    if (!stream_fails(f)) return REAL(fputc)(c, f);
    stream_failed(f);
    return EOF;
}
int WRAP(putc)(int c, FILE *f) {
    if (!stream_fails(f)) return REAL(putc)(c, f);
    stream_failed(f);
    return EOF;
}
int WRAP(puts)(const char *s) {
    if (!stream_fails(stdout)) return REAL(puts)(s);
    stream_failed(stdout);
    return EOF;
}
int WRAP(putchar)(int c) {
    if (!stream_fails(stdout)) return REAL(putchar)(c);
    stream_failed(stdout);
    return EOF;
}
int WRAP(vfprintf)(FILE *f, const char *fmt, va_list ap) {
    if (!stream_fails(f)) return REAL(vfprintf)(f, fmt, ap);
    stream_failed(f);
    return -1;
}
int WRAP(fprintf)(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = WRAP(vfprintf)(f, fmt, ap);
    va_end(ap);
    return r;
}
int WRAP(vprintf)(const char *fmt, va_list ap) { return WRAP(vfprintf)(stdout, fmt, ap); }
int WRAP(printf)(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = WRAP(vfprintf)(stdout, fmt, ap);
    va_end(ap);
    return r;
}
int WRAP(fflush)(FILE *f) {
    if (!f || !stream_fails(f)) return REAL(fflush)(f);
    stream_failed(f);
    return EOF;
}
int WRAP(fclose)(FILE *f) {
    bool fail = stream_fails(f);
    int r = REAL(fclose)(f); /* closed either way, as a failing close does */
    if (!fail) return r;
    errno = fault_errno();
    return EOF;
}
ssize_t WRAP(write)(int fd, const void *p, size_t n) {
    if (fd == STDERR_FILENO || !fail_now(FI_WRITE)) return REAL(write)(fd, p, n);
    if (write_kind == FI_SHORT && n > 1) return REAL(write)(fd, p, n / 2);
    errno = fault_errno();
    return -1;
}
int WRAP(fsync)(int fd) {
    if (!fail_now(FI_WRITE)) return REAL(fsync)(fd);
    errno = EIO;
    return -1;
}
int WRAP(rename)(const char *from, const char *to) {
    if (!fail_now(FI_WRITE)) return REAL(rename)(from, to);
    errno = fault_errno();
    return -1;
}

#ifdef FI_PRELOAD
static const char *count_file;

__attribute__((constructor)) static void arm_from_env(void) {
    const char *n = getenv("CN_FAULT_WRITE"), *k = getenv("CN_FAULT_KIND");
    const char *na = getenv("CN_FAULT_ALLOC");
    count_file = getenv("CN_FAULT_COUNT");
    fi_trap = getenv("CN_FAULT_TRAP") != NULL;
    fi_write_kind kind = !k || !strcmp(k, "enospc") ? FI_ENOSPC : !strcmp(k, "eio") ? FI_EIO : FI_SHORT;
    if (na) fi_arm(FI_ALLOC, atol(na), kind);
    else fi_arm(FI_WRITE, n ? atol(n) : 0, kind);
}

__attribute__((destructor)) static void report_count(void) {
    long n = fi_disarm();
    FILE *f = count_file ? fopen(count_file, "w") : NULL;
    if (!f) return;
    REAL(fprintf)(f, "%ld\n", n);
    REAL(fclose)(f);
}
#endif
