"""torch.autograd.functional: jvp (forward mode), vjp, jacobian, hessian,
hvp and vhp, with PyTorch 1.13's arguments, return structures and errors.

Every function takes a Tensor or a tuple of Tensors as inputs; results for a
tuple come back as tuples, for a Tensor as Tensors. Unless create_graph=True
the results carry no history. With strict=True an input that an output does
not depend on is an error; otherwise its part of the result is zeros.

Differences from PyTorch: vectorize=True is accepted and gives the same
values, but the rows (or columns) are still computed one pass at a time
(there is no batching transform); jvp is true forward mode (PyTorch 1.13
uses the double-backward trick) and so ignores create_graph; jacobian and
hessian with the forward-mode strategy return tuples where PyTorch 1.13
returns lists.
"""

import threading

from chutney import _C

# How many forward-mode regions this thread has open through this module or
# chutney.func. A region opened inside another hides the outer one's
# tangents (the library keeps one generation per region), so nested forward
# mode must not open a second one: chutney.func falls back to reverse mode.
_state = threading.local()


def _dual_depth():
    return getattr(_state, "dual", 0)


class _dual_region:
    def __enter__(self):
        _C._dual_begin()
        _state.dual = _dual_depth() + 1
        return self

    def __exit__(self, *exc):
        _state.dual = _dual_depth() - 1
        _C._dual_end()
        return False


def _tup(x):
    return (x,) if isinstance(x, _C.Tensor) else tuple(x)


def _as_tuple(x, what, fn):
    """(was it a tuple, x as a tuple of Tensors), with PyTorch's TypeError."""
    is_tuple = not isinstance(x, _C.Tensor)
    items = tuple(x) if isinstance(x, (tuple, list)) else (x,)
    for i, el in enumerate(items):
        if not isinstance(el, _C.Tensor):
            where = f"value at index {i}" if is_tuple and isinstance(x, (tuple, list)) else f"given {what}"
            raise TypeError(f"The {what} given to {fn} must be either a Tensor or a tuple of Tensors "
                            f"but the {where} has type {type(el)}.")
    return is_tuple and isinstance(x, (tuple, list)), items


def _unpack(res, is_tuple):
    return res if is_tuple else res[0]


def _unpack2(res, outer_tuple, inner_tuple):
    if not inner_tuple:
        res = tuple(r[0] for r in res)
    return res if outer_tuple else res[0]


def _fresh(x, keep_graph):
    """A new tensor object with x's values that requires grad. A new object
    (even for a tensor that already requires grad) separates the inputs
    given to the function from the same tensors captured by its closure.
    keep_graph: gradients still flow on to x (create_graph). A forward-mode
    tangent on x is kept, so a reverse pass inside a forward one (hessian
    with forward-mode, chutney.func's jacfwd of jacrev) sees it."""
    if keep_graph and x.requires_grad:
        return x.view_as(x)
    tangent = _C._get_tangent(x)
    y = x.detach()
    if tangent is not None:
        _C._set_tangent(y, tangent)
    return y.requires_grad_()


