"""Mistakes are usage errors (exit 2), messages say what
happened, a warning is printed once, and `-o` into missing folders behaves as README says.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from nhwc_onnx.errors import EXIT_INVALID, EXIT_OK, EXIT_USAGE, EXIT_VERIFY_FAILED
from tests.reliability.rel_models import write_source


@pytest.fixture
def sources(tmp_path) -> dict[str, tuple[Path, list[str]]]:
    return {fmt: write_source(tmp_path / fmt, fmt) for fmt in ("onnx", "tf", "caffe")}


def _usage_error(result) -> str:
    err = result.stderr.strip()
    assert result.exit_code == EXIT_USAGE, (result.exit_code, err)
    assert "internal error" not in err and "Traceback" not in err
    assert err.splitlines()[-1].startswith("Error: ")
    return err


@pytest.mark.parametrize("fmt", ["onnx", "tf", "caffe"])
@pytest.mark.parametrize("mistake, says", [
    (["--outputs", "nosuch"], "--outputs names 'nosuch"),
    (["--input-shape", "nosuch=1,2,3,4"],
     "--input-shape names 'nosuch', which is not a graph input"),
])
def test_a_name_the_model_does_not_have_is_a_usage_error(fmt, mistake, says, sources,
                                                          invoke, tmp_path):
    source, extra = sources[fmt]
    result = invoke("convert", source, *extra, "-o", tmp_path / "m.onnx", *mistake)
    assert says in _usage_error(result)  # exit 1 before, like an invalid model
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.parametrize("fmt, given", [("onnx", "x=2,3,7"), ("tf", "x=2,7,5,3,1"),
                                         ("caffe", "data=2,105")])
def test_an_input_shape_of_another_rank_is_a_usage_error(fmt, given, sources, invoke,
                                                         tmp_path):
    """Each source declares a rank-4 input; a shape of rank 3 or 5 converted a model for an
    input it does not take (ONNX, Caffe) or failed later inside a node (TF: MatMul inner
    dimensions differ, exit 1)."""
    source, extra = sources[fmt]
    result = invoke("convert", source, *extra, "-o", tmp_path / "m.onnx", "--input-shape", given)
    err = _usage_error(result)
    assert f"{given} gives {len(given.split(','))} dimension(s), but the input has rank 4" in err
    assert not (tmp_path / "m.onnx").exists()
    name = given.split("=")[0]
    right = {"onnx": "2,3,7,5", "tf": "2,7,5,3", "caffe": "2,3,7,5"}[fmt]
    ok = invoke("convert", source, *extra, "-o", tmp_path / "m.onnx", "--input-shape",
                f"{name}={right}")
    assert ok.exit_code == EXIT_OK, ok.stderr


@pytest.mark.parametrize("fmt", ["onnx", "tf"])
def test_an_input_name_the_model_does_not_have_is_a_usage_error(fmt, sources, invoke,
                                                                  tmp_path):
    source, extra = sources[fmt]
    result = invoke("convert", source, *extra, "-o", tmp_path / "m.onnx", "--inputs", "nosuch")
    assert "--inputs names 'nosuch" in _usage_error(result)


def test_a_caffe_net_without_weights_is_a_usage_error(sources, invoke, tmp_path):
    source, _ = sources["caffe"]
    result = invoke("convert", source, "-o", tmp_path / "m.onnx")
    assert "needs weights: pass a .caffemodel with --weights" in _usage_error(result)
    missing = invoke("convert", source, "--weights", tmp_path / "none.caffemodel",
                     "-o", tmp_path / "m.onnx")
    assert "no such file" in _usage_error(missing)  # (it already was exit 2)


@pytest.mark.parametrize("fmt, option, says", [
    ("onnx", ["--weights", "random"], "--weights: an ONNX model holds its own weights"),
    ("tf", ["--weights", "random"], "--weights: a TensorFlow model holds its own weights"),
    ("tf", ["--signature", "other"],
     "--signature: only a TensorFlow SavedModel folder has signatures"),
    ("onnx", ["--signature", "other"], "--signature: only a TensorFlow SavedModel folder"),
])
def test_an_option_the_source_does_not_read_is_a_usage_error(fmt, option, says, sources,
                                                             invoke, tmp_path):
    source, _ = sources[fmt]
    result = invoke("convert", source, "-o", tmp_path / "m.onnx", *option)
    assert says in _usage_error(result)  # silently ignored before
    assert not (tmp_path / "m.onnx").exists()


def test_a_batch_gives_weights_to_the_caffe_nets_and_refuses_them_when_none_is(sources, invoke,
                                                                                tmp_path):
    caffe, onnx_source = sources["caffe"][0], sources["onnx"][0]
    mixed = invoke("-q", "convert", caffe, onnx_source, "--weights", "random",
                   "--output-dir", tmp_path / "mixed")
    assert mixed.exit_code == EXIT_OK, mixed.stderr
    assert sorted(os.listdir(tmp_path / "mixed")) == ["deploy.onnx", "model.onnx"]
    alone = invoke("convert", onnx_source, sources["tf"][0], "--weights", "random",
                   "--output-dir", tmp_path / "alone")
    assert "no source reads it" in _usage_error(alone)
    assert not (tmp_path / "alone").exists()


def test_o_and_output_dir_together_say_so(sources, invoke, tmp_path):
    source, _ = sources["onnx"]
    result = invoke("convert", source, "-o", tmp_path / "a.onnx", "--output-dir", tmp_path / "d")
    err = _usage_error(result)
    assert "several sources" not in err  # there is one
    assert "-o names the output file of one source, --output-dir the folder of a batch" in err


def test_a_folder_source_spelled_dot_is_named_by_its_folder(tmp_path, monkeypatch):
    from nhwc_onnx.conversion.several import output_names

    saved = tmp_path / "resnet_saved"
    (saved / "sub").mkdir(parents=True)
    monkeypatch.chdir(saved)
    assert output_names([".", "sub/..", "./"], Path("b6")) == [
        Path("b6/resnet_saved.onnx"), Path("b6/resnet_saved_1.onnx"),
        Path("b6/resnet_saved_2.onnx")]  # was b6/.onnx


def test_a_failed_verification_says_nothing_was_written(invoke, examples, tmp_path):
    out = tmp_path / "tiny.onnx"
    result = invoke("convert", examples / "caffe" / "tiny_net.prototxt", "--weights",
                    examples / "caffe" / "tiny_net.caffemodel", "-o", out, "--verify",
                    "--atol", "0", "--rtol", "0")
    assert result.exit_code == EXIT_VERIFY_FAILED, result.stderr
    first = result.stdout.splitlines()[0]
    assert " -> nothing written (caffe, " in first and "None" not in first
    assert not out.exists()


def _softmax_model(path: Path) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=2)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 5, 7])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_allow_transpose_warns_once_per_inserted_transpose(tmp_path):
    """A real process: the passes' logger and the command's own 'Warning:' line both printed
    each warning."""
    source = _softmax_model(tmp_path / "softmax.onnx")
    proc = subprocess.run([sys.executable, "-m", "nhwc_onnx.cli", "convert", str(source), "-o",
                           str(tmp_path / "m.onnx"), "--allow-transpose"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == EXIT_OK, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 and all(line.startswith("Warning: inserted Transpose") for line in lines)
    assert len(set(lines)) == 2, lines


# -- -o into folders that do not exist yet ---------------------------------------------------


def test_o_creates_missing_folders_only_when_it_writes(sources, invoke, tmp_path):
    source, _ = sources["onnx"]
    out = tmp_path / "new" / "deeper" / "m.onnx"
    assert invoke("-q", "convert", source, "-o", out).exit_code == EXIT_OK
    assert out.is_file()
    refused = _softmax_model(tmp_path / "softmax.onnx")  # refused without --allow-transpose
    result = invoke("convert", refused, "-o", tmp_path / "other" / "dir" / "m.onnx")
    assert result.exit_code == EXIT_INVALID
    assert not (tmp_path / "other").exists()


def test_o_under_a_dangling_symlink_is_refused_before_converting(sources, invoke, tmp_path):
    source, _ = sources["onnx"]
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    result = invoke("convert", source, "-o", link / "sub" / "m.onnx")
    assert result.exit_code == EXIT_INVALID
    err = result.stderr.strip()
    assert err == (f"Error: {link / 'sub' / 'm.onnx'}: '{link}' is a symlink to "
                   f"'{tmp_path / 'gone'}', which is not an existing folder"), err
    assert "cannot create" not in err  # found by the plan, not after converting
    assert not (tmp_path / "gone").exists()
