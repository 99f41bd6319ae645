"""Threads: long kernels run without the GIL while other threads use
chutney and Python; results stay right and nothing crashes or deadlocks."""

import threading
import time

import pytest

import chutney


def run_threads(targets, seconds):
    stop = time.monotonic() + seconds
    errors = []

    def wrap(fn):
        def body():
            try:
                while time.monotonic() < stop:
                    fn()
            except BaseException as e:  # noqa: BLE001 (reported below)
                errors.append(e)
        return body

    threads = [threading.Thread(target=wrap(fn)) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a thread hangs"
    assert not errors, errors


def test_shared_tensors_from_many_threads():
    chutney.manual_seed(0)
    w = chutney.randn(256, 256)
    x = chutney.randn(512, 256)
    expected = (x @ w).sum().item()
    big = chutney.randn(2_000_000)
    big_sum = big.sum().item()

    def matmuls():
        got = (x @ w).sum().item()
        assert abs(got - expected) <= 1e-3 * max(1.0, abs(expected))

    def reductions():
        assert abs(big.sum().item() - big_sum) <= 1e-2 * max(1.0, abs(big_sum))

    def small_ops():
        y = w[0] + 1
        z = w.T[3:7] * 2
        assert y.shape == (256,) and z.shape == (4, 256)
        del y, z

    def copies():
        c = (w + 0).clone()
        c.add_(1)
        assert c[0, 0].item() == pytest.approx(w[0, 0].item() + 1, rel=1e-6)

    run_threads([matmuls, matmuls, reductions, small_ops, copies], seconds=2.0)


def test_training_in_threads():
    def train_once():
        model = chutney.nn.Sequential(chutney.nn.Linear(64, 256), chutney.nn.ReLU(),
                                      chutney.nn.Linear(256, 4))
        opt = chutney.optim.Adam(model.parameters(), lr=1e-2)
        x = chutney.randn(256, 64)
        y = chutney.randint(0, 4, (256,))
        first = None
        for _ in range(20):
            opt.zero_grad()
            loss = chutney.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            first = first if first is not None else loss.item()
        assert loss.item() < first

    run_threads([train_once, train_once, train_once], seconds=2.0)


def test_python_runs_during_a_long_kernel():
    a = chutney.randn(768, 768)
    done = threading.Event()
    ticks = [0]

    def worker():
        for _ in range(6):
            a @ a
        done.set()

    def counter():
        while not done.is_set():
            ticks[0] += 1

    t1 = threading.Thread(target=worker)
    t2 = threading.Thread(target=counter)
    t1.start()
    t2.start()
    t1.join(60)
    t2.join(60)
    assert done.is_set() and ticks[0] > 0


def test_numpy_buffers_released_from_threads():
    np = pytest.importorskip("numpy")
    before = chutney._C._num_borrowed()
    w = chutney.ones(64, 64, requires_grad=True)

    def f():
        t = chutney.from_numpy(np.ones((64, 64), dtype=np.float32))
        loss = (t @ w).sum()
        del t  # the record holds the array's memory; backward frees it
        loss.backward()

    run_threads([f, f], seconds=1.0)
    assert chutney._C._num_borrowed() == before
