"""The torch.nn surface that PyTorch 1.13 has and chutney lacked, against
PyTorch (values, gradients, schedules, errors): the in-place activations
(F.relu_ ...) and inplace=True, F.embedding's max_norm / scale_grad_by_freq
/ padding_idx, Embedding(Bag).from_pretrained, F.pad(mode='circular'),
adaptive_max_pool3d / max_unpool3d / ReflectionPad3d, the *_with_indices
pools, F.multi_head_attention_forward, Module.get/set_extra_state,
register_load_state_dict_post_hook and cuda, CyclicLR,
AdaptiveLogSoftmaxWithLoss, the remaining Lazy layers, the deprecated
init aliases and clip_grad_norm_(error_if_nonfinite). Skipped without
torch."""

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
from torch_pairs import Const, both  # noqa: E402,F401

rng = np.random.default_rng(11)
CF, TF = chutney.nn.functional, torch.nn.functional


def n(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def copy_state(tm, cm):
    cm.load_state_dict({k: chutney.tensor(v.detach().numpy()) for k, v in
                        tm.state_dict().items()})


# ---- in-place activations ----

@pytest.mark.parametrize("name,args", [
    ("relu_", ()), ("elu_", (0.7,)), ("leaky_relu_", (0.2,)), ("hardtanh_", (-0.5, 0.8)),
    ("threshold_", (0.1, -3.0)), ("celu_", (1.5,)), ("selu_", ()), ("rrelu_", (0.1, 0.3)),
])
def test_inplace_functions(name, args):
    x = n(4, 5)

    def fn(lib, F, a):
        b = a * 2.0
        out = getattr(F, name)(b, *args)
        assert out is b or out.data_ptr() == b.data_ptr()  # written into its input
        return b
    both(fn, x)


@pytest.mark.parametrize("name", ["relu", "elu", "leaky_relu", "hardtanh", "silu", "selu", "celu",
                                  "relu6", "hardsigmoid", "hardswish", "mish"])
def test_inplace_flag_writes_into_input(name):
    def fn(lib, F, a):
        b = a * 1.5
        getattr(F, name)(b, inplace=True)
        return b  # the result is seen through b
    both(fn, n(3, 6))


def test_inplace_on_leaf_is_refused():
    for lib, F in ((chutney, CF), (torch, TF)):
        leaf = lib.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf Variable"):
            F.relu_(leaf)
        with pytest.raises(RuntimeError, match="leaf Variable"):
            F.elu(leaf, inplace=True)


def test_celu_alpha_zero():
    with pytest.raises(RuntimeError, match="alpha cannot be 0"):
        CF.celu(chutney.ones(2), alpha=0.0)


# ---- embedding ----

def test_embedding_padding_and_freq_gradients():
    w = n(6, 3)
    idx = np.array([[1, 2, 2], [5, 2, 0]], dtype=np.int64)
    both(lambda lib, F, w, i: F.embedding(i, w, padding_idx=2), w, idx)
    both(lambda lib, F, w, i: F.embedding(i, w, padding_idx=-1), w, idx)
    both(lambda lib, F, w, i: F.embedding(i, w, scale_grad_by_freq=True), w, idx)
    both(lambda lib, F, w, i: F.embedding(i, w, padding_idx=0, scale_grad_by_freq=True), w, idx)
    for bad in (6, -7):
        with pytest.raises(AssertionError, match="Padding_idx"):
            CF.embedding(chutney.tensor(idx), chutney.tensor(w), padding_idx=bad)


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_embedding_max_norm_renormalises_weight(norm_type):
    w = n(6, 4, scale=2.0)
    idx = np.array([0, 3, 3, 5], dtype=np.int64)
    cw, tw = chutney.tensor(w), torch.tensor(w)
    co = CF.embedding(chutney.tensor(idx), cw, max_norm=1.5, norm_type=norm_type)
    to = TF.embedding(torch.tensor(idx), tw, max_norm=1.5, norm_type=norm_type)
    np.testing.assert_allclose(co.numpy(), to.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(cw.numpy(), tw.numpy(), rtol=1e-6, atol=1e-6)
    assert not np.allclose(cw.numpy(), w)  # rows over max_norm were rescaled in place
    np.testing.assert_array_equal(cw.numpy()[[1, 2, 4]], w[[1, 2, 4]])  # rows not looked up


def test_embedding_from_pretrained():
    w = n(5, 3)
    ce = chutney.nn.Embedding.from_pretrained(chutney.tensor(w))
    te = torch.nn.Embedding.from_pretrained(torch.tensor(w))
    assert ce.weight.requires_grad is te.weight.requires_grad is False
    idx = np.array([4, 0, 2], dtype=np.int64)
    np.testing.assert_array_equal(ce(chutney.tensor(idx)).numpy(), te(torch.tensor(idx)).numpy())
    src = chutney.tensor(w)
    ce = chutney.nn.Embedding.from_pretrained(src, freeze=False, padding_idx=1)
    te = torch.nn.Embedding.from_pretrained(torch.tensor(w), freeze=False, padding_idx=1)
    idx = np.array([1, 3, 1, 0], dtype=np.int64)
    ce(chutney.tensor(idx)).sum().backward()
    te(torch.tensor(idx)).sum().backward()
    np.testing.assert_array_equal(ce.weight.grad.numpy(), te.weight.grad.numpy())
    np.testing.assert_array_equal(ce.weight.detach().numpy()[1], w[1])  # the row is kept
    with chutney.no_grad():
        src[0, 0] = 42.0  # the weight is the tensor given, as PyTorch
    assert ce.weight[0, 0].item() == 42.0
    with pytest.raises(AssertionError, match="2-dimensional"):
        chutney.nn.Embedding.from_pretrained(chutney.ones(3))


def test_embedding_bag_from_pretrained():
    w = n(6, 4)
    idx = np.array([[0, 2, 5], [1, 1, 3]], dtype=np.int64)
    for mode in ("sum", "mean", "max"):
        cb = chutney.nn.EmbeddingBag.from_pretrained(chutney.tensor(w), mode=mode, freeze=False)
        tb = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(w), mode=mode, freeze=False)
        assert cb.weight.requires_grad and tb.weight.requires_grad
        np.testing.assert_allclose(cb(chutney.tensor(idx)).detach().numpy(),
                                   tb(torch.tensor(idx)).detach().numpy(), rtol=1e-6)
    assert not chutney.nn.EmbeddingBag.from_pretrained(chutney.tensor(w)).weight.requires_grad


# ---- padding and pooling ----

@pytest.mark.parametrize("shape,pad", [
    ((2, 3, 5), (2, 1)), ((1, 2, 4, 5), (1, 2, 0, 3)), ((1, 2, 3, 4, 3), (1, 1, 2, 0, 3, 2)),
    ((2, 3, 4), (4, 0)),
])
def test_pad_circular(shape, pad):
    both(lambda lib, F, x: F.pad(x, pad, mode="circular"), n(*shape))


def test_pad_circular_negative_crops():
    # out[j] = x[(j - left) mod n]; PyTorch 1.13's negative circular pads
    # are not consistent with its positive ones, so this is not compared
    x = chutney.arange(4.0).reshape(1, 1, 4)
    assert CF.pad(x, (-1, 2), mode="circular").reshape(-1).tolist() == [1, 2, 3, 0, 1]


def test_pad_circular_errors():
    for lib, F in ((chutney, CF), (torch, TF)):
        with pytest.raises(RuntimeError, match="wrapping around more than once"):
            F.pad(lib.ones(1, 1, 2), (3, 0), mode="circular")
        with pytest.raises(RuntimeError, match="divisible by 2"):
            F.pad(lib.ones(1, 1, 3), (1,), mode="circular")
        with pytest.raises(NotImplementedError, match="non-constant padding"):
            F.pad(lib.ones(3), (1, 1), mode="circular")
        with pytest.raises(RuntimeError, match="Invalid padding size"):
            F.pad(lib.ones(1, 2, 2, 2), (1, 1, 1, 1, 1, 1), mode="circular")


def test_reflection_pad3d():
    both(lambda lib, F, x: lib.nn.ReflectionPad3d((1, 2, 0, 1, 2, 1))(x), n(2, 2, 3, 4, 3))
    both(lambda lib, F, x: lib.nn.ReflectionPad3d(1)(x), n(2, 3, 3, 3))


@pytest.mark.parametrize("shape,size", [
    ((2, 3, 4, 6, 6), (2, 3, 3)), ((2, 5, 7, 5, 6), (3, 4, 2)), ((3, 5, 4, 4), (2, None, 3)),
    ((1, 2, 3, 3, 3), 1),
])
def test_adaptive_max_pool3d(shape, size):
    both(lambda lib, F, x: F.adaptive_max_pool3d(x, size), n(*shape))
    both(lambda lib, F, x: lib.nn.AdaptiveMaxPool3d(size)(x), n(*shape))


def test_max_unpool3d():
    x = torch.tensor(n(2, 2, 4, 4, 6))
    pooled, idx = TF.max_pool3d(x, 2, 2, return_indices=True)
    want = TF.max_unpool3d(pooled, idx, 2, 2)
    got = CF.max_unpool3d(chutney.tensor(pooled.numpy()), chutney.tensor(idx.numpy()), 2, 2)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    m = chutney.nn.MaxUnpool3d(2)
    out = m(chutney.tensor(pooled.numpy()), chutney.tensor(idx.numpy()),
            output_size=(2, 2, 5, 5, 7))
    np.testing.assert_array_equal(
        out.numpy(), torch.nn.MaxUnpool3d(2)(pooled, idx, output_size=(2, 2, 5, 5, 7)).numpy())
    both(lambda lib, F, p, i: F.max_unpool3d(p, i, 2), pooled.numpy(), idx.numpy())


def test_max_pool_with_indices():
    x = n(2, 3, 7, 6)
    cv, ci = CF.max_pool2d_with_indices(chutney.tensor(x), 3, 2, 1)
    tv, ti = TF.max_pool2d_with_indices(torch.tensor(x), 3, 2, 1)
    np.testing.assert_array_equal(cv.numpy(), tv.numpy())
    np.testing.assert_array_equal(ci.numpy(), ti.numpy())
    cv, ci = CF.max_pool1d_with_indices(chutney.tensor(x[0]), 2)
    tv, ti = TF.max_pool1d_with_indices(torch.tensor(x[0]), 2)
    np.testing.assert_array_equal(ci.numpy(), ti.numpy())
    assert CF.native_channel_shuffle is CF.channel_shuffle


# ---- multi_head_attention_forward ----

@pytest.mark.parametrize("need_weights", [True, False])
def test_multi_head_attention_forward(need_weights):
    L, S, N, E, H = 4, 5, 2, 8, 2
    q, k, v = n(L, N, E), n(S, N, E), n(S, N, E)
    w_in, b_in, w_out, b_out = n(3 * E, E, scale=0.3), n(3 * E), n(E, E, scale=0.3), n(E)
    mask = np.triu(np.ones((L, S), dtype=bool), 2)
    kpm = np.zeros((N, S), dtype=bool)
    kpm[1, 4] = True

    def fn(lib, F, q, k, v, w_in, b_in, w_out, b_out, m, kp):
        out, wts = F.multi_head_attention_forward(
            q, k, v, E, H, w_in, b_in, None, None, False, 0.0, w_out, b_out,
            key_padding_mask=kp, need_weights=need_weights, attn_mask=m)
        assert (wts is None) == (not need_weights)
        return out if wts is None else out.sum() * 0 + out + wts.sum()
    both(fn, q, k, v, w_in, b_in, w_out, b_out, mask, kpm, tol=1e-4)


def test_multi_head_attention_forward_separate_weights():
    L, N, E, H = 3, 2, 4, 2
    x = n(L, N, E)
    wq, wk, wv, w_out = (n(E, E, scale=0.4) for _ in range(4))

    def fn(lib, F, x, wq, wk, wv, w_out):
        return F.multi_head_attention_forward(
            x, x, x, E, H, None, None, None, None, False, 0.0, w_out, None,
            need_weights=False, use_separate_proj_weight=True, q_proj_weight=wq,
            k_proj_weight=wk, v_proj_weight=wv)[0]
    both(fn, x, wq, wk, wv, w_out, tol=1e-4)
    with pytest.raises(NotImplementedError):
        CF.multi_head_attention_forward(*(chutney.tensor(x),) * 3, E, H, None, None,
                                        chutney.zeros(1, 1, E), chutney.zeros(1, 1, E), False,
                                        0.0, chutney.tensor(w_out), None)


# ---- Module methods ----

def _extra_state_model(lib):
    class WithExtra(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(2, 2)
            self.steps = 0

        def get_extra_state(self):
            return {"steps": self.steps}

        def set_extra_state(self, state):
            self.steps = state["steps"]
    return lib.nn.Sequential(WithExtra(), lib.nn.ReLU())


def test_extra_state_round_trip():
    for lib in (chutney, torch):
        a, b = _extra_state_model(lib), _extra_state_model(lib)
        a[0].steps = 7
        sd = a.state_dict()
        # a module's own entries, its extra state, then its children's
        assert list(sd) == ["0._extra_state", "0.lin.weight", "0.lin.bias"]
        assert sd["0._extra_state"] == {"steps": 7}
        assert b.load_state_dict(sd) is not None and b[0].steps == 7
        del sd["0._extra_state"]
        with pytest.raises(RuntimeError, match='Missing key.*"0._extra_state"'):
            b.load_state_dict(sd)
        # a module without the setter does not take one
        plain = lib.nn.Sequential(lib.nn.Linear(2, 2))
        res = plain.load_state_dict({**plain.state_dict(), "0._extra_state": 1}, strict=False)
        assert res.unexpected_keys == ["0._extra_state"]
    with pytest.raises(RuntimeError, match="should never be called"):
        chutney.nn.Linear(2, 2).get_extra_state()


def test_load_state_dict_post_hook():
    for lib in (chutney, torch):
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Linear(3, 1))
        seen = []

        def forgive(module, keys):
            seen.append((type(module).__name__, list(keys.missing_keys)))
            keys.missing_keys.clear()  # a hook may forgive keys before strict judges
        h = m.register_load_state_dict_post_hook(forgive)
        sd = m.state_dict()
        del sd["1.bias"]
        assert m.load_state_dict(sd).missing_keys == []
        assert seen == [("Sequential", ["1.bias"])]
        h.remove()
        with pytest.raises(RuntimeError, match="Missing key"):
            m.load_state_dict(sd)
        m[0].register_load_state_dict_post_hook(lambda mod, keys: 1)
        with pytest.raises(AssertionError, match="not.?expected to return new values"):
            m.load_state_dict(m.state_dict())


def test_strict_errors_after_loading_matching_keys():
    # PyTorch copies what matches, then raises about the keys
    for lib in (chutney, torch):
        m = lib.nn.Linear(2, 2)
        sd = {"weight": lib.ones(2, 2)}
        with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "bias"'):
            m.load_state_dict(sd)
        assert float(m.weight.sum()) == 4.0


def test_module_cuda_and_aliases():
    assert callable(chutney.nn.Module.cuda)
    if not chutney.cuda.is_available():
        with pytest.raises(Exception):
            chutney.nn.Linear(2, 2).cuda()
    assert isinstance(chutney.nn.LSTM(2, 3), chutney.nn.RNNBase)
    assert isinstance(chutney.nn.GRUCell(2, 3), chutney.nn.RNNCellBase)


# ---- CyclicLR ----

def _lrs(lib, make, steps=25, momentum=0.9, opt="SGD"):
    p = lib.nn.Parameter(lib.ones(2))
    q = lib.nn.Parameter(lib.ones(2))
    groups = [{"params": [p]}, {"params": [q], "lr": 0.5}]
    o = (lib.optim.SGD(groups, lr=0.1, momentum=momentum) if opt == "SGD" else
         getattr(lib.optim, opt)(groups, lr=0.1))
    s = make(lib, o)
    seq = []
    for _ in range(steps):
        o.step()
        s.step()
        seq.append([g["lr"] for g in o.param_groups] +
                   [g.get("momentum") for g in o.param_groups] + s.get_last_lr())
    return seq, s


@pytest.mark.parametrize("kw", [
    dict(base_lr=0.01, max_lr=0.1, step_size_up=4),
    dict(base_lr=[0.01, 0.02], max_lr=[0.1, 0.3], step_size_up=3, step_size_down=5,
         mode="triangular2"),
    dict(base_lr=0.01, max_lr=0.1, step_size_up=2, mode="exp_range", gamma=0.9),
    dict(base_lr=0.01, max_lr=0.1, step_size_up=3, scale_fn=lambda x: 1 / (x + 1),
         scale_mode="iterations", base_momentum=0.7, max_momentum=0.95),
    dict(base_lr=0.01, max_lr=0.1, step_size_up=3, cycle_momentum=False),
])
def test_cyclic_lr_matches_torch(kw):
    def make(lib, o):
        return lib.optim.lr_scheduler.CyclicLR(o, **kw)
    got, _ = _lrs(chutney, make)
    want, _ = _lrs(torch, make)
    np.testing.assert_allclose(np.array(got, dtype=float), np.array(want, dtype=float),
                               rtol=1e-12)


def test_cyclic_lr_momentum_reaches_library_optimiser():
    # the lr and momentum the optimiser's step uses are the schedule's
    def run(lib):
        p = lib.nn.Parameter(lib.ones(3))
        o = lib.optim.SGD([p], lr=0.1, momentum=0.5)
        s = lib.optim.lr_scheduler.CyclicLR(o, 0.01, 0.2, step_size_up=2)
        for _ in range(6):
            o.zero_grad()
            (p * p).sum().backward()
            o.step()
            s.step()
        return p.detach().numpy()
    np.testing.assert_allclose(run(chutney), run(torch), rtol=1e-5)


def test_cyclic_lr_errors_and_state():
    p = chutney.nn.Parameter(chutney.ones(1))
    with pytest.raises(ValueError, match="mode is invalid"):
        chutney.optim.lr_scheduler.CyclicLR(chutney.optim.SGD([p], lr=0.1, momentum=0.9),
                                            0.01, 0.1, mode="cosine")
    with pytest.raises(ValueError, match="must support momentum"):
        chutney.optim.lr_scheduler.CyclicLR(chutney.optim.Adam([p], lr=0.1), 0.01, 0.1)
    with pytest.raises(ValueError, match="expected 1 values for max_lr"):
        chutney.optim.lr_scheduler.CyclicLR(chutney.optim.SGD([p], lr=0.1, momentum=0.9),
                                            0.01, [0.1, 0.2])
    _, s = _lrs(chutney, lambda lib, o: lib.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, step_size_up=3, scale_fn=lambda x: 0.5, scale_mode="iterations"), steps=5)
    sd = s.state_dict()
    assert "_scale_fn_custom" not in sd and sd["last_epoch"] == 5
    seq, s2 = _lrs(chutney, lambda lib, o: lib.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, step_size_up=3, scale_fn=lambda x: 0.5, scale_mode="iterations"), steps=1)
    s2.load_state_dict(sd)
    assert s2.last_epoch == 5 and s2.scale_fn(3) == 0.5
    # Adam with cycle_momentum=False is fine
    _, s3 = _lrs(chutney, lambda lib, o: lib.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, cycle_momentum=False), steps=2, opt="Adam")
    assert s3.last_epoch == 2


