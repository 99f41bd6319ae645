"""chutney.autograd.functional (jacobian, hessian, hvp, vhp, jvp, vjp) against
torch.autograd.functional of PyTorch 1.13, and chutney.func (grad,
grad_and_value, vjp, jvp, jacrev, jacfwd, hessian, vmap) against functorch
(torch.func's predecessor, when importable) and explicit loops over
torch.autograd.grad: values, return structures, create_graph, strict and
argument errors, nesting, per-sample gradients of a model. Skipped without
torch."""

import pytest

import chutney
import chutney.func as cf
import chutney.autograd.functional as caf

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
taf = torch.autograd.functional
try:
    import functorch as ft
except ImportError:  # the loops below still check chutney.func
    ft = None

rng = np.random.default_rng(7)
F64 = chutney.float64


def arr(*shape):
    return rng.standard_normal(shape)


def pair(a):
    """The same float64 values as a chutney and a torch tensor."""
    return chutney.tensor(a, dtype=F64), torch.tensor(a, dtype=torch.float64)


def same(c, t, tol=1e-9, lists_as_tuples=False):
    """c (chutney results) has t's structure (tuples, lists, dicts), shapes and
    values; t may hold torch or chutney tensors."""
    if isinstance(t, chutney.Tensor):
        t = torch.tensor(t.detach().numpy())
    if isinstance(t, torch.Tensor):
        assert isinstance(c, chutney.Tensor), type(c)
        assert tuple(c.shape) == tuple(t.shape), (c.shape, t.shape)
        np.testing.assert_allclose(c.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)
    elif isinstance(t, dict):
        assert isinstance(c, dict) and list(c) == list(t)
        for k in t:
            same(c[k], t[k], tol, lists_as_tuples)
    else:
        assert isinstance(t, (tuple, list)), type(t)
        want = tuple if lists_as_tuples and isinstance(t, list) else type(t)
        assert type(c) is want and len(c) == len(t), (type(c), type(t))
        for a, b in zip(c, t):
            same(a, b, tol, lists_as_tuples)


def no_history(tree):
    if isinstance(tree, (tuple, list)):
        return all(no_history(x) for x in tree)
    if isinstance(tree, dict):
        return all(no_history(x) for x in tree.values())
    return not tree.requires_grad


# Functions written once, run with either library.
def elementwise(x):
    return x.sin() * x.exp()


def matmul_fn(a, b):
    return (a @ b).tanh()


def multi(a, b):
    return (a * b.sum()).cos(), (a @ a.t()).sum()


def scalar2(a, b):
    return (a.sin() * b).sum() + (a ** 3).sum() * b.sum()


# ---------------- torch.autograd.functional ----------------

JAC_CASES = [
    (elementwise, ((3,),)),
    (elementwise, ((2, 3),)),
    (matmul_fn, ((2, 3), (3, 2))),
    (multi, ((2, 3), (4,))),
]


@pytest.mark.parametrize("fn,shapes", JAC_CASES)
@pytest.mark.parametrize("as_tuple", [False, True])
@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
def test_jacobian_matches_torch(fn, shapes, as_tuple, strategy):
    vals = [arr(*s) for s in shapes]
    cs, ts = zip(*(pair(v) for v in vals))
    if len(cs) == 1 and not as_tuple:
        cs, ts = cs[0], ts[0]
    vec = strategy == "forward-mode"
    cj = caf.jacobian(fn, cs, strategy=strategy, vectorize=vec)
    tj = taf.jacobian(fn, ts, strategy=strategy, vectorize=vec)
    # PyTorch 1.13's forward mode gives lists where its reverse mode (and
    # its documentation) gives tuples; Chutney gives tuples for both.
    same(cj, tj, lists_as_tuples=True)
    assert no_history(cj)


