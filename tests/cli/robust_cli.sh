#!/bin/sh
# `chutney train` when things around it go wrong: checkpoint metadata that
# is not a number, --lr and --batch given on resume, SIGINT/SIGTERM in the
# middle of an epoch (a checkpoint that resumes exactly), a second signal,
# FIFOs given as files, and a standard output that cannot be written.
# The data is a small made-up IDX set, written here.
#   robust_cli.sh path/to/chutney
set -u
CHUTNEY=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-robust.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail, expect_exit

PY=/usr/bin/python3
# 1024 training and 64 test images of 28 x 28, labels 0..9.
random_idx "$tmp/data" 7 1024 64 || { echo "FAIL: cannot write the data"; exit 1; }

# meta FILE KEY: a metadata value of a safetensors file ("" if absent).
# setmeta IN OUT KEY VALUE: a copy of IN with one metadata value replaced.
# optlr FILE: the lr in the optimiser state the file holds.
cat >"$tmp/st.py" <<'EOF'
import json, struct, sys
def read(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]
cmd, p = sys.argv[1], sys.argv[2]
h, data = read(p)
if cmd == "meta":
    print(h.get("__metadata__", {}).get(sys.argv[3], ""))
elif cmd == "set":
    # A hand-edited file, as another writer's: without Chutney's checksum.
    h["__metadata__"].pop("chutney.crc32c", None)
    h["__metadata__"][sys.argv[4]] = sys.argv[5]
    j = json.dumps(h).encode()
    j += b" " * (-len(j) % 8)
    open(sys.argv[3], "wb").write(struct.pack("<Q", len(j)) + j + data)
elif cmd == "optlr":
    a, b = h["optimizer.lr"]["data_offsets"]
    print("%g" % struct.unpack("<d", data[a:b])[0])
EOF
meta() { $PY "$tmp/st.py" meta "$1" "$2"; }
setmeta() { $PY "$tmp/st.py" set "$1" "$2" "$3" "$4"; }
optlr() { $PY "$tmp/st.py" optlr "$1"; }

# small: 8 batches an epoch, for what needs a checkpoint but no time;
# common: 128, so that a signal mostly lands in the middle of an epoch.
common="--model mlp --data $tmp/data --threads 1 --seed 3 --batch 8"
small="$common --limit 64"
"$CHUTNEY" train $small --epochs 1 --lr 0.02 --save "$tmp/one.ckpt" >/dev/null 2>"$tmp/err" ||
    { fail "train --save"; cat "$tmp/err"; }

# ---- checkpoint metadata is read strictly ----
for v in -1 abc 1e20 " 1" 2147483648; do
    setmeta "$tmp/one.ckpt" "$tmp/bad.ckpt" epochs_done "$v"
    expect_exit "epochs_done '$v'" 1 "metadata epochs_done is '$v'" \
        "$CHUTNEY" train $small --epochs 2 --resume "$tmp/bad.ckpt"
done
setmeta "$tmp/one.ckpt" "$tmp/bad.ckpt" rng_offset "12x"
expect_exit "rng_offset '12x'" 1 "metadata rng_offset is '12x'" \
    "$CHUTNEY" train $small --epochs 2 --resume "$tmp/bad.ckpt"
setmeta "$tmp/one.ckpt" "$tmp/bad.ckpt" batch "0"
expect_exit "batch '0'" 1 "metadata batch is '0'" \
    "$CHUTNEY" train $small --epochs 2 --resume "$tmp/bad.ckpt"

# ---- a checkpoint damaged after its save: the checksum catches it ----
$PY -c '
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[-3] ^= 0x10
open(sys.argv[2], "wb").write(b)' "$tmp/one.ckpt" "$tmp/bad.ckpt"
expect_exit "a flipped bit" 1 "is corrupt" "$CHUTNEY" train $small --epochs 2 --resume "$tmp/bad.ckpt"
expect_exit "a flipped bit, eval" 1 "is corrupt" "$CHUTNEY" eval --model mlp --data "$tmp/data" --load "$tmp/bad.ckpt"

