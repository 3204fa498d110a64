"""Minimal reproductions of the crashes listed in tests/reliability/CRASHES.md, built in code.

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

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from rel_models import (
    CAFFE_PROTOTXT,
    _tf_const,
    onnx_bytes,
    onnx_model,
    tf_graphdef,
    tf_zoo_graphdef,
)

from nhwc_onnx.options import ConvertOptions


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
        "onnx", ConvertOptions()


def repro_onnx_op_type_not_utf8(folder: Path):
    """Two unknown ops, one whose op_type is not UTF-8: the error's summary sorts str and
    bytes together."""
    model = onnx_model()
    model.graph.node[2].op_type = "Foo"
    model.graph.node[6].op_type = "Zorp"
    data = model.SerializeToString().replace(b"\x22\x03Foo", b"\x22\x03F\xffo")
    return _save(folder, "model.onnx", data), "onnx", ConvertOptions()


# -- 3, 4: TensorFlow ------------------------------------------------------------------------------


def _tf_file(folder: Path, graph):
    return _save(folder, "model.pb", graph.SerializeToString()), "tf", ConvertOptions()


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


def repro_tf_resize_to_size_zero(folder: Path):
    """ResizeBilinear to size [0, 0]: refused only by the final dialect check, as a 'bug'."""
    graph = tf_zoo_graphdef()
    size = next(n for n in graph.node if n.name == "up/size").attr["value"].tensor
    size.tensor_content = np.array([0, 0], "<i4").tobytes()
    return _tf_file(folder, graph)


def repro_tf_concat_without_inputs(folder: Path):
    """ConcatV2 with its input list emptied: the axis is looked up at index -1."""
    graph = tf_zoo_graphdef()
    del next(n for n in graph.node if n.name == "cat").input[:]
    return _tf_file(folder, graph)


def repro_tf_pbtxt_nested_too_deeply(folder: Path):
    """A text GraphDef whose attribute values nest 3000 deep (a few kB of braces)."""
    depth = 3000
    text = ("node { name: 'a' op: 'Const' attr { key: 'value' value { "
            + "func { attr { key: 'k' value { " * depth + "} } } " * depth + "} } }\n")
    return _save(folder, "model.pbtxt", text.encode()), "tf", ConvertOptions()


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
    return folder / "deploy.prototxt", "caffe", ConvertOptions(weights=str(weights))


# -- 7, 8: ONNX constant folding and legalisation at absurd sizes ----------------------------------


def repro_onnx_range_2_pow_40(folder: Path):
    """Range(0, 2^40, 1) summed into the input: folding it allocates 8 TiB."""

    def i64(name, v):
        return numpy_helper.from_array(np.array(v, np.int64), name)

    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
             helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
             helper.make_node("ReduceSum", ["rf"], ["s"], keepdims=0),
             helper.make_node("Add", ["x", "s"], ["y"])]
    data = _onnx_net(nodes, [i64("start", 0), i64("limit", 1 << 40), i64("delta", 1)])
    return _save(folder, "model.onnx", data), "onnx", ConvertOptions()


def repro_onnx_resize_scale_1e6(folder: Path):
    """Nearest Resize by 10^6 of a 7x5 image: every output coordinate is checked in Python."""
    nodes = [helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="nearest")]
    inits = [numpy_helper.from_array(np.array([], np.float32), "roi"),
             numpy_helper.from_array(np.array([1, 1, 1e6, 1e6], np.float32), "scales")]
    return _save(folder, "model.onnx", _onnx_net(nodes, inits)), "onnx", ConvertOptions()


# -- 9: Caffe random weights of absurd size -----------------------------------------------------


def repro_caffe_random_weights_absurd(folder: Path):
    """--weights random for a Convolution with num_output 2^31-1 (216 GiB of weights)."""
    text = CAFFE_PROTOTXT.replace("num_output: 4 ", "num_output: 2147483647 ")
    return _save(folder, "deploy.prototxt", text.encode()), "caffe", \
        ConvertOptions(weights="random")


def repro_caffe_random_weights_large(folder: Path):
    """--weights random for num_output 150000 x 3x64x64: 7 GiB, which overcommit may grant."""
    text = CAFFE_PROTOTXT.replace("num_output: 4 kernel_size: 3 pad: 1",
                                  "num_output: 150000 kernel_size: 64 pad: 32")
    return _save(folder, "deploy.prototxt", text.encode()), "caffe", \
        ConvertOptions(weights="random")


# -- 10, 11: ONNX structure errors reported as bugs of nhwc-onnx ---------------------------------


def repro_onnx_pool_stride_zero(folder: Path):
    model = onnx_model()
    pool = next(n for n in model.graph.node if n.name == "pool")
    next(a for a in pool.attribute if a.name == "strides").ints[0] = 0
    return _save(folder, "model.onnx", model.SerializeToString()), "onnx", ConvertOptions()


def repro_onnx_conv_two_outputs(folder: Path):
    model = onnx_model()
    next(n for n in model.graph.node if n.name == "conv").output.append("extra")
    return _save(folder, "model.onnx", model.SerializeToString()), "onnx", ConvertOptions()


# -- 15: malformed ONNX nodes that reach the passes (ConversionBugError) -----------------------

def _i64(name: str, values) -> TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _f32(name: str, values) -> TensorProto:
    return numpy_helper.from_array(np.array(values, np.float32), name)


_ROI = _f32("roi", [])
_W3 = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
# name -> (nodes, initializers, opset[, x shape]); x is 2x3x7x5 float unless given; output y
ONNX_MALFORMED = {
    "reduce_mean_axes_repeated": (
        [helper.make_node("ReduceMean", ["x"], ["y"], axes=[1, 1])], [], 13),
    "space_to_depth_without_blocksize": (
        [helper.make_node("SpaceToDepth", ["x"], ["y"])], [], 13),
    "depth_to_space_blocksize_0": (
        [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=0)], [], 13),
    "concat_without_inputs": (
        [helper.make_node("Concat", [], ["c"], axis=0),
         helper.make_node("Add", ["x", "c"], ["y"])], [], 13),
    "split_with_a_zero_size": (
        [helper.make_node("Split", ["x", "sizes"], ["y", "z"], axis=1)],
        [_i64("sizes", [0, 3])], 13),
    "conv_kernel_shape_0": (
        [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[0, 0])],
        [numpy_helper.from_array(np.ones((4, 3, 0, 0), np.float32), "w")], 13),
    "conv_dilation_0": (
        [helper.make_node("Conv", ["x", "w"], ["y"], dilations=[0, 1])], [_W3], 13),
    "resize_scale_0": (
        [helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="nearest")],
        [_ROI, _f32("scales", [1, 1, 0, 0])], 13),
    "resize_scale_nan": (
        [helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="nearest")],
        [_ROI, _f32("scales", [1, 1, np.nan, 2])], 13),
}
# -- 18: found later by the onnx_ops fuzzer; same class as 15 -----------------------------------
ONNX_MALFORMED_18 = {
    "constant_of_shape_negative": (
        [helper.make_node("Neg", ["one"], ["shape"]),
         helper.make_node("ConstantOfShape", ["shape"], ["c"]),
         helper.make_node("Add", ["x", "c"], ["y"])], [_i64("one", [1])], 13),
    "constant_of_shape_of_a_scalar": (
        [helper.make_node("Size", ["x"], ["n"]),
         helper.make_node("ConstantOfShape", ["n"], ["c"]),
         helper.make_node("ReduceSum", ["c"], ["s"], keepdims=0),
         helper.make_node("Add", ["x", "s"], ["y"])], [], 13),
    "expand_to_a_zero_dim": (
        [helper.make_node("Expand", ["x", "shape"], ["y"])], [_i64("shape", [2, 3, 7, 0])], 13,
        (2, 3, 7, 1)),
    "reduce_mean_keepdims_minus_1": (
        [helper.make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=-1)], [], 13),
    "reshape_to_a_float_shape_with_nan": (
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        [_f32("shape", [np.nan, 105])], 13),
}
ONNX_MALFORMED.update(ONNX_MALFORMED_18)


def _malformed(name: str):
    def build(folder: Path):
        nodes, inits, opset, *x_shape = ONNX_MALFORMED[name]
        x_shape = list(x_shape[0]) if x_shape else [2, 3, 7, 5]
        graph = helper.make_graph(
            nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        return _save(folder, "model.onnx", model.SerializeToString()), "onnx", ConvertOptions()
    build.__doc__ = f"ONNX node case '{name}' of ONNX_MALFORMED."
    return build


# -- 16: padding normalisation at absurd pads ------------------------------------------------------


def repro_onnx_avgpool_pads_2_pow_40(folder: Path):
    """AveragePool with a top pad of 2^40: normalize_padding allocates an 8 TiB index array."""
    nodes = [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2],
                              pads=[1 << 40, 0, 0, 0])]
    return _save(folder, "model.onnx", _onnx_net(nodes, [])), "onnx", ConvertOptions()


# -- 19, 20: found after the first fixes (onnx_ops fuzzer, seed 11) ------------------------------


def repro_onnx_tile_by_2_pow_20(folder: Path):
    """Tile(x[2, 2], [1, 2^20]): a 16 MB output, legalised as a Concat of 2^20 inputs."""
    graph = helper.make_graph(
        [helper.make_node("Tile", ["x", "repeats"], ["y"])], "tile",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([1, 1 << 20], np.int64), "repeats")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return _save(folder, "model.onnx", model.SerializeToString()), "onnx", ConvertOptions()


def repro_onnx_range_with_an_empty_start(folder: Path):
    """Range(start=[] (an empty tensor), 5, 1) added to x: the size guard indexes [0]."""
    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
             helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "rf"], ["y"])]
    inits = [numpy_helper.from_array(np.zeros(0, np.int64), "start"),
             numpy_helper.from_array(np.array(5, np.int64), "limit"),
             numpy_helper.from_array(np.array(1, np.int64), "delta")]
    return _save(folder, "model.onnx", _onnx_net(nodes, inits)), "onnx", ConvertOptions()


# -- 21, 22: found by the seed-23 campaigns (02:15 UTC) --------------------------------------------


def repro_tf_pad_with_one_padding_value(folder: Path):
    """Pad whose paddings constant holds one value instead of a [rank, 2] table."""
    graph = tf_zoo_graphdef()
    table = next(n for n in graph.node if n.name == "pad/p").attr["value"].tensor
    del table.tensor_shape.dim[:]
    table.tensor_shape.dim.add(size=1)
    table.tensor_content = np.array([1], "<i4").tobytes()
    return _tf_file(folder, graph)


def repro_tf_argmin_with_a_tensor_dimension(folder: Path):
    """The conv node renamed to ArgMin: its 'dimension' input is the 3x3x3x4 weight tensor."""
    graph = tf_graphdef()
    next(n for n in graph.node if n.name == "conv").op = "ArgMin"
    return _tf_file(folder, graph)


def repro_tf_fill_with_a_tensor_value(folder: Path):
    """The MatMul node renamed to Fill: its 'value' input is the 24x6 weight, not a scalar."""
    graph = tf_graphdef()
    next(n for n in graph.node if n.name == "fc").op = "Fill"
    return _tf_file(folder, graph)


def repro_onnx_maxpool_kernel_2_pow_40_same(folder: Path):
    """MaxPool kernel [2^40, 2] with SAME_UPPER: the output is small, the padding plan is not."""
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1 << 40, 2],
                              auto_pad="SAME_UPPER")]
    return _save(folder, "model.onnx", _onnx_net(nodes, [])), "onnx", ConvertOptions()


# -- 23: found by the seed-41 campaign (02:25 UTC) -------------------------------------------------


def repro_onnx_expanded_space_to_depth_area_2_pow_40(folder: Path):
    """The ONNX backend test 'test_spacetodepth_example_expanded' (built by the onnx package)
    with its 'block_area' Constant declared as shape [2^40] (one stored value)."""
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = next(c for c in collect_testcases()
                    if c.name == "test_spacetodepth_example_expanded")
    model = type(case.model)()
    model.CopyFrom(case.model)
    area = next(n for n in model.graph.node if n.output[0].endswith("_block_area"))
    area.attribute[0].t.dims[0] = 1 << 40
    return _save(folder, "model.onnx", model.SerializeToString()), "onnx", ConvertOptions()


REPROS = {name[len("repro_"):]: fn for name, fn in globals().items() if name.startswith("repro_")}
REPROS.update({f"onnx_malformed_{name}": _malformed(name) for name in ONNX_MALFORMED})


def run(name: str, folder: Path) -> dict:
    """Convert one reproduction; the outcome as a dict (exception type, message, seconds)."""
    from nhwc_onnx.api import convert

    source, framework, options = REPROS[name](folder)
    start = time.perf_counter()
    try:
        convert(source, folder / "out" / "model.nhwc.onnx", options.replace(framework=framework))
        outcome, message = "converted", ""
    except Exception as exc:  # noqa: BLE001 - the outcome is what we report
        outcome, message = type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else ""
    import resource

    return {"outcome": outcome, "message": message,
            "seconds": round(time.perf_counter() - start, 2),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(run(sys.argv[1], Path(tmp))))
