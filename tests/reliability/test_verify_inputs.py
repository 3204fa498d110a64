"""``verify --input`` takes what ``run`` takes: an array of the input's element type and its
shape (in the source's layout). Anything else - big-endian, datetime, records, text, a rank the
input does not have, float64 for a float32 input - is a usage error naming the input and what
it needs (exit 2), before either model runs; nothing is cast."""
from __future__ import annotations

import numpy as np
import pytest
from rel_models import write_source

import nhwc_onnx
from nhwc_onnx.errors import EXIT_OK, EXIT_USAGE, UsageError

SOURCE_SHAPE = (2, 3, 7, 5)  # the reliability model's input x, NCHW

ARRAYS = {
    "big-endian": (np.zeros(SOURCE_SHAPE, ">f4"), "needs float32, the array is >f4"),
    "datetime64": (np.zeros(SOURCE_SHAPE, "datetime64[s]"), "needs float32"),
    "structured": (np.zeros(SOURCE_SHAPE, [("a", "<f4")]), "needs float32"),
    "unicode": (np.full(SOURCE_SHAPE, "a"), "needs float32, the array is <U1"),
    "float64": (np.zeros(SOURCE_SHAPE, np.float64), "needs float32, the array is float64"),
    "rank 0": (np.float32(1.0), "needs shape (2, 3, 7, 5)"),
    "rank 3": (np.zeros(SOURCE_SHAPE[1:], np.float32), "the array has shape (3, 7, 5)"),
    "NHWC, not the source's layout": (np.zeros((2, 7, 5, 3), np.float32), "needs shape"),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("verify_inputs")
    source, _ = write_source(folder / "src", "onnx")
    converted = folder / "m.onnx"
    nhwc_onnx.convert(source, converted)
    return source, converted


@pytest.mark.parametrize("kind", list(ARRAYS))
def test_verify_input_the_runtime_cannot_take_is_a_usage_error(kind, models, run_cli,
                                                               tmp_path):
    source, converted = models
    array, says = ARRAYS[kind]
    np.save(tmp_path / "x.npy", array)
    result = run_cli("verify", source, converted, "--input", f"x={tmp_path / 'x.npy'}")
    assert result.exit_code == EXIT_USAGE, result.output
    err = result.stderr.strip()
    assert err.startswith("Error: Invalid value for '--input': input 'x' needs "), err
    assert says in err and len(err.splitlines()) == 1, err
    with pytest.raises(UsageError, match="input 'x' needs"):  # the API says the same
        nhwc_onnx.verify(source, converted, feeds={"x": array})


def test_verify_input_of_an_unknown_name_is_a_usage_error(models, run_cli, tmp_path):
    source, converted = models
    np.save(tmp_path / "x.npy", np.zeros(SOURCE_SHAPE, np.float32))
    result = run_cli("verify", source, converted, "--input", f"x={tmp_path / 'x.npy'}",
                     "--input", f"nope={tmp_path / 'x.npy'}")
    assert result.exit_code == EXIT_USAGE, result.output
    assert "the model has no input 'nope' (inputs: x)" in result.stderr


def test_verify_input_of_the_right_type_and_shape_runs(models, run_cli, tmp_path):
    source, converted = models
    x = np.random.default_rng(3).standard_normal(SOURCE_SHAPE).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = run_cli("verify", source, converted, "--input", f"x={tmp_path / 'x.npy'}")
    assert result.exit_code == EXIT_OK, result.output
    assert "verification: MATCH" in result.stdout
