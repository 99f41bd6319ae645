"""More of torch's functions and Tensor methods, over the library's ops
(registered in _tensor_extras' METHODS and FUNCTIONS, installed with them).

Values computed on the host (cummax's indices, fmod's remainders,
scatter_reduce's maxima and products) come back as constants plus terms
that are zero in value and carry the gradient PyTorch gives, so autograd
sees an ordinary composition.
"""

import itertools
import math
import os
from collections import namedtuple

from chutney import _C, _special
from chutney._tensor_extras import (FUNCTIONS, METHODS, _dim, _export, _index_tensor, _np,
                                    diag, index_copy, meshgrid, nonzero, sort)
from chutney.autograd import no_grad

Tensor = _C.Tensor

_cummax_result = namedtuple("cummax", ["values", "indices"])
_cummin_result = namedtuple("cummin", ["values", "indices"])
_nanmedian_result = namedtuple("nanmedian", ["values", "indices"])

_FLOATS = (_C.float16, _C.bfloat16, _C.float32, _C.float64)


def _tensor_like(v, ref):
    return v if isinstance(v, Tensor) else _C.tensor(v, device=ref.device)


def _float(t):
    return t if t.is_floating_point() else t.to(_C.float32)


def _const(values, like):
    """a host array as a tensor of like's dtype and device"""
    return _C.tensor(values, device=like.device).to(like.dtype)


# ---- elementwise ----

@_export()
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    if isinstance(other, Tensor) and input.dtype != other.dtype:
        raise RuntimeError(f"{input.dtype} did not match {other.dtype}")
    other = _tensor_like(other, input)
    if rtol < 0 or atol < 0:
        raise RuntimeError("isclose: rtol and atol must be non-negative")
    a, b = (input, other) if input.is_floating_point() else \
        (input.to(_C.float64), other.to(_C.float64))
    with no_grad():
        finite = (a - a == 0).logical_and(b - b == 0)
        close = (a - b).abs() <= atol + rtol * b.abs()
        out = (a == b).logical_or(finite.logical_and(close))
        if equal_nan:
            out = out.logical_or((a != a).logical_and(b != b))
    return out


@_export()
def not_equal(input, other):
    return input.ne(other)


@_export()
def positive(input):
    if input.dtype == _C.bool:
        raise TypeError("The `+` operator, on a bool tensor is not supported.")
    return input


@_export()
def logaddexp2(input, other):
    ln2 = math.log(2.0)
    return FUNCTIONS["logaddexp"](input * ln2, other * ln2) / ln2


@_export()
def sinc(input):
    x = _float(input)
    zero = x == 0
    safe = _C.where(zero, _C.ones_like(x), x) * math.pi
    return _C.where(zero, _C.ones_like(x), safe.sin() / safe)


@_export()
def heaviside(input, values):
    if isinstance(values, Tensor) and values.dtype != input.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes")
    with no_grad():  # PyTorch has no derivative for it
        step = (input > 0).to(input.dtype)
        return _C.where(input == 0, _tensor_like(values, input).to(input.dtype), step)


def _host_int_binary(name, input, other, op):
    import numpy
    if input.is_floating_point() or (isinstance(other, Tensor) and other.is_floating_point()):
        raise RuntimeError(f'"{name}_cpu" not implemented for \'Float\'')
    o = other if isinstance(other, Tensor) else _C.tensor(other, device=input.device)
    dt = result_type(input, other)
    r = op(_np(input).astype("int64"), _np(o).astype("int64"))
    return _C.tensor(numpy.asarray(r), device=input.device).to(dt)


@_export()
def gcd(input, other):
    import numpy
    return _host_int_binary("gcd", input, other, numpy.gcd)


@_export()
def lcm(input, other):
    import numpy
    return _host_int_binary("lcm", input, other, numpy.lcm)


@_export()
def ldexp(input, other):
    x = _float(input)
    if not isinstance(other, Tensor):
        return x * (2.0 ** other)
    return x * (_C.full_like(x, 2.0).to(x.dtype) ** other.to(x.dtype))


@_export()
def float_power(input, exponent):
    if isinstance(input, Tensor):
        base = input.to(_C.float64)
        return base ** (exponent.to(_C.float64) if isinstance(exponent, Tensor) else exponent)
    return float(input) ** exponent.to(_C.float64)


def _fpick(input, other, ge):
    a, b = input, _tensor_like(other, input)
    pick = (a >= b if ge else a <= b).logical_or(b != b)
    return _C.where(pick, a, b)


@_export()
def fmax(input, other):
    """maximum that ignores NaN; ties give the gradient to input (PyTorch)."""
    return _fpick(input, other, True)


@_export()
def fmin(input, other):
    return _fpick(input, other, False)


@_export()
def fmod(input, other):
    """C's fmod (the sign of the dividend), exact: computed on the host, the
    gradients (1, -trunc(input / other)) on the graph."""
    import numpy
    o = _tensor_like(other, input)
    if not input.is_floating_point() and not o.is_floating_point():
        if bool((o == 0).any()):
            raise RuntimeError("ZeroDivisionError")
    a, b = _np(input), _np(o)
    with numpy.errstate(all="ignore"):
        v = numpy.fmod(a, b)
        q = numpy.trunc(a / b) if input.is_floating_point() or o.is_floating_point() else None
    dt = result_type(input, other)
    out = _C.tensor(numpy.asarray(v), device=input.device).to(dt)
    if q is None or not (input.requires_grad or o.requires_grad):
        return out
    qt = _C.tensor(numpy.asarray(q), device=input.device).to(dt)
    qt = _C.where(qt - qt == 0, qt, _C.zeros_like(qt))

    def delta(t):  # t - t: zero in value, t's gradient; 0 for inf (inf - inf is NaN)
        safe = _C.where(t - t.detach() == 0, t, _C.zeros_like(t))
        return safe - safe.detach()
    return out + delta(input) - delta(o) * qt


@_export(method=False)
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    import numpy
    e = _np(elements) if isinstance(elements, Tensor) else numpy.asarray(elements)
    t = _np(test_elements) if isinstance(test_elements, Tensor) else numpy.asarray(test_elements)
    dev = elements.device if isinstance(elements, Tensor) else test_elements.device
    return _C.tensor(numpy.isin(e, t, invert=invert), device=dev)


@_export()
def isreal(input):
    return _C.ones(*input.shape, dtype=_C.bool, device=input.device)


