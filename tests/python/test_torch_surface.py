"""chutney/_torch_functions_more.py against PyTorch: the aliases and in-place
forms, aten spellings of nn ops, legacy linear algebra, scatters into views,
windows and queries; values, gradients, dtypes and errors. Skipped without
torch."""

import math
import warnings

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
import torch_pairs  # noqa: E402
from torch_pairs import raises_both  # noqa: E402


def same(fn, *arrays, **kw):
    """torch_pairs.same, the result dtypes too."""
    torch_pairs.same(fn, *arrays, check_dtypes=True, **kw)

rng = np.random.default_rng(11)
pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated:UserWarning",
                                        "ignore:index_reduce:UserWarning")



A = rng.standard_normal((3, 4))
B = rng.standard_normal((3, 4))
V3 = rng.standard_normal(3)
V4 = rng.standard_normal(4)
I64 = np.array([5, -3, 12, 0, -128], dtype=np.int64)


def spd(n, batch=()):
    m = rng.standard_normal(batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def test_aliases_and_queries():
    same(lambda L, a, b: L.concatenate([a, b], 1), A, B)
    same(lambda L, a, b: L.concatenate((a, b)), A, B)
    same(lambda L, a, b: L.greater_equal(a, b), A, B)
    same(lambda L, a, b: a.less_equal(b), A, B)
    same(lambda L, a: L.fix(a * 3), A)
    same(lambda L, a: a.fix() + a, A)
    same(lambda L, a: L.adjoint(a), A)
    same(lambda L, a: a.adjoint().exp(), A)
    same(lambda L, a: L.split_with_sizes(a, [1, 3], 1), A)
    same(lambda L, a: a.unsafe_split(2, 1), A)
    same(lambda L, a: L.unsafe_chunk(a, 2, 0), A)
    same(lambda L, a: a.conj() * 2, A)
    same(lambda L, a: L.resolve_conj(a).resolve_neg().real, A)
    for lib in (torch, chutney):
        x = lib.ones(2, 3)
        assert not lib.is_conj(x) and not x.is_neg() and not x.is_inference()
        assert lib.is_same_size(x, lib.zeros(2, 3)) and not x.is_same_size(lib.zeros(3))
        assert lib.is_signed(x) and not lib.ones(2, dtype=lib.uint8).is_signed()
        assert not x.is_meta and not x.is_quantized and not x.is_mkldnn
        assert x.layout == lib.strided
        assert x.to_dense() is x
        with pytest.raises(RuntimeError):
            lib.imag(x)
        assert lib.typename(x) == "torch.FloatTensor"
        assert lib.version.cuda is None or isinstance(lib.version.cuda, str)
        assert lib.get_num_interop_threads() >= 1
    assert chutney.typename(3) == torch.typename(3) == "int"
    raises_both(lambda L, a: L.adjoint(a), V4)


def test_inplace_forms():
    pos = np.abs(A) + 0.5
    for name in ("tan", "sinh", "cosh", "log2", "log10", "exp2", "deg2rad", "rad2deg", "erfc",
                 "lgamma", "digamma", "i0", "fix", "absolute", "negative", "sgn", "sinc",
                 "asinh", "atan"):
        c, t = chutney.tensor(pos), torch.tensor(pos)
        assert getattr(c, name + "_")() is c
        getattr(t, name + "_")()
        np.testing.assert_allclose(c.numpy(), t.numpy(), rtol=1e-7, atol=1e-12, err_msg=name)
    for name, arg in (("multiply", 2.0), ("subtract", 1.5), ("divide", 4.0), ("remainder", 0.7),
                      ("floor_divide", 0.3), ("fmod", 0.4),
                      ("copysign", -1.0), ("polygamma", 1), ("mvlgamma", 1)):
        c, t = chutney.tensor(pos + 1), torch.tensor(pos + 1)
        getattr(c, name + "_")(arg)
        getattr(t, name + "_")(arg)
        # (the library's remainder by a Python float rounds it to float32)
        np.testing.assert_allclose(c.numpy(), t.numpy(), rtol=1e-5, atol=1e-7, err_msg=name)
    for name in ("greater", "less", "greater_equal", "less_equal", "not_equal"):
        c, t = chutney.tensor(A), torch.tensor(A)
        getattr(c, name + "_")(0.1)
        getattr(t, name + "_")(0.1)
        np.testing.assert_array_equal(c.numpy(), t.numpy())
    for name in ("abs_", "sqrt_", "exp2_", "clamp_min_", "trunc_"):
        c, t = chutney.tensor(pos), torch.tensor(pos)
        args = (1.0,) if name == "clamp_min_" else ()
        assert getattr(chutney, name)(c, *args) is c
        getattr(torch, name)(t, *args)
        np.testing.assert_allclose(c.numpy(), t.numpy(), rtol=1e-12)
    c, t = chutney.tensor(A), torch.tensor(A)
    c.hypot_(chutney.tensor(B))
    t.hypot_(torch.tensor(B))
    np.testing.assert_allclose(c.numpy(), t.numpy(), rtol=1e-12)
    same(lambda L, a: L.fill(a, 2.5), A)
    c = chutney.tensor(A)
    chutney.zero_(c)
    assert float(c.abs().sum()) == 0
    with pytest.raises(RuntimeError):  # float_power_ needs a float64 base
        chutney.ones(2).float_power_(2)
    c = chutney.tensor(pos)
    c.float_power_(2)
    np.testing.assert_allclose(c.numpy(), pos ** 2)
    c = chutney.ones(2, 3)
    c.resize_as_(chutney.zeros(3, 2))
    assert tuple(c.shape) == (3, 2)


def test_elementwise():
    x = np.array([-2.5, -0.0, 0.0, 1.5, np.inf, -np.inf, np.nan])
    same(lambda L, a: L.angle(a), x)
    same(lambda L, a: a.angle(), np.array([1, -2, 0]))
    same(lambda L, a, b: L.copysign(a, b), A, B)
    same(lambda L, a: a.copysign(-0.0), A)
    same(lambda L, a: L.copysign(a, 2), np.array([1, -2, 3]))
    same(lambda L, a: L.erfc(a * 3), A)
    same(lambda L, a: a.i0(), A * 4, tol=1e-6, gtol=1e-6)
    same(lambda L, a: L.frexp(a * 1000), A)
    same(lambda L, a: a.frexp(), x[:4])
    same(lambda L, a, b: L.nextafter(a.detach(), b.detach()), A, B)
    same(lambda L, a: a.detach().float().nextafter(L.tensor(np.inf)), A)
    raises_both(lambda L, a: L.frexp(a), I64)


def test_bitwise():
    j = np.array([3, 1, 7, 0, 255], dtype=np.int64)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        same(lambda L, a, b: getattr(L, name)(a, b), I64, j)
        same(lambda L, a: getattr(a, name)(6), I64)
        same(lambda L, a: getattr(L, name)(a, a.logical_not()), np.array([True, False]))
        same(lambda L, a: getattr(L, name)(a.to(L.uint8), 129), j)
    same(lambda L, a: L.bitwise_not(a), I64)
    same(lambda L, a: a.to(L.uint8).bitwise_not(), j)
    same(lambda L, a: L.bitwise_not(a), np.array([True, False]))
    same(lambda L, a, b: L.bitwise_left_shift(a, b), I64, np.array([0, 1, 2, 3, 4]))
    same(lambda L, a: a.bitwise_right_shift(2), I64)
    same(lambda L, a: L.bitwise_left_shift(a.to(L.int32), 30), I64)
    same(lambda L, a: L.bitwise_right_shift(a.to(L.int8), 3), np.array([-100, 100, 5]))
    c = chutney.tensor(I64)
    c.bitwise_and_(12)
    np.testing.assert_array_equal(c.numpy(), I64 & 12)
    raises_both(lambda L, a: L.bitwise_and(a, a), A)
    raises_both(lambda L, a: L.bitwise_not(a), A)
    raises_both(lambda L, a: L.bitwise_left_shift(a, 1), A)


def test_products_and_norms():
    b1, b2 = rng.standard_normal((5, 3, 2)), rng.standard_normal((5, 2, 4))
    same(lambda L, m, x, y: L.addbmm(m, x, y), A, b1, b2)
    same(lambda L, m, x, y: m.addbmm(x, y, beta=0.5, alpha=2), A, b1, b2)
    same(lambda L, m, x, y: L.addbmm(m, x, y, beta=0), V4, b1, b2)
    same(lambda L, m, x, y: L.addr(m, x, y, alpha=3), A, V3, V4)
    same(lambda L, m, x, y: m.addr(x, y, beta=0), A, V3, V4)
    c = chutney.tensor(A)
    c.addr_(chutney.tensor(V3), chutney.tensor(V4))
    np.testing.assert_allclose(c.numpy(), A + np.outer(V3, V4))
    c.addmm_(chutney.tensor(A[:, :2]), chutney.tensor(A[:2]))
    same(lambda L, a, b: L.dist(a, b), A, B)
    same(lambda L, a, b: a.dist(b, 1), A, B)
    same(lambda L, a, b: L.dist(a, b, math.inf), A, B)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same(lambda L, a, b: L.cross(a, b), x, y)
        same(lambda L, a, b: a.cross(b, dim=1), x, y)
    same(lambda L, a: L.frobenius_norm(a, (0, 1)), A)
    same(lambda L, a: L.frobenius_norm(a, 1, True), A)
    same(lambda L, a: L.nuclear_norm(a), A, tol=1e-8, gtol=1e-6)


def test_legacy_linalg():
    S = spd(3)
    L3 = np.linalg.cholesky(S)
    same(lambda L, a: L.logdet(a), S, tol=1e-8, gtol=1e-6)
    same(lambda L, a: L.logdet(a), -S, tol=1e-8)  # negative determinant: NaN
    # (values only: chutney.linalg.cholesky has no gradient yet)
    same(lambda L, a: L.cholesky(a.detach()), S, tol=1e-8)
    same(lambda L, a: a.detach().cholesky(upper=True), spd(3, (2,)), tol=1e-8)
    rhs = rng.standard_normal((3, 2))
    same(lambda L, b, f: L.cholesky_solve(b, f), rhs, L3, tol=1e-8, gtol=1e-6)
    same(lambda L, b, f: b.cholesky_solve(f, upper=True), rhs, L3.T.copy(), tol=1e-8,
         gtol=1e-6)
    same(lambda L, f: L.cholesky_inverse(f), L3, tol=1e-8, gtol=1e-6)
    same(lambda L, f: f.cholesky_inverse(True), L3.T.copy(), tol=1e-8, gtol=1e-6)
    T = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    for kw in ({}, dict(upper=False), dict(transpose=True), dict(unitriangular=True)):
        same(lambda L, b, a: L.triangular_solve(b, a, **kw), rhs, T, tol=1e-8, gtol=1e-6)
    M = rng.standard_normal((4, 3))
    qr = lambda L, a: tuple(L.qr(a))  # noqa: E731
    c, t = qr(chutney, chutney.tensor(M)), qr(torch, torch.tensor(M))
    np.testing.assert_allclose(np.abs(c[1].numpy()), np.abs(t[1].numpy()), atol=1e-10)
    np.testing.assert_allclose((c[0] @ c[1]).numpy(), M, atol=1e-10)
    assert tuple(chutney.qr(chutney.tensor(M), some=False)[0].shape) == (4, 4)
    u, s, v = chutney.svd(chutney.tensor(M))
    assert tuple(u.shape) == (4, 3) and tuple(v.shape) == (3, 3)
    np.testing.assert_allclose((u * s @ v.t()).numpy(), M, atol=1e-10)
    np.testing.assert_allclose(s.numpy(), torch.svd(torch.tensor(M))[1].numpy(), atol=1e-10)
    u, s, v = chutney.tensor(M).svd(some=False, compute_uv=False)
    assert tuple(u.shape) == (4, 4) and float(u.abs().sum()) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = torch.symeig(torch.tensor(S))[0].numpy()
    np.testing.assert_allclose(chutney.symeig(chutney.tensor(S))[0].numpy(), w, atol=1e-10)
    w, vec = chutney.tensor(S).symeig(eigenvectors=True)
    np.testing.assert_allclose((vec @ chutney.diag(w) @ vec.t()).numpy(), S, atol=1e-10)
    raises_both(lambda L, a: L.cholesky(a), V3)


def test_statistics():
    m = np.array([[1, 2, 2, 3, 3], [5, 5, 1, 1, 0], [4, 4, 4, 4, 4]], dtype=np.int64)
    same(lambda L, a: L.mode(a), m)
    same(lambda L, a: a.mode(0), m)
    same(lambda L, a: L.mode(a, 1, True), rng.integers(0, 3, (4, 7)).astype(float))
    same(lambda L, a: a.mode(), np.array([1.0, 2.0, 2.0, 1.0, 3.0]))  # gradient to the index
    xn = A.copy()
    xn[0, 1] = xn[2, 0] = xn[2, 3] = np.nan
    same(lambda L, a: L.nanquantile(a, 0.3), xn)
    same(lambda L, a: a.nanquantile(0.7, dim=1, keepdim=True), xn)
    same(lambda L, a: L.nanquantile(a, L.tensor([0.1, 0.5, 1.0], dtype=L.float64), dim=0), xn)
    for interp in ("lower", "higher", "midpoint", "nearest"):
        same(lambda L, a: L.nanquantile(a, 0.4, 1, interpolation=interp), xn)
    allnan = np.full((2, 3), np.nan)
    same(lambda L, a: L.nanquantile(a, 0.5, 1), allnan)
    d = rng.standard_normal(200)
    same(lambda L, a: L.histogram(a.detach(), 7), d)
    same(lambda L, a: a.detach().float().histogram(5, range=(-1.0, 1.0), density=True), d,
         tol=1e-6)
    same(lambda L, a, w: L.histogram(a.detach(), L.tensor([-2.0, -0.5, 0, 3], dtype=L.float64),
                                     weight=w.detach()), d, np.abs(d))
    h = chutney.histogramdd(chutney.tensor(rng.standard_normal((50, 2))), [3, 4])
    assert tuple(h.hist.shape) == (3, 4) and float(h.hist.sum()) == 50
    raises_both(lambda L, a: L.histogram(a, 3), I64)
    raises_both(lambda L, a: L.nanquantile(a, 0.5), I64)


def test_gradient():
    for kw in ({}, dict(spacing=2.0), dict(spacing=[1.5, 0.5]), dict(edge_order=2),
               dict(dim=1, spacing=[np.array([0.0, 1, 3, 4])]),
               dict(dim=0, edge_order=2, spacing=[np.array([0.0, 1, 3])])):
        def fn(L, a, kw=kw):
            k = {n: ([L.tensor(s) if isinstance(s, np.ndarray) else s for s in v]
                     if isinstance(v, list) else v) for n, v in kw.items()}
            return L.gradient(a, **k)
        same(fn, A)
    raises_both(lambda L, a: L.gradient(a, edge_order=3), A)


def test_index_ops():
    src = rng.standard_normal((3, 3))
    idx = np.array([0, 2, 0])
    for reduce in ("prod", "mean", "amax", "amin"):
        same(lambda L, a, s, i: L.index_reduce(a, 1, i, s, reduce), A, src, idx)
        same(lambda L, a, s, i: a.t().index_reduce(0, i, s.t(), reduce, include_self=False),
             A, src, idx)
    same(lambda L, a, s: L.put(a, L.tensor([0, 5, -1]), s.reshape(-1)[:3]), A, src)
    same(lambda L, a, s: a.put(L.tensor([1, 1, 11]), s.reshape(-1)[:3], accumulate=True),
         A, src)
    c, t = chutney.tensor(A), torch.tensor(A)
    c.put_(chutney.tensor([2, 3]), chutney.tensor([9.0, 8.0], dtype=chutney.float64))
    t.put_(torch.tensor([2, 3]), torch.tensor([9.0, 8.0], dtype=torch.float64))
    np.testing.assert_array_equal(c.numpy(), t.numpy())
    raises_both(lambda L, a: L.index_reduce(a, 0, L.tensor([0]), a[:1], "sum"), A)
    raises_both(lambda L, a: L.put(a, L.tensor([0, 1]), a.reshape(-1)[:3]), A)


def test_view_scatters_and_copies():
    X = rng.standard_normal((3, 4, 5))
    same(lambda L, a, s: L.select_scatter(a, s, 1, -1), X, rng.standard_normal((3, 5)))
    same(lambda L, a, s: a.slice_scatter(s, 2, 1, 5, 2), X, rng.standard_normal((3, 4, 2)))
    same(lambda L, a, s: L.slice_scatter(a, s, 0, 0, 3, 1), X, rng.standard_normal((3, 4, 5)))
    same(lambda L, a, s: L.diagonal_scatter(a, s, 1, 1, 2), X, rng.standard_normal((3, 4)))
    same(lambda L, a, s: a.diagonal_scatter(s), A, rng.standard_normal(3))
    # (values: PyTorch 1.13's gradient of as_strided_scatter reads uninitialised memory)
    same(lambda L, a, s: L.as_strided_scatter(a.detach(), s.detach(), (2, 2), (1, 3), 1), A,
         rng.standard_normal((2, 2)))
    a = chutney.tensor(A, requires_grad=True)
    s = chutney.ones(2, 2, dtype=chutney.float64, requires_grad=True)
    (chutney.as_strided_scatter(a, s, (2, 2), (1, 3), 1) * chutney.tensor(A)).sum().backward()
    want = A.copy().reshape(-1)
    want[[1, 2, 4, 5]] = 0
    np.testing.assert_array_equal(a.grad.numpy().reshape(-1), want)
    np.testing.assert_array_equal(s.grad.numpy(), A.reshape(-1)[[1, 4, 2, 5]].reshape(2, 2))
    same(lambda L, a: L.as_strided(a.detach(), (3, 3), (1, 1)), A)  # overlapping
    same(lambda L, a: a.as_strided((2, 2, 2), (6, 1, 2), 1), A)
    c = chutney.tensor(A)
    c.as_strided_((2,), (5,))
    np.testing.assert_array_equal(c.numpy(), A.reshape(-1)[[0, 5]])
    same(lambda L, a: L.narrow_copy(a.detach(), 1, 1, 2), A)  # (no gradient in PyTorch)
    same(lambda L, a: a.detach().narrow_copy(0, 2, 1), A)
    same(lambda L, a: L.select_copy(a, 1, 2), X)
    same(lambda L, a: L.slice_copy(a, 1, 1, None, 2), X)
    same(lambda L, a: L.diagonal_copy(a, 0, 1, 2), X)
    same(lambda L, a: L.permute_copy(a, (2, 0, 1)), X)
    same(lambda L, a: L.transpose_copy(a, 0, 2), X)
    same(lambda L, a: L.t_copy(a), A)
    same(lambda L, a: L.unsqueeze_copy(a, 1), A)
    same(lambda L, a: L.view_copy(a, (4, 3)), A)
    same(lambda L, a: L.expand_copy(a, (2, 3, 4)), A)
    same(lambda L, a: L.unbind_copy(a, 1), A)
    same(lambda L, a: L.split_copy(a, 2, 1), A)
    same(lambda L, a: L.unfold_copy(a, 1, 2, 1), A)
    assert chutney.alias_copy(chutney.ones(2)).tolist() == [1.0, 1.0]
    raises_both(lambda L, a, s: L.select_scatter(a, s, 0, 0), A, V3)
    raises_both(lambda L, a: L.as_strided(a, (4, 4), (4, 1)), A)


def test_creation():
    for lib in (torch, chutney):
        x = lib.asarray([1, 2, 3])
        assert x.dtype == lib.int64 and x.tolist() == [1, 2, 3]
        y = lib.asarray(x, dtype=lib.float64)
        assert y.dtype == lib.float64
        assert lib.asarray(x) is x and lib.asarray(x, copy=True) is not x
        assert lib.asarray([1.5], requires_grad=True).requires_grad
        b = np.array([1.5, -2.0, 3.25], dtype=np.float32).tobytes()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = lib.frombuffer(bytearray(b), dtype=lib.float32, offset=4)
        assert f.tolist() == [-2.0, 3.25]
        assert tuple(lib.empty_strided((2, 3), (3, 1)).shape) == (2, 3)
        assert tuple(lib.ones(2).new_empty_strided((4,), (1,)).shape) == (4,)
        s = lib.scalar_tensor(3)
        assert s.dtype == lib.float32 and s.dim() == 0 and s.item() == 3
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert lib.range(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75, 2.0]
            assert lib.range(0, 3, dtype=lib.int64).dtype == lib.int64
        n = lib.ones(2, dtype=lib.int32)
        assert n.new(2, 3).shape == (2, 3) and n.new([1, 2]).dtype == lib.int32
        assert n.new().numel() == 0
    with pytest.warns(UserWarning):
        chutney.range(0, 1)
    for name in ("hann_window", "hamming_window", "blackman_window", "bartlett_window",
                 "kaiser_window"):
        for n in (0, 1, 2, 7, 10):
            for periodic in (True, False):
                c = getattr(chutney, name)(n, periodic, dtype=chutney.float64)
                t = getattr(torch, name)(n, periodic, dtype=torch.float64)
                np.testing.assert_allclose(c.numpy(), t.numpy(), atol=1e-12, err_msg=name)
        assert getattr(chutney, name)(4).dtype == chutney.float32
    with pytest.raises(RuntimeError):
        chutney.hann_window(-1)
    chutney.manual_seed(0)
    draws = chutney.binomial(chutney.full((4000,), 10.0), chutney.full((4000,), 0.3))
    assert abs(draws.mean().item() - 3.0) < 0.15 and draws.dtype == chutney.float32


def _nn_pair(fn, *arrays, tol=1e-10):
    same(fn, *arrays, tol=tol, gtol=max(tol, 1e-8))


def test_aten_nn_spellings():
    x = rng.standard_normal((2, 3, 8))
    w = rng.standard_normal((4, 3, 3))
    _nn_pair(lambda L, a, k: L.conv1d(a, k, None, 1, 1), x, w)
    _nn_pair(lambda L, a, k: L.convolution(a, k, None, [2], [1], [1], False, [0], 1), x, w)
    _nn_pair(lambda L, a, k: L.convolution(a, k, None, [1], [0], [1], True,
                                           [0], 1), rng.standard_normal((2, 4, 5)), w)
    _nn_pair(lambda L, a: L.max_pool1d(a, 2), x)
    _nn_pair(lambda L, a: L.max_pool1d_with_indices(a, 3, 2, 1), x)
    _nn_pair(lambda L, a: L.adaptive_max_pool1d(a, 3), x)
    _nn_pair(lambda L, a: L.avg_pool1d(a, 2), x)
    _nn_pair(lambda L, a: L.adaptive_avg_pool1d(a, 3), x)
    _nn_pair(lambda L, a: L.constant_pad_nd(a, (1, 2), 0.5), x)
    _nn_pair(lambda L, a: L.layer_norm(a, (8,), None, None, 1e-5, False), x)
    _nn_pair(lambda L, a, g: L.group_norm(a, 3, g, None, 1e-5, False), x, V3)
    _nn_pair(lambda L, a, g, b: L.batch_norm(a, g, b, None, None, True, 0.1, 1e-5, False),
             x, V3, V3 * 2)
    _nn_pair(lambda L, a: L.instance_norm(a, None, None, None, None, True, 0.1, 1e-5, False),
             x)
    _nn_pair(lambda L, wt: L.embedding(wt, L.tensor([[0, 2], [1, 1]])), A)
    _nn_pair(lambda L, a: L.dropout(a, 0.5, False), A)
    _nn_pair(lambda L, a: L.feature_dropout(a, 0.3, False), A)
    for lib in (torch, chutney):
        lib.manual_seed(0)
        y = lib.dropout(lib.ones(1000), 0.5, True)
        assert 400 < int((y == 0).sum()) < 600 and float(y.max()) == 2.0
        z = lib.feature_dropout(lib.ones(100, 50, 2, 2), 0.5, True)
        assert bool((z.amax((2, 3)) == z.amin((2, 3))).all())
        a = lib.ones(4)
        lib.dropout_(a, 0.0, True)
        assert a.tolist() == [1.0] * 4
    for name in ("celu", "selu", "hardshrink"):
        _nn_pair(lambda L, a: getattr(L, name)(a), A)
    _nn_pair(lambda L, a: a.hardshrink(0.3), A)
    _nn_pair(lambda L, a: L.threshold(a, 0.1, -1.0), A)
    _nn_pair(lambda L, a: L.rrelu(a), A)
    _nn_pair(lambda L, a, p: L.prelu(a, p), x, V3)
    _nn_pair(lambda L, a, p: a.prelu(p), x, V3)
    _nn_pair(lambda L, a: L.pixel_shuffle(a, 2), rng.standard_normal((1, 4, 2, 3)))
    _nn_pair(lambda L, a, b: L.cosine_similarity(a, b), A, B)
    _nn_pair(lambda L, a, b: L.pairwise_distance(a, b), A, B)
    _nn_pair(lambda L, a: L.pdist(a), A)
    c = chutney.tensor(A)
    chutney.selu_(c)
    np.testing.assert_allclose(c.numpy(), torch.selu(torch.tensor(A)).numpy())
    t01 = np.array([1.0, 0.0, 1.0])
    sgn = np.array([1.0, -1.0, 1.0])
    for red in (0, 1, 2):
        _nn_pair(lambda L, a, b: L.kl_div(a.log_softmax(1), b.softmax(1), red), A, B)
        _nn_pair(lambda L, a, t: L.binary_cross_entropy_with_logits(a, t, None, None, red),
                 V3, t01)
        _nn_pair(lambda L, a, b, t: L.cosine_embedding_loss(a, b, t, 0.1, red), A, B, sgn)
        _nn_pair(lambda L, a, b, t: L.margin_ranking_loss(a, b, t, 0.2, red), V3, V3[::-1].copy(),
                 sgn)
        _nn_pair(lambda L, a, t: L.hinge_embedding_loss(a, t, 1.0, red), V3, sgn)
        _nn_pair(lambda L, a, b: L.triplet_margin_loss(a, b, b * 2, 1.0, 2, 1e-6, False, red),
                 A, B)
        _nn_pair(lambda L, a, t: L.poisson_nll_loss(a, t, True, False, 1e-8, red), V3, t01)
    with pytest.raises(RuntimeError):
        chutney.kl_div(chutney.ones(2), chutney.ones(2), 7)
    th = np.array([[[1.0, 0.2, 0.1], [-0.1, 0.9, 0.0]]])
    _nn_pair(lambda L, t: L.affine_grid_generator(t, (1, 1, 3, 4), False), th)
    img = rng.standard_normal((1, 2, 4, 5))
    grid = rng.uniform(-1.1, 1.1, (1, 3, 3, 2))
    for mode_, pad in ((0, 0), (1, 1), (0, 2)):
        _nn_pair(lambda L, a, g: L.grid_sampler(a, g, mode_, pad, False), img, grid)
    lp = rng.standard_normal((6, 2, 4))
    _nn_pair(lambda L, a: L.ctc_loss(a.log_softmax(2), L.tensor([[1, 2], [3, 3]]),
                                     L.tensor([6, 5]), L.tensor([2, 2]), 0, 1, False), lp,
             tol=1e-8)


def test_rnn_cells():
    H = 4
    x, h, cst = rng.standard_normal((2, 3)), rng.standard_normal((2, H)), \
        rng.standard_normal((2, H))
    for name, gates in (("rnn_tanh_cell", 1), ("rnn_relu_cell", 1), ("gru_cell", 3),
                        ("lstm_cell", 4)):
        wi, wh = rng.standard_normal((gates * H, 3)), rng.standard_normal((gates * H, H))
        bi, bh = rng.standard_normal(gates * H), rng.standard_normal(gates * H)

        def fn(L, x, h, c, wi, wh, bi, bh, name=name):
            hx = (h, c) if name == "lstm_cell" else h
            out = getattr(L, name)(x, hx, wi, wh, bi, bh)
            return out[0] * 2 + out[1] if name == "lstm_cell" else out
        same(fn, x, h, cst, wi, wh, bi, bh)


def test_settings_and_flags():
    for lib in (torch, chutney):
        lib.use_deterministic_algorithms(False)  # (other tests may leave it on)
        lib.set_warn_always(True)
        assert lib.is_warn_always_enabled()
        lib.set_warn_always(False)
        assert lib.get_deterministic_debug_mode() == 0
        lib.set_deterministic_debug_mode("warn")
        assert lib.get_deterministic_debug_mode() == 1
        lib.set_deterministic_debug_mode(0)
        assert not lib.are_deterministic_algorithms_enabled()
        assert not lib.is_inference_mode_enabled()
        assert isinstance(lib.has_cuda, bool) and isinstance(lib.has_lapack, bool)
        lib.set_default_tensor_type(lib.FloatTensor)
        lib.set_default_tensor_type("torch.FloatTensor")
        lib.set_anomaly_enabled(False)
        assert lib.is_anomaly_check_nan_enabled()
    with pytest.raises(NotImplementedError):
        chutney.set_default_tensor_type(chutney.DoubleTensor)
    with pytest.raises(RuntimeError):
        chutney.set_num_interop_threads(0)


def test_map_and_embedding_renorm():
    for lib in (torch, chutney):
        a = lib.tensor([1.0, 2.0, 3.0])
        a.map_(lib.tensor([10.0, 20.0, 30.0]), lambda u, v: u * v + 1)
        assert a.tolist() == [11.0, 41.0, 91.0]
        a.map2_(lib.tensor(1.0), lib.tensor([0.0, 1.0, 2.0]), lambda u, v, w: u - v - w)
        assert a.tolist() == [10.0, 39.0, 88.0]
    c, t = chutney.tensor(A * 3), torch.tensor(A * 3)
    chutney.embedding_renorm_(c, chutney.tensor([0, 2, 2]), 1.0, 2.0)
    torch.embedding_renorm_(t, torch.tensor([0, 2, 2]), 1.0, 2.0)
    np.testing.assert_allclose(c.numpy(), t.numpy(), rtol=1e-6)
