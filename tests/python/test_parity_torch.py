"""Parity with PyTorch: the same Python code, run once with chutney and once
with torch, gives the same values and the same gradients. Skipped where
torch is not installed (Debian's python3-torch is the reference)."""

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

rng = np.random.default_rng(1234)


def arr(*shape, positive=False, away_from_zero=False):
    a = rng.standard_normal(shape)
    if positive:
        a = np.abs(a) + 0.5
    if away_from_zero:
        a = np.where(np.abs(a) < 0.2, 0.5, a)
    return a


class const:
    """A float input that does not require a gradient (class weights)."""

    def __init__(self, a):
        self.a = a


def run(lib, fn, arrays, dtype):
    """Forward and gradients of sum(out * seed) for each float input."""
    ts = []
    for a in arrays:
        if isinstance(a, const):
            ts.append(lib.tensor(a.a, dtype=getattr(lib, dtype)))
        elif np.issubdtype(a.dtype, np.floating):
            ts.append(lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=True))
        else:
            ts.append(lib.tensor(a))
    out = fn(lib, lib.nn.functional, *ts)
    if isinstance(out, (tuple, list)):
        out = out[0]
    seed_np = np.random.default_rng(99).standard_normal(tuple(out.shape))
    seed = (torch.tensor(seed_np, dtype=out.dtype) if lib is torch
            else chutney.tensor(seed_np, dtype=out.dtype))
    grads = []
    if out.requires_grad:
        out.backward(seed)
        grads = [t.grad for t in ts if t.requires_grad]
    value = out.detach().numpy() if lib is torch else out.detach().numpy()
    grads = [None if g is None else (g.numpy() if lib is torch else g.numpy()) for g in grads]
    return value, grads


def compare(fn, arrays, dtype="float64", rtol=1e-10, atol=1e-10):
    cv, cg = run(chutney, fn, arrays, dtype)
    tv, tg = run(torch, fn, arrays, dtype)
    assert cv.shape == tv.shape, (cv.shape, tv.shape)
    np.testing.assert_allclose(cv, tv, rtol=rtol, atol=atol, err_msg="forward")
    assert len(cg) == len(tg)
    for i, (a, b) in enumerate(zip(cg, tg)):
        if b is None:
            assert a is None or not np.any(a)
            continue
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"gradient of input {i}")


X = arr(3, 4)
Y = arr(3, 4)
P = arr(3, 4, positive=True)
V = arr(4)
NZ = arr(3, 4, away_from_zero=True)

