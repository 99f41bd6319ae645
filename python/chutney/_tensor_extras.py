"""PyTorch functions and Tensor methods written in Python over the library's
ops: compositions that differentiate like any other (isnan, lerp, addmm,
einsum, roll, diagonal, ...), and ops whose indices come from the host
(sort, topk, unique, nonzero, bincount, searchsorted): their indices are
computed with NumPy from the values, and the values they return are a
gather of the input, so gradients flow through them as PyTorch's do.

Each function is chutney.NAME(tensor, ...) and, where PyTorch has the
method, tensor.NAME(...); the library's own methods are never replaced.
"""

import functools
import inspect
import math
import string
from collections import namedtuple

from chutney import _C, _generator
from chutney.autograd import no_grad

Tensor = _C.Tensor

METHODS = {}
FUNCTIONS = {}


def _export(method=True, function=True, names=()):
    def put(fn):
        for name in names or (fn.__name__,):
            if method:
                METHODS[name] = fn
            if function:
                FUNCTIONS[name] = fn
        return fn
    return put


def _np(t):
    """t's values as a NumPy array (bfloat16, which NumPy lacks, as float32:
    exact, and only indices are taken from it)."""
    import numpy
    d = t.detach().cpu()
    if d.dtype == _C.bfloat16:
        d = d.float()
    return numpy.asarray(d.contiguous().numpy())


def _dim(d, n):
    if d < -max(n, 1) or d >= max(n, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-max(n, 1)}, {max(n, 1) - 1}], but got {d})")
    return d % n if n else 0


def _index_tensor(a, device):
    return _C.tensor(a.astype("int64"), device=device)


# ---- elementwise ----

@_export()
def isnan(input):
    return input != input


@_export()
def isinf(input):
    return input.abs() == math.inf if input.is_floating_point() else input != input


@_export()
def isposinf(input):
    return input == math.inf


@_export()
def isneginf(input):
    return input == -math.inf


@_export()
def isfinite(input):
    if not input.is_floating_point():
        return input == input
    return (input == input).logical_and(input.abs() != math.inf)


@_export()
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    if not input.is_floating_point():
        return input.clone()
    big = {_C.float16: 65504.0, _C.bfloat16: 3.3895313892515355e38,
           _C.float64: 1.7976931348623157e308}.get(input.dtype, 3.4028234663852886e38)
    y = _C.where(input != input, _C.full_like(input, nan), input)
    y = _C.where(y == math.inf, _C.full_like(input, big if posinf is None else posinf), y)
    return _C.where(y == -math.inf, _C.full_like(input, -big if neginf is None else neginf), y)


@_export()
def clamp_min(input, min):  # noqa: A002 (PyTorch's name)
    return input.clamp(min=min)


@_export()
def clamp_max(input, max):  # noqa: A002
    return input.clamp(max=max)


@_export()
def lerp(input, end, weight):
    return input + (end - input) * weight


@_export()
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    prod = mat1.matmul(mat2)
    if beta == 0:  # input ignored, NaN and inf in it too (PyTorch)
        return prod * alpha if alpha != 1 else prod
    return (input * beta if beta != 1 else input) + (prod * alpha if alpha != 1 else prod)


@_export()
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    return addmm(input, batch1, batch2, beta=beta, alpha=alpha)


@_export()
def addmv(input, mat, vec, *, beta=1, alpha=1):
    return addmm(input, mat, vec, beta=beta, alpha=alpha)


@_export()
def addcmul(input, tensor1, tensor2, *, value=1):
    return input + tensor1 * tensor2 * value


@_export()
def addcdiv(input, tensor1, tensor2, *, value=1):
    return input + tensor1 / tensor2 * value


@_export(names=("outer", "ger"))
def outer(input, vec2):
    return input.unsqueeze(1) * vec2.unsqueeze(0)


@_export()
def sinh(input):
    # from expm1: no cancellation near 0
    return (input.expm1() - (-input).expm1()) * 0.5


@_export()
def cosh(input):
    return (input.exp() + (-input).exp()) * 0.5


@_export()
def exp2(input):
    return (input * math.log(2.0)).exp()


@_export()
def logit(input, eps=None):
    x = input if eps is None else input.clamp(eps, 1 - eps)
    return (x / (1 - x)).log()


@_export()
def logaddexp(input, other):
    m = input.maximum(other)
    m = _C.where(m.abs() == math.inf, _C.zeros_like(m), m).detach()
    return ((input - m).exp() + (other - m).exp()).log() + m


@_export()
def hypot(input, other):
    return (input.square() + other.square()).sqrt()


