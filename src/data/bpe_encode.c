/* The tokenizer object: construction from merges, the vocabulary, encoding
 * and decoding.
 *
 * Encoding cuts the text into chunks (bpe_pretok.c) and turns each chunk
 * into tokens by applying the merges in the order they were learned, which
 * is what training did to the corpus. Applying them one by one would cost a
 * pass per merge; instead the chunk's adjacent pairs sit in a min-heap keyed
 * by (merge rank, position), so the next merge to apply is always on top:
 * the lowest rank present, leftmost first, which is the same result (a merge
 * can only create pairs with its new token, whose ranks are all higher), in
 * O(n log n) for a chunk of n bytes. Text repeats its words, so each call
 * keeps a cache from chunk bytes to tokens; most chunks are one lookup. */
#include "bpe.h"
#include "../backend/backend.h"

#include <stdlib.h>
#include <string.h>

/* Longer chunks (long runs of spaces, binary data) are encoded but not
 * cached: they rarely repeat, and would fill the cache. */
#define CACHE_MAX_LEN 256
/* A cache this full is emptied, so encoding an endless stream of distinct
 * words does not grow memory without bound. */
#define CACHE_MAX_ENTRIES (1u << 20)

static int32_t vocab_total(const cn_tokenizer *t) { return 256 + t->nmerges + t->nspecial; }

void cn_tokenizer_free(cn_tokenizer *tok) {
    if (!tok) return;
    free(tok->merges);
    for (int k = 0; k < tok->nspecial; k++)
        free(tok->special[k]);
    free(tok->special);
    free(tok->special_len);
    free(tok->off);
    free(tok->len);
    free(tok->bytes);
    if (tok->ranks) {
        cn_pairmap_free(tok->ranks);
        free(tok->ranks);
    }
    free(tok);
}