@_export()
def is_complex(input):
    return False


@_export()
def is_nonzero(input):
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.reshape(-1)[0] != 0)


# ---- special functions ----

for _name in ("lgamma", "digamma", "erfinv"):
    _export()(getattr(_special, _name))
del _name


@_export(method=False)
def polygamma(n, input):
    return _special.polygamma(n, input)


def _polygamma_method(self, n):
    return _special.polygamma(n, self)


METHODS["polygamma"] = _polygamma_method


@_export()
def mvlgamma(input, p):
    return _special.mvlgamma(input, p)


# ---- stacks, splits, flips ----

def _seq(tensors):
    if isinstance(tensors, Tensor):
        return list(tensors.unbind(0))
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise RuntimeError("expected a non-empty list of Tensors")
    return list(tensors)


def _atleast(t, n):
    if t.dim() >= n:
        return t
    if n == 1:
        return t.reshape(1)
    if n == 2:
        return t.reshape(1, -1) if t.dim() else t.reshape(1, 1)
    return t.reshape(1, t.numel(), 1) if t.dim() <= 1 else t.unsqueeze(-1)


def _atleast_fn(n):
    def fn(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            return tuple(_atleast(t, n) for t in tensors[0])
        out = tuple(_atleast(t, n) for t in tensors)
        return out[0] if len(out) == 1 else out
    fn.__name__ = f"atleast_{n}d"
    return fn


for _n in (1, 2, 3):
    FUNCTIONS[f"atleast_{_n}d"] = _atleast_fn(_n)
del _n


@_export(method=False)
def hstack(tensors):
    ts = [_atleast(t, 1) for t in _seq(tensors)]
    return _C.cat(ts, 0 if ts[0].dim() == 1 else 1)


@_export(method=False, names=("vstack", "row_stack"))
def vstack(tensors):
    return _C.cat([_atleast(t, 2) for t in _seq(tensors)], 0)


@_export(method=False)
def dstack(tensors):
    return _C.cat([_atleast(t, 3) for t in _seq(tensors)], 2)


@_export(method=False)
def column_stack(tensors):
    return _C.cat([t.reshape(-1, 1) if t.dim() <= 1 else t for t in _seq(tensors)], 1)


@_export(method=False)
def broadcast_shapes(*shapes):
    out = []
    for s in shapes:
        s = (s,) if isinstance(s, int) else tuple(s)
        if any(d < 0 for d in s):
            raise RuntimeError("Trying to create tensor with negative dimension")
        for i, d in enumerate(reversed(s)):
            if i == len(out):
                out.insert(0, d)
            elif out[-1 - i] == 1:
                out[-1 - i] = d
            elif d != 1 and d != out[-1 - i]:
                raise RuntimeError("shape mismatch: objects cannot be broadcast to a single "
                                   "shape")
    return _C.Size(out)


@_export(method=False)
def broadcast_tensors(*tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = tuple(broadcast_shapes(*(tuple(t.shape) for t in tensors)))
    return tuple(t if tuple(t.shape) == shape else t.expand(*shape) for t in tensors)


@_export()
def tensor_split(input, indices_or_sections, dim=0):
    if input.dim() == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    dim = _dim(dim, input.dim())
    n = input.shape[dim]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        if ios.dim() > 1 or ios.is_floating_point():
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               "zero-dimensional or one-dimensional tensor of dtype long")
        ios = ios.item() if ios.dim() == 0 else ios.tolist()
    if isinstance(ios, int):
        if ios <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {ios}")
        if ios > 2 ** 31:
            raise RuntimeError(f"tensor_split: {ios} sections are too many")
        q, r = divmod(n, ios)
        bounds, at = [], 0
        for i in range(ios - 1):
            at += q + (1 if i < r else 0)
            bounds.append(at)
    else:
        bounds = list(ios)
    out, start = [], 0
    for b in bounds + [n]:  # aten: [previous index : index], empty where it decreases
        b = min(b, n) if b >= 0 else max(n + b, 0)
        out.append(input.narrow(dim, start, max(b, start) - start))
        start = b
    return tuple(out)


def _split_named(name, need, dim_of):
    def fn(input, indices_or_sections):
        if input.dim() < need:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {need} dimension, "
                               f"but got a tensor with {input.dim()} dimensions!")
        d = dim_of(input)
        if isinstance(indices_or_sections, int) and (
                indices_or_sections == 0 or input.shape[d] % indices_or_sections):
            raise RuntimeError(f"torch.{name} attempted to split along dimension {d}, but the "
                               f"size of the dimension {input.shape[d]} is not divisible by the "
                               f"split_size {indices_or_sections}!")
        return tensor_split(input, indices_or_sections, d)
    fn.__name__ = name
    return fn


_export()(_split_named("hsplit", 1, lambda t: 1 if t.dim() > 1 else 0))
_export()(_split_named("vsplit", 2, lambda t: 0))
_export()(_split_named("dsplit", 3, lambda t: 2))


@_export()
def fliplr(input):
    if input.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return input.flip(1)


@_export()
def flipud(input):
    if input.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return input.flip(0)


@_export()
def rot90(input, k=1, dims=(0, 1)):
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.dim() < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.dim()}")
    d0, d1 = _dim(dims[0], input.dim()), _dim(dims[1], input.dim())
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and "
                           f"dim1 = {d1}")
    k %= 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip(d0).flip(d1)
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone()


@_export()
def diagflat(input, offset=0):
    return diag(input.reshape(-1), offset)


def _check_rc(row, col):
    for name, v in (("row", row), ("col", col)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{name} must be an int, not {type(v).__name__}")
        if v < 0:
            raise RuntimeError(f"{name} must be non-negative, got{v}")
    if row * col > 2 ** 31:
        raise RuntimeError(f"tril_indices/triu_indices: {row} x {col} is too large")


@_export(method=False)
def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    import numpy
    _check_rc(row, col)
    r, c = numpy.tril_indices(row, offset, col) if row and col else ([], [])
    return _C.tensor(numpy.array([r, c], dtype="int64").reshape(2, -1), device=device) \
        .to(dtype or _C.int64)


@_export(method=False)
def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    import numpy
    _check_rc(row, col)
    r, c = numpy.triu_indices(row, offset, col) if row and col else ([], [])
    return _C.tensor(numpy.array([r, c], dtype="int64").reshape(2, -1), device=device) \
        .to(dtype or _C.int64)


@_export(method=False)
def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False,
             layout=None, out=None):
    e = _C.linspace(float(start), float(end), steps, dtype=_C.float64, device=device)
    y = (_C.full_like(e, float(base)) ** e).to(dtype or _C.float32)
    return y.requires_grad_(requires_grad) if requires_grad else y


