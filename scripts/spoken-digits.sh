#!/bin/sh
# A spoken-digit data set made with espeak-ng (Debian's espeak-ng; neither the
# build nor the tests need it: the test that uses it skips without it):
# DIR/train/0 ... DIR/train/9 and DIR/test/0 ... DIR/test/9 of WAV clips
# (22050 Hz, 16-bit mono, as espeak-ng writes them), one word each ("zero"
# ... "nine"), for `chutney train --model cnn --data DIR`.
#
# Usage: scripts/spoken-digits.sh DIR [full|small]
#
# The test split is spoken by voices the training split never hears, at a
# speed between the training ones (in the full set, pitches between too):
#   full   train: en+m1..m5, en+f1..f3 at 140 and 175 words/min, pitch 35
#          and 65 (32 clips a digit, 320 in all); test: en+m6, en+m7, en+f4
#          at 160 words/min, pitch 45 and 55 (6 a digit, 60 in all)
#   small  (the tests' set) train: en+m1, en+m3, en+m5, en+f1, en+f3 at
#          140 and 175, pitch 50 (10 a digit, 100 in all); test: en+m7,
#          en+f4 at 160, pitch 50 (2 a digit, 20 in all)
# espeak-ng runs once a clip, four per CPU at once: each run mostly waits
# (loading its voice), so more overlap than CPUs shortens the whole.
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: scripts/spoken-digits.sh DIR [full|small]" >&2
    exit 2
fi
dir=$1
size=${2:-full}
case $dir in
*[[:space:]\'\"\\]*)
    # The clips' paths go through xargs, which splits and unquotes them.
    echo "spoken-digits.sh: DIR '$dir' has a space, quote or backslash; choose another" >&2
    exit 2
    ;;
esac
case $size in
full)
    train_voices="m1 m2 m3 m4 m5 f1 f2 f3" train_speeds="140 175" train_pitches="35 65"
    test_voices="m6 m7 f4" test_speeds="160" test_pitches="45 55"
    ;;
small)
    train_voices="m1 m3 m5 f1 f3" train_speeds="140 175" train_pitches="50"
    test_voices="m7 f4" test_speeds="160" test_pitches="50"
    ;;
*)
    echo "spoken-digits.sh: unknown size '$size' (full or small)" >&2
    exit 2
    ;;
esac
if ! command -v espeak-ng >/dev/null 2>&1; then
    echo "spoken-digits.sh: espeak-ng is missing: apt-get install -y espeak-ng" >&2
    exit 1
fi

# One line per clip: voice, speed, pitch, word, file; then run in parallel.
jobs() { # split voices speeds pitches
    d=0
    for word in zero one two three four five six seven eight nine; do
        mkdir -p "$dir/$1/$d"
        for v in $2; do
            for s in $3; do
                for p in $4; do
                    echo "en+$v $s $p $word $dir/$1/$d/$v-s$s-p$p.wav"
                done
            done
        done
        d=$((d + 1))
    done
}
n=$(($(nproc 2>/dev/null || echo 2) * 4))
# shellcheck disable=SC2016 # the inner sh expands them
{
    jobs train "$train_voices" "$train_speeds" "$train_pitches"
    jobs test "$test_voices" "$test_speeds" "$test_pitches"
} | xargs -P "$n" -L 1 sh -c 'espeak-ng -v "$0" -s "$1" -p "$2" -w "$4" "$3"'
echo "spoken-digits.sh: $(find "$dir/train" -name '*.wav' | wc -l) training and" \
    "$(find "$dir/test" -name '*.wav' | wc -l) test clips in $dir"
