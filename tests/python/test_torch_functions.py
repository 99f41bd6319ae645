"""The functions and methods of chutney/_torch_functions.py and
chutney/_special.py against PyTorch's: values, indices, gradients, errors;
the random ones by their statistics. Skipped without torch."""

import math

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
from torch_pairs import raises_both as raises_like, same  # noqa: E402

rng = np.random.default_rng(7)



A = rng.standard_normal((3, 4))
V = rng.standard_normal(4)
SPECIAL = np.array([0.0, -1.5, np.nan, np.inf, -np.inf, 2.0, 1e300, 1.0 + 1e-9])


def test_isclose_and_comparisons():
    other = SPECIAL.copy()
    other[[0, 5, 7]] = [1e-9, 2.0 + 1e-6, 1.0]
    for kw in ({}, {"equal_nan": True}, {"rtol": 0, "atol": 1e-8}, {"rtol": 1e-3}):
        same(lambda L, a, b: L.isclose(a, b, **kw), SPECIAL, other)
        same(lambda L, a, b: a.isclose(b, **kw), SPECIAL, SPECIAL)
    same(lambda L, a: L.isclose(a, L.tensor([1, 2, 3])), np.array([1, 2, 4]))
    same(lambda L, a, b: L.isclose(a, b, rtol=0.5), np.array([1.0, np.inf, -np.inf, 5.0]),
         np.array([np.inf, 1.0, np.inf, -np.inf]))
    raises_like(lambda L, a, b: L.isclose(a, b), np.zeros(2, np.float32), np.zeros(2))
    same(lambda L, a, b: L.not_equal(a, b), SPECIAL, other)
    same(lambda L, a: L.positive(a), A)
    raises_like(lambda L, a: L.positive(a), np.array([True]))


def test_stacks_and_broadcast():
    s, v, m, t = np.array(2.0), V, A, rng.standard_normal((3, 4, 2))
    for name in ("hstack", "vstack", "row_stack", "dstack", "column_stack"):
        same(lambda L, a, b: getattr(L, name)([a, b]), v, v * 2)
        same(lambda L, a, b: getattr(L, name)((a, b)), m, m + 1)
    same(lambda L, a, b: L.hstack([a, b]), s, s)
    same(lambda L, a, b: L.column_stack([a, b]), v, m.T)
    same(lambda L, a, b: L.dstack([a, b]), t, t)
    same(lambda L, a, b, c: L.broadcast_tensors(a, b, c)[0] * 2 + L.broadcast_tensors(a, b, c)[1],
         rng.standard_normal((3, 1)), rng.standard_normal((1, 4)), s)
    assert chutney.broadcast_shapes((3, 1), (4,), 1, ()) == torch.broadcast_shapes((3, 1), (4,), 1, ())
    assert isinstance(chutney.broadcast_shapes((2,)), chutney.Size)
    raises_like(lambda L: L.broadcast_shapes((3,), (4,)))
    raises_like(lambda L, a, b: L.broadcast_tensors(a, b), np.zeros(3), np.zeros(4))
    for r, c, o in ((4, 4, 0), (3, 5, 1), (5, 3, -2), (4, 3, 10), (0, 3, 0)):
        same(lambda L: L.tril_indices(r, c, o))
        same(lambda L: L.triu_indices(r, c, o))
    assert chutney.tril_indices(3, 3, dtype=chutney.int32).dtype == chutney.int32


def test_cummax_cummin():
    ties = np.array([[1.0, 3.0, 3.0, 2.0, 5.0, 5.0], [0.0, -1.0, -1.0, 4.0, 4.0, -3.0]])
    nan = np.array([1.0, np.nan, 3.0, 0.0, np.nan, -1.0])
    for x in (ties, nan, A, rng.standard_normal((2, 3, 4))):
        for d in range(-1, x.ndim):
            same(lambda L, a: L.cummax(a, d), x)
            same(lambda L, a: a.cummin(d), x)
    same(lambda L, a: L.cummax(a, 0), np.array([3, 1, 4, 4, 2]))
    same(lambda L, a: L.cummin(a, 0), np.array(1.5))
    r = chutney.cummax(chutney.tensor(ties), 1)
    assert r.values is r[0] and r.indices is r[1]


def test_nan_reductions():
    x = A.copy()
    x[0, 1] = x[2, 3] = np.nan
    allnan = np.full((2, 3), np.nan)
    for a in (x, A, allnan):
        same(lambda L, t: L.nansum(t), a)
        same(lambda L, t: t.nansum(1), a)
        same(lambda L, t: L.nansum(t, (0, 1), keepdim=True), a)
        # (all NaN: PyTorch's gradient is NaN, 0 here; values only)
        same(lambda L, t: L.nanmean(t if a is not allnan else t.detach()), a)
        same(lambda L, t: t.nanmean(0, keepdim=True), a if a is not allnan else a[:0])
        same(lambda L, t: L.nanmedian(t if a is not allnan else t.detach()), a)
        same(lambda L, t: L.nanmedian(t, 1), a)
        same(lambda L, t: t.nanmedian(0, True), a)
    same(lambda L, t: L.nansum(t), np.array([1, 2, 3]))
    raises_like(lambda L, t: L.nanmean(t), np.array([1, 2]))