# ---- AdaptiveLogSoftmaxWithLoss ----

def test_adaptive_log_softmax_matches_torch():
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 9, 15], div_value=2.0, head_bias=True)
    cm = chutney.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 9, 15], div_value=2.0,
                                               head_bias=True)
    assert list(cm.state_dict()) == list(tm.state_dict())
    copy_state(tm, cm)
    x = n(7, 16)
    y = np.array([0, 5, 19, 3, 9, 14, 16], dtype=np.int64)
    cx, tx = chutney.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    co, to = cm(cx, chutney.tensor(y)), tm(tx, torch.tensor(y))
    np.testing.assert_allclose(co.output.detach().numpy(), to.output.detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(co.loss.item(), to.loss.item(), rtol=1e-5)
    co.loss.backward()
    to.loss.backward()
    np.testing.assert_allclose(cx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6)
    cg = dict(cm.named_parameters())
    for k, p in tm.named_parameters():
        np.testing.assert_allclose(cg[k].grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(cm.log_prob(cx).detach().numpy(), tm.log_prob(tx).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(cm.predict(cx).numpy(), tm.predict(tx).numpy())
    # unbatched
    c1, t1 = cm(cx[2], chutney.tensor(19)), tm(tx[2], torch.tensor(19))
    assert tuple(c1.output.shape) == tuple(t1.output.shape) == ()
    np.testing.assert_allclose(c1.loss.item(), t1.loss.item(), rtol=1e-5)


def test_adaptive_log_softmax_errors():
    for lib in (chutney, torch):
        for cut in ([5, 3], [0, 3], [3, 20], [3, 3]):
            with pytest.raises(ValueError, match="cutoffs should be a sequence"):
                lib.nn.AdaptiveLogSoftmaxWithLoss(8, 20, cut)
        m = lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])
        with pytest.raises(RuntimeError, match="Target values should be in"):
            m(lib.ones(2, 8), lib.tensor([1, 10]))
        with pytest.raises(RuntimeError, match="same size in the batch"):
            m(lib.ones(3, 8), lib.tensor([1, 2]))
        with pytest.raises(RuntimeError, match="multi-target not supported"):
            m(lib.ones(2, 8), lib.tensor([[1], [2]]))


# ---- lazy layers ----

@pytest.mark.parametrize("name,args,shape", [
    ("LazyConv3d", (4, 2), (2, 3, 4, 5, 5)),
    ("LazyConvTranspose1d", (4, 3), (2, 3, 6)),
    ("LazyConvTranspose2d", (4, 3, 2, 1, 1), (2, 3, 4, 5)),
    ("LazyConvTranspose3d", (2, 2), (1, 3, 2, 3, 3)),
    ("LazyBatchNorm1d", (), (4, 3, 5)),
    ("LazyBatchNorm2d", (), (4, 3, 2, 2)),
    ("LazyBatchNorm3d", (1e-3, 0.2, False), (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), (2, 3, 5)),
    ("LazyInstanceNorm2d", (1e-5, 0.1, True, True), (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), (2, 3, 2, 3, 3)),
])
def test_lazy_layers(name, args, shape):
    cm, tm = getattr(chutney.nn, name)(*args), getattr(torch.nn, name)(*args)
    x = n(*shape)
    cm.train(), tm.train()
    tm(torch.tensor(x))
    cm(chutney.tensor(x))
    assert type(cm).__name__ == type(tm).__name__ == name.replace("Lazy", "")
    assert list(cm.state_dict()) == list(tm.state_dict())
    tm = getattr(torch.nn, name)(*args)
    tm(torch.tensor(x))  # fresh statistics for both
    copy_state(tm, cm)
    both_out = [m(lib.tensor(x)).detach().numpy() for m, lib in ((cm, chutney), (tm, torch))]
    np.testing.assert_allclose(both_out[0], both_out[1], rtol=1e-4, atol=1e-5)


def test_lazy_norm_needs_channels():
    with pytest.raises(RuntimeError, match="at least 2"):
        chutney.nn.LazyBatchNorm1d()(chutney.ones(3))


# ---- init aliases, clip_grad_norm_ ----

@pytest.mark.parametrize("name,args", [("orthogonal", ()), ("eye", ()), ("dirac", ()),
                                       ("sparse", (0.5,))])
def test_deprecated_init_aliases(name, args):
    t = chutney.empty(4, 4) if name != "dirac" else chutney.empty(2, 2, 3)
    with pytest.warns(UserWarning, match=f"nn.init.{name} is now deprecated"):
        getattr(chutney.nn.init, name)(t, *args)


def test_clip_grad_norm_error_if_nonfinite():
    for lib in (chutney, torch):
        p = lib.nn.Parameter(lib.ones(3))
        p.grad = lib.tensor([1.0, float("inf"), 2.0])
        with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
            lib.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
        assert p.grad[0].item() == 1.0  # left alone
        p.grad = lib.tensor([3.0, 4.0, 0.0])
        total = lib.nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
        assert abs(total.item() - 5.0) < 1e-6
        np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8, 0.0], rtol=1e-5)
        with pytest.warns(UserWarning, match="deprecated"):
            lib.nn.utils.clip_grad_norm(p, 1.0)