# ---- cumulative and nan-reductions ----

def _cum_extreme(input, dim, larger, result):
    import numpy
    if input.dim() == 0:
        return result(input.clone(), _C.zeros((), dtype=_C.int64, device=input.device))
    dim = _dim(dim, input.dim())
    a = numpy.moveaxis(_np(input), dim, -1)
    idx = numpy.zeros(a.shape, dtype="int64")
    if a.shape[-1]:
        best = a[..., 0].copy()
        cur = numpy.zeros(a.shape[:-1], dtype="int64")
        isf = numpy.issubdtype(a.dtype, numpy.floating)
        for i in range(a.shape[-1]):
            v = a[..., i]
            # ties move to the later index; a NaN sticks once seen
            take = (v >= best) if larger else (v <= best)
            if isf:
                take = (take | numpy.isnan(v)) & ~(numpy.isnan(best) & ~numpy.isnan(v))
            best = numpy.where(take, v, best)
            cur = numpy.where(take, i, cur)
            idx[..., i] = cur
    it = _index_tensor(numpy.moveaxis(idx, -1, dim), input.device)
    return result(input.gather(dim, it), it)


@_export()
def cummax(input, dim):
    return _cum_extreme(input, dim, True, _cummax_result)


@_export()
def cummin(input, dim):
    return _cum_extreme(input, dim, False, _cummin_result)


@_export()
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    x = input.to(dtype) if dtype is not None else input
    if x.is_floating_point():
        x = _C.where(x != x, _C.zeros_like(x), x)
    if dim is None:
        return x.sum(dim=tuple(range(x.dim())), keepdim=True) if keepdim and x.dim() else x.sum()
    return x.sum(dim=dim, keepdim=keepdim)


@_export()
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    x = input.to(dtype) if dtype is not None else input
    if not x.is_floating_point():
        raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got "
                           f"{str(x.dtype).replace('chutney.', '').capitalize()}")
    keep = (x == x).to(x.dtype)
    return nansum(x, dim, keepdim) / nansum(keep, dim, keepdim)


@_export()
def nanmedian(input, dim=None, keepdim=False):
    """The lower median of the values that are not NaN (NaN where all are)."""
    if dim is None:
        flat = input.reshape(-1)
        v = sort(flat)[0]
        k = int((flat == flat).sum()) if input.is_floating_point() else flat.numel()
        if flat.numel() == 0:
            return _C.full((), math.nan, dtype=input.dtype, device=input.device)
        return v[max(k - 1, 0) // 2] if k else v[0]
    if input.dim() == 0:
        return _nanmedian_result(input.clone(), _C.zeros((), dtype=_C.int64, device=input.device))
    dim = _dim(dim, input.dim())
    v, i = sort(input, dim)  # NaN last
    cnt = (input == input).sum(dim=dim, keepdim=True).to(_C.int64)
    pos = (cnt - 1).clamp(min=0) // 2
    vv, ii = v.gather(dim, pos), i.gather(dim, pos)
    return _nanmedian_result(*((vv, ii) if keepdim else (vv.squeeze(dim), ii.squeeze(dim))))


# ---- products ----

@_export()
def kron(input, other):
    n = max(input.dim(), other.dim())
    a = input.reshape(*([1] * (n - input.dim()) + list(input.shape)))
    b = other.reshape(*([1] * (n - other.dim()) + list(other.shape)))
    sa = [d for s in a.shape for d in (s, 1)]
    sb = [d for s in b.shape for d in (1, s)]
    out = a.reshape(*sa) * b.reshape(*sb)
    return out.reshape(*[x * y for x, y in zip(a.shape, b.shape)])


@_export(method=False)
def block_diag(*tensors):
    ts = [t.reshape(1, 1) if t.dim() == 0 else t.reshape(1, -1) if t.dim() == 1 else t
          for t in tensors]
    for t in ts:
        if t.dim() != 2:
            raise RuntimeError("torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {ts.index(t)} has {t.dim()} dimensions")
    if not ts:
        return _C.empty(1, 0)
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = promote_types(dt, t.dtype)
    dev = ts[0].device
    width = sum(t.shape[1] for t in ts)
    rows, left = [], 0
    for t in ts:
        r, c = t.shape
        parts = [p for p in (_C.zeros(r, left, dtype=dt, device=dev), t.to(dt),
                             _C.zeros(r, width - left - c, dtype=dt, device=dev))]
        rows.append(_C.cat(parts, 1))
        left += c
    return _C.cat(rows, 0)


@_export(method=False)
def cartesian_prod(*tensors):
    if len(tensors) == 1:
        return tensors[0]
    for t in tensors:
        if t.dim() != 1:
            raise RuntimeError("Expect a 1D vector, but got shape " + str(list(t.shape)))
    grids = meshgrid(*tensors, indexing="ij")
    return _C.stack([g.reshape(-1) for g in grids], 1)


@_export(method=False)
def combinations(input, r=2, with_replacement=False):
    if input.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return _C.empty(0, dtype=input.dtype, device=input.device)
    gen = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    combos = list(gen(range(input.shape[0]), r))
    if not combos:
        return _C.empty(0, r, dtype=input.dtype, device=input.device)
    idx = _C.tensor(combos, dtype=_C.int64, device=input.device)
    return input.index_select(0, idx.reshape(-1)).reshape(len(combos), r)


@_export()
def mv(input, vec):
    if input.dim() != 2 or vec.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.dim()}, "
                           f"{vec.dim()}")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({input.shape[0]}), mat "
                           f"({input.shape[0]}x{input.shape[1]}), vec ({vec.shape[0]})")
    return input.matmul(vec)


@_export()
def inner(input, other):
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    k = input.shape[-1]
    if other.shape[-1] != k:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(input.shape)} and {list(other.shape)}")
    out = input.reshape(math.prod(input.shape[:-1]), k).matmul(
        other.reshape(math.prod(other.shape[:-1]), k).t())
    return out.reshape(*input.shape[:-1], *other.shape[:-1])


