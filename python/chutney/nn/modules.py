"""torch.nn's Module and layers.

Module is plain Python, as in PyTorch: parameters (nn.Parameter), buffers
and submodules assigned as attributes are registered, and parameters(),
state_dict(), train()/eval(), to() walk them. The layers with parameters
(Linear, Conv*, BatchNorm*, LayerNorm, Embedding, RNN/LSTM/GRU) are the C
library's modules (_C.CModule), initialised as PyTorch 1.13 does from the
library's generator (chutney.manual_seed); their parameters are exposed as
nn.Parameter objects that are the library's own tensors, so an optimiser,
state_dict() and load_state_dict() reach the same memory the layer
computes with. Layers without parameters call nn.functional.
"""

import collections
import copy
import functools
from collections import OrderedDict

from chutney import _C, _compile, _hooks  # noqa: F401 (_hooks: Tensor.register_hook)
from chutney.autograd import no_grad
from chutney.nn import functional as F
from chutney.nn.utils import rnn as rnn_utils

Tensor = _C.Tensor


class Parameter(Tensor):
    """A tensor that is a module parameter: a leaf that requires a gradient
    (by default), sharing the given tensor's memory."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _C.empty(0)
        return Tensor._make_subclass(cls, data, requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        new = Parameter(self.detach().clone(), self.requires_grad)
        memo[id(self)] = new
        return new

    def __reduce_ex__(self, proto):
        return (Parameter, (self.detach(), self.requires_grad))


class _IncompatibleKeys(collections.namedtuple("IncompatibleKeys",
                                                ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns: PyTorch's named pair."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()


class _BackwardHooks:
    """One call's module backward hooks, on tensor gradient hooks, as
    PyTorch's: each tensor argument that needs a gradient enters the module
    as a view of itself, whose gradient is its entry of grad_input (zeros for
    a tensor argument that needs none; (None, ...) where none does), and each
    top-level tensor output leaves as a view of itself, whose gradient is its
    entry of grad_output (None for other outputs). Fired once per backward
    pass (retain_graph reruns them). A module with several tensor outputs
    takes no pre-hook, and one with several tensor inputs that need
    gradients cannot have its grad_input replaced (both raise)."""

    def __init__(self, module):
        self.module = module
        self.slots = []  # per tensor argument: its shape and dtype, hooked or not
        self.n_hooked = 0
        self.n_out = 0

    def wrap_inputs(self, args):
        out = []
        for a in args:
            if isinstance(a, Tensor):
                if a.requires_grad:
                    a = a.view_as(a)
                    k = len(self.slots)
                    a.register_hook(lambda g, k=k: self._input_grad(k, g))
                    self.n_hooked += 1
                self.slots.append(a)
            out.append(a)
        self._arm()
        return tuple(out)

    def _arm(self):
        self.grad_in = [None] * len(self.slots)
        self.pending = self.n_hooked
        self.grad_out = [None] * self.n_out
        self.outs_left = self.n_out_hooked if hasattr(self, "n_out_hooked") else 0

    def watch_outputs(self, out):
        single = isinstance(out, Tensor)
        items = [out] if single else list(out) if isinstance(out, (tuple, list)) else []
        hooked = [k for k, o in enumerate(items) if isinstance(o, Tensor) and o.requires_grad]
        if not hooked:
            return out
        if len(hooked) > 1 and self.module.__dict__.get("_backward_pre_hooks"):
            raise NotImplementedError(
                f"{type(self.module).__name__}: a full backward pre-hook on a module with "
                f"{len(hooked)} tensor outputs is not supported")
        self.n_out, self.n_out_hooked = len(items), len(hooked)
        for k in hooked:
            o = items[k].view_as(items[k])  # its own tensor, even if it is an input
            o.register_hook(lambda g, k=k: self._output_grad(k, g))
            items[k] = o
        self._arm()
        if single:
            return items[0]
        return type(out)(items) if isinstance(out, list) else tuple(items)

    def _output_grad(self, k, g):
        self.grad_out[k] = g
        self.outs_left -= 1
        if self.outs_left:
            return None
        replaced = None
        for hook in list(self.module.__dict__.get("_backward_pre_hooks", {}).values()):
            r = hook(self.module, tuple(self.grad_out))
            if r is not None:
                self.grad_out = list(r if isinstance(r, (tuple, list)) else (r,))
                replaced = self.grad_out[k]
        if self.n_hooked == 0:
            self._call(tuple([None] * max(len(self.slots), 1)))
            self._arm()
        return replaced

    def _input_grad(self, slot, g):
        self.grad_in[slot] = g
        self.pending -= 1
        if self.pending:
            return None
        grads = tuple(gi if gi is not None or t.requires_grad else _C.zeros_like(t)
                      for gi, t in zip(self.grad_in, self.slots))
        r = self._call(grads)
        self._arm()
        if r is None:
            return None
        if self.n_hooked > 1:
            raise NotImplementedError(
                f"{type(self.module).__name__}: a backward hook replacing the grad_input of a "
                f"module with {self.n_hooked} tensor inputs is not supported")
        return r[slot]

    def _call(self, grad_in):
        result = None
        for hook in list(self.module.__dict__.get("_backward_hooks", {}).values()):
            r = hook(self.module, grad_in, tuple(self.grad_out))
            if r is not None:
                result = grad_in = tuple(r) if isinstance(r, (tuple, list)) else (r,)
        return result

class RemovableHandle:
    """What register_forward_hook returns: remove() takes the hook out
    (also as a context manager)."""

    _next_id = 0

    def __init__(self, hooks):
        self.hooks = hooks
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self):
        self.hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


class Module:
    """Base class of all layers and models (torch.nn.Module)."""

    training: bool

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __deepcopy__(self, memo):
        """Library layers first: their copies register their new tensors in
        memo, so a parameter another module shares with one (weight tying)
        stays shared in the copy, whichever was registered first."""
        cls = type(self)
        new = cls.__new__(cls)
        memo[id(self)] = new
        # every library layer below first, wherever it is registered
        for m in self.modules():
            if isinstance(m, _CLayer) and id(m) not in memo:
                copy.deepcopy(m, memo)
        d = self.__dict__
        for key in ["_modules"] + [k for k in d if k != "_modules"]:
            if key in d:
                object.__setattr__(new, key, copy.deepcopy(d[key], memo))
        return new

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        pre, post = d.get("_forward_pre_hooks"), d.get("_forward_hooks")
        if pre:
            for hook in list(pre.values()):
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
        bw = None
        if (d.get("_backward_hooks") or d.get("_backward_pre_hooks")) and _C.is_grad_enabled():
            bw = _BackwardHooks(self)
            args = bw.wrap_inputs(args)
        out = self.forward(*args, **kwargs)
        if post:
            for hook in list(post.values()):
                r = hook(self, args, out)
                if r is not None:
                    out = r
        if bw is not None:
            out = bw.watch_outputs(out)
        return out

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) once the gradients of the
        module's tensor inputs are computed (grad_input is (None, ...) where
        no input needs one); a tuple it returns replaces grad_input."""
        return self._add_hook("_backward_hooks", hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) before the gradients flow into the
        module; a tuple it returns replaces grad_output."""
        return self._add_hook("_backward_pre_hooks", hook, prepend)

    def register_backward_hook(self, hook):
        """PyTorch's deprecated form, whose grad_input is that of the
        module's last op; here it is register_full_backward_hook's (the
        gradients of the module's inputs)."""
        return self.register_full_backward_hook(hook)

    def _add_hook(self, store, hook, prepend):
        hooks = self.__dict__.get(store)
        if hooks is None:
            hooks = OrderedDict()
            object.__setattr__(self, store, hooks)
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False):
        """hook(module, args, output) after each forward; a result that is
        not None replaces the output. Returns a handle with remove()."""
        return self._add_hook("_forward_hooks", hook, prepend)

    def register_forward_pre_hook(self, hook, *, prepend=False):
        """hook(module, args) before each forward; a result that is not
        None replaces the positional arguments."""
        return self._add_hook("_forward_pre_hooks", hook, prepend)

    # ---- registration through attributes ----

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def _check_fixed(self, name, value):
        """A library layer's own tensor is replaced in the layer too (tied
        weights: `decoder.weight = encoder.weight`): same dtype, shape and
        device; it cannot be removed."""
        fixed = self.__dict__.get("_c_names")
        if fixed and name in fixed:
            current = self._parameters.get(name, self._buffers.get(name))
            if value is current:
                return
            if value is None:
                raise RuntimeError(
                    f"{type(self).__name__}.{name} is a tensor of the library's layer and cannot be "
                    f"removed")
            self._c.set_tensor(name, value)

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._check_fixed(name, value)
            for store in (d, self._buffers, self._modules):
                store.pop(name, None)
            params[name] = value
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(nn.Parameter or None expected)")
            self._check_fixed(name, value)
            params[name] = value
        elif isinstance(value, Module):
            modules = d.get("_modules")
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            for store in (d, self._parameters, self._buffers):
                store.pop(name, None)
            modules[name] = value
        elif d.get("_modules") is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}'")
            self._modules[name] = value
        elif d.get("_buffers") is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}'")
            self._check_fixed(name, value)
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for store in ("_parameters", "_buffers", "_modules"):
            s = self.__dict__.get(store)
            if s is not None and name in s:
                self._check_fixed(name, None)
                del s[name]
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = set(super().__dir__())
        for store in ("_parameters", "_buffers", "_modules"):
            keys.update(self.__dict__.get(store, {}))
        return sorted(keys)

    def register_parameter(self, name, param):
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' as parameter '{name}'")
        if "." in name or name == "":
            raise KeyError(f"parameter name can't contain '.' or be empty: {name!r}")
        self._check_fixed(name, param)
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' as buffer '{name}'")
        if "." in name or name == "":
            raise KeyError(f"buffer name can't contain '.' or be empty: {name!r}")
        self._check_fixed(name, tensor)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if "." in name or name == "":
            raise KeyError(f"module name can't contain '.' or be empty: {name!r}")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        m = self
        for part in target.split(".") if target else []:
            if part not in m._modules:
                raise AttributeError(f"{type(m).__name__} has no attribute `{part}`")
            m = m._modules[part]
        return m

    def get_parameter(self, target):
        path, _, name = target.rpartition(".")
        m = self.get_submodule(path)
        if name not in m._parameters:
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return m._parameters[name]

    def get_buffer(self, target):
        path, _, name = target.rpartition(".")
        m = self.get_submodule(path)
        if name not in m._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return m._buffers[name]

    def type(self, dst_type):  # noqa: A003 (PyTorch's name)
        return self.to(dtype=dst_type)

    def share_memory(self):
        """One process: nothing to share (returns self)."""
        return self

    def to_empty(self, *, device=None, recurse=True):
        """There is no meta device here: tensors already have storage."""
        return self.to(device) if device is not None else self

    # ---- walking the tree ----

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, store, prefix, recurse, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, v in getattr(m, store).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield mprefix + ("." if mprefix else "") + name, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- modes and gradients ----

    def _set_training(self, mode):
        object.__setattr__(self, "training", mode)

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        if self.training != mode:
            _compile._bump_mode_version()  # compiled programs bake the mode in
        self._set_training(mode)
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=False):
        """Clear the gradients: to None with set_to_none, else to zeros
        (PyTorch 1.13's default)."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                with no_grad():
                    p.grad.zero_()

    # ---- state ----

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                destination[prefix + name] = b if keep_vars else b.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def get_extra_state(self):
        """Override (with set_extra_state) to save a picklable object in the
        state_dict under "_extra_state"."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be "
                           "called. Please file an issue at https://github.com/pytorch/pytorch/"
                           "issues/new?template=bug-report.yml to report this bug.")

    def set_extra_state(self, state):
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be "
                           "called. Please file an issue at https://github.com/pytorch/pytorch/"
                           "issues/new?template=bug-report.yml to report this bug.")

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) after load_state_dict has loaded
        the values; it may edit incompatible_keys' lists in place (strict
        judges what they hold afterwards) and must return None."""
        return self._add_hook("_load_state_dict_post_hooks", hook, False)

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name, module by module
        (depth first), as torch; the tensors share the module's memory."""
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination, prefix + name + ".", keep_vars)
        return destination

    def load_state_dict(self, state_dict, strict=True):
        """Copy the values of state_dict into the parameters and buffers (in
        place). strict: every name must match both ways. Shapes must match.
        Returns (missing_keys, unexpected_keys)."""
        own = self.state_dict(keep_vars=True)
        # objects of get/set_extra_state: loaded only by an overridden setter
        extra = {}
        for name, m in self.named_modules():
            key = name + ("." if name else "") + "_extra_state"
            own.pop(key, None)
            if type(m).set_extra_state is not Module.set_extra_state:
                extra[key] = m
        # BatchNorm's step count is missing from checkpoints older than it
        # (PyTorch < 0.4.1); PyTorch loads those and leaves the count at 0.
        missing = [k for k in list(own) + list(extra) if k not in state_dict and
                   not (k.endswith("num_batches_tracked") and
                        k[:-len("num_batches_tracked")] + "running_mean" in state_dict)]
        unexpected = [k for k in state_dict if k not in own and k not in extra]
        errors = []
        for k, t in own.items():
            if k in state_dict:
                v = state_dict[k]
                if not isinstance(v, Tensor):
                    errors.append(f'"{k}" is a {type(v).__name__}, not a Tensor')
                elif tuple(v.shape) != tuple(t.shape):
                    errors.append(f"size mismatch for {k}: copying a param with shape "
                                  f"{tuple(v.shape)} from checkpoint, the shape in current model "
                                  f"is {tuple(t.shape)}.")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" +
                               "\n\t".join(errors))
        with no_grad():
            for k, t in own.items():
                if k in state_dict:
                    t.copy_(state_dict[k])
        for k, m in extra.items():
            if k in state_dict:
                m.set_extra_state(state_dict[k])
        result = _IncompatibleKeys(missing, unexpected)
        for m in reversed(list(self.modules())):  # children before their parent, as PyTorch
            for hook in list(m.__dict__.get("_load_state_dict_post_hooks", {}).values()):
                if hook(m, result) is not None:
                    raise AssertionError("Hooks registered with "
                                       "``register_load_state_dict_post_hook`` are not expected "
                                       "to return new values, if incompatible_keys need to be "
                                       "modified, it should be done inplace.")
        if strict:
            # after the hooks, as PyTorch: a hook may forgive keys
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in unexpected))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in missing))
            if errors:
                raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:"
                                   "\n\t" + "\n\t".join(errors))
        return result

    # ---- devices and dtypes ----

    def _move_python_tensors(self, device, dtype, memo=None):
        """memo (id of a tensor -> its moved one) keeps a parameter shared by
        several modules shared."""
        memo = {} if memo is None else memo
        fixed = self.__dict__.get("_c_names", ())
        with no_grad():
            for name, p in list(self._parameters.items()):
                if p is None or name in fixed:
                    continue
                if id(p) in memo:
                    self._parameters[name] = memo[id(p)]
                    continue
                q = p.detach().to(device=device, dtype=dtype if p.is_floating_point() else None)
                if q is not p:
                    new = Parameter(q, requires_grad=p.requires_grad)
                    if p.grad is not None:
                        new.grad = p.grad.to(device=device, dtype=new.dtype)
                    memo[id(p)] = new
                    self._parameters[name] = new
            for name, b in list(self._buffers.items()):
                if b is None or name in fixed:
                    continue
                self._buffers[name] = b.to(device=device,
                                           dtype=dtype if b.is_floating_point() else None)

    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(tensor): moves parameters and buffers.
        Layers of the library move in place; parameters of Python modules
        are replaced by moved ones (make optimisers after moving, as in
        PyTorch)."""
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("memory_format", None)  # layouts do not change values (chutney.channels_last)
        if kwargs:
            raise TypeError(f"to() got unexpected arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, _C.dtype):
                dtype = a
            elif a is not None:
                device = a
        if dtype is not None:
            layers = [m for m in self.modules() if m.__dict__.get("_c") is not None]
            if dtype != _C.float32:
                for m in layers:
                    m._check_dtype(dtype)  # before anything changes
        memo = {}  # tensors shared by several modules stay shared
        if dtype is not None:
            for m in layers:
                m._set_dtype(dtype, memo)
        for m in self.modules():
            if device is not None and m.__dict__.get("_c") is not None:
                m._c.to(device)
            m._move_python_tensors(device, dtype, memo)
        return self

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        if device is None:
            return self.to("cuda")
        return self.to(f"cuda:{device}" if isinstance(device, int) else device)

    def float(self):
        return self.to(dtype=_C.float32)

    def double(self):
        return self.to(dtype=_C.float64)

    def half(self):
        return self.to(dtype=_C.float16)

    def bfloat16(self):
        return self.to(dtype=_C.bfloat16)

    # ---- printing ----

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        children = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        main = type(self).__name__ + "("
        if lines and not children and len(lines) == 1:
            return main + lines[0] + ")"
        body = lines + children
        if not body:
            return main + ")"
        return main + "\n  " + "\n  ".join(body) + "\n)"


class _CLayer(Module):
    """A layer of the C library: forward is the library's, its parameters and
    buffers are registered under the library's names (PyTorch's)."""

    def __init_subclass__(cls, **kwargs):
        # The C module cannot be copied, so copy.deepcopy makes the layer
        # again from its constructor's arguments and copies the state in:
        # remember the arguments of the outermost __init__ (the first to run).
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__init__")
        if own is None:
            return

        @functools.wraps(own)
        def __init__(self, *args, **kw):
            if "_ctor_args" not in self.__dict__:
                object.__setattr__(self, "_ctor_args", (args, kw))
            own(self, *args, **kw)

        cls.__init__ = __init__

    def __deepcopy__(self, memo):
        args, kw = self.__dict__.get("_ctor_args", ((), {}))
        new = type(self)(*copy.deepcopy(args, memo), **copy.deepcopy(kw, memo))
        memo[id(self)] = new
        # The copy computes in this layer's dtype now, not the constructor's.
        current = next((t.dtype for t in (self._parameters.get(n, self._buffers.get(n))
                                           for n in self._c_names)
                        if t is not None and t.is_floating_point()), None)
        if current is not None and current != _C.float32 and not new.__dict__.get("_other_dtype"):
            new._set_dtype(current)
        elif current == _C.float32 and new.__dict__.get("_other_dtype"):
            new._set_dtype(_C.float32)
        lib = self.__dict__.get("_c_names", frozenset())
        if lib != new.__dict__.get("_c_names", frozenset()):
            raise TypeError(f"copy.deepcopy: {type(self).__name__}'s library tensors are "
                            f"{sorted(lib)}, a new one's {sorted(new._c_names)} (an int8-quantised "
                            f"layer cannot be copied)")
        mine = {k: v for k, v in list(self._parameters.items()) + list(self._buffers.items())
                if k in lib}
        theirs = dict(new._parameters)
        theirs.update(new._buffers)
        dev = next((t.device for t in mine.values() if t is not None), None)
        if dev is not None and str(dev) != "cpu":
            new.to(dev)
        with no_grad():
            for name, t in mine.items():
                if t is None or theirs[name] is None:
                    continue
                tied = memo.get(id(t))
                if isinstance(tied, Tensor) and tied is not theirs[name]:
                    # A tensor this copy already made (weights tied to a
                    # layer copied before): the copy shares it too.
                    new._c.set_tensor(name, tied)
                    (new._parameters if name in new._parameters else new._buffers)[name] = tied
                    continue
                theirs[name].copy_(t)
                if isinstance(t, Parameter):
                    theirs[name].requires_grad_(t.requires_grad)
                memo[id(t)] = theirs[name]  # ties to this tensor elsewhere follow
        # Everything else as it is now, not as the constructor made it:
        # children (replaced or added since), the tensors a user registered,
        # hooks, flags, attributes.
        for store in ("_parameters", "_buffers"):
            for k, v in getattr(self, store).items():
                if k not in lib:
                    getattr(new, store)[k] = copy.deepcopy(v, memo)
        own = {"_c", "_c_names", "_parameters", "_buffers", "_ctor_args"}
        for name, v in self.__dict__.items():
            if name not in own:
                object.__setattr__(new, name, copy.deepcopy(v, memo))
        if new._c is not None:
            new._c.train(self.training)
        return new

    def _init_c(self, c, device=None, dtype=None):
        object.__setattr__(self, "_c", c)
        object.__setattr__(self, "_c_names", frozenset())
        self._register_c_state()
        if device is not None:
            self.to(device)
        if dtype is not None and dtype != _C.float32:
            self._check_dtype(dtype)
            self._set_dtype(dtype)

    def _register_c_state(self):
        """(Re-)register the library's tensors, which int8 quantisation moves
        from parameters to buffers."""
        for name in self._c_names:
            self._parameters.pop(name, None)
            self._buffers.pop(name, None)
        names = []
        for name, t, is_param in self._c.state(Parameter):
            (self._parameters if is_param else self._buffers)[name] = t
            names.append(name)
        object.__setattr__(self, "_c_names", frozenset(names))

    def _set_training(self, mode):
        object.__setattr__(self, "training", mode)
        self._c.train(mode)

    # The library's layers compute in float32. In another dtype a layer
    # computes its forward through its functional form (F.linear, F.conv2d,
    # ...) from Python tensors of that dtype; back in float32 the values go
    # into the library's tensors again.

    def _check_dtype(self, dtype):
        from chutney.nn.utils import _layers
        try:
            _layers.check(self)
        except NotImplementedError:
            raise NotImplementedError(
                f"{type(self).__name__}: the library's layers are float32, and this one has no "
                f"functional form to compute in {dtype} (Linear, Conv1d, Conv2d, ConvTranspose2d, "
                f"Embedding, LayerNorm and BatchNorm have)") from None

    def _set_dtype(self, dtype, memo=None):
        from chutney.nn.utils import _layers
        memo = {} if memo is None else memo
        d = self.__dict__
        if dtype == _C.float32 and not d.get("_other_dtype"):
            return
        with no_grad():
            for name in self._c_names:
                store = self._parameters if name in self._parameters else self._buffers
                t = store.get(name)
                if t is None or not t.is_floating_point():
                    continue
                q = memo.get(id(t))  # converted already for a layer it is tied to
                if q is None:
                    q = t.detach().to(dtype)
                    if dtype == _C.float32:
                        q = q.clone()
                    if isinstance(t, Parameter):
                        q = Parameter(q, requires_grad=t.requires_grad)
                    memo[id(t)] = q
                if dtype == _C.float32:
                    self._c.set_tensor(name, q)  # the library's own tensor again
                store[name] = q
        if dtype == _C.float32:
            d.pop("_other_dtype", None)
            _layers.leave(self, force=True)
        else:
            object.__setattr__(self, "_other_dtype", True)
            _layers.enter(self)

    def forward(self, x):
        return self._c.forward(x)


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


class Linear(_CLayer):
    """y = x W^T + b; weight [out_features, in_features], bias [out_features]."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self._init_c(_C._nn_linear(in_features, out_features, bias), device, dtype)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")

    @property
    def bias(self):
        return self._parameters.get("bias", self._buffers.get("bias"))  # a buffer once int8


