"""What PyTorch training scripts do besides the model: forward hooks,
random_split by fractions, pad_sequence, finfo/iinfo, vector_to_parameters,
the backends switches and matmul precision; against PyTorch where it has
the same thing (Debian's python3-torch; skipped without it)."""

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
nn = chutney.nn


def test_forward_hooks():
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    seen = []
    h1 = m[0].register_forward_hook(lambda mod, args, out: seen.append(tuple(out.shape)))
    h2 = m[2].register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    x = chutney.randn(5, 3)
    y = m(x)
    assert seen == [(5, 4)]
    np.testing.assert_allclose(y.detach().numpy(), np.broadcast_to(m[2].bias.detach().numpy(),
                                                                   (5, 2)), rtol=1e-6)
    h2.remove()
    with m.register_forward_hook(lambda mod, args, out: out + 1):
        z = m(x)
    np.testing.assert_allclose(z.detach().numpy(), m(x).detach().numpy() + 1, rtol=1e-6)
    h1.remove()
    m(x)
    assert seen == [(5, 4), (5, 4), (5, 4)]  # two calls inside the with, none after remove
    order = []
    lin = nn.Linear(2, 2)
    lin.register_forward_hook(lambda *a: order.append("b"))
    lin.register_forward_hook(lambda *a: order.append("a"), prepend=True)
    lin(chutney.ones(1, 2))
    assert order == ["a", "b"]


def test_random_split_fractions_like_torch():
    for n, fr in ((10, [0.8, 0.2]), (11, [0.5, 0.3, 0.2]), (7, [1 / 3, 1 / 3, 1 / 3])):
        ds = chutney.utils.data.TensorDataset(chutney.arange(n))
        parts = chutney.utils.data.random_split(ds, fr)
        want = torch.utils.data.random_split(range(n), fr)
        assert [len(p) for p in parts] == [len(w) for w in want]
        got = sorted(int(p[i][0]) for p in parts for i in range(len(p)))
        assert got == list(range(n))
    with pytest.raises(ValueError):
        chutney.utils.data.random_split(chutney.utils.data.TensorDataset(chutney.arange(4)),
                                        [0.5, 0.6])


def test_pad_sequence_and_parameter_vectors():
    seqs = [np.random.default_rng(i).standard_normal((k, 3)) for i, k in enumerate((2, 5, 1))]
    for bf in (False, True):
        got = nn.utils.rnn.pad_sequence([chutney.tensor(s) for s in seqs], batch_first=bf,
                                        padding_value=-1.0)
        want = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first=bf,
                                               padding_value=-1.0)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    lin = nn.Linear(3, 2)
    v = nn.utils.parameters_to_vector(lin.parameters())
    assert tuple(v.shape) == (8,)
    nn.utils.vector_to_parameters(chutney.arange(8.0), lin.parameters())
    assert lin.weight.tolist() == [[0, 1, 2], [3, 4, 5]] and lin.bias.tolist() == [6, 7]


def test_finfo_iinfo_and_switches():
    for name in ("float32", "float64", "float16", "bfloat16"):
        c, t = chutney.finfo(getattr(chutney, name)), torch.finfo(getattr(torch, name))
        assert (c.bits, c.eps, c.max, c.min, c.tiny, c.resolution) == \
            (t.bits, t.eps, t.max, t.min, t.tiny, t.resolution), name
    assert chutney.finfo().eps == torch.finfo().eps
    for name in ("int64", "int32", "int8", "uint8"):
        c, t = chutney.iinfo(getattr(chutney, name)), torch.iinfo(getattr(torch, name))
        assert (c.bits, c.min, c.max) == (t.bits, t.min, t.max), name
    with pytest.raises(TypeError):
        chutney.finfo(chutney.int64)
    chutney.backends.cudnn.benchmark = True
    assert chutney.backends.cudnn.benchmark is True
    chutney.set_float32_matmul_precision("high")
    assert chutney.get_float32_matmul_precision() == "high"
    with pytest.raises(RuntimeError):
        chutney.set_float32_matmul_precision("fast")
    chutney.set_float32_matmul_precision("highest")


