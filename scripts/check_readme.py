#!/usr/bin/env python3
"""Checks that README.md's tour is the real thing: every ```c block is quoted
verbatim from examples/tour.c (leading whitespace aside), and, given the
built tour program, that README.md shows exactly what it prints.

Usage: check_readme.py README.md examples/tour.c [path/to/example_tour]"""
import re
import subprocess
import sys


def lines(text):
    return [line.strip() for line in text.strip("\n").split("\n")]


def main(readme_path, tour_path, tour_exe=None):
    readme = open(readme_path, encoding="utf-8").read()
    tour = lines(open(tour_path, encoding="utf-8").read())
    blocks = re.findall(r"^```c\n(.*?)^```", readme, re.S | re.M)
    if not blocks:
        print(f"{readme_path}: no ```c blocks found")
        return 1
    bad = 0
    for block in blocks:
        want = lines(block)
        n = len(want)
        if not any(tour[i:i + n] == want for i in range(len(tour) - n + 1)):
            bad += 1
            print(f"{readme_path}: this block is not in {tour_path}:\n{block}")
    print(f"{len(blocks) - bad} of {len(blocks)} C blocks of {readme_path} match {tour_path}")
    if tour_exe:
        out = subprocess.run([tour_exe], capture_output=True, text=True, check=False).stdout
        if "```text\n" + out.rstrip("\n") + "\n```" not in readme:
            bad += 1
            print(f"{readme_path} does not show what {tour_exe} prints now:\n{out}")
        else:
            print(f"{readme_path} shows the output of {tour_exe}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
