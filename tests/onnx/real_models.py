"""Real models through Chutney's ONNX import, against PyTorch.

During the test run, PyTorch (Debian's python3-torch, python3-torchvision)
builds torchvision's resnet18 and mobilenet_v2, an LSTM classifier, a
small transformer encoder block, GELU in its exported forms, a spatial
transformer (GridSample), four attention layers and two object detectors (SSDlite and Faster R-CNN with
their post-processing) with random weights (fixed seed, eval mode), exports each
to ONNX, and saves the input and PyTorch's output as .npy; then `chutney
run` runs each model and its output must match PyTorch's within 1e-4
absolute. Forms Debian's PyTorch does not export (attention as PyTorch 2
writes it) are written with onnx.helper and checked against numpy. For the attention
models, `chutney graph --text` must show the attention subgraph imported
as the fused scaled_dot_product_attention op (no softmax left) where the
importer may map it, and the ops as they are where it may not.

    real_models.py CHUTNEY OUT_DIR [--only NAME,NAME] [--skip NAME,NAME]

Exits 77 (skipped) without torch, torchvision or onnx (saying which) or in a
build without ONNX support."""
import os
import subprocess
import sys
import time
import warnings

TOL = 1e-4



def main():
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__)
        return 2
    chutney, out = args[0], args[1]
    only = skip = None
    rest = args[2:]
    while rest:
        opt, val = rest[0], rest[1] if len(rest) > 1 else ""
        if opt == "--only":
            only = val.split(",")
        elif opt == "--skip":
            skip = val.split(",")
        else:
            print("real_models.py: unknown option %s" % opt)
            return 2
        rest = rest[2:]

    for mod, pkg in (("numpy", "python3-numpy"), ("torch", "python3-torch"),
                     ("torchvision", "python3-torchvision"), ("onnx", "python3-onnx")):
        try:
            __import__(mod)
        except ImportError:
            print("SKIP: %s is not installed (%s)" % (mod, pkg))
            return 77
    # Without ONNX support every load says so, before the file is opened.
    probe = subprocess.run([chutney, "info", os.path.join(out, "none.onnx")], capture_output=True,
                           text=True)
    if "built without ONNX" in probe.stdout + probe.stderr:
        print("SKIP: built without ONNX support")
        return 77

    import numpy as np
    import torch

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    os.makedirs(out, exist_ok=True)
    fails = 0
    for name, build, opset, dyn, keep_bn in MODELS + ATTENTION:
        if (only and name not in only) or (skip and name in skip):
            print("skipped: %s (not selected)" % name)
            continue
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        torch.manual_seed(0)
        model, inputs = build()
        model.eval()
        with torch.no_grad():
            want = model(*inputs)
        in_names = ["input_%d" % k for k in range(len(inputs))]
        path = os.path.join(d, "model.onnx")
        # A symbolic batch where the model allows one: the importer then
        # folds the exporter's shape computations once `chutney run` gives
        # the input's concrete shape.
        axes = {n: {0: "batch"} for n in in_names} if dyn else None
        # keep_bn: BatchNormalization nodes as they are (PRESERVE on a model
        # in eval mode) instead of folded into the convolutions.
        mode = torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL
        torch.onnx.export(model, tuple(inputs), path, opset_version=opset, input_names=in_names,
                          output_names=["output"], dynamic_axes=axes, do_constant_folding=True,
                          training=mode)
        cmd = [chutney, "run", path, "--output-dir", os.path.join(d, "out"), "--threads", "2"]
        for n, x in zip(in_names, inputs):
            np.save(os.path.join(d, n + ".npy"), x.numpy())
            cmd += ["--input", "%s=%s" % (n, os.path.join(d, n + ".npy"))]
        np.save(os.path.join(d, "want.npy"), want.numpy())
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        dt = time.time() - t0
        if r.returncode != 0:
            print("FAIL: %s (opset %d): chutney run exited %d:\n%s%s"
                  % (name, opset, r.returncode, r.stdout, r.stderr))
            fails += 1
            continue
        got = np.load(os.path.join(d, "out", "output.npy"))
        want = want.numpy()
        if got.shape != want.shape or got.dtype != want.dtype:
            print("FAIL: %s: output %s %s, PyTorch's %s %s"
                  % (name, got.dtype, got.shape, want.dtype, want.shape))
            fails += 1
            continue
        err = float(np.abs(got.astype(np.float64) - want).max())
        ok = err <= TOL and fused_as_expected(chutney, name, path) and gelu_as_expected(chutney, name, path)
        fails += not ok
        print("%s: %s (opset %d, output %s, |out| max %.3g): max abs diff %.3g (tolerance %g), "
              "chutney run %.2f s" % ("ok" if ok else "FAIL", name, opset, list(want.shape),
                                        float(np.abs(want).max()), err, TOL, dt))
    for name, build in WRITTEN:
        if (only and name not in only) or (skip and name in skip):
            print("skipped: %s (not selected)" % name)
            continue
        fails += not run_written(chutney, os.path.join(out, name), name, build)
    for name, tv_name, opset, kw in DETECTION:
        if (only and name not in only) or (skip and name in skip):
            print("skipped: %s (not selected)" % name)
            continue
        fails += not run_detection(chutney, os.path.join(out, name), name, tv_name, opset, kw)
    print("real_models: %s" % ("all passed" if fails == 0 else "%d failed" % fails))
    return 1 if fails else 0


