"""torch.utils.tensorboard: SummaryWriter, writing TensorBoard event files.

Pure Python: the few protobuf messages TensorBoard reads (Event, Summary,
HistogramProto, TensorProto, the text and hparams plugins' data) are encoded
by hand, the records framed as TFRecords with masked CRC-32C, and images
encoded as PNG with zlib. Neither tensorboard, tensorflow, protobuf nor PIL
is needed; NumPy is used when present (for `bins` strings like 'auto' and
for numpy.histogram's exact arithmetic) and is otherwise optional.

Field numbers are those of TensorFlow's event.proto, summary.proto,
tensor.proto, tensor_shape.proto and TensorBoard's hparams api.proto /
plugin_data.proto.
"""

import atexit
import bisect
import itertools
import math
import numbers
import os
import socket
import struct
import threading
import time
import weakref
import zlib
from array import array
from datetime import datetime

try:
    import numpy as _np
except ImportError:  # NumPy is optional for chutney
    _np = None

__all__ = ["SummaryWriter"]


# --------------------------------------------------------------------------
# CRC-32C (Castagnoli), reflected polynomial 0x82F63B78, as TFRecord uses.

def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def _crc32c(data):
    crc = 0xFFFFFFFF
    t = _CRC_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc(data):
    # TFRecord stores a rotated-and-offset CRC so that a CRC of data which
    # itself contains CRCs does not degenerate.
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _record(data):
    head = struct.pack("<Q", len(data))
    return b"".join((head, struct.pack("<I", _masked_crc(head)), data,
                     struct.pack("<I", _masked_crc(data))))


# --------------------------------------------------------------------------
# Protobuf wire format: just the pieces these messages need. Messages are
# built as bytes, fields in field-number order as protobuf itself emits them.

def _varint(n):
    if n < 0:  # int64/int32/enums: ten-byte two's complement
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(num, wire):
    return _varint((num << 3) | wire)


def _f_varint(num, v):
    return _key(num, 0) + _varint(int(v))


def _f_double(num, v):
    return _key(num, 1) + struct.pack("<d", v)


def _f32_bytes(v):
    try:
        return struct.pack("<f", v)
    except OverflowError:  # rounds past float32's range: IEEE gives inf
        return struct.pack("<f", math.copysign(math.inf, v))


def _f_float(num, v):
    return _key(num, 5) + _f32_bytes(v)


def _f_bytes(num, b):
    if isinstance(b, str):
        b = b.encode("utf-8")
    return _key(num, 2) + _varint(len(b)) + b


def _f_packed_doubles(num, values):
    return _f_bytes(num, struct.pack("<%dd" % len(values), *values)) if values else b""


def _opt_double(num, v):
    # proto3 leaves scalar fields at their default (0) off the wire
    return _f_double(num, v) if v != 0 else b""


# Event (event.proto)
_EV_WALL_TIME, _EV_STEP, _EV_FILE_VERSION, _EV_SUMMARY, _EV_SESSION_LOG = 1, 2, 3, 5, 7
_SESSION_LOG_START = 1
# Summary.Value (summary.proto)
_V_TAG, _V_SIMPLE, _V_IMAGE, _V_HISTO, _V_TENSOR, _V_METADATA = 1, 2, 4, 5, 8, 9
# TensorProto (tensor.proto); DataType (types.proto)
_T_DTYPE, _T_SHAPE, _T_FLOAT_VAL, _T_DOUBLE_VAL, _T_STRING_VAL = 1, 2, 5, 6, 8
_DT_FLOAT, _DT_DOUBLE, _DT_STRING = 1, 2, 7


def _event(wall_time, step=None, what=b""):
    out = _opt_double(_EV_WALL_TIME, wall_time)
    if step is not None and int(step) != 0:
        out += _f_varint(_EV_STEP, int(step))
    return out + what


def _plugin_metadata(name, content=b""):
    plugin = _f_bytes(1, name) + (_f_bytes(2, content) if content else b"")
    return _f_bytes(1, plugin)  # SummaryMetadata.plugin_data


