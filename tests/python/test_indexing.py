"""Indexing and assignment against NumPy's rules."""

import pytest

import chutney

np = pytest.importorskip("numpy")

A = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)

BASIC_KEYS = [
    0, -1, 1, (0, 1), (1, -1, 2), (0, 0, 0, 0), (-2, -3, -4, -5),
    slice(None), slice(1, None), slice(None, None, 2), slice(None, None, -1), slice(-1, None, -1),
    slice(5, -10, -2), slice(0, 0), slice(100, 200), slice(-100, 100),
    (slice(None), 1), (Ellipsis, 2), (Ellipsis, slice(1, 3)), (0, Ellipsis, 0), (Ellipsis,),
    (None,), (None, 0), (0, None, slice(None), None), (Ellipsis, None), (None, Ellipsis, None),
    (slice(None, None, 3), slice(1, None, 2), None, slice(None, None, -2)),
    (1, slice(None, None, -1), Ellipsis, slice(3, 0, -1)),
]

ADVANCED_KEYS = [
    [1, 0], [[0, 1], [1, 0]], ([0, 1], [2, 0]), (slice(None), [2, 0, 2]), (0, [1, 2], [3, 3]),
    (Ellipsis, [4, 0]), ([1, 0], slice(None), [2, 3]), (0, [0, 1], slice(None), [1, 2]),
    ([-1, 0],), (slice(None), [[0], [2]], [1, 3]), ([0, 1], None, [1, 1]),
]


def T():
    return chutney.tensor(A)


@pytest.mark.parametrize("key", BASIC_KEYS, ids=repr)
def test_basic_indexing_is_a_view(key):
    t = T()
    got = t[key]
    ref = A[key]
    assert got.shape == ref.shape
    np.testing.assert_array_equal(got.numpy(), ref)
    if got.numel():
        assert got.shares_storage(t)


@pytest.mark.parametrize("key", ADVANCED_KEYS, ids=repr)
def test_advanced_indexing(key):
    got = T()[key]
    ref = A[tuple(np.array(k) if isinstance(k, list) else k for k in key)
            if isinstance(key, tuple) else np.array(key)]
    assert got.shape == ref.shape
    np.testing.assert_array_equal(got.numpy(), ref)


def test_an_int_is_not_an_advanced_index_as_in_torch():
    # NumPy counts the 0 as an advanced index (result [2, 3, 2]); PyTorch
    # applies it first, leaving one advanced index (result [3, 2, 2]).
    got = T()[0, :, [1, 3], 1:3]
    assert got.shape == (3, 2, 2)
    np.testing.assert_array_equal(got.numpy(), A[0][:, [1, 3], 1:3])


def test_index_with_tensors_and_masks():
    t = T()
    idx = chutney.tensor([1, 0, 1])
    np.testing.assert_array_equal(t[idx].numpy(), A[[1, 0, 1]])
    np.testing.assert_array_equal(t[:, chutney.tensor(2)].numpy(), A[:, 2])
    mask = A > 100
    np.testing.assert_array_equal(t[chutney.tensor(mask)].numpy(), A[mask])
    m2 = A[0, :, :, 0] > 20
    np.testing.assert_array_equal(t[1, chutney.tensor(m2)].numpy(), A[1, m2])
    np.testing.assert_array_equal(t[:, [True, False, True]].numpy(), A[:, [True, False, True]])
    np.testing.assert_array_equal(t[np.array([1, 0])].numpy(), A[[1, 0]])
    np.testing.assert_array_equal(t[np.int64(1)].numpy(), A[1])
    empty = t[chutney.tensor(A > 1e9)]
    assert empty.shape == (0,)


def test_index_errors():
    t = T()
    with pytest.raises(IndexError):
        t[2]
    with pytest.raises(IndexError):
        t[0, 0, 0, 5]
    with pytest.raises(IndexError):
        t[0, 0, 0, 0, 0]
    with pytest.raises(IndexError):
        t[..., ...]
    with pytest.raises(IndexError):
        t[[0, 5]]
    with pytest.raises(IndexError):
        t[chutney.tensor([0.5])]
    with pytest.raises(IndexError):
        t["a"]
    with pytest.raises(IndexError):
        t[chutney.tensor([True, False, True])]  # wrong mask length
    with pytest.raises(IndexError):
        t[[0, 1], [0, 1, 2]]  # cannot broadcast
    with pytest.raises(ValueError):
        t[::0]
    with pytest.raises(IndexError):
        chutney.tensor(1.0)[0]
    with pytest.raises(TypeError):
        del t[0]


@pytest.mark.parametrize("key", BASIC_KEYS + ADVANCED_KEYS, ids=repr)
def test_assignment_of_a_scalar(key):
    t = T()
    ref = A.copy()
    npkey = (tuple(np.array(k) if isinstance(k, list) else k for k in key)
             if isinstance(key, tuple) else np.array(key) if isinstance(key, list) else key)
    t[key] = -7
    ref[npkey] = -7
    np.testing.assert_array_equal(t.numpy(), ref)


@pytest.mark.parametrize("key", BASIC_KEYS + ADVANCED_KEYS, ids=repr)
def test_assignment_of_a_tensor(key):
    t = T()
    ref = A.copy()
    npkey = (tuple(np.array(k) if isinstance(k, list) else k for k in key)
             if isinstance(key, tuple) else np.array(key) if isinstance(key, list) else key)
    shape = ref[npkey].shape
    value = -np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 1
    t[key] = chutney.tensor(value)
    ref[npkey] = value
    np.testing.assert_array_equal(t.numpy(), ref)


def test_assignment_broadcasts_and_casts():
    t = chutney.zeros(3, 4)
    t[1] = chutney.tensor([1, 2, 3, 4])  # int64 into float32
    t[:, 0] = 9
    t[2:, ::2] = chutney.tensor([[5.0, 6.0]])
    assert t.tolist() == [[9, 0, 0, 0], [9, 2, 3, 4], [5, 0, 6, 0]]
    t[t > 4] = 0
    assert t.tolist() == [[0, 0, 0, 0], [0, 2, 3, 4], [0, 0, 0, 0]]
    t[t == 0] = chutney.tensor(-1.0)
    assert t[0].tolist() == [-1, -1, -1, -1]
    t[[0, 2], 1] = chutney.tensor([7.0, 8.0])
    assert t[:, 1].tolist() == [7, 2, 8]
    t[0] = [1, 2, 3, 4]
    assert t[0].tolist() == [1, 2, 3, 4]
    with pytest.raises(ValueError):
        t[0] = chutney.zeros(5)
    big = chutney.zeros(2, dtype=chutney.int64)
    big[0] = 2**62 + 3
    assert big[0].item() == 2**62 + 3


def test_indexing_is_differentiable():
    w = chutney.arange(12.0).reshape(3, 4).requires_grad_()
    y = w[1:, ::2].sum() + w[[0, 0, 2], [1, 1, 3]].sum() * 10 + w[w > 10].sum() * 100
    y.backward()
    g = np.zeros((3, 4), dtype=np.float32)
    g[1:, ::2] += 1
    g[0, 1] += 20
    g[2, 3] += 10
    g[2, 3] += 100
    np.testing.assert_array_equal(w.grad.numpy(), g)


def test_setitem_on_leaves_refused_while_recording():
    w = chutney.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w[0] = 2
    y = w * 2
    y[0] = 2  # recorded (tests/python/test_inplace_autograd.py)
    y.sum().backward()
    assert w.grad.tolist() == [0, 2, 2]
    with chutney.no_grad():
        w[0] = 5
    assert w.tolist() == [5, 1, 1]
