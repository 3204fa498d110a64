"""Every command with a symbolic batch, through the command line: convert (report, metadata,
warnings said once, in terms of the batch's name), verify (batch 1, 3 and 17, text and JSON),
run (--random at batch 1 unless --batch), info (the name, for a source and a dialect file),
and the batch rule's usage errors."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from tests.cli_runner import run_cli
from tests.conversion.symbolic_batch import exporters

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def source(tmp_path) -> Path:
    path = tmp_path / "ts.onnx"
    onnx.save(exporters.torchscript(17), path)
    return path


def _ok(result):
    assert result.exit_code == 0, result.output
    return result


def test_convert_reports_and_records_the_symbolic_batch(source, tmp_path):
    import jsonschema

    out, report = tmp_path / "out.onnx", tmp_path / "report.json"
    result = _ok(run_cli("convert", source, "-o", out, "--report", report, "--verify"))
    assert "the symbolic batch at 1, 3 and 17" in result.stdout
    assert all(f"(batch {n})" in result.stdout for n in (1, 3, 17))
    data = json.loads(report.read_text())
    jsonschema.validate(data, json.loads((REPO / "docs" / "report-schema.json").read_text()))
    assert data["batch"] == {"dim_param": "batch", "inputs": ["input"], "outputs": ["output"]}
    assert data["inputs"][0]["shape"] == ["batch", exporters.H, exporters.W, 3]
    assert data["verification"]["batches"] == [1, 3, 17]
    assert [o["batch"] for o in data["verification"]["outputs"]] == [1, 3, 17]
    assert "symbolic_batch" in data["timings"]


def test_verify_compares_at_batch_1_and_3_in_text_and_json(source, tmp_path):
    out = tmp_path / "out.onnx"
    _ok(run_cli("convert", source, "-o", out))
    text = _ok(run_cli("verify", source, out)).stdout
    assert "shape (1, 5)" in text and "shape (3, 5)" in text
    data = json.loads(_ok(run_cli("verify", source, out, "--format", "json")).stdout)
    assert data["ok"] is True and data["batches"] == [1, 3, 17]
    assert [(o["batch"], o["source_shape"]) for o in data["outputs"]] == [(1, [1, 5]),
                                                                          (3, [3, 5]),
                                                                          (17, [17, 5])]


def test_verify_reports_a_mismatch_at_each_batch(source, tmp_path):
    """Against a source with another bias, every size differs and each is reported."""
    out = tmp_path / "out.onnx"
    _ok(run_cli("convert", source, "-o", out))
    other = onnx.load(source)
    for init in other.graph.initializer:
        if init.name == "fc.bias":
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) + 1.0, init.name))
    other_path = tmp_path / "other.onnx"
    onnx.save(other, other_path)
    result = run_cli("verify", other_path, out, "--format", "json")
    assert result.exit_code == 3
    data = json.loads(result.stdout)
    assert {o["batch"]: o["within"] for o in data["outputs"]} == {1: False, 3: False, 17: False}


def test_run_random_takes_batch_1_unless_batch_is_given(source, tmp_path):
    out = tmp_path / "out.onnx"
    _ok(run_cli("convert", source, "-o", out))
    one = _ok(run_cli("run", out, "--random", "--output-dir", tmp_path / "one"))
    assert f"input  input: float32 1x{exporters.H}x{exporters.W}x3" in one.stdout
    assert np.load(tmp_path / "one" / "output.npy").shape == (1, 5)
    three = _ok(run_cli("run", out, "--random", "--batch", "3", "--output-dir",
                        tmp_path / "three"))
    assert f"input  input: float32 3x{exporters.H}x{exporters.W}x3" in three.stdout
    assert np.load(tmp_path / "three" / "output.npy").shape == (3, 5)
    # an --input array's batch is the batch of the random ones too (here: the only input)
    x = np.zeros((4, exporters.H, exporters.W, 3), np.float32)
    np.save(tmp_path / "x.npy", x)
    _ok(run_cli("run", out, "--input", f"input={tmp_path / 'x.npy'}", "--output-dir",
                       tmp_path / "four"))
    assert np.load(tmp_path / "four" / "output.npy").shape == (4, 5)


def test_run_batch_on_a_fixed_batch_model_is_a_usage_error(tmp_path):
    model = exporters.torchscript(17)
    for value in (model.graph.input[0], model.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_value = 1
    source, out = tmp_path / "static.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    _ok(run_cli("convert", source, "-o", out))
    result = run_cli("run", out, "--random", "--batch", "3", "--output-dir", tmp_path / "o")
    assert result.exit_code == 2
    assert "--batch" in result.stderr and "fixed" in result.stderr


def test_info_shows_the_batch_by_name_for_a_source_and_a_dialect_file(source, tmp_path):
    out = tmp_path / "out.onnx"
    _ok(run_cli("convert", source, "-o", out))
    src = _ok(run_cli("info", source)).stdout
    assert f"input  input: float32 batch x 3 x {exporters.H} x {exporters.W}" in src
    assert "output output: float32 batch x 5" in src
    dialect = _ok(run_cli("info", out)).stdout
    assert f"input  input: float32 batch x {exporters.H} x {exporters.W} x 3" in dialect
    data = json.loads(_ok(run_cli("info", out, "--format", "json")).stdout)
    assert json.loads(data["metadata"]["batch"])["dim_param"] == "batch"


def test_check_and_lower_keep_the_symbolic_batch(source, tmp_path):
    out, lowered = tmp_path / "out.onnx", tmp_path / "lowered.onnx"
    _ok(run_cli("convert", source, "-o", out))
    assert "valid" in _ok(run_cli("check", out)).stdout
    _ok(run_cli("lower", out, "-o", lowered))
    proto = onnx.load(lowered)
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def _warning_model(batch) -> onnx.ModelProto:
    """A softmax over H (axis 2 of NCHW): --allow-transpose inserts Transposes, each warned."""
    w = numpy_helper.from_array(np.ones((4, 3, 1, 1), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Softmax", ["c"], ["y"], name="sm", axis=2)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [batch, 3, 5, 7])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [batch, 4, 5, 7])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_warnings_are_said_once_and_in_terms_of_the_batch_name(tmp_path):
    lines = {}
    for label, batch in (("fixed", 1), ("symbolic", "N")):
        path = tmp_path / f"{label}.onnx"
        onnx.save(_warning_model(batch), path)
        result = _ok(run_cli("convert", path, "-o", tmp_path / f"{label}.out.onnx",
                             "--allow-transpose"))
        lines[label] = [ln for ln in result.stderr.splitlines() if "inserted Transpose" in ln]
    assert len(lines["symbolic"]) == len(lines["fixed"]) > 0
    assert all("(N, 5, 7, 4)" in ln for ln in lines["symbolic"])
    assert not any("11" in ln or "13" in ln for ln in lines["symbolic"])


def test_an_unknown_dimension_other_than_the_batch_is_said_in_command_line_words(tmp_path):
    model = exporters.torchscript(13)
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "height"
    path = tmp_path / "h.onnx"
    onnx.save(model, path)
    result = run_cli("convert", path, "-o", tmp_path / "out.onnx")
    assert result.exit_code == 1
    assert "--input-shape input=-1,3,D2," in result.stderr
    assert "input_shapes" not in result.stderr
    _ok(run_cli("convert", path, "-o", tmp_path / "out.onnx", "--input-shape",
                f"input=-1,3,{exporters.H},{exporters.W}"))
    from nhwc_onnx.serialize import load

    assert load(tmp_path / "out.onnx").graph.inputs[0].shape[0] == "batch"


@pytest.mark.parametrize("args,fragment", [
    (["--input-shape", "input=2,3,10,14", "--batch", "3"], "gives the batch 2"),
    (["--input-shape", "input=1,-1,10,14"], "the first may be -1"),
])
def test_batch_rule_usage_errors(source, tmp_path, args, fragment):
    result = run_cli("convert", source, "-o", tmp_path / "out.onnx", *args)
    assert result.exit_code == 2
    assert fragment in result.stderr
    assert not (tmp_path / "out.onnx").exists()


def test_the_help_states_the_batch_rule():
    text = _ok(run_cli("convert", "-h")).stdout
    flat = " ".join(text.split())
    assert "Set axis 0 (the batch) of every graph input to N." in flat
    assert "a symbolic batch stays symbolic and a fixed one stays fixed" in flat
