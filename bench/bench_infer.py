"""Inference latency of real architectures: Chutney (`chutney run --bench`,
the exported ONNX file through its importer and static program) against
PyTorch 1.13 (Debian), PyTorch 2 eager, PyTorch 2 with torch.compile and
ONNX Runtime, on the same weights and input, interleaved.

    /usr/bin/python3 bench/bench_infer.py [--build DIR] [--models resnet18,bert]
        [--batches 1,16] [--threads 1,2] [--repeats R] [--runs N]
        [--peers torch1,torch2,compile,ort] [--venv DIR] [--precision bf16] [--json]

Models (bench/infer_peer.py builds them, random weights, seed 0, eval):
torchvision's resnet18, resnet50, mobilenet_v2, mobilenet_v3_large,
efficientnet_b0, convnext_tiny, regnet_y_400mf, densenet121, vit_b_16, and
bert, a BERT-base-sized encoder (12 layers, width 768, sequence 128).
Each is exported once (Debian's PyTorch 1.13, ONNX opset 17, symbolic
batch) into build/bench-models/ and kept there for later runs.

Per repeat, every (model, batch, threads) runs once in each framework, each
a fresh process timing N forward passes after a warm-up and reporting their
median; the order of the frameworks rotates every repeat. The figure is the
median over repeats of those medians, in ms; the spread is half the range
of the repeats' medians, as a fraction of the figure. Every process gets
OMP_WAIT_POLICY=PASSIVE and OMP_NUM_THREADS=T (OpenBLAS 1 thread: PyTorch
1.13's convolutions are its own); PyTorch sets T intra-op threads and one
inter-op thread, ONNX Runtime T intra-op threads, sequential execution,
every graph optimisation. The first call of a process is timed apart
(torch.compile's compilation, ONNX Runtime's session set-up) and left out
of the figure; torch.compile's compiled code is cached per (model, batch,
threads) under build/bench-inductor/, so only a first run compiles cold.

--precision bf16: Chutney runs `chutney run --precision bf16` (autocast:
the products in bf16), the PyTorch rows their forward pass under
torch.autocast(device_type="cpu", dtype=torch.bfloat16); ONNX Runtime has
no such mode (its rows say so).

A peer that fails on a model (an export it cannot read, a compile error)
leaves its cell empty with the error's last line; the others go on.
Prints a table and the geometric mean over models of each ratio; --json
prints one JSON line last (bench/run.py reads it)."""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

PY = "/usr/bin/python3"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER_PY = os.path.join(ROOT, "bench", "infer_peer.py")
sys.path.insert(0, os.path.dirname(PEER_PY))
import infer_peer  # noqa: E402  (its REVISIONS only: torch is imported inside its functions)
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
          "convnext_tiny", "regnet_y_400mf", "densenet121", "vit_b_16", "bert"]
# key: (name in tables, runs under the venv?, infer_peer.py's framework)
PEERS = {"torch1": ("pytorch 1.13", False, "torch"), "torch2": ("pytorch 2", True, "torch"),
         "compile": ("pytorch 2 compile", True, "compile"), "ort": ("onnxruntime", True, "ort")}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def env_for(t, extra=None):
    e = dict(os.environ)
    e.update({"OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": str(t), "OPENBLAS_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"})
    e.update(extra or {})
    return e


def run(argv, env):
    """(stdout, None) or (None, the error's last lines)."""
    p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    if p.returncode != 0:
        lines = [x for x in (p.stderr + p.stdout).strip().splitlines() if x.strip()]
        return None, "exit %d: %s" % (p.returncode, " / ".join(lines[-2:])[-300:])
    return p.stdout, None


def export_revision(d, name):
    """The revision of the model definition d's files were exported from:
    the number in MODEL.rev, 1 for files from before there were any."""
    try:
        with open(os.path.join(d, name + ".rev")) as f:
            return int(f.read())
    except FileNotFoundError:
        return 1
    except ValueError:
        return 0


def export(a, name, batches):
    """The model's files in a.models_dir, made when missing; None or the error."""
    d = a.models_dir
    want = [name + ".onnx", name + ".pt"] + ["%s_input_%d.npy" % (name, b) for b in batches]
    if all(os.path.exists(os.path.join(d, f)) for f in want) and export_revision(d, name) == \
            infer_peer.REVISIONS.get(name, 1):
        return None
    log("bench_infer: exporting %s (PyTorch 1.13, opset 17)" % name)
    _, err = run([PY, PEER_PY, "export", d, name, ",".join(map(str, sorted(set(batches) | {1, 16})))],
                 env_for(1))
    return err


