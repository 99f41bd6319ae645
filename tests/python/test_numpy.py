"""NumPy interop: zero copy both ways, lifetimes, layouts, dtypes."""

import gc
import weakref

import pytest

import chutney

np = pytest.importorskip("numpy")


def test_numpy_shares_memory():
    t = chutney.arange(6.0).reshape(2, 3)
    a = t.numpy()
    assert a.dtype == np.float32 and a.shape == (2, 3)
    a[0, 0] = 42
    assert t[0, 0].item() == 42
    t[1, 2] = -1
    assert a[1, 2] == -1
    assert np.shares_memory(a, t.numpy())


def test_numpy_of_views_keeps_strides():
    t = chutney.arange(24.0).reshape(2, 3, 4)
    v = t.transpose(0, 2)[::2]
    a = v.numpy()
    np.testing.assert_array_equal(a, np.arange(24.0).reshape(2, 3, 4).transpose(2, 1, 0)[::2])
    assert a.strides == tuple(s * 4 for s in v.stride())
    e = chutney.ones(3).expand(2, 3).numpy()
    assert e.strides == (0, 4)
    r = t[:, :, ::-1].numpy()
    np.testing.assert_array_equal(r, np.arange(24.0).reshape(2, 3, 4)[:, :, ::-1])


def test_numpy_dtypes():
    for dt, npdt in [(chutney.float32, np.float32), (chutney.float64, np.float64),
                     (chutney.float16, np.float16), (chutney.int32, np.int32),
                     (chutney.int64, np.int64), (chutney.uint8, np.uint8), (chutney.bool, np.bool_)]:
        t = chutney.ones(3, dtype=dt)
        assert t.numpy().dtype == npdt
        back = chutney.from_numpy(t.numpy())
        assert back.dtype == dt
    with pytest.raises(TypeError):
        chutney.ones(2, dtype=chutney.bfloat16).numpy()
    assert chutney.zeros(0, 3).numpy().shape == (0, 3)
    assert chutney.tensor(5.0).numpy().shape == ()


def test_array_outlives_tensor():
    t = chutney.arange(1000.0)
    a = t.numpy()
    del t
    gc.collect()
    chutney.zeros(1000)  # reuse of freed memory would show here
    assert a[999] == 999.0 and a.sum() == sum(range(1000))


def test_array_survives_optimizer_moving_the_parameter():
    p = chutney.nn.Parameter(chutney.arange(4.0))
    with chutney.no_grad():
        a = p.detach().numpy()
    chutney.optim.SGD([p], lr=0.1)
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_numpy_refuses_requires_grad():
    w = chutney.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError):
        w.numpy()
    with pytest.raises(RuntimeError):
        np.asarray(w)
    assert w.detach().numpy().tolist() == [1.0, 1.0]
    assert w.numpy(force=True).tolist() == [1.0, 1.0]


def test_from_numpy_zero_copy():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = chutney.from_numpy(a)
    assert t.dtype == chutney.float64
    a[0, 1] = 100
    assert t[0, 1].item() == 100
    t[1, 1] = -5
    assert a[1, 1] == -5
    f = np.asfortranarray(a)
    tf = chutney.from_numpy(f)
    f[1, 0] = 77
    assert tf[1, 0].item() == 77 and tf.tolist() == f.tolist()
    assert chutney.from_numpy(np.array(3, dtype=np.int32)).shape == ()


def test_from_numpy_keeps_the_array_alive():
    before = chutney._C._num_borrowed()
    a = np.arange(10, dtype=np.float32)
    ref = weakref.ref(a) if hasattr(a, "__weakref__") else None
    t = chutney.from_numpy(a)
    v = t[2:5]
    del a
    gc.collect()
    assert v.tolist() == [2.0, 3.0, 4.0]
    assert chutney._C._num_borrowed() == before + 1
    del t
    assert chutney._C._num_borrowed() == before + 1  # the view still uses it
    del v
    gc.collect()
    assert chutney._C._num_borrowed() == before
    if ref is not None:
        assert ref() is None


def test_from_numpy_copies_what_it_cannot_share():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    t = chutney.from_numpy(a)
    assert t.tolist() == a.tolist()
    ro = np.arange(3.0)
    ro.flags.writeable = False
    t = chutney.from_numpy(ro)
    t[0] = 9
    assert ro[0] == 0
    neg = np.arange(4.0)[::-1]
    assert chutney.from_numpy(neg).tolist() == [3.0, 2.0, 1.0, 0.0]
    with pytest.raises(TypeError):
        chutney.from_numpy(np.array(["a"]))
    with pytest.raises(TypeError):
        chutney.from_numpy([1, 2])
    with pytest.raises(TypeError):
        chutney.from_numpy(np.zeros(2, dtype=np.complex64))


def test_tensor_from_numpy_copies_and_converts():
    a = np.arange(4, dtype=np.int16)
    t = chutney.tensor(a)
    assert t.dtype == chutney.int64 and t.tolist() == [0, 1, 2, 3]
    a[0] = 5
    assert t[0].item() == 0
    assert chutney.tensor(np.arange(3, dtype=np.float32), dtype=chutney.float64).dtype == chutney.float64
    be = np.arange(3, dtype=">f4")
    with pytest.raises(TypeError):
        chutney.from_numpy(be)
    assert chutney.as_tensor(np.ones(2)).dtype == chutney.float64


def test_numpy_functions_accept_tensors():
    t = chutney.arange(4.0)
    assert np.sum(t.numpy()) == 6.0
    assert np.array(t).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    m = memoryview(t)
    assert m.format == "f" and m.shape == (4,) and m.tolist() == [0.0, 1.0, 2.0, 3.0]
