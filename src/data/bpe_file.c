/* The tokenizer's text format (docs/text.md, "File format"), its files and
 * its place in checkpoints, and the whole-file helpers (training on and
 * encoding a file).
 *
 *   chutney-bpe 1
 *   pretokenizer chutney-1
 *   vocab_size 1024
 *   merges 767
 *   32 116	# " t"
 *   ...
 *   specials 1
 *   "<|endoftext|>"
 *   end
 *
 * Merges are pairs of ids, so any byte sequence is written without escaping;
 * the comment shows the new token's bytes for people and is ignored when
 * read. Special tokens are quoted, with \" \\ and \xHH escapes, so the whole
 * file is printable ASCII: it fits a safetensors metadata string unchanged.
 * The last line, "end", tells a complete file from a truncated one. */
#include "bpe.h"
#include "../io/fileio.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>

/* A file this size is not a tokenizer (a large vocabulary is a few MB). */
#define MAX_FILE_BYTES ((size_t)256 << 20)

/* ---- writing ---- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + n + 1)
            c *= 2;
        char *q = realloc(b->p, c);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_printf(sbuf *b, const char *fmt, ...) CN_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Bytes as a quoted string of printable ASCII. */
static void sb_quoted(sbuf *b, const unsigned char *s, size_t n) {
    sb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sb_put(b, e, 2);
        } else if (c >= 0x20 && c < 0x7f) {
            sb_put(b, (const char *)&c, 1);
        } else {
            sb_printf(b, "\\x%02x", c);
        }
    }
    sb_put(b, "\"", 1);
}

char *cn_tokenizer_to_string(const cn_tokenizer *tok, size_t *len) {
    static const char fn[] = "tokenizer_to_string";
    if (!tok) return cn_fail("%s: tok is NULL", fn);
    sbuf b = {0};
    sb_printf(&b, "chutney-bpe 1\npretokenizer %s\nvocab_size %d\nmerges %d\n", CN_BPE_PRETOK_NAME,
              256 + tok->nmerges + tok->nspecial, tok->nmerges);
    for (int i = 0; i < tok->nmerges; i++) {
        sb_printf(&b, "%d %d\t# ", (int)tok->merges[2 * i], (int)tok->merges[2 * i + 1]);
        sb_quoted(&b, tok->bytes + tok->off[256 + i], tok->len[256 + i]);
        sb_put(&b, "\n", 1);
    }
    sb_printf(&b, "specials %d\n", tok->nspecial);
    for (int k = 0; k < tok->nspecial; k++) {
        sb_quoted(&b, (const unsigned char *)tok->special[k], tok->special_len[k]);
        sb_put(&b, "\n", 1);
    }
    sb_put(&b, "end\n", 4);
    if (b.oom) {
        free(b.p);
        return cn_fail("%s: out of memory", fn);
    }
    if (len) *len = b.n;
    return b.p;
}

int cn_tokenizer_save(const cn_tokenizer *tok, const char *path) {
    static const char fn[] = "tokenizer_save";
    if (!tok) return cn_failc(CN_EINVAL, "%s: tok is NULL", fn);
    size_t n;
    char *s = cn_tokenizer_to_string(tok, &n);
    if (!s) return CN_EINVAL;
    cn_afile af;
    int st = cn_afile_open(&af, path, fn);
    if (st == CN_OK) {
        if (fwrite(s, 1, n, af.f) != n) {
            char eb[128];
            st = cn_failc(CN_EIO, "%s: writing '%s': %s", fn, path,
                          cn_errno_str(errno, eb, sizeof eb));
            cn_afile_abort(&af);
        } else {
            st = cn_afile_commit(&af, fn);
        }
    }
    free(s);
    return st;
}

/* ---- reading ---- */

typedef struct parser {
    const char *s, *end;
    int line;        /* of the line last read */
    const char *fn, *where;
    char *cur;       /* the current line, NUL-terminated, without "\r\n" */
    size_t cur_cap;
} parser;

/* The next line into p->cur; false at the end of the text. */
static bool next_line(parser *p) {
    if (p->s >= p->end) return false;
    const char *nl = memchr(p->s, '\n', (size_t)(p->end - p->s));
    const char *e = nl ? nl : p->end;
    size_t n = (size_t)(e - p->s);
    if (n && p->s[n - 1] == '\r') n--;
    if (n + 1 > p->cur_cap) {
        char *q = realloc(p->cur, n + 1);
        if (!q) return false;
        p->cur = q;
        p->cur_cap = n + 1;
    }
    memcpy(p->cur, p->s, n);
    p->cur[n] = 0;
    p->s = nl ? nl + 1 : p->end;
    p->line++;
    return true;
}

static void *perr(parser *p, const char *fmt, ...) CN_PRINTF(2, 3);
static void *perr(parser *p, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cn_fail("%s: %s, line %d: %s", p->fn, p->where, p->line, msg);
}

