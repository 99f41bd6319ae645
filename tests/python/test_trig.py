"""tan, the inverse trigonometric and the hyperbolic functions, atan2 (the
library's compositions, src/ops/trig.c) against PyTorch's: values (special
ones too) and gradients, functions, methods and the arc- aliases."""

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

DOMAINS = {"tan": (-1.4, 1.4), "asin": (-0.99, 0.99), "acos": (-0.99, 0.99), "atan": (-30, 30),
           "sinh": (-5, 5), "cosh": (-5, 5), "asinh": (-1e3, 1e3), "acosh": (1.0001, 1e3),
           "atanh": (-0.99, 0.99)}


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_unary_like_torch(name):
    lo, hi = DOMAINS[name]
    rng = np.random.default_rng(len(name))
    xv = np.concatenate([rng.uniform(lo, hi, 200), np.linspace(lo, hi, 57)])
    for dt, tol in ((np.float32, 2e-6), (np.float64, 2e-6)):
        x = xv.astype(dt)
        cx = chutney.tensor(x, requires_grad=True)
        tx = torch.tensor(x, requires_grad=True)
        cy, ty = getattr(chutney, name)(cx), getattr(torch, name)(tx)
        scale = np.maximum(np.abs(ty.detach().numpy()), 1)
        assert np.all(np.abs(cy.detach().numpy() - ty.detach().numpy()) <= tol * scale), name
        cy.sum().backward()
        ty.sum().backward()
        gscale = np.maximum(np.abs(tx.grad.numpy()), 1)
        assert np.all(np.abs(cx.grad.numpy() - tx.grad.numpy()) <= 20 * tol * gscale), name
        np.testing.assert_array_equal(getattr(cx.detach(), name)().numpy(), cy.detach().numpy())


def test_special_values_and_aliases():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0], np.float32)
    for name in DOMAINS:
        got = getattr(chutney, name)(chutney.tensor(x)).numpy()
        want = getattr(torch, name)(torch.tensor(x)).numpy()
        if name == "tan":
            got, want = got[[0, 1, 4, 5, 6]], want[[0, 1, 4, 5, 6]]  # tan(inf): NaN both, sin/cos
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=name)
    for alias, name in (("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan"),
                        ("arcsinh", "asinh"), ("arccosh", "acosh"), ("arctanh", "atanh")):
        t = chutney.tensor([0.5, 1.5])
        np.testing.assert_array_equal(getattr(chutney, alias)(t).numpy(),
                                      getattr(t, name)().numpy())


def test_atan2_like_torch():
    ys = np.array([1, -1, 0, 0, 2, -2, 0, 3, -0.5, np.inf, 1], np.float32)
    xs = np.array([-1, -1, 0, 1, 0, 0, -2, 4, 0.25, 1, np.inf], np.float32)
    np.testing.assert_allclose(chutney.atan2(chutney.tensor(ys), chutney.tensor(xs)).numpy(),
                               torch.atan2(torch.tensor(ys), torch.tensor(xs)).numpy(),
                               rtol=1e-6, atol=1e-7)
    rng = np.random.default_rng(3)
    y = rng.standard_normal((4, 5)).astype(np.float32)
    x = rng.standard_normal((5,)).astype(np.float32)
    res = []
    for lib in (chutney, torch):
        a, b = lib.tensor(y, requires_grad=True), lib.tensor(x, requires_grad=True)
        r = a.atan2(b) if lib is chutney else torch.atan2(a, b)
        (r * r).sum().backward()
        res.append((r.detach().numpy(), a.grad.numpy(), b.grad.numpy()))
    for p, q in zip(*res):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)
    assert chutney.arctan2(chutney.tensor([1.0]), chutney.tensor([1.0])).item() == \
        pytest.approx(np.pi / 4)
    assert chutney.atan2(chutney.tensor([1]), chutney.tensor([0])).dtype == chutney.float32


def test_hyperbolic_tails_and_atan2_on_the_axes():
    x = np.array([1e-8, 1e-6, -1e-7, 0.5, 30.0, 89.0, -89.0], np.float32)
    res = []
    for lib in (chutney, torch):
        t = lib.tensor(x, requires_grad=True)
        s, c = t.sinh(), t.cosh()
        (s + c).sum().backward()
        a = lib.tensor([1.0, -2.0, 0.0, 3.0], requires_grad=True)
        b = lib.tensor([0.0, 0.0, 2.0, -1.0], requires_grad=True)
        lib.atan2(a, b).sum().backward()
        res.append([s.detach().numpy(), c.detach().numpy(), t.grad.numpy(), a.grad.numpy(),
                    b.grad.numpy()])
    for p, q in zip(*res):
        np.testing.assert_allclose(p, q, rtol=2e-6, atol=1e-12)
