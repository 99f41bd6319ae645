#!/bin/sh
# Runs the ONNX loader's fuzzer for a bounded time (`make fuzz`).
#   fuzz/run.sh BUILD_DIR SECONDS
# The seed corpus is gathered at fuzz time, nothing big is checked in: the
# models of Debian's libonnx-testdata (node and pytorch-converted cases,
# small files), the small models tests/onnx/make_models.py writes (with
# python3-onnx) and the tiny seeds in fuzz/seeds/. The corpus the fuzzer
# grows stays in BUILD_DIR/corpus between runs; a crash leaves its input
# in BUILD_DIR/artifacts/ and makes this script fail.
set -u
build=$1 secs=$2
here=$(cd "$(dirname "$0")" && pwd)
fuzzer=$build/fuzz/fuzz_onnx_load
[ -x "$fuzzer" ] || { echo "fuzz: $fuzzer is not built" >&2; exit 1; }
seeds=$build/seeds corpus=$build/corpus art=$build/artifacts
mkdir -p "$seeds" "$corpus" "$art"

cp "$here"/seeds/* "$seeds"/ 2>/dev/null
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
echo "fuzz: $(ls "$seeds" | wc -l) seeds, corpus $corpus, $secs s"

# ASan reports leaks at exit; a huge allocation a file asks for is an error
# the loader must report (malloc returning NULL), not a crash. The load's
# element budget (docs/onnx.md, "Limits") is lowered to 2^24 so that what
# a file may legitimately make the loader compute stays far below the
# fuzzer's memory limit: a report is then a real bound missing.
CN_ONNX_MAX_ELEMENTS=16777216 \
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$fuzzer" -max_total_time="$secs" -timeout=20 -rss_limit_mb=3072 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$art/" "$corpus" "$seeds"
rc=$?
[ $rc -eq 0 ] && echo "fuzz: no crash in $secs s" || echo "fuzz: FAILED (exit $rc); inputs in $art/"
exit $rc
