#!/bin/sh
# `chutney train --model-file` and the optimiser options from the outside:
# each error of the text format names its FILE:LINE (exit 2, before any
# data is read); a model file trains on a slice of Fashion-MNIST past an
# accuracy, reproduces the built-in cnn's losses, resumes exactly (with
# dropout, a schedule, clipping and label smoothing), and its checkpoint
# evaluates, exports to ONNX that `chutney run` runs to eval's logits, and
# predicts; --config files and their precedence; every option's bad value
# exits 2 naming it. The options' arithmetic against torch.optim:
# tests/cli/optim_options.py.
#   model_file_cli.sh path/to/chutney [tests/cli/optim_options.py]
# Exits 77 (skipped) without the dataset or numpy.
set -u
CHUTNEY=$1
OPTIM=${2:-}
DATA=${CN_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
PY=/usr/bin/python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-model-file.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail, expect_error, expect_exit, cat_text
EXAMPLE=$(dirname "$0")/../../examples/models/cnn.txt

[ -f "$DATA/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST at $DATA"; exit 77; }
$PY -c "import numpy" 2>/dev/null || { echo "SKIP: numpy is not installed"; exit 77; }

# The first 2000 training and 500 test images as IDX files of their own:
# every run below reads a small file instead of the whole set.
mkdir -p "$tmp/data"
$PY - "$DATA" "$tmp/data" <<'PY' || fail "writing the data slice"
import gzip, struct, sys
src, dst = sys.argv[1], sys.argv[2]
for split, n in (("train", 2000), ("t10k", 500)):
    with gzip.open("%s/%s-images-idx3-ubyte.gz" % (src, split)) as f:
        f.read(16)
        img = f.read(n * 784)
    with gzip.open("%s/%s-labels-idx1-ubyte.gz" % (src, split)) as f:
        f.read(8)
        lab = f.read(n)
    open("%s/%s-images-idx3-ubyte" % (dst, split), "wb").write(struct.pack(">IIII", 2051, n, 28, 28) + img)
    open("%s/%s-labels-idx1-ubyte" % (dst, split), "wb").write(struct.pack(">II", 2049, n) + lab)
PY
D="--data $tmp/data --threads 2 --json"

json_field() { grep -o "\"$2\":[^,}]*" "$1" | tail -n 1 | cut -d: -f2; }
# A checkpoint's metadata value, or its f64 scalar tensor (optimizer.momentum).
ckpt() {
    $PY - "$1" "$2" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + n])
k = sys.argv[2]
if k in h.get("__metadata__", {}):
    print(h["__metadata__"][k])
elif k in h:
    lo, hi = h[k]["data_offsets"]
    print("%.17g" % struct.unpack("<d", raw[8 + n + lo:8 + n + hi])[0])
else:
    print("missing")
PY
}

# ---- the format's errors: FILE:LINE and what is wrong, exit 2 ----
bad() { # DESCRIPTION NEEDLE CONTENT (printf format)
    printf "$3" >"$tmp/bad.txt"
    expect_exit "$1" 2 "$2" "$CHUTNEY" train --model-file "$tmp/bad.txt" --data "$tmp/nowhere"
}
bad "unknown layer, did you mean" "bad.txt:3: unknown layer 'conv2' (did you mean conv2d?)" \
    '# a comment\ninput 1 28 28\nconv2 32 kernel=3\n'
bad "PyTorch's spelling" "bad.txt:2: unknown layer 'max_pool2d' (did you mean maxpool2d?)" \
    'input 1 28 28\nmax_pool2d 2\n'
bad "unknown argument" "bad.txt:2: conv2d has no argument 'kernal' (did you mean kernel?)" \
    'input 1 28 28\nconv2d 32 kernal=3\n'
bad "missing argument" "bad.txt:2: conv2d needs kernel (as in 'conv2d 32 kernel=3 padding=1')" \
    'input 1 28 28\nconv2d 32\n'
bad "bad number" "bad.txt:3: linear: out=ten is not a whole number" \
    'input 1 28 28\nflatten\nlinear ten\n'
