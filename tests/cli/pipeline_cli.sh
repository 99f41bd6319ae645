#!/bin/sh
# examples/pipeline_cnn.c: the cnn split over 2 MPI ranks trains as the
# whole model in one process does: each step's loss within TOL relative
# (default 1e-6: the same ops on the same values; only a reduction's thread
# split may differ). ARGS go to both runs: none for the hand-written
# send/recv (eager), --static for the split made by placement. Skipped (77)
# without MPI.
#   pipeline_cli.sh path/to/example_pipeline_cnn path/to/chutney [TOL [ARGS...]]
set -u
EX=$1
CHUTNEY=$2
TOL=${3:-1e-6}
[ $# -ge 3 ] && shift 3 || shift $#
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-pipeline.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
if ! command -v mpirun >/dev/null 2>&1 || ! "$CHUTNEY" devices | grep -q '+mpi'; then
    echo "skipped: no MPI (mpirun, and a build with CHUTNEY_WITH_MPI)"
    exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
"$EX" "$@" 12 >"$tmp/one" || { echo "FAIL: one process"; exit 1; }
timeout 300 mpirun --oversubscribe -np 2 "$EX" "$@" 12 >"$tmp/two" || { echo "FAIL: 2 ranks"; exit 1; }
if [ "$(wc -l <"$tmp/one")" -ne 12 ] || [ "$(wc -l <"$tmp/two")" -ne 12 ]; then
    echo "FAIL: expected 12 steps from each run"; cat "$tmp/one" "$tmp/two"; exit 1
fi
if paste "$tmp/one" "$tmp/two" | awk -v tol="$TOL" '{ d = $4 - $8; if (d < 0) d = -d;
        if (d > tol * ($4 < 0 ? -$4 : $4)) { print "step " $2 ": " $4 " vs " $8; bad = 1 }
        if (d > worst) worst = d }
        END { printf "largest difference %g\n", worst; exit bad }'; then
    echo "ok: 12 steps of the cnn split over 2 ranks ($*) match one process within $TOL; last: $(tail -n 1 "$tmp/two")"
else
    echo "FAIL: the split model's losses differ from one process's ($*)"; exit 1
fi
