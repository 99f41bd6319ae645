"""The functions and methods of chutney/_tensor_extras.py (compositions, and
the ops whose indices come from the host) against PyTorch's: values,
indices and gradients. Skipped without torch (Debian's python3-torch)."""

import math

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
from torch_pairs import same  # noqa: E402

rng = np.random.default_rng(21)



A = rng.standard_normal((3, 4, 5))
B = rng.standard_normal((3, 5, 2))
SPECIAL = np.array([0.0, -1.5, np.nan, np.inf, -np.inf, 2.0, 1e300])


def test_elementwise():
    same(lambda L, x: L.isnan(x), SPECIAL)
    same(lambda L, x: L.isinf(x), SPECIAL)
    same(lambda L, x: L.isfinite(x), SPECIAL)
    same(lambda L, x: L.isposinf(x), SPECIAL)
    same(lambda L, x: L.isneginf(x), SPECIAL)
    same(lambda L, x: L.nan_to_num(x), SPECIAL)
    same(lambda L, x: x.nan_to_num(1.0, 5.0, -7.0), SPECIAL)
    same(lambda L, x: L.clamp_min(x, 0.2), A)
    same(lambda L, x: x.clamp_max(-0.1), A)
    same(lambda L, x, y: L.lerp(x, y, 0.3), A, A[::-1].copy())
    same(lambda L, x, y, w: x.lerp(y, w), A, A * 2, rng.random(A.shape))
    same(lambda L, x: L.sinh(x), np.concatenate([A.ravel(), [1e-9, -3e-8]]))
    same(lambda L, x: L.cosh(x), A)
    same(lambda L, x: L.exp2(x), A)
    same(lambda L, x: L.logit(x), rng.random(7))
    same(lambda L, x: L.logit(x, 0.01), np.array([0.0, 0.5, 1.0, 0.003]))
    same(lambda L, x, y: L.logaddexp(x, y), A * 30, A[::-1].copy() * 30)
    same(lambda L, x, y: L.hypot(x, y), A, A * 2 + 1)
    same(lambda L, x: L.frac(x), A * 3)
    same(lambda L, x: L.deg2rad(x), A)
    same(lambda L, x: L.rad2deg(x), A)
    same(lambda L, x: L.signbit(x), np.array([-0.0, 0.0, -1.0, 2.0]))
    same(lambda L, x: L.xlogy(x, L.tensor([0.0, 3.0, 0.5], dtype=L.float64)),
         np.array([0.0, 1.0, 2.0]))


def test_products():
    m, a, b = rng.standard_normal((4, 2)), rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    same(lambda L, m, a, b: L.addmm(m, a, b, beta=0.5, alpha=2.0), m, a, b)
    same(lambda L, m, a, b: L.baddbmm(m, a, b, alpha=0.3), rng.standard_normal((3, 4, 2)), A, B)
    same(lambda L, x, y: L.outer(x, y), A[0, 0], A[1, 1])
    same(lambda L, x, y, z: L.addcmul(x, y, z, value=0.5), A, A * 2, A + 1)
    same(lambda L, x, y, z: x.addcdiv(y, z, value=2), A, A * 2, np.abs(A) + 1)
    same(lambda L, x, y: L.cdist(x, y), rng.standard_normal((2, 5, 3)),
         rng.standard_normal((2, 4, 3)), tol=1e-9)
    same(lambda L, x, y: L.cdist(x, y, p=1.0), rng.standard_normal((5, 3)),
         rng.standard_normal((4, 3)), tol=1e-9)


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->ji", [(3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (5, 6)]),
    ("ijk,jl,lk->il", [(2, 3, 4), (3, 5), (5, 4)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("ij,kj", [(3, 4), (5, 4)]),
    ("a...,a...->...", [(3, 2, 1), (3, 1, 4)]),
    ("ij,ij->i", [(1, 3), (2, 3)]),
    ("bij,bjk->bik", [(1, 3, 4), (2, 4, 5)]),
])
def test_einsum(eq, shapes):
    arrays = [rng.standard_normal(s) for s in shapes]
    same(lambda L, *xs: L.einsum(eq, *xs), *arrays, tol=1e-9)


def test_tensordot():
    same(lambda L, x, y: L.tensordot(x, y, dims=([1, 2], [2, 1])), A,
         rng.standard_normal((6, 5, 4)), tol=1e-9)
    same(lambda L, x, y: L.tensordot(x, y, 1), A, B[0], tol=1e-9)


