"""torch.nn.init: in place on a tensor (parameters too: nothing is recorded),
drawing from the library's generator (chutney.manual_seed)."""

from chutney import _C

calculate_gain = _C._calculate_gain
uniform_ = _C._init_uniform_
normal_ = _C._init_normal_
constant_ = _C._init_constant_
xavier_uniform_ = _C._init_xavier_uniform_
xavier_normal_ = _C._init_xavier_normal_
kaiming_uniform_ = _C._init_kaiming_uniform_
kaiming_normal_ = _C._init_kaiming_normal_


def zeros_(tensor):
    return _C._init_constant_(tensor, 0.0)


def ones_(tensor):
    return _C._init_constant_(tensor, 1.0)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """Normal(mean, std) values, drawn again where they fall outside [a, b]."""
    from chutney.autograd import no_grad
    with no_grad():
        def draw():
            return _C.randn(*tensor.shape, device=tensor.device).to(tensor.dtype) * std + mean
        out = draw()
        for _ in range(100):
            bad = (out < a).logical_or(out > b)
            if not bool(bad.any()):
                break
            out = _C.where(bad, draw(), out)
        return tensor.copy_(out.clamp(a, b).to(tensor.dtype))


def orthogonal_(tensor, gain=1.0):
    """A (semi-)orthogonal matrix from the QR of a normal one, as PyTorch
    (rows flattened from the second axis on)."""
    import numpy
    from chutney.autograd import no_grad
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    rows = tensor.shape[0]
    cols = tensor.numel() // rows if rows else 0
    flat = _C.randn(rows, cols).to(_C.float64).numpy()
    if rows < cols:
        flat = flat.T
    q, r = numpy.linalg.qr(flat)
    q = q * numpy.sign(numpy.diag(r))
    if rows < cols:
        q = q.T
    with no_grad():
        return tensor.copy_((_C.from_numpy(q.copy()) * gain).reshape(*tensor.shape)
                            .to(tensor.dtype).to(tensor.device))
