"""nn: modules and registration, the library's layers, losses, optimisers,
schedules, data loading, and training an MLP and a small CNN."""

import math
from collections import OrderedDict

import pytest

import chutney
import chutney.nn as nn
import chutney.nn.functional as F
from conftest import close


class MLP(nn.Module):
    def __init__(self, d_in=4, hidden=16, d_out=3):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(hidden, d_out)
        self.scale = nn.Parameter(chutney.ones(1))
        self.register_buffer("calls", chutney.zeros(1))

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * self.scale


def test_module_registration_and_state_dict():
    m = MLP()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in m.parameters())
    assert m.fc1.weight.shape == (16, 4) and m.fc1.bias.shape == (16,)
    sd = m.state_dict()
    assert list(sd) == ["scale", "calls", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert not sd["fc1.weight"].requires_grad and sd["fc1.weight"].shares_storage(m.fc1.weight)
    assert [n for n, _ in m.named_children()] == ["fc1", "act", "fc2"]
    assert len(list(m.modules())) == 4
    assert [n for n, _ in m.named_buffers()] == ["calls"]
    assert "fc1" in dir(m)
    assert "Linear(in_features=4, out_features=16, bias=True)" in repr(m)
    with pytest.raises(AttributeError):
        m.nothing
    with pytest.raises(TypeError):
        m.scale = chutney.ones(1)  # a parameter slot takes a Parameter
    with pytest.raises(ValueError, match=r"must agree"):
        m.fc1.weight = nn.Parameter(chutney.zeros(4, 16))  # the library's: same shape only
    with pytest.raises(RuntimeError, match="cannot be removed"):
        m.fc1.weight = None
    m.scale = nn.Parameter(chutney.full((1,), 2.0))
    assert m.scale.item() == 2.0
    del m.scale
    assert "scale" not in dict(m.named_parameters())


def test_load_state_dict():
    chutney.manual_seed(1)
    a, b = MLP(), MLP()
    assert not chutney.equal(a.fc1.weight, b.fc1.weight)
    missing, unexpected = b.load_state_dict(a.state_dict())
    assert missing == [] and unexpected == []
    assert chutney.equal(a.fc1.weight, b.fc1.weight)
    x = chutney.randn(5, 4)
    assert chutney.equal(a(x), b(x))
    sd = a.state_dict()
    sd["fc1.weight"] = chutney.zeros(3, 3)
    with pytest.raises(RuntimeError, match="size mismatch"):
        b.load_state_dict(sd)
    del sd["fc1.weight"]
    with pytest.raises(RuntimeError, match="Missing"):
        b.load_state_dict(sd)
    b.load_state_dict(sd, strict=False)


def test_train_eval_reach_the_library_layers():
    m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.BatchNorm1d(3))
    assert m.training and m[2]._c.training
    m.eval()
    assert not m.training and not m[1].training and not m[2]._c.training
    x = chutney.randn(8, 3)
    assert chutney.equal(m(x), m(x))  # no dropout, running statistics
    m.train()
    assert m[2]._c.training


def test_sequential_and_containers():
    s = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))
    assert len(s) == 3 and isinstance(s[1], nn.Tanh) and isinstance(s[-1], nn.Linear)
    assert len(s[:2]) == 2
    assert s(chutney.ones(4, 2)).shape == (4, 1)
    named = nn.Sequential(OrderedDict(first=nn.Linear(2, 2), second=nn.ReLU()))
    assert [n for n, _ in named.named_children()] == ["first", "second"]
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(list(ml.parameters())) == 6
    md = nn.ModuleDict({"a": nn.Linear(1, 1)})
    assert "a" in md and len(list(md.parameters())) == 2
    with pytest.raises(IndexError):
        s[3]


