#!/bin/sh
# `chutney train --model gpt` and `chutney generate` from the outside, on
# a small text this script writes: a tiny model trains and saves, resumes
# exactly, generates the same text twice for one seed; a missing text file,
# generate without --load and the like fail with a clear message.
#   gpt_cli.sh path/to/chutney
set -u
CHUTNEY=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-gpt.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail, expect_error, expect_exit, cat_text

cat_text "$tmp/text.txt" 400

tiny="--vocab 300 --context 16 --layers 1 --heads 2 --embed 16 --batch 8 --threads 1 --seed 3 --limit 40"
"$CHUTNEY" train --model gpt --data "$tmp/text.txt" --epochs 1 $tiny --save "$tmp/one.ckpt" --json \
    >"$tmp/one" 2>"$tmp/err" || { fail "train --model gpt"; cat "$tmp/err"; }
grep -q '"val_loss":[0-9]' "$tmp/one" && grep -q '"unigram_loss":[0-9]' "$tmp/one" &&
    echo "ok: train --model gpt reports the validation and unigram losses" ||
    { fail "train --model gpt: no losses in"; cat "$tmp/one"; }
grep -q '^validation loss: [0-9.]* (perplexity' "$tmp/one" || fail "no validation loss line"

# Resume: 2 epochs straight equal 1 epoch, save, resume to 2. The model's
# sizes come from the checkpoint: the resume names only the run's settings.
"$CHUTNEY" train --model gpt --data "$tmp/text.txt" --epochs 2 $tiny --json >"$tmp/full" 2>"$tmp/err" ||
    { fail "train 2 epochs"; cat "$tmp/err"; }
"$CHUTNEY" train --model gpt --data "$tmp/text.txt" --epochs 2 --batch 8 --threads 1 --seed 3 \
    --limit 40 --resume "$tmp/one.ckpt" --json \
    >"$tmp/resumed" 2>"$tmp/err" || { fail "train --resume"; cat "$tmp/err"; }
full=$(grep -o '"final_loss":[0-9.e+-]*' "$tmp/full")
resumed=$(grep -o '"final_loss":[0-9.e+-]*' "$tmp/resumed")
if [ -n "$full" ] && [ "$full" = "$resumed" ]; then
    echo "ok: resume gives the uninterrupted run's loss ($full)"
else
    fail "resume: uninterrupted $full, resumed $resumed"
fi
expect_error "resume with another --context" "--context 32, but" \
    "$CHUTNEY" train --model gpt --data "$tmp/text.txt" --epochs 2 --context 32 --resume "$tmp/one.ckpt"
# Eager mode trains too.
"$CHUTNEY" train --model gpt --data "$tmp/text.txt" --epochs 1 $tiny --mode eager --json \
    >"$tmp/eager" 2>"$tmp/err" && grep -q '"mode":"eager"' "$tmp/eager" &&
    echo "ok: --mode eager" || { fail "train --mode eager"; cat "$tmp/err"; }

# Generation: the same seed gives the same text; greedy works; the prompt comes first.
gen="generate --load $tmp/one.ckpt --tokens 30 --threads 1"
"$CHUTNEY" $gen --prompt "the cat" --seed 7 >"$tmp/g1" 2>"$tmp/err" || { fail "generate"; cat "$tmp/err"; }
"$CHUTNEY" $gen --prompt "the cat" --seed 7 >"$tmp/g2" 2>"$tmp/err" || { fail "generate again"; cat "$tmp/err"; }
if cmp -s "$tmp/g1" "$tmp/g2" && [ -s "$tmp/g1" ]; then
    echo "ok: generate with one seed twice: the same text"
else
    fail "generate: two runs with --seed 7 differ"; cat "$tmp/g1" "$tmp/g2"
fi
head -c 7 "$tmp/g1" | grep -q '^the cat' || fail "generate: the output does not start with the prompt"
"$CHUTNEY" $gen --prompt "the dog" --temperature 0 >"$tmp/g3" 2>"$tmp/err" || { fail "generate greedy"; cat "$tmp/err"; }
"$CHUTNEY" $gen --prompt "the dog" --temperature 0 --no-cache >"$tmp/g4" 2>"$tmp/err" || { fail "generate --no-cache"; cat "$tmp/err"; }
cmp -s "$tmp/g3" "$tmp/g4" && echo "ok: greedy with and without the KV cache: the same text" ||
    { fail "greedy differs without the cache"; cat "$tmp/g3" "$tmp/g4"; }
