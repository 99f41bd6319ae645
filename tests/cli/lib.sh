# Shared by the CLI test scripts (sourced after they set $tmp): counting
# failures, and checking a command fails cleanly.
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error DESCRIPTION NEEDLE COMMAND...: exit status 1 or 2 (not a
# signal), and stderr contains NEEDLE (a fixed string).
expect_error() {
    desc=$1 needle=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 0 ]; then
        fail "$desc: exited 0"
    elif [ "$rc" -gt 2 ]; then
        fail "$desc: exit status $rc (a crash?)"; cat "$tmp/err"
    elif ! grep -qF -- "$needle" "$tmp/err"; then
        fail "$desc: stderr lacks \"$needle\":"; cat "$tmp/err"
    else
        echo "ok: $desc: $(head -n 1 "$tmp/err")"
    fi
}

# expect_exit DESCRIPTION STATUS NEEDLE COMMAND...: exactly that exit status
# (2: a bad command line, 1: a failure), and stderr contains NEEDLE.
expect_exit() {
    desc=$1 want=$2 needle=$3
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$desc: exit status $rc, expected $want"; cat "$tmp/err"
    elif ! grep -qF -- "$needle" "$tmp/err"; then
        fail "$desc: stderr lacks \"$needle\":"; cat "$tmp/err"
    else
        echo "ok: $desc: $(head -n 1 "$tmp/err")"
    fi
}

# unpack_fashion SRC DIR [N]: Fashion-MNIST's four files from SRC (gzipped, as
# scripts/fashion-mnist.sh leaves them) uncompressed into DIR, so that a
# build without zlib runs the test too. With N, only the first N training
# and N test images (IDX files of that count): a test whose every run gives
# --limit N or less sees the same images, and each run reads N images, not
# 70000 (a tenth of a second a run, more under the sanitizers).
unpack_fashion() {
    mkdir -p "$2" || return 1
    if [ $# -ge 3 ]; then
        /usr/bin/python3 - "$@" <<'PY'
import gzip, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for split in ("train", "t10k"):
    for name, head, size in (("images-idx3", 16, 784), ("labels-idx1", 8, 1)):
        f = "%s-%s-ubyte" % (split, name)
        with gzip.open("%s/%s.gz" % (src, f)) as z:
            h = z.read(head)
            body = z.read(n * size)
        # the count, the header's second big-endian word, is what was read
        open("%s/%s" % (dst, f), "wb").write(h[:4] + struct.pack(">I", len(body) // size) + h[8:] + body)
PY
        return
    fi
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
        gzip -dc "$1/$f.gz" >"$2/$f" || return 1
    done
}

# random_idx DIR SEED NTRAIN NTEST: a made-up IDX set of 28 x 28 images
# and labels 0..9 (random bytes from Python's generator with SEED, each
# split's labels drawn before its images), for tests where what is learned
# does not matter.
random_idx() {
    mkdir -p "$1" && /usr/bin/python3 - "$@" <<'PY'
import random, struct, sys
d, seed, ntrain, ntest = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
r = random.Random(seed)
def idx(name, dims, data):
    with open(d + "/" + name, "wb") as f:
        f.write(bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", n) for n in dims) + data)
for split, n in (("train", ntrain), ("t10k", ntest)):
    labels = bytes(r.randrange(10) for _ in range(n))
    idx(split + "-labels-idx1-ubyte", (n,), labels)
    idx(split + "-images-idx3-ubyte", (n, 28, 28), r.randbytes(n * 784))
PY
}

# cat_text FILE LINES: a small made-up English text of LINES lines (a few
# words, repeated with numbers that cycle), for the GPT's tests, where what
# is learned does not matter.
cat_text() {
    i=0
    while [ $i -lt "$2" ]; do
        echo "the cat $((i % 5)) sat on the mat, and the dog $((i % 3)) ran to the door."
        i=$((i + 1))
    done >"$1"
}
