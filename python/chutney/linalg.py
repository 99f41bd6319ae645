"""torch.linalg: norms as compositions of the library's ops (they
differentiate like the rest); inv, solve and det computed by LAPACK through
NumPy on the host, with their gradients written in the library's ops
(autograd.Function, so second derivatives work too); cholesky, qr, svd,
svdvals, eigh and eigvalsh by NumPy, values only: a call that would need
their gradient raises instead of returning a result that would not
differentiate. CPU tensors (others are copied to the CPU and back).
"""

import math

from chutney import _C
from chutney.autograd import Function, is_grad_enabled

Tensor = _C.Tensor


def _np(t):
    return t.detach().cpu().contiguous().numpy()


def _back(a, like):
    t = _C.from_numpy(a.copy()).to(like.dtype)
    return t.to(like.device) if str(like.device) != "cpu" else t


def _lapack(fn, what):
    import numpy
    try:
        return fn()
    except numpy.linalg.LinAlgError as e:
        raise RuntimeError(f"linalg.{what}: {e}") from None


def _square(A, what):
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.{what}: A must be batches of square matrices, but they are "
                           f"{tuple(A.shape[-2:]) if A.dim() >= 2 else tuple(A.shape)} matrices")
    if not A.is_floating_point():
        raise RuntimeError(f"linalg.{what}: Expected a floating point tensor as input. Got "
                           f"{A.dtype}")


def _mT(t):
    return t.transpose(-2, -1)


# ---- norms ----

def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """(sum |x|^ord)^(1/ord) over dim (all of x by default); ord inf, -inf,
    0 (the count of non-zeros) too."""
    if dtype is not None:
        x = x.to(dtype)
    if not x.is_floating_point():
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point tensor as input. Got "
                           f"{x.dtype}")
    if dim is None:
        if keepdim:
            return vector_norm(x.reshape(-1), ord, 0).reshape((1,) * x.dim())
        x, dim = x.reshape(-1), 0
    a = x.abs()
    if ord == math.inf:
        return a.amax(dim=dim, keepdim=keepdim)
    if ord == -math.inf:
        return a.amin(dim=dim, keepdim=keepdim)
    if ord == 0:
        return (a != 0).to(x.dtype).sum(dim=dim, keepdim=keepdim)
    if ord == 1:
        return a.sum(dim=dim, keepdim=keepdim)
    if ord == 2:
        return x.norm(2, dim, keepdim=keepdim)
    return _PNorm.apply(x, float(ord), dim if isinstance(dim, int) else tuple(dim), keepdim)


class _PNorm(Function):
    """(sum |x|^p)^(1/p) with PyTorch's gradient, 0 where x or the norm is 0
    (the composition's would be NaN there)."""

    @staticmethod
    def forward(ctx, x, p, dim, keepdim):
        ctx.save_for_backward(x)
        ctx.p, ctx.dim, ctx.keepdim = p, dim, keepdim
        return _pnorm_value(x, p, dim, keepdim)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        p, dim, keepdim = ctx.p, ctx.dim, ctx.keepdim
        n = _pnorm_value(x, p, dim, True)
        if not keepdim:
            g = g.unsqueeze(dim) if isinstance(dim, int) else _unsqueeze_all(g, dim, x.dim())
        a = x.abs()
        safe_a = _C.where(a == 0, _C.ones_like(a), a)
        safe_n = _C.where(n == 0, _C.ones_like(n), n)
        d = x.sign() * safe_a.pow(p - 1) * safe_n.pow(1 - p)
        zero = (a == 0).logical_or((n == 0).expand_as(a))
        return _C.where(zero, _C.zeros_like(x), d * g), None, None, None


def _unsqueeze_all(t, dims, ndim):
    for d in sorted(d % ndim for d in dims):
        t = t.unsqueeze(d)
    return t


