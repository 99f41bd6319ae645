"""torch.autograd.functional: jvp (forward mode, one pass) and vjp."""

from chutney import _C


def _tup(x):
    return (x,) if isinstance(x, _C.Tensor) else tuple(x)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), the Jacobian of func at inputs times v), computed in
    forward mode (each op's jvp rule) in one evaluation of func."""
    single = isinstance(inputs, _C.Tensor)
    ins = _tup(inputs)
    if v is None:
        if any(t.numel() != 1 for t in ins):
            raise ValueError("jvp: v is needed unless every input has one element")
        vs = tuple(_C.ones_like(t) for t in ins)
    else:
        vs = _tup(v)
    if len(vs) != len(ins):
        raise ValueError(f"jvp: {len(vs)} tangents for {len(ins)} inputs")
    _C._dual_begin()
    try:
        primals = []
        for x, t in zip(ins, vs):
            p = x.detach()
            _C._set_tangent(p, t)
            primals.append(p)
        out = func(*primals)
        outs = _tup(out)
        tangents = []
        for o in outs:
            t = _C._get_tangent(o)
            tangents.append(t if t is not None else _C.zeros_like(o))
        results = tuple(o.detach() for o in outs)
    finally:
        _C._dual_end()
    if isinstance(out, _C.Tensor):
        return results[0], tangents[0]
    del single
    return results, tuple(tangents)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), v times the Jacobian of func at inputs), in reverse mode."""
    single = isinstance(inputs, _C.Tensor)
    ins = tuple(x.detach().requires_grad_() for x in _tup(inputs))
    out = func(*ins)
    outs = _tup(out)
    grads = _C._grad(outs, ins, None if v is None else _tup(v), None, create_graph, True)
    grads = tuple(g if g is not None else _C.zeros_like(x) for g, x in zip(grads, ins))
    res = out.detach() if isinstance(out, _C.Tensor) else tuple(o.detach() for o in outs)
    return res, (grads[0] if single else grads)
