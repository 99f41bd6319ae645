"""In-place ops while autograd records (x += y, x.mul_(y), x[key] = v,
x[key] += v, relu_, copy_, masked_fill_, ...) on tensors that are not
leaves: values and gradients against PyTorch's (Debian's python3-torch) for
the same code; ResNet's `out += identity`."""

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")


def _program_a(lib, x, w):
    y = x * 2
    y[:, 1] = lib.tensor([5.0, 6.0, 7.0])
    y[:, 2] = w * 3
    y += 1
    y.mul_(x)
    y[0] += x[1]
    z = lib.zeros(3, 4)
    z += y
    z[1:, 0:2] *= x[:2, :2]
    z[z > 3] = 0.5
    z.masked_fill_(x < -1, -2.0)
    z.sub_(w.unsqueeze(1), alpha=2)
    z[[0, 2], [1, 3]] = w[:2] * 4
    z.relu_()  # last: PyTorch refuses changes to a value its backward keeps
    return (z * lib.arange(12.0).reshape(3, 4)).sum()


def _program_b(lib, x, w):
    buf = lib.zeros(4)
    buf.copy_(w.repeat(2)[:4])  # a constant buffer takes a value that needs gradients
    h = (x @ buf).unsqueeze(1).repeat(1, 4)
    h[:, ::2] -= x[:, 1:3].sum(1, keepdim=True)
    out = h.tanh() * 1
    out.add_(h, alpha=0.5)
    out.div_(1.5).clamp_(min=-0.3)
    return (out ** 2).mean()


@pytest.mark.parametrize("program", [_program_a, _program_b])
def test_recorded_inplace_ops_like_torch(program):
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    wv = rng.standard_normal(3).astype(np.float32)
    res = []
    for lib in (chutney, torch):
        x = lib.tensor(xv, requires_grad=True)
        w = lib.tensor(wv, requires_grad=True)
        loss = program(lib, x, w)
        loss.backward()
        res.append((loss.item(), x.grad.numpy(), w.grad.numpy()))
    (cl, cgx, cgw), (tl, tgx, tgw) = res
    assert abs(cl - tl) <= 1e-5 * max(1, abs(tl))
    np.testing.assert_allclose(cgx, tgx, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(cgw, tgw, rtol=1e-4, atol=1e-6)


def test_resnet_block_adds_in_place_like_torch():
    """torchvision's BasicBlock: out += identity; relu(inplace=True)."""
    def block(lib):
        class Block(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = lib.nn.Conv2d(3, 3, 3, padding=1, bias=False)
                self.bn = lib.nn.BatchNorm2d(3)
                self.relu = lib.nn.ReLU(inplace=True)

            def forward(self, x):
                identity = x
                out = self.bn(self.conv(x))
                out += identity
                return self.relu(out)
        return Block()

    cb, tb = block(chutney), block(torch)
    cb.load_state_dict({k: chutney.tensor(v.detach().numpy()) for k, v in tb.state_dict().items()})
    xv = np.random.default_rng(2).standard_normal((2, 3, 5, 5)).astype(np.float32)
    grads = []
    for lib, m in ((chutney, cb), (torch, tb)):
        x = lib.tensor(xv, requires_grad=True)
        y = m(x)
        (y * y).sum().backward()
        grads.append((y.detach().numpy(), x.grad.numpy(), m.conv.weight.grad.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    # Traced (chutney.compile, ONNX export): the graph takes the results.
    cb.eval()
    x = chutney.tensor(xv)
    want = cb(x).detach().numpy()
    with chutney.no_grad():
        np.testing.assert_allclose(chutney.compile(cb)(x).numpy(), want, rtol=1e-5, atol=1e-6)
    import io
    buf = io.BytesIO()
    chutney.onnx.export(cb, x, buf)
    got = chutney.onnx.load(buf.getvalue())(x)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_inplace_rules():
    w = chutney.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w.add_(1)
    y = w * 1
    alias = y
    y += 1
    assert alias is y  # the same object, with the new value
    assert y.tolist() == [2, 2, 2]
    with pytest.raises(RuntimeError, match="more than once"):
        y[[0, 0]] = chutney.tensor([1.0, 2.0])
    z = w * 2
    z.zero_()
    assert z.tolist() == [0, 0, 0] and not z.requires_grad  # a constant from then on
    v = w * 2
    with pytest.raises(ValueError, match="expand"):
        v += chutney.ones(2, 3)  # the result would not fit v
    # Without recording, writes go into memory, and views see them.
    with chutney.no_grad():
        a = chutney.zeros(2, 3)
        row = a[1]
        a += 1
        assert row.tolist() == [1, 1, 1]


def test_copy_from_a_broadcast_source_does_not_share_its_memory():
    for lib in (chutney, torch):
        w = lib.ones(3, requires_grad=True)
        y = lib.zeros(2, 3) + w
        s = lib.tensor([1.0, 2.0, 3.0])
        y.copy_(s)
        with lib.no_grad():
            y[0, 0] = 100
        assert s.tolist() == [1.0, 2.0, 3.0] and y[1].tolist() == [1.0, 2.0, 3.0]


def test_assignment_into_bool_and_int_tensors_while_tracing():
    def f(x):
        m = x > 0
        m[0] = True
        k = (x * 0).long()
        k[1:] = 5
        return x * m + k

    x = chutney.tensor([-1.0, 2.0, -3.0])
    with chutney.no_grad():
        np.testing.assert_array_equal(chutney.compile(f)(x).numpy(), f(x).numpy())
