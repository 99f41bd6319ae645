"""torch.utils.data: datasets, samplers, default_collate, DataLoader,
random_split, and the Fashion-MNIST files the library reads.

DataLoader batches in the calling thread (num_workers, pin_memory,
prefetch_factor and the other worker options are accepted and change
nothing): a TensorDataset under the default sampler and collate is batched
with one index_select (or one slice copied) per tensor, any other
dataset through its sampler, batch sampler and collate_fn, as PyTorch's
single-process loading does."""

import bisect
import collections.abc
import itertools
import math

from chutney import _C
from chutney._generator import drawing

try:
    import numpy as _np
except ImportError:  # the binding works without NumPy; so do its datasets
    _np = None


class Dataset:
    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: DataLoader iterates it (no sampler)."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the rows (first axis) of tensors of equal length."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = tensors[0].shape[0]
        if any(t.shape[0] != n for t in tensors):
            raise ValueError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class StackDataset(Dataset):
    """Samples of several datasets side by side: a tuple (positional) or a
    dict (keywords) of their samples at the same index."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        self.datasets = args or kwargs
        lengths = {len(d) for d in (args or kwargs.values())}
        if len(lengths) != 1:
            raise ValueError("Size mismatch between datasets")
        self._length = lengths.pop()

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self):
        return self._length


class ConcatDataset(Dataset):
    """The datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        if idx >= len(self):
            raise IndexError(f"index {idx} out of range for a dataset of {len(self)}")
        i = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[i - 1] if i else 0
        return self.datasets[i][idx - start]


class ChainDataset(IterableDataset):
    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


