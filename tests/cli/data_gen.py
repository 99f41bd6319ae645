"""Tiny data sets for tests/cli/data_cli.sh, written with the standard
library only (PNG through zlib, .npy by hand), so the test needs neither
PIL nor NumPy.

    data_gen.py DIR

DIR/img/{horizontal,vertical,red}/NNN.png   12x12 RGB, 40 each: stripes
    across, stripes down, a red square (learnable at a glance)
DIR/split/{train,test}/{bright,dark}/       8x8 grey, bright vs dark
DIR/blobs.csv   a,b,c,label: two Gaussian blobs, labels "no"/"yes"
DIR/reg.csv     a,b,z,y: y = 2a - 3b + N(0, NOISE^2); z is noise
DIR/npy/{x,y,x_test,y_test}.npy   4 features, class = argmax of the first 3
"""
import os
import random
import struct
import sys
import zlib

NOISE = 0.1


def png(path, w, h, channels, pixels):
    """pixels: a bytes object of h rows of w * channels bytes."""
    raw = b"".join(b"\x00" + pixels[y * w * channels:(y + 1) * w * channels] for y in range(h))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    colour = 2 if channels == 3 else 0
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, colour, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw)))
        f.write(chunk(b"IEND", b""))


def npy(path, descr, shape, values):
    fmt = {"<f4": "f", "<i8": "q"}[descr]
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % s for s in shape) if len(shape) == 1 else ", ".join(map(str, shape)))
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


def clamp(v):
    return max(0, min(255, int(v)))


def main():
    root = sys.argv[1]
    rnd = random.Random(7)
    # Image folder, held-out split.
    for cls, name in enumerate(["horizontal", "vertical", "red"]):
        d = os.path.join(root, "img", name)
        os.makedirs(d, exist_ok=True)
        for i in range(40):
            px = bytearray()
            for y in range(12):
                for x in range(12):
                    r, g, b = (rnd.uniform(0, 60) for _ in range(3))
                    if cls == 0 and y % 3 == 0:
                        r, g, b = r + 180, g + 180, b + 180
                    if cls == 1 and x % 3 == 0:
                        r, g, b = r + 180, g + 180, b + 180
                    if cls == 2 and 3 <= x < 9 and 3 <= y < 9:
                        r += 190
                    px += bytes((clamp(r), clamp(g), clamp(b)))
            png(os.path.join(d, "%03d.png" % i), 12, 12, 3, bytes(px))
    # Image folder with train/ and test/, grey.
    for part, n in (("train", 30), ("test", 10)):
        for name, base in (("bright", 170), ("dark", 40)):
            d = os.path.join(root, "split", part, name)
            os.makedirs(d, exist_ok=True)
            for i in range(n):
                px = bytes(clamp(base + rnd.uniform(-40, 40)) for _ in range(64))
                png(os.path.join(d, "%03d.png" % i), 8, 8, 1, px)
    with open(os.path.join(root, "blobs.csv"), "w") as f:
        f.write("a,b,c,label\n")
        for i in range(300):
            k = i % 2
            c = 1.5 if k else -1.5
            f.write("%.5f,%.5f,%.5f,%s\n" % (rnd.gauss(c, 1), rnd.gauss(c, 1), rnd.gauss(0, 1),
                                             "yes" if k else "no"))
    with open(os.path.join(root, "reg.csv"), "w") as f:
        f.write("a,b,z,y\n")
        for i in range(600):
            a, b, z = rnd.gauss(0, 1), rnd.gauss(0, 1), rnd.gauss(0, 1)
            f.write("%.6f,%.6f,%.6f,%.6f\n" % (a, b, z, 2 * a - 3 * b + rnd.gauss(0, NOISE)))
    d = os.path.join(root, "npy")
    os.makedirs(d, exist_ok=True)
    for name, n in (("", 400), ("_test", 100)):
        xs, ys = [], []
        for i in range(n):
            v = [rnd.gauss(0, 1) for _ in range(4)]
            xs += v
            ys.append(max(range(3), key=lambda k: v[k]))
        npy(os.path.join(d, "x%s.npy" % name), "<f4", (n, 4), xs)
        npy(os.path.join(d, "y%s.npy" % name), "<i8", (n,), ys)
    print(NOISE)


if __name__ == "__main__":
    main()