def _summary_value(tag, payload=b"", metadata=None):
    out = _f_bytes(_V_TAG, tag) + payload
    if metadata is not None:
        out += _f_bytes(_V_METADATA, metadata)
    return out


def _summary(*values):
    return b"".join(_f_bytes(1, v) for v in values)  # Summary.value


# --------------------------------------------------------------------------
# Reading tensors, NumPy arrays, numbers and nested lists without NumPy.

def _flat(x):
    """(flat list of Python numbers, shape tuple, is_uint8)."""
    import chutney
    if isinstance(x, _Pixels):
        return x.flat, x.shape, True
    if isinstance(x, chutney.Tensor):
        t = x.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        return t.reshape(-1).tolist(), tuple(t.shape), t.dtype == chutney.uint8
    if hasattr(x, "dtype") and hasattr(x, "shape") and hasattr(x, "tolist"):  # NumPy
        shape = tuple(x.shape)
        flat = x.reshape(-1).tolist() if shape else [x.item()]
        return flat, shape, str(x.dtype) == "uint8"
    if isinstance(x, (list, tuple)):
        shape, level = [], x
        while isinstance(level, (list, tuple)):
            shape.append(len(level))
            level = level[0] if level else None
        flat = list(x)
        for _ in range(len(shape) - 1):
            flat = [v for row in flat for v in row]
        if len(flat) != math.prod(shape):
            raise ValueError("a ragged nested list")
        return flat, tuple(shape), False
    if _np is not None and hasattr(x, "__array__"):
        return _flat(_np.asarray(x))
    return [x], (), False


def _scalar(value):
    import chutney
    if isinstance(value, str):
        raise TypeError("add_scalar: scalar_value must be a number or a one-element tensor, not a string")
    if isinstance(value, chutney.Tensor) or hasattr(value, "item") and hasattr(value, "size"):
        n = value.numel() if isinstance(value, chutney.Tensor) else value.size
        if n != 1:
            raise ValueError("scalar_value should hold one element, it has %d" % n)
        return float(value.item())
    return float(value)


def _step(global_step):
    return None if global_step is None else int(global_step)


# --------------------------------------------------------------------------
# Histograms

def _tensorflow_bins():
    # TensorFlow's default buckets: exponential steps of 10% from 1e-12 to
    # 1e20 on either side of zero, zero itself a limit.
    v, pos = 1e-12, []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return [-p for p in reversed(pos)] + [0] + pos


def _counts_for_edges(values, edges):
    # numpy.histogram's rule: [e_i, e_i+1) and the last bin closed; values
    # outside [e_0, e_n] (and NaN) are not counted.
    n = len(edges) - 1
    counts = [0] * n
    lo, hi = edges[0], edges[-1]
    right = bisect.bisect_right
    for v in values:
        if lo <= v <= hi:
            i = right(edges, v) - 1
            counts[i if i < n else n - 1] += 1
    return counts


def _histogram_counts(values, bins):
    """(counts, edges) as numpy.histogram(values, bins) gives them."""
    if _np is not None:
        counts, edges = _np.histogram(_np.asarray(values, dtype=_np.float64), bins=bins)
        return counts.tolist(), edges.tolist()
    if isinstance(bins, str):
        raise RuntimeError("add_histogram: bins=%r needs NumPy; without it pass 'tensorflow', "
                           "a number of bins or a sequence of bin edges" % bins)
    if isinstance(bins, int) and not isinstance(bins, bool):
        if bins < 1:
            raise ValueError("`bins` must be positive, when an integer")
        first, last = min(values), max(values)
        if not (math.isfinite(first) and math.isfinite(last)):
            raise ValueError("autodetected range of [%r, %r] is not finite" % (first, last))
        if first == last:
            first, last = first - 0.5, last + 0.5
        step = (last - first) / bins
        edges = [i * step + first for i in range(bins)] + [last]  # numpy.linspace's arithmetic
    else:
        edges = [float(e) for e in bins]
        if len(edges) < 2 or any(b < a for a, b in zip(edges, edges[1:])):
            raise ValueError("bins must increase monotonically")
    return _counts_for_edges(values, edges), edges


