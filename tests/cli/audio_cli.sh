#!/bin/sh
# `chutney train --data DIR` of WAV clips: a small spoken-digit set made by
# espeak-ng (scripts/spoken-digits.sh small) trains the cnn on log-mel
# spectrograms to well above chance (10%) on voices it never heard; the
# checkpoint keeps the audio settings, so eval gives the same accuracy and
# predict classifies WAV files; bad options and bad clips are clear errors.
#   audio_cli.sh path/to/chutney path/to/scripts
set -u
CHUTNEY=$1
SCRIPTS=$2
PY=/usr/bin/python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-audio.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail, expect_exit

"$CHUTNEY" --version >"$tmp/version"
grep -q '+sndfile' "$tmp/version" && grep -q '+fftw' "$tmp/version" ||
    { echo "skip: built without libsndfile or FFTW"; exit 77; }
command -v espeak-ng >/dev/null 2>&1 || { echo "skip: no espeak-ng"; exit 77; }
[ -x "$PY" ] || { echo "skip: no $PY"; exit 77; }
sh "$SCRIPTS/spoken-digits.sh" "$tmp/digits" small >"$tmp/gen" 2>&1 || { fail "spoken-digits.sh"; cat "$tmp/gen"; }

json_field() { tail -n 1 "$1" | sed -n "s/.*\"$2\":\([-0-9.e+]*\).*/\1/p"; }
above() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 > b + 0) }'; }
meta() { "$PY" -c 'import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
print(json.loads(f.read(n))["__metadata__"].get(sys.argv[2], ""))' "$1" "$2"; }

# 1 s clips, a 23 ms hop and 32 mels: [1, 32, 44] inputs.
"$CHUTNEY" train --model cnn --data "$tmp/digits" --epochs 12 --clip-seconds 1 --hop 512 \
    --n-mels 32 --fmax 8000 --save "$tmp/d.ckpt" --threads 2 --json >"$tmp/train" 2>"$tmp/err" ||
    { fail "train cnn on spoken digits"; cat "$tmp/err"; }
acc=$(json_field "$tmp/train" test_accuracy)
if above "$acc" 0.5; then echo "ok: cnn on spoken digits, unheard voices: test accuracy $acc (chance 0.1)"
else fail "spoken digits: test accuracy '$acc'"; cat "$tmp/err"; fi
for kv in data_kind=audio input_shape=1x32x44 audio_sample_rate=22050 audio_n_fft=512 \
    audio_hop=512 audio_n_mels=32 audio_fmax=8000 audio_clip_seconds=1; do
    v=$(meta "$tmp/d.ckpt" "${kv%%=*}")
    [ "$v" = "${kv#*=}" ] || fail "checkpoint metadata ${kv%%=*} is '$v', expected ${kv#*=}"
done
echo "ok: the checkpoint keeps the audio settings"
"$CHUTNEY" eval --model cnn --load "$tmp/d.ckpt" --json >"$tmp/eval" 2>"$tmp/err" || { fail "eval"; cat "$tmp/err"; }
eacc=$(json_field "$tmp/eval" test_accuracy)
[ "$eacc" = "$acc" ] && echo "ok: eval gives train's accuracy ($eacc)" || fail "eval accuracy $eacc, train's $acc"
"$CHUTNEY" predict --load "$tmp/d.ckpt" --top 1 "$tmp"/digits/test/*/*.wav >"$tmp/pred" 2>"$tmp/err" ||
    { fail "predict"; cat "$tmp/err"; }
right=$(sed -n 's|.*/test/\([0-9]\)/[^:]*: \([0-9]\) .*|\1 \2|p' "$tmp/pred" | awk '$1 == $2' | wc -l)
total=$(wc -l <"$tmp/pred")
# predict reads each clip as eval did: the same count right.
pacc=$(awk -v r="$right" -v t="$total" 'BEGIN { printf "%.4f", r / t }')
awk -v a="$pacc" -v b="$eacc" 'BEGIN { exit !(a - b < 1e-3 && b - a < 1e-3) }' &&
    echo "ok: predict classifies the test clips as eval did ($right of $total)" ||
    { fail "predict: $right of $total right, eval's accuracy $eacc"; cat "$tmp/pred"; }

# ---- bad options and bad clips ----
small="$tmp/small"
mkdir -p "$small/0" "$small/1"
cp "$tmp"/digits/train/0/m1-* "$small/0/" && cp "$tmp"/digits/train/1/m1-* "$small/1/"
run() { "$CHUTNEY" train --model cnn --epochs 1 --threads 2 "$@"; }
expect_exit "--n-mels 0" 2 "bad value '0' for --n-mels" run --data "$small" --n-mels 0
expect_exit "--clip-seconds -1" 2 "bad value '-1' for --clip-seconds" run --data "$small" --clip-seconds -1
expect_exit "--image-size for clips" 2 "not WAV clips" run --data "$small" --image-size 8x8
printf 'a,b\n1,0\n2,1\n' >"$tmp/t.csv"
expect_exit "--n-mels for a table" 2 "are for a folder of WAV clips" run --data "$tmp/t.csv" --target b --n-mels 8
expect_exit "--n-mels for eval" 2 "--n-mels" "$CHUTNEY" eval --model cnn --load "$tmp/d.ckpt" --n-mels 8
expect_exit "--fmin above --fmax" 2 "--fmin 900 is not below --fmax 800" run --data "$small" --fmin 900 --fmax 800
expect_exit "--fmax above Nyquist" 1 "they need fmin < fmax <= 11025" run --data "$small" --fmax 20000
expect_exit "too short a clip" 1 "too short for --n-fft 512" run --data "$small" --clip-seconds 0.01
# A clip at another rate, one that is not a WAV, one cut short.
"$PY" -c 'import struct, sys, wave
w = wave.open(sys.argv[1], "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
w.writeframes(struct.pack("<400h", *([1000, -1000] * 200))); w.close()' "$small/1/z16k.wav"
expect_exit "a clip at 16 kHz" 1 "is at 16000 Hz, the other clips (or the checkpoint's) at 22050" run --data "$small"
rm "$small/1/z16k.wav"
echo "not audio" >"$small/1/z.wav"
expect_exit "a text file named .wav" 1 "z.wav' as a WAV file" run --data "$small"
rm "$small/1/z.wav"
head -c 2000 "$tmp/digits/test/3/m7-s160-p50.wav" >"$tmp/cut.wav"
expect_exit "predict on a truncated clip" 1 "truncated" "$CHUTNEY" predict --load "$tmp/d.ckpt" "$tmp/cut.wav"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "audio_cli: all passed"
