#!/bin/sh
# `chutney quantize`: a small mlp trained briefly, quantised to int8, scores
# within 2 points of its f32 self under `chutney eval`, a tiny GPT within 2%
# of its perplexity; the command's usage errors and refusals.
#   quant_cli.sh path/to/chutney
set -u
CHUTNEY=$1
DATA=${CN_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail, expect_error, expect_exit, cat_text

# The .gz files as they are when the build reads them (decompressing them
# takes longer than the rest); else uncompressed.
if "$CHUTNEY" --version | grep -q '^ *zlib *yes'; then
    data=$DATA
else
    data=$tmp/data
    mkdir -p "$data"
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
        gzip -dc "$DATA/$f.gz" >"$data/$f"
    done
fi

expect_exit "no files" 2 "give the checkpoint" "$CHUTNEY" quantize
expect_exit "unknown option" 2 "unknown option" "$CHUTNEY" quantize --bits 4 a b
printf 'not a checkpoint' >"$tmp/junk"
expect_exit "not a checkpoint" 1 "$tmp/junk" "$CHUTNEY" quantize "$tmp/junk" "$tmp/out.ckpt"

common="--limit 500 --threads 2 --json --seed 3 --data $data"
"$CHUTNEY" train --model mlp --epochs 2 --save "$tmp/f32.ckpt" $common >/dev/null 2>"$tmp/err" || { fail "train"; cat "$tmp/err"; }
"$CHUTNEY" quantize "$tmp/f32.ckpt" "$tmp/int8.ckpt" >"$tmp/out" 2>"$tmp/err" || { fail "quantize"; cat "$tmp/err"; }
grep -q "3 layers in int8" "$tmp/out" || { fail "quantize: $(cat "$tmp/out")"; }
expect_exit "quantize twice" 1 "int8 already" "$CHUTNEY" quantize "$tmp/int8.ckpt" "$tmp/again.ckpt"
expect_exit "resume from int8" 1 "not trained further" "$CHUTNEY" train --model mlp --epochs 2 --resume "$tmp/int8.ckpt" $common

for w in f32 int8; do
    "$CHUTNEY" eval --model mlp --load "$tmp/$w.ckpt" $common >"$tmp/$w.json" 2>"$tmp/err" || { fail "eval $w"; cat "$tmp/err"; }
done
a=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/f32.json" | cut -d: -f2)
b=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/int8.json" | cut -d: -f2)
if [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(d < 0.02 && d > -0.02 && a > 0.3) }'; then
    echo "ok: test accuracy f32 $a, int8 $b"
else
    fail "accuracy: f32 '$a', int8 '$b'"
fi
# A GPT: its block's linear layers in int8, scored by eval on the held-out
# text within 2% of the f32 perplexity.
cat_text "$tmp/text.txt" 300
"$CHUTNEY" train --model gpt --data "$tmp/text.txt" --epochs 1 --vocab 300 --context 16 --layers 1 \
    --heads 2 --embed 16 --batch 8 --threads 1 --seed 3 --limit 40 --save "$tmp/gpt.ckpt" \
    >/dev/null 2>"$tmp/err" || { fail "train --model gpt"; cat "$tmp/err"; }
"$CHUTNEY" quantize "$tmp/gpt.ckpt" "$tmp/gpt8.ckpt" >/dev/null 2>"$tmp/err" || { fail "quantize gpt"; cat "$tmp/err"; }
expect_exit "eval gpt without text" 2 "give --data FILE" "$CHUTNEY" eval --load "$tmp/gpt8.ckpt"
for w in gpt gpt8; do
    "$CHUTNEY" eval --load "$tmp/$w.ckpt" --data "$tmp/text.txt" --json >"$tmp/$w.json" 2>"$tmp/err" || { fail "eval $w"; cat "$tmp/err"; }
done
a=$(grep -o '"val_perplexity":[0-9.]*' "$tmp/gpt.json" | cut -d: -f2)
b=$(grep -o '"val_perplexity":[0-9.]*' "$tmp/gpt8.json" | cut -d: -f2)
if [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { exit !(b < 1.02 * a && b > 0.98 * a) }'; then
    echo "ok: GPT perplexity f32 $a, int8 $b"
else
    fail "GPT perplexity: f32 '$a', int8 '$b'"
fi

if [ "$fails" -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "all passed"
