"""Builds chutney._C, the CPython extension of the Chutney library.

The extension is C (python/src/*.c) against the CPython C API, linked with
the static library libchutney.a, so the installed module needs no
libchutney.so. Where the library comes from:

- CHUTNEY_BUILD_DIR=DIR: a CMake build directory of this repository that
  has libchutney.a (e.g. `build`, which `make` makes). Nothing is rebuilt.
- otherwise the library is built here with CMake, from the repository this
  file is in (CHUTNEY_SOURCE_DIR overrides it), into the build_temp
  directory of setuptools (python/build/temp.*/chutney-lib), Release,
  without tests, benchmarks and examples; CHUTNEY_CMAKE_ARGS adds options
  (e.g. "-DCHUTNEY_WITH_MPI=OFF") and CHUTNEY_BUILD_JOBS the parallelism.

The static library's own dependencies (OpenBLAS, zlib, oneDNN, OpenCL, MPI,
... whatever that build found) are read from the pkg-config file CMake
configured in the build directory (chutney.pc.in: Requires.private and
Libs.private) and linked as shared libraries. The library's symbols are
kept out of the extension's dynamic symbol table (--exclude-libs), so only
PyInit__C is exported and another libchutney in the process cannot clash.

Extra compiler flags: CHUTNEY_PY_CFLAGS (e.g. "-Werror", or
"-fsanitize=address -O1 -g" for a debugging build).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
os.chdir(HERE)  # setuptools wants paths relative to setup.py


def source_dir():
    env = os.environ.get("CHUTNEY_SOURCE_DIR")
    root = Path(env).resolve() if env else HERE.parent
    if not (root / "include" / "chutney.h").is_file() or not (root / "CMakeLists.txt").is_file():
        sys.exit(
            f"chutney: no Chutney source tree at {root} (include/chutney.h and CMakeLists.txt); "
            "set CHUTNEY_SOURCE_DIR to the repository, or CHUTNEY_BUILD_DIR to a build of it"
        )
    return root


def run(cmd, **kw):
    print("chutney:", " ".join(shlex.quote(str(c)) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def build_library(src, build_dir):
    cmake = shutil.which("cmake")
    if not cmake:
        sys.exit("chutney: cmake is needed to build the library (apt-get install cmake), "
                 "or set CHUTNEY_BUILD_DIR to a build directory with libchutney.a")
    build_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "-DCMAKE_BUILD_TYPE=Release",
        "-DCHUTNEY_BUILD_TESTS=OFF",
        "-DCHUTNEY_BUILD_BENCH=OFF",
        "-DCHUTNEY_BUILD_EXAMPLES=OFF",
    ] + shlex.split(os.environ.get("CHUTNEY_CMAKE_ARGS", ""))
    run([cmake, "-S", src, "-B", build_dir] + args)
    jobs = os.environ.get("CHUTNEY_BUILD_JOBS") or str(os.cpu_count() or 2)
    run([cmake, "--build", build_dir, "--target", "chutney_static", "-j", jobs])


def pc_field(text, name):
    m = re.search(rf"^{re.escape(name)}:[ \t]*(.*)$", text, re.M)
    return m.group(1).strip() if m else ""


# Debian names of the pkg-config modules the library may require, for a
# fallback when pkg-config itself is missing.
FALLBACK_LIBS = {"openblas": ["-lopenblas"], "zlib": ["-lz"], "libprotobuf-c": ["-lprotobuf-c"],
                 "OpenCL": ["-lOpenCL"]}


def dependency_flags(build_dir):
    """Link flags for the static library's dependencies."""
    pc = build_dir / "chutney.pc.in"
    if not pc.is_file():
        print(f"chutney: warning: {pc} not found; linking with -lm -lpthread only", flush=True)
        return ["-lm", "-lpthread"]
    text = pc.read_text()
    flags = []
    requires = pc_field(text, "Requires.private").split()
    if requires:
        pkg = shutil.which("pkg-config")
        out = None
        if pkg:
            r = subprocess.run([pkg, "--libs"] + requires, capture_output=True, text=True)
            out = r.stdout.split() if r.returncode == 0 else None
        if out is None:
            out = [f for q in requires for f in FALLBACK_LIBS.get(q, [f"-l{q}"])]
        flags += out
    flags += shlex.split(pc_field(text, "Libs.private"))
    return flags + ["-lpthread", "-lm"]


class BuildExt(build_ext):
    def build_extensions(self):
        src = source_dir()
        env_dir = os.environ.get("CHUTNEY_BUILD_DIR")
        if env_dir:
            lib_build = Path(env_dir).resolve()
            if not (lib_build / "libchutney.a").is_file():
                sys.exit(f"chutney: CHUTNEY_BUILD_DIR={env_dir} has no libchutney.a "
                         "(build it: cmake --build DIR --target chutney_static)")
        else:
            lib_build = Path(self.build_temp).resolve() / "chutney-lib"
            build_library(src, lib_build)
        archive = lib_build / "libchutney.a"
        deps = dependency_flags(lib_build)
        print(f"chutney: linking {archive} with {' '.join(deps)}", flush=True)
        extra_cflags = shlex.split(os.environ.get("CHUTNEY_PY_CFLAGS", ""))
        # setuptools rebuilds only sources newer than their objects: objects
        # compiled with other flags (an AddressSanitizer build before a plain
        # one) would be linked as they are, and the module would not import.
        stamp = Path(self.build_temp) / "chutney-flags"
        flags_key = "\n".join([str(archive), f"inplace={int(bool(self.inplace))}"] + extra_cflags)
        if not stamp.is_file() or stamp.read_text() != flags_key:
            self.force = True
        for ext in self.extensions:
            ext.include_dirs.append(str(src / "include"))
            ext.extra_objects.append(str(archive))
            ext.depends += [str(archive), str(src / "include" / "chutney.h")]
            ext.extra_compile_args += [
                "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                "-Wno-missing-field-initializers", "-fvisibility=hidden",
            ] + extra_cflags
            ext.extra_link_args += ["-Wl,--exclude-libs,ALL"] + deps + [
                f for f in extra_cflags if f.startswith("-fsanitize")]
        super().build_extensions()
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(flags_key)


sources = sorted(str(p.relative_to(HERE)) for p in (HERE / "src").glob("*.c"))

setup(
    ext_modules=[
        Extension(
            "chutney._C",
            sources=sources,
            depends=[str(p.relative_to(HERE)) for p in (HERE / "src").glob("*.h")],
        )
    ],
    cmdclass={"build_ext": BuildExt},
)
