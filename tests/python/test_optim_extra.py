"""chutney.optim's Python optimisers (Adamax, NAdam, RAdam, Adadelta,
Rprop, ASGD, LBFGS) against Debian's PyTorch 1.13: the parameters and the
state after every step of a small tanh model whose gradients both
libraries compute, in float32 and float64, two parameter groups with their
own options and a parameter without gradient; state_dict round trips that
go on as the uninterrupted run (PyTorch's too, dtype casts included);
add_param_group, zero_grad, schedules, LBFGS with and without line search
on Rosenbrock and least squares; PyTorch 2's options (NAdam and RAdam
maximize and decoupled_weight_decay) against their formula; PyTorch's
argument errors; SparseAdam's refusal."""

import math

import numpy as np
import pytest

import chutney

torch = pytest.importorskip("torch")

STEPS = 8
TOL = {"float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-14)}


def make_params(F, dtype, seed=0):
    """W (3, 4), b (4,), and an unused parameter (no gradient, no state)."""
    rng = np.random.default_rng(seed)
    arrays = [rng.normal(size=(3, 4)), rng.normal(size=4) * 0.5, rng.normal(size=2)]
    return [F.nn.Parameter(F.from_numpy(a.astype(dtype))) for a in arrays]


def data(F, dtype, step):
    rng = np.random.default_rng(100 + step)
    x = F.from_numpy(rng.normal(size=(5, 3)).astype(dtype))
    y = F.from_numpy(rng.normal(size=(5, 4)).astype(dtype))
    return x, y


def loss_of(F, params, dtype, step):
    w, b, _ = params
    x, y = data(F, dtype, step)
    return ((x @ w + b).tanh() * 2 - y).square().mean()


def backward(F, params, opt, dtype, step):
    opt.zero_grad()
    loss = loss_of(F, params, dtype, step)
    loss.backward()
    return loss


def groups(params, group1):
    return [{"params": [params[0], params[2]]}, dict(group1, params=[params[1]])]


def as_np(v):
    if isinstance(v, (chutney.Tensor, torch.Tensor)):
        return v.detach().numpy()
    return np.asarray(v)


def assert_same_state(copt, topt, cparams, tparams, tol, where):
    assert len(copt.state) == len(topt.state), where
    for cp, tp in zip(cparams, tparams):
        cs, ts = copt.state.get(cp, {}), topt.state.get(tp, {})
        assert sorted(cs) == sorted(ts), where
        for k in ts:
            if isinstance(ts[k], torch.Tensor):
                assert isinstance(cs[k], chutney.Tensor), (where, k)
                assert str(cs[k].dtype).split(".")[-1] == str(ts[k].dtype).split(".")[-1], \
                    (where, k)
                np.testing.assert_allclose(as_np(cs[k]), as_np(ts[k]), err_msg=f"{where} {k}",
                                           **tol)
            else:
                assert type(cs[k]) is type(ts[k]) and cs[k] == ts[k], (where, k)


def assert_same_params(cparams, tparams, tol, where):
    for i, (cp, tp) in enumerate(zip(cparams, tparams)):
        np.testing.assert_allclose(as_np(cp), as_np(tp), err_msg=f"{where} param {i}", **tol)


CASES = [
    ("Adamax", dict(lr=0.05), dict(lr=0.02, betas=(0.8, 0.99))),
    ("Adamax", dict(lr=0.05, weight_decay=0.1, eps=1e-3), dict(maximize=True)),
    ("NAdam", dict(lr=0.05), dict(lr=0.02, betas=(0.8, 0.95))),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.05), dict(eps=1e-3)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, foreach=True), dict(lr=0.1)),
    ("RAdam", dict(lr=0.05), dict(betas=(0.9, 0.9))),  # rho_t > 5 from step 6 / step 4
    ("RAdam", dict(lr=0.05, weight_decay=0.1, betas=(0.5, 0.8)), dict(eps=1e-2)),
    ("Adadelta", dict(), dict(lr=0.5, rho=0.8)),
    ("Adadelta", dict(lr=2.0, weight_decay=0.1, eps=1e-4), dict(maximize=True)),
    ("Rprop", dict(lr=0.05), dict(lr=0.2, etas=(0.3, 1.7), step_sizes=(1e-3, 0.25))),
    ("Rprop", dict(lr=0.3, step_sizes=(0.01, 0.5)), dict(maximize=True)),
    ("ASGD", dict(lr=0.05), dict(lr=0.1, lambd=1e-2, alpha=0.5)),
    ("ASGD", dict(lr=0.05, t0=2, weight_decay=0.1), dict(t0=0, maximize=True)),
]


