"""PyTorch side of test_nn_parity: builds each torch.nn module (or loss) with
seeded parameters and inputs, runs it, and writes parameters, buffers
before and after, inputs, outputs and the gradients of
sum_j sum(out_j * w_j), w_j[k] = cos(k + j), to the fixture file named on
the command line. test_nn_parity.c builds the same module in Chutney, loads
the parameters by their PyTorch names (so the names and shapes must match),
and compares. Run by /usr/bin/python3 (Debian's python3-torch 1.13)."""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)


def randn(g, *shape):
    return torch.randn(shape, generator=g)


def ints(g, high, *shape):
    return torch.randint(0, high, shape, generator=g, dtype=torch.int64)


# Each case: name -> function(g) returning (module or None, inputs, run, train)
# inputs: list of (name, tensor, wants_grad); run(module, *inputs) -> tuple of outputs.


def module_case(mod, xs, train=True, run=None, init=None):
    return dict(mod=mod, inputs=xs, train=train, run=run, init=init)


def fwd(m, x):
    return (m(x),)


def rnn_run(m, x, *state):
    if len(state) == 0:
        y, h = m(x)
    elif len(state) == 1:
        y, h = m(x, state[0])
    else:
        y, h = m(x, (state[0], state[1]))
    if isinstance(h, tuple):
        return (y, h[0], h[1])
    return (y, h)


def bn_state(m, g, nbt=0):
    with torch.no_grad():
        m.running_mean.copy_(randn(g, *m.running_mean.shape) * 0.5)
        m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
        m.num_batches_tracked.fill_(nbt)


CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


@case
def linear(g):
    return module_case(nn.Linear(5, 4), [("x", randn(g, 3, 5), True)])


@case
def linear_nobias_3d(g):
    return module_case(nn.Linear(4, 3, bias=False), [("x", randn(g, 2, 3, 4), True)])


@case
def conv1d(g):
    return module_case(nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2),
                       [("x", randn(g, 2, 4, 9), True)])


@case
def conv2d_basic(g):
    return module_case(nn.Conv2d(3, 4, 3, padding=1), [("x", randn(g, 2, 3, 5, 6), True)])


@case
def conv2d_sdg(g):
    return module_case(nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(2, 1),
                                 groups=2), [("x", randn(g, 2, 4, 7, 6), True)])


@case
def conv2d_depthwise(g):
    return module_case(nn.Conv2d(4, 8, 3, stride=2, groups=4, bias=False),
                       [("x", randn(g, 2, 4, 6, 7), True)])


@case
def conv_transpose2d(g):
    return module_case(nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1,
                                          groups=2), [("x", randn(g, 2, 4, 4, 5), True)])


@case
def conv_transpose2d_dil(g):
    return module_case(nn.ConvTranspose2d(2, 3, (2, 3), stride=(1, 2), padding=(0, 1),
                                          dilation=(2, 1), bias=False),
                       [("x", randn(g, 1, 2, 3, 4), True)])


@case
def max_pool2d(g):
    return module_case(nn.MaxPool2d(3, stride=2, padding=1), [("x", randn(g, 2, 3, 7, 6), True)])


@case
def max_pool2d_ceil(g):
    return module_case(nn.MaxPool2d((2, 3), stride=(2, 2), ceil_mode=True),
                       [("x", randn(g, 1, 2, 5, 8), True)])


@case
def avg_pool2d(g):
    return module_case(nn.AvgPool2d(3, stride=2, padding=1), [("x", randn(g, 2, 3, 7, 6), True)])


@case
def avg_pool2d_nopad(g):
    return module_case(nn.AvgPool2d((2, 3), stride=(1, 2), padding=(1, 1),
                                    count_include_pad=False), [("x", randn(g, 1, 2, 5, 7), True)])


@case
def adaptive_avg_pool2d(g):
    return module_case(nn.AdaptiveAvgPool2d((3, 2)), [("x", randn(g, 2, 3, 7, 5), True)])


@case
def bn1d_train(g):
    m = nn.BatchNorm1d(4)
    return module_case(m, [("x", randn(g, 6, 4) * 2 + 1, True)], init=lambda: bn_state(m, g))


@case
def bn1d_3d_train(g):
    m = nn.BatchNorm1d(3, momentum=0.3)
    return module_case(m, [("x", randn(g, 4, 3, 5), True)], init=lambda: bn_state(m, g))


@case
def bn2d_train(g):
    m = nn.BatchNorm2d(3)
    return module_case(m, [("x", randn(g, 2, 3, 4, 5) + 0.5, True)], init=lambda: bn_state(m, g, 5))


@case
def bn2d_eval(g):
    m = nn.BatchNorm2d(3)
    return module_case(m, [("x", randn(g, 2, 3, 4, 5), True)], train=False,
                       init=lambda: bn_state(m, g))


@case
def bn2d_cumulative(g):
    m = nn.BatchNorm2d(2, momentum=None, eps=1e-3)
    return module_case(m, [("x", randn(g, 3, 2, 2, 3), True)], init=lambda: bn_state(m, g, 3))


