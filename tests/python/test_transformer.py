"""nn.MultiheadAttention, the Transformer layers and stacks, and nn.Transformer
against PyTorch's with the same weights: outputs, attention weights and
gradients, with bool and float masks, padding masks, batch_first and
unbatched inputs. Skipped without torch (Debian's python3-torch)."""

import copy

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

nn = chutney.nn


def same_weights(cm, tm):
    """cm takes tm's parameters and buffers (every name must match)."""
    tsd = tm.state_dict()
    csd = cm.state_dict()
    assert sorted(csd) == sorted(tsd)
    cm.load_state_dict({k: chutney.tensor(v.detach().numpy()) for k, v in tsd.items()})


def ct(a, grad=False):
    return chutney.tensor(np.asarray(a, dtype=np.float32), requires_grad=grad)


def tt(a, grad=False):
    return torch.tensor(np.asarray(a, dtype=np.float32), requires_grad=grad)


def close(c, t, tol=2e-5):
    np.testing.assert_allclose(c.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


rng = np.random.default_rng(7)


def test_mha_parameters_and_initialisation():
    m = nn.MultiheadAttention(8, 2)
    names = [n for n, _ in m.named_parameters()]
    assert names == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    assert tuple(m.in_proj_weight.shape) == (24, 8)
    assert float(m.in_proj_bias.abs().sum()) == 0 and float(m.out_proj.bias.abs().sum()) == 0
    bound = (6 / (8 + 24)) ** 0.5  # xavier_uniform_ of [3E, E]
    w = m.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    k = nn.MultiheadAttention(8, 2, kdim=5, vdim=3, bias=False)
    assert [n for n, _ in k.named_parameters()] == ["q_proj_weight", "k_proj_weight",
                                                    "v_proj_weight", "out_proj.weight"]
    assert tuple(k.k_proj_weight.shape) == (8, 5) and tuple(k.v_proj_weight.shape) == (8, 3)
    with pytest.raises(AssertionError):
        nn.MultiheadAttention(10, 3)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
def test_mha_matches_torch(batch_first, need_weights, average):
    E, H, L, S, N = 12, 3, 5, 7, 2
    tm = torch.nn.MultiheadAttention(E, H, batch_first=batch_first).eval()
    cm = nn.MultiheadAttention(E, H, batch_first=batch_first).eval()
    same_weights(cm, tm)
    shp = (N, L, E) if batch_first else (L, N, E)
    kshp = (N, S, E) if batch_first else (S, N, E)
    q, k, v = rng.standard_normal(shp), rng.standard_normal(kshp), rng.standard_normal(kshp)
    bool_mask = rng.random((L, S)) < 0.3
    bool_mask[:, 0] = False  # every query keeps a key (PyTorch gives NaN otherwise)
    kpm = np.zeros((N, S), bool)
    kpm[1, -2:] = True
    for am, pm in ((None, None), (bool_mask, None), (None, kpm), (bool_mask, kpm),
                   (np.where(bool_mask, -1e9, rng.standard_normal((L, S))), None)):
        cq, ck, cv = ct(q, True), ct(k, True), ct(v, True)
        tq, tk, tv = tt(q, True), tt(k, True), tt(v, True)

        def m_(lib, a):
            if a is None:
                return None
            return lib.tensor(a) if a.dtype == bool else lib.tensor(a.astype(np.float32))
        co, cw = cm(cq, ck, cv, key_padding_mask=m_(chutney, pm), need_weights=need_weights,
                    attn_mask=m_(chutney, am), average_attn_weights=average)
        to, tw = tm(tq, tk, tv, key_padding_mask=m_(torch, pm), need_weights=need_weights,
                    attn_mask=m_(torch, am), average_attn_weights=average)
        close(co, to)
        if need_weights:
            assert tuple(cw.shape) == tuple(tw.shape)
            close(cw, tw)
        else:
            assert cw is None and tw is None
        seed = rng.standard_normal(tuple(to.shape))
        co.backward(ct(seed))
        to.backward(tt(seed))
        for a, b in ((cq, tq), (ck, tk), (cv, tv)):
            close(a.grad, b.grad, 1e-4)
        close(cm.in_proj_weight.grad, tm.in_proj_weight.grad, 1e-4)
        close(cm.out_proj.weight.grad, tm.out_proj.weight.grad, 1e-4)
        cm.zero_grad()
        tm.zero_grad()


def test_mha_kdim_vdim_3d_mask_and_unbatched():
    E, H, L, S, N = 8, 2, 4, 6, 3
    tm = torch.nn.MultiheadAttention(E, H, kdim=5, vdim=7).eval()
    cm = nn.MultiheadAttention(E, H, kdim=5, vdim=7).eval()
    same_weights(cm, tm)
    q, k, v = rng.standard_normal((L, N, E)), rng.standard_normal((S, N, 5)), \
        rng.standard_normal((S, N, 7))
    m3 = rng.standard_normal((N * H, L, S)).astype(np.float32)
    co, cw = cm(ct(q), ct(k), ct(v), attn_mask=chutney.tensor(m3))
    to, tw = tm(tt(q), tt(k), tt(v), attn_mask=torch.tensor(m3))
    close(co, to)
    close(cw, tw)
    # unbatched: [L, E]
    co, cw = cm(ct(q[:, 0]), ct(k[:, 0]), ct(v[:, 0]))
    to, tw = tm(tt(q[:, 0]), tt(k[:, 0]), tt(v[:, 0]))
    assert tuple(co.shape) == (L, E) and tuple(cw.shape) == (L, S)
    close(co, to)
    close(cw, tw)
    with pytest.raises(RuntimeError, match="is_causal"):
        cm(ct(q), ct(k), ct(v), is_causal=True)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_and_decoder_stacks_match_torch(norm_first, activation):
    E, H, F, L, S, N = 16, 4, 24, 6, 5, 2
    kw = dict(dim_feedforward=F, dropout=0.1, activation=activation, norm_first=norm_first,
              batch_first=True)
    tenc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, **kw), 2,
                                       torch.nn.LayerNorm(E), enable_nested_tensor=False).eval()
    cenc = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, **kw), 2, nn.LayerNorm(E)).eval()
    same_weights(cenc, tenc)
    tdec = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(E, H, **kw), 2).eval()
    cdec = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, **kw), 2).eval()
    same_weights(cdec, tdec)
    src, tgt = rng.standard_normal((N, S, E)), rng.standard_normal((N, L, E))
    causal = np.triu(np.full((L, L), -np.inf, np.float32), 1)
    pad = np.zeros((N, S), bool)
    pad[0, -1] = True
    cs, ts_ = ct(src, True), tt(src, True)
    cmem = cenc(cs, src_key_padding_mask=chutney.tensor(pad))
    tmem = tenc(ts_, src_key_padding_mask=torch.tensor(pad))
    close(cmem, tmem, 1e-4)
    cout = cdec(ct(tgt), cmem, tgt_mask=chutney.tensor(causal),
                memory_key_padding_mask=chutney.tensor(pad))
    tout = tdec(tt(tgt), tmem, tgt_mask=torch.tensor(causal),
                memory_key_padding_mask=torch.tensor(pad))
    close(cout, tout, 1e-4)
    seed = rng.standard_normal(tuple(tout.shape))
    cout.backward(ct(seed))
    tout.backward(tt(seed))
    close(cs.grad, ts_.grad, 2e-4)
    # the copies are copies: separate parameters, equal at the start
    l0, l1 = cenc.layers[0], cenc.layers[1]
    assert l0.linear1.weight is not l1.linear1.weight
    assert l0.self_attn.in_proj_weight is not l1.self_attn.in_proj_weight