class _ConvNd(_CLayer):
    _kind = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None,
                 output_padding=0):
        super().__init__()
        if padding_mode != "zeros":
            raise NotImplementedError(f"padding_mode='{padding_mode}' (only 'zeros' is supported)")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = kernel_size, stride
        self.padding, self.dilation, self.groups = padding, dilation, groups
        self.output_padding = output_padding
        make = getattr(_C, self._kind)
        self._init_c(make(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                          bias, output_padding), device, dtype)

    @property
    def bias(self):
        return self._parameters.get("bias", self._buffers.get("bias"))  # a buffer once int8

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self._fmt(self.kernel_size)}, "
             f"stride={self._fmt(self.stride)}")
        if self.padding not in (0, (0, 0), [0, 0]):
            s += f", padding={self._fmt(self.padding)}"
        if self.dilation not in (1, (1, 1), [1, 1]):
            s += f", dilation={self._fmt(self.dilation)}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s

    def _fmt(self, v):
        return v if isinstance(v, str) else tuple(v) if isinstance(v, (tuple, list)) else self._nd(v)


class Conv1d(_ConvNd):
    _kind = "_nn_conv1d"

    def _nd(self, v):
        return (v,)


class Conv2d(_ConvNd):
    _kind = "_nn_conv2d"

    def _nd(self, v):
        return (v, v)


