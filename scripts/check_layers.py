#!/usr/bin/env python3
"""Checks the layering of the sources: nothing includes or calls upwards.

The layers, lowest first (LAYERS below):

    core       src/core
    backend    src/backend, src/backend/cpu, src/backend/opencl, ...
    ops        src/ops
    graph      src/graph, src/graph/passes
    nn data io src/nn, src/data, src/io: one level of three peers
    tools      tools/

A file may include, and an object may use symbols of, its own layer and the
layers below. The peers nn, data and io may include each other only where
they did when this check was written (PEER_INCLUDES), and use each other's
symbols only through the public API (include/chutney.h) or along those
includes. tools/ may include only include/chutney.h and tools/*.h, and use
only what include/chutney.h declares. include/chutney.h itself includes
nothing of src/.

Two parts:
  includes  every #include of src/**/*.[ch], tools/*.[ch] and include/*.h,
            resolved as the build does (the including file's folder, then
            src/, then include/; <...> only in src/ and include/);
            needs no build.
  calls     with --build DIR: `nm` over the objects of a CMake build of
            the library (DIR/CMakeFiles/*.dir/src/**.o: the object library
            chutney_obj) and of tools/ (chutney_cli); each undefined symbol
            that another library object defines is checked against the two
            objects' layers. Objects whose source is gone (a file moved or
            deleted since that build) are skipped.

Usage: check_layers.py [--build DIR] [--nm NM] [--root DIR]
Exits 1 with one line per violation, else 0 with a one-line summary.
"""
import argparse
import os
import re
import subprocess
import sys

# ---------------------------------------------------------------------------
# Exceptions. Each entry is (file, what) with a comment saying why it is
# allowed and until when:
#   ("src/ops/x.c", "src/graph/ir.h")  an include (the resolved path)
#   ("src/ops/x.c", "cn_graph_foo")    a use of a symbol by that file's object
# Keep it empty: fix the code instead, unless there is a reason written here.
ALLOW = [
]

# The peers' cross-includes that existed when this check was written
# (nn, data and io form one level; these are the only includes between
# them that are allowed). data reads its files through io's helpers.
PEER_INCLUDES = [
    ("src/data/csv.c", "src/io/fileio.h"),
    ("src/data/idx.c", "src/io/fileio.h"),
    ("src/data/image.c", "src/io/fileio.h"),
    # WAV files: the regular-file open and the size limit's variable.
    ("src/data/audio.c", "src/io/fileio.h"),
    ("src/data/loader.c", "src/io/fileio.h"),
    # The tokenizer's files: atomic writes and whole-file reads.
    ("src/data/bpe_file.c", "src/io/fileio.h"),
]
# ---------------------------------------------------------------------------

# (rank, layer name, folders). A folder covers its subfolders; the longest
# match wins. Peers share a rank.
LAYERS = [
    (0, "core", ["src/core"]),
    (1, "backend", ["src/backend"]),
    (2, "ops", ["src/ops"]),
    (3, "graph", ["src/graph"]),
    (4, "nn", ["src/nn"]),
    (4, "data", ["src/data"]),
    (4, "io", ["src/io"]),
    (5, "tools", ["tools"]),
]
PUBLIC_HEADER = "include/chutney.h"
# Generated sources compiled into the library, by the folder of the build
# directory they are generated in, and the layer that owns them.
GENERATED = {"onnx_gen": "io"}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(path):
    """(rank, name) of a repository-relative path, or None."""
    best = None
    for rank, name, folders in LAYERS:
        for f in folders:
            if path.startswith(f + "/") and (best is None or len(f) > best[0]):
                best = (len(f), rank, name)
    return (best[1], best[2]) if best else None


def rel(root, path):
    return os.path.relpath(path, root).replace(os.sep, "/")


def source_files(root):
    out = []
    for top, recursive in (("src", True), ("tools", False), ("include", False)):
        base = os.path.join(root, top)
        if not os.path.isdir(base):
            continue
        for d, dirs, files in os.walk(base):
            dirs.sort()
            if not recursive:
                dirs[:] = []
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    out.append(rel(root, os.path.join(d, f)))
    return out


