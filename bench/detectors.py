"""Object detectors, post-processing included, against ONNX Runtime.

torchvision's detectors end in NonZero, TopK, NonMaxSuppression (and
RoiAlign, Loop): their shapes depend on values, so Chutney runs them
eagerly (docs/onnx.md, "Shapes that depend on values"). Each model here is
torchvision's with 91 classes and random weights (seed 0; the BatchNorm
statistics measured on four random images, so that the scores are not all
tied; no score threshold, so that every stage has boxes to work on), on a
3x320x320 image (the ResNet-50 models with min_size=max_size=320 instead
of their 800), exported with torch.onnx.export (opset 17). Chutney (`chutney
run --bench N --threads T`) and ONNX Runtime (CPU provider, all graph
optimisations, intra-op threads T, the median of N runs after one) take
turns on each model and thread count, the order swapped every repeat; the
table gives the medians over the repeats and Chutney / ONNX Runtime. The
detections are compared too: how many of ONNX Runtime's have a match
among Chutney's (label, score within 1e-4, box within 1e-2).

    build/bench-venv/bin/python bench/detectors.py --chutney build/chutney \\
        [--models ssdlite,...] [--threads 1,2] [--repeats 3] [--runs 5] [--out FILE.json]

Needs torch, torchvision and onnxruntime (sh bench/setup-venv.sh build/bench-venv)."""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "onnx"))
from detector_stats import calibrate_batch_norm  # noqa: E402  (shared with real_models.py)

MODELS = {
    # name: (torchvision constructor, keywords)
    "ssdlite": ("ssdlite320_mobilenet_v3_large", {}),
    "fasterrcnn_mobilenet": ("fasterrcnn_mobilenet_v3_large_320_fpn", {"box_score_thresh": 0.0}),
    "retinanet": ("retinanet_resnet50_fpn", {"score_thresh": 0.0, "min_size": 320, "max_size": 320}),
    "fcos": ("fcos_resnet50_fpn", {"score_thresh": 0.0, "min_size": 320, "max_size": 320}),
    "maskrcnn": ("maskrcnn_resnet50_fpn", {"box_score_thresh": 0.0, "min_size": 320, "max_size": 320}),
    "keypointrcnn": ("keypointrcnn_resnet50_fpn",
                     {"box_score_thresh": 0.0, "min_size": 320, "max_size": 320}),
}


def export(name, d):
    import numpy as np
    import torch
    import torchvision

    tv, kw = MODELS[name]
    path = os.path.join(d, name + ".onnx")
    image = os.path.join(d, name + ".npy")
    if os.path.exists(path) and os.path.exists(image):
        return path, image
    torch.manual_seed(0)
    model = getattr(torchvision.models.detection, tv)(weights=None, weights_backbone=None, **kw)
    calibrate_batch_norm(model, tv)
    img = torch.rand(3, 320, 320)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, ([img],), path + ".tmp", opset_version=17, input_names=["image"],
                          dynamo=False)
    os.replace(path + ".tmp", path)
    np.save(image, img.numpy())
    return path, image


def chutney_run(chutney, path, image, threads, runs, outdir):
    r = subprocess.run([chutney, "run", path, "--input", "image=" + image, "--output-dir", outdir,
                        "--threads", str(threads), "--bench", str(runs)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("chutney run %s: %s%s" % (path, r.stdout[-2000:], r.stderr[-2000:]))
    for line in r.stdout.splitlines():
        if line.startswith("bench:"):
            return float(line.split("median ")[1].split(" ms")[0])
    raise RuntimeError("no bench line from chutney run:\n" + r.stdout)


def ort_session(path, threads):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_run(sess, image, runs):
    import numpy as np

    feed = {"image": np.load(image)}
    out = sess.run(None, feed)
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feed)
        t.append(1e3 * (time.perf_counter() - t0))
    return sorted(t)[len(t) // 2], out


def matched(sess, ort_out, outdir):
    """ONNX Runtime's detections with a match among Chutney's."""
    import numpy as np

    names = [o.name for o in sess.get_outputs()]
    got = [np.load(os.path.join(outdir, "".join(ch if ch.isalnum() or ch in "_-." else "_" for ch in n)
                                + ".npy")) for n in names]
    # boxes, then labels and scores in either order
    bi = 0
    si = next(i for i in (1, 2) if ort_out[i].dtype.kind == "f")
    li = 3 - si
    b, s, lab = ort_out[bi], ort_out[si], ort_out[li]
    gb, gs, gl = got[bi], got[si], got[li]
    free = np.ones(len(gs), bool)
    hit = 0
    for i in range(len(s)):
        j = np.flatnonzero(free & (gl == lab[i]) & (np.abs(gs - s[i]) <= 1e-4)
                           & (np.abs(gb - b[i]).max(1, initial=0) <= 1e-2))
        if len(j):
            free[j[0]] = False
            hit += 1
    return hit, len(s), len(gs)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chutney", default="build/chutney")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--dir", default="build/bench-models/detectors")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    import onnxruntime
    import torch
    import torchvision

    os.makedirs(a.dir, exist_ok=True)
    models = a.models.split(",")
    threads = [int(t) for t in a.threads.split(",")]
    files = {}
    for m in models:
        print("exporting %s" % m, file=sys.stderr)
        files[m] = export(m, a.dir)
    res = {(m, t): {"chutney": [], "ort": [], "match": None} for m in models for t in threads}
    for r in range(a.repeats):
        for m in models:
            path, image = files[m]
            for t in threads:
                sess = ort_session(path, t)
                outdir = os.path.join(a.dir, "out_" + m)
                order = ("chutney", "ort") if r % 2 == 0 else ("ort", "chutney")
                for who in order:
                    if who == "chutney":
                        res[(m, t)]["chutney"].append(chutney_run(a.chutney, path, image, t, a.runs, outdir))
                    else:
                        ms, out = ort_run(sess, image, a.runs)
                        res[(m, t)]["ort"].append(ms)
                if res[(m, t)]["match"] is None:
                    res[(m, t)]["match"] = matched(sess, out, outdir)
                print("repeat %d %s %d thr: chutney %.1f ms, ort %.1f ms" % (
                    r, m, t, res[(m, t)]["chutney"][-1], res[(m, t)]["ort"][-1]), file=sys.stderr)

    def med(v):
        v = sorted(v)
        return v[len(v) // 2]

    print("| model | threads | Chutney ms | ONNX Runtime ms | Chutney / ORT | detections matched |")
    print("|---|---|---|---|---|---|")
    rows = []
    for m in models:
        for t in threads:
            x = res[(m, t)]
            c, o = med(x["chutney"]), med(x["ort"])
            hit, n, ng = x["match"]
            print("| %s | %d | %.1f | %.1f | %.2f | %d of %d (Chutney %d) |" % (m, t, c, o, c / o, hit, n, ng))
            rows.append({"model": m, "threads": t, "chutney_ms": x["chutney"], "ort_ms": x["ort"],
                         "chutney_median_ms": c, "ort_median_ms": o, "ratio": c / o,
                         "matched": hit, "ort_detections": n, "chutney_detections": ng})
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"rows": rows, "machine": platform.processor() or platform.machine(),
                       "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                                    "onnxruntime": onnxruntime.__version__},
                       "runs": a.runs, "repeats": a.repeats}, f, indent=1)


if __name__ == "__main__":
    main()
