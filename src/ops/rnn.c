/* An LSTM layer direction over a whole sequence as one op (as cuDNN and
 * PyTorch run it), instead of a dozen small ops per time step. The kernels
 * are the backends' (src/backend/cpu/rnn.c for the CPU).
 *
 * lstm_seq(gx [T, N, 4H], w_hh [4H, H], h0 [N, H]?, c0 [N, H]?) -> y [T, N, 6H]
 *   gx is x W_ih^T + b_ih + b_hh of every step (one matmul, outside); per
 *   step a = gx_t + h_{t-1} w_hh^T, gates i, f, g, o = sigmoid, sigmoid,
 *   tanh, sigmoid of a's quarters, c_t = f c_{t-1} + i g, h_t = o tanh(c_t);
 *   y_t = (h_t, c_t, i, f, g, o). h0, c0 absent: zeros (3 inputs: h0 only).
 *   The gates are part of the output because an op has one output, and the
 *   backward pass reads them; their gradient is honoured like any other.
 *   reverse (i[0]): steps run from T - 1 down to 0.
 *
 * Gradients: lstm_seq_backward(y, dy, w_hh, c0?) runs the backward
 * recurrence once (one fused pass and one GEMM per step) and gives the
 * gates' pre-activation gradients, which are gx's; w_hh's gradient is then
 * one GEMM over all steps, h0's and c0's come from the op's extra row
 * (state_grads, i[1]). The walk gets all of them from one vjp_multi call.
 * With create_graph (eager), the same recurrence is built from ops instead,
 * so gradients of gradients work; lstm_seq_backward itself has no gradient
 * (a static graph differentiated twice through an LSTM fails, saying so).
 * The forward-mode rule is the linearised recurrence, built from ops. */
#include "op.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

static char *shp(char *buf, size_t n, const cn_tensor *t) {
    return cn_fmt_shape(buf, n, t->ndim, t->shape);
}

static bool known_ne(int64_t a, int64_t b) { return a >= 0 && b >= 0 && a != b; }

/* w_hh [4H, H]: *H, or -1 when unknown. */
static int hidden_of(const cn_op_def *op, const cn_tensor *w, int64_t *H) {
    char b[160];
    if (w->ndim != 2 || known_ne(w->shape[0], w->shape[1] < 0 ? -1 : 4 * w->shape[1]) ||
        (w->shape[1] < 0 && w->shape[0] >= 0 && w->shape[0] % 4))
        return cn_failc(CN_EINVAL, "%s: w_hh is %s; it must be [4H, H] (the i, f, g, o rows)",
                        op->name, shp(b, sizeof b, w));
    *H = w->shape[1] >= 0 ? w->shape[1] : w->shape[0] >= 0 ? w->shape[0] / 4 : -1;
    return CN_OK;
}

/* A state (h0 or c0) must be [N, H]. */
static int check_state(const cn_op_def *op, const char *name, const cn_tensor *s, int64_t N,
                       int64_t H) {
    char b[160];
    if (s->ndim != 2 || known_ne(s->shape[0], N) || known_ne(s->shape[1], H))
        return cn_failc(CN_EINVAL, "%s: %s is %s; expected [N, H] = [%" PRId64 ", %" PRId64 "]",
                        op->name, name, shp(b, sizeof b, s), N, H);
    return CN_OK;
}

static int64_t mul_known(int64_t k, int64_t H) { return H >= 0 ? k * H : -1; }

/* ---- lstm_seq ---- */

static int lstm_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                      cn_meta *m) {
    char b1[160], b2[160];
    if (nin < 2 || nin > 4)
        return cn_failc(CN_EINVAL, "%s: takes gx, w_hh and optionally h0 and c0 (2 to 4 inputs), "
                                   "got %d",
                        op->name, nin);
    const cn_tensor *gx = in[0], *w = in[1];
    int64_t H = -1;
    if (hidden_of(op, w, &H) < 0) return CN_EINVAL;
    if (gx->ndim != 3 || known_ne(gx->shape[2], mul_known(4, H)))
        return cn_failc(CN_EINVAL, "%s: gx is %s; expected [T, N, 4H] with H = %" PRId64
                                   " from w_hh %s",
                        op->name, shp(b1, sizeof b1, gx), H, shp(b2, sizeof b2, w));
    if (H < 0 && gx->shape[2] >= 0) H = gx->shape[2] / 4;
    int64_t N = gx->shape[1];
    for (int k = 2; k < nin; k++)
        if (check_state(op, k == 2 ? "h0" : "c0", in[k], N, H) < 0) return CN_EINVAL;
    a->i[0] = a->i[0] != 0;
    m->dtype = (cn_dtype)gx->dtype;
    m->ndim = 3;
    m->shape[0] = gx->shape[0];
    m->shape[1] = N;
    m->shape[2] = mul_known(6, H);
    return CN_OK;
}

