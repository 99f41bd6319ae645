/* ONNX scatter and N-d gather ops on Chutney's scatter_add and
 * index_select, Compress on a constant condition, and the signal windows. A replacing scatter is "where a cell is hit, the sum of the
 * updates into zeros, else the input" (ONNX leaves duplicate indices
 * undefined there); N-d indices become linear indices into the flattened
 * leading axes. */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX
#include <inttypes.h>
#include <math.h>


static bool known(cn_tensor *x) {
    for (int i = 0; i < cn_ndim(x); i++)
        if (cn_dim(x, i) < 0) return false;
    return true;
}

/* Negative indices count from the end of an axis of size dim. */
static cn_tensor *wrap(cn_tensor *idx, int64_t dim) {
    idx = cn_cast(idx, CN_I64);
    return cn_where(cn_lt(idx, cn_scalar(CN_I64, 0)), cn_add_scalar(idx, (double)dim), idx);
}

static int reduction(onnx_ctx *c, const Onnx__NodeProto *n, bool *add) {
    char rb[16];
    const char *r = onnx_attr_str(n, "reduction", "none", rb, sizeof rb);
    *add = !strcmp(r, "add");
    if (!*add && strcmp(r, "none")) return onnx_unsup(c, "reduction '%s'", r);
    return 0;
}

/* x with src scattered at idx along axis: added, or replacing. */
static cn_tensor *scatter(cn_tensor *x, int axis, cn_tensor *idx, cn_tensor *src, bool add) {
    if (add) return cn_scatter_add(x, axis, idx, src);
    cn_tensor *hits = cn_scatter_add(cn_zeros_like(x), axis, idx, cn_ones_like(src));
    cn_tensor *sum = cn_scatter_add(cn_zeros_like(x), axis, idx, src);
    return cn_where(cn_gt(hits, cn_scalar(cn_tensor_dtype(hits), 0)), sum, x);
}

H(h_scatter_elements) {
    UNUSED;
    cn_tensor *x = in[0], *idx = in[1], *upd = in[2];
    bool add;
    if (reduction(c, n, &add) < 0) return CN_EUNSUPPORTED;
    int axis = onnx_axis(c, onnx_attr_int(n, "axis", 0), cn_ndim(x), "axis");
    if (axis < 0) return CN_EINVAL;
    int64_t dim = cn_dim(x, axis);
    if (dim < 0) return onnx_unsup(c, "an axis of unknown size");
    DONE(scatter(x, axis, wrap(idx, dim), upd, add));
}

/* Linear row numbers of N-d indices idx [..., k] into x's first k axes. */
static cn_tensor *linear_rows(onnx_ctx *c, cn_tensor *x, cn_tensor *idx, int *k_out) {
    int r = cn_ndim(x), ri = cn_ndim(idx);
    int64_t k = ri ? cn_dim(idx, ri - 1) : -1;
    if (k < 1 || k > r) {
        onnx_bad(c, "indices' last axis %" PRId64 " for data of rank %d", k, r);
        return NULL;
    }
    cn_tensor *lin = NULL;
    int64_t stride = 1;
    for (int64_t j = k - 1; j >= 0; j--) {
        cn_tensor *ij = wrap(cn_squeeze(cn_narrow(idx, ri - 1, j, 1), ri - 1), cn_dim(x, (int)j));
        cn_tensor *t = stride == 1 ? ij : cn_mul_scalar(ij, (double)stride);
        lin = lin ? cn_add(lin, t) : t;
        stride *= cn_dim(x, (int)j);
    }
    *k_out = (int)k;
    return lin;
}

/* x [d0 .. d(k-1), rest...] as [rows, rest...]. */
static cn_tensor *rows_view(cn_tensor *x, int k) {
    int r = cn_ndim(x);
    int64_t s[CN_MAX_DIMS], rows = 1;
    for (int i = 0; i < k; i++) rows *= cn_dim(x, i);
    s[0] = rows;
    for (int i = k; i < r; i++) s[1 + i - k] = cn_dim(x, i);
    return cn_reshape(x, 1 + r - k, s);
}

H(h_gather_nd) {
    UNUSED;
    cn_tensor *x = in[0], *idx = in[1];
    if (onnx_attr_int(n, "batch_dims", 0) != 0) return onnx_unsup(c, "batch_dims other than 0");
    if (!known(x) || !known(idx)) return onnx_unsup(c, "unknown sizes");
    int k;
    cn_tensor *lin = linear_rows(c, x, idx, &k);
    if (!lin) return CN_EINVAL;
    int r = cn_ndim(x), ri = cn_ndim(idx);
    int64_t s[CN_MAX_DIMS];
    int ns = 0;
    for (int i = 0; i < ri - 1; i++) s[ns++] = cn_dim(idx, i);
    for (int i = k; i < r; i++) s[ns++] = cn_dim(x, i);
    if (ns > CN_MAX_DIMS) return onnx_unsup(c, "result rank above %d", CN_MAX_DIMS);
    cn_tensor *g = cn_index_select(rows_view(x, k), 0, cn_reshape(lin, 1, (int64_t[]){-1}));
    DONE(cn_reshape(g, ns, s));
}

