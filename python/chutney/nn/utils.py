"""torch.nn.utils: gradient clipping (in place on the .grad of each
parameter), parameters as one vector, and rnn.pad_sequence."""

from chutney import _C
from chutney.autograd import no_grad


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    """Scale the gradients so their norm_type-norm is at most max_norm;
    returns the norm before clipping (a 0-d tensor)."""
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    return _C.clip_grad_norm_(list(parameters), float(max_norm), norm_type)


def clip_grad_value_(parameters, clip_value):
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    _C.clip_grad_value_(list(parameters), float(clip_value))


def parameters_to_vector(parameters):
    return _C.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of vec into the parameters (in place)."""
    start = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec.narrow(0, start, n).reshape(*p.shape))
            start += n


class rnn:  # noqa: N801 (torch.nn.utils.rnn)
    @staticmethod
    def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
        """[T_i, *] tensors padded to the longest: [T, B, *], or [B, T, *]
        with batch_first."""
        seqs = list(sequences)
        if not seqs:
            raise RuntimeError("pad_sequence: received an empty list of sequences")
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
