"""chutney.optim.lr_scheduler against torch.optim.lr_scheduler (Debian's
PyTorch 1.13): every schedule's lrs step by step (1e-12 relative, two param
groups), the library's SGD moving each parameter by exactly the scheduled
lr times its gradient at every step, SequentialLR and ChainedScheduler over
the library's schedules and this module's, OneCycleLR's momentum cycling
(the parameters of SGD with momentum and of Adam as torch's), and
state_dict round trips. A few exact values are checked without torch."""

import math
import warnings

import pytest

import chutney
from chutney.optim import lr_scheduler as CL
from conftest import close

try:
    import torch
    TL = torch.optim.lr_scheduler
except ImportError:
    torch = TL = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")

LRS = (0.1, 0.05)
GRADS = ([0.5, -2.0], [1.5, 0.25])  # each group's parameter's gradient, every step


def same(a, b, rtol=1e-12):
    """Lists of lrs (or lists of them) equal to rtol, zeros exactly."""
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y, rtol) for x, y in zip(a, b))
    return abs(a - b) <= rtol * abs(b)


def quietly(fn, *args):
    """torch's own warnings (SequentialLR's step(0) is deprecated in 1.13)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def sgd(F, lrs=LRS, **kw):
    Param = chutney.nn.Parameter if F is chutney else torch.nn.Parameter
    ws = [Param(F.ones(2, dtype=F.float64)) for _ in lrs]
    opt = F.optim.SGD([{"params": [w], "lr": lr} for w, lr in zip(ws, lrs)], lr=1.0, **kw)
    return ws, opt


def sgd_step(ws, opt):
    """One step on a known gradient: each parameter must move by exactly
    its group's lr (the one the schedule set) times the gradient."""
    before = [w.tolist() for w in ws]
    lrs = [g["lr"] for g in opt.param_groups]
    opt.zero_grad()
    loss = None
    for w, g in zip(ws, GRADS):
        t = (w * chutney.tensor(g, dtype=chutney.float64)).sum()
        loss = t if loss is None else loss + t
    loss.backward()
    opt.step()
    for w, b, g, lr in zip(ws, before, GRADS, lrs):
        assert close(w.tolist(), [x - lr * d for x, d in zip(b, g)], rtol=1e-14, atol=1e-15)


def run_both(make, steps=35, metrics=None, lrs=LRS, **opt_kw):
    """make(lr_scheduler module, optimizer) for chutney and for torch; steps
    both (step(metrics[k]) when metrics are given) with an SGD step before
    each, and checks the lrs after creation and after each step."""
    cw, co = sgd(chutney, lrs, **opt_kw)
    _, to = sgd(torch, lrs, **opt_kw)
    cs = make(CL, co)
    ts = quietly(make, TL, to)
    got = [cs.get_last_lr()]
    want = [[g["lr"] for g in to.param_groups]]
    for k in range(steps):
        sgd_step(cw, co)
        to.step()  # no gradients: only keeps torch from warning about the order
        args = () if metrics is None else (metrics[k],)
        cs.step(*args)
        quietly(ts.step, *args)
        got.append(cs.get_last_lr())
        want.append([g["lr"] for g in to.param_groups])
        assert [g["lr"] for g in co.param_groups] == got[-1]
    assert same(got, want), (got, want)
    sgd_step(cw, co)
    return cs, ts, got


