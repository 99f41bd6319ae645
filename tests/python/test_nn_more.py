"""nn / nn.functional additions against PyTorch 1.13 (values and gradients):
unfold/fold, batch_norm, alpha dropout and RReLU, hinge / multi-label /
multi-margin / triplet-with-distance / CTC losses, LP pools and max
unpooling, the deprecated upsample functions, conv_transpose3d and
ConvTranspose3d, the Lazy layers, ChannelShuffle, SyncBatchNorm and pdist.
Skipped without torch."""

import math
import warnings

import pytest

import chutney

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
from torch_pairs import Const, both  # noqa: E402,F401

rng = np.random.default_rng(5)
CF, TF = chutney.nn.functional, torch.nn.functional


def n(*shape, scale=1.0):
    return rng.standard_normal(shape) * scale


def same_state(cm, tm):
    cs, ts = cm.state_dict(), tm.state_dict()
    assert list(cs) == list(ts)
    for k in cs:
        assert tuple(cs[k].shape) == tuple(ts[k].shape), k


def copy_state(tm, cm):
    cm.load_state_dict({k: chutney.tensor(v.detach().numpy()) for k, v in
                        tm.state_dict().items()})


# ---- unfold / fold ----

FOLD_ARGS = [dict(kernel_size=2), dict(kernel_size=(2, 3), stride=(2, 1)),
             dict(kernel_size=3, padding=1, dilation=2, stride=2),
             dict(kernel_size=(1, 2), padding=(0, 1), dilation=(1, 3))]


@pytest.mark.parametrize("kw", FOLD_ARGS)
def test_unfold_fold(kw):
    x = n(2, 3, 7, 8)
    both(lambda lib, F, x: F.unfold(x, **kw), x)
    both(lambda lib, F, x: F.unfold(x, **kw), x[0])  # unbatched
    cols = TF.unfold(torch.zeros(2, 3, 7, 8), **kw)
    c = n(*cols.shape)
    both(lambda lib, F, c: F.fold(c, (7, 8), **kw), c)
    both(lambda lib, F, c: F.fold(c, (7, 8), **kw), c[1])
    both(lambda lib, F, x: lib.nn.Fold((7, 8), **kw)(lib.nn.Unfold(**kw)(x)), x)
    assert repr(chutney.nn.Unfold(**kw)) == repr(torch.nn.Unfold(**kw))
    assert repr(chutney.nn.Fold(5, **kw)) == repr(torch.nn.Fold(5, **kw))


def test_unfold_fold_errors():
    x = chutney.randn(1, 2, 5, 5)
    for bad in (dict(kernel_size=6), dict(kernel_size=0), dict(kernel_size=2, padding=-1),
                dict(kernel_size=2, stride=0)):
        with pytest.raises(RuntimeError):
            CF.unfold(x, **bad)
    with pytest.raises(RuntimeError):
        CF.unfold(chutney.randn(5, 5), 2)
    with pytest.raises(RuntimeError, match="divisible"):
        CF.fold(chutney.randn(1, 13, 20), (5, 6), 2)
    with pytest.raises(RuntimeError, match="blocks"):
        CF.fold(chutney.randn(1, 12, 21), (5, 6), 2)
    with pytest.raises(RuntimeError):
        CF.fold(chutney.randn(1, 1, 12, 20), (5, 6), 2)


# ---- batch_norm ----

@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 5), (2, 3, 2, 3, 2)])
def test_batch_norm_functional(shape):
    x, w, b = n(*shape, scale=2) + 1, n(3), n(3)
    rm, rv = n(3), rng.random(3) + 0.5
    for training in (True, False):
        for momentum in (0.1, 0.5):
            stats = {}

            def fn(lib, F, x, w, b):
                m, v = lib.tensor(rm.astype(np.float32)), lib.tensor(rv.astype(np.float32))
                y = F.batch_norm(x, m, v, w, b, training=training, momentum=momentum, eps=1e-3)
                stats[lib.__name__] = (m.numpy().copy(), v.numpy().copy())
                return y
            both(fn, x, w, b)
            for a, t in zip(stats["chutney"], stats["torch"]):
                np.testing.assert_allclose(a, t, rtol=1e-5, atol=1e-6)
    both(lambda lib, F, x: F.batch_norm(x, None, None, training=True), x)


