"""DLPack exchange: Tensor.__dlpack__ / __dlpack_device__ and
chutney.from_dlpack, with NumPy, PyTorch, chutney itself and hand-made
capsules (ctypes, laid out from the DLPack specification): zero copy both
ways, strided views, every dtype, lifetimes, capsule rules, errors, leaks."""

import ctypes
import gc
import os
import threading
import weakref

import pytest

import chutney

np = pytest.importorskip("numpy")
try:
    import torch
    import torch.utils.dlpack
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")


def live():
    """(exported managed tensors not yet deleted, imported ones still held),
    after the pending releases are done."""
    gc.collect()
    return chutney._C._dlpack_live()


@pytest.fixture(autouse=True)
def _nothing_left_alive():
    """Every capsule made is freed, every import released, by the end."""
    yield
    assert live() == (0, 0)


# ---- the DLPack ABI in ctypes, for hand-made capsules ----

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", DELETER_V), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]

READ_ONLY, IS_COPIED = 1, 2

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_ptr.restype = ctypes.c_void_p
_capsule_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]

NAME_LEGACY = b"dltensor"  # module constants: a capsule keeps a pointer to its name
NAME_VERSIONED = b"dltensor_versioned"


def capsule_name(cap):
    return _capsule_name(cap).decode()


def managed_of(cap):
    """The managed tensor of a capsule (ctypes view of the producer's struct)."""
    if capsule_name(cap) == "dltensor_versioned":
        return DLManagedTensorVersioned.from_address(_capsule_ptr(cap, NAME_VERSIONED))
    return DLManagedTensor.from_address(_capsule_ptr(cap, NAME_LEGACY))


class Producer:
    """A foreign producer: a capsule over a NumPy array's memory, with any
    shape, strides, dtype, device, version and flags. Capsules have no
    destructor (an unconsumed one is simply dropped); `deleted` counts the
    deleter's calls."""

    _alive = {}

    def __init__(self, arr, *, shape=None, strides=None, code=2, bits=None, lanes=1, device=(1, 0),
                 versioned=False, version=(1, 0), flags=0, byte_offset=0, data=True, ndim=None,
                 null_shape=False):
        self.arr = arr
        self.deleted = 0
        shape = list(arr.shape) if shape is None else list(shape)
        n = len(shape) if ndim is None else ndim
        self.shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self.strides = None if strides is None else (ctypes.c_int64 * max(len(strides), 1))(*strides)
        if versioned:
            self.m = DLManagedTensorVersioned()
            self.m.version = DLPackVersion(*version)
            self.m.flags = flags
            self.m.deleter = _deleter_v
        else:
            self.m = DLManagedTensor()
            self.m.deleter = _deleter
        dl = self.m.dl_tensor
        dl.data = arr.ctypes.data if data else None
        dl.device = DLDevice(*device)
        dl.ndim = n
        dl.dtype = DLDataType(code, arr.itemsize * 8 if bits is None else bits, lanes)
        dl.shape = None if null_shape else self.shape
        dl.strides = self.strides
        dl.byte_offset = byte_offset
        self.addr = ctypes.addressof(self.m)
        self.m.manager_ctx = self.addr
        Producer._alive[self.addr] = self
        self.capsule = _capsule_new(self.addr, NAME_VERSIONED if versioned else NAME_LEGACY, None)

    def on_delete(self):
        self.deleted += 1
        Producer._alive.pop(self.addr, None)


@DELETER
def _deleter(p):
    Producer._alive[p.contents.manager_ctx].on_delete()


@DELETER_V
def _deleter_v(p):
    Producer._alive[p.contents.manager_ctx].on_delete()


