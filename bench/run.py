"""`make bench`: Chutney against PyTorch on the benchmark workloads of
docs/benchmarks.md, interleaved, at 1 and 2 threads; prints one table and
writes it as JSON (bench/results/latest.json).

    /usr/bin/python3 bench/run.py [--quick] [--workloads mlp,cnn,...]
        [--repeats N] [--threads 1,2] [--batches N] [--build DIR] [--out FILE]

Workloads: mlp, cnn, lstm (training samples/s: `chutney train --json`
against bench/torch_train.py; where `chutney train` has `--mode static`,
rows "mlp static" etc. time the step as one compiled program too, against
the same PyTorch runs), overhead (bench_overhead: µs per tiny op,
without and with recording), gemm (bench_gemm: cn_matmul against
cblas_sgemm called directly), resnet18 (bench/bench_resnet.py: inference
latency in ms at batch 1 and 16, `chutney run --bench` against PyTorch).

Every training figure is one process, and so is every peak RSS: the driver
takes it from os.wait4 on that process alone. The runs of one repeat go
round all workloads and thread counts, Chutney and PyTorch in turn (the order
flipped every other repeat), so the host's drift falls on both. PyTorch is
run at its best: thread counts set before torch is imported, passive OpenMP
waiting, and at 2 threads both splits of the threads between OpenMP and
OpenBLAS, the split with the higher median reported.

This file imports no torch itself, so its own memory stays out of the
figures; it needs only the Python standard library."""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"
DATA = "/usr/share/datasets/fashion-mnist"
ALL = ["mlp", "cnn", "lstm", "overhead", "gemm", "resnet18"]
TRAIN = {"mlp": 128, "cnn": 64, "lstm": 128}  # batch sizes of the workloads
WARMUP = 20  # batches both trainers leave out of their samples/s
# Timed batches after the warm-up: enough for a stable rate, short enough
# that a full run takes about 20 minutes on 2 quiet cores.
BATCHES = {"mlp": 300, "cnn": 100, "lstm": 100}
QUICK_BATCHES = {"mlp": 100, "cnn": 30, "lstm": 30}
# The targets of issue 7: ratio Chutney / reference of the figure shown.
TARGETS = {"mlp": (">=", 1.5), "lstm": (">=", 1.5), "cnn": (">=", 1.2),
           "overhead": ("<=", 0.1), "gemm": (">=", 0.95),
           "resnet18": ("<=", 1.0)}  # issue 6: latency no slower than PyTorch
