"""Errors: each library error is a Python exception of the fitting type with
the library's message; nothing a Python caller passes crashes the
interpreter."""

import itertools

import pytest

import chutney
import chutney.nn.functional as F


def test_shape_errors_are_value_errors_with_the_library_message():
    a, b = chutney.ones(2, 3), chutney.ones(2, 3)
    with pytest.raises(ValueError, match=r"matmul: a is \[2, 3\] and b is \[2, 3\]"):
        a @ b
    with pytest.raises(ValueError):
        a + chutney.ones(4)
    with pytest.raises(ValueError):
        a.reshape(5)
    with pytest.raises(ValueError):
        a.sum(dim=2)
    with pytest.raises(ValueError):
        a.transpose(0, 5)
    with pytest.raises(ValueError):
        chutney.cat([a, chutney.ones(2, 2)])
    with pytest.raises(ValueError):
        F.conv2d(chutney.ones(1, 2, 5, 5), chutney.ones(3, 1, 3, 3))


def test_dtype_errors_are_type_errors():
    with pytest.raises(TypeError, match="float"):
        chutney.ones(2, dtype=chutney.int64).requires_grad_()
    with pytest.raises(TypeError):
        F.nll_loss(chutney.ones(2, 3), chutney.ones(2))
    with pytest.raises(TypeError):
        chutney.ones(2, dtype="nope")
    with pytest.raises(TypeError):
        chutney.nn.Embedding(3, 2)(chutney.ones(2))


def test_other_errors():
    with pytest.raises(IndexError):
        chutney.ones(3)[3]
    with pytest.raises(RuntimeError):
        chutney.ones(2).backward()
    with pytest.raises(TypeError):
        chutney.ones(2) + "a"
    with pytest.raises(TypeError):
        chutney.ones(2) * [1, 2, 3]
    with pytest.raises(FileNotFoundError):
        chutney.load("/nonexistent/file.safetensors")
    with pytest.raises(FileNotFoundError):
        chutney.load_npy("/nonexistent/file.npy")
    with pytest.raises(ValueError):
        chutney.device("gpu")


def test_the_error_message_is_cleared():
    with pytest.raises(ValueError):
        chutney.ones(2) @ chutney.ones(3)
    # A later success must not see the old message.
    assert (chutney.ones(2) @ chutney.ones(2)).item() == 2.0


JUNK = [None, "x", -1, 0, 10**30, -(10**30), 1.5, float("nan"), float("inf"), [], [1, [2]], (1, 2, 3),
        {}, object(), b"\x00", chutney.tensor(1.0), chutney.ones(3, 3), chutney.zeros(0),
        chutney.ones(2, dtype=chutney.int64), chutney.ones(2, dtype=chutney.bool), slice(None),
        Ellipsis, chutney.float64, chutney.ones(2, requires_grad=True)]


def _call_quietly(fn, *args):
    try:
        fn(*args)
    except (ValueError, TypeError, IndexError, RuntimeError, OverflowError, NotImplementedError,
            MemoryError, OSError, AttributeError, KeyError, BufferError):
        pass


def test_no_method_crashes_on_junk_arguments():
    """Every Tensor method with zero, one and two junk arguments: exceptions
    are fine, a crash would end the test run."""
    skip = {"__init__", "__new__", "__init_subclass__", "__subclasshook__", "__reduce__",
            "__reduce_ex__", "__getstate__", "__setattr__", "__delattr__", "__class__",
            "__dir__", "__sizeof__", "__format__"}
    names = [n for n in dir(chutney.Tensor) if n not in skip and callable(getattr(chutney.Tensor, n))]
    assert len(names) > 150
    for name in names:
        for recv in (chutney.arange(6.0).reshape(2, 3), chutney.tensor(2), chutney.zeros(0, 2)):
            m = getattr(recv, name)
            _call_quietly(m)
            for a in JUNK:
                _call_quietly(m, a)
            for a, b in itertools.product(JUNK[::3], JUNK[1::4]):
                _call_quietly(m, a, b)


def test_no_function_crashes_on_junk_arguments():
    mods = [chutney, chutney.nn.functional, chutney.nn.init]
    skip = {"manual_seed", "set_num_threads", "set_rng_state", "set_default_device", "save",
            "save_npy", "empty", "zeros", "ones", "full", "rand", "randn", "randint", "eye",
            "arange", "linspace", "normal", "randperm", "empty_cache", "load_fashion_mnist",
            "synchronize"}
    for mod in mods:
        for name in dir(mod):
            fn = getattr(mod, name)
            if name.startswith("_") or name in skip or isinstance(fn, type) or not callable(fn):
                continue
            if getattr(fn, "__module__", "chutney").split(".")[0] not in ("chutney",):
                continue
            for a in JUNK:
                _call_quietly(fn, a)
            for a, b in itertools.product(JUNK[::2], JUNK[1::3]):
                _call_quietly(fn, a, b)
    assert chutney.set_num_threads(chutney.get_num_threads()) is None


def test_creation_with_junk_sizes():
    for fn in (chutney.zeros, chutney.ones, chutney.empty, chutney.rand, chutney.randn):
        for size in ([-1], [2, -3], [None], ["a"], [[1, 2], 3], [(1,) * 9], [2**62, 2**62]):
            with pytest.raises((ValueError, TypeError, OverflowError, MemoryError)):
                fn(*size)
    with pytest.raises((ValueError, MemoryError)):
        chutney.zeros(2**40, 2**20)
    with pytest.raises((ValueError, TypeError)):
        chutney.randint(5, 1, (3,))
    with pytest.raises(ValueError):
        chutney.tensor([[[[[[[[[[1]]]]]]]]]])


def test_modules_with_junk():
    for args in [(-1, 2), (3, -5)]:
        with pytest.raises((ValueError, RuntimeError)):
            chutney.nn.Linear(*args)
    lin = chutney.nn.Linear(3, 2)
    with pytest.raises(ValueError):
        lin(chutney.ones(2, 4))
    with pytest.raises(TypeError):
        lin([1, 2, 3])
    with pytest.raises(ValueError):
        chutney.nn.Conv2d(1, 1, 0)
    with pytest.raises((ValueError, TypeError)):
        chutney.nn.LSTM(3, 4)(chutney.ones(2, 5))