@_export()
def frac(input):
    return input - input.trunc()


@_export()
def deg2rad(input):
    return input * (math.pi / 180)


@_export()
def rad2deg(input):
    return input * (180 / math.pi)


@_export()
def sgn(input):
    return input.sign()


@_export()
def signbit(input):
    import numpy
    return _C.tensor(numpy.signbit(_np(input)), device=input.device)


@_export()
def xlogy(input, other):
    """input * log(other), 0 where input is 0 (unless other is NaN). The
    slope in input is log(other) there too (0 where other is 0 or inf), as
    PyTorch's."""
    zero = input == 0
    safe = _C.where(zero & ((other == 0) | other.isinf()), _C.ones_like(other), other)
    y = input * safe.log()
    return _C.where(other != other, other * 1.0, y)


@_export()
def bernoulli(input, p=None, *, generator=None):
    prob = input if p is None else _C.full_like(input, p)
    return (_C.rand(*input.shape, device=input.device) < prob).to(input.dtype)


# ---- shapes and copies ----

@_export(names=("movedim", "moveaxis"))
def movedim(input, source, destination):
    n = input.dim()
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError("movedim: Invalid source or destination dims: source "
                           f"({src} dims) should contain the same number of dims as destination "
                           f"({dst} dims)")
    src = [_dim(d, n) for d in src]
    dst = [_dim(d, n) for d in dst]
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [o if o is not None else next(rest) for o in order]
    return input.permute(*order)


@_export()
def tile(input, dims):
    dims = tuple(dims)
    if len(dims) < input.dim():
        dims = (1,) * (input.dim() - len(dims)) + dims
    return input.repeat(*dims)


@_export()
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    if repeats is None:  # repeat_interleave(counts): 0 counts[0] times, 1 counts[1] times...
        return repeat_interleave(_C.arange(input.numel(), device=input.device), input, 0)
    if dim is None:
        input, dim = input.reshape(-1), 0
    dim = _dim(dim, input.dim())
    if isinstance(repeats, Tensor) and repeats.numel() != 1:
        import numpy
        idx = numpy.repeat(numpy.arange(input.shape[dim]), _np(repeats))
        return input.index_select(dim, _index_tensor(idx, input.device))
    r = int(repeats.item() if isinstance(repeats, Tensor) else repeats)
    shape = list(input.shape)
    y = input.unsqueeze(dim + 1)
    y = y.expand(*shape[:dim + 1], r, *shape[dim + 1:])
    shape[dim] *= r
    return y.reshape(*shape)


@_export()
def roll(input, shifts, dims=None):
    if dims is None:
        return roll(input.reshape(-1), shifts, 0).reshape(*input.shape)
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    y = input
    for s, d in zip(shifts, dims):
        d = _dim(d, y.dim())
        n = y.shape[d]
        s = s % n if n else 0
        if s:
            y = _C.cat([y.narrow(d, n - s, s), y.narrow(d, 0, n - s)], d)
    return y


