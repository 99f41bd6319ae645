"""torch.utils.checkpoint (recomputation in the backward pass: gradients
against PyTorch's and against the plain run, dropout's masks drawn again
the same), torch.jit's names over eager execution, torch.testing's
assert_close against PyTorch's verdicts, torch.backends.mps."""

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
from chutney.utils import checkpoint as cck  # noqa: E402


def _models():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8),
                             torch.nn.ReLU(), torch.nn.Linear(8, 3))
    cm = chutney.nn.Sequential(chutney.nn.Linear(4, 8), chutney.nn.Tanh(), chutney.nn.Linear(8, 8),
                               chutney.nn.ReLU(), chutney.nn.Linear(8, 3))
    cm.load_state_dict({k: chutney.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return cm, tm


def test_checkpoint_gradients_like_torch():
    import torch.utils.checkpoint as tck
    cm, tm = _models()
    xv = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    res = []
    for lib, m, ck in ((chutney, cm, cck), (torch, tm, tck)):
        kw = {} if lib is chutney else {"use_reentrant": False}
        x = lib.tensor(xv, requires_grad=True)
        h = ck.checkpoint(lambda a: m[1](m[0](a)), x, **kw)
        y = m[4](m[3](m[2](h)))
        (y * y).sum().backward()
        one = [x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in m.parameters()]
        m.zero_grad()
        x2 = lib.tensor(xv, requires_grad=True)
        ck.checkpoint_sequential(m, 2, x2).pow(2).sum().backward()
        two = [x2.grad.numpy().copy()] + [p.grad.numpy().copy() for p in m.parameters()]
        m.zero_grad()
        # No argument requires grad: the parameters inside still get theirs.
        ck.checkpoint(m, lib.tensor(xv), **kw).sum().backward()
        three = [p.grad.numpy().copy() for p in m.parameters()]
        m.zero_grad()
        res.append(one + two + three)
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_checkpoint_redraws_dropout_and_recomputes():
    lin = chutney.nn.Linear(6, 6)
    drop = chutney.nn.Dropout(0.5)
    x = chutney.randn(4, 6, requires_grad=True)
    calls = []

    def block(a):
        calls.append(1)
        return drop(lin(a)).tanh()

    grads = []
    for ck in (True, False):
        chutney.manual_seed(7)
        y = cck.checkpoint(block, x) if ck else block(x)
        (y * y).sum().backward()
        grads.append((x.grad.numpy().copy(), lin.weight.grad.numpy().copy(), y.detach().numpy()))
        x.grad = None
        lin.zero_grad()
    assert len(calls) == 3  # forward and recomputation, then the plain run
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)
    with chutney.no_grad():
        assert cck.checkpoint(block, x).shape == (4, 6)


def test_jit_names_run_eagerly():
    @chutney.jit.script
    def f(x):
        return x * 2

    m = chutney.nn.Linear(2, 2)
    assert chutney.jit.script(m) is m and chutney.jit.trace(m, chutney.ones(1, 2)) is m
    assert f(chutney.ones(2)).tolist() == [2, 2]
    assert not chutney.jit.is_scripting() and chutney.jit.annotate(int, 3) == 3
    assert chutney.jit.fork(f, chutney.ones(1)).wait().tolist() == [2]
    assert chutney.jit.ignore(f) is f and chutney.jit.unused(f) is f
    with pytest.raises(NotImplementedError, match="state_dict"):
        chutney.jit.save(m, "x.pt")
    assert chutney.jit.Final[int] is int


def test_assert_close_like_torch():
    cases = [([1.0, 2.0], [1.0, 2.0 + 1e-6], {}),
             ([1.0, 2.0], [1.0, 2.1], {}),
             ([1.0, float("nan")], [1.0, float("nan")], {}),
             ([1.0, float("nan")], [1.0, float("nan")], {"equal_nan": True}),
             ([1.0, 2.0], [1.0, 2.05], {"rtol": 0.1, "atol": 0}),
             ([float("inf")], [float("inf")], {})]
    for a, b, kw in cases:
        verdicts = []
        for lib in (chutney, torch):
            try:
                lib.testing.assert_close(lib.tensor(a), lib.tensor(b), **kw)
                verdicts.append(True)
            except AssertionError:
                verdicts.append(False)
        assert verdicts[0] == verdicts[1], (a, b, kw)
    with pytest.raises(AssertionError, match="dtype"):
        chutney.testing.assert_close(chutney.ones(2), chutney.ones(2, dtype=chutney.float64))
    with pytest.raises(AssertionError, match="shape"):
        chutney.testing.assert_close(chutney.ones(2), chutney.ones(3))
    chutney.testing.assert_close({"a": [chutney.ones(2)]}, {"a": [chutney.ones(2)]})
    t = chutney.testing.make_tensor(3, 4, dtype=chutney.float32, low=-1, high=1)
    assert t.shape == (3, 4) and float(t.abs().max()) <= 1


def test_backends_mps():
    assert chutney.backends.mps.is_available() is False
    assert chutney.backends.mps.is_built() is False


def test_memory_formats_and_constants():
    x = chutney.randn(2, 3, 4, 5)
    for y in (x.to(memory_format=chutney.channels_last), x.contiguous(memory_format=chutney.channels_last),
              x.to("cpu", memory_format=chutney.contiguous_format)):
        np.testing.assert_array_equal(y.numpy(), x.numpy())
    chutney.nn.Conv2d(3, 3, 1).to(memory_format=chutney.channels_last)
    assert chutney.inf == float("inf") and chutney.pi == np.pi and chutney.e == np.e
    assert chutney.newaxis is None and chutney.nan != chutney.nan


def test_data_parallel_and_distributed():
    lin = chutney.nn.Linear(3, 2)
    dp = chutney.nn.DataParallel(lin)
    x = chutney.randn(4, 3)
    np.testing.assert_array_equal(dp(x).detach().numpy(), lin(x).detach().numpy())
    tdp = torch.nn.DataParallel(torch.nn.Linear(3, 2))
    assert sorted(dp.state_dict()) == sorted(tdp.state_dict())  # module.weight, module.bias
    assert dp.module is lin
    assert not chutney.distributed.is_available() and not chutney.distributed.is_initialized()
    with pytest.raises(NotImplementedError, match="MPI"):
        chutney.nn.parallel.DistributedDataParallel(lin)
    with pytest.raises(RuntimeError, match="not been initialized"):
        chutney.distributed.get_rank()


def test_checkpoint_recomputes_under_the_forward_autocast():
    lin = chutney.nn.Linear(4, 4)
    x = chutney.randn(3, 4, requires_grad=True)
    grads = []
    for ck in (True, False):
        with chutney.autocast("cpu", dtype=chutney.bfloat16):
            y = cck.checkpoint(lin, x) if ck else lin(x)
        y.sum().backward()  # outside the region
        grads.append((lin.weight.grad.numpy().copy(), x.grad.numpy().copy()))
        lin.zero_grad()
        x.grad = None
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)
