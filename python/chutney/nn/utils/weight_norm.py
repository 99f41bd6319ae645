"""torch.nn.utils.weight_norm (the hook-based API): weight = g * v / ||v||,
the parameter `name` replaced by `name_g` and `name_v`."""

from chutney.autograd import no_grad
from chutney.nn.utils import _layers


def norm_except_dim(v, pow=2, dim=0):
    """The pow-norm of v over every axis but dim, keeping the axes (size 1);
    dim -1 (or None) is the norm of the whole tensor, a 0-d tensor (what
    PyTorch's weight_norm takes dim=None to mean)."""
    if dim is None or dim == -1:
        return v.norm(pow)
    if dim < 0:
        dim += v.dim()
    rest = tuple(d for d in range(v.dim()) if d != dim)
    if not rest:
        return v.abs() if pow != 0 else (v != 0).to(v.dtype)
    return v.norm(pow, rest, keepdim=True)


def _weight_norm(v, g, dim):
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook: recomputes module.name from name_g, name_v."""

    def __init__(self, name, dim):
        if dim is None:
            dim = -1
        self.name, self.dim = name, dim

    def compute_weight(self, module):
        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"),
                            self.dim)

    @staticmethod
    def apply(module, name, dim):
        from chutney.nn.modules import Parameter
        for hook in module.__dict__.get("_forward_pre_hooks", {}).values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter "
                                   f"{name}")
        if isinstance(getattr(type(module), name, None), property):
            raise NotImplementedError(f"weight_norm: {type(module).__name__}.{name} is a property "
                                      f"of the class and cannot be replaced by a computed tensor")
        if name not in module._parameters or module._parameters[name] is None:
            raise AttributeError(f"'{type(module).__name__}' object has no parameter '{name}'")
        _layers.check(module)
        fn = WeightNorm(name, dim)
        weight = module._parameters[name]
        # Popped from the dict: a library layer refuses `del layer.weight`.
        del module._parameters[name]
        with no_grad():
            g = norm_except_dim(weight.detach(), 2, fn.dim)
        module.register_parameter(name + "_g", Parameter(g))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        _layers.enter(module)
        handle = module.register_forward_pre_hook(fn)
        fn._handle = handle
        return fn

    def remove(self, module):
        from chutney.nn.modules import Parameter
        with no_grad():
            weight = self.compute_weight(module).detach()
        module.__dict__.pop(self.name, None)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        _layers.restore_tensor(module, self.name, Parameter(weight))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Reparametrise module.name as name_g * name_v / ||name_v||, the norm
    over every axis but dim (dim=None: the whole tensor); module.name is
    recomputed before each forward. Returns the module."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo weight_norm: module.name becomes a parameter again, holding the
    current g * v / ||v||."""
    hooks = module.__dict__.get("_forward_pre_hooks", {})
    for k, hook in list(hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
