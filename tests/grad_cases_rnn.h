/* Gradient cases for the recurrent ops (src/ops/rnn.c). The loss covers
 * every part of lstm_seq's output (h, c and the gates), so each part's
 * gradient is checked; odd sizes, T = 1, with and without h0 and c0, both
 * directions. */

static cn_tensor *gcf_lstm_seq(cn_tensor **x) { return cn_op_apply(CN_OP_lstm_seq, x, 4, NULL); }
static cn_tensor *gcf_lstm_seq_nostate(cn_tensor **x) {
    return cn_op_apply(CN_OP_lstm_seq, x, 2, NULL);
}
static cn_tensor *gcf_lstm_seq_rev_h0(cn_tensor **x) {
    return cn_op_apply(CN_OP_lstm_seq, x, 3, &(cn_attrs){.i = {1}});
}
static cn_tensor *gcf_lstm_seq_rev(cn_tensor **x) {
    return cn_op_apply(CN_OP_lstm_seq, x, 4, &(cn_attrs){.i = {1}});
}

static const grad_case grad_cases_rnn[] = {
    {"lstm_seq", "h0 and c0, T = 3", 4,
     {{GC_SHAPE(3, 2, 12), -1, 1}, {GC_SHAPE(12, 3), -1, 1}, {GC_SHAPE(2, 3), -1, 1},
      {GC_SHAPE(2, 3), -1, 1}},
     gcf_lstm_seq},
    {"lstm_seq", "no state, T = 1", 2, {{GC_SHAPE(1, 3, 8), -2, 2}, {GC_SHAPE(8, 2), -1, 1}},
     gcf_lstm_seq_nostate},
    {"lstm_seq", "reverse, h0 only, T = 4", 3,
     {{GC_SHAPE(4, 1, 20), -1, 1}, {GC_SHAPE(20, 5), -1, 1}, {GC_SHAPE(1, 5), -1, 1}},
     gcf_lstm_seq_rev_h0},
    {"lstm_seq", "reverse, h0 and c0, T = 2", 4,
     {{GC_SHAPE(2, 3, 4), -1, 1}, {GC_SHAPE(4, 1), -1, 1}, {GC_SHAPE(3, 1), -1, 1},
      {GC_SHAPE(3, 1), -1, 1}},
     gcf_lstm_seq_rev},
};