def test_jacobian_independent_input_and_strict():
    f = lambda a, b: a * 2  # noqa: E731  (b unused)
    (ca, ta), (cb, tb) = pair(arr(3)), pair(arr(2))
    same(caf.jacobian(f, (ca, cb)), taf.jacobian(f, (ta, tb)))
    for lib, mod, args in ((chutney, caf, (ca, cb)), (torch, taf, (ta, tb))):
        with pytest.raises(RuntimeError, match="independent of input 1"):
            mod.jacobian(f, args, strict=True)
        with pytest.raises(RuntimeError, match="does not require gradients"):
            mod.jacobian(lambda a, b: lib.ones(2, dtype=a.dtype), args, strict=True)
        with pytest.raises(RuntimeError, match="`strict=True` and `vectorized=True`"):
            mod.jacobian(f, args, strict=True, vectorize=True)
        with pytest.raises(NotImplementedError, match="vectorize=True"):
            mod.jacobian(f, args, strategy="forward-mode")
        with pytest.raises(NotImplementedError, match="create_graph=True"):
            mod.jacobian(f, args, strategy="forward-mode", vectorize=True, create_graph=True)
        with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
            mod.jacobian(f, (args[0], 3))
        with pytest.raises(TypeError, match="outputs of the user-provided function"):
            mod.jacobian(lambda a, b: 3.0, args)


def test_jacobian_create_graph_second_derivative():
    ca, ta = pair(arr(3))
    outs = []
    for lib, mod, x in ((chutney, caf, ca.requires_grad_()), (torch, taf, ta.requires_grad_())):
        j = mod.jacobian(lambda a: (a ** 3).sin(), x, create_graph=True)
        assert j.requires_grad
        (g,) = lib.autograd.grad(j.sum(), x)
        outs.append(g)
    same(*outs)
    # Without create_graph the result has no history even for inputs that need grad.
    assert not caf.jacobian(lambda a: a ** 3, ca).requires_grad


@pytest.mark.parametrize("outer", ["reverse-mode", "forward-mode"])
def test_hessian_matches_torch(outer):
    vec = outer == "forward-mode"
    (ca, ta), (cb, tb) = pair(arr(2, 3)), pair(arr(3))
    same(caf.hessian(scalar2, (ca, cb), outer_jacobian_strategy=outer, vectorize=vec),
         taf.hessian(scalar2, (ta, tb), outer_jacobian_strategy=outer, vectorize=vec), lists_as_tuples=True)
    f = lambda a: (a.exp() * a).sum()  # noqa: E731
    same(caf.hessian(f, ca, outer_jacobian_strategy=outer, vectorize=vec),
         taf.hessian(f, ta, outer_jacobian_strategy=outer, vectorize=vec))


def test_hessian_errors_like_torch():
    ca, ta = pair(arr(3))
    for mod, x in ((caf, ca), (taf, ta)):
        with pytest.raises(RuntimeError, match="should contain a single element"):
            mod.hessian(lambda a: a * 2, x)
        with pytest.raises(RuntimeError, match="should return a single Tensor"):
            mod.hessian(lambda a: (a.sum(), a.sum()), x)
        with pytest.raises(RuntimeError, match="jacobian of the user-provided function with respect to input 0"):
            mod.hessian(lambda a: (a * 2).sum(), x, strict=True)


@pytest.mark.parametrize("name", ["hvp", "vhp"])
def test_hvp_vhp_match_torch(name):
    (ca, ta), (cb, tb) = pair(arr(2, 3)), pair(arr(3))
    (cv1, tv1), (cv2, tv2) = pair(arr(2, 3)), pair(arr(3))
    cfn, tfn = getattr(caf, name), getattr(taf, name)
    same(cfn(scalar2, (ca, cb), (cv1, cv2)), tfn(scalar2, (ta, tb), (tv1, tv2)))
    f = lambda a: (a.sin() * a).sum()  # noqa: E731
    same(cfn(f, ca, cv1), tfn(f, ta, tv1))
    # v may be left out for a single one-element input.
    (cs, ts) = pair(np.array([0.7]))
    same(cfn(lambda a: (a ** 4).sum(), cs), tfn(lambda a: (a ** 4).sum(), ts))
    # create_graph: a third derivative.
    res = []
    for lib, fn, x, v in ((chutney, cfn, ca, cv1), (torch, tfn, ta, tv1)):
        x = x.detach().requires_grad_()
        out, hv = fn(f, x, v, create_graph=True)
        assert out.requires_grad and hv.requires_grad
        res.append(lib.autograd.grad(hv.sum(), x)[0])
    same(*res)
    out, hv = cfn(f, ca, cv1)
    assert no_history((out, hv))


