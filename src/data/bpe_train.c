/* Training a byte-level BPE tokenizer.
 *
 * The corpus is cut into chunks (bpe_pretok.c, and at special tokens, which
 * are never learned from), and identical chunks are counted once with their
 * frequency: a 4 MB corpus has about a million chunks but a few tens of
 * thousands of distinct words. Every word starts as its bytes (ids 0-255).
 * Each step merges the most frequent adjacent pair of ids over the words,
 * weighted by their counts, into a new id; ties go to the smallest (left,
 * right) pair, so training is a pure function of the text and the options.
 * A pair occurring overlapped ("aaa" has two (a, a)) counts every position,
 * and a merge rewrites each word left to right; training stops at the
 * vocabulary size, or when no pair occurs min_frequency times.
 *
 * Recounting every pair for every merge would cost the corpus's size per
 * merge. Instead the counts are kept up to date: each pair knows the words
 * it occurs in (a list that may hold words it has since left, checked when
 * read), and a merge of (a, b) into z visits only those words, subtracts
 * the pairs that touched a merged position and adds those that touch z. A
 * merge only lowers the counts of pairs without z, and pairs with z are new,
 * so a max-heap with lazy updates finds the best pair: an entry whose count
 * is stale is pushed again with its current count when it reaches the top,
 * and an entry that is current at the top is the true maximum. */
#include "bpe.h"

#include <stdlib.h>
#include <string.h>

typedef struct occ {
    int32_t *w; /* words the pair occurs (or occurred) in, each listed once per appearance */
    uint32_t n, cap;
} occ;

typedef struct hentry {
    int64_t count;
    uint64_t key;
    int32_t pair;
} hentry;

typedef struct trainer {
    /* Words: symbols sym[woff[w], woff[w] + wlen[w]), count wcnt[w]. */
    int32_t nwords;
    size_t *woff;
    uint32_t *wlen;
    int64_t *wcnt;
    int32_t *sym;
    uint32_t maxlen;
    /* Pairs: index through the map; count, key, occurrence list. */
    cn_pairmap map;
    int64_t *pcount;
    uint64_t *pkey;
    occ *pocc;
    int32_t *plast;  /* the last word appended to the pair's list */
    int32_t *pstamp; /* the merge that last queued the pair for the heap */
    int32_t npairs, pcap;
    /* The max-heap. */
    hentry *heap;
    size_t hn, hcap;
    /* Pairs with the new id, to push after a merge. */
    int32_t *fresh;
    int32_t nfresh, freshcap;
    unsigned char *mark;
} trainer;

static bool better(const hentry *x, const hentry *y) {
    return x->count > y->count || (x->count == y->count && x->key < y->key);
}

static int heap_push(trainer *t, hentry v) {
    if (t->hn == t->hcap) {
        size_t c = t->hcap ? 2 * t->hcap : 1024;
        hentry *h = realloc(t->heap, c * sizeof *h);
        if (!h) return CN_ENOMEM;
        t->heap = h;
        t->hcap = c;
    }
    size_t i = t->hn++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!better(&v, &t->heap[p])) break;
        t->heap[i] = t->heap[p];
        i = p;
    }
    t->heap[i] = v;
    return CN_OK;
}

static hentry heap_pop(trainer *t) {
    hentry top = t->heap[0], v = t->heap[--t->hn];
    size_t i = 0, m = t->hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && better(&t->heap[c + 1], &t->heap[c])) c++;
        if (!better(&t->heap[c], &v)) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (m) t->heap[i] = v;
    return top;
}

/* The index of pair (a, b), created with count 0 if new; -1 when out of
 * memory. */