cn_tokenizer *cn_bpe_build(const int32_t *merges, int nmerges, char *const *special,
                           const size_t *special_len, int nspecial, const char *fn,
                           const char *where) {
    if (nmerges < 0 || nmerges > CN_BPE_MAX_MERGES)
        return cn_fail("%s: %s: %d merges (at most %d)", fn, where, nmerges, CN_BPE_MAX_MERGES);
    if (nspecial < 0 || nspecial > CN_BPE_MAX_SPECIAL)
        return cn_fail("%s: %s: %d special tokens (at most %d)", fn, where, nspecial,
                       CN_BPE_MAX_SPECIAL);
    cn_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return cn_fail("%s: out of memory", fn);
    int32_t V = 256 + nmerges + nspecial;
    t->merges = malloc(sizeof(int32_t) * 2 * (size_t)(nmerges ? nmerges : 1));
    t->special = calloc((size_t)nspecial + 1, sizeof *t->special);
    t->special_len = calloc((size_t)nspecial + 1, sizeof *t->special_len);
    t->off = malloc(sizeof(uint32_t) * (size_t)V);
    t->len = malloc(sizeof(uint32_t) * (size_t)V);
    t->ranks = calloc(1, sizeof *t->ranks);
    if (!t->merges || !t->special || !t->special_len || !t->off || !t->len || !t->ranks ||
        cn_pairmap_init(t->ranks, (size_t)nmerges) != CN_OK) {
        cn_tokenizer_free(t);
        return cn_fail("%s: out of memory", fn);
    }
    if (nmerges) memcpy(t->merges, merges, sizeof(int32_t) * 2 * (size_t)nmerges);
    t->nmerges = nmerges;
    /* The byte strings' total: checked before allocating, since a file can
     * make each merge double the length of the previous one. */
    uint64_t total = 256;
    for (int32_t i = 0; i < 256; i++) {
        t->off[i] = (uint32_t)i;
        t->len[i] = 1;
    }
    for (int i = 0; i < nmerges; i++) {
        int32_t a = merges[2 * i], b = merges[2 * i + 1];
        if (a < 0 || b < 0 || a >= 256 + i || b >= 256 + i) {
            cn_tokenizer_free(t);
            return cn_fail("%s: %s: merge %d joins tokens %d and %d, but only tokens 0 to %d "
                           "exist before it",
                           fn, where, i, a, b, 255 + i);
        }
        bool added;
        int32_t *slot = cn_pairmap_slot(t->ranks, cn_pair_key(a, b), &added);
        if (!slot) {
            cn_tokenizer_free(t);
            return cn_fail("%s: out of memory", fn);
        }
        if (!added) {
            int prev = *slot;
            cn_tokenizer_free(t);
            return cn_fail("%s: %s: merge %d joins tokens %d and %d, as merge %d already does", fn,
                           where, i, a, b, prev);
        }
        *slot = i;
        uint64_t l = (uint64_t)t->len[a] + t->len[b];
        if (l > (1u << 20) || total + l > (1u << 30)) {
            cn_tokenizer_free(t);
            return cn_fail("%s: %s: merge %d makes a token of %llu bytes (the tokens' bytes are "
                           "limited to 1 MiB each, 1 GiB in all)",
                           fn, where, i, (unsigned long long)l);
        }
        t->off[256 + i] = (uint32_t)total;
        t->len[256 + i] = (uint32_t)l;
        total += l;
    }
    for (int k = 0; k < nspecial; k++) {
        size_t l = special_len[k];
        if (l == 0 || l > CN_BPE_MAX_SPECIAL_LEN || memchr(special[k], 0, l)) {
            cn_tokenizer_free(t);
            return cn_fail("%s: %s: special token %d is empty, longer than %d bytes or holds a "
                           "NUL byte",
                           fn, where, k, CN_BPE_MAX_SPECIAL_LEN);
        }
        for (int q = 0; q < k; q++)
            if (special_len[q] == l && memcmp(special[q], special[k], l) == 0) {
                cn_tokenizer_free(t);
                return cn_fail("%s: %s: special token %d repeats special token %d (\"%.*s\")", fn,
                               where, k, q, (int)(l > 100 ? 100 : l), special[k]);
            }
        t->special[k] = malloc(l + 1);
        if (!t->special[k]) {
            cn_tokenizer_free(t);
            return cn_fail("%s: out of memory", fn);
        }
        memcpy(t->special[k], special[k], l);
        t->special[k][l] = 0;
        t->special_len[k] = l;
        t->nspecial = k + 1;
        t->off[256 + nmerges + k] = (uint32_t)total;
        t->len[256 + nmerges + k] = (uint32_t)l;
        total += l;
    }
    t->bytes = malloc((size_t)total);
    if (!t->bytes) {
        cn_tokenizer_free(t);
        return cn_fail("%s: out of memory", fn);
    }
    for (int i = 0; i < 256; i++)
        t->bytes[i] = (unsigned char)i;
    for (int i = 0; i < nmerges; i++) {
        int32_t a = merges[2 * i], b = merges[2 * i + 1];
        unsigned char *d = t->bytes + t->off[256 + i];
        memcpy(d, t->bytes + t->off[a], t->len[a]);
        memcpy(d + t->len[a], t->bytes + t->off[b], t->len[b]);
    }
    for (int k = 0; k < nspecial; k++)
        memcpy(t->bytes + t->off[256 + nmerges + k], t->special[k], t->special_len[k]);
    return t;
}

/* ---- the vocabulary ---- */

int cn_tokenizer_vocab_size(const cn_tokenizer *tok) { return tok ? vocab_total(tok) : CN_EINVAL; }

int cn_tokenizer_num_merges(const cn_tokenizer *tok) { return tok ? tok->nmerges : CN_EINVAL; }

int cn_tokenizer_merge(const cn_tokenizer *tok, int i, int32_t *left, int32_t *right) {
    if (!tok) return cn_failc(CN_EINVAL, "tokenizer_merge: tok is NULL");
    if (i < 0 || i >= tok->nmerges)
        return cn_failc(CN_EINVAL, "tokenizer_merge: merge %d out of range for %d merges", i,
                        tok->nmerges);
    if (left) *left = tok->merges[2 * i];
    if (right) *right = tok->merges[2 * i + 1];
    return 256 + i;
}

