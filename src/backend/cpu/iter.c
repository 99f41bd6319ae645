#include "iter.h"

void cn_iter_init(cn_iter *it, cn_tensor *out, cn_tensor *const *in, int nin) {
    int nd = out->ndim, nops = nin + 1;
    /* Drop size-1 axes, then merge an axis into the next inner one when every
     * operand steps over it exactly as far as over the whole inner axis.
     * Read straight from the tensors, axis by axis: copying their shapes
     * and strides into local arrays first compiled to `rep movsq`, whose
     * start-up cost was half of this function on tiny tensors. */
    int m = 0;
    for (int d = 0; d < nd; d++) {
        const int64_t sh = out->shape[d];
        if (sh == 1) continue;
        int64_t s[CN_ITER_MAX_OPS];
        s[0] = out->strides[d];
        for (int k = 0; k < nin; k++) {
            const cn_tensor *t = in[k];
            int j = d - (nd - t->ndim);
            s[k + 1] = (j < 0 || t->shape[j] == 1) ? 0 : t->strides[j];
        }
        if (m > 0) {
            bool merge = true;
            for (int k = 0; k < nops; k++)
                if (it->strides[k][m - 1] != s[k] * sh) merge = false;
            if (merge) {
                it->shape[m - 1] *= sh;
                for (int k = 0; k < nops; k++) it->strides[k][m - 1] = s[k];
                continue;
            }
        }
        it->shape[m] = sh;
        for (int k = 0; k < nops; k++) it->strides[k][m] = s[k];
        m++;
    }
    if (m == 0) { /* a single element */
        it->shape[0] = 1;
        for (int k = 0; k < nops; k++) it->strides[k][0] = 0;
        m = 1;
    }
    it->ndim = m;
    it->nops = nops;
    it->numel = cn_shape_numel(nd, out->shape);
    it->base[0] = out->storage ? cn_t_ptr(out) : NULL;
    it->esize[0] = cn_dsize((cn_dtype)out->dtype);
    for (int k = 0; k < nin; k++) {
        it->base[k + 1] = cn_t_ptr(in[k]);
        it->esize[k + 1] = cn_dsize((cn_dtype)in[k]->dtype);
    }
}

void cn_iter_run_range(const cn_iter *it, int64_t begin, int64_t end, cn_row_fn fn, void *ctx) {
    if (begin >= end) return;
    int nd = it->ndim, nops = it->nops;
    if (nd == 1) { /* one row (every contiguous case): no multi-index to track */
        char *ptr[CN_ITER_MAX_OPS];
        int64_t row_str[CN_ITER_MAX_OPS];
        for (int k = 0; k < nops; k++) {
            row_str[k] = it->strides[k][0];
            ptr[k] = it->base[k] + begin * row_str[k] * (int64_t)it->esize[k];
        }
        fn(ctx, end - begin, ptr, row_str);
        return;
    }
    int64_t inner = it->shape[nd - 1];
    int64_t idx[CN_MAX_DIMS];
    /* Multi-index of `begin`. */
    int64_t rem = begin;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rem % it->shape[d];
        rem /= it->shape[d];
    }
    char *ptr[CN_ITER_MAX_OPS];
    int64_t row_str[CN_ITER_MAX_OPS];
    for (int k = 0; k < nops; k++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++) off += idx[d] * it->strides[k][d];
        ptr[k] = it->base[k] + off * (int64_t)it->esize[k];
        row_str[k] = it->strides[k][nd - 1];
    }
    int64_t pos = begin;
    while (pos < end) {
        int64_t n = inner - idx[nd - 1];
        if (n > end - pos) n = end - pos;
        fn(ctx, n, ptr, row_str);
        pos += n;
        if (pos >= end) break;
        /* Advance to the start of the next row. */
        for (int k = 0; k < nops; k++)
            ptr[k] += (int64_t)it->esize[k] * row_str[k] * n;
        idx[nd - 1] += n;
        for (int d = nd - 1; d > 0 && idx[d] == it->shape[d]; d--) {
            for (int k = 0; k < nops; k++)
                ptr[k] += (int64_t)it->esize[k] *
                          (it->strides[k][d - 1] - it->strides[k][d] * it->shape[d]);
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

typedef struct iter_job {
    const cn_iter *it;
    cn_row_fn fn;
    void *ctx;
} iter_job;

static void iter_chunk(void *p, int64_t b, int64_t e) {
    iter_job *j = p;
    cn_iter_run_range(j->it, b, e, j->fn, j->ctx);
}

void cn_iter_run(const cn_iter *it, cn_row_fn fn, void *ctx) {
    if (it->numel < 2 * CN_GRAIN_ELEMWISE) {
        cn_iter_run_range(it, 0, it->numel, fn, ctx);
        return;
    }
    iter_job j = {it, fn, ctx};
    cn_parallel_for(it->numel, CN_GRAIN_ELEMWISE, iter_chunk, &j);
}