class ConvTranspose2d(_ConvNd):
    _kind = "_nn_conv_transpose2d"

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, device, dtype, output_padding)

    def _nd(self, v):
        return (v, v)


class _BatchNorm(_CLayer):
    _dims = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self._init_c(_C._nn_batch_norm(self._dims, num_features, eps, momentum, affine,
                                       track_running_stats), device, dtype)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    _dims = 1


class BatchNorm2d(_BatchNorm):
    _dims = 2


class LayerNorm(_CLayer):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self._init_c(_C._nn_layer_norm(self.normalized_shape, eps, elementwise_affine), device,
                     dtype)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class Embedding(_CLayer):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        self._init_c(_C._nn_embedding(num_embeddings, embedding_dim, padding_idx), device, dtype)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is embeddings (the same memory, as
        PyTorch), trained unless freeze. sparse is accepted; the gradient is
        dense."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        if max_norm is not None or scale_grad_by_freq:
            raise NotImplementedError("Embedding.from_pretrained: max_norm and scale_grad_by_freq "
                                      "are not supported by the library's layer (F.embedding has "
                                      "them)")
        rows, cols = embeddings.shape
        emb = cls(rows, cols, padding_idx, device=embeddings.device, dtype=embeddings.dtype)
        weight = Parameter(embeddings, requires_grad=not freeze)
        if emb.__dict__.get("_other_dtype"):
            emb._parameters["weight"] = weight  # computed in Python: no library tensor to tie
        else:
            emb.weight = weight
        return emb


