"""nhwc_onnx.run and nhwc_onnx.lower: what the command line's `run` and `lower` do, as library
calls (paths as str or Path, or a Model), checked against an independent numpy formula and
against onnxruntime running the lowered file."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import nhwc_onnx
from nhwc_onnx.errors import OutputPathError, SchemaValidationError, UsageError
from nhwc_onnx.serialize import load

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MLP = EXAMPLES / "mlp_constants.onnx"  # x: 2x3x2x5 -> Flatten, Dense, LeakyRelu, Dense, Sigmoid


def _mlp(model, x: np.ndarray) -> dict[str, np.ndarray]:
    """The example's formula in float64 numpy, written from its weights."""
    consts = {v.name: v.const.astype(np.float64) for v in model.graph.constants()}
    fc1 = x.astype(np.float64).reshape(x.shape[0], -1) @ consts["fc1/W"].T + consts["fc1/B"]
    fc2 = np.where(fc1 >= 0, fc1, 0.1 * fc1) @ consts["fc2/W"].T
    return {"fc1": fc1, "scores": 1.0 / (1.0 + np.exp(-fc2))}


def test_run_feeds_arrays_or_npy_files_and_returns_intermediates(tmp_path):
    x = np.random.default_rng(3).uniform(-2, 2, (2, 3, 2, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    expected = _mlp(load(MLP), x)
    npy = tmp_path / "x.npy"
    for model, feed in ((MLP, x), (str(MLP), npy), (load(MLP), str(npy))):
        result = nhwc_onnx.run(model, {"x": feed}, intermediate=["fc1"])
        np.testing.assert_array_equal(result.feeds["x"], x)
        assert list(result.outputs) == ["scores", "fc1"]
        for name in ("scores", "fc1"):
            np.testing.assert_allclose(result.outputs[name], expected[name], rtol=1e-4, atol=1e-5)


def test_random_inputs_are_seeded_standard_normal_and_saved(tmp_path):
    result = nhwc_onnx.run(MLP, random_inputs=True, seed=5)
    x = np.random.default_rng(5).standard_normal((2, 3, 2, 5)).astype(np.float32)
    np.testing.assert_array_equal(result.feeds["x"], x)
    np.testing.assert_allclose(result.outputs["scores"], _mlp(load(MLP), x)["scores"],
                               rtol=1e-4, atol=1e-5)
    paths = result.save(tmp_path / "out")
    assert paths == {"scores": tmp_path / "out" / "scores.npy"}
    np.testing.assert_array_equal(np.load(paths["scores"]), result.outputs["scores"])


@pytest.mark.parametrize(("feeds", "kwargs", "hint", "says"), [
    ({}, {}, "feeds", "no data for input(s) x"),
    ({"y": np.zeros(1, np.float32)}, {}, "feeds", "the model has no input 'y' (inputs: x)"),
    ({"x": np.zeros((2, 3, 2, 5))}, {}, "feeds", "input 'x' needs float32, the array is float64"),
    ({"x": np.zeros((2, 3, 2, 4), np.float32)}, {}, "feeds",
     "input 'x' needs shape (2, 3, 2, 5), the array has (2, 3, 2, 4)"),
    ({}, {"random_inputs": True, "intermediate": ["nope"]}, "intermediate",
     "no tensor named 'nope' in the model"),
])
def test_feeds_that_cannot_run_the_model_name_the_parameter(feeds, kwargs, hint, says):
    with pytest.raises(UsageError) as info:
        nhwc_onnx.run(MLP, feeds, **kwargs)
    assert info.value.param_hint == hint and says in info.value.problem


def test_run_refuses_a_model_that_breaks_the_dialect():
    with pytest.raises(SchemaValidationError, match="3 dialect rule violation"):
        nhwc_onnx.run(EXAMPLES / "invalid" / "broken.onnx", random_inputs=True)


@pytest.mark.parametrize("as_text", [True, False])
def test_lower_writes_standard_onnx_that_computes_the_same(tmp_path, as_text):
    source = EXAMPLES / "tiny_convnet.onnx"
    output = tmp_path / "standard.onnx"
    result = nhwc_onnx.lower(str(source) if as_text else source,
                             str(output) if as_text else output)
    assert result.output == output and result.opset == 17 and result.io_permutations == {}
    proto = onnx.load(str(output))
    assert len(proto.graph.node) == result.nodes and {n.domain for n in proto.graph.node} == {""}
    import onnxruntime as ort

    image = np.random.default_rng(1).standard_normal((1, 15, 13, 3)).astype(np.float32)
    session = ort.InferenceSession(str(output), providers=["CPUExecutionProvider"])
    [ours] = session.run(["probabilities"], {"image": image})
    np.testing.assert_allclose(ours, nhwc_onnx.run(source, {"image": image})
                               .outputs["probabilities"], rtol=1e-5, atol=1e-6)


def test_lower_takes_a_model_and_never_writes_over_its_source(tmp_path):
    copy = tmp_path / "m.onnx"
    copy.write_bytes(MLP.read_bytes())
    with pytest.raises(OutputPathError):
        nhwc_onnx.lower(copy, copy)
    assert copy.read_bytes() == MLP.read_bytes()
    result = nhwc_onnx.lower(load(MLP), tmp_path / "lowered.onnx")
    assert (tmp_path / "lowered.onnx").stat().st_size > 0 and result.nodes > 3


def test_random_inputs_need_a_static_shape(tmp_path):
    from nhwc_onnx.ir import DIALECT, Graph, Model, Value
    from nhwc_onnx.serialize import save
    from tests.cli_runner import run_cli as invoke

    g = Graph()
    node = g.make_node("Relu", [g.add_input(Value("x", shape=(None, 4), dtype="float32"))], {},
                       name="relu", domain=DIALECT)
    g.outputs = list(node.outputs)
    model = Model(g)
    with pytest.raises(UsageError) as info:
        nhwc_onnx.run(model, random_inputs=True)
    assert info.value.param_hint == "random_inputs"
    assert info.value.problem.startswith("input 'x' has an unknown dimension (None, 4)")
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)  # the unknown dim is any size
    np.testing.assert_array_equal(nhwc_onnx.run(model, {"x": x}).outputs[node.outputs[0].name],
                                  np.maximum(x, 0))
    result = invoke("run", save(model, tmp_path / "relu.onnx"), "--random", "-o", tmp_path)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: Invalid value for '--random': input 'x' has an "
                                    "unknown dimension")
