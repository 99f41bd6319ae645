"""chutney.compile: traced static programs against eager chutney and PyTorch."""

import warnings

import numpy as np
import pytest

import chutney
import chutney.nn as nn
import chutney.nn.functional as F

torch = pytest.importorskip("torch")


def copy_params(src, dst):
    with torch.no_grad():
        for (n1, p1), (n2, p2) in zip(src.named_parameters(), dst.named_parameters()):
            assert n1 == n2 and tuple(p1.shape) == tuple(p2.shape), (n1, n2)
            p2.copy_(torch.from_numpy(p1.detach().numpy().copy()))


def make_cnn(L):
    # No bias before the batch norm: its gradient is rounding noise there,
    # which Adam's normalised step would turn into full-size moves.
    n = L.nn
    return n.Sequential(n.Conv2d(1, 4, 3, padding=1), n.ReLU(), n.MaxPool2d(2),
                        n.Conv2d(4, 8, 3, padding=1, bias=False), n.BatchNorm2d(8), n.ReLU(), n.MaxPool2d(2),
                        n.Flatten(), n.Linear(8 * 2 * 2, 16), n.ReLU(), n.Dropout(0.0),
                        n.Linear(16, 3))


def data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_function_matches_numpy_and_is_compiled_once_per_signature():
    calls = []

    @chutney.compile
    def f(a, b, scale=2.0):
        calls.append(1)
        h = chutney.tanh(a @ b) * scale
        return h.softmax(-1), h.sum(dim=0, keepdim=True)

    a, b = data(5, 4), data(4, 3, seed=1)
    for _ in range(3):
        s, t = f(chutney.tensor(a), chutney.tensor(b))
    h = np.tanh(a @ b) * 2.0
    e = np.exp(h - h.max(-1, keepdims=True))
    np.testing.assert_allclose(s.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t.numpy(), h.sum(0, keepdims=True), rtol=1e-5, atol=1e-5)
    assert len(calls) == 1  # traced once, then run
    # A new shape and a new non-tensor argument: two more traces.
    s2, _ = f(chutney.tensor(a[:2]), chutney.tensor(b))
    assert s2.shape == (2, 3)
    _, t3 = f(chutney.tensor(a), chutney.tensor(b), scale=3.0)
    np.testing.assert_allclose(t3.numpy(), (np.tanh(a @ b) * 3).sum(0, keepdims=True),
                               rtol=1e-5, atol=1e-5)
    assert len(calls) == 3 and len(f.programs()) == 3
    prog = f.programs()[0]
    assert prog.num_steps >= 1 and "fused" in prog.dump()
    assert prog.stats()["compiles"] == 1


def test_nested_outputs_constants_and_kwargs():
    @chutney.compile
    def f(xs, *, bias):
        return {"sum": xs[0] + xs[1] + bias, "label": "ok", "pair": (xs[0] * 2, 7)}

    x0, x1, b = data(3), data(3, seed=1), data(3, seed=2)
    out = f([chutney.tensor(x0), chutney.tensor(x1)], bias=chutney.tensor(b))
    assert out["label"] == "ok" and out["pair"][1] == 7
    np.testing.assert_allclose(out["sum"].numpy(), x0 + x1 + b, rtol=1e-6)
    np.testing.assert_allclose(out["pair"][0].numpy(), x0 * 2, rtol=1e-6)


def test_module_inference_matches_torch_in_eval_and_train_modes():
    chutney.manual_seed(1)
    cm = make_cnn(chutney)
    tm = make_cnn(torch)
    copy_params(cm, tm)
    compiled = chutney.compile(cm)
    assert isinstance(compiled, nn.Module)
    assert [n for n, _ in compiled.named_parameters()][0] == "_orig_mod.0.weight"
    x = data(6, 1, 8, 8)
    with chutney.no_grad(), torch.no_grad():
        # Train mode: batch statistics (and running averages updated).
        y = compiled(chutney.tensor(x))
        ty = tm(torch.tensor(x))
        np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-4, atol=1e-5)
        compiled.eval()
        tm.eval()
        y = compiled(chutney.tensor(x))
        ty = tm(torch.tensor(x))
        np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-4, atol=1e-5)
    bn_c, bn_t = cm[4], tm[4]
    np.testing.assert_allclose(bn_c.running_mean.numpy(), bn_t.running_mean.numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(bn_c.running_var.numpy(), bn_t.running_var.numpy(), rtol=1e-5)
    assert len(compiled._compiled.programs()) == 2  # one per mode


def test_parameters_are_read_at_run_time():
    lin = nn.Linear(3, 2)
    f = chutney.compile(lin)
    x = chutney.tensor(data(4, 3))
    with chutney.no_grad():
        before = f(x)
        lin.weight.mul_(2)
        lin.bias.zero_()
        after = f(x)
    np.testing.assert_allclose(after.numpy(), x.numpy() @ lin.weight.detach().numpy().T,
                               rtol=1e-5, atol=1e-6)
    assert not np.allclose(before.numpy(), after.numpy())


@pytest.mark.parametrize("opt_name,kwargs", [
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=1e-3)),
    ("Adam", dict(lr=1e-2)),
])
def test_training_step_matches_torch(opt_name, kwargs):
    chutney.manual_seed(2)
    cm = make_cnn(chutney)
    tm = make_cnn(torch)
    copy_params(cm, tm)
    copt = getattr(chutney.optim, opt_name)(cm.parameters(), **kwargs)
    topt = getattr(torch.optim, opt_name)(tm.parameters(), **kwargs)

    @chutney.compile
    def step(x, y):
        copt.zero_grad()
        loss = F.cross_entropy(cm(x), y)
        loss.backward()
        copt.step()
        return loss, loss * 2

    for i in range(4):
        x = data(8, 1, 8, 8, seed=10 + i)
        y = np.random.default_rng(i).integers(0, 3, 8)
        closs, twice = step(chutney.tensor(x), chutney.tensor(y))
        topt.zero_grad()
        tloss = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y))
        tloss.backward()
        topt.step()
        assert abs(closs.item() - tloss.item()) <= 1e-5 * max(1.0, abs(tloss.item())), i
        assert abs(twice.item() - 2 * closs.item()) <= 1e-6 * abs(twice.item())
        for (n, cp), tp in zip(cm.named_parameters(), tm.parameters()):
            np.testing.assert_allclose(cp.grad.numpy(), tp.grad.numpy(), rtol=1e-3, atol=1e-5,
                                       err_msg=f"{n} grad, step {i}")
            np.testing.assert_allclose(cp.detach().numpy(), tp.detach().numpy(), rtol=1e-4,
                                       atol=1e-5, err_msg=f"{n} after step {i}")
    assert len(step.programs()) == 1