CASES = {
    # elementwise
    "abs": (lambda L, F, x: x.abs(), [NZ]),
    "neg": (lambda L, F, x: -x, [X]),
    "exp": (lambda L, F, x: x.exp(), [X]),
    "log": (lambda L, F, x: x.log(), [P]),
    "sqrt": (lambda L, F, x: x.sqrt(), [P]),
    "rsqrt": (lambda L, F, x: x.rsqrt(), [P]),
    "reciprocal": (lambda L, F, x: x.reciprocal(), [P]),
    "log1p_expm1": (lambda L, F, x: x.log1p() + x.expm1(), [P]),
    "trig": (lambda L, F, x: x.sin() * x.cos(), [X]),
    "tanh_sigmoid": (lambda L, F, x: x.tanh() + x.sigmoid(), [X]),
    "relu": (lambda L, F, x: x.relu() + F.relu(x * 2), [NZ]),
    "square": (lambda L, F, x: x.square(), [X]),
    "erf": (lambda L, F, x: L.erf(x), [X]),
    "clamp": (lambda L, F, x: x.clamp(-0.5, 0.7) + x.clamp(min=0.1), [NZ]),
    "leaky_relu": (lambda L, F, x: F.leaky_relu(x, 0.2), [NZ]),
    "elu": (lambda L, F, x: F.elu(x, 0.7), [NZ]),
    "gelu": (lambda L, F, x: F.gelu(x) + F.gelu(x, approximate="tanh"), [X]),
    "silu": (lambda L, F, x: F.silu(x), [X]),
    "softplus": (lambda L, F, x: F.softplus(x, beta=2.0), [X]),
    "pow_scalar": (lambda L, F, x: x ** 3 + x ** 0.5 + 2 ** x, [P]),
    "scalar_arith": (lambda L, F, x: (x * 2 + 1) / 3 - 1.5 / x + (1 - x), [P]),
    # binary, broadcasting
    "add_sub_mul_div": (lambda L, F, x, y, v: (x + y) * v - x / (y.abs() + 1) + v / 2, [X, Y, V]),
    "pow": (lambda L, F, x, y: x ** y, [P, Y]),
    "maximum_minimum": (lambda L, F, x, y: L.maximum(x, y) * L.minimum(x, y), [X, Y]),
    "where": (lambda L, F, x, y: L.where(x > 0, x * 2, y), [NZ, Y]),
    "matmul": (lambda L, F, x, y: x @ y.T, [X, Y]),
    "matmul_vector": (lambda L, F, x, v: x @ v, [X, V]),
    "matmul_batch": (lambda L, F, a, x: a @ x, [arr(2, 5, 3), X]),
    "bmm": (lambda L, F, a, b: L.bmm(a, b), [arr(2, 3, 4), arr(2, 4, 5)]),
    # reductions
    "sum": (lambda L, F, x: x.sum() + x.sum(dim=1).sum() + x.sum(dim=(0, 1), keepdim=True).sum(), [X]),
    "mean": (lambda L, F, x: x.mean(dim=0) * x.mean(), [X]),
    "prod": (lambda L, F, x: x.prod(dim=1), [P]),
    "max": (lambda L, F, x: x.max(dim=1).values + x.max() + x.amax(dim=0).sum(), [X]),
    "min": (lambda L, F, x: x.min(dim=0, keepdim=True).values, [X]),
    "var_std": (lambda L, F, x: x.var(dim=1) + x.std() + x.var(dim=0, unbiased=False).sum(), [X]),
    "norm": (lambda L, F, x: x.norm() + x.norm(p=1, dim=1).sum() + x.norm(dim=0).sum(), [NZ]),
    "logsumexp": (lambda L, F, x: x.logsumexp(dim=1), [X]),
    "cumsum": (lambda L, F, x: x.cumsum(dim=1), [X]),
    "softmax": (lambda L, F, x: x.softmax(dim=1) + F.log_softmax(x, dim=0), [X]),
    # shapes and views
    "reshape_permute": (lambda L, F, x: x.reshape(2, 6).t().reshape(3, 2, 2).permute(2, 0, 1), [X]),
    "transpose_flatten": (lambda L, F, a: a.transpose(0, 2).flatten(1), [arr(2, 3, 4)]),
    "unsqueeze_expand": (lambda L, F, v: v.unsqueeze(0).expand(3, 4) * v[:3].unsqueeze(1), [V]),
    "cat_stack": (lambda L, F, x, y: L.cat([x, y], dim=1) + L.stack([x, y]).sum(0).repeat(1, 2), [X, Y]),
    "split_chunk": (lambda L, F, x: x.split(1, dim=1)[2] * x.chunk(2, dim=0)[1].sum(), [X]),
    "narrow_flip": (lambda L, F, x: x.narrow(1, 1, 2) + x.flip(0)[:, :2], [X]),
    "tril_triu": (lambda L, F, x: x.tril() - x.triu(1), [X]),
    "gather": (lambda L, F, x, i: x.gather(1, i), [X, np.array([[0, 3], [1, 1], [2, 0]])]),
    "index_select": (lambda L, F, x, i: x.index_select(1, i), [X, np.array([3, 0, 3])]),
    "indexing": (lambda L, F, x: x[1:, ::2] * 2 + x[[0, 2], [1, 3]].sum() + x[x > 0].sum(), [NZ]),
    "indexing_none_ellipsis": (lambda L, F, a: a[..., None, 1] + a[0, None], [arr(2, 3, 4)]),
    # nn.functional
    "linear": (lambda L, F, x, w, b: F.linear(x, w, b), [X, arr(5, 4), arr(5)]),
    "conv2d": (lambda L, F, x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
               [arr(2, 3, 7, 7), arr(4, 3, 3, 3), arr(4)]),
    "conv2d_groups_dilation": (lambda L, F, x, w: F.conv2d(x, w, None, padding=(2, 1), dilation=(2, 1),
                                                           groups=2), [arr(1, 4, 6, 6), arr(4, 2, 3, 3)]),
    "conv1d": (lambda L, F, x, w, b: F.conv1d(x, w, b, stride=2), [arr(2, 3, 9), arr(5, 3, 3), arr(5)]),
    "conv_transpose2d": (lambda L, F, x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1,
                                                                   output_padding=1),
                         [arr(1, 3, 4, 4), arr(3, 2, 3, 3), arr(2)]),
    "max_pool2d": (lambda L, F, x: F.max_pool2d(x, 2) + F.max_pool2d(x, 3, stride=2, padding=1)[..., :2, :2],
                   [arr(2, 3, 4, 4)]),
    "avg_pool2d": (lambda L, F, x: F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False),
                   [arr(1, 2, 5, 5)]),
    "adaptive_avg_pool2d": (lambda L, F, x: F.adaptive_avg_pool2d(x, (2, 3)), [arr(1, 2, 5, 7)]),
    "pad": (lambda L, F, x: F.pad(x, (1, 2, 0, 1)) + 0 + F.pad(x, (1, 2, 0, 1), mode="reflect"),
            [arr(1, 2, 3, 4)]),
    "layer_norm": (lambda L, F, x, w, b: F.layer_norm(x, (4,), w, b), [X, arr(4), arr(4)]),
    "cross_entropy": (lambda L, F, x, t: F.cross_entropy(x, t), [arr(5, 4), np.array([0, 3, 1, 1, 2])]),
    "cross_entropy_opts": (lambda L, F, x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1,
                                                                  ignore_index=1),
                           [arr(5, 4), np.array([0, 3, 1, 1, 2]), const(arr(4, positive=True))]),
    "cross_entropy_none": (lambda L, F, x, t: F.cross_entropy(x, t, reduction="none"),
                           [arr(3, 4, 2), np.array([[0, 3], [1, 1], [2, 2]])]),
    "nll_loss": (lambda L, F, x, t: F.nll_loss(F.log_softmax(x, 1), t, reduction="sum"),
                 [arr(5, 4), np.array([0, 3, 1, 1, 2])]),
    "mse_l1": (lambda L, F, x, y: F.mse_loss(x, y) + F.l1_loss(x, y, reduction="sum"), [NZ, Y]),
    "bce_with_logits": (lambda L, F, x, y, pw: F.binary_cross_entropy_with_logits(x, y, pos_weight=pw),
                        [X, np.abs(np.sin(Y)), const(arr(4, positive=True))]),
    "bce": (lambda L, F, x, y: F.binary_cross_entropy(x.sigmoid(), y), [X, np.abs(np.sin(Y))]),
    "dropout_off": (lambda L, F, x: F.dropout(x, 0.3, training=False) + F.dropout(x, 0.0), [X]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_parity_f64(name):
    fn, arrays = CASES[name]
    compare(fn, arrays, "float64", rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_parity_f32(name):
    fn, arrays = CASES[name]
    compare(fn, arrays, "float32", rtol=2e-4, atol=2e-5)


def test_second_derivative_parity():
    def f(L, x):
        y = (x.sin() * x.exp()).sum()
        (g,) = L.autograd.grad(y, x, create_graph=True)
        (h,) = L.autograd.grad((g * g).sum(), x)
        return g.detach(), h

    a = arr(5)
    cg, ch = f(chutney, chutney.tensor(a, requires_grad=True))
    tg, th = f(torch, torch.tensor(a, requires_grad=True))
    np.testing.assert_allclose(cg.numpy(), tg.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ch.numpy(), th.numpy(), rtol=1e-10)


def copy_params(src, dst):
    """chutney module -> torch module with the same parameter names."""
    with torch.no_grad():
        for (n1, p1), (n2, p2) in zip(src.named_parameters(), dst.named_parameters()):
            assert n1 == n2 and tuple(p1.shape) == tuple(p2.shape), (n1, n2)
            p2.copy_(torch.from_numpy(p1.detach().numpy().copy()))


def make_mlp(L):
    nn = L.nn
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3))


