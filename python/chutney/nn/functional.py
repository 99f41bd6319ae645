"""torch.nn.functional: activations, linear, convolutions, pooling, dropout,
normalisation, losses, pad, one_hot. All are the library's ops, so they
differentiate like any other."""

import math
import struct as _struct

from chutney import _C
from chutney.autograd import no_grad

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


def _into(input, out, inplace):
    """inplace=True writes the result into input, as PyTorch: the library's
    copy_ is recorded by autograd, so gradients flow through the overwritten
    tensor, and a leaf that requires grad is refused as in PyTorch."""
    return input.copy_(out) if inplace else out


def relu(input, inplace=False):
    return input.relu_() if inplace else input.relu()


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _into(input, input.leaky_relu(negative_slope), inplace)


def elu(input, alpha=1.0, inplace=False):
    return _into(input, input.elu(alpha), inplace)


def gelu(input, approximate="none"):
    return input.gelu(approximate=approximate)


def silu(input, inplace=False):
    return _into(input, input.silu(), inplace)


def softplus(input, beta=1, threshold=20):
    return input.softplus(beta, threshold)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return _into(input, input.hardtanh(min_val, max_val), inplace)


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


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of weight picked by integer input, any shape: [..., dim].
    padding_idx's row gets no gradient; max_norm renormalises, in place, the
    rows looked up whose norm_type-norm exceeds it; scale_grad_by_freq
    divides each row's gradient by how often the batch names it. sparse is
    accepted, and the gradient is dense."""
    n = weight.shape[0]
    if padding_idx is not None:
        if padding_idx > 0 and padding_idx >= n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        if padding_idx < 0:
            if padding_idx < -n:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx += n
    flat = input.reshape(-1)
    if max_norm is not None:
        _embedding_renorm(weight, flat, max_norm, norm_type)
    rows = weight.index_select(0, flat)
    if scale_grad_by_freq and flat.numel():
        ids = flat.tolist()
        counts = {}
        for i in ids:
            counts[i] = counts.get(i, 0) + 1
        scale = _C.tensor([1.0 / counts[i] for i in ids], dtype=rows.dtype,
                          device=rows.device).reshape(-1, 1)
        # the value stays the row itself (exactly); only the gradient is scaled
        rows = rows.detach() + (rows - rows.detach()) * scale
    if padding_idx is not None:
        rows = _C.where((flat == padding_idx).reshape(-1, 1), rows.detach(), rows)
    return rows.reshape(tuple(input.shape) + (weight.shape[1],))


def _embedding_renorm(weight, flat, max_norm, norm_type):
    with no_grad():
        ids = sorted(set(flat.tolist()))
        if not ids:
            return
        idx = _C.tensor(ids, dtype=_C.int64, device=weight.device)
        rows = weight.index_select(0, idx)
        norms = rows.norm(norm_type, 1, keepdim=True)
        # PyTorch's 1e-7 keeps a renormalised row's norm just under max_norm
        scale = _C.where(norms > max_norm, max_norm / (norms + 1e-7), _C.ones_like(norms))
        weight.index_copy_(0, idx, rows * scale)


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


# ---- more activations (compositions of the library's ops) ----

def hardsigmoid(input, inplace=False):
    return _into(input, (input * (1.0 / 6) + 0.5).clamp(0.0, 1.0), inplace)


def hardswish(input, inplace=False):
    return _into(input, input * (input + 3.0).clamp(0.0, 6.0) * (1.0 / 6), inplace)


def mish(input, inplace=False):
    return _into(input, input * input.softplus().tanh(), inplace)


def selu(input, inplace=False):
    return _into(input, 1.0507009873554804934193349852946 *
                 input.elu(1.6732632423543772848170429916717), inplace)


def celu(input, alpha=1.0, inplace=False):
    # elu with the exponent's argument scaled: max(0,x) + min(0, alpha*(exp(x/alpha)-1))
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    out = (input * (1.0 / alpha)).elu(1.0) * alpha if alpha != 1.0 else input.elu(1.0)
    return _into(input, out, inplace)


def logsigmoid(input):
    return -((-input).softplus())


def softsign(input):
    return input / (input.abs() + 1.0)


def tanhshrink(input):
    return input - input.tanh()


def softmin(input, dim=None, dtype=None):
    return (-input).softmax(dim, dtype=dtype)


def glu(input, dim=-1):
    a, b = input.chunk(2, dim)
    return a * b.sigmoid()


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), weight one value or one per channel
    (axis 1)."""
    w = weight
    if w.numel() > 1 and input.dim() >= 2:
        w = w.reshape((1, -1) + (1,) * (input.dim() - 2))
    return _C.where(input >= 0, input, input * w)


# ---- normalisation ----

def _channel_shape(input):
    return (1, -1) + (1,) * (input.dim() - 2)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise each of num_groups groups of channels of input [N, C, ...]
    over its channels and positions; weight and bias [C]."""
    shape = tuple(input.shape)
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
        raise ValueError(f"group_norm: num_groups must be a positive int, not {num_groups!r}")
    if len(shape) < 2 or shape[1] % num_groups:
        raise RuntimeError(f"group_norm: {shape[1] if len(shape) > 1 else shape} channels do not "
                           f"split into {num_groups} groups")
    x = input.reshape(shape[0], num_groups, -1)
    mean = x.mean(dim=2, keepdim=True)
    var = x.var(dim=2, unbiased=False, keepdim=True)
    y = ((x - mean) * (var + eps).rsqrt()).reshape(shape)
    if weight is not None:
        y = y * weight.reshape(_channel_shape(input))
    if bias is not None:
        y = y + bias.reshape(_channel_shape(input))
    return y


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Each channel of each item normalised over its positions (input
    [N, C, ...]); with use_input_stats=False, by running_mean/var."""
    dims = tuple(range(2, input.dim()))
    if not dims:
        raise RuntimeError("instance_norm: the input needs positions after [N, C]")
    if use_input_stats:
        mean = input.mean(dim=dims, keepdim=True)
        var = input.var(dim=dims, unbiased=False, keepdim=True)
        if running_mean is not None or running_var is not None:
            n = 1
            for d in dims:
                n *= input.shape[d]
            with no_grad():
                m = mean.detach().mean(dim=0).reshape(-1)
                v = input.detach().var(dim=dims, unbiased=n > 1, keepdim=True).mean(dim=0)
                if running_mean is not None:
                    running_mean.mul_(1 - momentum).add_(m * momentum)
                if running_var is not None:
                    running_var.mul_(1 - momentum).add_(v.reshape(-1) * momentum)
    else:
        mean = running_mean.reshape(_channel_shape(input))
        var = running_var.reshape(_channel_shape(input))
    y = (input - mean) * (var + eps).rsqrt()
    if weight is not None:
        y = y * weight.reshape(_channel_shape(input))
    if bias is not None:
        y = y + bias.reshape(_channel_shape(input))
    return y


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2 over the last len(normalized_shape) axes) + eps)
    * weight; eps None is the dtype's machine epsilon, as PyTorch 2.4."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    n = len(normalized_shape)
    shape = tuple(input.shape)
    if n < 1 or n > len(shape) or tuple(shape[-n:]) != tuple(normalized_shape):
        raise RuntimeError("rms_norm: normalized_shape %s is not the end of the input's shape %s"
                           % (tuple(normalized_shape), shape))
    if eps is None:
        eps = {_C.float64: 2.220446049250313e-16, _C.float16: 0.0009765625,
               _C.bfloat16: 0.0078125}.get(input.dtype, 1.1920928955078125e-07)
    dims = tuple(range(len(shape) - n, len(shape)))
    y = input * (input.square().mean(dim=dims, keepdim=True) + eps).rsqrt()
    return y * weight if weight is not None else y


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha/size * sum of x^2 over `size` neighbouring channels)^beta."""
    sq = input.square().unsqueeze(1)  # [N, 1, C, ...]
    sq = pad(sq.reshape(sq.shape[0], 1, sq.shape[2], -1), (0, 0, size // 2, (size - 1) // 2))
    div = avg_pool2d(sq, (size, 1), stride=1).squeeze(1).reshape(tuple(input.shape))
    return input / (div * alpha + k).pow(beta)


# ---- pooling in one dimension (the 2-d kernels on a [N, C, 1, L] view) ----

def _single(v):
    return v[0] if isinstance(v, (tuple, list)) else v


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    stride = kernel_size if stride is None else stride
    r = max_pool2d(input.unsqueeze(-2), (1, _single(kernel_size)), (1, _single(stride)),
                   (0, _single(padding)), (1, _single(dilation)), ceil_mode, return_indices)
    if return_indices:
        return r[0].squeeze(-2), r[1].squeeze(-2)
    return r.squeeze(-2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    stride = kernel_size if stride is None else stride
    return avg_pool2d(input.unsqueeze(-2), (1, _single(kernel_size)), (1, _single(stride)),
                      (0, _single(padding)), ceil_mode, count_include_pad).squeeze(-2)


def adaptive_avg_pool1d(input, output_size):
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, _single(output_size))).squeeze(-2)


_MAX_AXIS = 1 << 24


def _positions(v, what):
    """An output size along one axis: a positive int, and at most 2^24 (the
    index lists of the resampling functions are built in Python)."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{what}: output sizes are ints, not {type(v).__name__}")
    if v < 1 or v > _MAX_AXIS:
        raise ValueError(f"{what}: output size {v} (1 to {_MAX_AXIS} supported)")
    return v