def test_layers_shapes():
    x = chutney.randn(2, 3, 8, 8)
    assert nn.Conv2d(3, 4, 3)(x).shape == (2, 4, 6, 6)
    assert nn.Conv2d(3, 4, 3, stride=2, padding=1)(x).shape == (2, 4, 4, 4)
    assert nn.Conv2d(3, 6, (3, 1), groups=3, bias=False)(x).shape == (2, 6, 6, 8)
    assert nn.ConvTranspose2d(3, 2, 2, stride=2)(x).shape == (2, 2, 16, 16)
    assert nn.Conv1d(3, 5, 3)(chutney.randn(2, 3, 10)).shape == (2, 5, 8)
    assert nn.MaxPool2d(2)(x).shape == (2, 3, 4, 4)
    assert nn.AvgPool2d(2, stride=1)(x).shape == (2, 3, 7, 7)
    assert nn.AdaptiveAvgPool2d(1)(x).shape == (2, 3, 1, 1)
    assert nn.Flatten()(x).shape == (2, 192)
    assert nn.Unflatten(1, (3, 64))(nn.Flatten()(x)).shape == (2, 3, 64)
    assert nn.BatchNorm2d(3)(x).shape == x.shape
    assert nn.LayerNorm(8)(x).shape == x.shape
    e = nn.Embedding(10, 4, padding_idx=0)
    assert e(chutney.tensor([[1, 2], [0, 9]])).shape == (2, 2, 4)
    assert e.weight[0].tolist() == [0.0] * 4
    lstm = nn.LSTM(5, 7, num_layers=2, batch_first=True)
    out, (h, c) = lstm(chutney.randn(3, 4, 5))
    assert out.shape == (3, 4, 7) and h.shape == (2, 3, 7) and c.shape == (2, 3, 7)
    gru = nn.GRU(5, 6, bidirectional=True)
    out, h = gru(chutney.randn(4, 3, 5))
    assert out.shape == (4, 3, 12) and h.shape == (2, 3, 6)
    rnn = nn.RNN(5, 6, nonlinearity="relu")
    out, h = rnn(chutney.randn(4, 3, 5), chutney.zeros(1, 3, 6))
    assert out.shape == (4, 3, 6)
    names = [n for n, _ in lstm.named_parameters()]
    assert names[:4] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    ids, vals = F.max_pool2d(x, 2, return_indices=True)[1], None
    assert ids.dtype == chutney.int64 and vals is None
    bn = nn.BatchNorm1d(3)
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    bn(chutney.randn(16, 3) + 5)
    assert bn.running_mean.mean().item() > 0.3 and bn.num_batches_tracked.item() == 1
    with pytest.raises(NotImplementedError):
        nn.Conv2d(1, 1, 3, padding_mode="reflect")
    with pytest.raises(ValueError):
        nn.Conv2d(1, 1, 3, stride=0)
    with pytest.raises(ValueError):
        nn.Dropout(1.5)


def test_activation_modules():
    x = chutney.tensor([-2.0, 0.5])
    assert nn.ReLU()(x).tolist() == [0.0, 0.5]
    assert close(nn.LeakyReLU(0.1)(x), [-0.2, 0.5])
    assert close(nn.Sigmoid()(x), [x.sigmoid()[0].item(), x.sigmoid()[1].item()])
    assert close(nn.Softmax(dim=0)(x).sum().item(), 1.0)
    assert close(nn.LogSoftmax(0)(x).exp().sum().item(), 1.0)
    for m in (nn.GELU(), nn.GELU("tanh"), nn.SiLU(), nn.ELU(), nn.Softplus(), nn.Tanh(),
              nn.Hardtanh(), nn.Identity()):
        assert m(x).shape == (2,)


