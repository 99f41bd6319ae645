"""Autograd: backward, accumulation, no_grad, autograd.grad with
create_graph, forward-mode jvp, the refusals."""

import math
import threading

import pytest

import chutney
from conftest import close


def test_backward_accumulates():
    x = chutney.tensor([1.0, -2.0, 3.0])
    w = chutney.ones(3, requires_grad=True)
    assert w.is_leaf and w.requires_grad and w.grad is None
    loss = ((w * x) ** 2).sum()
    assert not loss.is_leaf and loss.requires_grad and loss.grad_fn is not None
    loss.backward()
    assert w.grad.tolist() == [2.0, 8.0, 18.0]
    ((w * x) ** 2).sum().backward()
    assert w.grad.tolist() == [4.0, 16.0, 36.0]
    w.grad = None
    assert w.grad is None
    (w * 3).sum().backward()
    assert w.grad.tolist() == [3.0, 3.0, 3.0]
    w.grad = chutney.zeros(3)
    assert w.grad.tolist() == [0.0, 0.0, 0.0]


def test_backward_with_a_seed_and_retain_graph():
    w = chutney.tensor([1.0, 2.0], requires_grad=True)
    y = w * w
    with pytest.raises(Exception):
        y.backward()  # more than one element needs a seed
    y.backward(chutney.tensor([1.0, 10.0]), retain_graph=True)
    assert w.grad.tolist() == [2.0, 40.0]
    y.backward(chutney.ones(2))
    assert w.grad.tolist() == [4.0, 44.0]
    with pytest.raises(RuntimeError):
        y.backward(chutney.ones(2))  # the record was freed
    with pytest.raises(RuntimeError):
        chutney.ones(2).sum().backward()


def test_no_grad_and_detach():
    w = chutney.ones(2, requires_grad=True)
    with chutney.no_grad():
        assert not chutney.is_grad_enabled()
        y = w * 2
        with chutney.enable_grad():
            z = w * 2
    assert chutney.is_grad_enabled()
    assert not y.requires_grad and z.requires_grad

    @chutney.no_grad()
    def f(t):
        return t * 3

    assert not f(w).requires_grad
    with chutney.set_grad_enabled(False):
        assert not (w * 2).requires_grad
    assert chutney.is_grad_enabled()
    d = w.detach()
    assert d.is_leaf and not d.requires_grad and d.shares_storage(w)
    assert not w.data.requires_grad
    with chutney.inference_mode():
        assert not (w + 1).requires_grad


def test_grad_mode_is_per_thread():
    seen = []
    with chutney.no_grad():
        t = threading.Thread(target=lambda: seen.append(chutney.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]


def test_requires_grad_rules():
    with pytest.raises(TypeError):
        chutney.ones(2, dtype=chutney.int64, requires_grad=True)
    y = chutney.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError):
        y.requires_grad = False
    x = chutney.ones(2)
    assert x.requires_grad_() is x and x.requires_grad
    x.requires_grad_(False)
    assert not x.requires_grad


def test_inplace_on_leaves_refused_while_recording():
    """A leaf that requires grad cannot change in place while recording (as
    PyTorch); other tensors can (tests/python/test_inplace_autograd.py)."""
    w = chutney.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w += 1
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w.mul_(2)
    y = w * 2
    y.mul_(2)
    x = chutney.ones(2)
    x += w
    assert x.requires_grad and not x.is_leaf
    (x + y).sum().backward()
    assert w.grad.tolist() == [5, 5]
    with chutney.no_grad():
        w -= 0.5
    assert w.tolist() == [0.5, 0.5]


def test_changed_input_is_detected_at_backward():
    x = chutney.ones(2)
    w = chutney.ones(2, requires_grad=True)
    y = (w * x).sum()
    x += 1
    with pytest.raises(RuntimeError):
        y.backward()


def test_autograd_grad_and_higher_order():
    x = chutney.tensor(0.5, dtype=chutney.float64, requires_grad=True)
    y = x.tanh()
    (g,) = chutney.autograd.grad(y, x, create_graph=True)
    assert close(g.item(), 1 - math.tanh(0.5) ** 2, rtol=1e-12)
    (h,) = chutney.autograd.grad(g, x)
    t = math.tanh(0.5)
    assert close(h.item(), -2 * t * (1 - t * t), rtol=1e-12)
    assert x.grad is None  # grad() does not accumulate