bad "bad choice" "bad.txt:3: lstm: output=first is not one of last, all" \
    'input 1 28 28\nreshape 28 28\nlstm 16 output=first\n'
bad "too many positional" "bad.txt:2: relu takes no arguments" 'input 1 28 28\nrelu 3\n'
bad "positional after key=value" "bad.txt:2: conv2d: '3' comes after key=value arguments" \
    'input 1 28 28\nconv2d out=8 3\n'
bad "rank mismatch" "bad.txt:4: conv2d needs images [C, H, W]; its input here is [784]" \
    'input 1 28 28\nflatten\n\nconv2d 8 kernel=3\n'
bad "kernel larger than the image" "bad.txt:2: conv2d does not fit its input [1, 28, 28]" \
    'input 1 28 28\nconv2d 8 kernel=30\n'
bad "pooled to nothing" "bad.txt:6: maxpool2d does not fit its input [1, 1, 1]" \
    'input 1 28 28\nmaxpool2d 2\nmaxpool2d 2\nmaxpool2d 2\nmaxpool2d 2\nmaxpool2d 2\n'
bad "reshape of the wrong size" "bad.txt:2: reshape [28, 27]: its input [1, 28, 28] has 784 values" \
    'input 1 28 28\nreshape 28 27\n'
bad "lstm needs a sequence" "bad.txt:2: lstm needs a sequence [T, F]" 'input 1 28 28\nlstm 8\n'
bad "groups" "bad.txt:2: conv2d: groups=4 must divide" 'input 1 28 28\nconv2d 8 3 groups=4\n'
bad "layer before input" "bad.txt:1: linear before the input line" 'linear 10\n'
bad "two input lines" "bad.txt:2: a second input line" 'input 784\ninput 784\n'
bad "no layers" "bad.txt: no layers after the input line" '# nothing\ninput 1 28 28\n'
bad "empty file" "bad.txt: no input line" '\n# only comments\n'
bad "dropout p of 1" "bad.txt:3: dropout: p=1 is not a number from 0 to below 1" \
    'input 784\nlinear 10\ndropout 1\n'
expect_exit "missing file" 1 "--model-file $tmp/none.txt" \
    "$CHUTNEY" train --model-file "$tmp/none.txt"
expect_exit "--dropout without a dropout line" 2 "--dropout: $EXAMPLE has no 'dropout' line" \
    "$CHUTNEY" train --model-file "$EXAMPLE" --dropout 0.3 --data "$tmp/nowhere"
expect_exit "--model and --model-file" 2 "--model and --model-file both name the model" \
    "$CHUTNEY" train --model cnn --model-file "$EXAMPLE"
# A few large layers together: the parameter budget, before anything is allocated.
printf 'input 1 28 28\nflatten\nlinear 16000000\nlinear 10\n' >"$tmp/big.txt"
expect_exit "parameter budget" 2 "big.txt:3: linear makes the model 1.256e+10 parameters, more than" \
    "$CHUTNEY" train --model-file "$tmp/big.txt"
printf 'input 1 28 28\nflatten\nlinear 64\nlinear 10\n' >"$tmp/small.txt"
CN_MAX_MODEL_PARAMS=1000 expect_exit "parameter budget lowered" 2 "small.txt:3: linear makes the model 5.024e+04 parameters, more than the 1000" \
    "$CHUTNEY" train --model-file "$tmp/small.txt"
# Checked against the data before training: its samples and classes.
printf 'input 1 28 28\nflatten\nlinear 5\n' >"$tmp/five.txt"
expect_exit "output size" 1 "five.txt:3: the last layer gives [5] per sample, and the data needs [10]" \
    "$CHUTNEY" train --model-file "$tmp/five.txt" $D
printf 'input 3 32 32\nflatten\nlinear 10\n' >"$tmp/rgb.txt"
expect_exit "input shape" 1 "rgb.txt: its input line says samples of [3, 32, 32], and the data's are [1, 28, 28]" \
    "$CHUTNEY" train --model-file "$tmp/rgb.txt" $D

