#!/bin/sh
# Data-parallel scaling on this machine: for mlp, cnn and lstm, one epoch
# as 1 process x 1 thread, 1 process x 2 threads, and 2 MPI ranks x 1
# thread on the same global batch (each rank half of it), interleaved,
# REPEATS times; the median samples/s of each, the ratios, and the share
# of a 2-rank step spent in the averaging (the ranks' collectives,
# waiting for each other included).
#   bench/dist_bench.sh [BUILD_DIR] [REPEATS]        (default build, 3)
# Writes bench/results/dist.json and prints a markdown table.
set -u
BUILD=${1:-build}
REPEATS=${2:-3}
CHUTNEY=$BUILD/chutney
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
out=$(mktemp -d "${TMPDIR:-/tmp}/chutney-dist-bench.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
mkdir -p bench/results

field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" "$1" | tail -n 1; }

# model global-batch limit
for spec in "mlp 128 60000" "cnn 64 20000" "lstm 128 20000"; do
    set -- $spec
    m=$1 gb=$2 lim=$3
    for r in $(seq 1 "$REPEATS"); do
        "$CHUTNEY" train --model "$m" --epochs 1 --limit "$lim" --batch "$gb" --threads 1 --json \
            >"$out/$m.1x1.$r" 2>/dev/null
        "$CHUTNEY" train --model "$m" --epochs 1 --limit "$lim" --batch "$gb" --threads 2 --json \
            >"$out/$m.1x2.$r" 2>/dev/null
        mpirun --oversubscribe -np 2 "$CHUTNEY" train --model "$m" --epochs 1 --limit "$lim" \
            --batch $((gb / 2)) --threads 1 --json --distributed >"$out/$m.2x1.$r" 2>"$out/$m.2x1.$r.err"
    done
done

python3 - "$out" "$REPEATS" <<'EOF'
import json, re, statistics, sys, os, datetime, subprocess
out, reps = sys.argv[1], int(sys.argv[2])
def js(path):
    for line in open(path):
        if line.startswith('{'):
            return json.loads(line)
    return None
rows = {}
print("| model | 1x1 samples/s | 1x2 samples/s | 2x1 samples/s | 2x1 / 1x1 | 2x1 / 1x2 | efficiency | averaging share (2x1) | test accuracy 1x1 / 2x1 |")
print("|---|---|---|---|---|---|---|---|---|")
for m in ("mlp", "cnn", "lstm"):
    sps = {c: [] for c in ("1x1", "1x2", "2x1")}
    acc = {c: [] for c in ("1x1", "2x1")}
    share = []
    for r in range(1, reps + 1):
        for c in sps:
            j = js(f"{out}/{m}.{c}.{r}")
            if j:
                sps[c].append(j["samples_per_sec"])
                if c in acc: acc[c].append(j["test_accuracy"])
                if c == "2x1":
                    err = open(f"{out}/{m}.2x1.{r}.err").read()
                    g = re.search(r"([0-9.]+) s in collectives", err)
                    if g and j["seconds"] > 0: share.append(float(g.group(1)) / j["seconds"])
    med = {c: statistics.median(v) if v else float("nan") for c, v in sps.items()}
    r21, r22 = med["2x1"] / med["1x1"], med["2x1"] / med["1x2"]
    sh = statistics.median(share) if share else float("nan")
    a1 = statistics.median(acc["1x1"]) if acc["1x1"] else float("nan")
    a2 = statistics.median(acc["2x1"]) if acc["2x1"] else float("nan")
    rows[m] = {"samples_per_sec": med, "ratio_2x1_1x1": r21, "ratio_2x1_1x2": r22,
               "efficiency": r21 / 2, "averaging_share": sh, "accuracy_1x1": a1, "accuracy_2x1": a2,
               "runs": sps}
    print(f"| {m} | {med['1x1']:.0f} | {med['1x2']:.0f} | {med['2x1']:.0f} | {r21:.2f}x | {r22:.2f}x | {r21/2:.0%} | {sh:.0%} | {a1:.4f} / {a2:.4f} |")
cpu = ""
try:
    cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
except Exception:
    pass
json.dump({"date": datetime.date.today().isoformat(), "cpu": cpu, "repeats": reps, "models": rows},
          open("bench/results/dist.json", "w"), indent=1)
print(f"\n({reps} interleaved repeats, medians; {cpu}; bench/results/dist.json)")
EOF