@case
def bn2d_noaffine_nostats(g):
    m = nn.BatchNorm2d(3, affine=False, track_running_stats=False)
    return module_case(m, [("x", randn(g, 2, 3, 3, 3), True)], train=False)


@case
def layer_norm(g):
    return module_case(nn.LayerNorm([4, 5]), [("x", randn(g, 2, 3, 4, 5) * 3, True)])


@case
def layer_norm_noaffine(g):
    return module_case(nn.LayerNorm(6, eps=1e-3, elementwise_affine=False),
                       [("x", randn(g, 3, 6), True)])


@case
def embedding(g):
    return module_case(nn.Embedding(10, 4), [("x", ints(g, 10, 3, 5), False)])


@case
def embedding_pad(g):
    # The padding row gets a non-zero value: it is still returned, but gets no gradient.
    return module_case(nn.Embedding(6, 3, padding_idx=2),
                       [("x", torch.tensor([[0, 2, 5, 2], [1, 2, 3, 4]]), False)])


@case
def rnn_tanh(g):
    return module_case(nn.RNN(4, 5, num_layers=2, bidirectional=True),
                       [("x", randn(g, 3, 2, 4), True)], run=rnn_run)


@case
def rnn_relu_bf(g):
    return module_case(nn.RNN(3, 4, nonlinearity="relu", batch_first=True),
                       [("x", randn(g, 2, 3, 3), True), ("h0", randn(g, 1, 2, 4), True)],
                       run=rnn_run)


@case
def lstm(g):
    return module_case(nn.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True),
                       [("x", randn(g, 2, 3, 4), True), ("h0", randn(g, 4, 2, 5), True),
                        ("c0", randn(g, 4, 2, 5), True)], run=rnn_run)


@case
def lstm_simple(g):
    return module_case(nn.LSTM(3, 4), [("x", randn(g, 4, 2, 3), True)], run=rnn_run)


@case
def gru(g):
    return module_case(nn.GRU(4, 5, num_layers=2, bidirectional=True, batch_first=True),
                       [("x", randn(g, 2, 3, 4), True), ("h0", randn(g, 4, 2, 5), True)],
                       run=rnn_run)


@case
def gru_nobias_unbatched(g):
    return module_case(nn.GRU(3, 4, bias=False), [("x", randn(g, 3, 3), True)], run=rnn_run)


@case
def gru_zero_state(g):
    return module_case(nn.GRU(3, 2, num_layers=2), [("x", randn(g, 2, 3, 3), True)], run=rnn_run)


@case
def sequential(g):
    m = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3), nn.Tanh(), nn.Flatten(0, -1))
    return module_case(m, [("x", randn(g, 4, 6), True)])


@case
def activations(g):
    m = nn.Sequential(nn.GELU(), nn.SiLU(), nn.LeakyReLU(0.2), nn.ELU(0.5), nn.Sigmoid(),
                      nn.Softplus(2.0, 1.0), nn.LogSoftmax(1))
    return module_case(m, [("x", randn(g, 3, 5) * 2, True)])


# ---- losses: (function, inputs) ----

def loss_case(fn, xs):
    return dict(mod=None, inputs=xs, train=True, run=lambda m, *a: (fn(*a),), init=None)


RED = ["mean", "sum", "none"]


