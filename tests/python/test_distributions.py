"""chutney.distributions against PyTorch 1.13's torch.distributions: values
and parameter gradients of log_prob / entropy / mean / variance / cdf / icdf /
KL, shapes, argument validation, and sampling checked by moments."""

import math

import numpy as np
import pytest

import chutney
from chutney import distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions

# name -> (parameters, values to evaluate log_prob/cdf at, methods to compare)
CASES = {
    "Normal": (dict(loc=[0.5, -1.0, 2.0], scale=[1.0, 0.3, 2.5]), [0.1, -0.7, 4.0],
               "mean mode variance stddev entropy cdf icdf"),
    "Exponential": (dict(rate=[0.5, 1.0, 3.0]), [0.2, 1.5, 0.01],
                    "mean mode variance entropy cdf icdf"),
    "Laplace": (dict(loc=[0.0, 1.0, -2.0], scale=[1.0, 0.5, 2.0]), [0.3, 0.2, -5.0],
                "mean mode variance stddev entropy cdf icdf"),
    "Cauchy": (dict(loc=[0.0, 1.0], scale=[1.0, 0.5]), [0.3, -2.0], "mode entropy cdf icdf"),
    "Gumbel": (dict(loc=[0.0, 1.0], scale=[1.0, 0.5]), [0.3, -0.5],
               "mean mode variance stddev entropy cdf icdf"),
    "HalfNormal": (dict(scale=[1.0, 0.5, 2.0]), [0.3, 1.2, 0.01],
                   "mean mode variance entropy cdf icdf"),
    "LogNormal": (dict(loc=[0.0, 1.0], scale=[1.0, 0.5]), [0.3, 2.5],
                  "mean mode variance entropy cdf icdf"),
    "StudentT": (dict(df=[0.8, 1.5, 4.0, 30.0], loc=[0.0, 1.0, -1.0, 2.0],
                      scale=[1.0, 0.5, 2.0, 1.0]), [0.3, -2.0, 1.0, 2.5],
                 "mean mode variance entropy"),
    "Gamma": (dict(concentration=[0.5, 1.0, 3.0, 20.0], rate=[1.0, 2.0, 0.5, 4.0]),
              [0.2, 1.0, 6.0, 5.5], "mean mode variance entropy"),
    "Chi2": (dict(df=[1.0, 3.0, 10.0]), [0.5, 2.0, 9.0], "mean mode variance entropy"),
    "Beta": (dict(concentration1=[0.5, 2.0, 5.0], concentration0=[0.7, 3.0, 1.5]),
             [0.2, 0.5, 0.9], "mean mode variance entropy"),
    "Uniform": (dict(low=[0.0, -1.0], high=[2.0, 3.0]), [1.0, 0.5],
                "mean variance entropy cdf icdf"),
    "Poisson": (dict(rate=[0.5, 3.0, 20.0]), [0.0, 2.0, 25.0], "mean mode variance"),
    "Geometric": (dict(probs=[0.2, 0.5, 0.9]), [0.0, 3.0, 1.0], "mean mode variance entropy"),
    "Bernoulli": (dict(probs=[0.2, 0.5, 0.9]), [0.0, 1.0, 1.0], "mean variance entropy"),
    "Binomial": (dict(total_count=[10.0, 10.0], probs=[0.3, 0.8]), [3.0, 10.0],
                 "mean mode variance entropy"),
}
NONDIFF = {"total_count"}


def _make(name, params, grad=True):
    cp = {k: chutney.tensor(np.array(v, dtype=np.float64), requires_grad=grad and k not in NONDIFF)
          for k, v in params.items()}
    tp = {k: torch.tensor(np.array(v, dtype=np.float64), requires_grad=grad and k not in NONDIFF)
          for k, v in params.items()}
    return getattr(D, name)(**cp), getattr(TD, name)(**tp), cp, tp