class _RNNBase(_CLayer):
    _mode = "RNN"

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.nonlinearity, self.batch_first = nonlinearity, batch_first
        self.dropout, self.bidirectional = dropout, bidirectional
        self._init_c(_C._nn_rnn(self._mode, input_size, hidden_size, num_layers, nonlinearity,
                                bias, batch_first, dropout, bidirectional), device, dtype)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.batch_first:
            s += ", batch_first=True"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s

    def forward(self, input, hx=None):
        if isinstance(input, rnn_utils.PackedSequence):
            out, h, _ = rnn_utils._run_packed(self, input, hx)
        else:
            out, h, _ = self._c.rnn_forward(input, hx)
        return out, h


class RNN(_RNNBase):
    _mode = "RNN"


class GRU(_RNNBase):
    _mode = "GRU"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, device, dtype)


class LSTM(_RNNBase):
    _mode = "LSTM"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, device, dtype)

    def forward(self, input, hx=None):
        h0, c0 = hx if hx is not None else (None, None)
        if isinstance(input, rnn_utils.PackedSequence):
            out, h, c = rnn_utils._run_packed(self, input, h0, c0)
        else:
            out, h, c = self._c.rnn_forward(input, h0, c0)
        return out, (h, c)


# ---- layers without parameters ----

class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class _Activation(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU(_Activation):
    def forward(self, x):
        return x.relu()


class Tanh(Module):
    def forward(self, x):
        return x.tanh()


class Sigmoid(Module):
    def forward(self, x):
        return x.sigmoid()


class SiLU(_Activation):
    def forward(self, x):
        return x.silu()


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return x.gelu(approximate=self.approximate)

    def extra_repr(self):
        return f"approximate='{self.approximate}'"


class LeakyReLU(_Activation):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def forward(self, x):
        return x.leaky_relu(self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class ELU(_Activation):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(inplace)
        self.alpha = alpha

    def forward(self, x):
        return x.elu(self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


class Softplus(Module):
    def __init__(self, beta=1, threshold=20):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return x.softplus(self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        self.min_val, self.max_val = min_val, max_val

    def forward(self, x):
        return x.hardtanh(self.min_val, self.max_val)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x.softmax(self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, x):
        return x.log_softmax(self.dim)


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        shape = list(x.shape)
        d = self.dim % len(shape)
        return x.reshape(shape[:d] + list(self.unflattened_size) + shape[d + 1:])


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace=False"


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)

    def extra_repr(self):
        stride = self.stride if self.stride is not None else self.kernel_size
        return (f"kernel_size={self.kernel_size}, stride={stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        stride = self.stride if self.stride is not None else self.kernel_size
        return f"kernel_size={self.kernel_size}, stride={stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


# ---- containers ----

class Sequential(Module):
    """Modules applied in order; Sequential(OrderedDict(name=module)) names them."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        n = len(self._modules)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return list(self._modules.values())[idx % n]

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self


class ModuleList(Module):
    def __init__(self, modules=None):
        super().__init__()
        for m in modules or []:
            self.append(m)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        n = len(self._modules)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return list(self._modules.values())[idx % n]


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        for k, m in (modules or {}).items():
            self.add_module(k, m)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()


# ---- losses ----

class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction


class CrossEntropyLoss(_Loss):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_Loss):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class BCELoss(_Loss):
    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


# ---- more activations, pools, resampling, dropout and losses ----

def _simple(name, fn, doc, args=()):
    """A parameterless module whose forward is fn(x, *its arguments)."""

    def __init__(self, *a, **k):
        Module.__init__(self)
        k.pop("inplace", None)
        if len(a) == len(args) + 1 and isinstance(a[-1], bool):
            a = a[:-1]  # a positional inplace flag
        if len(a) > len(args):
            raise TypeError(f"{name}() takes {len(args)} arguments, {len(a)} given")
        unknown = sorted(set(k) - set(args))
        if unknown:
            raise TypeError(f"{name}() got an unexpected keyword argument '{unknown[0]}'")
        vals = dict(zip(args, a))
        dup = sorted(set(vals) & set(k))
        if dup:
            raise TypeError(f"{name}() got multiple values for argument '{dup[0]}'")
        vals.update(k)
        for key, default in args.items() if isinstance(args, dict) else ():
            vals.setdefault(key, default)
        for key, v in vals.items():
            object.__setattr__(self, key, v)

    def forward(self, x):
        return fn(x, *[getattr(self, key) for key in args])

    def extra_repr(self):
        return ", ".join(f"{key}={getattr(self, key)}" for key in args)

    return type(name, (Module,), {"__init__": __init__, "forward": forward,
                                  "extra_repr": extra_repr, "__doc__": doc})


ReLU6 = _simple("ReLU6", F.relu6, "min(max(0, x), 6)")
Hardsigmoid = _simple("Hardsigmoid", F.hardsigmoid, "clamp(x/6 + 1/2, 0, 1)")
Hardswish = _simple("Hardswish", F.hardswish, "x * hardsigmoid(x)")
Mish = _simple("Mish", F.mish, "x * tanh(softplus(x))")
SELU = _simple("SELU", F.selu, "scale * elu(x, alpha) with SELU's constants")
CELU = _simple("CELU", F.celu, "max(0,x) + min(0, alpha*(exp(x/alpha)-1))", {"alpha": 1.0})
LogSigmoid = _simple("LogSigmoid", F.logsigmoid, "log(sigmoid(x))")
Softsign = _simple("Softsign", F.softsign, "x / (1 + |x|)")
Tanhshrink = _simple("Tanhshrink", F.tanhshrink, "x - tanh(x)")
Softmin = _simple("Softmin", F.softmin, "softmax(-x)", {"dim": None})
GLU = _simple("GLU", F.glu, "a * sigmoid(b), the halves of x along dim", {"dim": -1})
PixelShuffle = _simple("PixelShuffle", F.pixel_shuffle, "[N, C*r*r, H, W] to [N, C, H*r, W*r]",
                       {"upscale_factor": None})
PixelUnshuffle = _simple("PixelUnshuffle", F.pixel_unshuffle,
                         "[N, C, H*r, W*r] to [N, C*r*r, H, W]", {"downscale_factor": None})
AdaptiveAvgPool1d = _simple("AdaptiveAvgPool1d", F.adaptive_avg_pool1d, "", {"output_size": None})
AdaptiveMaxPool1d = _simple("AdaptiveMaxPool1d", F.adaptive_max_pool1d, "",
                            {"output_size": None, "return_indices": False})
AdaptiveMaxPool2d = _simple("AdaptiveMaxPool2d", F.adaptive_max_pool2d, "",
                            {"output_size": None, "return_indices": False})
LocalResponseNorm = _simple("LocalResponseNorm", F.local_response_norm, "",
                            {"size": None, "alpha": 1e-4, "beta": 0.75, "k": 1.0})


class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class PReLU(Module):
    """max(0, x) + weight * min(0, x); weight [num_parameters], one per
    channel (axis 1) or one for all, initialised to init."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.weight = Parameter(_C.full((num_parameters,), float(init), device=device,
                                        dtype=dtype or _C.float32))

    def forward(self, x):
        return F.prelu(x, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class MaxPool1d(MaxPool2d):
    def forward(self, x):
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class AvgPool1d(AvgPool2d):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)

    def forward(self, x):
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class Upsample(Module):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x):
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)

    def extra_repr(self):
        what = f"scale_factor={self.scale_factor}" if self.size is None else f"size={self.size}"
        return f"{what}, mode='{self.mode}'"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "bilinear", True)


