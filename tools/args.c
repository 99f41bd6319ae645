/* The commands' shared handling of the command line (tools.h): values
 * checked with a message that names the option and what it accepts,
 * "did you mean" for mistyped words, and files checked before any work
 * starts, so that a newcomer's mistake costs a second, not an epoch.
 *
 * Exit statuses: 2 (CN_TOOL_USAGE) when the command line itself is wrong,
 * which would be wrong on any machine; 1 (CN_TOOL_FAILED) when it is well
 * formed but something here failed (a missing file, an unwritable
 * directory, a device this machine lacks). */
#include "tools.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- did you mean ---- */

#define MAX_WORD 64

static int min3(int a, int b, int c) { return a < b ? (a < c ? a : c) : (b < c ? b : c); }

/* Damerau-Levenshtein distance in its optimal-string-alignment form:
 * insertions, deletions, substitutions and swaps of neighbours ("mpl" is
 * one edit from "mlp"), the typing mistakes people make. */
static int edit_distance(const char *a, const char *b) {
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n > MAX_WORD || m > MAX_WORD) return INT_MAX;
    int d[MAX_WORD + 1][MAX_WORD + 1];
    for (int i = 0; i <= n; i++) d[i][0] = i;
    for (int j = 0; j <= m; j++) d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1];
            d[i][j] = min3(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < d[i][j])
                d[i][j] = d[i - 2][j - 2] + 1;
        }
    return d[n][m];
}

/* The letters of an option without its dashes: "--x" must not be "close"
 * to every two-letter option. */
static size_t core_len(const char *w) {
    while (*w == '-') w++;
    return strlen(w);
}

const char *cn_tool_suggest(const char *word, const char *const *cands, int n) {
    /* At most 2 edits, and fewer than half the word's letters, else any
     * short word would match some candidate. */
    int limit = (int)core_len(word) / 2;
    if (limit > 2) limit = 2;
    const char *best = NULL;
    int best_d = limit + 1;
    for (int i = 0; i < n; i++) {
        int d = edit_distance(word, cands[i]);
        if (d < best_d) {
            best_d = d;
            best = cands[i];
        }
    }
    if (best) return best;
    /* A unique beginning of 3 letters or more ("--epo" for "--epochs"). */
    size_t len = strlen(word);
    if (core_len(word) < 3) return NULL;
    for (int i = 0; i < n; i++)
        if (!strncmp(cands[i], word, len)) {
            if (best) return NULL;
            best = cands[i];
        }
    return best;
}

/* " 'a', 'b' or 'c'" into buf: the accepted values for a message. */
static void list_words(const char *const *words, int n, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len < size; i++) {
        const char *sep = i == 0 ? "" : i == n - 1 ? " or " : ", ";
        int w = snprintf(buf + len, size - len, "%s%s", sep, words[i]);
        if (w < 0) break;
        len += (size_t)w;
    }
}

static void did_you_mean(FILE *f, const char *word, const char *const *cands, int n) {
    const char *s = cn_tool_suggest(word, cands, n);
    if (s) fprintf(f, "; did you mean '%s'?", s);
}

int cn_tool_unknown_option(const char *cmd, const char *arg, const char *const *opts, int n) {
    if (arg[0] == '-') fprintf(stderr, "chutney %s: unknown option '%s'", cmd, arg);
    else fprintf(stderr, "chutney %s: unexpected argument '%s'", cmd, arg);
    did_you_mean(stderr, arg, opts, n);
    fprintf(stderr, "\n(`chutney %s --help` lists the options)\n", cmd);
    return CN_TOOL_USAGE;
}

int cn_tool_unknown_command(const char *arg, const char *const *cmds, int n) {
    fprintf(stderr, "chutney: unknown %s '%s'", arg[0] == '-' ? "option" : "command", arg);
    did_you_mean(stderr, arg, cmds, n);
    fprintf(stderr, "\n(`chutney help` lists the commands)\n");
    return CN_TOOL_USAGE;
}

int cn_tool_missing_value(const char *cmd, const char *opt, const char *what) {
    fprintf(stderr, "chutney %s: %s needs a value: %s\n", cmd, opt, what);
    return CN_TOOL_USAGE;
}

/* ---- values ---- */

static void bad_value(const char *cmd, const char *opt, const char *s, const char *expected) {
    fprintf(stderr, "chutney %s: bad value '%s' for %s: expected %s\n", cmd, s, opt, expected);
}

bool cn_tool_int(const char *cmd, const char *opt, const char *s, long long lo, long long hi,
                 long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!errno && end != s && !*end && v >= lo && v <= hi) {
        *out = v;
        return true;
    }
    char expected[96];
    if (hi == LLONG_MAX) snprintf(expected, sizeof expected, "a whole number, %lld or more", lo);
    else snprintf(expected, sizeof expected, "a whole number from %lld to %lld", lo, hi);
    bad_value(cmd, opt, s, expected);
    return false;
}

