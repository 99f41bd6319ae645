#!/usr/bin/env bash
# The one check to run on a machine with a GPU: build with the CUDA backend,
# list the devices, run the backend conformance suite, benchmark the device,
# train each model for one epoch on it (and the MLP on the CPU, for a ratio
# on the same machine), and write one JSON report.
#
#   scripts/gpu-check.sh [--device DEV] [--quick] [--out FILE]
#
#   --device DEV  cuda (the default), cuda:N, opencl, opencl:N, ...: what the
#                 conformance counts, the bench and the training runs are
#                 about. Any kind works, so the plumbing can be tried on
#                 PoCL (--device opencl) where there is no GPU.
#   --quick       small sizes: bench_gpu --quick, training on --limit 2000
#                 images. For trying the script, not for figures.
#   --out FILE    the JSON report (default: $OUT/gpu-check.json, else
#                 build-gpu/gpu-check.json); the full log goes beside it as
#                 gpu-check.log.
#
# Environment:
#   DEVICE, QUICK=1      as the options
#   CHUTNEY_DATA         Fashion-MNIST's four IDX files (.gz or not); default
#                        /usr/share/datasets/fashion-mnist (scripts/setup.sh
#                        installs it there), else build-data/fashion-mnist in
#                        the tree, for machines without the package: copy the
#                        files there and bring the folder along with the tree
#   BUILD_DIR            default build-gpu
#   CHUTNEY_WITH_CUDA    ON or OFF; default ON for a cuda device, else OFF
#   CMAKE_EXTRA_ARGS     more configure arguments (word-split)
#   JOBS                 build jobs (default: the number of cores)
#   BUDGET_S             seconds for all steps (default 440): each step's
#                        timeout is cut to what is left, and a step that
#                        would start with under 10 s left is skipped, so the
#                        whole run stays under 8 minutes
#
# Every step runs, is timed and recorded even when an earlier one failed
# (steps that need a missing binary are recorded as skipped). The exit
# status is 0 only when every step passed and the device was there: the
# conformance suite passes without it, skipping its kind.
set -u
set -o pipefail

cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD

DEVICE=${DEVICE:-cuda}
QUICK=${QUICK:-}
REPORT=""
while [ $# -gt 0 ]; do
    case $1 in
        --device) DEVICE=${2:?--device needs a value}; shift 2 ;;
        --device=*) DEVICE=${1#--device=}; shift ;;
        --quick) QUICK=1; shift ;;
        --out) REPORT=${2:?--out needs a file}; shift 2 ;;
        --out=*) REPORT=${1#--out=}; shift ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpu-check: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

KIND=${DEVICE%%:*}
case $DEVICE in *:*) DEV_FULL=$DEVICE ;; *) DEV_FULL=$DEVICE:0 ;; esac
BUILD=${BUILD_DIR:-build-gpu}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
if [ "$KIND" = cuda ]; then WITH_CUDA=${CHUTNEY_WITH_CUDA:-ON}; else WITH_CUDA=${CHUTNEY_WITH_CUDA:-OFF}; fi
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
BUDGET_S=${BUDGET_S:-440}
if [ -z "$REPORT" ]; then REPORT=${OUT:-$BUILD}/gpu-check.json; fi
case $REPORT in /*) ;; *) REPORT=$ROOT/$REPORT ;; esac
REPORT_DIR=$(dirname "$REPORT")
COMBINED=$REPORT_DIR/gpu-check.log
LOGS=$BUILD/gpu-check
TRAIN_LIMIT=()
BENCH_QUICK=()
if [ -n "$QUICK" ]; then TRAIN_LIMIT=(--limit 2000); BENCH_QUICK=(--quick); fi

mkdir -p "$LOGS" "$REPORT_DIR" || exit 2
rm -f "$LOGS"/*.out "$LOGS"/*.err "$LOGS"/steps.tsv
STEPS=$LOGS/steps.tsv
: >"$STEPS"

now() {
    if [ -n "${EPOCHREALTIME:-}" ]; then echo "${EPOCHREALTIME/,/.}"; else date +%s.%N; fi
}
START=$(now)
elapsed() { awk -v a="$START" -v b="$(now)" 'BEGIN { printf "%d", b - a }'; }

# record NAME STATUS RC SECONDS NOTE COMMAND...
record() {
    local name=$1 status=$2 rc=$3 secs=$4 note=$5
    shift 5
    # "-" for an empty field: read(1) would merge two tabs with nothing between.
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "${rc:--}" "$secs" "${note:--}" "${*:--}" \
        >>"$STEPS"
    printf '[gpu-check] %-16s %-8s %7ss  %s\n' "$name" "$status" "$secs" "$note"
}

# step NAME CAP_SECONDS COMMAND...: stdout to $LOGS/NAME.out, stderr to
# NAME.err; the timeout is CAP or what the budget has left, the smaller.
step() {
    local name=$1 cap=$2
    shift 2
    local left=$((BUDGET_S - $(elapsed)))
    if [ "$left" -lt 10 ]; then
        record "$name" skipped "" 0 "out of time (budget ${BUDGET_S}s)" "$@"
        return 1
    fi
    [ "$cap" -gt "$left" ] && cap=$left
    local t0 rc status note=""
    t0=$(now)
    # A shell function cannot run under timeout(1); ours are short and local.
    if [ "$(type -t "$1")" = function ]; then
        "$@" >"$LOGS/$name.out" 2>"$LOGS/$name.err"
    else
        timeout --kill-after=10 "$cap" "$@" >"$LOGS/$name.out" 2>"$LOGS/$name.err"
    fi
    rc=$?
    local secs
    secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    case $rc in
        0) status=ok ;;
        124|137) status=timeout; note="stopped after ${cap}s" ;;
        *) status=failed; note="exit $rc" ;;
    esac
    record "$name" "$status" "$rc" "$secs" "$note" "$@"
    if [ "$status" != ok ]; then
        local f
        for f in "$LOGS/$name.err" "$LOGS/$name.out"; do
            [ -s "$f" ] && tail -n 15 "$f" | sed 's/^/    /'
        done
    fi
    [ "$status" = ok ]
}

# need NAME FILE: records NAME as skipped when FILE is not executable.
need() {
    if [ -x "$2" ]; then return 0; fi
    record "$1" skipped "" 0 "no ${2#"$ROOT"/} (the build failed?)" ""
    return 1
}

echo "[gpu-check] device $DEV_FULL, build $BUILD, CUDA $WITH_CUDA, budget ${BUDGET_S}s${QUICK:+, quick}"

# ---- build ----
# A build folder carried from another checkout path has a cache CMake
# refuses; only its cache goes, so the objects can still be reused.
if [ -f "$BUILD/CMakeCache.txt" ] &&
    ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$ROOT" "$BUILD/CMakeCache.txt"; then
    rm -rf "$BUILD/CMakeCache.txt" "$BUILD/CMakeFiles"
fi
# shellcheck disable=SC2206 # word-splitting the extra arguments is the point
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DCHUTNEY_WITH_CUDA="$WITH_CUDA" -DCHUTNEY_BUILD_TESTS=ON
            -DCHUTNEY_BUILD_BENCH=ON ${CMAKE_EXTRA_ARGS:-})
if step configure 90 cmake -S "$ROOT" -B "$BUILD" "${CMAKE_ARGS[@]}"; then
    step build 300 cmake --build "$BUILD" -j"$JOBS"
else
    record build skipped "" 0 "configure failed" ""
fi

# ---- devices and conformance ----
CLI=$BUILD/chutney
need devices "$CLI" && step devices 30 "$CLI" devices --json
# Only the device kind asked about: an NVIDIA machine may also have NVIDIA's
# OpenCL, and the suite on it (every kernel compiled again by that
# compiler) took most of the time of the first run on an H200. Unbuffered,
# so a step stopped by its timeout still shows how far it got.
need conformance "$BUILD/tests/test_backends" &&
    step conformance 240 env CN_TEST_DEVICE_KINDS="$KIND" stdbuf -oL -eL "$BUILD/tests/test_backends"
# The collectives through NCCL on the GPU, as one process (test_nccl_one_rank).
need nccl "$BUILD/tests/test_dist" && step nccl 60 "$BUILD/tests/test_dist"

# ---- benchmark ----
need bench "$BUILD/bench/bench_gpu" &&
    step bench 150 "$BUILD/bench/bench_gpu" --device "$DEV_FULL" --json "${BENCH_QUICK[@]}"

# ---- data ----
# The build may lack zlib (the GPU image need not have zlib1g-dev), and the
# loader reads uncompressed files too, so .gz files are unpacked beside the
# build; DATA is then that folder.
if [ -n "${CHUTNEY_DATA:-}" ]; then DATA_SRC=$CHUTNEY_DATA
elif [ -d /usr/share/datasets/fashion-mnist ]; then DATA_SRC=/usr/share/datasets/fashion-mnist
else DATA_SRC=$ROOT/build-data/fashion-mnist; fi
DATA=$DATA_SRC
prepare_data() {
    local f unpacked=$BUILD/fashion-mnist
    rm -rf "$unpacked"
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
        t10k-labels-idx1-ubyte; do
        if [ -f "$DATA_SRC/$f" ]; then
            continue
        elif [ -f "$DATA_SRC/$f.gz" ]; then
            mkdir -p "$unpacked" && gzip -dc "$DATA_SRC/$f.gz" >"$unpacked/$f.tmp" &&
                mv "$unpacked/$f.tmp" "$unpacked/$f" || return 1
        else
            echo "Fashion-MNIST: no $DATA_SRC/$f(.gz). Set CHUTNEY_DATA to the folder of its" \
                "four IDX files (Debian's dataset-fashion-mnist installs them in" \
                "/usr/share/datasets/fashion-mnist), or copy them to build-data/fashion-mnist." >&2
            return 1
        fi
    done
    if [ -d "$unpacked" ]; then
        # Files that were there uncompressed join the unpacked ones.
        for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
            t10k-labels-idx1-ubyte; do
            if [ -f "$DATA_SRC/$f" ]; then ln -sf "$DATA_SRC/$f" "$unpacked/$f" || return 1; fi
        done
        DATA=$unpacked
    fi
    echo "Fashion-MNIST from $DATA_SRC, read from $DATA"
}
DATA_OK=""
if step data 60 prepare_data; then DATA_OK=1; fi

# ---- training ----
train() { # NAME MODEL DEVICE CAP_SECONDS
    if [ -z "$DATA_OK" ]; then record "$1" skipped "" 0 "no data (see the data step)" ""; return; fi
    need "$1" "$CLI" || return
    step "$1" "$4" "$CLI" train --model "$2" --epochs 1 --device "$3" --data "$DATA" --json \
        "${TRAIN_LIMIT[@]}"
}
train train-mlp "mlp" "$DEV_FULL" 90
train train-mlp-cpu "mlp" cpu 60
train train-cnn "cnn" "$DEV_FULL" 120
train train-lstm "lstm" "$DEV_FULL" 120

# ---- PyTorch on the same device, where the machine's python3 has it ----
# bench/torch_train.py: the same models, batches and optimisers.
torch_train() { # NAME MODEL CAP_SECONDS
    if [ -z "$DATA_OK" ]; then record "$1" skipped "" 0 "no data (see the data step)" ""; return; fi
    step "$1" "$3" python3 "$ROOT/bench/torch_train.py" --model "$2" --epochs 1 --device "$DEV_FULL" \
        --data "$DATA_SRC" --json "${TRAIN_LIMIT[@]}"
}
if [ "$KIND" = cuda ] && python3 -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' \
    >/dev/null 2>&1; then
    for m in mlp cnn lstm; do torch_train "torch-$m" "$m" 60; done
else
    record torch skipped "" 0 "no python3 with PyTorch on CUDA" ""
fi

# ---- report ----
GPU_INFO=""
if command -v nvidia-smi >/dev/null 2>&1; then
    GPU_INFO=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total \
        --format=csv,noheader 2>/dev/null | head -n 1)
fi
COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || true)
{
    while IFS=$'\t' read -r name status rc secs note cmd; do
        [ "$note" = - ] && note=""
        [ "$cmd" = - ] && cmd=""
        echo "===== $name: $status ($secs s) $note"
        echo "\$ $cmd"
        [ -f "$LOGS/$name.out" ] && cat "$LOGS/$name.out"
        [ -s "$LOGS/$name.err" ] && { echo "----- stderr"; cat "$LOGS/$name.err"; }
    done <"$STEPS"
} >"$COMBINED"

python3 - "$STEPS" "$LOGS" "$REPORT" "$DEV_FULL" "${QUICK:-}" "$GPU_INFO" "$COMMIT" \
    "$BUDGET_S" "$(elapsed)" "$WITH_CUDA" "$DATA" "$COMBINED" <<'EOF'
import datetime, json, os, re, socket, sys

(steps_tsv, logs, report, device, quick, gpu_info, commit, budget, total,
 with_cuda, data, combined) = sys.argv[1:13]


def read(name, ext):
    try:
        with open(os.path.join(logs, name + "." + ext), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def last_json(text):
    """The last line of text that parses as a JSON object."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") or line.startswith("["):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


steps = []
with open(steps_tsv) as f:
    for line in f:
        name, status, rc, secs, note, cmd = (line.rstrip("\n").split("\t") + [""] * 6)[:6]
        rc, note, cmd = (None if v in ("", "-") else v for v in (rc, note, cmd))
        s = {"name": name, "status": status, "rc": int(rc) if rc else None,
             "seconds": float(secs or 0), "note": note, "command": cmd}
        if status not in ("ok", "skipped"):
            tail = (read(name, "err") + read(name, "out")).splitlines()[-20:]
            s["log_tail"] = tail
        steps.append(s)
by_name = {s["name"]: s for s in steps}

out = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "host": socket.gethostname(),
    "device": device,
    "quick": bool(quick),
    "chutney_with_cuda": with_cuda,
    "commit": commit or None,
    "budget_seconds": int(budget),
    "total_seconds": int(total),
    "gpu": None,
    "data": data,
    "log": combined,
}
if gpu_info:
    parts = [p.strip() for p in gpu_info.split(",")]
    out["gpu"] = {"name": parts[0], "driver": parts[1] if len(parts) > 1 else None,
                  "memory": parts[2] if len(parts) > 2 else None}

out["devices"] = last_json(read("devices", "out")) if "devices" in by_name else None

# Conformance: the summary line, the per-device lines it prints (one per
# device kind, or "skipped: no <kind> ..."), and the failures attributed to
# the device kind their message names.
conf = None
if by_name.get("conformance", {}).get("status") not in (None, "skipped"):
    text = read("conformance", "out") + "\n" + read("conformance", "err")
    conf = {"status": by_name["conformance"]["status"], "tests": None, "checks": None,
            "failures": None, "lines": [], "skipped": [], "failed_tests": [], "kinds": {}}
    m = re.search(r"(\d+) tests, (\d+) checks, (\d+) failures", text)
    if m:
        conf["tests"], conf["checks"], conf["failures"] = map(int, m.groups())
    kinds = {}
    for line in text.splitlines():
        if line.startswith("conformance") or line.startswith("NVRTC"):
            conf["lines"].append(line)
            # "conformance on cuda:0: 278 cases, 2540 runs, 5560 comparisons ..."
            m = re.match(r"conformance on (\w+):\d+: (\d+) cases, (\d+) runs, (\d+) comparisons",
                         line)
            if m:
                v = kinds.setdefault(m.group(1), {"failures": 0})
                v["cases"] = int(m.group(2))
                v["runs"] = v.get("runs", 0) + int(m.group(3))
                v["comparisons"] = v.get("comparisons", 0) + int(m.group(4))
        if line.startswith("skipped"):
            conf["skipped"].append(line)
            m = re.search(r"no (\w+)", line)
            if m:
                k = m.group(1).lower()
                k = "opencl" if k.startswith("opencl") else k
                kinds.setdefault(k, {"failures": 0})["skipped"] = True
        m = re.match(r"(test_\w+)\s+FAILED$", line)
        if m:
            conf["failed_tests"].append(m.group(1))
        if re.match(r"\S+:\d+: \[", line):  # a failed check
            ks = set(re.findall(r"\b(cpu|opencl|cuda):\d+", line))
            ks |= {k for k in re.findall(r"on the (\w+) backend", line)}
            ks.discard("cpu")
            for k in ks or {"other"}:
                kinds.setdefault(k, {"failures": 0})["failures"] += 1
    # Device kinds the machine has but no failure named: all passed.
    for d in out["devices"] or []:
        k = str(d.get("device", "")).split(":")[0]
        if k and k != "cpu":
            kinds.setdefault(k, {"failures": 0})
    target = device.split(":")[0]
    if target != "cpu":
        kinds.setdefault(target, {"failures": 0})
    for k, v in kinds.items():
        # A kind the machine lacks ran nothing: not a pass.
        v["ran"] = any(str(d.get("device", "")).startswith(k + ":") for d in out["devices"] or [])
        v["passed"] = (v["ran"] and v["failures"] == 0 and not v.get("skipped")
                       and by_name["conformance"]["status"] == "ok")
    conf["kinds"] = kinds
out["conformance"] = conf

# Parsed whatever the status: bench_gpu prints its figures before failing
# on a product that disagrees with the CPU.
out["bench"] = last_json(read("bench", "out")) if "bench" in by_name else None

train = []
for name in ("train-mlp", "train-mlp-cpu", "train-cnn", "train-lstm",
             "torch-mlp", "torch-cnn", "torch-lstm"):
    s = by_name.get(name)
    if not s:
        continue
    j = last_json(read(name, "out"))
    row = {"step": name, "status": s["status"], "seconds": s["seconds"]}
    if j:
        for k in ("model", "device", "mode", "epochs", "test_accuracy", "samples_per_sec",
                  "seconds", "final_loss", "peak_rss_mb", "framework"):
            if k in j:
                row[k] = j[k]
    train.append(row)
out["train"] = train
sps = {r["step"]: r.get("samples_per_sec") for r in train}
out["mlp_device_over_cpu"] = (round(sps["train-mlp"] / sps["train-mlp-cpu"], 3)
                              if sps.get("train-mlp") and sps.get("train-mlp-cpu") else None)
out["chutney_over_torch"] = {
    m: round(sps["train-" + m] / sps["torch-" + m], 3)
    for m in ("mlp", "cnn", "lstm") if sps.get("train-" + m) and sps.get("torch-" + m)}
out["steps"] = steps
# Steps can all pass without the device (the suite skips a missing kind).
out["device_present"] = any(d.get("device") == device for d in out["devices"] or [])
out["ok"] = all(s["status"] == "ok" for s in steps) and out["device_present"]

tmp = report + ".tmp"
with open(tmp, "w") as f:
    json.dump(out, f, indent=2)
    f.write("\n")
os.replace(tmp, report)

# ---- summary ----
print()
print("gpu-check %s on %s%s (%s s of %s)" % (
    "PASSED" if out["ok"] else "FAILED", device, " (quick)" if quick else "",
    total, budget))
if out["gpu"]:
    print("  GPU: %s, driver %s, %s" % (out["gpu"]["name"], out["gpu"]["driver"],
                                        out["gpu"]["memory"]))
bad = [s for s in steps if s["status"] != "ok"]
print("  steps: %d ok%s" % (len(steps) - len(bad), "".join(
    ", %s %s%s" % (s["name"], s["status"], " (%s)" % s["note"] if s["note"] else "")
    for s in bad)))
if conf:
    counts = ("%s tests, %s checks, %s failures" % (conf["tests"], conf["checks"], conf["failures"])
              if conf["tests"] is not None else "no summary line (%s)" % conf["status"])
    print("  conformance: %s; %s" % (
        counts,
        ", ".join("%s: %s" % (k, "not run (no such device here)" if not v["ran"] else
                              "skipped" if v.get("skipped") else
                              "%s runs, %d failures" % (v.get("runs", "?"), v["failures"]))
                  for k, v in
                  sorted(conf["kinds"].items())) or "no device kinds"))
if not out["device_present"]:
    print("  %s is not among the devices `chutney devices` lists" % device)
b = out["bench"]
if b:
    print("  gemm TFLOP/s: " + ", ".join(
        "n=%d %.2f%s" % (g["n"], g["tflops"] or 0,
                         " (cuBLAS %.2f, x%.2f)" % (g["cublas_tflops"], g["ratio"])
                         if g.get("cublas_tflops") else "") for g in b["gemm"]))
    e = b["elementwise"]
    memcpy = (", cudaMemcpy %.1f" % e["cuda_memcpy_gbs"]) if e.get("cuda_memcpy_gbs") else ""
    print("  GB/s%s, copy %.1f, add %.1f, exp %.1f, fused %.1f (fractions of the %s:"
          " %.2f %.2f %.2f %.2f); fused program: %d step(s), %d on the CPU" % (
              memcpy, e["copy_gbs"], e["add_gbs"], e["exp_gbs"], e["fused_gbs"],
              e["reference"], e["copy_frac"], e["add_frac"], e["exp_frac"], e["fused_frac"],
              e["fused_program_steps"], e["fallbacks"]))
    print("  eager overhead: %.2f us per op" % b["overhead_us"])
for r in train:
    if "samples_per_sec" in r:
        print("  %s %-4s on %-9s %9.0f samples/s, test accuracy %.2f%%" % (
            "torch" if r["step"].startswith("torch") else "train",
            r["model"], r["device"], r["samples_per_sec"], 100 * r["test_accuracy"]))
sps = {r["step"]: r.get("samples_per_sec") for r in train}
out_ratios = {m: round(sps["train-" + m] / sps["torch-" + m], 3)
              for m in ("mlp", "cnn", "lstm") if sps.get("train-" + m) and sps.get("torch-" + m)}
if out_ratios:
    print("  chutney / PyTorch on %s: %s" % (device, ", ".join(
        "%s x%.2f" % kv for kv in out_ratios.items())))
if out["mlp_device_over_cpu"]:
    print("  mlp %s / cpu (this machine's cores): x%.2f" % (device, out["mlp_device_over_cpu"]))
print("  report: %s\n  log:    %s" % (report, combined))
sys.exit(0 if out["ok"] else 1)
EOF