class _ChannelDropout(Dropout):
    _fn = None

    def forward(self, x):
        return type(self)._fn(x, self.p, self.training)


class Dropout1d(_ChannelDropout):
    _fn = staticmethod(F.dropout1d)


class Dropout2d(_ChannelDropout):
    _fn = staticmethod(F.dropout2d)


class Dropout3d(_ChannelDropout):
    _fn = staticmethod(F.dropout3d)


class _Pad(Module):
    _mode, _dims = "constant", 2

    def __init__(self, padding, value=0.0):
        super().__init__()
        self.padding = (padding,) * (2 * self._dims) if isinstance(padding, int) else \
            tuple(padding)
        self.value = value

    def forward(self, x):
        if self._mode == "constant":
            return F.pad(x, self.padding, "constant", self.value)
        return F.pad(x, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}" + (f", value={self.value}" if self._mode == "constant" else "")


def _pad_class(name, mode, dims):
    if mode == "constant" and name.startswith("Zero"):
        def __init__(self, padding):
            _Pad.__init__(self, padding, 0.0)
    elif mode == "constant":
        def __init__(self, padding, value):
            _Pad.__init__(self, padding, value)
    else:
        def __init__(self, padding):
            _Pad.__init__(self, padding)
    return type(name, (_Pad,), {"_mode": mode, "_dims": dims, "__init__": __init__})