H(h_scatter_nd) {
    UNUSED;
    cn_tensor *x = in[0], *idx = in[1], *upd = in[2];
    bool add;
    if (reduction(c, n, &add) < 0) return CN_EUNSUPPORTED;
    if (!known(x) || !known(idx) || !known(upd)) return onnx_unsup(c, "unknown sizes");
    int k;
    cn_tensor *lin = linear_rows(c, x, idx, &k);
    if (!lin) return CN_EINVAL;
    cn_tensor *xr = rows_view(x, k);
    int rr = cn_ndim(xr);
    /* updates as [m, rest...]; the row index broadcast over rest. */
    int64_t us[CN_MAX_DIMS];
    us[0] = cn_numel(lin);
    for (int i = 1; i < rr; i++) us[i] = cn_dim(xr, i);
    cn_tensor *u = cn_reshape(upd, rr, us);
    int64_t ls[CN_MAX_DIMS];
    ls[0] = us[0];
    for (int i = 1; i < rr; i++) ls[i] = 1;
    cn_tensor *li = cn_contiguous(cn_expand(cn_reshape(lin, rr, ls), rr, us));
    DONE(cn_reshape(scatter(xr, 0, li, u, add), cn_ndim(x), cn_shape(x)));
}

H(h_compress) {
    UNUSED;
    cn_tensor *x = in[0], *cond = in[1];
    if (cn_is_symbolic_tensor(cond))
        return onnx_needs_values(c, "input 'condition' is computed at run time (the output's size depends on it)");
    const Onnx__AttributeProto *ax = onnx_attr(n, "axis");
    if (!ax) x = cn_reshape(x, 1, (int64_t[]){-1});
    int axis = onnx_axis(c, ax ? ax->i : 0, cn_ndim(x), "axis");
    if (axis < 0) return CN_EINVAL;
    int64_t nc = cn_numel(cond), dim = cn_dim(x, axis);
    if (dim < 0) return onnx_unsup(c, "an axis of unknown size");
    if (nc > dim) return onnx_bad(c, "condition has %" PRId64 " values for an axis of %" PRId64, nc, dim);
    cn_tensor *idx = cn_empty(CN_I64, 1, (int64_t[]){nc});
    if (!idx) return CN_ENOMEM;
    int64_t *p = cn_data(idx), k = 0;
    cn_tensor *flat = cn_contiguous(cn_cast(cond, CN_BOOL));
    const uint8_t *b = flat ? cn_data(flat) : NULL;
    if (!b) return CN_EINVAL;
    for (int64_t i = 0; i < nc; i++)
        if (b[i]) p[k++] = i;
    DONE(cn_index_select(x, axis, cn_narrow(idx, 0, 0, k)));
}

/* Hann, Hamming and Blackman windows of a constant size. */
typedef enum { W_HANN, W_HAMMING, W_BLACKMAN } wkind;

static int window_fn(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor *size_t_, cn_tensor **out,
                     wkind k) {
    double sz;
    if (onnx_const_scalar(c, size_t_, "size", &sz) < 0) return CN_EUNSUPPORTED;
    if (!(sz >= 0 && sz < 0x1p62)) return onnx_bad(c, "size %g (must be a count)", sz);
    int64_t N = (int64_t)sz;
    if (onnx_check_size(c, 1, &N) < 0) return CN_EINVAL;
    int dt = onnx_dtype((int32_t)onnx_attr_int(n, "output_datatype", 1));
    if (dt < 0) return onnx_unsup(c, "output_datatype %s", onnx_dtype_name((int32_t)onnx_attr_int(n, "output_datatype", 1)));
    double period = onnx_attr_int(n, "periodic", 1) ? (double)N : (double)(N - 1);
    cn_tensor *y = cn_empty(CN_F64, 1, (int64_t[]){N});
    if (!y) return CN_ENOMEM;
    double *p = cn_data(y), pi = 3.14159265358979323846;
    for (int64_t i = 0; i < N; i++) {
        double t = period > 0 ? 2 * pi * (double)i / period : 0;
        if (k == W_HANN) p[i] = 0.5 - 0.5 * cos(t);
        else if (k == W_HAMMING) p[i] = 25.0 / 46 - (1 - 25.0 / 46) * cos(t);
        else p[i] = 0.42 - 0.5 * cos(t) + 0.08 * cos(2 * t);
    }
    DONE(cn_cast(y, (cn_dtype)dt));
}

H(h_hann) {
    UNUSED;
    return window_fn(c, n, in[0], out, W_HANN);
}
H(h_hamming) {
    UNUSED;
    return window_fn(c, n, in[0], out, W_HAMMING);
}
H(h_blackman) {
    UNUSED;
    return window_fn(c, n, in[0], out, W_BLACKMAN);
}

const onnx_op_entry cn_onnx_ops_index[] = {
    {"Compress", h_compress, "axis", 2, 2, 1, "on a computed condition, the model runs eagerly"},
    {"HannWindow", h_hann, "output_datatype,periodic", 1, 1, 1, "size must be a constant"},
    {"HammingWindow", h_hamming, "output_datatype,periodic", 1, 1, 1, "size must be a constant"},
    {"BlackmanWindow", h_blackman, "output_datatype,periodic", 1, 1, 1, "size must be a constant"},
    {"ScatterElements", h_scatter_elements, "axis,reduction", 3, 3, 1, "reduction none or add"},
    {"Scatter", h_scatter_elements, "axis", 3, 3, 1, ""},
    {"GatherND", h_gather_nd, "batch_dims", 2, 2, 1, "batch_dims 0; known sizes"},
    {"ScatterND", h_scatter_nd, "reduction", 3, 3, 1, "reduction none or add; known sizes"},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

#endif /* CN_HAVE_ONNX */