@_export()
def vdot(input, other):
    if input.dim() != 1 or other.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.dim()}D and {other.dim()}D "
                           "tensors")
    if input.dtype != other.dtype:
        raise RuntimeError("vdot : expected both vectors to have same dtype, but found "
                           f"{input.dtype} and {other.dtype}")
    return input.dot(other)


@_export(method=False)
def chain_matmul(*matrices):
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if m.dim() != 2:
            raise RuntimeError(f"Tensor dimension is {m.dim()}, expected 2 instead.")
    out = matrices[0]
    for m in matrices[1:]:
        out = out.matmul(m)
    return out if len(matrices) > 1 else out.clone()


@_export()
def matrix_power(input, n):
    if input.dim() < 2 or input.shape[-1] != input.shape[-2]:
        raise RuntimeError("linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {tuple(input.shape[-2:])} matrices")
    if n == 0:
        eye = _C.eye(input.shape[-1], dtype=input.dtype, device=input.device)
        # on the graph (a zero gradient, as PyTorch), finite whatever input holds
        zero = _C.where(input - input == 0, input, _C.zeros_like(input)) * 0
        return eye.expand(*input.shape) + zero
    base = input
    if n < 0:
        from chutney import linalg
        base, n = linalg.inv(input), -n
    out = None
    while n:
        if n & 1:
            out = base if out is None else out.matmul(base)
        n >>= 1
        if n:
            base = base.matmul(base)
    return out


@_export()
def matrix_exp(input):
    """Scaling and squaring: exp(A) = exp(A / 2^s)^(2^s), with s chosen so
    the scaled norm is below 1/2 and a degree-18 Taylor series there (its
    remainder below float64's rounding); all matmuls, so gradients flow."""
    if input.dim() < 2 or input.shape[-1] != input.shape[-2]:
        raise RuntimeError("matrix_exp: expected a square matrix or a batch of square "
                           "matrices")
    n = input.shape[-1]
    with no_grad():
        norm = float(input.detach().abs().sum(-2).amax()) if input.numel() else 0.0
    s = max(0, math.ceil(math.log2(norm)) + 1) if norm > 0 and math.isfinite(norm) else 0
    a = input / (2.0 ** s) if s else input
    eye = _C.eye(n, dtype=input.dtype, device=input.device).expand(*input.shape)
    # Horner: I + a/1 (I + a/2 (I + ... (I + a/18)))
    acc = eye
    for k in range(18, 0, -1):
        acc = eye + a.matmul(acc) / k
    for _ in range(s):
        acc = acc.matmul(acc)
    return acc


# ---- statistics ----

@_export()
def cov(input, *, correction=1, fweights=None, aweights=None):
    if input.dim() > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {input.dim()} dimensions")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    x = _float(x)
    nobs = x.shape[1]
    w = None
    if fweights is not None:
        if fweights.is_floating_point():
            raise RuntimeError("cov(): expected fweights to have integral dtype")
        if bool((fweights < 0).any()):
            raise RuntimeError("cov(): fweights cannot be negative")
        w = fweights.to(x.dtype)
    if aweights is not None:
        if not aweights.is_floating_point():
            raise RuntimeError("cov(): expected aweights to have floating point dtype")
        if bool((aweights < 0).any()):
            raise RuntimeError("cov(): aweights cannot be negative")
        w = aweights.to(x.dtype) if w is None else w * aweights.to(x.dtype)
    if w is None:
        wsum = _C.tensor(float(nobs), dtype=x.dtype, device=x.device)
        avg = x.mean(dim=1, keepdim=True)
        norm = wsum - correction
    else:
        wsum = w.sum()
        avg = (x * w).sum(dim=1, keepdim=True) / wsum
        if aweights is None:
            norm = wsum - correction
        else:
            norm = wsum - correction * (w * aweights.to(x.dtype)).sum() / wsum
    norm = norm.clamp(min=0)
    xm = x - avg
    xw = xm if w is None else xm * w
    c = xw.matmul(xm.t()) / norm
    return c.reshape(()) if input.dim() < 2 else c


@_export()
def corrcoef(input):
    c = cov(input)
    if c.dim() == 0:
        return c / c
    d = diag(c).sqrt()
    return (c / d.unsqueeze(1) / d.unsqueeze(0)).clamp(-1, 1)


@_export()
def renorm(input, p, dim, maxnorm):
    if input.dim() <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.dim()} "
                           "dimensions")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    dim = _dim(dim, input.dim())
    others = tuple(d for d in range(input.dim()) if d != dim)
    x = input.abs()
    if p == math.inf:
        nrm = x.amax(dim=others, keepdim=True)
    else:
        nrm = (x ** p).sum(dim=others, keepdim=True) ** (1.0 / p)
    factor = _C.where(nrm > maxnorm, maxnorm / (nrm + 1e-7), _C.ones_like(nrm))
    return input * factor


@_export(method=False, names=("trapezoid", "trapz"))
def trapezoid(y, x=None, *, dx=None, dim=-1):
    dim = _dim(dim, y.dim())
    n = y.shape[dim]
    if n == 0:
        return y.sum(dim=dim)
    mid = (y.narrow(dim, 1, n - 1) + y.narrow(dim, 0, n - 1)) * 0.5
    if x is None or not isinstance(x, Tensor):
        step = dx if dx is not None else (x if x is not None else 1.0)
        return mid.sum(dim=dim) * step
    if x.dim() == 1:
        shape = [1] * y.dim()
        shape[dim] = n - 1
        d = FUNCTIONS["diff"](x).reshape(*shape)
    else:
        d = FUNCTIONS["diff"](x, dim=dim if x.dim() == y.dim() else -1)
    return (mid * d).sum(dim=dim)


@_export(method=False)
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    dim = _dim(dim, y.dim())
    n = y.shape[dim]
    if n == 0:
        return y.clone()
    mid = (y.narrow(dim, 1, n - 1) + y.narrow(dim, 0, n - 1)) * 0.5
    if x is None or not isinstance(x, Tensor):
        step = dx if dx is not None else (x if x is not None else 1.0)
        return (mid * step).cumsum(dim)
    if x.dim() == 1:
        shape = [1] * y.dim()
        shape[dim] = n - 1
        d = FUNCTIONS["diff"](x).reshape(*shape)
    else:
        d = FUNCTIONS["diff"](x, dim=dim if x.dim() == y.dim() else -1)
    return (mid * d).cumsum(dim)


