"""Every public function says which parameter is wrong, before any work.

A wrong type is a TypeError whose message starts with the parameter's name (it failed inside
numpy, os or onnx, or iterated a string's characters); ``nhwc_onnx.check`` takes folders and
globs as the command line does.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import nhwc_onnx
from nhwc_onnx.errors import ModelLoadError
from nhwc_onnx.runtime.standard_onnx import lower_for_export
from tests.reliability.rel_models import write_source


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """(source, converted): the reliability suite's ONNX model (x: 2x3x7x5 -> y: 2x6)."""
    folder = tmp_path_factory.mktemp("api")
    source, _ = write_source(folder / "src", "onnx")
    converted = folder / "converted" / "m.onnx"
    nhwc_onnx.convert(source, converted)
    return source, converted


def _raises(parameter: str, call, *args, **kwargs) -> str:
    with pytest.raises(TypeError) as caught:
        call(*args, **kwargs)
    message = str(caught.value)
    assert message.startswith(f"{parameter}: expected "), message
    return message


def test_convert_names_source_and_output(models, tmp_path):
    source, _ = models
    _raises("source", nhwc_onnx.convert, None)
    _raises("output", nhwc_onnx.convert, source, 3)
    _raises("options", nhwc_onnx.convert, source, options={"batch": 1})


def test_verify_names_feeds_and_the_paths(models):
    source, converted = models
    message = _raises("feeds", nhwc_onnx.verify, source, converted,
                      feeds=[np.zeros((2, 3, 7, 5), np.float32)])
    assert "got list" in message  # it failed inside numpy
    _raises("source", nhwc_onnx.verify, 7, converted)
    _raises("converted", nhwc_onnx.verify, source, 7)


def test_run_names_model_feeds_and_seed(models):
    _, converted = models
    _raises("model", nhwc_onnx.run, None)
    _raises("feeds", nhwc_onnx.run, converted, [np.zeros((2, 7, 5, 3), np.float32)])
    _raises("seed", nhwc_onnx.run, converted, random_inputs=True, seed="1")
    _raises("random_inputs", nhwc_onnx.run, converted, random_inputs="yes")
    # one tensor name as a str is that name, not its characters
    result = nhwc_onnx.run(converted, random_inputs=True, intermediate="y")
    assert list(result.outputs) == ["y"]


def test_lower_and_lower_for_export_name_their_parameters(models, tmp_path):
    _, converted = models
    _raises("model", nhwc_onnx.lower, 123, tmp_path / "low.onnx")
    _raises("output", nhwc_onnx.lower, converted, 5)
    for path in (str(converted), converted):
        message = _raises("model", lower_for_export, path)
        assert "nhwc_onnx.lower(path, output)" in message
    assert not (tmp_path / "low.onnx").exists()


def test_info_names_path(models):
    _raises("path", nhwc_onnx.info, 123)
    assert nhwc_onnx.info(models[1])["format"] == "nhwc dialect"


def test_check_takes_files_folders_and_globs_like_the_command_line(models, tmp_path):
    _, converted = models
    folder = converted.parent
    assert nhwc_onnx.check(converted) == {str(converted): []}
    assert nhwc_onnx.check(folder) == {str(converted): []}  # raised ModelLoadError before
    assert nhwc_onnx.check(Path(folder)) == {str(converted): []}
    assert nhwc_onnx.check(f"{folder}/*.onnx") == {str(converted): []}
    assert nhwc_onnx.check([converted, folder]) == {str(converted): []}  # each file once
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelLoadError, match="no .onnx model there"):
        nhwc_onnx.check(empty)
    _raises("paths", nhwc_onnx.check, 123)
    _raises("paths", nhwc_onnx.check, [converted, 1])