def strides_el(a):
    return tuple(s // a.itemsize for s in a.strides)


# ---- chutney -> NumPy ----

NP_DTYPES = [
    (chutney.float32, np.float32),
    (chutney.float64, np.float64),
    (chutney.float16, np.float16),
    (chutney.int32, np.int32),
    (chutney.int64, np.int64),
    (chutney.uint8, np.uint8),
    (chutney.int8, np.int8),
]


@pytest.mark.parametrize("cdt,ndt", NP_DTYPES, ids=lambda d: str(d))
def test_numpy_from_chutney_shares_memory(cdt, ndt):
    t = chutney.arange(12).reshape(3, 4).to(cdt)
    a = np.from_dlpack(t)
    assert a.dtype == ndt and a.shape == (3, 4)
    assert a.tolist() == t.tolist()
    assert a.ctypes.data == np.asarray(t).ctypes.data  # the same memory
    t[1, 2] = 99
    assert a[1, 2] == 99  # NumPy 1.24 makes imported arrays read-only; writes come from chutney
    assert live()[0] == 1
    del a
    assert live()[0] == 0


def test_chutney_to_numpy_rank0_and_empty():
    a = np.from_dlpack(chutney.tensor(3.5))
    assert a.shape == () and a.item() == 3.5
    e = np.from_dlpack(chutney.zeros(0, 3))
    assert e.shape == (0, 3) and e.dtype == np.float32


CHUTNEY_VIEWS = {
    "T": lambda t: t.T,
    "cols_step": lambda t: t[:, ::2],
    "rows_step_offset": lambda t: t[::2, 1:],
    "permute3d": lambda t: t.reshape(2, 3, 4).permute(2, 0, 1),
    "block": lambda t: t[1:, 1:3],
    "expand": lambda t: t[0:1].expand(5, 4),
    "row": lambda t: t[3],
}


@pytest.mark.parametrize("name", list(CHUTNEY_VIEWS))
def test_numpy_from_chutney_strided_views(name):
    base = chutney.arange(24.0).reshape(6, 4)
    v = CHUTNEY_VIEWS[name](base)
    a = np.from_dlpack(v)
    assert a.shape == tuple(v.shape)
    assert strides_el(a) == tuple(v.stride())
    assert a.tolist() == v.tolist()
    before = a.copy()
    base.add_(1000)  # every element of the base: the view sees it
    assert (a == before + 1000).all()


def test_negative_strides_are_exported_as_a_copy():
    t = chutney.arange(6.0)
    v = t[::-1]
    assert v.stride() == (-1,)
    a = np.from_dlpack(v)
    assert a.tolist() == [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    t[0] = 100
    assert a[5] == 0.0  # a copy
    with pytest.raises(BufferError, match="negative strides"):
        v.__dlpack__(copy=False)
    cap = v.__dlpack__(max_version=(1, 0))
    assert managed_of(cap).flags & IS_COPIED
    del cap
    if torch is not None:  # PyTorch 1.13 aborts on negative strides: it must get the copy
        tt = torch.utils.dlpack.from_dlpack(v)
        assert tt.tolist() == [5.0, 4.0, 3.0, 2.0, 1.0, 100.0]
        assert tt.stride() == (1,)


# ---- NumPy -> chutney ----

@pytest.mark.parametrize("cdt,ndt", NP_DTYPES, ids=lambda d: str(d))
def test_chutney_from_numpy_shares_memory(cdt, ndt):
    a = np.arange(12).reshape(3, 4).astype(ndt)
    t = chutney.from_dlpack(a)
    assert t.dtype == cdt and tuple(t.shape) == (3, 4)
    assert t.tolist() == a.tolist()
    a[0, 1] = 42
    assert t[0, 1].item() == 42
    t[2, 3] = 7
    assert a[2, 3] == 7
    assert live()[1] == 1
    del t
    assert live()[1] == 0


def test_chutney_from_numpy_rank0_and_empty():
    t = chutney.from_dlpack(np.array(2.5))
    assert t.shape == () and t.item() == 2.5 and t.dtype == chutney.float64
    e = chutney.from_dlpack(np.zeros((0, 3), np.float32))
    assert tuple(e.shape) == (0, 3) and e.dtype == chutney.float32


def numpy_views():
    a = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    b = np.lib.stride_tricks.as_strided(np.arange(5.0), shape=(4, 5), strides=(0, 8), writeable=True)
    return [
        ("T", a.T),
        ("transpose2d", a[0].T),
        ("rows_step", a[::2]),
        ("cols_step", a[:, :, ::3]),
        ("inner_slice", a[:, 1:3, 2:]),
        ("steps_everywhere", a[::2, ::3, 1::2]),
        ("transposed_slice", a.transpose(2, 0, 1)[1:, :, ::2]),
        ("reversed", a[::-1]),
        ("reversed_inner", a[:, ::-2, ::-1]),
        ("broadcast", b),
        ("size1_axes", a[:, 1:2, :]),
        ("single", a[1:2, 2:3, 3:4]),
        ("fortran", np.asfortranarray(a)),
    ]


@pytest.mark.parametrize("name,a", numpy_views(), ids=[n for n, _ in numpy_views()])
def test_chutney_from_numpy_strided_views_are_zero_copy(name, a):
    t = chutney.from_dlpack(a)
    assert t.tolist() == a.tolist()
    assert tuple(t.shape) == a.shape
    for i, n in enumerate(a.shape):
        if n > 1:
            assert t.stride(i) == strides_el(a)[i]
    # Shared: a write through NumPy is seen by the tensor, and the reverse.
    base = a.base if a.base is not None else a
    while getattr(base, "base", None) is not None:
        base = base.base
    base += 1000
    assert t.tolist() == a.tolist()
    if name != "broadcast":
        t.mul_(2)
        assert t.tolist() == a.tolist()


def test_overlapping_strides_are_copied():
    x = np.arange(10.0)
    w = np.lib.stride_tricks.as_strided(x, shape=(8, 3), strides=(8, 8), writeable=True)
    t = chutney.from_dlpack(w)
    assert t.tolist() == w.tolist()
    x[0] = 100
    assert t[0, 0].item() == 0.0  # a copy
    with pytest.raises(BufferError, match="overlap"):
        chutney.from_dlpack(w, copy=False)


def test_numpy_readonly_array():
    a = np.arange(4.0)
    a.flags.writeable = False
    # NumPy 1.24 refuses to export read-only arrays (legacy DLPack has no
    # read-only flag); NumPy >= 2.1 sends a versioned capsule with the flag,
    # which chutney copies.
    try:
        t = chutney.from_dlpack(a)
    except BufferError:
        return
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_copy_argument_of_from_dlpack():
    a = np.arange(6.0)
    t = chutney.from_dlpack(a, copy=True)
    a[0] = 50
    assert t[0].item() == 0.0
    s = chutney.from_dlpack(a, copy=False)
    a[1] = 60
    assert s[1].item() == 60
    with pytest.raises(TypeError, match="copy"):
        chutney.from_dlpack(a, copy=1)


# ---- chutney -> chutney, every dtype ----

ALL_DTYPES = [chutney.float32, chutney.float64, chutney.float16, chutney.bfloat16, chutney.int32,
              chutney.int64, chutney.uint8, chutney.bool, chutney.int8]


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("versioned", [False, True])
def test_chutney_round_trip_every_dtype(dt, versioned):
    t = (chutney.arange(12).reshape(3, 4) % 3).to(dt)
    cap = t.__dlpack__(max_version=(1, 0) if versioned else None)
    assert capsule_name(cap) == ("dltensor_versioned" if versioned else "dltensor")
    m = managed_of(cap)
    code = {chutney.float32: (2, 32), chutney.float64: (2, 64), chutney.float16: (2, 16),
            chutney.bfloat16: (4, 16), chutney.int32: (0, 32), chutney.int64: (0, 64),
            chutney.uint8: (1, 8), chutney.bool: (6, 8), chutney.int8: (0, 8)}[dt]
    dl = m.dl_tensor
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (*code, 1)
    assert (dl.device.device_type, dl.device.device_id) == (1, 0)
    assert dl.ndim == 2 and [dl.shape[0], dl.shape[1]] == [3, 4]
    assert [dl.strides[0], dl.strides[1]] == [4, 1] and dl.byte_offset == 0
    if versioned:
        assert (m.version.major, m.version.minor) == (1, 0) and m.flags == 0
    u = chutney.from_dlpack(cap)
    assert capsule_name(cap) == ("used_dltensor_versioned" if versioned else "used_dltensor")
    assert u.dtype == dt and u.tolist() == t.tolist()
    t[0, 0] = 1
    assert u[0, 0].item() == t[0, 0].item()  # shared
    with pytest.raises(BufferError, match="already consumed"):
        chutney.from_dlpack(cap)
    del u, cap
    assert live() == (0, 0)


def test_from_dlpack_of_a_tensor_shares_memory():
    t = chutney.arange(10.0)[::2]
    u = chutney.from_dlpack(t)
    assert u.stride() == (2,)
    t.fill_(3)
    assert u.tolist() == [3.0] * 5


# ---- PyTorch, both ways ----

TORCH_DTYPES = [
    (chutney.float32, "float32"), (chutney.float64, "float64"), (chutney.float16, "float16"),
    (chutney.bfloat16, "bfloat16"), (chutney.int32, "int32"), (chutney.int64, "int64"),
    (chutney.uint8, "uint8"), (chutney.int8, "int8"),
]


@needs_torch
@pytest.mark.parametrize("cdt,tname", TORCH_DTYPES, ids=lambda d: str(d))
def test_torch_both_ways(cdt, tname):
    tdt = getattr(torch, tname)
    t = chutney.arange(12).reshape(3, 4).to(cdt)
    x = torch.utils.dlpack.from_dlpack(t)  # __dlpack__ / __dlpack_device__
    assert x.dtype == tdt and x.tolist() == t.tolist()
    x[0, 0] = 5
    assert t[0, 0].item() == 5
    t[2, 3] = 9
    assert x[2, 3].item() == 9

    y = torch.arange(12).reshape(3, 4).to(tdt)
    u = chutney.from_dlpack(y)  # torch.Tensor.__dlpack__
    assert u.dtype == cdt and u.tolist() == y.tolist()
    u[1, 1] = 7
    assert y[1, 1].item() == 7
    cap = torch.utils.dlpack.to_dlpack(y)  # a raw capsule
    v = chutney.from_dlpack(cap)
    y[0, 3] = 4
    assert v[0, 3].item() == 4
    # chutney's capsule into torch's consumer
    z = torch.utils.dlpack.from_dlpack(t.__dlpack__())
    assert z.tolist() == t.tolist()
    del x, z
    assert live()[0] == 0


@needs_torch
def test_torch_strided_views():
    y = torch.arange(60.0).reshape(3, 4, 5)
    views = [y.transpose(0, 2), y[:, ::2, 1:], y[1:, :, 1::2], y[:, :1].expand(3, 6, 5),
             y.permute(1, 2, 0)[::3], y[2, 1:, ::4]]
    for v in views:
        u = chutney.from_dlpack(v)
        assert u.tolist() == v.tolist()
        assert all(a == b for a, b, n in zip(u.stride(), v.stride(), v.shape) if n > 1)
        y.add_(1)
        assert u.tolist() == v.tolist()  # shared
    t = chutney.arange(24.0).reshape(4, 6)
    for v in [t.T, t[:, 1::2], t[::3, 2:5].T]:
        x = torch.utils.dlpack.from_dlpack(v)
        assert x.stride() == v.stride() and x.tolist() == v.tolist()
        t.add_(1)
        assert x.tolist() == v.tolist()


@needs_torch
def test_torch_capsule_rules():
    y = torch.ones(3)
    cap = torch.utils.dlpack.to_dlpack(y)
    chutney.from_dlpack(cap)
    with pytest.raises(BufferError, match="already consumed"):
        chutney.from_dlpack(cap)
    cap2 = chutney.ones(3).__dlpack__()
    torch.utils.dlpack.from_dlpack(cap2)
    with pytest.raises(BufferError, match="already consumed"):
        chutney.from_dlpack(cap2)
    with pytest.raises(Exception):  # torch's own check
        torch.utils.dlpack.from_dlpack(cap2)


@needs_torch
def test_torch_refusals_do_not_leak():
    b = chutney.tensor([True, False])
    try:
        x = torch.utils.dlpack.from_dlpack(b)  # PyTorch 1.13 has no DLPack bool
        assert x.tolist() == [True, False]
        del x
    except RuntimeError:
        pass
    assert live()[0] == 0


# ---- lifetimes ----

def test_data_outlives_the_chutney_tensor():
    t = chutney.arange(1000.0)
    a = np.from_dlpack(t[10:20])
    del t
    gc.collect()
    junk = [chutney.full((1000,), -1.0) for _ in range(20)]  # reuse freed memory, if it were
    assert a.tolist() == [float(i) for i in range(10, 20)]
    assert live()[0] == 1
    del a, junk
    assert live()[0] == 0


def test_data_outlives_the_numpy_array():
    a = np.arange(1000.0)
    ref = weakref.ref(a)
    t = chutney.from_dlpack(a[5:8])
    del a
    gc.collect()
    assert ref() is not None  # kept by the tensor
    junk = [np.full(1000, -1.0) for _ in range(20)]
    assert t.tolist() == [5.0, 6.0, 7.0]
    u = t * 2  # a new tensor: does not hold the memory
    del t
    gc.collect()
    assert live() == (0, 0) and ref() is None
    assert u.tolist() == [10.0, 12.0, 14.0]
    del junk


@needs_torch
def test_data_outlives_the_torch_tensor():
    y = torch.arange(100.0)
    t = chutney.from_dlpack(y[::10])
    del y
    gc.collect()
    junk = [torch.full((100,), -1.0) for _ in range(20)]
    assert t.tolist() == [float(i) for i in range(0, 100, 10)]
    x = torch.utils.dlpack.from_dlpack(chutney.arange(5.0))  # its chutney tensor is a temporary
    gc.collect()
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    del junk, t, x


def test_view_of_an_import_keeps_the_memory():
    a = np.arange(12.0).reshape(3, 4)
    ref = weakref.ref(a)
    t = chutney.from_dlpack(a)
    v = t[1]  # a view on the same storage
    del a, t
    gc.collect()
    assert ref() is not None and v.tolist() == [4.0, 5.0, 6.0, 7.0]
    del v
    gc.collect()
    assert ref() is None


def test_import_freed_by_a_backward_pass():
    # A big enough graph runs backward without the GIL; the imported memory
    # is released there and its deleter runs later, with the GIL.
    n = 1 << 17
    a = np.ones(n, np.float32)
    ref = weakref.ref(a)
    x = chutney.from_dlpack(a)
    del a
    w = chutney.ones(n, requires_grad=True)
    loss = (x * w).sum()
    del x
    loss.backward()
    del loss
    gc.collect()
    assert live() == (0, 0) and ref() is None
    assert w.grad.sum().item() == n


def test_unconsumed_capsules_are_freed():
    t = chutney.ones(4)
    caps = [t.__dlpack__(), t.__dlpack__(max_version=(1, 0))]
    assert live()[0] == 2
    del caps
    assert live()[0] == 0


def test_exports_released_from_other_threads():
    t = chutney.arange(1000.0)
    arrays = [np.from_dlpack(t) for _ in range(50)]
    errors = []

    def drop(batch):
        try:
            for a in batch:
                assert a[999] == 999.0
            batch.clear()
            gc.collect()
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=drop, args=(arrays[i::5],)) for i in range(5)]
    del arrays
    for th in threads:
        th.start()
    for _ in range(200):
        t.add_(0)
    for th in threads:
        th.join()
    assert not errors
    assert live()[0] == 0


