/* Host memory: aligned blocks and the ref-counted storage that owns them.
 *
 * Blocks are cached. Eager code frees a result buffer of the same size as the
 * next op wants, thousands of times per second; malloc/free of small blocks
 * was half the cost of a tiny op, and every large block that glibc mmaps is
 * page-faulted in again on each training step. So freed blocks go to per-size
 * free lists (four size classes per power of two, at most 25% slack) and are
 * handed out again; the cache holds at most CN_ALLOC_CACHE_MB (default 1024)
 * megabytes, beyond which blocks go back to the system. cn_empty_cache()
 * returns everything. Under AddressSanitizer the cache is off, so the
 * sanitizer sees every use after free. */
#include "core.h"
#include "profiler.h"
#include "thread_state.h"

#include <pthread.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define CN_ALLOC_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CN_ALLOC_CACHE 0
#endif
#endif
#ifndef CN_ALLOC_CACHE
#define CN_ALLOC_CACHE 1
#endif

/* Each block starts with a header of HEADER bytes: its size class (so
 * cn_free needs no size), and room for the cn_storage that owns the block
 * (cn_storage_new puts it there: one allocation, and the struct sits next
 * to the data it points at, one cache miss fewer per tensor touched). */
#define HEADER (2 * CN_ALIGN)
#define STORAGE_AT 32 /* offset of the embedded cn_storage in the header */
typedef struct block_header {
    struct block_header *next; /* free-list link while cached */
    size_t size;               /* usable bytes after the header */
    int cls;                   /* size class, or -1 for uncached sizes */
} block_header;
_Static_assert(sizeof(block_header) <= STORAGE_AT, "block header fits before the storage");
_Static_assert(STORAGE_AT + sizeof(cn_storage) <= HEADER, "storage fits in the header");

#define NCLASSES 160 /* 64 B .. beyond 2^40: every size we can meet */

_Atomic uint64_t cn_inplace_writes;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static block_header *free_lists[NCLASSES];
static size_t cached_bytes, cache_limit;
static bool cache_limit_read;

/* Small blocks also have a per-thread cache (a magazine) in front of the
 * shared lists: a tiny eager op allocates and frees one of them, and taking
 * the shared lists' lock twice per op was a tenth of its cost. An empty
 * magazine is refilled with LOCAL_MAX / 2 blocks under one lock, a full
 * one gives half back the same way. Bounded (LOCAL_MAX blocks of each class
 * up to 4 KB: at most ~1 MB per thread), outside the CN_ALLOC_CACHE_MB
 * count; a thread's blocks go back to the system when it exits. */
#define LOCAL_CLASSES 25 /* classes 0..24: blocks of at most 4 KB */
#define LOCAL_MAX 64
static _Thread_local block_header *local_lists[LOCAL_CLASSES];
static _Thread_local int local_count[LOCAL_CLASSES];
static _Thread_local bool local_registered;
static pthread_key_t local_key;
static pthread_once_t local_key_once = PTHREAD_ONCE_INIT;

/* Statistics (cn_device_memory_stats for cpu:0). Counted per thread in
 * plain words, since a lock-prefixed add on every allocation would cost a
 * tiny eager op a tenth of its time; each thread's counters are listed once
 * in `stat_threads` and summed when asked (a block freed by another thread
 * than the one that allocated it makes one count go up and the other down:
 * the sum is right). A thread's counters outlive it: an exiting thread adds
 * them to `stat_retired` and gives its slot back. */
typedef struct alloc_counts {
    int64_t in_use, allocations, hits;
} alloc_counts;
#define STAT_SLOTS 256
static _Thread_local alloc_counts *my_counts;
static alloc_counts stat_slots[STAT_SLOTS];
static bool stat_used[STAT_SLOTS];
static int stat_hw; /* slots below this have been used: the profiler sums only those */
static alloc_counts stat_retired, stat_unslotted; /* under stat_lock */
static pthread_mutex_t stat_lock = PTHREAD_MUTEX_INITIALIZER;
/* Plain words updated with the __atomic builtins (clang refuses them on
 * _Atomic types). */
static int64_t reserved_bytes, peak_reserved;

static bool local_ok;
static void local_key_init(void);

static void count_unslotted(int64_t bytes, int hit);

