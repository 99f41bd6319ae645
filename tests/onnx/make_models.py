"""Small ONNX models for tests/test_onnx.c, written during the test run with
Debian's python3-onnx (onnx.helper): external data (good, escaping the
directory, too short), an unsupported op and attribute, a dynamic batch with
the Shape/Gather/Concat/Reshape chain exporters emit, and a shape given as a
graph input. Usage: make_models.py OUT_DIR. Without python3-onnx it writes
OUT_DIR/SKIP and exits 0 (the C test then skips)."""
import os
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    open(os.path.join(out, "SKIP"), "w").write("python3-onnx is not installed\n")
    sys.exit(0)

# A SKIP left by a run before python3-onnx was installed would skip the test
# for good in this build folder.
if os.path.exists(os.path.join(out, "SKIP")):
    os.remove(os.path.join(out, "SKIP"))

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def save(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    with open(os.path.join(out, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


def external(name, location, length=None):
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "8"), ("length", str(length or 24))):
        e = w.external_data.add()
        e.key, e.value = k, v
    save(name, [helper.make_node("Add", ["x", "w"], ["y"])],
         [helper.make_tensor_value_info("x", F, [2, 3])],
         [helper.make_tensor_value_info("y", F, [2, 3])], [w])


# 8 bytes of padding, then w's 24 bytes.
with open(os.path.join(out, "weights.bin"), "wb") as f:
    f.write(b"\0" * 8 + np.arange(6, dtype=np.float32).tobytes())
external("ext_ok", "weights.bin")
external("ext_escape", "../weights.bin")
external("ext_short", "weights.bin", length=48)

x23 = [helper.make_tensor_value_info("x", F, [2, 3])]
y23 = [helper.make_tensor_value_info("y", F, [2, 3])]
save("unsup_op", [helper.make_node("NonZero", ["x"], ["y"])], x23, y23)
save("unsup_attr", [helper.make_node("Relu", ["x"], ["y"], foo=1)], x23, y23)

# y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [3, 1])) * 2, with
# x [N, 3]: folds to one reshape once N is known.
two = numpy_helper.from_array(np.array(2, dtype=np.float32), "two")
tail = numpy_helper.from_array(np.array([3, 1], dtype=np.int64), "tail")
zero = numpy_helper.from_array(np.array(0, dtype=np.int64), "zero")
axes0 = numpy_helper.from_array(np.array([0], dtype=np.int64), "axes0")
save("dyn", [
    helper.make_node("Shape", ["x"], ["s"]),
    helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
    helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
    helper.make_node("Concat", ["n1", "tail"], ["shp"], axis=0),
    helper.make_node("Reshape", ["x", "shp"], ["r"]),
    helper.make_node("Mul", ["r", "two"], ["y"]),
], [helper.make_tensor_value_info("x", F, ["N", 3])],
    [helper.make_tensor_value_info("y", F, ["N", 3, 1])], [two, tail, zero, axes0])

save("shape_input", [helper.make_node("Reshape", ["x", "shape"], ["y"])],
     [helper.make_tensor_value_info("x", F, [2, 3]), helper.make_tensor_value_info("shape", I64, [2])],
     [helper.make_tensor_value_info("y", F, [3, 2])])
