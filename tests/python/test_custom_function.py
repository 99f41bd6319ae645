"""chutney.autograd.Function: custom ops with Python forward and backward
(custom ops of the C library underneath): values, gradients against
finite differences, second order, None and bad gradients, errors raised in
backward, lifetime of ctx, and tracing by chutney.compile."""

import gc
import weakref

import numpy as np
import pytest

import chutney


class Swish(chutney.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta, alpha=1.0):
        ctx.save_for_backward(x, beta)
        ctx.alpha = alpha
        return alpha * x * chutney.sigmoid(beta * x)

    @staticmethod
    def backward(ctx, grad):
        x, beta = ctx.saved_tensors
        s = chutney.sigmoid(beta * x)
        ds = s * (1 - s)
        gx = grad * ctx.alpha * (s + beta * x * ds)
        gb = (grad * ctx.alpha * x * x * ds).sum()
        return gx, gb, None


def swish_np(x, b, alpha=1.0):
    return alpha * x / (1 + np.exp(-b * x))


def test_forward_and_backward_match_finite_differences():
    xv = np.random.default_rng(0).standard_normal((3, 4))
    x = chutney.tensor(xv, dtype=chutney.float64, requires_grad=True)
    beta = chutney.tensor(0.7, dtype=chutney.float64, requires_grad=True)
    y = Swish.apply(x, beta, 1.5)
    assert y.requires_grad and y.grad_fn is not None
    np.testing.assert_allclose(y.detach().numpy(), swish_np(xv, 0.7, 1.5), rtol=1e-12)
    w = np.random.default_rng(1).standard_normal((3, 4))
    (y * chutney.tensor(w, dtype=chutney.float64)).sum().backward()
    eps = 1e-6
    num_x = np.zeros_like(xv)
    for i in np.ndindex(xv.shape):
        d = np.zeros_like(xv)
        d[i] = eps
        num_x[i] = ((swish_np(xv + d, 0.7, 1.5) - swish_np(xv - d, 0.7, 1.5)) * w).sum() / (2 * eps)
    num_b = ((swish_np(xv, 0.7 + eps, 1.5) - swish_np(xv, 0.7 - eps, 1.5)) * w).sum() / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), num_x, rtol=1e-6, atol=1e-8)
    assert abs(beta.grad.item() - num_b) < 1e-6


def test_second_order_through_backward():
    x = chutney.tensor([0.3, -1.2, 2.0], dtype=chutney.float64, requires_grad=True)
    beta = chutney.tensor(0.9, dtype=chutney.float64)
    (g,) = chutney.autograd.grad(Swish.apply(x, beta).sum(), [x], create_graph=True)
    (h,) = chutney.autograd.grad(g.sum(), [x])
    xv, b, eps = x.detach().numpy(), 0.9, 1e-5

    def d1(v):
        s = 1 / (1 + np.exp(-b * v))
        return s + b * v * s * (1 - s)

    np.testing.assert_allclose(h.numpy(), (d1(xv + eps) - d1(xv - eps)) / (2 * eps), rtol=1e-6)


def test_no_gradient_wanted_returns_forward_result():
    calls = []

    class Twice(chutney.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            calls.append(1)
            return grad * 2

    y = Twice.apply(chutney.tensor([1.0, 2.0]))
    assert y.tolist() == [2.0, 4.0] and y.grad_fn is None
    x = chutney.tensor([1.0, 2.0], requires_grad=True)
    with chutney.no_grad():
        assert Twice.apply(x).grad_fn is None
    Twice.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0] and calls == [1]


def test_none_gradient_is_zeros_and_bad_gradients_raise():
    class Bad(chutney.autograd.Function):
        mode = "none"

        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, grad):
            if Bad.mode == "none":
                return grad, None
            if Bad.mode == "count":
                return (grad,)
            if Bad.mode == "type":
                return grad, 3
            if Bad.mode == "shape":
                return grad, chutney.ones(5)
            raise ValueError("boom")

    x = chutney.tensor([1.0, 2.0], requires_grad=True)
    y = chutney.tensor([3.0, 4.0], requires_grad=True)
    Bad.apply(x, y).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0] and y.grad.tolist() == [0.0, 0.0]
    for mode, text in [("count", "returned 1 gradients, forward takes 2"),
                       ("type", "is int, not a Tensor or None"),
                       ("shape", "gradient for input 1 has shape"),
                       ("raise", "backward raised ValueError: boom")]:
        Bad.mode = mode
        with pytest.raises(Exception, match=text):
            Bad.apply(x, y).sum().backward()
    assert chutney._C._scope_depth() == 0


def test_forward_must_return_a_tensor():
    class Pair(chutney.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x, x

    with pytest.raises(TypeError, match="custom functions return one Tensor"):
        Pair.apply(chutney.ones(2, requires_grad=True))


def test_ctx_lives_as_long_as_the_record():
    refs = []

    class Keep(chutney.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            refs.append(weakref.ref(ctx))
            return x * 3

        @staticmethod
        def backward(ctx, grad):
            return grad * 3

    x = chutney.ones(2, requires_grad=True)
    loss = Keep.apply(x).sum()  # the op's output itself is dropped here
    gc.collect()
    assert refs[0]() is not None
    loss.backward()
    assert x.grad.tolist() == [3.0, 3.0]
    del loss
    gc.collect()
    assert refs[0]() is None


def test_compiled_training_step_matches_eager():
    betas = [chutney.tensor(0.5, requires_grad=True) for _ in range(2)]
    opts = [chutney.optim.SGD([b], lr=0.5) for b in betas]

    def step(k, x, t):
        opts[k].zero_grad()
        loss = ((Swish.apply(x, betas[k]) - t) ** 2).mean()
        loss.backward()
        opts[k].step()
        return loss

    cstep = chutney.compile(lambda x, t: step(0, x, t))
    rng = np.random.default_rng(3)
    for i in range(3):
        xv = rng.standard_normal(8).astype(np.float32)
        x, t = chutney.tensor(xv), chutney.tensor(swish_np(xv, 1.5).astype(np.float32))
        closs = cstep(x, t)
        eloss = step(1, x, t)
        assert abs(closs.item() - eloss.item()) <= 1e-6, i
        assert abs(betas[0].item() - betas[1].item()) <= 1e-6, i
    assert betas[0].item() > 0.5  # it learns
    assert "py.Swish" in cstep.programs()[0].dump()