/* A thread's first count: a slot of its own. */
static __attribute__((noinline)) alloc_counts *counts_register(void) {
    pthread_mutex_lock(&stat_lock);
    for (int i = 0; i < STAT_SLOTS && !my_counts; i++)
        if (!stat_used[i]) {
            stat_used[i] = true;
            memset(&stat_slots[i], 0, sizeof stat_slots[i]);
            my_counts = &stat_slots[i];
            if (i >= stat_hw) stat_hw = i + 1;
        }
    pthread_mutex_unlock(&stat_lock);
    /* The magazines' key: its destructor gives the slot back at thread exit. */
    pthread_once(&local_key_once, local_key_init);
    if (local_ok) pthread_setspecific(local_key, (void *)1);
    return my_counts;
}

static inline __attribute__((always_inline)) void count(int64_t bytes, int hit) {
    alloc_counts *c = CN_LIKELY(my_counts != NULL) ? my_counts : counts_register();
    if (CN_LIKELY(c != NULL)) {
        __atomic_store_n(&c->in_use, c->in_use + bytes, __ATOMIC_RELAXED);
        if (bytes > 0) {
            __atomic_store_n(&c->allocations, c->allocations + 1, __ATOMIC_RELAXED);
            __atomic_store_n(&c->hits, c->hits + hit, __ATOMIC_RELAXED);
        }
        return;
    }
    count_unslotted(bytes, hit);
}

static void count_unslotted(int64_t bytes, int hit) {
    pthread_mutex_lock(&stat_lock); /* more threads than slots */
    stat_unslotted.in_use += bytes;
    if (bytes > 0) stat_unslotted.allocations++, stat_unslotted.hits += hit;
    pthread_mutex_unlock(&stat_lock);
}

static void counts_retire(void) {
    if (!my_counts) return;
    pthread_mutex_lock(&stat_lock);
    stat_retired.in_use += my_counts->in_use;
    stat_retired.allocations += my_counts->allocations;
    stat_retired.hits += my_counts->hits;
    stat_used[my_counts - stat_slots] = false;
    pthread_mutex_unlock(&stat_lock);
    my_counts = NULL;
}

