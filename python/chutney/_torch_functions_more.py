"""A third batch of torch's top-level functions and Tensor methods, over the
library's ops (registered in _tensor_extras' METHODS and FUNCTIONS,
installed with them): aliases and in-place forms, the aten spellings of
chutney.nn.functional (torch.dropout(x, p, train), reductions as ints),
legacy linear algebra over chutney.linalg, the *_scatter and *_copy ops,
windows, and the small queries PyTorch scripts make.

Host-computed results (frexp, nextafter, bitwise ops, mode's positions,
histograms) carry no gradient, as in PyTorch; where PyTorch differentiates,
the values are gathers or compositions, so gradients flow.
"""

import math
import types
from builtins import range as _builtin_range
import warnings
from collections import namedtuple

from chutney import _C, _generator
from chutney._tensor_extras import FUNCTIONS, METHODS, _dim, _export, _index_tensor, _np
from chutney.autograd import no_grad

Tensor = _C.Tensor

_frexp_result = namedtuple("frexp", ["mantissa", "exponent"])
_mode_result = namedtuple("mode", ["values", "indices"])
_histogram_result = namedtuple("histogram", ["hist", "bin_edges"])
_histogramdd_result = namedtuple("histogramdd", ["hist", "bin_edges"])
_qr_result = namedtuple("qr", ["Q", "R"])
_svd_result = namedtuple("svd", ["U", "S", "V"])
_symeig_result = namedtuple("symeig", ["eigenvalues", "eigenvectors"])
_triangular_result = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])

_FLOATS = (_C.float16, _C.bfloat16, _C.float32, _C.float64)
_INTS = (_C.uint8, _C.int8, _C.int32, _C.int64)


def _F():
    from chutney.nn import functional
    return functional


def _is_tensor(x, what="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{what} must be a Tensor, not {type(x).__name__}")
    return x


def _float(t):
    return t if t.is_floating_point() else t.to(_C.float32)


def _same_type(a, b):
    """The result dtype of a binary op on a and b (tensors or Python numbers),
    with PyTorch's tiers for 0-d tensors and numbers."""
    return FUNCTIONS["result_type"](a, b)


def _ints(x, n=None):
    return (x,) * (n or 1) if isinstance(x, int) else tuple(x)


def _host(values, like_device, dtype):
    import numpy
    return _C.tensor(numpy.ascontiguousarray(values), device=like_device).to(dtype)


# ---- aliases ----

@_export(method=False, names=("concatenate",))
def concatenate(tensors, dim=0, *, axis=None, out=None):
    return _C.cat(list(tensors), dim if axis is None else axis)


@_export(names=("greater_equal",))
def greater_equal(input, other):
    return input.ge(other)


@_export(names=("less_equal",))
def less_equal(input, other):
    return input.le(other)


@_export(names=("fix",))
def fix(input):
    return input.trunc()


@_export(method=False)
def adjoint(input):
    if input.dim() < 2:
        raise RuntimeError("tensor.adjoint() is only supported on matrices or batches of "
                           "matrices. Got 1-D tensor." if input.dim() == 1 else
                           "tensor.adjoint() is only supported on matrices or batches of "
                           "matrices. Got 0-D tensor.")
    return input.transpose(-2, -1)


METHODS["adjoint"] = adjoint


@_export(method=False, names=("split_with_sizes", "unsafe_split_with_sizes"))
def split_with_sizes(input, split_sizes, dim=0):
    sizes = list(split_sizes)
    d = _dim(dim, input.dim())
    if sum(sizes) != input.shape[d] or any(s < 0 for s in sizes):
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to "
                           f"{input.shape[d]} (input tensor's size at dimension {d}), but got "
                           f"split_sizes={sizes}")
    return tuple(input.split(sizes, d))


def _split_method(self, split_sizes, dim=0):
    return split_with_sizes(self, split_sizes, dim)


METHODS["split_with_sizes"] = METHODS["unsafe_split_with_sizes"] = _split_method


@_export(names=("unsafe_split",))
def unsafe_split(input, split_size, dim=0):
    return tuple(input.split(split_size, dim))


@_export(names=("unsafe_chunk",))
def unsafe_chunk(input, chunks, dim=0):
    return tuple(input.chunk(chunks, dim))


# Real tensors only: their conjugate, real part and resolved forms are
# themselves, which is what generic (complex-aware) code asks for.
def _identity(input):
    _is_tensor(input)
    return input


for _name in ("conj", "conj_physical", "resolve_conj", "resolve_neg"):
    FUNCTIONS[_name] = METHODS[_name] = _identity
FUNCTIONS["real"] = _identity
METHODS["real"] = property(_identity)
METHODS["conj_physical_"] = _identity


def _imag(input):
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


FUNCTIONS["imag"] = _imag
METHODS["imag"] = property(_imag)


def _false(*args, **kwargs):
    return False


for _name in ("is_conj", "is_neg", "is_inference", "is_distributed"):
    FUNCTIONS[_name] = METHODS[_name] = _false
for _name in ("is_meta", "is_mkldnn", "is_mps", "is_nested", "is_quantized", "is_sparse_csr",
              "is_vulkan", "is_xpu", "is_ipu", "is_ort"):
    METHODS[_name] = property(_false)
FUNCTIONS["is_storage"] = _false
FUNCTIONS["is_vulkan_available"] = _false


@_export()
def is_signed(input):
    return input.dtype not in (_C.uint8, _C.bool)


@_export()
def is_same_size(input, other):
    return tuple(input.shape) == tuple(_is_tensor(other, "other").shape)


def _to_dense(self, dtype=None):
    return self if dtype is None else self.to(dtype)


METHODS["to_dense"] = _to_dense