def run_pair(name, opts, group1, dtype, steps=STEPS, seed=0):
    """Both libraries' optimisers over the same parameters, stepped and
    compared after every step."""
    tol = TOL[dtype]
    cparams, tparams = make_params(chutney, dtype, seed), make_params(torch, dtype, seed)
    copt = getattr(chutney.optim, name)(groups(cparams, group1), **opts)
    topt = getattr(torch.optim, name)(groups(tparams, group1), **opts)
    for step in range(steps):
        closs = backward(chutney, cparams, copt, dtype, step)
        tloss = backward(torch, tparams, topt, dtype, step)
        np.testing.assert_allclose(closs.item(), tloss.item(), **tol)
        copt.step()
        topt.step()
        where = f"{name}{opts}{group1} {dtype} step {step}"
        assert_same_params(cparams, tparams, tol, where)
        assert_same_state(copt, topt, cparams, tparams, tol, where)
    return cparams, tparams, copt, topt


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,opts,group1", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_steps_match_torch(name, opts, group1, dtype):
    _, _, copt, topt = run_pair(name, opts, group1, dtype)
    assert isinstance(copt, chutney.optim.Optimizer)
    # PyTorch 1.13's options and values, and PyTorch 2's maximize and
    # decoupled_weight_decay where 1.13 lacks them
    added = set(copt.defaults) - set(topt.defaults)
    assert added <= {"maximize", "decoupled_weight_decay"}
    assert {k: v for k, v in copt.defaults.items() if k not in added} == topt.defaults
    for cg, tg in zip(copt.state_dict()["param_groups"], topt.state_dict()["param_groups"]):
        assert {k: v for k, v in cg.items() if k not in added} == tg


def continue_both(name, copt, topt, cparams, tparams, dtype, first, steps, tol):
    for step in range(first, first + steps):
        backward(chutney, cparams, copt, dtype, step)
        backward(torch, tparams, topt, dtype, step)
        copt.step()
        topt.step()
        assert_same_params(cparams, tparams, tol, f"{name} after the round trip, step {step}")
        assert_same_state(copt, topt, cparams, tparams, tol, f"{name} round trip step {step}")


@pytest.mark.parametrize("name,opts", [
    ("Adamax", dict(lr=0.05, weight_decay=0.1)), ("NAdam", dict(lr=0.05)),
    ("RAdam", dict(lr=0.05)), ("Adadelta", dict(lr=0.5)), ("Rprop", dict(lr=0.05)),
    ("ASGD", dict(lr=0.05, t0=1)),
])
def test_state_dict_round_trip_through_a_checkpoint(name, opts, tmp_path):
    # float64: PyTorch's load_state_dict gives NAdam's mu_product and ASGD's
    # eta and mu the parameters' dtype, which changes later rounding
    dtype = "float64"
    group1 = dict(lr=0.02)
    cparams, tparams, copt, topt = run_pair(name, opts, group1, dtype, steps=3)
    sd = copt.state_dict()
    assert sorted(sd) == ["param_groups", "state"] and sorted(sd["state"]) == [0, 2]
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    chutney.save(sd, tmp_path / "opt.safetensors")
    back = chutney.load(tmp_path / "opt.safetensors")

    cparams2 = [chutney.nn.Parameter(p.detach().clone()) for p in cparams]
    tparams2 = [torch.nn.Parameter(p.detach().clone()) for p in tparams]
    copt2 = getattr(chutney.optim, name)(groups(cparams2, dict(lr=0.5)), lr=0.3)
    topt2 = getattr(torch.optim, name)(groups(tparams2, dict(lr=0.5)), lr=0.3)
    copt2.load_state_dict(back)
    topt2.load_state_dict(topt.state_dict())
    assert [g["lr"] for g in copt2.param_groups] == [opts["lr"], 0.02]
    continue_both(name, copt2, topt2, cparams2, tparams2, dtype, 3, 3, TOL[dtype])
    # the original goes on as the copy (load_state_dict copied the tensors),
    # NAdam's to rounding: its copy's mu_product became float64
    for step in range(3, 6):
        backward(chutney, cparams, copt, dtype, step)
        copt.step()
    for a, b in zip(cparams, cparams2):
        if name == "NAdam":
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
        else:
            assert chutney.equal(a, b)


