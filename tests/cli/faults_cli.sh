#!/bin/sh
# Write and allocation failures in the `chutney` command (docs/reliability.md): a tiny
# training run that writes every kind of file the command writes (a
# checkpoint over an older one, --log, --tensorboard, standard output),
# then `chutney export` of the checkpoint, each run again with its Nth
# write failing (ENOSPC for train; ENOSPC, EIO and short writes for
# export), through tests/fault_inject.c built for LD_PRELOAD. (--profile's
# trace is thousands of small writes: test_faults sweeps its writer.)
# Then `chutney info` of the model with its Nth allocation failing. Every run
# exits 0 with the reference files or 1 with a message, never anything
# else; the checkpoint and the exported model are always the previous file
# or the new one, whole, and no temporary file is left.
#   faults_cli.sh path/to/chutney path/to/libfault_preload.so
set -u
CHUTNEY=$1
PRELOAD=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-faults.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail

# 60 rows of two separable blobs.
awk 'BEGIN { print "a,b,label"; for (i = 0; i < 60; i++) { c = i % 2;
      printf "%.3f,%.3f,%s\n", c * 2 + (i * 37 % 11) / 10, -c * 2 + (i * 53 % 7) / 7, c ? "yes" : "no" } }' \
    >"$tmp/blobs.csv"
"$CHUTNEY" --version >"$tmp/version" 2>&1
tb=""
grep -Eq '^  tensorboard +yes ' "$tmp/version" && tb="--tensorboard $tmp/out/tb"
mkdir -p "$tmp/out"
# One step an epoch (the 48 training rows in one batch): every kind of
# write still comes in both epochs, with fewer repeats of it to sweep.
train="train --model mlp --data $tmp/blobs.csv --target label --epochs 2 --batch 48 --threads 1
       --seed 3 --save $tmp/out/m.ckpt --log $tmp/out/log.jsonl $tb"
export_cmd="export --model mlp --load $tmp/out/m.ckpt --output $tmp/out/m.onnx"
have_onnx=1
grep -Eq '^  onnx +yes ' "$tmp/version" || have_onnx=0

# The files before each run: an older checkpoint (another seed) and model.
# shellcheck disable=SC2086 # options are words
"$CHUTNEY" train --model mlp --data "$tmp/blobs.csv" --target label --epochs 1 --seed 9 --threads 1 \
    --save "$tmp/prev.ckpt" >/dev/null 2>"$tmp/err" || { fail "train (the older checkpoint)"; cat "$tmp/err"; }
reset_out() {
    rm -rf "$tmp/out" && mkdir -p "$tmp/out" && cp "$tmp/prev.ckpt" "$tmp/out/m.ckpt"
    [ "$have_onnx" = 0 ] || cp "$tmp/prev.onnx" "$tmp/out/m.onnx"
}
if [ "$have_onnx" = 1 ]; then
    # shellcheck disable=SC2086
    "$CHUTNEY" export --model mlp --load "$tmp/prev.ckpt" --output "$tmp/prev.onnx" >/dev/null 2>&1 ||
        fail "export (the older model)"
fi

# run NAME KIND N COMMAND...: the command with write N failing (0: none);
# sets $rc, $count (writes counted).
run() {
    name=$1 kind=$2 n=$3
    shift 3
    rm -f "$tmp/count"
    # shellcheck disable=SC2068
    LD_PRELOAD=$PRELOAD CN_FAULT_WRITE=$n CN_FAULT_KIND=$kind CN_FAULT_COUNT=$tmp/count \
        "$CHUTNEY" $@ >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    count=$(cat "$tmp/count" 2>/dev/null || echo 0)
}

# Standard output without the times it reports.
timeless() { sed -E 's/loader wait [0-9.]+ s/loader wait/'; }

# The reference: the files of a run without faults.
reset_out
run train enospc 0 $train
[ "$rc" = 0 ] || { fail "train (reference)"; cat "$tmp/stderr"; }
cp "$tmp/out/m.ckpt" "$tmp/ref.ckpt"
timeless <"$tmp/stdout" >"$tmp/ref.stdout"
ref_log=$(wc -l <"$tmp/out/log.jsonl")
train_writes=$count
export_writes=0
if [ "$have_onnx" = 1 ]; then
    run export enospc 0 $export_cmd
    [ "$rc" = 0 ] || { fail "export (reference)"; cat "$tmp/stderr"; }
    cp "$tmp/out/m.onnx" "$tmp/ref.onnx"
    export_writes=$count