def add_loss_cases():
    for r in RED:
        CASES["mse_" + r] = (lambda r: lambda g: loss_case(
            lambda x, t: F.mse_loss(x, t, reduction=r),
            [("x", randn(g, 3, 4), True), ("target", randn(g, 3, 4), True)]))(r)
        CASES["l1_" + r] = (lambda r: lambda g: loss_case(
            lambda x, t: F.l1_loss(x, t, reduction=r),
            [("x", randn(g, 3, 4), True), ("target", randn(g, 3, 4), True)]))(r)
        for ls in (0.0, 0.1):
            CASES["ce_%s_%g" % (r, ls)] = (lambda r, ls: lambda g: loss_case(
                lambda x, t: F.cross_entropy(x, t, reduction=r, label_smoothing=ls),
                [("x", randn(g, 5, 4) * 2, True), ("target", ints(g, 4, 5), False)]))(r, ls)
            CASES["ce_spatial_%s_%g" % (r, ls)] = (lambda r, ls: lambda g: loss_case(
                lambda x, t: F.cross_entropy(x, t, reduction=r, label_smoothing=ls),
                [("x", randn(g, 2, 3, 4), True), ("target", ints(g, 3, 2, 4), False)]))(r, ls)
            CASES["ce_weight_ignore_%s_%g" % (r, ls)] = (lambda r, ls: lambda g: loss_case(
                lambda x, t, w: F.cross_entropy(x, t, weight=w, ignore_index=1, reduction=r,
                                                label_smoothing=ls),
                [("x", randn(g, 6, 4), True), ("target", torch.tensor([0, 1, 3, 2, 1, 3]), False),
                 ("weight", torch.rand(4, generator=g) + 0.5, False)]))(r, ls)
            CASES["ce_ignore_%s_%g" % (r, ls)] = (lambda r, ls: lambda g: loss_case(
                lambda x, t: F.cross_entropy(x, t, ignore_index=2, reduction=r, label_smoothing=ls),
                [("x", randn(g, 5, 3), True), ("target", torch.tensor([2, 0, 2, 1, 0]), False)]))(r, ls)
            CASES["ce_probs_%s_%g" % (r, ls)] = (lambda r, ls: lambda g: loss_case(
                lambda x, t, w: F.cross_entropy(x, t, weight=w, reduction=r, label_smoothing=ls),
                [("x", randn(g, 4, 3), True),
                 ("target", torch.softmax(randn(g, 4, 3), 1), True),
                 ("weight", torch.rand(3, generator=g) + 0.5, False)]))(r, ls)
        CASES["nll_" + r] = (lambda r: lambda g: loss_case(
            lambda x, t: F.nll_loss(x, t, reduction=r),
            [("x", F.log_softmax(randn(g, 5, 4), 1), True), ("target", ints(g, 4, 5), False)]))(r)
        CASES["nll_weight_ignore_" + r] = (lambda r: lambda g: loss_case(
            lambda x, t, w: F.nll_loss(x, t, weight=w, ignore_index=0, reduction=r),
            [("x", F.log_softmax(randn(g, 2, 4, 3), 1), True),
             ("target", torch.tensor([[0, 1, 3], [2, 0, 1]]), False),
             ("weight", torch.rand(4, generator=g) + 0.5, False)]))(r)
        CASES["bce_logits_" + r] = (lambda r: lambda g: loss_case(
            lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction=r),
            [("x", torch.cat([randn(g, 3, 4) * 3, torch.tensor([[0.0, 30.0, -30.0, 100.0]])]), True),
             ("target", torch.rand(4, 4, generator=g), True)]))(r)
        CASES["bce_logits_pw_" + r] = (lambda r: lambda g: loss_case(
            lambda x, t, pw: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction=r),
            [("x", randn(g, 3, 4) * 3, True), ("target", torch.rand(3, 4, generator=g), True),
             ("pos_weight", torch.rand(4, generator=g) * 3, False)]))(r)
        CASES["bce_" + r] = (lambda r: lambda g: loss_case(
            lambda p, t: F.binary_cross_entropy(p, t, reduction=r),
            [("p", torch.rand(3, 4, generator=g) * 0.98 + 0.01, True),
             ("target", torch.rand(3, 4, generator=g), True)]))(r)


add_loss_cases()


def write_tensor(f, key, t):
    t = t.detach()
    if t.dtype in (torch.int64, torch.int32):
        vals = " ".join(str(int(v)) for v in t.flatten().tolist())
        dt = "i"
    else:
        vals = " ".join(repr(float(v)) for v in t.to(torch.float32).flatten().tolist())
        dt = "f"
    f.write("t %s %s %d %s %s\n" % (key, dt, t.dim(), " ".join(str(s) for s in t.shape), vals))


def randomize(m, g):
    """Every parameter from the case's generator (not torch's default init),
    so the test does not depend on PyTorch's RNG stream or init."""
    with torch.no_grad():
        for _, p in m.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)


def main():
    out = open(sys.argv[1], "w")
    for k, (name, make) in enumerate(CASES.items()):
        g = torch.Generator().manual_seed(2000 + k)
        c = make(g)
        m = c["mod"]
        out.write("case %s\n" % name)
        if m is not None:
            randomize(m, g)
            if c["init"]:
                c["init"]()
            m.train(c["train"])
            for n, p in m.named_parameters():
                write_tensor(out, "p:" + n, p)
            for n, b in m.named_buffers():
                write_tensor(out, "b0:" + n, b)
        xs = []
        for n, x, wants in c["inputs"]:
            x = x.clone()
            if wants:
                x.requires_grad_(True)
            write_tensor(out, "in:" + n, x)
            xs.append((n, x))
        run = c["run"] or fwd
        ys = run(m, *[x for _, x in xs])
        loss = 0
        for j, y in enumerate(ys):
            write_tensor(out, "out:%d" % j, y)
            w = torch.cos(torch.arange(y.numel(), dtype=torch.float32) + j).reshape(y.shape)
            loss = loss + (y * w).sum()
        wrt = [("in:" + n, x) for n, x in xs if x.requires_grad]
        if m is not None:
            wrt += [("p:" + n, p) for n, p in m.named_parameters()]
        gs = torch.autograd.grad(loss, [t for _, t in wrt], allow_unused=True)
        for (n, _), gr in zip(wrt, gs):
            write_tensor(out, "g:" + n, gr if gr is not None else torch.zeros_like(_))
        if m is not None:
            for n, b in m.named_buffers():
                write_tensor(out, "b1:" + n, b)
        out.write("end\n")
    out.close()


main()