# ---- --lr and --batch on resume: given, they win (and are said to); absent, the checkpoint's ----
resume="--model mlp --data $tmp/data --threads 1 --seed 3 --limit 64 --epochs 2 --resume $tmp/one.ckpt"
"$CHUTNEY" train $resume --save "$tmp/kept.ckpt" >"$tmp/out" 2>"$tmp/err" || { fail "resume"; cat "$tmp/err"; }
if grep -qF "lr 0.02 (saved), batch 8 (saved)" "$tmp/err" && grep -qF "batch 8, sgd lr 0.02" "$tmp/out" &&
    [ "$(optlr "$tmp/kept.ckpt")" = 0.02 ] && [ "$(meta "$tmp/kept.ckpt" batch)" = 8 ]; then
    echo "ok: resume keeps the checkpoint's lr and batch: $(grep resuming "$tmp/err")"
else
    fail "resume without --lr/--batch:"; cat "$tmp/err" "$tmp/out"
fi
"$CHUTNEY" train $resume --lr 0.5 --batch 32 --save "$tmp/new.ckpt" >"$tmp/out" 2>"$tmp/err" ||
    { fail "resume --lr --batch"; cat "$tmp/err"; }
if grep -qF "lr 0.5 from --lr (the checkpoint's was 0.02), batch 32 from --batch (the checkpoint's was 8)" "$tmp/err" &&
    grep -qF "batch 32, sgd lr 0.5" "$tmp/out" && [ "$(optlr "$tmp/new.ckpt")" = 0.5 ] &&
    [ "$(meta "$tmp/new.ckpt" batch)" = 32 ]; then
    echo "ok: --lr and --batch win on resume: $(grep resuming "$tmp/err")"
else
    fail "resume with --lr 0.5 --batch 32:"; cat "$tmp/err" "$tmp/out"
fi

