"""torch.nn.utils.rnn's packed sequences, and RNN / LSTM / GRU over them,
against PyTorch (Debian's python3-torch): the packed layout, padding back,
outputs, final states and gradients of inputs and weights."""

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

LENGTHS = [3, 7, 1, 5, 7]  # unsorted, with a tie and a one-step sequence


def _pair(cls, **kw):
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls)(4, 6, **kw)
    cm = getattr(chutney.nn, cls)(4, 6, **kw)
    cm.load_state_dict({k: chutney.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return cm, tm


def _padded_input(batch_first):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((len(LENGTHS), max(LENGTHS), 4)).astype(np.float32)
    return x if batch_first else x.transpose(1, 0, 2).copy()


def test_pack_and_pad_layout():
    for bf in (False, True):
        x = _padded_input(bf)
        for enforce in (False, True):
            lens = sorted(LENGTHS, reverse=True) if enforce else LENGTHS
            cp = chutney.nn.utils.rnn.pack_padded_sequence(chutney.tensor(x), lens, batch_first=bf,
                                                          enforce_sorted=enforce)
            tp = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), torch.tensor(lens),
                                                        batch_first=bf, enforce_sorted=enforce)
            np.testing.assert_array_equal(cp.data.numpy(), tp.data.numpy())
            assert cp.batch_sizes.tolist() == tp.batch_sizes.tolist()
            if enforce:
                assert cp.sorted_indices is None and tp.sorted_indices is None
            else:
                assert cp.sorted_indices.tolist() == tp.sorted_indices.tolist()
                assert cp.unsorted_indices.tolist() == tp.unsorted_indices.tolist()
            for total in (None, 9):
                cy, cl = chutney.nn.utils.rnn.pad_packed_sequence(cp, batch_first=bf,
                                                                  padding_value=-2.5,
                                                                  total_length=total)
                ty, tl = torch.nn.utils.rnn.pad_packed_sequence(tp, batch_first=bf,
                                                                padding_value=-2.5,
                                                                total_length=total)
                np.testing.assert_array_equal(cy.numpy(), ty.numpy())
                assert cl.tolist() == tl.tolist()


def test_pack_errors_name_the_problem():
    x = chutney.zeros(7, 3, 2)
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        chutney.nn.utils.rnn.pack_padded_sequence(x, [2, 5, 1])
    with pytest.raises(RuntimeError, match="greater than 0"):
        chutney.nn.utils.rnn.pack_padded_sequence(x, [2, 0, 1], enforce_sorted=False)
    with pytest.raises(RuntimeError, match="batch_size"):
        chutney.nn.utils.rnn.pack_padded_sequence(x, [2, 1], enforce_sorted=False)
    p = chutney.nn.utils.rnn.pack_padded_sequence(x, [7, 2, 1])
    with pytest.raises(ValueError, match="total_length"):
        chutney.nn.utils.rnn.pad_packed_sequence(p, total_length=5)