# ---- good files: every layer runs ----
cat >"$tmp/mlp.txt" <<'EOF'
# a small MLP with the layers a table or an image takes
input 1 28 28
flatten            # [784]
linear 128
batchnorm1d eps=1e-5 momentum=0.1
relu
dropout            # p: --dropout's, else 0.5
linear 10
EOF
cat >"$tmp/zoo.txt" <<'EOF'
input 1 28 28
conv2d 8 3 stride=1 padding=1 bias=false
batchnorm2d
gelu approximate=tanh
conv2d 8 kernel=3 groups=2 dilation=2
silu
avgpool2d 2 stride=2
maxpool2d kernel=3 stride=2 padding=1
flatten
layernorm
linear 32
tanh
linear 16
leakyrelu slope=0.1
linear 16
elu alpha=0.5
sigmoid
linear 10
EOF
cat >"$tmp/seq.txt" <<'EOF'
input 1 28 28
reshape 28 28
gru 16 bidirectional=true output=all
flatten
linear 10
EOF
cat >"$tmp/lstm.txt" <<'EOF'
input 1 28 28
reshape 28 28      # 28 steps of 28 pixels
lstm 16 layers=2 dropout=0.1 output=all
rnn 8
linear 10
EOF
for m in zoo seq lstm; do
    "$CHUTNEY" train --model-file "$tmp/$m.txt" $D --limit 64 --epochs 1 >"$tmp/out" 2>"$tmp/err" &&
        echo "ok: $m.txt trains ($(json_field "$tmp/out" final_loss))" || { fail "$m.txt"; cat "$tmp/err"; }
done

# ---- training to an accuracy; the example is the built-in cnn ----
"$CHUTNEY" train --model-file "$tmp/mlp.txt" $D --epochs 1 --optimizer sgd --lr 0.05 --momentum 0.9 \
    --dropout 0.1 >"$tmp/out" 2>"$tmp/err" || { fail "train mlp.txt"; cat "$tmp/err"; }
acc=$(json_field "$tmp/out" test_accuracy)
$PY -c "import sys; sys.exit(not float('${acc:-0}') > 0.70)" &&
    echo "ok: mlp.txt: test accuracy $acc after 1 epoch on 2000 images" || fail "mlp.txt accuracy '$acc'"
for m in "--model cnn" "--model-file $EXAMPLE"; do
    "$CHUTNEY" train $m $D --limit 64 --epochs 1 >"$tmp/out" 2>"$tmp/err" || { fail "train $m"; cat "$tmp/err"; }
    json_field "$tmp/out" final_loss >>"$tmp/cnn_losses"
done
[ "$(sort -u "$tmp/cnn_losses" | wc -l)" = 1 ] && echo "ok: examples/models/cnn.txt is the built-in cnn (loss $(head -n 1 "$tmp/cnn_losses"))" ||
    fail "examples/models/cnn.txt and --model cnn differ: $(cat "$tmp/cnn_losses")"

# ---- exact resume, every setting from the checkpoint ----
O="--optimizer sgd --lr 0.05 --momentum 0.9 --nesterov --weight-decay 1e-4 --schedule cosine --t-max 60
   --warmup 10 --clip 2 --label-smoothing 0.1 --dropout 0.2 --batch 64 --limit 1000"
"$CHUTNEY" train --model-file "$tmp/mlp.txt" $D $O --epochs 2 >"$tmp/full" 2>"$tmp/err" || { fail "2 epochs"; cat "$tmp/err"; }
"$CHUTNEY" train --model-file "$tmp/mlp.txt" $D $O --epochs 1 --save "$tmp/half.ckpt" >"$tmp/out" 2>"$tmp/err" ||
    { fail "1 epoch"; cat "$tmp/err"; }
for mode in static eager; do
    "$CHUTNEY" train --resume "$tmp/half.ckpt" $D --limit 1000 --epochs 2 --mode $mode --save "$tmp/$mode.ckpt" \
        >"$tmp/resumed" 2>"$tmp/err" || { fail "resume ($mode)"; cat "$tmp/err"; }
    a=$(json_field "$tmp/full" final_loss) b=$(json_field "$tmp/resumed" final_loss)
    [ -n "$a" ] && [ "$a" = "$b" ] && echo "ok: resumed ($mode, from the checkpoint's model text and settings) = uninterrupted: loss $a" ||
        fail "resume $mode: loss $b, uninterrupted $a"