def run_written(chutney, d, name, build):
    """A model written with onnx.helper (a form Debian's PyTorch 1.13 does
    not export), against the numpy result build gives."""
    import numpy as np
    import onnx
    os.makedirs(d, exist_ok=True)
    model, feeds, want = build()
    path = os.path.join(d, "model.onnx")
    onnx.save(model, path)
    cmd = [chutney, "run", path, "--output-dir", os.path.join(d, "out"), "--threads", "2"]
    for n, x in feeds.items():
        np.save(os.path.join(d, n + ".npy"), x)
        cmd += ["--input", "%s=%s" % (n, os.path.join(d, n + ".npy"))]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL: %s: chutney run exited %d:\n%s%s" % (name, r.returncode, r.stdout, r.stderr))
        return False
    got = np.load(os.path.join(d, "out", "output.npy"))
    err = float(np.abs(got.astype(np.float64) - want).max()) if got.shape == want.shape else float("inf")
    ok = err <= TOL and fused_as_expected(chutney, name, path)
    print("%s: %s (written, output %s): max abs diff %.3g (tolerance %g)"
          % ("ok" if ok else "FAIL", name, list(want.shape), err, TOL))
    return ok


def sdpa_torch2_export():
    """Attention as PyTorch 2's exporters write F.scaled_dot_product_attention
    with a float mask: sqrt(scale) on q and on k^T, k^T as Reshape to 3-D,
    Transpose, Reshape back, and the probabilities under Where(IsNaN(P), 0,
    P). Written with onnx.helper at opset 17; the result from numpy."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    b, h, t, e = 2, 3, 130, 8
    q, k, v = (rng.standard_normal((b, h, t, e)).astype(np.float32) for _ in range(3))
    mask = rng.standard_normal((t, t)).astype(np.float32)
    s = np.float32(e ** -0.25)
    c = lambda name, v: numpy_helper.from_array(np.array(v), name)
    nodes = [
        helper.make_node("Mul", ["q", "s"], ["qs"]),
        helper.make_node("Reshape", ["k", "shape3"], ["k3"]),
        helper.make_node("Transpose", ["k3"], ["kt3"], perm=[0, 2, 1]),
        helper.make_node("Reshape", ["kt3", "shape4"], ["kt"]),
        helper.make_node("Mul", ["kt", "s"], ["kts"]),
        helper.make_node("MatMul", ["qs", "kts"], ["scores"]),
        helper.make_node("Add", ["scores", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
        helper.make_node("IsNaN", ["p"], ["nan"]),
        helper.make_node("Where", ["nan", "zero", "p"], ["p0"]),
        helper.make_node("MatMul", ["p0", "v"], ["output"]),
    ]
    F = TensorProto.FLOAT
    g = helper.make_graph(
        nodes, "sdpa", [helper.make_tensor_value_info(n, F, [b, h, t, e]) for n in "qkv"]
        + [helper.make_tensor_value_info("mask", F, [t, t])],
        [helper.make_tensor_value_info("output", F, [b, h, t, e])],
        [c("s", s), c("shape3", np.array([b * h, t, e], np.int64)),
         c("shape4", np.array([b, h, e, t], np.int64)), c("zero", np.float32(0))])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    sc = (q * s) @ (np.swapaxes(k, -1, -2) * s) + mask
    p = np.exp(sc - sc.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    return model, {"q": q, "k": k, "v": v, "mask": mask}, want


def run_detection(chutney, d, name, tv_name, opset, kw):
    """A torchvision detector, its post-processing included (NonZero, TopK,
    NonMaxSuppression, RoiAlign: shapes that depend on values, so the model
    runs eagerly), exported with the image as its input; every detection
    PyTorch makes must be among Chutney's (same label, box and score
    within tolerance), and as many of them. The order of two detections
    whose scores differ by rounding may differ, so they are matched, not
    compared row by row."""
    import numpy as np
    import torch
    import torchvision

    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    model = getattr(torchvision.models.detection, tv_name)(weights=None, weights_backbone=None,
                                                           num_classes=5, **kw).eval()
    from detector_stats import calibrate_batch_norm
    calibrate_batch_norm(model, tv_name)
    image = torch.rand(3, 320, 320)
    with torch.no_grad():
        want = model([image])[0]
    keys = list(want.keys())
    path = os.path.join(d, "model.onnx")
    torch.onnx.export(model, ([image],), path, opset_version=opset, input_names=["image"],
                      output_names=keys)
    np.save(os.path.join(d, "image.npy"), image.numpy())
    t0 = time.time()
    r = subprocess.run([chutney, "run", path, "--input", "image=" + os.path.join(d, "image.npy"),
                        "--output-dir", os.path.join(d, "out"), "--threads", "2"],
                       capture_output=True, text=True)
    dt = time.time() - t0
    info = subprocess.run([chutney, "info", path], capture_output=True, text=True).stdout
    if r.returncode != 0 or "runs eagerly" not in info:
        print("FAIL: %s: chutney run exited %d:\n%s%s%s" % (name, r.returncode, r.stdout, r.stderr, info))
        return False
    got = {k: np.load(os.path.join(d, "out", k + ".npy")) for k in keys}
    want = {k: v.numpy() for k, v in want.items()}
    n = len(want["scores"])
    ok = n >= 50 and all(got[k].shape == want[k].shape and got[k].dtype == want[k].dtype for k in keys)
    unmatched = 0
    if ok:
        free = np.ones(n, bool)
        for i in range(n):
            hit = (free & (got["labels"] == want["labels"][i])
                   & (np.abs(got["scores"] - want["scores"][i]) <= 1e-4)
                   & (np.abs(got["boxes"] - want["boxes"][i]).max(1) <= 1e-2))
            j = np.flatnonzero(hit)
            if len(j) == 0:
                unmatched += 1
            else:
                free[j[0]] = False
        ok = unmatched == 0
    print("%s: %s (%d detections, PyTorch's %d; %d of PyTorch's without a match), chutney run %.2f s"
          % ("ok" if ok else "FAIL", name, len(got["scores"]), n, unmatched, dt))
    return ok


def fused_as_expected(chutney, name, path):
    """Does the imported graph hold FUSED[name] fused attention ops, and a
    softmax exactly when none is fused?"""
    if name not in FUSED:
        return True
    r = subprocess.run([chutney, "graph", path, "--text"], capture_output=True, text=True)
    steps = r.stdout.lower()
    fused, softmax = steps.count("scaled_dot_product_attention"), steps.count("softmax")
    if r.returncode == 0 and fused == FUSED[name] and (softmax == 0) == (fused > 0):
        return True
    print("FAIL: %s: the graph has %d fused attention ops (expected %d) and %d softmax ops "
          "(chutney graph exited %d)" % (name, fused, FUSED[name], softmax, r.returncode))
    return False


def gelu_as_expected(chutney, name, path):
    """Does the imported graph hold GELU[name] gelu ops, and the erf and
    tanh ops left over?"""
    if name not in GELU:
        return True
    r = subprocess.run([chutney, "graph", path, "--text"], capture_output=True, text=True)
    got = tuple(r.stdout.count("= %s(" % op) for op in ("gelu", "erf", "tanh"))
    if r.returncode == 0 and got == GELU[name]:
        return True
    print("FAIL: %s: the graph has (gelu, erf, tanh) ops %s (expected %s; chutney graph exited %d)"
          % (name, got, GELU[name], r.returncode))
    return False


def randomize_norms(model):
    """Random BatchNorm statistics and affine parameters: with the defaults
    (mean 0, var 1, weight 1, bias 0) a wrong BatchNormalization would go
    unnoticed."""
    import torch
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(0.1 * torch.randn(c))
            m.running_var.copy_(0.5 + torch.rand(c))
            m.weight.data.copy_(0.5 + 0.5 * torch.rand(c))
            m.bias.data.copy_(0.1 * torch.randn(c))
    return model


def resnet18():
    import torch
    import torchvision
    return randomize_norms(torchvision.models.resnet18()), [torch.randn(1, 3, 224, 224)]


def mobilenet_v2():
    import torch
    import torchvision
    return randomize_norms(torchvision.models.mobilenet_v2()), [torch.randn(2, 3, 224, 224)]


def lstm_classifier():
    import torch

    class LSTMClassifier(torch.nn.Module):
        """Embedding, a 2-layer bidirectional LSTM, a linear head on the last step."""

        def __init__(self, vocab=100, emb=32, hidden=48, classes=5):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, emb)
            self.lstm = torch.nn.LSTM(emb, hidden, num_layers=2, batch_first=True, bidirectional=True)
            self.head = torch.nn.Linear(2 * hidden, classes)

        def forward(self, tokens):
            y, _ = self.lstm(self.emb(tokens))
            return torch.log_softmax(self.head(y[:, -1]), dim=-1)

    return LSTMClassifier(), [torch.randint(0, 100, (3, 12), dtype=torch.int64)]


def transformer_block():
    import torch

    class Block(torch.nn.Module):
        """A pre-norm transformer encoder block written out (attention with
        a causal mask, GELU feed-forward), so the export does not depend on
        nn.TransformerEncoderLayer's fused inference path."""

        def __init__(self, d=64, heads=4, ff=128):
            super().__init__()
            self.d, self.h = d, heads
            self.ln1 = torch.nn.LayerNorm(d)
            self.ln2 = torch.nn.LayerNorm(d)
            self.qkv = torch.nn.Linear(d, 3 * d)
            self.proj = torch.nn.Linear(d, d)
            self.ff1 = torch.nn.Linear(d, ff)
            self.ff2 = torch.nn.Linear(ff, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q = q.reshape(b, t, self.h, d // self.h).transpose(1, 2)
            k = k.reshape(b, t, self.h, d // self.h).transpose(1, 2)
            v = v.reshape(b, t, self.h, d // self.h).transpose(1, 2)
            att = q @ k.transpose(-2, -1) / (d // self.h) ** 0.5
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
            att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(y)
            return x + self.ff2(torch.nn.functional.gelu(self.ff1(self.ln2(x))))

    return Block(), [torch.randn(2, 10, 64)]


def gelu_forms():
    """GELU as exporters write it: F.gelu's erf form and tanh form, the
    same written out as Hugging Face's code does (other orders, x^3 as a
    Pow, 1/sqrt(2) as a Mul; the exporter shares h * 0.5 between them), and
    three near misses that must stay as they are (another divisor; 1 + erf
    also read elsewhere; a divisor of rank 4, which makes the result rank 4
    where gelu(h) would be rank 3)."""
    import math
    import torch

    class Forms(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(16, 24)

        def forward(self, x):
            h = self.lin(x) * 3
            f = torch.nn.functional
            g = h + 1
            e = 1 + torch.erf(g / math.sqrt(2.0))
            return torch.cat([
                f.gelu(h),
                h * 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0))),
                0.5 * h * (1 + torch.erf(h * 0.7071067811865476)),
                f.gelu(h, approximate="tanh"),
                0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0)))),
                h * 0.5 * (1.0 + torch.erf(h / 1.5)),
                g * 0.5 * e + e,
                (h * 0.5 * (1.0 + torch.erf(h / torch.full((1, 1, 1, 1), math.sqrt(2.0))))).squeeze(0),
            ], -1)

    return Forms(), [torch.randn(3, 5, 16)]


