#!/usr/bin/env bash
# The install test. Installs a build into a temporary prefix, then builds
# use_chutney.c against it the ways a user would -- through pkg-config (shared,
# and static with --static) and through CMake's find_package (shared and
# static) -- and runs each. The last line says how many checks ran and passed;
# the exit status is non-zero if any failed.
#
# Usage: tests/install/run.sh [BUILD_DIR]    (default: build, already built)
# The checks are functions run through `check`, and pkg-config's output is
# meant to split into words:
# shellcheck disable=SC2317,SC2046,SC2086
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
cc=${CC:-cc}
work=$(mktemp -d "${TMPDIR:-/tmp}/chutney-install.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
run=0
passed=0

# check NAME FUNCTION: runs FUNCTION, shows its output only if it fails.
check() {
    run=$((run + 1))
    if "$2" >"$work/log" 2>&1; then
        passed=$((passed + 1))
        echo "  ok      $1"
        return 0
    fi
    echo "  FAILED  $1"
    sed 's/^/    /' "$work/log"
    return 1
}

finish() {
    echo "install test: $run run, $passed passed"
    [ "$run" -eq "$passed" ]
    exit $?
}

links_shared_chutney() { readelf -d "$1" | grep -q 'NEEDED.*libchutney\.so'; }

install_into_prefix() {
    cmake --install "$build" --prefix "$prefix" &&
        pcfile=$(find "$prefix" -name chutney.pc -print -quit) && [ -n "$pcfile" ] &&
        PKG_CONFIG_PATH=$(dirname "$pcfile") && export PKG_CONFIG_PATH
}

cli_runs() { "$prefix/bin/chutney" --version; }

pkgconfig_shared() {
    local exe=$work/pc_shared libdir
    libdir=$(pkg-config --variable=libdir chutney) &&
        $cc -std=c11 -Wall -Wextra -Werror -pedantic "$here/use_chutney.c" -o "$exe" \
            $(pkg-config --cflags --libs chutney) -Wl,-rpath,"$libdir" &&
        links_shared_chutney "$exe" && "$exe"
}

# Links libchutney.a itself (both libraries are installed, and -lchutney
# would pick the shared one): only Requires.private and Libs.private can
# then supply what the archive needs.
pkgconfig_static() {
    local exe=$work/pc_static libs
    libs=$(pkg-config --static --libs chutney) &&
        libs=$(printf '%s\n' "$libs" | sed 's/-lchutney/-l:libchutney.a/') &&
        $cc -std=c11 -Wall -Wextra -Werror -pedantic "$here/use_chutney.c" -o "$exe" \
            $(pkg-config --cflags chutney) $libs &&
        ! links_shared_chutney "$exe" && "$exe"
}

cmake_configure() {
    cmake -S "$here" -B "$work/cmake" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF &&
        cmake --build "$work/cmake" &&
        grep -q "^chutney_DIR:PATH=$prefix/" "$work/cmake/CMakeCache.txt"
}

cmake_shared() {
    links_shared_chutney "$work/cmake/use_chutney_shared" && "$work/cmake/use_chutney_shared"
}

cmake_static() {
    ! links_shared_chutney "$work/cmake/use_chutney_static" && "$work/cmake/use_chutney_static"
}

echo "install test: $build into a temporary prefix"
check "cmake --install" install_into_prefix || finish
check "installed chutney --version" cli_runs
check "pkg-config --cflags --libs chutney (shared)" pkgconfig_shared
check "pkg-config --static --libs chutney (libchutney.a)" pkgconfig_static
if check "find_package(chutney): configure and build" cmake_configure; then
    check "find_package(chutney): chutney::chutney" cmake_shared
    check "find_package(chutney): chutney::chutney_static" cmake_static
fi
finish