SCHEDULES = {
    "MultiStepLR": lambda L, o: L.MultiStepLR(o, milestones=[3, 7, 7, 12], gamma=0.5),
    "MultiStepLR-unsorted": lambda L, o: L.MultiStepLR(o, [20, 4], 0.3),
    "ConstantLR": lambda L, o: L.ConstantLR(o, factor=0.25, total_iters=6),
    "ConstantLR-default": lambda L, o: L.ConstantLR(o),
    "LambdaLR-one": lambda L, o: L.LambdaLR(o, lambda e: 0.95 ** e),
    "LambdaLR-per-group": lambda L, o: L.LambdaLR(o, [lambda e: 1.0 / (1 + e),
                                                      lambda e: 1.0 + 0.1 * (e % 4)]),
    "MultiplicativeLR": lambda L, o: L.MultiplicativeLR(o, lambda e: 0.9),
    "MultiplicativeLR-per-group": lambda L, o: L.MultiplicativeLR(
        o, [lambda e: 0.97, lambda e: 1.0 if e % 3 else 0.5]),
    "PolynomialLR": lambda L, o: L.PolynomialLR(o, total_iters=20, power=2.0),
    "PolynomialLR-default": lambda L, o: L.PolynomialLR(o),
    "PolynomialLR-sqrt": lambda L, o: L.PolynomialLR(o, total_iters=40, power=0.5),
    "CosineAnnealingWarmRestarts": lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=5),
    "CosineAnnealingWarmRestarts-mult": lambda L, o: L.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, eta_min=0.01),
    "OneCycleLR-cos": lambda L, o: L.OneCycleLR(o, max_lr=[0.5, 0.2], total_steps=36,
                                                cycle_momentum=False),
    "OneCycleLR-linear": lambda L, o: L.OneCycleLR(o, max_lr=0.4, total_steps=36,
                                                   anneal_strategy="linear",
                                                   cycle_momentum=False),
    "OneCycleLR-cos-3phase": lambda L, o: L.OneCycleLR(o, max_lr=[0.5, 0.2], total_steps=36,
                                                       three_phase=True, cycle_momentum=False),
    "OneCycleLR-linear-3phase": lambda L, o: L.OneCycleLR(
        o, max_lr=0.3, epochs=6, steps_per_epoch=6, pct_start=0.25, anneal_strategy="linear",
        div_factor=10.0, final_div_factor=100.0, three_phase=True, cycle_momentum=False),
    # The library's schedules, this module's, and the two mixed.
    "SequentialLR-library": lambda L, o: L.SequentialLR(
        o, [L.LinearLR(o, start_factor=0.1, total_iters=5),
            L.CosineAnnealingLR(o, T_max=12, eta_min=0.001)], milestones=[5]),
    "SequentialLR-python": lambda L, o: L.SequentialLR(
        o, [L.ConstantLR(o, factor=0.1, total_iters=2), L.MultiStepLR(o, [3, 6], 0.5),
            L.PolynomialLR(o, total_iters=10, power=1.5)], milestones=[2, 12]),
    "SequentialLR-python-then-library": lambda L, o: L.SequentialLR(
        o, [L.ConstantLR(o, factor=0.5, total_iters=3), L.CosineAnnealingLR(o, 10, 0.003)],
        milestones=[4]),
    "SequentialLR-mixed": lambda L, o: L.SequentialLR(
        o, [L.LinearLR(o, 0.5, 1.0, 3), L.MultiStepLR(o, [2, 4], 0.5), L.StepLR(o, 3, 0.7),
            L.LambdaLR(o, lambda e: 1.0 / (e + 1))], milestones=[3, 9, 20]),
    "SequentialLR-warm-restarts": lambda L, o: L.SequentialLR(
        o, [L.LinearLR(o, 0.2, 1.0, 4), L.CosineAnnealingWarmRestarts(o, 4, 2, 0.002)],
        milestones=[4]),
    "ChainedScheduler": lambda L, o: L.ChainedScheduler(
        [L.ConstantLR(o, factor=0.1, total_iters=2), L.ExponentialLR(o, gamma=0.9)]),
    "ChainedScheduler-mixed": lambda L, o: L.ChainedScheduler(
        [L.LinearLR(o, 0.5, 1.0, 4), L.MultiStepLR(o, [5, 10]), L.StepLR(o, 7, 0.8),
         L.MultiplicativeLR(o, lambda e: 0.97)]),
}


@needs_torch
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_lrs_as_torch(name):
    cs, ts, got = run_both(SCHEDULES[name])
    assert len({tuple(x) for x in got}) >= 2  # the schedule moved the lr
    assert isinstance(cs, CL.LRScheduler)
    if hasattr(ts, "last_epoch"):
        assert cs.last_epoch == ts.last_epoch


