"""Reparametrising the library's layers.

A library layer (nn.modules._CLayer) computes its forward inside the C
library from the tensors the library holds, and accepts only a leaf
Parameter of the same shape in their place. A weight that is computed
(weight_norm, spectral_norm, a parametrization, functional_call) therefore
cannot reach the library's forward: while a layer has such a tensor, its
forward is replaced (on the instance) by the layer's functional form, which
reads the tensors as attributes each call, wherever they now come from.
"""

import types

from chutney.nn import functional as F

_MARK = "_chutney_functional_forward"


def _clayer():
    from chutney.nn.modules import _CLayer
    return _CLayer


def _conv_padding(m, x, nd):
    """The numeric padding, with 'same' padding done by F.pad where PyTorch
    pads one more element on the right/bottom than on the left/top."""
    p = m.padding
    if isinstance(p, str):
        if p == "valid":
            return x, 0
        if p != "same":
            raise ValueError(f"{type(m).__name__}: padding={p!r}")
        k = m.kernel_size if isinstance(m.kernel_size, (tuple, list)) else (m.kernel_size,) * nd
        d = m.dilation if isinstance(m.dilation, (tuple, list)) else (m.dilation,) * nd
        totals = [di * (ki - 1) for ki, di in zip(k, d)]
        if all(t % 2 == 0 for t in totals):
            return x, tuple(t // 2 for t in totals)
        pads = []
        for t in reversed(totals):  # F.pad lists the last axis first
            pads += [t // 2, t - t // 2]
        return F.pad(x, pads), 0
    return x, p


def _linear(m, x):
    return F.linear(x, m.weight, m.bias)


def _conv1d(m, x):
    x, p = _conv_padding(m, x, 1)
    return F.conv1d(x, m.weight, m.bias, m.stride, p, m.dilation, m.groups)


def _conv2d(m, x):
    x, p = _conv_padding(m, x, 2)
    return F.conv2d(x, m.weight, m.bias, m.stride, p, m.dilation, m.groups)


def _conv_transpose2d(m, x):
    return F.conv_transpose2d(x, m.weight, m.bias, m.stride, m.padding, m.output_padding,
                              m.groups, m.dilation)


def _embedding(m, x):
    out = F.embedding(x, m.weight)
    if m.padding_idx is not None:
        # PyTorch's embedding sends no gradient to the padding row.
        pad = (x == m.padding_idx).unsqueeze(-1)
        from chutney import _C
        out = _C.where(pad, out.detach(), out)
    return out


def _layer_norm(m, x):
    return F.layer_norm(x, m.normalized_shape, m.weight, m.bias, m.eps)


def _batch_norm(m, x):
    use_batch = m.training or not m.track_running_stats
    momentum = 0.0 if m.momentum is None else m.momentum
    return F.batch_norm(x, m.running_mean if m.track_running_stats else None,
                        m.running_var if m.track_running_stats else None, m.weight, m.bias,
                        use_batch, momentum, m.eps)


def _forward_for(module):
    from chutney.nn import modules as M
    # Subclasses before their bases (ConvTranspose2d is a _ConvNd).
    table = [(M.ConvTranspose2d, _conv_transpose2d), (M.Conv2d, _conv2d), (M.Conv1d, _conv1d),
             (M.Linear, _linear), (M.Embedding, _embedding), (M.LayerNorm, _layer_norm),
             (M._BatchNorm, _batch_norm)]
    for cls, fn in table:
        if isinstance(module, cls):
            return fn
    raise NotImplementedError(
        f"{type(module).__name__}: this library layer computes its forward in the C library and "
        f"Chutney has no functional form of it to compute from a reparametrised tensor (weight "
        f"norm, spectral norm, parametrizations and functional_call work on Linear, Conv1d, "
        f"Conv2d, ConvTranspose2d, Embedding, LayerNorm and on Python modules)")


def check(module):
    """Raise NotImplementedError now, before anything is changed, for a
    library layer that cannot be reparametrised."""
    if isinstance(module, _clayer()):
        _forward_for(module)


def _deepcopy(self, memo):
    # The copy is built by the layer's constructor, which registers every
    # library tensor again: drop those this layer has moved elsewhere.
    new = _clayer().__deepcopy__(self, memo)
    for name in self._c_names:
        if name not in self._parameters and name not in self._buffers:
            new._parameters.pop(name, None)
            new._buffers.pop(name, None)
    return new


def enter(module):
    """Make a library layer compute with its attributes (idempotent)."""
    if not isinstance(module, _clayer()) or module.__dict__.get(_MARK):
        return
    fn = _forward_for(module)
    object.__setattr__(module, "forward", types.MethodType(fn, module))
    object.__setattr__(module, "__deepcopy__", types.MethodType(_deepcopy, module))
    object.__setattr__(module, _MARK, True)


def leave(module, force=False):
    """Give a library layer its own forward back once every tensor of the
    library is registered under its name again (or at once with force)."""
    d = module.__dict__
    if not d.get(_MARK):
        return
    if not force:
        for name in module._c_names:
            if name not in module._parameters and name not in module._buffers:
                return
    for key in ("forward", "__deepcopy__", _MARK):
        d.pop(key, None)


def restore_tensor(module, name, tensor):
    """Register tensor as module.name again, as a parameter if it is one
    (a library layer takes it as its own tensor: tied, as
    `layer.weight = p` does)."""
    from chutney.nn.modules import Parameter
    if isinstance(tensor, Parameter):
        setattr(module, name, tensor)
    else:
        module.__dict__.pop(name, None)
        module.register_buffer(name, tensor)
    leave(module)
