"""save() streams large weights from their arrays; the bytes must equal SerializeToString's."""
import numpy as np

from nhwc_onnx.ir import DIALECT, Graph, Model, Value
from nhwc_onnx.serialize import load, save, to_bytes


def _model():
    g = Graph("streamed")
    x = g.add_input(Value("x", shape=(2, 9, 7, 3)))
    rng = np.random.default_rng(0)
    w = g.constant(rng.standard_normal((16, 3, 3, 3)).astype(np.float32), "w")  # streamed
    b = g.constant(rng.standard_normal(16).astype(">f4"), "b")  # big-endian source array
    conv = g.make_node("Conv", [x, w, b], {"pads": "SAME"}, domain=DIALECT, name="conv")
    scale = g.make_node("Scale", [conv.output], {"scale": 0.5}, domain=DIALECT, name="s")
    flat = g.make_node("Reshape", [scale.output, g.constant(np.array([2, -1]), "shape")],
                       domain=DIALECT, name="flat")
    g.outputs = [flat.output]
    return Model(g, {"source_framework": "test"})


def test_streamed_file_equals_in_memory_serialization(tmp_path):
    model = _model()
    path = save(model, tmp_path / "m.onnx")
    assert path.read_bytes() == to_bytes(model)
    back = load(path)
    np.testing.assert_array_equal(back.graph.find_node("conv").inputs[1].const,
                                  model.graph.find_node("conv").inputs[1].const)
    np.testing.assert_array_equal(back.graph.find_node("conv").inputs[2].const,
                                  model.graph.find_node("conv").inputs[2].const.astype("<f4"))