/* A decimal number in [0, max] at *q, which moves past it. */
static bool read_uint(const char **q, long long max, long long *v) {
    const char *s = *q;
    if (*s < '0' || *s > '9') return false;
    long long x = 0;
    while (*s >= '0' && *s <= '9') {
        x = x * 10 + (*s - '0');
        if (x > max) return false;
        s++;
    }
    *v = x;
    *q = s;
    return true;
}

/* "key N" with N in [0, max]. */
static bool keyed(parser *p, const char *key, long long max, long long *v) {
    if (!next_line(p)) return perr(p, "the text ends before \"%s\" (truncated?)", key), false;
    size_t k = strlen(key);
    const char *q = NULL;
    if (strncmp(p->cur, key, k) == 0 && p->cur[k] == ' ') q = p->cur + k + 1;
    if (!q || !read_uint(&q, max, v) || *q)
        return perr(p, "expected \"%s N\" with N at most %lld, found \"%.80s\"", key, max, p->cur),
               false;
    return true;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A quoted special token: its bytes into out (malloc'd). */
static bool read_quoted(parser *p, char **out, size_t *len) {
    const char *q = p->cur;
    size_t n = strlen(q);
    if (n < 2 || q[0] != '"' || q[n - 1] != '"')
        return perr(p, "expected a special token in double quotes, found \"%.80s\"", q), false;
    char *o = malloc(n);
    if (!o) return perr(p, "out of memory"), false;
    size_t m = 0;
    for (size_t i = 1; i + 1 < n; i++) {
        char c = q[i];
        if (c == '"') {
            free(o);
            return perr(p, "an unescaped '\"' inside a special token"), false;
        }
        if (c != '\\') {
            o[m++] = c;
            continue;
        }
        if (i + 2 < n && (q[i + 1] == '"' || q[i + 1] == '\\')) {
            o[m++] = q[++i];
        } else if (i + 4 < n && q[i + 1] == 'x' && hexval(q[i + 2]) >= 0 &&
                   hexval(q[i + 3]) >= 0) {
            o[m++] = (char)(hexval(q[i + 2]) * 16 + hexval(q[i + 3]));
            i += 3;
        } else {
            free(o);
            return perr(p, "a bad escape in a special token (give \\\", \\\\ or \\xHH)"), false;
        }
    }
    *out = o;
    *len = m;
    return true;
}

static cn_tokenizer *parse(const char *text, size_t n, const char *fn, const char *where) {
    parser p = {.s = text, .end = text + n, .fn = fn, .where = where};
    int32_t *merges = NULL;
    char **special = NULL;
    size_t *special_len = NULL;
    long long nm = 0, ns = 0, vocab = 0;
    cn_tokenizer *tok = NULL;
    if (!next_line(&p)) {
        perr(&p, "empty: not a chutney BPE tokenizer");
        goto done;
    }
    if (strncmp(p.cur, "chutney-bpe ", 12) != 0) {
        perr(&p, "not a chutney BPE tokenizer: the first line is \"%.60s\", not \"chutney-bpe 1\"",
             p.cur);
        goto done;
    }
    if (strcmp(p.cur, "chutney-bpe 1") != 0) {
        perr(&p, "format \"%.60s\": this build reads version 1", p.cur);
        goto done;
    }
    if (!next_line(&p) || strncmp(p.cur, "pretokenizer ", 13) != 0) {
        perr(&p, "expected \"pretokenizer NAME\"");
        goto done;
    }
    if (strcmp(p.cur + 13, CN_BPE_PRETOK_NAME) != 0) {
        perr(&p, "pre-tokeniser \"%.60s\" is unknown to this build (it has \"%s\")", p.cur + 13,
             CN_BPE_PRETOK_NAME);
        goto done;
    }
    if (!keyed(&p, "vocab_size", INT32_MAX, &vocab) ||
        !keyed(&p, "merges", CN_BPE_MAX_MERGES, &nm))
        goto done;
    merges = malloc(sizeof(int32_t) * 2 * (size_t)(nm ? nm : 1));
    if (!merges) {
        perr(&p, "out of memory for %lld merges", nm);
        goto done;
    }
    for (long long i = 0; i < nm; i++) {
        if (!next_line(&p)) {
            perr(&p, "the text ends after %lld of %lld merges (truncated?)", i, nm);
            goto done;
        }
        const char *q = p.cur;
        long long a, b;
        if (!read_uint(&q, INT32_MAX, &a) || *q++ != ' ' || !read_uint(&q, INT32_MAX, &b)) {
            perr(&p, "expected a merge \"LEFT RIGHT\" (two token ids), found \"%.80s\"", p.cur);
            goto done;
        }
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q && *q != '#') {
            perr(&p, "unexpected \"%.40s\" after the merge (comments start with '#')", q);
            goto done;
        }
        if (a >= 256 + i || b >= 256 + i) {
            perr(&p, "merge %lld joins tokens %lld and %lld, but only tokens 0 to %lld exist "
                 "before it", i, a, b, 255 + i);
            goto done;
        }
        merges[2 * i] = (int32_t)a;
        merges[2 * i + 1] = (int32_t)b;
    }
    if (!keyed(&p, "specials", CN_BPE_MAX_SPECIAL, &ns)) goto done;
    special = calloc((size_t)ns + 1, sizeof *special);
    special_len = calloc((size_t)ns + 1, sizeof *special_len);
    if (!special || !special_len) {
        perr(&p, "out of memory");
        goto done;
    }
    for (long long k = 0; k < ns; k++) {
        if (!next_line(&p)) {
            perr(&p, "the text ends after %lld of %lld special tokens (truncated?)", k, ns);
            goto done;
        }
        if (!read_quoted(&p, &special[k], &special_len[k])) goto done;
    }
    if (!next_line(&p) || strcmp(p.cur, "end") != 0) {
        perr(&p, "expected \"end\" after the special tokens (truncated?)");
        goto done;
    }
    while (next_line(&p))
        if (strspn(p.cur, " \t") != strlen(p.cur)) {
            perr(&p, "text after \"end\": \"%.60s\"", p.cur);
            goto done;
        }
    if (vocab != 256 + nm + ns) {
        perr(&p, "vocab_size %lld is not 256 + %lld merges + %lld special tokens", vocab, nm, ns);
        goto done;
    }
    tok = cn_bpe_build(merges, (int)nm, special, special_len, (int)ns, fn, where);
done:
    free(merges);
    for (long long k = 0; special && k < ns; k++)
        free(special[k]);
    free(special);
    free(special_len);
    free(p.cur);
    return tok;
}

cn_tokenizer *cn_tokenizer_from_string(const char *s, size_t len) {
    if (!s) return cn_fail("tokenizer_from_string: s is NULL");
    return parse(s, len, "tokenizer_from_string", "the string");
}

/* A whole file into a malloc'd buffer (NUL-terminated), at most max bytes;
 * regular files only (a pipe would block, a device never end). */
static int read_all(const char *fn, const char *path, size_t max, char **out, size_t *len) {
    char eb[128];
    *out = NULL;
    *len = 0;
    FILE *f;
    int64_t size;
    int ost = cn_fopen_regular(path, fn, &f, &size);
    if (ost != CN_OK) return ost;
    /* Room for the file, its NUL and the read that finds the end. */
    size_t cap = size > 0 ? (size_t)size + 2 : 1 << 16, n = 0;
    char *buf = NULL;
    int st = CN_OK;
    for (;;) {
        if (n + 1 >= cap || !buf) {
            if (buf) cap *= 2;
            char *q = realloc(buf, cap);
            if (!q) {
                st = cn_failc(CN_ENOMEM, "%s: out of memory reading '%s'", fn, path);
                break;
            }
            buf = q;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (n > max) {
            st = cn_failc(CN_EFORMAT, "%s: '%s' is larger than %zu bytes", fn, path, max);
            break;
        }
        if (got == 0) {
            if (ferror(f))
                st = cn_failc(CN_EIO, "%s: reading '%s': %s", fn, path,
                              cn_errno_str(errno, eb, sizeof eb));
            break;
        }
    }
    fclose(f);
    if (st != CN_OK) {
        free(buf);
        return st;
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return CN_OK;
}

cn_tokenizer *cn_tokenizer_load(const char *path) {
    static const char fn[] = "tokenizer_load";
    char *s;
    size_t n;
    if (read_all(fn, path, MAX_FILE_BYTES, &s, &n) != CN_OK) return NULL;
    char where[300];
    snprintf(where, sizeof where, "'%.280s'", path);
    cn_tokenizer *tok = parse(s, n, fn, where);
    free(s);
    return tok;
}

cn_tokenizer *cn_tokenizer_from_checkpoint(const cn_checkpoint *c) {
    static const char fn[] = "tokenizer_from_checkpoint";
    if (!c) return cn_fail("%s: the checkpoint is NULL", fn);
    const char *s = cn_checkpoint_metadata(c, CN_TOKENIZER_METADATA_KEY);
    if (!s)
        return cn_fail("%s: the checkpoint has no \"%s\" metadata (save it with "
                       "cn_tokenizer_to_string under CN_TOKENIZER_METADATA_KEY)",
                       fn, CN_TOKENIZER_METADATA_KEY);
    return parse(s, strlen(s), fn, "the checkpoint's \"" CN_TOKENIZER_METADATA_KEY "\" metadata");
}

/* ---- whole files ---- */

cn_tokenizer *cn_bpe_train_file(const char *path, int vocab_size, const cn_bpe_train_opts *opts) {
    char *s;
    size_t n;
    if (read_all("bpe_train_file", path, SIZE_MAX / 2, &s, &n) != CN_OK) return NULL;
    cn_tokenizer *tok = cn_bpe_train(s, n, vocab_size, opts);
    free(s);
    return tok;
}

cn_tensor *cn_tokenizer_encode_file(const cn_tokenizer *tok, const char *path, unsigned flags) {
    if (!tok) return cn_fail("tokenizer_encode_file: tok is NULL");
    char *s;
    size_t n;
    if (read_all("tokenizer_encode_file", path, SIZE_MAX / 2, &s, &n) != CN_OK) return NULL;
    cn_tensor *t = cn_tokenizer_encode_tensor(tok, s, n, flags);
    free(s);
    return t;
}
