/* ONNX recurrent ops (RNN, LSTM, GRU), unrolled over the sequence length,
 * which must be known at load time. The input projection of every time
 * step is one matmul per direction; each step adds the recurrent product.
 * An LSTM with the default activations, no peepholes and no clip is one
 * lstm_seq op per direction instead.
 * A missing initial state is zero, and its terms are left out (the batch
 * size may then stay unknown). */
#include "onnx_internal.h"

#include "../ops/op.h" /* cn_lstm_seq_run */

#ifdef CN_HAVE_ONNX
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#define MAX_STEPS 4096

typedef enum { A_SIGMOID, A_TANH, A_RELU } act;
typedef enum { K_RNN, K_GRU, K_LSTM } kind;

static cn_tensor *apply(act a, cn_tensor *x, double clip) {
    if (clip > 0) x = cn_clamp(x, -clip, clip);
    return a == A_SIGMOID ? cn_sigmoid(x) : a == A_TANH ? cn_tanh(x) : cn_relu(x);
}

/* NULL is a zero term. */
static cn_tensor *add0(cn_tensor *a, cn_tensor *b) { return !a ? b : !b ? a : cn_add(a, b); }
static cn_tensor *gate(cn_tensor *x, int g, int64_t hs) { return cn_narrow(x, -1, g * hs, hs); }
static cn_tensor *gate0(cn_tensor *x, int g, int64_t hs) { return cn_narrow(x, 0, g * hs, hs); }

typedef struct rnn_cfg {
    kind k;
    int G;            /* gates */
    int64_t hs;
    act f, g, h;      /* gate, cell and hidden activations */
    double clip;
    bool lbr;         /* GRU linear_before_reset */
} rnn_cfg;

/* ONNX's gate order i, o, f, c along axis 0 as lstm_seq's i, f, g(=c), o. */
static cn_tensor *ifgo(cn_tensor *x, int64_t hs) {
    cn_tensor *q[4] = {gate0(x, 0, hs), gate0(x, 2, hs), gate0(x, 3, hs), gate0(x, 1, hs)};
    return cn_concat(q, 4, 0);
}

/* An LSTM direction with the default activations, no peepholes and no
 * clip: one lstm_seq op (src/ops/rnn.c) over the whole sequence. */
static int run_lstm_seq(const rnn_cfg *r, cn_tensor *x, cn_tensor *W, cn_tensor *R, cn_tensor *B,
                        cn_tensor *h0, cn_tensor *c0, bool reverse, int64_t T, cn_tensor **ys,
                        cn_tensor **hn, cn_tensor **cn_out) {
    int64_t hs = r->hs;
    cn_tensor *gx = cn_matmul(x, cn_mT(ifgo(W, hs)));
    if (B) gx = cn_add(gx, ifgo(cn_add(cn_narrow(B, 0, 0, 4 * hs), cn_narrow(B, 0, 4 * hs, 4 * hs)), hs));
    cn_tensor *h = cn_lstm_seq_run(gx, ifgo(R, hs), h0, c0, reverse, hn, cn_out);
    if (!h) return CN_EINVAL;
    for (int64_t t = 0; t < T; t++) ys[t] = cn_squeeze(cn_narrow(h, 0, t, 1), 0);
    return 0;
}

/* Where step t is inside each of the N sequences (lens): a bool [N, 1]. */
static cn_tensor *step_mask(cn_tensor *like, const int64_t *lens, int64_t N, int64_t t) {
    uint8_t *b = malloc((size_t)N);
    if (!b) return cn_fail("recurrent: out of memory");
    for (int64_t i = 0; i < N; i++) b[i] = t < lens[i];
    cn_tensor *m = cn_from_data_on(cn_tensor_device(like), CN_BOOL, 2, (int64_t[]){N, 1}, b);
    free(b);
    return m;
}

/* One direction over x [T, N, in]: the outputs of every step into ys
 * (in time order), the last hidden state and cell into *hn, *cn. lens
 * (NULL: all T) gives each sequence's length: past its end a sequence's
 * output is 0 and its state stays (ONNX's sequence_lens), so the reverse
 * direction starts at its last step. */