def test_load_state_dict_errors():
    p = make_params(chutney, "float32")
    opt = chutney.optim.Adamax(groups(p, {}))
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(chutney.optim.Adamax([p[0]]).state_dict())
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict(chutney.optim.Adamax(
            [{"params": [p[0]]}, {"params": [p[1], p[2]]}]).state_dict())


def test_zero_grad_add_param_group_and_a_group_edit():
    dtype = "float32"
    cparams, tparams = make_params(chutney, dtype), make_params(torch, dtype)
    copt = chutney.optim.RAdam([cparams[0]], lr=0.05)
    topt = torch.optim.RAdam([tparams[0]], lr=0.05)
    for step in range(4):
        if step == 2:
            copt.add_param_group({"params": cparams[1], "lr": 0.01, "betas": (0.5, 0.9)})
            topt.add_param_group({"params": tparams[1], "lr": 0.01, "betas": (0.5, 0.9)})
            copt.param_groups[0]["eps"] = topt.param_groups[0]["eps"] = 1e-3
        backward(chutney, cparams, copt, dtype, step)
        backward(torch, tparams, topt, dtype, step)
        copt.step()
        topt.step()
        assert_same_params(cparams, tparams, TOL[dtype], f"step {step}")
        assert_same_state(copt, topt, cparams, tparams, TOL[dtype], f"step {step}")
    copt.zero_grad()
    assert cparams[0].grad.tolist() == [[0.0] * 4] * 3
    copt.zero_grad(set_to_none=True)
    assert cparams[0].grad is None and cparams[1].grad is None
    with pytest.raises(ValueError, match="more than one parameter group"):
        copt.add_param_group({"params": [cparams[0]]})
    with pytest.raises(TypeError, match="ordered collections"):
        copt.add_param_group({"params": {cparams[2]}})
    assert "Parameter Group 1" in repr(copt) and "betas: (0.5, 0.9)" in repr(copt)


@pytest.mark.parametrize("name,make_sched", [
    ("NAdam", lambda L, o: L.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5)),
    ("Adadelta", lambda L, o: L.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4)),
    ("ASGD", lambda L, o: L.optim.lr_scheduler.LambdaLR(o, lambda e: 1 / (1 + e))),
    ("Adamax", lambda L, o: L.optim.lr_scheduler.OneCycleLR(o, max_lr=[0.1, 0.05],
                                                             total_steps=6)),
])
def test_a_scheduler_drives_the_lr(name, make_sched):
    dtype = "float64"
    cparams, tparams = make_params(chutney, dtype), make_params(torch, dtype)
    copt = getattr(chutney.optim, name)(groups(cparams, dict(lr=0.02)), lr=0.05)
    topt = getattr(torch.optim, name)(groups(tparams, dict(lr=0.02)), lr=0.05)
    cs, ts = make_sched(chutney, copt), make_sched(torch, topt)
    for step in range(5):
        backward(chutney, cparams, copt, dtype, step)
        backward(torch, tparams, topt, dtype, step)
        copt.step()
        topt.step()
        cs.step()
        ts.step()
        assert cs.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)
        assert [g["lr"] for g in copt.param_groups] == pytest.approx(
            [g["lr"] for g in topt.param_groups], rel=1e-12)
        if name == "Adamax":  # OneCycleLR cycles betas[0]
            assert copt.param_groups[0]["betas"] == pytest.approx(topt.param_groups[0]["betas"])
        assert_same_params(cparams, tparams, TOL[dtype], f"{name} scheduled step {step}")


