"""torch.distributions.transforms: bijections y = f(x) with their inverse and
log|det dy/dx|, for TransformedDistribution. cache_size=1 keeps the last
(x, y) pair, so log_prob of a value just drawn uses the exact x (tanh's
inverse loses it near +-1)."""

import math

from chutney import _C
from chutney.distributions import constraints
from chutney.distributions.distribution import _as_tensor, _sum_rightmost

__all__ = ["Transform", "ComposeTransform", "AffineTransform", "ExpTransform",
           "SigmoidTransform", "TanhTransform", "PowerTransform", "SoftmaxTransform",
           "AbsTransform", "identity_transform"]


class Transform:
    bijective = False
    domain = constraints.real
    codomain = constraints.real
    sign = 1

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached = None
        self._inv = None

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._cache_size, new._cached = cache_size, None
        return new

    @property
    def event_dim(self):
        return self.domain.event_dim if self.domain.event_dim == self.codomain.event_dim else \
            max(self.domain.event_dim, self.codomain.event_dim)

    @property
    def inv(self):
        if self._inv is None:
            self._inv = _InverseTransform(self)
        return self._inv

    def __call__(self, x):
        if self._cache_size and self._cached is not None and self._cached[0] is x:
            return self._cached[1]
        y = self._call(x)
        if self._cache_size:
            self._cached = (x, y)
        return y

    def _inv_call(self, y):
        if self._cache_size and self._cached is not None and self._cached[1] is y:
            return self._cached[0]
        x = self._inverse(y)
        if self._cache_size:
            self._cached = (x, y)
        return x

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError(f"{type(self).__name__} has no inverse")

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    def __init__(self, transform):
        super().__init__(transform._cache_size)
        self._inv = transform

    @property
    def domain(self):
        return self._inv.codomain

    @property
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self):
        return self._inv.bijective

    @property
    def sign(self):
        return self._inv.sign

    @property
    def inv(self):
        return self._inv

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__


class ComposeTransform(Transform):
    def __init__(self, parts, cache_size=0):
        super().__init__(cache_size)
        self.parts = list(parts)

    @property
    def domain(self):
        if not self.parts:
            return constraints.real
        ed = self.parts[-1].codomain.event_dim
        for p in reversed(self.parts):
            ed = max(ed - p.codomain.event_dim + p.domain.event_dim, p.domain.event_dim)
        d = self.parts[0].domain
        return d if ed == d.event_dim else constraints.independent(d, ed - d.event_dim)

    @property
    def codomain(self):
        if not self.parts:
            return constraints.real
        ed = self.parts[0].domain.event_dim
        for p in self.parts:
            ed = max(ed + p.codomain.event_dim - p.domain.event_dim, p.codomain.event_dim)
        c = self.parts[-1].codomain
        return c if ed == c.event_dim else constraints.independent(c, ed - c.event_dim)

    @property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    @property
    def sign(self):
        s = 1
        for p in self.parts:
            s = s * p.sign
        return s

    @property
    def inv(self):
        return ComposeTransform([p.inv for p in reversed(self.parts)])

    def _call(self, x):
        for p in self.parts:
            x = p(x)
        return x

    def _inverse(self, y):
        for p in reversed(self.parts):
            y = p.inv(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return _C.zeros_like(x)
        xs = [x]
        for p in self.parts[:-1]:
            xs.append(p(xs[-1]))
        xs.append(y)
        total = 0
        event_dim = self.domain.event_dim
        for p, a, b in zip(self.parts, xs[:-1], xs[1:]):
            term = p.log_abs_det_jacobian(a, b)
            total = total + _sum_rightmost(term, event_dim - p.domain.event_dim)
            event_dim += p.codomain.event_dim - p.domain.event_dim
        return total

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__


identity_transform = ComposeTransform([])


class ExpTransform(Transform):
    bijective = True
    codomain = constraints.positive

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x

    def __eq__(self, other):
        return isinstance(other, ExpTransform)

    __hash__ = object.__hash__


class PowerTransform(Transform):
    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size)
        self.exponent = exponent

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def __eq__(self, other):
        return isinstance(other, PowerTransform) and bool(_eq(self.exponent, other.exponent))

    __hash__ = object.__hash__


class SigmoidTransform(Transform):
    bijective = True
    codomain = constraints.unit_interval

    def _call(self, x):
        e = 1.1920928955078125e-07 if x.dtype != _C.float64 else 2.220446049250313e-16
        return x.sigmoid().clamp(min=_tiny_of(x), max=1 - e)

    def _inverse(self, y):
        e = 1.1920928955078125e-07 if y.dtype != _C.float64 else 2.220446049250313e-16
        y = y.clamp(min=_tiny_of(y), max=1 - e)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -(-x).softplus() - x.softplus()

    def __eq__(self, other):
        return isinstance(other, SigmoidTransform)

    __hash__ = object.__hash__


class TanhTransform(Transform):
    """y = tanh(x); log|dy/dx| = log(1 - tanh(x)^2) = 2 (log 2 - x - softplus(-2x)),
    the form that stays finite for large |x|."""
    bijective = True
    codomain = constraints.interval(-1.0, 1.0)
    sign = 1

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return y.atanh()

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - (-2.0 * x).softplus())

    def __eq__(self, other):
        return isinstance(other, TanhTransform)

    __hash__ = object.__hash__


class AbsTransform(Transform):
    codomain = constraints.positive

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y

    def __eq__(self, other):
        return isinstance(other, AbsTransform)

    __hash__ = object.__hash__


class AffineTransform(Transform):
    """y = loc + scale * x; event_dim > 0 sums the log-Jacobian over that many
    rightmost axes."""
    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size)
        self.loc, self.scale = loc, scale
        self._event_dim = event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @property
    def domain(self):
        return constraints.real if self._event_dim == 0 else \
            constraints.independent(constraints.real, self._event_dim)

    codomain = domain

    @property
    def sign(self):
        if isinstance(self.scale, (int, float)):
            return 1 if self.scale > 0 else -1 if self.scale < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        s = self.scale
        if isinstance(s, (int, float)):
            r = _C.full_like(x, math.log(abs(s)))
        else:
            r = s.abs().log()
            shape = tuple(x.shape)
            if tuple(r.shape) != shape:
                r = r + _C.zeros_like(x)
        return _sum_rightmost(r, self._event_dim)

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        return bool(_eq(self.loc, other.loc)) and bool(_eq(self.scale, other.scale))

    __hash__ = object.__hash__


class SoftmaxTransform(Transform):
    """x -> softmax(x) over the last axis; not bijective (no log-Jacobian)."""
    codomain = constraints.simplex

    @property
    def domain(self):
        return constraints.real_vector

    def _call(self, x):
        return (x - x.amax(-1, keepdim=True)).exp() / \
            (x - x.amax(-1, keepdim=True)).exp().sum(-1, keepdim=True)

    def _inverse(self, y):
        return y.log()

    def __eq__(self, other):
        return isinstance(other, SoftmaxTransform)

    __hash__ = object.__hash__


def _eq(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if not isinstance(a, _C.Tensor):
        a = _as_tensor(a, b)
    if not isinstance(b, _C.Tensor):
        b = _as_tensor(b, a)
    return bool((a == b).all())


def _tiny_of(t):
    return 2.2250738585072014e-308 if t.dtype == _C.float64 else 1.1754943508222875e-38