def torch_encoder_layer():
    import torch
    layer = torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
    return layer, [torch.randn(2, 10, 64)]


def mha(need_weights):
    """nn.MultiheadAttention, 130 positions, a float mask: PyTorch 1.13 writes q /
    sqrt(E), MatMul with a Transpose of k, baddbmm's Mul by 1 and Add of
    the mask, Softmax, MatMul. With need_weights the softmax has a second
    reader (the averaged weights), so the ops must stay as they are."""
    import torch

    class MHA(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, x, mask):
            y, w = self.attn(x, x, x, attn_mask=mask, need_weights=need_weights)
            return y if w is None else y + w.sum(-1, keepdim=True)

    return MHA(), [torch.randn(2, 130, 32), torch.randn(130, 130)]


def sdpa_scaled():
    """Attention as PyTorch 2 exports F.scaled_dot_product_attention:
    sqrt(scale) applied to q and to k^T apart, the float mask added; k has
    more positions than q, v another width."""
    import torch

    class SDPA(torch.nn.Module):
        def forward(self, q, k, v, mask):
            s = 0.3 ** 0.5
            return ((q * s) @ (k.transpose(-2, -1) * s) + mask).softmax(-1) @ v

    return SDPA(), [torch.randn(2, 3, 5, 8), torch.randn(2, 3, 130, 8), torch.randn(2, 3, 130, 7),
                    torch.randn(5, 130)]


