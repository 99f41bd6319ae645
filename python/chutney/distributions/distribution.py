"""The Distribution base class (shapes, argument validation, expand) and the
small helpers the families share."""

from chutney import _C
from chutney.autograd import no_grad
from chutney.distributions import constraints

Tensor = _C.Tensor


def _size(shape):
    return _C.Size(tuple(shape)) if hasattr(_C, "Size") else tuple(shape)


def _dtype_of(args):
    from chutney import get_default_dtype
    for a in args:
        if isinstance(a, Tensor) and a.is_floating_point():
            return a.dtype, a.device
    for a in args:
        if isinstance(a, Tensor):
            return get_default_dtype(), a.device
    return get_default_dtype(), None


def broadcast_all(*values):
    """Tensors and numbers made tensors of one floating dtype and broadcast to
    one shape, as torch.distributions.utils.broadcast_all."""
    dtype, device = _dtype_of(values)
    ts = []
    for v in values:
        if isinstance(v, Tensor):
            ts.append(v if v.is_floating_point() else v.to(dtype))
        else:
            t = _C.tensor(float(v), dtype=dtype)
            ts.append(t.to(device) if device is not None and str(device) != "cpu" else t)
    shape = _broadcast_shape(*[tuple(t.shape) for t in ts])
    return tuple(t if tuple(t.shape) == shape else t.expand(*shape) for t in ts)


def _as_tensor(v, like):
    if isinstance(v, Tensor):
        return v
    t = _C.tensor(v, dtype=like.dtype)
    return t.to(like.device) if str(like.device) != "cpu" else t


def _broadcast_shape(*shapes):
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        s = (1,) * (n - len(s)) + tuple(s)
        for i, x in enumerate(s):
            if x != out[i] and 1 not in (x, out[i]):
                raise ValueError(f"shapes {shapes} do not broadcast")
            out[i] = max(x, out[i]) if x != 1 else out[i]
    return tuple(out)


def _sum_rightmost(t, n):
    return t.reshape(*t.shape[:t.dim() - n], -1).sum(-1) if n > 0 else t


def _eps(t):
    return {_C.float64: 2.220446049250313e-16, _C.float16: 0.0009765625,
            _C.bfloat16: 0.0078125}.get(t.dtype, 1.1920928955078125e-07)


def _tiny(t):
    return {_C.float64: 2.2250738585072014e-308, _C.float16: 6.103515625e-05,
            _C.bfloat16: 1.1754943508222875e-38}.get(t.dtype, 1.1754943508222875e-38)


def _clamp_probs(p):
    e = _eps(p)
    return p.clamp(e, 1 - e)


def probs_to_logits(probs, is_binary=False):
    p = _clamp_probs(probs)
    return p.log() - (-p).log1p() if is_binary else p.log()


def logits_to_probs(logits, is_binary=False):
    return logits.sigmoid() if is_binary else logits.softmax(-1)


def _uniform(shape, like, open_low=True):
    """U(0, 1) draws of like's dtype and device, kept off 0 (log of them is finite)."""
    u = _C.rand(*shape, dtype=like.dtype, device=like.device)
    return u.clamp(min=_tiny(like)) if open_low else u


def _normal(shape, like):
    return _C.randn(*shape, dtype=like.dtype, device=like.device)


class Distribution:
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__  # PyTorch's default: validation on unless python -O
    arg_constraints = {}
    support = None

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = _size(batch_shape)
        self._event_shape = _size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for name, constraint in self.arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if name not in self.__dict__:
                    continue  # another parametrisation was given (MultivariateNormal's)
                value = getattr(self, name)
                with no_grad():
                    valid = constraint.check(value)
                if not bool(valid.all()):
                    raise ValueError(
                        f"Expected parameter {name} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}")

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    def expand(self, batch_shape, _instance=None):
        """A view of this distribution with batch_shape; every parameter in
        _expand_params (name -> number of trailing event dims) is expanded."""
        batch_shape = tuple(batch_shape)
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new.__dict__.update(self.__dict__)
        for name, nev in self._expand_params().items():
            if name in self.__dict__ and isinstance(self.__dict__[name], Tensor):
                v = self.__dict__[name]
                tail = tuple(v.shape[v.dim() - nev:]) if nev else ()
                new.__dict__[name] = v.expand(*(batch_shape + tail))
        new._batch_shape = _size(batch_shape)
        return new

    def _expand_params(self):
        return {name: 0 for name in self.arg_constraints}

    def _extended_shape(self, sample_shape=()):
        if isinstance(sample_shape, int):
            sample_shape = (sample_shape,)
        return _size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def sample(self, sample_shape=()):
        with no_grad():
            if self.has_rsample:
                return self.rsample(sample_shape)
            return self._sample(sample_shape)

    def _sample(self, sample_shape):
        raise NotImplementedError

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no reparameterised samples "
                                  "(rsample); use sample()")

    def sample_n(self, n):
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def perplexity(self):
        return self.entropy().exp()

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self)} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def _validate_sample(self, value):
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        n = len(self._event_shape)
        if tuple(value.shape[value.dim() - n:] if n else ()) != tuple(self._event_shape) or \
                value.dim() < n:
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{tuple(value.shape)} vs {tuple(self._event_shape)}.")
        _broadcast_shape(tuple(value.shape), tuple(self._batch_shape) + tuple(self._event_shape))
        support = self.support
        if support is None or constraints.is_dependent(support):
            return
        with no_grad():
            ok = support.check(value)
        if not bool(ok.all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape "
                             f"{tuple(value.shape)}) to be within the support ({support!r}) of "
                             f"the distribution {self!r}, but found invalid values:\n{value}")

    def _check(self, value):
        """value made a tensor like the parameters, and checked when validating."""
        if self._validate_args:
            if not isinstance(value, Tensor):
                value = _as_tensor(value, self._like())
            self._validate_sample(value)
        return value if isinstance(value, Tensor) else _as_tensor(value, self._like())

    def _like(self):
        for name in self.arg_constraints:
            v = self.__dict__.get(name)
            if isinstance(v, Tensor):
                return v
        return _C.tensor(0.0)

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{k}: {self.__dict__[k] if self.__dict__[k].numel() == 1 else tuple(self.__dict__[k].shape)}"
                         for k in names if isinstance(self.__dict__[k], Tensor))
        return f"{type(self).__name__}({args})"


class ExponentialFamily(Distribution):
    pass
