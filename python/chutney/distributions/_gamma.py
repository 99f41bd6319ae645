"""Standard-gamma draws (Marsaglia and Tsang's rejection method on the
library's normal and uniform draws) with an implicit reparameterisation
gradient: for x = F^-1(u; a), dx/da = -(dF/da) / (dF/dx), F the regularised
lower incomplete gamma function. dF/da is summed from the series
F = sum_n exp((a+n) log x - x - lgamma(a+n+1)) differentiated term by term,
which is exact to float64 roundoff, where PyTorch uses fitted approximations
(the two agree to their approximation's accuracy). Also a Cholesky
factorisation whose gradient is written in the library's ops (linalg's has
none)."""

import numpy

from chutney import _C
from chutney.autograd import Function, no_grad


def _draw_standard_gamma(alpha):
    """float64 numpy draws of Gamma(alpha, 1), one per element of alpha."""
    a = numpy.asarray(alpha, dtype=numpy.float64).ravel()
    boost = a < 1
    # Gamma(a) = Gamma(a + 1) * U^(1/a) for a < 1 (the method needs a >= 1)
    d = numpy.where(boost, a + 1, a) - 1.0 / 3
    c = 1 / numpy.sqrt(9 * d)
    out = numpy.empty_like(a)
    pending = numpy.arange(a.size)
    while pending.size:
        z = _C.randn(pending.size, dtype=_C.float64).numpy()
        u = _C.rand(pending.size, dtype=_C.float64).numpy()
        dp, cp = d[pending], c[pending]
        v = (1 + cp * z) ** 3
        with numpy.errstate(invalid="ignore", divide="ignore"):
            ok = (v > 0) & (numpy.log(u) < 0.5 * z * z + dp - dp * v + dp * numpy.log(v))
        out[pending[ok]] = (dp * v)[ok]
        pending = pending[~ok]
    if boost.any():
        u = _C.rand(int(boost.sum()), dtype=_C.float64).numpy()
        u = numpy.maximum(u, numpy.finfo(numpy.float64).tiny)
        with numpy.errstate(divide="ignore", under="ignore"):
            out[boost] = numpy.exp(numpy.log(out[boost]) + numpy.log(u) / a[boost])
    out = numpy.maximum(out, numpy.finfo(numpy.float64).tiny)  # PyTorch keeps draws > 0 too
    return out.reshape(numpy.shape(alpha))


def _standard_gamma_dx_da(x, a):
    """dx/da along the inverse CDF of Gamma(a, 1), elementwise (numpy float64)."""
    x = numpy.maximum(numpy.asarray(x, dtype=numpy.float64), numpy.finfo(numpy.float64).tiny)
    a = numpy.asarray(a, dtype=numpy.float64)
    x, a = numpy.broadcast_arrays(x, a)
    shape = x.shape
    x, a = x.ravel(), a.ravel()
    at = _C.from_numpy(a + 1)
    with no_grad():
        lg1 = at.lgamma().numpy()
        psi = at.digamma().numpy().copy()
    logx = numpy.log(x)
    logt = a * logx - x - lg1
    dF = numpy.zeros_like(x)
    # the terms rise while a + n < x, then fall geometrically: enough of them
    # to pass the peak and then a tail below float64's resolution
    n_terms = int(numpy.ceil(numpy.max(numpy.maximum(x - a, 0) + 12 * numpy.sqrt(x + 1)) + 40)) \
        if x.size else 0
    for n in range(n_terms):
        if n:
            logt = logt + logx - numpy.log(a + n)
            psi = psi + 1 / (a + n)
        dF += numpy.exp(logt) * (logx - psi)
    lg = lg1 - numpy.log(a)  # lgamma(a)
    log_pdf = (a - 1) * logx - x - lg
    return (-dF * numpy.exp(-log_pdf)).reshape(shape)


class _StandardGamma(Function):
    @staticmethod
    def forward(ctx, alpha):
        a = alpha.detach().cpu().to(_C.float64).numpy()
        x = _draw_standard_gamma(a)
        ctx.dxda = _standard_gamma_dx_da(x, a) if ctx.needs_input_grad[0] else None
        out = _C.from_numpy(x).to(alpha.dtype)
        return out.to(alpha.device) if str(alpha.device) != "cpu" else out

    @staticmethod
    def backward(ctx, g):
        d = _C.from_numpy(ctx.dxda).to(g.dtype)
        return g * (d.to(g.device) if str(g.device) != "cpu" else d)


def standard_gamma(alpha):
    """Gamma(alpha, 1) draws of alpha's shape, differentiable in alpha."""
    return _StandardGamma.apply(alpha.contiguous())


def _mT(t):
    return t.transpose(-2, -1)


class _Cholesky(Function):
    @staticmethod
    def forward(ctx, A):
        L = _C.from_numpy(numpy.linalg.cholesky(A.detach().cpu().to(_C.float64).numpy()))
        L = L.to(A.dtype)
        L = L.to(A.device) if str(A.device) != "cpu" else L
        ctx.save_for_backward(L)
        return L

    @staticmethod
    def backward(ctx, gL):
        # A = L L^T: with P = tril(L^T gL), halved on the diagonal,
        # gA = sym(L^-T P L^-1) (the lower-triangle-only form, symmetrised as PyTorch)
        (L,) = ctx.saved_tensors
        n = L.shape[-1]
        P = _mT(L).matmul(gL).tril()
        P = P - 0.5 * P.diagonal(dim1=-2, dim2=-1).diag_embed()
        eye = _C.eye(n, dtype=L.dtype, device=L.device)
        from chutney import linalg
        Linv = linalg.solve(L, eye.expand(*L.shape))
        S = _mT(Linv).matmul(P).matmul(Linv)
        return 0.5 * (S + _mT(S))


def cholesky(A):
    from chutney import linalg
    if A.requires_grad:
        return _Cholesky.apply(A)
    with no_grad():
        return linalg.cholesky(A)