/* x[t] along axis 0, and quarter/sixth k of a row of gates: [.., k H, (k+1) H). */
static cn_tensor *at(cn_tensor *x, int64_t t) { return cn_squeeze(cn_narrow(x, 0, t, 1), 0); }
static cn_tensor *part(cn_tensor *x, int k, int64_t H) { return cn_narrow(x, -1, k * H, H); }
/* x (1 - x), and 1 - x^2: the derivatives of sigmoid and tanh from their values. */
static cn_tensor *dsig(cn_tensor *s) { return cn_mul(s, cn_rsub_scalar(s, 1)); }
static cn_tensor *dtanh(cn_tensor *t) { return cn_rsub_scalar(cn_mul(t, t), 1); }
static cn_tensor *add_opt(cn_tensor *a, cn_tensor *b) { return a && b ? cn_add(a, b) : a ? a : b; }

static int64_t seq_len(const char *what, const cn_tensor *y) {
    if (y->shape[0] >= 0) return y->shape[0];
    cn_failc(CN_EUNSUPPORTED, "lstm_seq: %s needs the sequence length, which is unknown", what);
    return -1;
}

/* The backward recurrence built from ops (differentiable): create_graph. */
static int vjp_by_ops(cn_tensor *const *in, int nin, bool rev, cn_tensor *y, cn_tensor *gy,
                      const bool *need, cn_tensor **g) {
    cn_tensor *w = in[1], *h0 = nin > 2 ? in[2] : NULL, *c0 = nin > 3 ? in[3] : NULL;
    int64_t T = seq_len("its gradient", y), H = w->shape[1];
    if (T < 0) return CN_EUNSUPPORTED;
    cn_tensor **dgs = malloc(sizeof *dgs * (size_t)(T ? T : 1));
    if (!dgs) return cn_failc(CN_ENOMEM, "lstm_seq: out of memory");
    cn_tensor *dhn = NULL, *dcn = NULL, *dw = NULL;
    bool ok = true;
    for (int64_t k = T - 1; k >= 0 && ok; k--) {
        int64_t t = rev ? T - 1 - k : k;
        cn_tensor *yt = at(y, t), *dyt = at(gy, t), *yp = k > 0 ? at(y, rev ? t + 1 : t - 1) : NULL;
        cn_tensor *c = part(yt, 1, H), *i = part(yt, 2, H), *f = part(yt, 3, H);
        cn_tensor *gg = part(yt, 4, H), *o = part(yt, 5, H);
        cn_tensor *hp = yp ? part(yp, 0, H) : h0, *cp = yp ? part(yp, 1, H) : c0;
        cn_tensor *tc = cn_tanh(c);
        cn_tensor *dh = add_opt(part(dyt, 0, H), dhn);
        cn_tensor *dc = add_opt(cn_add(part(dyt, 1, H), cn_mul(cn_mul(dh, o), dtanh(tc))), dcn);
        cn_tensor *q[4] = {
            cn_mul(cn_add(cn_mul(dc, gg), part(dyt, 2, H)), dsig(i)),
            cn_mul(add_opt(cp ? cn_mul(dc, cp) : NULL, part(dyt, 3, H)), dsig(f)),
            cn_mul(cn_add(cn_mul(dc, i), part(dyt, 4, H)), dtanh(gg)),
            cn_mul(cn_add(cn_mul(dh, tc), part(dyt, 5, H)), dsig(o)),
        };
        cn_tensor *dg = dgs[t] = cn_concat(q, 4, -1);
        if (need[1] && hp) dw = add_opt(dw, cn_matmul(cn_mT(dg), hp));
        dcn = cn_mul(dc, f);
        dhn = cn_matmul(dg, w);
        ok = dg && dcn && dhn && (!need[1] || !hp || dw);
    }
    if (ok && need[0]) ok = (g[0] = T ? cn_stack(dgs, (int)T, 0) : cn_zeros_like_op(in[0])) != NULL;
    free(dgs);
    if (!ok) return CN_EINVAL;
    if (need[1] && !(g[1] = dw ? dw : cn_zeros_like_op(w))) return CN_EINVAL;
    if (nin > 2 && need[2] && !(g[2] = dhn ? dhn : cn_zeros_like_op(h0))) return CN_EINVAL;
    if (nin > 3 && need[3] && !(g[3] = dcn ? dcn : cn_zeros_like_op(c0))) return CN_EINVAL;
    return CN_OK;
}

