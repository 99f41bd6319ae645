#!/bin/sh
# `chutney train --distributed` from the outside, as 2 MPI ranks on this
# machine:
#   - 2 ranks of per-rank batch 32 give one process of batch 64 (the same
#     samples per step) within float rounding: the final loss and the test
#     accuracy agree;
#   - ranks given different data stop at the start, naming the rank;
#   - a rank killed with -9 ends the whole job within a bounded time (no
#     rank hangs), the last checkpoint is intact and a job of another size
#     resumes from it.
# Without MPI (no mpirun, or a build without it) it prints "skipped" and
# exits 77.
#   dist_cli.sh path/to/chutney
set -u
CHUTNEY=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-dist-cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail, expect_error

if ! command -v mpirun >/dev/null 2>&1 || ! "$CHUTNEY" devices | grep -q '+mpi'; then
    echo "skipped: no MPI (mpirun, and a build with CHUTNEY_WITH_MPI)"
    exit 77
fi
# The training data, Fashion-MNIST's gzipped files: looked for, not
# trained on (a training run only to find out costs seconds).
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
    ! "$CHUTNEY" --version | grep -Eq '^  zlib +yes'; then
    echo "skipped: this build cannot train on the data here (Fashion-MNIST's .gz files, zlib)"
    exit 77
fi
# CI runs as root; the ranks share 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MPIRUN="mpirun --oversubscribe"

json_field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" "$1" | tail -n 1; }

# 1. Two ranks against one process on the same global batch (1024 images:
#    whole global batches, so no partial batch differs).
common="--model mlp --limit 1024 --epochs 2 --threads 1 --json"
# shellcheck disable=SC2086 # options are words
$MPIRUN -np 2 "$CHUTNEY" train $common --batch 32 --distributed >"$tmp/d.out" 2>"$tmp/d.err"
rc=$?
# shellcheck disable=SC2086
"$CHUTNEY" train $common --batch 64 >"$tmp/s.out" 2>"$tmp/s.err"
rc1=$?
if [ "$rc" -ne 0 ] || [ "$rc1" -ne 0 ]; then
    fail "2 ranks (exit $rc) or one process (exit $rc1) failed"; cat "$tmp/d.err" "$tmp/s.err"
else
    ld=$(json_field "$tmp/d.out" final_loss) ls=$(json_field "$tmp/s.out" final_loss)
    ad=$(json_field "$tmp/d.out" test_accuracy) as=$(json_field "$tmp/s.out" test_accuracy)
    nr=$(json_field "$tmp/d.out" ranks)
    if [ "$nr" != 2 ]; then
        fail "the job's JSON says ranks=$nr"
    elif awk -v a="$ld" -v b="$ls" -v x="$ad" -v y="$as" 'BEGIN {
            d = a - b; if (d < 0) d = -d; e = x - y; if (e < 0) e = -e;
            exit !(d <= 1e-3 * (b < 0 ? -b : b) && e <= 0.01) }'; then
        echo "ok: 2 ranks x batch 32 = 1 process x batch 64: loss $ld vs $ls, accuracy $ad vs $as"
    else
        fail "2 ranks: loss $ld accuracy $ad; one process: loss $ls accuracy $as"
    fi
fi

# 2. Different data on the two ranks (MPMD: each its own --limit).
$MPIRUN -np 1 "$CHUTNEY" train --model mlp --limit 1000 --epochs 1 --distributed : \
    -np 1 "$CHUTNEY" train --model mlp --limit 1100 --epochs 1 --distributed \
    >"$tmp/m.out" 2>"$tmp/m.err"
rc=$?
if [ "$rc" -eq 0 ]; then
    fail "ranks with different data: the job exited 0"
elif ! grep -q "rank 1's training data differs" "$tmp/m.err"; then
    fail "ranks with different data: no error naming rank 1"; cat "$tmp/m.err"
else
    echo "ok: different data: $(grep -m1 "differs" "$tmp/m.err")"
fi

# 3. A rank killed with -9 after the first checkpoint (polled every 0.2 s).
ck="$tmp/job.ckpt"
$MPIRUN -np 2 "$CHUTNEY" train --model mlp --limit 1024 --epochs 400 --batch 32 --threads 1 \
    --distributed --save "$ck" >"$tmp/k.out" 2>"$tmp/k.err" &
job=$!
waited=0
while [ ! -f "$ck" ] && [ $waited -lt 600 ]; do sleep 0.2; waited=$((waited + 1)); done
victim=$(pgrep -P "$job" -f "chutney train" | tail -n 1)
if [ ! -f "$ck" ] || [ -z "$victim" ]; then
    fail "kill test: no checkpoint after $((waited / 5))s, or no rank process found"
    kill "$job" 2>/dev/null
else
    kill -9 "$victim"
    start=$(date +%s)
    # The job must end by itself; a bounded wait, then a kill to clean up.
    while kill -0 "$job" 2>/dev/null && [ $(($(date +%s) - start)) -lt 60 ]; do sleep 0.2; done
    if kill -0 "$job" 2>/dev/null; then
        fail "kill test: the job still runs 60 s after a rank was killed"
        kill -9 "$job" 2>/dev/null
    else
        wait "$job"
        rc=$?
        took=$(($(date +%s) - start))
        if [ "$rc" -eq 0 ]; then
            fail "kill test: the job exited 0 after a rank was killed"
        elif ! grep -qi "rank" "$tmp/k.err"; then
            fail "kill test: no message naming a rank"; cat "$tmp/k.err"
        else
            echo "ok: a killed rank ended the job in ${took}s (exit $rc): $(grep -i -m1 'rank' "$tmp/k.err")"
        fi
        # The checkpoint is whole: it evaluates, and one rank resumes it.
        if ! "$CHUTNEY" eval --model mlp --limit 1024 --load "$ck" --json >"$tmp/e.json" 2>"$tmp/e.err"; then
            fail "kill test: the checkpoint does not load"; cat "$tmp/e.err"
        fi
        done_epochs=$(json_field "$tmp/e.json" epochs)
        if [ -n "$done_epochs" ] && $MPIRUN -np 1 "$CHUTNEY" train --model mlp --limit 1024 \
            --batch 32 --threads 1 --distributed --resume "$ck" --epochs $((done_epochs + 1)) \
            >"$tmp/r.out" 2>"$tmp/r.err"; then
            echo "ok: resumed after epoch $done_epochs with 1 rank: $(tail -n 1 "$tmp/r.out")"
        else
            fail "kill test: resuming with 1 rank failed"; cat "$tmp/r.err"
        fi
    fi
fi

if [ "$fails" -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "all passed"