bool cn_tool_u64(const char *cmd, const char *opt, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    /* strtoull takes "-1" as 2^64 - 1: a sign is refused first. */
    unsigned long long v = strtoull(s, &end, 10);
    if (s[0] != '-' && s[0] != '+' && !errno && end != s && !*end) {
        *out = v;
        return true;
    }
    bad_value(cmd, opt, s, "a whole number from 0 to 18446744073709551615");
    return false;
}

bool cn_tool_positive(const char *cmd, const char *opt, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!errno && end != s && !*end && isfinite(v) && v > 0) {
        *out = v;
        return true;
    }
    bad_value(cmd, opt, s, "a positive number such as 0.01 or 1e-3");
    return false;
}

bool cn_tool_bool(const char *s, bool *out) {
    bool on = !strcmp(s, "true") || !strcmp(s, "1");
    if (!on && strcmp(s, "false") && strcmp(s, "0")) return false;
    *out = on;
    return true;
}

int cn_tool_choice(const char *cmd, const char *opt, const char *noun, const char *s,
                   const char *const *choices, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(s, choices[i])) return i;
    char list[256];
    list_words(choices, n, list, sizeof list);
    if (noun) fprintf(stderr, "chutney %s: unknown %s '%s' for %s: choose %s", cmd, noun, s, opt, list);
    else fprintf(stderr, "chutney %s: bad value '%s' for %s: choose %s", cmd, s, opt, list);
    did_you_mean(stderr, s, choices, n);
    fputc('\n', stderr);
    return -1;
}

/* ---- files ---- */

bool cn_tool_readable(const char *cmd, const char *opt, const char *path) {
    struct stat st;
    if (stat(path, &st) < 0 || access(path, R_OK) < 0) {
        fprintf(stderr, "chutney %s: %s %s: %s\n", cmd, opt, path, strerror(errno));
        return false;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "chutney %s: %s %s: is a directory, not a file\n", cmd, opt, path);
        return false;
    }
    /* A FIFO or a device would block the read (or never end). */
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "chutney %s: %s %s: not a regular file (a pipe or a device); give a "
                        "file\n", cmd, opt, path);
        return false;
    }
    return true;
}

FILE *cn_tool_fopen_regular(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        cn_tool_fail("cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        cn_tool_fail("%s is not a regular file (a pipe or a device); only regular files are "
                     "read", path);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        cn_tool_fail("cannot open %s: out of memory", path);
    }
    return f;
}

char *cn_tool_read_text(const char *path, size_t max, const char *what) {
    FILE *f = cn_tool_fopen_regular(path);
    if (!f) return NULL;
    char *text = malloc(max + 1);
    size_t n = text ? fread(text, 1, max + 1, f) : 0;
    bool err = ferror(f);
    fclose(f);
    if (text && !err && n <= max && memchr(text, '\0', n) == NULL) {
        text[n] = '\0';
        return text;
    }
    if (!text || err) cn_tool_fail("%s: %s", path, !text ? "out of memory" : strerror(errno));
    else cn_tool_fail("%s: %s: not %s", path, n > max ? "too large" : "has a NUL byte", what);
    free(text);
    return NULL;
}

bool cn_tool_directory(const char *cmd, const char *opt, const char *path) {
    struct stat st;
    if (stat(path, &st) < 0) {
        fprintf(stderr, "chutney %s: %s %s: %s\n", cmd, opt, path, strerror(errno));
        return false;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "chutney %s: %s %s: not a directory\n", cmd, opt, path);
        return false;
    }
    return true;
}

/* The directory part of path ("." for a bare file name) into buf. */
static void dir_of(const char *path, char *buf, size_t size) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(buf, size, ".");
    else if (slash == path) snprintf(buf, size, "/");
    else snprintf(buf, size, "%.*s", (int)(slash - path), path);
}

bool cn_tool_writable(const char *cmd, const char *opt, const char *path) {
    struct stat st;
    if (!*path || path[strlen(path) - 1] == '/' || (stat(path, &st) == 0 && S_ISDIR(st.st_mode))) {
        fprintf(stderr, "chutney %s: %s %s: is a directory; give a file name\n", cmd, opt, path);
        return false;
    }
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "chutney %s: %s %s: the directory %s does not exist\n", cmd, opt, path, dir);
        return false;
    }
    /* Files are written through a temporary file in the same directory and
     * renamed (atomic saves), so the directory itself must be writable. */
    if (access(dir, W_OK | X_OK) < 0) {
        fprintf(stderr, "chutney %s: %s %s: cannot write in %s: %s\n", cmd, opt, path, dir,
                strerror(errno));
        return false;
    }
    return true;
}
