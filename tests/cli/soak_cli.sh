#!/bin/sh
# Training killed at random moments, again and again, ends where an
# uninterrupted run ends: each run resumes the last checkpoint (--save-every
# 7 steps, SIGTERM's own save, or the last epoch's), is killed after a random
# delay (SIGKILL twice in three, SIGTERM else; a kill may land in the middle
# of a checkpoint's write), and the final checkpoint must hold the same
# tensors, bit for bit, and the same progress as the reference run's; no
# temporary file of a killed save may be left behind. The delays come from a
# fixed seed, so the sequence of attempts is the same each time (where they
# land in training depends on the machine's speed: any landing must pass).
#   soak_cli.sh path/to/chutney
set -u
CHUTNEY=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-soak.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail

PY=/usr/bin/python3
mkdir -p "$tmp/ref" "$tmp/run"
random_idx "$tmp/data" 11 2048 64 || { echo "FAIL: cannot write the data"; exit 1; }

# 128 steps an epoch, 2 epochs: a second or two on one thread.
args="--model cnn --data $tmp/data --threads 1 --seed 5 --batch 16 --epochs 2 --json"
"$CHUTNEY" train $args --save "$tmp/ref/ref.ckpt" >"$tmp/out" 2>"$tmp/err" ||
    { fail "the uninterrupted run"; cat "$tmp/err"; exit 1; }

# Delays from 0.15 to 1.2 s, and the signal of each attempt.
plan=$($PY -c '
import random
r = random.Random(2026)
for _ in range(30):
    print("%.2f %s" % (r.uniform(0.15, 1.2), "TERM" if r.randrange(3) == 0 else "KILL"))')

ckpt="$tmp/run/run.ckpt"
kills=0 terms=0 finished=0
echo "$plan" >"$tmp/plan"
while read -r delay sig; do
    resume=""
    [ -f "$ckpt" ] && resume="--resume $ckpt"
    "$CHUTNEY" train $args --save "$ckpt" --save-every 7 $resume >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    sleep "$delay"
    kill -s "$sig" "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    rc=$?
    case $rc in
    0) finished=1; break ;;
    137) kills=$((kills + 1)) ;;
    143) terms=$((terms + 1)) ;;
    *) fail "attempt after ${delay}s ($sig): exit status $rc"; cat "$tmp/err"; exit 1 ;;
    esac
done <"$tmp/plan"
if [ "$finished" -eq 0 ]; then
    # Every planned attempt was killed: the last run goes to the end.
    resume=""
    [ -f "$ckpt" ] && resume="--resume $ckpt"
    "$CHUTNEY" train $args --save "$ckpt" $resume >"$tmp/out" 2>"$tmp/err" ||
        { fail "the final run"; cat "$tmp/err"; exit 1; }
fi
echo "ok: $kills SIGKILLs and $terms SIGTERMs before the run finished"

$PY - "$tmp/ref/ref.ckpt" "$ckpt" <<'EOF2' || fail "the resumed run's checkpoint differs from the uninterrupted run's"
import json, struct, sys
def read(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return h.pop("__metadata__"), {k: b[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]]
                                   for k, e in h.items()}
(ma, ta), (mb, tb) = read(sys.argv[1]), read(sys.argv[2])
bad = sorted(set(ta) ^ set(tb)) + [k for k in ta if k in tb and ta[k] != tb[k]]
for k in ("epochs_done", "rng_seed", "rng_offset", "batches_done"):
    if ma.get(k) != mb.get(k):
        bad.append("metadata %s: %r vs %r" % (k, ma.get(k), mb.get(k)))
if bad:
    print("differs:", ", ".join(bad[:10]))
    sys.exit(1)
print("ok: %d tensors equal bit for bit, progress equal" % len(ta))
EOF2
left=$(ls "$tmp/run" | grep -v '^run\.ckpt$')
[ -z "$left" ] || fail "files left beside the checkpoint: $left"
[ "$fails" -eq 0 ] || exit 1