# (mode, threshold_mode, threshold, metrics): falls, stalls, improves by
# less than the threshold, improves again.
PLATEAU_METRICS = {
    "min-rel": ("min", "rel", 1e-2,
                [10, 9, 8, 8, 8, 8, 7.95, 7.99, 8, 8, 8, 8, 8, 8, 6, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5,
                 5, 5, 5, 5, 5, 5, 5, 5, 5, 5]),
    "max-abs": ("max", "abs", 0.5,
                [1, 2, 3, 3.2, 3.4, 3.4, 3.0, 4, 4.4, 4.45, 4.2, 4.1, 4.0, 4.3, 5, 5, 5, 5, 5, 5, 5,
                 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5]),
    "min-abs": ("min", "abs", 0.1, [float(math.cos(k / 3.0)) for k in range(35)]),
    "max-rel": ("max", "rel", 1e-4, [float(k % 7) for k in range(35)]),
}


@needs_torch
@pytest.mark.parametrize("case", list(PLATEAU_METRICS))
def test_reduce_lr_on_plateau_as_torch(case):
    mode, tmode, threshold, metrics = PLATEAU_METRICS[case]
    cs, _, got = run_both(lambda L, o: L.ReduceLROnPlateau(
        o, mode=mode, factor=0.5, patience=2, threshold=threshold, threshold_mode=tmode,
        cooldown=2, min_lr=[0.01, 0.004]), steps=len(metrics), metrics=metrics)
    firsts = [x[0] for x in got]
    assert firsts[0] == 0.1 and min(firsts) < 0.1  # reduced
    if case == "min-rel":
        # the floors reached: 0.1 -> 0.05 -> 0.025 -> 0.0125 -> 0.01
        assert got[-1] == [0.01, 0.004]


@needs_torch
def test_reduce_lr_on_plateau_eps_and_tensor_metric():
    # 0.01 * 0.5 is within eps of 0.01: no change; the metric a 0-d tensor.
    metrics = [chutney.tensor(1.0)] * 12
    run_both(lambda L, o: L.ReduceLROnPlateau(o, factor=0.5, patience=1, eps=0.006),
             steps=12, metrics=[float(m) for m in metrics], lrs=(0.01, 0.1))
    _, opt = sgd(chutney, (0.01, 0.1))
    s = CL.ReduceLROnPlateau(opt, factor=0.5, patience=1, eps=0.006)
    for m in metrics:
        s.step(m)
    assert s.get_last_lr() == [0.01, 0.00625]


@needs_torch
def test_schedules_step_epoch_closed_form_as_torch():
    """The deprecated step(epoch) takes the closed form, the library's
    schedules too (SequentialLR restarts them that way)."""
    makes = [lambda L, o: L.StepLR(o, 3, 0.5), lambda L, o: L.ExponentialLR(o, 0.9),
             lambda L, o: L.CosineAnnealingLR(o, 10, 0.01), lambda L, o: L.LinearLR(o, 0.3, 0.9, 6),
             lambda L, o: L.MultiStepLR(o, [2, 5, 5], 0.5), lambda L, o: L.ConstantLR(o, 0.5, 4),
             lambda L, o: L.PolynomialLR(o, 8, 2.0)]
    for make in makes:
        _, co = sgd(chutney)
        _, to = sgd(torch)
        cs, ts = make(CL, co), quietly(make, TL, to)
        for epoch in (None, 7, None, None, 2, None, 11):
            if epoch is None:
                cs.step()
            else:
                with pytest.warns(UserWarning, match="deprecated"):
                    cs.step(epoch)
            quietly(ts.step, epoch)
            assert same(cs.get_last_lr(), ts.get_last_lr()), (make, epoch)
            assert cs.last_epoch == ts.last_epoch
            assert [g["lr"] for g in co.param_groups] == cs.get_last_lr()


