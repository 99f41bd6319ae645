"""Mixed precision and int8 from Python: chutney.autocast, amp.GradScaler and
ao.quantization.quantize_dynamic, against inputs rounded with Debian's
PyTorch 1.13 and PyTorch's own autocast, and the float model."""

import threading
import warnings

import pytest

import chutney
from chutney import nn
from conftest import close

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

rng = np.random.default_rng(7)


def rounded(a, dtype):
    """a rounded to dtype (by torch) and widened to float64."""
    return torch.tensor(a, dtype=torch.float32).to(dtype).double()


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_autocast_matmul_conv_are_products_of_rounded_inputs(dt):
    tdt = getattr(torch, dt)
    a, b = rng.standard_normal((5, 33)), rng.standard_normal((33, 4))
    x, w = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3))
    ca, cb, cx, cw = (chutney.tensor(v, dtype=chutney.float32) for v in (a, b, x, w))
    with chutney.autocast("cpu", dtype=getattr(chutney, dt)):
        y = ca @ cb
        z = nn.functional.conv2d(cx, cw, padding=1)
    assert y.dtype == chutney.float32 and z.dtype == chutney.float32
    # f32 sums of the rounded inputs' products.
    assert close(y, (rounded(a, tdt) @ rounded(b, tdt)).tolist(), rtol=1e-5, atol=1e-5)
    zr = torch.nn.functional.conv2d(rounded(x, tdt), rounded(w, tdt), padding=1)
    assert close(z, zr.tolist(), rtol=1e-5, atol=1e-5)
    # Outside the region the same product is f32's, which differs.
    assert not close(ca @ cb, y.tolist(), rtol=1e-5, atol=1e-5)
    if dt == "bfloat16":  # PyTorch 1.13's CPU autocast is bfloat16 only
        ta, tb = torch.tensor(a, dtype=torch.float32), torch.tensor(b, dtype=torch.float32)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            ty = ta @ tb
        assert ty.dtype == torch.bfloat16  # PyTorch rounds the result (and partial sums)
        assert close(y, ty.float().tolist(), rtol=2e-2, atol=5e-2)


def test_autocast_linear_gradients_stay_float32():
    chutney.manual_seed(0)
    lin = nn.Linear(8, 3)
    x = chutney.tensor(rng.standard_normal((4, 8)), dtype=chutney.float32)
    with chutney.autocast("cpu"):
        loss = lin(x).sum()
    loss.backward()
    assert lin.weight.grad.dtype == chutney.float32
    # d sum(x W^T + b) / dW = column sums of x rounded to bf16 on the way in;
    # the gradient of W's bf16 copy is bf16, cast back to f32 (as PyTorch's).
    want = rounded(x.tolist(), torch.bfloat16).sum(0).to(torch.bfloat16).double().expand(3, 8)
    assert close(lin.weight.grad, want.tolist(), rtol=1e-5, atol=1e-5)


def test_autocast_state_nesting_exceptions_decorator_threads():
    assert not chutney.is_autocast_enabled()
    assert chutney.get_autocast_dtype("cpu") == chutney.bfloat16  # torch's default, while off
    with chutney.autocast("cpu", dtype=chutney.float16):
        assert chutney.is_autocast_enabled() and chutney.get_autocast_dtype("cpu") == chutney.float16
        with chutney.amp.autocast("cpu", enabled=False):
            assert not chutney.is_autocast_enabled()
            assert chutney.get_autocast_cpu_dtype() == chutney.float16
            with chutney.autocast("cpu", dtype=chutney.bfloat16):
                assert chutney._C._autocast_dtype() == chutney.bfloat16
            assert not chutney.is_autocast_enabled()
        with pytest.raises(ValueError):
            with chutney.autocast("cpu"):
                raise ValueError("inside")
        assert chutney._C._autocast_dtype() == chutney.float16

        seen = []
        t = threading.Thread(target=lambda: seen.append(chutney.is_autocast_enabled()))
        t.start()
        t.join()
        assert seen == [False]  # per thread
    assert not chutney.is_autocast_enabled()

    @chutney.autocast("cpu")
    def f():
        return chutney._C._autocast_dtype()

    assert f() == chutney.bfloat16 and not chutney.is_autocast_enabled()

    with pytest.raises(RuntimeError, match="device_type 'mps' is unsupported"):
        chutney.autocast("mps")
    if not chutney.cuda.is_available():
        # PyTorch's rule without CUDA: a warning, and the region does
        # nothing (an enclosing CPU region stays on).
        for make in (lambda: chutney.autocast("cuda"), lambda: chutney.cuda.amp.autocast()):
            with pytest.warns(UserWarning, match="CUDA is not available"):
                region = make()
            with chutney.autocast("cpu"):
                with region:
                    assert chutney._C._autocast_dtype() == chutney.bfloat16
            with region:
                assert not chutney.is_autocast_enabled()
        with chutney.autocast("cpu"):
            with chutney.cuda.amp.autocast(enabled=False):  # "fp32 here" on a GPU: not the CPU's
                assert chutney._C._autocast_dtype() == chutney.bfloat16
        with pytest.warns(UserWarning, match="CUDA is not available"):
            scaler = chutney.cuda.amp.GradScaler()
        assert not scaler.is_enabled() and scaler.get_scale() == 1.0
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with chutney.autocast("cpu", dtype=chutney.float64):
            assert not chutney.is_autocast_enabled()
    assert "Disabling autocast" in str(w[0].message)


