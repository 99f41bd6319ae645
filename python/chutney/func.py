"""torch.func (PyTorch 2's functorch): functional_call, grad,
grad_and_value, vjp, jvp, jacrev, jacfwd, hessian and vmap.

Arguments and results may be nested tuples, lists and dicts of Tensors, as
in PyTorch. The transforms compose (grad of grad, jacrev of grad, jacfwd of
jacrev, vmap of grad, vmap of vmap, ...).

How they are computed, and how that differs from PyTorch:

- grad, vjp and jacrev run func once and take reverse passes with
  chutney.autograd.grad (one pass per output element for jacrev). A
  gradient is computed with create_graph=True only where it may be
  differentiated again: grad mode is on and an argument requires grad or
  carries a forward-mode tangent, or the call is inside another transform
  of this module. Otherwise results are returned detached, like PyTorch's.
  A gradient differentiated later through a tensor that only the closure
  of func holds (a module's parameter, with func not called inside a
  transform) comes back detached: pass that tensor as an argument.
- jvp and jacfwd use the library's forward mode (one pass per input
  element for jacfwd). Forward mode does not nest (an inner region would
  hide the outer one's tangents), so a jvp inside a jvp or jacfwd, or over
  an op that has no forward-mode rule, is computed in reverse mode by the
  double-backward trick instead: the same values, more passes.
- vmap is a loop, not a batching transform: func runs once per batch
  element on the inputs sliced along in_dims, and the outputs are stacked
  along out_dims. Anything func can do on one element works (grad inside,
  nested vmap, data-dependent control flow, .item()), at the cost of
  len(batch) calls. chunk_size is accepted and has no effect.
  randomness='error' raises if func draws from the default generator,
  'same' restores its state before each element, 'different' lets it run
  (draws from a device's or a user's Generator are not watched).
"""

import functools
import threading

from chutney import _C
from chutney.autograd import functional as _F
from chutney.nn.utils.stateless import functional_call  # noqa: F401

