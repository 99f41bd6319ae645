"""torch.optim's Optimizer base class and the optimisers over the C
library's (PyTorch 1.13's formulas).

Optimizer is torch's base class: param_groups, state (a dict keyed by
parameter), zero_grad, add_param_group, and torch's state_dict layout
({"state": {index: {...}}, "param_groups": [...]}); a subclass writes
step() over chutney tensor ops, as in PyTorch (chutney.optim.extra's
optimisers, and user-written ones).

SGD, Adam, AdamW, RMSprop and Adagrad are library optimisers, one per
parameter group. At creation one moves the group's parameters into one
flat buffer (the Parameter objects stay the same; arrays taken from them
earlier with .numpy() keep the old memory) and makes their .grad views of
a flat gradient buffer, so a step is one pass over contiguous memory.
group["lr"] may be changed between steps (it is passed on at the next
step); the other hyper-parameters are fixed at creation. Their state_dict
is the library's ("<group>.<name>": tensors).
"""

from collections import defaultdict

from chutney import _C, _compile
from chutney.autograd import enable_grad


class _RequiredParameter:
    """A default that a parameter group must give (torch.optim.optimizer.required)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _cast_state(param, value, key=None):
    """A copy of a loaded state value for param, as torch's load_state_dict:
    tensors (except "step") take a floating param's dtype and its device."""
    if isinstance(value, _C.Tensor):
        value = value.detach().clone()
        if key != "step":
            if param.is_floating_point():
                value = value.to(param.dtype)
            value = value.to(param.device)
        return value
    if isinstance(value, dict):
        return {k: _cast_state(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(param, v) for v in value)
    return value


def _copy_value(value):
    if isinstance(value, _C.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _copy_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copy_value(v) for v in value)
    return value


class Optimizer:
    """torch.optim.Optimizer. A subclass gives its defaults and writes
    step(closure=None) over self.param_groups and self.state."""

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        if isinstance(params, _C.Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got a Tensor")
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        self.param_groups = []
        self.state = defaultdict(dict)
        # Library optimisers over a one-element tensor, one per group, that
        # only carry the lr for the library's lr schedules (StepLR, ...).
        self._lr_c = []
        for g in params:
            self.add_param_group(g)

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError("param group must be a dict")
        group = dict(param_group)
        ps = group["params"]
        if isinstance(ps, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        ps = [ps] if isinstance(ps, _C.Tensor) else list(ps)
        for p in ps:
            if not isinstance(p, _C.Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, not {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in ps) or len({id(p) for p in ps}) != len(ps):
            raise ValueError("some parameters appear in more than one parameter group")
        group["params"] = ps
        for k, v in self.defaults.items():
            if v is required and k not in group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {k}")
            group.setdefault(k, v)
        self._new_group(group)
        self.param_groups.append(group)

    def _new_group(self, group):
        """A subclass's hook to check or set up a group before it is added."""

    def zero_grad(self, set_to_none=False):
        """Gradients to zero, or to None."""
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

    def _lr_holders(self):
        """One library optimiser per group whose lr the library's schedules
        read and write (made when a schedule asks for them)."""
        while len(self._lr_c) < len(self.param_groups):
            g = self.param_groups[len(self._lr_c)]
            self._lr_c.append(_C.Optimizer("SGD", [_C.zeros(1)], lr=g["lr"]))
        return self._lr_c

    def _push_lr(self):
        for g, c in zip(self.param_groups, self._lr_c):
            if g["lr"] != c.lr:
                c.lr = g["lr"]

    def _closure_loss(self, closure):
        """The start of a Python optimiser's step: the closure's loss, with
        gradients on (a compiled function runs such a step eagerly)."""
        if _compile.is_compiling():
            raise _compile._Unsupported(f"{type(self).__name__}.step() (a Python optimiser)")
        if closure is None:
            return None
        with enable_grad():
            return closure()

    def step(self, closure=None):
        raise NotImplementedError

    def state_dict(self):
        """torch's layout: {"state": {index: the parameter's state},
        "param_groups": [the group's options, "params": [index, ...]]}, the
        indices counting parameters across the groups. The tensors are the
        optimizer's own (load_state_dict copies them)."""
        index = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for p in g["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in g["params"]]
            groups.append(packed)
        state = {(index[id(k)] if isinstance(k, _C.Tensor) else k): v
                 for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """A state_dict() of an optimizer of this kind over parameters of
        the same shapes; the saved options replace the groups' (the
        parameters stay)."""
        if not isinstance(state_dict, dict) or "param_groups" not in state_dict \
                or "state" not in state_dict:
            raise ValueError("load_state_dict: expected a dict with 'state' and 'param_groups' "
                             "(an optimizer's state_dict())")
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(self.param_groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        by_index = {}
        for g, s in zip(self.param_groups, saved):
            for p, i in zip(g["params"], s["params"]):
                by_index[i] = p
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in by_index:
                state[by_index[k]] = _cast_state(by_index[k], v)
            else:
                state[k] = _copy_value(v)
        groups = []
        for g, s in zip(self.param_groups, saved):
            ng = {k: _copy_value(v) for k, v in s.items() if k != "params"}
            ng["params"] = g["params"]
            groups.append(ng)
        self.state = state
        self.param_groups = groups

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k != "params":
                    lines.append(f"    {k}: {g[k]}")
        lines.append(")")
        return "\n".join(lines)


class _LibraryOptimizer(Optimizer):
    """An optimiser of the C library, one per parameter group."""

    _kind = None

    def __init__(self, params, defaults):
        self._c = []
        super().__init__(params, defaults)

    def _options(self, group):
        raise NotImplementedError

    def _new_group(self, group):
        self._c.append(_C.Optimizer(self._kind, group["params"], **self._options(group)))

    def _lr_holders(self):
        return self._c

    def zero_grad(self, set_to_none=False):
        """Gradients to zero (kept as views of the flat buffer), or to None."""
        for g, c in zip(self.param_groups, self._c):
            if set_to_none:
                for p in g["params"]:
                    p.grad = None
            else:
                c.zero_grad()

    def _push_lr(self):
        for g, c in zip(self.param_groups, self._c):
            if g["lr"] != c.lr:
                c.lr = g["lr"]

    def step(self, closure=None):
        """One update of every parameter that has a gradient (not recorded)."""
        loss = None
        if _compile.is_compiling():
            if closure is not None:
                raise _compile._Unsupported("optimizer.step(closure)")
            _compile._record_step(self)  # the compiled program makes the update
            return None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self._push_lr()
        for c in self._c:
            c.step()
        return loss

    def state_dict(self):
        """The library's state of each group ("<group>.<name>": tensor copies:
        hyper-parameters, step counts, moment buffers), for chutney.save."""
        self._push_lr()
        out = {}
        for i, c in enumerate(self._c):
            for name, t in c.state():
                out[f"{i}.{name}"] = t
        return out

    def load_state_dict(self, state_dict):
        for i, (g, c) in enumerate(zip(self.param_groups, self._c)):
            prefix = f"{i}."
            items = [(k[len(prefix):], v) for k, v in state_dict.items() if k.startswith(prefix)]
            c.load_state(items)
            g["lr"] = c.lr


class SGD(_LibraryOptimizer):
    _kind = "SGD"

    def __init__(self, params, lr=None, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False, foreach=None, differentiable=False):
        if lr is None:
            raise TypeError("SGD: lr is required")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    def _options(self, g):
        return dict(lr=g["lr"], momentum=g["momentum"], dampening=g["dampening"],
                    weight_decay=g["weight_decay"], nesterov=g["nesterov"], maximize=g["maximize"])


class Adam(_LibraryOptimizer):
    _kind = "Adam"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    def _options(self, g):
        b1, b2 = g["betas"]
        return dict(lr=g["lr"], beta1=b1, beta2=b2, eps=g["eps"], weight_decay=g["weight_decay"],
                    amsgrad=g["amsgrad"], maximize=g["maximize"])


class AdamW(Adam):
    _kind = "AdamW"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


class RMSprop(_LibraryOptimizer):
    _kind = "RMSprop"

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, foreach=None, maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))

    def _options(self, g):
        return {k: g[k] for k in ("lr", "alpha", "eps", "weight_decay", "momentum", "centered",
                                  "maximize")}


class Adagrad(_LibraryOptimizer):
    _kind = "Adagrad"

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, maximize=maximize))

    def _options(self, g):
        return {k: g[k] for k in ("lr", "lr_decay", "weight_decay", "initial_accumulator_value",
                                  "eps", "maximize")}
