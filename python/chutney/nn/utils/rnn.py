"""torch.nn.utils.rnn: batches of sequences of different lengths.

A PackedSequence holds PyTorch's layout: `data` [sum of lengths, *] with the
steps in time order and, within a step, the sequences that are still going
from longest to shortest; `batch_sizes[t]` counts them. Packing and
unpacking are one gather each (so gradients flow through them), and RNN,
LSTM and GRU run a PackedSequence over each sequence's own length: a step
past a sequence's end keeps its state, so h_n is each sequence's state after
its last step and the reverse direction starts there.
"""

from collections import namedtuple

from chutney import _C


def _lengths_list(lengths):
    if hasattr(lengths, "tolist"):
        lengths = lengths.tolist()
    out = [int(n) for n in lengths]
    if any(n <= 0 for n in out):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element "
                           "in 'lengths' that is <= 0")
    return out


def _index(values, device=None):
    return _C.tensor(values, dtype=_C.int64, device=device)


class PackedSequence(namedtuple("PackedSequence",
                                ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:
            raise TypeError("PackedSequence: batch_sizes is required (build one with "
                            "pack_padded_sequence or pack_sequence)")
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _invert(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data):
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args, **kwargs):
        return self._with_data(self.data.to(*args, **kwargs))

    def cpu(self):
        return self._with_data(self.data.cpu())

    def cuda(self, *args, **kwargs):
        return self._with_data(self.data.cuda(*args, **kwargs))

    def float(self):
        return self._with_data(self.data.float())

    def double(self):
        return self._with_data(self.data.double())

    def half(self):
        return self._with_data(self.data.half())

    def detach(self):
        return self._with_data(self.data.detach())

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return False


def _invert(perm):
    p = perm.tolist() if hasattr(perm, "tolist") else list(perm)
    inv = [0] * len(p)
    for i, j in enumerate(p):
        inv[j] = i
    return _index(inv)


def _batch_sizes(sorted_lengths):
    T = sorted_lengths[0] if sorted_lengths else 0
    return [sum(1 for n in sorted_lengths if n > t) for t in range(T)]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """input [T, B, *] ([B, T, *] with batch_first), sequence b valid for its
    first lengths[b] steps -> PackedSequence."""
    lens = _lengths_list(lengths)
    B = input.shape[0 if batch_first else 1]
    T = input.shape[1 if batch_first else 0]
    if len(lens) != B:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lens)} (batch_size={B})")
    if lens and max(lens) > T:
        raise RuntimeError(f"pack_padded_sequence: a length of {max(lens)} for an input of "
                           f"{T} steps")
    if enforce_sorted:
        if any(lens[i] < lens[i + 1] for i in range(len(lens) - 1)):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                               "`enforce_sorted` is True. You can pass `enforce_sorted=False` "
                               "to pack_padded_sequence and/or pack_sequence to sidestep this "
                               "requirement if you do not need ONNX exportability.")
        order, sorted_indices = list(range(B)), None
    else:
        # A stable sort, longest first, as torch.sort(descending=True) gives.
        order = sorted(range(B), key=lambda b: -lens[b])
        sorted_indices = _index(order)
    sl = [lens[b] for b in order]
    sizes = _batch_sizes(sl)
    rows = []
    for t, n in enumerate(sizes):
        for j in range(n):
            b = order[j]
            rows.append(b * T + t if batch_first else t * B + b)
    flat = input.reshape(B * T, *input.shape[2:])
    data = flat.index_select(0, _index(rows, input.device))
    return PackedSequence(data, _index(sizes), sorted_indices,
                          None if sorted_indices is None else _invert(order))


def _sorted_lengths(batch_sizes):
    sizes = batch_sizes.tolist() if hasattr(batch_sizes, "tolist") else list(batch_sizes)
    B = sizes[0] if sizes else 0
    return sizes, [sum(1 for n in sizes if n > j) for j in range(B)]


def _padded(data, sizes, columns, T, B, padding_value):
    """[T, B, *] from packed data: sorted sequence j to column columns[j],
    padding_value past each sequence's end."""
    rest = tuple(data.shape[1:])
    filler = len(data) if data.shape[0] else 0
    src = [filler] * (T * B)
    k = 0
    for t, n in enumerate(sizes):
        for j in range(n):
            src[t * B + columns[j]] = k
            k += 1
    pad = _C.full((1,) + rest, padding_value, dtype=data.dtype, device=data.device)
    full = _C.cat([data, pad], 0) if data.shape[0] else pad
    return full.index_select(0, _index(src, data.device)).reshape(T, B, *rest)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """PackedSequence -> (padded [T, B, *] or [B, T, *], lengths): the
    inverse of pack_padded_sequence, in the batch's original order."""
    sizes, sl = _sorted_lengths(sequence.batch_sizes)
    B, T = len(sl), len(sizes)
    if total_length is not None:
        if total_length < T:
            raise ValueError(f"Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {T}")
        T = total_length
    order = (sequence.sorted_indices.tolist() if sequence.sorted_indices is not None
             else list(range(B)))
    out = _padded(sequence.data, sizes, order, T, B, padding_value)
    lengths = [0] * B
    for j, b in enumerate(order):
        lengths[b] = sl[j]
    if batch_first:
        out = out.transpose(0, 1)
    return out, _index(lengths)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """[T_i, *] tensors padded to the longest: [T, B, *], or [B, T, *]
    with batch_first."""
    seqs = list(sequences)
    if not seqs:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise ValueError(f"padding_side should be either 'right' or 'left', but got "
                         f"{padding_side}")
    longest = max(s.shape[0] for s in seqs)
    out = []
    for s in seqs:
        k = longest - s.shape[0]
        if k:
            filler = _C.full((k,) + tuple(s.shape[1:]), padding_value, dtype=s.dtype,
                             device=s.device)
            s = _C.cat([s, filler] if padding_side == "right" else [filler, s], 0)
        out.append(s)
    return _C.stack(out, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The inverse of pad_sequence: a list of [lengths[b], *] tensors."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[b].narrow(0, 0, n) for b, n in enumerate(_lengths_list(lengths))]


def pack_sequence(sequences, enforce_sorted=True):
    """A list of [T_i, *] tensors -> PackedSequence."""
    seqs = list(sequences)
    return pack_padded_sequence(pad_sequence(seqs), [s.shape[0] for s in seqs],
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """PackedSequence -> the list of [T_i, *] tensors it was packed from."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def _run_packed(module, packed, hx, c0=None):
    """An RNN, LSTM or GRU over a PackedSequence: (output PackedSequence,
    h_n, c_n or None), the states in the batch's original order."""
    sizes, sl = _sorted_lengths(packed.batch_sizes)
    B, T = len(sl), len(sizes)
    x = _padded(packed.data, sizes, list(range(B)), T, B, 0.0)  # [T, B, *], sorted
    if module.batch_first:
        x = x.transpose(0, 1)
    si = packed.sorted_indices
    if si is not None:
        hx = hx.index_select(1, si) if hx is not None else None
        c0 = c0.index_select(1, si) if c0 is not None else None
    y, h, c = module._c.rnn_forward(x, hx, c0, sl)
    if module.batch_first:
        y = y.transpose(0, 1)
    rows = [t * B + j for t, n in enumerate(sizes) for j in range(n)]
    data = y.reshape(T * B, y.shape[2]).index_select(0, _index(rows, y.device))
    ui = packed.unsorted_indices
    if ui is not None:
        h = h.index_select(1, ui)
        c = c.index_select(1, ui) if c is not None else None
    return packed._with_data(data), h, c
