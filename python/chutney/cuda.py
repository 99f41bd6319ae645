"""torch.cuda's queries over the library's CUDA devices (the CUDA backend
is built when the toolkit is found; docs/devices.md). Scripts that pick a
device with `"cuda" if torch.cuda.is_available() else "cpu"` run on the CPU
where no GPU or no CUDA build is there. Random numbers come from the
library's one generator for every device, so manual_seed and
manual_seed_all both seed it (chutney.manual_seed)."""

from chutney import _C


def device_count():
    return _C.device_count("cuda")


def is_available():
    return device_count() > 0


def current_device():
    if not is_available():
        raise RuntimeError("no CUDA device (chutney.cuda.is_available() is False)")
    return 0


def synchronize(device=None):
    if is_available():
        _C.synchronize(device if device is not None else "cuda")


def empty_cache():
    _C.empty_cache()


def manual_seed(seed):
    _C.manual_seed(seed)


manual_seed_all = manual_seed


def memory_allocated(device=None):
    return _C.memory_stats(device if device is not None else "cuda")["allocated_bytes"]


def max_memory_allocated(device=None):
    return _C.memory_stats(device if device is not None else "cuda")["peak_allocated_bytes"]


def memory_reserved(device=None):
    s = _C.memory_stats(device if device is not None else "cuda")
    return s["allocated_bytes"] + s["cached_bytes"]


def _make_amp():
    """torch.cuda.amp: autocast and GradScaler for device 'cuda' (without
    CUDA they warn and turn themselves off, as PyTorch's do)."""
    import sys
    import types

    from chutney import amp as _amp

    mod = types.ModuleType(__name__ + ".amp", _make_amp.__doc__)

    class autocast(_amp.autocast):  # noqa: N801 (torch's name)
        def __init__(self, enabled=True, dtype=None, cache_enabled=True):
            super().__init__("cuda", dtype, enabled, cache_enabled)

    class GradScaler(_amp.GradScaler):
        def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                     growth_interval=2000, enabled=True):
            super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                             enabled)

    mod.autocast, mod.GradScaler = autocast, GradScaler
    sys.modules[mod.__name__] = mod
    return mod


amp = _make_amp()