class Subset(Dataset):
    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices.tolist() if hasattr(indices, "tolist") else list(indices)

    def __getitem__(self, i):
        if isinstance(i, list):
            return [self.dataset[self.indices[j]] for j in i]
        return self.dataset[self.indices[i]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Subsets of the given lengths, or of fractions of len(dataset) summing
    to 1 (floor of each, the remainder spread one by one from the first, as
    PyTorch), drawn from generator (a chutney.Generator) or from
    chutney.manual_seed's stream."""
    n = len(dataset)
    lengths = list(lengths)
    if lengths and all(0 <= k <= 1 for k in lengths) and math.isclose(sum(lengths), 1) and \
            sum(lengths) <= 1 and not all(isinstance(k, int) for k in lengths):
        sizes = [int(math.floor(n * k)) for k in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    with drawing(generator):
        perm = _C.randperm(n).tolist()
    out, start = [], 0
    for k in lengths:
        out.append(Subset(dataset, perm[start:start + k]))
        start += k
    return out


# ---- samplers ----

class Sampler:
    """Indices (or, for a batch sampler, lists of indices) of a dataset."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new permutation each epoch (or num_samples draws with replacement),
    from generator or chutney.manual_seed's stream."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, k = len(self.data_source), self.num_samples
        with drawing(self.generator):
            if self.replacement:
                return iter(_C.randint(0, n, (k,)).tolist())
            idx = []
            while len(idx) < k:
                idx += _C.randperm(n).tolist()
        return iter(idx[:k])

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    def __init__(self, indices, generator=None):
        self.indices, self.generator = list(indices), generator

    def __iter__(self):
        with drawing(self.generator):
            perm = _C.randperm(len(self.indices)).tolist()
        return iter([self.indices[i] for i in perm])

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices drawn with probabilities proportional to
    weights (with or without replacement)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        w = weights.tolist() if hasattr(weights, "tolist") else list(weights)
        self.weights = _C.tensor(w, dtype=_C.float64)
        if self.weights.dim() != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(self.weights.shape)}")
        self.num_samples, self.replacement, self.generator = num_samples, replacement, generator

    def __iter__(self):
        from chutney._tensor_extras import multinomial
        return iter(multinomial(self.weights, self.num_samples, self.replacement,
                                generator=self.generator).tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of batch_size indices from sampler (the last one shorter unless
    drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class DistributedSampler(Sampler):
    """The part of a dataset one of num_replicas processes reads: each
    epoch's order (shuffled from seed + epoch: call set_epoch) padded to a
    multiple of num_replicas (or cut, drop_last), every num_replicas-th
    index from rank."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        num_replicas = 1 if num_replicas is None else num_replicas
        rank = 0 if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            from chutney._generator import Generator
            with drawing(Generator().manual_seed(self.seed + self.epoch)):
                idx = _C.randperm(n).tolist()
        else:
            idx = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(idx)
            idx += (idx * math.ceil(pad / max(len(idx), 1)))[:pad]
        else:
            idx = idx[:self.total_size]
        return iter(idx[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples


# ---- collation ----

def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_convert(data):
    """NumPy arrays and numbers to tensors, inside containers (what
    DataLoader does to samples when batch_size is None)."""
    if isinstance(data, _C.Tensor):
        return data
    if _np is not None and isinstance(data, _np.ndarray) and data.dtype.kind in "biuf":
        return _C.as_tensor(data)
    if _np is not None and isinstance(data, _np.generic) and data.dtype.kind in "biuf":
        return _C.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return {k: default_convert(v) for k, v in data.items()}
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return [default_convert(d) for d in data]
    return data


def default_collate(batch):
    """A list of samples to a batch, as PyTorch: tensors and NumPy arrays
    stacked along a new first axis, Python ints / floats / bools to int64 /
    float64 / bool tensors, NumPy scalars to tensors of their dtype, strings
    left as a list, and dicts, named tuples and sequences collated field by
    field."""
    elem = batch[0]
    if isinstance(elem, _C.Tensor):
        return _C.stack(list(batch), 0)
    if _np is not None and isinstance(elem, (_np.ndarray, _np.generic)) and \
            type(elem).__module__ == "numpy":
        if elem.dtype.kind not in "biuf":
            raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, "
                            f"numbers, dicts or lists; found {elem.dtype}")
        if isinstance(elem, _np.ndarray):
            return _C.stack([_C.as_tensor(b) for b in batch], 0)
        return _C.as_tensor(_np.array(batch))
    if isinstance(elem, bool):
        return _C.tensor(list(batch), dtype=_C.bool)
    if isinstance(elem, float):
        return _C.tensor(list(batch), dtype=_C.float64)
    if isinstance(elem, int):
        return _C.tensor(list(batch), dtype=_C.int64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {k: default_collate([d[k] for d in batch]) for k in elem}
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        n = len(elem)
        if any(len(b) != n for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(s)) for s in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                    f"dicts or lists; found {type(elem)}")


_collate = default_collate  # the name this module used before


def get_worker_info():
    """None: loading runs in the calling process (no workers)."""
    return None


class DataLoader:
    """Batches of a dataset: PyTorch's DataLoader in its single-process form.

    shuffle=True draws a new order each epoch (from generator or
    chutney.manual_seed's stream); sampler, batch_sampler and collate_fn
    are PyTorch's; batch_size=None yields single samples through
    default_convert; an IterableDataset is read as a stream and batched in
    order. num_workers, pin_memory, timeout, worker_init_fn, prefetch_factor,
    persistent_workers and the multiprocessing context are accepted and
    change nothing: loading happens in the calling thread."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        self.dataset, self.num_workers = dataset, num_workers
        self.pin_memory, self.timeout, self.worker_init_fn = pin_memory, timeout, worker_init_fn
        self.prefetch_factor, self.persistent_workers = prefetch_factor, persistent_workers
        self.generator = generator
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        else:
            if sampler is not None and shuffle:
                raise ValueError("sampler option is mutually exclusive with shuffle")
            if batch_sampler is not None:
                if batch_size != 1 or shuffle or sampler is not None or drop_last:
                    raise ValueError("batch_sampler option is mutually exclusive with "
                                     "batch_size, shuffle, sampler, and drop_last")
                batch_size, drop_last = None, False
            elif batch_size is None and drop_last:
                raise ValueError("batch_size=None option disables auto-batching and is mutually "
                                 "exclusive with drop_last")
            elif batch_size is not None and (not isinstance(batch_size, int) or
                                             isinstance(batch_size, bool) or batch_size <= 0):
                raise ValueError(f"batch_size should be a positive integer value, but got "
                                 f"batch_size={batch_size}")
            if sampler is None:
                sampler = (RandomSampler(dataset, generator=generator) if shuffle
                           else SequentialSampler(dataset))
            if batch_size is not None and batch_sampler is None:
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self._iterable = iterable
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self._default_collate = collate_fn is None
        if collate_fn is None:
            collate_fn = default_collate if (batch_size is not None or batch_sampler is not None) \
                else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)

    def __iter__(self):
        if self._iterable:
            yield from self._iter_stream()
            return
        if self.batch_sampler is None:
            for i in self.sampler:
                yield self.collate_fn(self.dataset[i])
            return
        tensors = (self.dataset.tensors if type(self.dataset) is TensorDataset and
                   self._default_collate and type(self.batch_sampler) is BatchSampler and
                   type(self.sampler) in (SequentialSampler, RandomSampler) else None)
        if tensors is not None and type(self.sampler) is SequentialSampler:
            # Unshuffled batches of a TensorDataset: copies of slices (as
            # PyTorch's collation copies), so that changing a batch in place
            # leaves the dataset as it was.
            n, b = len(self.dataset), self.batch_size
            for start in range(0, n, b):
                if self.drop_last and start + b > n:
                    break
                yield [t[start:start + b].clone() for t in tensors]
            return
        for ids in self.batch_sampler:
            if tensors is not None:
                idx = _C.tensor(ids, dtype=_C.int64, device=tensors[0].device)
                yield [t.index_select(0, idx) for t in tensors]
            else:
                yield self.collate_fn([self.dataset[i] for i in ids])

    def _iter_stream(self):
        it = iter(self.dataset)
        if self.batch_size is None:
            for sample in it:
                yield self.collate_fn(sample)
            return
        while True:
            batch = list(itertools.islice(it, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield self.collate_fn(batch)


def load_fashion_mnist(root=None, train=True, raw=False):
    """(images, labels) of Fashion-MNIST from root (default
    /usr/share/datasets/fashion-mnist): images float32 [N, 1, 28, 28] in
    [0, 1] (uint8 0..255 with raw=True), labels int64 [N]."""
    return _C.load_fashion_mnist(root, train, raw)


class FashionMNIST(TensorDataset):
    def __init__(self, root=None, train=True):
        super().__init__(*load_fashion_mnist(root, train))