@pytest.mark.parametrize("opt_name,kwargs", [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("Adam", dict(lr=1e-2, betas=(0.8, 0.99), weight_decay=1e-2)),
    ("AdamW", dict(lr=1e-2, amsgrad=True)),
    ("RMSprop", dict(lr=1e-2, momentum=0.5, centered=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
])
def test_mlp_training_steps_match_torch(opt_name, kwargs):
    chutney.manual_seed(3)
    cm = make_mlp(chutney)
    tm = make_mlp(torch)  # float32, as the library's layers
    cm_params = list(cm.parameters())
    copy_params(cm, tm)
    x = arr(10, 6).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1, 2, 2, 1, 0, 0])
    copt = getattr(chutney.optim, opt_name)(cm_params, **kwargs)
    topt = getattr(torch.optim, opt_name)(tm.parameters(), **kwargs)
    for step in range(3):
        copt.zero_grad()
        topt.zero_grad()
        closs = chutney.nn.functional.cross_entropy(cm(chutney.tensor(x)), chutney.tensor(y))
        tloss = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y))
        closs.backward()
        tloss.backward()
        assert abs(closs.item() - tloss.item()) < 1e-5 * max(1, abs(tloss.item())), step
        for (n, cp), tp in zip(cm.named_parameters(), tm.parameters()):
            np.testing.assert_allclose(cp.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-6,
                                       err_msg=f"{n} grad, step {step}")
        copt.step()
        topt.step()
        for (n, cp), tp in zip(cm.named_parameters(), tm.parameters()):
            np.testing.assert_allclose(cp.detach().numpy(), tp.detach().numpy(), rtol=1e-4,
                                       atol=1e-6, err_msg=f"{n} after step {step}")


