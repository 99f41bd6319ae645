"""torch.ao: quantisation (chutney.ao.quantization)."""

from chutney.ao import quantization  # noqa: F401
