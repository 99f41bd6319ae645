/* ONNX scatter and N-d gather ops on Chutney's scatter_add and
 * index_select, Compress on a constant condition, and the signal windows. A replacing scatter is "where a cell is hit, the sum of the
 * updates into zeros, else the input" (ONNX leaves duplicate indices
 * undefined there); N-d indices become linear indices into the flattened
 * leading axes. */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>


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
    /* Constant indices (what exporters write) are checked axis by axis: a
     * coordinate past its axis would otherwise land in another row. */
    if (!cn_is_symbolic_tensor(idx)) {
        cn_tensor *ic = cn_contiguous(cn_cast(idx, CN_I64));
        if (!ic) return NULL;
        const int64_t *p = cn_data(ic);
        int64_t rows = cn_numel(ic) / k;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < k; j++) {
                int64_t v = p[i * k + j], d = cn_dim(x, (int)j);
                if (v < -d || v >= d) {
                    onnx_bad(c, "index %" PRId64 " on axis %" PRId64 " of size %" PRId64, v, j, d);
                    return NULL;
                }
            }
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

/* ScatterND with constant indices, which is how exporters write a slice
 * assignment (`x[:, 1:] = v`, `x[..., a:b] += v`, the axis moved to the
 * front): the general path expands the row numbers to the updates' full
 * shape and runs three scatters, so a model of 20-million-element slice
 * updates (MViT) made a constant of 160 MB per node at load. Rows a..a+m-1
 * in order become one concatenation; any other set of distinct rows one
 * gather of [u; xr] by a row map the size of xr's first axis. *y stays
 * NULL when neither applies (symbolic or repeated row numbers). */