def test_splits_flips():
    x = rng.standard_normal((6, 7, 4))
    for ios in (3, 4, [1, 5], [2, 2, 9], (0, -2)):
        for d in (0, 1, -1):
            same(lambda L, a: L.tensor_split(a, ios, d)[1] * 2 + 0, x)
            same(lambda L, a: [p.sum() for p in a.tensor_split(ios, d)], x)
    same(lambda L, a: L.tensor_split(a, L.tensor([1, 3]), 1)[0], x)
    same(lambda L, a: L.hsplit(a, 7)[2], x)
    same(lambda L, a: a.vsplit([2, 3])[1], x)
    same(lambda L, a: L.dsplit(a, 2)[1], x)
    same(lambda L, a: L.hsplit(a, 2)[1], V)
    raises_like(lambda L, a: L.hsplit(a, 2), x)
    raises_like(lambda L, a: L.vsplit(a, 2), V)
    raises_like(lambda L, a: L.tensor_split(a, 2), np.array(1.0))
    same(lambda L, a: L.fliplr(a), x)
    same(lambda L, a: a.flipud(), x)
    raises_like(lambda L, a: L.fliplr(a), V)
    for k in (-3, -1, 0, 1, 2, 3, 5):
        same(lambda L, a: L.rot90(a, k), A)
        same(lambda L, a: a.rot90(k, [2, 0]), x)
    raises_like(lambda L, a: L.rot90(a, 1, [0, 0]), A)
    same(lambda L, a: L.diagflat(a), A)
    same(lambda L, a: a.diagflat(-2), V)


def test_products():
    b = rng.standard_normal((2, 3))
    same(lambda L, x, y: L.kron(x, y), A, b)
    same(lambda L, x, y: x.kron(y), V, b)
    same(lambda L, x, y: L.kron(x, y), rng.standard_normal((2, 1, 3)), V)
    same(lambda L, x, y, z: L.block_diag(x, y, z), A, V, np.array(3.0))
    same(lambda L, x, y: L.block_diag(x, y.to(L.int32)), A, np.array([[1, 2]]))
    same(lambda L, x, y: L.cartesian_prod(x, y), V, V[:2] * 3)
    same(lambda L, x: L.cartesian_prod(x), V)
    for r in (1, 2, 3):
        same(lambda L, x: L.combinations(x, r), V)
        same(lambda L, x: L.combinations(x, r, with_replacement=True), V)
    same(lambda L, m, v: L.mv(m, v), A, V)
    same(lambda L, m, v: m.mv(v), A, V)
    raises_like(lambda L, m, v: L.mv(m, v), A, V[:3])
    same(lambda L, x, y: L.inner(x, y), A, rng.standard_normal((2, 5, 4)))
    same(lambda L, x, y: x.inner(y), V, V)
    same(lambda L, x, y: L.inner(x, y), np.array(2.0), A)
    same(lambda L, x, y: L.vdot(x, y), V, V * 3)
    raises_like(lambda L, x, y: L.vdot(x, y), A, A)
    same(lambda L, x, y, z: L.chain_matmul(x, y, z), A, A.T, A)
    for n in (0, 1, 2, 5, -1, -3):
        same(lambda L, m: L.matrix_power(m, n), A[:, :3] + np.eye(3) * 2, gtol=1e-7)
    same(lambda L, m: m.matrix_power(3), rng.standard_normal((2, 3, 3)))
    for scale in (0.1, 1.0, 8.0):
        same(lambda L, m: L.matrix_exp(m), rng.standard_normal((3, 3)) * scale, tol=1e-9,
             gtol=1e-7)
    same(lambda L, m: m.matrix_exp(), rng.standard_normal((2, 4, 4)), tol=1e-9, gtol=1e-7)