@pytest.mark.parametrize("name", ["hvp", "vhp", "vjp"])
def test_vector_product_errors_like_torch(name):
    (ca, ta), (cb, tb) = pair(arr(3)), pair(arr(2))
    cfn, tfn = getattr(caf, name), getattr(taf, name)
    f = lambda a, b: (a * 2).sum()  # noqa: E731  (b unused, linear)
    for fn, args, lib in ((cfn, (ca, cb), chutney), (tfn, (ta, tb), torch)):
        v = (lib.ones(3, dtype=args[0].dtype), lib.ones(2, dtype=args[0].dtype))
        if name == "vjp":
            with pytest.raises(RuntimeError, match="The given v should contain a single Tensor"):
                fn(f, args, v)
            with pytest.raises(RuntimeError, match="v can only be None"):
                fn(lambda a, b: a * 2, args)
            with pytest.raises(RuntimeError, match="independent of input 1"):
                fn(f, args, strict=True)
            continue
        with pytest.raises(RuntimeError, match="v is a tuple of invalid length"):
            fn(f, args, v[:1])
        with pytest.raises(RuntimeError, match="Entry 1 in v has invalid size"):
            fn(f, args, (v[0], v[0]))
        with pytest.raises(RuntimeError, match="v can only be None"):
            fn(f, args)
        with pytest.raises(RuntimeError, match="should contain a single element"):
            fn(lambda a, b: a * b.sum(), args, v)
        with pytest.raises(RuntimeError, match="is independent of the input"):
            fn(f, args, v, strict=True)
    # Not strict: the linear term's Hessian is zeros, b's block too.
    if name != "vjp":
        ones = (torch.ones(3, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
        same(cfn(f, (ca, cb), (chutney.ones(3, dtype=F64), chutney.ones(2, dtype=F64))), tfn(f, (ta, tb), ones))


def test_vjp_jvp_functional_match_torch():
    (ca, ta), (cb, tb) = pair(arr(2, 3)), pair(arr(4))
    (cv1, tv1), (cv2, tv2) = pair(arr(2, 3)), pair(np.array(1.3))
    same(caf.vjp(multi, (ca, cb), (cv1, cv2)), taf.vjp(multi, (ta, tb), (tv1, tv2)))
    (cu1, tu1), (cu2, tu2) = pair(arr(2, 3)), pair(arr(4))
    same(caf.jvp(multi, (ca, cb), (cu1, cu2)), taf.jvp(multi, (ta, tb), (tu1, tu2)))
    same(caf.jvp(elementwise, ca, cu1), taf.jvp(elementwise, ta, tu1))
    # vjp with create_graph gives a differentiable result.
    x = ca.detach().requires_grad_()
    _, g = caf.vjp(lambda a: (a ** 3).sum(), x, create_graph=True)
    (h,) = chutney.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), (6 * ta).numpy(), rtol=1e-12)


# ---------------- chutney.func ----------------

def ref_grads(fn, args, argnums):
    """Gradients of a scalar torch fn by torch.autograd.grad, shaped like func.grad's."""
    xs = [a.detach().requires_grad_() for a in args]
    nums = (argnums,) if isinstance(argnums, int) else argnums
    gs = torch.autograd.grad(fn(*xs), [xs[i] for i in nums])
    return gs[0] if isinstance(argnums, int) else tuple(gs)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0), -1])
def test_grad_and_jacobians_argnums(argnums):
    (ca, ta), (cb, tb) = pair(arr(2, 3)), pair(arr(3))
    g = cf.grad(scalar2, argnums)(ca, cb)
    same(g, ref_grads(scalar2, (ta, tb), argnums))
    assert no_history(g)
    gv, val = cf.grad_and_value(scalar2, argnums)(ca, cb)
    same(gv, g)
    same(val, scalar2(ta, tb))
    # jacrev / jacfwd of a scalar function are its gradient.
    same(cf.jacrev(scalar2, argnums)(ca, cb), g)
    same(cf.jacfwd(scalar2, argnums)(ca, cb), g)
    # hessian blocks against torch.autograd.functional's.
    th = taf.hessian(scalar2, (ta, tb))
    ch = cf.hessian(scalar2, argnums)(ca, cb)
    nums = (argnums % 2,) if isinstance(argnums, int) else argnums
    want = tuple(tuple(th[i][j] for j in nums) for i in nums)
    same(ch, want[0][0] if isinstance(argnums, int) else want)
    if ft is not None:
        same(ch, ft.hessian(scalar2, argnums)(ta, tb))
        same(cf.jacfwd(cf.jacrev(scalar2, argnums), argnums)(ca, cb), ch)