class layout:
    """torch.layout: tensors here are all strided (dense)."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"chutney.{self._name}"


strided = layout("strided")
FUNCTIONS["layout"] = layout
FUNCTIONS["strided"] = strided
METHODS["layout"] = property(lambda self: strided)


# ---- in-place forms ----

def _inplace(name):
    def method(self, *args, **kwargs):
        return self.copy_(getattr(self, name)(*args, **kwargs))
    method.__name__ = name + "_"
    method.__doc__ = f"{name} written into the tensor (not while recording its gradient)."
    return method


for _name in ("acos", "acosh", "asin", "asinh", "atan", "atanh", "arccos", "arccosh", "arcsin",
              "arcsinh", "arctan", "arctanh", "tan", "sinh", "cosh", "sinc", "log2", "log10",
              "exp2", "deg2rad", "rad2deg", "sgn", "erfc", "erfinv", "lgamma", "digamma",
              "polygamma", "mvlgamma", "i0", "fix", "absolute", "negative",
              "multiply", "subtract", "divide", "true_divide", "remainder", "floor_divide",
              "fmod", "atan2", "arctan2", "copysign", "hypot", "xlogy", "ldexp", "gcd", "lcm",
              "heaviside", "nextafter", "logical_and", "logical_or", "logical_xor",
              "logical_not", "renorm", "addmm", "addmv", "addbmm", "addr", "baddbmm",
              "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
              "bitwise_right_shift", "put", "index_reduce"):
    METHODS.setdefault(_name + "_", _inplace(_name))


def _compare_inplace(name, op):
    def method(self, other):
        return self.copy_(getattr(self, op)(other).to(self.dtype))
    method.__name__ = name + "_"
    return method


for _name, _op in (("greater", "gt"), ("less", "lt"), ("greater_equal", "ge"),
                   ("less_equal", "le"), ("not_equal", "ne")):
    METHODS[_name + "_"] = _compare_inplace(_name, _op)


def _float_power_(self, exponent):
    if self.dtype != _C.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype "
                           f"{str(self.dtype).split('.')[-1].capitalize()} but the operation's "
                           "result requires dtype Double")
    return self.copy_(FUNCTIONS["float_power"](self, exponent))


METHODS["float_power_"] = _float_power_


def _function_of_method(name):
    def fn(input, *args, **kwargs):
        return getattr(_is_tensor(input), name)(*args, **kwargs)
    fn.__name__ = name
    return fn


# torch.abs_(x) & co: the in-place methods as functions
for _name in ("abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_",
              "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_",
              "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "erf_", "erfc_", "exp2_",
              "exp_", "expm1_", "fix_", "floor_", "frac_", "gcd_", "lcm_", "ldexp_", "log10_",
              "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_", "negative_",
              "rad2deg_", "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_",
              "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "xlogy_",
              "zero_", "fill_", "detach_", "resize_as_", "i0_"):
    FUNCTIONS[_name] = _function_of_method(_name)


@_export(method=False)
def fill(input, value):
    v = value.item() if isinstance(value, Tensor) else value
    out = _C.full_like(input, v)
    return out + _zero_of(input) if input.requires_grad else out


def _resize_as_(self, the_template, memory_format=None):
    return self.resize_(*_is_tensor(the_template, "the_template").shape)


def _resize_as(self, the_template, memory_format=None):
    return self.reshape(*_is_tensor(the_template, "the_template").shape)


METHODS["resize_as_"] = _resize_as_
METHODS["resize_as"] = _resize_as


# ---- elementwise ----

@_export()
def erfc(input):
    from chutney import special
    return special.erfc(_float(input))


@_export()
def i0(input):
    from chutney import special
    return special.i0(_float(input))


@_export()
def angle(input):
    """Real input: 0 where >= 0, pi where negative, NaN for NaN; a zero
    gradient, as PyTorch's."""
    x = _float(input)
    with no_grad():
        out = _C.where(x < 0, _C.full_like(x, math.pi), _C.zeros_like(x))
        out = _C.where(x != x, x, out)
    return out + _zero_of(x) if x.requires_grad else out


def _zero_of(t):
    """zeros on t's graph (a zero gradient), finite whatever t holds"""
    return _C.where(t - t == 0, t, _C.zeros_like(t)) * 0


@_export()
def copysign(input, other):
    o = other if isinstance(other, Tensor) else _C.tensor(float(other), device=input.device)
    dt = _same_type(input, other)
    if dt not in (_C.float16, _C.bfloat16, _C.float32, _C.float64):
        dt = _C.float32
    x = input.to(dt)
    with no_grad():
        neg = o.signbit() if o.is_floating_point() else o < 0
        s = _C.where(neg, _C.full_like(x, -1.0), _C.ones_like(x))
    out = x.abs() * s
    return out + _zero_of(o) if o.requires_grad else out


@_export()
def frexp(input):
    import numpy
    if not input.is_floating_point():
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    a = _np(input)
    m, e = numpy.frexp(a)
    exponent = _host(e.astype("int32"), input.device, _C.int32)
    if not input.requires_grad:
        return _frexp_result(_host(m, input.device, input.dtype), exponent)
    # input times 2^-e: exact (a power of two), and the gradient PyTorch gives
    scale = _host(numpy.ldexp(numpy.ones_like(a, dtype="float64"), -e), input.device,
                  input.dtype)
    return _frexp_result(input * scale, exponent)


@_export()
def nextafter(input, other):
    import numpy
    o = other if isinstance(other, Tensor) else _C.tensor(other, device=input.device)
    if not input.is_floating_point() or not o.is_floating_point():
        raise RuntimeError('"nextafter_cpu" not implemented for integer dtypes')
    dt = _same_type(input, other)
    npdt = {_C.float32: "float32", _C.float64: "float64", _C.float16: "float16"}.get(dt)
    if npdt is None:
        raise NotImplementedError("nextafter: bfloat16 is not supported")
    r = numpy.nextafter(_np(input).astype(npdt), _np(o).astype(npdt))
    return _host(numpy.asarray(r), input.device, dt)


def _bitwise(name, op, input, other):
    import numpy
    o = other if isinstance(other, Tensor) else _C.tensor(other, device=input.device)
    if input.is_floating_point() or o.is_floating_point():
        raise RuntimeError(f'"{name}_cpu" not implemented for floating-point dtypes')
    dt = _same_type(input, other)
    npdt = "bool" if dt == _C.bool else "int64"
    r = numpy.asarray(op(_np(input).astype(npdt), _np(o).astype(npdt)))
    return _host(r.astype(_NP_OF[dt]), input.device, dt)


@_export()
def bitwise_and(input, other):
    import numpy
    return _bitwise("bitwise_and", numpy.bitwise_and, input, other)


@_export()
def bitwise_or(input, other):
    import numpy
    return _bitwise("bitwise_or", numpy.bitwise_or, input, other)


@_export()
def bitwise_xor(input, other):
    import numpy
    return _bitwise("bitwise_xor", numpy.bitwise_xor, input, other)


@_export()
def bitwise_not(input):
    import numpy
    if input.is_floating_point():
        raise RuntimeError('"bitwise_not_cpu" not implemented for floating-point dtypes')
    if input.dtype == _C.bool:
        return input.logical_not()
    r = numpy.invert(_np(input).astype("int64"))
    return _host(r, input.device, input.dtype)


_BITS = {_C.uint8: 8, _C.int8: 8, _C.int32: 32, _C.int64: 64, _C.bool: 8}


def _shift(name, input, other, left):
    import numpy
    o = other if isinstance(other, Tensor) else _C.tensor(other, device=input.device)
    if input.is_floating_point() or o.is_floating_point():
        raise RuntimeError(f'"{name}_cpu" not implemented for floating-point dtypes')
    dt = _same_type(input, other)
    a, s = numpy.broadcast_arrays(_np(input).astype("int64"), _np(o).astype("int64"))
    bits = _BITS[dt]
    # Shifts by the width or more (or negative) leave no bits: 0, or -1 for
    # a negative number shifted right (as PyTorch's kernels give).
    big = (s >= bits) | (s < 0)
    sc = numpy.where(big, 0, s)
    if left:
        r = numpy.where(big, 0, numpy.left_shift(a, sc))
    else:
        r = numpy.where(big, numpy.where(a < 0, -1, 0), numpy.right_shift(a, sc))
    if dt in (_C.uint8, _C.int8, _C.int32):  # wrap to the width, as C's shift does
        r = r.astype(_NP_OF[dt])
    return _host(r, input.device, dt)


@_export()
def bitwise_left_shift(input, other):
    return _shift("lshift", input, other, True)


@_export()
def bitwise_right_shift(input, other):
    return _shift("rshift", input, other, False)


# ---- products and linear algebra ----

@_export()
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    if batch1.dim() != 3 or batch2.dim() != 3:
        raise RuntimeError("batch1 and batch2 must be 3D tensors")
    prod = batch1.matmul(batch2).sum(0)
    return _add_scaled(input, prod, beta, alpha)


def _add_scaled(input, prod, beta, alpha):
    prod = prod * alpha if alpha != 1 else prod
    if beta == 0:  # input ignored, NaN and inf in it too (PyTorch), but a zero gradient
        return prod + _zero_of(input) if input.requires_grad else \
            prod.expand(*FUNCTIONS["broadcast_shapes"](tuple(input.shape), tuple(prod.shape)))
    return (input * beta if beta != 1 else input) + prod


@_export()
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    if vec1.dim() != 1 or vec2.dim() != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {vec1.dim()}-D")
    return _add_scaled(input, vec1.unsqueeze(1) * vec2.unsqueeze(0), beta, alpha)


