#!/usr/bin/env bash
# `make check`: builds and tests every configuration that matters, goes on
# past a failure so one run shows them all, then prints how many tests ran
# and passed. Exits non-zero if anything failed.
#
#   release  build/       Release with OpenBLAS: the CTest suite (test_backends on
#            the CPU: its OpenCL run is the opencl stage's)
#   asan     build-asan/  AddressSanitizer + UBSan (leaks detected): the suite
#            but the benchmarks, test_backends' OpenCL run and five runs
#            that repeat covered code on more data (listed at the stage)
#   opencl   build/ again: the conformance suite of every op against the CPU
#            (test_backends) on the OpenCL platform setup installs (PoCL),
#            listed first; "skipped: no OpenCL platform" where there is none.
#            The other device tests (placement, the OpenCL kernels, the
#            CLI's --device, onnx_cli) ran in the release stage on the same
#            build and platform, and are not run again
#   cuda     build/ again (with the CUDA toolkit): every kernel source the
#            OpenCL conformance run generated compiled for CUDA by NVRTC (no
#            GPU needed), and the conformance suite on every CUDA device,
#            which reports "skipped: no CUDA device" where there is none;
#            "skipped: no CUDA toolkit" where the build has no CUDA backend
#   tsan     build-tsan/  ThreadSanitizer (gcc, -O1 -g): only the library and the
#            tests of code that runs on several threads (the thread pool,
#            static programs at 3 threads, the data loader's workers,
#            cn_onnx_run from several threads at once); stops at the first
#            race (halt_on_error), tests/tsan.supp for third-party code only
#   bare     build-bare/  no optional dependency (no BLAS, oneDNN, zlib, stb, libsndfile, FFTW, ONNX, OpenCL, CUDA, MPI): the suite (without the examples, which release runs)
#   python   build/ again: the Python binding (python/run_tests.sh: pip
#            install ./python into build/python-venv against build/'s
#            library, then pytest tests/python, PyTorch parity included);
#            "skipped: no python3 with venv" where it cannot run
#   install  build/ installed into a temporary prefix, used from outside
#   fuzz     build-fuzz/ (clang, ASan + UBSan): the libFuzzer targets, about
#            40 s in all: the ONNX loader 8 s, each of the 10 other targets
#            (8 file readers, model files, --config files) 3 s (`make fuzz`;
#            FUZZ_SECONDS / FUZZ_READER_SECONDS change them;
#            skipped without clang's libFuzzer)
#
# Usage: scripts/check.sh [STAGE...]    (default: all of them, in that order)
set -u
cd "$(dirname "$0")/.." || exit 1
jobs=${JOBS:-2}
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(release asan tsan opencl cuda python bare install fuzz)

total_run=0
total_passed=0
summary=()
log=$(mktemp "${TMPDIR:-/tmp}/chutney-check.XXXXXX") || exit 1
backends_log=""
trap 'rm -f "$log" ${backends_log:+"$backends_log"}' EXIT

note() { printf '\n==== %s\n' "$*"; }

# record STAGE RUN PASSED [NOTE]
record() {
    total_run=$((total_run + $2))
    total_passed=$((total_passed + $3))
    summary+=("$(printf '%-8s %4d run, %4d passed %s' "$1" "$2" "$3" "${4:-}")")
}

# build DIR CMAKE_ARGS...: configure and build; a failure counts as one
# failed test of the stage.
build() {
    local dir=$1
    shift
    build_targets "$dir" -- "$@"
}

# build_targets DIR [TARGET...] -- CMAKE_ARGS...: the same, only those targets.
build_targets() {
    local dir=$1 targets=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do targets+=(--target "$1"); shift; done
    shift
    cmake -S . -B "$dir" "$@" && cmake --build "$dir" -j"$jobs" "${targets[@]}"
}

# suite STAGE DIR CMAKE_ARGS...: build, then run the CTest suite (with the
# CTest arguments in the array ctest_args, if any).
ctest_args=()
suite() {
    local stage=$1 dir=$2
    shift 2
    note "$stage: $dir"
    if ! build "$dir" "$@"; then
        record "$stage" 1 0 "(the build failed)"
        return
    fi
    run_ctest "$stage" "$dir" -j"$jobs" "${ctest_args[@]}"
}

# run_ctest STAGE DIR CTEST_ARGS...: run CTest and record its summary.
run_ctest() {
    local stage=$1 dir=$2
    shift 2
    ctest --test-dir "$dir" "$@" --output-on-failure 2>&1 | tee "$log"
    # CTest's summary: "NN% tests passed, F tests failed out of N".
    local line n f
    line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        record "$stage" 1 0 "(CTest ran no tests)"
        return
    fi
    n=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
    f=$(sed -E 's/.*, ([0-9]+) tests? failed.*/\1/' <<<"$line")
    record "$stage" "$n" $((n - f))
}

