"""Graph inputs and outputs are named as users address the source, the
metadata maps each to its source tensor, --rename renames, and verification still feeds and
fetches the source by its own names."""
from __future__ import annotations

import json

import numpy as np
import pytest

import nhwc_onnx
from nhwc_onnx.errors import UsageError
from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.ir.io_names import name_graph_io
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.runtime import run
from tests.cli_runner import run_cli
from tests.conversion.deployment.models import (
    CAFFE_NET,
    keras_classifier,
    onnx_conv_net,
    onnx_two_input_net,
    run_onnxruntime,
    saved_model,
)


def _io(model) -> tuple[list[str], list[str]]:
    return [v.name for v in model.graph.inputs], [v.name for v in model.graph.outputs]


def _source_names(model) -> dict:
    return json.loads(model.metadata.get("source_names") or "{}")


# -- the names each frontend gives ------------------------------------------------------------


@pytest.mark.slow
def test_keras_inputs_and_output_layers_name_the_graph(tmp_path):
    source = keras_classifier(tmp_path / "classifier.keras")
    result = nhwc_onnx.convert(source, tmp_path / "c.onnx")
    assert _io(result.model) == (["img"], ["probs"])  # was input -> Identity
    assert _source_names(result.model) == {"img": "img:0", "probs": "Identity:0"}
    proof = nhwc_onnx.verify(source, tmp_path / "c.onnx")  # fed and fetched by source names
    # Keras leaves the batch open: it stays symbolic and is compared at batch 1, 3 and 17
    assert proof.ok and proof.batches == [1, 3, 17]
    assert [(c.name, c.batch) for c in proof.outputs] == [("probs", 1), ("probs", 3),
                                                          ("probs", 17)]
    verify = run_cli("verify", source, tmp_path / "c.onnx", "--bisect")
    assert verify.exit_code == 0, verify.output
    # --outputs takes the output layer's name as well as the tensor's
    cut = nhwc_onnx.convert(source, options=ConvertOptions(outputs="probs"))
    assert _io(cut.model) == (["img"], ["probs"])


@pytest.mark.slow
def test_keras_outputs_named_twice_or_by_dict_keys(tmp_path):
    twice = nhwc_onnx.convert(keras_classifier(tmp_path / "twice.keras", duplicate_output=True))
    assert _io(twice.model) == (["img"], ["probs", "probs_1"])
    source = keras_classifier(tmp_path / "dict.keras", dict_outputs=True)
    keyed = nhwc_onnx.convert(source, tmp_path / "dict.onnx")
    assert _io(keyed.model) == (["img"], ["boxes", "scores"])  # the keys of the output dict
    shapes = {v.name: v.shape[-1] for v in keyed.model.graph.outputs}
    assert shapes == {"boxes": 2, "scores": 5}  # each key on its own tensor
    assert nhwc_onnx.verify(source, tmp_path / "dict.onnx").ok


@pytest.mark.slow
def test_savedmodel_signature_keys_name_the_graph(tmp_path):
    source = saved_model(tmp_path / "sm")
    result = nhwc_onnx.convert(source, tmp_path / "sm.onnx")
    inputs, outputs = _io(result.model)
    assert inputs == ["pixels"] and sorted(outputs) == ["mask", "scores"]
    assert {v.name: len(v.shape) for v in result.model.graph.outputs} == {"mask": 4,
                                                                          "scores": 2}
    assert set(_source_names(result.model).values()) >= {"pixels:0"}
    report = nhwc_onnx.verify(source, tmp_path / "sm.onnx")
    assert report.ok and sorted(c.name for c in report.outputs) == ["mask", "scores"]
    renamed = run_cli("convert", source, "-o", tmp_path / "r.onnx", "--rename", "scores=logits",
                      "--verify")
    assert renamed.exit_code == 0, renamed.output
    assert sorted(_io(nhwc_onnx.serialize.load(tmp_path / "r.onnx"))[1]) == ["logits", "mask"]


def test_onnx_and_caffe_names_are_kept(tmp_path):
    onnx_model = nhwc_onnx.convert(onnx_conv_net(tmp_path / "m.onnx", input_name="input.1",
                                                 output_name="logits"))
    assert _io(onnx_model.model) == (["input.1"], ["logits"])
    assert "source_names" not in onnx_model.model.metadata
    proto = tmp_path / "net.prototxt"
    proto.write_text(CAFFE_NET)
    caffe = nhwc_onnx.convert(proto, options=ConvertOptions(weights="random"))
    assert _io(caffe.model) == (["data"], ["prob"])


# -- --rename ---------------------------------------------------------------------------------