@_export()
def dist(input, other, p=2):
    from chutney import linalg
    return linalg.vector_norm(input - other, p)


@_export()
def cross(input, other, dim=None):
    from chutney import linalg
    if dim is None:  # PyTorch's (deprecated) default: the first dimension of size 3
        shape = FUNCTIONS["broadcast_shapes"](tuple(input.shape), tuple(other.shape))
        dims = [i for i, s in enumerate(shape) if s == 3]
        if not dims:
            raise RuntimeError("no dimension of size 3 in input")
        dim = dims[0]
    return linalg.cross(input, other, dim=dim)


@_export()
def logdet(input):
    """log(det): NaN for a negative determinant, -inf for zero (as PyTorch);
    det's gradient, so it flows."""
    if input.dim() < 2 or input.shape[-1] != input.shape[-2]:
        raise RuntimeError("logdet: A must be batches of square matrices")
    d = _linalg("det", input)
    with no_grad():
        nan = _C.full_like(d, math.nan)
    # a negative determinant: NaN, and no gradient (PyTorch's is zero)
    return _C.where(d < 0, nan, d).log()


@_export()
def cholesky(input, upper=False):
    return _linalg("cholesky", input, upper=upper)


def _linalg(name, *args, **kwargs):
    """chutney.linalg.name(...), NumPy's LinAlgError (a singular or
    non-square input) as PyTorch's RuntimeError"""
    import numpy
    from chutney import linalg
    for a in args[:1]:
        if not isinstance(a, Tensor) or a.dim() < 2:
            raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 "
                               "dimensions.")
    try:
        return getattr(linalg, name)(*args, **kwargs)
    except numpy.linalg.LinAlgError as e:
        raise RuntimeError(f"linalg.{name}: {e}") from None


def _tri(A, upper, unit=False):
    t = A.triu() if upper else A.tril()
    if unit:
        n = A.shape[-1]
        eye = _C.eye(n, dtype=A.dtype, device=A.device)
        t = t - FUNCTIONS["diag_embed"](FUNCTIONS["diagonal"](t, 0, -2, -1)) + eye
    return t


def _factor(f, upper):
    """f's triangle; f itself when it is triangular already, so that the
    gradient reaches all of it as PyTorch's does."""
    t = _tri(f, upper)
    with no_grad():
        same = bool((t == f).all())
    return f if same else t


@_export()
def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False):
    """(solution of A X = input, A cloned); only A's triangle is read."""
    if input.dim() < 2 or A.dim() < 2:
        raise RuntimeError("triangular_solve: expected b and A to have at least 2 dimensions")
    t = _tri(A, upper, unitriangular)
    if transpose:
        t = t.transpose(-2, -1)
    return _triangular_result(_linalg("solve", t, input), A.clone())


@_export()
def cholesky_solve(input, input2, upper=False):
    """X with A X = input, A = L L^T (or U^T U) from the factor input2."""
    if input.dim() < 2 or input2.dim() < 2:
        raise RuntimeError("cholesky_solve: expected b and A to have at least 2 dimensions")
    f = _factor(input2, upper)
    a = f.transpose(-2, -1).matmul(f) if upper else f.matmul(f.transpose(-2, -1))
    return _linalg("solve", a, input)


@_export()
def cholesky_inverse(input, upper=False):
    if input.dim() < 2 or input.shape[-1] != input.shape[-2]:
        raise RuntimeError("cholesky_inverse: A must be batches of square matrices")
    f = _factor(input, upper)
    a = f.transpose(-2, -1).matmul(f) if upper else f.matmul(f.transpose(-2, -1))
    return _linalg("inv", a)


@_export()
def qr(input, some=True):
    return _qr_result(*_linalg("qr", input, mode="reduced" if some else "complete"))


@_export()
def svd(input, some=True, compute_uv=True):
    """U, S, V (V, not V^H); compute_uv=False: U and V zero-filled, as
    PyTorch."""
    if input.dim() < 2:
        raise RuntimeError("svd: The input tensor A must have at least 2 dimensions.")
    if not compute_uv:
        s = _linalg("svdvals", input)
        m, n = input.shape[-2:]
        batch = tuple(input.shape[:-2])
        k = min(m, n)
        u = _C.zeros(*batch, m, k if some else m, dtype=input.dtype, device=input.device)
        v = _C.zeros(*batch, n, k if some else n, dtype=input.dtype, device=input.device)
        return _svd_result(u, s, v)
    u, s, vh = _linalg("svd", input, full_matrices=not some)
    return _svd_result(u, s, vh.transpose(-2, -1))


@_export()
def symeig(input, eigenvectors=False, upper=True):
    w, v = _linalg("eigh", input, UPLO="U" if upper else "L")
    if not eigenvectors:
        return _symeig_result(w, _C.empty(0, dtype=input.dtype, device=input.device))
    return _symeig_result(w, v)


@_export(method=False)
def frobenius_norm(input, dim=None, keepdim=False):
    x = input.square()
    s = x.sum() if dim is None else x.sum(dim=dim, keepdim=keepdim)
    return s.sqrt()


@_export(method=False)
def nuclear_norm(input, dim=None, keepdim=False):
    if isinstance(dim, bool):  # nuclear_norm(input, keepdim)
        dim, keepdim = None, dim
    x = input if dim is None else FUNCTIONS["movedim"](input, tuple(dim), (-2, -1))
    if x.dim() < 2:
        raise RuntimeError("nuclear_norm: expected a matrix or a batch of matrices")
    with no_grad():
        u, sv, vh = _linalg("svd", x.detach(), full_matrices=False)
        out = sv.sum(-1)
    if x.requires_grad:
        # the gradient of the sum of singular values is U V^H: attached as
        # a term zero in value (first order only; svd has no gradient here)
        g = u.matmul(vh)
        t = (x * g).sum((-2, -1))
        out = out + (t - t.detach())
    if keepdim:
        out = out.unsqueeze(-1).unsqueeze(-1)
        if dim is not None:
            out = FUNCTIONS["movedim"](out, (-2, -1), tuple(dim))
    return out


# ---- reductions and statistics ----

@_export()
def mode(input, dim=-1, keepdim=False):
    """The most frequent value along dim (the smallest of the tied ones) and
    the index of its last occurrence; the value is a gather, so it takes
    the gradient."""
    import numpy
    x = input.reshape(1) if input.dim() == 0 else input
    d = _dim(dim, x.dim())
    a = numpy.moveaxis(_np(x), d, -1)
    if a.shape[-1] == 0:
        raise IndexError("mode(): Expected reduction dim to have non-zero size.")
    rows = a.reshape(-1, a.shape[-1])
    idx = numpy.empty(rows.shape[0], dtype="int64")
    for r, row in enumerate(rows):
        order = numpy.argsort(row, kind="stable")
        s = row[order]
        starts = numpy.concatenate([[True], s[1:] != s[:-1]])
        runs = numpy.flatnonzero(starts)
        lengths = numpy.diff(numpy.append(runs, s.size))
        best = runs[int(numpy.argmax(lengths))]  # the first longest run: smallest value
        idx[r] = order[best + lengths[int(numpy.argmax(lengths))] - 1]
    it = _index_tensor(idx.reshape(a.shape[:-1] + (1,)), input.device)
    it = FUNCTIONS["movedim"](it, -1, d)
    values, indices = x.gather(d, it), it
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    if input.dim() == 0:
        values, indices = values.reshape(()), indices.reshape(())
    return _mode_result(values, indices)