def test_fmod_and_binary():
    a = np.array([5.5, -5.5, 5.5, -5.5, 1e17, 0.0, 7.0, np.inf, 3.0])
    b = np.array([3.0, 3.0, -3.0, -3.0, 3.1, 2.0, 0.0, 2.0, np.inf])
    same(lambda L, x, y: L.fmod(x.detach(), y.detach()), a, b)  # (no gradient to an infinite dividend)
    same(lambda L, x, y: L.fmod(x, y), a[:6], b[:6])
    same(lambda L, x, y: x.fmod(y), A * 5, np.abs(A[0]) + 0.5)
    same(lambda L, x: L.fmod(x, 1.5), A * 5)
    same(lambda L, x: L.fmod(x, 3), np.array([-7, 7, 5, -1]))
    same(lambda L, x: L.fmod(x, L.tensor([3, -2, 4, 5])), np.array([-7, 7, 5, -1]))
    same(lambda L, x, y: L.logaddexp2(x, y), A * 50, A[::-1].copy() * 50)
    same(lambda L, x: L.sinc(x), np.concatenate([A.ravel(), [0.0, 1.0, -2.0, 1e-9]]))
    same(lambda L, x, v: L.heaviside(x.detach(), v.detach()), np.array([-1.0, 0.0, 2.0, 0.0]),
         np.array([0.5, 0.25, 7.0, 1.0]))
    ints = np.array([0, 12, -18, 7, 100, 0])
    others = np.array([0, 8, 12, -21, 75, 5])
    same(lambda L, x, y: L.gcd(x, y), ints, others)
    same(lambda L, x, y: x.lcm(y), ints, others)
    raises_like(lambda L, x: L.gcd(x, x), V)
    same(lambda L, x, e: L.ldexp(x, e), V, np.array([0, 3, -2, 10]))
    same(lambda L, x, e: L.float_power(x, e), np.abs(V), V)
    same(lambda L, x: x.float_power(2), V)
    same(lambda L, x: L.float_power(x.float(), 3).float() * 1.0, V)
    x = np.array([1.0, np.nan, 3.0, np.nan, 2.0, -0.0])
    y = np.array([2.0, 1.0, np.nan, np.nan, 2.0, 0.0])
    same(lambda L, a, b: L.fmax(a, b), x, y)
    same(lambda L, a, b: a.fmin(b), x, y)
    same(lambda L, a, b: L.fmax(a, b), A, A[0] * 1.0)


def test_special_functions():
    xs = np.concatenate([np.linspace(-12.3, 30, 301), [0.5, 1, 2, 1e-8, 1e5, 1e12, -3.5,
                                                      -1e6 + 0.3]])
    poles = np.array([0.0, -1.0, -7.0, np.inf, -np.inf, np.nan])
    same(lambda L, x: L.lgamma(x), xs, tol=1e-11)
    same(lambda L, x: L.lgamma(x.detach()), poles)
    same(lambda L, x: x.digamma(), xs, tol=1e-11)
    same(lambda L, x: L.digamma(x.detach()), poles)
    same(lambda L, x: L.lgamma(x), np.array([1, 2, 10]))
    assert chutney.lgamma(chutney.tensor([1.5])).dtype == chutney.float32
    # gradients: lgamma' = digamma; digamma' = trigamma; second order too
    g = np.array([0.3, -0.7, 4.5, 12.0, -3.3, 25.0])
    for name in ("lgamma", "digamma"):
        vals = []
        for L in (chutney, torch):
            x = L.tensor(g, requires_grad=True)
            g1, = L.autograd.grad(getattr(L, name)(x).sum(), x, create_graph=True)
            g2, = L.autograd.grad(g1.sum(), x)
            vals.append((g1.detach().numpy(), g2.numpy()))
        np.testing.assert_allclose(vals[0][0], vals[1][0], rtol=1e-8)
        np.testing.assert_allclose(vals[0][1], vals[1][1], rtol=1e-7)  # torch's own ~1e-9
    # trigamma exactly (PyTorch's polygamma is good to ~1e-9 only)
    tri = chutney.polygamma(1, chutney.tensor([1.0, 0.5, -0.5], dtype=chutney.float64))
    np.testing.assert_allclose(tri.numpy(), [math.pi ** 2 / 6, math.pi ** 2 / 2,
                                             math.pi ** 2 / 2 + 4], rtol=1e-14)
    for n in (0, 1, 2, 3):
        same(lambda L, x: L.polygamma(n, x), xs[xs > -10], tol=1e-8, gtol=1e-6)
        if n == 0:  # (PyTorch's polygamma at the negative integers: not poles)
            same(lambda L, x: x.detach().polygamma(n), poles)
    with pytest.raises(RuntimeError):
        chutney.polygamma(-1, chutney.tensor(V))
    for p in (1, 2, 4):
        same(lambda L, x: L.mvlgamma(x, p), np.abs(V) + 2.0, tol=1e-11)
    same(lambda L, x: L.mvlgamma(x, 3), np.array([0.8, 3.0]), tol=1e-11)
    raises_like(lambda L, x: L.mvlgamma(x, 0), np.array([3.0]))
    # erfinv: against PyTorch away from +-1, against erfc in the tails
    e = np.concatenate([np.linspace(-0.9999, 0.9999, 501), [0.0, 1e-300, -0.3]])
    same(lambda L, x: L.erfinv(x), e, tol=1e-13, gtol=1e-9)
    same(lambda L, x: x.detach().erfinv(), np.array([1.0, -1.0, 1.5, np.nan]))
    tail = np.array([1 - 2.0 ** -53, 1 - 1e-12, -1 + 1e-15, 0.99999])
    y = chutney.erfinv(chutney.tensor(tail)).numpy()
    np.testing.assert_allclose(torch.erfc(torch.tensor(np.abs(y))).numpy(), 1 - np.abs(tail),
                               rtol=1e-12)
    x = chutney.tensor([0.3, -0.7, 0.95], dtype=chutney.float64, requires_grad=True)
    tx = torch.tensor([0.3, -0.7, 0.95], dtype=torch.float64, requires_grad=True)
    g1, = chutney.autograd.grad(chutney.erfinv(x).sum(), x, create_graph=True)
    tg1, = torch.autograd.grad(torch.erfinv(tx).sum(), tx, create_graph=True)
    np.testing.assert_allclose(chutney.autograd.grad(g1.sum(), x)[0].numpy(),
                               torch.autograd.grad(tg1.sum(), tx)[0].numpy(), rtol=1e-9)
    assert chutney.erfinv(chutney.tensor([0.5])).dtype == chutney.float32