def _adaptive_windows(n_in, n_out):
    return [((i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)) for i in range(n_out)]


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """The largest value of each of PyTorch's adaptive windows (start
    floor(i*in/out), end ceil((i+1)*in/out)): one strided max_pool2d when the
    windows are uniform, else one max per window."""
    if return_indices:
        raise NotImplementedError("adaptive_max_pool2d: return_indices=True is not supported")
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    h, w = input.shape[-2], input.shape[-1]
    oh = h if oh is None else _positions(oh, "adaptive_max_pool2d")
    ow = w if ow is None else _positions(ow, "adaptive_max_pool2d")
    if h % oh == 0 and w % ow == 0:
        return max_pool2d(input, (h // oh, w // ow), (h // oh, w // ow))
    rows = []
    for a, b in _adaptive_windows(h, oh):
        band = input.narrow(-2, a, b - a).amax(dim=-2)
        rows.append(_C.stack([band.narrow(-1, c, d - c).amax(dim=-1)
                              for c, d in _adaptive_windows(w, ow)], -1))
    return _C.stack(rows, -2)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return adaptive_max_pool2d(input.unsqueeze(-2), (1, _single(output_size)),
                               return_indices).squeeze(-2)


# ---- resampling ----

def pixel_shuffle(input, upscale_factor):
    """[N, C*r*r, H, W] to [N, C, H*r, W*r]."""
    r = upscale_factor
    *lead, c, h, w = tuple(input.shape)
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle: {c} channels are not divisible by {r}*{r}")
    x = input.reshape(-1, c // (r * r), r, r, h, w).permute(0, 1, 4, 2, 5, 3)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """[N, C, H*r, W*r] to [N, C*r*r, H, W]."""
    r = downscale_factor
    *lead, c, h, w = tuple(input.shape)
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle: {h}x{w} is not divisible by {r}")
    x = input.reshape(-1, c, h // r, r, w // r, r).permute(0, 1, 3, 5, 2, 4)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def _f32(v):
    return _struct.unpack("f", _struct.pack("f", v))[0]


def _source_positions(x, n_in, n_out, scale, align_corners, cubic=False):
    """PyTorch's source position of each output index along one axis
    (area_pixel_compute_source_index), in the arithmetic PyTorch's kernels
    use: float for float32/16 inputs, so that ties fall as there."""
    r = (lambda v: v) if x.dtype == _C.float64 else _f32
    if align_corners:
        sc = r((n_in - 1) / (n_out - 1)) if n_out > 1 else 0.0
        return [r(sc * o) for o in range(n_out)]
    sc = r(scale)
    pos = [r(r(sc * r(o + 0.5)) - 0.5) for o in range(n_out)]
    return pos if cubic else [max(v, 0.0) for v in pos]


def _linear_axis(x, axis, n_out, scale, align_corners):
    """x resampled linearly along axis to n_out positions, as PyTorch's
    upsample_linear kernels."""
    n_in = x.shape[axis]
    i0, i1, w1 = [], [], []
    for src in _source_positions(x, n_in, n_out, scale, align_corners):
        a = min(int(src), n_in - 1)
        i0.append(a)
        i1.append(min(a + 1, n_in - 1))
        w1.append(src - a)
    shape = [1] * x.dim()
    shape[axis] = n_out
    w = _C.tensor(w1, dtype=x.dtype, device=x.device).reshape(shape)
    lo = x.index_select(axis, _C.tensor(i0, device=x.device))
    hi = x.index_select(axis, _C.tensor(i1, device=x.device))
    return lo * (1.0 - w) + hi * w


def _cubic_axis(x, axis, n_out, scale, align_corners, A=-0.75):
    """x resampled along axis with PyTorch's bicubic kernel (A = -0.75,
    indices clamped to the edge)."""
    n_in = x.shape[axis]

    def k1(t):  # |t| <= 1
        return ((A + 2) * t - (A + 3)) * t * t + 1

    def k2(t):  # 1 < |t| < 2
        return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A

    idx = [[], [], [], []]
    wts = [[], [], [], []]
    for src in _source_positions(x, n_in, n_out, scale, align_corners, cubic=True):
        f = int(src // 1)
        t = src - f
        for j, (d, wt) in enumerate(((-1, k2(t + 1)), (0, k1(t)), (1, k1(1 - t)), (2, k2(2 - t)))):
            idx[j].append(min(max(f + d, 0), n_in - 1))
            wts[j].append(wt)
    shape = [1] * x.dim()
    shape[axis] = n_out
    y = None
    for j in range(4):
        term = x.index_select(axis, _C.tensor(idx[j], device=x.device)) * \
            _C.tensor(wts[j], dtype=x.dtype, device=x.device).reshape(shape)
        y = term if y is None else y + term
    return y


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """torch.nn.functional.interpolate over the last 1-3 axes: nearest,
    nearest-exact, linear/bilinear/trilinear, bicubic and area, with PyTorch's
    source positions (a given scale_factor is used as is unless
    recompute_scale_factor)."""
    nsp = input.dim() - 2
    if nsp < 1 or nsp > 3:
        raise ValueError(f"interpolate: input of {input.dim()} dimensions (3 to 5 expected)")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    lin_modes = {"linear": 1, "bilinear": 2, "trilinear": 3, "bicubic": 2}
    if mode in lin_modes and lin_modes[mode] != nsp:
        raise ValueError(f"interpolate: mode '{mode}' needs {lin_modes[mode] + 2}-d input, "
                         f"got {input.dim()}-d")
    if mode not in ("nearest", "nearest-exact", "area") and mode not in lin_modes:
        raise NotImplementedError(f"interpolate: mode '{mode}'")
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    in_sizes = [input.shape[2 + i] for i in range(nsp)]
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor")
    if size is not None:
        out = [size] * nsp if isinstance(size, int) else list(size)
        scales = [None] * nsp
    else:
        sf = [scale_factor] * nsp if isinstance(scale_factor, (int, float)) else list(scale_factor)
        for s in sf:
            if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 < s < float("inf"):
                raise ValueError(f"interpolate: scale_factor {s!r} (a positive number expected)")
        out = [int(n * s // 1) for n, s in zip(in_sizes, sf)]
        scales = [None] * nsp if recompute_scale_factor else [1.0 / s for s in sf]
    if len(out) != nsp:
        raise ValueError(f"interpolate: {len(out)} sizes for {nsp} spatial axes")
    out = [_positions(n, "interpolate") for n in out]
    if mode == "area":
        if nsp == 1:
            return adaptive_avg_pool1d(input, out[0])
        if nsp == 2:
            return adaptive_avg_pool2d(input, tuple(out))
        raise NotImplementedError("interpolate: mode 'area' on 3 spatial axes")
    x = input
    for i in range(nsp):
        axis, n_in, n_out = 2 + i, in_sizes[i], out[i]
        scale = scales[i] if scales[i] is not None else n_in / n_out
        if mode in ("nearest", "nearest-exact"):
            # float arithmetic as PyTorch's nearest_idx (o * 1/3 can round up)
            sc, off = _f32(scale), 0.5 if mode == "nearest-exact" else 0.0
            if n_out == 2 * n_in and mode == "nearest":
                idx = [o >> 1 for o in range(n_out)]
            else:
                idx = [min(int(_f32(sc * (o + off)) // 1), n_in - 1) for o in range(n_out)]
            x = x.index_select(axis, _C.tensor(idx, device=x.device))
        elif mode == "bicubic":
            x = _cubic_axis(x, axis, n_out, scale, bool(align_corners))
        else:
            x = _linear_axis(x, axis, n_out, scale, bool(align_corners))
    return x


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    import warnings
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


# ---- dropout of whole channels ----

def _channel_dropout(input, p, training, lead):
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input
    if p == 1:
        return input * 0.0
    shape = tuple(input.shape[:lead]) + (1,) * (input.dim() - lead)
    keep = (_C.rand(*shape, device=input.device) >= p).to(input.dtype)
    return input * keep * (1.0 / (1 - p))


def dropout1d(input, p=0.5, training=True, inplace=False):
    return _channel_dropout(input, p, training, input.dim() - 1)


def dropout2d(input, p=0.5, training=True, inplace=False):
    # a 3-d input is (N, C, L), as PyTorch reads it (with a warning there)
    return _channel_dropout(input, p, training, 2 if input.dim() == 3 else input.dim() - 2)


def dropout3d(input, p=0.5, training=True, inplace=False):
    return _channel_dropout(input, p, training, input.dim() - 3)


# ---- more losses and distances ----

def huber_loss(input, target, reduction="mean", delta=1.0):
    d = (input - target).abs()
    return _reduce(_C.where(d < delta, d.square() * 0.5, (d - 0.5 * delta) * delta), reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target * (log(target) - input), input being log-probabilities; 0
    where target is 0. reduction 'batchmean' divides the sum by the batch."""
    if log_target:
        loss = target.exp() * (target - input)
    else:
        safe = _C.where(target > 0, target, _C.ones_like(target))
        loss = _C.where(target > 0, target * (safe.log() - input), _C.zeros_like(input))
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.dim() else 1)
    return _reduce(loss, reduction)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """x1.x2 / (max(|x1|, eps) * max(|x2|, eps)) along dim (PyTorch 2)."""
    n1 = x1.norm(2, dim, keepdim=True).clamp(min=eps)
    n2 = x2.norm(2, dim, keepdim=True).clamp(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return (x1 - x2 + eps).norm(p, -1, keepdim=keepdim)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    cos = cosine_similarity(input1, input2, dim=-1, eps=1e-12)
    zero = _C.zeros_like(cos)
    loss = _C.where(target == 1, 1.0 - cos,
                    _C.where(target == -1, (cos - margin).clamp(min=0.0), zero))
    return _reduce(loss, reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0.0), reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _reduce((-target * input).softplus(), reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """PyTorch's shape rules for var: input's shape, or input's without its
    last axis (one variance per item), or that with a last axis of 1."""
    if not isinstance(var, Tensor):
        var = _C.full(tuple(input.shape), float(var), dtype=input.dtype, device=input.device)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    v = var + (var.clamp(min=eps) - var).detach()  # clamped, its gradient passing (PyTorch)
    loss = 0.5 * (v.log() + (input - target).square() / v)
    if full:
        loss = loss + 0.5 * 1.8378770664093453  # log(2 pi)
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        t = target
        stirling = t * _C.where(t > 1, t, _C.ones_like(t)).log() - t + \
            0.5 * (t * 6.283185307179586).clamp(min=1.0).log()
        loss = loss + _C.where(t > 1, stirling, _C.zeros_like(t))
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    dp = pairwise_distance(anchor, positive, p, eps)
    dn = pairwise_distance(anchor, negative, p, eps)
    if swap:
        dn = dn.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce((dp - dn + margin).clamp(min=0.0), reduction)


# ---- affine_grid and grid_sample ----

def affine_grid(theta, size, align_corners=False):
    """Sampling positions in [-1, 1] for grid_sample: theta [N, 2, 3] applied
    to the output's normalised pixel centres (size [N, C, H, W])."""
    n, _, h, w = tuple(size)
    if theta.dim() != 3 or tuple(theta.shape[1:]) != (2, 3) or theta.shape[0] != n:
        raise ValueError(f"affine_grid: theta must be [{n}, 2, 3] for size {tuple(size)}, "
                         f"not {tuple(theta.shape)}")

    def axis(k):
        if align_corners:
            return [(-1.0 + 2.0 * i / (k - 1)) if k > 1 else 0.0 for i in range(k)]
        return [(2.0 * i + 1) / k - 1 for i in range(k)]
    xs, ys = axis(w), axis(h)
    base = _C.tensor([[x, y, 1.0] for y in ys for x in xs], dtype=theta.dtype,
                     device=theta.device)  # [H*W, 3]
    return base.matmul(theta.transpose(1, 2)).reshape(n, h, w, 2)


def _unnormalize(g, size, align_corners):
    return (g + 1) * (0.5 * (size - 1)) if align_corners else ((g + 1) * size - 1) * 0.5


def _reflect(x, lo2, hi2):
    """PyTorch's reflect_coordinates over [lo2/2, hi2/2]."""
    if lo2 == hi2:
        return x * 0.0
    lo, span = lo2 / 2.0, (hi2 - lo2) / 2.0
    d = (x - lo).abs()
    flips = (d / span).floor()
    extra = d - flips * span
    even = (flips % 2.0) == 0
    return _C.where(even, extra + lo, (extra * -1.0) + (span + lo))


def _clip(x, size):
    """x clamped to [0, size-1], its gradient 0 on and past the bounds (as
    PyTorch's clip_coordinates_set_grad)."""
    inside = (x > 0).logical_and(x < size - 1)
    return _C.where(inside, x, x.clamp(0.0, float(size - 1)).detach())


def _source(g, size, padding_mode, align_corners):
    x = _unnormalize(g, size, align_corners)
    if padding_mode == "border":
        return _clip(x, size)
    if padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
        return _clip(x, size)
    return x


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """input [N, C, H, W] sampled at grid [N, Ho, Wo, 2] ((x, y) in [-1, 1]):
    bilinear or nearest, with zeros, border or reflection padding, as
    PyTorch's (gradients for input and grid)."""
    if mode not in ("bilinear", "nearest"):
        raise NotImplementedError(f"grid_sample: mode '{mode}' (bilinear and nearest are "
                                  "supported)")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"grid_sample: padding_mode '{padding_mode}'")
    if input.dim() != 4 or grid.dim() != 4 or grid.shape[-1] != 2 or \
            grid.shape[0] != input.shape[0]:
        raise ValueError(f"grid_sample: input [N, C, H, W] and grid [N, Ho, Wo, 2] expected, got "
                         f"{tuple(input.shape)} and {tuple(grid.shape)}")
    align = bool(align_corners)
    n, c, h, w = tuple(input.shape)
    ho, wo = grid.shape[1], grid.shape[2]
    ix = _source(grid.narrow(3, 0, 1).reshape(n, 1, ho * wo), w, padding_mode, align)
    iy = _source(grid.narrow(3, 1, 1).reshape(n, 1, ho * wo), h, padding_mode, align)
    flat = input.reshape(n, c, h * w)

    def tap(xi, yi, weight):
        valid = (xi >= 0).logical_and(xi <= w - 1).logical_and(yi >= 0).logical_and(yi <= h - 1)
        xc, yc = xi.clamp(0.0, float(w - 1)), yi.clamp(0.0, float(h - 1))
        idx = (yc.to(_C.int64) * w + xc.to(_C.int64)).expand(n, c, ho * wo)  # exact past 2^24
        v = flat.gather(2, idx)
        return v * (weight * valid.to(weight.dtype))

    if mode == "nearest":
        # round half to even, as PyTorch's nearbyint
        rx, ry = ix.round().detach(), iy.round().detach()
        # the grid's gradient is zeros, as PyTorch's (not absent)
        out = tap(rx, ry, _C.ones_like(rx) + (ix + iy) * 0.0)
    else:
        x0, y0 = ix.floor().detach(), iy.floor().detach()
        x1, y1 = x0 + 1, y0 + 1
        wx1, wy1 = ix - x0, iy - y0
        wx0, wy0 = 1.0 - wx1, 1.0 - wy1
        out = (tap(x0, y0, wx0 * wy0) + tap(x1, y0, wx1 * wy0) + tap(x0, y1, wx0 * wy1) +
               tap(x1, y1, wx1 * wy1))
    return out.reshape(n, c, ho, wo)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + Gumbel noise) / tau) along dim; hard: the one-hot of
    its argmax, with the soft sample's gradient (straight-through)."""
    u = _C.rand(*logits.shape, device=logits.device).to(logits.dtype)
    g = -((-(u.clamp(min=1e-20)).log()).clamp(min=1e-20).log())
    y = ((logits + g) / tau).softmax(dim)
    if not hard:
        return y
    idx = y.argmax(dim=dim, keepdim=True)
    onehot = _C.zeros_like(y).scatter_add(dim, idx, _C.ones_like(idx).to(y.dtype))
    return onehot - y.detach() + y


def threshold(input, threshold, value, inplace=False):
    return _into(input, _C.where(input > threshold, input, _C.full_like(input, float(value))),
                 inplace)


def hardshrink(input, lambd=0.5):
    return _C.where(input.abs() > lambd, input, _C.zeros_like(input))


def softshrink(input, lambd=0.5):
    return _C.where(input > lambd, input - lambd,
                    _C.where(input < -lambd, input + lambd, _C.zeros_like(input)))


def bilinear(input1, input2, weight, bias=None):
    """x1^T W_k x2 (+ b_k) for each output k; weight [out, in1, in2]."""
    from chutney import einsum
    y = einsum("...i,kij,...j->...k", input1, weight, input2)
    return y + bias if bias is not None else y


# ---- 3-d convolution and pooling: 2-d ops over depth slices ----

def _triple(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v, v)


def _depth_windows(d_in, k, s, p, dil, ceil_mode=False):
    span = dil * (k - 1) + 1
    n = int(-(-(d_in + 2 * p - span) // s) + 1) if ceil_mode else int((d_in + 2 * p - span) // s + 1)
    if ceil_mode and (n - 1) * s >= d_in + p:  # a window must start inside the input or padding
        n -= 1
    if n < 1:
        raise RuntimeError(f"3-d window of depth {k} (dilation {dil}) larger than the padded "
                           f"depth {d_in + 2 * p}")
    return n


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """input [N, C, D, H, W], weight [O, C/groups, kD, kH, kW]: each output
    depth the sum of kD 2-d convolutions of depth slices."""
    if isinstance(padding, str):
        raise NotImplementedError("conv3d: string padding ('same', 'valid')")
    if input.dim() == 4 and weight.dim() == 5:  # unbatched [C, D, H, W]
        return conv3d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups)[0]
    s, p, dl = _triple(stride), _triple(padding), _triple(dilation)
    if input.dim() != 5 or weight.dim() != 5:
        raise RuntimeError(f"conv3d: expected 5-d input and weight, got {input.dim()}-d and "
                           f"{weight.dim()}-d")
    x = pad(input, (0, 0, 0, 0, p[0], p[0])) if p[0] else input
    kd = weight.shape[2]
    od = _depth_windows(input.shape[2], kd, s[0], p[0], dl[0])
    outs = []
    for o in range(od):
        acc = None
        for k in range(kd):
            t = conv2d(x.select(2, o * s[0] + k * dl[0]), weight.select(2, k), None, s[1:],
                       p[1:], dl[1:], groups)
            acc = t if acc is None else acc + t
        outs.append(acc)
    y = _C.stack(outs, 2)
    return y + bias.reshape(1, -1, 1, 1, 1) if bias is not None else y


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    if return_indices:
        raise NotImplementedError("max_pool3d: return_indices=True")
    k = _triple(kernel_size)
    s = _triple(stride if stride is not None else kernel_size)
    p, dl = _triple(padding), _triple(dilation)
    x = pad(input, (0, 0, 0, 0, p[0], p[0]), value=-math.inf) if p[0] else input
    od = _depth_windows(input.shape[2], k[0], s[0], p[0], dl[0], ceil_mode)
    outs = []
    for o in range(od):
        acc = None
        for j in range(k[0]):
            d = o * s[0] + j * dl[0]
            if d >= x.shape[2]:
                break
            t = max_pool2d(x.select(2, d), k[1:], s[1:], p[1:], dl[1:], ceil_mode)
            # ties keep the earlier slice: its gradient goes to the first maximum, as PyTorch
            acc = t if acc is None else _C.where(t > acc, t, acc)
        outs.append(acc)
    return _C.stack(outs, 2)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    k = _triple(kernel_size)
    s = _triple(stride if stride is not None else kernel_size)
    p = _triple(padding)
    if ceil_mode or divisor_override is not None or (any(p) and not count_include_pad):
        raise NotImplementedError("avg_pool3d: ceil_mode, divisor_override and padding not "
                                  "counted are not supported")
    x = pad(input, (0, 0, 0, 0, p[0], p[0])) if p[0] else input
    od = _depth_windows(input.shape[2], k[0], s[0], p[0], 1)
    outs = []
    for o in range(od):
        acc = None
        for j in range(k[0]):
            t = avg_pool2d(x.select(2, o * s[0] + j), k[1:], s[1:], p[1:], False, True)
            acc = t if acc is None else acc + t
        outs.append(acc * (1.0 / k[0]))
    return _C.stack(outs, 2)


def adaptive_avg_pool3d(input, output_size):
    """Means over PyTorch's adaptive windows along depth of the 2-d adaptive
    pool of each slice."""
    od, oh, ow = _triple(output_size)
    d = input.shape[2]
    od = d if od is None else _positions(od, "adaptive_avg_pool3d")
    slices = []
    for a, b in _adaptive_windows(d, od):
        m = input.narrow(2, a, b - a).mean(dim=2)
        slices.append(adaptive_avg_pool2d(m, (oh if oh is not None else m.shape[-2],
                                              ow if ow is not None else m.shape[-1])))
    return _C.stack(slices, 2)


# ---- transposed 1-d convolution, bags of embeddings ----

def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """The 2-d transposed convolution on a [N, C, 1, L] view; weight
    [C_in, C_out/groups, k] as PyTorch's."""
    unbatched = input.dim() == 2
    x = input.unsqueeze(0) if unbatched else input
    y = conv_transpose2d(x.unsqueeze(2), weight.unsqueeze(2), bias, (1, _single(stride)),
                         (0, _single(padding)), (0, _single(output_padding)), groups,
                         (1, _single(dilation))).squeeze(2)
    return y.squeeze(0) if unbatched else y


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sums, means or maxima of bags of embedding rows: input [B, n] (one bag
    per row) or 1-d with offsets (each bag from its offset to the next)."""
    if max_norm is not None:
        raise NotImplementedError("embedding_bag: max_norm")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode '{mode}'")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights only with mode='sum' "
                                  "(as PyTorch)")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None")
        b, n = input.shape
        bounds = [(i * n, (i + 1) * n) for i in range(b)]
        flat = input.reshape(-1)
        psw = per_sample_weights.reshape(-1) if per_sample_weights is not None else None
    else:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        starts = [int(v) for v in offsets.tolist()]
        ends = starts[1:] + ([] if include_last_offset else [input.numel()])
        if include_last_offset:
            starts = starts[:-1]
        bounds = list(zip(starts, ends))
        flat, psw = input, per_sample_weights
    rows = weight.index_select(0, flat)  # [total, dim]
    if psw is not None:
        rows = rows * psw.unsqueeze(-1)
    keep = None
    if padding_idx is not None:
        keep = (flat != padding_idx).to(weight.dtype).unsqueeze(-1)
        rows = rows * keep
    outs = []
    for a, e in bounds:
        seg = rows.narrow(0, a, e - a)
        if e == a:
            outs.append(_C.zeros(weight.shape[1], dtype=weight.dtype, device=weight.device))
        elif mode == "sum":
            outs.append(seg.sum(0))
        elif mode == "mean":
            count = keep.narrow(0, a, e - a).sum() if keep is not None else float(e - a)
            outs.append(seg.sum(0) / (count.clamp(min=1.0) if keep is not None else count))
        else:
            if keep is not None:
                seg = _C.where(keep.narrow(0, a, e - a) > 0, seg, _C.full_like(seg, -math.inf))
            m = seg.amax(0)
            outs.append(_C.where(m == -math.inf, _C.zeros_like(m), m))
    return _C.stack(outs, 0)


# ---- sliding blocks, batch norm, stochastic layers, more losses, pools, 3-d transposed
# convolution, channel shuffle, pdist (compositions of the library's ops) ----

def _legacy_reduction(size_average, reduce, reduction):
    """PyTorch's deprecated size_average/reduce flags, when given, decide."""
    if size_average is None and reduce is None:
        return reduction
    if not (True if reduce is None else reduce):
        return "none"
    return "mean" if (True if size_average is None else size_average) else "sum"


def _ints(v, n, what):
    t = tuple(int(e) for e in v) if isinstance(v, (tuple, list)) else (int(v),) * n
    if len(t) != n:
        raise ValueError(f"{what}: expected {n} values, got {len(v)}")
    return t


def _block_args(fn, kernel_size, dilation, padding, stride):
    k, d = _ints(kernel_size, 2, fn), _ints(dilation, 2, fn)
    p, s = _ints(padding, 2, fn), _ints(stride, 2, fn)
    for vals, name, ok in ((k, "kernel size", "greater than zero"), (d, "dilation", "greater than "
                           "zero"), (s, "stride", "greater than zero"), (p, "padding",
                                                                        "non-negative")):
        if any(v < 0 if name == "padding" else v <= 0 for v in vals):
            raise RuntimeError(f"{fn}: {name} should be {ok}, but got {vals}")
    return k, d, p, s


def _blocks(fn, size, k, d, p, s):
    n = [(size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    if n[0] < 1 or n[1] < 1:
        raise RuntimeError(f"{fn}: given spatial size {tuple(size)}, kernel_size={k}, "
                           f"dilation={d}, padding={p}, stride={s}, the array of sliding blocks "
                           f"would be {tuple(n)}, but its components must be at least one")
    return n


def _block_rows(k, d, s, n, device):
    # one index list per axis: every kernel tap's positions, so one index_select
    # per axis gathers all blocks (its gradient is the scatter-add fold needs)
    return _C.tensor([i * d + o * s for i in range(k) for o in range(n)], dtype=_C.int64,
                     device=device)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding blocks of input [N, C, H, W] (or [C, H, W]) as columns:
    [N, C*kh*kw, L], channel-major as PyTorch's im2col."""
    k, d, p, s = _block_args("unfold", kernel_size, dilation, padding, stride)
    if input.dim() not in (3, 4):
        raise RuntimeError(f"unfold: expected a 3-d or 4-d (batched) input, got "
                           f"{tuple(input.shape)}")
    x = input if input.dim() == 4 else input.unsqueeze(0)
    n, c, h, w = tuple(x.shape)
    oh, ow = _blocks("unfold", (h, w), k, d, p, s)
    if p[0] or p[1]:
        x = pad(x, (p[1], p[1], p[0], p[0]))
    x = x.index_select(2, _block_rows(k[0], d[0], s[0], oh, x.device))
    x = x.index_select(3, _block_rows(k[1], d[1], s[1], ow, x.device))
    y = x.reshape(n, c, k[0], oh, k[1], ow).permute(0, 1, 2, 4, 3, 5)
    y = y.reshape(n, c * k[0] * k[1], oh * ow)
    return y if input.dim() == 4 else y.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """unfold's adjoint: columns [N, C*kh*kw, L] (or [C*kh*kw, L]) summed
    back into [N, C, H, W], overlapping blocks adding up."""
    k, d, p, s = _block_args("fold", kernel_size, dilation, padding, stride)
    size = _ints(output_size, 2, "fold")
    if input.dim() not in (2, 3):
        raise RuntimeError(f"fold: expected a 2-d or 3-d (batched) input, got "
                           f"{tuple(input.shape)}")
    x = input if input.dim() == 3 else input.unsqueeze(0)
    n, ck, nl = tuple(x.shape)
    if ck % (k[0] * k[1]):
        raise RuntimeError(f"fold: the input's dimension 1 ({ck}) is not divisible by the "
                           f"product of kernel_size {k}")
    oh, ow = _blocks("fold", size, k, d, p, s)
    if nl != oh * ow:
        raise RuntimeError(f"fold: output_size={size}, kernel_size={k}, dilation={d}, "
                           f"padding={p}, stride={s} give {oh * ow} blocks, but the input's "
                           f"dimension 2 is {nl}")
    c = ck // (k[0] * k[1])
    hp, wp = size[0] + 2 * p[0], size[1] + 2 * p[1]
    x = x.reshape(n, c, k[0], k[1], oh, ow).permute(0, 1, 2, 4, 3, 5)
    x = x.reshape(n, c, k[0] * oh, k[1] * ow)
    z = dict(dtype=x.dtype, device=x.device)
    y = _C.zeros(n, c, k[0] * oh, wp, **z).index_add(3, _block_rows(k[1], d[1], s[1], ow,
                                                                      x.device), x)
    y = _C.zeros(n, c, hp, wp, **z).index_add(2, _block_rows(k[0], d[0], s[0], oh, x.device), y)
    y = y.narrow(2, p[0], size[0]).narrow(3, p[1], size[1])
    return y if input.dim() == 3 else y.squeeze(0)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Each channel (axis 1) normalised over every other axis: by the batch's
    statistics when training (running_mean/var, if given, updated in place:
    (1-momentum)*old + momentum*new, the variance unbiased), else by the
    running statistics."""
    if input.dim() < 2:
        raise RuntimeError(f"batch_norm: expected an input [N, C, ...], got {tuple(input.shape)}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
    shape = _channel_shape(input)
    if training:
        count = input.numel() // max(c, 1)
        if count == 1:
            raise ValueError("Expected more than 1 value per channel when training, got input "
                             f"size {tuple(input.shape)}")
        dims = (0,) + tuple(range(2, input.dim()))
        mean = input.mean(dim=dims, keepdim=True)
        var = input.var(dim=dims, unbiased=False, keepdim=True)
        with no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(mean.detach().reshape(-1) * momentum)
            if running_var is not None:
                running_var.mul_(1 - momentum).add_(
                    var.detach().reshape(-1) * (momentum * count / (count - 1)))
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean must be defined in evaluation mode")
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
    y = (input - mean) * (var + eps).rsqrt()
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def _check_p(p):
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


# SELU's alpha * scale: alpha dropout sets dropped units to SELU's negative saturation
_ALPHA_PRIME = 1.7580993408473766


def _alpha_dropout(input, p, training, feature):
    _check_p(p)
    if feature and input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        return input * 0.0
    shape = (tuple(input.shape[:2]) + (1,) * (input.dim() - 2)) if feature else \
        tuple(input.shape)
    keep = (_C.rand(*shape, device=input.device) >= p).to(input.dtype)
    # a and the shift keep zero mean and unit variance of SELU-normalised inputs
    a = 1.0 / math.sqrt((_ALPHA_PRIME ** 2 * p + 1) * (1 - p))
    return (input * keep + (keep - 1.0) * _ALPHA_PRIME + _ALPHA_PRIME * p) * a


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha_dropout(input, p, training, False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels (input [N, C, ...])."""
    return _alpha_dropout(input, p, training, True)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """x where x > 0, else a * x: a ~ U(lower, upper) per element when
    training, (lower + upper) / 2 otherwise."""
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:
        return _into(input, input.leaky_relu((lower + upper) / 2), inplace)
    a = _C.rand(*input.shape, device=input.device).to(input.dtype) * (upper - lower) + lower
    return _into(input, input * _C.where(input > 0, _C.ones_like(a), a), inplace)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """x where target is 1, max(0, margin - x) where it is -1 (a target that
    is neither takes both terms, as PyTorch)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    zero = _C.zeros_like(input)
    loss = _C.where(target != 1, (margin - input).clamp(min=0.0), zero) + \
        _C.where(target != -1, input, zero)
    return _reduce(loss, reduction)


def _class_rows(input, fn):
    """input [N, C] (a 1-d input one row, a 0-d one [1, 1]) and its target
    shape for the per-item losses."""
    if input.dim() > 2:
        raise RuntimeError(f"{fn}: expected a 0-d, 1-d or 2-d input, got {tuple(input.shape)}")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    return x, x.shape[0], x.shape[1]


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over target classes j and non-target classes i of
    max(0, 1 - (x[j] - x[i])) / C; each row of target lists class indices,
    ended by the first -1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    x, n, c = _class_rows(input, "multilabel_margin_loss")
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"multilabel_margin_loss: inconsistent size {tuple(target.shape)} for "
                           f"target, input {tuple(input.shape)}")
    rows = target.reshape(n, c).tolist()
    count = [[0.0] * c for _ in range(n)]
    for r, row in enumerate(rows):
        for j in row:
            if j == -1:
                break
            if j < -1 or j >= c:
                raise RuntimeError("multilabel_margin_loss: target is out of range")
            count[r][j] += 1.0  # a class listed twice counts twice, as PyTorch
    z = dict(dtype=x.dtype, device=x.device)
    cnt = _C.tensor(count, **z)
    others = (cnt == 0).to(x.dtype)
    hinge = (1.0 - x.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0.0)  # [N, j, i]
    loss = (hinge * cnt.unsqueeze(2) * others.unsqueeze(1)).sum(dim=(1, 2)) * (1.0 / c)
    if input.dim() < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """Binary cross-entropy with logits of each class, averaged over the
    classes (the last axis)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = target * (-input).softplus() + (1 - target) * input.softplus()
    if weight is not None:
        loss = loss * weight
    c = input.shape[-1] if input.dim() else 1
    loss = loss.sum(dim=input.dim() - 1) * (1.0 / c) if input.dim() else loss
    return _reduce(loss, reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """sum over classes i != y of w[y] * max(0, margin - x[y] + x[i])^p / C."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    x, n, c = _class_rows(input, "multi_margin_loss")
    if target.numel() != n or target.dim() > 1:
        raise RuntimeError(f"multi_margin_loss: inconsistent target size, got "
                           f"{tuple(target.shape)} for input {tuple(input.shape)}")
    y = target.reshape(n, 1)
    if n and (bool((y < 0).any()) or bool((y >= c).any())):
        raise RuntimeError("multi_margin_loss: target out of range")
    m = (x - x.gather(1, y) + margin).clamp(min=0.0)
    if p == 2:
        m = m.square()
    not_y = 1.0 - one_hot(y.reshape(-1), c).to(x.dtype)
    m = m * not_y
    if weight is not None:
        m = m * weight.index_select(0, y.reshape(-1)).unsqueeze(1)
    loss = m.sum(dim=1) * (1.0 / c)
    return _reduce(loss.reshape(tuple(target.shape)) if input.dim() < 2 else loss, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """max(0, d(a, p) - d(a, n) + margin), d pairwise_distance unless given
    (swap: d(a, n) replaced by d(p, n) where smaller)."""
    dist = distance_function if distance_function is not None else pairwise_distance
    dp, dn = dist(anchor, positive), dist(anchor, negative)
    if swap:
        dn = dn.minimum(dist(positive, negative))
    return _reduce((dp - dn + margin).clamp(min=0.0), reduction)


def _lengths(v):
    if isinstance(v, Tensor):
        v = v.tolist()
    return [int(e) for e in v] if isinstance(v, (list, tuple)) else [int(v)]


# A finite stand-in for log(0) in the CTC recursion: logsumexp over entries
# that are all -inf has NaN gradients, and -1e30 + anything finite stays -1e30.
_LOG_ZERO = -1e30


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """Connectionist temporal classification: -log of the total probability
    of the alignments of each target, log_probs [T, N, C] (or [T, C]),
    targets padded [N, S] or concatenated 1-d. The forward (alpha)
    recursion in log space, over the library's ops: autograd differentiates
    it (the exact derivative; PyTorch's ctc_loss returns exp(log_probs) minus
    it, which agrees after a log_softmax)."""
    unbatched = log_probs.dim() == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if lp.dim() != 3:
        raise RuntimeError(f"ctc_loss: log_probs must be [T, N, C] or [T, C], got "
                           f"{tuple(log_probs.shape)}")
    t_max, n, c = tuple(lp.shape)
    if not 0 <= blank < c:
        raise RuntimeError("ctc_loss: blank must be in label range")
    in_len = _lengths(input_lengths)
    tg_len = _lengths(target_lengths)
    if len(in_len) != n:
        raise RuntimeError(f"ctc_loss: input_lengths must be of size batch_size {n}")
    if len(tg_len) != n:
        raise RuntimeError(f"ctc_loss: target_lengths must be of size batch_size {n}")
    if any(v > t_max or v < 0 for v in in_len):
        raise RuntimeError(f"ctc_loss: expected input_lengths to have values in [0, {t_max}], "
                           f"got {in_len}")
    tg = targets.unsqueeze(0) if unbatched else targets
    flat = tg.reshape(-1).tolist()
    if tg.dim() == 1:  # concatenated
        if sum(tg_len) > len(flat):
            raise RuntimeError(f"ctc_loss: targets has {len(flat)} labels, target_lengths sum to "
                               f"{sum(tg_len)}")
        starts = [sum(tg_len[:i]) for i in range(n)]
        labels = [flat[a:a + m] for a, m in zip(starts, tg_len)]
    else:
        s_cap = tg.shape[1]
        if any(m > s_cap or m < 0 for m in tg_len):
            raise RuntimeError(f"ctc_loss: target_lengths {tg_len} exceed the targets' size "
                               f"{s_cap} at dimension 1")
        labels = [flat[i * s_cap:i * s_cap + m] for i, m in enumerate(tg_len)]
    width = 2 * max(tg_len + [0]) + 1
    ext, skip, start, feasible = [], [], [], []
    for lab in labels:
        e = [blank]
        for v in lab:
            e += [v, blank]
        ext.append(e + [blank] * (width - len(e)))
        # a label may be reached from two back when it differs from the one
        # two back (that is, from the previous label, across a blank)
        skip.append([s >= 2 and s < len(e) and e[s] != blank and e[s] != e[s - 2]
                     for s in range(width)])
        start.append([s == 0 or (s == 1 and len(lab) > 0) for s in range(width)])
        repeats = sum(1 for a, b in zip(lab, lab[1:]) if a == b)
        feasible.append(len(lab) + repeats)
    dev = lp.device
    ext_t = _C.tensor(ext, dtype=_C.int64, device=dev)
    emit = lp.gather(2, ext_t.unsqueeze(0).expand(t_max, n, width)).clamp(min=_LOG_ZERO)
    log_zero = _C.full((n, width), _LOG_ZERO, dtype=lp.dtype, device=dev)
    skip_t = _C.tensor(skip, dtype=_C.bool, device=dev)
    alpha = _C.where(_C.tensor(start, dtype=_C.bool, device=dev), emit[0], log_zero)
    pad1 = log_zero.narrow(1, 0, 1)
    pad2 = log_zero.narrow(1, 0, min(2, width))
    for t in range(1, t_max):
        live = [t < v for v in in_len]
        if not any(live):
            break
        a1 = _C.cat([pad1, alpha.narrow(1, 0, width - 1)], 1)
        a2 = _C.cat([pad2, alpha.narrow(1, 0, width - 2)], 1) if width > 2 else log_zero
        a2 = _C.where(skip_t, a2, log_zero)
        new = _C.stack([alpha, a1, a2], 0).logsumexp(0) + emit[t]
        if all(live):
            alpha = new
        else:
            alpha = _C.where(_C.tensor(live, dtype=_C.bool, device=dev).unsqueeze(1), new, alpha)
    last = _C.tensor([[2 * m] for m in tg_len], dtype=_C.int64, device=dev)
    prev = _C.tensor([[max(2 * m - 1, 0)] for m in tg_len], dtype=_C.int64, device=dev)
    has_prev = _C.tensor([[m > 0] for m in tg_len], dtype=_C.bool, device=dev)
    ends = _C.cat([alpha.gather(1, last),
                   _C.where(has_prev, alpha.gather(1, prev), log_zero.narrow(1, 0, 1))], 1)
    loss = -ends.logsumexp(1)
    # no alignment fits in the input: PyTorch's loss is inf (0 with zero_infinity)
    ok = _C.tensor([in_len[i] >= feasible[i] for i in range(n)], dtype=_C.bool, device=dev)
    if in_len and min(in_len) == 0:  # an empty input: probability 1 of the empty target
        loss = _C.where(_C.tensor([v == 0 for v in in_len], dtype=_C.bool, device=dev),
                        _C.zeros_like(loss), loss)
    loss = _C.where(ok, loss, _C.full_like(loss, 0.0 if zero_infinity else math.inf))
    if reduction == "mean":
        div = _C.tensor([float(max(m, 1)) for m in tg_len], dtype=loss.dtype, device=dev)
        return (loss / div).mean()
    if unbatched and reduction == "none":
        return loss.reshape(())
    return _reduce(loss, reduction)


def _lp_norm_of_sum(total, norm_type):
    """total^(1/p), its gradient 0 where total is 0 (PyTorch's)."""
    nz = total != 0
    safe = _C.where(nz, total, _C.ones_like(total))
    return _C.where(nz, safe.pow(1.0 / norm_type), _C.zeros_like(total))


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum of x^p over each window)^(1/p)."""
    k = _single(kernel_size)
    total = avg_pool1d(input.pow(norm_type), k, k if stride is None else stride, 0,
                       ceil_mode) * float(k)
    return _lp_norm_of_sum(total, norm_type)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    kh, kw = _pair_ints(kernel_size)
    total = avg_pool2d(input.pow(norm_type), (kh, kw),
                       (kh, kw) if stride is None else stride, 0, ceil_mode) * float(kh * kw)
    return _lp_norm_of_sum(total, norm_type)


def _pair_ints(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _max_unpool(input, indices, kernel_size, stride, padding, output_size, nsp, name):
    k = _ints(kernel_size, nsp, name)
    s = k if stride is None else _ints(stride, nsp, name)
    p = _ints(padding, nsp, name)
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"{name}: expected shape of indices to be same as that of the input "
                           f"tensor ({tuple(input.shape)}) but got indices tensor with shape: "
                           f"{tuple(indices.shape)}")
    if input.dim() not in (nsp + 1, nsp + 2):
        raise RuntimeError(f"{name}: input should be a {nsp + 1}d or {nsp + 2}d tensor, but got "
                           f"a tensor with {input.dim()} dimensions")
    in_sp = tuple(input.shape[-nsp:])
    default = [(in_sp[i] - 1) * s[i] + k[i] - 2 * p[i] for i in range(nsp)]
    if output_size is None:
        out_sp = default
    else:
        out_sp = list(output_size)
        if len(out_sp) == nsp + 2:
            out_sp = out_sp[2:]
        if len(out_sp) != nsp:
            raise ValueError(f"output_size should be a sequence containing {nsp} or {nsp + 2} "
                             f"elements, but it has a length of '{len(out_sp)}'")
        for i in range(nsp):
            lo, hi = default[i] - s[i], default[i] + s[i]
            if not lo < out_sp[i] < hi:
                raise ValueError(f'invalid output_size "{tuple(output_size)}" (dim {i} must be '
                                 f'between {lo} and {hi})')
    plane = math.prod(int(v) for v in out_sp)
    lead = tuple(input.shape[:-nsp])
    x = input.reshape(math.prod(lead), math.prod(in_sp))
    idx = indices.reshape(tuple(x.shape))
    flat = idx.reshape(-1).tolist()
    bad = [v for v in flat if v < 0 or v >= plane]
    if bad:
        raise RuntimeError(f"{name}: found an invalid max index: {bad[0]} (output volumes are "
                           f"of size {'x'.join(str(v) for v in out_sp)})")
    zero = _C.zeros(x.shape[0], plane, dtype=x.dtype, device=x.device)
    # overlapping windows can name one position twice (the same maximum): it
    # takes one value (the last written, as PyTorch), yet every input gets
    # the gradient there, as PyTorch's backward gathers it for each
    width = x.shape[1]
    seen, keep = set(), [1.0] * len(flat)
    for j in range(len(flat) - 1, -1, -1):
        key = (j // max(width, 1), flat[j])
        if key in seen:
            keep[j] = 0.0
        seen.add(key)
    out = zero.scatter_add(1, idx, x if all(keep) else
                           x * _C.tensor(keep, dtype=x.dtype, device=x.device).reshape(x.shape))
    if not all(keep):
        dropped = 1.0 - _C.tensor(keep, dtype=x.dtype, device=x.device).reshape(x.shape)
        extra = zero.scatter_add(1, idx, x * dropped)
        out = out + (extra - extra.detach())
    return out.reshape(lead + tuple(int(v) for v in out_sp))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """max_pool1d's inverse: each value put back at its index, zeros
    elsewhere; input [N, C, L] or [C, L]."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1,
                       "max_unpool1d")


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """max_pool2d's inverse; indices flat over each H*W plane."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2,
                       "max_unpool2d")


def upsample_nearest(input, size=None, scale_factor=None):
    import warnings
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Bilinear with align_corners=True, as PyTorch's."""
    import warnings
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """input [N, C_in, D, H, W], weight [C_in, C_out/groups, kD, kH, kW]:
    output depth q (before padding is cut) sums the 2-d transposed
    convolutions of input slice i by kernel slice k wherever
    i*stride + k*dilation = q."""
    if input.dim() == 4 and weight.dim() == 5:  # unbatched [C, D, H, W]
        return conv_transpose3d(input.unsqueeze(0), weight, bias, stride, padding,
                                output_padding, groups, dilation)[0]
    if input.dim() != 5 or weight.dim() != 5:
        raise RuntimeError(f"conv_transpose3d: expected 5-d input and weight, got "
                           f"{input.dim()}-d and {weight.dim()}-d")
    s, p, op, dl = _triple(stride), _triple(padding), _triple(output_padding), _triple(dilation)
    if input.shape[1] != weight.shape[0]:
        raise RuntimeError(f"conv_transpose3d: input has {input.shape[1]} channels, weight "
                           f"expects {weight.shape[0]}")
    if any(o >= max(a, b) or o < 0 for o, a, b in zip(op, s, dl)):
        raise RuntimeError("conv_transpose3d: output padding must be smaller than either stride "
                           "or dilation")
    d_in, kd = input.shape[2], weight.shape[2]
    d_out = (d_in - 1) * s[0] - 2 * p[0] + dl[0] * (kd - 1) + op[0] + 1
    if d_out < 1:
        raise RuntimeError(f"conv_transpose3d: output depth {d_out} is too small")
    terms = {}
    for i in range(d_in):
        for k in range(kd):
            q = i * s[0] + k * dl[0] - p[0]
            if 0 <= q < d_out:
                terms.setdefault(q, []).append((i, k))
    slices, blank = [], None
    for q in range(d_out):
        acc = None
        for i, k in terms.get(q, ()):
            t = conv_transpose2d(input.select(2, i), weight.select(2, k), None, s[1:], p[1:],
                                 op[1:], groups, dl[1:])
            acc = t if acc is None else acc + t
        slices.append(acc)
    for t in slices:
        if t is not None:
            blank = _C.zeros_like(t)
            break
    if blank is None:  # no slice of the input reaches the output: its shape from one
        blank = _C.zeros_like(conv_transpose2d(input.select(2, 0), weight.select(2, 0), None,
                                               s[1:], p[1:], op[1:], groups, dl[1:]))
    y = _C.stack([t if t is not None else blank for t in slices], 2)
    return y + bias.reshape(1, -1, 1, 1, 1) if bias is not None else y


def channel_shuffle(input, groups):
    """[N, g*k, ...] to [N, k*g, ...]: channel j of group i goes to j*g + i."""
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with "
                           f"sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of "
                           f"groups:{groups}")
    shape = tuple(input.shape)
    if shape[1] % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {shape[1]} "
                           f"channels and {groups} groups.")
    x = input.reshape((shape[0], groups, shape[1] // groups) + shape[2:]).transpose(1, 2)
    return x.reshape(shape)


def pdist(input, p=2):
    """The p-norm distances between the rows of input [N, M], pairs i < j in
    row-major order: [N*(N-1)/2]."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    ii = [i for i in range(n) for _ in range(i + 1, n)]
    jj = [j for i in range(n) for j in range(i + 1, n)]
    if not ii:
        return _C.zeros(0, dtype=input.dtype, device=input.device) + input.sum() * 0.0
    diff = input.index_select(0, _C.tensor(ii, dtype=_C.int64, device=input.device)) - \
        input.index_select(0, _C.tensor(jj, dtype=_C.int64, device=input.device))
    if p == 0:  # a count: its gradient is zero, as PyTorch's
        return (diff != 0).to(input.dtype).sum(1) + diff.sum(1) * 0.0
    return diff.norm(p, 1)


# ---- in-place activations (torch.nn.functional.relu_ and its kin) ----

def relu_(input):
    return input.relu_()


def elu_(input, alpha=1.0):
    return elu(input, alpha, True)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, True)


def threshold_(input, threshold, value):
    return globals()["threshold"](input, threshold, value, True)


def celu_(input, alpha=1.0):
    return celu(input, alpha, True)


def selu_(input):
    return selu(input, True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, True)


# ---- pad: the library's constant/reflect/replicate, circular here ----

def pad(input, pad, mode="constant", value=None):  # noqa: F811 (the library's, plus circular)
    """torch.nn.functional.pad; mode 'circular' wraps the last 1-3 axes of a
    3-d to 5-d input around (one index_select per axis, so the gradient of
    a value copied twice is summed)."""
    if mode != "circular":
        return _C.pad(input, pad, mode, value)
    pad = list(pad)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    nsp = input.dim() - 2
    unsupported = NotImplementedError("Only 2D, 3D, 4D, 5D padding with non-constant padding "
                                      "are supported for now")
    if nsp not in (0, 1, 2, 3):
        raise unsupported
    if len(pad) // 2 > nsp:
        raise RuntimeError(f"Invalid padding size, expected {2 * nsp} but got {len(pad)}")
    if len(pad) // 2 != nsp:
        raise unsupported
    x = input
    for i in range(nsp):
        axis = x.dim() - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        n = x.shape[axis]
        if lo > n or hi > n:
            raise RuntimeError("Padding value causes wrapping around more than once.")
        size = n + lo + hi
        if size <= 0:
            raise RuntimeError(f"Padding would give axis {axis} a size of {size}")
        idx = _C.tensor([(j - lo) % n for j in range(size)], dtype=_C.int64, device=x.device)
        x = x.index_select(axis, idx)
    return x


# ---- pooling: the forms with indices, 3-d adaptive max, 3-d unpool ----

def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """The largest value of each of PyTorch's adaptive windows over
    [N, C, D, H, W] (or [C, D, H, W]): the depth window's maximum of the
    2-d adaptive maxima of its slices."""
    if return_indices:
        raise NotImplementedError("adaptive_max_pool3d: return_indices=True is not supported")
    if input.dim() not in (4, 5):
        raise RuntimeError(f"adaptive_max_pool3d(): Expected 4D or 5D tensor, but got "
                           f"{list(input.shape)}")
    od, oh, ow = _triple(output_size)
    d = input.shape[-3]
    od = d if od is None else _positions(od, "adaptive_max_pool3d")
    hw = (oh if oh is not None else input.shape[-2], ow if ow is not None else input.shape[-1])
    slices = [adaptive_max_pool2d(input.narrow(-3, a, b - a).amax(dim=-3), hw)
              for a, b in _adaptive_windows(d, od)]
    return _C.stack(slices, -3)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """max_pool3d's inverse; indices flat over each D*H*W volume."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3,
                       "max_unpool3d")


native_channel_shuffle = channel_shuffle


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True):
    """nn.MultiheadAttention's forward with the weights passed in (inputs
    [L, N, E] or unbatched [L, E]); returns (output, weights or None)."""
    import types
    from chutney.nn.transformer import MultiheadAttention
    if bias_k is not None or bias_v is not None or add_zero_attn:
        raise NotImplementedError("multi_head_attention_forward: bias_k, bias_v and "
                                  "add_zero_attn are not supported")
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k and static_v are not "
                                  "supported")
    if embed_dim_to_check % num_heads:
        raise AssertionError(f"embed_dim {embed_dim_to_check} not divisible by num_heads "
                             f"{num_heads}")
    if use_separate_proj_weight and (q_proj_weight is None or k_proj_weight is None or
                                     v_proj_weight is None):
        raise AssertionError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight "
                             "or v_proj_weight is None")
    # MultiheadAttention.forward reads only these attributes of its module
    shim = types.SimpleNamespace(
        embed_dim=embed_dim_to_check, num_heads=num_heads,
        head_dim=embed_dim_to_check // num_heads,
        _qkv_same_embed_dim=not use_separate_proj_weight, in_proj_weight=in_proj_weight,
        q_proj_weight=q_proj_weight, k_proj_weight=k_proj_weight, v_proj_weight=v_proj_weight,
        in_proj_bias=in_proj_bias, dropout=dropout_p, training=training, batch_first=False,
        out_proj=lambda x: linear(x, out_proj_weight, out_proj_bias))
    return MultiheadAttention.forward(shim, query, key, value, key_padding_mask, need_weights,
                                      attn_mask, average_attn_weights)
