"""The lazy layers beyond LazyLinear/LazyConv1d/LazyConv2d (chutney.nn.lazy):
nn.LazyConv3d, nn.LazyConvTranspose1d/2d/3d, nn.LazyBatchNorm1d/2d/3d and
nn.LazyInstanceNorm1d/2d/3d, which take in_channels / num_features from
their first input and then become the layer they stand for."""

from chutney import _C
from chutney.nn.conv_transpose3d import ConvTranspose3d
from chutney.nn.lazy import _LazyConvNd, _LazyModule
from chutney.nn.modules import (BatchNorm1d, BatchNorm2d, BatchNorm3d, Conv3d, ConvTranspose1d,
                                ConvTranspose2d)
from chutney.nn.normalization import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d


class LazyConv3d(_LazyConvNd):
    cls_to_become = Conv3d
    _spatial = 3


class _LazyConvTransposeNd(_LazyConvNd):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
                 dtype=None):
        super().__init__(out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)
        self._conv_args = (kernel_size, stride, padding, output_padding, groups)
        self._dilation = dilation

    def _make(self, n_in):
        return self.cls_to_become(n_in, self.out_channels, *self._conv_args,
                                  bias=self.bias is not None, dilation=self._dilation,
                                  **self._factory)


class LazyConvTranspose1d(_LazyConvTransposeNd):
    cls_to_become = ConvTranspose1d
    _spatial = 1


class LazyConvTranspose2d(_LazyConvTransposeNd):
    cls_to_become = ConvTranspose2d
    _spatial = 2


class LazyConvTranspose3d(_LazyConvTransposeNd):
    cls_to_become = ConvTranspose3d
    _spatial = 3


class _LazyNorm(_LazyModule):
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):
        track = track_running_stats
        super().__init__(affine, device, dtype)
        if not affine:
            self.register_parameter("weight", None)
        if track:
            # placeholders until the first input gives num_features
            self.register_buffer("running_mean", _C.empty(0))
            self.register_buffer("running_var", _C.empty(0))
            self.register_buffer("num_batches_tracked", _C.tensor(0, dtype=_C.int64))
        self.num_features, self.eps, self.momentum = 0, eps, momentum
        self.affine, self.track_running_stats = affine, track

    def _in_size(self, input):
        # PyTorch reads shape[1] whatever the rank
        if input.dim() < 2:
            raise RuntimeError(f"{type(self).__name__}: expected an input with at least 2 "
                               f"dimensions, got {tuple(input.shape)}")
        return input.shape[1]

    def _make(self, n_in):
        return self.cls_to_become(n_in, self.eps, self.momentum, self.affine,
                                  self.track_running_stats, **self._factory)


class LazyBatchNorm1d(_LazyNorm):
    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNorm):
    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNorm):
    cls_to_become = BatchNorm3d


class _LazyInstanceNorm(_LazyNorm):
    """affine and track_running_stats default to True here, unlike
    InstanceNorm's own, as PyTorch 1.13's lazy forms."""


class LazyInstanceNorm1d(_LazyInstanceNorm):
    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm):
    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm):
    cls_to_become = InstanceNorm3d
