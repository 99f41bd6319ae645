"""The activations, normalisations, pools, resampling, padding, dropout and
losses of nn and nn.functional that are compositions in Python, against
PyTorch's (values and gradients), and copy.deepcopy / pickle of tensors and
models. Skipped without torch (Debian's python3-torch)."""

import copy
import pickle

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
from torch_pairs import Const, both  # noqa: E402,F401

rng = np.random.default_rng(11)
CF, TF = chutney.nn.functional, torch.nn.functional


X = rng.standard_normal((2, 4, 5, 6)) * 3


@pytest.mark.parametrize("name", ["hardsigmoid", "hardswish", "mish", "selu", "logsigmoid",
                                  "softsign", "tanhshrink", "relu6"])
def test_activations(name):
    both(lambda lib, F, x: getattr(F, name)(x), X)


def test_activations_with_arguments():
    both(lambda lib, F, x: F.celu(x, 0.7), X)
    both(lambda lib, F, x: F.glu(x, 1), X)
    both(lambda lib, F, x: F.softmin(x, dim=2), X)
    w = rng.random(4) + 0.1
    both(lambda lib, F, x, w: F.prelu(x, w), X, w)
    both(lambda lib, F, x, w: F.prelu(x, w), X, w[:1])
    x = chutney.tensor(X.astype(np.float32))
    m = chutney.nn.PReLU(4)
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    np.testing.assert_allclose(m(x).detach().numpy(),
                               torch.nn.PReLU(4)(torch.tensor(X.astype(np.float32))).detach()
                               .numpy(), rtol=1e-6)
    for cls in ("ReLU6", "Hardswish", "Hardsigmoid", "Mish", "SELU", "LogSigmoid", "Softsign",
                "Tanhshrink"):
        c, t = getattr(chutney.nn, cls)(), getattr(torch.nn, cls)()
        np.testing.assert_allclose(c(x).numpy(), t(torch.tensor(X.astype(np.float32))).numpy(),
                                   rtol=1e-5, atol=1e-6, err_msg=cls)


def test_group_instance_rms_and_local_response_norm():
    w, b = rng.standard_normal(4), rng.standard_normal(4)
    both(lambda lib, F, x, w, b: F.group_norm(x, 2, w, b, 1e-5), X, w, b)
    both(lambda lib, F, x: F.group_norm(x, 4), X)
    both(lambda lib, F, x, w, b: F.instance_norm(x, weight=w, bias=b), X, w, b)
    both(lambda lib, F, x: F.instance_norm(x), X[:, :, 0])
    both(lambda lib, F, x: F.local_response_norm(x, 3), X, tol=1e-4)
    both(lambda lib, F, x: F.local_response_norm(x, 2, 1e-2, 0.5, 2.0), X, tol=1e-4)
    # RMSNorm (PyTorch 2.4) against its formula in float64
    x = X.astype(np.float32)
    wt = rng.standard_normal(6).astype(np.float32)
    c = chutney.nn.RMSNorm(6)
    with chutney.no_grad():
        c.weight.copy_(chutney.tensor(wt))
    xd = x.astype(np.float64)
    want = xd / np.sqrt((xd ** 2).mean(-1, keepdims=True) + np.finfo(np.float32).eps) * wt
    np.testing.assert_allclose(c(chutney.tensor(x)).detach().numpy(), want, rtol=1e-5)
    got = chutney.nn.RMSNorm((5, 6), eps=0.1, elementwise_affine=False)(chutney.tensor(x))
    want = xd / np.sqrt((xd ** 2).mean((-2, -1), keepdims=True) + 0.1)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)


