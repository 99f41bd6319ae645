"""nn.ConvTranspose3d: F.conv_transpose3d (2-d transposed convolutions
of depth slices, as Conv3d is composed), PyTorch's parameter shapes and
initialisation."""

from chutney import _C
from chutney.nn import functional as F
from chutney.nn.modules import Module, Parameter


class ConvTranspose3d(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for ConvTranspose3d, not '
                             f"'{padding_mode}'")
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups")
        k = F._triple(kernel_size)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, k
        self.stride, self.padding = F._triple(stride), F._triple(padding)
        self.output_padding, self.dilation = F._triple(output_padding), F._triple(dilation)
        self.groups, self.padding_mode = groups, padding_mode
        # PyTorch's kaiming_uniform(a=sqrt(5)) on a transposed weight: its fan_in
        # is weight.size(1) * kernel volume, and the bias shares the bound
        fan_in = out_channels // groups * k[0] * k[1] * k[2]
        bound = 1 / fan_in ** 0.5
        kw = dict(device=device, dtype=dtype)
        self.weight = Parameter(_C.rand(in_channels, out_channels // groups, *k, **kw) *
                                (2 * bound) - bound)
        if bias:
            self.bias = Parameter(_C.rand(out_channels, **kw) * (2 * bound) - bound)
        else:
            self.register_parameter("bias", None)

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        size = list(output_size)
        if len(size) == 5 or (len(size) == 4 and input.dim() == 4):
            size = size[-3:]
        if len(size) != 3:
            raise ValueError(f"ConvTranspose3d: output_size must have 3 or 5 elements (got "
                             f"{len(size)})")
        pads = []
        for d in range(3):
            n_in = input.shape[input.dim() - 3 + d]
            least = ((n_in - 1) * self.stride[d] - 2 * self.padding[d] +
                     self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            if not least <= size[d] <= least + self.stride[d] - 1:
                raise ValueError(f"requested an output size of {list(output_size)}, but valid "
                                 f"sizes range from {least} to {least + self.stride[d] - 1} "
                                 f"(for an input of {list(input.shape[-3:])})")
            pads.append(size[d] - least)
        return tuple(pads)

    def forward(self, input, output_size=None):
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        for name, default in (("padding", (0, 0, 0)), ("dilation", (1, 1, 1)),
                              ("output_padding", (0, 0, 0))):
            if getattr(self, name) != default:
                s += f", {name}={getattr(self, name)}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + (", bias=False" if self.bias is None else "")