def test_losses():
    logits = chutney.tensor([[2.0, 0.5, -1.0], [0.1, 0.2, 0.3]])
    target = chutney.tensor([0, 2])
    ce = nn.CrossEntropyLoss()(logits, target)
    ls = logits.log_softmax(1)
    assert close(ce.item(), -(ls[0, 0].item() + ls[1, 2].item()) / 2, rtol=1e-6)
    assert close(F.nll_loss(ls, target).item(), ce.item(), rtol=1e-6)
    assert F.cross_entropy(logits, target, reduction="none").shape == (2,)
    assert close(F.cross_entropy(logits, chutney.tensor([0, -100])).item(), -ls[0, 0].item())
    assert F.cross_entropy(logits, target, label_smoothing=0.1).item() > 0
    assert F.cross_entropy(logits, target, weight=chutney.tensor([1.0, 2.0, 3.0])).item() > 0
    assert nn.MSELoss()(chutney.ones(3), chutney.zeros(3)).item() == 1.0
    assert nn.MSELoss(reduction="sum")(chutney.ones(3), chutney.zeros(3)).item() == 3.0
    assert nn.L1Loss()(chutney.ones(2), chutney.tensor([3.0, 3.0])).item() == 2.0
    p = chutney.tensor([0.9, 0.2])
    y = chutney.tensor([1.0, 0.0])
    assert close(nn.BCELoss()(p, y).item(), -(math.log(0.9) + math.log(0.8)) / 2, rtol=1e-6)
    z = chutney.tensor([2.0, -1.0])
    assert close(nn.BCEWithLogitsLoss()(z, y).item(), F.binary_cross_entropy(z.sigmoid(), y).item(),
                 rtol=1e-5)
    with pytest.raises(ValueError):
        F.mse_loss(chutney.ones(2), chutney.ones(2), reduction="avg")
    with pytest.raises(ValueError):
        F.cross_entropy(logits, chutney.tensor([0, 3]))
    with pytest.raises(ValueError):  # float targets are probabilities of the logits' shape
        F.cross_entropy(logits, chutney.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(TypeError):
        F.nll_loss(logits, chutney.tensor([0.0, 1.0]))


def test_functional():
    x = chutney.randn(2, 3, 6, 6)
    w = chutney.randn(4, 3, 3, 3)
    b = chutney.randn(4)
    assert F.conv2d(x, w, b, padding=1).shape == (2, 4, 6, 6)
    assert F.conv2d(x, w, stride=(2, 1)).shape == (2, 4, 2, 4)
    assert F.avg_pool2d(x, 3).shape == (2, 3, 2, 2)
    assert F.pad(x, (1, 1, 2, 0)).shape == (2, 3, 8, 8)
    assert F.pad(x, (1, 1), mode="reflect").shape == (2, 3, 6, 8)
    assert F.one_hot(chutney.tensor([0, 2])).tolist() == [[1, 0, 0], [0, 0, 1]]
    lin = F.linear(chutney.ones(2, 3), chutney.ones(4, 3), chutney.ones(4))
    assert lin.tolist() == [[4.0] * 4] * 2
    emb = F.embedding(chutney.tensor([[1, 0]]), chutney.arange(6.0).reshape(3, 2))
    assert emb.tolist() == [[[2.0, 3.0], [0.0, 1.0]]]
    ln = F.layer_norm(chutney.tensor([[1.0, 2.0, 3.0]]), 3)
    assert close(ln.tolist(), [[-1.2247, 0.0, 1.2247]], rtol=1e-3)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(chutney.ones(2, 3), (2,))
    assert F.dropout(chutney.ones(100), 0.5, training=False).sum().item() == 100
    d = F.dropout(chutney.ones(10000), 0.5)
    assert set(d.tolist()) <= {0.0, 2.0}
    assert close(F.normalize(chutney.tensor([[3.0, 4.0]])).tolist(), [[0.6, 0.8]])


def test_init():
    w = chutney.empty(64, 32)
    nn.init.zeros_(w)
    assert w.abs().sum().item() == 0
    nn.init.ones_(w)
    nn.init.constant_(w, 0.5)
    assert w.mean().item() == 0.5
    chutney.manual_seed(0)
    nn.init.kaiming_uniform_(w, a=5 ** 0.5)
    bound = 1 / 32 ** 0.5
    assert w.abs().max().item() <= bound + 1e-6
    nn.init.xavier_normal_(w)
    nn.init.normal_(w, 0, 0.02)
    nn.init.uniform_(w, -1, 1)
    assert close(nn.init.calculate_gain("relu"), 2 ** 0.5)
    p = nn.Parameter(chutney.zeros(3))
    nn.init.uniform_(p)  # in place on a parameter: not recorded
    assert p.is_leaf and p.requires_grad


def test_optimizers_update():
    for cls, kw in [(chutney.optim.SGD, dict(lr=0.1)), (chutney.optim.SGD, dict(lr=0.1, momentum=0.9)),
                    (chutney.optim.Adam, {}), (chutney.optim.AdamW, dict(lr=1e-2)),
                    (chutney.optim.RMSprop, {}), (chutney.optim.Adagrad, {})]:
        w = nn.Parameter(chutney.tensor([1.0, -1.0]))
        opt = cls([w], **kw)
        for _ in range(3):
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
        assert w.abs().max().item() < 1.0, cls
    with pytest.raises(TypeError):
        chutney.optim.SGD([nn.Parameter(chutney.ones(1))])
    with pytest.raises(ValueError):
        chutney.optim.Adam([])
    with pytest.raises(TypeError):
        chutney.optim.Adam(chutney.ones(2))


def test_sgd_matches_the_formula_and_lr_changes():
    w = nn.Parameter(chutney.tensor([1.0, 2.0]))
    opt = chutney.optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    assert close(w.tolist(), [1 - 0.1 * 2, 2 - 0.1 * 4])
    opt.zero_grad()
    assert w.grad.tolist() == [0.0, 0.0]
    opt.param_groups[0]["lr"] = 1.0
    (w * 1.0).sum().backward()
    opt.step()
    assert close(w.tolist(), [0.8 - 1.0, 1.6 - 1.0])
    opt.zero_grad(set_to_none=True)
    assert w.grad is None
    opt.step()  # no gradient: no update
    assert close(w.tolist(), [-0.2, 0.6])
    zero = chutney.optim.SGD([nn.Parameter(chutney.ones(1))], lr=0.0)
    assert zero.param_groups[0]["lr"] == 0.0


def test_param_groups_and_state_dict(tmp_path):
    a, b = nn.Parameter(chutney.ones(2)), nn.Parameter(chutney.ones(3))
    opt = chutney.optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.1}], lr=0.01)
    assert [g["lr"] for g in opt.param_groups] == [0.01, 0.1]
    for _ in range(2):
        opt.zero_grad()
        (a.sum() + (b * b).sum()).backward()
        opt.step()
    sd = opt.state_dict()
    assert "0.exp_avg.0" in sd and "1.step" in sd
    chutney.save(sd, tmp_path / "opt.safetensors")
    a2, b2 = nn.Parameter(a.detach().clone()), nn.Parameter(b.detach().clone())
    opt2 = chutney.optim.Adam([{"params": [a2]}, {"params": [b2], "lr": 0.5}], lr=0.01)
    opt2.load_state_dict(chutney.load(tmp_path / "opt.safetensors"))
    assert opt2.param_groups[1]["lr"] == 0.1
    for o, x, y in ((opt, a, b), (opt2, a2, b2)):
        o.zero_grad()
        (x.sum() + (y * y).sum()).backward()
        o.step()
    assert chutney.equal(a, a2) and chutney.equal(b, b2)
    with pytest.raises(ValueError):
        chutney.optim.SGD([{"params": [a]}, {"params": [a]}], lr=0.1)
    assert "Parameter Group 1" in repr(opt)