def test_scatter_reduce():
    src = np.array([[1.0, 5.0, 5.0, -2.0], [3.0, 0.0, 2.0, 2.0]])
    inp = np.array([[4.0, 0.5, -1.0], [1.0, 2.0, 0.0]])
    idx = np.array([[0, 1, 1, 2], [2, 2, 0, 0]])
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            same(lambda L, x, s: L.scatter_reduce(x, 1, L.tensor(idx), s, reduce,
                                                  include_self=inc), inp, src)
            same(lambda L, x, s: x.scatter_reduce(0, L.tensor(idx[:, :3] % 2), s, reduce,
                                                  include_self=inc), inp, src[:, :3].copy())
    big = rng.integers(0, 4, (5, 6))
    s2 = np.round(rng.standard_normal((5, 6)), 1)
    for reduce in ("prod", "amax", "amin", "mean"):
        same(lambda L, x, s: L.scatter_reduce(x, 0, L.tensor(big[:, :4] % 4), s, reduce),
             rng.standard_normal((4, 4)), s2[:, :4].copy())
    same(lambda L, x: L.scatter_reduce(x, 0, L.tensor([0, 0, 1]), L.tensor([4, 2, 3]), "mean"),
         np.array([1, 7]))
    raises_like(lambda L, x, s: L.scatter_reduce(x, 1, L.tensor(idx), s, "max"), inp, src)
    t = chutney.tensor(inp)
    assert t.scatter_reduce_(1, chutney.tensor(idx), chutney.tensor(src), "amax") is t
    np.testing.assert_array_equal(t.numpy(), torch.tensor(inp).scatter_reduce_(
        1, torch.tensor(idx), torch.tensor(src), "amax").numpy())


def test_index_put_and_friends():
    x = rng.standard_normal((4, 3))
    for acc in (False, True):
        same(lambda L, a, v: L.index_put(a, (L.tensor([0, 2, -1]),), v, acc), x,
             rng.standard_normal((3, 3)))
        same(lambda L, a, v: a.index_put((L.tensor([0, 2, 0]), L.tensor([1, 1, 1])), v,
                                         accumulate=True), x, np.array([1.0, 2.0, 3.0]))
        same(lambda L, a, v: L.index_put(a, (L.tensor([[True, False, True]] * 4),), v, acc),
             x, np.array(5.0))
    raises_like(lambda L, a: L.index_put(a, (L.tensor([4]),), L.tensor(1.0)), x)
    for L in (chutney, torch):
        t = L.tensor(x).clone()
        r = t.index_put_((L.tensor([1, 1]),), L.tensor(2.0, dtype=L.float64), accumulate=True)
        assert r is t
    np.testing.assert_array_equal(chutney.tensor(x).index_put_(
        (chutney.tensor([1, 1]),), chutney.tensor(2.0, dtype=chutney.float64),
        accumulate=True).numpy(),
        torch.tensor(x).index_put_((torch.tensor([1, 1]),), torch.tensor(2.0, dtype=torch.float64),
                                   accumulate=True).numpy())
    mask = np.array([[True, False, True], [False, False, True], [True, True, False],
                     [False, False, False]])
    same(lambda L, a, s: L.masked_scatter(a, L.tensor(mask), s), x, rng.standard_normal(8))
    same(lambda L, a, s: a.masked_scatter(L.tensor(mask[1]), s), x, rng.standard_normal((4, 3)))
    raises_like(lambda L, a, s: L.masked_scatter(a, L.tensor(mask), s), x, np.zeros(2))
    for L in (chutney, torch):
        t = L.tensor(x)
        assert t.masked_scatter_(L.tensor(mask), L.ones(8, dtype=L.float64)) is t
        assert t.index_copy_(0, L.tensor([3, 1]), L.zeros(2, 3, dtype=L.float64)) is t
        assert t.scatter_add_(1, L.tensor([[0], [2], [1], [1]]), L.ones(4, 1,
                              dtype=L.float64)) is t
        if L is chutney:
            c = t.numpy()
    np.testing.assert_array_equal(c, t.numpy())


