#!/bin/sh
# `--device` from the outside: a bad or absent device gives a clear message
# and its exit status (2: not a device name, 1: not on this machine); on
# OpenCL, `chutney train` (static and eager) gives the CPU's losses within
# float rounding, and checkpoints move between devices (resume, eval,
# export). Without an OpenCL device the training part prints "skipped: no
# OpenCL device" and the script exits 77 (skipped), never a silent pass.
#   device_cli.sh path/to/chutney
set -u
CHUTNEY=$1
DATA=${CN_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chutney-device-cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh" # fail, expect_error

# expect_status DESCRIPTION STATUS NEEDLE COMMAND...: exactly that exit
# status, and stderr contains NEEDLE and points at `chutney devices`.
expect_status() {
    desc=$1 want=$2 needle=$3
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$desc: exit status $rc, expected $want"; cat "$tmp/err"
    elif ! grep -qF -- "$needle" "$tmp/err" || ! grep -qF "chutney devices" "$tmp/err"; then
        fail "$desc: stderr lacks \"$needle\" or \"chutney devices\":"; cat "$tmp/err"
    else
        echo "ok: $desc: $(head -n 1 "$tmp/err")"
    fi
}

# Checked before any data is read.
expect_status "train --device tpu" 2 "device 'tpu': unknown kind" "$CHUTNEY" train --model mlp --device tpu
expect_status "train --device opencl:7" 1 "no device opencl:7" "$CHUTNEY" train --model mlp --device opencl:7
expect_status "train --device opencl:x" 2 "device 'opencl:x'" "$CHUTNEY" train --model mlp --device opencl:x
expect_status "eval --device tpu" 2 "unknown kind" "$CHUTNEY" eval --model mlp --load x.ckpt --device tpu
if "$CHUTNEY" devices | grep -q '^cuda:0'; then
    echo "ok: eval --device cuda: not checked (this machine has a CUDA device)"
else
    expect_status "eval --device cuda" 1 "no device cuda:0" "$CHUTNEY" eval --model mlp --load x.ckpt --device cuda
fi
expect_status "run --device opencl:7" 1 "no device opencl:7" "$CHUTNEY" run m.onnx --output-dir "$tmp/o" --device opencl:7
expect_status "run --device tpu" 2 "unknown kind" "$CHUTNEY" run m.onnx --output-dir "$tmp/o" --device tpu
expect_error "train --device without a value" "--device needs a value" "$CHUTNEY" train --model mlp --device

finish() {
    if [ "$fails" -ne 0 ]; then
        echo "$fails failure(s)"
        exit 1
    fi
    echo "all passed"
    exit 0
}

if ! "$CHUTNEY" devices | grep -q '^opencl:0 '; then
    echo "skipped: no OpenCL device (\`chutney devices\` lists none): training on a device not tested"
    [ "$fails" -ne 0 ] && finish
    exit 77
fi
[ -f "$DATA/t10k-images-idx3-ubyte.gz" ] || { echo "skipped: no Fashion-MNIST at $DATA"; [ "$fails" -ne 0 ] && finish; exit 77; }
unpack_fashion "$DATA" "$tmp/data" 384 || { echo "FAIL: cannot unpack $DATA"; exit 1; }

field() { grep -o "\"$1\":[^,}]*" "$2" | cut -d: -f2- | tr -d '"'; }
# close A B: |A - B| <= 1e-4 |A| + 1e-6. The devices add f32 sums in another
# order (GEMM tiles, reductions), which moves a loss by ~1e-7 relative per
# step; a few steps of training keep that well under 1e-4, and a wrong
# kernel is off by far more.
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * (a < 0 ? -a : a) + 1e-6) }'; }
finite() { case "$1" in '' | null | *nan* | *inf*) return 1 ;; *) return 0 ;; esac; }

# Each OpenCL process compiles its kernels once (PoCL, ~1 s): four of them.
c="--model mlp --limit 384 --threads 1 --seed 3 --json --data $tmp/data"
"$CHUTNEY" train $c --epochs 1 --save "$tmp/cpu1.ckpt" >"$tmp/cpu1" 2>"$tmp/err" || { fail "cpu, 1 epoch"; cat "$tmp/err"; }
"$CHUTNEY" train $c --epochs 2 >"$tmp/cpu2" 2>"$tmp/err" || { fail "cpu, 2 epochs"; cat "$tmp/err"; }
"$CHUTNEY" train $c --epochs 1 --device opencl --save "$tmp/cl1.ckpt" >"$tmp/cl1" 2>"$tmp/err" || { fail "opencl, static"; cat "$tmp/err"; }

