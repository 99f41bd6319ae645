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


def eye_(tensor):
    """The identity matrix (ones on the diagonal of a 2-D tensor, even a
    rectangular one), in place."""
    from chutney.autograd import no_grad
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        eye = _C.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype, device=tensor.device)
        return tensor.copy_(eye)


def dirac_(tensor, groups=1):
    """A convolution weight [out, in, *k] that passes its input through:
    out channel d of each of the groups is input channel d at the kernel's
    centre (the first min(out/groups, in) channels), in place."""
    from chutney.autograd import no_grad
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = sizes[0] // groups
    with no_grad():
        tensor.zero_()
        centre = tuple(k // 2 for k in sizes[2:])
        for g in range(groups):
            for d in range(min(per_group, sizes[1])):
                tensor[(g * per_group + d, d) + centre] = 1
    return tensor


def sparse_(tensor, sparsity, std=0.01):
    """A 2-D tensor drawn from N(0, std), then in each column
    ceil(sparsity * rows) entries (rows drawn at random) set to zero, in
    place."""
    import math
    from chutney.autograd import no_grad
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        normal_(tensor, 0.0, std)
        if num_zeros:
            for c in range(cols):
                zero_rows = _C.randperm(rows)[:num_zeros].to(tensor.device)
                tensor[zero_rows, c] = 0
    return tensor


def _deprecated(new, new_name):
    import warnings
    old_name = new_name[:-1]

    def init(*args, **kwargs):
        warnings.warn(f"nn.init.{old_name} is now deprecated in favor of nn.init.{new_name}.",
                      stacklevel=2)
        return new(*args, **kwargs)

    init.__name__ = init.__qualname__ = old_name
    init.__doc__ = f"{old_name}(...) is {new_name}(...) (deprecated; use nn.init.{new_name})."
    return init


uniform = _deprecated(uniform_, "uniform_")
normal = _deprecated(normal_, "normal_")
constant = _deprecated(constant_, "constant_")
xavier_uniform = _deprecated(xavier_uniform_, "xavier_uniform_")
xavier_normal = _deprecated(xavier_normal_, "xavier_normal_")
kaiming_uniform = _deprecated(kaiming_uniform_, "kaiming_uniform_")
kaiming_normal = _deprecated(kaiming_normal_, "kaiming_normal_")
orthogonal = _deprecated(orthogonal_, "orthogonal_")
sparse = _deprecated(sparse_, "sparse_")
dirac = _deprecated(dirac_, "dirac_")
eye = _deprecated(eye_, "eye_")
