"""torch.Generator: a random stream of its own.

The library has one generator, counter-based: its state is (seed, offset).
A Generator keeps such a state and, for each draw given `generator=`, swaps
it in and out of the library's, so its numbers are the ones
`manual_seed(seed)` would give and the global stream is left where it was.
(The swap is not guarded against other threads drawing at the same time.)
"""

import contextlib
import functools
import os

from chutney import _C

_DEFAULT_SEED = 67280421310721  # PyTorch's default_generator's initial seed


class Generator:
    def __init__(self, device="cpu"):
        self.device = _C.device(device)
        self._state = (_DEFAULT_SEED, 0)
        self._initial = _DEFAULT_SEED

    def manual_seed(self, seed):
        seed = int(seed)
        with self._active():
            _C.manual_seed(seed)
        self._initial = seed
        return self

    def seed(self):
        """A non-deterministic seed, set and returned."""
        s = int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._initial

    def get_state(self):
        return self._state

    def set_state(self, state):
        self._state = tuple(state)
        return self

    def __repr__(self):
        return f"<chutney.Generator object, device={self.device}>"

    @contextlib.contextmanager
    def _active(self):
        saved = _C.get_rng_state()
        _C.set_rng_state(self._state)
        try:
            yield
        finally:
            self._state = _C.get_rng_state()
            _C.set_rng_state(saved)


def drawing(gen):
    """A context in which the library's draws come from gen (None: the
    global stream)."""
    if gen is None:
        return contextlib.nullcontext()
    if not isinstance(gen, Generator):
        raise TypeError(f"generator must be a chutney.Generator, not {type(gen).__name__}")
    return gen._active()


def with_generator(fn):
    """fn(..., generator=None): its draws from generator."""
    @functools.wraps(fn)
    def wrapper(*args, generator=None, **kwargs):
        if generator is None:
            return fn(*args, **kwargs)
        with drawing(generator):
            return fn(*args, **kwargs)
    return wrapper
