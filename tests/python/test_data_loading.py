"""torch.utils.data's pieces against PyTorch's (Debian's python3-torch):
default_collate's structures and dtypes, the samplers, DataLoader's
argument rules, IterableDataset batching, ConcatDataset, the
DistributedSampler's partition, and chutney.Generator streams."""

import collections

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
cdata, tdata = chutney.utils.data, torch.utils.data


def _plain(x):
    """A nested structure of tensors as (type name, dtype, values)."""
    if isinstance(x, (chutney.Tensor, torch.Tensor)):
        return ("tensor", str(x.dtype).split(".")[-1], x.tolist())
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return (type(x).__name__,) + tuple(_plain(v) for v in x)
    if isinstance(x, (list, tuple)):
        return [type(x).__name__] + [_plain(v) for v in x]
    return x


Point = collections.namedtuple("Point", "x y")


def test_default_collate_like_torch():
    rng = np.random.default_rng(0)
    samples = [
        {"image": rng.standard_normal((2, 3)).astype(np.float32), "label": i, "w": 0.5 * i,
         "ok": i % 2 == 0, "name": f"s{i}", "np_int": np.int32(i), "np_f": np.float64(i / 3),
         "pair": (i, [1.5, 2.5]), "pt": Point(i, 2 * i)}
        for i in range(3)]
    got = cdata.default_collate(samples)
    want = tdata.default_collate(samples)
    assert _plain(got) == _plain(want)
    ts = [(chutney.tensor([i, i + 1]), chutney.tensor(float(i))) for i in range(4)]
    tts = [(torch.tensor([i, i + 1]), torch.tensor(float(i))) for i in range(4)]
    assert _plain(cdata.default_collate(ts)) == _plain(tdata.default_collate(tts))
    with pytest.raises(RuntimeError, match="equal size"):
        cdata.default_collate([[1, 2], [3]])
    assert _plain(cdata.default_convert({"a": np.arange(3), "b": (np.float32(2), "x")})) == \
        _plain(tdata.default_convert({"a": np.arange(3), "b": (np.float32(2), "x")}))


