"""Function inlining, zero-copy weights, input/output selection, SavedModel and Keras files."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.errors import InvalidModelError, ModelLoadError, UsageError
from nhwc_onnx.frontends.tensorflow import load
from nhwc_onnx.frontends.tensorflow.proto import tf_graph_pb2 as pb
from nhwc_onnx.options import ConvertOptions
from tests.core_reference import run_core
from tests.frontends.tensorflow.tf_helpers import close, freeze, load_bytes, rand, spec, tf


def _placeholder(graph, name, shape):
    node = graph.node.add(name=name, op="Placeholder")
    node.attr["dtype"].type = pb.DT_FLOAT
    for d in shape:
        node.attr["shape"].shape.dim.add(size=d)


def _function_graph() -> pb.GraphDef:
    """x -> StatefulPartitionedCall(outer) -> Sigmoid, where outer calls inner through a
    PartitionedCall and refers to body tensors as 'node:arg:index'."""
    graph = pb.GraphDef()
    _placeholder(graph, "x", [2, 3])
    inner = graph.library.function.add()
    inner.signature.name = "inner"
    inner.signature.input_arg.add(name="a", type=pb.DT_FLOAT)
    inner.signature.output_arg.add(name="b", type=pb.DT_FLOAT)
    inner.node_def.add(name="neg", op="Neg", input=["a"])
    inner.ret["b"] = "neg:y:0"
    outer = graph.library.function.add()
    outer.signature.name = "outer"
    outer.signature.input_arg.add(name="p", type=pb.DT_FLOAT)
    outer.signature.output_arg.add(name="q", type=pb.DT_FLOAT)
    outer.signature.output_arg.add(name="passthrough", type=pb.DT_FLOAT)
    outer.node_def.add(name="relu", op="Relu", input=["p"])
    call = outer.node_def.add(name="call", op="PartitionedCall", input=["relu:activations:0"])
    call.attr["f"].func.name = "inner"
    outer.ret["q"] = "call:output:0"
    outer.ret["passthrough"] = "p"
    node = graph.node.add(name="model", op="StatefulPartitionedCall", input=["x"])
    node.attr["f"].func.name = "outer"
    graph.node.add(name="out", op="Sigmoid", input=["model"])
    graph.node.add(name="out2", op="Abs", input=["model:1"])
    return graph


def test_function_calls_are_inlined(tmp_path):
    model = load_bytes(tmp_path, _function_graph().SerializeToString())
    names = {n.name for n in model.graph}
    assert "model/call/neg" in names and "model/relu" in names
    x = rand(2, 3)
    out = run_core(model, {"x": x})
    np.testing.assert_allclose(out["out"], 1 / (1 + np.exp(np.maximum(x, 0))), rtol=1e-6)
    np.testing.assert_array_equal(out["out2"], np.abs(x))


def test_missing_function_is_reported(tmp_path):
    graph = _function_graph()
    del graph.library.function[0]  # 'inner' is gone
    with pytest.raises(InvalidModelError, match="'inner'"):
        load_bytes(tmp_path, graph.SerializeToString())


def test_large_weights_are_views_of_the_file(tmp_path):
    t = tf()
    w = rand(40, 30, seed=5)  # 4800 bytes: lifted out of the message (wire.py)
    data, _ = freeze(lambda a: t.matmul(a, w), [spec((3, 40), "a")])
    model = load_bytes(tmp_path, data)
    const = next(v for n in model.graph for v in n.inputs if v is not None and v.is_const)
    assert not const.const.flags.owndata
    np.testing.assert_array_equal(const.const, w)
    cut = data.find(w.tobytes()) + 100  # truncate inside the weight bytes
    with pytest.raises(ModelLoadError):
        load_bytes(tmp_path, data[:cut], "cut.pb")


def test_inputs_and_outputs_by_tensor_name(tmp_path):
    t = tf()

    def fn(x):
        hidden = t.nn.relu(x * 2.0, name="hidden")
        return t.tanh(hidden, name="result"), t.abs(x, name="other")

    data, _ = freeze(fn, [spec((2, 3))])
    with pytest.raises(InvalidModelError, match="--input-shape hidden="):
        load_bytes(tmp_path, data, inputs=["hidden:0"], outputs=["result"])
    model = load_bytes(tmp_path, data, inputs=["hidden:0"], outputs=["result"],
                       input_shapes={"hidden": [2, 3]})
    assert [v.name for v in model.graph.inputs] == ["hidden"]
    assert [v.name for v in model.graph.outputs] == ["result"]
    h = rand(2, 3)
    close(run_core(model, {"hidden": h})["result"], np.tanh(h))
    with pytest.raises(UsageError, match="^--outputs names 'nothere:0'"):  # exit 2
        load_bytes(tmp_path, data, outputs=["nothere:0"])


@pytest.mark.parametrize("control_flow_v2", [False, True])
def test_learning_phase_condition_is_resolved(tmp_path, control_flow_v2):
    """TF1 Switch/Merge and TF2 StatelessIf on a constant (defaulted) predicate."""
    t = tf()
    from tensorflow.python.ops import control_flow_util

    saved = control_flow_util.ENABLE_CONTROL_FLOW_V2
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = control_flow_v2
    try:
        graph = t.Graph()
        with graph.as_default():
            x = t.compat.v1.placeholder(t.float32, [2, 3], name="x")
            phase = t.compat.v1.placeholder_with_default(False, [], name="learning_phase")
            y = t.cond(phase, lambda: x * 3.0, lambda: t.nn.relu(x))
            t.identity(y, name="y")
    finally:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = saved
    graph_def = graph.as_graph_def()
    ops = {n.op for n in graph_def.node}
    assert ({"Switch", "Merge"} <= ops) != control_flow_v2
    model = load_bytes(tmp_path, graph_def.SerializeToString(), outputs=["y"])
    x = rand(2, 3)
    close(run_core(model, {"x": x})["y"], np.maximum(x, 0))
    assert "Mul" not in model.graph.op_counts()


def _keras_model():
    import keras

    keras.utils.set_random_seed(2)
    return keras.Sequential([keras.Input((7, 5, 3)), keras.layers.Conv2D(4, 3, padding="same"),
                             keras.layers.BatchNormalization(), keras.layers.ReLU()])


def test_keras_file_and_saved_model(tmp_path):
    model = _keras_model()
    x = rand(1, 7, 5, 3)
    want = np.asarray(model(x, training=False))
    for filename in ("m.keras", "m.h5"):
        path = tmp_path / filename
        model.save(path)
        converted = load(path, ConvertOptions(batch=1))  # the frontend alone: a fixed batch
        name = converted.graph.inputs[0].name
        close(run_core(converted, {name: x})[converted.graph.outputs[0].name], want)
        assert converted.metadata["source_file"] == filename
    export = tmp_path / "saved"
    model.export(str(export))
    converted = load(export, ConvertOptions(batch=1))
    feed = {converted.graph.inputs[0].name: x}
    close(run_core(converted, feed)[converted.graph.outputs[0].name], want)
    with pytest.raises(ModelLoadError, match="serving_default"):
        load(export, ConvertOptions(signature="nope"))
    with pytest.raises(ModelLoadError, match="not a SavedModel"):
        load(tmp_path, ConvertOptions())
    broken = tmp_path / "broken.keras"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ModelLoadError, match="broken.keras"):
        load(broken, ConvertOptions())
