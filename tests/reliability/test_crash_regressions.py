"""Regression tests for the crashes in tests/reliability/CRASHES.md (one test per entry).

Marked ``xfail(strict=True)`` while the bug is open: once fixed the test passes, strict xfail
turns that into a failure, and the fixer removes the mark. The memory bombs and the hang run
in a child process under RLIMIT_AS and a timeout.
"""
from __future__ import annotations

import errno
import json
import os
import subprocess

import pytest
from crash_repro import ONNX_MALFORMED, ONNX_MALFORMED_18, REPROS, run
from rel_limits import HERE, run_limited
from rel_models import write_source

from nhwc_onnx.api import convert
from nhwc_onnx.errors import ConversionBugError, NhwcOnnxError, OutputPathError
from nhwc_onnx.options import ConvertOptions


def _in_process(name: str, tmp_path):
    """Convert the reproduction here; the raised exception (None when it converted)."""
    source, framework, options = REPROS[name](tmp_path)
    out_dir = tmp_path / "out"
    try:
        convert(source, out_dir / "model.nhwc.onnx", options.replace(framework=framework))
    except Exception as exc:  # noqa: BLE001 - the test judges the type
        assert not out_dir.exists() or not list(out_dir.iterdir()), "output left behind"
        return exc
    return None


def _in_child(name: str, timeout: float) -> dict:
    """Convert the reproduction in a memory-bounded child; its outcome dict."""
    try:
        proc = run_limited([str(HERE / "crash_repro.py"), name], timeout)
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout", "message": f"over {timeout} s", "seconds": timeout}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"outcome": f"child died (exit {proc.returncode})",
                "message": proc.stderr.strip().splitlines()[-1:] or "", "seconds": None}
    return json.loads(lines[-1])


def _project_error_names() -> set[str]:
    from nhwc_onnx import errors

    return {name for name, obj in vars(errors).items()
            if isinstance(obj, type) and issubclass(obj, NhwcOnnxError)}


def _assert_refused_as_user_error(outcome: dict) -> None:
    """A project error that blames the input, not nhwc-onnx (ConversionBugError)."""
    assert outcome["outcome"] in _project_error_names() - {"ConversionBugError"}, outcome


def test_crash1_onnx_node_name_not_utf8(tmp_path):
    exc = _in_process("onnx_node_name_not_utf8", tmp_path)
    assert isinstance(exc, NhwcOnnxError), repr(exc)


def test_crash2_onnx_op_type_not_utf8(tmp_path):
    exc = _in_process("onnx_op_type_not_utf8", tmp_path)
    assert isinstance(exc, NhwcOnnxError), repr(exc)


@pytest.mark.parametrize("name", ["tf_conv_stride_zero", "tf_pool_stride_zero"])
def test_crash3_tf_zero_stride(name, tmp_path):
    exc = _in_process(name, tmp_path)
    assert isinstance(exc, NhwcOnnxError) and not isinstance(exc, ConversionBugError), repr(exc)


def test_crash4_tf_fill_with_absurd_dims_is_refused_without_allocating():
    _assert_refused_as_user_error(_in_child("tf_fill_absurd_dims", timeout=60))


def test_crash5_caffe_blob_data_with_wrong_wire_type(tmp_path):
    exc = _in_process("caffe_blob_data_as_varint", tmp_path)
    assert isinstance(exc, NhwcOnnxError), repr(exc)


