"""nn.utils reparametrisations against PyTorch's with the same weights and
inputs: weight_norm and spectral_norm (hook-based and parametrization
APIs) on Linear and Conv2d (library layers, which then compute through
their functional form): values, gradients, state_dict keys, SGD steps,
removal; orthogonal; parametrize with user parametrizations; functional_call;
fusion of conv/linear with batch norm; skip_init. Skipped without torch."""

import copy

import pytest

import chutney
import chutney.func

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

cnn, tnn = chutney.nn, torch.nn
rng = np.random.default_rng(5)


def c_of(t):
    return chutney.tensor(t.detach().numpy().copy())


def close(a, b, tol=1e-5):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def pair(kind):
    """The same layer in torch and chutney (chutney's weights copied from
    torch's), and an input for it."""
    if kind == "linear":
        t, c = tnn.Linear(4, 3), cnn.Linear(4, 3)
        x = rng.standard_normal((5, 4))
    else:
        t, c = tnn.Conv2d(3, 4, 3, padding=1), cnn.Conv2d(3, 4, 3, padding=1)
        x = rng.standard_normal((2, 3, 5, 5))
    c.load_state_dict({k: c_of(v) for k, v in t.state_dict().items()})
    return t, c, x.astype(np.float32)


def run(t, c, x):
    """Forward and backward of sum(out * seed) with both; the outputs and
    input gradients agree. Returns the two modules' named grads."""
    seed = None
    outs = []
    for lib, m in ((torch, t), (chutney, c)):
        xi = lib.tensor(x, requires_grad=True)
        y = m(xi)
        if seed is None:
            seed = rng.standard_normal(tuple(y.shape)).astype(np.float32)
        (y * lib.tensor(seed)).sum().backward()
        outs.append((y, xi.grad))
    close(outs[1][0], outs[0][0])
    close(outs[1][1], outs[0][1], 1e-4)


def same_params(t, c, tol=1e-4, grads=True):
    tp, cp = dict(t.named_parameters()), dict(c.named_parameters())
    assert list(tp) == list(cp)
    for k in tp:
        close(cp[k], tp[k], tol)
        if grads:
            close(cp[k].grad, tp[k].grad, tol)


# ---- weight_norm ----

@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("dim", [0, 1, None, -1])
def test_weight_norm_hooks(kind, dim):
    t, c, x = pair(kind)
    tnn.utils.weight_norm(t, dim=dim)
    cnn.utils.weight_norm(c, dim=dim)
    assert list(c.state_dict()) == list(t.state_dict()) == ["bias", "weight_g", "weight_v"]
    assert c.weight_g.shape == t.weight_g.shape
    run(t, c, x)
    same_params(t, c)
    close(c.weight, t.weight)
    tnn.utils.remove_weight_norm(t)
    cnn.utils.remove_weight_norm(c)
    assert list(c.state_dict()) == list(t.state_dict()) == ["bias", "weight"]
    close(c.weight, t.weight)
    assert "forward" not in c.__dict__  # the library's forward again
    t.zero_grad(), c.zero_grad()
    run(t, c, x)
    with pytest.raises(ValueError):
        cnn.utils.remove_weight_norm(c)


def test_weight_norm_sgd_steps_and_copy():
    t, c, x = pair("conv")
    tnn.utils.weight_norm(t)
    cnn.utils.weight_norm(c)
    topt = torch.optim.SGD(t.parameters(), lr=0.1, momentum=0.9)
    copt = chutney.optim.SGD(c.parameters(), lr=0.1, momentum=0.9)
    for _ in range(3):
        topt.zero_grad(), copt.zero_grad()
        run(t, c, x)
        topt.step(), copt.step()
        same_params(t, c, grads=False)
    with pytest.raises(RuntimeError, match="two weight_norm"):
        cnn.utils.weight_norm(c)
    d = copy.deepcopy(c)
    assert list(d.state_dict()) == list(c.state_dict())
    xi = chutney.tensor(x)
    close(d(xi), c(xi))


