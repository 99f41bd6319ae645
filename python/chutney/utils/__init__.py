"""torch.utils: data (datasets and a batching loader)."""

from chutney.utils import data  # noqa: F401