@_export()
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of dims dim1 and dim2 moved to the end (a gather: PyTorch
    returns a view)."""
    n = input.dim()
    d1, d2 = _dim(dim1, n), _dim(dim2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    x = movedim(input, (d1, d2), (n - 2, n - 1))
    rows, cols = x.shape[-2], x.shape[-1]
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    k = max(0, min(rows - r0, cols - c0))
    flat = x.reshape(*x.shape[:-2], rows * cols)
    idx = [(r0 + i) * cols + c0 + i for i in range(k)]
    return flat.index_select(flat.dim() - 1, _C.tensor(idx, dtype=_C.int64, device=x.device))


@_export()
def diag(input, diagonal=0):
    if input.dim() == 2:
        return globals()["diagonal"](input, diagonal)
    if input.dim() != 1:
        raise RuntimeError("diag(): Supports 1D or 2D tensors. Got %dD" % input.dim())
    n = input.shape[0]
    m = n + abs(diagonal)
    r0, c0 = (0, diagonal) if diagonal >= 0 else (-diagonal, 0)
    idx = [(r0 + i) * m + c0 + i for i in range(n)]
    out = _C.zeros(m * m, dtype=input.dtype, device=input.device)
    pos = _C.tensor(idx, dtype=_C.int64, device=input.device)
    return out.scatter_add(0, pos, input).reshape(m, m)


@_export()
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    if offset != 0 or (dim1, dim2) != (-2, -1):
        raise NotImplementedError("diag_embed: only offset=0, dim1=-2, dim2=-1")
    n = input.shape[-1]
    return input.unsqueeze(-1) * _C.eye(n, dtype=input.dtype, device=input.device)


@_export()
def trace(input):
    return diagonal(input).sum()


@_export()
def take_along_dim(input, indices, dim=None):
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    dim = _dim(dim, input.dim())
    shape = [max(a, b) if i != dim else b
             for i, (a, b) in enumerate(zip(input.shape, indices.shape))]
    xs = list(shape)
    xs[dim] = input.shape[dim]
    return input.expand(*xs).gather(dim, indices.expand(*shape))


@_export()
def take(input, index):
    return input.reshape(-1).index_select(0, index.reshape(-1)).reshape(*index.shape)


def _index_along(input, dim, index, src_shape):
    """index [k] along dim broadcast to src_shape, as scatter_add wants."""
    shape = [1] * len(src_shape)
    shape[dim] = index.numel()
    return index.reshape(*shape).expand(*src_shape)


@_export()
def index_add(input, dim, index, source, *, alpha=1):
    dim = _dim(dim, input.dim())
    src = source * alpha if alpha != 1 else source
    return input.scatter_add(dim, _index_along(input, dim, index, tuple(src.shape)), src)


@_export()
def index_copy(input, dim, index, source):
    dim = _dim(dim, input.dim())
    idx = _index_along(input, dim, index, tuple(source.shape))
    return scatter(input, dim, idx, source)


@_export()
def index_fill(input, dim, index, value):
    dim = _dim(dim, input.dim())
    n = input.shape[dim]
    mask = _C.zeros(n, dtype=input.dtype, device=input.device).scatter_add(
        0, index.reshape(-1), _C.ones(index.numel(), dtype=input.dtype, device=input.device))
    shape = [1] * input.dim()
    shape[dim] = n
    return _C.where(mask.reshape(*shape) > 0, _C.full_like(input, float(value)), input)


@_export()
def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """Replacing scatter (duplicates: undefined, as PyTorch): the input where
    no index lands, else the sum of what lands there."""
    if reduce is not None:
        if reduce == "add":
            return input.scatter_add(dim, index, src)
        raise NotImplementedError(f"scatter: reduce='{reduce}' (add is supported)")
    if src is None or not isinstance(src, Tensor):
        fill = src if value is None else value
        src = _C.full(tuple(index.shape), float(fill), dtype=input.dtype, device=input.device)
    elif tuple(src.shape) != tuple(index.shape):
        src = src.narrow(0, 0, index.shape[0]) if src.dim() == 1 else src
        for d in range(src.dim()):
            src = src.narrow(d, 0, index.shape[d])
    zero = _C.zeros_like(input)
    hits = zero.scatter_add(dim, index, _C.ones_like(src))
    return _C.where(hits > 0, zero.scatter_add(dim, index, src), input)


@_export()
def masked_select(input, mask):
    return input[mask.expand_as(input) if tuple(mask.shape) != tuple(input.shape) else mask]


@_export(method=False)
def meshgrid(*tensors, indexing="ij"):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', not {indexing!r}")
    ts = list(tensors)
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    sizes = [t.numel() for t in ts]
    out = []
    for i, t in enumerate(ts):
        shape = [1] * len(ts)
        shape[i] = sizes[i]
        out.append(t.reshape(*shape).expand(*sizes))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


@_export()
def diff(input, n=1, dim=-1, prepend=None, append=None):
    dim = _dim(dim, input.dim())
    x = input
    if prepend is not None or append is not None:
        x = _C.cat([t for t in (prepend, x, append) if t is not None], dim)
    for _ in range(n):
        k = x.shape[dim]
        x = x.narrow(dim, 1, k - 1) - x.narrow(dim, 0, k - 1)
    return x


@_export()
def cumprod(input, dim, *, dtype=None):
    """A product along dim, one multiply per position (exact, and its
    gradient right where the input has zeros)."""
    x = input.to(dtype) if dtype is not None else input
    dim = _dim(dim, x.dim())
    parts, acc = [], None
    for i in range(x.shape[dim]):
        s = x.narrow(dim, i, 1)
        acc = s if acc is None else acc * s
        parts.append(acc)
    return _C.cat(parts, dim) if parts else x.clone()


@_export()
def logcumsumexp(input, dim):
    """A running logaddexp along dim (one step per position): exact where
    the values differ by more than exp's range, unlike shifting by one max."""
    dim = _dim(dim, input.dim())
    parts, acc = [], None
    for i in range(input.shape[dim]):
        s = input.narrow(dim, i, 1)
        acc = s if acc is None else logaddexp(acc, s)
        parts.append(acc)
    return _C.cat(parts, dim) if parts else input.clone()