def test_statistics_and_integration():
    x = rng.standard_normal((3, 6))
    fw = np.array([1, 2, 0, 1, 3, 1])
    aw = rng.random(6)
    same(lambda L, a: L.cov(a), x)
    same(lambda L, a: a.cov(correction=0), x)
    same(lambda L, a: L.cov(a), x[0])
    same(lambda L, a: L.cov(a, fweights=L.tensor(fw)), x)
    same(lambda L, a, w: L.cov(a, fweights=L.tensor(fw), aweights=w, correction=2), x, aw)
    same(lambda L, a: L.corrcoef(a), x)
    same(lambda L, a: a.corrcoef(), x[1])
    for p, d, m in ((2, 0, 1.0), (1, 1, 0.5), (math.inf, -1, 0.7), (3, 0, 100.0)):
        same(lambda L, a: L.renorm(a, p, d, m), x)
    raises_like(lambda L, a: L.renorm(a, 2, 0, 1.0), V)
    y = rng.standard_normal((3, 5))
    t = np.sort(rng.random(5))
    same(lambda L, a: L.trapezoid(a), y)
    same(lambda L, a: L.trapz(a, dim=0), y)
    same(lambda L, a, b: L.trapezoid(a, b), y, t)
    same(lambda L, a: L.trapezoid(a, dx=0.3), y)
    same(lambda L, a, b: L.trapz(a, b), y, np.tile(t, (3, 1)))
    same(lambda L, a: L.cumulative_trapezoid(a), y)
    same(lambda L, a, b: L.cumulative_trapezoid(a, b, dim=-1), y, t)
    same(lambda L, a: L.cumulative_trapezoid(a, dx=2.0, dim=0), y)
    for n in (None, 0, 2, 5):  # (PyTorch 1.13's vander has no working backward)
        same(lambda L, a: L.vander(a.detach(), n), V)
        same(lambda L, a: L.vander(a.detach(), n, increasing=True), V)
    same(lambda L, a: L.vander(a, 4, increasing=True) if L is chutney else
         a.unsqueeze(1) ** L.arange(4, dtype=L.float64), V)
    same(lambda L, a: L.vander(a), np.array([1, 2, 3]))
    same(lambda L: L.logspace(-2, 3, 6))
    same(lambda L: L.logspace(0, 10, 11, base=2, dtype=L.float64))


def test_misc_functions():
    same(lambda L, a: L.isin(a, L.tensor([1, 4, 9])), np.array([[1, 2], [4, 5]]))
    same(lambda L, a: L.isin(a, L.tensor([1, 4]), invert=True), np.array([1, 2, 4]))
    same(lambda L, a: L.isreal(a), A)
    assert chutney.is_complex(chutney.zeros(2)) is False and not chutney.zeros(1).is_complex()
    assert chutney.is_nonzero(chutney.tensor([2.0])) and not chutney.tensor(0).is_nonzero()
    raises_like(lambda L, a: L.is_nonzero(a), V)
    raises_like(lambda L: L.is_nonzero(L.zeros(0)))
    c = np.array([1, 1, 2, 2, 3, 1, 1, 2])
    for ri, rc in ((False, False), (True, False), (False, True), (True, True)):
        same(lambda L, a: L.unique_consecutive(a, return_inverse=ri, return_counts=rc), c)
    same(lambda L, a: a.detach().unique_consecutive(), np.array([[1.0, 1.0], [2.0, 1.0]]))
    for idx, shape in (([0, 5, 11, -1], (3, 4)), (7, (2, 2, 2)), ([[1, 2]], 5)):
        got = chutney.unravel_index(chutney.tensor(idx), shape)
        want = np.unravel_index(np.asarray(idx) % math.prod(np.atleast_1d(shape)), shape)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b)
    with pytest.raises(RuntimeError):
        chutney.unravel_index(chutney.tensor([12]), (3, 4))


def test_dtype_rules():
    D = [("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "int8",
          "bool")][0]
    for a in D:
        for b in D:
            ca, cb, ta, tb = (getattr(chutney, a), getattr(chutney, b), getattr(torch, a),
                              getattr(torch, b))
            want = str(torch.promote_types(ta, tb)).split(".")[-1]
            got = str(chutney.promote_types(ca, cb)).split(".")[-1]
            assert got == ("int32" if want == "int16" else want), (a, b)
            assert chutney.can_cast(ca, cb) == torch.can_cast(ta, tb), (a, b)
    cases = [(lambda L: L.zeros(2, dtype=L.int32), 2.5), (lambda L: L.zeros(2, dtype=L.int32),
                                                            lambda L: L.tensor(1.0, dtype=L.float64)),
             (lambda L: L.zeros(2), lambda L: L.tensor(1.0, dtype=L.float64)),
             (lambda L: L.zeros(2, dtype=L.uint8), 5), (lambda L: L.zeros(2, dtype=L.bool), 5),
             (lambda L: L.tensor(1, dtype=L.int8), lambda L: L.tensor(1, dtype=L.int64)),
             (lambda L: L.zeros(2, dtype=L.float16), 1.5), (3, lambda L: L.tensor(True)),
             (lambda L: L.zeros(2, dtype=L.bool), True)]
    for a, b in cases:
        got = chutney.result_type(a(chutney) if callable(a) else a,
                                  b(chutney) if callable(b) else b)
        want = torch.result_type(a(torch) if callable(a) else a, b(torch) if callable(b) else b)
        assert str(got).split(".")[-1] == str(want).split(".")[-1]