def test_schedulers():
    w = nn.Parameter(chutney.ones(1))
    opt = chutney.optim.SGD([w], lr=1.0)
    s = chutney.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    lrs = []
    for _ in range(5):
        opt.step()
        s.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs == [1.0, 0.5, 0.5, 0.25, 0.25] and s.get_last_lr() == [0.25]
    assert s.last_epoch == 5
    opt = chutney.optim.SGD([w], lr=1.0)
    cos = chutney.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    for _ in range(4):
        cos.step()
    assert close(opt.param_groups[0]["lr"], 0.0, atol=1e-12)
    opt = chutney.optim.SGD([w], lr=1.0)
    lin = chutney.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    assert opt.param_groups[0]["lr"] == 0.5
    lin.step()
    assert close(opt.param_groups[0]["lr"], 0.75)
    ex = chutney.optim.lr_scheduler.ExponentialLR(chutney.optim.SGD([w], lr=2.0), 0.5)
    ex.step()
    assert ex.get_last_lr() == [1.0]


def test_dataloader():
    x = chutney.arange(10.0).reshape(10, 1)
    y = chutney.arange(10)
    ds = chutney.utils.data.TensorDataset(x, y)
    assert len(ds) == 10 and ds[3][1].item() == 3
    dl = chutney.utils.data.DataLoader(ds, batch_size=4)
    batches = list(dl)
    assert len(dl) == 3 and [b[0].shape[0] for b in batches] == [4, 4, 2]
    assert batches[0][1].tolist() == [0, 1, 2, 3]
    dl = chutney.utils.data.DataLoader(ds, batch_size=4, shuffle=True, drop_last=True)
    seen = [v for bx, by in dl for v in by.tolist()]
    assert len(dl) == 2 and len(seen) == 8 and len(set(seen)) == 8
    train, test = chutney.utils.data.random_split(ds, [7, 3])
    assert len(train) == 7 and len(test) == 3

    class Squares(chutney.utils.data.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return chutney.tensor([float(i)]), i * i

    b = next(iter(chutney.utils.data.DataLoader(Squares(), batch_size=5)))
    assert b[0].shape == (5, 1) and b[1].tolist() == [0, 1, 4, 9, 16]


def test_train_an_mlp():
    chutney.manual_seed(0)
    x = chutney.randn(256, 4)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = chutney.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = chutney.utils.data.DataLoader(chutney.utils.data.TensorDataset(x, y), batch_size=32,
                                           shuffle=True)
    first = None
    for epoch in range(20):
        for bx, by in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(bx), by)
            loss.backward()
            opt.step()
            first = loss.item() if first is None else first
    with chutney.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    assert acc > 0.9 and loss.item() < first / 3