ZeroPad1d = _pad_class("ZeroPad1d", "constant", 1)
ZeroPad2d = _pad_class("ZeroPad2d", "constant", 2)
ConstantPad1d = _pad_class("ConstantPad1d", "constant", 1)
ConstantPad2d = _pad_class("ConstantPad2d", "constant", 2)
ConstantPad3d = _pad_class("ConstantPad3d", "constant", 3)
ReflectionPad1d = _pad_class("ReflectionPad1d", "reflect", 1)
ReflectionPad2d = _pad_class("ReflectionPad2d", "reflect", 2)
ReplicationPad1d = _pad_class("ReplicationPad1d", "replicate", 1)
ReplicationPad2d = _pad_class("ReplicationPad2d", "replicate", 2)
ReplicationPad3d = _pad_class("ReplicationPad3d", "replicate", 3)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, self.reduction, self.delta)


class KLDivLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class CosineEmbeddingLoss(_Loss):
    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, self.margin,
                                       reduction=self.reduction)


class MarginRankingLoss(_Loss):
    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, self.margin,
                                     reduction=self.reduction)


class SoftMarginLoss(_Loss):
    def forward(self, input, target):
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(reduction)
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps,
                                     self.swap, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    def __init__(self, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)


class PoissonNLLLoss(_Loss):
    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                 reduction="mean"):
        super().__init__(reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, input, target):
        return F.poisson_nll_loss(input, target, self.log_input, self.full, eps=self.eps,
                                  reduction=self.reduction)


