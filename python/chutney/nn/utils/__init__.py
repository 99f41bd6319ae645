"""torch.nn.utils: gradient clipping (in place on the .grad of each
parameter), parameters as one vector, rnn (packed and padded sequences),
weight_norm and spectral_norm (hook-based), parametrize and
parametrizations, stateless.functional_call, skip_init and fusion."""

from chutney import _C
from chutney.autograd import no_grad


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    """Scale the gradients so their norm_type-norm is at most max_norm;
    returns the norm before clipping (a 0-d tensor)."""
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    return _C.clip_grad_norm_(list(parameters), float(max_norm), norm_type)


def clip_grad_value_(parameters, clip_value):
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    _C.clip_grad_value_(list(parameters), float(clip_value))


def parameters_to_vector(parameters):
    return _C.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of vec into the parameters (in place)."""
    start = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec.narrow(0, start, n).reshape(*p.shape))
            start += n


from chutney.nn.utils import rnn  # noqa: E402 (torch.nn.utils.rnn)
# After rnn: these import chutney.nn.modules, which imports rnn.
from chutney.nn.utils import fusion, parametrizations, parametrize, stateless  # noqa: E402,F401
from chutney.nn.utils.fusion import (  # noqa: E402,F401
    fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights)
from chutney.nn.utils.init import skip_init  # noqa: E402,F401
from chutney.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm  # noqa: E402,F401
from chutney.nn.utils.weight_norm import remove_weight_norm, weight_norm  # noqa: E402,F401
