# The two commands of the README, and a few shortcuts around CMake.
#
#   make          build Release into build/ (library, `chutney`, tests, examples)
#   make check    set up, then every test: Release, ASan+UBSan, no-BLAS, install
#                 (scripts/check.sh; `make check STAGES="release asan"` runs some)
#   make demo     set up, then the main job (training Fashion-MNIST)
#   make install  install build/ into PREFIX (default /usr/local)
#   make clean    remove the build directories this Makefile makes

JOBS ?= 2
PREFIX ?= /usr/local
STAGES ?=
CMAKE_ARGS = -DCMAKE_BUILD_TYPE=Release -DCHUTNEY_SANITIZE=OFF -DCHUTNEY_WITH_BLAS=ON

.PHONY: all build setup check demo install clean

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

install: build
	cmake --install build --prefix $(PREFIX)

clean:
	rm -rf build build-asan build-bare