@pytest.mark.parametrize("which", ["jacrev", "jacfwd"])
def test_jacobian_structures(which):
    (ca, ta), (cb, tb) = pair(arr(2, 3)), pair(arr(3, 2))
    jac = getattr(cf, which)

    def tree_fn(p, b):
        return {"y": (p["w"] @ b).tanh(), "z": (p["w"].sum() * p["c"], b.exp())}

    cp = {"w": ca, "c": chutney.tensor(arr(2), dtype=F64)}
    tp = {"w": ta, "c": torch.tensor(cp["c"].numpy())}
    for argnums in (0, 1, (0, 1)):
        got = jac(tree_fn, argnums)(cp, cb)
        if ft is not None:
            same(got, getattr(ft, which)(tree_fn, argnums)(tp, tb))
        # Block by block against torch.autograd.functional.jacobian.
        ref = taf.jacobian(lambda w, c, b: (tree_fn({"w": w, "c": c}, b)["y"],) + tree_fn({"w": w, "c": c}, b)["z"],
                           (tp["w"], tp["c"], tb))
        blocks = {0: {"w": 0, "c": 1}, 1: 2}
        for o, out in ((0, got["y"]), (1, got["z"][0]), (2, got["z"][1])):
            def pick(a):
                return {k: ref[o][i] for k, i in blocks[0].items()} if a == 0 else ref[o][blocks[1]]
            if isinstance(argnums, int):
                same(out, pick(argnums))
            else:
                same(out, tuple(pick(a) for a in argnums))
    # matmul-based with one input; the two modes agree with each other and torch.
    same(jac(matmul_fn, 1)(ca, cb), taf.jacobian(matmul_fn, (ta, tb))[1])


def test_grad_has_aux_and_errors():
    ca, ta = pair(arr(3))

    def f(x):
        y = (x ** 2).sum()
        return y, {"y": y, "sq": x * x}

    g, aux = cf.grad(f, has_aux=True)(ca)
    same(g, 2 * ta)
    same(aux, {"y": (ta ** 2).sum(), "sq": ta * ta})
    assert no_history((g, aux))
    gv, (val, aux2) = cf.grad_and_value(f, has_aux=True)(ca)
    same((gv, val), (2 * ta, (ta ** 2).sum()))
    with pytest.raises(RuntimeError, match="scalar Tensor"):
        cf.grad(lambda x: x * 2)(ca)
    with pytest.raises(RuntimeError, match="output of function f should be a tuple"):
        cf.grad(lambda x: x.sum(), has_aux=True)(ca)
    with pytest.raises(RuntimeError, match="only 1 positional inputs"):
        cf.grad(lambda x: x.sum(), argnums=1)(ca)
    with pytest.raises(RuntimeError, match="unique"):
        cf.grad(lambda x, y: x.sum(), argnums=(0, 0))
    with pytest.raises(RuntimeError, match="floating point"):
        cf.grad(lambda x: x.sum())(chutney.tensor([1, 2]))
    # Works inside no_grad, as PyTorch's transforms do.
    with chutney.no_grad():
        same(cf.grad(lambda x: (x ** 2).sum())(ca), 2 * ta)