def _histogram_proto(values, bins, max_bins=None):
    if not values:
        raise ValueError("add_histogram: the input has no element")
    values = [float(v) for v in values]
    counts, limits = _histogram_counts(values, bins)
    n = len(counts)
    if max_bins is not None and n > max_bins:
        # Merge runs of `group` adjacent bins (padding the tail with empty
        # ones), keeping the outer edges.
        group = n // max_bins
        if n % group:
            counts = counts + [0] * (group - n % group)
        counts = [sum(counts[i:i + group]) for i in range(0, len(counts), group)]
        limits = limits[:-1:group] + [limits[-1]]
    nonzero = [i for i, c in enumerate(counts) if c > 0]
    if not nonzero:
        raise ValueError("add_histogram: no value falls inside the bins (all NaN, or outside the edges)")
    first, last = nonzero[0], nonzero[-1]
    # TensorBoard keeps only each bucket's right edge; an empty bucket on the
    # left carries the support's left edge.
    if first > 0:
        bucket = counts[first - 1:last + 1]
    else:
        bucket = [0] + counts[:last + 1]
    bucket_limit = limits[first:last + 2]
    if _np is not None:
        a = _np.asarray(values, dtype=_np.float64)
        vmin, vmax, vsum, vsq = float(a.min()), float(a.max()), float(a.sum()), float(a.dot(a))
    else:
        vmin, vmax = min(values), max(values)
        vsum, vsq = math.fsum(values), math.fsum(v * v for v in values)
    return _histogram_message(vmin, vmax, len(values), vsum, vsq, bucket_limit, bucket)


def _histogram_message(vmin, vmax, num, vsum, sum_squares, bucket_limit, bucket):
    return b"".join((_opt_double(1, vmin), _opt_double(2, vmax), _opt_double(3, float(num)),
                     _opt_double(4, vsum), _opt_double(5, sum_squares),
                     _f_packed_doubles(6, [float(v) for v in bucket_limit]),
                     _f_packed_doubles(7, [float(v) for v in bucket])))


# --------------------------------------------------------------------------
# Images

def _to_uint8(flat, is_uint8):
    if is_uint8:
        return bytes(flat)
    # PyTorch scales in float32 and truncates: (x * 255).clip(0, 255) as uint8.
    scaled = array("f", array("f", flat))
    scaled = array("f", [v * 255.0 for v in scaled])
    return bytes(0 if v != v else int(255.0 if v > 255.0 else 0.0 if v < 0.0 else v) for v in scaled)


def _permute(data, shape, order):
    """`data` (row-major, `shape`) with its axes in `order`."""
    strides, s = [], 1
    for d in reversed(shape):
        strides.append(s)
        s *= d
    strides.reverse()
    offsets = [0]
    for a in order:
        st = strides[a]
        offsets = [o + i * st for o in offsets for i in range(shape[a])]
    return bytes(data[o] for o in offsets) if isinstance(data, bytes) else [data[o] for o in offsets]


def _gray_to_rgb(data):
    out = bytearray(len(data) * 3)
    out[0::3] = data
    out[1::3] = data
    out[2::3] = data
    return bytes(out)