# ---- hand-made capsules ----

def test_foreign_capsule_legacy_and_versioned():
    a = np.arange(6.0).reshape(2, 3)
    for versioned in (False, True):
        p = Producer(a, strides=[3, 1], versioned=versioned)
        t = chutney.from_dlpack(p.capsule)
        assert t.tolist() == a.tolist() and p.deleted == 0
        a[0, 0] += 1
        assert t[0, 0].item() == a[0, 0]
        del t
        gc.collect()
        live()
        assert p.deleted == 1


def test_foreign_capsule_null_strides_and_byte_offset():
    a = np.arange(10, dtype=np.int32)
    p = Producer(a, shape=[2, 2], strides=None, byte_offset=8, code=0)
    t = chutney.from_dlpack(p.capsule)
    assert t.tolist() == [[2, 3], [4, 5]]
    del t
    live()
    assert p.deleted == 1


def test_foreign_readonly_capsule_is_copied():
    a = np.arange(4.0)
    p = Producer(a, versioned=True, flags=READ_ONLY)
    t = chutney.from_dlpack(p.capsule)
    assert p.deleted == 1  # copied: the producer's memory is released at once
    assert capsule_name(p.capsule) == "used_dltensor_versioned"
    t[0] = 9
    assert a[0] == 0.0 and t.tolist() == [9.0, 1.0, 2.0, 3.0]
    p2 = Producer(a, versioned=True, flags=READ_ONLY)
    with pytest.raises(BufferError, match="read-only"):
        chutney.from_dlpack(p2.capsule, copy=False)
    assert p2.deleted == 0 and capsule_name(p2.capsule) == "dltensor_versioned"