def test_transformer_trains_and_dropout_is_live():
    chutney.manual_seed(0)
    m = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                       dim_feedforward=32, dropout=0.0)
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    want = np.triu(np.full((5, 5), -np.inf), 1)
    np.testing.assert_array_equal(mask.numpy(), want)
    src, tgt = chutney.randn(7, 3, 16), chutney.randn(5, 3, 16)
    goal = chutney.randn(5, 3, 16)
    opt = chutney.optim.Adam(m.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = nn.functional.mse_loss(m(src, tgt, tgt_mask=mask), goal)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0]
    d = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.5)
    x = chutney.randn(4, 2, 16)
    assert not np.allclose(d(x).detach().numpy(), d(x).detach().numpy())
    d.eval()
    np.testing.assert_array_equal(d(x).detach().numpy(), d(x).detach().numpy())


def test_deepcopy_of_library_layers_and_python_modules():
    m = nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3), nn.MultiheadAttention(3, 1),
                      nn.GroupNorm(1, 3))
    m.eval()
    c = copy.deepcopy(m)
    assert not c.training
    for (n1, p1), (n2, p2) in zip(m.named_parameters(), c.named_parameters()):
        assert n1 == n2 and p1 is not p2
        np.testing.assert_array_equal(p1.detach().numpy(), p2.detach().numpy())
    with chutney.no_grad():
        c[0].weight.add_(1.0)
    assert not np.allclose(c[0].weight.detach().numpy(), m[0].weight.detach().numpy())
    x = chutney.randn(2, 4)
    with chutney.no_grad():
        m[1].weight.mul_(3.0)  # the copy keeps its own values
    np.testing.assert_allclose(c[1](m[0](x)).detach().numpy() * 3, m[1](m[0](x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_deepcopy_keeps_children_attributes_and_ties():
    class Wide(nn.Linear):
        def __init__(self, n):
            super().__init__(n, n)
            self.extra = nn.Linear(n, 2)
            self.note = "made"

    w = Wide(3)
    w.note = "changed"
    c = copy.deepcopy(w)
    assert c.note == "changed" and c.extra is not w.extra
    np.testing.assert_array_equal(c.extra.weight.detach().numpy(), w.extra.weight.detach().numpy())
    np.testing.assert_array_equal(c.weight.detach().numpy(), w.weight.detach().numpy())
    w.extra = nn.Identity()  # a child replaced after construction
    assert isinstance(copy.deepcopy(w).extra, nn.Identity)

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5, 3)
            self.w = self.emb.weight

    t = Tied()
    u = copy.deepcopy(t)
    assert len(list(t.parameters())) == len(list(u.parameters())) == 1
    assert u.w is u.emb.weight and u.w is not t.w

    class Head(nn.Module):
        def __init__(self, w):
            super().__init__()
            self.weight = w

    class TiedFirst(nn.Module):  # the sharer registered before the library layer
        def __init__(self):
            super().__init__()
            emb = nn.Embedding(10, 4)
            self.head = Head(emb.weight)
            self.emb = emb

    v = copy.deepcopy(TiedFirst())
    assert v.head.weight is v.emb.weight and len(list(v.parameters())) == 1
    lin = nn.Linear(2, 2)
    lin.register_buffer("mask", chutney.tensor([[1.0, 0.0], [0.0, 1.0]]))
    assert copy.deepcopy(lin).mask.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    lin = nn.Linear(2, 2)
    seen = []
    lin.register_forward_hook(lambda m, a, o: seen.append(1))
    copy.deepcopy(lin)(chutney.ones(1, 2))
    assert seen == [1]
