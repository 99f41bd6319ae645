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
    if dim is None:
        x, dim = x.reshape(-1), 0
        if keepdim:
            raise NotImplementedError("vector_norm: keepdim with dim=None")
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
    return a.pow(ord).sum(dim=dim, keepdim=keepdim).pow(1.0 / ord)


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


class _Solve(Function):
    @staticmethod
    def forward(ctx, A, B):
        import numpy
        a, b = _np(A), _np(B)
        vec = b.ndim == a.ndim - 1
        x = _lapack(lambda: numpy.linalg.solve(a, b[..., None] if vec else b), "solve")
        ctx.save_for_backward(A, B)
        ctx.vec = vec
        return _back(x[..., 0] if vec else x, B)

    @staticmethod
    def backward(ctx, g):
        A, B = ctx.saved_tensors
        X = solve(A, B)
        gB = solve(_mT(A), g)  # A^-T g
        if ctx.vec:
            gA = -(gB.unsqueeze(-1) * X.unsqueeze(-2))
        else:
            gA = -gB.matmul(_mT(X))
        return gA, gB


class _Det(Function):
    @staticmethod
    def forward(ctx, A):
        import numpy
        ctx.save_for_backward(A)
        return _back(numpy.asarray(numpy.linalg.det(_np(A))), A)

    @staticmethod
    def backward(ctx, g):
        (A,) = ctx.saved_tensors
        d = det(A)
        # d det / dA = det * A^-T (A invertible)
        return (g * d).unsqueeze(-1).unsqueeze(-1) * _mT(inv(A))


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
