#!/bin/sh
# --precision from the outside: train (an MLP on a few Fashion-MNIST
# images, static and eager; a tiny GPT) in bf16 and f16, the precision kept
# in the checkpoint and given again on resume, the inference commands
# taking it, f16's loss scaler saved and put back on resume, and bad
# values refused with exit status 2.
#   precision_cli.sh path/to/chutney
set -u
CHUTNEY=$1
DATA=${CN_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-precision.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail, expect_exit, cat_text

expect_exit "train: unknown precision" 2 "unknown precision 'f8'" "$CHUTNEY" train --model mlp --precision f8
expect_exit "eval: unknown precision" 2 "unknown precision 'int8'" "$CHUTNEY" eval --load x --precision int8
expect_exit "predict: no value" 2 "--precision" "$CHUTNEY" predict --precision

mkdir -p "$tmp/data"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    gzip -dc "$DATA/$f.gz" >"$tmp/data/$f"
done
small="--model mlp --limit 256 --batch 64 --threads 1 --data $tmp/data"

"$CHUTNEY" train $small --epochs 1 --precision bf16 --save "$tmp/b.ckpt" >"$tmp/b" 2>"$tmp/err" ||
    { fail "train --precision bf16"; cat "$tmp/err"; }
grep -q 'precision bf16' "$tmp/b" && grep -q 'test accuracy' "$tmp/b" &&
    echo "ok: train --precision bf16" || { fail "train bf16: no precision or accuracy in"; cat "$tmp/b"; }
# Resume: the checkpoint's precision, unless given again.
"$CHUTNEY" train $small --epochs 2 --resume "$tmp/b.ckpt" >"$tmp/r" 2>"$tmp/err" ||
    { fail "resume"; cat "$tmp/err"; }
grep -q 'precision bf16' "$tmp/r" && echo "ok: resume keeps bf16" || { fail "resume lost bf16"; cat "$tmp/r"; }
"$CHUTNEY" train $small --epochs 2 --resume "$tmp/b.ckpt" --precision f32 >"$tmp/r" 2>"$tmp/err" ||
    { fail "resume --precision f32"; cat "$tmp/err"; }
grep -q 'precision' "$tmp/r" && { fail "resume --precision f32 still mixed"; cat "$tmp/r"; } ||
    echo "ok: --precision given on resume wins"

# f16's loss scaler in the checkpoint, and put back on resume: 4 finite
# steps an epoch, so the count of finite steps reads 4, then 8.
scaler_meta() {
    /usr/bin/python3 -c 'import json, struct, sys
b = open(sys.argv[1], "rb").read()
m = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["__metadata__"]
print(m.get("loss_scale"), m.get("loss_scale_growth"), m.get("loss_scale_skipped"))' "$1"
}
"$CHUTNEY" train $small --epochs 1 --precision f16 --save "$tmp/h.ckpt" >/dev/null 2>"$tmp/err" ||
    { fail "train f16 --save"; cat "$tmp/err"; }
"$CHUTNEY" train $small --epochs 2 --resume "$tmp/h.ckpt" --save "$tmp/h2.ckpt" >/dev/null 2>"$tmp/err" ||
    { fail "resume f16"; cat "$tmp/err"; }
m1=$(scaler_meta "$tmp/h.ckpt") m2=$(scaler_meta "$tmp/h2.ckpt")
[ "$m1" = "65536 4 0" ] && [ "$m2" = "65536 8 0" ] &&
    echo "ok: f16's loss scale saved and resumed ($m1, then $m2)" ||
    fail "loss scale in checkpoints: '$m1', then '$m2' (want '65536 4 0', then '65536 8 0')"

for mode in static eager; do
    "$CHUTNEY" train $small --epochs 1 --precision f16 --mode $mode >"$tmp/h" 2>"$tmp/err" ||
        { fail "train --precision f16 --mode $mode"; cat "$tmp/err"; }
    grep -q '^f16 loss scaling: [0-9]* of 4 steps skipped' "$tmp/h" && grep -q 'test accuracy' "$tmp/h" &&
        echo "ok: f16 with loss scaling, $mode: $(grep 'loss scaling' "$tmp/h")" ||
        { fail "f16 $mode: no loss scaling report"; cat "$tmp/h"; }
done

"$CHUTNEY" eval --load "$tmp/b.ckpt" --data "$tmp/data" --limit 256 --precision bf16 >"$tmp/e" 2>"$tmp/err" &&
    grep -q 'test accuracy' "$tmp/e" && echo "ok: eval --precision bf16" || { fail "eval bf16"; cat "$tmp/err"; }

cat_text "$tmp/text.txt" 200
tiny="--vocab 300 --context 16 --layers 1 --heads 2 --embed 16 --batch 8 --threads 1 --limit 24"
"$CHUTNEY" train --model gpt --data "$tmp/text.txt" --epochs 1 $tiny --precision bf16 \
    --save "$tmp/g.ckpt" --json >"$tmp/g" 2>"$tmp/err" && grep -q '"val_loss":[0-9]' "$tmp/g" &&
    echo "ok: train --model gpt --precision bf16" || { fail "gpt bf16"; cat "$tmp/err"; }
"$CHUTNEY" generate --load "$tmp/g.ckpt" --tokens 5 --threads 1 --precision bf16 >"$tmp/t" 2>"$tmp/err" &&
    [ -s "$tmp/t" ] && echo "ok: generate --precision bf16" || { fail "generate bf16"; cat "$tmp/err"; }

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
