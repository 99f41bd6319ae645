#!/bin/sh
# The Python binding's tests, for `make check`:
#
#   python/run_tests.sh [pytest arguments...]
#
# Makes a virtual environment in build/python-venv (with the system's
# site-packages, so Debian's numpy, torch and pytest are used), installs
# ./python into it (pip, no build isolation: offline with the system's
# setuptools and wheel), and runs pytest on tests/python. The last line is
# pytest's summary; the exit status is pytest's (or 1 if the set-up failed).
#
# Environment:
#   PYTHON             the interpreter (default /usr/bin/python3 where it
#                      exists, Debian's, which has numpy and torch; else python3)
#   VENV               the virtual environment (default build/python-venv)
#   CHUTNEY_BUILD_DIR  a CMake build of this repository with libchutney.a to
#                      link (e.g. build); without it setup.py builds the library
#                      with CMake in python/build (once; then incrementally)
#   CHUTNEY_PY_CFLAGS  extra flags for the extension (e.g. -Werror)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cd "$root" || exit 1

# pip builds elsewhere: a relative build directory is the repository's.
case ${CHUTNEY_BUILD_DIR:-} in
    "" | /*) ;;
    *) CHUTNEY_BUILD_DIR=$root/$CHUTNEY_BUILD_DIR; export CHUTNEY_BUILD_DIR ;;
esac

py=${PYTHON:-}
if [ -z "$py" ]; then
    if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; else py=python3; fi
fi
venv=${VENV:-$root/build/python-venv}

if [ ! -x "$venv/bin/python" ]; then
    echo "run_tests: creating $venv ($("$py" --version 2>&1))"
    "$py" -m venv --system-site-packages "$venv" || {
        echo "run_tests: could not create a venv (Debian: apt-get install python3-venv)" >&2
        exit 1
    }
fi
vpy=$venv/bin/python

if ! "$vpy" -c "import pytest" >/dev/null 2>&1; then
    echo "run_tests: pytest is missing; installing it into $venv from PyPI"
    "$vpy" -m pip install -q pytest || {
        echo "run_tests: no pytest (Debian: apt-get install python3-pytest)" >&2
        exit 1
    }
fi

echo "run_tests: installing ./python into $venv"
"$vpy" -m pip install -q --no-build-isolation --no-deps --force-reinstall "$here" || {
    echo "run_tests: pip install ./python failed" >&2
    exit 1
}

# From the repository root (not python/) so the installed package is tested.
"$vpy" -X dev -m pytest -p no:cacheprovider tests/python "$@"
