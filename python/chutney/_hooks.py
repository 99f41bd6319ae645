"""Tensor.register_hook: a function the backward pass calls with a
tensor's gradient once it is complete (the library's cn_add_grad_hook). It
returns None to keep the gradient or a tensor of the same shape to use
instead; the handle's remove() takes it off."""

from chutney import _C


class _GradHookHandle:
    _next_id = 0

    def __init__(self, tensor, hook_id):
        self._tensor, self._hook_id = tensor, hook_id
        _GradHookHandle._next_id += 1
        self.id = _GradHookHandle._next_id

    def remove(self):
        if self._tensor is not None:
            _C._remove_grad_hook(self._tensor, self._hook_id)
            self._tensor = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_hook(self, hook):
    # The handle keeps the very tensor the hook is on (a new object for it):
    # an in-place op may later give `self` another one.
    hook_id = _C._add_grad_hook(self, hook)
    return _GradHookHandle(_C.Tensor._wrap_as(_C.Tensor, self), hook_id)


_C._add_tensor_methods({"register_hook": register_hook})