static void reserve(int64_t bytes) {
    int64_t now = __atomic_add_fetch(&reserved_bytes, bytes, __ATOMIC_RELAXED);
    int64_t peak = __atomic_load_n(&peak_reserved, __ATOMIC_RELAXED);
    while (now > peak &&
           !__atomic_compare_exchange_n(&peak_reserved, &peak, now, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
}

static void system_free(block_header *h) {
    __atomic_sub_fetch(&reserved_bytes, (int64_t)h->size, __ATOMIC_RELAXED);
    free(h);
}

/* Hands the calling thread's cached blocks back to the system. */
static void local_flush(void) {
    for (int c = 0; c < LOCAL_CLASSES; c++) {
        while (local_lists[c]) {
            block_header *next = local_lists[c]->next;
            system_free(local_lists[c]);
            local_lists[c] = next;
        }
        local_count[c] = 0;
    }
}
/* Runs when a thread that cached blocks exits (its TLS is still valid). */
static void local_exit(void *unused) {
    (void)unused;
    local_flush();
    counts_retire();
}
static size_t read_cache_limit(void);
/* Off with CN_ALLOC_CACHE_MB=0 (no caching at all), or without the key. */
static void local_key_init(void) {
    local_ok = read_cache_limit() > 0 && pthread_key_create(&local_key, local_exit) == 0;
}

/* Size class of n bytes (n >= 1): classes 0..3 are 64, 80, 96, 112 bytes and
 * so on up: four steps per power of two. */
static int size_class(size_t n, size_t *rounded) {
    if (n <= 64) {
        *rounded = 64;
        return 0;
    }
    int p = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^p < n <= 2^(p+1) */
    size_t base = (size_t)1 << p, step = base / 4;
    size_t k = (n - base + step - 1) / step; /* 1..4 */
    *rounded = base + k * step;
    /* 2^6 = 64 is class 0; 2^p + k*step is class 4*(p-6) + k. */
    return 4 * (p - 6) + (int)k;
}

static size_t read_cache_limit(void) {
    const char *s = getenv("CN_ALLOC_CACHE_MB");
    long mb = 1024;
    if (s && *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (*end == '\0' && v >= 0) mb = v;
    }
    return (size_t)mb << 20;
}

static void *system_block(size_t size, int cls) {
    void *p = NULL;
    if (posix_memalign(&p, CN_ALIGN, size + HEADER) != 0) return NULL;
    reserve((int64_t)size);
    count((int64_t)size, 0);
    block_header *h = p;
    h->size = size;
    h->cls = cls;
    h->next = NULL;
    return (char *)p + HEADER;
}

void *cn_alloc(size_t nbytes) {
    /* Round up so SIMD loops may read a whole vector past a short tail. */
    size_t n = (nbytes + CN_ALIGN - 1) / CN_ALIGN * CN_ALIGN;
    if (n == 0) n = CN_ALIGN;
    if (n < nbytes) return NULL; /* overflow */
    if (!CN_ALLOC_CACHE) return system_block(n, -1);
    size_t rounded;
    int cls = size_class(n, &rounded);
    if (cls >= NCLASSES) return system_block(n, -1);
    if (cls < LOCAL_CLASSES) {
        if (local_count[cls] == 0 && local_registered) { /* refill half the magazine at once */
            pthread_mutex_lock(&cache_lock);
            while (local_count[cls] < LOCAL_MAX / 2 && free_lists[cls]) {
                block_header *h = free_lists[cls];
                free_lists[cls] = h->next;
                cached_bytes -= h->size;
                h->next = local_lists[cls];
                local_lists[cls] = h;
                local_count[cls]++;
            }
            pthread_mutex_unlock(&cache_lock);
        }
        if (local_count[cls] > 0) {
            block_header *h = local_lists[cls];
            local_lists[cls] = h->next;
            local_count[cls]--;
            count((int64_t)h->size, 1);
            return (char *)h + HEADER;
        }
    }
    pthread_mutex_lock(&cache_lock);
    block_header *h = free_lists[cls];
    if (h) {
        free_lists[cls] = h->next;
        cached_bytes -= h->size;
    }
    pthread_mutex_unlock(&cache_lock);
    if (h) {
        count((int64_t)h->size, 1);
        return (char *)h + HEADER;
    }
    return system_block(rounded, cls);
}

/* Moves n blocks of class c from this thread's cache to the shared lists
 * (or to the system, beyond the cache limit) under one lock. */
static void local_spill(int c, int n) {
    block_header *spill = NULL;
    pthread_mutex_lock(&cache_lock);
    if (!cache_limit_read) {
        cache_limit = read_cache_limit();
        cache_limit_read = true;
    }
    for (int i = 0; i < n && local_lists[c]; i++) {
        block_header *h = local_lists[c];
        local_lists[c] = h->next;
        local_count[c]--;
        if (cached_bytes + h->size <= cache_limit) {
            h->next = free_lists[c];
            free_lists[c] = h;
            cached_bytes += h->size;
        } else {
            h->next = spill;
            spill = h;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    while (spill) {
        block_header *next = spill->next;
        system_free(spill);
        spill = next;
    }
}

void cn_free(void *p) {
    if (!p) return;
    block_header *h = (block_header *)((char *)p - HEADER);
    count(-(int64_t)h->size, 0);
    if (h->cls >= 0 && h->cls < LOCAL_CLASSES) {
        int c = h->cls;
        if (!local_registered) {
            pthread_once(&local_key_once, local_key_init);
            /* non-NULL value: the destructor runs at thread exit */
            local_registered = local_ok && pthread_setspecific(local_key, (void *)1) == 0;
        }
        if (local_registered) {
            if (local_count[c] == LOCAL_MAX) /* full: half of it to the shared lists */
                local_spill(c, LOCAL_MAX / 2);
            h->next = local_lists[c];
            local_lists[c] = h;
            local_count[c]++;
            return;
        }
    }
    if (h->cls >= 0) {
        pthread_mutex_lock(&cache_lock);
        if (!cache_limit_read) {
            cache_limit = read_cache_limit();
            cache_limit_read = true;
        }
        if (cached_bytes + h->size <= cache_limit) {
            h->next = free_lists[h->cls];
            free_lists[h->cls] = h;
            cached_bytes += h->size;
            h = NULL;
        }
        pthread_mutex_unlock(&cache_lock);
        if (!h) return;
    }
    system_free(h);
}

void cn_cpu_memory_stats(cn_memory_stats *st) {
    alloc_counts sum;
    pthread_mutex_lock(&stat_lock);
    sum = stat_retired;
    sum.in_use += stat_unslotted.in_use;
    sum.allocations += stat_unslotted.allocations;
    sum.hits += stat_unslotted.hits;
    for (int i = 0; i < STAT_SLOTS; i++)
        if (stat_used[i]) {
            sum.in_use += __atomic_load_n(&stat_slots[i].in_use, __ATOMIC_RELAXED);
            sum.allocations += __atomic_load_n(&stat_slots[i].allocations, __ATOMIC_RELAXED);
            sum.hits += __atomic_load_n(&stat_slots[i].hits, __ATOMIC_RELAXED);
        }
    pthread_mutex_unlock(&stat_lock);
    pthread_mutex_lock(&cache_lock);
    size_t cached = cached_bytes;
    pthread_mutex_unlock(&cache_lock);
    st->allocated_bytes = sum.in_use > 0 ? (uint64_t)sum.in_use : 0;
    /* The CPU's peak is of the bytes taken from the system (in tensors or
     * cached): the per-thread counts cannot give an exact peak cheaply. */
    st->peak_allocated_bytes = (uint64_t)__atomic_load_n(&peak_reserved, __ATOMIC_RELAXED);
    st->cached_bytes = cached;
    st->allocations = (uint64_t)sum.allocations;
    st->cache_hits = (uint64_t)sum.hits;
}

int64_t cn_cpu_bytes_in_use(void) {
    /* The profiler samples this after every event: the slots ever used,
     * not all 256, and not the cache's lock. */
    pthread_mutex_lock(&stat_lock);
    int64_t sum = stat_retired.in_use + stat_unslotted.in_use;
    for (int i = 0; i < stat_hw; i++)
        if (stat_used[i]) sum += __atomic_load_n(&stat_slots[i].in_use, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&stat_lock);
    return sum > 0 ? sum : 0;
}

size_t cn_empty_cache(void) {
    local_flush(); /* other threads' small caches stay theirs */
    cn_t_struct_cache_flush();
    cn_node_struct_cache_flush();
    pthread_mutex_lock(&cache_lock);
    block_header *all[NCLASSES];
    for (int c = 0; c < NCLASSES; c++) {
        all[c] = free_lists[c];
        free_lists[c] = NULL;
    }
    size_t freed = cached_bytes;
    cached_bytes = 0;
    pthread_mutex_unlock(&cache_lock);
    for (int c = 0; c < NCLASSES; c++)
        while (all[c]) {
            block_header *next = all[c]->next;
            system_free(all[c]);
            all[c] = next;
        }
    return freed;
}

cn_storage *cn_storage_new(size_t nbytes) {
    void *data = cn_alloc(nbytes);
    if (!data) return NULL;
    return cn_storage_adopt(data, nbytes);
}

cn_storage *cn_storage_adopt(void *data, size_t nbytes) {
    cn_storage *s = (cn_storage *)((char *)data - HEADER + STORAGE_AT);
    s->data = data;
    s->nbytes = nbytes;
    s->refcount = 1;
    s->device_kind = CN_DEVICE_CPU;
    s->device_index = 0;
    s->device_free = NULL;
    s->device_ctx = NULL;
    s->version = 0;
    s->free_fn = NULL;
    s->owned = true;
    s->embedded = true;
    return s;
}

void cn_storage_release(cn_storage *s) {
    /* Atomic: a program runs independent steps on several threads, and
     * views they make share the storage of the planned arena. */
    if (!s) return;
    /* A count of 1 is ours alone (no other holder exists to change it), so
     * the locked decrement, a third of releasing a tiny tensor, is skipped. */
    if (__atomic_load_n(&s->refcount, __ATOMIC_ACQUIRE) != 1 &&
        __atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    if (s->device_free) { /* another device's: its backend frees it and the struct */
        s->device_free(s);
        return;
    }
    if (s->embedded) { /* the struct lives in the block's header */
        cn_free(s->data);
        return;
    }
    if (s->owned)
        cn_free(s->data);
    else if (s->free_fn)
        s->free_fn(s->data);
    free(s);
}