# ---- signals ----
# wait_for FILE: until it exists (the first epoch's checkpoint: the loop,
# and so its signal handling, is running), at most 60 s.
wait_for() {
    i=0
    while [ ! -f "$1" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
    [ -f "$1" ]
}
# A background job of a script starts with SIGINT ignored, and chutney
# leaves an ignored signal ignored (as Ctrl-C must not reach background
# jobs): env gives it the default disposition an interactive run has.
env --default-signal=INT true 2>/dev/null || { echo "FAIL: env has no --default-signal"; exit 1; }
bg_train() {
    env --default-signal=INT "$CHUTNEY" train "$@" &
    pid=$!
}
bg_train $common --epochs 1000 --save "$tmp/sig.ckpt" >"$tmp/sig.out" 2>"$tmp/sig.err"
wait_for "$tmp/sig.ckpt" || fail "no checkpoint after 60 s"
kill -INT $pid
wait $pid
rc=$?
if [ $rc -eq 130 ] && grep -qF "stopped by SIGINT" "$tmp/sig.err" &&
    grep -qF "checkpoint saved to $tmp/sig.ckpt" "$tmp/sig.err"; then
    echo "ok: SIGINT: $(grep stopped "$tmp/sig.err")"
else
    fail "SIGINT: exit status $rc (130 expected)"; cat "$tmp/sig.err"
fi
done_e=$(meta "$tmp/sig.ckpt" epochs_done)
done_b=$(meta "$tmp/sig.ckpt" batches_done)
seen=$(meta "$tmp/sig.ckpt" epoch_seen)
if [ -n "$done_b" ] && [ "$seen" != $((done_b * 8)) ]; then
    fail "the checkpoint says $done_b batches of 8 but $seen samples"
fi
# Resumed, the run ends where an uninterrupted one does, to the bit.
k=$((done_e + 1))
"$CHUTNEY" train $common --epochs $k --json >"$tmp/ref" 2>"$tmp/err" || { fail "reference run"; cat "$tmp/err"; }
"$CHUTNEY" train $common --epochs $k --json --resume "$tmp/sig.ckpt" >"$tmp/res" 2>"$tmp/err" ||
    { fail "resume after SIGINT"; cat "$tmp/err"; }
ref=$(grep -o '"final_loss":[0-9.e+-]*,"' "$tmp/ref")
res=$(grep -o '"final_loss":[0-9.e+-]*,"' "$tmp/res")
acc_ref=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/ref")
acc_res=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/res")
if [ -n "$ref" ] && [ "$ref" = "$res" ] && [ "$acc_ref" = "$acc_res" ]; then
    echo "ok: stopped after epoch $done_e + ${done_b:-0} batches, resumed to epoch $k: $res as uninterrupted"
else
    fail "resume after SIGINT: $res $acc_res, uninterrupted $ref $acc_ref"; cat "$tmp/err"
fi

# SIGTERM: 143. SIGINT then SIGTERM: the second exits at once.
rm -f "$tmp/sig.ckpt"
bg_train $common --epochs 1000 --save "$tmp/sig.ckpt" >/dev/null 2>"$tmp/sig.err"
wait_for "$tmp/sig.ckpt"
kill -TERM $pid
wait $pid
rc=$?
if [ $rc -eq 143 ] && grep -qF "stopped by SIGTERM" "$tmp/sig.err"; then
    echo "ok: SIGTERM: exit status 143"
else
    fail "SIGTERM: exit status $rc (143 expected)"; cat "$tmp/sig.err"
fi
rm -f "$tmp/sig.ckpt"
bg_train $common --epochs 1000 --save "$tmp/sig.ckpt" >/dev/null 2>"$tmp/sig.err"
wait_for "$tmp/sig.ckpt"
# Both signals pending before either is handled (stopped, then continued):
# sent one after the other to a running process, the first could finish its
# step, save and exit before the second arrived on a loaded machine.
kill -STOP $pid
kill -INT $pid
kill -TERM $pid
kill -CONT $pid
wait $pid
rc=$?
# The order the two pending signals are taken in is the kernel's (and the
# thread's that takes each): the exit status is 128 + whichever came second.
if { [ $rc -eq 143 ] || [ $rc -eq 130 ]; } && grep -qF "stopped at once" "$tmp/sig.err" &&
    ! grep -qF "checkpoint saved" "$tmp/sig.err"; then
    echo "ok: a second signal: exit status $rc at once, nothing saved"
else
    fail "a second signal: exit status $rc (130 or 143 and 'stopped at once' expected)"; cat "$tmp/sig.err"
fi
left=$(ls "$tmp" | grep -F '.tmp.' || true)
[ -z "$left" ] || fail "temporary files left behind: $left"

# ---- FIFOs are refused, not waited on (timeout turns a hang into a failure) ----
mkfifo "$tmp/fifo" || fail "mkfifo"
expect_exit "gpt --data FIFO" 1 "not a regular file" \
    timeout 30 "$CHUTNEY" train --model gpt --data "$tmp/fifo"
expect_exit "--resume FIFO" 1 "not a regular file" \
    timeout 30 "$CHUTNEY" train $small --resume "$tmp/fifo"
mkdir -p "$tmp/fifodata"
cp "$tmp/data/"* "$tmp/fifodata/"
rm "$tmp/fifodata/t10k-labels-idx1-ubyte"
mkfifo "$tmp/fifodata/t10k-labels-idx1-ubyte"
expect_exit "a FIFO in --data" 1 "t10k-labels-idx1-ubyte' is a FIFO" \
    timeout 30 "$CHUTNEY" train --model mlp --data "$tmp/fifodata" --epochs 1

# ---- a standard output that cannot be written fails ----
if [ -w /dev/full ]; then
    for c in "ops" "--version" "train $small --epochs 0"; do
        "$CHUTNEY" $c >/dev/full 2>"$tmp/err"
        rc=$?
        if [ $rc -ne 0 ] && grep -qF "cannot write to standard output" "$tmp/err"; then
            echo "ok: chutney $c >/dev/full: exit status $rc"
        else
            fail "chutney $c >/dev/full: exit status $rc"; cat "$tmp/err"
        fi
    done
fi

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all ok"
