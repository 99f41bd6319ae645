"""torch.autograd's anomaly detection switches. Chutney only records the
flag: its backward does not yet look for NaN or keep the forward's stack."""

import functools
import warnings

_enabled = False
_check_nan = True


def is_anomaly_enabled():
    return _enabled


def is_anomaly_check_nan_enabled():
    return _check_nan


def _set(mode, check_nan):
    global _enabled, _check_nan
    _enabled, _check_nan = bool(mode), bool(check_nan)


class detect_anomaly:
    """Anomaly detection on inside (a context manager or a decorator), as
    torch.autograd.detect_anomaly. Only the flag is recorded (see
    is_anomaly_enabled): Chutney's backward does not check for NaN or
    report the forward op that made a failing gradient."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)

    def __enter__(self):
        self.prev = (_enabled, _check_nan)
        _set(True, self.check_nan)
        return self

    def __exit__(self, *exc):
        _set(*self.prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """Anomaly detection on or off: at once (a function call) and until the
    end of the with block when used as a context manager. Only the flag is
    recorded (see detect_anomaly)."""

    def __init__(self, mode, check_nan=True):
        self.prev = (_enabled, _check_nan)
        _set(mode, check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set(*self.prev)
        return False