def test_chutney_capsule_made_readonly_is_copied():
    t = chutney.arange(3.0)
    cap = t.__dlpack__(max_version=(1, 0))
    managed_of(cap).flags |= READ_ONLY
    u = chutney.from_dlpack(cap)
    t[0] = 5
    assert u.tolist() == [0.0, 1.0, 2.0]
    assert live()[0] == 0  # the export was released right after the copy


def test_foreign_misaligned_data_is_copied():
    raw = np.arange(20, dtype=np.uint8)
    vals = np.array([1.5, -2.0, 3.25], np.float32)
    raw[1:13] = vals.view(np.uint8)
    p = Producer(raw, shape=[3], strides=[1], code=2, bits=32, byte_offset=1)
    t = chutney.from_dlpack(p.capsule)
    assert t.tolist() == [1.5, -2.0, 3.25] and p.deleted == 1


@pytest.mark.parametrize("kw,exc,match", [
    (dict(code=0, bits=16), TypeError, "int16"),
    (dict(code=1, bits=32), TypeError, "uint32"),
    (dict(code=5, bits=64), TypeError, "complex64"),
    (dict(code=2, bits=32, lanes=4), TypeError, "float32x4"),
    (dict(code=3, bits=64), TypeError, "opaque"),
    (dict(code=10, bits=8), TypeError, "code 10"),
    (dict(device=(2, 0)), BufferError, "cuda:0.*CPU"),
    (dict(device=(4, 1)), BufferError, "opencl:1"),
    (dict(device=(99, 0)), BufferError, "device type 99"),
    (dict(ndim=-1), ValueError, "axes"),
    (dict(ndim=9), ValueError, "axes"),
    (dict(shape=[2, -3]), ValueError, "negative size"),
    (dict(shape=[1 << 40, 1 << 40]), ValueError, "too large"),
    (dict(shape=[3, 5], strides=[1 << 62, 1]), ValueError, "address space"),
    (dict(data=False), ValueError, "NULL"),
    (dict(null_shape=True), ValueError, "no shape"),
    (dict(versioned=True, version=(2, 0)), BufferError, "DLPack 2.0"),
], ids=lambda x: str(x)[:30])
def test_foreign_capsule_errors_leave_it_unconsumed(kw, exc, match):
    a = np.zeros((3, 5), np.float32)
    kw = dict(kw)
    kw.setdefault("strides", [5, 1])
    p = Producer(a, **kw)
    name = capsule_name(p.capsule)
    with pytest.raises(exc, match=match):
        chutney.from_dlpack(p.capsule)
    assert capsule_name(p.capsule) == name and p.deleted == 0


