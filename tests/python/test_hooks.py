"""Tensor.register_hook and the modules' backward hooks against PyTorch
(Debian's python3-torch): gradients seen and replaced, order, removal, a
Grad-CAM-style capture of a layer's activations and gradients, and errors."""

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")


def test_tensor_hooks_like_torch():
    xv = np.array([0.5, -1.0, 2.0], np.float32)
    results = []
    for lib in (chutney, torch):
        x = lib.tensor(xv, requires_grad=True)
        y = x * 2
        z = y.exp()
        seen = []
        y.register_hook(lambda g: seen.append(("y1", g.tolist())))
        y.register_hook(lambda g: g * 10)  # replaces what flows on
        y.register_hook(lambda g: seen.append(("y3", g.tolist())))  # sees the replacement
        h = x.register_hook(lambda g: g + 1)
        x.register_hook(lambda g: seen.append(("x", g.tolist())))
        z.sum().backward(retain_graph=True)
        first = x.grad.tolist()
        h.remove()
        x.grad = None
        z.sum().backward()
        results.append((seen, first, x.grad.tolist()))
    (cs, cf, cg), (ts, tf, tg) = results
    np.testing.assert_allclose(cf, tf, rtol=1e-6)
    np.testing.assert_allclose(cg, tg, rtol=1e-6)
    assert [s[0] for s in cs] == [s[0] for s in ts]
    for a, b in zip(cs, ts):
        np.testing.assert_allclose(a[1], b[1], rtol=1e-6)


def test_hooks_in_autograd_grad_and_errors():
    x = chutney.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    y.register_hook(lambda g: g * 3)
    (gx,) = chutney.autograd.grad(y.sum(), x)
    assert gx.tolist() == [6.0, 12.0]
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        chutney.ones(2).register_hook(lambda g: g)
    w = chutney.ones(2, requires_grad=True)
    w.register_hook(lambda g: chutney.ones(3))
    with pytest.raises(Exception, match=r"\[3\] gradient"):
        (w * 2).sum().backward()
    v = chutney.ones(2, requires_grad=True)

    def boom(g):
        raise ValueError("from the hook")
    v.register_hook(boom)
    with pytest.raises(Exception, match="from the hook"):
        (v * 2).sum().backward()
    u = chutney.ones(2, requires_grad=True)
    u.register_hook(lambda g: "nope")
    with pytest.raises(Exception, match="not a Tensor or None"):
        (u * 2).sum().backward()


def _pair(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Conv2d(2, 3, 3, padding=1), lib.nn.ReLU(), lib.nn.Flatten(),
                             lib.nn.Linear(3 * 4 * 4, 2))


def test_module_backward_hooks_like_torch():
    tm = _pair(torch)
    cm = _pair(chutney)
    cm.load_state_dict({k: chutney.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    xv = np.random.default_rng(0).standard_normal((2, 2, 4, 4)).astype(np.float32)
    logs = []
    for lib, m in ((chutney, cm), (torch, tm)):
        log = []
        m[3].register_full_backward_hook(
            lambda mod, gi, go: log.append(("fc", gi[0].numpy().copy(), go[0].numpy().copy()))
            or (gi[0] * 2,))
        h = m[1].register_full_backward_hook(
            lambda mod, gi, go: log.append(("relu", gi[0].numpy().copy(), go[0].numpy().copy())))
        m[0].register_full_backward_hook(lambda mod, gi, go: log.append(("conv", gi, None)))
        # Grad-CAM: the activation of a layer and its gradient.
        acts = {}
        m[1].register_forward_hook(lambda mod, inp, out: acts.update(a=out))
        x = lib.tensor(xv, requires_grad=False)
        out = m(x)
        acts["a"].register_hook(lambda g: acts.update(g=g))
        out[:, 1].sum().backward()
        log.append(("cam", (acts["g"].mean((2, 3), keepdim=True) * acts["a"]).sum(1).detach().numpy(),
                    m[0].weight.grad.numpy().copy()))
        h.remove()
        m.zero_grad()
        m(x).sum().backward()  # the relu hook no longer runs
        logs.append(log)
    cl, tl = logs
    assert [e[0] for e in cl] == [e[0] for e in tl]
    for a, b in zip(cl, tl):
        for p, q in zip(a[1:], b[1:]):
            if isinstance(p, np.ndarray):
                np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-6)
            else:
                assert p == q  # (None,) grad_input of the first layer


def test_full_backward_pre_hook():
    lin = chutney.nn.Linear(3, 2)
    seen = []
    lin.register_full_backward_pre_hook(lambda m, go: seen.append(go[0].tolist()) or (go[0] * 0,))
    x = chutney.ones(4, 3, requires_grad=True)
    lin(x).sum().backward()
    assert seen == [[[1.0, 1.0]] * 4]
    assert x.grad.abs().sum().item() == 0 and lin.weight.grad.abs().sum().item() == 0


def test_hook_results_and_seen_gradients_are_not_written_later():
    """A tensor a hook returns or keeps is not the leaf's .grad itself: the
    next backward pass adds into .grad, not into it (as PyTorch)."""
    for lib in (chutney, torch):
        a = lib.tensor([2.0, 3.0], requires_grad=True)
        fixed = lib.tensor([7.0, 7.0])
        a.register_hook(lambda g: fixed)
        (a * 2).sum().backward()
        (a * 2).sum().backward()
        assert fixed.tolist() == [7.0, 7.0] and a.grad.tolist() == [14.0, 14.0]
        b = lib.ones(3, requires_grad=True)
        saved = []
        b.register_hook(lambda g: saved.append(g))
        (b * 2).sum().backward()
        (b * 3).sum().backward()
        assert saved[0].tolist() == [2.0, 2.0, 2.0] and b.grad.tolist() == [5.0, 5.0, 5.0]


def test_record_freed_by_an_inner_backward_is_an_error():
    w = chutney.tensor([1.0, 2.0], requires_grad=True)
    y = w * w
    z = y * 3
    loss2 = y.sum()
    z.register_hook(lambda g: loss2.backward())  # frees y's record
    with pytest.raises(Exception, match="second time"):
        z.sum().backward()


def test_module_backward_hooks_shapes_and_reruns_like_torch():
    """grad_input has an entry per tensor argument (zeros for one that needs
    no gradient), grad_output per top-level output (None for a nested
    tuple); the hooks run on every backward pass (retain_graph); a module
    that returns its input gets its own grad_output."""
    logs = []
    for lib in (chutney, torch):
        class M(lib.nn.Module):
            def forward(self, x, y, k=3):
                return x * 2 + y
        log = []
        m = M()
        m.register_full_backward_hook(
            lambda mod, gi, go: log.append(([g.tolist() for g in gi], [g.tolist() for g in go])))
        out = m(lib.ones(2, requires_grad=True), lib.ones(2))
        out.sum().backward(retain_graph=True)
        out.sum().backward()
        lstm = lib.nn.LSTM(2, 3)
        lstm.register_full_backward_hook(
            lambda mod, gi, go: log.append((len(gi), [g is None for g in go])))
        o, (h, c) = lstm(lib.ones(4, 1, 2, requires_grad=True))
        (o.sum() + h.sum()).backward()
        ident = lib.nn.Identity()
        ident.register_full_backward_hook(
            lambda mod, gi, go: log.append(([g.tolist() for g in gi], [g.tolist() for g in go])))
        (ident(lib.ones(2, requires_grad=True)) * 3).sum().backward()
        logs.append(log)
    assert logs[0] == logs[1]
