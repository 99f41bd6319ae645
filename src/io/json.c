/* A small, strict JSON reader (RFC 8259) for untrusted file headers. */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *s;
    size_t len, pos;
    char *err;
    size_t errlen;
    bool failed;
} parser;

static bool fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(parser *p, const char *fmt, ...) {
    if (p->failed) return false;
    p->failed = true;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->err && p->errlen) snprintf(p->err, p->errlen, "%s at byte %zu", msg, p->pos);
    return false;
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static int peek(parser *p) { return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1; }

static void value_clear(cn_json *v) {
    if (!v) return;
    free(v->str);
    for (size_t i = 0; i < v->n; i++) {
        value_clear(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->key_lens);
    memset(v, 0, sizeof *v);
}

void cn_json_free(cn_json *v) {
    value_clear(v);
    free(v);
}

/* Growing byte buffer for decoded strings. */
typedef struct sbuf {
    char *b;
    size_t n, cap;
} sbuf;

static bool sbuf_put(sbuf *sb, const char *src, size_t k) {
    if (sb->n + k + 1 > sb->cap) {
        size_t ncap = sb->cap ? sb->cap : 32;
        while (ncap < sb->n + k + 1)
            ncap *= 2;
        char *nb = realloc(sb->b, ncap);
        if (!nb) return false;
        sb->b = nb;
        sb->cap = ncap;
    }
    memcpy(sb->b + sb->n, src, k);
    sb->n += k;
    sb->b[sb->n] = '\0';
    return true;
}

static int hex4(parser *p) {
    if (p->len - p->pos < 4) return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->pos + (size_t)i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    p->pos += 4;
    return v;
}

/* The number of bytes of a well-formed UTF-8 sequence starting at s[0..n),
 * or 0. Overlong forms, surrogates and values above U+10FFFF are refused. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF)
        k = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        k = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        k = 4, cp = c & 0x07;
    else
        return 0;
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return k;
}

static bool put_utf8(sbuf *sb, uint32_t cp) {
    char b[4];
    size_t k;
    if (cp < 0x80)
        b[0] = (char)cp, k = 1;
    else if (cp < 0x800)
        b[0] = (char)(0xC0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3F)), k = 2;
    else if (cp < 0x10000)
        b[0] = (char)(0xE0 | cp >> 12), b[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
        b[2] = (char)(0x80 | (cp & 0x3F)), k = 3;
    else
        b[0] = (char)(0xF0 | cp >> 18), b[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[3] = (char)(0x80 | (cp & 0x3F)), k = 4;
    return sbuf_put(sb, b, k);
}

/* At the opening quote. */
static bool parse_string(parser *p, char **out, size_t *outlen) {
    sbuf sb = {0};
    p->pos++;
    if (!sbuf_put(&sb, "", 0)) return fail(p, "out of memory");
    for (;;) {
        if (p->pos >= p->len) {
            free(sb.b);
            return fail(p, "unterminated string");
        }
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20) {
            free(sb.b);
            return fail(p, "control character 0x%02x in a string", c);
        }
        if (c == '\\') {
            p->pos++;
            if (p->pos >= p->len) {
                free(sb.b);
                return fail(p, "unterminated string");
            }
            char e = p->s[p->pos++];
            const char *lit = NULL;
            switch (e) {
            case '"': lit = "\""; break;
            case '\\': lit = "\\"; break;
            case '/': lit = "/"; break;
            case 'b': lit = "\b"; break;
            case 'f': lit = "\f"; break;
            case 'n': lit = "\n"; break;
            case 'r': lit = "\r"; break;
            case 't': lit = "\t"; break;
            case 'u': {
                int u = hex4(p);
                if (u < 0) {
                    free(sb.b);
                    return fail(p, "bad \\u escape");
                }
                uint32_t cp = (uint32_t)u;
                if (cp >= 0xD800 && cp <= 0xDBFF) { /* a surrogate pair */
                    int lo = -1;
                    if (p->len - p->pos >= 2 && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u') {
                        p->pos += 2;
                        lo = hex4(p);
                    }
                    if (lo < 0xDC00 || lo > 0xDFFF) {
                        free(sb.b);
                        return fail(p, "unpaired surrogate in a \\u escape");
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    free(sb.b);
                    return fail(p, "unpaired surrogate in a \\u escape");
                }
                if (!put_utf8(&sb, cp)) {
                    free(sb.b);
                    return fail(p, "out of memory");
                }
                continue;
            }
            default: free(sb.b); return fail(p, "bad escape '\\%c'", e);
            }
            if (!sbuf_put(&sb, lit, 1)) {
                free(sb.b);
                return fail(p, "out of memory");
            }
            continue;
        }
        size_t k = utf8_seq((const unsigned char *)p->s + p->pos, p->len - p->pos);
        if (!k) {
            free(sb.b);
            return fail(p, "invalid UTF-8 in a string");
        }
        if (!sbuf_put(&sb, p->s + p->pos, k)) {
            free(sb.b);
            return fail(p, "out of memory");
        }
        p->pos += k;
    }
    *out = sb.b;
    *outlen = sb.n;
    return true;
}

static bool is_digit(int c) { return c >= '0' && c <= '9'; }

static bool parse_number(parser *p, cn_json *v) {
    size_t start = p->pos;
    bool neg = false, frac = false;
    if (peek(p) == '-') neg = true, p->pos++;
    if (!is_digit(peek(p))) return fail(p, "bad number");
    if (peek(p) == '0') {
        p->pos++;
        if (is_digit(peek(p))) return fail(p, "leading zero in a number");
    } else {
        while (is_digit(peek(p)))
            p->pos++;
    }
    if (peek(p) == '.') {
        frac = true;
        p->pos++;
        if (!is_digit(peek(p))) return fail(p, "bad fraction in a number");
        while (is_digit(peek(p)))
            p->pos++;
    }
    if (peek(p) == 'e' || peek(p) == 'E') {
        frac = true;
        p->pos++;
        if (peek(p) == '+' || peek(p) == '-') p->pos++;
        if (!is_digit(peek(p))) return fail(p, "bad exponent in a number");
        while (is_digit(peek(p)))
            p->pos++;
    }
    size_t n = p->pos - start;
    char buf[64];
    if (n >= sizeof buf) {
        /* Long numbers: only the double value matters (an integer this long
         * overflows int64 anyway). */
        char *tmp = malloc(n + 1);
        if (!tmp) return fail(p, "out of memory");
        memcpy(tmp, p->s + start, n);
        tmp[n] = '\0';
        v->number = strtod(tmp, NULL);
        free(tmp);
        v->kind = CN_JSON_NUMBER;
        return true;
    }
    memcpy(buf, p->s + start, n);
    buf[n] = '\0';
    v->kind = CN_JSON_NUMBER;
    v->number = strtod(buf, NULL);
    if (!frac) {
        /* Exact integers: accumulate with an overflow check. */
        uint64_t acc = 0;
        bool ovf = false;
        for (size_t i = neg ? 1 : 0; i < n; i++) {
            uint64_t d = (uint64_t)(buf[i] - '0');
            if (acc > (UINT64_MAX - d) / 10) {
                ovf = true;
                break;
            }
            acc = acc * 10 + d;
        }
        if (!ovf && (neg ? acc <= (uint64_t)INT64_MAX + 1 : acc <= (uint64_t)INT64_MAX)) {
            v->is_int = true;
            v->integer =
                neg ? (acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc) : (int64_t)acc;
        }
    }
    return true;
}

static bool parse_value(parser *p, cn_json *v, int depth);

static bool grow(parser *p, cn_json *v, size_t *cap, bool object) {
    if (v->n < *cap) return true;
    size_t ncap = *cap ? *cap * 2 : 4;
    cn_json *ni = realloc(v->items, ncap * sizeof *ni);
    if (!ni) return fail(p, "out of memory");
    v->items = ni;
    if (object) {
        char **nk = realloc(v->keys, ncap * sizeof *nk);
        if (!nk) return fail(p, "out of memory");
        v->keys = nk;
        size_t *nl = realloc(v->key_lens, ncap * sizeof *nl);
        if (!nl) return fail(p, "out of memory");
        v->key_lens = nl;
    }
    *cap = ncap;
    return true;
}

static bool parse_container(parser *p, cn_json *v, int depth, bool object) {
    char close = object ? '}' : ']';
    v->kind = object ? CN_JSON_OBJECT : CN_JSON_ARRAY;
    size_t cap = 0;
    p->pos++;
    skip_ws(p);
    if (peek(p) == close) {
        p->pos++;
        return true;
    }
    for (;;) {
        skip_ws(p);
        if (!grow(p, v, &cap, object)) return false;
        cn_json *item = &v->items[v->n];
        memset(item, 0, sizeof *item);
        char *key = NULL;
        size_t klen = 0;
        if (object) {
            if (peek(p) != '"') return fail(p, "expected a string key");
            if (!parse_string(p, &key, &klen)) return false;
            skip_ws(p);
            if (peek(p) != ':') {
                free(key);
                return fail(p, "expected ':' after a key");
            }
            p->pos++;
        }
        if (!parse_value(p, item, depth + 1)) {
            value_clear(item);
            free(key);
            return false;
        }
        if (object) {
            v->keys[v->n] = key;
            v->key_lens[v->n] = klen;
        }
        v->n++;
        skip_ws(p);
        int c = peek(p);
        if (c == ',') {
            p->pos++;
            continue;
        }
        if (c == close) {
            p->pos++;
            return true;
        }
        if (c < 0) return fail(p, "unexpected end of input");
        return fail(p, "expected ',' or '%c'", close);
    }
}

static bool literal(parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return fail(p, "unexpected character");
    p->pos += n;
    return true;
}

static bool parse_value(parser *p, cn_json *v, int depth) {
    if (depth > CN_JSON_MAX_DEPTH) return fail(p, "nested more than %d deep", CN_JSON_MAX_DEPTH);
    skip_ws(p);
    int c = peek(p);
    switch (c) {
    case -1: return fail(p, "unexpected end of input");
    case '{': return parse_container(p, v, depth, true);
    case '[': return parse_container(p, v, depth, false);
    case '"': v->kind = CN_JSON_STRING; return parse_string(p, &v->str, &v->len);
    case 't':
        v->kind = CN_JSON_BOOL;
        v->boolean = true;
        return literal(p, "true");
    case 'f': v->kind = CN_JSON_BOOL; return literal(p, "false");
    case 'n': v->kind = CN_JSON_NULL; return literal(p, "null");
    default:
        if (c == '-' || is_digit(c)) return parse_number(p, v);
        return fail(p, "unexpected character '%c'", c >= 0x20 && c < 0x7f ? c : '?');
    }
}

cn_json *cn_json_parse(const char *s, size_t len, char *err, size_t errlen) {
    parser p = {s, len, 0, err, errlen, false};
    if (err && errlen) err[0] = '\0';
    cn_json *v = calloc(1, sizeof *v);
    if (!v) {
        fail(&p, "out of memory");
        return NULL;
    }
    if (!parse_value(&p, v, 0)) {
        cn_json_free(v);
        return NULL;
    }
    skip_ws(&p);
    if (p.pos != p.len) {
        fail(&p, "trailing characters after the value");
        cn_json_free(v);
        return NULL;
    }
    return v;
}

const cn_json *cn_json_get(const cn_json *obj, const char *key) {
    if (!obj || obj->kind != CN_JSON_OBJECT) return NULL;
    size_t kl = strlen(key);
    for (size_t i = 0; i < obj->n; i++)
        if (obj->key_lens[i] == kl && memcmp(obj->keys[i], key, kl) == 0) return &obj->items[i];
    return NULL;
}

int cn_json_append(char **buf, size_t *len, size_t *cap, const char *text, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t ncap = *cap ? *cap : 256;
        while (ncap < *len + n + 1)
            ncap *= 2;
        char *nb = realloc(*buf, ncap);
        if (!nb) return -2;
        *buf = nb;
        *cap = ncap;
    }
    memcpy(*buf + *len, text, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

int cn_json_append_string(char **buf, size_t *len, size_t *cap, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (!k) return -1;
        i += k;
    }
    if (cn_json_append(buf, len, cap, "\"", 1)) return -2;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            if (cn_json_append(buf, len, cap, esc, 2)) return -2;
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            if (cn_json_append(buf, len, cap, esc, 6)) return -2;
        } else if (cn_json_append(buf, len, cap, (const char *)&s[i], 1)) {
            return -2;
        }
    }
    return cn_json_append(buf, len, cap, "\"", 1);
}
