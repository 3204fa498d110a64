"""onnx_wire.lift_raw_data: the skeleton parses, lifted spans are the original raw_data bytes,
small tensors stay inline, malformed input raises WireFormatError."""
from __future__ import annotations

import mmap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nhwc_onnx.files.onnx_wire import lift_raw_data
from nhwc_onnx.files.protowire import WireFormatError, encode_varint


def _model() -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    big = rng.standard_normal((7, 5, 3, 2)).astype(np.float32)  # 840 bytes
    bigger = rng.standard_normal((11, 13)).astype(np.float32)  # 572 bytes
    small = np.arange(6, dtype=np.int64)  # 48 bytes
    const = rng.standard_normal((5, 7, 3)).astype(np.float32)  # 420 bytes
    inits = [numpy_helper.from_array(big, "big"), numpy_helper.from_array(small, "small"),
             numpy_helper.from_array(bigger, "bigger")]
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Constant", [], ["c"], name="const",
                         value=numpy_helper.from_array(const, "c")),
        helper.make_node("Constant", [], ["s"], name="tiny",
                         value=numpy_helper.from_array(small, "s")),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [2, 3])],
                              [helper.make_tensor_value_info("r", 1, [2, 3])], inits)
    return helper.make_model(graph)


def test_skeleton_parses_and_spans_are_the_raw_data():
    model = _model()
    data = model.SerializeToString()
    lifted = lift_raw_data(data, min_bytes=400)
    assert sorted(lifted.initializers) == [0, 2]  # "small" (48 bytes) stays inline
    assert sorted(lifted.constants) == [1]  # node index of "const"; "tiny" stays inline
    for index, (offset, length) in lifted.initializers.items():
        assert data[offset:offset + length] == model.graph.initializer[index].raw_data
    offset, length = lifted.constants[1]
    assert data[offset:offset + length] == model.graph.node[1].attribute[0].t.raw_data

    skeleton = onnx.ModelProto()
    skeleton.ParseFromString(lifted.skeleton)
    assert len(lifted.skeleton) < len(data) - 840 - 572 - 420
    inits = skeleton.graph.initializer
    assert [t.name for t in inits] == ["big", "small", "bigger"]
    assert not inits[0].HasField("raw_data") and not inits[2].HasField("raw_data")
    assert list(inits[0].dims) == [7, 5, 3, 2] and inits[0].data_type == TensorProto.FLOAT
    assert inits[1].raw_data == model.graph.initializer[1].raw_data
    assert not skeleton.graph.node[1].attribute[0].t.HasField("raw_data")
    assert skeleton.graph.node[2].attribute[0].t.raw_data == \
        model.graph.node[2].attribute[0].t.raw_data
    # putting the lifted bytes back gives the original model
    for index, (offset, length) in lifted.initializers.items():
        inits[index].raw_data = data[offset:offset + length]
    offset, length = lifted.constants[1]
    skeleton.graph.node[1].attribute[0].t.raw_data = data[offset:offset + length]
    assert skeleton == model


def test_nothing_large_keeps_the_bytes_and_mmap_works(tmp_path):
    model = _model()
    data = model.SerializeToString()
    lifted = lift_raw_data(data, min_bytes=10_000)
    assert lifted.skeleton == data and not lifted.initializers and not lifted.constants
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        from_map = lift_raw_data(mapped, min_bytes=400)
        from_bytes = lift_raw_data(data, min_bytes=400)
        assert from_map.initializers and from_map.initializers == from_bytes.initializers
        assert (from_map.skeleton, from_map.constants) == (from_bytes.skeleton,
                                                          from_bytes.constants)


@pytest.mark.parametrize("cut", [1, 7, 100, -900, -3])
def test_truncated_model_raises(cut):
    data = _model().SerializeToString()
    with pytest.raises(WireFormatError):
        lift_raw_data(data[:cut], min_bytes=400)


def test_group_wire_type_raises():
    with pytest.raises(WireFormatError):
        lift_raw_data(encode_varint(7 << 3 | 3) + b"\0" * 8, min_bytes=1)


def test_graph_field_twice_raises():
    graph = _model().graph.SerializeToString()
    field = encode_varint(7 << 3 | 2) + encode_varint(len(graph)) + graph
    with pytest.raises(WireFormatError):
        lift_raw_data(field + field, min_bytes=400)
