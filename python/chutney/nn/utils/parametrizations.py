"""torch.nn.utils.parametrizations: weight_norm, spectral_norm and
orthogonal as parametrizations (nn.utils.parametrize)."""

import math

from chutney import _C, linalg
from chutney.autograd import no_grad
from chutney.nn.modules import Module
from chutney.nn.utils import parametrize
from chutney.nn.utils.spectral_norm import _is_transposed_conv, _normalize, _to_matrix
from chutney.nn.utils.weight_norm import _weight_norm, norm_except_dim

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# ---- weight_norm ----

class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """module.name = original0 * original1 / ||original1|| (g and v of the
    hook-based weight_norm, under parametrizations.name). Returns the
    module."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


# ---- spectral_norm ----

class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with no_grad():
                mat = _to_matrix(weight.detach(), self.dim)
                h, w = mat.shape
                opts = dict(dtype=weight.dtype, device=weight.device)
                self.register_buffer("_u", _normalize(_C.randn(h).to(**opts), eps))
                self.register_buffer("_v", _normalize(_C.randn(w).to(**opts), eps))
            # A good estimate from the start, as PyTorch's (15 steps).
            self._power_method(mat, 15)

    def _power_method(self, mat, n):
        # u first, then v: the order of this API (the hook-based one does v
        # first). In place, so the buffers carry the estimate on.
        with no_grad():
            m = mat.detach()
            for _ in range(n):
                self._u.copy_(_normalize(m.matmul(self._v), self.eps))
                self._v.copy_(_normalize(m.t().matmul(self._u), self.eps))

    def forward(self, weight):
        if weight.dim() == 1:
            return weight / weight.norm(2).clamp(min=self.eps)
        mat = _to_matrix(weight, self.dim)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        return weight / u.dot(mat.matmul(v))

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """module.name divided by its largest singular value, estimated by power
    iteration (buffers _u, _v of parametrizations.name[0]; n_power_iterations
    steps per read in training mode). Returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, _C.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if _is_transposed_conv(module) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


# ---- orthogonal ----

def _mT(x):
    return x.transpose(-2, -1)


def _eye_like(x, n, k):
    return _C.eye(n, k, dtype=x.dtype, device=x.device)


def _matrix_exp(a):
    """exp(a) by scaling and squaring a Taylor series, from differentiable
    ops (so gradients come from autograd)."""
    n = a.shape[-1]
    with no_grad():
        size = float(a.detach().abs().sum(-1).max())  # the infinity norm
    s = max(0, int(math.ceil(math.log2(size))) + 1) if size > 0.5 else 0
    x = a / (2.0 ** s)
    eye = _eye_like(a, n, n)
    term, out = eye, eye
    for i in range(1, 19 if a.dtype == _C.float64 else 13):
        term = term.matmul(x) / i
        out = out + term
    for _ in range(s):
        out = out.matmul(out)
    return out


def _householder_product(a, tau):
    """The first k columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T with
    v_i the column i of a below the diagonal and 1 on it (LAPACK's orgqr)."""
    n, k = a.shape[-2], a.shape[-1]
    q = _eye_like(a, n, k)
    eye = _eye_like(a, n, k)
    for i in reversed(range(k)):
        v = a.narrow(-1, i, 1) + eye.narrow(-1, i, 1)  # a is zero on and above row i
        t = tau.narrow(-1, i, 1).unsqueeze(-1)
        q = q - (t * v).matmul(_mT(v).matmul(q))
    return q


def _make_orthogonal(a):
    q, r = linalg.qr(a.detach())
    return q * r.diagonal(0, -2, -1).sign().unsqueeze(-2)


def _is_orthogonal(q):
    n, k = q.shape[-2], q.shape[-1]
    eye = _eye_like(q, k, k)
    eps = 10.0 * n * (1.2e-7 if q.dtype != _C.float64 else 2.3e-16)
    return bool((_mT(q).matmul(q) - eye).abs().max() <= eps)


class _Orthogonal(Module):
    _maps = ("matrix_exp", "cayley", "householder")

    def __init__(self, weight, orthogonal_map, use_trivialization=True):
        super().__init__()
        if orthogonal_map not in self._maps:
            raise ValueError(f'orthogonal_map has to be one of "matrix_exp", "cayley", '
                             f'"householder". Got: {orthogonal_map}')
        if not use_trivialization:
            raise NotImplementedError("orthogonal(use_trivialization=False) is not supported "
                                      "(use the default, use_trivialization=True)")
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        self.register_buffer("base", None)

    def forward(self, x):
        n, k = x.shape[-2], x.shape[-1]
        transposed = n < k
        if transposed:
            x = _mT(x)
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            x = x.tril()
            if n != k:
                x = _C.cat([x, _C.zeros(*x.shape[:-1], n - k, dtype=x.dtype,
                                        device=x.device)], -1)
            a = x - _mT(x)  # skew-symmetric: its exponential is orthogonal
            if self.orthogonal_map == "matrix_exp":
                q = _matrix_exp(a)
            else:
                eye = _eye_like(a, n, n)
                q = linalg.solve(eye - 0.5 * a, eye + 0.5 * a)
            if n != k:
                q = q.narrow(-1, 0, k)
        else:
            a = x.tril(-1)
            tau = 2.0 / (1.0 + (a * a).sum(-2))
            q = _householder_product(a, tau)
            # x's diagonal holds the -1s right_inverse set: only its signs
            # count, and no gradient reaches it (PyTorch truncates it to int).
            q = q * x.detach().diagonal(0, -2, -1).sign().unsqueeze(-2)
        if self.base is not None:
            q = self.base.matmul(q)
        return _mT(q) if transposed else q

    def right_inverse(self, q):
        with no_grad():
            if tuple(q.shape) != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                                 f"Got a tensor of shape {tuple(q.shape)}.")
            q_init = q
            n, k = q.shape[-2], q.shape[-1]
            if n < k:
                q = _mT(q)
                n, k = k, n
            if n == k:
                q = q.clone() if _is_orthogonal(q) else _make_orthogonal(q)
            else:
                # Completed to a square orthogonal matrix by random columns.
                extra = _C.randn(*q.shape[:-1], n - k).to(dtype=q.dtype, device=q.device)
                q = _make_orthogonal(_C.cat([q, extra], -1))
            self.base = q
            # -I: zero for matrix_exp/cayley's skew part; with householder the
            # -1 diagonal turns the empty reflections back into I.
            neg = _C.zeros_like(q_init)
            m = min(q_init.shape[-2], q_init.shape[-1])
            return neg - _eye_like(q_init, q_init.shape[-2], q_init.shape[-1]) if m else neg


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """module.name kept orthogonal (orthonormal rows or columns): Q = base @
    map(X), X unconstrained, base the orthogonalised tensor at registration.
    orthogonal_map: "matrix_exp" (default for square matrices), "cayley" or
    "householder" (default otherwise). Real matrices. Returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, _C.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.dim() < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.dim()} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
