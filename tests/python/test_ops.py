"""Operators and ops against NumPy: arithmetic with scalars and broadcasting,
type promotion, comparisons, in-place forms, reductions, shapes, joins."""

import pytest

import chutney

np = pytest.importorskip("numpy")


def T(a):
    return chutney.tensor(np.asarray(a))


def check(t, ref, rtol=1e-5, atol=1e-6):
    ref = np.asarray(ref)
    got = t.numpy()
    assert got.shape == ref.shape, (got.shape, ref.shape)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)


rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal((4,)).astype(np.float32)
P = (np.abs(A) + 0.5).astype(np.float32)


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**"])
def test_binary_tensor_tensor_broadcast(op):
    a, b = (P, np.abs(B) + 0.5) if op == "**" else (A, B)
    check(eval(f"T(a) {op} T(b)"), eval(f"a {op} b"), rtol=1e-4)
    check(eval(f"T(b) {op} T(a)"), eval(f"b {op} a"), rtol=1e-4)


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**", "//", "%"])
@pytest.mark.parametrize("s", [2, 0.5, -3])
def test_binary_with_python_scalars(op, s):
    a = P if op == "**" else A
    check(eval(f"T(a) {op} s"), eval(f"a {op} np.float32(s)"), rtol=1e-4, atol=1e-5)
    if op != "**" or s > 0:
        base = P if op in ("**",) else a
        check(eval(f"s {op} T(base)"), eval(f"np.float32(s) {op} base"), rtol=1e-4, atol=1e-5)