def test_func_vjp_and_jvp():
    (ca, ta), (cb, tb) = pair(arr(2, 3)), pair(arr(4))
    out, vjp_fn = cf.vjp(multi, ca, cb)
    same(out, multi(ta, tb))
    (cv1, tv1), (cv2, tv2) = pair(arr(2, 3)), pair(np.array(0.4))
    want = taf.vjp(multi, (ta, tb), (tv1, tv2))[1]
    same(vjp_fn((cv1, cv2)), want)
    same(vjp_fn((cv1, cv2)), want)  # a second call: the record is kept
    with pytest.raises(RuntimeError, match="pytree structure of cotangents"):
        vjp_fn(cv1)
    # has_aux; a dict primal gives a dict gradient, inside a tuple.
    out, fn, aux = cf.vjp(lambda p: ((p["a"] * 3).sum(), p["a"] + 1), {"a": ca}, has_aux=True)
    same(fn(chutney.tensor(1.0, dtype=F64)), ({"a": 3 * torch.ones(2, 3, dtype=torch.float64)},))
    same(aux, ta + 1)
    # jvp: pytrees, has_aux, strict, errors.
    (cu1, tu1), (cu2, tu2) = pair(arr(2, 3)), pair(arr(4))
    same(cf.jvp(multi, (ca, cb), (cu1, cu2)), taf.jvp(multi, (ta, tb), (tu1, tu2)))
    o, t, aux = cf.jvp(lambda x: (x.exp(), x.sum()), (ca,), (cu1,), has_aux=True)
    same((o, t, aux), (ta.exp(), ta.exp() * tu1, ta.sum()))
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        cf.jvp(elementwise, ca, cu1)
    with pytest.raises(RuntimeError, match="same python structure"):
        cf.jvp(multi, (ca, cb), (cu1,))
    with pytest.raises(RuntimeError, match="independent of the inputs"):
        cf.jvp(lambda x: chutney.ones(2, dtype=F64), (ca,), (cu1,), strict=True)
    if ft is not None:
        same(cf.jvp(multi, (ca, cb), (cu1, cu2)), ft.jvp(multi, (ta, tb), (tu1, tu2)))


def test_nested_transforms():
    ca, ta = pair(arr(4))
    cv, tv = pair(arr(4))
    f = lambda x: (x.sin() * x ** 2).sum()  # noqa: E731
    # grad of grad: the inner gradient must keep its graph.
    gg = cf.grad(lambda x: cf.grad(f)(x).sum())(ca)
    same(gg, taf.hessian(f, ta).sum(0))
    # The inner gradient depends on x only through the closure: it must
    # still keep its graph (d/dx sum(2 x y) = 2 y).
    cy, ty = pair(arr(4))
    inner = lambda x: cf.grad(lambda y: (x * y ** 2).sum())(cy).sum()  # noqa: E731
    same(cf.grad(inner)(ca), 2 * ty)
    same(cf.jacrev(inner)(ca), 2 * ty)
    # jacrev of grad and jacfwd of jacrev are both the Hessian.
    H = taf.hessian(f, ta)
    same(cf.jacrev(cf.grad(f))(ca), H)
    same(cf.jacfwd(cf.grad(f))(ca), H)
    same(cf.hessian(f)(ca), H)
    # jvp of grad (forward over reverse) and grad of jvp (reverse over forward).
    same(cf.jvp(cf.grad(f), (ca,), (cv,))[1], H @ tv)
    same(cf.grad(lambda x: cf.jvp(f, (x,), (cv,))[1])(ca), H @ tv)
    # Forward mode inside forward mode (falls back to reverse mode inside).
    g = lambda x: (x.sin() * x).cumsum(0)  # noqa: E731
    fwdfwd = cf.jacfwd(cf.jacfwd(g))(ca)
    same(fwdfwd, taf.jacobian(lambda x: taf.jacobian(g, x, create_graph=True), ta))
    same(cf.jvp(lambda x: cf.jvp(f, (x,), (cv,))[1], (ca,), (cv,))[1], tv @ H @ tv)
    # A gradient of a closure tensor's function, differentiated through its arg.
    w = ca.detach().requires_grad_()
    gp = cf.grad(f)(w)
    assert gp.requires_grad  # an argument needs grad: the result keeps its graph
    (gw,) = chutney.autograd.grad(gp.pow(2).sum(), w)
    tw = ta.detach().requires_grad_()
    (tg,) = torch.autograd.grad(f(tw), tw, create_graph=True)
    same(gw, torch.autograd.grad(tg.pow(2).sum(), tw)[0])