@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization(kind, dim):
    # torch 1.13 has only the hook API: the same g and v, the same values.
    t, c, x = pair(kind)
    tnn.utils.weight_norm(t, dim=dim)
    cnn.utils.parametrizations.weight_norm(c, dim=dim)
    assert list(c.state_dict()) == ["bias", "parametrizations.weight.original0",
                                    "parametrizations.weight.original1"]
    pw = c.parametrizations.weight
    close(pw.original0, t.weight_g)
    close(pw.original1, t.weight_v)
    run(t, c, x)
    close(pw.original0.grad, t.weight_g.grad, 1e-4)
    close(pw.original1.grad, t.weight_v.grad, 1e-4)
    close(c.bias.grad, t.bias.grad, 1e-4)
    assert type(c).__name__ == ("ParametrizedLinear" if kind == "linear" else "ParametrizedConv2d")
    cnn.utils.parametrize.remove_parametrizations(c, "weight")
    assert type(c) is (cnn.Linear if kind == "linear" else cnn.Conv2d)
    assert list(c.state_dict()) == ["bias", "weight"]
    close(c.weight, t.weight)


# ---- spectral_norm ----

@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_spectral_norm_hooks(kind):
    t, c, x = pair(kind)
    tnn.utils.spectral_norm(t, n_power_iterations=2)
    cnn.utils.spectral_norm(c, n_power_iterations=2)
    assert list(c.state_dict()) == list(t.state_dict()) == ["bias", "weight_orig", "weight_u",
                                                            "weight_v"]
    c.load_state_dict({k: c_of(v) for k, v in t.state_dict().items()})  # torch's u, v
    for _ in range(2):  # training: the power iteration moves u and v
        t.zero_grad(), c.zero_grad()
        run(t, c, x)
        same_params(t, c)
        close(c.weight_u, t.weight_u), close(c.weight_v, t.weight_v)
    t.eval(), c.eval()
    u = c.weight_u.clone()
    run(t, c, x)
    close(c.weight_u, u, 0)
    close(c.weight, t.weight)
    tnn.utils.remove_spectral_norm(t)
    cnn.utils.remove_spectral_norm(c)
    assert list(c.state_dict()) == ["bias", "weight"]
    close(c.weight, t.weight)


def test_spectral_norm_hooks_dim_and_sigma():
    chutney.manual_seed(0)  # the power iteration's start (a random u) decides its speed
    c = cnn.Linear(6, 5)
    cnn.utils.spectral_norm(c, n_power_iterations=100, eps=1e-12)
    c(chutney.randn(2, 6))
    s = np.linalg.svd(c.weight.detach().numpy(), compute_uv=False)
    assert abs(s[0] - 1) < 1e-4
    t = tnn.ConvTranspose2d(4, 3, 3)
    tnn.utils.spectral_norm(t)
    ct = cnn.ConvTranspose2d(4, 3, 3)
    cnn.utils.spectral_norm(ct)
    assert ct.weight_u.shape == t.weight_u.shape and ct.weight_v.shape == t.weight_v.shape


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_spectral_norm_parametrization(kind):
    t, c, x = pair(kind)
    tnn.utils.parametrizations.spectral_norm(t)
    cnn.utils.parametrizations.spectral_norm(c)
    assert list(c.state_dict()) == list(t.state_dict()) == [
        "bias", "parametrizations.weight.original", "parametrizations.weight.0._u",
        "parametrizations.weight.0._v"]
    c.load_state_dict({k: c_of(v) for k, v in t.state_dict().items()})
    for _ in range(2):
        t.zero_grad(), c.zero_grad()
        run(t, c, x)
        same_params(t, c)
        for b in ("_u", "_v"):
            close(getattr(c.parametrizations.weight[0], b), getattr(t.parametrizations.weight[0], b))


# ---- orthogonal ----