def test_training_step_follows_the_learning_rate_schedule():
    chutney.manual_seed(3)
    lin_c = nn.Linear(4, 1)
    lin_e = nn.Linear(4, 1)
    lin_e.load_state_dict(lin_c.state_dict())
    opts = [chutney.optim.SGD(m.parameters(), lr=0.5) for m in (lin_c, lin_e)]
    scheds = [chutney.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.5) for o in opts]

    def step(x):
        opts[0].zero_grad()
        loss = lin_c(x).square().mean()
        loss.backward()
        opts[0].step()
        return loss

    cstep = chutney.compile(step)
    for i in range(4):
        x = chutney.tensor(data(5, 4, seed=i))
        cstep(x)
        opts[1].zero_grad()
        lin_e(x).square().mean().backward()
        opts[1].step()
        for s in scheds:
            s.step()
        np.testing.assert_allclose(lin_c.weight.detach().numpy(), lin_e.weight.detach().numpy(),
                                   rtol=1e-5, atol=1e-7, err_msg=f"step {i}")


def test_untraceable_code_runs_eagerly_with_one_warning():
    def f(x):
        return x * 2 if x.sum().item() > 0 else -x

    cf = chutney.compile(f)
    x = chutney.tensor([1.0, 2.0])
    with pytest.warns(RuntimeWarning, match="reads a tensor's value"):
        assert cf(x).tolist() == [2.0, 4.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cf(x).tolist() == [2.0, 4.0]  # the signature stays eager, quietly
    assert cf(-x).tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="fullgraph=True"):
        chutney.compile(f, fullgraph=True)(x)


def test_results_that_need_gradients_run_eagerly_and_differentiate():
    lin = nn.Linear(3, 1)
    cf = chutney.compile(lin)
    x = chutney.tensor(data(4, 3))
    with pytest.warns(RuntimeWarning, match="need gradients"):
        y = cf(x)
    y.sum().backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), x.numpy().sum(0, keepdims=True),
                               rtol=1e-5)


def test_errors_in_the_function_are_raised():
    @chutney.compile
    def f(a, b):
        return a @ b

    with pytest.raises(ValueError):
        f(chutney.ones(2, 3), chutney.ones(2, 3))
    with pytest.raises(ValueError, match="opt_level"):
        chutney.compile(f, opt_level=5)
    with pytest.raises(TypeError):
        chutney.compile(42)


@pytest.mark.parametrize("level", [0, 1, 2])
def test_opt_levels_agree(level):
    a = data(6, 5)

    def f(x):
        return (x.exp() * 0.5 + x.sin()).relu().mean(1)

    with chutney.no_grad():
        got = chutney.compile(f, opt_level=level)(chutney.tensor(a))
    np.testing.assert_allclose(got.numpy(), np.maximum(np.exp(a) * 0.5 + np.sin(a), 0).mean(1),
                               rtol=1e-5, atol=1e-6)


def test_graph_and_program_api():
    g = chutney._C.Graph()
    x = g.placeholder("x", chutney.float32, (-1, 3))
    y = (x * 3).sum(1)
    p = chutney._C.compile(g, [x], [y])
    for n in (2, 5):
        v = data(n, 3)
        (out,) = p.run([chutney.tensor(v)])
        np.testing.assert_allclose(out.numpy(), (v * 3).sum(1), rtol=1e-5)
    with pytest.raises(TypeError, match="takes 1 inputs"):
        p.run([])
    with pytest.raises(ValueError):
        p.run([chutney.ones(2, 4)])
    with pytest.raises(ValueError):
        g.placeholder("bad", chutney.float32, (-3,))
    with pytest.raises(TypeError):
        g.placeholder("bad", chutney.float32, 3.5)
