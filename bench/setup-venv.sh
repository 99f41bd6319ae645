#!/bin/sh
# The peers of `make bench` that Debian does not package: PyTorch 2 (eager
# and torch.compile) and ONNX Runtime, from PyPI into a virtual environment
# (default build/bench-venv). `make bench` calls this when the environment
# is missing; `make check` never does.
#
#   sh bench/setup-venv.sh [DIR]
#
# PyPI's torch for Linux is the CUDA build: its libtorch_cuda.so links the
# CUDA runtime, cuBLAS, cuDNN, NCCL and others, so torch cannot even be
# imported on a CPU-only machine without them (`pip install --no-deps torch`
# fails with "libcufile.so.0: cannot open shared object file"), and the
# CPU-only wheels live on a host this machine cannot reach. What is not
# linked is removed after the install: triton (1 GB, GPU kernels only;
# torch.compile on the CPU generates C++) and cuSOLVER (loaded on first use
# of GPU linear algebra). About 4.3 GB is left of 5.6 GB; torch.compile
# needs a C++ compiler and Python's headers (build-essential, python3-dev).
set -e
dir=${1:-build/bench-venv}
py=/usr/bin/python3

if ! $py -c 'import ensurepip' 2>/dev/null; then
    echo "setup-venv: $py has no venv support: apt-get install python3-venv" >&2
    exit 1
fi
if ! $py -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
    echo "setup-venv: torch.compile needs Python's headers: apt-get install python3-dev" >&2
    exit 1
fi
command -v g++ >/dev/null || { echo "setup-venv: torch.compile needs g++: apt-get install build-essential" >&2; exit 1; }

# The stamp says the install finished: `make bench` remakes a venv without it.
rm -rf "$dir"
$py -m venv "$dir"
"$dir/bin/pip" install --quiet --upgrade pip
"$dir/bin/pip" install --quiet torch torchvision onnxruntime numpy
"$dir/bin/pip" uninstall --quiet --yes triton nvidia-cusolver
"$dir/bin/python" -c 'import torch, torchvision, onnxruntime
torch.randn(2) @ torch.randn(2)
print("setup-venv: torch %s, torchvision %s, onnxruntime %s" %
      (torch.__version__, torchvision.__version__, onnxruntime.__version__))'
touch "$dir/ready"