def test_autograd_grad_several_and_unused():
    a = chutney.tensor([1.0, 2.0], requires_grad=True)
    b = chutney.tensor([3.0, 4.0], requires_grad=True)
    c = chutney.tensor([5.0], requires_grad=True)
    y = (a * b).sum()
    ga, gb = chutney.autograd.grad([y], [a, b], retain_graph=True)
    assert ga.tolist() == [3.0, 4.0] and gb.tolist() == [1.0, 2.0]
    ga, gc = chutney.autograd.grad(y, [a, c], allow_unused=True, retain_graph=True)
    assert gc is None
    with pytest.raises(Exception):
        chutney.autograd.grad(y, [c])
    v = a * b
    (g,) = chutney.autograd.grad(v, a, grad_outputs=chutney.tensor([1.0, -1.0]))
    assert g.tolist() == [3.0, -4.0]


def test_autograd_backward_function():
    w = chutney.ones(2, requires_grad=True)
    chutney.autograd.backward([(w * 2).sum(), (w * 3).sum()])
    assert w.grad.tolist() == [5.0, 5.0]


def test_hessian_vector_product():
    w = chutney.tensor([0.3, -0.2], dtype=chutney.float64, requires_grad=True)
    f = (w ** 3).sum()
    (g,) = chutney.autograd.grad(f, w, create_graph=True)
    v = chutney.tensor([1.0, 2.0], dtype=chutney.float64)
    (hv,) = chutney.autograd.grad((g * v).sum(), w)
    assert close(hv.tolist(), [6 * 0.3 * 1.0, 6 * -0.2 * 2.0], rtol=1e-12)


def test_jvp_forward_mode():
    x = chutney.tensor([0.1, 0.2, 0.3], dtype=chutney.float64)
    v = chutney.tensor([1.0, 0.0, 2.0], dtype=chutney.float64)
    out, jv = chutney.autograd.functional.jvp(lambda t: (t.sin() * t).sum(), x, v)
    xs = [0.1, 0.2, 0.3]
    assert close(out.item(), sum(math.sin(a) * a for a in xs), rtol=1e-12)
    d = [math.cos(a) * a + math.sin(a) for a in xs]
    assert close(jv.item(), d[0] * 1 + d[2] * 2, rtol=1e-12)
    outs, jvs = chutney.autograd.functional.jvp(lambda a, b: (a * b, a + b), (x, x), (v, v))
    assert close(jvs[0].tolist(), [2 * a * b for a, b in zip(xs, v.tolist())], rtol=1e-12)


def test_vjp():
    x = chutney.tensor([1.0, 2.0])
    out, g = chutney.autograd.functional.vjp(lambda t: t * t, x, chutney.tensor([1.0, 1.0]))
    assert out.tolist() == [1.0, 4.0] and g.tolist() == [2.0, 4.0]


def test_gradients_through_many_ops():
    x = chutney.randn(4, 5, dtype=chutney.float64, requires_grad=True)
    y = (x.softmax(1) * x.exp()).sum(dim=0).reshape(5, 1).expand(5, 3).mean()
    y.backward()
    assert x.grad.shape == (4, 5)
    eps = 1e-6
    with chutney.no_grad():
        base = x.detach().clone()
        num = []
        for i in range(4):
            for j in range(5):
                p = base.clone()
                p[i, j] += eps
                m = base.clone()
                m[i, j] -= eps

                def f(t):
                    return (t.softmax(1) * t.exp()).sum(dim=0).mean().item()

                num.append((f(p) - f(m)) / (2 * eps))
    assert close(x.grad.reshape(-1).tolist(), num, rtol=1e-6, atol=1e-8)


def test_clip_grad():
    w = chutney.ones(4, requires_grad=True)
    (w * chutney.tensor([3.0, 4.0, 0.0, 0.0])).sum().backward()
    norm = chutney.nn.utils.clip_grad_norm_([w], 1.0)
    assert close(norm.item(), 5.0)
    assert close(w.grad.tolist(), [0.6, 0.8, 0.0, 0.0], rtol=1e-5)
    chutney.nn.utils.clip_grad_value_([w], 0.7)
    assert close(w.grad.tolist(), [0.6, 0.7, 0.0, 0.0], rtol=1e-5)
