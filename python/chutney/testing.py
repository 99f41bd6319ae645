"""torch.testing.assert_close and make_tensor."""

import math

from chutney import _C

# PyTorch's default tolerances by dtype (rtol, atol).
_TOLERANCES = {
    _C.float16: (1e-3, 1e-5), _C.bfloat16: (1.6e-2, 1e-5),
    _C.float32: (1.3e-6, 1e-5), _C.float64: (1e-7, 1e-7),
}


def _as_tensor(x, like=None):
    if isinstance(x, _C.Tensor):
        return x
    if isinstance(x, bool):
        return _C.tensor(x)
    if isinstance(x, (int, float)):
        return _C.tensor(x, dtype=_C.float64 if isinstance(x, float) else _C.int64)
    return _C.as_tensor(x)


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    """|actual - expected| <= atol + rtol * |expected| elementwise (NaN
    equal to NaN with equal_nan), same shape, and same dtype and device
    unless told otherwise; sequences and mappings compared item by item.
    Raises AssertionError naming the greatest differences."""
    if (rtol is None) != (atol is None):
        raise ValueError("Both 'rtol' and 'atol' must be either specified or omitted, but got "
                         f"rtol={rtol} and atol={atol}.")
    if isinstance(actual, dict) and isinstance(expected, dict):
        if set(actual) != set(expected):
            raise AssertionError(msg or f"The keys of the mappings do not match: "
                                        f"{sorted(actual)} != {sorted(expected)}")
        for k in actual:
            assert_close(actual[k], expected[k], rtol=rtol, atol=atol, equal_nan=equal_nan,
                         check_device=check_device, check_dtype=check_dtype, msg=msg)
        return
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            raise AssertionError(msg or f"The length of the sequences mismatch: {len(actual)} != "
                                        f"{len(expected)}")
        for a, e in zip(actual, expected):
            assert_close(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan,
                         check_device=check_device, check_dtype=check_dtype, msg=msg)
        return
    a, e = _as_tensor(actual), _as_tensor(expected)
    if tuple(a.shape) != tuple(e.shape):
        raise AssertionError(msg or f"The values for attribute 'shape' do not match: "
                                    f"{tuple(a.shape)} != {tuple(e.shape)}.")
    if check_dtype and a.dtype != e.dtype:
        raise AssertionError(msg or f"The values for attribute 'dtype' do not match: "
                                    f"{a.dtype} != {e.dtype}.")
    if check_device and str(a.device) != str(e.device):
        raise AssertionError(msg or f"The values for attribute 'device' do not match: "
                                    f"{a.device} != {e.device}.")
    if rtol is None:
        rtol, atol = _TOLERANCES.get(a.dtype, (0.0, 0.0))
        if e.dtype in _TOLERANCES:
            r2, a2 = _TOLERANCES[e.dtype]
            rtol, atol = max(rtol, r2), max(atol, a2)
    av = a.detach().cpu().to(_C.float64).reshape(-1).tolist()
    ev = e.detach().cpu().to(_C.float64).reshape(-1).tolist()
    bad, worst_abs, worst_rel, at = 0, 0.0, 0.0, None
    for i, (x, y) in enumerate(zip(av, ev)):
        if math.isnan(x) or math.isnan(y):
            ok = equal_nan and math.isnan(x) and math.isnan(y)
        elif math.isinf(x) or math.isinf(y):
            ok = x == y
        else:
            ok = abs(x - y) <= atol + rtol * abs(y)
        if not ok:
            bad += 1
            d = abs(x - y) if not (math.isnan(x) or math.isnan(y)) else math.nan
            if at is None or (d == d and d > worst_abs):
                worst_abs, at = d, i
                worst_rel = d / abs(y) if y else math.inf
    if bad:
        n = len(av)
        raise AssertionError(msg or (
            f"Tensor-likes are not close!\n\nMismatched elements: {bad} / {n} "
            f"({100.0 * bad / max(n, 1):.1f}%)\nGreatest absolute difference: {worst_abs} at "
            f"index {at} (up to {atol} allowed)\nGreatest relative difference: {worst_rel} at "
            f"index {at} (up to {rtol} allowed)"))


def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False,
                noncontiguous=False, exclude_zero=False):
    """A tensor of uniform values in [low, high) (PyTorch's defaults by
    dtype: [-9, 9] for floats and integers, [0, 10) for uint8)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if dtype == _C.bool:
        t = _C.rand(*shape, device=device) < 0.5
        return t
    lo = -9 if low is None else low
    hi = 9 if high is None else high
    if dtype == _C.uint8:
        lo, hi = (0 if low is None else low), (10 if high is None else high)
    if dtype in (_C.int32, _C.int64, _C.uint8, _C.int8):
        t = _C.randint(int(lo), int(hi), shape, dtype=dtype, device=device)
    else:
        t = (_C.rand(*shape, device=device) * (hi - lo) + lo).to(dtype)
        if exclude_zero:
            t = _C.where(t == 0, _C.full_like(t, _C.finfo(dtype).eps if hasattr(_C, "finfo")
                                              else 1e-6), t)
    if requires_grad:
        t.requires_grad_(True)
    return t