@_export(method=False)
def vander(x, N=None, increasing=False):
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    if n * max(x.shape[0], 1) > 2 ** 31:
        raise RuntimeError(f"vander: N={n} is too large")
    v = x if x.is_floating_point() else x.to(_C.int64)
    cols, acc = [], None
    for i in range(n):
        acc = _C.ones_like(v) if i == 0 else (v if i == 1 else acc * v)
        cols.append(acc)
    if not cols:
        return _C.empty(x.shape[0], 0, dtype=v.dtype, device=x.device)
    out = _C.stack(cols, 1)
    return out if increasing else out.flip(1)


# ---- scatters and index puts ----

def _flat_targets(input, dim, index):
    """For each element of index: the flat position in input it lands at."""
    import numpy
    idx = _np(index).astype("int64")
    grids = numpy.indices(idx.shape) if idx.ndim else numpy.zeros((0,), dtype="int64")
    size = input.shape[dim]
    if idx.size and (idx.min() < -size or idx.max() >= size):
        raise RuntimeError(f"index {int(idx.max())} is out of bounds for dimension {dim} with "
                           f"size {size}")
    idx = idx % max(size, 1)
    coords = [grids[d] if d != dim else idx for d in range(idx.ndim)]
    return numpy.ravel_multi_index(coords, tuple(input.shape)) if idx.ndim else idx.reshape(1)


@_export()
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """sum/prod/mean/amax/amin of src's elements landing at each position
    (and the input's own element with include_self). Gradients as PyTorch:
    amax/amin share it evenly between the tied extremes, prod gives each
    contributor the product of the others."""
    import numpy
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError("reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    if index.is_floating_point():
        raise RuntimeError("scatter_reduce(): Expected dtype int64 for index")
    if input.dim() != index.dim() or src.dim() != index.dim():
        raise RuntimeError("Index tensor must have the same number of dimensions as self "
                           "tensor")
    dim = _dim(dim, input.dim())
    for d in range(index.dim()):
        if index.shape[d] > src.shape[d] or (d != dim and index.shape[d] > input.shape[d]):
            raise RuntimeError(f"Size does not match at dimension {d} expected index "
                               f"{list(index.shape)} to be smaller than self "
                               f"{list(input.shape)} apart from dimension {dim} and to be "
                               f"smaller size than src {list(src.shape)}")
    s = src
    for d in range(index.dim()):
        s = s.narrow(d, 0, index.shape[d])
    flat_in = input.reshape(-1)
    flat_src = s.reshape(-1)
    tgt = _flat_targets(input, dim, index).reshape(-1)
    n = input.numel()
    hits = numpy.bincount(tgt, minlength=n)
    hit = _C.tensor(hits > 0, device=input.device).reshape(*input.shape)
    pos = _index_tensor(tgt, input.device)
    zero = _C.zeros_like(flat_in)
    if reduce in ("sum", "mean"):
        tot = zero.scatter_add(0, pos, flat_src)
        if include_self:
            tot = tot + flat_in
        tot = tot.reshape(*input.shape)
        if reduce == "mean":
            cnt = _const(hits + (1 if include_self else 0), input).reshape(*input.shape)
            cnt = _C.where(cnt > 0, cnt, _C.ones_like(cnt))
            tot = tot / cnt if input.is_floating_point() else tot.floor_divide(cnt)
        return _C.where(hit, tot, input)
    a_in, a_src = _np(input).reshape(-1).astype("float64"), _np(s).reshape(-1).astype("float64")
    if reduce in ("amax", "amin"):
        ufunc = numpy.maximum if reduce == "amax" else numpy.minimum
        start = a_in.copy() if include_self else numpy.full(n, -numpy.inf if reduce == "amax"
                                                             else numpy.inf)
        res = start.copy()
        ufunc.at(res, tgt, a_src)
        # the elements equal to the extreme share its gradient
        with numpy.errstate(invalid="ignore"):
            on_src = (a_src == res[tgt]) | (numpy.isnan(a_src) & numpy.isnan(res[tgt]))
            tie_self = (a_in == res) | (numpy.isnan(a_in) & numpy.isnan(res))
        # PyTorch counts a tie with the input's own element even when
        # include_self=False (the element then gets none of the gradient)
        cnt = numpy.bincount(tgt, weights=on_src, minlength=n) + tie_self
        on_self = tie_self & include_self
        cnt = numpy.where(cnt > 0, cnt, 1)
        share = zero.scatter_add(0, pos, flat_src * _const(on_src / cnt[tgt], flat_src))
        share = share + flat_in * _const(on_self / cnt, flat_in)
    else:  # prod
        res = a_in.copy() if include_self else numpy.ones(n)
        numpy.multiply.at(res, tgt, a_src)
        # product of the others, exact where some are zero
        zeros = numpy.bincount(tgt, weights=a_src == 0, minlength=n) + \
            ((a_in == 0) & include_self)
        nz = a_in.copy() if include_self else numpy.ones(n)
        nz[nz == 0] = 1
        numpy.multiply.at(nz, tgt, numpy.where(a_src == 0, 1, a_src))
        with numpy.errstate(all="ignore"):
            def others(v, z, p):
                return numpy.where(z == 0, p / numpy.where(v == 0, 1, v),
                                   numpy.where((z == 1) & (v == 0), p, 0.0))
            o_src = others(a_src, zeros[tgt], nz[tgt])
            o_self = others(a_in, zeros, nz) * include_self
        share = zero.scatter_add(0, pos, (flat_src - flat_src.detach()) * _const(o_src, flat_src))
        share = share + (flat_in - flat_in.detach()) * _const(o_self, flat_in)
    out = _const(res, input) + (share - share.detach() if reduce != "prod" else share)
    return _C.where(hit, out.reshape(*input.shape), input)


def _index_put_positions(input, indices):
    """The flat positions (over the indexed leading dims) and the shape of
    the indexed part, for index_put's tuple of index tensors."""
    import numpy
    idx = []
    for t in indices:
        if t is None:
            raise NotImplementedError("index_put: None in indices is not supported")
        a = _np(t)
        if a.dtype == numpy.bool_:
            idx.extend(numpy.nonzero(a))
        else:
            if not numpy.issubdtype(a.dtype, numpy.integer):
                raise IndexError("tensors used as indices must be long, int, byte or bool "
                                 "tensors")
            idx.append(a.astype("int64"))
    if len(idx) > input.dim():
        raise IndexError(f"too many indices for tensor of dimension {input.dim()} "
                         f"(got {len(idx)})")
    idx = numpy.broadcast_arrays(*idx)
    lead = tuple(input.shape[:len(idx)])
    for d, (a, n) in enumerate(zip(idx, lead)):
        if a.size and (a.min() < -n or a.max() >= n):
            bad = int(a.max() if a.max() >= n else a.min())
            raise IndexError(f"index {bad} is out of bounds for dimension {d} with size {n}")
    flat = numpy.ravel_multi_index([a % n for a, n in zip(idx, lead)], lead) \
        if idx else numpy.zeros(1, dtype="int64")
    return flat.reshape(-1), idx[0].shape if idx else (), math.prod(lead), len(idx)


@_export()
def index_put(input, indices, values, accumulate=False):
    flat, ishape, lead_n, k = _index_put_positions(input, tuple(indices))
    rest = tuple(input.shape[k:])
    x = input.reshape(lead_n, *rest)
    v = values if isinstance(values, Tensor) else _C.tensor(values, device=input.device)
    v = v.to(input.dtype).expand(*ishape, *rest).reshape(len(flat), *rest)
    pos = _index_tensor(flat, input.device)
    if accumulate:
        out = FUNCTIONS["index_add"](x, 0, pos, v)
    else:
        out = index_copy(x, 0, pos, v)
    return out.reshape(*input.shape)


def index_put_(self, indices, values, accumulate=False):
    return self.copy_(index_put(self, indices, values, accumulate))


METHODS["index_put_"] = index_put_
FUNCTIONS["index_put_"] = index_put_


@_export()
def masked_scatter(input, mask, source):
    if mask.dtype != _C.bool:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with "
                           f"dtype {mask.dtype}")
    shape = tuple(broadcast_shapes(tuple(input.shape), tuple(mask.shape)))
    x = input.expand(*shape) if tuple(input.shape) != shape else input
    m = mask.expand(*shape) if tuple(mask.shape) != shape else mask
    pos = nonzero(m.reshape(-1)).reshape(-1)
    k = pos.numel()
    if source.numel() < k:
        raise RuntimeError("masked_scatter: expected source to have at least as many "
                           "elements as the ones in mask")
    vals = source.reshape(-1).narrow(0, 0, k).to(input.dtype)
    return index_copy(x.reshape(-1), 0, pos, vals).reshape(*shape)