@needs_torch
def test_warm_restarts_fractional_epochs_as_torch():
    for t_mult in (1, 2, 3):
        _, co = sgd(chutney)
        _, to = sgd(torch)
        cs = CL.CosineAnnealingWarmRestarts(co, T_0=4, T_mult=t_mult, eta_min=0.001)
        ts = TL.CosineAnnealingWarmRestarts(to, T_0=4, T_mult=t_mult, eta_min=0.001)
        for epoch in (0.5, 1.25, 3.999, 4.0, 5.5, None, None, 13.75, 30.2, None, 2.0, None):
            cs.step(epoch)
            quietly(ts.step, epoch)
            assert same(cs.get_last_lr(), ts.get_last_lr()), (t_mult, epoch)
            assert (cs.T_cur, cs.T_i, cs.last_epoch) == (ts.T_cur, ts.T_i, ts.last_epoch)


def params_after_one_cycle(F, L, optim, kw, skw, steps=30):
    Param = chutney.nn.Parameter if F is chutney else torch.nn.Parameter
    w = Param(F.tensor([1.0, -2.0, 3.0], dtype=F.float64))
    v = Param(F.tensor([0.5, -0.25], dtype=F.float64))
    opt = getattr(F.optim, optim)([{"params": [w]}, {"params": [v], "lr": 0.02}], **kw)
    s = L.OneCycleLR(opt, **skw)
    moms = []
    for _ in range(steps):
        opt.zero_grad()
        ((w * w).sum() * 0.5 + (v * v).sum() * 2.0 + (w[0] * v[1]) * 0.3).backward()
        opt.step()
        s.step()
        moms.append([g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups])
    return w.tolist() + v.tolist(), moms, s.get_last_lr()


@needs_torch
@pytest.mark.parametrize("optim,kw", [("SGD", dict(lr=0.1, momentum=0.9)),
                                      ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                      ("Adam", dict(lr=0.1)), ("AdamW", dict(lr=0.1)),
                                      ("RMSprop", dict(lr=0.01, momentum=0.5))])
@pytest.mark.parametrize("three_phase", [False, True])
def test_one_cycle_cycles_momentum_as_torch(optim, kw, three_phase):
    """The default cycle_momentum=True: the library's optimiser steps with
    the cycled momentum or beta1, so the parameters are torch's."""
    skw = dict(max_lr=[0.3, 0.1], total_steps=30, base_momentum=0.8, max_momentum=[0.95, 0.9],
               three_phase=three_phase)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "not cycled" warning here
        got = params_after_one_cycle(chutney, CL, optim, kw, skw)
    want = quietly(params_after_one_cycle, torch, TL, optim, kw, skw)
    assert close(got[0], want[0], rtol=1e-12, atol=1e-14)
    assert same(got[1], want[1]) and len({tuple(m) for m in got[1]}) > 5
    assert same(got[2], want[2])


@needs_torch
def test_one_cycle_without_momentum_buffer_warns_and_schedules_lr():
    """SGD created with momentum=0 has no buffer to cycle: the common call
    still works, with one warning, and the lrs are torch's."""
    ws, co = sgd(chutney)
    _, to = sgd(torch)
    with pytest.warns(UserWarning, match="momentum is not cycled") as rec:
        cs = CL.OneCycleLR(co, max_lr=0.1, total_steps=100)
    assert len(rec) == 1 and not cs.cycle_momentum
    ts = TL.OneCycleLR(to, max_lr=0.1, total_steps=100)
    assert co.param_groups[0]["momentum"] == 0
    for _ in range(40):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sgd_step(ws, co)
            cs.step()
        to.step()
        ts.step()
        assert same(cs.get_last_lr(), ts.get_last_lr())
    # Adagrad has no momentum at all: torch's error, and fine without cycling.
    w = chutney.nn.Parameter(chutney.ones(2))
    with pytest.raises(ValueError, match="momentum"):
        CL.OneCycleLR(chutney.optim.Adagrad([w]), max_lr=0.1, total_steps=10)
    CL.OneCycleLR(chutney.optim.Adagrad([w]), max_lr=0.1, total_steps=10, cycle_momentum=False)


