"""What PyTorch training scripts do besides the model: forward hooks,
random_split by fractions, pad_sequence, finfo/iinfo, vector_to_parameters,
the backends switches and matmul precision; against PyTorch where it has
the same thing (Debian's python3-torch; skipped without it)."""

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
nn = chutney.nn


def test_forward_hooks():
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    seen = []
    h1 = m[0].register_forward_hook(lambda mod, args, out: seen.append(tuple(out.shape)))
    h2 = m[2].register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    x = chutney.randn(5, 3)
    y = m(x)
    assert seen == [(5, 4)]
    np.testing.assert_allclose(y.detach().numpy(), np.broadcast_to(m[2].bias.detach().numpy(),
                                                                   (5, 2)), rtol=1e-6)
    h2.remove()
    with m.register_forward_hook(lambda mod, args, out: out + 1):
        z = m(x)
    np.testing.assert_allclose(z.detach().numpy(), m(x).detach().numpy() + 1, rtol=1e-6)
    h1.remove()
    m(x)
    assert seen == [(5, 4), (5, 4), (5, 4)]  # two calls inside the with, none after remove
    order = []
    lin = nn.Linear(2, 2)
    lin.register_forward_hook(lambda *a: order.append("b"))
    lin.register_forward_hook(lambda *a: order.append("a"), prepend=True)
    lin(chutney.ones(1, 2))
    assert order == ["a", "b"]


def test_random_split_fractions_like_torch():
    for n, fr in ((10, [0.8, 0.2]), (11, [0.5, 0.3, 0.2]), (7, [1 / 3, 1 / 3, 1 / 3])):
        ds = chutney.utils.data.TensorDataset(chutney.arange(n))
        parts = chutney.utils.data.random_split(ds, fr)
        want = torch.utils.data.random_split(range(n), fr)
        assert [len(p) for p in parts] == [len(w) for w in want]
        got = sorted(int(p[i][0]) for p in parts for i in range(len(p)))
        assert got == list(range(n))
    with pytest.raises(ValueError):
        chutney.utils.data.random_split(chutney.utils.data.TensorDataset(chutney.arange(4)),
                                        [0.5, 0.6])


def test_pad_sequence_and_parameter_vectors():
    seqs = [np.random.default_rng(i).standard_normal((k, 3)) for i, k in enumerate((2, 5, 1))]
    for bf in (False, True):
        got = nn.utils.rnn.pad_sequence([chutney.tensor(s) for s in seqs], batch_first=bf,
                                        padding_value=-1.0)
        want = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first=bf,
                                               padding_value=-1.0)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    lin = nn.Linear(3, 2)
    v = nn.utils.parameters_to_vector(lin.parameters())
    assert tuple(v.shape) == (8,)
    nn.utils.vector_to_parameters(chutney.arange(8.0), lin.parameters())
    assert lin.weight.tolist() == [[0, 1, 2], [3, 4, 5]] and lin.bias.tolist() == [6, 7]


def test_finfo_iinfo_and_switches():
    for name in ("float32", "float64", "float16", "bfloat16"):
        c, t = chutney.finfo(getattr(chutney, name)), torch.finfo(getattr(torch, name))
        assert (c.bits, c.eps, c.max, c.min, c.tiny, c.resolution) == \
            (t.bits, t.eps, t.max, t.min, t.tiny, t.resolution), name
    assert chutney.finfo().eps == torch.finfo().eps
    for name in ("int64", "int32", "int8", "uint8"):
        c, t = chutney.iinfo(getattr(chutney, name)), torch.iinfo(getattr(torch, name))
        assert (c.bits, c.min, c.max) == (t.bits, t.min, t.max), name
    with pytest.raises(TypeError):
        chutney.finfo(chutney.int64)
    chutney.backends.cudnn.benchmark = True
    assert chutney.backends.cudnn.benchmark is True
    chutney.set_float32_matmul_precision("high")
    assert chutney.get_float32_matmul_precision() == "high"
    with pytest.raises(RuntimeError):
        chutney.set_float32_matmul_precision("fast")
    chutney.set_float32_matmul_precision("highest")


def test_scheduler_state_through_a_checkpoint(tmp_path):
    w = chutney.zeros(1, requires_grad=True)
    opt = chutney.optim.SGD([w], lr=1.0)
    s = chutney.optim.lr_scheduler.MultiStepLR(opt, [2, 4, 4], 0.5)
    for _ in range(3):
        opt.step()
        s.step()
    chutney.save({"sched": s.state_dict(), "opt": opt.state_dict(), "epoch": 3},
                 tmp_path / "ck.safetensors")
    back = chutney.load(tmp_path / "ck.safetensors")
    opt2 = chutney.optim.SGD([w], lr=1.0)
    s2 = chutney.optim.lr_scheduler.MultiStepLR(opt2, [9], 0.5)
    opt2.load_state_dict(back["opt"])  # the lr the chained schedule goes on from
    s2.load_state_dict(back["sched"])
    for _ in range(2):
        s.step()
        s2.step()
    assert s2.get_last_lr() == s.get_last_lr() == [0.125] and back["epoch"] == 3


def test_attention_weights_are_returned_after_dropout():
    chutney.manual_seed(3)
    m = nn.MultiheadAttention(8, 2, dropout=0.5)
    q = chutney.randn(4, 1, 8)
    out, w = m(q, q, q, average_attn_weights=False)
    wn = w.detach().numpy()
    assert (wn == 0).mean() > 0.2  # dropped entries
    kept = wn[wn != 0]
    assert kept.min() > 0  # the rest scaled by 1/(1-p), still positive
