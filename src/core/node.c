/* IR nodes: an op applied to inputs, shared by autograd and static graphs. */
#include "core.h"
#include "thread_state.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void (*cn_node_extra_free)(void *extra) = NULL;

/* Creation numbers need only be a topological order (each node above its
 * inputs' nodes), not a global count: a per-thread clock raised past the
 * inputs' numbers (a Lamport clock) gives that without the locked add of a
 * shared counter, which also made the CPU wait for the node's stores to
 * reach its cache. One thread's nodes still number in creation order. */
static _Thread_local uint64_t node_clock;

/* ---- the tape's arena ----
 * Recording makes one node per op, and backward reads them all again long
 * after, in reverse: from malloc (or a free list refilled from it) they lay
 * among the tensors and blocks made with them, and the walk waited on a
 * cache miss per node. So a thread carves its tape's nodes one after the
 * other from chunks of its own, each node on its own cache lines with the
 * fields the walk reads in the first, and only as long as it is: a node
 * without attributes takes 2 lines, not the 5 a 200-byte attribute block
 * makes (as a malloc'd node, the smaller one was slower: malloc placed it
 * among other blocks). The walk then reads memory the prefetchers follow.
 *
 * A node's place is never reused on its own: a chunk is reused (or freed)
 * once every node carved from it is freed, on whatever thread. Its `live`
 * count starts above any number of nodes a chunk can hold, drops by what
 * was not carved when its thread stops carving from it (full, thread exit,
 * cn_empty_cache) and by one per node freed, so it reaches 0 only then.
 * Frees are counted per thread and handed to the chunk in batches (a
 * thread frees a tape's nodes one after the other, mostly in one chunk):
 * one atomic subtraction per batch rather than a locked instruction per
 * node.
 *
 * Static graphs' nodes come from malloc: they live as long as their graph,
 * and would keep the chunks around them from being reused. Under
 * AddressSanitizer every node does, so a use after free is still caught. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CN_NODE_ASAN 1
#endif
#endif
#if !defined(CN_NODE_ASAN) && defined(__SANITIZE_ADDRESS__)
#define CN_NODE_ASAN 1
#endif
/* -DCN_NODE_ARENA=1 keeps the arena under AddressSanitizer, to check the
 * arena itself: a chunk's free space and freed nodes are poisoned. */
#ifndef CN_NODE_ARENA
#ifdef CN_NODE_ASAN
#define CN_NODE_ARENA 0
#else
#define CN_NODE_ARENA 1
#endif
#endif
#ifdef CN_NODE_ASAN
void __asan_poison_memory_region(void const volatile *addr, size_t size);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#define NODE_POISON(p, n) __asan_poison_memory_region((p), (n))
#define NODE_UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define NODE_POISON(p, n) ((void)(p), (void)(n))
#define NODE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

_Static_assert(offsetof(cn_node, extra) <= CN_ALIGN, "the walk's fields in a node's first line");

#define CHUNK_BYTES (64 * 1024)
/* A node, and its attributes when it has some, on whole cache lines. */
#define NODE_BYTES(attrs) \
    ((sizeof(cn_node) + ((attrs) ? sizeof(cn_attrs) : 0) + CN_ALIGN - 1) / CN_ALIGN * CN_ALIGN)
typedef struct node_chunk {
    int64_t live;            /* atomic */
    struct node_chunk *next; /* on a thread's spare list */
} node_chunk;
#define SLOTS_AT CN_ALIGN
/* live's start: more than a chunk can hold; what is not carved is given
 * back when the thread stops carving from it. */
#define LIVE_BIAS (INT64_C(1) << 40)
/* Emptied chunks a thread keeps for its next tape (16384 nodes with
 * attributes, as many as the free list of nodes it replaces held). */
#define SPARE_MAX (16384 / (int)((CHUNK_BYTES - SLOTS_AT) / NODE_BYTES(1)) + 1)

static const cn_attrs no_attrs;

static _Thread_local node_chunk *cur;  /* carving from it */
static _Thread_local uint32_t cur_off; /* where its next node goes */
static _Thread_local int64_t cur_carved;
static _Thread_local node_chunk *pend; /* frees not yet subtracted from pend->live */
static _Thread_local int64_t pend_n;
static _Thread_local node_chunk *spare;
static _Thread_local int spare_n;
static int64_t chunks_held; /* atomic: taken from malloc and not freed */

int64_t cn_node_arena_chunks(void) { return __atomic_load_n(&chunks_held, __ATOMIC_RELAXED); }

static void chunk_free(node_chunk *c) {
    __atomic_sub_fetch(&chunks_held, 1, __ATOMIC_RELAXED);
    NODE_UNPOISON(c, CHUNK_BYTES);
    free(c);
}

static void chunk_empty(node_chunk *c) {
    if (spare_n < SPARE_MAX) {
        cn_thread_state_keep();
        c->next = spare;
        spare = c;
        spare_n++;
    } else {
        chunk_free(c);
    }
}

static void chunk_sub(node_chunk *c, int64_t n) {
    if (n > 0 && __atomic_sub_fetch(&c->live, n, __ATOMIC_ACQ_REL) == 0) chunk_empty(c);
}

