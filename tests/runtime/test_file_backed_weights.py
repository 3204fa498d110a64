"""Weights a loaded model views in its files: ``runtime.run`` points
onnxruntime at the file's bytes instead of copying them, ``save_lowered`` streams them into
the output. Neither may change a number or a byte."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from nhwc_onnx.files.reads import file_origin
from nhwc_onnx.ir import DIALECT, NHWC, Graph, Model, Value
from nhwc_onnx.runtime import run
from nhwc_onnx.runtime import standard_onnx as lowering
from nhwc_onnx.serialize import load, save


def _model() -> Model:
    """Conv 3x3 (64 -> 160: a 360 KiB weight), Relu, GlobalAveragePool, Dense (160 -> 1700:
    a 1.04 MiB weight), odd sizes; random weights."""
    rng = np.random.default_rng(5)
    g = Graph("file_backed")
    x = g.add_input(Value("x", "float32", (2, 7, 5, 64), NHWC))
    w = g.constant((rng.standard_normal((160, 3, 3, 64)) * 0.05).astype(np.float32), "conv/W")
    y = g.make_node("Conv", [x, w], {"kernel_shape": [3, 3], "strides": [1, 1],
                                     "pads": "SAME"}, name="conv", domain=DIALECT).output
    y = g.make_node("Relu", [y], name="relu", domain=DIALECT).output
    y = g.make_node("GlobalAveragePool", [y], name="pool", domain=DIALECT).output
    d = g.constant((rng.standard_normal((1700, 1, 1, 160)) * 0.1).astype(np.float32), "fc/W")
    y = g.make_node("Dense", [y, d], name="fc", domain=DIALECT).output
    g.outputs.append(y)
    return Model(g)


@pytest.mark.parametrize("external", [False, True], ids=["inline", "external data"])
def test_run_from_file_references_gives_the_same_numbers(external, tmp_path):
    model = _model()
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 7, 5, 64)).astype(np.float32)}
    expected = run(model, feeds)
    path = save(model, tmp_path / "m.onnx", external_threshold=0 if external else 2**40)
    assert (tmp_path / "m.onnx.data").exists() == external
    loaded = load(path)
    references = lowering.FileReferences(loaded)
    # the 1.04 MiB weight is handed to onnxruntime as a file reference, the smaller one copied
    assert sorted(span.length for span in references.spans.values()) == [1700 * 160 * 4]
    got = run(loaded, feeds)
    assert got.keys() == expected.keys()
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])


def test_file_reference_names_the_bytes_the_reader_checked(tmp_path):
    path = save(_model(), tmp_path / "m.onnx", external_threshold=0)
    loaded = load(path)
    weight = loaded.graph.find_value("fc/W").const
    span = file_origin(weight)
    assert span is not None and span.path == str((tmp_path / "m.onnx.data").resolve())
    with open(span.path, "rb") as f:
        f.seek(span.offset)
        assert f.read(span.length) == weight.tobytes()
    assert file_origin(weight.T) is None and file_origin(np.array(weight)) is None
    tensor = lowering.FileReferences(loaded)(weight, "fc/W")
    assert tensor.data_location == onnx.TensorProto.EXTERNAL
    assert {e.key: e.value for e in tensor.external_data} == {
        "location": "m.onnx.data", "offset": str(span.offset), "length": str(span.length)}


def test_save_lowered_writes_the_bytes_of_the_whole_proto(tmp_path, monkeypatch):
    """Streaming every weight (threshold 0) gives byte for byte what serializing the whole
    lowered proto gives, and the file passes onnx.checker with its weights."""
    model = load(save(_model(), tmp_path / "m.onnx"))
    expected = lowering.lower_for_export(model).SerializeToString(deterministic=True)
    monkeypatch.setattr(lowering, "FILE_REFERENCE_MIN_BYTES", 0)
    proto = lowering.save_lowered(model, tmp_path / "lowered.onnx")
    assert (tmp_path / "lowered.onnx").read_bytes() == expected
    onnx.checker.check_model(str(tmp_path / "lowered.onnx"), full_check=True)
    assert len(proto.graph.node) == len(onnx.load_from_string(expected).graph.node)


def test_oversized_lowering_is_refused_from_the_shapes(monkeypatch):
    from nhwc_onnx.errors import ModelLoadError

    monkeypatch.setattr(lowering, "MAX_LOWERED_WEIGHT_BYTES", 1 << 20)
    with pytest.raises(ModelLoadError, match="do not fit one standard ONNX file"):
        lowering.lower_for_export(_model(), label="m.onnx")