def index_copy_(self, dim, index, source):
    return self.copy_(index_copy(self, dim, index, source))


def scatter_add_(self, dim, index, src):
    return self.copy_(self.scatter_add(dim, index, src))


def scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
    return self.copy_(scatter_reduce(self, dim, index, src, reduce, include_self=include_self))


# ---- miscellany ----

@_export()
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    import numpy
    if dim is not None:
        raise NotImplementedError("unique_consecutive: dim is not supported")
    a = _np(input).reshape(-1)
    if a.size:
        starts = numpy.concatenate([[True], a[1:] != a[:-1]])
    else:
        starts = numpy.zeros(0, dtype=bool)
    vals = a[starts]
    out = [_C.tensor(vals, device=input.device).to(input.dtype)]
    if return_inverse:
        inv = (numpy.cumsum(starts) - 1).reshape(tuple(input.shape))
        out.append(_index_tensor(inv, input.device))
    if return_counts:
        b = numpy.flatnonzero(starts)
        out.append(_index_tensor(numpy.diff(numpy.append(b, a.size)), input.device))
    return out[0] if len(out) == 1 else tuple(out)


@_export(method=False)
def unravel_index(indices, shape):
    """(torch 2.2's) the coordinates of flat indices in shape, one tensor a
    dimension."""
    import numpy
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    t = indices if isinstance(indices, Tensor) else _C.tensor(indices)
    if t.is_floating_point() or t.dtype == _C.bool:
        raise TypeError("expected 'indices' to be integer dtype, but got "
                        f"{str(t.dtype).replace('chutney.', '')}")
    a = _np(t).astype("int64")
    n = math.prod(shape)
    if a.size and (a.min() < -n or a.max() >= n):
        raise RuntimeError("'indices' must be in range [-prod(shape), prod(shape) - 1]")
    coords = numpy.unravel_index(a % n if n else a, shape)
    return tuple(_index_tensor(numpy.asarray(c), t.device) for c in coords)


# ---- dtypes ----

_KIND = {_C.bool: 0, _C.uint8: 1, _C.int8: 1, _C.int32: 1, _C.int64: 1,
         _C.float16: 2, _C.bfloat16: 2, _C.float32: 2, _C.float64: 2}
_WIDTH = {_C.bool: 1, _C.uint8: 8, _C.int8: 8, _C.int32: 32, _C.int64: 64,
          _C.float16: 16, _C.bfloat16: 16, _C.float32: 32, _C.float64: 64}


@_export(method=False)
def promote_types(type1, type2):
    """PyTorch's promotion lattice; uint8 with int8, int16 in PyTorch, is
    int32 here (the library has no int16, and its ops give int32)."""
    a, b = type1, type2
    if a == b:
        return a
    ka, kb = _KIND[a], _KIND[b]
    if ka != kb:
        return a if ka > kb else b
    if {a, b} == {_C.uint8, _C.int8}:
        return _C.int32
    if {a, b} == {_C.float16, _C.bfloat16}:
        return _C.float32
    return a if _WIDTH[a] > _WIDTH[b] else b


def _operand_dtype(x):
    if isinstance(x, Tensor):
        return x.dtype, (2 if x.dim() else 1)
    if isinstance(x, bool):
        return _C.bool, 0
    if isinstance(x, int):
        return _C.int64, 0
    if isinstance(x, float):
        return _C.float32, 0
    raise TypeError(f"result_type(): expected a Tensor or a Number, got {type(x).__name__}")


@_export(method=False)
def result_type(tensor1, tensor2):
    """The dtype of an op on the two: dimensioned tensors first, then 0-d
    tensors, then Python numbers, a later tier only counting when it is of a
    higher kind (bool < integer < floating)."""
    tiers = {}
    for x in (tensor1, tensor2):
        dt, tier = _operand_dtype(x)
        tiers[tier] = dt if tier not in tiers else promote_types(tiers[tier], dt)
    out = None
    for tier in (2, 1, 0):
        if tier in tiers:
            dt = tiers[tier]
            if out is None or _KIND[dt] > _KIND[out]:
                out = dt if tier or out is None else \
                    {0: _C.bool, 1: _C.int64, 2: _C.float32}[_KIND[dt]]
    return out