@_export()
def aminmax(input, *, dim=None, keepdim=False):
    if dim is None:
        return _aminmax_result(input.amin(), input.amax())
    return _aminmax_result(input.amin(dim=dim, keepdim=keepdim),
                           input.amax(dim=dim, keepdim=keepdim))


@_export(method=False)
def var_mean(input, dim=None, *, correction=1, keepdim=False, unbiased=None):
    if unbiased is not None:
        correction = 1 if unbiased else 0
    if dim is None:
        return input.var(correction=correction), input.mean()
    return (input.var(dim=dim, correction=correction, keepdim=keepdim),
            input.mean(dim=dim, keepdim=keepdim))


@_export(method=False)
def std_mean(input, dim=None, *, correction=1, keepdim=False, unbiased=None):
    v, m = var_mean(input, dim, correction=correction, keepdim=keepdim, unbiased=unbiased)
    return v.sqrt(), m


@_export()
def cdist(x1, x2, p=2.0, compute_mode=None):
    return (x1.unsqueeze(-2) - x2.unsqueeze(-3)).norm(p, -1)


# ---- einsum and tensordot ----

def _einsum_pair(a, sa, b, sb, keep):
    """a (subscripts sa) times b (sb), keeping the letters in keep: one
    batched matmul over the shared letters."""
    batch = [c for c in sa if c in sb and c in keep]
    contract = [c for c in sa if c in sb and c not in keep]
    a_free = [c for c in sa if c not in sb]
    b_free = [c for c in sb if c not in sa]
    size = {c: a.shape[i] for i, c in enumerate(sa)}
    size.update({c: b.shape[i] for i, c in enumerate(sb)})
    pa = a.permute(*[sa.index(c) for c in batch + a_free + contract])
    pb = b.permute(*[sb.index(c) for c in batch + contract + b_free])

    def prod(cs):
        return math.prod(size[c] for c in cs)
    pa = pa.reshape(prod(batch), prod(a_free), prod(contract))
    pb = pb.reshape(prod(batch), prod(contract), prod(b_free))
    out = pa.matmul(pb).reshape(*[size[c] for c in batch + a_free + b_free])
    return out, "".join(batch + a_free + b_free)


def _einsum_single(x, s, keep):
    """Diagonals of repeated letters taken, letters not kept summed."""
    while True:
        rep = next((c for c in s if s.count(c) > 1), None)
        if rep is None:
            break
        i = s.index(rep)
        j = s.index(rep, i + 1)
        x = diagonal(x, 0, i, j)
        s = s[:i] + s[i + 1:j] + s[j + 1:] + rep
    gone = [i for i, c in enumerate(s) if c not in keep]
    if gone:
        x = x.sum(dim=tuple(gone))
        s = "".join(c for c in s if c in keep)
    return x, s