def torch_scale_sequence(init, growth, backoff, interval, found_inf):
    """PyTorch's GradScaler.update (torch/amp/grad_scaler.py): the scale after each step."""
    scale, tracker, out = init, 0, []
    for bad in found_inf:
        if bad:
            scale, tracker = scale * backoff, 0
        else:
            tracker += 1
            if tracker == interval:
                scale, tracker = scale * growth, 0
        out.append(scale)
    return out


def test_grad_scaler_skips_inf_steps_and_moves_the_scale_as_torch():
    chutney.manual_seed(0)
    lin = nn.Linear(3, 2)
    opt = chutney.optim.SGD(lin.parameters(), lr=0.1)
    scaler = chutney.amp.GradScaler("cpu", init_scale=8.0, growth_factor=4.0, backoff_factor=0.25,
                                    growth_interval=2)
    x = chutney.tensor(rng.standard_normal((4, 3)), dtype=chutney.float32)
    bad = [False, False, False, True, False, True, False, False]
    scales = []
    for inf in bad:
        opt.zero_grad()
        loss = lin(x).sum() * (float("inf") if inf else 1.0)
        scaled = scaler.scale(loss)
        if not inf:
            assert close(scaled.item(), loss.item() * scaler.get_scale(), rtol=1e-6)
        scaled.backward()
        w0, b0 = lin.weight.tolist(), lin.bias.tolist()
        scaler.step(opt)
        scaler.update()
        if inf:  # skipped: nothing changes
            assert lin.weight.tolist() == w0 and lin.bias.tolist() == b0
        else:  # SGD with the unscaled gradient: dW = column sums of x, db = N
            gw = np.tile(np.asarray(x.tolist()).sum(0), (2, 1))
            assert close(lin.weight, (np.asarray(w0) - 0.1 * gw).tolist(), rtol=1e-5, atol=1e-6)
            assert close(lin.bias, [v - 0.1 * 4 for v in b0], rtol=1e-5, atol=1e-6)
        scales.append(scaler.get_scale())
    assert scales == torch_scale_sequence(8.0, 4.0, 0.25, 2, bad)
    assert scaler.state_dict() == {"scale": scales[-1], "growth_factor": 4.0,
                                   "backoff_factor": 0.25, "growth_interval": 2,
                                   "_growth_tracker": 0}


def test_grad_scaler_state_dict_resumes_exactly():
    """A scaler saved mid-run and loaded into a new one (before its first
    step, or into a bound one) goes on with the scales of an uninterrupted
    run; update(new_scale) replaces the iteration's update as in torch."""
    lin = nn.Linear(2, 1)
    x = chutney.ones(1, 2)
    bad = [False, True, False, False, False, False, False]
    want = torch_scale_sequence(16.0, 2.0, 0.5, 3, bad)

    def run(scaler, opt, flags):
        out = []
        for inf in flags:
            opt.zero_grad()
            scaler.scale(lin(x).sum() * (float("inf") if inf else 1.0)).backward()
            scaler.step(opt)
            scaler.update()
            out.append(scaler.get_scale())
        return out

    opts = dict(init_scale=16.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=3)
    first = chutney.amp.GradScaler(**opts)
    got = run(first, chutney.optim.SGD(lin.parameters(), lr=0.0), bad[:3])
    saved = first.state_dict()
    assert saved["_growth_tracker"] == 1 and saved["scale"] == want[2]
    fresh = chutney.amp.GradScaler()
    fresh.load_state_dict(saved)
    assert run(fresh, chutney.optim.SGD(lin.parameters(), lr=0.0), bad[3:5]) == want[3:5]
    bound = chutney.amp.GradScaler(**opts)
    opt = chutney.optim.SGD(lin.parameters(), lr=0.0)
    run(bound, opt, bad[:1])
    bound.load_state_dict(fresh.state_dict())
    assert got + run(bound, opt, bad[5:]) == want[:3] + want[5:]
    opt.zero_grad()
    bound.scale(lin(x).sum()).backward()
    tracker = bound.state_dict()["_growth_tracker"]
    bound.step(opt)
    bound.update(new_scale=3.0)
    assert bound.get_scale() == 3.0 and bound.state_dict()["_growth_tracker"] == tracker


