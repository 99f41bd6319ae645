#!/bin/sh
# Runs the libFuzzer targets for a bounded time each (`make fuzz`, and the
# `fuzz` stage of `make check` with short times):
#   fuzz/run.sh BUILD_DIR SECONDS [READER_SECONDS [TARGET...]]
# The ONNX loader's fuzzer runs SECONDS, each file reader's READER_SECONDS
# (default SECONDS); TARGETs pick some (onnx npy safetensors json idx csv
# image bpe wav, and the command line's model_text and config; default all). A crash leaves its input in
# BUILD_DIR/artifacts/<target>/ and makes this script fail after the rest
# have run; the last lines give each target's executions.
#
# ONNX seeds are gathered at fuzz time, nothing big is checked in: the
# models of Debian's libonnx-testdata (node and pytorch-converted cases,
# small files), the small models tests/onnx/make_models.py writes (with
# python3-onnx) and the tiny seeds in fuzz/seeds/. The readers' seeds are
# fuzz/seeds/<reader>/ (fuzz/seeds/make_seeds.py). The corpus each fuzzer
# grows stays in BUILD_DIR/corpus[-<reader>] between runs.
set -u
build=$1 secs=$2 rsecs=${3:-$2}
shift 2
[ $# -gt 0 ] && shift
targets=${*:-onnx npy safetensors json idx csv image bpe wav model_text config}
here=$(cd "$(dirname "$0")" && pwd)
summary=$build/fuzz-summary.txt
: >"$summary"
failed=0

# ASan reports leaks at exit; a huge allocation a file asks for is an error
# the reader must report (malloc returning NULL), not a crash. The ONNX
# load's element budget (docs/onnx.md, "Limits") is lowered to 2^24 so that
# what a file may legitimately make the loader compute stays far below the
# fuzzer's memory limit: a report is then a real bound missing (the image
# fuzzer lowers CN_MAX_IMAGE_PIXELS the same way, fuzz/fuzz_reader.c).
export CN_ONNX_MAX_ELEMENTS=16777216
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

onnx_seeds() {
    seeds=$1
    for f in "$here"/seeds/*.onnx; do cp "$f" "$seeds"/; done
    data=/usr/share/libonnx-testdata/data
    if [ -d "$data" ]; then
        for f in "$data"/node/*/model.onnx "$data"/pytorch-converted/*/model.onnx; do
            # Small models only: big ones slow every mutation down.
            [ "$(wc -c <"$f")" -le 65536 ] || continue
            d=${f%/model.onnx}
            cp "$f" "$seeds/$(basename "$(dirname "$d")")_$(basename "$d").onnx"
        done
    else
        echo "fuzz: no $data (libonnx-testdata); fewer seeds"
    fi
    /usr/bin/python3 "$here/../tests/onnx/make_models.py" "$build/made" >/dev/null 2>&1 &&
        for f in "$build"/made/*.onnx; do [ -f "$f" ] && cp "$f" "$seeds/made_$(basename "$f")"; done
}

for t in $targets; do
    if [ "$t" = onnx ]; then
        fuzzer=$build/fuzz/fuzz_onnx_load seeds=$build/seeds corpus=$build/corpus s=$secs
    else
        fuzzer=$build/fuzz/fuzz_$t seeds=$here/seeds/$t corpus=$build/corpus-$t s=$rsecs
    fi
    [ -x "$fuzzer" ] || { echo "fuzz: $fuzzer is not built" >&2; failed=1; continue; }
    art=$build/artifacts/$t
    mkdir -p "$corpus" "$art"
    [ "$t" = onnx ] && mkdir -p "$seeds" && onnx_seeds "$seeds"
    echo "fuzz: $t: $(ls "$seeds" | wc -l) seeds, corpus $corpus, $s s"
    log=$build/fuzz-$t.log
    "$fuzzer" -max_total_time="$s" -timeout=20 -rss_limit_mb=3072 -max_len=65536 \
        -print_final_stats=1 -artifact_prefix="$art/" "$corpus" "$seeds" >"$log" 2>&1
    rc=$?
    # A crash's report is long; a clean run's last lines are its progress.
    tail -n $([ $rc -eq 0 ] && echo 4 || echo 80) "$log" | grep -v "^stat::" >&2
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [ $rc -eq 0 ]; then
        echo "$t: ${execs:-?} executions in $s s ($(( ${execs:-0} / (s > 0 ? s : 1) ))/s), no crash" >>"$summary"
    else
        echo "$t: FAILED (exit $rc) after ${execs:-?} executions; inputs in $art/, log $log" >>"$summary"
        failed=1
    fi
done
echo "fuzz: summary ($summary)"
cat "$summary"
exit $failed
