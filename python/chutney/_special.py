"""lgamma, digamma, polygamma and erfinv over the library's differentiable
ops, evaluated in float64 and returned in the input's floating dtype
(float32 for integer inputs, as PyTorch).

lgamma, digamma and polygamma are series (a shift by a recurrence up to an
argument where the asymptotic expansion is exact to float64, reflection
below 1/2), so autograd differentiates them like any composition: lgamma's
gradient is digamma's series, digamma's is trigamma's, and so on.
erfinv's value comes from Newton steps on erf; one last Newton step is
taken on the graph from a first-order estimate, which makes its first
three derivatives PyTorch's.
"""

import math

from chutney import _C
from chutney.autograd import no_grad

_SHIFT = 10  # the asymptotic series below is exact to float64 from z >= 10
# B_2k / (2k (2k - 1)) for Stirling's series of lgamma
_STIRLING = [1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156,
             -3617 / 122400]
_BERNOULLI = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510]


def _f64(x):
    if not isinstance(x, _C.Tensor):
        x = _C.tensor(x)
    return x.to(_C.float64), (x.dtype if x.is_floating_point() else _C.float32)


def _sinpi_abs_log(x):
    """log|sin(pi x)|, x reduced mod 2 first: pi * x loses the fraction of
    a large x."""
    r = x - (x * 0.5).round() * 2
    return (r * math.pi).sin().abs().log()


def _lgamma_pos(w):
    """log Gamma(w) for w >= 1/2."""
    z = w + _SHIFT
    acc = None
    for k in range(_SHIFT):
        t = (w + k).log()
        acc = t if acc is None else acc + t
    zi = z.reciprocal()
    zi2 = zi * zi
    series = None
    p = zi
    for c in _STIRLING:
        series = p * c if series is None else series + p * c
        p = p * zi2
    return (z - 0.5) * z.log() - z + 0.5 * math.log(2 * math.pi) + series - acc


def lgamma(input):
    x, dt = _f64(input)
    left = x < 0.5
    w = _C.where(left, 1 - x, x)
    # a NaN or inf must not reach the series (inf - inf); put it back after
    finite = (w == w).logical_and(w.abs() != math.inf)
    ws = _C.where(finite, w, _C.ones_like(w))
    lw = _lgamma_pos(ws)
    # the branch not taken must stay finite, or its gradient (0 * inf) is NaN
    pole = (x <= 0).logical_and(x == x.round())
    xr = _C.where(left.logical_and(pole.logical_not()), x, _C.full_like(x, 0.25))
    refl = math.log(math.pi) - _sinpi_abs_log(xr) - lw
    y = _C.where(left, refl, lw)
    y = _C.where(pole, _C.full_like(y, math.inf), y)
    y = _C.where(finite, y, x.abs())  # lgamma(+-inf) = inf, NaN stays
    return y.to(dt)


def _psi_pos(w):
    """digamma(w) for w >= 1/2."""
    z = w + _SHIFT
    acc = None
    for k in range(_SHIFT):
        t = (w + k).reciprocal()
        acc = t if acc is None else acc + t
    zi = z.reciprocal()
    zi2 = zi * zi
    series = None
    p = zi2
    for k, b in enumerate(_BERNOULLI, 1):
        term = p * (b / (2 * k))
        series = term if series is None else series + term
        p = p * zi2
    return z.log() - zi * 0.5 - series - acc


def digamma(input):
    """digamma; -inf at 0 and NaN at the negative integers (PyTorch >= 1.8)."""
    x, dt = _f64(input)
    left = x < 0.5
    w = _C.where(left, 1 - x, x)
    finite = (w == w).logical_and(w.abs() != math.inf)
    ws = _C.where(finite, w, _C.ones_like(w))
    pw = _psi_pos(ws)
    pole = (x <= 0).logical_and(x == x.round())
    xr = _C.where(left.logical_and(pole.logical_not()), x, _C.full_like(x, 0.25))
    r = xr - xr.round()  # tan has period pi: reduce first for large |x|
    refl = pw - math.pi / (r * math.pi).tan()
    y = _C.where(left, refl, pw)
    y = _C.where(pole, _C.full_like(y, math.nan), y)
    y = _C.where(x == 0, _C.full_like(y, -math.inf), y)
    y = _C.where(finite, y, _C.where(x == math.inf, x, _C.full_like(x, math.nan)))
    return y.to(dt)


def _polygamma_pos(n, z):
    """psi^(n)(z) for n >= 1 and z >= _SHIFT: the asymptotic series."""
    sign = -1.0 if n % 2 == 0 else 1.0
    zi = z.reciprocal()
    y = zi ** n * math.factorial(n - 1) + zi ** (n + 1) * (math.factorial(n) / 2)
    for k, b in enumerate(_BERNOULLI, 1):
        c = b * math.factorial(2 * k + n - 1) / math.factorial(2 * k)
        y = y + zi ** (2 * k + n) * c
    return y * sign