def test_rename_renames_inputs_and_outputs_and_verify_still_pairs_them(tmp_path):
    source = onnx_conv_net(tmp_path / "m.onnx")
    out = tmp_path / "renamed.onnx"
    result = run_cli("convert", source, "-o", out, "--rename", "input=image",
                     "--rename", "output=features", "--verify")
    assert result.exit_code == 0, result.output
    model = nhwc_onnx.serialize.load(out)
    assert _io(model) == (["image"], ["features"])
    assert _source_names(model) == {"image": "input", "features": "output"}
    assert model.io_permutations == {"features": [0, 2, 3, 1], "image": [0, 2, 3, 1]}
    assert run_cli("verify", source, out, "--bisect").exit_code == 0
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3, 7, 5)).astype(np.float32)
    want = run_onnxruntime(source, {"input": x})["output"]
    got = run(model, {"image": x.transpose(0, 2, 3, 1)})["features"].transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_renames_may_swap_names(tmp_path):
    source = onnx_two_input_net(tmp_path / "two.onnx")
    out = tmp_path / "swapped.onnx"
    result = run_cli("convert", source, "-o", out, "--rename", "a=b", "--rename", "b=a",
                     "--verify")
    assert result.exit_code == 0, result.output
    model = nhwc_onnx.serialize.load(out)
    assert _source_names(model) == {"a": "b", "b": "a"}
    rng = np.random.default_rng(1)
    a, b = (rng.uniform(-1, 1, (1, 3, 7, 5)).astype(np.float32) for _ in range(2))
    want = run_onnxruntime(source, {"a": a, "b": b})
    got = run(model, {"b": a.transpose(0, 2, 3, 1), "a": b.transpose(0, 2, 3, 1)})
    np.testing.assert_allclose(got["z"].transpose(0, 3, 1, 2), want["z"], rtol=1e-6)
    np.testing.assert_allclose(got["y"].transpose(0, 3, 1, 2), want["y"], rtol=1e-4, atol=1e-4)


def test_a_new_name_held_by_an_internal_tensor_moves_that_tensor_aside(tmp_path):
    source = onnx_conv_net(tmp_path / "m.onnx")
    result = nhwc_onnx.convert(source, tmp_path / "c.onnx",
                               ConvertOptions(rename={"output": "relu_out"}))
    names = [v.name for v in result.model.graph.values()]
    assert len(names) == len(set(names)) and result.model.graph.outputs[0].name == "relu_out"
    assert nhwc_onnx.verify(source, tmp_path / "c.onnx").ok


@pytest.mark.parametrize(("renames", "says"), [
    (["nosuch=x"], "'nosuch' is not a graph input or output (they are: input, output)"),
    (["input=output"], "'output' would name two graph inputs/outputs"),
    (["input"], "expected OLD=NEW"),
    (["=x"], "expected OLD=NEW"),
    (["input=a", "input=b"], "'input' is renamed twice"),
    (["input=x", "output=x"], "several names renamed to 'x'"),
])
def test_rename_mistakes_are_usage_errors(tmp_path, renames, says):
    source = onnx_conv_net(tmp_path / "m.onnx")
    args = [a for r in renames for a in ("--rename", r)]
    result = run_cli("convert", source, "-o", tmp_path / "c.onnx", *args)
    assert result.exit_code == 2, result.output
    assert says in result.stderr
    assert not (tmp_path / "c.onnx").exists()


def test_options_naming_inputs_take_source_default_and_new_names(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    info = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                              [info("x", TensorProto.FLOAT, [1, 3, 7, 5])],
                              [info("y", TensorProto.FLOAT, [1, 3, 7, 5])])
    elementwise = tmp_path / "relu.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, elementwise)
    for keep in ("x,y", "image,y", "x,out"):  # the source's names or the --rename ones
        result = nhwc_onnx.convert(elementwise, options=ConvertOptions(
            rename={"x": "image", "y": "out"}, keep_layout=keep))
        assert result.model.io_permutations == {}
        assert [v.shape for v in result.model.graph.inputs] == [(1, 3, 7, 5)]
    assert nhwc_onnx.convert(elementwise, options=ConvertOptions(
        rename={"x": "image"})).model.io_permutations["image"] == [0, 2, 3, 1]
    source = onnx_conv_net(tmp_path / "m.onnx")
    for name in ("input", "image"):
        result = nhwc_onnx.convert(source, options=ConvertOptions(
            rename={"input": "image"}, mean={name: [1.0, 2.0, 3.0]}))
        assert list(json.loads(result.model.metadata["preprocessing"])) == ["image"]


def test_collisions_get_a_deterministic_suffix():
    graph = Graph("g")
    inputs = [graph.add_input(Value(n, "float32", (1, 3))) for n in ("x", "x_in")]
    inputs[1].meta["user_name"] = "x"  # e.g. two signature keys that meet
    node = graph.make_node("Add", inputs, name="add", outputs=["x_1"])
    out = node.outputs[0]
    out.meta["user_name"] = "x"
    graph.outputs.append(out)
    model = Model(graph)
    name_graph_io(model)
    assert [v.name for v in graph.inputs] == ["x", "x_1"]
    assert out.name == "x_2"
    assert out.meta["source_name"] == "x_1" and inputs[1].meta["source_name"] == "x_in"
    with pytest.raises(UsageError, match="'nope' is not a graph input or output"):
        name_graph_io(model, {"nope": "y"})


def test_a_refusal_still_suggests_its_exact_cut_when_an_output_is_renamed(tmp_path):
    source = onnx_conv_net(tmp_path / "m.onnx", unsupported="Erf")
    result = run_cli("convert", source, "-o", tmp_path / "c.onnx", "--rename", "output=y")
    assert result.exit_code == 1
    assert "--outputs relu_out" in result.stderr  # not 'converting the cut fails (--rename ...)'
