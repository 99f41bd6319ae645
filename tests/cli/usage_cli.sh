#!/bin/sh
# The command line as a newcomer finds it: every command's --help, exit
# status 2 for a bad command line and 1 for a failure, "did you mean",
# options checked before any data is read, --save's directory checked
# before training, `chutney run` listing a model's inputs, --version's
# features, `info` counting what `export` counts, `predict` on image files.
#   usage_cli.sh path/to/chutney
# Parts that need Fashion-MNIST, ONNX or stb are skipped without them.
set -u
CHUTNEY=$1
DATA=${CN_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-usage-cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail, expect_exit

# ---- help: every command, both ways, on stdout with status 0 ----
# (`help CMD` runs CMD --help: two of them show it; each start costs ~0.2 s.)
for form in "train --help" "eval --help" "predict --help" "graph --help" "ops --help" "run --help" \
    "info --help" "export --help" "devices --help" "generate --help" "quantize --help" "help train" \
    "help run"; do
    # shellcheck disable=SC2086 # form is two words
    if "$CHUTNEY" $form >"$tmp/out" 2>"$tmp/err" && grep -q '^usage: chutney' "$tmp/out"; then
        :
    else
        fail "chutney $form: no usage on stdout with status 0"; cat "$tmp/err"
    fi
done
echo "ok: every command has --help, and chutney help CMD"
"$CHUTNEY" --help >"$tmp/out" && grep -q "predict" "$tmp/out" || fail "chutney --help lacks predict"
expect_exit "no command" 2 "usage: chutney" "$CHUTNEY"

# ---- did you mean: an unknown option in every command, status 2 ----
expect_exit "mistyped command" 2 "did you mean 'train'?" "$CHUTNEY" tran --model mlp
expect_exit "mistyped --version" 2 "did you mean '--version'?" "$CHUTNEY" --verison
expect_exit "help for a mistyped command" 2 "did you mean 'export'?" "$CHUTNEY" help exprot
expect_exit "mistyped option" 2 "did you mean '--epochs'?" "$CHUTNEY" train --model mlp --epoch 3
expect_exit "swapped letters in a model" 2 "did you mean 'mlp'?" "$CHUTNEY" train --model mpl
expect_exit "mistyped optimizer" 2 "did you mean 'adam'?" "$CHUTNEY" train --model cnn --optimizer adma
expect_exit "mistyped mode" 2 "did you mean 'static'?" "$CHUTNEY" train --model mlp --mode statc
expect_exit "mistyped eval option" 2 "did you mean '--logits'?" "$CHUTNEY" eval --model mlp --load x --logit l.npy
expect_exit "mistyped run option" 2 "did you mean '--input'?" "$CHUTNEY" run m.onnx --inptu x=x.npy
expect_exit "mistyped export option" 2 "did you mean '--output'?" "$CHUTNEY" export --model mlp --ouput m.onnx
expect_exit "mistyped graph option" 2 "did you mean '--optimized'?" "$CHUTNEY" graph --model mlp --optimised
expect_exit "mistyped predict option" 2 "did you mean '--top'?" "$CHUTNEY" predict --load x --tpo 2 a.png
expect_exit "mistyped ops option" 2 "did you mean '--markdown'?" "$CHUTNEY" ops --markdwn
expect_exit "mistyped devices option" 2 "did you mean '--json'?" "$CHUTNEY" devices --jsno
expect_exit "mistyped info option" 2 "did you mean '--supported-ops'?" "$CHUTNEY" info --supported-op

# ---- usage errors exit 2 in every command: unknown option (above, for
# each command), missing value, bad value ----
expect_exit "train: missing value" 2 "--epochs needs a value" "$CHUTNEY" train --model mlp --epochs
expect_exit "train: option instead of a value" 2 "--model needs a value: mlp, cnn or lstm" "$CHUTNEY" train --model --epochs 2
expect_exit "eval: missing --load" 2 "eval needs --load" "$CHUTNEY" eval --model mlp
expect_exit "export: missing value" 2 "--output needs a value" "$CHUTNEY" export --model mlp --output
expect_exit "export: bad --batch" 2 "bad value 'x' for --batch: expected a whole number" "$CHUTNEY" export --model mlp --batch x --output "$tmp/m.onnx"
expect_exit "graph: bad -O" 2 "bad value '3' for -O: expected a whole number from 0 to 2" "$CHUTNEY" graph --model mlp -O 3
expect_exit "graph: unknown model" 2 "unknown model 'vgg'" "$CHUTNEY" graph --model vgg
expect_exit "run: missing value" 2 "--output-dir needs a value" "$CHUTNEY" run m.onnx --output-dir
expect_exit "run: bad --input" 2 "expected NAME=FILE.npy" "$CHUTNEY" run m.onnx --input x.npy --output-dir "$tmp/o"
expect_exit "run: bad --threads" 2 "bad value '0' for --threads" "$CHUTNEY" run m.onnx --threads 0 --output-dir "$tmp/o"
expect_exit "predict: no image" 2 "no image given" "$CHUTNEY" predict --load x.ckpt
expect_exit "predict: bad --top" 2 "bad value '11' for --top" "$CHUTNEY" predict --load x.ckpt --top 11 a.png
expect_exit "predict: bad --invert" 2 "choose auto, yes or no" "$CHUTNEY" predict --load x.ckpt --invert maybe a.png
expect_exit "info: two models" 2 "one model at a time" "$CHUTNEY" info a.onnx b.onnx

# ---- options checked before the data: a corrupt data set is never read ----
mkdir -p "$tmp/bad"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    printf 'not an idx file at all' >"$tmp/bad/$f"
done
bad="--data $tmp/bad"
expect_exit "--epochs -1" 2 "bad value '-1' for --epochs: expected a whole number from 0" "$CHUTNEY" train --model mlp --epochs -1 $bad
expect_exit "--lr abc" 2 "bad value 'abc' for --lr: expected a positive number" "$CHUTNEY" train --model mlp --lr abc $bad
expect_exit "--lr 0" 2 "bad value '0' for --lr" "$CHUTNEY" train --model mlp --lr 0 $bad
expect_exit "--batch 0" 2 "bad value '0' for --batch: expected a whole number from 1" "$CHUTNEY" train --model mlp --batch 0 $bad
expect_exit "--seed -1" 2 "bad value '-1' for --seed" "$CHUTNEY" train --model mlp --seed -1 $bad
expect_exit "--threads 0" 2 "bad value '0' for --threads" "$CHUTNEY" train --model mlp --threads 0 $bad
expect_exit "unknown --model" 2 "unknown model 'resnet' for --model: choose mlp, cnn, lstm or gpt" "$CHUTNEY" train --model resnet $bad
expect_exit "unknown --optimizer" 2 "choose sgd, adam, adamw, rmsprop or adagrad" "$CHUTNEY" train --model mlp --optimizer lion $bad
expect_exit "--device tpu" 2 "device 'tpu': unknown kind (cpu, opencl or cuda" "$CHUTNEY" train --model mlp --device tpu $bad
expect_exit "--device cpu:3" 1 "no device cpu:3" "$CHUTNEY" train --model mlp --device cpu:3 $bad
expect_exit "eval --limit 0" 2 "bad value '0' for --limit" "$CHUTNEY" eval --model mlp --load x.ckpt --limit 0 $bad

# ---- files checked before training: status 1, naming the path ----
expect_exit "--save into a missing directory" 1 "the directory $tmp/nowhere does not exist" \
    "$CHUTNEY" train --model mlp --save "$tmp/nowhere/m.ckpt" $bad
expect_exit "--save a directory" 1 "is a directory; give a file name" "$CHUTNEY" train --model mlp --save "$tmp" $bad
expect_exit "--resume a missing file" 1 "$tmp/absent.ckpt" "$CHUTNEY" train --model mlp --resume "$tmp/absent.ckpt" $bad
expect_exit "eval --logits into a missing directory" 1 "does not exist" \
    "$CHUTNEY" eval --model mlp --load "$tmp/bad/t10k-images-idx3-ubyte" --logits "$tmp/nowhere/l.npy" $bad
expect_exit "--data a missing directory" 1 "--data $tmp/nowhere" "$CHUTNEY" train --model mlp --data "$tmp/nowhere"
expect_exit "graph --output into a missing directory" 1 "does not exist" "$CHUTNEY" graph --model mlp --output "$tmp/nowhere/g.dot"
expect_exit "export --output into a missing directory" 1 "does not exist" "$CHUTNEY" export --model mlp --output "$tmp/nowhere/m.onnx"
expect_exit "run --output-dir under a missing directory" 1 "does not exist" "$CHUTNEY" run "$tmp/bad/t10k-images-idx3-ubyte" --output-dir "$tmp/nowhere/out"
# Then the data is read, and its failure is a failure (1), not a usage error.
expect_exit "corrupt data after good options" 1 "train-images-idx3-ubyte" "$CHUTNEY" train --model mlp $bad

# ---- --version: every optional feature, yes or no, and the CPU code in use ----
"$CHUTNEY" --version >"$tmp/version" 2>&1 || fail "--version exited $?"
missing=""
for f in onnx openblas cblas onednn opencl clblast cuda nccl mpi zlib stb; do
    grep -Eq "^  $f +(yes|no) " "$tmp/version" || missing="$missing $f"
done
if [ -n "$missing" ] || ! grep -Eq '^cpu: (default|avx2|avx512) code in use' "$tmp/version" ||
    ! head -n 1 "$tmp/version" | grep -q '^chutney [0-9]'; then
    fail "--version lacks:$missing"; cat "$tmp/version"
else
    echo "ok: --version: $(grep -c ' yes ' "$tmp/version") features built in, $(grep '^cpu:' "$tmp/version" | cut -d' ' -f2) code"
fi
have() { grep -Eq "^  $1 +yes " "$tmp/version"; }

# ---- the rest needs Fashion-MNIST (a checkpoint trained on a few images) ----
if [ ! -f "$DATA/train-images-idx3-ubyte.gz" ] || ! have zlib; then
    echo "skipped: no Fashion-MNIST at $DATA (or no zlib): info, run, predict not tested"
else
    mkdir -p "$tmp/data"
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
        gzip -dc "$DATA/$f.gz" >"$tmp/data/$f"
    done
    "$CHUTNEY" train --model mlp --epochs 1 --limit 2000 --threads 2 --save "$tmp/mlp.ckpt" \
        --data "$tmp/data" >"$tmp/train" 2>&1 || { fail "train"; cat "$tmp/train"; }
    trained=$(sed -n 's/^training mlp (\([0-9]*\) parameters).*/\1/p' "$tmp/train")

    # info counts the parameters export writes, which are the checkpoint's.
    if have onnx; then
        "$CHUTNEY" export --model mlp --load "$tmp/mlp.ckpt" --output "$tmp/mlp.onnx" >"$tmp/out" 2>&1 ||
            { fail "export"; cat "$tmp/out"; }
        exported=$(sed -n 's/^wrote .*: mlp, \([0-9]*\) parameters.*/\1/p' "$tmp/out")
        "$CHUTNEY" info "$tmp/mlp.onnx" >"$tmp/info" 2>&1 || { fail "info"; cat "$tmp/info"; }
        counted=$(sed -n 's/^parameters: \([0-9]*\).*/\1/p' "$tmp/info")
        if [ -n "$trained" ] && [ "$trained" = "$exported" ] && [ "$exported" = "$counted" ]; then
            echo "ok: info counts $counted parameters, as export ($exported) and the checkpoint ($trained)"
        else
            fail "parameters: checkpoint '$trained', export '$exported', info '$counted'"; cat "$tmp/info"
        fi
        # A wrong input name: status 2, a suggestion, and the model's inputs.
        h="{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 28, 28), }"
        while [ $(((10 + ${#h} + 1) % 64)) -ne 0 ]; do h="$h "; done
        { printf '\223NUMPY\001\000'; printf "\\$(printf %03o $((${#h} + 1)))\\000"; printf '%s\n' "$h"
            head -c 6272 /dev/zero; } >"$tmp/x.npy"
        expect_exit "run: wrong input name" 2 "'image' is not an input of the model; did you mean 'images'?" \
            "$CHUTNEY" run "$tmp/mlp.onnx" --input image="$tmp/x.npy" --output-dir "$tmp/o"
        if grep -Eq '^  images +f32 +\[\?, 1, 28, 28\]' "$tmp/err"; then
            echo "ok: run: the model's inputs are listed"
        else
            fail "run: the inputs are not listed:"; cat "$tmp/err"
        fi
        expect_exit "run: no input given" 2 "missing --input for the model's input 'images'" \
            "$CHUTNEY" run "$tmp/mlp.onnx" --output-dir "$tmp/o"
        "$CHUTNEY" run "$tmp/mlp.onnx" --input images="$tmp/x.npy" --output-dir "$tmp/o" >"$tmp/out" 2>&1 ||
            { fail "run with the right name"; cat "$tmp/out"; }
    else
        echo "skipped: built without ONNX: info, run not tested"
    fi

    # graph: the parameters' boxes carry their names.
    "$CHUTNEY" graph --model cnn --train >"$tmp/g.dot" 2>&1 && grep -q '0\.weight' "$tmp/g.dot" &&
        echo "ok: graph names the parameters" || fail "graph: no parameter names in the DOT"
    # ... and the gradients written into their .grad.
    grep -q 'output [0-9]*\\ngrad 0\.weight' "$tmp/g.dot" &&
        echo "ok: graph names the gradients" || fail "graph: no gradient names in the DOT"

    # predict: test image 0 as stored (28x28, light on black), inverted
    # (dark on white: inverted back), and twice the size (averaged back):
    # the same picture each time, so the same line; and what eval computes.
    img0() { gzip -dc "$DATA/t10k-images-idx3-ubyte.gz" | tail -c +17 | head -c 784; }
    { printf 'P5\n28 28\n255\n'; img0; } >"$tmp/t0.pgm"
    { printf 'P5\n28 28\n255\n'; img0 | od -An -v -tu1 | LC_ALL=C awk '{ for (i = 1; i <= NF; i++) printf "%c", 255 - $i }'; } >"$tmp/t0inv.pgm"
    { printf 'P5\n56 56\n255\n'; img0 | od -An -v -tu1 |
        LC_ALL=C awk '{ for (i = 1; i <= NF; i++) p[n++] = $i }
                      END { for (y = 0; y < 56; y++) for (x = 0; x < 56; x++) printf "%c", p[int(y / 2) * 28 + int(x / 2)] }'; } >"$tmp/t0big.pgm"
    if ! have stb; then
        expect_exit "predict without stb" 1 "built without stb" "$CHUTNEY" predict --load "$tmp/mlp.ckpt" "$tmp/t0.pgm"
    elif "$CHUTNEY" predict --load "$tmp/mlp.ckpt" "$tmp/t0.pgm" "$tmp/t0inv.pgm" "$tmp/t0big.pgm" >"$tmp/pred" 2>&1; then
        a=$(sed -n 1p "$tmp/pred" | cut -d: -f2) b=$(sed -n 2p "$tmp/pred" | cut -d: -f2 | sed 's/ (inverted.*//')
        c=$(sed -n 3p "$tmp/pred" | cut -d: -f2)
        grep -q "t0inv.pgm:.*(inverted: light background)" "$tmp/pred" || fail "predict: the white image was not inverted"
        [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] || { fail "predict: the three pictures differ"; cat "$tmp/pred"; }
        # eval's logits for the same image: its class and softmax probability.
        "$CHUTNEY" eval --model mlp --load "$tmp/mlp.ckpt" --limit 1 --logits "$tmp/l.npy" --data "$tmp/data" >/dev/null 2>&1 ||
            fail "eval --logits"
        want=$(od -An -v -tf4 -j 128 "$tmp/l.npy" | awk '{ for (i = 1; i <= NF; i++) v[n++] = $i }
            END { b = 0; for (i = 1; i < n; i++) if (v[i] > v[b]) b = i; s = 0
                  for (i = 0; i < n; i++) s += exp(v[i] - v[b]); printf "%d %.1f%%", b, 100 / s }')
        got=$("$CHUTNEY" predict --load "$tmp/mlp.ckpt" --numbers --top 1 "$tmp/t0.pgm" 2>&1 | cut -d: -f2 | sed 's/^ //')
        if [ "$got" = "$want" ]; then
            echo "ok: predict:$a (eval's logits: $want)"
        else
            fail "predict --numbers: '$got', eval's logits give '$want'"
        fi
        printf 'not an image' >"$tmp/junk.png"
        expect_exit "predict: not an image" 1 "junk.png" "$CHUTNEY" predict --load "$tmp/mlp.ckpt" "$tmp/junk.png"
        expect_exit "predict: a missing image" 1 "absent.png" "$CHUTNEY" predict --load "$tmp/mlp.ckpt" "$tmp/absent.png"
        expect_exit "predict: another model's checkpoint" 1 "holds a 'mlp' model, not 'cnn'" \
            "$CHUTNEY" predict --load "$tmp/mlp.ckpt" --model cnn "$tmp/t0.pgm"
        expect_exit "predict: not a checkpoint" 1 "t0.pgm" "$CHUTNEY" predict --load "$tmp/t0.pgm" "$tmp/t0.pgm"
    else
        fail "predict"; cat "$tmp/pred"
    fi
fi

if [ "$fails" -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "all passed"