def causal_attention():
    """Hand-written causal attention (masked_fill: a Where with -inf)."""
    import torch

    class Causal(torch.nn.Module):
        def forward(self, q, k, v):
            t = q.shape[-2]
            s = q @ k.transpose(-2, -1) / 8 ** 0.5
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
            return s.masked_fill(mask, float("-inf")).softmax(-1) @ v

    return Causal(), [torch.randn(1, 2, 130, 8) for _ in range(3)]


def spatial_transformer():
    """A spatial transformer (PyTorch's tutorial network): a localisation
    CNN predicts an affine map, whose grid samples the input four ways
    (bilinear with zeros outside, nearest with the border repeated,
    bilinear reflected with align_corners, bicubic reflected). Debian's PyTorch does not
    export affine_grid, so the grid is its product written out."""
    import torch
    import torch.nn.functional as F

    class STN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.loc = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 7), torch.nn.MaxPool2d(2), torch.nn.ReLU(),
                                           torch.nn.Conv2d(8, 10, 5), torch.nn.MaxPool2d(2), torch.nn.ReLU())
            self.fc = torch.nn.Sequential(torch.nn.Linear(90, 32), torch.nn.ReLU(), torch.nn.Linear(32, 6))
            # Starts near the identity, as the tutorial's, but not at it.
            with torch.no_grad():
                self.fc[2].bias.copy_(torch.tensor([1.1, 0.2, 0.1, -0.3, 0.9, -0.2]))
            ys, xs = torch.meshgrid(torch.linspace(-1, 1, 28), torch.linspace(-1, 1, 28), indexing="ij")
            self.register_buffer("base", torch.stack([xs, ys, torch.ones_like(xs)], -1).view(1, 784, 3))

        def forward(self, x):
            theta = self.fc(self.loc(x).flatten(1)).view(-1, 2, 3) * 1.5
            g = torch.matmul(self.base, theta.transpose(1, 2)).view(-1, 28, 28, 2)
            return (F.grid_sample(x, g, align_corners=False)
                    + F.grid_sample(x, g, mode="nearest", padding_mode="border", align_corners=False)
                    + F.grid_sample(x, g, padding_mode="reflection", align_corners=True)
                    + F.grid_sample(x, g, mode="bicubic", padding_mode="reflection", align_corners=False))

    return STN(), [torch.randn(3, 1, 28, 28)]


