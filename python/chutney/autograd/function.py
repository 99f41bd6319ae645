"""Custom autograd functions, as torch.autograd.Function:

    class Swish(chutney.autograd.Function):
        @staticmethod
        def forward(ctx, x, beta):
            ctx.save_for_backward(x, beta)
            return x * chutney.sigmoid(beta * x)

        @staticmethod
        def backward(ctx, grad):
            x, beta = ctx.saved_tensors
            s = chutney.sigmoid(beta * x)
            ds = s * (1 - s)
            return grad * (s + beta * x * ds), (grad * x * x * ds).sum()

    y = Swish.apply(x, beta)

forward runs with recording off and returns one Tensor; backward gets the
gradient of that output and returns one gradient (or None) per argument of
forward. backward is built from chutney ops, so create_graph=True
differentiates it again. Each subclass becomes a custom op of the C
library (cn_register_op): recorded like a built-in op, and captured by
chutney.compile when its rules use chutney ops. CPU tensors only; no
forward mode (jvp).
"""

import re

from chutney import _C

__all__ = ["Function", "FunctionCtx"]


class FunctionCtx:
    """What forward leaves for backward: save_for_backward(*tensors) and
    saved_tensors, needs_input_grad (one bool per argument of forward), and
    any attribute set on it."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = ()

    def save_for_backward(self, *tensors):
        self._saved = tuple(tensors)

    @property
    def saved_tensors(self):
        return self._saved


class Function:
    """Subclass it with static methods forward(ctx, *args) and
    backward(ctx, grad); call it with Function.apply(*args)."""

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("Function subclasses define forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("Function subclasses define backward(ctx, grad) for gradients")

    @classmethod
    def _op(cls, ntensors):
        # One op per class and number of tensor arguments (an op has a fixed
        # number of inputs); names are unique per class object.
        ops = cls.__dict__.get("_chutney_ops")
        if ops is None:
            ops = {}
            setattr(cls, "_chutney_ops", ops)
        if ntensors not in ops:
            base = re.sub(r"[^A-Za-z0-9_.]", "_", cls.__qualname__)[:40]
            ops[ntensors] = _C._function_register(f"py.{base}.{id(cls):x}.{ntensors}", ntensors)
        return ops[ntensors]

    @classmethod
    def apply(cls, *args):
        tensors = [(i, a) for i, a in enumerate(args) if isinstance(a, _C.Tensor)]
        needs = tuple(isinstance(a, _C.Tensor) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        prev = _C._set_grad_enabled(False)
        try:
            out = cls.forward(ctx, *args)
        finally:
            _C._set_grad_enabled(prev)
        if not isinstance(out, _C.Tensor):
            raise TypeError(f"{cls.__name__}.forward returned {type(out).__name__}: custom "
                            "functions return one Tensor")
        if not (prev and any(needs)):
            # Forward mode needs a rule as much as reverse mode does: a
            # tangent on an argument cannot reach forward's result.
            if any(isinstance(a, _C.Tensor) and _C._get_tangent(a) is not None for a in args):
                raise NotImplementedError(f"{cls.__name__}: custom Functions have no forward-mode "
                                          "(jvp) rule")
            return out
        nargs = len(args)

        def backward(grad):
            gs = cls.backward(ctx, grad)
            if not isinstance(gs, tuple):
                gs = (gs,)
            if len(gs) > nargs and all(g is None for g in gs[nargs:]):
                gs = gs[:nargs]  # as PyTorch: trailing Nones for defaulted arguments
            if len(gs) != nargs:
                raise RuntimeError(f"{cls.__name__}.backward returned {len(gs)} gradients, "
                                   f"forward takes {nargs} arguments")
            return tuple(gs[i] for i, _ in tensors)

        return _C._function_apply(cls._op(len(tensors)), [t for _, t in tensors], out, backward)
