"""torch.autograd.Variable, the legacy wrapper: every tensor is one."""

import warnings

from chutney import _C


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, _C.Tensor)


class Variable(metaclass=_VariableMeta):
    """Variable(t, requires_grad=False) is a tensor sharing t's memory, a
    new leaf (not connected to t's graph) that requires a gradient as asked;
    isinstance(t, Variable) holds for every tensor. volatile is gone, as in
    PyTorch (a warning)."""

    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if volatile:
            warnings.warn("volatile was removed (Variable.volatile is always False)",
                          stacklevel=2)
        if data is None:
            data = _C.empty(0)
        if not isinstance(data, _C.Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out