static int32_t pair_index(trainer *t, int32_t a, int32_t b) {
    uint64_t key = cn_pair_key(a, b);
    bool added;
    int32_t *slot = cn_pairmap_slot(&t->map, key, &added);
    if (!slot) return -1;
    if (!added) return *slot;
    if (t->npairs == t->pcap) {
        int32_t c = t->pcap ? 2 * t->pcap : 4096;
        int64_t *pc = realloc(t->pcount, sizeof *pc * (size_t)c);
        if (pc) t->pcount = pc;
        uint64_t *pk = realloc(t->pkey, sizeof *pk * (size_t)c);
        if (pk) t->pkey = pk;
        occ *po = realloc(t->pocc, sizeof *po * (size_t)c);
        if (po) t->pocc = po;
        int32_t *pl = realloc(t->plast, sizeof *pl * (size_t)c);
        if (pl) t->plast = pl;
        int32_t *ps = realloc(t->pstamp, sizeof *ps * (size_t)c);
        if (ps) t->pstamp = ps;
        if (!pc || !pk || !po || !pl || !ps) return -1;
        t->pcap = c;
    }
    /* The map's slot may have moved while the arrays grew: look it up again. */
    int32_t p = t->npairs++;
    *cn_pairmap_slot(&t->map, key, NULL) = p;
    t->pcount[p] = 0;
    t->pkey[p] = key;
    memset(&t->pocc[p], 0, sizeof t->pocc[p]);
    t->plast[p] = -1;
    t->pstamp[p] = -1;
    return p;
}

/* Word w occurs in pair p's list (once per run of appends from w). */
static int note_word(trainer *t, int32_t p, int32_t w) {
    if (t->plast[p] == w) return CN_OK;
    occ *o = &t->pocc[p];
    if (o->n == o->cap) {
        uint32_t c = o->cap ? 2 * o->cap : 4;
        int32_t *q = realloc(o->w, sizeof *q * c);
        if (!q) return CN_ENOMEM;
        o->w = q;
        o->cap = c;
    }
    o->w[o->n++] = w;
    t->plast[p] = w;
    return CN_OK;
}

static void trainer_free(trainer *t) {
    free(t->woff);
    free(t->wlen);
    free(t->wcnt);
    free(t->sym);
    cn_pairmap_free(&t->map);
    for (int32_t p = 0; p < t->npairs; p++)
        free(t->pocc[p].w);
    free(t->pcount);
    free(t->pkey);
    free(t->pocc);
    free(t->plast);
    free(t->pstamp);
    free(t->heap);
    free(t->fresh);
    free(t->mark);
}

/* Counts the distinct chunks of the text (the pieces between special
 * tokens) of two bytes or more: one byte has no pair to merge. */
static int count_words(const unsigned char *s, size_t n, char *const *special,
                       const size_t *special_len, int nspecial, cn_strmap *words) {
    size_t i = 0;
    while (i < n) {
        int which = -1;
        size_t p = cn_bpe_find_special(s, n, i, special, special_len, nspecial, &which);
        for (size_t c = i; c < p;) {
            size_t e = cn_bpe_chunk_end(s, p, c);
            if (e - c >= 2) {
                cn_strmap_entry *w = cn_strmap_insert(words, s + c, e - c,
                                                      cn_bytes_hash(s + c, e - c), NULL);
                if (!w) return CN_ENOMEM;
                w->val++;
            }
            c = e;
        }
        i = p < n ? p + special_len[which] : n;
    }
    return CN_OK;
}