@_export(method=False)
def einsum(equation, *operands):
    """torch.einsum: any number of operands, '...' broadcasting, implicit
    output; pairs multiplied left to right as batched matmuls."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    subs = lhs.split(",")
    if len(subs) != len(operands):
        raise ValueError(f"einsum(): {len(subs)} subscripts for {len(operands)} operands")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in string.ascii_letters if c not in used]
    ell = max((t.dim() - len(s.replace("...", "")) for s, t in zip(subs, operands)
               if "..." in s), default=0)
    ell_letters = "".join(spare[:ell])
    full = []
    for s, t in zip(subs, operands):
        if "..." in s:
            k = t.dim() - len(s.replace("...", ""))
            s = s.replace("...", ell_letters[ell - k:])
        if len(s) != t.dim():
            raise ValueError(f"einsum(): the subscript '{s}' has {len(s)} letters for a "
                             f"{t.dim()}-d operand")
        full.append(s)
    if arrow:
        out = rhs.replace("...", ell_letters)
    else:
        letters = "".join(full)
        out = ell_letters + "".join(sorted(c for c in set(letters) if letters.count(c) == 1
                                           and c not in ell_letters))
    # sizes of 1 broadcast against the letter's size elsewhere (as PyTorch)
    sizes = {}
    for s, t in zip(full, operands):
        for c, n in zip(s, t.shape):
            if n != 1:
                if sizes.get(c, n) != n:
                    raise RuntimeError(f"einsum(): subscript {c} has size {n} for an operand "
                                       f"which does not broadcast with previously seen size "
                                       f"{sizes[c]}")
                sizes[c] = n
    ops = []
    for s, t in zip(full, operands):
        target = [sizes.get(c, 1) for c in s]
        if list(t.shape) != target:
            t = t.expand(*target)
        ops.append(t)
    x, sx = None, None
    for i, (s, t) in enumerate(zip(full, ops)):
        later = set(out) | set("".join(full[i + 1:]))
        if x is None:
            x, sx = _einsum_single(t, s, later | set(s) if i + 1 < len(full) else set(out))
            if i + 1 < len(full):
                x, sx = _einsum_single(x, sx, later)
            continue
        t, s = _einsum_single(t, s, later | set(sx))
        x, sx = _einsum_pair(x, sx, t, s, later)
    x, sx = _einsum_single(x, sx, set(out))
    return x.permute(*[sx.index(c) for c in out]) if sx != out else x


@_export()
def tensordot(a, b, dims=2):
    letters = iter(string.ascii_letters)
    sa = [next(letters) for _ in range(a.dim())]
    sb = [next(letters) for _ in range(b.dim())]
    if isinstance(dims, int):
        da, db = list(range(a.dim() - dims, a.dim())), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    for i, j in zip(da, db):
        sb[j] = sa[i]
    out = [c for i, c in enumerate(sa) if i not in da] + \
        [c for j, c in enumerate(sb) if j not in db]
    return einsum("".join(sa) + "," + "".join(sb) + "->" + "".join(out), a, b)


# ---- sorting, selection and counting (indices from the host) ----

# (values, indices) pairs with PyTorch's field names (torch.return_types)
_sort_result = namedtuple("sort", ["values", "indices"])
_topk_result = namedtuple("topk", ["values", "indices"])
_kthvalue_result = namedtuple("kthvalue", ["values", "indices"])
_median_result = namedtuple("median", ["values", "indices"])
_aminmax_result = namedtuple("aminmax", ["min", "max"])

def _gather_values(input, dim, idx):
    return input.gather(dim, _index_tensor(idx, input.device))


@_export()
def sort(input, dim=-1, descending=False, stable=False):
    import numpy
    dim = _dim(dim, input.dim())
    a = _np(input)
    if input.dim() == 0:
        return _sort_result(input.clone(), _C.zeros((), dtype=_C.int64, device=input.device))
    if not descending:
        idx = numpy.argsort(a, axis=dim, kind="stable")  # NaN last, as PyTorch
    elif a.dtype.kind == "f":
        # descending: NaN first (PyTorch), then the values from the largest
        idx = numpy.argsort(-a, axis=dim, kind="stable")
        nan_last = ~numpy.isnan(numpy.take_along_axis(a, idx, dim))
        idx = numpy.take_along_axis(idx, numpy.argsort(nan_last, axis=dim, kind="stable"), dim)
    else:
        idx = numpy.argsort(~a, axis=dim, kind="stable")  # ~x decreases, without overflow
    return _sort_result(_gather_values(input, dim, idx), _index_tensor(idx, input.device))


@_export()
def argsort(input, dim=-1, descending=False, stable=False):
    return sort(input, dim, descending, stable)[1]


@_export(names=("msort",))
def msort(input):
    return sort(input, 0)[0]


@_export()
def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    dim = _dim(dim, input.dim())
    n = input.shape[dim] if input.dim() else 1
    if k < 0 or k > n:
        raise RuntimeError(f"selected index k out of range (k={k}, size {n})")
    v, i = sort(input, dim, descending=largest)
    return _topk_result(v.narrow(dim, 0, k), i.narrow(dim, 0, k))


@_export()
def kthvalue(input, k, dim=-1, keepdim=False):
    dim = _dim(dim, input.dim())
    n = input.shape[dim] if input.dim() else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    v, i = sort(input, dim)
    v, i = v.narrow(dim, k - 1, 1), i.narrow(dim, k - 1, 1)
    return _kthvalue_result(*((v, i) if keepdim else (v.squeeze(dim), i.squeeze(dim))))


@_export()
def median(input, dim=None, keepdim=False):
    """The lower median, as PyTorch (no averaging of the middle two)."""
    if dim is None:
        flat = input.reshape(-1)
        v = sort(flat)[0]  # NaN sort last: the last is NaN when any is
        return v[-1] if input.is_floating_point() and bool(v[-1] != v[-1]) else \
            v[(flat.numel() - 1) // 2]
    dim = _dim(dim, input.dim())
    v, i = kthvalue(input, (input.shape[dim] + 1) // 2, dim, True)
    if input.is_floating_point():
        nan = input != input
        has = nan.any(dim=dim, keepdim=True)
        if bool(has.any()):  # NaN, at the first NaN's index (PyTorch)
            first = nan.to(_C.int64).argmax(dim=dim, keepdim=True)
            v = _C.where(has, input.gather(dim, first), v)
            i = _C.where(has, first, i)
    return _median_result(*((v, i) if keepdim else (v.squeeze(dim), i.squeeze(dim))))


@_export()
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else _dim(dim, input.dim())
    v = sort(x, d)[0]
    n = v.shape[d]
    qs = [q] if not isinstance(q, (list, tuple, Tensor)) else (
        q.reshape(-1).tolist() if isinstance(q, Tensor) else list(q))
    outs = []
    for qq in qs:
        if not 0 <= qq <= 1:
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
        pos = qq * (n - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        a, b = v.narrow(d, lo, 1), v.narrow(d, hi, 1)
        frac_ = pos - lo
        if interpolation == "linear":
            r = a + (b - a) * frac_
        elif interpolation == "lower":
            r = a
        elif interpolation == "higher":
            r = b
        elif interpolation == "nearest":
            r = a if (pos - lo) <= 0.5 and not (pos - lo == 0.5 and lo % 2) else b
        elif interpolation == "midpoint":
            r = (a + b) * 0.5
        else:
            raise ValueError(f"quantile() interpolation must be one of linear, lower, higher, "
                             f"midpoint or nearest. Got {interpolation}")
        if input.is_floating_point():  # NaN anywhere in a slice makes its quantile NaN
            has = (x != x).any(dim=d, keepdim=True)
            r = _C.where(has, _C.full_like(r, math.nan), r)
        if dim is None:
            r = r.reshape((1,) * input.dim() if keepdim else ())
        elif not keepdim:
            r = r.squeeze(d)
        outs.append(r)
    if isinstance(q, (list, tuple)) or (isinstance(q, Tensor) and q.dim() > 0):
        return _C.stack(outs, 0)
    return outs[0]


@_export()
def nonzero(input, *, as_tuple=False):
    import numpy
    a = _np(input)
    if as_tuple:
        nz = numpy.nonzero(numpy.atleast_1d(a))
        return tuple(_index_tensor(i, input.device) for i in nz)
    return _index_tensor(numpy.argwhere(a), input.device)


@_export()
def argwhere(input):
    return nonzero(input)


@_export()
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    import numpy
    if dim is not None:
        raise NotImplementedError("unique: dim is not supported")
    vals, inv, counts = numpy.unique(_np(input).reshape(-1), return_inverse=True,
                                     return_counts=True)
    out = [_C.tensor(vals, device=input.device).to(input.dtype)]
    if return_inverse:
        out.append(_index_tensor(inv.reshape(tuple(input.shape)), input.device))
    if return_counts:
        out.append(_index_tensor(counts, input.device))
    return out[0] if len(out) == 1 else tuple(out)


@_export()
def bincount(input, weights=None, minlength=0):
    import numpy
    a = _np(input)
    if a.ndim != 1 or (a.size and a.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    w = None if weights is None else _np(weights)
    r = numpy.bincount(a, w, minlength)
    if weights is None:
        return _index_tensor(r, input.device)
    return _C.tensor(r, device=input.device).to(
        weights.dtype if weights.dtype in (_C.float32, _C.float64) else _C.float64)


@_export()
def histc(input, bins=100, min=0, max=0):  # noqa: A002
    import numpy
    a = _np(input).astype("float64").reshape(-1)
    lo, hi = float(min), float(max)
    if lo == hi and a.size:
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    r, _ = numpy.histogram(a[(a >= lo) & (a <= hi)], bins=bins, range=(lo, hi))
    return _C.tensor(r.astype("float64"), device=input.device).to(input.dtype)


@_export()
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    import numpy
    s = _np(sorted_sequence)
    v = _np(input) if isinstance(input, Tensor) else numpy.asarray(input)
    sd = side or ("right" if right else "left")
    so = None if sorter is None else _np(sorter) if isinstance(sorter, Tensor) else \
        numpy.asarray(sorter)
    if s.ndim == 1:
        r = numpy.searchsorted(s, v, side=sd, sorter=so)
    else:
        r = numpy.stack([numpy.searchsorted(s[i], v[i], side=sd,
                                            sorter=None if so is None else so[i])
                         for i in numpy.ndindex(*s.shape[:-1])]).reshape(v.shape)
    t = _index_tensor(numpy.asarray(r), sorted_sequence.device)
    return t.to(_C.int32) if out_int32 else t


@_export()
def bucketize(input, boundaries, *, out_int32=False, right=False):
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


@_export()
def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Samples of category indices with probabilities input ([C] or
    [N, C], non-negative, not normalised), from chutney.manual_seed's
    generator (or a chutney.Generator): inverse CDF with replacement, Gumbel
    top-k without."""
    p = input if input.dim() == 2 else input.unsqueeze(0)
    n, c = p.shape
    if not replacement and num_samples > c:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    with no_grad(), _generator.drawing(generator):
        p = p.detach().to(_C.float64)
        if bool((p < 0).any()) or bool((p.sum(-1) <= 0).any()):
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0 or "
                               "a negative probability)")
        if replacement:
            cdf = p.cumsum(-1) / p.sum(-1, keepdim=True)
            u = _C.rand(n, num_samples, device=input.device).to(_C.float64)
            idx = (cdf.unsqueeze(1) <= u.unsqueeze(2)).sum(-1).clamp(max=c - 1)
        else:
            u = _C.rand(n, c, device=input.device).to(_C.float64).clamp(min=1e-300)
            keys = _C.where(p > 0, p.log() - (-(u.log())).log(), _C.full_like(p, -math.inf))
            idx = topk(keys, num_samples, -1)[1]
        idx = idx.to(_C.int64)
    return idx if input.dim() == 2 else idx.squeeze(0)


