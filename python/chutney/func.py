"""torch.func: functional_call (a module run with given parameters and
buffers)."""

from chutney.nn.utils.stateless import functional_call  # noqa: F401

__all__ = ["functional_call"]