/* The words as id sequences, and every pair's count and word list. */
static int setup(trainer *t, const cn_strmap *words) {
    if (words->n > INT32_MAX) return CN_EINVAL;
    t->nwords = (int32_t)words->n;
    size_t nw = words->n ? words->n : 1;
    t->woff = malloc(sizeof *t->woff * nw);
    t->wlen = malloc(sizeof *t->wlen * nw);
    t->wcnt = malloc(sizeof *t->wcnt * nw);
    t->sym = malloc(sizeof *t->sym * (words->arena_len ? words->arena_len : 1));
    if (!t->woff || !t->wlen || !t->wcnt || !t->sym) return CN_ENOMEM;
    if (cn_pairmap_init(&t->map, 1 << 16) != CN_OK) return CN_ENOMEM;
    int32_t w = 0;
    for (size_t k = 0; k < words->cap; k++) {
        const cn_strmap_entry *e = &words->e[k];
        if (!e->hash) continue;
        t->woff[w] = e->off;
        t->wlen[w] = e->len;
        t->wcnt[w] = e->val;
        if (e->len > t->maxlen) t->maxlen = e->len;
        for (uint32_t i = 0; i < e->len; i++)
            t->sym[e->off + i] = words->arena[e->off + i];
        w++;
    }
    for (w = 0; w < t->nwords; w++) {
        const int32_t *s = t->sym + t->woff[w];
        for (uint32_t i = 0; i + 1 < t->wlen[w]; i++) {
            int32_t p = pair_index(t, s[i], s[i + 1]);
            if (p < 0 || note_word(t, p, w) != CN_OK) return CN_ENOMEM;
            t->pcount[p] += t->wcnt[w];
        }
    }
    t->mark = calloc(t->maxlen ? t->maxlen : 1, 1);
    if (!t->mark) return CN_ENOMEM;
    for (int32_t p = 0; p < t->npairs; p++)
        if (heap_push(t, (hentry){t->pcount[p], t->pkey[p], p}) != CN_OK) return CN_ENOMEM;
    return CN_OK;
}

/* Merge (a, b) into z in word w, updating the pair counts; a no-op for a
 * word the pair has left. */
static int merge_word(trainer *t, int32_t w, int32_t a, int32_t b, int32_t z, int32_t stamp) {
    int32_t *s = t->sym + t->woff[w];
    uint32_t L = t->wlen[w];
    int64_t c = t->wcnt[w];
    unsigned char *mark = t->mark;
    bool any = false;
    for (uint32_t i = 0; i + 1 < L;) {
        if (s[i] == a && s[i + 1] == b) {
            mark[i] = mark[i + 1] = 1;
            any = true;
            i += 2;
        } else {
            i++;
        }
    }
    if (!any) return CN_OK;
    /* Pairs touching a merged position go; the others stay as they are. */
    for (uint32_t i = 0; i + 1 < L; i++)
        if (mark[i] | mark[i + 1])
            t->pcount[cn_pairmap_get(&t->map, cn_pair_key(s[i], s[i + 1]))] -= c;
    uint32_t j = 0;
    for (uint32_t i = 0; i < L;) {
        if (mark[i]) { /* the left of a merged pair */
            mark[i] = mark[i + 1] = 0;
            s[j++] = z;
            i += 2;
        } else {
            s[j++] = s[i++];
        }
    }
    L = t->wlen[w] = j;
    /* Pairs with z are all new: count them and queue them for the heap. */
    for (uint32_t i = 0; i + 1 < L; i++) {
        if (s[i] != z && s[i + 1] != z) continue;
        int32_t p = pair_index(t, s[i], s[i + 1]);
        if (p < 0 || note_word(t, p, w) != CN_OK) return CN_ENOMEM;
        t->pcount[p] += c;
        if (t->pstamp[p] != stamp) {
            t->pstamp[p] = stamp;
            if (t->nfresh == t->freshcap) {
                int32_t cap = t->freshcap ? 2 * t->freshcap : 1024;
                int32_t *f = realloc(t->fresh, sizeof *f * (size_t)cap);
                if (!f) return CN_ENOMEM;
                t->fresh = f;
                t->freshcap = cap;
            }
            t->fresh[t->nfresh++] = p;
        }
    }
    return CN_OK;
}

/* Learns up to want merges into *merges (2 ids each); returns how many, or
 * CN_ENOMEM. */