@_export()
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile of the values that are not NaN (NaN where a slice has none):
    the positions differ per slice, so they are gathered from the sorted
    values."""
    if not input.is_floating_point():
        raise RuntimeError("nanquantile() input tensor must be either float or double dtype")
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else _dim(dim, input.dim())
    v = FUNCTIONS["sort"](x, d)[0]  # NaN last
    n = v.shape[d]
    if n == 0:
        raise RuntimeError("nanquantile() input tensor must be non-empty")
    cnt = (x == x).sum(dim=d, keepdim=True).to(_C.float64)
    qs = [q] if not isinstance(q, (list, tuple, Tensor)) else (
        q.reshape(-1).tolist() if isinstance(q, Tensor) else list(q))
    outs = []
    for qq in qs:
        if not 0 <= qq <= 1:
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
        pos = (cnt - 1).clamp(min=0) * qq
        lo = pos.floor()
        hi = pos.ceil()
        a = v.gather(d, lo.to(_C.int64))
        b = v.gather(d, hi.to(_C.int64))
        f = (pos - lo).to(v.dtype)
        if interpolation == "linear":
            r = a + (b - a) * f
        elif interpolation == "lower":
            r = a
        elif interpolation == "higher":
            r = b
        elif interpolation == "midpoint":
            r = (a + b) * 0.5
        elif interpolation == "nearest":
            # round half to even, as PyTorch's nearest
            near = (pos - lo == 0.5).logical_and((lo.remainder(2) == 0)).logical_or(pos - lo < 0.5)
            r = _C.where(near, a, b)
        else:
            raise ValueError(f"quantile() interpolation must be one of linear, lower, higher, "
                             f"midpoint or nearest. Got {interpolation}")
        if dim is None:
            r = r.reshape((1,) * input.dim() if keepdim else ())
        elif not keepdim:
            r = r.squeeze(d)
        outs.append(r)
    if isinstance(q, (list, tuple)) or (isinstance(q, Tensor) and q.dim() > 0):
        return _C.stack(outs, 0)
    return outs[0]


def _hist_range(a, rng):
    if rng is not None:
        lo, hi = float(rng[0]), float(rng[1])
    elif a.size:
        lo, hi = float(a.min()), float(a.max())
    else:
        lo, hi = 0.0, 0.0
    if lo > hi or not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"histogram: range of [{lo}, {hi}] is not finite or is reversed")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


@_export()
def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    """(hist, bin_edges) of the flattened input, with bins a count or the
    edges; no gradient (as PyTorch)."""
    import numpy
    if not input.is_floating_point():
        raise RuntimeError("torch.histogram: input tensor and bins tensors should have the "
                           "same dtype")
    a = _np(input).astype("float64").reshape(-1)
    w = None if weight is None else _np(weight).astype("float64").reshape(-1)
    if isinstance(bins, Tensor):
        edges = _np(bins).astype("float64")
    else:
        if not isinstance(bins, int) or isinstance(bins, bool) or bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins}")
        if bins > 2 ** 24:
            raise RuntimeError(f"torch.histogram(): {bins} bins are too many")
        lo, hi = _hist_range(a, range)
        edges = numpy.linspace(lo, hi, bins + 1)
    if edges.ndim != 1 or edges.size < 2:
        raise RuntimeError("torch.histogram(): bins tensor should have one dimension and at "
                           "least 2 elements")
    hist, edges = numpy.histogram(a, bins=edges, weights=w, density=density)
    return _histogram_result(_host(hist.astype("float64"), input.device, input.dtype),
                             _host(edges, input.device, input.dtype))


@_export(method=False)
def histogramdd(input, bins=10, *, range=None, weight=None, density=False):  # noqa: A002
    import numpy
    if not input.is_floating_point() or input.dim() < 1:
        raise RuntimeError("torch.histogramdd: expected a floating-point input of at least "
                           "one dimension")
    a = _np(input).astype("float64")
    a = a.reshape(-1, a.shape[-1])
    k = a.shape[1]
    if isinstance(bins, (list, tuple)) and bins and isinstance(bins[0], Tensor):
        b = [_np(e).astype("float64") for e in bins]
    else:
        b = list(_ints(bins, k))
        if len(b) != k or any(not isinstance(n, int) or n <= 0 or n > 2 ** 20 for n in b):
            raise RuntimeError(f"torch.histogramdd(): bins must be {k} positive counts")
        if math.prod(b) > 2 ** 26:
            raise RuntimeError("torch.histogramdd(): too many bins")
        r = None if range is None else [range[2 * i:2 * i + 2] for i in _builtin_range(k)]
        b = [numpy.linspace(*_hist_range(a[:, i], None if r is None else r[i]), n + 1)
             for i, n in enumerate(b)]
    w = None if weight is None else _np(weight).astype("float64").reshape(-1)
    hist, edges = numpy.histogramdd(a, bins=b, weights=w, density=density)
    return _histogramdd_result(_host(hist, input.device, input.dtype),
                               [_host(e, input.device, input.dtype) for e in edges])


@_export(method=False)
def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    if index.dim() > 1 or index.is_floating_point():
        raise IndexError("index_reduce_(): Index is supposed to be a vector of integers")
    d = _dim(dim, input.dim())
    if source.dim() != input.dim() or source.shape[d] != index.numel():
        raise RuntimeError("index_reduce_(): source and index must agree along dim")
    shape = [1] * source.dim()
    shape[d] = index.numel()
    idx = index.reshape(*shape).expand(*source.shape)
    return FUNCTIONS["scatter_reduce"](input, d, idx, source, reduce, include_self=include_self)


def _index_reduce_method(self, dim, index, source, reduce, *, include_self=True):
    return index_reduce(self, dim, index, source, reduce, include_self=include_self)


METHODS["index_reduce"] = _index_reduce_method


@_export()
def put(input, index, source, accumulate=False):
    if index.is_floating_point():
        raise IndexError("put_(): Expected a long tensor for index")
    if index.numel() != source.numel():
        raise RuntimeError(f"put_(): Expected source and index to have the same number of "
                           f"elements, but got source.numel() = {source.numel()}, "
                           f"index.numel() = {index.numel()}")
    flat = input.reshape(-1)
    out = FUNCTIONS["index_put"](flat, (index.reshape(-1),), source.reshape(-1), accumulate)
    return out.reshape(*input.shape)


def _along(w, dim, ndim):
    shape = [1] * ndim
    shape[dim] = -1
    return w.reshape(*shape)


def _gradient_1d(f, d, coords, h, edge_order):
    """numpy.gradient's second-order differences along d: central inside,
    one-sided of edge_order at the ends; coords (a tensor of positions) or
    h (a uniform step)."""
    n = f.shape[d]
    if n < edge_order + 1:
        raise RuntimeError("torch.gradient expected each dimension size to be at least "
                           "edge_order+1")

    def sl(start, length):
        return f.narrow(d, start, length)
    if coords is None:
        inner = (sl(2, n - 2) - sl(0, n - 2)) / (2 * h) if n > 2 else None
        if edge_order == 1:
            first = (sl(1, 1) - sl(0, 1)) / h
            last = (sl(n - 1, 1) - sl(n - 2, 1)) / h
        else:
            first = (sl(0, 1) * -3 + sl(1, 1) * 4 - sl(2, 1)) / (2 * h)
            last = (sl(n - 1, 1) * 3 - sl(n - 2, 1) * 4 + sl(n - 3, 1)) / (2 * h)
    else:
        x = coords.to(f.dtype)
        dx = x[1:] - x[:-1]
        inner = None
        if n > 2:
            hs, hd = dx[:-1], dx[1:]
            a = _along(-hd / (hs * (hd + hs)), d, f.dim())
            b = _along((hd - hs) / (hd * hs), d, f.dim())
            c = _along(hs / (hd * (hd + hs)), d, f.dim())
            inner = a * sl(0, n - 2) + b * sl(1, n - 2) + c * sl(2, n - 2)
        if edge_order == 1:
            first = (sl(1, 1) - sl(0, 1)) / dx[0]
            last = (sl(n - 1, 1) - sl(n - 2, 1)) / dx[-1]
        else:
            d1, d2 = dx[0], dx[1]
            first = (sl(0, 1) * (-(2 * d1 + d2) / (d1 * (d1 + d2))) +
                     sl(1, 1) * ((d1 + d2) / (d1 * d2)) + sl(2, 1) * (-d1 / (d2 * (d1 + d2))))
            d1, d2 = dx[-2], dx[-1]
            last = (sl(n - 3, 1) * (d2 / (d1 * (d1 + d2))) + sl(n - 2, 1) * (-(d2 + d1) / (d1 * d2))
                    + sl(n - 1, 1) * ((2 * d2 + d1) / (d2 * (d1 + d2))))
    parts = [first] + ([inner] if inner is not None else []) + [last]
    return _C.cat(parts, d)


@_export(method=False)
def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """numpy.gradient's estimate of the derivative along each of dim (all
    by default), one tensor a dimension; spacing a step, steps, or
    coordinate tensors. A composition, so gradients flow."""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    if input.dim() == 0:
        raise RuntimeError("torch.gradient expected a tensor of at least one dimension")
    dims = list(_builtin_range(input.dim())) if dim is None else \
        [_dim(d, input.dim()) for d in _ints(dim)]
    sp = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(sp) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or "
                           f"its length to match the number of dimensions ({len(dims)})")
    f = _float(input)
    out = []
    for d, s in zip(dims, sp):
        if isinstance(s, Tensor):
            if s.dim() == 0:
                s = s.item()
            elif s.dim() != 1 or s.shape[0] != f.shape[d]:
                raise RuntimeError("torch.gradient expected each tensor to be on the same "
                                   "device and of the size of the input along its dimension")
        if not isinstance(s, Tensor) and (isinstance(s, bool) or
                                           not isinstance(s, (int, float))):
            raise TypeError(f"torch.gradient: spacing must be numbers or tensors, not "
                            f"{type(s).__name__}")
        out.append(_gradient_1d(f, d, s if isinstance(s, Tensor) else None,
                                None if isinstance(s, Tensor) else s, edge_order))
    return tuple(out)



# ---- scatters into views, view copies, strides ----

def _positions(input, view):
    """The flat positions in input of the elements of view(input) (view a
    NumPy function of an array of the positions)."""
    import numpy
    grid = numpy.arange(input.numel(), dtype="int64").reshape(tuple(input.shape))
    return numpy.ascontiguousarray(view(grid))


def _scatter_view(input, src, pos):
    if tuple(src.shape) != pos.shape:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src "
                           f"size = {list(src.shape)}, slice size = {list(pos.shape)}")
    flat = input.reshape(-1)
    idx = _index_tensor(pos.reshape(-1), input.device)
    return FUNCTIONS["index_copy"](flat, 0, idx, src.reshape(-1).to(input.dtype)) \
        .reshape(*input.shape)


def _select_view(input, dim, index):
    d = _dim(dim, input.dim())
    n = input.shape[d]
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(input.shape)} at dimension {d}")
    return lambda a: a.take(index % n, axis=d)


def _slice_view(input, dim, start, end, step):
    d = _dim(dim, input.dim())
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    sl = [slice(None)] * input.dim()
    sl[d] = slice(start, end, step)
    return lambda a: a[tuple(sl)]


def _diagonal_view(input, offset, dim1, dim2):
    import numpy
    d1, d2 = _dim(dim1, input.dim()), _dim(dim2, input.dim())
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return lambda a: numpy.diagonal(a, offset, d1, d2)


def _strided_view(input, size, stride, storage_offset):
    import numpy
    size, stride = tuple(size), tuple(stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} sizes, "
                           f"{len(stride)} strides")
    if any(not isinstance(s, int) or s < 0 for s in size + stride):
        raise RuntimeError("as_strided: sizes and strides must be non-negative integers")
    off = int(storage_offset or 0)
    if off < 0:
        raise RuntimeError("as_strided: negative storage offset")
    if math.prod(size) > 2 ** 31:
        raise RuntimeError("as_strided: too many elements")
    last = off + sum((n - 1) * s for n, s in zip(size, stride)) if math.prod(size) else off
    if math.prod(size) and last >= input.numel():
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                           f"offset {off} need {last + 1} elements, but the tensor has "
                           f"{input.numel()}")

    def view(a):
        flat = a.reshape(-1)
        pos = numpy.full(size, off, dtype="int64")
        for k, (n, s) in enumerate(zip(size, stride)):
            shape = [1] * len(size)
            shape[k] = n
            pos = pos + (numpy.arange(n, dtype="int64") * s).reshape(shape)
        return flat[pos] if flat.size else pos
    return view


@_export()
def select_scatter(input, src, dim, index):
    return _scatter_view(input, src, _positions(input, _select_view(input, dim, index)))


@_export()
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    return _scatter_view(input, src, _positions(input, _slice_view(input, dim, start, end, step)))


@_export()
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    return _scatter_view(input, src, _positions(input, _diagonal_view(input, offset, dim1, dim2)))


@_export()
def as_strided_scatter(input, src, size, stride, storage_offset=None):
    return _scatter_view(input, src,
                         _positions(input, _strided_view(input, size, stride, storage_offset)))


@_export(names=("as_strided", "as_strided_copy"))
def as_strided(input, size, stride, storage_offset=None):
    """The elements at storage_offset + sum(i_k * stride_k) of the tensor's
    row-major elements (a gather: PyTorch's is a view of the storage)."""
    pos = _positions(input, _strided_view(input, size, stride, storage_offset))
    flat = input.reshape(-1)
    if pos.size == 0:
        return _C.zeros(*pos.shape, dtype=input.dtype, device=input.device) + flat.sum() * 0
    return flat.index_select(0, _index_tensor(pos.reshape(-1), input.device)).reshape(*pos.shape)


def _as_strided_(self, size, stride, storage_offset=None):
    return self._replace_(as_strided(self, size, stride, storage_offset))


METHODS["as_strided_"] = _as_strided_


@_export()
def narrow_copy(input, dim, start, length):
    return input.narrow(dim, start, length).clone()


def _copy_of(name, method):
    def fn(input, *args, **kwargs):
        out = getattr(_is_tensor(input), method)(*args, **kwargs)
        return tuple(t.clone() for t in out) if isinstance(out, (tuple, list)) else out.clone()
    fn.__name__ = name
    fn.__doc__ = f"torch.{name}: {method}, as a new tensor."
    return fn


for _name, _method in (("select_copy", "select"), ("diagonal_copy", "diagonal"),
                       ("expand_copy", "expand"), ("permute_copy", "permute"),
                       ("squeeze_copy", "squeeze"), ("t_copy", "t"),
                       ("transpose_copy", "transpose"), ("unbind_copy", "unbind"),
                       ("unfold_copy", "unfold"), ("unsqueeze_copy", "unsqueeze"),
                       ("view_copy", "view"), ("split_copy", "split"),
                       ("split_with_sizes_copy", "split_with_sizes"), ("alias_copy", "view_as"),
                       ("detach_copy", "detach")):
    FUNCTIONS[_name] = _copy_of(_name, _method)


def _alias_copy(input):
    return _is_tensor(input).clone()


def _expand_copy(input, size, *, implicit=False):
    return _is_tensor(input).expand(*size).clone()


FUNCTIONS["alias_copy"] = _alias_copy
FUNCTIONS["expand_copy"] = _expand_copy


@_export(method=False)
def slice_copy(input, dim=0, start=None, end=None, step=1):
    d = _dim(dim, input.dim())
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    sl = [slice(None)] * input.dim()
    sl[d] = slice(start, end, step)
    return input[tuple(sl)].clone()


FUNCTIONS["unflatten"] = _function_of_method("unflatten")
FUNCTIONS["addmv_"] = _function_of_method("addmv_")
FUNCTIONS["as_strided_"] = _function_of_method("as_strided_")
FUNCTIONS["conj_physical_"] = _identity
FUNCTIONS["get_device"] = _function_of_method("get_device")


# ---- creation ----

@_export(method=False)
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    if isinstance(obj, Tensor):
        out = obj
        if dtype is not None or device is not None:
            if copy is False and ((dtype is not None and dtype != obj.dtype) or
                                  (device is not None and _C.device(device) != obj.device)):
                raise ValueError("can't alias tensor from a different dtype or device with "
                                 "copy=False")
            out = obj.to(device=device or obj.device, dtype=dtype or obj.dtype)
        if copy and out is obj:
            out = obj.clone()
    else:
        out = _C.as_tensor(obj, dtype=dtype, device=device) if copy is not True else \
            _C.tensor(obj, dtype=dtype, device=device)
    return out.requires_grad_(True) if requires_grad else out


_NP_OF = {_C.float32: "float32", _C.float64: "float64", _C.float16: "float16",
          _C.int32: "int32", _C.int64: "int64", _C.uint8: "uint8", _C.int8: "int8",
          _C.bool: "bool"}


@_export(method=False)
def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """The buffer's bytes as a 1-D tensor: copied (PyTorch shares the
    buffer's memory)."""
    import numpy
    if dtype not in _NP_OF:
        raise TypeError(f"frombuffer: unsupported dtype {dtype}")
    a = numpy.frombuffer(buffer, dtype=_NP_OF[dtype], count=count, offset=offset)
    out = _C.tensor(a.copy(), dtype=dtype)
    return out.requires_grad_(True) if requires_grad else out


def _size_arg(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list, _C.Size)):
        return tuple(size[0])
    return tuple(size)