def test_scheduler_state_through_a_checkpoint(tmp_path):
    w = chutney.zeros(1, requires_grad=True)
    opt = chutney.optim.SGD([w], lr=1.0)
    s = chutney.optim.lr_scheduler.MultiStepLR(opt, [2, 4, 4], 0.5)
    for _ in range(3):
        opt.step()
        s.step()
    chutney.save({"sched": s.state_dict(), "opt": opt.state_dict(), "epoch": 3},
                 tmp_path / "ck.safetensors")
    back = chutney.load(tmp_path / "ck.safetensors")
    opt2 = chutney.optim.SGD([w], lr=1.0)
    s2 = chutney.optim.lr_scheduler.MultiStepLR(opt2, [9], 0.5)
    opt2.load_state_dict(back["opt"])  # the lr the chained schedule goes on from
    s2.load_state_dict(back["sched"])
    for _ in range(2):
        s.step()
        s2.step()
    assert s2.get_last_lr() == s.get_last_lr() == [0.125] and back["epoch"] == 3


def test_attention_weights_are_returned_after_dropout():
    chutney.manual_seed(3)
    m = nn.MultiheadAttention(8, 2, dropout=0.5)
    q = chutney.randn(4, 1, 8)
    out, w = m(q, q, q, average_attn_weights=False)
    wn = w.detach().numpy()
    assert (wn == 0).mean() > 0.2  # dropped entries
    kept = wn[wn != 0]
    assert kept.min() > 0  # the rest scaled by 1/(1-p), still positive


def _copy_params(cm, tm):
    cm.load_state_dict({k: chutney.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})


def test_cells_bilinear_and_shrinks_match_torch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    h = rng.standard_normal((3, 6)).astype(np.float32)
    c0 = rng.standard_normal((3, 6)).astype(np.float32)
    for name, args in (("LSTMCell", (4, 6)), ("GRUCell", (4, 6)), ("RNNCell", (4, 6))):
        cm, tm = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
        assert sorted(cm.state_dict()) == sorted(tm.state_dict())
        _copy_params(cm, tm)
        hx_c = (chutney.tensor(h), chutney.tensor(c0)) if name == "LSTMCell" else chutney.tensor(h)
        hx_t = (torch.tensor(h), torch.tensor(c0)) if name == "LSTMCell" else torch.tensor(h)
        co, to = cm(chutney.tensor(x), hx_c), tm(torch.tensor(x), hx_t)
        for a, b in zip(co if isinstance(co, tuple) else (co,), to if isinstance(to, tuple) else (to,)):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    cb, tb = nn.Bilinear(4, 5, 3), torch.nn.Bilinear(4, 5, 3)
    _copy_params(cb, tb)
    y = rng.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(cb(chutney.tensor(x), chutney.tensor(y)).detach().numpy(),
                               tb(torch.tensor(x), torch.tensor(y)).detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    for name, args in (("Threshold", (0.1, -2.0)), ("Hardshrink", (0.5,)), ("Softshrink", (0.3,)),
                       ("Softmax2d", ())):
        a = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
        np.testing.assert_allclose(getattr(nn, name)(*args)(chutney.tensor(a)).numpy(),
                                   getattr(torch.nn, name)(*args)(torch.tensor(a)).numpy(),
                                   rtol=1e-6, atol=1e-7, err_msg=name)


def test_legacy_names_inplace_methods_and_where():
    x = chutney.tensor([[1.0, -2.0], [0.0, 3.0]])
    t = torch.tensor([[1.0, -2.0], [0.0, 3.0]])
    got, want = chutney.where(x > 0), torch.where(t > 0)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    assert chutney.where(x > 0, x, 0.0 * x).tolist() == torch.where(t > 0, t, 0.0 * t).tolist()
    assert chutney.LongTensor([1, 2]).dtype == chutney.int64
    assert chutney.FloatTensor(2, 3).shape == (2, 3)
    assert x.type() == "chutney.FloatTensor" and x.type(chutney.float64).dtype == chutney.float64
    assert x.type("chutney.LongTensor").dtype == chutney.int64 and not x.is_cuda
    for name in ("abs_", "neg_", "sigmoid_", "tanh_", "relu_", "floor_", "exp_"):
        a, b = x.clone(), t.clone()
        getattr(a, name)()
        getattr(b, name)()
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, err_msg=name)
    with pytest.raises(RuntimeError):
        chutney.ones(2, requires_grad=True).exp_()  # as PyTorch: a leaf that requires grad


