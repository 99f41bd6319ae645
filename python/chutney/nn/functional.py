"""torch.nn.functional: activations, linear, convolutions, pooling, dropout,
normalisation, losses, pad, one_hot. All are the library's ops, so they
differentiate like any other."""

from chutney import _C

Tensor = _C.Tensor

# Straight from the library (signatures as PyTorch's).
conv1d = _C.conv1d
conv2d = _C.conv2d
dropout = _C.dropout
mse_loss = _C.mse_loss
l1_loss = _C.l1_loss
pad = _C.pad
one_hot = _C.one_hot


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _C.conv_transpose2d(input, weight, bias, stride, padding, dilation, groups,
                               output_padding)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _C.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _C.avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                         divisor_override)


def adaptive_avg_pool2d(input, output_size):
    return _C.adaptive_avg_pool2d(input, output_size)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    """PyTorch 2's F.scaled_dot_product_attention as one fused op:
    softmax(query @ key^T * scale + attn_mask) @ value. attn_mask is a bool
    mask (True takes part) or a float mask added to the scores; scale None is
    1/sqrt(E); dropout_p drops attention weights (chutney.manual_seed
    reproduces them). A query row whose every key is masked gives zeros,
    where PyTorch gives NaN."""
    return _C.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                           scale)


def relu(input, inplace=False):
    return input.relu()


def relu6(input, inplace=False):
    return input.clamp(0.0, 6.0)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return input.leaky_relu(negative_slope)


def elu(input, alpha=1.0, inplace=False):
    return input.elu(alpha)


def gelu(input, approximate="none"):
    return input.gelu(approximate=approximate)


def silu(input, inplace=False):
    return input.silu()


def softplus(input, beta=1, threshold=20):
    return input.softplus(beta, threshold)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return input.hardtanh(min_val, max_val)


def sigmoid(input):
    return input.sigmoid()


def tanh(input):
    return input.tanh()


def softmax(input, dim=None, dtype=None):
    return input.softmax(dim, dtype=dtype)


def log_softmax(input, dim=None, dtype=None):
    return input.log_softmax(dim, dtype=dtype)


def linear(input, weight, bias=None):
    """input @ weight^T + bias."""
    y = input.matmul(weight.t())
    return y + bias if bias is not None else y


def embedding(input, weight, padding_idx=None):
    """Rows of weight picked by integer input, any shape: [..., dim]."""
    rows = weight.index_select(0, input.reshape(-1))
    return rows.reshape(tuple(input.shape) + (weight.shape[1],))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """PyTorch's F.layer_norm as one op (the library's layer_norm) over the
    last len(normalized_shape) axes."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    shape = tuple(input.shape)
    n = len(normalized_shape)
    if n < 1 or n > len(shape) or tuple(shape[-n:]) != tuple(normalized_shape):
        raise RuntimeError("layer_norm: normalized_shape %s is not the end of the input's shape %s"
                           % (tuple(normalized_shape), shape))
    return _C.layer_norm(input, n, weight, bias, eps)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps)


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction is 'mean', 'sum' or 'none', not '{reduction}'")


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    return _C.cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    return _C.nll_loss(input, target, weight, ignore_index, reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    if weight is None:
        return _C.binary_cross_entropy(input, target, reduction)
    return _reduce(_C.binary_cross_entropy(input, target, "none") * weight, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    if weight is None:
        return _C.binary_cross_entropy_with_logits(input, target, reduction, pos_weight)
    loss = _C.binary_cross_entropy_with_logits(input, target, "none", pos_weight)
    return _reduce(loss * weight, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    d = (input - target).abs()
    loss = _C.where(d < beta, d.square() * (0.5 / beta), d - 0.5 * beta) if beta > 0 else d
    return _reduce(loss, reduction)
