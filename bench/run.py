"""`make bench`: Chutney against PyTorch on the benchmark workloads of
docs/benchmarks.md, interleaved, at 1 and 2 threads; prints one table and
writes it as JSON (bench/results/latest.json).

    /usr/bin/python3 bench/run.py [--quick] [--workloads mlp,cnn,...]
        [--repeats N] [--threads 1,2] [--batches N] [--infer-batches 1,16]
        [--peers torch2,compile,ort] [--venv DIR] [--build DIR] [--out FILE]

Workloads: mlp, cnn, lstm (training samples/s: `chutney train --json`
against bench/torch_train.py; where `chutney train` has `--mode static`,
rows "mlp static" etc. time the step as one compiled program too, against
the same PyTorch runs), gpt (training tokens/s: `chutney train --model gpt`
against bench/torch_gpt.py on the very token ids Chutney saved with
--save-tokens, from the fortunes corpus of scripts/text-corpus.sh; eager
and static), generate (greedy generation tokens/s with the key/value cache:
`chutney generate --json` on a briefly trained checkpoint against
`bench/torch_gpt.py --generate` on random weights, same model size, prompt
length and number of new tokens), overhead (bench_overhead: µs per tiny op,
without and with recording), gemm (bench_gemm: cn_matmul against
cblas_sgemm called directly), and the inference models of
bench/bench_infer.py (resnet18, resnet50, mobilenet_v2, mobilenet_v3_large,
efficientnet_b0, convnext_tiny, regnet_y_400mf, densenet121, vit_b_16,
bert; "models" names them all): latency in ms at batch 1 and 16, `chutney
run --bench` on the exported ONNX file.

The reference of every row is Debian's PyTorch 1.13 (/usr/bin/python3).
Beside it, from the virtual environment of bench/setup-venv.sh (default
BUILD/bench-venv): PyTorch 2 eager and with torch.compile on the training
and inference rows, ONNX Runtime on the inference rows (--peers picks
some); each has its own ratio, and the inference rows a geometric mean over
models. The environment's versions go into the JSON.

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
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_infer import MODELS, PEERS, geomeans  # noqa: E402

PY = "/usr/bin/python3"
DATA = "/usr/share/datasets/fashion-mnist"
ALL = ["mlp", "cnn", "lstm", "gpt", "generate", "overhead", "gemm"] + MODELS
QUICK_MODELS = ["resnet18", "mobilenet_v3_large"]
VENV_PEERS = ["torch2", "compile", "ort"]  # the PEERS of bench_infer.py in the venv
TRAIN_PEERS = ["torch2", "compile"]  # ONNX Runtime does not train
TRAIN = {"mlp": 128, "cnn": 64, "lstm": 128, "gpt": 16}  # batch sizes of the workloads
WARMUP = 20  # batches both trainers leave out of their samples/s
# Timed batches after the warm-up: enough for a stable rate, short enough
# that a full run takes about 20 minutes on 2 quiet cores.
BATCHES = {"mlp": 300, "cnn": 100, "lstm": 100, "gpt": 60}
QUICK_BATCHES = {"mlp": 100, "cnn": 30, "lstm": 30, "gpt": 20}
# The GPT rows: the default model of `chutney train --model gpt` (4 layers,
# 4 heads, width 128, context 64, vocabulary 512); generation with context
# GEN_CONTEXT, GEN_TOKENS new tokens after GEN_PROMPT.
GEN_CONTEXT, GEN_TOKENS = 256, 200
GEN_PROMPT = "It was a dark and stormy night; the rain fell in torrents"
# The targets of issue 7: ratio Chutney / reference of the figure shown.
TARGETS = {"mlp": (">=", 1.5), "lstm": (">=", 1.5), "cnn": (">=", 1.2),
           "gpt": (">=", 2.0),  # issue 19
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
        self.peers = []  # those of VENV_PEERS this run has
        self.venv_py = os.path.join(args.venv, "bin", "python")
        self.peer_errors = {}  # (workload, peer) -> why it failed
        self.geomean = []
        self.save = None  # writes the JSON so far: a long run keeps what it finished

    # ---- PyTorch side ----
    def torch_version(self):
        out, rc, _, _ = run([PY, "-c", "import torch; print(torch.__version__)"])
        return out.strip() if rc == 0 else None

    def splits(self, t):
        """(OpenMP, BLAS) thread splits PyTorch gets at t threads."""
        return [(t, 1)] if t == 1 else [(t, 1), (1, t)]

    # ---- the GPT's data: a text corpus, its token ids, a checkpoint ----
    def corpus(self):
        """The fortunes corpus (scripts/text-corpus.sh), made once; None
        after a note in the skipped list when the package is missing."""
        path = os.path.join(self.a.build, "bench-data", "fortunes.txt")
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".tmp", "w") as f:
                rc = subprocess.run(["sh", "scripts/text-corpus.sh", "fortunes"], stdout=f,
                                    cwd=ROOT).returncode
            if rc != 0:
                os.unlink(path + ".tmp")
                return None
            os.replace(path + ".tmp", path)
        return path

    def gpt_tokens(self, limit):
        """Token ids for both trainers: one untimed `chutney train` run
        saves those it trains on (PREFIX.train.npy, PREFIX.val.npy); the
        vocabulary size from its JSON."""
        prefix = os.path.join(self.a.build, "bench-data", "gpt-tokens")
        argv = [self.chutney, "train", "--model", "gpt", "--data", self.gpt_corpus, "--limit",
                str(limit), "--threads", "2", "--save-tokens", prefix, "--json"]
        out, rc, _, tail = run(argv)
        j = last_json(out)
        if rc != 0 or not j:
            fail("chutney train --model gpt --save-tokens", argv, rc, tail)
        return prefix, j["vocab"]

    def train_argv(self, m, who, t, split, limit):
        """The command line of one training run of workload m."""
        if who in ("chutney", "static"):
            argv = [self.chutney, "train", "--model", m, "--epochs", "1", "--limit", str(limit),
                    "--threads", str(t), "--json"]
            if m == "gpt":
                argv += ["--data", self.gpt_corpus]
            if self.a.precision != "f32":
                argv += ["--precision", self.a.precision]
            if self.static:  # the default mode has changed once already
                argv += ["--mode", "static" if who == "static" else "eager"]
            return argv
        py = [PY if who == "torch" else self.venv_py]
        if m == "gpt":
            argv = py + ["bench/torch_gpt.py", "--tokens", self.gpt_prefix, "--vocab",
                         str(self.gpt_vocab)]
        else:
            argv = py + ["bench/torch_train.py", "--model", m, "--epochs", "1", "--limit",
                         str(limit)]
        if self.a.precision != "f32":
            argv += ["--precision", self.a.precision]
        return argv + ["--threads", str(t), "--omp", str(split[0]), "--blas", str(split[1]),
                       "--json"] + (["--compile"] if who == "compile" else [])

    # ---- training: mlp, cnn, lstm, gpt ----
    def train(self, models, threads, repeats):
        batches = QUICK_BATCHES if self.a.quick else BATCHES
        if not os.path.isdir(DATA):
            for m in [m for m in models if m != "gpt"]:
                self.skipped.append({"workload": m, "why": DATA + " is missing "
                                     "(Debian's dataset-fashion-mnist; make setup)"})
            models = [m for m in models if m == "gpt"]
        if "gpt" in models:
            self.gpt_corpus = self.corpus()
            if not self.gpt_corpus:
                self.skipped.append({"workload": "gpt", "why": "no text corpus (scripts/"
                                     "text-corpus.sh: apt-get install fortunes)"})
                models.remove("gpt")
            else:
                n = self.a.batches or batches["gpt"]
                self.gpt_prefix, self.gpt_vocab = self.gpt_tokens(TRAIN["gpt"] * (WARMUP + n))
        res = {}  # (model, threads, who) -> {"sps": [...], "rss": [...]}
        self.cold = {(m, t): not os.path.isdir(self.inductor_dir(m, t))
                     for m in models for t in threads}
        for r in range(repeats):
            for m in models:
                n = self.a.batches or batches[m]
                limit = TRAIN[m] * (WARMUP + n)
                for t in threads:
                    jobs = [("chutney", None)] + ([("static", None)] if self.static else [])
                    if self.torch:
                        jobs += [("torch", s) for s in self.splits(t)]
                    jobs += [(p, (t, 1)) for p in TRAIN_PEERS
                             if p in self.peers and (m, p) not in self.peer_errors]
                    if r % 2:
                        jobs.reverse()
                    line = []
                    for who, split in jobs:
                        argv = self.train_argv(m, who, t, split, limit)
                        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=self.inductor_dir(m, t))
                        out, rc, rss, tail = run(argv, env)
                        j = last_json(out)
                        key = "tokens_per_sec" if m == "gpt" else "samples_per_sec"
                        if rc != 0 or not j or key not in j:
                            if who not in TRAIN_PEERS:
                                fail("%s %s" % (who, m), argv, rc, tail)
                            self.peer_errors[(m, who)] = "exit %d: %s" % (
                                rc, " / ".join(tail.strip().splitlines()[-2:])[-300:])
                            line.append("%s failed" % who)
                            continue
                        d = res.setdefault((m, t, who, split),
                                           {"sps": [], "rss": [], "first": [], "cpu": []})
                        d["sps"].append(j[key])
                        d["cpu"].append(j.get("tokens_per_cpu_sec"))
                        d["rss"].append(rss)
                        d["first"].append(j.get("first_step_s", j.get("compile_seconds")))
                        tag = "torch %d+%d" % split if who == "torch" else who
                        line.append("%s %.0f/s %.0fMB" % (tag, j[key], rss))
                    log("[%d/%d] %-4s %d thr: %s" % (r + 1, repeats, m, t, ", ".join(line)))
        for m in models:
            for t in threads:
                for who in ["chutney", "static"] if self.static else ["chutney"]:
                    self.train_row(res, m, t, who, batches)

    def train_row(self, res, m, t, who, batches):
        c = res[(m, t, who, None)]
        row = {"workload": m + (" static" if who == "static" else "") +
               (" " + self.a.precision if self.a.precision != "f32" else ""),
               "threads": t, "unit": "tokens/s" if m == "gpt" else "samples/s",
               "chutney": median(c["sps"]), "chutney_runs": c["sps"],
               "chutney_rss_mb": median(c["rss"]), "reference": "pytorch",
               "batch": TRAIN[m], "timed_batches": self.a.batches or batches[m]}
        per_cpu(row, "chutney_per_cpu_sec", c)
        if self.torch:
            best = max(self.splits(t), key=lambda s: median(res[(m, t, "torch", s)]["sps"]))
            p = res[(m, t, "torch", best)]
            row.update({"ref": median(p["sps"]), "ref_runs": p["sps"],
                        "ref_rss_mb": median(p["rss"]),
                        "torch_split": "omp %d + blas %d" % best,
                        "torch_other_splits": {"omp %d + blas %d" % s:
                                               median(res[(m, t, "torch", s)]["sps"])
                                               for s in self.splits(t) if s != best}})
            row["peers"] = {PEERS["torch1"][0]: {"value": row["ref"], "runs": p["sps"]}}
            per_cpu(row["peers"][PEERS["torch1"][0]], "per_cpu_sec", p)
        for key in TRAIN_PEERS:
            if key not in self.peers:
                continue
            p = res.get((m, t, key, (t, 1)))
            cell = {"error": self.peer_errors.get((m, key), "not run")} if not p else {
                "value": median(p["sps"]), "runs": p["sps"], "rss_mb": median(p["rss"])}
            per_cpu(cell, "per_cpu_sec", p)
            if p and key == "compile":
                cell["compile_s"] = p["first"][0]  # the first step of the first run
                cell["compile_cold"] = self.cold[(m, t)]
            row.setdefault("peers", {})[PEERS[key][0]] = cell
        self.rows.append(row)

    # ---- generation with the key/value cache ----
    def generate(self, threads, repeats):
        corpus = self.corpus()
        if not corpus:
            self.skipped.append({"workload": "generate", "why": "no text corpus (scripts/"
                                 "text-corpus.sh: apt-get install fortunes)"})
            return
        # A checkpoint of the default model at context GEN_CONTEXT, trained
        # for a few steps: the timing does not depend on the weights.
        ckpt = os.path.join(self.a.build, "bench-data", "gpt-generate.ckpt")
        argv = [self.chutney, "train", "--model", "gpt", "--data", corpus, "--context",
                str(GEN_CONTEXT), "--limit", "64", "--threads", "2", "--save", ckpt, "--json"]
        out, rc, _, tail = run(argv)
        j = last_json(out)
        if rc != 0 or not j:
            fail("chutney train --model gpt --save", argv, rc, tail)
        vocab = j["vocab"]

        def chutney(t, n):
            return [self.chutney, "generate", "--load", ckpt, "--prompt", GEN_PROMPT, "--tokens",
                    str(n), "--temperature", "0", "--threads", str(t), "--json"]
        out, rc, _, tail = run(chutney(1, 1))
        j = last_json(out)
        if rc != 0 or not j:
            fail("chutney generate", chutney(1, 1), rc, tail)
        prompt = j["prompt_tokens"]
        peers = [p for p in ["torch2"] if p in self.peers]  # torch.compile: not for a growing cache
        res = {}
        for r in range(repeats):
            for t in threads:
                jobs = ["chutney"] + (["torch"] if self.torch else []) + peers
                if r % 2:
                    jobs.reverse()
                line = []
                for who in jobs:
                    argv = chutney(t, GEN_TOKENS) if who == "chutney" else [
                        PY if who == "torch" else self.venv_py, "bench/torch_gpt.py", "--generate",
                        str(GEN_TOKENS), "--prompt-tokens", str(prompt), "--vocab", str(vocab),
                        "--context", str(GEN_CONTEXT), "--threads", str(t), "--omp", str(t),
                        "--blas", "1", "--json"]
                    out, rc, rss, tail = run(argv)
                    j = last_json(out)
                    if rc != 0 or not j or "tokens_per_sec" not in j:
                        if who != "torch2":
                            fail("%s generate" % who, argv, rc, tail)
                        self.peer_errors[("generate", who)] = "exit %d: %s" % (rc, tail[-300:])
                        continue
                    d = res.setdefault((t, who), {"tps": [], "rss": [], "cpu": []})
                    d["tps"].append(j["tokens_per_sec"])
                    d["cpu"].append(j.get("tokens_per_cpu_sec"))
                    d["rss"].append(rss)
                    line.append("%s %.0f tokens/s" % (who, j["tokens_per_sec"]))
                log("[%d/%d] generate %d thr: %s" % (r + 1, repeats, t, ", ".join(line)))
        for t in threads:
            c = res[(t, "chutney")]
            row = {"workload": "generate", "threads": t, "unit": "tokens/s",
                   "chutney": median(c["tps"]), "chutney_runs": c["tps"],
                   "chutney_rss_mb": median(c["rss"]), "reference": "pytorch",
                   "prompt_tokens": prompt, "new_tokens": GEN_TOKENS, "context": GEN_CONTEXT,
                   "weights": "chutney: trained on 64 windows; pytorch: random", "peers": {}}
            per_cpu(row, "chutney_per_cpu_sec", c)
            for who in ["torch"] + peers:
                p = res.get((t, who))
                name = PEERS["torch1" if who == "torch" else who][0]
                row["peers"][name] = {"error": self.peer_errors.get(("generate", who), "not run")} \
                    if not p else {"value": median(p["tps"]), "runs": p["tps"],
                                   "rss_mb": median(p["rss"])}
                if p:
                    per_cpu(row["peers"][name], "per_cpu_sec", p)
                if p and who == "torch":
                    row.update({"ref": median(p["tps"]), "ref_runs": p["tps"],
                                "ref_rss_mb": median(p["rss"])})
            self.rows.append(row)

    def inductor_dir(self, m, t):
        """torch.compile's code cache, one per workload and thread count: the
        C++ it generates depends on the thread count, and a first run shows
        a cold compile."""
        return os.path.join(self.a.build, "bench-inductor", "train-%s-t%d" % (m, t))

    def venv_versions(self):
        """The peers' environment as pip sees it, for the JSON; None without
        the stamp bench/setup-venv.sh leaves when its install finished."""
        if not os.path.exists(os.path.join(self.a.venv, "ready")):
            return None
        out, rc, _, _ = run([self.venv_py, "-c", "import sys, importlib.metadata as m; "
                             "print(sys.version.split()[0]); "
                             "[print(d.metadata['Name'], d.version) for d in m.distributions()]"])
        if rc != 0:
            return None
        lines = out.split("\n")
        return {"path": os.path.relpath(self.a.venv, ROOT), "python": lines[0].strip(),
                "packages": dict(sorted(tuple(x.split(" ", 1)) for x in lines[1:] if " " in x))}

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

    # ---- inference of real models through ONNX: bench/bench_infer.py ----
    def infer(self, models, threads, repeats):
        if not self.torch:
            for m in models:
                self.skipped.append({"workload": m, "why": "needs PyTorch 1.13 to export the model"})
            return
        out, _, _, tail = run([self.chutney, "info", "/nonexistent.onnx"])
        if "built without ONNX" in out + tail:
            for m in models:
                self.skipped.append({"workload": m, "why": "`chutney run` is built without ONNX"})
            return
        # One model at a time, all its frameworks interleaved: a run of every
        # model takes hours on a busy machine, and what finished is saved.
        for model in models:
            self.infer_model(model, threads, repeats)
            self.save()

    def infer_model(self, model, threads, repeats):
        peers = ["torch1"] + self.peers
        argv = [PY, "bench/bench_infer.py", "--build", self.a.build, "--repeats", str(repeats),
                "--models", model, "--threads", ",".join(map(str, threads)),
                "--batches", self.a.infer_batches or ("1" if self.a.quick else "1,16"),
                "--peers", ",".join(peers), "--venv", self.a.venv, "--json"]
        if self.a.infer_runs:
            argv += ["--runs", str(self.a.infer_runs)]
        if self.a.precision != "f32":
            argv += ["--precision", self.a.precision]
        # Its progress goes straight to the terminal.
        p = subprocess.run(argv, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        j = last_json(p.stdout)
        if p.returncode != 0 or not j:
            fail("bench_infer", argv, p.returncode, p.stdout[-2000:])
        t1 = PEERS["torch1"][0]
        for w in j["rows"]:
            c, ref = w["chutney"], w[t1]
            row = {"workload": "%s batch %d%s" % (w["model"], w["batch"],
                                                (" " + self.a.precision
                                                 if self.a.precision != "f32" else "")),
                   "threads": w["threads"],
                   "unit": "ms", "chutney": c.get("ms"), "chutney_runs": c.get("runs"),
                   "chutney_spread": c.get("spread"), "reference": t1, "ref": ref.get("ms"),
                   "ref_runs": ref.get("runs"), "peers": {}}
            if "error" in c:
                row["chutney_error"] = c["error"]
            for key in ["torch1"] + self.peers:
                x = w[PEERS[key][0]]
                cell = {"value": x.get("ms"), "runs": x.get("runs"), "spread": x.get("spread")}
                for f in ["error", "max_abs_diff", "compile_s", "compile_cold", "first_call_s"]:
                    if f in x:
                        cell[f] = x[f]
                row["peers"][PEERS[key][0]] = {k: v for k, v in cell.items() if v is not None}
            self.rows.append(row)
        self.geomean = infer_geomeans(self.rows)


def per_cpu(cell, key, d):
    """The GPT rows' tokens per CPU second of the process (all its threads),
    median of the runs that report it: at 1 thread, a figure that other
    work on a busy machine does not inflate."""
    v = [x for x in d.get("cpu", []) if x]
    if v:
        cell[key] = median(v)
        cell[key.replace("per_cpu_sec", "cpu_runs")] = v


def infer_batch(row):
    """The batch size of an inference row ("resnet18 batch 16", "... batch 1 bf16")."""
    return int(row["workload"].split()[2])


def infer_geomeans(rows):
    """The geometric means over models of the inference rows' ratios (a
    precision's rows apart: "pytorch 2 bf16")."""
    def model_row(r):
        return r["unit"] == "ms" and r["workload"].split()[0] in MODELS

    def peer(r, n):
        return " ".join([n] + r["workload"].split()[3:])
    return geomeans((infer_batch(r), r["threads"], peer(r, n), r["chutney"] / p["value"])
                    for r in rows if model_row(r) and r["chutney"]
                    for n, p in r.get("peers", {}).items() if p.get("value"))