def test_gumbel_softmax_parameter_containers_and_inits():
    chutney.manual_seed(0)
    logits = chutney.tensor([[2.0, 0.0, -1.0]] * 4000, requires_grad=True)
    y = nn.functional.gumbel_softmax(logits, tau=0.5, hard=True)
    yn = y.detach().numpy()
    assert set(np.unique(yn)) == {0.0, 1.0} and np.all(yn.sum(1) == 1)
    p = np.exp([2.0, 0.0, -1.0]) / np.exp([2.0, 0.0, -1.0]).sum()
    np.testing.assert_allclose(yn.mean(0), p, atol=0.03)  # Gumbel-max samples the softmax
    (y * chutney.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert logits.grad is not None and float(logits.grad.abs().sum()) > 0  # straight-through
    pl = nn.ParameterList([chutney.ones(2), chutney.zeros(3)])
    m = nn.Module()
    m.pl = pl
    m.pd = nn.ParameterDict({"a": chutney.ones(1)})
    assert [n for n, _ in m.named_parameters()] == ["pl.0", "pl.1", "pd.a"]
    w = nn.init.trunc_normal_(chutney.empty(40000), std=1.0, a=-1.0, b=1.5).numpy()
    assert w.min() >= -1.0 and w.max() <= 1.5 and not np.any(w == -1.0) and not np.any(w == 1.5)
    # the truncated normal's mean and standard deviation (not a clamped normal's)
    import math as _m
    phi = [_m.exp(-t * t / 2) / _m.sqrt(2 * _m.pi) for t in (-1.0, 1.5)]
    z = 0.5 * (_m.erf(1.5 / _m.sqrt(2)) - _m.erf(-1.0 / _m.sqrt(2)))
    mean = (phi[0] - phi[1]) / z
    var = 1 + (-1.0 * phi[0] - 1.5 * phi[1]) / z - mean ** 2
    assert abs(w.mean() - mean) < 0.02 and abs(w.std() - _m.sqrt(var)) < 0.02
    q = nn.init.orthogonal_(chutney.empty(3, 5), gain=2.0).numpy()
    np.testing.assert_allclose(q @ q.T, 4 * np.eye(3), atol=1e-5)


def test_distributions_against_torch():
    D, TD = chutney.distributions, torch.distributions
    loc, scale = np.array([0.5, -1.0, 2.0]), np.array([1.0, 0.3, 2.5])
    v = np.array([0.1, -0.7, 4.0])
    cn = D.Normal(chutney.tensor(loc), chutney.tensor(scale))
    tn = TD.Normal(torch.tensor(loc), torch.tensor(scale))
    np.testing.assert_allclose(cn.log_prob(chutney.tensor(v)).numpy(), tn.log_prob(torch.tensor(v)).numpy(), rtol=1e-12)
    np.testing.assert_allclose(cn.entropy().numpy(), tn.entropy().numpy(), rtol=1e-12)
    np.testing.assert_allclose(cn.cdf(chutney.tensor(v)).numpy(), tn.cdf(torch.tensor(v)).numpy(), rtol=1e-6)
    cq = D.Normal(chutney.tensor(v), chutney.tensor(scale * 2))
    tq = TD.Normal(torch.tensor(v), torch.tensor(scale * 2))
    np.testing.assert_allclose(D.kl_divergence(cn, cq).numpy(), TD.kl_divergence(tn, tq).numpy(), rtol=1e-12)
    chutney.manual_seed(0)
    mu = chutney.tensor([1.0], requires_grad=True)
    s = D.Normal(mu, 2.0).rsample((20000,))
    s.mean().backward()
    assert abs(float(s.mean()) - 1.0) < 0.05 and abs(float(s.std()) - 2.0) < 0.05
    assert abs(mu.grad.item() - 1.0) < 1e-6  # d mean(loc + eps*scale) / d loc
    logits = np.array([[1.0, 0.0, -2.0], [0.5, 0.5, 0.5]])
    cc, tc = D.Categorical(logits=chutney.tensor(logits)), TD.Categorical(logits=torch.tensor(logits))
    a = np.array([0, 2])
    np.testing.assert_allclose(cc.log_prob(chutney.tensor(a)).numpy(), tc.log_prob(torch.tensor(a)).numpy(), rtol=1e-12)
    np.testing.assert_allclose(cc.entropy().numpy(), tc.entropy().numpy(), rtol=1e-12)
    cp = D.Categorical(probs=chutney.tensor([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]))
    tp = TD.Categorical(probs=torch.tensor([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]))
    np.testing.assert_allclose(D.kl_divergence(cc, cp).numpy(), TD.kl_divergence(tc, tp).numpy(), rtol=1e-6)
    draws = cp.sample((5000,)).numpy()
    assert draws.shape == (5000, 2)
    np.testing.assert_allclose(np.bincount(draws[:, 0], minlength=3) / 5000, [0.2, 0.3, 0.5], atol=0.03)
    bl = np.array([-3.0, 0.0, 40.0])
    cb, tb = D.Bernoulli(logits=chutney.tensor(bl)), TD.Bernoulli(logits=torch.tensor(bl))
    bv = np.array([1.0, 0.0, 1.0])
    np.testing.assert_allclose(cb.log_prob(chutney.tensor(bv)).numpy(), tb.log_prob(torch.tensor(bv)).numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(cb.entropy().numpy(), tb.entropy().numpy(), rtol=1e-9, atol=1e-12)
    cu, tu = D.Uniform(chutney.tensor(0.0), chutney.tensor(2.0)), TD.Uniform(torch.tensor(0.0), torch.tensor(2.0))
    assert cu.log_prob(chutney.tensor(1.0)).item() == pytest.approx(tu.log_prob(torch.tensor(1.0)).item())
    assert cu.entropy().item() == pytest.approx(tu.entropy().item())


def test_review_three_cases():
    D, TD = chutney.distributions, torch.distributions
    p = [0.0, 1.0, 0.3]
    cb, tb = D.Bernoulli(probs=chutney.tensor(p)), TD.Bernoulli(probs=torch.tensor(p))
    v = [0.0, 1.0, 1.0]
    np.testing.assert_allclose(cb.log_prob(chutney.tensor(v)).numpy(),
                               tb.log_prob(torch.tensor(v)).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cb.entropy().numpy(), tb.entropy().numpy(), rtol=1e-5, atol=1e-6)
    q = [0.5, 0.5, 0.0]
    np.testing.assert_allclose(
        D.kl_divergence(cb, D.Bernoulli(probs=chutney.tensor(q))).numpy(),
        TD.kl_divergence(tb, TD.Bernoulli(probs=torch.tensor(q))).numpy(), rtol=1e-5)
    cc = D.Categorical(probs=chutney.ones(3, 2))
    assert tuple(cc.log_prob(chutney.tensor(1)).shape) == (3,)
    kl = D.kl_divergence(D.Categorical(probs=chutney.tensor([0.5, 0.5])),
                         D.Categorical(probs=chutney.tensor([0.0, 1.0])))
    assert kl.item() == float("inf")
    x = chutney.ones(1, 1, 2, 2, 2, requires_grad=True)
    nn.functional.max_pool3d(x, 2).sum().backward()
    xt = torch.ones(1, 1, 2, 2, 2, requires_grad=True)
    torch.nn.functional.max_pool3d(xt, 2).sum().backward()
    assert x.grad.flatten().tolist() == xt.grad.flatten().tolist()
    assert tuple(nn.Conv3d(2, 3, 3, padding=1)(chutney.randn(2, 4, 4, 4)).shape) == (3, 4, 4, 4)
    pl = nn.ParameterList([chutney.ones(2), chutney.ones(3)])
    pl[0] = nn.Parameter(chutney.zeros(4))
    assert tuple(pl[0].shape) == (4,) and isinstance(pl[1:], nn.ParameterList)
    t = chutney.ones(2, requires_grad=True)
    t.sum().backward()
    import copy as _copy
    import pickle as _pickle
    assert _copy.deepcopy(t).grad.tolist() == [1.0, 1.0]  # deepcopy keeps .grad, as PyTorch
    assert _pickle.loads(_pickle.dumps(t)).grad is None  # pickles do not
    assert tuple(chutney.FloatTensor(chutney.ones(2, 3).shape).shape) == (2, 3)


def test_tied_weights_train_like_torch():
    """A language model's embedding and output projection sharing one weight
    (`lm_head.weight = wte.weight` and the reverse, as GPT-2 and nanoGPT
    tie them): one parameter, gradients of both uses summed into it, two
    Adam steps against PyTorch's; deepcopy keeps the tie."""
    import copy

    def make(lib, reverse):
        class LM(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.wte = lib.nn.Embedding(11, 6)
                self.ln = lib.nn.LayerNorm(6)
                self.head = lib.nn.Linear(6, 11, bias=False)
                if reverse:
                    self.wte.weight = self.head.weight
                else:
                    self.head.weight = self.wte.weight

            def forward(self, idx):
                return self.head(self.ln(self.wte(idx)))
        return LM()

    rng = np.random.default_rng(4)
    idx = rng.integers(0, 11, (3, 5))
    tgt = rng.integers(0, 11, (15,))
    for reverse in (False, True):
        cm, tm = make(chutney, reverse), make(torch, reverse)
        cm.load_state_dict({k: chutney.tensor(v.detach().numpy())
                            for k, v in tm.state_dict().items()})
        assert cm.wte.weight is cm.head.weight
        assert len(list(cm.parameters())) == len(list(tm.parameters())) == 3
        assert sorted(cm.state_dict()) == sorted(tm.state_dict())
        for lib, m in ((chutney, cm), (torch, tm)):
            opt = lib.optim.Adam(m.parameters(), lr=0.05)
            for _ in range(2):
                opt.zero_grad()
                out = m(lib.tensor(idx))
                lib.nn.functional.cross_entropy(out.reshape(15, 11), lib.tensor(tgt)).backward()
                opt.step()
        np.testing.assert_allclose(cm.wte.weight.detach().numpy(),
                                   tm.wte.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(cm.head.weight.grad.numpy(), tm.head.weight.grad.numpy(),
                                   rtol=1e-4, atol=1e-6)
        twin = copy.deepcopy(cm)
        assert twin.wte.weight is twin.head.weight and twin.wte.weight is not cm.wte.weight
        np.testing.assert_array_equal(twin.head.weight.detach().numpy(),
                                      cm.head.weight.detach().numpy())
        np.testing.assert_array_equal(twin(chutney.tensor(idx)).detach().numpy(),
                                      cm(chutney.tensor(idx)).detach().numpy())
    lin = nn.Linear(3, 4)
    with pytest.raises(Exception, match=r"\[4, 3\].*\[3, 4\]"):
        lin.weight = nn.Parameter(chutney.zeros(3, 4))
    with pytest.raises(RuntimeError, match="cannot be removed"):
        lin.weight = None
    w = nn.Parameter(chutney.ones(4, 3))
    lin.weight = w
    assert lin.weight is w
    np.testing.assert_allclose(lin(chutney.ones(1, 3)).detach().numpy(),
                               3 + lin.bias.detach().numpy()[None], rtol=1e-6)


def test_numpy_names_axis_and_keepdims():
    """PyTorch takes NumPy's axis= and keepdims= for dim= and keepdim=."""
    x = chutney.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    t = torch.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    for name in ("sum", "mean", "amax", "std", "logsumexp", "any"):
        a = getattr(x, name)(axis=1, keepdims=True)
        b = getattr(t, name)(axis=1, keepdims=True)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    assert chutney.cat([x, x], axis=1).shape == (3, 8)
    np.testing.assert_allclose(chutney.cumprod(x + 1, axis=1).numpy(),
                               torch.cumprod(t + 1, axis=1).numpy(), rtol=1e-6)
    assert x.median(axis=0, keepdims=True).values.shape == (1, 4)
    assert chutney.softmax(x, axis=0).shape == (3, 4)
    with pytest.raises(TypeError):
        x.sum(axis=1, dim=0)


def test_models_in_float64_like_torch():
    """model.double() (and dtype= at construction): the library's layers
    compute through their functional forms in float64, BatchNorm's running
    statistics included, and return to float32 with .float()."""
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.ReLU(),
                             torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 2)).double()
    cm = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(),
                       nn.Linear(3 * 4 * 4, 2)).double()
    cm.load_state_dict({k: chutney.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    assert all(p.dtype == chutney.float64 for p in cm.parameters())
    x = np.random.default_rng(0).standard_normal((4, 2, 6, 6))
    res = []
    for lib, m in ((chutney, cm), (torch, tm)):
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            y = m(lib.tensor(x))
            (y * y).sum().backward()
            opt.step()
        res.append([y.detach().numpy(), m[0].weight.detach().numpy(),
                    m[1].running_var.numpy(), m[4].weight.grad.numpy()])
    for a, b in zip(*res):
        assert a.dtype == np.float64
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    w = cm[4].weight.detach().numpy()
    cm.float()
    assert cm[4].weight.dtype == chutney.float32 and cm(chutney.ones(1, 2, 6, 6)).dtype == \
        chutney.float32
    np.testing.assert_allclose(cm[4].weight.detach().numpy(), w, rtol=1e-6)
    lin = nn.Linear(3, 2, dtype=chutney.float64)
    assert lin(chutney.ones(1, 3, dtype=chutney.float64)).dtype == chutney.float64
    with pytest.raises(NotImplementedError, match="functional form"):
        nn.LSTM(2, 3).double()


def test_dtype_changes_keep_ties_statistics_and_copies_like_torch():
    import copy
    res = []
    for lib in (chutney, torch):
        class LM(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = lib.nn.Embedding(10, 4)
                self.out = lib.nn.Linear(4, 10)
                self.out.weight = self.emb.weight

        m = LM().double()
        tied64 = m.out.weight is m.emb.weight and len(list(m.parameters())) == 2
        m.float()
        tied32 = m.out.weight is m.emb.weight and m.emb.weight.dtype == lib.float32
        bn = lib.nn.BatchNorm1d(3).double()
        for i in range(3):
            bn(lib.arange(12.0, dtype=lib.float64).reshape(4, 3) * (i + 1))
        bn.float().eval()
        y = bn(lib.ones(2, 3)).detach().numpy()
        bn.train()
        bn(lib.ones(4, 3))
        lin = lib.nn.Linear(3, 2).double()
        with lib.no_grad():
            lin.weight.fill_(0.1)
            lin.bias.zero_()
        twin = copy.deepcopy(lin)
        res.append([tied64, tied32, y, bn.running_mean.numpy(), str(twin.weight.dtype).split(".")[1],
                    twin(lib.ones(1, 3, dtype=lib.float64)).detach().numpy()])
    c, t = res
    assert c[0] and c[1] and t[0] and t[1] and c[4] == t[4] == "float64"
    for a, b in zip(c[2:4] + c[5:], t[2:4] + t[5:]):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    bn = nn.BatchNorm1d(3)
    sd = bn.state_dict()
    del sd["num_batches_tracked"]  # a checkpoint older than the count
    assert bn.load_state_dict(sd).missing_keys == []
