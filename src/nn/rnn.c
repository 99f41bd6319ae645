/* RNN, LSTM and GRU, unrolled through time with ops (so autograd and static
 * graphs need nothing special), with PyTorch's parameter names, shapes, gate
 * order and equations:
 *   RNN:  h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)
 *   LSTM: i, f, g, o = chunks of (x W_ih^T + b_ih + h W_hh^T + b_hh)
 *         c' = sigmoid(f) c + sigmoid(i) tanh(g),  h' = sigmoid(o) tanh(c')
 *   GRU:  r, z, n chunks of gi = x W_ih^T + b_ih and gh = h W_hh^T + b_hh
 *         r = sigmoid(gi_r + gh_r), z = sigmoid(gi_z + gh_z),
 *         n = tanh(gi_n + r gh_n),  h' = n + z (h - n)
 * The input projection of every time step is one matmul per layer and
 * direction; only h W_hh^T is computed step by step. An LSTM direction is
 * then one lstm_seq op (src/ops/rnn.c: a GEMM and a fused pass per step,
 * forward and backward); RNN and GRU are unrolled into ops. A zero initial
 * state is never materialised: the first step just leaves out the terms it
 * would multiply away, so unknown batch sizes of static graphs need no zeros.
 *
 * Sequences of their own lengths (cn_rnn_forward_lengths: PyTorch's packed
 * sequences, ONNX's sequence_lens): a step at or past a sequence's end leaves
 * its state as it was and outputs zeros, so the forward direction's final
 * state is the one at the sequence's last step, and the reverse direction
 * starts there. Those runs unroll the LSTM into ops too (the fused lstm_seq
 * has no mask). */
#include "nn.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

typedef enum { K_RNN_TANH, K_RNN_RELU, K_LSTM, K_GRU } rnn_kind;

typedef struct rnn_mod {
    cn_module base;
    rnn_kind kind;
    int64_t in, H;
    int L, D;
    bool bias, batch_first;
    double dropout;
} rnn_mod;

/* Parameter j (0 w_ih, 1 w_hh, 2 b_ih, 3 b_hh) of layer k, direction d. */
static cn_tensor *rp(const rnn_mod *r, int k, int d, int j) {
    int per = r->bias ? 4 : 2;
    if (j >= per) return NULL;
    return cn_nn_p(&r->base, (k * r->D + d) * per + j);
}

/* One time step of an RNN or GRU; *h (NULL: zero) is replaced by the new
 * state. */
static void cell_step(const rnn_mod *r, cn_tensor *gi, cn_tensor *whh, cn_tensor *bhh,
                      cn_tensor **h) {
    if (r->kind == K_GRU) {
        cn_tensor *gh = *h ? cn_matmul(*h, cn_mT(whh)) : NULL;
        if (gh && bhh) gh = cn_add(gh, bhh);
        else if (!gh) gh = bhh; /* h = 0: gh is the bias alone */
        cn_tensor *xi[3], *hh[3] = {NULL, NULL, NULL};
        cn_chunk(gi, 3, -1, xi);
        if (gh) cn_chunk(gh, 3, -1, hh);
        cn_tensor *z = cn_sigmoid(hh[1] ? cn_add(xi[1], hh[1]) : xi[1]);
        cn_tensor *n = xi[2];
        if (hh[2]) n = cn_add(n, cn_mul(cn_sigmoid(cn_add(xi[0], hh[0])), hh[2]));
        n = cn_tanh(n);
        *h = *h ? cn_add(n, cn_mul(z, cn_sub(*h, n))) : cn_mul(cn_rsub_scalar(z, 1), n);
        return;
    }
    cn_tensor *g = *h ? cn_add(gi, cn_matmul(*h, cn_mT(whh))) : gi;
    *h = r->kind == K_RNN_RELU ? cn_relu(g) : cn_tanh(g);
}

/* One LSTM step as ops (the masked runs); *h and *c (NULL: zero) are
 * replaced by the new state. */
