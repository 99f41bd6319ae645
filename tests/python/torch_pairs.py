"""The comparison the nn tests share: the same function run with chutney and
with PyTorch (Debian's python3-torch) on the same inputs, values and
gradients."""

import numpy as np

import chutney


class Const:
    """An input that does not require a gradient."""

    def __init__(self, a):
        self.a = a


def both(fn, *arrays, tol=1e-5, grad=True):
    """fn(lib, F, *tensors) with chutney and with torch: the same values, and
    the same gradients of sum(out * seed) for every float input (float
    arrays go in as float32)."""
    import torch
    outs = []
    for lib, F in ((chutney, chutney.nn.functional), (torch, torch.nn.functional)):
        ts = [lib.tensor(a.a.astype(np.float32)) if isinstance(a, Const) else
              lib.tensor(a.astype(np.float32), requires_grad=grad) if a.dtype.kind == "f"
              else lib.tensor(a) for a in arrays]
        out = fn(lib, F, *ts)
        g = []
        if grad and out.requires_grad:
            seed = np.random.default_rng(3).standard_normal(tuple(out.shape)).astype(np.float32)
            out.backward(lib.tensor(seed))
            g = [None if t.grad is None else t.grad.numpy() for t in ts if t.requires_grad]
        outs.append((out.detach().numpy(), g))
    (cv, cg), (tv, tg) = outs
    assert cv.shape == tv.shape, (cv.shape, tv.shape)
    np.testing.assert_allclose(cv, tv, rtol=tol, atol=tol)
    assert len(cg) == len(tg)
    for a, b in zip(cg, tg):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=10 * tol, atol=10 * tol)


def run(lib, fn, arrays):
    """fn(lib, *tensors) (float64 arrays require grad) -> its values, the
    gradients of sum(first output * seed) for the inputs, the dtypes."""
    import torch
    ts = [lib.tensor(a, requires_grad=a.dtype == np.float64) if isinstance(a, np.ndarray)
          else a for a in arrays]
    out = fn(lib, *ts)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    grads = []
    first = outs[0]
    if isinstance(first, (chutney.Tensor, torch.Tensor)) and first.requires_grad:
        seed = np.random.default_rng(5).standard_normal(tuple(first.shape))
        first.backward(lib.tensor(seed))
        grads = [t.grad.numpy() if t.grad is not None else None for t in ts
                 if isinstance(t, (chutney.Tensor, torch.Tensor)) and t.requires_grad]
    vals = [o.detach().numpy() if hasattr(o, "detach") else np.asarray(o) for o in outs]
    return vals, grads, [o.dtype for o in outs if hasattr(o, "dtype")]


def same(fn, *arrays, tol=1e-10, gtol=1e-8, check_dtypes=False):
    """fn(lib, *tensors) gives the same values (exactly, for integers and
    bools), gradients and, with check_dtypes, result dtypes in both."""
    import torch
    (cv, cg, cd), (tv, tg, td) = run(chutney, fn, arrays), run(torch, fn, arrays)
    assert len(cv) == len(tv)
    for a, b in zip(cv, tv):
        assert a.shape == b.shape, (a.shape, b.shape)
        if a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer):
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    if check_dtypes:
        assert [str(d).split(".")[-1] for d in cd] == [str(d).split(".")[-1] for d in td]
    assert len(cg) == len(tg)
    for a, b in zip(cg, tg):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=gtol, atol=gtol)


def raises_both(fn, *arrays):
    """Both libraries refuse (RuntimeError, IndexError, TypeError...)."""
    import pytest
    import torch
    for lib in (torch, chutney):
        with pytest.raises(Exception):
            fn(lib, *[lib.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays])
