#!/bin/sh
# `chutney train` / `chutney eval` from the outside: bad input gives a clear
# message and a non-zero exit (never a crash), --resume continues exactly,
# and eval reads what train saved.
#   train_cli.sh path/to/chutney
set -u
CHUTNEY=$1
DATA=${CN_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail, expect_error

unpack_fashion "$DATA" "$tmp/data" 1500 || { echo "FAIL: cannot unpack $DATA"; exit 1; }

expect_error "unknown model" "unknown model 'resnet'" "$CHUTNEY" train --model resnet
expect_error "missing --model" "--model is required" "$CHUTNEY" train
expect_error "unknown option" "unknown option" "$CHUTNEY" train --model mlp --bogus
expect_error "bad number" "bad value" "$CHUTNEY" train --model mlp --epochs x
expect_error "unknown optimizer" "unknown optimizer" "$CHUTNEY" train --model mlp --optimizer nope --limit 100 --data "$tmp/data"
expect_error "missing data dir" "$tmp/nowhere" "$CHUTNEY" train --model mlp --data "$tmp/nowhere"

# A corrupt and a truncated data set.
mkdir -p "$tmp/bad" "$tmp/trunc"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    printf 'not an idx file at all' >"$tmp/bad/$f"
    gzip -dc "$DATA/$f.gz" | head -c 5000 >"$tmp/trunc/$f"
done
expect_error "corrupt data" "train-images-idx3-ubyte" "$CHUTNEY" train --model mlp --data "$tmp/bad"
expect_error "truncated data" "train-images-idx3-ubyte" "$CHUTNEY" train --model mlp --data "$tmp/trunc"

# Resume: 2 epochs straight equal 1 epoch, save, resume to 2 (same loss).
common="--limit 600 --threads 1 --json --seed 5 --data $tmp/data"
"$CHUTNEY" train --model mlp --epochs 2 $common >"$tmp/full" 2>"$tmp/err" || { fail "train"; cat "$tmp/err"; }
"$CHUTNEY" train --model mlp --epochs 1 --save "$tmp/one.ckpt" $common >/dev/null 2>"$tmp/err" || { fail "train --save"; cat "$tmp/err"; }
"$CHUTNEY" train --model mlp --epochs 2 --resume "$tmp/one.ckpt" --save "$tmp/two.ckpt" $common >"$tmp/resumed" 2>"$tmp/err" || { fail "train --resume"; cat "$tmp/err"; }
full=$(grep -o '"final_loss":[0-9.e+-]*' "$tmp/full")
resumed=$(grep -o '"final_loss":[0-9.e+-]*' "$tmp/resumed")
if [ -n "$full" ] && [ "$full" = "$resumed" ]; then
    echo "ok: resume gives the uninterrupted run's loss ($full)"
else
    fail "resume: uninterrupted $full, resumed $resumed"
fi
acc_full=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/full")
acc_res=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/resumed")
[ "$acc_full" = "$acc_res" ] || fail "resume: accuracy $acc_full vs $acc_res"

# eval reads the checkpoint and gets the same test accuracy.
"$CHUTNEY" eval --model mlp --load "$tmp/two.ckpt" --limit 600 --data "$tmp/data" --json >"$tmp/eval" 2>"$tmp/err" || { fail "eval"; cat "$tmp/err"; }
acc_eval=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/eval")
if [ -n "$acc_eval" ] && [ "$acc_eval" = "$acc_res" ]; then
    echo "ok: eval of the saved checkpoint: $acc_eval"
else
    fail "eval: $acc_eval, training reported $acc_res"
fi

# --mode static (one compiled program per step, the default) trains like eager mode:
# the same losses within float rounding (the passes may reorder sums), after
# 3 to 5 steps (320 images, a partial last batch for mlp and lstm).
for m in mlp cnn lstm; do
    for t in 1 2; do
        sc="--model $m --epochs 1 --limit 320 --threads $t --json --seed 3 --data $tmp/data"
        "$CHUTNEY" train $sc --mode eager >"$tmp/eager" 2>"$tmp/err" || { fail "$m eager"; cat "$tmp/err"; }
        "$CHUTNEY" train $sc --mode static >"$tmp/static" 2>"$tmp/err" || { fail "$m static"; cat "$tmp/err"; }
        le=$(grep -o '"final_loss":[0-9.e+-]*' "$tmp/eager" | cut -d: -f2)
        ls=$(grep -o '"final_loss":[0-9.e+-]*' "$tmp/static" | cut -d: -f2)
        if [ -n "$le" ] && [ -n "$ls" ] &&
            awk -v a="$le" -v b="$ls" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * (a < 0 ? -a : a) + 1e-6) }'; then
            echo "ok: $m, $t thread(s): static loss $ls, eager $le"
        else
            fail "$m, $t thread(s): static loss '$ls', eager '$le'"
        fi
    done
done
expect_error "bad mode" "bad value" "$CHUTNEY" train --model mlp --mode lazy

# No batch trained: the JSON line stays JSON (null, never a bare nan).
out=$("$CHUTNEY" train --model mlp --epochs 0 --limit 100 --json --data "$tmp/data" 2>"$tmp/err" | tail -n 1)
case "$out" in
*'"final_loss":null,'*) echo "ok: --epochs 0: final_loss null" ;;
*) fail "--epochs 0: $out" ;;
esac

# chutney graph: DOT before and after the passes.
"$CHUTNEY" graph --model mlp --train >"$tmp/g0.dot" 2>"$tmp/err" || { fail "graph"; cat "$tmp/err"; }
"$CHUTNEY" graph --model mlp --train --optimized >"$tmp/g2.dot" 2>"$tmp/err" || { fail "graph --optimized"; cat "$tmp/err"; }
if grep -q '^digraph program' "$tmp/g0.dot" && ! grep -q 'fused' "$tmp/g0.dot" && grep -q 'fused' "$tmp/g2.dot"; then
    echo "ok: graph writes DOT; --optimized shows fused steps"
else
    fail "graph: DOT output unexpected"
fi
if command -v dot >/dev/null 2>&1; then
    "$CHUTNEY" graph --model cnn --optimized --png "$tmp/g.png" 2>"$tmp/err" || { fail "graph --png"; cat "$tmp/err"; }
    if [ "$(head -c 4 "$tmp/g.png" | tail -c 3)" = "PNG" ]; then echo "ok: graph --png"; else fail "graph --png wrote no PNG"; fi
fi
expect_error "graph without a model" "--model is required" "$CHUTNEY" graph

# Checkpoints of another model, a truncated one, a file that is not one.
expect_error "checkpoint of another model" "holds a 'mlp' model" "$CHUTNEY" eval --model cnn --load "$tmp/two.ckpt" --limit 100 --data "$tmp/data"
head -c 3000 "$tmp/two.ckpt" >"$tmp/cut.ckpt"
expect_error "truncated checkpoint" "cut.ckpt" "$CHUTNEY" eval --model mlp --load "$tmp/cut.ckpt" --limit 100 --data "$tmp/data"
expect_error "missing resume file" "notes.txt" "$CHUTNEY" train --model mlp --resume "$tmp/notes.txt" --limit 100 --data "$tmp/data"
printf 'hello' >"$tmp/notes.txt"
expect_error "garbage checkpoint" "notes.txt" "$CHUTNEY" eval --model mlp --load "$tmp/notes.txt" --limit 100 --data "$tmp/data"
expect_error "missing checkpoint" "absent.ckpt" "$CHUTNEY" eval --model mlp --load "$tmp/absent.ckpt" --limit 100 --data "$tmp/data"

if [ "$fails" -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "all passed"
