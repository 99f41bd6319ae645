"""The 3-d members of families whose 1-d and 2-d members live in
chutney.nn.modules / pooling_more: nn.AdaptiveMaxPool3d, nn.MaxUnpool3d,
nn.ReflectionPad3d."""

from chutney.nn import functional as F
from chutney.nn.modules import Module, _pad_class
from chutney.nn.pooling_more import _MaxUnpool


class AdaptiveMaxPool3d(Module):
    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input):
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class MaxUnpool3d(_MaxUnpool):
    _n = 3

    def forward(self, input, indices, output_size=None):
        return F.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


ReflectionPad3d = _pad_class("ReflectionPad3d", "reflect", 3)
