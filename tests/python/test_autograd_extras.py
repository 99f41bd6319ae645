"""autograd.gradcheck / gradgradcheck (passing on correct gradients, failing
on a wrong custom Function), Variable, the anomaly-mode switches, and the
nn.init additions (eye_, dirac_, sparse_, the deprecated aliases) against
their definitions."""

import warnings

import pytest

import chutney
from chutney.autograd import GradcheckError, Variable, gradcheck, gradgradcheck

np = pytest.importorskip("numpy")


def d(*shape):
    return chutney.randn(*shape, dtype=chutney.float64, requires_grad=True)


class Square(chutney.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * g * x


class WrongSquare(Square):
    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x  # the factor 2 missing


def test_gradcheck_passes():
    a, b = d(3, 4), d(4, 2)
    assert gradcheck(lambda x, w: (x @ w).tanh(), (a, b))
    assert gradcheck(lambda x: (x.sigmoid(), x.sum() * 3), a)  # several outputs
    assert gradcheck(Square.apply, (d(5),), eps=1e-6, atol=1e-5, rtol=1e-3)
    # an input without requires_grad and a non-tensor argument
    assert gradcheck(lambda x, c, k: (x * c) ** k, (a, chutney.randn(3, 4).double(), 3))
    assert gradgradcheck(lambda x, w: (x @ w).tanh(), (a, b))
    assert gradgradcheck(Square.apply, (d(4),))


def test_gradcheck_fails_on_wrong_backward():
    x = d(5)
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradcheck(WrongSquare.apply, (x,))
    assert isinstance(GradcheckError("x"), RuntimeError)
    assert gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False
    # The wrong backward is a differentiable function of its own: only
    # first derivatives see it. A backward that hides x from autograd gives
    # wrong second derivatives.
    assert gradgradcheck(WrongSquare.apply, (x,))

    class Opaque(Square):
        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * g * x.detach()

    assert gradcheck(Opaque.apply, (x,))
    assert gradgradcheck(Opaque.apply, (x,), raise_exception=False) is False


def test_gradcheck_tolerances_and_refusals():
    with pytest.raises(ValueError, match="requires_grad=True"):
        gradcheck(lambda x: x * 2, (chutney.randn(3).double(),))
    with pytest.warns(UserWarning, match="double precision"):
        gradcheck(lambda x: x * 2, (chutney.randn(3, requires_grad=True),), eps=1e-2,
                  atol=1e-2)
    x = d(4)
    # A gradient off by 1e-4 passes atol=1e-3, fails the defaults.

    class Off(Square):
        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * g * x + 1e-4

    assert not gradcheck(Off.apply, (x,), raise_exception=False, rtol=0)
    assert gradcheck(Off.apply, (x,), atol=1e-3)


def test_variable():
    t = chutney.randn(3, requires_grad=True)
    v = Variable(t * 2, requires_grad=True)
    assert isinstance(v, chutney.Tensor) and v.is_leaf and v.requires_grad
    v2 = Variable(t)
    assert v2.is_leaf and not v2.requires_grad
    assert isinstance(t, Variable) and not isinstance(3, Variable)
    (v * v).sum().backward()
    assert np.allclose(v.grad.numpy(), 2 * v.detach().numpy())


def test_anomaly_flags():
    from chutney import autograd
    assert not autograd.is_anomaly_enabled()
    with pytest.warns(UserWarning, match="Anomaly Detection"):
        with autograd.detect_anomaly():
            assert autograd.is_anomaly_enabled()
    assert not autograd.is_anomaly_enabled()
    with autograd.set_detect_anomaly(True):
        assert autograd.is_anomaly_enabled()
        with autograd.set_detect_anomaly(False):
            assert not autograd.is_anomaly_enabled()
        assert autograd.is_anomaly_enabled()
    assert not autograd.is_anomaly_enabled()
    autograd.set_detect_anomaly(True)
    assert autograd.is_anomaly_enabled()
    autograd.set_detect_anomaly(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")

        @autograd.detect_anomaly()
        def f():
            return autograd.is_anomaly_enabled()
        assert f()
    assert not autograd.is_anomaly_enabled()


# ---- nn.init ----

def test_eye_and_dirac():
    init = chutney.nn.init
    w = init.eye_(chutney.empty(3, 5))
    assert np.array_equal(w.numpy(), np.eye(3, 5))
    with pytest.raises(ValueError):
        init.eye_(chutney.empty(2, 2, 2))
    # dirac: the convolution passes the input through (per group)
    x = chutney.randn(2, 4, 6, 6)
    w = init.dirac_(chutney.empty(4, 4, 3, 3))
    y = chutney.nn.functional.conv2d(x, w, None, 1, 1)
    assert np.allclose(y.numpy(), x.numpy())
    w = init.dirac_(chutney.empty(6, 2, 3), groups=3)
    x = chutney.randn(1, 6, 5)
    y = chutney.nn.functional.conv1d(x, w, None, 1, 1, 1, 3)
    assert np.allclose(y.numpy(), x.numpy())
    w = init.dirac_(chutney.empty(2, 3, 1, 3, 3)).numpy()
    assert w.sum() == 2 and w[1, 1, 0, 1, 1] == 1
    with pytest.raises(ValueError):
        init.dirac_(chutney.empty(5, 2, 3), groups=2)


def test_sparse():
    chutney.manual_seed(1)
    w = chutney.nn.init.sparse_(chutney.empty(40, 30), sparsity=0.25, std=0.5).numpy()
    assert ((w == 0).sum(0) == 10).all()  # ceil(0.25 * 40) zeros per column
    nz = w[w != 0]
    assert abs(nz.std() - 0.5) < 0.05 and abs(nz.mean()) < 0.05


@pytest.mark.parametrize("name", ["uniform", "normal", "constant", "xavier_uniform",
                                  "xavier_normal", "kaiming_uniform", "kaiming_normal"])
def test_deprecated_inits(name):
    init = chutney.nn.init
    args = (0.5,) if name == "constant" else ()
    chutney.manual_seed(3)
    with pytest.warns(UserWarning, match=f"nn.init.{name} is now deprecated in favor of "
                                         f"nn.init.{name}_"):
        a = getattr(init, name)(chutney.empty(4, 5), *args)
    chutney.manual_seed(3)
    b = getattr(init, name + "_")(chutney.empty(4, 5), *args)
    assert np.array_equal(a.numpy(), b.numpy())
