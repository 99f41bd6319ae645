/* A small JSON reader for file headers (safetensors). It reads untrusted
 * bytes: every access is bounds-checked, nesting is limited, and any
 * malformed input gives a message with the byte offset, never a crash. */
#ifndef CN_IO_JSON_H
#define CN_IO_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum cn_json_kind {
    CN_JSON_NULL,
    CN_JSON_BOOL,
    CN_JSON_NUMBER,
    CN_JSON_STRING,
    CN_JSON_ARRAY,
    CN_JSON_OBJECT
} cn_json_kind;

typedef struct cn_json {
    cn_json_kind kind;
    bool boolean;
    /* Numbers: the value as a double; integers written without fraction or
     * exponent that fit in int64 also exactly in `integer` (is_int). */
    double number;
    bool is_int;
    int64_t integer;
    /* Strings (decoded to UTF-8, NUL-terminated; len excludes the NUL and
     * counts any embedded NUL from \u0000). */
    char *str;
    size_t len;
    /* Arrays and objects: n items; objects also have keys (decoded like
     * strings, key_lens their lengths), in file order. */
    size_t n;
    struct cn_json *items;
    char **keys;
    size_t *key_lens;
} cn_json;

#define CN_JSON_MAX_DEPTH 64

/* Parses exactly one value from s[0..len) (surrounding whitespace allowed).
 * Returns NULL with a message in err on malformed input or out of memory. */
cn_json *cn_json_parse(const char *s, size_t len, char *err, size_t errlen);
void cn_json_free(cn_json *v);
/* The member named key of an object (the first one), or NULL. */
const cn_json *cn_json_get(const cn_json *obj, const char *key);

/* Appends s (NUL-terminated) as a quoted JSON string to the growing buffer
 * *buf (length *len, capacity *cap, kept NUL-terminated). Returns 0, -1 if s
 * is not valid UTF-8 (a reader would refuse the result), -2 out of memory. */
int cn_json_append_string(char **buf, size_t *len, size_t *cap, const char *s);
/* Appends raw text the same way. Returns 0 or -2. */
int cn_json_append(char **buf, size_t *len, size_t *cap, const char *text, size_t n);

#endif
