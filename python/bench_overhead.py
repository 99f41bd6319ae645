"""Per-op overhead from Python: `x = x + a` on small float32 tensors, with
chutney and (when it is installed) torch, in the same interpreter.

    python3 python/bench_overhead.py [--ops 100000] [--repeats 7]

Prints nanoseconds per op (the best of the repeats) and the ratio
chutney / torch. The issue's target is a ratio of at most 1/3."""

import argparse
import os
import sys
import timeit

# Run from the source tree, this file's folder (python/) would shadow the
# installed package with the unbuilt one.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]


def per_op_ns(lib, n, ops, repeats):
    x = lib.ones(n, dtype=lib.float32)
    a = lib.ones(n, dtype=lib.float32)

    def loop():
        y = x
        for _ in range(ops):
            y = y + a
        return y

    loop()  # warm up
    return min(timeit.repeat(loop, number=1, repeat=repeats)) / ops * 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    import chutney
    libs = [("chutney", chutney)]
    try:
        import torch
        libs.append((f"torch {torch.__version__}", torch))
    except ImportError:
        print("(torch is not installed: chutney alone)")
    print(f"x = x + a, float32, best of {args.repeats} x {args.ops} ops "
          f"(chutney {chutney.__version__}, {chutney.build_info()})")
    for n in (1, 100):
        row = {}
        for name, lib in libs:
            row[name] = per_op_ns(lib, n, args.ops, args.repeats)
            print(f"  n={n:<4d} {name:<22s} {row[name]:8.1f} ns/op")
        if len(row) == 2:
            c, t = row.values()
            print(f"  n={n:<4d} ratio chutney/torch  {c / t:8.3f}")


if __name__ == "__main__":
    main()