const char *cn_tokenizer_token(const cn_tokenizer *tok, int32_t id, size_t *len) {
    if (!tok) return cn_fail("tokenizer_token: tok is NULL");
    if (id < 0 || id >= vocab_total(tok))
        return cn_fail("tokenizer_token: id %d out of range for a vocabulary of %d", (int)id,
                       (int)vocab_total(tok));
    if (len) *len = tok->len[id];
    return (const char *)tok->bytes + tok->off[id];
}

int cn_tokenizer_num_special(const cn_tokenizer *tok) { return tok ? tok->nspecial : CN_EINVAL; }

int32_t cn_tokenizer_special_id(const cn_tokenizer *tok, const char *name) {
    if (!tok || !name) return cn_failc(CN_EINVAL, "tokenizer_special_id: tok or name is NULL");
    for (int k = 0; k < tok->nspecial; k++)
        if (strcmp(tok->special[k], name) == 0) return 256 + tok->nmerges + k;
    return cn_failc(CN_EINVAL, "tokenizer_special_id: no special token \"%.200s\" (the tokenizer "
                    "has %d)", name, tok->nspecial);
}

/* ---- encoding ---- */

typedef struct enc {
    const cn_tokenizer *tok;
    /* Per chunk: symbols, a doubly linked list over them, the pair heap. */
    int32_t *sym, *nxt, *prv;
    uint64_t *heap;
    size_t scap;
    /* The cache: chunk bytes -> (val: offset into cids, aux: count). */
    cn_strmap cache;
    int32_t *cids;
    size_t ncids, ccap;
    /* The result. */
    int32_t *out;
    size_t n, ocap;
} enc;

static int grow_i32(int32_t **p, size_t *cap, size_t need) {
    if (need <= *cap) return CN_OK;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    int32_t *q = realloc(*p, c * sizeof *q);
    if (!q) return CN_ENOMEM;
    *p = q;
    *cap = c;
    return CN_OK;
}

static int emit(enc *e, const int32_t *ids, size_t n) {
    if (grow_i32(&e->out, &e->ocap, e->n + n) != CN_OK) return CN_ENOMEM;
    memcpy(e->out + e->n, ids, n * sizeof *ids);
    e->n += n;
    return CN_OK;
}

static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], v = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && h[c + 1] < h[c]) c++;
        if (v <= h[c]) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = v;
    return top;
}

/* The pair (i, right neighbour) as a heap entry, if it is a merge. */
static void push_pair(enc *e, size_t *hn, int32_t i) {
    int32_t j = e->nxt[i];
    if (j < 0) return;
    int32_t r = cn_pairmap_get(e->tok->ranks, cn_pair_key(e->sym[i], e->sym[j]));
    if (r >= 0) heap_push(e->heap, hn, (uint64_t)r << 32 | (uint32_t)i);
}

