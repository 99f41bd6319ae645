/* GELU written out, as exporters write it before opset 20 gave it a node,
 * imported as one gelu op:
 *
 *   x * (1 + Erf(x / sqrt 2)) * 0.5                          (the erf form)
 *   x * (1 + Tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) * 0.5 (the tanh form)
 *
 * with the product's factors in any order and grouping (PyTorch writes
 * Mul(Mul(x, 1 + erf), 0.5), Hugging Face's code Mul(Mul(x, 0.5), 1 + erf)),
 * the constants spread over the product's Muls (up to three deep) and over
 * any number of Mul or Div nodes on erf's or tanh's argument, x^3 a Pow
 * or two Muls. The match is made at the last Mul, walking back through the
 * file's nodes as the attention match does (onnx_attention.c): the nodes
 * it covers were imported as ordinary ops first, and since nothing else
 * reads their values, compiling the graph drops them.
 *
 * Why: written out, the erf form is six elementwise ops, which the fusion
 * pass runs as an expression with erf in it (1.7 ns an element in
 * ConvNeXt-T's feed-forward layers, about 14% of the model's time), where
 * gelu is one function; ONNX Runtime fuses the same pattern. The results
 * differ by the roundings of the ops written out: gelu's (6 ulp at most,
 * src/backend/cpu/vmath.h) against theirs, whose 1 + erf loses the tail's
 * relative accuracy for negative x (x = -5: erf is -1 + 1.5e-12, and 1 +
 * erf in f32 keeps none of it). */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX
#include <math.h>

/* Relative distance of a constant from the value it stands for: exporters
 * write constants rounded to f32 (or to what the source's code spelled). */
#define GELU_CONST_TOL 1e-6

static bool near(double v, double want) { return fabs(v - want) <= GELU_CONST_TOL * fabs(want); }

/* Leaves of the product tree under name: Mul nodes are opened (to a depth
 * that covers the forms above) but for the one writing stop (x itself),
 * anything else is a leaf. A Mul read elsewhere too (PyTorch merges equal
 * nodes, so x * 0.5 may serve several GELUs) stays for its other readers;
 * the match is right regardless. The erf or tanh under 1 + erf, which is
 * where the time goes, is replaced only when nothing else reads it.
 * Returns the number of leaves, or -1 for too many. */
#define GELU_MAX_LEAVES 6
static int factors(const onnx_ctx *c, const char *name, const char *stop, int depth,
                   const char **leaf, int n) {
    const Onnx__NodeProto *p = depth < 3 && (!stop || strcmp(name, stop)) ? onnx_producer(c, name) : NULL;
    if (onnx_is_op(p, "Mul") && p->n_input == 2) {
        n = factors(c, p->input[0], stop, depth + 1, leaf, n);
        return n < 0 ? n : factors(c, p->input[1], stop, depth + 1, leaf, n);
    }
    if (n == GELU_MAX_LEAVES) return -1;
    leaf[n] = name;
    return n + 1;
}

