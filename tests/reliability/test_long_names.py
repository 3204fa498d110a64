"""Names longer than a file system takes (255 bytes a component): an output name the user gave
is refused as unusable (exit 1), a source that long is unreadable (exit 2), each with one line
saying so; a name the tool derives (``run``'s .npy files, a batch's outputs and reports, the
hidden temp files) is shortened so that it fits and stays unique."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from rel_checks import folder_listing
from rel_models import write_source

from nhwc_onnx.errors import EXIT_INVALID, EXIT_OK, EXIT_UNREADABLE
from nhwc_onnx.files.writes import NAME_MAX

TOO_LONG = "n" * 300


def _one_error_line(result) -> str:
    err = result.stderr.strip()
    assert "internal error" not in err and "Traceback" not in err, err
    assert len(err.splitlines()) == 1 and err.startswith("Error: "), err
    return err


@pytest.mark.parametrize("option", ["-o", "--report", "--html"])
def test_output_name_too_long_is_an_unusable_output(option, run_cli, tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    out = tmp_path / "out"
    out.mkdir()
    paths = {"-o": out / "m.onnx", "--report": out / "r.json", "--html": out / "p.html"}
    paths[option] = out / f"{TOO_LONG}.x"
    args = ["convert", source, "-o", paths["-o"], "--report", paths["--report"]]
    if option == "--html":
        args += ["--verify", "--html", paths["--html"]]
    result = run_cli(*args)
    assert result.exit_code == EXIT_INVALID, result.output
    assert f"more than the {NAME_MAX}" in _one_error_line(result)
    assert folder_listing(out) == []


@pytest.mark.parametrize("command", ["convert", "info", "verify"])
def test_source_name_too_long_is_unreadable(command, run_cli, tmp_path):
    source = tmp_path / f"{TOO_LONG}.onnx"
    args = {"convert": ["convert", source, "-o", tmp_path / "m.onnx"],
            "info": ["info", source],
            "verify": ["verify", source, tmp_path / "m.onnx"]}[command]
    result = run_cli(*args)
    assert result.exit_code == EXIT_UNREADABLE, result.output
    assert "File name too long" in _one_error_line(result)


def _two_long_outputs(path, stem: str) -> None:
    """A dialect model (Relu and Sigmoid of one input): two outputs whose names share their
    first 300 characters."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    outs = [helper.make_tensor_value_info(f"{stem}{end}", TensorProto.FLOAT, [2, 3])
            for end in ("_relu", "_sigmoid")]
    nodes = [helper.make_node("Relu", ["x"], [outs[0].name], name="r"),
             helper.make_node("Sigmoid", ["x"], [outs[1].name], name="s")]
    graph = helper.make_graph(nodes, "g", [x], outs)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_run_shortens_long_tensor_names_uniquely(run_cli, tmp_path):
    model = tmp_path / "m.onnx"
    _two_long_outputs(model, TOO_LONG)
    feed = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", feed)
    out = tmp_path / "out"
    result = run_cli("run", model, "--input", f"x={tmp_path / 'x.npy'}", "-o", out)
    assert result.exit_code == EXIT_OK, result.output
    files = folder_listing(out)
    assert len(files) == 2 and all(len(f.encode()) <= NAME_MAX for f in files), files
    saved = sorted(np.load(out / f).tolist() for f in files)
    expected = sorted([np.maximum(feed, 0).tolist(), (1 / (1 + np.exp(-feed))).tolist()])
    np.testing.assert_allclose(saved, expected, atol=1e-6)


def test_batch_shortens_report_names_of_long_sources(run_cli, tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    stem = "s" * (NAME_MAX - len(".onnx"))  # the longest source name there can be
    long_source = source.with_name(f"{stem}.onnx")
    long_source.write_bytes(source.read_bytes())
    out = tmp_path / "out"
    result = run_cli("convert", source, long_source, "--output-dir", out, "--report", out)
    assert result.exit_code == EXIT_OK, result.output
    files = folder_listing(out)
    assert len(files) == 4 and all(len(f.encode()) <= NAME_MAX for f in files), files
    assert sum(f.endswith(".report.json") for f in files) == 2


def test_longest_output_name_is_written(run_cli, tmp_path):
    """A 255-byte -o: its hidden temp file (the name plus a random part) is shortened."""
    source, _ = write_source(tmp_path / "src", "onnx")
    output = tmp_path / "out" / ("o" * (NAME_MAX - len(".onnx")) + ".onnx")
    result = run_cli("convert", source, "-o", output)
    assert result.exit_code == EXIT_OK, result.output
    assert folder_listing(tmp_path / "out") == [output.name]
