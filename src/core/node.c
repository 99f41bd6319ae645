/* IR nodes: an op applied to inputs, shared by autograd and static graphs. */
#include "core.h"
#include "thread_state.h"

#include <stdlib.h>
#include <string.h>

void (*cn_node_extra_free)(void *extra) = NULL;

/* Creation numbers need only be a topological order (each node above its
 * inputs' nodes), not a global count: a per-thread clock raised past the
 * inputs' numbers (a Lamport clock) gives that without the locked add of a
 * shared counter, which also made the CPU wait for the node's stores to
 * reach its cache. One thread's nodes still number in creation order. */
static _Thread_local uint64_t node_clock;

/* Recording makes one node per op: freed nodes are kept on a per-thread list
 * (like tensor structs), and up to 3 inputs live inside the node. */
static _Thread_local cn_node *free_nodes;
static _Thread_local int free_node_count;
#define CN_NODE_CACHE_MAX 16384

static cn_node *node_struct(void) {
    cn_node *n = free_nodes;
    if (n) {
        free_nodes = n->extra;
        free_node_count--;
        return n;
    }
    cn_thread_state_keep();
    return malloc(sizeof *n);
}

void cn_node_struct_cache_flush(void) {
    while (free_nodes) {
        cn_node *n = free_nodes;
        free_nodes = n->extra;
        free(n);
    }
    free_node_count = 0;
}

static void node_struct_free(cn_node *n) {
    if (free_node_count < CN_NODE_CACHE_MAX) {
        if (!free_nodes) cn_thread_state_keep(); /* a thread that only releases */
        n->extra = free_nodes; /* reuse the field as the list link */
        free_nodes = n;
        free_node_count++;
    } else {
        free(n);
    }
}

cn_node *cn_node_new(int op, cn_tensor *const *in, int nin, const cn_attrs *a) {
    cn_node *n = node_struct();
    if (!n) return NULL;
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
    if (a) n->attrs = *a;
    else memset(&n->attrs, 0, sizeof n->attrs);
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