__all__ = ["functional_call", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap"]

_tls = threading.local()


# ---- pytrees: nested tuples (namedtuples), lists and dicts; all else a leaf ----

def _flatten(tree):
    """(leaves, spec); spec is None for a leaf and comparable with ==."""
    leaves = []

    def go(t):
        if isinstance(t, (tuple, list)):
            kind = type(t) if isinstance(t, tuple) else list
            return (kind, None, tuple(go(c) for c in t))
        if isinstance(t, dict):
            return (dict, tuple(t.keys()), tuple(go(v) for v in t.values()))
        leaves.append(t)
        return None

    spec = go(tree)
    return leaves, spec


def _unflatten(leaves, spec):
    it = iter(leaves)

    def go(s):
        if s is None:
            return next(it)
        kind, keys, children = s
        vals = [go(c) for c in children]
        if kind is dict:
            return dict(zip(keys, vals))
        if kind is list or kind is tuple:
            return kind(vals)
        return kind(*vals)  # a namedtuple

    return go(spec)


def _broadcast(prefix, spec):
    """prefix (a leaf, or a tree whose shape is a prefix of spec's) spread to
    one value per leaf of spec; None where they do not fit."""
    if spec is None:
        return None if isinstance(prefix, (tuple, list, dict)) else [prefix]
    kind, keys, children = spec
    if not isinstance(prefix, (tuple, list, dict)):
        return [prefix] * _count(spec)
    if isinstance(prefix, dict) != (kind is dict) or len(prefix) != len(children):
        return None
    if kind is dict:
        if set(prefix.keys()) != set(keys):
            return None
        parts = [prefix[k] for k in keys]
    else:
        parts = list(prefix)
    out = []
    for p, c in zip(parts, children):
        sub = _broadcast(p, c)
        if sub is None:
            return None
        out.extend(sub)
    return out


def _count(spec):
    return 1 if spec is None else sum(_count(c) for c in spec[2])


def _tensors(tree):
    return [t for t in _flatten(tree)[0] if isinstance(t, _C.Tensor)]


def _detach_tree(tree):
    leaves, spec = _flatten(tree)
    return _unflatten([t.detach() if isinstance(t, _C.Tensor) else t for t in leaves], spec)


# ---- when a gradient needs a graph ----

class _transform:
    """Marks func running inside a transform: a gradient taken there may be
    differentiated by the enclosing one, so it keeps its graph."""

    def __enter__(self):
        _tls.level = getattr(_tls, "level", 0) + 1

    def __exit__(self, *exc):
        _tls.level -= 1
        return False


def _want_graph(tensors):
    if not _C.is_grad_enabled():
        return False
    if getattr(_tls, "level", 0) > 0 or _F._dual_depth() > 0:
        return True
    return any(t.requires_grad or _C._get_tangent(t) is not None for t in tensors)


class _grad_on:
    # Transforms differentiate even inside no_grad, as PyTorch's do.
    def __enter__(self):
        self.prev = _C._set_grad_enabled(True)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False


# ---- argnums ----

def _check_argnums(argnums):
    if isinstance(argnums, tuple):
        if len(argnums) == 0:
            raise RuntimeError("argnums must be non-empty")
        if len(set(argnums)) != len(argnums):
            raise RuntimeError(f"argnums elements must be unique, got {argnums}")
        for a in argnums:
            if not isinstance(a, int):
                raise RuntimeError(f"argnum must be int, got: {type(a)}")
    elif not isinstance(argnums, int):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")


def _wrap_argnums(argnums, nargs):
    def one(a):
        if -nargs <= a < nargs:
            return a % nargs
        raise RuntimeError(f"Got argnum={a}, but only {nargs} positional inputs")
    return one(argnums) if isinstance(argnums, int) else tuple(one(a) for a in argnums)


def _diff_args(args, argnums, api):
    """(positions, flat leaves of the differentiated args, their spec): the
    spec rebuilds an argnums-shaped result (an arg's tree for an int, a
    tuple of them for a tuple)."""
    nums = _wrap_argnums(argnums, len(args))
    pos = (nums,) if isinstance(nums, int) else nums
    sel = args[nums] if isinstance(nums, int) else tuple(args[i] for i in nums)
    leaves, spec = _flatten(sel)
    if not leaves:
        raise RuntimeError(f"{api}: Expected the differentiated arguments to contain at least one Tensor.")
    for t in leaves:
        if not isinstance(t, _C.Tensor):
            raise RuntimeError(f"{api}: Expected the differentiated arguments to only contain Tensors, "
                               f"got {type(t)}")
        if not t.is_floating_point():
            raise RuntimeError(f"{api}: only Tensors of floating point dtype can require gradients, "
                               f"got {t.dtype}")
    return nums, pos, leaves, spec


def _replace(args, nums, new_leaves, spec):
    new = _unflatten(new_leaves, spec)
    args = list(args)
    if isinstance(nums, int):
        args[nums] = new
    else:
        for i, v in zip(nums, new):
            args[i] = v
    return tuple(args)


def _split_aux(res, has_aux, api):
    if not has_aux:
        return res, None
    if not (isinstance(res, tuple) and len(res) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if has_aux is True")
    return res


def _name(f):
    return getattr(f, "__name__", repr(f))


# ---- reverse mode ----

def grad_and_value(func, argnums=0, has_aux=False):
    """A function that returns (gradient of func with respect to the args
    at argnums, func's value); with has_aux, func returns (value, aux) and
    the result is (gradient, (value, aux)). func must return a
    zero-dimensional Tensor."""
    _check_argnums(argnums)
    api = "grad_and_value(f)(*args)"

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        cg = _want_graph(_tensors((args, kwargs)))
        nums, _, leaves, spec = _diff_args(args, argnums, api)
        fresh = [_F._fresh(t, cg) for t in leaves]
        args = _replace(args, nums, fresh, spec)
        with _transform(), _grad_on():
            out, aux = _split_aux(func(*args, **kwargs), has_aux, api)
            if not isinstance(out, _C.Tensor):
                raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got {type(out)}")
            if out.dim() != 0:
                raise RuntimeError(f"{api}: Expected f(*args) to return a scalar Tensor, got tensor with "
                                   f"{out.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
            grads = _F._grad((out,), fresh, None, cg)
        grads = [_C.zeros_like(x) if g is None else g for g, x in zip(grads, fresh)]
        if not cg:
            grads = [g.detach() for g in grads]
            out, aux = out.detach(), _detach_tree(aux)
        g = _unflatten(grads, spec)
        return (g, (out, aux)) if has_aux else (g, out)

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """A function that returns the gradient of func (which returns a
    zero-dimensional Tensor) with respect to the args at argnums: shaped as
    that arg (a tree of Tensors for a tree), a tuple of those for a tuple of
    argnums; (gradient, aux) with has_aux."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapper


def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn) or, with has_aux, (output, vjp_fn, aux).
    vjp_fn(cotangents), cotangents shaped as the output, returns a tuple of
    the vector-Jacobian products, one per primal and shaped as it. vjp_fn
    may be called several times."""
    api = "vjp(f, *primals)"
    cg = _want_graph(_tensors(primals))
    leaves, spec = _flatten(primals)
    fresh = []
    for t in leaves:
        if not isinstance(t, _C.Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(t)}")
        fresh.append(_F._fresh(t, cg) if t.is_floating_point() else t)
    ins = _unflatten(fresh, spec)
    with _transform(), _grad_on():
        out, aux = _split_aux(func(*ins), has_aux, api)
    outs, out_spec = _flatten(out)
    if not outs:
        raise RuntimeError(f"{api}: Expected f to be a function that has non-empty output (got output = {out})")
    for o in outs:
        if not isinstance(o, _C.Tensor):
            raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, got unsupported type {type(o)}")
        if not o.is_floating_point():
            raise RuntimeError(f"vjp(f, ...): All outputs of f must be floating-point or complex Tensors, "
                               f"got Tensor with dtype {o.dtype}")

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        cts, ct_spec = _flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure "
                               "of outputs to the function.")
        for c, o in zip(cts, outs):
            if not isinstance(c, _C.Tensor) or tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"vjp_fn: a cotangent of shape {getattr(c, 'shape', type(c))} for an "
                                   f"output of shape {o.shape}")
        make = create_graph if create_graph is not None else (cg or _want_graph(cts))
        diff = [t for t in fresh if isinstance(t, _C.Tensor) and t.requires_grad]
        with _grad_on() if make else _no_change():
            gs = _F._grad(tuple(outs), tuple(diff), tuple(cts), make) if diff else ()
        gs = iter(gs)
        res = []
        for t in fresh:
            g = next(gs) if t.requires_grad else None
            g = _C.zeros_like(t) if g is None else g
            res.append(g if make else g.detach())
        return _unflatten(res, spec)

    result = out if cg else _detach_tree(out)
    if has_aux:
        return result, vjp_fn, (aux if cg else _detach_tree(aux))
    return result, vjp_fn


class _no_change:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """A function that returns the Jacobian of func with respect to the args
    at argnums, by reverse mode (one pass per output element): for each
    output Tensor, shaped as the output tree, a block of shape output.shape +
    input.shape per input (an arg's tree, or a tuple of them for a tuple of
    argnums); (jacobian, aux) with has_aux. chunk_size has no effect."""
    _check_argnums(argnums)
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")
    api = "jacrev(f, argnums)(*args)"

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        cg = _want_graph(_tensors((args, kwargs)))
        nums, _, leaves, spec = _diff_args(args, argnums, api)
        fresh = [_F._fresh(t, cg) for t in leaves]
        args = _replace(args, nums, fresh, spec)
        with _transform(), _grad_on():
            out, aux = _split_aux(func(*args, **kwargs), has_aux, api)
            outs, out_spec = _flatten(out)
            for o in outs:
                if not isinstance(o, _C.Tensor):
                    raise RuntimeError(f"{api}: Expected f to return Tensors, got {type(o)}")
            jac = []
            for o in outs:
                rows = [[] for _ in fresh]
                flat = o.reshape(-1)
                for j in range(o.numel()):
                    gs = _F._grad((flat[j],), fresh, None, cg)
                    for k, (g, x) in enumerate(zip(gs, fresh)):
                        rows[k].append(_C.zeros_like(x) if g is None else g)
                blocks = []
                for k, x in enumerate(fresh):
                    shape = tuple(o.shape) + tuple(x.shape)
                    b = (_C.stack(rows[k], 0).reshape(shape) if rows[k]
                         else _C.zeros(shape, dtype=x.dtype, device=x.device))
                    blocks.append(b if cg else b.detach())
                jac.append(_unflatten(blocks, spec))
        result = _unflatten(jac, out_spec)
        return (result, aux if cg else _detach_tree(aux)) if has_aux else result

    return wrapper


# ---- forward mode ----

def _jvp_flat(func, args, kwargs, flat_tangents, strict, has_aux, api):
    """Run func on args (a tuple) whose flat leaves get flat_tangents (None:
    no tangent). Returns (outs, out_spec, tangents_out, aux); tensors keep
    their graphs (the caller detaches)."""
    leaves, spec = _flatten(args)
    if _F._dual_depth() == 0:
        try:
            return _jvp_forward(func, leaves, spec, kwargs, flat_tangents, strict, has_aux, api)
        except NotImplementedError as e:
            if "forward-mode" not in str(e):
                raise
    return _jvp_reverse(func, leaves, spec, kwargs, flat_tangents, strict, has_aux, api)


def _check_outs(outs, api):
    if not outs:
        raise RuntimeError(f"{api}: Expected f to be a function that has non-empty output")
    for o in outs:
        if not isinstance(o, _C.Tensor):
            raise RuntimeError(f"{api}: expected f(*args) to return only tensors, got unsupported type {type(o)}")


def _jvp_forward(func, leaves, spec, kwargs, flat_tangents, strict, has_aux, api):
    with _F._dual_region():
        duals = []
        for x, t in zip(leaves, flat_tangents):
            if t is None:
                duals.append(x)
                continue
            # An alias keeps x's reverse-mode history (jvp inside grad).
            p = x.view_as(x) if x.requires_grad else x.detach()
            _C._set_tangent(p, t)
            duals.append(p)
        with _transform():
            out, aux = _split_aux(func(*_unflatten(duals, spec), **kwargs), has_aux, api)
        outs, out_spec = _flatten(out)
        _check_outs(outs, api)
        tans = []
        for o in outs:
            t = _C._get_tangent(o)
            if t is None:
                if strict:
                    raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is independent "
                                       "of the inputs. This is not allowed with strict=True.")
                t = _C.zeros_like(o)
            tans.append(t)
    return outs, out_spec, tans, aux