# ---- methods only: new_*, in-place initialisers, small helpers ----

def _new_kw(self, dtype, device):
    return dict(dtype=dtype or self.dtype, device=device or self.device)


def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
    size = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    return _C.zeros(*size, **_new_kw(self, dtype, device)).requires_grad_(requires_grad)


def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
    size = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    return _C.ones(*size, **_new_kw(self, dtype, device)).requires_grad_(requires_grad)


def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
    size = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    return _C.empty(*size, **_new_kw(self, dtype, device)).requires_grad_(requires_grad)


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return _C.full(tuple(size), fill_value, **_new_kw(self, dtype, device)) \
        .requires_grad_(requires_grad)


def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    return _C.tensor(data, **_new_kw(self, dtype, device)).requires_grad_(requires_grad)


def _random_fill(self, values_of, generator):
    """self filled in place with values_of(shape) drawn from generator (or
    the global stream): refused on a leaf that requires grad while
    recording, as PyTorch; the filled tensor passes no gradient back."""
    if self.requires_grad and self.is_leaf and _C.is_grad_enabled():
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    with _generator.drawing(generator):
        v = values_of(tuple(self.shape))
    with no_grad():
        self.copy_(v.to(self.dtype))
    return self


def uniform_(self, a=0.0, b=1.0, *, generator=None):
    return _random_fill(self, lambda s: _C.rand(*s, device=self.device) * (b - a) + a, generator)


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    return _random_fill(self, lambda s: _C.randn(*s, device=self.device) * std + mean, generator)