@pytest.mark.parametrize("name", ["NAdam", "RAdam"])
def test_pytorch2_options_follow_their_formula(name):
    """maximize: the step of the negated gradient; decoupled_weight_decay:
    p *= 1 - lr * weight_decay, then the step without weight decay (PyTorch
    2's algorithm; 1.13 has neither option)."""
    dtype = "float64"
    lr, wd = 0.05, 0.2
    cparams, tparams = make_params(chutney, dtype), make_params(torch, dtype)
    copt = getattr(chutney.optim, name)(cparams, lr=lr, weight_decay=wd, maximize=True,
                                        decoupled_weight_decay=True)
    topt = getattr(torch.optim, name)(tparams, lr=lr)
    for step in range(5):
        backward(chutney, cparams, copt, dtype, step)
        backward(torch, tparams, topt, dtype, step)
        with torch.no_grad():
            for p in tparams:
                if p.grad is not None:
                    p.grad.neg_()
                    p.mul_(1 - lr * wd)
        copt.step()
        topt.step()
        assert_same_params(cparams, tparams, TOL[dtype], f"{name} step {step}")


# ---- LBFGS ----

def rosenbrock(F, params):
    x, y = params
    return (1 - x).square().sum() + 100 * (y - x.square()).square().sum()


def least_squares(F, params, dtype="float32"):
    (w,) = params
    rng = np.random.default_rng(7)
    a = F.from_numpy(rng.normal(size=(8, 4)).astype(dtype))
    b = F.from_numpy(rng.normal(size=8).astype(dtype))
    return (a @ w - b).square().sum()


def lbfgs_pair(problem, init, dtype, opts, steps):
    out = []
    for F in (chutney, torch):
        ps = [F.nn.Parameter(F.from_numpy(np.array(v, dtype=dtype))) for v in init]
        opt = F.optim.LBFGS(ps, **opts)
        out.append((ps, opt))
    calls = [0, 0]

    def closure_of(i, F, ps, opt):
        def closure():
            calls[i] += 1
            opt.zero_grad()
            loss = problem(F, ps)
            loss.backward()
            return loss
        return closure

    (cps, copt), (tps, topt) = out
    cclosure, tclosure = closure_of(0, chutney, cps, copt), closure_of(1, torch, tps, topt)
    for step in range(steps):
        closs = copt.step(cclosure)
        tloss = topt.step(tclosure)
        yield step, cps, tps, copt, topt, closs, tloss, calls


@pytest.mark.parametrize("line_search_fn,lr", [(None, 0.1), ("strong_wolfe", 1),
                                               ("strong_wolfe", 3)])  # 3: extrapolates
def test_lbfgs_rosenbrock_matches_torch(line_search_fn, lr):
    opts = dict(lr=lr, max_iter=7, history_size=4, line_search_fn=line_search_fn)
    tol = dict(rtol=1e-9, atol=1e-12)
    for step, cps, tps, copt, topt, closs, tloss, calls in lbfgs_pair(
            rosenbrock, ([-1.2, 0.5], [1.0, 0.8]), "float64", opts, 5):
        assert closs.item() == pytest.approx(tloss.item(), rel=1e-9)
        assert calls[0] == calls[1], step
        assert_same_params(cps, tps, tol, f"LBFGS {line_search_fn} step {step}")
        cs, ts = copt.state[cps[0]], topt.state[tps[0]]
        for k in ("func_evals", "n_iter", "prev_loss"):
            assert cs[k] == pytest.approx(ts[k], rel=1e-9), (step, k)
        assert len(cs["old_dirs"]) == len(ts["old_dirs"]) <= 4
        np.testing.assert_allclose(as_np(cs["d"]), as_np(ts["d"]), **tol)
        np.testing.assert_allclose(float(cs["t"]), float(ts["t"]), **tol)
    assert rosenbrock(chutney, cps).item() < 5.0  # from 54.7


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_least_squares_float32(line_search_fn):
    opts = dict(lr=0.5, max_iter=4, line_search_fn=line_search_fn)
    for step, cps, tps, copt, topt, closs, tloss, calls in lbfgs_pair(
            least_squares, ([0.1, -0.2, 0.3, 0.0],), "float32", opts, 3):
        assert calls[0] == calls[1], step
        assert_same_params(cps, tps, dict(rtol=1e-4, atol=1e-5), f"step {step}")