static int learn(trainer *t, int want, int64_t min_freq, int32_t *merges) {
    int m = 0;
    while (m < want && t->hn) {
        hentry top = heap_pop(t);
        int64_t cur = t->pcount[top.pair];
        if (cur != top.count) {
            if (cur > 0 && heap_push(t, (hentry){cur, top.key, top.pair}) != CN_OK)
                return CN_ENOMEM;
            continue;
        }
        if (cur < min_freq) break; /* every other pair is as rare or rarer */
        int32_t a = (int32_t)(top.key >> 32), b = (int32_t)(uint32_t)top.key, z = 256 + m;
        merges[2 * m] = a;
        merges[2 * m + 1] = b;
        /* The pair's word list is taken out before the words change:
         * merge_word appends only to lists of pairs with z, never to this
         * one, but may move the array of lists while adding pairs. A word
         * listed twice is a no-op the second time (the pair has left it). */
        occ o = t->pocc[top.pair];
        memset(&t->pocc[top.pair], 0, sizeof t->pocc[top.pair]);
        t->nfresh = 0;
        int st = CN_OK;
        int32_t prev = -1;
        for (uint32_t k = 0; k < o.n && st == CN_OK; k++) {
            if (o.w[k] == prev) continue;
            prev = o.w[k];
            st = merge_word(t, o.w[k], a, b, z, m);
        }
        free(o.w);
        for (int32_t k = 0; k < t->nfresh && st == CN_OK; k++) {
            int32_t p = t->fresh[k];
            st = heap_push(t, (hentry){t->pcount[p], t->pkey[p], p});
        }
        if (st != CN_OK) return st;
        m++;
    }
    return m;
}

static const char *const default_special[1] = {CN_EOT_TOKEN};

cn_tokenizer *cn_bpe_train(const char *text, size_t len, int vocab_size,
                           const cn_bpe_train_opts *opts) {
    static const char fn[] = "bpe_train";
    if (!text && len) return cn_fail("%s: text is NULL", fn);
    const char *const *special = default_special;
    int nspecial = 1;
    int64_t min_freq = 2;
    if (opts) {
        if (opts->special_tokens) {
            special = opts->special_tokens;
            nspecial = opts->n_special;
        }
        if (opts->min_frequency > 0) min_freq = opts->min_frequency;
    }
    if (nspecial < 0 || nspecial > CN_BPE_MAX_SPECIAL)
        return cn_fail("%s: n_special is %d; give 0 to %d", fn, nspecial, CN_BPE_MAX_SPECIAL);
    size_t *special_len = malloc(sizeof(size_t) * (size_t)(nspecial + 1));
    if (!special_len) return cn_fail("%s: out of memory", fn);
    for (int k = 0; k < nspecial; k++) {
        if (!special[k] || !special[k][0]) {
            free(special_len);
            return cn_fail("%s: special token %d is NULL or empty", fn, k);
        }
        special_len[k] = strlen(special[k]);
    }
    int want = vocab_size - 256 - nspecial;
    if (vocab_size < 256 + nspecial || want > CN_BPE_MAX_MERGES) {
        free(special_len);
        return cn_fail("%s: vocab_size %d: it counts the 256 bytes and the %d special tokens, so "
                       "give %d to %d",
                       fn, vocab_size, nspecial, 256 + nspecial,
                       256 + nspecial + CN_BPE_MAX_MERGES);
    }
    int32_t *merges = malloc(sizeof(int32_t) * 2 * (size_t)(want ? want : 1));
    trainer t = {0};
    cn_strmap words;
    int st = merges ? cn_strmap_init(&words, 1 << 14) : CN_ENOMEM;
    if (st == CN_OK) {
        st = count_words((const unsigned char *)text, len, (char *const *)special, special_len,
                         nspecial, &words);
        if (st == CN_OK) st = setup(&t, &words);
        cn_strmap_free(&words);
    }
    int m = st == CN_OK ? learn(&t, want, min_freq, merges) : st;
    trainer_free(&t);
    cn_tokenizer *tok = NULL;
    if (m < 0)
        cn_fail("%s: out of memory training on %zu bytes", fn, len);
    else
        tok = cn_bpe_build(merges, m, (char *const *)special, special_len, nspecial, fn,
                           "the options");
    free(merges);
    free(special_len);
    return tok;
}