def test_layers_match_torch():
    chutney.manual_seed(5)
    layers = [
        (lambda L: L.nn.Conv2d(3, 4, 3, stride=2, padding=1), arr(2, 3, 7, 7)),
        (lambda L: L.nn.ConvTranspose2d(3, 2, 3, stride=2), arr(1, 3, 4, 4)),
        (lambda L: L.nn.BatchNorm2d(3), arr(4, 3, 5, 5)),
        (lambda L: L.nn.BatchNorm1d(4), arr(6, 4)),
        (lambda L: L.nn.LayerNorm((3, 4)), arr(2, 3, 4)),
        (lambda L: L.nn.Embedding(7, 3), np.array([[1, 6], [0, 2]])),
        (lambda L: L.nn.LSTM(4, 5, num_layers=2, bidirectional=True), arr(3, 2, 4)),
        (lambda L: L.nn.GRU(4, 5, batch_first=True), arr(2, 3, 4)),
        (lambda L: L.nn.RNN(4, 5), arr(3, 2, 4)),
    ]
    for make, a in layers:
        cl, tl = make(chutney), make(torch)
        copy_params(cl, tl)
        floats = np.issubdtype(a.dtype, np.floating)
        cx = chutney.tensor(a, dtype=chutney.float32 if floats else None)
        tx = torch.tensor(a, dtype=torch.float32 if floats else None)
        co, to = cl(cx), tl(tx)
        if isinstance(co, tuple):
            co, to = co[0], to[0]
        np.testing.assert_allclose(co.detach().numpy(), to.detach().numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=type(cl).__name__)
        seed = arr(*co.shape).astype(np.float32)
        co.backward(chutney.tensor(seed))
        to.backward(torch.tensor(seed))
        for (n, cp), tp in zip(cl.named_parameters(), tl.parameters()):
            np.testing.assert_allclose(cp.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-4,
                                       err_msg=f"{type(cl).__name__}.{n}")
        for (n, cb), tb in zip(cl.named_buffers(), tl.buffers()):
            np.testing.assert_allclose(cb.numpy(), tb.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"{type(cl).__name__}.{n}")


def test_init_statistics_like_torch():
    chutney.manual_seed(0)
    lin = chutney.nn.Linear(400, 300)
    bound = 1 / 400 ** 0.5
    w = lin.weight.detach().numpy()
    assert w.min() >= -bound and w.max() <= bound
    assert abs(w.std() - bound / 3 ** 0.5) < 0.01 * bound
