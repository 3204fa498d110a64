"""``load(..., defer_weights=True)`` (what ``check`` uses): the same verdicts as the eager read,
values read only when a rule asks for them."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nhwc_onnx.errors import ModelLoadError
from nhwc_onnx.ir import DIALECT, DeferredArray, Graph, Model, Value
from nhwc_onnx.onnxfile import ModelProto
from nhwc_onnx.schemas import validate
from nhwc_onnx.serialize import load, save

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _one_node(op: str, inputs: list, attrs: dict | None = None) -> Model:
    """inputs: tuple = graph input of that shape, ndarray = constant."""
    g = Graph()
    values = [g.constant(spec, f"c{i}") if isinstance(spec, np.ndarray)
              else g.add_input(Value(f"in{i}", shape=spec)) for i, spec in enumerate(inputs)]
    node = g.make_node(op, values, dict(attrs or {}), name="n", domain=DIALECT)
    g.outputs = list(node.outputs)
    return Model(g)


def _weights(*shape: int, dtype=np.float32) -> np.ndarray:
    return np.arange(np.prod(shape), dtype=dtype).reshape(shape) % 7


# (name, model, is valid): big weights are lifted out of the parse (>= 128 KB), small ones stay
# in the protobuf; Reshape's shape input is the one constant a dialect rule reads the values of.
CASES = [
    ("conv_big_weight", _one_node("Conv", [(1, 9, 9, 64), _weights(64, 3, 3, 64)],
                                  {"kernel_shape": [3, 3], "pads": "SAME"}), True),
    ("conv_small_weight", _one_node("Conv", [(1, 9, 9, 4), _weights(8, 3, 3, 4)],
                                    {"kernel_shape": [3, 3], "pads": "VALID"}), True),
    ("conv_weight_wrong_channels", _one_node("Conv", [(1, 9, 9, 4), _weights(8, 3, 3, 5)],
                                             {"kernel_shape": [3, 3], "pads": "VALID"}), False),
    ("conv_weight_int64", _one_node("Conv", [(1, 9, 9, 4), _weights(8, 3, 3, 4, dtype=np.int64)],
                                    {"kernel_shape": [3, 3], "pads": "VALID"}), False),
    ("reshape", _one_node("Reshape", [(1, 4, 6), np.array([1, -1], np.int64)]), True),
    ("reshape_two_minus_ones", _one_node("Reshape", [(1, 4, 6), np.array([-1, -1], np.int64)]),
     False),
    ("reshape_2d_shape", _one_node("Reshape", [(1, 4, 6), np.array([[1, 24]], np.int64)]), False),
    ("dense_big_weight", _one_node("Dense", [(2, 300), _weights(200, 300)]), True),
]


def _verdict(path: Path, defer: bool):
    try:
        return [str(i) for i in validate(load(path, defer_weights=defer))]
    except ModelLoadError as exc:
        return f"unreadable: {exc}"


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("deferred")
    files = [EXAMPLES / "tiny_convnet.onnx", EXAMPLES / "mlp_constants.onnx",
             EXAMPLES / "pad_pool_concat.onnx", EXAMPLES / "invalid" / "broken.onnx"]
    for name, model, _ in CASES:
        files.append(save(model, folder / f"{name}.onnx"))
    # raw data shorter than the shape needs, in a lifted and in an inline tensor
    for name in ("conv_big_weight", "conv_small_weight"):
        proto = ModelProto.FromString((folder / f"{name}.onnx").read_bytes())
        weight = proto.graph.initializer[0]
        weight.raw_data = weight.raw_data[:-4]
        (folder / f"{name}_truncated.onnx").write_bytes(proto.SerializeToString())
        files.append(folder / f"{name}_truncated.onnx")
    return files


def test_deferred_weights_give_every_verdict_of_the_eager_read(model_files):
    verdicts = {p.stem: (_verdict(p, defer=False), _verdict(p, defer=True)) for p in model_files}
    assert {name: eager for name, (eager, deferred) in verdicts.items() if eager != deferred} == {}
    eager = {name: v[0] for name, v in verdicts.items()}
    for name, _, valid in CASES:
        assert (eager[name] == []) is valid, (name, eager[name])
    assert all(str(eager[n]).startswith("unreadable: ") and "needs" in str(eager[n])
               for n in ("conv_big_weight_truncated", "conv_small_weight_truncated"))
    assert sum(v == [] for v in eager.values()) == 7  # and 7 invalid or unreadable
    assert len(eager) == 14


def test_initializers_are_deferred_and_read_only_when_a_rule_needs_values(model_files):
    by_name = {p.stem: p for p in model_files}
    conv = load(by_name["conv_big_weight"], defer_weights=True)
    weight = conv.graph.nodes[0].inputs[1].const
    assert isinstance(weight, DeferredArray) and repr(weight).endswith("not read)")
    validate(conv)
    assert repr(weight).endswith("not read)")  # shapes only
    reshape = load(by_name["reshape"], defer_weights=True)
    target = reshape.graph.nodes[0].inputs[1].const
    validate(reshape)
    assert repr(target).endswith(", read)")  # Reshape's rule reads the target shape


def test_a_deferred_array_behaves_as_its_values_and_reads_them_once():
    reads = []
    values = np.arange(6, dtype=np.float32).reshape(2, 3)

    def read():
        reads.append(1)
        return values

    d = DeferredArray((2, 3), "float32", read)
    assert (d.shape, d.ndim, d.size, d.dtype_name, d.dtype) == ((2, 3), 2, 6, "float32",
                                                                np.float32)
    assert reads == []
    assert Value("w", const=d).dtype == "float32" and reads == []
    np.testing.assert_array_equal(np.asarray(d), values)
    np.testing.assert_array_equal(d + 1, values + 1)
    np.testing.assert_array_equal(2 * d, 2 * values)
    np.testing.assert_array_equal(d == 4, values == 4)
    assert d[1, 2] == 5 and len(d) == 2 and [list(r) for r in d] == values.tolist()
    assert d.astype(np.int64).tolist() == values.astype(np.int64).tolist()
    copied = np.array(d, copy=True)
    copied[0, 0] = 9  # a copy asked for is a copy: the values may be a read-only file view
    assert values[0, 0] == 0 and np.array(d, copy=True, dtype=np.float64).dtype == np.float64
    assert reads == [1]


_WHAT_CHECK_IMPORTS = """
import sys, types
import nhwc_onnx.schemas, nhwc_onnx.serialize
numpy = sys.modules["numpy"]
print(type(numpy) is types.ModuleType, hasattr(numpy, "__file__"),
      nhwc_onnx.schemas.base.np is numpy, nhwc_onnx.schemas.base.is_number(numpy.float32(1.5)))
"""


def test_the_reader_and_the_schemas_import_numpy_as_numpy():
    # No stand-in module in sys.modules: what check loads imports the real numpy, and the
    # schemas' type checks see numpy's scalars (what stays deferred is a weight's values).
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _WHAT_CHECK_IMPORTS], capture_output=True,
                          text=True, timeout=120, check=True)
    assert proc.stdout.split() == ["True", "True", "True", "True"]
