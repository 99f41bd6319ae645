"""Multivariate families: MultivariateNormal and Dirichlet."""

import math

from chutney import _C
from chutney.distributions import constraints
from chutney.distributions._gamma import cholesky, standard_gamma
from chutney.distributions.distribution import (
    Distribution, ExponentialFamily, _broadcast_shape, _eps, _normal, _tiny)


def _mT(t):
    return t.transpose(-2, -1)


def _tri_solve(L, B):
    """L^-1 B for lower-triangular L (B a matrix, batches broadcast): a general
    solve, which linalg differentiates, of L's lower triangle, so that no
    gradient reaches the entries above the diagonal (a triangular solve
    reads none of them)."""
    from chutney import linalg
    return linalg.solve(L.tril(), B)


def _mahalanobis_sq(L, x):
    """|L^-1 x|^2 over the last axis; L [..., n, n] and x [..., n] broadcast."""
    y = _tri_solve(L, x.unsqueeze(-1)).squeeze(-1)
    return y.square().sum(-1)


def _half_log_det(L):
    return L.diagonal(dim1=-2, dim2=-1).log().sum(-1)


class MultivariateNormal(Distribution):
    """N(loc, Sigma), Sigma given by exactly one of covariance_matrix,
    precision_matrix or scale_tril (its lower Cholesky factor)."""
    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + \
                (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        given = scale_tril if scale_tril is not None else (
            covariance_matrix if covariance_matrix is not None else precision_matrix)
        if given.dim() < 2:
            raise ValueError("scale_tril / covariance_matrix / precision_matrix must be at "
                             "least two-dimensional, with optional leading batch dimensions")
        batch = _broadcast_shape(tuple(given.shape[:-2]), tuple(loc.shape[:-1]))
        n = loc.shape[-1]
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(*batch, n, n)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(*batch, n, n)
        else:
            self.precision_matrix = precision_matrix.expand(*batch, n, n)
        self.loc = loc.expand(*batch, n)
        super().__init__(batch, (n,), validate_args=validate_args)
        # the factor of the matrix as given (no batch copies), which everything derives from
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            from chutney import linalg
            self._unbroadcasted_scale_tril = cholesky(linalg.inv(precision_matrix))

    def _expand_params(self):
        return {"loc": 1, "scale_tril": 2, "covariance_matrix": 2, "precision_matrix": 2}

    def __getattr__(self, name):
        # the parametrisations not given are derived on first use, as PyTorch's lazy properties
        L = self.__dict__.get("_unbroadcasted_scale_tril")
        if L is None or name not in ("scale_tril", "covariance_matrix", "precision_matrix"):
            raise AttributeError(name)
        shape = tuple(self._batch_shape) + tuple(self._event_shape) * 2
        if name == "scale_tril":
            return L.expand(*shape)
        cov = L.matmul(_mT(L))
        if name == "covariance_matrix":
            return cov.expand(*shape)
        from chutney import linalg
        return linalg.inv(cov).expand(*shape)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        L = self._unbroadcasted_scale_tril
        return L.square().sum(-1).expand(*self._batch_shape, *self._event_shape)

    def rsample(self, sample_shape=()):
        eps = _normal(self._extended_shape(sample_shape), self.loc)
        return self.loc + self._unbroadcasted_scale_tril.matmul(eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value):
        value = self._check(value)
        diff = value - self.loc
        m = _mahalanobis_sq(self._unbroadcasted_scale_tril, diff)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + m) - \
            _half_log_det(self._unbroadcasted_scale_tril)

    def entropy(self):
        n = self._event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + \
            _half_log_det(self._unbroadcasted_scale_tril)
        return h.expand(*self._batch_shape) if len(self._batch_shape) else h

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        return new


class Dirichlet(ExponentialFamily):
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(tuple(concentration.shape[:-1]), tuple(concentration.shape[-1:]),
                         validate_args=validate_args)

    def _expand_params(self):
        return {"concentration": 1}

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        g = standard_gamma(self.concentration.expand(*shape))
        x = g / g.sum(-1, keepdim=True)
        return x.clamp(_tiny(x), 1 - _eps(x))

    def log_prob(self, value):
        value = self._check(value)
        a = self.concentration
        return (a - 1).xlogy(value).sum(-1) + a.sum(-1).lgamma() - a.lgamma().sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        am1 = (self.concentration - 1).clamp(min=0)
        m = am1 / am1.sum(-1, keepdim=True)
        # every concentration below 1: the density peaks at the vertices; PyTorch 1.13
        # answers the first one
        vertex = _C.zeros_like(m)
        vertex[..., 0] = 1
        allbelow = (self.concentration < 1).all(-1, keepdim=True)
        return _C.where(allbelow, vertex, m)

    @property
    def variance(self):
        a0 = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (a0 - self.concentration) / (a0.square() * (a0 + 1))

    def entropy(self):
        a = self.concentration
        k = a.shape[-1]
        a0 = a.sum(-1)
        return a.lgamma().sum(-1) - a0.lgamma() - (k - a0) * a0.digamma() - \
            ((a - 1) * a.digamma()).sum(-1)