class Decay:
    """A callable object: its attributes are in LambdaLR's state_dict."""

    def __init__(self, k):
        self.k = k

    def __call__(self, epoch):
        return self.k ** epoch


ROUND_TRIPS = {
    "MultiStepLR": SCHEDULES["MultiStepLR"],
    "ConstantLR": SCHEDULES["ConstantLR"],
    "LambdaLR-object": lambda L, o: L.LambdaLR(o, [Decay(0.9), lambda e: 1.0 / (1 + e)]),
    "MultiplicativeLR": SCHEDULES["MultiplicativeLR-per-group"],
    "PolynomialLR": SCHEDULES["PolynomialLR"],
    "CosineAnnealingWarmRestarts": SCHEDULES["CosineAnnealingWarmRestarts-mult"],
    "OneCycleLR": SCHEDULES["OneCycleLR-cos-3phase"],
    "OneCycleLR-momentum": lambda L, o: L.OneCycleLR(o, max_lr=0.3, total_steps=36),
    "SequentialLR-library": SCHEDULES["SequentialLR-library"],
    "SequentialLR-mixed": SCHEDULES["SequentialLR-mixed"],
    "ChainedScheduler-mixed": SCHEDULES["ChainedScheduler-mixed"],
    "ReduceLROnPlateau": lambda L, o: L.ReduceLROnPlateau(o, "max", 0.5, patience=1, cooldown=1,
                                                          min_lr=0.01),
}


@needs_torch
@pytest.mark.parametrize("name", list(ROUND_TRIPS))
def test_state_dict_round_trip(name):
    """A schedule made afresh and given another's state_dict (and its
    optimiser the other's) goes on as the other, and as torch."""
    make = ROUND_TRIPS[name]
    metrics = [float((k * 7) % 5) for k in range(40)] if "Plateau" in name else None
    kw = dict(momentum=0.9) if "momentum" in name else {}

    def step(s, k):
        s.step() if metrics is None else s.step(metrics[k])

    _, co = sgd(chutney, **kw)
    _, to = sgd(torch, **kw)
    cs, ts = make(CL, co), quietly(make, TL, to)
    for k in range(12):
        step(cs, k)
        quietly(step, ts, k)
    _, co2 = sgd(chutney, (0.7, 0.3), **kw)
    cs2 = make(CL, co2)
    if name == "LambdaLR-object":
        cs2.lr_lambdas[0].k = 0.5
    co2.load_state_dict(co.state_dict())
    cs2.load_state_dict(cs.state_dict())
    if name == "LambdaLR-object":
        assert cs2.lr_lambdas[0].k == 0.9
    assert cs2.get_last_lr() == cs.get_last_lr()
    for k in range(12, 30):
        step(cs, k)
        step(cs2, k)
        quietly(step, ts, k)
        assert cs2.get_last_lr() == cs.get_last_lr()
        assert same(cs2.get_last_lr(), [g["lr"] for g in to.param_groups])
        assert [g["lr"] for g in co2.param_groups] == cs2.get_last_lr()
    if "momentum" in name:
        assert [g["momentum"] for g in co2.param_groups] == [g["momentum"]
                                                            for g in to.param_groups]


