#!/bin/sh
# `chutney train --model-file M.onnx` from the outside, as README's tour
# does it: an untrained PyTorch CNN (conv, BatchNorm, ReLU, max pool,
# dropout, linear) exported to ONNX by torch 1.13 (onnx_train_model.py),
#   - trained on a small image folder (data_gen.py) to well above chance,
#     and so is PyTorch's default evaluation-mode export of the same model;
#   - `chutney eval` of its checkpoint: the same test accuracy; `chutney
#     predict` classifies an image with it;
#   - a run stopped after one epoch and resumed: the same final loss as the
#     uninterrupted run; a resume or export against another model file is
#     refused;
#   - --log and --tensorboard written, the log drawn by `chutney plot`
#     (where built with cairo), a step profiled and `chutney profile` read;
#   - `chutney export --load` writes the trained ONNX; `chutney run` runs it
#     and its outputs equal PyTorch's with the trained initializers loaded
#     into the same torch model (BatchNorm's running statistics included);
#   - the model's shapes checked against the data before training.
# Skips (77) without ONNX support or without torch and onnx for python3.
#   onnx_train_cli.sh path/to/chutney
set -u
CHUTNEY=$1
HERE=$(dirname "$0")
PY=/usr/bin/python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-onnxtrain.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$HERE/lib.sh" # fail, expect_exit

"$CHUTNEY" --version >"$tmp/version" 2>&1
have() { grep -Eq "^  $1 +yes " "$tmp/version"; }
if ! have onnx; then
    echo "skip: built without ONNX support"
    exit 77
fi
$PY "$HERE/onnx_train_model.py" export "$tmp/net.onnx" "$tmp/x.npy" "$tmp/eval.onnx" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 77 ] && { cat "$tmp/out"; exit 77; }
[ $rc -eq 0 ] || { cat "$tmp/err"; echo "FAIL: export from PyTorch"; exit 1; }
$PY "$HERE/data_gen.py" "$tmp" >/dev/null || { echo "FAIL: data_gen.py"; exit 1; }

# 120 images of 3 classes (80% to train), 12x12 RGB.
common="--data $tmp/img --epochs 3 --lr 0.01 --threads 1 --json"
run="--model-file $tmp/net.onnx $common"
tb=""
have tensorboard && tb="--tensorboard $tmp/tb"
# shellcheck disable=SC2086 # options are words
"$CHUTNEY" train $run --save "$tmp/full.st" --log "$tmp/log.jsonl" $tb >"$tmp/full.out" 2>"$tmp/err" ||
    { fail "train --model-file"; cat "$tmp/err"; }
acc=$(sed -n 's/.*"test_accuracy":\([0-9.]*\).*/\1/p' "$tmp/full.out")
loss=$(sed -n 's/.*"final_loss":\([0-9.e-]*\).*/\1/p' "$tmp/full.out")
if awk -v a="$acc" 'BEGIN { exit !(a >= 0.8) }'; then
    echo "ok: train --model-file: test accuracy $acc (chance: 0.33), final loss $loss"
else
    fail "train --model-file: test accuracy '$acc'"; cat "$tmp/full.out"
fi

# PyTorch's default export (evaluation mode: BatchNorm folded, no Dropout)
# trains too.
# shellcheck disable=SC2086 # options are words
"$CHUTNEY" train --model-file "$tmp/eval.onnx" $common >"$tmp/evalmode.out" 2>"$tmp/err" ||
    { fail "train an evaluation-mode export"; cat "$tmp/err"; }
eacc=$(sed -n 's/.*"test_accuracy":\([0-9.]*\).*/\1/p' "$tmp/evalmode.out")
if awk -v a="$eacc" 'BEGIN { exit !(a >= 0.8) }'; then
    echo "ok: an evaluation-mode export: test accuracy $eacc"
else
    fail "an evaluation-mode export: test accuracy '$eacc'"; cat "$tmp/evalmode.out"
fi

# eval of the checkpoint: train's test accuracy.
"$CHUTNEY" eval --model-file "$tmp/net.onnx" --load "$tmp/full.st" --json >"$tmp/eval.out" 2>"$tmp/err" ||
    { fail "eval --model-file"; cat "$tmp/err"; }
if grep -q "\"test_accuracy\":$acc" "$tmp/eval.out"; then
    echo "ok: eval --load: test accuracy $acc"
else
    fail "eval: not $acc:"; cat "$tmp/eval.out"
fi

# predict with the checkpoint: a red square is "red".
"$CHUTNEY" predict --load "$tmp/full.st" "$tmp/img/red/000.png" >"$tmp/pred.out" 2>"$tmp/err" ||
    { fail "predict --load"; cat "$tmp/err"; }
if grep -q "000.png: red " "$tmp/pred.out"; then
    echo "ok: predict: $(cat "$tmp/pred.out")"
else
    fail "predict:"; cat "$tmp/pred.out"
fi

# One epoch, then two more from its checkpoint: the same last loss.
# shellcheck disable=SC2086
"$CHUTNEY" train $run --epochs 1 --save "$tmp/one.st" >/dev/null 2>"$tmp/err" ||
    { fail "train --epochs 1"; cat "$tmp/err"; }
