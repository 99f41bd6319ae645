"""Univariate continuous families: Normal, Uniform, Exponential, Laplace,
Cauchy, Gumbel, HalfNormal, LogNormal, StudentT, Gamma, Chi2, Beta. Their
rsample is a differentiable function of the parameters and of parameter-free
noise (Gamma, Chi2, StudentT and Beta through _gamma's implicit gradient)."""

import math

from chutney import _C
from chutney.distributions import constraints
from chutney.distributions._gamma import standard_gamma
from chutney.distributions.distribution import (
    Distribution, ExponentialFamily, _eps, _normal, _tiny, _uniform, broadcast_all)

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_EULER = 0.57721566490153286061


def _nan_like(t):
    return _C.full_like(t, math.nan)


class Normal(ExponentialFamily):
    """N(loc, scale^2), loc and scale broadcast together."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale.square()

    def rsample(self, sample_shape=()):
        return self.loc + _normal(self._extended_shape(sample_shape), self.loc) * self.scale

    def log_prob(self, value):
        value = self._check(value)
        return -((value - self.loc).square()) / (2 * self.scale.square()) - self.scale.log() - \
            _HALF_LOG_2PI

    def cdf(self, value):
        value = self._check(value)
        return 0.5 * (1 + ((value - self.loc) / (self.scale * math.sqrt(2))).erf())

    def icdf(self, value):
        return self.loc + self.scale * (2 * value - 1).erfinv() * math.sqrt(2)

    def entropy(self):
        return 0.5 + _HALF_LOG_2PI + self.scale.log()


class Uniform(Distribution):
    arg_constraints = {"low": constraints.dependent(is_discrete=False, event_dim=0),
                       "high": constraints.dependent(is_discrete=False, event_dim=0)}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, validate_args=validate_args)
        if self._validate_args and not bool((self.low < self.high).all()):
            raise ValueError("Uniform: expected low < high")

    def _expand_params(self):
        return {"low": 0, "high": 0}

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.low + self.high) * 0.5

    @property
    def mode(self):
        return _nan_like(self.high)

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).square() / 12

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.low, open_low=False)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        value = self._check(value)
        inside = (value >= self.low).logical_and(value < self.high)
        lp = -(self.high - self.low).log() + value * 0
        return _C.where(inside, lp, _C.full_like(lp, -math.inf))

    def cdf(self, value):
        value = self._check(value)
        return ((value - self.low) / (self.high - self.low)).clamp(0, 1)

    def icdf(self, value):
        return self.low + value * (self.high - self.low)

    def entropy(self):
        return (self.high - self.low).log()


class Exponential(ExponentialFamily):
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return _C.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.square().reciprocal()

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.rate, open_low=False)
        return -(-u).log1p() / self.rate

    def log_prob(self, value):
        value = self._check(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        value = self._check(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()


class Laplace(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.square()

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape=()):
        # u in (-1, 1) strictly: log1p(-|u|) stays finite
        e = _eps(self.loc)
        u = _uniform(self._extended_shape(sample_shape), self.loc, open_low=False) * (2 - e) - \
            (1 - e)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        value = self._check(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        value = self._check(value)
        z = value - self.loc
        return 0.5 - 0.5 * z.sign() * (-z.abs() / self.scale).expm1()

    def icdf(self, value):
        t = value - 0.5
        return self.loc - self.scale * t.sign() * (-2 * t.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()


class Cauchy(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self):
        return _nan_like(self.loc)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return _C.full_like(self.loc, math.inf)

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.loc)
        return self.loc + self.scale * (math.pi * (u - 0.5)).tan()

    def log_prob(self, value):
        value = self._check(value)
        return -math.log(math.pi) - self.scale.log() - \
            ((value - self.loc) / self.scale).square().log1p()

    def cdf(self, value):
        value = self._check(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value):
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class Gumbel(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.loc + self.scale * _EULER

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.square()

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.loc).clamp(max=1 - _eps(self.loc))
        return self.loc - self.scale * (-u.log()).log()

    def log_prob(self, value):
        value = self._check(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value):
        value = self._check(value)
        return (-((self.loc - value) / self.scale).exp()).exp()

    def icdf(self, value):
        return self.loc - self.scale * (-value.log()).log()

    def entropy(self):
        return self.scale.log() + (1 + _EULER)


class HalfNormal(Distribution):
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        (self.scale,) = broadcast_all(scale)
        self.base_dist = Normal(0.0 * self.scale, self.scale, validate_args=False)
        super().__init__(self.scale.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        new.base_dist = self.base_dist.expand(batch_shape)
        return new

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self):
        return _C.zeros_like(self.scale)

    @property
    def variance(self):
        return self.scale.square() * (1 - 2 / math.pi)

    def rsample(self, sample_shape=()):
        return (_normal(self._extended_shape(sample_shape), self.scale) * self.scale).abs()

    def log_prob(self, value):
        value = self._check(value)
        lp = self.base_dist.log_prob(value) + math.log(2)
        return _C.where(value >= 0, lp, _C.full_like(lp, -math.inf))

    def cdf(self, value):
        value = self._check(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class LogNormal(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        self.base_dist = Normal(self.loc, self.scale, validate_args=False)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        new.base_dist = self.base_dist.expand(batch_shape)
        return new

    @property
    def mean(self):
        return (self.loc + self.scale.square() / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self):
        s2 = self.scale.square()
        return s2.expm1() * (2 * self.loc + s2).exp()

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape).exp()

    def log_prob(self, value):
        value = self._check(value)
        y = value.log()
        return self.base_dist.log_prob(y) - y

    def cdf(self, value):
        value = self._check(value)
        return self.base_dist.cdf(value.log())

    def icdf(self, value):
        return self.base_dist.icdf(value).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc


class Gamma(ExponentialFamily):
    """Gamma(concentration, rate): density rate^a x^(a-1) e^(-rate x) / Gamma(a)."""
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.square()

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = standard_gamma(self.concentration.expand(*shape)) / self.rate.expand(*shape)
        return x.clamp(min=_tiny(x))

    def log_prob(self, value):
        value = self._check(value)
        a, b = self.concentration, self.rate
        return a.xlogy(b) + (a - 1).xlogy(value) - b * value - a.lgamma()

    def entropy(self):
        a = self.concentration
        return a - self.rate.log() + a.lgamma() + (1 - a) * a.digamma()


class Chi2(Gamma):
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (self.df,) = broadcast_all(df)
        Gamma.__init__(self, 0.5 * self.df, 0.5 * _C.ones_like(self.df),
                       validate_args=validate_args)

    def _expand_params(self):
        return {"df": 0, "concentration": 0, "rate": 0}


class StudentT(Distribution):
    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        super().__init__(self.df.shape, validate_args=validate_args)

    @property
    def mean(self):
        return _C.where(self.df > 1, self.loc, _nan_like(self.loc))

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        # the ratio only where it is finite: 1/0 in the branch not taken
        # would make its gradient NaN
        safe = _C.where(df > 2, df, _C.full_like(df, 3.0))
        v = self.scale.square() * safe / (safe - 2)
        v = _C.where(df > 2, v, _C.full_like(v, math.inf))
        return _C.where(df > 1, v, _nan_like(v))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = _normal(shape, self.df)
        z = 2 * standard_gamma((0.5 * self.df).expand(*shape))  # chi-square(df)
        return self.loc + self.scale * x * (z / self.df).rsqrt()

    def log_prob(self, value):
        value = self._check(value)
        y = (value - self.loc) / self.scale
        df = self.df
        norm = self.scale.log() + 0.5 * df.log() + 0.5 * math.log(math.pi) + \
            (0.5 * df).lgamma() - (0.5 * (df + 1)).lgamma()
        return -0.5 * (df + 1) * (y.square() / df).log1p() - norm

    def entropy(self):
        df = self.df
        lbeta = (0.5 * df).lgamma() + math.lgamma(0.5) - (0.5 * (df + 1)).lgamma()
        return self.scale.log() + 0.5 * (df + 1) * ((0.5 * (df + 1)).digamma() -
                                                    (0.5 * df).digamma()) + \
            0.5 * df.log() + lbeta


class Beta(ExponentialFamily):
    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        super().__init__(self.concentration1.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        am1, bm1 = (a - 1).clamp(min=0), (b - 1).clamp(min=0)
        m = am1 / (am1 + bm1)
        # both below 1 (density peaks at both ends): PyTorch 1.13 answers 1
        both = (a < 1).logical_and(b < 1)
        return _C.where(both, _C.ones_like(m), m)

    @property
    def variance(self):
        t = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (t.square() * (t + 1))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = standard_gamma(self.concentration1.expand(*shape))
        y = standard_gamma(self.concentration0.expand(*shape))
        e = _eps(x)
        return (x / (x + y)).clamp(_tiny(x), 1 - e)

    def log_prob(self, value):
        value = self._check(value)
        a, b = self.concentration1, self.concentration0
        return (a - 1).xlogy(value) + (b - 1).xlogy(1 - value) + (a + b).lgamma() - \
            a.lgamma() - b.lgamma()

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        t = a + b
        return a.lgamma() + b.lgamma() - t.lgamma() - (a - 1) * a.digamma() - \
            (b - 1) * b.digamma() + (t - 2) * t.digamma()
