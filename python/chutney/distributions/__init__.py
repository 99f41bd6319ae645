"""torch.distributions over the library's ops (PyTorch 1.13's semantics):
parameters validated against arg_constraints (on by default, as PyTorch),
batch_shape / event_shape, sample / rsample (reparameterised draws that
differentiate), log_prob, entropy, mean / mode / variance / stddev,
cdf / icdf where closed forms exist, expand, and kl_divergence through the
register_kl registry. Random draws come from chutney.manual_seed's generator.

Modules: distribution (the base class), continuous, discrete, multivariate,
composite (Independent, MixtureSameFamily, TransformedDistribution, relaxed
families), transforms, constraints, kl; _gamma holds the gamma sampler and
its implicit-reparameterisation gradient.
"""

from chutney.distributions import constraints, transforms  # noqa: F401
from chutney.distributions.composite import (  # noqa: F401
    ExpRelaxedCategorical, Independent, LogitRelaxedBernoulli, MixtureSameFamily,
    RelaxedBernoulli, RelaxedOneHotCategorical, TransformedDistribution)
from chutney.distributions.continuous import (  # noqa: F401
    Beta, Cauchy, Chi2, Exponential, Gamma, Gumbel, HalfNormal, Laplace, LogNormal, Normal,
    StudentT, Uniform)
from chutney.distributions.discrete import (  # noqa: F401
    Bernoulli, Binomial, Categorical, Geometric, OneHotCategorical,
    OneHotCategoricalStraightThrough, Poisson)
from chutney.distributions.distribution import Distribution, ExponentialFamily  # noqa: F401
from chutney.distributions.kl import kl_divergence, register_kl  # noqa: F401
from chutney.distributions.multivariate import Dirichlet, MultivariateNormal  # noqa: F401
from chutney.distributions.transforms import (  # noqa: F401
    AbsTransform, AffineTransform, ComposeTransform, ExpTransform, PowerTransform,
    SigmoidTransform, SoftmaxTransform, TanhTransform, Transform, identity_transform)

__all__ = [
    "AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy",
    "Chi2", "ComposeTransform", "Dirichlet", "Distribution", "ExpRelaxedCategorical",
    "ExpTransform", "Exponential", "ExponentialFamily", "Gamma", "Geometric", "Gumbel",
    "HalfNormal", "Independent", "Laplace", "LogNormal", "LogitRelaxedBernoulli",
    "MixtureSameFamily", "MultivariateNormal", "Normal", "OneHotCategorical",
    "OneHotCategoricalStraightThrough", "Poisson", "PowerTransform", "RelaxedBernoulli",
    "RelaxedOneHotCategorical", "SigmoidTransform", "SoftmaxTransform", "StudentT",
    "TanhTransform", "Transform", "TransformedDistribution", "Uniform", "constraints",
    "identity_transform", "kl_divergence", "register_kl", "transforms"]
