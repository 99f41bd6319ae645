"""torch.nn.utils.fusion: fold an eval-mode batch norm into the convolution
or linear layer before it."""

import copy

from chutney.autograd import no_grad


def _parameter(t, requires_grad):
    from chutney.nn.modules import Parameter
    return Parameter(t.detach(), requires_grad)


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(weight, bias) of one convolution equal to conv then batch norm with
    these statistics; transpose for a transposed convolution's weight
    [C_in, C_out, ...]."""
    with no_grad():
        if conv_b is None:
            conv_b = bn_rm * 0
        if bn_w is None:
            bn_w = bn_rm * 0 + 1
        if bn_b is None:
            bn_b = bn_rm * 0
        scale = bn_w * (bn_rv + bn_eps).rsqrt()
        shape = [1] * conv_w.dim()
        shape[1 if transpose else 0] = -1
        w = conv_w * scale.reshape(shape).to(conv_w.dtype)
        b = ((conv_b - bn_rm) * scale + bn_b).to(conv_w.dtype)
    return (_parameter(w, conv_w.requires_grad),
            _parameter(b, getattr(conv_b, "requires_grad", False) or conv_w.requires_grad))


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """(weight, bias) of one linear layer equal to linear then batch norm."""
    with no_grad():
        if linear_b is None:
            linear_b = bn_rm * 0
        scale = bn_w * (bn_rv + bn_eps).rsqrt()
        w = linear_w * scale.unsqueeze(-1)
        b = (linear_b - bn_rm) * scale + bn_b
    return (_parameter(w, linear_w.requires_grad),
            _parameter(b, getattr(linear_b, "requires_grad", False) or linear_w.requires_grad))


def _with_bias(layer):
    """A copy of layer that has a bias (a library layer made without one
    has no bias tensor for its forward to use: it is made again with one)."""
    from chutney.nn import modules as M
    fused = copy.deepcopy(layer)
    if layer.bias is not None or not isinstance(layer, M._CLayer):
        return fused
    if isinstance(layer, M.Linear):
        new = M.Linear(layer.in_features, layer.out_features, bias=True)
    elif isinstance(layer, M.ConvTranspose2d):
        new = M.ConvTranspose2d(layer.in_channels, layer.out_channels, layer.kernel_size,
                                stride=layer.stride, padding=layer.padding,
                                output_padding=layer.output_padding, groups=layer.groups,
                                bias=True, dilation=layer.dilation)
    elif isinstance(layer, (M.Conv1d, M.Conv2d)):
        new = type(layer)(layer.in_channels, layer.out_channels, layer.kernel_size,
                          stride=layer.stride, padding=layer.padding, dilation=layer.dilation,
                          groups=layer.groups, bias=True)
    else:
        raise NotImplementedError(f"fusion: {type(layer).__name__} without a bias")
    new.to(layer.weight.device)
    new.train(layer.training)
    return new


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A new convolution computing bn(conv(x)) of the eval-mode modules."""
    assert not (conv.training or bn.training), "Fusion only for eval!"
    fused = _with_bias(conv)
    assert bn.running_mean is not None and bn.running_var is not None
    w, b = fuse_conv_bn_weights(conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.eps,
                                bn.weight, bn.bias, transpose)
    fused.weight, fused.bias = w, b
    return fused


def fuse_linear_bn_eval(linear, bn):
    """A new linear layer computing bn(linear(x)) of the eval-mode modules."""
    assert not (linear.training or bn.training), "Fusion only for eval!"
    assert linear.out_features == bn.num_features or bn.num_features == 1, \
        "To fuse, linear.out_features must equal bn.num_features or bn.num_features must be 1"
    assert bn.running_mean is not None and bn.running_var is not None
    fused = _with_bias(linear)
    w, b = fuse_linear_bn_weights(linear.weight, linear.bias, bn.running_mean, bn.running_var,
                                  bn.eps, bn.weight, bn.bias)
    fused.weight, fused.bias = w, b
    return fused
