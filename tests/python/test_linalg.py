"""chutney.linalg against torch.linalg (Debian's PyTorch 1.13): norms, and
inv/solve/det values and gradients (first and second order); the
decompositions by what they reconstruct; what is refused."""

import math

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

rng = np.random.default_rng(5)


def well(n, batch=()):
    a = rng.standard_normal(batch + (n, n))
    return a + n * np.eye(n)


def both(fn, *arrays, tol=1e-9):
    res = []
    for lib in (chutney, torch):
        ts = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = fn(lib, *ts)
        seed = np.random.default_rng(1).standard_normal(tuple(out.shape))
        out.backward(lib.tensor(seed))
        res.append((out.detach().numpy(), [t.grad.numpy() for t in ts]))
    (cv, cg), (tv, tg) = res
    np.testing.assert_allclose(cv, tv, rtol=tol, atol=tol)
    for a, b in zip(cg, tg):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("ord", [2, 1, 3.5, math.inf, -math.inf])
def test_vector_norm(ord):
    x = rng.standard_normal((3, 4, 5))
    both(lambda L, x: L.linalg.vector_norm(x, ord), x)
    both(lambda L, x: L.linalg.vector_norm(x, ord, dim=(0, 2), keepdim=True), x)
    both(lambda L, x: L.linalg.norm(x, ord, dim=1), x)


@pytest.mark.parametrize("ord", ["fro", 1, -1, math.inf, -math.inf])
def test_matrix_norm(ord):
    a = rng.standard_normal((2, 4, 3))
    both(lambda L, a: L.linalg.matrix_norm(a, ord), a)
    both(lambda L, a: L.linalg.matrix_norm(a, ord, dim=(0, 2), keepdim=True), a)


def test_spectral_norms_and_cross():
    a = rng.standard_normal((2, 4, 3))
    for ord in ("nuc", 2, -2):
        c = chutney.linalg.matrix_norm(chutney.tensor(a), ord)
        t = torch.linalg.matrix_norm(torch.tensor(a), ord)
        np.testing.assert_allclose(c.numpy(), t.numpy(), rtol=1e-10)
    both(lambda L, x, y: L.linalg.cross(x, y), rng.standard_normal((4, 3)),
         rng.standard_normal((4, 3)))


def test_inv_solve_det_values_and_gradients():
    both(lambda L, a: L.linalg.inv(a), well(4))
    both(lambda L, a: L.linalg.inv(a), well(3, (2,)))
    both(lambda L, a, b: L.linalg.solve(a, b), well(4), rng.standard_normal((4, 2)))
    both(lambda L, a, b: L.linalg.solve(a, b), well(3, (2,)), rng.standard_normal((2, 3)))
    both(lambda L, a, b: L.linalg.solve(a, b, left=False), well(3), rng.standard_normal((2, 3)))
    both(lambda L, a: L.linalg.det(a), well(4))
    both(lambda L, a: L.linalg.det(a), well(3, (2,)))
    both(lambda L, a: a.inverse().matmul(a.det().reshape(1, 1) * a), well(3))


def test_second_derivatives_through_inv():
    a = well(3)
    res = []
    for lib in (chutney, torch):
        A = lib.tensor(a, requires_grad=True)
        (g,) = lib.autograd.grad(lib.linalg.inv(A).sum(), A, create_graph=True)
        (h,) = lib.autograd.grad((g * g).sum(), A)
        res.append(h.numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-8)


def test_decompositions_and_refusals():
    a = well(4)
    spd = a @ a.T
    A = chutney.tensor(spd)
    L = chutney.linalg.cholesky(A).numpy()
    np.testing.assert_allclose(L @ L.T, spd, rtol=1e-10)
    np.testing.assert_allclose(L, torch.linalg.cholesky(torch.tensor(spd)).numpy(), rtol=1e-10)
    q, r = chutney.linalg.qr(chutney.tensor(a))
    np.testing.assert_allclose(q.numpy() @ r.numpy(), a, rtol=1e-10, atol=1e-12)
    u, s, vh = chutney.linalg.svd(chutney.tensor(a), full_matrices=False)
    np.testing.assert_allclose((u.numpy() * s.numpy()) @ vh.numpy(), a, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s.numpy(), torch.linalg.svdvals(torch.tensor(a)).numpy(), rtol=1e-10)
    w, v = chutney.linalg.eigh(A)
    np.testing.assert_allclose(w.numpy(), torch.linalg.eigvalsh(torch.tensor(spd)).numpy(),
                               rtol=1e-10)
    sign, logdet = chutney.linalg.slogdet(chutney.tensor(a))
    ts, tl = torch.linalg.slogdet(torch.tensor(a))
    assert sign.item() == ts.item() and math.isclose(logdet.item(), tl.item(), rel_tol=1e-12)
    with pytest.raises(NotImplementedError):
        chutney.linalg.svd(chutney.tensor(a, requires_grad=True))
    with chutney.no_grad():
        chutney.linalg.svd(chutney.tensor(a, requires_grad=True))
    with pytest.raises(RuntimeError, match="inv"):
        chutney.linalg.inv(chutney.zeros(3, 3, dtype=chutney.float64))
    with pytest.raises(RuntimeError, match="square"):
        chutney.linalg.det(chutney.ones(2, 3))


def test_solve_broadcasting_singular_det_and_zero_norms():
    for ashape, bshape in (((2, 3, 3), (3,)), ((2, 3, 3), (3, 4)), ((4, 3, 3), (3, 3)),
                           ((2, 1, 3, 3), (5, 3, 4)), ((3, 3), (2, 3, 4)), ((2, 3, 3), (2, 3))):
        a = rng.standard_normal(ashape) + 3 * np.eye(3)
        both(lambda L, a, b: L.linalg.solve(a, b), a, rng.standard_normal(bshape))
    # a singular matrix: det's gradient is the cofactor matrix (PyTorch 1.13 gives zeros)
    for a in (np.array([[1.0, 2.0], [2.0, 4.0]]),
              np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])):
        A = chutney.tensor(a, requires_grad=True)
        chutney.linalg.det(A).backward()
        n = a.shape[0]
        cof = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
                         for j in range(n)] for i in range(n)])
        np.testing.assert_allclose(A.grad.numpy(), cof, atol=1e-12)
    for ord in (3, 0.5, -1):
        both(lambda L, x: L.linalg.vector_norm(x, ord), np.zeros(3))
        both(lambda L, x: L.linalg.vector_norm(x, ord, dim=1), np.array([[0.0, 2.0], [1.0, 3.0]]))
    k = chutney.linalg.vector_norm(chutney.ones(2, 3), keepdim=True)
    assert tuple(k.shape) == (1, 1)
    with pytest.raises(RuntimeError):
        chutney.linalg.svdvals(chutney.tensor([[1, 2], [3, 4]]))
