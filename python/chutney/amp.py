"""Mixed precision (torch.amp): autocast regions and dynamic loss scaling.

Both are the C library's. Inside an autocast region matmul (and the linear
layers), conv2d, conv_transpose2d and scaled_dot_product_attention round
their float32 inputs to the region's dtype and return float32 (PyTorch
returns the low precision); parameters and gradients stay float32. The
region is per thread. GradScaler hooks the library's scaler into one
optimiser's step, which unscales the gradients, skips the update when one
is inf or NaN, and changes the scale.
"""

import functools
import threading
import warnings

from chutney import _C, _compile

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
        self._noop = bool(enabled) and _cuda_missing(device_type, "Autocast")
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
    """torch.amp.GradScaler over the library's scaler (cn_grad_scaler).

    The library's scaler hooks into one optimiser's step: optimizer.step()
    (through scaler.step) divides the gradients by the scale, skips the
    update if any is inf or NaN, and then changes the scale (backoff on a
    skip, growth after growth_interval finite steps in a row). PyTorch
    changes the scale in update(); here update() only closes the iteration,
    so get_scale() between step() and update() already shows the next scale.
    The scaler binds to the first optimiser given to step(); until then
    scale() multiplies by init_scale. What the library's scaler cannot do
    raises NotImplementedError: unscale_ (the step unscales), and several
    optimisers or parameter groups."""

    def __init__(self, device="cpu", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if _cuda_missing(str(device).split(":")[0], "GradScaler") if enabled else False:
            enabled, device = False, "cpu"
        self._device = str(_C.device(device))
        self._enabled = bool(enabled)
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._c = None
        self._optimizer = None
        self._stepped = False
        self._tracker = 0  # the count of finite steps, until bound
        self._tracker_before_step = 0

    def is_enabled(self):
        return self._enabled

    def _bind(self, optimizer):
        cs = self._check(optimizer)
        if self._optimizer is optimizer:
            return
        c = _C.GradScaler(cs[0], self._init_scale, self._growth_factor, self._backoff_factor,
                          self._growth_interval)
        c.set_state(self._init_scale, self._tracker, 0)
        self._c = c
        self._optimizer = optimizer

    def _check(self, optimizer):
        """The optimizer's library optimisers, when this scaler can hook into it."""
        if self._optimizer is not None and self._optimizer is not optimizer:
            raise NotImplementedError(
                "GradScaler.step: a second optimizer: the library's scaler hooks into one "
                "optimiser's step (use one GradScaler per optimizer)")
        # Checked at every step: a group added later would go unscaled.
        cs = getattr(optimizer, "_c", None)
        if not isinstance(cs, list) or len(cs) != 1:
            n = len(cs) if isinstance(cs, list) else "no"
            raise NotImplementedError(
                f"GradScaler.step: an optimizer with {n} parameter groups (library optimisers); "
                "the library's scaler hooks into one (use one parameter group)")
        return cs

    def scale(self, outputs):
        """outputs * scale (a tensor, or tensors in lists and tuples)."""
        if not self._enabled:
            return outputs
        if _compile.is_compiling():
            raise _compile._Unsupported("GradScaler inside a compiled function")
        if isinstance(outputs, _C.Tensor):
            return outputs * self._init_scale if self._c is None else self._c.scale(outputs)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer):
        if not self._enabled:
            return
        raise NotImplementedError(
            "GradScaler.unscale_: the library's scaler divides the gradients inside "
            "optimizer.step(), so they cannot be unscaled (and clipped) before it")

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(), which unscales and skips the update on inf/NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs or args:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._bind(optimizer)
        if self._stepped:
            raise RuntimeError("step() has already been called since the last update().")
        self._tracker_before_step = self._c.get_state()[1]
        ret = optimizer.step()
        self._stepped = True
        return ret

    def update(self, new_scale=None):
        if not self._enabled:
            return
        if not self._stepped:
            raise AssertionError("No inf checks were recorded prior to update.")
        if new_scale is not None:
            # As torch: this iteration's own update is replaced, the count
            # of finite steps left where it was before the step.
            value = float(new_scale.item() if isinstance(new_scale, _C.Tensor) else new_scale)
            self._c.set_state(value, self._tracker_before_step, self._c.get_state()[2])
        self._stepped = False

    def get_scale(self):
        if not self._enabled:
            return 1.0
        return self._init_scale if self._c is None else self._c.scale_value

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def state_dict(self):
        if not self._enabled:
            return {}
        tracker = self._tracker if self._c is None else self._c.get_state()[1]
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._tracker = int(state_dict.get("_growth_tracker", 0))
        if self._c is not None:
            # The factors are fixed when the library's scaler is made: a
            # new one on the same optimiser, with the state put back (checked
            # first, so that a refusal leaves this one bound).
            self._check(self._optimizer)
            skipped = self._c.get_state()[2]
            optimizer, self._c, self._optimizer = self._optimizer, None, None
            self._bind(optimizer)
            self._c.set_state(self._init_scale, self._tracker, skipped)