static void pend_flush(void) {
    node_chunk *c = pend;
    int64_t n = pend_n;
    pend = NULL;
    pend_n = 0;
    if (c) chunk_sub(c, n);
}

/* What was not carved is given up: live then counts the chunk's nodes. */
static void cur_retire(void) {
    node_chunk *c = cur;
    cur = NULL;
    if (c) chunk_sub(c, LIVE_BIAS - cur_carved);
}

static __attribute__((noinline)) cn_node *chunk_new_slot(size_t size) {
    cur_retire();
    node_chunk *c = spare;
    if (c) {
        spare = c->next;
        spare_n--;
    } else {
        void *p = NULL;
        if (posix_memalign(&p, CN_ALIGN, CHUNK_BYTES) != 0) return NULL;
        c = p;
        __atomic_add_fetch(&chunks_held, 1, __ATOMIC_RELAXED);
        cn_thread_state_keep();
    }
    __atomic_store_n(&c->live, LIVE_BIAS, __ATOMIC_RELAXED);
    NODE_POISON((char *)c + SLOTS_AT + size, CHUNK_BYTES - SLOTS_AT - size);
    NODE_UNPOISON((char *)c + SLOTS_AT, size);
    cur = c;
    cur_off = (uint32_t)(SLOTS_AT + size);
    cur_carved = 1;
    cn_node *n = (cn_node *)((char *)c + SLOTS_AT);
    n->chunk = c;
    return n;
}

static inline cn_node *node_struct(bool arena, bool attrs) {
    if (!CN_NODE_ARENA || !arena) {
        cn_node *n = malloc(sizeof *n + (attrs ? sizeof(cn_attrs) : 0));
        if (n) n->chunk = NULL;
        return n;
    }
    size_t size = NODE_BYTES(attrs);
    node_chunk *c = cur;
    if (CN_UNLIKELY(!c || cur_off + size > CHUNK_BYTES)) return chunk_new_slot(size);
    cn_node *n = (cn_node *)((char *)c + cur_off);
    NODE_UNPOISON(n, size);
    cur_off += (uint32_t)size;
    cur_carved++;
    n->chunk = c;
    return n;
}

static void node_struct_free(cn_node *n) {
    node_chunk *c = n->chunk;
    if (!c) {
        free(n);
        return;
    }
    NODE_POISON(n, NODE_BYTES(n->attrs != &no_attrs));
    if (c == pend) {
        pend_n++;
        return;
    }
    if (pend) pend_flush();
    else cn_thread_state_keep(); /* a thread that only frees: its batch is handed over at exit */
    pend = c;
    pend_n = 1;
}

void cn_node_struct_cache_flush(void) {
    cur_retire();
    pend_flush();
    while (spare) {
        node_chunk *c = spare;
        spare = c->next;
        chunk_free(c);
    }
    spare_n = 0;
}

static cn_node *node_new(int op, cn_tensor *const *in, int nin, const cn_attrs *a, bool arena) {
    bool has_attrs = a && memcmp(a, &no_attrs, sizeof *a) != 0;
    cn_node *n = node_struct(arena, has_attrs);
    if (!n) return NULL;
    if (has_attrs) { /* first: freeing the node reads it */
        cn_attrs *na = (cn_attrs *)(n + 1);
        *na = *a;
        n->attrs = na;
    } else {
        n->attrs = &no_attrs;
    }
    n->extra = NULL;
    n->freed = false;
    n->out_version = 0;
    if (nin <= 3) {
        n->in = n->in_inline;
        n->in_version = n->version_inline;
    } else {
        n->in = malloc(sizeof *n->in * (size_t)nin);
        n->in_version = malloc(sizeof *n->in_version * (size_t)nin);
        if (!n->in || !n->in_version) {
            free(n->in);
            free(n->in_version);
            node_struct_free(n);
            return NULL;
        }
    }
    n->refcount = 1;
    n->op = (uint16_t)op;
    n->nin = (uint16_t)nin;
    uint64_t seq = node_clock;
    for (int i = 0; i < nin; i++) {
        n->in[i] = cn_retain(in[i]);
        n->in_version[i] = in[i]->storage ? in[i]->storage->version : 0;
        if (in[i]->node && in[i]->node->seq > seq) seq = in[i]->node->seq;
    }
    n->seq = node_clock = seq + 1;
    n->writes_mark = __atomic_load_n((uint64_t *)&cn_inplace_writes, __ATOMIC_RELAXED);
    return n;
}

cn_node *cn_node_new(int op, cn_tensor *const *in, int nin, const cn_attrs *a) {
    return node_new(op, in, nin, a, true);
}

cn_node *cn_node_new_heap(int op, cn_tensor *const *in, int nin, const cn_attrs *a) {
    return node_new(op, in, nin, a, false);
}

void cn_node_release(cn_node *n) {
    if (!n || --n->refcount > 0) return;
    for (int i = 0; i < n->nin; i++) cn_release(n->in[i]);
    if (n->extra && cn_node_extra_free) cn_node_extra_free(n->extra);
    if (n->in != n->in_inline) {
        free(n->in);
        free(n->in_version);
    }
    node_struct_free(n);
}
