"""torchvision's classification and segmentation models exported by the
TorchScript exporter at older opsets (9, 11, 13 by default) with a dynamic
batch, run by `chutney run` and by ONNX Runtime on a batch of 2: one line
per model and opset with the largest difference relative to the output's
largest value, or why it failed. Not part of `make check` (it needs
build/bench-venv, docs/onnx.md "Sweeps").

    build/bench-venv/bin/python tests/onnx/opset_sweep.py CHUTNEY OUT_DIR [OPSETS]
"""
import sys, os, re, subprocess, warnings
import numpy as np, torch, onnxruntime as ort, torchvision.models as M
warnings.filterwarnings("ignore")
torch.manual_seed(0)
if len(sys.argv) < 3:
    sys.exit(__doc__)
CN, OUT = sys.argv[1], sys.argv[2]
names = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_0", "googlenet", "inception_v3", "densenet121", "shufflenet_v2_x1_0", "mnasnet0_5", "vgg11", "alexnet", "regnet_y_400mf", "convnext_tiny", "vit_b_16", "swin_t"]
segs = ["fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]
for opset in [int(o) for o in (sys.argv[3] if len(sys.argv) > 3 else "9,11,13").split(",")]:
    for n in names + segs:
        d = f"{OUT}/{n}_{opset}"; os.makedirs(d, exist_ok=True); f = d + "/m.onnx"
        import torchvision.models.segmentation as S
        ctor = getattr(M, n, None) or getattr(S, n)
        kw = {"aux_loss": False, "weights_backbone": None} if n in segs else {}
        if n == "googlenet" or n == "inception_v3": kw = {"aux_logits": False, "init_weights": False}
        m = ctor(weights=None, **kw).eval()
        size = 299 if n == "inception_v3" else 224
        x = torch.randn(2, 3, size, size)
        try:
            with torch.no_grad():
                torch.onnx.export(m, x, f, opset_version=opset, dynamo=False, input_names=["x"], dynamic_axes={"x": {0: "b"}})
        except Exception as e:
            print(n, opset, "EXPORT-FAIL", str(e).splitlines()[0][:100]); continue
        try:
            s = ort.InferenceSession(f, providers=["CPUExecutionProvider"]); ref = s.run(None, {"x": x.numpy()})[0]
        except Exception as e:
            print(n, opset, "ORT-FAIL", str(e)[:100]); continue
        np.save(d + "/x.npy", x.numpy())
        r = subprocess.run([CN, "run", f, "--input", f"x={d}/x.npy", "--output-dir", d + "/out"], capture_output=True, text=True)
        if r.returncode: print(n, opset, "CN-FAIL", r.stderr.strip()[-200:]); continue
        o = s.get_outputs()[0].name
        c = np.load(d + "/out/" + re.sub(r"[^A-Za-z0-9._-]", "_", o) + ".npy")
        print(n, opset, "ok %.2e" % (np.abs(c - ref).max() / max(1e-6, np.abs(ref).max())), flush=True)
