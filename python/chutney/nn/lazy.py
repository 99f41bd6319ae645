"""nn.LazyLinear, nn.LazyConv1d, nn.LazyConv2d: in_features / in_channels
taken from the first input. Until then weight and bias are empty
placeholders; at the first call the module becomes the layer it stands for
(its class changes to Linear / Conv1d / Conv2d, as PyTorch's
cls_to_become), with that layer's PyTorch initialisation."""

from chutney import _C
from chutney.nn.modules import Conv1d, Conv2d, Linear, Module, Parameter

_KEPT = ("_forward_hooks", "_forward_pre_hooks")


class _LazyModule(Module):
    cls_to_become = None

    def __init__(self, bias, device, dtype):
        super().__init__()
        self.weight = Parameter(_C.empty(0))
        if bias:
            self.bias = Parameter(_C.empty(0))
        else:
            self.register_parameter("bias", None)
        self._factory = dict(device=device, dtype=dtype)

    def has_uninitialized_params(self):
        return True

    def _in_size(self, input):
        raise NotImplementedError

    def _make(self, n_in):
        raise NotImplementedError

    def initialize_parameters(self, input):
        """Become the real layer for this input (hooks and mode kept)."""
        real = self._make(self._in_size(input))
        kept = {k: v for k, v in self.__dict__.items() if k in _KEPT}
        training = self.training
        self.__dict__.clear()
        self.__dict__.update(real.__dict__)
        self.__dict__.update(kept)
        self.__class__ = type(real)
        self.train(training)

    def forward(self, input):
        self.initialize_parameters(input)
        return self.forward(input)


class LazyLinear(_LazyModule):
    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(bias, device, dtype)
        self.in_features, self.out_features = 0, out_features

    def _in_size(self, input):
        if input.dim() < 1:
            raise RuntimeError("LazyLinear: the input needs at least one dimension")
        return input.shape[-1]

    def _make(self, n_in):
        return Linear(n_in, self.out_features, self.bias is not None, **self._factory)

    def extra_repr(self):
        return f"in_features=0, out_features={self.out_features}, bias={self.bias is not None}"


class _LazyConvNd(_LazyModule):
    _spatial = 2

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(bias, device, dtype)
        if padding_mode != "zeros":
            raise NotImplementedError(f"padding_mode='{padding_mode}' (only 'zeros' is supported)")
        self.in_channels, self.out_channels = 0, out_channels
        self._conv_args = (kernel_size, stride, padding, dilation, groups)

    def _in_size(self, input):
        # an unbatched input [C, *spatial] has its channels first
        if input.dim() not in (self._spatial + 1, self._spatial + 2):
            raise RuntimeError(f"{type(self).__name__}: expected a {self._spatial + 1}-d or "
                               f"{self._spatial + 2}-d input, got {tuple(input.shape)}")
        return input.shape[0] if input.dim() == self._spatial + 1 else input.shape[1]

    def _make(self, n_in):
        return self.cls_to_become(n_in, self.out_channels, *self._conv_args,
                                  bias=self.bias is not None, **self._factory)


class LazyConv1d(_LazyConvNd):
    cls_to_become = Conv1d
    _spatial = 1


class LazyConv2d(_LazyConvNd):
    cls_to_become = Conv2d
    _spatial = 2
