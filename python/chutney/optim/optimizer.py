"""torch.optim's optimisers over the C library's (PyTorch 1.13's formulas).

Each parameter group is one library optimiser. At creation it moves the
group's parameters into one flat buffer (the Parameter objects stay the
same; arrays taken from them earlier with .numpy() keep the old memory) and
makes their .grad views of a flat gradient buffer, so a step is one pass
over contiguous memory. group["lr"] may be changed between steps (it is
passed on at the next step); the other hyper-parameters are fixed at
creation.
"""

from chutney import _C, _compile
from chutney.autograd import enable_grad


class Optimizer:
    _kind = None

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
        self._c = []
        self.state = {}
        for g in params:
            self.add_param_group(g)

    def _options(self, group):
        raise NotImplementedError

    def add_param_group(self, param_group):
        group = dict(param_group)
        ps = group["params"]
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
            group.setdefault(k, v)
        c = _C.Optimizer(self._kind, ps, **self._options(group))
        self.param_groups.append(group)
        self._c.append(c)

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

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k != "params":
                    lines.append(f"    {k}: {g[k]}")
        lines.append(")")
        return "\n".join(lines)


class SGD(Optimizer):
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


class Adam(Optimizer):
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


class RMSprop(Optimizer):
    _kind = "RMSprop"

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, foreach=None, maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))

    def _options(self, g):
        return {k: g[k] for k in ("lr", "alpha", "eps", "weight_decay", "momentum", "centered",
                                  "maximize")}


class Adagrad(Optimizer):
    _kind = "Adagrad"

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, maximize=maximize))

    def _options(self, g):
        return {k: g[k] for k in ("lr", "lr_decay", "weight_decay", "initial_accumulator_value",
                                  "eps", "maximize")}
