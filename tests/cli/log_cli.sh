#!/bin/sh
# `chutney train --log FILE --tensorboard DIR` and `chutney plot` from the
# outside, on tiny runs:
#   - the log's steps (ceil(N / batch) per epoch), each epoch's train_loss
#     the mean of its steps, the last step's loss the --json final loss, the
#     test accuracy or validation loss --json reports (check_log.py), for a
#     classifier in static and eager mode (the same losses and gradient
#     norms) and for the GPT, whose clipping measures the norm itself (the
#     same norms as the computation without clipping);
#   - the event file read back by an independent reader (read_tfevents.py:
#     TFRecord CRCs, the protobuf wire format, the scalars equal the log's);
#   - a log that cannot be written: at the start, status 1 before any
#     training; during the run (/dev/full), training goes on and ends, then
#     status 1;
#   - `chutney plot`: a PNG of the asked size with the curves' colours
#     across their panels (check_png.py), and its errors;
#   - distributed (2 MPI ranks, where there are): rank 0 alone writes.
# A build without protobuf-c or cairo checks that the option says so.
#   log_cli.sh path/to/chutney
set -u
# shellcheck disable=SC2086 # $run, $gpt, $tb: options are words
CHUTNEY=$1
HERE=$(dirname "$0")
DATA=${CN_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
PY=/usr/bin/python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-log.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$HERE/lib.sh" # fail, expect_error, expect_exit, cat_text

unpack_fashion "$DATA" "$tmp/data" 512 || { echo "FAIL: cannot unpack $DATA"; exit 1; }
"$CHUTNEY" --version >"$tmp/version" 2>&1
have() { grep -Eq "^  $1 +yes " "$tmp/version"; }
for f in tensorboard cairo; do
    grep -Eq "^  $f +(yes|no) " "$tmp/version" || fail "--version does not list $f"
done

# 512 images in batches of 100: 6 steps per epoch, the last one of 12.
run="--model mlp --limit 512 --batch 100 --epochs 2 --threads 1 --seed 4 --json --data $tmp/data"
tb=""
have tensorboard && tb="--tensorboard $tmp/tb"
# shellcheck disable=SC2086 # options are words
"$CHUTNEY" train $run --log "$tmp/static.jsonl" $tb >"$tmp/static.out" 2>"$tmp/err" ||
    { fail "train --log"; cat "$tmp/err"; }
$PY "$HERE/check_log.py" "$tmp/static.jsonl" "$tmp/static.out" 512 100 2 || fails=$((fails + 1))
# shellcheck disable=SC2086
"$CHUTNEY" train $run --mode eager --log "$tmp/eager.jsonl" >"$tmp/eager.out" 2>"$tmp/err" ||
    { fail "train --mode eager --log"; cat "$tmp/err"; }
$PY "$HERE/check_log.py" "$tmp/eager.jsonl" "$tmp/eager.out" 512 100 2 || fails=$((fails + 1))

# Static and eager steps give the same losses; the gradient norms agree.
# $1, $2: logs; $3: the relative tolerance of the norms.
same_steps() {
    $PY - "$1" "$2" "$3" <<'EOF'
import json, sys
a, b = ([json.loads(l) for l in open(p) if '"event":"step"' in l] for p in sys.argv[1:3])
tol = float(sys.argv[3])
bad = [(x["step"], x["loss"], y["loss"], x["grad_norm"], y["grad_norm"]) for x, y in zip(a, b)
       if x["loss"] != y["loss"] or abs(x["grad_norm"] - y["grad_norm"]) > tol * x["grad_norm"]]
if len(a) != len(b) or bad or not a:
    print("FAIL: %s and %s differ (step, losses, norms): %s" % (sys.argv[1], sys.argv[2], bad[:3]))
    sys.exit(1)
print("ok: %s and %s: the same %d losses, gradient norms within %g" % (
    sys.argv[1].rsplit("/", 1)[-1], sys.argv[2].rsplit("/", 1)[-1], len(a), tol))
EOF
}
same_steps "$tmp/static.jsonl" "$tmp/eager.jsonl" 1e-5 || fails=$((fails + 1))

# The event file, read without TensorBoard.
if have tensorboard; then
    set -- "$tmp"/tb/events.out.tfevents.*
    if [ $# -ne 1 ] || [ ! -f "$1" ]; then
        fail "--tensorboard $tmp/tb: expected one event file, found: $*"
    else
        $PY "$HERE/read_tfevents.py" "$1" "$tmp/static.jsonl" || fails=$((fails + 1))
    fi
    expect_exit "--tensorboard a file" 1 "--tensorboard $tmp/static.out" \
        "$CHUTNEY" train $run --tensorboard "$tmp/static.out"
else
    expect_exit "--tensorboard in a build without it" 1 "no TensorBoard writer" \
        "$CHUTNEY" train $run --tensorboard "$tmp/tb"
fi

# The GPT: static with clipping (the norm the clipping measured) and eager
# with --clip 1000, which never clips here (the norm computed for the log):
# the same losses, the same norms.
cat_text "$tmp/text.txt" 400
gpt="--model gpt --data $tmp/text.txt --vocab 300 --context 16 --layers 1 --heads 2 --embed 16
     --batch 8 --threads 1 --seed 3 --limit 36 --epochs 1 --json"
# shellcheck disable=SC2086
"$CHUTNEY" train $gpt --clip 1000 --log "$tmp/gpt.jsonl" $tb >"$tmp/gpt.out" 2>"$tmp/err" ||
    { fail "train --model gpt --log"; cat "$tmp/err"; }
$PY "$HERE/check_log.py" "$tmp/gpt.jsonl" "$tmp/gpt.out" 36 8 1 || fails=$((fails + 1))
# shellcheck disable=SC2086
"$CHUTNEY" train $gpt --mode eager --clip 0 --log "$tmp/gpt0.jsonl" >"$tmp/gpt0.out" 2>"$tmp/err" ||
    { fail "train --model gpt --clip 0 --log"; cat "$tmp/err"; }
same_steps "$tmp/gpt.jsonl" "$tmp/gpt0.jsonl" 1e-5 || fails=$((fails + 1))

# Files that cannot be written: at the start, before any data is read...
expect_exit "--log into a missing directory" 1 "--log $tmp/nowhere/log" \
    "$CHUTNEY" train $run --log "$tmp/nowhere/log"
expect_exit "--log without a value" 2 "--log needs a value" "$CHUTNEY" train $run --log
# ... and during the run (/dev/full: every write fails): training ends,
# its results are printed, the status says the log is incomplete.
"$CHUTNEY" train $run --log /dev/full >"$tmp/full.out" 2>"$tmp/full.err"
rc=$?
if [ $rc -eq 1 ] && grep -q 'cannot write' "$tmp/full.err" && grep -q '"final_loss":[0-9]' "$tmp/full.out"; then
    echo "ok: --log /dev/full: training ends, then status 1: $(grep 'cannot write' "$tmp/full.err")"
else
    fail "--log /dev/full: status $rc"; cat "$tmp/full.err" "$tmp/full.out"
fi

# chutney plot.
if have cairo; then
    "$CHUTNEY" plot "$tmp/static.jsonl" -o "$tmp/curves.png" --width 640 --height 320 >"$tmp/out" 2>"$tmp/err" ||
        { fail "plot"; cat "$tmp/err"; }
    grep -q 'curves.png: 12 steps, 2 epochs' "$tmp/out" || { fail "plot's summary:"; cat "$tmp/out"; }
    # The step loss across the left panel (more columns than its legend's
    # swatch, 22), the test accuracy across the right one (their colours
    # are in tools/plot.c), white around them.
    $PY "$HERE/check_png.py" "$tmp/curves.png" 640 320 "loss=31,119,180:0.1-0.5:50" \
        "test_accuracy=214,39,40:0.6-1:80" "background=255,255,255:0-1:640" || fails=$((fails + 1))
    # The GPT's: the validation loss, and the perplexity on the right; the
    # default name is the log's with .png.
    "$CHUTNEY" plot "$tmp/gpt.jsonl" >"$tmp/out" 2>"$tmp/err" || { fail "plot gpt"; cat "$tmp/err"; }
    [ -f "$tmp/gpt.png" ] && $PY "$HERE/check_png.py" "$tmp/gpt.png" 1200 480 \
        "loss=31,119,180:0.05-0.5:100" "val_loss=44,160,44:0-0.5:5" || fails=$((fails + 1))
    expect_exit "plot a missing log" 1 "$tmp/none.jsonl" "$CHUTNEY" plot "$tmp/none.jsonl" -o "$tmp/x.png"
    expect_exit "plot a file that is not a log" 1 "not a JSON object" "$CHUTNEY" plot "$tmp/text.txt" -o "$tmp/x.png"
    expect_exit "plot into a missing directory" 1 "does not exist" "$CHUTNEY" plot "$tmp/static.jsonl" -o "$tmp/nowhere/x.png"
else
    expect_exit "plot in a build without cairo" 1 "no cairo" "$CHUTNEY" plot "$tmp/static.jsonl" -o "$tmp/curves.png"
fi
"$CHUTNEY" help plot | grep -q '^usage: chutney plot LOG' || fail "chutney help plot"
expect_exit "plot without a log" 2 "which log" "$CHUTNEY" plot
expect_exit "plot --bogus" 2 "unknown option" "$CHUTNEY" plot "$tmp/static.jsonl" --bogus
expect_exit "plot --width 5" 2 "--width" "$CHUTNEY" plot "$tmp/static.jsonl" --width 5

# Distributed: rank 0 writes the log; the other rank's steps are not in it.
if command -v mpirun >/dev/null 2>&1 && have mpi; then
    # CI runs as root; Open MPI keeps memory to the end, which the leak
    # checker cannot attribute (tests/CMakeLists.txt: the MPI tests check
    # everything but leaks under the sanitizers).
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0" \
    mpirun --oversubscribe -np 2 "$CHUTNEY" train --model mlp --limit 512 --batch 32 --epochs 1 \
        --threads 1 --json --data "$tmp/data" --distributed --log "$tmp/dist.jsonl" \
        >"$tmp/dist.out" 2>"$tmp/err" || { fail "train --distributed --log"; cat "$tmp/err"; }
    # 512 images, 2 ranks of batch 32: 8 steps, each of 64 images.
    starts=$(grep -c '"event":"start".*"ranks":2,.*"batch":64,"steps_per_epoch":8' "$tmp/dist.jsonl")
    steps=$(grep -c '"event":"step"' "$tmp/dist.jsonl")
    acc=$(sed -n 's/.*"test_accuracy":\([0-9.]*\).*/\1/p' "$tmp/dist.out")
    acc_log=$($PY -c "import json,sys; print('%.4f' % [json.loads(l) for l in open(sys.argv[1])][-1]['test_accuracy'])" "$tmp/dist.jsonl")
    if [ "$starts" = 1 ] && [ "$steps" = 8 ] && [ -n "$acc" ] && [ "$acc" = "$acc_log" ]; then
        echo "ok: --distributed --log: rank 0 wrote 1 start line, 8 steps, test accuracy $acc as --json"
    else
        fail "--distributed --log: $starts start lines, $steps steps, accuracy $acc_log vs --json $acc"
        cat "$tmp/dist.jsonl"
    fi
else
    echo "ok: --distributed --log not checked here (no MPI)"
fi

if [ "$fails" -gt 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "all log checks passed"
