"""Output safety: never overwrite an input, replace an existing output atomically and only on
success, leave no temp file behind whatever happens."""
from __future__ import annotations

import os
from pathlib import Path

import onnx
import pytest
from rel_checks import assert_clean_failure, folder_listing
from rel_models import write_source

from nhwc_onnx.api import convert
from nhwc_onnx.errors import EXIT_INVALID, EXIT_UNREADABLE, OutputPathError
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.serialize import writer

FORMATS = ["onnx", "tf", "caffe"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_output_equal_to_the_source_is_refused(fmt, tmp_path, run_cli):
    source, extra = write_source(tmp_path, fmt)
    before = source.read_bytes()
    result = run_cli("convert", source, "-o", source, *extra)
    assert result.exit_code == EXIT_INVALID, result.stderr
    assert "overwrite the input" in result.stderr
    assert source.read_bytes() == before


@pytest.mark.parametrize("spelling", ["dotted", "symlink", "hardlink", "relative"])
def test_output_naming_the_source_another_way_is_refused(spelling, tmp_path, monkeypatch):
    source, _ = write_source(tmp_path / "src", "onnx")
    before = source.read_bytes()
    if spelling == "dotted":
        output = tmp_path / "src" / ".." / "src" / "." / source.name
    elif spelling == "symlink":
        output = tmp_path / "link.onnx"
        output.symlink_to(source)
    elif spelling == "hardlink":
        output = tmp_path / "hard.onnx"
        os.link(source, output)
    else:
        monkeypatch.chdir(tmp_path / "src")
        output = source.name
    with pytest.raises(OutputPathError):
        convert(source, output, ConvertOptions(framework="onnx"))
    assert source.read_bytes() == before


def test_output_equal_to_the_caffe_weights_is_refused(tmp_path, run_cli):
    source, extra = write_source(tmp_path, "caffe")
    weights = extra[1]
    before = Path(weights).read_bytes()
    result = run_cli("convert", source, "--weights", weights, "-o", weights)
    assert result.exit_code == EXIT_INVALID and "overwrite the input" in result.stderr
    assert Path(weights).read_bytes() == before


def test_output_that_is_a_directory_is_refused(tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    target = tmp_path / "out.onnx"
    target.mkdir()
    with pytest.raises(OutputPathError):
        convert(source, target, ConvertOptions(framework="onnx"))
    assert folder_listing(target) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_existing_output_survives_a_failed_conversion(fmt, tmp_path, run_cli):
    source, extra = write_source(tmp_path / "src", fmt)
    source.write_bytes(source.read_bytes()[: len(source.read_bytes()) // 3])  # now broken
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    output = out_dir / "model.nhwc.onnx"
    output.write_bytes(b"the previous, good conversion")
    result = run_cli("convert", source, "-o", output, *extra)
    assert result.exit_code in (EXIT_INVALID, EXIT_UNREADABLE), result.stderr
    assert output.read_bytes() == b"the previous, good conversion"
    assert folder_listing(out_dir) == ["model.nhwc.onnx"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_existing_output_is_replaced_on_success(fmt, tmp_path, run_cli):
    source, extra = write_source(tmp_path / "src", fmt)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    output = out_dir / "model.nhwc.onnx"
    output.write_bytes(b"stale")
    os.chmod(output, 0o640)
    result = run_cli("convert", source, "-o", output, *extra)
    assert result.exit_code == 0, result.stderr
    model = onnx.load(str(output))
    assert any(n.domain == "nhwc" for n in model.graph.node)
    assert folder_listing(out_dir) == ["model.nhwc.onnx"]
    assert output.stat().st_mode & 0o777 == 0o640  # the replaced file keeps its mode


def test_the_old_output_stays_whole_until_the_final_rename(tmp_path, monkeypatch):
    """Atomic replacement: the only write to the final path is one os.replace of a complete
    temp file from the same folder (same file system), after which nothing else touches it."""
    source, _ = write_source(tmp_path / "src", "onnx")
    output = tmp_path / "out" / "model.nhwc.onnx"
    output.parent.mkdir()
    output.write_bytes(b"old")
    replaced = []
    real_replace = os.replace

    def watching_replace(src, dst):
        assert output.read_bytes() == b"old", "the output was modified before the rename"
        assert os.path.dirname(os.fspath(src)) == os.fspath(output.parent)
        onnx.load(os.fspath(src))  # the temp file is a complete model
        replaced.append((os.fspath(src), os.fspath(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", watching_replace)
    convert(source, output, ConvertOptions(framework="onnx"))
    assert [dst for _, dst in replaced] == [os.fspath(output)]
    assert folder_listing(output.parent) == ["model.nhwc.onnx"]


@pytest.mark.parametrize("failure", [RuntimeError, KeyboardInterrupt])
def test_interrupted_write_leaves_no_temp_file_and_keeps_the_old_output(failure, tmp_path,
                                                                         monkeypatch):
    source, _ = write_source(tmp_path / "src", "onnx")
    output = tmp_path / "out" / "model.nhwc.onnx"
    output.parent.mkdir()
    output.write_bytes(b"old")
    real_chmod = os.chmod

    def interrupted(path, mode, **kw):  # called between writing the temp file and renaming
        raise failure("interrupted")

    monkeypatch.setattr(os, "chmod", interrupted)
    with pytest.raises(failure):
        convert(source, output, ConvertOptions(framework="onnx"))
    monkeypatch.setattr(os, "chmod", real_chmod)
    assert output.read_bytes() == b"old"
    assert folder_listing(output.parent) == ["model.nhwc.onnx"]


def test_serializer_failure_before_writing_leaves_nothing(tmp_path, monkeypatch):
    source, _ = write_source(tmp_path / "src", "onnx")
    out_dir = tmp_path / "out"

    def broken(*args, **kwargs):
        raise OutputPathError("simulated serializer refusal")

    monkeypatch.setattr(writer, "build_proto", broken)
    with pytest.raises(OutputPathError):
        convert(source, out_dir / "model.nhwc.onnx", ConvertOptions(framework="onnx"))
    assert not out_dir.exists() or folder_listing(out_dir) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_failed_cli_conversion_leaves_the_folder_as_it_was(fmt, tmp_path, run_cli):
    source, extra = write_source(tmp_path / "src", fmt)
    source.write_bytes(b"")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    result = run_cli("convert", source, "-o", out_dir / "m.onnx", *extra)
    assert_clean_failure(result, result.exit_code, "", out_dir)
    assert result.exit_code in (EXIT_INVALID, EXIT_UNREADABLE)


def test_batch_mode_gives_same_named_sources_distinct_outputs(tmp_path, run_cli):
    """Several sources into one folder: same-named sources get distinct outputs, a broken source
    leaves nothing and does not stop the others."""
    first, _ = write_source(tmp_path / "a", "onnx")
    second, _ = write_source(tmp_path / "b", "onnx")
    broken = tmp_path / "b" / "broken.onnx"
    broken.write_bytes(second.read_bytes()[:100])
    out_dir = tmp_path / "out"
    result = run_cli("convert", first, second, broken, "--output-dir", out_dir)
    assert result.exit_code == EXIT_UNREADABLE  # the broken one
    assert "Traceback" not in result.output + result.stderr
    assert folder_listing(out_dir) == ["model.onnx", "model_1.onnx"]
    for name in ("model.onnx", "model_1.onnx"):
        assert any(n.domain == "nhwc" for n in onnx.load(str(out_dir / name)).graph.node)
