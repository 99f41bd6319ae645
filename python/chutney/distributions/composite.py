"""Distributions built from others: Independent, MixtureSameFamily,
TransformedDistribution, and the relaxed (Concrete / Gumbel-softmax) ones,
LogitRelaxedBernoulli, RelaxedBernoulli, ExpRelaxedCategorical and
RelaxedOneHotCategorical."""

from chutney import _C
from chutney.distributions import constraints
from chutney.distributions.discrete import Categorical, _one_of
from chutney.distributions.distribution import (
    Distribution, _as_tensor, _clamp_probs, _sum_rightmost, _uniform, broadcast_all,
    probs_to_logits)
from chutney.distributions.transforms import (
    ComposeTransform, ExpTransform, SigmoidTransform, Transform)


class Independent(Distribution):
    """Reinterprets the rightmost reinterpreted_batch_ndims batch axes of
    base_distribution as event axes (log_prob sums over them)."""
    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        n = reinterpreted_batch_ndims
        if n > len(base_distribution.batch_shape):
            raise ValueError("Expected reinterpreted_batch_ndims <= len(base_distribution."
                             f"batch_shape), actual {n} vs {len(base_distribution.batch_shape)}")
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = n + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = n
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new.__dict__.update(self.__dict__)
        n = self.reinterpreted_batch_ndims
        tail = tuple(self.event_shape[:n])
        new.base_dist = self.base_dist.expand(tuple(batch_shape) + tail)
        new._batch_shape = _C.Size(tuple(batch_shape))
        return new

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self):
        return self.reinterpreted_batch_ndims == 0 and self.base_dist.has_enumerate_support

    @constraints.dependent_property
    def support(self):
        s = self.base_dist.support
        return constraints.independent(s, self.reinterpreted_batch_ndims) \
            if self.reinterpreted_batch_ndims else s

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return _sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return _sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def enumerate_support(self, expand=True):
        if self.reinterpreted_batch_ndims > 0:
            raise NotImplementedError("Enumeration over cartesian product is not implemented")
        return self.base_dist.enumerate_support(expand=expand)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"