fi

runs=0 failed_cleanly=0
# check NAME N KIND FILE REF PREV: the outcome of one faulted run.
check() {
    name=$1 n=$2 kind=$3 file=$4 ref=$5 prev=$6
    runs=$((runs + 1))
    what="$name, write $n failing ($kind)"
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
        fail "$what: exit status $rc"; cat "$tmp/stderr"; return
    fi
    if [ "$rc" = 1 ]; then
        failed_cleanly=$((failed_cleanly + 1))
        grep -q '^chutney' "$tmp/stderr" || { fail "$what: exit 1 without a message"; cat "$tmp/stderr"; }
        # The old file, the new one, or (train) the first epoch's whole checkpoint.
        cmp -s "$file" "$ref" || cmp -s "$file" "$prev" ||
            { [ "$name" = train ] && "$CHUTNEY" eval --model mlp --load "$file" >/dev/null 2>&1; } ||
            fail "$what: $(basename "$file") is neither the old nor the new file"
    else
        cmp -s "$file" "$ref" || fail "$what: exit 0 with a different $(basename "$file")"
        if [ "$name" = train ]; then
            [ "$(wc -l <"$tmp/out/log.jsonl")" = "$ref_log" ] || fail "$what: exit 0 with a short --log"
            timeless <"$tmp/stdout" | cmp -s - "$tmp/ref.stdout" || fail "$what: exit 0 with different output"
        fi
    fi
    leftover=$(find "$tmp/out" -name '*.tmp.*' | head -n 1)
    [ -z "$leftover" ] || fail "$what: a temporary file is left: $leftover"
}

n=1
while [ "$n" -le "$train_writes" ]; do
    reset_out
    run train enospc "$n" $train
    check train "$n" enospc "$tmp/out/m.ckpt" "$tmp/ref.ckpt" "$tmp/prev.ckpt"
    n=$((n + 1))
done
n=1
while [ "$n" -le "$export_writes" ]; do
    for kind in enospc eio short; do
        reset_out
        cp "$tmp/ref.ckpt" "$tmp/out/m.ckpt"
        run export "$kind" "$n" $export_cmd
        check export "$n" "$kind" "$tmp/out/m.onnx" "$tmp/ref.onnx" "$tmp/prev.onnx"
    done
    n=$((n + 1))
done
# Allocations: `chutney info` of the exported model (reading the ONNX file,
# the importer, the summary) with its Nth allocation failing, for every N.
info_allocs=0
if [ "$have_onnx" = 1 ]; then
    rm -f "$tmp/count"
    LD_PRELOAD=$PRELOAD CN_FAULT_ALLOC=0 CN_FAULT_COUNT=$tmp/count \
        "$CHUTNEY" info "$tmp/ref.onnx" >"$tmp/ref.info" 2>"$tmp/stderr" || { fail "info (reference)"; cat "$tmp/stderr"; }
    info_allocs=$(cat "$tmp/count" 2>/dev/null || echo 0)
fi
n=1
while [ "$n" -le "$info_allocs" ]; do
    LD_PRELOAD=$PRELOAD CN_FAULT_ALLOC=$n "$CHUTNEY" info "$tmp/ref.onnx" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    runs=$((runs + 1))
    if [ "$rc" = 1 ]; then
        failed_cleanly=$((failed_cleanly + 1))
        grep -q '^chutney' "$tmp/stderr" || { fail "info, allocation $n failing: exit 1 without a message"; cat "$tmp/stderr"; }
    elif [ "$rc" = 0 ]; then
        cmp -s "$tmp/stdout" "$tmp/ref.info" || fail "info, allocation $n failing: exit 0 with different output"
    else
        fail "info, allocation $n failing: exit status $rc"; cat "$tmp/stderr"
    fi
    n=$((n + 1))
done

echo "faults_cli: $runs runs ($train_writes writes of train, $export_writes of export, $info_allocs allocations of info), $failed_cleanly failed cleanly, $fails wrong"
[ "$fails" -eq 0 ]