def test_global_settings():
    chutney.use_deterministic_algorithms(True)
    assert chutney.are_deterministic_algorithms_enabled()
    chutney.use_deterministic_algorithms(False)
    assert not chutney.are_deterministic_algorithms_enabled()
    chutney.set_default_dtype(chutney.float32)
    assert chutney.get_default_dtype() == chutney.float32
    with pytest.raises(NotImplementedError):
        chutney.set_default_dtype(chutney.float64)
    with pytest.raises(TypeError):
        chutney.set_default_dtype(chutney.int32)
    chutney.set_printoptions(precision=4, profile="default")
    with pytest.raises(NotImplementedError, match="precision"):
        chutney.set_printoptions(precision=2, linewidth=80)
    chutney.manual_seed(123)
    assert chutney.initial_seed() == 123
    s = chutney.seed()
    assert chutney.initial_seed() == s
    chutney.manual_seed(0)


def test_random_by_statistics():
    chutney.manual_seed(3)
    x = chutney.zeros(4, 5)
    r = chutney.randint_like(x, 10)
    assert r.shape == x.shape and r.dtype == x.dtype and 0 <= float(r.min()) and float(r.max()) <= 9
    r = chutney.randint_like(x, 3, 5, dtype=chutney.int64)
    assert r.dtype == chutney.int64 and set(r.reshape(-1).tolist()) <= {3, 4}
    lam = chutney.full((20000,), 4.0)
    p = chutney.poisson(lam).numpy()
    assert abs(p.mean() - 4) < 0.1 and abs(p.var() - 4) < 0.25 and (p == np.round(p)).all()
    chutney.manual_seed(9)
    a = chutney.poisson(lam[:10])
    chutney.manual_seed(9)
    assert chutney.equal(a, chutney.poisson(lam[:10]))
    n = 20000
    t = chutney.empty(n).random_(3, 8).numpy()
    assert set(np.unique(t)) == {3, 4, 5, 6, 7}
    t = chutney.empty(n, dtype=chutney.int64).random_(4).numpy()
    assert set(np.unique(t)) == {0, 1, 2, 3}
    t = chutney.empty(n, dtype=chutney.uint8).random_().numpy()
    assert t.max() > 200
    t = chutney.empty(n, dtype=chutney.float64).log_normal_(0.5, 0.3).numpy()
    assert abs(np.log(t).mean() - 0.5) < 0.02 and abs(np.log(t).std() - 0.3) < 0.02
    t = chutney.empty(n, dtype=chutney.float64).cauchy_(1.0, 2.0).numpy()
    assert abs(np.median(t) - 1.0) < 0.1 and abs(np.percentile(t, 75) - 3.0) < 0.2
    t = chutney.empty(n).geometric_(0.25).numpy()
    assert t.min() == 1 and abs(t.mean() - 4) < 0.15
    with pytest.raises(RuntimeError):
        chutney.empty(3).geometric_(1.5)
    with pytest.raises(RuntimeError):
        chutney.empty(3).random_(5, 2)


def test_view_methods_in_place():
    for L in (chutney, torch):
        x = L.arange(6.0).reshape(1, 2, 3)
        y = x.squeeze_(0)
        assert y is x and tuple(x.shape) == (2, 3)
        assert tuple(x.unsqueeze_(-1).shape) == (2, 3, 1)
        assert tuple(x.transpose_(0, 1).shape) == (3, 2, 1)
        assert tuple(x.swapdims_(0, 2).shape) == (1, 2, 3)
        assert tuple(x.swapaxes_(0, 1).shape) == (2, 1, 3)
        assert tuple(x.squeeze_().shape) == (2, 3)
        assert tuple(x.t_().shape) == (3, 2)
        assert tuple(x.resize_(6).shape) == (6,) and x.resize_((2, 3)) is x
        assert x.swapdims(0, 1).shape == (3, 2)
    # gradient through an in-place squeeze_ of a non-leaf
    a = chutney.tensor([[1.0, 2.0]], requires_grad=True)
    b = a * 3
    b.squeeze_(0)
    (b * chutney.tensor([1.0, 5.0])).sum().backward()
    assert a.grad.tolist() == [[3.0, 15.0]]
    with pytest.raises(RuntimeError):
        chutney.zeros(2, 3).resize_(7)
    d = (chutney.ones(2, requires_grad=True) * 2)
    assert d.detach_() is d and not d.requires_grad