def test_jacfwd_over_an_op_without_forward_rule():
    """An op without a forward-mode rule raises NotImplementedError in
    forward mode; jvp and jacfwd then compute in reverse mode."""
    calls = []

    def cube(x):
        if chutney._C._get_tangent(x) is not None:
            calls.append("forward")
            raise NotImplementedError("cube: no forward-mode (jvp) rule")
        calls.append("reverse")
        return x ** 3

    ca, ta = pair(arr(3))
    same(cf.jacfwd(cube)(ca), torch.diag(3 * ta ** 2))
    assert calls[:2] == ["forward", "reverse"]
    (cv, tv) = pair(arr(3))
    same(cf.jvp(cube, (ca,), (cv,)), (ta ** 3, 3 * ta ** 2 * tv))
    with pytest.raises(NotImplementedError, match="other"):
        cf.jvp(lambda x: (_ for _ in ()).throw(NotImplementedError("other")), (ca,), (cv,))


# ---------------- vmap ----------------

def test_vmap_in_dims_out_dims():
    (cx, tx), (cy, ty) = pair(arr(3, 4)), pair(arr(4))
    f = lambda a, b: a * b + 1  # noqa: E731
    same(cf.vmap(f)(cx, cx), torch.stack([f(tx[i], tx[i]) for i in range(3)]))
    same(cf.vmap(f, in_dims=(0, None))(cx, cy), torch.stack([f(tx[i], ty) for i in range(3)]))
    same(cf.vmap(f, in_dims=(1, 0))(cx, cy), torch.stack([f(tx[:, i], ty[i]) for i in range(4)]))
    same(cf.vmap(f, in_dims=(-1, None), out_dims=1)(cx, cy[:3]),
         torch.stack([f(tx[:, i], ty[:3]) for i in range(4)], 1))
    # Nested trees: a dict argument with per-key dims, a tuple output with per-output out_dims.
    g = lambda p, s: (p["w"] @ p["v"] * s, p["v"].sum())  # noqa: E731
    (cw, tw), (cv, tv) = pair(arr(5, 2, 3)), pair(arr(3))
    got = cf.vmap(g, in_dims=({"w": 0, "v": None}, None), out_dims=(1, 0))({"w": cw, "v": cv}, 2.0)
    same(got, (torch.stack([tw[i] @ tv * 2.0 for i in range(5)], 1), torch.stack([tv.sum()] * 5)))
    got = cf.vmap(g, in_dims=({"w": 0, "v": None}, None), out_dims=(0, None))({"w": cw, "v": cv}, 2.0)
    same(got[1], tv.sum())
    # keyword arguments are not mapped; a single Tensor output with out_dims=(d,)
    same(cf.vmap(lambda a, scale=1.0: a * scale, out_dims=(1,))(cx, scale=3.0), (tx * 3).t())
    if ft is not None:
        same(cf.vmap(f, in_dims=(1, 0))(cx, cy), ft.vmap(f, in_dims=(1, 0))(tx, ty))
    assert chutney.vmap is cf.vmap


def test_vmap_nested_and_of_jacobian():
    (cx, tx), (cy, ty) = pair(arr(3, 4)), pair(arr(5, 4))
    dot = lambda a, b: (a * b).sum()  # noqa: E731
    got = cf.vmap(cf.vmap(dot, in_dims=(None, 0)), in_dims=(0, None))(cx, cy)
    same(got, tx @ ty.t())
    # batched Jacobians
    same(cf.vmap(cf.jacrev(elementwise))(cx), torch.stack([taf.jacobian(elementwise, tx[i]) for i in range(3)]))