def test_exact_values_and_the_optimiser_uses_them():
    """Without torch: values worked out by hand, binary fractions so exact."""
    ws, opt = sgd(chutney, (1.0, 0.5))
    s = CL.MultiStepLR(opt, milestones=[2, 4, 4], gamma=0.5)
    got = [s.get_last_lr()]
    for _ in range(5):
        sgd_step(ws, opt)
        s.step()
        got.append(s.get_last_lr())
    assert got == [[1.0, 0.5], [1.0, 0.5], [0.5, 0.25], [0.5, 0.25], [0.125, 0.0625],
                   [0.125, 0.0625]]
    assert s.last_epoch == 5
    # One step at lr 0.125 and 0.0625: w - lr * grad.
    before = [w.tolist() for w in ws]
    sgd_step(ws, opt)
    assert ws[0].tolist() == [before[0][0] - 0.125 * 0.5, before[0][1] + 0.125 * 2.0]
    assert ws[1].tolist() == [before[1][0] - 0.0625 * 1.5, before[1][1] - 0.0625 * 0.25]

    _, opt = sgd(chutney, (1.0, 0.5))
    s = CL.SequentialLR(opt, [CL.ConstantLR(opt, factor=0.25, total_iters=2),
                              CL.ExponentialLR(opt, gamma=0.5)], milestones=[2])
    got = [s.get_last_lr()[0]]
    for _ in range(4):
        s.step()
        got.append(s.get_last_lr()[0])
    assert got == [0.25, 0.25, 1.0, 0.5, 0.25] and s.last_epoch == 4

    _, opt = sgd(chutney, (1.0, 0.5))
    s = CL.ChainedScheduler([CL.ConstantLR(opt, factor=0.5, total_iters=2),
                             CL.StepLR(opt, step_size=1, gamma=0.5)])
    got = [s.get_last_lr()[1]]
    for _ in range(3):
        s.step()
        got.append(s.get_last_lr()[1])
    assert got == [0.25, 0.125, 0.125, 0.0625]

    _, opt = sgd(chutney, (1.0, 0.5))
    s = CL.PolynomialLR(opt, total_iters=4, power=2.0)
    got = [s.get_last_lr()[0]]
    for _ in range(5):
        s.step()
        got.append(s.get_last_lr()[0])
    assert got == [1.0, 0.5625, 0.25, 0.0625, 0.0, 0.0]

    # patience 1, cooldown 1, floor 0.2: reduce, rest, reduce, floor.
    ws, opt = sgd(chutney, (1.0, 0.5))
    s = CL.ReduceLROnPlateau(opt, factor=0.5, patience=1, cooldown=1, min_lr=[0.2, 0.3])
    got = []
    for m in [5, 5, 5, 5, 5, 5, 5, 5, 4]:
        s.step(m)
        got.append(s.get_last_lr())
    assert got == [[1.0, 0.5]] * 2 + [[0.5, 0.3]] * 3 + [[0.25, 0.3]] * 3 + [[0.25, 0.3]]
    sgd_step(ws, opt)  # the library's optimiser has 0.25 and 0.3


def test_errors_and_base_class():
    w = chutney.nn.Parameter(chutney.ones(2))
    opt = chutney.optim.SGD([w], lr=0.1)
    with pytest.raises(ValueError):
        CL.ConstantLR(opt, factor=2.0)
    with pytest.raises(ValueError):
        CL.LambdaLR(opt, [lambda e: 1.0, lambda e: 1.0])
    with pytest.raises(ValueError):
        CL.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError):
        CL.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError):
        CL.ReduceLROnPlateau(opt, mode="lowest")
    with pytest.raises(ValueError):
        CL.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(ValueError):
        CL.OneCycleLR(opt, max_lr=0.1, total_steps=10, anneal_strategy="exp",
                      cycle_momentum=False)
    with pytest.raises(TypeError):
        CL.MultiStepLR(object(), [1])
    a, b = CL.ConstantLR(opt), CL.ExponentialLR(opt, 0.9)
    with pytest.raises(ValueError):
        CL.SequentialLR(opt, [a, b], milestones=[2, 3])
    other = chutney.optim.SGD([chutney.nn.Parameter(chutney.ones(1))], lr=0.1)
    with pytest.raises(ValueError):
        CL.SequentialLR(other, [a, b], milestones=[2])
    with pytest.raises(ValueError):
        CL.ChainedScheduler([a, CL.ConstantLR(other)])
    one = CL.OneCycleLR(chutney.optim.SGD([w], lr=0.1), max_lr=0.1, total_steps=3,
                        cycle_momentum=False)
    for _ in range(3):
        one.step()
    with pytest.raises(ValueError, match="total steps"):
        one.step()
    assert CL._LRScheduler is CL.LRScheduler
    for s in (a, b, one, CL.ReduceLROnPlateau(opt)):
        assert isinstance(s, CL.LRScheduler)