def test_bad_arguments():
    with pytest.raises(TypeError, match="__dlpack__"):
        chutney.from_dlpack(3)
    with pytest.raises(TypeError, match="__dlpack__"):
        chutney.from_dlpack([1.0, 2.0])
    with pytest.raises(TypeError):
        chutney.from_dlpack()
    other = _capsule_new(ctypes.addressof(ctypes.c_int(1)), b"not_a_tensor", None)
    with pytest.raises(TypeError, match="not_a_tensor"):
        chutney.from_dlpack(other)

    class Junk:
        def __dlpack__(self, **kw):
            return 3

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(TypeError, match="not a DLPack capsule"):
        chutney.from_dlpack(Junk())

    class BadDevice:
        def __dlpack__(self, **kw):
            raise AssertionError("not called")

        def __dlpack_device__(self):
            return "cpu"

    with pytest.raises(TypeError, match="device_type"):
        chutney.from_dlpack(BadDevice())

    class OnGPU:
        def __dlpack__(self, **kw):
            raise AssertionError("not called")

        def __dlpack_device__(self):
            return (2, 1)

    with pytest.raises(BufferError, match="cuda:1"):
        chutney.from_dlpack(OnGPU())

    class Raises:
        def __dlpack__(self, **kw):
            raise ValueError("producer says no")

    with pytest.raises(ValueError, match="producer says no"):
        chutney.from_dlpack(Raises())

    class Legacy:  # no max_version: called again without it
        def __init__(self):
            self.calls = []

        def __dlpack__(self, stream=None):
            self.calls.append(stream)
            return chutney.arange(3.0).__dlpack__()

    lg = Legacy()
    assert chutney.from_dlpack(lg).tolist() == [0.0, 1.0, 2.0] and lg.calls == [None]

    t = chutney.ones(2)
    with pytest.raises(TypeError, match="max_version"):
        t.__dlpack__(max_version="1.0")
    with pytest.raises(TypeError, match="max_version"):
        t.__dlpack__(max_version=(1,))
    with pytest.raises(TypeError, match="copy"):
        t.__dlpack__(copy="yes")
    with pytest.raises(TypeError, match="stream"):
        t.__dlpack__(stream="s")
    with pytest.raises(TypeError, match="dl_device"):
        t.__dlpack__(dl_device="cpu")
    with pytest.raises(BufferError, match="cuda:0"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(TypeError):
        t.__dlpack__(bogus=1)
    with pytest.raises(TypeError):
        t.__dlpack_device__(1)
    # Accepted: None / an int stream (nothing to synchronise on the CPU),
    # dl_device=(1, 0), copy=False, a newer 1.x max_version, an old one.
    for kw in [dict(stream=None), dict(stream=-1), dict(dl_device=(1, 0)), dict(copy=False),
               dict(max_version=(1, 3)), dict(max_version=(0, 8))]:
        assert chutney.from_dlpack(t.__dlpack__(**kw)).tolist() == [1.0, 1.0]
    assert capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(2, 0))) == "dltensor_versioned"


