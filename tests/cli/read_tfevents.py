#!/usr/bin/env python3
"""Reads a TensorBoard event file without TensorBoard or the protobuf
package, to check what `chutney train --tensorboard` wrote against its --log
file: the TFRecord framing and both masked CRC-32Cs of every record (computed
here bit by bit, apart from the C table), the protobuf wire format of each
Event (field numbers of TensorFlow's event.proto and summary.proto), the
file_version event first, and scalars equal to the log's figures.

    read_tfevents.py EVENTS_FILE LOG.jsonl
Prints one "ok:" line, or "FAIL: ..." lines and exits 1."""
import json
import math
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the standard check value


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def fields(buf):
    """(field number, wire type, value) of one message; value is an int,
    raw 8 or 4 bytes, or the bytes of a length-delimited field."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        if i > len(buf):
            raise ValueError("field %d runs past its message" % num)
        yield num, wt, v


def event(buf):
    ev = {"wall_time": 0.0, "step": 0, "file_version": None, "values": {}}
    for num, wt, v in fields(buf):
        if num == 1 and wt == 1:
            ev["wall_time"] = struct.unpack("<d", v)[0]
        elif num == 2 and wt == 0:
            ev["step"] = v - (1 << 64) if v >= 1 << 63 else v
        elif num == 3 and wt == 2:
            ev["file_version"] = v.decode()
        elif num == 5 and wt == 2:  # Summary
            for snum, swt, sv in fields(v):
                if snum != 1 or swt != 2:
                    raise ValueError("Summary field %d" % snum)
                tag, simple = None, None
                for vnum, vwt, vv in fields(sv):  # Summary.Value
                    if vnum == 1 and vwt == 2:
                        tag = vv.decode()
                    elif vnum == 2 and vwt == 5:
                        simple = struct.unpack("<f", vv)[0]
                if tag is None or simple is None:
                    raise ValueError("a Summary.Value without tag or simple_value")
                ev["values"][tag] = simple
        else:
            raise ValueError("Event field %d (wire type %d)" % (num, wt))
    return ev


def records(data):
    i = 0
    while i < len(data):
        if i + 12 > len(data):
            raise ValueError("a truncated record header at byte %d" % i)
        head = data[i:i + 8]
        (n,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", data[i + 8:i + 12])
        if hcrc != masked(crc32c(head)):
            raise ValueError("bad length CRC at byte %d" % i)
        body = data[i + 12:i + 12 + n]
        if len(body) != n or i + 16 + n > len(data):
            raise ValueError("a truncated record at byte %d" % i)
        (dcrc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        if dcrc != masked(crc32c(body)):
            raise ValueError("bad data CRC at byte %d" % i)
        yield body
        i += 16 + n


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def main():
    path, log = sys.argv[1], sys.argv[2]
    fails = []
    with open(path, "rb") as f:
        data = f.read()
    try:
        evs = [event(r) for r in records(data)]
    except (ValueError, IndexError, UnicodeDecodeError) as e:
        print("FAIL: %s: %s" % (path, e))
        return 1
    if not evs or evs[0]["file_version"] != "brain.Event:2":
        fails.append("the first event is not file_version brain.Event:2")
    lines = [json.loads(l) for l in open(log)]
    steps = [l for l in lines if l["event"] == "step"]
    epochs = [l for l in lines if l["event"] == "epoch"]
    tb_loss = {e["step"]: e["values"]["train/loss"] for e in evs if "train/loss" in e["values"]}
    tb_norm = {e["step"]: e["values"]["train/grad_norm"] for e in evs if "train/grad_norm" in e["values"]}
    if sorted(tb_loss) != [s["step"] for s in steps]:
        fails.append("train/loss at steps %s, the log has %s" % (sorted(tb_loss), [s["step"] for s in steps]))
    for s in steps:
        if s["step"] in tb_loss and tb_loss[s["step"]] != f32(s["loss"]):
            fails.append("step %d: train/loss %r, the log %r" % (s["step"], tb_loss[s["step"]], s["loss"]))
        if s["step"] in tb_norm and tb_norm[s["step"]] != f32(s["grad_norm"]):
            fails.append("step %d: train/grad_norm %r, the log %r" % (s["step"], tb_norm[s["step"]], s["grad_norm"]))
    for ep in epochs:
        at = [e for e in evs if e["step"] == ep["step"] and "epoch/train_loss" in e["values"]]
        if len(at) != 1:
            fails.append("epoch %d: %d epoch events at step %d" % (ep["epoch"], len(at), ep["step"]))
            continue
        v = at[0]["values"]
        for tag, key in (("epoch/train_loss", "train_loss"), ("test/accuracy", "test_accuracy"),
                         ("val/loss", "val_loss")):
            if key in ep and v.get(tag) != f32(ep[key]):
                fails.append("epoch %d: %s %r, the log's %s %r" % (ep["epoch"], tag, v.get(tag), key, ep[key]))
    times = [e["wall_time"] for e in evs]
    if times != sorted(times) or not all(1.5e9 < t < 4e9 for t in times):
        fails.append("wall times out of order or not Unix times")
    for f in fails:
        print("FAIL: " + f)
    if fails:
        return 1
    print("ok: %s: %d records, CRCs good, %d step scalars and %d epochs as in the log" %
          (path.rsplit("/", 1)[-1], len(evs), len(tb_loss), len(epochs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