def _jvp_reverse(func, leaves, spec, kwargs, flat_tangents, strict, has_aux, api):
    # J v by two reverse passes: g(u) = u^T J is linear in u, and the
    # gradient of g(u) . v with respect to u is J v. Any outer forward-mode
    # tangents flow through both passes.
    if strict:
        raise RuntimeError(f"{api}: strict=True is not supported where jvp falls back to reverse mode "
                           "(inside another forward-mode transform, or over an op without a forward-mode rule).")
    with _grad_on():
        fresh = [x if t is None else _F._fresh(x, True) for x, t in zip(leaves, flat_tangents)]
        diff = [x for x, t in zip(fresh, flat_tangents) if t is not None]
        vs = [t for t in flat_tangents if t is not None]
        with _transform():
            out, aux = _split_aux(func(*_unflatten(fresh, spec), **kwargs), has_aux, api)
        outs, out_spec = _flatten(out)
        _check_outs(outs, api)
        us = [_C.zeros_like(o).requires_grad_() for o in outs]
        gs = _F._grad(tuple(outs), tuple(diff), tuple(us), True)
        pairs = [(g, v) for g, v in zip(gs, vs) if g is not None]
        if pairs:
            tans = _F._grad(tuple(g for g, _ in pairs), tuple(us), tuple(v for _, v in pairs), True)
        else:
            tans = (None,) * len(outs)
    tans = [_C.zeros_like(o) if t is None else t for t, o in zip(tans, outs)]
    return list(outs), out_spec, tans, aux


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), the Jacobian of func at primals times tangents), in
    forward mode; (output, jvp_out, aux) with has_aux. primals is a tuple
    (of Tensors or trees of them), tangents has the same structure."""
    api = "jvp(f, primals, tangents)"
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{api}: Expected primals to be a tuple. E.g. it should be valid to call f(*primals).")
    p_leaves, p_spec = _flatten(primals)
    t_leaves, t_spec = _flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError(f"{api}: Expected primals and tangents to have the same python structure. For "
                           "example, if primals is a tuple of 3 tensors, tangents also must be.")
    for what, ls in (("primals", p_leaves), ("tangents", t_leaves)):
        if not ls:
            raise RuntimeError(f"{api}: Expected {what} to contain at least one Tensor.")
        for t in ls:
            if not isinstance(t, _C.Tensor):
                raise RuntimeError(f"{api}: Expected {what} to only contain Tensors, got {type(t)}")
    for p, t in zip(p_leaves, t_leaves):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"{api}: a tangent of shape {t.shape} for a primal of shape {p.shape}")
    cg = _want_graph(p_leaves + t_leaves)
    outs, out_spec, tans, aux = _jvp_flat(func, primals, {}, list(t_leaves), strict, has_aux, api)
    if not cg:
        outs = [o.detach() for o in outs]
        tans = [t.detach() for t in tans]
        aux = _detach_tree(aux)
    res = (_unflatten(outs, out_spec), _unflatten(tans, out_spec))
    return res + (aux,) if has_aux else res


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """A function that returns the Jacobian of func with respect to the args
    at argnums, by forward mode (one pass per input element), structured as
    jacrev's. Every pass runs func afresh: randomness='error' raises if
    func draws from the default generator, 'same' gives every pass the same
    draws, 'different' lets them differ."""
    _check_argnums(argnums)
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. "
                           f"Got {randomness}")
    api = "jacfwd(f, argnums)(*args)"

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        cg = _want_graph(_tensors((args, kwargs)))
        nums, pos, dleaves, dspec = _diff_args(args, argnums, api)
        # Where the differentiated leaves sit among all the args' leaves.
        marked = _replace(args, nums, [_Marker(i) for i in range(len(dleaves))], dspec)
        mleaves, _ = _flatten(marked)
        slot = {m.i: j for j, m in enumerate(mleaves) if isinstance(m, _Marker)}
        all_leaves, _ = _flatten(args)

        def run(k, e):
            tans = [None] * len(all_leaves)
            for i, x in enumerate(dleaves):
                t = _C.zeros((x.numel(),), dtype=x.dtype, device=x.device)
                if i == k:
                    t[e] = 1
                tans[slot[i]] = t.reshape(tuple(x.shape))
            return _jvp_flat(func, args, kwargs, tans, False, has_aux, api)

        cols = [[] for _ in dleaves]
        first = None
        state = _rng_state() if randomness != "different" else None
        for k, x in enumerate(dleaves):
            for e in range(x.numel()):
                if randomness == "same":
                    _set_rng_state(state)
                res = run(k, e)
                _check_randomness(randomness, state, "jacfwd")
                if first is None:
                    first = res
                cols[k].append(res[2])
        if first is None:
            first = run(-1, 0)
        outs, out_spec, _, aux = first
        jac = []
        for m, o in enumerate(outs):
            blocks = []
            for k, x in enumerate(dleaves):
                shape = tuple(o.shape) + tuple(x.shape)
                if cols[k]:
                    b = _C.stack([c[m] for c in cols[k]], -1).reshape(shape)
                else:
                    b = _C.zeros(shape, dtype=o.dtype, device=o.device)
                blocks.append(b if cg else b.detach())
            jac.append(_unflatten(blocks, dspec))
        result = _unflatten(jac, out_spec)
        return (result, aux if cg else _detach_tree(aux)) if has_aux else result

    return wrapper


class _Marker:
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i


def hessian(func, argnums=0):
    """The Hessian of func (one zero-dimensional output) with respect to the
    args at argnums: jacfwd(jacrev(func, argnums), argnums), so a block of
    shape input.shape + input.shape per pair of inputs."""
    return jacfwd(jacrev(func, argnums), argnums)


# ---- vmap ----

def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func mapped over a dimension of its inputs: in_dims gives, per
    positional argument (an int or None for all of it, or a tree matching
    it), the dimension to map over (None: passed unchanged to every call);
    out_dims, per output, where the mapped dimension goes (None: an output
    that does not depend on the mapped inputs, taken from the first call).
    Keyword arguments are passed unchanged.

    Computed as a loop: func runs once per batch element on the inputs
    sliced there, and the outputs are stacked."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. "
                           f"Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError("vmap: chunk_size should be None or greater than 0.")
    name = _name(func)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or "
                             f"a (potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
        if not args:
            raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you "
                             "are trying to vmap over a function with no inputs. The latter is unsupported.")
        leaves, spec = _flatten(args)
        dims = _broadcast(in_dims, spec)
        if dims is None:
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with "
                             "the structure of `inputs`.")
        sizes = []
        for i, (a, d) in enumerate(zip(leaves, dims)):
            if d is None:
                continue
            if not isinstance(d, int) or isinstance(d, bool):
                raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input "
                                 "but in_dim must be either an integer dimension or None.")
            if not isinstance(a, _C.Tensor):
                raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input "
                                 f"but the input is of type {type(a)}. We cannot vmap over non-Tensor "
                                 "arguments, please use None as the respective in_dim")
            n = a.dim()
            if not -n <= d < n:
                raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some "
                                 f"input, but that input is a Tensor of dimensionality {n} so expected "
                                 f"in_dim to satisfy -{n} <= in_dim < {n}.")
            dims[i] = d % n
            sizes.append(a.shape[dims[i]])
        if not sizes:
            raise ValueError("vmap: Expected at least one Tensor to vmap over")
        if any(s != sizes[0] for s in sizes):
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, "
                             f"got sizes {sizes} for the mapped dimension")
        size = sizes[0]
        if size == 0:
            raise ValueError(f"vmap({name}): the mapped dimension has size 0; this vmap runs func once per "
                             "element, so it has no call to take the outputs' shapes from")
        state = _rng_state() if randomness != "different" else None
        results, out_spec = [], _UNSET
        for b in range(size):
            if randomness == "same":
                _set_rng_state(state)
            sliced = [a if d is None else a.select(d, b) for a, d in zip(leaves, dims)]
            res = func(*_unflatten(sliced, spec), **kwargs)
            _check_randomness(randomness, state, "vmap")
            outs, s = _flatten(res)
            for o in outs:
                if not isinstance(o, _C.Tensor):
                    raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                                     f"{type(o)} as a return.")
            if out_spec is _UNSET:
                out_spec = s
            elif s != out_spec:
                raise ValueError(f"vmap({name}, ...): `{name}` returned outputs of different structures "
                                 "for different batch elements")
            results.append(outs)
        if out_spec is None and isinstance(out_dims, tuple) and len(out_dims) == 1:
            odims = list(out_dims)  # one Tensor out, out_dims=(d,)
        else:
            odims = _broadcast(out_dims, out_spec)
        if odims is None:
            raise ValueError(f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible "
                             "with the structure of `outputs`.")
        stacked = []
        for m, d in enumerate(odims):
            parts = [r[m] for r in results]
            if d is None:
                stacked.append(parts[0])
                continue
            if not isinstance(d, int) or isinstance(d, bool):
                raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an int or a python "
                                 "collection of ints representing where in the outputs the vmapped dimension "
                                 "should appear.")
            n = parts[0].dim() + 1
            if not -n <= d < n:
                raise IndexError(f"vmap({name}, ..., out_dims={out_dims}): Dimension out of range (expected "
                                 f"to be in range of [{-n}, {n - 1}], but got {d})")
            stacked.append(_C.stack(parts, d))
        return _unflatten(stacked, out_spec)

    return wrapper


_UNSET = object()


def _check_randomness(randomness, state, api):
    # Only the default generator is watched: draws from a device's or a
    # user's Generator go unnoticed.
    if randomness == "error" and _rng_state() != state:
        _set_rng_state(state)
        raise RuntimeError(f"{api}: called random operation while in randomness error mode. Please either use "
                           f"the 'same' or 'different' randomness flags on {api} or perform the randomness "
                           f"operation out of {api}")


def _rng_state():
    import chutney
    return chutney.get_rng_state()


def _set_rng_state(state):
    import chutney
    chutney.set_rng_state(state)