Threshold = _simple("Threshold", F.threshold, "x where x > threshold, else value",
                    {"threshold": None, "value": None})
Hardshrink = _simple("Hardshrink", F.hardshrink, "x where |x| > lambd, else 0", {"lambd": 0.5})
Softshrink = _simple("Softshrink", F.softshrink, "x shrunk towards 0 by lambd", {"lambd": 0.5})


class Softmax2d(Module):
    """Softmax over the channels of [N, C, H, W] (or [C, H, W])."""

    def forward(self, x):
        if x.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input of 3 or 4 dimensions, not {x.dim()}")
        return x.softmax(-3)


class Bilinear(Module):
    """y = x1^T A x2 + b; weight [out, in1, in2], bias [out], both
    uniform(-1/sqrt(in1), 1/sqrt(in1)) as PyTorch."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        bound = 1 / in1_features ** 0.5
        kw = dict(device=device, dtype=dtype)
        self.weight = Parameter(_C.rand(out_features, in1_features, in2_features, **kw) *
                                (2 * bound) - bound)
        if bias:
            self.bias = Parameter(_C.rand(out_features, **kw) * (2 * bound) - bound)
        else:
            self.register_parameter("bias", None)

    def forward(self, x1, x2):
        return F.bilinear(x1, x2, self.weight, self.bias)


class _CellBase(Module):
    _gates = 1

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        g, k = self._gates * hidden_size, 1 / hidden_size ** 0.5
        kw = dict(device=device, dtype=dtype)

        def uniform(*shape):
            return Parameter(_C.rand(*shape, **kw) * (2 * k) - k)
        self.weight_ih = uniform(g, input_size)
        self.weight_hh = uniform(g, hidden_size)
        if bias:
            self.bias_ih, self.bias_hh = uniform(g), uniform(g)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)

    def _gates_of(self, x, h):
        gi = F.linear(x, self.weight_ih, self.bias_ih)
        gh = F.linear(h, self.weight_hh, self.bias_hh)
        return gi, gh

    def _zeros(self, x):
        return _C.zeros(*(tuple(x.shape[:-1]) + (self.hidden_size,)), dtype=x.dtype,
                        device=x.device)


class LSTMCell(_CellBase):
    """One LSTM step, PyTorch's gate order (input, forget, cell, output) and
    parameter names; returns (h', c')."""
    _gates = 4

    def forward(self, x, hx=None):
        h, c = hx if hx is not None else (self._zeros(x), self._zeros(x))
        gi, gh = self._gates_of(x, h)
        i, f, g, o = (gi + gh).chunk(4, -1)
        c2 = f.sigmoid() * c + i.sigmoid() * g.tanh()
        return o.sigmoid() * c2.tanh(), c2


class GRUCell(_CellBase):
    """One GRU step, PyTorch's gate order (reset, update, new); returns h'."""
    _gates = 3

    def forward(self, x, hx=None):
        h = hx if hx is not None else self._zeros(x)
        gi, gh = self._gates_of(x, h)
        ir, iz, in_ = gi.chunk(3, -1)
        hr, hz, hn = gh.chunk(3, -1)
        r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
        n = (in_ + r * hn).tanh()
        return (1 - z) * n + z * h


class RNNCell(_CellBase):
    """One Elman step: tanh or relu of W_ih x + b_ih + W_hh h + b_hh."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, device, dtype)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'")
        self.nonlinearity = nonlinearity

    def forward(self, x, hx=None):
        h = hx if hx is not None else self._zeros(x)
        gi, gh = self._gates_of(x, h)
        s = gi + gh
        return s.tanh() if self.nonlinearity == "tanh" else s.relu()


