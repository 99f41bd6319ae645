/* ONNX reductions, softmax family, ArgMax/ArgMin, TopK and matrix products.
 * Results keep the input's dtype as ONNX says (Chutney sums integers into
 * i64, so they are cast back). */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#define MAXV 64

typedef enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP, R_SUMSQ } rkind;

static int reduce(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor **in, int nin, cn_tensor **out,
                  rkind kind) {
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    int64_t axes[MAXV];
    int k = -1;
    /* Axes are an input from opset 13 for ReduceSum (18 for the others). */
    bool from_input = (kind == R_SUM && c->opset_of_node >= 13) || c->opset_of_node >= 18;
    if (from_input) {
        if (onnx_attr(n, "axes"))
            return onnx_bad(c, "axes as an attribute (from opset %d they are an input)",
                            kind == R_SUM ? 13 : 18);
        if (nin > 1 && in[1]) {
            k = onnx_const_ints(c, in[1], "axes", axes, MAXV);
            if (k < 0) return k;
        }
    } else {
        if (nin > 1) return onnx_bad(c, "axes as an input needs a later opset");
        k = onnx_attr_ints(n, "axes", axes, MAXV);
        if (k == -2) return onnx_bad(c, "too many axes");
    }
    bool keep = onnx_attr_int(n, "keepdims", 1);
    if (k <= 0 && onnx_attr_int(n, "noop_with_empty_axes", 0)) DONE(x);
    int ax[CN_MAX_DIMS], na = 0;
    if (k > r) return onnx_bad(c, "%d axes for rank %d", k, r);
    for (int i = 0; i < k; i++) {
        int a = onnx_axis(c, axes[i], r, "axis");
        if (a < 0) return CN_EINVAL;
        for (int j = 0; j < na; j++)
            if (ax[j] == a) return onnx_bad(c, "axis %d listed twice", a);
        ax[na++] = a;
    }
    if (k <= 0) /* every axis */
        for (int i = 0; i < r; i++) ax[na++] = i;
    cn_dtype dt = cn_tensor_dtype(x);
    cn_tensor *y;
    switch (kind) {
    case R_SUM: y = cn_sum(x, ax, na, keep); break;
    case R_MEAN: y = cn_mean(x, ax, na, keep); break;
    case R_MAX: y = cn_max(x, ax, na, keep); break;
    case R_MIN: y = cn_min(x, ax, na, keep); break;
    case R_PROD: y = cn_prod(x, ax, na, keep); break;
    case R_L1: y = cn_sum(cn_abs(x), ax, na, keep); break;
    case R_L2: y = cn_sqrt(cn_sum(cn_mul(x, x), ax, na, keep)); break;
    case R_LOGSUM: y = cn_log(cn_sum(x, ax, na, keep)); break;
    case R_LOGSUMEXP: y = cn_logsumexp(x, ax, na, keep); break;
    default: y = cn_sum(cn_mul(x, x), ax, na, keep); break;
    }
    /* Rank 0 input and no axes: Chutney's "every axis" is none. */
    DONE(cn_cast(y, dt));
}

#define RED(hname, kind)                                                                           \
    H(hname) {                                                                                     \
        UNUSED;                                                                                    \
        return reduce(c, n, in, nin, out, kind);                                                   \
    }
RED(h_reduce_sum, R_SUM)
RED(h_reduce_mean, R_MEAN)
RED(h_reduce_max, R_MAX)
RED(h_reduce_min, R_MIN)
RED(h_reduce_prod, R_PROD)
RED(h_reduce_l1, R_L1)
RED(h_reduce_l2, R_L2)
RED(h_reduce_log_sum, R_LOGSUM)
RED(h_reduce_log_sum_exp, R_LOGSUMEXP)
RED(h_reduce_sum_square, R_SUMSQ)

/* Before opset 13 the softmax family works on x flattened to 2-D at axis
 * (default 1); from 13, along one axis (default -1). */
typedef enum { S_SOFTMAX, S_LOG, S_HARD } skind;

static cn_tensor *hardmax_last(cn_tensor *x, int axis) {
    cn_tensor *am = cn_argmax(x, axis, true);
    int64_t d = cn_dim(x, axis);
    int r = cn_ndim(x);
    int64_t shp[CN_MAX_DIMS];
    for (int i = 0; i < r; i++) shp[i] = i == axis ? d : 1;
    cn_tensor *ar = cn_reshape(cn_arange(0, (double)d, 1, CN_I64), r, shp);
    return cn_cast(cn_eq(am, ar), cn_tensor_dtype(x));
}