def _hwc_image(img, dataformats):
    """(HWC uint8 bytes, H, W, C) laid out as PyTorch's image summary does:
    grey replicated to RGB, a batch tiled 8 to a row."""
    fmt = dataformats.upper()
    flat, shape, is_uint8 = _flat(img)
    if len(set(fmt)) != len(fmt) or not set(fmt) <= set("NCHW") or len(fmt) not in (2, 3, 4):
        raise ValueError("dataformats must be HW, a 3-letter order of CHW or a 4-letter order "
                         "of NCHW, not %r" % dataformats)
    if len(shape) != len(fmt):
        raise ValueError("an image of shape %s does not match dataformats %r" % (shape, dataformats))
    if 0 in shape:
        raise ValueError("an image of shape %s has no pixels" % (shape,))
    data = _to_uint8(flat, is_uint8)
    if len(fmt) == 2:
        data = _permute(data, shape, [fmt.index(c) for c in "HW"])
        return _gray_to_rgb(data), shape[fmt.index("H")], shape[fmt.index("W")], 3
    if len(fmt) == 3:
        fmt = "N" + fmt
        shape = (1,) + shape
    n, c, h, w = (shape[fmt.index(k)] for k in "NCHW")
    if c not in (1, 3, 4):
        raise ValueError("images need 1, 3 or 4 channels, not %d" % c)
    data = _permute(data, shape, [fmt.index(k) for k in "NHWC"])
    if c == 1:
        data, c = _gray_to_rgb(data), 3
    if n == 1:
        return data, h, w, c
    ncols = min(n, 8)
    nrows = -(-n // ncols)
    row_bytes, img_bytes = w * c, h * w * c
    canvas = bytearray(nrows * h * ncols * row_bytes)
    for i in range(n):
        y, x = divmod(i, ncols)
        for r in range(h):
            dst = ((y * h + r) * ncols + x) * row_bytes
            src = i * img_bytes + r * row_bytes
            canvas[dst:dst + row_bytes] = data[src:src + row_bytes]
    return bytes(canvas), nrows * h, ncols * w, c


def _png(data, height, width, channels):
    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body +
                struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))
    color_type = {3: 2, 4: 6}[channels]  # RGB, RGBA
    stride = width * channels
    # every scanline with filter type 0 (none); zlib does the compressing
    raw = b"".join(b"\x00" + data[r * stride:(r + 1) * stride] for r in range(height))
    return b"".join((b"\x89PNG\r\n\x1a\n",
                     chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)),
                     chunk(b"IDAT", zlib.compress(raw, 6)),
                     chunk(b"IEND", b"")))


def _image_summary(tag, hwc):
    data, h, w, c = hwc
    image = b"".join((_f_varint(1, h), _f_varint(2, w), _f_varint(3, c), _f_bytes(4, _png(data, h, w, c))))
    return _summary(_summary_value(tag, _f_bytes(_V_IMAGE, image)))


def _figure_hwc(figure, close):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError("add_figure needs matplotlib (pip install matplotlib); "
                          "or render the figure yourself and call add_image") from e
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    w, h = canvas.get_width_height()
    rgba = bytes(canvas.buffer_rgba())
    if close:
        plt.close(figure)
    rgb = bytearray(w * h * 3)
    for k in range(3):
        rgb[k::3] = rgba[k::4]
    return bytes(rgb), h, w


# --------------------------------------------------------------------------
# hparams plugin (tensorboard/plugins/hparams: api.proto, plugin_data.proto)

_HP_FLOAT64, _HP_STRING, _HP_BOOL = 3, 1, 2   # DataType
_HP_STATUS_SUCCESS = 1


def _pb_value(v):
    """google.protobuf.Value: number_value 2, string_value 3, bool_value 4."""
    if isinstance(v, bool):
        return _key(4, 0) + _varint(int(v))
    if isinstance(v, str):
        return _f_bytes(3, v)
    return _f_double(2, float(v))


