"""torch.special: the special functions under their SciPy-style names.

Most are other names of chutney's functions; erfc keeps its relative
precision in the tail (a continued fraction past 3, in float64), and i0 /
i0e are the Abramowitz & Stegun polynomial fits (about 1e-7 relative)."""

import math

from chutney import _C
from chutney import _special
from chutney.nn import functional as _F

__all__ = ["expit", "logit", "erf", "erfc", "erfcx", "erfinv", "gammaln", "digamma", "psi",
           "polygamma", "multigammaln", "ndtr", "ndtri", "log_ndtr", "xlogy", "xlog1py", "entr",
           "sinc", "log1p", "expm1", "exp2", "logsumexp", "softmax", "log_softmax", "round",
           "i0", "i0e", "gammainc", "gammaincc"]


def _f64(x):
    x = x if isinstance(x, _C.Tensor) else _C.tensor(x)
    dt = x.dtype if x.is_floating_point() else _C.float32
    return x.to(_C.float64), dt


def expit(input):
    return input.sigmoid()


def logit(input, eps=None):
    return input.logit(eps) if eps is not None else input.logit()


def erf(input):
    return input.erf()


def erfc(input):
    """1 - erf(x), its relative precision kept for large x."""
    x, dt = _f64(input)
    big = x >= 3
    tail = _special._erfc_cf(_C.where(big, x, _C.full_like(x, 3.0)))
    return _C.where(big, tail, 1 - x.erf()).to(dt)


def erfcx(input):
    """exp(x^2) erfc(x)."""
    x, dt = _f64(input)
    big = x >= 3
    xs = _C.where(big, x, _C.full_like(x, 3.0))
    f = xs
    for k in range(60, 0, -1):  # the continued fraction without its exp(-x^2)
        f = xs + (k / 2) / f
    tail = 1 / (f * math.sqrt(math.pi))
    xn = _C.where(big, _C.zeros_like(x), x)  # exp(x^2) overflows where not taken
    near = (xn * xn).exp() * (1 - xn.erf())
    return _C.where(big, tail, near).to(dt)


def erfinv(input):
    return _special.erfinv(input)


def gammaln(input):
    return input.lgamma()


def digamma(input):
    return input.digamma()


psi = digamma


def polygamma(n, input):
    return input.polygamma(n)


def multigammaln(input, p):
    return input.mvlgamma(p)


def ndtr(input):
    """The standard normal CDF."""
    return erfc(-input * (1 / math.sqrt(2))) * 0.5


def ndtri(input):
    """The standard normal quantile, computed in float64 (2p - 1 loses p
    below float64's epsilon: -inf there)."""
    p, dt = _f64(input)
    return (erfinv(2 * p - 1) * math.sqrt(2)).to(dt)


def log_ndtr(input):
    """log ndtr(x): from the upper tail above 0, where ndtr(x) rounds to 1;
    below -20 from the asymptotic series of the lower tail (ndtr itself
    underflows before -38). Each branch gets a safe argument where it is
    not taken, so no infinity reaches a gradient."""
    x, dt = _f64(input)
    pos = x > 0
    far = x < -20
    xp = _C.where(pos, x, _C.ones_like(x))
    upper = (-(erfc(xp * (1 / math.sqrt(2))) * 0.5)).log1p()
    xm = _C.where(pos | far, _C.full_like(x, -1.0), x)
    middle = ndtr(xm).log()
    xf = _C.where(far, x, _C.full_like(x, -30.0))
    z = 1 / (xf * xf)
    # log(phi(x) / -x) + log(1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8)
    series = 1 + z * (-1 + z * (3 + z * (-15 + z * 105)))
    tail = -0.5 * xf * xf - (-xf).log() - 0.5 * math.log(2 * math.pi) + series.log()
    return _C.where(pos, upper, _C.where(far, tail, middle)).to(dt)


def xlogy(input, other):
    return _C.xlogy(input, other) if hasattr(_C, "xlogy") else input.xlogy(other)


def xlog1py(input, other):
    """input * log1p(other), 0 where input is 0 (unless other is NaN). The
    slope in input is log1p(other) there too (0 where other is -1 or less,
    or inf), as PyTorch's."""
    x = input if isinstance(input, _C.Tensor) else _C.tensor(input)
    y = other if isinstance(other, _C.Tensor) else _C.tensor(other, dtype=x.dtype)
    safe = _C.where((x == 0) & ((y <= -1) | y.isinf()), _C.zeros_like(y), y)
    prod = x * safe.log1p()
    return _C.where(y != y, y * 1.0, prod)


def entr(input):
    """-x log x (0 at 0, -inf below 0, NaN at NaN); the slope -(log x + 1),
    +inf at 0 as PyTorch's."""
    x = input
    pos = x > 0
    safe = _C.where(pos, x, _C.ones_like(x))
    val = -x * safe.log()
    # at 0: value 0, slope +inf (sqrt's at +0; x + 0.0 turns -0 into +0)
    at0 = (x + 0.0).sqrt() if x.requires_grad else _C.zeros_like(x)
    out = _C.where(pos, val, _C.where(x == 0, at0, _C.full_like(x, -math.inf)))
    return _C.where(x != x, x, out)


def sinc(input):
    return input.sinc()


def log1p(input):
    return input.log1p()


def expm1(input):
    return input.expm1()


def exp2(input):
    return input.exp2()


def logsumexp(input, dim, keepdim=False):
    return input.logsumexp(dim, keepdim)


def softmax(input, dim, dtype=None):
    return _F.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, dtype=None):
    return _F.log_softmax(input, dim, dtype=dtype)


def round(input, decimals=0):  # noqa: A001 (torch's name)
    if decimals == 0:
        return input.round()
    k = 10.0 ** decimals
    return (input * k).round() / k


# Abramowitz & Stegun 9.8.1 and 9.8.2: I0 on |x| <= 3.75 in (x/3.75)^2, and
# sqrt(|x|) e^-|x| I0(x) beyond it in 3.75/|x|.
_I0_SMALL = (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813)
_I0_LARGE = (0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706,
             0.02635537, -0.01647633, 0.00392377)


def _poly(coeffs, t):
    acc = _C.full_like(t, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = acc * t + c
    return acc


def _i0_parts(x):
    a = x.abs()
    small = a <= 3.75
    t_small = (_C.where(small, x, _C.zeros_like(x)) / 3.75) ** 2
    a_big = _C.where(small, _C.full_like(a, 3.75), a)
    # e^-|x| I0(x), both branches
    scaled_small = _poly(_I0_SMALL, t_small) * (-a).exp()
    scaled_big = _poly(_I0_LARGE, 3.75 / a_big) / a_big.sqrt()
    return small, a, scaled_small, scaled_big


def i0(input):
    """The modified Bessel function of the first kind, order 0."""
    x, dt = _f64(input)
    small, a, s_small, s_big = _i0_parts(x)
    return _C.where(small, s_small * a.exp(), s_big * a.exp()).to(dt)


def i0e(input):
    """e^-|x| i0(x)."""
    x, dt = _f64(input)
    small, _, s_small, s_big = _i0_parts(x)
    return _C.where(small, s_small, s_big).to(dt)


def gammainc(input, other):
    raise NotImplementedError("chutney.special.gammainc (the regularised incomplete gamma "
                              "function) is not implemented")


def gammaincc(input, other):
    raise NotImplementedError("chutney.special.gammaincc (the regularised incomplete gamma "
                              "function) is not implemented")