static int softmax_family(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor **in, cn_tensor **out,
                          skind kind) {
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    bool legacy = c->opset_of_node < 13;
    int axis = onnx_axis(c, onnx_attr_int(n, "axis", legacy ? 1 : -1), r, "axis");
    if (axis < 0) return CN_EINVAL;
    if (!cn_dtype_is_float(cn_tensor_dtype(x))) return onnx_unsup(c, "non-float input");
    cn_tensor *y = x;
    if (legacy && axis != r - 1) {
        int64_t a = 1, b = 1;
        for (int i = 0; i < r; i++) {
            int64_t d = cn_dim(x, i);
            if (d < 0) return onnx_unsup(c, "unknown sizes with the pre-13 2-D coercion");
            if (i < axis) a *= d;
            else b *= d;
        }
        y = cn_reshape(x, 2, (int64_t[]){a, b});
    }
    int ax = cn_ndim(y) == r ? axis : 1;
    if (kind == S_SOFTMAX) y = cn_softmax(y, ax);
    else if (kind == S_LOG) y = cn_log_softmax(y, ax);
    else {
        if (cn_dim(y, ax) < 0) return onnx_unsup(c, "hardmax over an axis of unknown size");
        y = hardmax_last(y, ax);
    }
    if (y && cn_ndim(y) != r) y = cn_reshape(y, r, cn_shape(x));
    DONE(y);
}

H(h_softmax) {
    UNUSED;
    return softmax_family(c, n, in, out, S_SOFTMAX);
}
H(h_log_softmax) {
    UNUSED;
    return softmax_family(c, n, in, out, S_LOG);
}
H(h_hardmax) {
    UNUSED;
    return softmax_family(c, n, in, out, S_HARD);
}

static int arg_extreme(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor **in, cn_tensor **out,
                       bool is_max) {
    cn_tensor *x = in[0];
    int axis = onnx_axis(c, onnx_attr_int(n, "axis", 0), cn_ndim(x), "axis");
    if (axis < 0) return CN_EINVAL;
    bool keep = onnx_attr_int(n, "keepdims", 1), last = onnx_attr_int(n, "select_last_index", 0);
    if (!last) DONE(is_max ? cn_argmax(x, axis, keep) : cn_argmin(x, axis, keep));
    /* The last extreme is the first one of the reversed axis. */
    int64_t d = cn_dim(x, axis);
    if (d < 0) return onnx_unsup(c, "select_last_index over an axis of unknown size");
    cn_tensor *rev = cn_slice(x, axis, CN_END, CN_BEGIN, -1);
    cn_tensor *i = is_max ? cn_argmax(rev, axis, keep) : cn_argmin(rev, axis, keep);
    DONE(cn_rsub_scalar(i, (double)(d - 1)));
}

H(h_argmax) {
    UNUSED;
    return arg_extreme(c, n, in, out, true);
}
H(h_argmin) {
    UNUSED;
    return arg_extreme(c, n, in, out, false);
}

typedef struct {
    double v;
    int64_t i;
} ranked;

/* Larger first, NaN above everything (as ONNX Runtime); ties: smaller index. */
static int rank_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    bool nx = isnan(x->v), ny = isnan(y->v);
    if (nx != ny) return nx ? -1 : 1;
    if (!nx && x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}
static int rank_asc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    bool nx = isnan(x->v), ny = isnan(y->v);
    if (nx != ny) return nx ? 1 : -1;
    if (!nx && x->v != y->v) return x->v < y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

typedef int (*rank_cmp)(const void *, const void *);

/* Heap of the k best so far, the worst on top (cmp(parent, child) >= 0). */
static void sift_down(ranked *h, int64_t n, int64_t i, rank_cmp cmp) {
    for (;;) {
        int64_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && cmp(&h[l], &h[w]) > 0) w = l;
        if (r < n && cmp(&h[r], &h[w]) > 0) w = r;
        if (w == i) return;
        ranked t = h[i];
        h[i] = h[w], h[w] = t, i = w;
    }
}

/* The k best of line[0..d) into line[0..k), in order: a bounded heap
 * (d log k) when k is small against d (a detector's thousand best of a
 * million anchors), else one sort. cmp is a total order, so either way
 * the result is the first k of the sorted line. */
