/* Shape-inference helpers shared by op families. */
#include "op.h"

#include <stdio.h>
#include <string.h>

int cn_broadcast_shapes(const char *opname, cn_tensor *const *in, int nin, cn_meta *out) {
    /* Equal shapes, the common case of tiny eager ops, broadcast to
     * themselves (unknown sizes included). */
    bool same = nin > 0;
    for (int i = 1; i < nin && same; i++)
        same = in[i]->ndim == in[0]->ndim &&
               memcmp(in[i]->shape, in[0]->shape, sizeof(int64_t) * (size_t)in[0]->ndim) == 0;
    if (same) {
        out->ndim = in[0]->ndim;
        memcpy(out->shape, in[0]->shape, sizeof(int64_t) * (size_t)in[0]->ndim);
        return CN_OK;
    }
    int nd = 0;
    for (int i = 0; i < nin; i++)
        if (in[i]->ndim > nd) nd = in[i]->ndim;
    out->ndim = nd;
    for (int d = 0; d < nd; d++) {
        int64_t size = 1;
        bool unknown = false;
        for (int i = 0; i < nin; i++) {
            int j = d - (nd - in[i]->ndim);
            if (j < 0) continue;
            int64_t s = in[i]->shape[j];
            if (s == -1) {
                unknown = true;
            } else if (s != 1) {
                if (size != 1 && size != s) {
                    char msg[512];
                    size_t k = 0;
                    for (int q = 0; q < nin && k < sizeof msg; q++) {
                        char b[160];
                        k += (size_t)snprintf(msg + k, sizeof msg - k, "%s%s", q ? " and " : "",
                                              cn_fmt_shape(b, sizeof b, in[q]->ndim, in[q]->shape));
                    }
                    cn_fail("%s: shapes %s cannot be broadcast together (axis %d: %lld vs %lld)",
                            opname, msg, d - nd, (long long)size, (long long)s);
                    return CN_EINVAL;
                }
                size = s;
            }
        }
        out->shape[d] = (size == 1 && unknown) ? -1 : size;
    }
    return CN_OK;
}

int cn_norm_axes(const char *opname, cn_attrs *a, int ndim) {
    if (a->nlist < 0 || a->nlist > CN_MAX_DIMS) {
        cn_fail("%s: %d axes given, at most %d", opname, (int)a->nlist, CN_MAX_DIMS);
        return CN_EINVAL;
    }
    if (a->nlist == 0) {
        for (int i = 0; i < ndim; i++) a->list[i] = i;
        a->nlist = ndim;
        return CN_OK;
    }
    bool seen[CN_MAX_DIMS] = {false};
    for (int i = 0; i < a->nlist; i++) {
        int ax = cn_norm_axis(opname, (int)a->list[i], ndim);
        if (ax < 0) return CN_EINVAL;
        if (ndim == 0) continue; /* axis 0/-1 of a scalar: nothing to reduce */
        if (seen[ax]) {
            cn_fail("%s: axis %lld appears more than once", opname, (long long)a->list[i]);
            return CN_EINVAL;
        }
        seen[ax] = true;
    }
    int k = 0;
    for (int i = 0; i < ndim; i++)
        if (seen[i]) a->list[k++] = i;
    a->nlist = k;
    return CN_OK;
}

void cn_reduce_shape(const cn_tensor *x, const cn_attrs *a, bool keepdim, cn_meta *out) {
    bool red[CN_MAX_DIMS] = {false};
    for (int i = 0; i < a->nlist; i++) red[a->list[i]] = true;
    int k = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (red[i]) {
            if (keepdim) out->shape[k++] = 1;
        } else {
            out->shape[k++] = x->shape[i];
        }
    }
    out->ndim = k;
}