def target_of(row):
    return TARGETS.get(row["workload"].split()[0])


def finish_row(row):
    ref = row.get("ref")
    row["ratio"] = row["chutney"] / ref if ref and row["chutney"] else None
    for p in row.get("peers", {}).values():
        if p.get("value") and row["chutney"]:
            p["ratio"] = row["chutney"] / p["value"]
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
    if unit in ("samples/s", "tokens/s"):
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
    return columns(head, lines, {0, 3, 5, 7, 8, 11})


def columns(head, lines, left):
    width = [max(len(x[i]) for x in [head] + lines) for i in range(len(head))]
    out = []
    for x in [head] + lines:
        out.append("  ".join(c.ljust(width[i]) if i in left else c.rjust(width[i])
                             for i, c in enumerate(x)).rstrip())
        if x is head:
            out.append("-" * len(out[0]))
    return "\n".join(out)


PEER_NAMES = [PEERS[k][0] for k in PEERS]


def peer_cells(r, names, why=False, missing=""):
    """A row's Chutney figure and each peer's "figure (Chutney / peer)";
    rows without peers show their one reference (overhead: PyTorch 1.13,
    GEMM: cblas_sgemm) in the last cell. why: a failed cell says why;
    missing: what a peer the row's run left out shows."""
    def spread(x):
        return "" if x is None else " ±%.0f%%" % (100 * x)

    def cell(p, absent=""):
        if p is None:
            return absent
        if p.get("value") is None:
            return "failed" + (": " + p.get("error", "") if why else "")
        c = "%s%s (%s)" % (fmt(p["value"], r["unit"]), spread(p.get("spread")),
                           "-" if p.get("ratio") is None else "%.2f" % p["ratio"])
        if p.get("compile_s") is not None:
            c += ", compile %.0f s%s" % (p["compile_s"], "" if p.get("compile_cold", True) else
                                         " (cached)")
        return c
    c = fmt(r["chutney"], r["unit"]) + spread(r.get("chutney_spread")) if r["chutney"] is not None \
        else "failed" + (": " + r.get("chutney_error", "") if why else "")
    peers = dict(r.get("peers") or {})
    other = ""
    if not peers and r.get("ref") is not None:
        ref = {"value": r["ref"], "ratio": r.get("ratio")}
        if r["reference"].startswith("pytorch"):
            peers[PEERS["torch1"][0]] = ref
        else:
            other = "%s: %s" % (r["reference"], cell(ref))
    def absent(n):  # ONNX Runtime has no training rows to miss
        trains = r["unit"] in ("samples/s", "tokens/s")
        return missing if r.get("peers") and not (trains and n == PEERS["ort"][0]) else ""
    return [c] + [cell(peers.get(n), absent(n)) for n in names] + [other]


