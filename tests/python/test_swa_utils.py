"""optim.swa_utils against PyTorch's: AveragedModel (equal weights and an
EMA), update_bn's statistics, SWALR's learning rates."""

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")


def _net(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(),
                             lib.nn.Linear(4, 2))


def test_averaged_model_and_update_bn_like_torch():
    tm = _net(torch)
    cm = _net(chutney)
    cm.load_state_dict({k: chutney.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((8, 3)).astype(np.float32) for _ in range(4)]
    res = []
    for lib, m in ((chutney, cm), (torch, tm)):
        su = lib.optim.swa_utils
        swa = su.AveragedModel(m)
        # PyTorch 1.13 has neither multi_avg_fn nor the EMA helpers (2.1
        # does): the same averages written as avg_fn there.
        if lib is chutney:
            ema = su.AveragedModel(m, multi_avg_fn=su.get_ema_multi_avg_fn(0.9))
            ema2 = su.AveragedModel(m, avg_fn=su.get_ema_avg_fn(0.8), use_buffers=True)
        else:
            ema = su.AveragedModel(m, avg_fn=lambda a, p, n: 0.9 * a + 0.1 * p)
            ema2 = su.AveragedModel(m, avg_fn=lambda a, p, n: 0.8 * a + 0.2 * p,
                                    use_buffers=True)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        for x in xs:
            opt.zero_grad()
            m(lib.tensor(x)).pow(2).sum().backward()
            opt.step()
            for avg in (swa, ema, ema2):
                avg.update_parameters(m)
        loader = [lib.tensor(x) for x in xs]
        su.update_bn(loader, swa)
        out = [swa(lib.tensor(xs[0])).detach().numpy(), swa.module[1].running_mean.numpy(),
               swa.module[1].running_var.numpy(), int(swa.n_averaged)]
        out += [p.detach().numpy() for p in ema.parameters()]
        out += [p.detach().numpy() for p in ema2.parameters()] + [ema2.module[1].running_var.numpy()]
        res.append(out)
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_swalr_like_torch():
    lrs = []
    for lib in (chutney, torch):
        p = lib.nn.Parameter(lib.zeros(2))
        opt = lib.optim.SGD([{"params": [p]}, {"params": [lib.nn.Parameter(lib.zeros(1))],
                                               "lr": 0.5}], lr=0.1)
        for strategy, epochs in (("cos", 3), ("linear", 4), ("cos", 0)):
            sched = lib.optim.swa_utils.SWALR(opt, swa_lr=[0.05, 0.01], anneal_epochs=epochs,
                                              anneal_strategy=strategy)
            seq = []
            for _ in range(6):
                opt.step()
                sched.step()
                seq.append([g["lr"] for g in opt.param_groups])
            lrs.append(seq)
    half = len(lrs) // 2
    np.testing.assert_allclose(np.array(lrs[:half]), np.array(lrs[half:]), rtol=1e-12)
    with pytest.raises(ValueError):
        chutney.optim.swa_utils.SWALR(chutney.optim.SGD([chutney.nn.Parameter(chutney.zeros(1))],
                                                        lr=1), 0.1, anneal_strategy="step")
