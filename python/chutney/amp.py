"""Mixed precision (torch.amp): autocast regions and dynamic loss scaling.

autocast is the C library's. Inside an autocast region matmul (and the
linear layers), conv2d, conv_transpose2d and scaled_dot_product_attention
round their float32 inputs to the region's dtype and return float32
(PyTorch returns the low precision); parameters and gradients stay float32.
The region is per thread. GradScaler is PyTorch's algorithm in Python over
any optimiser (the C library's own scaler, cn_grad_scaler, serves its
training loops).
"""

import functools
import threading
import warnings

from chutney import _C, _compile
from chutney.autograd import no_grad

__all__ = ["autocast", "GradScaler", "is_autocast_available"]

# PyTorch keeps a dtype per thread even where autocast is off (the one
# get_autocast_dtype reports): bfloat16 until a region sets another.
_tls = threading.local()


def _dtype_setting():
    return getattr(_tls, "dtype", _C.bfloat16)


def _check_device(device_type, what):
    if device_type != "cpu":
        raise RuntimeError(
            f"{what}: device_type '{device_type}' is unsupported: the library's autocast is one "
            "switch per thread that applies to every device, which is PyTorch's 'cpu' autocast "
            "(use device_type='cpu')")


def _cuda_missing(device_type, what):
    """PyTorch's rule for device_type 'cuda' where CUDA is not there: warn
    and turn the feature off (a script written for a GPU runs in float32 on
    the CPU). Where it is, the library's autocast covers it (and the CPU)."""
    if device_type != "cuda":
        return False
    from chutney import cuda
    if cuda.is_available():
        return False
    warnings.warn(f"User provided device_type of 'cuda', but CUDA is not available. Disabling "
                  f"{what}")
    return True


def _cuda_available():
    from chutney import cuda
    return cuda.is_available()


def is_autocast_available(device_type):
    return device_type == "cpu"


def is_autocast_enabled(device_type="cpu"):
    """Is this thread inside an enabled autocast region? Without an argument
    PyTorch means CUDA; here it means the CPU, the only device with one."""
    _check_device(device_type, "is_autocast_enabled")
    return _C._autocast_dtype() != _C.float32


def get_autocast_dtype(device_type="cpu"):
    """The dtype autocast uses (or would use, where off) on this thread."""
    _check_device(device_type, "get_autocast_dtype")
    return _dtype_setting()


def is_autocast_cpu_enabled():
    return is_autocast_enabled("cpu")


def get_autocast_cpu_dtype():
    return get_autocast_dtype("cpu")


class autocast:
    """torch.autocast(device_type="cpu", dtype=bfloat16, enabled=True): a
    context manager and a decorator. dtype is bfloat16 or float16 (another
    warns and disables autocast, as PyTorch's CPU autocast does);
    enabled=False turns autocast off inside an enabled region. The outer
    state comes back on exit, exceptions included. cache_enabled has no
    effect (the library keeps no cache of cast weights).

    device_type="cuda" (and torch.cuda.amp.autocast) where CUDA is not
    available warns and does nothing, as PyTorch; where it is, the region is
    the library's one autocast (float16 by default), which also covers the
    CPU's ops inside it."""

    def __init__(self, device_type="cpu", dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        # Without CUDA a 'cuda' region touches nothing, enabled or not (the
        # library's one switch would otherwise turn the CPU's autocast off).
        self._noop = device_type == "cuda" and (_cuda_missing(device_type, "Autocast") if enabled
                                                else not _cuda_available())
        if device_type != "cuda":
            _check_device(device_type, "autocast")
        self.device = device_type
        if dtype is None:
            dtype = _C.float16 if device_type == "cuda" else _dtype_setting()
        self.fast_dtype = dtype
        self._enabled = bool(enabled) and not self._noop
        self._cache_enabled = cache_enabled
        if self._enabled and self.fast_dtype not in (_C.bfloat16, _C.float16):
            warnings.warn(
                "In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                "CPU Autocast only supports dtype of torch.bfloat16, torch.float16 currently.")
            self._enabled = False
        self._saved = []

    def __enter__(self):
        if self._noop:
            return self
        _C._autocast_begin(self.fast_dtype if self._enabled else _C.float32)
        self._saved.append(_dtype_setting())
        _tls.dtype = self.fast_dtype
        return self

    def __exit__(self, *exc):
        if self._noop:
            return False
        _C._autocast_end()
        _tls.dtype = self._saved.pop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled or self._noop,
                          self._cache_enabled):
                return fn(*args, **kwargs)
        return wrapper


class GradScaler:
    """torch.amp.GradScaler: dynamic loss scaling, PyTorch's algorithm.

    scale(loss) multiplies by the scale; unscale_(optimizer) divides that
    optimiser's gradients by it in place (once per step, so they can be
    clipped before the step) and notes whether any is inf or NaN; step()
    unscales if that has not been done and skips optimizer.step() when a
    gradient was not finite; update() moves the scale (backoff after a
    skipped step, growth after growth_interval finite ones in a row) or sets
    new_scale. Any optimiser works, several of them and several parameter
    groups too. Disabled (enabled=False), every call passes through."""

    _READY, _UNSCALED, _STEPPED = 0, 1, 2

    def __init__(self, device="cpu", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if _cuda_missing(str(device).split(":")[0], "GradScaler") if enabled else False:
            enabled, device = False, "cpu"
        self._device = str(_C.device(device))
        self._enabled = bool(enabled)
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer = {}  # id(optimizer) -> {"stage", "found_inf"}

    def is_enabled(self):
        return self._enabled

    def scale(self, outputs):
        """outputs * scale (a tensor, or tensors in lists and tuples)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, _C.Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": self._READY,
                                                              "found_inf": False})

    def unscale_(self, optimizer):
        """Divide optimizer's gradients by the scale, in place."""
        if not self._enabled:
            return
        if _compile.is_compiling():
            raise _compile._Unsupported("GradScaler.unscale_ inside a compiled function")
        st = self._state(optimizer)
        if st["stage"] == self._UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if st["stage"] == self._STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        # PyTorch rounds 1/scale from float64 to the gradients' float32.
        inv = 1.0 / self._scale
        flags = []
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype == _C.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    g.mul_(_C.tensor(inv, dtype=_C.float32).to(g.dtype))
                    flags.append((~g.isfinite()).any())
        st["found_inf"] = bool(_C.stack(flags).any().item()) if flags else False
        st["stage"] = self._UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs), unless a gradient was inf or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        st = self._state(optimizer)
        if st["stage"] == self._STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] == self._READY:
            self.unscale_(optimizer)
        ret = None if st["found_inf"] else optimizer.step(*args, **kwargs)
        st["stage"] = self._STEPPED
        return ret

    def update(self, new_scale=None):
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, _C.Tensor)
                                else new_scale)
        else:
            if not self._per_optimizer:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(st["found_inf"] for st in self._per_optimizer.values()):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict.get("_growth_tracker", 0))
