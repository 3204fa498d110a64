"""Defects of a dialect file's tensors and names, through every command that
reads a dialect model (``check``, ``info``, ``run``, ``lower``).

Impossible dims - ``[-2, -2, 27]``, ``[2^32, 2^32, 1, 1]`` with no data, a product that
wraps int64 - were internal errors (exit 1, a numpy ValueError); they are exit 2, one line
naming the file and the tensor, status "unreadable" in ``check``'s JSON.
Two initializers with one name passed ``check`` (and ``run`` silently used the second);
onnx.checker rejects them. Now a ``duplicate-name`` rule violation: ``check`` exit 1, ``run``
and ``lower`` refuse.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from rel_checks import folder_listing

from nhwc_onnx.errors import EXIT_INVALID, EXIT_UNREADABLE

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny_convnet.onnx"


def _example() -> onnx.ModelProto:
    return onnx.load(str(EXAMPLE))


def _initializer(model: onnx.ModelProto, name: str) -> onnx.TensorProto:
    (tensor,) = [t for t in model.graph.initializer if t.name == name]
    return tensor


def _set_dims(tensor: onnx.TensorProto, dims: list[int], data: bytes | None = None) -> None:
    del tensor.dims[:]
    tensor.dims.extend(dims)
    if data is not None:
        tensor.raw_data = data


def negative_dims(model):
    """dw2/W holds 72 floats; (-2) * (-2) * 18 = 72 too, so a byte count alone passes."""
    _set_dims(_initializer(model, "dw2/W"), [-2, -2, 18])


def huge_dims_no_data(model):
    _set_dims(_initializer(model, "conv1/W"), [2**32, 2**32, 1, 1], b"")


def huge_dims_typed_field(model):
    """No raw_data at all: the (empty) float_data field is what is read."""
    tensor = _initializer(model, "conv1/W")
    _set_dims(tensor, [2**32, 2**32, 1, 1])
    tensor.ClearField("raw_data")


def dims_wrapping_int64(model):
    """2^31 * 2^31 * 4 * 4 bytes wraps to 0 in int64: numpy's product said 'needs 0 bytes'."""
    _set_dims(_initializer(model, "conv1/W"), [2**31, 2**31, 4, 1])


def constant_node_overflow(model):
    """The weight as a Constant node (the dialect's other way to store one) whose dims
    multiply past int64, with no data."""
    tensor = _initializer(model, "conv1/W")
    value = numpy_helper.from_array(numpy_helper.to_array(tensor), "")
    _set_dims(value, [2**62, 4, 1, 1], b"")
    model.graph.initializer.remove(tensor)
    model.graph.node.insert(0, helper.make_node("Constant", [], ["conv1/W"], name="conv1/W_const",
                                                domain="nhwc", value=value))


BAD_DIMS = {
    "dims [-2,-2,18]": (negative_dims, "negative dimension -2"),
    "dims [2^32,2^32,1,1], empty raw_data": (huge_dims_no_data, "holds 0 bytes"),
    "dims [2^32,2^32,1,1], no data field": (huge_dims_typed_field, "0 values for shape"),
    "dims wrapping int64": (dims_wrapping_int64, "needs 73786976294838206464"),
    "Constant node dims past int64": (constant_node_overflow, "Constant node 'conv1/W_const'"),
}
COMMANDS = ["check", "info", "run", "lower"]


def _command(command: str, model: Path, tmp_path: Path) -> list:
    extra = {"run": ["--random", "--output-dir", tmp_path / "out"],
             "lower": ["-o", tmp_path / "out" / "lowered.onnx"]}.get(command, [])
    return [command, model, *extra]


def _write(tmp_path: Path, edit) -> Path:
    model = _example()
    edit(model)
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    (tmp_path / "out").mkdir()
    return path


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", BAD_DIMS)
def test_impossible_dims_are_unreadable_not_internal_errors(case, command, tmp_path, run_cli):
    edit, fragment = BAD_DIMS[case]
    path = _write(tmp_path, edit)
    result = run_cli(*_command(command, path, tmp_path))
    err = result.stderr.strip()
    detail = f"exit {result.exit_code}: {err!r} ({result.exception!r})"
    assert result.exit_code == EXIT_UNREADABLE, detail
    assert "internal error" not in err and "Traceback" not in result.output, detail
    assert len(err.splitlines()) == 1 and err.startswith("Error: "), detail
    assert fragment in err and "model.onnx" in err, detail
    assert folder_listing(tmp_path / "out") == []


@pytest.mark.parametrize("case", BAD_DIMS)
def test_check_reports_impossible_dims_as_unreadable(case, tmp_path, run_cli):
    path = _write(tmp_path, BAD_DIMS[case][0])
    result = run_cli("check", "--format", "json", path)
    assert result.exit_code == EXIT_UNREADABLE, result.output
    (entry,) = json.loads(result.stdout)["files"]
    assert entry["status"] == "unreadable", entry
    assert "internal error" not in entry["error"]