RSS_TARGET = 1 / 3  # peak RSS while training, Chutney / PyTorch


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(argv, env=None):
    """Runs argv to its end; returns (stdout, exit code, peak RSS in MB of
    that one process, stderr's tail)."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env, cwd=ROOT)
        out = p.stdout.read().decode(errors="replace")
        p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait again
        err.seek(0)
        tail = err.read().decode(errors="replace")[-2000:]
    return out, p.returncode, ru.ru_maxrss / 1024.0, tail


def last_json(out):
    for line in reversed(out.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def fail(what, argv, rc, tail):
    log("bench: %s failed (exit %d): %s\n%s" % (what, rc, " ".join(argv), tail.strip()))
    sys.exit(1)


def median(v):
    return statistics.median(v) if v else None


class Bench:
    def __init__(self, args):
        self.a = args
        self.chutney = os.path.join(args.build, "chutney")
        self.bench_dir = os.path.join(args.build, "bench")
        self.rows = []
        self.skipped = []
        self.torch = None
        self.static = False

    # ---- PyTorch side ----
    def torch_version(self):
        out, rc, _, _ = run([PY, "-c", "import torch; print(torch.__version__)"])
        return out.strip() if rc == 0 else None

    def splits(self, t):
        """(OpenMP, BLAS) thread splits PyTorch gets at t threads."""
        return [(t, 1)] if t == 1 else [(t, 1), (1, t)]

    # ---- training: mlp, cnn, lstm ----
    def train(self, models, threads, repeats):
        if not os.path.isdir(DATA):
            for m in models:
                self.skipped.append({"workload": m, "why": DATA + " is missing "
                                     "(Debian's dataset-fashion-mnist; make setup)"})
            return
        batches = QUICK_BATCHES if self.a.quick else BATCHES
        res = {}  # (model, threads, who) -> {"sps": [...], "rss": [...]}
        for r in range(repeats):
            for m in models:
                n = self.a.batches or batches[m]
                limit = TRAIN[m] * (WARMUP + n)
                for t in threads:
                    jobs = [("chutney", None)] + ([("static", None)] if self.static else [])
                    if self.torch:
                        jobs += [("torch", s) for s in self.splits(t)]
                    if r % 2:
                        jobs.reverse()
                    line = []
                    for who, split in jobs:
                        if who != "torch":
                            argv = [self.chutney, "train", "--model", m, "--epochs", "1",
                                    "--limit", str(limit), "--threads", str(t), "--json"]
                            if self.static:  # the default mode has changed once already
                                argv += ["--mode", "static" if who == "static" else "eager"]
                        else:
                            argv = [PY, "bench/torch_train.py", "--model", m, "--epochs", "1",
                                    "--limit", str(limit), "--threads", str(t), "--omp",
                                    str(split[0]), "--blas", str(split[1]), "--json"]
                        out, rc, rss, tail = run(argv)
                        j = last_json(out)
                        if rc != 0 or not j or "samples_per_sec" not in j:
                            fail("%s %s" % (who, m), argv, rc, tail)
                        d = res.setdefault((m, t, who, split), {"sps": [], "rss": []})
                        d["sps"].append(j["samples_per_sec"])
                        d["rss"].append(rss)
                        tag = who if not split else "torch %d+%d" % split
                        line.append("%s %.0f/s %.0fMB" % (tag, j["samples_per_sec"], rss))
                    log("[%d/%d] %-4s %d thr: %s" % (r + 1, repeats, m, t, ", ".join(line)))
        for m in models:
            for t in threads:
                for who in ["chutney", "static"] if self.static else ["chutney"]:
                    self.train_row(res, m, t, who, batches)

    def train_row(self, res, m, t, who, batches):
        c = res[(m, t, who, None)]
        row = {"workload": m + (" static" if who == "static" else ""),
               "threads": t, "unit": "samples/s",
               "chutney": median(c["sps"]), "chutney_runs": c["sps"],
               "chutney_rss_mb": median(c["rss"]), "reference": "pytorch",
               "batch": TRAIN[m], "timed_batches": self.a.batches or batches[m]}
        if self.torch:
            best = max(self.splits(t), key=lambda s: median(res[(m, t, "torch", s)]["sps"]))
            p = res[(m, t, "torch", best)]
            row.update({"ref": median(p["sps"]), "ref_runs": p["sps"],
                        "ref_rss_mb": median(p["rss"]),
                        "torch_split": "omp %d + blas %d" % best,
                        "torch_other_splits": {"omp %d + blas %d" % s:
                                               median(res[(m, t, "torch", s)]["sps"])
                                               for s in self.splits(t) if s != best}})
        self.rows.append(row)

    # ---- eager overhead ----
    def overhead(self, threads, repeats):
        exe = os.path.join(self.bench_dir, "bench_overhead")
        for t in threads:
            argv = [exe, "--repeats", str(repeats), "--threads", str(t), "--json"]
            if not self.torch:
                argv.append("--no-torch")
            out, rc, _, tail = run(argv)
            j = last_json(out)
            if rc != 0 or not j:
                fail("bench_overhead", argv, rc, tail)
            for g, name in enumerate(["overhead no recording", "overhead recording+backward"]):
                row = {"workload": name, "threads": t, "unit": "us/op",
                       "chutney": j["chutney_us_per_op"][g],
                       "chutney_rss_mb": j["chutney_peak_rss_mb"], "reference": "pytorch",
                       "repeats_in_process": repeats}
                if self.torch:
                    row.update({"ref": j["torch_us_per_op"][g], "ref_rss_mb": j["torch_peak_rss_mb"]})
                self.rows.append(row)
            log("overhead %d thr: us/op %s against %s" % (t, j["chutney_us_per_op"],
                                                          j["torch_us_per_op"]))

    # ---- GEMM ----
    def gemm(self, threads, repeats):
        exe = os.path.join(self.bench_dir, "bench_gemm")
        argv = [exe, "--repeats", str(repeats), "--json"]
        if self.a.quick:
            argv += ["--max-size", "1024"]
        out, rc, _, tail = run(argv)
        j = last_json(out)
        if rc != 0 or not j:
            fail("bench_gemm", argv, rc, tail)
        for w in j["results"]:
            if w["threads"] not in threads:
                continue
            row = {"workload": "gemm %d" % w["n"], "threads": w["threads"], "unit": "GFLOP/s",
                   "chutney": w["cn_matmul_gflops"], "reference": "cblas_sgemm",
                   "builtin_gflops": w.get("builtin_gflops"),
                   "peak_fraction": w.get("matmul_peak_fraction"),
                   "repeats_in_process": repeats}
            if "cblas_sgemm_gflops" in w:
                row["ref"] = w["cblas_sgemm_gflops"]
            self.rows.append(row)
        log("gemm done: %s" % ", ".join("%d/%d thr %.0f vs %.0f" % (
            w["n"], w["threads"], w["cn_matmul_gflops"], w.get("cblas_sgemm_gflops", 0))
            for w in j["results"]))

    # ---- ResNet-18 through ONNX: bench/bench_resnet.py ----
    def resnet18(self, threads, repeats):
        if not self.torch:
            self.skipped.append({"workload": "resnet18", "why": "needs PyTorch to export the model"})
            return
        out, _, _, tail = run([self.chutney, "info", "/nonexistent.onnx"])
        if "built without ONNX" in out + tail:
            self.skipped.append({"workload": "resnet18", "why": "`chutney run` is built without ONNX"})
            return
        argv = [PY, "bench/bench_resnet.py", "--build", self.a.build, "--repeats",
                str(repeats), "--threads", ",".join(map(str, threads)), "--json"]
        if self.a.quick:
            argv += ["--batches", "1"]
        out, rc, _, tail = run(argv)
        j = last_json(out)
        if rc != 0 or not j:
            fail("bench_resnet", argv, rc, tail)
        for w in j["rows"]:
            self.rows.append({"workload": "resnet18 batch %d" % w["batch"], "threads": w["threads"],
                              "unit": "ms", "chutney": w["chutney_ms"], "reference": "pytorch",
                              "ref": w["torch_ms"], "chutney_runs": w["chutney_runs"],
                              "ref_runs": w["torch_runs"], "max_abs_diff": w["max_abs_diff"]})
        log("resnet18 done: %s" % ", ".join("b%d/%d thr %.1f vs %.1f ms" % (
            w["batch"], w["threads"], w["chutney_ms"], w["torch_ms"]) for w in j["rows"]))


def target_of(row):
    return TARGETS.get(row["workload"].split()[0])


def finish_row(row):
    ref = row.get("ref")
    row["ratio"] = row["chutney"] / ref if ref else None
    t = target_of(row)
    if t:
        row["target"] = "%s %g" % t
        if row["ratio"] is not None:
            row["met"] = row["ratio"] >= t[1] if t[0] == ">=" else row["ratio"] <= t[1]
    cr, rr = row.get("chutney_rss_mb"), row.get("ref_rss_mb")
    if cr and rr:
        row["rss_ratio"] = cr / rr
        if row["unit"] == "samples/s":
            row["rss_target"] = "<= 1/3"
            row["rss_met"] = row["rss_ratio"] <= RSS_TARGET


def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "samples/s":
        return "{:,.0f}".format(v)
    if unit == "us/op":
        return "%.3f" % v
    return "%.1f" % v


def table(rows):
    head = ["workload", "thr", "Chutney", "reference", "ref", "unit", "ratio", "target", "met",
            "RSS MB", "ref RSS MB", "RSS ratio"]
    lines = []
    for r in rows:
        met = {True: "yes", False: "no"}.get(r.get("met"), "")
        rss = "" if r.get("rss_ratio") is None else "%.2f" % r["rss_ratio"]
        if r.get("rss_met") is not None:
            rss += " (%s)" % ("met" if r["rss_met"] else "not met")
        lines.append([r["workload"], str(r["threads"]), fmt(r["chutney"], r["unit"]),
                      r["reference"], fmt(r.get("ref"), r["unit"]), r["unit"],
                      "-" if r.get("ratio") is None else "%.2f" % r["ratio"],
                      r.get("target", ""), met,
                      "-" if r.get("chutney_rss_mb") is None else "%.0f" % r["chutney_rss_mb"],
                      "-" if r.get("ref_rss_mb") is None else "%.0f" % r["ref_rss_mb"], rss])
    width = [max(len(x[i]) for x in [head] + lines) for i in range(len(head))]
    left = {0, 3, 5, 7, 8, 11}
    out = []
    for x in [head] + lines:
        out.append("  ".join(c.ljust(width[i]) if i in left else c.rjust(width[i])
                             for i, c in enumerate(x)).rstrip())
        if x is head:
            out.append("-" * len(out[0]))
    return "\n".join(out)


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
            cpu = m.group(1).strip() if m else cpu
    except OSError:
        pass
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu, "nproc": nproc, "kernel": os.uname().release, "machine": os.uname().machine,
            "loadavg_at_end": os.getloadavg()}


def parse_list(s, conv=str):
    return [conv(x) for x in re.split(r"[,\s]+", s.strip()) if x]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="3 repeats, shorter training runs, GEMM up to 1024, "
                   "ResNet-18 at batch 1 only (3-5 minutes)")
    p.add_argument("--workloads", default="", help="any of %s (default: all)" % ",".join(ALL))
    p.add_argument("--repeats", type=int, default=0, help="default 7, 3 with --quick")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--batches", type=int, default=0,
                   help="timed training batches after the %d warm-up ones" % WARMUP)
    p.add_argument("--build", default="build", help="the Release build directory")
    p.add_argument("--out", default="bench/results/latest.json")
    a = p.parse_args()
    a.build = os.path.abspath(os.path.join(ROOT, a.build))
    workloads = parse_list(a.workloads) or ALL
    bad = [w for w in workloads if w not in ALL]
    threads = parse_list(a.threads, int)
    repeats = a.repeats or (3 if a.quick else 7)
    if bad or not threads or min(threads) < 1 or repeats < 1 or a.batches < 0:
        p.error("workloads are %s; threads and repeats positive counts" % ", ".join(ALL))
    if not os.access(os.path.join(a.build, "chutney"), os.X_OK):
        p.error("no %s/chutney: build first (make)" % a.build)

    b = Bench(a)
    t_start = time.time()
    # Other work on the machine skews the figures: say how busy it was.
    load_start = os.getloadavg()
    b.torch = b.torch_version()
    if not b.torch:
        log("bench: PyTorch cannot be imported by %s (Debian's python3-torch); "
            "Chutney's figures only" % PY)
    version, _, _, _ = run([b.chutney, "--version"])
    help_text, _, _, _ = run([b.chutney, "train", "--help"])
    b.static = "--mode" in help_text and "static" in help_text
    log("bench: %s; PyTorch %s; repeats %d; threads %s" %
        (version.strip(), b.torch or "-", repeats, threads))
    models = [w for w in workloads if w in TRAIN]
    if models:
        b.train(models, threads, repeats)
    if "overhead" in workloads:
        b.overhead(threads, repeats)
    if "gemm" in workloads:
        b.gemm(threads, repeats)
    if "resnet18" in workloads:
        b.resnet18(threads, repeats)
    order = {w: i for i, w in enumerate(ALL)}
    b.rows.sort(key=lambda r: (order[r["workload"].split()[0]], r["workload"].split()[-1].zfill(8),
                               r["threads"]))
    for r in b.rows:
        finish_row(r)

    m = machine()
    cmd = "make bench" + (" QUICK=1" if a.quick else "")
    res = {"command": cmd, "argv": sys.argv[1:],
           "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "seconds": round(time.time() - t_start, 1), "machine": m,
           "loadavg_at_start": load_start,
           "chutney": version.strip(), "pytorch": b.torch, "repeats": repeats,
           "threads": threads, "warmup_batches": WARMUP, "static_mode": b.static,
           "ratio": "Chutney / reference of the figure shown (samples/s, us/op or GFLOP/s)",
           "rows": b.rows, "skipped": b.skipped}
    out = os.path.join(ROOT, a.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")

    print()
    print("%s: Chutney against PyTorch %s, medians of %d; %s, %d CPUs; %.0f s" %
          (cmd, b.torch or "(not installed)", repeats, m["cpu"], m["nproc"], res["seconds"]))
    print("ratio = Chutney / reference; training RSS target <= 1/3 of PyTorch's; "
          "load average %.1f at the start, %.1f at the end" % (load_start[0], m["loadavg_at_end"][0]))
    print()
    print(table(b.rows))
    for s in b.skipped:
        print("skipped %s: %s" % (s["workload"], s["why"]))
    print("\nwritten to %s" % os.path.relpath(out, ROOT))


if __name__ == "__main__":
    main()