def test_pack_sequence_round_trip():
    rng = np.random.default_rng(2)
    seqs = [rng.standard_normal((n, 3)).astype(np.float32) for n in (2, 4, 1)]
    cp = chutney.nn.utils.rnn.pack_sequence([chutney.tensor(s) for s in seqs],
                                            enforce_sorted=False)
    tp = torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    np.testing.assert_array_equal(cp.data.numpy(), tp.data.numpy())
    back = chutney.nn.utils.rnn.unpack_sequence(cp)
    for a, b in zip(back, seqs):
        np.testing.assert_array_equal(a.numpy(), b)


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_rnn_over_packed_sequences(cls, bidirectional, batch_first):
    cm, tm = _pair(cls, num_layers=2, bidirectional=bidirectional, batch_first=batch_first)
    x = _padded_input(batch_first)
    D = 2 if bidirectional else 1
    rng = np.random.default_rng(9)
    h0 = rng.standard_normal((2 * D, len(LENGTHS), 6)).astype(np.float32)
    c0 = rng.standard_normal((2 * D, len(LENGTHS), 6)).astype(np.float32)
    seed = rng.standard_normal((sum(LENGTHS), 6 * D)).astype(np.float32)
    hseed = rng.standard_normal(h0.shape).astype(np.float32)
    results = []
    for lib, m in ((chutney, cm), (torch, tm)):
        xt = lib.tensor(x, requires_grad=True)
        packed = lib.nn.utils.rnn.pack_padded_sequence(xt, lib.tensor(LENGTHS),
                                                       batch_first=batch_first,
                                                       enforce_sorted=False)
        h = lib.tensor(h0)
        hx = (h, lib.tensor(c0)) if cls == "LSTM" else h
        out, hn = m(packed, hx)
        states = hn if cls == "LSTM" else (hn,)
        padded, lens = lib.nn.utils.rnn.pad_packed_sequence(out, batch_first=batch_first)
        loss = (out.data * lib.tensor(seed)).sum() + (states[0] * lib.tensor(hseed)).sum()
        if cls == "LSTM":
            loss = loss + states[1].sum()
        loss.backward()
        grads = [p.grad.numpy() for _, p in sorted(m.named_parameters())]
        results.append((out.data.detach().numpy(), padded.detach().numpy(), lens.tolist(),
                        [s.detach().numpy() for s in states], xt.grad.numpy(), grads))
    (cd, cpad, cl, cs, cgx, cgw), (td, tpad, tl, ts, tgx, tgw) = results
    np.testing.assert_allclose(cd, td, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cpad, tpad, rtol=1e-5, atol=1e-5)
    assert cl == tl
    for a, b in zip(cs, ts):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cgx, tgx, rtol=1e-4, atol=1e-5)
    for a, b in zip(cgw, tgw):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_packed_without_initial_state_and_sorted():
    cm, tm = _pair("LSTM", bidirectional=True)
    lens = sorted(LENGTHS, reverse=True)
    x = _padded_input(False)
    outs = []
    for lib, m in ((chutney, cm), (torch, tm)):
        p = lib.nn.utils.rnn.pack_padded_sequence(lib.tensor(x), lens)
        out, (h, c) = m(p)
        outs.append((out.data.detach().numpy(), h.detach().numpy(), c.detach().numpy()))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_lengths_refused_when_they_do_not_fit():
    m = chutney.nn.LSTM(4, 6)
    x = chutney.zeros(5, 3, 4)
    with pytest.raises(Exception, match="lengths must be 1 to"):
        m._c.rnn_forward(x, None, None, [5, 6, 1])
    with pytest.raises(Exception, match="2 sequence lengths for a batch of 3"):
        m._c.rnn_forward(x, None, None, [5, 1])


def test_padded_steps_output_zeros_and_keep_state():
    """cn_rnn_forward_lengths itself: past a sequence's end the output is 0
    and the state is the one at its last step (the run of the sequence cut
    to its length)."""
    m = chutney.nn.GRU(4, 6)
    x = chutney.tensor(_padded_input(False))
    with chutney.no_grad():
        y, h, _ = m._c.rnn_forward(x, None, None, LENGTHS)
    for b, n in enumerate(LENGTHS):
        assert np.all(y.numpy()[n:, b] == 0)
        with chutney.no_grad():
            alone, hb, _ = m._c.rnn_forward(x[:n, b:b + 1], None, None)
        np.testing.assert_allclose(y.numpy()[:n, b], alone.numpy()[:, 0], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(h.numpy()[0, b], hb.numpy()[0, 0], rtol=1e-6, atol=1e-6)


def test_padding_that_is_not_finite_stays_out():
    """NaN or inf past a sequence's end reach neither its outputs nor its
    states (selected away, not multiplied by 0)."""
    cm, tm = _pair("LSTM", bidirectional=True)
    x = _padded_input(False)
    lens = sorted(LENGTHS, reverse=True)
    x = x[:, np.argsort([-n for n in LENGTHS], kind="stable")].copy()
    for b, n in enumerate(lens):
        x[n:, b] = np.nan
    with chutney.no_grad():
        y, h, c = cm._c.rnn_forward(chutney.tensor(x), None, None, lens)
    assert np.isfinite(h.numpy()).all() and np.isfinite(c.numpy()).all()
    for b, n in enumerate(lens):
        assert np.isfinite(y.numpy()[:n, b]).all() and np.all(y.numpy()[n:, b] == 0)