def test_grad_scaler_unscale_clip_and_several_optimizers():
    """PyTorch's protocol: unscale_ before clipping, one skip for all
    optimisers of a step when any had an inf gradient, Python optimisers and
    several param groups; the misuses PyTorch refuses."""
    lin = nn.Linear(2, 1)
    opt = chutney.optim.SGD([{"params": [lin.weight]}, {"params": [lin.bias], "lr": 0.5}], lr=0.1)
    scaler = chutney.amp.GradScaler(init_scale=1024.0)
    with pytest.raises(AssertionError, match="No inf checks"):
        scaler.update()
    x = chutney.tensor([[3.0, 4.0]])
    scaler.scale(lin(x).sum()).backward()
    assert lin.weight.grad.tolist() == [[3072.0, 4096.0]]
    scaler.unscale_(opt)
    assert lin.weight.grad.tolist() == [[3.0, 4.0]]
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    norm = chutney.nn.utils.clip_grad_norm_(lin.parameters(), 1.0)
    assert abs(norm.item() - (9 + 16 + 1) ** 0.5) < 1e-5
    w0, b0 = lin.weight.tolist(), lin.bias.tolist()
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.step(opt)
    scaler.update()
    k = 1 / 26 ** 0.5  # the clipped gradients
    assert close(lin.weight, [[w0[0][0] - 0.1 * 3 * k, w0[0][1] - 0.1 * 4 * k]], rtol=1e-5)
    assert close(lin.bias, [b0[0] - 0.5 * k], rtol=1e-5)
    assert scaler.get_scale() == 1024.0
    # Two optimisers, one of them written in Python: the one with an inf
    # gradient skips its step, the other steps; the scale backs off.
    a, b = nn.Linear(2, 1), nn.Linear(2, 1)
    oa, ob = chutney.optim.SGD(a.parameters(), lr=0.1), chutney.optim.Adamax(b.parameters())
    s2 = chutney.amp.GradScaler(init_scale=4.0, growth_interval=1)
    for bad in (False, True):
        oa.zero_grad()
        ob.zero_grad()
        wa, wb = a.weight.tolist(), b.weight.tolist()
        loss = a(x).sum() + b(x).sum() * (float("inf") if bad else 1.0)
        s2.scale(loss).backward()
        s2.step(oa)
        s2.step(ob)
        s2.update()
        assert a.weight.tolist() != wa and (b.weight.tolist() == wb) == bad
    assert s2.get_scale() == 4.0 * 2 * 0.5
    with pytest.raises(RuntimeError, match="Closure"):
        s2.step(oa, closure=lambda: 0)
    off = chutney.amp.GradScaler(enabled=False)
    loss = lin(chutney.ones(1, 2)).sum()
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}


def test_quantize_dynamic_linear_and_conv2d_close_to_float():
    chutney.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 5 * 5, 10))
    x = chutney.tensor(rng.standard_normal((3, 2, 5, 5)), dtype=chutney.float32)
    w_float = np.asarray(model[3].weight.tolist())
    with chutney.no_grad():
        ref = np.asarray(model(x).tolist())
    with pytest.raises(NotImplementedError, match="inplace=True"):
        chutney.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=chutney.qint8)
    with pytest.raises(NotImplementedError, match="int8 only"):
        chutney.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=chutney.float16,
                                                 inplace=True)
    with pytest.raises(NotImplementedError, match="LSTM"):
        chutney.ao.quantization.quantize_dynamic(model, {nn.LSTM}, inplace=True)
    q = chutney.ao.quantization.quantize_dynamic(model, {nn.Linear, nn.Conv2d},
                                                 dtype=chutney.qint8, inplace=True)
    assert q is model and list(q.parameters()) == []
    lin = q[3]
    assert lin.weight.dtype == chutney.int8 and lin.bias is not None
    # Symmetric per-output-channel weights: within half a step of the float ones.
    scale = np.asarray(lin.weight_scale.tolist()).reshape(-1, 1)
    assert np.allclose(scale, np.abs(w_float).max(1, keepdims=True) / 127, rtol=1e-6)
    assert np.all(np.abs(np.asarray(lin.weight.tolist()) * scale - w_float) <= scale / 2 + 1e-7)
    out = np.asarray(q(x).tolist())
    assert np.abs(out - ref).max() <= 0.02 * np.abs(ref).max()
