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