@_export(method=False)
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """An empty row-major tensor of size (the strides are not honoured)."""
    if len(tuple(size)) != len(tuple(stride)):
        raise RuntimeError("empty_strided: size and stride must have the same length")
    out = _C.empty(*tuple(size), dtype=dtype, device=device) if tuple(size) else \
        _C.empty((), dtype=dtype, device=device)
    return out.requires_grad_(True) if requires_grad else out


def _new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False,
                       layout=None, pin_memory=False):
    return empty_strided(size, stride, dtype=dtype or self.dtype, device=device or self.device,
                         requires_grad=requires_grad)


METHODS["new_empty_strided"] = _new_empty_strided


def _new(self, *args, device=None):
    """Legacy x.new(): x.new(*sizes) an empty tensor, x.new(data) a tensor
    of data, x.new() an empty one, all in x's dtype and device."""
    dev = device or self.device
    if len(args) == 1 and isinstance(args[0], Tensor):
        return args[0].to(device=dev, dtype=self.dtype)
    if len(args) == 1 and not isinstance(args[0], int):
        if isinstance(args[0], _C.Size):
            return _C.empty(*args[0], dtype=self.dtype, device=dev)
        return _C.tensor(args[0], dtype=self.dtype, device=dev)
    return _C.empty(*args, dtype=self.dtype, device=dev) if args else \
        _C.empty(0, dtype=self.dtype, device=dev)