def _hparams_summaries(hparam_dict, metric_dict, domains):
    import chutney
    if domains is None:
        domains = {}
    if not isinstance(domains, dict):
        raise TypeError("hparam_domain_discrete should be a dictionary")
    for k, v in domains.items():
        if (k not in hparam_dict or not isinstance(v, list)
                or not all(isinstance(d, type(hparam_dict[k])) for d in v)):
            raise TypeError("hparam_domain_discrete[%r] should be a list of the type of hparam_dict[%r]" % (k, k))
    infos, entries = [], []
    for k, v in hparam_dict.items():
        if v is None:
            continue
        if isinstance(v, bool):
            kind = _HP_BOOL
        elif isinstance(v, str):
            kind = _HP_STRING
        elif isinstance(v, (int, float)):
            kind = _HP_FLOAT64
        elif isinstance(v, chutney.Tensor) or hasattr(v, "item") and hasattr(v, "size"):
            v, kind = _scalar(v), _HP_FLOAT64
        else:
            raise ValueError("hparam %r: a value should be an int, float, str, bool or one-element tensor, "
                             "not %s" % (k, type(v).__name__))
        entries.append(_f_bytes(1, _f_bytes(1, k) + _f_bytes(2, _pb_value(v))))
        info = _f_bytes(1, k) + _f_varint(4, kind)
        if k in domains:
            info += _f_bytes(5, b"".join(_f_bytes(1, _pb_value(d)) for d in domains[k]))
        infos.append(_f_bytes(4, info))
    metrics = [_f_bytes(5, _f_bytes(1, _f_bytes(2, k))) for k in metric_dict]

    def plugin(field, message):  # HParamsPluginData, version 0 (left off the wire)
        return _plugin_metadata("hparams", _f_bytes(field, message))
    experiment = _summary(_summary_value("_hparams_/experiment", metadata=plugin(2, b"".join(infos + metrics))))
    start = _summary(_summary_value("_hparams_/session_start_info", metadata=plugin(3, b"".join(entries))))
    end = _summary(_summary_value("_hparams_/session_end_info",
                                  metadata=plugin(4, _f_varint(1, _HP_STATUS_SUCCESS))))
    return experiment, start, end


# --------------------------------------------------------------------------
# Event files

_file_ids = itertools.count()
_open_writers = weakref.WeakSet()


@atexit.register
def _flush_at_exit():
    # Buffered events of writers never closed still reach disk.
    for w in list(_open_writers):
        try:
            w.flush()
        except Exception:
            pass


def _flush_every(ref, stop, secs):
    while not stop.wait(secs):
        w = ref()
        if w is None:
            return
        w.flush()
        del w


class _EventFileWriter:
    """One events.out.tfevents file: records held in memory until
    `max_queue` of them wait, `flush_secs` pass, or flush()/close()."""

    def __init__(self, logdir, max_queue=10, flush_secs=120, filename_suffix=""):
        os.makedirs(logdir, exist_ok=True)
        name = "events.out.tfevents.%010d.%s.%s.%s%s" % (
            time.time(), socket.gethostname(), os.getpid(), next(_file_ids), filename_suffix)
        self._path = os.path.join(logdir, name)
        self._file = open(self._path, "wb")
        self._lock = threading.Lock()
        self._pending = []
        self._max_queue = max_queue
        self._flush_secs = flush_secs
        self._last_flush = time.monotonic()
        self._stop = threading.Event()
        self._thread = None
        self.add_event(_event(time.time(), what=_f_bytes(_EV_FILE_VERSION, "brain.Event:2")))
        self.flush()
        if flush_secs is not None and flush_secs > 0:
            self._thread = threading.Thread(target=_flush_every, args=(weakref.ref(self), self._stop, flush_secs),
                                            name="tensorboard-flush", daemon=True)
            self._thread.start()
        _open_writers.add(self)

    @property
    def path(self):
        return self._path

    def add_event(self, event):
        with self._lock:
            if self._file is None:
                raise RuntimeError("this event file writer is closed")
            self._pending.append(_record(event))
            due = (len(self._pending) >= (self._max_queue or 1)
                   or self._flush_secs is not None
                   and time.monotonic() - self._last_flush >= self._flush_secs)
        if due:
            self.flush()

    def flush(self):
        with self._lock:
            if self._file is None:
                return
            if self._pending:
                self._file.write(b"".join(self._pending))
                self._pending.clear()
            self._file.flush()
            self._last_flush = time.monotonic()

    def close(self):
        self.flush()
        self._stop.set()
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        _open_writers.discard(self)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class FileWriter:
    """One run directory's event file (PyTorch's FileWriter)."""

    def __init__(self, log_dir, max_queue=10, flush_secs=120, filename_suffix=""):
        self._log_dir = str(log_dir)
        self.event_writer = _EventFileWriter(self._log_dir, max_queue, flush_secs, filename_suffix)

    def get_logdir(self):
        return self._log_dir

    def add_event(self, event, step=None, walltime=None):
        """`event`: the encoded fields of an Event other than wall_time and step."""
        self.event_writer.add_event(_event(time.time() if walltime is None else float(walltime), step, event))

    def add_summary(self, summary, global_step=None, walltime=None):
        self.add_event(_f_bytes(_EV_SUMMARY, summary), global_step, walltime)

    def flush(self):
        self.event_writer.flush()

    def close(self):
        self.event_writer.close()


