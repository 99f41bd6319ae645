#!/usr/bin/env python3
"""Checks a picture of `chutney plot` without an image library: the PNG
signature and chunk CRCs, its size, and that the curves' colours are drawn
where they belong (the PNG decoded here with zlib).

    check_png.py FILE.png WIDTH HEIGHT NAME=R,G,B:X0-X1:MINCOLS ...
Each NAME=... asks for pixels of exactly that colour in at least MINCOLS
different columns between the fractions X0 and X1 of the width (a curve
across the panel, not only its legend swatch). Prints one "ok:" line, or
"FAIL: ..." lines and exits 1."""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG (bad signature)")
    i, idat, ihdr = 8, b"", None
    while i < len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        kind, body = data[i + 4:i + 8], data[i + 8:i + 8 + n]
        (crc,) = struct.unpack(">I", data[i + 8 + n:i + 12 + n])
        if zlib.crc32(kind + body) != crc:
            raise ValueError("bad CRC in chunk %r" % kind)
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        i += 12 + n
    w, h, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError("depth %d, colour type %d, interlace %d: not what cairo writes" %
                         (depth, ctype, interlace))
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for x in range(bpp, stride):
                line[x] = (line[x] + line[x - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for x in range(stride):
                left = line[x - bpp] if x >= bpp else 0
                line[x] = (line[x] + ((left + prev[x]) >> 1)) & 255
        elif f == 4:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                b, c = prev[x], prev[x - bpp] if x >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        elif f != 0:
            raise ValueError("filter %d" % f)
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def main():
    path, want_w, want_h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    try:
        w, h, bpp, rows = decode(path)
    except (ValueError, zlib.error, struct.error, TypeError) as e:
        print("FAIL: %s: %s" % (path, e))
        return 1
    fails = []
    if (w, h) != (want_w, want_h):
        fails.append("%dx%d, expected %dx%d" % (w, h, want_w, want_h))
    found = []
    for spec in sys.argv[4:]:
        name, rest = spec.split("=")
        rgb, span, mincols = rest.split(":")
        colour = bytes(int(v) for v in rgb.split(","))
        x0, x1 = (float(v) for v in span.split("-"))
        cols = set()
        for row in rows:
            for x in range(int(x0 * w), int(x1 * w)):
                if row[x * bpp:x * bpp + 3] == colour:
                    cols.add(x)
        if len(cols) < int(mincols):
            fails.append("%s (%s) in %d columns of %d-%d, expected %s or more" %
                         (name, rgb, len(cols), int(x0 * w), int(x1 * w), mincols))
        found.append("%s in %d columns" % (name, len(cols)))
    for f in fails:
        print("FAIL: " + f)
    if fails:
        return 1
    print("ok: %s: a %dx%d PNG, %s" % (path.rsplit("/", 1)[-1], w, h, ", ".join(found)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