# build/ is also what `make` builds, with the same options.
release_args=(-DCMAKE_BUILD_TYPE=Release -DCHUTNEY_SANITIZE=OFF -DCHUTNEY_WITH_BLAS=ON)
start=$SECONDS
for stage in "${stages[@]}"; do
    case $stage in
    release)
        # The op-by-op conformance on OpenCL devices is the opencl stage's
        # (the same binary): here test_backends checks the CPU and the op table.
        CN_TEST_DEVICE_KINDS=cpu suite release build "${release_args[@]}"
        ;;
    asan)
        # -O1, the sanitizers' usual level: a third of the time of -O3 here.
        # -g gives file:line in reports.
        # Open MPI unloads its plugins at exit, which leaves their leaks
        # without a module name to suppress by: keep them loaded.
        # Left out here, to keep make check within its time: the benchmarks;
        # the CUDA backend (no test runs its host code without a GPU);
        # the op-by-op conformance on OpenCL (an interpreter's kernels,
        # four times slower under ASan; the OpenCL backend's host code still
        # runs here through test_placement, test_opencl_kernels, device_cli);
        # and the runs that only repeat, on more data, code the other tests
        # cover under ASan: the example training runs, the real ONNX
        # models (onnx_conformance covers every op), the two-host MPI run.
        # The command-line tests and the training examples take BLAS's
        # products here (CN_GEMM=blas, set by tests/CMakeLists.txt): the
        # built-in GEMM's instrumented kernels were most of this stage's
        # time; test_matmul_builtin and the C tests keep them.
        ctest_args=(-E '^(example_train_cnn|example_train_lstm|example_pipeline_cnn|example_pipeline_cnn_static|onnx_real_models|dist_netns)$')
        OMPI_MCA_mca_base_component_disable_dlclose=1 CN_TEST_DEVICE_KINDS=cpu \
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            suite asan build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" \
            -DCHUTNEY_SANITIZE=ON -DCHUTNEY_WITH_BLAS=ON -DCHUTNEY_BUILD_BENCH=OFF -DCHUTNEY_WITH_CUDA=OFF
        ctest_args=()
        ;;
    tsan)
        # Only what runs on several threads, and none of the optional
        # libraries that bring threads of their own (oneDNN's OpenMP, the
        # device runtimes, MPI): their synchronisation is invisible to
        # ThreadSanitizer, which would report it as races. OpenBLAS stays
        # (matrix products run inside the pool's chunks) with
        # OPENBLAS_NUM_THREADS=1: otherwise it starts its own threads when
        # loaded, before Chutney can make it single-threaded, and hands them
        # work through spinning on plain memory, which TSan cannot see.
        note "tsan: build-tsan/, the threaded tests under ThreadSanitizer"
        tsan_tests=(test_threads test_threads_sched test_static test_loader test_onnx_threads)
        if ! build_targets build-tsan "${tsan_tests[@]}" -- -DCMAKE_BUILD_TYPE=Debug \
            -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DCMAKE_C_FLAGS=-fsanitize=thread \
            -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
            -DCHUTNEY_SANITIZE=OFF -DCHUTNEY_WITH_BLAS=ON -DCHUTNEY_WITH_DNNL=OFF \
            -DCHUTNEY_WITH_OPENCL=OFF -DCHUTNEY_WITH_CUDA=OFF -DCHUTNEY_WITH_MPI=OFF \
            -DCHUTNEY_BUILD_BENCH=OFF -DCHUTNEY_BUILD_EXAMPLES=OFF; then
            record tsan 1 0 "(the build failed)"
            continue
        fi
        # 3 threads: the pool has workers even on a machine of 1 or 2 cores.
        OPENBLAS_NUM_THREADS=1 CN_NUM_THREADS=3 \
        TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
            run_ctest tsan build-tsan -j"$jobs" -R "^($(IFS='|'; echo "${tsan_tests[*]}"))\$"
        ;;
    bare)
        suite bare build-bare -DCMAKE_BUILD_TYPE=Release -DCHUTNEY_SANITIZE=OFF \
            -DCHUTNEY_WITH_BLAS=OFF -DCHUTNEY_WITH_ZLIB=OFF -DCHUTNEY_WITH_STB=OFF -DCHUTNEY_WITH_DNNL=OFF \
            -DCHUTNEY_WITH_OPENCL=OFF -DCHUTNEY_WITH_CUDA=OFF -DCHUTNEY_WITH_MPI=OFF \
            -DCHUTNEY_WITH_ONNX=OFF -DCHUTNEY_WITH_TENSORBOARD=OFF -DCHUTNEY_WITH_CAIRO=OFF \
            -DCHUTNEY_WITH_SNDFILE=OFF -DCHUTNEY_WITH_FFTW=OFF -DCHUTNEY_BUILD_BENCH=OFF \
            -DCHUTNEY_BUILD_EXAMPLES=OFF
        ;;
    opencl)
        note "opencl: the device tests on build/"
        if ! build build "${release_args[@]}"; then
            record opencl 1 0 "(the build failed)"
            continue
        fi
        if ! ./build/chutney devices | grep -q '^opencl:'; then
            ./build/chutney devices
            record opencl 0 0 "(skipped: no OpenCL platform)"
            continue
        fi
        ./build/chutney devices
        if ./build/chutney devices | grep -q '+cuda'; then
            # One run of the conformance suite for this stage and the cuda
            # stage: on OpenCL, then every kernel source it generated through
            # NVRTC (the cuda stage reads its log instead of running it again).
            backends_log=$(mktemp "${TMPDIR:-/tmp}/chutney-backends.XXXXXX")
            ./build/tests/test_backends --compile-cuda >"$backends_log" 2>&1
            grep -v ' ok$' "$backends_log"
            ok=0
            grep -qE '^[0-9]+ tests, [0-9]+ checks, 0 failures' "$backends_log" && ok=1
            record opencl 1 $ok
        else
            run_ctest opencl build -R '^test_backends$'
        fi
        ;;
    cuda)
        note "cuda: the CUDA backend on build/"
        if ! build build "${release_args[@]}"; then
            record cuda 1 0 "(the build failed)"
            continue
        fi
        if ! ./build/chutney devices | grep -q '+cuda'; then
            record cuda 0 0 "(skipped: no CUDA toolkit)"
            continue
        fi
        ./build/chutney devices
        # One test: the suite on every device with NVRTC compiling every
        # kernel source it generated; a failure names the source and the log.
        # The opencl stage of this run may have run it already.
        if [ -n "${backends_log:-}" ] && [ -s "$backends_log" ]; then
            echo "(the opencl stage's run of test_backends --compile-cuda)"
            cp "$backends_log" "$log"
            grep -E '^(NVRTC|skipped)' "$log"
        elif ./build/tests/test_backends --compile-cuda 2>&1 | tee "$log" | grep -v ' ok$'; then :; fi
        if grep -qE '^[0-9]+ tests, [0-9]+ checks, 0 failures' "$log"; then
            record cuda 1 1 "($(grep -E '^(NVRTC|skipped: no CUDA)' "$log" | tr '\n' ' '))"
        else
            record cuda 1 0
        fi
        ;;
    python)
        note "python: the binding against build/"
        if ! build build "${release_args[@]}"; then
            record python 1 0 "(the build failed)"
            continue
        fi
        if ! command -v python3 >/dev/null 2>&1; then
            record python 0 0 "(skipped: no python3)"
            continue
        fi
        CHUTNEY_BUILD_DIR=build sh python/run_tests.sh 2>&1 | tee "$log"
        # pytest's summary: "N passed, M skipped in T s" or "F failed, N passed ...".
        line=$(grep -E '[0-9]+ (passed|failed|errors?|skipped).* in [0-9.]+s' "$log" | tail -n 1)
        if [ -z "$line" ]; then
            record python 1 0 "(no pytest summary: the set-up failed)"
        else
            p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+')
            f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+')
            e=$(grep -oE '[0-9]+ errors?' <<<"$line" | grep -oE '[0-9]+')
            p=${p:-0} f=${f:-0} e=${e:-0}
            record python $((p + f + e)) "$p"
        fi
        ;;
    install)
        note "install: build/ used from outside the tree"
        if ! build build "${release_args[@]}"; then
            record install 1 0 "(the build failed)"
            continue
        fi
        bash tests/install/run.sh build 2>&1 | tee "$log"
        line=$(grep -E '^install test: [0-9]+ run, [0-9]+ passed' "$log" | tail -n 1)
        if [ -z "$line" ]; then
            record install 1 0 "(no result line)"
        else
            read -r _ _ n _ p _ <<<"$line"
            record install "$n" "$p"
        fi
        ;;
    fuzz)
        # Not a CTest test: the library must be compiled by clang for
        # libFuzzer, so it is a build of its own. A crash fails the stage.
        note "fuzz: build-fuzz/, the ONNX loader for ${FUZZ_SECONDS:-8} s, each other target ${FUZZ_READER_SECONDS:-3} s"
        if ! printf 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }\n' |
            clang -fsanitize=fuzzer,address -x c - -o /dev/null 2>/dev/null; then
            record fuzz 0 0 "(skipped: no clang with libFuzzer)"
        elif make fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-8}" FUZZ_READER_SECONDS="${FUZZ_READER_SECONDS:-3}" \
            FUZZ_TARGETS= JOBS="$jobs"; then
            record fuzz 1 1
        else
            record fuzz 1 0 "(a crash, or the build failed)"
        fi
        ;;
    *)
        echo "check.sh: unknown stage '$stage' (release, asan, tsan, opencl, cuda, python, bare, install, fuzz)" >&2
        exit 2
        ;;
    esac
done

note "make check: $total_run tests ran, $total_passed passed," \
    "$((total_run - total_passed)) failed ($((SECONDS - start)) s)"
printf '  %s\n' "${summary[@]}"
[ "$total_run" -gt 0 ] && [ "$total_run" -eq "$total_passed" ]
