"""Seeded mutation fuzzing of the ONNX frontend: only the project's errors may escape."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from nhwc_onnx.errors import NhwcOnnxError
from nhwc_onnx.frontends.onnx import load_proto, parse_model_bytes
from tests.frontends.onnx.onnx_helpers import make_model


def _seed_model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Shape", ["p"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"]),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "m1"], ["t"], axis=0),
        helper.make_node("Reshape", ["p", "t"], ["f"]),
        helper.make_node("Slice", ["f", "st", "en"], ["y"]),
    ]
    inits = {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
             "zero": np.array(0, np.int64), "axes": np.array([0], np.int64),
             "m1": np.array([-1], np.int64), "st": np.array([1], np.int64),
             "en": np.array([5], np.int64)}
    return make_model(nodes, [("x", [2, 3, 8, 6])], [("y", None)], inits)


def _convert_bytes(data: bytes) -> bool:
    """True when the mutated model converted; False when the frontend refused it."""
    try:
        load_proto(parse_model_bytes(data))
    except NhwcOnnxError:
        return False
    return True


def test_the_unmutated_seed_model_converts():
    assert _convert_bytes(_seed_model().SerializeToString())


def test_byte_mutations_raise_only_project_errors():
    data = bytearray(_seed_model().SerializeToString())
    rng = np.random.default_rng(1234)
    converted = 0
    for _ in range(200):
        mutated = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            pos = int(rng.integers(0, len(mutated)))
            kind = rng.integers(0, 3)
            if kind == 0:
                mutated[pos] = int(rng.integers(0, 256))
            elif kind == 1:
                del mutated[pos:pos + int(rng.integers(1, 8))]
            else:
                mutated[pos:pos] = rng.integers(0, 256, int(rng.integers(1, 4)),
                                                dtype=np.uint8).tobytes()
        converted += _convert_bytes(bytes(mutated))
    # measured: 13 of 200 still convert (a refusal of everything would pass without this)
    assert converted >= 6


def test_attribute_and_shape_mutations_raise_only_project_errors():
    rng = np.random.default_rng(99)
    values = [0, -1, -7, 1 << 40, 3, 1]
    converted = 0
    for _ in range(200):
        model = _seed_model()
        node = model.graph.node[int(rng.integers(0, len(model.graph.node)))]
        if node.attribute and rng.random() < 0.7:
            attr = node.attribute[int(rng.integers(0, len(node.attribute)))]
            if attr.ints:
                attr.ints[int(rng.integers(0, len(attr.ints)))] = int(rng.choice(values))
            else:
                attr.i = int(rng.choice(values))
        else:
            init = model.graph.initializer[int(rng.integers(0, len(model.graph.initializer)))]
            if init.dims:
                init.dims[0] = int(rng.choice(values))
            dim = model.graph.input[0].type.tensor_type.shape.dim
            dim[int(rng.integers(0, 4))].dim_value = int(rng.choice(values))
        converted += _convert_bytes(model.SerializeToString())
    assert converted >= 20  # measured: 45 of 200 still convert
