#!/bin/sh
# A plain-text corpus for the tokenizer and small language models, from two
# Debian packages (neither is needed by the build or the tests):
#   fortunes   /usr/share/games/fortunes/*: '%'-separated quotations
#              (about 2.5 MB of text)
#   bible-kjv  the `bible` program: the King James Bible, one verse a line
#              (about 4.2 MB once the verse references are cut off)
# Install them with: apt-get install -y fortunes bible-kjv
#
# Usage: scripts/text-corpus.sh [-e] [fortunes] [bible] > corpus.txt
#   (no source named: both, fortunes first)
#   -e   separate documents (each fortune, each book of the Bible, the two
#        sources) with the end-of-text token <|endoftext|> on a line of its
#        own, for cn_tokenizer_encode with CN_TOKENIZE_SPECIAL; without it,
#        fortunes are separated by a blank line and books by nothing.
# The '%' lines and the verse references ("Ge1:1") are dropped; the text is
# otherwise byte for byte what the packages hold.
set -eu

eot=0
if [ "${1:-}" = "-e" ]; then
    eot=1
    shift
fi
[ $# -gt 0 ] || set -- fortunes bible

fortunes() {
    dir=/usr/share/games/fortunes
    if [ ! -d "$dir" ]; then
        echo "text-corpus.sh: $dir is missing: apt-get install -y fortunes" >&2
        exit 1
    fi
    # Every fortune file has a .dat index next to it; the .u8 names are links.
    for dat in "$dir"/*.dat; do
        f=${dat%.dat}
        [ -f "$f" ] || continue
        # A document ends at a '%' line; separators are written between
        # documents only, so none is left dangling at the end of a file.
        awk -v eot="$eot" -v first="$first" '
            $0 == "%" { if (n) pending = 1; next }
            {
                if (pending || (first == 0 && n == 0)) print (eot ? "<|endoftext|>" : "")
                pending = 0
                n++
                print
            }' "$f"
        first=0
    done
}

bible_text() {
    if ! command -v bible >/dev/null 2>&1; then
        echo "text-corpus.sh: the bible program is missing: apt-get install -y bible-kjv" >&2
        exit 1
    fi
    # -f turns pretty-printing off: one verse a line, "Ge1:1 In the ...".
    bible -f gen1:1-rev22:21 | awk -v eot="$eot" -v first="$first" '
        {
            ref = $1
            book = ref
            sub(/[0-9]+:[0-9]+$/, "", book)
            if (book != prev && !(first && NR == 1) && eot) print "<|endoftext|>"
            prev = book
            sub(/^[^ ]+ /, "")
            print
        }'
    first=0
}

first=1
for src in "$@"; do
    case $src in
    fortunes) fortunes ;;
    bible) bible_text ;;
    *)
        echo "text-corpus.sh: unknown source '$src' (give fortunes and/or bible)" >&2
        exit 2
        ;;
    esac
done
