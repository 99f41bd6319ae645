"""torch.utils: data (datasets and a batching loader), checkpoint
(recomputation in the backward pass) and tensorboard (event files)."""

from chutney.utils import checkpoint, data  # noqa: F401
