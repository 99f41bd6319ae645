"""ResNet-18 inference latency: Chutney (`chutney run --bench`) against
PyTorch on the same model, batch 1 and 16, at 1 and 2 threads.

    /usr/bin/python3 bench/bench_resnet.py [--build DIR] [--repeats R] [--runs N]
        [--batches 1,16] [--threads 1,2] [--json]

One PyTorch process writes torchvision's resnet18 (random weights, seed 0,
eval) as a state dict and as ONNX (opset 13, symbolic batch), and the
inputs as .npy. Then, per repeat, every (batch, threads) pair runs once in
each framework, each a fresh process timing N forward passes after one
warm-up pass and reporting their median: `chutney run --bench N --threads T`
and a PyTorch process that loads the same weights (torch.no_grad, T intra-op
threads, one inter-op thread). The order of the two flips every repeat. The
figure is the median over repeats of those medians, in ms. Both get
OMP_WAIT_POLICY=PASSIVE and OMP_NUM_THREADS=T; PyTorch's OpenBLAS gets
OPENBLAS_NUM_THREADS=1 (its convolutions are its own, mkldnn or THNN).

Prints a table; --json prints one JSON line last (bench/run.py reads it)."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

PY = "/usr/bin/python3"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SETUP = r"""
import sys, warnings
warnings.filterwarnings("ignore")
import numpy as np, torch, torchvision
d, batches = sys.argv[1], [int(b) for b in sys.argv[2].split(",")]
torch.manual_seed(0)
m = torchvision.models.resnet18().eval()
torch.save(m.state_dict(), d + "/resnet18.pt")
x = torch.randn(max(batches), 3, 224, 224)
torch.onnx.export(m, x[:1], d + "/resnet18.onnx", opset_version=13, input_names=["input"],
                  output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
for b in batches:
    np.save("%s/input_%d.npy" % (d, b), x[:b].numpy())
"""

TORCH_RUN = r"""
import sys, time, warnings
warnings.filterwarnings("ignore")
d, b, t, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
import numpy as np, torch, torchvision
torch.set_num_threads(t)
torch.set_num_interop_threads(1)
m = torchvision.models.resnet18().eval()
m.load_state_dict(torch.load(d + "/resnet18.pt"))
x = torch.from_numpy(np.load("%s/input_%d.npy" % (d, b)))
ts = []
with torch.no_grad():
    y = m(x)
    for _ in range(n):
        t0 = time.perf_counter()
        m(x)
        ts.append(time.perf_counter() - t0)
ts.sort()
np.save("%s/torch_out_%d.npy" % (d, b), y.numpy())
print("median_ms %.4f" % (1e3 * ts[n // 2]))
"""


def env_for(t):
    e = dict(os.environ)
    e.update({"OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": str(t), "OPENBLAS_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"})
    return e


def run(argv, env, what):
    p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    if p.returncode != 0:
        sys.exit("bench_resnet: %s failed (exit %d):\n%s%s" % (what, p.returncode, p.stdout[-2000:],
                                                              p.stderr[-2000:]))
    return p.stdout


def chutney_ms(a, d, b, t):
    out = run([a.chutney, "run", d + "/resnet18.onnx", "--input", "input=%s/input_%d.npy" % (d, b),
               "--output-dir", "%s/out_%d" % (d, b), "--threads", str(t), "--bench", str(a.runs)],
              env_for(t), "chutney run (batch %d, %d threads)" % (b, t))
    m = re.search(r"median ([0-9.]+) ms", out)
    if not m:
        sys.exit("bench_resnet: no median in chutney's output:\n" + out)
    return float(m.group(1))


def torch_ms(a, d, b, t):
    out = run([PY, "-c", TORCH_RUN, d, str(b), str(t), str(a.runs)], env_for(t),
              "PyTorch (batch %d, %d threads)" % (b, t))
    return float(re.search(r"median_ms ([0-9.]+)", out).group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--runs", type=int, default=0, help="timed runs per process (default 20 at "
                   "batch 1, 5 at batch 16)")
    p.add_argument("--batches", default="1,16")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    a.chutney = os.path.join(os.path.abspath(os.path.join(ROOT, a.build)), "chutney")
    batches = [int(x) for x in a.batches.split(",") if x]
    threads = [int(x) for x in a.threads.split(",") if x]
    if not os.access(a.chutney, os.X_OK):
        sys.exit("bench_resnet: no %s: build first (make)" % a.chutney)
    fixed_runs = a.runs
    import numpy as np  # after the checks: only the comparison needs it

    with tempfile.TemporaryDirectory(prefix="chutney-resnet-") as d:
        run([PY, "-c", SETUP, d, ",".join(map(str, batches))], env_for(1), "the export")
        res = {}
        for r in range(a.repeats):
            for b in batches:
                a.runs = fixed_runs or (20 if b == 1 else 5)
                for t in threads:
                    jobs = [("chutney", chutney_ms), ("torch", torch_ms)]
                    if r % 2:
                        jobs.reverse()
                    line = []
                    for who, f in jobs:
                        ms = f(a, d, b, t)
                        res.setdefault((b, t, who), []).append(ms)
                        line.append("%s %.1f ms" % (who, ms))
                    print("[%d/%d] batch %2d, %d thr: %s" % (r + 1, a.repeats, b, t, ", ".join(line)),
                          file=sys.stderr, flush=True)
        # The two ran the same weights on the same input: say how close they came.
        diff = {b: float(np.abs(np.load("%s/out_%d/output.npy" % (d, b)) -
                                np.load("%s/torch_out_%d.npy" % (d, b))).max()) for b in batches}
    rows = []
    for b in batches:
        for t in threads:
            c, q = statistics.median(res[(b, t, "chutney")]), statistics.median(res[(b, t, "torch")])
            rows.append({"batch": b, "threads": t, "chutney_ms": c, "torch_ms": q, "ratio": c / q,
                         "chutney_runs": res[(b, t, "chutney")], "torch_runs": res[(b, t, "torch")],
                         "max_abs_diff": diff[b]})
    print("ResNet-18 inference latency, ms (median of %d processes' medians); "
          "ratio = Chutney / PyTorch" % a.repeats)
    print("batch  threads  Chutney  PyTorch  ratio  max |diff|")
    for w in rows:
        print("%5d  %7d  %7.1f  %7.1f  %5.2f  %.1e" % (w["batch"], w["threads"], w["chutney_ms"],
                                                      w["torch_ms"], w["ratio"], w["max_abs_diff"]))
    if a.json:
        print(json.dumps({"repeats": a.repeats, "rows": rows}))


if __name__ == "__main__":
    main()