class ParameterList(Module):
    """Parameters in a list, registered as "0", "1", ..."""

    def __init__(self, values=None):
        super().__init__()
        for p in values or ():
            self.append(p)

    def append(self, p):
        if not isinstance(p, Parameter):
            p = Parameter(p)
        self.register_parameter(str(len(self._parameters)), p)
        return self

    def extend(self, values):
        for p in values:
            self.append(p)
        return self

    def __getitem__(self, i):
        if isinstance(i, slice):
            return ParameterList(list(self._parameters.values())[i])
        return list(self._parameters.values())[i]

    def __setitem__(self, i, p):
        i = range(len(self))[i]
        self.register_parameter(str(i), p if isinstance(p, Parameter) else Parameter(p))

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def extra_repr(self):
        return "\n".join(f"({k}): Parameter containing: [{p.dtype} of size "
                         f"{'x'.join(str(d) for d in p.shape)}]"
                         for k, p in self._parameters.items())


class ParameterDict(Module):
    """Parameters by name."""

    def __init__(self, parameters=None):
        super().__init__()
        for k, v in (parameters or {}).items():
            self[k] = v

    def __setitem__(self, k, v):
        self.register_parameter(k, v if isinstance(v, Parameter) else Parameter(v))

    def __getitem__(self, k):
        return self._parameters[k]

    def __contains__(self, k):
        return k in self._parameters

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()

    def get(self, k, default=None):
        return self._parameters.get(k, default)

    def pop(self, k):
        return self._parameters.pop(k)

    def update(self, parameters):
        for k, v in dict(parameters).items():
            self[k] = v


class Conv3d(Module):
    """3-d convolution (F.conv3d: 2-d convolutions over depth slices), with
    PyTorch's parameter shapes and initialisation (uniform with bound
    1/sqrt(fan_in))."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise NotImplementedError(f"padding_mode='{padding_mode}' (only 'zeros' is supported)")
        if in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups")
        if isinstance(padding, str):
            raise NotImplementedError("Conv3d: string padding ('same', 'valid')")
        k = F._triple(kernel_size)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, k
        self.stride, self.padding = F._triple(stride), F._triple(padding)
        self.dilation, self.groups = F._triple(dilation), groups
        fan_in = in_channels // groups * k[0] * k[1] * k[2]
        bound = 1 / fan_in ** 0.5
        kw = dict(device=device, dtype=dtype)
        self.weight = Parameter(_C.rand(out_channels, in_channels // groups, *k, **kw) *
                                (2 * bound) - bound)
        if bias:
            self.bias = Parameter(_C.rand(out_channels, **kw) * (2 * bound) - bound)
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        return F.conv3d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}"
                + (", bias=False" if self.bias is None else ""))


class BatchNorm3d(BatchNorm2d):
    """BatchNorm2d's statistics over N, D, H and W, on [N, C, D, H, W] seen as
    [N, C, D*H, W]."""

    def forward(self, x):
        if x.dim() != 5:
            raise ValueError(f"expected 5D input (got {x.dim()}D input)")
        n, c, d, h, w = tuple(x.shape)
        return super().forward(x.reshape(n, c, d * h, w)).reshape(n, c, d, h, w)


class MaxPool3d(MaxPool2d):
    def forward(self, x):
        return F.max_pool3d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class AvgPool3d(AvgPool2d):
    def forward(self, x):
        return F.avg_pool3d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


AdaptiveAvgPool3d = _simple("AdaptiveAvgPool3d", F.adaptive_avg_pool3d, "", {"output_size": None})


class ConvTranspose1d(Module):
    """A transposed 1-d convolution (F.conv_transpose1d), weight [C_in,
    C_out/groups, k] and PyTorch's initialisation."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise NotImplementedError(f"padding_mode='{padding_mode}' (only 'zeros' is supported)")
        k = F._single(kernel_size)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (k,)
        self.stride, self.padding = (F._single(stride),), (F._single(padding),)
        self.output_padding, self.groups = (F._single(output_padding),), groups
        self.dilation = (F._single(dilation),)
        fan_in = out_channels // groups * k  # PyTorch's fan_in of a transposed weight
        bound = 1 / fan_in ** 0.5
        kw = dict(device=device, dtype=dtype)
        self.weight = Parameter(_C.rand(in_channels, out_channels // groups, k, **kw) *
                                (2 * bound) - bound)
        if bias:
            self.bias = Parameter(_C.rand(out_channels, **kw) * (2 * bound) - bound)
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        return F.conv_transpose1d(x, self.weight, self.bias, self.stride[0], self.padding[0],
                                  self.output_padding[0], self.groups, self.dilation[0])


class EmbeddingBag(Module):
    """Bags of embedding rows reduced by sum, mean or max; weight ~ N(0, 1)."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.mode, self.include_last_offset = mode, include_last_offset
        self.padding_idx, self.max_norm = padding_idx, max_norm
        w = _weight if _weight is not None else _C.randn(num_embeddings, embedding_dim,
                                                         device=device, dtype=dtype)
        if padding_idx is not None and _weight is None:
            with no_grad():
                w[padding_idx] = 0.0
        self.weight = Parameter(w)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode="mean", sparse=False,
                        include_last_offset=False, padding_idx=None):
        """An EmbeddingBag whose weight is embeddings, trained unless freeze."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        bag = cls(embeddings.shape[0], embeddings.shape[1], max_norm, norm_type,
                  scale_grad_by_freq, mode, sparse, embeddings, include_last_offset, padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, mode=self.mode,
                               per_sample_weights=per_sample_weights,
                               include_last_offset=self.include_last_offset,
                               padding_idx=self.padding_idx)