/* The tokens of one chunk, appended to the result. */
static int encode_chunk(enc *e, const unsigned char *s, size_t n) {
    if (n == 1) {
        int32_t id = s[0];
        return emit(e, &id, 1);
    }
    uint64_t h = 0;
    if (n <= CACHE_MAX_LEN) {
        h = cn_bytes_hash(s, n);
        const cn_strmap_entry *c = cn_strmap_find(&e->cache, s, n, h);
        if (c) return emit(e, e->cids + c->val, c->aux);
    }
    if (n > INT32_MAX / 4) return CN_EINVAL;
    if (n > e->scap) {
        size_t c = e->scap ? e->scap : 64;
        while (c < n)
            c *= 2;
        free(e->sym);
        free(e->nxt);
        free(e->prv);
        free(e->heap);
        e->sym = malloc(c * sizeof *e->sym);
        e->nxt = malloc(c * sizeof *e->nxt);
        e->prv = malloc(c * sizeof *e->prv);
        e->heap = malloc(3 * c * sizeof *e->heap); /* n - 1 pairs, then 2 per merge */
        e->scap = e->sym && e->nxt && e->prv && e->heap ? c : 0;
        if (!e->scap) return CN_ENOMEM;
    }
    const int32_t *mg = e->tok->merges;
    for (size_t i = 0; i < n; i++) {
        e->sym[i] = s[i];
        e->nxt[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        e->prv[i] = (int32_t)i - 1;
    }
    size_t hn = 0;
    for (size_t i = 0; i + 1 < n; i++)
        push_pair(e, &hn, (int32_t)i);
    while (hn) {
        uint64_t top = heap_pop(e->heap, &hn);
        int32_t r = (int32_t)(top >> 32), i = (int32_t)(uint32_t)top;
        int32_t j = e->nxt[i];
        /* Entries go stale when a neighbour merges first: apply only one
         * that still names the pair at i. Node i is alive if it holds a
         * symbol (a right node, once merged, is marked -1). */
        if (e->sym[i] < 0 || j < 0 || mg[2 * r] != e->sym[i] || mg[2 * r + 1] != e->sym[j])
            continue;
        e->sym[i] = 256 + r;
        e->sym[j] = -1;
        e->nxt[i] = e->nxt[j];
        if (e->nxt[j] >= 0) e->prv[e->nxt[j]] = i;
        if (e->prv[i] >= 0) push_pair(e, &hn, e->prv[i]);
        push_pair(e, &hn, i);
    }
    /* Node 0 is never a right node, so the list starts there. */
    size_t start = e->n, m = 0;
    for (int32_t i = 0; i >= 0; i = e->nxt[i])
        e->sym[m++] = e->sym[i];
    if (emit(e, e->sym, m) != CN_OK) return CN_ENOMEM;
    if (n > CACHE_MAX_LEN) return CN_OK;
    if (e->cache.n >= CACHE_MAX_ENTRIES) {
        cn_strmap_free(&e->cache);
        e->ncids = 0;
        if (cn_strmap_init(&e->cache, 1024) != CN_OK) return CN_ENOMEM;
    }
    if (grow_i32(&e->cids, &e->ccap, e->ncids + m) != CN_OK) return CN_ENOMEM;
    cn_strmap_entry *c = cn_strmap_insert(&e->cache, s, n, h, NULL);
    if (!c) return CN_ENOMEM;
    c->val = (int64_t)e->ncids;
    c->aux = (uint32_t)m;
    memcpy(e->cids + e->ncids, e->out + start, m * sizeof *e->out);
    e->ncids += m;
    return CN_OK;
}

static int encode_plain(enc *e, const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t end = cn_bpe_chunk_end(s, n, i);
        int st = encode_chunk(e, s + i, end - i);
        if (st != CN_OK) return st;
        i = end;
    }
    return CN_OK;
}

static void enc_free(enc *e) {
    free(e->sym);
    free(e->nxt);
    free(e->prv);
    free(e->heap);
    cn_strmap_free(&e->cache);
    free(e->cids);
    free(e->out);
}

int cn_tokenizer_encode(const cn_tokenizer *tok, const char *text, size_t len, unsigned flags,
                        int32_t **ids, size_t *n) {
    static const char fn[] = "tokenizer_encode";
    if (!tok || !ids || !n) return cn_failc(CN_EINVAL, "%s: tok, ids or n is NULL", fn);
    if (!text && len) return cn_failc(CN_EINVAL, "%s: text is NULL", fn);
    if (flags & ~(unsigned)CN_TOKENIZE_SPECIAL)
        return cn_failc(CN_EINVAL, "%s: unknown flags 0x%x", fn, flags);
    *ids = NULL;
    *n = 0;
    enc e = {.tok = tok};
    int st = cn_strmap_init(&e.cache, 1024);
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (st == CN_OK && i < len) {
        /* Special tokens (when asked for) cut the text; the pieces between
         * them are plain text. */
        int which = -1;
        size_t p = flags & CN_TOKENIZE_SPECIAL
                       ? cn_bpe_find_special(s, len, i, tok->special, tok->special_len,
                                             tok->nspecial, &which)
                       : len;
        st = encode_plain(&e, s + i, p - i);
        if (st == CN_OK && p < len) {
            int32_t id = 256 + tok->nmerges + which;
            st = emit(&e, &id, 1);
            p += tok->special_len[which];
        }
        i = p;
    }
    if (st != CN_OK) {
        enc_free(&e);
        return cn_failc(st, "%s: out of memory encoding %zu bytes", fn, len);
    }
    *ids = e.out ? e.out : malloc(sizeof(int32_t)); /* never NULL on success */
    e.out = NULL;
    *n = e.n;
    enc_free(&e);
    if (!*ids) return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    return CN_OK;
}