/* w_hh's gradient: sum over steps of dg_t^T h_prev(t), as one product over
 * the steps whose h_prev is in y, plus h0's term. */
static cn_tensor *dw_of(cn_tensor *y, cn_tensor *dg, cn_tensor *h0, cn_tensor *w, bool rev,
                        int64_t T, int64_t H) {
    cn_tensor *r = NULL;
    if (T > 1) {
        cn_tensor *hp = cn_narrow(cn_narrow(y, 0, rev ? 1 : 0, T - 1), 2, 0, H);
        cn_tensor *d = cn_narrow(dg, 0, rev ? 0 : 1, T - 1);
        r = cn_matmul(cn_mT(cn_reshape(d, CN_SHAPE(-1, 4 * H))), cn_reshape(hp, CN_SHAPE(-1, H)));
        if (!r) return NULL;
    }
    if (h0 && T > 0) r = add_opt(r, cn_matmul(cn_mT(at(dg, rev ? T - 1 : 0)), h0));
    return r ? r : cn_zeros_like_op(w);
}

/* In a static graph, y's gradient is usually the gradient of its h part
 * (or h and c) scattered into zeros: the backward op then reads that part
 * alone, and the full-size zeros are never made (dce drops them). Returns
 * the tensor to pass as dy and sets *parts. */
static cn_tensor *leading_parts(cn_tensor *gout, int64_t H, int *parts) {
    const cn_node *n = cn_is_symbolic(gout) ? gout->node : NULL;
    *parts = 6;
    if (!n || n->op != CN_OP_slice_scatter || n->nin != 2 || H < 1) return gout;
    const cn_attrs *a = n->attrs;
    const cn_node *z = n->in[0]->node;
    int64_t stop = a->i[2];
    if (a->i[0] != 2 || a->i[1] != 0 || a->i[3] != 1 || stop % H || stop / H < 1 ||
        stop / H > 5 || !z || z->op != CN_OP_full_like || z->attrs->f[0] != 0 ||
        signbit(z->attrs->f[0]) || z->attrs->i[0] != -1 || n->in[1]->shape[2] != stop)
        return gout;
    *parts = (int)(stop / H);
    return n->in[1];
}

static int lstm_vjp_multi(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                          cn_tensor *gout, const bool *need, cn_tensor **g) {
    bool rev = a->i[0] != 0;
    if (cn_is_grad_enabled() && !cn_is_symbolic(out))
        return vjp_by_ops(in, nin, rev, out, gout, need, g);
    cn_tensor *w = in[1], *h0 = nin > 2 ? in[2] : NULL, *c0 = nin > 3 ? in[3] : NULL;
    int64_t T = seq_len("its gradient", out), H = w->shape[1];
    if (T < 0) return CN_EUNSUPPORTED;
    bool states = (nin > 2 && need[2]) || (nin > 3 && need[3]);
    int parts = 6;
    cn_tensor *dy = leading_parts(gout, H, &parts);
    cn_tensor *bin[4] = {out, dy, w, c0};
    cn_attrs ba = {.i = {rev, states, parts}};
    cn_tensor *b = cn_op_apply(CN_OP_lstm_seq_backward, bin, c0 ? 4 : 3, &ba);
    if (!b) return CN_EINVAL;
    cn_tensor *dg = states ? cn_narrow(b, 0, 0, T) : b;
    if (need[0] && !(g[0] = dg)) return CN_EINVAL;
    if (need[1] && !(g[1] = dw_of(out, dg, h0, w, rev, T, H))) return CN_EINVAL;
    cn_tensor *last = states ? at(b, T) : NULL;
    if (nin > 2 && need[2] && !(g[2] = part(last, 0, H))) return CN_EINVAL;
    if (nin > 3 && need[3] && !(g[3] = part(last, 1, H))) return CN_EINVAL;
    return CN_OK;
}

static cn_tensor *lstm_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                           cn_tensor *gout, int i) {
    bool need[4] = {false, false, false, false};
    cn_tensor *g[4] = {NULL, NULL, NULL, NULL};
    need[i] = true;
    return lstm_vjp_multi(in, nin, a, out, gout, need, g) < 0 ? NULL : g[i];
}

/* Forward mode: the tangent of each step from those of gx, w_hh and the
 * previous state, with the saved gates. */
