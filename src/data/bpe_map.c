/* The BPE tokenizer's two hash tables: pairs of token ids (merge ranks,
 * training's pair counts) and byte strings (training's word counts,
 * encoding's cache). Open addressing with linear probing at most half full:
 * every lookup is a few adjacent loads, and nothing is ever deleted, so no
 * tombstones are needed. */
#include "bpe.h"

#include <stdlib.h>
#include <string.h>

#define EMPTY_KEY UINT64_MAX

/* splitmix64's finaliser: pair keys are two small integers side by side,
 * which a plain modulo would cluster. */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t cap_for(size_t expect) {
    size_t cap = 16;
    while (cap < 2 * expect + 2)
        cap *= 2;
    return cap;
}

int cn_pairmap_init(cn_pairmap *m, size_t expect) {
    memset(m, 0, sizeof *m);
    m->cap = cap_for(expect);
    m->keys = malloc(m->cap * sizeof *m->keys);
    m->vals = malloc(m->cap * sizeof *m->vals);
    if (!m->keys || !m->vals) {
        cn_pairmap_free(m);
        return CN_ENOMEM;
    }
    memset(m->keys, 0xff, m->cap * sizeof *m->keys);
    return CN_OK;
}

void cn_pairmap_free(cn_pairmap *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

int32_t cn_pairmap_get(const cn_pairmap *m, uint64_t key) {
    size_t mask = m->cap - 1;
    for (size_t i = mix64(key) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == key) return m->vals[i];
        if (m->keys[i] == EMPTY_KEY) return -1;
    }
}

static int pairmap_grow(cn_pairmap *m) {
    cn_pairmap g;
    if (cn_pairmap_init(&g, m->cap) != CN_OK) return CN_ENOMEM; /* four times the slots */
    size_t mask = g.cap - 1;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == EMPTY_KEY) continue;
        size_t j = mix64(m->keys[i]) & mask;
        while (g.keys[j] != EMPTY_KEY)
            j = (j + 1) & mask;
        g.keys[j] = m->keys[i];
        g.vals[j] = m->vals[i];
    }
    g.n = m->n;
    cn_pairmap_free(m);
    *m = g;
    return CN_OK;
}

int32_t *cn_pairmap_slot(cn_pairmap *m, uint64_t key, bool *added) {
    if (2 * (m->n + 1) > m->cap && pairmap_grow(m) != CN_OK) return NULL;
    size_t mask = m->cap - 1;
    size_t i = mix64(key) & mask;
    while (m->keys[i] != key && m->keys[i] != EMPTY_KEY)
        i = (i + 1) & mask;
    if (added) *added = m->keys[i] == EMPTY_KEY;
    if (m->keys[i] == EMPTY_KEY) {
        m->keys[i] = key;
        m->vals[i] = -1;
        m->n++;
    }
    return &m->vals[i];
}

/* ---- byte strings ---- */

uint64_t cn_bytes_hash(const unsigned char *s, size_t n) {
    /* FNV-1a, then mixed so the low bits (the slot) depend on every byte;
     * never 0, which marks an empty slot. */
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    h = mix64(h ^ n);
    return h ? h : 1;
}

int cn_strmap_init(cn_strmap *m, size_t expect) {
    memset(m, 0, sizeof *m);
    m->cap = cap_for(expect);
    m->e = calloc(m->cap, sizeof *m->e);
    return m->e ? CN_OK : CN_ENOMEM;
}

void cn_strmap_free(cn_strmap *m) {
    free(m->e);
    free(m->arena);
    memset(m, 0, sizeof *m);
}

cn_strmap_entry *cn_strmap_find(const cn_strmap *m, const unsigned char *s, size_t n, uint64_t h) {
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        cn_strmap_entry *e = &m->e[i];
        if (!e->hash) return NULL;
        if (e->hash == h && e->len == n && memcmp(m->arena + e->off, s, n) == 0) return e;
    }
}

static int strmap_grow(cn_strmap *m) {
    size_t cap = m->cap * 2, mask = cap - 1;
    cn_strmap_entry *e = calloc(cap, sizeof *e);
    if (!e) return CN_ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->e[i].hash) continue;
        size_t j = m->e[i].hash & mask;
        while (e[j].hash)
            j = (j + 1) & mask;
        e[j] = m->e[i];
    }
    free(m->e);
    m->e = e;
    m->cap = cap;
    return CN_OK;
}

cn_strmap_entry *cn_strmap_insert(cn_strmap *m, const unsigned char *s, size_t n, uint64_t h,
                                  bool *added) {
    if (added) *added = false;
    cn_strmap_entry *f = cn_strmap_find(m, s, n, h);
    if (f) return f;
    if (n > UINT32_MAX) return NULL;
    if (2 * (m->n + 1) > m->cap && strmap_grow(m) != CN_OK) return NULL;
    if (m->arena_len + n > m->arena_cap) {
        size_t cap = m->arena_cap ? m->arena_cap : 4096;
        while (cap < m->arena_len + n)
            cap *= 2;
        unsigned char *a = realloc(m->arena, cap);
        if (!a) return NULL;
        m->arena = a;
        m->arena_cap = cap;
    }
    if (n) memcpy(m->arena + m->arena_len, s, n);
    size_t mask = m->cap - 1, i = h & mask;
    while (m->e[i].hash)
        i = (i + 1) & mask;
    cn_strmap_entry *e = &m->e[i];
    e->hash = h;
    e->off = m->arena_len;
    e->len = (uint32_t)n;
    e->aux = 0;
    e->val = 0;
    m->arena_len += n;
    m->n++;
    if (added) *added = true;
    return e;
}