def exponential_(self, lambd=1.0, *, generator=None):
    return _random_fill(
        self, lambda s: -(1 - _C.rand(*s, device=self.device).to(_C.float64)).log() / lambd,
        generator)


def bernoulli_(self, p=0.5, *, generator=None):
    return _random_fill(self, lambda s: _C.rand(*s, device=self.device) < p, generator)


def fill_diagonal_(self, fill_value, wrap=False):
    n = min(self.shape)
    if self.dim() < 2 or (self.dim() > 2 and len(set(self.shape)) != 1):
        raise RuntimeError("fill_diagonal_: all dimensions of input must be of equal length "
                           "(or the tensor 2-d)")
    # along the logical (row-major) layout: flat below is a copy in that order
    strides, acc = [], 1
    for d in reversed(self.shape):
        strides.append(acc)
        acc *= d
    step = sum(strides)
    with no_grad():
        flat = self.reshape(-1)
        idx = list(range(0, n * step, step))
        if wrap and self.dim() == 2 and self.shape[0] > self.shape[1] + 1:
            idx = list(range(0, self.numel(), self.shape[1] + 1))
        pos = _C.tensor(idx, dtype=_C.int64, device=self.device)
        mask = _C.zeros(self.numel(), device=self.device).scatter_add(
            0, pos, _C.ones(len(idx), device=self.device))
        return self.copy_(_C.where(mask > 0, _C.full_like(flat, fill_value), flat)
                          .reshape(*self.shape))


def unflatten(self, dim, sizes):
    dim = _dim(dim, self.dim())
    shape = list(self.shape)
    return self.reshape(*shape[:dim], *sizes, *shape[dim + 1:])


def index_add_(self, dim, index, source, *, alpha=1):
    with no_grad():
        return self.copy_(index_add(self, dim, index, source, alpha=alpha))


def index_fill_(self, dim, index, value):
    with no_grad():
        return self.copy_(index_fill(self, dim, index, value))


