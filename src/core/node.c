/* IR nodes: an op applied to inputs, shared by autograd and static graphs. */
#include "core.h"

#include <stdlib.h>

void (*cn_node_extra_free)(void *extra) = NULL;

static uint64_t cn_node_counter;

cn_node *cn_node_new(int op, cn_tensor *const *in, int nin, const cn_attrs *a) {
    cn_node *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->in = malloc(sizeof *n->in * (size_t)(nin > 0 ? nin : 1));
    n->in_version = malloc(sizeof *n->in_version * (size_t)(nin > 0 ? nin : 1));
    if (!n->in || !n->in_version) {
        free(n->in);
        free(n->in_version);
        free(n);
        return NULL;
    }
    n->refcount = 1;
    n->op = (uint16_t)op;
    n->nin = (uint16_t)nin;
    if (a) n->attrs = *a;
    for (int i = 0; i < nin; i++) {
        n->in[i] = cn_retain(in[i]);
        n->in_version[i] = in[i]->storage ? in[i]->storage->version : 0;
    }
    n->seq = __atomic_add_fetch(&cn_node_counter, 1, __ATOMIC_RELAXED);
    return n;
}

void cn_node_release(cn_node *n) {
    if (!n || --n->refcount > 0) return;
    for (int i = 0; i < n->nin; i++) cn_release(n->in[i]);
    if (n->extra && cn_node_extra_free) cn_node_extra_free(n->extra);
    free(n->in);
    free(n->in_version);
    free(n);
}