@_export(method=False)
def can_cast(from_, to):
    return _KIND[from_] <= _KIND[to]


_deterministic = {"mode": False, "warn_only": False}


@_export(method=False)
def use_deterministic_algorithms(mode, *, warn_only=False):
    """Recorded only: the library's CPU kernels are deterministic already."""
    _deterministic["mode"], _deterministic["warn_only"] = bool(mode), bool(warn_only)


@_export(method=False)
def are_deterministic_algorithms_enabled():
    return _deterministic["mode"]


@_export(method=False)
def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic["warn_only"]


@_export(method=False)
def set_default_dtype(d):
    """float32 only: the library's floating default is float32 throughout."""
    if d != _C.float32:
        if d not in _KIND or _KIND[d] != 2:
            raise TypeError(f"only floating-point types are supported as the default type "
                            f"(got {d})")
        raise NotImplementedError(f"set_default_dtype({d}): the default dtype is float32 here "
                                  "(make tensors with dtype= instead)")


# What the repr prints: PyTorch's defaults. Anything else cannot be honoured.
_PRINT_DEFAULTS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80,
                   "profile": "default", "sci_mode": None}


@_export(method=False)
def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Only PyTorch's defaults (precision=4, threshold=1000, edgeitems=3,
    linewidth=80, profile="default", sci_mode=None): the repr is the C
    library's, which has fixed options."""
    given = dict(precision=precision, threshold=threshold, edgeitems=edgeitems,
                 linewidth=linewidth, profile=profile, sci_mode=sci_mode)
    bad = [k for k, v in given.items() if v is not None and v != _PRINT_DEFAULTS[k]]
    if bad:
        raise NotImplementedError("set_printoptions: the repr cannot honour "
                                  + ", ".join(f"{k}={given[k]!r}" for k in bad)
                                  + " (it prints with PyTorch's default options)")


# ---- random ----

def _numpy_rng():
    """A NumPy generator seeded from the library's stream, so
    chutney.manual_seed makes its draws reproducible."""
    import numpy
    with no_grad():
        s = _C.randint(0, 2 ** 62, (2,)).tolist()
    return numpy.random.default_rng(s)


@_export(method=False)
def seed():
    s = int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)
    _C.manual_seed(s)
    return s


@_export(method=False)
def initial_seed():
    return int(_C.get_rng_state()[0])


@_export(method=False)
def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False,
                 layout=None, memory_format=None):
    if high is None:
        low, high = 0, low
    out = _C.randint(int(low), int(high), tuple(input.shape), device=device or input.device)
    return out.to(dtype or input.dtype)


@_export(method=False)
def poisson(input, generator=None):
    import numpy
    from chutney import _generator
    with _generator.drawing(generator):
        rng = _numpy_rng()
    lam = _np(input).astype("float64")
    if (lam < 0).any() or numpy.isnan(lam).any():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return _C.tensor(rng.poisson(lam).astype("float64"), device=input.device).to(input.dtype)


def _fill_with(self, values):
    """values written into self: recorded where self requires grad (a zero
    gradient; refused on a leaf, as PyTorch's in-place ops are)."""
    import numpy
    src = _C.tensor(numpy.asarray(values), device=self.device).to(self.dtype)
    if self.requires_grad and _C.is_grad_enabled():  # on self's graph, a zero slope
        src = src + _C.where(self - self == 0, self, _C.zeros_like(self)) * 0
    return self.copy_(src)


_RANDOM_TOP = {_C.float32: 2 ** 24, _C.float64: 2 ** 53, _C.float16: 2 ** 11,
               _C.bfloat16: 2 ** 8, _C.int32: 2 ** 31 - 1, _C.int64: 2 ** 63 - 1,
               _C.uint8: 255, _C.int8: 127, _C.bool: 1}


def random_(self, from_=0, to=None, *, generator=None, **kwargs):
    """Integers in [from, to - 1] (one argument: [0, to - 1]; none: [0,
    2^mantissa] for floats, the dtype's maximum for integers)."""
    from chutney import _generator
    if "from" in kwargs:
        from_ = kwargs.pop("from")
    if kwargs:
        raise TypeError(f"random_() got unexpected keyword arguments {sorted(kwargs)}")
    if to is None and from_ != 0:
        lo, hi = 0, from_
    elif to is None:
        lo, hi = 0, _RANDOM_TOP[self.dtype] + 1
    else:
        lo, hi = from_, to
    if lo >= hi:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={lo} "
                           f">= to={hi}")
    with _generator.drawing(generator):
        rng = _numpy_rng()
    return _fill_with(self, rng.integers(lo, hi, tuple(self.shape), dtype="int64",
                                         endpoint=False).astype("float64")
                      if self.is_floating_point() else
                      rng.integers(lo, hi, tuple(self.shape), dtype="int64"))


def _uniform(self, generator):
    from chutney import _generator
    with _generator.drawing(generator):
        rng = _numpy_rng()
    return rng.random(tuple(self.shape))


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    import numpy
    from chutney import _generator
    if std <= 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    with _generator.drawing(generator):
        rng = _numpy_rng()
    return _fill_with(self, numpy.exp(rng.standard_normal(tuple(self.shape)) * std + mean))


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    import numpy
    u = _uniform(self, generator)
    return _fill_with(self, median + sigma * numpy.tan(numpy.pi * (u - 0.5)))


def geometric_(self, p, *, generator=None):
    import numpy
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    u = _uniform(self, generator)
    return _fill_with(self, numpy.ceil(numpy.log1p(-u) / math.log1p(-p)).clip(min=1))


# ---- Tensor-only methods ----

def detach_(self):
    return self._replace_(self.detach())


def cuda(self, device=None, non_blocking=False, memory_format=None):
    from chutney import cuda as _cuda
    if not _cuda.is_available():
        raise RuntimeError("Found no NVIDIA driver on your system: no CUDA device is "
                           "available")
    if device is None:
        return self.to("cuda")
    if isinstance(device, int):
        return self.to(f"cuda:{device}")
    return self.to(device)


def pin_memory(self, device=None):
    """Host memory is ordinary memory here: the tensor itself."""
    return self


def is_pinned(self, device=None):
    return False


def share_memory_(self):
    """A no-op (the library shares no memory between processes)."""
    return self


def is_shared(self):
    return False


def get_device(self):
    d = self.device
    return -1 if d.type == "cpu" else (d.index or 0)