def scatter_(self, dim, index, src=None, value=None, *, reduce=None):
    with no_grad():
        return self.copy_(scatter(self, dim, index, src, value, reduce=reduce))


def clamp_min_(self, min):  # noqa: A002
    return self.clamp_(min=min)


def clamp_max_(self, max):  # noqa: A002
    return self.clamp_(max=max)


for _fn in (new_zeros, new_ones, new_empty, new_full, new_tensor, uniform_, normal_,
            exponential_, bernoulli_, fill_diagonal_, unflatten, index_add_, index_fill_,
            scatter_, clamp_min_, clamp_max_):
    METHODS[_fn.__name__] = _fn
del _fn


def where(condition, input=None, other=None):  # noqa: A002
    """where(condition, input, other), or where(condition) = nonzero(condition,
    as_tuple=True), as PyTorch."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    return _C.where(condition, input, other)


def _numpy_names(fn):
    """fn taking NumPy's axis= and keepdims= for its dim= and keepdim=, as
    PyTorch's functions do (fn unchanged if it has neither)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn
    if "dim" not in params and "keepdim" not in params:
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if "axis" in kwargs and "dim" not in kwargs:
            kwargs["dim"] = kwargs.pop("axis")
        if "keepdims" in kwargs and "keepdim" not in kwargs:
            kwargs["keepdim"] = kwargs.pop("keepdims")
        return fn(*args, **kwargs)
    return wrapper


def install(namespace):
    """Adds the methods to Tensor and the functions to namespace (chutney's
    globals), leaving whatever is already there but where (which gains its
    one-argument form)."""
    _C._add_tensor_methods({name: _numpy_names(fn) for name, fn in METHODS.items()})
    for name, fn in FUNCTIONS.items():
        namespace.setdefault(name, _numpy_names(fn))
    namespace["where"] = where


# ---- in-place unary methods, legacy type names ----

def _inplace(name):
    def method(self, *args, **kwargs):
        return self.copy_(getattr(self, name)(*args, **kwargs))
    method.__name__ = name + "_"
    method.__doc__ = f"{name} written into the tensor (not while recording its gradient)."
    return method


for _name in ("exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "abs", "neg", "sign", "sigmoid",
              "tanh", "relu", "floor", "ceil", "round", "trunc", "sin", "cos", "reciprocal",
              "square", "erf", "frac", "lerp", "addcmul", "addcdiv", "nan_to_num", "tril",
              "triu", "masked_scatter", "logit", "hardtanh", "leaky_relu", "elu", "silu"):
    METHODS[_name + "_"] = _inplace(_name)
del _name

_LEGACY = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
           "bfloat16": "BFloat16Tensor", "int32": "IntTensor", "int64": "LongTensor",
           "uint8": "ByteTensor", "int8": "CharTensor", "bool": "BoolTensor"}


def type_(self, dtype=None, non_blocking=False, **kwargs):
    """No argument: the legacy type name ("chutney.FloatTensor"); a dtype (or
    such a name): the tensor in that dtype."""
    if dtype is None:
        return "chutney." + _LEGACY[str(self.dtype).split(".")[-1]]
    if isinstance(dtype, str):
        names = {v: k for k, v in _LEGACY.items()}
        key = dtype.split(".")[-1]
        if key not in names:
            raise ValueError(f"invalid type: {dtype!r}")
        dtype = getattr(_C, names[key])
    return self.to(dtype)


METHODS["type"] = type_
METHODS["is_cuda"] = property(lambda self: str(self.device).startswith("cuda"))
METHODS["is_cpu"] = property(lambda self: str(self.device) == "cpu")


def _legacy_ctor(dtype_name, legacy):
    def ctor(*args, device=None):
        dt = getattr(_C, dtype_name)
        if len(args) == 1 and isinstance(args[0], _C.Size):  # FloatTensor(x.shape)
            args = tuple(args[0])
        elif len(args) == 1 and not isinstance(args[0], int):
            return _C.tensor(args[0], dtype=dt, device=device)
        return _C.empty(*args, dtype=dt, device=device) if args else _C.empty(0, dtype=dt)
    ctor.__name__ = legacy
    ctor.__doc__ = (f"chutney.{legacy}(data) or ({legacy}(*sizes)): a {dtype_name} tensor "
                    "(PyTorch's legacy constructor)")
    return ctor


for _dt, _legacy_name in _LEGACY.items():
    FUNCTIONS[_legacy_name] = _legacy_ctor(_dt, _legacy_name)
del _dt, _legacy_name
