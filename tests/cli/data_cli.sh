#!/bin/sh
# `chutney train --data` beyond Fashion-MNIST: an image folder, CSV tables
# (classification and regression), .npy pairs; eval and predict read the
# checkpoint's shape, classes and normalisation; bad data is a clear error.
#   data_cli.sh path/to/chutney
set -u
CHUTNEY=$1
PY=/usr/bin/python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-data.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail, expect_exit

[ -x "$PY" ] || { echo "skip: no $PY"; exit 77; }
"$CHUTNEY" --version | grep -q '+stb' || { echo "skip: built without stb"; exit 77; }
noise=$("$PY" "$(dirname "$0")/data_gen.py" "$tmp") || { echo "FAIL: data_gen.py"; exit 1; }

# json_field FILE KEY: the number KEY has on FILE's last JSON line.
json_field() { tail -n 1 "$1" | sed -n "s/.*\"$2\":\([-0-9.e+]*\).*/\1/p"; }
# above A B: A > B (floats).
above() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 > b + 0) }'; }
# meta FILE KEY: the checkpoint's metadata value (safetensors' JSON header).
meta() { "$PY" -c 'import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
print(json.loads(f.read(n))["__metadata__"].get(sys.argv[2], ""))' "$1" "$2"; }

common="--threads 2 --json"

# ---- an image folder: 3 classes of 12x12 RGB, 20% held out ----
"$CHUTNEY" train --model cnn --data "$tmp/img" --epochs 3 --save "$tmp/img.ckpt" $common \
    >"$tmp/train" 2>"$tmp/err" || { fail "train cnn on an image folder"; cat "$tmp/err"; }
acc=$(json_field "$tmp/train" test_accuracy)
if above "$acc" 0.9; then echo "ok: cnn on an image folder: test accuracy $acc"; else fail "cnn on images: accuracy '$acc'"; fi
wait_s=$(json_field "$tmp/train" loader_wait_s)
[ -n "$wait_s" ] && echo "ok: --json has loader_wait_s $wait_s" || fail "no loader_wait_s in --json"
[ "$(meta "$tmp/img.ckpt" input_shape)" = 3x12x12 ] || fail "input_shape: '$(meta "$tmp/img.ckpt" input_shape)'"
classes=$(meta "$tmp/img.ckpt" classes | tr '\n' ' ')
[ "$classes" = "horizontal red vertical " ] && echo "ok: classes in the checkpoint: $classes" || fail "classes: '$classes'"
"$CHUTNEY" eval --model cnn --load "$tmp/img.ckpt" --json >"$tmp/eval" 2>"$tmp/err" || { fail "eval"; cat "$tmp/err"; }
eacc=$(json_field "$tmp/eval" test_accuracy)
[ "$eacc" = "$acc" ] && echo "ok: eval gives train's accuracy ($eacc)" || fail "eval accuracy $eacc, train's $acc"
"$CHUTNEY" predict --load "$tmp/img.ckpt" --top 1 "$tmp/img/horizontal/003.png" "$tmp/img/vertical/017.png" \
    "$tmp/img/red/030.png" >"$tmp/pred" 2>"$tmp/err" || { fail "predict"; cat "$tmp/err"; }
for c in horizontal vertical red; do
    grep -q "/$c/[0-9]*\.png: $c " "$tmp/pred" || { fail "predict: $c"; cat "$tmp/pred"; }
done
echo "ok: predict names the classes: $(tr '\n' ' ' <"$tmp/pred")"
if "$CHUTNEY" export --model cnn --load "$tmp/img.ckpt" --output "$tmp/img.onnx" >/dev/null 2>"$tmp/err"; then
    "$CHUTNEY" info "$tmp/img.onnx" 2>/dev/null | grep -q 'images *f32 *\[?, 3, 12, 12\]' &&
        echo "ok: export takes the checkpoint's input shape" || fail "export: $("$CHUTNEY" info "$tmp/img.onnx" 2>&1)"
elif ! grep -q "without ONNX" "$tmp/err"; then
    fail "export"; cat "$tmp/err"
fi

# Epoch lines report the loader's wait.
"$CHUTNEY" train --model mlp --data "$tmp/img" --epochs 1 --threads 2 >"$tmp/out" 2>"$tmp/err" || fail "train mlp"
grep -q '^epoch 1: .*loader wait [0-9.]* s$' "$tmp/out" && echo "ok: epoch line: $(grep '^epoch 1' "$tmp/out")" || { fail "epoch line"; cat "$tmp/out"; }

# Augmentation and standardisation: reproducible, and the statistics saved.
aug="--model cnn --data $tmp/img --epochs 3 --augment crop,flip,jitter --standardize --seed 3"
"$CHUTNEY" train $aug --save "$tmp/aug.ckpt" $common >"$tmp/aug1" 2>"$tmp/err" || { fail "train --augment"; cat "$tmp/err"; }
"$CHUTNEY" train $aug $common >"$tmp/aug2" 2>"$tmp/err" || fail "train --augment again"
l1=$(json_field "$tmp/aug1" final_loss) l2=$(json_field "$tmp/aug2" final_loss)
[ -n "$l1" ] && [ "$l1" = "$l2" ] && echo "ok: --augment is reproducible (final loss $l1)" || fail "--augment: losses $l1 and $l2"
aacc=$(json_field "$tmp/aug1" test_accuracy)
above "$aacc" 0.8 && echo "ok: augmented training: test accuracy $aacc" || fail "augmented accuracy '$aacc'"
nm=$(meta "$tmp/aug.ckpt" norm_mean)
[ "$(echo "$nm" | tr ',' '\n' | wc -l)" -eq 3 ] && echo "ok: per-channel mean in the checkpoint: $nm" || fail "norm_mean '$nm'"
"$CHUTNEY" eval --model cnn --load "$tmp/aug.ckpt" --json >"$tmp/eval" 2>&1 || fail "eval --standardize"
[ "$(json_field "$tmp/eval" test_accuracy)" = "$aacc" ] || fail "eval of the standardised model: $(cat "$tmp/eval")"

# train/ and test/ inside the folder; grey; lstm reads the rows (eager here:
# train_cli covers the compiled step).
"$CHUTNEY" train --model lstm --mode eager --data "$tmp/split" --epochs 3 --lr 0.01 --save "$tmp/split.ckpt" $common >"$tmp/out" 2>"$tmp/err" ||
    { fail "lstm on train/ test/"; cat "$tmp/err"; }
sacc=$(json_field "$tmp/out" test_accuracy)
above "$sacc" 0.9 && echo "ok: lstm on train/ and test/ folders: $sacc" || fail "lstm on train/ test/: '$sacc'"
[ "$(meta "$tmp/split.ckpt" input_shape)" = 1x8x8 ] || fail "grey input_shape '$(meta "$tmp/split.ckpt" input_shape)'"

# ---- CSV: classification of two blobs ----
"$CHUTNEY" train --model mlp --data "$tmp/blobs.csv" --target label --epochs 5 --save "$tmp/blobs.ckpt" \
    $common >"$tmp/out" 2>"$tmp/err" || { fail "train on blobs.csv"; cat "$tmp/err"; }
bacc=$(json_field "$tmp/out" test_accuracy)
above "$bacc" 0.9 && echo "ok: CSV classification: test accuracy $bacc" || fail "CSV classification: '$bacc'"
[ "$(meta "$tmp/blobs.ckpt" classes | tr '\n' ' ')" = "no yes " ] || fail "CSV classes: '$(meta "$tmp/blobs.ckpt" classes)'"
"$CHUTNEY" eval --model mlp --load "$tmp/blobs.ckpt" --json >"$tmp/eval" 2>&1 || fail "eval blobs"
[ "$(json_field "$tmp/eval" test_accuracy)" = "$bacc" ] && echo "ok: eval of the CSV model agrees" || fail "eval blobs: $(cat "$tmp/eval")"
# --features picks columns (c is noise: a and b alone separate the blobs).
"$CHUTNEY" train --model mlp --data "$tmp/blobs.csv" --target 3 --features a,b --epochs 5 --save "$tmp/ab.ckpt" \
    $common >"$tmp/out" 2>&1 || fail "--features a,b"
[ "$(meta "$tmp/ab.ckpt" input_shape)" = 2 ] && above "$(json_field "$tmp/out" test_accuracy)" 0.9 &&
    echo "ok: --target by index, --features a,b" || fail "--features: $(tail -n 1 "$tmp/out")"

# ---- CSV: regression, y = 2a - 3b + noise ----
"$CHUTNEY" train --model mlp --data "$tmp/reg.csv" --target y --task regress --epochs 20 --save "$tmp/reg.ckpt" \
    $common >"$tmp/out" 2>"$tmp/err" || { fail "regression"; cat "$tmp/err"; }
rmse=$(json_field "$tmp/out" test_rmse)
bound=$(awk -v n="$noise" 'BEGIN { print 2 * n }')
if [ -n "$rmse" ] && ! above "$rmse" "$bound"; then echo "ok: regression: test RMSE $rmse < $bound (2x the noise)"; else fail "regression RMSE '$rmse' (bound $bound)"; fi
for k in norm_mean norm_std target_mean target_std; do
    [ -n "$(meta "$tmp/reg.ckpt" $k)" ] || fail "regression checkpoint lacks $k"
done
[ "$(meta "$tmp/reg.ckpt" norm_mean | tr ',' '\n' | wc -l)" -eq 3 ] || fail "norm_mean of 3 features: '$(meta "$tmp/reg.ckpt" norm_mean)'"
"$CHUTNEY" eval --model mlp --load "$tmp/reg.ckpt" --json >"$tmp/eval" 2>&1 || fail "eval regression"
[ "$(json_field "$tmp/eval" test_rmse)" = "$rmse" ] && echo "ok: eval gives the same RMSE" || fail "eval RMSE: $(cat "$tmp/eval")"

# ---- .npy pairs ----
"$CHUTNEY" train --model mlp --data "$tmp/npy" --epochs 5 $common >"$tmp/out" 2>"$tmp/err" || { fail "npy dir"; cat "$tmp/err"; }
nacc=$(json_field "$tmp/out" test_accuracy)
above "$nacc" 0.8 && echo "ok: x.npy/y.npy with x_test/y_test: $nacc" || fail "npy accuracy '$nacc'"
"$CHUTNEY" train --model mlp --data "$tmp/npy/x.npy" --labels "$tmp/npy/y.npy" --epochs 5 $common >"$tmp/out" 2>"$tmp/err" ||
    { fail "--data x.npy --labels y.npy"; cat "$tmp/err"; }
above "$(json_field "$tmp/out" test_accuracy)" 0.8 && echo "ok: --data x.npy --labels y.npy" || fail "npy pair: $(tail -n 1 "$tmp/out")"

# ---- bad inputs: a failure (1) names the file or column; usage (2) ----
expect_exit "missing target column" 1 "--target 'price': no such column" \
    "$CHUTNEY" train --model mlp --data "$tmp/blobs.csv" --target price
expect_exit "image option on a table" 2 "--augment are for a folder of images, not a CSV table" \
    "$CHUTNEY" train --model mlp --data "$tmp/blobs.csv" --target label --augment flip
printf 'a,b,y\n1,2,0\n3,abc,1\n' >"$tmp/bad.csv"
expect_exit "non-numeric cell" 1 "bad.csv line 3, column 'b': \"abc\" is not a number" \
    "$CHUTNEY" train --model mlp --data "$tmp/bad.csv" --target y
mkdir -p "$tmp/empty/a" "$tmp/empty/b"
cp "$tmp/img/red/000.png" "$tmp/empty/a/"
expect_exit "empty class folder" 1 "empty/b: no images" "$CHUTNEY" train --model cnn --data "$tmp/empty"
cp -r "$tmp/empty/a" "$tmp/empty/b" && echo "not a png" >"$tmp/empty/b/broken.png"
expect_exit "unreadable image" 1 "broken.png" "$CHUTNEY" train --model cnn --data "$tmp/empty"
cp "$tmp/npy/x.npy" "$tmp/x.npy"
expect_exit "x/y lengths differ" 1 "x.npy has 400 samples but" \
    "$CHUTNEY" train --model mlp --data "$tmp/x.npy" --labels "$tmp/npy/y_test.npy"
expect_exit "lstm on a table" 1 "--model lstm reads images" \
    "$CHUTNEY" train --model lstm --data "$tmp/blobs.csv" --target label
expect_exit "CSV without --target" 2 "give --target COLUMN" "$CHUTNEY" train --model mlp --data "$tmp/blobs.csv"
expect_exit "bad --augment" 2 "did you mean 'flip'" "$CHUTNEY" train --model cnn --data "$tmp/img" --augment crop,flop
expect_exit "bad --image-size" 2 "expected HxW" "$CHUTNEY" train --model cnn --data "$tmp/img" --image-size 12
expect_exit "predict on a table model" 1 "not on images" "$CHUTNEY" predict --load "$tmp/blobs.ckpt" "$tmp/img/red/000.png"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "data_cli: all passed"