static cn_tensor *lstm_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                           const cn_attrs *a, cn_tensor *out) {
    bool rev = a->i[0] != 0;
    cn_tensor *w = in[1], *h0 = nin > 2 ? in[2] : NULL, *c0 = nin > 3 ? in[3] : NULL;
    cn_tensor *tgx = tin[0], *tw = tin[1];
    cn_tensor *th = nin > 2 ? tin[2] : NULL, *tc = nin > 3 ? tin[3] : NULL;
    int64_t T = seq_len("its forward-mode rule", out), H = w->shape[1];
    if (T < 0) return NULL;
    if (T == 0) return cn_zeros_like_op(out);
    cn_tensor **ts = malloc(sizeof *ts * (size_t)T);
    if (!ts) return cn_fail("lstm_seq: out of memory");
    bool ok = true;
    for (int64_t k = 0; k < T && ok; k++) {
        int64_t t = rev ? T - 1 - k : k;
        cn_tensor *yt = at(out, t), *yp = k > 0 ? at(out, rev ? t + 1 : t - 1) : NULL;
        cn_tensor *c = part(yt, 1, H), *i = part(yt, 2, H), *f = part(yt, 3, H);
        cn_tensor *gg = part(yt, 4, H), *o = part(yt, 5, H);
        cn_tensor *hp = yp ? part(yp, 0, H) : h0, *cp = yp ? part(yp, 1, H) : c0;
        cn_tensor *ta = tgx ? at(tgx, t) : NULL;
        if (th) ta = add_opt(ta, cn_matmul(th, cn_mT(w)));
        if (tw && hp) ta = add_opt(ta, cn_matmul(hp, cn_mT(tw)));
        if (!ta) ta = cn_zeros_like_op(cn_narrow(yt, -1, 2 * H, 4 * H));
        cn_tensor *ti = cn_mul(dsig(i), part(ta, 0, H)), *tf = cn_mul(dsig(f), part(ta, 1, H));
        cn_tensor *tg = cn_mul(dtanh(gg), part(ta, 2, H)), *to = cn_mul(dsig(o), part(ta, 3, H));
        cn_tensor *ntc = cn_add(cn_mul(ti, gg), cn_mul(i, tg));
        if (cp) ntc = cn_add(ntc, cn_mul(tf, cp));
        if (tc) ntc = cn_add(ntc, cn_mul(f, tc));
        cn_tensor *tcc = cn_tanh(c);
        cn_tensor *nth = cn_add(cn_mul(to, tcc), cn_mul(cn_mul(o, dtanh(tcc)), ntc));
        cn_tensor *row[6] = {nth, ntc, ti, tf, tg, to};
        ts[t] = cn_concat(row, 6, -1);
        th = nth;
        tc = ntc;
        ok = ts[t] != NULL;
    }
    cn_tensor *r = ok ? cn_stack(ts, (int)T, 0) : NULL;
    free(ts);
    return r;
}

const cn_op_def cn_opdef_lstm_seq = {
    .name = "lstm_seq",
    .ninputs = -1,
    .promote_from = 0,
    .flags = CN_OPF_PROMOTE | CN_OPF_FLOAT_MATH,
    .attrs = {{"reverse", CN_ATTR_BOOL, 0, 0}},
    .infer = lstm_infer,
    .vjp = lstm_vjp,
    .jvp = lstm_jvp,
    .vjp_multi = lstm_vjp_multi,
    .doc = "inputs gx [T, N, 4H], w_hh [4H, H], h0?, c0? [N, H]; per step a = gx_t + h w_hh^T, "
           "i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of a's quarters, c = f c + i g, "
           "h = o tanh(c); y_t = (h, c, i, f, g, o) [T, N, 6H]; reverse runs t from T - 1 down",
};

cn_tensor *cn_lstm_seq_run(cn_tensor *gx, cn_tensor *w_hh, cn_tensor *h0, cn_tensor *c0,
                           bool reverse, cn_tensor **hn, cn_tensor **cn) {
    *hn = *cn = NULL;
    if (!gx || !w_hh) return NULL;
    int64_t T = gx->shape[0], H = w_hh->shape[1];
    cn_tensor *in[4] = {gx, w_hh, h0 ? h0 : c0 ? cn_zeros_like_op(c0) : NULL, c0};
    int nin = c0 ? 4 : h0 ? 3 : 2;
    cn_tensor *y = cn_op_apply(CN_OP_lstm_seq, in, nin, &(cn_attrs){.i = {reverse}});
    if (!y) return NULL;
    cn_tensor *last = at(y, reverse ? 0 : T - 1);
    *hn = cn_narrow(last, 1, 0, H);
    *cn = cn_narrow(last, 1, H, H);
    return *hn && *cn ? cn_narrow(y, 2, 0, H) : NULL;
}