def peer_table(rows):
    """Every peer of the rows that have several: figure (ratio)."""
    rows = [r for r in rows if r.get("peers")]
    names = [n for n in PEER_NAMES if any(n in r["peers"] for r in rows)]
    lines = [[r["workload"], str(r["threads"]), r["unit"]] + peer_cells(r, names)[:-1] for r in rows]
    out = [columns(["workload", "thr", "unit", "Chutney"] + names, lines, {0, 2})]
    for r in rows:
        for n, p in r["peers"].items():
            if "error" in p:
                out.append("%s, %d thr, %s failed: %s" % (r["workload"], r["threads"], n, p["error"]))
        if r.get("chutney_error"):
            out.append("%s, %d thr, Chutney failed: %s" % (r["workload"], r["threads"],
                                                          r["chutney_error"]))
    return "\n".join(out)


def markdown(paths):
    """One Markdown table of the rows of earlier runs' JSON files, and the
    geometric means over all their inference rows (docs/benchmarks.md)."""
    rows = []
    for path in paths:
        with open(path) as f:
            rows += json.load(f)["rows"]
    head = ["workload", "thr", "unit", "Chutney"] + PEER_NAMES + ["other reference"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join([r["workload"], str(r["threads"]), r["unit"]] +
                                peer_cells(r, PEER_NAMES, True, "not run")).replace("\n", " ") + " |")
    gm = infer_geomeans(rows)
    if gm:
        print()
        print("| batch | threads | peer | geometric mean of Chutney / peer | models |")
        print("|---|---|---|---|---|")
    for g in gm:
        print("| %d | %d | %s | %.2f | %d |" % (g["batch"], g["threads"], g["peer"],
                                                g["geomean_ratio"], g["models"]))


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
                   help="3 repeats, shorter training runs, GEMM up to 1024, of the "
                   "inference models only %s at batch 1" % " and ".join(QUICK_MODELS))
    p.add_argument("--workloads", default="", help="any of %s, or models for every inference "
                   "model (default: all)" % ",".join(ALL))
    p.add_argument("--repeats", type=int, default=0, help="default 7, 3 with --quick")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--batches", type=int, default=0,
                   help="timed training batches after the %d warm-up ones" % WARMUP)
    p.add_argument("--infer-batches", default="", help="batch sizes of the inference rows "
                   "(default 1,16; 1 with --quick)")
    p.add_argument("--infer-runs", type=int, default=0, help="timed passes per inference "
                   "process (default 10 at batch 1, 3 at larger batches)")
    p.add_argument("--peers", default=",".join(VENV_PEERS),
                   help="peers beside PyTorch 1.13, any of %s, or none" % ",".join(VENV_PEERS))
    p.add_argument("--venv", default="", help="their virtual environment (default "
                   "BUILD/bench-venv; bench/setup-venv.sh makes it)")
    p.add_argument("--precision", default="f32",
                   help="the training and inference rows' precisions, f32 and/or bf16 "
                   "(f32,bf16: both, one after the other): bf16 is autocast on both sides "
                   "(chutney train/run --precision bf16, torch.autocast; ONNX Runtime has "
                   "none); the other rows are f32")
    p.add_argument("--build", default="build", help="the Release build directory")
    p.add_argument("--out", default="bench/results/latest.json")
    p.add_argument("--markdown", nargs="+", metavar="JSON", help="only print the rows of these "
                   "earlier runs as one Markdown table")
    a = p.parse_args()
    if a.markdown:
        return markdown(a.markdown)
    a.build = os.path.abspath(os.path.join(ROOT, a.build))
    a.venv = os.path.abspath(a.venv) if a.venv else os.path.join(a.build, "bench-venv")
    workloads = []
    for w in parse_list(a.workloads) or (
            ALL[:7] + QUICK_MODELS if a.quick else ALL):
        workloads += MODELS if w == "models" else [w]
    peers = [] if a.peers.strip() == "none" else parse_list(a.peers)
    bad = [w for w in workloads if w not in ALL] + [x for x in peers if x not in VENV_PEERS]
    threads = parse_list(a.threads, int)
    repeats = a.repeats or (3 if a.quick else 7)
    precisions = parse_list(a.precision)
    if not precisions or [x for x in precisions if x not in ("f32", "bf16")]:
        p.error("--precision takes f32, bf16 or both (f32,bf16), not %s" % a.precision)
    if bad or not threads or min(threads) < 1 or repeats < 1 or a.batches < 0:
        p.error("workloads are %s or models; peers %s or none; threads and repeats positive "
                "counts%s" % (", ".join(ALL), ", ".join(VENV_PEERS),
                              " (not %s)" % ", ".join(bad) if bad else ""))
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
    venv = b.venv_versions() if peers else None
    if venv:
        b.peers = peers
    elif peers:
        log("bench: no %s (make it with sh bench/setup-venv.sh): no PyTorch 2 or ONNX Runtime "
            "rows" % b.venv_py)
        b.skipped.append({"workload": "pytorch 2, onnxruntime", "why": "no " + b.venv_py})
    log("bench: %s; PyTorch %s; repeats %d; threads %s" %
        (version.strip(), b.torch or "-", repeats, threads))
    cmd = "make bench" + (" QUICK=1" if a.quick else "")
    out = os.path.join(ROOT, a.out)

    def save(final=False):
        """The JSON of the rows so far (each row finished), as the run goes."""
        order = {w: i for i, w in enumerate(ALL)}
        def key(r):
            w = r["workload"].split()
            bf16 = w[-1] == "bf16"  # a precision's rows after the f32 ones
            rest = " ".join(w[1:len(w) - bf16])
            return (order[w[0]], bf16, rest.zfill(8), r["threads"])
        b.rows.sort(key=key)
        for r in b.rows:
            finish_row(r)
        res = {"command": cmd, "argv": sys.argv[1:], "finished": final,
               "date": datetime.datetime.now().isoformat(timespec="seconds"),
               "seconds": round(time.time() - t_start, 1), "machine": machine(),
               "loadavg_at_start": load_start,
               "chutney": version.strip(), "pytorch": b.torch, "peers_venv": venv,
               "repeats": repeats, "threads": threads, "warmup_batches": WARMUP,
               "static_mode": b.static,
               "ratio": "Chutney / reference of the figure shown (samples/s, us/op, GFLOP/s or "
                        "ms); the same for each peer",
               "rows": b.rows, "geomean": b.geomean, "skipped": b.skipped}
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out + ".tmp", "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
        os.replace(out + ".tmp", out)
        return res
    b.save = save

    models = [w for w in workloads if w in TRAIN]
    for a.precision in precisions if models else []:
        b.train(models, threads, repeats)
        save()
    a.precision = "f32"  # generation, overhead and GEMM rows
    if "generate" in workloads:
        b.generate(threads, repeats)
        save()
    if "overhead" in workloads:
        b.overhead(threads, repeats)
    if "gemm" in workloads:
        b.gemm(threads, repeats)
    infer = [w for w in workloads if w in MODELS]
    for a.precision in precisions if infer else []:
        b.infer(infer, threads, repeats)
    res = save(final=True)
    m = res["machine"]

    print()
    print("%s: Chutney against PyTorch %s, medians of %d; %s, %d CPUs; %.0f s" %
          (cmd, b.torch or "(not installed)", repeats, m["cpu"], m["nproc"], res["seconds"]))
    print("ratio = Chutney / reference; training RSS target <= 1/3 of PyTorch's; "
          "load average %.1f at the start, %.1f at the end" % (load_start[0], m["loadavg_at_end"][0]))
    print()
    print(table(b.rows))
    if any(r.get("peers") for r in b.rows):
        print("\nEvery peer: figure (Chutney / peer); PyTorch 2 and ONNX Runtime from %s" %
              os.path.relpath(a.venv, ROOT))
        print(peer_table(b.rows))
    for g in b.geomean:
        print("geometric mean over %d models, batch %d, %d thr: Chutney / %s = %.2f" % (
            g["models"], g["batch"], g["threads"], g["peer"], g["geomean_ratio"]))
    for s in b.skipped:
        print("skipped %s: %s" % (s["workload"], s["why"]))
    print("\nwritten to %s" % os.path.relpath(out, ROOT))


if __name__ == "__main__":
    main()