def test_norm_modules_match_torch_in_train_and_eval():
    x = X.astype(np.float32)
    for cm, tm in ((chutney.nn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4)),
                   (chutney.nn.InstanceNorm2d(4, affine=True, track_running_stats=True),
                    torch.nn.InstanceNorm2d(4, affine=True, track_running_stats=True))):
        assert sorted(cm.state_dict()) == sorted(tm.state_dict())
        with torch.no_grad():
            for p in tm.parameters():
                p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
        cm.load_state_dict({k: chutney.tensor(v.numpy()) for k, v in tm.state_dict().items()})
        for _ in range(2):
            np.testing.assert_allclose(cm(chutney.tensor(x)).detach().numpy(),
                                       tm(torch.tensor(x)).detach().numpy(), rtol=1e-4,
                                       atol=1e-5)
        for k, v in tm.state_dict().items():
            np.testing.assert_allclose(cm.state_dict()[k].numpy(), v.numpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=k)
        cm.eval()
        tm.eval()
        np.testing.assert_allclose(cm(chutney.tensor(x)).detach().numpy(),
                                   tm(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode,align", [("nearest", None), ("nearest-exact", None),
                                        ("bilinear", False), ("bilinear", True),
                                        ("bicubic", False), ("bicubic", True), ("area", None)])
def test_interpolate_2d(mode, align):
    x = X[:, :, :5, :6]
    for kw in (dict(size=(7, 13)), dict(size=(3, 4)), dict(scale_factor=2),
               dict(scale_factor=(1.5, 0.5)), dict(scale_factor=1 / 3),
               dict(scale_factor=1.7, recompute_scale_factor=True)):
        if mode == "area" and "scale_factor" in kw and kw.get("scale_factor") != 2:
            continue
        both(lambda lib, F, x: F.interpolate(x, mode=mode, align_corners=align, **kw), x,
             tol=2e-5)


