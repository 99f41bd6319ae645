"""torch.autograd.gradcheck and gradgradcheck: the Jacobians of a function
from chutney.autograd.grad (analytical) and from central differences
(numerical), compared element by element."""

import warnings

from chutney import _C

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck and gradgradcheck when raise_exception is True."""


def _as_tuple(x):
    if isinstance(x, _C.Tensor):
        return (x,)
    return tuple(x)


def _tensor_outputs(out):
    return tuple(o for o in _as_tuple(out) if isinstance(o, _C.Tensor))


def _differentiable(t):
    return isinstance(t, _C.Tensor) and t.requires_grad


def _flat_one_hot(t, j, value):
    d = _C.zeros(t.numel(), dtype=t.dtype, device=t.device)
    d[j] = value
    return d.reshape(*t.shape) if t.dim() else d.reshape(())


def _numerical(func, inputs, diff_idx, outputs, eps):
    """jac[a][o]: [numel of input a, numel of output o], by central
    differences; each evaluation gets fresh inputs (requiring a gradient
    where the originals do, for functions that differentiate inside)."""
    jac = []
    for i in diff_idx:
        x = inputs[i]
        cols = [[] for _ in outputs]
        for j in range(x.numel()):
            delta = _flat_one_hot(x, j, eps)
            vals = []
            for sign in (1.0, -1.0):
                args = list(inputs)
                args[i] = (x.detach() + delta * sign).requires_grad_(True)
                vals.append([o.detach() for o in _tensor_outputs(func(*args))])
            for k in range(len(outputs)):
                diff = (vals[0][k].to(_C.float64) - vals[1][k].to(_C.float64)) / (2 * eps)
                cols[k].append(diff.reshape(-1))
        jac.append([_C.stack(c, 0) if c else _C.zeros(0, outputs[k].numel(),
                                                         dtype=_C.float64)
                    for k, c in enumerate(cols)])
    return jac


def _analytical(inputs, diff_idx, outputs):
    """jac[a][o] like _numerical's, a row per input element, from one
    chutney.autograd.grad per output element; None when a gradient has the
    wrong shape (the message in the second value)."""
    from chutney.autograd import grad
    diff_inputs = [inputs[i] for i in diff_idx]
    jac = [[None] * len(outputs) for _ in diff_idx]
    for k, o in enumerate(outputs):
        rows = [[] for _ in diff_idx]
        for e in range(o.numel()):
            if _differentiable(o):
                gs = grad((o,), diff_inputs, (_flat_one_hot(o, e, 1.0),), retain_graph=True,
                          allow_unused=True)
            else:
                gs = (None,) * len(diff_inputs)
            for a, (x, g) in enumerate(zip(diff_inputs, gs)):
                if g is None:
                    g = _C.zeros(*x.shape, dtype=_C.float64, device=x.device)
                elif tuple(g.shape) != tuple(x.shape):
                    return None, (f"Gradient for input {diff_idx[a]} has shape "
                                  f"{tuple(g.shape)}, the input's is {tuple(x.shape)}")
                rows[a].append(g.detach().to(_C.float64).reshape(-1))
        for a, x in enumerate(diff_inputs):
            jac[a][k] = (_C.stack(rows[a], 1) if rows[a]
                         else _C.zeros(x.numel(), 0, dtype=_C.float64))
    return jac, None


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              check_sparse_nnz=False, nondet_tol=0.0, check_undefined_grad=True,
              check_grad_dtypes=False, check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False):
    """Whether the gradients of func at inputs (those requiring a gradient,
    best float64) from chutney.autograd.grad agree with central differences
    of step eps: |analytical - numerical| <= atol + rtol * |numerical| for
    every element of every Jacobian. On a mismatch raises GradcheckError
    (raise_exception) or returns False.

    Only the reverse-mode check is done: fast_mode computes the full
    Jacobians too; check_forward_ad, check_batched_grad and
    check_batched_forward_grad are not supported; the reentrancy
    (nondet_tol), undefined-gradient and sparse checks are not made."""
    if check_forward_ad or check_batched_grad or check_batched_forward_grad:
        raise NotImplementedError("gradcheck: only the reverse-mode check is supported "
                                  "(check_forward_ad, check_batched_grad and "
                                  "check_batched_forward_grad must be False)")
    inputs = _as_tuple(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if _differentiable(x)]
    if not diff_idx:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of the them have requires_grad=True.")
    for i in diff_idx:
        if inputs[i].dtype != _C.float64:
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating "
                          f"point or complex. This check will likely fail if all the inputs are "
                          f"not of double precision floating point or complex.", stacklevel=2)

    def fail(msg):
        if raise_exception:
            raise GradcheckError(msg)
        return False

    if not check_backward_ad:
        return True
    outputs = tuple(o for o in _tensor_outputs(func(*inputs)) if o.is_floating_point())
    if not outputs:
        return True
    analytical, err = _analytical(inputs, diff_idx, outputs)
    if err is not None:
        return fail(err)
    numerical = _numerical(func, inputs, diff_idx, outputs, eps)
    for a, i in enumerate(diff_idx):
        for k, o in enumerate(outputs):
            n, an = numerical[a][k], analytical[a][k]
            if not _differentiable(o):
                if n.numel() and float(n.abs().max()) > atol:
                    return fail(f"Numerical gradient for function expected to be zero "
                                f"(output {k} does not require a gradient), input {i}")
                continue
            if n.numel() and not bool(((an - n).abs() <= atol + rtol * n.abs()).all()):
                return fail(f"Jacobian mismatch for output {k} with respect to input {i},\n"
                            f"numerical:{n}\nanalytical:{an}\n")
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False):
    """gradcheck of the gradients of func (computed with create_graph=True
    and seeded by grad_outputs, uniform in [-1, 1) when not given) with
    respect to the inputs and grad_outputs: second derivatives."""
    from chutney.autograd import grad
    if check_fwd_over_rev or check_batched_grad:
        raise NotImplementedError("gradgradcheck: only the reverse-over-reverse check is "
                                  "supported")
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        outs = [o for o in _tensor_outputs(func(*inputs)) if _differentiable(o)]
        grad_outputs = tuple((_C.rand(*o.shape) * 2 - 1).to(dtype=o.dtype, device=o.device)
                             .requires_grad_(True) for o in outs)
    else:
        grad_outputs = _as_tuple(grad_outputs)
    n_out = len(grad_outputs)

    def grads_of(*args):
        xs, seeds = args[:len(args) - n_out], args[len(args) - n_out:]
        outs = [o for o in _tensor_outputs(func(*xs)) if _differentiable(o)]
        diff = [x for x in xs if _differentiable(x)]
        if len(outs) != len(seeds):
            raise GradcheckError(f"gradgradcheck: {len(seeds)} grad_outputs for {len(outs)} "
                                 f"differentiable outputs")
        gs = grad(outs, diff, seeds, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    if not check_rev_over_rev:
        return True
    return gradcheck(grads_of, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol, fast_mode=fast_mode)