def _pnorm_value(x, p, dim, keepdim):
    a = x.abs()
    if p < 0:  # a zero entry makes the norm 0
        has0 = (a == 0).any(dim=dim, keepdim=keepdim)
        safe = _C.where(a == 0, _C.ones_like(a), a)
        v = safe.pow(p).sum(dim=dim, keepdim=keepdim).pow(1.0 / p)
        return _C.where(has0, _C.zeros_like(v), v)
    return a.pow(p).sum(dim=dim, keepdim=keepdim).pow(1.0 / p)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002
    """'fro', 'nuc', 1, -1, inf, -inf, 2, -2 over the matrices of dims."""
    if dtype is not None:
        A = A.to(dtype)
    d0, d1 = (d % A.dim() for d in dim)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in (1, -1, math.inf, -math.inf):
        # 1: the largest column sum; inf: the largest row sum
        summed = A.abs().sum(dim=d0 if ord in (1, -1) else d1, keepdim=True)
        other = d1 if ord in (1, -1) else d0
        r = summed.amax(dim=other, keepdim=True) if ord > 0 else summed.amin(dim=other,
                                                                                keepdim=True)
        return r if keepdim else r.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    if ord in ("nuc", 2, -2):
        moved = A.movedim((d0, d1), (-2, -1))
        s = svdvals(moved)
        r = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
        if keepdim:
            r = r.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1))
        return r
    raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    if isinstance(dim, int):
        dim = (dim,)
    if ord is None:
        return vector_norm(A, 2, dim, keepdim, dtype=dtype)
    if isinstance(ord, str) or (dim is not None and len(dim) == 2) or \
            (dim is None and A.dim() == 2):
        return matrix_norm(A, ord, dim if dim is not None else (-2, -1), keepdim, dtype=dtype)
    return vector_norm(A, ord, dim, keepdim, dtype=dtype)


def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along dim."""
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3")
    a = [input.narrow(dim, i, 1) for i in range(3)]
    b = [other.narrow(dim, i, 1) for i in range(3)]
    return _C.cat([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                   a[0] * b[1] - a[1] * b[0]], dim)


# ---- inv, solve, det: LAPACK forward, gradients in the library's ops ----

# The backward passes compute their factors again from the saved inputs
# through these same functions, rather than reusing the forward's result:
# that keeps them recorded, so create_graph gives second derivatives.

class _Inv(Function):
    @staticmethod
    def forward(ctx, A):
        import numpy
        ctx.save_for_backward(A)
        return _back(_lapack(lambda: numpy.linalg.inv(_np(A)), "inv"), A)

    @staticmethod
    def backward(ctx, g):
        (A,) = ctx.saved_tensors
        inv_a = inv(A)
        return -(_mT(inv_a).matmul(g).matmul(_mT(inv_a)))


def _sum_to(t, shape):
    """t summed down to shape (the broadcast's leading axes, and axes of 1)."""
    while t.dim() > len(shape):
        t = t.sum(dim=0)
    for i, n in enumerate(shape):
        if n == 1 and t.shape[i] != 1:
            t = t.sum(dim=i, keepdim=True)
    return t


def _is_vector_rhs(A, B):
    # PyTorch's rule: B is a vector when 1-d, or (batch..., n) against A's (batch..., n, n)
    return B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


class _Solve(Function):
    @staticmethod
    def forward(ctx, A, B):
        import numpy
        a, b = _np(A), _np(B)
        vec = _is_vector_rhs(A, B)
        bb = b[..., None] if vec else b
        batch = numpy.broadcast_shapes(a.shape[:-2], bb.shape[:-2])
        a = numpy.broadcast_to(a, batch + a.shape[-2:])
        bb = numpy.broadcast_to(bb, batch + bb.shape[-2:])
        x = _lapack(lambda: numpy.linalg.solve(a, bb), "solve")
        ctx.save_for_backward(A, B)
        ctx.vec = vec
        return _back(x[..., 0] if vec else x, B)

    @staticmethod
    def backward(ctx, g):
        A, B = ctx.saved_tensors
        X = solve(A, B)
        At = _mT(A)
        if ctx.vec:
            gB = solve(At, g.unsqueeze(-1) if g.dim() > 1 else g)
            gB = gB.squeeze(-1) if g.dim() > 1 and gB.dim() == g.dim() + 1 else gB
            gA = -(gB.unsqueeze(-1) * X.unsqueeze(-2))
        else:
            gB = solve(At, g)
            gA = -gB.matmul(_mT(X))
        return _sum_to(gA, tuple(A.shape)), _sum_to(gB, tuple(B.shape))


class _Det(Function):
    @staticmethod
    def forward(ctx, A):
        import numpy
        ctx.save_for_backward(A)
        return _back(numpy.asarray(numpy.linalg.det(_np(A))), A)

    @staticmethod
    def backward(ctx, g):
        import numpy
        (A,) = ctx.saved_tensors
        try:
            # d det / dA = det * A^-T (A invertible): recorded, so it differentiates again
            return (g * det(A)).unsqueeze(-1).unsqueeze(-1) * _mT(inv(A))
        except RuntimeError:
            pass
        # singular: the cofactor matrix from the SVD (A = U S V^T:
        # adj(A) = det(U V^T) V diag(prod of the other s) U^T), no second order
        a = _np(A).astype(numpy.float64)
        u, sv, vh = numpy.linalg.svd(a)
        n = sv.shape[-1]
        others = numpy.stack([numpy.prod(numpy.delete(sv, i, axis=-1), axis=-1)
                              for i in range(n)], -1)
        sign = numpy.linalg.det(u) * numpy.linalg.det(vh)
        adj = sign[..., None, None] * (numpy.swapaxes(vh, -1, -2) * others[..., None, :]) \
            @ numpy.swapaxes(u, -1, -2)
        return g.unsqueeze(-1).unsqueeze(-1) * _back(numpy.swapaxes(adj, -1, -2), A)


def inv(A):
    _square(A, "inv")
    return _Inv.apply(A)


def solve(A, B, *, left=True):
    """X with A X = B (B a matrix, or a vector when its rank is A's minus 1)."""
    _square(A, "solve")
    if not left:
        return _mT(solve(_mT(A), _mT(B)))
    return _Solve.apply(A, B)


def det(A):
    _square(A, "det")
    return _Det.apply(A)


def slogdet(A):
    """(sign, log|det|), values only (no gradient)."""
    import numpy
    _square(A, "slogdet")
    _no_grad_needed("slogdet", A)
    s, ld = numpy.linalg.slogdet(_np(A))
    return _back(numpy.asarray(s), A), _back(numpy.asarray(ld), A)


# ---- decompositions: values only ----

def _no_grad_needed(what, *ts):
    for t in ts:
        if isinstance(t, Tensor) and not t.is_floating_point():
            raise RuntimeError(f"linalg.{what}: Expected a floating point tensor as input. Got "
                               f"{t.dtype}")
    if is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad for t in ts):
        raise NotImplementedError(f"linalg.{what}: its gradient is not implemented; call it "
                                  "under chutney.no_grad() or on a detached tensor")


