"""torch.distributions' everyday distributions over the library's ops:
Normal, Categorical, Bernoulli, Uniform, with sample / rsample (the
reparameterised samples differentiate), log_prob, entropy, mean, stddev,
variance, and kl_divergence between two of the same kind. Random draws come
from chutney.manual_seed's generator.
"""

import math

from chutney import _C
from chutney.autograd import no_grad

Tensor = _C.Tensor


def _t(v, like=None):
    if isinstance(v, Tensor):
        return v
    return _C.tensor(float(v), dtype=like.dtype if like is not None else _C.float32)


def _shape(sample_shape, batch):
    return tuple(sample_shape) + tuple(batch)


class Distribution:
    has_rsample = False

    def sample(self, sample_shape=()):
        with no_grad():
            return self.rsample(sample_shape) if self.has_rsample else self._sample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no reparameterised samples")

    @property
    def stddev(self):
        return self.variance.sqrt()


class Normal(Distribution):
    """N(loc, scale^2), loc and scale broadcast together."""
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc = _t(loc)
        self.scale = _t(scale, self.loc)
        self.batch_shape = tuple((self.loc + self.scale).shape)

    @property
    def mean(self):
        return self.loc.broadcast_to(self.batch_shape)

    @property
    def variance(self):
        return self.scale.square().broadcast_to(self.batch_shape)

    def rsample(self, sample_shape=()):
        eps = _C.randn(*_shape(sample_shape, self.batch_shape), device=self.loc.device)
        return self.loc + eps.to(self.loc.dtype) * self.scale

    def log_prob(self, value):
        value = _t(value, self.loc)
        return -((value - self.loc).square()) / (2 * self.scale.square()) - self.scale.log() - \
            0.5 * math.log(2 * math.pi)

    def entropy(self):
        return (0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()).broadcast_to(self.batch_shape)

    def cdf(self, value):
        return 0.5 * (1 + ((_t(value, self.loc) - self.loc) / (self.scale * math.sqrt(2))).erf())


class Uniform(Distribution):
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = _t(low), _t(high)
        self.batch_shape = tuple((self.low + self.high).shape)

    @property
    def mean(self):
        return ((self.low + self.high) * 0.5).broadcast_to(self.batch_shape)

    @property
    def variance(self):
        return ((self.high - self.low).square() / 12).broadcast_to(self.batch_shape)

    def rsample(self, sample_shape=()):
        u = _C.rand(*_shape(sample_shape, self.batch_shape), device=self.low.device)
        return self.low + u.to(self.low.dtype) * (self.high - self.low)

    def log_prob(self, value):
        value = _t(value, self.low)
        inside = (value >= self.low).logical_and(value < self.high)
        lp = -(self.high - self.low).log() + value * 0
        return _C.where(inside, lp, _C.full_like(lp, -math.inf))

    def entropy(self):
        return (self.high - self.low).log().broadcast_to(self.batch_shape)


class Categorical(Distribution):
    """Classes 0..K-1 with probs (normalised) or logits over the last axis."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.probs = probs / probs.sum(-1, keepdim=True)
            eps = _eps(self.probs)
            self.logits = self.probs.clamp(eps, 1 - eps).log()  # as PyTorch's probs_to_logits
        else:
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
            self.probs = self.logits.exp()
        self.batch_shape = tuple(self.probs.shape[:-1])
        self._num_events = self.probs.shape[-1]

    def _sample(self, sample_shape=()):
        from chutney import multinomial
        p = self.probs.reshape(-1, self._num_events)
        n = math.prod(sample_shape) if sample_shape else 1
        draws = multinomial(p, n, replacement=True)  # [batch, n]
        out = draws.t().reshape(*(tuple(sample_shape) + self.batch_shape))
        return out

    def log_prob(self, value):
        value = _t(value).to(_C.int64).unsqueeze(-1)
        # value [..., 1] and the logits [..., K] broadcast together, as PyTorch
        lead = _broadcast_shape(tuple(value.shape[:-1]), tuple(self.logits.shape[:-1]))
        value = value.broadcast_to(lead + (1,))
        logits = self.logits.broadcast_to(lead + (self._num_events,))
        return logits.gather(-1, value).squeeze(-1)

    def entropy(self):
        p_log_p = _C.where(self.probs > 0, self.probs * self.logits, _C.zeros_like(self.probs))
        return -p_log_p.sum(-1)

    @property
    def mean(self):
        return _C.full(self.batch_shape, math.nan)


class Bernoulli(Distribution):
    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.probs = _t(probs)
            eps = _eps(self.probs)
            c = self.probs.clamp(eps, 1 - eps)  # finite logits at 0 and 1, as PyTorch
            self.logits = c.log() - (-c).log1p()
        else:
            self.logits = _t(logits)
            self.probs = self.logits.sigmoid()
        self.batch_shape = tuple(self.probs.shape)

    @property
    def mean(self):
        return self.probs

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def _sample(self, sample_shape=()):
        u = _C.rand(*_shape(sample_shape, self.batch_shape), device=self.probs.device)
        return (u < self.probs).to(self.probs.dtype)

    def log_prob(self, value):
        # -BCE with logits: stable for logits of any size
        value = _t(value, self.logits)
        return -(self.logits.clamp(min=0) - self.logits * value +
                 (-self.logits.abs()).exp().log1p())

    def entropy(self):
        return -(self.probs * self.log_prob(_C.ones_like(self.probs)) +
                 (1 - self.probs) * self.log_prob(_C.zeros_like(self.probs)))


def _eps(t):
    return {_C.float64: 2.220446049250313e-16, _C.float16: 0.0009765625,
            _C.bfloat16: 0.0078125}.get(t.dtype, 1.1920928955078125e-07)


def _broadcast_shape(a, b):
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def _softplus(x):
    return x.softplus()


def kl_divergence(p, q):
    """KL(p || q) for two distributions of the same kind (Normal, Categorical,
    Bernoulli, Uniform)."""
    if isinstance(p, Normal) and isinstance(q, Normal):
        var_ratio = (p.scale / q.scale).square()
        t1 = ((p.loc - q.loc) / q.scale).square()
        return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())
    if isinstance(p, Categorical) and isinstance(q, Categorical):
        t = p.probs * (p.logits - q.logits)
        t = _C.where(q.probs == 0, _C.full_like(t, math.inf), t)
        t = _C.where(p.probs == 0, _C.zeros_like(t), t)
        return t.sum(-1)
    if isinstance(p, Bernoulli) and isinstance(q, Bernoulli):
        # PyTorch's: inf where q cannot give what p can, 0 where p cannot
        t1 = p.probs * (_softplus(-q.logits) - _softplus(-p.logits))
        t1 = _C.where(q.probs == 0, _C.full_like(t1, math.inf), t1)
        t1 = _C.where(p.probs == 0, _C.zeros_like(t1), t1)
        t2 = (1 - p.probs) * (_softplus(q.logits) - _softplus(p.logits))
        t2 = _C.where(q.probs == 1, _C.full_like(t2, math.inf), t2)
        t2 = _C.where(p.probs == 1, _C.zeros_like(t2), t2)
        return t1 + t2
    if isinstance(p, Uniform) and isinstance(q, Uniform):
        inside = (q.low <= p.low).logical_and(p.high <= q.high)
        r = ((q.high - q.low) / (p.high - p.low)).log()
        return _C.where(inside, r, _C.full_like(r, math.inf))
    raise NotImplementedError(f"kl_divergence({type(p).__name__}, {type(q).__name__})")