static int run_dir(const rnn_cfg *r, cn_tensor *x, cn_tensor *W, cn_tensor *R, cn_tensor *B,
                   cn_tensor *P, cn_tensor *h0, cn_tensor *c0, bool reverse, int64_t T,
                   const int64_t *lens, int64_t N, cn_tensor **ys, cn_tensor **hn,
                   cn_tensor **cn_out) {
    int64_t hs = r->hs, full = T;
    for (int64_t i = 0; lens && i < N; i++)
        if (lens[i] < full) full = lens[i];
    if (r->k == K_LSTM && T > 0 && !P && r->clip <= 0 && r->f == A_SIGMOID && r->g == A_TANH &&
        r->h == A_TANH && full == T)
        return run_lstm_seq(r, x, W, R, B, h0, c0, reverse, T, ys, hn, cn_out);
    cn_tensor *xw = cn_matmul(x, cn_mT(W)); /* [T, N, G H] */
    cn_tensor *wb = NULL, *rb = NULL;
    if (B) {
        wb = cn_narrow(B, 0, 0, r->G * hs);
        rb = cn_narrow(B, 0, r->G * hs, r->G * hs);
        if (r->k == K_GRU) {
            /* The h gate's recurrent bias goes inside the reset product. */
            xw = cn_add(xw, cn_add(wb, cn_concat((cn_tensor *[]){gate(rb, 0, hs), gate(rb, 1, hs),
                                                                 cn_zeros_like(gate(rb, 2, hs))},
                                                 3, 0)));
        } else xw = cn_add(xw, cn_add(wb, rb));
    }
    cn_tensor *Rt = cn_mT(R), *hprev = h0, *cprev = c0;
    for (int64_t s = 0; s < T; s++) {
        int64_t t = reverse ? T - 1 - s : s;
        cn_tensor *xt = cn_squeeze(cn_narrow(xw, 0, t, 1), 0);
        cn_tensor *ht, *c_before = cprev;
        if (r->k == K_RNN) {
            ht = apply(r->f, add0(xt, hprev ? cn_matmul(hprev, Rt) : NULL), r->clip);
        } else if (r->k == K_LSTM) {
            cn_tensor *hr = hprev ? cn_matmul(hprev, Rt) : NULL;
            cn_tensor *pre = add0(xt, hr);
            cn_tensor *pi = gate(pre, 0, hs), *po = gate(pre, 1, hs), *pf = gate(pre, 2, hs),
                      *pc = gate(pre, 3, hs);
            if (P && cprev) {
                pi = cn_add(pi, cn_mul(gate(P, 0, hs), cprev));
                pf = cn_add(pf, cn_mul(gate(P, 2, hs), cprev));
            }
            cn_tensor *i = apply(r->f, pi, r->clip), *f = apply(r->f, pf, r->clip);
            cn_tensor *cc = apply(r->g, pc, r->clip);
            cn_tensor *ct = add0(cprev ? cn_mul(f, cprev) : NULL, cn_mul(i, cc));
            if (P) po = cn_add(po, cn_mul(gate(P, 1, hs), ct));
            cn_tensor *o = apply(r->f, po, r->clip);
            ht = cn_mul(o, apply(r->h, ct, r->clip));
            cprev = ct;
        } else {
            cn_tensor *hr = hprev ? cn_matmul(hprev, Rt) : NULL; /* [N, 3H] without Rbh */
            cn_tensor *z = apply(r->f, add0(gate(xt, 0, hs), hr ? gate(hr, 0, hs) : NULL), r->clip);
            cn_tensor *rr = apply(r->f, add0(gate(xt, 1, hs), hr ? gate(hr, 1, hs) : NULL), r->clip);
            cn_tensor *rbh = rb ? gate(rb, 2, hs) : NULL, *hh;
            if (r->lbr) hh = add0(hr ? gate(hr, 2, hs) : NULL, rbh);
            else hh = add0(hprev ? cn_matmul(cn_mul(rr, hprev), cn_mT(cn_narrow(R, 0, 2 * hs, hs))) : NULL, rbh);
            cn_tensor *cand = gate(xt, 2, hs);
            if (hh) cand = cn_add(cand, r->lbr ? cn_mul(rr, hh) : hh);
            cn_tensor *hc = apply(r->g, cand, r->clip);
            /* (1 - z) h~ + z h_prev */
            ht = cn_mul(cn_rsub_scalar(z, 1), hc);
            if (hprev) ht = cn_add(ht, cn_mul(z, hprev));
        }
        if (!ht) return CN_EINVAL;
        ys[t] = ht;
        if (t >= full) {
            cn_tensor *mb = step_mask(ht, lens, N, t);
            if (!mb) return CN_EINVAL;
            /* selected, not multiplied: padding may hold NaN or inf */
            cn_tensor *zero = onnx_scalar_like(ht, 0);
            ys[t] = cn_where(mb, ht, zero);
            ht = hprev ? cn_where(mb, ht, hprev) : ys[t];
            if (r->k == K_LSTM) cprev = cn_where(mb, cprev, c_before ? c_before : zero);
        }
        hprev = ht;
    }
    *hn = hprev;
    *cn_out = cprev;
    return 0;
}