def duplicate_initializer(model, same_values: bool):
    copy = model.graph.initializer.add()
    copy.CopyFrom(_initializer(model, "conv1/B"))
    if not same_values:
        copy.raw_data = np.full(8, 5, np.float32).tobytes()


def duplicate_input(model):
    model.graph.input.append(model.graph.input[0])


@pytest.mark.parametrize("edit", [
    pytest.param(lambda m: duplicate_initializer(m, True), id="same values"),
    pytest.param(lambda m: duplicate_initializer(m, False), id="other values"),
    pytest.param(duplicate_input, id="graph input listed twice")])
def test_duplicate_definitions_are_a_rule_violation(edit, tmp_path, run_cli):
    path = _write(tmp_path, edit)
    with pytest.raises(onnx.checker.ValidationError):  # the reference says the file is invalid
        onnx.checker.check_model(onnx.load(str(path)))
    result = run_cli("check", "--format", "json", path)
    assert result.exit_code == EXIT_INVALID, result.output
    (entry,) = json.loads(result.stdout)["files"]
    assert entry["status"] == "invalid"
    assert [i["rule"] for i in entry["issues"]] == ["duplicate-name"], entry["issues"]
    name = "image" if "input" in entry["issues"][0]["message"] else "conv1/B"
    assert f"'{name}'" in entry["issues"][0]["message"]
    for command in ("run", "lower"):
        refused = run_cli(*_command(command, path, tmp_path))
        assert refused.exit_code == EXIT_INVALID, refused.output
        assert "duplicate-name" in refused.stderr
    assert folder_listing(tmp_path / "out") == []


def test_nameless_graph_output_is_a_rule_violation_not_an_internal_error(tmp_path, run_cli):
    def nameless_output(model):
        model.graph.output[0].name = ""

    path = _write(tmp_path, nameless_output)
    result = run_cli("check", "--format", "json", path)
    assert result.exit_code == EXIT_INVALID, result.output
    (entry,) = json.loads(result.stdout)["files"]
    assert [i["rule"] for i in entry["issues"]] == ["graph-output"], entry["issues"]
    for command in ("run", "lower"):
        refused = run_cli(*_command(command, path, tmp_path))
        assert refused.exit_code == EXIT_INVALID, refused.output
        assert "empty name" in refused.stderr and "internal error" not in refused.stderr
    assert folder_listing(tmp_path / "out") == []


def test_one_definition_per_name_still_passes(tmp_path, run_cli):
    """The guard flags duplicates only: the untouched example and the same weight held by a
    Constant node (a name defined once, another way) are valid."""
    def as_constant(model):
        tensor = _initializer(model, "conv1/B")
        model.graph.initializer.remove(tensor)
        model.graph.node.insert(0, helper.make_node("Constant", [], ["conv1/B"], domain="nhwc",
                                                    name="conv1/B_const", value=tensor))

    for index, edit in enumerate((lambda m: None, as_constant)):
        (tmp_path / str(index)).mkdir()
        path = _write(tmp_path / str(index), edit)
        result = run_cli("check", path)
        assert result.exit_code == 0, result.output


def _external(tmp_path: Path, *, missing: int = 0, offset: int = 16) -> Path:
    """The example with conv1/W stored in weights.bin at ``offset``, the file ``missing``
    bytes short of the tensor's end."""
    model = _example()
    tensor = _initializer(model, "conv1/W")
    data = tensor.raw_data
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", str(offset)),
                       ("length", str(len(data)))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    (tmp_path / "weights.bin").write_bytes(bytes(offset) + data[:len(data) - missing])
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    (tmp_path / "out").mkdir()
    return path


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("missing", [1, 4])
def test_truncated_external_data_is_unreadable(command, missing, tmp_path, run_cli):
    """The file ends 1 (or 4) bytes before the tensor does: exit 2 naming the file and the
    tensor, nothing written, never a read past the end."""
    path = _external(tmp_path, missing=missing)
    result = run_cli(*_command(command, path, tmp_path))
    err = result.stderr.strip()
    detail = f"exit {result.exit_code}: {err!r} ({result.exception!r})"
    assert result.exit_code == EXIT_UNREADABLE, detail
    assert len(err.splitlines()) == 1 and "too short" in err and "conv1/W" in err, detail
    assert "model.onnx" in err and "internal error" not in err, detail
    assert folder_listing(tmp_path / "out") == []


@pytest.mark.parametrize("command", COMMANDS)
def test_external_data_ending_at_the_file_end_reads(command, tmp_path, run_cli):
    """The boundary: a tensor whose bytes end exactly where the file ends is whole."""
    path = _external(tmp_path, missing=0)
    result = run_cli(*_command(command, path, tmp_path))
    assert result.exit_code == 0, result.output