"$CHUTNEY" $gen --prompt "" --top-k 5 --top-p 0.9 >/dev/null 2>"$tmp/err" || { fail "generate from an empty prompt"; cat "$tmp/err"; }
"$CHUTNEY" $gen --prompt "the dog" --temperature 0 --json >"$tmp/gj" 2>"$tmp/err" &&
    grep -q '^{"model":"gpt","mode":"generate","cache":true,"prompt_tokens":[1-9][0-9]*,"new_tokens":30,"seconds":[0-9.]*,"tokens_per_sec":[0-9.]*,"tokens_per_cpu_sec":[0-9.]*,"threads":1}$' "$tmp/gj" &&
    [ "$(wc -l <"$tmp/gj")" -eq 1 ] && echo "ok: generate --json: one line, no text" ||
    { fail "generate --json"; cat "$tmp/gj" "$tmp/err"; }

# Rotary positions: --rope trains, the checkpoint says so, generation reads
# it back, and the KV cache (rows turned at their offsets) gives the same
# greedy text as recomputing, past the context (the window restarts).
"$CHUTNEY" train --model gpt --data "$tmp/text.txt" --epochs 1 $tiny --rope --save "$tmp/rope.ckpt" \
    --json >"$tmp/rope" 2>"$tmp/err" && grep -q '"val_loss":[0-9]' "$tmp/rope" &&
    echo "ok: train --rope" || { fail "train --rope"; cat "$tmp/err"; }
grep -q gpt_rope "$tmp/rope.ckpt" || fail "train --rope: no gpt_rope in the checkpoint's metadata"
rgen="generate --load $tmp/rope.ckpt --tokens 30 --threads 1 --prompt the --temperature 0"
"$CHUTNEY" $rgen >"$tmp/g5" 2>"$tmp/err" || { fail "generate --rope model"; cat "$tmp/err"; }
"$CHUTNEY" $rgen --no-cache >"$tmp/g6" 2>"$tmp/err" || { fail "generate --rope model --no-cache"; cat "$tmp/err"; }
cmp -s "$tmp/g5" "$tmp/g6" && [ -s "$tmp/g5" ] && echo "ok: rope: greedy with and without the KV cache: the same text" ||
    { fail "rope: greedy differs without the cache"; cat "$tmp/g5" "$tmp/g6"; }
expect_exit "train: --rope on mlp" 2 "options of --model gpt" "$CHUTNEY" train --model mlp --rope

# Errors.
expect_exit "train: missing text file" 1 "$tmp/none.txt" "$CHUTNEY" train --model gpt --data "$tmp/none.txt"
expect_exit "train: gpt without --data" 2 "needs --data FILE" "$CHUTNEY" train --model gpt
expect_exit "train: gpt options on mlp" 2 "options of --model gpt" "$CHUTNEY" train --model mlp --vocab 600
expect_exit "train: bad --dropout" 2 "bad value '1.5' for --dropout" "$CHUTNEY" train --model gpt --data "$tmp/text.txt" --dropout 1.5
expect_exit "train: --embed not a multiple of --heads" 2 "multiple of --heads" "$CHUTNEY" train --model gpt --data "$tmp/text.txt" --embed 10 --heads 4
printf 'ab' >"$tmp/short.txt"
expect_exit "train: a text too short" 1 "too short" "$CHUTNEY" train --model gpt --data "$tmp/short.txt" --threads 1
expect_exit "generate without --load" 2 "--load CKPT is required" "$CHUTNEY" generate --prompt hi
expect_exit "generate: missing checkpoint" 1 "$tmp/none.ckpt" "$CHUTNEY" generate --load "$tmp/none.ckpt"
printf 'not a checkpoint' >"$tmp/bad.ckpt"
expect_exit "generate: corrupt checkpoint" 1 "bad.ckpt" "$CHUTNEY" generate --load "$tmp/bad.ckpt"
expect_exit "generate: bad --temperature" 2 "bad value '-1' for --temperature" "$CHUTNEY" generate --load "$tmp/one.ckpt" --temperature -1
expect_exit "generate: unknown option" 2 "did you mean '--tokens'" "$CHUTNEY" generate --load "$tmp/one.ckpt" --token 5

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all gpt CLI checks passed"