def test_copy_true_export():
    t = chutney.arange(4.0)
    cap = t.__dlpack__(max_version=(1, 0), copy=True)
    assert managed_of(cap).flags == IS_COPIED
    u = chutney.from_dlpack(cap)
    t[0] = 10
    assert u.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_requires_grad_is_refused():
    w = chutney.ones(3, requires_grad=True)
    msg = "Can't export tensors that require gradient, use tensor.detach()"
    with pytest.raises(RuntimeError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        w.__dlpack__()
    with pytest.raises(RuntimeError, match="require gradient"):
        np.from_dlpack(w)
    with pytest.raises(RuntimeError, match="require gradient"):
        chutney.from_dlpack(w)
    a = np.from_dlpack(w.detach())
    assert a.tolist() == [1.0, 1.0, 1.0]
    assert w.__dlpack_device__() == (1, 0)


def test_bool_and_bfloat16_with_consumers_that_lack_them():
    # NumPy 1.24 has no DLPack bool nor bfloat16: it refuses, and the
    # capsule it did not consume is freed.
    for t in (chutney.tensor([True, False]), chutney.ones(2, dtype=chutney.bfloat16)):
        try:
            a = np.from_dlpack(t)
        except (RuntimeError, TypeError, BufferError):
            continue
        assert a.tolist() == t.tolist()
        del a
    assert live()[0] == 0


# ---- devices ----

needs_opencl = pytest.mark.skipif(chutney.device_count("opencl") == 0, reason="no OpenCL device")


@needs_opencl
def test_opencl_tensors():
    g = chutney.arange(4.0).to("opencl")
    assert g.__dlpack_device__() == (4, 0)
    with pytest.raises(BufferError, match=r"is on opencl:0.*\.cpu\(\)"):
        g.__dlpack__()
    with pytest.raises(BufferError, match="opencl:0"):
        np.from_dlpack(g)
    with pytest.raises(BufferError, match="opencl:0"):
        chutney.from_dlpack(g)
    with pytest.raises(BufferError, match="opencl:0"):
        g.__dlpack__(dl_device=(1, 0), copy=False)
    # A consumer that asks for the CPU explicitly gets a copy there.
    cap = g.__dlpack__(dl_device=(1, 0), copy=True, max_version=(1, 0))
    assert managed_of(cap).flags == IS_COPIED
    assert chutney.from_dlpack(cap).tolist() == [0.0, 1.0, 2.0, 3.0]
    # from_dlpack(..., device=) moves the import (a copy).
    h = chutney.from_dlpack(np.arange(3.0), device="opencl")
    assert h.device == "opencl:0" and h.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(BufferError, match="copy=False"):
        chutney.from_dlpack(np.arange(3.0), device="opencl", copy=False)


# ---- memory ----

def rss_bytes():
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


SANITIZED = "libasan" in os.environ.get("LD_PRELOAD", "")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_round_trips_keep_memory_flat():
    t = chutney.arange(100.0)
    a0 = np.arange(100.0)
    y = torch.arange(100.0) if torch is not None else None

    def trips(n):
        for i in range(n):
            a = np.from_dlpack(t)  # chutney -> NumPy
            u = chutney.from_dlpack(a0)  # NumPy -> chutney
            v = chutney.from_dlpack(t)  # chutney -> chutney
            if i % 4 == 0:
                c = t.__dlpack__(max_version=(1, 0))  # versioned, consumed by chutney
                chutney.from_dlpack(c)
                t.__dlpack__()  # never consumed
                if y is not None:
                    chutney.from_dlpack(y)  # torch -> chutney
                    chutney.from_dlpack(torch.utils.dlpack.from_dlpack(t))  # and back
            del a, u, v

    trips(10_000)
    gc.collect()
    before = rss_bytes()
    trips(100_000)
    gc.collect()
    grown = rss_bytes() - before
    assert live() == (0, 0)
    if not SANITIZED:
        assert grown < 8 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB"