class Squares(cdata.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i * i


class TSquares(tdata.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i * i


def test_loader_arguments_and_orders_like_torch():
    for kw in (dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None),
               dict(batch_sampler=[[1, 4], [0], [2, 3, 5]]),
               dict(sampler=[6, 0, 3], batch_size=2)):
        c = cdata.DataLoader(Squares(7), **kw)
        t = tdata.DataLoader(TSquares(7), **kw)
        assert len(c) == len(t), kw
        assert [_plain(b) for b in c] == [_plain(b) for b in t], kw
    for bad in (dict(sampler=[0], shuffle=True), dict(batch_sampler=[[0]], batch_size=2),
                dict(batch_size=None, drop_last=True), dict(batch_size=0)):
        with pytest.raises(ValueError):
            tdata.DataLoader(TSquares(3), **bad)
        with pytest.raises(ValueError):
            cdata.DataLoader(Squares(3), **bad)
    # Shuffled: every index once per epoch, a different order per epoch.
    chutney.manual_seed(3)
    loader = cdata.DataLoader(Squares(50), batch_size=8, shuffle=True)
    e1 = [v for b in loader for v in b.tolist()]
    e2 = [v for b in loader for v in b.tolist()]
    assert sorted(e1) == sorted(e2) == [i * i for i in range(50)] and e1 != e2


def test_iterable_dataset_and_concat_like_torch():
    class CStream(cdata.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    class TStream(tdata.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    for kw in (dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None)):
        assert [_plain(b) for b in cdata.DataLoader(CStream(), **kw)] == \
            [_plain(b) for b in tdata.DataLoader(TStream(), **kw)]
    with pytest.raises(ValueError):
        cdata.DataLoader(CStream(), shuffle=True)
    c = cdata.ConcatDataset([Squares(3), Squares(2)]) + Squares(4)
    t = tdata.ConcatDataset([TSquares(3), TSquares(2)]) + TSquares(4)
    assert len(c) == len(t) == 9
    assert [c[i] for i in range(-9, 9)] == [t[i] for i in range(-9, 9)]
    assert c.cumulative_sizes == t.cumulative_sizes
    s = cdata.StackDataset(Squares(3), Squares(3))
    assert s[2] == (4, 4) and len(s) == 3


def test_samplers_like_torch():
    ds = list(range(10))
    for bs, dl in ((3, False), (3, True), (5, False)):
        assert list(cdata.BatchSampler(cdata.SequentialSampler(ds), bs, dl)) == \
            list(tdata.BatchSampler(tdata.SequentialSampler(ds), bs, dl))
        assert len(cdata.BatchSampler(ds, bs, dl)) == len(tdata.BatchSampler(ds, bs, dl))
    for n, reps, dl in ((10, 3, False), (10, 3, True), (11, 4, False), (2, 3, False)):
        for rank in range(reps):
            want = list(tdata.distributed.DistributedSampler(list(range(n)), reps, rank,
                                                             shuffle=False, drop_last=dl))
            got = list(cdata.DistributedSampler(list(range(n)), reps, rank, shuffle=False,
                                                drop_last=dl))
            assert got == want, (n, reps, dl, rank)
    parts = [list(cdata.DistributedSampler(ds, 3, r, seed=5)) for r in range(3)]
    assert set(sum(parts, [])) == set(ds) and all(len(p) == 4 for p in parts)
    assert parts != [list(range(r, 12, 3)) for r in range(3)]  # shuffled
    r = cdata.RandomSampler(ds, replacement=True, num_samples=25)
    assert len(list(r)) == len(r) == 25 and all(0 <= i < 10 for i in r)
    assert sorted(cdata.SubsetRandomSampler([3, 5, 7])) == [3, 5, 7]
    chutney.manual_seed(0)
    w = cdata.WeightedRandomSampler([0.1, 0.0, 0.9], 4000)
    counts = np.bincount(list(w), minlength=3)
    assert counts[1] == 0 and abs(counts[2] / 4000 - 0.9) < 0.03
    assert sorted(cdata.WeightedRandomSampler([1, 1, 1, 1], 4, replacement=False)) == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        cdata.BatchSampler(ds, 0, False)


def test_generator_streams():
    g1 = chutney.Generator().manual_seed(42)
    g2 = chutney.Generator().manual_seed(42)
    chutney.manual_seed(7)
    a = chutney.randn(5, generator=g1)
    b = chutney.randn(5)  # the global stream is not moved by g1
    chutney.manual_seed(7)
    assert chutney.randn(5).tolist() == b.tolist()
    assert chutney.randn(5, generator=g2).tolist() == a.tolist()
    chutney.manual_seed(42)
    assert chutney.randn(5).tolist() == a.tolist()  # g's numbers are manual_seed's
    assert g1.initial_seed() == 42
    st = g1.get_state()
    x = chutney.randperm(9, generator=g1).tolist()
    g1.set_state(st)
    assert chutney.randperm(9, generator=g1).tolist() == x
    p = chutney.tensor([0.2, 0.3, 0.5])
    assert chutney.multinomial(p, 6, True, generator=chutney.Generator().manual_seed(1)).tolist() \
        == chutney.multinomial(p, 6, True, generator=chutney.Generator().manual_seed(1)).tolist()
    ds = cdata.TensorDataset(chutney.arange(20))
    s1 = cdata.random_split(ds, [0.7, 0.3], generator=chutney.Generator().manual_seed(42))
    s2 = cdata.random_split(ds, [14, 6], generator=chutney.Generator().manual_seed(42))
    assert s1[0].indices == s2[0].indices and len(s1[1]) == 6
    l1 = cdata.DataLoader(ds, batch_size=4, shuffle=True, generator=chutney.Generator().manual_seed(3))
    l2 = cdata.DataLoader(ds, batch_size=4, shuffle=True, generator=chutney.Generator().manual_seed(3))
    assert [b[0].tolist() for b in l1] == [b[0].tolist() for b in l2]
    with pytest.raises(TypeError):
        chutney.randn(2, generator=3)


def test_batches_are_copies_not_views_of_the_dataset():
    X = chutney.arange(6.0).reshape(6, 1)
    for (xb,) in cdata.DataLoader(cdata.TensorDataset(X), batch_size=2):
        xb.sub_(100)
    assert X.reshape(-1).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_random_fills_take_generators_and_refuse_leaves():
    a = chutney.zeros(5).uniform_(generator=chutney.Generator().manual_seed(9))
    b = chutney.zeros(5).uniform_(generator=chutney.Generator().manual_seed(9))
    assert a.tolist() == b.tolist()
    n1 = chutney.zeros(4).normal_(generator=chutney.Generator().manual_seed(2))
    n2 = chutney.zeros(4).normal_(generator=chutney.Generator().manual_seed(2))
    assert n1.tolist() == n2.tolist()
    w = chutney.ones(3, requires_grad=True)
    for fill in (w.uniform_, w.normal_, w.bernoulli_, w.exponential_):
        with pytest.raises(RuntimeError, match="leaf Variable"):
            fill()
    with chutney.no_grad():
        w.normal_()  # how initialisers write into parameters
