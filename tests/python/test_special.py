"""chutney.special against torch.special (values over the tails, and
gradients)."""

import pytest

import chutney
import chutney.special as cs

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

X = np.array([-30, -9, -4, -2, -0.5, 0, 1e-8, 0.3, 1, 2.5, 3, 4, 6, 9, 26], np.float64)
CASES = {"expit": X, "erfc": X, "erfcx": X[X > -9], "ndtr": X, "log_ndtr": X, "i0": X[abs(X) < 30],
         "i0e": X, "entr": np.array([-1, 0, 1e-9, 0.5, 1, 7.0]), "erfinv": np.array(
             [-0.99, -0.3, 0, 0.5, 0.9999, 1, -1]), "ndtri": np.array([1e-6, 0.001, 0.3, 0.5, 0.9]),
         "gammaln": np.array([0.1, 0.5, 1, 2.5, 10, 100]), "digamma": np.array([0.1, 0.5, 2.5, 10]),
         "logit": np.array([0.01, 0.3, 0.5, 0.99]), "sinc": X, "exp2": X[abs(X) < 20],
         "expm1": X[abs(X) < 20], "log1p": X[X > -1]}
TOL = {"i0": 1e-7, "i0e": 1e-7}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_like_torch(name):
    x = CASES[name]
    got = getattr(cs, name)(chutney.tensor(x)).numpy()
    want = getattr(torch.special, name)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=TOL.get(name, 1e-11), atol=1e-15)


@pytest.mark.parametrize("name", ["expit", "erfc", "ndtr", "log_ndtr", "i0", "i0e", "entr",
                                  "ndtri", "xlog1py"])
def test_gradients_like_torch(name):
    rng = np.random.default_rng(1)
    x = rng.uniform(0.05, 0.95, 20) if name == "ndtri" else rng.uniform(-3, 3, 20)
    if name == "entr":
        x = np.abs(x) + 0.1
    grads = []
    for lib, mod in ((chutney, cs), (torch, torch.special)):
        t = lib.tensor(x, requires_grad=True)
        y = mod.xlog1py(t, t.abs()) if name == "xlog1py" else getattr(mod, name)(t)
        y.sum().backward()
        grads.append(t.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=TOL.get(name, 1e-6) * 10, atol=1e-12)


def test_xlogy_xlog1py_and_round():
    x = chutney.tensor([0.0, 0.0, 2.0, 1.0])
    y = chutney.tensor([0.0, float("nan"), 3.0, -0.5])
    np.testing.assert_array_equal(cs.xlog1py(x, y).numpy(),
                                  torch.special.xlog1py(torch.tensor(x.numpy()),
                                                        torch.tensor(y.numpy())).numpy())
    assert cs.round(chutney.tensor([1.2345]), decimals=2).tolist() == pytest.approx([1.23])
    with pytest.raises(NotImplementedError):
        cs.gammainc(chutney.ones(1), chutney.ones(1))


def test_tails_and_their_gradients():
    x = np.array([-40.0, -30.0, -21.0, -19.0, -10.0, -1.0, 0.0, 2.0, 10.0])
    res = []
    for lib, mod in ((chutney, cs), (torch, torch.special)):
        t = lib.tensor(x, requires_grad=True)
        y = mod.log_ndtr(t)
        y.sum().backward()
        u = lib.tensor([27.0, 30.0], dtype=lib.float64, requires_grad=True)
        mod.erfcx(u).sum().backward()
        p = mod.ndtri(lib.tensor([1e-10, 1e-7], dtype=lib.float32))
        res.append([y.detach().numpy(), t.grad.numpy(), u.grad.numpy(), p.numpy()])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_xlog1py_gradient_at_zero_input():
    x = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5, -2.0])
    y = np.array([2.0, -0.5, 0.0, -1.0, -2.0, -np.inf, np.nan, 3.0, -0.25])
    res = []
    for lib, mod in ((chutney, cs), (torch, torch.special)):
        t = lib.tensor(x, requires_grad=True)
        out = mod.xlog1py(t, lib.tensor(y))
        out.backward(lib.tensor(np.linspace(0.5, 2.0, x.size)))
        res.append((out.detach().numpy(), t.grad.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12)
    # a Python number for other
    np.testing.assert_allclose(cs.xlog1py(chutney.tensor([0.0, 2.0]), 1.0).numpy(),
                               torch.special.xlog1py(torch.tensor([0.0, 2.0]), 1.0).numpy())


def test_entr_nan_and_gradient_at_zero():
    x = np.array([np.nan, 0.0, -0.0, -1.0, 0.5, 2.0, 1e-9])
    res = []
    for lib, mod in ((chutney, cs), (torch, torch.special)):
        t = lib.tensor(x, requires_grad=True)
        out = mod.entr(t)
        out.sum().backward()
        res.append((out.detach().numpy(), t.grad.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12)
    assert np.isnan(cs.entr(chutney.tensor([np.nan])).numpy()).all()