static void lstm_step(cn_tensor *gi, cn_tensor *whh, cn_tensor **h, cn_tensor **c) {
    cn_tensor *g = *h ? cn_add(gi, cn_matmul(*h, cn_mT(whh))) : gi;
    cn_tensor *q[4] = {NULL, NULL, NULL, NULL};
    if (!g || cn_chunk(g, 4, -1, q) < 0) {
        *h = *c = NULL;
        return;
    }
    cn_tensor *ig = cn_mul(cn_sigmoid(q[0]), cn_tanh(q[2]));
    *c = *c ? cn_add(cn_mul(cn_sigmoid(q[1]), *c), ig) : ig;
    *h = cn_mul(cn_sigmoid(q[3]), cn_tanh(*c));
}

/* Where step t is inside each sequence: a bool [N, 1]. */
static cn_tensor *step_mask(cn_tensor *x, const int64_t *lens, int64_t t) {
    int64_t N = x->shape[1], shape[2] = {N, 1};
    uint8_t *b = malloc((size_t)N);
    if (!b) return cn_fail("rnn: out of memory");
    for (int64_t i = 0; i < N; i++) b[i] = t < lens[i];
    cn_tensor *m = cn_from_data_on(cn_tensor_device(x), CN_BOOL, 2, shape, b);
    free(b);
    return m;
}

/* The new state where the step is inside the sequence, the old elsewhere
 * (old NULL: zero). Selected, not multiplied by the mask: padding may hold
 * NaN or inf, which a product by 0 would spread. */
static cn_tensor *masked_state(cn_tensor *mb, cn_tensor *zero, cn_tensor *next, cn_tensor *old) {
    return cn_where(mb, next, old ? old : zero);
}

/* One direction of one layer over x [T, N, in]: outputs [T, N, H] and the
 * final state. lens (NULL: every sequence is T long) gives each sequence's
 * length. */
static cn_tensor *run_direction(const rnn_mod *r, int k, int d, cn_tensor *x, const int64_t *lens,
                                cn_tensor **h, cn_tensor **c) {
    int64_t T = x->shape[0];
    cn_tensor *wih = rp(r, k, d, 0), *whh = rp(r, k, d, 1);
    cn_tensor *bih = rp(r, k, d, 2), *bhh = rp(r, k, d, 3);
    cn_tensor *xp = cn_matmul(x, cn_mT(wih));
    if (bih) xp = cn_add(xp, bih);
    /* RNN and LSTM add both biases before the nonlinearity: fold b_hh in
     * once. (Not as xp + (b_ih + b_hh): on parameters alone that sum would
     * be computed once, eagerly, when a static graph is built, and go stale
     * as the optimiser moves them.) */
    if (bhh && r->kind != K_GRU) xp = cn_add(xp, bhh);
    if (!xp) return NULL;
    /* Steps before the shortest sequence's end need no mask. */
    int64_t full = T;
    for (int64_t i = 0; lens && i < x->shape[1]; i++)
        if (lens[i] < full) full = lens[i];
    if (r->kind == K_LSTM && full == T) return cn_lstm_seq_run(xp, whh, *h, *c, d, h, c);
    cn_tensor **outs = malloc(sizeof(cn_tensor *) * (size_t)T);
    if (!outs) return cn_fail("%s: out of memory", r->base.vt->type);
    bool ok = true;
    for (int64_t s = 0; s < T && ok; s++) {
        int64_t t = d ? T - 1 - s : s;
        /* A scope per step frees what the step does not keep (eval mode). */
        cn_scope_begin();
        cn_tensor *gi = cn_squeeze(cn_narrow(xp, 0, t, 1), 0);
        cn_tensor *hn = *h, *cn = c ? *c : NULL;
        if (r->kind == K_LSTM) lstm_step(gi, whh, &hn, &cn);
        else cell_step(r, gi, whh, r->kind == K_GRU ? bhh : NULL, &hn);
        cn_tensor *y = hn;
        if (t >= full && hn) {
            cn_tensor *mb = step_mask(x, lens, t);
            ok = mb != NULL;
            cn_tensor *zero = ok ? cn_scalar(cn_tensor_dtype(hn), 0) : NULL;
            y = ok ? cn_where(mb, hn, zero) : NULL;
            hn = ok ? masked_state(mb, zero, hn, *h) : NULL;
            if (c) cn = ok && cn ? masked_state(mb, zero, cn, *c) : NULL;
        }
        ok = ok && y && hn && (!c || cn);
        *h = hn;
        if (c) *c = cn;
        cn_keep(hn);
        cn_keep(cn);
        cn_keep(y);
        cn_scope_end();
        outs[t] = y;
    }
    cn_tensor *y = ok ? cn_stack(outs, (int)T, 0) : NULL;
    free(outs);
    return y;
}

