"""torch.utils.data: Dataset, TensorDataset, DataLoader, random_split, and
the Fashion-MNIST files the library reads.

DataLoader batches in the calling thread: a TensorDataset is batched with
one index_select per tensor (a view for unshuffled batches), any other
dataset by stacking its samples. There are no worker processes."""

from chutney import _C


class Dataset:
    def __getitem__(self, index):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError


class TensorDataset(Dataset):
    """Samples are the rows (first axis) of tensors of equal length."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = tensors[0].shape[0]
        if any(t.shape[0] != n for t in tensors):
            raise ValueError("size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, i):
        return self.dataset[self.indices[i]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Subsets of the given lengths, or of fractions of len(dataset) summing
    to 1 (floor of each, the remainder spread one by one from the first, as
    PyTorch), from chutney.manual_seed's generator."""
    n = len(dataset)
    lengths = list(lengths)
    if lengths and all(isinstance(k, float) and 0 <= k <= 1 for k in lengths) and \
            abs(sum(lengths) - 1) < 1e-9:
        sizes = [int(n * k) for k in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
    if sum(lengths) != n:
        raise ValueError("sum of input lengths does not equal the length of the input dataset")
    perm = _C.randperm(n).tolist()
    out, start = [], 0
    for k in lengths:
        out.append(Subset(dataset, perm[start:start + k]))
        start += k
    return out


def _collate(samples):
    first = samples[0]
    if isinstance(first, _C.Tensor):
        return _C.stack(samples)
    if isinstance(first, (int, float, bool)):
        return _C.tensor(samples)
    if isinstance(first, (tuple, list)):
        return [_collate([s[i] for s in samples]) for i in range(len(first))]
    if isinstance(first, dict):
        return {k: _collate([s[k] for s in samples]) for k in first}
    return samples


class DataLoader:
    """Batches of a dataset, reshuffled each epoch with shuffle=True (from the
    library's generator: chutney.manual_seed makes it repeatable)."""

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, collate_fn=None,
                 num_workers=0, **kwargs):
        if batch_size is None or batch_size <= 0:
            raise ValueError("batch_size must be a positive integer")
        self.dataset, self.batch_size = dataset, batch_size
        self.shuffle, self.drop_last = shuffle, drop_last
        self.collate_fn = collate_fn

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        n = len(self.dataset)
        order = _C.randperm(n) if self.shuffle else None
        fast = isinstance(self.dataset, TensorDataset) and self.collate_fn is None
        for start in range(0, n, self.batch_size):
            stop = min(start + self.batch_size, n)
            if self.drop_last and stop - start < self.batch_size:
                break
            if fast:
                if order is None:
                    yield [t[start:stop] for t in self.dataset.tensors]
                else:
                    idx = order[start:stop]
                    yield [t.index_select(0, idx) for t in self.dataset.tensors]
                continue
            ids = order[start:stop].tolist() if order is not None else range(start, stop)
            samples = [self.dataset[i] for i in ids]
            yield (self.collate_fn or _collate)(samples)


def load_fashion_mnist(root=None, train=True, raw=False):
    """(images, labels) of Fashion-MNIST from root (default
    /usr/share/datasets/fashion-mnist): images float32 [N, 1, 28, 28] in
    [0, 1] (uint8 0..255 with raw=True), labels int64 [N]."""
    return _C.load_fashion_mnist(root, train, raw)


class FashionMNIST(TensorDataset):
    def __init__(self, root=None, train=True):
        super().__init__(*load_fashion_mnist(root, train))