done
for kv in "schedule cosine" "t_max 60" "warmup 10" "clip 2" "label_smoothing 0.10000000000000001" \
          "optimizer.momentum 0.90000000000000002" "optimizer.nesterov 1" "optimizer.weight_decay 0.0001"; do
    set -- $kv
    got=$(ckpt "$tmp/static.ckpt" "$1")
    [ "$got" = "$2" ] || fail "checkpoint's $1 is '$got', not '$2'"
done
# Given again on resume, an option wins over the checkpoint's.
"$CHUTNEY" train --resume "$tmp/half.ckpt" $D --limit 1000 --epochs 2 --momentum 0.5 --weight-decay 0 \
    --save "$tmp/over.ckpt" >"$tmp/out" 2>"$tmp/err" || { fail "resume --momentum"; cat "$tmp/err"; }
[ "$(ckpt "$tmp/over.ckpt" optimizer.momentum)" = 0.5 ] && [ "$(ckpt "$tmp/over.ckpt" optimizer.weight_decay)" = 0 ] &&
    [ "$(ckpt "$tmp/over.ckpt" momentum)" = 0.5 ] && echo "ok: --momentum and --weight-decay on resume win" ||
    fail "resume --momentum 0.5: $(ckpt "$tmp/over.ckpt" optimizer.momentum)"
expect_exit "resume with another schedule" 2 "half.ckpt was trained with --schedule cosine and --warmup" \
    "$CHUTNEY" train --resume "$tmp/half.ckpt" $D --limit 1000 --epochs 2 --schedule step --step-size 5
printf 'input 1 28 28\nflatten\nlinear 10\n' >"$tmp/other.txt"
expect_exit "resume with another model text" 2 "other.txt is not the model text" \
    "$CHUTNEY" train --resume "$tmp/half.ckpt" --model-file "$tmp/other.txt" $D

# The GPT takes the options too, and resumes with them exactly.
cat_text "$tmp/text.txt" 400
G="--model gpt --data $tmp/text.txt --vocab 300 --context 16 --layers 1 --heads 2 --embed 16 --batch 8
   --threads 1 --limit 40 --json"
GO="--schedule cosine --t-max 10 --warmup 2 --betas 0.8,0.99 --weight-decay 0.01 --eps 1e-6 --clip 0.5"
"$CHUTNEY" train $G $GO --epochs 2 >"$tmp/gfull" 2>"$tmp/err" || { fail "gpt with options"; cat "$tmp/err"; }
"$CHUTNEY" train $G --epochs 2 >"$tmp/gplain" 2>"$tmp/err" || { fail "gpt"; cat "$tmp/err"; }
"$CHUTNEY" train $G $GO --epochs 1 --save "$tmp/g.ckpt" >"$tmp/out" 2>"$tmp/err" || { fail "gpt 1 epoch"; cat "$tmp/err"; }
"$CHUTNEY" train $G --epochs 2 --resume "$tmp/g.ckpt" >"$tmp/gres" 2>"$tmp/err" || { fail "gpt resume"; cat "$tmp/err"; }
a=$(json_field "$tmp/gfull" final_loss) b=$(json_field "$tmp/gres" final_loss) c=$(json_field "$tmp/gplain" final_loss)
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" != "$c" ] && echo "ok: gpt: the options change the run ($a, not $c) and resume exactly" ||
    fail "gpt: with options $a, resumed $b, without $c"

# ---- the checkpoint elsewhere: eval, export, run, info, predict ----
"$CHUTNEY" eval --load "$tmp/static.ckpt" $D --logits "$tmp/eval.npy" >"$tmp/out" 2>"$tmp/err" ||
    { fail "eval"; cat "$tmp/err"; }
acc_eval=$(json_field "$tmp/out" test_accuracy)
[ "$acc_eval" = "$(json_field "$tmp/full" test_accuracy)" ] && echo "ok: eval --load (no --model): $acc_eval as training said" ||
    fail "eval's accuracy $acc_eval, training's $(json_field "$tmp/full" test_accuracy)"