def test_batch_norm_errors():
    with pytest.raises(RuntimeError, match="evaluation mode"):
        CF.batch_norm(chutney.randn(4, 3), None, None)
    with pytest.raises(ValueError, match="more than 1 value"):
        CF.batch_norm(chutney.randn(1, 3), None, None, training=True)
    with pytest.raises(RuntimeError, match="3 elements"):
        CF.batch_norm(chutney.randn(4, 3), chutney.zeros(2), chutney.ones(2))


# ---- alpha dropout, rrelu ----

ALPHA = 1.7580993408473766


@pytest.mark.parametrize("feature", [False, True])
def test_alpha_dropout(feature):
    fn = CF.feature_alpha_dropout if feature else CF.alpha_dropout
    x = chutney.tensor(n(64, 32, 8).astype(np.float32), requires_grad=True)
    assert fn(x, 0.3, training=False) is x
    assert fn(x, 0.0, training=True) is x
    np.testing.assert_array_equal(fn(x, 1.0, training=True).detach().numpy(), 0.0)
    p = 0.3
    a = 1 / math.sqrt((ALPHA ** 2 * p + 1) * (1 - p))
    chutney.manual_seed(0)
    y = fn(x, p, training=True)
    y.sum().backward()
    xv, yv, g = x.detach().numpy(), y.detach().numpy(), x.grad.numpy()
    kept = g != 0
    np.testing.assert_allclose(g[kept], a, rtol=1e-6)
    np.testing.assert_allclose(yv[kept], a * xv[kept] + ALPHA * a * p, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(yv[~kept], a * (ALPHA * p - ALPHA), rtol=1e-5)
    assert abs(kept.mean() - (1 - p)) < 0.03
    if feature:  # whole channels
        assert (kept.all(axis=2) | (~kept).all(axis=2)).all()
    # SELU's fixed point (zero mean, unit variance) is kept
    assert abs(yv.mean()) < 0.05 and abs(yv.std() - 1) < 0.05
    name = "FeatureAlphaDropout" if feature else "AlphaDropout"
    m = getattr(chutney.nn, name)(0.2)
    assert repr(m) == repr(getattr(torch.nn, name)(0.2))
    assert m.eval()(x) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        fn(x, 1.5, training=True)


def test_feature_alpha_dropout_needs_channels():
    with pytest.raises(RuntimeError, match="2 dimensions"):
        CF.feature_alpha_dropout(chutney.randn(4), 0.5, True)


def test_rrelu():
    x = n(4, 5, 6)
    both(lambda lib, F, x: F.rrelu(x), x)
    both(lambda lib, F, x: F.rrelu(x, 0.1, 0.4, training=False), x)
    both(lambda lib, F, x: lib.nn.RReLU(0.2, 0.3).eval()(x), x)
    assert repr(chutney.nn.RReLU()) == repr(torch.nn.RReLU())
    t = chutney.tensor(x.astype(np.float32), requires_grad=True)
    y = chutney.nn.RReLU(0.1, 0.3)(t)  # training: a slope per element
    y.sum().backward()
    g, xv, yv = t.grad.numpy(), x.astype(np.float32), y.detach().numpy()
    np.testing.assert_array_equal(g[xv > 0], 1.0)
    neg = g[xv <= 0]
    assert neg.min() >= 0.1 and neg.max() <= 0.3 and neg.std() > 0.03
    np.testing.assert_allclose(yv, xv * g, rtol=1e-6)
    with pytest.raises(RuntimeError, match="Lower bound"):
        CF.rrelu(chutney.randn(3), 0.5, 0.1)


# ---- losses ----

REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_hinge_embedding_loss(reduction):
    x = n(4, 5)
    y = rng.choice([-1.0, 1.0], (4, 5))
    y[0, :2] = [0.0, 2.0]  # neither: both terms, as PyTorch
    both(lambda lib, F, x, y: F.hinge_embedding_loss(x, y, reduction=reduction), x, Const(y))
    both(lambda lib, F, x, y: lib.nn.HingeEmbeddingLoss(0.5, reduction=reduction)(x, y), x,
         Const(y))


def _multilabel_targets(nrow, c):
    t = -np.ones((nrow, c), dtype=np.int64)
    for i in range(nrow):
        k = int(rng.integers(0, c))
        t[i, :k] = rng.permutation(c)[:k]
    t[0, :3] = [1, 1, -1]  # a repeated class counts twice
    return t


@pytest.mark.filterwarnings("ignore:size_average")
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_margin_loss(reduction):
    x, t = n(5, 6), _multilabel_targets(5, 6)
    both(lambda lib, F, x, t: F.multilabel_margin_loss(x, t, reduction=reduction), x, t)
    both(lambda lib, F, x, t: lib.nn.MultiLabelMarginLoss(reduction=reduction)(x, t), x, t)
    both(lambda lib, F, x, t: F.multilabel_margin_loss(x, t, reduction=reduction), x[1], t[1])
    both(lambda lib, F, x, t: F.multilabel_margin_loss(x, t, size_average=False), x, t)


def test_multilabel_margin_loss_errors():
    x = chutney.randn(2, 4)
    with pytest.raises(RuntimeError, match="out of range"):
        CF.multilabel_margin_loss(x, chutney.tensor([[1, 5, -1, 0], [0, 0, 0, 0]]))
    with pytest.raises(RuntimeError, match="inconsistent"):
        CF.multilabel_margin_loss(x, chutney.tensor([[1, 2, -1], [0, 0, 0]]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_soft_margin_loss(reduction):
    x, y, w = n(4, 5), (rng.random((4, 5)) > 0.5).astype(np.float64), rng.random(5)
    both(lambda lib, F, x, y: F.multilabel_soft_margin_loss(x, y, reduction=reduction), x,
         Const(y))
    both(lambda lib, F, x, y, w: F.multilabel_soft_margin_loss(x, y, w, reduction=reduction), x,
         Const(y), Const(w))
    both(lambda lib, F, x, y, w: lib.nn.MultiLabelSoftMarginLoss(w, reduction=reduction)(x, y),
         x, Const(y), Const(w))
    both(lambda lib, F, x, y: F.multilabel_soft_margin_loss(x, y, reduction=reduction), x[0],
         Const(y[0]))


@pytest.mark.parametrize("p,margin", [(1, 1.0), (2, 0.7)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multi_margin_loss(p, margin, reduction):
    x, t, w = n(6, 5), rng.integers(0, 5, 6), rng.random(5) + 0.5
    both(lambda lib, F, x, t: F.multi_margin_loss(x, t, p, margin, reduction=reduction), x, t)
    both(lambda lib, F, x, t, w: F.multi_margin_loss(x, t, p, margin, w, reduction=reduction),
         x, t, Const(w))
    both(lambda lib, F, x, t, w: lib.nn.MultiMarginLoss(p, margin, w, reduction=reduction)(x, t),
         x, t, Const(w))
    both(lambda lib, F, x, t: F.multi_margin_loss(x, t, p, margin, reduction=reduction), x[0],
         t[0])
    both(lambda lib, F, x, t: F.multi_margin_loss(x, t, p, margin, reduction=reduction), x[0],
         t[:1])


def test_multi_margin_loss_errors():
    x = chutney.randn(2, 4)
    with pytest.raises(ValueError, match="p == 1"):
        CF.multi_margin_loss(x, chutney.tensor([1, 0]), p=3)
    with pytest.raises(ValueError, match="p == 1"):
        chutney.nn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError, match="one-dimensional"):
        CF.multi_margin_loss(x, chutney.tensor([1, 0]), weight=chutney.ones(1, 4))
    with pytest.raises(RuntimeError, match="out of range"):
        CF.multi_margin_loss(x, chutney.tensor([1, 4]))
    with pytest.raises(RuntimeError, match="inconsistent"):
        CF.multi_margin_loss(x, chutney.tensor([1, 0, 1]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_triplet_margin_with_distance_loss(reduction):
    a, p, q = n(5, 4), n(5, 4), n(5, 4)
    for swap in (False, True):
        both(lambda lib, F, a, p, q: F.triplet_margin_with_distance_loss(
            a, p, q, swap=swap, reduction=reduction), a, p, q)

        def cos(lib):
            return lambda u, v: 1.0 - lib.nn.functional.cosine_similarity(u, v)
        both(lambda lib, F, a, p, q: F.triplet_margin_with_distance_loss(
            a, p, q, distance_function=cos(lib), margin=0.3, swap=swap, reduction=reduction),
            a, p, q)
        both(lambda lib, F, a, p, q: lib.nn.TripletMarginWithDistanceLoss(
            distance_function=lib.nn.PairwiseDistance(p=1), margin=2.0, swap=swap,
            reduction=reduction)(a, p, q), a, p, q)
    both(lambda lib, F, a, p, q: F.triplet_margin_with_distance_loss(a, p, q,
                                                                     reduction=reduction),
         a[0], p[0], q[0])
    assert repr(chutney.nn.TripletMarginWithDistanceLoss()) == \
        repr(torch.nn.TripletMarginWithDistanceLoss())


# ---- CTC ----

def _ctc_case(t_len, batch, c, s_max, blank):
    labels = [l for l in range(c) if l != blank]
    tl = rng.integers(1, s_max + 1, batch)
    tl[0] = s_max
    il = np.array([t_len - int(rng.integers(0, 3)) for _ in range(batch)])
    il[0] = t_len
    padded = np.full((batch, s_max), blank, dtype=np.int64)
    for i in range(batch):
        padded[i, :tl[i]] = rng.choice(labels, tl[i])
    padded[0, :2] = padded[0, 0]  # a repeated label needs a blank between
    return n(t_len, batch, c), padded, il, tl


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("blank", [0, 3])
def test_ctc_loss(reduction, blank):
    logits, padded, il, tl = _ctc_case(12, 4, 5, 4, blank)
    concat = np.concatenate([padded[i, :tl[i]] for i in range(len(tl))])

    def fn(targets, as_tuple):
        def f(lib, F, z, t, il_, tl_):
            lens = (tuple(il.tolist()), tuple(tl.tolist())) if as_tuple else (il_, tl_)
            return F.ctc_loss(z.log_softmax(2), t, *lens, blank=blank, reduction=reduction)
        return f
    both(fn(padded, False), logits, padded, il, tl, tol=2e-5)
    both(fn(concat, True), logits, concat, il, tl, tol=2e-5)
    both(lambda lib, F, z, t, il, tl: lib.nn.CTCLoss(blank, reduction)(z.log_softmax(2), t, il,
                                                                       tl), logits, padded, il,
         tl, tol=2e-5)


def test_ctc_loss_unbatched_and_infinite():
    logits, padded, il, tl = _ctc_case(10, 3, 4, 3, 0)
    for reduction in REDUCTIONS:
        both(lambda lib, F, z, t: F.ctc_loss(z.log_softmax(1), t, lib.tensor(10), lib.tensor(3),
                                                  reduction=reduction),
             logits[:, 0], padded[0], tol=2e-5)
    # sample 1 cannot be aligned: 4 labels with a repeat need 5 steps
    padded = np.array([[1, 2, 0, 0], [1, 1, 2, 3], [3, 0, 0, 0]])
    il, tl = np.array([10, 4, 6]), np.array([2, 4, 1])
    for reduction in REDUCTIONS:
        both(lambda lib, F, z, t, il, tl: F.ctc_loss(z.log_softmax(2), t, il, tl,
                                                     reduction=reduction, zero_infinity=True),
             logits, padded, il, tl, tol=2e-5)
    loss = CF.ctc_loss(chutney.tensor(logits.astype(np.float32)).log_softmax(2),
                       chutney.tensor(padded), chutney.tensor(il), chutney.tensor(tl),
                       reduction="none")
    assert math.isinf(loss.tolist()[1]) and not math.isinf(loss.tolist()[0])


def test_ctc_loss_errors():
    lp = chutney.randn(5, 2, 4).log_softmax(2)
    t = chutney.tensor([[1, 2], [1, 1]])
    with pytest.raises(RuntimeError, match="input_lengths"):
        CF.ctc_loss(lp, t, [6, 5], [2, 2])
    with pytest.raises(RuntimeError, match="batch_size"):
        CF.ctc_loss(lp, t, [5], [2, 2])
    with pytest.raises(RuntimeError, match="blank"):
        CF.ctc_loss(lp, t, [5, 5], [2, 2], blank=4)
    with pytest.raises(RuntimeError, match="target_lengths"):
        CF.ctc_loss(lp, t, [5, 5], [3, 2])


# ---- LP pools, max unpooling ----

@pytest.mark.parametrize("p", [2, 3, 1.5])
def test_lp_pool(p):
    x = np.abs(n(2, 3, 9, 8)) + 0.1
    both(lambda lib, F, x: F.lp_pool2d(x, p, 2), x)
    both(lambda lib, F, x: F.lp_pool2d(x, p, (3, 2), stride=(2, 1)), x)
    both(lambda lib, F, x: F.lp_pool2d(x, p, 2, ceil_mode=True), x)
    both(lambda lib, F, x: lib.nn.LPPool2d(p, 3, 2)(x), x[0])
    both(lambda lib, F, x: F.lp_pool1d(x, p, 3), x[:, :, 0])
    both(lambda lib, F, x: lib.nn.LPPool1d(p, 2, 1)(x), x[0, :, 0])
    assert repr(chutney.nn.LPPool2d(p, 3)) == repr(torch.nn.LPPool2d(p, 3))


def test_lp_pool_signs_and_zeros():
    x = n(1, 2, 4, 4)
    both(lambda lib, F, x: F.lp_pool2d(x, 1, 2), x)  # p = 1: the window sums
    both(lambda lib, F, x: F.lp_pool2d(x * 0.0, 2, 2), x)  # gradient 0 at 0


@pytest.mark.parametrize("k,s,p", [(2, None, 0), (3, 2, 1), (3, 1, 0)])
def test_max_unpool(k, s, p):
    # sizes max_pool covers exactly: its flat indices are then the output's
    x = n(2, 3, 6, 8) if k == 2 else n(2, 3, 7, 9)

    def f2(lib, F, x, size=None):
        y, i = F.max_pool2d(x, k, s, p, return_indices=True)
        return F.max_unpool2d(y * 2.0, i, k, s, p, size)
    both(f2, x)
    both(f2, x[0])
    both(lambda lib, F, x: f2(lib, F, x, (x.shape[-2], x.shape[-1])), x)
    if (s or k) > 1:  # a larger output, within stride of the default
        both(lambda lib, F, x: f2(lib, F, x, [2, 3, x.shape[-2] + 1, x.shape[-1] + 1]), x)

    def f1(lib, F, x):
        y, i = F.max_pool1d(x, k, s, p, return_indices=True)
        return lib.nn.MaxUnpool1d(k, s, p)(y, i, output_size=list(x.shape[-1:]))
    both(f1, x[:, :, 0])
    both(f1, x[0, :, 0])
    both(lambda lib, F, x: lib.nn.MaxUnpool2d(k, s, p)(*lib.nn.MaxPool2d(
        k, s, p, return_indices=True)(x)), x)
    assert repr(chutney.nn.MaxUnpool2d(k, s, p)) == repr(torch.nn.MaxUnpool2d(k, s, p))
    assert repr(chutney.nn.MaxUnpool1d(k, s, p)) == repr(torch.nn.MaxUnpool1d(k, s, p))


def test_max_unpool_errors():
    y, i = CF.max_pool2d(chutney.randn(3, 8, 8), 2, return_indices=True)
    with pytest.raises(ValueError, match="invalid output_size"):
        CF.max_unpool2d(y, i, 2, output_size=(11, 8))
    with pytest.raises(ValueError, match="output_size"):
        CF.max_unpool2d(y, i, 2, output_size=(8,))
    with pytest.raises(RuntimeError, match="invalid max index"):
        CF.max_unpool2d(chutney.randn(1, 1, 2, 2), chutney.tensor([[[[0, 1], [2, 99]]]]), 2)
    with pytest.raises(RuntimeError, match="shape of indices"):
        CF.max_unpool2d(chutney.randn(1, 1, 2, 2), chutney.tensor([[[[0, 1, 2, 3]]]]), 2)
    with pytest.raises(RuntimeError, match="3d or 4d"):
        CF.max_unpool2d(chutney.randn(2, 2), chutney.tensor([[0, 1], [2, 3]]), 2)


# ---- deprecated upsampling ----

def test_upsample_deprecated():
    x = n(2, 3, 4, 5)
    for name, kw in (("upsample_nearest", dict(scale_factor=2)),
                     ("upsample_nearest", dict(size=(7, 9))),
                     ("upsample_bilinear", dict(scale_factor=2)),
                     ("upsample_bilinear", dict(size=(6, 11))),
                     ("upsample", dict(scale_factor=3, mode="bilinear", align_corners=False))):
        with pytest.warns(UserWarning, match="deprecated"):
            both(lambda lib, F, x: getattr(F, name)(x, **kw), x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        both(lambda lib, F, x: lib.nn.UpsamplingBilinear2d(scale_factor=2)(x), x)
        both(lambda lib, F, x: lib.nn.UpsamplingNearest2d(size=(5, 7))(x), x)


# ---- 3-d transposed convolution ----

CT3_ARGS = [dict(), dict(stride=2), dict(stride=(2, 1, 2), padding=1, output_padding=(1, 0, 1)),
            dict(dilation=(2, 1, 1), padding=(1, 0, 1), groups=2),
            dict(stride=3, output_padding=2)]


@pytest.mark.parametrize("kw", CT3_ARGS)
def test_conv_transpose3d(kw):
    x, w, b = n(2, 4, 3, 4, 3), n(4, 3 // 1 if kw.get("groups", 1) == 1 else 2, 2, 3, 2), n(
        3 if kw.get("groups", 1) == 1 else 4)
    both(lambda lib, F, x, w, b: F.conv_transpose3d(x, w, b, **kw), x, w, b, tol=2e-5)
    both(lambda lib, F, x, w: F.conv_transpose3d(x, w, **kw), x[1], w, tol=2e-5)


def test_conv_transpose3d_module():
    for args, kw in (((4, 6, 3), {}), ((4, 6, (2, 3, 1)), dict(stride=2, padding=(1, 0, 0),
                                                               groups=2, bias=False))):
        cm, tm = chutney.nn.ConvTranspose3d(*args, **kw), torch.nn.ConvTranspose3d(*args, **kw)
        same_state(cm, tm)
        assert repr(cm) == repr(tm)
        copy_state(tm, cm)
        x = n(2, 4, 3, 3, 4).astype(np.float32)
        np.testing.assert_allclose(cm(chutney.tensor(x)).detach().numpy(),
                                   tm(torch.tensor(x)).detach().numpy(), rtol=2e-5, atol=2e-5)
    # PyTorch's init: uniform with bound 1/sqrt(C_out/groups * kernel volume)
    w = chutney.nn.ConvTranspose3d(8, 12, 3, groups=2).weight.detach().numpy()
    bound = 1 / math.sqrt(6 * 27)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound
    cm, tm = chutney.nn.ConvTranspose3d(2, 3, 3, stride=2), torch.nn.ConvTranspose3d(2, 3, 3,
                                                                                     stride=2)
    copy_state(tm, cm)
    x = n(1, 2, 3, 3, 3).astype(np.float32)
    np.testing.assert_allclose(cm(chutney.tensor(x), output_size=[8, 7, 8]).detach().numpy(),
                               tm(torch.tensor(x), output_size=[8, 7, 8]).detach().numpy(),
                               rtol=2e-5, atol=2e-5)
    with pytest.raises(ValueError):
        cm(chutney.tensor(x), output_size=[9, 7, 7])


# ---- lazy layers ----

@pytest.mark.parametrize("case", ["linear", "conv1d", "conv2d", "conv2d_unbatched"])
def test_lazy(case):
    make, x = {
        "linear": (lambda nn: nn.LazyLinear(4), n(3, 5)),
        "conv1d": (lambda nn: nn.LazyConv1d(4, 3, stride=2, bias=False), n(2, 5, 9)),
        "conv2d": (lambda nn: nn.LazyConv2d(4, (3, 2), padding=1, groups=1), n(2, 6, 5, 5)),
        "conv2d_unbatched": (lambda nn: nn.LazyConv2d(4, 2), n(6, 5, 5)),
    }[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm, tm = make(chutney.nn), make(torch.nn)
    assert list(cm.state_dict()) == list(tm.state_dict())
    seen = []
    cm.register_forward_hook(lambda m, a, o: seen.append(type(m).__name__))
    xc, xt = chutney.tensor(x.astype(np.float32)), torch.tensor(x.astype(np.float32))
    cm.eval()
    cm(xc), tm(xt)
    assert type(cm).__name__ == type(tm).__name__ and seen == [type(tm).__name__]
    assert isinstance(cm, getattr(chutney.nn, type(tm).__name__)) and not cm.training
    same_state(cm, tm)
    assert repr(cm) == repr(tm)
    copy_state(tm, cm)
    np.testing.assert_allclose(cm(xc).detach().numpy(), tm(xt).detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    # PyTorch's init: |w| within 1/sqrt(fan_in)
    fan_in = tm.weight[0].numel()
    assert np.abs(make(chutney.nn)(xc).detach().numpy()).max() > 0
    w = make(chutney.nn)
    w(xc)
    assert 0 < np.abs(w.weight.detach().numpy()).max() <= 1 / math.sqrt(fan_in)
    params = dict(w.named_parameters())
    assert set(params) == set(dict(tm.named_parameters()))


# ---- channel shuffle, SyncBatchNorm, pdist ----

def test_channel_shuffle():
    x = n(2, 6, 3, 2)
    for g in (1, 2, 3, 6):
        # PyTorch 1.13 has no derivative for channel_shuffle: values only there
        both(lambda lib, F, x: F.channel_shuffle(x, g), x, grad=False)
        both(lambda lib, F, x: lib.nn.ChannelShuffle(g)(x), x[:, :, 0], grad=False)
        t = chutney.tensor(x.astype(np.float32), requires_grad=True)
        seed = chutney.randn(*x.shape)
        (CF.channel_shuffle(t, g) * seed).sum().backward()
        # the gradient is the inverse permutation: shuffling by C/g groups
        np.testing.assert_array_equal(t.grad.numpy(), CF.channel_shuffle(seed, 6 // g).numpy())
    assert repr(chutney.nn.ChannelShuffle(2)) == repr(torch.nn.ChannelShuffle(2))
    for bad, msg in (((chutney.randn(2, 4), 2), "> 2 dims"), ((chutney.randn(2, 6, 3), 4),
                                                              "divisible"),
                     ((chutney.randn(2, 6, 3), 0), "positive")):
        with pytest.raises(RuntimeError, match=msg):
            CF.channel_shuffle(*bad)


@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 4, 5), (2, 3, 2, 3, 2)])
def test_sync_batch_norm(shape):
    x = n(*shape, scale=2) + 0.5
    for momentum in (0.1, None):
        cm = chutney.nn.SyncBatchNorm(3, momentum=momentum)
        tm = {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d,
              5: torch.nn.BatchNorm3d}[len(shape)](3, momentum=momentum)
        same_state(cm, tm)
        for training in (True, True, False):
            cm.train(training), tm.train(training)
            both(lambda lib, F, x: (cm if lib is chutney else tm)(x), x)
            for (k, a), (_, b) in zip(cm.state_dict().items(), tm.state_dict().items()):
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    assert repr(chutney.nn.SyncBatchNorm(3)) == repr(torch.nn.SyncBatchNorm(3))
    m = chutney.nn.SyncBatchNorm(3, affine=False, track_running_stats=False)
    both(lambda lib, F, x: F.batch_norm(x, None, None, training=True) if lib is torch else m(x),
         x)
    with pytest.raises(ValueError, match="2D"):
        chutney.nn.SyncBatchNorm(3)(chutney.randn(3))


def test_convert_sync_batchnorm():
    nn = chutney.nn
    net = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU(),
                        nn.Sequential(nn.BatchNorm2d(3)))
    net(chutney.randn(4, 2, 6, 6))
    net.eval()
    x = chutney.randn(4, 2, 6, 6)
    before = net(x).detach().numpy()
    bn = net[1]
    out = nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert out is net
    assert type(net[1]).__name__ == "SyncBatchNorm" and type(net[3][0]).__name__ == \
        "SyncBatchNorm"
    assert net[1].weight is bn.weight and net[1].running_mean is bn.running_mean
    assert not net[1].training
    assert list(net.state_dict()) == list(torch.nn.SyncBatchNorm.convert_sync_batchnorm(
        torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.ReLU(),
                            torch.nn.Sequential(torch.nn.BatchNorm2d(3)))).state_dict())
    np.testing.assert_allclose(net(x).detach().numpy(), before, rtol=1e-5, atol=1e-6)
    single = nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm1d(5))
    assert type(single).__name__ == "SyncBatchNorm" and single.num_features == 5


@pytest.mark.parametrize("p", [2, 1, 3, 1.5, 0, math.inf])
def test_pdist(p):
    both(lambda lib, F, x: F.pdist(x, p), n(6, 4))
    both(lambda lib, F, x: F.pdist(x, p), n(1, 4))


def test_pdist_errors():
    with pytest.raises(RuntimeError, match="2D"):
        CF.pdist(chutney.randn(2, 3, 3))
    with pytest.raises(RuntimeError, match="non-negative"):
        CF.pdist(chutney.randn(2, 3), -1)