def test_interpolate_1d_3d_and_upsample_modules():
    x1 = X[:, :, 0]
    for mode in ("nearest", "linear"):
        both(lambda lib, F, x: F.interpolate(x, size=11, mode=mode), x1)
        both(lambda lib, F, x: F.interpolate(x, scale_factor=0.5, mode=mode), x1)
    both(lambda lib, F, x: F.interpolate(x, size=4, mode="area"), x1)
    # sizes where the source index in float (as PyTorch) and in double differ
    for n_in, n_out in ((6, 74), (14, 46), (26, 22)):
        both(lambda lib, F, x: F.interpolate(x, size=n_out), rng.standard_normal((1, 2, n_in)))
    x3 = rng.standard_normal((1, 2, 3, 4, 5))
    both(lambda lib, F, x: F.interpolate(x, size=(5, 3, 7), mode="trilinear",
                                         align_corners=False), x3)
    both(lambda lib, F, x: F.interpolate(x, scale_factor=2, mode="nearest"), x3)
    x = X.astype(np.float32)
    for c, t in ((chutney.nn.Upsample(scale_factor=2, mode="bilinear"),
                  torch.nn.Upsample(scale_factor=2, mode="bilinear")),
                 (chutney.nn.UpsamplingBilinear2d(size=(9, 4)),
                  torch.nn.UpsamplingBilinear2d(size=(9, 4))),
                 (chutney.nn.UpsamplingNearest2d(scale_factor=3),
                  torch.nn.UpsamplingNearest2d(scale_factor=3))):
        np.testing.assert_allclose(c(chutney.tensor(x)).numpy(), t(torch.tensor(x)).numpy(),
                                   rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        CF.interpolate(chutney.tensor(x), size=0)
    with pytest.raises(ValueError):
        CF.interpolate(chutney.tensor(x), size=(2, 2), mode="linear")


def test_pixel_shuffle_pools_and_pads():
    x = rng.standard_normal((2, 8, 3, 5))
    both(lambda lib, F, x: F.pixel_shuffle(x, 2), x)
    both(lambda lib, F, x: F.pixel_unshuffle(x, 3), rng.standard_normal((2, 2, 6, 9)))
    s = rng.standard_normal((2, 3, 17))
    both(lambda lib, F, x: F.max_pool1d(x, 3, 2, 1), s)
    both(lambda lib, F, x: F.max_pool1d(x, 4, ceil_mode=True), s)
    both(lambda lib, F, x: F.avg_pool1d(x, 3, 2, 1), s)
    both(lambda lib, F, x: F.avg_pool1d(x, 3, 2, 1, count_include_pad=False), s)
    both(lambda lib, F, x: F.adaptive_avg_pool1d(x, 5), s)
    both(lambda lib, F, x: F.adaptive_max_pool1d(x, 5), s)
    both(lambda lib, F, x: F.adaptive_max_pool2d(x, (2, 4)), X)
    both(lambda lib, F, x: F.adaptive_max_pool2d(x, (5, 3)), X)
    both(lambda lib, F, x: F.adaptive_max_pool2d(x, (7, None)), X)
    for name, args in (("ZeroPad2d", ((1, 2, 0, 3),)), ("ConstantPad1d", (2, 3.5)),
                       ("ConstantPad2d", ((1, 0, 2, 1), -1.0)), ("ReflectionPad2d", (2,)),
                       ("ReflectionPad1d", ((1, 3),)), ("ReplicationPad2d", ((3, 0, 1, 2),)),
                       ("ReplicationPad1d", (2,))):
        c, t = getattr(chutney.nn, name)(*args), getattr(torch.nn, name)(*args)
        xt = (X[:, :, 0] if "1d" in name else X).astype(np.float32)
        np.testing.assert_array_equal(c(chutney.tensor(xt)).numpy(),
                                      t(torch.tensor(xt)).numpy(), err_msg=name)


def test_channel_dropout():
    chutney.manual_seed(5)
    x = chutney.ones(64, 32, 3, 3)
    y = CF.dropout2d(x, 0.25, True).numpy()
    per_channel = y.reshape(64, 32, 9)
    # a channel is all dropped or all kept (scaled by 1/(1-p))
    assert np.all((per_channel.min(-1) == per_channel.max(-1)))
    kept = per_channel[:, :, 0]
    assert set(np.unique(kept)) <= {0.0, np.float32(1 / 0.75)}
    assert 0.2 < (kept == 0).mean() < 0.3
    y3 = CF.dropout2d(chutney.ones(16, 8, 5), 0.5, True).numpy()  # (N, C, L), as PyTorch
    assert np.all(y3.min(-1) == y3.max(-1)) and 0 < (y3[:, :, 0] == 0).mean() < 1
    assert not np.all(y3.min((1, 2)) == y3.max((1, 2)))  # not whole samples
    d = chutney.nn.Dropout1d(0.5)
    d.eval()
    np.testing.assert_array_equal(d(chutney.ones(2, 3, 4)).numpy(), np.ones((2, 3, 4)))
    assert np.all(CF.dropout2d(x, 1.0, True).numpy() == 0)


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss")  # torch's kl_div
def test_losses_and_distances():
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((6, 5))
    y = np.where(rng.random(6) < 0.5, 1.0, -1.0)
    for red in ("mean", "sum", "none"):
        both(lambda lib, F, x, t: F.huber_loss(x, t, reduction=red, delta=0.7), a, b)
        both(lambda lib, F, x, t: F.smooth_l1_loss(x, t, reduction=red, beta=0.5), a, b)
        both(lambda lib, F, x, t, y: F.cosine_embedding_loss(x, t, y, 0.2, reduction=red),
             a, b, y)
        both(lambda lib, F, x, t, y: F.margin_ranking_loss(x[:, 0], t[:, 0], y, 0.1,
                                                           reduction=red), a, b, y)
        both(lambda lib, F, x, t: F.soft_margin_loss(x, t, reduction=red), a,
             Const(np.sign(b)))
    p = np.abs(rng.standard_normal((6, 5)))
    p[0, 0] = 0.0
    p = p / p.sum(1, keepdims=True)
    logq = np.log(np.abs(rng.standard_normal((6, 5))) + 0.1)
    for red in ("batchmean", "sum", "mean", "none"):
        both(lambda lib, F, lq, t: F.kl_div(lq, t, reduction=red), logq, Const(p))
    both(lambda lib, F, lq, lt: F.kl_div(lq, lt, reduction="sum", log_target=True), logq,
         np.log(p + 0.01))
    both(lambda lib, F, x, t: F.cosine_similarity(x, t), a, b)
    both(lambda lib, F, x, t: F.pairwise_distance(x, t, keepdim=True), a, b)
    both(lambda lib, F, x, t, n: F.triplet_margin_loss(x, t, n, swap=True), a, b,
         rng.standard_normal((6, 5)))
    var = np.abs(rng.standard_normal((6, 5))) + 0.1
    both(lambda lib, F, x, t, v: F.gaussian_nll_loss(x, t, v, full=True), a, b, var)
    rate = np.abs(rng.standard_normal((6, 5))) * 3
    both(lambda lib, F, x, t: F.poisson_nll_loss(x, t, full=True), a, Const(rate.round()))
    both(lambda lib, F, x, t: F.poisson_nll_loss(x, t, log_input=False), np.abs(a) + 0.1, rate)
    c = chutney.nn.KLDivLoss(reduction="batchmean")
    t = torch.nn.KLDivLoss(reduction="batchmean")
    np.testing.assert_allclose(
        float(c(chutney.tensor(logq.astype(np.float32)), chutney.tensor(p.astype(np.float32)))),
        float(t(torch.tensor(logq.astype(np.float32)), torch.tensor(p.astype(np.float32)))),
        rtol=1e-5)


def test_pickle_and_deepcopy():
    for t in (chutney.randn(3, 4), chutney.arange(6).reshape(2, 3),
              chutney.randn(5, requires_grad=True), chutney.randn(4).to(chutney.bfloat16),
              chutney.randn(6)[::2]):
        for u in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
            assert u.dtype == t.dtype and tuple(u.shape) == tuple(t.shape)
            assert u.requires_grad == t.requires_grad
            np.testing.assert_array_equal(u.detach().float().numpy(),
                                          t.detach().float().numpy())
    nn = chutney.nn
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 4 * 4, 2), nn.PReLU())
    model.eval()
    twin = copy.deepcopy(model)
    x = chutney.randn(2, 3, 6, 6)
    np.testing.assert_array_equal(model(x).detach().numpy(), twin(x).detach().numpy())
    with chutney.no_grad():
        twin[4].bias.add_(1.0)
        twin[1].running_mean.add_(1.0)
    assert not np.allclose(model(x).detach().numpy(), twin(x).detach().numpy())
    assert float(model[1].running_mean.abs().sum()) == 0
    p = nn.Parameter(chutney.ones(2))
    p.grad = chutney.tensor([3.0, 4.0])
    for q in (copy.deepcopy(p), pickle.loads(pickle.dumps(chutney.ones(2).requires_grad_()))):
        assert q.requires_grad and q.grad is None  # as PyTorch: copies have no .grad
    # an exponential moving average of a model, the usual reason to copy one
    ema = copy.deepcopy(model)
    for p in ema.parameters():
        p.requires_grad_(False)
    assert all(p.requires_grad for p in model.parameters())


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_and_affine_grid(mode, padding_mode, align):
    x = rng.standard_normal((2, 3, 5, 7))
    # no sampling position on a whole pixel, where bilinear's gradient jumps
    theta = np.array([[[1.31, 0.23, 0.11], [-0.29, 0.93, -0.17]],
                      [[0.71, -0.47, 0.43], [0.41, 1.37, 0.31]]])
    grid = rng.uniform(-1.6, 1.6, (2, 4, 6, 2))
    grid[0, 0, 0] = [1.0, -1.0]  # the corners themselves
    both(lambda lib, F, t: F.affine_grid(t, (2, 3, 4, 6), align_corners=align), theta)
    tol = 1e-5 if mode == "bilinear" else 0
    both(lambda lib, F, x, g: F.grid_sample(x, g, mode, padding_mode, align), x, grid,
         tol=tol or 1e-6)
    both(lambda lib, F, x, t: F.grid_sample(x, F.affine_grid(t, (2, 3, 4, 6), align_corners=align),
                                            mode, padding_mode, align), x, theta)


def test_loss_shape_rules_and_targets():
    x, t = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    var = np.abs(rng.standard_normal(4)) + 0.1
    both(lambda lib, F, x, t, v: F.gaussian_nll_loss(x, t, v), x, t, var)
    both(lambda lib, F, x, t, v: F.gaussian_nll_loss(x, t, v), x, t, var[:, None])
    both(lambda lib, F, x, t, v: F.gaussian_nll_loss(x, t, v), x, t, var * 1e-9)  # below eps
    with pytest.raises(ValueError):
        CF.gaussian_nll_loss(chutney.ones(4, 3), chutney.ones(4, 3), chutney.ones(3))
    y = np.array([1.0, 0.0, -1.0, 0.0])
    both(lambda lib, F, a, b, y: F.cosine_embedding_loss(a, b, y, 0.1, reduction="none"), x, t,
         Const(y))
    with pytest.raises(TypeError):
        chutney.nn.Softmin(dimm=1)
    assert chutney.nn.ReLU6(True)(chutney.tensor([7.0])).item() == 6.0


def test_3d_convolution_pooling_and_batch_norm():
    x = rng.standard_normal((2, 4, 5, 6, 7))
    w = rng.standard_normal((6, 2, 3, 2, 3)) * 0.3
    b = rng.standard_normal(6)
    both(lambda lib, F, x, w, b: F.conv3d(x, w, b, stride=(2, 1, 2), padding=(1, 1, 0),
                                          dilation=(1, 2, 1), groups=2), x, w, b, tol=2e-5)
    both(lambda lib, F, x, w: F.conv3d(x, w), x, rng.standard_normal((3, 4, 2, 2, 2)) * 0.3,
         tol=2e-5)
    both(lambda lib, F, x: F.max_pool3d(x, 2), x)
    both(lambda lib, F, x: F.max_pool3d(x, (3, 2, 2), stride=(1, 2, 1), padding=1), x)
    both(lambda lib, F, x: F.avg_pool3d(x, 2, padding=1), x)
    both(lambda lib, F, x: F.adaptive_avg_pool3d(x, (2, 3, 4)), x)
    cm, tm = chutney.nn.BatchNorm3d(4), torch.nn.BatchNorm3d(4)
    xf = x.astype(np.float32)
    for _ in range(2):
        np.testing.assert_allclose(cm(chutney.tensor(xf)).detach().numpy(),
                                   tm(torch.tensor(xf)).detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(cm.running_var.numpy(), tm.running_var.numpy(), rtol=1e-5)
    conv = chutney.nn.Conv3d(4, 2, 3, padding=1)
    assert tuple(conv.weight.shape) == (2, 4, 3, 3, 3)
    assert tuple(conv(chutney.tensor(xf)).shape) == (2, 2, 5, 6, 7)
    assert float(conv.weight.abs().max()) <= 1 / (4 * 27) ** 0.5


def test_conv_transpose1d_and_embedding_bag():
    x = rng.standard_normal((2, 4, 7))
    w = rng.standard_normal((4, 3, 3)) * 0.3
    b = rng.standard_normal(6)
    both(lambda lib, F, x, w: F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1), x, w)
    both(lambda lib, F, x, w, b: F.conv_transpose1d(x, w, b, groups=2, dilation=2), x,
         rng.standard_normal((4, 3, 2)) * 0.3, b)
    cm, tm = chutney.nn.ConvTranspose1d(4, 6, 3, stride=2), torch.nn.ConvTranspose1d(4, 6, 3, stride=2)
    assert sorted(cm.state_dict()) == sorted(tm.state_dict())
    assert tuple(cm.weight.shape) == tuple(tm.weight.shape)
    W = rng.standard_normal((10, 3))
    idx2 = np.array([[1, 2, 4], [4, 3, 9]])
    flat = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0])
    offs = np.array([0, 2, 2, 5])
    for mode in ("sum", "mean", "max"):
        both(lambda lib, F, w: F.embedding_bag(lib.tensor(idx2), w, mode=mode), W)
        both(lambda lib, F, w: F.embedding_bag(lib.tensor(flat), w, lib.tensor(offs), mode=mode), W)
        both(lambda lib, F, w: F.embedding_bag(lib.tensor(flat), w, lib.tensor(offs), mode=mode,
                                               padding_idx=4), W)
    psw = rng.random(9)
    both(lambda lib, F, w, p: F.embedding_bag(lib.tensor(flat), w, lib.tensor(offs), mode="sum",
                                              per_sample_weights=p), W, psw)
    both(lambda lib, F, w: F.embedding_bag(lib.tensor(flat), w, lib.tensor(np.array([0, 3, 9])),
                                           mode="mean", include_last_offset=True), W)