METHODS["new"] = _new


@_export(method=False)
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    if isinstance(s, Tensor) or not isinstance(s, (int, float, bool)):
        raise TypeError(f"scalar_tensor(): argument 's' must be Number, not {type(s).__name__}")
    return _C.tensor(float(s), dtype=dtype or _C.float32, device=device)


def _range(start=0, end=None, step=1, *, dtype=None, layout=None, device=None,  # noqa: A001
          requires_grad=False, out=None):
    """Deprecated torch.range: start to end inclusive, float32 by default."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    if end is None:
        raise TypeError("range() missing required argument 'end'")
    start, end, step = float(start), float(end), float(step)
    if step == 0 or not all(math.isfinite(v) for v in (start, end, step)):
        raise RuntimeError("range: start, end and step must be finite, step non-zero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    n = int(math.floor((end - start) / step)) + 1
    if n > 2 ** 31:
        raise RuntimeError(f"range: {n} elements are too many")
    out = (_C.arange(n, dtype=_C.float64, device=device) * step + start).to(dtype or _C.float32)
    return out.requires_grad_(True) if requires_grad else out


FUNCTIONS["range"] = _range


def _window_length(n, name):
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{name}(): window_length must be an int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={n}")
    if n > 2 ** 28:
        raise RuntimeError(f"{name}: window_length={n} is too large")


def _window(name, n, periodic, values, dtype, device, requires_grad):
    """values(m): the symmetric window of m points as a NumPy array; a
    periodic window is the first n of the n + 1 point one."""
    import numpy
    _window_length(n, name)
    dt = dtype or _C.float32
    if dt not in _FLOATS:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dt}")
    if n == 0:
        w = numpy.zeros(0)
    elif n == 1:
        w = numpy.ones(1)
    else:
        w = values(n + 1)[:n] if periodic else values(n)
    out = _C.tensor(numpy.asarray(w, dtype="float64"), device=device).to(dt)
    return out.requires_grad_(True) if requires_grad else out


def _cos_terms(coeffs):
    import numpy

    def values(m):
        k = numpy.arange(m) * (2 * math.pi / (m - 1))
        return sum(c * numpy.cos(j * k) * (-1) ** j for j, c in enumerate(coeffs))
    return values


@_export(method=False)
def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False):
    return _window("hann_window", window_length, periodic, _cos_terms((0.5, 0.5)), dtype,
                   device, requires_grad)


@_export(method=False)
def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, requires_grad=False):
    return _window("hamming_window", window_length, periodic, _cos_terms((alpha, beta)), dtype,
                   device, requires_grad)


@_export(method=False)
def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    return _window("blackman_window", window_length, periodic, _cos_terms((0.42, 0.5, 0.08)),
                   dtype, device, requires_grad)


@_export(method=False)
def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    import numpy

    def values(m):
        return 1 - numpy.abs(2 * numpy.arange(m) / (m - 1) - 1)
    return _window("bartlett_window", window_length, periodic, values, dtype, device,
                   requires_grad)


@_export(method=False)
def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, requires_grad=False):
    import numpy
    return _window("kaiser_window", window_length, periodic,
                   lambda m: numpy.kaiser(m, float(beta)), dtype, device, requires_grad)


@_export(method=False)
def binomial(count, prob, generator=None):
    import numpy
    if not count.is_floating_point() or not prob.is_floating_point():
        raise RuntimeError("binomial only supports floating-point dtypes for count and prob")
    n, p = numpy.broadcast_arrays(_np(count).astype("float64"), _np(prob).astype("float64"))
    if (p < 0).any() or (p > 1).any() or numpy.isnan(p).any() or (n < 0).any():
        raise RuntimeError("binomial: expected 0 <= prob <= 1 and count >= 0")
    from chutney._torch_functions import _numpy_rng
    with _generator.drawing(generator):
        rng = _numpy_rng()
    r = rng.binomial(n.astype("int64"), p).astype("float64")
    return _host(r, count.device, count.dtype)


# ---- Tensor-only methods ----

def _no_grad_tensor(name, t):
    if t.requires_grad:
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use "
                           f"var.detach().{name}() instead.")


def _map_(self, tensor, callable):  # noqa: A002 (PyTorch's name)
    if self.device.type != "cpu":
        raise TypeError("map_ is only implemented on CPU tensors")
    other = tensor.expand(*self.shape).reshape(-1).tolist()
    _no_grad_tensor("map_", self)
    vals = [callable(a, b) for a, b in zip(self.reshape(-1).tolist(), other)]
    with no_grad():
        return self.copy_(_C.tensor(vals, dtype=self.dtype).reshape(*self.shape))


def _map2_(self, x, y, callable):  # noqa: A002
    if self.device.type != "cpu":
        raise TypeError("map2_ is only implemented on CPU tensors")
    xs = x.expand(*self.shape).reshape(-1).tolist()
    ys = y.expand(*self.shape).reshape(-1).tolist()
    _no_grad_tensor("map2_", self)
    vals = [callable(a, b, c) for a, b, c in zip(self.reshape(-1).tolist(), xs, ys)]
    with no_grad():
        return self.copy_(_C.tensor(vals, dtype=self.dtype).reshape(*self.shape))


METHODS["map_"] = _map_
METHODS["map2_"] = _map2_


# ---- nn ops under their aten names (torch.dropout(x, p, train), ...) ----

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(r):
    """aten's reductions are ints (0 none, 1 mean, 2 sum); names pass."""
    if isinstance(r, str):
        return r
    if r not in _REDUCTIONS or isinstance(r, bool):
        raise RuntimeError(f"{r} is not a valid value for reduction")
    return _REDUCTIONS[r]