class MixtureSameFamily(Distribution):
    """A mixture whose components are the last batch axis of
    component_distribution, weighted by the Categorical mixture_distribution."""
    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError("The Mixture distribution needs to be an instance of "
                             "torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution need to be an instance of "
                             "torch.distributions.Distribution")
        mb, cb = tuple(mixture_distribution.batch_shape), tuple(component_distribution.batch_shape)
        if len(cb) < 1:
            raise ValueError("component_distribution must have at least one batch dimension")
        for a, b in zip(reversed(mb), reversed(cb[:-1])):
            if a != 1 and b != 1 and a != b:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mb}) is not compatible "
                                 f"with `component_distribution.batch_shape`({cb})")
        k = mixture_distribution.logits.shape[-1]
        if k != cb[-1]:
            raise ValueError(f"`mixture_distribution component` ({k}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({cb[-1]})")
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        self._num_component = k
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cb[:-1], component_distribution.event_shape,
                         validate_args=validate_args)

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    def expand(self, batch_shape, _instance=None):
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new.__dict__.update(self.__dict__)
        batch_shape = tuple(batch_shape)
        new._component_distribution = self._component_distribution.expand(
            batch_shape + (self._num_component,))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._batch_shape = _C.Size(batch_shape)
        return new

    @constraints.dependent_property
    def support(self):
        return self._component_distribution.support

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def _weights(self):
        p = self._mixture_distribution.probs
        for _ in range(self._event_ndims):
            p = p.unsqueeze(-1)
        return p

    @property
    def mean(self):
        return (self._weights() * self._component_distribution.mean).sum(
            -1 - self._event_ndims)

    @property
    def variance(self):
        # total variance: the components' mean variance plus the variance of their means
        w = self._weights()
        d = -1 - self._event_ndims
        mean_cond_var = (w * self._component_distribution.variance).sum(d)
        var_cond_mean = (w * (self._component_distribution.mean -
                              self._pad(self.mean)).square()).sum(d)
        return mean_cond_var + var_cond_mean

    def cdf(self, x):
        x = self._pad(x)
        return (self._component_distribution.cdf(x) * self._mixture_distribution.probs).sum(-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        lp = self._component_distribution.log_prob(self._pad(x))  # [S, B, k]
        mix = self._mixture_distribution.logits.log_softmax(-1)
        return (lp + mix).logsumexp(-1)

    def sample(self, sample_shape=()):
        from chutney.autograd import no_grad
        if isinstance(sample_shape, int):
            sample_shape = (sample_shape,)
        with no_grad():
            idx = self._mixture_distribution.sample(sample_shape)  # S + B
            comp = self._component_distribution.sample(sample_shape)  # S + B + (k,) + E
            ev = tuple(self.event_shape)
            idx = idx.reshape(*idx.shape, 1, *([1] * len(ev)))
            target = tuple(idx.shape[:len(idx.shape) - 1 - len(ev)]) + (1,) + ev
            idx = idx.expand(*target)
            return comp.gather(-1 - len(ev), idx).squeeze(-1 - len(ev))


class TransformedDistribution(Distribution):
    """base_distribution pushed through transforms (applied first to last);
    log_prob subtracts each transform's log|det Jacobian|."""
    arg_constraints = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            self.transforms = [transforms]
        elif isinstance(transforms, (list, tuple)):
            if not all(isinstance(t, Transform) for t in transforms):
                raise ValueError("transforms must be a Transform or a list of Transforms")
            self.transforms = list(transforms)
        else:
            raise ValueError(f"transforms must be a Transform or list, but was {transforms}")
        chain = ComposeTransform(self.transforms)
        base_event = len(base_distribution.event_shape)
        need = chain.domain.event_dim
        if need > len(base_distribution.batch_shape) + base_event:
            raise ValueError(f"base_distribution needs at least {need} dimensions")
        if need > base_event:
            from chutney.distributions.composite import Independent as _Ind
            base_distribution = _Ind(base_distribution, need - base_event)
            base_event = need
        self.base_dist = base_distribution
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = chain.codomain.event_dim + max(base_event - need, 0)
        cut = len(shape) - event_dim
        super().__init__(shape[:cut], shape[cut:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new.__dict__.update(self.__dict__)
        batch_shape = tuple(batch_shape)
        ev = tuple(self.event_shape)
        base_ev = tuple(self.base_dist.event_shape)
        extra = ev[:len(ev) - len(base_ev)]
        new.base_dist = self.base_dist.expand(batch_shape + extra)
        new._batch_shape = _C.Size(batch_shape)
        return new

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @constraints.dependent_property
    def support(self):
        if not self.transforms:
            return self.base_dist.support
        s = self.transforms[-1].codomain
        ed = len(self.event_shape)
        return constraints.independent(s, ed - s.event_dim) if ed > s.event_dim else s

    def sample(self, sample_shape=()):
        from chutney.autograd import no_grad
        with no_grad():
            x = self.base_dist.sample(sample_shape)
            for t in self.transforms:
                x = t(x)
            return x

    def rsample(self, sample_shape=()):
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self.event_shape)
        lp = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t.inv(y)
            event_dim += t.domain.event_dim - t.codomain.event_dim
            lp = lp - _sum_rightmost(t.log_abs_det_jacobian(x, y), event_dim - t.domain.event_dim)
            y = x
        return lp + _sum_rightmost(self.base_dist.log_prob(y),
                                   event_dim - len(self.base_dist.event_shape))

    def _sign(self):
        s = 1
        for t in self.transforms:
            s = s * t.sign
        return s

    def cdf(self, value):
        for t in reversed(self.transforms):
            value = t.inv(value)
        value = self.base_dist.cdf(value)
        s = self._sign()
        return value if isinstance(s, int) and s == 1 else (
            1 - value if isinstance(s, int) else s * (value - 0.5) + 0.5)

    def icdf(self, value):
        s = self._sign()
        value = value if isinstance(s, int) and s == 1 else (
            1 - value if isinstance(s, int) else s * (value - 0.5) + 0.5)
        value = self.base_dist.icdf(value)
        for t in self.transforms:
            value = t(value)
        return value


class LogitRelaxedBernoulli(Distribution):
    """The logit of a RelaxedBernoulli draw: (logits + Logistic noise) / temperature."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            self.logits = probs_to_logits(self.probs, is_binary=True)
        else:
            (self.logits,) = broadcast_all(logits)
            self.probs = self.logits.sigmoid()
        self.temperature = _as_tensor(temperature, self.logits)
        super().__init__(tuple(self.logits.shape), validate_args=validate_args)

    def _expand_params(self):
        return {"probs": 0, "logits": 0}

    def rsample(self, sample_shape=()):
        u = _clamp_probs(_uniform(self._extended_shape(sample_shape), self.logits))
        return (u.log() - (-u).log1p() + self.logits) / self.temperature

    def log_prob(self, value):
        value = self._check(value)
        diff = self.logits - value * self.temperature
        return self.temperature.log() + diff - 2 * diff.softplus()


class RelaxedBernoulli(TransformedDistribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class ExpRelaxedCategorical(Distribution):
    """The log of a RelaxedOneHotCategorical draw (log-softmax of Gumbel-perturbed
    logits over temperature)."""
    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = _as_tensor(temperature, self._categorical.logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new.__dict__.update(self.__dict__)
        new._categorical = self._categorical.expand(batch_shape)
        new._batch_shape = new._categorical.batch_shape
        return new

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    def rsample(self, sample_shape=()):
        u = _clamp_probs(_uniform(self._extended_shape(sample_shape), self.logits))
        gumbels = -((-(u.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value):
        value = self._check(value)
        k = self._categorical._num_events
        import math
        log_scale = math.lgamma(k) + (k - 1) * self.temperature.log()
        score = self.logits - value * self.temperature
        score = (score - score.logsumexp(-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs
