/* The byte-level BPE tokenizer's internals, shared by its files:
 *   bpe_map.c      the two hash tables (byte strings, pairs of ids)
 *   bpe_pretok.c   pre-tokenisation (where merges may not cross) and the
 *                  search for special tokens
 *   bpe_train.c    training: merges learned from pair counts
 *   bpe_encode.c   encode, decode, the vocabulary
 *   bpe_file.c     the text format: save, load, strings, checkpoints
 * docs/text.md describes the algorithm and the format. */
#ifndef CN_DATA_BPE_H
#define CN_DATA_BPE_H

#include "../core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The pre-tokeniser's name in files: a file written for another one would
 * encode differently, so loading checks it. */
#define CN_BPE_PRETOK_NAME "chutney-1"
/* More merges than this is not a tokenizer anyone trains; the bound keeps
 * ids, and a corrupt file's counts, far from int32 overflow. */
#define CN_BPE_MAX_MERGES (1 << 22)
#define CN_BPE_MAX_SPECIAL 4096
#define CN_BPE_MAX_SPECIAL_LEN 4096

struct cn_tokenizer {
    int nmerges;
    int32_t *merges;   /* 2 * nmerges: merge i joins (merges[2i], merges[2i+1]) into 256 + i */
    int nspecial;      /* special tokens: ids 256 + nmerges + k */
    char **special;    /* NUL-terminated (no NUL inside) */
    size_t *special_len;
    /* The bytes of every token: id i is bytes[off[i], off[i] + len[i]). */
    uint32_t *off, *len;
    unsigned char *bytes;
    /* (left, right) -> merge rank, for encoding. */
    struct cn_pairmap *ranks;
};

/* ---- hash tables (bpe_map.c) ---- */

/* Open addressing over uint64 keys ((left << 32) | right), values int32.
 * The all-ones key is the empty slot: ids are below 2^31. */
typedef struct cn_pairmap {
    uint64_t *keys;
    int32_t *vals;
    size_t cap, n; /* cap is a power of two */
} cn_pairmap;

static inline uint64_t cn_pair_key(int32_t a, int32_t b) {
    return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}

int cn_pairmap_init(cn_pairmap *m, size_t expect);
void cn_pairmap_free(cn_pairmap *m);
/* The value of key, or -1. */
int32_t cn_pairmap_get(const cn_pairmap *m, uint64_t key);
/* A pointer to key's value, inserted as -1 when absent (*added set); NULL
 * when out of memory. Valid until the next insertion. */
int32_t *cn_pairmap_slot(cn_pairmap *m, uint64_t key, bool *added);

/* Byte strings -> (int64 value, uint32 aux), the strings copied into an
 * arena. */
typedef struct cn_strmap_entry {
    uint64_t hash; /* 0: empty (hashes are forced non-zero) */
    size_t off;    /* into the arena */
    uint32_t len, aux;
    int64_t val;
} cn_strmap_entry;

typedef struct cn_strmap {
    cn_strmap_entry *e;
    size_t cap, n;
    unsigned char *arena;
    size_t arena_len, arena_cap;
} cn_strmap;

uint64_t cn_bytes_hash(const unsigned char *s, size_t n);
int cn_strmap_init(cn_strmap *m, size_t expect);
void cn_strmap_free(cn_strmap *m);
/* The entry of s, or NULL. */
cn_strmap_entry *cn_strmap_find(const cn_strmap *m, const unsigned char *s, size_t n, uint64_t h);
/* The entry of s, added (val 0, aux 0, *added set) when absent; NULL when
 * out of memory. Valid until the next insertion. */
cn_strmap_entry *cn_strmap_insert(cn_strmap *m, const unsigned char *s, size_t n, uint64_t h,
                                  bool *added);

/* ---- pre-tokenisation (bpe_pretok.c) ---- */

/* The end of the chunk of s[0, n) that starts at i < n: merges never cross
 * a chunk boundary. Rules in docs/text.md ("Pre-tokenisation"). */
size_t cn_bpe_chunk_end(const unsigned char *s, size_t n, size_t i);
/* The first position >= i where one of the special strings starts (the
 * longest one there is *which), or n if none does. */
size_t cn_bpe_find_special(const unsigned char *s, size_t n, size_t i, char *const *special,
                           const size_t *special_len, int nspecial, int *which);

/* ---- the tokenizer object (bpe_encode.c) ---- */

/* A tokenizer from its merges and special tokens (both copied): checks that
 * every merge joins existing tokens and none repeats, that special tokens
 * are non-empty and distinct; then builds the byte table and the rank map.
 * fn and where name the caller and the source in messages ("'x.bpe'"). */
cn_tokenizer *cn_bpe_build(const int32_t *merges, int nmerges, char *const *special,
                           const size_t *special_len, int nspecial, const char *fn,
                           const char *where);

#endif
