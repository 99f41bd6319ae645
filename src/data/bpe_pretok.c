/* Pre-tokenisation: the text is cut into chunks before BPE, and merges never
 * cross a chunk boundary. Without it, the most frequent pairs of a corpus
 * are things like "e " and ". T", and the vocabulary fills with fragments
 * that straddle words; with it, tokens are words, pieces of words, numbers,
 * punctuation runs and whitespace runs, and a word's tokens do not depend on
 * its neighbours (which is also what lets encoding cache words).
 *
 * The rules follow GPT-2's regular expression in spirit, on bytes, without
 * Unicode tables (docs/text.md lists the differences):
 *   1. an apostrophe contraction: 's 't 'm 'd 're 've 'll (ASCII, lower case)
 *   2. an optional single space, then a run of letters (ASCII letters and
 *      every byte >= 0x80, so UTF-8 words in any script stay whole)
 *   3. an optional single space, then a run of ASCII digits
 *   4. an optional single space, then a run of other non-space bytes
 *   5. a run of whitespace (space, \t, \n, \v, \f, \r); when it is followed
 *      by a non-space byte and ends with a space, that last space is left to
 *      prefix what follows (so " word" is the same chunk mid-line as after
 *      an indent). */
#include "bpe.h"

#include <string.h>

enum { C_SPACE, C_LETTER, C_DIGIT, C_OTHER };

/* The classes of the rules above. */
static inline int byte_class(unsigned char c) {
    if (c == ' ' || (c >= '\t' && c <= '\r')) return C_SPACE;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return C_LETTER;
    if (c >= 0x80) return C_LETTER;
    if (c >= '0' && c <= '9') return C_DIGIT;
    return C_OTHER;
}

size_t cn_bpe_chunk_end(const unsigned char *s, size_t n, size_t i) {
    unsigned char c = s[i];
    if (c == '\'' && i + 1 < n) {
        unsigned char d = s[i + 1];
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
        if (i + 2 < n) {
            unsigned char e = s[i + 2];
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l'))
                return i + 3;
        }
    }
    size_t j = i;
    if (c == ' ' && i + 1 < n && byte_class(s[i + 1]) != C_SPACE) j = i + 1;
    int k = byte_class(s[j]);
    if (k != C_SPACE) {
        size_t e = j + 1;
        while (e < n && byte_class(s[e]) == k)
            e++;
        return e;
    }
    size_t e = i + 1;
    while (e < n && byte_class(s[e]) == C_SPACE)
        e++;
    if (e < n && e - i > 1 && s[e - 1] == ' ') return e - 1;
    return e;
}

size_t cn_bpe_find_special(const unsigned char *s, size_t n, size_t i, char *const *special,
                           const size_t *special_len, int nspecial, int *which) {
    if (nspecial <= 0) return n;
    /* The first bytes of the special tokens: most positions are rejected by
     * one table lookup. */
    bool first[256] = {false};
    for (int k = 0; k < nspecial; k++)
        first[(unsigned char)special[k][0]] = true;
    for (size_t p = i; p < n; p++) {
        if (!first[s[p]]) continue;
        int best = -1;
        for (int k = 0; k < nspecial; k++) {
            size_t l = special_len[k];
            if (l <= n - p && memcmp(s + p, special[k], l) == 0 &&
                (best < 0 || l > special_len[best]))
                best = k;
        }
        if (best >= 0) {
            *which = best;
            return p;
        }
    }
    return n;
}