def test_crash6_output_under_a_regular_file(tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the output folder should be")
    with pytest.raises(OutputPathError):
        convert(source, blocker / "model.nhwc.onnx", ConvertOptions(framework="onnx"))


def test_crash6_disk_full_while_writing_is_a_project_error(tmp_path, monkeypatch):
    source, _ = write_source(tmp_path / "src", "onnx")
    out_dir = tmp_path / "out"
    out_dir.mkdir()

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    try:
        with pytest.raises(NhwcOnnxError):
            convert(source, out_dir / "model.nhwc.onnx", ConvertOptions(framework="onnx"))
    finally:
        assert list(out_dir.iterdir()) == []  # the temp file is removed either way


@pytest.mark.slow
def test_crash7_onnx_range_of_2_pow_40_is_refused_quickly():
    outcome = _in_child("onnx_range_2_pow_40", timeout=60)
    _assert_refused_as_user_error(outcome)
    assert outcome["seconds"] < 5, outcome


@pytest.mark.slow
def test_crash8_onnx_resize_by_a_million_is_refused_quickly():
    outcome = _in_child("onnx_resize_scale_1e6", timeout=15)
    _assert_refused_as_user_error(outcome)


@pytest.mark.parametrize("name", ["caffe_random_weights_absurd", "caffe_random_weights_large"])
def test_crash9_caffe_random_weights_have_a_size_limit(name):
    _assert_refused_as_user_error(_in_child(name, timeout=60))


def test_crash10_onnx_pool_stride_zero_blames_the_model(tmp_path):
    exc = _in_process("onnx_pool_stride_zero", tmp_path)
    assert isinstance(exc, NhwcOnnxError) and not isinstance(exc, ConversionBugError), repr(exc)


def test_crash11_onnx_conv_with_two_outputs_blames_the_model(tmp_path):
    exc = _in_process("onnx_conv_two_outputs", tmp_path)
    assert isinstance(exc, NhwcOnnxError) and not isinstance(exc, ConversionBugError), repr(exc)


def test_crash12_tf_int16_input_is_unsupported_not_a_bug(tmp_path):
    exc = _in_process("tf_int16_input", tmp_path)
    assert isinstance(exc, NhwcOnnxError) and not isinstance(exc, ConversionBugError), repr(exc)


def test_crash12_tf_resize_to_size_zero_is_refused_not_a_bug(tmp_path):
    exc = _in_process("tf_resize_to_size_zero", tmp_path)
    assert isinstance(exc, NhwcOnnxError) and not isinstance(exc, ConversionBugError), repr(exc)


def test_crash17_tf_concat_without_inputs(tmp_path):
    exc = _in_process("tf_concat_without_inputs", tmp_path)
    assert isinstance(exc, NhwcOnnxError), repr(exc)


def test_crash14_tf_pbtxt_nested_too_deeply(tmp_path):
    exc = _in_process("tf_pbtxt_nested_too_deeply", tmp_path)
    assert isinstance(exc, NhwcOnnxError), repr(exc)


@pytest.mark.parametrize("name", sorted(set(ONNX_MALFORMED) - set(ONNX_MALFORMED_18)))
def test_crash15_malformed_onnx_node_blames_the_model(name, tmp_path):
    exc = _in_process(f"onnx_malformed_{name}", tmp_path)
    assert isinstance(exc, NhwcOnnxError) and not isinstance(exc, ConversionBugError), repr(exc)


@pytest.mark.parametrize("name", sorted(ONNX_MALFORMED_18))
def test_crash18_malformed_onnx_node_blames_the_model(name, tmp_path):
    exc = _in_process(f"onnx_malformed_{name}", tmp_path)
    assert isinstance(exc, NhwcOnnxError) and not isinstance(exc, ConversionBugError), repr(exc)


def test_crash16_onnx_avgpool_pads_2_pow_40_is_refused_without_allocating():
    _assert_refused_as_user_error(_in_child("onnx_avgpool_pads_2_pow_40", timeout=60))


@pytest.mark.slow
def test_crash19_onnx_tile_by_2_pow_20_converts_or_refuses_quickly():
    outcome = _in_child("onnx_tile_by_2_pow_20", timeout=20)
    assert outcome["outcome"] not in ("timeout", "ConversionBugError"), outcome
    assert outcome["outcome"] == "converted" or outcome["outcome"] in _project_error_names(), \
        outcome


def test_crash20_onnx_range_with_an_empty_start(tmp_path):
    exc = _in_process("onnx_range_with_an_empty_start", tmp_path)
    assert isinstance(exc, NhwcOnnxError), repr(exc)


@pytest.mark.parametrize("name", ["tf_pad_with_one_padding_value",
                                  "tf_argmin_with_a_tensor_dimension",
                                  "tf_fill_with_a_tensor_value"])
def test_crash21_tf_malformed_constant_inputs(name, tmp_path):
    exc = _in_process(name, tmp_path)
    assert isinstance(exc, NhwcOnnxError), repr(exc)


def test_crash22_onnx_maxpool_kernel_2_pow_40_is_refused_without_allocating():
    _assert_refused_as_user_error(_in_child("onnx_maxpool_kernel_2_pow_40_same", timeout=60))


@pytest.mark.slow
def test_crash23_onnx_constant_declared_2_pow_40_does_not_eat_memory():
    outcome = _in_child("onnx_expanded_space_to_depth_area_2_pow_40", timeout=60)
    assert outcome["outcome"] in _project_error_names(), outcome
    assert outcome["peak_mb"] < 1024, outcome


def test_every_reproduction_is_covered_by_a_test():
    text = (HERE / "test_crash_regressions.py").read_text()
    named = [n for n in REPROS if not n.startswith("onnx_malformed_")]
    assert [name for name in named if name not in text] == []


def test_reproductions_run_in_process(tmp_path, monkeypatch):
    # The runner itself works (a regression test that cannot run would xfail for nothing):
    # it reports the exception type and message of a refused input, and "converted" for a
    # valid model run the same way.
    for sub in ("bad", "bad_in_process", "good"):
        (tmp_path / sub).mkdir()
    outcome = run("onnx_conv_two_outputs", tmp_path / "bad")
    expected = _in_process("onnx_conv_two_outputs", tmp_path / "bad_in_process")
    assert outcome["outcome"] == type(expected).__name__, outcome
    assert outcome["outcome"] in _project_error_names() - {"ConversionBugError"}, outcome
    assert outcome["message"] and outcome["message"] == str(expected).splitlines()[0][:300]
    from nhwc_onnx.options import ConvertOptions

    monkeypatch.setitem(REPROS, "valid_onnx", lambda folder: (
        write_source(folder, "onnx")[0], "onnx", ConvertOptions()))
    good = run("valid_onnx", tmp_path / "good")
    assert good["outcome"] == "converted" and good["message"] == "", good
    assert (tmp_path / "good" / "out" / "model.nhwc.onnx").stat().st_size > 0
    assert good["peak_mb"] > 0