static void best_k(ranked *line, int64_t d, int64_t k, rank_cmp cmp) {
    if (k == 0) return;
    if (k * 8 < d) {
        for (int64_t i = k / 2; i-- > 0;) sift_down(line, k, i, cmp);
        for (int64_t j = k; j < d; j++)
            if (cmp(&line[j], &line[0]) < 0) {
                line[0] = line[j];
                sift_down(line, k, 0, cmp);
            }
        d = k;
    }
    qsort(line, (size_t)d, sizeof *line, cmp);
}

/* TopK of data: the k best of each line along the axis found on the host,
 * the values gathered by their indices (so a gradient still flows to x). */
static int topk_data(cn_tensor *x, int axis, int64_t k, bool largest, cn_tensor **out, int nout) {
    int r = cn_ndim(x);
    int64_t d = cn_dim(x, axis), outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= cn_dim(x, i);
    for (int i = axis + 1; i < r; i++) inner *= cn_dim(x, i);
    size_t nel = (size_t)cn_numel(x);
    double *v = malloc(sizeof *v * (nel + 1));
    ranked *line = malloc(sizeof *line * (size_t)(d + 1));
    int64_t *idx = malloc(sizeof *idx * (size_t)(outer * k * inner + 1));
    int rc = v && line && idx ? 0 : cn_failc(CN_ENOMEM, "onnx: out of memory");
    if (rc == 0) rc = cn_copy_to_buffer(x, CN_F64, v, sizeof *v * (nel + 1));
    for (int64_t o = 0; rc == 0 && o < outer; o++)
        for (int64_t in_ = 0; in_ < inner; in_++) {
            for (int64_t j = 0; j < d; j++) line[j] = (ranked){v[(o * d + j) * inner + in_], j};
            best_k(line, d, k, largest ? rank_desc : rank_asc);
            for (int64_t j = 0; j < k; j++) idx[(o * k + j) * inner + in_] = line[j].i;
        }
    int64_t shape[CN_MAX_DIMS];
    for (int i = 0; i < r; i++) shape[i] = i == axis ? k : cn_dim(x, i);
    cn_tensor *it = rc == 0 ? cn_from_data(CN_I64, r, shape, idx) : NULL;
    free(v), free(line), free(idx);
    if (!it) return rc < 0 ? rc : CN_EINVAL;
    out[0] = cn_gather(x, axis, it);
    if (nout > 1) out[1] = it;
    return out[0] ? 0 : CN_EINVAL;
}

/* TopK: on data, sorted on the host; in a graph, k rounds of arg-extreme
 * and masking: exact, and the smaller index wins ties, as ONNX asks. Fine
 * for the small k models use. */
H(h_topk) {
    UNUSED;
    cn_tensor *x = in[0];
    int r = cn_ndim(x);
    int64_t k;
    if (c->opset_of_node < 10) k = onnx_attr_int(n, "k", -1);
    else {
        double kk;
        if (nin < 2 || !in[1]) return onnx_bad(c, "input 'K' is missing");
        if (cn_is_symbolic_tensor(in[1]))
            return onnx_needs_values(c, "input 'K' is computed at run time (the outputs' size)");
        if (onnx_const_scalar(c, in[1], "K", &kk) < 0) return CN_EINVAL;
        if (!onnx_fits_i64(kk)) return onnx_bad(c, "K is %g", kk);
        k = (int64_t)kk;
    }
    int axis = onnx_axis(c, onnx_attr_int(n, "axis", -1), r, "axis");
    if (axis < 0) return CN_EINVAL;
    int64_t d = cn_dim(x, axis);
    if (d < 0) return onnx_unsup(c, "an axis of unknown size");
    if (k < 0 || k > d) return onnx_bad(c, "k = %" PRId64 " for an axis of size %" PRId64, k, d);
    bool largest = onnx_attr_int(n, "largest", 1);
    if (!cn_is_symbolic_tensor(x)) return topk_data(x, axis, k, largest, out, nout);
    if (k > 1024) return onnx_unsup(c, "k = %" PRId64 " (at most 1024 in a static graph)", k);
    /* sorted = 0 allows any order; the sorted one is among them. */
    int64_t shp[CN_MAX_DIMS];
    for (int i = 0; i < r; i++) shp[i] = i == axis ? d : 1;
    cn_tensor *pos = cn_reshape(cn_arange(0, (double)d, 1, CN_I64), r, shp);
    cn_tensor *cur = cn_cast(x, CN_F64);
    cn_tensor *fill = cn_scalar(CN_F64, largest ? -INFINITY : INFINITY);
    cn_tensor *vals[1024], *idxs[1024];
    if (k == 0) {
        int64_t s[CN_MAX_DIMS];
        for (int i = 0; i < r; i++) s[i] = i == axis ? 0 : cn_dim(x, i);
        out[0] = cn_empty(cn_tensor_dtype(x), r, s);
        if (nout > 1) out[1] = cn_empty(CN_I64, r, s);
        return 0;
    }
    for (int64_t j = 0; j < k; j++) {
        cn_tensor *i = largest ? cn_argmax(cur, axis, true) : cn_argmin(cur, axis, true);
        idxs[j] = i;
        vals[j] = cn_gather(x, axis, i);
        cur = cn_where(cn_eq(pos, i), fill, cur);
        if (!cur) return CN_EINVAL;
    }
    out[0] = cn_concat(vals, (int)k, axis);
    if (nout > 1) out[1] = cn_concat(idxs, (int)k, axis);
    return out[0] ? 0 : CN_EINVAL;
}

