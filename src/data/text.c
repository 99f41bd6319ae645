/* Token streams for language models: a train/validation split and
 * fixed-length (input, target) windows, fed through cn_loader.
 *
 * Window i of length T holds tokens [o + iT, o + iT + T) as input and the
 * same shifted by one as target, for offset o. Both are views of the token
 * tensor: with a step of T between windows, [W, T] with strides (T, 1) is a
 * plain reshape of a contiguous range, so cn_loader (which wants contiguous
 * datasets) takes them without copying anything, and its seeded per-epoch
 * permutation, batching, prefetching and shards all apply unchanged. The
 * two views overlap in all but one token each; no window overlaps another,
 * so an epoch shows every token once (up to T + 1 at the end are left
 * over; a different offset per run or epoch moves which). */
#include "../backend/backend.h"

#include <math.h>

/* tokens as a 1-D integer tensor with data, or an error naming fn. */
static int check_tokens(const char *fn, const cn_tensor *tokens) {
    if (!tokens) return CN_EINVAL; /* the error that made it NULL stands */
    char b[128];
    if (!tokens->storage)
        return cn_failc(CN_EINVAL, "%s: tokens is symbolic (a static graph value)", fn);
    if (tokens->ndim != 1 || !cn_is_int_dtype((cn_dtype)tokens->dtype))
        return cn_failc(CN_EINVAL, "%s: tokens %s %s; give a 1-D integer tensor (i64 or i32)", fn,
                        cn_shape_str(tokens, b, sizeof b), cn_dtype_name((cn_dtype)tokens->dtype));
    return CN_OK;
}

/* A view of tokens: ndim 1 or 2, starting `start` tokens in. */
static cn_tensor *view(const cn_tensor *tokens, int64_t start, int ndim, const int64_t *shape) {
    cn_tensor *v = cn_t_alias(tokens);
    if (!v) return NULL;
    int64_t s = tokens->strides[0];
    v->offset = tokens->offset + start * s;
    v->ndim = (int8_t)ndim;
    v->flags |= CN_TF_LEAF;
    if (ndim == 1) {
        v->shape[0] = shape[0];
        v->strides[0] = s;
    } else {
        v->shape[0] = shape[0];
        v->shape[1] = shape[1];
        v->strides[0] = shape[1] * s;
        v->strides[1] = s;
    }
    return v;
}

int cn_text_split(cn_tensor *tokens, double val_fraction, cn_tensor **train, cn_tensor **val) {
    static const char fn[] = "text_split";
    int st = check_tokens(fn, tokens);
    if (st != CN_OK) return st;
    if (!train || !val) return cn_failc(CN_EINVAL, "%s: train or val is NULL", fn);
    if (!(val_fraction >= 0 && val_fraction < 1))
        return cn_failc(CN_EINVAL, "%s: val_fraction %g is not in [0, 1)", fn, val_fraction);
    int64_t n = tokens->shape[0];
    int64_t nval = (int64_t)floor((double)n * val_fraction);
    int64_t ntr = n - nval;
    cn_tensor *a = view(tokens, 0, 1, &ntr), *b = view(tokens, ntr, 1, &nval);
    if (!a || !b) {
        cn_release(a);
        cn_release(b);
        return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    }
    *train = cn_scope_add(a);
    *val = cn_scope_add(b);
    return CN_OK;
}

int cn_text_windows(cn_tensor *tokens, int64_t T, int64_t offset, cn_tensor **inputs,
                    cn_tensor **targets) {
    static const char fn[] = "text_windows";
    int st = check_tokens(fn, tokens);
    if (st != CN_OK) return st;
    if (!inputs || !targets) return cn_failc(CN_EINVAL, "%s: inputs or targets is NULL", fn);
    int64_t n = tokens->shape[0];
    if (T < 1 || offset < 0 || offset >= n || n - offset - 1 < T)
        return cn_failc(CN_EINVAL,
                        "%s: %lld tokens make no window of %lld from offset %lld (a window needs "
                        "T + 1 tokens; give T >= 1 and 0 <= offset <= n - T - 1)",
                        fn, (long long)n, (long long)T, (long long)offset);
    int64_t shape[2] = {(n - offset - 1) / T, T};
    cn_tensor *x = view(tokens, offset, 2, shape), *y = view(tokens, offset + 1, 2, shape);
    if (!x || !y) {
        cn_release(x);
        cn_release(y);
        return cn_failc(CN_ENOMEM, "%s: out of memory", fn);
    }
    *inputs = cn_scope_add(x);
    *targets = cn_scope_add(y);
    return CN_OK;
}

cn_loader *cn_text_loader_new(cn_tensor *tokens, int64_t T, const cn_loader_opts *opts) {
    static const char fn[] = "text_loader_new";
    if (check_tokens(fn, tokens) != CN_OK) return NULL;
    /* The windows and a cast are temporaries: the loader keeps its own
     * references to what it reads. */
    cn_scope_begin();
    cn_tensor *t = tokens->dtype == CN_I64 ? tokens : cn_cast(tokens, CN_I64);
    cn_tensor *xy[2] = {NULL, NULL};
    cn_loader *l = NULL;
    if (t && cn_text_windows(t, T, 0, &xy[0], &xy[1]) == CN_OK) l = cn_loader_new(xy, 2, opts);
    cn_scope_end();
    return l;
}