def test_tensor_methods():
    x = chutney.tensor(A)
    assert x.pin_memory() is x and x.is_pinned() is False
    assert x.share_memory_() is x and x.is_shared() is False
    assert x.get_device() == -1 and x.is_sparse is False
    if not chutney.cuda.is_available():
        with pytest.raises(RuntimeError):
            x.cuda()
    assert x.char().dtype == chutney.int8
    with pytest.raises(TypeError):
        x.short()
    same(lambda L, a: a.H, A)
    same(lambda L, a: a.mH * 1, rng.standard_normal((2, 3, 4)))
    with pytest.raises(RuntimeError):
        chutney.tensor(V).mH
    for size in ((3, 1), (4,), (1, 4), (1, 1), (3, 4), ()):
        same(lambda L, a: a.sum_to_size(size), A)
    same(lambda L, a: a.sum_to_size(1, 4), rng.standard_normal((2, 3, 4)))
    raises_like(lambda L, a: a.sum_to_size(2, 4), A)
    for dim, size, step in ((0, 2, 1), (1, 3, 2), (-1, 4, 4), (1, 1, 3)):
        same(lambda L, a: a.unfold(dim, size, step), rng.standard_normal((3, 4, 5)))
    same(lambda L, a: a.unfold(0, 1, 1), np.array(2.0))
    raises_like(lambda L, a: a.unfold(0, 5, 1), V)
    raises_like(lambda L, a: a.unfold(0, 2, 0), V)
    same(lambda L, a: (a * 1).clip_(-0.5, 0.5), A)
    same(lambda L, a: (a * 1).cumsum_(1), A)
    same(lambda L, a: (a * 1).cumprod_(0), A)
    for op in ("eq_", "ne_", "lt_", "le_", "gt_", "ge_"):
        same(lambda L, a: getattr(a.detach() * 1, op)(0.1), np.round(A, 1))
        same(lambda L, a, b: getattr(a.detach() * 1, op)(b.detach()), np.round(A, 0),
             np.round(A[::-1], 0))
    for L in (chutney, torch):
        t = L.tensor([1.0, -2.0, 3.0])
        assert t.apply_(lambda v: v * v + 1) is t and t.tolist() == [2.0, 5.0, 10.0]
    same(lambda L, a: a.detach().pinverse(), A)
    same(lambda L, a: a.detach().slogdet()[1], A[:, :3] + np.eye(3) * 2)


def test_tensor_split_decreasing_indices():
    x = np.arange(5.0)
    for ios in ([3, 1], [-1, 2], [7, 2], [-7, 2], [2, 2, 0], [4, -4]):
        got = [p.tolist() for p in chutney.tensor_split(chutney.tensor(x), ios)]
        want = [p.tolist() for p in torch.tensor_split(torch.tensor(x), ios)]
        assert got == want, (ios, got, want)
    X = rng.standard_normal((2, 5, 3))
    for fn in (lambda L, a: L.hsplit(a, [3, 1]), lambda L, a: L.vsplit(a, [1, 0]),
               lambda L, a: L.dsplit(a, [2, 1])):
        got = [p.shape for p in fn(chutney, chutney.tensor(X))]
        want = [p.shape for p in fn(torch, torch.tensor(X))]
        assert [tuple(s) for s in got] == [tuple(s) for s in want]
        same(lambda L, a: fn(L, a)[-1] * 2 + 0, X)


def test_nansum_nanmean_keepdim_without_dim():
    a = A.copy()
    a[1, 2] = np.nan
    for fn in (lambda L, t: L.nansum(t, dim=None, keepdim=True),
               lambda L, t: L.nanmean(t, dim=None, keepdim=True),
               lambda L, t: t.nansum(keepdim=True), lambda L, t: t.nanmean(keepdim=True),
               lambda L, t: L.nansum(t, None, False)):
        same(fn, a)
    same(lambda L, t: L.nansum(t, keepdim=True), np.array(2.0))


def test_result_dtypes_with_zero_dim_tensors_and_numbers():
    f32 = lambda L: L.ones(3)  # noqa: E731
    i32 = lambda L: L.tensor([4, 6, 9], dtype=L.int32)  # noqa: E731
    u8 = lambda L: L.tensor([4, 6, 9], dtype=L.uint8)  # noqa: E731
    cases = [
        lambda L: L.fmod(f32(L), L.tensor(2., dtype=L.float64)),
        lambda L: L.fmod(i32(L), L.tensor(2)),
        lambda L: L.fmod(i32(L), 2.0),
        lambda L: L.fmod(u8(L), 3),
        lambda L: L.fmod(i32(L), L.tensor([2, 3, 4])),
        lambda L: L.copysign(f32(L).half(), -2.0),
        lambda L: L.copysign(i32(L), -2.0),
        lambda L: L.copysign(i32(L), L.tensor(-2., dtype=L.float64)),
        lambda L: L.copysign(f32(L).half(), L.tensor(-2., dtype=L.float64)),
        lambda L: L.copysign(f32(L), L.tensor([-2.0], dtype=L.float64)),
        lambda L: L.gcd(i32(L), L.tensor(8)),
        lambda L: L.lcm(u8(L), L.tensor(8)),
        lambda L: L.gcd(i32(L), L.tensor([8, 8, 8])),
        lambda L: L.bitwise_and(i32(L), L.tensor(8)),
        lambda L: L.bitwise_or(u8(L), 3),
        lambda L: L.bitwise_xor(L.tensor([True, False]), 1),
        lambda L: L.bitwise_xor(L.tensor([True, False]), True),
        lambda L: L.bitwise_left_shift(i32(L), L.tensor(2)),
        lambda L: L.bitwise_right_shift(u8(L), L.tensor([1, 2, 3])),
    ]
    for i, fn in enumerate(cases):
        c, t = fn(chutney), fn(torch)
        assert str(c.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (i, c.dtype, t.dtype)
        np.testing.assert_array_equal(c.numpy(), t.numpy())


def _inplace_cases():
    return [("dropout_", (1.0, True)), ("alpha_dropout_", (1.0, True)),
            ("feature_dropout_", (1.0, True)), ("feature_alpha_dropout_", (1.0, True)),
            ("selu_", ()), ("celu_", ()), ("rrelu_", ()), ("threshold_", (0.1, -3.0))]


def test_inplace_nn_ops_are_recorded_and_refuse_leaves():
    X = rng.standard_normal((2, 3, 4))
    for name, args in _inplace_cases():
        grads = []
        for L in (chutney, torch):
            leaf = L.tensor(X, requires_grad=True)
            with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
                getattr(L, name)(leaf, *args)
            y = leaf * 1.0
            out = getattr(L, name)(y, *args)
            assert out is y
            y.backward(L.tensor(np.arange(24.0).reshape(2, 3, 4)))
            grads.append(leaf.grad.numpy())
        np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12, atol=1e-12, err_msg=name)
    # not training, p = 0: untouched, a leaf too (aten returns the input)
    for L in (chutney, torch):
        leaf = L.tensor(X, requires_grad=True)
        assert L.dropout_(leaf, 0.5, False) is leaf
        assert L.feature_dropout_(leaf, 0.0, True) is leaf