static int parse_act(onnx_ctx *c, const Onnx__NodeProto *n, int i, act def, act *out) {
    const Onnx__AttributeProto *a = onnx_attr(n, "activations");
    if (!a || (size_t)i >= a->n_strings) {
        *out = def;
        return 0;
    }
    const ProtobufCBinaryData *s = &a->strings[i];
    if (s->len == 7 && !memcmp(s->data, "Sigmoid", 7)) *out = A_SIGMOID;
    else if (s->len == 4 && !memcmp(s->data, "Tanh", 4)) *out = A_TANH;
    else if (s->len == 4 && !memcmp(s->data, "Relu", 4)) *out = A_RELU;
    else return onnx_unsup(c, "activation '%.*s'", (int)s->len, (const char *)s->data);
    return 0;
}

static int recurrent(onnx_ctx *c, const Onnx__NodeProto *n, cn_tensor **in, int nin,
                     cn_tensor **out, int nout, kind k) {
    rnn_cfg r = {.k = k, .G = k == K_RNN ? 1 : k == K_GRU ? 3 : 4};
    cn_tensor *x = in[0], *W = in[1], *R = in[2];
    cn_tensor *B = nin > 3 ? in[3] : NULL, *lens = nin > 4 ? in[4] : NULL;
    cn_tensor *h0 = nin > 5 ? in[5] : NULL, *c0 = k == K_LSTM && nin > 6 ? in[6] : NULL;
    cn_tensor *P = k == K_LSTM && nin > 7 ? in[7] : NULL;
    char db[24];
    const char *dir = onnx_attr_str(n, "direction", "forward", db, sizeof db);
    int nd = !strcmp(dir, "bidirectional") ? 2 : 1;
    bool rev = !strcmp(dir, "reverse");
    if (nd == 1 && !rev && strcmp(dir, "forward")) return onnx_bad(c, "direction '%s'", dir);
    if (onnx_attr(n, "activation_alpha") || onnx_attr(n, "activation_beta"))
        return onnx_unsup(c, "activation_alpha / activation_beta");
    if (k == K_LSTM && onnx_attr_int(n, "input_forget", 0)) return onnx_unsup(c, "input_forget = 1");
    r.clip = onnx_attr_float(n, "clip", 0);
    r.lbr = onnx_attr_int(n, "linear_before_reset", 0);
    bool batch_first = onnx_attr_int(n, "layout", 0);
    if (cn_ndim(x) != 3 || cn_ndim(W) != 3 || cn_ndim(R) != 3) return onnx_bad(c, "X, W and R must be 3-D");
    if (batch_first) {
        /* layout 1: X [N, T, in], initial_h/initial_c [N, D, H] */
        x = cn_transpose(x, 0, 1);
        if (h0) h0 = cn_transpose(h0, 0, 1);
        if (c0) c0 = cn_transpose(c0, 0, 1);
    }
    r.hs = cn_dim(R, 2);
    int64_t hsa = onnx_attr_int(n, "hidden_size", r.hs);
    /* A hidden size of 0 makes every gate and output empty: not a
     * recurrent layer, and no exporter writes one. */
    if (hsa < 1) return onnx_bad(c, "hidden_size is %" PRId64 " (must be at least 1)", hsa);
    if (r.hs < 1) return onnx_bad(c, "R's hidden size (its last axis) is %" PRId64 " (must be at least 1)", r.hs);
    if (hsa != r.hs || cn_dim(W, 1) != r.G * r.hs || cn_dim(W, 0) != nd || cn_dim(R, 1) != r.G * r.hs)
        return onnx_bad(c, "W, R and hidden_size disagree");
    int64_t T = cn_dim(x, 0);
    if (T < 0) return onnx_unsup(c, "an unknown sequence length (give concrete input shapes)");
    if (T > MAX_STEPS) return onnx_unsup(c, "%" PRId64 " steps (at most %d)", T, MAX_STEPS);
    int64_t N = cn_dim(x, 1), lens_v[4096];
    bool partial = false;
    if (lens) {
        if (cn_is_symbolic_tensor(lens)) return onnx_unsup(c, "sequence_lens computed at run time");
        if (N < 0) return onnx_unsup(c, "sequence_lens with an unknown batch size");
        if (N > 4096) return onnx_unsup(c, "sequence_lens for a batch of %" PRId64 " (at most 4096)", N);
        if (cn_ndim(lens) != 1 || cn_numel(lens) != N)
            return onnx_bad(c, "sequence_lens has %" PRId64 " values for a batch of %" PRId64,
                            cn_numel(lens), N);
        for (int64_t i = 0; i < N; i++) {
            lens_v[i] = cn_get_int(lens, (int64_t[]){i});
            if (lens_v[i] < 0 || lens_v[i] > T)
                return onnx_bad(c, "sequence_lens[%" PRId64 "] is %" PRId64 " (the sequence has %" PRId64
                                   " steps)", i, lens_v[i], T);
            partial |= lens_v[i] < T;
        }
    }
    /* Default activations: f = Sigmoid (Tanh for RNN), g = h = Tanh; a
     * bidirectional op lists them per direction. */
    act defs[3] = {k == K_RNN ? A_TANH : A_SIGMOID, A_TANH, A_TANH};
    int per = k == K_RNN ? 1 : k == K_GRU ? 2 : 3;
    cn_tensor *ys[2][MAX_STEPS], *hn[2], *cns[2];
    for (int d = 0; d < nd; d++) {
        act acts[3];
        for (int i = 0; i < per; i++)
            if (parse_act(c, n, d * per + i, defs[i], &acts[i]) < 0) return CN_EUNSUPPORTED;
        r.f = acts[0];
        r.g = per > 1 ? acts[1] : A_TANH;
        r.h = per > 2 ? acts[2] : A_TANH;
        cn_tensor *Bd = B ? cn_squeeze(cn_narrow(B, 0, d, 1), 0) : NULL;
        cn_tensor *Pd = P ? cn_squeeze(cn_narrow(P, 0, d, 1), 0) : NULL;
        cn_tensor *hd = h0 ? cn_squeeze(cn_narrow(h0, 0, d, 1), 0) : NULL;
        cn_tensor *cd = c0 ? cn_squeeze(cn_narrow(c0, 0, d, 1), 0) : NULL;
        int rc = run_dir(&r, x, cn_squeeze(cn_narrow(W, 0, d, 1), 0), cn_squeeze(cn_narrow(R, 0, d, 1), 0),
                         Bd, Pd, hd, cd, rev || d == 1, T, partial ? lens_v : NULL, N, ys[d], &hn[d],
                         &cns[d]);
        if (rc < 0) return rc;
    }
    if (nout > 0) {
        cn_tensor *yd[2];
        for (int d = 0; d < nd; d++) yd[d] = cn_stack(ys[d], (int)T, 0); /* [T, N, H] */
        cn_tensor *y = cn_stack(yd, nd, 1);                              /* [T, nd, N, H] */
        if (batch_first) y = cn_permute(y, (int[]){2, 0, 1, 3}, 4);
        out[0] = y;
    }
    if (nout > 1) {
        cn_tensor *h = cn_stack(hn, nd, 0);
        out[1] = batch_first ? cn_transpose(h, 0, 1) : h;
    }
    if (nout > 2 && k == K_LSTM) {
        cn_tensor *cc = cn_stack(cns, nd, 0);
        out[2] = batch_first ? cn_transpose(cc, 0, 1) : cc;
    }
    return 0;
}

H(h_rnn) {
    return recurrent(c, n, in, nin, out, nout, K_RNN);
}
H(h_gru) {
    return recurrent(c, n, in, nin, out, nout, K_GRU);
}
H(h_lstm) {
    return recurrent(c, n, in, nin, out, nout, K_LSTM);
}

#define RNN_ATTRS "activation_alpha,activation_beta,activations,clip,direction,hidden_size,layout"

const onnx_op_entry cn_onnx_ops_rnn[] = {
    {"RNN", h_rnn, RNN_ATTRS, 3, 6, 2, "known sequence length; activations Sigmoid, Tanh, Relu; sequence_lens known at load time"},
    {"GRU", h_gru, RNN_ATTRS ",linear_before_reset", 3, 6, 2, "as RNN"},
    {"LSTM", h_lstm, RNN_ATTRS ",input_forget", 3, 8, 3, "as RNN; input_forget 0"},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

#endif /* CN_HAVE_ONNX */