def test_lbfgs_state_dict_round_trip_and_errors():
    opts = dict(max_iter=3, history_size=2, line_search_fn="strong_wolfe")
    init = ([-1.2, 0.5], [1.0, 0.8])
    steps = lbfgs_pair(rosenbrock, init, "float64", opts, 4)
    for step, cps, tps, copt, topt, *_ in steps:
        if step == 1:
            break
    sd = copt.state_dict()
    assert sorted(sd["state"][0]) == sorted(topt.state_dict()["state"][0])
    ps2 = [chutney.nn.Parameter(p.detach().clone()) for p in cps]
    opt2 = chutney.optim.LBFGS(ps2, **opts)
    opt2.load_state_dict(sd)

    def closure_for(ps, opt):
        def closure():
            opt.zero_grad()
            loss = rosenbrock(chutney, ps)
            loss.backward()
            return loss
        return closure

    for _ in range(2):
        copt.step(closure_for(cps, copt))
        opt2.step(closure_for(ps2, opt2))
        for a, b in zip(cps, ps2):
            assert chutney.equal(a, b)
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        chutney.optim.LBFGS([{"params": [cps[0]]}, {"params": [cps[1]]}])
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        chutney.optim.LBFGS(cps, lr=-1)  # PyTorch 2's check
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        chutney.optim.LBFGS(cps, line_search_fn="backtracking").step(closure_for(cps, copt))
    with pytest.raises(TypeError, match="closure"):
        chutney.optim.LBFGS(cps).step()


# ---- argument errors, SparseAdam, compile ----

BAD = [
    ("Adamax", dict(lr=-0.1)), ("Adamax", dict(eps=-1.0)), ("Adamax", dict(betas=(1.0, 0.9))),
    ("Adamax", dict(betas=(0.9, -0.1))), ("Adamax", dict(weight_decay=-1)),
    ("NAdam", dict(lr=-1)), ("NAdam", dict(momentum_decay=-0.1)),
    ("NAdam", dict(betas=(0.9, 1.0))), ("RAdam", dict(eps=-1e-8)),
    ("RAdam", dict(weight_decay=-0.5)), ("Adadelta", dict(rho=1.5)),
    ("Adadelta", dict(lr=-1.0)), ("Adadelta", dict(eps=-1)), ("Adadelta", dict(weight_decay=-1)),
    ("Rprop", dict(lr=-1)), ("Rprop", dict(etas=(1.1, 1.2))), ("Rprop", dict(etas=(0.5, 0.9))),
    ("ASGD", dict(lr=-1)), ("ASGD", dict(weight_decay=-1)),
    ("SparseAdam", dict(lr=0.0)), ("SparseAdam", dict(eps=0.0)),
    ("SparseAdam", dict(betas=(0.5, 1.0))),
]


@pytest.mark.parametrize("name,kwargs", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_argument_errors_as_torch(name, kwargs):
    with pytest.raises(ValueError) as te:
        getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(2))], **kwargs)
    with pytest.raises(ValueError) as ce:
        getattr(chutney.optim, name)([chutney.nn.Parameter(chutney.ones(2))], **kwargs)
    assert str(ce.value) == str(te.value)


def test_other_refusals():
    p = [chutney.nn.Parameter(chutney.ones(2))]
    with pytest.raises(NotImplementedError, match="no sparse gradients"):
        chutney.optim.SparseAdam(p)
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        chutney.optim.Adamax(p, differentiable=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        chutney.optim.ASGD([])
    with pytest.raises(TypeError, match="iterable of Tensors"):
        chutney.optim.Rprop(p[0])
    assert issubclass(chutney.optim.SparseAdam, chutney.optim.Optimizer)


def test_closure_and_a_compiled_step_run_eagerly():
    dtype = "float32"
    ca, cb = make_params(chutney, dtype), make_params(chutney, dtype)
    oa = chutney.optim.NAdam(ca, lr=0.05)
    ob = chutney.optim.NAdam(cb, lr=0.05)

    def train(x):
        oa.zero_grad()
        loss = loss_of(chutney, ca, dtype, 0) + x.sum()
        loss.backward()
        oa.step()
        return loss

    compiled = chutney.compile(train)
    x = chutney.zeros(1)
    with pytest.warns(RuntimeWarning, match="runs eagerly"):
        la = compiled(x)
    def closure():
        ob.zero_grad()
        loss = loss_of(chutney, cb, dtype, 0)
        loss.backward()
        return loss

    lb = ob.step(closure)
    assert lb.item() == la.item()
    for a, b in zip(ca, cb):
        assert chutney.equal(a, b)
    assert math.isfinite(la.item())
