"""torch.nn.utils.parametrize: module.name computed by modules from
unconstrained tensors.

register_parametrization moves module.name to
module.parametrizations[name].original (or original0, original1, ... when
the first parametrization's right_inverse returns several tensors) and makes
module.name a property of a subclass made for the module
("ParametrizedLinear"), so reading it runs the parametrizations and
assigning to it runs their right_inverse. A library layer (Linear, Conv2d,
...) computes its forward from the property too (see _layers).
"""

from contextlib import contextmanager

from chutney import _C
from chutney.autograd import no_grad
from chutney.nn.modules import ModuleDict, ModuleList, Parameter
from chutney.nn.utils import _layers

_cache_enabled = 0
_cache = {}


@contextmanager
def cached():
    """Inside, each parametrized tensor is computed once (at its first
    read) and reused; useful when a module reads a tensor several times per
    forward (RNN steps, weights shared by several layers)."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _register(module, name, tensor):
    if isinstance(tensor, Parameter):
        module.register_parameter(name, tensor)
    else:
        module.register_buffer(name, tensor)


def _same_kind(a, b):
    return tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype


def _assign(target, value):
    """target takes value: in place when the shape allows (the Parameter
    object, and optimisers holding it, stay); else it is replaced."""
    if tuple(target.shape) == tuple(value.shape) and target.dtype == value.dtype:
        target.copy_(value)
        return target
    return None


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the
    unconstrained tensor(s) they read: `original` or original0, original1..."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        with no_grad():
            new = original
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    try:
                        new = m.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (_C.Tensor, list, tuple)):
            raise ValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, _C.Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError(f"When `right_inverse` outputs one tensor, it may not change the "
                                 f"dtype.\noriginal.dtype: {original.dtype}\n"
                                 f"right_inverse(original).dtype: {new.dtype}")
            with no_grad():
                kept = _assign(original, new)
            if kept is None:
                # Chutney has no Tensor.set_: a new tensor of the new shape.
                kept = (Parameter(new.detach().clone(), original.requires_grad)
                        if isinstance(original, Parameter) else new.detach().clone())
            _register(self, "original", kept)
        else:
            for i, t in enumerate(new):
                if not isinstance(t, _C.Tensor):
                    raise ValueError(f"'right_inverse' must return a Tensor or a Sequence of "
                                     f"tensors (list, tuple...). Got element {i} of the sequence "
                                     f"with type {type(t).__name__}.")
                t = t.detach().clone()
                if isinstance(original, Parameter):
                    t = Parameter(t, original.requires_grad)
                else:
                    t.requires_grad_(original.requires_grad)
                _register(self, f"original{i}", t)
        if not self.unsafe:
            z = self()
            if not isinstance(z, _C.Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(z).__name__}.")
            if z.dtype != original.dtype:
                raise ValueError(f"Registering a parametrization may not change the dtype of the "
                                 f"tensor, unless `unsafe` flag is enabled.\n"
                                 f"unparametrized dtype: {original.dtype}\n"
                                 f"parametrized dtype: {z.dtype}")
            if tuple(z.shape) != tuple(original.shape):
                raise ValueError(f"Registering a parametrization may not change the shape of the "
                                 f"tensor, unless `unsafe` flag is enabled.\n"
                                 f"unparametrized shape: {tuple(original.shape)}\n"
                                 f"parametrized shape: {tuple(z.shape)}")

    def right_inverse(self, value):
        """Set the original tensor(s) so that the parametrized tensor is
        value (through each parametrization's right_inverse, last first)."""
        with no_grad():
            for m in reversed(list(self)):
                if not hasattr(m, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(m).__name__} does not implement "
                                       f"right_inverse.")
                value = m.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, _C.Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got "
                                     f"{type(value).__name__}")
                if not self.unsafe and not _same_kind(value, self.original):
                    raise ValueError(f"The tensor returned by `right_inverse` must have the same "
                                     f"shape and dtype as the original: {tuple(value.shape)} "
                                     f"{value.dtype} vs {tuple(self.original.shape)} "
                                     f"{self.original.dtype}")
                if _assign(self.original, value) is None:
                    old = self.original
                    _register(self, "original",
                              Parameter(value.detach().clone(), old.requires_grad)
                              if isinstance(old, Parameter) else value.detach().clone())
            else:
                if not isinstance(value, (list, tuple)) or len(value) != self.ntensors:
                    raise ValueError(f"'right_inverse' must return a sequence of tensors of "
                                     f"length {self.ntensors}.")
                for i, t in enumerate(value):
                    old = getattr(self, f"original{i}")
                    if _assign(old, t) is None:
                        _register(self, f"original{i}",
                                  Parameter(t.detach().clone(), old.requires_grad)
                                  if isinstance(old, Parameter) else t.detach().clone())

    def forward(self):
        mods = list(self)
        if self.is_tensor:
            x = mods[0](self.original)
        else:
            x = mods[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in mods[1:]:
            x = m(x)
        return x


def _make_property(name):
    def getter(self):
        over = self.__dict__.get("_functional_call_overrides")
        if over and name in over:
            return over[name]
        plist = self.parametrizations[name]
        if _cache_enabled:
            key = (id(self), name)
            t = _cache.get(key)
            if t is None:
                t = _cache[key] = plist()
            return t
        return plist()

    def setter(self, value):
        self.parametrizations[name].right_inverse(value)

    return property(getter, setter)


def _set_class(module):
    """Give module a fresh subclass of its own class with a property per
    parametrized name (or its own class back when none is left). A class is
    never changed once made: copies of the module may share it."""
    base = type(module).__dict__.get("_chutney_parametrized_base", type(module))
    names = list(module._modules["parametrizations"]) if is_parametrized(module) else []
    if not names:
        module.__class__ = base
        return
    attrs = {name: _make_property(name) for name in names}
    # No __init__ of its own, so a library layer's __init_subclass__ leaves it
    # alone, and a copy made by the layer's constructor gets the same class.
    attrs["_chutney_parametrized_base"] = base
    module.__class__ = type(f"Parametrized{base.__name__}", (base,), attrs)


def is_parametrized(module, tensor_name=None):
    """Whether module has any parametrization (or one on tensor_name)."""
    p = module.__dict__.get("_modules", {}).get("parametrizations")
    if p is None or not isinstance(p, ModuleDict):
        return False
    if tensor_name is None:
        return len(p) > 0
    return tensor_name in p


def type_before_parametrizations(module):
    return type(module).__dict__.get("_chutney_parametrized_base", type(module))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """module.tensor_name becomes parametrization(original): original is the
    tensor as it was (or what parametrization.right_inverse makes of it; a
    right_inverse returning a sequence gives original0, original1, ...). A
    second parametrization on the same name is applied after the first.
    unsafe=True skips the checks that the result keeps the shape and dtype.
    Returns the module."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, _C.Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(x).__name__}.")
            if not _same_kind(x, y):
                raise ValueError(f"Registering a parametrization may not change the shape or "
                                 f"dtype of the tensor, unless `unsafe` flag is enabled.\n"
                                 f"unparametrized: {tuple(y.shape)} {y.dtype}\n"
                                 f"parametrized: {tuple(x.shape)} {x.dtype}")
            if hasattr(parametrization, "right_inverse"):
                z = parametrization.right_inverse(x)
                if not isinstance(z, _C.Tensor) or not _same_kind(z, y):
                    raise ValueError("parametrization.right_inverse must return a tensor of "
                                         "the tensor's shape and dtype")
        plist.append(parametrization)
        plist.unsafe = plist.unsafe or unsafe
    elif (tensor_name in module._parameters and module._parameters[tensor_name] is not None) or \
            (tensor_name in module._buffers and module._buffers[tensor_name] is not None):
        _layers.check(module)
        original = module._parameters.get(tensor_name)
        if original is None:
            original = module._buffers[tensor_name]
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        # Popped from the dicts: a library layer refuses `del layer.weight`.
        module._parameters.pop(tensor_name, None)
        module._buffers.pop(tensor_name, None)
        module._non_persistent.discard(tensor_name)
        if not is_parametrized(module):
            module.parametrizations = ModuleDict()
        module.parametrizations[tensor_name] = plist
        _set_class(module)
        _layers.enter(module)
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Take the parametrizations off module.tensor_name. leave_parametrized:
    the tensor keeps its current parametrized value (in the original
    Parameter object where there is one original of the same shape); else
    it is the original again (only possible with a single original).
    Returns the module."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
                if _assign(original, t) is None:
                    original = (Parameter(t.detach().clone(), original.requires_grad)
                                if isinstance(original, Parameter) else t.detach().clone())
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                             "that is parametrized in terms of a sequence of tensors.")
        with no_grad():
            t = getattr(module, tensor_name).detach().clone()
        requires = plist.original0.requires_grad
        original = Parameter(t, requires) if isinstance(plist.original0, Parameter) else t
    del module.parametrizations._modules[tensor_name]
    if not is_parametrized(module):
        del module._modules["parametrizations"]
    _set_class(module)
    _layers.restore_tensor(module, tensor_name, original)
    return module


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Register on to_module the parametrizations of from_module (all, or
    those of tensor_name), with copies of their original tensors."""
    if not is_parametrized(from_module):
        raise ValueError("from_module is not parametrized")
    names = [tensor_name] if tensor_name is not None else list(from_module.parametrizations)
    for name in names:
        src = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            raise ValueError(f"to_module has no tensor '{name}'")
        for p in src:
            register_parametrization(to_module, name, p, unsafe=True)
        dst = to_module.parametrizations[name]
        with no_grad():
            if src.is_tensor:
                if _assign(dst.original, src.original) is None:
                    dst.right_inverse(src())
            else:
                for i in range(src.ntensors):
                    _assign(getattr(dst, f"original{i}"), getattr(src, f"original{i}"))
    return to_module