if "$CHUTNEY" export --load "$tmp/static.ckpt" --output "$tmp/m.onnx" >"$tmp/out" 2>"$tmp/err"; then
    $PY - "$tmp" <<'PY' || fail "writing the test images"
import sys, numpy as np
d = sys.argv[1]
img = np.fromfile(d + "/data/t10k-images-idx3-ubyte", np.uint8, offset=16)
np.save(d + "/images.npy", (img.reshape(-1, 1, 28, 28) / np.float32(255)).astype(np.float32))
PY
    "$CHUTNEY" info "$tmp/m.onnx" >"$tmp/info" 2>&1 && grep -q "logits" "$tmp/info" || fail "info m.onnx"
    "$CHUTNEY" run "$tmp/m.onnx" --input images="$tmp/images.npy" --output-dir "$tmp/run" >"$tmp/out" 2>"$tmp/err" ||
        { fail "run m.onnx"; cat "$tmp/err"; }
    $PY -c "
import sys, numpy as np
a, b = np.load('$tmp/run/logits.npy'), np.load('$tmp/eval.npy')
e = float(np.abs(a - b).max()) if a.shape == b.shape else float('inf')
print('max |run - eval|: %.3g over %s' % (e, a.shape)); sys.exit(e > 1e-4)" >"$tmp/out" 2>&1 &&
        echo "ok: export --load, chutney run: eval's logits ($(cat "$tmp/out"))" || { fail "run's logits"; cat "$tmp/out"; }
elif grep -q "built without ONNX" "$tmp/err"; then
    echo "ok: (export skipped: built without ONNX)"
else
    fail "export --load"; cat "$tmp/err"
fi
$PY -c "
import numpy as np
img = np.fromfile('$tmp/data/t10k-images-idx3-ubyte', np.uint8, offset=16)[:784]
open('$tmp/t0.pgm', 'wb').write(b'P5 28 28 255\n' + img.tobytes())"
if ! "$CHUTNEY" --version | grep -q '+stb'; then
    echo "ok: (predict skipped: built without stb)"
elif "$CHUTNEY" predict --load "$tmp/static.ckpt" "$tmp/t0.pgm" --invert no >"$tmp/out" 2>"$tmp/err" &&
    grep -q "%" "$tmp/out"; then
    echo "ok: predict --load: $(head -n 1 "$tmp/out")"
else
    fail "predict"; cat "$tmp/err" "$tmp/out"
fi

# ---- --config: key = value lines; the command line wins ----
cat >"$tmp/run.cfg" <<EOF
# a run in a file
model-file = $tmp/mlp.txt
optimizer = sgd
lr = 0.05
momentum = 0.9     # trailing comments too
weight_decay = 1e-3
nesterov = true
epochs = 1
limit = 128
EOF
"$CHUTNEY" train --config "$tmp/run.cfg" $D --momentum 0.7 --save "$tmp/cfg.ckpt" >"$tmp/out" 2>"$tmp/err" ||
    { fail "--config"; cat "$tmp/err"; }
[ "$(ckpt "$tmp/cfg.ckpt" optimizer.momentum)" = 0.69999999999999996 ] &&
    [ "$(ckpt "$tmp/cfg.ckpt" optimizer.weight_decay)" = 0.001 ] && [ "$(ckpt "$tmp/cfg.ckpt" optimizer.nesterov)" = 1 ] &&
    [ "$(ckpt "$tmp/cfg.ckpt" lr)" = 0.050000000000000003 ] &&
    echo "ok: --config's settings reach the optimiser; --momentum on the command line wins" ||
    fail "--config: momentum $(ckpt "$tmp/cfg.ckpt" optimizer.momentum), weight decay $(ckpt "$tmp/cfg.ckpt" optimizer.weight_decay)"