# shellcheck disable=SC2086
"$CHUTNEY" train $run --resume "$tmp/one.st" >"$tmp/resumed.out" 2>"$tmp/err" ||
    { fail "train --resume"; cat "$tmp/err"; }
rloss=$(sed -n 's/.*"final_loss":\([0-9.e-]*\).*/\1/p' "$tmp/resumed.out")
if [ -n "$loss" ] && [ "$loss" = "$rloss" ]; then
    echo "ok: resumed after 1 epoch: final loss $rloss, as the uninterrupted run"
else
    fail "resumed: final loss '$rloss', the uninterrupted run's '$loss'"
fi
# Another model file: refused by resume and by export.
$PY - "$tmp/net.onnx" "$tmp/other.onnx" <<'EOF'
import onnx, sys
m = onnx.load(sys.argv[1])
m.graph.initializer[0].raw_data = bytes(len(m.graph.initializer[0].raw_data))
onnx.save(m, sys.argv[2])
EOF
expect_exit "resume against another model file" 1 "whose contents differ" \
    "$CHUTNEY" train --model-file "$tmp/other.onnx" --data "$tmp/img" --resume "$tmp/one.st"
expect_exit "resume without the model file" 2 "holds an ONNX model: give --model-file" \
    "$CHUTNEY" train --data "$tmp/img" --resume "$tmp/one.st"
expect_exit "export against another model file" 1 "whose contents differ" \
    "$CHUTNEY" export --load "$tmp/full.st" --model-file "$tmp/other.onnx" --output "$tmp/x.onnx"

# The curves: the log's figures, its picture, the event file.
$PY "$HERE/check_log.py" "$tmp/log.jsonl" "$tmp/full.out" 96 64 3 || fails=$((fails + 1))
if have cairo; then
    "$CHUTNEY" plot "$tmp/log.jsonl" -o "$tmp/curves.png" >"$tmp/out" 2>"$tmp/err" ||
        { fail "plot"; cat "$tmp/err"; }
    if grep -q 'curves.png: 6 steps, 3 epochs' "$tmp/out"; then
        echo "ok: plot: $(cat "$tmp/out")"
    else
        fail "plot's summary:"; cat "$tmp/out"
    fi
fi
if have tensorboard; then
    set -- "$tmp"/tb/events.out.tfevents.*
    $PY "$HERE/read_tfevents.py" "$1" "$tmp/log.jsonl" || fails=$((fails + 1))
fi

# A step profiled; the table has the model's convolution.
# shellcheck disable=SC2086
"$CHUTNEY" train $run --epochs 2 --profile "$tmp/prof.json" --profile-steps 1 >/dev/null 2>"$tmp/err" ||
    { fail "train --profile"; cat "$tmp/err"; }
"$CHUTNEY" profile "$tmp/prof.json" >"$tmp/table" 2>"$tmp/err" || { fail "profile"; cat "$tmp/err"; }
if grep -q "conv2d" "$tmp/table"; then
    echo "ok: profile of a step: $(grep -c . "$tmp/table") lines, conv2d among them"
else
    fail "profile: no conv2d row"; cat "$tmp/table"
fi

# The trained model as ONNX, run by chutney and compared with PyTorch.
"$CHUTNEY" export --load "$tmp/full.st" --output "$tmp/trained.onnx" >"$tmp/out" 2>"$tmp/err" ||
    { fail "export --load"; cat "$tmp/err"; }
"$CHUTNEY" run "$tmp/trained.onnx" --input images="$tmp/x.npy" --output-dir "$tmp/run" >/dev/null 2>"$tmp/err" ||
    { fail "run the trained model"; cat "$tmp/err"; }
if $PY "$HERE/onnx_train_model.py" check "$tmp/trained.onnx" "$tmp/x.npy" "$tmp/run/logits.npy"; then
    echo "ok: the trained model in chutney run equals PyTorch's"
else
    fail "trained model vs PyTorch"
fi

# The data checked against the model before training.
expect_exit "a model for 3 classes on 2" 1 "the data needs [N, 2]" \
    "$CHUTNEY" train --model-file "$tmp/net.onnx" --data "$tmp/split" --channels 3 --image-size 12x12
expect_exit "images of another size" 1 "does not take the data's samples (3x16x16)" \
    "$CHUTNEY" train --model-file "$tmp/net.onnx" --data "$tmp/img" --image-size 16x16
$PY - "$tmp/net.onnx" "$tmp/fixed.onnx" <<'EOF'
import onnx, sys
m = onnx.load(sys.argv[1])
m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2
onnx.save(m, sys.argv[2])
EOF
expect_exit "a batch size fixed at export" 1 "export it with dynamic_axes={'images': {0: 'batch'}}" \
    "$CHUTNEY" train --model-file "$tmp/fixed.onnx" --data "$tmp/img"
expect_exit "--model and --model-file" 2 "both name the model" \
    "$CHUTNEY" train --model cnn --model-file "$tmp/net.onnx"
# Not .onnx: read as a text of layers, which it is not.
expect_exit "--model-file of another format" 1 "not a model file (a text of layers)" \
    "$CHUTNEY" train --model-file "$tmp/x.npy"

if [ "$fails" -gt 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "all ONNX training checks passed"