# Static mode (the default) on opencl: a finite loss, the accuracy line, the device in both.
l_cpu1=$(field final_loss "$tmp/cpu1")
l_cl1=$(field final_loss "$tmp/cl1")
if finite "$l_cl1" && grep -q '^test accuracy: [0-9.]*% on opencl:0$' "$tmp/cl1" &&
    [ "$(field device "$tmp/cl1")" = "opencl:0" ]; then
    echo "ok: opencl, static: loss $l_cl1, $(grep '^test accuracy' "$tmp/cl1")"
else
    fail "opencl, static: loss '$l_cl1', output:"; cat "$tmp/cl1"
fi
if finite "$l_cpu1" && finite "$l_cl1" && close "$l_cpu1" "$l_cl1"; then
    echo "ok: opencl loss $l_cl1, cpu $l_cpu1 (same seed)"
else
    fail "opencl loss '$l_cl1', cpu '$l_cpu1'"
fi

# Eager mode on opencl, resuming the CPU's checkpoint: the CPU's 2-epoch loss.
"$CHUTNEY" train $c --epochs 2 --mode eager --device opencl --resume "$tmp/cpu1.ckpt" >"$tmp/cl2" 2>"$tmp/err" ||
    { fail "opencl, eager, --resume of a cpu checkpoint"; cat "$tmp/err"; }
l_cpu2=$(field final_loss "$tmp/cpu2")
l_cl2=$(field final_loss "$tmp/cl2")
if finite "$l_cl2" && close "$l_cpu2" "$l_cl2" && [ "$(field mode "$tmp/cl2")" = "eager" ]; then
    echo "ok: opencl eager, resumed from cpu: loss $l_cl2, cpu $l_cpu2"
else
    fail "opencl eager resumed from cpu: loss '$l_cl2', cpu '$l_cpu2'"
fi

# The opencl checkpoint on the CPU: resume gives the CPU's loss, eval the
# accuracy training on opencl reported (at most one image apart: a
# prediction may flip where two logits tie within rounding).
"$CHUTNEY" train $c --epochs 2 --resume "$tmp/cl1.ckpt" >"$tmp/res" 2>"$tmp/err" || { fail "cpu --resume of an opencl checkpoint"; cat "$tmp/err"; }
l_res=$(field final_loss "$tmp/res")
if finite "$l_res" && close "$l_cpu2" "$l_res"; then
    echo "ok: cpu, resumed from opencl: loss $l_res, cpu $l_cpu2"
else
    fail "cpu resumed from opencl: loss '$l_res', cpu '$l_cpu2'"
fi
"$CHUTNEY" eval --model mlp --load "$tmp/cl1.ckpt" --limit 384 --data "$tmp/data" --json >"$tmp/ev" 2>"$tmp/err" ||
    { fail "eval of an opencl checkpoint"; cat "$tmp/err"; }
a_cl=$(field test_accuracy "$tmp/cl1")
a_ev=$(field test_accuracy "$tmp/ev")
if [ -n "$a_ev" ] && [ -n "$a_cl" ] && awk -v a="$a_cl" -v b="$a_ev" 'BEGIN { d = a - b; exit !(d * d <= (1.0 / 384) ^ 2) }'; then
    echo "ok: eval on cpu of the opencl checkpoint: $a_ev (opencl: $a_cl)"
else
    fail "eval on cpu of the opencl checkpoint: '$a_ev', opencl training reported '$a_cl'"
fi
"$CHUTNEY" eval --model mlp --load "$tmp/cpu1.ckpt" --limit 384 --data "$tmp/data" --json --device opencl >"$tmp/ev2" 2>"$tmp/err" ||
    { fail "eval --device opencl of a cpu checkpoint"; cat "$tmp/err"; }
a_cpu=$(field test_accuracy "$tmp/cpu1")
a_ev2=$(field test_accuracy "$tmp/ev2")
if [ -n "$a_ev2" ] && awk -v a="$a_cpu" -v b="$a_ev2" 'BEGIN { d = a - b; exit !(d * d <= (1.0 / 384) ^ 2) }'; then
    echo "ok: eval on opencl of the cpu checkpoint: $a_ev2 (cpu: $a_cpu)"
else
    fail "eval on opencl of the cpu checkpoint: '$a_ev2', cpu training reported '$a_cpu'"
fi
if "$CHUTNEY" export --model mlp --load "$tmp/cl1.ckpt" --output "$tmp/m.onnx" >"$tmp/out" 2>&1; then
    echo "ok: export of the opencl checkpoint"
elif grep -q "built without ONNX" "$tmp/out"; then
    echo "ok: export not tested (built without ONNX support)"
else
    fail "export of the opencl checkpoint:"; cat "$tmp/out"
fi
finish
