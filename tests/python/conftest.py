"""Shared helpers of the Python binding's tests (python/run_tests.sh runs them)."""

import math

import pytest

import chutney


def close(a, b, rtol=1e-5, atol=1e-6):
    """Nested lists (or numbers) equal within tolerances, NaN equal to NaN."""
    if isinstance(a, chutney.Tensor):
        a = a.tolist()
    if isinstance(b, chutney.Tensor):
        b = b.tolist()
    if isinstance(a, (list, tuple)):
        return (isinstance(b, (list, tuple)) and len(a) == len(b) and
                all(close(x, y, rtol, atol) for x, y in zip(a, b)))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return abs(a - b) <= atol + rtol * abs(b)


@pytest.fixture(autouse=True)
def _no_open_scopes():
    """Every binding call leaves the library's scope stack as it found it,
    and recording back on (a test that fails inside no_grad must not leak
    into the next), and no autocast region left open."""
    yield
    assert chutney._C._scope_depth() == 0
    assert chutney.is_grad_enabled()
    assert not chutney.is_autocast_enabled()