def _close(c, t, rtol=1e-9, atol=1e-12):
    np.testing.assert_allclose(np.asarray(c.detach().numpy(), dtype=np.float64),
                               t.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_torch(name):
    params, values, methods = CASES[name]
    cd, tdist, cp, tp = _make(name, params)
    assert tuple(cd.batch_shape) == tuple(tdist.batch_shape)
    assert tuple(cd.event_shape) == tuple(tdist.event_shape)
    cv, tv = chutney.tensor(np.array(values)), torch.tensor(np.array(values))
    outs_c, outs_t = [cd.log_prob(cv)], [tdist.log_prob(tv)]
    for m in methods.split():
        if m in ("cdf",):
            outs_c.append(cd.cdf(cv)), outs_t.append(tdist.cdf(tv))
        elif m == "icdf":
            q = np.linspace(0.1, 0.8, len(values))
            outs_c.append(cd.icdf(chutney.tensor(q))), outs_t.append(tdist.icdf(torch.tensor(q)))
        elif m == "entropy":
            outs_c.append(cd.entropy()), outs_t.append(tdist.entropy())
        else:
            outs_c.append(getattr(cd, m)), outs_t.append(getattr(tdist, m))
    for c, t in zip(outs_c, outs_t):
        _close(c, t, rtol=1e-7, atol=1e-10)
    # gradient of a weighted sum of every finite output, against torch's
    w = [1.0 + 0.37 * i for i in range(len(outs_c))]
    sc = sum(wi * chutney.where(o.isfinite(), o, chutney.zeros_like(o)).sum()
             for wi, o in zip(w, outs_c) if o.requires_grad)
    st = sum(wi * torch.where(o.isfinite(), o, torch.zeros_like(o)).sum()
             for wi, o in zip(w, outs_t) if o.requires_grad)
    sc.backward()
    st.backward()
    for k in cp:
        if k not in NONDIFF:
            _close(cp[k].grad, tp[k].grad, rtol=1e-6, atol=1e-9)


def _kl_pair(name, p, q):
    a = _make(name, p)
    b = _make(name, q)
    return a, b


KL_CASES = {
    "Normal": (dict(loc=[0.0, 1.0], scale=[1.0, 2.0]), dict(loc=[0.5, -1.0], scale=[0.5, 3.0])),
    "Beta": (dict(concentration1=[0.5, 2.0], concentration0=[1.5, 3.0]),
             dict(concentration1=[2.0, 1.0], concentration0=[0.7, 4.0])),
    "Gamma": (dict(concentration=[0.5, 2.0], rate=[1.5, 3.0]),
              dict(concentration=[2.0, 1.0], rate=[0.7, 4.0])),
    "Exponential": (dict(rate=[0.5, 2.0]), dict(rate=[1.5, 0.3])),
    "Laplace": (dict(loc=[0.0, 1.0], scale=[1.0, 2.0]), dict(loc=[0.5, -1.0], scale=[0.5, 3.0])),
    "Gumbel": (dict(loc=[0.0, 1.0], scale=[1.0, 2.0]), dict(loc=[0.5, -1.0], scale=[0.5, 3.0])),
    "Poisson": (dict(rate=[0.5, 2.0]), dict(rate=[1.5, 0.3])),
    "Geometric": (dict(probs=[0.5, 0.2]), dict(probs=[0.3, 0.7])),
    "Bernoulli": (dict(probs=[0.5, 0.2]), dict(probs=[0.3, 0.7])),
    "Binomial": (dict(total_count=[5.0, 5.0], probs=[0.5, 0.2]),
                 dict(total_count=[5.0, 5.0], probs=[0.3, 0.7])),
    "Categorical": (dict(probs=[[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]),
                    dict(probs=[[0.1, 0.1, 0.8], [0.3, 0.3, 0.4]])),
    "OneHotCategorical": (dict(probs=[[0.2, 0.3, 0.5]]), dict(probs=[[0.1, 0.1, 0.8]])),
    "Dirichlet": (dict(concentration=[[0.5, 2.0, 3.0], [1.0, 1.0, 1.0]]),
                  dict(concentration=[[1.5, 0.5, 2.0], [2.0, 3.0, 0.4]])),
    "HalfNormal": (dict(scale=[1.0, 0.4]), dict(scale=[2.0, 0.3])),
    "LogNormal": (dict(loc=[0.0, 1.0], scale=[1.0, 2.0]), dict(loc=[0.5, -1.0], scale=[0.5, 3.0])),
}


@pytest.mark.parametrize("name", sorted(KL_CASES))
def test_kl_matches_torch(name):
    (cp_, tp_, cpp, tpp), (cq, tq, cqp, tqp) = _kl_pair(name, *KL_CASES[name])
    kc, kt = D.kl_divergence(cp_, cq), TD.kl_divergence(tp_, tq)
    _close(kc, kt, rtol=1e-8)
    kc.sum().backward()
    kt.sum().backward()
    for k in cpp:
        if k not in NONDIFF:
            _close(cpp[k].grad, tpp[k].grad, rtol=1e-6, atol=1e-10)
            _close(cqp[k].grad, tqp[k].grad, rtol=1e-6, atol=1e-10)


def _mvn_params():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2, 3, 3))
    cov = a @ a.transpose(0, 2, 1) + 0.5 * np.eye(3)
    loc = rng.normal(size=(2, 3))
    return loc, cov