cfg_bad() { # DESCRIPTION NEEDLE CONTENT
    printf "$3" >"$tmp/bad.cfg"
    expect_exit "$1" 2 "$2" "$CHUTNEY" train --config "$tmp/bad.cfg" --data "$tmp/nowhere"
}
cfg_bad "config: unknown key" "bad.cfg:2: unknown option '--momentun'; did you mean '--momentum'?" \
    'model = mlp\nmomentun = 0.9\n'
cfg_bad "config: bad value" "bad.cfg:3: bad value 'fast' for --lr" '# x\nmodel = mlp\nlr = fast\n'
cfg_bad "config: no =" "bad.cfg:1: expected 'key = value'" 'model mlp\n'
cfg_bad "config: no value" "bad.cfg:2: no value after '='" 'model = mlp\nlr =\n'
cfg_bad "config: flag value" "bad.cfg:2: bad value 'yes' for nesterov: expected true or false" \
    'model = mlp\nnesterov = yes\n'
cfg_bad "config: option's check" "--alpha is a setting of rmsprop" 'model = mlp\nalpha = 0.9\n'
expect_exit "config: missing file" 1 "--config: cannot open $tmp/none.cfg" "$CHUTNEY" train --config "$tmp/none.cfg"

# ---- every option's bad value: exit 2 naming it, before the data ----
opt_bad() { # NEEDLE OPTIONS...
    needle=$1
    shift
    expect_exit "$*" 2 "$needle" "$CHUTNEY" train --data "$tmp/nowhere" "$@"
}
opt_bad "bad value '1.5' for --momentum" --model mlp --momentum 1.5
opt_bad "bad value '-1' for --weight-decay" --model mlp --weight-decay -1
opt_bad "bad value '0.9' for --betas" --model cnn --betas 0.9
opt_bad "bad value '0' for --eps" --model cnn --eps 0
opt_bad "bad value '2' for --dampening" --model mlp --dampening 2
opt_bad "bad value '0' for --alpha" --model cnn --optimizer rmsprop --alpha 0
opt_bad "bad value '2' for --label-smoothing" --model cnn --label-smoothing 2
opt_bad "bad value '-1' for --clip" --model cnn --clip -1
opt_bad "unknown schedule 'cosin' for --schedule: choose none, step, exponential, cosine or linear; did you mean 'cosine'?" \
    --model cnn --schedule cosin
opt_bad "bad value '0' for --step-size" --model cnn --schedule step --step-size 0
opt_bad "bad value '0' for --gamma" --model cnn --schedule exponential --gamma 0
opt_bad "bad value 'x' for --t-max" --model cnn --schedule cosine --t-max x
opt_bad "bad value '0' for --warmup" --model cnn --warmup 0
opt_bad "bad value '0' for --warmup-factor" --model cnn --warmup 5 --warmup-factor 0
opt_bad "--momentum is a setting of sgd and rmsprop, and this run's optimizer is adam" --model cnn --momentum 0.9
opt_bad "--betas is a setting of adam and adamw, and this run's optimizer is sgd" --model mlp --betas 0.9,0.99
opt_bad "--nesterov needs --momentum above 0" --model mlp --momentum 0 --nesterov
opt_bad "--gamma is a setting of --schedule step and exponential (no --schedule was given)" --model cnn --gamma 0.5
opt_bad "--schedule step needs --step-size N" --model cnn --schedule step
opt_bad "--warmup-factor is a setting of --warmup N" --model cnn --warmup-factor 0.5
opt_bad "--dropout: --model cnn has no dropout" --model cnn --dropout 0.5
opt_bad "--label-smoothing is for the classifiers, not --model gpt" --model gpt --data "$tmp/run.cfg" --label-smoothing 0.1
opt_bad "unknown option '--momentm'; did you mean '--momentum'?" --model mlp --momentm 0.9

# The options' arithmetic against torch.optim (skipped without torch).
if [ -n "$OPTIM" ]; then
    mkdir -p "$tmp/optim"
    $PY "$OPTIM" "$CHUTNEY" "$tmp/optim"
    rc=$?
    if [ $rc -eq 77 ]; then echo "(torch.optim comparison skipped: no torch)"
    elif [ $rc -ne 0 ]; then fail "optim_options.py"; fi
fi

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all model-file checks passed"
