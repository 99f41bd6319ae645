#!/bin/sh
# Checks the Debian packages Chutney needs. As root, installs what is missing
# (apt-get update first, only then); otherwise prints what is missing and the
# command to run, and fails if a required package is missing. Quick and
# silent-ish when everything is there, so `make check` and `make demo` can
# call it every time.

# The build, the tests (numpy and torch are reference implementations) and the
# Fashion-MNIST demo.
required="build-essential cmake pkg-config libopenblas-dev zlib1g-dev libstb-dev
python3-numpy python3-torch dataset-fashion-mnist"
# For work that is coming (ONNX import/export, oneDNN kernels, graph drawings,
# a second compiler; torchvision's models for the ONNX real-model test, clang
# for `make fuzz`; OpenMPI for distributed training and iproute2 for its
# two-host test; Python's headers, venv and pytest for the binding; cairo for
# `chutney plot`; libsndfile and FFTW for audio, espeak-ng for the spoken-digit
# data set). Installed when possible; the build works without them.
optional="libprotobuf-c-dev protobuf-c-compiler libonnx-dev python3-onnx libonnx-testdata python3-torchvision
libcairo2-dev libsndfile1-dev libfftw3-dev espeak-ng
libdnnl-dev graphviz clang ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd libclblast-dev clinfo
libopenmpi-dev openmpi-bin iproute2 python3-dev python3-venv python3-pytest python3-setuptools python3-wheel"

if ! command -v dpkg-query >/dev/null 2>&1; then
    # shellcheck disable=SC2086 # one package per word
    echo "setup: no dpkg-query, so not checked; Chutney needs the equivalents of" \
        "these Debian packages:" $required
    exit 0
fi

# The packages among "$@" that are not installed, on one line.
missing() {
    installed=$(dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null |
        awk '$NF == "installed" { print $1 }')
    out=""
    for p in "$@"; do
        printf '%s\n' "$installed" | grep -qx "$p" || out="$out${out:+ }$p"
    done
    printf '%s' "$out"
}

# shellcheck disable=SC2086 # one package per word
miss_req=$(missing $required)
# shellcheck disable=SC2086
miss_opt=$(missing $optional)

if [ -z "$miss_req$miss_opt" ]; then
    echo "setup: all required and optional packages are installed"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    if [ -n "$miss_req" ]; then
        echo "setup: missing required packages: $miss_req"
    fi
    if [ -n "$miss_opt" ]; then
        echo "setup: missing optional packages (for coming features): $miss_opt"
    fi
    echo "setup: install them with:"
    echo "  sudo apt-get update && sudo apt-get install -y $miss_req${miss_req:+ }$miss_opt"
    [ -z "$miss_req" ]
    exit $?
fi

export DEBIAN_FRONTEND=noninteractive
apt_install() { apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=600 "$@"; }

echo "setup: installing $miss_req${miss_req:+ }$miss_opt"
if ! apt-get update -o DPkg::Lock::Timeout=600; then
    [ -n "$miss_req" ] && { echo "setup: apt-get update failed" >&2; exit 1; }
    echo "setup: apt-get update failed; skipping the optional packages" >&2
    exit 0
fi
if [ -n "$miss_req" ]; then
    # shellcheck disable=SC2086
    apt_install $miss_req || { echo "setup: could not install $miss_req" >&2; exit 1; }
fi
if [ -n "$miss_opt" ]; then
    # One by one if the batch fails, so one unavailable package does not
    # keep out the others.
    # shellcheck disable=SC2086
    apt_install $miss_opt || for p in $miss_opt; do
        apt_install "$p" || echo "setup: optional package $p could not be installed" >&2
    done
fi
exit 0
