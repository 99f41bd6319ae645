# The two commands of the README, and a few shortcuts around CMake.
#
#   make          build Release into build/ (library, `chutney`, tests, examples)
#   make check    set up, then every test: Release, ASan+UBSan, TSan, OpenCL, no-BLAS, install
#                 (scripts/check.sh; `make check STAGES="release asan"` runs some)
#   make demo     set up, then the main job (training Fashion-MNIST)
#   make bench    set up, build, then Chutney against PyTorch 1.13, PyTorch 2
#                 (eager, torch.compile) and ONNX Runtime on the benchmark
#                 workloads and real models (bench/run.py; QUICK=1: a subset;
#                 WORKLOADS="mlp resnet50", REPEATS=N, THREADS="1 2",
#                 INFER_BATCH="1 16", PEERS="torch2 compile ort" or none,
#                 PRECISION=bf16 or f32,bf16 (the training and inference
#                 rows under autocast, or both) pick
#                 parts). The first run makes build/bench-venv (bench/setup-venv.sh,
#                 PyTorch 2 and ONNX Runtime from PyPI, ~4 GB)
#   make fuzz     build the libFuzzer targets (the ONNX loader and every file
#                 reader) with clang, ASan and UBSan into build-fuzz/ and run
#                 each: ONNX FUZZ_SECONDS (default 60), each reader
#                 FUZZ_READER_SECONDS (default FUZZ_SECONDS); FUZZ_TARGETS
#                 picks some (e.g. "npy csv")
#   make install  install build/ into PREFIX (default /usr/local)
#   make clean    remove the build directories this Makefile makes

JOBS ?= 2
PREFIX ?= /usr/local
STAGES ?=
QUICK ?=
WORKLOADS ?=
REPEATS ?=
THREADS ?=
INFER_BATCH ?=
PEERS ?=
FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= build-fuzz
FUZZ_READER_SECONDS ?= $(FUZZ_SECONDS)
FUZZ_TARGETS ?=
CMAKE_ARGS = -DCMAKE_BUILD_TYPE=Release -DCHUTNEY_SANITIZE=OFF -DCHUTNEY_WITH_BLAS=ON

.PHONY: all build setup check demo bench fuzz install clean

all: build

build:
	cmake -S . -B build $(CMAKE_ARGS)
	cmake --build build -j$(JOBS)

setup:
	sh scripts/setup.sh

check: setup
	JOBS=$(JOBS) bash scripts/check.sh $(STAGES)

# The main job: the CNN benchmark workload for 2 epochs; prints test accuracy.
demo: setup build
	./build/chutney train --model cnn --epochs 2

# Not part of check: timings are not tests. Writes bench/results/latest.json.
bench: setup build
	$(if $(filter none,$(PEERS)),,test -f build/bench-venv/ready || sh bench/setup-venv.sh build/bench-venv \
	    || echo "bench: no PyTorch 2 or ONNX Runtime (bench/setup-venv.sh failed)")
	/usr/bin/python3 bench/run.py --build build $(if $(QUICK),--quick) \
	    $(if $(WORKLOADS),--workloads "$(WORKLOADS)") $(if $(REPEATS),--repeats $(REPEATS)) \
	    $(if $(THREADS),--threads "$(THREADS)") $(if $(INFER_BATCH),--infer-batches "$(INFER_BATCH)") \
	    $(if $(PEERS),--peers "$(PEERS)") $(if $(PRECISION),--precision $(PRECISION))

# Hostile input: fuzz/fuzz_onnx_load.c, fuzz/fuzz_reader.c and fuzz/fuzz_tool_text.c (seeds, figures and
# how to replay a crash: docs/architecture.md, "Fuzzing"; docs/onnx.md).
fuzz:
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
	    -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DCHUTNEY_SANITIZE=ON -DCHUTNEY_FUZZ=ON -DCHUTNEY_WITH_DNNL=OFF \
	    -DCHUTNEY_WITH_OPENCL=OFF -DCHUTNEY_WITH_CUDA=OFF -DCHUTNEY_WITH_MPI=OFF \
	    -DCHUTNEY_BUILD_TESTS=OFF -DCHUTNEY_BUILD_BENCH=OFF -DCHUTNEY_BUILD_EXAMPLES=OFF
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz_onnx_load fuzz_npy fuzz_safetensors \
	    fuzz_json fuzz_idx fuzz_csv fuzz_image fuzz_bpe fuzz_wav fuzz_model_text fuzz_config
	sh fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_READER_SECONDS) $(FUZZ_TARGETS)

install: build
	cmake --install build --prefix $(PREFIX)

clean:
	rm -rf build build-asan build-bare build-fuzz
