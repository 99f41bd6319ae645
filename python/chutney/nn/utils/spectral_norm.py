"""torch.nn.utils.spectral_norm (the hook-based API): weight = weight_orig /
sigma, sigma estimated by power iteration with the buffers weight_u and
weight_v (updated in place in training mode)."""

from chutney import _C
from chutney.autograd import no_grad
from chutney.nn.utils import _layers


def _normalize(x, eps):
    return x / x.norm(2).clamp(min=eps)


def _to_matrix(weight, dim):
    if dim != 0:
        weight = weight.permute(dim, *[d for d in range(weight.dim()) if d != dim])
    return weight.reshape(weight.shape[0], -1)


def _is_transposed_conv(module):
    from chutney.nn import modules as M
    return isinstance(module, (M.ConvTranspose1d, M.ConvTranspose2d))


class SpectralNorm:
    """The forward pre-hook: recomputes module.name from name_orig."""

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.eps = name, dim, eps
        self.n_power_iterations = n_power_iterations

    def reshape_weight_to_matrix(self, weight):
        return _to_matrix(weight, self.dim)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                m = mat.detach()
                for _ in range(self.n_power_iterations):
                    # In place: the buffers carry the estimate to the next call.
                    v.copy_(_normalize(m.t().matmul(u), self.eps))
                    u.copy_(_normalize(m.matmul(v), self.eps))
            # Copies, so that later in-place updates do not touch what the
            # graph of this weight recorded.
            u, v = u.clone(), v.clone()
        sigma = u.dot(mat.matmul(v))
        return weight / sigma

    def remove(self, module):
        from chutney.nn.modules import Parameter
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False).detach()
        module.__dict__.pop(self.name, None)
        for suffix in ("_u", "_v"):
            del module._buffers[self.name + suffix]
        del module._parameters[self.name + "_orig"]
        _layers.restore_tensor(module, self.name, Parameter(weight))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        for hook in module.__dict__.get("_forward_pre_hooks", {}).values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        if isinstance(getattr(type(module), name, None), property):
            raise NotImplementedError(f"spectral_norm: {type(module).__name__}.{name} is a "
                                      f"property of the class and cannot be replaced by a "
                                      f"computed tensor")
        if name not in module._parameters or module._parameters[name] is None:
            raise AttributeError(f"'{type(module).__name__}' object has no parameter '{name}'")
        _layers.check(module)
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        with no_grad():
            mat = fn.reshape_weight_to_matrix(weight.detach())
            h, w = mat.shape
            opts = dict(dtype=weight.dtype, device=weight.device)
            u = _normalize(_C.randn(h).to(**opts), eps)
            v = _normalize(_C.randn(w).to(**opts), eps)
        del module._parameters[name]
        # The same Parameter object: an optimiser made before still updates it.
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        _layers.enter(module)
        fn._handle = module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide module.name by its largest singular value (of the weight seen as
    a matrix with axis dim first; dim None: 1 for transposed convolutions,
    else 0), estimated by n_power_iterations steps of power iteration per
    forward in training mode. Returns the module."""
    if dim is None:
        dim = 1 if _is_transposed_conv(module) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undo spectral_norm: module.name becomes a parameter holding
    weight_orig / sigma (the current estimate)."""
    hooks = module.__dict__.get("_forward_pre_hooks", {})
    for k, hook in list(hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del hooks[k]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
