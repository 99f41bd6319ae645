"""chutney.nn.functional.scaled_dot_product_attention against torch's explicit
math, softmax(q @ k^T * scale + mask) @ v with autograd (Debian's torch 1.13
has no F.scaled_dot_product_attention): values and the gradients of q, k, v
and a float mask; bool masks, causal, broadcast batch axes, dropout, errors."""

import math

import pytest

import chutney
import chutney.nn.functional as F

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

rng = np.random.default_rng(2024)


def torch_sdpa(q, k, v, mask=None, is_causal=False, scale=None):
    """PyTorch 2's definition, written out."""
    L, S = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-2, -1) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    if is_causal:
        mask = torch.ones(L, S, dtype=torch.bool).tril()
    if mask is not None and mask.dtype == torch.bool:
        s = s.masked_fill(~mask, float("-inf"))
    elif mask is not None:
        s = s + mask
    return torch.softmax(s, -1) @ v


def run_both(shapes, dtype, mask=None, is_causal=False, scale=None, mask_grad=False):
    arrays = [rng.standard_normal(s) for s in shapes]
    cdt, tdt = getattr(chutney, dtype), getattr(torch, dtype)
    cs = [chutney.tensor(a, dtype=cdt, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, dtype=tdt, requires_grad=True) for a in arrays]
    cm = tm = None
    if mask is not None:
        if mask.dtype == bool:
            cm, tm = chutney.tensor(mask), torch.tensor(mask)
        else:
            cm = chutney.tensor(mask, dtype=cdt, requires_grad=mask_grad)
            tm = torch.tensor(mask, dtype=tdt, requires_grad=mask_grad)
    co = F.scaled_dot_product_attention(*cs, attn_mask=cm, is_causal=is_causal, scale=scale)
    to = torch_sdpa(*ts, mask=tm, is_causal=is_causal, scale=scale)
    seed = rng.standard_normal(tuple(to.shape))
    co.backward(chutney.tensor(seed, dtype=cdt))
    to.backward(torch.tensor(seed, dtype=tdt))
    cg = [t.grad.numpy() for t in cs] + ([cm.grad.numpy()] if mask_grad else [])
    tg = [t.grad.numpy() for t in ts] + ([tm.grad.numpy()] if mask_grad else [])
    return co.detach().numpy(), to.detach().numpy(), cg, tg


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 2e-5)])
@pytest.mark.parametrize("case", ["plain", "float_mask", "bool_mask", "causal", "broadcast",
                                  "long"])
def test_matches_torch_math(dtype, tol, case):
    kw = {}
    if case == "plain":
        shapes = [(2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4)]
        kw["scale"] = 0.3
    elif case == "float_mask":
        shapes = [(2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 6)]
        m = rng.standard_normal((5, 7))
        m[1, 3] = -np.inf
        kw.update(mask=m, mask_grad=True)
    elif case == "bool_mask":
        shapes = [(2, 5, 8), (2, 7, 8), (2, 7, 6)]
        m = rng.standard_normal((2, 1, 7)) > -0.5
        m[:, :, 0] = True  # no row fully masked: torch would give NaN there
        kw["mask"] = m
    elif case == "causal":
        shapes = [(3, 9, 4), (3, 6, 4), (3, 6, 5)]
        kw["is_causal"] = True
    elif case == "broadcast":
        shapes = [(2, 1, 5, 4), (3, 6, 4), (1, 3, 6, 2)]
    else:  # several tiles of the CPU kernel
        shapes = [(1, 2, 150, 16), (1, 2, 300, 16), (1, 2, 300, 16)]
        kw["is_causal"] = True
    cv, tv, cg, tg = run_both(shapes, dtype, **kw)
    assert cv.shape == tv.shape
    scale = max(1.0, float(np.abs(tv).max()))
    np.testing.assert_allclose(cv, tv, rtol=0, atol=tol * scale, err_msg="forward")
    for i, (a, b) in enumerate(zip(cg, tg)):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=0, atol=tol * max(1.0, float(np.abs(b).max())),
                                   err_msg=f"gradient {i}")


def test_fully_masked_row_gives_zeros():
    q = chutney.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    k = chutney.tensor(rng.standard_normal((5, 4)))
    v = chutney.tensor(rng.standard_normal((5, 2)))
    m = np.ones((3, 5), dtype=bool)
    m[1] = False
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=chutney.tensor(m))
    assert y.tolist()[1] == [0.0, 0.0]
    y.sum().backward()
    assert q.grad.tolist()[1] == [0.0] * 4
    assert not np.isnan(q.grad.numpy()).any()


def test_dropout_reproducible_and_unbiased():
    n = 128
    q = chutney.tensor(rng.standard_normal((n, 8)) * 0.1, dtype=chutney.float32)
    k = chutney.tensor(rng.standard_normal((n, 8)) * 0.1, dtype=chutney.float32)
    v = chutney.eye(n, dtype=chutney.float32)
    chutney.manual_seed(5)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.25).numpy()
    chutney.manual_seed(5)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.25).numpy()
    assert np.array_equal(a, b)
    full = F.scaled_dot_product_attention(q, k, v).numpy()
    kept = a != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(a[kept], full[kept] / 0.75, rtol=1e-5)
    assert np.array_equal(full, F.scaled_dot_product_attention(q, k, v, dropout_p=0.0).numpy())


def test_errors():
    q = chutney.ones(2, 3, 4)
    k = chutney.ones(2, 5, 4)
    v = chutney.ones(2, 5, 6)
    with pytest.raises(Exception, match="do not fit"):
        F.scaled_dot_product_attention(q, chutney.ones(2, 4, 4), v)
    with pytest.raises(Exception, match="not both"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=chutney.ones(3, 5, dtype=chutney.bool),
                                       is_causal=True)
    with pytest.raises(Exception, match="dropout_p"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=2.0)
    with pytest.raises(ValueError, match="scale"):
        F.scaled_dot_product_attention(q, k, v, scale=-1.0)