def test_inplace_dropout_gradient_follows_its_mask():
    x = chutney.tensor(rng.standard_normal((40, 30)), requires_grad=True)
    y = x * 1.0
    chutney.dropout_(y, 0.5, True)
    y.sum().backward()
    kept = (y != 0).numpy()
    assert 0.3 < kept.mean() < 0.7
    np.testing.assert_allclose(x.grad.numpy(), kept * 2.0)


def test_random_fills_refuse_leaves_and_cut_the_gradient():
    for fn in (lambda t: t.random_(0, 5), lambda t: t.log_normal_(), lambda t: t.cauchy_(),
               lambda t: t.geometric_(0.5)):
        for L in (chutney, torch):
            leaf = L.ones(3, dtype=L.float64, requires_grad=True)
            with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
                fn(leaf)
            y = leaf * 2
            fn(y)
            y.sum().backward()
            assert leaf.grad.tolist() == [0.0, 0.0, 0.0]
            with L.no_grad():  # allowed there
                fn(leaf)
    for L in (chutney, torch):
        leaf = L.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="apply_"):
            leaf.apply_(lambda v: v)
        with pytest.raises(RuntimeError, match="map_"):
            leaf.map_(leaf, lambda a, b: a)
        leaf.detach().apply_(lambda v: v + 1)


def test_feature_dropout_2d_is_elementwise():
    for shape in ((400, 50), (100, 40, 3), (50, 40, 2, 2)):
        z = chutney.feature_dropout(chutney.ones(*shape), 0.5, True).numpy()
        zt = torch.feature_dropout(torch.ones(*shape), 0.5, True).numpy()
        for a in (z, zt):
            a = a.reshape(shape[0], shape[1], -1)
            assert (a == a[:, :, :1]).all()  # one draw per (N, C)
            per_row = (a[:, :, 0] != 0).mean(1)
            assert per_row.std() > 0.02 and 0.4 < per_row.mean() < 0.6  # not whole rows
            assert set(np.unique(a)) <= {0.0, 2.0}
    assert chutney.feature_dropout(chutney.ones(3, 4), 1.0, True).tolist() == [[0.0] * 4] * 3


def test_pinverse_rcond():
    M = np.diag([1.0, 1e-3, 1e-7]) @ rng.standard_normal((3, 3))
    B = rng.standard_normal((2, 4, 3))
    for rc in (1e-15, 1e-5, 1e-2, 0.5, 2.0):
        same(lambda L, a: a.detach().pinverse(rcond=rc), M, tol=1e-6)
        same(lambda L, a: L.pinverse(a.detach(), rc), B, tol=1e-8)
    with pytest.raises(NotImplementedError, match="rcond"):
        chutney.pinverse(chutney.tensor(M, requires_grad=True), rcond=1e-2)
    with chutney.no_grad():
        chutney.pinverse(chutney.tensor(M, requires_grad=True), rcond=1e-2)


def test_inner_empty_and_max_pool_empty_stride():
    same(lambda L, a, b: L.inner(a, b), np.zeros((2, 0)), np.zeros((3, 0)))
    same(lambda L, a, b: L.inner(a, b), np.zeros((2, 4, 0)), np.zeros((0,)))
    X = rng.standard_normal((1, 2, 6, 6))
    for stride in ([], (), None, 1):
        same(lambda L, a: L.max_pool2d(a, 2, stride), X)
        same(lambda L, a: L.max_pool2d(a, 2, stride=stride, padding=1), X)
        same(lambda L, a: L.max_pool3d(a, 2, stride), X)