def squeeze_(self, dim=None):
    return self._replace_(self.squeeze() if dim is None else self.squeeze(dim))


def unsqueeze_(self, dim):
    return self._replace_(self.unsqueeze(dim))


def t_(self):
    return self._replace_(self.t())


def transpose_(self, dim0, dim1):
    return self._replace_(self.transpose(dim0, dim1))


def swapdims(self, dim0, dim1):
    return self.transpose(dim0, dim1)


def resize_(self, *sizes, memory_format=None):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list, _C.Size)):
        sizes = tuple(sizes[0])
    if any(not isinstance(s, int) or s < 0 for s in sizes):
        raise RuntimeError(f"resize_: sizes must be non-negative integers, got {list(sizes)}")
    if math.prod(sizes) != self.numel():
        raise RuntimeError(f"resize_: only a resize that keeps the number of elements is "
                           f"supported ({self.numel()} elements to {list(sizes)})")
    return self._replace_(self.reshape(*sizes))


def short(self, memory_format=None):
    raise TypeError("short(): the library has no int16 dtype")


def char(self, memory_format=None):
    return self.to(_C.int8)


def sum_to_size(self, *size):
    if len(size) == 1 and isinstance(size[0], (tuple, list, _C.Size)):
        size = tuple(size[0])
    shape = tuple(self.shape)
    lead = len(shape) - len(size)
    if lead < 0 or any(s != 1 and s != t for s, t in zip(size, shape[lead:])):
        raise RuntimeError(f"size {{{', '.join(map(str, size))}}} is not expandable to size "
                           f"{{{', '.join(map(str, shape))}}}.")
    out = self.sum(dim=tuple(range(lead))) if lead else self
    dims = tuple(i for i, (s, t) in enumerate(zip(size, shape[lead:])) if s == 1 and t != 1)
    if dims:
        out = out.sum(dim=dims, keepdim=True)
    return out


def unfold(self, dimension, size, step):
    """Windows of size elements every step along dimension, as a new last
    dimension (a gather: PyTorch returns a view)."""
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    x = self.reshape(1) if self.dim() == 0 else self
    d = _dim(dimension, x.dim())
    length = x.shape[d]
    if size > length or size < 0:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is "
                           f"{size}")
    n = (length - size) // step + 1
    idx = _C.tensor([w * step + j for w in range(n) for j in range(size)], dtype=_C.int64,
                    device=x.device)
    y = x.index_select(d, idx)
    shape = list(x.shape)
    y = y.reshape(*shape[:d], n, size, *shape[d + 1:])
    out = FUNCTIONS["movedim"](y, d + 1, -1)
    return out.reshape(size) if self.dim() == 0 else out


def apply_(self, callable):  # noqa: A002 (PyTorch's name)
    if self.device.type != "cpu":
        raise TypeError("apply_ is only implemented on CPU tensors")
    flat = self.reshape(-1).tolist()
    if self.requires_grad:
        raise RuntimeError("Can't call apply_() on Variable that requires grad. Use "
                           "var.detach().apply_() instead.")
    vals = [callable(v) for v in flat]
    with no_grad():
        return self.copy_(_C.tensor(vals, dtype=self.dtype).reshape(*self.shape))


def _H(self):
    if self.dim() not in (0, 2):
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{self.dim()}-D tensor.")
    return self if self.dim() == 0 else self.transpose(0, 1)


def _mH(self):
    if self.dim() < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. "
                           f"Got {self.dim()}-D tensor.")
    return self.transpose(-2, -1)


def _compare_inplace(name):
    def method(self, other):
        return self.copy_(getattr(self, name)(other).to(self.dtype))
    method.__name__ = name + "_"
    return method


def _cum_inplace(name):
    def method(self, dim, *, dtype=None):
        return self.copy_(getattr(self, name)(dim).to(self.dtype))
    method.__name__ = name + "_"
    return method


def clip_(self, min=None, max=None):  # noqa: A002
    return self.clamp_(min, max)


def _matrices(self, what):
    if not isinstance(self, Tensor) or self.dim() < 2:
        raise RuntimeError(f"{what}: expected a tensor with 2 or more dimensions")


def pinverse(self, rcond=1e-15):
    """The pseudo-inverse, singular values s <= rcond * max(s) taken as 0
    (chutney.linalg.pinv for the default rcond; another rcond has no gradient)."""
    from chutney import linalg
    from chutney.autograd import is_grad_enabled
    _matrices(self, "pinverse")
    if rcond == 1e-15 or self.numel() == 0:
        return linalg.pinv(self)
    if is_grad_enabled() and self.requires_grad:
        raise NotImplementedError("pinverse: its gradient is not implemented for an rcond other "
                                  "than the default 1e-15; call it under chutney.no_grad() or "
                                  "on a detached tensor")
    u, s, vh = linalg.svd(self, full_matrices=False)
    cut = s.amax(dim=-1, keepdim=True) * rcond
    s_inv = _C.where(s > cut, 1.0 / s, _C.zeros_like(s))
    return vh.transpose(-2, -1).matmul(s_inv.unsqueeze(-1) * u.transpose(-2, -1))


def slogdet(self):
    from chutney import linalg
    _matrices(self, "slogdet")
    if self.shape[-1] != self.shape[-2]:
        raise RuntimeError("slogdet: A must be batches of square matrices")
    return linalg.slogdet(self)


for _fn in (index_copy_, scatter_add_, scatter_reduce_, random_, log_normal_, cauchy_,
            geometric_, detach_, cuda, pin_memory, is_pinned, share_memory_, is_shared,
            get_device, squeeze_, unsqueeze_, t_, transpose_, swapdims, resize_, short, char,
            sum_to_size, unfold, apply_, clip_, pinverse, slogdet):
    METHODS[_fn.__name__] = _fn
METHODS["swapdims_"] = transpose_
METHODS["swapaxes_"] = transpose_
METHODS["H"] = property(_H)
METHODS["mH"] = property(_mH)
METHODS["is_sparse"] = property(lambda self: False)
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    METHODS[_name + "_"] = _compare_inplace(_name)
for _name in ("cumsum", "cumprod"):
    METHODS[_name + "_"] = _cum_inplace(_name)
FUNCTIONS["swapdims"] = swapdims
FUNCTIONS["pinverse"] = pinverse
FUNCTIONS["slogdet"] = slogdet
del _fn, _name