# --------------------------------------------------------------------------

class SummaryWriter:
    """Writes scalars, histograms, images, text and hparams to event files
    in `log_dir` for TensorBoard, as torch.utils.tensorboard.SummaryWriter.

    `purge_step`: the file starts with a SessionLog START at that step, which
    tells TensorBoard to drop the run's earlier events at steps >= it (after
    a crash and restart from a checkpoint); add_scalars' per-tag runs get the
    same marker."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        if not log_dir:
            log_dir = os.path.join("runs", datetime.now().strftime("%b%d_%H-%M-%S") + "_" +
                                   socket.gethostname() + comment)
        self.log_dir = os.fspath(log_dir)
        self.purge_step = purge_step
        self._purge_step = self._sub_purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.default_bins = _tensorflow_bins()
        self.file_writer = self.all_writers = None
        self._get_file_writer()

    def _new_file_writer(self, logdir, purge_step):
        fw = FileWriter(logdir, self.max_queue, self.flush_secs, self.filename_suffix)
        if purge_step is not None:
            fw.add_event(_f_bytes(_EV_FILE_VERSION, "brain.Event:2"), purge_step)
            fw.add_event(_f_bytes(_EV_SESSION_LOG, _f_varint(1, _SESSION_LOG_START)), purge_step)
        return fw

    def _get_file_writer(self):
        if self.file_writer is None or self.all_writers is None:
            self.file_writer = self._new_file_writer(self.log_dir, self._purge_step)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            # like PyTorch, only the first file of the main run carries the
            # marker (a writer reopened after close() must not purge again)
            self.purge_step = self._purge_step = None
        return self.file_writer

    def get_logdir(self):
        return self.log_dir

    # -- scalars --------------------------------------------------------

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        v = _scalar(scalar_value)
        if new_style:
            # a rank-0 tensor for the scalars plugin (float32, or float64)
            if double_precision:
                tensor = _f_varint(_T_DTYPE, _DT_DOUBLE) + _f_bytes(_T_DOUBLE_VAL, struct.pack("<d", v))
            else:
                tensor = _f_varint(_T_DTYPE, _DT_FLOAT) + _f_bytes(_T_FLOAT_VAL, _f32_bytes(v))
            value = _summary_value(tag, _f_bytes(_V_TENSOR, tensor), _plugin_metadata("scalars"))
        else:
            value = _summary_value(tag, _f_float(_V_SIMPLE, v))
        self._get_file_writer().add_summary(_summary(value), _step(global_step), walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        walltime = time.time() if walltime is None else walltime
        base = self._get_file_writer().get_logdir()
        for tag, value in tag_scalar_dict.items():
            # each series is its own run so TensorBoard overlays them in one chart
            logdir = base + "/" + main_tag.replace("/", "_") + "_" + tag
            fw = self.all_writers.get(logdir)
            if fw is None:
                fw = self.all_writers[logdir] = self._new_file_writer(logdir, self._sub_purge_step)
            summary = _summary(_summary_value(main_tag, _f_float(_V_SIMPLE, _scalar(value))))
            fw.add_summary(summary, _step(global_step), walltime)

    # -- histograms -----------------------------------------------------

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None):
        if isinstance(bins, str) and bins == "tensorflow":
            bins = self.default_bins
        elif isinstance(bins, numbers.Integral) and not isinstance(bins, bool):
            bins = int(bins)
        elif not isinstance(bins, str):
            bins, _, _ = _flat(bins)
        flat, _, _ = _flat(values)
        histo = _histogram_proto(flat, bins, max_bins)
        self._get_file_writer().add_summary(_summary(_summary_value(tag, _f_bytes(_V_HISTO, histo))),
                                            _step(global_step), walltime)

    def add_histogram_raw(self, tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts,
                          global_step=None, walltime=None):
        if len(bucket_limits) != len(bucket_counts):
            raise ValueError("len(bucket_limits) != len(bucket_counts), see the document.")
        histo = _histogram_message(float(min), float(max), float(num), float(sum), float(sum_squares),
                                   list(bucket_limits), list(bucket_counts))
        self._get_file_writer().add_summary(_summary(_summary_value(tag, _f_bytes(_V_HISTO, histo))),
                                            _step(global_step), walltime)

    # -- images ---------------------------------------------------------

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        self._get_file_writer().add_summary(_image_summary(tag, _hwc_image(img_tensor, dataformats)),
                                            _step(global_step), walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats="NCHW"):
        self._get_file_writer().add_summary(_image_summary(tag, _hwc_image(img_tensor, dataformats)),
                                            _step(global_step), walltime)

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None):
        figures = figure if isinstance(figure, list) else [figure]
        images = [_figure_hwc(f, close) for f in figures]
        h, w = images[0][1], images[0][2]
        if any(im[1:] != (h, w) for im in images):
            raise ValueError("add_figure: the figures differ in size")
        stacked = b"".join(im[0] for im in images)
        flat = list(stacked)
        if isinstance(figure, list):
            hwc = _hwc_image(_Pixels(flat, (len(images), h, w, 3)), "NHWC")
        else:
            hwc = _hwc_image(_Pixels(flat, (h, w, 3)), "HWC")
        self._get_file_writer().add_summary(_image_summary(tag, hwc), _step(global_step), walltime)

    # -- text -----------------------------------------------------------

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        # the text plugin's form: a 1-element DT_STRING tensor under
        # "<tag>/text_summary"; TextPluginData version 0 serializes to nothing
        shape = _f_bytes(2, _f_varint(1, 1))  # TensorShapeProto.dim { size: 1 }
        tensor = (_f_varint(_T_DTYPE, _DT_STRING) + _f_bytes(_T_SHAPE, shape) +
                  _f_bytes(_T_STRING_VAL, text_string.encode("utf-8")))
        value = _summary_value(tag + "/text_summary", _f_bytes(_V_TENSOR, tensor), _plugin_metadata("text"))
        self._get_file_writer().add_summary(_summary(value), _step(global_step), walltime)

    # -- hparams --------------------------------------------------------

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None):
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        exp, ssi, sei = _hparams_summaries(hparam_dict, metric_dict, hparam_domain_discrete)
        if not run_name:
            run_name = str(time.time())
        with SummaryWriter(log_dir=os.path.join(self._get_file_writer().get_logdir(), run_name)) as w:
            for s in (exp, ssi, sei):
                w.file_writer.add_summary(s)
            for k, v in metric_dict.items():
                w.add_scalar(k, v)

    # -- not provided ---------------------------------------------------

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        raise NotImplementedError(
            "SummaryWriter.add_graph is not supported by chutney (it needs a traced GraphDef); "
            "export the model with chutney.onnx.export(model, args, 'model.onnx') and view it in Netron")

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None, tag="default",
                      metadata_header=None):
        raise NotImplementedError(
            "SummaryWriter.add_embedding is not supported by chutney (it writes the projector's "
            "checkpoint-free config and sprite files); save the vectors and labels as TSV files "
            "(e.g. numpy.savetxt(..., delimiter='\\t')) and load them at https://projector.tensorflow.org")

    # -- lifetime -------------------------------------------------------

    def flush(self):
        if self.all_writers is None:
            return
        for w in self.all_writers.values():
            w.flush()

    def close(self):
        if self.all_writers is None:
            return
        for w in self.all_writers.values():
            w.flush()
            w.close()
        self.file_writer = self.all_writers = None
        self._sub_purge_step = None  # runs reopened later must not purge again

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()


class _Pixels:
    """A flat uint8 list with a shape, for figures' pixels to go through
    the same image path as tensors."""

    def __init__(self, flat, shape):
        self.flat, self.shape = flat, shape
