/* Embedding: rows of the weight picked by integer indices (index_select,
 * whose gradient scatters back into the picked rows). */
#include "nn.h"

#include <inttypes.h>

typedef struct emb_mod {
    cn_module base;
    int64_t padding_idx; /* CN_NO_PADDING or a row */
} emb_mod;

static cn_tensor *emb_forward(cn_module *m, cn_tensor *x) {
    emb_mod *e = (emb_mod *)m;
    cn_tensor *w = cn_nn_p(m, 0);
    cn_dtype dt = (cn_dtype)x->dtype;
    if (dt != CN_I64 && dt != CN_I32 && dt != CN_U8)
        return cn_fail("Embedding: indices must be an integer tensor, not %s", cn_dtype_name(dt));
    if (x->ndim >= CN_MAX_DIMS)
        return cn_fail("Embedding: indices of rank %d would give rank %d (at most %d)", x->ndim,
                       x->ndim + 1, CN_MAX_DIMS);
    int64_t shape[CN_MAX_DIMS];
    int unknown = 0;
    for (int i = 0; i < x->ndim; i++) {
        shape[i] = x->shape[i];
        unknown += x->shape[i] < 0;
    }
    if (unknown > 1)
        return cn_fail("Embedding: indices with %d unknown sizes; at most one can be -1", unknown);
    shape[x->ndim] = w->shape[1];
    cn_tensor *flat = cn_reshape(x, 1, (int64_t[]){-1});
    cn_tensor *rows = cn_index_select(w, 0, flat);
    if (e->padding_idx != CN_NO_PADDING) {
        /* The padding row is read through a detached alias: its value is
         * used as is, but no gradient reaches it (PyTorch's rule). */
        cn_tensor *pad_row = cn_narrow(cn_detach(w), 0, e->padding_idx, 1);
        cn_tensor *mask = cn_unsqueeze(cn_ne(flat, cn_scalar(CN_I64, (double)e->padding_idx)), 1);
        rows = cn_where(mask, rows, pad_row);
    }
    return cn_reshape(rows, x->ndim + 1, shape);
}

static const cn_module_vtable emb_vt = {"Embedding", emb_forward, NULL};

cn_module *cn_nn_embedding(int64_t num, int64_t dim, int64_t padding_idx) {
    if (num < 0 || dim < 0)
        return cn_fail("embedding: num_embeddings %" PRId64 " and embedding_dim %" PRId64
                       " must be >= 0", num, dim);
    if (padding_idx != CN_NO_PADDING) {
        if (padding_idx < -num || padding_idx >= num)
            return cn_fail("embedding: padding_idx %" PRId64 " is out of range for %" PRId64
                           " embeddings", padding_idx, num);
        if (padding_idx < 0) padding_idx += num;
    }
    emb_mod *e = (emb_mod *)cn_module_new(&emb_vt, sizeof(emb_mod));
    if (!e) return NULL;
    e->padding_idx = padding_idx;
    cn_tensor *w = cn_nn_new_param(&e->base, "weight", 2, (int64_t[]){num, dim});
    int rc = w ? cn_init_normal_(w, 0, 1) : CN_EINVAL;
    if (rc == CN_OK && padding_idx != CN_NO_PADDING) {
        cn_scope_begin();
        rc = cn_init_zeros_(cn_narrow(w, 0, padding_idx, 1));
        cn_scope_end();
    }
    if (rc < 0) {
        cn_module_free(&e->base);
        return NULL;
    }
    return &e->base;
}