def polygamma(n, input):
    """The n-th derivative of digamma (n >= 0): a shift by the recurrence to
    arguments >= 10 (as many steps as the smallest element needs), then the
    asymptotic series; poles (non-positive integers) give inf or NaN."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n (got {n!r})")
    if n > 170:  # n! is beyond float64
        raise NotImplementedError(f"polygamma: n={n} is above 170 (n! overflows float64)")
    if n == 0:
        return digamma(input)
    x, dt = _f64(input)
    finite = (x == x).logical_and(x.abs() != math.inf)
    xs = _C.where(finite, x, _C.ones_like(x))
    with no_grad():
        lo = float(xs.amin()) if xs.numel() else 0.0
    steps = max(0, math.ceil(_SHIFT - lo))
    if steps > 100000:
        raise NotImplementedError("polygamma: arguments below -1e5 are not supported")
    sign = -1.0 if n % 2 == 0 else 1.0
    scale = sign * math.factorial(n)
    # psi^(n)(x) = psi^(n)(x + s) + (-1)^(n+1) n! sum_k 1/(x + k)^(n+1), each
    # element shifted by the same number of steps (the extra ones are exact)
    acc = None
    for k in range(steps):
        t = (xs + k).reciprocal() ** (n + 1)
        acc = t if acc is None else acc + t
    y = _polygamma_pos(n, xs + steps)
    if acc is not None:
        y = y + acc * scale
    pole = (x <= 0).logical_and(x == x.round())
    # at a pole: +inf for odd n, -inf for even n; at +inf 0 for n = 1 and
    # NaN above (PyTorch's)
    y = _C.where(pole, _C.full_like(y, math.inf if n % 2 else -math.inf), y)
    y = _C.where(finite, y, _C.where(x == math.inf, _C.full_like(x, 0.0 if n == 1 else math.nan),
                                     _C.full_like(x, math.nan)))
    return y.to(dt)


def mvlgamma(input, p):
    if not isinstance(p, int) or p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if p > 100000:
        raise NotImplementedError(f"mvlgamma: p={p} is too large (one lgamma a term)")
    # (PyTorch 1.13 no longer refuses elements <= (p - 1) / 2)
    acc = None
    for i in range(p):
        t = lgamma(input - i / 2)
        acc = t if acc is None else acc + t
    return acc + p * (p - 1) / 4 * math.log(math.pi)


def _erfinv_guess(y):
    """Giles' single-precision approximation ("Approximating the erfinv
    function", GPU Gems 2012), good to ~1e-7: the Newton steps do the rest."""
    w = -((1 - y) * (1 + y)).log()
    small = w < 5
    ws = w - 2.5
    p = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
              -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
        p = ws * p + c if isinstance(p, _C.Tensor) else ws * p + c
    wb = w.clamp(min=5).sqrt() - 3
    q = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
              -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):
        q = wb * q + c
    return _C.where(small, p, q) * y


def _erfc_cf(y, terms=60):
    """erfc(y) for y >= 3 by Laplace's continued fraction, evaluated from
    the bottom up."""
    f = y
    for k in range(terms, 0, -1):
        f = y + (k / 2) / f
    return (-(y * y)).exp() / (f * math.sqrt(math.pi))


def erfinv(input):
    x, dt = _f64(input)
    inside = x.abs() < 1
    xs = _C.where(inside, x, _C.zeros_like(x))
    half_sqrt_pi = math.sqrt(math.pi) / 2
    with no_grad():
        xd = xs.detach()
        y = _erfinv_guess(xd)
        # near +-1 erf rounds to +-1: Newton there on erfc (continued
        # fraction), whose value keeps its digits, against 1 - |x| (exact)
        tail = xd.abs() > 0.9999
        ya = _C.where(tail, y.abs(), _C.full_like(y, 3.0))
        # (on log erfc, nearly -y^2 there: the guess, made for float32's
        # range, is far off beyond it)
        lrest = _C.where(tail, 1 - xd.abs(), _C.full_like(xd, 1e-5)).log()
        for _ in range(3):  # Newton converges quadratically from 1e-7
            y = y - (y.erf() - xd) * half_sqrt_pi * (y * y).exp()
        for _ in range(8):
            e = _erfc_cf(ya)
            ya = ya + (e.log() - lrest) * e * half_sqrt_pi * (ya * ya).exp()
        y = _C.where(tail, ya * xd.sign(), y)
    # first-order estimate on the graph, then one Newton step on it (whose
    # value is y's): the result's derivatives agree with erfinv's to third order
    s = (y * y).exp() * half_sqrt_pi
    y1 = y + (xs - xd) * s
    out = y1 - ((y1.erf() - y.erf()) - (xs - xd)) * (y1 * y1).exp() * half_sqrt_pi
    edge = _C.where(x == 1, _C.full_like(x, math.inf),
                    _C.where(x == -1, _C.full_like(x, -math.inf), _C.full_like(x, math.nan)))
    return _C.where(inside, out, edge).to(dt)
