"""Discrete families: Categorical, OneHotCategorical (and its
straight-through variant), Bernoulli, Binomial, Geometric, Poisson."""

import math

from chutney import _C
from chutney.distributions import constraints
from chutney.distributions.distribution import (
    Distribution, ExponentialFamily, _as_tensor, _broadcast_shape, _clamp_probs, _eps,
    _uniform, broadcast_all, probs_to_logits)


def _one_of(probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


class Categorical(Distribution):
    """Classes 0..K-1 with probs (normalised) or logits over the last axis."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(
        constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self.logits = probs_to_logits(self.probs)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
            self.probs = self.logits.exp()
        self._param = self.probs
        self._num_events = self.probs.shape[-1]
        super().__init__(tuple(self.probs.shape[:-1]), validate_args=validate_args)

    def _expand_params(self):
        return {"probs": 1, "logits": 1, "_param": 1}

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def param_shape(self):
        return self.probs.shape

    def _sample(self, sample_shape=()):
        from chutney import multinomial
        if isinstance(sample_shape, int):
            sample_shape = (sample_shape,)
        p = self.probs.reshape(-1, self._num_events)
        n = math.prod(sample_shape) if sample_shape else 1
        draws = multinomial(p, n, replacement=True)  # [batch, n]
        return draws.t().reshape(*(tuple(sample_shape) + tuple(self.batch_shape)))

    def log_prob(self, value):
        value = self._check(value)
        value = value.to(_C.int64).unsqueeze(-1)
        # value [..., 1] and the logits [..., K] broadcast together, as PyTorch
        lead = _broadcast_shape(tuple(value.shape[:-1]), tuple(self.logits.shape[:-1]))
        value = value.broadcast_to(lead + (1,))
        logits = self.logits.broadcast_to(lead + (self._num_events,))
        return logits.gather(-1, value).squeeze(-1)

    def entropy(self):
        # clamp: a -inf logit times a 0 probability is 0 there, not NaN
        min_real = -3.4028234663852886e+38 if self.logits.dtype != _C.float64 else -1.7976931348623157e+308
        return -(self.logits.clamp(min=min_real) * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = _C.arange(self._num_events, device=self.probs.device)
        values = values.reshape(-1, *([1] * len(self.batch_shape)))
        return values.expand(-1, *self.batch_shape) if expand else values

    @property
    def mean(self):
        return _C.full(tuple(self.batch_shape), math.nan, dtype=self.probs.dtype)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return _C.full(tuple(self.batch_shape), math.nan, dtype=self.probs.dtype)


class OneHotCategorical(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(
        constraints.real, 1)}
    support = constraints.independent(constraints.boolean, 1)  # one-hot, checked as 0/1
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        self.probs, self.logits = self._categorical.probs, self._categorical.logits
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new.__dict__.update(self.__dict__)
        new._categorical = self._categorical.expand(batch_shape)
        new.probs, new.logits = new._categorical.probs, new._categorical.logits
        new._batch_shape = new._categorical.batch_shape
        return new

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        import chutney.nn.functional as F
        return F.one_hot(self.probs.argmax(-1), self.probs.shape[-1]).to(self.probs.dtype)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def _sample(self, sample_shape=()):
        import chutney.nn.functional as F
        idx = self._categorical.sample(sample_shape)
        return F.one_hot(idx, self._categorical._num_events).to(self.probs.dtype)

    def log_prob(self, value):
        value = self._check(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self._categorical._num_events
        values = _C.eye(n, dtype=self.probs.dtype, device=self.probs.device)
        values = values.reshape(n, *([1] * len(self.batch_shape)), n)
        return values.expand(n, *self.batch_shape, n) if expand else values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """rsample: the one-hot draw forwards, the probabilities' gradient
    backwards (the straight-through estimator)."""
    has_rsample = True

    def rsample(self, sample_shape=()):
        s = self._sample(sample_shape)
        return s + (self.probs - self.probs.detach())


class Bernoulli(ExponentialFamily):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            self.logits = probs_to_logits(self.probs, is_binary=True)
        else:
            (self.logits,) = broadcast_all(logits)
            self.probs = self.logits.sigmoid()
        self._param = self.probs
        super().__init__(tuple(self.probs.shape), validate_args=validate_args)

    def _expand_params(self):
        return {"probs": 0, "logits": 0, "_param": 0}

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        m = (self.probs >= 0.5).to(self.probs.dtype)
        return _C.where(self.probs == 0.5, _C.full_like(m, math.nan), m)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def _sample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.probs, open_low=False)
        return (u < self.probs).to(self.probs.dtype)

    def log_prob(self, value):
        value = self._check(value)
        # -BCE with logits; softplus rather than max(x,0) + log1p(e^-|x|), whose
        # gradient at logit 0 is a one-sided subgradient
        return self.logits * value - self.logits.softplus()

    def entropy(self):
        lg = self.logits
        return lg.softplus() - lg * self.probs

    def enumerate_support(self, expand=True):
        values = _C.tensor([0.0, 1.0], dtype=self.probs.dtype, device=self.probs.device)
        values = values.reshape(2, *([1] * len(self.batch_shape)))
        return values.expand(2, *self.batch_shape) if expand else values


class Binomial(Distribution):
    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
            self.logits = probs_to_logits(self.probs, is_binary=True)
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
            self.probs = self.logits.sigmoid()
        super().__init__(tuple(self.probs.shape), validate_args=validate_args)

    def _expand_params(self):
        return {"total_count": 0, "probs": 0, "logits": 0}

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def _sample(self, sample_shape=()):
        # sum of total_count Bernoulli draws; trials past an element's count are masked
        shape = tuple(self._extended_shape(sample_shape))
        nmax = int(self.total_count.max().item()) if self.total_count.numel() else 0
        if nmax == 0:
            return _C.zeros(*shape, dtype=self.probs.dtype, device=self.probs.device)
        u = _uniform(shape + (nmax,), self.probs, open_low=False)
        trial = _C.arange(nmax, device=self.probs.device).to(self.probs.dtype)
        hit = (u < self.probs.unsqueeze(-1)).logical_and(trial < self.total_count.unsqueeze(-1))
        return hit.to(self.probs.dtype).sum(-1)

    def log_prob(self, value):
        value = self._check(value)
        n = self.total_count
        log_binom = (n + 1).lgamma() - (value + 1).lgamma() - (n - value + 1).lgamma()
        lg = self.logits
        # k*logit - n*log(1 + e^logit), with n*log1p(e^logit) written stably; the
        # n=0 / logit=-inf corner gives 0 rather than NaN, as PyTorch
        norm = n * lg.softplus()
        kl = _C.where((value == 0).logical_and(lg == -math.inf), _C.zeros_like(lg), value * lg)
        return log_binom + kl - norm

    def entropy(self):
        n = int(self.total_count.max().item())
        if not bool((self.total_count == n).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        support = self.enumerate_support(False)
        lp = self.log_prob(support)
        return -(lp.exp() * lp).sum(0)

    def enumerate_support(self, expand=True):
        n = int(self.total_count.max().item())
        if not bool((self.total_count == n).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by "
                                      "`enumerate_support`.")
        values = _C.arange(1 + n, dtype=self.probs.dtype, device=self.probs.device)
        values = values.reshape(-1, *([1] * len(self.batch_shape)))
        return values.expand(-1, *self.batch_shape) if expand else values


class Geometric(Distribution):
    """Number of failures before the first success (support 0, 1, 2, ...)."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            self.logits = probs_to_logits(self.probs, is_binary=True)
        else:
            (self.logits,) = broadcast_all(logits)
            self.probs = self.logits.sigmoid()
        super().__init__(tuple(self.probs.shape), validate_args=validate_args)
        if self._validate_args and probs is not None and not bool((self.probs > 0).all()):
            raise ValueError("Expected parameter probs of distribution Geometric to be "
                             "positive but found invalid values")

    def _expand_params(self):
        return {"probs": 0, "logits": 0}

    @property
    def mean(self):
        return self.probs.reciprocal() - 1

    @property
    def mode(self):
        return _C.zeros_like(self.probs)

    @property
    def variance(self):
        return (self.probs.reciprocal() - 1) / self.probs

    def _sample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.probs)
        return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        value = self._check(value)
        p = self.probs
        # p == 1 at value 0: 0 * log(0) is 0 there
        q = _C.where((p == 1).logical_and(value == 0), _C.zeros_like(p * value), p + 0 * value)
        return value * (-q).log1p() + p.log()

    def entropy(self):
        lg = self.logits
        bce = lg.softplus() - lg * self.probs
        return bce / self.probs


class Poisson(ExponentialFamily):
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(tuple(self.rate.shape), validate_args=validate_args)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def _sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        import chutney
        return chutney.poisson(self.rate.expand(*shape).contiguous())

    def log_prob(self, value):
        value = self._check(value)
        return value.xlogy(self.rate) - self.rate - (value + 1).lgamma()


__all__ = ["Categorical", "OneHotCategorical", "OneHotCategoricalStraightThrough", "Bernoulli",
           "Binomial", "Geometric", "Poisson"]

_ = (_as_tensor, _clamp_probs, _eps)
