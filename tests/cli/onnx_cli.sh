#!/bin/sh
# `chutney run` / `info` / `graph` on ONNX models from the outside: a model of the ONNX test
# data runs and its outputs match the stored ones (compared with numpy);
# bad input gives a clear message and a non-zero exit, never a crash.
#   onnx_cli.sh path/to/chutney [DATA_DIR]
# Exits 77 (skipped) without the test data, python3-onnx or ONNX support.
set -u
CHUTNEY=$1
DATA=${2:-/usr/share/libonnx-testdata/data}
PY=/usr/bin/python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-onnx-cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail, expect_error

[ -d "$DATA" ] || { echo "SKIP: no ONNX test data at $DATA"; exit 77; }
$PY -c "import onnx, numpy" 2>/dev/null || { echo "SKIP: python3-onnx is not installed"; exit 77; }
if "$CHUTNEY" info "$DATA/node/test_add/model.onnx" 2>&1 | grep -q "built without ONNX"; then
    echo "SKIP: built without ONNX support"; exit 77
fi

# The stored TensorProtos as .npy files.
to_npy() { # DIR_OF_PB OUT_DIR
    $PY - "$1" "$2" <<'PYEOF'
import sys, glob, os, onnx, numpy as np
from onnx import numpy_helper
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
for p in sorted(glob.glob(os.path.join(src, "*.pb"))):
    t = onnx.TensorProto()
    with open(p, "rb") as f:
        t.ParseFromString(f.read())
    np.save(os.path.join(dst, os.path.basename(p)[:-3] + ".npy"), numpy_helper.to_array(t))
PYEOF
}

# check_case FOLDER CASE [DEVICE]: run it through the CLI (on DEVICE), compare with numpy.
check_case() {
    folder=$1 cname=$2 dev=${3:-}
    dir="$DATA/$folder/$cname"
    to_npy "$dir/test_data_set_0" "$tmp/$cname/data" || { fail "$cname: converting the data"; return; }
    names=$($PY -c "
import onnx
m = onnx.load('$dir/model.onnx')
init = {i.name for i in m.graph.initializer}
print(' '.join(i.name for i in m.graph.input if i.name not in init))")
    set -- run "$dir/model.onnx" --output-dir "$tmp/$cname/out$dev" --threads 2
    [ -n "$dev" ] && set -- "$@" --device "$dev"
    k=0
    for nm in $names; do
        set -- "$@" --input "$nm=$tmp/$cname/data/input_$k.npy"
        k=$((k + 1))
    done
    if ! "$CHUTNEY" "$@" >"$tmp/out" 2>"$tmp/err"; then
        fail "$cname: chutney run failed"; cat "$tmp/err"; return
    fi
    if $PY - "$dir/model.onnx" "$tmp/$cname/data" "$tmp/$cname/out$dev" <<'PYEOF'
import sys, os, re, onnx, numpy as np
m = onnx.load(sys.argv[1])
for k, o in enumerate(m.graph.output):
    want = np.load(os.path.join(sys.argv[2], "output_%d.npy" % k))
    got = np.load(os.path.join(sys.argv[3], re.sub(r"[^A-Za-z0-9_.-]", "_", o.name) + ".npy"))
    assert got.dtype == want.dtype and got.shape == want.shape, (o.name, got.dtype, got.shape, want.dtype, want.shape)
    assert np.allclose(got, want, rtol=1e-3, atol=1e-7), (o.name, np.abs(got - want).max())
PYEOF
    then echo "ok: $folder/$cname${dev:+ on $dev} matches the stored outputs"
    else fail "$folder/$cname: outputs differ"
    fi
}

check_case pytorch-converted test_Conv2d
check_case node test_add_bcast
check_case node test_lstm_defaults
# --device: the inputs are copied to the device, the outputs back.
if "$CHUTNEY" devices | grep -q '^opencl:0 '; then
    check_case node test_add_bcast opencl
    check_case pytorch-converted test_Conv2d opencl
    check_case node test_lstm_defaults opencl
else
    echo "skipped: no OpenCL device: run --device opencl not tested"
fi

m="$DATA/pytorch-converted/test_Conv2d/model.onnx"
if "$CHUTNEY" info "$m" >"$tmp/out" 2>&1 && grep -q "parameters: 76" "$tmp/out" &&
    grep -q "Conv *1" "$tmp/out" && grep -q "f32 *\[2, 3, 7, 5\]" "$tmp/out"; then
    echo "ok: info"
else
    fail "info:"; cat "$tmp/out"
fi
if "$CHUTNEY" run "$m" --input "0=$tmp/test_Conv2d/data/input_0.npy" --output-dir "$tmp/b" --bench 3 \
    >"$tmp/out" 2>&1 && grep -q "bench: 3 runs .* median" "$tmp/out"; then
    echo "ok: --bench"
else
    fail "--bench:"; cat "$tmp/out"
fi

if "$CHUTNEY" graph "$m" >"$tmp/out" 2>&1 && grep -q "^digraph" "$tmp/out" && grep -q "conv2d" "$tmp/out"; then
    echo "ok: graph"
else
    fail "graph:"; cat "$tmp/out"
fi

x="$tmp/test_Conv2d/data/input_0.npy"
$PY -c "import numpy as np; np.save('$tmp/wrong.npy', np.zeros((2, 3, 6, 5), np.float32)); np.save('$tmp/f64.npy', np.zeros((2, 3, 7, 5)))"
expect_error "missing model" "cannot open" "$CHUTNEY" run "$tmp/none.onnx" --input "0=$x" --output-dir "$tmp/o"
expect_error "not a model" "not a valid ONNX model" "$CHUTNEY" run "$x" --input "0=$x" --output-dir "$tmp/o"
expect_error "bad --input" "expected NAME=FILE.npy" "$CHUTNEY" run "$m" --input "$x" --output-dir "$tmp/o"
expect_error "missing input file" "input '0'" "$CHUTNEY" run "$m" --input "0=$tmp/none.npy" --output-dir "$tmp/o"
expect_error "wrong input name" "not an input of the model" "$CHUTNEY" run "$m" --input "y=$x" --output-dir "$tmp/o"
expect_error "missing --input" "missing --input for the model's input '0'" "$CHUTNEY" run "$m" --output-dir "$tmp/o"
expect_error "wrong shape" "input '0' is [2, 3, 7, 5], the shape given is [2, 3, 6, 5]" \
    "$CHUTNEY" run "$m" --input "0=$tmp/wrong.npy" --output-dir "$tmp/o"
expect_error "wrong dtype" "the file holds f64" "$CHUTNEY" run "$m" --input "0=$tmp/f64.npy" --output-dir "$tmp/o"
expect_error "no --output-dir" "--output-dir is required" "$CHUTNEY" run "$m" --input "0=$x"
expect_error "bad --threads" "bad value '0' for --threads" "$CHUTNEY" run "$m" --input "0=$x" --output-dir "$tmp/o" --threads 0
expect_error "info of a missing file" "cannot open" "$CHUTNEY" info "$tmp/none.onnx"
expect_error "graph of a missing file" "cannot open" "$CHUTNEY" graph "$tmp/none.onnx"
printf 'garbage' >"$tmp/bad.onnx"
expect_error "info of garbage" "not a valid ONNX model" "$CHUTNEY" info "$tmp/bad.onnx"

[ "$fails" -eq 0 ] && echo "onnx_cli: all passed"
[ "$fails" -eq 0 ]