def chutney(a, d, name, b, t, runs, out):
    """One `chutney run --bench` process: ({"ms": median}, None) or (None, error)."""
    o, err = run([a.chutney, "run", os.path.join(a.models_dir, name + ".onnx"),
                  "--input", "input=%s/%s_input_%d.npy" % (a.models_dir, name, b),
                  "--output-dir", d, "--threads", str(t), "--bench", str(runs),
                  "--precision", a.precision], env_for(t))
    if err:
        return None, err
    m = re.search(r"median ([0-9.]+) ms", o)
    if not m:
        return None, "no median in chutney's output"
    os.replace(os.path.join(d, "output.npy"), out)
    return {"ms": float(m.group(1))}, None


def cache_name(a, name, b, t):
    """torch.compile's code cache of one row, under a.inductor_dir."""
    return "%s-b%d-t%d%s" % (name, b, t, "" if a.precision == "f32" else "-" + a.precision)


def peer(a, key, name, b, t, runs, out):
    """One infer_peer.py process, as chutney()."""
    _, venv, fw = PEERS[key]
    extra = {}
    if fw == "compile":
        extra["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(a.inductor_dir, cache_name(a, name, b, t))
    o, err = run([a.venv_py if venv else PY, PEER_PY, "run", fw, a.models_dir, name, str(b), str(t),
                  str(runs), out, a.precision], env_for(t, extra))
    if err:
        return None, err
    j = json.loads(o.strip().splitlines()[-1])
    return {"ms": j["median_ms"], "first_call_s": j["first_call_s"], "framework": j["framework"]}, None


def geomean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None


def summarise(res, errors, cold, diffs, models, batches, threads, peers):
    rows = []
    for name in models:
        for b in batches:
            for t in threads:
                k = (name, b, t)
                row = {"model": name, "batch": b, "threads": t}
                for who in ["chutney"] + peers:
                    runs = res.get(k + (who,))
                    label = "chutney" if who == "chutney" else PEERS[who][0]
                    if not runs:
                        cell = {"error": errors.get(k + (who,), errors.get((name, who), "not run"))}
                    else:
                        ms = [r["ms"] for r in runs]
                        med = statistics.median(ms)
                        cell = {"ms": med, "runs": ms, "spread": (max(ms) - min(ms)) / 2 / med}
                        if who != "chutney":
                            cell["framework"] = runs[0]["framework"]
                            cell["first_call_s"] = [r["first_call_s"] for r in runs]
                            cell["max_abs_diff"] = diffs.get(k + (who,))
                            if who == "compile":
                                cell["compile_s"] = runs[0]["first_call_s"]
                                cell["compile_cold"] = cold.get(k, False)
                    row[label] = cell
                c = row["chutney"].get("ms")
                for who in peers:
                    p = row[PEERS[who][0]]
                    if c and p.get("ms"):
                        p["ratio"] = c / p["ms"]
                rows.append(row)
    return rows


def geomeans(ratios):
    """From (batch, threads, peer, Chutney / peer) of every model both ran:
    per (batch, threads, peer) the geometric mean over the models."""
    groups = {}
    for b, t, peer, ratio in ratios:
        groups.setdefault((b, t, peer), []).append(ratio)
    return [{"batch": b, "threads": t, "peer": peer, "geomean_ratio": geomean(r), "models": len(r)}
            for (b, t, peer), r in groups.items()]


def print_table(rows, gm, peers, repeats):
    labels = [PEERS[p][0] for p in peers]
    print("Inference latency, ms (median of %d processes' medians, ± half their range); "
          "ratio = Chutney / peer, < 1 is Chutney faster" % repeats)
    head = ["model", "batch", "thr", "chutney"] + labels
    lines = []
    for r in rows:
        def cell(c, ratio):
            if "ms" not in c:
                return "failed"
            s = "%.1f ±%.0f%%" % (c["ms"], 100 * c["spread"])
            return s + (" (%.2f)" % c["ratio"] if ratio and "ratio" in c else "")
        lines.append([r["model"], str(r["batch"]), str(r["threads"]), cell(r["chutney"], False)] +
                     [cell(r[x], True) for x in labels])
    width = [max(len(x[i]) for x in [head] + lines) for i in range(len(head))]
    for x in [head] + lines:
        print("  ".join(c.ljust(width[i]) for i, c in enumerate(x)).rstrip())
    for r in rows:
        for x in ["chutney"] + labels:
            if "error" in r[x]:
                print("%s batch %d, %d thr, %s failed: %s" % (r["model"], r["batch"], r["threads"],
                                                              x, r[x]["error"]))
    print("geometric mean of Chutney / peer over models:")
    for g in gm:
        print("  batch %d, %d thr, %-18s %.2f (%d models)" % (g["batch"], g["threads"], g["peer"],
                                                         g["geomean_ratio"], g["models"]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--runs", type=int, default=0, help="timed runs per process (default 10 at "
                   "batch 1, 3 at larger batches)")
    p.add_argument("--batches", default="1,16")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--peers", default=",".join(PEERS), help="any of " + ",".join(PEERS))
    p.add_argument("--venv", default="", help="PyTorch 2 and ONNX Runtime's virtual environment "
                   "(default BUILD/bench-venv, made by bench/setup-venv.sh)")
    p.add_argument("--precision", default="f32", choices=["f32", "bf16"],
                   help="bf16: autocast on both sides (ONNX Runtime has none)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    split = lambda s: [x for x in re.split(r"[,\s]+", s.strip()) if x]  # noqa: E731
    models, peers = split(a.models), split(a.peers)
    try:
        batches, threads = [int(x) for x in split(a.batches)], [int(x) for x in split(a.threads)]
    except ValueError:
        p.error("--batches and --threads take counts")
    bad = [m for m in models if m not in MODELS] + [x for x in peers if x not in PEERS]
    if bad or not models or not batches or not threads or min(batches + threads) < 1 or a.repeats < 1:
        p.error("models are %s; peers %s; batches, threads and repeats positive counts%s" % (
            ", ".join(MODELS), ", ".join(PEERS), " (not %s)" % ", ".join(bad) if bad else ""))
    build = os.path.abspath(os.path.join(ROOT, a.build))
    a.chutney = os.path.join(build, "chutney")
    a.models_dir = os.path.join(build, "bench-models")
    a.inductor_dir = os.path.join(build, "bench-inductor")
    a.venv_py = os.path.join(os.path.abspath(a.venv) if a.venv else os.path.join(build, "bench-venv"),
                             "bin", "python")
    if not os.access(a.chutney, os.X_OK):
        sys.exit("bench_infer: no %s: build first (make)" % a.chutney)
    if any(PEERS[x][1] for x in peers) and not os.access(a.venv_py, os.X_OK):
        sys.exit("bench_infer: no %s for PyTorch 2 and ONNX Runtime: run sh bench/setup-venv.sh "
                 "(or --peers torch1)" % a.venv_py)
    os.makedirs(a.models_dir, exist_ok=True)
    import numpy as np  # after the checks: only the comparison needs it

    res, errors, cold, diffs = {}, {}, {}, {}
    t_start = time.time()
    with tempfile.TemporaryDirectory(prefix="chutney-infer-") as d:
        for name in list(models):
            err = export(a, name, batches)
            if err:
                for who in ["chutney"] + peers:
                    errors[(name, who)] = "export failed: " + err
        for name in models:
            for b in batches:
                for t in threads:
                    cold[(name, b, t)] = not os.path.isdir(
                        os.path.join(a.inductor_dir, cache_name(a, name, b, t)))
        jobs = ["chutney"] + peers
        for r in range(a.repeats):
            for name in models:
                for b in batches:
                    runs = a.runs or (10 if b == 1 else 3)
                    for t in threads:
                        order = jobs[r % len(jobs):] + jobs[:r % len(jobs)]
                        line = []
                        for who in order:
                            k = (name, b, t, who)
                            if (name, who) in errors or k in errors:
                                continue  # failed before: once is enough
                            out = os.path.join(d, "%s_%s_%d_%d.npy" % (who, name, b, t))
                            if who == "chutney":
                                v, err = chutney(a, d, name, b, t, runs, out)
                            else:
                                v, err = peer(a, who, name, b, t, runs, out)
                            if err:
                                errors[k] = err
                                line.append("%s failed" % who)
                                continue
                            res.setdefault(k, []).append(v)
                            line.append("%s %.1f" % (who, v["ms"]))
                        log("[%d/%d] %s batch %d, %d thr: %s ms" % (r + 1, a.repeats, name, b, t,
                                                                  ", ".join(line)))
        # The same weights and input everywhere: how close each peer came to Chutney.
        for (name, b, t, who) in list(res):
            c = os.path.join(d, "chutney_%s_%d_%d.npy" % (name, b, t))
            if who != "chutney" and os.path.exists(c):
                diffs[(name, b, t, who)] = float(np.abs(
                    np.load(c) - np.load(os.path.join(d, "%s_%s_%d_%d.npy" % (who, name, b, t)))).max())
    rows = summarise(res, errors, cold, diffs, models, batches, threads, peers)
    gm = geomeans((x["batch"], x["threads"], PEERS[who][0], x[PEERS[who][0]]["ratio"])
                  for x in rows for who in peers if "ratio" in x[PEERS[who][0]])
    print_table(rows, gm, peers, a.repeats)
    if a.json:
        print(json.dumps({"repeats": a.repeats, "precision": a.precision,
                          "seconds": round(time.time() - t_start, 1),
                          "rows": rows, "geomean": gm}))


if __name__ == "__main__":
    main()
