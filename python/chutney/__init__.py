"""Chutney: a deep-learning framework in C11, with PyTorch's names.

    import chutney
    x = chutney.randn(64, 784)
    w = chutney.zeros(784, 10, requires_grad=True)
    loss = chutney.nn.functional.cross_entropy(x @ w, chutney.randint(0, 10, (64,)))
    loss.backward()

Tensors, their ops and autograd are the C library's (chutney._C, written
against the CPython C API); chutney.nn, chutney.optim and chutney.utils.data
wrap its modules, optimisers and loaders in PyTorch's classes. docs/python.md
in the repository says what exists and what does not yet.
"""

from chutney import _C
from chutney._C import (  # noqa: F401  (re-exported)
    Tensor,
    Size,
    dtype,
    device,
    tensor,
    as_tensor,
    from_numpy,
    from_dlpack,
    empty,
    zeros,
    ones,
    full,
    rand,
    randn,
    empty_like,
    zeros_like,
    ones_like,
    full_like,
    rand_like,
    randn_like,
    arange,
    linspace,
    eye,
    randint,
    randperm,
    normal,
    manual_seed,
    get_rng_state,
    set_rng_state,
    cat,
    concat,
    stack,
    where,
    is_grad_enabled,
    device_count,
    synchronize,
    get_default_device,
    set_default_device,
    memory_stats,
    empty_cache,
    set_num_threads,
    get_num_threads,
    build_info,
    load_npy,
    save_npy,
    __version__,
)
from chutney._functions import *  # noqa: F401,F403  (chutney.exp(x), chutney.sum(x, dim), ...)
from chutney._functions import __all__ as _function_names
from chutney.autograd import no_grad, enable_grad, set_grad_enabled, inference_mode  # noqa: F401
from chutney.serialization import save, load  # noqa: F401
from chutney import autograd, nn, optim, utils  # noqa: F401
from chutney import amp, ao, backends, cuda, distributions, linalg  # noqa: F401  (mixed precision, int8, torch.cuda)
from chutney.amp import (  # noqa: F401  (torch.autocast and its queries)
    autocast,
    is_autocast_enabled,
    get_autocast_dtype,
    is_autocast_cpu_enabled,
    get_autocast_cpu_dtype,
)
from chutney.ao.quantization import qint8  # noqa: F401
from chutney import onnx  # noqa: F401  (chutney.onnx.load)
from chutney._compile import compile  # noqa: F401,A001  (torch.compile)
from chutney import _compile as compiler  # noqa: F401  (compiler.is_compiling())

from chutney import _tensor_extras  # noqa: E402
from chutney import _torch_functions  # noqa: E402,F401  (registers more functions and methods)
from chutney import _torch_functions_more  # noqa: E402,F401  (aliases, aten spellings, legacy linalg)
from chutney import distributed, func, jit, special, testing  # noqa: E402,F401  (torch.distributed, ...)
from chutney.autograd import is_anomaly_enabled  # noqa: E402,F401

_tensor_extras.install(globals())  # einsum, sort, topk, roll, isnan, ... (and their methods)
_C._add_tensor_methods({"inverse": linalg.inv, "det": linalg.det})
inverse, det = linalg.inv, linalg.det

from chutney._generator import Generator, with_generator as _with_generator  # noqa: E402

# torch.Generator streams: the draws that take generator=.
rand, randn, randint, randperm, normal = (
    _with_generator(f) for f in (rand, randn, randint, randperm, normal))

# The dtypes under PyTorch's names and aliases. Assigned last: they shadow the
# builtins float, int and bool in this module, as in torch.
float32 = _C.float32
float64 = _C.float64
float16 = _C.float16
bfloat16 = _C.bfloat16
int32 = _C.int32
int64 = _C.int64
uint8 = _C.uint8
int8 = _C.int8
double = _C.double
half = _C.half
long = _C.long
float = _C.float  # noqa: A001
int = _C.int  # noqa: A001
bool = _C.bool  # noqa: A001


def get_default_dtype():
    """The dtype of floating-point tensors made from Python numbers: float32."""
    return _C.float32


def is_tensor(obj):
    return isinstance(obj, Tensor)


def is_floating_point(t):
    return t.is_floating_point()


def numel(t):
    return t.numel()


_float32_matmul_precision = "highest"


def set_float32_matmul_precision(precision):
    """Accepted and remembered ("highest", "high", "medium"): float32
    products are always computed in float32 here (use chutney.autocast for
    bfloat16)."""
    global _float32_matmul_precision
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision {precision!r}: highest, high or medium")
    _float32_matmul_precision = precision


def get_float32_matmul_precision():
    return _float32_matmul_precision


class finfo:
    """torch.finfo of a floating dtype: bits, eps, max, min, tiny
    (smallest_normal), resolution."""

    _TABLE = {"float32": (32, 2.0 ** -23, 3.4028234663852886e38, 2.0 ** -126, 1e-6),
              "float64": (64, 2.0 ** -52, 1.7976931348623157e308, 2.0 ** -1022, 1e-15),
              "float16": (16, 2.0 ** -10, 65504.0, 2.0 ** -14, 1e-3),
              "bfloat16": (16, 2.0 ** -7, 3.3895313892515355e38, 2.0 ** -126, 1e-2)}

    def __init__(self, type=None):  # noqa: A002 (PyTorch's name)
        name = str(type if type is not None else _C.float32).split(".")[-1]
        if name not in self._TABLE:
            raise TypeError(f"finfo: {name} is not a floating dtype")
        self.dtype = name
        self.bits, self.eps, self.max, self.tiny, self.resolution = self._TABLE[name]
        self.min = -self.max
        self.smallest_normal = self.tiny

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, "
                f"eps={self.eps}, smallest_normal={self.tiny}, tiny={self.tiny}, "
                f"dtype={self.dtype})")


class iinfo:
    """torch.iinfo of an integer dtype: bits, min, max."""

    _TABLE = {"int64": 64, "int32": 32, "int8": 8, "uint8": 8}

    def __init__(self, type):  # noqa: A002
        name = str(type).split(".")[-1]
        if name not in self._TABLE:
            raise TypeError(f"iinfo: {name} is not an integer dtype")
        self.dtype, self.bits = name, self._TABLE[name]
        self.min, self.max = (0, 255) if name == "uint8" else \
            (-(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


# Constants under torch's names.
import math as _math  # noqa: E402 (float is the dtype in this module)

inf, nan, pi, e = _math.inf, _math.nan, _math.pi, _math.e
newaxis = None


class memory_format:
    """torch.channels_last & co. Tensors here are always row-major
    (contiguous_format): `to(memory_format=)` and `contiguous(memory_format=)`
    accept these and give the same values in that layout (PyTorch's only
    changes the strides, for speed)."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"chutney.{self._name}"


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
vmap = func.vmap  # torch.vmap (PyTorch 2): chutney.func.vmap