def test_shapes():
    same(lambda L, x: L.movedim(x, 0, -1), A)
    same(lambda L, x: L.movedim(x, (0, 1), (2, 0)), A)
    same(lambda L, x: L.tile(x, (2,)), A[0])
    same(lambda L, x: x.tile((2, 1, 3)), A)
    same(lambda L, x: L.repeat_interleave(x, 3, dim=1), A)
    same(lambda L, x: x.repeat_interleave(2), A[0])
    same(lambda L, x, r: L.repeat_interleave(x, r, dim=0), A, np.array([1, 0, 3]))
    same(lambda L, x: L.roll(x, 2, 1), A)
    same(lambda L, x: L.roll(x, (-1, 7), (0, 2)), A)
    same(lambda L, x: L.roll(x, 3), A)
    for off in (0, 1, -2, 7):
        same(lambda L, x: L.diagonal(x, off), A[0])
        same(lambda L, x: x.diagonal(off, 2, 0), A)
        same(lambda L, x: L.diag(x, off), A[0, 0])
    same(lambda L, x: L.diag(x), A[0])
    same(lambda L, x: L.diag_embed(x), A)
    same(lambda L, x: L.trace(x), A[0])
    same(lambda L, x: L.diff(x), A)
    same(lambda L, x: L.diff(x, 2, 0), A)
    same(lambda L, x: L.cumprod(x, 1), np.where(np.abs(A) < 0.3, 0.0, A))
    same(lambda L, x: L.logcumsumexp(x, 2), A * 50)
    same(lambda L, x: L.aminmax(x.detach(), dim=1), A)
    same(lambda L, x: x.unflatten(2, (5, 1)), A)
    same(lambda L, x: L.var_mean(x, 1), A)
    same(lambda L, x: L.std_mean(x, (0, 2), keepdim=True), A)
    grid = chutney.meshgrid(chutney.arange(3), chutney.arange(4), indexing="xy")
    want = torch.meshgrid(torch.arange(3), torch.arange(4), indexing="xy")
    for g, w in zip(grid, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    grid = chutney.meshgrid(chutney.arange(3), chutney.arange(4), chutney.arange(2))
    for g, w in zip(grid, torch.meshgrid(torch.arange(3), torch.arange(4), torch.arange(2),
                                         indexing="ij")):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_indexing_functions():
    idx = np.array([2, 0, 3])
    same(lambda L, x, i: L.take_along_dim(x, i, 1), A,
         rng.integers(0, 4, (3, 2, 5)))
    same(lambda L, x, i: L.take(x, i), A, rng.integers(0, 60, (2, 3)))
    same(lambda L, x, i, s: x.index_add(1, i, s, alpha=2.0), A, idx,
         rng.standard_normal((3, 3, 5)))
    same(lambda L, x, i, s: x.index_copy(1, i, s), A, idx, rng.standard_normal((3, 3, 5)))
    same(lambda L, x, i: x.index_fill(2, i, -1.0), A, np.array([4, 0]))
    perm = np.argsort(rng.random((3, 4, 5)), axis=1)[:, :2, :]
    same(lambda L, x, i, s: x.scatter(1, i, s), A, perm, rng.standard_normal((3, 2, 5)))
    same(lambda L, x, i: x.scatter(1, i, 2.5), A, perm)
    same(lambda L, x, m: L.masked_select(x, m), A, A > 0.3)
    t = chutney.zeros(5)
    t.index_add_(0, chutney.tensor([1, 1, 4]), chutney.ones(3))
    np.testing.assert_array_equal(t.numpy(), [0, 2, 0, 0, 1])
    t.scatter_(0, chutney.tensor([0]), chutney.tensor([9.0]))
    np.testing.assert_array_equal(t.numpy(), [9, 2, 0, 0, 1])


def test_sorting_and_selection():
    X = np.round(rng.standard_normal((4, 7)), 1)  # ties
    X[1, 2] = np.nan
    X[2, 5] = np.inf
    for desc in (False, True):
        same(lambda L, x: L.sort(x, dim=1, descending=desc, stable=True), X)
        same(lambda L, x: x.sort(dim=0, descending=desc, stable=True), X)
        same(lambda L, x: L.argsort(x, dim=1, descending=desc, stable=True), X)
    ints = rng.integers(-5, 5, (3, 6))
    ints[0, 0] = np.iinfo(np.int64).min
    same(lambda L, x: L.sort(x, dim=1, descending=True, stable=True), ints)
    Y = rng.standard_normal((4, 7))  # no ties: topk's order is defined
    for largest in (True, False):
        same(lambda L, x: L.topk(x, 3, 1, largest=largest), Y)
        same(lambda L, x: x.topk(2, 0, largest=largest), Y)
    same(lambda L, x: L.kthvalue(x, 3, 1), Y)
    same(lambda L, x: L.median(x), Y)
    same(lambda L, x: L.median(x, 1, keepdim=True), Y)
    same(lambda L, x: L.msort(x), Y)
    for interp in ("linear", "lower", "higher", "midpoint", "nearest"):
        same(lambda L, x: L.quantile(x, 0.3, dim=1, interpolation=interp), Y)
    same(lambda L, x: L.quantile(x, L.tensor([0.1, 0.5, 1.0], dtype=L.float64)), Y)
    same(lambda L, x: L.nonzero(x), np.array([[0.0, 1.0], [2.0, 0.0]]))
    same(lambda L, x: L.nonzero(x, as_tuple=True), np.array([[0.0, 1.0], [2.0, 0.0]]))
    same(lambda L, x: L.argwhere(x), np.array([0, 3, 0, 1]))
    same(lambda L, x: L.unique(x, return_inverse=True, return_counts=True),
         np.array([[3, 1, 3], [2, 1, 7]]))
    same(lambda L, x: L.bincount(x, minlength=6), np.array([0, 3, 3, 1]))
    same(lambda L, x, w: L.bincount(x, w.detach()), np.array([0, 3, 3, 1]), np.array([0.5, 1, 2, 3.0]))
    same(lambda L, x: L.histc(x, 5, -1, 1), Y)
    b = np.array([-1.0, 0.0, 0.5, 2.0])
    for right in (False, True):
        same(lambda L, s, v: L.searchsorted(s, v, right=right), b, np.array([-2, 0.0, 0.7, 3]))
        same(lambda L, v, s: L.bucketize(v, s, right=right), np.array([[0.0, 0.5], [9, -9]]), b)
    same(lambda L, s, v: L.searchsorted(s, v), np.sort(Y, 1), rng.standard_normal((4, 3)))


def test_random_functions():
    chutney.manual_seed(0)
    p = chutney.tensor([0.1, 0.0, 0.6, 0.3])
    draws = chutney.multinomial(p, 20000, replacement=True)
    freq = np.bincount(draws.numpy(), minlength=4) / 20000
    np.testing.assert_allclose(freq, [0.1, 0.0, 0.6, 0.3], atol=0.015)
    chutney.manual_seed(1)
    a = chutney.multinomial(chutney.tensor([[1.0, 2, 3, 0], [0, 0, 1, 1]]), 2)
    chutney.manual_seed(1)
    b = chutney.multinomial(chutney.tensor([[1.0, 2, 3, 0], [0, 0, 1, 1]]), 2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert all(len(set(r)) == 2 for r in a.tolist()) and 3 not in a[0].tolist()
    assert set(a[1].tolist()) == {2, 3}
    with pytest.raises(RuntimeError):
        chutney.multinomial(chutney.tensor([1.0, 1.0]), 3)
    firsts = [chutney.multinomial(chutney.tensor([1.0, 3.0]), 1).item() for _ in range(4000)]
    assert abs(np.mean(firsts) - 0.75) < 0.03
    x = chutney.empty(10000).uniform_(-2, 3)
    assert -2 <= float(x.min()) and float(x.max()) < 3 and abs(float(x.mean()) - 0.5) < 0.05
    x = chutney.empty(10000).normal_(1.0, 2.0)
    assert abs(float(x.mean()) - 1) < 0.1 and abs(float(x.std()) - 2) < 0.1
    x = chutney.empty(10000).exponential_(2.0)
    assert abs(float(x.mean()) - 0.5) < 0.03 and float(x.min()) >= 0
    x = chutney.bernoulli(chutney.full((10000,), 0.25))
    assert set(np.unique(x.numpy())) <= {0.0, 1.0} and abs(float(x.mean()) - 0.25) < 0.02
    m = chutney.zeros(3, 4).fill_diagonal_(5.0)
    np.testing.assert_array_equal(m.numpy(), torch.zeros(3, 4).fill_diagonal_(5.0).numpy())


def test_named_results_and_cuda_queries():
    x = chutney.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    t = x.topk(2)
    assert t.values.tolist() == [[3, 2], [5, 4]] and t.indices.tolist() == [[0, 2], [1, 2]]
    s = chutney.sort(x, dim=1, descending=True)
    assert s.indices.tolist() == [[0, 2, 1], [1, 2, 0]]
    assert x.median(1).values.tolist() == [2, 4] and x.kthvalue(1, 1).indices.tolist() == [1, 0]
    assert chutney.aminmax(x).max.item() == 5
    n = chutney.cuda.device_count()
    assert chutney.cuda.is_available() == (n > 0) and n == chutney.device_count("cuda")
    if n == 0:
        with pytest.raises(RuntimeError):
            chutney.cuda.current_device()


def test_new_methods():
    x = chutney.ones(2, dtype=chutney.float64)
    assert x.new_zeros(3, 2).dtype == chutney.float64 and tuple(x.new_zeros((3, 2)).shape) == (3, 2)
    assert x.new_ones(4).sum().item() == 4
    assert x.new_full((2, 2), 7).tolist() == [[7, 7], [7, 7]]
    assert x.new_tensor([1, 2]).dtype == chutney.float64
    assert x.new_empty(5, dtype=chutney.int64).dtype == chutney.int64
    assert x.new_zeros(2, requires_grad=True).requires_grad
    # the library's own methods stay
    assert chutney.Tensor.sum is not None and chutney.ones(3).sum().item() == 3
    assert math.isclose(chutney.tensor([0.5]).logit().item(), 0.0, abs_tol=1e-7)


def test_review_cases():
    # fill_diagonal_ on a transposed (non-contiguous) tensor
    m = chutney.zeros(3, 4).t().fill_diagonal_(1.0)
    np.testing.assert_array_equal(m.numpy(), torch.zeros(3, 4).t().fill_diagonal_(1.0).numpy())
    # NaN propagates through median and quantile, as PyTorch
    x = [3.0, math.nan, 1.0, 3.0, math.nan, 2.0]
    assert math.isnan(chutney.median(chutney.tensor(x)).item())
    v = chutney.tensor([[1.0, 5.0, 2.0], [4.0, math.nan, 0.0]]).median(1)
    w = torch.tensor([[1.0, 5.0, 2.0], [4.0, math.nan, 0.0]]).median(1)
    assert v.values[0].item() == w.values[0].item() and math.isnan(v.values[1].item())
    assert v.indices.tolist() == w.indices.tolist()
    assert math.isnan(chutney.quantile(chutney.tensor([1.0, math.nan, 3.0]), 0.0).item())
    assert tuple(chutney.quantile(chutney.ones(2, 3), 0.5, keepdim=True).shape) == \
        tuple(torch.quantile(torch.ones(2, 3), 0.5, keepdim=True).shape)
    # logcumsumexp across values far apart
    a = [-1000.0, 0.0, -2000.0, 1.0]
    np.testing.assert_allclose(chutney.logcumsumexp(chutney.tensor(a, dtype=chutney.float64), 0).numpy(),
                               torch.logcumsumexp(torch.tensor(a, dtype=torch.float64), 0).numpy())
    # searchsorted with a sorter
    r = chutney.searchsorted(chutney.tensor([3.0, 1.0, 2.0]), chutney.tensor([2.5]),
                             sorter=chutney.tensor([1, 2, 0]))
    assert r.tolist() == torch.searchsorted(torch.tensor([3.0, 1, 2]), torch.tensor([2.5]),
                                            sorter=torch.tensor([1, 2, 0])).tolist()
    # sort and topk of bfloat16
    b = chutney.tensor([3.0, -1.0, 2.0]).to(chutney.bfloat16)
    assert b.sort().indices.tolist() == [1, 2, 0] and b.topk(1).values.float().tolist() == [3.0]
    # the small ones
    nan = chutney.full((2, 2), math.nan)
    assert not chutney.isnan(chutney.addmm(nan, chutney.ones(2, 3), chutney.ones(3, 2),
                                           beta=0)).any().item()
    assert math.isnan(chutney.xlogy(chutney.tensor([0.0]), chutney.tensor([math.nan])).item())
    assert tuple(chutney.nonzero(chutney.tensor(2.0)).shape) == (1, 0)
    assert chutney.repeat_interleave(chutney.tensor([2, 0, 1])).tolist() == [0, 0, 2]
    with pytest.raises(RuntimeError):
        chutney.kthvalue(chutney.ones(3), 4)
