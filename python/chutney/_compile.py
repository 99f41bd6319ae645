"""chutney.compile: Python functions and modules as static programs.

The library builds a static graph when its ops are given placeholders
instead of data (tracing), and compiles that graph into a program (constant
folding, CSE, fusion, memory planning; docs/graph-passes.md). compile(fn)
calls fn once per new signature of its arguments (the shapes, dtypes and
devices of its tensors, the other arguments' values, grad mode and the
train/eval mode of modules) with placeholders for the tensors, and from
then on runs the program instead of the Python code.

A training step traced whole, forward, loss.backward() and
optimizer.step(), becomes one program that also writes the gradients and
updates the parameters (the library's compiled train step). Anything the
trace cannot capture (reading a value with .item() or bool(), gradients
that must leave the program, several optimisers) makes that signature run
eagerly instead, with one warning saying why: the results are the same,
only slower.
"""

import functools
import threading
import warnings

from chutney import _C

Tensor = _C.Tensor

_state = threading.local()
# Bumped whenever a module changes between train() and eval(): traces bake
# in dropout and batch-norm behaviour, so the mode is part of the key.
_mode_version = 0
CACHE_SIZE_LIMIT = 16


class _Unsupported(Exception):
    """What the trace cannot capture: the signature runs eagerly."""


class _Trace:
    def __init__(self):
        self.loss = None
        self.optimizers = []


def _current():
    return getattr(_state, "trace", None)


def is_compiling():
    """True while chutney.compile traces a function (torch.compiler.is_compiling)."""
    return _current() is not None


def _bump_mode_version():
    global _mode_version
    _mode_version += 1


def _record_backward(t, gradient, retain_graph, create_graph):
    tr = _current()
    if tr is None:
        raise RuntimeError("backward() of a traced tensor outside chutney.compile's trace")
    if gradient is not None or create_graph:
        raise _Unsupported("backward(gradient=...) or create_graph=True")
    if tr.loss is not None:
        raise _Unsupported("more than one backward() in one step")
    if t.dim() != 0:
        raise RuntimeError("grad can be implicitly created only for scalar outputs")
    if not t.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    tr.loss = t


def _record_step(opt):
    """Optimizer.step() while tracing: True when recorded (the program will
    make the update), False when not tracing."""
    tr = _current()
    if tr is None:
        return False
    if opt not in tr.optimizers:
        tr.optimizers.append(opt)
    return True


# ---- arguments as leaves and a hashable structure ----

def _flatten(obj, leaves):
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return ("T",)
    if isinstance(obj, (tuple, list)):
        return (type(obj).__name__, tuple(_flatten(o, leaves) for o in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _flatten(v, leaves)) for k, v in obj.items()))
    try:
        hash(obj)
    except TypeError:
        raise _Unsupported(f"an argument of type {type(obj).__name__} (not hashable)") from None
    return ("C", obj)


def _unflatten(spec, it):
    kind = spec[0]
    if kind == "T":
        return next(it)
    if kind == "C":
        return spec[1]
    if kind == "dict":
        return {k: _unflatten(v, it) for k, v in spec[1]}
    items = [_unflatten(s, it) for s in spec[1]]
    return tuple(items) if kind == "tuple" else items


def _tensor_key(t):
    return (tuple(t.shape), t.dtype, str(t.device), t.requires_grad)


def _reads_a_value(exc):
    """Did tracing fail because the function read a traced tensor's value?"""
    return "symbolic" in str(exc)


class _Entry:
    """One signature's program, or the reason it runs eagerly."""

    __slots__ = ("program", "out_spec", "out_map", "optimizer", "eager")

    def __init__(self):
        self.program = None
        self.out_spec = None
        self.out_map = None  # output leaf -> program output index, or the constant itself
        self.optimizer = None
        self.eager = None  # a reason string: run fn eagerly

    def run(self, tensors):
        if self.optimizer is not None:
            self.optimizer._push_lr()
        results = self.program.run(tensors)
        leaves = [results[m] if isinstance(m, int) else m[0] for m in self.out_map]
        return _unflatten(self.out_spec, iter(leaves))


def _trace(fn, args, kwargs, tensors, spec, input_names=None, dynamic_axes=None):
    """Calls fn with placeholders for its tensors: (graph, placeholders, the
    trace, fn's result)."""
    graph = _C.Graph()
    phs = []
    for i, t in enumerate(tensors):
        name = input_names[i] if input_names and i < len(input_names) else f"input_{i}"
        shape = list(t.shape)
        for d in (dynamic_axes or {}).get(name, ()):
            shape[d] = -1
        phs.append(graph.placeholder(name, t.dtype, shape))
    a, kw = _unflatten(spec, iter(phs))
    tr = _Trace()
    outer = _current()
    _state.trace = tr
    try:
        out = fn(*a, **kw)
    finally:
        _state.trace = outer
    return graph, phs, tr, out


def _split_outputs(out):
    """fn's result as program outputs (its traced tensors) and constants."""
    leaves = []
    out_spec = _flatten_out(out, leaves)
    symbolic, out_map = [], []
    for leaf in leaves:
        if isinstance(leaf, Tensor) and _C._is_symbolic(leaf):
            for k, s in enumerate(symbolic):
                if s is leaf:
                    out_map.append(k)
                    break
            else:
                out_map.append(len(symbolic))
                symbolic.append(leaf)
        else:
            out_map.append((leaf,))
    return out_spec, symbolic, out_map


def _flatten_out(obj, leaves):
    if isinstance(obj, (tuple, list)):
        return (type(obj).__name__, tuple(_flatten_out(o, leaves) for o in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _flatten_out(v, leaves)) for k, v in obj.items()))
    leaves.append(obj)
    return ("T",)


