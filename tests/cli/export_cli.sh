#!/bin/sh
# `chutney export` from the outside: a model trained with `train --save` is
# exported with its weights, `chutney run` runs the file on the first test
# images, and its predictions give exactly the accuracy `chutney eval`
# reports for the checkpoint; onnx.checker accepts the files; bad input
# gives a clear message, a non-zero exit and no file.
#   export_cli.sh path/to/chutney
# Exits 77 (skipped) without ONNX support, numpy or the dataset.
set -u
CHUTNEY=$1
DATA=${CN_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
PY=/usr/bin/python3
N=300
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-export-cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail, expect_error

[ -f "$DATA/t10k-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST at $DATA"; exit 77; }
$PY -c "import numpy" 2>/dev/null || { echo "SKIP: numpy is not installed"; exit 77; }
# python3-onnx: looked for once (an import takes a second on a busy machine).
have_onnx=0
$PY -c "import onnx" 2>/dev/null && have_onnx=1
if "$CHUTNEY" export --model mlp --output "$tmp/probe.onnx" 2>&1 | grep -q "built without ONNX"; then
    echo "SKIP: built without ONNX support"; exit 77
fi

unpack_fashion "$DATA" "$tmp/data" 300 || { echo "FAIL: cannot unpack $DATA"; exit 1; }
# The first N test images as train.c feeds them: [N, 1, 28, 28] in [0, 1].
$PY - "$tmp" $N <<'PY' || fail "writing the test batch"
import sys, numpy as np
d, n = sys.argv[1], int(sys.argv[2])
img = np.fromfile(d + "/data/t10k-images-idx3-ubyte", np.uint8, offset=16)[: n * 784]
np.save(d + "/images.npy", (img.reshape(n, 1, 28, 28) / np.float32(255)).astype(np.float32))
np.save(d + "/labels.npy", np.fromfile(d + "/data/t10k-labels-idx1-ubyte", np.uint8, offset=8)[:n])
PY

for m in mlp cnn lstm; do
    "$CHUTNEY" train --model $m --epochs 1 --limit 200 --threads 1 --seed 3 --json \
        --save "$tmp/$m.ckpt" --data "$tmp/data" >"$tmp/train" 2>&1 || { fail "train $m"; cat "$tmp/train"; continue; }
    "$CHUTNEY" eval --model $m --load "$tmp/$m.ckpt" --limit $N --data "$tmp/data" --json \
        --logits "$tmp/eval_$m.npy" >"$tmp/eval" 2>&1 ||
        { fail "eval $m"; cat "$tmp/eval"; continue; }
    acc_eval=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/eval" | cut -d: -f2)
    "$CHUTNEY" export --model $m --load "$tmp/$m.ckpt" --output "$tmp/$m.onnx" >"$tmp/out" 2>&1 ||
        { fail "export $m"; cat "$tmp/out"; continue; }
    "$CHUTNEY" export --model $m --load "$tmp/$m.ckpt" --batch $N --output "$tmp/${m}_fixed.onnx" >"$tmp/out" 2>&1 ||
        { fail "export --batch $m"; cat "$tmp/out"; continue; }
    for v in $m ${m}_fixed; do
        "$CHUTNEY" run "$tmp/$v.onnx" --input images="$tmp/images.npy" --output-dir "$tmp/out_$v" >"$tmp/out" 2>&1 ||
            { fail "run $v.onnx"; cat "$tmp/out"; }
    done
    # An evaluator written from the ONNX specs (numpy, no Chutney code)
    # agrees with the library too.
    if [ "$have_onnx" = 1 ]; then
        $PY "$(dirname "$0")/../onnx/np_onnx.py" "$tmp/$m.onnx" "$tmp/images.npy" "$tmp/np_$m.npy" 2>"$tmp/err" ||
            { fail "numpy evaluation of $m.onnx"; cat "$tmp/err"; }
        $PY -c "
import sys, numpy as np
a, b = np.load('$tmp/np_$m.npy'), np.load('$tmp/eval_$m.npy')
e = float(np.abs(a - b).max()) if a.shape == b.shape else float('inf')
print('max |numpy evaluator - eval|: %.3g' % e); sys.exit(e > 1e-4)" >"$tmp/out" 2>&1 &&
            echo "ok: $m.onnx in numpy: $(cat "$tmp/out")" || { fail "$m.onnx in numpy"; cat "$tmp/out"; }
    fi
    # The exported model gives the logits eval computes in the library, so
    # eval's accuracy too; the fixed-batch export gives the same.
    res=$($PY - "$tmp" $m "$acc_eval" <<'PY'
import sys, numpy as np
d, m, acc_eval = sys.argv[1], sys.argv[2], sys.argv[3]
logits = np.load("%s/out_%s/logits.npy" % (d, m))
fixed = np.load("%s/out_%s_fixed/logits.npy" % (d, m))
ref = np.load("%s/eval_%s.npy" % (d, m))
labels = np.load(d + "/labels.npy")
acc = "%.4f" % float(np.mean(logits.argmax(1) == labels))
err = float(np.abs(logits - ref).max()) if logits.shape == ref.shape else float("inf")
ok = (logits.shape == (labels.shape[0], 10) and err <= 1e-4 and acc == "%.4f" % float(acc_eval)
      and np.allclose(logits, fixed, rtol=1e-5, atol=1e-5))
print("%s %s logits %s, max |difference| from eval's %.3g, accuracy %s, eval %s"
      % ("ok" if ok else "bad", m, logits.shape, err, acc, acc_eval))
PY
)
    case "$res" in
        ok*) echo "ok: exported $res" ;;
        *) fail "exported $m: $res" ;;
    esac
done

# onnx.checker, and the checkpoint's names on the initializers.
if [ "$have_onnx" = 1 ]; then
    $PY - "$tmp" <<'PY' && echo "ok: onnx.checker accepts the exported models" || fail "onnx.checker"
import sys, onnx
d = sys.argv[1]
for m in ("mlp", "cnn", "lstm"):
    model = onnx.load("%s/%s.onnx" % (d, m))
    onnx.checker.check_model(model, full_check=True)
    names = {t.name for t in model.graph.initializer}
    want = {"mlp": "1.weight", "cnn": "0.weight", "lstm": "lstm.weight_ih_l0"}[m]
    assert want in names, (m, sorted(names))
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param, m
PY
fi

expect_error "export without arguments" "export needs --model and --output" "$CHUTNEY" export
expect_error "export of an unknown model" "unknown model 'resnet'" "$CHUTNEY" export --model resnet --output "$tmp/x.onnx"
expect_error "export of another model's checkpoint" "holds a 'mlp' model" \
    "$CHUTNEY" export --model cnn --load "$tmp/mlp.ckpt" --output "$tmp/x.onnx"
expect_error "export of a missing checkpoint" "absent.ckpt" \
    "$CHUTNEY" export --model mlp --load "$tmp/absent.ckpt" --output "$tmp/x.onnx"
expect_error "export into a missing directory" "$tmp/no/dir/x.onnx" \
    "$CHUTNEY" export --model mlp --output "$tmp/no/dir/x.onnx"
expect_error "export with a bad --batch" "bad value '0' for --batch" \
    "$CHUTNEY" export --model mlp --batch 0 --output "$tmp/x.onnx"
[ -e "$tmp/x.onnx" ] && fail "a failed export left $tmp/x.onnx"

if [ "$fails" -ne 0 ]; then
    echo "$fails failures"
    exit 1
fi
echo "all export CLI checks passed"
