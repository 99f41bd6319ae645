"""The build backend of the chutney package: setuptools.build_meta, with a
fallback for `pip install --no-build-isolation` with an old setuptools.

setuptools builds wheels with its bdist_wheel command, which before
setuptools 70.1 comes from the separate `wheel` package. An interpreter's
own setuptools may be older and lack it (pyenv's 3.11 has setuptools 65
and no wheel): then this backend builds the package with setuptools
(`setup.py build`, `egg_info`) and zips the wheel itself (PEP 427: the
files, a .dist-info with METADATA, WHEEL and RECORD). Everything else is
setuptools' own, and with build isolation (pip's default) pip installs a
current setuptools and the fallback is not used."""

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

from setuptools import build_meta as _st
from setuptools.build_meta import build_sdist, get_requires_for_build_sdist  # noqa: F401

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _has_bdist_wheel():
    try:
        import setuptools.command.bdist_wheel  # noqa: F401  (setuptools >= 70.1)
        return True
    except ImportError:
        pass
    try:
        import wheel.bdist_wheel  # noqa: F401
        return True
    except ImportError:
        return False


def get_requires_for_build_wheel(config_settings=None):
    if _has_bdist_wheel():
        return _st.get_requires_for_build_wheel(config_settings)
    return []


def _egg_info(tmp):
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", tmp], cwd=HERE,
                   check=True)
    (info,) = [d for d in os.listdir(tmp) if d.endswith(".egg-info")]
    return os.path.join(tmp, info)


def _pkg_info_field(path, field):
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
    raise RuntimeError(f"{path} has no {field}")


def _tag():
    soabi = sysconfig.get_config_var("SOABI") or ""  # cpython-311-x86_64-linux-gnu
    parts = soabi.split("-")
    impl = f"cp{sys.version_info.major}{sys.version_info.minor}"
    abi = "cp" + parts[1] if len(parts) > 1 and parts[0] == "cpython" else impl
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{abi}-{plat}"


def _dist_info(dest, egg_info, name, version):
    d = os.path.join(dest, f"{name}-{version}.dist-info")
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(egg_info, "PKG-INFO"), os.path.join(d, "METADATA"))
    with open(os.path.join(d, "WHEEL"), "w") as f:
        f.write(f"Wheel-Version: 1.0\nGenerator: chutney-build-backend\nRoot-Is-Purelib: false\n"
                f"Tag: {_tag()}\n")
    top = os.path.join(egg_info, "top_level.txt")
    if os.path.exists(top):
        shutil.copy(top, os.path.join(d, "top_level.txt"))
    return os.path.basename(d)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    if _has_bdist_wheel():
        return _st.prepare_metadata_for_build_wheel(metadata_directory, config_settings)
    with tempfile.TemporaryDirectory() as tmp:
        info = _egg_info(tmp)
        pkg = os.path.join(info, "PKG-INFO")
        name, version = _pkg_info_field(pkg, "Name"), _pkg_info_field(pkg, "Version")
        return _dist_info(metadata_directory, info, name, version)


def _record_line(root, path):
    with open(path, "rb") as f:
        data = f.read()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{os.path.relpath(path, root).replace(os.sep, '/')},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if _has_bdist_wheel():
        return _st.build_wheel(wheel_directory, config_settings, metadata_directory)
    with tempfile.TemporaryDirectory() as tmp:
        lib = os.path.join(tmp, "lib")
        subprocess.run([sys.executable, "setup.py", "-q", "build", "--build-lib", lib], cwd=HERE,
                       check=True)
        info = _egg_info(tmp)
        pkg = os.path.join(info, "PKG-INFO")
        name, version = _pkg_info_field(pkg, "Name"), _pkg_info_field(pkg, "Version")
        dist = _dist_info(lib, info, name, version)
        files = []
        for base, _, names in os.walk(lib):
            for n in sorted(names):
                files.append(os.path.join(base, n))
        record = os.path.join(lib, dist, "RECORD")
        lines = [_record_line(lib, p) for p in files] + [f"{dist}/RECORD,,"]
        with open(record, "w") as f:
            f.write("\n".join(lines) + "\n")
        wheel = f"{name}-{version}-{_tag()}.whl"
        os.makedirs(wheel_directory, exist_ok=True)
        with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
            for p in files + [record]:
                z.write(p, os.path.relpath(p, lib))
        return wheel