def test_vmap_errors_and_randomness():
    cx, _ = pair(arr(3, 4))
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        cf.vmap(lambda a, b: a + b)(cx, chutney.ones(2, 4, dtype=F64))
    with pytest.raises(ValueError, match="at least one Tensor to vmap over"):
        cf.vmap(lambda a: a, in_dims=(None,))(cx)
    with pytest.raises(ValueError, match="We cannot vmap over non-Tensor"):
        cf.vmap(lambda a, s: a * s)(cx, 2.0)
    with pytest.raises(ValueError, match="not compatible with the structure of `inputs`"):
        cf.vmap(lambda a: a, in_dims=(0, 0))(cx)
    with pytest.raises(ValueError, match="expected in_dim to satisfy"):
        cf.vmap(lambda a: a, in_dims=2)(cx)
    with pytest.raises(ValueError, match="out_dims is not compatible"):
        cf.vmap(lambda a: a, out_dims=(0, 1))(cx)
    with pytest.raises(ValueError, match="must only return Tensors"):
        cf.vmap(lambda a: 1.0)(cx)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        cf.vmap(lambda a: a + chutney.randn(4, dtype=F64))(cx)
    same_rows = cf.vmap(lambda a: a * 0 + chutney.randn(4, dtype=F64), randomness="same")(cx)
    assert all(same_rows[i].tolist() == same_rows[0].tolist() for i in range(3))
    diff_rows = cf.vmap(lambda a: a * 0 + chutney.randn(4, dtype=F64), randomness="different")(cx)
    assert diff_rows[0].tolist() != diff_rows[1].tolist()
    with pytest.raises(RuntimeError, match="randomness"):
        cf.vmap(lambda a: a, randomness="sometimes")
    noisy = lambda a: a * (1 + chutney.randn((), dtype=F64))  # noqa: E731
    with pytest.raises(RuntimeError, match="randomness error mode"):
        cf.jacfwd(noisy)(cx[0])
    j = cf.jacfwd(noisy, randomness="same")(cx[0])
    assert j.diagonal().unique().numel() == 1


def test_per_sample_gradients_of_a_model():
    """vmap(grad(loss)) over a batch, the parameters held fixed (in_dims
    None), against one torch.autograd.grad per sample."""
    cnet = chutney.nn.Sequential(chutney.nn.Linear(4, 8), chutney.nn.Tanh(), chutney.nn.Linear(8, 3))
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for (_, cp), tp in zip(cnet.named_parameters(), tnet.parameters()):
            tp.copy_(torch.tensor(cp.detach().numpy()))
    x, y = arr(6, 4).astype(np.float32), rng.integers(0, 3, 6)
    cx, cy = chutney.tensor(x), chutney.tensor(y)
    tx, ty = torch.tensor(x), torch.tensor(y)
    params = {k: v.detach() for k, v in cnet.named_parameters()}

    def loss(p, xi, yi):
        out = cf.functional_call(cnet, p, (xi.unsqueeze(0),))
        return chutney.nn.functional.cross_entropy(out, yi.unsqueeze(0))

    grads, losses = cf.vmap(cf.grad_and_value(loss), in_dims=(None, 0, 0))(params, cx, cy)
    assert list(grads) == [k for k, _ in cnet.named_parameters()]
    names = [k for k, _ in tnet.named_parameters()]
    for i in range(6):
        tl = torch.nn.functional.cross_entropy(tnet(tx[i:i + 1]), ty[i:i + 1])
        tg = torch.autograd.grad(tl, list(tnet.parameters()))
        np.testing.assert_allclose(losses[i].item(), tl.item(), rtol=1e-5)
        for k, g in zip(names, tg):
            np.testing.assert_allclose(grads[k][i].numpy(), g.numpy(), rtol=1e-4, atol=1e-6)
    assert no_history(grads)
    # The per-sample gradients average to the batch gradient.
    batch = chutney.autograd.grad(chutney.nn.functional.cross_entropy(cnet(cx), cy), list(cnet.parameters()))
    for (k, _), b in zip(cnet.named_parameters(), batch):
        np.testing.assert_allclose(grads[k].mean(0).numpy(), b.numpy(), rtol=1e-4, atol=1e-6)


def test_jacfwd_through_custom_functions_falls_back_to_reverse_mode():
    """A custom Function has no forward-mode rule: forward mode through it
    raises, and jacfwd falls back to reverse mode (det is one)."""
    functorch = pytest.importorskip("functorch")
    x = np.random.default_rng(5).standard_normal((3, 3))
    got = chutney.func.jacfwd(chutney.linalg.det)(chutney.tensor(x)).numpy()
    want = functorch.jacfwd(torch.linalg.det)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10)
