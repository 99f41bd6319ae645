"""The models of the inference benchmark and the peers that run them; run by
bench/bench_infer.py, one process per figure, under whichever Python has
the framework (Debian's /usr/bin/python3 for PyTorch 1.13, the bench
virtual environment for PyTorch 2 and ONNX Runtime).

    python3 bench/infer_peer.py export DIR MODEL BATCHES
    python3 bench/infer_peer.py run FRAMEWORK DIR MODEL BATCH THREADS RUNS OUT [bf16]

`export` builds MODEL with random weights (seed 0, eval) and writes DIR/
MODEL.pt (the state dict; BatchNorm statistics from a random batch),
MODEL.onnx (opset 17, symbolic batch), the
inputs DIR/MODEL_input_B.npy and DIR/MODEL.rev (its REVISIONS number). Debian's PyTorch 1.13 exports: Chutney's
importer reads opsets 6 to 17, and PyTorch 2's exporter writes 18 and up.

`run` times RUNS forward passes after the warm-up and prints one JSON line:
the median in ms, every run, and the seconds the first call took (for
torch.compile, the compilation; for ONNX Runtime, the session's
creation and graph optimisation); the first output goes to OUT (.npy). FRAMEWORK is torch (eager), compile
(torch.compile, default mode) or ort (CPU execution provider, every graph
optimisation, THREADS intra-op threads, one inter-op thread). With bf16
the PyTorch rows run under torch.autocast(device_type="cpu",
dtype=torch.bfloat16), as `chutney run --precision bf16` does; ONNX
Runtime has no such mode and refuses."""
import json
import os
import sys
import time
import warnings

SEQ = 128  # the encoder's sequence length
VOCAB = 30522  # BERT-base's
# A model's definition changed since files exported from it: bench_infer.py
# exports again where DIR/MODEL.rev holds another number (or none).
# bert 2: a layer's own weights in every layer.
REVISIONS = {"bert": 2}


def build(name):
    import torch
    import torch.nn as nn
    import torchvision

    if name == "bert":
        class Encoder(nn.Module):
            """BERT-base's shape: 12 post-norm layers, width 768, 12 heads,
            GELU feed-forward of 3072, token and position embeddings."""

            def __init__(self):
                super().__init__()
                self.tok = nn.Embedding(VOCAB, 768)
                self.pos = nn.Parameter(torch.randn(1, SEQ, 768) * 0.02)
                self.norm = nn.LayerNorm(768)
                def layer():
                    return nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0,
                                                      activation="gelu", batch_first=True)
                self.enc = nn.TransformerEncoder(layer(), 12, enable_nested_tensor=False)
                # Each layer initialised on its own, as a trained BERT's
                # differ: TransformerEncoder deep-copies the one it is given,
                # and the exporter then stores those twelve equal layers'
                # weights once, 28 MB read by every layer instead of 340 MB
                # streamed from memory.
                self.enc.layers = nn.ModuleList(layer() for _ in range(12))

            def forward(self, ids):
                return self.enc(self.norm(self.tok(ids) + self.pos))

        return Encoder()
    return getattr(torchvision.models, name)()


def example(name, batch):
    import torch
    if name == "bert":
        return torch.randint(0, VOCAB, (batch, SEQ))
    return torch.randn(batch, 3, 224, 224)


def calibrate(m, x):
    """BatchNorm statistics of a random batch. With the initial ones (mean 0,
    variance 1) activations shrink layer after layer towards denormal floats,
    which cost some CPUs and frameworks far more than others."""
    import torch
    bns = [x for x in m.modules() if isinstance(x, torch.nn.modules.batchnorm._BatchNorm)]
    for bn in bns:
        bn.momentum = 1.0
    if bns:
        with torch.no_grad():
            m.train()(x)
    return m.eval()


def export(d, name, batches):
    import numpy as np
    import torch
    torch.manual_seed(0)
    m = calibrate(build(name), example(name, 8))
    torch.save(m.state_dict(), os.path.join(d, name + ".pt"))
    x = example(name, max(batches))
    # With gradients on, so that nn.TransformerEncoderLayer takes its traceable
    # path, not the fused inference kernel, which has no ONNX export.
    torch.onnx.export(m, x[:1], os.path.join(d, name + ".onnx"), opset_version=17,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    for b in batches:
        np.save(os.path.join(d, "%s_input_%d.npy" % (name, b)), x[:b].numpy())
    with open(os.path.join(d, name + ".rev"), "w") as f:
        f.write("%d\n" % REVISIONS.get(name, 1))


def run(fw, d, name, b, t, n, out, precision="f32"):
    import numpy as np
    x = np.load(os.path.join(d, "%s_input_%d.npy" % (name, b)))
    t0 = time.perf_counter()
    if fw == "ort" and precision != "f32":
        sys.exit("infer_peer: ONNX Runtime has no %s autocast" % precision)
    if fw == "ort":
        import onnxruntime as ort
        o = ort.SessionOptions()
        o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        o.intra_op_num_threads = t
        o.inter_op_num_threads = 1
        o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        s = ort.InferenceSession(os.path.join(d, name + ".onnx"), o,
                                 providers=["CPUExecutionProvider"])
        feed = {"input": x}

        def call():
            return s.run(None, feed)[0]
        version = "onnxruntime " + ort.__version__
    else:
        import torch
        torch.set_num_threads(t)
        torch.set_num_interop_threads(1)
        m = build(name).eval()
        m.load_state_dict(torch.load(os.path.join(d, name + ".pt")))
        if fw == "compile":
            m = torch.compile(m)
        xt = torch.from_numpy(x)
        cast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")

        def call():
            with torch.no_grad(), cast:
                return m(xt).float().numpy()
        version = "pytorch " + torch.__version__
    y = call()
    first = time.perf_counter() - t0
    call()
    ts = []
    for _ in range(n):
        t1 = time.perf_counter()
        call()
        ts.append(1e3 * (time.perf_counter() - t1))
    np.save(out, y)
    print(json.dumps({"median_ms": sorted(ts)[n // 2], "runs_ms": ts, "first_call_s": first,
                      "framework": version}))


def main():
    warnings.filterwarnings("ignore")
    a = sys.argv[1:]
    if len(a) == 4 and a[0] == "export":
        export(a[1], a[2], [int(x) for x in a[3].split(",")])
    elif len(a) in (8, 9) and a[0] == "run" and a[1] in ("torch", "compile", "ort") and \
            a[8:] in ([], ["f32"], ["bf16"]):
        run(a[1], a[2], a[3], int(a[4]), int(a[5]), int(a[6]), a[7], *a[8:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