static int scatter_rows_const(onnx_ctx *c, cn_tensor *xr, cn_tensor *lin, cn_tensor *u, bool add,
                              cn_tensor **y) {
    if (cn_is_symbolic_tensor(lin)) return 0;
    u = cn_cast(u, cn_tensor_dtype(xr));
    cn_tensor *li = cn_contiguous(cn_reshape(lin, 1, (int64_t[]){-1}));
    if (!li) return CN_EINVAL;
    const int64_t *p = cn_data(li);
    int64_t m = cn_numel(li), rows = cn_dim(xr, 0);
    for (int64_t j = 0; j < m; j++)
        if (p[j] < 0 || p[j] >= rows)
            return onnx_bad(c, "index %" PRId64 " is outside an axis of %" PRId64, p[j], rows);
    bool run = true;
    for (int64_t j = 1; j < m && run; j++) run = p[j] == p[0] + j;
    if (m == 0) {
        *y = xr;
        return 0;
    }
    if (run) {
        int64_t a = p[0];
        cn_tensor *mid = add ? cn_add(cn_narrow(xr, 0, a, m), u) : u;
        cn_tensor *parts[3];
        int np = 0;
        if (a > 0) parts[np++] = cn_narrow(xr, 0, 0, a);
        parts[np++] = mid;
        if (a + m < rows) parts[np++] = cn_narrow(xr, 0, a + m, rows - a - m);
        *y = np == 1 ? mid : cn_concat(parts, np, 0);
        return *y ? 0 : CN_EINVAL;
    }
    if (onnx_check_size(c, 1, &rows) < 0) return CN_EINVAL;
    cn_tensor *map = cn_empty(CN_I64, 1, &rows);
    if (!map) return CN_ENOMEM;
    int64_t *q = cn_data(map);
    for (int64_t r = 0; r < rows; r++) q[r] = -1;
    for (int64_t j = 0; j < m; j++) {
        if (q[p[j]] >= 0) return 0; /* a row hit twice: the general path */
        q[p[j]] = j;
    }
    if (add) {
        /* row r of the result: xr[r] + (u[j], or a zero row) */
        int64_t zs[CN_MAX_DIMS];
        zs[0] = 1;
        for (int i = 1; i < cn_ndim(u); i++) zs[i] = cn_dim(u, i);
        for (int64_t r = 0; r < rows; r++) q[r] = q[r] < 0 ? m : q[r];
        cn_tensor *uz = cn_concat((cn_tensor *[]){u, cn_zeros(cn_tensor_dtype(u), cn_ndim(u), zs)}, 2, 0);
        *y = cn_add(xr, cn_index_select(uz, 0, map));
    } else {
        for (int64_t r = 0; r < rows; r++) q[r] = q[r] < 0 ? m + r : q[r];
        *y = cn_index_select(cn_concat((cn_tensor *[]){u, xr}, 2, 0), 0, map);
    }
    return *y ? 0 : CN_EINVAL;
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
    if (!u) return CN_EINVAL;
    cn_tensor *y = NULL;
    int rc = scatter_rows_const(c, xr, lin, u, add, &y);
    if (rc < 0) return rc;
    if (y) DONE(cn_reshape(y, cn_ndim(x), cn_shape(x)));
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

/* ReverseSequence: each batch entry's first sequence_lens steps reversed,
 * as a gather along the time axis with the indices computed by ops (so
 * the lengths may be computed at run time, and x gets its gradient). */
H(h_reverse_sequence) {
    UNUSED;
    cn_tensor *x = in[0], *lens = in[1];
    int r = cn_ndim(x);
    if (r < 2) return onnx_bad(c, "input must have rank 2 or more");
    int64_t ta = onnx_attr_int(n, "time_axis", 0), ba = onnx_attr_int(n, "batch_axis", 1);
    if (!((ta == 0 && ba == 1) || (ta == 1 && ba == 0)))
        return onnx_bad(c, "time_axis %" PRId64 " and batch_axis %" PRId64 " (0 and 1, either way)", ta, ba);
    int64_t T = cn_dim(x, (int)ta), B = cn_dim(x, (int)ba);
    if (T < 0 || B < 0) return onnx_unsup(c, "unknown sizes");
    if (cn_ndim(lens) != 1 || cn_dim(lens, 0) != B)
        return onnx_bad(c, "sequence_lens must be [%" PRId64 "] (the batch)", B);
    int64_t ts[CN_MAX_DIMS], bs[CN_MAX_DIMS];
    for (int i = 0; i < r; i++) ts[i] = bs[i] = 1;
    ts[ta] = T, bs[ba] = B;
    cn_tensor *t = cn_reshape(cn_arange(0, (double)T, 1, CN_I64), r, ts);
    cn_tensor *l = cn_reshape(cn_cast(lens, CN_I64), r, bs);
    cn_tensor *idx = cn_where(cn_lt(t, l), cn_sub(cn_add_scalar(l, -1), t), t);
    DONE(cn_gather(x, (int)ta, cn_contiguous(cn_expand(idx, r, cn_shape(x)))));
}

/* ---- Unique ---- */

typedef struct {
    const double *f;
    const int64_t *i; /* integer and bool inputs compare exactly as int64 */
    int64_t outer, d, inner;
} slices;

static int cmp_slices(const slices *s, int64_t a, int64_t b) {
    for (int64_t o = 0; o < s->outer; o++)
        for (int64_t k = 0; k < s->inner; k++) {
            int64_t pa = (o * s->d + a) * s->inner + k, pb = (o * s->d + b) * s->inner + k;
            if (s->i) {
                if (s->i[pa] != s->i[pb]) return s->i[pa] < s->i[pb] ? -1 : 1;
            } else if (s->f[pa] != s->f[pb]) {
                return s->f[pa] < s->f[pb] ? -1 : 1;
            }
        }
    return 0;
}

/* Stable merge sort of the slice indices (qsort has no context). */
static void sort_slices(const slices *s, int64_t *v, int64_t *tmp, int64_t n) {
    if (n < 2) return;
    int64_t h = n / 2;
    sort_slices(s, v, tmp, h);
    sort_slices(s, v + h, tmp, n - h);
    int64_t a = 0, b = h, k = 0;
    while (a < h && b < n) tmp[k++] = cmp_slices(s, v[b], v[a]) < 0 ? v[b++] : v[a++];
    while (a < h) tmp[k++] = v[a++];
    while (b < n) tmp[k++] = v[b++];
    memcpy(v, tmp, sizeof *v * (size_t)n);
}

/* Unique (on data: its output's size is the number of distinct values):
 * the distinct elements, or slices along `axis`, sorted or in the order
 * they first occur, with the first occurrence of each, where each input
 * slice went, and how often each occurs. */
H(h_unique) {
    UNUSED;
    cn_tensor *x = in[0];
    if (cn_is_symbolic_tensor(x))
        return onnx_needs_values(c, "input 'X' is computed at run time (the output's size is the "
                                    "number of distinct values)");
    const Onnx__AttributeProto *ax = onnx_attr(n, "axis");
    bool sorted = onnx_attr_int(n, "sorted", 1) != 0;
    if (!ax) x = cn_reshape(x, 1, (int64_t[]){cn_numel(x)});
    int axis = onnx_axis(c, ax ? ax->i : 0, cn_ndim(x), "axis");
    if (axis < 0) return CN_EINVAL;
    slices sl = {NULL, NULL, 1, cn_dim(x, axis), 1};
    for (int i = 0; i < axis; i++) sl.outer *= cn_dim(x, i);
    for (int i = axis + 1; i < cn_ndim(x); i++) sl.inner *= cn_dim(x, i);
    int64_t d = sl.d, nel = cn_numel(x);
    bool is_int = !cn_dtype_is_float(cn_tensor_dtype(x));
    void *buf = malloc((size_t)(nel + 1) * 8);
    int64_t *ord = malloc(sizeof *ord * (size_t)(4 * d + 4));
    int rc = buf && ord ? 0 : cn_failc(CN_ENOMEM, "onnx: out of memory");
    if (rc == 0) rc = cn_copy_to_buffer(x, is_int ? CN_I64 : CN_F64, buf, (size_t)(nel + 1) * 8);
    if (is_int) sl.i = buf;
    else sl.f = buf;
    int64_t *tmp = ord + d + 1, *first = tmp + d + 1, *inv = first + d + 1, nu = 0;
    if (rc == 0) {
        for (int64_t k = 0; k < d; k++) ord[k] = k;
        sort_slices(&sl, ord, tmp, d);
        /* Groups of equal slices in sorted order; a stable sort puts each
         * group's first occurrence first. */
        for (int64_t k = 0; k < d; k++) {
            if (k == 0 || cmp_slices(&sl, ord[k - 1], ord[k]) != 0) first[nu++] = ord[k];
            inv[ord[k]] = nu - 1;
        }
    }
    int64_t *pos = tmp; /* group (sorted order) -> output position */
    if (rc == 0 && !sorted) {
        /* By first occurrence: the groups in the order the input meets them. */
        int64_t next = 0;
        for (int64_t g = 0; g < nu; g++) pos[g] = -1;
        for (int64_t k = 0; k < d; k++)
            if (pos[inv[k]] < 0) pos[inv[k]] = next++;
    } else {
        for (int64_t g = 0; g < nu; g++) pos[g] = g;
    }
    int64_t *oi = NULL, *oc = NULL, *ov = NULL;
    if (rc == 0) {
        oi = malloc(sizeof *oi * (size_t)(nu + 1));
        oc = calloc((size_t)nu + 1, sizeof *oc);
        ov = malloc(sizeof *ov * (size_t)(d + 1));
        if (!oi || !oc || !ov) rc = cn_failc(CN_ENOMEM, "onnx: out of memory");
    }
    if (rc == 0) {
        for (int64_t g = 0; g < nu; g++) oi[pos[g]] = first[g];
        for (int64_t k = 0; k < d; k++) {
            ov[k] = pos[inv[k]];
            oc[ov[k]]++;
        }
        cn_tensor *it = cn_from_data(CN_I64, 1, (int64_t[]){nu}, oi);
        out[0] = it ? cn_index_select(x, axis, it) : NULL;
        if (nout > 1) out[1] = it;
        if (nout > 2) out[2] = cn_from_data(CN_I64, 1, (int64_t[]){d}, ov);
        if (nout > 3) out[3] = cn_from_data(CN_I64, 1, (int64_t[]){nu}, oc);
        if (!out[0]) rc = CN_EINVAL;
    }
    free(buf), free(ord), free(oi), free(oc), free(ov);
    return rc;
}

const onnx_op_entry cn_onnx_ops_index[] = {
    {"Unique", h_unique, "axis,sorted", 1, 1, 4, "on data: a model whose input it depends on runs eagerly"},
    {"ReverseSequence", h_reverse_sequence, "batch_axis,time_axis", 2, 2, 1, "known sizes"},
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
