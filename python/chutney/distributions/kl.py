"""kl_divergence(p, q) and register_kl(type_p, type_q): closed forms looked
up by the most specific registered pair of classes along p's and q's MROs."""

import math

from chutney import _C
from chutney.distributions.composite import (Independent, TransformedDistribution)
from chutney.distributions.continuous import (
    Beta, Exponential, Gamma, Gumbel, HalfNormal, Laplace, LogNormal, Normal, Uniform)
from chutney.distributions.discrete import (
    Bernoulli, Binomial, Categorical, Geometric, OneHotCategorical, Poisson)
from chutney.distributions.distribution import _sum_rightmost
from chutney.distributions.multivariate import (
    Dirichlet, MultivariateNormal, _half_log_det, _mahalanobis_sq, _tri_solve)

_KL_REGISTRY = {}
_EULER = 0.57721566490153286061


def register_kl(type_p, type_q):
    """Decorator: fn(p, q) computes KL(p || q) for p of type_p and q of type_q."""
    if not (isinstance(type_p, type) and isinstance(type_q, type)):
        raise TypeError("Expected type_p and type_q to be classes")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        return fn
    return decorator


def _dispatch(tp, tq):
    best, rank = None, None
    mp, mq = tp.__mro__, tq.__mro__
    for (a, b), fn in _KL_REGISTRY.items():
        if a in mp and b in mq:
            r = (mp.index(a) + mq.index(b), mp.index(a))
            if rank is None or r < rank:
                best, rank = fn, r
    return best


def kl_divergence(p, q):
    fn = _dispatch(type(p), type(q))
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{type(p).__name__} and q type {type(q).__name__}")
    return fn(p, q)


def _infinite_like(t):
    return _C.full_like(t, math.inf)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).square()
    t1 = ((p.loc - q.loc) / q.scale).square()
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(LogNormal, LogNormal)
def _kl_lognormal_lognormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    inside = (q.low <= p.low).logical_and(p.high <= q.high)
    r = ((q.high - q.low) / (p.high - p.low)).log()
    return _C.where(inside, r, _infinite_like(r))


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _C.where(q.probs == 0, _infinite_like(t), t)
    t = _C.where(p.probs == 0, _C.zeros_like(t), t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    # inf where q cannot give what p can, 0 where p cannot
    t1 = p.probs * ((-q.logits).softplus() - (-p.logits).softplus())
    t1 = _C.where(q.probs == 0, _infinite_like(t1), t1)
    t1 = _C.where(p.probs == 0, _C.zeros_like(t1), t1)
    t2 = (1 - p.probs) * (q.logits.softplus() - p.logits.softplus())
    t2 = _C.where(q.probs == 1, _infinite_like(t2), t2)
    t2 = _C.where(p.probs == 1, _C.zeros_like(t2), t2)
    return t1 + t2


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count "
                                  "is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() -
                          (-q.probs).log1p())
    kl = _C.where(p.total_count > 0, kl, _C.zeros_like(kl))
    # p reaches counts q cannot: infinitely far
    return _C.where(p.total_count > q.total_count, _C.full_like(kl, math.inf), kl)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    ratio = q.rate / p.rate
    return ratio - 1 - ratio.log()


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    ratio = p.scale / q.scale
    d = (p.loc - q.loc).abs()
    return -ratio.log() + d / q.scale + ratio * (-d / p.scale).exp() - 1


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    c1 = p.scale / q.scale
    c2 = q.loc / q.scale
    c3 = p.loc / q.scale
    t1 = -c1.log() - c2 + c3
    t2 = c1 * _EULER
    t3 = (c2 + (1 + c1).lgamma() - c3).exp()
    return t1 + t2 + t3 - (1 + _EULER)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    a1, b1, a2, b2 = p.concentration, p.rate, q.concentration, q.rate
    return (a1 - a2) * a1.digamma() - a1.lgamma() + a2.lgamma() + \
        a2 * (b1.log() - b2.log()) + a1 * (b2 - b1) / b1


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    # E_p[log p] = log l - 1; E_p[log q] = a log b - lgamma(a) + (a-1)(-gamma - log l) - b/l
    lam, a, b = p.rate, q.concentration, q.rate
    return lam.log() - 1 - a * b.log() + a.lgamma() + (a - 1) * (_EULER + lam.log()) + b / lam


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    a1, b1, a2, b2 = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    s1 = a1 + b1
    return (a2.lgamma() + b2.lgamma() - (a2 + b2).lgamma()) - \
        (a1.lgamma() + b1.lgamma() - s1.lgamma()) + (a1 - a2) * a1.digamma() + \
        (b1 - b2) * b1.digamma() + (a2 - a1 + b2 - b1) * s1.digamma()


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    a, b = p.concentration, q.concentration
    a0 = a.sum(-1)
    return a0.lgamma() - a.lgamma().sum(-1) - b.sum(-1).lgamma() + b.lgamma().sum(-1) + \
        ((a - b) * (a.digamma() - a0.unsqueeze(-1).digamma())).sum(-1)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise ValueError("KL-divergence between two Multivariate Normals with different "
                         "event shapes cannot be computed")
    Lp, Lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    n = p.event_shape[0]
    half_ld = _half_log_det(Lq) - _half_log_det(Lp)
    # tr(Sq^-1 Sp) = |Lq^-1 Lp|_F^2
    batch = _C.Size(tuple(_bshape(Lp, Lq)))
    Lp_b = Lp.expand(*batch, n, n)
    tr = _tri_solve(Lq, Lp_b).square().sum((-2, -1))
    m = _mahalanobis_sq(Lq, q.loc - p.loc)
    return half_ld + 0.5 * (tr + m - n)


def _bshape(a, b):
    from chutney.distributions.distribution import _broadcast_shape
    return _broadcast_shape(tuple(a.shape[:-2]), tuple(b.shape[:-2]))


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms or tuple(p.event_shape) != tuple(q.event_shape):
        raise NotImplementedError
    extra = len(p.event_shape) - len(p.base_dist.event_shape)
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), extra)
