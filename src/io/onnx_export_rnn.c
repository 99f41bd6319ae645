/* ONNX export of lstm_seq as its exact composition, step by step. ONNX's
 * LSTM node computes the input projection itself and gives neither c of
 * every step nor the gates, which lstm_seq's output holds; the composition
 * gives all of it with the ops every runtime has (the unrolled graph
 * Chutney built before the fused op). Needs the sequence length. */
#include "onnx_export.h"

#ifdef CN_HAVE_ONNX

/* x[:, k H : (k + 1) H] of a [N, 4H] value. */
static const char *quarter(ox_ctx *c, const char *x, int64_t k, int64_t H) {
    int64_t b = k * H, e = (k + 1) * H, axis = 1;
    const char *ins[4] = {x, ox_const_i64s(c, &b, 1), ox_const_i64s(c, &e, 1),
                          ox_const_i64s(c, &axis, 1)};
    return ox_op1(c, "Slice", ins, 4);
}

const char *ox_emit_lstm_seq(ox_ctx *c, const ir_step *s, const char *const *in,
                             cn_tensor *const *it, const cn_tensor *out) {
    int64_t T = it[0]->shape[0], H = it[1]->shape[1];
    if (T < 1) return ox_unsup(c, "a sequence of unknown or zero length");
    if (H < 0) return ox_unsup(c, "an unknown hidden size");
    bool rev = s->attrs.i[0] != 0;
    int64_t perm[2] = {1, 0};
    Onnx__NodeProto *tr = ox_node(c, "Transpose", &in[1], 1, 1);
    if (!tr || ox_attr_ints(c, tr, "perm", perm, 2) < 0) return NULL;
    const char *wt = tr->output[0];
    const char *h = s->nin > 2 ? in[2] : NULL, *cs = s->nin > 3 ? in[3] : NULL;
    const char **rows = ox_alloc(c, sizeof *rows * (size_t)T);
    if (!rows) return NULL;
    for (int64_t k = 0; k < T; k++) {
        int64_t t = rev ? T - 1 - k : k;
        const char *gi[2] = {in[0], ox_const_scalar(c, CN_I64, (double)t)};
        Onnx__NodeProto *g = ox_node(c, "Gather", gi, 2, 1);
        if (!g || ox_attr_int(c, g, "axis", 0) < 0) return NULL;
        const char *a = g->output[0];
        if (h) a = ox_binary(c, "Add", a, ox_binary(c, "MatMul", h, wt));
        const char *gi_ = ox_unary(c, "Sigmoid", quarter(c, a, 0, H));
        const char *gf = ox_unary(c, "Sigmoid", quarter(c, a, 1, H));
        const char *gg = ox_unary(c, "Tanh", quarter(c, a, 2, H));
        const char *go = ox_unary(c, "Sigmoid", quarter(c, a, 3, H));
        const char *ig = ox_binary(c, "Mul", gi_, gg);
        cs = cs ? ox_binary(c, "Add", ox_binary(c, "Mul", gf, cs), ig) : ig;
        h = ox_binary(c, "Mul", go, ox_unary(c, "Tanh", cs));
        const char *parts[6] = {h, cs, gi_, gf, gg, go};
        Onnx__NodeProto *cat = ox_node(c, "Concat", parts, 6, 1);
        if (!cat || ox_attr_int(c, cat, "axis", 1) < 0) return NULL;
        rows[t] = cat->output[0];
    }
    /* [T N, 6H] in time order, then [T, N, 6H]. */
    Onnx__NodeProto *cat = ox_node(c, "Concat", rows, (int)T, 1);
    if (!cat || ox_attr_int(c, cat, "axis", 0) < 0) return NULL;
    int64_t shape[3] = {T, -1, 6 * H};
    const char *ri[2] = {cat->output[0], ox_const_i64s(c, shape, 3)};
    (void)out;
    return ox_op1(c, "Reshape", ri, 2);
}

#endif /* CN_HAVE_ONNX */