def cholesky(A, *, upper=False):
    import numpy
    _square(A, "cholesky")
    _no_grad_needed("cholesky", A)
    L = _lapack(lambda: numpy.linalg.cholesky(_np(A)), "cholesky")
    return _back(numpy.swapaxes(L, -1, -2).conj() if upper else L, A)


def qr(A, mode="reduced"):
    import numpy
    _no_grad_needed("qr", A)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}'")
    q, r = numpy.linalg.qr(_np(A), mode="complete" if mode == "complete" else "reduced")
    return (_C.empty(0, dtype=A.dtype) if mode == "r" else _back(q, A)), _back(r, A)


def svd(A, full_matrices=True):
    import numpy
    _no_grad_needed("svd", A)
    u, s, vh = _lapack(lambda: numpy.linalg.svd(_np(A), full_matrices=full_matrices), "svd")
    return _back(u, A), _back(s, A), _back(vh, A)


def svdvals(A):
    import numpy
    _no_grad_needed("svdvals", A)
    return _back(_lapack(lambda: numpy.linalg.svd(_np(A), compute_uv=False), "svdvals"), A)


def eigh(A, UPLO="L"):
    import numpy
    _square(A, "eigh")
    _no_grad_needed("eigh", A)
    w, v = _lapack(lambda: numpy.linalg.eigh(_np(A), UPLO=UPLO), "eigh")
    return _back(w, A), _back(v, A)


def eigvalsh(A, UPLO="L"):
    import numpy
    _square(A, "eigvalsh")
    _no_grad_needed("eigvalsh", A)
    return _back(_lapack(lambda: numpy.linalg.eigvalsh(_np(A), UPLO=UPLO), "eigvalsh"), A)


def pinv(A, *, hermitian=False):
    import numpy
    _no_grad_needed("pinv", A)
    return _back(numpy.linalg.pinv(_np(A), hermitian=hermitian), A)


def matrix_rank(A, *, hermitian=False):
    import numpy
    return _C.tensor(numpy.linalg.matrix_rank(_np(A), hermitian=hermitian)).to(_C.int64)
