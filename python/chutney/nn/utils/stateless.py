"""torch.nn.utils.stateless.functional_call: run a module with some of its
parameters and buffers replaced by given tensors (for the call only)."""

from contextlib import contextmanager

from chutney import _C
from chutney.nn.utils import _layers


def _owner(module, name):
    parts = name.split(".")
    m = module
    for p in parts[:-1]:
        if p not in m._modules or m._modules[p] is None:
            raise AttributeError(f"{type(m).__name__} has no submodule '{p}' (in '{name}')")
        m = m._modules[p]
    return m, parts[-1]


def _all_names(module):
    """name -> tensor for every parameter and buffer, tied ones under each
    of their names."""
    own = {}
    for store in ("_parameters", "_buffers"):
        for name, t in module._named_members(store, "", True, remove_duplicate=False):
            own[name] = t
    return own


def _with_ties(module, tensors):
    by_id = {}
    for name, t in _all_names(module).items():
        by_id.setdefault(id(t), []).append(name)
    for names in by_id.values():
        given = [n for n in names if n in tensors]
        if not given:
            continue
        first = tensors[given[0]]
        for n in given[1:]:
            if tensors[n] is not first:
                raise ValueError(f"functional_call got multiple values for keys {given}, which "
                                 f"are tied. Consider using tie_weights=False")
        for n in names:
            tensors.setdefault(n, first)
    return tensors


@contextmanager
def _reparametrize_module(module, tensors, tie_weights=False, strict=False):
    from chutney.nn.utils.parametrize import is_parametrized
    tensors = dict(tensors)
    if strict:
        own = _all_names(module)
        missing = [k for k in own if k not in tensors]
        unexpected = [k for k in tensors if k not in own]
        if missing or unexpected:
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}: "
                               f"missing keys {missing}, unexpected keys {unexpected}")
    if tie_weights:
        tensors = _with_ties(module, tensors)
    absent = object()
    saved = []  # (module, store or None, name, previous value)
    entered = []
    try:
        for name, t in tensors.items():
            m, leaf = _owner(module, name)
            if is_parametrized(m, leaf):
                # The parametrization's property looks here first.
                over = m.__dict__.setdefault("_functional_call_overrides", {})
                saved.append((m, None, leaf, over.get(leaf, absent)))
                over[leaf] = t
                continue
            if leaf in m._parameters:
                store = m._parameters
            elif leaf in m._buffers:
                store = m._buffers
            else:
                raise AttributeError(f"{type(m).__name__} has no parameter or buffer '{leaf}' "
                                     f"(in '{name}')")
            if leaf in m.__dict__.get("_c_names", ()) and not m.__dict__.get(_layers._MARK):
                _layers.enter(m)
                entered.append(m)
            saved.append((m, store, leaf, store[leaf]))
            # Straight into the dict: a computed tensor is not a Parameter,
            # and a library layer accepts only its own kind of tensor.
            store[leaf] = t
        yield
    finally:
        for m, store, leaf, old in reversed(saved):
            if store is None:
                over = m.__dict__["_functional_call_overrides"]
                if old is absent:
                    over.pop(leaf, None)
                else:
                    over[leaf] = old
            else:
                store[leaf] = old
        for m in entered:
            _layers.leave(m, force=True)


def functional_call(module, parameters_and_buffers, args=(), kwargs=None, *, tie_weights=True,
                    strict=False):
    """module(*args, **kwargs) computed with the tensors of
    parameters_and_buffers (a dict by state_dict name, or a tuple of dicts)
    in place of the module's own; the module is left as it was. Gradients
    flow to the given tensors. tie_weights: a tensor registered under
    several names takes the value given for any of them; strict: every
    parameter and buffer must be given. A library layer (Linear, Conv2d,
    ...) given one of its tensors computes this call with its functional
    form."""
    if isinstance(parameters_and_buffers, (list, tuple)):
        merged = {}
        for d in parameters_and_buffers:
            for k, v in d.items():
                if k in merged:
                    raise ValueError(f"{k} appeared in multiple dictionaries; behavior of "
                                     f"functional call is ambiguous")
                merged[k] = v
        parameters_and_buffers = merged
    if kwargs is None:
        kwargs = {}
    if not isinstance(args, tuple):
        args = (args,)
    for k, v in parameters_and_buffers.items():
        if not isinstance(v, _C.Tensor):
            raise TypeError(f"functional_call: '{k}' is a {type(v).__name__}, not a Tensor")
    with _reparametrize_module(module, parameters_and_buffers, tie_weights, strict):
        return module(*args, **kwargs)
