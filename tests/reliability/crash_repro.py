"""Minimal reproductions of the crashes listed in .agents/CRASHES.md, built in code.

Each ``repro_*`` writes its files into a folder and returns (source, framework, options).
Run one as a script (``python crash_repro.py NAME``) to convert it in a fresh process and
print a JSON outcome: the memory bombs and hangs are run that way under RLIMIT_AS and a
timeout, so a regression cannot take the test machine down.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from rel_models import (  # noqa: E402
    CAFFE_PROTOTXT,
    _tf_const,
    caffe_layers,
    onnx_bytes,
    onnx_model,
    tf_graphdef,
)

from nhwc_onnx.frontends.base import FrontendOptions  # noqa: E402


def _onnx_net(nodes, inits, out: str = "y") -> bytes:
    """x: 2x3x7x5 float -> nodes -> ``out``."""
    graph = helper.make_graph(
        nodes, "repro", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 7, 5])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def _save(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


# -- 1, 2: ONNX strings that are not UTF-8 ------------------------------------------------------


def repro_onnx_node_name_not_utf8(folder: Path):
    """Node 'relu' renamed to the bytes r\\xffl\\xfe (a corrupt name; protobuf keeps bytes)."""
    data = onnx_bytes()
    assert data.count(b"\x1a\x04relu") == 1  # NodeProto.name = field 3
    return _save(folder, "model.onnx", data.replace(b"\x1a\x04relu", b"\x1a\x04r\xffl\xfe")), \
        "onnx", FrontendOptions()


def repro_onnx_op_type_not_utf8(folder: Path):
    """Two unknown ops, one whose op_type is not UTF-8: the error's summary sorts str and
    bytes together."""
    model = onnx_model()
    model.graph.node[2].op_type = "Foo"
    model.graph.node[6].op_type = "Zorp"
    data = model.SerializeToString().replace(b"\x22\x03Foo", b"\x22\x03F\xffo")
    return _save(folder, "model.onnx", data), "onnx", FrontendOptions()


# -- 3, 4: TensorFlow ------------------------------------------------------------------------------


def _tf_file(folder: Path, graph):
    return _save(folder, "model.pb", graph.SerializeToString()), "tf", FrontendOptions()


def repro_tf_conv_stride_zero(folder: Path):
    graph = tf_graphdef()
    next(n for n in graph.node if n.name == "conv").attr["strides"].list.i[2] = 0
    return _tf_file(folder, graph)


def repro_tf_pool_stride_zero(folder: Path):
    graph = tf_graphdef()
    next(n for n in graph.node if n.name == "pool").attr["strides"].list.i[1] = 0
    return _tf_file(folder, graph)


def repro_tf_fill_absurd_dims(folder: Path):
    """Fill(dims=[32768, 32768, 7, 5], 1.0) added to the conv output: 140 GiB if evaluated."""
    graph = tf_graphdef()
    _tf_const(graph, "fill/dims", np.array([1 << 15, 1 << 15, 7, 4], np.int32))
    _tf_const(graph, "fill/value", np.array(1.0, np.float32))
    fill = graph.node.add(name="fill", op="Fill")
    fill.input.extend(["fill/dims", "fill/value"])
    fill.attr["T"].type = 1
    fill.attr["index_type"].type = 3
    add = graph.node.add(name="add_fill", op="AddV2")
    add.input.extend(["relu", "fill"])
    add.attr["T"].type = 1
    next(n for n in graph.node if n.name == "pool").input[0] = "add_fill"
    return _tf_file(folder, graph)


def repro_tf_int16_input(folder: Path):
    """A Placeholder of dtype int16 feeding float ops: refused as a 'bug in nhwc-onnx'."""
    graph = tf_graphdef()
    next(n for n in graph.node if n.name == "x").attr["dtype"].type = 5
    return _tf_file(folder, graph)


# -- 5: Caffe weights wire format --------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def repro_caffe_blob_data_as_varint(folder: Path):
    """BlobProto.double_data (field 8) sent as a varint instead of a packed array."""
    (folder / "deploy.prototxt").write_text(CAFFE_PROTOTXT)
    blob = _field(7, _field(1, _varint(1))) + _varint(8 << 3) + _varint(7)
    layer = _field(1, b"conv") + _field(2, b"Convolution") + _field(7, blob)
    weights = _save(folder, "weights.caffemodel", _field(100, layer))
    return folder / "deploy.prototxt", "caffe", FrontendOptions(weights=str(weights))


# -- 7, 8: ONNX constant folding and legalisation at absurd sizes ----------------------------------


def repro_onnx_range_2_pow_40(folder: Path):
    """Range(0, 2^40, 1) summed into the input: folding it allocates 8 TiB."""
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
             helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
             helper.make_node("ReduceSum", ["rf"], ["s"], keepdims=0),
             helper.make_node("Add", ["x", "s"], ["y"])]
    data = _onnx_net(nodes, [i64("start", 0), i64("limit", 1 << 40), i64("delta", 1)])
    return _save(folder, "model.onnx", data), "onnx", FrontendOptions()


def repro_onnx_resize_scale_1e6(folder: Path):
    """Nearest Resize by 10^6 of a 7x5 image: every output coordinate is checked in Python."""
    nodes = [helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="nearest")]
    inits = [numpy_helper.from_array(np.array([], np.float32), "roi"),
             numpy_helper.from_array(np.array([1, 1, 1e6, 1e6], np.float32), "scales")]
    return _save(folder, "model.onnx", _onnx_net(nodes, inits)), "onnx", FrontendOptions()


# -- 9: Caffe random weights of absurd size -----------------------------------------------------


def repro_caffe_random_weights_absurd(folder: Path):
    """--weights random for a Convolution with num_output 2^31-1 (216 GiB of weights)."""
    text = CAFFE_PROTOTXT.replace("num_output: 4 ", "num_output: 2147483647 ")
    return _save(folder, "deploy.prototxt", text.encode()), "caffe", \
        FrontendOptions(weights="random")


def repro_caffe_random_weights_large(folder: Path):
    """--weights random for num_output 150000 x 3x64x64: 7 GiB, which overcommit may grant."""
    text = CAFFE_PROTOTXT.replace("num_output: 4 kernel_size: 3 pad: 1",
                                  "num_output: 150000 kernel_size: 64 pad: 32")
    return _save(folder, "deploy.prototxt", text.encode()), "caffe", \
        FrontendOptions(weights="random")


# -- 10, 11: ONNX structure errors reported as bugs of nhwc-onnx ---------------------------------


def repro_onnx_pool_stride_zero(folder: Path):
    model = onnx_model()
    pool = next(n for n in model.graph.node if n.name == "pool")
    next(a for a in pool.attribute if a.name == "strides").ints[0] = 0
    return _save(folder, "model.onnx", model.SerializeToString()), "onnx", FrontendOptions()


def repro_onnx_conv_two_outputs(folder: Path):
    model = onnx_model()
    next(n for n in model.graph.node if n.name == "conv").output.append("extra")
    return _save(folder, "model.onnx", model.SerializeToString()), "onnx", FrontendOptions()


REPROS = {name[len("repro_"):]: fn for name, fn in globals().items() if name.startswith("repro_")}


def run(name: str, folder: Path) -> dict:
    """Convert one reproduction; the outcome as a dict (exception type, message, seconds)."""
    from nhwc_onnx.api import convert

    source, framework, options = REPROS[name](folder)
    start = time.perf_counter()
    try:
        convert(source, folder / "out" / "model.nhwc.onnx", framework=framework,
                options=options)
        outcome, message = "converted", ""
    except Exception as exc:  # noqa: BLE001 - the outcome is what we report
        outcome, message = type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else ""
    return {"outcome": outcome, "message": message,
            "seconds": round(time.perf_counter() - start, 2)}


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(run(sys.argv[1], Path(tmp))))