def _dropout(fname):
    def fn(input, p, train):
        if not 0 <= p <= 1:
            raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
        f = _F()
        if fname == "feature_dropout":
            if not train or p == 0:
                return input
            if input.dim() < 2:
                raise RuntimeError("feature_dropout: expected an input of at least 2 dimensions")
            if p == 1:
                return input * 0.0
            # aten's noise is (N, C, 1, ...): elementwise for a 2-d input
            shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
            keep = (_C.rand(*shape, device=input.device) >= p).to(input.dtype)
            return input * keep * (1.0 / (1 - p))
        return getattr(f, fname)(input, p, train)
    fn.__name__ = fname
    return fn


for _name in ("dropout", "alpha_dropout", "feature_alpha_dropout", "feature_dropout"):
    FUNCTIONS[_name] = _dropout(_name)

    def _dropout_inplace(input, p, train, _fn=FUNCTIONS[_name]):
        if not train or p == 0 or input.numel() == 0:
            return input  # aten's _dropout_impl: untouched, even on a leaf
        # recorded (and refused on a leaf that requires grad) by copy_
        return input.copy_(_fn(input, p, train))
    _dropout_inplace.__name__ = _name + "_"
    FUNCTIONS[_name + "_"] = _dropout_inplace


@_export(method=False)
def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled=True):
    return _F().batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                           eps)


@_export(method=False)
def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
                  eps, cudnn_enabled=True):
    return _F().instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                              momentum, eps)


@_export(method=False)
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05,
               cudnn_enable=True):
    return _F().layer_norm(input, list(_ints(normalized_shape)), weight, bias, eps)


@_export(method=False)
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    return _F().group_norm(input, num_groups, weight, bias, eps)


@_export(method=False)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    pad = None if padding_idx is None or padding_idx < 0 else padding_idx
    return _F().embedding(indices, weight, pad, None, 2.0, scale_grad_by_freq, sparse)


@_export(method=False)
def embedding_renorm_(input, indices, max_norm, norm_type):
    """Rows of input that indices name and whose norm exceeds max_norm,
    rescaled to it in place (not recorded)."""
    import numpy
    rows = numpy.unique(_np(indices).astype("int64").reshape(-1))
    if rows.size and (rows.min() < 0 or rows.max() >= input.shape[0]):
        raise IndexError("embedding_renorm_: index out of range")
    with no_grad():
        idx = _index_tensor(rows, input.device)
        w = input.index_select(0, idx)
        norm = (w.abs() ** norm_type).sum(1, keepdim=True) ** (1.0 / norm_type)
        scale = _C.where(norm > max_norm, max_norm / (norm + 1e-7), _C.ones_like(norm))
        new = FUNCTIONS["index_copy"](input, 0, idx, w * scale)
    return input.copy_(new)  # refused on a leaf that requires grad, as PyTorch's


def _passthrough(name, fname=None):
    def fn(*args, **kwargs):
        return getattr(_F(), fname or name)(*args, **kwargs)
    fn.__name__ = name
    return fn


for _name in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "pixel_shuffle",
              "pixel_unshuffle", "channel_shuffle", "prelu", "bilinear", "cosine_similarity",
              "pairwise_distance", "pdist", "adaptive_avg_pool1d", "avg_pool1d", "celu",
              "selu", "threshold", "rrelu"):
    FUNCTIONS[_name] = _passthrough(_name)


def _max_pool(name):
    def fn(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        if isinstance(stride, (list, tuple)) and not stride:
            stride = None  # aten's default []: the kernel size
        return getattr(_F(), name)(input, kernel_size, stride, padding, dilation, ceil_mode)
    fn.__name__ = name
    return fn


FUNCTIONS["max_pool2d"] = _max_pool("max_pool2d")
FUNCTIONS["max_pool3d"] = _max_pool("max_pool3d")
FUNCTIONS["native_channel_shuffle"] = _passthrough("native_channel_shuffle", "channel_shuffle")
FUNCTIONS["affine_grid_generator"] = _passthrough("affine_grid_generator", "affine_grid")


def _prelu(self, weight):
    return _F().prelu(self, weight)


def _hardshrink(input, lambd=0.5):
    return _F().hardshrink(input, lambd)


METHODS["prelu"] = _prelu
FUNCTIONS["hardshrink"] = METHODS["hardshrink"] = _hardshrink


def _activation_inplace(name):
    def fn(input, *args, **kwargs):
        # recorded (and refused on a leaf that requires grad) by copy_
        return input.copy_(getattr(_F(), name)(input, *args, **kwargs))
    fn.__name__ = name + "_"
    return fn


for _name in ("celu", "selu", "rrelu", "threshold"):
    FUNCTIONS[_name + "_"] = _activation_inplace(_name)


@_export(method=False)
def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F().max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


@_export(method=False)
def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode=False):
    return _F().max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode,
                           return_indices=True)


@_export(method=False)
def adaptive_max_pool1d(input, output_size):
    """(values, indices), as torch.adaptive_max_pool1d: the indices of the
    window maxima found on the host, the values a gather of them."""
    import numpy
    if input.dim() not in (2, 3):
        raise RuntimeError("adaptive_max_pool1d(): Expected 2D or 3D tensor")
    out_n = _ints(output_size)[0] if not isinstance(output_size, int) else output_size
    n = input.shape[-1]
    if not isinstance(out_n, int) or out_n <= 0 or n == 0 or out_n > 2 ** 24:
        raise RuntimeError(f"adaptive_max_pool1d(): output_size {output_size} is not valid "
                           f"for an input of length {n}")
    a = _np(input)
    idx = numpy.empty(a.shape[:-1] + (out_n,), dtype="int64")
    for i in _builtin_range(out_n):
        lo, hi = (i * n) // out_n, -((-(i + 1) * n) // out_n)
        w = a[..., lo:hi]
        # the first maximum, a NaN counting as the largest
        pick = numpy.where(numpy.isnan(w).any(-1), numpy.isnan(w).argmax(-1), w.argmax(-1)) \
            if w.dtype.kind == "f" else w.argmax(-1)
        idx[..., i] = lo + pick
    it = _index_tensor(idx, input.device)
    return input.gather(input.dim() - 1, it), it