static bool same(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* x^3 as Pow(x, 3), Mul(Mul(x, x), x) or Mul(x, Mul(x, x)). */
static bool cube_of(const onnx_ctx *c, const vmap *vals, const char *name, const char *x) {
    const cn_tensor *xt = vmap_get(vals, x);
    double e;
    const Onnx__NodeProto *p = onnx_inner(c, name, "Pow");
    if (p)
        return p->n_input == 2 && same(p->input[0], x) &&
               onnx_pattern_scalar(vals, p->input[1], xt, &e) && e == 3;
    p = onnx_inner(c, name, "Mul");
    if (!p || p->n_input != 2) return false;
    for (int i = 0; i < 2; i++) {
        const Onnx__NodeProto *sq = onnx_inner(c, p->input[i], "Mul");
        if (same(p->input[1 - i], x) && sq && sq->n_input == 2 && same(sq->input[0], x) &&
            same(sq->input[1], x))
            return true;
    }
    return false;
}

/* The x of the tanh form's argument sqrt(2 / pi) (x + 0.044715 x^3), or
 * NULL. */
static const char *tanh_arg_of(const onnx_ctx *c, const vmap *vals, const char *arg) {
    double beta = 1;
    const Onnx__NodeProto *add = onnx_inner(c, onnx_unscale(c, vals, arg, &beta), "Add");
    if (!add || add->n_input != 2 || !near(beta, 0.7978845608028654)) return NULL;
    for (int i = 0; i < 2; i++) {
        double kappa = 1;
        const char *x = add->input[i];
        if (x && cube_of(c, vals, onnx_unscale(c, vals, add->input[1 - i], &kappa), x) &&
            near(kappa, 0.044715))
            return x;
    }
    return NULL;
}

/* leaf is 1 + Erf(a) (0) or 1 + Tanh(a) (1), a going to *arg; -1 if it
 * is neither. */
static int one_plus(const onnx_ctx *c, const vmap *vals, const char *leaf, const char **arg) {
    const Onnx__NodeProto *add = onnx_inner(c, leaf, "Add");
    if (!add || add->n_input != 2) return -1;
    for (int i = 0; i < 2; i++) {
        double one;
        const cn_tensor *ft = vmap_get(vals, add->input[i]);
        if (!ft || !onnx_pattern_scalar(vals, add->input[1 - i], ft, &one) || one != 1) continue;
        for (int form = 0; form < 2; form++) {
            const Onnx__NodeProto *f = onnx_inner(c, add->input[i], form ? "Tanh" : "Erf");
            if (f && f->n_input == 1) {
                *arg = f->input[0];
                return form;
            }
        }
    }
    return -1;
}

/* The x of the leaf 1 + Erf(x / sqrt 2) or 1 + Tanh(...), or NULL; *form
 * 0 for erf, 1 for tanh. */
static const char *gelu_x(const onnx_ctx *c, const vmap *vals, const char *leaf, int *form) {
    const char *arg = NULL;
    *form = one_plus(c, vals, leaf, &arg);
    if (*form == 1) return tanh_arg_of(c, vals, arg);
    double s = 1;
    const char *x = *form == 0 ? onnx_unscale(c, vals, arg, &s) : NULL;
    return x && near(s, 0.70710678118654752) ? x : NULL;
}

int onnx_fuse_gelu(onnx_ctx *c, const vmap *vals, const Onnx__NodeProto *n, cn_tensor **out) {
    if (!c->graph || !onnx_is_op(n, "Mul") || n->n_input != 2) return 0;
    /* First the 1 + erf (or tanh) factor and its x, then the leaves again
     * with x left whole: x, that factor, and constants making 0.5. */
    const char *leaf[GELU_MAX_LEAVES], *x = NULL, *e = NULL;
    int form = -1;
    int nl = factors(c, n->input[0], NULL, 1, leaf, 0);
    if (nl >= 0) nl = factors(c, n->input[1], NULL, 1, leaf, nl);
    for (int i = 0; i < nl && !x; i++)
        if ((x = gelu_x(c, vals, leaf[i], &form))) e = leaf[i];
    if (!x) return 0;
    nl = factors(c, n->input[0], x, 1, leaf, 0);
    if (nl >= 0) nl = factors(c, n->input[1], x, 1, leaf, nl);
    cn_tensor *xt = vmap_get(vals, x);
    if (nl < 3 || !xt || !cn_dtype_is_float(cn_tensor_dtype(xt))) return 0;
    int nx = 0, ne = 0;
    double half = 1;
    for (int i = 0; i < nl; i++) {
        double v;
        if (!strcmp(leaf[i], x)) nx++;
        else if (!strcmp(leaf[i], e)) ne++;
        else if (onnx_pattern_scalar(vals, leaf[i], xt, &v)) half *= v;
        else return 0;
    }
    /* 1 + erf of x's very shape: a constant on the way that broadcast it
     * to more axes would make gelu(x) the wrong shape. */
    const cn_tensor *et = vmap_get(vals, e);
    bool shape_ok = et && cn_ndim(et) == cn_ndim(xt);
    for (int i = 0; shape_ok && i < cn_ndim(xt); i++) shape_ok = cn_dim(et, i) == cn_dim(xt, i);
    if (nx != 1 || ne != 1 || !shape_ok || !near(half, 0.5)) return 0;
    cn_tensor *y = cn_gelu(xt, form == 1);
    if (!y) { /* the op refused it: the ops stay */
        cn_clear_error();
        return 0;
    }
    out[0] = y;
    return 1;
}

#endif
