#!/bin/sh
# --profile and `chutney profile` from the outside: a tiny training run
# writes a Chrome trace that JSON readers accept, the table lists the
# model's convolutions and products with shares summing to 100%, and the
# options' mistakes fail before any work.
#   profile_cli.sh path/to/chutney
set -u
CHUTNEY=$1
DATA=${CN_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-prof.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail, expect_exit

# The data uncompressed, so that a build without zlib runs this too.
mkdir -p "$tmp/data"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    gzip -dc "$DATA/$f.gz" >"$tmp/data/$f" || { echo "no Fashion-MNIST in $DATA"; exit 1; }
done

# The table's rows: the share column summed (the name takes 44 columns and
# may hold spaces, so the figures are read after it).
share_sum() {
    awk 'NR > 2 && $1 != "total" && $1 != "memory:" { split(substr($0, 45), f, " "); s += f[4] }
         END { printf "%.1f", s }' "$1"
}

check_table() { # DESCRIPTION TABLE ROW...
    desc=$1 table=$2
    shift 2
    for row in "$@"; do
        grep -q "^$row" "$table" || fail "$desc: no $row row"
    done
    s=$(share_sum "$table")
    awk -v s="$s" 'BEGIN { exit !(s >= 99.5 && s <= 100.5) }' || fail "$desc: shares sum to $s%"
    grep -q '^memory: high-water [0-9.]* MB' "$table" || fail "$desc: no memory high-water mark"
    grep -q '^total ' "$table" || fail "$desc: no total row"
    echo "ok: $desc: shares sum to $s%"
}

# Static mode (the default): program steps, convolutions fused with relu.
if "$CHUTNEY" train --model cnn --limit 256 --epochs 1 --data "$tmp/data" \
        --profile "$tmp/cnn.json" >"$tmp/out" 2>"$tmp/err"; then
    grep -q "profile: steps 3 to 4 recorded in" "$tmp/err" || fail "train --profile: no summary line"
    if [ -x /usr/bin/python3 ]; then
        /usr/bin/python3 - "$tmp/cnn.json" <<'EOF' || fail "train --profile: the trace is not what Perfetto reads"
import json, sys
d = json.load(open(sys.argv[1]))
x = [e for e in d["traceEvents"] if e["ph"] == "X"]
assert d["displayTimeUnit"] == "ms"
assert all(isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and "tid" in e and "pid" in e for e in x)
steps = [e for e in x if e["name"] == "train_step"]
assert len(steps) == 2, len(steps)
conv = [e for e in x if e["name"].startswith("fused[conv2d")]
assert conv and all(e["args"]["flops"] > 0 and e["args"]["bytes"] > 0 for e in conv)
assert any(e["ph"] == "C" and e["name"] == "memory" for e in d["traceEvents"])
EOF
    fi
    "$CHUTNEY" profile "$tmp/cnn.json" >"$tmp/table" 2>"$tmp/err" || fail "profile: $(cat "$tmp/err")"
    check_table "profile of train --model cnn" "$tmp/table" "fused\[conv2d" "conv2d_weight_grad" \
        "fused\[matmul" "matmul"
else
    fail "train --model cnn --profile: $(cat "$tmp/err")"
fi

# Eager mode: ops as called, one step.
if "$CHUTNEY" train --model cnn --limit 192 --epochs 1 --mode eager --data "$tmp/data" \
        --profile "$tmp/eager.json" --profile-steps 1 >"$tmp/out" 2>"$tmp/err"; then
    "$CHUTNEY" profile "$tmp/eager.json" >"$tmp/table" 2>"$tmp/err" || fail "profile: $(cat "$tmp/err")"
    check_table "profile of train --mode eager" "$tmp/table" "conv2d " "matmul " \
        "backward (outside ops)" "optimizer.step (outside ops)"
else
    fail "train --mode eager --profile: $(cat "$tmp/err")"
fi

expect_exit "--profile in a missing directory" 1 "--profile" \
    "$CHUTNEY" train --model mlp --data "$tmp/data" --profile "$tmp/nowhere/t.json"
expect_exit "--profile-steps 0" 2 "--profile-steps" \
    "$CHUTNEY" train --model mlp --data "$tmp/data" --profile "$tmp/t.json" --profile-steps 0
"$CHUTNEY" profile --help >"$tmp/out" 2>&1 && grep -q "usage: chutney profile TRACE.json" "$tmp/out" \
    || fail "profile --help"
expect_exit "profile with two traces" 2 "unexpected argument" "$CHUTNEY" profile "$tmp/cnn.json" "$tmp/cnn.json"
expect_exit "profile without a trace" 2 "no trace given" "$CHUTNEY" profile
expect_exit "profile of a missing file" 1 "$tmp/none.json" "$CHUTNEY" profile "$tmp/none.json"
printf '{"traceEvents": [' >"$tmp/cut.json"
expect_exit "profile of a cut file" 1 "is not JSON" "$CHUTNEY" profile "$tmp/cut.json"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all passed"