@pytest.mark.parametrize("param", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal(param):
    loc, cov = _mvn_params()
    mat = {"covariance_matrix": cov, "precision_matrix": np.linalg.inv(cov),
           "scale_tril": np.linalg.cholesky(cov)}[param]
    cl, tl = chutney.tensor(loc, requires_grad=True), torch.tensor(loc, requires_grad=True)
    cm, tm = chutney.tensor(mat, requires_grad=True), torch.tensor(mat, requires_grad=True)
    cd = D.MultivariateNormal(cl, **{param: cm})
    tdist = TD.MultivariateNormal(tl, **{param: tm})
    assert tuple(cd.batch_shape) == (2,) and tuple(cd.event_shape) == (3,)
    x = np.random.default_rng(1).normal(size=(4, 2, 3))
    lc, lt = cd.log_prob(chutney.tensor(x)), tdist.log_prob(torch.tensor(x))
    _close(lc, lt, rtol=1e-9)
    _close(cd.entropy(), tdist.entropy(), rtol=1e-9)
    _close(cd.variance, tdist.variance, rtol=1e-9)
    for attr in ("scale_tril", "covariance_matrix", "precision_matrix"):
        _close(getattr(cd, attr), getattr(tdist, attr), rtol=1e-8, atol=1e-10)
    q = D.MultivariateNormal(chutney.tensor(loc[::-1].copy()),
                             covariance_matrix=chutney.tensor(cov[::-1].copy() + np.eye(3)))
    tq = TD.MultivariateNormal(torch.tensor(loc[::-1].copy()),
                               covariance_matrix=torch.tensor(cov[::-1].copy() + np.eye(3)))
    kc, kt = D.kl_divergence(cd, q), TD.kl_divergence(tdist, tq)
    _close(kc, kt, rtol=1e-8)
    (lc.sum() + cd.entropy().sum() + kc.sum()).backward()
    (lt.sum() + tdist.entropy().sum() + kt.sum()).backward()
    _close(cl.grad, tl.grad, rtol=1e-7, atol=1e-10)
    g_c, g_t = cm.grad.numpy(), tm.grad.numpy()
    if param == "scale_tril":  # only the lower triangle is a parameter
        g_c, g_t = np.tril(g_c), np.tril(g_t)
    else:  # symmetric parametrisations: compare the symmetric part
        g_c, g_t = (g_c + g_c.transpose(0, 2, 1)) / 2, (g_t + g_t.transpose(0, 2, 1)) / 2
    np.testing.assert_allclose(g_c, g_t, rtol=1e-6, atol=1e-9)
    chutney.manual_seed(0)
    s = D.MultivariateNormal(chutney.tensor(loc[0]), covariance_matrix=chutney.tensor(cov[0])) \
        .sample((20000,)).numpy()
    assert s.shape == (20000, 3)
    np.testing.assert_allclose(np.cov(s.T), cov[0], atol=0.1 * np.abs(cov[0]).max())
    np.testing.assert_allclose(s.mean(0), loc[0], atol=4 * np.sqrt(np.diag(cov[0]).max() / 20000))


def test_mvn_rsample_gradient():
    # d E[x] / d loc = I and d E[|x - loc|^2] / d L = 2 L: pathwise through L eps
    L = chutney.tensor([[1.0, 0.0], [0.5, 2.0]], dtype=chutney.float64, requires_grad=True)
    loc = chutney.zeros(2, dtype=chutney.float64, requires_grad=True)
    chutney.manual_seed(1)
    x = D.MultivariateNormal(loc, scale_tril=L).rsample((40000,))
    (x - loc.detach()).square().sum(-1).mean().backward()
    np.testing.assert_allclose(np.tril(L.grad.numpy()), 2 * np.tril(L.detach().numpy()), atol=0.1)


SAMPLERS = {
    # name: (params, exact mean, exact variance)
    "Normal": (dict(loc=1.0, scale=2.0), 1.0, 4.0),
    "Exponential": (dict(rate=2.0), 0.5, 0.25),
    "Laplace": (dict(loc=1.0, scale=0.5), 1.0, 0.5),
    "Gumbel": (dict(loc=1.0, scale=0.5), 1.0 + 0.5 * 0.5772156649, math.pi ** 2 / 24),
    "HalfNormal": (dict(scale=2.0), 2 * math.sqrt(2 / math.pi), 4 * (1 - 2 / math.pi)),
    "LogNormal": (dict(loc=0.0, scale=0.5), math.exp(0.125), math.expm1(0.25) * math.exp(0.25)),
    "Gamma": (dict(concentration=0.4, rate=2.0), 0.2, 0.1),
    "Gamma2": (dict(concentration=5.0, rate=0.5), 10.0, 20.0),
    "Beta": (dict(concentration1=2.0, concentration0=0.5), 0.8, 2 * 0.5 / (2.5 ** 2 * 3.5)),
    "StudentT": (dict(df=5.0, loc=1.0, scale=2.0), 1.0, 4.0 * 5 / 3),
    "Poisson": (dict(rate=3.5), 3.5, 3.5),
    "Geometric": (dict(probs=0.3), 1 / 0.3 - 1, (1 / 0.3 - 1) / 0.3),
    "Binomial": (dict(total_count=12.0, probs=0.3), 3.6, 12 * 0.3 * 0.7),
    "Bernoulli": (dict(probs=0.3), 0.3, 0.21),
    "Uniform": (dict(low=-1.0, high=3.0), 1.0, 16 / 12),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_sample_moments(name):
    params, mean, var = SAMPLERS[name]
    cls = getattr(D, name.rstrip("2"))
    chutney.manual_seed(123)
    n = 40000
    d = cls(**{k: chutney.tensor(v, dtype=chutney.float64) for k, v in params.items()})
    s = d.sample((n, 2)).numpy()
    assert s.shape == (n, 2)
    assert abs(s.mean() - mean) < 5 * math.sqrt(var / (2 * n))
    assert abs(s.var() - var) < 0.05 * var


def test_reparameterised_gradients():
    # d/dparam of E[f(x)] estimated from rsample against the closed form
    chutney.manual_seed(7)
    n = 50000
    rate = chutney.tensor(2.0, dtype=chutney.float64, requires_grad=True)
    D.Exponential(rate).rsample((n,)).mean().backward()
    assert abs(rate.grad.item() + 0.25) < 0.01  # d(1/rate)
    scale = chutney.tensor(0.5, dtype=chutney.float64, requires_grad=True)
    D.Laplace(0.0, scale).rsample((n,)).square().mean().backward()
    assert abs(scale.grad.item() - 4 * 0.5) < 0.1  # d(2 scale^2)
    scale = chutney.tensor(0.5, dtype=chutney.float64, requires_grad=True)
    D.Gumbel(0.0, scale).rsample((n,)).mean().backward()
    assert abs(scale.grad.item() - 0.5772156649) < 0.02
    loc = chutney.tensor(0.2, dtype=chutney.float64, requires_grad=True)
    D.LogNormal(loc, 0.5).rsample((n,)).mean().backward()
    assert abs(loc.grad.item() - math.exp(0.2 + 0.125)) < 0.03


def test_gamma_implicit_gradient_matches_torch():
    from chutney.distributions._gamma import _standard_gamma_dx_da
    a = np.tile([0.05, 0.3, 1.0, 2.5, 10.0, 80.0, 400.0], 20)
    chutney.manual_seed(3)
    x = D.Gamma(chutney.tensor(a), 1.0).sample().numpy()
    mine = _standard_gamma_dx_da(x, a)
    ref = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
    np.testing.assert_allclose(mine, ref, rtol=2e-3)


@pytest.mark.parametrize("case", ["gamma", "beta", "dirichlet", "studentt"])
def test_implicit_reparameterisation_expectations(case):
    chutney.manual_seed(11)
    n = 40000
    if case == "gamma":  # E[x] = a / b, E[x^2] = a (a + 1) / b^2
        a = chutney.tensor([0.5, 3.0], dtype=chutney.float64, requires_grad=True)
        x = D.Gamma(a, 2.0).rsample((n,))
        (x.mean(0) + x.square().mean(0)).sum().backward()
        expect = 0.5 + (2 * a.detach().numpy() + 1) / 4
        np.testing.assert_allclose(a.grad.numpy(), expect, rtol=0.04)
    elif case == "beta":  # d/da of a/(a+b) is b/(a+b)^2
        a = chutney.tensor([0.5, 3.0], dtype=chutney.float64, requires_grad=True)
        b = chutney.tensor([2.0, 1.0], dtype=chutney.float64, requires_grad=True)
        D.Beta(a, b).rsample((n,)).mean(0).sum().backward()
        av, bv = a.detach().numpy(), b.detach().numpy()
        np.testing.assert_allclose(a.grad.numpy(), bv / (av + bv) ** 2, rtol=0.05)
        np.testing.assert_allclose(b.grad.numpy(), -av / (av + bv) ** 2, rtol=0.05)
    elif case == "dirichlet":
        c = chutney.tensor([0.5, 1.0, 2.5], dtype=chutney.float64, requires_grad=True)
        x = D.Dirichlet(c).rsample((n,))
        assert tuple(x.shape) == (n, 3)
        x[:, 0].mean().backward()
        cv = c.detach().numpy()
        expect = -cv[0] / cv.sum() ** 2 * np.ones(3)
        expect[0] += 1 / cv.sum()
        np.testing.assert_allclose(c.grad.numpy(), expect, rtol=0.06, atol=0.004)
    else:  # E[x^2] = df / (df - 2) for unit scale: d/ddf = -2 / (df - 2)^2
        df = chutney.tensor(6.0, dtype=chutney.float64, requires_grad=True)
        D.StudentT(df).rsample((n,)).square().mean().backward()
        assert abs(df.grad.item() + 2 / 16) < 0.03


def test_tanh_squashed_gaussian_policy():
    mu = np.array([[0.3, -1.2], [2.0, 0.1]])
    sd = np.array([[0.5, 1.0], [0.2, 2.0]])
    cm, cs = chutney.tensor(mu, requires_grad=True), chutney.tensor(sd, requires_grad=True)
    tm, ts = torch.tensor(mu, requires_grad=True), torch.tensor(sd, requires_grad=True)
    cd = D.TransformedDistribution(D.Normal(cm, cs), [D.TanhTransform(cache_size=1)])
    tdist = TD.TransformedDistribution(TD.Normal(tm, ts), [TD.TanhTransform(cache_size=1)])
    y = np.array([[0.5, -0.99], [0.9, 0.0]])
    lc, lt = cd.log_prob(chutney.tensor(y)), tdist.log_prob(torch.tensor(y))
    _close(lc, lt, rtol=1e-9)
    lc.sum().backward()
    lt.sum().backward()
    _close(cm.grad, tm.grad, rtol=1e-8)
    _close(cs.grad, ts.grad, rtol=1e-8)
    # the cached pre-image: log_prob of a draw is the base density minus the exact Jacobian
    chutney.manual_seed(0)
    a = cd.rsample()
    assert bool(cd.log_prob(a).isfinite().all())
    ind = D.Independent(cd, 1)
    assert tuple(ind.batch_shape) == (2,) and tuple(ind.event_shape) == (2,)
    assert tuple(ind.log_prob(a).shape) == (2,)
    # affine + sigmoid chain, cdf and icdf through sign
    c2 = D.TransformedDistribution(D.Normal(0.0, 1.0), [D.AffineTransform(1.0, -2.0),
                                                         D.SigmoidTransform()])
    t2 = TD.TransformedDistribution(TD.Normal(0.0, 1.0), [TD.AffineTransform(1.0, -2.0),
                                                           TD.SigmoidTransform()])
    v = [0.2, 0.7]
    _close(c2.log_prob(chutney.tensor(v)), t2.log_prob(torch.tensor(v)), rtol=1e-6)
    _close(c2.cdf(chutney.tensor(v)), t2.cdf(torch.tensor(v)), rtol=1e-6)
    _close(c2.icdf(chutney.tensor(v)), t2.icdf(torch.tensor(v)), rtol=1e-6)


def test_independent_and_kl():
    loc, sc = np.array([[0.0, 1.0], [2.0, -1.0]]), np.array([[1.0, 0.5], [2.0, 1.5]])
    cp = D.Independent(D.Normal(chutney.tensor(loc), chutney.tensor(sc)), 1)
    tp = TD.Independent(TD.Normal(torch.tensor(loc), torch.tensor(sc)), 1)
    cq = D.Independent(D.Normal(chutney.tensor(sc), chutney.tensor(loc ** 2 + 1)), 1)
    tq = TD.Independent(TD.Normal(torch.tensor(sc), torch.tensor(loc ** 2 + 1)), 1)
    _close(D.kl_divergence(cp, cq), TD.kl_divergence(tp, tq))
    _close(cp.entropy(), tp.entropy())
    _close(cp.log_prob(chutney.tensor(sc)), tp.log_prob(torch.tensor(sc)))
    e = cp.expand((3, 2))
    assert tuple(e.batch_shape) == (3, 2) and tuple(e.sample().shape) == (3, 2, 2)


def test_mixture_same_family():
    logits = np.array([[0.2, -0.5, 1.0], [0.0, 0.0, 0.0]])
    loc, sc = np.array([[-1.0, 0.0, 2.0], [1.0, 3.0, 5.0]]), np.array([[0.5, 1.0, 0.3], [1, 2, 3.0]])
    cmix = D.MixtureSameFamily(D.Categorical(logits=chutney.tensor(logits, requires_grad=True)),
                               D.Normal(chutney.tensor(loc), chutney.tensor(sc)))
    tmix = TD.MixtureSameFamily(TD.Categorical(logits=torch.tensor(logits)),
                                TD.Normal(torch.tensor(loc), torch.tensor(sc)))
    x = np.array([[0.1, 2.5], [-1.0, 4.0], [3.0, 0.0]])
    _close(cmix.log_prob(chutney.tensor(x)), tmix.log_prob(torch.tensor(x)))
    _close(cmix.mean, tmix.mean)
    _close(cmix.variance, tmix.variance)
    _close(cmix.cdf(chutney.tensor(x)), tmix.cdf(torch.tensor(x)))
    chutney.manual_seed(5)
    s = cmix.sample((40000,)).numpy()
    assert s.shape == (40000, 2)
    np.testing.assert_allclose(s.mean(0), tmix.mean.numpy(), atol=4 * np.sqrt(
        tmix.variance.numpy().max() / 40000))
    # a multivariate component family
    comp = D.Independent(D.Normal(chutney.randn(2, 3, 4), chutney.ones(2, 3, 4)), 1)
    m = D.MixtureSameFamily(D.Categorical(logits=chutney.zeros(2, 3)), comp)
    assert tuple(m.batch_shape) == (2,) and tuple(m.event_shape) == (4,)
    assert tuple(m.sample((5,)).shape) == (5, 2, 4)
    assert tuple(m.log_prob(chutney.zeros(5, 2, 4)).shape) == (5, 2)


def test_one_hot_and_relaxed():
    p = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    c, t = D.OneHotCategorical(probs=chutney.tensor(p)), TD.OneHotCategorical(probs=torch.tensor(p))
    v = np.array([[0, 0, 1.0], [1.0, 0, 0]])
    _close(c.log_prob(chutney.tensor(v)), t.log_prob(torch.tensor(v)))
    _close(c.entropy(), t.entropy())
    _close(c.mode, t.mode)
    _close(c.variance, t.variance)
    chutney.manual_seed(2)
    s = c.sample((20000,)).numpy()
    assert s.shape == (20000, 2, 3) and np.all(s.sum(-1) == 1)
    np.testing.assert_allclose(s.mean(0), p, atol=0.02)
    assert tuple(c.enumerate_support().shape) == (3, 2, 3)
    pr = chutney.tensor(p, requires_grad=True)
    st = D.OneHotCategoricalStraightThrough(probs=pr).rsample()
    (st * chutney.tensor([1.0, 2.0, 3.0], dtype=chutney.float64)).sum().backward()
    assert pr.grad is not None
    lg = np.array([0.5, -1.0, 2.0])
    temp = 0.7
    for cname in ("RelaxedBernoulli", "RelaxedOneHotCategorical"):
        cd = getattr(D, cname)(chutney.tensor(temp, dtype=chutney.float64),
                               logits=chutney.tensor(lg, requires_grad=True))
        tdist = getattr(TD, cname)(torch.tensor(temp, dtype=torch.float64),
                                   logits=torch.tensor(lg))
        y = tdist.sample((3,))
        _close(cd.log_prob(chutney.tensor(y.numpy())), tdist.log_prob(y), rtol=1e-6)
        chutney.manual_seed(3)
        r = cd.rsample((4,))
        assert tuple(r.shape) == (4,) + tuple(y.shape[1:])
        r.sum().backward()
    # relaxed bernoulli at low temperature is nearly Bernoulli(sigmoid(logit))
    chutney.manual_seed(4)
    r = D.RelaxedBernoulli(chutney.tensor(0.05), logits=chutney.tensor([0.3])).sample((20000,))
    assert abs(float((r > 0.5).float().mean()) - 1 / (1 + math.exp(-0.3))) < 0.02


def test_shapes_and_expand():
    d = D.Gamma(chutney.ones(3, 1), chutney.ones(4))
    assert tuple(d.batch_shape) == (3, 4) and tuple(d.event_shape) == ()
    assert tuple(d.sample((2, 5)).shape) == (2, 5, 3, 4)
    assert tuple(d.rsample().shape) == (3, 4)
    e = D.Beta(chutney.tensor(2.0), chutney.tensor(3.0)).expand((2, 3))
    assert tuple(e.batch_shape) == (2, 3) and tuple(e.log_prob(chutney.tensor(0.3)).shape) == (2, 3)
    dd = D.Dirichlet(chutney.ones(2, 4))
    assert tuple(dd.batch_shape) == (2,) and tuple(dd.event_shape) == (4,)
    assert tuple(dd.sample((3,)).shape) == (3, 2, 4)
    assert tuple(dd.expand((5, 2)).sample().shape) == (5, 2, 4)
    m = D.MultivariateNormal(chutney.zeros(3), scale_tril=chutney.eye(3)).expand((4,))
    assert tuple(m.sample((2,)).shape) == (2, 4, 3)
    assert tuple(m.log_prob(chutney.zeros(3)).shape) == (4,)
    assert tuple(D.Categorical(logits=chutney.zeros(2, 5)).enumerate_support().shape) == (5, 2)
    assert tuple(D.Bernoulli(probs=chutney.tensor([0.2, 0.4])).sample((3,)).shape) == (3, 2)


def test_validate_args():
    with pytest.raises(ValueError):
        D.Normal(chutney.tensor(0.0), chutney.tensor(-1.0))
    with pytest.raises(ValueError):
        D.Gamma(chutney.tensor(-1.0), chutney.tensor(1.0))
    with pytest.raises(ValueError):
        D.Beta(chutney.tensor(1.0), chutney.tensor(0.0))
    with pytest.raises(ValueError):
        D.Bernoulli(probs=chutney.tensor(1.5))
    with pytest.raises(ValueError):
        D.MultivariateNormal(chutney.zeros(2), covariance_matrix=chutney.tensor([[1.0, 2.0],
                                                                                  [2.0, 1.0]]))
    with pytest.raises(ValueError):
        D.Categorical(probs=chutney.tensor([0.5, 0.5]), logits=chutney.tensor([0.0, 0.0]))
    with pytest.raises(ValueError):  # outside the support
        D.Exponential(chutney.tensor(1.0)).log_prob(chutney.tensor(-1.0))
    with pytest.raises(ValueError):
        D.Poisson(chutney.tensor(2.0)).log_prob(chutney.tensor(1.5))
    with pytest.raises(ValueError):
        D.Dirichlet(chutney.ones(3)).log_prob(chutney.tensor([0.5, 0.6, 0.1]))
    # validate_args=False turns it off, as PyTorch
    D.Normal(chutney.tensor(0.0), chutney.tensor(-1.0), validate_args=False)
    assert D.Exponential(chutney.tensor(1.0), validate_args=False).log_prob(
        chutney.tensor(-1.0)).item() == pytest.approx(1.0)


def test_register_kl_dispatch():
    class MyNormal(D.Normal):
        pass

    p, q = MyNormal(0.0, 1.0), D.Normal(1.0, 2.0)
    assert D.kl_divergence(p, q).item() == pytest.approx(
        TD.kl_divergence(TD.Normal(0.0, 1.0), TD.Normal(1.0, 2.0)).item())

    @D.register_kl(MyNormal, D.Normal)
    def _mine(p, q):
        return chutney.tensor(42.0)

    assert D.kl_divergence(p, q).item() == 42.0
    from chutney.distributions.kl import kl_divergence
    assert kl_divergence is D.kl_divergence
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Poisson(1.0))


def test_constraints():
    C = D.constraints
    assert bool(C.positive.check(chutney.tensor(1.0))) and not bool(C.positive.check(chutney.tensor(0.0)))
    assert C.simplex.check(chutney.tensor([0.3, 0.7])).item()
    assert C.lower_cholesky.check(chutney.eye(2)).item()
    assert bool(C.interval(0, 2).check(chutney.tensor(1.0)))
    assert C.real_vector.event_dim == 1
    assert D.Normal.arg_constraints["scale"] is C.positive
    assert D.Beta(1.0, 1.0).support is C.unit_interval


def test_kl_cross_family_exponential_gamma():
    r = np.array([0.5, 2.0])
    cr, tr = chutney.tensor(r, requires_grad=True), torch.tensor(r, requires_grad=True)
    kc = D.kl_divergence(D.Exponential(cr), D.Gamma(chutney.tensor([2.0, 0.7], dtype=chutney.float64),
                                                     chutney.tensor([1.5, 3.0], dtype=chutney.float64)))
    kt = TD.kl_divergence(TD.Exponential(tr), TD.Gamma(torch.tensor([2.0, 0.7], dtype=torch.float64),
                                                       torch.tensor([1.5, 3.0], dtype=torch.float64)))
    _close(kc, kt, rtol=1e-9)
    kc.sum().backward()
    kt.sum().backward()
    _close(cr.grad, tr.grad, rtol=1e-8)


def test_review_edge_gradients():
    """Gradients where a concentration is 1 (xlogy's slope at 0), of a raw
    scale_tril (none above the diagonal), and of StudentT's variance at
    df = 2 (no NaN from the branch not taken): against PyTorch."""
    rng = np.random.default_rng(8)
    Lv = np.tril(rng.standard_normal((3, 3))) + 3 * np.eye(3)
    res = []
    for lib in (chutney, torch):
        D = lib.distributions
        a = lib.tensor([1.0, 2.5], dtype=lib.float64, requires_grad=True)
        b = lib.tensor([1.0, 0.7], dtype=lib.float64, requires_grad=True)
        D.Beta(a, b).log_prob(lib.tensor([0.3, 0.6], dtype=lib.float64)).sum().backward()
        c = lib.tensor([1.0, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
        D.Dirichlet(c).log_prob(lib.tensor([0.2, 0.3, 0.5], dtype=lib.float64)).backward()
        L = lib.tensor(Lv, requires_grad=True)
        m = D.MultivariateNormal(lib.zeros(3, dtype=lib.float64), scale_tril=L)
        (m.log_prob(lib.ones(3, dtype=lib.float64)) + m.entropy()).backward()
        df = lib.tensor([2.0, 3.0], dtype=lib.float64, requires_grad=True)
        D.StudentT(df).variance.sum().backward()
        res.append([a.grad.numpy(), b.grad.numpy(), c.grad.numpy(), L.grad.numpy(),
                    df.grad.numpy()])
    for x, y in zip(*res):
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)


def test_binomial_kl_with_more_trials_is_infinite():
    got = chutney.distributions.kl_divergence(
        chutney.distributions.Binomial(chutney.tensor([5.0, 3.0]), probs=chutney.tensor([0.3, 0.4])),
        chutney.distributions.Binomial(chutney.tensor([3.0, 3.0]), probs=chutney.tensor([0.5, 0.5])))
    want = torch.distributions.kl_divergence(
        torch.distributions.Binomial(torch.tensor([5.0, 3.0]), probs=torch.tensor([0.3, 0.4])),
        torch.distributions.Binomial(torch.tensor([3.0, 3.0]), probs=torch.tensor([0.5, 0.5])))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