cn_tensor *cn_tokenizer_encode_tensor(const cn_tokenizer *tok, const char *text, size_t len,
                                      unsigned flags) {
    int32_t *ids;
    size_t n;
    if (cn_tokenizer_encode(tok, text, len, flags, &ids, &n) != CN_OK) return NULL;
    int64_t shape[1] = {(int64_t)n};
    cn_tensor *t = cn_t_empty(CN_I64, 1, shape);
    if (!t) {
        free(ids);
        return NULL;
    }
    int64_t *d = cn_t_ptr(t);
    for (size_t i = 0; i < n; i++)
        d[i] = ids[i];
    free(ids);
    return cn_scope_add(t);
}

/* ---- decoding ---- */

int cn_tokenizer_decode(const cn_tokenizer *tok, const int32_t *ids, size_t n, char **text,
                        size_t *len) {
    static const char fn[] = "tokenizer_decode";
    if (!tok || !text || !len) return cn_failc(CN_EINVAL, "%s: tok, text or len is NULL", fn);
    if (!ids && n) return cn_failc(CN_EINVAL, "%s: ids is NULL", fn);
    *text = NULL;
    *len = 0;
    int32_t V = vocab_total(tok);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= V)
            return cn_failc(CN_EINVAL, "%s: ids[%zu] = %d is out of range for a vocabulary of %d",
                            fn, i, (int)ids[i], (int)V);
        total += tok->len[ids[i]];
    }
    char *out = malloc(total + 1);
    if (!out) return cn_failc(CN_ENOMEM, "%s: out of memory for %zu bytes", fn, total);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(out + o, tok->bytes + tok->off[ids[i]], tok->len[ids[i]]);
        o += tok->len[ids[i]];
    }
    out[o] = 0;
    *text = out;
    *len = o;
    return CN_OK;
}

int cn_tokenizer_decode_tensor(const cn_tokenizer *tok, const cn_tensor *ids, char **text,
                               size_t *len) {
    static const char fn[] = "tokenizer_decode_tensor";
    if (!ids) return CN_EINVAL; /* the error that made it NULL stands */
    if (!ids->storage) return cn_failc(CN_EINVAL, "%s: ids is symbolic (a static graph value)", fn);
    if (!cn_is_int_dtype((cn_dtype)ids->dtype)) {
        char b[128];
        return cn_failc(CN_EINVAL, "%s: ids %s has dtype %s; give an integer tensor", fn,
                        cn_shape_str(ids, b, sizeof b), cn_dtype_name((cn_dtype)ids->dtype));
    }
    int64_t n = cn_shape_numel(ids->ndim, ids->shape);
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int32_t *w = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!v || !w) {
        free(v);
        free(w);
        return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    }
    int st = cn_t_read(ids, CN_I64, v);
    for (int64_t i = 0; st >= 0 && i < n; i++) {
        if (v[i] < 0 || v[i] > INT32_MAX) {
            st = cn_failc(CN_EINVAL, "%s: element %lld = %lld is not a token id", fn, (long long)i,
                          (long long)v[i]);
            break;
        }
        w[i] = (int32_t)v[i];
    }
    free(v);
    if (st >= 0) st = cn_tokenizer_decode(tok, w, (size_t)n, text, len);
    free(w);
    return st < 0 ? st : CN_OK;
}
