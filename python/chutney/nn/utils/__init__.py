"""torch.nn.utils: gradient clipping (in place on the .grad of each
parameter), parameters as one vector, rnn (packed and padded sequences),
weight_norm and spectral_norm (hook-based), parametrize and
parametrizations, stateless.functional_call, skip_init and fusion."""

from chutney import _C
from chutney.autograd import no_grad


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients so their norm_type-norm is at most max_norm;
    returns the norm before clipping (a 0-d tensor). error_if_nonfinite:
    raise, leaving the gradients alone, when that norm is inf or nan.
    foreach is accepted (one fused op either way)."""
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    if error_if_nonfinite:
        grads = [p.grad for p in parameters if p.grad is not None]
        if grads:
            norm_type = float(norm_type)
            per = _C.stack([g.detach().norm(norm_type) for g in grads])
            total = per.abs().max() if norm_type == float("inf") else per.norm(norm_type)
            if not bool(total.isfinite()):
                raise RuntimeError(
                    f"The total norm of order {norm_type} for gradients from `parameters` is "
                    "non-finite, so it cannot be clipped. To disable this error and scale the "
                    "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return _C.clip_grad_norm_(parameters, float(max_norm), norm_type)


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated name of clip_grad_norm_."""
    import warnings
    warnings.warn("torch.nn.utils.clip_grad_norm is now deprecated in favor of "
                  "torch.nn.utils.clip_grad_norm_.", stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


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
