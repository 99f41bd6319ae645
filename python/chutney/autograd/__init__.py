"""Automatic differentiation: backward, grad, no_grad, jvp (forward mode).

Reverse mode records the ops of tensors that require a gradient (leaves made
with requires_grad=True); Tensor.backward() accumulates into the leaves'
.grad, grad() returns gradients instead. Recording is per thread, as in
PyTorch. Gradients are built from ops, so create_graph=True gives
differentiable gradients (second derivatives and more).
"""

import functools

from chutney import _C
from chutney.autograd import functional  # noqa: F401
from chutney.autograd.function import Function, FunctionCtx  # noqa: F401
from chutney.autograd.anomaly_mode import (  # noqa: F401
    detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly)
from chutney.autograd.variable import Variable  # noqa: F401
# The functions shadow their module's name, as in torch.autograd.
from chutney.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401,E402

__all__ = ["Function", "FunctionCtx", "backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
           "is_grad_enabled", "functional", "Variable", "detect_anomaly", "set_detect_anomaly",
           "is_anomaly_enabled", "gradcheck", "gradgradcheck"]

is_grad_enabled = _C.is_grad_enabled


def _as_tuple(x):
    if isinstance(x, _C.Tensor):
        return (x,)
    return tuple(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False):
    """Accumulate the gradients of tensors (seeded by grad_tensors) into the
    leaves' .grad, as torch.autograd.backward."""
    tensors = _as_tuple(tensors)
    seeds = [None] * len(tensors) if grad_tensors is None else list(_as_tuple(grad_tensors))
    if len(seeds) != len(tensors):
        raise ValueError(f"backward: {len(seeds)} grad_tensors for {len(tensors)} tensors")
    n = len(tensors)
    for i, (t, g) in enumerate(zip(tensors, seeds)):
        # Every pass but the last keeps the record: the tensors may share it.
        keep = retain_graph if retain_graph is not None else create_graph
        t.backward(g, retain_graph=keep or i < n - 1, create_graph=create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """The gradients of sum(outputs[i] * grad_outputs[i]) with respect to
    inputs, as a tuple (torch.autograd.grad); .grad is left alone. With
    allow_unused, an input the outputs do not depend on gets None."""
    if grad_outputs is not None and isinstance(grad_outputs, _C.Tensor):
        grad_outputs = (grad_outputs,)
    return _C._grad(_as_tuple(outputs), _as_tuple(inputs), grad_outputs, retain_graph,
                    create_graph, allow_unused)


class set_grad_enabled:
    """Turn recording on or off (for this thread): a function, a context
    manager or a decorator, as torch.set_grad_enabled."""

    def __init__(self, mode):
        self.mode = bool(mode)
        self.prev = _C._set_grad_enabled(self.mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False


class _GradMode:
    mode = True

    def __enter__(self):
        self.prev = _C._set_grad_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """No recording inside (a context manager or a decorator)."""
    mode = False


class enable_grad(_GradMode):
    """Recording on inside, even within no_grad."""
    mode = True


class inference_mode(no_grad):
    """no_grad (Chutney has no separate inference mode)."""

    def __init__(self, mode=True):
        self.mode = not mode
