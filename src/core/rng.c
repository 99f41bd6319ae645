/* The global counter-based generator (Philox-4x32-10, Salmon et al. 2011).
 * A draw of n elements reserves n counters; element i of it depends only on
 * (seed, first counter + i), so any split of the work across threads gives
 * the same numbers. */
#include "core.h"

#include <math.h>

/* PyTorch's default seed, so a fresh process is reproducible. */
#define CN_DEFAULT_SEED UINT64_C(67280421310721)

static uint64_t rng_seed = CN_DEFAULT_SEED;
static uint64_t rng_offset = 0;

void cn_manual_seed(uint64_t seed) {
    rng_seed = seed;
    rng_offset = 0;
}

void cn_rng_get_state(uint64_t *seed, uint64_t *offset) {
    if (seed) *seed = rng_seed;
    if (offset) *offset = rng_offset;
}

void cn_rng_set_state(uint64_t seed, uint64_t offset) {
    rng_seed = seed;
    rng_offset = offset;
}

void cn_rng_reserve(uint64_t n, uint64_t *key, uint64_t *counter) {
    *key = rng_seed;
    *counter = rng_offset;
    rng_offset += n;
}

static inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

void cn_philox(uint64_t key, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = mulhilo(0xD2511F53u, c0, &hi0);
        uint32_t lo1 = mulhilo(0xCD9E8D57u, c2, &hi1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}