def resolve(root, including, kind, name):
    """The repository-relative path an include names, or None (a system
    header or a generated one)."""
    cands = []
    if kind == '"':
        cands.append(os.path.join(os.path.dirname(including), name))
    cands += [os.path.join("src", name), os.path.join("include", name)]
    for c in cands:
        p = os.path.normpath(c).replace(os.sep, "/")
        if not p.startswith("../") and os.path.isfile(os.path.join(root, p)):
            return p
    return None


def check_includes(root, files, allow, used_allow):
    bad = []
    peer_ok = set(PEER_INCLUDES)
    for f in files:
        try:
            text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
        except OSError as e:
            bad.append(f"{f}: cannot read: {e}")
            continue
        me = layer_of(f)
        if me is None and f != PUBLIC_HEADER and not f.startswith("include/"):
            bad.append(f"{f}: in no layer (add its folder to LAYERS in scripts/check_layers.py)")
            continue
        for ln, line in enumerate(text.split("\n"), 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            kind, name = m.groups()
            target = resolve(root, f, kind, name)
            if target is None or target == f:
                continue
            if (f, target) in allow:
                used_allow.add((f, target))
                continue
            where = f"{f}:{ln}: includes {name}"
            if f.startswith("include/"):
                if not target.startswith("include/"):
                    bad.append(f"{where} (the public header includes {target}, which is internal)")
                continue
            if target.startswith("include/"):
                continue  # the public header: anyone may include it
            them = layer_of(target)
            if me[1] == "tools":
                if not target.startswith("tools/"):
                    what = f"layer {them[1]}" if them else "not a tools header"
                    bad.append(f"{where} (layer tools may include only include/chutney.h and "
                               f"tools/*.h; {target} is {what})")
                continue
            if them is None:
                bad.append(f"{where} ({target} is in no layer)")
            elif them[0] > me[0]:
                bad.append(f"{where} (layer {me[1]} includes layer {them[1]}, which is above it)")
            elif them[0] == me[0] and them[1] != me[1] and (f, target) not in peer_ok:
                bad.append(f"{where} (layer {me[1]} includes its peer {them[1]}, which it did not "
                           f"before: see PEER_INCLUDES in scripts/check_layers.py)")
    return bad


def header_identifiers(root):
    """Every identifier of the public header outside comments and strings."""
    text = open(os.path.join(root, PUBLIC_HEADER), encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', " ", text)
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def find_objects(root, build):
    """{source path: object path} for the library (src/...) and tools
    (tools/...) objects of a CMake build, and the generated ones
    (GENERATED) as "<layer>:<path>"."""
    objs = {}
    cmf = os.path.join(build, "CMakeFiles")
    if not os.path.isdir(cmf):
        return objs
    for t in sorted(os.listdir(cmf)):
        tdir = os.path.join(cmf, t)
        if not t.endswith(".dir") or not os.path.isdir(tdir):
            continue
        for d, dirs, files in os.walk(tdir):
            dirs.sort()
            for f in sorted(files):
                if not f.endswith(".o"):
                    continue
                obj = os.path.join(d, f)
                src = rel(tdir, obj)[:-2]  # src/ops/op.c.o -> src/ops/op.c
                top = src.split("/", 1)[0]
                if top in ("src", "tools"):
                    if not os.path.isfile(os.path.join(root, src)):
                        continue  # stale: its source has moved or gone
                elif top in GENERATED:
                    if not os.path.isfile(os.path.join(build, src)):
                        continue
                else:
                    continue
                # One object per source (the object library's, if a source is
                # compiled twice).
                if src not in objs or t == "chutney_obj.dir":
                    objs[src] = obj
    return objs


def obj_layer(src):
    top = src.split("/", 1)[0]
    if top in GENERATED:
        name = GENERATED[top]
        for rank, n, _ in LAYERS:
            if n == name:
                return (rank, n)
    return layer_of(src)


def run_nm(nm, paths):
    """{object path: (defined global symbols, undefined symbols)}."""
    out = {p: (set(), set()) for p in paths}
    chunk = 200
    for i in range(0, len(paths), chunk):
        part = paths[i:i + chunk]
        r = subprocess.run([nm, "-P", "-A", *part], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"{nm} failed: {r.stderr.strip()}")
        for line in r.stdout.splitlines():
            # "path/to/x.o: symbol T 0000 0010"
            head, sep, rest = line.partition(": ")
            if not sep or head not in out:
                continue
            fields = rest.split()
            if len(fields) < 2:
                continue
            sym, typ = fields[0], fields[1]
            if typ == "U":
                out[head][1].add(sym)
            elif typ.isupper() or typ == "i":  # "i": a GNU indirect function
                out[head][0].add(sym)
    return out


def check_calls(root, build, nm, allow, used_allow):
    objs = find_objects(root, build)
    lib = {s: o for s, o in objs.items() if not s.startswith("tools/")}
    tools = {s: o for s, o in objs.items() if s.startswith("tools/")}
    if not lib:
        return [f"{build}: no object of the library under CMakeFiles/*.dir/src/ (build it first)"], 0
    syms = run_nm(nm, sorted(objs.values()))
    definer = {}  # symbol -> [(rank, layer, source)]
    for s, o in lib.items():
        lay = obj_layer(s)
        for sym in syms[o][0]:
            definer.setdefault(sym, []).append((lay[0], lay[1], s))
    tool_defs = set()
    for o in tools.values():
        tool_defs |= syms[o][0]
    public = header_identifiers(root)
    peer_pairs = {(layer_of(a)[1], layer_of(b)[1]) for a, b in PEER_INCLUDES}
    bad = []
    for s in sorted(objs):
        o = objs[s]
        me = obj_layer(s)
        if me is None:
            bad.append(f"{s}.o: in no layer (add its folder to LAYERS in scripts/check_layers.py)")
            continue
        for sym in sorted(syms[o][1]):
            defs = definer.get(sym)
            if not defs:
                continue  # libc, BLAS, ...
            if (s, sym) in allow:
                used_allow.add((s, sym))
                continue
            rank, name, where = min(defs)
            if me[1] == "tools":
                if sym not in public and sym not in tool_defs:
                    bad.append(f"{s}.o uses {sym} defined in {where} (layer {name}), which "
                               f"{PUBLIC_HEADER} does not declare (tools may use only the public API)")
            elif rank > me[0]:
                bad.append(f"{s}.o uses {sym} defined in {where} "
                           f"(layer {me[1]} uses layer {name}, which is above it)")
            elif rank == me[0] and name != me[1] and sym not in public \
                    and (me[1], name) not in peer_pairs:
                bad.append(f"{s}.o uses {sym} defined in {where} (layer {me[1]} uses its peer "
                           f"{name} outside the public API and PEER_INCLUDES)")
    return bad, len(objs)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="a CMake build directory: also check the objects' symbols")
    ap.add_argument("--nm", default="nm", help="the nm program (default: nm)")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                    help="the repository (default: this script's parent folder)")
    args = ap.parse_args(argv)
    root = os.path.abspath(args.root)
    allow = set(ALLOW)
    used_allow = set()

    files = source_files(root)
    bad = check_includes(root, files, allow, used_allow)
    nobj = 0
    if args.build:
        try:
            call_bad, nobj = check_calls(root, os.path.abspath(args.build), args.nm or "nm",
                                         allow, used_allow)
        except (OSError, RuntimeError) as e:
            call_bad = [f"cannot run nm: {e}"]
        bad += call_bad
    for entry in sorted(allow - used_allow):
        if not args.build and "/" not in entry[1]:
            continue  # a symbol: the calls were not checked
        print(f"note: ALLOW entry {entry} matches nothing: remove it", file=sys.stderr)
    if bad:
        for b in bad:
            print(b)
        print(f"layers: {len(bad)} violation{'s' if len(bad) != 1 else ''} "
              f"({len(files)} files, {nobj} objects checked)")
        return 1
    print(f"layers: {len(files)} files, {nobj} objects checked, no upward include or call"
          + ("" if args.build else " (includes only: no --build)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