static int check_state(const rnn_mod *r, const char *what, cn_tensor *s, int64_t N) {
    int64_t want[3] = {(int64_t)r->L * r->D, N, r->H};
    bool ok = s->ndim == 3;
    for (int i = 0; ok && i < 3; i++) ok = s->shape[i] == want[i] || s->shape[i] < 0 || want[i] < 0;
    if (ok) return CN_OK;
    char b1[128], b2[128];
    return cn_failc(CN_EINVAL, "%s: %s has shape %s, expected %s", r->base.vt->type, what,
                    cn_fmt_shape(b1, sizeof b1, s->ndim, s->shape), cn_fmt_shape(b2, sizeof b2, 3, want));
}

static int rnn_impl(rnn_mod *r, cn_tensor *x, const int64_t *lens, cn_tensor *h0, cn_tensor *c0,
                    cn_tensor **out, cn_tensor **hn, cn_tensor **cn) {
    const char *type = r->base.vt->type;
    char buf[128];
    bool batched = x->ndim == 3;
    if ((x->ndim != 2 && x->ndim != 3) || (x->shape[x->ndim - 1] != r->in && x->shape[x->ndim - 1] >= 0))
        return cn_failc(CN_EINVAL, "%s: input %s should be [T, N, %" PRId64 "]%s or [T, %" PRId64 "]",
                        type, cn_fmt_shape(buf, sizeof buf, x->ndim, x->shape), r->in,
                        r->batch_first ? " ([N, T, in] with batch_first)" : "", r->in);
    if (c0 && r->kind != K_LSTM) return cn_failc(CN_EINVAL, "%s: c0 is for LSTM only", type);
    if (batched && r->batch_first) x = cn_transpose(x, 0, 1);
    if (!batched) {
        x = cn_unsqueeze(x, 1);
        h0 = h0 ? cn_unsqueeze(h0, 1) : NULL;
        c0 = c0 ? cn_unsqueeze(c0, 1) : NULL;
    }
    if (!x) return CN_EINVAL;
    if (x->shape[0] < 1)
        return cn_failc(CN_EINVAL, "%s: the sequence is empty or of unknown length (%" PRId64
                        " steps); its length must be known", type, x->shape[0]);
    int64_t N = x->shape[1];
    if ((h0 && check_state(r, "h0", h0, N) < 0) || (c0 && check_state(r, "c0", c0, N) < 0))
        return CN_EINVAL;
    int LD = r->L * r->D;
    cn_tensor *hs[2 * 64], *cs[2 * 64];
    cn_tensor *layer_in = x;
    for (int k = 0; k < r->L; k++) {
        cn_tensor *ys[2];
        for (int d = 0; d < r->D; d++) {
            int i = k * r->D + d;
            cn_tensor *h = h0 ? cn_squeeze(cn_narrow(h0, 0, i, 1), 0) : NULL;
            cn_tensor *c = c0 ? cn_squeeze(cn_narrow(c0, 0, i, 1), 0) : NULL;
            ys[d] = run_direction(r, k, d, layer_in, lens, &h, r->kind == K_LSTM ? &c : NULL);
            if (!ys[d]) return CN_EINVAL;
            hs[i] = h;
            cs[i] = c;
        }
        layer_in = r->D == 2 ? cn_concat(ys, 2, 2) : ys[0];
        if (k + 1 < r->L && r->dropout > 0)
            layer_in = cn_dropout(layer_in, r->dropout, r->base.training);
        if (!layer_in) return CN_EINVAL;
    }
    cn_tensor *y = layer_in;
    if (!batched) y = cn_squeeze(y, 1);
    else if (r->batch_first) y = cn_transpose(y, 0, 1);
    cn_tensor *h_n = hn ? cn_stack(hs, LD, 0) : NULL;
    cn_tensor *c_n = cn && r->kind == K_LSTM ? cn_stack(cs, LD, 0) : NULL;
    if (!batched) {
        h_n = h_n ? cn_squeeze(h_n, 1) : NULL;
        c_n = c_n ? cn_squeeze(c_n, 1) : NULL;
    }
    if (!y || (hn && !h_n) || (cn && r->kind == K_LSTM && !c_n)) return CN_EINVAL;
    if (out) *out = y;
    if (hn) *hn = h_n;
    if (cn) *cn = c_n;
    return CN_OK;
}