H(h_matmul) {
    UNUSED;
    DONE(cn_matmul(in[0], in[1]));
}

H(h_gemm) {
    UNUSED;
    cn_tensor *a = in[0], *b = in[1];
    if (cn_ndim(a) != 2 || cn_ndim(b) != 2) return onnx_bad(c, "A and B must be 2-D");
    if (onnx_attr_int(n, "transA", 0)) a = cn_mT(a);
    if (onnx_attr_int(n, "transB", 0)) b = cn_mT(b);
    double alpha = onnx_attr_float(n, "alpha", 1.0), beta = onnx_attr_float(n, "beta", 1.0);
    cn_tensor *y = cn_matmul(a, b);
    if (alpha != 1.0) y = cn_mul_scalar(y, alpha);
    if (nin > 2 && in[2] && beta != 0.0) {
        cn_tensor *cc = in[2];
        if (beta != 1.0) cc = cn_mul_scalar(cc, beta);
        y = cn_add(y, cc);
    }
    DONE(y);
}

/* Einsum as one broadcast product over every letter, summed over the
 * letters the output lacks: exact, and fine for the small operands models
 * pass it (no ellipsis, no repeated letter within an operand). */
H(h_einsum) {
    UNUSED;
    char eq[256];
    const char *e = onnx_attr_str(n, "equation", "", eq, sizeof eq);
    char clean[256];
    int k = 0;
    for (const char *p = e; *p && k < 255; p++)
        if (*p != ' ') clean[k++] = *p;
    clean[k] = '\0';
    if (strstr(clean, "...")) return onnx_unsup(c, "ellipsis in '%s'", e);
    char *arrow = strstr(clean, "->");
    char lhs[256], outl[64];
    snprintf(lhs, sizeof lhs, "%.*s", arrow ? (int)(arrow - clean) : k, clean);
    char letters[64];
    int nl = 0, count[128] = {0};
    for (const char *p = lhs; *p; p++) {
        if (*p == ',') continue;
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) return onnx_bad(c, "equation '%s'", e);
        if (!count[(int)*p]++) {
            if (nl == CN_MAX_DIMS) return onnx_unsup(c, "more than %d letters", CN_MAX_DIMS);
            letters[nl++] = *p;
        }
    }
    if (arrow) snprintf(outl, sizeof outl, "%s", arrow + 2);
    else { /* implicit: the letters used once, in alphabetical order */
        int no = 0;
        for (int ch = 'A'; ch <= 'z'; ch++)
            if (ch < 128 && count[ch] == 1) outl[no++] = (char)ch;
        outl[no] = '\0';
    }
    int64_t size[128];
    for (int i = 0; i < 128; i++) size[i] = -1;
    cn_tensor *prod = NULL;
    const char *term = lhs;
    for (int op = 0; op < nin; op++) {
        const char *end = strchr(term, ',');
        int tl = end ? (int)(end - term) : (int)strlen(term);
        cn_tensor *x = in[op];
        if (tl != cn_ndim(x)) return onnx_bad(c, "operand %d has rank %d, the equation %d letters", op, cn_ndim(x), tl);
        int perm[CN_MAX_DIMS], np = 0;
        int64_t shp[CN_MAX_DIMS];
        for (int g = 0; g < nl; g++) {
            int pos = -1;
            for (int j = 0; j < tl; j++)
                if (term[j] == letters[g]) {
                    if (pos >= 0) return onnx_unsup(c, "a letter repeated within an operand");
                    pos = j;
                }
            shp[g] = 1;
            if (pos >= 0) {
                perm[np++] = pos;
                shp[g] = cn_dim(x, pos);
                int64_t *sz = &size[(int)letters[g]];
                if (shp[g] < 0) return onnx_unsup(c, "unknown sizes");
                if (*sz >= 0 && *sz != shp[g] && *sz != 1 && shp[g] != 1)
                    return onnx_bad(c, "letter %c has sizes %" PRId64 " and %" PRId64, letters[g], *sz, shp[g]);
                if (*sz < 0 || *sz == 1) *sz = shp[g];
            }
        }
        cn_tensor *t = cn_reshape(cn_permute(x, perm, np), nl, shp);
        prod = prod ? cn_mul(prod, t) : t;
        if (!end) {
            if (op != nin - 1) return onnx_bad(c, "%d operands for the equation", nin);
            break;
        }
        term = end + 1;
    }
    int sum_ax[CN_MAX_DIMS], ns = 0, keep[CN_MAX_DIMS], nk = 0;
    for (int g = 0; g < nl; g++) {
        if (strchr(outl, letters[g])) keep[nk++] = g;
        else sum_ax[ns++] = g;
    }
    if ((int)strlen(outl) != nk) return onnx_bad(c, "output letters of '%s'", e);
    cn_tensor *y = ns ? cn_sum(prod, sum_ax, ns, false) : prod;
    int perm[CN_MAX_DIMS];
    for (int i = 0; i < nk; i++)
        for (int j = 0; j < nk; j++)
            if (letters[keep[j]] == outl[i]) perm[i] = j;
    if (nk > 1) y = cn_permute(y, perm, nk);
    DONE(cn_cast(y, cn_tensor_dtype(in[0])));
}

