"""nn.AdaptiveLogSoftmaxWithLoss (Grave et al.'s adaptive softmax): a head
over the shortlist of frequent classes plus one entry per tail cluster,
each cluster a low-rank projection (in_features // div_value**(i+1)) to its
classes."""

import collections

from chutney import _C
from chutney.nn.modules import Linear, Module, ModuleList, Sequential

_ASMoutput = collections.namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    def __init__(self, in_features, n_classes, cutoffs, div_value=4., head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if (cutoffs != sorted(cutoffs) or not cutoffs or min(cutoffs) <= 0 or
                max(cutoffs) > n_classes - 1 or len(set(cutoffs)) != len(cutoffs) or
                any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in "
                             "an increasing order, where each value is between 1 and "
                             "n_classes-1")
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        kw = dict(device=device, dtype=dtype)
        self.head = Linear(in_features, self.head_size, bias=head_bias, **kw)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            width = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, **kw),
                                        Linear(hidden, width, bias=False, **kw)))

    def forward(self, input_, target_):
        if target_.dim() == 1:
            if input_.shape[0] != target_.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch "
                                   "dimension.")
            if input_.dim() != 2:
                raise RuntimeError("1D target tensor expects 2D input tensors, but found inputs "
                                   f"with size {tuple(input_.shape)}")
        elif target_.dim() == 0:
            if input_.dim() != 1:
                raise RuntimeError("0D target tensor expects 1D input tensors, but found inputs "
                                   f"with size {tuple(input_.shape)}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = target_.dim() > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        labels = target.tolist()
        bad = [t for t in labels if not 0 <= t < self.n_classes]
        if bad:
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values "
                               f"in range [{min(labels)}, {max(labels)}] were found. ")
        # the head's column of each row: its class, or its cluster's entry
        head_col, rows, parts = [], [], []
        bounds = [0] + self.cutoffs
        for t in labels:
            c = next(i for i in range(len(bounds) - 1) if t < bounds[i + 1])
            head_col.append(t if c == 0 else self.shortlist_size + c - 1)
        for c in range(1, len(bounds) - 1):
            members = [r for r, t in enumerate(labels) if bounds[c] <= t < bounds[c + 1]]
            if not members:
                continue
            idx = _C.tensor(members, dtype=_C.int64, device=input.device)
            logp = self.tail[c - 1](input.index_select(0, idx)).log_softmax(1)
            local = _C.tensor([labels[r] - bounds[c] for r in members], dtype=_C.int64,
                              device=input.device)
            rows += members
            parts.append(logp.gather(1, local.unsqueeze(1)).squeeze(1))
        head_logp = self.head(input).log_softmax(1)
        cols = _C.tensor(head_col, dtype=_C.int64, device=input.device)
        output = head_logp.gather(1, cols.unsqueeze(1)).squeeze(1)
        if parts:
            # each tail row's term put back at its row, zeros for shortlist rows
            n = len(labels)
            tail_rows = set(rows)
            order = rows + [r for r in range(n) if r not in tail_rows]
            pad = n - len(rows)
            values = _C.cat(parts + ([_C.zeros(pad, dtype=output.dtype, device=output.device)]
                                     if pad else []))
            where = [0] * n
            for k, r in enumerate(order):
                where[r] = k
            output = output + values.index_select(
                0, _C.tensor(where, dtype=_C.int64, device=output.device))
        loss = (-output).mean()
        if not batched:
            output = output.squeeze(0)
        return _ASMoutput(output, loss)

    def _full_log_prob(self, input, head_output):
        head_logp = head_output.log_softmax(1)
        pieces = [head_logp.narrow(1, 0, self.shortlist_size)]
        for i in range(self.n_clusters):
            pieces.append(self.tail[i](input).log_softmax(1) +
                          head_logp.narrow(1, self.shortlist_size + i, 1))
        return _C.cat(pieces, 1)

    def log_prob(self, input):
        """Log-probabilities of every class: [N, n_classes]."""
        return self._full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most probable class of each row (the full distribution is
        computed only for rows whose head prefers a cluster)."""
        head_output = self.head(input)
        best = head_output.argmax(1)
        if not bool((best >= self.shortlist_size).any()):
            return best
        return self._full_log_prob(input, head_output).argmax(1)

    def reset_parameters(self):
        for m in self.modules():
            if isinstance(m, Linear) and hasattr(m, "reset_parameters"):
                m.reset_parameters()