@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3)])
def test_orthogonal_trains(shape):
    chutney.manual_seed(0)
    c = cnn.Linear(shape[1], shape[0], bias=False)
    t = tnn.utils.parametrizations.orthogonal(tnn.Linear(shape[1], shape[0], bias=False))
    cnn.utils.parametrizations.orthogonal(c)
    assert list(c.state_dict()) == list(t.state_dict())

    def orth_err():
        w = c.weight.detach().numpy().astype(np.float64)
        g = w @ w.T if shape[0] <= shape[1] else w.T @ w
        return np.abs(g - np.eye(min(shape))).max()

    w0 = c.weight.detach().numpy().copy()
    assert orth_err() < 1e-5
    x, y = chutney.randn(16, shape[1]), chutney.randn(16, shape[0])
    opt = chutney.optim.SGD(c.parameters(), lr=0.1)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = ((c(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0]
    assert orth_err() < 1e-4
    assert np.abs(c.weight.detach().numpy() - w0).max() > 1e-3


@pytest.mark.parametrize("omap", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_maps_and_assignment(omap):
    c = cnn.Linear(4, 4)
    cnn.utils.parametrizations.orthogonal(c, orthogonal_map=omap)
    q = np.linalg.qr(rng.standard_normal((4, 4)))[0].astype(np.float32)
    c.weight = chutney.tensor(q)  # right_inverse
    close(c.weight, q, 1e-5)
    with chutney.no_grad():
        # the strictly lower part: what every map reads (householder's
        # diagonal holds the signs right_inverse set)
        c.parametrizations.weight.original.add_(chutney.randn(4, 4).tril(-1) * 0.3)
    w = c.weight.detach().numpy().astype(np.float64)
    assert np.abs(w.T @ w - np.eye(4)).max() < 1e-5


def test_matrix_exp_against_torch():
    from chutney.nn.utils.parametrizations import _householder_product, _matrix_exp
    a = rng.standard_normal((5, 5)) * 2
    close(_matrix_exp(chutney.tensor(a)), torch.matrix_exp(torch.tensor(a)), 1e-9)
    a = np.tril(rng.standard_normal((5, 3)), -1)
    tau = rng.standard_normal(3)
    close(_householder_product(chutney.tensor(a), chutney.tensor(tau)),
          torch.linalg.householder_product(torch.tensor(a), torch.tensor(tau)), 1e-9)


# ---- parametrize ----

def make_symmetric(lib):
    class Symmetric(lib.nn.Module):
        calls = 0

        def forward(self, x):
            Symmetric.calls += 1
            return x.triu() + x.triu(1).transpose(0, 1)

        def right_inverse(self, a):
            return a.triu()
    return Symmetric


def make_scale(lib):
    class Scale(lib.nn.Module):
        def forward(self, x):
            return x * 2

        def right_inverse(self, a):
            return a / 2
    return Scale


def test_parametrize_user_parametrizations():
    t, c = tnn.Linear(3, 3), cnn.Linear(3, 3)
    c.load_state_dict({k: c_of(v) for k, v in t.state_dict().items()})
    P = tnn.utils.parametrize
    Q = cnn.utils.parametrize
    worig = c.weight
    for lib, P_, m in ((torch, P, t), (chutney, Q, c)):
        P_.register_parametrization(m, "weight", make_symmetric(lib)())
        P_.register_parametrization(m, "weight", make_scale(lib)())
    assert c.parametrizations.weight.original is worig  # the same Parameter object
    assert Q.is_parametrized(c) and Q.is_parametrized(c, "weight")
    assert not Q.is_parametrized(c, "bias")
    assert list(c.state_dict()) == list(t.state_dict())
    close(c.weight, t.weight)
    w = c.weight.detach().numpy()
    np.testing.assert_allclose(w, w.T)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    run(t, c, x)
    same_params(t, c)
    # assignment goes through the right_inverses
    s = rng.standard_normal((3, 3)).astype(np.float32)
    s = s + s.T
    t.weight = torch.tensor(s)
    c.weight = chutney.tensor(s)
    close(c.weight, s)
    close(c.parametrizations.weight.original, t.parametrizations.weight.original)
    # cached(): computed once per tensor inside
    Sym = type(c.parametrizations.weight[0])
    Sym.calls = 0
    with Q.cached():
        c.weight, c.weight
    assert Sym.calls == 1
    c.weight
    assert Sym.calls == 2
    # removal, leaving the parametrized value in the original Parameter
    Q.remove_parametrizations(c, "weight")
    P.remove_parametrizations(t, "weight")
    assert c.weight is worig and not Q.is_parametrized(c)
    assert type(c) is cnn.Linear and "parametrizations" not in c._modules
    close(c.weight, s)
    assert list(c.state_dict()) == list(t.state_dict()) == ["bias", "weight"]


def test_parametrize_leave_unparametrized_and_errors():
    Q = cnn.utils.parametrize
    m = cnn.Linear(3, 3)
    w = m.weight.detach().clone()
    Q.register_parametrization(m, "weight", make_symmetric(chutney)())
    Q.remove_parametrizations(m, "weight", leave_parametrized=False)
    close(m.weight, np.triu(w.numpy()))  # right_inverse's triu kept as the original
    with pytest.raises(ValueError):
        Q.remove_parametrizations(m, "weight")
    with pytest.raises(ValueError, match="does not have a parameter"):
        Q.register_parametrization(m, "nothing", make_scale(chutney)())

    class Grow(cnn.Module):
        def forward(self, x):
            return chutney.cat([x, x], 0)

    with pytest.raises(ValueError, match="shape"):
        Q.register_parametrization(m, "weight", Grow())
    Q.register_parametrization(m, "weight", Grow(), unsafe=True)
    assert tuple(m.weight.shape) == (6, 3)
    cnn.utils.parametrizations.weight_norm(cnn.Linear(2, 2))
    with pytest.raises(ValueError, match="sequence"):
        mm = cnn.utils.parametrizations.weight_norm(cnn.Linear(2, 2))
        Q.remove_parametrizations(mm, "weight", leave_parametrized=False)


def test_parametrize_python_module_and_buffer():
    class Net(cnn.Module):
        def __init__(self):
            super().__init__()
            self.w = cnn.Parameter(chutney.randn(3, 3))
            self.register_buffer("b", chutney.ones(3))

        def forward(self, x):
            return x @ self.w + self.b

    n = Net()
    Q = cnn.utils.parametrize
    Q.register_parametrization(n, "w", make_symmetric(chutney)())
    Q.register_parametrization(n, "b", make_scale(chutney)())
    assert list(n.state_dict()) == ["parametrizations.w.original", "parametrizations.b.original"]
    assert [k for k, _ in n.named_buffers()] == ["parametrizations.b.original"]
    close(n.parametrizations.b.original, np.full(3, 0.5, np.float32))
    close(n(chutney.zeros(1, 3)), np.ones((1, 3), np.float32))
    d = copy.deepcopy(n)
    close(d.w, n.w)
    Q.remove_parametrizations(n, "w")
    assert Q.is_parametrized(n) and Q.is_parametrized(d, "w")


def test_batch_norm_reparametrised_like_torch():
    t, c = tnn.BatchNorm1d(3), cnn.BatchNorm1d(3)
    with torch.no_grad():
        t.weight.copy_(torch.tensor([0.5, -2.0, 1.5]))
    c.load_state_dict({k: c_of(v) for k, v in t.state_dict().items()})
    tnn.utils.weight_norm(t, dim=None)
    cnn.utils.weight_norm(c, dim=None)
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(c(chutney.tensor(x)).detach().numpy(),
                               t(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c.running_mean.numpy(), t.running_mean.numpy(), rtol=1e-6)


def test_unsupported_library_layers():
    for m in (cnn.LSTM(3, 4),):
        name = "weight_ih_l0" if isinstance(m, cnn.LSTM) else "weight"
        with pytest.raises(NotImplementedError, match=type(m).__name__):
            cnn.utils.weight_norm(m, name)
        with pytest.raises(NotImplementedError, match=type(m).__name__):
            cnn.utils.parametrizations.orthogonal(m, name) if m.__dict__.get(name) else \
                cnn.utils.parametrize.register_parametrization(m, name, make_scale(chutney)())
        assert name in m._parameters  # left as it was


def test_embedding_and_layer_norm():
    t, c = tnn.Embedding(6, 4, padding_idx=1), cnn.Embedding(6, 4, padding_idx=1)
    with torch.no_grad():
        t.weight[1] = 1.0  # not zero, so that its norm is
    c.load_state_dict({k: c_of(v) for k, v in t.state_dict().items()})
    tnn.utils.weight_norm(t)
    cnn.utils.weight_norm(c)
    idx = np.array([[0, 1, 2], [1, 5, 3]])
    for lib, m in ((torch, t), (chutney, c)):
        (m(lib.tensor(idx)) ** 2).sum().backward()
    same_params(t, c)
    assert float(c.weight_v.grad[1].abs().sum()) == 0  # no gradient through padding
    t, c = tnn.LayerNorm(5), cnn.LayerNorm(5)
    c.load_state_dict({k: c_of(v) for k, v in t.state_dict().items()})
    tnn.utils.parametrizations.spectral_norm(t)  # 1-d: weight / ||weight||
    cnn.utils.parametrizations.spectral_norm(c)
    run(t, c, rng.standard_normal((2, 5)).astype(np.float32))
    same_params(t, c)


# ---- functional_call, skip_init ----

def test_functional_call():
    t = tnn.Sequential(tnn.Linear(4, 5), tnn.Tanh(), tnn.Linear(5, 2))
    c = cnn.Sequential(cnn.Linear(4, 5), cnn.Tanh(), cnn.Linear(5, 2))
    c.load_state_dict({k: c_of(v) for k, v in t.state_dict().items()})
    new = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32)
           for k, v in t.state_dict().items() if k != "2.bias"}
    x = rng.standard_normal((3, 4)).astype(np.float32)
    before = {k: v.clone() for k, v in c.state_dict().items()}
    res = []
    for lib, m, fc in ((torch, t, tnn.utils.stateless.functional_call),
                       (chutney, c, cnn.utils.stateless.functional_call)):
        ps = {k: lib.tensor(v, requires_grad=True) for k, v in new.items()}
        y = fc(m, ps, (lib.tensor(x),))
        y.sum().backward()
        res.append((y, {k: p.grad for k, p in ps.items()}))
    close(res[1][0], res[0][0])
    for k in new:
        close(res[1][1][k], res[0][1][k], 1e-4)
    for k, v in c.state_dict().items():
        close(v, before[k], 0)
    assert "forward" not in c[0].__dict__
    close(c(chutney.tensor(x)), t(torch.tensor(x)))
    y = chutney.func.functional_call(c, ({"0.weight": chutney.tensor(new["0.weight"])},
                                         {"2.weight": chutney.tensor(new["2.weight"])}),
                                     chutney.tensor(x))
    assert tuple(y.shape) == (3, 2)
    with pytest.raises(RuntimeError, match="missing"):
        chutney.func.functional_call(c, {"0.weight": chutney.tensor(new["0.weight"])},
                                     (chutney.tensor(x),), strict=True)


def test_functional_call_parametrized_and_tied():
    m = cnn.Linear(3, 3)
    cnn.utils.parametrize.register_parametrization(m, "weight", make_scale(chutney)())
    w = chutney.eye(3)
    y = cnn.utils.stateless.functional_call(m, {"weight": w, "bias": chutney.zeros(3)},
                                            (chutney.ones(1, 3),))
    close(y, np.ones((1, 3), np.float32))
    a, b = cnn.Linear(3, 3), cnn.Linear(3, 3)
    b.weight = a.weight
    seq = cnn.Sequential(a, b)
    out = chutney.func.functional_call(seq, {"0.weight": chutney.zeros(3, 3)}, chutney.ones(1, 3))
    close(out, b.bias.detach().reshape(1, 3))  # the tied 1.weight is zero too


def test_skip_init():
    m = cnn.utils.skip_init(cnn.Linear, 3, 4)
    assert tuple(m.weight.shape) == (4, 3)

    class NoDevice(cnn.Module):
        def __init__(self, n):
            super().__init__()

    with pytest.raises(RuntimeError, match="device"):
        cnn.utils.skip_init(NoDevice, 3)


# ---- fusion ----

@pytest.mark.parametrize("bias", [True, False])
def test_fuse_conv_bn(bias):
    conv, bn = cnn.Conv2d(3, 4, 3, padding=1, bias=bias), cnn.BatchNorm2d(4)
    with chutney.no_grad():
        bn.running_mean.copy_(chutney.randn(4))
        bn.running_var.copy_(chutney.rand(4) + 0.5)
        bn.weight.copy_(chutney.randn(4))
        bn.bias.copy_(chutney.randn(4))
    conv.eval(), bn.eval()
    fused = cnn.utils.fuse_conv_bn_eval(conv, bn)
    x = chutney.randn(2, 3, 6, 6)
    close(fused(x), bn(conv(x)), 1e-4)
    assert fused.bias is not None and fused is not conv
    t = tnn.utils.fusion.fuse_conv_bn_weights(
        *[None if v is None else torch.tensor(v.detach().numpy()) for v in
          (conv.weight, conv.bias, bn.running_mean, bn.running_var)], bn.eps,
        torch.tensor(bn.weight.detach().numpy()), torch.tensor(bn.bias.detach().numpy()))
    close(fused.weight, t[0]), close(fused.bias, t[1])
    with pytest.raises(AssertionError):
        cnn.utils.fuse_conv_bn_eval(conv.train(), bn)


def test_fuse_linear_bn():
    lin, bn = cnn.Linear(5, 3), cnn.BatchNorm1d(3)
    with chutney.no_grad():
        bn.running_mean.copy_(chutney.randn(3))
        bn.running_var.copy_(chutney.rand(3) + 0.5)
    lin.eval(), bn.eval()
    fused = cnn.utils.fuse_linear_bn_eval(lin, bn)
    x = chutney.randn(4, 5)
    close(fused(x), bn(lin(x)), 1e-5)