class _CompiledFunction:
    def __init__(self, fn, opt_level):
        self._fn = fn
        self._opt_level = opt_level
        self._cache = {}
        self._warned = set()
        functools.update_wrapper(self, fn)

    def _eager(self, reason):
        if reason not in self._warned:
            self._warned.add(reason)
            name = getattr(self._fn, "__qualname__", repr(self._fn))
            warnings.warn(f"chutney.compile: {name} runs eagerly for these arguments: {reason}",
                          RuntimeWarning, stacklevel=4)
        e = _Entry()
        e.eager = reason
        return e

    def _build(self, args, kwargs, tensors, spec):
        try:
            graph, phs, tr, out = _trace(self._fn, args, kwargs, tensors, spec)
        except _Unsupported as exc:
            return self._eager(f"the trace cannot capture {exc}")
        except Exception as exc:
            if _reads_a_value(exc):
                return self._eager(f"it reads a tensor's value while tracing ({exc})")
            raise
        out_spec, symbolic, out_map = _split_outputs(out)
        e = _Entry()
        e.out_spec = out_spec
        if tr.loss is None and tr.optimizers:
            return self._eager("optimizer.step() without loss.backward()")
        if tr.loss is not None:
            if len(tr.optimizers) != 1 or len(tr.optimizers[0]._c) != 1:
                return self._eager("loss.backward() with other than one optimizer.step() over one "
                                   "parameter group")
            # The loss is output 0 of a train step.
            outs = [tr.loss] + [s for s in symbolic if s is not tr.loss]
            index = {id(t): k for k, t in enumerate(outs)}
            e.out_map = [index[id(symbolic[m])] if isinstance(m, int) else m for m in out_map]
            e.optimizer = tr.optimizers[0]
            e.program = _C.compile_train_step(graph, phs, outs, e.optimizer._c[0],
                                              self._opt_level)
            return e
        if not symbolic:
            return self._eager("it returns no tensor computed from its inputs")
        if _C.is_grad_enabled() and any(s.requires_grad for s in symbolic):
            return self._eager("its results need gradients (parameters that require grad, with "
                               "grad mode on), and gradients do not flow out of a compiled program "
                               "yet; compile the whole training step (forward, loss.backward(), "
                               "optimizer.step()) or call it under chutney.no_grad()")
        e.out_map = out_map
        e.program = _C.compile(graph, phs, symbolic, self._opt_level)
        return e

    def __call__(self, *args, **kwargs):
        leaves = []
        try:
            spec = _flatten((args, kwargs), leaves)
        except _Unsupported as exc:
            self._eager(f"the trace cannot capture {exc}")
            return self._fn(*args, **kwargs)
        tensors = leaves
        # A trace records the autocast region it ran in (its casts).
        key = (spec, tuple(_tensor_key(t) for t in tensors), _C.is_grad_enabled(),
               _C._autocast_dtype(), _mode_version)
        entry = self._cache.get(key)
        if entry is None:
            if _current() is not None:  # called from inside another trace: part of that one
                return self._fn(*args, **kwargs)
            if len(self._cache) >= CACHE_SIZE_LIMIT:
                entry = self._eager(f"more than {CACHE_SIZE_LIMIT} signatures were compiled "
                                    "(chutney._compile.CACHE_SIZE_LIMIT)")
            else:
                entry = self._build(args, kwargs, tensors, spec)
            self._cache[key] = entry
        if entry.eager is not None:
            return self._fn(*args, **kwargs)
        return entry.run(tensors)

    def programs(self):
        """The compiled programs (_C.Program) of the signatures seen so far."""
        return [e.program for e in self._cache.values() if e.program is not None]


def compile(model=None, *, fullgraph=False, dynamic=None, backend=None, mode=None, options=None,
            disable=False, opt_level=2):
    """Compile a function or module into static programs (torch.compile).

    Usable as compile(fn), @compile or @compile(opt_level=1). A Module gives
    a module whose forward is compiled, sharing the original's parameters.
    opt_level: 0 runs the graph as traced, 1 folds and plans memory, 2 (the
    default) also fuses. fullgraph=True raises instead of running eagerly
    when the trace cannot capture the function. backend, mode, options and
    dynamic are accepted for torch.compile's signature and ignored (every
    signature is traced with its exact shapes)."""
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable, opt_level=opt_level)
    if disable:
        return model
    if opt_level not in (0, 1, 2):
        raise ValueError(f"compile: opt_level {opt_level} (give 0, 1 or 2)")
    from chutney.nn.modules import Module

    if isinstance(model, Module):
        return _OptimizedModule(model, opt_level, fullgraph)
    if not callable(model):
        raise TypeError(f"compile: expected a function or Module, got {type(model).__name__}")
    return _strict(_CompiledFunction(model, opt_level)) if fullgraph else \
        _CompiledFunction(model, opt_level)


def _strict(cf):
    def eager(reason):
        raise RuntimeError(f"chutney.compile(fullgraph=True): cannot compile "
                           f"{getattr(cf._fn, '__qualname__', cf._fn)}: {reason}")
    cf._eager = eager
    return cf


def _OptimizedModule(model, opt_level, fullgraph):
    from chutney.nn.modules import Module

    class OptimizedModule(Module):
        """A module whose forward runs as compiled programs; its parameters,
        buffers and state_dict are the original's (under "_orig_mod.")."""

        def __init__(self):
            super().__init__()
            self._orig_mod = model
            cf = _CompiledFunction(model.forward, opt_level)
            object.__setattr__(self, "_compiled", _strict(cf) if fullgraph else cf)

        def forward(self, *args, **kwargs):
            return self._compiled(*args, **kwargs)

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self._orig_mod, name)

    return OptimizedModule()