static int is_rnn(const cn_module *m);

int cn_rnn_forward(cn_module *m, cn_tensor *x, cn_tensor *h0, cn_tensor *c0, cn_tensor **output,
                   cn_tensor **h_n, cn_tensor **c_n) {
    return cn_rnn_forward_lengths(m, x, NULL, 0, h0, c0, output, h_n, c_n);
}

/* lengths must fit the batch: N values, each 1..T. */
static int check_lengths(const rnn_mod *r, cn_tensor *x, const int64_t *lens, int64_t n) {
    const char *type = r->base.vt->type;
    bool batched = x->ndim == 3;
    int64_t T = batched && r->batch_first ? x->shape[1] : x->shape[0];
    int64_t N = !batched ? 1 : r->batch_first ? x->shape[0] : x->shape[1];
    if (T < 0 || N < 0)
        return cn_failc(CN_EINVAL, "%s: sequence lengths need the input's length and batch size "
                                   "known (the input is [%" PRId64 ", %" PRId64 ", ...])",
                        type, x->shape[0], x->ndim > 1 ? x->shape[1] : 1);
    if (n != N)
        return cn_failc(CN_EINVAL, "%s: %" PRId64 " sequence lengths for a batch of %" PRId64,
                        type, n, N);
    for (int64_t i = 0; i < N; i++)
        if (lens[i] < 1 || lens[i] > T)
            return cn_failc(CN_EINVAL, "%s: sequence %" PRId64 " has length %" PRId64
                                       "; lengths must be 1 to the input's %" PRId64 " steps",
                            type, i, lens[i], T);
    return CN_OK;
}

int cn_rnn_forward_lengths(cn_module *m, cn_tensor *x, const int64_t *lengths, int64_t n_lengths,
                           cn_tensor *h0, cn_tensor *c0, cn_tensor **output, cn_tensor **h_n,
                           cn_tensor **c_n) {
    if (output) *output = NULL;
    if (h_n) *h_n = NULL;
    if (c_n) *c_n = NULL;
    if (!m || !is_rnn(m))
        return cn_failc(CN_EINVAL, "rnn_forward: %s is not an RNN, LSTM or GRU module",
                        m ? cn_module_type(m) : "NULL");
    if (!x) return CN_EINVAL;
    if (lengths && x->ndim >= 2 && x->ndim <= 3 &&
        check_lengths((rnn_mod *)m, x, lengths, n_lengths) < 0)
        return CN_EINVAL;
    cn_tensor *y = NULL, *h = NULL, *c = NULL;
    cn_scope_begin();
    int rc = rnn_impl((rnn_mod *)m, x, lengths, h0, c0, &y, &h, &c);
    cn_keep(y);
    cn_keep(h);
    cn_keep(c);
    cn_scope_end();
    if (rc < 0) return rc;
    if (output) *output = y;
    if (h_n) *h_n = h;
    if (c_n) *c_n = c;
    return CN_OK;
}

