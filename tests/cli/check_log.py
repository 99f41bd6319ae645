#!/usr/bin/env python3
"""Checks a `chutney train --log` file against the run that wrote it.

    check_log.py LOG.jsonl SUMMARY SAMPLES BATCH EPOCHS
SUMMARY is the run's standard output with --json. The log must have a start
line, ceil(SAMPLES / BATCH) step lines per epoch numbered from 1, finite
figures, each epoch's train_loss the mean of its steps' losses weighted by
their batch sizes, its last step's loss the --json line's final_loss (as
text: both are printed with 9 digits), and the test accuracy or validation
loss --json reports. Prints one "ok:" line, or "FAIL: ..." lines, exit 1."""
import json
import math
import re
import sys


def main():
    log, summary = sys.argv[1], sys.argv[2]
    n, batch, epochs = (int(v) for v in sys.argv[3:6])
    raw = open(log).read()
    lines = [json.loads(l) for l in raw.splitlines()]
    out = open(summary).read()
    final = json.loads([l for l in out.splitlines() if l.startswith('{"model"')][-1])
    fails = []
    spe = -(-n // batch)
    start = [l for l in lines if l["event"] == "start"]
    steps = [l for l in lines if l["event"] == "step"]
    eps = [l for l in lines if l["event"] == "epoch"]
    if len(start) != 1 or lines[0]["event"] != "start":
        fails.append("%d start lines, the first line %r" % (len(start), lines[0]))
    elif start[0]["steps_per_epoch"] != spe or start[0]["samples"] != n:
        fails.append("start: steps_per_epoch %s, samples %s; expected %d, %d" %
                     (start[0]["steps_per_epoch"], start[0]["samples"], spe, n))
    if [s["step"] for s in steps] != list(range(1, epochs * spe + 1)):
        fails.append("steps %s, expected 1..%d" % ([s["step"] for s in steps], epochs * spe))
    for s in steps:
        if s["epoch"] != (s["step"] - 1) // spe + 1:
            fails.append("step %d in epoch %d" % (s["step"], s["epoch"]))
        for k in ("loss", "grad_norm", "lr", "samples_per_sec", "rss_mb"):
            if not (isinstance(s.get(k), (int, float)) and math.isfinite(s[k]) and s[k] > 0):
                fails.append("step %d: %s is %r" % (s["step"], k, s.get(k)))
    if len(eps) != epochs:
        fails.append("%d epoch lines, expected %d" % (len(eps), epochs))
    for e in eps:
        if e["step"] != e["epoch"] * spe:
            fails.append("epoch %d ends at step %d, expected %d" % (e["epoch"], e["step"], e["epoch"] * spe))
        mine = [s for s in steps if s["epoch"] == e["epoch"]]
        sizes = [batch] * (spe - 1) + [n - (spe - 1) * batch]
        if len(mine) == spe:
            mean = sum(s["loss"] * b for s, b in zip(mine, sizes)) / n
            if abs(mean - e["train_loss"]) > 1e-6 * abs(mean):
                fails.append("epoch %d: train_loss %r, its steps' mean %r" % (e["epoch"], e["train_loss"], mean))
        if not e["seconds"] > 0:
            fails.append("epoch %d: seconds %r" % (e["epoch"], e["seconds"]))
    last = re.findall(r'"event":"step"[^\n]*"loss":([^,]*),', raw)
    want = re.search(r'"final_loss":([^,}]*)', out).group(1)
    if not last or last[-1] != want:
        fails.append("the last step's loss %s, --json final_loss %s" % (last[-1:] or None, want))
    if eps and "test_accuracy" in final and round(eps[-1]["test_accuracy"], 4) != final["test_accuracy"]:
        fails.append("test_accuracy %r, --json %r" % (eps[-1]["test_accuracy"], final["test_accuracy"]))
    if eps and "val_loss" in final and abs(eps[-1]["val_loss"] - final["val_loss"]) > 1e-6:
        fails.append("val_loss %r, --json %r" % (eps[-1]["val_loss"], final["val_loss"]))
    for f in fails:
        print("FAIL: " + f)
    if fails:
        return 1
    print("ok: %s: %d steps in %d epochs, train_loss the steps' mean, final loss %s as --json" %
          (log.rsplit("/", 1)[-1], len(steps), len(eps), want))
    return 0


if __name__ == "__main__":
    sys.exit(main())