/* ---- lstm_seq_backward: y, dy, w_hh, c0? -> the gates' pre-activation
 * gradients [T, N, 4H] (+ a row (dh0, dc0, 0, 0) with state_grads) ---- */

static int lstmb_infer(const cn_op_def *op, cn_tensor *const *in, int nin, cn_attrs *a,
                       cn_meta *m) {
    char b1[160], b2[160];
    if (nin < 3 || nin > 4)
        return cn_failc(CN_EINVAL, "%s: takes y, dy, w_hh and optionally c0 (3 or 4 inputs), got "
                                   "%d",
                        op->name, nin);
    const cn_tensor *y = in[0], *dy = in[1];
    int64_t H = -1;
    if (hidden_of(op, in[2], &H) < 0) return CN_EINVAL;
    if (y->ndim != 3 || known_ne(y->shape[2], mul_known(6, H)))
        return cn_failc(CN_EINVAL, "%s: y is %s; expected [T, N, 6H] with H = %" PRId64, op->name,
                        shp(b1, sizeof b1, y), H);
    if (a->i[2] < 0 || a->i[2] > 6)
        return cn_failc(CN_EINVAL, "%s: dy_parts is %" PRId64 "; it must be 1 to 6 (0: 6)",
                        op->name, a->i[2]);
    if (a->i[2] == 0) a->i[2] = 6;
    /* dy: the first dy_parts of y's six parts (the others are zeros). */
    bool same = dy->ndim == 3 && !known_ne(dy->shape[2], mul_known(a->i[2], H));
    for (int d = 0; same && d < 2; d++) same = !known_ne(dy->shape[d], y->shape[d]);
    if (!same)
        return cn_failc(CN_EINVAL, "%s: dy is %s but y is %s (dy_parts %" PRId64 ")", op->name,
                        shp(b1, sizeof b1, dy), shp(b2, sizeof b2, y), a->i[2]);
    if (nin > 3 && check_state(op, "c0", in[3], y->shape[1], H) < 0) return CN_EINVAL;
    a->i[0] = a->i[0] != 0;
    a->i[1] = a->i[1] != 0;
    m->dtype = (cn_dtype)y->dtype;
    m->ndim = 3;
    m->shape[0] = y->shape[0] >= 0 ? y->shape[0] + a->i[1] : -1;
    m->shape[1] = y->shape[1];
    m->shape[2] = mul_known(4, H);
    return CN_OK;
}

static cn_tensor *lstmb_unsupported(void) {
    cn_failc(CN_EUNSUPPORTED, "lstm_seq_backward: the gradient of an LSTM's gradient is not "
                              "supported in static graphs (in eager mode, create_graph builds it "
                              "from ops)");
    return NULL;
}

static cn_tensor *lstmb_vjp(cn_tensor *const *in, int nin, const cn_attrs *a, cn_tensor *out,
                            cn_tensor *gout, int i) {
    (void)in, (void)nin, (void)a, (void)out, (void)gout, (void)i;
    return lstmb_unsupported();
}

static cn_tensor *lstmb_jvp(cn_tensor *const *in, cn_tensor *const *tin, int nin,
                            const cn_attrs *a, cn_tensor *out) {
    (void)in, (void)tin, (void)nin, (void)a, (void)out;
    return lstmb_unsupported();
}

const cn_op_def cn_opdef_lstm_seq_backward = {
    .name = "lstm_seq_backward",
    .ninputs = -1,
    .promote_from = 0,
    .flags = CN_OPF_PROMOTE | CN_OPF_FLOAT_MATH | CN_OPF_FIRST_ORDER,
    .attrs = {{"reverse", CN_ATTR_BOOL, 0, 0},
              {"state_grads", CN_ATTR_BOOL, 1, 0},
              {"dy_parts", CN_ATTR_INT, 2, 6}},
    .infer = lstmb_infer,
    .vjp = lstmb_vjp,
    .jvp = lstmb_jvp,
    .doc = "inputs y = lstm_seq(...), dy, w_hh, c0?: the gradient of the gates' pre-activations "
           "[T, N, 4H] (gx's), by the backward recurrence; state_grads appends a row "
           "(dh0, dc0, 0, 0); dy holds the first dy_parts of y's parts (the rest are zeros)",
    .grad_doc = "not differentiable again (second-order gradients of lstm_seq come from ops, in "
                "eager mode with create_graph)",
};
