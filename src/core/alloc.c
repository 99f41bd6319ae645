/* Host memory: aligned blocks and the ref-counted storage that owns them. */
#include "core.h"

#include <stdlib.h>

void *cn_alloc(size_t nbytes) {
    void *p = NULL;
    /* Round up so SIMD loops may read a whole vector past a short tail. */
    size_t n = (nbytes + CN_ALIGN - 1) / CN_ALIGN * CN_ALIGN;
    if (n == 0) n = CN_ALIGN;
    if (posix_memalign(&p, CN_ALIGN, n) != 0) return NULL;
    return p;
}

void cn_free(void *p) { free(p); }

cn_storage *cn_storage_new(size_t nbytes) {
    cn_storage *s = malloc(sizeof *s);
    if (!s) return NULL;
    s->data = cn_alloc(nbytes);
    if (!s->data) {
        free(s);
        return NULL;
    }
    s->nbytes = nbytes;
    s->refcount = 1;
    s->device = 0;
    s->version = 0;
    s->free_fn = NULL;
    s->owned = true;
    return s;
}

void cn_storage_release(cn_storage *s) {
    if (!s || --s->refcount > 0) return;
    if (s->owned)
        cn_free(s->data);
    else if (s->free_fn)
        s->free_fn(s->data);
    free(s);
}