def test_type_promotion_like_torch():
    i = chutney.tensor([1, 2, 3])
    f = chutney.tensor([1.0, 2.0, 3.0])
    assert (i + 1).dtype == chutney.int64
    assert (i + 1.5).dtype == chutney.float32
    assert (i + 2.0).dtype == chutney.float32  # a float number makes a float tensor
    assert (i + 2.0).tolist() == [3.0, 4.0, 5.0]
    assert (i / 2).dtype == chutney.float32
    assert (i / 2).tolist() == [0.5, 1.0, 1.5]
    assert (i * f).dtype == chutney.float32
    assert (f.double() + f).dtype == chutney.float64
    assert (f + chutney.tensor(1.0, dtype=chutney.float64)).dtype == chutney.float32
    assert (chutney.tensor([True, False]) + 1).dtype == chutney.int64
    assert (i.int() + 5).dtype == chutney.int32
    h = f.half()
    assert (h * 2.5).dtype == chutney.float16
    assert (i // 2).tolist() == [0, 1, 1] and (i // 2).dtype == chutney.int64
    assert (-i % 2).tolist() == [1, 0, 1]
    assert ((i > 1) & (i < 3)).tolist() == [False, True, False]
    assert ((i > 2) | (i < 2)).tolist() == [True, False, True]
    assert (~(i > 1)).tolist() == [True, False, False]
    assert (np.float32(2.0) * f).tolist() == [2.0, 4.0, 6.0]
    assert (f * np.int64(2)).tolist() == [2.0, 4.0, 6.0]


def test_unary_operators():
    check(-T(A), -A)
    check(abs(T(A)), np.abs(A))
    assert +T(A) is not None


def test_comparisons():
    for op in ["<", "<=", ">", ">=", "==", "!="]:
        got = eval(f"T(A) {op} T(B)")
        assert got.dtype == chutney.bool
        np.testing.assert_array_equal(got.numpy(), eval(f"A {op} B"))
        np.testing.assert_array_equal(eval(f"T(A) {op} 0.1").numpy(), eval(f"A {op} np.float32(0.1)"))
    assert (chutney.tensor([1, 2]) == 2.0).tolist() == [False, True]
    assert (chutney.tensor([1, 2]) < 1.5).tolist() == [True, False]
    assert (chutney.ones(2) == None) is False  # noqa: E711 (identity fallback)
    assert (chutney.ones(2) != "a") is True


def test_numpy_operand_defers_to_tensor():
    r = B + T(A)
    assert isinstance(r, chutney.Tensor)
    check(r, B + A)


def test_inplace_operators_write_through_views():
    x = T(A.copy())
    view = x[0]
    x += 1
    check(x, A + 1)
    check(view, A[0] + 1)
    x *= 2
    x -= T(B)
    x /= 4
    check(x, ((A + 1) * 2 - B) / 4, rtol=1e-5)
    y = chutney.zeros(3)
    y.add_(chutney.ones(3), alpha=2)
    assert y.tolist() == [2.0, 2.0, 2.0]
    y.mul_(3).sub_(1)
    assert y.tolist() == [5.0, 5.0, 5.0]
    i = chutney.tensor([1, 2])
    with pytest.raises(TypeError):
        i += 0.5  # a float result cannot be written into an int tensor
    i += 1
    assert i.tolist() == [2, 3]
    with pytest.raises(ValueError):
        z = chutney.zeros(3)
        z += chutney.zeros(2, 3)
    z = chutney.zeros(2, 2)
    z.fill_(3)
    assert z.tolist() == [[3, 3], [3, 3]]
    z.zero_()
    z.copy_(chutney.tensor([1.0, 2.0]))
    assert z.tolist() == [[1, 2], [1, 2]]
    z.clamp_(min=1.5)
    assert z.tolist() == [[1.5, 2], [1.5, 2]]


def test_methods_of_binary_ops():
    x, y = T(A), T(B)
    check(x.add(y, alpha=2), A + 2 * B)
    check(x.sub(1), A - 1)
    check(x.mul(y), A * B)
    check(x.div(2), A / 2)
    check(x.div(y, rounding_mode="floor"), np.floor(A / B), atol=1e-5)
    check(x.div(y, rounding_mode="trunc"), np.trunc(A / B), atol=1e-5)
    check(x.pow(2), A**2)
    check(x.maximum(y), np.maximum(A, B))
    check(chutney.minimum(x, y), np.minimum(A, B))
    check(chutney.max(x, y), np.maximum(A, B))
    check(x.rsub(1), 1 - A)
    check(chutney.pow(2, x), 2.0**A, rtol=1e-5)
    check(x.clamp(-0.5, 0.5), np.clip(A, -0.5, 0.5))
    check(x.clamp(min=0), np.maximum(A, 0))
    check(x.clamp(max=y), np.minimum(A, B))
    check(chutney.where(x > 0, x, 0.0), np.where(A > 0, A, 0))
    check(chutney.where(x > 0, 1.0, y), np.where(A > 0, 1, B))
    check(x.where(x > 0, y), np.where(A > 0, A, B))
    check(x.masked_fill(x < 0, -1), np.where(A < 0, -1, A))
    with pytest.raises(ValueError):
        x.clamp()


def test_unary_methods():
    x, p = T(A), T(P)
    for name, ref in [("exp", np.exp(A)), ("sin", np.sin(A)), ("cos", np.cos(A)), ("tanh", np.tanh(A)),
                      ("sigmoid", 1 / (1 + np.exp(-A))), ("relu", np.maximum(A, 0)),
                      ("abs", np.abs(A)), ("neg", -A), ("sign", np.sign(A)), ("square", A * A),
                      ("floor", np.floor(A)), ("ceil", np.ceil(A)), ("round", np.round(A)),
                      ("trunc", np.trunc(A)), ("tan", np.tan(A)), ("expm1", np.expm1(A))]:
        check(getattr(x, name)(), ref, rtol=1e-5, atol=1e-6)
        check(getattr(chutney, name)(x), ref, rtol=1e-5, atol=1e-6)
    for name, ref in [("log", np.log(P)), ("sqrt", np.sqrt(P)), ("rsqrt", 1 / np.sqrt(P)),
                      ("reciprocal", 1 / P), ("log1p", np.log1p(P)), ("log2", np.log2(P)),
                      ("log10", np.log10(P))]:
        check(getattr(p, name)(), ref, rtol=1e-5)
    check(x.leaky_relu(0.1), np.where(A > 0, A, 0.1 * A))
    check(x.elu(), np.where(A > 0, A, np.expm1(A)), rtol=1e-5)
    check(x.silu(), A / (1 + np.exp(-A)), rtol=1e-5)
    check(x.softplus(), np.log1p(np.exp(A)), rtol=1e-5)
    assert x.gelu(approximate="tanh").shape == (3, 4)
    with pytest.raises(ValueError):
        x.gelu(approximate="cubic")
    assert (x > 0).logical_not().tolist() == (A <= 0).tolist()
    with pytest.raises(TypeError):
        chutney.exp([1.0])


def test_reductions():
    x = T(A)
    check(x.sum(), A.sum(), rtol=1e-5)
    check(x.sum(dim=1), A.sum(1), rtol=1e-5)
    check(x.sum(1, keepdim=True), A.sum(1, keepdims=True), rtol=1e-5)
    check(x.sum(dim=(0, 1)), A.sum(), rtol=1e-5)
    check(x.mean(0), A.mean(0), rtol=1e-5)
    check(chutney.mean(x, dim=-1), A.mean(-1), rtol=1e-5)
    check(x.prod(1), A.prod(1), rtol=1e-5)
    check(x.var(1), A.var(1, ddof=1), rtol=1e-4)
    check(x.var(1, unbiased=False), A.var(1), rtol=1e-4)
    check(x.std(), A.std(ddof=1), rtol=1e-4)
    check(x.std(0, correction=0), A.std(0), rtol=1e-4)
    check(x.norm(), np.linalg.norm(A), rtol=1e-5)
    check(x.norm(1, dim=1), np.abs(A).sum(1), rtol=1e-5)
    check(x.logsumexp(1), np.log(np.exp(A).sum(1)), rtol=1e-5)
    check(x.amax(dim=(0, 1)), A.max())
    check(x.max(), A.max())
    values, indices = x.max(dim=1)
    check(values, A.max(1))
    assert indices.tolist() == A.argmax(1).tolist()
    r = x.min(0, keepdim=True)
    check(r.values, A.min(0, keepdims=True))
    assert r.indices.tolist() == [A.argmin(0).tolist()]
    assert x.argmax().item() == A.argmax()
    assert x.argmin(dim=1).tolist() == A.argmin(1).tolist()
    assert x.argmax(keepdim=True).shape == (1, 1)
    assert chutney.tensor([1, 2, 3]).sum().dtype == chutney.int64
    assert chutney.tensor([True, True, False]).sum().item() == 2
    assert (x > 0).any().item() == bool((A > 0).any())
    assert (x > -10).all().item() is True
    assert (x > 0).all(dim=1).tolist() == (A > 0).all(1).tolist()
    assert x.count_nonzero().item() == 12
    check(x.cumsum(1), A.cumsum(1), rtol=1e-5)
    assert x.sum(dim=1, dtype=chutney.float64).dtype == chutney.float64


def test_softmax_and_matmul():
    x = T(A)
    e = np.exp(A - A.max(1, keepdims=True))
    check(x.softmax(1), e / e.sum(1, keepdims=True))
    check(x.log_softmax(dim=-1), np.log(e / e.sum(1, keepdims=True)), rtol=1e-5, atol=1e-5)
    check(chutney.softmax(x, 0), np.exp(A) / np.exp(A).sum(0), rtol=1e-5)
    check(x @ T(B), A @ B, rtol=1e-5)
    check(x @ x.T, A @ A.T, rtol=1e-5)
    check(x.matmul(x.t()), A @ A.T, rtol=1e-5)
    check(x.mm(x.t()), A @ A.T, rtol=1e-5)
    batch = rng.standard_normal((2, 3, 4)).astype(np.float32)
    check(T(batch) @ x.T, batch @ A.T, rtol=1e-5)
    check(T(batch).bmm(T(batch).transpose(1, 2)), batch @ batch.transpose(0, 2, 1), rtol=1e-5)
    check(T(B).dot(T(B)), B @ B, rtol=1e-5)
    with pytest.raises(ValueError):
        x @ x
    with pytest.raises(ValueError):
        x.mm(T(B))
    with pytest.raises(TypeError):
        x @ 2


def test_shapes_and_views():
    x = T(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    check(x.reshape(6, 4), a.reshape(6, 4))
    check(x.reshape((4, -1)), a.reshape(4, -1))
    check(x.view(-1), a.reshape(-1))
    assert x.view(24).shares_storage(x)
    with pytest.raises(ValueError):
        x.transpose(0, 2).view(-1)
    check(x.transpose(0, 2).reshape(-1), a.transpose(2, 1, 0).reshape(-1))
    check(x.permute(2, 0, 1), a.transpose(2, 0, 1))
    check(x.permute((1, 2, 0)), a.transpose(1, 2, 0))
    check(x.flatten(), a.reshape(-1))
    check(x.flatten(1), a.reshape(2, 12))
    check(chutney.flatten(x, 0, 1), a.reshape(6, 4))
    check(x.T, a.transpose(2, 1, 0))
    check(x.mT, a.transpose(0, 2, 1))
    check(x.unsqueeze(1), a[:, None])
    check(x.unsqueeze(-1).squeeze(-1), a)
    check(chutney.zeros(1, 3, 1).squeeze(), np.zeros(3))
    assert chutney.zeros(2, 3).squeeze(0).shape == (2, 3)
    check(T(B).expand(3, 4), np.broadcast_to(B, (3, 4)))
    check(T(B).expand(2, -1), np.broadcast_to(B, (2, 4)))
    check(T(B).broadcast_to((2, 4)), np.broadcast_to(B, (2, 4)))
    check(T(B).expand_as(x), np.broadcast_to(B, a.shape))
    check(x.narrow(2, 1, 2), a[:, :, 1:3])
    check(x.select(1, -1), a[:, -1])
    check(x.flip(0, 2), a[::-1, :, ::-1])
    check(x.flip(-1), a[:, :, ::-1])
    check(T(B).repeat(2, 3), np.tile(B, (2, 3)))
    check(x.repeat(1, 1, 2), np.tile(a, (1, 1, 2)))
    check(T(A).tril(), np.tril(A))
    check(T(A).triu(1), np.triu(A, 1))
    check(x.reshape_as(T(np.zeros((4, 6)))), a.reshape(4, 6))


def test_joins_and_splits():
    x, y = T(A), T(A * 2)
    check(chutney.cat([x, y]), np.concatenate([A, A * 2]))
    check(chutney.cat((x, y), dim=1), np.concatenate([A, A * 2], 1))
    check(chutney.stack([x, y], dim=1), np.stack([A, A * 2], 1))
    parts = x.split(3, dim=1)
    assert [p.shape for p in parts] == [(3, 3), (3, 1)]
    parts = x.split([1, 3], dim=1)
    check(parts[1], A[:, 1:])
    chunks = x.chunk(2)
    assert [c.shape for c in chunks] == [(2, 4), (1, 4)]
    rows = x.unbind(0)
    assert len(rows) == 3
    check(rows[2], A[2])
    with pytest.raises(ValueError):
        chutney.cat([])
    with pytest.raises(TypeError):
        chutney.cat([x, 1])
    with pytest.raises(ValueError):
        chutney.cat([x, T(B)])


def test_gathers():
    x = T(A)
    idx = chutney.tensor([[0, 1], [2, 3], [1, 1]])
    check(x.gather(1, idx), np.take_along_axis(A, idx.numpy(), 1))
    check(x.index_select(1, chutney.tensor([3, 0])), A[:, [3, 0]])
    check(x.index_select(0, [2, 2]), A[[2, 2]])
    z = chutney.zeros(3, 4)
    check(z.scatter_add(1, idx, chutney.ones(3, 2)),
          np.array([[1, 1, 0, 0], [0, 0, 1, 1], [0, 2, 0, 0]], dtype=np.float32))


def test_module_functions_cover_methods():
    x = T(A)
    check(chutney.sum(x, dim=0), A.sum(0), rtol=1e-5)
    check(chutney.reshape(x, (4, 3)), A.reshape(4, 3))
    check(chutney.transpose(x, 0, 1), A.T)
    check(chutney.matmul(x, x.t()), A @ A.T, rtol=1e-5)
    check(chutney.add(x, 1), A + 1)
    assert chutney.argmax(x).item() == A.argmax()
    assert chutney.allclose(x, x.clone())
    assert chutney.equal(x, x.clone())
    assert chutney.numel(x) == 12
