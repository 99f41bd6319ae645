"""Reference counts and scopes: a million small ops leave memory flat; the
objects the binding hands out are freed with their last reference."""

import gc
import os
import weakref

import pytest

import chutney


def rss_bytes():
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")

# Under AddressSanitizer freed memory waits in a quarantine: RSS is not flat
# there (the loops still run, for the sanitizer's sake).
SANITIZED = "libasan" in os.environ.get("LD_PRELOAD", "")


def assert_flat(grown):
    if not SANITIZED:
        assert grown < 8 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB"


def loop(n, size):
    x = chutney.zeros(size)
    a = chutney.ones(size)
    for _ in range(n):
        x = x + a
    return x


@pytest.mark.parametrize("size", [1, 100])
def test_a_million_adds_keep_memory_flat(size):
    loop(100_000, size)  # warm up: caches, the allocator's pools
    gc.collect()
    before = rss_bytes()
    x = loop(1_000_000, size)
    gc.collect()
    grown = rss_bytes() - before
    assert x[0].item() == 1_000_000
    assert_flat(grown)  # a leaked tensor struct per op alone would be > 100 MB


def test_training_steps_keep_memory_flat():
    model = chutney.nn.Sequential(chutney.nn.Linear(8, 16), chutney.nn.ReLU(),
                                  chutney.nn.Linear(16, 2))
    opt = chutney.optim.Adam(model.parameters())
    x, y = chutney.randn(4, 8), chutney.tensor([0, 1, 1, 0])
    export = _has_numpy()

    def steps(n):
        for _ in range(n):
            opt.zero_grad()
            loss = chutney.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            loss.item()
            x[1:3, ::2] = x[0, ::2]
            if export:
                model[0].weight.detach().numpy()

    steps(2000)
    gc.collect()
    before = rss_bytes()
    steps(20000)
    gc.collect()
    assert_flat(rss_bytes() - before)


def _has_numpy():
    try:
        import numpy  # noqa: F401
        return True
    except ImportError:
        return False


def test_objects_are_freed_with_their_last_reference():
    t = chutney.ones(3)
    r = weakref.ref(t)
    v = t[1:]
    del t
    assert r() is None  # the Python object; the view keeps the memory
    assert v.tolist() == [1.0, 1.0]
    m = chutney.nn.Linear(2, 2)
    rm = weakref.ref(m)
    w = m.weight
    del m
    gc.collect()
    assert rm() is None and w.shape == (2, 2)  # the parameter outlives the layer
    opt = chutney.optim.SGD([w], lr=0.1)
    del w
    opt.step()


def test_borrowed_numpy_buffers_are_released():
    np = pytest.importorskip("numpy")
    before = chutney._C._num_borrowed()
    for _ in range(10000):
        a = np.ones(16, dtype=np.float32)
        t = chutney.from_numpy(a)
        (t * 2).sum()
    del a, t
    assert chutney._C._num_borrowed() == before


def test_long_autograd_chains_are_freed():
    w = chutney.ones(4, requires_grad=True)
    x = w
    for _ in range(100_000):
        x = x * 1.0
    x.sum().backward()
    assert w.grad.tolist() == [1.0] * 4
    del x
    gc.collect()