const onnx_op_entry cn_onnx_ops_reduce[] = {
    {"Einsum", h_einsum, "equation", 1, 8, 1, "no ellipsis, no letter repeated within an operand; a broadcast product, for small operands"},
    {"ReduceSum", h_reduce_sum, "axes,keepdims,noop_with_empty_axes", 1, 2, 1, "axes must be constants"},
    {"ReduceMean", h_reduce_mean, "axes,keepdims,noop_with_empty_axes", 1, 2, 1, "axes must be constants"},
    {"ReduceMax", h_reduce_max, "axes,keepdims,noop_with_empty_axes", 1, 2, 1, "axes must be constants"},
    {"ReduceMin", h_reduce_min, "axes,keepdims,noop_with_empty_axes", 1, 2, 1, "axes must be constants"},
    {"ReduceProd", h_reduce_prod, "axes,keepdims,noop_with_empty_axes", 1, 2, 1, "axes must be constants"},
    {"ReduceL1", h_reduce_l1, "axes,keepdims,noop_with_empty_axes", 1, 2, 1, "axes must be constants"},
    {"ReduceL2", h_reduce_l2, "axes,keepdims,noop_with_empty_axes", 1, 2, 1, "axes must be constants"},
    {"ReduceLogSum", h_reduce_log_sum, "axes,keepdims,noop_with_empty_axes", 1, 2, 1, "axes must be constants"},
    {"ReduceLogSumExp", h_reduce_log_sum_exp, "axes,keepdims,noop_with_empty_axes", 1, 2, 1, "axes must be constants"},
    {"ReduceSumSquare", h_reduce_sum_square, "axes,keepdims,noop_with_empty_axes", 1, 2, 1, "axes must be constants"},
    {"Softmax", h_softmax, "axis", 1, 1, 1, "float inputs"},
    {"LogSoftmax", h_log_softmax, "axis", 1, 1, 1, "float inputs"},
    {"Hardmax", h_hardmax, "axis", 1, 1, 1, "float inputs"},
    {"ArgMax", h_argmax, "axis,keepdims,select_last_index", 1, 1, 1, ""},
    {"ArgMin", h_argmin, "axis,keepdims,select_last_index", 1, 1, 1, ""},
    {"TopK", h_topk, "axis,k,largest,sorted", 1, 2, 2, "in a static graph K at most 1024 (a computed K: the model runs eagerly); computed in f64"},
    {"MatMul", h_matmul, "", 2, 2, 1, ""},
    {"Gemm", h_gemm, "alpha,beta,transA,transB,broadcast", 2, 3, 1, ""},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

#endif /* CN_HAVE_ONNX */