def _grad(outputs, inputs, grad_outputs=None, create_graph=False):
    """autograd.grad over the outputs that require grad only, with None for
    the inputs nothing depends on (the record is kept for later passes)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    outs = tuple(o for o, _ in pairs)
    seeds = tuple(g for _, g in pairs)
    if all(g is None for g in seeds):
        seeds = None
    elif any(g is None for g in seeds):
        seeds = tuple(_C.ones_like(o) if g is None else g for o, g in zip(outs, seeds))
    return _C._grad(outs, tuple(inputs), seeds, True, create_graph, True)


def _validate_v(v, ref, ref_is_tuple):
    if len(v) != len(ref):
        if ref_is_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(ref)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, ref)):
        if tuple(a.shape) != tuple(b.shape):
            where = f"Entry {i} in " if ref_is_tuple else ""
            raise RuntimeError(f"{where}v has invalid size: should be {b.shape} but got {a.shape}.")


def _check_outputs(outputs, strict):
    if strict:
        for i, o in enumerate(outputs):
            if not o.requires_grad:
                raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. "
                                   "The outputs must be computed in a differentiable manner from the "
                                   "input when running in strict mode.")


def _zeros_for_none(grads, refs, strict, create_graph, what):
    """None (independent) -> zeros, or the strict-mode error. what names the
    derivative in the message: 'output' for a first pass, 'jacobian' /
    'hessian' for the second."""
    res = []
    for i, (g, r) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                if what == "output":
                    raise RuntimeError(f"The output of the user-provided function is independent of input {i}. "
                                       "This is not allowed in strict mode.")
                raise RuntimeError(f"The {what} of the user-provided function is independent of input {i}. "
                                   "This is not allowed in strict mode.")
            g = _C.zeros_like(r)
        elif strict and create_graph and not g.requires_grad:
            kind = "jacobian" if what == "output" else "hessian"
            raise RuntimeError(f"The {kind} of the user-provided function is independent of input {i}. "
                               "This is not allowed in strict mode when create_graph=True.")
        res.append(g)
    return tuple(res)


def _finish(ts, create_graph):
    return tuple(t.detach() for t in ts) if not create_graph else tuple(ts)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), the Jacobian of func at inputs times v), computed in
    forward mode (each op's jvp rule) in one evaluation of func."""
    is_in_tuple, ins = _as_tuple(inputs, "inputs", "jvp")
    if v is None:
        if len(ins) != 1 or ins[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function "
                               "is a single Tensor with a single element.")
        vs = (_C.ones_like(ins[0]),)
    else:
        _, vs = _as_tuple(v, "v", "jvp")
        _validate_v(vs, ins, is_in_tuple)
    with _dual_region():
        primals = []
        for x, t in zip(ins, vs):
            p = x.detach()
            _C._set_tangent(p, t.detach())
            primals.append(p)
        out = func(*primals)
        is_out_tuple, outs = _as_tuple(out, "outputs of the user-provided function", "jvp")
        tangents = []
        for i, o in enumerate(outs):
            t = _C._get_tangent(o)
            if t is None:
                if strict:
                    raise RuntimeError(f"The output {i} of the user-provided function is independent of the "
                                       "inputs. This is not allowed in strict mode.")
                t = _C.zeros_like(o)
            tangents.append(t.detach())
        results = tuple(o.detach() for o in outs)
    return _unpack(results, is_out_tuple), _unpack(tuple(tangents), is_out_tuple)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), v times the Jacobian of func at inputs), in reverse mode."""
    with _C_enable_grad():
        is_in_tuple, ins = _as_tuple(inputs, "inputs", "vjp")
        ins = tuple(_fresh(x, create_graph) for x in ins)
        is_out_tuple, outs = _as_tuple(func(*ins), "outputs of the user-provided function", "vjp")
        _check_outputs(outs, strict)
        if v is not None:
            _, vs = _as_tuple(v, "v", "vjp")
            vs = tuple(t if create_graph and t.requires_grad else t.detach() for t in vs)
            _validate_v(vs, outs, is_out_tuple)
        else:
            if len(outs) != 1 or outs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the user-provided function returns a "
                                   "single Tensor with a single element.")
            vs = None
    with _C_set_grad(True if create_graph else _C.is_grad_enabled()):
        grads = _grad(outs, ins, vs, create_graph)
        grads = _zeros_for_none(grads, ins, strict, create_graph, "output")
    return (_unpack(_finish(outs, create_graph), is_out_tuple),
            _unpack(_finish(grads, create_graph), is_in_tuple))


def _jacobian_reverse(func, inputs, create_graph, strict, fn_name="jacobian"):
    with _C_enable_grad():
        is_in_tuple, ins = _as_tuple(inputs, "inputs", fn_name)
        ins = tuple(_fresh(x, create_graph) for x in ins)
        is_out_tuple, outs = _as_tuple(func(*ins), "outputs of the user-provided function", fn_name)
        _check_outputs(outs, strict)
        jac = []
        for i, out in enumerate(outs):
            rows = [[] for _ in ins]
            flat = out.reshape(-1)
            # One reverse pass per output element: a row of every input's block.
            for j in range(out.numel()):
                grads = _grad((flat[j],), ins, None, create_graph)
                for k, (g, x) in enumerate(zip(grads, ins)):
                    if g is None:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is independent of "
                                               f"input {k}. This is not allowed in strict mode.")
                        g = _C.zeros_like(x)
                    elif strict and create_graph and not g.requires_grad:
                        raise RuntimeError(f"The jacobian of the user-provided function is independent of "
                                           f"input {i}. This is not allowed in strict mode when "
                                           "create_graph=True.")
                    rows[k].append(g)
            blocks = []
            for k, x in enumerate(ins):
                shape = tuple(out.shape) + tuple(x.shape)
                if rows[k]:
                    blocks.append(_C.stack(rows[k], 0).reshape(shape))
                else:
                    blocks.append(_C.zeros(shape, dtype=x.dtype, device=x.device))
            jac.append(_finish(blocks, create_graph))
    return _unpack2(tuple(jac), is_out_tuple, is_in_tuple)


def _jacobian_forward(func, inputs, strict, vectorize):
    if strict:
        raise RuntimeError('torch.autograd.functional.jacobian: `strict=True` and '
                           '`strategy="forward-mode"` are not supported together (yet). Please either '
                           'set `strict=False` or `strategy="reverse-mode"`.')
    if not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian "
                                  "is only implemented for `vectorize=True`.")
    is_in_tuple, ins = _as_tuple(inputs, "inputs", "jacobian")
    # One forward pass per input element: a column of every output's block.
    cols = None
    is_out_tuple, outs = False, ()
    for k, x in enumerate(ins):
        for j in range(x.numel()):
            with _dual_region():
                primals = []
                for m, y in enumerate(ins):
                    p = _fresh(y, True) if y.requires_grad else y.detach()
                    t = _C.zeros((y.numel(),), dtype=y.dtype, device=y.device)
                    if m == k:
                        t[j] = 1
                    _C._set_tangent(p, t.reshape(tuple(y.shape)))
                    primals.append(p)
                is_out_tuple, res = _as_tuple(func(*primals), "outputs", "jacobian")
                tans = []
                for o in res:
                    t = _C._get_tangent(o)
                    tans.append(_C.zeros_like(o) if t is None else t)
                outs = tuple(o.detach() for o in res)
            if cols is None:
                cols = [[[] for _ in ins] for _ in outs]
            for i, t in enumerate(tans):
                cols[i][k].append(t.detach())
    jac = []
    for i, o in enumerate(outs):
        blocks = []
        for k, x in enumerate(ins):
            shape = tuple(o.shape) + tuple(x.shape)
            if cols[i][k]:
                # Columns are stacked last: the input's axes come after the output's.
                blocks.append(_C.stack(cols[i][k], -1).reshape(shape))
            else:
                blocks.append(_C.zeros(shape, dtype=o.dtype, device=o.device))
        jac.append(tuple(blocks))
    return _unpack2(tuple(jac), is_out_tuple, is_in_tuple)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of func at inputs: for one output and one input a Tensor
    of shape output.shape + input.shape; a tuple over inputs and/or outputs
    where those are tuples (jac[i][j]: output i, input j).

    strategy='reverse-mode' takes one reverse pass per output element;
    'forward-mode' (which, as in PyTorch 1.13, needs vectorize=True) one
    forward-mode pass per input element. vectorize only changes which
    options are allowed here: the passes are not batched."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError('torch.autograd.functional.jacobian: `create_graph=True` and '
                                      '`strategy="forward-mode"` are not supported together (yet). '
                                      'Please either set `create_graph=False` or `strategy="reverse-mode"`.')
        return _jacobian_forward(func, inputs, strict, vectorize)
    if vectorize and strict:
        raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are "
                           "not supported together. Please either set `strict=False` or `vectorize=False`.")
    return _jacobian_reverse(func, inputs, create_graph, strict)


def _scalar_output(out, strict, fn):
    is_tuple, outs = _as_tuple(out, "outputs of the user-provided function", fn)
    _check_outputs(outs, strict)
    if is_tuple:
        raise RuntimeError(f"The function given to {fn} should return a single Tensor")
    if outs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn} should contain a single element")
    return outs[0]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function with one single-element output: for one
    input a Tensor of shape input.shape + input.shape, for a tuple of n
    inputs an n-by-n tuple of tuples (h[i][j]: inputs i and j). The
    Jacobian of the (differentiable) Jacobian."""
    is_in_tuple, ins = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def scalar_func(*xs):
        return _scalar_output(func(*xs), strict, "hessian").reshape(())

    def jac_func(*xs):
        jac = jacobian(scalar_func, xs, create_graph=True)
        if strict:
            for i, g in enumerate(jac):
                if not g.requires_grad:
                    raise RuntimeError(f"While computing the hessian, found that the jacobian of the "
                                       f"user-provided function with respect to input {i} is independent "
                                       "of the input. This is not allowed in strict mode. You should ensure "
                                       "that your function is twice differentiable and that the jacobian "
                                       "depends on the inputs (this would be violated by a linear function "
                                       "for example).")
        return jac

    res = jacobian(jac_func, ins, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _unpack2(res, is_in_tuple, is_in_tuple)


def _hessian_products(fn, func, inputs, v, create_graph, strict):
    with _C_enable_grad():
        is_in_tuple, ins = _as_tuple(inputs, "inputs", fn)
        ins = tuple(_fresh(x, create_graph) for x in ins)
        if v is not None:
            _, vs = _as_tuple(v, "v", fn)
            vs = tuple(t if create_graph and t.requires_grad else t.detach() for t in vs)
            _validate_v(vs, ins, is_in_tuple)
        else:
            if len(ins) != 1 or ins[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the user-provided function "
                                   "is a single Tensor with a single element.")
            vs = None
        out = _scalar_output(func(*ins), strict, fn)
        jac = _grad((out,), ins, None, True)
        if strict:
            for i, g in enumerate(jac):
                if g is None:
                    raise RuntimeError(f"The output of the user-provided function is independent of input {i}. "
                                       "This is not allowed in strict mode.")
                if not g.requires_grad:
                    raise RuntimeError(f"While computing the hessian, found that the jacobian of the "
                                       f"user-provided function with respect to input {i} is independent "
                                       "of the input. This is not allowed in strict mode. You should ensure "
                                       "that your function is twice differentiable and that the jacobian "
                                       "depends on the inputs (this would be violated by a linear function "
                                       "for example).")
        if fn == "hvp":
            # H v = (v^T H)^T needs a second reverse pass through u -> u^T H,
            # which is linear in u: differentiate it with respect to u.
            us = tuple(_C.zeros_like(x).requires_grad_() for x in ins)
            uh = _grad(jac, ins, us, True)
            vs_h = vs if vs is not None else (_C.ones_like(ins[0]),)
            first, wrt = uh, us
        else:
            first, wrt = jac, ins
            vs_h = vs
    with _C_set_grad(True if create_graph else _C.is_grad_enabled()):
        res = _grad(first, wrt, vs_h, create_graph)
        res = _zeros_for_none(res, ins, strict, create_graph, "hessian" if fn == "hvp" else "jacobian")
    return _finish((out,), create_graph)[0], _unpack(_finish(res, create_graph), is_in_tuple)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), v^T times the Hessian of func at inputs)."""
    return _hessian_products("vhp", func, inputs, v, create_graph, strict)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), the Hessian of func at inputs times v), by two reverse
    passes through v^T H (no forward mode, as PyTorch 1.13)."""
    return _hessian_products("hvp", func, inputs, v, create_graph, strict)


class _C_set_grad:
    def __init__(self, mode):
        self.mode = bool(mode)

    def __enter__(self):
        self.prev = _C._set_grad_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False


def _C_enable_grad():
    return _C_set_grad(True)