def test_train_a_small_cnn(tmp_path):
    chutney.manual_seed(0)
    # Two classes: a bright square top-left or bottom-right.
    n = 64
    x = chutney.randn(n, 1, 12, 12) * 0.1
    y = chutney.randint(0, 2, (n,))
    for i in range(n):
        if y[i].item() == 0:
            x[i, 0, :6, :6] += 1.0
        else:
            x[i, 0, 6:, 6:] += 1.0
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(8 * 3 * 3, 2))
    opt = chutney.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(30):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
    model.eval()
    with chutney.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    assert acc == 1.0
    chutney.save(model.state_dict(), tmp_path / "cnn.safetensors")
    other = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(8 * 3 * 3, 2))
    other.load_state_dict(chutney.load(tmp_path / "cnn.safetensors"))
    other.eval()
    with chutney.no_grad():
        assert chutney.equal(other(x), model(x))


@pytest.mark.skipif(chutney.device_count("opencl") == 0, reason="no OpenCL device")
def test_module_to_opencl():
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = chutney.randn(5, 3)
    ref = m(x).tolist()
    w = m[0].weight
    m.to("opencl")
    assert m[0].weight is w and w.device == "opencl:0"
    out = m(x.to("opencl"))
    assert out.device == "opencl:0"
    assert close(out.cpu().tolist(), ref, rtol=1e-4, atol=1e-5)


def test_load_state_dict_result_and_lookups():
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    r = m.load_state_dict({"0.weight": chutney.zeros(3, 2), "junk": chutney.zeros(1)},
                          strict=False)
    assert r.missing_keys == ["0.bias", "2.weight", "2.bias"] and r.unexpected_keys == ["junk"]
    assert repr(m.load_state_dict(m.state_dict())) == "<All keys matched successfully>"
    assert m.get_parameter("2.bias") is m[2].bias
    with pytest.raises(AttributeError):
        m.get_submodule("7")
    assert m.share_memory() is m and m.type(chutney.float32) is m
