#!/usr/bin/env python3
"""An alpha-beta model of a data-parallel training step at N ranks.

    step(N) = compute + allreduce(N)
    allreduce(N) = 2 (N - 1) alpha_msg + 2 (N - 1) / N * S / beta

compute: one rank's step at its batch, from bench/results/dist.json (1
process x 1 thread, samples/s at the model's default batch: weak scaling,
every rank keeps that batch); S: the gradient bytes (parameters x 4);
the ring's 2 (N - 1) messages of S / N bytes each (Chutney's allreduce,
src/backend/dist.c); alpha_msg and beta from bench_dist (its alpha is
one 2-rank allreduce: 2 messages). The averaging does not overlap a
compiled step's compute (--mode static, the default), so the times add.

Usage: bench/dist_model.py ALPHA_US BETA_GBS [NAME] [ALPHA_US BETA_GBS NAME ...]
Prints a markdown table per network.
"""
import json
import sys

PARAMS = {"mlp": 535818, "cnn": 421642, "lstm": 82186}
BATCH = {"mlp": 128, "cnn": 64, "lstm": 128}


def main(argv):
    res = json.load(open("bench/results/dist.json"))
    nets = []
    for i in range(1, len(argv), 3):
        nets.append((float(argv[i]) * 1e-6, float(argv[i + 1]) * 1e9,
                     argv[i + 2] if i + 2 < len(argv) else "network"))
    for alpha, beta, name in nets:
        a_msg = alpha / 2
        print(f"\n{name}: alpha {alpha * 1e6:.1f} us per 2-rank allreduce "
              f"({a_msg * 1e6:.1f} us per message), beta {beta / 1e9:.2f} GB/s\n")
        print("| model | compute per step | S | N=2 | N=8 | N=64 | N=512 | 50% at N = |")
        print("|---|---|---|---|---|---|---|---|")
        for m in ("mlp", "cnn", "lstm"):
            sps = res["models"][m]["samples_per_sec"]["1x1"]
            tc = BATCH[m] / sps
            s = PARAMS[m] * 4.0
            cells = []
            for n in (2, 8, 64, 512):
                ar = 2 * (n - 1) * a_msg + 2 * (n - 1) / n * s / beta
                cells.append(f"{tc / (tc + ar):.0%} ({(tc + ar) * 1e3:.1f} ms)")
            # efficiency 50%: allreduce(N) = compute; solve on integers
            half = next((n for n in range(2, 1 << 20)
                         if 2 * (n - 1) * a_msg + 2 * (n - 1) / n * s / beta >= tc), None)
            print(f"| {m} | {tc * 1e3:.1f} ms | {s / 1e6:.2f} MB | " + " | ".join(cells) +
                  f" | {half if half else 'never'} |")


if __name__ == "__main__":
    main(sys.argv)