# (name, builder, opset, symbolic batch, BatchNormalization kept): the
# opsets spread over 13..17.
MODELS = [
    ("resnet18", resnet18, 13, False, True),
    ("mobilenet_v2", mobilenet_v2, 14, True, False),
    ("lstm_classifier", lstm_classifier, 15, True, False),
    ("transformer_block", transformer_block, 17, True, False),
    ("torch_encoder_layer", torch_encoder_layer, 16, False, False),
    ("gelu_forms", gelu_forms, 17, True, False),
    ("spatial_transformer", spatial_transformer, 16, False, False),
]
ATTENTION = [
    ("mha_attention", lambda: mha(False), 17, False, False),
    ("mha_weights", lambda: mha(True), 17, False, False),
    ("sdpa_scaled", sdpa_scaled, 14, False, False),
    ("causal_attention", causal_attention, 17, False, False),
]
# The fused attention ops each imported graph must hold (a softmax is left
# exactly when there are none): none with 10 keys (too few to gain) or
# when the softmax has another reader.
FUSED = {"transformer_block": 0, "torch_encoder_layer": 0, "mha_attention": 1, "mha_weights": 0,
         "sdpa_scaled": 1, "causal_attention": 1, "sdpa_torch2_export": 1}
# torchvision's detectors with their post-processing: (name, constructor,
# opset, its keywords). Five classes keep the export quick; Faster R-CNN
# keeps every box (no score threshold) so that its RoiAlign heads decide
# them. Debian's torchvision (0.14) writes RoiAlign for opset 10's
# coordinates whatever the opset, and from opset 16 on that node means
# half-pixel coordinates (ONNX Runtime computes other values than PyTorch
# there too), so Faster R-CNN is exported at opset 15.
DETECTION = [
    ("ssdlite", "ssdlite320_mobilenet_v3_large", 17, {}),
    ("fasterrcnn_mobilenet", "fasterrcnn_mobilenet_v3_large_320_fpn", 15, {"box_score_thresh": 0.0}),
]
# Models written with onnx.helper: (name, builder).
WRITTEN = [("sdpa_torch2_export", sdpa_torch2_export)]

# The (gelu, erf, tanh) ops each imported graph must hold: every GELU
# written out is one gelu op, the near misses keep their erf.
GELU = {"transformer_block": (1, 0, 0), "torch_encoder_layer": (0, 0, 0), "gelu_forms": (5, 3, 0)}

if __name__ == "__main__":
    sys.exit(main())
