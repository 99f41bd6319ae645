#!/usr/bin/env python3
"""Writes the file readers' seed corpora: tiny valid files, one folder per
reader (fuzz/seeds/<reader>/), plus a few near-misses. Standard library
only; the JPEG seeds need a C compiler and stb (libstb-dev). The files are
checked in; run this again only to change them:

    python3 fuzz/seeds/make_seeds.py fuzz/seeds
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib


def put(root, reader, name, data):
    d = os.path.join(root, reader)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- .npy ----
def npy(descr, shape, payload, fortran=False, version=1):
    shp = "(" + "".join(f"{s}, " if len(shape) == 1 else f"{s}, " for s in shape).rstrip(", ")
    shp += ",)" if len(shape) == 1 else ")"
    hdr = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shp)
    pre = 10 if version == 1 else 12
    pad = (64 - (pre + len(hdr) + 1) % 64) % 64
    hdr = (hdr + " " * pad + "\n").encode()
    if version == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + payload
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(hdr)) + hdr + payload


def npy_seeds(root):
    put(root, "npy", "f32_2x3.npy", npy("<f4", (2, 3), struct.pack("<6f", 0, 1, 2, 3, 4.5, -1)))
    put(root, "npy", "f64_be.npy", npy(">f8", (3,), struct.pack(">3d", 1, 2, 3)))
    put(root, "npy", "i64_fortran.npy", npy("<i8", (2, 2), struct.pack("<4q", 1, 2, 3, 4), fortran=True))
    put(root, "npy", "i32_v2.npy", npy("<i4", (4,), struct.pack("<4i", 1, -2, 3, -4), version=2))
    put(root, "npy", "f16_v3.npy", npy("<f2", (2,), struct.pack("<2e", 1.5, -2), version=3))
    put(root, "npy", "u8_scalar.npy", npy("|u1", (), b"\x07"))
    put(root, "npy", "bool.npy", npy("|b1", (3,), b"\x01\x00\x01"))
    put(root, "npy", "empty.npy", npy("<f4", (0, 5), b""))


# ---- safetensors and its JSON header ----
def safetensors(tensors, metadata=None):
    hdr, data = {}, b""
    for name, (dt, shape, raw) in tensors.items():
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        hdr["__metadata__"] = metadata
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + data, h


def st_seeds(root):
    two, h = safetensors({"w": ("F32", (2, 3), struct.pack("<6f", *range(6))),
                          "b": ("I64", (3,), struct.pack("<3q", 1, 2, 3))}, {"format": "pt", "step": "7"})
    put(root, "safetensors", "two.safetensors", two)
    put(root, "json", "header.json", h)
    one, _ = safetensors({"w": ("F32", (2, 3), struct.pack("<6f", *range(6)))})
    put(root, "safetensors", "w_only.safetensors", one + b" " * (len(one) % 2 == 0))
    many, h2 = safetensors({"h": ("F16", (2,), struct.pack("<2e", 1, 2)),
                            "bf": ("BF16", (1,), b"\x80\x3f"),
                            "d": ("F64", (1, 1), struct.pack("<d", 2.5)),
                            "i": ("I32", (2,), struct.pack("<2i", 1, 2)),
                            "u": ("U8", (3,), b"abc"),
                            "t": ("BOOL", (1,), b"\x01"),
                            "z": ("F32", (0,), b"")})
    put(root, "safetensors", "dtypes.safetensors", many)
    put(root, "json", "dtypes.json", h2)
    put(root, "json", "values.json",
        b'{"a": [1, -2.5e-3, 1e308, 0.0, true, false, null], "s": "\\u00e9\\ud83d\\ude00\\n\\"", '
        b'"o": {"": {}, "n": [[[]]]}, "big": 123456789012345678901234567890}')
    put(root, "json", "nested.json", b"[" * 40 + b"1" + b"]" * 40)
    put(root, "json", "utf8.json", '{"k\u00e9y": "v\u20acl"}'.encode())


# ---- IDX ----
def idx(code, shape, payload):
    return b"\x00\x00" + bytes([code, len(shape)]) + b"".join(struct.pack(">I", s) for s in shape) + payload


def idx_seeds(root):
    # The fuzzer gzips inputs of odd length itself (fuzz/reader_fuzz_one.h):
    # even and odd sizes here, and real .gz files.
    labels = idx(0x08, (10,), bytes(range(10)))
    put(root, "idx", "labels.idx", labels)
    put(root, "idx", "labels_odd.idx", idx(0x08, (11,), bytes(range(11))))
    put(root, "idx", "images.idx", idx(0x08, (2, 4, 4), bytes(range(32))))
    put(root, "idx", "i8.idx", idx(0x09, (3,), b"\xff\x00\x01"))
    put(root, "idx", "i16.idx", idx(0x0B, (2,), struct.pack(">2h", -1, 300)))
    put(root, "idx", "i32.idx", idx(0x0C, (2, 1), struct.pack(">2i", -7, 7)))
    put(root, "idx", "f32.idx", idx(0x0D, (3,), struct.pack(">3f", 0.5, -1, 2)))
    put(root, "idx", "f64.idx", idx(0x0E, (1,), struct.pack(">d", 3.25)))
    put(root, "idx", "labels.idx.gz", gzip_bytes(labels))
    put(root, "idx", "images.idx.gz", gzip_bytes(idx(0x08, (2, 4, 4), bytes(range(32)))))


def gzip_bytes(data):
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


# ---- CSV ----
def csv_seeds(root):
    # The fuzzer picks a CSV's options from its length (reader_fuzz_one.h):
    # a multiple of 36 is ',', a header found by itself, f32.
    h = b"x,y,label\n1,2.5,0\n-3,4e2,1\n"
    put(root, "csv", "header.csv", h + b"\n" * (-len(h) % 36))
    put(root, "csv", "plain.csv", b"1,2,3\n4,5,6\n\n7,8,9\n")
    put(root, "csv", "quoted.csv", b'"a","b"\n" 1 ", "2"\r\n3 ,4\n')
    put(root, "csv", "special.csv", b"nan,inf,-inf\n1e-300,0x10,+5\n")
    put(root, "csv", "semicolon.csv", b"1;2\n3;4\n")
    put(root, "csv", "tabs.csv", b"1\t2\t3\n")
    put(root, "csv", "one.csv", b"42")


# ---- images ----
def png(w, h, ctype, depth, rows):
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def bmp(w, h, rows):
    stride = (w * 3 + 3) & ~3
    px = b"".join(r + b"\x00" * (stride - len(r)) for r in reversed(rows))
    return (b"BM" + struct.pack("<IHHI", 54 + len(px), 0, 0, 54)
            + struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(px), 2835, 2835, 0, 0) + px)


def image_seeds(root):
    put(root, "image", "rgb.png", png(3, 2, 2, 8, [bytes(range(9)), bytes(range(9, 18))]))
    put(root, "image", "grey.png", png(2, 2, 0, 8, [b"\x00\xff", b"\x80\x40"]))
    put(root, "image", "rgba.png", png(1, 1, 6, 8, [b"\x01\x02\x03\x04"]))
    put(root, "image", "grey16.png", png(1, 2, 0, 16, [b"\x01\x02", b"\xff\xfe"]))
    put(root, "image", "pal.png", png(2, 1, 0, 1, [b"\x80"]))
    put(root, "image", "rgb.bmp", bmp(2, 2, [b"\x00\x00\xff\x00\xff\x00", b"\xff\x00\x00\xff\xff\xff"]))
    put(root, "image", "rgb.ppm", b"P6\n2 1\n255\n\x01\x02\x03\x04\x05\x06")
    put(root, "image", "grey.pgm", b"P5 2 2 255\n\x00\x10\x20\x30")
    # TGA, uncompressed true colour, 1 x 1
    put(root, "image", "one.tga", struct.pack("<BBBHHBHHHHBB", 0, 0, 2, 0, 0, 0, 0, 0, 1, 1, 24, 0) + b"\x01\x02\x03")
    jpeg_seeds(root)


JPEG_C = r"""
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
int main(int argc, char **argv) {
    unsigned char px[8 * 8 * 3];
    for (int i = 0; i < (int)sizeof px; i++) px[i] = (unsigned char)(i * 7);
    return !(stbi_write_jpg(argv[1], 8, 8, 3, px, 90) && stbi_write_jpg(argv[2], 4, 2, 1, px, 50));
}
"""


def jpeg_seeds(root):
    d = os.path.join(root, "image")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "j.c"), os.path.join(tmp, "j")
        with open(src, "w") as f:
            f.write(JPEG_C)
        try:
            subprocess.run(["cc", "-I/usr/include/stb", src, "-o", exe, "-lm"], check=True)
            subprocess.run([exe, os.path.join(d, "rgb.jpg"), os.path.join(d, "grey.jpg")], check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"no JPEG seeds: {e}", file=sys.stderr)


# ---- BPE tokenizer files (docs/text.md, "File format") ----
def bpe_seeds(root):
    put(root, "bpe", "tiny.bpe", b'chutney-bpe 1\npretokenizer chutney-1\nvocab_size 260\nmerges 3\n'
        b'104 101\t# "he"\n108 108\t# "ll"\n256 257\t# "hell"\nspecials 1\n"<|endoftext|>"\nend\n')
    put(root, "bpe", "nospecial.bpe", b"chutney-bpe 1\npretokenizer chutney-1\nvocab_size 257\nmerges 1\n"
        b"32 116\nspecials 0\nend\n")
    put(root, "bpe", "escapes.bpe", b'chutney-bpe 1\npretokenizer chutney-1\nvocab_size 258\nmerges 0\n'
        b'specials 2\n"<\\x01\\"\\\\>"\n"<pad>"\nend\n')


# ---- WAV ----
def wav(tag, channels, rate, bits, payload, data_len=None, extra=b""):
    block = channels * bits // 8
    fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * block, block, bits) + extra
    n = len(payload) if data_len is None else data_len
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", n) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def wav_seeds(root):
    put(root, "wav", "pcm16.wav", wav(1, 1, 8000, 16, struct.pack("<6h", 0, 1, -1, 32767, -32768, 100)))
    put(root, "wav", "stereo_f32.wav", wav(3, 2, 22050, 32, struct.pack("<4f", 0.5, -0.5, 0.25, 1)))
    put(root, "wav", "u8.wav", wav(1, 1, 11025, 8, bytes([0, 128, 255, 64])))
    put(root, "wav", "pcm24.wav", wav(1, 1, 16000, 24, bytes(range(12))))
    put(root, "wav", "mulaw.wav", wav(7, 1, 8000, 8, bytes(range(0, 256, 16))))
    put(root, "wav", "streamed.wav", wav(1, 1, 8000, 16, struct.pack("<4h", 1, 2, 3, 4), 0xFFFFFFFF))
    put(root, "wav", "long.wav", wav(1, 1, 8000, 16, struct.pack("<400h", *([1000, -1000] * 200))))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    npy_seeds(root)
    st_seeds(root)
    idx_seeds(root)
    csv_seeds(root)
    image_seeds(root)
    bpe_seeds(root)
    wav_seeds(root)


if __name__ == "__main__":
    main()