@_export(method=False)
def constant_pad_nd(input, pad, value=0):
    return _F().pad(input, list(pad), "constant", value)


@_export(method=False)
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    k = weight.dim() - 2
    if k not in (1, 2, 3):
        raise RuntimeError(f"convolution: expected a weight of 3 to 5 dimensions, got "
                           f"{weight.dim()}")
    f = _F()
    if transposed:
        return getattr(f, f"conv_transpose{k}d")(input, weight, bias, _ints(stride, k),
                                                 _ints(padding, k), _ints(output_padding, k),
                                                 groups, _ints(dilation, k))
    return getattr(f, f"conv{k}d")(input, weight, bias, _ints(stride, k), _ints(padding, k),
                                   _ints(dilation, k), groups)


_GRID_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_GRID_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


@_export(method=False, names=("grid_sampler", "grid_sampler_2d", "grid_sampler_3d"))
def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    if interpolation_mode not in _GRID_MODES or padding_mode not in _GRID_PADDING:
        raise RuntimeError("grid_sampler: interpolation_mode must be 0, 1 or 2 and "
                           "padding_mode 0, 1 or 2")
    return _F().grid_sample(input, grid, _GRID_MODES[interpolation_mode],
                            _GRID_PADDING[padding_mode], align_corners)


@_export(method=False)
def kl_div(input, target, reduction=1, *, log_target=False):
    return _F().kl_div(input, target, reduction=_reduction(reduction), log_target=log_target)


@_export(method=False)
def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction=1):
    return _F().binary_cross_entropy_with_logits(input, target, weight,
                                                 reduction=_reduction(reduction),
                                                 pos_weight=pos_weight)


@_export(method=False)
def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F().cosine_embedding_loss(input1, input2, target, margin,
                                      reduction=_reduction(reduction))


@_export(method=False)
def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F().margin_ranking_loss(input1, input2, target, margin,
                                    reduction=_reduction(reduction))


@_export(method=False)
def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    return _F().hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


@_export(method=False)
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False,
                        reduction=1):
    return _F().triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                    reduction=_reduction(reduction))


@_export(method=False)
def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return _F().poisson_nll_loss(input, target, log_input, full, eps=eps,
                                 reduction=_reduction(reduction))


@_export(method=False)
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1,
             zero_infinity=False):
    return _F().ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                         _reduction(reduction), zero_infinity)


def _linear(x, w, b):
    y = x.matmul(w.t())
    return y + b if b is not None else y


@_export(method=False)
def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return (_linear(input, w_ih, b_ih) + _linear(hx, w_hh, b_hh)).tanh()


@_export(method=False)
def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return (_linear(input, w_ih, b_ih) + _linear(hx, w_hh, b_hh)).relu()


@_export(method=False)
def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    h, c = hx
    gates = _linear(input, w_ih, b_ih) + _linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, -1)
    c2 = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return c2.tanh() * o.sigmoid(), c2


@_export(method=False)
def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    xr, xz, xn = _linear(input, w_ih, b_ih).chunk(3, -1)
    hr, hz, hn = _linear(hx, w_hh, b_hh).chunk(3, -1)
    r = (xr + hr).sigmoid()
    z = (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return (1 - z) * n + z * hx


# ---- queries and settings scripts make ----

_settings = {"interop_threads": 1, "warn_always": False, "deterministic_debug": 0}


@_export(method=False)
def get_num_interop_threads():
    return _settings["interop_threads"]


@_export(method=False)
def set_num_interop_threads(num):
    """Recorded only (the library runs no inter-op thread pool)."""
    if isinstance(num, bool) or not isinstance(num, int) or num <= 0:
        raise RuntimeError("Expected positive number of threads")
    _settings["interop_threads"] = num


@_export(method=False)
def init_num_threads():
    return None


@_export(method=False)
def set_warn_always(b):
    _settings["warn_always"] = bool(b)


@_export(method=False)
def is_warn_always_enabled():
    return _settings["warn_always"]


@_export(method=False)
def set_flush_denormal(mode):
    """False: flushing denormals is not supported (as PyTorch answers on a
    CPU without it)."""
    return False


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


@_export(method=False)
def set_deterministic_debug_mode(debug_mode):
    mode_ = _DEBUG_MODES.get(debug_mode, debug_mode)
    if mode_ not in (0, 1, 2) or isinstance(mode_, bool):
        raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, "
                           f"`error`, but got {debug_mode}")
    _settings["deterministic_debug"] = mode_
    FUNCTIONS["use_deterministic_algorithms"](mode_ > 0, warn_only=mode_ == 1)


@_export(method=False)
def get_deterministic_debug_mode():
    if not FUNCTIONS["are_deterministic_algorithms_enabled"]():
        return 0
    return 1 if FUNCTIONS["is_deterministic_algorithms_warn_only_enabled"]() else 2


@_export(method=False)
def is_inference_mode_enabled():
    """False: inference_mode is no_grad here, with no mode of its own."""
    return False


@_export(method=False)
def set_default_tensor_type(t):
    """Only float32 CPU tensors (the library's default) are accepted."""
    name = t if isinstance(t, str) else getattr(t, "__name__", None)
    if not isinstance(name, str):
        raise TypeError(f"invalid type object: {t!r}")
    if name.split(".")[-1] != "FloatTensor" or ".cuda." in name:
        raise NotImplementedError(f"set_default_tensor_type({name}): only FloatTensor, the "
                                  "default, is supported (make tensors with dtype= and "
                                  "device= instead)")


@_export(method=False)
def typename(obj):
    if isinstance(obj, Tensor):
        return obj.type().replace("chutney.", "torch.")
    mod = getattr(type(obj), "__module__", "")
    qual = type(obj).__qualname__
    return qual if mod in ("builtins", "", None) else f"{mod}.{qual}"


def _build_has(feature):
    try:
        return f"+{feature}" in _C.build_info()
    except Exception:  # noqa: BLE001 (a build without build_info has none of them)
        return False


# torch.has_* are the build's features (not whether a device is present)
def set_anomaly_enabled(enabled, check_nan=True):
    from chutney.autograd import anomaly_mode
    if not isinstance(enabled, bool) or not isinstance(check_nan, bool):
        raise TypeError("set_anomaly_enabled(): arguments must be bool")
    anomaly_mode._set(enabled, check_nan)


FUNCTIONS["set_anomaly_enabled"] = set_anomaly_enabled


def is_anomaly_check_nan_enabled():
    from chutney import autograd
    return autograd.is_anomaly_check_nan_enabled()


FUNCTIONS["is_anomaly_check_nan_enabled"] = is_anomaly_check_nan_enabled

FUNCTIONS["has_cuda"] = _build_has("cuda")
FUNCTIONS["has_cudnn"] = False
FUNCTIONS["has_mkl"] = False
FUNCTIONS["has_mkldnn"] = _build_has("onednn")
FUNCTIONS["has_mps"] = False
FUNCTIONS["has_openmp"] = False
FUNCTIONS["has_lapack"] = _build_has("openblas")
FUNCTIONS["has_spectral"] = _build_has("fftw")

FUNCTIONS["version"] = types.SimpleNamespace(
    __version__=_C.__version__, cuda=None, hip=None, debug=False, git_version="unknown")

del _name, _op, _method
