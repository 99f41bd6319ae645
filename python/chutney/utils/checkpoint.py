"""torch.utils.checkpoint: checkpoint(function, *args) and
checkpoint_sequential.

The function runs with recording off, so its intermediate values are not
kept; the backward pass runs it again with recording on (from the same
random state, so dropout draws the same masks) and differentiates that:
its parameters get their gradients from this inner backward pass, its
tensor arguments through the checkpoint's own node. One tensor output;
up to 5 tensor arguments."""

from chutney import _C
from chutney.autograd import enable_grad
from chutney.autograd.function import Function


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, run, preserve_rng, anchor, *args):
        ctx.run, ctx.args = run, args
        ctx.rng = _C.get_rng_state() if preserve_rng else None
        # The recomputation runs under the autocast state of this forward.
        ctx.autocast = _C._autocast_dtype()
        out = run(*args)
        if not isinstance(out, _C.Tensor):
            raise TypeError(f"checkpoint: the function returned {type(out).__name__}; "
                            "checkpointed functions return one Tensor here")
        return out

    @staticmethod
    def backward(ctx, grad):
        inputs = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, _C.Tensor) else a
                  for a in ctx.args]
        saved = None
        if ctx.rng is not None:
            saved = _C.get_rng_state()
            _C.set_rng_state(ctx.rng)
        _C._autocast_begin(ctx.autocast)
        try:
            with enable_grad():
                out = ctx.run(*inputs)
        finally:
            _C._autocast_end()
            if saved is not None:
                _C.set_rng_state(saved)
        if out.requires_grad:
            out.backward(grad)
        grads = tuple(a.grad if isinstance(a, _C.Tensor) and a.requires_grad else None
                      for a in inputs)
        return (None, None, None) + grads


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), its intermediate values recomputed in the
    backward pass instead of kept."""
    if kwargs:
        run = lambda *a: function(*a, **kwargs)  # noqa: E731
    else:
        run = function
    if not _C.is_grad_enabled():
        return function(*args, **kwargs)
    # A leaf that requires grad makes the checkpoint's node be recorded even
    # when no argument requires one (the function's parameters still do).
    anchor = _C.zeros((), requires_grad=True)
    return _Checkpoint.apply(run, preserve_rng_state, anchor, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """The modules of functions (a Sequential or a list) in `segments`
    checkpointed runs (the last segment as is, as PyTorch does)."""
    mods = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be at least 1, got {segments}")
    size = len(mods) // segments
    preserve = kwargs.get("preserve_rng_state", True)

    def run_part(start, stop):
        def fn(x):
            for m in mods[start:stop]:
                x = m(x)
            return x
        return fn

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run_part(start, end + 1), input, preserve_rng_state=preserve)
    return run_part(end + 1, len(mods))(input)