static cn_tensor *rnn_forward(cn_module *m, cn_tensor *x) {
    cn_tensor *y = NULL;
    return rnn_impl((rnn_mod *)m, x, NULL, NULL, NULL, &y, NULL, NULL) < 0 ? NULL : y;
}

static const cn_module_vtable rnn_vt = {"RNN", rnn_forward, NULL};
static const cn_module_vtable lstm_vt = {"LSTM", rnn_forward, NULL};
static const cn_module_vtable gru_vt = {"GRU", rnn_forward, NULL};

static int is_rnn(const cn_module *m) {
    return m->vt == &rnn_vt || m->vt == &lstm_vt || m->vt == &gru_vt;
}

static cn_module *rnn_new(const cn_module_vtable *vt, rnn_kind kind, int G, int64_t in, int64_t H,
                          const cn_rnn_opts *o) {
    cn_rnn_opts d0 = {0};
    if (!o) o = &d0;
    int L = o->num_layers ? o->num_layers : 1;
    if (in < 0 || H < 1 || L < 1 || L > 64)
        return cn_fail("%s: input_size %" PRId64 ", hidden_size %" PRId64 " and num_layers %d "
                       "must be >= 0, >= 1 and 1..64", vt->type, in, H, L);
    if (!(o->dropout >= 0 && o->dropout <= 1))
        return cn_fail("%s: dropout %g must be in [0, 1]", vt->type, o->dropout);
    rnn_mod *r = (rnn_mod *)cn_module_new(vt, sizeof(rnn_mod));
    if (!r) return NULL;
    r->kind = kind == K_RNN_TANH && o->relu ? K_RNN_RELU : kind;
    r->in = in;
    r->H = H;
    r->L = L;
    r->D = o->bidirectional ? 2 : 1;
    r->bias = !o->no_bias;
    r->batch_first = o->batch_first;
    r->dropout = o->dropout;
    cn_module *m = &r->base;
    double bound = 1 / sqrt((double)H);
    for (int k = 0; k < L; k++)
        for (int d = 0; d < r->D; d++) {
            const char *sfx = d ? "_reverse" : "";
            int64_t lin = k == 0 ? in : H * r->D;
            int64_t shapes[4][2] = {{G * H, lin}, {G * H, H}, {G * H, 0}, {G * H, 0}};
            const char *stem[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
            for (int j = 0; j < (r->bias ? 4 : 2); j++) {
                char name[48];
                snprintf(name, sizeof name, "%s_l%d%s", stem[j], k, sfx);
                cn_tensor *p = cn_nn_new_param(m, name, j < 2 ? 2 : 1, shapes[j]);
                if (!p || cn_nn_init_bound(p, bound) < 0) {
                    cn_module_free(m);
                    return NULL;
                }
            }
        }
    return m;
}

cn_module *cn_nn_rnn(int64_t input_size, int64_t hidden_size, const cn_rnn_opts *opts) {
    return rnn_new(&rnn_vt, K_RNN_TANH, 1, input_size, hidden_size, opts);
}

cn_module *cn_nn_lstm(int64_t input_size, int64_t hidden_size, const cn_rnn_opts *opts) {
    if (opts && opts->relu) return cn_fail("LSTM: relu is an option of RNN only");
    return rnn_new(&lstm_vt, K_LSTM, 4, input_size, hidden_size, opts);
}

cn_module *cn_nn_gru(int64_t input_size, int64_t hidden_size, const cn_rnn_opts *opts) {
    if (opts && opts->relu) return cn_fail("GRU: relu is an option of RNN only");
    return rnn_new(&gru_vt, K_GRU, 3, input_size, hidden_size, opts);
}
